"""``nbjax.scipy.signal``: convolutions, detrending and spectral estimates, as
``jax.scipy.signal``.

The full convolution of arrays of shapes ``s1`` and ``s2`` has shape ``s1 + s2 - 1``; the
modes keep a window of it (``_output_window``): all of it ("full"), the centred ``s1``
("same"), or only the points where one array lies wholly inside the other ("valid"). The
direct method is one ``lax.conv_general_dilated`` (a correlation, so the kernel is flipped)
whose padding selects that window; the FFT method multiplies the transforms, which turns
convolution into a product, and slices the window out. A correlation is the convolution with
the second array flipped and conjugated. ``detrend`` and the spectral estimates (``stft``,
``istft``, ``csd``, ``welch``) are in ``signal_spectral``.
"""

import operator

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy.util import canonicalize_axis, check_arraylike, promote_dtypes_inexact
from .signal_spectral import csd, detrend, istft, stft, welch

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend",
           "fftconvolve", "istft", "stft", "welch"]

_MODES = ("full", "same", "valid")


def _output_window(mode, length1, length2):
    """``(start, length)`` of the ``mode`` output within the full convolution along an axis
    where the inputs have lengths ``length1`` and ``length2``."""
    if mode == "full":
        return 0, length1 + length2 - 1
    if mode == "same":
        return (length2 - 1) // 2, length1
    return min(length1, length2) - 1, abs(length1 - length2) + 1


def _one_contains_the_other(shape1, shape2):
    """Which array is at least as large as the other along every axis (1 or 2; 1 when they
    are the same shape), or None when neither is."""
    if all(a >= b for a, b in zip(shape1, shape2)):
        return 1
    if all(a <= b for a, b in zip(shape1, shape2)):
        return 2
    return None


# --- direct convolution ----------------------------------------------------------------------

def _convolve_direct(in1, in2, mode, precision, output_window=_output_window):
    """The ``mode`` convolution of equal-rank arrays as one ``conv_general_dilated``: the
    larger array is the image, the smaller (flipped) the kernel; with padding ``(low,
    high)`` the correlation's output ``i`` is the full convolution's ``i + (m - 1) - low``
    (``m`` the kernel's length), so ``low`` and ``high`` select ``output_window``."""
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 must have the same number of dimensions")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes "
                         f"{in1.shape} and {in2.shape}.")
    larger = _one_contains_the_other(in1.shape, in2.shape)
    if larger is None:
        raise ValueError("One input must be smaller than the other in every dimension.")
    image, kernel = (in1, in2) if larger == 1 else (in2, in1)
    padding = []
    for n1, n2, n, m in zip(in1.shape, in2.shape, image.shape, kernel.shape):
        start, length = output_window(mode, n1, n2)
        low = m - 1 - start
        padding.append((low, length - (n - m + 1) - low))
    out = lax.conv_general_dilated(image[None, None], jnp.flip(kernel)[None, None],
                                   (1,) * image.ndim, padding, precision=precision)
    return out[0, 0]


def _inexact_arrays(name, in1, in2):
    check_arraylike(name, in1, in2)
    return promote_dtypes_inexact(jnp.asarray(in1), jnp.asarray(in2))


def _check_method(method):
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"Got {method=}; expected 'auto', 'fft', or 'direct'.")


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional convolution of ``in1`` and ``in2`` (of equal rank), by
    ``conv_general_dilated`` (``method`` "auto" or "direct") or by FFTs ("fft")."""
    _check_method(method)
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    return _convolve_direct(*_inexact_arrays("convolve", in1, in2), mode, precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional cross-correlation ``z[k] = sum_l in1[l + k] conj(in2[l])`` (indices
    shifted by the ``mode``): the convolution with ``in2`` flipped and conjugated."""
    in1, in2 = _inexact_arrays("correlate", in1, in2)
    return convolve(in1, jnp.flip(jnp.conj(in2)), mode, method, precision)


def _check_2d(name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """``convolve`` of two 2-D arrays (zero padding only: ``boundary="fill"``,
    ``fillvalue=0``)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return convolve(in1, in2, mode, "direct", precision)


def _correlate2d_window(mode, length1, length2):
    """``_output_window``, but SciPy's 2-D correlation centres "same" at ``length2 // 2``."""
    if mode == "same":
        return length2 // 2, length1
    return _output_window(mode, length1, length2)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The cross-correlation of two 2-D arrays (zero padding only: ``boundary="fill"``,
    ``fillvalue=0``), with ``scipy.signal.correlate2d``'s conventions: "same" is centred
    half a sample off ``correlate``'s for an even ``in2``, and "valid" with the larger
    array second is conjugated."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = _inexact_arrays("correlate2d", in1, in2)
    out = _convolve_direct(in1, jnp.flip(jnp.conj(in2)), mode, precision, _correlate2d_window)
    if mode == "valid" and _one_contains_the_other(in1.shape, in2.shape) == 2:
        out = jnp.conj(out)
    return out


# --- convolution by FFT ----------------------------------------------------------------------

def _conv_axes(axes, in1, in2):
    """The convolved axes (all by default), after checking that the others match."""
    if axes is None:
        return tuple(range(in1.ndim))
    axes = (axes,) if np.ndim(axes) == 0 else tuple(axes)
    axes = tuple(canonicalize_axis(operator.index(a), in1.ndim) for a in axes)
    if any(in1.shape[i] != in2.shape[i] for i in range(in1.ndim) if i not in axes):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} "
                         f"in2.shape={in2.shape} axes={axes}")
    return axes


def fftconvolve(in1, in2, mode="full", axes=None):
    """The convolution of ``in1`` and ``in2`` over ``axes`` (default all; on the others the
    arrays must agree), as the inverse FFT of the product of their FFTs."""
    in1, in2 = _inexact_arrays("fftconvolve", in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode not in _MODES:
        raise ValueError("mode must be one of ['same', 'full', 'valid']")
    axes = _conv_axes(axes, in1, in2)
    shape1, shape2 = ([x.shape[a] for a in axes] for x in (in1, in2))
    if mode == "valid" and _one_contains_the_other(shape1, shape2) is None:
        raise ValueError("For 'valid' mode, One input must be at least as large as the "
                         "other in every dimension.")
    full = [n1 + n2 - 1 for n1, n2 in zip(shape1, shape2)]
    if all(n1 == 1 or n2 == 1 for n1, n2 in zip(shape1, shape2)):
        conv = in1 * in2  # a length-1 operand on every axis: the convolution is a product
    else:
        forward, inverse = ((jnp.fft.fftn, jnp.fft.ifftn) if jnp.iscomplexobj(in1) else
                            (jnp.fft.rfftn, jnp.fft.irfftn))
        conv = inverse(forward(in1, full, axes) * forward(in2, full, axes), full, axes)
    starts, limits = [0] * conv.ndim, list(conv.shape)
    for axis, n1, n2 in zip(axes, shape1, shape2):
        start, length = _output_window(mode, n1, n2)
        starts[axis], limits[axis] = start, start + length
    return lax.slice(conv, starts, limits)

"""``nbjax.numpy.fft``: NumPy's FFT functions on top of the ``fft`` primitive.

Every transform is one ``_fft_core`` call: move the transformed axes to the end (the
primitive transforms trailing axes), crop or zero-pad them to the requested lengths, apply
the primitive, scale for ``norm``, and move the axes back. ``hfft``/``ihfft`` are IRFFT/RFFT
of a conjugate, rescaled; the frequency helpers are arithmetic on ``arange``.
"""

import math
import operator

import numpy as np

from .. import lax
from ..core import dtypes, get_aval
from ..lax.fft import FftType, fft as _lax_fft
from ..lax.standard import scalar_like
from .creation import arange
from .manipulation import moveaxis, roll
from .ufuncs import conj, true_divide
from .util import canonicalize_axis, check_arraylike, to_array

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _norm_scale(func_name, norm, lengths):
    """The factor that turns the primitive's result (unscaled forward, 1/N inverse) into
    ``norm``'s: "backward" is the primitive's own; "ortho" is 1/sqrt(N) both ways;
    "forward" puts 1/N on the forward transform instead."""
    if norm not in (None, "backward", "ortho", "forward"):
        raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or '
                         '"forward".')
    n = math.prod(lengths)
    if norm in (None, "backward") or n == 0:  # nothing to scale in an empty result
        return 1.0
    scale = math.sqrt(n) if norm == "ortho" else n
    return scale if func_name.startswith("i") else 1 / scale


def _fft_core(func_name, fft_type, a, s, axes, norm):
    full_name = f"jax.numpy.fft.{func_name}"
    check_arraylike(full_name, a)
    arr = to_array(a)
    ndim = arr.ndim
    if s is not None:
        s = tuple(operator.index(n) for n in s)
        if any(n <= 0 for n in s):
            raise ValueError("Shape should be positive.")
        if axes is not None and len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    if axes is None:
        if s is not None and len(s) > ndim:
            raise ValueError(f"FFT input shape {arr.shape} must have at least as many input "
                             f"dimensions as fft_lengths {s}.")
        axes = range(ndim) if s is None else range(ndim - len(s), ndim)
    _check_unrepeated(full_name, axes)  # as written first, as JAX; then once in range
    axes = tuple(canonicalize_axis(ax, ndim) for ax in axes)
    _check_unrepeated(full_name, axes)
    trailing = tuple(range(ndim - len(axes), ndim))
    arr = _moveaxes(arr, axes, trailing)

    if s is None:
        s = tuple(arr.shape[ax] for ax in trailing)
        if fft_type == FftType.IRFFT and s:  # a half spectrum of m entries: 2(m-1) samples
            s = s[:-1] + (max(0, 2 * (s[-1] - 1)),)
    arr = _crop_or_pad(arr, fft_type, s)
    out = _lax_fft(arr, fft_type, s)
    scale = _norm_scale(func_name, norm, s)
    if scale != 1.0:
        out = lax.mul(out, scalar_like(out, scale))
    return _moveaxes(out, trailing, axes)


def _check_unrepeated(full_name, axes):
    if len(set(axes)) != len(axes):
        raise ValueError(f"{full_name} does not support repeated axes. Got axes {axes}.")


def _moveaxes(x, source, destination):
    return moveaxis(x, source, destination) if source != destination else x


def _crop_or_pad(arr, fft_type, s):
    """Crop or zero-pad the trailing axes to the lengths the transform reads: ``s``, but
    ``s[-1] // 2 + 1`` on the last axis of an IRFFT (its input is a half spectrum)."""
    if not s:
        return arr
    want = list(s)
    if fft_type == FftType.IRFFT:
        want[-1] = want[-1] // 2 + 1
    lead = arr.ndim - len(want)
    config = [(0, 0, 0)] * lead + [(0, n - arr.shape[lead + i], 0) for i, n in enumerate(want)]
    if all(hi == 0 for _, hi, _ in config):
        return arr
    return lax.pad(arr, lax.convert_element_type(0, arr.dtype), config)


def _check_1d_axis(func_name, axis):
    if isinstance(axis, (list, tuple)):
        full_name = f"jax.numpy.fft.{func_name}"
        raise ValueError(f"{full_name} does not support multiple axes. Please use "
                         f"{full_name}n. Got axis = {axis!r}.")


def _fft_core_1d(func_name, fft_type, a, n, axis, norm):
    _check_1d_axis(func_name, axis)
    return _fft_core(func_name, fft_type, a, None if n is None else [n],
                     None if axis is None else [axis], norm)


def _fft_core_2d(func_name, fft_type, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{func_name} only supports 2 axes. "
                         f"Got axes = {axes!r}.")
    return _fft_core(func_name, fft_type, a, s, axes, norm)


# --- one axis ------------------------------------------------------------------------------

def fft(a, n=None, axis=-1, norm=None):
    """The one-dimensional discrete Fourier transform (``numpy.fft.fft``)."""
    return _fft_core_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The one-dimensional inverse discrete Fourier transform (``numpy.fft.ifft``)."""
    return _fft_core_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The transform of a real signal: frequencies ``0 .. n // 2`` (``numpy.fft.rfft``)."""
    return _fft_core_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The real signal of a half spectrum (``numpy.fft.irfft``); ``n`` defaults to
    ``2 * (m - 1)`` for ``m`` input frequencies."""
    return _fft_core_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def _axis_length(a, axis):
    shape = get_aval(to_array(a)).shape
    return shape[canonicalize_axis(axis, len(shape))]


def hfft(a, n=None, axis=-1, norm=None):
    """The (real) transform of a signal with a Hermitian-symmetric spectrum, given by its
    first half (``numpy.fft.hfft``): the IRFFT of its conjugate, times n."""
    _check_1d_axis("hfft", axis)
    check_arraylike("jax.numpy.fft.hfft", a)
    nn = 2 * (_axis_length(a, axis) - 1) if n is None else n
    out = _fft_core_1d("hfft", FftType.IRFFT, conj(a), n, axis, norm)
    return lax.mul(out, scalar_like(out, nn))


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``hfft`` (``numpy.fft.ihfft``): the conjugated RFFT, over n."""
    _check_1d_axis("ihfft", axis)
    check_arraylike("jax.numpy.fft.ihfft", a)
    nn = _axis_length(a, axis) if n is None else n
    out = _fft_core_1d("ihfft", FftType.RFFT, a, n, axis, norm)
    out = conj(out)
    return lax.mul(out, scalar_like(out, 1 / nn))


# --- two and n axes ------------------------------------------------------------------------

def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional discrete Fourier transform (``numpy.fft.fft2``)."""
    return _fft_core_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional inverse transform (``numpy.fft.ifft2``)."""
    return _fft_core_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional transform of a real signal (``numpy.fft.rfft2``)."""
    return _fft_core_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``rfft2`` (``numpy.fft.irfft2``)."""
    return _fft_core_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


def fftn(a, s=None, axes=None, norm=None):
    """The n-dimensional discrete Fourier transform (``numpy.fft.fftn``); without ``axes``,
    over the last ``len(s)`` axes, or all of them."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The n-dimensional inverse transform (``numpy.fft.ifftn``)."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The n-dimensional transform of a real signal, halved along the last of ``axes``
    (``numpy.fft.rfftn``)."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of ``rfftn`` (``numpy.fft.irfftn``)."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


# --- frequencies and shifts ----------------------------------------------------------------

def _check_freq_args(func_name, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{func_name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{func_name} only takes a single "
                         f"value. Got d = {list(d)}.")


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point transform, ``[0, 1, ..., -1] / (d n)``
    (``numpy.fft.fftfreq``), computed in floating point and cast to ``dtype``."""
    _check_freq_args("fftfreq", n, d)
    out_dtype = dtypes.canonicalize(dtype or dtypes.default_float())
    dtype = np.finfo(out_dtype if dtypes.is_inexact(out_dtype) else dtypes.default_float()).dtype
    k = arange(n, dtype=dtype, device=device)
    # Indices from n // 2 + (n % 2) on stand for negative frequencies: k - n.
    k = lax.select(lax.ge(k, scalar_like(k, (n + 1) // 2)), lax.sub(k, scalar_like(k, n)), k)
    return lax.convert_element_type(lax.div(k, _as(d * n, dtype)), out_dtype)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The non-negative sample frequencies of an n-point real transform,
    ``[0, 1, ..., n // 2] / (d n)`` (``numpy.fft.rfftfreq``)."""
    _check_freq_args("rfftfreq", n, d)
    dtype = dtypes.canonicalize(dtype or dtypes.default_float())
    k = arange(0, n // 2 + 1, dtype=dtype, device=device)
    return true_divide(k, _as(d * n, dtype))  # integer dtypes give floats, as in JAX


def _as(value, dtype):
    """A (strong) rank-0 array of ``dtype`` holding ``value`` (a scalar or an array)."""
    return lax.convert_element_type(to_array(value), dtype)


def _shifts(x, axes, sign):
    shape = get_aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
    if isinstance(axes, int):
        return sign * (shape[axes] // 2), axes
    return [sign * (shape[ax] // 2) for ax in axes], axes


def fftshift(x, axes=None):
    """Move the zero frequency to the centre (``numpy.fft.fftshift``): roll each axis by
    half its length."""
    check_arraylike("fftshift", x)
    x = to_array(x)
    shift, axes = _shifts(x, axes, 1)
    return roll(x, shift, axes)


def ifftshift(x, axes=None):
    """Undo ``fftshift`` (``numpy.fft.ifftshift``): roll back by half of each length."""
    check_arraylike("ifftshift", x)
    x = to_array(x)
    shift, axes = _shifts(x, axes, -1)
    return roll(x, shift, axes)

"""``nbjax.scipy.fft``: the discrete cosine transform of type II and its inverse, as
``jax.scipy.fft`` (which provides type II only).

The DCT-II of ``N`` samples, ``X[k] = 2 sum_n x[n] cos(pi k (2n + 1) / 2N)``, takes one
complex FFT of length ``N`` (Makhoul, 1980): reorder the samples as the even-indexed ones
followed by the odd-indexed ones reversed, ``v = [x0, x2, x4, ..., x5, x3, x1]``; then each
cosine is the real part of an FFT exponential turned by a quarter sample,
``X[k] = 2 Re(exp(-i pi k / 2N) V[k])`` with ``V = fft(v)``. The inverse undoes the steps in
reverse order: turn back, inverse FFT, take the real part, undo the reordering. A complex
input is transformed as its real and imaginary parts (the transform is real and linear); a
transform over several axes is one axis after the other (it is separable).
"""

import operator

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy.util import canonicalize_axes, canonicalize_axis, check_arraylike, \
    promote_dtypes_inexact

__all__ = ["dct", "dctn", "idct", "idctn"]


def _check(name, x, type, norm):
    """The input as an inexact array, after JAX's checks of the arguments."""
    check_arraylike(name, x)
    if type != 2:
        raise NotImplementedError("Only DCT type 2 is implemented.")
    if norm not in (None, "backward", "ortho"):
        raise ValueError(f"jax.scipy.fft.{name}: {norm=!r} is not implemented")
    x, = promote_dtypes_inexact(x)
    return x


def _resized(x, n, axis):
    """``x`` cropped or zero-padded to ``n`` samples along ``axis`` (None: as it is)."""
    if n is None:
        return x
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")
    config = [(0, n - size if a == axis else 0, 0) for a, size in enumerate(x.shape)]
    return lax.pad(x, lax.convert_element_type(0, x.dtype), config)


def _even_then_odd_reversed(n):
    """The positions of ``v = [x0, x2, x4, ..., x5, x3, x1]`` in ``x``."""
    return np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)[::-1]])


def _along(values, axis, ndim, dtype):
    """The host array ``values`` (one per position along ``axis``) as a constant that
    broadcasts against an array of rank ``ndim`` along ``axis``."""
    shape = [1] * ndim
    shape[axis] = len(values)
    return jnp.asarray(np.reshape(values, shape), dtype)


def _ortho_factors(n):
    """What turns the unnormalized DCT-II into the orthonormal one: ``1 / sqrt(4N)`` for the
    constant term, ``1 / sqrt(2N)`` for the others."""
    factors = np.full(n, 1 / np.sqrt(2 * n))
    factors[0] = 1 / np.sqrt(4 * n)
    return factors


def _dct_axis(x, n, axis, norm):
    x = _resized(x, n, axis)
    size = x.shape[axis]
    spectrum = jnp.fft.fft(jnp.take(x, _even_then_odd_reversed(size), axis=axis), axis=axis)
    k = np.arange(size)
    twiddle = 2 * np.exp(-0.5j * np.pi * k / size)
    if norm == "ortho":
        twiddle = twiddle * _ortho_factors(size)
    return jnp.real(spectrum * _along(twiddle, axis, x.ndim, spectrum.dtype))


def _idct_axis(x, n, axis, norm):
    x = _resized(x, n, axis)
    size = x.shape[axis]
    k = np.arange(size)
    # x[n] = (X[0] / 2 + sum_{k>0} X[k] cos(pi k (2n + 1) / 2N)) / N, where the inverse FFT
    # gives the sum and the 1 / N.
    twiddle = np.where(k == 0, 0.5, 1.0) * np.exp(0.5j * np.pi * k / size)
    if norm == "ortho":
        twiddle = twiddle / _ortho_factors(size)
    complex_dtype = np.result_type(x.dtype, np.complex64)
    reordered = jnp.real(jnp.fft.ifft(x * _along(twiddle, axis, x.ndim, complex_dtype),
                                      axis=axis))
    return jnp.take(reordered, np.argsort(_even_then_odd_reversed(size)), axis=axis)


def _real_and_imaginary(transform, x, *args):
    """``transform`` of a real ``x``; of a complex one, of its two parts."""
    if jnp.iscomplexobj(x):
        return lax.complex(transform(jnp.real(x), *args), transform(jnp.imag(x), *args))
    return transform(x, *args)


def _lengths_and_axes(x, s, axes):
    """``dctn``'s ``(lengths, axes)``: the last ``len(s)`` axes by default, or all of them."""
    if s is not None:
        s = [operator.index(s)] if np.ndim(s) == 0 else list(s)
        if len(s) > x.ndim:
            raise ValueError(f"s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(x.ndim - (x.ndim if s is None else len(s)), x.ndim))
    else:
        axes = (canonicalize_axis(axes, x.ndim),) if np.ndim(axes) == 0 else \
            tuple(canonicalize_axis(a, x.ndim) for a in axes)
        canonicalize_axes(axes, x.ndim)  # raises on a repeated axis
    if s is not None and len(s) != len(axes):
        raise ValueError(f"s and axes must have the same length, got s={s} and axes={axes}")
    return [None] * len(axes) if s is None else s, axes


def _each_axis(x, transform, lengths, axes, norm):
    for n, axis in zip(lengths, axes):
        x = transform(x, n, axis, norm)
    return x


def dct(x, type=2, n=None, axis=-1, norm=None):
    """The discrete cosine transform (type II) along ``axis``, of ``x`` cropped or
    zero-padded to ``n`` samples; ``norm="ortho"`` makes it orthonormal."""
    x = _check("dct", x, type, norm)
    return _real_and_imaginary(_dct_axis, x, n, canonicalize_axis(axis, x.ndim), norm)


def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of ``dct`` (with the same ``norm``): a DCT of type III, scaled."""
    x = _check("idct", x, type, norm)
    return _real_and_imaginary(_idct_axis, x, n, canonicalize_axis(axis, x.ndim), norm)


def dctn(x, type=2, s=None, axes=None, norm=None):
    """The discrete cosine transform (type II) over ``axes``, with lengths ``s``."""
    x = _check("dctn", x, type, norm)
    lengths, axes = _lengths_and_axes(x, s, axes)
    return _real_and_imaginary(_each_axis, x, _dct_axis, lengths, axes, norm)


def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of ``dctn`` (with the same ``norm``)."""
    x = _check("idctn", x, type, norm)
    lengths, axes = _lengths_and_axes(x, s, axes)
    return _real_and_imaginary(_each_axis, x, _idct_axis, lengths, axes, norm)

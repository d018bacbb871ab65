"""The ``fft`` primitive: discrete Fourier transforms over an array's trailing axes.

``fft(x, fft_type, fft_lengths)`` transforms the last ``len(fft_lengths)`` axes of ``x``, as
XLA's FFT does; every leading axis is a batch axis, which makes vmap free. Four types:

- ``FFT`` / ``IFFT``: complex to complex, forward / inverse (the inverse divides by N);
- ``RFFT``: real to complex, keeping only the ``n // 2 + 1`` non-redundant frequencies of the
  last axis (the others are their complex conjugates, since the input is real);
- ``IRFFT``: the inverse of RFFT: a half spectrum back to a real signal of ``fft_lengths``.

All four are linear, so the JVP applies the primitive to the tangent. Their transposes are
FFTs too: the DFT matrix is symmetric, so FFT and IFFT are their own transposes; RFFT and
IRFFT transpose into each other, weighted because the half spectrum stands for a full one
(see ``_hermitian_counts``).
"""

import enum
import math
import operator

import numpy as np

from ..core import Array, Primitive, ShapedArray, dtypes, get_aval
from ..interpreters import ad
from .elementwise import conj, convert_element_type, mul
from .shapes import moveaxis
from .standard import array_module_lowering, library_lowering

__all__ = ["FftType", "fft", "fft_p"]


class FftType(enum.IntEnum):
    """Which transform ``fft`` computes (printed as its number, as in JAX's jaxprs)."""
    FFT = 0  # complex -> complex, forward
    IFFT = 1  # complex -> complex, inverse
    RFFT = 2  # real -> complex (half spectrum), forward
    IRFFT = 3  # complex (half spectrum) -> real, inverse


def _fft_type(fft_type):
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str):
        try:
            return FftType[fft_type.upper()]
        except KeyError:
            raise ValueError(f"Unknown FFT type '{fft_type}'") from None
    raise TypeError(f"Unknown FFT type value '{fft_type}'")


def _complex_dtype(dtype):
    """complex64 for float32 / complex64 (and narrower), complex128 for 64-bit types."""
    return np.result_type(dtype, np.complex64)


def _real_dtype(dtype):
    return np.finfo(dtype).dtype


def fft(x, fft_type, fft_lengths):
    """The discrete Fourier transform of ``x``'s last ``len(fft_lengths)`` axes.

    ``fft_type`` is an ``FftType`` or its name (``"fft"``, ``"irfft"``...). The input is first
    converted as JAX does: to complex for FFT, IFFT and IRFFT; to floating for RFFT, which
    rejects complex input.
    """
    fft_type = _fft_type(fft_type)
    fft_lengths = tuple(operator.index(n) for n in fft_lengths)
    dtype = get_aval(x).dtype
    if fft_type == FftType.RFFT:
        if dtypes.is_complex(dtype):
            raise ValueError("only real valued inputs supported for rfft")
        x = convert_element_type(x, dtypes.to_inexact(dtype))
    else:
        x = convert_element_type(x, _complex_dtype(dtypes.to_inexact(dtype)))
    if not fft_lengths:
        return x  # a transform over no axes is the identity
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths)


fft_p = Primitive("fft")


@fft_p.def_abstract_eval
def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    # JAX raises ValueError (not TypeError) for every bad fft operand; so do we.
    k = len(fft_lengths)
    if k > x.ndim:
        raise ValueError(f"FFT input shape {x.shape} must have at least as many input "
                         f"dimensions as fft_lengths {fft_lengths}.")
    batch, minor = x.shape[:x.ndim - k], x.shape[x.ndim - k:]
    if fft_type == FftType.RFFT:
        if x.dtype not in (dtypes.float32, dtypes.float64):
            raise ValueError(f"RFFT input must be float32 or float64, got {x.dtype}")
        if minor != fft_lengths:
            raise ValueError(f"RFFT input shape {x.shape} minor dimensions must be equal to "
                             f"fft_lengths {fft_lengths}")
        shape = batch + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        return ShapedArray(shape, _complex_dtype(x.dtype))
    if not dtypes.is_complex(x.dtype):
        raise ValueError(f"{fft_type.name} input must be complex64 or complex128, "
                         f"got {x.dtype}")
    if fft_type == FftType.IRFFT:
        if minor[:-1] != fft_lengths[:-1]:
            raise ValueError(f"IRFFT input shape {x.shape} minor dimensions must be equal to "
                             f"all except the last fft_length, got fft_lengths={fft_lengths}")
        return ShapedArray(batch + fft_lengths, _real_dtype(x.dtype))
    if minor != fft_lengths:
        raise ValueError(f"FFT input shape {x.shape} minor dimensions must be equal to "
                         f"fft_lengths {fft_lengths}")
    return ShapedArray(x.shape, x.dtype)


# The array module's transform for each type (``xp.fft``'s, NumPy's or CuPy's); all take the
# lengths ``s`` and the ``axes``; SciPy's of one axis (a batch of 1-D transforms) ``n``.
_FFT_FUNCTIONS = {FftType.FFT: "fftn", FftType.IFFT: "ifftn", FftType.RFFT: "rfftn",
                  FftType.IRFFT: "irfftn"}
_FFT_1D = {FftType.FFT: "fft", FftType.IFFT: "ifft", FftType.RFFT: "rfft",
           FftType.IRFFT: "irfft"}

# SciPy transforms a batch on every core from this many elements (its threads start per
# call, ~50 us: 64 rows of 256 took 59 us with two, 22 with one; 256 rows of 4096 0.87 ms
# with two, 1.55 with one).
THREADED_FFT_MIN = 2 ** 18


def _fft_with(xp, x, *, fft_type, fft_lengths):
    """The transform by the array module ``xp``'s FFT functions (``_scipy_fft``: SciPy's
    for NumPy arrays here; its ``"array module"`` lowering, for a target keeping arrays on
    a device: CuPy's, cuFFT)."""
    out = _fft_abstract_eval(ShapedArray(x.shape, x.dtype), fft_type=fft_type,
                             fft_lengths=fft_lengths)
    if x.size == 0 or math.prod(out.shape) == 0:
        return xp.zeros(out.shape, out.dtype)  # NumPy refuses transforms of length 0
    # float32/complex64 are transformed in single precision, as XLA does.
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    out_values = _scipy_fft(x, fft_type, fft_lengths, axes) if xp is np else \
        getattr(xp.fft, _FFT_FUNCTIONS[fft_type])(x, s=fft_lengths, axes=axes)
    return out_values.astype(out.dtype, copy=False)


def _scipy_fft(x, fft_type, fft_lengths, axes):
    """The transform by ``scipy.fft`` (pocketfft, in C++: a real FFT of 64 x 4096 float32
    took 0.43 ms where ``numpy.fft`` took 2.5, a complex one 1.3 where it took 4.6): by its
    1-D function for one axis (10% faster than the n-dimensional one with ``s``, 40% on
    two cores), on every core for a large batch (``THREADED_FFT_MIN``)."""
    import scipy.fft  # (imported when first needed: it takes a while)
    workers = -1 if x.size >= THREADED_FFT_MIN and x.size > x.shape[-1] else 1
    if len(fft_lengths) == 1:
        transform = getattr(scipy.fft, _FFT_1D[fft_type])
        return transform(x, n=fft_lengths[0], axis=-1, workers=workers)
    transform = getattr(scipy.fft, _FFT_FUNCTIONS[fft_type])
    return transform(x, s=fft_lengths, axes=axes, workers=workers)


array_module_lowering(fft_p, _fft_with)
library_lowering(fft_p, "fft")


# --- transposition -------------------------------------------------------------------------

def _hermitian_counts(n):
    """How many frequencies of a length-``n`` spectrum each entry of its half stands for.

    A real signal's spectrum is conjugate-symmetric, so RFFT keeps only the frequencies
    ``0 .. n // 2`` of the last axis. Each kept frequency ``k`` also stands for its mirror
    ``n - k``, except 0 and, for even ``n``, ``n / 2``, which are their own mirrors.
    """
    counts = np.full(n // 2 + 1, 2.0)
    counts[0] = 1.0
    if n % 2 == 0:
        counts[-1] = 1.0
    return counts


def _along_last_axis(values, dtype, ndim):
    """A constant that multiplies the last axis of a rank-``ndim`` array by ``values``."""
    return Array(values.astype(dtype).reshape((1,) * (ndim - 1) + (-1,)))


def _rfft_transpose(ct, fft_lengths):
    """RFFT's cotangent, ``Re(sum_k ct_k e^{-2 pi i jk/n})`` over the half spectrum, is an
    IRFFT of ``conj(ct)`` once IRFFT's own weights (the counts) and its ``1/N`` are undone."""
    n_total = math.prod(fft_lengths)
    weights = _along_last_axis(n_total / _hermitian_counts(fft_lengths[-1]),
                               ct.dtype, ct.ndim)
    return fft_p.bind(mul(conj(ct), weights), fft_type=FftType.IRFFT,
                      fft_lengths=fft_lengths)


def _irfft_transpose(ct, fft_lengths):
    """IRFFT sums each half-spectrum entry, counted once or twice, into the signal, over N:
    its transpose is the conjugated RFFT of the cotangent, weighted by the counts over N."""
    spectrum = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
    weights = _along_last_axis(_hermitian_counts(fft_lengths[-1]) / math.prod(fft_lengths),
                               spectrum.dtype, spectrum.ndim)
    return conj(mul(spectrum, weights))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    # The DFT matrix (and its inverse) is symmetric: the transpose is the same transform.
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


ad.deflinear(fft_p, _fft_transpose)


# --- batching ------------------------------------------------------------------------------

@fft_p.def_batch
def _fft_batch(axis_data, vals, dims, *, fft_type, fft_lengths):
    """Leading axes are batch axes already: a batch axis there stays where it is; one among
    the transformed axes moves to the front."""
    (x,), (bdim,) = vals, dims
    if bdim >= get_aval(x).ndim - len(fft_lengths):
        x, bdim = moveaxis(x, bdim, 0), 0
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), bdim

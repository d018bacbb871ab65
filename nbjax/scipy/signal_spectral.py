"""Detrending and the spectral estimates of ``nbjax.scipy.signal``: ``detrend``, ``stft``,
``istft``, ``csd`` and ``welch``, as ``jax.scipy.signal``.

The estimates cut a signal into segments of ``nperseg`` samples, each starting
``nperseg - noverlap`` samples after the previous one, and work with the FFT of each
segment, detrended and multiplied by a window:

- ``stft`` returns those FFTs, one column per segment;
- ``csd`` averages the products ``conj(X) Y`` of two signals' segment FFTs over the
  segments (Welch's method), scaled to a density per unit of frequency or to a power
  spectrum; ``welch`` is ``csd`` of a signal with itself;
- ``istft`` inverts ``stft``: the inverse FFT of each segment, multiplied by the window
  again, the segments added where they overlap, divided by the sum of the squared windows
  there.
"""

import functools
import operator
import warnings

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy.util import canonicalize_axis, check_arraylike, promote_dtypes_inexact
from .signal_windows import get_window

__all__ = ["csd", "detrend", "istft", "stft", "welch"]


# --- detrending ------------------------------------------------------------------------------

def _remove_line(segment):
    """``segment`` less its least-squares line along the last axis. Measured from their
    means, the samples' times ``t`` and values ``y`` make the line's slope
    ``sum(t y) / sum(t t)``, and its value at the mean time is the mean value."""
    n = segment.shape[-1]
    centred = segment - jnp.mean(segment, axis=-1, keepdims=True)
    if n == 1:
        return centred
    t = jnp.asarray(np.arange(n) - (n - 1) / 2, np.finfo(segment.dtype).dtype)
    slope = jnp.sum(centred * t, axis=-1, keepdims=True) / jnp.sum(t * t)
    return centred - slope * t


def _breakpoints(bp, n):
    """The sorted, distinct segment boundaries ``0, bp..., n``."""
    points = np.unique(np.r_[0, bp, n])
    if points[0] < 0 or points[-1] > n:
        raise ValueError("Breakpoints must be non-negative and less than length of data "
                         "along given axis.")
    return points


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """``data`` less its mean (``type="constant"``) or its least-squares line (``"linear"``)
    along ``axis``; with breakpoints ``bp``, less a separate line on each piece between
    them."""
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    check_arraylike("detrend", data)
    data, = promote_dtypes_inexact(jnp.asarray(data))
    if type == "constant":
        return data - jnp.mean(data, axis=axis, keepdims=True)
    axis = canonicalize_axis(axis, data.ndim)
    points = _breakpoints(bp, data.shape[axis])
    data = jnp.moveaxis(data, axis, -1)
    pieces = [_remove_line(data[..., start:stop]) for start, stop in zip(points, points[1:])]
    detrended = jnp.concatenate(pieces, axis=-1) if pieces else data  # no samples: no pieces
    return jnp.moveaxis(detrended, -1, axis)


def _segment_detrender(detrend_type):
    """The function applied to the segments (``(..., segments, samples)``): ``detrend`` of
    a type, the user's function (which gets the samples on the last axis, as in SciPy's
    ``welch`` and ``csd``), or nothing."""
    if isinstance(detrend_type, str):
        return functools.partial(detrend, type=detrend_type, axis=-1)
    if callable(detrend_type):
        return detrend_type
    if not detrend_type:
        return lambda d: d
    raise ValueError(f"Unsupported detrend type: {detrend_type}")


# --- the segments and their spectra -----------------------------------------------------------

def _named_or_array_window(window, nperseg, input_length, dtype):
    """``(window array, nperseg)``. A named window is made ``nperseg`` long (by default,
    and at most, the signal's length); an array window sets ``nperseg``."""
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else nperseg
        if n > input_length:
            warnings.warn(f"nperseg={n} is greater than input_length={input_length}, using "
                          f"nperseg={input_length}")
            n = input_length
        return jnp.asarray(get_window(window, n), dtype), n
    win = jnp.asarray(window, dtype)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if input_length < win.size:
        raise ValueError("window is longer than input signal")
    if nperseg is not None and nperseg != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, win.size


def _segment_starts(length, nperseg, step):
    return np.arange(0, length - nperseg + 1, step)


def _segment_positions(length, nperseg, step):
    """The positions of each segment's samples in a signal of ``length`` samples:
    ``(segments, nperseg)``."""
    return _segment_starts(length, nperseg, step)[:, None] + np.arange(nperseg)


def _segment_spectra(x, win, detrender, nperseg, step, nfft, onesided):
    """The FFTs (``nfft`` points; the half spectrum if ``onesided``) of the windowed,
    detrended segments of ``x`` along its last axis: shape ``(..., segments, frequencies)``."""
    segments = detrender(x[..., _segment_positions(x.shape[-1], nperseg, step)]) * win
    if onesided:
        return jnp.fft.rfft(jnp.real(segments), nfft)
    return jnp.fft.fft(segments, nfft)


def _odd_extension(x, n):
    """``x`` extended by ``n`` samples at each end of its last axis, point-reflected about
    its end samples (``2 x[0] - x[k]`` before the start)."""
    if n < 1:
        return x
    if n > x.shape[-1] - 1:
        raise ValueError(f"The extension length n ({n}) is too big. It must not exceed "
                         f"x.shape[axis]-1, which is {x.shape[-1] - 1}.")
    before = 2 * x[..., :1] - jnp.flip(x[..., 1:n + 1], -1)
    after = 2 * x[..., -1:] - jnp.flip(x[..., -n - 1:-1], -1)
    return jnp.concatenate([before, x, after], axis=-1)


def _padded(mode):
    def extend(x, n):
        return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode)
    return extend


# boundary -> how stft extends the signal by half a segment at each end.
_EXTENSIONS = {"even": _padded("reflect"), "odd": _odd_extension, "constant": _padded("edge"),
               "zeros": _padded("constant"), None: lambda x, n: x}


def _pad_to_whole_segments(x, nperseg, step):
    """``x`` zero-padded at the end so that its segments cover all of it."""
    missing = (-(x.shape[-1] - nperseg) % step) % nperseg
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, missing)])


def _density_scale(win, fs, scaling, mode):
    """What the squared segment FFTs are multiplied by: ``1 / (fs sum(w^2))`` makes a
    density per unit of frequency, ``1 / sum(w)^2`` a power spectrum; ``stft`` scales the
    FFTs themselves, by the square root."""
    if scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / jnp.sum(win) ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    return jnp.sqrt(scale) if mode == "stft" else scale


def _is_onesided(return_onesided, *signals):
    """Whether to keep only the non-negative frequencies: possible for real signals only."""
    if return_onesided and any(jnp.iscomplexobj(s) for s in signals):
        warnings.warn("Input data is complex, switching to return_onesided=False")
        return False
    return bool(return_onesided)


def _onesided_weights(nfft, dtype):
    """A one-sided density counts each frequency but 0 and Nyquist (even ``nfft``) twice:
    once for itself and once for its negative twin."""
    weights = np.full(nfft // 2 + 1, 2.0)
    weights[0] = 1.0
    if nfft % 2 == 0:
        weights[-1] = 1.0
    return jnp.asarray(weights, dtype)


def _segment_times(starts, nperseg, extended, fs, dtype):
    """The time of each segment's centre; after a boundary extension SciPy moves them back
    by half a segment (whatever the extension), so that the first is at 0."""
    centres = starts + nperseg / 2
    if extended:
        centres = centres - nperseg / 2
    return jnp.asarray(centres, dtype) / fs


def _signals(x, y, axis):
    """``x`` and ``y`` (``None``: ``x`` alone) as inexact arrays, with ``axis`` canonical
    and the broadcast shape of their other axes."""
    arrays = [x] if y is None else [x, y]
    check_arraylike("spectral_helper", *arrays)
    arrays = promote_dtypes_inexact(*map(jnp.asarray, arrays))
    axis = canonicalize_axis(operator.index(axis), arrays[0].ndim)
    if len({a.ndim for a in arrays}) > 1:
        raise ValueError(f"two-arguments must have the same rank ({arrays[0].ndim} vs "
                         f"{arrays[1].ndim}).")
    try:
        outer = jnp.broadcast_shapes(*(a.shape[:axis] + a.shape[axis + 1:] for a in arrays))
    except (TypeError, ValueError) as err:
        raise ValueError("x and y cannot be broadcast together.") from err
    return arrays, axis, outer


def _segment_lengths(window, nperseg, noverlap, nfft, input_length, dtype):
    """``(window array, nperseg, step between segments, nfft)``, checked."""
    if nperseg is not None:
        nperseg = operator.index(nperseg)
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg = _named_or_array_window(window, nperseg, input_length, dtype)
    noverlap = nperseg // 2 if noverlap is None else operator.index(noverlap)
    nfft = nperseg if nfft is None else operator.index(nfft)
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    return win, nperseg, nperseg - noverlap, nfft


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend_type, return_onesided,
              scaling, axis, mode, boundary=None, padded=False):
    """``(frequencies, segment times, spectra)``: the segment FFTs of ``x`` (``mode`` "stft")
    or the products ``conj(X) Y`` of those of ``x`` and ``y`` (``mode`` "psd"; ``y`` None:
    of ``x`` with itself), with the frequencies along ``axis`` and the segments last."""
    if boundary not in _EXTENSIONS:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(_EXTENSIONS)}")
    signals, axis, outer = _signals(x, y, axis)
    result_dtype = np.result_type(signals[0].dtype, np.complex64)
    freq_dtype = np.finfo(result_dtype).dtype
    if any(s.size == 0 for s in signals):
        shape = outer[:axis] + (min(s.shape[axis] for s in signals),) + outer[axis:]
        return (jnp.zeros(shape, freq_dtype),) * 2 + (jnp.zeros(shape, result_dtype),)
    win, nperseg, step, nfft = _segment_lengths(window, nperseg, noverlap, nfft,
                                                signals[0].shape[axis], signals[0].dtype)
    signals = _equal_lengths([jnp.moveaxis(s, axis, -1) for s in signals])
    signals = [_EXTENSIONS[boundary](s, nperseg // 2) for s in signals]
    if padded:
        signals = [_pad_to_whole_segments(s, nperseg, step) for s in signals]
    detrender = _segment_detrender(detrend_type)
    onesided = _is_onesided(return_onesided, *signals)
    spectra = [_segment_spectra(s, win, detrender, nperseg, step, nfft, onesided)
               for s in signals]
    result = spectra[0] if mode == "stft" else jnp.conj(spectra[0]) * spectra[-1]
    result = result * _density_scale(win, fs, scaling, mode)
    if onesided and mode == "psd":
        result = result * _onesided_weights(nfft, freq_dtype)
    result = result.astype(result_dtype)
    if y is None and mode == "psd":
        result = jnp.real(result)
    freqs = (jnp.fft.rfftfreq if onesided else jnp.fft.fftfreq)(nfft, 1 / fs, dtype=freq_dtype)
    starts = _segment_starts(signals[0].shape[-1], nperseg, step)
    time = _segment_times(starts, nperseg, boundary is not None, fs, freq_dtype)
    return freqs, time, jnp.moveaxis(result, -1, axis)


def _equal_lengths(signals):
    """The signals zero-padded at the end of their last axes to the longest one's length."""
    length = max(s.shape[-1] for s in signals)
    return [jnp.pad(s, [(0, 0)] * (s.ndim - 1) + [(0, length - s.shape[-1])]) for s in signals]


# --- the public estimates ----------------------------------------------------------------------

def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """The short-time Fourier transform ``(f, t, Zxx)``: the FFT of each windowed segment
    of ``x`` along ``axis``, frequencies ``f`` replacing that axis, segment times ``t`` in a
    new last axis."""
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary, padded)


def _median_bias(n):
    """The median of ``n`` periodograms over their mean, for Gaussian noise (Allen et al.,
    FINDCHIRP, Phys. Rev. D 85 (2012), appendix B)."""
    return 1 + sum(1 / (k + 1) - 1 / k for k in range(2, n, 2))


def _average(spectra, average):
    """The average over the last axis (the segments)."""
    if average == "mean":
        return jnp.mean(spectra, axis=-1)
    if average == "median":
        median = functools.partial(jnp.median, axis=-1)
        if jnp.iscomplexobj(spectra):
            middle = lax.complex(median(jnp.real(spectra)), median(jnp.imag(spectra)))
        else:
            middle = median(spectra)
        return middle / _median_bias(spectra.shape[-1])
    raise ValueError(f'average must be "median" or "mean", got {average}')


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1,
        average="mean"):
    """The cross power spectral density ``(f, Pxy)`` of ``x`` and ``y`` by Welch's method:
    ``conj(X) Y`` averaged over the segments. ``y=None`` is ``x`` with itself (real).
    ``nperseg`` defaults to the signal's length, as in JAX (SciPy's default is 256)."""
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd")
    if pxy.ndim >= 2 and pxy.size > 0:
        pxy = _average(pxy, average) if pxy.shape[-1] > 1 else pxy[..., 0]
    return freqs, pxy


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """The power spectral density ``(f, Pxx)`` of ``x`` by Welch's method (``csd`` of
    ``x`` with itself)."""
    freqs, pxx = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     scaling, axis, average)
    return freqs, jnp.real(pxx)


# --- the inverse STFT -------------------------------------------------------------------------

def _istft_window(window, nperseg, dtype):
    if isinstance(window, (str, tuple)):
        return jnp.asarray(get_window(window, nperseg), dtype)
    win = jnp.asarray(window)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if win.shape[0] != nperseg:
        raise ValueError(f"window must have length of {nperseg}")
    return win


def _overlap_add(frames, positions, length):
    """The sum of ``frames`` (``(..., segments, samples)``) placed at ``positions`` of a
    signal of ``length`` samples."""
    signal = jnp.zeros(frames.shape[:-2] + (length,), frames.dtype)
    return signal.at[..., positions].add(frames)


def _to_segments_last(zxx, freq_axis, time_axis):
    outer = [a for a in range(zxx.ndim) if a not in (freq_axis, time_axis)]
    return jnp.transpose(zxx, outer + [freq_axis, time_axis])


def _istft_lengths(nfreq, onesided, nperseg, noverlap, nfft):
    """``(nperseg, step between segments, nfft)`` of an STFT with ``nfreq`` frequencies,
    checked. A half spectrum of ``m`` frequencies comes from ``2 (m - 1)`` samples, or one
    more: an odd ``nperseg`` says which."""
    default_length = 2 * (nfreq - 1) if onesided else nfreq
    nperseg = default_length if nperseg is None else operator.index(nperseg)
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft = nperseg if onesided and nperseg == default_length + 1 else default_length
    nfft = operator.index(nfft)
    if nfft < nperseg:
        raise ValueError(f"FFT length ({nfft}) must be longer than nperseg ({nperseg}).")
    noverlap = nperseg // 2 if noverlap is None else operator.index(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    return nperseg, nperseg - noverlap, nfft


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """The inverse of ``stft`` with the same window and segments: ``(t, x)``."""
    check_arraylike("istft", Zxx)
    zxx, = promote_dtypes_inexact(jnp.asarray(Zxx))
    if zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis = canonicalize_axis(freq_axis, zxx.ndim)
    time_axis = canonicalize_axis(time_axis, zxx.ndim)
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    zxx = zxx.astype(np.result_type(zxx.dtype, np.complex64))
    nperseg, step, nfft = _istft_lengths(zxx.shape[freq_axis], input_onesided, nperseg,
                                         noverlap, nfft)
    zxx = _to_segments_last(zxx, freq_axis, time_axis)
    inverse = jnp.fft.irfft if input_onesided else jnp.fft.ifft
    frames = jnp.swapaxes(inverse(zxx, nfft, axis=-2)[..., :nperseg, :], -1, -2)
    win = _istft_window(window, nperseg, np.finfo(frames.dtype).dtype)
    frames = frames * jnp.sum(win) * win  # sum(win) undoes stft's "spectrum" scaling
    nseg = frames.shape[-2]
    length = step * (nseg - 1) + nperseg
    positions = _segment_positions(length, nperseg, step)
    x = _overlap_add(frames, positions, length)
    norm = _overlap_add(jnp.broadcast_to(win * win, (nseg, nperseg)), positions, length)
    if boundary:  # remove stft's extension
        half = nperseg // 2
        x, norm = x[..., half:-half], norm[..., half:-half]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != zxx.ndim - 1:
        x = jnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    time = jnp.arange(x.shape[0], dtype=np.finfo(x.dtype).dtype) / fs
    return time, x

"""nbjax.scipy.signal against scipy.signal in float64 on random inputs (odd and even lengths,
size-1 axes, complex inputs), with JAX's dtypes and errors, gradients against finite
differences, vmap against a loop, jit against eager, and JAX's own values when JAX imports."""

import warnings

import numpy as np
import pytest
import scipy.signal as ss

import nbjax
import nbjax.numpy as jnp
import nbjax.scipy.signal as S
from nbjax.scipy.signal_windows import get_window
from nbjax.test_util import check_grads
from helpers import assert_close, check_vmap, random_array

try:
    import jax
    import jax.scipy.signal as jax_signal
except ImportError:  # JAX is a test reference only
    jax = None

rng = np.random.default_rng(0)

# (shape of in1, shape of in2): either contains the other, odd and even, size-1 axes.
CONV_SHAPES = [((5,), (3,)), ((3,), (6,)), ((4,), (4,)), ((1,), (7,)), ((6,), (1,)),
               ((4, 6), (2, 3)), ((2, 3), (5, 6)), ((1, 5), (1, 2)), ((3, 1, 4), (2, 1, 3))]
MODES = ["full", "same", "valid"]


def _wide(x):
    """``x`` (float32 or complex64) as float64 or complex128, for SciPy."""
    return np.asarray(x).astype(np.result_type(np.asarray(x).dtype, np.float64))


def _pair(shapes, dtype):
    return [random_array(rng, shape, dtype) for shape in shapes]


# --- convolution and correlation ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shapes", CONV_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_convolve_and_correlate_match_scipy(name, shapes, dtype):
    a, b = _pair(shapes, dtype)
    for mode in MODES:
        want = getattr(ss, name)(_wide(a), _wide(b), mode, method="direct")
        terms = getattr(ss, name)(np.abs(_wide(a)), np.abs(_wide(b)), mode, method="direct")
        for method in ["auto", "direct", "fft"]:
            got = getattr(S, name)(a, b, mode, method)
            assert got.dtype == dtype
            # an FFT's rounding errors are relative to the largest terms, not each output's
            scale = terms if method != "fft" else terms.max()
            assert_close(got, want, rtol=1e-5, scale=scale, err_msg=f"{mode} {method}")


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shapes", [s for s in CONV_SHAPES if len(s[0]) == 2]
                         + [((3, 3), (3, 4)), ((4, 4), (4, 4)), ((5, 5), (3, 3))], ids=str)
@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
def test_2d_convolutions_match_scipy(name, shapes, dtype):
    """Including correlate2d's own conventions: "same" centred at in2's length // 2, and
    "valid" with the larger array second conjugated."""
    a, b = _pair(shapes, dtype)
    for mode in MODES:
        got = getattr(S, name)(a, b, mode)
        assert got.dtype == dtype
        assert_close(got, getattr(ss, name)(_wide(a), _wide(b), mode), rtol=1e-5,
                     scale=getattr(ss, name)(np.abs(_wide(a)), np.abs(_wide(b)), mode),
                     err_msg=mode)


@pytest.mark.parametrize("axes, shapes", [
    (1, ((3, 7, 5), (3, 4, 5))), ([0, 2], ((4, 2, 5), (3, 2, 2))), ((-1,), ((2, 8), (2, 3))),
    ([1, 0], ((2, 5), (1, 3))), (0, ((1, 4), (6, 4)))], ids=str)
def test_fftconvolve_over_axes_matches_scipy(axes, shapes):
    a, b = _pair(shapes, np.float32)
    for mode in MODES:
        if mode == "valid" and shapes == ((4, 2, 5), (3, 2, 2)):
            continue  # SciPy requires one input to contain the other along the axes
        want = ss.fftconvolve(_wide(a), _wide(b), mode, axes=axes)
        terms = ss.fftconvolve(np.abs(_wide(a)), np.abs(_wide(b)), mode, axes=axes)
        assert_close(S.fftconvolve(a, b, mode, axes=axes), want, rtol=1e-5,
                     scale=np.abs(terms).max(), err_msg=mode)


def test_fftconvolve_over_no_axes_is_a_product():
    """As in JAX (SciPy refuses empty axes): every axis is mapped, nothing convolved."""
    a, b = _pair([(2, 3), (2, 3)], np.complex64)
    assert_close(S.fftconvolve(a, b, axes=()), _wide(a) * _wide(b), rtol=1e-6)


@pytest.mark.parametrize("dtype, x64, expected", [
    (np.int32, False, np.float32), (np.bool_, False, np.float32),
    (np.float16, False, np.float16), (np.float32, False, np.float32),
    (np.complex64, False, np.complex64), (np.float64, True, np.float64),
    (np.complex128, True, np.complex128), (np.float32, True, np.float32)])
def test_convolution_dtypes_as_jax(dtype, x64, expected):
    """Inexact inputs keep their type, integers and bools become the default float."""
    with nbjax.enable_x64(x64):
        a, b = _pair([(6,), (3,)], dtype)
        for fn in [S.convolve, S.correlate, S.fftconvolve]:
            if dtype == np.float16 and fn is S.fftconvolve:
                with pytest.raises(ValueError, match="RFFT input must be float32 or float64"):
                    fn(a, b)  # as in JAX: its FFTs refuse float16
            else:
                assert fn(a, b).dtype == expected, fn.__name__
        assert S.convolve2d(a[None], b[None]).dtype == expected
        assert S.correlate2d(a[None], b[None]).dtype == expected


def test_convolution_errors_as_jax():
    a, b = jnp.ones((4, 5)), jnp.ones((2, 3))
    with pytest.raises(ValueError, match="mode must be one of"):
        S.convolve(a, b, "middle")
    with pytest.raises(ValueError, match="mode must be one of"):
        S.fftconvolve(a, b, "middle")
    with pytest.raises(ValueError, match="expected 'auto', 'fft', or 'direct'"):
        S.convolve(a, b, method="winograd")
    with pytest.raises(ValueError, match="same number of dimensions"):
        S.convolve(a, b[0])
    with pytest.raises(ValueError, match="same dimensionality"):
        S.fftconvolve(a, b[0])
    with pytest.raises(ValueError, match="zero-size"):
        S.convolve(a[:, :0], b)
    with pytest.raises(ValueError, match="smaller than the other in every dimension"):
        S.convolve(jnp.ones((1, 5)), jnp.ones((3, 1)))  # every mode, as in JAX
    with pytest.raises(ValueError, match="at least as large"):
        S.fftconvolve(jnp.ones((2, 5)), jnp.ones((3, 4)), "valid")
    with pytest.raises(ValueError, match="mapped axes must have same shape"):
        S.fftconvolve(jnp.ones((2, 5)), jnp.ones((3, 4)), axes=1)
    with pytest.raises(NotImplementedError, match="boundary='fill', fillvalue=0"):
        S.convolve2d(a, b, boundary="wrap")
    with pytest.raises(NotImplementedError, match="boundary='fill', fillvalue=0"):
        S.correlate2d(a, b, fillvalue=1.0)
    with pytest.raises(ValueError, match="2-dimensional"):
        S.convolve2d(a[0], b[0])
    with pytest.raises(TypeError, match="ndarray or scalar"):
        S.convolve([1.0, 2.0], [1.0])


def test_convolutions_differentiate():
    with nbjax.enable_x64():
        a, b = _pair([(7,), (4,)], np.float64)
        for mode in MODES:
            check_grads(lambda a, b: S.convolve(a, b, mode), (a, b), order=2)
            check_grads(lambda a, b: S.correlate(a, b, mode), (a, b), order=1)
            check_grads(lambda a, b: S.fftconvolve(a, b, mode), (a, b), order=1)
        c, d = _pair([(3, 4), (2, 2)], np.complex128)
        check_grads(lambda c, d: S.correlate2d(c, d, "same"), (c, d), order=1)


@pytest.mark.filterwarnings("ignore:nbjax cpu backend")  # complex steps: reference
def test_convolutions_vmap_like_a_loop_and_jit_like_eager():
    a, b = _pair([(3, 8), (3, 3)], np.float32)

    def fns():
        yield lambda a, b: S.convolve(a, b, "same")
        yield lambda a, b: S.correlate(a, b, "full")
        yield lambda a, b: S.fftconvolve(a, b, "valid")
        yield lambda a, b: S.correlate2d(a[None], b[None], "same")
    for fn in fns():
        check_vmap(fn, (a, b), (0, 0), rtol=1e-5, terms=fn)
        check_vmap(fn, (a, b[0]), (0, None), rtol=1e-5, terms=fn)
        assert_close(nbjax.jit(fn)(a[0], b[0]), fn(a[0], b[0]), rtol=1e-6,
                     scale=fn(np.abs(a[0]), np.abs(b[0])))


# --- detrending ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape, axis, bp", [
    ((11,), -1, 0), ((10,), 0, [3]), ((4, 9), -1, [2, 7, 8]), ((9, 3), 0, [4, 4, 9]),
    ((2, 5, 3), 1, [1, 2]), ((1,), -1, 0), ((3, 2), 1, 0)], ids=str)
def test_detrend_matches_scipy(shape, axis, bp, dtype):
    """Breakpoints included: pieces of one and two samples are all trend."""
    trend = np.arange(shape[axis]).reshape([-1 if i == axis % len(shape) else 1
                                             for i in range(len(shape))])
    x = (random_array(rng, shape, dtype) + trend).astype(dtype)
    for kind in ["linear", "constant"]:
        got = S.detrend(x, axis=axis, type=kind, bp=bp)
        assert got.dtype == dtype
        assert_close(got, ss.detrend(_wide(x), axis=axis, type=kind, bp=bp), rtol=2e-5,
                     scale=np.abs(x).max(), err_msg=kind)


def test_detrend_dtypes_and_errors_as_jax():
    assert S.detrend(np.arange(6, dtype=np.int32)).dtype == np.float32
    assert S.detrend(np.ones(6, np.float16), type="constant").dtype == np.float16
    with pytest.raises(ValueError, match="Trend type"):
        S.detrend(jnp.ones(5), type="l")
    with pytest.raises(ValueError, match="Breakpoints"):
        S.detrend(jnp.ones(5), bp=[6])
    with pytest.raises(NotImplementedError, match="overwrite_data"):
        S.detrend(jnp.ones(5), overwrite_data=True)


def test_detrend_transforms():
    x = random_array(rng, (6, 8), np.float32)
    fn = lambda x: S.detrend(x, bp=[3])  # noqa: E731
    check_vmap(fn, (x,), (0,), rtol=1e-5)
    check_vmap(fn, (x,), (1,), rtol=1e-5)
    assert_close(nbjax.jit(fn)(x), fn(x), rtol=1e-6)
    with nbjax.enable_x64():
        check_grads(fn, (x.astype(np.float64),), order=1)


# --- windows ---------------------------------------------------------------------------------

WINDOWS = ["hann", "hamming", "blackman", "nuttall", "blackmanharris", "flattop", "boxcar",
           "bartlett", "triang", "cosine", "tukey", ("tukey", 0.25), ("tukey", 1.5),
           ("tukey", 0.0), ("gaussian", 2.5), ("kaiser", 6.0), ("general_hamming", 0.6),
           ("general_cosine", (0.3, 0.4, 0.3)), "han", "rect", "tri", "blk"]


@pytest.mark.parametrize("window", WINDOWS, ids=str)
def test_windows_are_scipy_get_window(window):
    for n in [1, 2, 3, 8, 33]:
        np.testing.assert_allclose(get_window(window, n), ss.get_window(window, n),
                                   rtol=1e-13, atol=1e-15, err_msg=str(n))


def test_window_errors():
    with pytest.raises(ValueError, match="Invalid window name"):
        get_window("foo", 8)
    with pytest.raises(ValueError, match="must have parameters"):
        get_window("kaiser", 8)
    with pytest.raises(ValueError, match="does not allow parameters"):
        get_window(("hann", 3), 8)
    with pytest.raises(NotImplementedError, match="pass it as an array"):
        get_window("parzen", 8)


# --- spectral estimates ----------------------------------------------------------------------

# (signal length, nperseg, noverlap, nfft)
SEGMENTS = [(50, 16, None, None), (51, 15, 3, 20), (40, 8, 0, None), (33, 33, None, None),
            (20, 1, 0, None), (24, 7, 6, None)]
PSD_OPTIONS = [{}, {"scaling": "spectrum"}, {"detrend": "linear"}, {"detrend": False},
               {"return_onesided": False}, {"average": "median"}, {"fs": 3.0},
               {"window": "hamming"}, {"window": ("kaiser", 4.0)}]


def _segments_kwargs(nperseg, noverlap, nfft, **options):
    return dict(nperseg=nperseg, noverlap=noverlap, nfft=nfft, **options)


@pytest.mark.parametrize("segments", SEGMENTS, ids=str)
def test_welch_and_csd_match_scipy(segments):
    n, *lengths = segments
    x, y = random_array(rng, (2, n)), random_array(rng, (2, n))
    for options in PSD_OPTIONS:
        kwargs = _segments_kwargs(*lengths, **options)
        f, pxx = S.welch(x, **kwargs)
        f_ref, pxx_ref = ss.welch(_wide(x), **kwargs)
        assert f.dtype == pxx.dtype == np.float32
        assert_close(f, f_ref, rtol=1e-6, err_msg=str(options))
        power = np.mean(_wide(x) ** 2)  # the size of the terms: a detrended PSD can be ~0
        assert_close(pxx, pxx_ref, rtol=1e-4, scale=power, err_msg=str(options))
        f, pxy = S.csd(x, y, **kwargs)
        assert pxy.dtype == np.complex64
        assert_close(pxy, ss.csd(_wide(x), _wide(y), **kwargs)[1], rtol=1e-4, scale=power,
                     err_msg=str(options))


def test_welch_and_csd_along_other_axes_and_complex_and_broadcast():
    x = random_array(rng, (30, 3), np.complex64)
    with pytest.warns(UserWarning, match="complex"):
        got = S.welch(x, nperseg=8, axis=0)[1]
    assert got.dtype == np.float32
    assert_close(got, ss.welch(_wide(x), nperseg=8, axis=0)[1], rtol=1e-4)
    y = x.real
    less_mean = lambda d: d - d.mean(axis=-1, keepdims=True)  # noqa: E731 (samples last)
    got = S.welch(y, nperseg=8, axis=0, detrend=less_mean)[1]
    assert_close(got, ss.welch(_wide(y), nperseg=8, axis=0, detrend=less_mean)[1], rtol=1e-4)
    assert_close(got, S.welch(y, nperseg=8, axis=0, detrend="constant")[1], rtol=1e-5)
    a, b = random_array(rng, (2, 4, 30)), random_array(rng, (2, 4, 25))
    got = S.csd(a, b, nperseg=10, axis=-1)[1]  # b is zero-padded to a's length
    assert_close(got, ss.csd(_wide(a), _wide(b), nperseg=10, axis=-1)[1], rtol=1e-4)
    b = random_array(rng, (1, 4, 30))  # its first axis broadcasts
    got = S.csd(a, b, nperseg=3, axis=1)[1]
    assert_close(got, ss.csd(_wide(a), _wide(b), nperseg=3, axis=1)[1], rtol=1e-4)


STFT_OPTIONS = [{}, {"boundary": None}, {"boundary": "even"}, {"boundary": "odd"},
                {"boundary": "constant"}, {"padded": False}, {"return_onesided": False},
                {"detrend": "constant"}, {"window": ("tukey", 0.3)}, {"fs": 2.0}]


@pytest.mark.parametrize("segments", [s for s in SEGMENTS if s[1] > 1], ids=str)
def test_stft_matches_scipy(segments):
    n, *lengths = segments
    x = random_array(rng, (2, n))
    for options in STFT_OPTIONS:
        kwargs = _segments_kwargs(*lengths, **options)
        f, t, zxx = S.stft(x, **kwargs)
        f_ref, t_ref, zxx_ref = ss.stft(_wide(x), **kwargs)
        assert (f.dtype, t.dtype, zxx.dtype) == (np.float32, np.float32, np.complex64)
        assert_close(f, f_ref, rtol=1e-6, err_msg=str(options))
        assert_close(t, t_ref, rtol=1e-6, err_msg=str(options))
        assert_close(zxx, zxx_ref, rtol=1e-5, err_msg=str(options))


@pytest.mark.parametrize("segments", [s for s in SEGMENTS if s[1] > 1], ids=str)
def test_istft_inverts_stft_and_matches_scipy(segments):
    """Including odd segment lengths and noverlap=0 (which JAX's istft gets wrong)."""
    n, *lengths = segments
    x = random_array(rng, (2, n))
    kwargs = _segments_kwargs(*lengths)
    for onesided in [True, False]:
        zxx = ss.stft(_wide(x), return_onesided=onesided, **kwargs)[2]
        t, got = S.istft(zxx.astype(np.complex64), input_onesided=onesided, **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SciPy's "NOLA condition failed"
            t_ref, want = ss.istft(zxx, input_onesided=onesided, **kwargs)
        assert got.dtype == (np.float32 if onesided else np.complex64)
        assert_close(got, want, rtol=1e-5)
        assert_close(t, t_ref, rtol=1e-6)
    if lengths[1] is None:  # the default overlap satisfies NOLA: stft's inverse
        assert_close(S.istft(S.stft(x, **kwargs)[2], **kwargs)[1][..., :n], x, rtol=1e-5)


def test_istft_axes_match_scipy():
    zxx = random_array(rng, (5, 3, 9), np.complex64)  # (time, batch, frequency)
    got = S.istft(zxx, nperseg=16, time_axis=0, freq_axis=-1)[1]
    assert_close(got, ss.istft(_wide(zxx), nperseg=16, time_axis=0, freq_axis=-1)[1],
                 rtol=1e-5)


def test_spectral_dtypes_and_defaults():
    x = np.arange(300, dtype=np.int32) % 7
    f, pxx = S.welch(x)  # nperseg defaults to the signal's length, as in JAX
    assert (f.dtype, pxx.dtype, pxx.shape) == (np.float32, np.float32, (151,))
    with pytest.warns(UserWarning, match="nperseg=256 is greater than input_length=100"):
        f, t, zxx = S.stft(x[:100])
    assert zxx.shape == (51, 3) and zxx.dtype == np.complex64
    with nbjax.enable_x64():
        f, t, zxx = S.stft(x.astype(np.float64), nperseg=32)
        assert (f.dtype, t.dtype, zxx.dtype) == (np.float64, np.float64, np.complex128)
        assert S.istft(zxx)[1].dtype == np.float64
    assert S.welch(np.zeros(0, np.float32))[1].shape == (0,)


def test_spectral_errors_as_jax():
    x = jnp.ones(64)
    for kwargs, error, message in [
            ({"nperseg": 0}, ValueError, "nperseg must be a positive integer"),
            ({"nperseg": 16, "noverlap": 16}, ValueError, "noverlap must be less than"),
            ({"nperseg": 16, "nfft": 8}, ValueError, "nfft must be greater"),
            ({"scaling": "power"}, ValueError, "Unknown scaling"),
            ({"detrend": True}, ValueError, "Unsupported detrend type"),
            ({"window": np.ones((2, 8))}, ValueError, "window must be 1-D"),
            ({"window": np.ones(100)}, ValueError, "window is longer than input"),
            ({"window": np.ones(8), "nperseg": 16}, ValueError, "different from length"),
            ({"window": "foo"}, ValueError, "Invalid window name"),
            ({"nperseg": 16, "average": "mode"}, ValueError, "average must be")]:
        with pytest.raises(error, match=message):
            S.welch(x, **kwargs)
    with pytest.raises(ValueError, match="Unknown boundary option"):
        S.stft(x, boundary="periodic")
    with pytest.raises(ValueError, match="same rank"):
        S.csd(x, jnp.ones((2, 64)))
    with pytest.raises(ValueError, match="cannot be broadcast together"):
        S.csd(jnp.ones((2, 64)), jnp.ones((3, 64)))
    with pytest.raises(ValueError, match="at least 2d"):
        S.istft(jnp.ones(9, jnp.complex64))
    with pytest.raises(ValueError, match="differing time and frequency axes"):
        S.istft(jnp.ones((9, 9), jnp.complex64), time_axis=0, freq_axis=0)
    with pytest.raises(ValueError, match="must be longer than nperseg"):
        S.istft(jnp.ones((9, 4), jnp.complex64), nfft=8)
    with pytest.raises(ValueError, match="window must have length of 16"):
        S.istft(jnp.ones((9, 4), jnp.complex64), window=jnp.ones(8))


@pytest.mark.filterwarnings("ignore:nbjax cpu backend")  # complex steps: reference
def test_spectral_estimates_transform():
    x = random_array(rng, (3, 40))

    def fns():
        yield lambda x: S.welch(x, nperseg=16)[1]
        yield lambda x: S.welch(x, nperseg=16, average="median")[1]
        yield lambda x: S.stft(x, nperseg=12)[2]
        yield lambda x: S.istft(S.stft(x, nperseg=12)[2], nperseg=12)[1]
        yield lambda x: S.csd(x, x[::-1], nperseg=10)[1]
    for fn in fns():
        check_vmap(fn, (x,), (0,), rtol=1e-5)
        assert_close(nbjax.jit(fn)(x[0]), fn(x[0]), rtol=1e-5)
    with nbjax.enable_x64():
        x = x.astype(np.float64)
        check_grads(lambda x: S.welch(x, nperseg=16, detrend="linear")[1], (x[0],), order=1)
        check_grads(lambda x: S.istft(S.stft(x, nperseg=12)[2], nperseg=12)[1], (x[0],),
                    order=1)


# --- JAX's own values --------------------------------------------------------------------------

def _jax_cases():
    a, b = random_array(rng, (9,)), random_array(rng, (4,))
    c, d = random_array(rng, (3, 5), np.complex64), random_array(rng, (2, 4), np.complex64)
    x, y = random_array(rng, (2, 300)), random_array(rng, (2, 300))
    yield "convolve", (a, b), {"mode": "same"}
    yield "correlate", (c, d), {"mode": "valid", "method": "fft"}
    yield "fftconvolve", (c, d), {}
    yield "convolve2d", (c, d), {"mode": "same"}
    yield "correlate2d", (d, c), {"mode": "valid"}
    yield "detrend", (x,), {"bp": [40, 200]}
    yield "welch", (x,), {}
    yield "welch", (x,), {"nperseg": 64, "average": "median", "window": "blackman"}
    yield "csd", (x, y), {"nperseg": 50, "return_onesided": False}
    yield "stft", (x,), {"nperseg": 33, "boundary": "odd"}
    yield "istft", (ss.stft(x, nperseg=32)[2].astype(np.complex64),), {}


@pytest.mark.skipif(jax is None, reason="JAX is not installed")
def test_values_and_dtypes_as_jax():
    for name, args, kwargs in _jax_cases():
        got = getattr(S, name)(*args, **kwargs)
        want = getattr(jax_signal, name)(*map(jax.numpy.asarray, args), **kwargs)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype, name
            assert_close(g, w, rtol=1e-4, err_msg=name)

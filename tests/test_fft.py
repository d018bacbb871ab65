"""nbjax.numpy.fft and the lax ``fft`` primitive: values and dtypes against numpy.fft, errors,
vmap against a Python loop, and derivatives against finite differences."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.core import check_jaxpr
from nbjax.lax.fft import FftType, fft as lax_fft
from nbjax.test_util import check_grads
import helpers
from helpers import random_array, staged

RNG = np.random.default_rng(0)
NORMS = [None, "backward", "ortho", "forward"]


def assert_close(got, want, dtype, rtol=2e-5):
    """Same shape and dtype; values close relative to the largest magnitude (FFT errors
    scale with the whole signal, not with each entry)."""
    got = np.asarray(got)
    assert got.dtype == dtype, (got.dtype, dtype)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    scale = max(1.0, float(np.max(np.abs(want), initial=0)))
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale)


# --- jnp.fft against numpy.fft -------------------------------------------------------------

# Functions whose input is real; the others get complex input.
REAL_INPUT = {"rfft", "ihfft", "rfft2", "rfftn"}
# Functions whose output is real.
REAL_OUTPUT = {"irfft", "hfft", "irfft2", "irfftn"}

ONE_AXIS = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
ONE_AXIS_KWARGS = [{}, {"n": 3}, {"n": 8}, {"axis": 0}, {"axis": -2, "n": 6}]
TWO_AXES = ["fft2", "ifft2", "rfft2", "irfft2"]
TWO_AXES_KWARGS = [{}, {"axes": (0, 2)}, {"s": (5, 3)}, {"s": (2, 6), "axes": (2, 0)}]
N_AXES = ["fftn", "ifftn", "rfftn", "irfftn"]
N_AXES_KWARGS = [{}, {"s": (3, 2)}, {"axes": (0, 2)}, {"s": (2, 5, 7), "axes": (2, 0, 1)},
                 {"axes": (-1,)}, {"s": (6,), "axes": (1,)}]

CASES = ([(f, kw) for f in ONE_AXIS for kw in ONE_AXIS_KWARGS]
         + [(f, kw) for f in TWO_AXES for kw in TWO_AXES_KWARGS]
         + [(f, kw) for f in N_AXES for kw in N_AXES_KWARGS])


def _input_for(name, shape=(3, 4, 5), dtype32=True):
    if name in REAL_INPUT:
        return random_array(RNG, shape, np.float32 if dtype32 else np.float64)
    return random_array(RNG, shape, np.complex64 if dtype32 else np.complex128)


def _numpy_reference(name, x, kwargs, norm):
    """numpy.fft in double precision (it would keep float32 in single precision)."""
    wide = x.astype(np.float64 if x.dtype.kind == "f" else np.complex128)
    if "s" in kwargs and "axes" not in kwargs:  # the last len(s) axes, said explicitly
        kwargs = dict(kwargs, axes=tuple(range(-len(kwargs["s"]), 0)))
    return getattr(np.fft, name)(wide, norm=norm, **kwargs)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,kwargs", CASES, ids=lambda v: str(v))
def test_against_numpy(name, kwargs, norm):
    x = _input_for(name)
    want = _numpy_reference(name, x, kwargs, norm)
    dtype = np.float32 if name in REAL_OUTPUT else np.complex64
    fn = getattr(jnp.fft, name)
    assert_close(fn(x, norm=norm, **kwargs), want, dtype)
    if norm in (None, "ortho"):
        assert_close(staged(lambda a: fn(a, norm=norm, **kwargs), x), want, dtype)


@pytest.mark.parametrize("name,kwargs", [("fft", {}), ("rfft", {"n": 7}), ("irfft", {}),
                                         ("fftn", {"axes": (0, 2)}), ("irfftn", {}),
                                         ("ihfft", {"norm": "ortho"}), ("hfft", {"n": 5})])
def test_x64_precision_and_dtypes(x64, name, kwargs):
    x = _input_for(name, dtype32=False)
    want = getattr(np.fft, name)(x, **kwargs)
    dtype = np.float64 if name in REAL_OUTPUT else np.complex128
    assert_close(getattr(jnp.fft, name)(x, **kwargs), want, dtype, rtol=1e-12)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fftn", "rfftn", "hfft"])
@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.float16])
def test_integer_bool_and_half_inputs_become_default_inexact(name, dtype):
    x = (RNG.integers(0, 2, size=(2, 6))).astype(dtype)
    if name in ("rfft", "rfftn") and dtype == np.float16:
        with pytest.raises(ValueError, match="RFFT input must be float32 or float64"):
            getattr(jnp.fft, name)(x)
        return
    want = getattr(np.fft, name)(x.astype(np.float64))
    dtype_out = np.float32 if name in REAL_OUTPUT else np.complex64
    assert_close(getattr(jnp.fft, name)(x), want, dtype_out)


@pytest.mark.parametrize("view", [lambda a: a.T, lambda a: a[:, ::2], lambda a: a[::-1]])
def test_non_contiguous_inputs(view):
    x = view(random_array(RNG, (6, 8), np.complex64))
    assert_close(jnp.fft.fft2(x), np.fft.fft2(x.astype(np.complex128)), np.complex64)
    r = view(random_array(RNG, (6, 8)))
    assert_close(jnp.fft.rfft(r, axis=0), np.fft.rfft(r.astype(np.float64), axis=0),
                 np.complex64)


def test_size_zero_and_size_one_axes():
    # numpy refuses transforms of length 0; JAX returns empty results of the right type.
    assert jnp.fft.fft(np.zeros((0,), np.float32)).shape == (0,)
    out = jnp.fft.fft(np.zeros((0, 4), np.complex64))
    assert out.shape == (0, 4) and out.dtype == np.complex64
    out = jnp.fft.irfft(np.ones((3, 1), np.complex64))  # n = 2 * (1 - 1) = 0 samples
    assert out.shape == (3, 0) and out.dtype == np.float32
    x = random_array(RNG, (4, 1), np.complex64)
    assert_close(jnp.fft.fft(x), np.fft.fft(x), np.complex64)
    assert_close(jnp.fft.irfft(x, n=1), np.fft.irfft(x, n=1), np.float32)


def test_scalar_input_with_no_axes_is_converted_identity():
    out = jnp.fft.fftn(np.float32(2.5))
    assert out.shape == () and out.dtype == np.complex64 and complex(out) == 2.5


def test_round_trips():
    x = random_array(RNG, (4, 6))
    assert_close(jnp.fft.irfftn(jnp.fft.rfftn(x), s=x.shape), x, np.float32)
    c = random_array(RNG, (4, 6), np.complex64)
    assert_close(jnp.fft.ifft2(jnp.fft.fft2(c, norm="ortho"), norm="ortho"), c, np.complex64)
    assert_close(jnp.fft.ihfft(jnp.fft.hfft(c, n=7), n=7),
                 np.fft.ihfft(np.fft.hfft(c.astype(np.complex128), n=7), n=7), np.complex64)


# --- frequencies and shifts ----------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 4, 5])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_fftfreq_and_rfftfreq(n, d):
    assert_close(jnp.fft.fftfreq(n, d), np.fft.fftfreq(n, d), np.float32, rtol=1e-6)
    assert_close(jnp.fft.rfftfreq(n, d=d), np.fft.rfftfreq(n, d), np.float32, rtol=1e-6)


def test_fftfreq_dtypes():
    assert jnp.fft.fftfreq(4, dtype=jnp.complex64).dtype == np.complex64
    # Computed in floating point, then cast: [0, .25, -.5, -.25] truncates to zeros.
    np.testing.assert_array_equal(jnp.fft.fftfreq(4, dtype=np.int32), np.zeros(4, np.int32))
    # rfftfreq divides arrays of the dtype: integers give floats.
    out = jnp.fft.rfftfreq(6, dtype=np.int32)
    assert out.dtype == np.float32
    helpers.assert_close(out, np.arange(4) / 6, rtol=1e-6)


def test_fftfreq_x64(x64):
    out = jnp.fft.fftfreq(7, 0.1)
    assert out.dtype == np.float64
    helpers.assert_close(out, np.fft.fftfreq(7, 0.1), rtol=1e-15)


def test_fftfreq_errors():
    with pytest.raises(ValueError, match="only takes an int"):
        jnp.fft.fftfreq([4])
    with pytest.raises(ValueError, match="only takes a single value"):
        jnp.fft.rfftfreq(4, d=[1.0])


@pytest.mark.parametrize("shape,axes", [((5,), None), ((6,), 0), ((4, 5), None),
                                        ((4, 5), 1), ((4, 5), (0, 1)), ((3, 1), (-1,)),
                                        ((3, 4, 5), (2, 0))])
def test_fftshift_and_ifftshift(shape, axes):
    x = np.arange(np.prod(shape)).reshape(shape).astype(np.float32)
    np.testing.assert_array_equal(jnp.fft.fftshift(x, axes), np.fft.fftshift(x, axes))
    np.testing.assert_array_equal(jnp.fft.ifftshift(x, axes), np.fft.ifftshift(x, axes))
    np.testing.assert_array_equal(staged(lambda a: jnp.fft.fftshift(a, axes), x),
                                  np.fft.fftshift(x, axes))


# --- errors --------------------------------------------------------------------------------

def test_jnp_errors():
    x = random_array(RNG, (2, 3))
    with pytest.raises(ValueError, match="Invalid norm value"):
        jnp.fft.fft(x, norm="bad")
    with pytest.raises(ValueError, match="does not support repeated axes"):
        jnp.fft.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError, match="does not support repeated axes"):
        jnp.fft.fftn(x, axes=(1, -1))
    with pytest.raises(ValueError, match="Shape and axes have different lengths"):
        jnp.fft.fftn(x, s=(2, 3), axes=(0,))
    with pytest.raises(ValueError, match="Shape should be positive"):
        jnp.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="at least as many input dimensions"):
        jnp.fft.fftn(x, s=(2, 3, 4))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.fft.fft(x, axis=2)
    with pytest.raises(ValueError, match="only real valued inputs supported for rfft"):
        jnp.fft.rfft(random_array(RNG, (3,), np.complex64))
    with pytest.raises(ValueError, match="only supports 2 axes"):
        jnp.fft.fft2(x, axes=(0,))
    with pytest.raises(ValueError, match="does not support multiple axes"):
        jnp.fft.fft(x, axis=(0, 1))
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.fft.fft([1.0, 2.0])


def test_lax_fft_errors():
    c = random_array(RNG, (2, 3), np.complex64)
    with pytest.raises(ValueError, match="minor dimensions must be equal"):
        lax_fft(c, "fft", (2, 4))
    with pytest.raises(ValueError, match="at least as many input dimensions"):
        lax_fft(c, FftType.IFFT, (1, 2, 3))
    with pytest.raises(ValueError, match="Unknown FFT type 'bad'"):
        lax_fft(c, "bad", (3,))
    with pytest.raises(TypeError, match="Unknown FFT type value"):
        lax_fft(c, 3, (3,))
    with pytest.raises(ValueError, match="IRFFT input shape .* minor dimensions"):
        lax_fft(c, "irfft", (3, 4))
    from nbjax.lax.fft import fft_p
    with pytest.raises(ValueError, match="FFT input must be complex64 or complex128"):
        fft_p.bind(random_array(RNG, (3,)), fft_type=FftType.FFT, fft_lengths=(3,))
    with pytest.raises(ValueError, match="RFFT input must be float32 or float64"):
        fft_p.bind(c, fft_type=FftType.RFFT, fft_lengths=(3,))


def test_lax_fft_types_names_and_jaxpr():
    x = random_array(RNG, (2, 4))
    closed = nbjax.make_jaxpr(lambda a: lax_fft(a, "rfft", (4,)))(x)
    check_jaxpr(closed.jaxpr)
    text = str(closed)
    assert "fft[fft_lengths=(4,) fft_type=2]" in text
    assert lax_fft(x, "fft", ()).dtype == np.complex64  # no axes: only the conversion
    assert_close(lax_fft(x, FftType.FFT, (2, 4)), np.fft.fft2(x.astype(np.float64)),
                 np.complex64)
    h = np.fft.rfft(x.astype(np.float64)).astype(np.complex64)
    assert_close(lax_fft(h, "IRFFT", (4,)), x, np.float32)


# --- vmap ----------------------------------------------------------------------------------

def _loop(f, xs, in_axis):
    return np.stack([np.asarray(f(np.take(xs, i, axis=in_axis)))
                     for i in range(xs.shape[in_axis])])


@pytest.mark.parametrize("fft_type", list(FftType))
@pytest.mark.parametrize("in_axis", [0, 1, -1])
@pytest.mark.parametrize("n_axes", [1, 2])
def test_vmap_matches_loop(fft_type, in_axis, n_axes):
    xs = random_array(RNG, (3, 4, 5), np.float32 if fft_type == FftType.RFFT else np.complex64)

    def f(a):
        lengths = a.shape[a.ndim - n_axes:]
        if fft_type == FftType.IRFFT:  # a half spectrum of m entries: 2(m - 1) samples
            lengths = lengths[:-1] + (2 * (lengths[-1] - 1),)
        return lax_fft(a, fft_type, lengths)
    want = _loop(f, xs, in_axis)
    got = nbjax.vmap(f, in_axes=in_axis)(xs)
    assert_close(got, want, want.dtype)


def test_vmap_unbatched_operand_out_axes_and_nesting():
    xs, y = random_array(RNG, (3, 2, 4), np.complex64), random_array(RNG, (4,), np.complex64)

    def f(x, y):
        return lax_fft(x, "fft", (4,)) + lax_fft(y, "ifft", (4,))
    want = np.stack([np.asarray(f(x, y)) for x in xs])
    assert_close(nbjax.vmap(f, in_axes=(0, None))(xs, y), want, np.complex64)
    got = nbjax.vmap(f, in_axes=(0, None), out_axes=1)(xs, y)
    assert_close(got, np.moveaxis(want, 0, 1), np.complex64)
    nested = nbjax.vmap(nbjax.vmap(lambda x: lax_fft(x, "fft", (2,)), in_axes=1), in_axes=2)
    # vmap over axis 2 (3), then axis 1 (4): length 2
    zs = random_array(RNG, (2, 4, 3), np.complex64)
    want = np.stack([np.stack([np.fft.fft(zs[:, j, i].astype(np.complex128))
                               for j in range(4)]) for i in range(3)])
    assert_close(nested(zs), want, np.complex64)


def test_vmap_jaxpr_moves_only_transformed_batch_axes():
    xs = random_array(RNG, (3, 4, 5), np.complex64)
    leading = str(nbjax.make_jaxpr(nbjax.vmap(lambda a: lax_fft(a, "fft", (4, 5))))(xs))
    assert "transpose" not in leading
    # Batch axis 1 of a (4, 5) transform over the last axis is a leading axis: it stays,
    # and only the final move to out_axes=0 transposes.
    middle = nbjax.make_jaxpr(nbjax.vmap(lambda a: lax_fft(a, "fft", (5,)), in_axes=1))(xs)
    ops = [e.primitive.name for e in middle.jaxpr.eqns]
    assert ops == ["fft", "transpose"], ops
    trailing = nbjax.make_jaxpr(nbjax.vmap(lambda a: lax_fft(a, "fft", (3, 4)),
                                           in_axes=2))(xs)
    assert [e.primitive.name for e in trailing.jaxpr.eqns] == ["transpose", "fft"]


def test_vmap_of_jnp_fft_along_an_axis():
    xs = random_array(RNG, (3, 6, 2))
    got = nbjax.vmap(lambda a: jnp.fft.rfft(a, axis=0, norm="ortho"), in_axes=2)(xs)
    want = np.stack([np.fft.rfft(xs[:, :, i].astype(np.float64), axis=0, norm="ortho")
                     for i in range(2)])
    assert_close(got, want, np.complex64)


# --- derivatives ---------------------------------------------------------------------------
# check_grads compares against central differences. Inputs and outputs are real (complex
# values are built from and split into parts), so the comparison does not depend on a
# convention for complex cotangents. The transforms are linear, and so are their derivatives
# and pullbacks: central differences are exact at any step, and a large step keeps float32
# rounding (which grows with the FFT's sums) out of the comparison. The losses are quadratic,
# so their second-order reverse check (the pullback of the value, a cubic) needs a small step.
LINEAR_EPS, LOSS_EPS = 0.5, 1e-2


def _complex(re, im):
    return lax.complex(re, im)


def _parts(z):
    return lax.real(z), lax.imag(z)


def _sum_abs_squared(z, weights):
    """A real loss: sum of weights * |z|^2 (the weights make the gradient non-trivial)."""
    if not np.issubdtype(z.dtype, np.complexfloating):
        return jnp.sum(weights * z * z)
    re, im = lax.real(z), lax.imag(z)
    return jnp.sum(weights * (re * re + im * im))


GRAD_CASES = [
    ("fft", {}, (3, 4)), ("fft", {"n": 6, "axis": 0, "norm": "ortho"}, (3, 4)),
    ("ifft", {"n": 3}, (2, 5)), ("ifft", {"norm": "forward"}, (4,)),
    ("rfft", {}, (3, 6)), ("rfft", {"n": 5, "axis": 0}, (4, 2)),
    ("rfft", {"norm": "ortho"}, (7,)),
    ("irfft", {}, (3, 4)), ("irfft", {"n": 7, "axis": 0}, (4, 2)),
    ("irfft", {"n": 4, "norm": "forward"}, (5,)),
    ("fft2", {}, (3, 4)), ("fft2", {"s": (2, 5), "axes": (1, 0)}, (3, 4)),
    ("fftn", {}, (2, 3, 2)), ("fftn", {"axes": (0, 2), "norm": "ortho"}, (2, 3, 2)),
]


@pytest.mark.parametrize("name,kwargs,shape", GRAD_CASES, ids=lambda v: str(v))
def test_grads_of_linear_maps(name, kwargs, shape):
    fn = getattr(jnp.fft, name)
    if name in REAL_INPUT:
        def f(x):
            return _parts(fn(x, **kwargs))
        args = (random_array(RNG, shape),)
    else:
        def f(re, im):
            out = fn(_complex(re, im), **kwargs)
            return out if name in REAL_OUTPUT else _parts(out)
        args = (random_array(RNG, shape), random_array(RNG, shape))
    check_grads(f, args, order=2, modes=("fwd", "rev"), eps=LINEAR_EPS)


@pytest.mark.parametrize("name,kwargs,shape", GRAD_CASES[::2], ids=lambda v: str(v))
def test_grads_of_real_losses(name, kwargs, shape):
    fn = getattr(jnp.fft, name)
    out_shape = fn(np.zeros(shape, np.float32), **kwargs).shape
    # |z|^2 is about the input size: these weights make the loss (and its pullback of the
    # loss value, checked at order 2) about 1, so float32 differences keep their digits.
    weights = random_array(RNG, out_shape) ** 2 / (np.prod(out_shape) * np.prod(shape))
    if name in REAL_INPUT:
        def loss(x):
            return _sum_abs_squared(fn(x, **kwargs), weights)
        args = (random_array(RNG, shape),)
    else:
        def loss(re, im):
            return _sum_abs_squared(fn(_complex(re, im), **kwargs), weights)
        args = (random_array(RNG, shape), random_array(RNG, shape))
    check_grads(loss, args, order=2, modes=("fwd", "rev"), eps=LOSS_EPS)
    grad_jaxpr = nbjax.make_jaxpr(nbjax.grad(loss, argnums=tuple(range(len(args)))))(*args)
    check_jaxpr(grad_jaxpr.jaxpr)


@pytest.mark.parametrize("fft_type,n", [(FftType.RFFT, 6), (FftType.RFFT, 5),
                                        (FftType.IRFFT, 6), (FftType.IRFFT, 5)])
def test_real_transform_vjps_match_the_dense_matrix(fft_type, n):
    """The RFFT/IRFFT transposes against the real Jacobian built column by column, which
    pins down the factor-2 weights of the half spectrum (n even and odd)."""
    m = n // 2 + 1
    if fft_type == FftType.RFFT:
        def f(x):
            return _parts(lax_fft(x, fft_type, (n,)))
        x, ct = random_array(RNG, (n,)), (random_array(RNG, (m,)), random_array(RNG, (m,)))
        jac = np.stack([np.concatenate([np.fft.rfft(e).real, np.fft.rfft(e).imag])
                        for e in np.eye(n)], axis=1)
        want = jac.T @ np.concatenate(ct)
        (got,) = nbjax.vjp(f, x)[1](ct)
    else:
        def f(re, im):
            return lax_fft(_complex(re, im), fft_type, (n,))
        x, ct = (random_array(RNG, (m,)), random_array(RNG, (m,))), random_array(RNG, (n,))
        cols = [np.fft.irfft(e, n) for e in np.eye(m)] + \
            [np.fft.irfft(1j * e, n) for e in np.eye(m)]
        want = np.stack(cols, axis=1).T @ ct
        got = np.concatenate([np.asarray(g) for g in nbjax.vjp(f, *x)[1](ct)])
    np.testing.assert_allclose(np.asarray(got).ravel(), want, atol=1e-5)


def test_grad_of_jnp_fft_under_vmap():
    xs = random_array(RNG, (3, 8))
    weights = random_array(RNG, (5,)) ** 2

    def loss(x):
        return _sum_abs_squared(jnp.fft.rfft(x), weights)
    got = nbjax.vmap(nbjax.grad(loss))(xs)
    want = np.stack([np.asarray(nbjax.grad(loss)(x)) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.cpu_compiler
def test_a_compiled_program_calls_scipys_fft_as_a_library_step_without_a_warning():
    """Under jit on the cpu backend an FFT is a library step: native code calls back into
    Python for SciPy's transform (named in the fusion report), in single precision, with
    no warning that a kernel is missing; the values are the eager ones."""
    import warnings
    x = random_array(np.random.default_rng(3), (8, 256), np.float32)
    k = random_array(np.random.default_rng(4), (16,), np.float32)

    def conv(x, k):
        spectrum = jnp.fft.rfft(x) * jnp.fft.rfft(k, n=256)
        return jnp.fft.irfft(spectrum, n=256), jnp.fft.fft(spectrum.astype(jnp.complex64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = nbjax.jit(conv)
        got = compiled(x, k)
    report = compiled.lower(x, k).compile().as_text()
    assert "fft is SciPy's FFT" in report and "calling back into Python for fft" in report
    for g, w in zip(got, conv(x, k)):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-3)
    want = np.fft.irfft(np.fft.rfft(x.astype(np.float64)) * np.fft.rfft(k, n=256), n=256)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,kwargs", [("fft", {}), ("ifft", {"n": 1000}), ("rfft", {}),
                                         ("irfft", {"n": 4096}), ("rfft2", {}),
                                         ("ifft2", {"s": (30, 4000)})])
def test_large_batches_match_numpy(name, kwargs):
    """Batches of at least ``THREADED_FFT_MIN`` elements are transformed on every core
    (SciPy's ``workers``), batches of 1-D transforms by SciPy's 1-D functions: the values
    are NumPy's float64 ones, in jit and eagerly."""
    from nbjax.lax.fft import THREADED_FFT_MIN
    shape = (THREADED_FFT_MIN // 4096 + 1, 4096)
    x = random_array(np.random.default_rng(5), shape,
                     np.float32 if name in REAL_INPUT else np.complex64)
    want = getattr(np.fft, name)(x.astype(np.complex128 if x.dtype.kind == "c" else
                                          np.float64), **kwargs)
    def transform(x):
        return getattr(jnp.fft, name)(x, **kwargs)
    for fn in (transform, nbjax.jit(transform)):
        got = fn(x)
        dtype = np.float32 if name in REAL_OUTPUT else np.complex64
        assert_close(got, want, dtype, rtol=1e-5)

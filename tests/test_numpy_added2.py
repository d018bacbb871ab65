"""The second batch of jax.numpy names added to nbjax.numpy (and jax.Array attributes),
against NumPy and, when importable, JAX (values and dtypes), with gradients and vmap where JAX
differentiates and batches them."""

import io

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from helpers import assert_close, check_vmap
from nbjax.test_util import check_grads

try:
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # JAX is a test reference only
    jax = jax_numpy = None

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 5)).astype(np.float32)
V = RNG.standard_normal(6).astype(np.float32)


def _compare(name, args, kwargs=None, numpy_fn=None, rtol=2e-6, dtype_from_jax=True,
             widen=True):
    """``jnp.name(*args)`` equals NumPy's function (in float64 when given float32 inputs and
    ``widen``, so the reference is accurate) and, when JAX is importable, JAX's in values and
    dtype."""
    kwargs = kwargs or {}
    out = getattr(jnp, name)(*args, **kwargs)
    wide = [np.asarray(a, np.float64) if widen and isinstance(a, np.ndarray)
            and a.dtype == np.float32 else a for a in args]
    expected = (numpy_fn or getattr(np, name))(*wide, **kwargs)
    _assert_tree_close(out, expected, rtol, check_dtype=False)
    if jax_numpy is not None:
        ref = getattr(jax_numpy, name)(*args, **kwargs)
        _assert_tree_close(out, ref, rtol, check_dtype=dtype_from_jax)
    return out


def _assert_tree_close(out, expected, rtol, check_dtype):
    if isinstance(expected, (tuple, list)):
        assert isinstance(out, (tuple, list)) and len(out) == len(expected)
        for o, e in zip(out, expected):
            _assert_tree_close(o, e, rtol, check_dtype)
        return
    assert_close(np.asarray(out), np.asarray(expected), rtol=rtol)
    if check_dtype:
        assert np.asarray(out).dtype == np.asarray(expected).dtype, (out.dtype, expected.dtype)


# --- dtypes, printing, I/O, special functions ----------------------------------------------

def test_complex_warning_is_numpys():
    assert jnp.ComplexWarning is np.exceptions.ComplexWarning


def test_printing_follows_numpy_printoptions():
    x = jnp.array([1.0, 2.5])
    assert jnp.array_str(x) == np.array_str(np.asarray(x))
    assert jnp.array_repr(jnp.arange(3)) == "Array([0, 1, 2], dtype=int32)"
    with jnp.printoptions(precision=2):
        assert jnp.get_printoptions()["precision"] == 2
        assert jnp.array_str(jnp.array([1 / 3])) == "[0.33]"
    assert jnp.get_printoptions()["precision"] == np.get_printoptions()["precision"]


def test_save_and_load_round_trip(tmp_path):
    x = jnp.arange(6.0).reshape(2, 3)
    buffer = io.BytesIO()
    jnp.save(buffer, x)
    buffer.seek(0)
    y = jnp.load(buffer)
    assert isinstance(y, nbjax.Array) and y.dtype == jnp.float32
    np.testing.assert_array_equal(y, x)
    jnp.savez(tmp_path / "a.npz", x=x)
    with jnp.load(tmp_path / "a.npz") as archive:
        np.testing.assert_array_equal(archive["x"], x)


def test_readers_return_arrays_of_canonical_dtype(tmp_path):
    np.arange(4, dtype=np.float64).tofile(tmp_path / "raw")
    cases = [
        (jnp.fromfile(tmp_path / "raw"), np.arange(4.0)),
        (jnp.fromiter(iter(range(4)), np.int64), np.arange(4)),
        (jnp.frombuffer(b"\x01\x02\x03", dtype=np.uint8, offset=1), np.array([2, 3], np.uint8)),
        (jnp.fromstring("1, 2, 3", sep=","), np.array([1.0, 2.0, 3.0])),
    ]
    for out, expected in cases:
        assert isinstance(out, nbjax.Array)
        assert out.dtype == nbjax.core.dtypes.canonicalize(expected.dtype)
        np.testing.assert_array_equal(out, expected)
    if jax_numpy is not None:
        assert jnp.fromstring("1 2", sep=" ").dtype == jax_numpy.fromstring("1 2", sep=" ").dtype


@pytest.mark.parametrize("x", [np.linspace(-30, 30, 61, dtype=np.float32), np.arange(5),
                               np.float32(8.0)], ids=["float", "int", "boundary"])
def test_i0(x):
    _compare("i0", (x,), rtol=2e-6)


def test_i0_gradient_and_vmap():
    check_grads(jnp.i0, (np.array([-9.0, -1.5, 0.5, 7.9, 12.0]),), order=1, rtol=2e-3)
    check_vmap(jnp.i0, (X,), (0,))


@pytest.mark.parametrize("M,beta", [(6, 3.0), (7, 0.0), (1, 2.0), (0, 2.0), (9, 14.0)])
def test_kaiser(M, beta):
    _compare("kaiser", (M, beta), rtol=2e-6)


def test_kaiser_gradient_in_beta():
    check_grads(lambda b: jnp.kaiser(5, b), (np.float64(4.0),), order=1, rtol=2e-3)


@pytest.mark.parametrize("x", [np.array([-1, 0, 7, 255, -2**31], np.int32),
                               np.array([3, 200], np.uint8), np.array([True, False]),
                               np.array([-128, 5], np.int8)], ids=str)
def test_bitwise_count(x):
    _compare("bitwise_count", (x,))


def test_bitwise_count_rejects_floats():
    with pytest.raises(TypeError):
        jnp.bitwise_count(jnp.ones(2))


@pytest.mark.parametrize("x", [np.array([-1.0, 0.0, 1e30, 3.5, np.inf, -np.inf, np.nan],
                                        np.float32), np.arange(-2, 3)], ids=["float", "int"])
def test_spacing(x):
    _compare("spacing", (x,), numpy_fn=lambda x: np.spacing(np.asarray(x, np.float32)),
             widen=False)


# --- choosing and placing values -----------------------------------------------------------

def _numpy_inplace(fn):
    """NumPy's in-place ``fn(a, ...)`` as a function returning the updated copy."""
    def out_of_place(a, *args, **kwargs):
        a = np.array(a)
        fn(a, *args, **kwargs)
        return a
    return out_of_place


CHOICES = [np.arange(6.0).reshape(2, 3), np.full((2, 3), 10.0), np.array([5.0, 6.0, 7.0])]


@pytest.mark.parametrize("a,mode", [(np.array([[0, 1, 2], [2, 1, 0]]), "raise"),
                                    (np.array([[0, 4, -1], [3, 1, 0]]), "wrap"),
                                    (np.array([[0, 4, -1], [3, 1, 0]]), "clip")])
def test_choose(a, mode):
    _compare("choose", (a, CHOICES), {"mode": mode})
    out = jnp.asarray(np.zeros((2, 3), np.int32)).choose(CHOICES)  # the Array method
    np.testing.assert_array_equal(out, CHOICES[0])


def test_choose_errors_and_gradient():
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.choose(np.array([0, 3]), CHOICES[1:])
    with pytest.raises(nbjax.ConcretizationTypeError):
        nbjax.jit(lambda a: jnp.choose(a, CHOICES))(np.array([0, 1, 2]))
    check_grads(lambda x, y: jnp.choose(np.array([[0, 1, 1], [1, 0, 1]]), [x, y], mode="clip"),
                (CHOICES[0], CHOICES[1]), order=1)


@pytest.mark.parametrize("condition,axis", [(np.array([1, 0, 1]), 0),
                                            (np.array([0, 1, 1, 0, 1]), 1),
                                            (np.array([True, False, True, True]), None),
                                            (np.array([1, 0]), 1)])
def test_compress(condition, axis):
    _compare("compress", (condition, X), {"axis": axis})
    np.testing.assert_array_equal(jnp.asarray(X).compress(condition, axis=axis),
                                  np.compress(condition, X, axis=axis))


def test_compress_with_size_under_jit_and_grad():
    cond = np.array([0, 1, 1, 0, 1])
    f = nbjax.jit(lambda c, x: jnp.compress(c, x, axis=1, size=4, fill_value=-1.0))
    out = f(cond, X)
    if jax_numpy is not None:
        ref = jax_numpy.compress(cond, X, axis=1, size=4, fill_value=-1.0)
        assert_close(out, ref)
    np.testing.assert_array_equal(out[:, :3], np.compress(cond, X, axis=1))
    np.testing.assert_array_equal(out[:, 3], -1.0)
    check_grads(lambda x: jnp.compress(cond, x, axis=1, size=3), (X,), order=1)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.compress(np.array([1, 0, 0, 1]), X, axis=0)


def test_extract():
    cond = X > 0
    _compare("extract", (cond, X))
    out = jnp.extract(cond, X, size=15, fill_value=9.0)
    expected = np.concatenate([np.extract(cond, X), np.full(15 - cond.sum(), 9.0)])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("mask,vals", [(V > 0, np.array([10.0, 20.0])),
                                       (np.zeros(6, bool), np.array([1.0]))])
def test_place(mask, vals):
    _compare("place", (V, mask, vals), {"inplace": False},
             numpy_fn=lambda a, m, v, inplace: _numpy_inplace(np.place)(a, m, v))
    with pytest.raises(ValueError, match="inplace=False"):
        jnp.place(V, mask, vals)


@pytest.mark.parametrize("ind,mode", [(np.array([0, 3, 5]), None), (np.array([0, 7, -8]), "wrap"),
                                      (np.array([[1, 9], [-3, 2]]), "clip")])
def test_put(ind, mode):
    vals = np.array([10.0, 20.0])
    _compare("put", (X, ind, vals), {"mode": mode, "inplace": False},
             numpy_fn=lambda a, i, v, mode, inplace: _numpy_inplace(np.put)(
                 a, i, v, mode=mode or "raise"))
    with pytest.raises(ValueError, match="inplace=False"):
        jnp.put(X, ind, vals, mode=mode)


def test_put_gradients_and_vmap():
    ind = np.array([0, 3, 5])
    check_grads(lambda a, v: jnp.put(a, ind, v, inplace=False), (V, V[:3]), order=1)
    check_vmap(lambda a, v: jnp.put(a, ind, v, inplace=False), (X, X[:, :3]), (0, 0))


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_put_along_axis(axis):
    indices = np.argsort(X, axis=axis)[:2] if axis == 0 else (
        np.argsort(X, axis=axis)[..., :2] if axis is not None else np.array([3, 0, 7]))
    values = np.float32(-5.0) if axis is None else RNG.standard_normal(indices.shape)
    _compare("put_along_axis", (X, indices, values, axis), {"inplace": False},
             numpy_fn=lambda a, i, v, ax, inplace: _numpy_inplace(np.put_along_axis)(a, i, v, ax))
    check_grads(lambda a: jnp.put_along_axis(a, indices, values, axis, inplace=False), (X,),
                order=1)


@pytest.mark.parametrize("shape,val", [((3, 5), 2.0), ((4, 3), np.array([1.0, 2.0])),
                                       ((3, 3, 3), np.array([7.0]))], ids=str)
def test_fill_diagonal(shape, val):
    a = RNG.standard_normal(shape).astype(np.float32)
    _compare("fill_diagonal", (a, val), {"inplace": False},
             numpy_fn=lambda a, v, inplace: _numpy_inplace(np.fill_diagonal)(a, v))
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.fill_diagonal(a, val)
    check_vmap(lambda a: jnp.fill_diagonal(a, 0.0, inplace=False), (X[None].repeat(2, 0),), (0,))


@pytest.mark.parametrize("func,k", [(np.triu, 1), (np.tril, -1), (np.triu, 0)])
def test_mask_indices(func, k):
    jnp_func = getattr(jnp, func.__name__)
    out = jnp.mask_indices(4, jnp_func, k)
    for o, e in zip(out, np.mask_indices(4, func, k)):
        np.testing.assert_array_equal(o, e)
        assert o.dtype == jnp.int32


# --- convolution, einsum_path, polynomials -------------------------------------------------

@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("sizes", [(6, 3), (3, 6), (4, 4), (5, 1)], ids=str)
def test_convolve_and_correlate(name, mode, sizes):
    a, v = V[:sizes[0]], X[1, :sizes[1]]
    scale = getattr(np, name)(np.abs(a), np.abs(v), mode)
    out = getattr(jnp, name)(a, v, mode)
    assert_close(out, getattr(np, name)(a.astype(np.float64), v.astype(np.float64), mode),
                 rtol=2e-6, scale=scale)
    if jax_numpy is not None:
        ref = getattr(jax_numpy, name)(a, v, mode)
        assert out.dtype == ref.dtype
        assert_close(out, ref, rtol=2e-6, scale=scale)


def test_convolve_dtypes_errors_gradients_and_vmap():
    assert jnp.convolve(np.arange(3), np.arange(2)).dtype == jnp.float32
    assert jnp.convolve(np.arange(3), np.arange(2), preferred_element_type=np.int32).dtype == \
        jnp.int32
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.convolve(X, V)
    with pytest.raises(ValueError, match="mode"):
        jnp.correlate(V, V, mode="wide")
    check_grads(lambda a, v: jnp.convolve(a, v, "same"), (V, V[:3]), order=2)
    check_grads(lambda a, v: jnp.correlate(a, v, "full"), (V[:3], V), order=1)
    check_vmap(lambda a, v: jnp.convolve(a, v), (X, X[:, :2]), (0, 0),
               terms=lambda a, v: jnp.convolve(a, v))


def test_einsum_path_matches_numpy_and_einsum_uses_it():
    ops = (np.ones((2, 3)), np.ones((3, 40)), np.ones((40, 5)))
    path, report = jnp.einsum_path("ij,jk,kl->il", *ops)
    expected = np.einsum_path("ij,jk,kl->il", *ops, optimize="greedy")
    assert path == [tuple(step) for step in expected[0][1:]]
    assert report == expected[1]
    if jax_numpy is not None:
        assert path == [tuple(p) for p in jax_numpy.einsum_path("ij,jk,kl->il", *ops)[0]]


P1 = np.array([1.5, -2.0, 0.5, 3.0], np.float32)
P2 = np.array([2.0, 1.0], np.float32)


@pytest.mark.parametrize("name,args", [
    ("polymul", (P1, P2)), ("polymul", (P2, np.array([], np.float32))),
    ("polydiv", (P1, P2)), ("polydiv", (P2, P1)), ("poly", (P1,)),
    ("poly", (np.array([[1.0, 2.0], [0.0, 4.0]], np.float32),)),
    ("poly", (np.array([], np.float32),))], ids=str)
def test_polynomial_arithmetic(name, args):
    out = getattr(jnp, name)(*args)
    expected = getattr(np, name)(*[a.astype(np.float64) for a in args])
    if name == "polydiv":  # NumPy trims the remainder's leading zeros; JAX keeps them
        q, r = out
        assert_close(q, expected[0], rtol=2e-6)
        assert_close(r[len(r) - len(expected[1]):], expected[1], rtol=2e-6, scale=10)
    else:
        assert_close(out, expected, rtol=2e-6)
    if jax_numpy is not None:
        _assert_tree_close(out, getattr(jax_numpy, name)(*args), 2e-6, check_dtype=True)


def test_polydiv_trims_and_polymul_trims_when_asked():
    q, r = jnp.polydiv(P1, P2, trim_leading_zeros=True)
    np.testing.assert_allclose(r, np.polydiv(P1, P2)[1], rtol=1e-5)
    out = jnp.polymul(np.array([0.0, 0.0, 1.0, 2.0]), P2, trim_leading_zeros=True)
    np.testing.assert_array_equal(out, np.polymul([1.0, 2.0], P2))


def test_polynomial_gradients():
    check_grads(lambda a, b: jnp.polymul(a, b), (P1, P2), order=1)
    check_grads(lambda a, b: jnp.polydiv(a, b)[0], (P1, P2), order=1, rtol=2e-3)
    check_grads(jnp.poly, (P1[:3],), order=1)


def _sorted_roots(r):
    r = np.asarray(r)
    return r[np.lexsort((r.imag, r.real))]


@pytest.mark.parametrize("p", [np.array([1.0, -3.0, 2.0]), np.array([0.0, 0.0, 1.0, 0.0, -4.0]),
                               np.array([1.0, 0.0, 1.0]), np.array([2.0]),
                               np.array([1.0, -6.0, 11.0, -6.0])], ids=str)
def test_roots(p):
    out = jnp.roots(p)
    expected = np.roots(p)
    assert out.dtype == jnp.complex64
    assert_close(_sorted_roots(out), _sorted_roots(expected), rtol=1e-5, scale=10)
    if jax_numpy is not None:
        ref = jax_numpy.roots(p)
        assert out.dtype == ref.dtype
        assert_close(_sorted_roots(out), _sorted_roots(ref), rtol=1e-5, scale=10)


@pytest.mark.filterwarnings("ignore:nbjax cpu backend")  # complex eig runs on the reference
def test_roots_without_stripping_works_under_jit():
    p = np.array([0.0, 1.0, -3.0, 2.0])
    out = nbjax.jit(lambda p: jnp.roots(p, strip_zeros=False))(p)
    assert_close(_sorted_roots(out[:2]), [1.0 + 0j, 2.0 + 0j], rtol=1e-5, scale=2)
    assert np.isnan(out[2])
    if jax_numpy is not None:
        ref = jax_numpy.roots(p, strip_zeros=False)
        assert np.isnan(ref[2]) and ref.dtype == out.dtype
    with pytest.raises(nbjax.ConcretizationTypeError):
        nbjax.jit(jnp.roots)(p)


@pytest.mark.parametrize("kwargs", [{}, {"w": np.linspace(1, 2, 12)}, {"rcond": 1e-3},
                                    {"full": True}, {"cov": True}, {"cov": "unscaled"}],
                         ids=str)
@pytest.mark.parametrize("two_d", [False, True])
def test_polyfit(kwargs, two_d):
    x = np.linspace(-1, 1, 12)
    y = 1 + 2 * x - x ** 3 + 0.05 * np.sin(7 * x)
    if two_d:
        y = np.stack([y, 2 * y - x], axis=1)
    out = jnp.polyfit(x, y, 3, **kwargs)
    expected = np.polyfit(x, y, 3, **kwargs)
    out, expected = (out, expected) if isinstance(expected, tuple) else ((out,), (expected,))
    for o, e in zip(out, expected):
        assert_close(o, e, rtol=2e-4, scale=np.max(np.abs(expected[0])))
    if jax_numpy is not None:
        ref = jax_numpy.polyfit(x, y, 3, **kwargs)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for o, r in zip(out, ref):
            assert np.asarray(o).dtype == np.asarray(r).dtype
            assert np.shape(o) == np.shape(r)


def test_polyfit_gradient_and_errors():
    x = np.linspace(-1, 1, 8)
    check_grads(lambda y: jnp.polyfit(x, y, 2), (np.cos(x),), order=1, rtol=5e-3)
    with pytest.raises(ValueError, match="deg"):
        jnp.polyfit(x, x, -1)
    with pytest.raises(TypeError, match="same length"):
        jnp.polyfit(x, x[:3], 1)


def test_trim_zeros():
    a = np.array([0, 0, 3, 0, 2, 0])
    for trim in ("fb", "f", "b", "B"):
        _compare("trim_zeros", (a,), {"trim": trim})
    m = np.zeros((4, 5))
    m[1:3, 2] = 1.0
    _compare("trim_zeros", (m,), {"axis": None}, numpy_fn=lambda m, axis: m[1:3, 2:3])
    _compare("trim_zeros", (m,), {"axis": 1}, numpy_fn=lambda m, axis: m[:, 2:3])
    with pytest.raises(nbjax.ConcretizationTypeError):
        nbjax.jit(jnp.trim_zeros)(a)


# --- statistics, interpolation, histograms, numerical derivatives --------------------------

@pytest.mark.parametrize("args,kwargs", [
    ((X,), {}), ((X,), {"rowvar": False}), ((X, X[:2] + 1), {}), ((X[0],), {}),
    ((X,), {"bias": True}), ((X,), {"ddof": 2}),
    ((X,), {"fweights": np.array([1, 2, 1, 3, 1]), "aweights": np.linspace(0.5, 1, 5)}),
    ((X.T,), {"rowvar": False, "aweights": np.linspace(0.5, 1, 5)})], ids=str)
def test_cov_and_corrcoef(args, kwargs):
    _compare("cov", args, kwargs, rtol=1e-5)
    if not {"bias", "ddof", "fweights", "aweights"} & set(kwargs):
        _compare("corrcoef", args, kwargs, rtol=1e-5)


def test_cov_corrcoef_gradients_and_vmap():
    check_grads(jnp.cov, (X,), order=1, rtol=2e-3)
    check_grads(jnp.corrcoef, (X,), order=1, rtol=2e-3)
    check_vmap(jnp.cov, (np.stack([X, 2 * X + 1]),), (0,), rtol=1e-5)


XP = np.array([-1.0, 0.0, 0.5, 2.0, 3.0], np.float32)
FP = np.array([1.0, -2.0, 0.0, 4.0, 3.5], np.float32)
XQ = np.array([-3.0, -1.0, -0.5, 0.25, 1.0, 2.0, 2.9, 5.0], np.float32)


@pytest.mark.parametrize("kwargs", [{}, {"left": -9.0, "right": 9.0}, {"period": 2.5}], ids=str)
def test_interp(kwargs):
    _compare("interp", (XQ, XP, FP), kwargs, rtol=1e-6)


def test_interp_extrapolate_gradient_and_vmap():
    out = jnp.interp(XQ, XP, FP, left="extrapolate", right="extrapolate")
    slope_left, slope_right = (FP[1] - FP[0]) / (XP[1] - XP[0]), (FP[4] - FP[3]) / (XP[4] - XP[3])
    assert_close(out[0], FP[0] + (XQ[0] - XP[0]) * slope_left, rtol=1e-6)
    assert_close(out[-1], FP[4] + (XQ[-1] - XP[4]) * slope_right, rtol=1e-6)
    if jax_numpy is not None:
        ref = jax_numpy.interp(XQ, XP, FP, left="extrapolate", right="extrapolate")
        assert_close(out, ref, rtol=1e-6)
    with pytest.raises(ValueError, match="extrapolate"):
        jnp.interp(XQ, XP, FP, left="nearest")
    check_grads(lambda x, fp: jnp.interp(x, XP, fp), (XQ[1:-1] + 0.01, FP), order=1)
    check_vmap(lambda fp: jnp.interp(XQ, XP, fp), (np.stack([FP, 2 * FP]),), (0,))


A_SAMPLE = RNG.standard_normal(40).astype(np.float32)


@pytest.mark.parametrize("kwargs", [{}, {"bins": 4}, {"bins": np.array([-1.0, 0.0, 0.5, 2.0])},
                                    {"bins": 3, "range": (-1.0, 1.0)}, {"density": True},
                                    {"weights": np.abs(A_SAMPLE)}], ids=str)
def test_histogram(kwargs):
    _compare("histogram", (A_SAMPLE,), kwargs, rtol=1e-5)
    if "density" not in kwargs:
        _compare("histogram_bin_edges", (A_SAMPLE,),
                 {k: v for k, v in kwargs.items() if k != "weights"}, rtol=1e-6)


def test_histogram_of_a_constant_and_weights_gradient():
    _compare("histogram", (np.full(5, 2.0, np.float32),), {"bins": 2})
    check_grads(lambda w: jnp.histogram(A_SAMPLE, 4, weights=w)[0], (np.abs(A_SAMPLE),),
                order=1)


@pytest.mark.parametrize("kwargs", [{}, {"bins": 3}, {"bins": [2, 4]},
                                    {"bins": 3, "range": [(-1, 1), None]}, {"density": True},
                                    {"weights": np.abs(A_SAMPLE[:20])}], ids=str)
def test_histogram2d_and_dd(kwargs):
    x, y = A_SAMPLE[:20], A_SAMPLE[20:]
    _compare("histogram2d", (x, y), kwargs, rtol=1e-5, dtype_from_jax=True)
    _compare("histogramdd", (np.stack([x, y, x * y], 1),),
             {**kwargs, "bins": 3, "range": None} if "range" in kwargs or "bins" in kwargs
             else kwargs, rtol=1e-5)


@pytest.mark.parametrize("args,kwargs", [
    ((V,), {}), ((V, 0.5), {}), ((V, np.cumsum(np.abs(V)) + 0.1), {}), ((X,), {}),
    ((X,), {"axis": 1}), ((X, 2.0, np.arange(5.0) ** 2), {}), ((X,), {"axis": (-1,)})],
    ids=str)
def test_gradient(args, kwargs):
    out = jnp.gradient(*args, **kwargs)
    expected = np.gradient(*[np.asarray(a, np.float64) for a in args], **kwargs)
    _assert_tree_close(out, expected, 2e-5, check_dtype=False)
    if jax_numpy is not None and not (len(args) == 3):  # JAX rank-promotes 1-D spacings
        _assert_tree_close(out, jax_numpy.gradient(*args, **kwargs), 2e-6, check_dtype=True)
    with pytest.raises(NotImplementedError):
        jnp.gradient(V, edge_order=2)


def test_gradient_is_linear_and_batches():
    check_grads(lambda f: jnp.gradient(f, 0.5), (V,), order=2)
    check_vmap(lambda f: jnp.gradient(f), (X,), (0,))


@pytest.mark.parametrize("kwargs", [{}, {"discont": 4.0}, {"period": 5.0}, {"axis": 0}],
                         ids=str)
def test_unwrap(kwargs):
    phase = np.cumsum(3 * RNG.standard_normal((4, 7)), axis=kwargs.get("axis", -1))
    _compare("unwrap", (phase.astype(np.float32),), kwargs, rtol=1e-5)


def test_unwrap_of_an_empty_axis():
    for empty, axis in [(np.zeros((0, 4), np.float32), 0), (np.zeros((3, 0), np.int32), -1)]:
        got = jnp.unwrap(empty, axis=axis)
        assert got.shape == empty.shape and got.dtype == np.float32


def test_unwrap_gradient_and_vmap():
    phase = np.array([0.0, 2.0, -1.5, 1.0, 3.5, 0.5])
    check_grads(jnp.unwrap, (phase,), order=1)
    check_vmap(jnp.unwrap, (3 * X,), (0,))


@pytest.mark.parametrize("size", [None, 8])
def test_setxor1d(size):
    a, b = np.array([3, 1, 2, 2, 7]), np.array([2, 5, 6, 7])
    out = jnp.setxor1d(a, b, size=size)
    expected = np.setxor1d(a, b)
    if size is not None:
        expected = np.concatenate([expected, np.full(size - len(expected), expected[0])])
    np.testing.assert_array_equal(out, expected)
    if jax_numpy is not None:
        ref = jax_numpy.setxor1d(a, b, size=size)
        np.testing.assert_array_equal(out, ref)
        assert out.dtype == ref.dtype
    assert jnp.setxor1d(np.array([1.0]), np.array([1.0])).shape == (0,)


# --- vectorize, ufunc, piecewise, apply_*, block, bit packing ------------------------------

def test_vectorize_broadcasts_and_batches():
    f = jnp.vectorize(lambda a, b: a * 2 + b if a.ndim == 0 else None)
    out = f(X[:, :1], V[None, :5])
    assert_close(out, X[:, :1] * 2 + V[None, :5], rtol=1e-7)
    g = jnp.vectorize(lambda a, b: (a + b, a * b))
    s, p = g(X, np.float32(2.0))
    assert_close(s, X + 2, rtol=1e-7) and assert_close(p, X * 2, rtol=1e-7)
    check_grads(lambda x: jnp.vectorize(jnp.sin)(x), (X,), order=1)
    check_vmap(jnp.vectorize(lambda a: a ** 2), (X,), (1,))


def test_vectorize_signature_and_excluded():
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    assert_close(dot(X, V[:5]), X.astype(np.float64) @ V[:5], rtol=1e-6,
                 scale=np.abs(X) @ np.abs(V[:5]))
    outer = jnp.vectorize(lambda a: jnp.outer(a, a), signature="(n)->(n,n)")
    assert outer(X).shape == (3, 5, 5)
    power = jnp.vectorize(lambda a, p: a ** p, excluded={1})
    assert_close(power(X, 2), X.astype(np.float64) ** 2, rtol=1e-6)
    scaled = jnp.vectorize(lambda a, *, k: a * k, excluded={"k"})
    assert_close(scaled(X, k=3.0), X * 3.0, rtol=1e-7)
    with pytest.raises(ValueError, match="core dimension"):
        dot(X, V)
    with pytest.raises(ValueError, match="signature"):
        jnp.vectorize(jnp.dot, signature="(n)(n)->()")(X, X)
    if jax_numpy is not None:
        ref = jax_numpy.vectorize(jax_numpy.dot, signature="(n),(n)->()")(X, V[:5])
        assert dot(X, V[:5]).dtype == ref.dtype and dot(X, V[:5]).shape == ref.shape
    check_grads(lambda x: dot(x, x), (X,), order=1)


def _mul_add(a, b):
    return a * b + 1


@pytest.mark.parametrize("method,args,kwargs", [
    ("__call__", (np.arange(4), 3), {}), ("reduce", (np.arange(1, 5),), {}),
    ("reduce", (X,), {"axis": 1}), ("reduce", (X,), {"axis": None, "keepdims": True}),
    ("reduce", (X,), {"axis": 0, "initial": 2.0}), ("accumulate", (X,), {"axis": 1}),
    ("outer", (np.arange(3.0), V), {}),
    ("at", (np.zeros(5), np.array([0, 0, 3])), {"inplace": False}),
    ("at", (np.ones(5), np.array([1, 1, 4]), np.array([2.0, 3.0, 4.0])), {"inplace": False}),
    ("reduceat", (np.arange(8.0), np.array([0, 3, 2, 6])), {})], ids=str)
def test_frompyfunc_ufunc_methods(method, args, kwargs):
    nin = 1 if method == "at" and len(args) == 2 else 2
    fn = (lambda a: a * 2 + 1) if nin == 1 else _mul_add
    u = jnp.frompyfunc(fn, nin, 1, identity=0)
    out = getattr(u, method)(*args, **kwargs)
    assert repr(u).startswith("<jnp.ufunc") and (u.nin, u.nout) == (nin, 1)
    if jax_numpy is not None:
        ref = getattr(jax_numpy.frompyfunc(fn, nin, 1, identity=0), method)(*args, **kwargs)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        assert_close(out, ref, rtol=2e-6)
    if method in ("__call__", "outer"):  # NumPy's object ufunc, on values
        expected = getattr(np.frompyfunc(fn, nin, 1), method)(*args).astype(np.float64)
        assert_close(out, expected, rtol=2e-6)


def test_ufunc_errors_and_gradients():
    u = jnp.frompyfunc(_mul_add, 2, 1)
    with pytest.raises(ValueError, match="identity"):
        u.reduce(np.zeros((0,)))
    with pytest.raises(NotImplementedError):
        u.at(np.zeros(3), np.array([1]), 1.0)
    with pytest.raises(ValueError, match="binary"):
        jnp.frompyfunc(jnp.sin, 1, 1).reduce(X)
    check_grads(lambda x: u.reduce(x, axis=1), (X,), order=1, rtol=2e-3)
    check_grads(lambda x: u.accumulate(x, axis=0), (X,), order=1, rtol=2e-3)
    check_vmap(lambda x: u.reduce(x), (X,), (1,), rtol=1e-5)


JNP_UFUNCS = {"add": 0, "multiply": 1, "maximum": None, "minimum": None, "subtract": None,
              "negative": None, "logaddexp": -np.inf, "logaddexp2": -np.inf,
              "logical_and": True, "logical_or": False, "logical_xor": False,
              "bitwise_and": -1, "bitwise_or": 0, "bitwise_xor": 0}


@pytest.mark.parametrize("name", list(JNP_UFUNCS))
def test_jnps_own_ufuncs(name):
    """``jnp.add`` and thirteen others are ufuncs, as in JAX: called as the function, with
    NumPy's ufunc methods (the reduce, accumulate and at of add, multiply, maximum and
    minimum by reductions, cumulative primitives and scatters)."""
    u, np_u = getattr(jnp, name), getattr(np, name)
    assert isinstance(u, jnp.ufunc) and u.identity == JNP_UFUNCS[name]
    assert (u.nin, u.nout) == (np_u.nin, 1)
    ints = "bitwise" in name or "logical" in name
    x = RNG.integers(-9, 9, (3, 4)).astype(np.int32) if ints else X
    if u.nin == 1:
        assert_close(u(x), np_u(x))
        assert_close(nbjax.jit(u)(x), np_u(x))  # (jit copies a function's attributes)
        return
    assert_close(u(x, x[0]), np_u(x, x[0]), rtol=1e-6)
    assert_close(nbjax.jit(u)(x, x[0]), np_u(x, x[0]), rtol=1e-6)
    assert_close(u.outer(x[0], x[1]), np_u.outer(x[0], x[1]), rtol=1e-6)
    for axis, keepdims in ((0, False), (1, True), (None, False))[:2 if name == "subtract" else 3]:
        assert_close(u.reduce(x, axis=axis, keepdims=keepdims),
                     np_u.reduce(x, axis=axis, keepdims=keepdims), rtol=1e-5)
    assert_close(u.accumulate(x, axis=1), np_u.accumulate(x, axis=1), rtol=1e-5)
    idx, b = np.array([0, 2, 0]), x[0, :3]
    want = x[0].copy()
    np_u.at(want, idx, b)
    got = u.at(x[0], idx, b, inplace=False)
    assert_close(got, want.astype(bool) if "logical" in name else want, rtol=1e-6)


def test_the_fast_ufunc_methods_stage_one_primitive():
    def names(f, *args):
        return [e.primitive.name for e in nbjax.make_jaxpr(f)(*args).jaxpr.eqns]
    assert names(lambda x: jnp.add.reduce(x), X) == ["reduce_sum"]
    assert names(lambda x: jnp.maximum.accumulate(x, axis=1), X) == ["cummax"]
    assert "scatter-add" in names(lambda x: jnp.add.at(x, np.array([0, 0]), 1.0,
                                                      inplace=False), X[0])
    assert_close(jnp.maximum.reduce(X, initial=10.0, axis=None), 10.0)
    assert_close(jnp.multiply.accumulate(np.arange(1, 5), dtype=np.float32), [1, 2, 6, 24])
    check_grads(lambda x: jnp.multiply.reduce(x, axis=1), (X,), order=1, rtol=2e-3)
    assert_close(nbjax.jit(lambda x: jnp.add.reduce(x, axis=1))(X), X.sum(1), rtol=1e-6)


@pytest.mark.parametrize("funcs", [[lambda x: -x, 7.0, 3.0], [lambda x: x ** 2, lambda x: x]],
                         ids=["default", "no-default"])
def test_piecewise(funcs):
    x = np.linspace(-2, 2, 9).astype(np.float32)
    conds = [x < 0, x > 1]
    _compare("piecewise", (x, conds, funcs))
    check_grads(lambda x: jnp.piecewise(x, [x < 0, x > 1], funcs), (x + 0.1,), order=1)
    check_vmap(lambda x: jnp.piecewise(x, [x < 0, x > 1], funcs), (X,), (0,))
    with pytest.raises(ValueError, match="functions are expected"):
        jnp.piecewise(x, conds, funcs[:1])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_apply_along_axis(axis):
    a = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    for f, np_f in [(lambda v: jnp.sum(v ** 2), lambda v: np.sum(v ** 2)),
                    (lambda v: jnp.stack([v.min(), v.max()]),
                     lambda v: np.stack([v.min(), v.max()])),
                    (jnp.diag, np.diag)]:
        out = jnp.apply_along_axis(f, axis, a)
        assert_close(out, np.apply_along_axis(np_f, axis, a.astype(np.float64)), rtol=2e-6)
    check_grads(lambda a: jnp.apply_along_axis(lambda v: jnp.sum(v ** 2), axis, a), (X,),
                order=1)


def test_apply_over_axes():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    for axes in ([0, 2], [1], (-1, 0)):
        out = jnp.apply_over_axes(jnp.sum, a, axes)
        assert_close(out, np.apply_over_axes(np.sum, a.astype(np.float64), axes), rtol=2e-6,
                     scale=np.abs(a).sum())
        if jax_numpy is not None:
            ref = jax_numpy.apply_over_axes(jax_numpy.sum, a, axes)
            assert out.dtype == ref.dtype and out.shape == ref.shape


@pytest.mark.parametrize("blocks", [
    lambda: [[np.ones((2, 2)), np.zeros((2, 1))], [np.full((1, 3), 5.0)]],
    lambda: [1.0, np.array([2.0, 3.0])], lambda: [[np.eye(2)], [np.arange(2.0)]],
    lambda: np.arange(3.0)], ids=["2d", "scalar", "rank-promoted", "array"])
def test_block(blocks):
    _compare("block", (blocks(),), numpy_fn=np.block)


def test_block_errors():
    with pytest.raises(ValueError, match="tuples"):
        jnp.block((np.ones(2), np.ones(2)))
    with pytest.raises(ValueError, match="depths"):
        jnp.block([np.ones(2), [np.ones(2)]])
    check_grads(lambda a, b: jnp.block([[a, b]]), (X, X), order=1)


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_and_unpackbits(axis, bitorder):
    a = (np.arange(22).reshape(2, 11) % 3 == 0)
    packed = _compare("packbits", (a,), {"axis": axis, "bitorder": bitorder})
    for count in (None, 5, 30):
        _compare("unpackbits", (np.asarray(packed),),
                 {"axis": axis, "count": count, "bitorder": bitorder})
    with pytest.raises(TypeError, match="unsigned byte"):
        jnp.unpackbits(np.arange(3))


# --- jax.Array attributes ------------------------------------------------------------------

def test_array_placement_attributes_as_on_one_jax_device():
    x = jnp.arange(6.0).reshape(2, 3)
    (shard,) = x.addressable_shards
    assert shard.device == x.device and shard.replica_id == 0
    np.testing.assert_array_equal(shard.data, x)
    assert shard.index == (slice(None), slice(None))
    assert x.global_shards[0].device == x.device
    np.testing.assert_array_equal(x.addressable_data(0), x)
    assert x.sharding.device_set == {x.device} and x.sharding == jnp.ones(2).sharding
    assert (x.committed, x.is_fully_addressable, x.is_fully_replicated) == (False, True, True)
    assert x.copy_to_host_async() is None
    if jax is not None:
        y = jax_numpy.arange(6.0).reshape(2, 3)
        assert (y.committed, y.is_fully_addressable, y.is_fully_replicated) == \
            (x.committed, x.is_fully_addressable, x.is_fully_replicated)
        assert y.addressable_shards[0].index == shard.index


@pytest.mark.parametrize("value,dtype", [
    (np.arange(6, dtype=np.float32).reshape(2, 3), np.int32),
    (np.arange(6, dtype=np.float32).reshape(2, 3), np.uint8),
    (np.arange(8, dtype=np.int16).reshape(2, 4), np.float32),
    (np.array([1 + 2j, -3j], np.complex64), np.float32),
    (np.array([1.0, 2.0, 0.5, -1.0], np.float32), np.complex64),
    (np.array([True, False, True, True]), np.int16), (np.array([1, 0], np.uint8), np.bool_),
    (np.float32(2.0), np.int32)], ids=str)
def test_view(value, dtype):
    out = jnp.asarray(value).view(dtype)
    expected = np.asarray(value).view(dtype)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError):
        jnp.arange(3, dtype=np.int16).view(np.int32)


@pytest.mark.parametrize("value", [np.arange(6, dtype=np.float32).reshape(2, 3),
                                   np.array([1, -2, 300], np.int16), np.float32(3.0),
                                   np.array([1 + 2j], np.complex64), np.array([1, 2], np.uint8)],
                         ids=str)
def test_byteswap(value):
    out = jnp.asarray(value).byteswap()
    expected = np.asarray(value).byteswap()
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_array_equal(np.atleast_1d(out).view(np.uint8),
                                  np.atleast_1d(expected).view(np.uint8))
    if jax is not None:
        ref = jax_numpy.asarray(value).byteswap()
        np.testing.assert_array_equal(np.atleast_1d(out).view(np.uint8),
                                      np.atleast_1d(ref).view(np.uint8))


def test_flat_reads_like_numpys_flat_iterator():
    x = jnp.asarray(X)
    assert x.flat[7] == X.flat[7]
    np.testing.assert_array_equal(list(x.flat), list(X.flat))
    assert nbjax.jit(lambda x: x.flat[3])(X) == X.flat[3]


def test_complex_numbers_compare_by_real_then_imaginary_part():
    """As JAX's ``less`` and friends (and ``fmax``/``fmin`` through them)."""
    c = np.array([1 + 2j, 1 - 1j, 2 + 0j, np.nan + 0j, 1 + 1j], np.complex64)
    f = np.array([1.0, 1.0, 3.0, 0.0, 1.0], np.float32)
    # (NumPy orders complex numbers the same way)
    for name in ("less", "less_equal", "greater", "greater_equal"):
        assert_close(getattr(jnp, name)(c, f), getattr(np, name)(c, f.astype(np.complex64)))
    assert_close(jnp.fmax(c, f), np.fmax(c, f.astype(np.complex64)))
    assert_close(jnp.fmin(c, f), np.fmin(c, f.astype(np.complex64)))
    assert_close(nbjax.jit(jnp.less)(c, f), np.less(c, f.astype(np.complex64)))


def test_boolean_shifts_shift_the_default_int():
    b = np.array([True, False])
    for fn in (jnp.left_shift, jnp.right_shift):
        out = fn(b, b)
        assert out.dtype == np.int32
        assert_close(out, getattr(np, fn.__name__)(b.astype(np.int32), b.astype(np.int32)))
    assert jnp.left_shift(b, np.array([1, 2], np.int8)).dtype == np.int8


def test_cumulative_prod_keeps_narrow_ints_and_matvec_needs_a_matrix():
    x = np.arange(1, 5, dtype=np.uint8)
    assert jnp.cumulative_prod(x).dtype == np.uint8 and jnp.cumulative_sum(x).dtype == np.uint32
    assert_close(jnp.cumulative_prod(x), np.cumprod(x))
    v = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        jnp.matvec(v, v)
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        jnp.vecmat(v, v)
    assert_close(jnp.matvec(np.ones((2, 3), np.float32), v), [3.0, 3.0])

"""nbjax.numpy array creation against NumPy, with JAX's dtype and weak-type rules."""

import functools
import itertools

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import ConcretizationTypeError
from helpers import assert_close, staged

F16, F32, I8, I32, U8, C64 = np.float16, np.float32, np.int8, np.int32, np.uint8, np.complex64


def same(actual, expected, dtype, weak=False):
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    assert actual.weak_type == weak
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=1e-6, atol=1e-6)
    assert actual.shape == np.shape(expected)


# --- array / asarray -----------------------------------------------------------------------

@pytest.mark.parametrize("value, dtype, weak", [
    (2.0, F32, True), (2, I32, True), (True, np.bool_, False), (1j, C64, True),
    ([1, 2.5], F32, False), ([1, 2], I32, False), ([[True], [False]], np.bool_, False),
    ([np.int8(1), 2], I8, False), ([], F32, False), (np.float64(2), F32, False),
    (np.arange(3), I32, False), (np.ones(2, U8), U8, False), ((1, 2j), C64, False),
    (np.int64(5), I32, False),
])
def test_array_dtypes(value, dtype, weak):
    out = jnp.array(value)
    same(out, np.array(value), dtype, weak)
    same(jnp.asarray(value), np.array(value), dtype, weak)


def test_array_keeps_weak_type_of_arrays_and_converts_dtype():
    w = jnp.asarray(2.0)
    assert jnp.array(w).weak_type
    same(jnp.array(w, dtype=I8), 2, I8)
    same(jnp.array([1.7, -1.2], dtype=I32), [1, -1], I32)
    same(jnp.asarray([1, 2], dtype=F16), [1, 2], F16)
    same(jnp.array(np.float32(3), dtype=C64), 3, C64)


def test_array_ndmin_copy_and_views():
    same(jnp.array(np.ones(2), ndmin=3), np.ones((1, 1, 2)), F32)
    same(jnp.array(5, ndmin=1), [5], I32, weak=True)
    view = np.arange(12.0).reshape(3, 4)[:, ::2].T
    same(jnp.array(view), view, F32)
    same(jnp.copy(view), view, F32)


def test_array_of_arrays_stacks():
    a, b = jnp.arange(3), jnp.arange(3) * 2
    same(jnp.array([a, b]), [[0, 1, 2], [0, 2, 4]], I32)
    same(jnp.array([[jnp.asarray(1.0), 2], [3, 4]]), [[1, 2], [3, 4]], F32)


def test_array_of_tracers_is_traceable():
    fn = lambda x: jnp.array([x, 2 * x, [1.0, 1.0]])  # noqa: E731
    x = np.array([1.0, 3.0], F32)
    out = staged(fn, x)
    np.testing.assert_array_equal(out, [[1, 3], [2, 6], [1, 1]])
    np.testing.assert_array_equal(fn(x), out)


def test_array_errors():
    with pytest.raises(OverflowError, match="int32"):
        jnp.array([2 ** 40])
    with pytest.raises(OverflowError):
        jnp.asarray(2 ** 40)
    with pytest.raises(ValueError, match="inhomogeneous"):
        jnp.array([[1, 2], [3]])
    with pytest.raises(ValueError, match="shapes"):
        jnp.array([jnp.ones(2), jnp.ones(3)])
    with pytest.raises(TypeError, match="not a valid JAX array type"):
        jnp.array("a")
    with pytest.raises(TypeError, match="not a valid JAX array type"):
        jnp.array(np.array(["a"]))
    # Text in a list: JAX names the element and its NumPy dtype.
    with pytest.raises(TypeError, match=r"Value 'a' with dtype <U1 is not a valid JAX array"):
        jnp.asarray([1, "a"])
    with pytest.raises(TypeError, match=r"Value 'x' with dtype <U1"):
        jnp.array([[1.0], ["x"]])
    same(jnp.asarray(["1.5"], dtype=jnp.float32), [1.5], np.float32)  # parsed, as JAX does


def test_array_x64(x64):
    same(jnp.array([1, 2]), [1, 2], np.int64)
    same(jnp.array(np.float64(0.1)), 0.1, np.float64)
    same(jnp.asarray(2.0), 2.0, np.float64, weak=True)
    same(jnp.array([2 ** 40]), [2 ** 40], np.int64)


# --- filled arrays -------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [3, (2, 3), (), (0, 2), [1, 4]])
@pytest.mark.parametrize("dtype", [None, I8, U8, F16, C64, bool])
def test_zeros_ones_full_empty(shape, dtype):
    out_dtype = dtype or F32
    same(jnp.zeros(shape, dtype), np.zeros(shape, out_dtype), out_dtype)
    same(jnp.ones(shape, dtype), np.ones(shape, out_dtype), out_dtype)
    same(jnp.empty(shape, dtype), np.zeros(shape, out_dtype), out_dtype)
    same(jnp.full(shape, 1, dtype), np.full(shape, 1, out_dtype), dtype or I32,
         weak=dtype is None)


def test_full_weak_and_array_fill():
    same(jnp.full(3, 2.0), np.full(3, 2.0), F32, weak=True)
    same(jnp.full((2, 2), np.arange(2, dtype=I8)), [[0, 1], [0, 1]], I8)
    same(jnp.full((2,), np.float32(7)), [7, 7], F32)
    with pytest.raises(TypeError):
        jnp.full((2, 3), np.ones(4))
    with pytest.raises(TypeError, match="non-negative"):
        jnp.zeros((-1, 2))


@pytest.mark.parametrize("like", [np.ones((2, 3), I8), np.ones(4, F16), 2.0,
                                  np.ones((4, 6), F32)[:, ::2]])
def test_like_functions(like):
    dtype = np.asarray(like).dtype if not isinstance(like, float) else np.dtype(F32)
    weak = isinstance(like, float)
    shape = np.shape(like)
    same(jnp.zeros_like(like), np.zeros(shape), dtype, weak)
    same(jnp.ones_like(like), np.ones(shape), dtype, weak)
    same(jnp.empty_like(like), np.zeros(shape), dtype, weak)
    same(jnp.full_like(like, 3), np.full(shape, 3), dtype, weak)
    same(jnp.zeros_like(like, dtype=I32), np.zeros(shape), I32)
    same(jnp.full_like(like, 5, shape=(2, 1)), np.full((2, 1), 5), dtype, weak)


# --- ranges --------------------------------------------------------------------------------

@pytest.mark.parametrize("args, dtype", [
    ((5,), I32), ((2, 9, 3), I32), ((5.0,), F32), ((1, 2, 0.25), F32), ((0,), I32),
    ((-3,), I32), ((np.int8(4),), I8), ((5, 1, -2), I32), ((0.5, 3), F32),
])
def test_arange(args, dtype):
    same(jnp.arange(*args), np.arange(*args), dtype)


def test_arange_dtype_and_keywords():
    same(jnp.arange(3, dtype=F16), np.arange(3), F16)
    same(jnp.arange(0, 1, 0.1, dtype=F32), np.arange(0, 1, 0.1, dtype=F32), F32)
    same(jnp.arange(start=2, stop=6, step=2), [2, 4], I32)
    same(jnp.arange(jnp.asarray(4)), np.arange(4), I32)


def test_arange_needs_concrete_bounds():
    with pytest.raises(ConcretizationTypeError, match="arange.*stop"):
        nbjax.make_jaxpr(lambda n: jnp.arange(0, n))(3)
    closed = nbjax.make_jaxpr(lambda x: x + jnp.arange(3))(np.ones(3, I32))
    assert "iota" in [e.primitive.name for e in closed.jaxpr.eqns]


@pytest.mark.parametrize("num", [0, 1, 2, 7])
@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace(num, endpoint):
    same(jnp.linspace(-1, 4, num, endpoint), np.linspace(-1, 4, num, endpoint), F32)
    out, step = jnp.linspace(2.0, 3.0, num, endpoint, retstep=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        enp, estep = np.linspace(2.0, 3.0, num, endpoint, retstep=True)
    same(out, enp, F32)
    assert_close(np.asarray(step), estep, rtol=1e-6)


def test_linspace_arrays_axis_and_dtype():
    start, stop = np.array([0.0, 1.0], F32), np.array([[2.0], [5.0]], F32)
    for axis in (0, 1, 2, -1):
        same(jnp.linspace(start, stop, 4, axis=axis), np.linspace(start, stop, 4, axis=axis),
             F32)
    same(jnp.linspace(0, 10, 4, dtype=I32), np.linspace(0, 10, 4, dtype=I32), I32)
    same(jnp.linspace(-10, 0, 4, dtype=I32), np.floor(np.linspace(-10, 0, 4)), I32)
    same(jnp.linspace(np.float16(0), 1, 5), np.linspace(0, 1, 5), F16)
    with pytest.raises(ValueError, match="Number of samples, -1, must be non-negative"):
        jnp.linspace(0, 1, -1)


def test_linspace_is_traceable():
    fn = lambda a, b: jnp.linspace(a, b, 5)  # noqa: E731
    a, b = np.array([0.0, 1.0], F32), np.array([1.0, 3.0], F32)
    out = staged(fn, a, b)
    assert_close(out, np.linspace(a, b, 5), rtol=1e-6)


def test_linspace_values_are_jaxs_not_numpys():
    """JAX computes ``start * (1 - t) + stop * t``, with XLA's ``t = i * fl(1/div)`` and,
    for scalar bounds, the second term as ``fma(i, stop * fl(1/div), first)``; NumPy's
    ``start + i * step`` is an ulp away here and there, and 1 away once floored."""
    # 5 * fl32(1/6) = 0.83333335816... rounds up; NumPy's 5/6 rounds down.
    assert np.asarray(jnp.linspace(0, 1, 7))[5].view(np.uint32) == 0x3F555556
    assert np.float32(np.linspace(0, 1, 7)[5]).view(np.uint32) == 0x3F555555
    # JAX's integers (checked against jax 0.10.2); NumPy's floor is [-5, -4, ..., 2].
    same(jnp.linspace(-5, 2, 8, dtype=I32), [-5, -4, -4, -2, -1, 0, 1, 2], I32)
    same(jnp.linspace(-5, 4, 10, dtype=I32), [-5, -4, -3, -2, -2, 0, 1, 2, 3, 4], I32)
    # retstep: (stop - start) * fl32(1/3) = 3.33333343... -> 3.3333335, not 10/3's 3.3333333
    out, step = jnp.linspace(0, 10, 4, retstep=True)
    assert np.asarray(step).view(np.uint32) == np.float32(3.3333335).view(np.uint32)
    assert np.asarray(out)[1] == np.float32(3.3333335)
    # one sample: start, and a scalar NaN step with the endpoint, stop - start without
    out, step = jnp.linspace(np.array([2.0, 4.0], F32), 3.0, 1, retstep=True)
    same(out, [[2.0, 4.0]], F32)
    assert step.shape == () and np.isnan(step)
    out, step = jnp.linspace(np.array([2.0, 4.0], F32), 3.0, 1, endpoint=False, retstep=True)
    same(step, [1.0, -1.0], F32)
    out, step = jnp.linspace(np.zeros(2, F32), 1.0, 0, retstep=True)
    assert out.shape == (0, 2) and step.shape == () and np.isnan(step)


def test_linspace_values_are_jaxs_x64(x64):
    # 5 * fl64(1/6) rounds down to 0x3FEAAAAAAAAAAAAA; NumPy's 5/6 is ...AB.
    assert np.asarray(jnp.linspace(0.0, 1.0, 7))[5].view(np.uint64) == 0x3FEAAAAAAAAAAAAA
    # dtype=float32 computes in float32 whatever the bounds' type, as JAX does
    out = jnp.linspace(np.float64(0), np.float64(1), 7, dtype=F32)
    assert np.asarray(out)[5].view(np.uint32) == 0x3F555556


_LINSPACE_DTYPES = [None, F32, np.float64, I32, np.int64, I8, U8, F16, C64, np.bool_]


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")
@pytest.mark.parametrize("enable_x64", [False, True])
def test_linspace_matches_jax_bit_for_bit(enable_x64):
    """Scalar bounds over many (start, stop, num, endpoint, dtype), values, dtypes and
    steps equal to jax 0.10.2's (complex64 past 33 samples vectorizes differently in XLA:
    within an ulp there)."""
    jax = pytest.importorskip("jax")
    # (floats only: each Python type pair is another compilation for JAX)
    starts, stops = [0.0, -1.0, 0.1, -3.7, 1e3, 7.0], [1.0, 10.0, 2.9, -5.3, 1e4, 0.3]
    nums = [0, 1, 2, 3, 7, 10, 33, 34, 99]
    cases = 0
    with jax.enable_x64(enable_x64), nbjax.enable_x64(enable_x64):
        for start, stop, num, endpoint, dtype in itertools.product(
                starts, stops, nums, [True, False], _LINSPACE_DTYPES):
            if dtype is U8 and min(start, stop) < 0:
                continue
            want, want_step = jax.numpy.linspace(start, stop, num, endpoint, retstep=True,
                                                 dtype=dtype)
            got, step = jnp.linspace(start, stop, num, endpoint, retstep=True, dtype=dtype)
            assert got.dtype == want.dtype and step.dtype == want_step.dtype
            assert step.shape == want_step.shape
            np.testing.assert_array_equal(np.asarray(step), np.asarray(want_step))
            if dtype is C64 and num - endpoint > 33:
                assert_close(got, np.asarray(want), rtol=2e-7)
            else:
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want),
                                              err_msg=str((start, stop, num, endpoint, dtype)))
            cases += 1
    assert cases == 36 * 9 * 2 * 10 - 16 * 9 * 2   # uint8 skips the 16 negative pairs


@pytest.mark.parametrize("shapes", [((3,), ()), ((), (3,)), ((), (1,)), ((1, 1), (1,)),
                                    ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (3,))])
def test_linspace_array_bounds_match_jax(shapes):
    """Array bounds along the first and the last axis, eagerly and jitted, floats and
    integers: JAX's values (an ulp off at most for the layouts ``_interpolate`` names)."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(11)
    for _ in range(4):
        start, stop = (rng.standard_normal(shape).astype(F32) * 10.0 ** rng.integers(-1, 3)
                       for shape in shapes)
        for num, endpoint, dtype, axis in itertools.product([2, 5, 40], [True, False],
                                                            [None, I32], [0, -1]):
            want = np.asarray(jax.numpy.linspace(start, stop, num, endpoint, dtype=dtype,
                                                 axis=axis))
            f = functools.partial(jnp.linspace, num=num, endpoint=endpoint, dtype=dtype,
                                  axis=axis)
            for got in (f(start, stop), nbjax.jit(f)(start, stop)):
                got = np.asarray(got)
                assert got.dtype == want.dtype and got.shape == want.shape
                exact = shapes != ((3,), ()) or axis != 0 or num == 2
                if exact or dtype is I32:
                    np.testing.assert_array_equal(got, want)
                else:
                    assert_close(got, want, rtol=2e-7)


def test_logspace_geomspace():
    same(jnp.logspace(0, 3, 4), np.logspace(0, 3, 4), F32)
    same(jnp.logspace(0, 3, 4, base=2.0, endpoint=False),
         np.logspace(0, 3, 4, base=2.0, endpoint=False), F32)
    same(jnp.geomspace(1, 1000, 4), np.geomspace(1, 1000, 4), F32)
    same(jnp.geomspace(-2, -32, 5), np.geomspace(-2, -32, 5), F32)
    same(jnp.geomspace(1, 16, 4, endpoint=False), np.geomspace(1, 16, 4, endpoint=False), F32)
    same(jnp.geomspace(np.array([1.0, 2.0]), 8.0, 3, axis=1),
         np.geomspace(np.array([1.0, 2.0]), 8.0, 3, axis=1), F32)




@pytest.mark.parametrize("start, stop, num, endpoint, base", [
    (0.0, 3.0, 50, True, 10.0), (-2.5, 1.7, 99, False, 2.0), (1.3, -0.4, 33, True, np.e),
    (0.1, 2.9, 600, True, 0.5), (-1.0, 2.0, 7, False, 1.7)])
def test_logspace_is_base_to_the_linspace(start, stop, num, endpoint, base):
    """Within an ulp or two of float64 NumPy (the float32 exponents' rounding, times
    ``log(base)``, is the larger part); the ends are ``base ** start`` and ``base ** stop``."""
    out = jnp.logspace(start, stop, num, endpoint, base=base)
    expected = np.logspace(start, stop, num, endpoint, base=base)
    assert out.dtype == F32 and not out.weak_type and out.shape == (num,)
    assert_close(out, expected, rtol=3e-7 + 2 ** -24 * abs(np.log(base)) * max(abs(start),
                                                                               abs(stop)))
    assert np.asarray(out)[0] == F32(base) ** F32(start)
    if endpoint:
        np.testing.assert_allclose(np.asarray(out)[-1], F32(base) ** F32(stop), rtol=1.2e-7)


def test_logspace_dtypes_as_jax():
    # integers truncate (no floor) and saturate, as JAX's conversion does
    same(jnp.logspace(0, 3, 4, dtype=I32), [1, 10, 100, 1000], I32)
    same(jnp.logspace(0, 3, 4, dtype=U8), [1, 10, 100, 255], U8)
    same(jnp.logspace(0.0, 3.0, 4, base=-2.0), [1, -2, 4, -8], F32)   # a negative base
    assert np.isnan(np.asarray(jnp.logspace(0.0, 1.0, 3, base=-2.0))[1])
    assert jnp.logspace(0, 2, 3, dtype=F16).dtype == F16
    same(jnp.logspace(0, 2, 3, dtype=C64), [1, 10, 100], C64)
    # the power promotes with the base before the result is converted to the dtype
    same(jnp.logspace(np.zeros(2, F32), 2.0, 3, base=np.array([[2.0], [3.0]]), axis=1),
         [[1, 2, 4], [1, 3, 9]], F32)
    assert jnp.logspace(0, 1, 0).shape == (0,) and jnp.logspace(0, 1, 1).tolist() == [1.0]


def test_logspace_geomspace_x64(x64):
    assert jnp.logspace(0, 2, 3).dtype == np.float64
    assert jnp.logspace(np.float32(0), np.float32(2), 3).dtype == F32
    # 10 ** (log10(8) / 3) is 1.9999999999999996: truncated, as JAX's [1, 1, 3, 7]
    same(jnp.geomspace(1, 8, 4, dtype=np.int64), [1, 1, 3, 7], np.int64)
    np.testing.assert_allclose(np.asarray(jnp.logspace(-3.0, 3.0, 61)),
                               np.logspace(-3.0, 3.0, 61), rtol=4e-16 * 7)


def test_geomspace_signs_and_zeros_as_jax():
    """``sign(start) * logspace(log10(start / sign), log10(stop / sign))``: bounds of mixed
    signs or a zero ``start`` give NaN (no error, as in JAX), a zero ``stop`` zeros after a
    NaN (``log10(0) * 0``); integer dtypes truncate toward zero."""
    same(jnp.geomspace(-2.0, -32.0, 5, dtype=I32), [-2, -4, -8, -15, -31], I32)
    assert np.isnan(np.asarray(jnp.geomspace(0.0, 10.0, 4))).all()
    assert np.isnan(np.asarray(jnp.geomspace(1.0, -4.0, 4))).all()
    out = np.asarray(jnp.geomspace(5.0, 0.0, 4))
    assert np.isnan(out[0]) and (out[1:] == 0).all()
    out = jnp.geomspace(np.array([1.0, 1000.0], F32), np.array([27.0, 1.0], F32), 4, axis=-1)
    assert out.shape == (2, 4)
    assert_close(out, np.geomspace([1.0, 1000.0], [27.0, 1.0], 4, axis=-1), rtol=1e-6)
    assert np.asarray(out)[1, -1] == 1.0 and np.asarray(out)[0, 0] == 1.0


@pytest.mark.parametrize("fn", [jnp.logspace, jnp.geomspace])
def test_logspace_geomspace_errors(fn):
    with pytest.raises(ValueError, match="Number of samples"):
        fn(1.0, 2.0, -1)
    with pytest.raises(TypeError):
        fn(1.0, 2.0, 2.5)
    with pytest.raises(TypeError):
        fn(np.ones(2), np.ones(3), 4)
    with pytest.raises(ConcretizationTypeError):
        nbjax.jit(lambda n: fn(1.0, 2.0, n))(3)


def test_logspace_geomspace_jit_within_an_ulp_of_eager():
    for fn, (start, stop) in [(jnp.logspace, (-2.5, 1.7)), (jnp.geomspace, (3.0, 700.0)),
                              (jnp.geomspace, (-1e3, -1.0))]:
        f = functools.partial(fn, num=40, endpoint=False)
        assert_close(nbjax.jit(f)(start, stop), np.asarray(f(start, stop)), rtol=2.5e-7)


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")
def test_logspace_geomspace_match_jax():
    """Dtypes exactly and values within a few ulp of jax 0.10.2 (XLA's fused loop contracts
    the exponents' arithmetic by its own vectorization; its powf is glibc's)."""
    jax = pytest.importorskip("jax")
    for args, kw in [((0.0, 3.0, 50), {}), ((-2.5, 1.7, 99), dict(base=2.0)),
                     ((0.0, 3.0, 4), dict(dtype=I32)), ((1.0, 1000.0, 7), dict(dtype=F16)),
                     ((-2.0, -32.0, 5), dict(dtype=I32)), ((3.0, 7.0, 10), dict(endpoint=False))]:
        for name in ("logspace", "geomspace"):
            if name == "logspace" and min(args[:2]) < -3 or "base" in kw and name != "logspace":
                continue
            want = np.asarray(getattr(jax.numpy, name)(*args, **kw))
            got = np.asarray(getattr(jnp, name)(*args, **kw))
            assert got.dtype == want.dtype and got.shape == want.shape
            if got.dtype.kind == "i":
                np.testing.assert_array_equal(got, want)
            else:
                assert_close(got, want, rtol=1e-3 if got.dtype == F16 else 1e-6)

@pytest.mark.parametrize("start, stop, num, endpoint", [(1 + 1j, 10 + 10j, 4, True),
                                                        (-1 + 0j, 1j, 3, True),
                                                        (1j, 1000j, 4, False),
                                                        (2 - 1j, -3 + 0.5j, 6, True)])
def test_geomspace_of_complex_numbers_follows_the_spiral(start, stop, num, endpoint):
    out = jnp.geomspace(start, stop, num, endpoint=endpoint)
    expected = np.geomspace(start, stop, num, endpoint=endpoint)
    assert out.dtype == np.complex64 and out.shape == expected.shape
    assert_close(out, expected, rtol=1e-5)
    # The start point is the power's rounding of it, not pinned (JAX's: 1 + 1j comes out an
    # ulp below, XLA's complex power being exp and cos of float32 logarithms).
    assert abs(complex(out[0]) - start) <= 2 * np.finfo(np.float32).eps * abs(start)

# --- matrices and grids --------------------------------------------------------------------

@pytest.mark.parametrize("N, M, k", [(3, None, 0), (2, 4, 1), (4, 2, -1), (3, 3, 5), (0, 2, 0)])
def test_eye_tri(N, M, k):
    same(jnp.eye(N, M, k), np.eye(N, M, k), F32)
    same(jnp.eye(N, M, k, dtype=I8), np.eye(N, M, k), I8)
    same(jnp.tri(N, M, k), np.tri(N, M, k), F32)
    same(jnp.tri(N, M, k, dtype=bool), np.tri(N, M, k, dtype=bool), np.bool_)


def test_identity():
    same(jnp.identity(3), np.identity(3), F32)
    same(jnp.identity(2, dtype=int), np.identity(2), I32)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    xs = [np.arange(2, dtype=I32), np.linspace(0, 1, 3).astype(F32), np.arange(4, dtype=I8)]
    for n in (1, 2, 3):
        out = jnp.meshgrid(*xs[:n], indexing=indexing, sparse=sparse)
        expected = np.meshgrid(*xs[:n], indexing=indexing, sparse=sparse)
        assert len(out) == len(expected)
        for o, e in zip(out, expected):
            same(o, e, e.dtype)
    with pytest.raises(ValueError, match="1D"):
        jnp.meshgrid(np.ones((2, 2)))
    with pytest.raises(ValueError, match="indexing"):
        jnp.meshgrid(np.ones(2), indexing="yx")


# --- introspection helpers -----------------------------------------------------------------

def test_introspection():
    x = jnp.ones((2, 3))
    assert jnp.isscalar(1) and jnp.isscalar(np.float32(1)) and jnp.isscalar(jnp.asarray(1))
    assert not jnp.isscalar(x) and not jnp.isscalar([1])
    assert jnp.ndim(x) == 2 and jnp.ndim([[1, 2]]) == 2 and jnp.ndim(3) == 0
    assert jnp.shape(x) == (2, 3) and jnp.shape([1, 2]) == (2,)
    assert jnp.size(x) == 6 and jnp.size(x, 1) == 3 and jnp.size(x, -2) == 2
    assert jnp.result_type(I8, 1.0) == F32
    assert jnp.result_type(np.ones(2, U8), 10) == U8
    assert jnp.result_type(I8, U8) == np.int16
    assert jnp.dtype("float32") == F32
    assert jnp.issubdtype(F32, np.floating) and jnp.can_cast(I8, I32)


def test_creation_x64(x64):
    same(jnp.zeros(2), [0, 0], np.float64)
    same(jnp.arange(3), [0, 1, 2], np.int64)
    same(jnp.arange(0.5, 2), [0.5, 1.5], np.float64)
    same(jnp.linspace(0, 1, 3), [0, 0.5, 1], np.float64)
    same(jnp.eye(2), np.eye(2), np.float64)
    same(jnp.full(2, 1.5), [1.5, 1.5], np.float64, weak=True)
    same(jnp.full((2,), 3, np.int16), [3, 3], np.int16)


def test_traced_grids_and_filled_arrays():
    def fn(x, y):
        gx, gy = jnp.meshgrid(x, y)
        return gx * jnp.eye(3, 2) + gy + jnp.full_like(gy, 2) + jnp.zeros_like(x[0])
    x, y = np.arange(2, dtype=F32), np.arange(3, dtype=F32)
    out = staged(fn, x, y)
    gx, gy = np.meshgrid(x, y)
    np.testing.assert_array_equal(out, gx * np.eye(3, 2) + gy + 2)
    np.testing.assert_array_equal(fn(x, y), out)


def test_makers_take_jax_out_sharding_keyword():
    """``out_sharding=None`` changes nothing (an nbjax array is whole on one device); a
    sharding asked for is refused, saying so."""
    assert jnp.zeros((2,), out_sharding=None).tolist() == [0.0, 0.0]
    assert jnp.arange(3, out_sharding=None).tolist() == [0, 1, 2]
    assert jnp.full_like(np.ones(2, np.int8), 3, out_sharding=None).dtype == np.int8
    with pytest.raises(NotImplementedError, match="asarray: out_sharding is not supported"):
        jnp.asarray([1.0], out_sharding=nbjax.sharding.P("x"))

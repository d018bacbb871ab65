"""lax reductions, arg-reductions, cumulative reductions and lax.reduce, against NumPy."""

import numpy as np
import pytest

import nbjax
from nbjax import lax
from helpers import eager_and_traced, random_array
import helpers

RNG = np.random.default_rng(0)


def assert_close(actual, expected, dtype):
    """Equal for exact dtypes; close (by the dtype's resolution) for inexact ones."""
    actual = np.asarray(actual)
    assert actual.dtype == np.dtype(dtype)
    if np.issubdtype(dtype, np.inexact):
        tol = 1e-2 if np.dtype(dtype) == np.float16 else 1e-5
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(actual, expected)


# --- reduce_* ------------------------------------------------------------------------------

def exact(np_fn):
    """A reference computed exactly (int64 / float64 / complex128), then cast (ints wrap)."""
    def ref(x, axes):
        wide = x.astype(np.result_type(x.dtype, np.int64)) if x.dtype != np.bool_ else x
        with np.errstate(over="ignore"):
            return np.asarray(np_fn(wide, axis=axes)).astype(x.dtype)
    return ref


REDUCTIONS = {
    "reduce_sum": (lax.reduce_sum, exact(np.sum),
                   [np.int8, np.uint8, np.int32, np.float16, np.float32, np.complex64]),
    "reduce_prod": (lax.reduce_prod, exact(np.prod),
                    [np.int8, np.uint8, np.int32, np.float32, np.complex64]),
    "reduce_max": (lax.reduce_max, exact(np.max),
                   [np.bool_, np.int8, np.uint8, np.int32, np.float16, np.float32,
                    np.complex64]),
    "reduce_min": (lax.reduce_min, exact(np.min),
                   [np.bool_, np.int8, np.uint8, np.int32, np.float16, np.float32,
                    np.complex64]),
    "reduce_and": (lax.reduce_and, lambda x, axes: np.bitwise_and.reduce(x, axis=axes),
                   [np.bool_, np.int8, np.uint8, np.int32]),
    "reduce_or": (lax.reduce_or, lambda x, axes: np.bitwise_or.reduce(x, axis=axes),
                  [np.bool_, np.int8, np.uint8, np.int32]),
    "reduce_xor": (lax.reduce_xor, lambda x, axes: np.bitwise_xor.reduce(x, axis=axes),
                   [np.bool_, np.int8, np.uint8, np.int32]),
}
CASES = [(name, dtype) for name, (_, _, dts) in REDUCTIONS.items() for dtype in dts]
SHAPES_AXES = [((3, 4, 5), (0,)), ((3, 4, 5), (2, 0)), ((3, 4, 5), (0, 1, 2)),
               ((3, 4), ()), ((1, 4), (0,)), ((), ())]


@pytest.mark.parametrize("name,dtype", CASES)
@pytest.mark.parametrize("shape,axes", SHAPES_AXES)
def test_reductions_match_numpy(name, dtype, shape, axes):
    fn, ref, _ = REDUCTIONS[name]
    x = random_array(RNG, shape, dtype)
    out = eager_and_traced(lambda x: fn(x, axes), x)
    assert_close(out, ref(x, axes), dtype)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_of_non_contiguous_inputs(name):
    fn, ref, dts = REDUCTIONS[name]
    base = random_array(RNG, (4, 6), dts[-1])
    for x in (base[:, ::2], base.T, base[::-1]):
        assert_close(fn(x, (1,)), ref(x, (1,)), dts[-1])


# The identity of each monoid, as XLA gives it for an empty reduction.
EMPTY = [
    (lax.reduce_sum, np.float32, 0.0), (lax.reduce_sum, np.int8, 0),
    (lax.reduce_prod, np.int32, 1), (lax.reduce_prod, np.complex64, 1),
    (lax.reduce_max, np.float32, -np.inf), (lax.reduce_max, np.int8, -128),
    (lax.reduce_max, np.uint8, 0), (lax.reduce_max, np.bool_, False),
    (lax.reduce_max, np.complex64, complex(-np.inf, 0)),
    (lax.reduce_min, np.float16, np.inf), (lax.reduce_min, np.int8, 127),
    (lax.reduce_min, np.uint8, 255), (lax.reduce_min, np.bool_, True),
    (lax.reduce_and, np.bool_, True), (lax.reduce_and, np.int8, -1),
    (lax.reduce_and, np.uint8, 255), (lax.reduce_or, np.bool_, False),
    (lax.reduce_or, np.int32, 0), (lax.reduce_xor, np.uint8, 0),
]


@pytest.mark.parametrize("fn,dtype,identity", EMPTY)
def test_empty_reductions_give_the_identity(fn, dtype, identity):
    out = eager_and_traced(lambda x: fn(x, (0,)), np.zeros((0, 3), dtype))
    assert out.shape == (3,) and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(out), np.full(3, identity, dtype))
    assert fn(np.zeros((3, 0), dtype), (0,)).shape == (0,)


def test_max_and_min_propagate_nan():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float32)
    np.testing.assert_array_equal(lax.reduce_max(x, (1,)), [np.nan, 3.0])
    np.testing.assert_array_equal(lax.reduce_min(x, (1,)), [np.nan, 1.0])


@pytest.mark.parametrize("values", [[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0, 0.0, -0.0]])
def test_max_and_min_order_negative_zero_below_zero(values):
    x = np.array(values, np.float32)
    assert not np.signbit(lax.reduce_max(x, (0,)))
    assert np.signbit(lax.reduce_min(x, (0,)))
    assert np.signbit(lax.reduce_max(np.array([-0.0, -0.0], np.float32), (0,)))
    assert not np.signbit(lax.reduce_min(np.array([0.0, 0.0], np.float32), (0,)))


@pytest.mark.parametrize("reverse", [False, True])
def test_running_max_and_min_order_negative_zero_below_zero(reverse):
    """Each running extremum is the reduction of its prefix: a zero max is +0.0 once any
    +0.0 came (a zero min -0.0 once any -0.0 came), on the reference and compiled."""
    x = np.array([[-0.0, 0.0, -0.0, -1.0], [0.0, -0.0, -0.0, 0.0]], np.float32)
    for op, reduce in [(lax.cummax, lax.reduce_max), (lax.cummin, lax.reduce_min)]:
        expected = np.stack([
            np.stack([reduce(row[i:] if reverse else row[:i + 1], (0,)) for i in range(4)])
            for row in x])
        for out in (op(x, 1, reverse), nbjax.jit(op, static_argnums=(1, 2))(x, 1, reverse)):
            np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))
            np.testing.assert_array_equal(out, expected)


def test_complex_max_and_min_are_lexicographic():
    x = np.array([1 + 5j, 1 + 7j, 2 - 1j, 2 - 3j], np.complex64)
    assert lax.reduce_max(x, (0,)) == 2 - 1j and lax.reduce_min(x, (0,)) == 1 + 5j


def test_integer_sums_and_products_wrap():
    assert lax.reduce_sum(np.array([100, 100], np.int8), (0,)) == -56
    assert lax.reduce_prod(np.array([16, 16], np.uint8), (0,)) == 0


def test_float16_sum_accumulates_in_float32():
    # Accumulating in float16 would stall at 2048 (2048 + 1 rounds back to 2048).
    assert lax.reduce_sum(np.ones(3000, np.float16), (0,)) == 3000


def test_reduction_weak_types():
    weak = nbjax.make_jaxpr(lambda: lax.reduce_sum(lax.broadcast(2.0, (3,)), (0,)))
    assert weak().out_avals[0].weak_type
    assert lax.reduce_max(lax.broadcast(2.0, (3,)), (0,)).weak_type
    assert not lax.reduce_or(lax.broadcast(2, (3,)), (0,)).weak_type
    assert not lax.reduce_sum(np.ones(3, np.float32), (0,)).weak_type


def test_reduction_jaxpr_text():
    x = np.ones((3, 4), np.float32)
    assert str(nbjax.make_jaxpr(lambda x: lax.reduce_sum(x, (0,)))(x)) == (
        "{ lambda ; a:f32[3,4]. let\n"
        "    b:f32[4] = reduce_sum[axes=(0,) out_sharding=None] a\n"
        "  in (b,) }")
    assert str(nbjax.make_jaxpr(lambda x: lax.reduce_max(x, (0, 1)))(x)) == (
        "{ lambda ; a:f32[3,4]. let b:f32[] = reduce_max[axes=(0, 1)] a in (b,) }")


def test_reduction_errors():
    f = np.ones(2, np.float32)
    with pytest.raises(TypeError, match="reduce_sum does not accept dtype bool"):
        lax.reduce_sum(np.ones(2, bool), (0,))
    with pytest.raises(TypeError, match="reduce_prod does not accept dtype bool"):
        lax.reduce_prod(np.ones(2, bool), (0,))
    with pytest.raises(TypeError, match="logical reduction requires operand dtype bool or int"):
        lax.reduce_and(f, (0,))
    with pytest.raises(TypeError, match="logical reduction .* got complex64"):
        lax.reduce_or(np.ones(2, np.complex64), (0,))
    with pytest.raises(ValueError, match=r"reduction axes \(1,\) contains out-of-bounds"):
        lax.reduce_sum(f, (1,))
    with pytest.raises(ValueError, match="out-of-bounds"):
        lax.reduce_max(f, (-1,))
    with pytest.raises(ValueError, match="duplicate value in 'axes'"):
        lax.reduce_min(np.ones((2, 2)), (0, 0))


# --- argmax / argmin -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float16,
                                   np.float32])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_argmax_argmin_match_numpy(dtype, axis):
    # Few distinct values, so ties are common: the first extremum must win.
    x = RNG.integers(0, 3, (3, 4, 5)).astype(dtype)
    for fn, ref in ((lax.argmax, np.argmax), (lax.argmin, np.argmin)):
        out = eager_and_traced(lambda x: fn(x, axis, np.int32), x)
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, ref(x, axis))
    strided = x[:, ::2]
    np.testing.assert_array_equal(lax.argmax(strided, axis, np.int32), np.argmax(strided, axis))


def test_argmax_argmin_first_nan_wins():
    x = np.array([1.0, np.nan, 5.0, np.nan], np.float32)
    assert lax.argmax(x, 0, np.int32) == 1
    assert lax.argmin(np.array([1.0, -5.0, np.nan, np.nan], np.float32), 0, np.int32) == 2
    assert lax.argmax(np.array([-0.0, 0.0], np.float32), 0, np.int32) == 0


def test_argmax_index_dtype_and_weak_type():
    x = lax.broadcast(2.0, (3,))
    out = lax.argmax(x, 0, np.int8)
    assert out.dtype == np.int8 and not out.weak_type
    assert lax.argmin(np.ones(3, np.float32), 0, np.int64).dtype == np.int32  # canonicalized
    assert lax.argmax(np.zeros((0, 3), np.float32), 1, np.int32).shape == (0,)


def test_64_bit_types_with_x64(x64):
    x = RNG.standard_normal((3, 4))
    assert lax.argmax(x, 1, np.int64).dtype == np.int64
    out = lax.reduce_sum(x, (1,))
    assert out.dtype == np.float64
    helpers.assert_close(out, x.sum(1), rtol=1e-12, scale=np.abs(x).sum(1))
    np.testing.assert_array_equal(lax.cumsum(np.arange(4, dtype=np.int64)), [0, 1, 3, 6])


def test_argmax_jaxpr_text():
    x = np.ones((3, 4), np.float32)
    assert str(nbjax.make_jaxpr(lambda x: lax.argmax(x, 1, np.int32))(x)) == (
        "{ lambda ; a:f32[3,4]. let\n"
        "    b:i32[3] = argmax[axes=(1,) index_dtype=int32] a\n"
        "  in (b,) }")


def test_argmax_errors():
    f = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="argmax does not accept dtype complex64"):
        lax.argmax(np.ones(3, np.complex64), 0, np.int32)
    with pytest.raises(TypeError, match="index_dtype must be an integer type"):
        lax.argmin(f, 0, np.float32)
    with pytest.raises(ValueError, match="Invalid axis 1 for operand shape"):
        lax.argmax(f, 1, np.int32)
    with pytest.raises(ValueError, match="require non-empty reduced dimension"):
        lax.argmax(np.zeros((0, 3), np.float32), 0, np.int32)


# --- cumulative reductions -----------------------------------------------------------------

def running(np_fn, accumulate_in=None):
    def ref(x, axis, reverse):
        wide = x if accumulate_in is None else x.astype(np.result_type(x, accumulate_in))
        flip = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
        with np.errstate(over="ignore"):
            return flip(np_fn(flip(wide), axis=axis)).astype(x.dtype)
    return ref


CUMULATIVE = {
    "cumsum": (lax.cumsum, running(np.cumsum, np.int64),
               [np.int8, np.uint8, np.int32, np.float16, np.float32, np.complex64]),
    "cumprod": (lax.cumprod, running(np.cumprod, np.int64), [np.int8, np.float32,
                                                           np.complex64]),
    "cummax": (lax.cummax, running(np.maximum.accumulate), [np.int8, np.uint8, np.float32]),
    "cummin": (lax.cummin, running(np.minimum.accumulate), [np.int32, np.float16,
                                                          np.float32]),
    "cumlogsumexp": (lax.cumlogsumexp,
                     running(lambda x, axis: np.log(np.cumsum(np.exp(x), axis=axis)),
                             np.float64),
                     [np.float16, np.float32, np.complex64]),
}
CUM_CASES = [(name, dtype) for name, (_, _, dts) in CUMULATIVE.items() for dtype in dts]


@pytest.mark.parametrize("name,dtype", CUM_CASES)
@pytest.mark.parametrize("shape,axis", [((3, 4), 0), ((3, 4), 1), ((2, 1, 5), 1),
                                        ((0, 3), 0), ((4,), 0)])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_match_numpy(name, dtype, shape, axis, reverse):
    fn, ref, _ = CUMULATIVE[name]
    x = random_array(RNG, shape, dtype)
    out = eager_and_traced(lambda x: fn(x, axis, reverse=reverse), x)
    assert out.shape == x.shape
    assert_close(out, ref(x, axis, reverse), dtype)


def test_cumulative_non_contiguous_and_nan():
    x = random_array(RNG, (4, 6), np.float32)[:, ::2].T
    helpers.assert_close(lax.cumsum(x, 1), np.cumsum(x, 1), rtol=1e-6,
                         scale=np.cumsum(np.abs(x), 1))
    np.testing.assert_array_equal(lax.cummax(np.array([1.0, np.nan, 5.0], np.float32)),
                                  [1.0, np.nan, np.nan])


def test_cumlogsumexp_handles_infinities_and_large_values():
    out = lax.cumlogsumexp(np.array([1.0, -np.inf, 5.0, np.inf], np.float32))
    helpers.assert_close(out, [1.0, 1.0, np.logaddexp(1.0, 5.0), np.inf], rtol=1e-6)
    assert np.all(np.isneginf(lax.cumlogsumexp(np.full(2, -np.inf, np.float32))))
    big = lax.cumlogsumexp(np.array([1000.0, 1000.0], np.float32))
    helpers.assert_close(big, [1000.0, 1000.0 + np.log(2.0)], rtol=1e-6)


def test_cumulative_weak_type_wrapping_and_float16():
    assert lax.cumsum(lax.broadcast(2.0, (3,)), 0).weak_type
    np.testing.assert_array_equal(lax.cumsum(np.array([100, 100], np.int8)), [100, -56])
    assert lax.cumsum(np.ones(3000, np.float16))[-1] == 3000


def test_cumulative_jaxpr_text():
    x = np.ones((3, 4), np.float32)
    assert str(nbjax.make_jaxpr(lambda x: lax.cumsum(x, 1))(x)) == (
        "{ lambda ; a:f32[3,4]. let b:f32[3,4] = cumsum[axis=1 reverse=False] a in (b,) }")


def test_cumulative_errors():
    with pytest.raises(TypeError, match="cumsum does not accept dtype bool"):
        lax.cumsum(np.ones(3, bool))
    with pytest.raises(TypeError, match="cumlogsumexp does not accept dtype int32"):
        lax.cumlogsumexp(np.ones(3, np.int32))
    with pytest.raises(ValueError, match="do not allow negative axes"):
        lax.cummax(np.ones(3, np.float32), -1)
    with pytest.raises(ValueError, match="axis 1 is out of bounds"):
        lax.cummin(np.ones(3, np.float32), 1)
    with pytest.raises(ValueError, match="out of bounds"):
        lax.cumprod(np.float32(1.0), 0)


# --- lax.reduce ----------------------------------------------------------------------------

@pytest.mark.parametrize("computation,init,reduction,dtype", [
    (lax.add, 0, "reduce_sum", np.int32), (lax.mul, 1.0, "reduce_prod", np.float32),
    (lax.max, -np.inf, "reduce_max", np.float32), (lax.min, 127, "reduce_min", np.int8),
    (lax.bitwise_and, True, "reduce_and", np.bool_), (lax.bitwise_or, 0, "reduce_or", np.uint8),
    (lambda a, b: lax.add(b, a), 0.0, "reduce_sum", np.float32),
])
def test_reduce_maps_monoids_to_reduction_primitives(computation, init, reduction, dtype):
    x = random_array(RNG, (3, 4), dtype)
    fn, ref, _ = REDUCTIONS[reduction]
    closed = nbjax.make_jaxpr(lambda x: lax.reduce(x, init, computation, (0,)))(x)
    assert [e.primitive.name for e in closed.eqns] == [reduction]
    assert_close(lax.reduce(x, init, computation, (0,)), ref(x, (0,)), dtype)


def test_reduce_combines_a_non_identity_init():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(lax.reduce(x, 10.0, lax.add, (0,)), [14.0, 16.0])
    np.testing.assert_array_equal(lax.reduce(x, 3.5, lax.max, (1,)), [3.5, 4.0])
    # An empty reduction gives the init value itself.
    assert lax.reduce(np.zeros(0, np.float32), 5.0, lax.max, (0,)) == 5.0


def _first_max(a, b):
    """An argmax's computation on (value, index) pairs: the first maximum wins (associative,
    not commutative)."""
    keep = lax.ge(a[0], b[0])
    return lax.select(keep, a[0], b[0]), lax.select(keep, a[1], b[1])


@pytest.mark.parametrize("shape, dims", [((7,), (0,)), ((3, 5), (1,)), ((4, 3, 5), (0, 2)),
                                         ((4, 3, 5), (2, 0)), ((2, 1, 6), (0, 1, 2)),
                                         ((3, 0), (1,)), ((3, 4), ())])
def test_reduce_of_several_operands_folds_them_in_order(shape, dims):
    """A variadic reduction (an argmax carrying its index), compiled or not: ties between
    equal values (there are many among small integers) go to the first, as a fold would."""
    x = RNG.integers(0, 3, shape).astype(np.float32)
    flat = np.arange(x.size, dtype=np.int32).reshape(shape)
    inits = (np.float32(-np.inf), np.int32(-1))

    def argmax(x):
        return lax.reduce((x, flat), inits, _first_max, dims)
    kept = [d for d in range(len(shape)) if d not in dims]
    rows = np.transpose(x, (*kept, *sorted(dims))).reshape(*[shape[d] for d in kept], -1)
    where = np.transpose(flat, (*kept, *sorted(dims))).reshape(rows.shape)
    for value, index in (eager_and_traced(argmax, x), nbjax.jit(argmax)(x)):
        if rows.shape[-1] == 0:
            np.testing.assert_array_equal(value, np.full(rows.shape[:-1], -np.inf))
            np.testing.assert_array_equal(index, np.full(rows.shape[:-1], -1))
            continue
        first = np.argmax(rows, axis=-1)[..., None]
        np.testing.assert_array_equal(value, np.take_along_axis(rows, first, -1)[..., 0])
        np.testing.assert_array_equal(index, np.take_along_axis(where, first, -1)[..., 0])


def test_reduce_by_any_computation_differentiates_and_batches():
    """A computation that is no single primitive (a product written ``a * b + 0``) is applied
    to whole arrays: gradients through it against finite differences, vmap against a loop."""
    x = RNG.uniform(0.5, 1.5, (3, 5)).astype(np.float32)

    def product(x):
        return lax.reduce(x, np.float32(2.0), lambda a, b: a * b + 0.0, (1,))
    np.testing.assert_allclose(product(x), 2 * np.prod(x, axis=1), rtol=1e-5)
    grads = nbjax.jacrev(product)(x)
    expected = 2 * np.prod(x, axis=1)[:, None] / x
    np.testing.assert_allclose(np.einsum("ii...->i...", grads), expected, rtol=1e-4, atol=1e-6)
    eps = 1e-3
    step = np.zeros_like(x)
    step[1, 2] = eps
    fd = (np.asarray(product(x + step), np.float64) - product(x - step)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(grads)[:, 1, 2], fd, rtol=1e-2, atol=1e-3)
    batched = nbjax.vmap(product)(np.stack([x, x[::-1]]))
    np.testing.assert_allclose(batched, np.stack([product(x), product(x[::-1])]), rtol=1e-6)


def test_reduce_errors_match_jax():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="same tree structure"):
        lax.reduce((x, x), 0.0, lax.add, (0,))
    with pytest.raises(ValueError, match="same shape"):
        lax.reduce((x, np.ones(4, np.int32)), (0.0, 0), _first_max, (0,))
    with pytest.raises(ValueError, match="non-scalar initial value"):
        lax.reduce(x, np.zeros(2, np.float32), lambda a, b: a * b + 1, (0,))
    with pytest.raises(TypeError, match="should match corresponding initial value dtypes"):
        lax.reduce((x, x), (np.float32(0), np.int32(0)), _first_max, (0,))
    with pytest.raises(ValueError, match="not distinct axes"):
        lax.reduce((x, x), (0.0, 0.0), _first_max, (0, 0))

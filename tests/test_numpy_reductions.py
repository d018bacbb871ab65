"""nbjax.numpy reductions, statistics, cumulative reductions and quantiles against NumPy:
every axis form, keepdims, where, dtype, initial, JAX's result dtypes, and the errors."""

import numpy as np
import pytest

import nbjax.numpy as jnp
from helpers import eager_and_traced, random_array

RNG = np.random.default_rng(2)

BOOL, I8, U8, I32 = np.bool_, np.int8, np.uint8, np.int32
F16, F32, C64 = np.float16, np.float32, np.complex64

AXES = [None, 0, 1, -1, (0, 2), (2, 0, 1), ()]


def tol(dtype):
    return {np.dtype(F16): 1e-2}.get(np.dtype(dtype), 1e-5)


def check(actual, expected, dtype):
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    t = tol(dtype) if np.issubdtype(dtype, np.inexact) else 0
    np.testing.assert_allclose(np.asarray(actual).astype(expected.dtype), expected, rtol=t,
                               atol=t, equal_nan=True)


def wide(x):
    """``x`` in the 64-bit type NumPy computes the reference in."""
    if np.issubdtype(x.dtype, np.complexfloating):
        return x.astype(np.complex128)
    if np.issubdtype(x.dtype, np.floating):
        return x.astype(np.float64)
    return x.astype(np.int64)


# JAX's result dtypes for sum/prod (x32): narrow ints and bools accumulate in 32 bits.
SUM_DTYPE = {BOOL: I32, I8: I32, U8: np.uint32, I32: I32, F16: F16, F32: F32, C64: C64}


@pytest.mark.parametrize("name", ["sum", "prod"])
@pytest.mark.parametrize("dtype", list(SUM_DTYPE))
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_prod(name, dtype, axis, keepdims):
    x = random_array(RNG, (2, 3, 4), dtype)
    if name == "prod" and np.issubdtype(dtype, np.floating):
        x = (x / 2 + 1).astype(dtype)  # products of 24 values that stay near 1
    out = getattr(jnp, name)(x, axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(wide(x), axis=axis, keepdims=keepdims)
    out_dtype = SUM_DTYPE[dtype]
    if np.issubdtype(out_dtype, np.integer):
        expected = expected.astype(out_dtype)
    check(out, expected, out_dtype)
    assert not out.weak_type


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
@pytest.mark.parametrize("dtype", (BOOL, I8, U8, F16, F32))
@pytest.mark.parametrize("axis", AXES)
def test_max_min(name, dtype, axis):
    x = random_array(RNG, (2, 3, 4), dtype)
    for keepdims in (False, True):
        out = getattr(jnp, name)(x, axis=axis, keepdims=keepdims)
        check(out, getattr(np, name)(x, axis=axis, keepdims=keepdims), dtype)


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dtype", (BOOL, I8, F32))
@pytest.mark.parametrize("axis", AXES)
def test_all_any(name, dtype, axis):
    x = random_array(RNG, (2, 3, 4), dtype)
    if dtype != BOOL:
        x = np.where(RNG.random(x.shape) < 0.2, 0, x).astype(dtype)
    out = getattr(jnp, name)(x, axis=axis, keepdims=True)
    check(out, getattr(np, name)(x, axis=axis, keepdims=True), BOOL)


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value")
def test_where_and_initial():
    x = random_array(RNG, (3, 4), F32)
    mask = RNG.random((3, 4)) < 0.6
    row_mask = np.array([True, False, True, True])  # broadcasts against x
    for m in (mask, row_mask):
        check(jnp.sum(x, axis=1, where=m), np.sum(x, axis=1, where=m), F32)
        check(jnp.prod(x, axis=0, where=m), np.prod(x, axis=0, where=m), F32)
        check(jnp.max(x, axis=1, where=m, initial=-5.0),
              np.max(x, axis=1, where=m, initial=-5.0), F32)
        check(jnp.mean(x, axis=0, where=m), np.mean(x, axis=0, where=m), F32)
        check(jnp.any(x > 0, axis=1, where=m), np.any(x > 0, axis=1, where=m), BOOL)
    check(jnp.sum(x, initial=10.0), np.sum(x, initial=10.0), F32)
    check(jnp.min(x, axis=0, initial=-0.5), np.min(x, axis=0, initial=-0.5), F32)
    check(jnp.max(np.zeros((0, 3), F32), axis=0, initial=2.0), np.full(3, 2.0), F32)


def test_dtype_argument():
    x = random_array(RNG, (3, 4), I8)
    check(jnp.sum(x, dtype=I8), np.sum(x, dtype=I8), I8)
    check(jnp.sum(x, axis=0, dtype=F32), np.sum(x, axis=0, dtype=np.float64), F32)
    check(jnp.prod(x, dtype=F16), np.prod(wide(x)), F16)
    check(jnp.mean(x, dtype=F16), np.mean(wide(x)), F16)
    check(jnp.sum(x, promote_integers=False), np.sum(x).astype(I8), I8)


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
def test_empty_reductions():
    empty = np.zeros((0, 3), F32)
    check(jnp.sum(empty, axis=0), np.zeros(3), F32)
    check(jnp.prod(empty), np.float64(1), F32)
    check(jnp.max(empty, axis=1), np.zeros((0,)), F32)  # nothing is reduced over size 0
    check(jnp.all(empty), np.bool_(True), BOOL)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        jnp.max(empty)
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        jnp.min(empty, axis=0)
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        jnp.argmax(empty)
    with np.errstate(invalid="ignore"):
        check(jnp.mean(empty, axis=0), np.mean(empty, axis=0), F32)


def test_reduction_errors():
    x = np.ones(3, F32)
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 1"):
        jnp.sum(x, axis=2)
    with pytest.raises(ValueError, match="axis -2 is out of bounds"):
        jnp.mean(x, axis=-2)
    with pytest.raises(ValueError, match="repeated axis"):
        jnp.sum(np.ones((2, 2)), axis=(0, 0))
    with pytest.raises(ValueError, match="max does not have an identity"):
        jnp.max(x, where=np.array([True, False, True]))
    with pytest.raises(TypeError, match="sum requires ndarray or scalar"):
        jnp.sum([1, 2])
    with pytest.raises(ValueError, match="ddof and correction"):
        jnp.var(x, ddof=1, correction=1)


def test_scalars_and_weak_inputs():
    out = jnp.sum(jnp.asarray(2.0))
    assert out.dtype == F32 and not out.weak_type
    check(jnp.max(3), np.int64(3), I32)
    check(jnp.mean(2), np.float64(2), F32)
    check(jnp.sum(np.ones((4, 6), F32)[:, ::2].T, axis=1), np.full(3, 4.0), F32)


# --- means and moments -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (BOOL, I8, F16, F32, C64))
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_mean_var_std(dtype, axis):
    x = random_array(RNG, (3, 4, 2), dtype)
    inexact = {BOOL: F32, I8: F32}.get(dtype, dtype)
    real = F32 if dtype == C64 else inexact
    check(jnp.mean(x, axis), np.mean(wide(x), axis), inexact)
    for ddof in (0, 1):
        check(jnp.var(x, axis, ddof=ddof), np.var(wide(x), axis, ddof=ddof), real)
        check(jnp.std(x, axis, ddof=ddof, keepdims=True),
              np.std(wide(x), axis, ddof=ddof, keepdims=True), real)
    check(jnp.var(x, axis, correction=1), np.var(wide(x), axis, ddof=1), real)


def test_var_and_std_take_a_mean_computed_before():
    x = random_array(RNG, (3, 5), F32)
    m = jnp.mean(x, axis=1, keepdims=True)
    check(jnp.var(x, 1, mean=m), np.var(x.astype(np.float64), 1), F32)
    shifted = np.asarray(m, np.float64) + 1  # (NumPy 2's mean= too)
    check(jnp.std(x, 1, mean=shifted.astype(np.float32)),
          np.std(x.astype(np.float64), 1, mean=shifted), F32)
    x[0, 1] = np.nan
    check(jnp.nanvar(x, 1, mean=jnp.nanmean(x, 1, keepdims=True)),
          np.nanvar(x.astype(np.float64), 1), F32)
    with pytest.raises(TypeError):
        jnp.var(x, 1, mean=jnp.mean(x, 1))  # (without the kept axis, as JAX)


def test_var_of_complex_numbers_refuses_a_real_dtype_as_jax():
    z = np.array([1 + 2j, 3 - 1j], np.complex64)
    for fn in (jnp.var, jnp.std, jnp.nanvar, jnp.nanstd):
        with pytest.raises(ValueError, match="real dtype"):
            fn(z, dtype=np.float32)
    # A complex dtype is the result's, as in JAX and NumPy: the variance, imaginary part 0.
    check(jnp.var(z, dtype=np.complex64),
          np.var(z.astype(np.complex128), dtype=np.complex128), np.complex64)


def test_var_where():
    x = random_array(RNG, (3, 5), F32)
    m = RNG.random((3, 5)) < 0.7
    m[:, 0] = m[:, 1] = True
    check(jnp.var(x, axis=1, where=m), np.var(x.astype(np.float64), axis=1, where=m), F32)
    check(jnp.std(x, axis=1, ddof=1, where=m),
          np.std(x.astype(np.float64), axis=1, ddof=1, where=m), F32)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_average(axis):
    x = random_array(RNG, (3, 4), F32)
    w = RNG.random((3, 4)).astype(F32) + 0.1
    check(jnp.average(x, axis), np.average(x, axis), F32)
    avg, total = jnp.average(x, axis, weights=w, returned=True)
    eavg, etotal = np.average(x.astype(np.float64), axis, weights=w, returned=True)
    check(avg, eavg, F32)
    check(total, etotal, F32)
    if axis is not None:
        w1 = w[0] if axis == 1 else w[:, 0]
        check(jnp.average(x, axis, weights=w1), np.average(x.astype(np.float64), axis,
                                                           weights=w1), F32)


def test_average_dtypes_and_errors():
    x = random_array(RNG, (5,), I8)
    check(jnp.average(x), np.average(wide(x)), F32)
    _, count = jnp.average(x, returned=True)
    check(count, np.float64(5), F32)
    with pytest.raises(ValueError, match="Axis must be specified"):
        jnp.average(np.ones((2, 3)), weights=np.ones(3))
    with pytest.raises(ValueError, match="Length of weights"):
        jnp.average(np.ones((2, 3)), axis=1, weights=np.ones(2))


# --- arg-extrema, counting, ptp -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", (BOOL, I8, U8, F16, F32))
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_argmax_argmin(name, dtype, axis):
    x = random_array(RNG, (3, 4, 2), dtype)
    for keepdims in (False, True):
        out = getattr(jnp, name)(x, axis=axis, keepdims=keepdims)
        check(out, getattr(np, name)(x, axis=axis, keepdims=keepdims), I32)


def test_argmax_nan_is_extreme():
    x = np.array([1.0, np.nan, 3.0, np.nan], F32)
    assert int(jnp.argmax(x)) == np.argmax(x) == 1
    assert int(jnp.argmin(x)) == np.argmin(x) == 1
    assert int(jnp.nanargmax(x)) == np.nanargmax(x) == 2
    assert int(jnp.nanargmin(x)) == np.nanargmin(x) == 0
    assert int(jnp.nanargmax(np.full(2, np.nan, F32))) == -1  # JAX's answer; NumPy raises


@pytest.mark.parametrize("axis", [None, 0, (0, 1)])
def test_count_nonzero_and_ptp(axis):
    x = np.where(RNG.random((3, 4)) < 0.5, 0, random_array(RNG, (3, 4), I8)).astype(I8)
    check(jnp.count_nonzero(x, axis=axis), np.count_nonzero(x, axis=axis), I32)
    check(jnp.count_nonzero(x, axis=axis, keepdims=True),
          np.count_nonzero(x, axis=axis, keepdims=True), I32)
    check(jnp.ptp(x, axis=axis), np.ptp(wide(x), axis=axis).astype(I8), I8)
    y = random_array(RNG, (3, 4), F32)
    check(jnp.ptp(y, axis=axis, keepdims=True), np.ptp(y, axis=axis, keepdims=True), F32)


# --- cumulative -----------------------------------------------------------------------------------

CUM_DTYPE = {BOOL: I32, I8: I8, U8: U8, I32: I32, F16: F16, F32: F32, C64: C64}


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", list(CUM_DTYPE))
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumsum_cumprod(name, dtype, axis):
    x = random_array(RNG, (3, 4), dtype)
    out = getattr(jnp, name)(x, axis=axis)
    check(out, getattr(np, name)(wide(x), axis=axis).astype(CUM_DTYPE[dtype]), CUM_DTYPE[dtype])


def test_cumsum_dtype_and_views():
    x = random_array(RNG, (4, 6), I8)[:, ::2]
    check(jnp.cumsum(x, axis=0, dtype=F32), np.cumsum(x, axis=0, dtype=np.float64), F32)
    check(jnp.cumprod(x.T, axis=1), np.cumprod(wide(x.T), axis=1).astype(I8), I8)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        jnp.cumsum(x, axis=2)


@pytest.mark.parametrize("include_initial", [False, True])
@pytest.mark.parametrize("dtype", (BOOL, I8, F32))
def test_cumulative_sum_prod(include_initial, dtype):
    x = random_array(RNG, (3, 4), dtype)
    for name, op, identity in (("cumulative_sum", np.cumsum, 0),
                               ("cumulative_prod", np.cumprod, 1)):
        # (JAX's cumulative_prod keeps narrow ints, where its cumulative_sum widens them)
        out_dtype = I8 if (name, dtype) == ("cumulative_prod", I8) else SUM_DTYPE[dtype]
        out = getattr(jnp, name)(x, axis=1, include_initial=include_initial)
        expected = op(wide(x), axis=1)
        if include_initial:
            expected = np.concatenate([np.full((3, 1), identity), expected], axis=1)
        check(out, expected.astype(out_dtype), out_dtype)
    with pytest.raises(ValueError, match="axis was not set to an explicit value"):
        jnp.cumulative_sum(x)
    check(jnp.cumulative_sum(x[0]), np.cumsum(wide(x[0])).astype(SUM_DTYPE[dtype]),
          SUM_DTYPE[dtype])


# --- NaN-ignoring variants -------------------------------------------------------------------

def with_nans(shape, dtype=F32):
    x = random_array(RNG, shape, dtype)
    x[RNG.random(shape) < 0.3] = np.nan
    return x


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanvar", "nanstd",
                                  "nanmin", "nanmax", "nancumsum", "nancumprod"])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.filterwarnings("ignore:All-NaN slice", "ignore:Mean of empty slice",
                            "ignore:Degrees of freedom", "ignore:invalid value")
def test_nan_reductions(name, axis):
    x = with_nans((4, 5))
    x[0] = np.nan  # an all-NaN row
    kwargs = {} if name.startswith("nancum") else {"keepdims": True}
    out = getattr(jnp, name)(x, axis=axis, **kwargs)
    check(out, getattr(np, name)(x.astype(np.float64), axis=axis, **kwargs), F32)


def test_nan_reductions_of_integers():
    x = random_array(RNG, (3, 4), I8)
    check(jnp.nansum(x), np.sum(wide(x)), I32)
    check(jnp.nanmax(x, axis=0), np.max(x, axis=0), I8)
    check(jnp.nanmean(x), np.mean(wide(x)), F32)
    check(jnp.nanargmin(x, axis=1), np.argmin(x, axis=1), I32)


# --- quantiles -----------------------------------------------------------------------------------

METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
@pytest.mark.parametrize("q", [0.3, np.array([0.0, 0.25, 0.5, 0.9, 1.0])])
def test_quantile(method, axis, q):
    x = random_array(RNG, (4, 5, 2), F32)
    for keepdims in (False, True):
        out = jnp.quantile(x, q, axis=axis, method=method, keepdims=keepdims)
        check(out, _quantile(x.astype(np.float64), q, axis, method, keepdims), F32)


def _quantile(x, q, axis, method, keepdims):
    """NumPy's quantile, but halfway between two values "nearest" takes the lower one, as
    JAX does (NumPy's rounds the position to even)."""
    if method != "nearest":
        return np.quantile(x, q, axis=axis, method=method, keepdims=keepdims)
    n = x.size if axis is None else np.prod([x.shape[a] for a in np.atleast_1d(axis)])
    position = np.asarray(q) * (n - 1)
    upper = (position - np.floor(position) > 0.5).reshape(np.shape(q) + (1,) * (
        x.ndim if keepdims else x.ndim - (x.ndim if axis is None else np.size(axis))))
    return np.where(upper, np.quantile(x, q, axis=axis, method="higher", keepdims=keepdims),
                    np.quantile(x, q, axis=axis, method="lower", keepdims=keepdims))


def test_nearest_quantile_takes_the_lower_value_halfway():
    """At a position halfway between two values, JAX's "nearest" takes the lower one."""
    assert float(jnp.quantile(jnp.arange(4.0), 0.5, method="nearest")) == 1.0
    np.testing.assert_array_equal(
        jnp.quantile(jnp.arange(6.0), jnp.array([0.1, 0.3, 0.5, 0.7, 0.9]), method="nearest"),
        [0.0, 1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("dtype", (I8, F16, F32))
def test_median_percentile(dtype):
    x = random_array(RNG, (5, 4), dtype)
    out_dtype = F32 if dtype == I8 else dtype
    for axis in (None, 0, 1):
        check(jnp.median(x, axis=axis), np.median(wide(x), axis=axis), out_dtype)
        check(jnp.percentile(x, 40, axis=axis), np.percentile(wide(x), 40, axis=axis),
              out_dtype)
    check(jnp.median(x, axis=0, keepdims=True), np.median(wide(x), axis=0, keepdims=True),
          out_dtype)


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_nan_quantiles():
    x = with_nans((4, 6))
    x[1] = np.nan
    x64 = x.astype(np.float64)
    check(jnp.median(x, axis=1), np.median(x64, axis=1), F32)  # NaN wherever a NaN is
    check(jnp.nanmedian(x, axis=1), np.nanmedian(x64, axis=1), F32)
    check(jnp.nanquantile(x, np.array([0.2, 0.7]), axis=0), np.nanquantile(x64, [0.2, 0.7], axis=0),
          F32)
    check(jnp.nanpercentile(x, 75, axis=1, method="lower"),
          np.nanpercentile(x64, 75, axis=1, method="lower"), F32)


def test_quantile_errors():
    with pytest.raises(ValueError, match="method must be one of"):
        jnp.quantile(np.ones(3), 0.5, method="bogus")
    with pytest.raises(ValueError, match="does not support complex input"):
        jnp.median(np.ones(3, C64))
    with pytest.raises(ValueError, match="q must be a scalar or 1-D"):
        jnp.quantile(np.ones(3), np.ones((2, 2)) / 2)


# --- whole-array comparisons -------------------------------------------------------------------

def test_allclose_array_equal_array_equiv():
    x = random_array(RNG, (3, 4), F32)
    assert bool(jnp.allclose(x, x + 1e-7)) and not bool(jnp.allclose(x, x + 1))
    nan = np.array([1.0, np.nan], F32)
    assert not bool(jnp.allclose(nan, nan)) and bool(jnp.allclose(nan, nan, equal_nan=True))
    assert bool(jnp.array_equal(x, x.copy()))
    assert not bool(jnp.array_equal(x, x[:2]))
    assert not bool(jnp.array_equal(nan, nan))
    assert bool(jnp.array_equal(nan, nan, equal_nan=True))
    assert bool(jnp.array_equiv(x[0], np.broadcast_to(x[0], (5, 4))))
    assert not bool(jnp.array_equiv(x, x[:, :2]))
    # lists are taken here, as by asarray (JAX's too), unlike in most of jnp
    assert bool(jnp.array_equal(np.array([1.0, 2.0], F32), [1, 2]))
    assert not bool(jnp.array_equal([[1, 2]], [1, 2]))
    assert bool(jnp.array_equiv([1.0], np.ones((2, 3), F32)))
    with pytest.raises(TypeError, match="copy requires ndarray or scalar arguments"):
        jnp.copy([1.0, 2.0])


# --- traced evaluation and x64 --------------------------------------------------------------------

TRACED = [
    lambda x: jnp.sum(x, axis=1, keepdims=True),
    lambda x: jnp.max(x, axis=0, where=x > 0, initial=-1.0),
    lambda x: jnp.var(x, axis=1, ddof=1),
    lambda x: jnp.argmax(x, axis=0),
    lambda x: jnp.cumulative_sum(x, axis=1, include_initial=True),
    lambda x: jnp.quantile(x, np.array([0.1, 0.5], F32), axis=1),
    lambda x: jnp.nanmedian(x),
    lambda x: jnp.average(x, axis=0, weights=x * x, returned=True),
    lambda x: jnp.nanmax(x, axis=1),
]


@pytest.mark.parametrize("fn", TRACED)
def test_traced_matches_eager(fn):
    eager_and_traced(fn, with_nans((3, 4)) if fn is TRACED[6] else random_array(RNG, (3, 4), F32))


def test_x64_dtypes(x64):
    x = random_array(RNG, (3, 4), I8)
    assert jnp.sum(x).dtype == np.int64
    assert jnp.sum(x.astype(np.uint8)).dtype == np.uint64
    # JAX 0.10: integers up to 32 bits average in float32, even under x64
    assert jnp.mean(x).dtype == np.float32
    assert jnp.mean(x.astype(np.int64)).dtype == np.float64
    assert jnp.argmax(x).dtype == np.int64
    y = random_array(RNG, (3, 4), np.float64)
    check(jnp.var(y, axis=0), np.var(y, axis=0), np.float64)
    check(jnp.median(y, axis=1), np.median(y, axis=1), np.float64)


def test_array_methods_forward_to_reductions():
    x_np = random_array(RNG, (3, 4), F32)
    x = jnp.asarray(x_np)
    check(x.sum(axis=0), x_np.sum(axis=0), F32)
    check(x.mean(), x_np.astype(np.float64).mean(), F32)
    check(x.std(ddof=1), x_np.astype(np.float64).std(ddof=1), F32)
    check(x.var(axis=1, keepdims=True), x_np.astype(np.float64).var(axis=1, keepdims=True), F32)
    check(x.max(axis=1), x_np.max(axis=1), F32)
    check(x.min(), x_np.min(), F32)
    check(x.prod(axis=1), x_np.astype(np.float64).prod(axis=1), F32)
    check(x.argmax(axis=1), x_np.argmax(axis=1), I32)
    check(x.argmin(), x_np.argmin(), I32)
    check(x.cumsum(axis=1), x_np.astype(np.float64).cumsum(axis=1), F32)
    check(x.cumprod(), x_np.astype(np.float64).cumprod(), F32)
    check(x.ptp(axis=0), np.ptp(x_np, axis=0), F32)
    check((x > 0).all(axis=0), (x_np > 0).all(axis=0), BOOL)
    check((x > 0).any(), (x_np > 0).any(), BOOL)


@pytest.mark.parametrize("shape", [(1, 3), (3, 1), (1, 1), (2, 0), (0, 1)])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value")
def test_size_one_and_size_zero_axes(shape, axis):
    x = random_array(RNG, shape, F32)
    check(jnp.sum(x, axis=axis, keepdims=True), np.sum(x, axis=axis, keepdims=True), F32)
    check(jnp.mean(x, axis=axis), np.mean(x.astype(np.float64), axis=axis), F32)
    check(jnp.max(x, axis=axis, initial=-9.0), np.max(x, axis=axis, initial=-9.0), F32)
    check(jnp.cumsum(x, axis=axis), np.cumsum(x, axis=axis), F32)
    if x.size:
        check(jnp.argmin(x, axis=axis), np.argmin(x, axis=axis), I32)
        check(jnp.median(x, axis=axis), np.median(x.astype(np.float64), axis=axis), F32)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_inverted_cdf_quantiles_with_and_without_weights(axis):
    x = random_array(RNG, (5, 7), F32)
    q = np.array([0.0, 0.1, 0.5, 0.93, 1.0], np.float32)
    for weights in (None, RNG.random((5, 7)).astype(F32),
                    None if axis is None else RNG.random(x.shape[axis]).astype(F32)):
        got = jnp.quantile(x, q, axis=axis, method="inverted_cdf", weights=weights)
        want = np.quantile(x, q, axis=axis, method="inverted_cdf", weights=weights)
        np.testing.assert_array_equal(got, want)
    x[1, 2] = np.nan
    got = jnp.nanpercentile(x, 40, axis=axis, method="inverted_cdf", weights=np.ones_like(x))
    want = np.nanpercentile(x, 40, axis=axis, method="inverted_cdf", weights=np.ones_like(x))
    np.testing.assert_array_equal(got, want)


def test_quantile_weights_need_inverted_cdf_and_may_not_be_negative():
    x = np.arange(4, dtype=F32)
    assert np.isnan(jnp.quantile(x, 0.5, method="inverted_cdf", weights=-np.ones(4)))
    with pytest.raises(NotImplementedError, match="Only method 'inverted_cdf' supports"):
        jnp.quantile(x, 0.5, weights=np.ones(4))

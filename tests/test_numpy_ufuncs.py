"""nbjax.numpy element-wise functions against NumPy: values, result dtypes, weak types,
broadcasting, special values, errors, and agreement of eager and traced evaluation."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from helpers import assert_close, eager_and_traced, random_array

RNG = np.random.default_rng(1)

BOOL, I8, U8, I32 = np.bool_, np.int8, np.uint8, np.int32
F16, F32, C64 = np.float16, np.float32, np.complex64
ALL = (BOOL, I8, U8, I32, F16, F32, C64)
REALS = (I8, U8, I32, F16, F32)
INEXACT = (F16, F32, C64)


def inexact(dtype):
    """The dtype of ``jnp.sin(x)`` for x of ``dtype``: integers and bools become float32."""
    return np.dtype(dtype) if np.issubdtype(dtype, np.inexact) else np.dtype(F32)


def tol(dtype):
    return {np.dtype(F16): 2e-2}.get(np.dtype(dtype), 2e-5)


def check(actual, expected, dtype, atol_scale=1.0):
    """Same dtype as ``dtype`` and values close to NumPy's float64 result."""
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape
    t = tol(dtype) if np.issubdtype(dtype, np.inexact) else 0
    np.testing.assert_allclose(np.asarray(actual).astype(expected.dtype), expected,
                               rtol=t, atol=t * atol_scale, equal_nan=True)


# --- unary functions with a float result -----------------------------------------------------

# name -> (NumPy reference, (low, high) domain of the random inputs)
UNARY_INEXACT = {
    "exp": (np.exp, (-3, 3)), "exp2": (np.exp2, (-3, 3)), "expm1": (np.expm1, (-3, 3)),
    "log": (np.log, (1, 9)), "log2": (np.log2, (1, 9)), "log10": (np.log10, (1, 9)),
    "log1p": (np.log1p, (0, 9)), "sqrt": (np.sqrt, (0, 9)), "sin": (np.sin, (-3, 3)),
    "cos": (np.cos, (-3, 3)), "tan": (np.tan, (-1, 1)), "arcsin": (np.arcsin, (0, 1)),
    "arccos": (np.arccos, (0, 1)), "arctan": (np.arctan, (-3, 3)), "sinh": (np.sinh, (-2, 2)),
    "cosh": (np.cosh, (-2, 2)), "tanh": (np.tanh, (-3, 3)), "arcsinh": (np.arcsinh, (-3, 3)),
    "arccosh": (np.arccosh, (1, 5)), "arctanh": (np.arctanh, (0, 0)),
    "deg2rad": (np.deg2rad, (-9, 9)), "rad2deg": (np.rad2deg, (-3, 3)),
    "reciprocal": (np.reciprocal, (1, 5)), "rint": (np.rint, (-5, 5)),
    "sinc": (np.sinc, (-3, 3)),
}
NUMPY_REAL_ONLY = ("deg2rad", "rad2deg")
REAL_ONLY = {"cbrt": (np.cbrt, (-8, 8)), "angle": (np.angle, (-5, 5))}


@pytest.mark.parametrize("name", sorted(UNARY_INEXACT))
@pytest.mark.parametrize("dtype", (BOOL, I8, U8, F16, F32, C64))
def test_unary_inexact(name, dtype):
    ref, (low, high) = UNARY_INEXACT[name]
    if dtype == C64 and name in NUMPY_REAL_ONLY:
        pytest.skip(f"numpy.{name} does not take complex numbers")
    x = random_array(RNG, (3, 4), dtype, low=low, high=high)
    out = getattr(jnp, name)(x)
    wide = np.complex128 if dtype == C64 else np.float64
    with np.errstate(divide="ignore", invalid="ignore"):  # bools include 0: log(0) = -inf
        expected = ref(x.astype(wide))
    check(out, expected, inexact(dtype), atol_scale=10)


@pytest.mark.parametrize("name", sorted(REAL_ONLY))
@pytest.mark.parametrize("dtype", (I8, F16, F32))
def test_unary_real_only(name, dtype):
    ref, (low, high) = REAL_ONLY[name]
    x = random_array(RNG, (5,), dtype, low=low, high=high)
    check(getattr(jnp, name)(x), ref(x.astype(np.float64)), inexact(dtype))


def test_angle_of_complex_and_degrees():
    z = random_array(RNG, (4,), C64, low=-5, high=5)
    check(jnp.angle(z), np.angle(z.astype(np.complex128)), F32)
    check(jnp.angle(z, deg=True), np.angle(z.astype(np.complex128), deg=True), F32,
          atol_scale=100)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "fix"])
@pytest.mark.parametrize("dtype", (I8, U8, I32, F16, F32))
def test_rounding_keeps_dtype(name, dtype):
    x = random_array(RNG, (7,), dtype, low=-5, high=5)
    x = x + (np.asarray(0.5, dtype) if np.issubdtype(dtype, np.floating) else 0)
    ref = getattr(np, name)
    check(getattr(jnp, name)(x), ref(x.astype(np.float64)), dtype)


@pytest.mark.parametrize("decimals", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", (F16, F32, C64))
def test_round(decimals, dtype):
    x = random_array(RNG, (6,), dtype, low=-50, high=50)
    out = jnp.round(x, decimals)
    assert out.dtype == dtype
    # Compare with NumPy in the same precision: both scale, round half-even, unscale.
    assert_close(np.asarray(out), np.round(x, decimals), rtol=tol(dtype))


def test_python_round_format_and_equality_with_a_list_as_jax():
    """``round(x)`` is an int array (Python's round gives an int), ``round(x, n)`` keeps the
    dtype; a list or tuple on either side of ``==``/``!=`` is a TypeError (Python's fallback
    answered False); several elements format only with an empty spec, as NumPy's."""
    x = jnp.asarray(np.array([0.5, 1.5, -2.7], np.float32))
    assert round(x).dtype == np.int32 and round(x).tolist() == [0, 2, -3]
    assert round(x, 0).dtype == np.float32 and round(jnp.asarray(2.5)).tolist() == 2
    for compare in (lambda: x == [0.5, 1.5, -2.7], lambda: x != (1,), lambda: [1] == x):
        with pytest.raises(TypeError, match="unsupported operand type"):
            compare()
    assert (x == None) is False  # noqa: E711  (other objects: Python's answer, as JAX)
    assert f"{jnp.asarray(2.5):.2f}" == "2.50" and format(x, "") == str(np.asarray(x))
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{x:.2f}"


def test_round_integers():
    x = np.array([1234, -5], np.int32)
    assert jnp.round(x, 2).dtype == np.int32
    np.testing.assert_array_equal(jnp.round(x, 2), x)
    with pytest.raises(NotImplementedError, match="decimals < 0"):
        jnp.round(x, -2)
    assert jnp.around is jnp.round


def test_rint_is_half_to_even():
    np.testing.assert_array_equal(jnp.rint(np.array([0.5, 1.5, 2.5, -0.5], F32)),
                                  [0., 2., 2., -0.])


# --- binary arithmetic -----------------------------------------------------------------------

def _wide(dtype):
    if np.issubdtype(dtype, np.complexfloating):
        return np.complex128
    return np.float64 if np.issubdtype(dtype, np.floating) else np.int64


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", (I8, U8, I32, F16, F32, C64))
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)),
                                    ((), (3,)), ((0, 3), (1, 3))])
def test_binary_arithmetic(name, dtype, shapes):
    if dtype == C64 and name in ("maximum", "minimum"):
        pytest.skip("complex ordering is tested in test_complex_maximum_is_lexicographic")
    x = random_array(RNG, shapes[0], dtype, low=0, high=5)
    y = random_array(RNG, shapes[1], dtype, low=0, high=5)
    out = getattr(jnp, name)(x, y)
    w = _wide(dtype)
    expected = getattr(np, name)(x.astype(w), y.astype(w))
    if np.issubdtype(dtype, np.integer):
        expected = expected.astype(dtype)  # wrap around as the fixed-width result does
    check(out, expected, dtype)


def test_complex_maximum_is_lexicographic():
    a = np.array([1 + 2j, 1 + 1j, 2 + 0j, -1 + 9j], C64)
    b = np.array([1 + 1j, 1 + 2j, 1 + 5j, -1 + 9j], C64)
    np.testing.assert_array_equal(jnp.maximum(a, b), np.maximum(a, b))
    np.testing.assert_array_equal(jnp.minimum(a, b), np.minimum(a, b))


def test_bool_add_and_multiply_are_or_and():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    assert jnp.add(a, b).dtype == np.bool_
    np.testing.assert_array_equal(jnp.add(a, b), a | b)
    np.testing.assert_array_equal(jnp.multiply(a, b), a & b)
    with pytest.raises(TypeError, match="bool"):
        jnp.subtract(a, b)


@pytest.mark.parametrize("dtype", ALL)
def test_divide_is_inexact(dtype):
    x = random_array(RNG, (4,), dtype, low=1, high=5)
    y = random_array(RNG, (4,), dtype, low=1, high=5) if dtype != BOOL else np.ones(4, bool)
    w = np.complex128 if dtype == C64 else np.float64
    check(jnp.divide(x, y), np.divide(x.astype(w), y.astype(w)), inexact(dtype))
    assert jnp.true_divide is jnp.divide


@pytest.mark.parametrize("dtype", (I8, U8, I32, F16, F32))
def test_floor_divide_remainder_fmod(dtype):
    low = 0 if dtype == U8 else -9
    x = random_array(RNG, (40,), dtype, low=low, high=9)
    y = random_array(RNG, (40,), dtype, low=low, high=9)
    y = np.where(y == 0, np.asarray(3, dtype), y)
    w = _wide(dtype)
    for name in ("floor_divide", "remainder", "fmod"):
        expected = getattr(np, name)(x.astype(w), y.astype(w))
        check(getattr(jnp, name)(x, y), expected, dtype)
    q, r = jnp.divmod(x, y)
    check(q, np.floor_divide(x.astype(w), y.astype(w)), dtype)
    check(r, np.remainder(x.astype(w), y.astype(w)), dtype)
    assert jnp.mod is jnp.remainder


def test_integer_division_details():
    # The remainder takes the divisor's sign; fmod the dividend's.
    np.testing.assert_array_equal(jnp.remainder(np.int8(-7), np.int8(2)), 1)
    np.testing.assert_array_equal(jnp.fmod(np.int8(-7), np.int8(2)), -1)
    np.testing.assert_array_equal(jnp.floor_divide(np.int8(-7), np.int8(2)), -4)
    np.testing.assert_array_equal(jnp.remainder(-7.0, 2.0), 1.0)
    assert jnp.floor_divide(True, True).dtype == np.int32
    with pytest.raises(TypeError, match="complex"):
        jnp.floor_divide(1j, 2j)


def test_complex_log2_and_log10_scale_each_part():
    """As JAX: each part of ``log(z)`` divided by ``log(2)`` (times ``1/log(10)``), so
    ``log2(0)`` is ``-inf+0j`` and ``log2(inf+1j)`` is ``inf+0j`` (complex arithmetic with
    ``log(2)+0j`` would make their imaginary parts ``inf * 0``, NaN)."""
    z = np.array([0j, complex(np.inf, 1), complex(-2.5, np.inf), 1 + 2j], np.complex64)
    with np.errstate(divide="ignore"):
        log = np.log(z)
    for fn, scale in ((jnp.log2, np.log(np.float32(2))), (jnp.log10, None)):
        got = np.asarray(fn(z))
        if scale is not None:
            want_re, want_im = log.real / scale, log.imag / scale
        else:
            k = np.float32(1 / np.log(10))
            want_re, want_im = log.real * k, log.imag * k
        assert got.dtype == np.complex64
        assert_close(got.real, want_re, rtol=1e-6)
        assert_close(got.imag, want_im, rtol=1e-6)
    assert np.asarray(jnp.log2(z[:2])).tolist() == [complex(-np.inf, 0), complex(np.inf, 0)]


def test_integer_division_by_zero_as_jax():
    """JAX's answers, which are not NumPy's for the quotient: the remainder (and fmod) by
    zero is 0 (a zero divisor counts as one); the floor quotient is lax's -1 (all bits
    set), one less where the dividend is nonzero (its sign differs from the divisor's);
    INT_MIN // -1 wraps to INT_MIN."""
    x, zero = np.array([7, -7, 0, -128, 127], np.int8), np.zeros(5, np.int8)
    for fn in (jnp.remainder, jnp.fmod, lambda a, b: jnp.asarray(a) % b):
        np.testing.assert_array_equal(fn(x, zero), [0, 0, 0, 0, 0])
        np.testing.assert_array_equal(fn(x.astype(np.uint8), zero.astype(np.uint8)), 0)
    np.testing.assert_array_equal(jnp.floor_divide(x, zero), [-2, -2, -1, -2, -2])
    np.testing.assert_array_equal(jnp.divmod(x, zero)[0], [-2, -2, -1, -2, -2])
    np.testing.assert_array_equal(jnp.floor_divide(x.astype(np.uint8), zero.astype(np.uint8)),
                                  255)
    np.testing.assert_array_equal(jnp.floor_divide(np.int8(-128), np.int8(-1)), -128)
    np.testing.assert_array_equal(jnp.remainder(np.int8(-128), np.int8(-1)), 0)


@pytest.mark.parametrize("dtype", (I8, U8, I32))
def test_power_integers(dtype):
    x = random_array(RNG, (20,), dtype, low=0, high=4)
    y = random_array(RNG, (20,), dtype, low=0, high=5)
    out = jnp.power(x, y)
    check(out, np.power(x.astype(np.int64), y.astype(np.int64)).astype(dtype), dtype)
    # A concrete integer exponent keeps the base's dtype.
    check(jnp.power(x, 3), (x.astype(np.int64) ** 3).astype(dtype), dtype)
    check(jnp.power(x, np.int32(2)), (x.astype(np.int64) ** 2).astype(dtype), dtype)


def test_power_of_zero_and_negative_exponent():
    np.testing.assert_array_equal(jnp.power(np.array([0, 0, 2], I32), np.array([0, 3, 0], I32)),
                                  [1, 0, 1])
    with pytest.raises(TypeError, match="negative"):
        jnp.power(np.int32(2), -1)


@pytest.mark.parametrize("dtype", (F16, F32, C64))
def test_power_floats(dtype):
    x = random_array(RNG, (3, 4), dtype, low=0.5, high=3)
    y = random_array(RNG, (4,), dtype, low=-2, high=2)
    w = _wide(dtype)
    check(jnp.power(x, y), np.power(x.astype(w), y.astype(w)), dtype)
    check(jnp.float_power(x, y), np.power(x.astype(w), y.astype(w)), dtype)
    x_arr = jnp.asarray(x)
    check(x_arr ** 2, x.astype(w) ** 2, dtype)


def test_python_int_exponent_stages_integer_pow():
    closed = nbjax.make_jaxpr(lambda x: x ** 2)(np.ones(3, F32))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["integer_pow"]
    assert closed.jaxpr.eqns[0].params["y"] == 2
    closed = nbjax.make_jaxpr(jnp.power)(np.ones(3, F32), np.ones(3, F32))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["pow"]


@pytest.mark.parametrize("dtype", (I8, I32, F16, F32, C64))
def test_negative_positive_abs_sign_square(dtype):
    x = random_array(RNG, (9,), dtype, low=-5, high=5)
    w = _wide(dtype)
    check(jnp.negative(x), -x.astype(w), dtype)
    check(jnp.positive(x), x.astype(w), dtype)
    real = np.dtype(F32) if dtype == C64 else dtype
    check(jnp.abs(x), np.abs(x.astype(w)), real)
    check(jnp.sign(x), np.sign(x.astype(w)) if dtype != C64 else x / np.abs(x), dtype)
    check(jnp.square(x), np.square(x.astype(w)).astype(x.dtype).astype(w), dtype)
    assert jnp.absolute is jnp.abs


def test_abs_unsigned_and_bool_are_identity():
    x = np.array([0, 7, 255], U8)
    assert jnp.abs(x).dtype == U8
    np.testing.assert_array_equal(jnp.abs(x), x)
    np.testing.assert_array_equal(jnp.fabs(np.array([-1.5], F32)), [1.5])


def test_sign_rejects_bool():
    with pytest.raises(TypeError, match="sign"):
        jnp.sign(np.array([True]))


# --- weak types and promotion -----------------------------------------------------------------

@pytest.mark.parametrize("args, dtype, weak", [
    ((1, 2), I32, True),
    ((1, 2.0), F32, True),
    ((np.ones(2, I8), 1), I8, False),
    ((np.ones(2, U8), 10), U8, False),
    ((np.ones(2, I8), 1.5), F32, None),
    ((np.ones(2, F16), 1.5), F16, False),
    ((np.ones(2, I8), np.ones(2, U8)), np.int16, False),
    ((np.ones(2, F16), np.ones(2, I32)), F16, False),
    ((np.ones(2, F32), 1j), C64, False),
    ((np.float32(1), 2), F32, False),
])
def test_add_promotion(args, dtype, weak):
    out = jnp.add(*args)
    assert out.dtype == np.dtype(dtype)
    if weak is not None:
        assert out.weak_type == weak


def test_unary_weak_types():
    assert jnp.sin(2).weak_type and jnp.sin(2).dtype == F32
    assert jnp.sin(2.0).weak_type
    assert not jnp.sin(np.float32(2)).weak_type
    assert jnp.floor(2).dtype == I32 and jnp.floor(2).weak_type
    assert jnp.negative(jnp.asarray(2.0)).weak_type


# Where JAX's result is not typed as promoting its operands would type it (its code converts
# to a plain dtype or compares with a strongly typed constant): what decides how the result
# promotes next, shown by adding a float16 (a weak float32 gives way to it, a strong one not).
I32_ARRAY, BOOLS = np.arange(3, dtype=I32), np.array([True, False, True])


@pytest.mark.parametrize("expression, weak", [
    (lambda: jnp.hypot(I32_ARRAY, 1.5), False), (lambda: jnp.hypot(1.5, 2.5), True),
    (lambda: jnp.heaviside(I32_ARRAY, 0.5), False), (lambda: jnp.heaviside(0.5, I32_ARRAY), True),
    (lambda: jnp.power(1.5, I32_ARRAY), False), (lambda: jnp.power(I32_ARRAY, 1.5), True),
    (lambda: jnp.power(1.5, BOOLS), True), (lambda: jnp.power(3, BOOLS), False),
    (lambda: jnp.gcd(BOOLS, 4), False), (lambda: jnp.lcm(3, 4), True),
    (lambda: jnp.rint(jnp.asarray(3)), False), (lambda: jnp.rint(3.0), True),
    (lambda: jnp.signbit(jnp.asarray(3)), False), (lambda: jnp.spacing(1.5), False),
    (lambda: jnp.isinf(jnp.asarray(3.0)), False), (lambda: jnp.isnan(jnp.asarray(3)), True),
    (lambda: jnp.isnan(jnp.asarray(3.0)), True), (lambda: jnp.isfinite(jnp.asarray(3)), False),
    (lambda: jnp.isposinf(jnp.asarray(1.0)), False), (lambda: jnp.isclose(1, 2), False),
])
def test_weak_type_of_results_as_in_jax(expression, weak):
    out = expression()
    assert out.weak_type == weak
    if jnp.issubdtype(out.dtype, jnp.floating):
        following = out + np.ones(3, np.float16)
        assert following.dtype == (np.float16 if weak else out.dtype)


@pytest.mark.parametrize("name", ["hypot", "heaviside", "gcd", "lcm", "power", "isclose"])
def test_lists_are_refused_as_jax_refuses_them(name):
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        getattr(jnp, name)([1, 2], 3)


def test_spacing_signs_as_jax():
    """Away from zero by the sign bit (-0.0's spacing is negative); float16's towards +inf,
    as NumPy's and JAX's."""
    x = np.array([-1.5, 1.5, 0.0, -0.0], np.float32)
    tiny = np.float32(1.4e-45)
    np.testing.assert_array_equal(np.asarray(jnp.spacing(x)),
                                  np.array([-2 ** -23, 2 ** -23, tiny, -tiny], np.float32))
    half = np.array([-1.5, 1.5, -0.0], np.float16)
    np.testing.assert_array_equal(np.asarray(jnp.spacing(half)), np.spacing(half))
    assert (np.asarray(jnp.spacing(half)) > 0).all()


def test_round_refuses_booleans():
    with pytest.raises(ValueError, match="booleans"):
        jnp.round(np.array([True]))


# --- special values ---------------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0])


@pytest.mark.parametrize("dtype", (F16, F32))
def test_classification(dtype):
    x = SPECIAL.astype(dtype)
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit"):
        out = getattr(jnp, name)(x)
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out, getattr(np, name)(x), err_msg=name)


def test_classification_of_complex_and_integers():
    z = np.array([complex(np.nan, 0), complex(0, np.inf), 1 + 1j], C64)
    for name in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(getattr(jnp, name)(z), getattr(np, name)(z))
    i = np.array([1, -2], I32)
    np.testing.assert_array_equal(jnp.isnan(i), [False, False])
    np.testing.assert_array_equal(jnp.isfinite(i), [True, True])
    np.testing.assert_array_equal(jnp.signbit(i), [False, True])
    np.testing.assert_array_equal(jnp.isreal(z), np.isreal(z))
    np.testing.assert_array_equal(jnp.iscomplex(z), np.iscomplex(z))
    np.testing.assert_array_equal(jnp.isreal(i), [True, True])


@pytest.mark.parametrize("dtype", (F16, F32))
def test_nan_to_num(dtype):
    x = SPECIAL.astype(dtype)
    check(jnp.nan_to_num(x), np.nan_to_num(x), dtype)
    check(jnp.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0),
          np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0), dtype)
    z = np.array([complex(np.nan, np.inf)], C64)
    check(jnp.nan_to_num(z), np.nan_to_num(z), C64)
    assert jnp.nan_to_num(np.array([3], I8)).dtype == I8


def test_logaddexp_is_stable():
    x = np.array([-np.inf, np.inf, 1000.0, -1000.0, 0.0, 3.0], F32)
    y = np.array([-np.inf, np.inf, 1000.0, -1001.0, -np.inf, -2.0], F32)
    check(jnp.logaddexp(x, y), np.logaddexp(x, y), F32)
    check(jnp.logaddexp2(x, y), np.logaddexp2(x, y), F32)


@pytest.mark.parametrize("dtype", (I8, F16, F32))
def test_binary_float_functions(dtype):
    x = random_array(RNG, (3, 4), dtype, low=-4, high=4)
    y = random_array(RNG, (4,), dtype, low=-4, high=4)
    w = np.float64
    for name in ("arctan2", "hypot", "copysign", "heaviside", "logaddexp", "logaddexp2"):
        check(getattr(jnp, name)(x, y), getattr(np, name)(x.astype(w), y.astype(w)),
              inexact(dtype), atol_scale=10)


def test_hypot_extremes():
    x = np.array([2e38, 3e38, np.inf, 0.0, np.nan], F32)
    y = np.array([2e38, 3e38, np.nan, 0.0, 1.0], F32)
    with np.errstate(over="ignore"):  # 3e38 * sqrt(2) overflows float32, as it should
        expected = np.hypot(x.astype(np.float64), y.astype(np.float64)).astype(F32)
    check(jnp.hypot(x, y), expected, F32)


def test_copysign_uses_sign_bit():
    np.testing.assert_array_equal(jnp.copysign(np.float32(2), np.array([-0.0, 0.0], F32)),
                                  [-2.0, 2.0])


@pytest.mark.parametrize("dtype", (F16, F32))
def test_nextafter(dtype):
    x = random_array(RNG, (6,), dtype, low=-5, high=5)
    y = random_array(RNG, (6,), dtype, low=-5, high=5)
    out = jnp.nextafter(x, y)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.nextafter(x, y))


@pytest.mark.parametrize("dtype", (F16, F32))
def test_frexp_ldexp_modf(dtype):
    x = np.concatenate([random_array(RNG, (8,), dtype, low=-1000, high=1000),
                        np.array([0, 1, 0.5, -4], dtype)])
    if dtype == F32:
        x = np.concatenate([x, np.array([1e-40, -3e38], dtype)])
    m, e = jnp.frexp(x)
    em, ee = np.frexp(x)
    assert m.dtype == dtype and e.dtype == np.int32
    np.testing.assert_array_equal(m, em)
    np.testing.assert_array_equal(e, ee)
    np.testing.assert_array_equal(jnp.ldexp(m, e), x)
    exps = RNG.integers(-20, 20, x.shape).astype(np.int32)
    out = jnp.ldexp(x, exps)
    assert out.dtype == dtype
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, np.ldexp(x, exps))
    frac, whole = jnp.modf(x)
    efrac, ewhole = np.modf(x)
    np.testing.assert_array_equal(whole, ewhole)
    assert_close(frac, efrac, rtol=tol(dtype))


@pytest.mark.parametrize("dtype", (F16, F32))
def test_ldexp_at_extreme_exponents_as_numpy(dtype):
    """A factor 2**e that alone overflows or underflows: 0 * 2**255 is 0, a subnormal
    scaled up to a normal number is exact, and products beyond the range saturate."""
    info = np.finfo(dtype)
    x = np.array([0, 1, -1, info.smallest_subnormal, info.max, 3, 0.5, np.inf, np.nan, -0.0],
                 dtype)
    e = np.array([255, 300, -300, 2 * -info.minexp + info.nmant, -2 * info.maxexp, 5,
                  -2 ** 31 + 1, -3, 2 ** 31 - 1, 7], I32)
    with np.errstate(over="ignore"):
        want = np.ldexp(x, e)
    for ldexp in (jnp.ldexp, nbjax.jit(jnp.ldexp)):
        np.testing.assert_array_equal(np.asarray(ldexp(x, e)), want)


def test_ldexp_requires_real_base_and_integer_exponent():
    with pytest.raises(ValueError, match="ldexp not supported"):
        jnp.ldexp(1.0, 2.0)
    with pytest.raises(ValueError, match="ldexp not supported"):
        jnp.ldexp(np.ones(2, C64), 2)


@pytest.mark.parametrize("name, args", [("hypot", (1j, 1.0)), ("signbit", (1j,)),
                                        ("clip", (np.ones(2, C64), 0, 1)),
                                        ("isposinf", (1j,))])
def test_not_defined_for_complex(name, args):
    with pytest.raises(ValueError, match="not well defined for complex|cannot be clipped"):
        getattr(jnp, name)(*args)


def test_square_of_bools_counts_as_int():
    out = jnp.square(np.array([True, False]))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [1, 0])


def test_frexp_special_values():
    m, e = jnp.frexp(np.array([np.inf, -np.inf, np.nan, 0.0], F32))
    em, ee = np.frexp(np.array([np.inf, -np.inf, np.nan, 0.0], F32))
    np.testing.assert_array_equal(m, em)
    np.testing.assert_array_equal(e, ee)


@pytest.mark.parametrize("dtype", (I8, U8, I32))
def test_gcd_lcm(dtype):
    low = 0 if dtype == U8 else -9  # keeps every lcm inside int8
    x = random_array(RNG, (3, 5), dtype, low=low, high=9)
    y = random_array(RNG, (5,), dtype, low=low, high=9)
    w = np.int64
    check(jnp.gcd(x, y), np.gcd(x.astype(w), y.astype(w)), dtype)
    check(jnp.lcm(x, y), np.lcm(x.astype(w), y.astype(w)).astype(dtype), dtype)


def test_lcm_wraps_around_as_numpy():
    x = np.array([2 ** 31 - 1, -6, 2 ** 30, 0], I32)
    y = np.array([128, 4, 6, 5], I32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(jnp.lcm(x, y), np.lcm(x, y))
    np.testing.assert_array_equal(nbjax.jit(jnp.lcm)(x, y), np.lcm(x, y))


def test_gcd_rejects_floats():
    with pytest.raises(ValueError, match="integers"):
        jnp.gcd(1.0, 2)


@pytest.mark.parametrize("dtype", (F16, F32))
def test_sinc_at_zero_and_heaviside_at_zero(dtype):
    np.testing.assert_array_equal(jnp.sinc(np.zeros(2, dtype)), [1, 1])
    out = jnp.heaviside(np.array([-1, 0, 2], dtype), np.array(0.25, dtype))
    np.testing.assert_array_equal(out, [0, 0.25, 1])
    assert out.dtype == dtype
    specials = np.array([np.nan, -np.inf, np.inf, -0.0], dtype)
    np.testing.assert_array_equal(jnp.heaviside(specials, dtype(0.5)),
                                  np.heaviside(specials, dtype(0.5)))


# --- comparisons, min/max, clip ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["equal", "not_equal", "less", "less_equal", "greater",
                                  "greater_equal"])
@pytest.mark.parametrize("dtype", (BOOL, I8, U8, F16, F32))
def test_comparisons(name, dtype):
    x = random_array(RNG, (3, 4), dtype, low=0, high=3)
    y = random_array(RNG, (1, 4), dtype, low=0, high=3)
    out = getattr(jnp, name)(x, y)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, getattr(np, name)(x, y))
    np.testing.assert_array_equal(getattr(jnp, name)(x, 2), getattr(np, name)(x, 2))


def test_complex_equality():
    z = random_array(RNG, (5,), C64, low=-5, high=5)
    np.testing.assert_array_equal(jnp.equal(z, z.conj()), z == z.conj())


def test_max_min_nan_handling():
    x = np.array([np.nan, 1.0, np.nan, 3.0], F32)
    y = np.array([2.0, np.nan, np.nan, 1.0], F32)
    for name in ("maximum", "minimum", "fmax", "fmin"):
        np.testing.assert_array_equal(getattr(jnp, name)(x, y), getattr(np, name)(x, y),
                                      err_msg=name)


@pytest.mark.parametrize("dtype", (I8, U8, F32))
def test_clip(dtype):
    x = random_array(RNG, (3, 5), dtype, low=0, high=9)
    check(jnp.clip(x, 2, 6), np.clip(x, 2, 6), dtype)
    check(jnp.clip(x, max=4), np.minimum(x, 4), dtype)
    check(jnp.clip(x, min=np.full((5,), 3, dtype)), np.maximum(x, 3), dtype)
    check(jnp.clip(x, a_min=1, a_max=5), np.clip(x, 1, 5), dtype)
    check(jnp.clip(x), x, dtype)


def test_clip_to_float_bounds_promotes():
    out = jnp.clip(np.arange(5, dtype=I32), 1, 3.5)
    assert out.dtype == F32
    np.testing.assert_array_equal(out, [1, 1, 2, 3, 3.5])


# --- logical and bitwise ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (BOOL, I8, F32))
def test_logical(dtype):
    x = random_array(RNG, (4, 3), dtype, low=-1, high=1)
    y = random_array(RNG, (3,), dtype, low=-1, high=1)
    for name in ("logical_and", "logical_or", "logical_xor"):
        out = getattr(jnp, name)(x, y)
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out, getattr(np, name)(x, y))
    np.testing.assert_array_equal(jnp.logical_not(x), np.logical_not(x))


@pytest.mark.parametrize("dtype", (BOOL, I8, U8, I32))
def test_bitwise(dtype):
    x = random_array(RNG, (4, 3), dtype, low=0, high=100)
    y = random_array(RNG, (3,), dtype, low=0, high=100)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        check(getattr(jnp, name)(x, y), getattr(np, name)(x, y), dtype)
    check(jnp.invert(x), np.invert(x), dtype)
    check(jnp.bitwise_not(x), np.invert(x), dtype)


@pytest.mark.parametrize("dtype", (I8, U8, I32))
def test_shifts(dtype):
    bits = np.iinfo(dtype).bits
    x = random_array(RNG, (12,), dtype, low=-100, high=100)
    s = RNG.integers(0, bits, 12).astype(dtype)
    check(jnp.left_shift(x, s), np.left_shift(x, s), dtype)
    check(jnp.right_shift(x, s), np.right_shift(x, s), dtype)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "left_shift", "right_shift"])
def test_bitwise_rejects_floats(name):
    with pytest.raises(TypeError, match="does not accept dtype float32"):
        getattr(jnp, name)(np.ones(2, F32), np.ones(2, F32))


def test_invert_rejects_floats():
    with pytest.raises(TypeError, match="float32"):
        jnp.invert(1.0)


# --- closeness and dtype conversion -----------------------------------------------------------

def test_isclose():
    a = np.array([1.0, 1.0, np.inf, np.inf, np.nan, 0.0, 1e-9], F32)
    b = np.array([1.0 + 1e-6, 1.1, np.inf, -np.inf, np.nan, 1e-9, 0.0], F32)
    np.testing.assert_array_equal(jnp.isclose(a, b), np.isclose(a, b))
    np.testing.assert_array_equal(jnp.isclose(a, b, equal_nan=True),
                                  np.isclose(a, b, equal_nan=True))
    np.testing.assert_array_equal(jnp.isclose(a, b, rtol=0.2, atol=0),
                                  np.isclose(a, b, rtol=0.2, atol=0))
    z = np.array([1 + 1j, 1 + 2j], C64)
    np.testing.assert_array_equal(jnp.isclose(z, 1 + 1j), np.isclose(z, 1 + 1j))
    np.testing.assert_array_equal(jnp.isclose(np.arange(3), 1), [False, True, False])


@pytest.mark.filterwarnings("ignore:Casting complex values")
@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", (BOOL, I8, U8, I32, F16, F32, C64))
def test_astype(src, dst):
    x = random_array(RNG, (5,), src, low=0, high=100)
    out = jnp.astype(x, dst)
    assert out.dtype == dst and not out.weak_type
    if src == C64 and dst != C64:
        x = x.real
    np.testing.assert_array_equal(out, x.astype(dst))
    assert jnp.asarray(x).astype(dst).dtype == dst


def test_astype_strips_weak_type():
    out = jnp.astype(jnp.asarray(2.0), F32)
    assert out.dtype == F32 and not out.weak_type


def test_real_imag_conj():
    z = random_array(RNG, (2, 3), C64, low=-5, high=5)
    check(jnp.real(z), z.real, F32)
    check(jnp.imag(z), z.imag, F32)
    check(jnp.conj(z), z.conj(), C64)
    x = random_array(RNG, (3,), F32, low=-5, high=5)
    check(jnp.imag(x), np.zeros(3), F32)
    check(jnp.conjugate(x), x, F32)


# --- arrays that are views, scalars, errors ----------------------------------------------------

def test_non_contiguous_inputs():
    base = random_array(RNG, (4, 6), F32, low=0.5, high=2)
    strided, transposed = base[:, ::2], base.T[::2]
    assert not strided.flags.c_contiguous and not transposed.flags.c_contiguous
    check(jnp.exp(strided), np.exp(strided.astype(np.float64)), F32)
    check(jnp.add(strided, strided[0]), strided + strided[0], F32)
    check(jnp.remainder(transposed, 0.3), np.remainder(transposed.astype(np.float64), 0.3), F32,
          atol_scale=10)


def test_numpy_and_python_scalars():
    check(jnp.multiply(np.float32(2), 3), np.float64(6), F32)
    check(jnp.sqrt(4), np.float64(2), F32)
    assert jnp.add(np.int8(1), 1).dtype == I8


def test_incompatible_shapes_and_bad_arguments():
    with pytest.raises(ValueError, match="add.*incompatible shapes"):
        jnp.add(np.ones(3), np.ones(4))
    with pytest.raises(TypeError, match="add requires ndarray or scalar"):
        jnp.add([1, 2], 1)
    with pytest.raises(TypeError, match="floor does not accept dtype complex64"):
        jnp.floor(np.ones(2, C64))
    with pytest.raises(TypeError):
        jnp.exp(np.ones(2), np.ones(2))


# --- traced evaluation -------------------------------------------------------------------------

TRACED = [
    ("add", 2), ("divide", 2), ("floor_divide", 2), ("remainder", 2), ("power", 2),
    ("logaddexp", 2), ("hypot", 2), ("fmax", 2), ("copysign", 2), ("isclose", 2),
    ("exp", 1), ("log1p", 1), ("sinc", 1), ("round", 1), ("trunc", 1), ("isnan", 1),
    ("signbit", 1), ("nan_to_num", 1), ("frexp", 1), ("modf", 1), ("clip", 1),
]


@pytest.mark.parametrize("name, nargs", TRACED)
@pytest.mark.parametrize("dtype", (I32, F32))
def test_traced_matches_eager(name, nargs, dtype):
    args = [random_array(RNG, (2, 3), dtype, low=1, high=6) for _ in range(nargs)]
    eager_and_traced(getattr(jnp, name), *args)


def test_traced_integer_functions():
    x = random_array(RNG, (2, 3), I32, low=-9, high=9)
    y = random_array(RNG, (3,), I32, low=-9, high=9)
    for fn in (jnp.gcd, jnp.lcm, jnp.right_shift, jnp.divmod, jnp.power):
        eager_and_traced(fn, x, np.abs(y).astype(I32))


def test_x64_dtypes(x64):
    x = random_array(RNG, (5,), np.int64, low=1, high=9)
    y = random_array(RNG, (5,), np.float64, low=1, high=9)
    assert jnp.add(x, 1).dtype == np.int64
    assert jnp.sin(x).dtype == np.float64
    assert jnp.add(x, y).dtype == np.float64
    assert jnp.sin(2.0).dtype == np.float64
    check(jnp.floor_divide(x, 3), x // 3, np.int64)
    check(jnp.log(y), np.log(y), np.float64)
    m, e = jnp.frexp(y)
    np.testing.assert_array_equal(m, np.frexp(y)[0])
    assert jnp.signbit(-y).dtype == np.bool_ and bool(np.all(jnp.signbit(-y)))


def test_operators_and_methods_forward_here():
    a_np = random_array(RNG, (3, 4), I32, low=1, high=9)
    b_np = random_array(RNG, (4,), I32, low=1, high=9)
    a, b = jnp.asarray(a_np), jnp.asarray(b_np)
    check(a // b, a_np // b_np, I32)
    check(a % -b, a_np % -b_np, I32)
    check(a / b, a_np / b_np, F32)
    check(a ** 2, a_np ** 2, I32)
    check(2 ** b, 2 ** b_np, I32)
    q, r = divmod(-a, b)
    check(q, -a_np // b_np, I32)
    check(r, -a_np % b_np, I32)
    check(~a, ~a_np, I32)
    check(a & b | (a ^ 3), a_np & b_np | (a_np ^ 3), I32)
    check(a << 2 >> 1, a_np << 2 >> 1, I32)
    check(abs(-a), a_np, I32)
    check(a.clip(2, 5), a_np.clip(2, 5), I32)
    check(a.astype(F16), a_np.astype(F16), F16)
    check(round(jnp.asarray(np.float32(2.567)), 2), 2.57, F32)
    z = jnp.asarray(np.array([1 + 2j], C64))
    check(z.real, [1.0], F32)
    check(z.imag, [2.0], F32)
    check(z.conj(), [1 - 2j], C64)


def test_power_one_half_at_negative_infinity_and_negative_zero_follows_c_pow():
    """x ** 0.5 is pow, not sqrt: +inf at -inf and +0 at -0 (XLA and C), eagerly and under
    jit (NumPy's array ** 0.5 calls sqrt, which gives nan and -0)."""
    x = np.array([-np.inf, -0.0, -1.0, 4.0, np.inf, np.nan], np.float32)
    want = np.array([np.inf, 0.0, np.nan, 2.0, np.inf, np.nan], np.float32)
    for got in (jnp.asarray(x) ** 0.5, nbjax.jit(lambda x: x ** 0.5)(x)):
        np.testing.assert_array_equal(got, want)
        assert not np.signbit(np.asarray(got)[1])


def test_square_is_one_square_equation_as_in_jax():
    """``jnp.square`` stages JAX's ``square`` primitive (not ``integer_pow``), squares a
    complex number as XLA does (the real part ``(a - b)(a + b)`` stays finite where
    ``a² - b²`` overflows) and makes bools integers."""
    text = str(nbjax.make_jaxpr(jnp.square)(np.float32(2)))
    assert "square a" in text and "integer_pow" not in text
    z = np.complex64(1e30 + 1e30j)
    out = complex(jnp.square(z))
    assert out.real == 0 and out.imag == np.inf
    assert complex(jnp.square(np.complex64(3 + 4j))) == -7 + 24j
    assert jnp.square(True).dtype == np.int32 and int(jnp.square(True)) == 1
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    np.testing.assert_array_equal(nbjax.jit(jnp.square)(x), x * x)
    np.testing.assert_allclose(nbjax.vmap(nbjax.grad(jnp.square))(x), 2 * x)

"""Element-wise lax primitives against NumPy and against the rules JAX (XLA) follows.

Every primitive runs on random inputs of each dtype it accepts (non-contiguous views), eagerly
and through make_jaxpr + eval_jaxpr. Where XLA's semantics differ from NumPy's (integer division,
shifts, float-to-int conversion, signed zeros, ties in round) the expectation is computed from
the rule itself, written out on Python integers or floats, never from nbjax's own code.
"""

import builtins
import dataclasses
import math
import re
import warnings
import zlib

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.core import check_jaxpr, eval_jaxpr
from helpers import assert_close, random_array

# --- dtypes --------------------------------------------------------------------------------

BOOL = [np.dtype(np.bool_)]
SINTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32)]
UINTS = [np.dtype(t) for t in (np.uint8, np.uint16, np.uint32)]
INTS = SINTS + UINTS
FLOATS = [np.dtype(np.float16), np.dtype(np.float32)]
COMPLEXES = [np.dtype(np.complex64)]
# Checked with x64 enabled.
INTS64 = [np.dtype(np.int64), np.dtype(np.uint64)]
FLOATS64, COMPLEXES64 = [np.dtype(np.float64)], [np.dtype(np.complex128)]

NUMBER = INTS + FLOATS + COMPLEXES + INTS64 + FLOATS64 + COMPLEXES64
INEXACT = FLOATS + COMPLEXES + FLOATS64 + COMPLEXES64
REAL = FLOATS + FLOATS64
INTEGER = INTS + INTS64
ORDERED = BOOL + INTEGER + REAL
ANY = BOOL + NUMBER

TOLERANCES = {  # (rtol, atol) by result dtype; integer and bool results must be exact
    np.dtype(np.float16): (2e-3, 1e-4), np.dtype(np.float32): (3e-6, 1e-7),
    np.dtype(np.float64): (1e-13, 1e-15), np.dtype(np.complex64): (1e-5, 1e-6),
    np.dtype(np.complex128): (1e-12, 1e-14),
}


def is_64(dtype):
    return np.dtype(dtype) in INTS64 + FLOATS64 + COMPLEXES64


# --- inputs --------------------------------------------------------------------------------

def _rng(*keys):
    return np.random.default_rng(zlib.crc32(repr(keys).encode()))


def op_operand(rng, dtype, shape, domain):
    """Random values of ``dtype`` for an operation: floats uniform on ``domain``; complex numbers
    with real part on ``domain`` and imaginary part of magnitude in [0.1, 2] (off the branch
    cuts on the real axis); integers small (to hit 0, 1 and the shift widths) with their
    extremes and a quarter across the whole range (to overflow)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        out = random_array(rng, shape, dtype, low=domain[0], high=domain[1])
        out.imag = rng.choice([-1, 1], shape) * rng.uniform(0.1, 2, shape)
        return out
    if dtype.kind in "iu":
        return random_array(rng, shape, dtype, low=-3, high=69, special=True)
    return random_array(rng, shape, dtype, low=domain[0], high=domain[1])


def noncontiguous(a):
    """The same values as a strided view into a larger array (every other column)."""
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    view = big[..., ::2]
    assert a.ndim < 2 or not view.flags.c_contiguous
    return view


# --- references ----------------------------------------------------------------------------

def wrap(value, dtype):
    """A Python int reduced modulo 2**bits into ``dtype``'s range (two's complement)."""
    info = np.iinfo(dtype)
    return (value - info.min) % (1 << info.bits) + info.min


def widen(x):
    """float16/32 -> float64 and complex64 -> complex128, exactly, for reference computations."""
    if np.issubdtype(x.dtype, np.complexfloating):
        return x.astype(np.complex128)
    if np.issubdtype(x.dtype, np.floating):
        return x.astype(np.float64)
    return x


def wide(fn):
    return lambda *args: fn(*map(widen, args))


def trunc_div(a, b, bits):
    """XLA integer division: toward zero, as C; x / 0 has every bit set (-1)."""
    if b == 0:
        return -1
    q = builtins.abs(a) // builtins.abs(b)
    return q if (a < 0) == (b < 0) else -q


def trunc_rem(a, b, bits):
    """XLA integer remainder: the sign of the dividend, as C; x % 0 is x."""
    return a if b == 0 else a - trunc_div(a, b, bits) * b


def shift_amount(b, bits):
    """Shift amounts are read as unsigned numbers of the operand's width."""
    return b % (1 << bits)


def shl(a, b, bits):
    n = shift_amount(b, bits)
    return 0 if n >= bits else a << n  # shifted out entirely: 0


def shr_logical(a, b, bits):
    n = shift_amount(b, bits)
    return 0 if n >= bits else (a % (1 << bits)) >> n  # the bits as unsigned, zeros shifted in


def shr_arithmetic(a, b, bits):
    signed = (a + (1 << bits - 1)) % (1 << bits) - (1 << bits - 1)  # the bits as signed
    return signed >> builtins.min(shift_amount(b, bits), bits - 1)  # Python's >> keeps the sign


def popcount(a, bits):
    return bin(a % (1 << bits)).count("1")


def clz(a, bits):
    return bits - (a % (1 << bits)).bit_length()


def round_away(v):
    """Ties away from zero; exact for float16/32 values, which float64 holds with room."""
    return math.copysign(math.floor(builtins.abs(v) + 0.5), v) if math.isfinite(v) else v


def round_even(v):
    return math.copysign(builtins.round(v), v) if math.isfinite(v) else v  # round() is banker's


def lexicographic(greater):
    """XLA's complex max/min: real parts decide, imaginary parts break ties, else ``y``."""
    def pick(x, y):
        if greater(x.real, y.real) or (x.real == y.real and greater(x.imag, y.imag)):
            return x
        return y
    return lambda x, y: np.asarray(np.frompyfunc(pick, 2, 1)(widen(x), widen(y)), np.complex128)


def complex_sign(x):
    r = np.abs(x)
    return np.where(x == 0, 0, x / np.where(x == 0, 1, r))


def xla_complex_square(z):
    """XLA's complex square: ``(a - b)(a + b) + 2ab i``."""
    a, b = z.real, z.imag
    return (a - b) * (a + b) + 2j * (a * b)


def complex_atan2(x, y):
    """The analytic continuation of atan2 that XLA uses for complex operands."""
    return -1j * np.log((y + 1j * x) / np.sqrt(x * x + y * y))


def lgamma_math(v):
    try:
        return math.lgamma(v)
    except ValueError:  # a pole
        return math.inf


def digamma_by_difference(x):
    """d/dx lgamma by a central difference: an independent, float32-accurate reference."""
    h = 1e-5
    lg = np.vectorize(lgamma_math, otypes=[np.float64])
    return (lg(x + h) - lg(x - h)) / (2 * h)


def erf_inv_by_bisection(y):
    lo, hi = np.full(y.shape, -7.0), np.full(y.shape, 7.0)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    for _ in range(80):
        mid = (lo + hi) / 2
        below = erf(mid) < y
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


# --- the table of primitives ---------------------------------------------------------------

@dataclasses.dataclass
class Op:
    name: str  # the primitive's name
    fn: object  # the lax function
    ref: object  # NumPy reference (computed on the inputs as given, or via ``wide``)
    dtypes: list
    nargs: int = 1
    domain: tuple = (-3.0, 3.0)
    result: str = "same"  # or "bool", "real", "complex"
    int_ref: object = None  # for integer inputs: rule on Python ints, then wrapped
    tag: str = ""  # distinguishes two entries of one primitive
    ref_rtol: float = 0.0  # the reference's own accuracy, where it is coarser than float64

    def __str__(self):
        return self.name + self.tag


def _u(name, fn, ref, dtypes, **kw):
    return Op(name, fn, ref, dtypes, 1, **kw)


def _b(name, fn, ref, dtypes, **kw):
    return Op(name, fn, ref, dtypes, 2, **kw)


ERF = np.vectorize(math.erf, otypes=[np.float64])
ERFC = np.vectorize(math.erfc, otypes=[np.float64])
LGAMMA = np.vectorize(lgamma_math, otypes=[np.float64])

OPS = [
    _b("add", lax.add, wide(np.add), NUMBER, int_ref=lambda a, b, bits: a + b),
    _b("sub", lax.sub, wide(np.subtract), NUMBER, int_ref=lambda a, b, bits: a - b),
    _b("mul", lax.mul, wide(np.multiply), NUMBER, int_ref=lambda a, b, bits: a * b),
    _b("div", lax.div, wide(np.divide), NUMBER, int_ref=trunc_div),
    _b("rem", lax.rem, wide(np.fmod), INTEGER + REAL, int_ref=trunc_rem),
    _b("max", lax.max, wide(np.maximum), BOOL + INTEGER + REAL),
    _b("max", lax.max, lexicographic(np.greater), COMPLEXES + COMPLEXES64, tag="_complex"),
    _b("min", lax.min, wide(np.minimum), BOOL + INTEGER + REAL),
    _b("min", lax.min, lexicographic(np.less), COMPLEXES + COMPLEXES64, tag="_complex"),
    _b("pow", lax.pow, wide(np.power), INEXACT, domain=(0.1, 3.0)),
    _b("nextafter", lax.nextafter, np.nextafter, REAL),
    _b("atan2", lax.atan2, wide(np.arctan2), REAL),
    _b("atan2", lax.atan2, wide(complex_atan2), COMPLEXES + COMPLEXES64, tag="_complex"),
    _u("neg", lax.neg, wide(np.negative), NUMBER, int_ref=lambda a, bits: -a),
    _u("sign", lax.sign, wide(np.sign), INTEGER + REAL, int_ref=lambda a, bits: (a > 0) - (a < 0)),
    _u("sign", lax.sign, wide(complex_sign), COMPLEXES + COMPLEXES64, tag="_complex"),
    _u("abs", lax.abs, wide(np.abs), SINTS + ["int64"] + INEXACT, result="real",
       int_ref=lambda a, bits: builtins.abs(a)),
    _u("square", lax.square, wide(lambda x: x * x), INTEGER + REAL,
       int_ref=lambda a, bits: a * a),
    _u("square", lax.square, wide(xla_complex_square), COMPLEXES + COMPLEXES64, tag="_complex"),
    _u("integer_pow", lambda x: lax.integer_pow(x, 3), wide(lambda x: x ** 3), NUMBER,
       int_ref=lambda a, bits: a ** 3, tag="_3"),
    _u("integer_pow", lambda x: lax.integer_pow(x, -2), wide(lambda x: x ** -2.0), INEXACT,
       domain=(0.5, 3.0), tag="_-2"),
    _u("integer_pow", lambda x: lax.integer_pow(x, 0), lambda x: np.ones_like(x), NUMBER,
       tag="_0"),
    _u("floor", lax.floor, np.floor, REAL),
    _u("ceil", lax.ceil, np.ceil, REAL),
    _u("round", lax.round, wide(np.frompyfunc(round_away, 1, 1)), REAL, tag="_away"),
    _u("round", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
       wide(np.frompyfunc(round_even, 1, 1)), REAL, tag="_even"),
    _u("is_finite", lax.is_finite, np.isfinite, REAL, result="bool"),
    _u("exp", lax.exp, wide(np.exp), INEXACT),
    _u("exp2", lax.exp2, wide(np.exp2), INEXACT),
    _u("log", lax.log, wide(np.log), INEXACT, domain=(0.1, 5.0)),
    _u("log1p", lax.log1p, wide(np.log1p), INEXACT, domain=(-0.9, 5.0)),
    _u("expm1", lax.expm1, wide(np.expm1), INEXACT),
    _u("tanh", lax.tanh, wide(np.tanh), INEXACT),
    _u("logistic", lax.logistic, wide(lambda x: 1 / (1 + np.exp(-x))), INEXACT),
    _u("sin", lax.sin, wide(np.sin), INEXACT),
    _u("cos", lax.cos, wide(np.cos), INEXACT),
    _u("tan", lax.tan, wide(np.tan), INEXACT, domain=(-1.4, 1.4)),
    _u("asin", lax.asin, wide(np.arcsin), INEXACT, domain=(-0.95, 0.95)),
    _u("acos", lax.acos, wide(np.arccos), INEXACT, domain=(-0.95, 0.95)),
    _u("atan", lax.atan, wide(np.arctan), INEXACT),
    _u("sinh", lax.sinh, wide(np.sinh), INEXACT),
    _u("cosh", lax.cosh, wide(np.cosh), INEXACT),
    _u("asinh", lax.asinh, wide(np.arcsinh), INEXACT),
    _u("acosh", lax.acosh, wide(np.arccosh), INEXACT, domain=(1.1, 5.0)),
    _u("atanh", lax.atanh, wide(np.arctanh), INEXACT, domain=(-0.95, 0.95)),
    _u("sqrt", lax.sqrt, wide(np.sqrt), INEXACT, domain=(0.1, 5.0)),
    _u("rsqrt", lax.rsqrt, wide(lambda x: 1 / np.sqrt(x)), INEXACT, domain=(0.1, 5.0)),
    _u("cbrt", lax.cbrt, wide(np.cbrt), REAL),
    _u("erf", lax.erf, wide(ERF), REAL),
    _u("erfc", lax.erfc, wide(ERFC), REAL),
    _u("erf_inv", lax.erf_inv, wide(erf_inv_by_bisection), REAL, domain=(-0.99, 0.99)),
    _u("lgamma", lax.lgamma, wide(LGAMMA), REAL, domain=(-4.5, 6.0)),
    _u("digamma", lax.digamma, wide(digamma_by_difference), REAL, domain=(0.2, 6.0),
       ref_rtol=1e-8),
    _b("eq", lax.eq, np.equal, ANY, result="bool"),
    _b("ne", lax.ne, np.not_equal, ANY, result="bool"),
    _b("lt", lax.lt, np.less, ORDERED, result="bool"),
    _b("le", lax.le, np.less_equal, ORDERED, result="bool"),
    _b("gt", lax.gt, np.greater, ORDERED, result="bool"),
    _b("ge", lax.ge, np.greater_equal, ORDERED, result="bool"),
    _b("and", lax.bitwise_and, np.logical_and, BOOL + INTEGER, int_ref=lambda a, b, bits: a & b),
    _b("or", lax.bitwise_or, np.logical_or, BOOL + INTEGER, int_ref=lambda a, b, bits: a | b),
    _b("xor", lax.bitwise_xor, np.logical_xor, BOOL + INTEGER, int_ref=lambda a, b, bits: a ^ b),
    _u("not", lax.bitwise_not, np.logical_not, BOOL + INTEGER, int_ref=lambda a, bits: ~a),
    _b("shift_left", lax.shift_left, None, INTEGER, int_ref=shl),
    _b("shift_right_logical", lax.shift_right_logical, None, INTEGER, int_ref=shr_logical),
    _b("shift_right_arithmetic", lax.shift_right_arithmetic, None, INTEGER,
       int_ref=shr_arithmetic),
    _u("population_count", lax.population_count, None, INTEGER, int_ref=popcount),
    _u("clz", lax.clz, None, INTEGER, int_ref=clz),
    _u("real", lax.real, np.real, COMPLEXES + COMPLEXES64, result="real"),
    _u("imag", lax.imag, np.imag, COMPLEXES + COMPLEXES64, result="real"),
    _u("conj", lax.conj, np.conj, ["float32", "float64"] + COMPLEXES + COMPLEXES64,
       result="complex"),
    _b("complex", lax.complex, lambda x, y: x + 1j * y, ["float32", "float64"],
       result="complex"),
]


def result_dtype(op, dtype):
    if op.result == "bool":
        return np.dtype(np.bool_)
    if op.result == "real":
        return np.finfo(dtype).dtype if np.issubdtype(dtype, np.complexfloating) else dtype
    if op.result == "complex":
        return np.result_type(dtype, np.complex64)
    return dtype


def reference(op, dtype, args):
    """The expected result: the Python-int rule for integers (wrapped to the result type),
    else the NumPy reference, rounded to the result dtype."""
    out_dtype = result_dtype(op, dtype)
    if op.int_ref is not None and np.issubdtype(dtype, np.integer):
        bits = np.iinfo(dtype).bits
        values = np.frompyfunc(lambda *a: op.int_ref(*a, bits), op.nargs, 1)(
            *(np.asarray(a).astype(object) for a in args))
        if out_dtype == np.bool_:
            return np.asarray(values, bool)
        wrapped = np.frompyfunc(lambda v: wrap(v, out_dtype), 1, 1)(values)
        return np.asarray(wrapped, object).astype(out_dtype)
    with np.errstate(all="ignore"):
        return np.asarray(op.ref(*args)).astype(out_dtype)


def assert_matches(actual, expected, ref_rtol=0.0):
    """Exact for integers and bools; per-dtype tolerance for floats (NaN equals NaN)."""
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if expected.dtype in TOLERANCES:
        rtol, atol = TOLERANCES[expected.dtype]
        np.testing.assert_allclose(actual, expected, rtol=builtins.max(rtol, ref_rtol),
                                   atol=builtins.max(atol, ref_rtol))
    else:
        np.testing.assert_array_equal(actual, expected)


def _cases(bits64):
    return [pytest.param(op, dtype, id=f"{op}-{dtype.name}")
            for op in OPS for dtype in map(np.dtype, op.dtypes) if is_64(dtype) == bits64]


def first_32bit_dtype(op):
    return next(np.dtype(d) for d in op.dtypes if not is_64(d))


def _inputs(op, dtype, shape=(3, 4), seed=()):
    rng = _rng(str(op), dtype.name, shape, seed)
    return [op_operand(rng, dtype, shape, op.domain) for _ in range(op.nargs)]


# --- every primitive, every dtype ----------------------------------------------------------

def _check_op(op, dtype):
    args = [noncontiguous(a) for a in _inputs(op, dtype)]
    out = op.fn(*args)
    assert out.dtype == result_dtype(op, dtype) and not out.weak_type
    assert_matches(out, reference(op, dtype, args), op.ref_rtol)


@pytest.mark.parametrize("op,dtype", _cases(bits64=False))
def test_op_matches_reference(op, dtype):
    _check_op(op, dtype)


@pytest.mark.parametrize("op,dtype", _cases(bits64=True))
def test_op_matches_reference_x64(x64, op, dtype):
    _check_op(op, dtype)


@pytest.mark.parametrize("op", OPS, ids=str)
def test_op_under_make_jaxpr(op):
    """One equation of the primitive; evaluating the jaxpr gives the eager result."""
    dtype = first_32bit_dtype(op)
    args = _inputs(op, dtype, seed="jaxpr")
    closed = nbjax.make_jaxpr(op.fn)(*args)
    check_jaxpr(closed.jaxpr)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == [op.name]
    out, = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    assert closed.jaxpr.outvars[0].aval.dtype == result_dtype(op, dtype)
    assert_matches(out, np.asarray(op.fn(*args)))


BINARY = [op for op in OPS if op.nargs == 2]
SHAPE_PAIRS = [((3, 4), ()), ((), (3, 4)), ((3, 1), (1, 4)), ((1, 4), (3, 4)),
               ((0, 4), (1, 4)), ((0, 4), ()), ((), ()), ((2, 0, 3), (2, 1, 3))]


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("op", BINARY, ids=str)
def test_binary_broadcasts_rank0_and_size1(op, shapes):
    dtype = first_32bit_dtype(op)
    rng = _rng(str(op), shapes)
    args = [op_operand(rng, dtype, s, op.domain) for s in shapes]
    out = op.fn(*args)
    assert out.shape == np.broadcast_shapes(*shapes)
    assert_matches(out, reference(op, dtype, args))


@pytest.mark.parametrize("op", [op for op in OPS if op.nargs == 1], ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (1, 0, 2)], ids=str)
def test_unary_rank0_and_size0(op, shape):
    dtype = first_32bit_dtype(op)
    x = op_operand(_rng(str(op), shape), dtype, shape, op.domain)
    out = op.fn(x)
    assert out.shape == shape
    assert_matches(out, reference(op, dtype, [x]))


def test_transposed_views():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3).T
    np.testing.assert_array_equal(lax.mul(a.T, b.T), a.T * b.T)
    np.testing.assert_array_equal(lax.max(b, a), np.maximum(b, a))


# --- special values ------------------------------------------------------------------------

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5])
UNARY_REAL = [op for op in OPS if op.nargs == 1 and "float32" in map(str, op.dtypes)
              and op.name not in ("erf_inv", "digamma", "lgamma", "conj", "sign")]
# (sign keeps -0.0 where NumPy's does not; it has its own test below)


def assert_same_floats(actual, expected):
    """Equal values, NaN where NaN, and the same sign on zeros."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=0)
    zero = expected == 0
    np.testing.assert_array_equal(np.signbit(actual[zero]), np.signbit(expected[zero]))


@pytest.mark.parametrize("op", UNARY_REAL, ids=str)
def test_unary_special_values(op):
    """NaN, infinities and signed zeros follow IEEE / C99 (as NumPy computes them)."""
    x = SPECIALS.astype(np.float32)
    expected = reference(op, x.dtype, [x])
    if expected.dtype == np.bool_:
        np.testing.assert_array_equal(op.fn(x), expected)
    else:
        assert_same_floats(op.fn(x), expected)


def test_sign_keeps_negative_zero_and_nan():
    x = np.array([-0.0, 0.0, np.nan, -np.inf, 3.0], np.float32)
    assert_same_floats(lax.sign(x), [-0.0, 0.0, np.nan, -1.0, 1.0])


def test_complex_sign_is_x_over_abs_x():
    x = np.array([3 + 4j, 0j, -2j], np.complex64)
    assert_close(lax.sign(x), [0.6 + 0.8j, 0, -1j], rtol=1e-6)


@pytest.mark.parametrize("fn,expected", [(lax.max, [np.nan, np.nan, 0.0, 0.0, -0.0]),
                                         (lax.min, [np.nan, np.nan, -0.0, -0.0, -0.0])])
def test_max_min_propagate_nan_and_order_zeros(fn, expected):
    """NaN wins either way round; of two zeros, max is +0 unless both are -0, min the reverse."""
    x = np.array([np.nan, 1.0, 0.0, -0.0, -0.0], np.float32)
    y = np.array([1.0, np.nan, -0.0, 0.0, -0.0], np.float32)
    assert_same_floats(fn(x, y), expected)


def test_complex_max_with_nan_part_picks_second():
    # Comparisons with NaN are false, so the lexicographic rule picks y.
    x = np.array([np.nan + 0j, 0j], np.complex64)
    y = np.array([0j, np.nan + 0j], np.complex64)
    np.testing.assert_array_equal(np.isnan(lax.max(x, y)), [False, True])


def test_round_ties():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.4, 1e30, np.inf],
                 np.float32)
    assert_same_floats(lax.round(x), [round_away(v) for v in x.astype(np.float64)])
    assert_same_floats(lax.round(x, 1), [round_even(v) for v in x.astype(np.float64)])
    assert lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO).dtype == np.float32


def test_rem_of_floats_has_dividends_sign():
    x = np.array([5.5, -5.5, 5.5, 1.0, np.inf, 1.0, -0.0], np.float32)
    y = np.array([2.0, 2.0, -2.0, 0.0, 1.0, np.inf, 1.0], np.float32)
    assert_same_floats(lax.rem(x, y), [math.fmod(a, b) if math.isfinite(a) and b else np.nan
                                      for a, b in zip(x.astype(float), y.astype(float))])


def test_float_division_by_zero_is_ieee():
    x = np.array([1.0, -1.0, 0.0], np.float32)
    assert_same_floats(lax.div(x, np.zeros(3, np.float32)), [np.inf, -np.inf, np.nan])


# --- integer rules over the interesting values ---------------------------------------------

def _edge_ints(dtype):
    info = np.iinfo(dtype)
    values = [info.min, info.min + 1, -8, -7, -2, -1, 0, 1, 2, 7, 8, info.bits - 1, info.bits,
              info.bits + 1, info.max - 1, info.max]
    return sorted({v for v in values if info.min <= v <= info.max})


def _all_pairs(dtype):
    v = np.array(_edge_ints(dtype), dtype)
    return np.repeat(v, len(v)), np.tile(v, len(v))


@pytest.mark.parametrize("name", ["div", "rem", "shift_left", "shift_right_logical",
                                  "shift_right_arithmetic", "mul", "add"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32], ids=str)
def test_integer_rules_on_edge_values(name, dtype):
    """Division by 0 and INT_MIN / -1, shifts by negative or >= width amounts, overflow."""
    op = next(o for o in OPS if o.name == name)
    dtype = np.dtype(dtype)
    x, y = _all_pairs(dtype)
    assert_matches(op.fn(x, y), reference(op, dtype, [x, y]))


@pytest.mark.parametrize("name", ["population_count", "clz", "abs", "neg", "sign", "not"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32], ids=str)
def test_unary_integer_rules_on_edge_values(name, dtype):
    op = next(o for o in OPS if o.name == name)
    dtype = np.dtype(dtype)
    if np.dtype(dtype) not in map(np.dtype, op.dtypes):
        pytest.skip(f"{name} does not accept {dtype}")
    x = np.array(_edge_ints(dtype), dtype)
    assert_matches(op.fn(x), reference(op, dtype, [x]))


def test_integer_rules_x64(x64):
    for dtype in INTS64:
        x, y = _all_pairs(dtype)
        for name in ("div", "rem", "shift_right_arithmetic", "shift_left"):
            op = next(o for o in OPS if o.name == name)
            assert_matches(op.fn(x, y), reference(op, dtype, [x, y]))
        for op in (o for o in OPS if o.name in ("clz", "population_count")):
            assert_matches(op.fn(x), reference(op, dtype, [x]))


def test_integer_pow_wraps_and_handles_zero_and_negative_exponents():
    x = np.array([2, 3, -2, 7], np.int32)
    expected = [wrap(int(v) ** 31, np.int32) for v in x]
    np.testing.assert_array_equal(lax.integer_pow(x, 31), expected)
    f = np.array([np.nan, 0.0, 2.0, -2.0], np.float32)
    np.testing.assert_array_equal(lax.integer_pow(f, 0), [1, 1, 1, 1])  # even for NaN
    np.testing.assert_array_equal(lax.integer_pow(f[1:], -2), [np.inf, 0.25, 0.25])


def test_integer_pow_of_infinite_complex_numbers_multiplies_as_jax():
    """The product starts from x, not from 1 (``1 * (inf+1j)`` is ``inf+nanj``): as JAX,
    ``(inf+1j) ** 2`` is ``x * x`` and ``(inf+1j) ** -1`` is ``1 / x``."""
    z = np.array([complex(np.inf, 1), complex(-2.5, np.inf), complex(1, 2)], np.complex64)
    for y in (1, 2, 3, -1):
        expected = z
        with np.errstate(invalid="ignore"):
            for _ in range(abs(y) - 1):
                expected = expected * z
        if y < 0:
            expected = np.complex64(1) / expected
        np.testing.assert_array_equal(lax.integer_pow(z, y), expected)
    np.testing.assert_array_equal(jnp.reciprocal(z[:1]), [0j])
    np.testing.assert_array_equal(jnp.square(z[:1]), [complex(np.inf, np.inf)])


def test_pow_with_integer_exponent():
    x = np.array([2.0, 2.0, 0.0, 0.0, -2.0], np.float32)
    y = np.array([3, -1, 0, -1, 3], np.int32)
    np.testing.assert_array_equal(lax.pow(x, y), [8.0, 0.5, 1.0, np.inf, -8.0])
    assert lax.pow(x, y).dtype == np.float32
    closed = nbjax.make_jaxpr(lambda a: lax.pow(a, 3))(x)
    assert "pow a 3:i32[]" in str(closed)  # a Python int exponent stays an integer, as in JAX
    assert lax.pow(2.0, np.arange(3, dtype=np.int32)).dtype == np.float32


# --- selection and clamping ----------------------------------------------------------------

def test_select_and_select_n():
    pred = np.array([True, False, True])
    a, b = np.arange(3, dtype=np.float32), -np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(lax.select(pred, a, b), np.where(pred, a, b))
    np.testing.assert_array_equal(lax.select_n(pred, b, a), np.where(pred, a, b))
    np.testing.assert_array_equal(lax.select(np.bool_(False), a, b), b)  # a scalar predicate
    assert lax.select_n(np.int32(0), a).dtype == np.float32  # a single case


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8], ids=str)
def test_select_n_integer_which_clamps_out_of_range(dtype):
    """XLA compares ``which`` with the case numbers: below 0 is case 0, past the end the last."""
    cases = [np.full(6, i, np.float32) for i in range(3)]
    info = np.iinfo(dtype)
    which = np.array([0, 1, 2, 3, info.max, info.min], dtype)
    expected = np.clip(which.astype(np.int64), 0, 2).astype(np.float32)
    np.testing.assert_array_equal(lax.select_n(which, *cases), expected)


def test_select_n_under_make_jaxpr():
    which = np.array([0, 2, 1], np.int32)
    cases = [np.arange(3, dtype=np.float32) * k for k in (1, 10, 100)]
    closed = nbjax.make_jaxpr(lax.select_n)(which, *cases)
    check_jaxpr(closed.jaxpr)
    out, = eval_jaxpr(closed.jaxpr, closed.consts, which, *cases)
    np.testing.assert_array_equal(out, [0, 100, 20])


def test_clamp():
    x = np.array([np.nan, -1.0, 0.5, 2.0], np.float32)
    assert_same_floats(lax.clamp(0.0, x, 1.0), [np.nan, 0.0, 0.5, 1.0])
    lo, hi = np.full(4, -0.5, np.float32), np.array([0, 0, 0, 3], np.float32)
    np.testing.assert_array_equal(lax.clamp(lo, x[1:2].repeat(4), hi), [-0.5, -0.5, -0.5, -0.5])
    # min(max(x, lo), hi): with lo > hi every value becomes hi
    np.testing.assert_array_equal(lax.clamp(2.0, x[1:], 1.0), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(lax.clamp(np.int8(0), np.arange(-2, 3, dtype=np.int8),
                                            np.int8(1)), [0, 0, 0, 1, 1])
    closed = nbjax.make_jaxpr(lambda v: lax.clamp(0.0, v, 1.0))(x)
    check_jaxpr(closed.jaxpr)
    assert_same_floats(eval_jaxpr(closed.jaxpr, closed.consts, x)[0], [np.nan, 0.0, 0.5, 1.0])


# --- complex numbers -----------------------------------------------------------------------

def test_complex_keeps_infinite_parts():
    re = np.array([np.inf, 1.0, np.nan], np.float32)
    im = np.array([0.0, -np.inf, 2.0], np.float32)
    z = np.asarray(lax.complex(re, im))
    assert z.dtype == np.complex64
    np.testing.assert_array_equal(z.real, re)
    np.testing.assert_array_equal(z.imag, im)


def test_conj_records_input_dtype():
    closed = nbjax.make_jaxpr(lax.conj)(np.ones(2, np.float32))
    assert "conj[input_dtype=float32]" in str(closed)
    assert closed.jaxpr.outvars[0].aval.dtype == np.complex64


# --- conversions ---------------------------------------------------------------------------

def float_to_int(v, dtype):
    """XLA's float -> int: NaN is 0, otherwise truncate toward zero and saturate."""
    if math.isnan(v):
        return 0
    info = np.iinfo(dtype)
    if math.isinf(v):
        return info.max if v > 0 else info.min
    return builtins.min(builtins.max(math.trunc(v), info.min), info.max)


FLOAT_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 2.7, -2.7, 127.9, 128.0, -128.9,
               -129.0, 255.5, 256.0, 65535.9, 2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128, 3e9, -3e9,
               2.0 ** 32, 1e30, -1e30]


@pytest.mark.parametrize("src", [np.float16, np.float32], ids=str)
@pytest.mark.parametrize("dst", INTS, ids=str)
def test_float_to_int_conversion_saturates(src, dst):
    with np.errstate(over="ignore"):
        x = np.array(FLOAT_EDGES, np.float64).astype(src)
        expected = [float_to_int(v, dst) for v in x.astype(np.float64)]
    np.testing.assert_array_equal(lax.convert_element_type(x, dst), np.array(expected, dst))


@pytest.mark.cpu_compiler
@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64], ids=str)
@pytest.mark.parametrize("dst", INTS + INTS64, ids=str)
@pytest.mark.parametrize("size", [32, 4099])
def test_compiled_float_to_int_conversion_saturates(src, dst, size):
    """The CPU backend's kernels convert as XLA does, one element at a time (32: the edges
    alone) and in vectors (4099: LLVM's vector loop, its remainder loop), the edges among
    ordinary values so each vector mixes them. (LLVM's own saturating conversion of float16
    to int16 gave NaN -> -32768 on a CPU with AVX512-FP16 (Sapphire Rapids); its vectors
    went one lane at a time on x86, so the kernels clamp before a plain conversion.)"""
    edges = FLOAT_EDGES + [2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 2.0 ** 63 - 1024, 2.0 ** 31 - 1,
                           2.0 ** 32 - 1, -2.0 ** 31 - 1, 2.0 ** 64 - 2048]
    rng = np.random.default_rng(size)
    values = rng.uniform(-300.0, 300.0, size)
    values[rng.permutation(size)[:len(edges)]] = edges
    with nbjax.enable_x64(np.float64 in (src, dst) or dst in INTS64), \
            np.errstate(over="ignore"):
        x = values.astype(src)
        expected = [float_to_int(v, dst) for v in x.astype(np.float64)]
        convert = nbjax.jit(lambda x: lax.convert_element_type(x, dst), backend="cpu")
        np.testing.assert_array_equal(convert(x), np.array(expected, dst))
        if size > 32 and (src, dst) == (np.float32, np.int32):
            (kernel,) = convert.lower(x).compile().executable.kernels
            assert re.search(r"fptosi <\d+ x float>", kernel.texts["optimised LLVM IR"])


def test_float64_to_int64_conversion_saturates(x64):
    x = np.array(FLOAT_EDGES + [2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 2.0 ** 63 - 1024], np.float64)
    for dst in INTS64:
        expected = np.array([float_to_int(v, dst) for v in x], dst)
        np.testing.assert_array_equal(lax.convert_element_type(x, dst), expected)


@pytest.mark.parametrize("src", INTS, ids=str)
@pytest.mark.parametrize("dst", INTS, ids=str)
def test_int_to_int_conversion_wraps(src, dst):
    x = np.array(_edge_ints(src), src)
    expected = np.array([wrap(int(v), dst) for v in x], dst)
    np.testing.assert_array_equal(lax.convert_element_type(x, dst), expected)


def test_conversions_to_bool_and_from_bool():
    f = np.array([np.nan, np.inf, 0.0, -0.0, 0.1], np.float32)
    np.testing.assert_array_equal(lax.convert_element_type(f, bool), [1, 1, 0, 0, 1])
    i = np.array([-1, 0, 2], np.int32)
    np.testing.assert_array_equal(lax.convert_element_type(i, bool), [1, 0, 1])
    b = np.array([True, False])
    out = lax.convert_element_type(b, np.float32)
    assert out.dtype == np.float32 and list(np.asarray(out)) == [1.0, 0.0]


def test_complex_to_real_keeps_real_part_and_warns():
    z = np.array([1.5 + 2j, np.nan + 0j, 2j], np.complex64)
    with pytest.warns(np.exceptions.ComplexWarning):
        f = lax.convert_element_type(z, np.float32)
    np.testing.assert_array_equal(f, z.real)
    with pytest.warns(np.exceptions.ComplexWarning):
        i = lax.convert_element_type(z, np.int32)
    np.testing.assert_array_equal(i, [1, 0, 0])
    with pytest.warns(np.exceptions.ComplexWarning):
        b = lax.convert_element_type(z, bool)
    np.testing.assert_array_equal(b, [True, True, False])  # real part != 0 (NaN is); 2j is not


def test_float_narrowing_overflows_to_inf():
    x = np.array([1e6, -1e6, 1.0], np.float32)
    np.testing.assert_array_equal(lax.convert_element_type(x, np.float16), [np.inf, -np.inf, 1])
    u = np.array([2 ** 32 - 1], np.uint32)
    assert float(lax.convert_element_type(u, np.float32)[0]) == float(np.float32(2 ** 32 - 1))


def test_convert_element_type_params_and_identity():
    x = nbjax.numpy.add(np.ones(3, np.float32), 0)  # an Array
    assert lax.convert_element_type(x, np.float32) is x
    out = lax.convert_element_type(x, np.float32, weak_type=True)
    assert out.weak_type
    closed = nbjax.make_jaxpr(lambda v: lax.convert_element_type(v, np.int8))(np.ones(2))
    check_jaxpr(closed.jaxpr)
    assert "convert_element_type[new_dtype=int8 weak_type=False]" in str(closed)
    assert lax.convert_element_type(np.float64(1.5), np.float64).dtype == np.float32  # x64 off
    assert float(lax.convert_element_type(2 ** 100, np.float32)) == float(np.float32(2.0 ** 100))


@pytest.mark.parametrize("src,dst,shape,out_shape", [
    (np.float32, np.int32, (2, 3), (2, 3)),
    (np.float32, np.int8, (2, 3), (2, 3, 4)),
    (np.int8, np.float32, (2, 3, 4), (2, 3)),
    (np.int16, np.uint32, (2,), ()),
    (np.float32, np.uint16, (), (2,)),
    (np.uint8, np.float16, (0, 2), (0,)),
])
def test_bitcast_convert_type(src, dst, shape, out_shape):
    rng = _rng("bitcast", shape)
    x = rng.integers(0, 256, shape + (np.dtype(src).itemsize,), dtype=np.uint8).view(src)
    x = x.reshape(shape)
    out = lax.bitcast_convert_type(x, dst)
    assert out.shape == out_shape and out.dtype == np.dtype(dst)
    # NumPy's view of the same bytes: little-endian, row-major, as XLA on CPU.
    expected = np.ascontiguousarray(x).reshape(-1).view(dst).reshape(out_shape)
    assert np.asarray(out).tobytes() == expected.tobytes()
    assert np.asarray(lax.bitcast_convert_type(out, src)).tobytes() == x.tobytes()


def test_bitcast_convert_type_is_not_weak_and_traces():
    assert not lax.bitcast_convert_type(1.0, np.int32).weak_type
    assert int(lax.bitcast_convert_type(1.0, np.int32)) == 0x3F800000
    nc = noncontiguous(np.arange(12, dtype=np.float32).reshape(3, 4))
    closed = nbjax.make_jaxpr(lambda v: lax.bitcast_convert_type(v, np.int16))(nc)
    check_jaxpr(closed.jaxpr)
    out, = eval_jaxpr(closed.jaxpr, closed.consts, nc)
    np.testing.assert_array_equal(out, np.ascontiguousarray(nc).view(np.int16).reshape(3, 4, 2))


# --- special functions ---------------------------------------------------------------------

def test_special_functions_are_correctly_rounded_in_float32():
    """float32 results are the float64 value rounded once (math's erf/erfc/lgamma)."""
    x = np.linspace(-4.25, 6, 41).astype(np.float32)
    for fn, exact in ((lax.erf, math.erf), (lax.erfc, math.erfc), (lax.lgamma, lgamma_math)):
        expected = np.array([exact(float(v)) for v in x]).astype(np.float32)
        np.testing.assert_array_equal(fn(x), expected)


def test_special_function_edge_values():
    x = np.array([-1.0, 1.0, 1.5, -0.0, np.nan], np.float32)
    assert_same_floats(lax.erf_inv(x), [-np.inf, np.inf, np.nan, -0.0, np.nan])
    poles = np.array([0.0, -0.0, -1.0, -7.0, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(lax.lgamma(poles), [np.inf] * 6)
    # digamma: NaN at the poles and at -inf, as XLA gives; +inf at +inf
    np.testing.assert_array_equal(lax.digamma(poles), [np.nan] * 4 + [np.inf, np.nan])


def test_special_functions_float64_accuracy(x64):
    euler_gamma = 0.5772156649015329
    n = np.arange(1, 40)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / n[:-1])])  # digamma(n) = H(n-1) - gamma
    assert_close(lax.digamma(n.astype(np.float64)), harmonic - euler_gamma,
                 rtol=2e-15)
    # Gauss's values at 1/2, 1/4, 3/4; at -1/4 by the reflection formula
    # digamma(1 - x) - digamma(x) = pi cot(pi x) and the recurrence from 5/4 to 1/4.
    quarter = -euler_gamma - math.pi / 2 - 3 * math.log(2)
    expected = [-euler_gamma - 2 * math.log(2), quarter,
                -euler_gamma + math.pi / 2 - 3 * math.log(2), quarter + 4 + math.pi]
    assert_close(lax.digamma(np.array([0.5, 0.25, 0.75, -0.25])), expected,
                 rtol=4e-15)
    x = _rng("digamma").uniform(-20, 40, 200)
    x = x[np.abs(x - 1.4616) > 0.2]  # away from the root, where only absolute error is small
    np.testing.assert_allclose(lax.digamma(x + 1) - lax.digamma(x), 1 / x, rtol=1e-10,
                               atol=1e-13)
    y = np.concatenate([_rng("erf_inv").uniform(-1, 1, 200), 1 - np.logspace(-15, -1, 30)])
    x = np.asarray(lax.erf_inv(y))
    np.testing.assert_allclose(np.vectorize(math.erf)(x), y, rtol=1e-15, atol=0)
    assert_close(erf_inv_by_bisection(y[:200]), x[:200], rtol=1e-13)


# --- weak types ----------------------------------------------------------------------------

F32 = np.ones(3, np.float32)


@pytest.mark.parametrize("make,dtype,weak", [
    (lambda: lax.add(2.0, 3.0), np.float32, True),
    (lambda: lax.add(F32, 2.0), np.float32, False),
    (lambda: lax.add(np.int32([1]), 2), np.int32, False),
    (lambda: lax.sin(2.0), np.float32, True),
    (lambda: lax.abs(1 + 1j), np.float32, True),
    (lambda: lax.conj(1.0), np.complex64, True),
    (lambda: lax.complex(1.0, 2.0), np.complex64, True),
    (lambda: lax.real(1.0 + 2j), np.float32, True),
    (lambda: lax.pow(2.0, 3), np.float32, True),
    (lambda: lax.pow(F32, 3), np.float32, False),
    (lambda: lax.integer_pow(2.0, 3), np.float32, True),
    (lambda: lax.round(2.5), np.float32, True),
    (lambda: lax.clz(3), np.int32, True),
    (lambda: lax.shift_left(np.int32([1]), 3), np.int32, False),
    (lambda: lax.select(True, 1.0, 2.0), np.float32, True),
    (lambda: lax.select(True, F32, F32), np.float32, False),
    (lambda: lax.clamp(0.0, 1.0, 3.0), np.float32, True),
    (lambda: lax.clamp(0.0, F32, 3.0), np.float32, False),
    (lambda: lax.bitcast_convert_type(1.0, np.int32), np.int32, False),
    (lambda: lax.lt(F32, 2.0), np.bool_, False),
])
def test_weak_types(make, dtype, weak):
    out = make()
    assert out.dtype == np.dtype(dtype)
    assert out.weak_type == weak


# --- dtype and shape errors ----------------------------------------------------------------

I32, C64, BOOLS = np.ones(3, np.int32), np.ones(3, np.complex64), np.ones(3, bool)
F16, U8 = np.ones(3, np.float16), np.ones(3, np.uint8)


@pytest.mark.parametrize("call,message", [
    (lambda: lax.sin(I32), "sin does not accept dtype int32"),
    (lambda: lax.exp(BOOLS), "exp does not accept dtype bool"),
    (lambda: lax.add(I32, F32), "lax.add requires arguments to have the same dtypes"),
    # A Python scalar keeps its own dtype: lax does not give it the array's (jnp does).
    (lambda: lax.add(np.int8([1]), 2), "lax.add requires .* same dtypes, got int8, int32"),
    (lambda: lax.mul(F16, 2.0), "lax.mul requires .* same dtypes, got float16, float32"),
    (lambda: lax.add(BOOLS, BOOLS), "add does not accept dtype bool at position 0"),
    (lambda: lax.neg(BOOLS), "neg does not accept dtype bool"),
    (lambda: lax.abs(U8), "abs does not accept dtype uint8"),
    (lambda: lax.sign(BOOLS), "sign does not accept dtype bool"),
    (lambda: lax.rem(C64, C64), "rem does not accept dtype complex64"),
    (lambda: lax.floor(C64), "floor does not accept dtype complex64"),
    (lambda: lax.round(I32), "round does not accept dtype int32"),
    (lambda: lax.is_finite(I32), "is_finite does not accept dtype int32"),
    (lambda: lax.is_finite(C64), "is_finite does not accept dtype complex64"),
    (lambda: lax.nextafter(I32, I32), "nextafter does not accept dtype int32"),
    (lambda: lax.cbrt(C64), "cbrt does not accept dtype complex64"),
    (lambda: lax.erf(C64), "erf does not accept dtype complex64"),
    (lambda: lax.lgamma(I32), "lgamma does not accept dtype int32"),
    (lambda: lax.lt(C64, C64), "lt does not accept dtype complex64 at position 0"),
    (lambda: lax.eq(I32, F32), "lax.eq requires arguments to have the same dtypes"),
    (lambda: lax.bitwise_and(F32, F32), "and does not accept dtype float32"),
    (lambda: lax.bitwise_not(F32), "not does not accept dtype float32"),
    (lambda: lax.shift_left(BOOLS, BOOLS), "shift_left does not accept dtype bool"),
    (lambda: lax.population_count(BOOLS), "population_count does not accept dtype bool"),
    (lambda: lax.clz(F32), "clz does not accept dtype float32"),
    (lambda: lax.pow(I32, I32), "pow does not accept dtype int32 at position 0"),
    (lambda: lax.pow(F32, C64), "the first argument to pow must have an inexact dtype"),
    (lambda: lax.pow(F32, BOOLS), "pow does not accept dtype bool at position 1"),
    (lambda: lax.integer_pow(I32, -2), "Integers cannot be raised to negative powers"),
    (lambda: lax.integer_pow(BOOLS, 2), "integer_pow does not accept dtype bool"),
    (lambda: lax.real(F32), "real does not accept dtype float32"),
    (lambda: lax.conj(F16), "conj does not accept dtype float16"),
    (lambda: lax.complex(F16, F16), "complex does not accept dtype float16 at position 0"),
    (lambda: lax.atan2(I32, I32), "atan2 does not accept dtype int32"),
    (lambda: lax.select_n(F32, F32), "select `which` must be boolean or integer type"),
    (lambda: lax.select_n(True, F32, F32, F32), "boolean `which` cannot have > 2 cases"),
    (lambda: lax.select_n(BOOLS[:2], F32, F32), "`which` must be scalar or have the same shape"),
    (lambda: lax.select(True, F32, F32[:2]), "select cases must have the same shapes"),
    (lambda: lax.select(True, F32, I32), "lax.select requires arguments to have the same"),
    (lambda: lax.clamp(F32[:2], F32, 1.0), r"clamp requires min.shape == operand.shape"),
    (lambda: lax.clamp(0.0, F32, F32[:2]), r"clamp requires max.shape == operand.shape"),
    (lambda: lax.clamp(I32, F32, F32), "lax.clamp requires arguments to have the same"),
    (lambda: lax.bitcast_convert_type(I32, bool), "does not support bool or complex"),
    (lambda: lax.bitcast_convert_type(C64, np.int32), "does not support bool or complex"),
    (lambda: lax.convert_element_type(F32, np.str_), "not supported|not a dtype"),
])
def test_type_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


@pytest.mark.parametrize("fn", [lax.add, lax.max, lax.eq, lax.atan2, lax.nextafter],
                         ids=lambda f: f.__name__)
def test_shape_mismatch_names_the_primitive(fn):
    with pytest.raises(TypeError, match=f"{fn.__name__} got incompatible shapes"):
        fn(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))
    with pytest.raises(TypeError, match=f"{fn.__name__}: arrays must have the same number"):
        fn(np.ones((2, 3), np.float32), np.ones(3, np.float32))


def test_value_errors():
    with pytest.raises(ValueError, match="at least one case"):
        lax.select_n(True)
    with pytest.raises(ValueError, match=r"2 \* 8 != 32"):
        lax.bitcast_convert_type(np.ones(2, np.int8), np.int32)


def test_errors_are_raised_while_tracing():
    with pytest.raises(TypeError, match="sin does not accept dtype int32"):
        nbjax.make_jaxpr(lax.sin)(I32)


def test_numpy_warnings_are_silenced():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lax.log(np.zeros(2, np.float32))
        lax.div(np.zeros(2, np.float32), np.zeros(2, np.float32))
        lax.convert_element_type(np.array([np.nan, 1e30], np.float32), np.int32)
        lax.div(np.ones(2, np.int32), np.zeros(2, np.int32))


def test_transcendental_functions_take_an_accuracy():
    """JAX 0.10's ``accuracy=`` (a mode or a tolerance): nbjax has one implementation of
    each, which it uses whatever is asked."""
    x = np.linspace(0.1, 2.0, 7).astype(np.float32)
    for name in ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos",
                 "tan", "sqrt", "rsqrt", "cbrt"):
        fn = getattr(lax, name)
        for accuracy in (lax.AccuracyMode.HIGHEST, lax.Tolerance(atol=1e-6, rtol=1e-6)):
            np.testing.assert_array_equal(fn(x, accuracy=accuracy), fn(x))

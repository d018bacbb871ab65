"""Element-wise primitives: arithmetic, transcendental functions, comparisons, bit ops,
selection and dtype conversion.

Each primitive is declared with a registrar from ``standard`` and wrapped by a lax function of
the same name (``add_p`` / ``add``); the bitwise ones are the exception JAX makes
(``bitwise_and`` binds ``and_p``). The reference implementations are NumPy, corrected wherever
NumPy and XLA disagree: integer division, right shifts, float-to-int conversion, signed zeros
in ``max``/``min``, ties in ``round``. Each correction says which rule it encodes. Their
transformation rules will sit beside them.
"""

import builtins
import enum
import functools
import warnings

import numpy as np

from ..core import Array, Primitive, ShapedArray, Tracer, dtypes, get_aval, to_numpy
from .standard import (ANY, COMPLEX, FLOAT, FLOAT_OR_INT, INEXACT, INT, INT_OR_BOOL, NUMBER,
                       ORDERED, SIGNED, binop, broadcast_shapes, check_dtype, same_dtypes,
                       scalars_like, unop)

__all__ = [
    # arithmetic
    "add", "add_p", "sub", "sub_p", "mul", "mul_p", "div", "div_p", "rem", "rem_p",
    "neg", "neg_p", "sign", "sign_p", "abs", "abs_p", "max", "max_p", "min", "min_p",
    "pow", "pow_p", "integer_pow", "integer_pow_p",
    # rounding and floating-point structure
    "floor", "floor_p", "ceil", "ceil_p", "round", "round_p", "RoundingMethod",
    "nextafter", "nextafter_p", "is_finite", "is_finite_p",
    # transcendental
    "exp", "exp_p", "exp2", "exp2_p", "log", "log_p", "log1p", "log1p_p", "expm1", "expm1_p",
    "tanh", "tanh_p", "logistic", "logistic_p", "sin", "sin_p", "cos", "cos_p", "tan", "tan_p",
    "asin", "asin_p", "acos", "acos_p", "atan", "atan_p", "atan2", "atan2_p",
    "sinh", "sinh_p", "cosh", "cosh_p", "asinh", "asinh_p", "acosh", "acosh_p",
    "atanh", "atanh_p", "sqrt", "sqrt_p", "rsqrt", "rsqrt_p", "cbrt", "cbrt_p",
    # comparisons
    "eq", "eq_p", "ne", "ne_p", "lt", "lt_p", "le", "le_p", "gt", "gt_p", "ge", "ge_p",
    # bits
    "bitwise_and", "and_p", "bitwise_or", "or_p", "bitwise_not", "not_p",
    "bitwise_xor", "xor_p", "shift_left", "shift_left_p",
    "shift_right_logical", "shift_right_logical_p",
    "shift_right_arithmetic", "shift_right_arithmetic_p",
    "population_count", "population_count_p", "clz", "clz_p",
    # complex numbers
    "real", "real_p", "imag", "imag_p", "conj", "conj_p", "complex", "complex_p",
    # selection
    "select", "select_n", "select_n_p", "clamp", "clamp_p",
    # dtype conversion
    "convert_element_type", "convert_element_type_p",
    "bitcast_convert_type", "bitcast_convert_type_p",
]


# --- helpers shared by the declarations below (and by ``special``) ---------------------------

def quiet(fn):
    """Silence NumPy's floating-point warnings: lax computes the IEEE result of 0/0, log(0),
    overflow... without complaint, as XLA does."""
    @functools.wraps(fn)
    def impl(*args, **params):
        with np.errstate(all="ignore"):
            return fn(*args, **params)
    return impl


def _unop(name, impl, kind, result_dtype=None):
    return unop(name, quiet(impl), kind, result_dtype)


def _binop(name, impl, kinds, result_dtype=None):
    return binop(name, quiet(impl), kinds, result_dtype)


def _param_unop(name, impl, kind, result_dtype=None):
    """A unary primitive with params that do not change its output type (``round``)."""
    prim = _unop(name, impl, kind, result_dtype)
    rule = prim.rule("abstract_eval")
    prim.def_abstract_eval(lambda x, **params: rule(x))
    return prim


def _named(fn, name, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def unary_function(prim, doc, name=None):
    """The lax function that binds a unary primitive."""
    def fn(x):
        return prim.bind(x)
    return _named(fn, name or prim.name, doc)


def binary_function(prim, doc, name=None):
    """The lax function that binds a binary primitive; Python scalars take the other
    operand's dtype, weakly (lax itself never promotes two arrays)."""
    def fn(x, y):
        return prim.bind(*scalars_like(x, y))
    return _named(fn, name or prim.name, doc)


def _unsigned(dtype):
    return np.dtype(f"u{dtype.itemsize}")


def _signed(dtype):
    return np.dtype(f"i{dtype.itemsize}")


def _real_dtype(dtype):
    """float32 for complex64, float64 for complex128; real dtypes are their own."""
    return np.finfo(dtype).dtype if dtypes.is_complex(dtype) else dtype


def _complex_dtype(dtype):
    """complex64 for float32 (and complex64), complex128 for float64 (and complex128)."""
    return np.result_type(dtype, np.complex64)


def _from_parts(re, im):
    """``re + i*im`` built field by field: arithmetic would turn ``inf * 1j`` into nan+inf*j."""
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, _complex_dtype(re.dtype))
    out.real, out.imag = re, im
    return out


# --- arithmetic ----------------------------------------------------------------------------

def _c_division(x, y):
    """Integer quotient and remainder as XLA defines them on integers.

    Both round toward zero, as in C (NumPy's ``//`` rounds down): ``-7 / 2 == -3`` and
    ``-7 % 2 == -1`` (the remainder has the dividend's sign). XLA also defines what C leaves
    undefined: ``x / 0`` has every bit set (-1, or the maximum of an unsigned type), ``x % 0``
    is ``x``, and ``INT_MIN / -1`` wraps to ``INT_MIN`` with remainder 0.
    """
    by_zero = y == 0
    safe_y = np.where(by_zero, np.ones((), y.dtype), y)
    r = np.fmod(x, safe_y)  # C's %; NumPy makes INT_MIN % -1 == 0
    q = np.floor_divide(x - r, safe_y)  # x - r is a multiple of y: the division is exact
    all_bits = np.array(-1).astype(x.dtype)
    return np.where(by_zero, all_bits, q), np.where(by_zero, x, r)


def _div_impl(x, y):
    if dtypes.is_int(x.dtype):
        return _c_division(x, y)[0]
    return np.true_divide(x, y)


def _rem_impl(x, y):
    if dtypes.is_int(x.dtype):
        return _c_division(x, y)[1]
    return np.fmod(x, y)  # C's fmod: the result has the dividend's sign


def _sign_impl(x):
    """-1, 0 or 1; NaN stays NaN, -0.0 stays -0.0 (NumPy makes it 0.0); a complex number
    becomes ``x / |x|`` (0 for 0), computed part by part as XLA does."""
    if dtypes.is_complex(x.dtype):
        r = np.abs(x)
        return np.where(x == 0, np.zeros((), x.dtype), _from_parts(x.real / r, x.imag / r))
    return np.where(x == 0, x, np.sign(x))


def _lexicographic(compare, x, y):
    """Complex max/min as XLA: compare real parts, imaginary parts on a tie; pick ``x`` where
    the comparison holds, else ``y`` (so a NaN part never wins)."""
    take_x = np.where(x.real == y.real, compare(x.imag, y.imag), compare(x.real, y.real))
    return np.where(take_x, x, y)


def _max_impl(x, y):
    if dtypes.is_complex(x.dtype):
        return _lexicographic(np.greater, x, y)
    if not dtypes.is_float(x.dtype):
        return np.maximum(x, y)
    # NaN wins; on a tie of zeros 0.0 beats -0.0 (NumPy's maximum returns either one).
    take_x = (x > y) | np.isnan(x) | ((x == y) & np.signbit(y))
    return np.where(take_x, x, y)


def _min_impl(x, y):
    if dtypes.is_complex(x.dtype):
        return _lexicographic(np.less, x, y)
    if not dtypes.is_float(x.dtype):
        return np.minimum(x, y)
    # NaN wins; on a tie of zeros -0.0 beats 0.0.
    take_x = (x < y) | np.isnan(x) | ((x == y) & ~np.signbit(y))
    return np.where(take_x, x, y)


add_p = _binop("add", np.add, [NUMBER, NUMBER])
sub_p = _binop("sub", np.subtract, [NUMBER, NUMBER])
mul_p = _binop("mul", np.multiply, [NUMBER, NUMBER])
div_p = _binop("div", _div_impl, [NUMBER, NUMBER])
rem_p = _binop("rem", _rem_impl, [FLOAT_OR_INT, FLOAT_OR_INT])
max_p = _binop("max", _max_impl, [ANY, ANY])
min_p = _binop("min", _min_impl, [ANY, ANY])
neg_p = _unop("neg", np.negative, NUMBER)
sign_p = _unop("sign", _sign_impl, NUMBER)
abs_p = _unop("abs", np.abs, SIGNED, _real_dtype)

add = binary_function(add_p, "Element-wise ``x + y``; operands must have equal dtypes "
                             "(``jnp.add`` promotes).")
sub = binary_function(sub_p, "Element-wise ``x - y``.")
mul = binary_function(mul_p, "Element-wise ``x * y``.")
div = binary_function(div_p, "Element-wise ``x / y``; integers round toward zero, as in C.")
rem = binary_function(rem_p, "Element-wise remainder of ``div``: it has the sign of ``x``, "
                             "as C's ``%`` and ``fmod``.")
max = binary_function(max_p, "Element-wise maximum; NaN propagates, complex numbers compare "
                             "lexicographically.")
min = binary_function(min_p, "Element-wise minimum; NaN propagates, complex numbers compare "
                             "lexicographically.")
neg = unary_function(neg_p, "Element-wise ``-x`` (unsigned integers wrap around).")
sign = unary_function(sign_p, "Element-wise sign: -1, 0 or 1 (``x / |x|`` for complex).")
abs = unary_function(abs_p, "Element-wise ``|x|``; complex inputs give their real dtype.")


# ``pow`` is the one binary primitive whose operands may differ in dtype: a float or complex
# base with an integer exponent, or two equal inexact dtypes.
pow_p = Primitive("pow")


@pow_p.def_abstract_eval
def _pow_abstract_eval(x, y):
    check_dtype("pow", x, INEXACT, 0)
    check_dtype("pow", y, NUMBER, 1)
    if not dtypes.is_int(y.dtype) and x.dtype != y.dtype:
        raise TypeError(
            "the first argument to pow must have an inexact dtype (float or complex), and the "
            "second argument must have an inexact or integer dtype, and two inexact dtypes "
            f"must match, but got {x.dtype} and {y.dtype} respectively.")
    shape = broadcast_shapes("pow", x.shape, y.shape)
    return ShapedArray(shape, x.dtype, x.weak_type and y.weak_type)


@pow_p.def_impl
@quiet
def _pow_impl(x, y):
    return np.power(x, y.astype(x.dtype))  # XLA converts an integer exponent to the base's type


def pow(x, y):
    """Element-wise ``x ** y`` for a float or complex ``x``; ``y`` may be an integer array.

    Python scalars: an ``int`` exponent stays an integer (as in JAX); other scalars take the
    dtype of the other operand when that one is inexact.
    """
    def like(scalar, other):
        other_dtype = get_aval(other).dtype
        if isinstance(scalar, (float, builtins.complex)) and dtypes.is_inexact(other_dtype):
            return scalars_like(other, scalar)[1]
        return scalar
    return pow_p.bind(like(x, y), like(y, x))


def _integer_pow_impl(x, *, y):
    """``x ** y`` by repeated squaring, as JAX lowers it (so floats round as in JAX), and
    ``1 / x ** -y`` for negative ``y``. ``x ** 0`` is 1 even for NaN."""
    result, square, n = np.ones_like(x), x, -y if y < 0 else y
    while n:
        if n & 1:
            result = result * square
        n >>= 1
        if n:
            square = square * square
    return 1 / result if y < 0 else result


integer_pow_p = Primitive("integer_pow")
integer_pow_p.def_impl(quiet(_integer_pow_impl))


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x, *, y):
    check_dtype("integer_pow", x, NUMBER)
    if y < 0 and dtypes.is_int(x.dtype):
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.str_short()}, {y})")
    return x


def integer_pow(x, y):
    """Element-wise ``x ** y`` for a static Python integer ``y``."""
    return integer_pow_p.bind(x, y=int(y))


# --- rounding and floating-point structure -------------------------------------------------

class RoundingMethod(enum.IntEnum):
    """How ``round`` breaks ties: ``0.5 -> 1, -0.5 -> -1`` or ``0.5 -> 0, 1.5 -> 2``."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1

    def __str__(self):  # jaxprs print ``round[rounding_method=1]``, on every Python version
        return str(self.value)


def _round_impl(x, *, rounding_method):
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.rint(x)
    whole = np.trunc(x)
    # x - trunc(x) is exact in floating point, so the tie test is too (floor(x + 0.5) is not:
    # it rounds 0.49999997 up). Infinities give inf - inf = NaN, which fails the test.
    return np.where(np.abs(x - whole) >= 0.5, whole + np.copysign(1, x), whole)


floor_p = _unop("floor", np.floor, FLOAT)
ceil_p = _unop("ceil", np.ceil, FLOAT)
round_p = _param_unop("round", _round_impl, FLOAT)
nextafter_p = _binop("nextafter", np.nextafter, [FLOAT, FLOAT])
is_finite_p = _unop("is_finite", np.isfinite, FLOAT, lambda d: dtypes.bool_)

floor = unary_function(floor_p, "Element-wise round toward -inf.")
ceil = unary_function(ceil_p, "Element-wise round toward +inf.")
nextafter = binary_function(nextafter_p, "The next representable float after ``x`` in the "
                                         "direction of ``y``.")
is_finite = unary_function(is_finite_p, "Element-wise: neither infinite nor NaN.")


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Element-wise round to an integral value; ties as ``rounding_method`` says."""
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


# --- transcendental ------------------------------------------------------------------------

def _atan2_impl(x, y):
    """The angle of the point ``(y, x)``; for complex operands the analytic continuation
    ``-i log((y + i x) / sqrt(x**2 + y**2))`` (NumPy has no complex arctan2)."""
    if dtypes.is_complex(x.dtype):  # in complex128: the formula loses digits in complex64
        x, y = x.astype(np.complex128), y.astype(np.complex128)
        return -1j * np.log((y + 1j * x) / np.sqrt(x * x + y * y))
    return np.arctan2(x, y)


exp_p = _unop("exp", np.exp, INEXACT)
exp2_p = _unop("exp2", np.exp2, INEXACT)
log_p = _unop("log", np.log, INEXACT)
log1p_p = _unop("log1p", np.log1p, INEXACT)
expm1_p = _unop("expm1", np.expm1, INEXACT)
tanh_p = _unop("tanh", np.tanh, INEXACT)
logistic_p = _unop("logistic", lambda x: 1 / (1 + np.exp(-x)), INEXACT)
sin_p = _unop("sin", np.sin, INEXACT)
cos_p = _unop("cos", np.cos, INEXACT)
tan_p = _unop("tan", np.tan, INEXACT)
asin_p = _unop("asin", np.arcsin, INEXACT)
acos_p = _unop("acos", np.arccos, INEXACT)
atan_p = _unop("atan", np.arctan, INEXACT)
atan2_p = _binop("atan2", _atan2_impl, [INEXACT, INEXACT])
sinh_p = _unop("sinh", np.sinh, INEXACT)
cosh_p = _unop("cosh", np.cosh, INEXACT)
asinh_p = _unop("asinh", np.arcsinh, INEXACT)
acosh_p = _unop("acosh", np.arccosh, INEXACT)
atanh_p = _unop("atanh", np.arctanh, INEXACT)
sqrt_p = _unop("sqrt", np.sqrt, INEXACT)
rsqrt_p = _unop("rsqrt", lambda x: 1 / np.sqrt(x), INEXACT)
cbrt_p = _unop("cbrt", np.cbrt, FLOAT)

exp = unary_function(exp_p, "Element-wise ``e ** x``.")
exp2 = unary_function(exp2_p, "Element-wise ``2 ** x``.")
log = unary_function(log_p, "Element-wise natural logarithm.")
log1p = unary_function(log1p_p, "Element-wise ``log(1 + x)``, accurate for small ``x``.")
expm1 = unary_function(expm1_p, "Element-wise ``exp(x) - 1``, accurate for small ``x``.")
tanh = unary_function(tanh_p, "Element-wise hyperbolic tangent.")
logistic = unary_function(logistic_p, "Element-wise ``1 / (1 + exp(-x))``.")
sin = unary_function(sin_p, "Element-wise sine.")
cos = unary_function(cos_p, "Element-wise cosine.")
tan = unary_function(tan_p, "Element-wise tangent.")
asin = unary_function(asin_p, "Element-wise arcsine.")
acos = unary_function(acos_p, "Element-wise arccosine.")
atan = unary_function(atan_p, "Element-wise arctangent.")
atan2 = binary_function(atan2_p, "Element-wise arctangent of ``x / y``, in the quadrant of "
                                 "the point ``(y, x)``.")
sinh = unary_function(sinh_p, "Element-wise hyperbolic sine.")
cosh = unary_function(cosh_p, "Element-wise hyperbolic cosine.")
asinh = unary_function(asinh_p, "Element-wise inverse hyperbolic sine.")
acosh = unary_function(acosh_p, "Element-wise inverse hyperbolic cosine.")
atanh = unary_function(atanh_p, "Element-wise inverse hyperbolic tangent.")
sqrt = unary_function(sqrt_p, "Element-wise square root.")
rsqrt = unary_function(rsqrt_p, "Element-wise ``1 / sqrt(x)``.")
cbrt = unary_function(cbrt_p, "Element-wise cube root.")


# --- comparisons ---------------------------------------------------------------------------

def _to_bool(dtype):
    return dtypes.bool_


eq_p = _binop("eq", np.equal, [ANY, ANY], _to_bool)
ne_p = _binop("ne", np.not_equal, [ANY, ANY], _to_bool)
lt_p = _binop("lt", np.less, [ORDERED, ORDERED], _to_bool)
le_p = _binop("le", np.less_equal, [ORDERED, ORDERED], _to_bool)
gt_p = _binop("gt", np.greater, [ORDERED, ORDERED], _to_bool)
ge_p = _binop("ge", np.greater_equal, [ORDERED, ORDERED], _to_bool)

eq = binary_function(eq_p, "Element-wise ``x == y``.")
ne = binary_function(ne_p, "Element-wise ``x != y``.")
lt = binary_function(lt_p, "Element-wise ``x < y``.")
le = binary_function(le_p, "Element-wise ``x <= y``.")
gt = binary_function(gt_p, "Element-wise ``x > y``.")
ge = binary_function(ge_p, "Element-wise ``x >= y``.")


# --- bits ----------------------------------------------------------------------------------

# C leaves shifts by negative amounts or by the bit width or more undefined; XLA defines
# them, and NumPy (since 1.17) defines them the same way: the amount is read as unsigned, a
# left or logical right shift that far gives 0, an arithmetic one fills with the sign bit. What
# NumPy does not do is choose the kind of right shift by anything but the signedness of
# ``x``, so the two right shifts reinterpret the bits first (same width, so ``view``).

def _shift_right_logical_impl(x, y):
    """Shift in zeros, even for signed ``x``."""
    unsigned = _unsigned(x.dtype)
    return np.right_shift(x.view(unsigned), y.view(unsigned)).view(x.dtype)


def _shift_right_arithmetic_impl(x, y):
    """Shift in copies of the top bit, even for unsigned ``x`` (uint8 128 >> 1 == 192)."""
    signed = _signed(x.dtype)
    return np.right_shift(x.view(signed), y.view(signed)).view(x.dtype)


def _bits(x):
    """Each element's bits, most significant first, along a new last axis."""
    big_endian = np.asarray(x, x.dtype.newbyteorder(">"))
    as_bytes = np.frombuffer(big_endian.tobytes(), np.uint8)
    return np.unpackbits(as_bytes.reshape(x.shape + (x.dtype.itemsize,)), axis=-1)


def _population_count_impl(x):
    return _bits(x).sum(axis=-1).astype(x.dtype)


def _clz_impl(x):
    """Leading zero bits: the index of the first set bit, or the bit width if there is none."""
    bits = _bits(x)
    return np.where(bits.any(axis=-1), bits.argmax(axis=-1), bits.shape[-1]).astype(x.dtype)


and_p = _binop("and", np.bitwise_and, [INT_OR_BOOL, INT_OR_BOOL])
or_p = _binop("or", np.bitwise_or, [INT_OR_BOOL, INT_OR_BOOL])
xor_p = _binop("xor", np.bitwise_xor, [INT_OR_BOOL, INT_OR_BOOL])
not_p = _unop("not", np.invert, INT_OR_BOOL)
shift_left_p = _binop("shift_left", np.left_shift, [INT, INT])
shift_right_logical_p = _binop("shift_right_logical", _shift_right_logical_impl, [INT, INT])
shift_right_arithmetic_p = _binop("shift_right_arithmetic", _shift_right_arithmetic_impl,
                                  [INT, INT])
population_count_p = _unop("population_count", _population_count_impl, INT)
clz_p = _unop("clz", _clz_impl, INT)

bitwise_and = binary_function(and_p, "Element-wise AND of bools or integer bits.",
                              "bitwise_and")
bitwise_or = binary_function(or_p, "Element-wise OR of bools or integer bits.", "bitwise_or")
bitwise_xor = binary_function(xor_p, "Element-wise XOR of bools or integer bits.",
                              "bitwise_xor")
bitwise_not = unary_function(not_p, "Element-wise NOT of bools or integer bits.",
                             "bitwise_not")
shift_left = binary_function(shift_left_p, "Element-wise ``x << y``; shifting by the bit "
                                           "width or more gives 0.")
shift_right_logical = binary_function(
    shift_right_logical_p, "Element-wise right shift filling with zeros; shifting by the bit "
                           "width or more gives 0.")
shift_right_arithmetic = binary_function(
    shift_right_arithmetic_p, "Element-wise right shift filling with the sign bit; shifting "
                              "by the bit width or more fills every bit with it.")
population_count = unary_function(population_count_p, "Element-wise number of set bits.")
clz = unary_function(clz_p, "Element-wise number of leading zero bits.")


# --- complex numbers -----------------------------------------------------------------------

# ``complex`` and ``conj`` accept float32 and float64 (there is no complex32 for float16).
_COMPLEX_PARTS = ("float32, float64", lambda d: d in (dtypes.float32, dtypes.float64))
_CONJ_INPUT = ("float32, complexfloating, float64",
               lambda d: _COMPLEX_PARTS[1](d) or dtypes.is_complex(d))

real_p = _unop("real", np.real, COMPLEX, _real_dtype)
imag_p = _unop("imag", np.imag, COMPLEX, _real_dtype)
complex_p = _binop("complex", _from_parts, [_COMPLEX_PARTS, _COMPLEX_PARTS], _complex_dtype)
# ``input_dtype`` records whether the input was real, which conj's transpose needs.
conj_p = _param_unop("conj", lambda x, *, input_dtype: np.conj(x).astype(_complex_dtype(x.dtype)),
                     _CONJ_INPUT, _complex_dtype)

real = unary_function(real_p, "Element-wise real part.")
imag = unary_function(imag_p, "Element-wise imaginary part.")
complex = binary_function(complex_p, "Element-wise ``x + i y`` from two float arrays.")


def conj(x):
    """Element-wise complex conjugate; a real input becomes complex."""
    return conj_p.bind(x, input_dtype=get_aval(x).dtype)


# --- selection -----------------------------------------------------------------------------

select_n_p = Primitive("select_n")


@select_n_p.def_abstract_eval
def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise TypeError("select must have at least one case")
    if any(c.shape != cases[0].shape for c in cases[1:]):
        raise TypeError(f"select cases must have the same shapes, got "
                        f"[{', '.join(str(c.shape) for c in cases)}].")
    if which.shape and which.shape != cases[0].shape:
        raise TypeError(f"select `which` must be scalar or have the same shape as cases, got "
                        f"`which` shape {which.shape} but case shape {cases[0].shape}.")
    same_dtypes("select", cases)
    if not (dtypes.is_bool(which.dtype) or dtypes.is_int(which.dtype)):
        raise TypeError(f"select `which` must be boolean or integer type, got {which.dtype}.")
    if dtypes.is_bool(which.dtype) and len(cases) > 2:
        raise TypeError("select with boolean `which` cannot have > 2 cases.")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


@select_n_p.def_impl
def _select_n_impl(which, *cases):
    # XLA lowers select_n to comparisons of ``which`` with the case numbers, so a value below
    # 0 picks the first case and one past the end the last. (Going through float64 keeps huge
    # uint64 values huge; every index that matters is exact there.)
    index = np.clip(which.astype(np.float64), 0, len(cases) - 1).astype(np.intp)
    stacked = np.stack(cases)
    index = np.broadcast_to(index, stacked.shape[1:])
    return np.take_along_axis(stacked, index[None], axis=0)[0]


def select_n(which, *cases):
    """``cases[which]`` element-wise; ``which`` is a bool (two cases) or an integer array."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    return select_n_p.bind(which, *scalars_like(*cases))


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` holds, else ``on_false`` (``select_n`` lists the false case
    first, as it is case 0)."""
    return select_n(pred, on_false, on_true)


clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_abstract_eval(lo, x, hi):
    for name, bound in (("min", lo), ("max", hi)):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(f"clamp requires {name}.shape == operand.shape or {name}.shape == "
                            f"(), got {name}.shape={bound.shape}, operand.shape={x.shape}.")
    same_dtypes("clamp", [lo, x, hi])
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


@clamp_p.def_impl
def _clamp_impl(lo, x, hi):
    return _min_impl(_max_impl(x, lo), hi)  # XLA's order: with lo > hi every value is hi


def clamp(min, x, max):
    """``x`` limited to ``[min, max]``; the bounds are scalars or arrays shaped like ``x``."""
    return clamp_p.bind(*scalars_like(min, x, max))


# --- dtype conversion ----------------------------------------------------------------------

def _float_to_int(x, dtype):
    """Float to integer as XLA converts: toward zero, saturating at the type's bounds, NaN to 0.

    The bounds ``min`` and ``max + 1`` are powers of two (or 0), so comparing against them is
    exact in any float type; clipping to ``max`` instead would round ``2**31 - 1`` up to
    ``2**31`` in float32, which then overflows.
    """
    info = np.iinfo(dtype)
    whole = np.trunc(x)
    above = whole >= float(info.max + 1)
    below = whole < float(info.min)
    fits = ~(above | below | np.isnan(whole))
    out = np.where(fits, whole, 0).astype(dtype)
    return np.where(above, info.max, np.where(below, info.min, out)).astype(dtype)


convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_element_type_abstract_eval(x, *, new_dtype, weak_type):
    check_dtype("convert_element_type", x, ANY)
    return ShapedArray(x.shape, new_dtype, weak_type)


@convert_element_type_p.def_impl
@quiet
def _convert_element_type_impl(x, *, new_dtype, weak_type):
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = np.real(x)  # JAX keeps the real part, also when converting to bool
    if dtypes.is_float(x.dtype) and dtypes.is_int(new_dtype):
        return _float_to_int(x, new_dtype)
    # Everything else is NumPy's astype: integers wrap, floats round to nearest (overflowing
    # to inf), and bool is ``x != 0`` (so NaN is True).
    return np.asarray(x).astype(new_dtype)


def convert_element_type(x, new_dtype, weak_type=False):
    """Convert ``x`` to ``new_dtype`` (canonicalized: 32-bit unless x64 is on)."""
    new_dtype = dtypes.canonicalize(new_dtype)
    aval = get_aval(x)
    if dtypes.is_complex(aval.dtype) and not dtypes.is_complex(new_dtype):
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=2)
    if aval.dtype == new_dtype and aval.weak_type == weak_type and isinstance(x, (Array, Tracer)):
        return x
    params = dict(new_dtype=new_dtype, weak_type=bool(weak_type))
    if not isinstance(x, Tracer):  # a constant: convert it now rather than stage the conversion
        out_aval = convert_element_type_p.abstract_eval(aval, **params)
        # A Python int may not fit the default int (2**100 -> float32 is fine): let NumPy hold it.
        value = np.asarray(x) if type(x) is int else to_numpy(x)
        return Array.wrap(convert_element_type_p.impl(value, **params), out_aval)
    return convert_element_type_p.bind(x, **params)


def _bitcast_shape(shape, old, new):
    """Same width keeps the shape; a narrower type adds a trailing axis of the width ratio; a
    wider one consumes a trailing axis of exactly that ratio."""
    if old.itemsize == new.itemsize:
        return shape
    if old.itemsize > new.itemsize:
        return shape + (old.itemsize // new.itemsize,)
    last = shape[-1] if shape else 1
    if last * old.itemsize != new.itemsize:
        raise ValueError(
            f"Attempting to convert array of shape {shape} from {old} of size "
            f"{8 * old.itemsize} bits to {new} of size {8 * new.itemsize} bits, but "
            f"{last} * {8 * old.itemsize} != {8 * new.itemsize}")
    return shape[:-1]


bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_convert_type_abstract_eval(x, *, new_dtype):
    kinds_with_layout = (dtypes.is_bool, dtypes.is_complex)
    if x.dtype != new_dtype and any(k(d) for k in kinds_with_layout for d in (x.dtype, new_dtype)):
        raise TypeError("lax.bitcast_convert_type does not support bool or complex values "
                        "unless the operand and destination types match. Got operand "
                        f"dtype={x.dtype}, new_dtype={new_dtype}.")
    return ShapedArray(_bitcast_shape(x.shape, x.dtype, new_dtype), new_dtype, False)


@bitcast_convert_type_p.def_impl
def _bitcast_convert_type_impl(x, *, new_dtype):
    # The bytes in row-major order, read back as the new type (little-endian, as XLA on CPU).
    out = np.frombuffer(x.tobytes(), new_dtype)
    return out.reshape(_bitcast_shape(x.shape, x.dtype, new_dtype))


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of ``operand`` as ``new_dtype`` (see ``_bitcast_shape``)."""
    return bitcast_convert_type_p.bind(operand, new_dtype=dtypes.canonicalize(new_dtype))

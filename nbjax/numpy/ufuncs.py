"""Element-wise ``jnp`` functions: NumPy's ufuncs with JAX's promotion rules.

Most functions are one lax primitive after promotion, declared with ``_unary``/``_binary``.
The rest (floor division, ``remainder``, ``hypot``, ``logaddexp``, ...) are short compositions
of lax primitives, written as JAX writes them so that results, dtypes and NaN/inf behaviour
match. ``to_bool`` is shared with the other jnp modules.
"""

import operator
import warnings

import numpy as np

from .. import lax
from ..core import Tracer, dtypes, get_aval
from ..custom_derivatives import custom_jvp
from ..lax.standard import scalar_like
from .util import (all_weak, broadcast_together, check_arraylike, filled_like, promote_args,
                   promote_args_inexact, select_where, to_array, with_weak_type)

__all__ = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder", "mod",
    "divmod", "fmod", "power", "pow", "float_power", "negative", "positive", "abs", "absolute",
    "fabs", "sign", "floor", "ceil", "round", "around", "rint", "trunc", "fix", "exp", "exp2",
    "expm1", "log", "log2", "log10", "log1p", "logaddexp", "logaddexp2", "sqrt", "cbrt",
    "square", "reciprocal", "sin", "cos", "tan", "arcsin", "asin", "arccos", "acos", "arctan",
    "atan", "arctan2", "atan2", "sinh", "cosh", "tanh", "arcsinh", "asinh", "arccosh", "acosh",
    "arctanh", "atanh", "deg2rad", "radians", "rad2deg", "degrees", "hypot", "maximum",
    "minimum", "fmax", "fmin", "clip", "sinc", "heaviside", "copysign", "nextafter", "signbit",
    "ldexp", "frexp", "modf", "gcd", "lcm", "isnan", "isinf", "isfinite", "isposinf",
    "isneginf", "isreal", "iscomplex", "real", "imag", "conj", "conjugate", "angle",
    "nan_to_num", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_invert", "invert", "left_shift", "right_shift",
    "bitwise_left_shift", "bitwise_right_shift", "isclose", "astype", "bitwise_count",
    "spacing", "i0",
]


def _dtype(x):
    return get_aval(x).dtype


def _require(name, x, test, kinds):
    """Raise TypeError (as jnp does) when ``x``'s dtype is not of the accepted kinds."""
    if not test(_dtype(x)):
        raise TypeError(f"{name} does not accept dtype {_dtype(x).name}. "
                        f"Accepted dtypes are subtypes of {kinds}.")


# JAX's ValueError for each function not defined on complex numbers ({dtype}: the input's).
_COMPLEX_REFUSALS = {
    "hypot": "jnp.hypot is not well defined for complex-valued inputs. Please convert to real "
             "values first, such as by using abs(x)",
    "clip": "Clip received a complex value either through the input or the min/max keywords. "
            "Complex values have no ordering and cannot be clipped. Please convert to a real "
            "value or array by taking the real or imaginary components via "
            "jax.numpy.real/imag respectively.",
    "signbit": "jax.numpy.signbit is not well defined for {dtype}",
    "isposinf": "isposinf/isneginf are not well defined for complex types",
    "isneginf": "isposinf/isneginf are not well defined for complex types",
    "spacing": "jnp.spacing is not defined for complex inputs.",
    "i0": "Unsupported input type to jax.numpy.i0: {dtype}",
}


def _not_for_complex(name, *args):
    """jnp raises ValueError for functions not well defined on complex numbers."""
    for a in args:
        if dtypes.is_complex(_dtype(a)):
            raise ValueError(_COMPLEX_REFUSALS[name].format(dtype=_dtype(a)))


def _real_floats_only(name, x):
    """frexp's and copysign's TypeError: JAX's words for complex, ``_require``'s else."""
    if dtypes.is_complex(_dtype(x)):
        raise TypeError(f"{name} does not support complex-valued inputs")
    _require(name, x, dtypes.is_float, "floating")


def _is_int_or_bool(dtype):
    return dtypes.is_int(dtype) or dtypes.is_bool(dtype)


def _named(name, fn, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _unary(name, lax_fn, inexact=False):
    promote = promote_args_inexact if inexact else promote_args

    def fn(x, /):
        return lax_fn(*promote(name, x))
    return _named(name, fn, f"Element-wise ``{name}``"
                  + (" (integers become floats)." if inexact else "."))


def _binary(name, lax_fn, inexact=False):
    promote = promote_args_inexact if inexact else promote_args

    def fn(x, y, /):
        return lax_fn(*promote(name, x, y))
    return _named(name, fn, f"Element-wise ``{name}`` with NumPy broadcasting and JAX type "
                  "promotion" + (" (integers become floats)." if inexact else "."))


# --- arithmetic ----------------------------------------------------------------------------

def _bool_or(lax_fn, bool_fn):
    """A lax function that uses ``bool_fn`` for booleans (``True + True`` is ``True``)."""
    return lambda x, y: (bool_fn if dtypes.is_bool(_dtype(x)) else lax_fn)(x, y)


add = _binary("add", _bool_or(lax.add, lax.bitwise_or))
subtract = _binary("subtract", lax.sub)
multiply = _binary("multiply", _bool_or(lax.mul, lax.bitwise_and))
divide = true_divide = _binary("divide", lax.div, inexact=True)
negative = _unary("negative", lax.neg)


def positive(x, /):
    """``+x``: the value itself, after the usual promotion."""
    return promote_args("positive", x)[0]


def _numeric_int(name, x, y):
    """Promote for integer-style division: bools count as the default int; no complex."""
    x, y = promote_args(name, x, y)
    if dtypes.is_complex(_dtype(x)):
        raise TypeError(f"{name} does not support complex-valued inputs")
    if dtypes.is_bool(_dtype(x)):
        x, y = (lax.convert_element_type(a, dtypes.default_int()) for a in (x, y))
    return x, y


def _float_divmod(x, y):
    """Floor quotient and remainder of floats, as NumPy defines them (sign of the divisor)."""
    mod, zero = lax.rem(x, y), scalar_like(x, 0)
    # x / 0 keeps its infinity: rem(x, 0) is nan, so x - mod would make the quotient nan.
    quotient = lax.div(select_where(lax.eq(y, zero), x, lax.sub(x, mod)), y)
    fix = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(y, zero), lax.lt(mod, zero)))
    mod = select_where(fix, lax.add(mod, y), mod)
    quotient = select_where(fix, lax.sub(quotient, scalar_like(x, 1)), quotient)
    return lax.round(quotient, lax.RoundingMethod.TO_NEAREST_EVEN), mod


def floor_divide(x, y, /):
    """``x // y``: rounds toward minus infinity (C division rounds toward zero)."""
    x, y = _numeric_int("floor_divide", x, y)
    if dtypes.is_float(_dtype(x)):
        return _float_divmod(x, y)[0]
    quotient = lax.div(x, y)
    if dtypes.is_unsigned_int(_dtype(x)):
        return quotient
    # (signs compared as JAX does: by zero, lax's -1 steps down too where x > 0)
    inexact = lax.bitwise_and(lax.ne(lax.sign(x), lax.sign(y)),
                              lax.ne(lax.rem(x, y), scalar_like(x, 0)))
    return select_where(inexact, lax.sub(quotient, scalar_like(x, 1)), quotient)


def _nonzero_divisor(y):
    """An integer divisor with its zeros made ones: the remainder by zero is 0, as in JAX
    and NumPy (lax's ``rem`` by zero is the dividend)."""
    if not dtypes.is_int(_dtype(y)):
        return y
    return select_where(lax.eq(y, scalar_like(y, 0)), filled_like(y, 1), y)


def remainder(x, y, /):
    """``x % y``: the remainder has the sign of the divisor (``fmod``: of the dividend)."""
    x, y = _numeric_int("remainder", x, y)
    y = _nonzero_divisor(y)
    trunc_mod = lax.rem(x, y)
    if dtypes.is_unsigned_int(_dtype(x)):
        return trunc_mod
    zero = scalar_like(x, 0)
    fix = lax.bitwise_and(lax.ne(trunc_mod, zero),
                          lax.ne(lax.lt(trunc_mod, zero), lax.lt(y, zero)))
    return select_where(fix, lax.add(trunc_mod, y), trunc_mod)


mod = remainder


def divmod(x, y, /):
    """``(x // y, x % y)``."""
    return floor_divide(x, y), remainder(x, y)


def fmod(x, y, /):
    """C's remainder: truncated division, so the result has the sign of ``x``."""
    x, y = _numeric_int("fmod", x, y)
    return lax.rem(x, _nonzero_divisor(y))


def _concrete_int(x):
    """``x`` as a Python int when it is a concrete integer scalar, else None."""
    if isinstance(x, Tracer) or isinstance(x, bool):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _pow_int_int(x, y):
    """Integer power by binary exponentiation; 6 steps cover every exponent that does not
    overflow for a base above one (JAX makes the same choice)."""
    one = filled_like(x, 1)
    y_zero, y_one = scalar_like(y, 0), scalar_like(y, 1)
    acc = select_where(lax.bitwise_and(lax.eq(x, scalar_like(x, 0)), lax.ne(y, y_zero)),
                 filled_like(x, 0), one)
    for _ in range(6):
        acc = select_where(lax.ne(lax.bitwise_and(y, y_one), y_zero), lax.mul(acc, x), acc)
        x = lax.mul(x, x)
        y = lax.shift_right_logical(y, filled_like(y, 1))
    return acc


def power(x, y, /):
    """``x ** y``. A concrete integer exponent uses ``integer_pow`` (exact, differentiable at
    zero); integer bases with integer exponents stay integers."""
    check_arraylike("power", x, y)
    exponent = _concrete_int(y)
    if exponent is not None:
        (x,) = promote_args("power", x)
        return lax.integer_pow(_bool_as_int(x), exponent)
    # (JAX keeps an integer exponent an integer, and so a strongly typed one makes the
    # result strongly typed; a bool exponent does so only for an integer result)
    strong_exponent = not all_weak(y)
    int_exponent = dtypes.is_int(_dtype(y))
    x, y = promote_args("power", x, y)
    if _is_int_or_bool(_dtype(x)):
        if dtypes.is_bool(_dtype(x)):
            x, y = (lax.convert_element_type(a, dtypes.default_int()) for a in (x, y))
        result, strong = _pow_int_int(x, y), strong_exponent
    else:
        result, strong = lax.pow(x, y), strong_exponent and int_exponent
    return with_weak_type(result, False) if strong else result


pow = power


def _bool_as_int(x):
    """Bools as the default integer (weak as they were): what ``x ** n`` and ``square``
    compute on, as in JAX."""
    if dtypes.is_bool(_dtype(x)):
        return lax.convert_element_type(x, dtypes.default_int(), get_aval(x).weak_type)
    return x


def float_power(x, y, /):
    """``x ** y`` computed in floating point."""
    return lax.pow(*promote_args_inexact("float_power", x, y))


def abs(x, /):
    """Absolute value; complex numbers give their (real) magnitude."""
    (x,) = promote_args("abs", x)
    if dtypes.is_unsigned_int(_dtype(x)) or dtypes.is_bool(_dtype(x)):
        return x
    return lax.abs(x)


absolute = abs


def fabs(x, /):
    """Absolute value as a float (complex inputs are rejected, as NumPy does)."""
    (x,) = promote_args_inexact("fabs", x)
    _require("fabs", x, dtypes.is_float, "floating")
    return lax.abs(x)


def sign(x, /):
    """-1, 0 or 1 (``x / |x|`` for complex numbers)."""
    (x,) = promote_args("sign", x)
    return lax.sign(x)


def square(x, /):
    """``x * x``: one ``square`` equation, as in JAX (bools become integers)."""
    check_arraylike("square", x)
    (x,) = promote_args("square", x)
    return lax.square(_bool_as_int(x))


def reciprocal(x, /):
    (x,) = promote_args_inexact("reciprocal", x)
    return lax.integer_pow(x, -1)


# --- rounding ------------------------------------------------------------------------------

def _rounding(name, lax_fn):
    """floor/ceil/trunc: integers are already whole, complex numbers are rejected."""
    def fn(x, /):
        (x,) = promote_args(name, x)
        if _is_int_or_bool(_dtype(x)):
            return x
        _require(name, x, dtypes.is_float, "floating")
        return lax_fn(x)
    return _named(name, fn, f"Element-wise ``{name}``; integer inputs are returned as is.")


def _trunc(x):
    return select_where(lax.lt(x, scalar_like(x, 0)), lax.ceil(x), lax.floor(x))


floor = _rounding("floor", lax.floor)
ceil = _rounding("ceil", lax.ceil)
_truncated = _rounding("trunc", _trunc)


def trunc(x):
    """Element-wise ``trunc`` (towards zero); integer inputs are returned as is. (JAX's
    takes ``x`` by keyword too, unlike ``floor`` and ``ceil``.)"""
    return _truncated(x)


fix = trunc


def _round_parts(x, fn):
    """Apply a real rounding ``fn`` to a complex number's parts separately."""
    if dtypes.is_complex(_dtype(x)):
        return lax.complex(fn(lax.real(x)), fn(lax.imag(x)))
    return fn(x)


def round(a, decimals=0, out=None):
    """Round half to even at ``decimals`` decimal places (negative: tens, hundreds...)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.round is not supported.")
    (a,) = promote_args("round", a)
    decimals = operator.index(decimals)
    if dtypes.is_bool(_dtype(a)):
        raise ValueError("jnp.round does not round booleans (as JAX's: a bool is not "
                         "inexact); convert them to a number first")
    if _is_int_or_bool(_dtype(a)):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return a
    if decimals > np.log10(float(dtypes.finfo(_dtype(a)).max)):
        return a  # finer than the dtype can hold: a no-op (not 10**decimals = inf), as JAX

    def round_real(x):
        if decimals == 0:
            return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
        # float16 is scaled in float32 (as JAX): 6.85 * 10 would round to 68.5 in float16.
        half = _dtype(x) == np.float16
        wide = lax.convert_element_type(x, np.float32) if half else x
        factor = scalar_like(wide, 10.0 ** decimals)
        out = lax.div(lax.round(lax.mul(wide, factor), lax.RoundingMethod.TO_NEAREST_EVEN),
                      factor)
        return lax.convert_element_type(out, np.float16) if half else out
    return _round_parts(a, round_real)


around = round


def rint(x, /):
    """Round to the nearest integer (half to even), as a float (of integers: not weakly
    typed, as in JAX)."""
    check_arraylike("rint", x)
    integral = _is_int_or_bool(_dtype(x))
    (x,) = promote_args_inexact("rint", x)
    rounded = _round_parts(x, lambda v: lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN))
    return with_weak_type(rounded, False) if integral else rounded


# --- exponentials, logarithms, powers ------------------------------------------------------

exp = _unary("exp", lax.exp, inexact=True)
exp2 = _unary("exp2", lax.exp2, inexact=True)
expm1 = _unary("expm1", lax.expm1, inexact=True)
log = _unary("log", lax.log, inexact=True)
log1p = _unary("log1p", lax.log1p, inexact=True)
sqrt = _unary("sqrt", lax.sqrt, inexact=True)


def _scaled_log(name, x, factor, op):
    """``op(log(x), factor(like))``; for a complex ``x`` ``op`` of each part of the
    logarithm, as JAX scales it (complex arithmetic with ``factor + 0j`` would make the
    imaginary part of ``log2(0)`` or ``log2(inf+1j)`` ``inf * 0``, a NaN)."""
    (x,) = promote_args_inexact(name, x)
    log = lax.log(x)
    if not dtypes.is_complex(_dtype(x)):
        return op(log, factor(log))
    re, im = lax.real(log), lax.imag(log)
    scale = factor(re)
    return lax.complex(op(re, scale), op(im, scale))


def log2(x, /):
    """Base-2 logarithm: ``log(x) / log(2)``, as JAX computes it."""
    return _scaled_log("log2", x, lambda like: lax.log(filled_like(like, 2, _dtype(like))),
                       lax.div)


def log10(x, /):
    """Base-10 logarithm: ``log(x)`` times ``1/log(10)`` in ``x``'s type, as JAX computes it
    (rounded as JAX's in the narrow types)."""
    return _scaled_log("log10", x,
                       lambda like: filled_like(like, 1 / np.log(10), _dtype(like)), lax.mul)


def cbrt(x, /):
    """Real cube root (negative for negative inputs)."""
    (x,) = promote_args_inexact("cbrt", x)
    _require("cbrt", x, dtypes.is_float, "floating")
    return lax.cbrt(x)


def _logaddexp(name, exp_fn, log1p_fn, half_period):
    """``log(exp(x) + exp(y))`` (in base e or 2) with its own derivative, as in JAX.

    Differentiating ``max(x, y) + log1p(exp(-|x - y|))`` would be wrong where ``x == y``:
    max splits the tie (1/2 each) but abs' derivative at 0 is 1, giving (0, 1) instead of
    (1/2, 1/2). The JVP is the softmax weights ``exp(x - out)`` (``exp2`` in base 2), with
    +inf (in the real part) replaced by 0 so that ``inf - inf`` cannot make them NaN (JAX's
    rule). The imaginary part of a complex result is wrapped into
    ``[-half_period, half_period]``, the period of ``exp_fn`` along the imaginary axis.
    """
    def stable(x, y):
        if dtypes.is_complex(_dtype(x)):
            return _complex_logaddexp(x, y, exp_fn, log1p_fn, half_period)
        delta = lax.sub(x, y)
        # Both infinite with one sign makes delta NaN; x + y is then the right answer.
        out = lax.add(lax.max(x, y), log1p_fn(exp_fn(lax.neg(lax.abs(delta)))))
        return select_where(lax.ne(delta, delta), lax.add(x, y), out)

    stable.__name__ = stable.__qualname__ = name  # the name the jaxpr shows
    stable = custom_jvp(stable)

    @stable.defjvp
    def _jvp(primals, tangents):
        out = stable(*primals)

        def weight(v):
            return exp_fn(lax.sub(_replace_posinf(v), _replace_posinf(out)))
        (x, y), (tx, ty) = primals, tangents
        return out, lax.add(lax.mul(tx, weight(x)), lax.mul(ty, weight(y)))

    def fn(x, y, /):
        x, y = promote_args_inexact(name, x, y)
        return stable(x, y)
    return _named(name, fn, f"``{name}``: the log of a sum of exponentials, without overflow.")


def _complex_logaddexp(x, y, exp_fn, log1p_fn, half_period):
    """JAX's complex ``logaddexp``: ``max + log1p(exp(min - max))`` for the lexicographic
    max (``min - max`` is written ``x + y - 2 max``), the imaginary part wrapped."""
    larger = lax.max(x, y)
    delta = lax.sub(lax.add(x, y), lax.mul(larger, scalar_like(larger, 2)))
    out = lax.add(larger, log1p_fn(exp_fn(delta)))
    return lax.complex(lax.real(out), _wrap_between(lax.imag(out), half_period))


def _wrap_between(x, bound):
    """``x`` moved by a multiple of ``2 bound`` into ``[-bound, bound)``."""
    period = scalar_like(x, 2 * bound)
    wrapped = lax.rem(lax.add(x, scalar_like(x, bound)), period)
    wrapped = select_where(lax.lt(wrapped, scalar_like(x, 0)), lax.add(wrapped, period), wrapped)
    return lax.sub(wrapped, scalar_like(x, bound))


def _replace_posinf(x):
    """``x`` with 0 where its real part is +inf."""
    real_x = lax.real(x) if dtypes.is_complex(_dtype(x)) else x
    return select_where(lax.eq(real_x, scalar_like(real_x, np.inf)), filled_like(x, 0), x)


logaddexp = _logaddexp("logaddexp", lax.exp, lax.log1p, np.pi)
logaddexp2 = _logaddexp("logaddexp2", lax.exp2,
                        lambda v: lax.div(lax.log1p(v), scalar_like(v, np.log(2))),
                        np.pi / np.log(2))


def ldexp(x1, x2, /):
    """``x1 * 2**x2`` for an integer ``x2``, scaling in two steps so 2**x2 cannot overflow."""
    check_arraylike("ldexp", x1, x2)
    (x1,) = promote_args_inexact("ldexp", x1)
    if dtypes.is_complex(_dtype(x1)) or not _is_int_or_bool(get_aval(x2).dtype):
        raise ValueError(f"ldexp not supported for input types ({_dtype(x1)}, "
                         f"{get_aval(x2).dtype}): it takes a real x1 and an integer x2")
    x1 = lax.convert_element_type(x1, _dtype(x1))  # the result is never weak, as in JAX
    x1, x2 = broadcast_together(x1, to_array(x2))
    return _times_pow2(x1, lax.convert_element_type(x2, dtypes.default_int()))


def _times_pow2(x, e):
    """``x * 2**e`` for an integer array ``e``, in three steps of about a third of ``e``:
    2**e alone may overflow (or underflow) where the product does not. ``e`` is first
    limited to the span beyond which every product overflows or underflows anyway, so that
    no step's factor is infinite (0 * 2**255 is 0, not 0 * inf)."""
    info = dtypes.finfo(_dtype(x))
    span = info.maxexp - info.minexp + info.nmant + 2
    e = lax.clamp(scalar_like(e, -span), e, scalar_like(e, span))
    third = lax.div(e, filled_like(e, 3))
    for part in (third, third, lax.sub(e, lax.add(third, third))):
        x = lax.mul(x, lax.exp2(lax.convert_element_type(part, _dtype(x))))
    return x


def frexp(x, /):
    """Split ``x`` into a mantissa in [0.5, 1) and an int32 exponent: ``x = m * 2**e``."""
    (x,) = promote_args_inexact("frexp", x)
    _real_floats_only("frexp", x)
    x = lax.convert_element_type(x, _dtype(x))
    special = lax.bitwise_or(lax.eq(x, scalar_like(x, 0)), lax.bitwise_not(lax.is_finite(x)))
    safe = select_where(special, filled_like(x, 1), lax.abs(x))
    log2 = lax.div(lax.log(safe), filled_like(x, np.log(2)))
    one, half, two = (scalar_like(x, v) for v in (1, 0.5, 2))
    e = lax.convert_element_type(lax.add(lax.floor(log2), one), dtypes.int32)
    m = _times_pow2(x, lax.neg(e))
    # log2 may be off by one near powers of two: move the mantissa back into [0.5, 1).
    big = lax.ge(lax.abs(m), one)
    m, e = select_where(big, lax.mul(m, half), m), select_where(big, lax.add(e, np.int32(1)), e)
    small = lax.bitwise_and(lax.lt(lax.abs(m), half), lax.bitwise_not(special))
    m, e = select_where(small, lax.mul(m, two), m), select_where(small, lax.sub(e, np.int32(1)), e)
    return select_where(special, x, m), select_where(special, filled_like(e, 0), e)


def modf(x, /, out=None):
    """``(fractional part, integral part)``, both with the sign of ``x``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    (x,) = promote_args_inexact("modf", x)
    whole = _trunc(x)
    return lax.sub(x, whole), whole


# --- trigonometry --------------------------------------------------------------------------

sin = _unary("sin", lax.sin, inexact=True)
cos = _unary("cos", lax.cos, inexact=True)
tan = _unary("tan", lax.tan, inexact=True)
arcsin = asin = _unary("arcsin", lax.asin, inexact=True)
arccos = acos = _unary("arccos", lax.acos, inexact=True)
arctan = atan = _unary("arctan", lax.atan, inexact=True)
sinh = _unary("sinh", lax.sinh, inexact=True)
cosh = _unary("cosh", lax.cosh, inexact=True)
tanh = _unary("tanh", lax.tanh, inexact=True)
arcsinh = asinh = _unary("arcsinh", lax.asinh, inexact=True)
arccosh = acosh = _unary("arccosh", lax.acosh, inexact=True)
arctanh = atanh = _unary("arctanh", lax.atanh, inexact=True)
arctan2 = atan2 = _binary("arctan2", lax.atan2, inexact=True)


def _scale(name, factor):
    def fn(x, /):
        (x,) = promote_args_inexact(name, x)
        return lax.mul(x, scalar_like(x, factor))
    return _named(name, fn, f"Multiply by {factor!r} (an angle conversion).")


deg2rad = radians = _scale("deg2rad", np.pi / 180)
rad2deg = degrees = _scale("rad2deg", 180 / np.pi)


def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` without overflow: scale by the larger magnitude."""
    weak = all_weak(x1, x2)
    x1, x2 = promote_args_inexact("hypot", x1, x2)
    _not_for_complex("hypot", x1)
    x1, x2 = lax.abs(x1), lax.abs(x2)
    big, small = lax.max(x1, x2), lax.min(x1, x2)
    zero, one = scalar_like(big, 0), scalar_like(big, 1)
    safe_big = select_where(lax.eq(big, zero), filled_like(big, 1), big)
    ratio = lax.div(small, safe_big)
    out = select_where(lax.eq(big, zero), big,
                 lax.mul(big, lax.sqrt(lax.add(lax.mul(ratio, ratio), one))))
    out = select_where(lax.bitwise_or(isinf(x1), isinf(x2)), filled_like(out, np.inf), out)
    return with_weak_type(out, weak)


def sinc(x, /):
    """``sin(pi x) / (pi x)``, with ``sinc(0) = 1``.

    At 0 the value comes from ``_sinc_maclaurin``, whose derivative rule gives every order
    of derivative there (differentiating the ``x == 0`` branch of a select would give 0).
    """
    (x,) = promote_args_inexact("sinc", x)
    is_zero = lax.eq(x, scalar_like(x, 0))
    pi_x = lax.mul(x, scalar_like(x, np.pi))
    safe_pi_x = select_where(is_zero, filled_like(x, 1), pi_x)
    return select_where(is_zero, _sinc_maclaurin(0, pi_x), lax.div(lax.sin(safe_pi_x), safe_pi_x))


def _sinc_maclaurin_impl(k, x):
    """The ``k``-th derivative of ``sin(x) / x`` at 0, shaped like ``x``: ``k!`` times the
    series' ``(-1)^(k/2) x^k / (k + 1)!`` term, so ``(-1)^(k/2) / (k + 1)``; 0 for odd ``k``."""
    zero = lax.mul(x, scalar_like(x, 0))
    return zero if k % 2 else lax.add(zero, scalar_like(x, (-1) ** (k // 2) / (k + 1)))


_sinc_maclaurin = custom_jvp(_sinc_maclaurin_impl, nondiff_argnums=(0,))


@_sinc_maclaurin.defjvp
def _sinc_maclaurin_jvp(k, primals, tangents):
    """The derivative of the ``k``-th term is the next term, so derivatives of all orders
    (each one a JVP of the previous rule) are the series' terms."""
    (x,), (t,) = primals, tangents
    return _sinc_maclaurin(k, x), lax.mul(_sinc_maclaurin(k + 1, x), t)


# --- comparisons, min/max ------------------------------------------------------------------

def _lexicographic(compare):
    """``compare`` (``lax.lt``...) extended to complex numbers as JAX orders them: by real
    part, then by imaginary part."""
    def fn(x, y):
        if not dtypes.is_complex(_dtype(x)):
            return compare(x, y)
        x_re, y_re = lax.real(x), lax.real(y)
        return select_where(lax.eq(x_re, y_re), compare(lax.imag(x), lax.imag(y)),
                            compare(x_re, y_re))
    return fn


equal = _binary("equal", lax.eq)
not_equal = _binary("not_equal", lax.ne)
less = _binary("less", _lexicographic(lax.lt))
less_equal = _binary("less_equal", _lexicographic(lax.le))
greater = _binary("greater", _lexicographic(lax.gt))
greater_equal = _binary("greater_equal", _lexicographic(lax.ge))
maximum = _binary("maximum", lax.max)
minimum = _binary("minimum", lax.min)


def fmax(x1, x2):
    """Maximum that ignores a NaN operand (``maximum`` propagates it)."""
    x1, x2 = promote_args("fmax", x1, x2)
    return select_where(lax.bitwise_or(greater(x1, x2), isnan(x2)), x1, x2)


def fmin(x1, x2):
    """Minimum that ignores a NaN operand (``minimum`` propagates it)."""
    x1, x2 = promote_args("fmin", x1, x2)
    return select_where(lax.bitwise_or(less(x1, x2), isnan(x2)), x1, x2)


def clip(arr, /, min=None, max=None, *, a_min=None, a_max=None):
    """Limit values to ``[min, max]`` (either bound may be None; NumPy's ``a_min``/``a_max``
    keywords are accepted too)."""
    min = a_min if min is None else min
    max = a_max if max is None else max
    bounds = [b for b in (min, max) if b is not None]
    check_arraylike("clip", arr, *bounds)
    _not_for_complex("clip", arr, *bounds)
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return to_array(arr)


def heaviside(x1, x2, /):
    """0 for negative ``x1``, 1 for positive, ``x2`` where ``x1`` is zero, NaN where it is
    NaN."""
    strong_x1 = not all_weak(x1)  # (JAX's result is weakly typed only if x1 is)
    x1, x2 = promote_args_inexact("heaviside", x1, x2)
    zero, one = filled_like(x1, 0), filled_like(x1, 1)
    signs = select_where(lax.lt(x1, zero), zero, select_where(lax.gt(x1, zero), one, x1))
    out = select_where(lax.eq(x1, zero), x2, signs)
    return with_weak_type(out, False) if strong_x1 else out


def copysign(x1, x2, /):
    """``|x1|`` with the sign bit of ``x2``."""
    x1, x2 = promote_args_inexact("copysign", x1, x2)
    _real_floats_only("copysign", x1)
    return select_where(signbit(x2), lax.neg(lax.abs(x1)), lax.abs(x1))


def nextafter(x1, x2, /):
    """The next representable float after ``x1`` in the direction of ``x2``."""
    return lax.nextafter(*promote_args_inexact("nextafter", x1, x2))


_SAME_WIDTH_INT = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}


def signbit(x, /):
    """Whether the sign bit is set: true for -0.0 and negative NaNs too (read from the bits)."""
    (x,) = promote_args("signbit", x)
    dtype = _dtype(x)
    if dtypes.is_bool(dtype) or dtypes.is_unsigned_int(dtype):
        return filled_like(x, False, dtypes.bool_)
    if dtypes.is_signed_int(dtype):
        return with_weak_type(lax.lt(x, scalar_like(x, 0)), False)
    _not_for_complex("signbit", x)
    if dtype.itemsize not in _SAME_WIDTH_INT:  # the 8-, 6- and 4-bit floats, as in JAX
        raise NotImplementedError("jax.numpy.signbit only supports 16, 32, and 64-bit types.")
    bits = lax.bitcast_convert_type(x, _SAME_WIDTH_INT[dtype.itemsize])
    return lax.lt(bits, scalar_like(bits, 0))


# --- integer functions ---------------------------------------------------------------------

def _int_args(name, x1, x2):
    """The operands promoted and broadcast together, weakly typed only when both are (as
    JAX's results are)."""
    weak = all_weak(x1, x2)
    x1, x2 = promote_args(name, x1, x2)
    if not dtypes.is_int(_dtype(x1)):
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers.")
    return [with_weak_type(x, weak) for x in broadcast_together(x1, x2)]


def gcd(x1, x2):
    """Greatest common divisor by Euclid's algorithm, run until every element is done."""
    x1, x2 = (abs(a) for a in _int_args("gcd", x1, x2))

    def not_done(carry):
        b = carry[1]
        return lax.reduce_or(lax.ne(b, scalar_like(b, 0)), tuple(range(get_aval(b).ndim)))

    def step(carry):
        a, b = carry
        nonzero = lax.ne(b, scalar_like(b, 0))
        safe_b = select_where(nonzero, b, filled_like(b, 1))
        rest = select_where(nonzero, lax.rem(a, safe_b), filled_like(b, 0))
        return select_where(nonzero, b, a), rest
    return lax.while_loop(not_done, step, (x1, x2))[0]


def lcm(x1, x2):
    """Least common multiple (0 when either argument is 0): ``|x1| * (|x2| / gcd)``, which
    wraps around where it overflows as NumPy's and JAX's do."""
    x1, x2 = _int_args("lcm", x1, x2)
    d = gcd(x1, x2)
    d_zero = lax.eq(d, scalar_like(d, 0))
    safe_d = select_where(d_zero, filled_like(d, 1), d)
    return select_where(d_zero, filled_like(d, 0), lax.mul(abs(x1), lax.div(abs(x2), safe_d)))


# --- classification and complex parts ------------------------------------------------------

def _classify(name, float_fn, default, weak_default=False):
    """A predicate on floats, applied to both parts of complex numbers (``combine``), and
    constant ``default`` for integers and bools (weakly typed with ``weak_default`` when
    ``x`` is, as JAX's ``isnan``)."""
    combine = lax.bitwise_and if default else lax.bitwise_or

    def fn(x, /):
        (x,) = promote_args(name, x)
        dtype = _dtype(x)
        if dtypes.is_complex(dtype):
            return combine(float_fn(lax.real(x)), float_fn(lax.imag(x)))
        if not dtypes.is_float(dtype):
            constant = filled_like(x, default, dtypes.bool_)
            return with_weak_type(constant, True) if weak_default and all_weak(x) else constant
        return float_fn(x)
    return _named(name, fn, f"Element-wise ``{name}`` (always {default} for integers).")


isnan = _classify("isnan", lambda x: lax.ne(x, x), False, weak_default=True)
isinf = _classify("isinf", lambda x: lax.eq(lax.abs(x), filled_like(x, np.inf, _dtype(x))),
                  False)
isfinite = _classify("isfinite", lax.is_finite, True)


def _isinf_signed(name, value):
    def fn(x, /, out=None):
        if out is not None:
            raise NotImplementedError("The 'out' argument to isneginf/isposinf is not "
                                      "supported.")
        (x,) = promote_args(name, x)
        _not_for_complex(name, x)
        if not dtypes.is_float(_dtype(x)):
            return filled_like(x, False, dtypes.bool_)
        return lax.eq(x, filled_like(x, value, _dtype(x)))
    return _named(name, fn, f"Whether ``x`` is {value}.")


isposinf = _isinf_signed("isposinf", np.inf)
isneginf = _isinf_signed("isneginf", -np.inf)


def real(x, /):
    (x,) = promote_args("real", x)
    return lax.real(x) if dtypes.is_complex(_dtype(x)) else x


def imag(x, /):
    (x,) = promote_args("imag", x)
    return lax.imag(x) if dtypes.is_complex(_dtype(x)) else filled_like(x, 0)


def conj(x, /):
    (x,) = promote_args("conj", x)
    return lax.conj(x) if dtypes.is_complex(_dtype(x)) else x


conjugate = conj


def isreal(x):
    im = imag(x)
    return lax.eq(im, scalar_like(im, 0))


def iscomplex(x):
    im = imag(x)
    return lax.ne(im, scalar_like(im, 0))


def angle(z, deg=False):
    """The argument of a complex number (0 or pi for reals), in radians or degrees."""
    (z,) = promote_args("angle", z)
    # (JAX's exception to ``to_inexact``: integers become the default float, even int8)
    z = lax.convert_element_type(z, _dtype(z) if dtypes.is_inexact(_dtype(z))
                                 else dtypes.default_float())
    result = lax.atan2(imag(z), real(z))
    return lax.mul(result, scalar_like(result, 180 / np.pi)) if deg else result


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: the largest
    finite values); complex numbers have each part replaced."""
    del copy  # arrays are immutable
    (x,) = promote_args("nan_to_num", x)
    dtype = _dtype(x)
    if not dtypes.is_inexact(dtype):
        return x
    x = lax.convert_element_type(x, dtype)

    def replace(v):
        info = dtypes.finfo(_dtype(v))
        v = select_where(isnan(v), filled_like(v, nan), v)
        v = select_where(isposinf(v), filled_like(v, info.max if posinf is None else posinf), v)
        return select_where(isneginf(v), filled_like(v, info.min if neginf is None else neginf), v)
    return _round_parts(x, replace)


# --- logical and bitwise -------------------------------------------------------------------

def to_bool(x):
    return x if dtypes.is_bool(_dtype(x)) else lax.ne(x, filled_like(x, 0))


def _logical(name, lax_fn):
    def fn(x, y, /):
        x, y = promote_args(name, x, y)
        return lax_fn(to_bool(x), to_bool(y))
    return _named(name, fn, f"Element-wise ``{name}`` of the truth values.")


logical_and = _logical("logical_and", lax.bitwise_and)
logical_or = _logical("logical_or", lax.bitwise_or)
logical_xor = _logical("logical_xor", lax.bitwise_xor)


def logical_not(x, /):
    (x,) = promote_args("logical_not", x)
    return lax.bitwise_not(to_bool(x))


bitwise_and = _binary("bitwise_and", lax.bitwise_and)
bitwise_or = _binary("bitwise_or", lax.bitwise_or)
bitwise_xor = _binary("bitwise_xor", lax.bitwise_xor)
invert = bitwise_not = bitwise_invert = _unary("invert", lax.bitwise_not)


def _on_integers(shift):
    """A shift of two promoted operands, booleans shifted as the default int (as JAX)."""
    def fn(x, y):
        if dtypes.is_bool(_dtype(x)):
            x, y = (lax.convert_element_type(v, dtypes.default_int()) for v in (x, y))
        return shift(x, y)
    return fn


def _right_shift(x, y):
    shift = (lax.shift_right_logical if dtypes.is_unsigned_int(_dtype(x))
             else lax.shift_right_arithmetic)
    return shift(x, y)


left_shift = bitwise_left_shift = _binary("left_shift", _on_integers(lax.shift_left))
right_shift = bitwise_right_shift = _binary("right_shift", _on_integers(_right_shift))


# --- closeness and dtype conversion --------------------------------------------------------

def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|a - b| <= atol + rtol * |b|``; equal infinities are close, NaNs only with
    ``equal_nan``. Integers are compared exactly."""
    a, b = promote_args("isclose", a, b)
    if not dtypes.is_inexact(_dtype(a)):
        return with_weak_type(lax.eq(a, b), False)  # (never weakly typed, as in JAX)
    real_dtype = _dtype(lax.abs(a))
    tol = lax.add(filled_like(a, atol, real_dtype),
                  lax.mul(lax.convert_element_type(rtol, real_dtype), lax.abs(b)))
    close = lax.le(lax.abs(lax.sub(a, b)), tol)
    either_inf = lax.bitwise_or(isinf(a), isinf(b))
    close = select_where(either_inf, lax.eq(a, b), close)
    if equal_nan:
        close = lax.bitwise_or(close, lax.bitwise_and(isnan(a), isnan(b)))
    return close


def astype(x, dtype, /, *, copy=False, device=None):
    """``x`` converted to ``dtype`` (strongly typed; 64-bit types need x64). From complex,
    as JAX: to bool is ``x != 0`` (lax's conversion looks at the real part only), to a real
    type keeps the real part with JAX's DeprecationWarning."""
    del copy, device  # immutable arrays on the one CPU device
    check_arraylike("astype", x)
    x = to_array(x)
    dtype = dtypes.default_float() if dtype is None else dtypes.requested(dtype, "astype")
    if dtypes.is_complex(_dtype(x)) and dtypes.is_bool(dtype):
        return lax.ne(x, filled_like(x, 0))
    if dtypes.is_complex(_dtype(x)) and not dtypes.is_complex(dtype):
        warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. "
                      "Please first use jnp.real or jnp.imag to take the real/imaginary "
                      "component of your input.", DeprecationWarning, stacklevel=2)
        x = lax.real(x)
    return lax.convert_element_type(x, dtype)


# --- special values ------------------------------------------------------------------------

def bitwise_count(x, /):
    """The number of 1 bits in ``|x|``, as uint8 (NumPy's and JAX's dtype)."""
    (x,) = promote_args("bitwise_count", x)
    _require("bitwise_count", x, _is_int_or_bool, "integer or bool")
    if dtypes.is_bool(_dtype(x)):
        x = lax.convert_element_type(x, dtypes.uint8)
    if dtypes.is_signed_int(_dtype(x)):
        x = lax.abs(x)
    return lax.convert_element_type(lax.population_count(x), dtypes.uint8)


def spacing(x, /):
    """The distance from ``x`` to the next float away from zero, negative where ``x`` has
    its sign bit set (-0.0 too), as JAX's: ``nextafter(x, copysign(inf, x)) - x``; float16
    measures towards +inf, as NumPy's and JAX's do."""
    (x,) = promote_args_inexact("spacing", x)
    _not_for_complex("spacing", x)
    inf = filled_like(x, np.inf, _dtype(x))
    towards = inf if _dtype(x) == dtypes.float16 else copysign(inf, x)
    return lax.sub(lax.nextafter(x, towards), x)


# Cephes' Chebyshev coefficients of exp(-x) I0(x) on [0, 8] (A) and of
# exp(-x) sqrt(x) I0(x) on (8, inf) in 32/x (B), as NumPy's i0 uses them.
_I0_A = (-4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16,
    1.715391285555133e-15, -1.1685332877993451e-14, 7.676185498604936e-14,
    -4.856446783111929e-13, 2.95505266312964e-12, -1.726826291441556e-11,
    9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07,
    1.1173875391201037e-06, -4.4167383584587505e-06, 1.6448448070728896e-05,
    -5.754195010082104e-05, 0.00018850288509584165, -0.0005763755745385824,
    0.0016394756169413357, -0.004324309995050576, 0.010546460394594998,
    -0.02373741480589947, 0.04930528423967071, -0.09490109704804764,
    0.17162090152220877, -0.3046826723431984, 0.6767952744094761)
_I0_B = (-7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17,
    3.461222867697461e-17, -2.8276239805165836e-16, -3.425485619677219e-16,
    1.7725601330565263e-15, 3.8116806693526224e-15, -9.554846698828307e-15,
    -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11,
    -3.1499165279632416e-11, 1.1889147107846439e-11, 4.94060238822497e-10,
    3.3962320257083865e-09, 2.266668990498178e-08, 2.0489185894690638e-07,
    2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943,
    0.8044904110141088)


def _chebyshev(x, coefficients):
    """Clenshaw's recurrence for ``sum_k' c_k T_k(x / 2)``, Cephes' ``chbevl``."""
    b0, b1, b2 = filled_like(x, coefficients[0]), filled_like(x, 0), filled_like(x, 0)
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def i0(x):
    """The modified Bessel function of the first kind of order 0, from Cephes' Chebyshev
    expansions (each branch sees only arguments in its own range, so gradients stay
    finite)."""
    (x,) = promote_args_inexact("i0", x)
    _not_for_complex("i0", x)
    x = lax.abs(x)
    small = lax.le(x, filled_like(x, 8))
    near = select_where(small, x, filled_like(x, 8))
    far = select_where(small, filled_like(x, 8), x)
    scaled = select_where(small, _chebyshev(near / 2 - 2, _I0_A),
                    _chebyshev(32 / far - 2, _I0_B) / lax.sqrt(far))
    return lax.exp(x) * scaled

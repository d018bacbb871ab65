"""Transcendental element-wise primitives: powers, exponentials and logarithms,
trigonometric and hyperbolic functions and their inverses, roots.

Declared as the other element-wise primitives are (``elementwise.unop``/``binop``), each
family followed by its derivatives and its kernel lowering (a call into the compiler's math
library, ``ctx.math``). Their reference implementations compute float16/float32 in float64
and round once where NumPy's own float32 loops are less accurate than XLA's (see
``_rounded_once``). ``pow`` lives here rather than with the arithmetic because its
derivative in the exponent needs ``log``.
"""

import functools

import numpy as np

from ..core import Primitive, ShapedArray, dtypes, get_aval
from ..interpreters import ad
from . import batch_util
from .elementwise import (accuracy_function, add, binary_function, binop, broadcast_operand,
                          convert_element_type, div, eq, integer_pow, kernel_math, mul, neg,
                          quiet, replace_zero, select, sub, unary_function, unop)
from .shapes import filled
from .standard import (FLOAT, INEXACT, NUMBER, broadcast_shapes, check_dtype, kernel_elementwise,
                       scalar_like)

__all__ = ["pow", "pow_p",
           "exp", "exp_p", "exp2", "exp2_p", "log", "log_p", "log1p", "log1p_p", "expm1",
           "expm1_p", "tanh", "tanh_p", "logistic", "logistic_p", "sin", "sin_p", "cos", "cos_p",
           "tan", "tan_p", "asin", "asin_p", "acos", "acos_p", "atan", "atan_p", "atan2",
           "atan2_p", "sinh", "sinh_p", "cosh", "cosh_p", "asinh", "asinh_p", "acosh", "acosh_p",
           "atanh", "atanh_p", "sqrt", "sqrt_p", "rsqrt", "rsqrt_p", "cbrt", "cbrt_p"]


# --- exponentials, logarithms, trigonometric and hyperbolic functions, roots ------------

def _atan2_impl(x, y):
    """The angle of the point ``(y, x)``; for complex operands the analytic continuation
    ``-i log((y + i x) / sqrt(x**2 + y**2))`` (NumPy has no complex arctan2)."""
    if dtypes.is_complex(x.dtype):  # in complex128: the formula loses digits in complex64
        x, y = x.astype(np.complex128), y.astype(np.complex128)
        return -1j * np.log((y + 1j * x) / np.sqrt(x * x + y * y))
    return np.arctan2(x, y)


def _rounded_once(fn):
    """``fn`` for float16/float32 operands computed in float64 and rounded once.

    NumPy's float32 loops for exp, log, sin, cos, tanh... are SIMD routines off by up to 1-2
    ulp (its float32 ``sin(1.0)`` is one ulp from the true value), where XLA's (glibc's
    ``sinf``/``cosf``, its own exp and log) are within about half an ulp: the float64 value
    rounded once is the correctly rounded one, except in rare double roundings, and so
    agrees with JAX wherever JAX is correctly rounded (float32 tan: NumPy's loop differed
    from XLA's in a quarter of random cases, the value rounded once in 4%). The functions
    left to NumPy are those whose float32 results are the closer to XLA's (sinh, cosh,
    atan2, ...; see tools/compare_jax_math.py). Other dtypes go to ``fn`` as they are."""
    @functools.wraps(fn)
    def impl(*args):
        if args[0].dtype not in (dtypes.float16, dtypes.float32):
            return fn(*args)
        return fn(*(a.astype(np.float64) for a in args)).astype(args[0].dtype)
    return impl


def _logistic_impl(x):
    """``1 / (1 + exp(-x))`` in the operand's type, as XLA computes it; only the exp is
    rounded once from float64 (the formula's own roundings are XLA's too)."""
    return 1 / (1 + _rounded_once(np.exp)(-x))


def _expm1_impl(x):
    """``expm1``; a complex operand with a zero imaginary part keeps it, as in C99 and JAX
    (NumPy's ``exp(re) * sin(0)`` is ``inf * 0``, a NaN, once ``exp(re)`` overflows)."""
    out = np.array(_rounded_once(np.expm1)(x))
    if np.iscomplexobj(out):
        out.imag = np.where(np.imag(x) == 0, np.imag(x), out.imag)
    return out


def _log1p_impl(x):
    """``log(1 + x)``, accurate for small ``x``; complex operands by ``_complex_log1p`` (NumPy's
    complex log1p is ``log(1 + z)``, which rounds a tiny z away: 0 at 1e-20 + 1e-20j)."""
    if dtypes.is_complex(x.dtype):
        return _complex_log1p(x)
    return _rounded_once(np.log1p)(x)


def _complex_log1p(z):
    """log|1 + z| + i arg(1 + z) by XLA's formulas (JAX's values), accurate to a few ulps at
    any size of z = a + bi: the real part is log1p(2a + a^2 + b^2) / 2, the sum exact to
    twice the working precision (``_exact_sum``), for it cancels where |1 + z| is near 1
    (z = -0.1 + 0.43589i). Near z = -1, where 1 + a is exact, it is log hypot(1 + a, b)
    (XLA's log((1 + a)^2 + b^2) / 2 underflows to -inf at -1 + 1e-30i); past 1e152, where
    the squares would overflow, the same of half of 1 + z, plus log 2. Those also give C99's
    values at infinities and NaNs (JAX's is NaN + NaN i where one part is infinite and the
    other NaN; C99's +inf + NaN i). complex64 is computed in complex128 and rounded once."""
    wide = z.astype(np.complex128)
    a, b = wide.real, wide.imag
    large = np.maximum(abs(a), abs(b)) > 1e152
    half = np.where(large, 0.5, 1.0)
    far = np.log(np.hypot(half * (1 + a), half * b)) + np.where(large, np.log(2), 0)
    near_zero = np.log1p(_exact_sum(2 * a, *_exact_square(a), *_exact_square(b))) / 2
    out = np.empty(wide.shape, np.complex128)
    out.real = np.where((abs(1 + a) + abs(b) >= 0.2) & ~large, near_zero, far)
    out.imag = np.arctan2(b, 1 + a)
    return out.astype(z.dtype)


def _exact_square(x):
    """x * x as the sum of the rounded product and its rounding error (Dekker's product,
    with Veltkamp's split of x into halves whose products are exact); for |x| < 1e152."""
    scaled = x * 134217729.0  # 2^27 + 1
    high = scaled - (scaled - x)
    low = x - high
    square = x * x
    return square, ((high * high - square) + 2 * high * low) + low * low


def _exact_sum(*terms):
    """The sum of ``terms`` to about twice the working precision: each addition's rounding
    error (Knuth's two-sum) is collected, and added once at the end."""
    total, errors = terms[0], 0.0
    for term in terms[1:]:
        new = total + term
        back = new - total
        errors = errors + ((total - (new - back)) + (term - back))
        total = new
    return total + errors


def _exp2_impl(x):
    """``2 ** x``; in ml_dtypes' narrow floats as XLA computes it there (JAX's values):
    ``exp(x * log 2)``, ``log 2`` and the product rounded to the type, the exponential
    rounded first to the wider type XLA computes the 8- and 4-bit floats in
    (``dtypes.computed_as``: float16's 0.6875 then rounds to float8_e5m2's 0.75)."""
    if dtypes.is_ml_dtype(x.dtype):
        product = x * x.dtype.type(np.log(2))
        wide = dtypes.computed_as(x.dtype) or x.dtype
        return np.exp(product.astype(np.float32)).astype(wide).astype(x.dtype)
    return np.exp2(x)


def _rsqrt_impl(x):
    """``1 / sqrt(x)``; rounded once in ml_dtypes' narrow floats, as XLA (NumPy would round
    the root to the narrow type first)."""
    if dtypes.is_ml_dtype(x.dtype):
        return (1 / np.sqrt(x.astype(np.float32))).astype(x.dtype)
    return 1 / np.sqrt(x)


exp_p = unop("exp", _rounded_once(np.exp), INEXACT)
exp2_p = unop("exp2", _exp2_impl, INEXACT)
log_p = unop("log", _rounded_once(np.log), INEXACT)
log1p_p = unop("log1p", _log1p_impl, INEXACT)
expm1_p = unop("expm1", _expm1_impl, INEXACT)
tanh_p = unop("tanh", _rounded_once(np.tanh), INEXACT)
logistic_p = unop("logistic", _logistic_impl, INEXACT)
sin_p = unop("sin", _rounded_once(np.sin), INEXACT)
cos_p = unop("cos", _rounded_once(np.cos), INEXACT)
tan_p = unop("tan", _rounded_once(np.tan), INEXACT)
asin_p = unop("asin", _rounded_once(np.arcsin), INEXACT)
acos_p = unop("acos", np.arccos, INEXACT)
atan_p = unop("atan", np.arctan, INEXACT)
atan2_p = binop("atan2", _atan2_impl, [INEXACT, INEXACT])
sinh_p = unop("sinh", np.sinh, INEXACT)
cosh_p = unop("cosh", np.cosh, INEXACT)
asinh_p = unop("asinh", np.arcsinh, INEXACT)
acosh_p = unop("acosh", _rounded_once(np.arccosh), INEXACT)
atanh_p = unop("atanh", _rounded_once(np.arctanh), INEXACT)
sqrt_p = unop("sqrt", np.sqrt, INEXACT)
rsqrt_p = unop("rsqrt", _rsqrt_impl, INEXACT)
cbrt_p = unop("cbrt", np.cbrt, FLOAT)

exp = accuracy_function(exp_p, "Element-wise ``e ** x``.")
exp2 = accuracy_function(exp2_p, "Element-wise ``2 ** x``.")
log = accuracy_function(log_p, "Element-wise natural logarithm.")
log1p = accuracy_function(log1p_p, "Element-wise ``log(1 + x)``, accurate for small ``x``.")
expm1 = accuracy_function(expm1_p, "Element-wise ``exp(x) - 1``, accurate for small ``x``.")
tanh = accuracy_function(tanh_p, "Element-wise hyperbolic tangent.")
logistic = accuracy_function(logistic_p, "Element-wise ``1 / (1 + exp(-x))``.")
sin = accuracy_function(sin_p, "Element-wise sine.")
cos = accuracy_function(cos_p, "Element-wise cosine.")
tan = accuracy_function(tan_p, "Element-wise tangent.")
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
sqrt = accuracy_function(sqrt_p, "Element-wise square root.")
rsqrt = accuracy_function(rsqrt_p, "Element-wise ``1 / sqrt(x)``.")
cbrt = accuracy_function(cbrt_p, "Element-wise cube root.")


# Derivatives of the transcendental functions: ``partial(g, x)`` is ``f'(x) g``, and the
# ``defjvp2`` ones reuse the output ``ans = f(x)`` (``exp' = exp``).

def _square(x):
    return integer_pow(x, 2)


def _plus_one(x):
    return add(x, scalar_like(x, 1))


def _one_minus(x):
    return sub(scalar_like(x, 1), x)


ad.defjvp2(exp_p, lambda g, ans, x: mul(g, ans))
ad.defjvp2(exp2_p, lambda g, ans, x: mul(scalar_like(ans, np.log(2)), mul(g, ans)))
ad.defjvp(log_p, lambda g, x: div(g, x))
ad.defjvp(log1p_p, lambda g, x: div(g, _plus_one(x)))
ad.defjvp2(expm1_p, lambda g, ans, x: mul(g, _plus_one(ans)))
ad.defjvp2(tanh_p, lambda g, ans, x: mul(add(g, mul(g, ans)), _one_minus(ans)))  # (1+t)(1-t) g
ad.defjvp2(logistic_p, lambda g, ans, x: mul(g, mul(ans, _one_minus(ans))))
ad.defjvp(sin_p, lambda g, x: mul(g, cos(x)))
ad.defjvp(cos_p, lambda g, x: neg(mul(g, sin(x))))
ad.defjvp2(tan_p, lambda g, ans, x: mul(g, _plus_one(_square(ans))))
ad.defjvp(asin_p, lambda g, x: mul(g, rsqrt(_one_minus(_square(x)))))
ad.defjvp(acos_p, lambda g, x: mul(g, neg(rsqrt(_one_minus(_square(x))))))
ad.defjvp(atan_p, lambda g, x: div(g, _plus_one(_square(x))))
ad.defjvp(atan2_p, lambda g, x, y: mul(g, div(y, add(_square(x), _square(y)))),
          lambda g, x, y: mul(g, div(neg(x), add(_square(x), _square(y)))))
ad.defjvp(sinh_p, lambda g, x: mul(g, cosh(x)))
ad.defjvp(cosh_p, lambda g, x: mul(g, sinh(x)))
ad.defjvp(asinh_p, lambda g, x: mul(g, rsqrt(_plus_one(_square(x)))))
ad.defjvp(acosh_p, lambda g, x: mul(g, rsqrt(sub(_square(x), scalar_like(x, 1)))))
ad.defjvp(atanh_p, lambda g, x: mul(div(scalar_like(x, 1), _plus_one(x)), div(g, _one_minus(x))))
ad.defjvp2(sqrt_p, lambda g, ans, x: mul(g, div(scalar_like(ans, 0.5), ans)))  # inf at 0, as in JAX
ad.defjvp2(rsqrt_p, lambda g, ans, x: mul(g, mul(scalar_like(x, -0.5), div(ans, x))))
ad.defjvp2(cbrt_p, lambda g, ans, x: mul(g, mul(scalar_like(ans, 1 / 3), integer_pow(ans, -2))))


for _prim in (exp_p, exp2_p, log_p, log1p_p, expm1_p, tanh_p, sin_p, cos_p, tan_p, asin_p,
              acos_p, atan_p, atan2_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p, sqrt_p,
              cbrt_p):
    kernel_elementwise(_prim, kernel_math(_prim.name))
kernel_elementwise(logistic_p, lambda ctx, x: ctx.div(1, ctx.add(1, ctx.math("exp", ctx.neg(x)))))
kernel_elementwise(rsqrt_p, lambda ctx, x: ctx.div(1, ctx.math("sqrt", x)))


# --- pow ----------------------------------------------------------------------------------

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


# (NumPy's float32 loop differed from XLA's pow, and from compiled code's, in a fifth of
# random cases; rounded once, in 1 in 2000)
_power = _rounded_once(np.power)


@pow_p.def_impl
@quiet
def _pow_impl(x, y):
    y = y.astype(x.dtype)  # XLA converts an integer exponent to the base's type
    if dtypes.is_complex(x.dtype):
        return _complex_pow(x, y)
    out = _power(x, y)
    if np.issubdtype(x.dtype, np.floating):
        # NumPy computes x ** 0.5 as sqrt(x); C's pow (and XLA) give +inf at -inf and +0 at -0.
        out = np.where((y == 0.5) & ((x == 0) | np.isneginf(x)), np.abs(x), out)
    return out


def _complex_pow(x, y):
    """``x ** y`` for complex ``x = a + bi``, ``y = c + di`` as XLA's CPU computes it, so
    with JAX's values at infinities, NaNs and zeros too, where NumPy's ``exp(y log x)`` (and
    its repeated squaring for small integral ``y``) differ:

        |x|^c e^(-d arg x) (cos q + i sin q),    q = c arg x + d log|x|,

    each part a product of the modulus ``|x|^c e^(-d arg x)``, so ``inf * 0`` is NaN where
    the modulus overflows and ``q`` is 0. Then XLA's exact cases: ``x ** 0`` and ``1 ** y``
    are 1 (even for NaN operands), ``0 ** y`` is 0 for a positive real ``y`` (NaN for any
    other y, by the formula), and ``inf ** y`` for a real ``y`` is inf (y > 0) or 0 (y < 0).
    ``lax.complex_parts._pow`` is the same computation, which compiled code runs. The real
    functions of a complex64 operand are rounded once from float64 (``_rounded_once``; the
    angle too: NumPy's float32 ``arctan2(1, 1)`` is an ulp below pi/4, and twice it an ulp
    below pi/2, whose cosine then has the wrong sign)."""
    (a, b), (c, d) = (x.real, x.imag), (y.real, y.imag)
    modulus, angle = _rounded_once(np.hypot)(a, b), _rounded_once(np.arctan2)(b, a)
    size = _rounded_once(np.power)(modulus, c) * _rounded_once(np.exp)(-d * angle)
    q = c * angle + d * _rounded_once(np.log)(modulus)
    re = size * _rounded_once(np.cos)(q)
    im = size * _rounded_once(np.sin)(q)
    real_y = d == 0
    one = ((c == 0) & real_y) | ((a == 1) & (b == 0))
    zero = ((modulus == 0) & real_y & (c > 0)) | ((a == np.inf) & (b == 0) & real_y & (c < 0))
    infinite = (a == np.inf) & (b == 0) & real_y & (c > 0)
    re = np.select([one, zero, infinite], [1, 0, np.inf], re)
    im = np.where(one | zero | infinite, 0, im)
    out = np.empty(np.broadcast_shapes(x.shape, y.shape), x.dtype)
    out.real, out.imag = re, im  # (not re + 1j * im, whose inf * 1j would be NaN)
    return out


def pow(x, y):
    """Element-wise ``x ** y`` for a float or complex ``x``; ``y`` is an integer array or has
    ``x``'s dtype (a Python ``int`` exponent stays an integer, as in JAX)."""
    return pow_p.bind(x, y)


def _pow_jvp_base(g, ans, x, y):
    """``d(x**y)/dx = y x**(y-1)``. For an integer exponent, JAX takes it as exactly 0 where
    ``y == 0`` (``x**0`` is constant, even at ``x = 0`` where ``0 * 0**-1`` would be nan)."""
    x_dtype, y_dtype = get_aval(x).dtype, get_aval(y).dtype
    if dtypes.is_int(y_dtype):
        shape = get_aval(ans).shape
        x = broadcast_operand(x, shape)
        y = broadcast_operand(convert_element_type(y, x_dtype), shape)
        jac = select(eq(y, filled(get_aval(y), 0)), filled(get_aval(y), 0),
                     mul(replace_zero(y), pow(x, sub(y, scalar_like(y, 1)))))
    else:  # (JAX converts x to the result's dtype, which makes the tangent strongly typed)
        jac = mul(y, pow(convert_element_type(x, x_dtype), sub(y, scalar_like(y, 1))))
    return mul(g, jac)


def _pow_jvp_exponent(g, ans, x, y):
    """``d(x**y)/dy = log(x) x**y``, with ``log(0)`` replaced by 0 (``0**y`` is constant in
    ``y > 0``); strongly typed, as JAX's."""
    return convert_element_type(mul(g, mul(log(replace_zero(x)), ans)), get_aval(y).dtype)


ad.defjvp2(pow_p, _pow_jvp_base, _pow_jvp_exponent)
pow_p.def_batch(batch_util.elementwise_batcher(pow_p))
kernel_elementwise(pow_p, lambda ctx, x, y: ctx.math("pow", x, ctx.convert(y, x.dtype)))

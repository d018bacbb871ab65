"""Special functions: erf, erfc, erf_inv, lgamma, digamma, polygamma.

The reference implementations compute in float64 and round to the input's type, so float32
results are correctly rounded (up to a rare double rounding) and float64 results are within a
few ulps. ``erf``, ``erfc`` and ``lgamma`` come from Python's ``math`` module; ``erf_inv``,
``digamma`` and ``polygamma`` are written here, as NumPy has none of them.

Their derivatives are JAX's. They chain: ``lgamma' = digamma``, ``digamma' = polygamma(1, .)``
and ``polygamma(m, .)' = polygamma(m + 1, .)``, so every order of derivative exists.
"""

import math

import numpy as np

from ..core import get_aval
from ..interpreters import ad
from .elementwise import (add, binop, broadcast_operand, div, integer_pow, mul, neg, quiet,
                          unary_function, unop)
from .standard import FLOAT, kernel_elementwise, scalar_like
from .transcendental import exp

__all__ = ["erf", "erf_p", "erfc", "erfc_p", "erf_inv", "erf_inv_p",
           "lgamma", "lgamma_p", "digamma", "digamma_p", "polygamma", "polygamma_p",
           "fma", "fma_p", "xla_log", "xla_log_p", "xla_log1p", "xla_log1p_p"]


def in_float64(fn):
    """An impl that runs ``fn`` on float64 values and returns the (first) input's dtype."""
    @quiet
    def impl(*args):
        return np.asarray(fn(*(a.astype(np.float64) for a in args))).astype(args[0].dtype)
    return impl


def _lgamma_scalar(x):
    """log|Γ(x)|; +inf at the poles (0 and the negative integers), where ``math`` raises."""
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)  # erf'(x) = 2/sqrt(pi) exp(-x**2)


def _erf_inv(ops, y):
    """The inverse of erf in float64: an approximation good to ~2e-3, then Halley steps.

    The start is Winitzki's closed form. Each Halley step on ``f(x) = erf(x) - y`` (with
    ``f' = 2/sqrt(pi) exp(-x**2)`` and ``f'' = -2x f'``) triples the correct digits, so three
    reach float64 rounding. Near ``|y| = 1`` erf(x) is 1 to working precision, so the residual
    there is taken as ``(1 - |y|) - erfc(x)``, whose terms are exact or accurate. Written on
    ``ops`` like XLA's float32 algorithm below, for the eager impl and the kernel lowering.
    """
    a = ops.abs(y)
    log_term = ops.math("log", ops.mul(ops.sub(1.0, a), ops.add(1.0, a)))  # log(1 - y**2)
    k = 0.147
    c = ops.add(2 / (math.pi * k), ops.div(log_term, 2.0))
    x = ops.math("sqrt", ops.sub(ops.math("sqrt", ops.sub(ops.mul(c, c), ops.div(log_term, k))),
                                 c))
    small = ops.le(a, 0.5)
    for _ in range(3):
        residual = ops.select(small, ops.sub(ops.math("erf", x), a),
                              ops.sub(ops.sub(1.0, a), ops.math("erfc", x)))
        slope = ops.mul(_TWO_OVER_SQRT_PI, ops.math("exp", ops.neg(ops.mul(x, x))))
        step = ops.div(residual, slope)
        x = ops.sub(x, ops.div(step, ops.add(1.0, ops.mul(x, step))))
    x = ops.select(ops.eq(a, 1.0), math.inf, ops.select(ops.gt(a, 1.0), math.nan, x))
    magnitude = ops.and_(ops.bitcast(x, np.int64), 0x7FFFFFFFFFFFFFFF)    # copysign(x, y)
    sign = ops.and_(ops.bitcast(y, np.int64), -1 << 63)
    return ops.bitcast(ops.or_(magnitude, sign), np.float64)


# --- fused multiply-add: x*y + z rounded once, as XLA contracts a multiply and an add ------

def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_to_odd_sum(a, b):
    """a + b in float64 rounded to odd (an inexact sum gets an odd last bit, toward the
    exact value): rounding that once more to a narrower format is then correctly rounded
    (Boldo and Melquiond)."""
    s, err = _two_sum(a, b)
    even = (s.view(np.int64) & 1) == 0
    return np.where((err != 0) & even, np.nextafter(s, np.copysign(np.inf, err)), s)


def _two_prod(a, b):
    """(p, e) with p + e = a*b exactly (Veltkamp's split; finite products far from the
    overflow threshold)."""
    def split(v):
        t = v * 134217729.0          # 2**27 + 1
        hi = t - (t - v)
        return hi, v - hi
    p = a * b
    (ah, al), (bh, bl) = split(a), split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@quiet
def _fma_impl(x, y, z):
    """Correctly rounded. float32: the product is exact in float64, so the float64 sum
    rounded to odd, then to float32; float64: Boldo and Melquiond's emulation (exact
    product, TwoSum, the low parts' sum rounded to odd); float16 as XLA's CPU computes it, a
    float32 fma rounded to float16."""
    dtype = x.dtype
    if dtype == np.float16:
        return _fma_impl(*(v.astype(np.float32) for v in (x, y, z))).astype(dtype)
    x, y, z = (np.asarray(v, np.float64) for v in (x, y, z))
    if dtype == np.float32:
        return _round_to_odd_sum(x * y, z).astype(dtype)
    p, e = _two_prod(x, y)
    hi, lo = _two_sum(z, p)
    fused = hi + _round_to_odd_sum(lo, e)
    plain = x * y + z          # infinities, NaNs and overflow: no rounding to care about
    return np.where(np.isfinite(fused) & np.isfinite(p), fused, plain)


fma_p = binop("fma", _fma_impl, [FLOAT, FLOAT, FLOAT])


def fma(x, y, z):
    """Element-wise ``x * y + z`` with one rounding, as XLA computes a multiply feeding an
    add (LLVM contracts them on the CPU): JAX's samplers scale by such multiply-adds."""
    return fma_p.bind(x, y, z)


def _fma_partial(partial):
    """One operand's term of fma's JVP, broadcast to the output's shape: the tangent of an
    operand with size-1 axes or rank 0 (a sampler's scalar bound), and its products, have
    that operand's shape, not the output's."""
    return lambda g, ans, x, y, z: broadcast_operand(partial(g, x, y, z), get_aval(ans).shape)


kernel_elementwise(fma_p, lambda ctx, x, y, z: ctx.math("fma", x, y, z))
ad.defjvp2(fma_p, _fma_partial(lambda g, x, y, z: mul(g, y)),
           _fma_partial(lambda g, x, y, z: mul(x, g)), _fma_partial(lambda g, x, y, z: g))


# --- erf_inv in float32, bit for bit as XLA on the CPU ---------------------------------------
# JAX's normal sampler is sqrt(2) * erf_inv(uniform), so its float32 draws are only identical
# to JAX's if erf_inv is XLA's: Giles' polynomial, over XLA's log1p (a Cephes rational
# function near 0) and its CPU log (a Cephes polynomial), with the multiply-adds that LLVM
# contracts into fma where it does (``fma`` below).
#
# The algorithm is written once, on the scalar-op vocabulary of the kernel builder (``ops``:
# ``ops.add``, ``ops.select``, ``ops.convert``...): the eager impl runs it on NumPy arrays
# (``ArrayOps``), the kernel lowering on the compiler's ``ctx``, so both do the same float32
# and float64 operations in the same order and agree bit for bit.

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1)
_LOG1P_NUMERATOR = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1,
                    6.5787325942061044846969e0, 2.9911919328553073277375e1,
                    6.0949667980987787057556e1, 5.7112963590585538103336e1,
                    2.0039553499201281259648e1)
_LOG1P_DENOMINATOR = (1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1,
                      2.2176239823732856465394e2, 3.0909872225312059774938e2,
                      2.1642788614495947685003e2, 6.0118660497603843919306e1)
_ERF_INV_W_BELOW_5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                      0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERF_INV_W_ABOVE_5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                      0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _lift(*values):
    """Python numbers among ``values`` as arrays of the dtype of the (first) other one."""
    like = next(np.asarray(v).dtype for v in values if type(v) not in (int, float))
    return [np.asarray(v, like) if type(v) in (int, float) else v for v in values]


def _lifted(fn):
    return staticmethod(lambda x, y: fn(*_lift(x, y)))


class ArrayOps:
    """The kernel builder's scalar ops on NumPy arrays; a Python number takes the dtype of
    the array it meets, as the builder makes it a constant of the other operand's dtype."""

    add, sub, mul, div = (_lifted(f) for f in (np.add, np.subtract, np.multiply, np.divide))
    max, and_, or_ = _lifted(np.maximum), _lifted(np.bitwise_and), _lifted(np.bitwise_or)
    shr_arith, eq, ne = _lifted(np.right_shift), _lifted(np.equal), _lifted(np.not_equal)
    lt, le, gt = _lifted(np.less), _lifted(np.less_equal), _lifted(np.greater)
    neg, abs = staticmethod(np.negative), staticmethod(np.abs)

    @staticmethod
    def select(pred, on_true, on_false):
        on_true, on_false = _lift(on_true, on_false)
        return np.where(pred, on_true, on_false).astype(on_true.dtype)

    @staticmethod
    def const(value, dtype):
        return np.asarray(value, dtype)

    @staticmethod
    def convert(x, dtype):
        return np.asarray(x).astype(dtype)

    @staticmethod
    def bitcast(x, dtype):
        return np.asarray(x).view(dtype)

    @staticmethod
    def math(name, *xs):
        return _ARRAY_MATH[name](*_lift(*xs))


_ARRAY_MATH = {"sqrt": np.sqrt, "log": np.log, "log1p": np.log1p, "exp": np.exp,
               "tan": np.tan, "rint": np.rint, "floor": np.floor,
               "erf": np.vectorize(math.erf, otypes=[np.float64]),
               "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
               "fma": _fma_impl}


def _fma32(ops, a, b, c):
    """float32 ``a*b + c`` rounded once, as LLVM contracts XLA's multiply-adds."""
    return ops.math("fma", a, b, c)


def _horner32(ops, x, coeffs):
    """Highest degree first, one fma per step (XLA's EvaluatePolynomial, contracted)."""
    p = ops.const(coeffs[0], _F32)
    for c in coeffs[1:]:
        p = _fma32(ops, p, x, c)
    return p


def _xla_log32(ops, x):
    """XLA's float32 log on the CPU: x = 2**e * m with m in [sqrt(1/2), sqrt(2)), then
    e*ln2 (in two parts) + log(m) by Cephes' polynomial; subnormals are read as the
    smallest normal, as XLA does."""
    bits = ops.bitcast(ops.max(x, float(np.finfo(np.float32).tiny)), np.int32)
    m = ops.bitcast(ops.or_(ops.and_(bits, ~0x7F800000), 0x3F000000), _F32)
    e = ops.add(ops.convert(ops.sub(ops.shr_arith(bits, 23), 0x7F), _F32), 1.0)
    below = ops.lt(m, 0.707106781186547524)
    e = ops.sub(e, ops.select(below, 1.0, ops.const(0.0, _F32)))
    m = ops.add(ops.sub(m, 1.0), ops.select(below, m, 0.0))
    m2 = ops.mul(m, m)
    m3 = ops.mul(m2, m)
    p = _LOG_P
    y = _fma32(ops, _fma32(ops, m, p[0], p[1]), m, p[2])
    y1 = _fma32(ops, _fma32(ops, m, p[3], p[4]), m, p[5])
    y2 = _fma32(ops, _fma32(ops, m, p[6], p[7]), m, p[8])
    y = _fma32(ops, _fma32(ops, _fma32(ops, y, m3, y1), m3, y2), m3,
               ops.mul(e, -2.12194440e-4))
    out = _fma32(ops, e, 0.693359375, ops.add(_fma32(ops, m2, -0.5, m), y))
    out = ops.select(ops.eq(x, 0.0), -math.inf, ops.select(ops.eq(x, math.inf), x, out))
    out = ops.select(ops.lt(x, 0.0), math.nan, out)
    return ops.select(ops.ne(x, x), math.nan, out)


def _xla_log1p32(ops, a):
    """XLA's float32 log1p: a Cephes rational function for |a| < sqrt(2) - 1, else
    log(1 + a)."""
    a2 = ops.mul(a, a)
    ratio = ops.div(_horner32(ops, a, _LOG1P_NUMERATOR), _horner32(ops, a, _LOG1P_DENOMINATOR))
    near_zero = ops.add(a, _fma32(ops, a2, -0.5, ops.mul(ops.mul(a, a2), ratio)))
    return ops.select(ops.lt(ops.abs(a), 0.41421356237309504880), near_zero,
                      _xla_log32(ops, ops.add(a, 1.0)))


def _xla_erf_inv32(ops, x):
    """Giles' single-precision erf_inv as XLA computes it on float32 ``x``: w = -log1p(-x*x),
    then a degree-8 polynomial in w - 2.5 (w < 5) or sqrt(w) - 3; erf_inv(+-1) = +-inf."""
    w = ops.neg(_xla_log1p32(ops, ops.mul(x, ops.neg(x))))
    below = ops.lt(w, 5.0)
    w = ops.select(below, ops.sub(w, 2.5), ops.sub(ops.math("sqrt", w), 3.0))
    p = ops.select(below, _ERF_INV_W_BELOW_5[0], ops.const(_ERF_INV_W_ABOVE_5[0], _F32))
    for lo, hi in zip(_ERF_INV_W_BELOW_5[1:], _ERF_INV_W_ABOVE_5[1:]):
        p = _fma32(ops, p, w, ops.select(below, lo, ops.const(hi, _F32)))
    return ops.select(ops.eq(ops.abs(x), 1.0), ops.mul(x, math.inf), ops.mul(p, x))


def _per_width(name, float32_algorithm, float64_algorithm):
    """A unary float primitive computed by ``float32_algorithm`` on float16/float32 operands
    (float16 widened to float32 and the result rounded back, as XLA's CPU computes it) and
    ``float64_algorithm`` on float64, both written on ``ops``: its impl runs them on NumPy
    arrays, its kernel lowering on ``ctx``, so jitted float16/float32 results are the eager
    ones bit for bit (float64: the same steps over the CPU math library's log, exp and erf,
    which are within 2 ulp of NumPy's: the last bit may differ)."""
    def compute(ops, x):
        if x.dtype == _F64:
            return float64_algorithm(ops, x)
        return ops.convert(float32_algorithm(ops, ops.convert(x, _F32)), x.dtype)
    prim = unop(name, quiet(lambda x: compute(ArrayOps, x)), FLOAT)
    kernel_elementwise(prim, compute)
    return prim


# Coefficients of the asymptotic series digamma(x) ~ log x - 1/(2x) - sum c_k / x**(2k):
# c_k = B_2k / (2k) with the Bernoulli numbers B_2 .. B_14.
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def _cot_pi(ops, x):
    """cot(pi x), accurate for large x and near the zeros at half-integers: x is reduced to
    r in [-1/2, 1/2] (exactly), and where |r| > 1/4, cot(pi r) = ±tan(pi (1/2 - |r|))."""
    r = ops.sub(x, ops.math("rint", x))
    size = ops.abs(r)
    far = ops.math("tan", ops.mul(math.pi, ops.sub(0.5, size)))
    return ops.select(ops.le(size, 0.25), ops.div(1.0, ops.math("tan", ops.mul(math.pi, r))),
                      ops.select(ops.lt(r, 0.0), ops.neg(far), far))


def _digamma(ops, x):
    """The digamma function, the derivative of lgamma, in float64 on ``ops`` (NumPy arrays
    for the impl, the kernel builder for compiled code); NaN at the poles (0, -1, -2 ...)
    and at -inf, as XLA gives.

    Negative x reflect to positive: ``digamma(x) = digamma(1 - x) - pi cot(pi x)``. Then the
    recurrence ``digamma(x) = digamma(x + 1) - 1/x`` moves x to at least 10, where the
    asymptotic series above is accurate to float64 rounding (its next term is below 5e-17).
    Near the positive root (x = 1.4616...) only the absolute error is that small.
    """
    pole = ops.and_(ops.le(x, 0.0), ops.eq(x, ops.math("floor", x)))
    reflect = ops.lt(x, 0.0)
    offset = ops.select(reflect, ops.mul(-math.pi, _cot_pi(ops, x)), 0.0)
    x = ops.select(reflect, ops.sub(1.0, x), x)
    for _ in range(10):
        small = ops.lt(x, 10.0)
        offset = ops.sub(offset, ops.select(small, ops.div(1.0, x), 0.0))
        x = ops.select(small, ops.add(x, 1.0), x)
    inv_x2 = ops.div(1.0, ops.mul(x, x))
    series = ops.mul(_DIGAMMA_SERIES[-1], inv_x2)
    for c in reversed(_DIGAMMA_SERIES[:-1]):
        series = ops.mul(ops.add(series, c), inv_x2)
    out = ops.sub(ops.sub(ops.add(offset, ops.math("log", x)), ops.div(0.5, x)), series)
    return ops.select(pole, math.nan, out)


def digamma_formula(x):
    """``_digamma`` on float64 NumPy arrays (polygamma's order 0)."""
    return _digamma(ArrayOps, np.asarray(x, np.float64))


# Bernoulli numbers B_2 .. B_14 over (2j)!: the Euler-Maclaurin tail of the zeta function.
_ZETA_TAIL = [b / math.factorial(2 * j) for j, b in enumerate(
    (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6), start=1)]


def hurwitz_zeta_formula(s, q):
    """``sum_k (q + k)**-s`` for an integer ``s >= 2`` and ``q > 0``.

    Terms are summed one by one until ``q`` reaches ``10 + s``; the rest is the
    Euler-Maclaurin formula ``q**(1-s)/(s-1) + q**-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2)
    q**(1-s-2j)``, whose next term is then below float64 rounding. For a large ``s`` the
    terms fall below rounding first (``2**-s``...): the sum stops there, with no tail (a
    step to ``10 + s`` would never end for ``s = 1e30``).
    """
    total, threshold = np.zeros(np.broadcast(s, q).shape), 10.0 + s
    while True:
        with np.errstate(over="ignore"):
            term = q ** -s
        adding = (q < threshold) & (term > total * 2.0 ** -54)  # (False for NaN)
        if not adding.any():
            break
        total = total + np.where(adding, term, 0.0)
        q = np.where(adding, q + 1, q)
    tail = q ** (1 - s) / (s - 1) + q ** -s / 2
    rising, power = s, q ** (-s - 1)  # for j = 1: s, and q**(1-s-2j)
    for j, coefficient in enumerate(_ZETA_TAIL, start=1):
        tail = tail + coefficient * rising * power
        rising = rising * (s + 2 * j - 1) * (s + 2 * j)
        power = power / (q * q)
    return total + np.where(q < threshold, 0.0, tail)


def _cot_pi_derivative(m, x):
    """``d^m/dx^m cot(pi x)``. With ``c = cot(y)``, ``dc/dy = -(1 + c**2)``: the m-th
    derivative in ``y`` is a polynomial ``P_m(c)`` with ``P_0 = c`` and
    ``P_(k+1) = -(1 + c**2) P_k'``; the chain rule adds ``pi**m``."""
    poly = np.polynomial.Polynomial([0, 1])
    for _ in range(m):
        poly = -np.polynomial.Polynomial([1, 0, 1]) * poly.deriv()
    return np.pi ** m * poly(_cot_pi(ArrayOps, x))


def _polygamma_of_order(n, x):
    """``psi^(n)(x) = (-1)**(n+1) n! zeta(n + 1, x)`` for ``n >= 1``.

    Below 0 the reflection formula, differentiated n times from
    ``digamma(1 - x) - digamma(x) = pi cot(pi x)``, gives
    ``psi^(n)(x) = (-1)**n psi^(n)(1 - x) - pi d^n/dx^n cot(pi x)``. At the poles (0, -1, ...)
    odd orders are +inf from both sides; even ones change sign there: NaN (as XLA gives).
    """
    q = np.where(x > 0, x, 1 - x)
    with np.errstate(over="ignore", invalid="ignore"):  # (n! overflows from n = 171)
        factorial = math.exp(math.lgamma(n + 1)) if n <= _LARGEST_FACTORIAL else math.inf
        psi = (-1) ** (n + 1) * factorial * hurwitz_zeta_formula(float(n + 1), q)
        pole = (x <= 0) & (x == np.floor(x))
        reflected = np.nan  # (beyond float64's factorials: too large either way)
        if n <= _LARGEST_FACTORIAL and np.any((x <= 0) & ~pole):
            reflected = (-1) ** n * psi - np.pi * _cot_pi_derivative(n, x)
    return np.where(pole, np.inf if n % 2 else np.nan, np.where(x > 0, psi, reflected))


_LARGEST_FACTORIAL = 170  # the largest n whose n! float64 holds


def _polygamma(m, x):
    """The m-th derivative of digamma, for a whole number ``m`` (NaN for other m, as JAX)."""
    m, x = np.broadcast_arrays(m, x)
    whole = (m >= 0) & (m == np.floor(m)) & np.isfinite(m)
    out = np.where(whole & (m == 0), digamma_formula(x), np.nan)
    for n in np.unique(m[whole & (m > 0)]):
        out = np.where(m == n, _polygamma_of_order(int(n), x), out)
    return out


erf_p = unop("erf", in_float64(np.vectorize(math.erf, otypes=[np.float64])), FLOAT)
erfc_p = unop("erfc", in_float64(np.vectorize(math.erfc, otypes=[np.float64])), FLOAT)
erf_inv_p = _per_width("erf_inv", _xla_erf_inv32, _erf_inv)
# XLA's float32 log and log1p, for the samplers whose draws must be JAX's (lax.log and
# lax.log1p are correctly rounded; these are within about an ulp). float64: NumPy's eagerly,
# the CPU math library's in kernels.
xla_log_p = _per_width("xla_log", _xla_log32, lambda ops, x: ops.math("log", x))
xla_log1p_p = _per_width("xla_log1p", _xla_log1p32, lambda ops, x: ops.math("log1p", x))
lgamma_p = unop("lgamma", in_float64(np.vectorize(_lgamma_scalar, otypes=[np.float64])),
                FLOAT)
digamma_p = unop("digamma", in_float64(digamma_formula), FLOAT)
polygamma_p = binop("polygamma", in_float64(_polygamma), [FLOAT, FLOAT])

erf = unary_function(erf_p, "Element-wise error function.")
erfc = unary_function(erfc_p, "Element-wise ``1 - erf(x)``, accurate where erf is near 1.")
erf_inv = unary_function(erf_inv_p, "Element-wise inverse of ``erf`` (±inf at ±1, NaN "
                                    "beyond).")
xla_log = unary_function(xla_log_p, "Element-wise ``log`` as XLA computes it on the CPU.")
xla_log1p = unary_function(xla_log1p_p, "Element-wise ``log1p`` as XLA computes it on the "
                                        "CPU.")
lgamma = unary_function(lgamma_p, "Element-wise ``log|Γ(x)|``.")
digamma = unary_function(digamma_p, "Element-wise digamma function, ``d/dx lgamma(x)``.")
def polygamma(m, x):
    """Element-wise ``psi^(m)(x)``, the m-th derivative of digamma, for whole numbers ``m``
    (an array like x)."""
    return polygamma_p.bind(m, x)


# Derivatives (JAX's).



def _polygamma_order_jvp(g, m, x):
    raise ValueError("polygamma gradient with respect to m is not supported")


def _erf_slope(g, x, scale):
    """``scale * 2/sqrt(pi) * exp(-x**2) * g``: the derivative of ``scale * erf(x)``."""
    return mul(scalar_like(x, scale * _TWO_OVER_SQRT_PI), mul(g, exp(neg(integer_pow(x, 2)))))


ad.defjvp(erf_p, lambda g, x: _erf_slope(g, x, 1))
ad.defjvp(erfc_p, lambda g, x: _erf_slope(g, x, -1))
ad.defjvp2(erf_inv_p, lambda g, ans, x: mul(scalar_like(ans, 1 / _TWO_OVER_SQRT_PI),
                                            mul(g, exp(integer_pow(ans, 2)))))
ad.defjvp(xla_log_p, lambda g, x: div(g, x))
ad.defjvp(xla_log1p_p, lambda g, x: div(g, add(x, scalar_like(x, 1))))
ad.defjvp(lgamma_p, lambda g, x: mul(g, digamma(x)))
ad.defjvp(digamma_p, lambda g, x: mul(g, polygamma(scalar_like(x, 1), x)))
ad.defjvp(polygamma_p, _polygamma_order_jvp,
          lambda g, m, x: mul(g, polygamma(add(m, scalar_like(m, 1)), x)))


# --- kernel lowerings: erf inline (the CPU math library), erfc and lgamma through libm (erf_inv,
# xla_log and xla_log1p have theirs from _per_width) -------------------------------------------

kernel_elementwise(erf_p, lambda ctx, x: ctx.math("erf", x))
kernel_elementwise(erfc_p, lambda ctx, x: ctx.math("erfc", x))
kernel_elementwise(lgamma_p, lambda ctx, x: ctx.math("lgamma", x))
kernel_elementwise(digamma_p, lambda ctx, x: ctx.convert(
    _digamma(ctx, ctx.convert(x, _F64)), x.dtype))  # (in float64, as the impl)

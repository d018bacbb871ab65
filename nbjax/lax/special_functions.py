"""More element-wise special functions: the incomplete gamma and beta functions, the scaled
Bessel functions I0 and I1, the Hurwitz zeta function; and two bit-level element-wise ops,
``reduce_precision`` and ``mulhi``.

The reference implementations compute in float64 (as ``special`` does) with the classical
series and continued fractions, the ones XLA uses: for the incomplete gamma function the
power series of P below ``x = max(1, a)`` and Legendre's continued fraction of Q above, each
carrying its derivative in ``a`` term by term (``igamma_grad_a``, and the implicit
reparameterization ``random_gamma_grad = -(dP/da) / (dP/dx)``); for the incomplete beta
function Lentz's evaluation of its continued fraction, on the side of ``x`` where it
converges fast. The scaled Bessel functions use the power series up to |x| = 30 and the
asymptotic expansion beyond, whose smallest term there is below float64 rounding.

Derivatives are JAX's: where JAX defines none (``zeta``, ``igamma_grad_a``,
``random_gamma_grad``, ``betainc`` in ``a`` and ``b``), neither does nbjax.
"""

import math

import numpy as np

from ..core import Primitive, dtypes, get_aval
from ..interpreters import ad
from .batch_util import elementwise_batcher
from .elementwise import (abs, add, binary_function, binop, div, gt, mul, neg, quiet, select, sign,
                          sub, unary_function, unop)
from .special import ArrayOps, digamma_formula, hurwitz_zeta_formula, in_float64, lgamma
from .standard import FLOAT, INT, check_dtype, kernel_elementwise, scalar_like
from .structural import full_like
from .transcendental import exp, log, log1p

__all__ = ["igamma", "igamma_p", "igammac", "igammac_p", "igamma_grad_a", "igamma_grad_a_p",
           "random_gamma_grad", "random_gamma_grad_p", "betainc", "regularized_incomplete_beta_p",
           "bessel_i0e", "bessel_i0e_p", "bessel_i1e", "bessel_i1e_p", "zeta", "zeta_p",
           "reduce_precision", "reduce_precision_p", "mulhi", "mulhi_p"]

_EPS = np.finfo(np.float64).eps
_MAX_ITERATIONS = 2000


def _lgamma(x):
    return np.vectorize(lambda v: math.lgamma(v) if v > 0 else math.inf,
                        otypes=[np.float64])(x)


# --- the incomplete gamma function -----------------------------------------------------------

def _gamma_series(a, x):
    """``sum_n x^n / ((a+1)...(a+n))`` and its derivative in a, element by element until the
    derivative's relative change is below rounding (then P = sum * x^a e^-x / Gamma(a+1))."""
    r, c, total = a.copy(), np.ones_like(a), np.ones_like(a)
    dc, dtotal = np.zeros_like(a), np.zeros_like(a)
    active = np.ones(a.shape, bool)
    for _ in range(_MAX_ITERATIONS):
        if not active.any():
            break
        r1 = r + 1
        dc1 = dc * (x / r1) - c * x / (r1 * r1)
        c1 = c * (x / r1)
        r, dc, c = (np.where(active, new, old) for new, old in ((r1, r), (dc1, dc), (c1, c)))
        total = np.where(active, total + c, total)
        dtotal = np.where(active, dtotal + dc, dtotal)
        active &= np.abs(dc / np.where(dtotal == 0, 1, dtotal)) > _EPS
        active &= np.abs(c / total) > _EPS / 4
    return total, dtotal


def _gamma_fraction(a, x):
    """Legendre's continued fraction of ``Q(a, x) e^x x^-a Gamma(a)`` and its derivative in a
    (the Cephes recurrence, rescaled when the convergents grow large)."""
    y = 1 - a
    z = x + y + 1
    c = np.zeros_like(a)
    pkm2, qkm2, pkm1, qkm1 = np.ones_like(x), x, x + 1, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = (np.zeros_like(x), np.zeros_like(x), np.zeros_like(x), -x)
    dans = (0 - ans * -x) / qkm1
    active = np.ones(a.shape, bool)
    for _ in range(_MAX_ITERATIONS):
        if not active.any():
            break
        c, y, z = c + 1, y + 1, z + 2
        yc = y * c
        pk, qk = pkm1 * z - pkm2 * yc, qkm1 * z - qkm2 * yc
        dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c
        nonzero = qk != 0
        safe_qk = np.where(nonzero, qk, 1)
        new_ans = np.where(nonzero, pk / safe_qk, ans)
        new_dans = np.where(nonzero, (dpk - new_ans * dqk) / safe_qk, dans)
        change = np.where(nonzero, np.abs(new_dans - dans) + np.abs(new_ans - ans) / 4, 1)
        ans, dans = np.where(active, new_ans, ans), np.where(active, new_dans, dans)
        rescale = np.abs(pk) > 1 / _EPS
        shifted = [pk, qk, pkm1, qkm1, dpk, dqk, dpkm1, dqkm1]
        shifted = [np.where(rescale, v * _EPS, v) for v in shifted]
        old = [pkm1, qkm1, pkm2, qkm2, dpkm1, dqkm1, dpkm2, dqkm2]
        (pkm1, qkm1, pkm2, qkm2, dpkm1, dqkm1, dpkm2, dqkm2) = (
            np.where(active, n, o) for n, o in zip(shifted, old))
        active &= change > _EPS * np.maximum(np.abs(ans), 1)
    return ans, dans


def _igamma_parts(a, x):
    """(P, Q, dP/da, dx/da of a Gamma(a) sample at x) for float64 arrays."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    bad = (x < 0) | (a < 0) | np.isnan(a) | np.isnan(x) | np.isinf(a) | ((a == 0) & (x == 0))
    upper = (x > 1) & (x > a) & ~bad
    lower = ~upper & ~bad & (x > 0) & (a > 0)
    safe_a = np.where(lower | upper, a, 1.0)
    safe_x = np.where(lower | upper, np.where(np.isinf(x), 1.0, x), 1.0)
    log_ax = safe_a * np.log(safe_x) - safe_x
    total, dtotal = _gamma_series(np.where(lower, safe_a, 1.0), np.where(lower, safe_x, 0.0))
    frac, dfrac = _gamma_fraction(np.where(upper, safe_a, 1.0), np.where(upper, safe_x, 2.0))
    ax_lower = np.exp(log_ax - _lgamma(safe_a + 1))
    ax_upper = np.exp(log_ax - _lgamma(safe_a))
    dlog_lower = np.log(safe_x) - digamma_formula(safe_a + 1)
    dlog_upper = np.log(safe_x) - digamma_formula(safe_a)
    p_series = total * ax_lower
    q_fraction = frac * ax_upper
    p = np.where(upper, 1 - q_fraction, p_series)
    q = np.where(upper, q_fraction, 1 - p_series)
    dp_da = np.where(upper, -ax_upper * (frac * dlog_upper + dfrac),
                     ax_lower * (total * dlog_lower + dtotal))
    sample_grad = np.where(upper, (dfrac + frac * dlog_upper) * safe_x,
                           -(dtotal + total * dlog_lower) * safe_x / safe_a)
    # Where neither expansion applies: x == 0, a == 0, x == inf, or outside the domain.
    # P(0, x) is NaN in JAX for 0 < x < 1, where its series runs (SciPy: 1), and 1 from
    # x = 1 on; Q(0, x) = 0 in both.
    p = np.where(x == 0, 0.0, np.where(a == 0, np.where(x < 1, np.nan, 1.0),
                                       np.where(np.isinf(x), 1.0, p)))
    q = np.where(x == 0, 1.0, np.where(a == 0, 0.0, np.where(np.isinf(x), 0.0, q)))
    dp_da = np.where(x == 0, 0.0, np.where((a == 0) | np.isinf(x), np.nan, dp_da))
    sample_grad = np.where(x == 0, 0.0, np.where((a == 0) | np.isinf(x), np.nan, sample_grad))
    nan = np.full(a.shape, np.nan)
    p, q, dp_da, sample_grad = (np.where(bad, nan, v) for v in (p, q, dp_da, sample_grad))
    # a == inf, as JAX: its series (x <= 1, or x <= a) sums to P = 0 for a finite x < 1
    # (NaN beyond), and x == inf gives P = 1 first; Q = 1 - P. (SciPy: Q = 1 for every
    # finite x.)
    a_inf = (a == np.inf) & (x >= 0)
    p_inf = np.where(np.isinf(x), 1.0, np.where(x < 1, 0.0, np.nan))
    return np.where(a_inf, p_inf, p), np.where(a_inf, 1 - p_inf, q), dp_da, sample_grad


def _part(i):
    return lambda a, x: _igamma_parts(a, x)[i]


def _float_binop(name, impl):
    return binop(name, in_float64(impl), [FLOAT, FLOAT])


igamma_p = _float_binop("igamma", _part(0))
igammac_p = _float_binop("igammac", _part(1))
igamma_grad_a_p = _float_binop("igamma_grad_a", _part(2))
random_gamma_grad_p = _float_binop("random_gamma_grad", _part(3))

# (functions of their own: JAX names their operands a and x)
def igamma(a, x):
    """Element-wise regularized lower incomplete gamma function ``P(a, x)``."""
    return igamma_p.bind(a, x)


def igammac(a, x):
    """Element-wise regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    return igammac_p.bind(a, x)


def igamma_grad_a(a, x):
    """Element-wise ``dP(a, x)/da``."""
    return igamma_grad_a_p.bind(a, x)



random_gamma_grad = binary_function(random_gamma_grad_p, "Element-wise derivative ``dx/da`` "
                                    "of a Gamma(a, 1) sample x (implicit reparameterization).")


def _minus_one(a):
    return sub(a, scalar_like(a, 1))


def _igamma_dx(g, a, x):
    """``dP/dx = x^(a-1) e^-x / Gamma(a)``, through lgamma so it does not overflow."""
    log_density = sub(sub(mul(_minus_one(a), log(x)), x), lgamma(a))
    return mul(g, exp(log_density))


ad.defjvp(igamma_p, lambda g, a, x: mul(g, igamma_grad_a(a, x)), _igamma_dx)
ad.defjvp(igammac_p, lambda g, a, x: neg(mul(g, igamma_grad_a(a, x))),
          lambda g, a, x: neg(_igamma_dx(g, a, x)))


# --- the incomplete beta function --------------------------------------------------------------

_TINY = 1e-300


def _beta_fraction(a, b, x):
    """The continued fraction of ``I_x(a, b) a B(a, b) / (x^a (1-x)^b)`` by the modified
    Lentz method (Numerical Recipes' betacf), iterated until every element has converged."""
    def clamp(v):
        return np.where(np.abs(v) < _TINY, _TINY, v)
    qab, qap, qam = a + b, a + 1, a - 1
    c = np.ones_like(x)
    d = 1 / clamp(1 - qab * x / qap)
    h = d.copy()
    active = np.ones(x.shape, bool)
    for m in range(1, _MAX_ITERATIONS + 1):
        if not active.any():
            break
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 / clamp(1 + aa * d)
            c = clamp(1 + aa / c)
            delta = d * c
            h = np.where(active, h * delta, h)
        active &= np.abs(delta - 1) > _EPS
    return h


def _betainc(a, b, x):
    """``I_x(a, b)``; the fraction is evaluated at x or, by symmetry, at 1 - x (with a and b
    swapped), whichever side of the mean ``(a+1)/(a+b+2)`` converges fast."""
    a, b, x = np.broadcast_arrays(a, b, x)
    bad = (a < 0) | (b < 0) | ((a == 0) & (b == 0)) | (x < 0) | (x > 1) | np.isnan(a + b + x)
    edge = (a == 0) | (b == 0) | (x == 0) | (x == 1) | np.isinf(a) | np.isinf(b)
    ok = ~bad & ~edge
    sa, sb, sx = (np.where(ok, v, fill) for v, fill in ((a, 1.0), (b, 1.0), (x, 0.5)))
    log_front = (sa * np.log(sx) + sb * np.log1p(-sx)
                 - (_lgamma(sa) + _lgamma(sb) - _lgamma(sa + sb)))
    front = np.exp(log_front)
    flip = sx > (sa + 1) / (sa + sb + 2)
    direct = front * _beta_fraction(sa, sb, np.where(flip, 0.5, sx)) / sa
    flipped = 1 - front * _beta_fraction(sb, sa, np.where(flip, 1 - sx, 0.5)) / sb
    out = np.where(flip, flipped, direct)
    # x == 0 gives 0 before a == 0 or b == inf give 1 (as JAX and SciPy); inf, inf is NaN.
    edge_value = np.where((x != 0) & ((a == 0) | (x == 1) | np.isinf(b)), 1.0, 0.0)
    edge_value = np.where(np.isinf(a) & np.isinf(b), np.nan, edge_value)
    return np.where(bad, np.nan, np.where(edge, edge_value, out))


regularized_incomplete_beta_p = binop("regularized_incomplete_beta", in_float64(_betainc),
                                      [FLOAT, FLOAT, FLOAT])


def betainc(a, b, x):
    """Element-wise regularized incomplete beta function ``I_x(a, b)``."""
    return regularized_incomplete_beta_p.bind(a, b, x)


def _betainc_parameter_jvp(g, a, b, x):
    raise ValueError("Betainc gradient with respect to a and b not supported.")


def _betainc_dx(g, a, b, x):
    """``dI/dx = x^(a-1) (1-x)^(b-1) / B(a, b)``."""
    log_beta = sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))
    log_density = sub(add(mul(_minus_one(a), log(x)), mul(_minus_one(b), log1p(neg(x)))),
                      log_beta)
    return mul(g, exp(log_density))


ad.defjvp(regularized_incomplete_beta_p, _betainc_parameter_jvp, _betainc_parameter_jvp,
          _betainc_dx)


# --- scaled modified Bessel functions I0 and I1 --------------------------------------------------

def _bessel_ie(ops, nu, x):
    """``exp(-|x|) I_nu(x)`` for nu = 0 or 1, in float64 on ``ops`` (NumPy arrays for the
    impl, the kernel builder for compiled code): the power series ``sum (x/2)^(2k+nu) /
    (k! (k+nu)!)`` for |x| <= 30, the asymptotic series ``e^|x| / sqrt(2 pi |x|) sum_k (-1)^k
    prod_j (4 nu^2 - (2j-1)^2) / (k! (8|x|)^k)`` beyond."""
    ax = ops.abs(x)
    small = ops.le(ax, 30.0)
    t = ops.mul(ops.select(small, ax, 0.0), 0.5)
    term = t if nu else ops.add(ops.mul(t, 0.0), 1.0)
    total = term
    for k in range(1, 120):
        term = ops.div(ops.mul(ops.mul(term, t), t), float(k * (k + nu)))
        total = ops.add(total, term)
    series = ops.mul(total, ops.math("exp", ops.neg(ops.select(small, ax, 0.0))))
    big = ops.select(small, 31.0, ax)
    mu = 4.0 * nu * nu
    term = asymptotic = ops.add(ops.mul(t, 0.0), 1.0)
    for k in range(1, 40):
        term = ops.div(ops.mul(ops.neg(term), mu - (2 * k - 1) ** 2), ops.mul(8.0 * k, big))
        asymptotic = ops.add(asymptotic, term)
    asymptotic = ops.div(asymptotic, ops.math("sqrt", ops.mul(2 * math.pi, big)))
    out = ops.select(small, series, asymptotic)
    return ops.select(ops.lt(x, 0.0), ops.neg(out), out) if nu else out


def _bessel_ie_primitive(nu):
    prim = unop(f"bessel_i{nu}e", in_float64(lambda x: _bessel_ie(ArrayOps, nu, x)), FLOAT)
    kernel_elementwise(prim, lambda ctx, x: ctx.convert(
        _bessel_ie(ctx, nu, ctx.convert(x, np.float64)), x.dtype))  # (float64, as the impl)
    return prim


bessel_i0e_p = _bessel_ie_primitive(0)
bessel_i1e_p = _bessel_ie_primitive(1)
bessel_i0e = unary_function(bessel_i0e_p, "Element-wise ``exp(-|x|) I0(x)``.")
bessel_i1e = unary_function(bessel_i1e_p, "Element-wise ``exp(-|x|) I1(x)``.")


def _bessel_i1e_jvp(g, y, x):
    """``i1e' = i0e - i1e (sign x + 1/x)``, and 1/2 at (and near) 0, as JAX writes it."""
    eps = float(np.finfo(get_aval(x).dtype).eps)
    not_tiny = gt(abs(x), scalar_like(x, eps))
    safe_x = select(not_tiny, x, full_like(x, eps))
    slope = sub(bessel_i0e(safe_x), mul(y, add(sign(safe_x), div(scalar_like(x, 1), safe_x))))
    return mul(g, select(not_tiny, slope, full_like(x, 0.5)))


ad.defjvp2(bessel_i0e_p, lambda g, y, x: mul(g, sub(bessel_i1e(x), mul(sign(x), y))))
ad.defjvp2(bessel_i1e_p, _bessel_i1e_jvp)


# --- the Hurwitz zeta function --------------------------------------------------------------------

def _zeta(s, q):
    """``sum_k (q + k)^-s``, as XLA's: +inf at s = 1, and at the poles q = 0, -1, -2, ...
    for an even s (where the term 0^-s is +inf from both sides; NaN for other s); NaN for
    other s < 1 and where a negative q meets a fractional s (or q is infinite). At other
    negative q the value is the sum's (SciPy's), where XLA's is often far off (at q = -10.5)."""
    s, q = np.broadcast_arrays(s, q)
    at_pole = (q <= 0) & (q == np.floor(q))
    pole = (s == 1) | (at_pole & (s % 2 == 0))
    bad = (((s < 1) | at_pole) & ~pole) | np.isnan(s) | np.isnan(q) | np.isinf(q) | \
        ((q < 0) & (s != np.floor(s)))
    ok = ~pole & ~bad
    s, positive = np.where(ok, s, 2.0), q > 0
    out = np.where(positive, hurwitz_zeta_formula(s, np.where(ok & positive, q, 1.0)),
                   _zeta_negative_q(s, np.where(ok & ~positive, q, -0.5)))
    return np.where(bad, np.nan, np.where(pole, np.inf, out))


def _zeta_negative_q(s, q):
    """``zeta(s, q)`` for an integer s and a negative, non-integer q, from three values at
    positive arguments. With ``q = -(n + f)``, ``0 < f < 1``, the terms at ``q .. q + n`` are
    ``(-1)**s (f + j)**-s`` for ``j = n .. 0``, and the rest are ``zeta(s, 1 - f)``; so
    ``zeta(s, q) = zeta(s, 1 - f) + (-1)**s (zeta(s, f) - zeta(s, n + 1 + f))``. The first two
    are added first: for an odd s they cancel (exactly where ``f = 1/2``), and the sum keeps
    the small remainder's accuracy, where the terms one by one would not."""
    n = np.floor(-q)
    f = -q - n
    sign = np.where(s % 2 == 0, 1.0, -1.0)
    reflected = hurwitz_zeta_formula(s, 1 - f) + sign * hurwitz_zeta_formula(s, f)
    return reflected - sign * hurwitz_zeta_formula(s, n + 1 + f)


zeta_p = binop("zeta", in_float64(_zeta), [FLOAT, FLOAT])
def zeta(x, q):
    """Element-wise Hurwitz zeta function ``sum_k (q + k)^-x``."""
    return zeta_p.bind(x, q)


# --- reduce_precision -----------------------------------------------------------------------------

def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    """Round ``x`` to a float format with these field widths, the way XLA does on the bits:
    round the mantissa to nearest even, then overflow to ±inf and flush values below the
    smallest normal number to ±0; NaN stays NaN. The 8- and 4-bit floats are rounded as
    the wider float XLA computes them in (``dtypes.computed_as``), then converted back."""
    wide = dtypes.computed_as(x.dtype)
    if wide is not None:
        return _reduce_precision_impl(x.astype(wide), exponent_bits=exponent_bits,
                                      mantissa_bits=mantissa_bits).astype(x.dtype)
    finfo = np.finfo(x.dtype)
    nbits, nmant, nexp = finfo.bits, finfo.nmant, finfo.nexp
    utype = np.dtype(f"u{nbits // 8}")
    bits = x.view(utype).astype(np.uint64)
    one = np.uint64(1)
    if mantissa_bits < nmant:
        shift = np.uint64(nmant - mantissa_bits)
        last_bit_mask = one << shift
        bias = (last_bit_mask >> one) - one
        last_bit = (bits & last_bit_mask) >> shift
        bits = (bits + last_bit + bias) & ~(last_bit_mask - one)
    if exponent_bits < nexp:
        sign_mask = one << np.uint64(nbits - 1)
        exp_mask = np.uint64((1 << nexp) - 1) << np.uint64(nmant)
        bias = (1 << (nexp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exp_mask
        overflow = exponent > np.uint64(bias + reduced_bias) << np.uint64(nmant)
        underflow = exponent <= np.uint64(bias - reduced_bias) << np.uint64(nmant)
        signed_zero = bits & sign_mask
        bits = np.where(overflow, signed_zero | exp_mask, np.where(underflow, signed_zero, bits))
    out = (bits & np.uint64((1 << nbits) - 1)).astype(utype).view(x.dtype)
    return np.where(np.isnan(x), x, out)


reduce_precision_p = Primitive("reduce_precision")


@reduce_precision_p.def_abstract_eval
def _reduce_precision_abstract_eval(x, *, exponent_bits, mantissa_bits):
    check_dtype("reduce_precision", x, FLOAT)
    return x


reduce_precision_p.def_impl(_reduce_precision_impl)
reduce_precision_p.def_batch(elementwise_batcher(reduce_precision_p))
# Linear (as JAX treats it): the tangent and the cotangent are rounded the same way.
ad.deflinear(reduce_precision_p, lambda ct, x, **params: [reduce_precision_p.bind(ct, **params)])


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """Element-wise rounding of ``operand`` to the precision and range of a float format with
    ``exponent_bits`` and ``mantissa_bits`` (e.g. 5 and 10 for float16), kept in its dtype."""
    exponent_bits, mantissa_bits = int(exponent_bits), int(mantissa_bits)
    if exponent_bits < 1 or mantissa_bits < 0:
        raise ValueError(f"reduce_precision: exponent_bits must be >= 1 and mantissa_bits >= 0, "
                         f"got {exponent_bits} and {mantissa_bits}")
    return reduce_precision_p.bind(operand, exponent_bits=exponent_bits,
                                   mantissa_bits=mantissa_bits)


# --- mulhi ----------------------------------------------------------------------------------------

def _mulhi_impl(x, y):
    """The high half of the double-width product ``x * y``, in the operands' integer type."""
    bits = x.dtype.itemsize * 8
    if bits < 64:
        wide = np.dtype(f"{'i' if x.dtype.kind == 'i' else 'u'}8")
        product = x.astype(wide) * y.astype(wide)
        return (product >> bits).astype(x.dtype)
    high = [(int(a) * int(b)) >> 64 for a, b in zip(x.ravel(), y.ravel())]
    mask = (1 << 64) - 1
    as_unsigned = np.array([h & mask for h in high], np.uint64).reshape(x.shape)
    return as_unsigned.view(x.dtype)


mulhi_p = binop("mulhi", quiet(lambda x, y: _mulhi_impl(*np.broadcast_arrays(x, y))),
                [INT, INT])
ad.defjvp_zero(mulhi_p)
mulhi = binary_function(mulhi_p, "Element-wise high half of the double-width product "
                                 "``x * y`` of two integers of one type.")

"""More of ``jax.scipy.special``: the gamma family (gamma, gammasgn, loggamma, factorial,
comb, poch, multigammaln, beta, betaln, incomplete gamma and beta functions), the scaled and
unscaled Bessel functions I0 and I1, zeta and polygamma, entropies, Box-Cox transforms and
erfcx.

Each is a composition of lax functions (``lax.igamma``, ``lax.bessel_i0e``, ``lax.lgamma``...),
written as JAX writes it, so its derivatives, batching and compilation come from them; where
JAX gives a function a custom JVP (``zeta``, ``entr``), so does nbjax, with JAX's rule.
"""

import functools
import math
import operator

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..api import jvp
from ..custom_derivatives import custom_jvp
from ..numpy.util import half_precision_in_float32, promote_args_inexact
from .special_series import bernoulli_fractions

__all__ = ["gamma", "gammasgn", "loggamma", "factorial", "comb", "poch", "multigammaln",
           "beta", "betaln", "betainc", "gammainc", "gammaincc", "i0", "i0e", "i1", "i1e",
           "zeta", "polygamma", "entr", "rel_entr", "kl_div", "boxcox", "boxcox1p", "erfcx"]


def gammasgn(x):
    """The sign of the gamma function: 1 for x > 0, alternating between the poles below 0
    (``(-1)**ceil(-x)``); NaN at the poles and for -inf or NaN; the sign of a zero at zero
    (``Gamma(-0) = -inf``, as in SciPy)."""
    x, = promote_args_inexact("gammasgn", x)
    floor_x = lax.floor(x)
    negative = jnp.where(jnp.fmod(floor_x, 2) == 0, 1.0, -1.0).astype(x.dtype)
    pole = (x < 0) & (x == floor_x)
    out = jnp.where(x > 0, jnp.ones_like(x), negative)
    out = jnp.where(x == 0, jnp.where(jnp.signbit(x), -1.0, 1.0).astype(x.dtype), out)
    return jnp.where(pole | jnp.isnan(x), jnp.full_like(x, np.nan), out)


def gamma(x):
    """The gamma function, ``gammasgn(x) exp(gammaln(x))``."""
    x, = promote_args_inexact("gamma", x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def loggamma(x):
    """``log Gamma(x)`` for real x: ``gammaln`` where x > 0, NaN elsewhere (the principal
    branch is complex there)."""
    x, = promote_args_inexact("loggamma", x)
    return jnp.where(x > 0, lax.lgamma(x), jnp.full_like(x, np.nan))


def factorial(n, exact=False):
    """``Gamma(n + 1)``, and 0 for n < 0 (weakly typed for a Python number, as JAX's)."""
    if exact:
        raise ValueError("factorial with exact=True is not supported.")
    n, = promote_args_inexact("factorial", n)
    return jnp.where(n < 0, 0, lax.exp(lax.lgamma(n + 1)))


def comb(N, k, *, repetition=False):
    """The binomial coefficient ``N! / (k! (N-k)!)`` through gammaln (0 outside
    ``0 <= k <= N``); with ``repetition``, ``comb(N + k - 1, k)``."""
    N, k = promote_args_inexact("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), jnp.ones_like(N), comb(N + k - 1, k))
    inside = (k <= N) & (N >= 0) & (k >= 0)
    safe_N, safe_k = jnp.where(inside, N, 0.0), jnp.where(inside, k, 0.0)
    out = lax.exp(lax.lgamma(safe_N + 1) - lax.lgamma(safe_k + 1)
                  - lax.lgamma(safe_N + 1 - safe_k))
    return jnp.where(inside, out, jnp.zeros_like(out))


def poch(z, m):
    """The rising factorial ``Gamma(z + m) / Gamma(z)`` (1 for m = 0)."""
    z, m = promote_args_inexact("poch", z, m)
    if jnp.iscomplexobj(z):
        raise ValueError("jnp.poch does not support complex-valued inputs.")
    return jnp.where(m == 0, jnp.ones_like(z), gamma(z + m) / gamma(z))


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d`` (a Python int):
    ``d (d-1)/4 log pi + sum_j gammaln(a - j/2)``."""
    d = operator.index(d)
    a, = promote_args_inexact("multigammaln", a)
    constant = 0.25 * d * (d - 1) * np.log(np.pi)
    shifts = np.arange(d, dtype=a.dtype) / 2
    terms = lax.lgamma(jnp.expand_dims(a, -1) - shifts)
    return jnp.sum(terms, axis=-1) + np.array(constant, a.dtype)


def betaln(a, b):
    """``log |B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)``. Where the larger argument
    is large (and both are positive), ``gammaln(b) - gammaln(a + b)`` cancels, to nothing at
    all when ``a + b`` rounds to ``b``: there it comes from Stirling's series instead."""
    a, b = promote_args_inexact("betaln", a, b)
    small, large = jnp.minimum(a, b), jnp.maximum(a, b)
    stirling = (small > 0) & (large >= _STIRLING_FROM)
    safe_large = jnp.where(stirling, large, jnp.full_like(large, _STIRLING_FROM))
    safe_small = jnp.where(stirling, small, jnp.ones_like(small))
    return jnp.where(stirling, lax.lgamma(small) + _lgamma_ratio(safe_small, safe_large),
                     lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b))


_STIRLING_FROM = 10.0  # (where the series below is accurate to float64's precision)
_STIRLING_COEFFICIENTS = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)


def _stirling_correction(x):
    """``gammaln(x) - ((x - 1/2) log x - x + log(2 pi) / 2)`` for ``x >= 10``: the asymptotic
    series in ``1 / x^(2k - 1)`` with the Bernoulli-number coefficients."""
    inv_x2, term, total = 1 / (x * x), 1 / x, jnp.zeros_like(x)
    for c in _STIRLING_COEFFICIENTS:
        total = total + c * term  # (a Python float: keeps a weak type weak)
        term = term * inv_x2
    return total


def _lgamma_ratio(a, b):
    """``gammaln(b) - gammaln(a + b)`` for ``a > 0``, ``b >= 10``, through Stirling's formula:
    ``-(b - 1/2) log1p(a / b) - a log(a + b) + a`` plus the corrections' difference."""
    return (a - (b - 0.5) * jnp.log1p(a / b) - a * jnp.log(a + b)
            + _stirling_correction(b) - _stirling_correction(a + b))


def beta(a, b):
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``, with its sign."""
    a, b = promote_args_inexact("beta", a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * lax.exp(betaln(a, b))


def betainc(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)``."""
    a, b, x = promote_args_inexact("betainc", a, b, x)
    return lax.betainc(a, b, x)


def gammainc(a, x):
    """The regularized lower incomplete gamma function ``P(a, x)``."""
    a, x = promote_args_inexact("gammainc", a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    a, x = promote_args_inexact("gammaincc", a, x)
    return lax.igammac(a, x)


def i0e(x):
    """``exp(-|x|) I0(x)``."""
    x, = promote_args_inexact("i0e", x)
    return lax.bessel_i0e(x)


def i1e(x):
    """``exp(-|x|) I1(x)``."""
    x, = promote_args_inexact("i1e", x)
    return lax.bessel_i1e(x)


def i0(x):
    """The modified Bessel function ``I0(x) = exp(|x|) i0e(x)``."""
    x, = promote_args_inexact("i0", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i0e(x)


def i1(x):
    """The modified Bessel function ``I1(x) = exp(|x|) i1e(x)``."""
    x, = promote_args_inexact("i1", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i1e(x)


@custom_jvp
def zeta(x, q=None):
    """The Hurwitz zeta function ``sum_k (q + k)^-x`` (q is required, as in JAX). Its
    derivatives in both x and q are those of ``_zeta_series``, as JAX's."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = promote_args_inexact("zeta", x, q)
    return lax.zeta(x, q)


# (2k)! / B_2k for k = 1 .. 16: the Euler-Maclaurin coefficients of ``_zeta_series``.
_ZETA_SERIES_COEFFICIENTS = [math.factorial(2 * k) / b for k, b in
                             enumerate(bernoulli_fractions(32)[2::2], start=1)]


def _zeta_series(x, q):
    """``zeta(s, a)`` by Johansson's formula (5) (Numerical Algorithms 69, 2015), as JAX
    writes it, N = M = 8 terms in float32 and 16 otherwise: ``sum_(k<N) (a + k)^-s +
    (a + N)^(1-s) / (s - 1) + (a + N)^-s (1/2 + sum_(j<M) s (s+1) ... (s+2j) / (a + N)^(2j+1)
    / ((2j+2)! / B_(2j+2)))``. There is no closed form of the derivative in s, so JAX
    differentiates this composition instead of ``lax.zeta`` (which has no derivative): the
    JVP's primal output is this approximation too. (``zeta`` has checked q.)"""
    s, a = promote_args_inexact("zeta", x, q)
    dtype = a.dtype.type
    n = m = dtype(8) if a.dtype == np.float32 else dtype(16)  # (NumPy scalars: strong types)
    s_, a_ = jnp.expand_dims(s, -1), jnp.expand_dims(a, -1)
    k = jnp.expand_dims(np.arange(n, dtype=n.dtype), tuple(range(a.ndim)))
    head = jnp.sum((a_ + k) ** -s_, -1)
    integral = lax.div((a + n) ** (dtype(1) - s), s - dtype(1))
    first_term = (a + n) ** -s
    j = jnp.expand_dims(np.arange(2 * m, dtype=m.dtype), tuple(range(s.ndim)))
    ratios = jnp.cumprod((s_ + j) / (a_ + n), -1)[..., ::2]
    ratios = jnp.clip(ratios, max=jnp.finfo(dtype).max)
    coefficients = np.expand_dims(np.array(_ZETA_SERIES_COEFFICIENTS[:ratios.shape[-1]], dtype),
                                  tuple(range(a.ndim)))
    tail = first_term * (dtype(0.5) + (ratios / coefficients).sum(-1))
    return head + integral + tail


zeta.defjvp(functools.partial(jvp, _zeta_series))


def polygamma(n, x):
    """The n-th derivative of digamma; ``n`` must be of an integer type (as in JAX)."""
    if not np.issubdtype(jnp.asarray(n).dtype, np.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{jnp.asarray(n).dtype}.")
    n, x = promote_args_inexact("polygamma", n, x)
    return lax.polygamma(n, x)


@custom_jvp
def _xlogx(x):
    """``x log x`` for x >= 0 (0 at 0), with JAX's derivative ``log x + 1``: -inf at 0."""
    safe = jnp.where(x > 0, x, jnp.ones_like(x))  # NaN stays NaN: NaN * log(1)
    return jnp.where(x == 0, jnp.zeros_like(x), x * lax.log(safe))


_xlogx.defjvps(lambda x_dot, out, x: x_dot * (lax.log(x) + 1))


def entr(x):
    """``-x log x``: 0 at 0, -inf for x < 0. Its derivative is +inf at 0, as JAX's."""
    x, = promote_args_inexact("entr", x)
    return jnp.where(x < 0, jnp.full_like(x, -np.inf), -_xlogx(x))


def rel_entr(p, q):
    """``p log(p / q)``: 0 where p = 0 and q >= 0, +inf where p or q is negative or only q is
    0."""
    p, q = promote_args_inexact("rel_entr", p, q)
    both = (p > 0) & (q > 0)
    safe_p, safe_q = jnp.where(both, p, 1), jnp.where(both, q, 1)
    log_val = lax.sub(lax.log(safe_p), lax.log(safe_q))
    out = jnp.where(both, safe_p * log_val, jnp.full_like(p, np.inf))
    return jnp.where((p == 0) & (q >= 0), jnp.zeros_like(out), out)


def kl_div(p, q):
    """``p log(p / q) - p + q``, with ``rel_entr``'s conventions."""
    p, q = promote_args_inexact("kl_div", p, q)
    return rel_entr(p, q) - p + q


def _boxcox(log_fn, name, x, lmbda):
    x, lmbda = promote_args_inexact(name, x, lmbda)
    log_x = log_fn(x)
    safe_lmbda = jnp.where(lmbda == 0, jnp.ones_like(lmbda), lmbda)
    return jnp.where(lmbda == 0, log_x, jnp.expm1(safe_lmbda * log_x) / safe_lmbda)


def boxcox(x, lmbda):
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log x`` at lmbda = 0)."""
    return _boxcox(jnp.log, "boxcox", x, lmbda)


def boxcox1p(x, lmbda):
    """The Box-Cox transform of ``1 + x``, accurate for small x."""
    return _boxcox(jnp.log1p, "boxcox1p", x, lmbda)


_ERFCX_TERMS = 60  # of the continued fraction: enough for x >= 2 in float64


@half_precision_in_float32
def erfcx(x):
    """The scaled complementary error function ``exp(x**2) erfc(x)``.

    Below 2 that product itself; from 2 up Laplace's continued fraction
    ``1/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))``, which neither overflows nor
    underflows (``erfc`` alone underflows near x = 9 in float32).
    """
    x, = promote_args_inexact("erfcx", x)
    small = x < 2
    direct = lax.exp(x * x) * lax.erfc(jnp.where(small, x, 0.0))
    big = jnp.where(small, 2.0, x).astype(x.dtype)
    fraction = big
    for k in range(_ERFCX_TERMS, 0, -1):
        fraction = big + (k / 2) / fraction
    tail = np.array(1 / np.sqrt(np.pi), x.dtype) / fraction
    tail = jnp.where(jnp.isinf(x), jnp.zeros_like(x), tail)
    return jnp.where(small, direct, tail)

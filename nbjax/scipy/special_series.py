"""Series and recurrences of ``jax.scipy.special``: the Bernoulli numbers, the Bessel
functions J_0..J_v, Kummer's and Gauss's hypergeometric functions, Owen's T function and the
spherical harmonics.

All are jnp/lax compositions over a fixed number of steps (a ``fori_loop`` where the steps are
many), so jit, vmap and differentiation (JAX differentiates these through the composition
too) come from the operations. The hypergeometric series are taken, after a transformation
where it helps (Kummer's ``M(a, b, x) = e^x M(b-a, b, -x)``, Pfaff's for 2F1 at x < 0), where
their terms do not cancel.
"""

import fractions
import operator

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..numpy.util import promote_args_inexact

__all__ = ["bernoulli", "bessel_jn", "hyp1f1", "hyp2f1", "owens_t", "sph_harm_y"]


def bernoulli(n):
    """The Bernoulli numbers ``B_0 .. B_n`` (with ``B_1 = -1/2``), rounded to the default
    float type."""
    n = operator.index(n)
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    return jnp.array([float(b) for b in bernoulli_fractions(n)])


def bernoulli_fractions(n):
    """The Bernoulli numbers ``B_0 .. B_n`` (with ``B_1 = -1/2``), exact: fractions from the
    Akiyama-Tanigawa algorithm."""
    numbers, row = [], []
    for m in range(n + 1):
        row.append(fractions.Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        numbers.append(row[0])  # the algorithm gives B_1 = +1/2
    if n >= 1:
        numbers[1] = -numbers[1]
    return numbers


# --- Bessel functions of the first kind -----------------------------------------------------------

def bessel_jn(z, *, v, n_iter=50):
    """The Bessel functions ``J_0(z) .. J_v(z)``, stacked on a new leading axis.

    Miller's backward recurrence ``J_{k-1} = (2k / z) J_k - J_{k+1}`` from ``k = max(n_iter,
    v + 1)``, normalised by ``J_0 + 2 sum_k J_2k = 1``; every step rescales to keep the values
    in range. As in JAX, accurate while |z| stays well below ``n_iter``.
    """
    v, n_iter = operator.index(v), operator.index(n_iter)
    z, = promote_args_inexact("bessel_jn", z)
    az = jnp.abs(z)
    safe = jnp.where(az == 0, 1.0, az)
    start = max(n_iter, v + 1)
    upper, current = jnp.zeros_like(z), jnp.ones_like(z)
    norm = current * (2 if start % 2 == 0 else 0)
    kept = {}
    for k in range(start, 0, -1):
        lower = (2 * k / safe) * current - upper
        scale = 1 / jnp.where(lower == 0, 1.0, jnp.abs(lower))
        upper, current, norm = current * scale, lower * scale, norm * scale
        kept = {i: value * scale for i, value in kept.items()}
        if k - 1 <= v:
            kept[k - 1] = current
        if (k - 1) % 2 == 0:
            norm = norm + (2 if k > 1 else 1) * current
    out = []
    for i in range(v + 1):
        value = kept[i] / norm
        value = jnp.where(z < 0, (-1) ** i * value, value)
        out.append(jnp.where(az == 0, float(i == 0), value))
    return jnp.stack(out)


# --- hypergeometric functions ---------------------------------------------------------------------

_HYP1F1_TERMS = 400  # for a, b, x up to ~30 (JAX's tested range): the terms fall below rounding
_HYP2F1_TERMS = 500  # for |x| <= 0.9 after Pfaff's transformation


def _hypergeometric_series(numerators, denominator, x, terms):
    """``sum_k prod_i (a_i)_k / (c)_k x^k / k!`` over ``terms`` terms."""
    def body(k, carry):
        term, total = carry
        k = k.astype(x.dtype)
        ratio = x / ((denominator + k) * (k + 1))
        for a in numerators:
            ratio = ratio * (a + k)
        term = term * ratio
        return term, total + term
    one = jnp.ones_like(x)
    return lax.fori_loop(0, terms, body, (one, one))[1]


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function ``M(a, b, x) = sum_k (a)_k / (b)_k x^k / k!``;
    for x < 0 through Kummer's transformation ``e^x M(b - a, b, -x)``, whose terms keep their
    sign once k > a - b."""
    a, b, x = jnp.broadcast_arrays(*promote_args_inexact("hyp1f1", a, b, x))
    negative = x < 0
    series = _hypergeometric_series([jnp.where(negative, b - a, a)], b, jnp.abs(x),
                                    _HYP1F1_TERMS)
    return jnp.where(negative, jnp.exp(x), 1.0) * series


def _gauss_at_one(a, b, c):
    """``2F1(a, b; c; 1) = Gamma(c) Gamma(c-a-b) / (Gamma(c-a) Gamma(c-b))`` for c > a + b,
    +inf otherwise."""
    excess = c - a - b
    safe = jnp.where(excess > 0, excess, 1.0)
    sign = _gammasgn(c) * _gammasgn(safe) * _gammasgn(c - a) * _gammasgn(c - b)
    log_value = (lax.lgamma(c) + lax.lgamma(safe) - lax.lgamma(c - a) - lax.lgamma(c - b))
    return jnp.where(excess > 0, sign * jnp.exp(log_value), jnp.full_like(c, np.inf))


def _gammasgn(x):
    return jnp.where((x > 0) | (jnp.fmod(jnp.floor(x), 2) != 0), 1.0, -1.0)


def hyp2f1(a, b, c, x):
    """Gauss's hypergeometric function ``sum_k (a)_k (b)_k / (c)_k x^k / k!`` for x <= 1: the
    series for 0 <= x < 1, Pfaff's ``(1-x)^-a 2F1(a, c-b; c; x / (x-1))`` for x < 0, Gauss's
    sum at x = 1. Converges slowly as the (transformed) argument nears 1; NaN for x > 1."""
    a, b, c, x = jnp.broadcast_arrays(*promote_args_inexact("hyp2f1", a, b, c, x))
    negative = x < 0
    inside = jnp.where((x < 1) & ~jnp.isnan(x), x, 0.0)
    arg = jnp.where(negative, inside / (inside - 1), inside)
    series = _hypergeometric_series([a, jnp.where(negative, c - b, b)], c, arg, _HYP2F1_TERMS)
    out = jnp.where(negative, jnp.exp(-a * jnp.log1p(-inside)), 1.0) * series
    out = jnp.where(x == 1, _gauss_at_one(a, b, c), out)
    return jnp.where((x > 1) | jnp.isnan(x), jnp.full_like(x, np.nan), out)


# --- Owen's T function ----------------------------------------------------------------------------

_LEGENDRE_NODES, _LEGENDRE_WEIGHTS = np.polynomial.legendre.leggauss(48)
_OWENS_NODES = [float(v) for v in (_LEGENDRE_NODES + 1) / 2]  # on [0, 1]
_OWENS_WEIGHTS = [float(v) for v in _LEGENDRE_WEIGHTS / 2]


def _owens_t_quadrature(h, a):
    """``T(h, a) = a / (2 pi) int_0^1 exp(-h^2 (1 + a^2 t^2) / 2) / (1 + a^2 t^2) dt`` by
    Gauss-Legendre quadrature, for 0 <= a <= 1 (a smooth integrand)."""
    total = jnp.zeros_like(h)
    for t, weight in zip(_OWENS_NODES, _OWENS_WEIGHTS):
        q = 1 + (a * t) ** 2
        total = total + weight * jnp.exp(-0.5 * h * h * q) / q
    return a * total / (2 * np.pi)


def _upper_tail(y):
    """The standard normal upper tail ``Q(y) = erfc(y / sqrt 2) / 2``."""
    return 0.5 * lax.erfc(y / np.sqrt(2))


def owens_t(h, a):
    """Owen's T function ``T(h, a) = 1 / (2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2)
    dx``, even in h and odd in a. For |a| > 1, ``T(h, a) = Q(h) / 2 + Q(ah) / 2 - Q(h) Q(ah)
    - T(ah, 1/a)`` (Q the upper normal tail) brings a into [0, 1]."""
    h, a = jnp.broadcast_arrays(*promote_args_inexact("owens_t", h, a))
    ah, aa = jnp.abs(h), jnp.abs(a)
    big = aa > 1
    inverse = 1 / jnp.where(big, aa, 1.0)
    scaled = jnp.where(big, ah * aa, ah)
    scaled = jnp.where(h == 0, 0.0, scaled)  # not inf * 0: h == 0 is taken apart below
    inner = _owens_t_quadrature(scaled, jnp.where(big, inverse, aa))
    q_h, q_ah = _upper_tail(ah), _upper_tail(scaled)
    outer = 0.5 * q_h + 0.5 * q_ah - q_h * q_ah - inner
    out = jnp.where(big, outer, inner)
    out = jnp.where(h == 0, jnp.arctan(aa) / (2 * np.pi), out)
    return jnp.where(a < 0, -out, out)


# --- spherical harmonics --------------------------------------------------------------------------

def _normalized_legendre(n, m, x, n_max):
    """``sqrt((2n+1)/(4 pi) (n-m)!/(n+m)!) P_n^m(x)`` for 0 <= m (element-wise) and n <= n_max
    (0 where n < m), with the Condon-Shortley phase, by the recurrences in n and m of the
    normalised functions (which do not overflow)."""
    sin = jnp.sqrt((1 - x) * (1 + x))
    diagonal = jnp.full_like(x, 1 / np.sqrt(4 * np.pi))
    for k in range(1, n_max + 1):
        diagonal = jnp.where(k <= m, -np.sqrt((2 * k + 1) / (2 * k)) * sin * diagonal, diagonal)
    out = jnp.where(n == m, diagonal, 0.0)
    previous, current = diagonal, jnp.sqrt(2 * m + 3) * x * diagonal
    out = jnp.where(n == m + 1, current, out)

    def factor(l):
        return jnp.sqrt((4 * l * l - 1) / (l * l - m * m))
    for j in range(2, n_max + 1):
        l = m + j
        previous, current = current, factor(l) * (x * current - previous / factor(l - 1))
        out = jnp.where(n == l, current, out)
    return out


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """The spherical harmonic ``Y_n^m(theta, phi)`` of degree n and order m (integers, 0 where
    |m| > n) at polar angle ``theta`` and azimuth ``phi``, as ``scipy.special.sph_harm_y``.

    ``n_max``, the largest degree, must be a Python int under jit; by default ``max(n)``.
    """
    if diff_n is not None:
        raise NotImplementedError(
            "The 'diff_n' argument to nbjax.scipy.special.sph_harm_y is not supported.")
    if n_max is None:
        n_max = int(np.max(np.asarray(n)))
    theta, phi = promote_args_inexact("sph_harm_y", theta, phi)
    n, m, theta, phi = jnp.broadcast_arrays(n, m, theta, phi)
    n, m = n.astype(theta.dtype), m.astype(theta.dtype)
    am = jnp.abs(m)
    value = _normalized_legendre(n, am, jnp.cos(theta), n_max)
    odd = jnp.fmod(am, 2) == 1
    value = jnp.where((m < 0) & odd, -value, value)
    return lax.complex(value * jnp.cos(m * phi), value * jnp.sin(m * phi))

"""``nbjax.scipy.stats.poisson``: the Poisson distribution with mean ``mu``, as
``jax.scipy.stats.poisson``; the CDF is the regularized upper incomplete gamma function
``Q(floor(k - loc) + 1, mu)``.

The rules at the edges are JAX's: ``logpmf`` is ``-inf`` below ``loc`` and where ``k``
itself (not ``k - loc``) is not an integer, so a non-integer ``loc`` gives the formula's
continuous extension at integer ``k`` (SciPy: mass 0), and a NaN ``k`` gives ``-inf``;
``cdf`` is 0 below ``loc`` and NaN at a NaN ``k``. ``entropy`` is NaN for ``mu < 0``."""

import math

from ... import numpy as jnp
from ...numpy.util import promote_args_inexact
from .. import special
from ._family import located_discrete

# entropy: below _DIRECT_MAX the sum -sum_k p_k log p_k over a window of _WINDOW terms around
# mu (wide enough there: +-15 standard deviations); above, the asymptotic expansion, whose
# first neglected term is O(mu^-4), under 1e-12 there.
_DIRECT_MAX = 1000.0
_WINDOW = 1000


def _logpmf(k, mu, loc):
    x = k - loc
    mass = special.xlogy(x, mu) - special.gammaln(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), -jnp.inf, mass)


def _cdf(k, mu, loc):
    x = k - loc
    return jnp.where(x < 0, jnp.zeros_like(x), special.gammaincc(jnp.floor(1 + x), mu))


_fns = located_discrete("poisson", ("mu",), _logpmf, cdf=_cdf)
globals().update(_fns)
__all__ = sorted(_fns) + ["entropy"]


def _entropy_sum(mu):
    start = jnp.maximum(jnp.floor(mu) - _WINDOW // 2, 0)
    k = start[..., None] + jnp.arange(_WINDOW, dtype=mu.dtype)
    log_p = _logpmf(k, mu[..., None], 0)
    return -jnp.sum(jnp.where(jnp.isfinite(log_p), jnp.exp(log_p) * log_p, 0), axis=-1)


def _entropy_asymptotic(mu):
    return (0.5 * jnp.log(2 * math.pi * math.e * mu) - 1 / (12 * mu) - 1 / (24 * mu ** 2)
            - 19 / (360 * mu ** 3))


def entropy(mu, loc=0):
    """The Shannon entropy ``-sum_k p_k log p_k`` (``loc`` shifts, so it does not matter)."""
    mu, loc = promote_args_inexact("poisson.entropy", mu, loc)
    mu = jnp.broadcast_to(mu, jnp.broadcast_shapes(mu.shape, loc.shape))
    small = mu < _DIRECT_MAX
    direct = _entropy_sum(jnp.where(small, mu, 1))
    out = jnp.where(small, direct, _entropy_asymptotic(jnp.where(small, _DIRECT_MAX, mu)))
    return jnp.where(mu < 0, jnp.nan, out)

"""``nbjax.scipy.stats.gamma``: the gamma distribution with shape ``a``, density
``z^(a-1) exp(-z) / (Gamma(a) scale)`` on ``x >= loc``, as ``jax.scipy.stats.gamma``. The CDF
is the regularized incomplete gamma function.

The rules at the edges are JAX's: ``logpdf`` tests ``x >= loc`` (NaN ``x`` and a point below
``loc`` both give ``-inf``); ``cdf`` clamps ``z`` to ``[0, inf]`` and ``sf`` gives 1 below
0, so NaN passes through both; ``a = inf`` at ``z = 0`` gives ``cdf`` 0 and ``sf`` 1."""

from ... import numpy as jnp
from .. import special
from ._family import located_family


def regularized(a, z, upper):
    """``gammainc(a, z)`` (``gammaincc`` when ``upper``) with the edge values of JAX's
    ``igamma``, where ``special``'s differ: NaN for ``z < 0``, ``a < 0``, ``a = z = 0``; at
    ``z = 0`` 0, at ``z = inf`` 1 (upper: the complements); for ``a = 0``, NaN below
    ``z = 1`` and 1 from there (upper: 0 for all ``z > 0``); for ``a = inf``, NaN at
    ``1 <= z < inf`` and 0 (upper: 1) below ``z = 1``. Shared with ``chi2``."""
    fn = special.gammaincc if upper else special.gammainc
    lower = jnp.where(z == jnp.inf, jnp.ones_like(z), jnp.zeros_like(z))
    edge = (z == 0) | (z == jnp.inf) | (a == jnp.inf) & (z < 1)
    value = jnp.where(edge, 1 - lower if upper else lower, fn(jnp.where(edge, 1, a), z))
    a_zero = (a == 0) & (z > 0)
    value = jnp.where(a_zero, 0 if upper else 1, value)
    nan = (jnp.isnan(a) | jnp.isnan(z) | (z < 0) | (a < 0) | (a == 0) & (z == 0)
           | (a == jnp.inf) & (z >= 1) & (z < jnp.inf))
    if not upper:
        nan = nan | a_zero & (z < 1)
    return jnp.where(nan, jnp.nan, value)


def _logpdf(x, a, loc, scale):
    ok = x >= loc
    z = jnp.where(ok, (x - loc) / scale, 1)
    log_probs = special.xlogy(a - 1, z) - z - (special.gammaln(a) + jnp.log(scale))
    return jnp.where(ok, log_probs, -jnp.inf)


def _cdf(x, a, loc, scale):
    return regularized(a, jnp.clip((x - loc) / scale, 0, jnp.inf), False)


def _sf(x, a, loc, scale):
    z = (x - loc) / scale
    return jnp.where(z < 0, jnp.ones_like(z), regularized(a, z, True))


_fns = located_family("gamma", ("a",), _logpdf, _cdf, _sf)
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.beta``: the beta distribution on [0, 1], density
``z^(a-1) (1-z)^(b-1) / B(a, b)``, as ``jax.scipy.stats.beta``. The CDF is the regularized
incomplete beta function; the survival function is its mirror ``I_{1-z}(b, a)``."""

from ... import numpy as jnp
from .. import special
from ._family import continuous


def _logpdf(z, a, b):
    density = special.xlogy(a - 1, z) + special.xlog1py(b - 1, -z) - special.betaln(a, b)
    return jnp.where((z >= 0) & (z <= 1), density, -jnp.inf)


def _cdf(z, a, b):
    return special.betainc(a, b, jnp.clip(z, 0, 1))


def _sf(z, a, b):
    return special.betainc(b, a, jnp.clip(1 - z, 0, 1))


_fns = continuous("beta", ("a", "b"), logpdf=_logpdf, cdf=_cdf, sf=_sf,
                  logcdf=lambda z, a, b: jnp.log(_cdf(z, a, b)),
                  logsf=lambda z, a, b: jnp.log(_sf(z, a, b)))
globals().update(_fns)
__all__ = sorted(_fns)

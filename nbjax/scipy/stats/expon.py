"""``nbjax.scipy.stats.expon``: the exponential distribution, density ``exp(-z)`` on
``z >= 0``, as ``jax.scipy.stats.expon``."""

from ... import numpy as jnp
from ._family import continuous

_fns = continuous(
    "expon",
    logpdf=lambda z: jnp.where(z >= 0, -z, -jnp.inf),
    cdf=lambda z: jnp.where(z >= 0, -jnp.expm1(-z), 0),
    logcdf=lambda z: jnp.where(z >= 0, jnp.log(-jnp.expm1(-z)), -jnp.inf),
    sf=lambda z: jnp.where(z >= 0, jnp.exp(-z), 1),
    logsf=lambda z: jnp.where(z >= 0, -z, 0),
    ppf=lambda q: -jnp.log1p(-q))
globals().update(_fns)
__all__ = sorted(_fns)

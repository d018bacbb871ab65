"""``nbjax.scipy.stats.gumbel_r``: the right-skewed Gumbel distribution, CDF
``exp(-exp(-z))``, as ``jax.scipy.stats.gumbel_r``."""

from ... import numpy as jnp
from ._family import continuous

_fns = continuous(
    "gumbel_r",
    logpdf=lambda z: -z - jnp.exp(-z),
    cdf=lambda z: jnp.exp(-jnp.exp(-z)),
    logcdf=lambda z: -jnp.exp(-z),
    sf=lambda z: -jnp.expm1(-jnp.exp(-z)),
    logsf=lambda z: jnp.log(-jnp.expm1(-jnp.exp(-z))),
    ppf=lambda q: -jnp.log(-jnp.log(q)))
globals().update(_fns)
__all__ = sorted(_fns)

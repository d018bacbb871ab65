"""``nbjax.scipy.stats.uniform``: the uniform distribution on ``[loc, loc + scale]``, as
``jax.scipy.stats.uniform``."""

from ... import numpy as jnp
from ._family import continuous

_fns = continuous(
    "uniform",
    logpdf=lambda z: jnp.where((z >= 0) & (z <= 1), jnp.zeros_like(z), -jnp.inf),
    cdf=lambda z: jnp.clip(z, 0, 1),
    ppf=lambda q: q)
globals().update(_fns)
__all__ = sorted(_fns)

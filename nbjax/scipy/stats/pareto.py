"""``nbjax.scipy.stats.pareto``: the Pareto distribution with shape ``b``, survival function
``z^-b`` on ``z >= 1``, as ``jax.scipy.stats.pareto``."""

from ... import numpy as jnp
from ._family import continuous


def _in_support(fn, outside):
    """``fn(log z, b)`` on the support ``z >= 1``, ``outside`` below it."""
    return lambda z, b: jnp.where(z >= 1, fn(jnp.log(z), b), outside)


_fns = continuous(
    "pareto", ("b",),
    logpdf=_in_support(lambda log_z, b: jnp.log(b) - (b + 1) * log_z, -jnp.inf),
    cdf=_in_support(lambda log_z, b: -jnp.expm1(-b * log_z), 0),
    logcdf=_in_support(lambda log_z, b: jnp.log(-jnp.expm1(-b * log_z)), -jnp.inf),
    sf=_in_support(lambda log_z, b: jnp.exp(-b * log_z), 1),
    logsf=_in_support(lambda log_z, b: -b * log_z, 0),
    ppf=lambda q, b: jnp.exp(-jnp.log1p(-q) / b))
globals().update(_fns)
__all__ = sorted(_fns)

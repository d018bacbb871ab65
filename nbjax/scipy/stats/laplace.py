"""``nbjax.scipy.stats.laplace``: the Laplace distribution, density ``exp(-|z|) / 2``, as
``jax.scipy.stats.laplace``."""

import math

from ... import numpy as jnp
from ._family import continuous


def _cdf(z):
    """``exp(z) / 2`` below 0, ``1 - exp(-z) / 2`` above: the tail term never overflows."""
    half_tail = 0.5 * jnp.exp(-jnp.abs(z))
    return jnp.where(z < 0, half_tail, 1 - half_tail)


_fns = continuous("laplace", logpdf=lambda z: -math.log(2) - jnp.abs(z), cdf=_cdf)
globals().update(_fns)
__all__ = sorted(_fns)

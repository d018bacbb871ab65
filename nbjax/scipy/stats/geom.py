"""``nbjax.scipy.stats.geom``: the geometric distribution, the number ``k >= 1`` of trials
up to the first success of probability ``p``, as ``jax.scipy.stats.geom``."""

from ... import numpy as jnp
from .. import special
from ._discrete import between
from ._family import discrete

_fns = discrete("geom", ("p",), logpmf=lambda k, p: between(
    k, 1, jnp.inf, special.xlog1py(k - 1, -p) + jnp.log(p)))
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.nbinom``: the negative binomial distribution, ``k`` failures before
the ``n``-th success of probability ``p``, as ``jax.scipy.stats.nbinom``."""

from ... import numpy as jnp
from .. import special
from ._discrete import between
from ._family import discrete


def _logpmf(k, n, p):
    mass = (special.gammaln(k + n) - special.gammaln(k + 1) - special.gammaln(n)
            + special.xlogy(n, p) + special.xlog1py(k, -p))
    return between(k, 0, jnp.inf, mass)


_fns = discrete("nbinom", ("n", "p"), logpmf=_logpmf)
globals().update(_fns)
__all__ = sorted(_fns)

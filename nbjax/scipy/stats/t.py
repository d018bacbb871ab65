"""``nbjax.scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom, as
``jax.scipy.stats.t``."""

import math

from ... import numpy as jnp
from .. import special
from ._family import continuous


def _logpdf(z, df):
    """``log Gamma((df+1)/2) - log Gamma(df/2) - log(pi df) / 2
    - (df+1)/2 log(1 + z^2/df)``."""
    half = 0.5 * (df + 1)
    return (special.gammaln(half) - special.gammaln(0.5 * df) - 0.5 * jnp.log(math.pi * df)
            - half * jnp.log1p(z * z / df))


_fns = continuous("t", ("df",), logpdf=_logpdf)
globals().update(_fns)
__all__ = sorted(_fns)

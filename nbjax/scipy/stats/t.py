"""``nbjax.scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom, as
``jax.scipy.stats.t``. As JAX (and ``norm``), the density is written in ``scale**2``, so a
negative ``scale`` acts as ``|scale|`` (SciPy: NaN)."""

import math

from ... import numpy as jnp
from .. import special
from ._family import located


def _logpdf(x, df, loc, scale):
    """``log Gamma((df+1)/2) - log Gamma(df/2) - log(pi df scale^2) / 2
    - (df+1)/2 log(1 + z^2/df)``."""
    z = (x - loc) / scale
    half = 0.5 * (df + 1)
    return (special.gammaln(half) - special.gammaln(0.5 * df)
            - 0.5 * jnp.log(math.pi * df * (scale * scale)) - half * jnp.log1p(z * z / df))


_fns = {"logpdf": located("t", "logpdf", ("df",), _logpdf),
        "pdf": located("t", "pdf", ("df",), lambda *args: jnp.exp(_logpdf(*args)))}
globals().update(_fns)
__all__ = sorted(_fns)

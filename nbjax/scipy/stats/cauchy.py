"""``nbjax.scipy.stats.cauchy``: the Cauchy distribution, density ``1 / (pi (1 + z^2))``, as
``jax.scipy.stats.cauchy``. The CDF is ``arctan2(1, -z) / pi``, which keeps its relative
accuracy in the far lower tail where ``1/2 + arctan(z) / pi`` cancels; the quantile keeps
it in both tails too (JAX's ``tan(pi (q - 1/2))`` is 3% off at ``q = 1e-6`` in float32, and
finite at 0 and 1)."""

import math

from ... import numpy as jnp
from ._family import continuous


def _standard_quantile(q):
    """``tan(pi (q - 1/2))``. ``q - 1/2`` is exact for ``q`` in [1/4, 1] but rounds away a
    small ``q``'s digits: below 1/4 it is ``-1 / tan(pi q)`` (-inf at 0); above 3/4, where
    the tangent near pi/2 is ill-conditioned, ``1 / tan(pi (1 - q))`` (+inf at 1)."""
    low = -1 / jnp.tan(math.pi * q)
    high = 1 / jnp.tan(math.pi * (1 - q))
    return jnp.where(q < 0.25, low, jnp.where(q > 0.75, high, jnp.tan(math.pi * (q - 0.5))))


_fns = continuous(
    "cauchy",
    logpdf=lambda z: -math.log(math.pi) - jnp.log1p(z * z),
    cdf=lambda z: jnp.arctan2(1, -z) / math.pi,
    logcdf=lambda z: jnp.log(jnp.arctan2(1, -z) / math.pi),
    sf=lambda z: jnp.arctan2(1, z) / math.pi,
    logsf=lambda z: jnp.log(jnp.arctan2(1, z) / math.pi),
    ppf=_standard_quantile,
    isf=lambda q: -_standard_quantile(q))
globals().update(_fns)
__all__ = sorted(_fns)

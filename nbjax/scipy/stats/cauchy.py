"""``nbjax.scipy.stats.cauchy``: the Cauchy distribution, density ``1 / (pi (1 + z^2))``, as
``jax.scipy.stats.cauchy``. The CDF is ``arctan2(1, -z) / pi``, which keeps its relative
accuracy in the far lower tail where ``1/2 + arctan(z) / pi`` cancels."""

import math

from ... import numpy as jnp
from ._family import continuous

_fns = continuous(
    "cauchy",
    logpdf=lambda z: -math.log(math.pi) - jnp.log1p(z * z),
    cdf=lambda z: jnp.arctan2(1, -z) / math.pi,
    logcdf=lambda z: jnp.log(jnp.arctan2(1, -z) / math.pi),
    sf=lambda z: jnp.arctan2(1, z) / math.pi,
    logsf=lambda z: jnp.log(jnp.arctan2(1, z) / math.pi),
    ppf=lambda q: jnp.tan(math.pi * (q - 0.5)),
    isf=lambda q: jnp.tan(math.pi * (0.5 - q)))
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.norm``: the normal distribution with mean ``loc`` and standard
deviation ``scale``, as ``jax.scipy.stats.norm``. The tails go through ``ndtr(-z)`` and
``log_ndtr`` rather than ``1 - cdf``, so they keep their relative accuracy."""

import math

from .. import special
from ._family import continuous

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

_fns = continuous(
    "norm",
    logpdf=lambda z: -0.5 * z * z - HALF_LOG_2PI,
    cdf=special.ndtr,
    logcdf=special.log_ndtr,
    sf=lambda z: special.ndtr(-z),
    logsf=lambda z: special.log_ndtr(-z),
    ppf=special.ndtri,
    isf=lambda q: -special.ndtri(q))
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.norm``: the normal distribution with mean ``loc`` and standard
deviation ``scale``, as ``jax.scipy.stats.norm``. The tails go through ``ndtr(-z)`` and
``log_ndtr`` rather than ``1 - cdf``, so they keep their relative accuracy.

The density is JAX's ``-(log(2 pi scale^2) + ((x - loc) / scale)^2) / 2``, which depends on
``scale`` only through its square: a negative ``scale`` gives the density of ``|scale|``, as
in JAX (SciPy: NaN). ``ppf`` and ``isf`` return the default float dtype whatever the input's
(float64 under x64), as JAX's ``jnp.asarray(..., float)`` does."""

import math

from ... import numpy as jnp
from .. import special
from ._family import continuous, located

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _logpdf(x, loc, scale):
    """JAX's form (in ``scale**2``), so that a negative ``scale`` acts as ``|scale|``."""
    scale_sq = scale * scale
    return -0.5 * (jnp.log(2 * math.pi * scale_sq) + (x - loc) ** 2 / scale_sq)


def _default_float(fn):
    """``fn``'s value in the default float dtype, as JAX's ``jnp.asarray(..., float)``."""
    def wrapped(*args, **kwargs):
        return jnp.asarray(fn(*args, **kwargs), float)
    wrapped.__name__ = wrapped.__qualname__ = fn.__name__
    wrapped.__signature__ = fn.__signature__
    wrapped.__doc__ = fn.__doc__
    return wrapped


_fns = continuous(
    "norm",
    cdf=special.ndtr,
    logcdf=special.log_ndtr,
    sf=lambda z: special.ndtr(-z),
    logsf=lambda z: special.log_ndtr(-z),
    ppf=special.ndtri,
    isf=lambda q: -special.ndtri(q))
_fns["logpdf"] = located("norm", "logpdf", (), _logpdf)
_fns["pdf"] = located("norm", "pdf", (), lambda x, loc, scale: jnp.exp(_logpdf(x, loc, scale)))
_fns["ppf"] = _default_float(_fns["ppf"])
_fns["isf"] = _default_float(_fns["isf"])
globals().update(_fns)
__all__ = sorted(_fns)

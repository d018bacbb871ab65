"""``nbjax.scipy.stats.norm``: the normal distribution with mean ``loc`` and standard
deviation ``scale``, as ``jax.scipy.stats.norm``. The tails go through ``ndtr(-z)`` and
``log_ndtr`` rather than ``1 - cdf``, so they keep their relative accuracy.

The density is JAX's ``-(log(2 pi scale^2) + ((x - loc) / scale)^2) / 2``, which depends on
``scale`` only through its square: a negative ``scale`` gives the density of ``|scale|``, as
in JAX (SciPy: NaN). ``ppf`` and ``isf`` return the default float dtype (float64 under
x64), as JAX's ``jnp.asarray(..., float)`` does, and refuse a ``q`` that is not float32 or
float64 as its ``ndtri`` does."""

import math

from ... import numpy as jnp
from .. import special
from ..special_integrals import float32_or_64
from ._family import continuous, located

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _logpdf(x, loc, scale):
    """JAX's form (in ``scale**2``), so that a negative ``scale`` acts as ``|scale|``."""
    scale_sq = scale * scale
    return -0.5 * (jnp.log(2 * math.pi * scale_sq) + (x - loc) ** 2 / scale_sq)


def _quantile(fn):
    """``fn`` (``ppf`` or ``isf``) as JAX's: ``ndtri`` takes ``q`` as given, so a ``q`` that is
    not float32 or float64 is its TypeError (the family would promote an integer first), and
    the value comes in the default float dtype (JAX's ``jnp.asarray(..., float)``)."""
    def wrapped(q, *args, **kwargs):
        float32_or_64(q)
        return jnp.asarray(fn(q, *args, **kwargs), float)
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
_fns["ppf"] = _quantile(_fns["ppf"])
_fns["isf"] = _quantile(_fns["isf"])
globals().update(_fns)
__all__ = sorted(_fns)

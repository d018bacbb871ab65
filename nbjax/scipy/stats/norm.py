"""``nbjax.scipy.stats.norm``: the normal distribution with mean ``loc`` and standard
deviation ``scale``, as ``jax.scipy.stats.norm``."""

import numpy as np

from ... import numpy as jnp
from ...numpy.util import promote_args_inexact
from .. import special

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def _standardize(name, x, loc, scale):
    x, loc, scale = promote_args_inexact(name, x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x, loc=0, scale=1):
    """``-z^2 / 2 - log(scale) - log(2 pi) / 2`` with ``z = (x - loc) / scale``."""
    z, scale = _standardize("norm.logpdf", x, loc, scale)
    return -0.5 * z * z - jnp.log(scale) - np.asarray(_HALF_LOG_2PI, z.dtype)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    z, _ = _standardize("norm.cdf", x, loc, scale)
    return special.ndtr(z)


def logcdf(x, loc=0, scale=1):
    z, _ = _standardize("norm.logcdf", x, loc, scale)
    return special.log_ndtr(z)


def sf(x, loc=0, scale=1):
    """The survival function ``1 - cdf``, as ``cdf`` of the mirrored point (no cancellation)."""
    z, _ = _standardize("norm.sf", x, loc, scale)
    return special.ndtr(-z)


def logsf(x, loc=0, scale=1):
    z, _ = _standardize("norm.logsf", x, loc, scale)
    return special.log_ndtr(-z)


def ppf(q, loc=0, scale=1):
    """The quantile function, the inverse of ``cdf``."""
    q, loc, scale = promote_args_inexact("norm.ppf", q, loc, scale)
    return loc + scale * special.ndtri(q)


def isf(q, loc=0, scale=1):
    """The inverse of ``sf``."""
    return ppf(1 - jnp.asarray(q), loc, scale)

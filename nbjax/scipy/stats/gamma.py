"""``nbjax.scipy.stats.gamma``: the gamma distribution with shape ``a``, density
``z^(a-1) exp(-z) / Gamma(a)`` on ``z >= 0``, as ``jax.scipy.stats.gamma``. The CDF is the
regularized incomplete gamma function."""

from ... import numpy as jnp
from .. import special
from ._family import continuous


def _logpdf(z, a):
    return jnp.where(z >= 0, special.xlogy(a - 1, z) - z - special.gammaln(a), -jnp.inf)


def _cdf(z, a):
    return special.gammainc(a, jnp.maximum(z, 0))


def _sf(z, a):
    return special.gammaincc(a, jnp.maximum(z, 0))


def _logcdf(z, a):
    return jnp.log(_cdf(z, a))


def _logsf(z, a):
    return jnp.log(_sf(z, a))


STANDARD = {"logpdf": _logpdf, "cdf": _cdf, "sf": _sf, "logcdf": _logcdf, "logsf": _logsf}
_fns = continuous("gamma", ("a",), **STANDARD)
globals().update(_fns)
__all__ = sorted(_fns)

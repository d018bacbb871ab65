"""``nbjax.scipy.stats.truncnorm``: the normal distribution truncated to ``[a, b]`` (in
standard units), as ``jax.scipy.stats.truncnorm``.

Everything is a log-difference of normal CDFs, ``log(Phi(hi) - Phi(lo))``, computed from
``log_ndtr`` on the side of zero where the CDFs are small (mirrored for an interval above
zero), so truncations far in a tail keep their accuracy.
"""

from ... import numpy as jnp
from .. import special
from ._family import continuous
from .norm import HALF_LOG_2PI


def _log_diff_exp(u, v):
    """``log(exp(u) - exp(v))`` for ``u >= v``."""
    return u + jnp.log(-jnp.expm1(v - u))


def _log_mass(lo, hi):
    """``log(Phi(hi) - Phi(lo))`` for ``lo <= hi``."""
    upper = _log_diff_exp(special.log_ndtr(-lo), special.log_ndtr(-hi))
    lower = _log_diff_exp(special.log_ndtr(hi), special.log_ndtr(lo))
    return jnp.where(lo >= 0, upper, lower)


def _logpdf(z, a, b):
    density = -0.5 * z * z - HALF_LOG_2PI - _log_mass(a, b)
    return jnp.where((z >= a) & (z <= b), density, -jnp.inf)


def _logcdf(z, a, b):
    return _log_mass(a, jnp.clip(z, a, b)) - _log_mass(a, b)


def _logsf(z, a, b):
    return _log_mass(jnp.clip(z, a, b), b) - _log_mass(a, b)


_fns = continuous("truncnorm", ("a", "b"), logpdf=_logpdf, logcdf=_logcdf, logsf=_logsf,
                  cdf=lambda z, a, b: jnp.exp(_logcdf(z, a, b)),
                  sf=lambda z, a, b: jnp.exp(_logsf(z, a, b)))
globals().update(_fns)
__all__ = sorted(_fns)

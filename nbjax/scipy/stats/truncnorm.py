"""``nbjax.scipy.stats.truncnorm``: the normal distribution truncated to ``[a, b]`` (in
standard units), as ``jax.scipy.stats.truncnorm``.

Everything is a log-difference of normal CDFs, ``log(Phi(hi) - Phi(lo))``, computed from
``log_ndtr`` on the side of zero where the CDFs are small (mirrored for an interval above
zero), so truncations far in a tail keep their accuracy.

The rules at the edges are JAX's: NaN for ``a >= b``; the density is ``norm``'s (so a negative
``scale`` acts as ``|scale|``); ``logcdf`` is 0 from ``b`` on, ``-inf`` up to ``a``, and near 0
``log1p(-sf)``; ``logsf(x, a, b, loc, scale)`` is ``logcdf(-x, -b, -a, -loc, scale)``. Unlike
JAX, a NaN standardised point or bound gives NaN in ``cdf``/``sf`` and their logs (JAX's
``select`` falls through to a probability there: ``cdf`` 1 at a NaN ``x``)."""

from ... import numpy as jnp
from .. import special
from ._family import located
from .norm import _logpdf as _norm_logpdf


def _log_diff_exp(u, v):
    """``log(exp(u) - exp(v))`` for ``u >= v``."""
    return u + jnp.log(-jnp.expm1(v - u))


def _log_mass(lo, hi):
    """``log(Phi(hi) - Phi(lo))`` for ``lo <= hi``."""
    upper = _log_diff_exp(special.log_ndtr(-lo), special.log_ndtr(-hi))
    lower = _log_diff_exp(special.log_ndtr(hi), special.log_ndtr(lo))
    return jnp.where(lo >= 0, upper, lower)


def _logpdf(x, a, b, loc, scale):
    z = (x - loc) / scale
    density = _norm_logpdf(x, loc, scale) - _log_mass(a, b)
    density = jnp.where((z < a) | (z > b), -jnp.inf, density)
    return jnp.where(a >= b, jnp.nan, density)


def _logcdf(x, a, b, loc, scale):
    z = (x - loc) / scale
    clipped, mass = jnp.clip(z, a, b), _log_mass(a, b)
    log_cdf = _log_mass(a, clipped) - mass
    log_sf = _log_mass(clipped, b) - mass
    near_one = jnp.where(log_cdf > -0.1, jnp.log1p(-jnp.exp(log_sf)), log_cdf)
    out = jnp.where(z >= b, jnp.zeros_like(z), jnp.where(z <= a, -jnp.inf, near_one))
    return jnp.where((a >= b) | jnp.isnan(z) | jnp.isnan(a) | jnp.isnan(b), jnp.nan, out)


def _logsf(x, a, b, loc, scale):
    return _logcdf(-x, -b, -a, -loc, scale)


_rules = {"logpdf": _logpdf, "logcdf": _logcdf, "logsf": _logsf}
_rules.update(pdf=lambda *args: jnp.exp(_logpdf(*args)),
              cdf=lambda *args: jnp.exp(_logcdf(*args)), sf=lambda *args: jnp.exp(_logsf(*args)))
_fns = {kind: located("truncnorm", kind, ("a", "b"), rule) for kind, rule in _rules.items()}
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.expon``: the exponential distribution, density ``exp(-z) / scale`` on
``x >= loc``, as ``jax.scipy.stats.expon``.

The rules are JAX's: the support test is ``x < loc`` (so NaN ``x`` falls through to the
formula and gives NaN, and a negative ``scale`` is not turned away but fed to the formula, as
in JAX, where SciPy says NaN); ``logcdf`` is ``log1p(-sf)``."""

from ... import numpy as jnp
from ._family import located


def _logpdf(x, loc, scale):
    return jnp.where(x < loc, -jnp.inf, -((x - loc) / scale + jnp.log(scale)))


def _logsf(x, loc, scale):
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), neg_z)


def _cdf(x, loc, scale):
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), -jnp.expm1(neg_z))


def _ppf(q, loc, scale):
    """NaN for ``q`` outside [0, 1]."""
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, loc - scale * jnp.log1p(-q))


_fns = {
    "logpdf": located("expon", "logpdf", (), _logpdf),
    "pdf": located("expon", "pdf", (), lambda x, loc, scale: jnp.exp(_logpdf(x, loc, scale))),
    "cdf": located("expon", "cdf", (), _cdf),
    "logcdf": located("expon", "logcdf", (),
                      lambda x, loc, scale: jnp.log1p(-jnp.exp(_logsf(x, loc, scale)))),
    "sf": located("expon", "sf", (), lambda x, loc, scale: jnp.exp(_logsf(x, loc, scale))),
    "logsf": located("expon", "logsf", (), _logsf),
    "ppf": located("expon", "ppf", (), _ppf),
}
globals().update(_fns)
__all__ = sorted(_fns)

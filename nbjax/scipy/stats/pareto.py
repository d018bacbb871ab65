"""``nbjax.scipy.stats.pareto``: the Pareto distribution with shape ``b``, survival function
``z^-b`` on ``z >= 1``, as ``jax.scipy.stats.pareto``.

The rules at the edges are JAX's: the support test is ``x < loc + scale`` (NaN ``x`` falls
through to the formula), and a negative ``scale`` is fed to the formula, as in JAX. Unlike
JAX, a negative ``b`` gives NaN (JAX's formula returns numbers there, such as a CDF below 0;
SciPy says NaN)."""

from ... import numpy as jnp
from ._family import located


def _located(fn, outside):
    """``fn(z, b, scale)`` at ``z = (x - loc) / scale`` on ``x >= loc + scale``, ``outside``
    below."""
    def rule(x, b, loc, scale):
        value = jnp.where(b < 0, jnp.nan, fn((x - loc) / scale, b, scale))
        return jnp.where(x < loc + scale, outside, value)
    return rule


_rules = {
    "logpdf": _located(lambda z, b, scale: -(jnp.log(scale / b) + (b + 1) * jnp.log(z)),
                       -jnp.inf),
    "cdf": _located(lambda z, b, scale: 1 - z ** -b, 0),
    "logcdf": _located(lambda z, b, scale: jnp.log1p(-(z ** -b)), -jnp.inf),
    "sf": _located(lambda z, b, scale: jnp.exp(-b * jnp.log(z)), 1),
    "logsf": _located(lambda z, b, scale: -b * jnp.log(z), 0),
}


def _ppf(q, b, loc, scale):
    value = jnp.where(b < 0, jnp.nan, loc + scale * (1 - q) ** (-1 / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, value)


_rules["pdf"] = lambda *args: jnp.exp(_rules["logpdf"](*args))
_rules["ppf"] = _ppf
_fns = {kind: located("pareto", kind, ("b",), rule) for kind, rule in _rules.items()}
globals().update(_fns)
__all__ = sorted(_fns)

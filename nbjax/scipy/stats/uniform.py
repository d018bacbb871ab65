"""``nbjax.scipy.stats.uniform``: the uniform distribution on ``[loc, loc + scale]``, as
``jax.scipy.stats.uniform``, with JAX's rules at the edges: ``logpdf`` is ``-log(scale)`` on
the closed interval (``inf`` at ``scale = 0``) and ``-inf`` off it (everywhere, for a negative
``scale``); ``cdf`` (never weakly typed) is 0 below ``loc``, 1 above ``loc + scale`` and 0
at a NaN ``x``; ``ppf`` is NaN for ``q`` outside [0, 1]."""

from ... import numpy as jnp
from ._family import located


def _logpdf(x, loc, scale):
    return jnp.where((x > loc + scale) | (x < loc), -jnp.inf, -jnp.log(scale))


def _cdf(x, loc, scale):
    inside = (x >= loc) & (x <= loc + scale)
    zero, one = jnp.array(0, x.dtype), jnp.array(1, x.dtype)  # (not weak, as in JAX)
    return jnp.where(x < loc, zero, jnp.where(x > loc + scale, one,
                                                jnp.where(inside, (x - loc) / scale, zero)))


def _ppf(q, loc, scale):
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, loc + scale * q)


_fns = {"logpdf": located("uniform", "logpdf", (), _logpdf),
        "pdf": located("uniform", "pdf", (), lambda *args: jnp.exp(_logpdf(*args))),
        "cdf": located("uniform", "cdf", (), _cdf),
        "ppf": located("uniform", "ppf", (), _ppf)}
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.wrapcauchy``: the wrapped Cauchy distribution on ``[0, 2 pi]`` with
shape ``c``, density ``(1 - c^2) / (2 pi (1 + c^2 - 2 c cos x))``, as
``jax.scipy.stats.wrapcauchy``."""

import math

from ... import numpy as jnp
from ...numpy.util import promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, c):
    """-inf outside ``[0, 2 pi]`` (NaN at NaN, as in SciPy; JAX: -inf); NaN unless
    ``0 < c < 1``, as in JAX and SciPy."""
    x, c = promote_args_inexact("wrapcauchy.logpdf", x, c)
    density = (jnp.log1p(-c * c) - math.log(2 * math.pi)
               - jnp.log(1 + c * c - 2 * c * jnp.cos(x)))
    inside = jnp.where((x < 0) | (x > 2 * math.pi), -jnp.inf, density)
    return jnp.where((c > 0) & (c < 1), inside, jnp.nan)


def pdf(x, c):
    return jnp.exp(logpdf(x, c))

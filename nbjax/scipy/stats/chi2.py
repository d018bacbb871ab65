"""``nbjax.scipy.stats.chi2``: the chi-squared distribution with ``df`` degrees of freedom,
the gamma distribution of shape ``df / 2`` and scale ``2 scale``, as
``jax.scipy.stats.chi2``.

The rules at the edges are JAX's: ``logpdf`` gives ``-inf`` for ``x < loc`` only (NaN
``x`` stays NaN), ``cdf`` and ``sf`` clamp ``(x - loc) / (2 scale)`` to ``[0, inf]``."""

import math

from ... import numpy as jnp
from .. import special
from ._family import located_family
from .gamma import regularized


def _logpdf(x, df, loc, scale):
    """JAX's density, except that the kernel is ``xlogy(df/2 - 1, y)``: at ``y = 0`` and
    ``df = 2`` JAX's ``0 * log(0)`` gives NaN where the density is ``1/2`` (SciPy)."""
    y = (x - loc) / scale
    half_df = df / 2
    kernel = special.xlogy(half_df - 1, y) - y / 2
    normalizer = -(special.gammaln(half_df) + math.log(2) * df / 2)
    return jnp.where(x < loc, -jnp.inf, normalizer - jnp.log(scale) + kernel)


def _z(x, loc, scale):
    return jnp.clip((x - loc) / (scale * 2), 0, jnp.inf)


def _cdf(x, df, loc, scale):
    return regularized(df / 2, _z(x, loc, scale), False)


def _sf(x, df, loc, scale):
    return regularized(df / 2, _z(x, loc, scale), True)


_fns = located_family("chi2", ("df",), _logpdf, _cdf, _sf)
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.beta``: the beta distribution on [loc, loc + scale], density
``z^(a-1) (1-z)^(b-1) / B(a, b)``, as ``jax.scipy.stats.beta``. The CDF is the regularized
incomplete beta function; the survival function is its mirror ``I_{1-z}(b, a)``.

The rules at the edges are JAX's: ``logpdf`` is ``-inf`` outside ``[loc, loc + scale]``,
then NaN wherever ``a <= 0``, ``b <= 0`` or ``scale <= 0``; ``cdf`` and ``sf`` clamp ``z`` to
``[0, 1]`` (NaN passes through) and check no parameter beyond what ``betainc`` does."""

from ... import numpy as jnp
from .. import special
from ._family import located_family


def _logpdf(x, a, b, loc, scale):
    z = (x - loc) / scale
    density = (special.xlogy(a - 1, z) + special.xlog1py(b - 1, -z) - special.betaln(a, b)
               - jnp.log(scale))
    density = jnp.where((x < loc) | (x > loc + scale), -jnp.inf, density)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), jnp.nan, density)


def _cdf(x, a, b, loc, scale):
    return special.betainc(a, b, jnp.clip((x - loc) / scale, 0, 1))


def _sf(x, a, b, loc, scale):
    return special.betainc(b, a, 1 - jnp.clip((x - loc) / scale, 0, 1))


_fns = located_family("beta", ("a", "b"), _logpdf, _cdf, _sf)
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.gumbel_l``: the left-skewed Gumbel distribution, the mirror image of
``gumbel_r`` (survival function ``exp(-exp(z))``), as ``jax.scipy.stats.gumbel_l``:
NaN unless ``scale > 0`` (``ppf`` excepted), and ``ppf`` NaN unless ``0 < q < 1`` (SciPy:
the ends of the support at 0 and 1)."""

from ... import numpy as jnp
from ._family import continuous

_fns = continuous(
    "gumbel_l", positive_scale=True, quantile_arg="p",
    logpdf=lambda z: z - jnp.exp(z),
    cdf=lambda z: -jnp.expm1(-jnp.exp(z)),
    logcdf=lambda z: jnp.log(-jnp.expm1(-jnp.exp(z))),
    sf=lambda z: jnp.exp(-jnp.exp(z)),
    logsf=lambda z: -jnp.exp(z),
    ppf=lambda q: jnp.log(-jnp.log1p(-q)))
globals().update(_fns)
__all__ = sorted(_fns)

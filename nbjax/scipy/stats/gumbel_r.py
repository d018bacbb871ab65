"""``nbjax.scipy.stats.gumbel_r``: the right-skewed Gumbel distribution, CDF
``exp(-exp(-z))``, as ``jax.scipy.stats.gumbel_r``:
NaN unless ``scale > 0`` (``ppf`` excepted), and ``ppf`` NaN unless ``0 < q < 1`` (SciPy:
the ends of the support at 0 and 1). ``sf`` goes through ``expm1``, where JAX's
``1 - exp(...)`` loses the upper tail."""

from ... import numpy as jnp
from ...nn import log1mexp
from ._family import continuous

_fns = continuous(
    "gumbel_r", positive_scale=True, quantile_arg="p",
    logpdf=lambda z: -z - jnp.exp(-z),
    cdf=lambda z: jnp.exp(-jnp.exp(-z)),
    logcdf=lambda z: -jnp.exp(-z),
    sf=lambda z: -jnp.expm1(-jnp.exp(-z)),
    logsf=lambda z: log1mexp(jnp.exp(-z)),
    ppf=lambda q: -jnp.log(-jnp.log(q)))
globals().update(_fns)
__all__ = sorted(_fns)

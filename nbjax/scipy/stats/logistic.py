"""``nbjax.scipy.stats.logistic``: the logistic distribution, CDF ``expit(z)``, as
``jax.scipy.stats.logistic``."""

from ... import numpy as jnp
from .. import special
from ._family import continuous


def _logpdf(z):
    """``log(expit(z) expit(-z))``, written in ``|z|`` so that neither term overflows."""
    a = jnp.abs(z)
    return -a - 2 * jnp.log1p(jnp.exp(-a))


_fns = continuous(
    "logistic", quantile_arg="x", logpdf=_logpdf, cdf=special.expit, sf=lambda z: special.expit(-z),
    ppf=special.logit, isf=lambda q: -special.logit(q))
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.gennorm``: the generalized normal distribution with shape ``beta``,
density ``beta / (2 Gamma(1/beta)) exp(-|x|^beta)``, as ``jax.scipy.stats.gennorm`` (which has
no ``loc`` or ``scale``)."""

import math

from ... import numpy as jnp
from ...numpy.util import promote_args_inexact
from .. import special

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, beta):
    x, beta = promote_args_inexact("gennorm.logpdf", x, beta)
    return jnp.log(beta) - math.log(2) - special.gammaln(1 / beta) - jnp.abs(x) ** beta


def pdf(x, beta):
    return jnp.exp(logpdf(x, beta))


def cdf(x, beta):
    """``(1 + sign(x) P(1/beta, |x|^beta)) / 2`` with ``P`` the regularized lower incomplete
    gamma function."""
    x, beta = promote_args_inexact("gennorm.cdf", x, beta)
    return 0.5 * (1 + jnp.sign(x) * special.gammainc(1 / beta, jnp.abs(x) ** beta))

"""``nbjax.scipy.stats.multivariate_normal``: the multivariate normal distribution, as
``jax.scipy.stats.multivariate_normal``.

The points run along the last axis of ``x``; ``mean`` and ``cov`` broadcast against them
(``cov`` a matrix, a vector of variances, or one variance for every component). With a
scalar ``mean`` each element of ``x`` is a one-dimensional point. The density comes from the
Cholesky factor ``L`` of ``cov``: ``-|L^-1 (x - mean)|^2 / 2 - log det L - d log(2 pi) / 2``.
"""

from ... import numpy as jnp
from ...lax import linalg as lax_linalg
from ...numpy.util import promote_dtypes_inexact
from .norm import HALF_LOG_2PI

__all__ = ["logpdf", "pdf"]


def _full_cov(cov, d):
    if cov.ndim == 0:
        return cov * jnp.eye(d, dtype=cov.dtype)
    if cov.ndim == 1:
        return jnp.diag(cov)
    return cov


def logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote_dtypes_inexact(*map(jnp.asarray, (x, mean, cov)))
    if mean.ndim == 0:  # univariate
        z = x - mean
        return -0.5 * z * z / cov - 0.5 * jnp.log(cov) - HALF_LOG_2PI
    d = mean.shape[-1]
    cov = _full_cov(cov, d)
    if cov.shape[-2:] != (d, d) or (x.ndim and x.shape[-1] != d):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    diff = x - mean
    batch = jnp.broadcast_shapes(diff.shape[:-1], cov.shape[:-2])
    factor = lax_linalg.cholesky(jnp.broadcast_to(cov, batch + (d, d)))
    y = lax_linalg.triangular_solve(factor, jnp.broadcast_to(diff, batch + (d,))[..., None],
                                    left_side=True, lower=True)[..., 0]
    log_det = jnp.sum(jnp.log(jnp.diagonal(factor, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * jnp.sum(y * y, axis=-1) - log_det - d * HALF_LOG_2PI


def pdf(x, mean, cov):
    return jnp.exp(logpdf(x, mean, cov))

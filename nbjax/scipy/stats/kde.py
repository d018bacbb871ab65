"""``nbjax.scipy.stats.gaussian_kde``: kernel density estimation with Gaussian kernels, as
``jax.scipy.stats.gaussian_kde`` (a pytree, so it can cross jit and vmap).

The estimate is the mixture ``sum_i w_i N(x; x_i, C)`` over the data points ``x_i`` with
kernel covariance ``C = factor^2 cov(data)``; ``factor`` is Scott's or Silverman's rule, a
number, or a function of the estimator. Integrals against Gaussians (and against another
estimator) are again Gaussian densities, evaluated in closed form.
"""

from ... import numpy as jnp
from ... import random
from ...core.pytree import register_pytree_node_class
from ...lax import linalg as lax_linalg
from ...numpy.util import promote_dtypes_inexact
from .. import special
from .norm import HALF_LOG_2PI

__all__ = ["gaussian_kde"]


def _log_gaussian(diff, cov):
    """``log N(diff; 0, cov)`` for points along the first axis of ``diff`` (d, ...)."""
    factor = lax_linalg.cholesky(cov)
    d = cov.shape[-1]
    flat = diff.reshape(d, -1)
    y = lax_linalg.triangular_solve(factor, flat, left_side=True, lower=True)
    log_det = jnp.sum(jnp.log(jnp.diagonal(factor)))
    out = -0.5 * jnp.sum(y * y, axis=0) - log_det - d * HALF_LOG_2PI
    return out.reshape(diff.shape[1:])


def _bandwidth(bw_method, kde):
    if bw_method is None or bw_method == "scott":
        return kde.neff ** (-1.0 / (kde.d + 4))
    if bw_method == "silverman":
        return (kde.neff * (kde.d + 2) / 4.0) ** (-1.0 / (kde.d + 4))
    if callable(bw_method):
        return bw_method(kde)
    if isinstance(bw_method, str):
        raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar or a callable.")
    return jnp.asarray(bw_method)


@register_pytree_node_class
class gaussian_kde:  # noqa: N801 (SciPy's name)
    """A Gaussian kernel density estimate of ``dataset`` (``d`` by ``n`` points, or ``n``
    one-dimensional points), optionally ``weights``-weighted."""

    def __init__(self, dataset, bw_method=None, weights=None):
        dataset, = promote_dtypes_inexact(jnp.atleast_2d(dataset))
        if jnp.issubdtype(dataset.dtype, jnp.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is None:
            weights = jnp.full(n, 1.0 / n, dataset.dtype)
        else:
            weights = jnp.atleast_1d(weights).astype(dataset.dtype)
            weights = weights / jnp.sum(weights)
            if weights.shape != (n,):
                raise ValueError("`weights` input should be of length n")
        self.dataset, self.weights = dataset, weights
        self.neff = 1.0 / jnp.sum(weights ** 2)
        factor = _bandwidth(bw_method, self)
        data_cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=True, bias=False, aweights=weights))
        self.covariance = data_cov * factor ** 2
        self.inv_cov = jnp.linalg.inv(self.covariance)

    def tree_flatten(self):
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        kde = object.__new__(cls)
        kde.neff, kde.dataset, kde.weights, kde.covariance, kde.inv_cov = children
        return kde

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def _points(self, points):
        points = jnp.atleast_2d(jnp.asarray(points, self.dataset.dtype))
        if points.shape[0] != self.d:
            if points.shape == (1, self.d):
                return points.T
            raise ValueError(f"points have dimension {points.shape[0]}, "
                             f"dataset has dimension {self.d}")
        return points

    def logpdf(self, x):
        """``log`` of the estimated density at the points ``x`` (``d`` by ``m``)."""
        points = self._points(x)
        diff = points[:, None, :] - self.dataset[:, :, None]  # (d, n, m)
        log_terms = _log_gaussian(diff, self.covariance) + jnp.log(self.weights)[:, None]
        return special.logsumexp(log_terms, axis=0)

    def evaluate(self, points):
        """The estimated density at ``points`` (``d`` by ``m``)."""
        return jnp.exp(self.logpdf(points))

    __call__ = pdf = evaluate

    def integrate_gaussian(self, mean, cov):
        """The integral of the estimate times the Gaussian density ``N(mean, cov)``."""
        mean = jnp.atleast_1d(jnp.squeeze(jnp.asarray(mean, self.dataset.dtype)))
        cov = jnp.atleast_2d(jnp.asarray(cov, self.dataset.dtype))
        if mean.shape != (self.d,) or cov.shape != (self.d, self.d):
            raise ValueError("mean and cov must have dimensions matching the dataset")
        diff = mean[:, None] - self.dataset
        return jnp.sum(self.weights * jnp.exp(_log_gaussian(diff, cov + self.covariance)))

    def integrate_box_1d(self, low, high):
        """The estimated probability of ``[low, high]`` (one-dimensional data only)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        sigma = jnp.sqrt(self.covariance[0, 0])
        low = (jnp.asarray(low) - self.dataset[0]) / sigma
        high = (jnp.asarray(high) - self.dataset[0]) / sigma
        return jnp.sum(self.weights * (special.ndtr(high) - special.ndtr(low)))

    def integrate_kde(self, other):
        """The integral of the product of this estimate and ``other``."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        diff = self.dataset[:, :, None] - other.dataset[:, None, :]
        log_kernel = _log_gaussian(diff, self.covariance + other.covariance)
        return jnp.sum(self.weights[:, None] * other.weights[None, :] * jnp.exp(log_kernel))

    def resample(self, key, shape=()):
        """``shape`` new points drawn from the estimate: a data point chosen by weight plus
        kernel noise; the result has shape ``(d,) + shape``."""
        choice_key, noise_key = random.split(key)
        index = random.choice(choice_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, jnp.zeros(self.d, self.dataset.dtype),
                                           self.covariance, shape=shape)
        return self.dataset[:, index] + jnp.moveaxis(noise, -1, 0)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        raise NotImplementedError("only 1D box integrations are supported (integrate_box_1d)")

    def set_bandwidth(self, bw_method=None):
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")



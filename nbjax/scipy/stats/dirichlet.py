"""``nbjax.scipy.stats.dirichlet``: the Dirichlet distribution on the probability simplex,
as ``jax.scipy.stats.dirichlet``.

The components of ``x`` run along its first axis (the others are batch axes), as in SciPy.
``x`` may leave out the last component, which is then ``1 - sum`` of the others. Points off
the simplex (a component <= 0, or components not summing to 1) have density 0.
"""

import numpy as np

from ... import numpy as jnp
from ...numpy.util import promote_dtypes_inexact
from .. import special

__all__ = ["logpdf", "pdf"]


def logpdf(x, alpha):
    x, alpha = promote_dtypes_inexact(jnp.asarray(x), jnp.asarray(alpha))
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.ndim == 0 or x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError(f"`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, 1 - jnp.sum(x, axis=0, keepdims=True)], axis=0)
    alpha = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    normalizer = jnp.sum(special.gammaln(alpha), axis=0) - special.gammaln(jnp.sum(alpha))
    log_density = jnp.sum(special.xlogy(alpha - 1, x), axis=0) - normalizer
    tolerance = 100 * np.finfo(x.dtype).eps
    on_simplex = (jnp.all(x > 0, axis=0)
                  & (jnp.abs(jnp.sum(x, axis=0) - 1) <= tolerance))
    return jnp.where(on_simplex, log_density, -jnp.inf)


def pdf(x, alpha):
    return jnp.exp(logpdf(x, alpha))

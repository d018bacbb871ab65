"""``nbjax.scipy.stats.multinomial``: the multinomial distribution, counts ``x`` (along the
last axis) of ``n`` draws from categories of probabilities ``p``, as
``jax.scipy.stats.multinomial``. Counts that do not add up to ``n`` have mass 0."""

import numpy as np

from ... import numpy as jnp
from ...numpy.util import promote_dtypes_inexact
from .. import special

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    x, n, p = jnp.asarray(x), jnp.asarray(n), jnp.asarray(p)
    if not (np.issubdtype(x.dtype, np.integer) and np.issubdtype(n.dtype, np.integer)):
        raise ValueError(f"x and n must be of integer type; got x.dtype={x.dtype}, "
                         f"n.dtype={n.dtype}")
    total = jnp.sum(x, axis=-1)
    x, n, p = promote_dtypes_inexact(x, n, p)
    mass = special.gammaln(n + 1) + jnp.sum(special.xlogy(x, p) - special.gammaln(x + 1),
                                            axis=-1)
    return jnp.where(total == n, mass, -jnp.inf)


def pmf(x, n, p):
    return jnp.exp(logpmf(x, n, p))

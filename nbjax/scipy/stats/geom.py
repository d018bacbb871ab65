"""``nbjax.scipy.stats.geom``: the geometric distribution, the number ``k >= 1`` of trials
up to the first success of probability ``p``, as ``jax.scipy.stats.geom``.

As JAX: a NaN ``k`` gives NaN (the support test is for "outside"), and on ``k - loc > 0`` a
``p`` outside ``[0, 1]`` (or NaN) gives NaN. Unlike JAX, a non-integer ``k - loc`` has mass
0 (SciPy's value; JAX returns the formula's value there, even ``inf`` at ``p = 1``)."""

from ... import numpy as jnp
from .. import special
from ._discrete import between
from ._family import discrete


def _logpmf(k, p):
    mass = between(k, 1, jnp.inf, special.xlog1py(k - 1, -p) + jnp.log(p))
    invalid_p = ~((p >= 0) & (p <= 1))
    return jnp.where((k > 0) & invalid_p, jnp.nan, mass)


_fns = discrete("geom", ("p",), logpmf=_logpmf)
globals().update(_fns)
__all__ = sorted(_fns)

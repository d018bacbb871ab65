"""``nbjax.scipy.stats.vonmises``: the von Mises distribution on the circle with
concentration ``kappa``, density ``exp(kappa cos x) / (2 pi I0(kappa))``, as
``jax.scipy.stats.vonmises``. The normalizer uses the scaled Bessel function ``i0e`` so that
large ``kappa`` does not overflow."""

import math

from ... import numpy as jnp
from ...numpy.util import promote_args_inexact
from .. import special

__all__ = ["logpdf", "pdf"]


def logpdf(x, kappa):
    """NaN for a negative ``kappa``, as in JAX and SciPy; ``kappa = 0`` is the uniform
    distribution, as in SciPy (JAX: NaN)."""
    x, kappa = promote_args_inexact("vonmises.logpdf", x, kappa)
    density = kappa * (jnp.cos(x) - 1) - math.log(2 * math.pi) - jnp.log(special.i0e(kappa))
    return jnp.where(kappa >= 0, density, jnp.nan)


def pdf(x, kappa):
    return jnp.exp(logpdf(x, kappa))

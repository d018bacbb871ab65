"""``nbjax.scipy.stats.betabinom``: the beta-binomial distribution, a binomial whose success
probability is beta(a, b) distributed: ``C(n, y) B(y + a, n - y + b) / B(a, b)`` at
``y = floor(k) - loc``, as ``jax.scipy.stats.betabinom``.

The rules at the edges are JAX's: mass 1 at ``y = n = 0`` (whatever ``a`` and ``b``); ``-inf``
where ``y < 0``, ``y > n`` or ``y + a <= 0``; then NaN for ``n < 0``, ``a <= 0`` or
``b <= 0``. A NaN ``k`` gives NaN. (JAX tests ``y < -loc``, that is ``floor(k) < 0``, for the
lower end: with ``loc != 0`` that gives mass 0 to ``loc <= k < 0`` and the formula's value to
``0 <= k < loc``. nbjax tests ``y < 0``, as SciPy.)"""

from ... import numpy as jnp
from .. import special
from ._family import located_discrete


def _logpmf(k, n, a, b, loc):
    y = jnp.floor(k) - loc
    log_comb = -(jnp.log1p(n) + special.betaln(n - y + 1, y + 1))
    mass = log_comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    mass = jnp.where((y == 0) & (n == 0), 0.0, mass)
    mass = jnp.where((y < 0) | (y > n) | (y + a <= 0), -jnp.inf, mass)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), jnp.nan, mass)


_fns = located_discrete("betabinom", ("n", "a", "b"), _logpmf)
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats.betabinom``: the beta-binomial distribution, a binomial whose success
probability is beta(a, b) distributed: ``C(n, k) B(k + a, n - k + b) / B(a, b)``, as
``jax.scipy.stats.betabinom``."""

from .. import special
from ._discrete import between, log_comb
from ._family import discrete


def _logpmf(k, n, a, b):
    mass = log_comb(n, k) + special.betaln(k + a, n - k + b) - special.betaln(a, b)
    return between(k, 0, n, mass)


_fns = discrete("betabinom", ("n", "a", "b"), logpmf=_logpmf)
globals().update(_fns)
__all__ = sorted(_fns)

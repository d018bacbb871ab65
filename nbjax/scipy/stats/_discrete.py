"""Pieces shared by the distributions on the integers."""

from ... import numpy as jnp
from .. import special


def log_comb(n, k):
    """``log(n choose k)`` through ``gammaln`` (defined for real ``k``, as SciPy's ``comb``)."""
    return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)


def between(k, low, high, log_mass):
    """``log_mass`` on ``low <= k <= high``, ``-inf`` (probability 0) elsewhere. Written as a
    test for "outside", as JAX does, so that a NaN ``k`` gives NaN rather than ``-inf``."""
    return jnp.where((k < low) | (k > high), -jnp.inf, log_mass)

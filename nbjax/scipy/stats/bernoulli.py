"""``nbjax.scipy.stats.bernoulli``: the Bernoulli distribution, 1 with probability ``p``,
as ``jax.scipy.stats.bernoulli`` (whose ``cdf`` and ``ppf`` take no ``loc``)."""

from ... import numpy as jnp
from ...numpy.util import promote_args_inexact
from .. import special
from ._discrete import between
from ._family import discrete

_fns = discrete("bernoulli", ("p",), logpmf=lambda k, p: between(
    k, 0, 1, special.xlogy(k, p) + special.xlog1py(1 - k, -p)))
globals().update(_fns)
__all__ = sorted(_fns) + ["cdf", "ppf"]


def _valid_p(p, out):
    return jnp.where((p >= 0) & (p <= 1), out, jnp.nan)


def cdf(k, p):
    """0 below 0, ``1 - p`` on [0, 1), 1 from 1 on (NaN at NaN)."""
    k, p = promote_args_inexact("bernoulli.cdf", k, p)
    return _valid_p(p, jnp.where(k < 0, 0, jnp.where(k < 1, 1 - p, jnp.where(k >= 1, 1, k))))


def ppf(q, p):
    """The smallest ``k`` in {0, 1} with ``cdf(k) >= q``; NaN for ``q`` outside [0, 1]."""
    q, p = promote_args_inexact("bernoulli.ppf", q, p)
    out = jnp.where(q <= 1 - p, 0, 1).astype(q.dtype)
    return _valid_p(p, jnp.where((q >= 0) & (q <= 1), out, jnp.nan))

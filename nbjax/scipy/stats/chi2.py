"""``nbjax.scipy.stats.chi2``: the chi-squared distribution with ``df`` degrees of freedom,
the gamma distribution of shape ``df / 2`` and scale 2, as ``jax.scipy.stats.chi2``."""

import math

from . import gamma
from ._family import continuous


def _from_gamma(kind):
    """The standard chi2 function of ``kind``: gamma's at ``z / 2``, shape ``df / 2`` (the
    log-density also loses ``log 2`` for the scale)."""
    fn = gamma.STANDARD[kind]
    shift = math.log(2) if kind == "logpdf" else 0
    return lambda z, df: fn(z / 2, df / 2) - shift


_fns = continuous("chi2", ("df",), **{kind: _from_gamma(kind) for kind in gamma.STANDARD})
globals().update(_fns)
__all__ = sorted(_fns)

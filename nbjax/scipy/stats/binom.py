"""``nbjax.scipy.stats.binom``: the binomial distribution, ``k`` successes in ``n`` trials of
probability ``p``, as ``jax.scipy.stats.binom`` (non-integer ``k`` in ``[0, n]`` gives the
continuous extension through the gamma function, as in JAX)."""

from ... import numpy as jnp
from .. import special
from ._discrete import log_comb
from ._family import discrete


def _logpmf(k, n, p):
    linear = special.xlogy(k, p) + special.xlog1py(n - k, -p)
    # JAX's: mass 1 at k = n = 0 or where the log-linear term is 0, so at n = 0 whatever p,
    # even NaN (SciPy: NaN).
    mass = jnp.where((k == 0) & (n == 0) | (linear == 0), 0.0, log_comb(n, k) + linear)
    # JAX tests "inside" here, so a NaN ``k`` gives ``-inf`` (unlike ``between``).
    return jnp.where((k >= 0) & (k <= n), mass, -jnp.inf)


_fns = discrete("binom", ("n", "p"), logpmf=_logpmf)
globals().update(_fns)
__all__ = sorted(_fns)

"""``nbjax.scipy.stats``: SciPy's probability distributions, one module each as in
``jax.scipy.stats``, plus ``mode``, ``rankdata``, ``sem`` and ``gaussian_kde``.

Each distribution is written in standard form and shifted and scaled by the shared code of
``_family``; everything is nbjax.numpy and nbjax.scipy.special, so it jits, vmaps and
differentiates.
"""

from . import (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet,  # noqa: F401
               expon, gamma, gennorm, geom, gumbel_l, gumbel_r, laplace, logistic,
               multinomial, multivariate_normal, nbinom, norm, pareto, poisson, t,
               truncnorm, uniform, vonmises, wrapcauchy)
from ._summary import ModeResult, mode, rankdata, sem  # noqa: F401
from .kde import gaussian_kde  # noqa: F401

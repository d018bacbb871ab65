"""``nbjax.scipy.stats``: probability distributions (the normal distribution so far)."""

from . import norm  # noqa: F401

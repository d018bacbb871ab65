"""``nbjax.scipy.spatial``: the parts of ``scipy.spatial`` that ``jax.scipy.spatial`` has."""

from . import transform  # noqa: F401

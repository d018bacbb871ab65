"""``nbjax.scipy.integrate``: ``trapezoid``, as ``jax.scipy.integrate``; the same function as
``nbjax.numpy.trapezoid`` (SciPy and NumPy define it alike)."""

from ..numpy import trapezoid

__all__ = ["trapezoid"]

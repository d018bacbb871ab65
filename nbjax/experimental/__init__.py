"""``nbjax.experimental``: what ``jax.experimental`` offers that nbjax rebuilds, outside the
stable namespace as in JAX: ``nbjax.experimental.ode.odeint``, an adaptive Runge-Kutta
solver for ordinary differential equations, differentiable by the adjoint method.

Import it as in JAX: ``from nbjax.experimental.ode import odeint``.
"""

from . import ode

__all__ = ["ode"]

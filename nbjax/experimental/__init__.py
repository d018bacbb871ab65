"""``nbjax.experimental``: what ``jax.experimental`` offers that nbjax rebuilds, outside the
stable namespace as in JAX:

- ``nbjax.experimental.ode.odeint``: an adaptive Runge-Kutta solver for ordinary
  differential equations, differentiable by the adjoint method;
- ``nbjax.experimental.jet``: Taylor-mode differentiation (``jet(f, primals, series)``: the
  first K derivatives of ``f`` along a path, in one pass of Taylor-coefficient recurrences);
- ``nbjax.experimental.checkify``: run-time checks (user ``check``s, NaNs, division by zero,
  out-of-bounds indices) made a value a jitted function returns;
- ``nbjax.experimental.io_callback``: a host callback with side effects (``lax.callback``),
  which runs whenever the computation does.

Import them as in JAX: ``from nbjax.experimental.ode import odeint``,
``from nbjax.experimental.jet import jet``, ``from nbjax.experimental import checkify``.
"""

from ..lax.callback import io_callback
from . import checkify, jet, ode

__all__ = ["checkify", "io_callback", "jet", "ode"]

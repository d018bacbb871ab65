"""BFGS: quasi-Newton minimization with a dense estimate ``H`` of the inverse Hessian
(Nocedal and Wright, *Numerical Optimization*, 2nd ed., Algorithm 6.1).

Each iteration steps along ``-H g`` by a strong-Wolfe line search, then corrects ``H`` so
that it maps the change of gradient ``y`` to the step ``s`` taken, the smallest such change
in a weighted norm (their eq. 6.17)::

    H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T,    rho = 1 / (y^T s)

The Wolfe curvature condition makes ``y^T s > 0``, which keeps ``H`` positive definite.
"""

from typing import Any, NamedTuple

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...api import value_and_grad
from ._line_search import line_search
from ._results import OptimizeResults


class _BFGSState(NamedTuple):
    iterations: Any
    evaluations: Any
    converged: Any
    line_search_failed: Any
    line_search_status: Any
    x: Any
    value: Any
    gradient: Any
    inverse_hessian: Any
    previous_value: Any  # f before the last step, for the line search's first trial


def minimize_bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    """Minimize ``fun`` from the real vector ``x0`` until ``|gradient|_norm < gtol`` or
    ``maxiter`` iterations (default ``200 * len(x0)``)."""
    if jnp.iscomplexobj(x0):
        raise TypeError("BFGS needs a real x0: for a real function of complex x, the inverse "
                        "Hessian is no complex matrix. Minimize over the real and imaginary "
                        "parts, or use L-BFGS.")
    maxiter = 200 * x0.shape[0] if maxiter is None else maxiter
    evaluate = value_and_grad(fun)
    value, gradient = evaluate(x0)

    def converged(gradient):
        return jnp.linalg.norm(gradient, ord=norm) < gtol

    def keep_going(state):
        return ~state.converged & ~state.line_search_failed & (state.iterations < maxiter)

    def iterate(state):
        direction = -jnp.matmul(state.inverse_hessian, state.gradient)
        search = line_search(evaluate, state.x, direction, state.value, state.gradient,
                             state.previous_value, line_search_maxiter)
        step = search.step * direction
        return _BFGSState(
            state.iterations + 1, state.evaluations + search.evaluations,
            converged(search.gradient), search.failed, search.status, state.x + step,
            search.value, search.gradient,
            _updated_inverse_hessian(state.inverse_hessian, step,
                                     search.gradient - state.gradient),
            state.value)

    count = jnp.zeros((), int)
    state = lax.while_loop(keep_going, iterate, _BFGSState(
        count, count + 1, converged(gradient), jnp.zeros((), bool), count, x0, value, gradient,
        jnp.eye(x0.shape[0], dtype=x0.dtype),
        value + jnp.linalg.norm(gradient) / 2))  # as SciPy: the first trial moves x by ~1
    status = jnp.where(state.converged, 0, jnp.where(
        state.iterations >= maxiter, 1,
        jnp.where(state.line_search_failed, 2 + state.line_search_status, -1)))
    return OptimizeResults(
        x=state.x, success=state.converged & ~state.line_search_failed, status=status,
        fun=state.value, jac=state.gradient, hess_inv=state.inverse_hessian,
        nfev=state.evaluations, njev=state.evaluations, nit=state.iterations)


def _updated_inverse_hessian(H, s, y):
    """The BFGS update; ``H`` unchanged if ``y^T s`` is 0 (a failed line search that did
    not move)."""
    rho = 1 / jnp.dot(y, s)
    w = jnp.eye(H.shape[0], dtype=H.dtype) - rho * jnp.outer(s, y)
    updated = jnp.matmul(jnp.matmul(w, H), w.T) + rho * jnp.outer(s, s)
    return jnp.where(jnp.isfinite(rho), updated, H)

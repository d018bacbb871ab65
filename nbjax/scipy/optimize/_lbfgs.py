"""L-BFGS: BFGS that keeps, instead of a dense inverse Hessian, the last ``maxcor`` steps
``s`` and gradient changes ``y``, and applies the inverse-Hessian estimate they define to the
gradient by the two-loop recursion (Nocedal and Wright, *Numerical Optimization*, 2nd ed.,
Algorithm 7.4). Memory and work per iteration are ``O(maxcor n)`` rather than ``O(n^2)``.

A complex ``x`` is treated as the real vector of its real and imaginary parts, with the
inner product ``Re(conj(a) . b)``: everything the method does is inner products and real
combinations of vectors, so this is exactly L-BFGS on that real vector (after Sorber, Van
Barel and De Lathauwer, 2012). In that view the gradient is ``conj`` of JAX's.
"""

from typing import Any, NamedTuple

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...api import value_and_grad
from ._line_search import line_search
from ._results import OptimizeResults


class _LBFGSState(NamedTuple):
    iterations: Any
    evaluations: Any
    converged: Any
    stalled: Any  # the last step lowered f by less than ftol
    line_search_failed: Any
    x: Any
    value: Any
    gradient: Any
    steps: Any  # s of the last maxcor iterations, oldest first; zero rows before they exist
    gradient_changes: Any  # y, likewise
    reciprocals: Any  # 1 / <y, s>, likewise (0 for the zero rows, which then do nothing)
    scale: Any  # <s, y> / <y, y> of the newest pair: the initial inverse Hessian's size


def minimize_lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10, ftol=2.220446049250313e-09,
                   gtol=1e-05, maxfun=None, maxgrad=None, maxls=20):
    """Minimize ``fun`` from the vector ``x0`` until ``|gradient|_norm < gtol``, a step
    lowers ``f`` by less than ``ftol``, or a budget runs out: ``maxiter`` iterations (by
    default ``200 * len(x0)`` when no budget is given), ``maxfun``/``maxgrad`` evaluations.
    Each line search tries at most ``maxls`` bracketing steps."""
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = 200 * x0.shape[0]
    # (limit, what it counts, status when used up), in JAX's order of precedence
    budgets = [(limit, count, code) for limit, count, code in (
        (maxiter, "iterations", 1), (maxfun, "evaluations", 2), (maxgrad, "evaluations", 3))
        if limit is not None]
    evaluate = value_and_grad(fun)
    value, gradient = evaluate(x0)

    def converged(gradient):
        return jnp.linalg.norm(gradient, ord=norm) < gtol

    def budget_status(state):
        """The status of the first budget used up; 0 while none is."""
        status = 0
        for limit, count, code in reversed(budgets):
            status = jnp.where(getattr(state, count) >= limit, code, status)
        return status

    def keep_going(state):
        return (~state.converged & ~state.stalled & ~state.line_search_failed
                & (budget_status(state) == 0))

    def iterate(state):
        direction = -_inverse_hessian_times(state, jnp.conj(state.gradient))
        search = line_search(evaluate, state.x, direction, state.value, state.gradient,
                             maxiter=maxls)
        s = search.step * direction
        y = jnp.conj(search.gradient - state.gradient)
        s_dot_y = _inner(s, y)
        return _LBFGSState(
            state.iterations + 1, state.evaluations + search.evaluations,
            converged(search.gradient), state.value - search.value < ftol, search.failed,
            state.x + s, search.value, search.gradient, _appended(state.steps, s),
            _appended(state.gradient_changes, y), _appended(state.reciprocals, 1 / s_dot_y),
            s_dot_y / _inner(y, y))

    real_dtype = jnp.real(x0).dtype
    count, no = jnp.zeros((), int), jnp.zeros((), bool)
    state = lax.while_loop(keep_going, iterate, _LBFGSState(
        count, count + 1, converged(gradient), no, no, x0, value, gradient,
        jnp.zeros((maxcor,) + x0.shape, x0.dtype), jnp.zeros((maxcor,) + x0.shape, x0.dtype),
        jnp.zeros(maxcor, real_dtype), jnp.ones((), real_dtype)))
    out_of_budget = budget_status(state)
    status = jnp.where(state.converged, 0, jnp.where(
        state.line_search_failed, 5,
        jnp.where(out_of_budget != 0, out_of_budget, jnp.where(state.stalled, 4, -1))))
    return OptimizeResults(
        x=state.x, success=state.converged & ~state.line_search_failed, status=status,
        fun=state.value, jac=state.gradient, hess_inv=None, nfev=state.evaluations,
        njev=state.evaluations, nit=state.iterations)


def _inner(a, b):
    """The real inner product of complex vectors seen as real ones (the dot for reals)."""
    return jnp.real(jnp.vdot(a, b))


def _appended(history, newest):
    """``history`` without its oldest entry, ``newest`` after its last."""
    return jnp.concatenate([history[1:], newest[None].astype(history.dtype)])


def _inverse_hessian_times(state, q):
    """``H q`` for the L-BFGS estimate ``H``: the two-loop recursion. The first loop (newest
    pair to oldest) projects the pairs' information out of ``q``, the initial estimate
    ``scale * I`` acts on the rest, the second loop (oldest to newest) adds it back."""
    pairs = (state.steps, state.gradient_changes, state.reciprocals)

    def newest_first(q, pair):
        s, y, reciprocal = pair
        alpha = reciprocal * _inner(s, q)
        return q - alpha * y, alpha

    q, alphas = lax.scan(newest_first, q, pairs, reverse=True)

    def oldest_first(r, pair_and_alpha):
        s, y, reciprocal, alpha = pair_and_alpha
        beta = reciprocal * _inner(y, r)
        return r + (alpha - beta) * s, None

    r, _ = lax.scan(oldest_first, state.scale * q, pairs + (alphas,))
    return r

"""``nbjax.experimental.ode``: ``odeint``, as ``jax.experimental.ode.odeint``.

It solves the initial-value problem ``dy/dt = func(y, t, *args)``, ``y(t[0]) = y0``, and
returns ``y`` at every time of ``t``. Three ideas make it up.

**An embedded Runge-Kutta pair.** One step of the Dormand-Prince method evaluates ``func``
at seven points (stages) inside the step and combines the slopes twice: one combination is
accurate to order 5 (the solution we keep), another to order 4. Their difference costs
nothing more and estimates the local error of the step (Hairer, Norsett & Wanner, *Solving
Ordinary Differential Equations I*, sec. II.4 and II.5). The last stage is the slope at the
new point, so it serves as the first stage of the next step ("first same as last").

**Adaptive step size.** The error estimate, measured against ``atol + rtol * |y|``, decides
whether a step is accepted, and the size of the next try: a step of size ``h`` has an error
of about ``C h^5``, so the size that would just meet the tolerance is ``h * ratio^(-1/5)``,
taken with a safety factor and limits on how fast it may grow or shrink. A rejected step
is retried, smaller, from the same point.

**Dense output.** The steps fall where the error control puts them, not on the requested
times. Each accepted step also fits a polynomial of degree 4 to the solution across it (the
values at both ends and the middle, the slopes at both ends), and a requested time inside
the step reads the solution off that polynomial instead of shortening a step to land on it.

**Gradients by the adjoint method** (Chen, Rubanova, Bettencourt & Duvenaud, *Neural
Ordinary Differential Equations*, 2018, appendix C). Differentiating through the solver's
steps would store every stage of every step. Instead the cotangent ``a(t) = dL/dy(t)``
obeys an ODE of its own, ``da/dt = -a . df/dy``, solved backwards in time from the last
requested time to the first, together with ``y`` itself (recomputed backwards, not stored)
and the integrals ``int a . df/dargs dt`` and ``int a . df/dt dt`` that give the gradients
with respect to ``args`` and the initial time. At each requested time the cotangent of
that output is added to ``a``. The backward solve is another ``odeint``, on the augmented
state, in the reversed time ``s = -t`` (so that its times increase).
"""

from functools import partial
from typing import NamedTuple

from .. import lax
from .. import numpy as jnp
from ..api import vjp, vmap
from ..core.trace import valid_value
from ..custom_derivatives import closure_convert, custom_vjp
from ..flatten_util import ravel_pytree
from ..tree_util import tree_leaves, tree_map

__all__ = ["odeint"]


# --- the Dormand-Prince tableau ------------------------------------------------------------

# Stage i (i = 2..6) is evaluated at time t + NODES[i-2] * h, at the state y + h * sum_j
# COUPLING[i-2][j] * k_j over the earlier stages k_1..k_{i-1}.
_NODES = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0)
_COUPLING = (
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
)
# The weights of the seven stages in the order-5 solution (the seventh stage, the slope at
# the new point, has weight 0) and in the order-4 companion: the variant of Shampine ("Some
# practical Runge-Kutta formulas", Math. Comp. 46, 1986) that JAX uses.
_ORDER_5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_ORDER_4 = (1951 / 21600, 0.0, 22642 / 50085, 451 / 720, -12231 / 42400, 649 / 6300, 1 / 60)
_ERROR = tuple(b5 - b4 for b5, b4 in zip(_ORDER_5, _ORDER_4))
# The weights that give the solution at the middle of the step (Shampine, same paper), the
# fifth condition of the interpolating polynomial.
_MIDPOINT = tuple(w / 2 for w in (
    6025192743 / 30085553152, 0.0, 51252292925 / 65400821598, -2691868925 / 45128329728,
    187940372067 / 1594534317056, -1776094331 / 19743644256, 11237099 / 235043384))

# The step-size controller: a safety factor on the predicted size, and the most a step may
# grow (after any step) or shrink (after a rejected one; an accepted step never shrinks).
_SAFETY, _MOST_GROWTH, _MOST_SHRINK = 0.9, 10.0, 0.2


def _combine(weights, slopes):
    """``sum_j weights[j] * slopes[j]``, leaving out the zero weights."""
    return sum(w * k for w, k in zip(weights, slopes) if w != 0)


class _Step(NamedTuple):
    """One attempted step from ``y`` at time ``t``."""
    y: object      # the order-5 solution at t + h
    f: object      # the slope there, the first stage of the next step
    error: object  # order-5 minus order-4 solution: the local error estimate
    poly: object   # (5, n): coefficients of the dense-output polynomial, highest first


def _dopri_step(field, t, y, f, dt):
    """Attempt one Dormand-Prince step of size ``dt`` from ``(t, y)`` with slope ``f``."""
    h = dt.astype(y.dtype)
    slopes = [f]
    for node, coupling in zip(_NODES, _COUPLING):
        slopes.append(field(y + h * _combine(coupling, slopes), t + node * dt))
    y_next = y + h * _combine(_ORDER_5, slopes)
    f_next = field(y_next, t + dt)
    slopes.append(f_next)
    y_mid = y + h * _combine(_MIDPOINT, slopes)
    poly = _quartic_through(y, y_next, y_mid, h * f, h * f_next)
    return _Step(y_next, f_next, h * _combine(_ERROR, slopes), poly)


def _quartic_through(y0, y1, y_mid, slope0, slope1):
    """The quartic ``p(s) = a s^4 + b s^3 + c s^2 + d s + e`` on ``s`` in [0, 1] (the
    fraction of the step) with ``p(0) = y0``, ``p(1) = y1``, ``p(1/2) = y_mid`` and the
    derivatives ``p'(0) = slope0``, ``p'(1) = slope1`` (slopes times the step size).

    ``p(0)`` and ``p'(0)`` give ``e = y0`` and ``d = slope0``. The other three conditions
    are linear in ``a, b, c``::

        a +  b +  c = y1 - y0 - slope0                  =: rise
        4a + 3b + 2c = slope1 - slope0                  =: bend
        a + 2b + 4c = 16 (y_mid - y0) - 8 slope0        =: bulge   (16 p(1/2), rearranged)

    whose solution is written out below. Returns the rows ``a, b, c, d, e`` stacked.
    """
    rise = y1 - y0 - slope0
    bend = slope1 - slope0
    bulge = 16 * (y_mid - y0) - 8 * slope0
    a = bulge - 8 * rise + 2 * bend
    b = 14 * rise - 3 * bend - 2 * bulge
    c = bulge + bend - 5 * rise
    return jnp.stack([a, b, c, slope0, y0])


def _evaluate(poly, s):
    """The polynomial (coefficients highest first) at ``s``, by Horner's rule."""
    value = jnp.zeros_like(poly[0])
    for coefficient in poly:
        value = value * s + coefficient
    return value


def _error_ratio(error, y, y_next, rtol, atol):
    """The root-mean-square of the error estimate, each component measured against its
    tolerance ``atol + rtol * max(|y|, |y_next|)``: at most 1 accepts the step."""
    tolerance = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_next))
    return jnp.sqrt(jnp.mean(jnp.abs(error / tolerance) ** 2))


def _next_step_size(dt, ratio):
    """The size to try next: ``dt * ratio^(-1/5)`` (the size whose error would just meet the
    tolerance, the error growing as ``dt^5``), times the safety factor, then limited to
    grow at most tenfold and, after a rejection, to shrink at most fivefold. A ratio of 0
    (an exact step) gives the largest growth."""
    least = jnp.where(ratio < 1, 1.0, _MOST_SHRINK)
    return dt * jnp.clip(_SAFETY * ratio ** -0.2, least, _MOST_GROWTH)


def _initial_step_size(field, t0, y0, f0, rtol, atol):
    """The first step to try, by Hairer, Norsett & Wanner's algorithm (sec. II.4).

    Sizes are measured in units of the tolerance, ``atol + rtol * |y0|``. A first guess
    ``h0 = 0.01 |y0| / |f0|`` lets an explicit Euler step change ``y`` by about 1%. That
    Euler step, ``y0 + h0 f0``, and the slope there estimate the second derivative
    ``|f'| ~ |f(y0 + h0 f0) - f0| / h0``. The second guess ``h1`` makes
    ``max(|f|, |f'|) h1^5 = 0.01`` (the error estimate is of order 4, hence the power 1/5).
    The smaller of ``h1`` and ``100 h0`` is taken. (As in JAX, sizes are Euclidean norms
    where the book takes root-mean-squares.)
    """
    scale = atol + rtol * jnp.abs(y0)
    size_y = jnp.linalg.norm(y0 / scale)
    size_f = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((size_y < 1e-5) | (size_f < 1e-5), 1e-6, 0.01 * size_y / size_f)
    f1 = field(y0 + h0 * f0, t0 + h0)
    size_df = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((size_f <= 1e-15) & (size_df <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(size_f, size_df)) ** (1 / 5))
    return jnp.minimum(100 * h0, h1)


# --- the forward solve ---------------------------------------------------------------------

class _Progress(NamedTuple):
    """Where the solver stands: the last accepted step went from ``t_prev`` to ``t``."""
    t: object       # time reached
    y: object       # state at t
    f: object       # slope at (y, t)
    dt: object      # the step size to try next
    t_prev: object  # where the last accepted step started
    poly: object    # its dense-output polynomial, on s = (time - t_prev) / (t - t_prev)


def _advance(field, progress, target, rtol, atol, mxstep, hmax):
    """Take steps until ``progress.t`` passes ``target``: at most ``mxstep`` tries (accepted
    or rejected) since the previous requested time, and never with a step size of 0.

    If it gives up before passing ``target``, reading the polynomial at ``target``
    extrapolates (wrongly); before any accepted step the polynomial spans no time at all
    (``t_prev == t``), and reading it gives NaN: the sign that ``mxstep`` (or ``hmax``) was
    too small.
    """
    def unfinished(loop):
        tries, p = loop
        return (p.t < target) & (tries < mxstep) & (p.dt > 0)

    def attempt(loop):
        tries, p = loop
        step = _dopri_step(field, p.t, p.y, p.f, p.dt)
        ratio = _error_ratio(step.error, p.y, step.y, rtol, atol)
        dt = jnp.clip(_next_step_size(p.dt, ratio), 0.0, hmax)
        accepted = _Progress(p.t + p.dt, step.y, step.f, dt, p.t, step.poly)
        rejected = p._replace(dt=dt)
        chosen = tree_map(lambda new, old: jnp.where(ratio <= 1, new, old), accepted, rejected)
        return tries + 1, chosen

    return lax.while_loop(unfinished, attempt, (0, progress))[1]


def _read_off(progress, target):
    """The state at ``target``, from the last accepted step's polynomial."""
    s = (target - progress.t_prev) / (progress.t - progress.t_prev)
    return _evaluate(progress.poly, s.astype(progress.poly.dtype))


@partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _solve(rhs, rtol, atol, mxstep, hmax, y0, ts, *args):
    """The solution at the times ``ts`` of ``dy/dt = rhs(y, t, *args)``, ``y`` a vector."""
    def field(y, t):
        return rhs(y, t, *args)

    f0 = field(y0, ts[0])
    dt = jnp.clip(_initial_step_size(field, ts[0], y0, f0, rtol, atol), 0.0, hmax)
    # Until a step is accepted the "polynomial" is a placeholder spanning no time.
    start = _Progress(ts[0], y0, f0, dt, ts[0], jnp.stack([y0] * 5))

    def visit(progress, target):
        progress = _advance(field, progress, target, rtol, atol, mxstep, hmax)
        return progress, _read_off(progress, target)

    _, ys = lax.scan(visit, start, ts[1:])
    return jnp.concatenate([y0[None], ys])


# --- the backward solve: the adjoint method ------------------------------------------------

def _solve_fwd(rhs, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _solve(rhs, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _solve_bwd(rhs, rtol, atol, mxstep, hmax, residuals, ys_bar):
    """The cotangents of ``y0``, ``ts`` and ``args``, from those of the outputs.

    Between consecutive requested times, from the last to the first, one backward solve
    carries the augmented state ``(y, a, t0_bar, args_bar)`` (see the module docstring).
    The cotangent of a requested time ``t_i > t_0`` is how fast the output moves there,
    ``ys_bar[i] . f(y_i, t_i)``; moving ``t_0`` shifts the whole solution the other way.
    """
    ys, ts, args = residuals

    def augmented(state, s, *args):
        y, a, _, _ = state
        dy_dt, pullback = vjp(rhs, y, -s, *args)
        a_dot, t0_bar_dot, *args_bar_dot = pullback(a)
        # d/ds = -d/dt: y runs backwards, a, t0_bar and args_bar accumulate
        return -dy_dt, a_dot, t0_bar_dot, tuple(args_bar_dot)

    def one_interval(carry, interval):
        a, t0_bar, args_bar = carry
        y_end, t_end, t_start, bar_end, bar_start = interval
        t_end_bar = jnp.real(jnp.dot(rhs(y_end, t_end, *args), bar_end)).astype(ts.dtype)
        start = (y_end, a, t0_bar - t_end_bar, args_bar)
        path = odeint(augmented, start, jnp.stack([-t_end, -t_start]), *args,
                      rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        _, a, t0_bar, args_bar = tree_map(lambda leaf: leaf[1], path)
        return (a + bar_start, t0_bar, args_bar), t_end_bar

    zeros = (ys_bar[-1], jnp.zeros((), ts.dtype), tree_map(jnp.zeros_like, args))
    intervals = (ys[1:], ts[1:], ts[:-1], ys_bar[1:], ys_bar[:-1])
    (y0_bar, t0_bar, args_bar), later_ts_bar = lax.scan(one_interval, zeros, intervals,
                                                        reverse=True)
    return (y0_bar, jnp.concatenate([t0_bar[None], later_ts_bar]), *args_bar)


_solve.defvjp(_solve_fwd, _solve_bwd)


# --- the user's function -------------------------------------------------------------------

def _on_vectors(func, unravel):
    """``func`` on pytree states, seen as a function of flat vectors."""
    def rhs(y, t, *args):
        return ravel_pytree(func(unravel(y), t, *args))[0]
    return rhs


def _check_arguments(args, t):
    """The TypeErrors JAX raises: ``args`` must hold arrays and scalars, ``t`` floats."""
    for leaf in tree_leaves(args):
        if not valid_value(leaf):
            raise TypeError(
                f"The contents of odeint *args must be arrays or scalars, but got {leaf}.")
    dtype = getattr(t, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"t must be an array of floats, but got {t}.")


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=jnp.inf, hmax=jnp.inf):
    """Solve ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``; the states at the times
    ``t``, stacked along a new leading axis.

    Args:
      func: the time derivative, ``func(y, t, *args)``, a pytree like ``y``.
      y0: the initial state, an array or a pytree of arrays.
      t: a 1-D array of floats, strictly increasing; ``t[0]`` is the initial time.
      *args: extra arguments of ``func`` (arrays, scalars, or pytrees of them); ``odeint``
        differentiates with respect to them too.
      rtol, atol: the relative and absolute tolerances of each step's error.
      mxstep: the most steps (accepted or rejected) between two consecutive times of ``t``.
        With too few, the outputs are extrapolated (wrong) or NaN.
      hmax: the largest step size.

    Returns:
      A pytree like ``y0`` whose leaves have a new leading axis of length ``len(t)``.

    The method (Dormand-Prince 5(4), adaptive steps, dense output; gradients by the adjoint
    method) is described in this module's docstring.
    """
    _check_arguments(args, t)
    # Values ``func`` closes over that a transformation traces (a grad or vmap around
    # odeint) become explicit arguments, so that the custom VJP differentiates them.
    converted, hoisted = closure_convert(func, y0, t[0], *args)
    y0_flat, unravel = ravel_pytree(y0)
    ys = _solve(_on_vectors(converted, unravel), rtol, atol, mxstep, hmax, y0_flat, t,
                *args, *hoisted)
    return vmap(unravel)(ys)

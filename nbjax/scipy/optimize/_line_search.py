"""The step-length rule of BFGS and L-BFGS: a line search for the strong Wolfe conditions.

Along a descent direction ``p`` from ``x``, ``phi(t) = f(x + t p)`` starts downhill
(``phi'(0) < 0``). A step ``t`` is acceptable when it satisfies the strong Wolfe conditions
(Nocedal and Wright, *Numerical Optimization*, 2nd ed., section 3.1)::

    sufficient decrease:  phi(t) <= phi(0) + c1 t phi'(0)
    curvature:            |phi'(t)| <= c2 |phi'(0)|

The search is their Algorithms 3.5 and 3.6, with SciPy's choice of trial steps. It keeps
``lo``, the best step so far (it decreases ``phi`` sufficiently, and the most), and, once
known, ``hi``, the other end of an interval that must contain an acceptable step. Until
``hi`` is known (*bracketing*) the trial steps double; then (*zooming*) each comes from a
cubic or quadratic model of ``phi`` on the interval, or is its midpoint. Both phases share
one rule for what a trial step teaches, so the whole search is one ``lax.while_loop``
evaluating ``f`` and its gradient once per iteration: it compiles under ``jit`` and batches
under ``vmap``.
"""

from typing import Any, NamedTuple

from ... import lax
from ... import numpy as jnp
from ...core import dtypes

C1, C2 = 1e-4, 0.9  # the Wolfe constants of quasi-Newton methods (Nocedal and Wright)
ZOOM_EVALUATIONS = 30  # at most this many trials inside a bracketing interval, as JAX
CUBIC_MARGIN, QUADRATIC_MARGIN = 0.2, 0.1  # fractions of the interval a model's step avoids


class _Trial(NamedTuple):
    """A step along the search direction and what ``phi`` is there."""
    step: Any
    value: Any  # phi(step)
    slope: Any  # phi'(step)


class LineSearchResults(NamedTuple):
    """The accepted step with ``f`` and its gradient there; if the search ``failed``, the
    best step it found (possibly 0). ``status``: 0 success, 1 the zoom failed (its interval
    shrank to nothing or it ran out of trials), 3 bracketing ran out of trials."""
    failed: Any
    status: Any
    evaluations: Any
    step: Any
    value: Any
    gradient: Any


class _SearchState(NamedTuple):
    evaluations: Any
    zoom_evaluations: Any
    zooming: Any  # whether hi is known
    done: Any  # whether lo satisfies the strong Wolfe conditions
    lo: _Trial
    lo_gradient: Any
    hi: _Trial
    replaced: _Trial  # the end point replaced last: the third point of the cubic model


def line_search(evaluate, x, p, value, gradient, previous_value=None, maxiter=10):
    """A step along ``p`` from ``x`` satisfying the strong Wolfe conditions, as
    :class:`LineSearchResults`. ``evaluate`` gives ``(f, gradient of f)``; ``value`` and
    ``gradient`` are those at ``x``. ``previous_value``, ``f`` before the last step, sets the
    first trial step by assuming the same decrease again (else it is 1); ``maxiter`` bounds
    the bracketing trials."""
    real_dtype = jnp.real(p).dtype
    start = _Trial(jnp.zeros((), real_dtype), value, _slope(gradient, p))
    first_step = _first_step(start, previous_value)
    # The zoom gives up on an interval narrower than this (JAX's limits): rounding rules there.
    narrowest = 1e-10 if dtypes.finfo(real_dtype).bits == 64 else 1e-5

    def keep_going(state):
        interval = jnp.abs(state.hi.step - state.lo.step)
        zoom_left = (interval > narrowest) & (state.zoom_evaluations < ZOOM_EVALUATIONS)
        return ~state.done & jnp.where(state.zooming, zoom_left, state.evaluations < maxiter)

    def try_step(state):
        t = jnp.where(state.zooming, _interpolated_step(state),
                      jnp.where(state.evaluations == 0, first_step, 2 * state.lo.step))
        value, gradient = evaluate(x + t * p)
        return _learn(state, _Trial(t, value, _slope(gradient, p)), gradient, start)

    no = jnp.zeros((), bool)
    count = jnp.zeros((), int)
    state = lax.while_loop(keep_going, try_step, _SearchState(count, count, no, no, start,
                                                              gradient, start, start))
    status = jnp.where(state.done, 0, jnp.where(state.zooming, 1, 3))
    return LineSearchResults(~state.done, status, state.evaluations, state.lo.step,
                             state.lo.value, state.lo_gradient)


def _slope(gradient, p):
    """``phi'`` from the gradient: the real part of ``gradient . p`` (for complex ``x``,
    JAX's gradient convention makes this the derivative along ``p``)."""
    return jnp.real(jnp.dot(gradient, p))


def _first_step(start, previous_value):
    """1, or the step that repeats the last decrease of ``f`` if ``phi`` were quadratic
    along ``p`` (times 1.01), when that is shorter (Nocedal and Wright, eq. 3.60)."""
    if previous_value is None:
        return jnp.ones((), start.step.dtype)
    guess = 1.01 * 2 * (start.value - previous_value) / start.slope
    return jnp.where(guess > 0, jnp.minimum(guess, 1), 1).astype(start.step.dtype)


def _learn(state, trial, gradient, start):
    """What a trial step teaches (Algorithm 3.6's case analysis, which also covers the
    bracketing phase, where the unknown ``hi`` lies beyond ``lo``):

    - no sufficient decrease, or no better than ``lo``: an acceptable step lies between
      ``lo`` and the trial, which becomes ``hi`` (the first trial only needs the sufficient
      decrease, as in Algorithm 3.5: near a minimum the decrease may be below rounding,
      and the slope then decides);
    - sufficient decrease and a flat enough slope: the trial is accepted;
    - sufficient decrease, slope pointing back past ``lo``: a minimum lies between the
      trial and ``lo``, which become ``lo`` and ``hi``;
    - sufficient decrease, still downhill away from ``lo``: the trial becomes ``lo``.
    """
    decreases = ((trial.value <= start.value + C1 * trial.step * start.slope)
                 & ((trial.value < state.lo.value) | (state.evaluations == 0)))
    flat = jnp.abs(trial.slope) <= -C2 * start.slope
    towards_hi = jnp.where(state.zooming, state.hi.step - state.lo.step, 1)
    turns = decreases & ~flat & (trial.slope * towards_hi >= 0)
    advances = decreases & ~flat & ~turns
    return _SearchState(
        evaluations=state.evaluations + 1,
        zoom_evaluations=state.zoom_evaluations + state.zooming.astype(int),
        zooming=state.zooming | ~decreases | turns,
        done=decreases & flat,
        lo=_where(decreases, trial, state.lo),
        lo_gradient=jnp.where(decreases, gradient, state.lo_gradient),
        hi=_where(decreases, _where(turns, state.lo, state.hi), trial),
        replaced=_where(advances, state.lo, state.hi))


def _where(condition, a, b):
    return _Trial(*(jnp.where(condition, x, y) for x, y in zip(a, b)))


def _interpolated_step(state):
    """The minimizer of a cubic through ``phi`` at ``lo``, ``hi`` and the point replaced
    last (with ``phi'(lo)``) if it lies well inside the interval; else that of the
    quadratic through ``lo`` (with its slope) and ``hi``; else the midpoint."""
    lo, hi = state.lo, state.hi
    low, high = jnp.minimum(lo.step, hi.step), jnp.maximum(lo.step, hi.step)
    width = high - low
    cubic = _cubic_minimizer(lo, hi, state.replaced)
    quadratic = _quadratic_minimizer(lo, hi)
    use_cubic = ((state.zoom_evaluations > 0)
                 & (cubic > low + CUBIC_MARGIN * width) & (cubic < high - CUBIC_MARGIN * width))
    use_quadratic = (quadratic > low + QUADRATIC_MARGIN * width) & (
        quadratic < high - QUADRATIC_MARGIN * width)
    midpoint = (lo.step + hi.step) / 2
    return jnp.where(use_cubic, cubic, jnp.where(use_quadratic, quadratic, midpoint))


def _cubic_minimizer(a, b, c):
    """The local minimizer of ``A u^3 + B u^2 + phi'(a) u + phi(a)`` (``u = t - a``) that
    matches ``phi`` at ``b`` and ``c``; NaN if there is none (then it is not used)."""
    db, dc = b.step - a.step, c.step - a.step
    rb = b.value - a.value - a.slope * db  # what the linear part misses at b and at c
    rc = c.value - a.value - a.slope * dc
    determinant = db * db * dc * dc * (db - dc)
    A = (dc * dc * rb - db * db * rc) / determinant
    B = (db * db * db * rc - dc * dc * dc * rb) / determinant
    return a.step + (-B + jnp.sqrt(B * B - 3 * A * a.slope)) / (3 * A)


def _quadratic_minimizer(a, b):
    """The minimizer of the parabola with ``phi(a)``, ``phi'(a)`` and ``phi(b)``."""
    d = b.step - a.step
    curvature = (b.value - a.value - a.slope * d) / (d * d)
    return a.step - a.slope / (2 * curvature)

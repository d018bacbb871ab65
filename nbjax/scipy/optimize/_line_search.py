"""The step-length rule of BFGS and L-BFGS: JAX's line search for the strong Wolfe conditions.

Along a descent direction ``p`` from ``x``, ``phi(t) = f(x + t p)`` starts downhill
(``phi'(0) < 0``). A step ``t`` is acceptable when it satisfies the strong Wolfe conditions
(Nocedal and Wright, *Numerical Optimization*, 2nd ed., section 3.1)::

    sufficient decrease:  phi(t) <= phi(0) + c1 t phi'(0)
    curvature:            |phi'(t)| <= c2 |phi'(0)|

The search is their Algorithms 3.5 (*bracketing*: trial steps double until an interval must
hold an acceptable step) and 3.6 (*zooming*: each trial comes from a cubic or quadratic model
of ``phi`` on that interval, or is its midpoint). It keeps ``lo``, the best step so far, and
``hi``, the interval's other end. Both phases share one case analysis of what a trial teaches,
so the whole search is one ``lax.while_loop`` evaluating ``f`` and its gradient once per
iteration: it compiles under ``jit`` and batches under ``vmap``.

``minimize`` promises JAX's results, iteration and evaluation counts included, so this follows
``jax.scipy.optimize``'s variant of the algorithm where it departs from the book:

- the zoom gives up as soon as the *signed* ``hi - lo`` is below a threshold. When ``hi`` lies
  below ``lo`` (the bracketing overshot a minimum, or the zoom swapped its ends) it therefore
  gives up after one more trial, even if that trial is acceptable (it is then returned, and
  the search still reports a failure); the interpolation's margins use the same signed width;
- a zoom that gives up without an acceptable trial reports the step 1, with ``f`` and its
  gradient as they were where the zoom began (``lo``'s value, ``x``'s gradient);
- in single precision a step shorter than ``1e-8`` becomes ``1e-8`` (keeping its sign).
"""

from typing import Any, NamedTuple

from ... import lax
from ... import numpy as jnp
from ...core import dtypes

C1, C2 = 1e-4, 0.9  # the Wolfe constants of quasi-Newton methods (Nocedal and Wright)
ZOOM_TRIALS = 30  # at most this many trials inside a bracketing interval, as JAX
CUBIC_MARGIN, QUADRATIC_MARGIN = 0.2, 0.1  # fractions of the interval a model's step avoids


class _Trial(NamedTuple):
    """A step along the search direction and what ``phi`` is there."""
    step: Any
    value: Any  # phi(step)
    slope: Any  # phi'(step)


class LineSearchResults(NamedTuple):
    """The accepted step with ``f`` and its gradient there; if the search ``failed``, what
    it holds instead (see the module's notes). ``status``: 0 success, 1 the zoom failed (its
    interval shrank to nothing or it ran out of trials), 3 bracketing ran out of trials."""
    failed: Any
    status: Any
    evaluations: Any
    step: Any
    value: Any
    gradient: Any


class _SearchState(NamedTuple):
    evaluations: Any
    bracketing_trials: Any
    zoom_trials: Any
    zooming: Any  # whether hi is known
    done: Any  # whether a trial satisfied the strong Wolfe conditions
    failed: Any  # whether the zoom gave up
    lo: _Trial  # while bracketing, the last trial
    hi: _Trial
    replaced: _Trial  # the end point replaced last: the third point of the cubic model
    result: _Trial  # what the search returns, and the gradient there
    result_gradient: Any


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
    low_precision = dtypes.finfo(real_dtype).bits < 64
    narrowest = 1e-5 if low_precision else 1e-10

    def keep_going(state):
        return ~state.done & ~state.failed & (state.zooming
                                              | (state.bracketing_trials < maxiter))

    def try_step(state):
        t = jnp.where(state.zooming, _interpolated_step(state),
                      jnp.where(state.bracketing_trials == 0, first_step, 2 * state.lo.step))
        value, gradient = evaluate(x + t * p)
        return _learn(state, _Trial(t, value, _slope(gradient, p)), gradient, start,
                      narrowest)

    no = jnp.zeros((), bool)
    count = jnp.zeros((), int)
    state = lax.while_loop(keep_going, try_step, _SearchState(
        count, count, count, no, no, no, start, start, start, start, gradient))
    status = jnp.where(state.failed, 1, jnp.where(state.done, 0, 3))
    step = state.result.step
    if low_precision:  # JAX's floor: a tiny step would leave float32's x where it is
        step = jnp.where(jnp.abs(step) < 1e-8, jnp.sign(step) * 1e-8, step)
    return LineSearchResults(state.failed | ~state.done, status, state.evaluations, step,
                             state.result.value, state.result_gradient)


def _slope(gradient, p):
    """``phi'`` from the gradient: the real part of ``gradient . p`` (for complex ``x``,
    JAX's gradient convention makes this the derivative along ``p``)."""
    return jnp.real(jnp.dot(gradient, p))


def _first_step(start, previous_value):
    """1, or, when shorter, the step that repeats the last decrease of ``f`` if ``phi`` were
    quadratic along ``p``, times 1.01 (Nocedal and Wright, eq. 3.60). As JAX, nothing keeps
    this guess positive: the caller's ``f`` decreased, so it is."""
    if previous_value is None:
        return jnp.ones((), start.step.dtype)
    guess = 1.01 * 2 * (start.value - previous_value) / start.slope
    return jnp.where(guess > 1, 1, guess).astype(start.step.dtype)


def _learn(state, trial, gradient, start, narrowest):
    """What a trial step teaches (Algorithm 3.6's case analysis, which also covers the
    bracketing phase, where the unknown ``hi`` lies beyond ``lo``):

    - no sufficient decrease, or no better than ``lo``: an acceptable step lies between
      ``lo`` and the trial, which becomes ``hi`` (the first trial only needs the sufficient
      decrease, as in Algorithm 3.5);
    - sufficient decrease and a flat enough slope: the trial is accepted;
    - sufficient decrease, slope pointing back past ``lo``: a minimum lies between the
      trial and ``lo``, which become ``lo`` and ``hi``;
    - sufficient decrease, still downhill away from ``lo``: the trial becomes ``lo``.

    A bracketing trial that finds ``hi`` starts the zoom.
    """
    rises = (trial.value > start.value + C1 * trial.step * start.slope) | (
        (trial.value >= state.lo.value) & (state.zooming | (state.bracketing_trials > 0)))
    flat = ~rises & (jnp.abs(trial.slope) <= -C2 * start.slope)
    towards_hi = jnp.where(state.zooming, state.hi.step - state.lo.step, 1)
    turns = ~rises & ~flat & (trial.slope * towards_hi >= 0)
    advances = ~rises & ~flat & ~turns
    lo = _where(turns | advances, trial, state.lo)
    hi = _where(rises, trial, _where(turns, state.lo, state.hi))
    starts_zoom = ~state.zooming & (rises | turns)
    midpoint = _Trial(*((a + b) / 2 for a, b in zip(lo, hi)))  # the cubic's first third point
    # Where a zoom that gives up leaves the search (the module's notes)
    given_up = _Trial(jnp.ones_like(lo.step), lo.value, lo.slope)
    # The zoom checks its interval before its trial, and its count of trials after
    gives_up = state.zooming & ((state.hi.step - state.lo.step <= narrowest)
                                | (state.zoom_trials + 1 >= ZOOM_TRIALS))
    return _SearchState(
        evaluations=state.evaluations + 1,
        bracketing_trials=state.bracketing_trials + (~state.zooming).astype(int),
        zoom_trials=state.zoom_trials + state.zooming.astype(int),
        zooming=state.zooming | starts_zoom,
        done=flat,
        failed=gives_up,
        lo=lo,
        hi=hi,
        replaced=_where(starts_zoom, midpoint, _where(advances, state.lo, state.hi)),
        result=_where(flat, trial, _where(starts_zoom, given_up, state.result)),
        # still x's gradient until a trial is accepted, so also right for a zoom that gives up
        result_gradient=jnp.where(flat, gradient, state.result_gradient))


def _where(condition, a, b):
    return _Trial(*(jnp.where(condition, x, y) for x, y in zip(a, b)))


def _interpolated_step(state):
    """The minimizer of a cubic through ``phi`` at ``lo``, ``hi`` and the point replaced
    last (with ``phi'(lo)``) if it lies well inside the interval and this is not the zoom's
    first trial; else that of the quadratic through ``lo`` (with its slope) and ``hi``; else
    the midpoint. The margins are fractions of the signed ``hi - lo``, as JAX's."""
    lo, hi = state.lo, state.hi
    low, high = jnp.minimum(lo.step, hi.step), jnp.maximum(lo.step, hi.step)
    width = hi.step - lo.step
    cubic = _cubic_minimizer(lo, hi, state.replaced)
    quadratic = _quadratic_minimizer(lo, hi)
    use_cubic = ((state.zoom_trials > 0)
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
    determinant = (db * dc) ** 2 * (db - dc)
    A = (dc ** 2 * rb - db ** 2 * rc) / determinant
    B = (db ** 3 * rc - dc ** 3 * rb) / determinant
    return a.step + (-B + jnp.sqrt(B * B - 3 * A * a.slope)) / (3 * A)


def _quadratic_minimizer(a, b):
    """The minimizer of the parabola with ``phi(a)``, ``phi'(a)`` and ``phi(b)``."""
    d = b.step - a.step
    curvature = (b.value - a.value - a.slope * d) / d ** 2
    return a.step - a.slope / (2 * curvature)

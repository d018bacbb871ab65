"""nbjax.scipy.optimize's BFGS and its line search run JAX's algorithm (Nocedal and Wright's
Algorithms 3.5, 3.6 and 6.1 with jax.scipy.optimize's departures), so ``minimize`` gives JAX's
results: the same point, success, status and counts. The expected values are worked out by hand
from that algorithm, or (where a comment says so) recorded from jax 0.10.2 in float64.

Float64 because in float32 the path near a minimum also depends on how ``f`` rounds: XLA
contracts multiply-adds into fused ones, so JAX's compiled ``f`` can differ from nbjax's in the
last bit, and at a minimum that bit decides the sufficient-decrease test."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.scipy.optimize import minimize
from nbjax.scipy.optimize._line_search import C1, C2, line_search
from tests.helpers import assert_close, check_vmap

RNG = np.random.default_rng(5)
LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def test_counts_on_a_round_bowl_worked_out(x64):
    """``f = |x|^2 / 2`` from (3, 4), so ``|g_0| = 5``. The first trial step (eq. 3.60, with
    JAX's previous value ``f_0 + |g_0| / 2``) is ``1.01 * 2 * (-2.5) / -25 = 0.202``; it
    satisfies both Wolfe conditions (``|phi'|`` is 0.798 of its start) and leaves the inverse
    Hessian ``I`` (``s`` is parallel to ``y``). The second is ``1.01 (1 - 0.798^2) / 0.798^2``,
    accepted too; the third guess exceeds 1, so the step is 1: the exact minimum. Three
    iterations, each one evaluation, after the one at ``x0``."""
    x0 = jnp.array([3.0, 4.0])

    def f(x):
        return 0.5 * jnp.sum(x * x)

    first, second = 0.202, 1.01 * (1 - 0.798 ** 2) / 0.798 ** 2
    for maxiter, x in ((1, (1 - first) * x0), (2, (1 - second) * (1 - first) * x0)):
        capped = minimize(f, x0, method="BFGS", options={"maxiter": maxiter})
        assert int(capped.status) == 1 and int(capped.nfev) == 1 + maxiter
        assert_close(capped.x, x, rtol=1e-12)
    result = minimize(f, x0, method="BFGS")
    assert bool(result.success) and int(result.status) == 0
    assert (int(result.nit), int(result.nfev), int(result.njev)) == (3, 4, 4)
    assert_close(result.x, np.zeros(2), rtol=1e-12, scale=5.0)
    assert_close(result.hess_inv, np.eye(2), rtol=1e-12)


def test_an_overshoot_fails_the_line_search_after_one_zoom_trial(x64):
    """``f = x^2`` from 0.51: the first trial moves ``x`` by 1.01 downhill, to -0.5, which
    decreases ``f`` enough but with a slope (1.02) steeper than ``c2 |phi'(0)|`` (0.9 * 1.0404)
    pointing back. The book zooms in between; JAX's zoom checks ``hi - lo`` with its sign,
    finds it negative, and gives up after one trial, though that trial (the quadratic's
    minimizer, 0) is exact. So ``x`` is the minimum, the gradient is 0 (status 0), but the
    line search failed: no success."""
    result = minimize(lambda x: jnp.sum(x * x), jnp.array([0.51]), method="BFGS")
    assert not bool(result.success) and int(result.status) == 0
    assert (int(result.nit), int(result.nfev)) == (1, 3)
    assert_close(result.x, [0.0], rtol=1e-12, scale=1.0)
    assert float(result.fun) == pytest.approx(0.0, abs=1e-24)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_zoom_that_gives_up_reports_step_one(dtype):
    """``|x|`` from 0.3 (status 3): the first trial step 1 (capped) rises to 0.7; the zoom's
    quadratic gives 1/2.8, downhill past the kink (slope 1, never flat enough), which JAX makes
    ``lo`` with ``hi`` below it; the next trial is its last. With no acceptable step, JAX
    reports the step 1 (``x = -0.7``) with ``f`` and the gradient where the zoom began (0.3 and
    1): ``fun`` is then not ``f(x)``."""
    with nbjax.enable_x64(dtype == np.float64):
        result = minimize(lambda x: jnp.sum(jnp.abs(x)), jnp.array([0.3], dtype),
                          method="BFGS")
        assert not bool(result.success) and int(result.status) == 3
        assert (int(result.nit), int(result.nfev)) == (1, 4)
        assert_close(result.x, np.array([-0.7], dtype), rtol=1e-7)
        assert_close(result.fun, np.array(0.3, dtype), rtol=1e-7)
        assert_close(result.jac, [1.0], rtol=0)


def test_bracketing_out_of_trials_leaves_x():
    """Unbounded below, the doublings run out (status 2 + 3) and the step is 0."""
    unbounded = minimize(lambda x: -jnp.sum(x * x), jnp.ones(2), method="BFGS",
                         options={"line_search_maxiter": 4})
    assert int(unbounded.status) == 5 and not bool(unbounded.success)
    assert (int(unbounded.nit), int(unbounded.nfev)) == (1, 1 + 4)
    assert_close(unbounded.x, np.ones(2), rtol=0)
    assert float(unbounded.fun) == -2
    lbfgs = minimize(lambda x: -jnp.sum(x * x), jnp.ones(2), method=LBFGS,
                     options={"maxls": 3})
    assert int(lbfgs.status) == 5 and (int(lbfgs.nit), int(lbfgs.nfev)) == (1, 1 + 3)
    assert_close(lbfgs.x, np.ones(2), rtol=0)


def test_accepted_steps_satisfy_the_strong_wolfe_conditions(x64):
    """From random points of Rosenbrock's function (4-D) along steepest descent and along
    random descent directions, eagerly and under jit: an accepted step satisfies both
    conditions, with ``f`` and its gradient as evaluated there."""
    evaluate = nbjax.value_and_grad(rosenbrock)

    def search(x, p, previous_value):
        value, gradient = evaluate(x)
        return line_search(evaluate, x, p, value, gradient, previous_value)

    accepted = 0
    for trial in range(12):
        x = jnp.asarray(RNG.uniform(-2, 2, 4))
        value, gradient = evaluate(x)
        p = -gradient if trial % 2 else jnp.asarray(RNG.standard_normal(4))
        p = jnp.where(jnp.dot(p, gradient) > 0, -p, p)
        previous_value = value + RNG.uniform(0.01, 10)  # first trial steps from small to 1
        results = search(x, p, previous_value)
        for field, jitted in zip(results, nbjax.jit(search)(x, p, previous_value),
                                 strict=True):
            assert_close(jitted, field, rtol=1e-12)
        if bool(results.failed):
            continue
        accepted += 1
        t = float(results.step)
        slope = float(jnp.dot(gradient, p))
        new_value, new_gradient = evaluate(x + t * p)
        assert float(results.value) == float(new_value)
        assert_close(results.gradient, new_gradient, rtol=0)
        assert float(new_value) <= float(value) + C1 * t * slope
        assert abs(float(jnp.dot(new_gradient, p))) <= C2 * abs(slope)
    assert accepted >= 8


# Recorded from jax.scipy.optimize.minimize(method="BFGS") of jax 0.10.2 with jax_enable_x64:
# (function, x0, success, status, nit, nfev, x, fun). JAX gives up in Rosenbrock's valley,
# where its zoom fails (the second test above shows why).
AS_JAX = [
    ("quartic", [0.0, 0.0], True, 0, 8, 10, [0.5897539423693579, 2.000000607847465],
     0.2892734239391501),
    ("rosenbrock", [-1.2, 1.0], False, 3, 8, 17, [-0.2778069614751315, 0.043338775200157394],
     1.7472911993555371),
    ("rosenbrock", [0.0, 0.0], False, 3, 1, 5, [0.17879488483310618, 0.0], 0.7765706554739193),
    ("rosenbrock", [1.2, 1.2], True, 0, 23, 29, [1.0, 1.0], 0.0),
]
FUNCTIONS = {"rosenbrock": rosenbrock,
             "quartic": lambda x: jnp.sum((x - jnp.array([1.0, 2.0])) ** 2) + x[0] ** 4}


@pytest.mark.parametrize("name, x0, success, status, nit, nfev, x, fun", AS_JAX)
def test_bfgs_results_as_jax(x64, name, x0, success, status, nit, nfev, x, fun):
    def solve(x0):
        return minimize(FUNCTIONS[name], x0, method="BFGS")

    for result in (solve(jnp.array(x0)), nbjax.jit(solve)(jnp.array(x0))):
        assert (bool(result.success), int(result.status)) == (success, status)
        assert (int(result.nit), int(result.nfev), int(result.njev)) == (nit, nfev, nfev)
        assert_close(result.x, x, rtol=1e-6 if success else 1e-10, scale=1.0)
        assert float(result.fun) == pytest.approx(fun, rel=1e-10, abs=1e-12)


def test_bfgs_batches_over_starts_that_fail_and_converge(x64):
    """Each member of the batch stops when its own line search fails or it converges."""
    starts = np.array([x0 for name, x0, *_ in AS_JAX if name == "rosenbrock"])
    check_vmap(lambda x0: minimize(rosenbrock, x0, method="BFGS"), (starts,), (0,),
               rtol=1e-10)

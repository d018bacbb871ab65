"""nbjax.experimental.ode.odeint: Dormand-Prince with adaptive steps and dense output,
differentiated by the adjoint method, checked against analytic solutions and derivatives,
finite differences, and the transformations (jit, vmap, grad)."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.experimental.ode import odeint


def decay(y, t, k):
    return -k * y


def oscillator(y, t, omega):
    return jnp.stack([y[1], -omega ** 2 * y[0]])


def forced(y, t, k, a):
    """Time-dependent, so that the gradient w.r.t. times has an integral term."""
    return -k * y * jnp.cos(t) + a * jnp.sin(2 * t)


def test_exponential_decay_matches_the_exact_solution(x64):
    ts = jnp.linspace(0.0, 3.0, 7)
    y0 = jnp.array([1.0, -2.0, 0.5])
    ys = odeint(decay, y0, ts, 0.8)
    exact = np.exp(-0.8 * np.asarray(ts))[:, None] * np.asarray(y0)
    assert ys.shape == (7, 3) and ys.dtype == np.float64
    np.testing.assert_allclose(ys, exact, rtol=1e-7, atol=1e-9)
    assert np.array_equal(ys[0], y0)  # the first row is y0 itself


def test_harmonic_oscillator_matches_cos_and_sin(x64):
    ts = jnp.linspace(0.0, 4.0, 9)
    ys = odeint(oscillator, jnp.array([1.0, 0.0]), ts, 2.0, rtol=1e-10, atol=1e-10)
    t = np.asarray(ts)
    np.testing.assert_allclose(ys[:, 0], np.cos(2 * t), atol=1e-8)
    np.testing.assert_allclose(ys[:, 1], -2 * np.sin(2 * t), atol=1e-8)


def test_pytree_state_and_args():
    def field(state, t, params):
        return {"x": state["v"], "v": -params["omega"] ** 2 * state["x"] - params["c"]}

    ts = jnp.linspace(0.0, 1.0, 4)
    state = {"x": jnp.array([1.0, 0.5]), "v": jnp.zeros(2)}
    out = odeint(field, state, ts, {"omega": 2.0, "c": jnp.array(0.3)}, rtol=1e-6, atol=1e-6)
    assert set(out) == {"x", "v"} and out["x"].shape == out["v"].shape == (4, 2)

    def as_vector(y, t, omega, c):
        return jnp.concatenate([y[2:], -omega ** 2 * y[:2] - c])

    flat = odeint(as_vector, jnp.array([1.0, 0.5, 0.0, 0.0]), ts, 2.0, 0.3,
                  rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out["x"], flat[:, :2], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out["v"], flat[:, 2:], rtol=1e-6, atol=1e-6)
    # the constant forcing moves the centre of the oscillation to -c / omega^2
    exact = (np.array([1.0, 0.5]) + 0.3 / 4) * np.cos(2 * np.asarray(ts))[:, None] - 0.3 / 4
    np.testing.assert_allclose(out["x"], exact, atol=1e-5)


def test_jit_equals_eager_and_vmap_equals_a_loop():
    ts = jnp.linspace(0.0, 2.0, 5)
    y0 = jnp.array([1.0, 0.2])
    eager = odeint(forced, y0, ts, 0.7, 0.4, rtol=1e-5, atol=1e-5)
    jitted = nbjax.jit(lambda y, k: odeint(forced, y, ts, k, 0.4, rtol=1e-5, atol=1e-5))
    np.testing.assert_allclose(jitted(y0, 0.7), eager, rtol=1e-6, atol=1e-6)

    starts = jnp.array([[1.0, 0.2], [-0.5, 3.0], [0.0, 0.0]])
    batched = nbjax.vmap(lambda y: odeint(forced, y, ts, 0.7, 0.4, rtol=1e-5, atol=1e-5))(starts)
    loop = np.stack([odeint(forced, y, ts, 0.7, 0.4, rtol=1e-5, atol=1e-5) for y in starts])
    assert batched.shape == (3, 5, 2)
    np.testing.assert_allclose(batched, loop, rtol=1e-6, atol=1e-6)


def test_gradients_match_the_analytic_ones(x64):
    # y(t) = y0 exp(-k (t - t0)); L = sum_i w_i y(t_i)
    ts = jnp.array([0.5, 1.0, 1.7, 2.5])
    w = jnp.array([0.3, -1.0, 2.0, 0.5])
    y0, k = 1.5, 0.6

    def loss(y0, ts, k):
        return jnp.sum(w * odeint(decay, y0, ts, k))

    g_y0, g_ts, g_k = nbjax.grad(loss, (0, 1, 2))(y0, ts, k)
    elapsed = np.asarray(ts) - 0.5
    ys = y0 * np.exp(-k * elapsed)
    np.testing.assert_allclose(g_y0, np.sum(w * np.exp(-k * elapsed)), rtol=1e-6)
    np.testing.assert_allclose(g_k, np.sum(w * -elapsed * ys), rtol=1e-6)
    later = -k * np.asarray(w[1:]) * ys[1:]                  # dL/dt_i = w_i y'(t_i)
    np.testing.assert_allclose(g_ts, np.concatenate([[-later.sum()], later]), rtol=1e-6)


def test_gradients_match_finite_differences(x64):
    ts = jnp.array([0.0, 0.6, 1.5])
    y0 = jnp.array([1.0, -0.4])

    def loss(y0, ts, k, a):
        return jnp.sum(jnp.sin(odeint(forced, y0, ts, k, a, rtol=1e-10, atol=1e-10)))

    grads = nbjax.grad(loss, (0, 1, 2, 3))(y0, ts, 0.8, 0.5)
    point = [np.asarray(y0), np.asarray(ts), np.array(0.8), np.array(0.5)]
    eps = 1e-5
    for which, grad in enumerate(grads):
        numeric = np.zeros(point[which].shape)
        for index in np.ndindex(point[which].shape):
            up = [p.copy() for p in point]
            down = [p.copy() for p in point]
            up[which][index] += eps
            down[which][index] -= eps
            numeric[index] = (loss(*up) - loss(*down)) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_gradient_through_a_closed_over_value_and_under_jit_and_vmap():
    ts = jnp.linspace(0.0, 1.0, 3)

    def loss(k):
        return jnp.sum(odeint(lambda y, t: -k * y, jnp.array([1.0, 2.0]), ts))

    expected = -3.0 * np.sum(np.asarray(ts) * np.exp(-0.5 * np.asarray(ts)))
    np.testing.assert_allclose(nbjax.grad(loss)(0.5), expected, rtol=1e-4)
    np.testing.assert_allclose(nbjax.jit(nbjax.grad(loss))(0.5), expected, rtol=1e-4)
    ks = jnp.array([0.5, 1.0])
    exact = -3.0 * np.sum(np.asarray(ts) * np.exp(-np.asarray(ks)[:, None] * np.asarray(ts)),
                          axis=1)
    np.testing.assert_allclose(nbjax.vmap(nbjax.grad(loss))(ks), exact, rtol=1e-4)


def test_dtypes_follow_the_state():
    ts = jnp.linspace(0.0, 1.0, 3)
    ys = odeint(decay, jnp.array([1.0]), ts, 0.5)
    assert ys.dtype == np.float32 and ts.dtype == np.float32
    np.testing.assert_allclose(ys[:, 0], np.exp(-0.5 * np.asarray(ts)), rtol=1e-6)
    assert nbjax.grad(lambda k: odeint(decay, 1.0, ts, k)[-1])(0.5).dtype == np.float32
    with nbjax.enable_x64(True):
        ts64 = jnp.linspace(0.0, 1.0, 3)
        ys64 = odeint(decay, jnp.array([1.0]), ts64, 0.5)
        assert ys64.dtype == np.float64
        g = nbjax.grad(lambda k: odeint(decay, 1.0, ts64, k)[-1])(0.5)
        assert g.dtype == np.float64


def test_bad_arguments_raise_type_errors():
    ts = jnp.linspace(0.0, 1.0, 3)
    with pytest.raises(TypeError, match=r"odeint \*args must be arrays or scalars"):
        odeint(decay, jnp.ones(2), ts, "fast")
    with pytest.raises(TypeError, match="t must be an array of floats"):
        odeint(decay, jnp.ones(2), jnp.arange(3), 0.5)


def test_too_few_steps_give_nan_and_enough_give_the_solution():
    ts = jnp.linspace(0.0, 5.0, 4)
    y0 = jnp.array([2.0, 0.5])
    for ys in (odeint(decay, y0, ts, 0.5, mxstep=0), odeint(decay, y0, ts, 0.5, hmax=0.0)):
        np.testing.assert_array_equal(ys[0], y0)
        assert np.all(np.isnan(ys[1:]))   # no step accepted: the output is not a number
    bounded = odeint(decay, y0, ts, 0.5, mxstep=200, hmax=0.5)
    np.testing.assert_allclose(bounded, odeint(decay, y0, ts, 0.5), rtol=1e-5)
    # a step budget that ends short of a requested time leaves an extrapolation, wrong
    stopped = odeint(decay, y0, ts, 0.5, mxstep=1)
    assert not np.allclose(stopped, bounded, rtol=1e-3)

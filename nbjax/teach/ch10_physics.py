"""Chapter 10, autodiff in physics: a Lagrangian whose equations of motion ``grad`` and
``hessian`` derive, a velocity Verlet step, spikes counted under ``jit(vmap(...))``."""

import numpy as np

from .. import numpy as jnp
from ..api import grad, hessian, jacfwd, vmap
from ..jit import jit
from .checking import Wrong, as_array, call, compare, exercise, require

# The spring pendulum of the exercise: a mass m on a spring (stiffness k, rest length r0)
# swinging in a vertical plane; q = (r, theta), theta measured from the downward vertical.
SPRING = {"m": 1.0, "k": 20.0, "r0": 1.0, "g": 9.81}


def _spring_accelerations(q, q_dot):
    """The spring pendulum's (r'', theta''), from its textbook equations of motion."""
    (r, theta), (r_dot, theta_dot) = q, q_dot
    m, k, r0, g = (SPRING[c] for c in ("m", "k", "r0", "g"))
    return np.array([r * theta_dot ** 2 + g * np.cos(theta) - k / m * (r - r0),
                     -(g * np.sin(theta) + 2 * r_dot * theta_dot) / r])


def _euler_lagrange(lagrangian, q, q_dot, what):
    """q'' solving M q'' = dL/dq - (d2L/dq_dot dq) q_dot, with M = d2L/dq_dot2: the
    accelerations ``lagrangian`` implies."""
    mass = np.asarray(call(hessian(lagrangian, 1), q, q_dot, what=what), np.float64)
    require(mass.shape == (2, 2), f"{what} should be a number (its Hessian in q_dot has "
                                  f"shape {mass.shape})")
    mixed = np.asarray(call(jacfwd(grad(lagrangian, 1), 0), q, q_dot, what=what), np.float64)
    force = np.asarray(call(grad(lagrangian, 0), q, q_dot, what=what), np.float64)
    if abs(np.linalg.det(mass)) < 1e-9:
        raise Wrong(f"the mass matrix d2L/dq_dot2 of {what} is singular: is the kinetic "
                    "energy missing a velocity?")
    return np.linalg.solve(mass, force - mixed @ np.asarray(q_dot, np.float64))


@exercise("ch10.spring_pendulum")
def spring_pendulum(answer):
    """``answer(q, q_dot)``: a Lagrangian of the spring pendulum with the constants of
    ``SPRING``; checked through the accelerations its Euler-Lagrange equations give."""
    rng = np.random.default_rng(30)
    for _ in range(3):
        q = np.array([rng.uniform(0.8, 1.4), rng.uniform(-1.5, 1.5)], np.float32)
        q_dot = rng.uniform(-2, 2, 2).astype(np.float32)
        what = f"spring_pendulum(q, q_dot) at q = {np.round(q, 3)}, q_dot = {np.round(q_dot, 3)}"
        value = as_array(call(answer, jnp.asarray(q), jnp.asarray(q_dot), what=what), what)
        require(value.shape == (), f"{what} should be a number, not an array of shape "
                                   f"{value.shape}")
        got = _euler_lagrange(answer, jnp.asarray(q), jnp.asarray(q_dot), what)
        compare(got, _spring_accelerations(q.astype(np.float64), q_dot.astype(np.float64)),
                f"the acceleration vector (r'', theta'') your Lagrangian gives at q = "
                f"{np.round(q, 3)}, q_dot = {np.round(q_dot, 3)}", rtol=1e-3, atol=1e-3)


def _verlet(accel, q, v, dt):
    half = v + dt / 2 * accel(q)
    q = q + dt * half
    return q, half + dt / 2 * accel(q)


@exercise("ch10.verlet_step")
def verlet_step(answer):
    """``answer(accel, q, v, dt)``: one velocity Verlet step, the pair ``(q, v)`` after
    ``dt``, for accelerations ``accel(q)``."""
    systems = (("a pair of springs", lambda q: -jnp.array([1.0, 4.0]) * q),
               ("a pair of pendulums", lambda q: -9.81 * jnp.sin(q)))
    rng = np.random.default_rng(31)
    for name, accel in systems:
        q, v = (jnp.asarray(rng.uniform(-1, 1, 2), jnp.float32) for _ in range(2))
        what = f"verlet_step(accel, q, v, 0.1) for {name}"
        got = call(answer, accel, q, v, 0.1, what=what)
        require(isinstance(got, tuple) and len(got) == 2, f"{what} should return a pair (q, v)")
        for label, g, w in zip(("q", "v"), got, _verlet(accel, q, v, 0.1)):
            compare(g, w, f"the new {label} of {what}", rtol=1e-5, atol=1e-6)


def _traces(n=240):
    """Four voltage traces (mV): a slow and a fast oscillation around -20, one starting in
    the middle of a spike, one at rest."""
    t = np.linspace(0.0, 1.0, n)
    return np.stack([-20 + 50 * np.sin(2 * np.pi * 3 * t), -20 + 50 * np.sin(2 * np.pi * 7 * t),
                     -20 + 50 * np.cos(2 * np.pi * 2 * t), np.full(n, -65.0)]).astype(np.float32)


@exercise("ch10.count_spikes")
def count_spikes(answer):
    """``answer(v)``: the number of times the trace ``v`` crosses 0 mV upwards, written so
    that ``jit(vmap(count_spikes))`` runs on a batch of traces."""
    traces = _traces()
    what = "jit(vmap(count_spikes))(traces)"
    got = as_array(call(jit(vmap(answer)), jnp.asarray(traces), what=what),
                   f"the result of {what}")
    want = np.sum((traces[:, :-1] < 0) & (traces[:, 1:] >= 0), axis=1)
    if got.shape == want.shape and np.array_equal(got, np.sum(traces >= 0, axis=1)):
        raise Wrong(f"{what} counts the samples above 0 mV: count the upward crossings")
    require(got.shape != want.shape or got[2] != want[2] + 1,
            f"{what} counts a spike in the trace that starts above 0 mV: a spike starts "
            "with an upward crossing")
    compare(got, want, f"the spike counts of {what}")

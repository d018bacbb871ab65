"""Chapter 2, forward and reverse mode: a backward rule, the cost of each mode, a Jacobian
built from vector-Jacobian products."""

import numpy as np

from .. import numpy as jnp
from ..api import jacfwd
from .checking import Wrong, call, compare, exercise, require


@exercise("ch02.div_backward")
def div_backward(answer):
    """``answer(x1, x2, ybar)``: the cotangents ``(x1bar, x2bar)`` of ``y = x1 / x2``."""
    rng = np.random.default_rng(4)
    for x1, ybar in rng.uniform(-2, 2, (4, 2)):
        x2 = rng.choice([-1, 1]) * rng.uniform(0.5, 2)
        what = f"div_backward({x1:.3f}, {x2:.3f}, ybar={ybar:.3f})"
        got = call(answer, x1, x2, ybar, what=what)
        require(isinstance(got, tuple) and len(got) == 2,
                f"{what} should return a pair (x1bar, x2bar)")
        compare(got[0], ybar / x2, f"x1bar of {what}")
        compare(got[1], -ybar * x1 / x2 ** 2, f"x2bar of {what}")


@exercise("ch02.cheaper_mode")
def cheaper_mode(answer):
    """``answer = (mode, passes)``: the mode that builds the Jacobian of a function of 1000
    inputs and 3 outputs in fewer passes, and how many passes it needs."""
    require(isinstance(answer, tuple) and len(answer) == 2, "the answer should be a pair "
            "(mode, passes), e.g. ('forward', 10)")
    mode, passes = answer
    require(mode in ("forward", "reverse"), "the mode should be 'forward' or 'reverse'")
    if mode != "reverse":
        raise Wrong("that mode is not the cheaper one: count the passes each mode needs")
    require(passes == 3, "the mode is right, the number of passes is not")


def _stretch(x):
    """R^3 -> R^2, a wide Jacobian."""
    return jnp.stack([x[0] * x[1], jnp.sin(x[2]) + x[0] ** 2])


def _mix(x):
    """R^4 -> R^4, a square Jacobian with no zeros (a transposed one is wrong)."""
    return jnp.tanh(x) * jnp.sum(x ** 2)


@exercise("ch02.jacobian_by_vjp")
def jacobian_by_vjp(answer):
    """``answer(f, x)``: the Jacobian of ``f`` at ``x``, one row per output."""
    rng = np.random.default_rng(5)
    for f, n, m in ((_stretch, 3, 2), (_mix, 4, 4)):
        x = jnp.asarray(rng.uniform(-1, 1, n), jnp.float32)
        what = f"jacobian_by_vjp(f, x) for an f from R^{n} to R^{m}"
        compare(call(answer, f, x, what=what), jacfwd(f)(x), f"the result of {what}",
                rtol=1e-4, atol=1e-5)

"""Chapter 4, differentiation in nbjax: custom derivatives (log1pexp, gradient clipping),
the ``where`` trap, Hessian-vector products."""

import numpy as np

from .. import numpy as jnp
from ..api import grad, hessian
from .checking import call, compare, exercise, random_points


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(x / 2))


@exercise("ch04.log1pexp")
def log1pexp(answer):
    """``answer(x)``: log(1 + e^x), whose gradient (the sigmoid) is right even for large x."""
    for x in random_points(9, 4, -5, 5):
        what = f"log1pexp({x:.3f})"
        compare(call(answer, x, what=what), np.logaddexp(0, x), what, rtol=1e-5)
    for x in (-30.0, -1.3, 0.4, 10.0, 100.0):
        what = f"the gradient of log1pexp at x = {x}"
        compare(call(grad(answer), x, what=what), _sigmoid(x), what, rtol=1e-5)


@exercise("ch04.clip_gradient")
def clip_gradient(answer):
    """``answer(x)``: x unchanged, but the gradient through it clipped to [-1, 1]."""
    for x in random_points(10, 3):
        what = f"clip_gradient({x:.3f})"
        compare(call(answer, x, what=what), x, what)
        for scale in (0.5, 3.0, -4.0):
            what = f"the gradient of {scale} * clip_gradient(x) at x = {x:.3f}"
            got = call(grad(lambda x: scale * answer(x)), x, what=what)
            compare(got, np.clip(scale, -1, 1), what)


@exercise("ch04.safe_log")
def safe_log(answer):
    """``answer(x)``: log x where x > 0 and 0 elsewhere, with a finite gradient everywhere."""
    for x in (-2.0, -0.5, 0.0, 0.3, 2.0):
        what = f"safe_log({x})"
        compare(call(answer, x, what=what), np.log(x) if x > 0 else 0.0, what)
        what = f"the gradient of safe_log at x = {x}"
        compare(call(grad(answer), x, what=what), 1 / x if x > 0 else 0.0, what)


def _bowl(x):
    return jnp.sum((1 - x[:-1]) ** 2 + 10 * (x[1:] - x[:-1] ** 2) ** 2)


def _wave(x):
    return jnp.sum(jnp.sin(x) * x ** 2) + x[0] * x[-1]


@exercise("ch04.hvp")
def hvp(answer):
    """``answer(f, x, v)``: the Hessian of ``f`` at ``x`` times ``v``."""
    rng = np.random.default_rng(11)
    for name, f in (("a Rosenbrock-like bowl", _bowl), ("a wave", _wave)):
        x, v = (jnp.asarray(rng.uniform(-1, 1, 4), jnp.float32) for _ in range(2))
        what = f"hvp(f, x, v) for {name} in R^4"
        compare(call(answer, f, x, v, what=what), hessian(f)(x) @ v, f"the result of {what}",
                rtol=1e-4, atol=1e-4)

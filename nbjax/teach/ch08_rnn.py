"""Chapter 8, recurrent networks: a GRU cell run by ``scan``, and generating a sequence by
feeding a step's output back as the next input."""

import numpy as np

from .. import numpy as jnp
from ..api import make_jaxpr
from ..jit import jit
from ..lax import scan
from .checking import call, compare, exercise, require

INPUTS, HIDDEN = 2, 3


def _gru_params(seed):
    """The GRU's weights: W* (inputs, hidden), U* (hidden, hidden), b* (hidden,)."""
    rng = np.random.default_rng(seed)
    shapes = {"W": (INPUTS, HIDDEN), "U": (HIDDEN, HIDDEN), "b": (HIDDEN,)}
    return {kind + gate: rng.normal(0, 0.8, shapes[kind]).astype(np.float32)
            for gate in "zrn" for kind in "WUb"}


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(x / 2))


def _gru_step(p, h, x):
    """The GRU of the notebook's equations, in float64."""
    z = _sigmoid(x @ p["Wz"] + h @ p["Uz"] + p["bz"])
    r = _sigmoid(x @ p["Wr"] + h @ p["Ur"] + p["br"])
    n = np.tanh(x @ p["Wn"] + (r * h) @ p["Un"] + p["bn"])
    return (1 - z) * n + z * h


@exercise("ch08.gru_cell")
def gru_cell(answer):
    """``answer(params, h, x)``: the GRU's next hidden state; tried on one step, then run
    by ``lax.scan`` under ``jit`` along a sequence."""
    params = _gru_params(40)
    rng = np.random.default_rng(41)
    h, xs = rng.normal(0, 1, HIDDEN), rng.normal(0, 1, (5, INPUTS))
    as_f32 = {k: jnp.asarray(v) for k, v in params.items()}
    what = "gru_cell(params, h, x)"
    got = call(answer, as_f32, jnp.asarray(h, jnp.float32), jnp.asarray(xs[0], jnp.float32),
               what=what)
    compare(got, _gru_step(params, h, xs[0]), f"the result of {what}", rtol=1e-4, atol=1e-6)

    def run(h, xs):
        return scan(lambda h, x: (answer(as_f32, h, x),) * 2, h, xs)[1]

    what = "the hidden states of gru_cell run by scan along 5 steps"
    got = call(jit(run), jnp.asarray(h, jnp.float32), jnp.asarray(xs, jnp.float32), what=what)
    want = []
    for x in xs:
        h = _gru_step(params, h, x)
        want.append(h)
    compare(got, np.array(want), what, rtol=1e-4, atol=1e-6)


def _step(carry, x):
    """The step the generation exercise is tried with: a damped rotation driven by x."""
    a, b = carry
    a, b = 0.9 * a - 0.4 * b + 0.3 * x, 0.4 * a + 0.9 * b
    return (a, b), jnp.tanh(a + 0.5 * b)


@exercise("ch08.generate")
def generate(answer):
    """``answer(step, carry, x0, n)``: the ``n`` outputs of ``step`` when each output is the
    next input, starting from ``carry`` and the input ``x0``, written with ``lax.scan``."""
    start, x0, n = (jnp.float32(0.5), jnp.float32(-0.2)), jnp.float32(1.0), 6
    what = f"generate(step, carry, x0, {n})"
    got = call(answer, _step, start, x0, n, what=what)   # a placeholder is found here first
    jaxpr = call(lambda: make_jaxpr(lambda c, x: answer(_step, c, x, n))(start, x0),
                 what=f"{what}, traced")
    require("scan" in str(jaxpr), "generate should use lax.scan (its jaxpr has no scan)")
    want, carry, x = [], start, x0
    for _ in range(n):
        carry, x = _step(carry, x)
        want.append(float(x))
    compare(got, np.array(want), f"the result of {what}", rtol=1e-5, atol=1e-6)

"""Chapter 5, jit and control flow: loops that jit, scan, pytrees."""

import numpy as np

from .. import numpy as jnp
from ..api import make_jaxpr
from ..jit import jit
from ..tree_util import tree_flatten, tree_structure
from .checking import call, compare, exercise, require


def _collatz(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@exercise("ch05.collatz_steps")
def collatz_steps(answer):
    """``answer(n)``: the number of Collatz steps from ``n`` to 1, under ``jit``."""
    for n in (1, 6, 7, 27):
        what = f"jit(collatz_steps)({n})"
        compare(call(jit(answer), jnp.int32(n), what=what), _collatz(n), what)


@exercise("ch05.running_sum")
def running_sum(answer):
    """``answer(xs)``: the running sums of ``xs`` (``np.cumsum``), written with ``lax.scan``."""
    xs = jnp.asarray(np.random.default_rng(12).uniform(-1, 1, 7), jnp.float32)
    call(answer, xs, what="running_sum(xs)")   # a placeholder says so before the jaxpr is read
    jaxpr = call(lambda: make_jaxpr(answer)(xs), what="running_sum(xs), traced")
    require("scan" in str(jaxpr), "running_sum should use lax.scan (its jaxpr has no scan)")
    what = "jit(running_sum)(xs)"
    compare(call(jit(answer), xs, what=what), np.cumsum(np.asarray(xs)), f"the result of {what}")


@exercise("ch05.scale_tree")
def scale_tree(answer):
    """``answer(tree, factor)``: the same pytree with every leaf multiplied by ``factor``."""
    tree = {"layers": [(jnp.ones((2, 3)), jnp.arange(3.0))], "scale": jnp.float32(2.0)}
    what = "scale_tree(params, 3.0)"
    got = call(answer, tree, 3.0, what=what)
    require(tree_structure(got) == tree_structure(tree),
            f"{what} has another structure than params: keep the same containers")
    for i, (g, t) in enumerate(zip(tree_flatten(got)[0], tree_flatten(tree)[0])):
        compare(g, 3.0 * np.asarray(t), f"leaf {i} of {what}")

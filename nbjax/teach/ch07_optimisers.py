"""Chapter 7, optimisation algorithms: Nesterov momentum and AdaGrad as ``(init, update)``
pairs of pure functions over pytrees, and clipping gradients by their global norm."""

import numpy as np

from .. import numpy as jnp
from ..jit import jit
from ..tree_util import tree_flatten, tree_structure
from .checking import Wrong, as_array, call, compare, exercise, require


def _tree(seed, scale=1.0):
    """A small parameter pytree (a dense layer's weights and bias), reproducible."""
    rng = np.random.default_rng(seed)
    return {"w": jnp.asarray(rng.normal(0, scale, (2, 3)), jnp.float32),
            "b": jnp.asarray(rng.normal(0, scale, 3), jnp.float32)}


def _leaves(tree, like, what):
    """The leaves of ``tree`` as NumPy arrays, once its structure is that of ``like``."""
    require(tree_structure(tree) == tree_structure(like),
            f"{what} has another structure than the parameters: keep the same containers "
            "(tree_map keeps them)")
    return [as_array(leaf, what) for leaf in tree_flatten(tree)[0]]


def _check_optimiser(answer, name, hyper, reference, steps=4):
    """Run ``answer(**hyper)``'s (init, update), the update under ``jit``, for ``steps``
    steps of made-up gradients, against ``reference(p, g, s) -> (p, s)`` applied leaf by
    leaf in float64 from the state ``s = None``."""
    what = f"{name}({', '.join(f'{k}={v}' for k, v in hyper.items())})"
    pair = call(lambda: answer(**hyper), what=what)
    require(isinstance(pair, tuple) and len(pair) == 2,
            f"{what} should return a pair of functions (init, update)")
    init, update = pair
    params = _tree(20)
    state = call(init, params, what="init(params)")
    step = jit(update)
    want = [(np.asarray(p, np.float64), None) for p in tree_flatten(params)[0]]
    for i in range(1, steps + 1):
        grads = _tree(20 + i)
        what = f"the parameters after {i} update{'s' * (i > 1)}"
        result = call(step, params, grads, state, what=f"jit(update) at step {i}")
        require(isinstance(result, tuple) and len(result) == 2,
                "update(params, grads, state) should return a pair (new params, new state)")
        params, state = result
        want = [reference(p, np.asarray(g, np.float64), s)
                for (p, s), g in zip(want, tree_flatten(grads)[0])]
        for leaf_name, got, (p, _) in zip(sorted(grads), _leaves(params, grads, what), want):
            compare(got, p, f"leaf {leaf_name!r} of {what}", rtol=1e-4, atol=1e-6)


def _nesterov(lr, beta):
    def step(p, g, v):
        v = g if v is None else beta * v + g
        return p - lr * (g + beta * v), v
    return step


def _adagrad(lr, eps):
    def step(p, g, s):
        s = g ** 2 if s is None else s + g ** 2
        return p - lr * g / (np.sqrt(s) + eps), s
    return step


@exercise("ch07.nesterov")
def nesterov(answer):
    """``answer(lr, beta)``: Nesterov momentum's (init, update), v <- beta v + g,
    p <- p - lr (g + beta v)."""
    hyper = {"lr": 0.1, "beta": 0.9}
    _check_optimiser(answer, "nesterov", hyper, _nesterov(**hyper))


@exercise("ch07.adagrad")
def adagrad(answer):
    """``answer(lr, eps)``: AdaGrad's (init, update), s <- s + g^2,
    p <- p - lr g / (sqrt(s) + eps)."""
    hyper = {"lr": 0.5, "eps": 1e-8}
    _check_optimiser(answer, "adagrad", hyper, _adagrad(**hyper))


@exercise("ch07.clip_by_global_norm")
def clip_by_global_norm(answer):
    """``answer(grads, max_norm)``: every leaf scaled by one factor so that the norm of all
    the leaves together is at most ``max_norm`` (unchanged when it already is)."""
    grads = _tree(30, scale=2.0)
    leaves = [np.asarray(g, np.float64) for g in tree_flatten(grads)[0]]
    norm = np.sqrt(sum(np.sum(g ** 2) for g in leaves))
    for max_norm in (1.0, 2 * norm):
        what = f"clip_by_global_norm(grads, {max_norm:.3g}) (their global norm is {norm:.3g})"
        got = _leaves(call(answer, grads, max_norm, what=what), grads, what)
        scale = min(1.0, max_norm / norm)
        each = [g * min(1.0, max_norm / np.linalg.norm(g)) for g in leaves]
        if all(a.shape == b.shape and np.allclose(a, b, rtol=1e-4) for a, b in zip(got, each)) \
                and not all(np.allclose(a, scale * g) for a, g in zip(each, leaves)):
            raise Wrong(f"{what}: each leaf was clipped by its own norm; the norm is that of "
                        "all the leaves together")
        for leaf_name, g, leaf in zip(sorted(grads), got, leaves):
            compare(g, scale * leaf, f"leaf {leaf_name!r} of {what}", rtol=1e-4, atol=1e-6)

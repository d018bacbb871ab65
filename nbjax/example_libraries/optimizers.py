"""``nbjax.example_libraries.optimizers``: gradient-descent optimizers written as pure
functions, as in ``jax.example_libraries.optimizers``.

An optimizer is a triple of functions ``(init_fun, update_fun, get_params)``:

* ``init_fun(params)`` turns a pytree of parameters into an optimizer state (the parameters
  plus whatever the method remembers between steps, such as a momentum);
* ``update_fun(step, grads, opt_state)`` returns the next state, given the step number and
  gradients shaped like the parameters;
* ``get_params(opt_state)`` reads the parameters back out, so that
  ``get_params(init_fun(params))`` is ``params``.

Nothing is mutated: the state goes in and a new state comes out, which is what lets the whole
training step run under ``nbjax.jit``::

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)

    @nbjax.jit
    def step(i, opt_state, batch):
        grads = nbjax.grad(loss)(get_params(opt_state), batch)
        return opt_update(i, grads, opt_state)

Each method below is written for a single array; the ``optimizer`` decorator lifts it to
pytrees of parameters. Like JAX's, these are teaching examples; Optax is the full library.
"""

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

from .. import numpy as jnp
from .. import tree_util

__all__ = [
    "InitFn", "JoinPoint", "Optimizer", "OptimizerState", "Params", "ParamsFn", "Schedule",
    "Step", "UpdateFn", "Updates", "adagrad", "adam", "adamax", "clip_grads", "constant",
    "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule", "momentum",
    "nesterov", "optimizer", "pack_optimizer_state", "piecewise_constant", "polynomial_decay",
    "rmsprop", "rmsprop_momentum", "sgd", "sm3", "unpack_optimizer_state",
]

Params = Any  # any pytree of arrays
Updates = Params  # gradients are shaped like the parameters
Step = int
Schedule = Callable[[Step], float]


# --- the optimizer state: a pytree of pytrees ------------------------------------------------
#
# There are two levels of trees. The parameters form the "outer" tree; each of its leaves
# (one array) gets an "inner" tree of state from the method (say (x, m, v) for Adam). The
# state is kept flattened: one list of inner leaves per outer leaf, plus the tree
# definitions needed to rebuild both levels.

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
OptimizerState.__doc__ = """The state of an optimizer over a pytree of parameters:
``packed_state`` holds, per parameter leaf, the list of its state's leaves; ``tree_def`` is the
parameters' tree definition and ``subtree_defs`` those of each leaf's state."""


def _flatten_state(state):
    """The arrays are the children (so ``jit`` traces them); the tree definitions are static
    auxiliary data (so ``jit`` keys its cache on them)."""
    return (state.packed_state,), (state.tree_def, state.subtree_defs)


def _unflatten_state(aux, children):
    return OptimizerState(children[0], aux[0], aux[1])


tree_util.register_pytree_node(OptimizerState, _flatten_state, _unflatten_state)

InitFn = Callable[[Params], OptimizerState]
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]


class Optimizer(NamedTuple):
    """The triple every optimizer constructor returns (it unpacks like a plain tuple)."""
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_each(trees):
    """(the leaves of each tree, the tree definition of each), as two tuples."""
    pairs = [tree_util.tree_flatten(tree) for tree in trees]
    return tuple(leaves for leaves, _ in pairs), tuple(tree for _, tree in pairs)


def _unflatten_each(tree_defs, leaf_lists):
    """The inverse of ``_flatten_each``: one tree per (definition, leaves) pair."""
    if len(tree_defs) != len(leaf_lists):
        raise ValueError(f"{len(tree_defs)} tree definitions for {len(leaf_lists)} leaf lists")
    return [tree_util.tree_unflatten(d, leaves) for d, leaves in zip(tree_defs, leaf_lists)]


def _lift_init(init):
    @functools.wraps(init)
    def tree_init(x0_tree):
        x0_flat, tree = tree_util.tree_flatten(x0_tree)
        states_flat, subtrees = _flatten_each([init(x0) for x0 in x0_flat])
        return OptimizerState(states_flat, tree, subtrees)
    return tree_init


def _lift_update(update):
    @functools.wraps(update)
    def tree_update(i, grad_tree, opt_state):
        states_flat, tree, subtrees = opt_state
        grad_flat, grad_tree_def = tree_util.tree_flatten(grad_tree)
        if grad_tree_def != tree:
            raise TypeError("optimizer update function was passed a gradient tree that did not "
                            "match the parameter tree structure with which it was initialized: "
                            f"parameter tree {tree} and grad tree {grad_tree_def}.")
        states = _unflatten_each(subtrees, states_flat)
        new_states = [update(i, g, state) for g, state in zip(grad_flat, states)]
        new_states_flat, new_subtrees = _flatten_each(new_states)
        for subtree, new_subtree in zip(subtrees, new_subtrees):
            if new_subtree != subtree:
                raise TypeError("optimizer update function produced an output structure that "
                                f"did not match its input structure: input {subtree} and "
                                f"output {new_subtree}.")
        return OptimizerState(new_states_flat, tree, subtrees)
    return tree_update


def _lift_get_params(get_params):
    @functools.wraps(get_params)
    def tree_get_params(opt_state):
        states_flat, tree, subtrees = opt_state
        states = _unflatten_each(subtrees, states_flat)
        return tree_util.tree_unflatten(tree, [get_params(state) for state in states])
    return tree_get_params


def optimizer(opt_maker):
    """Decorator: turn a maker of ``(init, update, get_params)`` for one array into a maker of
    an ``Optimizer`` for any pytree of parameters.

    A method only has to say what happens to a single array; the lifted functions flatten the
    parameters (and gradients), apply it leaf by leaf, and keep the result in an
    ``OptimizerState``. ``update`` must keep the structure of each leaf's state, or the
    lifted update raises ``TypeError``, as does a gradient tree shaped unlike the parameters.
    """
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)
        return Optimizer(_lift_init(init), _lift_update(update), _lift_get_params(get_params))
    return tree_opt_maker


# --- the methods -------------------------------------------------------------------------------
#
# Each maker takes ``step_size``, a number or a schedule (a function of the step number), and
# returns its per-array triple. Hyperparameters stay Python floats, which are weakly typed:
# float32 parameters keep float32 state.

def _first(state):
    """The parameters, where a method's state is the tuple ``(x, ...)``."""
    return state[0]


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: ``x <- x - step_size * g``.

    Args:
      step_size: a positive number, or a schedule from the step number to one.
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x
    return Optimizer(init, update, get_params)


def _with_zeros(count):
    """The ``init`` of a method that keeps ``count`` running statistics of the gradients
    (a velocity, averages of squares, moments): the parameters, then ``count`` zeros."""
    return lambda x0: (x0, *[jnp.zeros_like(x0)] * count)


@optimizer
def momentum(step_size: Schedule, mass: float):
    """SGD with (heavy-ball) momentum: the step follows a running sum of gradients,
    ``v <- mass * v + g``, ``x <- x - step_size * v``, which smooths out zig-zags.

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      mass: the momentum coefficient, how much of the previous velocity is kept.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity
    return _with_zeros(1), update, _first


@optimizer
def nesterov(step_size: Schedule, mass: float):
    """SGD with Nesterov momentum: like ``momentum``, but the step looks one velocity update
    ahead, ``x <- x - step_size * (mass * v + g)``.

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      mass: the momentum coefficient.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity
    return _with_zeros(1), update, _first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al., 2011), with momentum: each coordinate's step is divided by the
    root of the sum of its squared gradients so far, so rarely-moving coordinates take larger
    steps. A coordinate whose gradients were all zero is left alone (not divided by zero).

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      momentum: the weight of the previous step in the new one.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        g_sq_inv_sqrt = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return _with_zeros(2), update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: divide the gradient by the root of a running average of its square, so the
    step has about the same size whatever the gradient's scale.

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      gamma: the decay of the running average.
      eps: keeps the division finite when the average is zero.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad
    return _with_zeros(1), update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp whose scaled steps are accumulated with momentum (a separate maker because
    the state has one more array).

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      gamma: the decay of the running average of squared gradients.
      eps: keeps the division finite when the average is zero.
      momentum: the weight of the previous step in the new one.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom
    return _with_zeros(2), update, _first


def _bias_correction(beta, m, i):
    """``1 - beta ** (i + 1)``, in ``m``'s dtype: the moment estimates start at zero, so
    early on they are too small by this factor (Adam's paper, section 3)."""
    return 1 - jnp.asarray(beta, m.dtype) ** (i + 1)


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba, 2015): RMSProp-like scaling of a momentum, with both running
    averages corrected for starting at zero.

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      b1: the decay of the first-moment (mean) estimate.
      b2: the decay of the second-moment (uncentred variance) estimate.
      eps: keeps the division finite.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / _bias_correction(b1, m, i)
        vhat = v / _bias_correction(b2, m, i)
        return x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps), m, v
    return _with_zeros(2), update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax, Adam's variant with the infinity norm: the second moment becomes a decaying
    maximum of ``|g|``, which needs no bias correction.

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      b1: the decay of the first-moment estimate.
      b2: the decay of the running maximum.
      eps: keeps the division finite.
    """
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / _bias_correction(b1, m, i)) * m / (u + eps)
        return x, m, u
    return _with_zeros(2), update, _first


def _without_axis(axes, axis):
    """``axes`` with ``axis`` taken out, as a tuple."""
    return tuple(a for a in axes if a != axis)


def _along_axis(ndim, v, axis):
    """The vector ``v`` viewed as an ``ndim``-dimensional array that varies only along
    ``axis`` (size 1 elsewhere), ready to broadcast against the parameters."""
    return v[tuple(slice(None) if a == axis else None for a in range(max(ndim, 1)))]


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al., 2019), memory-efficient Adagrad: instead of one accumulator per
    coordinate, it keeps one vector per axis (rows, columns, ...) holding the maxima of the
    accumulator, and bounds each coordinate's sum by the smallest of its vectors' entries.

    The state also records the parameters' original shape (scalars are kept as 1-vectors).

    Args:
      step_size: a positive number, or a schedule from the step number to one.
      momentum: the weight of the previous step in the new one.
    """
    step_size = make_schedule(step_size)

    def init(x0):
        x_shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        vs = [jnp.zeros(size, dtype=x0.dtype) for size in x0.shape]
        return x0, jnp.zeros_like(x0), vs, x_shape

    def update(i, g, state):
        x, m, vs, x_shape = state
        vs = [_along_axis(g.ndim, v, axis) for axis, v in enumerate(vs)]
        accum = functools.reduce(jnp.minimum, vs) + jnp.square(g)
        accum_inv_sqrt = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * accum_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        axes = range(x.ndim)
        vs = [accum.max(_without_axis(axes, axis)) for axis in axes]
        return x, m, vs, x_shape

    def get_params(state):
        x, _, _, x_shape = state
        return x.reshape(x_shape)
    return init, update, get_params


# --- learning-rate schedules -------------------------------------------------------------------
#
# A schedule maps the step number (a Python int, or a traced integer under jit) to a step size.

def constant(step_size) -> Schedule:
    """The same step size at every step."""
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    """``step_size * decay_rate ** (i / decay_steps)``: multiplied by ``decay_rate`` every
    ``decay_steps`` steps, smoothly."""
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """``step_size / (1 + decay_rate * i / decay_steps)``; with ``staircase`` the quotient is
    rounded down, so the step size drops in steps every ``decay_steps``."""
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """From ``step_size`` down to ``final_step_size`` along ``(1 - i / decay_steps) ** power``
    over ``decay_steps`` steps, then constant."""
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any):
    """``values[k]`` for steps after ``k`` of the ``boundaries`` (a step equal to a boundary
    still belongs to the piece before it). Computed by counting the boundaries passed, with
    no Python ``if``, so it works on a traced step under ``jit``."""
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")

    def schedule(i):
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule) -> Schedule:
    """A schedule as is, or a scalar as the constant schedule: what every method does with
    its ``step_size``."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# --- utilities ---------------------------------------------------------------------------------

def l2_norm(tree):
    """The l2 norm of a pytree of arrays, as if its leaves were one long vector (weight
    decay, gradient clipping)."""
    leaves = tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """Scale a pytree of gradients down so that its ``l2_norm`` is at most ``max_norm``. One
    factor for the whole tree keeps the update's direction. ``jnp.where`` rather than ``if``:
    the norm may be traced."""
    norm = l2_norm(grad_tree)

    def normalize(g):
        return jnp.where(norm < max_norm, g, g * (max_norm / norm))
    return tree_util.tree_map(normalize, grad_tree)


# --- serialization -----------------------------------------------------------------------------

class JoinPoint:
    """Marks, in an unpacked optimizer state, where an outer parameter leaf holds its inner
    state tree. It is not a registered pytree node, so flattening the outer tree stops at
    it."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        """Iterable like the containers around it (serializers walk into it)."""
        yield self.subtree


def unpack_optimizer_state(opt_state):
    """An ``OptimizerState`` as the parameters' tree with a ``JoinPoint`` holding each leaf's
    state tree: plain nested containers, which pickle and other serializers can store (the
    packed form holds tree definitions)."""
    states_flat, tree_def, subtree_defs = opt_state
    subtrees = _unflatten_each(subtree_defs, states_flat)
    return tree_util.tree_unflatten(tree_def, [JoinPoint(subtree) for subtree in subtrees])


def pack_optimizer_state(marked_pytree):
    """The inverse of ``unpack_optimizer_state``: an ``OptimizerState`` from a tree whose
    leaves are ``JoinPoint``s."""
    sentinels, tree_def = tree_util.tree_flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise AssertionError("pack_optimizer_state: every leaf must be a JoinPoint")
    states_flat, subtree_defs = _flatten_each([s.subtree for s in sentinels])
    return OptimizerState(states_flat, tree_def, subtree_defs)

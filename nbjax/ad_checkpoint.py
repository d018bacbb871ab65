"""``nbjax.ad_checkpoint`` (``jax.ad_checkpoint``): checkpoint names and policies, and
``print_saved_residuals``, which lists what reverse mode keeps from the forward pass for the
backward pass (the memory ``checkpoint`` trades for recomputation)."""

import inspect

from . import checkpoint_policies  # noqa: F401
from .calls import as_array
from .checkpoint import (Offloadable, Recompute, Saveable, checkpoint,  # noqa: F401
                         checkpoint_name, checkpoint_p, name_p)
from .core import ClosedJaxpr, Var, get_aval, pytree
from .interpreters import staging
from .interpreters.partial_eval import linearize_flat

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "Saveable", "Recompute",
           "Offloadable", "saved_residuals", "print_saved_residuals"]


def saved_residuals(f, *args, **kwargs):
    """``[(type, description)]``: each value that ``vjp(f, *args, **kwargs)`` keeps for
    its backward pass, and where it comes from (an argument, a constant, or the equation
    that computed it, with its line)."""
    leaves, in_tree = pytree.tree_flatten((args, kwargs))

    def residuals(*leaves):
        def flat(*primals):
            call_args, call_kwargs = in_tree.unflatten(primals)
            return pytree.tree_leaves(f(*call_args, **call_kwargs))
        return linearize_flat(flat, leaves, "saved_residuals")[2]

    jaxpr, _ = staging.trace_to_jaxpr(residuals, [get_aval(as_array(x)) for x in leaves],
                                      staging.describe(f, "saved_residuals"))
    names = dict(zip(jaxpr.invars, _argument_names(f, args, kwargs)))
    producers = {v: eqn for eqn in jaxpr.eqns for v in eqn.outvars}
    constvars = set(jaxpr.constvars)
    return [(atom.aval, _origin(atom, names, producers, constvars)) for atom in jaxpr.outvars]


def print_saved_residuals(f, *args, **kwargs):
    """Print ``saved_residuals``, one line per value (as JAX does)."""
    for aval, description in saved_residuals(f, *args, **kwargs):
        print(aval.str_short(), description)


def _argument_names(f, args, kwargs):
    """The name of each leaf of ``(args, kwargs)`` as the user wrote it: ``x``, ``p['w']``."""
    try:
        bound = inspect.signature(f).bind(*args, **kwargs)
        named = [(name, value) for name, value in bound.arguments.items()]
    except (TypeError, ValueError):  # no signature, or one that does not fit
        named = [(f"args[{i}]", a) for i, a in enumerate(args)] + list(kwargs.items())
    names = []
    for name, value in named:
        for path, _ in pytree.tree_flatten_with_path(value)[0]:
            names.append(name + pytree.keystr(path))
    return names


def _origin(atom, names, producers, constvars):
    if not isinstance(atom, Var) or atom in constvars:
        return "from a constant"
    if atom in names:
        return f"from the argument {names[atom]}"
    eqn = producers[atom]
    if eqn.primitive is checkpoint_p:  # saved by a policy: say which value inside
        return _inner_origin(eqn, atom, names, producers, constvars)
    if eqn.primitive is name_p:
        return f"named {eqn.params['name']!r} from {eqn.source_info}"
    if eqn.primitive.call_param is not None and "name" in eqn.params:
        return f"output of jitted function {eqn.params['name']!r} from {eqn.source_info}"
    return f"output of {eqn.primitive.name} from {eqn.source_info}"


def _inner_origin(eqn, atom, names, producers, constvars):
    """The origin of ``atom``, an output of a checkpoint call, found inside the callee."""
    callee = eqn.params["jaxpr"]
    inner = callee.jaxpr if isinstance(callee, ClosedJaxpr) else callee
    position = eqn.outvars.index(atom)
    inner_atom = inner.outvars[position]
    if inner_atom in inner.invars:  # an operand of the call, passed through
        return _origin(eqn.invars[inner.invars.index(inner_atom)], names, producers,
                       constvars)
    inner_producers = {v: e for e in inner.eqns for v in e.outvars}
    return _origin(inner_atom, {}, inner_producers, set(inner.constvars))

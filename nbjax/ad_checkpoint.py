"""``nbjax.ad_checkpoint`` (``jax.ad_checkpoint``): checkpoint names and policies, and
``print_saved_residuals``, which lists what reverse mode keeps from the forward pass for the
backward pass (the memory ``checkpoint`` trades for recomputation)."""

import inspect
from typing import NamedTuple

from . import checkpoint_policies  # noqa: F401
from .calls import as_array
from .checkpoint import (Offloadable, Recompute, Saveable, checkpoint,  # noqa: F401
                         checkpoint_name, checkpoint_p, name_p)
from .core import ClosedJaxpr, Var, get_aval, pytree
from .interpreters import staging
from .interpreters.partial_eval import linearize_flat
from .lax.loops import scan_p

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "Saveable", "Recompute",
           "Offloadable", "SavedValue", "saved_values", "saved_residuals",
           "print_saved_residuals"]


class SavedValue(NamedTuple):
    """A value reverse mode keeps for the backward pass: its type, what it is (``"the
    argument x"``, ``"a constant"``, ``"output of cos"``, ``"named 'h'"``, ``"output of
    jitted function 'f'"``), the line that computed it (None for arguments and constants);
    for an argument, the position of its leaf among the arguments' leaves, and for a
    constant, its value."""
    aval: object
    origin: str
    source: object
    argument: object = None
    constant: object = None

    @property
    def description(self):
        """JAX's words for it: ``from the argument x``, ``output of cos from file:3 (f)``."""
        if self.source is None:
            return f"from {self.origin}"
        return f"{self.origin} from {self.source}"


def saved_values(f, *args, **kwargs):
    """The ``SavedValue`` of each value that ``vjp(f, *args, **kwargs)`` keeps for its
    backward pass, in the order the backward pass takes them."""
    leaves, in_tree = pytree.tree_flatten((args, kwargs))

    def residuals(*leaves):
        def flat(*primals):
            call_args, call_kwargs = in_tree.unflatten(primals)
            return pytree.tree_leaves(f(*call_args, **call_kwargs))
        return linearize_flat(flat, leaves, "saved_residuals")[2]

    jaxpr, consts = staging.trace_to_jaxpr(residuals, [get_aval(as_array(x)) for x in leaves],
                                           staging.describe(f, "saved_residuals"))
    names = {v: (i, name) for i, (v, name) in
             enumerate(zip(jaxpr.invars, _argument_names(f, args, kwargs)))}
    producers = {v: eqn for eqn in jaxpr.eqns for v in eqn.outvars}
    constants = dict(zip(jaxpr.constvars, consts))
    return [SavedValue(atom.aval, *_origin(atom, names, producers, constants),
                       constant=constants.get(atom, getattr(atom, "val", None)))
            for atom in jaxpr.outvars]


def saved_residuals(f, *args, **kwargs):
    """``[(type, description)]`` of ``saved_values``, as JAX's ``saved_residuals``."""
    return [(v.aval, v.description) for v in saved_values(f, *args, **kwargs)]


def print_saved_residuals(f, *args, **kwargs):
    """Print ``saved_residuals``, one line per value (as JAX does)."""
    for aval, description in saved_residuals(f, *args, **kwargs):
        print(aval.str_short(short_dtypes=True), description)


def _argument_names(f, args, kwargs):
    """The name of each leaf of ``(args, kwargs)``, in the order they flatten (positional
    arguments, then keywords by name), as the user wrote it: ``x``, ``p['w']``, ``xs[1]``."""
    named = [(_positional_name(f, i), a) for i, a in enumerate(args)] + sorted(kwargs.items())
    return [name + pytree.keystr(path) for name, value in named
            for path, _ in pytree.tree_flatten_with_path(value)[0]]


def _positional_name(f, i):
    """The name of ``f``'s ``i``-th positional parameter (``args[i]`` without a signature)."""
    try:
        parameters = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return f"args[{i}]"
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if i < len(positional):
        return positional[i].name
    rest = next((p for p in parameters if p.kind == p.VAR_POSITIONAL), None)
    return f"{rest.name}[{i - len(positional)}]" if rest else f"args[{i}]"


def _origin(atom, names, producers, constants):
    """``(origin, source, argument)`` of a saved value (see ``SavedValue``)."""
    if not isinstance(atom, Var) or atom in constants:
        return "a constant", None, None
    if atom in names:
        position, name = names[atom]
        return f"the argument {name}", None, position
    eqn = producers[atom]
    if eqn.primitive is checkpoint_p:  # saved by a policy: say which value inside
        return _inner_origin(eqn, atom, names, producers, constants)
    if eqn.primitive is scan_p and eqn.outvars.index(atom) >= eqn.params["num_carry"]:
        return _stacked_origin(eqn, atom, names, producers, constants)
    if eqn.primitive is name_p:
        return f"named {eqn.params['name']!r}", eqn.source_info, None
    if eqn.primitive.call_param is not None and "name" in eqn.params:
        return f"output of jitted function {eqn.params['name']!r}", eqn.source_info, None
    return f"output of {eqn.primitive.name}", eqn.source_info, None


def _stacked_origin(eqn, atom, names, producers, constants):
    """The origin of ``atom``, a stacked output of a scan (a residual its forward pass
    keeps, one per step): the value of the body that each step adds."""
    body = eqn.params["jaxpr"].jaxpr
    inner_atom = body.outvars[eqn.outvars.index(atom)]
    per_step = ", one per step of a scan"
    if inner_atom in body.invars:
        position = body.invars.index(inner_atom)
        n_consts, n_carry = eqn.params["num_consts"], eqn.params["num_carry"]
        if n_consts <= position < n_consts + n_carry:
            return "the carry of a scan, one per step", eqn.source_info, None
        origin = _origin(eqn.invars[position], names, producers, constants)
        return (origin if position >= n_consts + n_carry  # an element of xs: xs itself
                else (origin[0] + per_step,) + origin[1:])
    inner_producers = {v: e for e in body.eqns for v in e.outvars}
    origin, source, _ = _origin(inner_atom, {}, inner_producers, set(body.constvars))
    return origin + per_step, source, None


def _inner_origin(eqn, atom, names, producers, constants):
    """The origin of ``atom``, an output of a checkpoint call, found inside the callee."""
    callee = eqn.params["jaxpr"]
    inner = callee.jaxpr if isinstance(callee, ClosedJaxpr) else callee
    position = eqn.outvars.index(atom)
    inner_atom = inner.outvars[position]
    if inner_atom in inner.invars:  # an operand of the call, passed through
        return _origin(eqn.invars[inner.invars.index(inner_atom)], names, producers,
                       constants)
    inner_producers = {v: e for e in inner.eqns for v in e.outvars}
    return _origin(inner_atom, {}, inner_producers, set(inner.constvars))

"""The JSON a gradient view shows for the last concrete input of ``grad_f``.

``linked_state``: the jaxpr of the derivative, split in two columns (reverse mode: the
forward pass and the backward pass; forward mode: the primal and the tangent computation),
with every equation's provenance, so selecting one equation highlights the equations of the
same user-level operation on the other side.

The step-through beside it is ``grad_steps``'s walk.
"""

import inspect

import numpy as np

from ..ad_checkpoint import saved_values
from ..calls import as_array
from ..api import grad, hessian, jvp, make_jaxpr
from ..core import Var, get_aval, pytree, to_numpy
from ..viz.text import annotate
from .grad_steps import seed_tangents, walk_forward, walk_reverse
from .panes import graph_state, jaxpr_pane, leaf_names, location
from .source_pane import source_lines

SIDES = {"rev": ("forward pass", "backward pass"), "fwd": ("primal", "tangents")}


def restrict(fun, args, kwargs, argnums):
    """(g, diff): ``fun`` as a function of the differentiated arguments only (the others,
    and the keyword arguments, fixed at the values given), and those arguments."""
    def g(*diff):
        full = list(args)
        for i, value in zip(argnums, diff):
            full[i] = value
        return fun(*full, **kwargs)
    g.__name__ = getattr(fun, "__name__", "f")
    return g, [args[i] for i in argnums]


def input_names(diff, names):
    """The names of the differentiated arguments' array leaves: ``params['W1']``, ``x``."""
    return [leaf for name, x in zip(names, diff) for leaf in leaf_names(name, x)]


def _seed_text(diff, names):
    leaves = pytree.tree_leaves(list(diff))
    first = input_names(diff, names)[0] if leaves else "the first argument"
    where = "" if np.ndim(to_numpy(leaves[0])) == 0 else "[0]"
    return f"tangent 1 at {first}{where}, 0 elsewhere: the walk computes d out / d {first}{where}"


# --- the derivative's jaxpr, side by side -----------------------------------------------------

def derivative_jaxpr(g, diff, mode):
    """(closed jaxpr, right-side flags): the gradient's jaxpr (reverse) or the JVP's
    (forward); a flag per equation says whether it is on the backward / tangent side."""
    n = len(diff)
    if mode == "rev":
        closed = make_jaxpr(grad(g, argnums=tuple(range(n))))(*diff)
        return closed, _backward_flags(closed.jaxpr)
    closed = make_jaxpr(lambda *pt: jvp(g, tuple(pt[:n]), tuple(pt[n:])))(
        *diff, *seed_tangents(diff))
    return closed, _tangent_flags(closed.jaxpr, len(pytree.tree_leaves(list(diff))))


def _backward_flags(jaxpr):
    flags, seen = [], False
    for eqn in jaxpr.eqns:
        if eqn.provenance is not None:
            seen = eqn.provenance.phase == "backward"
        flags.append(seen)
    return flags


def _tangent_flags(jaxpr, n_primals):
    """Equations that read a tangent (directly or through other such equations)."""
    tangent = set(jaxpr.invars[n_primals:])
    flags = []
    for eqn in jaxpr.eqns:
        reads = any(isinstance(a, Var) and a in tangent for a in eqn.invars)
        if reads:
            tangent.update(eqn.outvars)
        flags.append(reads)
    return flags


def _origin(eqn):
    """(provenance id, primitive, SourceInfo) of the user-level operation of ``eqn``."""
    p = eqn.provenance
    if p is None:
        return None, eqn.primitive.name, eqn.source_info
    return p.id, p.primitive, p.source_info or eqn.source_info


def linked_state(closed, flags, mode, prefix, toggled=(), inputs=None, group=None,
                 hide_identities=False):
    """The derivative's jaxpr in two columns; ``inputs``: its inputs' names for the graph
    (for forward mode, the primals' names: their tangents are named after them); ``group``:
    the graph's equations grouped by source "line" or "function" (None: not);
    ``hide_identities``: the graph leaves out ``mul x 1.0`` and the like."""
    annotated = annotate(closed)
    if inputs is not None and mode == "fwd":
        inputs = inputs + [f"tangent of {name}" for name in inputs]
    rows, links = [], {}
    for i, (eqn, right) in enumerate(zip(closed.jaxpr.eqns, flags)):
        node = f"e{i}"
        pid, primitive, source = _origin(eqn)
        side = "right" if right else "left"
        rows.append({"id": node, "side": side, "text": annotated.eqn_text(node) or str(eqn),
                     "primitive": eqn.primitive.name, "provenance": pid, "origin": primitive,
                     "source": location(source.file, source.line) if source else None,
                     "source_text": source.source_line() if source else None})
        if pid is not None:
            link = links.setdefault(pid, {"provenance": pid, "origin": primitive,
                                          "source": rows[-1]["source"],
                                          "source_text": rows[-1]["source_text"],
                                          "left": [], "right": []})
            link[side].append(node)
    left, right = SIDES[mode]
    source = source_lines(closed, f"What each line of the function adds to the derivative's "
                                  f"jaxpr ({left} and {right}).")
    return {"sides": {"left": left, "right": right}, "rows": rows, "source": source,
            "links": list(links.values()), "jaxpr": jaxpr_pane(annotated),
            "graph": graph_state(closed, prefix=prefix, annotated=annotated, toggled=toggled,
                                 input_names=inputs, group=group,
                                 hide_identities=hide_identities)}


def align(closed, link_rows):
    """Forward node id -> the derivative's node ids of the same user-level operation.

    The walk's jaxpr (of the function) and the derivative's jaxpr were traced separately,
    so their provenance ids differ; the operations appear in the same order, though, so
    they are matched in order by primitive and source line."""
    order = []  # (provenance, primitive, line) in order of first appearance
    nodes = {}
    for row, eqn in link_rows:
        pid, primitive, source = _origin(eqn)
        if pid is None:
            continue
        if pid not in nodes:
            order.append((pid, primitive, source.line if source else None))
            nodes[pid] = []
        nodes[pid].append(row["id"])
    linked, k = {}, 0
    for i, eqn in enumerate(closed.jaxpr.eqns):
        line = eqn.source_info.line if eqn.source_info else None
        for j in range(k, len(order)):
            if order[j][1:] == (eqn.primitive.name, line):
                linked[f"e{i}"] = nodes[order[j][0]]
                k = j + 1
                break
    return linked


# --- memory: what reverse mode keeps for the backward pass ----------------------------------

FORWARD_MODE_MEMORY = ("Forward mode keeps nothing for later: each tangent is computed right "
                       "beside its value, and both are dropped once used.")
CHECKPOINT_HINT = ("To keep less (and recompute more in the backward pass), wrap part of the "
                   "function in nbjax.checkpoint; a policy from nbjax.checkpoint_policies "
                   "chooses what it still keeps.")


def memory_state(fun, args, kwargs, argnums, inputs, mode):
    """The values reverse mode carries from the forward pass to the backward pass of
    ``fun`` at this input, differentiated at ``argnums`` (``inputs``: the names of their
    array leaves), each with its size and origin, and the totals; forward mode keeps none."""
    if mode != "rev":
        return {"note": FORWARD_MODE_MEMORY}
    # The arguments held fixed reach the trace as constants: as arrays made here, so that
    # a saved one is recognised (by identity) and named.
    args = [a if i in argnums else pytree.tree_map(_held_array, a) for i, a in enumerate(args)]
    fixed = {id(leaf): name for i, name in _fixed_arguments(fun, args, kwargs, argnums)
             for name, leaf in zip(leaf_names(name, args[i]), pytree.tree_leaves(args[i]))}
    g, diff = restrict(fun, args, kwargs, argnums)
    rows = []
    for value in saved_values(g, *diff):
        if value.argument is not None:
            origin = f"the argument {inputs[value.argument]}"
        elif id(value.constant) in fixed:
            origin = f"the argument {fixed[id(value.constant)]} (not differentiated)"
        else:
            origin = value.origin
        source = value.source
        rows.append({"type": value.aval.str_short(short_dtypes=True), "bytes": value.aval.nbytes,
                     "origin": origin,
                     "source": location(source.file, source.line) if source else None,
                     "source_text": source.source_line() if source else None})
    arguments = sum(get_aval(x).nbytes for x in pytree.tree_leaves(list(diff)))
    return {"rows": rows, "total": sum(r["bytes"] for r in rows), "arguments": arguments,
            "hint": CHECKPOINT_HINT}


def _held_array(leaf):
    return as_array(leaf) if isinstance(leaf, (np.ndarray, np.generic)) else leaf


def _fixed_arguments(fun, args, kwargs, argnums):
    """``(position, name)`` of the positional arguments not differentiated."""
    try:
        names = list(inspect.signature(fun).bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):  # no signature to read
        names = []
    return [(i, names[i] if i < len(names) else f"args[{i}]")
            for i in range(len(args)) if i not in argnums]


def grad_states(fun, args, kwargs, argnums, mode, names, prefixes, toggled=(), group=None,
                hide_identities=False):
    """(linked state, steps state) for ``fun`` at this input; ``toggled``: the clusters
    the browser opened or closed; ``group``: how it groups the derivative's graph;
    ``hide_identities``: whether that graph leaves out the identities (the step-through
    visits every equation, so its graph keeps them)."""
    g, diff = restrict(fun, args, kwargs, argnums)
    inputs = input_names(diff, names)
    derivative, flags = derivative_jaxpr(g, diff, mode)
    linked = linked_state(derivative, flags, mode, prefixes[0], toggled, inputs, group,
                          hide_identities)
    linked["memory"] = memory_state(fun, args, kwargs, argnums, inputs, mode)
    primal = make_jaxpr(g)(*diff)
    links = align(primal, list(zip(linked["rows"], derivative.jaxpr.eqns)))
    walk = (walk_reverse if mode == "rev" else walk_forward)(primal, diff, links, inputs)
    steps = {"mode": mode, "rows": walk.rows(), "steps": walk.steps,
             "derivative": "cotangent" if mode == "rev" else "tangent",
             "seed": ("cotangent 1 of the output" if mode == "rev"
                      else _seed_text(diff, names)),
             "graph": graph_state(primal, prefix=prefixes[1], annotated=walk.annotated,
                                  toggled=toggled, input_names=inputs, fold=False,
                                  opened=walk.opened())}
    return linked, steps


def hessian_state(fun, args, kwargs, argnums):
    g, diff = restrict(fun, args, kwargs, argnums)
    n = len(diff)
    closed = make_jaxpr(hessian(g, argnums=tuple(range(n)) if n > 1 else 0))(*diff)
    return {"jaxpr": jaxpr_pane(annotate(closed))}

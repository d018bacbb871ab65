"""The JSON a gradient view shows for the last concrete input of ``grad_f``.

``linked_state``: the jaxpr of the derivative, split in two columns (reverse mode: the
forward pass and the backward pass; forward mode: the primal and the tangent computation),
with every equation's provenance, so selecting one equation highlights the equations of the
same user-level operation on the other side.

``steps_state``: a walk through the user's function, equation by equation, on the recorded
input. Reverse mode first computes every node's value, then walks the equations backwards
from the output's cotangent 1, each step applying one equation's VJP and adding the
contributions into its operands' accumulated cotangents (what ``grad`` does, one equation at
a time). Forward mode carries a tangent along with each value. Each step says what changed;
the browser replays the steps up to the current one.
"""

import numpy as np

from ..api import grad, hessian, jvp, make_jaxpr, vjp
from ..core import Var, dtypes, get_aval, pytree, to_numpy
from ..interpreters import ad
from ..viz.text import annotate
from .panes import graph_state, jaxpr_pane, leaf_names, location, value_text
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


def seed_tangents(diff):
    """Forward mode's input tangents, shaped as ``diff`` (a list of pytrees): 1 at the first
    element of the first array leaf, 0 elsewhere (so the walk computes d out / d that
    element)."""
    leaves, tree = pytree.tree_flatten(list(diff))
    seeds = []
    for k, x in enumerate(leaves):
        aval = get_aval(x)
        t = np.zeros(aval.shape, aval.dtype)
        if k == 0 and t.size:
            t.reshape(-1)[0] = 1
        seeds.append(t)
    return tree.unflatten(seeds)


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


# --- stepping through -----------------------------------------------------------------------

def _apply(eqn, values):
    out = eqn.primitive.bind(*values, **eqn.params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _differentiable(eqn):
    """Operand positions that carry derivatives (inexact variables)."""
    return [i for i, a in enumerate(eqn.invars)
            if isinstance(a, Var) and dtypes.is_inexact(a.aval.dtype)]


def _as_function(eqn, values, positions):
    """The equation as a function of its operands at ``positions`` (the others fixed)."""
    def fn(*xs):
        full = list(values)
        for p, x in zip(positions, xs):
            full[p] = x
        out = eqn.primitive.bind(*full, **eqn.params)
        return list(out) if eqn.primitive.multiple_results else out
    return fn


BAR = "\u0304"  # a combining macron: b̄, the cotangent of b
_SHORT_ELEMENTS = 6


def _short(x):
    """A value on one line, whole when small (``2.25``, ``[1, 1, 1]``), else summarised."""
    return " ".join(value_text(np.asarray(x), threshold=_SHORT_ELEMENTS).split())


def _local_derivative(eqn, values, p):
    """d out / d operand ``p`` element by element (the JVP along ones), or None when
    there is no single one to show (several results, an integer operand)."""
    if eqn.primitive.multiple_results:
        return None
    x = values[p]
    aval = get_aval(x)
    if not dtypes.is_inexact(aval.dtype):
        return None
    try:
        _, tangent = jvp(_as_function(eqn, values, [p]), [x],
                         [np.ones(aval.shape, aval.dtype)])
    except NotImplementedError:  # no forward rule: the view shows the backward result
        return None
    return _np(tangent)


def _zeros(aval):
    t = ad.tangent_aval(aval)
    return np.zeros(t.shape, t.dtype)


def _np(x):
    return np.asarray(to_numpy(x))


class _Walk:
    """Values, derivatives and steps of one walk over a jaxpr."""

    def __init__(self, closed, linked, inputs):
        self.jaxpr, self.closed, self.inputs = closed.jaxpr, closed, inputs
        self.annotated = annotate(closed)
        self.linked = linked  # forward eqn node id -> linked node ids in the derivative
        self.env, self.deriv, self.node_of, self.steps = {}, {}, {}, []

    def read(self, a):
        return a.val if not isinstance(a, Var) else self.env[a]

    def node_text(self, node_vars, table):
        texts = [value_text(table[v]) if v in table else "–" for v in node_vars]
        return " | ".join(texts)

    def vars_of(self, node):
        return [v for v, n in self.node_of.items() if n == node]

    def step(self, phase, text, node=None, values=(), derivs=()):
        self.steps.append({"index": len(self.steps), "phase": phase, "node": node,
                           "text": text, "linked": self.linked.get(node, []),
                           "values": {n: self.node_text(self.vars_of(n), self.env)
                                      for n in values},
                           "derivs": {n: self.node_text(self.vars_of(n), self.deriv)
                                      for n in derivs}})

    def name(self, var):
        return self.annotated.names.get(var, "?") if isinstance(var, Var) else str(var.val)

    def chain_rule(self, eqn, p, values, ct, contribution):
        """``b̄ += d̄ · c = 1 × 2.25 = 2.25``: what operand ``p`` of ``eqn`` receives, as
        the output's cotangent times the local derivative when the operation is
        element-wise in that operand (checked: the product must equal what the backward
        rule gave), else as the backward rule's result."""
        out, var = eqn.outvars[0], eqn.invars[p]
        head = f"{self.name(var)}{BAR} += "
        local = _local_derivative(eqn, values, p)
        if local is not None and not eqn.primitive.multiple_results:
            product = np.asarray(ct) * local
            if product.shape == contribution.shape and np.allclose(
                    product, contribution, equal_nan=True):
                symbol = self._local_symbol(eqn, p)
                return (f"{head}{self.name(out)}{BAR} · {symbol} = {_short(ct)} × "
                        f"{_short(local)} = {_short(contribution)}")
        return f"{head}{eqn.primitive.name}'s backward rule of {self.name(out)}{BAR} = " \
               f"{_short(contribution)}"

    def _local_symbol(self, eqn, p):
        """The local derivative by name where it is one of the operands (``mul``), else
        ``∂d/∂b``."""
        if eqn.primitive.name == "mul" and len(eqn.invars) == 2:
            return self.name(eqn.invars[1 - p])
        return f"∂{self.name(eqn.outvars[0])}/∂{self.name(eqn.invars[p])}"

    def eqn_text(self, i):
        return self.annotated.eqn_text(f"e{i}") or str(self.jaxpr.eqns[i])

    def bind_inputs(self, diff):
        inputs = []
        for i, (v, c) in enumerate(zip(self.jaxpr.constvars, self.closed.consts)):
            self.env[v], self.node_of[v] = c, f"c{i}"
            inputs.append(f"c{i}")
        for i, (v, x) in enumerate(zip(self.jaxpr.invars, pytree.tree_leaves(list(diff)))):
            self.env[v], self.node_of[v] = x, f"in{i}"
            inputs.append(f"in{i}")
        return inputs

    def rows(self):
        """The table the browser fills in: one row per value node."""
        names = self.annotated.names
        rows = [{"id": f"c{i}", "text": f"const {names.get(v, '')}: {v.aval.str_short()}"}
                for i, v in enumerate(self.jaxpr.constvars)]
        rows += [{"id": f"in{i}", "text": f"input {self._input(i, names.get(v, ''))}: "
                                          f"{v.aval.str_short()}"}
                 for i, v in enumerate(self.jaxpr.invars)]
        rows += [{"id": f"e{i}", "text": self.eqn_text(i)}
                 for i in range(len(self.jaxpr.eqns))]
        for row, variables in zip(rows, self._row_vars()):
            row["name"] = ", ".join(names.get(v, "_") for v in variables)
        return rows

    def _row_vars(self):
        return [[v] for v in self.jaxpr.constvars + self.jaxpr.invars] + \
            [e.outvars for e in self.jaxpr.eqns]

    def _input(self, i, var):
        """``x (a)``: the argument's name, then the jaxpr's name of it."""
        name = self.inputs[i] if i < len(self.inputs) else ""
        return var if not name or name == var else f"{name} ({var})"


def walk_reverse(closed, diff, linked, inputs):
    w = _Walk(closed, linked, inputs)
    w.step("input", "the arguments' values", values=w.bind_inputs(diff))
    for i, eqn in enumerate(w.jaxpr.eqns):
        outs = _apply(eqn, [w.read(a) for a in eqn.invars])
        for v, o in zip(eqn.outvars, outs):
            w.env[v], w.node_of[v] = o, f"e{i}"
        w.step("forward", w.eqn_text(i), node=f"e{i}", values=[f"e{i}"])
    out = w.jaxpr.outvars[0]
    if not isinstance(out, Var):
        w.step("result", "the output is a constant: every derivative is 0")
        return w
    w.deriv[out] = np.ones(out.aval.shape, out.aval.dtype)
    w.step("seed", f"the output's cotangent {w.name(out)}{BAR} = 1 (d out / d out)",
           node=w.node_of[out], derivs=[w.node_of[out]])
    for i in reversed(range(len(w.jaxpr.eqns))):
        eqn = w.jaxpr.eqns[i]
        cts = [w.deriv.get(v) for v in eqn.outvars]
        positions = _differentiable(eqn)
        if all(c is None for c in cts) or not positions:
            continue
        values = [w.read(a) for a in eqn.invars]
        _, pullback = vjp(_as_function(eqn, values, positions),
                          *[values[p] for p in positions])
        cts = [c if c is not None else _zeros(v.aval) for c, v in zip(cts, eqn.outvars)]
        contributions = pullback(cts if eqn.primitive.multiple_results else cts[0])
        touched, products = [], []
        for p, c in zip(positions, contributions):
            var = eqn.invars[p]
            products.append(w.chain_rule(eqn, p, values, cts[0], _np(c)))
            w.deriv[var] = _np(c) if var not in w.deriv else w.deriv[var] + _np(c)
            if w.node_of[var] not in touched:
                touched.append(w.node_of[var])
        w.step("backward", f"through {w.eqn_text(i)}:\n" + "\n".join(products),
               node=f"e{i}", derivs=touched)
    for v in w.jaxpr.invars:
        w.deriv.setdefault(v, _zeros(v.aval))
    w.step("result", "the gradient: the accumulated cotangents of the inputs",
           derivs=[w.node_of[v] for v in w.jaxpr.invars])
    return w


def walk_forward(closed, diff, linked, inputs):
    w = _Walk(closed, linked, inputs)
    nodes = w.bind_inputs(diff)
    for v, t in zip(w.jaxpr.invars, pytree.tree_leaves(seed_tangents(diff))):
        w.deriv[v] = t
    w.step("input", "the arguments' values and tangents", values=nodes,
           derivs=[w.node_of[v] for v in w.jaxpr.invars])
    for i, eqn in enumerate(w.jaxpr.eqns):
        values = [w.read(a) for a in eqn.invars]
        positions = [p for p in _differentiable(eqn) if eqn.invars[p] in w.deriv]
        if positions:
            fn = _as_function(eqn, values, positions)
            outs, tangents = jvp(fn, [values[p] for p in positions],
                                 [w.deriv[eqn.invars[p]] for p in positions])
            if not eqn.primitive.multiple_results:
                outs, tangents = [outs], [tangents]
        else:
            outs, tangents = _apply(eqn, values), [None] * len(eqn.outvars)
        for v, o, t in zip(eqn.outvars, outs, tangents):
            w.env[v], w.node_of[v] = o, f"e{i}"
            if t is not None and dtypes.is_inexact(v.aval.dtype):
                w.deriv[v] = _np(t)
        node = f"e{i}"
        w.step("forward", f"{w.eqn_text(i)}: value and tangent", node=node, values=[node],
               derivs=[node] if any(v in w.deriv for v in eqn.outvars) else [])
    out = w.jaxpr.outvars[0]
    if isinstance(out, Var):
        w.step("result", "the output's tangent: the directional derivative",
               node=w.node_of[out], derivs=[w.node_of[out]])
    return w


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
    primal = make_jaxpr(g)(*diff)
    links = align(primal, list(zip(linked["rows"], derivative.jaxpr.eqns)))
    walk = (walk_reverse if mode == "rev" else walk_forward)(primal, diff, links, inputs)
    steps = {"mode": mode, "rows": walk.rows(), "steps": walk.steps,
             "derivative": "cotangent" if mode == "rev" else "tangent",
             "seed": ("cotangent 1 of the output" if mode == "rev"
                      else _seed_text(diff, names)),
             "graph": graph_state(primal, prefix=prefixes[1], annotated=walk.annotated,
                                  toggled=toggled, input_names=inputs, fold=False)}
    return linked, steps


def hessian_state(fun, args, kwargs, argnums):
    g, diff = restrict(fun, args, kwargs, argnums)
    n = len(diff)
    closed = make_jaxpr(hessian(g, argnums=tuple(range(n)) if n > 1 else 0))(*diff)
    return {"jaxpr": jaxpr_pane(annotate(closed))}

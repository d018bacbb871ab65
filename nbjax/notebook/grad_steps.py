"""The step-through of a gradient view: a walk through the user's function, equation by
equation, on the recorded input.

Reverse mode first computes every node's value, then walks the equations backwards from the
output's cotangent 1, each step applying one equation's VJP and adding the contributions into
its operands' accumulated cotangents (what ``grad`` does, one equation at a time). Forward
mode carries a tangent along with each value. Each step says what changed; the browser
replays the steps up to the current one.
"""

import numpy as np

from ..api import jvp, vjp
from ..core import Var, dtypes, get_aval, pytree, to_numpy
from ..interpreters import ad
from ..viz.text import annotate
from .panes import value_text

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

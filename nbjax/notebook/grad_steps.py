"""The step-through of a gradient view: a walk through the user's function, equation by
equation, on the recorded input.

Reverse mode first computes every node's value, then walks the equations backwards from the
output's cotangent 1, each step applying one equation's VJP and adding the contributions into
its operands' accumulated cotangents (what ``grad`` does, one equation at a time). Forward
mode carries a tangent along with each value. Each step says what changed; the browser
replays the steps up to the current one.

A ``cond`` (or ``switch``) is not one opaque step: the walk says which branch runs and why,
then steps through that branch's equations (node ids ``e4/branches1/e0``, as in the graph and
the annotated jaxpr), and reverse mode later walks back through them; the other branches
never run, as in the program.
"""

from collections import namedtuple

import numpy as np

from ..api import jvp, vjp
from ..core import Var, dtypes, get_aval, pytree, to_numpy
from ..interpreters import ad
from ..viz.structure import eqn_id, sub_jaxprs, sub_prefix
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


def _branches(eqn):
    """(index operand, operands, [(suffix, ClosedJaxpr)]) of an equation that runs one of
    its sub-jaxprs, picked by its index operand (its control lowering says ``branches``:
    ``cond``, ``switch``), else None. The suffixes (``branches1``) are the graph's and the
    annotated jaxpr's, so a branch's equations get their node ids."""
    control = eqn.primitive.lowerings.get("control")
    if control is None or not control.branches:
        return None
    groups = control.split(eqn.params, eqn.invars)
    suffixes = {id(sub): suffix for suffix, _, sub in sub_jaxprs(eqn)}
    return groups["index"][0], groups["operands"], \
        [(suffixes[id(b)], b) for _, b in control.sub_jaxprs(eqn.params)]


def _defining(jaxpr, var):
    """The position of the equation of ``jaxpr`` that computes ``var``, or None."""
    return next((i for i, eqn in enumerate(jaxpr.eqns)
                 if any(v is var for v in eqn.outvars)), None)


class _Taken(namedtuple("_Taken", "number jaxpr cluster")):
    """The branch a cond took: its number, Jaxpr and graph cluster (``e3/branches1``)."""

    @property
    def prefix(self):
        """What its node ids start with."""
        return self.cluster + "/"


class _Walk:
    """Values, derivatives and steps of one walk over a jaxpr. The walk steps into the
    branch each ``cond`` takes, whose equations have node ids under the cond's
    (``e3/branches1/e0``, as in the graph and the annotated jaxpr)."""

    def __init__(self, closed, linked, inputs):
        self.jaxpr, self.closed, self.inputs = closed.jaxpr, closed, inputs
        self.annotated = annotate(closed)
        self.linked = linked  # forward eqn node id -> linked node ids in the derivative
        self.env, self.deriv, self.node_of, self.steps = {}, {}, {}, []
        self.taken = {}  # cond node id -> _Taken

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

    def names(self, atoms):
        return ", ".join(map(self.name, atoms))

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

    def eqn_text(self, node, eqn):
        return self.annotated.eqn_text(node) or str(eqn)

    def bind(self, jaxpr, consts, args, prefix):
        """Give ``jaxpr``'s constants and inputs their values and node ids (``c0``, ``in0``
        after ``prefix``); returns those node ids."""
        nodes = []
        for kind, variables, values in (("c", jaxpr.constvars, consts),
                                         ("in", jaxpr.invars, args)):
            for i, (v, x) in enumerate(zip(variables, values)):
                self.env[v], self.node_of[v] = x, f"{prefix}{kind}{i}"
                nodes.append(self.node_of[v])
        return nodes

    def bind_inputs(self, diff):
        return self.bind(self.jaxpr, self.closed.consts, pytree.tree_leaves(list(diff)), "")

    def set_values(self, eqn, node, outs):
        for v, o in zip(eqn.outvars, outs):
            self.env[v], self.node_of[v] = o, node

    def carry(self, sources, targets):
        """Each differentiable variable of ``targets`` adds the derivative of its
        counterpart in ``sources`` (an operand's tangent passed into a branch, a branch
        result's out of it; cotangents the other way; reverse mode's forward pass has no
        derivatives yet, so nothing). Returns the lines ``c̄ += h̄ = 0.5`` and the node ids
        that changed."""
        lines, touched = [], []
        for a, v in zip(sources, targets):
            if not (isinstance(a, Var) and a in self.deriv and isinstance(v, Var)
                    and dtypes.is_inexact(v.aval.dtype)):
                continue
            d = self.deriv[a]
            self.deriv[v] = d if v not in self.deriv else self.deriv[v] + d
            lines.append(f"{self.name(v)}{BAR} += {self.name(a)}{BAR} = {_short(d)}")
            if self.node_of[v] not in touched:
                touched.append(self.node_of[v])
        return lines, touched

    # -- evaluating, into the branches conds take --

    def run(self, jaxpr, prefix, equation):
        """Evaluate ``jaxpr`` equation by equation (``equation(eqn, node)`` computes and
        shows one); a cond steps into the branch it takes."""
        for i, eqn in enumerate(jaxpr.eqns):
            node, branches = eqn_id(prefix, i), _branches(eqn)
            if branches is None:
                equation(eqn, node)
            else:
                self.step_into(jaxpr, prefix, eqn, node, branches, equation)

    def step_into(self, jaxpr, prefix, eqn, node, branches, equation):
        """A step saying which branch runs and why, the branch's inputs taking the
        operands' values (and tangents, in forward mode), its equations, then a step
        giving the cond its results. The other branches never run."""
        index, operands, subs = branches
        k = int(_np(self.read(index)))
        suffix, sub = subs[k]
        taken = _Taken(k, sub.jaxpr, sub_prefix(node, suffix))
        self.taken[node] = taken
        inputs = self.bind(sub.jaxpr, sub.consts, [self.read(a) for a in operands],
                           taken.prefix)
        _, tangents = self.carry(operands, sub.jaxpr.invars)
        given = ", ".join(f"{self.name(v)} = {self.name(a)}"
                          for v, a in zip(sub.jaxpr.invars, operands))
        self.step("branch", self.choice(jaxpr, prefix, index, k, len(subs))
                  + (f"\nits inputs: {given}" if given else ""), node=node,
                  values=inputs, derivs=tangents)
        self.run(sub.jaxpr, taken.prefix, equation)
        self.set_values(eqn, node, [self.read(a) for a in sub.jaxpr.outvars])
        _, tangents = self.carry(sub.jaxpr.outvars, eqn.outvars)
        self.step("forward", f"{self.names(eqn.outvars)} = {self.names(sub.jaxpr.outvars)}: "
                             f"the results of branch {k}", node=node, values=[node],
                  derivs=tangents)

    def choice(self, jaxpr, prefix, index, k, n):
        """Why branch ``k`` runs: ``lax.cond``'s predicate (the boolean its index was
        converted from), else the index and the equation that computed it (``lax.switch``
        clamps it into range)."""
        i = _defining(jaxpr, index)
        made = None if i is None else jaxpr.eqns[i]
        operands = [] if made is None else [a for a in made.invars if isinstance(a, Var)]
        if n == 2 and len(operands) == 1 and dtypes.is_bool(operands[0].aval.dtype):
            truth = "true" if k else "false"
            return f"predicate {self.name(operands[0])} = {truth}, so branch {k} " \
                   f"({truth}_fun) runs and branch {1 - k} does not"
        how = "" if made is None else f" ({self.eqn_text(eqn_id(prefix, i), made)})"
        return f"branch {k} of {n} runs: its index {self.name(index)} = {k}{how}"

    # -- reverse mode's backward pass --

    def backward(self, jaxpr, prefix):
        """Back through ``jaxpr``'s equations in reverse order, into the branch each cond
        took."""
        for i in reversed(range(len(jaxpr.eqns))):
            eqn, node = jaxpr.eqns[i], eqn_id(prefix, i)
            if node in self.taken:
                self.backward_branch(eqn, node, self.taken[node])
            else:
                self.backward_eqn(eqn, node)

    def backward_eqn(self, eqn, node):
        """One equation's VJP, each operand's contribution shown as the chain rule."""
        cts = [self.deriv.get(v) for v in eqn.outvars]
        positions = _differentiable(eqn)
        if all(c is None for c in cts) or not positions:
            return
        values = [self.read(a) for a in eqn.invars]
        _, pullback = vjp(_as_function(eqn, values, positions),
                          *[values[p] for p in positions])
        cts = [c if c is not None else _zeros(v.aval) for c, v in zip(cts, eqn.outvars)]
        contributions = pullback(cts if eqn.primitive.multiple_results else cts[0])
        touched, products = [], []
        for p, c in zip(positions, contributions):
            var = eqn.invars[p]
            products.append(self.chain_rule(eqn, p, values, cts[0], _np(c)))
            self.deriv[var] = _np(c) if var not in self.deriv else self.deriv[var] + _np(c)
            if self.node_of[var] not in touched:
                touched.append(self.node_of[var])
        self.step("backward", f"through {self.eqn_text(node, eqn)}:\n" + "\n".join(products),
                  node=node, derivs=touched)

    def backward_branch(self, eqn, node, taken):
        """Back through the branch a cond took: its results receive the cond's
        cotangents, its equations are walked back, then the cond's operands receive its
        inputs' cotangents."""
        lines, touched = self.carry(eqn.outvars, taken.jaxpr.outvars)
        if not lines:
            return
        self.step("backward", f"back into branch {taken.number}: its results take the "
                              "cotangents of the cond's\n" + "\n".join(lines),
                  node=node, derivs=touched)
        self.backward(taken.jaxpr, taken.prefix)
        lines, touched = self.carry(taken.jaxpr.invars, _branches(eqn)[1])
        if lines:  # else the branch's results do not depend on its inputs
            self.step("backward", f"out of branch {taken.number}: the cond's operands "
                                  "receive the cotangents of its inputs\n" + "\n".join(lines),
                      node=node, derivs=touched)

    # -- what the browser shows --

    def rows(self):
        """The table the browser fills in: one row per value node; the rows of the
        branch a cond took follow the cond's."""
        return self._rows(self.jaxpr, "", None)

    def _rows(self, jaxpr, prefix, branch):
        names = self.annotated.names
        where = "" if branch is None else f" of branch {branch}"
        rows = [self._row(f"{prefix}c{i}", f"const {names.get(v, '')}{where}: "
                                           f"{v.aval.str_short(short_dtypes=True)}", [v])
                for i, v in enumerate(jaxpr.constvars)]
        rows += [self._row(f"{prefix}in{i}", f"input {self._input(i, names.get(v, ''), branch)}"
                                             f"{where}: {v.aval.str_short(short_dtypes=True)}", [v])
                 for i, v in enumerate(jaxpr.invars)]
        for i, eqn in enumerate(jaxpr.eqns):
            node = eqn_id(prefix, i)
            rows.append(self._row(node, self.eqn_text(node, eqn), eqn.outvars))
            if node in self.taken:
                taken = self.taken[node]
                rows += self._rows(taken.jaxpr, taken.prefix, taken.number)
        return rows

    def _row(self, node, text, variables):
        return {"id": node, "text": text,
                "name": ", ".join(self.annotated.names.get(v, "_") for v in variables)}

    def _input(self, i, var, branch):
        """``x (a)``: the argument's name, then the jaxpr's name of it (a branch's inputs
        have the jaxpr's only)."""
        name = self.inputs[i] if branch is None and i < len(self.inputs) else ""
        return var if not name or name == var else f"{name} ({var})"

    def opened(self):
        """The graph clusters of the branches the walk stepped into (drawn open, so its
        steps' nodes show)."""
        return [taken.cluster for taken in self.taken.values()]


def walk_reverse(closed, diff, linked, inputs):
    w = _Walk(closed, linked, inputs)
    w.step("input", "the arguments' values", values=w.bind_inputs(diff))

    def forward(eqn, node):
        w.set_values(eqn, node, _apply(eqn, [w.read(a) for a in eqn.invars]))
        w.step("forward", w.eqn_text(node, eqn), node=node, values=[node])

    w.run(w.jaxpr, "", forward)
    out = w.jaxpr.outvars[0]
    if not isinstance(out, Var):
        w.step("result", "the output is a constant: every derivative is 0")
        return w
    w.deriv[out] = np.ones(out.aval.shape, out.aval.dtype)
    w.step("seed", f"the output's cotangent {w.name(out)}{BAR} = 1 (d out / d out)",
           node=w.node_of[out], derivs=[w.node_of[out]])
    w.backward(w.jaxpr, "")
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

    def forward(eqn, node):
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
        w.set_values(eqn, node, outs)
        for v, t in zip(eqn.outvars, tangents):
            if t is not None and dtypes.is_inexact(v.aval.dtype):
                w.deriv[v] = _np(t)
        w.step("forward", f"{w.eqn_text(node, eqn)}: value and tangent", node=node,
               values=[node], derivs=[node] if any(v in w.deriv for v in eqn.outvars) else [])

    w.run(w.jaxpr, "", forward)
    out = w.jaxpr.outvars[0]
    if isinstance(out, Var):
        w.step("result", "the output's tangent: the directional derivative",
               node=w.node_of[out], derivs=[w.node_of[out]])
    return w

"""Dead code elimination: what a jaxpr's used outputs do not need is dropped, and so are the
unused results of control flow, with what computes them inside its bodies.

An equation none of whose results is read goes (unless it has an effect: a host callback
runs, each one, always). An equation with a ``dce`` rule (``cond``, ``while``, ``scan``) is
kept with only the results something reads and the operands those need: its rule
``rule(used_outputs, eqn)`` returns that equation, its bodies pruned too (a loop keeps every
carry that a kept carry, a kept output or, for ``while``, the predicate reads, a fixed
point). As in JAX, where compiling a program starts with this: a tangent the program drops
is never computed, even inside a loop.
"""

from .jaxpr import ClosedJaxpr, Jaxpr, Var, has_effect

RESULT_UNUSED = "result unused"


def dce_equations(eqns, live, dropped=None):
    """The equations of ``eqns`` (in order) needed to compute the variables in ``live``,
    a set which is then updated with every variable they read. ``dropped(eqn, why)`` hears
    of each equation dropped (``why`` is ``RESULT_UNUSED``) or pruned."""
    kept = []
    for eqn in reversed(eqns):
        used = [v in live for v in eqn.outvars]
        if not any(used) and not has_effect(eqn):
            if dropped is not None:
                dropped(eqn, RESULT_UNUSED)
            continue
        rule = eqn.primitive.rules.get("dce")
        if rule is not None:
            eqn = _pruned(eqn, rule(used, eqn), dropped)
        kept.append(eqn)
        live.update(a for a in eqn.invars if isinstance(a, Var))
    kept.reverse()
    return kept


def _pruned(eqn, new, dropped):
    results = len(eqn.outvars) - len(new.outvars)
    operands = len(eqn.invars) - len(new.invars)
    if dropped is not None and (results or operands):
        dropped(eqn, f"{eqn.primitive.name} pruned: {results} of its {len(eqn.outvars)} results "
                     f"and {operands} of its {len(eqn.invars)} operands dropped, with what "
                     "they fed or came from in its bodies")
    return new


def dce_jaxpr(closed, used_outputs, keep_inputs=None):
    """``(pruned, used_inputs)``: ``closed`` (a ClosedJaxpr, a control-flow body) computing
    only the outputs flagged in ``used_outputs`` and taking only the inputs it then reads
    (flagged in ``used_inputs``), or that ``keep_inputs`` flags (a loop's kept carries)."""
    jaxpr = closed.jaxpr
    live = {v for v, used in zip(jaxpr.outvars, used_outputs) if used and isinstance(v, Var)}
    eqns = dce_equations(jaxpr.eqns, live)
    keep = keep_inputs or [False] * len(jaxpr.invars)
    used_inputs = [k or v in live for v, k in zip(jaxpr.invars, keep)]
    consts = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if v in live]
    pruned = Jaxpr([v for v, _ in consts], _flagged(used_inputs, jaxpr.invars),
                   _flagged(used_outputs, jaxpr.outvars), eqns)
    return ClosedJaxpr(pruned, [c for _, c in consts]), used_inputs


def _flagged(flags, values):
    return [v for f, v in zip(flags, values) if f]

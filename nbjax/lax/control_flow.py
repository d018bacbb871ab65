"""What the control-flow primitives share (``cond`` in ``cond.py``, ``while`` and ``scan``
in ``loops.py``).

Python ``if`` and ``for`` cannot look at traced values, so branches and loop bodies are traced
once, on abstract values, into sub-jaxprs that travel as params of one equation
(``cond[branches=(...)]``, ``while[cond_jaxpr=... body_jaxpr=...]``, ``scan[jaxpr=...]``).
The program stays a flat list of equations that every transformation and compiler can read.

Values a body closes over (arrays, or tracers of an enclosing trace) are hoisted out of it
and passed to the primitive as explicit leading operands: *closure conversion*. Every
sub-jaxpr is therefore closed, with no consts of its own, and an enclosing transformation
sees every value the body depends on as an ordinary operand. This module traces bodies that
way, reshapes sub-jaxprs for the transformation rules (dropping, reordering and selecting
their inputs and outputs), checks types with JAX's error messages, and runs a sub-jaxpr on
NumPy values for the reference implementations.
"""

import numpy as np

from ..config import config
from ..core import (ClosedJaxpr, Jaxpr, Literal, Var, dtypes, eval_closed_jaxpr, get_aval,
                    has_effect, pytree, to_numpy)
from ..core.source_info import function_location
from ..interpreters import ad, staging
from ..interpreters.ad import Zero
from .batch_util import bdim_at_front


# --- tracing bodies ------------------------------------------------------------------------

def trace_converted(fun, in_tree, in_avals, what):
    """Trace ``fun`` on abstract arguments shaped like ``in_tree``, closure-converted.

    Returns ``(jaxpr, consts, out_tree)``: ``jaxpr`` is a ClosedJaxpr without consts whose
    leading inputs receive ``consts`` (the values ``fun`` closed over), then the flat arguments.
    """
    out_trees = []

    def flat_fun(*flat_args):
        leaves, out_tree = pytree.tree_flatten(fun(*in_tree.unflatten(flat_args)))
        out_trees.append(out_tree)
        return leaves

    jaxpr, consts = staging.trace_to_jaxpr(flat_fun, in_avals, staging.describe(fun, what))
    return ClosedJaxpr(staging.convert_constvars(jaxpr), []), consts, out_trees[0]


def share_consts(traced):
    """Give jaxprs traced separately one common list of leading const inputs.

    ``traced`` is a list of ``(jaxpr, consts)``. Branches of a ``cond`` receive the same
    operands, so each takes every branch's consts (a value closed over twice appears once)
    and ignores the ones it does not use. Returns ``(jaxprs, consts)``.
    """
    consts, seen = [], set()
    for _, cs in traced:
        for c in cs:
            if id(c) not in seen:
                seen.add(id(c))
                consts.append(c)
    jaxprs = []
    for closed, own in traced:
        jaxpr = closed.jaxpr
        own_vars = dict(zip([id(c) for c in own], jaxpr.invars))
        const_vars = [own_vars.get(id(c)) or Var(get_aval(c)) for c in consts]
        invars = const_vars + jaxpr.invars[len(own):]
        jaxprs.append(ClosedJaxpr(Jaxpr([], invars, jaxpr.outvars, jaxpr.eqns), []))
    return jaxprs, consts


def split_sizes(values, sizes):
    """``values`` cut into consecutive pieces of the given sizes, plus the rest."""
    values, pieces, start = list(values), [], 0
    for n in sizes:
        pieces.append(values[start:start + n])
        start += n
    return pieces + [values[start:]]


# --- reshaping sub-jaxprs for the transformation rules ----------------------------------
#
# The rules below build new sub-jaxprs (a body's JVP, its batched version, its transpose).
# Control-flow primitives take const-free sub-jaxprs whose inputs come in a fixed order
# (consts, then carries, then scanned slices), so these helpers move consts out into
# operands and reorder inputs and outputs.

def hoist_consts(closed):
    """``(jaxpr, consts)``: ``closed`` as a const-free jaxpr taking its consts first."""
    return ClosedJaxpr(staging.convert_constvars(closed.jaxpr), []), list(closed.consts)


def trace_flat(fun, in_avals, what):
    """Trace a flat function into ``(const-free jaxpr, consts it takes first)``."""
    jaxpr, consts = staging.trace_to_jaxpr(fun, in_avals, what)
    return ClosedJaxpr(staging.convert_constvars(jaxpr), []), consts


def rearrange(closed, inputs, outputs):
    """A const-free jaxpr whose input i is ``closed``'s input ``inputs[i]`` and whose output
    j is its output ``outputs[j]`` (outputs left out are dropped)."""
    jaxpr = closed.jaxpr
    return ClosedJaxpr(Jaxpr([], [jaxpr.invars[i] for i in inputs],
                             [jaxpr.outvars[j] for j in outputs], jaxpr.eqns), [])


def with_unused_inputs(closed, avals):
    """A const-free jaxpr that also takes (and ignores) trailing inputs of types ``avals``."""
    jaxpr = closed.jaxpr
    return ClosedJaxpr(Jaxpr([], jaxpr.invars + [Var(a) for a in avals], jaxpr.outvars,
                             jaxpr.eqns), [])


def loop_invariant(closed, num_consts, outputs):
    """``(flags, before)``: which of the outputs ``outputs`` (indices) of ``closed``, a
    const-free loop body, depend on its first ``num_consts`` inputs (the loop's consts) only,
    and a const-free jaxpr computing those (flagged) outputs from the consts: the part of the
    body that can run once, before the loop, rather than at every iteration."""
    jaxpr = closed.jaxpr
    invariant = set(jaxpr.invars[:num_consts])
    for e in jaxpr.eqns:
        if not has_effect(e) and all(a in invariant for a in e.invars if isinstance(a, Var)):
            invariant.update(e.outvars)
    wanted = [jaxpr.outvars[j] for j in outputs]
    flags = [not isinstance(v, Var) or v in invariant for v in wanted]
    needed = {v for v, f in zip(wanted, flags) if f and isinstance(v, Var)}
    eqns = []
    for e in reversed(jaxpr.eqns):
        if needed.intersection(e.outvars):
            eqns.append(e)
            needed.update(a for a in e.invars if isinstance(a, Var))
    before = Jaxpr([], jaxpr.invars[:num_consts], [v for v, f in zip(wanted, flags) if f],
                   eqns[::-1])
    return flags, ClosedJaxpr(before, [])


def index_groups(sizes):
    """Index ranges of consecutive groups with the given sizes: ``[2, 1] -> [[0, 1], [2]]``."""
    starts = np.cumsum([0] + list(sizes))
    return [list(range(a, b)) for a, b in zip(starts[:-1], starts[1:])]


def fixed_point(flags, out_flags_of):
    """The least flags (per loop carry: batched, nonzero tangent, unknown...) that include
    ``flags`` and are stable through the body: ``out_flags_of(flags)`` adds nothing new.

    A carry that becomes batched (say) after one iteration is batched from the start, so
    the body is transformed again with it batched until nothing changes.
    """
    flags = list(flags)
    while True:
        grown = [a or b for a, b in zip(flags, out_flags_of(flags))]
        if grown == flags:
            return flags
        flags = grown


def carries_reached(closed, flags, first_carry, num_carry, reached):
    """Flags for a loop body's carries that ``fixed_point`` will certainly settle on: those
    a flagged input reaches through equations, ``reached(eqn)`` giving the outputs an
    equation flags when one of its operands is (found again with each carry so flagged,
    until none is added). The body's carries are its inputs from ``first_carry`` on and its
    first ``num_carry`` outputs.

    Where ``reached`` follows how the transformation flags values (a partial evaluation
    stages every result of an operation with an unknown operand), a fixed point started
    from these flags is found by transforming the body once, not once more per carry it
    flags on the way."""
    jaxpr, flags = closed.jaxpr, list(flags)
    carries = slice(first_carry, first_carry + num_carry)
    while True:
        marked = {v for v, f in zip(jaxpr.invars, flags) if f}
        for e in jaxpr.eqns:
            if not marked.isdisjoint(e.invars):
                marked.update(reached(e))
        grown = [f or (isinstance(v, Var) and v in marked)
                 for f, v in zip(flags[carries], jaxpr.outvars[:num_carry])]
        if grown == flags[carries]:
            return grown
        flags[carries] = grown


def unknown_results(eqn):
    """The results partial evaluation stages when an operand of ``eqn`` is unknown: all, but
    a primitive with a rule of its own (a loop) may compute some (``carries_reached``)."""
    return () if "partial_eval" in eqn.primitive.rules else eqn.outvars


def nonzero_tangents(eqn):
    """The results whose tangent is nonzero when an operand's tangent of ``eqn`` is, as far
    as ``Primitive.tangent_from_operands`` says (``carries_reached``)."""
    if not eqn.primitive.tangent_from_operands:
        return ()
    return [v for v in eqn.outvars if dtypes.is_inexact(v.aval.dtype)]


def once_per_flags(transform):
    """``transform(flags)`` (a body transformed for some flags), remembered per flags. A
    ``fixed_point``'s last step transforms the body with the flags it settles on, and its
    caller then needs that very result: without this the body would be traced once more."""
    done = {}

    def transform_once(flags):
        key = tuple(flags)
        if key not in done:
            done[key] = transform(list(flags))
        return done[key]
    return transform_once


def flagged(flags, values):
    return [v for f, v in zip(flags, values) if f]


def nonzero_flags(tangents):
    return [not isinstance(t, Zero) for t in tangents]


def merge_tangents(nonzeros, values, avals):
    """Tangents for outputs: the next of ``values`` where nonzero, else a symbolic zero."""
    values = iter(values)
    return [next(values) if nz else Zero(ad.tangent_aval(a)) for nz, a in zip(nonzeros, avals)]


def fill_linear(flags, values):
    """One entry per flag: the next of ``values`` where the flag is set, else None."""
    values = iter(values)
    return [next(values) if f else None for f in flags]


def batched_at_front(vals, dims, size, batched):
    """Operands for a batched sub-jaxpr: batched ones (``batched[i]``) with the batch axis
    at 0 (broadcast if the value is not batched yet), the others unchanged."""
    return [bdim_at_front(v, d, size) if b else v for v, d, b in zip(vals, dims, batched)]


# --- type checks and JAX's error messages --------------------------------------------------

def typematch(a, b):
    """Equal types up to weak typing, the comparison JAX uses for carries and branches."""
    return a.shape == b.shape and a.dtype == b.dtype


def type_str(aval):
    return f"{aval.dtype.name}[{','.join(str(d) for d in aval.shape)}]"


def _why(a, b):
    reasons = [f"the {what} do not match" for what, differ in
               (("dtypes", a.dtype != b.dtype), ("shapes", a.shape != b.shape)) if differ]
    return ", so " + ", and ".join(reasons)


def type_differences(pairs, describe):
    """One sentence per pair of avals that differ, listed with bullets when there are many.

    ``describe(where, a, b)`` phrases one difference; ``where`` locates the leaf when there is
    more than one.
    """
    diffs = [describe(f" at leaf {i}" if len(pairs) > 1 else "", a, b) + _why(a, b)
             for i, (a, b) in enumerate(pairs) if not typematch(a, b)]
    if len(diffs) == 1:
        return diffs[0][0].upper() + diffs[0][1:] + "."
    return "\n".join(f"  * {d};" for d in diffs[:-1]) + f"\n  * {diffs[-1]}."


def check_types_match(pairs, describe, message):
    """Raise ``TypeError(message(differences))`` unless each pair of avals has the same type;
    the differences are ``type_differences(pairs, describe)``."""
    if not all(typematch(a, b) for a, b in pairs):
        raise TypeError(message(type_differences(pairs, describe)))


def fun_info(fun):
    """'f at file.py:3', naming a user's function in an error message."""
    where = function_location(fun)
    name = getattr(fun, "__name__", type(fun).__name__)
    return f"{name} at {where.file}:{where.line}" if where else name


def check_avals(what, expected, got):
    """For abstract_eval rules: the operand types a sub-jaxpr expects, or a TypeError."""
    if len(expected) != len(got) or not all(typematch(a, b) for a, b in zip(expected, got)):
        raise TypeError(f"{what}: expected types "
                        f"{[a.str_short() for a in expected]}, got {[a.str_short() for a in got]}")


# --- running sub-jaxprs in reference impls -------------------------------------------------

def run_on_numpy(closed, *args):
    """Evaluate a sub-jaxpr on NumPy values (the reference impls' inner step): each equation
    by its primitive's implementation, as eager evaluation runs it but without re-checking
    types the jaxpr already has, since a loop runs its body thousands of times. With
    ``debug_nans``/``debug_infs`` on, equations are bound one by one, so that the error
    names the one that made the NaN."""
    if config.debug_nans or config.debug_infs:
        return [np.asarray(v) for v in eval_closed_jaxpr(closed, *args)]
    jaxpr = closed.jaxpr
    env = dict(zip(jaxpr.constvars, map(to_numpy, closed.consts)))
    env.update(zip(jaxpr.invars, args))

    def read(atom):
        return to_numpy(atom.val) if isinstance(atom, Literal) else env[atom]
    for eqn in jaxpr.eqns:
        out = eqn.primitive.impl(*map(read, eqn.invars), **eqn.params)
        outs = out if eqn.primitive.multiple_results else [out]
        env.update((v, np.asarray(o, v.aval.dtype)) for v, o in zip(eqn.outvars, outs))
    return [np.asarray(read(v)) for v in jaxpr.outvars]

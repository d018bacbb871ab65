"""Optimising passes on jaxprs: inlining, hoisting out of loops and sinking accumulations out
of them, constant folding, algebraic simplification, complex numbers as their parts
(``complex_parts``), CSE, DCE.

Each pass maps a Jaxpr to a new Jaxpr (nothing is mutated) and reports every rewrite it made
as a ``Rewrite`` (the rule that fired and the equation it fired on), so the notebook can show
what the compiler did and why. ``optimize`` runs them in order.
"""

import numpy as np

from ..core import (ClosedJaxpr, EvalTrace, Jaxpr, Literal, ShapedArray, Var, has_effect,
                    set_current_trace, subjaxprs)
from ..core.dce import dce_equations
from ..interpreters.batching import axis_primitives
from ..interpreters.staging import trace_to_closed_jaxpr
from ..lax.shapes import broadcast_in_dim_p
from .complex_parts import split_complex
from .kernel import kernel_lowering
from .rewriting import Rewrite, Rewriter, at, called_from, emit_inlined

# Constant folding makes new constants; bigger results stay computations.
FOLD_SIZE_LIMIT = 1024


# --- inlining ------------------------------------------------------------------------------

def _callee(eqn):
    """The jaxpr an equation stands for, or None: a call's jaxpr, or the primitive's
    decomposition into other primitives (its "jaxpr" lowering, e.g. threefry2x32 as uint32
    arithmetic, a convolution as a packing kernel and a matrix product) when it has no
    kernel lowering of its own. A primitive that is a library step by itself is decomposed
    only where every equation of its decomposition is a kernel, a library step or control
    flow, or decomposes into such (not, for example, a complex convolution, whose slices
    have no kernels)."""
    prim = eqn.primitive
    if prim.call_param is not None:
        return eqn.params[prim.call_param]
    decompose = prim.lowerings.get("jaxpr")
    if decompose is None or "kernel" in prim.lowerings:
        return None
    closed = _decomposition(eqn, decompose)
    if "library" in prim.lowerings and not all(map(_compiles, closed.jaxpr.eqns)):
        return None
    return closed


def _compiles(eqn):
    lowerings = eqn.primitive.lowerings
    return kernel_lowering(eqn)[0] is not None or "library" in lowerings or \
        "control" in lowerings or _callee(eqn) is not None


def _decomposition(eqn, decompose):
    """The ClosedJaxpr of ``decompose`` (a lowering of ``eqn``'s primitive into other
    primitives, taking its operands and params) on ``eqn``'s operand types."""
    prim = eqn.primitive

    def flat(*args):
        out = decompose(*args, **eqn.params)
        return list(out) if prim.multiple_results else [out]
    return trace_to_closed_jaxpr(flat, [a.aval for a in eqn.invars],
                                 f"decomposition of {prim.name}")


def inline_calls(jaxpr, consts, log):
    """Replace calls (jit, checkpoint, custom_jvp/custom_vjp calls: their rules only matter
    to transformations) by the equations of the jaxpr they call, so jit of jit is one program
    for the compiler, and expand primitives that decompose into others. Each inlined copy
    gets fresh variables."""
    rw = Rewriter(jaxpr)
    for eqn in jaxpr.eqns:
        callee = _callee(eqn)
        if callee is None:
            rw.emit(eqn)
            continue
        # A decomposition's equations are the user's line that called the primitive; a
        # call's keep their lines, their call paths continuing the call's.
        call = eqn.primitive.call_param is not None
        where = called_from(eqn.source_info) if call else at(eqn)
        inner = ClosedJaxpr(*inline_calls(callee.jaxpr, callee.consts, log))
        rw.bind_outputs(eqn.outvars, emit_inlined(rw, inner, eqn.invars, where))
        log.append(Rewrite("inline", eqn, f"inlined {eqn.primitive.name} "
                           f"{eqn.params.get('name', '')}".strip() if call else
                           f"decomposed {eqn.primitive.name} into {len(inner.jaxpr.eqns)} "
                           "equations"))
    return rw.finish([v for v, _ in rw.new_consts]), \
        list(consts) + [c for _, c in rw.new_consts]


def decompose_library_steps(closed, categories):
    """``closed`` (a ClosedJaxpr) with each equation of a library step of ``categories``
    that has a ``"kernels"`` lowering replaced by its equations (the pipeline's last pass
    for a target computing such steps from kernels: ``Target.decomposed``); returns it and
    the rewrites. Bodies of control flow are left as they are."""
    log, rw = [], Rewriter(closed.jaxpr)
    for eqn in closed.jaxpr.eqns:
        decompose = eqn.primitive.lowerings.get("kernels")
        if decompose is None or eqn.primitive.lowerings.get("library") not in categories:
            rw.emit(eqn)
            continue
        inner = _decomposition(eqn, decompose)
        rw.bind_outputs(eqn.outvars, emit_inlined(rw, inner, eqn.invars, at(eqn)))
        log.append(Rewrite("decompose", eqn, f"computed {eqn.primitive.name} by "
                           f"{len(inner.jaxpr.eqns)} equations with kernels"))
    return ClosedJaxpr(rw.finish([v for v, _ in rw.new_consts]),
                       list(closed.consts) + [c for _, c in rw.new_consts]), log


# --- hoisting out of loops -----------------------------------------------------------------

# Library calls worth making once for every iteration of a loop rather than once per
# iteration: BLAS runs the small products of one iteration (an RNN's x_t @ U: 32 rows)
# slower than the product of all the rows at once (an LSTM's input product on a Zen 5: 175
# against 230 GFLOP/s), and each call has its own overhead (RNN benchmark: 7% faster).
HOISTED_LIBRARY_CALLS = ("matrix product", "convolution")
HOIST_LIMIT = 64 << 20  # bytes: the most the values computed before a loop may take
# A loop's const transposed once for its products is at most this size (a cache's worth):
# a large matrix's product runs about as fast read either way, and its copy costs more (a
# 4096x4096 float32 transpose: 19 ms on 2 cores, some 3 products of 32 rows by it).
TRANSPOSE_LIMIT = 4 << 20


def _loop_rewrite(eqn, name, *args):
    """``(control, rewrite)``: ``eqn``'s ``ControlLowering`` and what its rewrite ``name``
    (``hoist``, ``sink``, ``transposed_consts``) offers for it, or None for either."""
    control = eqn.primitive.lowerings.get("control")
    rewrite = None if control is None else getattr(control, name)
    return control, None if rewrite is None else rewrite(eqn.params, *args)


def _worth_hoisting(eqn):
    return eqn.primitive.lowerings.get("library") in HOISTED_LIBRARY_CALLS


def hoist_from_loops(jaxpr, consts, log):
    """Compute what a loop body does on its xs alone (a matrix product of each row, say)
    before the loop, for all iterations at once (``ControlLowering.hoist``)."""
    rw = Rewriter(jaxpr)
    for eqn in jaxpr.eqns:
        control, hoisted = _loop_rewrite(eqn, "hoist", _worth_hoisting)
        if hoisted is None or sum(a.nbytes for a in hoisted[0].out_avals) > HOIST_LIMIT:
            rw.emit(eqn)
            continue
        before, params = hoisted
        ops = control.split(eqn.params, eqn.invars)
        before = ClosedJaxpr(*inline_calls(before.jaxpr, before.consts, log))
        stacked = emit_inlined(rw, before, ops["consts"] + ops["xs"], at(eqn))
        rw.eqns.append(eqn.replace(invars=[rw.read(a) for a in eqn.invars] + stacked,
                                   params=params))
        products = sum(map(_worth_hoisting, before.jaxpr.eqns))
        log.append(Rewrite("hoist", eqn, f"{products} product{'s' * (products != 1)} of "
                           f"its body computed before the loop, for all "
                           f"{eqn.params['length']} iterations at once"))
    return rw.finish([v for v, _ in rw.new_consts]), \
        list(consts) + [c for _, c in rw.new_consts]


def sink_from_loops(jaxpr, consts, log):
    """Compute after a loop the matrix products (and sums) its carries only accumulate, for
    all iterations at once (``ControlLowering.sink``): a scan's transpose accumulates each
    weight's gradient one small product per iteration, and one product over the stacked
    iterations runs at BLAS's full rate (an LSTM's two weight gradients: 21 -> 13 ms)."""
    rw = Rewriter(jaxpr)
    for eqn in jaxpr.eqns:
        control, sunk = _loop_rewrite(eqn, "sink")
        if sunk is None:
            rw.emit(eqn)
            continue
        after, params, taken = sunk
        ops = control.split(eqn.params, eqn.invars)
        stacked = [Var(a) for a in after.in_avals[len(taken):-len(ops["xs"]) or None]]
        if sum(v.aval.nbytes for v in stacked) > HOIST_LIMIT:
            rw.emit(eqn)
            continue
        kept = [i for i in range(len(ops["carry"])) if i not in taken]
        carries_out = eqn.outvars[:len(ops["carry"])]
        rw.eqns.append(eqn.replace(
            invars=[rw.read(a) for a in ops["consts"] + [ops["carry"][i] for i in kept]
                    + ops["xs"]],
            outvars=[carries_out[i] for i in kept] + eqn.outvars[len(carries_out):] + stacked,
            params=params))
        finals = emit_inlined(rw, after, [ops["carry"][i] for i in taken] + stacked
                              + ops["xs"], at(eqn))
        rw.bind_outputs([carries_out[i] for i in taken], finals)
        log.append(Rewrite("sink", eqn, f"{len(taken)} sum{'s' * (len(taken) != 1)} its "
                           f"carries accumulate computed after the loop, over all "
                           f"{eqn.params['length']} iterations at once"))
    return rw.finish(), consts


def transpose_loop_consts(jaxpr, consts, log):
    """Transpose once before a loop the matrices its body's products read transposed
    (``ControlLowering.transposed_consts``): ``x @ w.T`` with ``w`` the same at every
    iteration reads a copy of ``w.T`` laid out as ``x @ w`` wants it."""
    rw = Rewriter(jaxpr)
    for eqn in jaxpr.eqns:
        control, transposed = _loop_rewrite(eqn, "transposed_consts",
                                            lambda aval: aval.nbytes <= TRANSPOSE_LIMIT)
        if transposed is None:
            rw.emit(eqn)
            continue
        before, params = transposed
        copies = emit_inlined(rw, before, control.split(eqn.params, eqn.invars)["consts"],
                              at(eqn))
        rw.eqns.append(eqn.replace(invars=copies + [rw.read(a) for a in eqn.invars],
                                   params=params))
        log.append(Rewrite("transpose_consts", eqn, f"{len(copies)} matri"
                           f"{'ces' if len(copies) != 1 else 'x'} its products read "
                           "transposed, transposed once before the loop"))
    return rw.finish(), consts


# --- constant folding ----------------------------------------------------------------------

def fold_constants(jaxpr, consts, log):
    """Evaluate equations whose operands are all known and whose results are small (not
    those that raise when compiled, their ``"error"`` lowering: dead code elimination, after
    this, may drop them). A known operand whose elements are all one value is written as
    that value where the result allows (``_uniform_as_literal``)."""
    known = {v: c for v, c in zip(jaxpr.constvars, consts)}
    rw = Rewriter(jaxpr)
    for eqn in jaxpr.eqns:
        ins = [rw.read(a) for a in eqn.invars]
        foldable = (all(isinstance(a, Literal) or a in known for a in ins)
                    and not _has_subjaxpr(eqn) and not has_effect(eqn)
                    and "error" not in eqn.primitive.lowerings
                    and eqn.primitive not in axis_primitives  # psum(1.0) differs per axis
                    and all(v.aval.size <= FOLD_SIZE_LIMIT for v in eqn.outvars))
        if not foldable:
            uniform = _uniform_as_literal(eqn, ins, known)
            rw.emit(eqn if uniform is None else uniform)
            if uniform is not None:
                log.append(Rewrite("constant_fold", eqn, "an operand of one value as a literal"))
            continue
        vals = [a.val if isinstance(a, Literal) else known[a] for a in ins]
        with set_current_trace(EvalTrace()):
            out = eqn.primitive.bind(*vals, **eqn.params)
        outs = out if eqn.primitive.multiple_results else [out]
        atoms = []
        for v, val in zip(eqn.outvars, outs):
            if v.aval.shape == ():
                atoms.append(Literal(np.asarray(val), v.aval))
            else:
                new = Var(v.aval)
                known[new] = val
                rw.new_consts.append((new, val))
                atoms.append(new)
        rw.bind_outputs(eqn.outvars, atoms)
        log.append(Rewrite("constant_fold", eqn))
    out = rw.finish([v for v, _ in rw.new_consts])
    return out, list(consts) + [c for _, c in rw.new_consts]


def _uniform_as_literal(eqn, ins, known):
    """``eqn`` with a known operand whose elements are all one value written as that value
    (a literal), where that keeps its result: the operand of a re-striding (a broadcast,
    slice, transpose... of it is a broadcast of the value) or of a binary element-wise
    equation whose other operand has the result's shape, but a sum (a matrix product adds
    its result into the other operand's buffer: the zeros a loop's accumulated gradient
    starts from, once the sum is sunk out of the loop); else None. A kernel then
    compiles the value in where it read it from a buffer: ``randint``'s span, folded to a
    one-element array, was a divisor loaded at run time, and its three remainders per draw
    ran as scalar divisions (x86 has no vector ones; by a constant, LLVM multiplies)."""
    lowering = kernel_lowering(eqn)[0]
    values = [_uniform_value(a, known) for a in ins]
    if lowering is None or all(v is None for v in values):
        return None
    (out,) = eqn.outvars
    if lowering.kind == "index" and lowering.restrides and len(ins) == 1:
        return eqn.replace(primitive=broadcast_in_dim_p, invars=[_literal(values[0])],
                           params=dict(shape=out.aval.shape, broadcast_dimensions=(),
                                       sharding=None))
    if lowering.kind != "elementwise" or lowering.sums or len(ins) != 2 or not any(
            v is None and isinstance(a, Var) and a.aval.shape == out.aval.shape
            for a, v in zip(ins, values)):
        return None
    return eqn.replace(invars=[a if v is None else _literal(v) for a, v in zip(ins, values)])


def _uniform_value(atom, known):
    """The one value (0-d) of all the elements of a known array ``atom``, or None."""
    if not isinstance(atom, Var) or atom not in known:
        return None
    value = np.asarray(known[atom])
    first = value.reshape(-1)[:1]
    if first.size == 0 or np.broadcast_to(first, value.shape).tobytes() != value.tobytes():
        return None
    return first.reshape(())


def _literal(value):
    return Literal(value, ShapedArray((), value.dtype))


def _has_subjaxpr(eqn):
    return any(True for _ in subjaxprs(eqn.params))


# --- algebraic simplification --------------------------------------------------------------

def _use_counts(jaxpr):
    """How many times each variable is read (by equations or as a program output)."""
    counts = {}
    for a in [x for e in jaxpr.eqns for x in e.invars] + list(jaxpr.outvars):
        if isinstance(a, Var):
            counts[a] = counts.get(a, 0) + 1
    return counts


def simplify(jaxpr, consts, log):
    """Apply each equation's primitive's ``simplify`` rule (see ``nbjax.core.primitive``):
    ``x * 1``, ``-(-x)``, same-type conversions, small integer powers as multiplies... The
    identities are knowledge of the primitives, written next to them in ``nbjax.lax``."""
    rw = Rewriter(jaxpr)
    producers = {}
    uses = _use_counts(jaxpr)

    known = dict(zip(jaxpr.constvars, consts))

    def use_count(atom):
        return uses.get(atom, 0)

    def value_of(atom):
        return np.asarray(atom.val) if isinstance(atom, Literal) else known.get(atom)
    for eqn in jaxpr.eqns:
        ins = [rw.read(a) for a in eqn.invars]
        rule = eqn.primitive.rules.get("simplify")
        result = None if rule is None else rule(eqn, ins, producers.get, use_count, value_of)
        if result is None:
            new_eqns = [eqn.replace(invars=ins)]
        else:
            replacement, description = result
            log.append(Rewrite("simplify", eqn, description))
            if not isinstance(replacement, list):
                rw.bind_outputs(eqn.outvars, [replacement])
                continue
            new_eqns = replacement
        for new in new_eqns:
            rw.eqns.append(new)
            producers.update((v, new) for v in new.outvars)
    return rw.finish(), consts


# --- common subexpressions and dead code ---------------------------------------------------

def _atom_key(atom):
    if isinstance(atom, Literal):
        return ("lit", atom.aval, np.asarray(atom.val).tobytes())
    return ("var", id(atom))


def cse(jaxpr, consts, log):
    """Reuse the result of an identical earlier equation (same primitive, params, operands)."""
    rw = Rewriter(jaxpr)
    seen = {}
    for eqn in jaxpr.eqns:
        ins = [rw.read(a) for a in eqn.invars]
        if has_effect(eqn):
            rw.emit(eqn)
            continue
        try:
            key = (eqn.primitive, tuple(map(_atom_key, ins)),
                   tuple(sorted((k, _param_key(v)) for k, v in eqn.params.items())))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in seen:
            rw.bind_outputs(eqn.outvars, seen[key].outvars)
            log.append(Rewrite("cse", eqn, "same as an earlier equation"))
            continue
        rw.emit(eqn)
        if key is not None:
            seen[key] = rw.eqns[-1]
    return rw.finish(), consts


def _param_key(value):
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype, value.shape, value.tobytes())
    return value


def dce(jaxpr, consts, log):
    """Drop equations whose results nothing uses (unless they have an effect), the unused
    results of control flow with what computes them in its bodies (``dce_equations``), and
    constvars nothing reads."""
    live = {a for a in jaxpr.outvars if isinstance(a, Var)}
    kept = dce_equations(jaxpr.eqns, live,
                         lambda eqn, why: log.append(Rewrite("dce", eqn, why)))
    pairs = [(v, c) for v, c in zip(jaxpr.constvars, consts) if v in live]
    return Jaxpr([v for v, _ in pairs], jaxpr.invars, jaxpr.outvars, kept), \
        [c for _, c in pairs]


def complex_parts(jaxpr, consts, log):
    """Complex numbers computed on their parts (``complex_parts.split_complex``), then, if
    any were, that arithmetic folded and simplified (on constants; the real part of a
    product by 1)."""
    before = len(log)
    jaxpr, consts = split_complex(jaxpr, consts, log)
    if len(log) == before:
        return jaxpr, consts
    return simplify(*fold_constants(jaxpr, consts, log), log)


PASSES = (inline_calls, hoist_from_loops, sink_from_loops, transpose_loop_consts, fold_constants,
          simplify, complex_parts, cse, dce)


def optimize(closed, passes=PASSES):
    """Run the passes; returns the optimised ClosedJaxpr and the list of Rewrites."""
    log = []
    jaxpr, consts = closed.jaxpr, list(closed.consts)
    for p in passes:
        jaxpr, consts = p(jaxpr, consts, log)
    return ClosedJaxpr(jaxpr, consts), log

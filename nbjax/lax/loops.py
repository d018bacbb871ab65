"""Loops as primitives: ``while`` and ``scan``; ``fori_loop`` and ``map`` written with them.

``fori_loop`` and ``map`` are not primitives: they are written with ``scan`` or ``while``,
exactly as in JAX, so their jaxprs look like JAX's. Each primitive's transformation rules
follow it: vmap batches the sub-jaxprs; JVP runs the primitive on the sub-jaxprs' JVPs;
reverse mode (scan) transposes the body. Loops find which carries are batched / have nonzero
tangents / are linear by a fixed point.
"""

import collections
import inspect
import operator

import numpy as np

from ..core import (ClosedJaxpr, Jaxpr, Primitive, Tracer, Var, dtypes, eval_closed_jaxpr,
                    get_aval, has_effect, pytree)
from ..interpreters import ad, partial_eval
from ..interpreters.batching import AxisData
from ..core.dce import dce_jaxpr
from ..interpreters.transpose import backward_pass, is_undefined
from . import elementwise, reductions
from .batch_util import batch_jaxpr, vmapped
from .control_flow import (batched_at_front, carries_reached, check_avals, check_types_match,
                           fill_linear, fixed_point, flagged, hoist_consts, index_groups,
                           loop_invariant, merge_tangents, nonzero_flags, nonzero_tangents,
                           once_per_flags, rearrange, run_on_numpy, split_sizes,
                           trace_converted, trace_flat, type_str, typematch, unknown_results,
                           with_unused_inputs)
from .dot import DotDimensionNumbers, dot_general_p
from .shapes import (broadcast_in_dim, moveaxis, reduce_sum, reduce_sum_p, reshape, reshape_p,
                     transpose_p)
from .structural import concatenate, slice_in_dim
from .standard import control_lowering, owned_results, scalar_like

__all__ = ["while_loop", "while_p", "fori_loop", "scan", "scan_p", "map"]


# --- loop carries --------------------------------------------------------------------------

def _carry_name(fun):
    """The name of the body's carry parameter, for error messages (as JAX words them)."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        return ""
    return f" {params[0]}" if params else ""


def _check_carry_tree(name, fun, in_tree, out_tree):
    if in_tree != out_tree:
        raise TypeError(
            f"{name} function carry input and carry output must have the same pytree "
            f"structure, but they differ:\n\nThe input carry{_carry_name(fun)} is {in_tree} "
            f"but the carry output is {out_tree}.\n\nRevise the function so that the carry "
            "output has the same pytree structure as the carry input.")


def _check_carry_types(name, fun, in_avals, out_avals):
    check_types_match(list(zip(in_avals, out_avals)), lambda where, a, b: (
        f"the input carry{_carry_name(fun)}{where} has type {type_str(a)} but the "
        f"corresponding output carry component has type {type_str(b)}"), lambda differences: (
        f"{name} function carry input and carry output must have equal types, but they "
        f"differ:\n\n{differences}\n\nRevise the function so that all output types match "
        "the corresponding input types."))


def _promote_weak_carry(init_flat, in_avals, out_avals):
    """Convert weakly typed initial carries (Python scalars) to the type the body returns.

    ``fori_loop(0, n, lambda i, x: x * y, 1)`` with a float ``y`` starts from the int ``1``;
    like JAX we then start from ``float32(1)`` instead. Returns None when nothing changes.
    """
    changed, out = False, []
    for x, a, b in zip(init_flat, in_avals, out_avals):
        if a.weak_type and not typematch(a, b):
            dtype, _ = dtypes.promote((a.dtype, True), (b.dtype, b.weak_type))
            x, changed = elementwise.convert_element_type(x, dtype), True
        out.append(x)
    return out if changed else None


def _trace_loop(name, body_fun, trace, init_flat, init_tree):
    """Trace a loop whose body must return a carry of the type it receives.

    ``trace(carry_avals)`` traces the loop's functions and returns ``(traced, carry_out_tree,
    carry_out_avals)``. A weakly typed initial carry is promoted and the loop traced again
    (once), as JAX does. Returns ``(traced, init_flat)`` with the possibly promoted init.
    """
    in_avals = [get_aval(x) for x in init_flat]
    traced, out_tree, out_avals = trace(in_avals)
    _check_carry_tree(name, body_fun, init_tree, out_tree)
    promoted = _promote_weak_carry(init_flat, in_avals, out_avals)
    if promoted is not None:
        init_flat = promoted
        in_avals = [get_aval(x) for x in init_flat]
        traced, out_tree, out_avals = trace(in_avals)
    _check_carry_types(name, body_fun, in_avals, out_avals)
    return traced, init_flat


# --- while ---------------------------------------------------------------------------------

while_p = Primitive("while", multiple_results=True)
control_lowering(while_p, lambda params: [("cond", params["cond_jaxpr"]),
                                          ("body", params["body_jaxpr"])],
                 lambda params: [("cond consts", params["cond_nconsts"]),
                                 ("body consts", params["body_nconsts"]), ("carry", None)])


@while_p.def_abstract_eval
def _while_abstract_eval(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts, body_consts, carry = split_sizes(args, [cond_nconsts, body_nconsts])
    check_avals("while cond_jaxpr inputs", cond_jaxpr.in_avals, cond_consts + carry)
    check_avals("while body_jaxpr inputs", body_jaxpr.in_avals, body_consts + carry)
    check_avals("while body_jaxpr outputs", carry, body_jaxpr.out_avals)
    pred = cond_jaxpr.out_avals
    if len(pred) != 1 or pred[0].shape != () or not dtypes.is_bool(pred[0].dtype):
        raise TypeError(f"while cond_jaxpr must return a boolean scalar, got "
                        f"{[a.str_short() for a in pred]}")
    return list(body_jaxpr.out_avals)


@while_p.def_impl
def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts, body_consts, carry = split_sizes(args, [cond_nconsts, body_nconsts])
    while run_on_numpy(cond_jaxpr, *cond_consts, *carry)[0]:
        carry = run_on_numpy(body_jaxpr, *body_consts, *carry)
    return owned_results(carry)


def _while_dce(used_outputs, eqn):
    """Without the carries that no kept carry, result or the predicate reads. (JAX has no
    such rule: there a dead tangent through a ``custom_vjp`` in a while body still raises.)"""
    params = eqn.params
    cond, body = params["cond_jaxpr"], params["body_jaxpr"]
    cond_nconsts, body_nconsts = params["cond_nconsts"], params["body_nconsts"]
    read_by_cond = dce_jaxpr(cond, [True])[1][cond_nconsts:]
    used = fixed_point([u or r for u, r in zip(used_outputs, read_by_cond)],
                       lambda used: dce_jaxpr(body, used)[1][body_nconsts:])
    cond, cond_used = dce_jaxpr(cond, [True], [False] * cond_nconsts + used)
    body, body_used = dce_jaxpr(body, used, [False] * body_nconsts + used)
    cond_consts, body_consts, carry = split_sizes(eqn.invars, [cond_nconsts, body_nconsts])
    return eqn.replace(
        invars=flagged(cond_used, cond_consts) + flagged(body_used, body_consts)
        + flagged(used, carry), outvars=flagged(used, eqn.outvars),
        params=dict(params, cond_jaxpr=cond, body_jaxpr=body,
                    cond_nconsts=sum(cond_used[:cond_nconsts]),
                    body_nconsts=sum(body_used[:body_nconsts])))


while_p.def_rule("dce", _while_dce)


def _while_batch(axis_data, vals, dims, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """vmap of while, as JAX does it. A carry is batched if its initial value is, or if the
    body makes it so (a fixed point). If the predicate does not depend on batched values, the
    loop runs as before on batched carries. If it does, batch members stop at different
    iterations: the loop runs while any member's predicate holds, and each iteration keeps
    the old carry of the members already done (so every carry is batched)."""
    size = axis_data.size
    cond_bat, body_bat, init_bat = split_sizes([d is not None for d in dims],
                                          [cond_nconsts, body_nconsts])

    def pred_batched(carry_bat):
        return batch_jaxpr(cond_jaxpr, axis_data, cond_bat + carry_bat, False)[1][0]

    def carry_out_batched(carry_bat):
        if pred_batched(carry_bat):
            return [True] * len(carry_bat)
        return batch_jaxpr(body_jaxpr, axis_data, body_bat + carry_bat, False)[1]

    carry_bat = fixed_point(init_bat, carry_out_batched)
    cond_b, cond_b_consts = hoist_consts(batch_jaxpr(cond_jaxpr, axis_data, cond_bat + carry_bat,
                                               False)[0])
    body_b, body_b_consts = hoist_consts(batch_jaxpr(body_jaxpr, axis_data, body_bat + carry_bat,
                                               carry_bat)[0])
    cond_consts, body_consts, init = split_sizes(
        batched_at_front(vals, dims, size, cond_bat + body_bat + carry_bat),
        [cond_nconsts, body_nconsts])
    cond_consts, body_consts = cond_b_consts + cond_consts, body_b_consts + body_consts
    out_dims = [0 if b else None for b in carry_bat]
    if not pred_batched(carry_bat):
        outs = while_p.bind(*cond_consts, *body_consts, *init, cond_jaxpr=cond_b,
                            body_jaxpr=body_b, cond_nconsts=len(cond_consts),
                            body_nconsts=len(body_consts))
        return outs, out_dims

    n_cond = len(cond_consts)

    def any_running(*args):
        return [reductions.reduce_or(eval_closed_jaxpr(cond_b, *args)[0], axes=(0,))]

    def step_running(*args):
        cond_args, body_args, carry = split_sizes(args, [n_cond, len(body_consts)])
        running = eval_closed_jaxpr(cond_b, *cond_args, *carry)[0]
        new = eval_closed_jaxpr(body_b, *body_args, *carry)
        return [elementwise.select_n(broadcast_in_dim(running, get_aval(old).shape, (0,)),
                                     old, x) for old, x in zip(carry, new)]

    avals = [get_aval(x) for x in cond_consts + body_consts + init]
    carry_avals = avals[n_cond + len(body_consts):]
    new_cond, new_cond_consts = trace_flat(any_running, avals[:n_cond] + carry_avals,
                                            "vmap of a while_loop cond_fun")
    new_body, new_body_consts = trace_flat(step_running, avals, "vmap of a while_loop body")
    outs = while_p.bind(*new_cond_consts, *cond_consts,
                        *new_body_consts, *cond_consts, *body_consts, *init,
                        cond_jaxpr=new_cond, body_jaxpr=new_body,
                        cond_nconsts=len(new_cond_consts) + n_cond,
                        body_nconsts=len(new_body_consts) + n_cond + len(body_consts))
    return outs, out_dims


while_p.def_batch(_while_batch)


def _while_jvp(primals, tangents, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """Forward mode through while: the loop also carries the tangents of the carries that
    can be nonzero (those with nonzero initial tangents, and, by a fixed point, those the
    body gives a nonzero tangent). The predicate ignores the tangents.

    As for cond, the primal outputs come from the original loop, so that under
    ``linearize`` they are known at once; the loop carrying tangents is staged (it recomputes
    the primal carries). Transposing it is not possible: see ``_while_transpose``.
    """
    cond_consts, body_consts, init = split_sizes(primals, [cond_nconsts, body_nconsts])
    _, body_tangents, init_tangents = split_sizes(tangents, [cond_nconsts, body_nconsts])
    body_nz, n_carry = nonzero_flags(body_tangents), len(init)

    @once_per_flags
    def jvp_body(carry_nz):
        return ad.jvp_jaxpr(body_jaxpr, body_nz + carry_nz, carry_nz)

    carry_nz = fixed_point(carries_reached(body_jaxpr, body_nz + nonzero_flags(init_tangents),
                                           body_nconsts, n_carry, nonzero_tangents),
                           lambda nz: jvp_body(nz)[1])
    primals_out = while_p.bind(*primals, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                               cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    if not any(carry_nz):
        return primals_out, merge_tangents(carry_nz, [], body_jaxpr.out_avals)
    jvp, jvp_consts = hoist_consts(jvp_body(carry_nz)[0])
    # jvp's inputs: jvp_consts, body consts, carries, body const tangents, carry tangents;
    # while_p wants all consts (and their tangents) before the carries.
    consts, bconsts, carry, bconst_t, carry_t = index_groups(
        [len(jvp_consts), body_nconsts, n_carry, sum(body_nz), sum(carry_nz)])
    jvp = rearrange(jvp, consts + bconsts + bconst_t + carry + carry_t,
                     range(len(jvp.out_avals)))
    tangent_avals = [ad.tangent_aval(a) for a in flagged(carry_nz, body_jaxpr.out_avals)]
    cond = with_unused_inputs(cond_jaxpr, tangent_avals)
    init_t = [ad.instantiate(t) for t in flagged(carry_nz, init_tangents)]
    outs = while_p.bind(*cond_consts, *jvp_consts, *body_consts,
                        *flagged(body_nz, body_tangents), *init, *init_t,
                        cond_jaxpr=cond, body_jaxpr=jvp, cond_nconsts=cond_nconsts,
                        body_nconsts=len(jvp_consts) + body_nconsts + sum(body_nz))
    return primals_out, merge_tangents(carry_nz, outs[n_carry:], body_jaxpr.out_avals)


while_p.def_jvp(_while_jvp)


def _while_transpose(cts, *args, **params):
    """Reverse mode would need the carries of every iteration, and a while loop does not
    know its trip count in advance to store them; JAX refuses, and so do we."""
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                     "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                     "using fori_loop with static start/stop.")


while_p.def_transpose(_while_transpose)


def _check_predicate(cond_jaxpr, out_tree):
    if not out_tree.is_leaf():
        raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {out_tree}.")
    aval = cond_jaxpr.out_avals[0]
    if aval.shape != () or not dtypes.is_bool(aval.dtype):
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                        f"{cond_jaxpr.out_avals}.")


def while_loop(cond_fun, body_fun, init_val):
    """``while cond_fun(val): val = body_fun(val)``, as one primitive; returns ``val``."""
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    init_flat, init_tree = pytree.tree_flatten(init_val)
    in_tree = pytree.tree_structure((init_val,))

    def trace(carry_avals):
        cond_jaxpr, cond_consts, pred_tree = trace_converted(cond_fun, in_tree, carry_avals,
                                                    "while_loop cond_fun")
        _check_predicate(cond_jaxpr, pred_tree)
        body_jaxpr, body_consts, out_tree = trace_converted(body_fun, in_tree, carry_avals,
                                                   "while_loop body_fun")
        traced = (cond_jaxpr, cond_consts, body_jaxpr, body_consts)
        return traced, out_tree, body_jaxpr.out_avals

    (cond_jaxpr, cond_consts, body_jaxpr, body_consts), init_flat = _trace_loop(
        "while_loop body", body_fun, trace, init_flat, init_tree)
    outs = while_p.bind(*cond_consts, *body_consts, *init_flat,
                        cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                        cond_nconsts=len(cond_consts), body_nconsts=len(body_consts))
    return init_tree.unflatten(outs)


# --- scan ----------------------------------------------------------------------------------

scan_p = Primitive("scan", multiple_results=True)


def _scan_hoist(params, worth):
    """What a compiler may take out of a scan: the equations of its body that ``worth``
    picks (a matrix product, say) and that depend on the xs but not on the carries, with
    what they need, computed for every iteration at once before the loop (one product of
    all the rows of ``xs`` instead of one small product per iteration).

    Returns None, or ``(before, new_params)``: ``before`` is a jaxpr taking the scan's
    consts and xs and returning the stacked values the body then reads as extra xs (the
    body's per-iteration part, batched over the iterations); ``new_params`` are the params
    of the scan taking them, after its other operands. Equations on the consts only stay in
    the body as well, where it uses them (they are loop-invariant).
    """
    closed, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    if closed.consts or params["length"] < 2:
        return None
    body = closed.jaxpr
    on_carries = set(body.invars[num_consts:num_consts + num_carry])
    on_xs = set(body.invars[num_consts + num_carry:])
    for e in body.eqns:
        reads = [a for a in e.invars if isinstance(a, Var)]
        if has_effect(e) or any(a in on_carries for a in reads):
            on_carries.update(e.outvars)
        elif any(a in on_xs for a in reads):
            on_xs.update(e.outvars)
    taken, needed = [], set()
    for e in reversed(body.eqns):
        if e.outvars and e.outvars[0] not in on_carries and (
                needed.intersection(e.outvars) or e.outvars[0] in on_xs and worth(e)):
            taken.append(e)
            needed.update(a for a in e.invars if isinstance(a, Var))
    taken.reverse()
    moved = {id(e) for e in taken if e.outvars[0] in on_xs}  # the rest are loop-invariant
    rest = [e for e in body.eqns if id(e) not in moved]
    read_later = {a for e in rest for a in e.invars if isinstance(a, Var)} | {
        a for a in body.outvars if isinstance(a, Var)}
    stacked = [v for e in taken for v in e.outvars if v in on_xs and v in read_later]
    if not stacked:
        return None
    consts, xs = body.invars[:num_consts], body.invars[num_consts + num_carry:]
    per_iteration = ClosedJaxpr(Jaxpr([], consts + xs, stacked, taken), [])
    before, _ = batch_jaxpr(per_iteration, AxisData(None, params["length"]),
                            [False] * len(consts) + [True] * len(xs), instantiate=True)
    new_body = Jaxpr([], body.invars + stacked, body.outvars, rest)
    return before, dict(params, jaxpr=ClosedJaxpr(new_body, []))


def _scan_sink(params):
    """What a compiler may compute after a scan instead of at every iteration: a carry
    that only accumulates a matrix product of values of the iteration (``acc = acc +
    g_t.T @ x_t``, as the transpose of a scan accumulates a weight's gradient) is one
    product over all iterations after the loop, contracting the iteration axis too: one
    large product instead of a small one per iteration (the same sum, in another order).
    The product's operands that the body computes are stacked as extra ys; those that are
    xs are read where they are. Operands that are consts (loop-invariant) are left alone.
    A carry accumulating a sum, reshape or transpose of a value stacked so anyway (a
    bias's gradient, ``sum(g_t, 0)``) takes that of the value summed over the iterations.

    Returns None, or ``(after, new_params, sunk)``: ``sunk`` lists the indices of the
    carries taken out; the new scan takes and returns the other carries, then returns the
    ys and the stacked operands; ``after`` takes the sunk carries' initial values, the
    stacked operands and the scan's xs, and returns the sunk carries' final values.
    """
    closed, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    if closed.consts or params["length"] < 2:
        return None
    body = closed.jaxpr
    carries = body.invars[num_consts:num_consts + num_carry]
    consts, xs = set(body.invars[:num_consts]), body.invars[num_consts + num_carry:]
    producer = {v: e for e in body.eqns for v in e.outvars}
    uses = collections.Counter(a for e in body.eqns for a in e.invars if isinstance(a, Var))
    uses.update(a for a in body.outvars if isinstance(a, Var))
    found = {i: _accumulation(acc, out, producer, uses)
             for i, (acc, out) in enumerate(zip(carries, body.outvars))}
    chains = {}
    for i, (chain, summed) in found.items():
        if chain and summed is None:
            dot = _read_untransposed(chain[-1], producer, uses)
            if all(isinstance(a, Var) and a not in consts for a in dot.invars):
                chains[i] = chain[:-1] + [dot], None
    stacked = list(dict.fromkeys(a for chain, _ in chains.values() for a in chain[-1].invars
                                 if a not in xs))
    chains.update({i: (chain, summed) for i, (chain, summed) in found.items()
                   if summed is not None and summed in set(stacked) | set(xs)})
    if not chains:
        return None
    removed = {id(e) for i in chains for e in found[i][0]}
    kept = [i for i in range(num_carry) if i not in chains]
    new_body = Jaxpr([], body.invars[:num_consts] + [carries[i] for i in kept] + xs,
                     [body.outvars[i] for i in kept] + body.outvars[num_carry:] + stacked,
                     [e for e in body.eqns if id(e) not in removed])
    sunk = sorted(chains)

    def after(*args):
        inits, stacks = args[:len(sunk)], dict(zip(stacked + xs, args[len(sunk):]))
        return [_sum_over_iterations(*chains[i], carries[i], init, stacks)
                for i, init in zip(sunk, inits)]
    length = params["length"]
    in_avals = [carries[i].aval for i in sunk] + [
        v.aval.update(shape=(length,) + v.aval.shape) for v in stacked + xs]
    after_jaxpr, _ = trace_flat(after, in_avals, "scan's accumulations after the loop")
    return after_jaxpr, dict(params, jaxpr=ClosedJaxpr(new_body, []),
                             num_carry=len(kept)), sunk


_LINEAR_OPS = (transpose_p, reshape_p, reduce_sum_p)  # sums over iterations commute with them


def _accumulation(acc, out, producer, uses):
    """``(chain, summed)``: the equations ``[add, linear ops..., dot_general]`` by which a
    body's carry ``acc`` becomes its output ``out`` = acc + a linear map (``_LINEAR_OPS``)
    of a product (``summed`` None), or ``[add, linear ops...]`` of a value ``summed``, each
    value between them used only there; or ``([], None)``."""
    add = producer.get(out)
    if add is None or add.primitive not in (elementwise.add_p, ad.add_any_p) or \
            acc not in add.invars or uses[acc] != 1 or uses[out] != 1:
        return [], None
    value = add.invars[1] if add.invars[0] is acc else add.invars[0]
    chain = [add]
    while isinstance(value, Var) and uses[value] == 1 and value in producer:
        eqn = producer[value]
        if eqn.primitive is dot_general_p:
            return chain + [eqn], None
        if eqn.primitive not in _LINEAR_OPS:
            break
        chain.append(eqn)
        value = eqn.invars[0]
    return (chain, value) if isinstance(value, Var) else ([], None)


def _read_untransposed(dot, producer, uses):
    """``dot`` reading the values its operands transpose, where it can (its simplification
    rule), so that those values are stacked rather than their transposes (``x.T @ g`` of an
    xs ``x`` reads ``x`` where it is)."""
    simplified = dot.primitive.rule("simplify")(dot, dot.invars, producer.get, uses.get,
                                                lambda atom: None)
    return dot if simplified is None else simplified[0][0]


def _sum_over_iterations(chain, summed, acc, init, stacks):
    """``init`` plus the sum over iterations of what ``chain`` adds to ``acc`` in the body
    (``_accumulation``), from values stacked along a leading axis: its product contracting
    that axis too, or its value ``summed`` summed over it, then its linear maps."""
    add, *linear = chain
    if summed is None:
        dot = linear.pop()
        (lc, rc), (lb, rb) = dot.params["dimension_numbers"]

        def shifted(axes):
            return tuple(a + 1 for a in axes)
        numbers = DotDimensionNumbers((((0,) + shifted(lc), (0,) + shifted(rc)),
                                       (shifted(lb), shifted(rb))))
        total = dot_general_p.bind(*(stacks[a] for a in dot.invars),
                                   **dict(dot.params, dimension_numbers=numbers))
    else:
        total = reduce_sum(stacks[summed], (0,))
    for eqn in reversed(linear):
        total = eqn.primitive.bind(total, **eqn.params)
    return add.primitive.bind(*(init if a is acc else total for a in add.invars))


def _scan_transposed_consts(params, worth):
    """Matrices the body multiplies by as their transposes, when they are consts of the loop
    (``x @ w.T``, as the transpose of ``h @ w`` reads ``w``, or as a user writes it): what
    a compiler may transpose once before the loop, so that each iteration's product reads
    its right operand as rows of ``k x n`` (its left one as ``m x k``), the layout matrix
    products run fastest on (a CPU's register tiles: 79 against 106-113 us for an LSTM's
    32 x 1024 by 1024 x 256), rather than transposed at every iteration.

    ``worth(aval)`` says which consts are worth a copy (small ones: a transposing copy of
    a large matrix costs more than the loop saves). Returns None, or ``(before,
    new_params)``: ``before`` takes the scan's consts and returns the transposed copies,
    which the new scan takes before them."""
    closed, num_consts = params["jaxpr"], params["num_consts"]
    if closed.consts or params["length"] < 2:
        return None
    body = closed.jaxpr
    consts = body.invars[:num_consts]
    const_set, producer = set(consts), {v: e for e in body.eqns for v in e.outvars}
    copies, eqns = {}, []
    for e in body.eqns:
        found = _const_read_transposed(e, const_set, producer)
        if found is None or not worth(found[1].aval):
            eqns.append(e)
            continue
        side, w = found
        copy = copies.setdefault(w, Var(w.aval.update(shape=w.aval.shape[::-1])))
        (lc, rc), batch = e.params["dimension_numbers"]
        numbers = ((1,), rc) if side == 0 else (lc, (0,))
        eqns.append(e.replace(
            invars=[copy if i == side else a for i, a in enumerate(e.invars)],
            params=dict(e.params, dimension_numbers=DotDimensionNumbers((numbers, batch)))))
    if not copies:
        return None
    originals = list(copies)

    def before(*args):
        return [transpose_p.bind(args[consts.index(w)], permutation=(1, 0)) for w in originals]
    before_jaxpr, _ = trace_flat(before, [v.aval for v in consts], "consts transposed")
    new_body = Jaxpr([], list(copies.values()) + body.invars, body.outvars, eqns)
    return before_jaxpr, dict(params, jaxpr=ClosedJaxpr(new_body, []),
                              num_consts=num_consts + len(copies))


def _const_read_transposed(eqn, consts, producer):
    """``(side, w)``: the operand of ``eqn``, a matrix product without batch axes, that
    reads a 2-D const ``w`` transposed (``w`` itself contracted along the axis it would
    not be in a row-major ``m x k`` by ``k x n`` product, or a transpose of ``w`` the body
    makes contracted along the axis it would), the other operand not a const; or None."""
    if eqn.primitive is not dot_general_p:
        return None
    (lc, rc), (lb, _) = eqn.params["dimension_numbers"]
    if lb or len(lc) != 1:
        return None

    def is_const(atom):
        return isinstance(atom, Var) and atom in consts
    for side, row_major in ((0, lc == (1,)), (1, rc == (0,))):
        operand, other = eqn.invars[side], eqn.invars[1 - side]
        if is_const(other) or not isinstance(operand, Var) or operand.aval.ndim != 2:
            continue
        if not row_major and is_const(operand):
            return side, operand
        transposed = producer.get(operand)
        if row_major and transposed is not None and transposed.primitive is transpose_p \
                and transposed.params["permutation"] == (1, 0) and \
                is_const(transposed.invars[0]):
            return side, transposed.invars[0]
    return None


control_lowering(scan_p, lambda params: [("body", params["jaxpr"])],
                 lambda params: [("consts", params["num_consts"]),
                                 ("carry", params["num_carry"]), ("xs", None)],
                 hoist=_scan_hoist, sink=_scan_sink, transposed_consts=_scan_transposed_consts)


@scan_p.def_abstract_eval
def _scan_abstract_eval(*args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = split_sizes(args, [num_consts, num_carry])
    if any(x.shape[:1] != (length,) for x in xs):
        raise TypeError(f"scan of length {length} got scanned operands of types "
                        f"{[x.str_short() for x in xs]}")
    x_avals = [x.update(shape=x.shape[1:]) for x in xs]
    check_avals("scan jaxpr inputs", jaxpr.in_avals, consts + carry + x_avals)
    carry_out, ys = split_sizes(jaxpr.out_avals, [num_carry])
    check_avals("scan carry outputs", carry, carry_out)
    return carry_out + [y.update(shape=(length,) + y.shape) for y in ys]


@scan_p.def_impl
def _scan_impl(*args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = split_sizes(args, [num_consts, num_carry])
    ys = [np.empty((length,) + a.shape, a.dtype) for a in jaxpr.out_avals[num_carry:]]
    for i in (reversed(range(length)) if reverse else range(length)):
        out = run_on_numpy(jaxpr, *consts, *carry, *(x[i] for x in xs))
        carry = out[:num_carry]
        for y, value in zip(ys, out[num_carry:]):
            y[i] = value
    return owned_results(carry) + ys


def _scan_batch(axis_data, vals, dims, jaxpr, length, reverse, num_consts, num_carry,
                unroll):
    """vmap of scan: the body is batched (consts and carries with the batch axis at 0; the
    batch axis of scanned operands goes to 1, which is 0 in each slice). A carry is batched
    if its initial value is or the body makes it so (a fixed point). Batched ys come out
    with the batch axis at 1, after the scanned axis."""
    const_bat, init_bat, xs_bat = split_sizes([d is not None for d in dims],
                                              [num_consts, num_carry])
    n_ys = len(jaxpr.out_avals) - num_carry

    @once_per_flags
    def batch_body(carry_bat):
        return batch_jaxpr(jaxpr, axis_data, const_bat + carry_bat + xs_bat,
                           carry_bat + [False] * n_ys)

    carry_bat = fixed_point(init_bat, lambda bat: batch_body(bat)[1][:num_carry])
    body, out_bat = batch_body(carry_bat)
    body, body_consts = hoist_consts(body)
    consts, init, xs = split_sizes(vals, [num_consts, num_carry])
    const_dims, init_dims, xs_dims = split_sizes(dims, [num_consts, num_carry])
    consts = batched_at_front(consts, const_dims, axis_data.size, const_bat)
    init = batched_at_front(init, init_dims, axis_data.size, carry_bat)
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, xs_dims)]
    outs = scan_p.bind(*body_consts, *consts, *init, *xs, jaxpr=body, length=length,
                       reverse=reverse, num_consts=len(body_consts) + num_consts,
                       num_carry=num_carry, unroll=unroll)
    out_dims = [0 if b else None for b in carry_bat] + \
        [1 if b else None for b in out_bat[num_carry:]]
    return outs, out_dims


scan_p.def_batch(_scan_batch)


def _scan_jvp(primals, tangents, jaxpr, length, reverse, num_consts, num_carry, unroll):
    """Forward mode through scan: one scan of the body's JVP, carrying the tangents of the
    carries that can be nonzero (a fixed point, as for while) and stacking the tangents of
    the ys. Under ``linearize`` the partial-evaluation rule below splits it again into a
    known scan (the primal values, now) and an unknown one (the tangents, staged)."""
    consts, init, xs = split_sizes(primals, [num_consts, num_carry])
    const_t, init_t, xs_t = split_sizes(tangents, [num_consts, num_carry])
    const_nz, xs_nz = nonzero_flags(const_t), nonzero_flags(xs_t)
    n_ys = len(jaxpr.out_avals) - num_carry

    @once_per_flags
    def jvp_body(carry_nz):
        return ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, carry_nz + [False] * n_ys)

    carry_nz = fixed_point(carries_reached(jaxpr, const_nz + nonzero_flags(init_t) + xs_nz,
                                           num_consts, num_carry, nonzero_tangents),
                           lambda nz: jvp_body(nz)[1][:num_carry])
    jvp, out_nz = jvp_body(carry_nz)
    ys_nz = out_nz[num_carry:]
    jvp, jvp_consts = hoist_consts(jvp)
    # jvp's inputs: jvp_consts, consts, carries, xs, then tangents of each group; its
    # outputs: carries, ys, then tangents of each. scan_p wants consts, carries, xs (each
    # followed by its tangents) and returns carries then ys (each followed by its tangents).
    n_ct, n_cat, n_xt, n_yt = sum(const_nz), sum(carry_nz), sum(xs_nz), sum(ys_nz)
    hc, c, ca, x, ct, cat, xt = index_groups(
        [len(jvp_consts), num_consts, num_carry, len(xs), n_ct, n_cat, n_xt])
    ca_out, y_out, cat_out, yt_out = index_groups([num_carry, n_ys, n_cat, n_yt])
    jvp = rearrange(jvp, hc + c + ct + ca + cat + x + xt, ca_out + cat_out + y_out + yt_out)
    outs = scan_p.bind(*jvp_consts, *consts, *flagged(const_nz, const_t),
                       *init, *[ad.instantiate(t) for t in flagged(carry_nz, init_t)],
                       *xs, *flagged(xs_nz, xs_t),
                       jaxpr=jvp, length=length, reverse=reverse,
                       num_consts=len(jvp_consts) + num_consts + n_ct,
                       num_carry=num_carry + n_cat, unroll=unroll)
    carry_out, carry_t_out, ys_out, ys_t_out = split_sizes(outs, [num_carry, n_cat, n_ys])
    primals_out = carry_out + ys_out
    return primals_out, merge_tangents(out_nz, carry_t_out + ys_t_out,
                                        [get_aval(p) for p in primals_out])


def _scan_partial_eval(trace, args, unknowns, *, jaxpr, length, reverse, num_consts,
                       num_carry, unroll):
    """Partial evaluation of a scan with some unknown operands (reverse mode: the tangents).

    The body is split with ``partial_eval_jaxpr`` (a carry is unknown if the body makes it
    depend on an unknown value: a fixed point). A scan of the known part runs now, computing
    the known carries and ys and stacking, per iteration, the residuals the unknown part
    needs; a scan of the unknown part is staged, taking those residuals as extra xs (those
    that are the same at every iteration, computed once, as extra consts).
    """
    const_uk, carry_uk, xs_uk = split_sizes(unknowns, [num_consts, num_carry])
    n_ys = len(jaxpr.out_avals) - num_carry

    @once_per_flags
    def split_body(carry_uk):
        return partial_eval.partial_eval_jaxpr(jaxpr, const_uk + carry_uk + xs_uk,
                                               carry_uk + [False] * n_ys)

    carry_uk = fixed_point(carries_reached(jaxpr, unknowns, num_consts, num_carry,
                                           unknown_results),
                           lambda uk: split_body(uk)[2][:num_carry])
    known, unknown, out_uk, num_res = split_body(carry_uk)
    consts, init, xs = split_sizes(args, [num_consts, num_carry])
    # Known scan: its body returns the known carries, the known ys, then the residuals,
    # which a scan stacks like ys (unless they are loop-invariant: ``_scan_residuals``).
    body, body_consts = hoist_consts(known)
    known_consts = body_consts + [a for a, u in zip(consts, const_uk) if not u]
    n_known_carry = num_carry - sum(carry_uk)

    def run(jaxpr, *operands):
        return trace.compute_known(scan_p, operands, dict(
            jaxpr=jaxpr, length=length, reverse=reverse, num_consts=len(known_consts),
            num_carry=n_known_carry, unroll=unroll))
    known_results, residuals, invariant = _scan_residuals(
        body, [*known_consts, *[a for a, u in zip(init, carry_uk) if not u],
               *[a for a, u in zip(xs, xs_uk) if not u]],
        len(known_consts), n_known_carry, num_res, run, trace.evaluate_known)
    # Unknown scan: its body takes residuals, consts, carries, xs; scan_p wants consts (the
    # loop-invariant residuals among them), carries, then xs (the stacked residuals first).
    n_uc, n_ucar, n_ux = sum(const_uk), sum(carry_uk), sum(xs_uk)
    res, uc, ucar, ux = index_groups([num_res, n_uc, n_ucar, n_ux])
    staged_body = rearrange(unknown, uc + flagged(invariant, res) + ucar
                            + flagged([not i for i in invariant], res) + ux,
                            range(len(unknown.out_avals)))
    unknown_outs = trace.stage(scan_p, [
        *flagged(const_uk, consts), *flagged(invariant, residuals), *flagged(carry_uk, init),
        *flagged([not i for i in invariant], residuals), *flagged(xs_uk, xs)], dict(
            jaxpr=staged_body, length=length, reverse=reverse,
            num_consts=n_uc + sum(invariant), num_carry=n_ucar, unroll=unroll))
    known_iter, unknown_iter = iter(known_results), iter(unknown_outs)
    return [next(unknown_iter) if u else next(known_iter) for u in out_uk]


scan_p.def_rule("partial_eval", _scan_partial_eval)


def _scan_dce(used_outputs, eqn):
    """Without the ys nothing reads and the carries no kept carry or y reads."""
    params = eqn.params
    body, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    used_ys = used_outputs[num_carry:]
    carries = slice(num_consts, num_consts + num_carry)
    used = fixed_point(used_outputs[:num_carry],
                       lambda used: dce_jaxpr(body, used + used_ys)[1][carries])
    n_xs = len(eqn.invars) - num_consts - num_carry
    body, used_inputs = dce_jaxpr(body, used + used_ys,
                                  [False] * num_consts + used + [False] * n_xs)
    return eqn.replace(invars=flagged(used_inputs, eqn.invars),
                       outvars=flagged(used + used_ys, eqn.outvars),
                       params=dict(params, jaxpr=body, num_consts=sum(used_inputs[:num_consts]),
                                   num_carry=sum(used)))


scan_p.def_rule("dce", _scan_dce)


scan_p.def_jvp(_scan_jvp)


def _scan_transpose(cts, *args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    """Reverse mode through scan. The scan being transposed (staged by ``_scan_jvp`` into a
    linear jaxpr) mixes primal computation on residual operands with linear computation on
    its UndefinedPrimal operands. So:

    1. split the body with ``partial_eval_jaxpr`` into a known part (from the non-linear
       operands: primal carries and the per-iteration residuals the linear part needs) and
       an unknown part, linear in the linear operands (a carry is unknown if the body makes
       it depend on a linear value: a fixed point);
    2. run a scan of the known part in the original direction, stacking the residuals;
    3. run a scan in the opposite direction whose body is the transpose (``backward_pass``)
       of the unknown part: it carries the cotangents of the carries, accumulates those of
       the linear consts, and stacks those of the linear xs.
    """
    const_lin, carry_lin, xs_lin = split_sizes([is_undefined(a) for a in args],
                                          [num_consts, num_carry])
    n_ys = len(jaxpr.out_avals) - num_carry

    @once_per_flags
    def split_body(carry_uk):
        return partial_eval.partial_eval_jaxpr(jaxpr, const_lin + carry_uk + xs_lin,
                                               carry_uk + [False] * n_ys)

    carry_uk = fixed_point(carries_reached(jaxpr, const_lin + carry_lin + xs_lin, num_consts,
                                           num_carry, unknown_results),
                           lambda uk: split_body(uk)[2][:num_carry])
    known, unknown, out_uk, num_res = split_body(carry_uk)
    body, body_consts = hoist_consts(known)
    unknowns = const_lin + carry_uk + xs_lin
    n_consts = len(body_consts) + num_consts - sum(const_lin)

    def run(jaxpr, *operands):
        return scan_p.bind(*operands, jaxpr=jaxpr, length=length, reverse=reverse,
                           num_consts=n_consts, num_carry=num_carry - sum(carry_uk),
                           unroll=unroll)
    _, residuals, invariant = _scan_residuals(
        body, body_consts + [a for a, u in zip(args, unknowns) if not u], n_consts,
        num_carry - sum(carry_uk), num_res, run, eval_closed_jaxpr, need_results=False)

    # The backward scan. Its consts: the loop-invariant residuals; its carries: cotangents
    # of the linear consts (accumulated) and of the unknown carries; its xs: the stacked
    # residuals and the nonzero cotangents of the unknown ys.
    carry_cts = [ad.instantiate(c) for c in flagged(carry_uk, cts[:num_carry])]
    ys_cts = flagged(out_uk[num_carry:], cts[num_carry:])
    ys_ct_nz = nonzero_flags(ys_cts)
    res_avals = unknown.in_avals[:num_res]
    lin_avals = split_sizes(unknown.in_avals[num_res:], [sum(const_lin), sum(carry_uk)])
    ys_avals = unknown.out_avals[sum(carry_uk):]
    const_ct_init = [ad.zeros_like_aval(a) for a in lin_avals[0]]
    inv_res, stacked_res = flagged(invariant, residuals), flagged(
        [not i for i in invariant], residuals)

    def transposed_body(*args):
        inv, const_acc, carry_ct, res_slices, ys_ct = split_sizes(
            args, [len(inv_res), len(const_ct_init), len(carry_cts), len(stacked_res)])
        inv, res_slices = iter(inv), iter(res_slices)
        res = [next(inv) if i else next(res_slices) for i in invariant]
        cts_out = list(carry_ct) + merge_tangents(ys_ct_nz, ys_ct, ys_avals)
        linear = [False] * num_res + [True] * len(unknown.in_avals[num_res:])
        cts_in = backward_pass(unknown.jaxpr, res, cts_out, linear)[num_res:]
        const_ct, carry_ct, xs_ct = split_sizes(cts_in, [len(const_acc), len(carry_ct)])
        const_acc = [ad.add_tangents(a, c) for a, c in zip(const_acc, const_ct)]
        return const_acc + [ad.instantiate(c) for c in carry_ct + xs_ct]

    in_avals = ([a for a, i in zip(res_avals, invariant) if i] + lin_avals[0] + lin_avals[1]
                + [a for a, i in zip(res_avals, invariant) if not i]
                + [a for a, nz in zip(ys_avals, ys_ct_nz) if nz])
    body, body_consts = trace_flat(transposed_body, in_avals, "transpose of a scan body")
    outs = scan_p.bind(*body_consts, *inv_res, *const_ct_init, *carry_cts, *stacked_res,
                       *flagged(ys_ct_nz, ys_cts), jaxpr=body, length=length,
                       reverse=not reverse, num_consts=len(body_consts) + len(inv_res),
                       num_carry=len(const_ct_init) + len(carry_cts), unroll=unroll)
    const_ct, carry_ct, xs_ct = split_sizes(outs, [len(const_ct_init), len(carry_cts)])
    carry_ct = [c if lin else None for c, lin in zip(carry_ct, flagged(carry_uk, carry_lin))]
    return fill_linear(const_lin, const_ct) + fill_linear(carry_uk, carry_ct) + \
        fill_linear(xs_lin, xs_ct)


scan_p.def_transpose(_scan_transpose)


def _scan_residuals(body, args, num_consts, num_carry, num_res, run, evaluate,
                    need_results=True):
    """Run ``body``, the known part of a scan body (const-free, taking its consts first),
    on ``args`` as a scan (``run(jaxpr, *args)``); return its results (without the
    residuals: its last ``num_res`` outputs, which the unknown part needs), the residuals
    (one value each) and which of them are loop-invariant.

    A residual that depends on the consts only (a matrix the body multiplies a tangent by,
    or its transpose) is the same at every iteration: it is computed once before the loop
    (``evaluate(jaxpr, args)``) rather than stacked ``length`` times. A residual that is
    one of the xs is already stacked: it is passed as it is. Only the others are computed,
    stacked as ys of the scan (no scan at all when there are none, unless
    ``need_results``).
    """
    jaxpr, n_out = body.jaxpr, len(body.out_avals)
    kept = list(range(n_out - num_res))
    invariant, before = loop_invariant(body, num_consts, range(n_out - num_res, n_out))
    xs_vars = jaxpr.invars[num_consts + num_carry:]

    def position(v):
        return next((i for i, x in enumerate(xs_vars) if v is x), None)
    from_xs = [None if inv else position(v)
               for v, inv in zip(jaxpr.outvars[n_out - num_res:], invariant)]
    computed = [n_out - num_res + r for r, (inv, x) in enumerate(zip(invariant, from_xs))
                if not inv and x is None]
    outs = run(rearrange(body, range(len(body.in_avals)), kept + computed), *args) \
        if computed or need_results else []
    stacked = iter(outs[len(kept):])
    hoisted = iter(evaluate(before, *args[:num_consts]) if any(invariant) else [])
    xs_args = args[num_consts + num_carry:]
    residuals = [next(hoisted) if inv else xs_args[x] if x is not None else next(stacked)
                 for inv, x in zip(invariant, from_xs)]
    return outs[:len(kept)], residuals, invariant


def _scan_length(xs_flat, length):
    """The number of iterations: the common leading size of ``xs``, or ``length``."""
    sizes = []
    for x in xs_flat:
        shape = get_aval(x).shape
        if not shape:
            raise ValueError(f"scan got value with no leading axis to scan over: {x}.")
        if shape[0] not in sizes:
            sizes.append(shape[0])
    if length is not None:
        length = operator.index(length)
        if sizes and sizes != [length]:
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {sizes}.")
        return length
    if not sizes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    if len(sizes) > 1:
        raise ValueError(f"scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in sizes)}.")
    return sizes[0]


def _scan_unroll(unroll, length):
    """JAX's unroll: an int, or True for a fully unrolled loop (only a hint to compilers)."""
    if isinstance(unroll, bool):
        return max(length, 1) if unroll else 1
    unroll = operator.index(unroll)
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    return unroll


def _pair_trees(out_tree, jaxpr):
    """The carry and ys structures of a scan body's output, which must be a pair."""
    if out_tree.node_class not in (tuple, list) or len(out_tree.children()) != 2:
        shown = out_tree.unflatten([a.str_short() for a in jaxpr.out_avals])
        raise TypeError(f"scan body output must be a pair, got {shown}.")
    return out_tree.children()


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; stack the ``y``s.

    Returns ``(final_carry, stacked_ys)``. ``xs=None`` with ``length`` loops without inputs.
    """
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    xs_flat, _ = pytree.tree_flatten(xs)
    length = _scan_length(xs_flat, length)
    unroll = _scan_unroll(unroll, length)
    x_avals = [get_aval(x).update(shape=get_aval(x).shape[1:]) for x in xs_flat]
    init_flat, init_tree = pytree.tree_flatten(init)
    in_tree = pytree.tree_structure((init, xs))

    def trace(carry_avals):
        jaxpr, consts, out_tree = trace_converted(f, in_tree, carry_avals + x_avals, "scan")
        carry_tree, _ = _pair_trees(out_tree, jaxpr)
        num_carry = carry_tree.num_leaves
        return (jaxpr, consts, out_tree), carry_tree, jaxpr.out_avals[:num_carry]

    (jaxpr, consts, out_tree), init_flat = _trace_loop(
        "scan body", f, trace, init_flat, init_tree)
    outs = scan_p.bind(*consts, *init_flat, *xs_flat, jaxpr=jaxpr, length=length,
                       reverse=bool(reverse), num_consts=len(consts),
                       num_carry=len(init_flat), unroll=unroll)
    return out_tree.unflatten(outs)


# --- loops written with scan and while -----------------------------------------------------

def _fori_index_dtype(lower, upper):
    """The dtype of the loop index: the bounds' common dtype (a weak bound adapts)."""
    lo, hi = get_aval(lower), get_aval(upper)
    if lo.dtype == hi.dtype:
        return lo.dtype
    if dtypes.is_signed_int(lo.dtype) and dtypes.is_signed_int(hi.dtype) \
            and lo.weak_type != hi.weak_type:
        return hi.dtype if lo.weak_type else lo.dtype
    raise TypeError("lower and upper arguments to fori_loop must have equal types, got "
                    f"{lo.dtype.name} and {hi.dtype.name}")


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``for i in range(lower, upper): val = body_fun(i, val)``; returns ``val``.

    With concrete bounds the trip count is known, so (as in JAX) the loop is a ``scan`` over
    ``(i, val)``, which reverse-mode differentiation can handle; otherwise it is a ``while``.
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    dtype = _fori_index_dtype(lower, upper)
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        lower, upper = int(lower), int(upper)

        def scan_body(carry, _):
            i, val = carry
            return (elementwise.add(i, scalar_like(i, 1)), body_fun(i, val)), None

        (_, result), _ = scan(scan_body, (lower, init_val), None,
                              length=max(upper - lower, 0), unroll=unroll or 1)
        return result
    if unroll not in (None, False, 1):
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")

    def while_cond(carry):
        i, stop, _ = carry
        return elementwise.lt(i, stop)

    def while_body(carry):
        i, stop, val = carry
        return elementwise.add(i, scalar_like(i, 1)), stop, body_fun(i, val)

    bounds = [b if get_aval(b).dtype == dtype else elementwise.convert_element_type(b, dtype)
              for b in (lower, upper)]
    _, _, result = while_loop(while_cond, while_body, (*bounds, init_val))
    return result


def map(f, xs, *, batch_size=None):  # shadows the builtin here: write comprehensions
    """``f`` applied to each slice of ``xs`` along its leading axis, stacked (a ``scan``).
    With ``batch_size``, the scan's steps each apply ``f`` to ``batch_size`` slices at once,
    vmapped, and the slices left over are one more vmapped call after it."""
    if not callable(f):
        raise TypeError("lax.map: f argument should be a callable.")
    if batch_size is None:
        _, ys = scan(lambda _, x: ((), f(x)), (), xs)
        return ys
    leaves, tree = pytree.tree_flatten(xs)
    n = get_aval(leaves[0]).shape[0] if leaves else 0
    batch_size = operator.index(batch_size)
    if batch_size < 1:
        raise ValueError(f"lax.map: batch_size must be positive, got {batch_size}")
    steps, left = divmod(n, batch_size)
    per_step = [reshape(slice_in_dim(x, 0, steps * batch_size),
                        (steps, batch_size) + get_aval(x).shape[1:]) for x in leaves]
    _, ys = scan(lambda _, x: ((), _batched(f, tree, x, batch_size)), (), per_step)
    ys = pytree.tree_map(lambda y: reshape(y, (steps * batch_size,) + get_aval(y).shape[2:]),
                         ys)
    if not left:
        return ys
    rest = _batched(f, tree, [slice_in_dim(x, steps * batch_size, n) for x in leaves], left)
    return pytree.tree_map(lambda a, b: concatenate([a, b], 0), ys, rest)


def _batched(f, tree, leaves, size):
    """``f`` mapped over axis 0 of ``leaves`` (the flattened ``tree`` of its argument)."""
    return vmapped(lambda *args: f(tree.unflatten(list(args))), leaves, [0] * len(leaves),
                   size, "lax.map")

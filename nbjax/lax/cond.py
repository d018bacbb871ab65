"""``cond`` and ``switch``: one of several branches, traced into sub-jaxprs, chosen at run
time by an index.

Its transformation rules follow it: vmap batches the branches (a batched index runs every
branch and selects); JVP runs ``cond`` on the branches' JVPs; reverse mode transposes the
branches.
"""

import numpy as np

from ..core import Primitive, dtypes, eval_closed_jaxpr, get_aval, pytree, valid_value
from ..interpreters import ad, partial_eval
from ..core.dce import dce_jaxpr
from ..interpreters.transpose import backward_pass, is_undefined
from . import elementwise
from .batch_util import batch_jaxpr
from .control_flow import (batched_at_front, check_avals, check_types_match, fill_linear,
                           flagged, fun_info, hoist_consts, merge_tangents, nonzero_flags,
                           run_on_numpy, share_consts, trace_converted, trace_flat, type_str)
from .shapes import broadcast_in_dim, moveaxis
from .standard import control_lowering, owned_results, scalar_like

__all__ = ["cond", "cond_p", "switch"]


# --- cond and switch -----------------------------------------------------------------------

cond_p = Primitive("cond", multiple_results=True)
control_lowering(cond_p, lambda params: [(f"branch {k}", b)
                                         for k, b in enumerate(params["branches"])],
                 lambda params: [("index", 1), ("operands", None)], branches=True)


@cond_p.def_abstract_eval
def _cond_abstract_eval(index, *operands, branches):
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond index must be an int32 scalar, got {index.str_short()}")
    if not branches:
        raise TypeError("cond needs at least one branch")
    for i, branch in enumerate(branches):
        check_avals(f"cond branch {i} inputs", branch.in_avals, operands)
        check_avals(f"cond branch {i} outputs", branches[0].out_avals, branch.out_avals)
    return list(branches[0].out_avals)


@cond_p.def_impl
def _cond_impl(index, *operands, branches):
    return owned_results(run_on_numpy(branches[int(index)], *operands))


def _shared_branches(traced):
    """Branches given as ``(jaxpr, consts)`` pairs (each jaxpr const-free, taking its consts
    first) as a tuple of jaxprs taking one common list of consts, and those consts."""
    branches, consts = share_consts(traced)
    return tuple(branches), consts


def _cond_batch(axis_data, vals, dims, branches):
    """vmap of cond. With one index for the whole batch, the branches are batched and one of
    them runs. With an index per batch member, every branch runs on the whole batch and
    ``select_n`` picks each member's result, as JAX does."""
    (index, *ops), (index_dim, *op_dims) = vals, dims
    in_batched = [d is not None for d in op_dims]
    if index_dim is not None:
        return _cond_batch_per_member(axis_data, moveaxis(index, index_dim, 0), ops, op_dims,
                                      branches)
    ops = batched_at_front(ops, op_dims, axis_data.size, in_batched)
    out_batched = [any(flags) for flags in zip(
        *(batch_jaxpr(b, axis_data, in_batched, False)[1] for b in branches))]
    batched, consts = _shared_branches(
        [hoist_consts(batch_jaxpr(b, axis_data, in_batched, out_batched)[0]) for b in branches])
    outs = cond_p.bind(index, *consts, *ops, branches=batched)
    return outs, [0 if b else None for b in out_batched]


def _cond_batch_per_member(axis_data, index, ops, op_dims, branches):
    """A cond whose index differs between batch members: every branch runs on the whole
    batch and ``select_n`` picks each member's result. Branch ``k`` sees a floating operand
    through ``stop_gradient`` for the members that do not take it (as JAX's rule does), so
    reverse mode sends them no gradient: otherwise the zero cotangent ``select_n`` gives the
    untaken branch meets that branch's derivative at a point outside its domain (the
    ``sqrt`` of a negative number in ``where``-like code) and ``0 * nan`` leaks NaN into the
    gradient. Such operands are broadcast to the batch first, as the guard differs per
    member; the others stay as they are."""
    guarded = [dtypes.is_inexact(get_aval(op).dtype) for op in ops]
    in_batched = [d is not None or g for d, g in zip(op_dims, guarded)]
    ops = batched_at_front(ops, op_dims, axis_data.size, in_batched)
    outs = []
    for k, branch in enumerate(branches):
        taken = elementwise.eq(index, scalar_like(index, k))
        seen = [elementwise.select(broadcast_in_dim(taken, get_aval(op).shape, (0,)), op,
                                   elementwise.stop_gradient(op)) if g else op
                for op, g in zip(ops, guarded)]
        outs.append(eval_closed_jaxpr(batch_jaxpr(branch, axis_data, in_batched, True)[0],
                                      *seen))
    picked = [elementwise.select_n(broadcast_in_dim(index, get_aval(cases[0]).shape, (0,)),
                                   *cases) for cases in zip(*outs)]
    return picked, [0] * len(picked)


cond_p.def_batch(_cond_batch)


def _cond_jvp(primals, tangents, branches):
    """Forward mode through cond: one cond over the branches' JVPs, returning the primal
    outputs and tangents for the union of outputs any branch makes nonzero. Under
    ``linearize`` the partial-evaluation rule below splits it into a known cond (primal
    values and residuals, now) and an unknown one (the tangents, staged)."""
    (index, *ops), (_, *op_tangents) = primals, tangents
    nonzeros = nonzero_flags(op_tangents)
    out_nonzeros = [any(flags) for flags in zip(
        *(ad.jvp_jaxpr(b, nonzeros, False)[1] for b in branches))]
    if not any(out_nonzeros):
        primals_out = cond_p.bind(index, *ops, branches=branches)
        return primals_out, merge_tangents(out_nonzeros, [], branches[0].out_avals)
    jvps = [hoist_consts(ad.jvp_jaxpr(b, nonzeros, out_nonzeros)[0]) for b in branches]
    jvp_branches, consts = _shared_branches(jvps)
    outs = cond_p.bind(index, *consts, *ops, *flagged(nonzeros, op_tangents),
                       branches=jvp_branches)
    n_out = len(branches[0].out_avals)
    return outs[:n_out], merge_tangents(out_nonzeros, outs[n_out:], branches[0].out_avals)


def _cond_partial_eval(trace, args, unknowns, *, branches):
    """Partial evaluation of a cond with some unknown operands (reverse mode: tangents).

    Each branch is split with ``partial_eval_jaxpr`` (an output is unknown if it is in any
    branch). The branches' residuals differ, so the known cond returns all of them, each
    branch filling the others' with zeros, and the staged unknown cond takes them all,
    each branch reading its own.
    """
    index_unknown, ops_uk = unknowns[0], unknowns[1:]
    if index_unknown:
        return trace.stage(cond_p, args, dict(branches=branches))
    index, ops = args[0], args[1:]
    out_uk = [any(flags) for flags in zip(
        *(partial_eval.partial_eval_jaxpr(b, ops_uk)[2] for b in branches))]
    splits = [partial_eval.partial_eval_jaxpr(b, ops_uk, out_uk) for b in branches]
    res_avals = [s[1].in_avals[:s[3]] for s in splits]
    all_res = [a for avals in res_avals for a in avals]
    n_known_out = out_uk.count(False)

    def known_branch(b):
        known, _, _, num_res = splits[b]

        def fun(*known_ops):
            outs = eval_closed_jaxpr(known, *known_ops)
            padded = [ad.zeros_like_aval(a) for j in range(b) for a in res_avals[j]]
            padded += outs[n_known_out:]
            padded += [ad.zeros_like_aval(a) for j in range(b + 1, len(branches))
                       for a in res_avals[j]]
            return outs[:n_known_out] + padded
        return trace_flat(fun, known.in_avals, "known part of a cond branch")

    def unknown_branch(b):
        unknown, start = splits[b][1], sum(len(r) for r in res_avals[:b])

        def fun(*res_and_ops):
            res, uk_ops = res_and_ops[:len(all_res)], res_and_ops[len(all_res):]
            own = res[start:start + len(res_avals[b])]
            return eval_closed_jaxpr(unknown, *own, *uk_ops)
        in_avals = all_res + [a for a, u in zip(branches[b].in_avals, ops_uk) if u]
        return trace_flat(fun, in_avals, "unknown part of a cond branch")

    known_branches, known_consts = _shared_branches(
        [known_branch(b) for b in range(len(branches))])
    known_outs = trace.compute_known(cond_p, [
        index, *known_consts, *[x for x, u in zip(ops, ops_uk) if not u]],
        dict(branches=known_branches))
    residuals = known_outs[n_known_out:]
    unknown_branches, unknown_consts = _shared_branches(
        [unknown_branch(b) for b in range(len(branches))])
    unknown_outs = trace.stage(cond_p, [
        index, *unknown_consts, *residuals, *[x for x, u in zip(ops, ops_uk) if u]],
        dict(branches=unknown_branches))
    known_iter, unknown_iter = iter(known_outs[:n_known_out]), iter(unknown_outs)
    return [next(unknown_iter) if u else next(known_iter) for u in out_uk]


cond_p.def_rule("partial_eval", _cond_partial_eval)


def _cond_dce(used_outputs, eqn):
    """Every branch without the results nothing reads, all taking the operands any of them
    then reads."""
    branches = eqn.params["branches"]
    used = [any(flags) for flags in zip(*(dce_jaxpr(b, used_outputs)[1] for b in branches))]
    return eqn.replace(invars=eqn.invars[:1] + flagged(used, eqn.invars[1:]),
                       outvars=flagged(used_outputs, eqn.outvars),
                       params=dict(eqn.params, branches=tuple(
                           dce_jaxpr(b, used_outputs, used)[0] for b in branches)))


cond_p.def_rule("dce", _cond_dce)


cond_p.def_jvp(_cond_jvp)


def _cond_transpose(cts, index, *ops, branches):
    """Transpose a cond whose linear operands are the UndefinedPrimal ones; the others are
    residuals (primal values). Each branch is transposed with ``backward_pass`` (which
    recomputes the branch's non-linear part from the residuals first), and the transposed
    branches form a new cond over the same index. Every transposed branch returns a
    cotangent for every linear operand (zeros where it has none), so their types agree."""
    linear = [is_undefined(x) for x in ops]
    residuals = [x for x in ops if not is_undefined(x)]
    ct_nonzero = nonzero_flags(cts)
    in_avals = [get_aval(r) for r in residuals] + [c.aval for c in flagged(ct_nonzero, cts)]

    def transposed(branch):
        def fun(*args):
            res, nz_cts = args[:len(residuals)], args[len(residuals):]
            cts_out = merge_tangents(ct_nonzero, nz_cts, branch.out_avals)
            cts_in = backward_pass(branch.jaxpr, branch.consts + list(res), cts_out, linear)
            return [ad.instantiate(c) for c in flagged(linear, cts_in)]
        return trace_flat(fun, in_avals, "transpose of a cond branch")

    t_branches, consts = _shared_branches([transposed(b) for b in branches])
    outs = cond_p.bind(index, *consts, *residuals, *flagged(ct_nonzero, cts),
                       branches=t_branches)
    return [None] + fill_linear(linear, outs)


cond_p.def_transpose(_cond_transpose)


def _trace_branches(api, named_funs, operands):
    """Trace each ``(name, fun)`` on ``operands`` and check they agree, as JAX's cond does.

    Returns ``(jaxprs, consts, flat_operands, out_tree)``.
    """
    flat, in_tree = pytree.tree_flatten(operands)
    in_avals = [get_aval(x) for x in flat]
    traced = [trace_converted(fun, in_tree, in_avals, api) for _, fun in named_funs]
    jaxprs, consts = share_consts([(j, cs) for j, cs, _ in traced])
    (name0, fun0), (_, _, tree0) = named_funs[0], traced[0]
    for (name, fun), jaxpr, (_, _, tree) in zip(named_funs[1:], jaxprs[1:], traced[1:]):
        which = f"{name0} is {fun_info(fun0)}\n{name} is {fun_info(fun)}\n\n"
        if tree != tree0:
            raise TypeError(
                f"{api} branch outputs must have the same pytree structure, but they differ:\n\n"
                f"{which}{name0} output is {tree0} but {name} output is {tree}.\n\n"
                f"Revise {name0} and/or {name} so that they have the same pytree structure.")
        check_types_match(
            list(zip(jaxprs[0].out_avals, jaxpr.out_avals)), lambda where, a, b: (
                f"the output of {name0}{where} has type {type_str(a)} but the corresponding "
                f"output of {name} has type {type_str(b)}"), lambda differences: (
                f"{api} branches must have equal output types but they differ.\n\n{which}"
                f"{differences}\n\nRevise {name0} and/or {name} so that all output types "
                "match."))
    return jaxprs, consts, flat, tree0


def _bind_cond(index, jaxprs, consts, flat_operands, out_tree):
    outs = cond_p.bind(index, *consts, *flat_operands, branches=tuple(jaxprs))
    return out_tree.unflatten(outs)


def _predicate(pred):
    """cond's predicate as a bool scalar: numbers are compared with 0, as in JAX."""
    if not valid_value(pred):
        raise TypeError(f"Pred type must be either boolean or number, got {pred!r}.")
    aval = get_aval(pred)
    if aval.shape:
        raise TypeError(f"Pred must be a scalar, got {pred} of shape {aval.shape}.")
    if dtypes.is_bool(aval.dtype):
        return pred
    if dtypes.is_complex(aval.dtype):
        raise TypeError(f"Pred type must be either boolean or number, got {aval.dtype.name}.")
    return elementwise.ne(pred, scalar_like(pred, 0))


_NO_OPERAND = object()


def _with_operand(operands, operand):
    """The operands, given positionally or (JAX's older form) as the one ``operand=``."""
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                        f"passed, got operand={operand!r} and positional operands {operands!r}")
    return (operand,)


def cond(pred, true_fun, false_fun, *operands, operand=_NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as one primitive.

    Both branches are traced (so both must return the same types); only the chosen one runs.
    The primitive takes an int32 index, with the false branch first, as JAX's does. JAX's
    old form, ``cond(pred, true_operand, true_fun, false_operand, false_fun)``, still works.
    """
    if not (callable(true_fun) and callable(false_fun)):
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            x_true, f_true, (x_false, f_false) = true_fun, false_fun, operands
            return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true, x_false)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _with_operand(operands, operand)
    index = elementwise.convert_element_type(_predicate(pred), np.int32)
    (true_jaxpr, false_jaxpr), consts, flat, out_tree = _trace_branches(
        "cond", [("true_fun", true_fun), ("false_fun", false_fun)], operands)
    return _bind_cond(index, (false_jaxpr, true_jaxpr), consts, flat, out_tree)


def switch(index, branches, *operands, operand=_NO_OPERAND):
    """``branches[index](*operands)``, with ``index`` clamped into range as in JAX."""
    operands = _with_operand(operands, operand)
    branches = tuple(branches)
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    if not valid_value(index):
        raise TypeError(f"Index type must be an integer, got {index!r}.")
    aval = get_aval(index)
    if aval.shape:
        raise TypeError(f"Branch index must be scalar, got {index} of shape {aval.shape}.")
    if not dtypes.is_int(aval.dtype):
        raise TypeError(f"Index type must be an integer, got {index} as {aval.dtype.name}")
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    index = elementwise.convert_element_type(index, np.int32)
    index = elementwise.clamp(np.int32(0), index, np.int32(len(branches) - 1))
    named = [(f"branch {i}", b) for i, b in enumerate(branches)]
    return _bind_cond(index, *_trace_branches("switch", named, operands))

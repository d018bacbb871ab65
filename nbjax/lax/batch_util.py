"""Helpers shared by batching rules: moving and adding batch dimensions.

Rules call these on the values underneath a vmap (with the parent trace current), so they
are ordinary lax calls. They move an axis only when it is not already where it must be.
"""

from ..core import ClosedJaxpr, eval_closed_jaxpr, get_aval, new_trace, pytree
from ..interpreters import ad
from ..interpreters.batching import AxisData, BatchTrace
from ..interpreters.staging import trace_to_jaxpr
from .shapes import broadcast_in_dim, moveaxis


def ndim(x):
    return get_aval(x).ndim


def bdim_at(x, bdim, dst, size):
    """``x`` with its batch axis at ``dst``; an unbatched ``x`` is broadcast to ``size``."""
    if bdim is None:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, bdim, dst)


def bdim_at_front(x, bdim, size):
    return bdim_at(x, bdim, 0, size)


def broadcast_batch(x, size, dst=0):
    """Insert a batch axis of ``size`` at ``dst`` into an unbatched value."""
    aval = get_aval(x)
    shape = aval.shape[:dst] + (size,) + aval.shape[dst:]
    dims = [i for i in range(len(shape)) if i != dst]
    return broadcast_in_dim(x, shape, dims)


def elementwise_batcher(prim):
    """The batch rule of an element-wise primitive whose operands are rank-0 or equal rank.

    When every batched operand has its batch axis in the same place and every unbatched one
    is a scalar, the primitive applies as it is. Otherwise batched operands are aligned on one
    batch axis and unbatched ones get a size-1 axis there (the primitive broadcasts size 1).
    """
    def rule(axis_data, vals, dims, **params):
        ranks = [ndim(v) - (d is not None) for v, d in zip(vals, dims)]
        rank = max(ranks)
        batched_dims = {d for d, r in zip(dims, ranks) if d is not None and r == rank}
        scalars_only = all(d is not None or r == 0 for d, r in zip(dims, ranks))
        if len(batched_dims) == 1 and scalars_only and all(
                r == rank for d, r in zip(dims, ranks) if d is not None):
            return prim.bind(*vals, **params), batched_dims.pop()
        out_dim = min(batched_dims) if batched_dims else 0
        aligned = [_align(v, d, r, rank, out_dim) for v, d, r in zip(vals, dims, ranks)]
        return prim.bind(*aligned, **params), out_dim
    return rule


def _align(x, bdim, rank, out_rank, out_dim):
    """Put ``x``'s batch axis at ``out_dim`` of a rank ``out_rank + 1`` value."""
    if bdim is None:
        if rank == 0:
            return x
        shape = get_aval(x).shape
        return broadcast_in_dim(x, shape[:out_dim] + (1,) + shape[out_dim:],
                                [i for i in range(rank + 1) if i != out_dim])
    if rank == 0 and out_rank > 0:
        size = get_aval(x).shape[0]
        shape = tuple(size if i == out_dim else 1 for i in range(out_rank + 1))
        return broadcast_in_dim(x, shape, (out_dim,))
    return moveaxis(x, bdim, out_dim)


def batch_jaxpr(closed, axis_data, in_batched, instantiate):
    """Batch a closed jaxpr whose batched inputs carry the batch axis at 0.

    Returns ``(batched_closed_jaxpr, out_batched)``; batched outputs have the batch axis at
    0; outputs marked in ``instantiate`` (a bool or list of bools) are batched even if they
    did not depend on a batched input. For the rules of primitives with sub-jaxprs.
    """
    n_out = len(closed.out_avals)
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * n_out
    out_batched = []

    def fun(*args):
        unpacked = batched_call(lambda *a: eval_closed_jaxpr(closed, *a), args,
                                [0 if b else None for b in in_batched], axis_data)
        results = []
        out_batched.clear()
        for (val, dim), inst in zip(unpacked, instantiate):
            batched = dim is not None or inst
            out_batched.append(batched)
            results.append(bdim_at(val, dim, 0, axis_data.size) if batched else val)
        return results

    in_avals = [a.update(shape=(axis_data.size,) + a.shape) if b else a
                for a, b in zip(closed.in_avals, in_batched)]
    jaxpr, consts = trace_to_jaxpr(fun, in_avals, "batch_jaxpr")
    return ClosedJaxpr(jaxpr, consts), list(out_batched)


def batched_call(fun, args, dims, axis_data, what="batch_jaxpr"):
    """``fun`` (flat list in and out) run by the batching interpreter on ``args``, batched
    at ``dims`` (None: not batched): each output as ``(value, its batch axis or None)``.
    The batching interpreter for the layers below ``vmap`` (``vmapped``, the rules of
    sub-jaxprs)."""
    with new_trace(lambda parent: BatchTrace(parent, axis_data, what)) as trace:
        outs = fun(*[trace.wrap(a, d) for a, d in zip(args, dims)])
        return [trace.unpack(o) for o in outs]


def vmapped(fun, args, dims, size, what):
    """``vmap`` for the layers below ``nbjax.vmap`` (``lax.map``'s batches, ``vectorize``):
    ``fun(*args)``, the arguments batched at ``dims`` (None: not batched) over an axis of
    ``size``, every leaf of its (pytree) result batched at axis 0."""
    trees = []

    def flat(*batched):
        leaves, tree = pytree.tree_flatten(fun(*batched))
        trees.append(tree)
        return leaves
    outs = batched_call(flat, args, dims, AxisData(None, size), what)
    return trees[0].unflatten([bdim_at(v, d, 0, size) for v, d in outs])


def _add_any_batch_rule(axis_data, vals, dims):
    """add_any needs equal shapes (it does not broadcast size-1 axes), so an unbatched
    operand is broadcast to the batch."""
    if dims[0] == dims[1]:
        return ad.add_any_p.bind(*vals), dims[0]
    return ad.add_any_p.bind(*(bdim_at_front(v, d, axis_data.size)
                               for v, d in zip(vals, dims))), 0


ad.add_any_p.def_batch(_add_any_batch_rule)

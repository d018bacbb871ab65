"""Scatters in native code: ``scatter``, ``scatter-add`` and their kin called from a
compiled program or loop without calling back into Python.

A scatter's updates may hit one position several times, so it is a loop of its own, one
update element after the other, not a kernel (whose points are independent). The code copies
the operand into the result (unless the result's buffer is the operand's: a loop's carry
that the scatter updates in place, ``buffer_plan.accumulated_inputs``), then walks the
updates in the order of ``lax.gather_scatter._scatter_impl`` (batch axes outermost, the
window's innermost), so that repeated positions combine in the same order (a float sum
rounds the same) and the last write wins a plain scatter. An update's batch position picks
an index vector (the last axis of the indices), whose components start the window along
``scatter_dims_to_operand_dims``; operand batching axes start at the batch position of their
paired axis. Under ``CLIP`` a start is clamped so that the window fits; otherwise a window
that does not fit is dropped whole. The window position adds along the window axes.
"""

import numpy as np
from llvmlite import ir

from ...core import dtypes
from ...lax.gather_scatter import GatherScatterMode
from ..llvm import I64, alias_scopes, for_loop

def supports(eqn):
    """Whether ``emit`` compiles ``eqn``: a scatter (a primitive with a ``"scatter"``
    lowering: how it combines an element with an update) of real numbers or integers
    (float16, complex, bool and the narrow types stay library steps)."""
    if "scatter" not in eqn.primitive.lowerings:
        return False
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    return dtype.kind in "fiu" and dtype != dtypes.float16 \
        and np.dtype(eqn.invars[1].aval.dtype).kind in "iu"


def emit(f, eqn, operand, indices, updates, out):
    """Emit ``eqn`` (``supports(eqn)``) into the function ``f`` (a
    ``control_flow.ControlFlowFunction``) on the buffers of its operands, into ``out``."""
    op_aval, idx_aval, upd_aval = (a.aval for a in eqn.invars)
    copy_unless_in_place(f, out, operand, op_aval)
    if upd_aval.size == 0:
        return
    dn = eqn.params["dimension_numbers"]
    window_axes = list(dn.update_window_dims)
    batch_axes = [a for a in range(len(upd_aval.shape)) if a not in window_axes]
    # The three buffers are distinct: the plan gives a step's result a region of its own
    scopes = alias_scopes(f.mb.module, ["out", "indices", "updates"])
    buffers = {name: (f.typed(buf, aval.dtype), scopes[name]) for name, buf, aval in
               (("out", out, op_aval), ("indices", indices, idx_aval),
                ("updates", updates, upd_aval))}
    where = _Position(f, eqn, buffers["indices"])
    shape, index = upd_aval.shape, [None] * len(upd_aval.shape)

    def window(index):
        starts, fits = where.starts([index[a] for a in batch_axes])

        def element(index):
            _combine(f, eqn, buffers, index, where.position(starts, index, window_axes))
        if fits is None:
            loops(f, window_axes, shape, index, element)
            return
        with f.b.if_then(fits):
            loops(f, window_axes, shape, index, element)
    loops(f, batch_axes, shape, index, window)


def loops(f, order, shape, index, body):
    """``body(index)`` for every index of ``shape``, axes nested in ``order``."""
    if not order:
        body(list(index))
        return
    axis, rest = order[0], order[1:]

    def inner(i):
        index[axis] = i
        loops(f, rest, shape, index, body)
    for_loop(f.b, ir.Constant(I64, 0), ir.Constant(I64, shape[axis]), inner, f"u{axis}")


def _combine(f, eqn, buffers, index, position):
    e, dtype = f.e, eqn.outvars[0].aval.dtype
    op_shape, upd_shape = eqn.invars[0].aval.shape, eqn.invars[2].aval.shape
    (out, out_scope), (updates, updates_scope) = buffers["out"], buffers["updates"]
    at = e.offset(position, op_shape)
    value = e.load(updates, e.offset(index, upd_shape), dtype, updates_scope)
    how = eqn.primitive.lowerings["scatter"]
    if how is not None:
        value = e.binary(how, e.load(out, at, dtype, out_scope), value, dtype)
    e.store(out, at, value, dtype, out_scope)


class _Position:
    """Where an update's window starts in the result, and where each of its elements goes."""

    def __init__(self, f, eqn, indices):
        dn, mode = eqn.params["dimension_numbers"], eqn.params["mode"]
        op_shape, upd_shape = eqn.invars[0].aval.shape, eqn.invars[2].aval.shape
        self.f, self.dn, (self.indices, self.scope) = f, dn, indices
        self.clip = mode == GatherScatterMode.CLIP
        self.index_shape, self.index_dtype = eqn.invars[1].aval.shape, eqn.invars[1].aval.dtype
        excluded = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
        self.window_dims = [d for d in range(len(op_shape)) if d not in excluded]
        sizes = [1] * len(op_shape)
        for d, u in zip(self.window_dims, dn.update_window_dims):
            sizes[d] = upd_shape[u]
        self.last = [n - s for n, s in zip(op_shape, sizes)]   # the largest start that fits
        self.rank = len(op_shape)

    def starts(self, batch):
        """(where the window of the update at ``batch``, its batch position, starts along
        each operand axis, whether it fits: None when it always does, or is clamped to).
        Worked out once per window, outside the loops over its elements."""
        b, e, dn = self.f.b, self.f.e, self.dn
        starts, fits = [ir.Constant(I64, 0)] * self.rank, None
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            start = self._start(batch, k)
            last = ir.Constant(I64, self.last[d])
            inside = b.and_(b.icmp_signed(">=", start, ir.Constant(I64, 0)),
                            b.icmp_signed("<=", start, last))
            if self.clip:
                start = e.binary("min", e.binary("max", start, ir.Constant(I64, 0), np.int64),
                                 last, np.int64)
            else:
                fits = inside if fits is None else b.and_(fits, inside)
            starts[d] = start
        for operand_dim, batch_dim in zip(dn.operand_batching_dims,
                                          dn.scatter_indices_batching_dims):
            starts[operand_dim] = batch[batch_dim]
        return starts, fits

    def position(self, starts, index, window_axes):
        """The result position of the update element at ``index`` in the window that
        ``starts``."""
        position = list(starts)
        for d, u in zip(self.window_dims, window_axes):
            position[d] = self.f.b.add(starts[d], index[u])
        return position

    def _start(self, batch, k):
        """Component ``k`` of the index vector at ``batch``, as an int64 (a uint64 beyond
        int64's range stays out of bounds: it is clamped to int64's largest)."""
        e = self.f.e
        return index_as_int64(e, self.indices, e.offset(batch + [ir.Constant(I64, k)],
                                                         self.index_shape),
                              self.index_dtype, self.scope)


def copy_unless_in_place(f, out, operand, aval):
    """Copy ``operand`` (of ``aval``) into ``out``, the result an update starts from,
    unless they are one buffer: a loop's carry updated in place
    (``buffer_plan.accumulated_inputs``)."""
    with f.b.if_then(f.b.icmp_unsigned("!=", out, operand)):
        f.copy(out, operand, aval.size * np.dtype(aval.dtype).itemsize)


def index_as_int64(e, pointer, offset, dtype, scope=None):
    """The integer of ``dtype`` at ``offset`` of ``pointer`` as an int64 (a uint64 beyond
    int64's range as int64's largest, which stays out of bounds)."""
    raw = e.load(pointer, offset, dtype, scope)
    if np.dtype(dtype) == np.uint64:
        raw = e.binary("min", raw, ir.Constant(raw.type, np.iinfo(np.int64).max), dtype)
    return e.convert(raw, dtype, np.int64)

"""``sort`` in native code, where a compiled program or loop calls it, without calling back
into Python.

Each row along the sorted dimension is sorted as a permutation of its positions, by a
bottom-up merge sort (stable: of two equal keys, the one from the left run is taken first;
O(n log n) comparisons whatever the data): runs of 1, 2, 4... positions are merged from one
scratch buffer into the other, the passes unrolled at compile time (the row's length is
known). Then every operand is read through the permutation into its result, element by
element as plain bytes (any dtype of 1, 2, 4 or 8 bytes moves).

The order is the one the primitive's ``"sort"`` lowering names, ``"ascending"``: the first
``num_keys`` operands compared lexicographically, each by value with -0.0 equal to 0.0 and
NaNs after every number (equal to each other, so they keep their order), as JAX's
``lax.sort`` and the reference implementation's ``np.lexsort``. A stable sort is also a
correct answer for ``is_stable=False``.
"""

import numpy as np
from llvmlite import ir

from ..llvm import I64, for_loop
from .rows import Rows, beats, plain_number


def supports(eqn):
    """Whether ``emit`` compiles ``eqn``: a sort in ascending order (its primitive's
    ``"sort"`` lowering: top_k has none) by keys of bools, integers, float32 or float64,
    of operands of 1, 2, 4 or 8 bytes an element."""
    if eqn.primitive.lowerings.get("sort") != "ascending":
        return False
    keys = eqn.invars[:eqn.params["num_keys"]]
    return all(plain_number(k.aval.dtype) for k in keys) and \
        all(np.dtype(a.aval.dtype).itemsize in (1, 2, 4, 8) for a in eqn.invars)


def emit(f, eqn, *buffers):
    """Emit ``eqn`` (``supports(eqn)``) into ``f`` (a ``control_flow.ControlFlowFunction``)
    on the buffers of its operands, then of its results."""
    avals = [a.aval for a in eqn.invars]
    if avals[0].size == 0:
        return
    rows = Rows(avals[0].shape, eqn.params["dimension"])
    ins, outs = buffers[:len(avals)], buffers[len(avals):]
    keys = [(f.typed(buf, a.dtype), a.dtype)
            for buf, a in zip(ins, avals[:eqn.params["num_keys"]])]
    scratch = [f.scratch(rows.n * 8) for _ in range(2)]
    orders = [f.typed(s, np.int64) for s in scratch]

    def row(o, i):
        order = _sorted_positions(f, rows, _Less(f, rows, keys, o, i), orders)
        for src, dst, aval in zip(ins, outs, avals):
            _permute(f, rows, order, src, dst, aval, o, i)
    rows.each(f, row, "sort")
    for s in scratch:
        f.release(s)


class _Less:
    """``less(p, q)``: whether position ``p`` of row ``(o, i)`` sorts before position ``q``
    (i64 values): the first key that differs decides."""

    def __init__(self, f, rows, keys, o, i):
        self.f, self.rows, self.keys, self.o, self.i = f, rows, keys, o, i

    def __call__(self, p, q):
        b, e = self.f.b, self.f.e
        result = None
        for pointer, dtype in reversed(self.keys):
            x = e.load(pointer, self.rows.at(b, self.o, p, self.i), dtype)
            y = e.load(pointer, self.rows.at(b, self.o, q, self.i), dtype)
            below = beats(e, "gt", y, x, dtype)   # NaN is the greatest: it goes last
            if result is None:
                result = below
            else:  # below, or equal (not above) and the later keys say so
                result = b.or_(below, b.and_(b.not_(beats(e, "gt", x, y, dtype)), result))
        return result


def _sorted_positions(f, rows, less, orders):
    """The row's positions in sorted order: the buffer of ``orders`` (two i64 buffers of
    the row's length) where the last merge pass left them."""
    b, e = f.b, f.e
    for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, rows.n),
             lambda k: e.store(orders[0], k, k, np.int64), "order")
    src, dst, width = orders[0], orders[1], 1
    while width < rows.n:
        _merge_pass(f, rows.n, width, less, src, dst)
        src, dst, width = dst, src, 2 * width
    return src


def _merge_pass(f, n, width, less, src, dst):
    """Merge each pair of consecutive runs of ``width`` positions of ``src`` into ``dst``.
    Both runs' heads are read at clamped indices, so no load leaves the row; the right one
    is taken only while it has elements and sorts strictly before the left one (or the left
    one is used up)."""
    b, e = f.b, f.e
    left, right = f.setup.alloca(I64), f.setup.alloca(I64)

    def constant(v):
        return ir.Constant(I64, v)

    def pair(lo):
        mid = e.binary("min", b.add(lo, constant(width)), constant(n), np.int64)
        hi = e.binary("min", b.add(lo, constant(2 * width)), constant(n), np.int64)
        b.store(lo, left)
        b.store(mid, right)

        def take(k):
            li, ri = b.load(left, typ=I64), b.load(right, typ=I64)
            a = e.load(src, e.binary("min", li, b.sub(mid, constant(1)), np.int64), np.int64)
            c = e.load(src, e.binary("min", ri, b.sub(hi, constant(1)), np.int64), np.int64)
            from_right = b.and_(b.icmp_signed("<", ri, hi),
                                b.or_(b.icmp_signed(">=", li, mid), less(c, a)))
            e.store(dst, k, b.select(from_right, c, a), np.int64)
            b.store(b.add(li, b.zext(b.not_(from_right), I64)), left)
            b.store(b.add(ri, b.zext(from_right, I64)), right)
        for_loop(b, lo, hi, take, "merge")
    for_loop(b, constant(0), constant(n), pair, "pairs", step=2 * width)


def _permute(f, rows, order, src, dst, aval, o, i):
    """Element ``k`` of row ``(o, i)`` of ``dst`` is element ``order[k]`` of ``src``."""
    b, e = f.b, f.e
    moved = np.dtype(f"u{np.dtype(aval.dtype).itemsize}")
    frm, to = f.typed(src, moved), f.typed(dst, moved)

    def element(k):
        p = e.load(order, k, np.int64)
        e.store(to, rows.at(b, o, k, i), e.load(frm, rows.at(b, o, p, i), moved), moved)
    for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, rows.n), element, "permute")

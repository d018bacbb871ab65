"""Kernels that read an input transposed, walked in square blocks of their last two axes.

A kernel loops over its output in row-major order, its innermost loop along the last axis.
An input it reads transposed (``x.T * 2``) is then read a whole row apart from one element
to the next: each element on a cache line of its own, and on a page of its own once rows
pass 4 KiB, so neither the caches nor the TLB still hold a line when the next output row
wants its next element (a 4096x4096 float32 transpose ran at about 0.7 GB/s). Walked in
``BLOCK`` x ``BLOCK`` blocks of the last two axes, each line read serves ``BLOCK`` output
rows while it is cached. The values are the same: only the order of the iterations changes.
"""

import numpy as np

BLOCK = 16  # iterations of each of the last two axes in a block
_LINE = 64  # bytes: from this stride along the last axis, every read is a line of its own


def blocked(kernel):
    """Whether ``kernel`` is walked in blocks: element-wise (no reduction, no stages), its
    last two axes at least a block each, and one of its loads reading along the last axis
    a cache line or more apart and along the axis before it closer than that."""
    shape = kernel.shape
    if len(shape) < 2 or min(shape[-2:]) < BLOCK or kernel.stages or \
            any(out.combine for out in kernel.outputs):
        return False
    return any(_transposed(op, kernel) for op in kernel.body if op.name == "load")


def _transposed(load, kernel):
    itemsize = np.dtype(kernel.inputs[load.attr].aval.dtype).itemsize
    ndim = len(kernel.shape)
    origin = _offset(load.args[0], {})
    along_last = _offset(load.args[0], {ndim - 1: 1})
    along_rows = _offset(load.args[0], {ndim - 2: 1})
    if None in (origin, along_last, along_rows):
        return False
    return abs(along_last - origin) * itemsize >= _LINE > abs(along_rows - origin) * itemsize


def _offset(op, index):
    """The value of the index op ``op`` at the iteration ``index`` ({axis: i}, 0 elsewhere),
    or None where it is not made of sums and products (a division, a select...)."""
    if op.name == "index":
        return index.get(op.attr, 0)
    if op.name == "const":
        return op.attr
    args = [_offset(a, index) for a in op.args]
    if None in args or op.name not in ("add", "sub", "mul"):
        return None
    a, b = args
    return a + b if op.name == "add" else a - b if op.name == "sub" else a * b

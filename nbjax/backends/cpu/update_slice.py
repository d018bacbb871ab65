"""``dynamic_update_slice`` as a library step in native code, where the planner makes it
one (``Target.updates_in_place``: it makes a loop's carry, or an output, of an input):
the update copied into a window of the operand, its start clamped so that it fits (as
XLA's), in place when the result's buffer is the operand's (a carry the loop keeps in one
buffer: ``buffer_plan.accumulated_inputs``), else into a copy of the operand. As a kernel
it wrote every element of the result: a KV cache filled row by row in a ``fori_loop``
copied the whole cache at every step."""

import numpy as np

from ..llvm import I64, alias_scopes
from .scatter import copy_unless_in_place, index_as_int64, loops


def supports(eqn):
    """Whether ``emit`` compiles ``eqn``: a dynamic_update_slice of booleans, integers or
    floats (complex numbers and the narrow types stay kernels)."""
    return eqn.primitive.lowerings.get("library") == "dynamic update" and \
        np.dtype(eqn.invars[0].aval.dtype).kind in "biuf"


def emit(f, eqn, operand, update, *rest):
    """Emit ``eqn`` into ``f`` (a ``control_flow.ControlFlowFunction``) on the buffers of
    its operand, its update and its start indices, into the last of ``rest``."""
    *starts, out = rest
    op_aval, upd_aval = eqn.invars[0].aval, eqn.invars[1].aval
    b, e, dtype = f.b, f.e, op_aval.dtype
    copy_unless_in_place(f, out, operand, op_aval)
    if upd_aval.size == 0:
        return
    scopes = alias_scopes(f.mb.module, ["out", "update"])
    target, source = f.typed(out, dtype), f.typed(update, dtype)
    begin = [_start(f, s, a.aval.dtype, d - n) for s, a, d, n in
             zip(starts, eqn.invars[2:], op_aval.shape, upd_aval.shape)]

    def element(index):
        at = [b.add(s, i) for s, i in zip(begin, index)]
        value = e.load(source, e.offset(index, upd_aval.shape), dtype, scopes["update"])
        e.store(target, e.offset(at, op_aval.shape), value, dtype, scopes["out"])
    axes = list(range(len(upd_aval.shape)))
    loops(f, axes, upd_aval.shape, [None] * len(axes), element)


def _start(f, pointer, dtype, last):
    """The start index at ``pointer`` (a 0-d buffer of ``dtype``) as an int64 clamped into
    ``[0, last]`` (a uint64 beyond int64's range counts as int64's largest)."""
    e = f.e
    start = index_as_int64(e, f.typed(pointer, dtype), I64(0), dtype)
    return e.binary("min", e.binary("max", start, I64(0), np.int64), I64(last), np.int64)

"""``argmax`` and ``argmin`` in native code, where a compiled program or loop calls them,
without calling back into Python (a training loop's accuracy, ``argmax`` of the logits,
inside a ``scan``).

Each row along the reduced axis is walked from its first element, keeping the best value
so far and its index: a later element replaces it only when it beats it strictly (the
comparison the primitive's ``"arg-reduction"`` lowering names: "gt" for argmax), so the
first of equal extrema wins and -0.0 ties with 0.0; a NaN beats every number, and nothing
beats a NaN, so the first NaN wins. These are JAX's semantics (and NumPy's, which the
reference implementation calls). The index is converted to ``index_dtype`` as the
reference's ``astype`` does.
"""

import numpy as np
from llvmlite import ir

from ..llvm import I64, for_loop, reg_type
from .rows import Rows, beats, plain_number


def supports(eqn):
    """Whether ``emit`` compiles ``eqn``: an arg-reduction (a primitive with an
    ``"arg-reduction"`` lowering: the comparison by which an element beats the best so far)
    of bools, integers, float32 or float64."""
    return "arg-reduction" in eqn.primitive.lowerings and \
        plain_number(eqn.invars[0].aval.dtype)


def emit(f, eqn, operand, out):
    """Emit ``eqn`` (``supports(eqn)``) into ``f`` (a ``control_flow.ControlFlowFunction``)
    on the buffer of its operand, into ``out``."""
    aval, (axis,) = eqn.invars[0].aval, eqn.params["axes"]
    if aval.size == 0:  # (an empty reduced axis is refused when tracing)
        return
    dtype, index_dtype = aval.dtype, eqn.params["index_dtype"]
    comparison = eqn.primitive.lowerings["arg-reduction"]
    b, e, rows = f.b, f.e, Rows(aval.shape, axis)
    x, result = f.typed(operand, dtype), f.typed(out, index_dtype)
    best_type = reg_type(dtype)
    best, where = f.setup.alloca(best_type), f.setup.alloca(I64)

    def row(o, i):
        b.store(e.load(x, rows.at(b, o, ir.Constant(I64, 0), i), dtype), best)
        b.store(ir.Constant(I64, 0), where)

        def element(k):
            value, so_far = e.load(x, rows.at(b, o, k, i), dtype), b.load(best, typ=best_type)
            better = beats(e, comparison, value, so_far, dtype)
            b.store(b.select(better, value, so_far), best)
            b.store(b.select(better, k, b.load(where, typ=I64)), where)
        for_loop(b, ir.Constant(I64, 1), ir.Constant(I64, rows.n), element, "arg")
        e.store(result, rows.kept(b, o, i), e.convert(b.load(where, typ=I64), np.int64, index_dtype),
                index_dtype)
    rows.each(f, row)

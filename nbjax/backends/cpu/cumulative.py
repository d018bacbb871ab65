"""Running reductions (``cumsum``, ``cumprod``, ``cummax``, ``cummin``, ``cumlogsumexp``) in
native code, where a compiled program or loop calls them, without calling back into Python.

Along the axis, element ``k`` of the result combines the result's element ``k - 1`` with
the operand's element ``k`` (from the end with ``reverse``: element ``k + 1``), by the
monoid the primitive's ``"cumulative op"`` lowering names. The walk is sequential in the
operand's dtype, ``acc op x``, as NumPy's ``accumulate`` that the reference implementation
calls: float sums and products round exactly as the reference's. The axis is the outer
loop and the rows' other elements the inner one, so each step reads and writes contiguous
runs (vectorised) whatever the axis. max and min are the scalar emitter's: a NaN
propagates, and 0.0 is greater than -0.0 (as XLA's, where NumPy keeps the first of the two).
cumlogsumexp's "logaddexp" is NumPy's ``npy_logaddexp`` (``_logaddexp``) on the inline math
library's exp and log1p, so within a few ulp of the reference's (libm's) values, not bit
for bit.
"""

import math

from llvmlite import ir

from ..llvm import I64, constant, for_loop
from .rows import Rows, loop, plain_number


def supports(eqn):
    """Whether ``emit`` compiles ``eqn``: a running reduction by a monoid (a primitive whose
    ``"cumulative op"`` lowering names it: "add", "mul", "max", "min", and cumlogsumexp's
    "logaddexp") of integers, float32 or float64. Those of float16, bfloat16 and complex
    numbers stay host steps (the reference accumulates the half floats' sums, products and
    log-sum-exps in float32, and sums complex cumlogsumexp's exponentials in complex128)."""
    return "cumulative op" in eqn.primitive.lowerings and \
        plain_number(eqn.invars[0].aval.dtype)


def emit(f, eqn, operand, out):
    """Emit ``eqn`` (``supports(eqn)``) into ``f`` (a ``control_flow.ControlFlowFunction``)
    on the buffer of its operand, into ``out``."""
    aval, axis, reverse = eqn.invars[0].aval, eqn.params["axis"], eqn.params["reverse"]
    if aval.size == 0:
        return
    dtype, monoid = aval.dtype, eqn.primitive.lowerings["cumulative op"]
    b, e, rows = f.b, f.e, Rows(aval.shape, axis)
    x, y = f.typed(operand, dtype), f.typed(out, dtype)
    last = ir.Constant(I64, rows.n - 1)

    def position(k):
        return b.sub(last, k) if reverse else k

    def outer(o):
        start = position(ir.Constant(I64, 0))
        loop(f, rows.inner, lambda i: e.store(y, rows.at(b, o, start, i),
                                              e.load(x, rows.at(b, o, start, i), dtype),
                                              dtype), "cum.first")

        def step(k):
            here, before = position(k), position(b.sub(k, ir.Constant(I64, 1)))

            def element(i):
                at = rows.at(b, o, here, i)
                acc = e.load(y, rows.at(b, o, before, i), dtype)
                e.store(y, at, _combine(e, monoid, acc, e.load(x, at, dtype), dtype), dtype)
            loop(f, rows.inner, element, "cum.inner")
        for_loop(b, ir.Constant(I64, 1), ir.Constant(I64, rows.n), step, "cum")
    loop(f, rows.outer, outer, "cum.outer")


def _combine(e, monoid, acc, x, dtype):
    """``acc monoid x`` with the ScalarEmitter ``e``."""
    if monoid == "logaddexp":
        return _logaddexp(e, acc, x, dtype)
    return e.binary(monoid, acc, x, dtype)


def _logaddexp(e, x, y, dtype):
    """``log(exp(x) + exp(y))`` (float ``dtype``) as NumPy's ``npy_logaddexp``, branch-free:
    ``x + ln 2`` where ``x == y`` (so two infinities of one sign give that infinity, not
    the NaN of ``inf - inf``), else the larger one plus ``log1p(exp(-|x - y|))``, which
    neither overflows nor loses the larger's digits (and is NaN where ``x - y`` is, as
    NumPy's result)."""
    b = e.b
    d = b.fsub(x, y)
    larger = b.select(b.fcmp_ordered(">", d, constant(0, dtype)), x, y)
    tail = e.call_math("log1p", [e.call_math("exp", [b.fneg(e.unary("abs", d, dtype))],
                                             dtype)], dtype)
    return b.select(b.fcmp_ordered("==", x, y), b.fadd(x, constant(math.log(2), dtype)),
                    b.fadd(larger, tail))

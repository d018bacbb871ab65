"""The rows along one axis of an array, for the library steps native code runs one row at
a time (``arg_reduction``, ``cumulative``, ``sort``).

An array of shape ``(a..., n, b...)`` seen along its axis of size ``n`` is ``outer``
(the product of ``a...``) times ``inner`` (of ``b...``) rows of ``n`` elements; element
``k`` of row ``(o, i)`` is at ``(o * n + k) * inner + i`` in row-major order.
"""

import math

import numpy as np
from llvmlite import ir

from ...core import dtypes
from ..llvm import I64, for_loop


def plain_number(dtype):
    """Whether native loops compute on ``dtype`` directly: bools, integers, float32 and
    float64 (float16, the narrow floats and complex numbers stay host steps)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "biu" or dtype in (dtypes.float32, dtypes.float64)


class Rows:
    """The rows of an array of ``shape`` along ``axis`` (see the module docstring)."""

    def __init__(self, shape, axis):
        self.n = shape[axis]
        self.outer, self.inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])

    def each(self, f, body, name="row"):
        """``body(o, i)`` for every row ``(o, i)``, in ``f`` (a ``ControlFlowFunction``)."""
        def over_inner(o):
            loop(f, self.inner, lambda i: body(o, i), name + ".inner")
        loop(f, self.outer, over_inner, name + ".outer")

    def at(self, b, o, k, i):
        """The offset of element ``k`` (an i64 value) of row ``(o, i)``."""
        start = b.mul(b.add(b.mul(o, ir.Constant(I64, self.n)), k),
                      ir.Constant(I64, self.inner))
        return b.add(start, i)

    def kept(self, b, o, i):
        """The offset of row ``(o, i)``'s element in an array without the axis (where a
        reduction along it goes)."""
        return b.add(b.mul(o, ir.Constant(I64, self.inner)), i)


def loop(f, count, body, name):
    """``body(i)`` for ``i`` in ``range(count)`` (a Python int) at ``f``'s builder; a loop of
    one iteration is left out (``i`` is then the constant 0)."""
    if count == 1:
        body(ir.Constant(I64, 0))
    else:
        for_loop(f.b, ir.Constant(I64, 0), ir.Constant(I64, count), body, name)


def beats(e, comparison, x, y, dtype):
    """Whether ``x`` ``comparison`` ``y`` ("lt", "gt") with the ScalarEmitter ``e``, in an
    order where a NaN lies beyond every number in the comparison's direction (the greatest
    for "gt", the least for "lt") and equals another NaN; -0.0 equals 0.0."""
    if not dtypes.is_float(dtype):
        return e.compare(comparison, x, y, dtype)
    b = e.b
    is_nan, y_is_nan = b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)
    return b.or_(e.compare(comparison, x, y, dtype), b.and_(is_nan, b.not_(y_is_nan)))

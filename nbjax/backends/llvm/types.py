"""How the kernel IR's dtypes are represented in LLVM, for every LLVM target.

Values of a dtype live in registers as ``reg_type`` and in memory as ``mem_type``; the two
differ only for bools, which are ``i1`` in registers (what comparisons give and selects take)
and one byte in memory (NumPy's layout).
"""

import numpy as np
from llvmlite import ir

from ...core import dtypes

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))

_FLOAT_TYPES = {dtypes.float16: ir.HalfType(), dtypes.float32: ir.FloatType(),
                dtypes.float64: ir.DoubleType()}


def reg_type(dtype):
    """The LLVM type of a value of ``dtype`` in a register."""
    dtype = np.dtype(dtype)
    if dtype == dtypes.bool_:
        return I1
    if dtypes.is_float(dtype):
        return _FLOAT_TYPES[dtype]
    return ir.IntType(8 * dtype.itemsize)


def mem_type(dtype):
    """The LLVM type of an element of ``dtype`` in memory (bools are bytes)."""
    return I8 if np.dtype(dtype) == dtypes.bool_ else reg_type(dtype)


def constant(value, dtype):
    """``value`` as an LLVM constant of ``dtype``'s register type."""
    t = reg_type(dtype)
    if t == I1:
        return ir.Constant(I1, int(bool(value)))
    if isinstance(t, ir.IntType):
        return ir.Constant(t, int(value))
    return ir.Constant(t, float(value))


def suffix(t):
    """The type suffix of an overloaded LLVM intrinsic's name: ``llvm.fabs.f32``."""
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(t)]


def declare(module, name, ret, args):
    """The function ``name`` of ``module`` (an intrinsic or an external function), declared
    with this signature on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return fn

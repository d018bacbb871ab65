"""How the kernel IR's dtypes are represented in LLVM, for every LLVM target.

Values of a dtype live in registers as ``reg_type`` and in memory as ``mem_type``; the two
differ for bools, which are ``i1`` in registers (what comparisons give and selects take)
and one byte in memory (NumPy's layout), and for bfloat16, which kernels only convert to
and from float32 (``compiler.kernel.narrow_type_reason``): a float32 in registers, holding
a value bfloat16 represents, and its upper 16 bits in memory (``emitter.ScalarEmitter``'s
loads, stores and conversions).
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
    if dtype == dtypes.bfloat16:
        return _FLOAT_TYPES[dtypes.float32]
    if dtypes.is_float(dtype):
        return _FLOAT_TYPES[dtype]
    return ir.IntType(8 * dtype.itemsize)


def mem_type(dtype):
    """The LLVM type of an element of ``dtype`` in memory (bools are bytes, bfloat16s
    16-bit integers)."""
    dtype = np.dtype(dtype)
    if dtype == dtypes.bool_:
        return I8
    return I16 if dtype == dtypes.bfloat16 else reg_type(dtype)


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

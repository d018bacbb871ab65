"""What every LLVM target shares: the kernel IR's scalar ops as LLVM IR.

- ``types``: dtypes as LLVM types (bools are ``i1`` in registers, bytes in memory);
- ``emitter``: the scalar emitter (``ScalarEmitter``) and a ``LoopKernel``'s body at an
  index (``KernelEmitter``);
- ``mathnames``: how a target computes transcendental functions (``MathNames``: inline,
  LLVM intrinsic, or a named external function such as libm's ``expf`` or libdevice's
  ``__nv_expf``);
- ``mathlib``: the inline math library, plain LLVM IR polynomials;
- ``scaffold``: the interface for what differs per target (``KernelScaffold``: indices,
  address spaces, math, reductions, store policy) and the kernel function around it.

A target (``backends.cpu``, ``backends.gpu``) writes a scaffold and the runtime that compiles
and calls the module; it copies none of this. Only ``llvmlite.ir`` is used here: building
a module's text needs no target machine.
"""

from .emitter import KernelEmitter, ScalarEmitter
from .mathnames import LIBM, MathNames
from .scaffold import (KernelScaffold, alias_scopes, define_kernel, entry_alloca, for_loop,
                       memset, pointer_array)
from .types import I1, I8, I16, I32, I64, constant, declare, mem_type, reg_type

__all__ = ["KernelEmitter", "ScalarEmitter", "LIBM", "MathNames", "KernelScaffold",
           "alias_scopes", "define_kernel", "entry_alloca", "for_loop", "memset",
           "pointer_array", "I1", "I8", "I16", "I32", "I64", "constant", "declare", "mem_type",
           "reg_type"]

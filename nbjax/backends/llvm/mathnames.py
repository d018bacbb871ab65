"""Which code computes each transcendental function: a choice every LLVM target makes.

A kernel's ``math`` op names a libm function (``exp``, ``log1p``, ``atan2``...). A target
computes it in one of three ways, tried in this order, which its ``MathNames`` states:

- inline, with ``mathlib``'s branch-free polynomials (the CPU's choice wherever mathlib has
  the function: they vectorise, where a call per element would not), or the same code
  emitted once per module as a vector function that vectorised loops call
  (``shared_math``: for loop bodies with many calls, whose optimisation would be slow);
- an LLVM intrinsic (``llvm.sqrt.f32``), which LLVM's code generator lowers for the machine;
- a call of a named external function that the target links or the process exports: libm's
  ``expf`` on the CPU, libdevice's ``__nv_expf`` on an NVIDIA GPU.

float16 computes in float32 and rounds once, as NumPy does, whatever the choice.
"""

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ...core import dtypes
from . import mathlib, shared_math
from .types import declare, reg_type, suffix

# Functions LLVM knows as intrinsics.
INTRINSICS = frozenset({"exp", "exp2", "log", "sin", "cos", "sqrt", "pow", "fma", "floor",
                        "ceil", "round", "rint"})


@dataclass(frozen=True)
class MathNames:
    """A target's choice: the functions computed ``inline`` (a subset of
    ``mathlib.EMITTERS``), those that are LLVM ``intrinsics``, and the ``prefix`` of the
    external functions computing the others. The inline functions named in ``shared`` are
    compiled once, with vector variants of the widths ``shared_lanes``, and
    called instead (``shared_math``): the choice for loop bodies with many of them, and for
    those with a faster form where the code may branch (``mathlib.BRANCHING``: a shared
    function may, a loop body that LLVM vectorises may not). ``scalar``: the code is never
    vectorised (a small kernel's loops), so the inline functions may branch there.
    ``shared_linked``: a function of a shared function's vector variant's name giving
    that of the copy the target compiles once and links (``shared_math``)."""
    inline: frozenset = frozenset(mathlib.EMITTERS)
    intrinsics: frozenset = INTRINSICS
    prefix: str = ""
    shared: frozenset = frozenset()
    shared_lanes: tuple = ()
    scalar: bool = False
    shared_linked: object = str

    def external(self, name, dtype):
        """The external function computing ``name`` on ``dtype``: C's name (float32
        functions end in ``f``) after the prefix."""
        return self.prefix + name + ("f" if np.dtype(dtype) == dtypes.float32 else "")


# The CPU's choice: mathlib where it has the function, else an intrinsic, else libm.
LIBM = MathNames()


def emit_math(builder, names, name, args, dtype):
    """``name`` applied to ``args`` (float ``dtype``) at ``builder``, computed as ``names``
    (a ``MathNames``) says."""
    dtype = np.dtype(dtype)
    if dtype == dtypes.float16:
        wide = [builder.fpext(a, ir.FloatType()) for a in args]
        return builder.fptrunc(emit_math(builder, names, name, wide, dtypes.float32),
                               reg_type(dtype))
    if name in names.shared and name in names.inline:
        return shared_math.call(builder, name, list(args), dtype, names.shared_lanes,
                                names.shared_linked)
    if name in names.inline:
        return mathlib.emit(builder, name, list(args), dtype, branches=names.scalar)
    t = reg_type(dtype)
    callee = f"llvm.{name}.{suffix(t)}" if name in names.intrinsics \
        else names.external(name, dtype)
    return builder.call(declare(builder.module, callee, t, [t] * len(args)), list(args))

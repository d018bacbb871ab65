"""Math functions compiled once and called, for kernels with many of them.

Inlined, each call of a ``mathlib`` function is 30-150 instructions in the loop body, and
LLVM's loop and SLP vectorisers take time that grows faster than linearly with the body:
a chain of 30 ``sin`` took 4 s to optimise, 60 over a minute. Here each function is a
vector function of ``lanes`` lanes, and every call site names it as its vector variant
(LLVM's vector function ABI, the ``vector-function-abi-variant`` attribute), so the loop
vectoriser replaces the scalar calls by calls of the vector function. The loop body stays
small, and the values are the inline code's, bit for bit (it is the same code), but for
sin, cos and tan: a function may branch where a loop body to vectorise may not, so theirs
reduce a vector of moderate arguments by a faster route (``mathlib.emit``'s ``branches``),
within the same bounds.

The target compiles each vector variant apart, once (``define_vector``; the CPU's
``library``, which keeps its machine code in the disk cache), and links the calls of every
module to it: a module only declares the variants. Optimising a vector ``sin`` by O3 took
40 ms, which every program whose loops called it spent again when its module defined it.

The scalar function that the call sites name (and the loop's scalar remainder calls)
splats its argument into the narrowest vector variant and returns lane 0: one copy of the
computation per (function, dtype, width), not one more for scalars.
"""

import numpy as np
from llvmlite import ir
from llvmlite.ir.instructions import CallInstrAttributes
from llvmlite.ir.values import FunctionAttributes

from . import mathlib
from .types import I32, reg_type


class _VariantAttribute(CallInstrAttributes):
    """A call site's string attribute (llvmlite knows only LLVM's keyword attributes)."""
    _known = None

    def add(self, name):
        set.add(self, name)

    def _to_list(self, typ):
        return sorted(self)


def call(builder, name, args, dtype, lanes, linked):
    """``name(*args)`` (scalars of float ``dtype``) as a call of the shared function, whose
    vector variants have the widths ``lanes`` (a tuple); ``linked(vector_name(...))`` is
    the name of the variant the target compiles and links."""
    variants = {w: linked(vector_name(name, dtype, w)) for w in sorted(lanes)}
    scalar = _scalar_function(builder.module, name, args[0].type, dtype, variants)
    site = builder.call(scalar, list(args))
    variants = ",".join(f"_ZGV_LLVM_N{w}{'v' * len(args)}_{scalar.name}({variant})"
                        for w, variant in variants.items())
    site.attributes = _VariantAttribute([f'"vector-function-abi-variant"="{variants}"'])
    return site


def vector_name(name, dtype, width):
    """The name of math function ``name``'s vector variant of ``width`` lanes of ``dtype``."""
    return f"nbjax_math_{name}_{dtype}_v{width}"


def define_vector(module, variant):
    """Define the vector variant named ``variant`` (``vector_name``, perhaps followed by a
    dot and more, which is left out) in ``module``. Its linkage is external."""
    base, width = variant.split(".")[0].removeprefix("nbjax_math_").rsplit("_v", 1)
    name, dtype = base.rsplit("_", 1)
    dtype = np.dtype(dtype)
    ty = ir.VectorType(reg_type(dtype), int(width))
    fn = _declare(module, variant, ty, mathlib.ARITY[name], internal=False)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(mathlib.emit(b, name, list(fn.args), dtype, branches=True))


def _scalar_function(module, name, ty, dtype, variants):
    """The scalar function, with vector variants (``{width: name}``) of (at least) those
    widths declared: a kernel asks for those its loop may be vectorised with, another for
    others."""
    for width, variant in variants.items():
        if variant not in module.globals:
            _declare(module, variant, ir.VectorType(ty, width), mathlib.ARITY[name],
                     internal=False)
    fname = f"nbjax_math_{name}_{dtype}"
    fn = module.globals.get(fname)
    if fn is not None:
        return fn
    fn = _declare(module, fname, ty, mathlib.ARITY[name])
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    width = min(variants)
    narrow, zero = module.globals[variants[width]], ir.Constant(I32, 0)
    undefined = ir.Constant(narrow.function_type.return_type, ir.Undefined)
    lane0 = ir.Constant(ir.VectorType(I32, width), [0] * width)
    splats = [b.shuffle_vector(b.insert_element(undefined, a, zero), undefined, lane0)
              for a in fn.args]
    b.ret(b.extract_element(b.call(narrow, splats), zero))
    return fn


class _PureAttributes(FunctionAttributes):
    """A math function's attributes, ``willreturn`` among them (llvmlite does not know it):
    a call that may not return counts as a side effect, and the SLP vectoriser left 16
    calls of a declared variant's scalar function (a loop of 16 elements, unrolled) as
    they were, where it made them one call of the variant once the variant's body, from
    which LLVM infers ``willreturn``, was in the module."""
    _known = FunctionAttributes._known | {"willreturn"}


def _declare(module, fname, ty, arity, internal=True):
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=fname)
    if internal:
        fn.linkage = "internal"
    # noinline: the point, one copy, called; readnone: a pure function (two calls on the
    # same values are one)
    fn.attributes = _PureAttributes(["noinline", "nounwind", "readnone", "willreturn"])
    return fn

"""Math functions emitted once per module and called, for kernels with many of them.

Inlined, each call of a ``mathlib`` function is 30-150 instructions in the loop body, and
LLVM's loop and SLP vectorisers take time that grows faster than linearly with the body:
a chain of 30 ``sin`` took 4 s to optimise, 60 over a minute. Here each function is emitted
once per module, as a vector function of ``lanes`` lanes, and every call site names it as
its vector variant (LLVM's vector function ABI, the ``vector-function-abi-variant``
attribute), so the loop vectoriser replaces the scalar calls by calls of the vector
function. The loop body stays small, the function body is optimised once, and the values
are the inline code's, bit for bit (it is the same code), but for sin, cos and tan: a
function may branch where a loop body to vectorise may not, so theirs reduce a vector of
moderate arguments by a faster route (``mathlib.emit``'s ``branches``), within the same bounds.

The scalar function that the call sites name (and the loop's scalar remainder calls)
splats its argument into the narrowest vector variant and returns lane 0: one copy of the
computation per (function, dtype, width), not one more for scalars.
"""

from llvmlite import ir
from llvmlite.ir.instructions import CallInstrAttributes

from . import mathlib
from .types import I32


class _VariantAttribute(CallInstrAttributes):
    """A call site's string attribute (llvmlite knows only LLVM's keyword attributes)."""
    _known = None

    def add(self, name):
        set.add(self, name)

    def _to_list(self, typ):
        return sorted(self)


def call(builder, name, args, dtype, lanes):
    """``name(*args)`` (scalars of float ``dtype``) as a call of the module's shared
    function, whose vector variants have the widths ``lanes`` (a tuple)."""
    scalar = _scalar_function(builder.module, name, args[0].type, dtype, tuple(sorted(lanes)))
    site = builder.call(scalar, list(args))
    variants = ",".join(f"_ZGV_LLVM_N{w}{'v' * len(args)}_{scalar.name}({scalar.name}_v{w})"
                        for w in sorted(lanes))
    site.attributes = _VariantAttribute([f'"vector-function-abi-variant"="{variants}"'])
    return site


def _scalar_function(module, name, ty, dtype, lanes):
    """The scalar function, with vector variants of (at least) the widths ``lanes``: a
    kernel asks for those its loop may be vectorised with, another for others."""
    fname = f"nbjax_{name}_{dtype}"
    for width in lanes:
        if f"{fname}_v{width}" not in module.globals:
            _vector_function(module, fname, name, ty, dtype, width)
    fn = module.globals.get(fname)
    if fn is not None:
        return fn
    fn = _declare(module, fname, ty, mathlib.ARITY[name])
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    narrow, zero = module.globals[f"{fname}_v{lanes[0]}"], ir.Constant(I32, 0)
    undefined = ir.Constant(narrow.function_type.return_type, ir.Undefined)
    lane0 = ir.Constant(ir.VectorType(I32, lanes[0]), [0] * lanes[0])
    splats = [b.shuffle_vector(b.insert_element(undefined, a, zero), undefined, lane0)
              for a in fn.args]
    b.ret(b.extract_element(b.call(narrow, splats), zero))
    return fn


def _vector_function(module, fname, name, ty, dtype, width):
    """The vector variant. Its linkage stays external: nothing calls it until the loop
    vectoriser does, and LLVM drops unused internal functions before that."""
    vty = ir.VectorType(ty, width)
    fn = _declare(module, f"{fname}_v{width}", vty, mathlib.ARITY[name], internal=False)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(mathlib.emit(b, name, list(fn.args), dtype, branches=True))
    return fn


def _declare(module, fname, ty, arity, internal=True):
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=fname)
    if internal:
        fn.linkage = "internal"
    fn.attributes.add("noinline")   # the point: one copy, called
    fn.attributes.add("nounwind")
    fn.attributes.add("readnone")   # (a pure function: two calls on the same values are one)
    return fn

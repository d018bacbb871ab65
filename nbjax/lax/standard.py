"""What every lax module shares, at the bottom of lax (it imports nothing of it).

Dtype kinds and the checks that raise JAX's errors (``check_dtype``, ``same_dtypes``,
``broadcast_shapes``); the registrar of reductions over axes (``reduction``: abstract eval,
NumPy implementation, batching rule), which ``shapes`` uses for ``reduce_sum`` and
``reductions`` for the others; constants made from Python scalars (``scalar_like``,
``weak_scalar``, ``as_array``). The element-wise registrars are in ``elementwise``, whose
batching rule needs the shape primitives above this module.

The compiler asks primitives, never matches their names: the helpers at the end declare how
a primitive lowers (kernel, library call, control flow) and how it simplifies (``x * 1``).
"""

import functools
import operator

import numpy as np

from ..core import ExtendedArray, Literal, Primitive, ShapedArray, dtypes, get_aval
from ..core.trace import Tracer, is_python_scalar
from ..core.array import Array, scalar_in_range


class IncompatibleShapesError(TypeError, ValueError):
    """Shapes that do not broadcast: a TypeError (as lax raises) that is also a ValueError
    (as ``jnp`` raises), so code written for either catches it."""


# Dtype kinds a primitive accepts, each a (description, predicate) pair.
def _kind(description, test):
    return (description, test)


BOOL = _kind("bool", dtypes.is_bool)
INT = _kind("integer", dtypes.is_int)
FLOAT = _kind("floating", dtypes.is_float)
COMPLEX = _kind("complexfloating", dtypes.is_complex)
INEXACT = _kind("floating, complexfloating", dtypes.is_inexact)
INT_OR_BOOL = _kind("integer, bool", lambda d: dtypes.is_int(d) or dtypes.is_bool(d))
NUMBER = _kind("integer, floating, complexfloating", lambda d: not dtypes.is_bool(d))
ORDERED = _kind("bool, integer, floating", lambda d: not dtypes.is_complex(d))
SIGNED = _kind("signedinteger, floating, complexfloating",
               lambda d: dtypes.is_signed_int(d) or dtypes.is_inexact(d))
FLOAT_OR_INT = _kind("integer, floating", lambda d: dtypes.is_int(d) or dtypes.is_float(d))
ANY = _kind("any", lambda d: True)


def check_dtype(name, aval, kind, position=None):
    description, test = kind
    if not test(aval.dtype):
        at = f" at position {position}" if position is not None else ""
        raise TypeError(f"{name} does not accept dtype {aval.dtype.name}{at}. "
                        f"Accepted dtypes{at} are subtypes of {description}.")


def broadcast_shapes(name, *shapes):
    """The common shape of operands that are rank-0 or of equal rank with size-1 axes."""
    shapes = [s for s in shapes if s]
    if not shapes:
        return ()
    if all(s == shapes[0] for s in shapes):  # (most operands: no axis to stretch)
        return tuple(shapes[0])
    if len({len(s) for s in shapes}) != 1:
        raise IncompatibleShapesError(
            f"{name}: arrays must have the same number of dimensions, got "
            f"{', '.join(map(str, shapes))}. Broadcast them first (jnp.{name} does).")
    out = []
    for sizes in zip(*shapes):
        non_one = {d for d in sizes if d != 1}
        if len(non_one) > 1:
            raise IncompatibleShapesError(
                f"{name} got incompatible shapes for broadcasting: "
                f"{', '.join(map(str, shapes))}.")
        out.append(non_one.pop() if non_one else 1)
    return tuple(out)


# The jnp function that promotes where a lax one requires equal dtypes, named in the error
# (as JAX names it; lax functions without a jnp twin get no tip).
_JNP_TWINS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
              "max": "maximum", "min": "minimum", "atan2": "arctan2",
              "nextafter": "nextafter", "eq": "equal", "ne": "not_equal",
              "shift_left": "left_shift", "shift_right_logical": "right_shift",
              "shift_right_arithmetic": "right_shift", "select": "where",
              "concatenate": "concatenate"}


def same_dtypes(name, avals):
    """Raise JAX's TypeError unless every operand has the same dtype: lax never promotes
    (Python scalars arrive as their own default dtype, so ``lax.add(int8_array, 1)`` fails)."""
    dts = [a.dtype for a in avals]
    if any(d != dts[0] for d in dts):
        twin = _JNP_TWINS.get(name)
        tip = (f" (Tip: jnp.{twin} is a similar function that does automatic type promotion "
               "on inputs).") if twin else ""
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(d.name for d in dts)}.{tip}")


def accumulation_dtype(dtype):
    """Sums and products of float16 and bfloat16 accumulate in float32, as XLA does on the
    CPU (the 8-bit floats accumulate in their own type, as there)."""
    return dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype



REMEMBERED_TYPES = 1024  # (operand types, params) a remembered rule keeps the result of


def remembered(abstract_eval):
    """``abstract_eval`` remembering its result per operand types and params (up to
    ``REMEMBERED_TYPES`` of them), for the rules of the primitives traced most (element-wise
    arithmetic, slices, broadcasts, reshapes, transposes, reductions), whose checks and shape
    arithmetic cost several times the lookup, and which tracing asks mostly about the same
    few types. The answer is the same ShapedArray object each time, so the next lookup, on
    the operands it typed, matches by identity. Only results are kept (operands that fail a
    check fail it again), and params that do not hash (an array) are not remembered. The
    rule must depend on nothing else (no config option): its params are ints and tuples of
    ints, which its lax function has made so."""
    known = {}

    def rule(*avals, **params):
        key = (avals, *params.items())
        try:
            out = known.get(key)
        except TypeError:  # an unhashable param
            return abstract_eval(*avals, **params)
        if out is None:
            if len(known) >= REMEMBERED_TYPES:
                known.clear()
            out = known[key] = abstract_eval(*avals, **params)
        return out
    return rule


def _check_axes(aval, axes):
    if any(not 0 <= a < aval.ndim for a in axes):
        raise ValueError(f"reduction axes {axes} contains out-of-bounds indices for "
                         f"{aval.dtype.name}{list(aval.shape)}.")
    if len(set(axes)) != len(axes):
        raise ValueError(f"duplicate value in 'axes' of reduction: {axes}")


def reduction(name, kind, impl, keeps_weak_type=True):
    """A primitive reducing ``axes`` away; ``impl(x, axes)`` computes on a NumPy array."""
    prim = Primitive(name)

    def abstract_eval(x, *, axes, out_sharding=None):
        if kind is INT_OR_BOOL and not kind[1](x.dtype):  # JAX's wording for these three
            raise TypeError(f"logical reduction requires operand dtype bool or int, got "
                            f"{x.dtype.name}.")
        check_dtype(name, x, kind)
        _check_axes(x, axes)
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return ShapedArray(shape, x.dtype, x.weak_type and keeps_weak_type)

    def impl_rule(x, *, axes, out_sharding=None):
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(impl(x, axes)).astype(x.dtype, copy=False)
    prim.def_abstract_eval(remembered(abstract_eval))
    prim.def_impl(impl_rule)
    prim.def_batch(reduction_batch_rule(prim))
    return prim


def reduction_batch_rule(prim):
    """vmap of a reduction: reduce the same axes of the batched value; the batch axis is never
    among them, so it stays in the result (moved left by the reduced axes before it)."""
    def rule(axis_data, vals, dims, *, axes, **params):
        (x,), (bdim,) = vals, dims
        batched_axes = tuple(a + (a >= bdim) for a in axes)
        return prim.bind(x, axes=batched_axes, **params), bdim - sum(a < bdim for a in axes)
    return rule


def canonical_axes(axes):
    """A reduction's ``axes`` argument (an int or a sequence of ints) as a tuple of ints."""
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(operator.index(a) for a in axes)


def weak_scalar(x, dtype):
    """A Python scalar as a weakly typed rank-0 Array of ``dtype``."""
    return Array.wrap(np.array(scalar_in_range(x, dtype), dtype), ShapedArray((), dtype, True))


def as_array(x):
    """An argument leaf as an Array or tracer: NumPy values are converted (to the canonical
    dtype), Python scalars become weakly typed rank-0 arrays; arrays of an extended dtype
    (typed keys) are arrays too."""
    if isinstance(x, (Array, Tracer, ExtendedArray)):
        return x
    if is_python_scalar(x):
        dtype, weak = dtypes.python_scalar_dtype(x)
        return weak_scalar(x, dtype) if weak else Array(np.asarray(x, dtype))
    if isinstance(x, (np.ndarray, np.generic)):
        return Array(np.asarray(x, dtypes.canonicalize(x.dtype)))
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid nbjax type")


def scalar_like(x, value):
    """``value`` as a weakly typed rank-0 constant of ``x``'s dtype: what a rule or derived
    op combines with ``x`` (lax requires equal dtypes), without making the result strong."""
    return weak_scalar(value, get_aval(x).dtype)


def owned_results(values):
    """Results an impl may hand over: an input passed straight through that is still
    writeable (a user's NumPy array) is copied, since the caller freezes what it gets."""
    values = [np.asarray(v) for v in values]
    return [np.array(v) if v.flags.writeable else v for v in values]


def np_dtype_preserving(fn):
    """Wrap a NumPy function whose result dtype may drift (e.g. int8 -> int64)."""
    def impl(*args, **params):
        return np.asarray(fn(*args, **params)).astype(np.result_type(*args), copy=False)
    return impl


# --- kernel lowerings (read by nbjax.compiler, which fuses them into loop kernels) ---------

class KernelLowering:
    """How the compiler computes one element of a primitive's result inside a fused loop.

    ``kind`` is ``"elementwise"`` (``rule(ctx, *scalar_operands, **params)`` returns the
    scalar result), ``"index"`` (``rule(ctx, index, read, shapes, **params)``: ``index`` is
    the output position as a list of scalar index values, ``read(i, operand_index)`` the
    value of operand ``i`` there and ``shapes`` the operands' shapes; slices, pads,
    transposes... are index arithmetic) or
    ``"reduction"`` (``rule`` names the ctx method combining two values, ``identity(dtype)``
    starts the accumulation and ``acc_dtype(dtype)`` is the dtype it accumulates in). ``ctx``
    is the compiler's backend-neutral builder of scalar operations (``ctx.add``, ``ctx.exp``,
    ``ctx.select``, ``ctx.convert``...), so the rules serve every backend.

    An ``"index"`` lowering that ``restrides`` only moves its operand's elements (a slice,
    a transpose, a broadcast...): the planner lets a kernel re-read it at any number of
    places, since each read is one load. One that ``gathers`` reads its first operand at
    positions loaded from another (``gather``): the same element may be read for many
    elements of its result. ``views(eqn)``, where given, says whether ``eqn``'s result is
    its operand's elements in the same row-major order (a reshape, a squeeze, a broadcast
    adding size-1 axes): a compiled program can then read the operand's buffer as the
    result's instead of copying it (a ``"view"`` step of the fusion plan).
    ``interleaves(eqn)``, where given, says whether ``eqn`` spreads its operand's elements
    apart with others between them (a pad with interior padding): its index arithmetic
    divides the index and tests the remainder. One that is ``guarded`` reads its operand
    only after a test of the index (a pad: its padding value outside the operand), which
    makes its loads gathers. An
    ``"elementwise"`` lowering that ``sums`` adds its two operands: where one is a matrix
    product's result, the product's library call may add it into the other's buffer
    (``Target.accumulates``) instead of a kernel adding them.
    """

    def __init__(self, kind, rule, identity=None, acc_dtype=None, restrides=False,
                 gathers=False, views=None, sums=False, interleaves=None, guarded=False):
        self.kind, self.rule, self.identity, self.acc_dtype = kind, rule, identity, acc_dtype
        self.restrides, self.gathers, self.views, self.sums = restrides, gathers, views, sums
        self.interleaves, self.guarded = interleaves, guarded


def kernel_elementwise(prim, rule, sums=False):
    prim.def_lowering("kernel", KernelLowering("elementwise", rule, sums=sums))


def kernel_index(prim, rule, restrides=False, gathers=False, views=None, interleaves=None,
                 guarded=False):
    prim.def_lowering("kernel", KernelLowering("index", rule, restrides=restrides,
                                               gathers=gathers, views=views,
                                               interleaves=interleaves, guarded=guarded))


def library_lowering(prim, category):
    """Mark ``prim`` as one a compiled program runs as a call into a library (or back into
    Python) on materialised buffers: ``category`` says what kind of call ("matrix product",
    "sort", "scatter", "host callback"...); each target says how it makes such calls."""
    prim.def_lowering("library", category)


def array_module_lowering(prim, rule):
    """Define ``prim`` by ``rule(xp, *operands, **params)``, its computation with any array
    module of NumPy's API: its reference implementation is the rule with NumPy, and its
    ``"array module"`` lowering the rule itself, for a target keeping arrays on a device
    (CuPy on a GPU)."""
    prim.def_impl(functools.partial(rule, np))
    prim.def_lowering("array module", rule)


class ControlLowering:
    """What a target needs to compile a control-flow primitive around its sub-programs:
    ``sub_jaxprs(params)`` lists them as (role, ClosedJaxpr), e.g. ``[("body", ...)]``;
    ``operands(params)`` lists the groups of its operands in order as (role, count), the
    last group's count None for "the rest", e.g. ``[("consts", 2), ("carry", None)]``;
    ``hoist(params, worth)``, where there is one, says what a compiler may compute before
    the loop instead of at every iteration (see ``loops._scan_hoist``); ``sink(params)``,
    what it may compute after the loop (``loops._scan_sink``); ``transposed_consts(params,
    worth)``, which consts it may transpose before the loop for the body's products
    (``loops._scan_transposed_consts``); ``branches`` says that one of the sub-programs runs
    (``cond``), not a loop over them."""

    def __init__(self, sub_jaxprs, operands, hoist=None, sink=None, transposed_consts=None,
                 branches=False):
        self.sub_jaxprs, self.operands, self.branches = sub_jaxprs, operands, branches
        self.hoist, self.sink, self.transposed_consts = hoist, sink, transposed_consts

    def split(self, params, values):
        """``values`` (one per operand: buffers, variables...) grouped by role."""
        groups, start = {}, 0
        for role, count in self.operands(params):
            end = len(values) if count is None else start + count
            groups[role], start = list(values[start:end]), end
        return groups


def control_lowering(prim, sub_jaxprs, operands, branches=False, **rewrites):
    """Mark ``prim`` as control flow a target may compile (see ``ControlLowering``; the
    ``rewrites`` are its ``hoist``, ``sink`` and ``transposed_consts``)."""
    prim.def_lowering("control", ControlLowering(sub_jaxprs, operands, branches=branches,
                                                 **rewrites))


def kernel_reduction(prim, combine, identity, acc_dtype=lambda dtype: dtype):
    prim.def_lowering("kernel", KernelLowering("reduction", combine, identity, acc_dtype))


# --- simplification rules (read by nbjax.compiler.passes.simplify) ------------------------
# A primitive's "simplify" rule: see nbjax.core.primitive for its signature.

def literal_value(atom):
    """The Python value of a Literal operand, or None for a variable."""
    return np.asarray(atom.val).item() if isinstance(atom, Literal) else None


def same_type(atom, var):
    """Whether ``atom`` has ``var``'s shape and dtype, so it can stand for ``var``."""
    return atom.aval.shape == var.aval.shape and atom.aval.dtype == var.aval.dtype


def identity_simplification(prim, symbol, identity, commutes, exact_for_floats=True,
                            exact_for_complex=True):
    """Let the compiler drop ``x <symbol> identity`` (and ``identity <symbol> x`` when the
    operation ``commutes``). ``exact_for_floats=False`` keeps it on floats and complex
    numbers, ``exact_for_complex=False`` on complex numbers: there the identity does not hold
    for every value (``-0.0 + 0.0`` is ``+0.0``; ``(inf+1j) * (1+0j)`` is ``inf+nanj``)."""
    def rule(eqn, ins, producer_of, use_count, value_of):
        out = eqn.outvars[0]
        dtype = out.aval.dtype
        if not exact_for_floats and dtypes.is_inexact(dtype) \
                or not exact_for_complex and dtypes.is_complex(dtype):
            return None
        x, y = ins
        if literal_value(y) == identity and same_type(x, out):
            return x, f"x {symbol} {identity}"
        if commutes and literal_value(x) == identity and same_type(y, out):
            return y, f"{identity} {symbol} x"
        return None
    prim.def_rule("simplify", rule)

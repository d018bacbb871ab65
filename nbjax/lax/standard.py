"""Registrars for the common shapes of primitive, so each is declared in a line or two.

``unop("sin", np.sin, INEXACT)`` makes a primitive with an element-wise abstract_eval that
checks the dtype and keeps the shape, and a NumPy reference implementation. ``binop`` does the
same for n-ary element-wise primitives, which require equal dtypes and broadcast only rank-0
operands and size-1 axes, as JAX's lax does. Transformation rules are attached elsewhere in
the primitive's own module, next to its definition; the registrars attach the one batching
rule every element-wise primitive shares. ``unbroadcast`` is the other half of that
broadcasting: transpose rules use it to sum a cotangent back to an operand's shape.

The compiler asks primitives, never matches their names: the helpers at the end declare how
a primitive lowers (kernel, library call, control flow) and how it simplifies (``x * 1``).
"""

import numpy as np

from ..core import Literal, Primitive, ShapedArray, dtypes, get_aval
from ..core.trace import Tracer, is_python_scalar
from ..core.array import Array, scalar_in_range
from .batch_util import elementwise_batcher


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


def unop(name, impl, kind, result_dtype=None):
    """An element-wise unary primitive; ``result_dtype(dtype)`` when it changes the dtype."""
    prim = Primitive(name)

    def abstract_eval(x):
        check_dtype(name, x, kind)
        if result_dtype is None:
            return x
        return ShapedArray(x.shape, result_dtype(x.dtype), x.weak_type)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    prim.def_batch(elementwise_batcher(prim))
    return prim


def binop(name, impl, kinds, result_dtype=None):
    """An element-wise n-ary primitive taking one dtype kind per operand."""
    prim = Primitive(name)

    def abstract_eval(*avals):
        if len(avals) != len(kinds):
            raise TypeError(f"{name} takes {len(kinds)} operands, got {len(avals)}")
        for i, (a, k) in enumerate(zip(avals, kinds)):
            check_dtype(name, a, k, i if len(kinds) > 1 else None)
        same_dtypes(name, avals)
        shape = broadcast_shapes(name, *(a.shape for a in avals))
        dtype = avals[0].dtype if result_dtype is None else result_dtype(avals[0].dtype)
        return ShapedArray(shape, dtype, all(a.weak_type for a in avals))
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    prim.def_batch(elementwise_batcher(prim))
    return prim


def weak_scalar(x, dtype):
    """A Python scalar as a weakly typed rank-0 Array of ``dtype``."""
    return Array.wrap(np.array(scalar_in_range(x, dtype), dtype), ShapedArray((), dtype, True))


def as_array(x):
    """An argument leaf as an Array or tracer: NumPy values are converted (to the canonical
    dtype), Python scalars become weakly typed rank-0 arrays."""
    if isinstance(x, (Array, Tracer)):
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


def unbroadcast(ct, aval):
    """The cotangent ``ct`` of an element-wise result, summed back to the shape of an operand
    of type ``aval`` that was broadcast into it (a rank-0 operand, or size-1 axes).

    Every element of the operand fed each output element it was broadcast to, so its
    cotangent is the sum of theirs (the transpose of broadcasting is summing).
    """
    ct_shape = get_aval(ct).shape
    if ct_shape == aval.shape:
        return ct
    from .reductions import reduce_sum  # imported here: reductions imports this module
    from .structural import reshape
    if not aval.shape:
        return reduce_sum(ct, tuple(range(len(ct_shape))))
    summed = tuple(i for i, (c, a) in enumerate(zip(ct_shape, aval.shape)) if c != a)
    return reshape(reduce_sum(ct, summed), aval.shape)


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
    places, since each read is one load.
    """

    def __init__(self, kind, rule, identity=None, acc_dtype=None, restrides=False):
        self.kind, self.rule, self.identity, self.acc_dtype = kind, rule, identity, acc_dtype
        self.restrides = restrides


def kernel_elementwise(prim, rule):
    prim.def_lowering("kernel", KernelLowering("elementwise", rule))


def kernel_index(prim, rule, restrides=False):
    prim.def_lowering("kernel", KernelLowering("index", rule, restrides=restrides))


def library_lowering(prim, category):
    """Mark ``prim`` as one a compiled program runs as a call into a library (or back into
    Python) on materialised buffers: ``category`` says what kind of call ("matrix product",
    "sort", "scatter", "host callback"...); each target says how it makes such calls."""
    prim.def_lowering("library", category)


class ControlLowering:
    """What a target needs to compile a control-flow primitive around its sub-programs:
    ``sub_jaxprs(params)`` lists them as (role, ClosedJaxpr), e.g. ``[("body", ...)]``;
    ``operands(params)`` lists the groups of its operands in order as (role, count), the
    last group's count None for "the rest", e.g. ``[("consts", 2), ("carry", None)]``."""

    def __init__(self, sub_jaxprs, operands):
        self.sub_jaxprs, self.operands = sub_jaxprs, operands

    def split(self, params, values):
        """``values`` (one per operand: buffers, variables...) grouped by role."""
        groups, start = {}, 0
        for role, count in self.operands(params):
            end = len(values) if count is None else start + count
            groups[role], start = list(values[start:end]), end
        return groups


def control_lowering(prim, sub_jaxprs, operands):
    """Mark ``prim`` as control flow a target may compile (see ``ControlLowering``)."""
    prim.def_lowering("control", ControlLowering(sub_jaxprs, operands))


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


def identity_simplification(prim, symbol, identity, commutes, exact_for_floats=True):
    """Let the compiler drop ``x <symbol> identity`` (and ``identity <symbol> x`` when the
    operation ``commutes``). ``exact_for_floats=False`` keeps it on floats, where the identity
    does not hold for every value (``-0.0 + 0.0`` is ``+0.0``)."""
    def rule(eqn, ins, producer_of, use_count):
        out = eqn.outvars[0]
        if not exact_for_floats and dtypes.is_inexact(out.aval.dtype):
            return None
        x, y = ins
        if literal_value(y) == identity and same_type(x, out):
            return x, f"x {symbol} {identity}"
        if commutes and literal_value(x) == identity and same_type(y, out):
            return y, f"{identity} {symbol} x"
        return None
    prim.def_rule("simplify", rule)

"""The shape primitives every other rule of lax is written in.

broadcast_in_dim, reshape, transpose and squeeze (with ``broadcast``, ``expand_dims``,
``collapse`` and ``moveaxis`` built on them), and ``reduce_sum``, which is broadcasting's
transpose (and broadcasting is its transpose): the JVP, transpose and batching rules of
every other primitive reshape, broadcast and sum, so these come first in lax and import
nothing of it but ``standard``. ``filled`` makes the constants rules need (ones, zeros) and
``unbroadcast`` sums an element-wise cotangent back to its operand's shape.

All of them are linear, so their JVP applies the primitive to the tangents and their
transpose sends each output element's cotangent back to the element(s) it came from. Their
batching rules leave the batch axis where it is whenever the primitive can work around it.
Reference implementations return arrays that own their memory: an ``Array`` wraps the result
without copying, so a view of an input (which may be a user's writable NumPy array) must not
leak into it. Each section ends with the primitive's kernel lowering: which operand element
each result element reads (``ctx`` is the compiler's builder; see standard.KernelLowering).
"""

import math
import operator

import numpy as np

from ..core import Array, Primitive, ShapedArray, Tracer, canonical_shape, get_aval
from ..interpreters import ad
from ..interpreters.transpose import is_undefined
from ..sharding import refuse_out_sharding
from .standard import (NUMBER, accumulation_dtype, canonical_axes, kernel_index,
                       kernel_reduction, reduction, remembered)

__all__ = ["broadcast_in_dim", "broadcast_in_dim_p", "broadcast", "broadcast_to_rank",
           "reshape", "reshape_p", "transpose", "transpose_p", "squeeze", "squeeze_p",
           "expand_dims", "collapse", "reduce_sum", "reduce_sum_p"]


def canonicalize_axis(axis, ndim):
    """A non-negative axis for an array of rank ``ndim``; ValueError when out of range."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def check_int_tuple(name, arg_name, obj):
    """Check a static param is a sequence of non-negative ints (TypeError naming it)."""
    if not isinstance(obj, (tuple, list, np.ndarray)):
        raise TypeError(f"{name} {arg_name} must be of type tuple/list/ndarray, "
                        f"got {type(obj).__name__}.")
    try:
        values = tuple(operator.index(d) for d in obj)
    except TypeError:
        raise TypeError(f"{name} {arg_name} must have every element be an integer type, "
                        f"got {tuple(type(d).__name__ for d in obj)}.") from None
    if any(d < 0 for d in values):
        raise TypeError(f"{name} {arg_name} must have every element be nonnegative, "
                        f"got {tuple(obj)}.")


def shift_axes(axes, inserted):
    """Axis numbers after a new axis is inserted at position ``inserted``."""
    return tuple(a + (a >= inserted) for a in axes)


def tuple_insert(seq, index, value):
    """``seq`` as a tuple with ``value`` inserted at ``index`` (a batch axis into params)."""
    seq = list(seq)
    seq.insert(index, value)
    return tuple(seq)


def aval_of(x):
    """The type of an operand of a transpose rule, whether it is linear or a value."""
    return x.aval if is_undefined(x) else get_aval(x)


def is_array(x):
    """Arrays and tracers may be returned unchanged by a no-op; other values are bound, so
    that a Python scalar or NumPy array comes back as an nbjax array."""
    return isinstance(x, (Array, Tracer))


# --- broadcast_in_dim ----------------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.pp_hidden = ("shape", "sharding")


@broadcast_in_dim_p.def_abstract_eval
@remembered
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions, sharding=None):
    dims = broadcast_dimensions
    if len(dims) != x.ndim:
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must have length equal to "
                        f"operand ndim; got broadcast_dimensions {dims} for operand ndim "
                        f"{x.ndim}.")
    if any(not 0 <= d < len(shape) for d in dims) or list(dims) != sorted(set(dims)):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be strictly increasing "
                        f"and in range for shape {shape}; got {dims}.")
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(f"broadcast_in_dim operand dimension sizes must either be 1, or be "
                            f"equal to their corresponding dimensions in the target broadcast "
                            f"shape; got operand of shape {x.shape}, target broadcast shape "
                            f"{shape}, broadcast_dimensions {dims}.")
    return ShapedArray(shape, x.dtype, x.weak_type)


@broadcast_in_dim_p.def_impl
def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions, sharding=None):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape).copy()


def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    """Place ``operand``'s axes at ``broadcast_dimensions`` of ``shape`` and replicate."""
    if out_sharding is not None:
        refuse_out_sharding("lax.broadcast_in_dim", out_sharding)
    shape = canonical_shape(shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    aval = get_aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims,
                                   sharding=None)


def _simplify_broadcast_of_broadcast(eqn, ins, producer_of, use_count, value_of):
    """One broadcast from the inner operand: its axes go where the outer one puts them."""
    producer = producer_of(ins[0])
    if producer is None or producer.primitive is not broadcast_in_dim_p:
        return None
    outer = eqn.params["broadcast_dimensions"]
    dims = tuple(outer[d] for d in producer.params["broadcast_dimensions"])
    merged = eqn.replace(invars=[producer.invars[0]],
                         params=dict(eqn.params, broadcast_dimensions=dims))
    return [merged], "broadcast of a broadcast"


broadcast_in_dim_p.def_rule("simplify", _simplify_broadcast_of_broadcast)


def _broadcast_in_dim_batch_rule(axis_data, vals, dims, *, shape, broadcast_dimensions,
                                 sharding=None):
    """The batch axis goes right after the result axis of the operand axis before it, so the
    operand's axes stay in order and nothing needs moving."""
    (x,), (bdim,) = vals, dims
    out_dim = broadcast_dimensions[bdim - 1] + 1 if bdim else 0
    new_dims = shift_axes(broadcast_dimensions, out_dim)
    new_dims = new_dims[:bdim] + (out_dim,) + new_dims[bdim:]
    new_shape = shape[:out_dim] + (axis_data.size,) + shape[out_dim:]
    return broadcast_in_dim(x, new_shape, new_dims), out_dim


def _broadcast_in_dim_transpose_rule(ct, x, *, shape, broadcast_dimensions, sharding=None):
    """Each operand element was copied along the new axes and along its own size-1 axes:
    its cotangent is the sum of its copies' cotangents (then the size-1 axes come back)."""
    in_shape = x.aval.shape
    kept = [d for d, n in zip(broadcast_dimensions, in_shape) if n != 1]
    summed = tuple(a for a in range(len(shape)) if a not in kept)
    if summed:
        ct = reduce_sum(ct, summed)
    return [reshape(ct, in_shape)]


broadcast_in_dim_p.def_batch(_broadcast_in_dim_batch_rule)
ad.deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose_rule)


def _kernel_broadcast_in_dim(ctx, index, read, shapes, *, broadcast_dimensions, **params):
    return read(0, [ctx.iconst(0) if n == 1 else index[d]
                    for n, d in zip(shapes[0], broadcast_dimensions)])


kernel_index(broadcast_in_dim_p, _kernel_broadcast_in_dim, restrides=True,
             views=lambda eqn: eqn.invars[0].aval.size == eqn.outvars[0].aval.size)


def broadcast(operand, sizes, *, out_sharding=None):
    """Add leading axes of ``sizes`` (``lax.broadcast``)."""
    if out_sharding is not None:
        refuse_out_sharding("lax.broadcast", out_sharding)
    aval = get_aval(operand)
    sizes = canonical_shape(sizes)
    return broadcast_in_dim(operand, sizes + aval.shape,
                            range(len(sizes), len(sizes) + aval.ndim))


def broadcast_to_rank(x, rank):
    """Prepend size-1 axes until ``x`` has ``rank`` dimensions."""
    aval = get_aval(x)
    extra = rank - aval.ndim
    if extra <= 0:
        return x
    return broadcast_in_dim(x, (1,) * extra + aval.shape, range(extra, rank))


def expand_dims(array, dimensions):
    """Insert size-1 axes at ``dimensions`` (positions in the result), by broadcast_in_dim."""
    dimensions = tuple(dimensions)
    ndim_out = get_aval(array).ndim + len(dimensions)
    dims = sorted(canonicalize_axis(d, ndim_out) for d in dimensions)
    if len(set(dims)) != len(dims):
        raise ValueError(f"repeated axis in lax.expand_dims: {dimensions}")
    shape = list(get_aval(array).shape)
    for d in dims:
        shape.insert(d, 1)
    kept = [i for i in range(ndim_out) if i not in dims]
    return broadcast_in_dim(array, shape, kept)


# --- reshape -------------------------------------------------------------------------------

reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
@remembered
def _reshape_abstract_eval(x, *, new_sizes, dimensions, sharding=None):
    check_int_tuple("reshape", "new_sizes", new_sizes)
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise TypeError(f"reshape dimensions must be a permutation of operand dimensions, got "
                        f"dimensions {dimensions} for shape {x.shape}.")
    if math.prod(new_sizes) != x.size:
        raise TypeError(f"cannot reshape array of shape {x.shape} (size {x.size}) into shape "
                        f"{tuple(new_sizes)} (size {math.prod(new_sizes)})")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


@reshape_p.def_impl
def _reshape_impl(x, *, new_sizes, dimensions, sharding=None):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes).copy()


def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """Reshape in row-major order, after transposing by ``dimensions`` if given."""
    if out_sharding is not None:
        refuse_out_sharding("lax.reshape", out_sharding)
    new_sizes = canonical_shape(new_sizes, "reshape new_sizes")
    aval = get_aval(operand)
    if dimensions is not None:
        dimensions = tuple(operator.index(d) for d in dimensions)
        if dimensions == tuple(range(aval.ndim)):
            dimensions = None
    if dimensions is None and aval.shape == new_sizes and is_array(operand):
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dimensions, sharding=None)


def _reshape_batch_rule(axis_data, vals, dims, *, new_sizes, dimensions, sharding=None):
    """A row-major reshape keeps the batch axis in place when the axes before it hold as many
    elements as a leading run of ``new_sizes`` (the blocks before and after it reshape
    independently). Otherwise the reshape's own transposition (``dimensions``) brings the
    batch axis to the front."""
    (x,), (bdim,) = vals, dims
    size, shape = axis_data.size, get_aval(x).shape
    if dimensions is None:
        before = math.prod(shape[:bdim])
        split = next((k for k in range(len(new_sizes) + 1)
                      if math.prod(new_sizes[:k]) == before), None)
        if split is not None:
            return reshape(x, new_sizes[:split] + (size,) + new_sizes[split:]), split
        dimensions = range(len(shape) - 1)
    permutation = (bdim,) + shift_axes(dimensions, bdim)
    return reshape(x, (size,) + new_sizes, permutation), 0


def _reshape_transpose_rule(ct, x, *, new_sizes, dimensions, sharding=None):
    """Reshape back; if the operand was transposed first, undo that afterwards."""
    shape = x.aval.shape
    if dimensions is None:
        return [reshape(ct, shape)]
    transposed = reshape(ct, tuple(shape[d] for d in dimensions))
    return [transpose(transposed, _inverse_permutation(dimensions))]


reshape_p.def_batch(_reshape_batch_rule)
ad.deflinear(reshape_p, _reshape_transpose_rule)


def collapse(operand, start_dimension, stop_dimension=None):
    """Merge the axes ``start_dimension:stop_dimension`` into one (``lax.collapse``)."""
    shape = get_aval(operand).shape
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise ValueError(f"Invalid dimension range passed to collapse: "
                         f"{shape}[{start_dimension}:{stop_dimension}]")
    return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def _kernel_reshape_index(ctx, index, out_shape, in_shape):
    """The operand index of a row-major reshape: axes are matched in groups of equal size,
    and within a group the flat position is split again with divisions."""
    in_index = [ctx.iconst(0)] * len(in_shape)
    if 0 in in_shape:
        return in_index
    outs = [(i, n) for i, n in zip(index, out_shape) if n != 1]
    ins = [k for k, n in enumerate(in_shape) if n != 1]
    while outs:
        group_out, group_in = [outs.pop(0)], [ins.pop(0)]
        size_out, size_in = group_out[0][1], in_shape[group_in[0]]
        while size_out != size_in:
            if size_out < size_in:
                group_out.append(outs.pop(0))
                size_out *= group_out[-1][1]
            else:
                group_in.append(ins.pop(0))
                size_in *= in_shape[group_in[-1]]
        flat = ctx.offset([i for i, _ in group_out], [n for _, n in group_out])
        stride = size_in
        for k in group_in:
            stride //= in_shape[k]
            part = ctx.div(flat, ctx.iconst(stride)) if stride != 1 else flat
            in_index[k] = ctx.rem(part, ctx.iconst(in_shape[k])) if k != group_in[0] else part
    return in_index


def _kernel_reshape(ctx, index, read, shapes, *, new_sizes, dimensions, **params):
    in_shape = shapes[0]
    if dimensions is None:
        return read(0, _kernel_reshape_index(ctx, index, new_sizes, in_shape))
    transposed = _kernel_reshape_index(ctx, index, new_sizes, [in_shape[d] for d in dimensions])
    return read(0, [transposed[dimensions.index(k)] for k in range(len(in_shape))])


kernel_index(reshape_p, _kernel_reshape, views=lambda eqn: eqn.params["dimensions"] is None)


def _simplify_reshape_of_reshape(eqn, ins, producer_of, use_count, value_of):
    """One reshape from the inner operand (both in row-major order), or none when it gives
    the operand's shape back."""
    producer = producer_of(ins[0])
    if eqn.params["dimensions"] is not None or producer is None or \
            producer.primitive is not reshape_p or producer.params["dimensions"] is not None:
        return None
    x = producer.invars[0]
    if x.aval.shape == eqn.outvars[0].aval.shape:
        return x, "reshape of a reshape back to its shape"
    return [eqn.replace(invars=[x])], "reshape of a reshape"


reshape_p.def_rule("simplify", _simplify_reshape_of_reshape)


# --- transpose -----------------------------------------------------------------------------

transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
@remembered
def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, "
                        f"got permutation {permutation} for operand shape {x.shape}.")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


@transpose_p.def_impl
def _transpose_impl(x, *, permutation):
    return np.transpose(x, permutation).copy()


def transpose(operand, permutation):
    """Permute the axes: result axis ``i`` is operand axis ``permutation[i]``."""
    permutation = tuple(operator.index(p) for p in permutation)
    if permutation == tuple(range(get_aval(operand).ndim)) and is_array(operand):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def _inverse_permutation(permutation):
    return tuple(int(i) for i in np.argsort(permutation))


def _transpose_batch_rule(axis_data, vals, dims, *, permutation):
    """One transpose that also brings the batch axis to the front: the data moves anyway, and
    the front is where vmap's output (and most rules) want it."""
    (x,), (bdim,) = vals, dims
    return transpose(x, (bdim,) + shift_axes(permutation, bdim)), 0


transpose_p.def_batch(_transpose_batch_rule)
ad.deflinear(transpose_p, lambda ct, x, *, permutation:
             [transpose(ct, _inverse_permutation(permutation))])


kernel_index(transpose_p, lambda ctx, index, read, shapes, *, permutation: read(
    0, [index[permutation.index(k)] for k in range(len(permutation))]), restrides=True)


# --- squeeze -------------------------------------------------------------------------------

squeeze_p = Primitive("squeeze")


@squeeze_p.def_abstract_eval
def _squeeze_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"squeeze dimensions are not unique: {dimensions}")
    if not all(0 <= d < x.ndim for d in dimensions):
        raise ValueError(f"squeeze dimensions outside range [0, ndim): {dimensions}")
    if any(x.shape[d] != 1 for d in dimensions):
        raise ValueError(f"cannot select an axis to squeeze out which has size not equal to "
                         f"one, got shape={x.shape} and dimensions={dimensions}")
    shape = tuple(s for i, s in enumerate(x.shape) if i not in dimensions)
    return ShapedArray(shape, x.dtype, x.weak_type)


@squeeze_p.def_impl
def _squeeze_impl(x, *, dimensions):
    return np.squeeze(x, axis=dimensions).copy()


def _squeeze_batch_rule(axis_data, vals, dims, *, dimensions):
    """Squeeze the same axes, numbered around the batch axis, which stays (shifted left by
    the axes removed before it)."""
    (x,), (bdim,) = vals, dims
    out_dim = bdim - sum(d < bdim for d in dimensions)
    return squeeze(x, shift_axes(dimensions, bdim)), out_dim


squeeze_p.def_batch(_squeeze_batch_rule)
ad.deflinear(squeeze_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])


def squeeze(array, dimensions):
    """Remove the size-1 axes ``dimensions`` (negative axes count from the end)."""
    ndim = get_aval(array).ndim
    dimensions = tuple(sorted(canonicalize_axis(d, ndim) for d in dimensions))
    if not dimensions and is_array(array):
        return array
    return squeeze_p.bind(array, dimensions=dimensions)


def _kernel_squeeze(ctx, index, read, shapes, *, dimensions):
    kept = iter(index)
    return read(0, [ctx.iconst(0) if k in dimensions else next(kept)
                    for k in range(len(shapes[0]))])


kernel_index(squeeze_p, _kernel_squeeze, restrides=True, views=lambda eqn: True)


def moveaxis(x, src, dst):
    """Move axis ``src`` of ``x`` to position ``dst`` (a transpose, or nothing)."""
    if src == dst:
        return x
    perm = [i for i in range(get_aval(x).ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


# --- reduce_sum ----------------------------------------------------------------------------

def _sum(x, axes):
    return np.sum(x, axis=axes, dtype=accumulation_dtype(x.dtype))


reduce_sum_p = reduction("reduce_sum", NUMBER, _sum)


def reduce_sum(operand, axes, *, out_sharding=None):
    """Sum over ``axes`` (non-negative ints)."""
    if out_sharding is not None:
        refuse_out_sharding("lax.reduce_sum", out_sharding)
    return reduce_sum_p.bind(operand, axes=canonical_axes(axes), out_sharding=None)


def kept_axes(ndim, axes):
    """The axes of a rank-``ndim`` operand that a reduction over ``axes`` keeps."""
    return tuple(d for d in range(ndim) if d not in axes)


def _reduce_sum_transpose(ct, x, *, axes, out_sharding=None):
    """Every summed element received the sum's cotangent: broadcast it back."""
    shape = x.aval.shape
    return [broadcast_in_dim(ct, shape, kept_axes(len(shape), axes))]


ad.deflinear(reduce_sum_p, _reduce_sum_transpose)
kernel_reduction(reduce_sum_p, "add", lambda dtype: 0, accumulation_dtype)


# --- constants and cotangents of broadcast operands ----------------------------------------

def filled(aval, value):
    """The Python or NumPy scalar ``value`` in ``aval``'s shape, dtype and weak type: the
    ones and zeros that rules build, as a rank-0 constant broadcast (how JAX stages them)
    rather than a constant array."""
    scalar = Array.wrap(np.array(value).astype(aval.dtype),
                        ShapedArray((), aval.dtype, aval.weak_type))
    return broadcast_in_dim(scalar, aval.shape, ())


ad.register_zeros_maker(lambda aval: filled(aval, 0))


def unbroadcast(ct, aval):
    """The cotangent ``ct`` of an element-wise result, summed back to the shape of an operand
    of type ``aval`` that was broadcast into it (a rank-0 operand, or size-1 axes).

    Every element of the operand fed each output element it was broadcast to, so its
    cotangent is the sum of theirs (the transpose of broadcasting is summing).
    """
    ct_shape = get_aval(ct).shape
    if ct_shape == aval.shape:
        return ct
    if not aval.shape:
        return reduce_sum(ct, tuple(range(len(ct_shape))))
    summed = tuple(i for i, (c, a) in enumerate(zip(ct_shape, aval.shape)) if c != a)
    return reshape(reduce_sum(ct, summed), aval.shape)

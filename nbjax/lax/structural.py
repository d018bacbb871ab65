"""Structural primitives: they move, select or replicate elements without arithmetic.

broadcast_in_dim, reshape, transpose, squeeze, rev, concatenate, pad and iota, each with its
lax wrapper, plus the lax helpers built on them (``expand_dims``, ``full``, ``full_like``,
``collapse``). Every rule of one primitive sits in its own section.

All of them are linear, so their JVP applies the primitive to the tangents and their
transpose sends each output element's cotangent back to the element(s) it came from. Their
batching rules leave the batch axis where it is whenever the primitive can work around it.

Reference implementations return arrays that own their memory: an ``Array`` wraps the result
without copying, so a view of an input (which may be a user's writable NumPy array) must not
leak into it.
"""

import math
import operator

import numpy as np

from ..core import Array, Primitive, ShapedArray, Tracer, canonical_shape, dtypes, get_aval
from ..interpreters import ad
from ..interpreters.transpose import is_undefined
from . import elementwise  # module import: elementwise may import this module too
from .batch_util import bdim_at, broadcast_batch
from .standard import check_dtype, same_dtypes

__all__ = ["broadcast_in_dim", "broadcast_in_dim_p", "broadcast", "broadcast_to_rank",
           "reshape", "reshape_p", "transpose", "transpose_p", "squeeze", "squeeze_p",
           "expand_dims", "rev", "rev_p", "concatenate", "concatenate_p", "pad", "pad_p",
           "iota", "iota_p", "broadcasted_iota", "full", "full_like", "zeros_like_array",
           "zeros_like_shaped_array", "collapse"]


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


def aval_of(x):
    """The type of an operand of a transpose rule, whether it is linear or a value."""
    return x.aval if is_undefined(x) else get_aval(x)


def _is_array(x):
    """Arrays and tracers may be returned unchanged by a no-op; other values are bound, so
    that a Python scalar or NumPy array comes back as an nbjax array."""
    return isinstance(x, (Array, Tracer))


# --- broadcast_in_dim ----------------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.pp_hidden = ("shape", "sharding")


@broadcast_in_dim_p.def_abstract_eval
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


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Place ``operand``'s axes at ``broadcast_dimensions`` of ``shape`` and replicate."""
    shape = canonical_shape(shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    aval = get_aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims,
                                   sharding=None)


def _simplify_broadcast_of_broadcast(eqn, ins, producer_of, use_count):
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
    from .reductions import reduce_sum  # imported here: reductions imports this module
    in_shape = x.aval.shape
    kept = [d for d, n in zip(broadcast_dimensions, in_shape) if n != 1]
    summed = tuple(a for a in range(len(shape)) if a not in kept)
    if summed:
        ct = reduce_sum(ct, summed)
    return [reshape(ct, in_shape)]


broadcast_in_dim_p.def_batch(_broadcast_in_dim_batch_rule)
ad.deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose_rule)


def broadcast(operand, sizes):
    """Add leading axes of ``sizes`` (``lax.broadcast``)."""
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


def reshape(operand, new_sizes, dimensions=None):
    """Reshape in row-major order, after transposing by ``dimensions`` if given."""
    new_sizes = canonical_shape(new_sizes, "reshape new_sizes")
    aval = get_aval(operand)
    if dimensions is not None:
        dimensions = tuple(operator.index(d) for d in dimensions)
        if dimensions == tuple(range(aval.ndim)):
            dimensions = None
    if dimensions is None and aval.shape == new_sizes and _is_array(operand):
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


# --- transpose -----------------------------------------------------------------------------

transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
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
    if permutation == tuple(range(get_aval(operand).ndim)) and _is_array(operand):
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
    if not dimensions and _is_array(array):
        return array
    return squeeze_p.bind(array, dimensions=dimensions)


# --- rev -----------------------------------------------------------------------------------

rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_abstract_eval(x, *, dimensions):
    check_int_tuple("rev", "dimensions", dimensions)
    if len(set(dimensions)) != len(dimensions):
        raise TypeError(f"rev dimensions must be unique, got {dimensions}.")
    if dimensions and max(dimensions) >= x.ndim:
        raise TypeError(f"rev dimensions must all be less than operand ndim, got dimensions "
                        f"{dimensions} for operand ndim {x.ndim}.")
    return x


@rev_p.def_impl
def _rev_impl(x, *, dimensions):
    return np.flip(x, dimensions).copy()


def rev(operand, dimensions):
    """Reverse the order of elements along each of ``dimensions``."""
    return rev_p.bind(operand, dimensions=tuple(operator.index(d) for d in dimensions))


rev_p.def_batch(lambda axis_data, vals, dims, *, dimensions:
                (rev(vals[0], shift_axes(dimensions, dims[0])), dims[0]))
ad.deflinear(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])


# --- concatenate ---------------------------------------------------------------------------

concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*operands, dimension):
    if not operands:
        raise TypeError("concatenate expects at least one operand, got 0.")
    shapes = ", ".join(str(o.shape) for o in operands)
    if len({o.ndim for o in operands}) != 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: "
                        f"got {shapes}.")
    if not 0 <= dimension < operands[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for "
                        f"shapes {shapes}.")
    others = {o.shape[:dimension] + o.shape[dimension + 1:] for o in operands}
    if len(others) != 1:
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions "
                        f"other than the one being concatenated: concatenating along "
                        f"dimension {dimension} for shapes {shapes}.")
    same_dtypes("concatenate", operands)
    shape = list(operands[0].shape)
    shape[dimension] = sum(o.shape[dimension] for o in operands)
    return ShapedArray(shape, operands[0].dtype, all(o.weak_type for o in operands))


@concatenate_p.def_impl
def _concatenate_impl(*operands, dimension):
    return np.concatenate(operands, axis=dimension)


def _concatenate_batch_rule(axis_data, vals, dims, *, dimension):
    """Join along the shifted ``dimension`` at the first batched operand's batch axis; other
    operands are brought there (moved, or broadcast when unbatched)."""
    bdim = next(d for d in dims if d is not None)
    operands = [bdim_at(v, d, bdim, axis_data.size) for v, d in zip(vals, dims)]
    return concatenate(operands, dimension + (dimension >= bdim)), bdim


def _concatenate_transpose_rule(ct, *operands, dimension):
    """Each linear operand's cotangent is its own stretch of ``ct`` along ``dimension``."""
    from .slicing import slice_in_dim  # imported here: slicing imports this module
    cts, start = [], 0
    for x in operands:
        stop = start + aval_of(x).shape[dimension]
        cts.append(slice_in_dim(ct, start, stop, axis=dimension) if is_undefined(x) else None)
        start = stop
    return cts


concatenate_p.def_batch(_concatenate_batch_rule)
ad.deflinear(concatenate_p, _concatenate_transpose_rule)


def concatenate(operands, dimension):
    """Join ``operands`` (equal dtypes and ranks) along ``dimension``."""
    operands = list(operands)
    if not operands:
        raise ValueError("concatenate requires a non-empty sequences of arrays")
    if len(operands) == 1 and _is_array(operands[0]):
        return operands[0]
    return concatenate_p.bind(*operands, dimension=operator.index(dimension))


# --- pad -----------------------------------------------------------------------------------

pad_p = Primitive("pad")


def _padded_size(size, low, high, interior):
    """``low`` + the size after putting ``interior`` values between elements + ``high``."""
    dilated = 0 if size == 0 else size + (size - 1) * interior
    return low + dilated + high


@pad_p.def_abstract_eval
def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.ndim != 0:
        raise ValueError(f"padding_value must be a scalar; got shape {padding_value.shape}")
    if x.dtype != padding_value.dtype:
        raise TypeError(f"pad operand and padding_value must be same dtype: got "
                        f"{x.dtype.name} and {padding_value.dtype.name}.")
    if len(padding_config) != x.ndim:
        raise ValueError(f"length of padding_config must equal the number of axes of operand, "
                         f"got padding_config {padding_config} for operand shape {x.shape}")
    if any(interior < 0 for _, _, interior in padding_config):
        raise ValueError(f"interior padding in padding_config must be nonnegative, got "
                         f"padding_config {padding_config}")
    shape = tuple(_padded_size(d, *cfg) for d, cfg in zip(x.shape, padding_config))
    if any(d < 0 for d in shape):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{shape}, for padding_config {padding_config} and operand shape "
                         f"{x.shape}")
    return ShapedArray(shape, x.dtype, x.weak_type and padding_value.weak_type)


@pad_p.def_impl
def _pad_impl(x, padding_value, *, padding_config):
    # Pad by the non-negative amounts, then crop where low/high are negative.
    grown = [_padded_size(d, max(lo, 0), max(hi, 0), i)
             for d, (lo, hi, i) in zip(x.shape, padding_config)]
    out = np.full(grown, padding_value, dtype=x.dtype)
    place = tuple(slice(max(lo, 0), max(lo, 0) + _padded_size(d, 0, 0, i), i + 1)
                  for d, (lo, _, i) in zip(x.shape, padding_config))
    out[place] = x
    crop = tuple(slice(-min(lo, 0), g + min(hi, 0))
                 for g, (lo, hi, _) in zip(grown, padding_config))
    return out[crop].copy()


def _pad_batch_rule(axis_data, vals, dims, *, padding_config):
    """The batch axis is not padded. A batched padding value cannot be a pad's scalar: pad
    with zeros, then select each member's padding value wherever padding went."""
    (x, padding_value), (x_dim, value_dim) = vals, dims
    if x_dim is None:
        x, x_dim = broadcast_batch(x, axis_data.size, 0), 0
    config = list(padding_config)
    config.insert(x_dim, (0, 0, 0))
    if value_dim is None:
        return pad(x, padding_value, config), x_dim
    padded = pad(x, _zero_scalar(x), config)
    from_operand = pad(full_like(x, True, np.bool_), np.bool_(False), config)
    fill = broadcast_in_dim(padding_value, get_aval(padded).shape, (x_dim,))
    return elementwise.select(from_operand, padded, fill), x_dim


def _unpad(ct, padding_config):
    """The elements of a padded array that came from the operand: crop the low/high padding
    (a pad by its negation, which also puts zeros where the operand itself was cropped),
    then step over the interior padding."""
    if any(lo or hi for lo, hi, _ in padding_config):
        ct = pad(ct, _zero_scalar(ct), [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    if any(interior for _, _, interior in padding_config):
        from .slicing import slice  # imported here: slicing imports this module
        shape = get_aval(ct).shape
        ct = slice(ct, (0,) * len(shape), shape, [i + 1 for _, _, i in padding_config])
    return ct


def _pad_transpose_rule(ct, x, padding_value, *, padding_config):
    """The operand's cotangent is ``ct`` where the operand landed; the padding value was
    copied everywhere else, so its cotangent is the sum of the rest of ``ct``."""
    from .reductions import reduce_sum  # imported here: reductions imports this module
    from_operand = _unpad(ct, padding_config)
    ct_value = None
    if is_undefined(padding_value):
        def total(y):
            return reduce_sum(y, tuple(range(get_aval(y).ndim)))
        ct_value = elementwise.sub(total(ct), total(from_operand))
    return [from_operand if is_undefined(x) else None, ct_value]


def _zero_scalar(x):
    return np.zeros((), get_aval(x).dtype)


pad_p.def_batch(_pad_batch_rule)
ad.deflinear(pad_p, _pad_transpose_rule)


def pad(operand, padding_value, padding_config):
    """Pad each axis by ``(low, high, interior)``; negative low/high crop.

    ``padding_value`` must be a scalar of ``operand``'s dtype (as in JAX; ``jnp.pad``
    converts it).
    """
    config = tuple(tuple(operator.index(v) for v in cfg) for cfg in padding_config)
    if any(len(cfg) != 3 for cfg in config):
        raise ValueError(f"padding_config must be a sequence of (low, high, interior) "
                         f"triples, got {padding_config}")
    return pad_p.bind(operand, padding_value, padding_config=config)


# --- iota ----------------------------------------------------------------------------------

# iota has no operands, so vmap and jvp never see it: it needs no batching or JVP rule.
iota_p = Primitive("iota")

_IOTA_DTYPES = ("integer, floating, complexfloating", lambda d: not dtypes.is_bool(d))


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension, sharding=None):
    check_int_tuple("iota", "shape", shape)
    check_dtype("iota", ShapedArray((), dtype), _IOTA_DTYPES)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}")
    return ShapedArray(shape, dtype)


@iota_p.def_impl
def _iota_impl(*, dtype, shape, dimension, sharding=None):
    line = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(expanded), shape).copy()


def broadcasted_iota(dtype, shape, dimension):
    """An array of ``shape`` whose elements count 0, 1, ... along ``dimension``."""
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=canonical_shape(shape),
                       dimension=operator.index(dimension), sharding=None)


def iota(dtype, size):
    """``[0, 1, ..., size - 1]`` in ``dtype`` (``lax.iota``)."""
    return broadcasted_iota(dtype, (size,), 0)


# --- filled arrays -------------------------------------------------------------------------

def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with the scalar ``fill_value``.

    Without ``dtype`` the result has ``fill_value``'s dtype, weakly typed if it is a Python
    scalar (``full((2,), 1.0)`` is a weak f32 array), as in JAX.
    """
    shape = canonical_shape(shape)
    aval = get_aval(fill_value)
    if aval.shape:
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{aval.shape}.")
    if dtype is None:
        dtype, weak_type = aval.dtype, aval.weak_type
    else:
        dtype, weak_type = dtypes.canonicalize(dtype), False
    return broadcast(elementwise.convert_element_type(fill_value, dtype, weak_type), shape)


def full_like(x, fill_value, dtype=None, shape=None):
    """Like ``full``, with the shape and dtype (and weak type) of ``x`` by default."""
    aval = get_aval(x)
    shape = aval.shape if shape is None else canonical_shape(shape)
    weak_type = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dtypes.canonicalize(dtype)
    return full(shape, elementwise.convert_element_type(fill_value, dtype, weak_type))


def zeros_like_shaped_array(aval):
    """Zeros of ``aval``'s shape, dtype and weak type."""
    return broadcast(elementwise.convert_element_type(0, aval.dtype, aval.weak_type), aval.shape)


def zeros_like_array(x):
    """Zeros with the shape, dtype and weak type of ``x``."""
    return zeros_like_shaped_array(get_aval(x))


# --- kernel lowerings: which operand element each result element reads ----------------------
# (``ctx`` is the compiler's builder; see standard.KernelLowering and compiler/kernel.py.)

from .standard import kernel_index  # noqa: E402


def _kernel_broadcast_in_dim(ctx, index, read, shapes, *, broadcast_dimensions, **params):
    return read(0, [ctx.iconst(0) if n == 1 else index[d]
                    for n, d in zip(shapes[0], broadcast_dimensions)])


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


def _kernel_squeeze(ctx, index, read, shapes, *, dimensions):
    kept = iter(index)
    return read(0, [ctx.iconst(0) if k in dimensions else next(kept)
                    for k in range(len(shapes[0]))])


def _kernel_rev(ctx, index, read, shapes, *, dimensions):
    return read(0, [ctx.sub(ctx.iconst(n - 1), i) if k in dimensions else i
                    for k, (i, n) in enumerate(zip(index, shapes[0]))])


def _kernel_concatenate(ctx, index, read, shapes, *, dimension):
    """Every operand is read (at an index clamped into it) and a select keeps the right one."""
    at, result, start = index[dimension], None, 0
    for k, shape in enumerate(shapes):
        size = shape[dimension]
        if size == 0:
            continue
        local = ctx.min(ctx.max(ctx.sub(at, ctx.iconst(start)), ctx.iconst(0)),
                        ctx.iconst(size - 1))
        value = read(k, index[:dimension] + [local] + index[dimension + 1:])
        result = value if result is None else ctx.select(ctx.lt(at, ctx.iconst(start)),
                                                        result, value)
        start += size
    return read(0, index) if result is None else result  # None: the result is empty


def _kernel_pad(ctx, index, read, shapes, *, padding_config):
    """Operand element ``(i - low) / (interior + 1)`` where that divides exactly and lies
    inside the operand, else the padding value."""
    if 0 in shapes[0]:
        return read(1, [])
    inside, operand_index = None, []
    for i, n, (low, high, interior) in zip(index, shapes[0], padding_config):
        shifted = ctx.sub(i, ctx.iconst(low)) if low else i
        step = interior + 1
        j = ctx.div(shifted, ctx.iconst(step)) if step != 1 else shifted
        checks = []
        if low > 0 or interior:
            checks.append(ctx.ge(shifted, ctx.iconst(0)))
        if interior:
            checks.append(ctx.eq(ctx.rem(shifted, ctx.iconst(step)), ctx.iconst(0)))
        if high > 0 or interior:
            checks.append(ctx.lt(j, ctx.iconst(n)))
        for c in checks:
            inside = c if inside is None else ctx.and_(inside, c)
        operand_index.append(j)
    if inside is None:
        return read(0, operand_index)
    safe = [ctx.select(inside, j, ctx.iconst(0)) for j in operand_index]
    return ctx.select(inside, read(0, safe), read(1, []))


def _kernel_iota(ctx, index, read, shapes, *, dtype, shape, dimension, sharding=None):
    return ctx.convert(index[dimension], dtype)


kernel_index(broadcast_in_dim_p, _kernel_broadcast_in_dim, restrides=True)
kernel_index(reshape_p, _kernel_reshape)
kernel_index(squeeze_p, _kernel_squeeze, restrides=True)
kernel_index(transpose_p, lambda ctx, index, read, shapes, *, permutation: read(
    0, [index[permutation.index(k)] for k in range(len(permutation))]), restrides=True)
kernel_index(rev_p, _kernel_rev, restrides=True)
kernel_index(concatenate_p, _kernel_concatenate)
kernel_index(pad_p, _kernel_pad)
kernel_index(iota_p, _kernel_iota)

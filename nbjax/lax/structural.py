"""Structural primitives: they move, select or replicate elements without arithmetic.

broadcast_in_dim, reshape, transpose, squeeze, rev, concatenate, pad and iota, each with its
lax wrapper, plus the lax helpers built on them (``expand_dims``, ``full``, ``full_like``,
``collapse``). Every rule of one primitive sits in its own section.

Reference implementations return arrays that own their memory: an ``Array`` wraps the result
without copying, so a view of an input (which may be a user's writable NumPy array) must not
leak into it.
"""

import math
import operator

import numpy as np

from ..core import Array, Primitive, ShapedArray, Tracer, canonical_shape, dtypes, get_aval
from . import elementwise  # module import: elementwise may import this module too
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

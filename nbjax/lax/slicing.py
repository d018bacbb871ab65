"""Slicing primitives: static and dynamic slices, and XLA's general gather and scatter.

``slice`` takes static bounds. ``dynamic_slice`` / ``dynamic_update_slice`` take their start
indices as (traceable) scalar operands and, as XLA does, *clamp* them so the whole window lies
inside the operand: a slice always has the requested size.

``gather`` and ``scatter`` are XLA's general forms, from which the NumPy layer builds ``x[idx]``,
``x.at[idx].set(...)``, ``take`` and ``take_along_axis``. The dimension numbers say how the
axes of the operand, of the index array (whose last axis always holds the index vectors) and of
the result (or updates) correspond; see
https://openxla.org/xla/operation_semantics#gather. Out-of-bounds windows follow
``GatherScatterMode``: a window is clamped or filled (gather) and clamped or dropped (scatter) as
a whole, never element by element.
"""

import builtins
import enum
import operator
from typing import NamedTuple

import numpy as np

from ..core import Array, Primitive, ShapedArray, Tracer, canonical_shape, dtypes, get_aval
from ..core.array import to_numpy
from . import elementwise  # module import: the two modules may import each other
from .standard import ANY, NUMBER, check_dtype, same_dtypes
from .structural import canonicalize_axis, check_int_tuple, expand_dims, squeeze

__all__ = ["slice", "slice_p", "slice_in_dim", "index_in_dim",
           "dynamic_slice", "dynamic_slice_p", "dynamic_slice_in_dim", "dynamic_index_in_dim",
           "dynamic_update_slice", "dynamic_update_slice_p", "dynamic_update_slice_in_dim",
           "dynamic_update_index_in_dim",
           "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers",
           "gather", "gather_p", "scatter", "scatter_p", "scatter_add", "scatter_add_p",
           "scatter_sub", "scatter_sub_p", "scatter_mul", "scatter_mul_p",
           "scatter_min", "scatter_min_p", "scatter_max", "scatter_max_p"]


# --- slice ---------------------------------------------------------------------------------

slice_p = Primitive("slice")


def _strided_size(size, stride):
    return 0 if size == 0 else (size - 1) // stride + 1


@slice_p.def_abstract_eval
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    check_int_tuple("slice", "start_indices", start_indices)
    check_int_tuple("slice", "limit_indices", limit_indices)
    if len(start_indices) != x.ndim:
        raise TypeError(f"slice start_indices must have length equal to the number of "
                        f"dimensions of the operand, got indices {start_indices} for operand "
                        f"shape {x.shape}.")
    if len(limit_indices) != len(start_indices):
        raise TypeError(f"slice limit_indices must have the same length as start_indices, got "
                        f"start_indices {start_indices} and limit_indices {limit_indices}.")
    if any(lim > d for lim, d in zip(limit_indices, x.shape)):
        raise TypeError(f"slice limit_indices must be less than or equal to operand shape, got "
                        f"limit_indices {limit_indices} for operand shape {x.shape}.")
    if any(lim < s for s, lim in zip(start_indices, limit_indices)):
        raise TypeError(f"slice limit_indices must be greater than or equal to start_indices, "
                        f"got start_indices {start_indices} and limit_indices {limit_indices}.")
    sizes = [lim - s for s, lim in zip(start_indices, limit_indices)]
    if strides is not None:
        check_int_tuple("slice", "strides", strides)
        if len(strides) != x.ndim:
            raise TypeError(f"slice strides must have length equal to the number of dimensions "
                            f"of the operand, got strides {strides} for operand shape "
                            f"{x.shape}.")
        if any(s == 0 for s in strides):
            raise TypeError(f"slice strides must be positive, got {strides}")
        sizes = [_strided_size(n, s) for n, s in zip(sizes, strides)]
    return ShapedArray(sizes, x.dtype, x.weak_type)


@slice_p.def_impl
def _slice_impl(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(*b) for b in zip(start_indices, limit_indices, strides))].copy()


def slice(operand, start_indices, limit_indices, strides=None):
    """``operand[start:limit:stride]`` along every axis, with static bounds (``lax.slice``)."""
    def ints(seq):
        return tuple(operator.index(i) for i in seq)
    return slice_p.bind(operand, start_indices=ints(start_indices),
                        limit_indices=ints(limit_indices),
                        strides=None if strides is None else ints(strides))


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """``lax.slice`` along one ``axis``; ``None`` and negative bounds mean what they do in
    Python (but bounds are not clipped to the axis)."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    size = shape[axis]
    start = 0 if start_index is None else operator.index(start_index)
    limit = size if limit_index is None else operator.index(limit_index)
    starts[axis] = start + size if start < 0 else start
    limits[axis] = limit + size if limit < 0 else limit
    strides[axis] = operator.index(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """``operand[..., index]`` along ``axis`` for a static ``index`` (IndexError if out of
    range); ``keepdims`` keeps the axis with size 1."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    index = operator.index(index)
    wrapped = index + shape[axis] if index < 0 else index
    if not 0 <= wrapped < shape[axis]:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size "
                         f"{shape[axis]}")
    result = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
    return result if keepdims else squeeze(result, (axis,))


# --- dynamic_slice and dynamic_update_slice -------------------------------------------------

def _check_start_indices(name, x, start_indices):
    if len(start_indices) != x.ndim:
        raise TypeError(f"{name} takes one start index per operand dimension, got "
                        f"{len(start_indices)} start indices for operand shape {x.shape}.")
    if any(i.ndim != 0 for i in start_indices):
        raise TypeError(f"start_indices arguments to {name} must be scalars, got indices of "
                        f"shapes {[i.shape for i in start_indices]}")
    if any(not dtypes.is_int(i.dtype) or i.dtype != start_indices[0].dtype
           for i in start_indices):
        raise TypeError(f"index arguments to {name} must be integers of the same type, got: "
                        f"{', '.join(i.dtype.name for i in start_indices)}")


def _clamped_window(shape, start_indices, sizes):
    """The slices of a window of ``sizes`` at ``start_indices``, each start clamped into
    ``[0, dim - size]`` so that the window fits, as XLA does."""
    starts = [min(max(int(i), 0), d - n) for i, d, n in zip(start_indices, shape, sizes)]
    return tuple(builtins.slice(s, s + n) for s, n in zip(starts, sizes))


dynamic_slice_p = Primitive("dynamic_slice")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(x, *start_indices, slice_sizes):
    _check_start_indices("dynamic_slice", x, start_indices)
    check_int_tuple("dynamic_slice", "slice_sizes", slice_sizes)
    if len(slice_sizes) != x.ndim or any(n > d for n, d in zip(slice_sizes, x.shape)):
        raise TypeError(f"dynamic_slice slice_sizes must be less than or equal to operand "
                        f"shape, got slice_sizes {slice_sizes} for operand shape {x.shape}.")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


@dynamic_slice_p.def_impl
def _dynamic_slice_impl(x, *start_indices, slice_sizes):
    return x[_clamped_window(x.shape, start_indices, slice_sizes)].copy()


dynamic_update_slice_p = Primitive("dynamic_update_slice")


@dynamic_update_slice_p.def_abstract_eval
def _dynamic_update_slice_abstract_eval(x, update, *start_indices):
    if update.ndim != x.ndim:
        raise TypeError(f"dynamic_update_slice update must have the same rank as operand, got "
                        f"update shape {update.shape} for operand shape {x.shape}.")
    _check_start_indices("dynamic_update_slice", x, start_indices)
    if any(u > d for u, d in zip(update.shape, x.shape)):
        raise TypeError(f"dynamic_update_slice update shape must be smaller than operand "
                        f"shape, got update shape {update.shape} for operand shape {x.shape}.")
    same_dtypes("dynamic_update_slice", [x, update])
    weak = all(a.weak_type for a in (x, update, *start_indices))
    return ShapedArray(x.shape, x.dtype, weak)


@dynamic_update_slice_p.def_impl
def _dynamic_update_slice_impl(x, update, *start_indices):
    out = x.copy()
    out[_clamped_window(x.shape, start_indices, update.shape)] = update
    return out


def _wrap_negative_index(index, size, allow_negative):
    """Count a negative start index from the end of its axis, as JAX's wrappers do (the
    primitives themselves only clamp). Static indices are wrapped now; traced ones by staged
    ``select_n(index < 0, index, index + size)``."""
    aval = get_aval(index)
    if not dtypes.is_int(aval.dtype) or dtypes.is_unsigned_int(aval.dtype):
        return index  # unsigned cannot be negative; a non-integer is rejected by the rule
    if isinstance(index, Tracer):
        if not allow_negative:
            return index
        return elementwise.select_n(elementwise.lt(index, 0), index,
                                    elementwise.add(index, size))
    value = int(to_numpy(index))
    if value < 0:
        if not allow_negative:
            raise ValueError(f"Index {value} is out of bounds for dimension {size} if "
                             "allow_negative_indices=False")
        value += size
    return Array.wrap(np.array(value, aval.dtype), aval)


def _dynamic_slice_indices(operand, start_indices, allow_negative_indices):
    """One scalar start index per axis of ``operand``, negative ones wrapped."""
    shape = get_aval(operand).shape
    if isinstance(start_indices, (Array, Tracer, np.ndarray)):
        n = get_aval(start_indices).shape
        if len(n) != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got {n}")
        start_indices = [index_in_dim(start_indices, i, keepdims=False) for i in range(n[0])]
    start_indices = list(start_indices)
    if len(start_indices) != len(shape):
        raise ValueError(f"Length of slice indices must match number of operand dimensions "
                         f"({len(start_indices)} vs {shape})")
    allow = allow_negative_indices
    if isinstance(allow, bool):
        allow = [allow] * len(shape)
    return [_wrap_negative_index(i, d, a) for i, d, a in zip(start_indices, shape, allow)]


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """The window of ``slice_sizes`` at ``start_indices`` (one scalar per axis, may be
    traced). Starts are clamped so that the window fits inside ``operand``."""
    starts = _dynamic_slice_indices(operand, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *starts,
                                slice_sizes=canonical_shape(slice_sizes, "slice_sizes"))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """``operand`` with the window at ``start_indices`` replaced by ``update``; starts are
    clamped so that the whole update fits."""
    starts = _dynamic_slice_indices(operand, start_indices, allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def _zero_index_like(index):
    """A 0 start index of ``index``'s dtype (a Python 0 for a Python int, as JAX does)."""
    if isinstance(index, int):
        return 0
    return np.zeros((), get_aval(index).dtype)


def _one_axis_starts(operand, index, axis, allow_negative_indices):
    """Start indices that are 0 except ``index`` on ``axis``, and whether each may be
    negative."""
    ndim = get_aval(operand).ndim
    axis = canonicalize_axis(axis, ndim)
    starts = [_zero_index_like(index)] * ndim
    starts[axis] = index
    allow = [False] * ndim
    allow[axis] = allow_negative_indices
    return axis, starts, allow


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices=True):
    """``dynamic_slice`` along one ``axis``: ``operand[..., start:start + slice_size]``."""
    axis, starts, allow = _one_axis_starts(operand, start_index, axis, allow_negative_indices)
    sizes = list(get_aval(operand).shape)
    sizes[axis] = operator.index(slice_size)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *,
                         allow_negative_indices=True):
    """``operand[..., index]`` along ``axis`` for a (possibly traced) ``index``."""
    axis = canonicalize_axis(axis, get_aval(operand).ndim)
    result = dynamic_slice_in_dim(operand, index, 1, axis,
                                  allow_negative_indices=allow_negative_indices)
    return result if keepdims else squeeze(result, (axis,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *,
                                allow_negative_indices=True):
    """``dynamic_update_slice`` with a start index on one ``axis`` only."""
    _, starts, allow = _one_axis_starts(operand, start_index, axis, allow_negative_indices)
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow)


def dynamic_update_index_in_dim(operand, update, index, axis, *, allow_negative_indices=True):
    """Replace ``operand[..., index]`` along ``axis``; ``update`` may lack that axis."""
    axis = canonicalize_axis(axis, get_aval(operand).ndim)
    if get_aval(update).ndim == get_aval(operand).ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# --- dimension numbers and modes -----------------------------------------------------------

class GatherDimensionNumbers(NamedTuple):
    """How gather's operand, indices and output axes correspond.

    - ``offset_dims``: output axes that hold the window (sorted); the other output axes are the
      batch axes of the indices, in order.
    - ``collapsed_slice_dims``: operand axes of window size 1 that do not appear in the output.
    - ``start_index_map``: the operand axis each component of an index vector starts.
    - ``operand_batching_dims`` / ``start_indices_batching_dims``: paired axes of the operand
      and of the indices that are iterated together (the i-th index batch reads the i-th
      operand batch), as in ``take_along_axis``.

    The index vectors are always on the last axis of the indices.
    """
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """How scatter's operand, indices and updates axes correspond (gather's mirror image).

    - ``update_window_dims``: axes of the updates that hold a window (sorted); the others
      follow the batch axes of the indices, in order.
    - ``inserted_window_dims``: operand axes of window size 1 absent from the updates.
    - ``scatter_dims_to_operand_dims``: the operand axis each index vector component starts.
    - ``operand_batching_dims`` / ``scatter_indices_batching_dims``: paired batch axes.
    """
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


class GatherScatterMode(enum.Enum):
    """What happens to a window that does not lie inside the operand.

    - ``CLIP``: its start is clamped so that the whole window is in bounds.
    - ``FILL_OR_DROP``: a gathered window is replaced, entirely, by ``fill_value``; a scattered
      window is dropped entirely.
    - ``PROMISE_IN_BOUNDS``: the caller promises in-bounds indices; otherwise gathers clamp
      and scatters drop (what XLA does).
    """
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(mode):
        """A mode from an enum value, ``'clip'``, ``'fill'``/``'drop'``,
        ``'promise_in_bounds'`` or None (FILL_OR_DROP)."""
        if isinstance(mode, GatherScatterMode):
            return mode
        names = {"clip": GatherScatterMode.CLIP, None: GatherScatterMode.FILL_OR_DROP,
                 "fill": GatherScatterMode.FILL_OR_DROP, "drop": GatherScatterMode.FILL_OR_DROP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}
        if mode not in names:
            raise ValueError(f'Unknown gather mode "{mode}"')
        return names[mode]


def _canonical_dnums(cls, dimension_numbers):
    """Dimension numbers as ``cls`` of int tuples, so that they are hashable params."""
    if not isinstance(dimension_numbers, cls):
        raise TypeError(f"dimension_numbers must be a {cls.__name__}, got "
                        f"{type(dimension_numbers).__name__}")
    return cls(*(tuple(operator.index(d) for d in field) for field in dimension_numbers))


# --- shape checks shared by gather and scatter ---------------------------------------------

def _check_dims(op, name, dims, rank, must_sort=True):
    """``dims`` are distinct axes in ``[0, rank)`` (and sorted if ``must_sort``)."""
    if must_sort and list(dims) != sorted(dims):
        raise TypeError(f"{name} in {op} op must be sorted; got {dims}")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name} in {op} op must not repeat; got: {dims}.")
    for d in dims:
        if not 0 <= d < rank:
            raise TypeError(f"Invalid {name} set in {op} op; valid range is [0, {rank}); "
                            f"got: {d}.")


def _check_disjoint(op, name1, dims1, name2, dims2):
    if set(dims1) & set(dims2):
        raise TypeError(f"{name1} and {name2} in {op} op must be disjoint; got: {dims1} and "
                        f"{dims2}.")


def _check_indices(op, indices, index_map, index_map_name, operand_rank):
    if not dtypes.is_int(indices.dtype):
        raise ValueError(f"{op} indices must have an integer type, got {indices.dtype.name}")
    if indices.ndim == 0:
        raise TypeError(f"{op} indices must have rank >= 1 (their last axis holds the index "
                        f"vectors), got a scalar")
    if len(index_map) != indices.shape[-1]:
        raise TypeError(f"{op} op has {len(index_map)} elements in {index_map_name} and the "
                        f"bound of the index vector dimension of indices is "
                        f"{indices.shape[-1]}. These two numbers must be equal.")
    _check_dims(op, index_map_name, index_map, operand_rank, must_sort=False)


def _check_batching_dims(op, operand, indices, operand_dims, indices_dims, indices_name):
    """Operand and index batching axes: valid, paired one to one, of equal sizes."""
    _check_dims(op, "operand_batching_dims", operand_dims, operand.ndim)
    _check_dims(op, indices_name, indices_dims, indices.ndim - 1, must_sort=False)
    if len(operand_dims) != len(indices_dims):
        raise TypeError(f"{op} op requires equal numbers of operand_batching_dims and "
                        f"{indices_name}, got {operand_dims} and {indices_dims}.")
    operand_sizes = tuple(operand.shape[d] for d in operand_dims)
    indices_sizes = tuple(indices.shape[d] for d in indices_dims)
    if operand_sizes != indices_sizes:
        raise TypeError(f"{op} op requires operand batching dimensions and indices batching "
                        f"dimensions to have the same shape, got {operand_sizes} and "
                        f"{indices_sizes}.")


# --- reference semantics shared by gather and scatter --------------------------------------

def _start_vectors(indices, rank, index_map, operand_batching_dims, indices_batching_dims):
    """Each index vector as a full start position in the operand: shape (*batch, rank).

    Axes named in ``index_map`` take the index vector's components; an operand batching axis
    takes the position along its paired batch axis of the indices; other axes start at 0.
    """
    if indices.dtype == np.uint64:  # keep huge values huge (out of bounds) in int64
        indices = np.minimum(indices, np.iinfo(np.int64).max)
    indices = indices.astype(np.int64)
    batch_shape = indices.shape[:-1]
    starts = np.zeros(batch_shape + (rank,), np.int64)
    starts[..., list(index_map)] = indices
    for operand_dim, batch_dim in zip(operand_batching_dims, indices_batching_dims):
        position = [1] * len(batch_shape)
        position[batch_dim] = batch_shape[batch_dim]
        starts[..., operand_dim] = np.arange(batch_shape[batch_dim]).reshape(position)
    return starts


def _last_starts(shape, window_sizes, dims):
    """The largest start along each axis of ``dims`` at which a window still fits."""
    return np.array([shape[d] - window_sizes[d] for d in dims], np.int64)


def _window_fits(starts, shape, window_sizes, dims):
    """Per index vector: does the window lie inside the operand along every axis of
    ``dims``? (The other axes start at 0 or at a batch position, always in bounds.)"""
    chosen = starts[..., list(dims)]
    return np.all((chosen >= 0) & (chosen <= _last_starts(shape, window_sizes, dims)), axis=-1)


def _clamp_starts(starts, shape, window_sizes, dims):
    """Starts moved into ``[0, dim - window]`` along ``dims``, so every window fits."""
    starts = starts.copy()
    starts[..., list(dims)] = np.clip(starts[..., list(dims)], 0,
                                      _last_starts(shape, window_sizes, dims))
    return starts


def _flat_window_indices(starts, shape, window_dims, window_shape):
    """Flat (row-major) operand positions of every window element: (*batch, *window_shape).

    ``window_dims`` are the operand axes the window spans (in order, sizes ``window_shape``);
    the window covers one element along every other axis.
    """
    strides = np.array([int(np.prod(shape[d + 1:])) for d in range(len(shape))], np.int64)
    n_batch, n_window = starts.ndim - 1, len(window_dims)
    flat = (starts @ strides).reshape(starts.shape[:-1] + (1,) * n_window)
    for k, d in enumerate(window_dims):
        along = [1] * (n_batch + n_window)
        along[n_batch + k] = window_shape[k]
        flat = flat + (np.arange(window_shape[k]) * strides[d]).reshape(along)
    return flat


def _window_dims(rank, *excluded):
    """The operand axes a window spans: all but the collapsed/inserted and batching ones."""
    return [d for d in range(rank) if not any(d in dims for dims in excluded)]


# --- gather --------------------------------------------------------------------------------

gather_p = Primitive("gather")


@gather_p.def_abstract_eval
def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes,
                          unique_indices, indices_are_sorted, mode, fill_value):
    dn = dimension_numbers
    _check_indices("gather", indices, dn.start_index_map, "start_index_map", operand.ndim)
    out_rank = len(dn.offset_dims) + indices.ndim - 1
    _check_dims("gather", "offset_dims", dn.offset_dims, out_rank)
    _check_dims("gather", "collapsed_slice_dims", dn.collapsed_slice_dims, operand.ndim)
    _check_batching_dims("gather", operand, indices, dn.operand_batching_dims,
                         dn.start_indices_batching_dims, "start_indices_batching_dims")
    _check_disjoint("gather", "collapsed_slice_dims", dn.collapsed_slice_dims,
                    "operand_batching_dims", dn.operand_batching_dims)
    _check_disjoint("gather", "start_index_map", dn.start_index_map,
                    "operand_batching_dims", dn.operand_batching_dims)
    check_int_tuple("gather", "slice_sizes", slice_sizes)
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"Gather op must have one slice size for every input dimension; got: "
                        f"len(slice_sizes)={len(slice_sizes)}, input_shape.rank={operand.ndim}")
    window_dims = _window_dims(operand.ndim, dn.collapsed_slice_dims, dn.operand_batching_dims)
    if len(window_dims) != len(dn.offset_dims):
        raise TypeError(f"All components of the offset index in a gather op must either be a "
                        f"offset dimension or explicitly collapsed/batching; got "
                        f"len(slice_sizes)={len(slice_sizes)}, offset_dims={dn.offset_dims}, "
                        f"collapsed_slice_dims={dn.collapsed_slice_dims}, "
                        f"operand_batching_dims={dn.operand_batching_dims}.")
    if indices.size:
        for i, (size, dim) in enumerate(zip(slice_sizes, operand.shape)):
            if size > dim:
                raise TypeError(f"Slice size at index {i} in gather op is out of range, must "
                                f"be within [0, {dim} + 1), got {size}.")
    for d in dn.collapsed_slice_dims + dn.operand_batching_dims:
        if slice_sizes[d] != 1:
            raise TypeError(f"Gather op can only collapse slice dims or have operand batching "
                            f"dims with bound 1, but bound is {slice_sizes[d]} for index {d}.")
    batch = iter(indices.shape[:-1])
    window = iter(slice_sizes[d] for d in window_dims)
    shape = [next(window) if i in dn.offset_dims else next(batch) for i in range(out_rank)]
    return ShapedArray(shape, operand.dtype, operand.weak_type)


@gather_p.def_impl
def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                 indices_are_sorted, mode, fill_value):
    dn = dimension_numbers
    starts = _start_vectors(indices, operand.ndim, dn.start_index_map,
                            dn.operand_batching_dims, dn.start_indices_batching_dims)
    fits = _window_fits(starts, operand.shape, slice_sizes, dn.start_index_map)
    starts = _clamp_starts(starts, operand.shape, slice_sizes, dn.start_index_map)
    window_dims = _window_dims(operand.ndim, dn.collapsed_slice_dims, dn.operand_batching_dims)
    window_shape = tuple(slice_sizes[d] for d in window_dims)
    out = operand.reshape(-1)[_flat_window_indices(starts, operand.shape, window_dims,
                                                   window_shape)]
    if mode == GatherScatterMode.FILL_OR_DROP:
        if fill_value is None:
            fill_value = default_fill_value(operand.dtype)
        fill = np.asarray(fill_value).astype(operand.dtype)
        out = np.where(fits.reshape(fits.shape + (1,) * len(window_shape)), out, fill)
    n_batch = starts.ndim - 1
    return np.moveaxis(out, range(n_batch, n_batch + len(window_shape)), dn.offset_dims).copy()


def default_fill_value(dtype):
    """What an out-of-bounds FILL_OR_DROP gather returns unless told: NaN for inexact types,
    the minimum of a signed integer type, the maximum of an unsigned one, True for bool."""
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtypes.is_signed_int(dtype):
        return int(np.iinfo(dtype).min)
    if dtypes.is_unsigned_int(dtype):
        return int(np.iinfo(dtype).max)
    return True


def _static_scalar(value):
    """A fill value as a hashable Python scalar (it is a param, so it cannot be traced)."""
    return value if isinstance(value, (bool, int, float, complex)) else np.asarray(value).item()


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA's gather: for each index vector in ``start_indices`` (last axis), the window of
    ``slice_sizes`` starting there, arranged as ``dimension_numbers`` says.

    ``mode`` (default: PROMISE_IN_BOUNDS, as in JAX, which clamps) says what an out-of-bounds
    window gives; under FILL_OR_DROP it is ``fill_value`` (default: ``default_fill_value``).
    """
    if mode is None:
        mode = GatherScatterMode.PROMISE_IN_BOUNDS
    mode = GatherScatterMode.from_any(mode)
    if mode == GatherScatterMode.FILL_OR_DROP:
        dtype = get_aval(operand).dtype
        fill_value = default_fill_value(dtype) if fill_value is None else \
            _static_scalar(fill_value)
    else:
        fill_value = None
    return gather_p.bind(operand, start_indices,
                         dimension_numbers=_canonical_dnums(GatherDimensionNumbers,
                                                            dimension_numbers),
                         slice_sizes=canonical_shape(slice_sizes, "slice_sizes"),
                         unique_indices=bool(unique_indices),
                         indices_are_sorted=bool(indices_are_sorted), mode=mode,
                         fill_value=fill_value)


# --- scatter -------------------------------------------------------------------------------

def _scatter_abstract_eval(operand, indices, updates, *, dimension_numbers,
                           indices_are_sorted, unique_indices, mode, update_jaxpr,
                           update_consts):
    dn = dimension_numbers
    _check_indices("scatter", indices, dn.scatter_dims_to_operand_dims,
                   "scatter_dims_to_operand_dims", operand.ndim)
    same_dtypes("scatter", [operand, updates])
    n_batch = indices.ndim - 1
    if updates.ndim != n_batch + len(dn.update_window_dims):
        raise TypeError(f"Updates tensor must be of rank "
                        f"{n_batch + len(dn.update_window_dims)}; got {updates.ndim}.")
    _check_dims("scatter", "update_window_dims", dn.update_window_dims, updates.ndim)
    _check_dims("scatter", "inserted_window_dims", dn.inserted_window_dims, operand.ndim)
    _check_batching_dims("scatter", operand, indices, dn.operand_batching_dims,
                         dn.scatter_indices_batching_dims, "scatter_indices_batching_dims")
    _check_disjoint("scatter", "inserted_window_dims", dn.inserted_window_dims,
                    "operand_batching_dims", dn.operand_batching_dims)
    _check_disjoint("scatter", "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims,
                    "operand_batching_dims", dn.operand_batching_dims)
    window_dims = _window_dims(operand.ndim, dn.inserted_window_dims, dn.operand_batching_dims)
    if len(window_dims) != len(dn.update_window_dims):
        raise TypeError(f"Scatter op has window of size "
                        f"{operand.ndim - len(window_dims) + len(dn.update_window_dims)}; "
                        f"doesn't match operand of rank {operand.ndim}.")
    for operand_dim, update_dim in zip(window_dims, dn.update_window_dims):
        if updates.shape[update_dim] > operand.shape[operand_dim]:
            raise TypeError(f"Bounds of the window dimensions of updates must not exceed the "
                            f"bounds of the corresponding dimensions of operand. For dimension "
                            f"{update_dim}, updates bound is {updates.shape[update_dim]}, "
                            f"operand bound is {operand.shape[operand_dim]}.")
    update_batch = tuple(s for i, s in enumerate(updates.shape) if i not in dn.update_window_dims)
    if update_batch != indices.shape[:-1]:
        raise TypeError(f"Bounds of the scatter dimensions of updates must be the same as the "
                        f"bounds of the corresponding dimensions of scatter indices; got "
                        f"updates shape {updates.shape} with update_window_dims "
                        f"{dn.update_window_dims} for indices shape {indices.shape}.")
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type)


def _set(flat_out, positions, values):
    """Store ``values``; where positions repeat, which update wins is unspecified (as in
    XLA; NumPy keeps the last)."""
    flat_out[positions] = values


def _scatter_impl(combine, operand, indices, updates, *, dimension_numbers, mode, **_):
    dn = dimension_numbers
    n_batch = indices.ndim - 1
    # Updates as (*batch, *window): move the window axes last, keeping both orders.
    updates = np.moveaxis(updates, dn.update_window_dims,
                          range(n_batch, n_batch + len(dn.update_window_dims)))
    window_dims = _window_dims(operand.ndim, dn.inserted_window_dims, dn.operand_batching_dims)
    window_shape = updates.shape[n_batch:]
    window_sizes = [1] * operand.ndim
    for d, size in zip(window_dims, window_shape):
        window_sizes[d] = size
    starts = _start_vectors(indices, operand.ndim, dn.scatter_dims_to_operand_dims,
                            dn.operand_batching_dims, dn.scatter_indices_batching_dims)
    index_dims = dn.scatter_dims_to_operand_dims
    if mode == GatherScatterMode.CLIP:
        starts = _clamp_starts(starts, operand.shape, window_sizes, index_dims)
    else:  # FILL_OR_DROP and PROMISE_IN_BOUNDS drop every window that does not fit
        fits = _window_fits(starts, operand.shape, window_sizes, index_dims)
        starts, updates = starts[fits], updates[fits]
    out = operand.copy()
    positions = _flat_window_indices(starts, operand.shape, window_dims, window_shape)
    with np.errstate(all="ignore"):  # NaN and overflow propagate silently, as in XLA
        combine(out.reshape(-1), positions, updates)
    return out


def _scatter_primitive(name, combine, kind=ANY):
    """A scatter primitive that combines the operand's old values with updates by
    ``combine(flat_operand, positions, updates)`` (in place, repeated positions allowed),
    for operands of dtype ``kind``."""
    prim = Primitive(name)

    def abstract_eval(operand, indices, updates, **params):
        check_dtype(name, operand, kind)
        return _scatter_abstract_eval(operand, indices, updates, **params)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(lambda *args, **params: _scatter_impl(combine, *args, **params))
    return prim


# Arithmetic scatters reject bool, as lax.add/sub/mul do; set, min and max accept any dtype.
scatter_p = _scatter_primitive("scatter", _set)
scatter_add_p = _scatter_primitive("scatter-add", np.add.at, NUMBER)
scatter_sub_p = _scatter_primitive("scatter-sub", np.subtract.at, NUMBER)
scatter_mul_p = _scatter_primitive("scatter-mul", np.multiply.at, NUMBER)
scatter_min_p = _scatter_primitive("scatter-min", np.minimum.at)
scatter_max_p = _scatter_primitive("scatter-max", np.maximum.at)


def _scatter_wrapper(prim, doc):
    def scatter_fn(operand, scatter_indices, updates, dimension_numbers, *,
                   indices_are_sorted=False, unique_indices=False, mode=None):
        return prim.bind(operand, scatter_indices, updates,
                         dimension_numbers=_canonical_dnums(ScatterDimensionNumbers,
                                                            dimension_numbers),
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices),
                         mode=GatherScatterMode.from_any(mode),
                         update_jaxpr=None, update_consts=())
    scatter_fn.__name__ = prim.name.replace("-", "_")
    scatter_fn.__doc__ = doc + """

    Each update window (axes ``update_window_dims`` of ``updates``) goes to the operand window
    starting at its index vector (last axis of ``scatter_indices``), as ``dimension_numbers``
    says. ``mode`` (default FILL_OR_DROP, as in JAX) drops windows that do not fit inside
    the operand, or clamps them (CLIP)."""
    return scatter_fn


scatter = _scatter_wrapper(scatter_p, "XLA's scatter: ``operand`` with windows replaced by "
                                      "``updates`` (which of repeated updates wins is "
                                      "unspecified).")
scatter_add = _scatter_wrapper(scatter_add_p, "Scatter that adds the updates (repeated "
                                              "indices accumulate).")
scatter_sub = _scatter_wrapper(scatter_sub_p, "Scatter that subtracts the updates.")
scatter_mul = _scatter_wrapper(scatter_mul_p, "Scatter that multiplies by the updates.")
scatter_min = _scatter_wrapper(scatter_min_p, "Scatter that keeps the minimum of the old "
                                              "value and every update.")
scatter_max = _scatter_wrapper(scatter_max_p, "Scatter that keeps the maximum of the old "
                                              "value and every update.")

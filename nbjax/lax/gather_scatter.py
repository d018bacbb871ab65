"""XLA's general gather and scatter, from which the NumPy layer builds ``x[idx]``,
``x.at[idx].set(...)``, ``take`` and ``take_along_axis``.

The dimension numbers say how the axes of the operand, of the index array (whose last axis
always holds the index vectors) and of the result (or updates) correspond; see
https://openxla.org/xla/operation_semantics#gather. Out-of-bounds windows follow
``GatherScatterMode``: a window is clamped or filled (gather) and clamped or dropped
(scatter) as a whole, never element by element.

Autodiff: a gather is linear in the operand and transposes to a scatter-add of its
cotangent back where it was read; a scatter-add transposes to the gather of its cotangent.
Indices are integers: never differentiated. Batching: the batch axis of the operand becomes
one more (whole) window axis, and batched indices become ``operand_batching_dims`` /
``*_indices_batching_dims`` pairs, so batch axes stay where they are.
"""

import enum
import operator
from typing import NamedTuple

import numpy as np

from ..core import Literal, Primitive, ShapedArray, Var, canonical_shape, dtypes, get_aval
from ..interpreters import ad
from ..interpreters.transpose import is_undefined
from . import elementwise, shapes, structural
from .batch_util import bdim_at, broadcast_batch, ndim
from .shapes import (aval_of, broadcast_in_dim, check_int_tuple, moveaxis, reshape, shift_axes,
                     tuple_insert)
from .standard import ANY, NUMBER, check_dtype, kernel_index, library_lowering, same_dtypes

__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers",
           "gather", "gather_p", "scatter", "scatter_p", "scatter_add", "scatter_add_p",
           "scatter_sub", "scatter_sub_p", "scatter_mul", "scatter_mul_p",
           "scatter_min", "scatter_min_p", "scatter_max", "scatter_max_p"]


def _zeros(shape, dtype):
    return structural.full(shape, 0, dtype)


def linear_jvp(prim, *linear):
    """The JVP of a primitive linear in its operands at positions ``linear`` (the others are
    integer indices): the primitive applied to their tangents, zeros instantiated."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if all(isinstance(tangents[i], ad.Zero) for i in linear):
            return out, ad.Zero.like(out)
        args = [ad.instantiate(t) if i in linear else p
                for i, (p, t) in enumerate(zip(primals, tangents))]
        return out, prim.bind(*args, **params)
    prim.tangent_from_operands = True
    return rule


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


def _scatter_dnums_of(dnums):
    """The scatter that puts back what a gather with ``dnums`` took (the fields correspond
    one to one, in order: windows, collapsed/inserted axes, index map, batching axes)."""
    return ScatterDimensionNumbers(*dnums)


def _gather_dnums_of(dnums):
    """The gather that reads what a scatter with ``dnums`` wrote."""
    return GatherDimensionNumbers(*dnums)


def _new_axis_position(axes, count, current=None, rank=None):
    """Where a new axis can go so that exactly ``count`` of the sorted ``axes`` come before
    it: ``current`` (its position in an array of ``rank`` other axes) if that qualifies, else
    the first such position."""
    low = axes[count - 1] + 1 if count else 0
    if current is None:
        return low
    high = axes[count] if count < len(axes) else rank
    return current if low <= current <= high else low


def _paired_batching_dims(operand_dims, indices_dims, operand_dim, indices_dim):
    """Batching axis pairs with the new pair ``(operand_dim, indices_dim)`` added (after
    shifting the old ones around it), sorted by operand axis as the primitives require."""
    pairs = sorted(zip(shift_axes(operand_dims, operand_dim) + (operand_dim,),
                       shift_axes(indices_dims, indices_dim) + (indices_dim,)))
    return tuple(o for o, _ in pairs), tuple(i for _, i in pairs)


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
        indices = np.minimum(indices, dtypes.iinfo(np.int64).max)
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
    the minimum of a signed integer type, the maximum of an unsigned one, True for bool;
    for an extended dtype, its physical one's in each word (a key of all-ones words)."""
    if isinstance(dtype, dtypes.ExtendedDType):
        dtype = dtype.physical_dtype
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtypes.is_signed_int(dtype):
        return int(dtypes.iinfo(dtype).min)
    if dtypes.is_unsigned_int(dtype):
        return int(dtypes.iinfo(dtype).max)
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


def _gather_jvp(g, operand, indices, *, mode, fill_value, **params):
    """Gather is linear in the operand; a filled (out-of-bounds) window has zero tangent."""
    fill_value = 0 if mode == GatherScatterMode.FILL_OR_DROP else None
    return gather_p.bind(g, indices, mode=mode, fill_value=fill_value, **params)


def _gather_transpose_rule(ct, operand, indices, *, dimension_numbers, slice_sizes,
                           unique_indices, indices_are_sorted, mode, fill_value):
    """Each gathered element's cotangent goes back where it was read; repeated reads add."""
    zeros = _zeros(operand.aval.shape, operand.aval.dtype)
    return [scatter_add(zeros, indices, ct, _scatter_dnums_of(dimension_numbers),
                        indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                        mode=mode), None]


def gather_batch_rule(axis_data, vals, dims, *, dimension_numbers, slice_sizes,
                       unique_indices, indices_are_sorted, mode, fill_value):
    """A batched operand's batch axis becomes one more window axis, taken whole (if the
    indices are unbatched) or a batching axis paired with the indices' batch axis; batched
    indices give the output one more batch axis. Nothing moves, except a batch axis on the
    indices' last axis, which must hold the index vectors."""
    (operand, indices), (o_dim, i_dim) = vals, dims
    dn = dimension_numbers
    params = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode, fill_value=fill_value)
    if i_dim is None:
        window_dims = _window_dims(ndim(operand) - 1, dn.collapsed_slice_dims,
                                   dn.operand_batching_dims)
        rank = sum(d < o_dim for d in window_dims)  # o_dim's place among the window axes
        out_dim = _new_axis_position(dn.offset_dims, rank)
        dn = GatherDimensionNumbers(
            offset_dims=tuple_insert(shift_axes(dn.offset_dims, out_dim), rank, out_dim),
            collapsed_slice_dims=shift_axes(dn.collapsed_slice_dims, o_dim),
            start_index_map=shift_axes(dn.start_index_map, o_dim),
            operand_batching_dims=shift_axes(dn.operand_batching_dims, o_dim),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        slice_sizes = tuple_insert(slice_sizes, o_dim, axis_data.size)
        return gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=slice_sizes,
                             **params), out_dim
    if i_dim == ndim(indices) - 1:
        indices, i_dim = moveaxis(indices, i_dim, 0), 0
    out_rank = len(dn.offset_dims) + ndim(indices) - 2
    out_batch_dims = [d for d in range(out_rank) if d not in dn.offset_dims]
    out_dim = _new_axis_position(out_batch_dims, i_dim)
    offset_dims = shift_axes(dn.offset_dims, out_dim)
    if o_dim is None:
        # Every member reads the same operand, so its indices may repeat across members.
        dn = dn._replace(offset_dims=offset_dims, start_indices_batching_dims=shift_axes(
            dn.start_indices_batching_dims, i_dim))
        params.update(indices_are_sorted=False, unique_indices=False)
        return gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=slice_sizes,
                             **params), out_dim
    operand_batching, indices_batching = _paired_batching_dims(
        dn.operand_batching_dims, dn.start_indices_batching_dims, o_dim, i_dim)
    dn = GatherDimensionNumbers(
        offset_dims=offset_dims,
        collapsed_slice_dims=shift_axes(dn.collapsed_slice_dims, o_dim),
        start_index_map=shift_axes(dn.start_index_map, o_dim),
        operand_batching_dims=operand_batching, start_indices_batching_dims=indices_batching)
    return gather_p.bind(operand, indices, dimension_numbers=dn,
                         slice_sizes=tuple_insert(slice_sizes, o_dim, 1), **params), out_dim


ad.defjvp(gather_p, _gather_jvp, None)
gather_p.def_transpose(_gather_transpose_rule)
gather_p.def_batch(gather_batch_rule)


def _kernel_gather(ctx, index, read, shapes, *, dimension_numbers, slice_sizes, mode,
                   fill_value, **params):
    """Output element ``index`` of XLA's gather: its batch position picks an index vector
    (a load from operand 1), whose components are the window's start along
    ``start_index_map``, clamped so the window fits (or, under FILL_OR_DROP, the fill value
    where it does not); the window position adds along the window axes. The semantics
    are those of _gather_impl."""
    dn = dimension_numbers
    operand_shape = shapes[0]
    batch = [i for d, i in enumerate(index) if d not in dn.offset_dims]
    window = [index[d] for d in dn.offset_dims]
    starts = [ctx.iconst(0)] * len(operand_shape)
    fits = None
    for k, d in enumerate(dn.start_index_map):
        raw = read(1, batch + [ctx.iconst(k)])
        if raw.dtype == np.uint64:  # huge values stay huge (out of bounds) in int64
            raw = ctx.min(raw, ctx.const(dtypes.iinfo(np.int64).max, np.uint64))
        start = ctx.convert(raw, dtypes.int64)
        last = ctx.iconst(operand_shape[d] - slice_sizes[d])
        inside = ctx.and_(ctx.ge(start, ctx.iconst(0)), ctx.le(start, last))
        fits = inside if fits is None else ctx.and_(fits, inside)
        starts[d] = ctx.min(ctx.max(start, ctx.iconst(0)), last)
    for operand_dim, batch_dim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        starts[operand_dim] = batch[batch_dim]
    excluded = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_dims = [d for d in range(len(operand_shape)) if d not in excluded]
    position = list(starts)
    for d, w in zip(window_dims, window):
        position[d] = ctx.iadd(starts[d], w)
    value = read(0, position)
    if mode == GatherScatterMode.FILL_OR_DROP and fits is not None:
        value = ctx.select(fits, value, ctx.const(fill_value, value.dtype))
    return value


kernel_index(gather_p, _kernel_gather, gathers=True)


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


def _scatter_window_sizes(operand_rank, updates_shape, dimension_numbers):
    """The size of an update window along every operand axis (1 on inserted and batching
    axes): also the slice sizes of the gather that reads the window back."""
    dn = dimension_numbers
    sizes = [1] * operand_rank
    window_dims = _window_dims(operand_rank, dn.inserted_window_dims, dn.operand_batching_dims)
    for d, u in zip(window_dims, dn.update_window_dims):
        sizes[d] = updates_shape[u]
    return tuple(sizes)


def _scatter_impl(combine, operand, indices, updates, *, dimension_numbers, mode, **_):
    dn = dimension_numbers
    n_batch = indices.ndim - 1
    window_sizes = _scatter_window_sizes(operand.ndim, updates.shape, dn)
    # Updates as (*batch, *window): move the window axes last, keeping both orders.
    updates = np.moveaxis(updates, dn.update_window_dims,
                          range(n_batch, n_batch + len(dn.update_window_dims)))
    window_dims = _window_dims(operand.ndim, dn.inserted_window_dims, dn.operand_batching_dims)
    window_shape = updates.shape[n_batch:]
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


def _scatter_primitive(name, combine, combine_op, kind=ANY):
    """A scatter primitive that combines the operand's old values with updates by
    ``combine(flat_operand, positions, updates)`` (in place, repeated positions allowed),
    for operands of dtype ``kind``. ``combine_op`` is the same per element, as the kernel
    builder's binary op (``"add"``, ``"min"``...; None: the update replaces the old value):
    its ``"scatter"`` lowering, for a target that writes a scatter's loop itself. A dtype
    it refuses is, in JAX's words, refused by that op (JAX traces it as the combiner)."""
    prim = Primitive(name)
    library_lowering(prim, "scatter")
    prim.def_lowering("scatter", combine_op)

    def abstract_eval(operand, indices, updates, **params):
        check_dtype(combine_op, operand, kind, 0)
        return _scatter_abstract_eval(operand, indices, updates, **params)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(lambda *args, **params: _scatter_impl(combine, *args, **params))
    prim.def_batch(_scatter_batch_rule(prim))
    return prim


def _scatter_batch_rule(prim):
    """The mirror image of gather's batching rule. The output is the operand, so an
    unbatched operand is broadcast; the updates' batch axis must then sit among their window
    axes (unbatched indices) or their scatter axes (batched indices) where the operand's
    batch axis does among its own: it stays there if it does, else it is moved there."""
    def rule(axis_data, vals, dims, *, dimension_numbers, **params):
        (operand, indices, updates), (o_dim, i_dim, u_dim) = vals, dims
        dn, size = dimension_numbers, axis_data.size
        if o_dim is None:
            operand, o_dim = broadcast_batch(operand, size, 0), 0
        updates_rank = ndim(updates) - (u_dim is not None)
        if i_dim is None:
            window_dims = _window_dims(ndim(operand) - 1, dn.inserted_window_dims,
                                       dn.operand_batching_dims)
            rank = sum(d < o_dim for d in window_dims)
            u_pos = _new_axis_position(dn.update_window_dims, rank, u_dim, updates_rank)
            dn = dn._replace(
                update_window_dims=tuple_insert(shift_axes(dn.update_window_dims, u_pos), rank,
                                           u_pos),
                inserted_window_dims=shift_axes(dn.inserted_window_dims, o_dim),
                scatter_dims_to_operand_dims=shift_axes(dn.scatter_dims_to_operand_dims,
                                                        o_dim),
                operand_batching_dims=shift_axes(dn.operand_batching_dims, o_dim))
        else:
            if i_dim == ndim(indices) - 1:
                indices, i_dim = moveaxis(indices, i_dim, 0), 0
            scatter_axes = [d for d in range(updates_rank) if d not in dn.update_window_dims]
            u_pos = _new_axis_position(scatter_axes, i_dim, u_dim, updates_rank)
            operand_batching, indices_batching = _paired_batching_dims(
                dn.operand_batching_dims, dn.scatter_indices_batching_dims, o_dim, i_dim)
            dn = ScatterDimensionNumbers(
                update_window_dims=shift_axes(dn.update_window_dims, u_pos),
                inserted_window_dims=shift_axes(dn.inserted_window_dims, o_dim),
                scatter_dims_to_operand_dims=shift_axes(dn.scatter_dims_to_operand_dims,
                                                        o_dim),
                operand_batching_dims=operand_batching,
                scatter_indices_batching_dims=indices_batching)
        updates = bdim_at(updates, u_dim, u_pos, size)
        return prim.bind(operand, indices, updates, dimension_numbers=dn, **params), o_dim
    return rule


# Arithmetic scatters reject bool, as lax.add/sub/mul do; set, min and max accept any dtype.
scatter_p = _scatter_primitive("scatter", _set, None)
scatter_add_p = _scatter_primitive("scatter-add", np.add.at, "add", NUMBER)
scatter_sub_p = _scatter_primitive("scatter-sub", np.subtract.at, "sub", NUMBER)
scatter_mul_p = _scatter_primitive("scatter-mul", np.multiply.at, "mul", NUMBER)
scatter_min_p = _scatter_primitive("scatter-min", np.minimum.at, "min")
scatter_max_p = _scatter_primitive("scatter-max", np.maximum.at, "max")


# What pads an update out to the operand's shape so that combining changes nothing
# outside its window: x + -0.0 is x for every float (x + 0.0 turns -0.0 into +0.0), and
# both parts of a complex number
_NEUTRAL = {"add": lambda dtype: complex(-0.0, -0.0) if dtypes.is_complex(dtype)
            else -0.0 if dtypes.is_inexact(dtype) else 0,
            "sub": lambda dtype: 0, "mul": lambda dtype: 1,
            "min": lambda dtype: np.inf if dtypes.is_inexact(dtype) else np.iinfo(dtype).max,
            "max": lambda dtype: -np.inf if dtypes.is_inexact(dtype) else np.iinfo(dtype).min}
_COMBINE = {"add": elementwise.add_p, "sub": elementwise.sub_p, "mul": elementwise.mul_p,
            "min": elementwise.min_p, "max": elementwise.max_p}


def _simplify_one_window(eqn, ins, producer_of, use_count, value_of):
    """A scatter of one window at starts the program knows, inside the operand
    (``x.at[0].set(0.0)``, ``v.at[1:-1, 1:-1].add(u)``: indices that tracing made
    constants), as the element-wise operation it is: the operand combined with the update
    padded to its shape by a value that changes nothing (``_NEUTRAL``), or, for a set, the
    padded update where a padded mask says so. A compiler then fuses it with its
    neighbours, where a scatter is a library step of its own (a heat equation's boundary
    rows, set every step; a wave equation's interior, updated every step)."""
    operand, indices, updates = ins
    dn, dtype = eqn.params["dimension_numbers"], operand.aval.dtype
    kind = eqn.primitive.lowerings["scatter"]
    starts = value_of(indices)
    if starts is None or starts.size != len(dn.scatter_dims_to_operand_dims) or \
            dn.operand_batching_dims or eqn.params["update_jaxpr"] is not None or \
            dtypes.is_complex(dtype) and kind != "add" or \
            kind is not None and not (dtypes.is_inexact(dtype) or dtypes.is_int(dtype)):
        return None
    rank, start = operand.aval.ndim, [0] * operand.aval.ndim
    for axis, value in zip(dn.scatter_dims_to_operand_dims, starts.reshape(-1)):
        start[axis] = int(value)
    sizes = iter(updates.aval.shape[a] for a in dn.update_window_dims)
    window = tuple(1 if d in dn.inserted_window_dims else next(sizes) for d in range(rank))
    config = tuple((lo, n - lo - w, 0) for lo, w, n in zip(start, window, operand.aval.shape))
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        return None  # (a window that does not fit: dropped or clamped, left to the scatter)
    out = eqn.outvars[0]
    shaped, padded = Var(ShapedArray(window, dtype)), Var(ShapedArray(out.aval.shape, dtype))
    eqns = [eqn.replace(primitive=shapes.reshape_p, invars=[updates], outvars=[shaped],
                        params={"new_sizes": window, "dimensions": None, "sharding": None}),
            _padded(eqn, shaped, padded, 0 if kind is None else _NEUTRAL[kind](dtype), config)]
    if kind is not None:
        return eqns + [eqn.replace(primitive=_COMBINE[kind], invars=[operand, padded],
                                   outvars=[out], params={})], \
            f"a scatter-{kind} of one window as the {kind} of the padded update"
    true, mask = (Var(ShapedArray(shape, np.dtype(bool))) for shape in (window,
                                                                       out.aval.shape))
    eqns += [eqn.replace(primitive=shapes.broadcast_in_dim_p, invars=[_literal(True)],
                         outvars=[true], params={"shape": window, "broadcast_dimensions": (),
                                                 "sharding": None}),
             _padded(eqn, true, mask, False, config),
             eqn.replace(primitive=elementwise.select_n_p, invars=[mask, operand, padded],
                         outvars=[out], params={})]
    return eqns, "a scatter of one window as a select of the padded update"


def _padded(eqn, x, out, value, config):
    """An equation (with ``eqn``'s source) padding ``x`` into ``out`` with ``value``."""
    return eqn.replace(primitive=structural.pad_p, invars=[x, _literal(value, x.aval.dtype)],
                       outvars=[out], params={"padding_config": config})


def _literal(value, dtype=np.dtype(bool)):
    return Literal(np.array(value, dtype), ShapedArray((), dtype))


for _prim in (scatter_p, scatter_add_p, scatter_sub_p, scatter_mul_p, scatter_min_p,
              scatter_max_p):
    _prim.def_rule("simplify", _simplify_one_window)


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


# --- scatter: autodiff ---------------------------------------------------------------------

def _gather_windows(x, indices, updates_shape, dimension_numbers, mode):
    """The inverse of a scatter: the windows of the operand-shaped ``x`` that updates of
    ``updates_shape`` went to, arranged like the updates (a dropped window reads as 0)."""
    sizes = _scatter_window_sizes(get_aval(x).ndim, updates_shape, dimension_numbers)
    return gather(x, indices, _gather_dnums_of(dimension_numbers), sizes, mode=mode,
                  fill_value=0)


def _scatter_add_transpose_rule(negate):
    """scatter-add/sub: the operand's cotangent is ``ct``; each update's is the cotangent
    where it was added (negated for scatter-sub)."""
    def rule(ct, operand, indices, updates, *, dimension_numbers, mode, **params):
        ct_updates = None
        if is_undefined(updates):
            ct_updates = _gather_windows(ct, indices, updates.aval.shape, dimension_numbers,
                                         mode)
            if negate:
                ct_updates = elementwise.neg(ct_updates)
        return [ct if is_undefined(operand) else None, None, ct_updates]
    return rule


scatter_add_p.def_jvp(linear_jvp(scatter_add_p, 0, 2))
scatter_add_p.def_transpose(_scatter_add_transpose_rule(negate=False))
scatter_sub_p.def_jvp(linear_jvp(scatter_sub_p, 0, 2))
scatter_sub_p.def_transpose(_scatter_add_transpose_rule(negate=True))


def _require_unique(what, unique_indices):
    if not unique_indices:
        raise NotImplementedError(f"{what} are only implemented if `unique_indices=True`")


def _scatter_mul_jvp_updates(g, operand, indices, updates, **params):
    """``d(x * y)/dy = x`` at the scattered positions. With repeated indices each factor's
    derivative would involve the others; JAX supports unique indices only, and so do we."""
    _require_unique("scatter_mul gradients", params["unique_indices"])
    spread = scatter_add_p.bind(_zeros(get_aval(operand).shape, get_aval(operand).dtype),
                                indices, g, **params)
    return elementwise.mul(operand, spread)


def _scatter_mul_transpose_rule(ct, operand, indices, updates, *, dimension_numbers, mode,
                                unique_indices, **params):
    """Linear in the operand (each element is multiplied by its updates), or, with unique
    indices and a known operand, in the updates."""
    params.update(dimension_numbers=dimension_numbers, mode=mode,
                  unique_indices=unique_indices)
    ct_operand = ct_updates = None
    if is_undefined(operand):
        ct_operand = scatter_mul_p.bind(ct, indices, updates, **params)
    if is_undefined(updates):
        _require_unique("scatter_mul gradients", unique_indices)
        ct_updates = _gather_windows(elementwise.mul(ct, operand), indices, updates.aval.shape,
                                     dimension_numbers, mode)
    return [ct_operand, None, ct_updates]


ad.defjvp(scatter_mul_p, lambda g, x, i, y, **params: scatter_mul_p.bind(g, i, y, **params),
          None, _scatter_mul_jvp_updates)
scatter_mul_p.def_transpose(_scatter_mul_transpose_rule)


def _scatter_extremum_jvp(prim):
    """scatter-min/max: each output element takes the tangent of the value that won, the
    operand's or an update's; where several of them tie, their tangents are averaged (as
    JAX does, and as reduce_max splits ties)."""
    def rule(primals, tangents, *, dimension_numbers, mode, **params):
        operand, indices, updates = primals
        params.update(dimension_numbers=dimension_numbers, mode=mode)
        out = prim.bind(operand, indices, updates, **params)
        g_operand, g_updates = ad.instantiate(tangents[0]), ad.instantiate(tangents[2])
        shape = get_aval(updates).shape

        def at_updates(x):  # the values of an operand-shaped x where each update went
            return _gather_windows(x, indices, shape, dimension_numbers, mode)

        def count(flags):  # per update: how many of the updates to its position are flagged
            zeros = structural.zeros_like_array(operand)
            return at_updates(scatter_add_p.bind(zeros, indices, flags, **params))

        ones, zeros = structural.full_like(updates, 1), structural.zeros_like_array(updates)
        result = at_updates(out)
        update_won = elementwise.eq(updates, result)
        operand_kept = elementwise.eq(at_updates(operand), result)
        winners = count(elementwise.select(update_won, ones, zeros))
        ties = elementwise.select(operand_kept, elementwise.add(winners, ones), winners)
        update_share = elementwise.select(update_won, elementwise.div(ones, ties), zeros)
        operand_share = elementwise.select(operand_kept, elementwise.div(ones, ties), zeros)
        # The operand's tangent is added once per update to its position: spread the change
        # from 1 (its whole tangent, already in g_operand) to its share over them.
        per_update_operand = elementwise.div(elementwise.sub(operand_share, ones), count(ones))
        tangent_updates = elementwise.add(elementwise.mul(at_updates(g_operand),
                                                          per_update_operand),
                                          elementwise.mul(g_updates, update_share))
        return out, scatter_add_p.bind(g_operand, indices, tangent_updates, **params)
    return rule


scatter_min_p.def_jvp(_scatter_extremum_jvp(scatter_min_p))
scatter_max_p.def_jvp(_scatter_extremum_jvp(scatter_max_p))


def _scatter_jvp(primals, tangents, *, unique_indices, **params):
    """scatter (set) is linear in the operand and the updates together. With repeated
    indices, which update wins is unspecified; so (as JAX does) scatter a distinct id per
    update, read back which id won each position, keep only the winning updates and the
    operand elements nobody overwrote, and add them up with scatter-add: the same values,
    and a tangent computed the same way."""
    operand, indices, updates = primals
    g_operand, g_updates = ad.instantiate(tangents[0]), ad.instantiate(tangents[2])
    if unique_indices:
        params.update(unique_indices=True)
        return (scatter_p.bind(operand, indices, updates, **params),
                scatter_p.bind(g_operand, indices, g_updates, **params))
    dn, mode = params["dimension_numbers"], params["mode"]
    params.update(unique_indices=False)
    shape = get_aval(updates).shape
    scatter_axes = [d for d in range(len(shape)) if d not in dn.update_window_dims]
    id_shape = tuple(shape[d] for d in scatter_axes)
    ids = reshape(structural.iota(np.int32, int(np.prod(id_shape))), id_shape)
    ids = broadcast_in_dim(elementwise.add(ids, np.int32(1)), shape, scatter_axes)
    winner = scatter_p.bind(_zeros(get_aval(operand).shape, np.int32), indices, ids, **params)
    operand_kept = elementwise.eq(winner, np.int32(0))
    update_won = elementwise.eq(ids, _gather_windows(winner, indices, shape, dn, mode))

    def masked(keep, x):
        return elementwise.select(keep, x, structural.zeros_like_array(x))

    def combine(x, u):
        return scatter_add_p.bind(masked(operand_kept, x), indices, masked(update_won, u),
                                  **params)
    return combine(operand, updates), combine(g_operand, g_updates)


def _scatter_transpose_rule(ct, operand, indices, updates, *, dimension_numbers, mode,
                            unique_indices, **params):
    """With unique indices: the operand's cotangent is ``ct`` with the overwritten elements
    zeroed; each update's is the cotangent where it went. (With repeated indices the JVP
    above stages scatter-adds instead, so reverse mode never transposes a scatter.)"""
    _require_unique("scatter transposes", unique_indices)
    updates_shape = aval_of(updates).shape
    ct_operand = ct_updates = None
    if is_undefined(operand):
        ct_operand = scatter_p.bind(ct, indices, _zeros(updates_shape, get_aval(ct).dtype),
                                    dimension_numbers=dimension_numbers, mode=mode,
                                    unique_indices=True, **params)
    if is_undefined(updates):
        ct_updates = _gather_windows(ct, indices, updates_shape, dimension_numbers, mode)
    return [ct_operand, None, ct_updates]


scatter_p.def_jvp(_scatter_jvp)
scatter_p.def_transpose(_scatter_transpose_rule)

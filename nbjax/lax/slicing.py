"""Dynamic slices: ``dynamic_slice`` / ``dynamic_update_slice`` take their start indices as
(traceable) scalar operands and, as XLA does, *clamp* them so the whole window lies inside
the operand: a slice always has the requested size.

Both are linear in the operand (and the update), and transpose to each other. Batching with
the same start for every member slices the batch axis whole; batched start indices put each
member's window elsewhere, which is a gather (a scatter for dynamic_update_slice).
"""

import builtins
import operator

import numpy as np

from ..core import Array, Primitive, ShapedArray, Tracer, canonical_shape, dtypes, get_aval
from ..core.array import to_numpy
from ..interpreters.transpose import is_undefined
from . import elementwise, structural
from .batch_util import bdim_at
from .gather_scatter import (GatherDimensionNumbers, GatherScatterMode,
                             ScatterDimensionNumbers, gather_batch_rule, linear_jvp, scatter_p)
from .shapes import aval_of, broadcast_in_dim, canonicalize_axis, check_int_tuple, expand_dims, \
    squeeze, tuple_insert
from .standard import kernel_index, library_lowering, same_dtypes, scalar_like
from .structural import index_in_dim

__all__ = ["dynamic_slice", "dynamic_slice_p", "dynamic_slice_in_dim", "dynamic_index_in_dim",
           "dynamic_update_slice", "dynamic_update_slice_p", "dynamic_update_slice_in_dim",
           "dynamic_update_index_in_dim"]


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
    if not allow_negative and not isinstance(index, (int, np.integer)):
        return index  # as in JAX, only a Python or NumPy integer is checked; arrays are clamped
    if isinstance(index, Tracer):
        return elementwise.select_n(elementwise.lt(index, scalar_like(index, 0)), index,
                                    elementwise.add(index, scalar_like(index, size)))
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


def _dynamic_slice_transpose_rule(ct, x, *start_indices, slice_sizes):
    """The cotangent goes back into the window it was read from, in zeros."""
    zeros = structural.full(x.aval.shape, 0, x.aval.dtype)
    return ([dynamic_update_slice_p.bind(zeros, ct, *start_indices)]
            + [None] * len(start_indices))


def _index_zero(start_indices):
    """A 0 start index for a new axis, of the other start indices' dtype."""
    dtype = get_aval(start_indices[0]).dtype if start_indices else np.int32
    return np.zeros((), dtype)


def _stack_start_indices(start_indices, dims, size):
    """Batched scalar start indices as one ``(size, n)`` array of index vectors (batch axis
    0), for the gather or scatter that replaces a batched dynamic slice."""
    columns = [broadcast_in_dim(i, (size, 1), () if d is None else (0,))
               for i, d in zip(start_indices, dims)]
    return structural.concatenate(columns, 1)


def _dynamic_slice_batch_rule(axis_data, vals, dims, *, slice_sizes):
    """With the same start for every member, slice the batch axis whole too; with batched
    starts each member's window is elsewhere: that is a gather (clamped like the slice)."""
    (x, *starts), (x_dim, *start_dims) = vals, dims
    if all(d is None for d in start_dims):
        starts = tuple_insert(starts, x_dim, _index_zero(starts))
        return dynamic_slice_p.bind(x, *starts, slice_sizes=tuple_insert(slice_sizes, x_dim,
                                                                     axis_data.size)), x_dim
    axes = tuple(range(len(slice_sizes)))
    dnums = GatherDimensionNumbers(offset_dims=axes, collapsed_slice_dims=(),
                                   start_index_map=axes)
    indices = _stack_start_indices(starts, start_dims, axis_data.size)
    return gather_batch_rule(axis_data, (x, indices), (x_dim, 0), dimension_numbers=dnums,
                              slice_sizes=slice_sizes, unique_indices=True,
                              indices_are_sorted=True, mode=GatherScatterMode.CLIP,
                              fill_value=None)


dynamic_slice_p.def_jvp(linear_jvp(dynamic_slice_p, 0))
dynamic_slice_p.def_transpose(_dynamic_slice_transpose_rule)
dynamic_slice_p.def_batch(_dynamic_slice_batch_rule)


def _dynamic_update_slice_transpose_rule(ct, x, update, *start_indices):
    """The operand's cotangent is ``ct`` with the overwritten window zeroed; the update's is
    that window of ``ct``."""
    update_shape = aval_of(update).shape
    ct_x = ct_update = None
    if is_undefined(x):
        zeros = structural.full(update_shape, 0, get_aval(ct).dtype)
        ct_x = dynamic_update_slice_p.bind(ct, zeros, *start_indices)
    if is_undefined(update):
        ct_update = dynamic_slice_p.bind(ct, *start_indices, slice_sizes=update_shape)
    return [ct_x, ct_update] + [None] * len(start_indices)


def _dynamic_update_slice_batch_rule(axis_data, vals, dims):
    """With the same start for every member, the update covers the batch axis whole; with
    batched starts it is a scatter (clamped like the update)."""
    (x, update, *starts), (x_dim, update_dim, *start_dims) = vals, dims
    size = axis_data.size
    if all(d is None for d in start_dims):
        bdim = update_dim if x_dim is None else x_dim
        x, update = bdim_at(x, x_dim, bdim, size), bdim_at(update, update_dim, bdim, size)
        starts = tuple_insert(starts, bdim, _index_zero(starts))
        return dynamic_update_slice_p.bind(x, update, *starts), bdim
    axes = tuple(range(len(starts)))
    dnums = ScatterDimensionNumbers(update_window_dims=axes, inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=axes)
    indices = _stack_start_indices(starts, start_dims, size)
    return scatter_p.rule("batch")(axis_data, (x, indices, update), (x_dim, 0, update_dim),
                                   dimension_numbers=dnums, indices_are_sorted=True,
                                   unique_indices=True, mode=GatherScatterMode.CLIP,
                                   update_jaxpr=None, update_consts=())


dynamic_update_slice_p.def_jvp(linear_jvp(dynamic_update_slice_p, 0, 1))
dynamic_update_slice_p.def_transpose(_dynamic_update_slice_transpose_rule)
dynamic_update_slice_p.def_batch(_dynamic_update_slice_batch_rule)


def _kernel_window_starts(ctx, read, shape, sizes):
    """The runtime start indices (operands 1...), clamped so the window fits (as XLA)."""
    return [ctx.min(ctx.max(ctx.convert(read(k + 1, []), dtypes.int64), ctx.iconst(0)),
                    ctx.iconst(d - n)) for k, (d, n) in enumerate(zip(shape, sizes))]


def _kernel_dynamic_slice(ctx, index, read, shapes, *, slice_sizes):
    starts = _kernel_window_starts(ctx, read, shapes[0], slice_sizes)
    return read(0, [ctx.add(i, s) for i, s in zip(index, starts)])


def _kernel_dynamic_update_slice(ctx, index, read, shapes, **params):
    """The update where the index falls in its (clamped) window, else the operand."""
    starts = _kernel_window_starts(ctx, lambda k, j: read(k + 1, j), shapes[0], shapes[1])
    if 0 in shapes[1]:
        return read(0, index)
    inside, local = None, []
    for i, s, n in zip(index, starts, shapes[1]):
        j = ctx.sub(i, s)
        ok = ctx.and_(ctx.ge(j, ctx.iconst(0)), ctx.lt(j, ctx.iconst(n)))
        inside = ok if inside is None else ctx.and_(inside, ok)
        local.append(j)
    if inside is None:  # rank 0: the update replaces the operand
        return read(1, [])
    safe = [ctx.select(inside, j, ctx.iconst(0)) for j in local]
    return ctx.select(inside, read(1, safe), read(0, index))


kernel_index(dynamic_slice_p, _kernel_dynamic_slice, restrides=True)
kernel_index(dynamic_update_slice_p, _kernel_dynamic_update_slice)
# (an update of a loop's carry is a library step where the target updates it in place)
library_lowering(dynamic_update_slice_p, "dynamic update")

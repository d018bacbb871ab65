"""``nbjax.ops``: segment reductions, ``segment_sum/prod/max/min``, as in ``jax.ops``.

``segment_sum(data, ids, n)[k]`` combines the rows ``data[i]`` with ``ids[i] == k``. Like
JAX, each is one ``lax.scatter_*`` of ``data`` into an output filled with the reduction's
identity (0, 1, the lowest or highest value of the dtype), so empty segments hold that
identity, ids outside ``[0, n)`` are dropped (the default mode, FILL_OR_DROP; negative ids
are not counted from the end) and ``jit``, ``grad`` and ``vmap`` come from the scatter's
rules. ``num_segments`` fixes the output's shape, so it must be concrete: left out, it is
``max(ids) + 1``, which a traced ``ids`` cannot give.
"""

import operator

import numpy as np

from . import lax
from . import numpy as jnp
from .core import ConcretizationTypeError, Tracer, dtypes, get_aval
from .numpy.util import check_arraylike
from .sharding import refuse_out_sharding

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _lowest(dtype):
    """The identity of a maximum: False, the dtype's minimum or -inf."""
    if dtype == np.bool_:
        return False
    return dtypes.iinfo(dtype).min if dtypes.is_int(dtype) else -np.inf


def _highest(dtype):
    """The identity of a minimum: True, the dtype's maximum or +inf."""
    if dtype == np.bool_:
        return True
    return dtypes.iinfo(dtype).max if dtypes.is_int(dtype) else np.inf


def _num_segments(num_segments, segment_ids):
    """The output's length, which must be known when tracing (JAX's check and message,
    which names segment_sum for every reduction); ``max(ids) + 1`` when not given."""
    if num_segments is None:
        num_segments = jnp.max(segment_ids) + 1
    if isinstance(num_segments, Tracer):
        raise ConcretizationTypeError(
            "Abstract tracer value encountered where concrete value is expected: traced array "
            f"with shape {get_aval(num_segments).str_short()}\nsegment_sum() `num_segments` "
            "argument.\nSince `num_segments` determines the size of the output, a static value "
            "must be provided to use segment reductions under jit (static_argnums).")
    num_segments = operator.index(num_segments)
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    return num_segments


def _check_ids(segment_ids):
    """JAX indexes with the ids: they must be integers (a float index is a TypeError)."""
    dtype = get_aval(segment_ids).dtype
    if dtype == np.bool_:
        raise TypeError("segment_ids must be integers, got bool (JAX would read a boolean "
                        "array as a mask of the rows, not as segment ids)")
    if not dtypes.is_int(dtype):
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{dtype.name}")


def _scatter_rows(scatter_op, out, coords, data, indices_are_sorted, unique_indices, mode):
    """``out`` with each row of ``data`` combined into the row of ``out`` that its
    coordinates (one array per leading axis of ``out``, broadcast together) address."""
    coords = jnp.broadcast_arrays(*coords)
    batch_shape = get_aval(coords[0]).shape
    n_index = len(coords)
    window_shape = get_aval(out).shape[n_index:]
    indices = jnp.stack(coords, axis=-1)
    updates = jnp.broadcast_to(data, batch_shape + window_shape)
    if 0 in batch_shape + window_shape:
        return out  # nothing to combine (JAX skips the scatter too)
    dnums = lax.ScatterDimensionNumbers(
        update_window_dims=tuple(range(len(batch_shape), len(batch_shape) + len(window_shape))),
        inserted_window_dims=tuple(range(n_index)),
        scatter_dims_to_operand_dims=tuple(range(n_index)))
    return scatter_op(out, indices, updates, dnums, indices_are_sorted=indices_are_sorted,
                      unique_indices=unique_indices,
                      mode=lax.GatherScatterMode.FILL_OR_DROP if mode is None else mode)


def _segment_update(name, data, segment_ids, scatter_op, identity, reducer, num_segments,
                    indices_are_sorted, unique_indices, bucket_size, mode, out_sharding):
    """JAX's ``_segment_update``: scatter into an identity-filled output; with
    ``bucket_size``, into one output per bucket of consecutive rows, then reduce those
    (shorter running sums and products: better rounding)."""
    check_arraylike(name, data, segment_ids)
    if out_sharding is not None:
        refuse_out_sharding(name, out_sharding)
    data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
    _check_ids(segment_ids)
    dtype = get_aval(data).dtype
    num_segments = _num_segments(num_segments, segment_ids)
    row_shape = get_aval(data).shape[1:]
    if bucket_size is None:
        out = jnp.full((num_segments,) + row_shape, identity(dtype), dtype=dtype)
        return _scatter_rows(scatter_op, out, [segment_ids], data, indices_are_sorted,
                             unique_indices, mode)
    num_rows = get_aval(segment_ids).shape[0]
    num_buckets = -(-get_aval(segment_ids).size // bucket_size)
    out = jnp.full((num_buckets, num_segments) + row_shape, identity(dtype), dtype=dtype)
    buckets = jnp.arange(num_rows) // bucket_size
    out = _scatter_rows(scatter_op, out, [buckets, segment_ids[None, :]], data,
                        indices_are_sorted, unique_indices, mode)
    return reducer(out, axis=0).astype(dtype)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The sum of the rows of ``data`` (along its leading axis) in each segment:
    ``(num_segments,) + data.shape[1:]``, 0 where a segment is empty. ``segment_ids`` (ints,
    any order) name each row's segment; ids outside ``[0, num_segments)`` are dropped, or
    clamped with ``mode='clip'``. ``num_segments`` defaults to ``max(segment_ids) + 1`` and
    must be static under ``jit``. ``bucket_size`` sums buckets of that many rows
    separately first."""
    return _segment_update("segment_sum", data, segment_ids, lax.scatter_add,
                           lambda dtype: 0, jnp.sum, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The product of the rows of ``data`` in each segment (1 where empty); the arguments
    are segment_sum's. As in JAX, it is differentiable only with ``unique_indices=True``
    (the derivative of a repeated product is not a scatter)."""
    return _segment_update("segment_prod", data, segment_ids, lax.scatter_mul,
                           lambda dtype: 1, jnp.prod, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The maximum of the rows of ``data`` in each segment (-inf, the dtype's minimum or
    False where empty); the arguments are segment_sum's. Its gradient splits evenly between
    tied maxima, as JAX's does."""
    return _segment_update("segment_max", data, segment_ids, lax.scatter_max, _lowest,
                           jnp.max, num_segments, indices_are_sorted, unique_indices,
                           bucket_size, mode, out_sharding)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The minimum of the rows of ``data`` in each segment (+inf, the dtype's maximum or
    True where empty); the arguments are segment_sum's."""
    return _segment_update("segment_min", data, segment_ids, lax.scatter_min, _highest,
                           jnp.min, num_segments, indices_are_sorted, unique_indices,
                           bucket_size, mode, out_sharding)

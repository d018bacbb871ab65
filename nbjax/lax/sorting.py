"""Sorting: ``sort`` (several operands ordered by the first ``num_keys``) and ``top_k``.

The two use different orders, as in JAX:

- ``sort`` compares values: -0.0 equals 0.0 (a stable sort keeps their order), NaNs go last
  whatever their sign, and complex numbers order by (real, imag), each with NaN last.
- ``top_k`` uses IEEE's total order: -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN; equal
  values come out lowest index first.
"""

import operator

import numpy as np

from ..core import Primitive, ShapedArray, dtypes, get_aval
from ..interpreters import ad
from . import batch_util, structural
from .gather_scatter import GatherDimensionNumbers, GatherScatterMode, gather
from .shapes import reshape
from .standard import array_module_lowering, library_lowering

__all__ = ["sort", "sort_p", "sort_key_val", "top_k", "top_k_p"]


def _canonical_axis(axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


# --- sort ----------------------------------------------------------------------------------

sort_p = Primitive("sort", multiple_results=True)
library_lowering(sort_p, "sort")
# The order, for a target that writes the sort itself: the first ``num_keys`` operands
# compared lexicographically, each ascending by value (NaNs last, -0.0 equal to 0.0).
sort_p.def_lowering("sort", "ascending")


@sort_p.def_abstract_eval
def _sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise TypeError("sort requires at least one operand")
    shapes = [op.shape for op in operands]
    if any(s != shapes[0] for s in shapes):
        raise TypeError(f"Arguments to sort must have equal shapes, got: "
                        f"{' '.join(map(str, shapes))}")
    if not 0 <= dimension < len(shapes[0]):
        raise ValueError(f"sort dimension {dimension} is out of bounds for operands of shape "
                         f"{shapes[0]}")
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"num_keys={num_keys} must be between 1 and "
                         f"len(operand)={len(operands)}")
    return list(operands)


def _sort_keys(xp, key):
    """Integer keys, most significant first, whose order is the order in which JAX sorts
    the values ``key``: a float's NaNs (any sign) become one positive NaN and -0.0 becomes
    0.0, then its bits are read in IEEE's total order; a complex number is its real part,
    then its imaginary part. (Integers sort alike everywhere, where floats' NaNs and zeros
    do not: CuPy's radix sort orders their bits.)"""
    if dtypes.is_complex(key.dtype):
        return _sort_keys(xp, key.real) + _sort_keys(xp, key.imag)
    if dtypes.is_float(key.dtype):
        key = _widened(key)
        key = xp.where(xp.isnan(key), xp.asarray(np.nan, key.dtype), key + key.dtype.type(0))
    return [_total_order_key(xp, key)]


def _sort_with(xp, *operands, dimension, is_stable, num_keys):
    """``sort`` with any array module of NumPy's API (NumPy for the reference, CuPy on a
    GPU): stable argsorts of the keys, least significant first, each refining the order of
    the ones before (NumPy's ``lexsort``, which CuPy has only for 1-D keys)."""
    keys = [k for op in operands[:num_keys] for k in _sort_keys(xp, op)]
    order = xp.argsort(keys[-1], axis=dimension, kind="stable")
    for key in reversed(keys[:-1]):
        ordered = xp.take_along_axis(key, order, axis=dimension)
        order = xp.take_along_axis(
            order, xp.argsort(ordered, axis=dimension, kind="stable"), axis=dimension)
    return [xp.take_along_axis(op, order, axis=dimension) for op in operands]


array_module_lowering(sort_p, _sort_with)


def _take_along_axis(x, indices, axis):
    """``x`` re-read along ``axis`` at ``indices`` (NumPy's ``take_along_axis``) as one gather,
    whose rules carry tangents and cotangents: the other coordinates of each element are
    iotas, so every index vector names one element."""
    shape = get_aval(indices).shape
    rank = len(shape)
    coordinates = [indices if d == axis else
                   structural.broadcasted_iota(get_aval(indices).dtype, shape, d)
                   for d in range(rank)]
    index_vectors = structural.concatenate(
        [reshape(c, shape + (1,)) for c in coordinates], rank)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(rank)),
                                   start_index_map=tuple(range(rank)))
    return gather(x, index_vectors, dnums, (1,) * rank, unique_indices=True,
                  mode=GatherScatterMode.PROMISE_IN_BOUNDS)


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    """Sorting permutes: sort an iota along with the operands to learn the permutation, then
    apply it to the tangents."""
    shape = get_aval(primals[0]).shape
    index_dtype = dtypes.int32 if shape[dimension] < dtypes.iinfo(np.int32).max else dtypes.int64
    iota = structural.broadcasted_iota(index_dtype, shape, dimension)
    *outs, permutation = sort_p.bind(*primals, iota, dimension=dimension,
                                     is_stable=is_stable, num_keys=num_keys)
    tangents_out = [t if isinstance(t, ad.Zero) else _take_along_axis(t, permutation, dimension)
                    for t in tangents]
    return outs, tangents_out


sort_p.def_jvp(_sort_jvp)


def _sort_batch_rule(axis_data, vals, dims, *, dimension, is_stable, num_keys):
    """Sort along the shifted ``dimension``; operands are aligned on the first batched
    operand's batch axis (an unbatched one is broadcast: sort needs equal shapes)."""
    bdim = next(d for d in dims if d is not None)
    aligned = [batch_util.bdim_at(v, d, bdim, axis_data.size) for v, d in zip(vals, dims)]
    outs = sort_p.bind(*aligned, dimension=dimension + (bdim <= dimension),
                       is_stable=is_stable, num_keys=num_keys)
    return outs, [bdim] * len(outs)


sort_p.def_batch(_sort_batch_rule)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort along ``dimension``. Given a sequence of arrays, sort them all by the first
    ``num_keys`` of them (lexicographically) and return a tuple."""
    many = isinstance(operand, (tuple, list))
    operands = tuple(operand) if many else (operand,)
    if not operands:
        raise TypeError("sort requires at least one operand")
    num_keys = operator.index(num_keys)
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"num_keys={num_keys} must be between 1 and "
                         f"len(operand)={len(operands)}")
    dimension = _canonical_axis(dimension, get_aval(operands[0]).ndim)
    out = sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable),
                      num_keys=num_keys)
    return tuple(out) if many else out[0]


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """Sort ``keys`` along ``dimension`` and apply the same permutation to ``values``."""
    return sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1)


# --- top_k ---------------------------------------------------------------------------------

top_k_p = Primitive("top_k", multiple_results=True)
library_lowering(top_k_p, "sort")
# For a target that writes the sort itself: the k first of IEEE's totalOrder, descending,
# ties lowest index first.
top_k_p.def_lowering("sort", "descending total order")


@top_k_p.def_abstract_eval
def _top_k_abstract_eval(operand, *, k, axis):
    if dtypes.is_complex(operand.dtype):
        raise ValueError("top_k is not compatible with complex inputs.")
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    if operand.ndim == 0:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {operand.shape}")
    if not 0 <= axis < operand.ndim:
        raise ValueError(f"axis argument out of range: axis={axis} for "
                         f"operand.shape={operand.shape}")
    if operand.shape[axis] < k:
        raise ValueError(f"k argument to top_k must be no larger than size along axis; got "
                         f"k={k} with shape={list(operand.shape)} and axis={axis}")
    shape = operand.shape[:axis] + (k,) + operand.shape[axis + 1:]
    # JAX keeps the operand's weak type on the int32 indices too.
    return [operand.update(shape=shape),
            ShapedArray(shape, dtypes.int32, operand.weak_type)]


def _total_order_key(xp, x):
    """Integers ordered as IEEE's totalOrder orders the floats ``x`` (ints: ``x`` itself).

    A float's bits read as a signed integer already order non-negative floats; for negative
    ones (sign bit set) flipping the other bits reverses their order, as it must.
    """
    if dtypes.is_bool(x.dtype):
        return x.view(np.uint8)
    if not dtypes.is_float(x.dtype):
        return x
    x = _widened(x)
    bits = x.view(np.dtype(f"i{x.dtype.itemsize}"))
    magnitude_mask = dtypes.iinfo(bits.dtype).max
    return xp.where(bits < 0, bits ^ magnitude_mask, bits)


def _widened(x):
    """Floats narrower than float32 as float32, which holds each of their values exactly:
    their own bits are not all laid out as IEEE's (float4_e2m1fn's sign is bit 3 of its
    byte, the ``fnuz`` types' NaN has -0.0's pattern, float8_e8m0fnu has no sign)."""
    return x.astype(np.float32) if x.dtype.itemsize < 4 else x


def _top_k_with(xp, operand, *, k, axis):
    """``top_k`` with any array module of NumPy's API (``_sort_with``)."""
    # ``~key`` reverses the order of any integer type without overflow, so a stable
    # ascending sort of it is a descending sort that keeps ties in index order.
    order = xp.argsort(~_total_order_key(xp, operand), axis=axis, kind="stable")
    indices = xp.take(order, xp.arange(k), axis=axis)
    return [xp.take_along_axis(operand, indices, axis=axis), indices.astype(np.int32)]


array_module_lowering(top_k_p, _top_k_with)


def _top_k_jvp(primals, tangents, *, k, axis):
    """The tangents of the chosen elements, read at the indices top_k returns."""
    (x,), (t,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    return [values, indices], [_take_along_axis(t, indices, axis), ad.Zero.like(indices)]


def _top_k_batch_rule(axis_data, vals, dims, *, k, axis):
    (x,), (bdim,) = vals, dims
    return top_k_p.bind(x, k=k, axis=axis + (bdim <= axis)), [bdim, bdim]


top_k_p.def_jvp(_top_k_jvp)
top_k_p.def_batch(_top_k_batch_rule)


def top_k(operand, k, *, axis=-1):
    """The ``k`` largest entries along ``axis`` and their int32 indices, largest first."""
    axis = _canonical_axis(axis, get_aval(operand).ndim)
    return list(top_k_p.bind(operand, k=operator.index(k), axis=axis))  # (a list, as JAX)

"""Sorting, searching, counting and set operations.

All sorting is ``lax.sort`` (stable, NaNs last, as JAX); ``partition`` is a full sort, which
is a valid partition. Functions whose result's length depends on the values (``unique``, the
set operations, ``bincount`` without ``length``) need concrete inputs, or ``size=`` (and
optionally ``fill_value=``) to fix that length under a transformation, as in JAX.
"""

import builtins
import math
import operator
from typing import NamedTuple

import numpy as np

from .. import lax
from ..core import ConcretizationTypeError, Tracer, dtypes, get_aval
from ..sharding import refuse_out_sharding
from . import reductions, ufuncs
from .array_api import diff
from .creation import asarray, linspace
from .indexing import IndexUpdateHelper, ravel_multi_index, take
from .manipulation import (concatenate, first_true_positions, moveaxis, ravel, reshape,
                           where)
from .ufuncs import clip, remainder
from .util import (canonicalize_axis, check_arraylike, concrete_value, filled_like,
                   promote_dtypes, promote_dtypes_inexact, to_array)

__all__ = ["sort", "argsort", "lexsort", "partition", "argpartition", "sort_complex",
           "unique", "unique_values", "unique_counts", "unique_inverse", "unique_all",
           "searchsorted", "digitize", "bincount", "isin", "in1d", "setdiff1d", "union1d",
           "intersect1d", "setxor1d", "interp", "histogram_bin_edges", "histogram",
           "histogramdd", "histogram2d"]


def _arr(name, x):
    check_arraylike(name, x)
    return to_array(x)


def _shape(x):
    return get_aval(x).shape


def _index_dtype():
    return dtypes.default_int()


def _static_index(name, x):
    """``x`` as a Python int, as JAX's ``concrete_or_error(operator.index, x)``: a traced
    ``x`` is a ConcretizationTypeError, a float Python's own TypeError ('float' object
    cannot be interpreted as an integer)."""
    if isinstance(x, Tracer):
        concrete_value(name, x)
    return operator.index(x)


def _flatten_if_none(a, axis):
    return (ravel(a), 0) if axis is None else (a, canonicalize_axis(axis, get_aval(a).ndim))


# --- sorting -------------------------------------------------------------------------------

def _refuse_kind_and_order(name, kind, order):
    """JAX's TypeErrors: ``stable=`` says how to sort (there is no choice of algorithm), and
    there are no structured dtypes to order by field."""
    if kind is not None:
        raise TypeError(f"'kind' argument to {name} is not supported. Use stable=True or "
                        "stable=False to specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {name} is not supported.")


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """``a`` sorted along ``axis`` (flattened when None); NaNs sort last."""
    a = _arr("sort", a)
    _refuse_kind_and_order("sort", kind, order)
    a, axis = _flatten_if_none(a, axis)
    if descending:
        return lax.rev(lax.sort(a, dimension=axis, is_stable=stable), (axis,))
    return lax.sort(a, dimension=axis, is_stable=stable)


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """The indices that sort ``a`` along ``axis``, of ``dtype`` (default: the default int);
    equal elements keep their order.

    Descending: sort the reversed array ascending and reverse again, which keeps equal
    elements in their original order; positions are then counted from the other end.
    """
    a = _arr("argsort", a)
    _refuse_kind_and_order("argsort", kind, order)
    a, axis = _flatten_if_none(a, axis)
    iota = lax.broadcasted_iota(_index_dtype() if dtype is None else dtype, _shape(a), axis)
    if not descending:
        return lax.sort((a, iota), dimension=axis, is_stable=stable, num_keys=1)[1]
    _, order = lax.sort((lax.rev(a, (axis,)), iota), dimension=axis, is_stable=stable,
                        num_keys=1)
    return lax.sub(lax.full_like(order, _shape(a)[axis] - 1), lax.rev(order, (axis,)))


def lexsort(keys, axis=-1):
    """Indices that sort by several keys: the last key first, ties broken by earlier ones."""
    keys = [_arr("lexsort", k) for k in keys]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({_shape(k) for k in keys}) != 1:
        raise ValueError("all keys need to be the same shape")
    if not _shape(keys[0]):  # (one element: position 0, as JAX, whatever the axis)
        return lax.full((), 0, _index_dtype())
    axis = canonicalize_axis(axis, len(_shape(keys[0])))
    iota = lax.broadcasted_iota(_index_dtype(), _shape(keys[0]), axis)
    return lax.sort(tuple(keys[::-1]) + (iota,), dimension=axis, is_stable=True,
                    num_keys=len(keys))[-1]


def _check_kth(name, a, kth, axis):
    kth = operator.index(kth)
    n = _shape(a)[axis]
    if not -n <= kth < n:
        raise ValueError(f"{name}: kth(={kth}) out of bounds for axis of size {n}")


def partition(a, kth, axis=-1):
    """``a`` with the ``kth`` element in its sorted place, smaller ones before, larger after.

    A full sort satisfies that; the order within the two sides is unspecified.
    """
    a, axis = _flatten_if_none(_arr("partition", a), axis)
    _check_kth("partition", a, kth, axis)
    return sort(a, axis)


def argpartition(a, kth, axis=-1):
    """Indices that ``partition`` ``a`` (here: indices that sort it)."""
    a, axis = _flatten_if_none(_arr("argpartition", a), axis)
    _check_kth("argpartition", a, kth, axis)
    return argsort(a, axis)


def sort_complex(a):
    """``a`` sorted along its last axis (real part first, then imaginary), as complex."""
    a = sort(_arr("sort_complex", a))
    dtype = get_aval(a).dtype
    return lax.convert_element_type(
        a, dtype if dtypes.is_complex(dtype) else dtypes.promote(
            (dtypes.to_inexact(dtype), False), (dtypes.default_complex(), True))[0])


# --- unique --------------------------------------------------------------------------------

class _Unique(NamedTuple):
    """``unique``'s pieces: ``size`` slots, of which the ``valid`` ones hold a distinct row."""
    values: object  # (size, *row_shape)
    index: object   # first position of each value in the input
    inverse: object  # for each input row, its slot
    counts: object
    valid: object


def _rows_differ(x, y, equal_nan):
    """Rows of ``x`` and ``y`` differ somewhere (NaNs equal to NaNs if ``equal_nan``)."""
    differ = lax.ne(x, y)
    if equal_nan and dtypes.is_inexact(get_aval(x).dtype):
        differ = lax.bitwise_and(differ, lax.bitwise_not(lax.bitwise_and(lax.ne(x, x),
                                                                          lax.ne(y, y))))
    if len(_shape(x)) > 1:
        differ = lax.reduce_or(differ, tuple(range(1, len(_shape(x)))))
    return differ


def _unique_rows(rows, size, name, equal_nan=True):
    """Distinct rows of ``rows`` (shape ``(n, ...)``), in sorted order, in ``size`` slots.

    Sorting the rows (stably, with their positions) brings equal rows together, earliest
    first; a row starts a new value where it differs from the one before it. A value's count
    is the number of sorted rows in its run, so the last of ``size`` values kept is counted
    right when ``size`` cuts later values off.
    """
    n = _shape(rows)[0]
    row_shape = _shape(rows)[1:]
    if row_shape:
        flat = reshape(rows, (n, -1))
        columns = [flat[:, j] for j in range(_shape(flat)[1])]
    else:
        columns = [rows]
    positions = lax.iota(_index_dtype(), n)
    *sorted_columns, perm = lax.sort(tuple(columns) + (positions,), dimension=0,
                                     is_stable=True, num_keys=max(len(columns), 1))
    sorted_rows = take(rows, perm, axis=0, mode="promise_in_bounds")
    starts = concatenate([lax.full((min(n, 1),), True, dtypes.bool_),
                          _rows_differ(sorted_rows[1:], sorted_rows[:-1], equal_nan)])
    if size is None:
        size = int(np.count_nonzero(_concrete_for(name, starts)))
    slots, valid = first_true_positions(starts, size)
    slots = where(valid, slots, 0)
    slot_of_sorted = lax.sub(lax.cumsum(lax.convert_element_type(starts, _index_dtype()), 0),
                             lax.full((n,), 1, _index_dtype()))
    inverse = lax.full((n,), 0, _index_dtype()).at[perm].set(slot_of_sorted)
    values = take(sorted_rows, slots, axis=0, mode="promise_in_bounds") if n else \
        lax.full((size,) + row_shape, 0, get_aval(rows).dtype)
    counts = lax.full((size,), 0, _index_dtype()).at[slot_of_sorted].add(
        lax.full((n,), 1, _index_dtype()), mode="drop")
    return _Unique(values, take(perm, slots, mode="promise_in_bounds") if n else
                   lax.full((size,), 0, _index_dtype()), inverse, counts, valid)


def _concrete_for(name, x):
    try:
        return concrete_value(name, x)
    except ConcretizationTypeError as e:
        raise ConcretizationTypeError(
            f"{e}\nTo make jnp.{name}() compatible with JIT and other transforms, specify a "
            "concrete value for the size argument, which fixes the output's length.") from None


def _fill(values, valid, fill_value):
    """Invalid slots (past the distinct values) hold ``fill_value`` if one is given."""
    if fill_value is None:
        return values
    shape = _shape(values)
    mask = lax.broadcast_in_dim(valid, shape, (0,))
    return where(mask, values, lax.convert_element_type(to_array(fill_value),
                                                        get_aval(values).dtype))


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted distinct elements of ``ar`` (or distinct slices along ``axis``).

    With ``size``, exactly ``size`` results: extra slots repeat the smallest value (or hold
    ``fill_value``), their counts are 0. Optionally also the first index of each value, the
    inverse (each element's position among the results) and the counts.
    """
    ar = _arr("unique", ar)
    shape = _shape(ar)
    rows = ravel(ar) if axis is None else moveaxis(ar, canonicalize_axis(axis, len(shape)), 0)
    size = None if size is None else operator.index(size)
    if size and not _shape(rows)[0] and fill_value is None:  # (no value to repeat)
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    u = _unique_rows(rows, size, "unique", equal_nan)
    # (Without size every slot is valid: JAX ignores fill_value, keeping a weak type.)
    values = u.values if size is None else _fill(u.values, u.valid, fill_value)
    if axis is not None:
        values = moveaxis(values, 0, canonicalize_axis(axis, len(shape)))
    extras = []
    if return_index:
        extras.append(u.index)
    if return_inverse:
        extras.append(reshape(u.inverse, shape) if axis is None else u.inverse)
    if return_counts:
        extras.append(u.counts)
    return (values, *extras) if extras else values


class _UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class _UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class _UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _unique_api(name, x, size, fill_value, **returns):
    """The Array API's ``unique_*``: each NaN distinct (``equal_nan=False``), as the standard
    and JAX have it; errors name the function called."""
    check_arraylike(name, x)
    return unique(x, equal_nan=False, size=size, fill_value=fill_value, **returns)


def unique_values(x, /, *, size=None, fill_value=None):
    return _unique_api("unique_values", x, size, fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    return _UniqueCountsResult(*_unique_api("unique_counts", x, size, fill_value,
                                            return_counts=True))


def unique_inverse(x, /, *, size=None, fill_value=None):
    return _UniqueInverseResult(*_unique_api("unique_inverse", x, size, fill_value,
                                             return_inverse=True))


def unique_all(x, /, *, size=None, fill_value=None):
    return _UniqueAllResult(*_unique_api("unique_all", x, size, fill_value,
                                         return_index=True, return_inverse=True,
                                         return_counts=True))


# --- searching and counting ----------------------------------------------------------------

def _sort_order_less(x, y, or_equal):
    """``x < y`` (or ``<=``) in sorting order, where NaN is above everything but NaN;
    complex numbers in lexicographic order (real part, then imaginary part)."""
    if dtypes.is_complex(get_aval(x).dtype):
        re_x, re_y, im_x, im_y = lax.real(x), lax.real(y), lax.imag(x), lax.imag(y)
        return lax.bitwise_or(_sort_order_less(re_x, re_y, False),
                              lax.bitwise_and(lax.eq(re_x, re_y),
                                              _sort_order_less(im_x, im_y, or_equal)))
    if not dtypes.is_float(get_aval(x).dtype):
        return (lax.le if or_equal else lax.lt)(x, y)
    y_nan = lax.ne(y, y)
    if or_equal:
        return lax.bitwise_or(lax.le(x, y), y_nan)
    return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(y_nan, lax.eq(x, x)))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Where ``v``'s elements would go in the sorted 1-D ``a`` to keep it sorted, by JAX's
    methods: "scan" (the default) halves an interval of ``a`` per element in a loop of
    ceil(log2(n + 1)) steps, "scan_unrolled" in as many steps written out (one fused
    kernel), "compare_all" counts the elements of ``a`` below each value (at or below it
    for side='right') comparing every pair, n times the work; "sort" searches as "scan"."""
    if side not in ("left", "right"):
        raise ValueError(f"invalid argument side={side!r}, expected 'left' or 'right'")
    _check_search_method(method)
    a, v = _arr("searchsorted", a), _arr("searchsorted", v)
    if len(_shape(a)) != 1:
        raise ValueError("a should be 1-dimensional")
    if sorter is not None:
        a = take(a, sorter, mode="promise_in_bounds")
    a, v = promote_dtypes(a, v)
    if method == "compare_all":
        return _searchsorted_comparing_all(a, v, side)
    return _searchsorted_by_halving(a, v, side, unrolled=method == "scan_unrolled")


def _position_dtype(n):
    """The dtype of positions among ``n`` sorted values: int32 unless they need more (under
    x64 too, as JAX's ``searchsorted``)."""
    return dtypes.int32 if n < np.iinfo(np.int32).max else dtypes.canonicalize(dtypes.int64)


def _searchsorted_comparing_all(a, v, side):
    n, v_shape = _shape(a)[0], _shape(v)
    grid = v_shape + (n,)
    a_b = lax.broadcast_in_dim(a, grid, (len(v_shape),))
    v_b = lax.broadcast_in_dim(v, grid, tuple(range(len(v_shape))))
    below = _sort_order_less(a_b, v_b, or_equal=(side == "right"))
    return lax.reduce_sum(lax.convert_element_type(below, _position_dtype(n)), (len(v_shape),))


def _searchsorted_by_halving(a, v, side, unrolled):
    """For each value, the interval ``[low, high]`` of positions it may go to, halved at
    every step by comparing it with ``a`` at the middle (``high`` is the answer when the
    interval holds one position)."""
    n, shape = _shape(a)[0], _shape(v)
    index = _position_dtype(n)
    if n == 0:
        return lax.full(shape, 0, index)

    def halve(bounds):
        low, high = bounds
        middle = lax.add(low, lax.div(lax.sub(high, low), lax.full(shape, 2, index)))
        # v goes left of the middle: for side='left' where a[middle] < v does not hold
        left = lax.bitwise_not(_sort_order_less(take(a, middle, mode="promise_in_bounds"), v,
                                                or_equal=(side == "right")))
        return lax.select(left, low, middle), lax.select(left, middle, high)
    bounds = (lax.full(shape, 0, index), lax.full(shape, n, index))
    steps = math.ceil(math.log2(n + 1))
    if unrolled:
        for _ in range(steps):
            bounds = halve(bounds)
    else:
        bounds = lax.fori_loop(0, steps, lambda _, b: halve(b), bounds)
    return bounds[1]


_SEARCH_METHODS = ("compare_all", "scan", "scan_unrolled", "sort")


def _check_search_method(method):
    """``method`` is one of JAX's (each gives the same answer)."""
    if method not in _SEARCH_METHODS:
        raise ValueError(f"invalid argument method={method!r}, expected one of "
                         f"{list(_SEARCH_METHODS)}")


def digitize(x, bins, right=False, *, method=None):
    """The index of the bin each element of ``x`` falls in (bins increasing or decreasing)."""
    if method is not None:
        _check_search_method(method)
    x, bins = _arr("digitize", x), _arr("digitize", bins)
    if len(_shape(bins)) != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    n = _shape(bins)[0]
    if n == 0:
        return lax.full(_shape(x), 0, _index_dtype())
    side = "left" if right else "right"
    increasing = searchsorted(bins, x, side=side)
    decreasing = lax.sub(lax.full_like(increasing, n),
                         searchsorted(lax.rev(bins, (0,)), x, side=side))
    # jnp's comparison, not lax's: it orders complex bins (lexicographically), as JAX's.
    return where(ufuncs.less_equal(bins[0], bins[-1]), increasing, decreasing)


def bincount(x, weights=None, minlength=0, *, length=None, out_sharding=None):
    """How often each non-negative integer occurs in ``x`` (or the sum of its weights).

    Negative values count as 0 (as in JAX); ``length`` fixes the result's length (values at
    or beyond it are dropped), otherwise ``x`` must be concrete.
    """
    if out_sharding is not None:
        refuse_out_sharding("jnp.bincount", out_sharding)
    x = _arr("bincount", x)
    if dtypes.is_bool(get_aval(x).dtype):  # (as in NumPy and JAX)
        x = lax.convert_element_type(x, _index_dtype())
    if not dtypes.is_int(get_aval(x).dtype):
        raise TypeError(f"x argument to bincount must have an integer type; got "
                        f"{get_aval(x).dtype}")
    if len(_shape(x)) != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = _static_index("bincount", minlength)
    if length is None:
        values = _concrete_for("bincount", x)
        length = max(minlength, int(values.max()) + 1 if values.size else 0)
    x = lax.max(x, lax.full_like(x, 0))
    weights = lax.full(_shape(x), 1, _index_dtype()) if weights is None else \
        _arr("bincount", weights)
    if _shape(weights) != _shape(x):
        raise ValueError(f"type of weights must match type of x. Got typeof(x)="
                         f"{get_aval(x).str_short(True)} and typeof(weights)="
                         f"{get_aval(weights).str_short(True)}")
    zeros = lax.full((operator.index(length),), 0, get_aval(weights).dtype)
    return zeros.at[x].add(weights, mode="drop")


# --- set operations ------------------------------------------------------------------------

_ISIN_METHODS = ("compare_all", "binary_search", "sort", "auto")


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """Whether each element of ``element`` occurs in ``test_elements`` (compares all pairs,
    whichever of JAX's methods is named)."""
    if method not in _ISIN_METHODS:
        raise ValueError(f"method={method!r} is not implemented; options are 'compare_all', "
                         "'binary_search', 'sort', and 'auto'")
    element, test = _arr("isin", element), ravel(_arr("isin", test_elements))
    element, test = promote_dtypes(element, test)
    shape = _shape(element)
    grid = shape + _shape(test)
    equal = lax.eq(lax.broadcast_in_dim(element, grid, tuple(range(len(shape)))),
                   lax.broadcast_in_dim(test, grid, (len(shape),)))
    found = lax.reduce_or(equal, (len(shape),))
    return lax.bitwise_not(found) if invert else found


def in1d(ar1, ar2, assume_unique=False, invert=False, *, method="auto"):
    """``isin`` of ``ar1`` flattened."""
    return isin(ravel(_arr("in1d", ar1)), ar2, assume_unique, invert, method=method)


def _compact(values, keep, size, name):
    """The kept ``values`` moved to the front, in ``size`` slots (concrete when None); the
    slots past them hold 0."""
    if size is None:
        size = int(np.count_nonzero(_concrete_for(name, keep)))
    slots, valid = first_true_positions(keep, operator.index(size))
    if not _shape(values)[0]:
        return lax.full((size,), 0, get_aval(values).dtype), valid, slots
    out = take(values, where(valid, slots, 0), mode="promise_in_bounds")
    return where(valid, out, lax.full_like(out, 0)), valid, slots


def _pad(values, valid, size, fill_value):
    """The ``size`` slots past the results hold ``fill_value`` or, as in JAX, the smallest
    result (NaN when one is NaN, as ``max`` and then ``min`` over the results find it), or 0
    when there is none. Without ``size`` there is no padding (and a weak type stays)."""
    if size is None or not _shape(values)[0]:
        return values
    if fill_value is not None:
        return _fill(values, valid, fill_value)
    values = where(valid, values, reductions.max(values))
    return where(valid, values, reductions.min(values))


def _distinct(name, ar, assume_unique, fixed):
    """``ar``'s distinct values in sorted order (all its slots when ``fixed``, the valid ones
    first), or ``ar`` as it is where the caller vouches that its values are distinct."""
    if assume_unique:
        n = _shape(ar)[0]
        return _Unique(ar, lax.iota(_index_dtype(), n), None, None,
                       lax.full((n,), True, dtypes.bool_))
    return _unique_rows(ar, _shape(ar)[0] if fixed else None, name)


def _sorted_together(u1, u2):
    """The valid values of two ``_Unique`` records in one sorted array, the invalid slots
    last: ``(values, valid, positions in the concatenation)``. As in NumPy and JAX, a value
    in both is then next to itself, ``u1``'s copy first."""
    values = concatenate([u1.values, u2.values])
    invalid = lax.bitwise_not(concatenate([u1.valid, u2.valid]))
    positions = lax.iota(_index_dtype(), _shape(values)[0])
    invalid, values, positions = lax.sort((invalid, values, positions), dimension=0,
                                          is_stable=True, num_keys=2)
    return values, lax.bitwise_not(invalid), positions


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted distinct elements found in either array."""
    return unique(concatenate([ravel(_arr("union1d", ar1)), ravel(_arr("union1d", ar2))]),
                  size=size, fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct elements of ``ar1`` not in ``ar2`` (padding: ``fill_value``, 0).
    With ``assume_unique``, ``ar1``'s elements not in ``ar2`` in ``ar1``'s order, as NumPy
    and JAX."""
    ar1 = ravel(_arr("setdiff1d", ar1))
    u = _distinct("setdiff1d", ar1, assume_unique, size is not None)
    keep = lax.bitwise_and(u.valid, isin(u.values, ar2, invert=True))
    out, valid, _ = _compact(u.values, keep, size, "setdiff1d")
    # JAX's fill is full_like(ar1, fill_value): ar1's dtype and weak type.
    return where(valid, out, filled_like(out, 0 if fill_value is None else fill_value))


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct elements found in exactly one of the arrays: in the sorted
    distinct values of both, those equal to neither neighbour (so a NaN in both is kept
    twice, as in NumPy). Padding: ``fill_value``, or as ``_pad`` says."""
    ar1, ar2 = promote_dtypes(ravel(_arr("setxor1d", ar1)), ravel(_arr("setxor1d", ar2)))
    fixed = size is not None
    values, valid, _ = _sorted_together(_distinct("setxor1d", ar1, assume_unique, fixed),
                                        _distinct("setxor1d", ar2, assume_unique, fixed))
    # A neighbour past the valid values (or the ends) differs.
    differs = lax.bitwise_or(lax.ne(values[1:], values[:-1]), lax.bitwise_not(valid[1:]))
    edge = lax.full((min(_shape(values)[0], 1),), True, dtypes.bool_)
    keep = lax.bitwise_and(valid, lax.bitwise_and(concatenate([edge, differs]),
                                                  concatenate([differs, edge])))
    values, valid, _ = _compact(values, keep, size, "setxor1d")
    return _pad(values, valid, size, fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted distinct elements in both arrays: the sorted distinct values of both,
    where equal to the next one. Padding: ``fill_value``, or as ``_pad`` says.

    With ``return_indices`` also where each first occurs in ``ar1`` and ``ar2``, padded (as
    JAX) with the lengths of ``ar1`` and ``ar2``, indices past their ends.
    """
    ar1, ar2 = promote_dtypes(ravel(_arr("intersect1d", ar1)), ravel(_arr("intersect1d", ar2)))
    fixed = size is not None
    u1 = _distinct("intersect1d", ar1, assume_unique, fixed)
    u2 = _distinct("intersect1d", ar2, assume_unique, fixed)
    values, valid, positions = _sorted_together(u1, u2)
    matched = lax.bitwise_and(valid[1:], lax.eq(values[1:], values[:-1]))
    values, valid, slots = _compact(values[:-1], matched, size, "intersect1d")
    values = _pad(values, valid, size, fill_value)
    if not return_indices:
        return values
    n1, n2 = _shape(ar1)[0], _shape(ar2)[0]
    if not (n1 and n2):  # (nothing in common, nothing to look up)
        return (values, lax.full(_shape(values), n1, _index_dtype()),
                lax.full(_shape(values), n2, _index_dtype()))
    # Each match is a value from ar1 (at slots) followed by the same from ar2.
    first = take(positions, where(valid, slots, 0), mode="promise_in_bounds")
    second = take(positions, where(valid, slots + 1, 1), mode="promise_in_bounds")
    index1 = take(u1.index, first, mode="clip")
    index2 = take(u2.index, second - _shape(u1.values)[0], mode="clip")
    return values, where(valid, index1, n1), where(valid, index2, n2)


# --- interpolation and histograms: searchsorted into sorted points ---------------------------

def _extrapolates(name, value):
    if isinstance(value, str):
        if value != "extrapolate":
            raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', but "
                             f"got: {value!r}")
        return True
    return False


def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise-linear interpolant through ``(xp, fp)`` at ``x``; outside ``xp``'s
    range ``left``/``right`` (``fp``'s end values by default, or 'extrapolate'), or
    wrapped with ``period``."""
    check_arraylike("interp", x, xp, fp)
    extrapolate_left, extrapolate_right = (_extrapolates("left", left),
                                           _extrapolates("right", right))
    if dtypes.is_complex(get_aval(to_array(x)).dtype):
        raise ValueError("jnp.interp: complex x values not supported.")
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        period = ufuncs.abs(period)
    x, xp = promote_dtypes_inexact(x, xp)
    (fp,) = promote_dtypes_inexact(fp)
    if get_aval(xp).ndim != 1 or get_aval(fp).ndim != 1 or _shape(xp) != _shape(fp):
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    if period is not None:
        x, xp = remainder(x, period), remainder(xp, period)
        xp, fp = lax.sort_key_val(xp, fp)
        xp = concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    i = clip(searchsorted(xp, x, side="right"), 1, _shape(xp)[0] - 1)
    df, dx = take(fp, i) - take(fp, i - 1), take(xp, i) - take(xp, i - 1)
    delta = x - take(xp, i - 1)
    tiny = lax.le(ufuncs.abs(dx), np.spacing(dtypes.finfo(get_aval(xp).dtype).eps))
    # jnp.where throughout, as JAX: fp and x may differ in dtype (float16 values at float32
    # points), and a complex left/right makes the result complex.
    f = where(tiny, take(fp, i - 1),  # no NaN gradients from tiny intervals
              take(fp, i - 1) + (delta / where(tiny, 1, dx)) * df)
    if period is None and not extrapolate_left:
        f = where(lax.lt(x, xp[0]), fp[0] if left is None else left, f)
    if period is None and not extrapolate_right:
        f = where(lax.gt(x, xp[-1]), fp[-1] if right is None else right, f)
    return f


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges of ``bins`` equal bins spanning ``range`` (``a``'s extent by default; a
    zero-width range is widened by 0.5 each side), or ``bins`` itself when it is 1-D."""
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    check_arraylike("histogram_bin_edges", a, bins)
    a = to_array(a)
    dtype = get_aval(promote_dtypes_inexact(a)[0]).dtype
    if np.ndim(bins) == 1:
        return asarray(bins, dtype=dtype)
    bins = _static_index("histogram_bin_edges", bins)
    if range is None:
        range = (reductions.min(a), reductions.max(a))
    # As JAX: the range is one array of a's dtype, which the message shows.
    range = asarray(range, dtype=dtype)
    if _shape(range) != (2,):
        raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}")
    low, high = range[0], range[1]
    flat = lax.eq(low, high)
    low, high = where(flat, low - 0.5, low), where(flat, high + 0.5, high)
    return linspace(low, high, bins + 1, dtype=dtype)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """``(counts, bin_edges)``: the (weighted) number of ``a``'s values in each bin, the last
    bin closed; ``density`` divides by the total and the bin widths."""
    check_arraylike("histogram", a, bins, *([] if weights is None else [weights]))
    if weights is None:
        (a,) = promote_dtypes_inexact(a)
        weights = lax.full_like(a, 1)
    else:
        a, weights = promote_dtypes_inexact(a, weights)
        if _shape(weights) != _shape(a):
            raise ValueError("weights should have the same shape as a.")
    edges = histogram_bin_edges(a, bins, range, weights)
    n = _shape(edges)[0]
    idx = searchsorted(edges, a, side="right")
    idx = where(lax.eq(a, edges[-1]), n - 1, idx)
    counts = _add_at(lax.full((n,), 0, get_aval(weights).dtype), ravel(idx), ravel(weights))[1:]
    if density:
        counts = counts / diff(edges) / counts.sum()
    return counts, edges


def _add_at(target, idx, values):
    """``target.at[idx].add(values)``, out-of-range indices dropped."""
    return IndexUpdateHelper(target)[idx].add(values, mode="drop")


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """``(counts, edges_per_dimension)``: the histogram of the ``N`` points of the ``(N, D)``
    ``sample`` over a grid of bins (each dimension's bins as ``histogram``'s)."""
    check_arraylike("histogramdd", sample, *([] if weights is None else [weights]))
    if weights is None:
        (sample,) = promote_dtypes_inexact(sample)
    else:
        if np.shape(weights) != np.shape(sample)[:1]:
            raise ValueError("should have one weight for each sample.")
        sample, weights = promote_dtypes_inexact(sample, weights)
    n, d = _shape(sample)
    if range is not None and (len(range) != d or
                              builtins.any(r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"For sample.shape={(n, d)}, range must be a sequence of {d} pairs or "
                         f"Nones; got range={range}")
    try:
        if len(bins) != d:
            raise ValueError("should be a bin for each dimension.")
    except TypeError:
        bins = d * [operator.index(bins)]
    indices, edges = [], []
    for i in builtins.range(d):
        e = histogram_bin_edges(sample[:, i], bins[i], None if range is None else range[i])
        idx = searchsorted(e, sample[:, i], side="right")
        indices.append(where(lax.eq(sample[:, i], e[-1]), idx - 1, idx))
        edges.append(e)
    nbins = tuple(_shape(e)[0] + 1 for e in edges)
    flat = ravel_multi_index(tuple(indices), nbins, mode="clip")
    hist = reshape(bincount(flat, weights, length=math.prod(nbins)), nbins)
    hist = hist[(builtins.slice(1, -1),) * d]
    if density:
        hist = lax.convert_element_type(hist, get_aval(sample).dtype)
        hist = hist / hist.sum()
        for i in builtins.range(d):
            shape = [1] * d
            shape[i] = nbins[i] - 2
            hist = hist / reshape(diff(edges[i]), shape)
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """``(counts, x_edges, y_edges)``: ``histogramdd`` of the points ``(x[i], y[i])``."""
    check_arraylike("histogram2d", x, y)
    try:
        n_bins = len(bins)
    except TypeError:
        n_bins = 1
    if n_bins != 1 and n_bins != 2:  # one list of edges for both
        bins = [asarray(bins)] * 2
    # As JAX: one array of both (so x and y of different shapes fail as a ragged array).
    hist, (x_edges, y_edges) = histogramdd(asarray([x, y]).T, bins, range, weights,
                                           density)
    return hist, x_edges, y_edges

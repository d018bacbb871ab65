"""Choosing and placing values by index or mask: ``choose``, ``compress``, ``extract``, ``place``,
``put``, ``put_along_axis``, ``fill_diagonal`` and ``mask_indices``.

Built on indexing (``x[idx]``, ``x.at[idx]``), shape manipulation and a stable sort; as in
JAX, updates return new arrays (``inplace=False`` is required) and results whose length
depends on values need those values concrete or a ``size=`` argument.
"""

import numpy as np

from .. import lax
from ..core import dtypes, get_aval
from .creation import ones
from .indexing import (IndexUpdateHelper, along_axis_index, diag_indices, getitem, index_array,
                       indices, unravel_index)
from .manipulation import (broadcast_arrays, broadcast_to, moveaxis, nonzero, ravel, reshape,
                           stack, tile)
from .sorting import argsort
from .ufuncs import clip, remainder
from .util import canonicalize_axis, check_arraylike, concrete_value, select_where, to_array

__all__ = ["choose", "compress", "extract", "place", "put", "put_along_axis", "fill_diagonal",
           "mask_indices"]


def choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` for every position ``i`` of the broadcast arrays. ``mode``
    'raise' needs a concrete ``a`` to check it; 'wrap' and 'clip' bring it in range."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    check_arraylike("choose", a, *choices)
    a = to_array(a)
    if not dtypes.is_int(get_aval(a).dtype):
        raise ValueError("`a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        concrete = concrete_value("choose", a)
        if np.any((concrete < 0) | (concrete >= n)):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = remainder(a, n)
    elif mode == "clip":
        a = clip(a, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    a, *choices = broadcast_arrays(a, *choices)
    return getitem(stack(choices), (a,) + indices(get_aval(a).shape, sparse=True))


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` (of its ravel if None) where the 1-D ``condition``
    holds. The count depends on the values: ``condition`` must be concrete unless ``size``
    is given (then the first ``size`` selected slices, padded with ``fill_value``)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    check_arraylike("compress", condition, a, fill_value)
    condition = lax.convert_element_type(to_array(condition), dtypes.bool_)
    if get_aval(condition).ndim != 1:
        raise ValueError("condition must be a 1D array")
    arr = ravel(a) if axis is None else moveaxis(to_array(a), axis, 0)
    length = get_aval(arr).shape[0]
    condition, extra = condition[:length], condition[length:]
    arr = arr[:get_aval(condition).shape[0]]
    if size is None:
        if np.any(concrete_value("compress", extra)):
            raise ValueError("condition contains entries that are out of bounds")
        result = getitem(arr, concrete_value("compress", condition))
    elif not 0 <= size <= get_aval(arr).shape[0]:
        raise ValueError("size must be positive and not greater than the size of the array "
                         f"axis; got size={size} for a.shape[axis]={get_aval(arr).shape[0]}")
    else:
        mask = lax.broadcast_in_dim(condition, get_aval(arr).shape, (0,))
        fill = lax.full_like(arr, to_array(fill_value).astype(get_aval(arr).dtype))
        arr = select_where(mask, arr, fill)
        result = getitem(arr, argsort(condition, stable=True, descending=True))[:size]
    return moveaxis(result, 0, 0 if axis is None else axis)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of ``arr`` where ``condition`` is true, both read flat."""
    check_arraylike("extract", condition, arr, fill_value)
    return compress(ravel(condition), ravel(arr), size=size, fill_value=fill_value)


def _tile_to_size(values, size):
    """The 1-D ``values`` repeated cyclically to ``size`` elements (NumPy's put/place)."""
    n = get_aval(values).shape[0]
    if n < size:
        values = tile(values, -(-size // n))
    return values[:size]


def _immutable(name, inplace):
    if inplace:
        raise ValueError(f"nbjax.numpy.{name} cannot modify arrays in-place, because nbjax "
                         "arrays are immutable. Pass inplace=False to instead return an "
                         "updated array.")


def place(arr, mask, vals, *, inplace=True):
    """``arr`` with the positions where ``mask`` holds set, in order, to ``vals`` (repeated
    as needed). ``inplace=False`` is required, as in JAX."""
    check_arraylike("place", arr, mask, vals)
    _immutable("place", inplace)
    data, mask, vals = to_array(arr), to_array(mask), ravel(vals)
    size = get_aval(mask).size
    if get_aval(data).size != size:
        raise ValueError("place: arr and mask must be the same size")
    if not get_aval(vals).size:
        raise ValueError("Cannot place values from an empty array")
    if not size:
        return data
    (positions,) = nonzero(ravel(mask), size=size, fill_value=size)
    values = _tile_to_size(vals, size)
    updated = IndexUpdateHelper(ravel(data))[positions].set(values, mode="drop")
    return reshape(updated, get_aval(data).shape)


def put(a, ind, v, mode=None, *, inplace=True):
    """``a`` with its flat positions ``ind`` set to ``v`` (repeated as needed); out-of-range
    indices are dropped, or wrapped/clipped with ``mode``. ``inplace=False`` is required."""
    _immutable("put", inplace)
    check_arraylike("put", a, ind, v)
    arr, ind, v = to_array(a), ravel(ind), ravel(v)
    size = get_aval(arr).size
    if not size or not get_aval(ind).size or not get_aval(v).size:
        return arr
    v = _tile_to_size(v, get_aval(ind).shape[0])
    if mode is None:
        scatter_mode = "drop"
    elif mode == "clip":
        ind, scatter_mode = clip(ind, 0, size - 1), "promise_in_bounds"
    elif mode == "wrap":
        ind, scatter_mode = remainder(ind, size), "promise_in_bounds"
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    else:
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    index = unravel_index(ind, get_aval(arr).shape)
    return IndexUpdateHelper(arr)[index].set(v, mode=scatter_mode)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (the counterpart of
    ``take_along_axis``). ``inplace=False`` is required."""
    _immutable("put_along_axis", inplace)
    check_arraylike("put_along_axis", arr, indices, values)
    arr, indices = to_array(arr), index_array("put_along_axis", indices)
    shape = get_aval(arr).shape
    if axis is None:
        arr, axis = ravel(arr), 0
    if get_aval(arr).ndim != get_aval(indices).ndim:
        raise ValueError("put_along_axis arguments 'arr' and 'indices' must have same ndim. "
                         f"Got arr.ndim={get_aval(arr).ndim} and "
                         f"indices.ndim={get_aval(indices).ndim}.")
    axis = canonicalize_axis(axis, get_aval(arr).ndim)
    values = broadcast_to(values, get_aval(indices).shape)
    index = along_axis_index(get_aval(arr).shape, indices, axis)
    return reshape(IndexUpdateHelper(arr)[index].set(values, mode=mode), shape)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """``a`` with its main diagonal set to ``val`` (repeated as needed). ``inplace=False``
    is required and ``wrap=True`` is not supported, as in JAX."""
    if inplace:
        raise NotImplementedError("nbjax arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    check_arraylike("fill_diagonal", a, val)
    a, val = to_array(a), to_array(val)
    shape = get_aval(a).shape
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    n = min(shape)
    if get_aval(val).ndim:
        val = _tile_to_size(ravel(val), n)
    return IndexUpdateHelper(a)[diag_indices(n, len(shape))].set(val)


def mask_indices(n, mask_func, k=0, *, size=None):
    """The indices where ``mask_func(ones((n, n)), k)`` is non-zero (``triu``, ``tril``...)."""
    return nonzero(mask_func(ones((n, n)), k), size=size)

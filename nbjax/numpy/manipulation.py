"""Shape and layout: reshaping, transposing, joining, splitting, selecting.

Everything here is built from lax's structural primitives (reshape, transpose, slice,
concatenate, pad, broadcast_in_dim, select_n ...). Functions whose result's shape depends
on array *values* (``nonzero``, ``repeat`` with array repeats, ``insert``/``delete``) need
those values concrete, or a ``size=`` / ``total_repeat_length=`` argument, as in JAX.
"""

import builtins
import math
import operator

import numpy as np

from .. import lax
from ..core import Array, ConcretizationTypeError, Tracer, dtypes, get_aval
from ..sharding import refuse_out_sharding
from . import creation, ufuncs
from .indexing import getitem, take
from .util import (broadcast_shapes as _broadcast_shapes, broadcast_to_shape, canonicalize_axes,
                   canonicalize_axis, check_arraylike, check_broadcast_to, check_keys,
                   concrete_value, promote_dtypes, to_array)

__all__ = [
    "reshape", "ravel", "transpose", "_transpose_all", "matrix_transpose", "permute_dims",
    "moveaxis", "swapaxes", "squeeze", "expand_dims", "broadcast_to", "broadcast_arrays",
    "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "concatenate", "concat",
    "stack", "hstack", "vstack", "dstack", "column_stack", "split", "array_split", "hsplit",
    "vsplit", "dsplit", "tile", "repeat", "flip", "fliplr", "flipud", "roll", "rot90",
    "where", "select", "diag", "diagonal", "diagflat", "tril", "triu", "append",
    "insert", "delete", "nonzero", "argwhere", "flatnonzero", "rollaxis", "resize", "trim_zeros",
    "block", "packbits", "unpackbits"]


def _arr(name, x, position=0):
    """The array argument ``x`` (at ``position`` among ``name``'s arguments) as an
    Array/Tracer (Python scalars and NumPy values accepted; lists refused, as in JAX)."""
    check_arraylike(name, x, first=position)
    return to_array(x)


def _shape(x):
    return get_aval(x).shape


def _ndim(x):
    return get_aval(x).ndim


def _column_major(name, order, valid):
    """Whether ``order`` reads elements column-major ('F') rather than row-major ('C', None).

    'A' and 'K' follow a memory layout that nbjax arrays do not have: not implemented, as
    in JAX. An order outside ``valid`` (reshape refuses 'K', as NumPy) is a ValueError.
    """
    if order not in valid:
        raise ValueError(f"jnp.{name}: order must be one of {', '.join(map(repr, valid))}; "
                         f"got {order!r}")
    if order in ("A", "K"):
        raise NotImplementedError(f"jnp.{name}: order={order!r} is not implemented; only "
                                  "'C' (row-major) and 'F' (column-major) are")
    return order == "F"


def _zeros_after(x, axis, count):
    """``x`` followed by ``count`` zeros along ``axis`` (``jnp.pad`` comes in a later layer)."""
    config = [(0, 0, 0)] * _ndim(x)
    config[axis] = (0, count, 0)
    return lax.pad(x, np.zeros((), get_aval(x).dtype), config)


# --- reshaping and transposing -------------------------------------------------------------

def _resolve_shape(old_shape, new_shape, error=TypeError):
    """``new_shape`` with its one ``-1`` filled in; ``error`` (TypeError, as JAX) if sizes
    differ."""
    new_shape = tuple(operator.index(d) for d in (
        (new_shape,) if isinstance(new_shape, (int, np.integer)) else new_shape))
    size = math.prod(old_shape)
    unknown = [i for i, d in enumerate(new_shape) if d == -1]
    if len(unknown) > 1:
        raise error(f"can only specify one unknown axis size with a `-1` value, got "
                        f"{new_shape}")
    if unknown:
        known = math.prod(d for d in new_shape if d != -1)
        if (known == 0 and size != 0) or (known and size % known):
            raise error(f"cannot reshape array of shape {old_shape} (size {size}) into "
                            f"shape {new_shape} because the product of specified axis sizes "
                            f"({known}) does not evenly divide {size}")
        new_shape = tuple((size // known if known else 0) if d == -1 else d for d in new_shape)
    if any(d < 0 for d in new_shape) or math.prod(new_shape) != size:
        raise error(f"cannot reshape array of shape {old_shape} (size {size}) into shape "
                        f"{new_shape} (size {math.prod(new_shape)})")
    return new_shape


def reshape(a, shape=None, order="C", *, copy=None, out_sharding=None):
    """``a`` with a new shape of the same size (one axis may be ``-1``), its elements read
    and placed in row-major order, or column-major for ``order='F'``: the row-major
    reshape of the transposes. An impossible shape is a TypeError, or a ValueError for a
    NumPy array: JAX hands those to their own ``reshape`` method, so NumPy's error."""
    if out_sharding is not None:
        refuse_out_sharding("jnp.reshape", out_sharding)
    column_major = _column_major("reshape", order, ("C", "F", "A", None))
    error = ValueError if isinstance(a, (np.ndarray, np.generic)) else TypeError
    a = _arr("reshape", a)
    if shape is None:
        raise TypeError("jnp.reshape requires a shape")
    new_shape = _resolve_shape(_shape(a), shape, error)
    if column_major:
        return transpose(reshape(transpose(a), new_shape[::-1]))
    return a if new_shape == _shape(a) else lax.reshape(a, new_shape)


def ravel(a, order="C", *, out_sharding=None):
    """``a`` flattened to one axis, in row-major order (column-major for 'F')."""
    if out_sharding is not None:
        refuse_out_sharding("jnp.ravel", out_sharding)
    _column_major("ravel", order, ("C", "F", "A", "K", None))
    return reshape(a, (-1,), order=order)


def transpose(a, axes=None):
    """``a`` with its axes permuted (reversed when ``axes`` is None)."""
    a = _arr("transpose", a)
    ndim = _ndim(a)
    if axes is None:
        perm = tuple(reversed(range(ndim)))
    else:
        perm = tuple(canonicalize_axis(ax, ndim) for ax in axes)
        if sorted(perm) != list(range(ndim)):  # a TypeError in JAX (NumPy: ValueError)
            raise TypeError(f"transpose permutation isn't a permutation of operand "
                            f"dimensions, got permutation {tuple(axes)} for operand shape "
                            f"{_shape(a)}.")
    return a if perm == tuple(range(ndim)) else lax.transpose(a, perm)


def _transpose_all(a):
    """``a.T``: all axes reversed."""
    return transpose(a)


def permute_dims(a, /, axes):
    """Array API name of ``transpose``."""
    return transpose(a, axes)


def matrix_transpose(x, /):
    """Swap the last two axes (a stack of matrices transposed)."""
    x = _arr("matrix_transpose", x)
    ndim = _ndim(x)
    if ndim < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={ndim}")
    return transpose(x, tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))


def swapaxes(a, axis1, axis2):
    """``a`` with two axes exchanged."""
    a = _arr("swapaxes", a)
    perm = list(range(_ndim(a)))
    i, j = canonicalize_axis(axis1, len(perm)), canonicalize_axis(axis2, len(perm))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def _axis_tuple(axis):
    return (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)


def moveaxis(a, source, destination):
    """``a`` with the ``source`` axes moved to positions ``destination``."""
    a = _arr("moveaxis", a)
    ndim = _ndim(a)
    src = [canonicalize_axis(s, ndim) for s in _axis_tuple(source)]
    dst = [canonicalize_axis(d, ndim) for d in _axis_tuple(destination)]
    if len(src) != len(dst):
        raise ValueError("Inconsistent number of elements: "
                         f"{len(src)} vs {len(dst)}")
    perm = [i for i in range(ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return transpose(a, perm)


def squeeze(a, axis=None):
    """``a`` without the given size-1 axes (all size-1 axes when ``axis`` is None)."""
    a = _arr("squeeze", a)
    shape = _shape(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = canonicalize_axes(axis, len(shape))
        if any(shape[i] != 1 for i in axes):
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal "
                             f"to one, got shape={shape} and dimensions={axes}")
    return lax.squeeze(a, axes) if axes else a


def expand_dims(a, axis):
    """``a`` with size-1 axes inserted at ``axis`` (positions in the result)."""
    a = _arr("expand_dims", a)
    axes = _axis_tuple(axis)
    axes = canonicalize_axes(axes, _ndim(a) + len(axes))
    return lax.expand_dims(a, axes) if axes else a


# --- broadcasting --------------------------------------------------------------------------

def broadcast_shapes(*shapes):
    """The shape NumPy broadcasting gives arrays of ``shapes`` (ValueError if none)."""
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    try:
        return _broadcast_shapes(*shapes, name="broadcast_shapes")
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}") from None


def broadcast_to(array, shape, *, out_sharding=None):
    """``array`` replicated to ``shape`` by NumPy's broadcasting rules."""
    if out_sharding is not None:
        refuse_out_sharding("jnp.broadcast_to", out_sharding)
    array = _arr("broadcast_to", array)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(map(operator.index,
                                                                            shape))
    check_broadcast_to(get_aval(array), shape)
    return broadcast_to_shape(array, shape)


def broadcast_arrays(*args):
    """The arguments broadcast to their common shape."""
    arrays = [_arr("broadcast_arrays", a) for a in args]
    shape = broadcast_shapes(*map(_shape, arrays))
    return [broadcast_to(a, shape) for a in arrays]


def _atleast(name, min_ndim, place, arys):
    """``atleast_Nd``: each low-rank argument reshaped by ``place(shape)``; a list if many."""
    out = []
    for a in arys:
        a = _arr(name, a)
        out.append(reshape(a, place(_shape(a))) if _ndim(a) < min_ndim else a)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    return _atleast("atleast_1d", 1, lambda s: (1,), arys)


def atleast_2d(*arys):
    return _atleast("atleast_2d", 2, lambda s: (1,) + s if s else (1, 1), arys)


def atleast_3d(*arys):
    """0-d -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1), as NumPy."""
    return _atleast("atleast_3d", 3,
                    lambda s: {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)], arys)


# --- joining -------------------------------------------------------------------------------

def _sequence(name, arrays):
    if isinstance(arrays, (Array, Tracer, np.ndarray)):
        return list(arrays)  # an array is a sequence of its rows, as in NumPy
    return [_arr(name, a) for a in arrays]


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along an existing ``axis`` (flattened first when ``axis`` is None)."""
    arrays = _sequence("concatenate", arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    _check_ranks([_shape(a) for a in arrays])
    if _ndim(arrays[0]) == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, _ndim(arrays[0]))
    arrays = promote_dtypes(*arrays)
    if dtype is not None:
        arrays = [lax.convert_element_type(a, dtype) for a in arrays]
    _check_concatenable([_shape(a) for a in arrays], axis)
    return arrays[0] if len(arrays) == 1 else lax.concatenate(arrays, axis)


def _check_ranks(shapes):
    """TypeError (JAX's kind; NumPy's is ValueError) unless ``shapes`` have one rank."""
    if len({len(s) for s in shapes}) > 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: "
                        f"got {', '.join(map(str, shapes))}.")


def _check_concatenable(shapes, axis):
    """TypeError (as ``_check_ranks``) unless ``shapes`` agree off ``axis``."""
    if len({s[:axis] + s[axis + 1:] for s in shapes}) > 1:
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions "
                        f"other than the one being concatenated: "
                        f"{', '.join(map(str, shapes))} along axis {axis}")


def concat(arrays, /, *, axis=0):
    """Array API name of ``concatenate``."""
    return concatenate(arrays, axis)


def stack(arrays, axis=0, out=None, dtype=None):
    """Join equal-shaped arrays along a new ``axis``."""
    arrays = _sequence("stack", arrays)
    if not arrays:
        raise ValueError("Need at least one array to stack.")
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"All input arrays must have the same shape. Got "
                         f"{', '.join(str(_shape(a)) for a in arrays)}.")
    axis = canonicalize_axis(axis, _ndim(arrays[0]) + 1)
    return concatenate([expand_dims(a, axis) for a in arrays], axis, dtype=dtype)


def hstack(tup, dtype=None):
    """Join along the second axis (the first for 1-D arrays)."""
    arrays = [atleast_1d(a) for a in _sequence("hstack", tup)]
    return concatenate(arrays, 0 if arrays and _ndim(arrays[0]) == 1 else 1, dtype=dtype)


def vstack(tup, dtype=None):
    """Join along the first axis, 1-D arrays becoming rows."""
    return concatenate([atleast_2d(a) for a in _sequence("vstack", tup)], 0, dtype=dtype)


def dstack(tup, dtype=None):
    """Join along the third axis (``atleast_3d`` first)."""
    return concatenate([atleast_3d(a) for a in _sequence("dstack", tup)], 2, dtype=dtype)


def column_stack(tup):
    """Join 1-D arrays as columns (and 2-D arrays along their second axis)."""
    arrays = [reshape(a, (-1, 1)) if _ndim(a) < 2 else a
              for a in _sequence("column_stack", tup)]
    return concatenate(arrays, 1)


# --- splitting -----------------------------------------------------------------------------

def _slice_along(x, axis, start, stop):
    return getitem(x, (slice(None),) * axis + (slice(start, stop),))


def _split(name, ary, indices_or_sections, axis, equal):
    """One ``lax.split``: of ``sections`` parts (the first ``n % sections`` one element
    longer, for array_split), or cut at given indices, which (as in JAX, unlike NumPy)
    must not decrease or leave the axis."""
    ary = _arr(name, ary)
    axis = canonicalize_axis(axis, _ndim(ary))
    n = _shape(ary)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = operator.index(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        if equal and n % sections:
            raise ValueError(f"array split does not result in an equal division: rest is "
                             f"{n % sections}")
        size, extra = divmod(n, sections)
        sizes = [size + (i < extra) for i in range(sections)]
    else:
        cuts = [operator.index(i) for i in concrete_value(name, indices_or_sections).tolist()] \
            if isinstance(indices_or_sections, (Array, Tracer)) else \
            [operator.index(i) for i in indices_or_sections]
        sizes = np.diff([0] + cuts + [n]).tolist()
    return list(lax.split(ary, sizes, axis))


def split(ary, indices_or_sections, axis=0):
    """Equal parts (an int) or parts between given indices along ``axis``."""
    return _split("split", ary, indices_or_sections, axis, equal=True)


def array_split(ary, indices_or_sections, axis=0):
    """Like ``split``, but a number of sections need not divide the axis evenly."""
    return _split("array_split", ary, indices_or_sections, axis, equal=False)


def _split_min_ndim(name, ary, min_ndim):
    ary = _arr(name, ary)
    if _ndim(ary) < min_ndim:
        raise ValueError(f"{name} only works on arrays of {min_ndim} or more dimensions")
    return ary


def hsplit(ary, indices_or_sections):
    ary = _split_min_ndim("hsplit", ary, 1)
    return split(ary, indices_or_sections, 1 if _ndim(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    return split(_split_min_ndim("vsplit", ary, 2), indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    return split(_split_min_ndim("dsplit", ary, 3), indices_or_sections, 2)


# --- replicating ---------------------------------------------------------------------------

def tile(A, reps):
    """``A`` repeated ``reps[i]`` times along each axis (new leading axes where ``reps``
    is longer than ``A``'s rank)."""
    A = _arr("tile", A)
    reps = _axis_tuple(reps)
    ndim = max(len(reps), _ndim(A))
    reps = (1,) * (ndim - len(reps)) + tuple(map(operator.index, reps))
    shape = (1,) * (ndim - _ndim(A)) + _shape(A)
    return lax.tile(reshape(A, shape), reps)


def repeat(a, repeats, axis=None, *, total_repeat_length=None, out_sharding=None):
    """Each element of ``a`` repeated ``repeats`` times (a scalar, or one count each).

    Counts given as an array must be concrete, unless ``total_repeat_length`` fixes the
    result's length (extra positions repeat the last element; missing ones are cut).
    """
    if out_sharding is not None:
        refuse_out_sharding("jnp.repeat", out_sharding)
    a = _arr("repeat", a)
    if isinstance(repeats, (list, tuple)):
        repeats = np.asarray(repeats)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, _ndim(a))
    n = _shape(a)[axis]
    if isinstance(repeats, (int, np.integer)) or (not isinstance(repeats, Tracer) and
                                                  np.ndim(repeats) == 0):
        count = operator.index(np.asarray(repeats).item()) if not isinstance(repeats, int) \
            else repeats
        if total_repeat_length is not None and total_repeat_length != n * count:
            repeats = np.full(n, count)
        else:
            return _repeat_scalar(a, count, axis)
    if total_repeat_length is None:
        counts = np.broadcast_to(_concrete_repeats(repeats), (n,))
        positions = np.repeat(np.arange(n), counts)
    else:
        positions = _repeat_positions(to_array(repeats), n, total_repeat_length)
    return take(a, positions, axis=axis, mode="promise_in_bounds")


def _concrete_repeats(repeats):
    try:
        return concrete_value("repeat", repeats)
    except ConcretizationTypeError as e:
        raise ConcretizationTypeError(
            f"{e}\nWhen jit-compiling jnp.repeat, the total number of repeats must be static. "
            "To fix this, either specify a static value for `repeats`, or pass a static value "
            "to `total_repeat_length`.") from None


def _repeat_scalar(a, count, axis):
    """Insert an axis of ``count`` copies after ``axis``, then merge the two."""
    shape = _shape(a)
    expanded_shape = shape[:axis + 1] + (count,) + shape[axis + 1:]
    dims = [d if d <= axis else d + 1 for d in range(len(shape))]
    expanded = lax.broadcast_in_dim(a, expanded_shape, dims)
    return reshape(expanded, shape[:axis] + (shape[axis] * count,) + shape[axis + 1:])


def _repeat_positions(repeats, n, length):
    """Which source element each of ``length`` outputs copies: the number of blocks ending
    at or before it (a cumulative sum of block ends), clamped to the last element."""
    ends = lax.cumsum(broadcast_to(lax.convert_element_type(repeats, dtypes.default_int()),
                                   (n,)), 0)
    marks = creation.zeros(length, dtypes.default_int()).at[ends].add(1, mode="drop")
    return ufuncs.minimum(lax.cumsum(marks, 0), n - 1)


# --- reversing and rotating ----------------------------------------------------------------

def flip(m, axis=None):
    """``m`` reversed along ``axis`` (all axes when None). A repeated axis is lax.rev's
    TypeError, as in JAX (NumPy: ValueError)."""
    m = _arr("flip", m)
    ndim = _ndim(m)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(canonicalize_axis(a, ndim) for a in
                     ((axis,) if isinstance(axis, (int, np.integer)) else axis))
    return lax.rev(m, axes) if axes else m


def fliplr(m):
    m = _arr("fliplr", m)
    if _ndim(m) < 2:
        raise ValueError("Input must be >= 2-d.")
    return flip(m, 1)


def flipud(m):
    m = _arr("flipud", m)
    if _ndim(m) < 1:
        raise ValueError("Input must be >= 1-d.")
    return flip(m, 0)


def roll(a, shift, axis=None):
    """Elements shifted cyclically by ``shift`` along ``axis`` (flattened when None)."""
    a = _arr("roll", a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    shifts = tuple(shift) if isinstance(shift, (tuple, list)) else (shift,)
    axes = _axis_tuple(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift {shift} and axis {axis} must have the same length")
    for s, ax in zip(shifts, axes):
        a = _roll_axis(a, s, canonicalize_axis(ax, _ndim(a)))
    return a


def _roll_axis(a, shift, axis):
    """Read a window of length n from ``a`` joined to itself, starting at ``-shift mod n``."""
    n = _shape(a)[axis]
    if n == 0:
        return a
    doubled = concatenate([a, a], axis)
    if isinstance(shift, (int, np.integer)):
        start = -int(shift) % n
        return _slice_along(doubled, axis, start, start + n)
    shift = lax.convert_element_type(shift, dtypes.default_int())
    start = ufuncs.remainder(ufuncs.negative(shift), n)
    starts = [start if d == axis else 0 for d in range(_ndim(a))]
    return lax.dynamic_slice(doubled, starts, _shape(a))


def rot90(m, k=1, axes=(0, 1)):
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes``."""
    m = _arr("rot90", m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    ax0, ax1 = (canonicalize_axis(ax, _ndim(m)) for ax in axes)
    if ax0 == ax1:
        raise ValueError("Axes must be different.")
    k = operator.index(k) % 4
    if k == 2:
        return flip(m, (ax0, ax1))
    if k == 1:
        return swapaxes(flip(m, ax1), ax0, ax1)
    if k == 3:
        return flip(swapaxes(m, ax0, ax1), ax1)
    return m


# --- selecting -----------------------------------------------------------------------------

def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` holds, else ``y`` (broadcast together, dtypes promoted).

    With only ``condition``, the indices of its non-zero elements (``nonzero``).
    """
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    check_arraylike("where", condition, x, y)  # (x or y alone: the other's None, as JAX)
    condition = _as_bool(to_array(condition))
    x, y = promote_dtypes(x, y)
    condition, x, y = broadcast_arrays(condition, x, y)
    return lax.select_n(condition, y, x)


def _as_bool(x):
    """``x != 0`` unless ``x`` is already boolean (typed keys are not numbers: TypeError)."""
    if dtypes.is_bool(get_aval(x).dtype):
        return x
    check_keys("not_equal", (x, 0))
    return lax.ne(x, lax.convert_element_type(to_array(0), get_aval(x).dtype))


def select(condlist, choicelist, default=0):
    """The first choice whose condition holds, element-wise; ``default`` where none does.
    A non-boolean condition means ``!= 0`` (JAX's ``astype(bool)``; NumPy refuses it)."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs "
                         f"{len(choicelist)})")
    if not condlist:
        raise ValueError("condlist must be non-empty")
    check_arraylike("select", *condlist, *choicelist, default)
    # Applied last to first, so the first true condition is the one that shows.
    result = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        result = where(cond, choice, result)
    return result


def nonzero(a, *, size=None, fill_value=None):
    """The indices of the non-zero elements of ``a``, one index array per axis.

    Their number depends on the values: ``a`` must be concrete unless ``size`` is given
    (the first ``size`` indices are kept; missing ones become ``fill_value``, default 0).
    """
    a = _arr("nonzero", a)
    if _ndim(a) == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    mask = _as_bool(ravel(a))
    if size is None:
        try:
            size = int(np.count_nonzero(concrete_value("nonzero", mask)))
        except ConcretizationTypeError as e:
            raise ConcretizationTypeError(
                f"{e}\nThe size argument of jnp.nonzero must be statically specified to use "
                "jnp.nonzero within JAX transformations.") from None
    flat, valid = first_true_positions(mask, operator.index(size))
    coords = _unravel(flat, _shape(a))
    fills = _pairs_per_axis(fill_value, _ndim(a))
    return tuple(where(valid, c, lax.convert_element_type(to_array(f), get_aval(c).dtype))
                 for c, f in zip(coords, fills))


def _pairs_per_axis(fill_value, ndim):
    if fill_value is None:
        return [0] * ndim
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != ndim:
            raise ValueError(f"fill_value must be a scalar or a tuple of length {ndim}; got "
                             f"{fill_value}")
        return list(fill_value)
    return [fill_value] * ndim


def first_true_positions(mask, size):
    """Flat positions of the first ``size`` true entries of 1-D ``mask``, and which of the
    ``size`` slots hold one. A stable sort of (not mask, position) brings them first."""
    n = _shape(mask)[0]
    int_dtype = dtypes.default_int()
    positions = lax.iota(int_dtype, n)
    _, order = lax.sort((lax.convert_element_type(lax.bitwise_not(mask), int_dtype), positions),
                        dimension=0, is_stable=True, num_keys=1)
    count = lax.reduce_sum(lax.convert_element_type(mask, int_dtype), (0,))
    if size > n:
        order = concatenate([order, lax.broadcast_in_dim(to_array(np.asarray(0, int_dtype)),
                                                         (size - n,), ())])
    first = _slice_along(order, 0, 0, size)
    valid = lax.lt(lax.iota(int_dtype, size), lax.broadcast_in_dim(count, (size,), ()))
    return first, valid


def _unravel(flat, shape):
    """Row-major coordinates of flat positions in ``shape``."""
    coords = []
    for d in reversed(shape[1:]):
        coords.append(lax.rem(flat, lax.full_like(flat, d)))
        flat = lax.div(flat, lax.full_like(flat, d))
    return [flat] + coords[::-1]


def argwhere(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements, one row per element."""
    a = _arr("argwhere", a)
    coords = nonzero(atleast_1d(a), size=size, fill_value=fill_value)
    out = stack(coords, axis=1)
    return out[:, :0] if _ndim(a) == 0 else out


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements of ``a`` flattened."""
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


# --- diagonals and triangles ---------------------------------------------------------------

def diagonal(a, offset=0, axis1=0, axis2=1):
    """The ``offset`` diagonal of the planes ``(axis1, axis2)``, as a last axis.

    Moving the two axes last and merging them, the diagonal is a strided slice.
    """
    a = _arr("diagonal", a)
    ndim = _ndim(a)
    if ndim < 2:
        raise ValueError("diagonal requires an array of at least two dimensions.")
    ax1, ax2 = canonicalize_axis(axis1, ndim), canonicalize_axis(axis2, ndim)
    if ax1 == ax2:
        raise ValueError("axis1 and axis2 must not be equal")
    a = moveaxis(a, (ax1, ax2), (-2, -1))
    *batch, rows, cols = _shape(a)
    offset = operator.index(offset)
    length = builtins.max(0, builtins.min(rows, cols - offset) if offset >= 0 else
                          builtins.min(rows + offset, cols))
    flat = reshape(a, tuple(batch) + (rows * cols,))
    start = offset if offset >= 0 else -offset * cols
    return getitem(flat, (Ellipsis, slice(start, start + length * (cols + 1), cols + 1))) \
        if length else getitem(flat, (Ellipsis, slice(0, 0)))


def diag(v, k=0):
    """The ``k``-th diagonal of a 2-D ``v``, or a square matrix with 1-D ``v`` on it."""
    v = _arr("diag", v)
    if _ndim(v) == 2:
        return diagonal(v, k)
    if _ndim(v) != 1:
        raise ValueError("diag input must be 1d or 2d")
    k = operator.index(k)
    n = _shape(v)[0] + builtins.abs(k)
    values = _zeros_after(v, 0, builtins.abs(k))
    # Row i holds v[i] when k >= 0 (entry (i, i + k)); column j holds v[j] when k < 0.
    values = lax.broadcast_in_dim(values, (n, n), (0,) if k >= 0 else (1,))
    return where(_diagonal_mask(n, n, k, "eq"), values, lax.full_like(values, 0))


def _diagonal_mask(rows, cols, k, compare):
    """``col - row <compare> k`` over an ``(rows, cols)`` grid."""
    int_dtype = dtypes.default_int()
    row = lax.broadcasted_iota(int_dtype, (rows, cols), 0)
    col = lax.broadcasted_iota(int_dtype, (rows, cols), 1)
    return getattr(lax, compare)(lax.sub(col, row), lax.full_like(row, k))


def diagflat(v, k=0):
    """A square matrix with the flattened ``v`` on its ``k``-th diagonal."""
    return diag(ravel(_arr("diagflat", v)), k)


def _triangle(name, m, k, compare):
    m = _arr(name, m)
    if _ndim(m) < 2:
        raise ValueError(f"Argument to jax.numpy.{name} must be at least 2D")
    rows, cols = _shape(m)[-2:]
    mask = lax.broadcast_in_dim(_diagonal_mask(rows, cols, operator.index(k), compare),
                                _shape(m), (_ndim(m) - 2, _ndim(m) - 1))
    return lax.select_n(mask, lax.full_like(m, 0), m)


def tril(m, k=0):
    """``m`` with the entries above the ``k``-th diagonal zeroed (last two axes)."""
    return _triangle("tril", m, k, "le")


def triu(m, k=0):
    """``m`` with the entries below the ``k``-th diagonal zeroed (last two axes)."""
    return _triangle("triu", m, k, "ge")


# --- inserting and deleting (concrete positions) -------------------------------------------

def append(arr, values, axis=None):
    """``values`` joined to the end of ``arr`` (both flattened when ``axis`` is None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def _concrete_obj(name, obj):
    """``obj`` (not a slice: insert's or delete's second argument) as a concrete NumPy
    array; a list is refused, as in JAX."""
    check_arraylike(name, obj, first=1)
    return concrete_value(name, obj) if isinstance(obj, (Array, Tracer)) else np.asarray(obj)


def _positions(name, obj, n):
    """Concrete positions along an axis of length ``n`` from an int, slice or int array."""
    if isinstance(obj, slice):
        return np.arange(*obj.indices(n))
    obj = _concrete_obj(name, obj)
    if obj.dtype.kind not in "iu" and obj.size:  # ValueError in JAX, IndexError in NumPy
        raise ValueError(f"jnp.{name}: obj must be integer typed; got dtype {obj.dtype}")
    return obj.astype(np.int64)


def _deleted(obj, n, axis):
    """Which of the ``n`` positions along ``axis`` ``obj`` deletes: ``obj`` itself if it is
    a boolean mask (of exactly that length, as in NumPy and JAX), else its positions."""
    mask = None if isinstance(obj, slice) else _concrete_obj("delete", obj)
    if mask is not None and mask.dtype == bool:
        if mask.shape != (n,):
            raise ValueError(f"jnp.delete: a boolean obj must be one-dimensional with the "
                             f"length of axis {axis} ({n}); got shape {mask.shape}")
        return mask
    positions = _positions("delete", obj, n).ravel()
    if np.any((positions < -n) | (positions >= n)):
        raise IndexError(f"index out of bounds for axis {axis} with size {n}")
    mask = np.zeros(n, bool)
    mask[positions] = True
    return mask


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """``arr`` without the entries at positions ``obj`` (an int, a slice, int positions or a
    boolean mask) along ``axis``."""
    arr = _arr("delete", arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = canonicalize_axis(axis, _ndim(arr))
    keep = ~_deleted(obj, _shape(arr)[axis], axis)
    return take(arr, np.flatnonzero(keep), axis=axis, mode="promise_in_bounds")


def insert(arr, obj, values, axis=None):
    """``arr`` with ``values`` inserted before positions ``obj`` along ``axis``.

    With concrete positions, the result is a fixed rearrangement of ``arr`` joined to the
    (broadcast) values, so it is one concatenate and one gather.
    """
    arr = _arr("insert", arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = canonicalize_axis(axis, _ndim(arr))
    n = _shape(arr)[axis]
    positions = _positions("insert", obj, n)
    scalar_obj = positions.ndim == 0
    positions = positions.ravel()
    if np.any((positions < -n) | (positions > n)):
        raise IndexError(f"index out of bounds for axis {axis} with size {n}")
    positions = np.where(positions < 0, positions + n, positions)
    values = lax.convert_element_type(_arr("insert", values, 2), get_aval(arr).dtype)
    values = reshape(values, (1,) * (_ndim(arr) - _ndim(values)) + _shape(values)) \
        if _ndim(values) < _ndim(arr) else values
    if scalar_obj:
        # NumPy: a scalar position inserts values[0:k] as a block (like arr[:, p:p+1] = ...).
        values = moveaxis(values, 0, axis)
        count = _shape(values)[axis]
        positions = np.repeat(positions, count)
    else:
        count = len(positions)
    target = list(_shape(arr))
    target[axis] = count
    values = broadcast_to(values, tuple(target))
    order = np.argsort(positions, kind="stable")
    new_slots = positions[order] + np.arange(count)
    source = np.empty(n + count, np.int64)
    source[new_slots] = n + order
    source[np.setdiff1d(np.arange(n + count), new_slots)] = np.arange(n)
    return take(concatenate([arr, values], axis), source, axis=axis,
                mode="promise_in_bounds")


def rollaxis(a, axis, start=0):
    """Move ``axis`` to just before position ``start`` (NumPy's older ``moveaxis``)."""
    ndim = get_aval(a).ndim
    axis = canonicalize_axis(axis, ndim)
    if not -ndim <= start <= ndim:
        raise ValueError(f"start={start} must satisfy {-ndim} <= start <= {ndim}")
    start = start % (ndim + 1) if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start) if ndim else to_array(a)


def resize(a, new_shape):
    """``a`` flattened, repeated as often as needed and cut to ``new_shape``."""
    check_arraylike("resize", a)
    shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
    if any(d < 0 for d in shape):
        raise ValueError("All elements of `new_shape` must be non-negative")
    flat = ravel(a)
    size = math.prod(shape)
    if not get_aval(flat).size:  # nothing to repeat: zeros, as NumPy and JAX give
        return creation.zeros(shape, get_aval(flat).dtype)
    repeats = -(-size // get_aval(flat).size) if size else 0
    return reshape(concatenate([flat] * repeats)[:size] if repeats else flat[:0], shape)


def trim_zeros(filt, trim="fb", axis=None):
    """``filt`` without its leading ('f') and/or trailing ('b') all-zero slices along each
    axis in ``axis`` (all by default). The result's shape depends on the values, so
    ``filt`` must be concrete."""
    filt = _arr("trim_zeros", filt)
    value = concrete_value("trim_zeros", filt)
    axes = set(canonicalize_axes(axis, value.ndim))
    trim = trim.lower()
    index = []
    for ax in range(value.ndim):
        if ax not in axes:
            index.append(builtins.slice(None))
            continue
        (kept,) = np.nonzero(value.any(axis=tuple(i for i in range(value.ndim) if i != ax)))
        if not kept.size:  # all zeros: trimming either end removes them all
            index.append(builtins.slice(0, 0) if "f" in trim or "b" in trim
                         else builtins.slice(None))
            continue
        index.append(builtins.slice(kept[0] if "f" in trim else None,
                                    kept[-1] + 1 if "b" in trim else None))
    return getitem(filt, tuple(index))


def _block(xs):
    """``(array, depth)`` of a nested list: the innermost lists join along the last axis,
    the next along the one before, operands first padded to a common rank."""
    if isinstance(xs, tuple):
        raise ValueError(f"nbjax.numpy.block does not allow tuples, got {xs}")
    if not isinstance(xs, list):
        return _arr("block", xs), 1
    if not xs:
        raise ValueError("nbjax.numpy.block does not allow empty list arguments")
    parts, depths = zip(*(_block(x) for x in xs))
    if builtins.any(d != depths[0] for d in depths):
        raise ValueError("Mismatched list depths in nbjax.numpy.block")
    rank = builtins.max(depths[0], *(_ndim(x) for x in parts))
    parts = [reshape(x, (1,) * (rank - _ndim(x)) + _shape(x)) for x in parts]
    return concatenate(parts, axis=-depths[0]), depths[0] + 1


def block(arrays):
    """One array assembled from nested lists of blocks (``np.block``)."""
    return _block(arrays)[0]


def _bit_weights(bitorder):
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = np.arange(8, dtype=np.uint8)
    return bits[::-1].copy() if bitorder == "big" else bits


def packbits(a, axis=None, bitorder="big"):
    """The truth values of ``a`` along ``axis`` (of its ravel if None), packed 8 to a uint8
    (zero-padded at the end)."""
    a = _arr("packbits", a)
    if not (dtypes.is_int(get_aval(a).dtype) or dtypes.is_bool(get_aval(a).dtype)):
        raise TypeError("Expected an input array of integer or boolean data type")
    bits = _bit_weights(bitorder)
    a = lax.convert_element_type(lax.ne(a, lax.full_like(a, 0)), dtypes.uint8)
    if axis is None:
        a, axis = ravel(a), 0
    a = swapaxes(a, axis, -1)
    remainder = _shape(a)[-1] % 8
    if remainder:
        a = lax.pad(a, np.uint8(0), [(0, 0, 0)] * (_ndim(a) - 1) + [(0, 8 - remainder, 0)])
    a = reshape(a, _shape(a)[:-1] + (_shape(a)[-1] // 8, 8))
    packed = lax.reduce_sum(lax.shift_left(a, lax.broadcast_to_rank(to_array(bits), _ndim(a))),
                            (_ndim(a) - 1,))
    return swapaxes(packed, axis, -1)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of the uint8 ``a`` along ``axis`` (of its ravel if None), 8 per byte, as
    uint8 0/1; ``count`` keeps that many (padding with zeros if larger)."""
    a = _arr("unpackbits", a)
    if get_aval(a).dtype != dtypes.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    bits = np.left_shift(np.uint8(1), _bit_weights(bitorder))
    if axis is None:
        a, axis = ravel(a), 0
    a = swapaxes(a, axis, -1)
    masked = lax.bitwise_and(lax.expand_dims(a, (_ndim(a),)),
                             lax.broadcast_to_rank(to_array(bits), _ndim(a) + 1))
    unpacked = lax.convert_element_type(lax.gt(masked, lax.full_like(masked, 0)), dtypes.uint8)
    unpacked = reshape(unpacked, _shape(unpacked)[:-2] + (-1,))
    if count is not None:
        n = _shape(unpacked)[-1]
        unpacked = _zeros_after(unpacked, -1, count - n) if count > n else \
            unpacked[..., :count]
    return swapaxes(unpacked, axis, -1)

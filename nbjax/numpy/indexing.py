"""NumPy indexing: ``x[idx]``, the ``x.at[idx]`` updates, ``take`` and index builders.

Every index expression is first *normalized*: ``Ellipsis`` expanded, ``None`` turned into a
new size-1 axis, concrete boolean masks turned into integer arrays, so that each axis of the
(expanded) array has exactly one entry: a slice, an integer, or an integer array.

Reading then takes one of two routes, as in JAX:

- only slices and integers within bounds known at trace time: ``lax.slice`` / ``lax.rev`` /
  ``lax.squeeze``; with traced or out-of-range integers, one ``lax.dynamic_slice`` of the
  whole array instead (so checkify's index checks see them); no gather;
- anything else (integer arrays; a traced or out-of-range integer beside a slice whose step
  is not 1 or -1): one ``lax.gather``.

A ``Slice`` (``nbjax.ds(start, size)``) is a slice whose start may be traced: it reads and
writes through the gather route, as a window starting at a coordinate.

Updates (``x.at[idx].set(y)`` ...) always use one ``lax.scatter*``. Gather and scatter share
the description built by ``_gather_plan``: unit-step slices become *windows* (contiguous
blocks copied whole), integers and arrays become coordinates, and strided slices become
coordinate ranges with their own output axis.

Out-of-bounds indices follow JAX, not NumPy: reading clamps (``promise_in_bounds``), updates
are dropped (``drop``), ``take`` fills (NaN for floats); each accepts ``mode=``.
"""

import math
import operator
import warnings

import numpy as np

from .. import lax
from ..core import Array, EvalTrace, Tracer, dtypes, get_aval, pytree
from ..core.trace import current_trace
from ..core.errors import NonConcreteBooleanIndexError
from ..lax.standard import scalar_like
from . import creation, ufuncs
from .util import (broadcast_to_shape, canonicalize_axis, check_arraylike, check_broadcast_to,
                   check_keys, concrete_value, promote_dtypes, select_where, to_array)

__all__ = ["NonConcreteBooleanIndexError", "Slice", "ds", "take", "take_along_axis", "indices",
           "ix_", "unravel_index", "ravel_multi_index", "diag_indices", "diag_indices_from",
           "tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from"]


# --- normalizing an index ------------------------------------------------------------------

@pytree.register_pytree_node_class
class Slice:
    """``size`` elements from ``start`` every ``stride``, where ``start`` may be traced
    (``jax.ds``): ``x[ds(i, 2)]`` is ``x[i:i + 2]`` for a traced ``i``. The size is static.
    As in JAX, an index that ``dynamic_slice`` can read (integers, unit strides) counts a
    negative start from the end and moves a window that does not fit; otherwise reads clamp
    each coordinate and writes drop a window that does not fit, except one as long as its
    axis, which is the whole axis whatever its start. A stride of 0 repeats ``x[start]``.

    A pytree, as JAX's is, so that a Slice with a traced start can be an argument of ``jit``
    or ``vmap``: an integer start is static (part of the tree's structure), any other a leaf.
    """

    __slots__ = ("start", "size", "stride")

    def __init__(self, start, size, stride=1):
        try:
            self.size, self.stride = operator.index(size), operator.index(stride)
        except TypeError:
            raise TypeError(f"Slice size and stride must be static integers, got size "
                            f"{size!r} and stride {stride!r}") from None
        if self.size < 0 or self.stride < 0:
            raise ValueError(f"Slice needs size >= 0 and stride >= 0, got size {self.size} "
                             f"and stride {self.stride}")
        self.start = start

    @classmethod
    def from_slice(cls, s, size):
        """The ``Slice`` that ``s`` (a Python slice, step >= 1) takes on an axis of ``size``."""
        start, count, step = _static_slice_bounds(s, size)
        if step < 1:
            raise ValueError(f"slice must have a step >= 1 (found: {step})")
        return cls(start, count, step)

    def __eq__(self, other):
        """Field by field, as JAX's dataclass compares (so, like it, not hashable)."""
        if type(other) is not Slice:
            return NotImplemented
        return (self.start, self.size, self.stride) == (other.start, other.size, other.stride)

    __hash__ = None

    def __repr__(self):
        return f"Slice(start={self.start}, size={self.size}, stride={self.stride})"

    def tree_flatten(self):
        if isinstance(self.start, (int, np.integer)):
            return (), (self.start, self.size, self.stride)
        return (self.start,), (None, self.size, self.stride)

    @classmethod
    def tree_unflatten(cls, aux, children):
        start, size, stride = aux
        return cls(children[0] if children else start, size, stride)


def ds(start, size=None, stride=None):
    """A ``Slice`` as Python's slice syntax reads (``jax.ds``, ``dslice``): ``ds(None)`` is
    ``:``, ``ds(j)`` is ``:j``, ``ds(i, n)`` is ``i:i + n`` and ``ds(i, n, s)`` takes every
    ``s``-th of ``n`` elements from ``i``; ``i`` may be a traced integer."""
    if start is None:
        return slice(None)
    if size is None:
        return Slice(0, start)
    return Slice(start, size, 1 if stride is None else stride)


def _is_slice(i):
    return isinstance(i, (slice, Slice))


def _is_array(i):
    return isinstance(i, (Array, Tracer, np.ndarray, np.generic))


def _is_concrete(i):
    return not isinstance(i, Tracer)


def _check_index_dtype(dtype):
    if not (dtypes.is_int(dtype) or dtypes.is_bool(dtype)):
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{np.dtype(dtype).name}")


def _as_index_entry(i):
    """One element of an index tuple, with lists made arrays and dtypes checked."""
    if i is None or i is Ellipsis or isinstance(i, slice):
        return i
    if isinstance(i, Slice):
        if not isinstance(i.start, (int, np.integer)):
            _check_index_dtype(get_aval(i.start).dtype)
            if get_aval(i.start).ndim:
                raise TypeError(f"Slice start must be a scalar, got shape "
                                f"{get_aval(i.start).shape}")
        return i
    if isinstance(i, (bool, np.bool_)):
        return bool(i)
    if isinstance(i, (int, np.integer)):
        return int(i)
    if isinstance(i, (list, tuple)):
        i = np.asarray(i) if len(i) else np.zeros(0, dtypes.default_int())
    if isinstance(i, (float, complex)):
        _check_index_dtype(np.result_type(i))
    if not _is_array(i):
        raise TypeError(f"Indexing an array with {type(i).__name__} {i!r} is not supported; "
                        "use integers, slices, None, ..., or integer or boolean arrays.")
    _check_index_dtype(i.dtype)
    if isinstance(i, (np.ndarray, np.generic)) and np.ndim(i) == 0 and dtypes.is_int(i.dtype):
        return int(i)
    return i


def _axes_consumed(i):
    """How many axes of the array an index entry uses up."""
    if i is None or i is Ellipsis or isinstance(i, bool):
        return 0
    if _is_array(i) and dtypes.is_bool(i.dtype):
        return np.ndim(i)
    return 1


def _normalize_index(shape, idx):
    """Expand ``idx`` into ``(new_axes, entries)`` with one entry per axis of the array
    after size-1 axes are inserted at ``new_axes`` (for ``None`` and scalar booleans)."""
    if isinstance(idx, list):
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not "
                        "allowed; use `arr[array(seq)]` instead of `arr[seq]`.")
    idx = tuple(map(_as_index_entry, idx if isinstance(idx, tuple) else (idx,)))
    if sum(i is Ellipsis for i in idx) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(map(_axes_consumed, idx))
    if used > len(shape):
        raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but {used} "
                         "were indexed")
    if not any(i is Ellipsis for i in idx):
        idx = idx + (Ellipsis,)
    new_axes, entries, axis = [], [], 0
    for i in idx:
        if i is Ellipsis:
            rest = len(shape) - used
            entries += [slice(None)] * rest
            axis += rest
        elif i is None or isinstance(i, bool):
            # A new size-1 axis; a scalar boolean also selects it all (True) or none (False).
            new_axes.append(len(entries))
            entries.append(slice(None) if i is None else np.arange(int(i)))
        elif _is_array(i) and dtypes.is_bool(i.dtype):
            entries += _boolean_mask_to_integers(i, shape[axis:axis + np.ndim(i)], new_axes,
                                                 len(entries))
            axis += np.ndim(i)
        else:
            entries.append(i)
            axis += 1
    return new_axes, entries


def _boolean_mask_to_integers(mask, axis_sizes, new_axes, position):
    """A concrete mask's integer coordinates (``np.nonzero``); a scalar mask adds an axis."""
    if not _is_concrete(mask):
        raise NonConcreteBooleanIndexError(
            f"Array boolean indices must be concrete; got {get_aval(mask).str_short()}. "
            "A boolean mask selects a number of elements known only at run time; use "
            "jnp.where(mask, x, other) or the size= argument of jnp.nonzero instead.")
    mask = np.asarray(mask)
    if mask.ndim == 0:
        new_axes.append(position)
        return [np.arange(int(mask))]
    # (an empty mask selects nothing along an axis of any size: NumPy and JAX allow it)
    if len(mask.shape) != len(axis_sizes) or \
            any(n not in (0, size) for n, size in zip(mask.shape, axis_sizes)):
        raise IndexError(f"boolean index did not match shape of indexed array in index "
                         f"{position}: got {mask.shape}, expected {tuple(axis_sizes)}")
    return list(np.nonzero(mask))


def _is_static_int(i):
    return isinstance(i, int)


def _is_advanced(i):
    """Integer arrays of rank >= 1 (rank-0 arrays behave as integers)."""
    return _is_array(i) and np.ndim(i) > 0


# --- reading without gather ----------------------------------------------------------------

def _static_slice_bounds(s, size):
    """``(start, count, step)`` of a slice on an axis of ``size``, clamped as NumPy does.

    A traced bound is an IndexError, as in JAX: the count would not be known at trace time
    (``nbjax.ds`` / ``lax.dynamic_slice`` take a traced start with a static size)."""
    if any(isinstance(b, Tracer) for b in (s.start, s.stop, s.step)):
        raise IndexError(f"Slice entries must be static integers. Got {s}; use "
                         "lax.dynamic_slice or nbjax.ds for a traced start.")
    start, stop, step = s.indices(size)
    return start, len(range(start, stop, step)), step


def _slice_bounds(i, size):
    """``(start, count, step)`` of a slice or a ``Slice`` (whose start may be traced)."""
    if isinstance(i, slice):
        return _static_slice_bounds(i, size)
    return i.start, i.size, i.stride


def _fits_dynamic_slice(i):
    """Whether JAX could read this entry with ``dynamic_slice``: an integer, a unit-stride
    ``Slice`` or a slice of step 1 or -1."""
    if isinstance(i, Slice):
        return i.stride == 1
    if isinstance(i, slice):
        return i.step in (None, 1, -1)
    return not _is_advanced(i)


def _read_from_end(i, size):
    """A ``Slice`` with a negative start, counted from the end. JAX does so only where it
    reads the whole index as a ``dynamic_slice`` (see ``getitem``); its gathers and
    scatters take the start as it is (and clamp or drop the window)."""
    if isinstance(i, Slice):
        return Slice(_wrap_negative(i.start, size), i.size)
    return i


# The modes in which JAX may read an index with slices (they clamp, as slices do)
_CLAMPING_MODES = (None, lax.GatherScatterMode.CLIP, lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _basic_read(entries, shape, mode, wrap_negative):
    """Which of JAX's two routes without gather reads ``entries`` (slices and integers, one
    per axis of ``shape``): ``_static_getitem`` when every integer is static and within
    bounds (or, with ``mode`` clip, any static ones), else ``_dynamic_getitem`` when
    ``dynamic_slice`` can read them all in a ``mode`` that clamps; None: gather."""
    for axis, (i, size) in enumerate(zip(entries, shape)):
        if size == 0 and not isinstance(i, slice):
            raise IndexError(f"index is out of bounds for axis {axis} with size 0")
    ints = [(i, size) for i, size in zip(entries, shape) if not isinstance(i, slice)]
    static = all(_is_static_int(i) for i, _ in ints)
    lowest = -1 if wrap_negative else 0
    if static and (mode == lax.GatherScatterMode.CLIP
                   or all(lowest * size <= i < size for i, size in ints)):
        return _static_getitem
    if mode in _CLAMPING_MODES and all(map(_fits_dynamic_slice, entries)):
        return _dynamic_getitem
    return None


def _static_getitem(x, entries, wrap_negative=True):
    """Slices and static integers: lax.slice (+ rev for negative steps), squeeze. Integers
    out of range (with mode clip) are clamped; negative ones count from the end if
    ``wrap_negative`` (``_position``)."""
    shape = get_aval(x).shape
    starts, limits, strides, reversed_axes = [], [], [], []
    for axis, (i, size) in enumerate(zip(entries, shape)):
        if isinstance(i, slice):
            start, count, step = _static_slice_bounds(i, size)
            if step < 0:  # take the same elements in increasing order, then reverse
                start, step = start + (count - 1) * step, -step
                reversed_axes.append(axis)
            first = start if count else 0
            starts.append(first)
            limits.append(first + (count - 1) * step + 1 if count else 0)
            strides.append(step)
        else:
            start = min(max(_position(i, size, wrap_negative), 0), size - 1)
            starts.append(start)
            limits.append(start + 1)
            strides.append(1)
    if (starts, limits) != ([0] * len(shape), list(shape)) or any(s != 1 for s in strides):
        x = lax.slice(x, starts, limits, None if all(s == 1 for s in strides) else strides)
    if reversed_axes:
        x = lax.rev(x, reversed_axes)
    return _squeezed_int_axes(x, entries)


def _dynamic_getitem(x, entries, wrap_negative=True):
    """Slices of step 1 or -1 and integers, some traced or out of range: as JAX, one
    dynamic_slice of the whole array (+ rev for step -1), squeeze. It clamps the window,
    JAX's reading rule, and checkify's index checks see it with the array's shape and the
    index as given (counted from the end if negative and ``wrap_negative``)."""
    starts, sizes, reversed_axes = [], [], []
    for axis, (i, size) in enumerate(zip(entries, get_aval(x).shape)):
        if isinstance(i, slice):
            start, count, step = _static_slice_bounds(i, size)
            if step < 0:  # the same elements in increasing order, then reversed
                start -= count - 1
                reversed_axes.append(axis)
            starts.append(start if count else 0)
            sizes.append(count)
        else:
            starts.append(_position(i, size, wrap_negative))
            sizes.append(1)
    # Of one dtype, as dynamic_slice needs, and arrays: a static start still negative after
    # wrapping (-5 on 3 elements) is then clamped like a traced one, where lax would refuse
    # a negative Python int
    starts = [lax.convert_element_type(i, dtypes.default_int()) for i in starts]
    x = lax.dynamic_slice(x, starts, sizes, allow_negative_indices=False)
    if reversed_axes:
        x = lax.rev(x, reversed_axes)
    return _squeezed_int_axes(x, entries)


def _squeezed_int_axes(x, entries):
    """``x`` without the axes that integer entries index."""
    int_axes = [a for a, i in enumerate(entries) if not isinstance(i, slice)]
    return lax.squeeze(x, int_axes) if int_axes else x


def _output_axes(entries, new_axes):
    """Where the axes that ``None`` adds (at ``new_axes`` among ``entries``) lie in the result,
    whose axes are those of the slices, new axes included, in order."""
    return [sum(isinstance(i, slice) for i in entries[:position]) for position in new_axes]


def _position(i, size, wrap_negative):
    """Where integer index ``i`` points: counted from the end when negative if
    ``wrap_negative`` (NumPy's rule), else as it is, a negative index being out of bounds
    (``wrap_negative_indices=False``), for the mode to clamp, fill or drop."""
    return _wrap_negative(i, size) if wrap_negative else i


def _wrap_negative(i, size):
    """``i + size`` where ``i < 0``: NumPy's negative indices (static or traced).

    Traced indices are first widened to at least the default int, so ``i + size`` fits.
    """
    if isinstance(i, int):
        return i + size if i < 0 else i
    if isinstance(i, (np.ndarray, np.generic)):
        i = np.asarray(i, np.int64)
        return np.where(i < 0, i + size, i)
    dtype = get_aval(i).dtype
    i = lax.convert_element_type(i, dtypes.promote((dtype, False),
                                                   (dtypes.default_int(), False))[0])
    if not dtypes.is_signed_int(dtype):
        return i
    return lax.select_n(lax.lt(i, scalar_like(i, 0)), i, lax.add(i, scalar_like(i, size)))


# --- the gather / scatter description ------------------------------------------------------

class _GatherPlan:
    """How an index expression reads or writes an array of ``shape``.

    ``indices``: coordinates, shape ``batch_shape + (len(indexed_axes),)``;
    ``indexed_axes``: the array axes the coordinates address (``start_index_map``);
    ``window_axes``: array axes copied whole-block (unit-step slices), with ``window_sizes``;
    ``window_out_dims``: where those blocks' axes sit in the result (``offset_dims``);
    ``out_shape``: the result's shape.
    """

    def __init__(self, indices, indexed_axes, window_axes, window_sizes, window_out_dims,
                 out_shape):
        self.indices = indices
        self.indexed_axes = tuple(indexed_axes)
        self.window_axes = tuple(window_axes)
        self.window_sizes = tuple(window_sizes)
        self.window_out_dims = tuple(window_out_dims)
        self.out_shape = tuple(out_shape)

    def collapsed_axes(self, ndim):
        return tuple(a for a in range(ndim) if a not in self.window_axes)

    def slice_sizes(self, ndim):
        sizes = dict(zip(self.window_axes, self.window_sizes))
        return tuple(sizes.get(a, 1) for a in range(ndim))


def _gather_plan(shape, entries, wrap_negative=True):
    """Describe ``entries`` (one per axis of ``shape``) as gather/scatter coordinates
    (integer ones placed by ``_position``).

    The result's axes follow NumPy: integer arrays (and integers, when arrays are present)
    broadcast together into one block of axes, placed where the first of them is when they
    are adjacent, and first otherwise; every slice keeps an axis in its place.
    """
    advanced = [a for a, i in enumerate(entries) if not _is_slice(i)]
    block_shape = np.broadcast_shapes(*(np.shape(entries[a]) for a in advanced))

    # Lay out the result axes: ("slice", axis) per sliced axis, and one ("block",).
    layout = [("slice", a) for a, i in enumerate(entries) if _is_slice(i)]
    if advanced:
        adjacent = advanced == list(range(advanced[0], advanced[0] + len(advanced)))
        slices_before = sum(map(_is_slice, entries[:advanced[0]]))
        layout.insert(slices_before if adjacent else 0, ("block",))
    out_shape, out_dim = [], {}
    for item in layout:
        out_dim[item] = len(out_shape)
        if item == ("block",):
            out_shape += block_shape
        else:
            out_shape.append(_slice_bounds(entries[item[1]], shape[item[1]])[1])

    # Batch axes of the coordinates: every result axis that is not a window.
    window_axes, window_sizes, window_out_dims, batch_dims = [], [], [], []
    for item in layout:
        if item[0] == "slice" and _slice_bounds(entries[item[1]], shape[item[1]])[2] == 1:
            window_axes.append(item[1])
            window_sizes.append(out_shape[out_dim[item]])
            window_out_dims.append(out_dim[item])
        else:
            first = out_dim[item]
            batch_dims += range(first, first + (len(block_shape) if item == ("block",) else 1))
    batch_shape = tuple(out_shape[d] for d in batch_dims)

    def place(coord, dims):
        """``coord`` with its axes moved to result axes ``dims`` within the batch shape."""
        target = [1] * len(batch_shape)
        for k, d in enumerate(dims):
            target[batch_dims.index(d)] = np.shape(coord)[k]
        return _reshape_any(coord, target)

    coords, indexed_axes = [], []
    for axis, i in enumerate(entries):
        if _is_slice(i):
            start, count, step = _slice_bounds(i, shape[axis])
            if step == 1:
                if count == shape[axis]:
                    continue  # the whole axis (a Slice's start too is then ignored, as in JAX)
                coord = _reshape_any(start, (1,) * len(batch_shape))
            else:
                d = out_dim[("slice", axis)]
                steps = np.arange(count) * step
                coord = place(steps + start if _is_concrete(start) else ufuncs.add(steps, start),
                              [d])
        else:
            b = out_dim[("block",)]
            block_dims = range(b + len(block_shape) - np.ndim(i), b + len(block_shape))
            coord = place(_position(i, shape[axis], wrap_negative), list(block_dims))
        coords.append(coord)
        indexed_axes.append(axis)
    indices = _stack_coordinates(coords, batch_shape)
    return _GatherPlan(indices, indexed_axes, window_axes, window_sizes, window_out_dims,
                       out_shape)


def _reshape_any(x, shape):
    if isinstance(x, (int, np.ndarray, np.generic)):
        return np.reshape(x, shape)
    return lax.reshape(x, tuple(shape))


def _stack_coordinates(coords, batch_shape):
    """Broadcast coordinates to ``batch_shape`` and stack them along a new last axis.

    Coordinates known at trace time are combined with NumPy into one constant, but for
    the start of one window (scalars: slices, integers) in a traced program, which is
    traced as JAX traces it, a broadcast literal per axis: a jitted call's constants are
    operands the compiler never sees, where it folds these (and makes a scatter of one
    window at known starts, ``x.at[1:-1].add(u)``, element-wise).
    """
    if all(isinstance(c, (np.ndarray, np.generic, int)) for c in coords):
        dtype = np.result_type(*coords) if coords else np.int32
        dtype = dtypes.canonicalize(dtype if dtypes.is_int(dtype) else np.int32)
        if coords and not batch_shape and not isinstance(current_trace(), EvalTrace):
            return lax.concatenate([lax.broadcast_in_dim(np.asarray(c, dtype)[()], (1,), ())
                                    for c in coords], 0)
        stacked = np.stack([np.broadcast_to(c, batch_shape) for c in coords], axis=-1) \
            if coords else np.zeros(batch_shape + (0,), dtype)
        return to_array(stacked.astype(dtype))
    dtype = dtypes.promote((dtypes.default_int(), False),
                           *((get_aval(c).dtype, False) for c in coords
                             if not isinstance(c, (np.ndarray, np.generic, int))))[0]
    columns = []
    for c in coords:
        c = lax.convert_element_type(to_array(np.asarray(c, dtype)) if isinstance(
            c, (np.ndarray, np.generic, int)) else c, dtype)
        shape = get_aval(c).shape
        columns.append(lax.broadcast_in_dim(c, batch_shape + (1,), range(len(shape))))
    return lax.concatenate(columns, len(batch_shape))


# --- reading -------------------------------------------------------------------------------

def _mode_name(mode):
    """'clip', 'fill_or_drop', 'promise_in_bounds' ... for a mode string or enum."""
    return None if mode is None else getattr(mode, "name", str(mode)).lower()


def _only_slices(idx, ndim):
    """The entries of an index made of at most ``ndim`` slices (``x[a:b, c:d]``, the most
    common index), or None: ``_normalize_index`` would only append the full slices, and
    any mode reads it with ``_static_getitem`` (its checks cost more than the read)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if len(idx) > ndim or not all(isinstance(i, slice) for i in idx):
        return None
    return list(idx) + [slice(None)] * (ndim - len(idx))


def getitem(x, idx, mode=None, fill_value=None, indices_are_sorted=False,
             unique_indices=False, wrap_negative_indices=True):
    """``x[idx]`` with NumPy's indexing rules and JAX's out-of-bounds behaviour; negative
    integer indices count from the end unless ``wrap_negative_indices`` is False."""
    # As in JAX, an unknown mode is a ValueError even for an index that needs no gather.
    mode = None if mode is None else lax.GatherScatterMode.from_any(mode)
    x = to_array(x)
    slices = _only_slices(idx, get_aval(x).ndim)
    if slices is not None:
        return _static_getitem(x, slices)
    new_axes, entries = _normalize_index(get_aval(x).shape, idx)
    if not any(_is_advanced(i) or isinstance(i, Slice) for i in entries):
        # As JAX, read the array's own axes, then insert the new ones
        own = [i for position, i in enumerate(entries) if position not in new_axes]
        read = _basic_read(own, get_aval(x).shape, mode, wrap_negative_indices)
        if read is not None:
            out = read(x, own, wrap_negative_indices)
            return lax.expand_dims(out, _output_axes(entries, new_axes)) if new_axes else out
    if new_axes:
        x = lax.expand_dims(x, new_axes)
    shape = get_aval(x).shape
    if mode in _CLAMPING_MODES and all(map(_fits_dynamic_slice, entries)):
        entries = [_read_from_end(i, n) for i, n in zip(entries, shape)]
    plan = _gather_plan(shape, entries, wrap_negative_indices)
    dnums = lax.GatherDimensionNumbers(
        offset_dims=plan.window_out_dims, collapsed_slice_dims=plan.collapsed_axes(len(shape)),
        start_index_map=plan.indexed_axes)
    return lax.gather(x, plan.indices, dimension_numbers=dnums,
                      slice_sizes=plan.slice_sizes(len(shape)),
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode,
                      fill_value=fill_value, indices_are_sorted=indices_are_sorted,
                      unique_indices=unique_indices)


# --- updating: x.at[idx] -------------------------------------------------------------------

def _scatter(x, idx, y, scatter_fn, mode, indices_are_sorted, unique_indices,
             wrap_negative_indices):
    """``x`` with ``y`` combined into ``x[idx]`` by ``scatter_fn`` (a lax.scatter*); negative
    integer indices count from the end unless ``wrap_negative_indices`` is False.

    Like JAX, the combination happens in the dtype ``x`` and ``y`` promote to and the result
    is then cast back to ``x``'s: ``int_x.at[[1, 1]].add(2.5)`` adds 5.0, not 2 + 2, and a
    boolean ``x`` can be added to with an integer.
    """
    x = operand = to_array(x)
    x_aval = get_aval(x)
    new_axes, entries = _normalize_index(x_aval.shape, idx)
    if new_axes:
        x = lax.expand_dims(x, new_axes)
    shape = get_aval(x).shape
    plan = _gather_plan(shape, entries, wrap_negative_indices)
    if not any(map(_is_advanced, entries)):
        # Integers and slices address each element at most once (JAX says so too); only a
        # unique scatter_mul/min/max can be differentiated with respect to its updates.
        unique_indices = True
    x, y = _promote_update(x, y)
    if 0 in plan.out_shape:
        return operand   # (nothing addressed: no scatter, whatever it would accept, as JAX)
    check_broadcast_to(get_aval(y), plan.out_shape)
    y = broadcast_to_shape(y, plan.out_shape)
    dnums = lax.ScatterDimensionNumbers(
        update_window_dims=plan.window_out_dims,
        inserted_window_dims=plan.collapsed_axes(len(shape)),
        scatter_dims_to_operand_dims=plan.indexed_axes)
    out = scatter_fn(x, plan.indices, y, dnums, indices_are_sorted=indices_are_sorted,
                     unique_indices=unique_indices, mode="drop" if mode is None else mode)
    out = lax.squeeze(out, new_axes) if new_axes else out
    return lax.convert_element_type(out, x_aval.dtype, weak_type=x_aval.weak_type)


def _promote_update(x, y):
    """``x`` and the update ``y`` in their common dtype; like JAX, warn when ``y`` cannot be
    cast safely (by promotion) to ``x``'s dtype, which the result is cast back to. That
    check takes ``x``'s dtype as strong: a weak float32 ``x`` takes float16 values."""
    if isinstance(y, (list, tuple)):
        y = np.asarray(y)
    check_arraylike("scatter", y)
    check_keys("scatter", (x, y))
    y = to_array(y)
    x_aval, y_aval = get_aval(x), get_aval(y)
    if dtypes.promote((x_aval.dtype, False), (y_aval.dtype, y_aval.weak_type))[0] \
            != x_aval.dtype:
        warnings.warn(f"scatter inputs have incompatible types: cannot safely cast value from "
                      f"dtype={y_aval.dtype.name} to dtype={x_aval.dtype.name}. In future "
                      "releases this may be an error.", FutureWarning, stacklevel=5)
    return promote_dtypes(x, y)


class _IndexUpdateRef:
    """``x.at[idx]``: the methods that return a new array with ``x[idx]`` updated."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None, wrap_negative_indices=True):
        """``x[idx]``, with a choice of out-of-bounds ``mode`` (and ``fill_value``). With
        ``wrap_negative_indices=False``, a negative index is out of bounds, as in every
        method here, rather than counted from the end."""
        return getitem(self.array, self.index, mode, fill_value, indices_are_sorted,
                       unique_indices, wrap_negative_indices)

    def _update(self, scatter_fn, values, indices_are_sorted, unique_indices, mode,
                wrap_negative_indices):
        return _scatter(self.array, self.index, values, scatter_fn, mode,
                        indices_are_sorted, unique_indices, wrap_negative_indices)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] = values``; with repeated indices, one of the values wins."""
        return self._update(lax.scatter, values, indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] += values``, accumulating over repeated indices (``np.add.at``)."""
        return self._update(lax.scatter_add, values, indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        return self.add(ufuncs.negative(values), indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode,
                        wrap_negative_indices=wrap_negative_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        return self._update(lax.scatter_mul, values, indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    mul = multiply

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        return self._update(lax.scatter_min, values, indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        return self._update(lax.scatter_max, values, indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """``x[idx] = func(x[idx])`` for an element-wise ``func``, applied once per time
        an element is addressed (twice for an index repeated twice)."""
        def scatter_apply(x, indices, updates, dnums, **kwargs):
            return lax.scatter_apply(x, indices, func, dnums,
                                     update_shape=get_aval(updates).shape, **kwargs)
        zero = scalar_like(self.array, 0)
        return self._update(scatter_apply, zero, indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def _combine(self, ufunc_name, values, indices_are_sorted, unique_indices, mode,
                 wrap_negative_indices):
        """``ufunc(x, m)`` where ``m`` is the product of the values scattered onto ones:
        how JAX defines ``divide`` and ``power`` (the result dtype is the ufunc's)."""
        factors = _IndexUpdateRef(creation.ones_like(self.array), self.index).multiply(
            values, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
            mode=mode, wrap_negative_indices=wrap_negative_indices)
        return getattr(ufuncs, ufunc_name)(self.array, factors)

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               wrap_negative_indices=True):
        return self._combine("divide", values, indices_are_sorted, unique_indices, mode,
                             wrap_negative_indices)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        return self._combine("power", values, indices_are_sorted, unique_indices, mode,
                             wrap_negative_indices)


class IndexUpdateHelper:
    """What ``x.at`` returns: indexing it gives the update methods for that index."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


# --- take and friends ----------------------------------------------------------------------

def index_array(name, x):
    """An index argument as an array: lists become NumPy constants; dtype must be integer."""
    x = _index_operand(name, x)
    if not dtypes.is_int(get_aval(x).dtype):
        raise TypeError(f"{name} indices must be of integer type, got "
                        f"{get_aval(x).dtype.name}")
    return x


def _index_operand(name, x):
    """An index argument as an array (lists become NumPy constants), dtype unchecked."""
    if isinstance(x, (list, tuple)):
        x = np.asarray(x, dtype=None if len(x) else np.int32)
    check_arraylike(name, x)
    return x if isinstance(x, (Array, Tracer)) else to_array(x)


def _take_indices(x):
    """``take``'s indices. As in JAX and NumPy, booleans read as 0 and 1; any other
    non-integer dtype is a ValueError there (take_along_axis's is a TypeError)."""
    x = _index_operand("take", x)
    dtype = get_aval(x).dtype
    if dtypes.is_bool(dtype):
        return lax.convert_element_type(x, dtypes.default_int())
    if not dtypes.is_int(dtype):
        raise ValueError("indices must have an integer type")
    return x


def _apply_index_mode(name, indices, size, mode):
    """Resolve NumPy-only modes: 'wrap' takes indices modulo ``size``; 'raise' is refused."""
    if mode == "raise":
        raise NotImplementedError(f"The 'raise' mode to jnp.{name} is not supported.")
    if mode == "wrap":
        return ufuncs.remainder(indices, size), "promise_in_bounds"
    if mode == "clip" and name == "take":
        # jnp.take clips a negative index to 0 instead of counting it from the end (JAX,
        # NumPy); take_along_axis and x[idx] wrap it first.
        return ufuncs.maximum(indices, 0), mode
    if _mode_name(mode) not in (None, "clip", "fill", "fill_or_drop", "promise_in_bounds"):
        if name == "take":
            raise ValueError(f"Invalid mode {mode!r} for np.take")
        raise ValueError(f'Unknown gather mode "{mode}"')
    return indices, "fill" if mode is None else mode


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (flattened when None).

    Out-of-bounds indices give ``fill_value`` (NaN for inexact dtypes) unless ``mode`` says
    otherwise: 'clip', 'wrap' or 'promise_in_bounds'.
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    check_arraylike("take", a)
    a = to_array(a)
    indices = _take_indices(indices)
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    if get_aval(a).shape[axis] == 0 and get_aval(indices).size:
        # JAX refuses it whatever the mode (as NumPy does), even 'fill', which could fill.
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    indices, mode = _apply_index_mode("take", indices, get_aval(a).shape[axis], mode)
    return getitem(a, (slice(None),) * axis + (indices,), mode, fill_value,
                    indices_are_sorted, unique_indices)


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=True):
    """``arr`` read at ``indices`` along ``axis``, the other axes matched (broadcasting).
    A negative index counts from the end, unless ``wrap_negative_indices`` is False: then
    it is out of bounds (``mode`` says what that gives)."""
    check_arraylike("take_along_axis", arr)
    arr = to_array(arr)
    indices = index_array("take_along_axis", indices)
    if axis is None:
        arr, indices, axis = _ravel(arr), _ravel(indices), 0
    ndim = get_aval(arr).ndim
    if get_aval(indices).ndim != ndim:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{get_aval(indices).ndim} vs. {ndim}")
    axis = canonicalize_axis(axis, ndim)
    size = get_aval(arr).shape[axis]
    if not wrap_negative_indices and mode != "wrap":
        indices = _negatives_out_of_bounds(indices, size, mode)
    indices, mode = _apply_index_mode("take_along_axis", indices, size, mode)
    return getitem(arr, along_axis_index(get_aval(arr).shape, indices, axis), mode,
                    fill_value)


def _negatives_out_of_bounds(indices, size, mode):
    """``indices`` with each negative one out of bounds rather than counted from the end:
    0 under 'clip' (where JAX clips it), else ``size`` (in a type that holds it)."""
    if mode == "clip":
        return ufuncs.maximum(indices, 0)
    dtype = get_aval(indices).dtype
    if size > np.iinfo(dtype).max:
        indices = lax.convert_element_type(indices, dtypes.default_int())
    return select_where(ufuncs.less(indices, 0), size, indices)


def _ravel(x):
    """``x`` flattened (itself when already 1-D): ``jnp.ravel`` without the argument checks."""
    shape = get_aval(x).shape
    return x if len(shape) == 1 else lax.reshape(x, (math.prod(shape),))


def along_axis_index(shape, indices, axis):
    """The index tuple that reads ``indices`` along ``axis`` and each other axis by its own
    range, shaped to broadcast against ``indices``."""
    ndim = len(shape)
    return tuple(indices if d == axis else
                 np.arange(n).reshape([n if k == d else 1 for k in range(ndim)])
                 for d, n in enumerate(shape))


# --- building indices ----------------------------------------------------------------------

def indices(dimensions, dtype=None, sparse=False):
    """Coordinate grids of an array of shape ``dimensions`` (stacked, or open if sparse)."""
    dimensions = tuple(operator.index(d) for d in dimensions)
    dtype = dtypes.canonicalize(dtype or dtypes.default_int())
    n = len(dimensions)
    if sparse:
        return tuple(lax.broadcasted_iota(dtype, tuple(d if k == i else 1
                                                       for k, d in enumerate(dimensions)), i)
                     for i in range(n))
    grids = [lax.broadcast_in_dim(lax.broadcasted_iota(dtype, dimensions, i),
                                  (1,) + dimensions, range(1, n + 1)) for i in range(n)]
    if not grids:
        return to_array(np.zeros((0,), dtype))
    return lax.concatenate(grids, 0)


def ix_(*args):
    """Open-mesh index arrays: the i-th 1-D argument reshaped along axis i."""
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = _index_array_or_bool("ix_", a)
        if get_aval(a).ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape "
                             f"{get_aval(a).shape}")
        if dtypes.is_bool(get_aval(a).dtype):
            a = to_array(np.nonzero(concrete_value("ix_", a))[0].astype(dtypes.default_int()))
        shape = [1] * n
        shape[i] = get_aval(a).shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)


def _index_array_or_bool(name, a):
    if isinstance(a, (list, tuple)):
        a = np.asarray(a, dtype=None if len(a) else np.int32)
    check_arraylike(name, a)
    return to_array(a)


def unravel_index(indices, shape):
    """Coordinates of flat ``indices`` in an array of ``shape`` (out-of-range ones clamp)."""
    check_arraylike("unravel_index", indices)
    shape = tuple(operator.index(d) for d in shape)
    indices = to_array(indices)
    size = int(np.prod(shape))
    if not shape:
        return ()
    clipped = ufuncs.clip(indices, -size, max(size - 1, 0)) if size else indices
    flat = _wrap_negative(clipped, size)
    out = []
    for d in reversed(shape):
        out.append(ufuncs.remainder(flat, d) if d else flat)
        flat = ufuncs.floor_divide(flat, d) if d else flat
    weak = get_aval(indices).weak_type  # (a Python int's coordinates are weak, as JAX's)
    return tuple(lax.convert_element_type(c, get_aval(c).dtype, weak) for c in reversed(out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """Flat indices of coordinate arrays into an array of shape ``dims``, of ``dtype`` (by
    default the coordinates' promoted type, which must hold every flat index). ``order``
    "C" (the last coordinate varies fastest) or "F" (the first)."""
    if order not in ("C", "F"):
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    dims = tuple(operator.index(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"parameter multi_index must be a sequence of length {len(dims)}")
    coords = promote_dtypes(*[index_array("ravel_multi_index", i) for i in multi_index])
    dtype = get_aval(coords[0]).dtype if dtype is None else dtypes.canonicalize(dtype)
    if math.prod(dims) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"jnp.ravel_multi_index: dtype={dtype!r} not large enough to hold "
                         f"flattened index for dims={dims}. Use the dtype argument to pass a "
                         "suitable dtype (e.g. dtype=np.min_scalar_type(prod(dims))).")
    coords = [lax.convert_element_type(c, dtype) for c in coords]
    if mode == "raise":
        for c, d in zip(coords, dims):
            c = concrete_value("ravel_multi_index", c)
            if np.any((c < 0) | (c >= d)):
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        coords = [ufuncs.clip(c, 0, d - 1) for c, d in zip(coords, dims)]
    elif mode == "wrap":
        coords = [ufuncs.remainder(c, d) for c, d in zip(coords, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or "
                         "'ignore'.")
    if order == "F":  # C order of the axes reversed
        coords, dims = coords[::-1], dims[::-1]
    flat = coords[0]
    for c, d in zip(coords[1:], dims[1:]):
        flat = ufuncs.add(ufuncs.multiply(flat, d), c)
    return flat


def diag_indices(n, ndim=2):
    """The indices of the main diagonal of an ``(n,) * ndim`` array."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"n and ndim must be non-negative, got n={n} ndim={ndim}")
    return (lax.iota(dtypes.default_int(), n),) * ndim


def diag_indices_from(arr):
    shape = get_aval(to_array(arr)).shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length (and at least 2)")
    return diag_indices(shape[0], len(shape))


def _triangle_indices(np_fn, n, k, m):
    rows, cols = np_fn(operator.index(n), operator.index(k),
                       None if m is None else operator.index(m))
    return tuple(to_array(c.astype(dtypes.default_int())) for c in (rows, cols))


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle of an ``(n, m)`` array."""
    return _triangle_indices(np.tril_indices, n, k, m)


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle of an ``(n, m)`` array."""
    return _triangle_indices(np.triu_indices, n, k, m)


def _from_array(fn, arr, k):
    shape = get_aval(to_array(arr)).shape
    if len(shape) != 2:
        raise ValueError("input array must be 2-d")
    return fn(shape[0], k, shape[1])


def tril_indices_from(arr, k=0):
    return _from_array(tril_indices, arr, k)


def triu_indices_from(arr, k=0):
    return _from_array(triu_indices, arr, k)

"""``pad``: an array extended along each of its axes, in each of NumPy's modes.

One axis is padded at a time, by one small function per mode that gets the axis, its
``(before, after)`` widths and the mode's option for that axis. The modes that fill from the
array's values ('mean', 'median', 'maximum', 'minimum') use the reductions, which is why
``pad`` lives here, after ``reductions``, rather than in ``manipulation``.
"""

import operator

import numpy as np

from .. import lax
from ..core import Array, Tracer, dtypes, get_aval
from . import reductions, ufuncs
from .creation import pad_ramp
from .indexing import take
from .manipulation import broadcast_to, concatenate, flip, where
from .util import check_arraylike, concrete_value, to_array
from .vectorize import apply_along_axis

__all__ = ["pad"]


def pad(array, pad_width, mode="constant", **kwargs):
    """``array`` extended by ``pad_width`` (before, after) elements along each axis, filled
    as ``mode`` says; its options (``constant_values``, ``end_values``, ``stat_length``,
    ``reflect_type``) take every form NumPy accepts. A 0-d array comes back as it is, as in
    JAX. ``mode`` may also be a function (``_pad_with_function``)."""
    check_arraylike("pad", array)
    array = to_array(array)
    ndim = get_aval(array).ndim
    widths = _counts("pad_width", pad_width, ndim, integral=True, crops=callable(mode))
    if callable(mode):
        return _pad_with_function(array, widths, mode, kwargs)
    if mode not in _MODES:
        raise NotImplementedError(f"jnp.pad: mode={mode!r} is not implemented; the modes "
                                  f"are {', '.join(map(repr, _MODES))}")
    pad_axis, option, default = _MODES[mode]
    unexpected = set(kwargs) - {option}
    if unexpected:  # a ValueError in JAX (NumPy: TypeError)
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unexpected}")
    if ndim == 0:
        return array
    options = _OPTION_FORMS[option](kwargs.get(option, default), ndim) if option else \
        [None] * ndim
    for axis, ((before, after), value) in enumerate(zip(widths, options)):
        if before or after:
            if get_aval(array).shape[axis] == 0 and mode not in ("constant", "empty"):
                raise ValueError(f"Cannot apply '{mode}' padding to empty axis")
            array = pad_axis(array, axis, before, after, value)
    return array


def _pad_with_function(array, widths, func, kwargs):
    """NumPy's callable ``mode``, run as JAX runs it: the array is zero-padded, then, axis by
    axis, ``func(vector, (before, after), axis, kwargs)`` maps each 1-D slice along the axis
    to its padded version. Unlike NumPy's, ``func`` must return the slice (it cannot fill it
    in place: arrays are immutable). A negative width crops, as ``lax.pad``'s (JAX's)."""
    if get_aval(array).ndim == 0:
        return array
    zero = np.zeros((), get_aval(array).dtype)
    padded = lax.pad(array, zero, [(before, after, 0) for before, after in widths])
    for axis, axis_widths in enumerate(widths):
        padded = apply_along_axis(func, axis, padded, axis_widths, axis, kwargs)
    return padded


# --- the forms of the arguments ------------------------------------------------------------

def _pairs(name, value, ndim):
    """A ``pad_width``-style argument (a scalar, ``(before, after)``, or one pair per axis;
    anything that broadcasts to ``(ndim, 2)``) as one ``(before, after)`` pair per axis.
    Arrays are split with array indexing, so values may be traced."""
    shape = np.shape(value)
    if len(shape) > 2 or any(d not in (1, want) for d, want in zip(shape[::-1], (2, ndim))):
        raise ValueError(f"jnp.pad: {name} must be a scalar, a pair, or one pair per axis; "
                         f"got shape {shape} for {ndim} axes")
    if isinstance(value, (Array, Tracer)):
        value = broadcast_to(value, (ndim, 2))
        return [(value[i, 0], value[i, 1]) for i in range(ndim)]
    return [tuple(p) for p in np.broadcast_to(np.asarray(value, dtype=object), (ndim, 2))]


def _counts(name, value, ndim, integral=False, crops=False):
    """``_pairs`` of non-negative Python ints (widths and lengths, which fix shapes); a
    negative one is JAX's ValueError, unless it ``crops`` (a callable mode's widths).
    ``integral``: values read as NumPy values must be integers, bools and floats (even whole
    ones) being JAX's TypeError (``pad_width``)."""
    if isinstance(value, (Array, Tracer)):
        value = concrete_value("pad", value)
    pairs = _pairs(name, value, ndim)
    if integral and any(np.asarray(v).dtype.kind not in "iu" for p in pairs for v in p):
        raise TypeError(f"`{name}` must be of integral type.")
    pairs = [tuple(operator.index(v) for v in p) for p in pairs]
    if not crops and any(v < 0 for p in pairs for v in p):
        raise ValueError("index can't contain negative values")
    return pairs


def _stat_lengths(stat_length, ndim):
    """``stat_length`` per axis: None (the whole axis) or positive ``(before, after)``."""
    if stat_length is None:
        return [None] * ndim
    pairs = _counts("stat_length", stat_length, ndim)
    if any(0 in p for p in pairs):  # NumPy pads with NaN (mean) or fails later
        raise ValueError("stat_length of 0 yields no value for padding")
    return pairs


def _reflect_types(reflect_type, ndim):
    """The same ``reflect_type`` for every axis ('even' or 'odd'; JAX asserts, NumPy treats
    anything but 'odd' as 'even')."""
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"jnp.pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    return [reflect_type] * ndim


_OPTION_FORMS = {"constant_values": lambda v, ndim: _pairs("constant_values", v, ndim),
                 "end_values": lambda v, ndim: _pairs("end_values", v, ndim),
                 "stat_length": _stat_lengths, "reflect_type": _reflect_types}


# --- the modes, each padding one axis ------------------------------------------------------

def _like(array, value):
    """``value`` converted to ``array``'s dtype, weakly typed as ``array`` is."""
    aval = get_aval(array)
    return lax.convert_element_type(to_array(value), aval.dtype, weak_type=aval.weak_type)


def _pad_constant(array, axis, before, after, values):
    """``values[0]`` before, ``values[1]`` after: a lax.pad on each side."""
    for amount, value, side in ((before, values[0], 0), (after, values[1], 1)):
        if amount:
            config = [(0, 0, 0)] * get_aval(array).ndim
            config[axis] = (amount, 0, 0) if side == 0 else (0, amount, 0)
            array = lax.pad(array, _like(array, value), config)
    return array


def _pad_empty(array, axis, before, after, _):
    """Unspecified values: zeros, as JAX's ``empty`` is ``zeros``."""
    return _pad_constant(array, axis, before, after, (0, 0))


# The gathering modes map a position i in [-before, n + after) to a source position.
def _edge(i, n):
    return np.clip(i, 0, n - 1)


def _wrap(i, n):
    return i % n


def _reflect(i, n):
    """Mirrored about the end elements, which are not repeated (period 2n - 2)."""
    if n == 1:
        return np.zeros_like(i)
    j = i % (2 * n - 2)
    return np.where(j < n, j, 2 * n - 2 - j)


def _symmetric(i, n):
    """Mirrored about the ends, which are repeated (period 2n)."""
    j = i % (2 * n)
    return np.where(j < n, j, 2 * n - 1 - j)


RUNS_MAX = 16  # runs of source positions beyond which a gathering mode gathers


def _gather(index_map):
    """A mode that takes each padded position from the source position ``index_map`` gives:
    as JAX pads, by concatenating slices of the array (reversed, or one element repeated,
    where the positions run backwards or stand still), which trace and compile to less
    than a gather; a gather only where the padding is many times the axis' length."""
    def pad_axis(array, axis, before, after, _):
        n = get_aval(array).shape[axis]
        source = index_map(np.arange(-before, n + after), n)
        runs = _runs(source, RUNS_MAX)
        if runs is None:
            return take(array, source, axis=axis, mode="promise_in_bounds")
        return lax.concatenate([_run(array, axis, *run) for run in runs], axis)
    return pad_axis


def _runs(source, most):
    """``source`` cut into runs ``(first, step, length)`` of positions that go up by one,
    down by one or stay (step 1, -1, 0), each as long as it can be, from the left; None
    if there are more than ``most``."""
    steps = np.diff(source)
    # where each stretch of equal steps ends (exclusive)
    ends = np.append(np.flatnonzero(steps[1:] != steps[:-1]) + 1, len(steps))
    runs, start = [], 0
    while start < len(source):
        if len(runs) == most:
            return None
        if start == len(steps) or abs(steps[start]) > 1:  # the last position, or a jump
            runs.append((int(source[start]), 1, 1))
            start += 1
            continue
        end = int(ends[np.searchsorted(ends, start, side="right")])
        runs.append((int(source[start]), int(steps[start]), end - start + 1))
        start = end + 1
    return runs


def _run(array, axis, first, step, length):
    """The elements ``first, first + step, ...`` (``length`` of them) along ``axis``."""
    if step == 0:
        aval = get_aval(array)
        shape = aval.shape[:axis] + (length,) + aval.shape[axis + 1:]
        return lax.broadcast_in_dim(lax.slice_in_dim(array, first, first + 1, axis=axis),
                                    shape, tuple(range(aval.ndim)))
    if step == 1:
        return lax.slice_in_dim(array, first, first + length, axis=axis)
    return lax.rev(lax.slice_in_dim(array, first - length + 1, first + 1, axis=axis), (axis,))


def _mirror(index_map, period):
    """A reflecting mode: 'even' is a gather; 'odd' reflects values through the end element
    as well (``2 * a[0] - a[k]`` before), which repeats the even reflection with a sign and
    a shift: each period of ``period(n)`` positions adds ``2 * (a[-1] - a[0])``, and the
    mirrored half of a period is ``2 * a[-1] - a[source]``."""
    gather = _gather(index_map)

    def pad_axis(array, axis, before, after, reflect_type):
        mirrored = gather(array, axis, before, after, None)
        n = get_aval(array).shape[axis]
        if reflect_type == "even":
            return mirrored
        if dtypes.is_bool(get_aval(array).dtype):
            raise TypeError("jnp.pad: reflect_type='odd' needs numbers, not booleans")
        if period(n) == 0:  # one element, reflected onto itself
            return mirrored
        turns, phase = np.divmod(np.arange(-before, n + after), period(n))
        flipped = phase >= n
        first, last = (lax.slice_in_dim(array, k, k + 1, axis=axis) for k in (0, n - 1))
        terms = [(np.where(flipped, -1, 1), mirrored), (2 * (turns + flipped), last),
                 (-2 * turns, first)]
        return _sum_along(array, axis, terms)
    return pad_axis


def _sum_along(array, axis, terms):
    """``sum(c * x for c, x in terms)``, each ``c`` a vector of integers along ``axis``
    (wrapping in unsigned types, as NumPy's arithmetic does). A term is left out where its
    ``c`` is 0, so that an infinite edge makes no NaN where it plays no part."""
    shape = [1] * get_aval(array).ndim
    total = None
    for coefficients, x in terms:
        shape[axis] = len(coefficients)
        c = _like(array, np.asarray(coefficients).astype(get_aval(array).dtype)
                  .reshape(shape))
        term = where(np.reshape(coefficients != 0, shape), ufuncs.multiply(c, x), 0)
        total = term if total is None else ufuncs.add(total, term)
    return total


def _pad_linear_ramp(array, axis, before, after, end_values):
    """A ramp from each end value towards the edge element (the edge excluded), in the
    array's dtype (integers rounded down, as ``linspace`` does)."""
    aval = get_aval(array)
    n = aval.shape[axis]

    def ramp(end_value, edge, width):
        edge = lax.index_in_dim(array, edge, axis, keepdims=False)
        return _like(array, pad_ramp(end_value, edge, width, aval.dtype, axis))
    return concatenate([ramp(end_values[0], 0, before), array,
                        flip(ramp(end_values[1], n - 1, after), axis)], axis)


def _statistic(reduce):
    """A mode that repeats ``reduce`` of the first (before) and last (after) ``stat_length``
    elements, all when None; rounded to the nearest (even) integer for integer arrays."""
    def pad_axis(array, axis, before, after, stat_length):
        aval = get_aval(array)
        n = aval.shape[axis]
        length_before, length_after = (n, n) if stat_length is None else \
            (min(length, n) for length in stat_length)
        ends = (lax.slice_in_dim(array, 0, length_before, axis=axis),
                lax.slice_in_dim(array, n - length_after, n, axis=axis))
        pieces = []
        for end, width in zip(ends, (before, after)):
            value = reduce(end, axis=axis, keepdims=True)
            if dtypes.is_int(aval.dtype):
                value = ufuncs.round(value)
            shape = list(aval.shape)
            shape[axis] = width
            pieces.append(broadcast_to(_like(array, value), tuple(shape)))
        return concatenate([pieces[0], array, pieces[1]], axis)
    return pad_axis


# mode: (pads one axis, its option, the option's default)
_MODES = {
    "constant": (_pad_constant, "constant_values", 0),
    "edge": (_gather(_edge), None, None),
    "wrap": (_gather(_wrap), None, None),
    "reflect": (_mirror(_reflect, lambda n: 2 * n - 2), "reflect_type", "even"),
    "symmetric": (_mirror(_symmetric, lambda n: 2 * n), "reflect_type", "even"),
    "linear_ramp": (_pad_linear_ramp, "end_values", 0),
    "maximum": (_statistic(reductions.max), "stat_length", None),
    "minimum": (_statistic(reductions.min), "stat_length", None),
    "mean": (_statistic(reductions.mean), "stat_length", None),
    "median": (_statistic(reductions.median), "stat_length", None),
    "empty": (_pad_empty, None, None),
}

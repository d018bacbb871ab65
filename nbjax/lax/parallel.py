"""Collectives over a named mapped axis: psum, pmean, pmax, pmin, all_gather, psum_scatter,
axis_index, ppermute.

They are meaningful only inside a transformation that names the axis (``vmap(...,
axis_name="i")``, ``pmap(..., axis_name="i")``, or a mesh axis of ``shard_map``, which runs
as vmap); called outside one they raise NameError, as in JAX. Under vmap a collective over
the vmapped axis is an operation on the batch dimension (its batch rule). Under pmap every
shard runs on its own thread: the collective's impl finds the shard's position and the
pmap's ``Rendezvous`` in a thread-local *axis environment*, hands its operand over, waits
for the other shards and combines their values.
In a run of several processes (``nbjax.distributed``) each process runs its own shards: the
first local shard combines the local values, then the processes' through MPI, and hands the
result to the others.
"""

import contextlib
import functools
import math
import operator
import threading
from typing import NamedTuple

import numpy as np

from .. import distributed
from ..core import Primitive, ShapedArray, current_trace, dtypes, get_aval, pytree
from ..interpreters import ad, batching
from . import batch_util
from .elementwise import add, convert_element_type, div, mul
from .reductions import reduce_max, reduce_min
from .shapes import reduce_sum, reshape
from .slicing import dynamic_index_in_dim, dynamic_slice_in_dim
from .standard import library_lowering
from .structural import concatenate, full_like, index_in_dim, iota

__all__ = ["psum", "psum_p", "pmean", "pmax", "pmax_p", "pmin", "pmin_p", "all_gather",
           "all_gather_p", "axis_index", "axis_index_p", "ppermute", "ppermute_p",
           "psum_scatter"]


def axis_names(axis_name):
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _unbound(axes, **_):
    raise NameError(f"unbound axis name: {axes[0]}. The following axis names (e.g. defined "
                    "by vmap(..., axis_name=) or pmap) are available to collective operations: "
                    f"{', '.join(map(str, _bound_names())) or 'none here'}.")


# --- pmap's axis environment ---------------------------------------------------------------

class Rendezvous:
    """Where a process's shards of one pmap meet: each collective hands in its operand, waits
    for the others, and reads what the first of them made of all the values (a barrier and
    one slot per shard). ``first`` is the global index of this process's first shard."""

    def __init__(self, size, first=0):
        self._slots, self._first, self._result = [None] * size, first, None
        self._barrier = threading.Barrier(size)

    def exchange(self, index, value, combine):
        """``combine`` of every local shard's ``value`` (in shard order), computed once all
        have arrived by the first shard, and given to all of them."""
        local = index - self._first
        self._slots[local] = value
        self._barrier.wait()
        if local == 0:
            self._result = combine(list(self._slots))
        self._barrier.wait()  # none overwrites its slot, nor the next result, before all read
        return self._result

    def abort(self):
        """A shard failed: wake the others (BrokenBarrierError) rather than leave them waiting."""
        self._barrier.abort()


class AxisFrame(NamedTuple):
    """A pmap axis as its shards see it. While the pmapped function is traced ``index`` and
    ``rendezvous`` are None: only the name and size are known then."""
    name: object
    size: int
    index: object = None
    rendezvous: object = None


class _AxisEnv(threading.local):
    def __init__(self):
        self.frames = ()


_axis_env = _AxisEnv()


@contextlib.contextmanager
def extend_axis_env(frame):
    """Bind a pmap axis for the current thread (tracing its function, or running a shard),
    or a shard_map mesh axis while its function is traced."""
    previous = _axis_env.frames
    _axis_env.frames = previous + (frame,)
    try:
        yield frame
    finally:
        _axis_env.frames = previous


def pmap_frames():
    """The pmap axes bound in this thread, outermost first."""
    return _axis_env.frames


def _pmap_frame(name):
    for frame in reversed(_axis_env.frames):
        if frame.name is not None and frame.name == name:
            return frame
    return None


def _bound_names():
    """Names of the axes a collective could refer to here (enclosing vmaps and pmaps)."""
    names, trace = [], current_trace()
    while trace is not None:
        data = getattr(trace, "axis_data", None)
        if data is not None and data.name is not None:
            names.append(data.name)
        trace = trace.parent
    return names + [f.name for f in reversed(_axis_env.frames) if f.name is not None]


def bound_axis_size(name):
    """The size of the named axis: the innermost enclosing vmap of that name, else the pmap."""
    trace = current_trace()
    while trace is not None:
        data = getattr(trace, "axis_data", None)
        if data is not None and data.name == name:
            return data.size
        trace = trace.parent
    frame = _pmap_frame(name)
    if frame is None:
        _unbound((name,))
    return frame.size


def _check_bound(axes):
    """NameError now, where the user called the collective, for an axis nothing defines."""
    for name in axes:
        bound_axis_size(name)


def _exchange(x, axes, combine):
    """Inside a pmap shard: ``combine`` of this process's shards' ``x`` over the (single)
    pmap axis in ``axes`` (the same for every local shard), and this shard's frame."""
    frames = [_pmap_frame(name) for name in dict.fromkeys(axes)]
    for name, frame in zip(axes, frames):
        if frame is None or frame.rendezvous is None:
            _unbound((name,))
    if len(frames) != 1:
        raise NotImplementedError("collectives over several pmap axes (nested pmap) are not "
                                  "supported")
    frame = frames[0]
    return frame.rendezvous.exchange(frame.index, x, combine), frame


def _describe(name, x, axes, **params):
    """A collective as the processes compare it before they exchange data."""
    extra = "".join(f", {k}={v}" for k, v in params.items())
    x = np.asarray(x)
    return f"{name}({x.dtype}{list(np.shape(x))}, axis {', '.join(map(str, axes))}{extra})"


def _across_processes(values, axes, name, **params):
    """The local shards' values followed by every other process's, in global shard order
    (only the local ones in a single-process run)."""
    comm = distributed.communicator()
    if comm is None:
        return list(values)
    return list(comm.allgather(np.stack(values), _describe(name, values[0], axes, **params)))


# --- psum, pmax, pmin ----------------------------------------------------------------------

def _collective(name, reduce, unbatched, combine):
    """A reduction over named axes: ``reduce(x, axis)`` over the batch axis of a vmap whose
    name is listed, ``unbatched(x, size)`` for a value the same across that axis, and
    ``combine`` (a NumPy binary function) folding the shards' values under pmap."""
    prim = Primitive(name)
    library_lowering(prim, "collective")
    prim.def_abstract_eval(lambda x, *, axes: x)

    @prim.def_impl
    def impl(x, *, axes):
        def reduce_all(values):
            local = np.asarray(functools.reduce(combine, values))  # one order: the same bits
            comm = distributed.communicator()
            if comm is None:
                return local
            return comm.allreduce(local, name, _describe(name, local, axes))
        return _exchange(x, axes, reduce_all)[0]

    @prim.def_batch
    def batch_rule(axis_data, vals, dims, *, axes):
        (x,), (d,) = vals, dims
        if axis_data.name not in axes:
            return prim.bind(x, axes=axes), d
        x = unbatched(x, axis_data.size) if d is None else reduce(x, d)
        rest = tuple(a for a in axes if a != axis_data.name)
        return (prim.bind(x, axes=rest) if rest else x), None

    batching.axis_primitives.add(prim)
    return prim


def _times_size(x, size):
    aval = get_aval(x)
    return mul(x, convert_element_type(size, aval.dtype, weak_type=aval.weak_type))


psum_p = _collective("psum", lambda x, d: reduce_sum(x, (d,)), _times_size, np.add)
pmax_p = _collective("pmax", lambda x, d: reduce_max(x, (d,)), lambda x, size: x, np.maximum)
pmin_p = _collective("pmin", lambda x, d: reduce_min(x, (d,)), lambda x, size: x, np.minimum)

# psum is linear. Its transpose is psum again, as in JAX: the cotangent each member receives
# is summed over the axis, because every member's output depends on every member's input.
# pmax and pmin have no derivative rules (neither have JAX's).
ad.deflinear(psum_p, lambda ct, x, *, axes: [psum_p.bind(ct, axes=axes)])


def _reduce_over(prim, x, axis_name):
    axes = axis_names(axis_name)
    _check_bound(axes)
    return pytree.tree_map(lambda leaf: prim.bind(leaf, axes=axes), x)


def psum(x, axis_name):
    """Sum a pytree of arrays over the named mapped axis (or axes)."""
    return _reduce_over(psum_p, x, axis_name)


def pmax(x, axis_name):
    """The maximum over the named mapped axis (or axes)."""
    return _reduce_over(pmax_p, x, axis_name)


def pmin(x, axis_name):
    """The minimum over the named mapped axis (or axes)."""
    return _reduce_over(pmin_p, x, axis_name)


def pmean(x, axis_name):
    """Mean over the named axis: psum divided by the axis size, a constant (as in JAX: the
    size of an axis is known where it is bound, so no second collective counts it)."""
    axes = axis_names(axis_name)
    _check_bound(axes)
    size = math.prod(bound_axis_size(a) for a in axes)

    def mean(leaf):
        aval = get_aval(leaf)
        if not dtypes.is_inexact(aval.dtype):  # as x / n in JAX: integers give floats
            leaf = convert_element_type(leaf, dtypes.default_float())
        total = psum_p.bind(leaf, axes=axes)
        return div(total, convert_element_type(size, get_aval(total).dtype))
    return pytree.tree_map(mean, x)


# --- all_gather ----------------------------------------------------------------------------

all_gather_p = Primitive("all_gather")
library_lowering(all_gather_p, "collective")


@all_gather_p.def_abstract_eval
def _all_gather_abstract_eval(x, *, axes, axis_size, all_gather_dimension, tiled):
    shape = list(x.shape)
    if tiled:
        shape[all_gather_dimension] *= axis_size
    else:
        shape.insert(all_gather_dimension, axis_size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


@all_gather_p.def_impl
def _all_gather_impl(x, *, axes, axis_size, all_gather_dimension, tiled):
    join = np.concatenate if tiled else np.stack

    def gather(values):
        values = _across_processes(values, axes, "all_gather")
        return join(values, axis=all_gather_dimension)
    return _exchange(x, axes, gather)[0]


@all_gather_p.def_batch
def _all_gather_batch(axis_data, vals, dims, *, axes, axis_size, all_gather_dimension, tiled):
    (x,), (d,) = vals, dims
    axis = all_gather_dimension
    if axis_data.name != axes[0]:
        # Gathering over an outer axis: keep our batch axis out of the way.
        pos = axis if (d is None or axis <= d) else axis + 1
        out = all_gather_p.bind(x, axes=axes, axis_size=axis_size, all_gather_dimension=pos,
                                tiled=tiled)
        return out, (None if d is None else d + (not tiled and pos <= d))
    x = batch_util.bdim_at(x, d, axis, axis_data.size)
    if tiled:
        shape = get_aval(x).shape
        merged = shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:]
        x = reshape(x, merged)
    return x, None


def _own_block(x, axes, dimension, tiled, block):
    """This member's block of ``x`` summed over the axis: along ``dimension`` the blocks of
    ``block`` rows (``tiled``), or the rows (not tiled), one per member in axis order."""
    total = psum_p.bind(x, axes=axes)
    index = axis_index_p.bind(axes=axes)
    if tiled:
        return dynamic_slice_in_dim(total, mul(index, np.int32(block)), block, dimension)
    return dynamic_index_in_dim(total, index, dimension, keepdims=False)


def _all_gather_transpose(ct, x, *, axes, axis_size, all_gather_dimension, tiled):
    """Each member's input went to every member's output: its cotangent is its own block of
    the cotangents summed over the axis (psum_scatter)."""
    block = x.aval.shape[all_gather_dimension] if tiled else 1
    return [_own_block(ct, axes, all_gather_dimension, tiled, block)]


ad.deflinear(all_gather_p, _all_gather_transpose)
batching.axis_primitives.add(all_gather_p)


def all_gather(x, axis_name, *, axis=0, tiled=False, axis_size=None):
    """Gather a pytree of arrays from every member of the named axis, stacked at ``axis``."""
    axes = axis_names(axis_name)
    if len(axes) != 1:
        raise NotImplementedError("all_gather over several axis names is not supported")

    def gather(leaf):
        nd = get_aval(leaf).ndim
        if not -nd - (not tiled) <= axis < nd + (not tiled):
            raise ValueError(f"all_gather axis {axis} is out of range for rank {nd}")
        size = axis_size if axis_size is not None else bound_axis_size(axes[0])
        return all_gather_p.bind(leaf, axes=axes, axis_size=size,
                                 all_gather_dimension=axis % (nd + (not tiled)), tiled=tiled)
    return pytree.tree_map(gather, x)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """Sum a pytree of arrays over the named axis, each member keeping its own block of the
    sum along ``scatter_dimension`` (a row per member, or with ``tiled`` an equal slice per
    member). Written as psum then a slice at ``axis_index``: its gradient is all_gather's."""
    axes = axis_names(axis_name)
    if len(axes) != 1 or axis_index_groups is not None:
        raise NotImplementedError("psum_scatter over one axis name, without "
                                  "axis_index_groups, is supported")
    size = bound_axis_size(axes[0])

    def scatter(leaf):
        shape = get_aval(leaf).shape
        if not -len(shape) <= scatter_dimension < len(shape):
            raise ValueError(f"psum_scatter scatter_dimension {scatter_dimension} is out of "
                             f"range for rank {len(shape)}")
        dim = scatter_dimension % len(shape)
        if (shape[dim] % size if tiled else shape[dim] != size):
            raise ValueError(f"psum_scatter: dimension {dim} of size {shape[dim]} cannot be "
                             f"split over the {size} members of axis {axes[0]!r}"
                             + ("" if tiled else " (without tiled it must equal the size)"))
        return _own_block(leaf, axes, dim, tiled, shape[dim] // size)
    return pytree.tree_map(scatter, x)


# --- axis_index ----------------------------------------------------------------------------

axis_index_p = Primitive("axis_index")
library_lowering(axis_index_p, "collective")
axis_index_p.def_abstract_eval(lambda *, axes: ShapedArray((), dtypes.int32, False))


@axis_index_p.def_impl
def _axis_index_impl(*, axes):
    frame = _pmap_frame(axes[0])
    if frame is None or frame.index is None:
        _unbound(axes)
    return np.int32(frame.index)


@axis_index_p.def_batch
def _axis_index_batch(axis_data, vals, dims, *, axes):
    if axis_data.name != axes[0]:
        return axis_index_p.bind(axes=axes), None
    return iota(dtypes.int32, axis_data.size), 0


batching.axis_primitives.add(axis_index_p)


def axis_index(axis_name):
    """The position of this member along the named mapped axis (an int32 scalar); along
    several names, its position in their product, the first name major (as JAX's)."""
    axes = axis_names(axis_name)
    _check_bound(axes)
    index = axis_index_p.bind(axes=axes[:1])
    for name in axes[1:]:
        index = add(mul(index, np.int32(bound_axis_size(name))), axis_index_p.bind(axes=(name,)))
    return index


# --- ppermute ------------------------------------------------------------------------------

ppermute_p = Primitive("ppermute")
library_lowering(ppermute_p, "collective")
ppermute_p.def_abstract_eval(lambda x, *, axis_name, perm: x)


def _sources(perm):
    """``{destination: source}`` of a permutation given as (source, destination) pairs."""
    return {dst: src for src, dst in perm}


@ppermute_p.def_impl
def _ppermute_impl(x, *, axis_name, perm):
    sources = _sources(perm)
    received, frame = _exchange(x, axis_name, lambda values: _permute(values, axis_name, perm))
    source = sources.get(frame.index)
    return np.zeros_like(x) if source is None else received[source]


def _permute(values, axes, perm):
    """The values this process's shards receive, by global source index: local ones taken
    directly, the others sent and received point to point between the processes."""
    local = len(values)
    comm = distributed.communicator()
    me = 0 if comm is None else comm.rank
    mine = range(me * local, (me + 1) * local)
    received = {src: values[src - mine.start] for src, _ in perm if src in mine}
    if comm is None:
        return received
    sends, receives = {}, {}
    for src, dst in perm:
        if src in mine and dst // local != me:
            sends.setdefault(dst // local, []).append(values[src - mine.start])
        elif dst in mine and src // local != me:
            receives.setdefault(src // local, []).append(src)
    got = comm.exchange({q: np.stack(v) for q, v in sends.items()},
                        {q: len(s) for q, s in receives.items()}, np.asarray(values[0]),
                        _describe("ppermute", values[0], axes, perm=perm))
    for q, srcs in receives.items():
        received.update(zip(srcs, got[q]))
    return received


@ppermute_p.def_batch
def _ppermute_batch(axis_data, vals, dims, *, axis_name, perm):
    """Over the vmapped axis, member j takes the row of its source (zeros if it has none)."""
    (x,), (d,) = vals, dims
    if axis_data.name not in axis_name:
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d
    sources = _sources(perm)
    if d is None and len(sources) == axis_data.size:
        return x, None  # every member holds the same value: a full permutation changes nothing
    if d is None:
        x, d = batch_util.broadcast_batch(x, axis_data.size), 0
    zero_row = full_like(index_in_dim(x, 0, d), 0)
    rows = [index_in_dim(x, sources[j], d) if j in sources else zero_row
            for j in range(axis_data.size)]
    return concatenate(rows, d), d


# Linear; its transpose sends cotangents back along the inverse permutation.
ad.deflinear(ppermute_p, lambda ct, x, *, axis_name, perm: [
    ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((dst, src) for src, dst in perm))])
batching.axis_primitives.add(ppermute_p)


def ppermute(x, axis_name, perm):
    """Send each member's value to another member: ``perm`` lists ``(source, destination)``
    pairs; a member that is no destination receives zeros."""
    axes = axis_names(axis_name)
    if len(axes) != 1:
        raise NotImplementedError("ppermute over several axis names is not supported")
    size = bound_axis_size(axes[0])
    perm = tuple((operator.index(src), operator.index(dst)) for src, dst in perm)
    sources, destinations = [p[0] for p in perm], [p[1] for p in perm]
    if len(set(sources)) != len(sources) or len(set(destinations)) != len(destinations):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}.")
    if not all(0 <= i < size for i in sources + destinations):
        raise ValueError(f"ppermute indices must lie in [0, {size}) for axis {axes[0]!r} of "
                         f"size {size}, got {perm}.")
    return pytree.tree_map(lambda leaf: ppermute_p.bind(leaf, axis_name=axes, perm=perm), x)

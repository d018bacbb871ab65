"""``pmap``: one program run on every device at once, each shard on its own slice of the inputs.

The front end (``pmap``), the primitive and its execution. A pmapped call is a ``pmap``
equation holding the jaxpr of ONE shard (operands without the mapped axis) and, per operand
and result, where the mapped axis is (``in_axes``/``out_axes``; None: the value is the same
for every shard). It is the mapped sibling of the ``jit`` call, and its rules are the call
rules (``nbjax.calls``): vmap batches the shard jaxpr, JVP differentiates it, partial
evaluation splits it into a known (forward) pmap and an unknown (linear) one, and
transposition turns the linear one into a backward pmap; each keeps ``in_axes``/``out_axes``
in step, with the shard axis bound while the shard jaxpr is retraced.

Executing a ``pmap`` equation compiles the shard jaxpr once for its target (the ``backend``
param, or the configured default; ``nbjax.compiler``), slices the
mapped operands, and runs the executable on one thread per shard. The collectives inside
(``psum``, ``all_gather``, ``ppermute``...) find their shard's position and the shards' common
``Rendezvous`` in a thread-local axis environment (``nbjax.lax.parallel``), where they wait for
each other and exchange values.

In a run of several processes (``nbjax.distributed``) a pmap spans every process's devices:
each process passes its own shards (the mapped axis as long as its local device count, as
in JAX), runs them on its threads, and gets its own shards' results back; the collectives
see the global axis (its size and each shard's global index) and reach the other processes
through MPI.
"""

from concurrent.futures import ThreadPoolExecutor
import functools
from threading import BrokenBarrierError

import numpy as np

from . import compiler, distributed
from .backends import get_target
from .calls import (CallRules, FlatCall, Traced, canonical_in_axes, flatten_axes, mapped_size,
                    static_positions, unmapped_aval)
from .config import config
from .core import Array, Primitive, get_aval, pytree
from .core.array import local_devices, processes
from .interpreters import staging
from .lax.parallel import AxisFrame, Rendezvous, extend_axis_env, pmap_frames
from .lax.standard import library_lowering

pmap_p = Primitive("pmap", multiple_results=True)
library_lowering(pmap_p, "parallel map")


def unshard_aval(aval, axis, size):
    """The aval of all shards' values stacked at ``axis`` (None: one value for all)."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def tracing_frame(axis_name, axis_size):
    """Bind the axis while a shard function is (re)traced, so collectives know its size: the
    global one, over the processes' ``axis_size`` shards each."""
    return extend_axis_env(AxisFrame(axis_name, axis_size * processes.count))


@pmap_p.def_abstract_eval
def _pmap_abstract_eval(*avals, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices,
                        backend):
    for i, (aval, axis, shard) in enumerate(zip(avals, in_axes, jaxpr.in_avals)):
        if axis is not None and (aval.ndim <= axis or aval.shape[axis] != axis_size):
            raise TypeError(f"pmap operand {i} of type {aval.str_short()} has no axis {axis} of "
                            f"size {axis_size} to map over")
        if unmapped_aval(aval, axis).shape != shard.shape:
            raise TypeError(f"pmap operand {i}: a shard of {aval.str_short()} is not the "
                            f"{shard.str_short()} the shard jaxpr takes")
    return [unshard_aval(a, axis, axis_size) for a, axis in zip(jaxpr.out_avals, out_axes)]


# --- execution: one thread per shard -------------------------------------------------------

def check_device_count(axis_size, devices):
    """JAX's errors for more shards than devices (or than the devices pmap was given)."""
    if devices is not None:
        if axis_size != len(devices):
            raise ValueError("Leading axis size of input to pmapped function must equal the "
                             "number of local devices passed to pmap. Got axis_size="
                             f"{axis_size}, num_local_devices={len(devices)}.")
        return
    available = len(local_devices())
    if axis_size > available:
        raise ValueError(f"compiling computation that requires {axis_size} logical devices, "
                         f"but only {available} XLA devices are available "
                         f"(num_replicas={axis_size})")


@pmap_p.def_impl
def _pmap_impl(*args, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend):
    check_device_count(axis_size, devices)
    executable = compiler.compile(jaxpr, get_target(backend), name)
    first = processes.index * axis_size  # the global index of this process's first shard
    rendezvous = Rendezvous(axis_size, first)

    def run_shard(index):
        shard_args = [x if axis is None else np.take(x, index, axis=axis)
                      for x, axis in zip(args, in_axes)]
        frame = AxisFrame(axis_name, axis_size * processes.count, first + index, rendezvous)
        try:
            with extend_axis_env(frame):
                return executable.run(*shard_args)
        except BaseException:
            rendezvous.abort()  # the other shards may be waiting for this one
            raise

    try:
        if axis_size == 1 and not pmap_frames():  # (a thread costs more than a small shard)
            shard_outs = [run_shard(0)]
        else:
            with ThreadPoolExecutor(axis_size, thread_name_prefix=f"pmap {name}") as pool:
                futures = [pool.submit(run_shard, i) for i in range(axis_size)]
            shard_outs = _results(futures)
    except Exception as error:
        comm = distributed.communicator()
        if comm is not None:  # the other processes may be waiting for this one
            comm.notify_failure(error)
        raise
    return [shard_outs[0][k] if axis is None else np.stack([o[k] for o in shard_outs], axis)
            for k, axis in enumerate(out_axes)]


def _results(futures):
    """Every shard's outputs, or the error of the shard that failed (the others then report
    only the barrier it broke)."""
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise min(errors, key=lambda e: isinstance(e, BrokenBarrierError))
    return [f.result() for f in futures]


# --- the rules --------------------------------------------------------------------------

class _PmapRules(CallRules):
    """A call's rules, with the operands' and results' mapped axes in ``in_axes`` and
    ``out_axes``, each shard's residuals stacked at axis 0, and the shard axis bound while the
    shard jaxpr is retraced (so its collectives know the axis size)."""

    stack_axis = 0
    transpose_name = "transpose of pmap of {name}"

    def axes(self, params):
        return params["in_axes"], params["out_axes"]

    def rebuild(self, params, callee, in_axes, out_axes):
        return dict(params, jaxpr=callee, in_axes=in_axes, out_axes=out_axes)

    def tracing(self, params):
        return tracing_frame(params["axis_name"], params["axis_size"])

    def transpose(self, cts, *args, **params):
        if any(axis is None for axis in params["out_axes"]):
            raise NotImplementedError("reverse-mode differentiation of pmap with out_axes=None "
                                      "is not supported")
        return super().transpose(cts, *args, **params)


_PmapRules(pmap_p).register("batch", "jvp", "partial_eval", "transpose")


# --- the front end -------------------------------------------------------------------------

def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=()):
    """Run ``fun`` on every device at once, each shard on one slice of the mapped axis, as
    ``jax.pmap``: one shard per device (``nbjax.devices()``; ``devices`` to choose them), each
    on its own thread. ``axis_name`` names the mapped axis for collectives
    (``lax.psum(x, axis_name)``); ``in_axes``/``out_axes`` work as vmap's; the arguments at
    ``static_broadcasted_argnums`` are passed to every shard as Python values. Each shard
    runs the program compiled for ``backend`` (default: ``config.jit_backend``). The arrays
    of the arguments at ``donate_argnums`` are given away: deleted once an eager call is
    done, as JAX deletes them (nbjax does not reuse their buffers).
    """
    if not callable(fun):
        raise TypeError(f"pmap expects a callable, got {type(fun).__name__}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    for spec in (in_axes, out_axes):
        for leaf in pytree.tree_leaves(spec, is_leaf=lambda x: x is None):
            if leaf is not None and not isinstance(leaf, int):
                raise TypeError(f"pmap in_axes and out_axes must contain only ints and None, "
                                f"got {leaf!r}")
    if devices is not None:
        if not devices:
            raise ValueError("'devices' argument to pmap must be non-empty, or None.")
        devices = tuple(devices)
    static_nums = ((static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int)
                   else tuple(static_broadcasted_argnums))
    donated = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    name = getattr(fun, "__name__", type(fun).__name__)
    cache = {}  # one traced shard jaxpr per argument signature, so each compiles once

    @functools.wraps(fun)
    def pmapped(*args, **kwargs):
        if pmap_frames():
            raise NotImplementedError("nested pmap is not supported: pmap was called inside "
                                      "a pmapped function (use vmap for the inner axis)")
        call, axes = _split_static(fun, name, args, kwargs, static_nums, in_axes)
        flat_axes = flatten_axes("pmap in_axes", call.in_tree, (axes, 0), len(call.leaves))
        flat_args, flat_axes = canonical_in_axes(call.leaves, flat_axes, "pmap")
        size = _axis_size(fun, call.in_tree, flat_args, flat_axes, axis_size)
        shard_avals = tuple(unmapped_aval(get_aval(x), axis)
                            for x, axis in zip(flat_args, flat_axes))
        key = (call.in_tree, shard_avals, tuple(flat_axes), size, call.static_key,
               config.enable_x64)
        traced = cache.get(key)
        if traced is None:
            with tracing_frame(axis_name, size):
                traced = Traced(call, shard_avals, staging.describe(fun, "pmap"))
            if traced.cacheable:
                cache[key] = traced
        flat_out_axes = flatten_axes("pmap out_axes", traced.out_tree, out_axes,
                                     len(traced.jaxpr.out_avals))
        flat_out_axes = [_out_axis(axis, aval) for axis, aval in
                         zip(flat_out_axes, traced.jaxpr.out_avals)]
        outs = pmap_p.bind(
            *traced.consts, *flat_args, jaxpr=traced.jaxpr, axis_name=axis_name,
            axis_size=size, in_axes=(None,) * len(traced.consts) + tuple(flat_axes),
            out_axes=tuple(flat_out_axes), name=name, devices=devices, backend=backend)
        _give_away([a for i, a in enumerate(args) if i in donated])
        return traced.out_tree.unflatten(outs)
    return pmapped


def _give_away(donated):
    """Delete the Arrays among ``donated`` (tracers, under a transformation, and NumPy
    values are left as they are)."""
    for leaf in pytree.tree_leaves(donated):
        if isinstance(leaf, Array) and not leaf.is_deleted():
            leaf.delete()


def _split_static(fun, name, args, kwargs, static_nums, in_axes):
    """The call with the static arguments split off (they must be hashable: they key the
    trace cache), and the in_axes of the others (a tuple in_axes lists every positional
    argument, static ones included, as in JAX)."""
    if static_nums and max(static_nums) >= len(args):
        raise ValueError(f"pmapped function has static_broadcasted_argnums={static_nums} but "
                         f"was called with only {len(args)} positional arguments. All static "
                         "broadcasted arguments must be passed positionally.")
    static = static_positions(static_nums, len(args))
    call = FlatCall(fun, args, kwargs, static)
    call.check_hashable(name)
    if not isinstance(in_axes, tuple):
        return call, in_axes
    if len(in_axes) != len(args):
        raise ValueError(f"pmap in_axes specification must be a tree prefix of the "
                         f"corresponding value, got specification {in_axes} for value tree "
                         f"{pytree.tree_structure(tuple(args))}.")
    return call, tuple(a for i, a in enumerate(in_axes) if i not in static)


def _axis_size(fun, in_tree, args, axes, axis_size):
    size = mapped_size(fun, in_tree, args, axes, axis_size, "pmap")
    if size < 1:
        raise ValueError(f"pmap needs a mapped axis of size at least 1, got {size}")
    return size


def _out_axis(axis, shard_aval):
    if axis is None:
        return None
    rank = shard_aval.ndim + 1
    if not -rank <= axis < rank:
        raise ValueError(f"pmap out_axes {axis} is out of range for an output of rank {rank}")
    return axis % rank

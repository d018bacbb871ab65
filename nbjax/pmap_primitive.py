"""``pmap``: one program run on every device at once, each shard on its own slice of the inputs.

A pmapped call is a ``pmap`` equation holding the jaxpr of ONE shard (operands without the
mapped axis) and, per operand and result, where the mapped axis is (``in_axes``/``out_axes``;
None: the value is the same for every shard). It is the mapped sibling of the ``jit`` call, and
its rules follow jit's: vmap batches the shard jaxpr, JVP differentiates it, partial evaluation
splits it into a known (forward) pmap and an unknown (linear) one, and transposition turns the
linear one into a backward pmap.

Executing a ``pmap`` equation compiles the shard jaxpr once for its target (the ``backend``
param, or the configured default; ``nbjax.compiler``), slices the
mapped operands, and runs the executable on one thread per shard. The collectives inside
(``psum``, ``all_gather``, ``ppermute``...) find their shard's position and the shards' common
``Rendezvous`` in a thread-local axis environment (``nbjax.lax.parallel``), where they wait for
each other and exchange values.
"""

from concurrent.futures import ThreadPoolExecutor
from threading import BrokenBarrierError

import numpy as np

from . import compiler
from .backends import get_target
from .core import ClosedJaxpr, Primitive, get_aval
from .core.array import devices as available_devices
from .interpreters import ad, staging
from .interpreters.partial_eval import partial_eval_jaxpr
from .interpreters.transpose import is_undefined, transposed_call
from .lax import batch_util
from .lax.parallel import AxisFrame, Rendezvous, extend_axis_env
from .lax.reductions import reduce_sum
from .lax.standard import library_lowering

pmap_p = Primitive("pmap", multiple_results=True)
library_lowering(pmap_p, "parallel map")


def shard_aval(aval, axis):
    """The aval one shard sees: ``aval`` without its mapped axis (None: not mapped)."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def shard_avals(args, in_axes):
    """The avals of one shard of ``args``."""
    return [shard_aval(get_aval(x), axis) for x, axis in zip(args, in_axes)]


def unshard_aval(aval, axis, size):
    """The aval of all shards' values stacked at ``axis`` (None: one value for all)."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def tracing_frame(axis_name, axis_size):
    """Bind the axis while a shard function is (re)traced, so collectives know its size."""
    return extend_axis_env(AxisFrame(axis_name, axis_size))


@pmap_p.def_abstract_eval
def _pmap_abstract_eval(*avals, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices,
                        backend):
    for i, (aval, axis, shard) in enumerate(zip(avals, in_axes, jaxpr.in_avals)):
        if axis is not None and (aval.ndim <= axis or aval.shape[axis] != axis_size):
            raise TypeError(f"pmap operand {i} of type {aval.str_short()} has no axis {axis} of "
                            f"size {axis_size} to map over")
        if shard_aval(aval, axis).shape != shard.shape:
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
    available = len(available_devices())
    if axis_size > available:
        raise ValueError(f"compiling computation that requires {axis_size} logical devices, "
                         f"but only {available} XLA devices are available "
                         f"(num_replicas={axis_size})")


@pmap_p.def_impl
def _pmap_impl(*args, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend):
    check_device_count(axis_size, devices)
    executable = compiler.compile(jaxpr, get_target(backend), name)
    rendezvous = Rendezvous(axis_size)

    def run_shard(index):
        shard_args = [x if axis is None else np.take(x, index, axis=axis)
                      for x, axis in zip(args, in_axes)]
        try:
            with extend_axis_env(AxisFrame(axis_name, axis_size, index, rendezvous)):
                return executable.run(*shard_args)
        except BaseException:
            rendezvous.abort()  # the other shards may be waiting for this one
            raise

    with ThreadPoolExecutor(axis_size, thread_name_prefix=f"pmap {name}") as pool:
        futures = [pool.submit(run_shard, i) for i in range(axis_size)]
    shard_outs = _results(futures)
    return [shard_outs[0][k] if axis is None else np.stack([o[k] for o in shard_outs], axis)
            for k, axis in enumerate(out_axes)]


def _results(futures):
    """Every shard's outputs, or the error of the shard that failed (the others then report
    only the barrier it broke)."""
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise min(errors, key=lambda e: isinstance(e, BrokenBarrierError))
    return [f.result() for f in futures]


# --- vmap of pmap --------------------------------------------------------------------------

def _batched_operand(x, bdim, axis):
    """The operand and its mapped axis such that every shard has the batch axis at 0."""
    if axis is None:
        return batch_util.moveaxis(x, bdim, 0), None
    mapped = axis + (axis >= bdim)  # the mapped axis among x's axes
    if bdim - (mapped < bdim) == 0:  # removing the mapped axis leaves the batch axis first
        return x, mapped
    return batch_util.moveaxis(x, bdim, 0), axis + 1


@pmap_p.def_batch
def _pmap_batch(axis_data, vals, dims, *, jaxpr, in_axes, out_axes, **params):
    operands, new_in_axes = [], []
    for x, d, axis in zip(vals, dims, in_axes):
        x, axis = (x, axis) if d is None else _batched_operand(x, d, axis)
        operands.append(x)
        new_in_axes.append(axis)
    with tracing_frame(params["axis_name"], params["axis_size"]):
        batched, out_batched = batch_util.batch_jaxpr(jaxpr, axis_data,
                                                      [d is not None for d in dims], False)
    # A batched shard result has the batch axis first; stacking the shards after it keeps the
    # mapped axis where out_axes puts it once the batch axis is removed.
    new_out_axes = [axis if not b else (None if axis is None else axis + 1)
                    for axis, b in zip(out_axes, out_batched)]
    outs = pmap_p.bind(*operands, jaxpr=batched, in_axes=tuple(new_in_axes),
                       out_axes=tuple(new_out_axes), **params)
    return outs, [0 if b else None for b in out_batched]


# --- forward and reverse mode --------------------------------------------------------------

@pmap_p.def_jvp
def _pmap_jvp(primals, tangents, *, jaxpr, in_axes, out_axes, **params):
    nonzeros = [not isinstance(t, ad.Zero) for t in tangents]
    with tracing_frame(params["axis_name"], params["axis_size"]):
        jvp_closed, out_nonzeros = ad.jvp_jaxpr(jaxpr, nonzeros, False)
    tangent_in_axes = [axis for axis, nz in zip(in_axes, nonzeros) if nz]
    tangent_out_axes = [axis for axis, nz in zip(out_axes, out_nonzeros) if nz]
    outs = pmap_p.bind(*primals, *[t for t in tangents if not isinstance(t, ad.Zero)],
                       jaxpr=jvp_closed, in_axes=in_axes + tuple(tangent_in_axes),
                       out_axes=out_axes + tuple(tangent_out_axes), **params)
    n = len(out_axes)
    nz_tangents = iter(outs[n:])
    tangent_outs = [next(nz_tangents) if nz else ad.Zero.like(out)
                    for nz, out in zip(out_nonzeros, outs[:n])]
    return outs[:n], tangent_outs


def _pmap_partial_eval(trace, args, unknowns, *, jaxpr, in_axes, out_axes, **params):
    """Known operands run a forward pmap now; each shard's residuals come back stacked at
    axis 0 and feed a staged pmap of the unknown part."""
    with tracing_frame(params["axis_name"], params["axis_size"]):
        known, unknown, out_unknowns, num_res = partial_eval_jaxpr(jaxpr, unknowns)
    known_args = [a for a, u in zip(args, unknowns) if not u]
    known_in = tuple(axis for axis, u in zip(in_axes, unknowns) if not u)
    known_out = tuple(axis for axis, u in zip(out_axes, out_unknowns) if not u) + (0,) * num_res
    known_outs = trace.compute_known(pmap_p, known_args, dict(
        params, jaxpr=known, in_axes=known_in, out_axes=known_out))
    n_known = len(known_outs) - num_res
    residuals = known_outs[n_known:]
    unknown_args = [a for a, u in zip(args, unknowns) if u]
    unknown_in = (0,) * num_res + tuple(axis for axis, u in zip(in_axes, unknowns) if u)
    unknown_out = tuple(axis for axis, u in zip(out_axes, out_unknowns) if u)
    unknown_outs = trace.stage(pmap_p, [*residuals, *unknown_args], dict(
        params, jaxpr=unknown, in_axes=unknown_in, out_axes=unknown_out))
    known_iter, unknown_iter = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(unknown_iter) if u else next(known_iter) for u in out_unknowns]


pmap_p.def_rule("partial_eval", _pmap_partial_eval)


@pmap_p.def_transpose
def _pmap_transpose(cts, *args, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices,
                    backend):
    """A backward pmap: each shard transposes its own jaxpr. A linear operand that every shard
    shared (in_axes None) was fanned out, so its cotangent is the sum of the shards' ones."""
    if any(axis is None for axis in out_axes):
        raise NotImplementedError("reverse-mode differentiation of pmap with out_axes=None "
                                  "is not supported")
    linear = [is_undefined(a) for a in args]
    nonlinear = [a for a in args if not is_undefined(a)]
    cts = [ad.instantiate(c) for c in cts]

    nonlinear_axes = tuple(axis for axis, lin in zip(in_axes, linear) if not lin)
    shard_in_avals = ([a for a, lin in zip(jaxpr.in_avals, linear) if not lin]
                      + list(jaxpr.out_avals))
    with tracing_frame(axis_name, axis_size):
        t_jaxpr, consts = staging.trace_to_jaxpr(transposed_call(jaxpr, linear), shard_in_avals,
                                                 f"transpose of pmap of {name}")
    linear_axes = [axis for axis, lin in zip(in_axes, linear) if lin]
    outs = pmap_p.bind(*consts, *nonlinear, *cts,
                       jaxpr=ClosedJaxpr(staging.convert_constvars(t_jaxpr), []),
                       axis_name=axis_name, axis_size=axis_size,
                       in_axes=(None,) * len(consts) + nonlinear_axes + out_axes,
                       out_axes=tuple(0 if axis is None else axis for axis in linear_axes),
                       name=name, devices=devices, backend=backend)
    outs = iter([ct if axis is not None else reduce_sum(ct, (0,))
                 for ct, axis in zip(outs, linear_axes)])
    return [next(outs) if lin else None for lin in linear]

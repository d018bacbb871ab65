"""Host callbacks: Python functions called on the values of a computation, as it runs.

``debug_callback`` has no results; its one param is the function, called with the operands
as Arrays. It is *effectful*: the compiler keeps it although nothing reads its (empty)
results, never merges two of them and never runs one at compile time; the CPU backend runs
it as a host step between kernels. Its rules, side by side:

- eagerly (impl) it calls the function at once; an exception the function raises comes out
  as it is, but in a compiled program (``compiled_program``) as JAX's runtime error, after
  the log message ``jax.jit`` gives;
- under ``jvp``/``grad`` it is bound on the primals only, so the primal values are passed
  (once: partial evaluation computes it with the known values);
- under ``vmap`` it is bound once per batch member, in order, with that member's values
  (unbatched operands as they are), as ``jax.debug.callback`` does;
- staged into a jaxpr (``jit``, ``make_jaxpr``) it is recorded and runs when the program does.

``pure_callback`` computes results of declared shapes and dtypes in Python. It is pure: the
compiler may drop it when nothing reads its results. An exception the function raises comes
out as JAX's does, a ``JaxRuntimeError`` holding its traceback (the original as its cause).
It has no derivative (wrap it in ``custom_jvp``); under ``vmap`` its ``vmap_method`` says
how it sees the batch.

``io_callback`` (``nbjax.experimental.io_callback``) computes results the same way but is
effectful, as ``debug_callback``: the compiler keeps it when nothing reads its results and
never merges two. Under ``vmap`` it is called once per batch member, in order (``ordered``
ones refuse to be batched, as JAX's); it has no derivative either.

Both check what the callback returns as JAX does: its leaves, however nested, one per
declared result; each converted to the type nbjax would store it as (a Python float or a
float64 array is float32 without x64), then of the declared shape and dtype.
"""

import contextlib
import logging
import threading
import traceback

import numpy as np

from ..core import Array, Primitive, dtypes, pytree, valid_value
from ..core.abstract import ShapedArray
from ..core.errors import JaxRuntimeError
from . import batch_util
from .shapes import expand_dims, moveaxis
from .standard import library_lowering
from .structural import concatenate, index_in_dim

__all__ = ["debug_callback", "debug_callback_p", "io_callback", "io_callback_p",
           "pure_callback", "pure_callback_p"]

log = logging.getLogger(__name__)


class _Running(threading.local):
    compiled = False  # whether a compiled program is running in this thread


_running = _Running()


@contextlib.contextmanager
def compiled_program():
    """``with compiled_program():`` around what runs a compiled program's host steps, where a
    failing ``debug_callback`` raises JAX's runtime error (eagerly: its own exception)."""
    previous, _running.compiled = _running.compiled, True
    try:
        yield
    finally:
        _running.compiled = previous


def _runtime_error(e):
    """JAX's error for exception ``e`` raised by a callback in a program: its traceback in
    the message (the original is the new error's cause)."""
    return JaxRuntimeError("INTERNAL: CpuCallback error calling callback: "
                           + "".join(traceback.format_exception(e)).rstrip())

debug_callback_p = Primitive("debug_callback", multiple_results=True)
library_lowering(debug_callback_p, "host callback")
debug_callback_p.effectful = True


def debug_callback(callback, *args):
    """Call ``callback(*args)`` (with Arrays) whenever the computation runs; returns nothing."""
    debug_callback_p.bind(*args, callback=callback)


@debug_callback_p.def_abstract_eval
def _debug_callback_abstract_eval(*avals, callback):
    return []


@debug_callback_p.def_impl
def _debug_callback_impl(*args, callback):
    if not _running.compiled:
        callback(*_arrays(args))
        return []
    try:
        callback(*_arrays(args))
    except Exception as e:
        log.error("jax.debug.callback failed", exc_info=e)
        raise _runtime_error(e) from e
    return []


def _arrays(args):
    return [a if isinstance(a, Array) else Array(a) for a in args]


@debug_callback_p.def_jvp
def _debug_callback_jvp(primals, tangents, *, callback):
    debug_callback_p.bind(*primals, callback=callback)
    return [], []


def _member(vals, dims, i):
    """Batch member ``i`` of the operands (unbatched ones as they are)."""
    return [v if d is None else index_in_dim(v, i, d, keepdims=False) for v, d in zip(vals, dims)]


@debug_callback_p.def_batch
def _debug_callback_batch(axis_data, vals, dims, *, callback):
    for i in range(axis_data.size):
        debug_callback_p.bind(*_member(vals, dims, i), callback=callback)
    return [], []


class FlatCallback:
    """A callback taking the flat array operands of a callback primitive: it puts them back
    among the other (static) leaves of the argument pytree. Its repr (the callback's name)
    is what a jaxpr prints. Made by ``flatten_callback``."""

    def __init__(self, callback, leaves, treedef, dynamic):
        self.callback = callback
        self.leaves, self.treedef, self.dynamic = leaves, treedef, dynamic

    def __call__(self, *values):
        full = list(self.leaves)
        for i, v in zip(self.dynamic, values):
            full[i] = v
        args, kwargs = pytree.tree_unflatten(self.treedef, full)
        return self.callback(*args, **kwargs)

    def __repr__(self):
        return getattr(self.callback, "__qualname__", repr(self.callback))


def flatten_callback(callback, args, kwargs):
    """(the ``FlatCallback`` of ``callback``, the array operands among the leaves of
    ``args`` and ``kwargs``). The callback keeps the static leaves only: the operands may
    be tracers, and a jaxpr's parameters must not keep its trace alive (nor make it
    impossible to key in the disk cache)."""
    leaves, treedef = pytree.tree_flatten((args, kwargs))
    dynamic = [i for i, x in enumerate(leaves) if valid_value(x)]
    operands = [leaves[i] for i in dynamic]
    for i in dynamic:
        leaves[i] = None
    return FlatCallback(callback, leaves, treedef, dynamic), operands


# --- pure_callback -------------------------------------------------------------------------

pure_callback_p = Primitive("pure_callback", multiple_results=True)
library_lowering(pure_callback_p, "host callback")
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """``callback(*args, **kwargs)`` computed in Python on the values (as Arrays), also under
    ``jit``; it must return arrays of the shapes and dtypes of ``result_shape_dtypes`` (a
    pytree of objects with ``.shape`` and ``.dtype``), and have no side effects: nbjax may
    skip a call whose results are unused, or repeat one.

    ``vmap_method`` says what it does under ``vmap``: ``"sequential"`` calls it once per
    batch member; ``"expand_dims"`` calls it once, batched operands with the batch axis in
    front and unbatched ones with a size-1 axis there; ``"broadcast_all"`` as
    ``expand_dims`` with every operand broadcast to the batch size. ``sharding`` is accepted
    for JAX's signature (an nbjax array lives on one device).
    """
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}")
    avals, out_tree = _result_avals(result_shape_dtypes)
    flat, operands = flatten_callback(_LeavesOf(callback), args, kwargs)
    outs = pure_callback_p.bind(*operands, callback=flat, result_avals=avals,
                                vmap_method=vmap_method)
    return pytree.tree_unflatten(out_tree, outs)


def _result_avals(result_shape_dtypes):
    """(The types of the declared results, their pytree structure.) A 64-bit type that
    nbjax would not store (x64 off) cannot be declared, as in JAX."""
    specs, out_tree = pytree.tree_flatten(result_shape_dtypes)
    avals = tuple(ShapedArray(s.shape, s.dtype) for s in specs)
    if any(dtypes.canonicalize(a.dtype) != a.dtype for a in avals):
        raise ValueError("result_shape_dtypes cannot specify 64-bit types when `enable_x64` "
                         "is disabled")
    return avals, out_tree


class _LeavesOf:
    """The callback with its results flattened to their leaves (JAX checks their number,
    not their structure: a list for a declared tuple will do)."""

    def __init__(self, callback):
        self.callback = callback

    def __call__(self, *args, **kwargs):
        return pytree.tree_leaves(self.callback(*args, **kwargs))

    def __repr__(self):
        return getattr(self.callback, "__qualname__", repr(self.callback))


def _results_abstract_eval(*avals, result_avals, **params):
    return list(result_avals)


def _checked_results(outs, result_avals):
    """The callback's results ``outs`` (its leaves) as NumPy arrays of ``result_avals``'
    types, or JAX's runtime error saying which is not."""
    if len(outs) != len(result_avals):
        raise JaxRuntimeError(f"Mismatched number of outputs from callback. Expected: "
                              f"{len(result_avals)}, Actual: {len(outs)}")
    checked = []
    for i, (out, aval) in enumerate(zip(outs, result_avals)):
        out = np.asarray(out.__array__() if isinstance(out, Array) else out)
        if dtypes.is_supported(out.dtype):
            out = out.astype(dtypes.canonicalize(out.dtype), copy=False)
        if out.shape != aval.shape:
            raise JaxRuntimeError(f"Incorrect output shape for return value #{i}: "
                                  f"Expected: {aval.shape}, Actual: {out.shape}")
        if out.dtype != aval.dtype:
            raise JaxRuntimeError(f"Incorrect output dtype for return value #{i}: "
                                  f"Expected: {aval.dtype}, Actual: {out.dtype}")
        checked.append(out)
    return checked


pure_callback_p.def_abstract_eval(_results_abstract_eval)


def _called(callback, args, result_avals, failure=None):
    """The callback's results on ``args``, checked; an exception it raises comes out as
    JAX's runtime error, eagerly too, as JAX's (after the log message ``failure``)."""
    try:
        outs = callback(*_arrays(args))
    except Exception as e:
        if failure is not None:
            log.error(failure, exc_info=e)
        raise _runtime_error(e) from e
    return _checked_results(outs, result_avals)


@pure_callback_p.def_impl
def _pure_callback_impl(*args, callback, result_avals, vmap_method):
    return _called(callback, args, result_avals)


@pure_callback_p.def_jvp
def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                     "callbacks while taking gradients.")


@pure_callback_p.def_batch
def _pure_callback_batch(axis_data, vals, dims, *, callback, result_avals, vmap_method):
    size = axis_data.size
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _sequential_batch(pure_callback_p, size, vals, dims, callback=callback,
                                 result_avals=result_avals, vmap_method=vmap_method)
    if vmap_method not in ("expand_dims", "broadcast_all"):
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is one "
            f"of {', '.join(map(repr, VMAP_METHODS))}. Got vmap_method={vmap_method!r}.")
    width = size if vmap_method == "broadcast_all" else 1
    vals = [moveaxis(v, d, 0) if d is not None else batch_util.broadcast_batch(
        v, width, 0) for v, d in zip(vals, dims)]
    avals = tuple(ShapedArray((size, *a.shape), a.dtype) for a in result_avals)
    outs = pure_callback_p.bind(*vals, callback=callback, result_avals=avals,
                                vmap_method=vmap_method)
    return outs, [0] * len(outs)


def _sequential_batch(prim, size, vals, dims, **params):
    """A callback primitive batched by calling it once per member, in order: the results
    stacked along a new first axis."""
    members = [prim.bind(*_member(vals, dims, i), **params) for i in range(size)]
    n = len(params["result_avals"])
    return [_stack([m[k] for m in members]) for k in range(n)], [0] * n


def _stack(xs):
    return concatenate([expand_dims(x, (0,)) for x in xs], 0)


# --- io_callback ---------------------------------------------------------------------------

io_callback_p = Primitive("io_callback", multiple_results=True)
library_lowering(io_callback_p, "host callback")
io_callback_p.effectful = True


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False,
                **kwargs):
    """``callback(*args, **kwargs)`` computed in Python on the values (as Arrays), also under
    ``jit``, where it may have side effects (write a file, count calls): unlike
    ``pure_callback`` it runs whenever the computation does, even when nothing reads its
    results. It must return arrays of the shapes and dtypes of ``result_shape_dtypes`` (a
    pytree of objects with ``.shape`` and ``.dtype``; None for no results). Under ``vmap``
    it is called once per batch member, in order; an ``ordered`` one (calls in program
    order, which nbjax keeps for all) cannot be batched, as in JAX. ``sharding`` is
    accepted for JAX's signature."""
    avals, out_tree = _result_avals(result_shape_dtypes)
    flat, operands = flatten_callback(_LeavesOf(callback), args, kwargs)
    outs = io_callback_p.bind(*operands, callback=flat, result_avals=avals,
                              ordered=bool(ordered))
    return pytree.tree_unflatten(out_tree, outs)


io_callback_p.def_abstract_eval(_results_abstract_eval)


@io_callback_p.def_impl
def _io_callback_impl(*args, callback, result_avals, ordered):
    return _called(callback, args, result_avals, failure="jax.io_callback failed")


@io_callback_p.def_jvp
def _io_callback_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


@io_callback_p.def_batch
def _io_callback_batch(axis_data, vals, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    return _sequential_batch(io_callback_p, axis_data.size, vals, dims, callback=callback,
                             result_avals=result_avals, ordered=ordered)

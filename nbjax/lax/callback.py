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
"""

import contextlib
import logging
import threading
import traceback

import numpy as np

from ..core import Array, Primitive, pytree, valid_value
from ..core.abstract import ShapedArray
from ..core.errors import JaxRuntimeError
from . import batch_util
from .shapes import expand_dims, moveaxis
from .standard import library_lowering
from .structural import concatenate, index_in_dim

__all__ = ["debug_callback", "debug_callback_p", "pure_callback", "pure_callback_p"]

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
    specs, out_tree = pytree.tree_flatten(result_shape_dtypes)
    avals = tuple(ShapedArray(s.shape, s.dtype) for s in specs)
    flat, operands = flatten_callback(_ResultsOf(callback, out_tree), args, kwargs)
    outs = pure_callback_p.bind(*operands, callback=flat, result_avals=avals,
                                vmap_method=vmap_method)
    return pytree.tree_unflatten(out_tree, outs)


class _ResultsOf:
    """The callback with its results flattened, in the declared structure."""

    def __init__(self, callback, out_tree):
        self.callback, self.out_tree = callback, out_tree

    def __call__(self, *args, **kwargs):
        return self.out_tree.flatten_up_to(self.callback(*args, **kwargs))

    def __repr__(self):
        return getattr(self.callback, "__qualname__", repr(self.callback))


@pure_callback_p.def_abstract_eval
def _pure_callback_abstract_eval(*avals, callback, result_avals, vmap_method):
    return list(result_avals)


@pure_callback_p.def_impl
def _pure_callback_impl(*args, callback, result_avals, vmap_method):
    try:
        outs = callback(*_arrays(args))
    except Exception as e:  # (as JAX, eagerly too)
        raise _runtime_error(e) from e
    checked = []
    for i, (out, aval) in enumerate(zip(outs, result_avals)):
        out = np.asarray(out.__array__() if isinstance(out, Array) else out)
        if out.shape != aval.shape:
            raise JaxRuntimeError(f"Incorrect output shape for return value #{i}: "
                                  f"Expected: {aval.shape}, Actual: {out.shape}")
        if out.dtype != aval.dtype:
            raise JaxRuntimeError(f"Incorrect output dtype for return value #{i}: "
                                  f"Expected: {aval.dtype}, Actual: {out.dtype}")
        checked.append(out)
    return checked


@pure_callback_p.def_jvp
def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                     "callbacks while taking gradients.")


@pure_callback_p.def_batch
def _pure_callback_batch(axis_data, vals, dims, *, callback, result_avals, vmap_method):
    size = axis_data.size
    if vmap_method in ("sequential", "sequential_unrolled"):
        members = [pure_callback_p.bind(*_member(vals, dims, i), callback=callback,
                                        result_avals=result_avals, vmap_method=vmap_method)
                   for i in range(size)]
        return [_stack([m[k] for m in members]) for k in range(len(result_avals))], \
            [0] * len(result_avals)
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


def _stack(xs):
    return concatenate([expand_dims(x, (0,)) for x in xs], 0)

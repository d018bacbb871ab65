"""``debug_callback``: call a Python function on the values of a computation, as it runs.

The primitive has no results; its one param is the function, called with the operands as
Arrays. It is *effectful*: the compiler keeps it although nothing reads its (empty) results,
never merges two of them and never runs one at compile time; the CPU backend runs it as a
host step between kernels. Its rules, side by side:

- eagerly (impl) it calls the function at once;
- under ``jvp``/``grad`` it is bound on the primals only, so the primal values are passed
  (once: partial evaluation computes it with the known values);
- under ``vmap`` it is bound once per batch member, in order, with that member's values
  (unbatched operands as they are), as ``jax.debug.callback`` does;
- staged into a jaxpr (``jit``, ``make_jaxpr``) it is recorded and runs when the program does.
"""

from ..core import Array, Primitive
from .slicing import index_in_dim
from .standard import library_lowering

__all__ = ["debug_callback", "debug_callback_p"]

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
    callback(*(a if isinstance(a, Array) else Array(a) for a in args))
    return []


@debug_callback_p.def_jvp
def _debug_callback_jvp(primals, tangents, *, callback):
    debug_callback_p.bind(*primals, callback=callback)
    return [], []


@debug_callback_p.def_batch
def _debug_callback_batch(axis_data, vals, dims, *, callback):
    for i in range(axis_data.size):
        debug_callback_p.bind(*(v if d is None else index_in_dim(v, i, d, keepdims=False)
                                for v, d in zip(vals, dims)), callback=callback)
    return [], []


"""``nbjax.debug``: print or inspect values while a (traced, jitted, vmapped) program runs.

Both functions bind ``lax.debug_callback`` (see ``nbjax/lax/callback.py`` for its rules):
array leaves of the arguments become its operands, so the callback sees the *values* at run
time, also under ``jit``; other leaves (strings, ``None``...) are passed through unchanged.
"""

from .core import pytree, valid_value
from .lax.callback import debug_callback

__all__ = ["callback", "print"]

_print = print


def callback(callback, *args, ordered=False, partitioned=False, **kwargs):
    """Call ``callback(*args, **kwargs)`` with the values of the array leaves when the
    computation runs: once eagerly or per run of a jitted function, once per batch member
    under ``vmap``, with the primal values under ``grad``. ``ordered`` and ``partitioned``
    are accepted for JAX's signature; nbjax runs programs in order on one device."""
    leaves, treedef = pytree.tree_flatten((args, kwargs))
    dynamic = [i for i, x in enumerate(leaves) if valid_value(x)]
    debug_callback(_FlatCallback(callback, leaves, treedef, dynamic),
                   *(leaves[i] for i in dynamic))


class _FlatCallback:
    """The user's callback taking the flat operands of ``debug_callback``: it puts them back
    in the argument pytree. Its repr (the callback's name) is what a jaxpr prints."""

    def __init__(self, callback, leaves, treedef, dynamic):
        self.callback, self.leaves, self.treedef, self.dynamic = callback, leaves, treedef, dynamic

    def __call__(self, *values):
        full = list(self.leaves)
        for i, v in zip(self.dynamic, values):
            full[i] = v
        args, kwargs = pytree.tree_unflatten(self.treedef, full)
        self.callback(*args, **kwargs)

    def __repr__(self):
        if isinstance(self.callback, _Formatter):
            return repr(self.callback)
        return getattr(self.callback, "__qualname__", repr(self.callback))


def print(fmt, *args, ordered=False, partitioned=False, **kwargs):
    """``print(fmt.format(*args, **kwargs))`` with the run-time values, as
    ``jax.debug.print``: arrays print as NumPy prints them (``{x!r}`` as ``Array(...)``)."""
    callback(_Formatter(fmt), *args, ordered=ordered, partitioned=partitioned, **kwargs)


class _Formatter:
    """Prints ``fmt`` formatted with the values; shows as ``print('<fmt>')`` in a jaxpr."""

    def __init__(self, fmt):
        self.fmt = fmt

    def __call__(self, *args, **kwargs):
        _print(self.fmt.format(*args, **kwargs))

    def __repr__(self):
        return f"print({self.fmt!r})"

"""``nbjax.debug``: print or inspect values while a (traced, jitted, vmapped) program runs.

``callback``, ``print``, ``log`` and ``breakpoint`` bind ``lax.debug_callback`` (see
``nbjax/lax/callback.py`` for its rules): array leaves of the arguments become its operands,
so the callback sees the *values* at run time, also under ``jit``; other leaves (strings,
``None``...) are passed through unchanged.

The sharding functions describe nbjax's one placement: every array lives whole on one
device (``SingleDeviceSharding``), known at trace time, so they answer at once.
"""

import inspect
import logging
import pdb

from .core import Array, first_local_device, pytree
from .core.array import SingleDeviceSharding
from .lax.callback import debug_callback, flatten_callback

__all__ = ["DebugEffect", "OrderedDebugEffect", "breakpoint", "callback",
           "inspect_array_sharding", "log", "print", "visualize_array_sharding",
           "visualize_sharding"]

_print = print
logger = logging.getLogger("nbjax.debug")


class DebugEffect:
    """The effect of a debug callback (JAX's ``jax.debug.DebugEffect``): running it does
    something besides computing results. nbjax marks it on the primitive
    (``debug_callback_p.effectful``); the compiler then keeps, never merges and never
    constant-folds it."""

    def __str__(self):
        return "Debug"

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))


class OrderedDebugEffect(DebugEffect):
    """A debug effect ordered with the others (``ordered=True``). nbjax runs every program
    in order on one device, so all its debug callbacks are ordered."""

    def __str__(self):
        return "OrderedDebug"


def callback(callback, *args, ordered=False, partitioned=False, **kwargs):
    """Call ``callback(*args, **kwargs)`` with the values of the array leaves when the
    computation runs: once eagerly or per run of a jitted function, once per batch member
    under ``vmap``, with the primal values under ``grad``. ``ordered`` and ``partitioned``
    are accepted for JAX's signature; nbjax runs programs in order on one device."""
    flat, operands = flatten_callback(callback, args, kwargs)
    debug_callback(flat, *operands)


def print(fmt=None, *args, ordered=False, partitioned=False, **kwargs):
    """``print(fmt.format(*args, **kwargs))`` with the run-time values, as
    ``jax.debug.print``: arrays print as NumPy prints them (``{x!r}`` as ``Array(...)``).
    Without ``fmt``, returns the function to call with it (``print(ordered=True)(fmt, x)``).
    """
    return _format_callback(_print, fmt, args, kwargs, ordered, partitioned)


def log(fmt=None, *args, ordered=False, partitioned=False, **kwargs):
    """As ``print``, but logs the message at INFO level to the ``nbjax.debug`` logger."""
    return _format_callback(logger.info, fmt, args, kwargs, ordered, partitioned)


def _format_callback(emit, fmt, args, kwargs, ordered, partitioned):
    """Bind a callback emitting ``fmt`` formatted with the run-time values; without
    ``fmt`` (JAX's two-call form), the function that does."""
    def bind(fmt, *args, **kwargs):
        callback(_Formatter(fmt, emit), *args, ordered=ordered, partitioned=partitioned,
                 **kwargs)
    if fmt is not None:
        return bind(fmt, *args, **kwargs)
    if args or kwargs:
        raise TypeError("debug print received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return bind


class _Formatter:
    """Emits ``fmt`` formatted with the values; shows as ``print('<fmt>')`` in a jaxpr."""

    def __init__(self, fmt, emit=_print):
        self.fmt, self.emit = fmt, emit

    def __call__(self, *args, **kwargs):
        self.emit(self.fmt.format(*args, **kwargs))

    def __repr__(self):
        name = "print" if self.emit is _print else "log"
        return f"{name}({self.fmt!r})"


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False,
               token=None, **kwargs):
    """Stop in the debugger (``pdb``) when the computation runs, with the caller's local
    variables as their *values* (arrays where the program had tracers): ``p x``, then
    ``c`` to go on. Under ``vmap`` it stops once per batch member. Only the calling frame
    is shown (``num_frames`` and ``filter_frames`` are accepted for JAX's signature);
    ``backend`` may be None or ``"cli"``. ``token`` is returned unchanged."""
    if backend not in (None, "cli"):
        raise ValueError(f"Debugger backend {backend!r} is not available; nbjax has 'cli'.")
    frame = inspect.currentframe().f_back
    where = f"{frame.f_code.co_filename}({frame.f_lineno}){frame.f_code.co_name}()"
    traced, static = {}, {}
    for name, value in frame.f_locals.items():
        (traced if _flattens(value) else static)[name] = value
    del frame
    callback(_Debugger(where, static), traced, ordered=ordered)
    return token


def _flattens(value):
    try:
        pytree.tree_flatten(value)
        return True
    except TypeError:  # e.g. a dict with keys that do not sort
        return False


class _Debugger:
    """Opens ``pdb`` on a namespace of the caller's variables with their run-time values."""

    def __init__(self, where, static):
        self.where, self.static = where, static

    def __call__(self, traced):
        namespace = {**self.static, **traced}
        _print(f"Entering nbjax debugger at {self.where}:")
        pdb.Pdb().run("pass", {"__builtins__": __builtins__}, namespace)

    def __repr__(self):
        return "breakpoint"


def inspect_array_sharding(value, *, callback):
    """Call ``callback(sharding)`` for each array of the pytree ``value``: at once, also
    while tracing (nbjax places every array whole on one device, so it is known then;
    JAX reports a traced value's sharding at compile time)."""
    for leaf in pytree.tree_leaves(value):
        callback(_sharding(leaf))


def _sharding(x):
    if isinstance(x, Array):
        return x.sharding
    return SingleDeviceSharding(first_local_device())


def visualize_array_sharding(arr, **kwargs):
    """Print where the parts of ``arr`` (1-D or 2-D) live: one box, its device."""
    inspect_array_sharding(arr, callback=lambda s: visualize_sharding(arr.shape, s, **kwargs))


def visualize_sharding(shape, sharding, *, use_color=True, scale=1.0, min_width=9,
                       max_width=80, color_map=None):
    """Print the devices of ``sharding`` over an array of ``shape`` as boxes (JAX draws them
    with ``rich``; nbjax's shardings are one device, so one box of plain text)."""
    if len(shape) not in (1, 2):
        raise ValueError(f"Unsupported tensor shape {tuple(shape)}: visualize_sharding draws "
                         "1-D and 2-D arrays")
    label = ", ".join(f"{d.platform.upper()} {d.id}" for d in sorted(sharding.device_set,
                                                                       key=lambda d: d.id))
    width = min(max(len(label) + 4, int(min_width * scale)), max_width)
    rows = 1 if len(shape) == 1 else max(3, int(round(scale * min(shape[0], 9))) | 1)
    body = [" " * (width - 2)] * rows
    body[rows // 2] = label.center(width - 2)
    _print("\n".join(["┌" + "─" * (width - 2) + "┐", *(f"│{r}│" for r in body),
                      "└" + "─" * (width - 2) + "┘"]))

"""The functions the magics put in the user's namespace, and what they report to views.

``WatchedJit`` is ``nbjax.jit`` of a cell's function that, while a view watches it, times
each concrete call (and the trace and compilation before the first one) and tells its
views. Nobody watching: it is a plain jitted call plus one attribute check.
``GradWatch`` is ``grad_f``/``hess_f``: the transformed function, telling its views the
last concrete input so they can show (and step through) the computation at that point.

Both re-raise exceptions with nbjax's frames removed from the traceback, so an error in the
user's function points at the user's cell line.
"""

import collections
import contextlib
import functools
import time

from .. import compiler
from ..config import config
from ..core import Tracer, pytree
from ..compiler import report
from ..jit import JitWrapped, _as_value
from .tracebacks import call_user_function

STEP_SAMPLES = 64  # run times kept per plan step


def has_tracers(args, kwargs):
    """Whether a call happens under a transformation (no concrete values to show)."""
    return any(isinstance(x, Tracer) for x in pytree.tree_leaves((args, kwargs)))


def block(tree):
    for leaf in pytree.tree_leaves(tree):
        ready = getattr(leaf, "block_until_ready", None)
        if ready is not None:
            ready()


@contextlib.contextmanager
def backend_override(name):
    """Run jitted calls on ``name`` (None: the configured backend)."""
    if name is None:
        yield
        return
    previous = config.jit_backend
    config.update("jit_backend", name)
    try:
        yield
    finally:
        config.update("jit_backend", previous)


class Compilation:
    """One traced and compiled signature of a watched function, with its measurements."""

    def __init__(self, name, traced, executable, backend, signature, trace_seconds,
                 compile_seconds):
        self.name, self.traced, self.executable = name, traced, executable
        self.backend, self.signature = backend, signature
        self.trace_seconds, self.compile_seconds = trace_seconds, compile_seconds
        self.plan = getattr(executable, "plan", None)
        self.optimised = executable.jaxpr if self.plan is not None else None
        self.rewrites = getattr(executable, "rewrites", None) or []
        self.costs = report.step_costs(executable)  # flops and bytes of each step
        self.eager_seconds = None
        self.call_count = 0
        self.call_seconds = collections.deque(maxlen=1000)
        self.step_seconds = collections.defaultdict(
            lambda: collections.deque(maxlen=STEP_SAMPLES))
        if hasattr(executable, "enable_timing"):
            executable.enable_timing()

    def record_call(self, seconds):
        self.call_count += 1
        self.call_seconds.append(seconds)
        times = getattr(self.executable, "step_times", None)
        if times:
            for step, samples in times.items():
                self.step_seconds[step].append(samples[-1])
            times.clear()


def describe_signature(key):
    """A jit cache key in words: the argument types, then the static arguments."""
    _, avals, static, static_kw, _ = key
    parts = [a.str_short() for a in avals]
    parts += [f"arg{i}={v!r}" for i, v in static] + [f"{k}={v!r}" for k, v in static_kw]
    return ", ".join(parts) or "no arguments"


class WatchedJit(JitWrapped):
    """``nbjax.jit(fun)`` that reports its calls to the views watching it (``watchers``:
    objects with ``on_call(watched, compilation)`` and a ``wants_timing`` flag)."""

    def __init__(self, fun, *, backend=None, static_argnums=None, static_argnames=None):
        super().__init__(fun, static_argnums=static_argnums, static_argnames=static_argnames)
        self.backend = backend
        self.watchers = []
        self.compilations = {}
        self.current = None  # the Compilation of the last watched call

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (read by IPython)
        if not self.watchers:
            with backend_override(self.backend):
                return call_user_function(super().__call__, args, kwargs)
        return call_user_function(self._watched_call, (args, kwargs), {})

    def view(self, panes=None):
        """A compiler view of this function (it updates on every call)."""
        from .widgets import CompilerView
        return CompilerView(self, panes=panes)

    def _watched_call(self, args, kwargs):
        __tracebackhide__ = True  # noqa: F841
        with backend_override(self.backend):
            if has_tracers(args, kwargs):
                return JitWrapped.__call__(self, *args, **kwargs)
            comp = self._compilation(args, kwargs)
            t0 = time.perf_counter()
            out = JitWrapped.__call__(self, *args, **kwargs)
            block(out)
            comp.record_call(time.perf_counter() - t0)
        for watcher in list(self.watchers):
            watcher.on_call(self, comp)
        return out

    def _compilation(self, args, kwargs):
        """The Compilation for these arguments: traced, compiled and measured once."""
        entry = self._lookup(args, kwargs, _as_value)[0]
        backend = config.jit_backend
        key = (self._last_key, backend)
        comp = self.compilations.get(key)
        if comp is None or comp.traced is not entry.jaxpr:
            t0 = time.perf_counter()
            executable = compiler.compile(entry.jaxpr, name=self.name, backend=backend)
            comp = Compilation(self.name, entry.jaxpr, executable, backend,
                               describe_signature(self._last_key),
                               getattr(entry, "trace_seconds", None),
                               time.perf_counter() - t0)
            if any(getattr(w, "wants_timing", False) for w in self.watchers):
                comp.eager_seconds = self._eager_seconds(args, kwargs)
            self.compilations[key] = comp
        self.current = comp
        return comp

    def _eager_seconds(self, args, kwargs):
        """The time of one call of the function without jit (None if that fails)."""
        t0 = time.perf_counter()
        try:
            block(self.fun(*args, **kwargs))
        except Exception:
            return None
        return time.perf_counter() - t0


class GradWatch:
    """``grad_f`` (or ``hess_f``): the transformed function; each concrete call tells the
    watchers (``on_input(watch, args, kwargs)``) the input it was called with."""

    def __init__(self, transformed, fun, kind, argnums):
        functools.update_wrapper(self, fun)
        self.__name__ = self.__qualname__ = f"{kind}_{fun.__name__}"
        self.transformed, self.fun, self.kind, self.argnums = transformed, fun, kind, argnums
        self.watchers = []

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841
        out = call_user_function(self.transformed, args, kwargs)
        if self.watchers and not has_tracers(args, kwargs):
            for watcher in list(self.watchers):
                watcher.on_input(self, args, kwargs)
        return out

    def __repr__(self):
        return f"<{self.__name__}: {self.kind} of {self.fun.__name__}>"


def retire(value):
    """Close the views of ``value`` when it is a watched function that a cell run again
    replaces: a closed widget leaves ipywidgets' registry, so the views and the compiled
    code they hold are freed (a cell run a thousand times keeps one view, not a thousand)."""
    if isinstance(value, (WatchedJit, GradWatch)):
        watchers, value.watchers = value.watchers, []
        for watcher in watchers:
            watcher.close()

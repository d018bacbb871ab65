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
import functools
import inspect
import time

from ..compiler import report
from ..core import (ClosedJaxpr, EvalTrace, Jaxpr, Tracer, current_trace, eval_jaxpr, pytree,
                    set_current_trace)
from ..jit import JitWrapped
from .panes import argument_names
from .tracebacks import call_user_function
from .widgets import CompilerView

STEP_SAMPLES = 64  # run times kept per plan step


def has_tracers(args, kwargs):
    """Whether a call happens under a transformation (no concrete values to show)."""
    return any(isinstance(x, Tracer) for x in pytree.tree_leaves((args, kwargs)))


def block(tree):
    for leaf in pytree.tree_leaves(tree):
        ready = getattr(leaf, "block_until_ready", None)
        if ready is not None:
            ready()


# The baselines (nbjax eager, NumPy one call per equation) run the program one equation at a
# time; past this many equations in one run (a long loop's body counts once per iteration)
# they would take seconds, so they are not measured. Short programs' baselines run only when
# a view asks for them (``WatchedJit.measure_baselines``), never inside the user's call: at
# 3000x3000 they cost the first call 0.5-0.9 s more, which its timing would not show.
BASELINE_EQUATIONS = 20_000


def equations_run(jaxpr):
    """How many equations one run of ``jaxpr`` evaluates, one by one: a ``scan`` body's
    once per iteration, the largest branch of a ``cond``; a ``while`` loop's count is not
    known before it runs (infinity)."""
    total = 0
    for eqn in jaxpr.eqns:
        subs = [_open(v) for v in eqn.params.values() if isinstance(v, (Jaxpr, ClosedJaxpr))]
        branches = [_open(b) for b in eqn.params.get("branches", ())]
        if eqn.primitive.name == "while":
            return float("inf")
        inner = sum(map(equations_run, subs)) + max(map(equations_run, branches), default=0)
        total += 1 + inner * eqn.params.get("length", 1)
    return total


def _open(jaxpr):
    return jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr


class Compilation:
    """One traced and compiled signature of a watched function, with its measurements
    (from the ``JitCall`` of its first watched call)."""

    def __init__(self, call, input_names=None):
        executable = call.executable
        self.input_names = input_names  # the user's names of the traced inputs, or None
        self.name, self.traced, self.executable = executable.name, call.jaxpr, executable
        self.backend, self.signature = executable.target, call.describe_signature()
        self.trace_seconds, self.compile_seconds = call.trace_seconds, call.compile_seconds
        self.plan = executable.plan
        self.optimised = executable.jaxpr if self.plan is not None else None
        self.rewrites = executable.rewrites
        self.costs = report.step_costs(executable)  # flops and bytes of each step
        self.eager_seconds = None  # the traced program by nbjax eager, equation by equation
        self.numpy_seconds = None  # its jaxpr run by NumPy, one call per equation
        self.baselines_note = None  # why the two are not measured
        self.baseline_call = None  # the call the baselines will run on, until they have
        self.call_count = 0
        self.call_seconds = collections.deque(maxlen=1000)
        self.step_seconds = collections.defaultdict(
            lambda: collections.deque(maxlen=STEP_SAMPLES))

    def record_call(self, call):
        self.call_count += 1
        self.call_seconds.append(call.seconds)
        for step, seconds in call.step_seconds.items():
            self.step_seconds[step].append(seconds)


class WatchedJit(JitWrapped):
    """``nbjax.jit(fun)`` that reports its calls to the views watching it (``watchers``:
    objects with ``on_call(watched, compilation)``, told ``on_baselines`` too), through
    ``JitWrapped``'s observer hook, installed while a view watches."""

    def __init__(self, fun, *, backend=None, static_argnums=None, static_argnames=None):
        super().__init__(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                         backend=backend)
        self.watchers = []
        self.compilations = {}
        self.current = None  # the Compilation of the last watched call
        self._stop_observing = None

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (read by IPython)
        try:
            return call_user_function(super().__call__, args, kwargs)
        except Exception as e:
            if self.watchers and type(current_trace()) is EvalTrace:
                tell(self.watchers, "on_failure", self, e)
            raise

    def view(self, panes=None):
        """A compiler view of this function (it updates on every call)."""
        return CompilerView(self, panes=panes)

    def add_watcher(self, watcher):
        self.watchers.append(watcher)
        if self._stop_observing is None:
            self._stop_observing = self.observe(self._on_call, self._on_phase)

    def remove_watcher(self, watcher):
        if watcher in self.watchers:
            self.watchers.remove(watcher)
        if not self.watchers and self._stop_observing is not None:
            self._stop_observing()
            self._stop_observing = None

    def _on_phase(self, phase):
        """Tell the views while a trace or a compilation is under way (the first call of a
        signature can take long)."""
        message = (f"tracing {self.name}(...)…" if phase == "tracing" else
                   f"compiling {self.name} (passes, fusion, code generation)…")
        tell(self.watchers, "on_phase", self, message)

    def _on_call(self, call):
        """Record a call in its Compilation (made once per signature and executable, keeping
        the call for the baselines when they can be measured) and tell the watchers."""
        key = (call.signature, call.executable.target)
        comp = self.compilations.get(key)
        if comp is None or comp.executable is not call.executable:
            comp = Compilation(call, self._input_names(call.args, call.kwargs))
            count = equations_run(call.jaxpr.jaxpr)
            if count > BASELINE_EQUATIONS:
                comp.baselines_note = (
                    "baselines not measured: run one equation at a time, this program is "
                    + ("a while loop" if count == float("inf") else f"{count:,} equations"))
            else:
                comp.baseline_call = call
            self.compilations[key] = comp
        comp.record_call(call)
        self.current = comp
        for watcher in list(self.watchers):
            watcher.on_call(self, comp)

    def _input_names(self, args, kwargs):
        """The names of the traced argument leaves (``params['W1']``, ``x``), static
        arguments left out; None when the function's signature cannot be read."""
        try:
            params = [p.name for p in inspect.signature(self.fun).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            return None
        n = len(args)
        skip = {i % n for i in self.static_argnums if -n <= i < n} | set(self.static_argnames)
        return argument_names(params, args, kwargs, skip)

    def measure_baselines(self, comp):
        """Time ``comp``'s two baselines on the inputs of its first call, once, and tell the
        watchers (``on_baselines``). Views call it when the user asks (the Timing pane
        opened, its button, ``%nbjax --baselines on``), after the user's cell, so no call of
        the user's pays for it. Returns whether it measured (False: done before, or too
        long to run one equation at a time); the call's inputs are let go either way."""
        call, comp.baseline_call = comp.baseline_call, None
        if call is None:
            return False
        comp.eager_seconds = self._eager_seconds(call)
        comp.numpy_seconds = self._numpy_seconds(call.args, call.kwargs)
        tell(self.watchers, "on_baselines", self, comp)
        return True

    def _numpy_seconds(self, args, kwargs):
        """The time of one run of the traced program by NumPy, one NumPy call per equation
        (the reference backend): the same computation as plain NumPy code would do it,
        without nbjax's dispatch (None if that fails)."""
        try:
            compiled = self.lower(*args, **kwargs).compile(backend="reference")
            t0 = time.perf_counter()
            block(compiled(*args, **{k: v for k, v in kwargs.items()
                                     if k not in self.static_argnames}))
        except Exception:
            return None
        return time.perf_counter() - t0

    def _eager_seconds(self, call):
        """The time of one run of the traced program by nbjax's eager evaluation, equation
        by equation: what the function costs without jit, but for its Python. The function
        is not called again, so what it does besides computing (a print, counting its
        traces) happens once, as the student expects of a jitted function (None if that
        fails)."""
        t0 = time.perf_counter()
        try:
            with set_current_trace(EvalTrace()):
                block(eval_jaxpr(call.jaxpr.jaxpr, call.jaxpr.consts, *call.inputs))
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
        try:
            out = call_user_function(self.transformed, args, kwargs)
        except Exception as e:
            if self.watchers and not has_tracers(args, kwargs):
                tell(self.watchers, "on_failure", self, e)
            raise
        if self.watchers and not has_tracers(args, kwargs):
            for watcher in list(self.watchers):
                watcher.on_input(self, args, kwargs)
        return out

    def __repr__(self):
        return f"<{self.__name__}: {self.kind} of {self.fun.__name__}>"


def tell(watchers, event, *args):
    """Call ``watcher.<event>(*args)`` on the watchers that have it."""
    for watcher in list(watchers):
        method = getattr(watcher, event, None)
        if method is not None:
            method(*args)


def retire(value):
    """Close the views of ``value`` when it is a watched function that a cell run again
    replaces: a closed widget leaves ipywidgets' registry, so the views and the compiled
    code they hold are freed (a cell run a thousand times keeps one view, not a thousand)."""
    if isinstance(value, (WatchedJit, GradWatch)):
        for watcher in list(value.watchers):
            watcher.close()
        value.watchers.clear()

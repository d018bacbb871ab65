"""``nbjax.profiler``: a timeline of what a program did, as ``jax.profiler`` records one, in
a file that Perfetto (https://ui.perfetto.dev) and TensorBoard's profile plugin open.

While a profile runs (``with nbjax.profiler.trace(log_dir):``, or ``start_trace`` then
``stop_trace``) it records, on the track of the thread that did it:

- each eager call of a jitted function: a span ``jit(name)`` holding its phases, ``trace``
  (when the call traced the function), ``compile`` (when it compiled it) and ``run`` (until
  the results were ready), and inside ``run`` the program's steps (kernels, library calls,
  loops: the times the native program measured for each), laid end to end in plan order;
- the spans the user marks: ``TraceAnnotation``, ``StepTraceAnnotation`` and functions
  decorated with ``annotate_function``.

Jitted calls take the observed path while a profile runs: each waits for its results and
times its steps, so the timeline shows each call's own time. ``stop_trace`` writes the
events in Chrome's trace-event JSON format, gzipped, where JAX writes its trace:
``log_dir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.trace.json.gz``, and with
``create_perfetto_trace`` a copy named ``perfetto_trace.json.gz`` beside it.

Not rebuilt: JAX's tracer of every Python call (``ProfileOptions.python_tracer_level``),
its XSpace protobuf (``.xplane.pb``) and the classes that read one (``ProfileData``), the
profiler server (``start_server``) and device memory profiles (pprof): those functions
raise ``NotImplementedError`` saying so. ``create_perfetto_link`` prints where the trace is
and how to open it instead of serving it.
"""

import contextlib
import datetime
import functools
import gzip
import json
import os
import socket
import threading
import time

from . import jit as _jit
from .backends import get_target
from .compiler import report
from .core.errors import unavailable

__all__ = ["ProfileOptions", "StepTraceAnnotation", "TraceAnnotation", "annotate_function",
           "device_memory_profile", "save_device_memory_profile", "start_server",
           "start_trace", "stop_server", "stop_trace", "trace"]

_PROCESS = os.getpid()


class ProfileOptions:
    """The options JAX's profiler takes (``start_trace(profiler_options=...)``). nbjax
    records the same timeline whatever they say: it has no tracer levels to set."""

    def __init__(self):
        self.host_tracer_level = 2
        self.python_tracer_level = 0
        self.enable_hlo_proto = False
        self.include_dataset_ops = True
        self.duration_ms = 0
        self.start_timestamp_ns = 0
        self.session_id = ""
        self.repository_path = ""
        self.raise_error_on_start_failure = False
        self.advanced_configuration = {}


class _Profile:
    """The events of one profile, in microseconds since it started."""

    def __init__(self, log_dir, create_perfetto_link, create_perfetto_trace):
        self.log_dir = os.fspath(log_dir)
        self.perfetto_link, self.perfetto_trace = create_perfetto_link, create_perfetto_trace
        self.origin = time.perf_counter()
        self.started = datetime.datetime.now()
        self.events, self.threads, self.lock = [], {}, threading.Lock()
        self.step_names = {}  # executable -> the name of each of its steps
        self.stop_observing = _jit.observe_every_call(self.record_call)

    def span(self, name, start, end, args=None):
        """A complete event on the calling thread's track (``start``, ``end``: perf_counter)."""
        thread = threading.current_thread()
        event = {"ph": "X", "pid": _PROCESS, "tid": thread.ident, "name": name,
                 "ts": round((start - self.origin) * 1e6, 3),
                 "dur": round(max(end - start, 0.0) * 1e6, 3)}
        if args:
            event["args"] = {k: str(v) for k, v in args.items()}
        with self.lock:
            self.threads.setdefault(thread.ident, thread.name)
            self.events.append(event)

    def record_call(self, call):
        """A jitted call (``jit.JitCall``) as a span holding its phases and steps."""
        ended = call.run_started + call.seconds
        self.span(f"jit({call.function.name})", call.started, ended,
                  {"signature": call.describe_signature(),
                   "backend": get_target(call.function.backend).name})
        if call.traced:
            self.span("trace", call.started, call.started + call.trace_seconds)
        if call.compile_seconds is not None:
            self.span("compile", call.run_started - call.compile_seconds, call.run_started)
        self.span("run", call.run_started, ended)
        at = call.run_started
        names = self._step_names(call.executable)
        for step in sorted(call.step_seconds):
            seconds = call.step_seconds[step]
            self.span(names.get(step, f"step {step}"), at, at + seconds,
                      {"step": step, "timed": "inside the native program"})
            at += seconds

    def _step_names(self, executable):
        names = self.step_names.get(executable)
        if names is None:
            names = self.step_names[executable] = {
                c.step: c.name if c.kind == "kernel" else f"{c.name} ({c.kind})"
                for c in report.step_costs(executable)}
        return names

    def write(self):
        """The gzipped trace, where JAX writes it; returns the directory."""
        run = os.path.join(self.log_dir, "plugins", "profile",
                           self.started.strftime("%Y_%m_%d_%H_%M_%S"))
        os.makedirs(run, exist_ok=True)
        meta = [{"ph": "M", "pid": _PROCESS, "name": "process_name",
                 "args": {"name": "/host:CPU"}}]
        meta += [{"ph": "M", "pid": _PROCESS, "tid": tid, "name": "thread_name",
                  "args": {"name": name}} for tid, name in self.threads.items()]
        document = {"displayTimeUnit": "ns", "traceEvents": meta + self.events}
        data = gzip.compress(json.dumps(document).encode())
        names = [f"{socket.gethostname()}.trace.json.gz"]
        names += ["perfetto_trace.json.gz"] if self.perfetto_trace or self.perfetto_link else []
        for name in names:
            with open(os.path.join(run, name), "wb") as f:
                f.write(data)
        if self.perfetto_link:
            print(f"The trace is {os.path.join(run, names[-1])}: open it at "
                  "https://ui.perfetto.dev (Open trace file).")
        return run


_active = None
_starting = threading.Lock()


def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
                profiler_options=None):
    """Start recording a profile, written to ``log_dir`` by ``stop_trace``."""
    global _active
    with _starting:
        if _active is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be "
                               "run at a time.")
        _active = _Profile(log_dir, create_perfetto_link, create_perfetto_trace)


def stop_trace():
    """Stop recording and write the trace (see the module docstring for where)."""
    global _active
    with _starting:
        if _active is None:
            raise RuntimeError("No profile started")
        profile, _active = _active, None
    profile.stop_observing()
    profile.write()


@contextlib.contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
          profiler_options=None):
    """``with trace(log_dir):`` profiles the block (``start_trace`` ... ``stop_trace``)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """``with TraceAnnotation(name, **kwargs):`` marks the block as a span of the profile
    being recorded (its keyword arguments shown with it); nothing when none is."""

    def __init__(self, name, **kwargs):
        self.name, self.kwargs = name, kwargs

    def __enter__(self):
        self.profile, self.start = _active, time.perf_counter()
        return self

    def __exit__(self, *exc_info):
        if self.profile is not None:
            self.profile.span(self.name, self.start, time.perf_counter(), self.kwargs)


class StepTraceAnnotation(TraceAnnotation):
    """A ``TraceAnnotation`` for one step of a training loop: ``StepTraceAnnotation("train",
    step_num=i)``."""


def annotate_function(func, name=None, **decorator_kwargs):
    """``func`` with each call a span of the profile being recorded (named ``name``, else
    the function's name)."""
    name = name or getattr(func, "__qualname__", getattr(func, "__name__", "function"))

    @functools.wraps(func)
    def annotated(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return annotated


def _not_rebuilt(name, what):
    return unavailable(name, f"nbjax.profiler does not rebuild {what}: profiles are written "
                             "by start_trace/stop_trace (see nbjax.profiler)")


device_memory_profile = _not_rebuilt("device_memory_profile", "device memory profiles (pprof)")
save_device_memory_profile = _not_rebuilt("save_device_memory_profile",
                                          "device memory profiles (pprof)")
start_server = _not_rebuilt("start_server", "the profiler server TensorBoard captures from")
stop_server = _not_rebuilt("stop_server", "the profiler server TensorBoard captures from")

"""nbjax.profiler: the trace it writes (where JAX writes it, Chrome's trace-event JSON), the
spans of jitted calls (phases, and the steps the native program timed) and of the user's
annotations, and that jitted calls go back to their fast path when the profile ends."""

import glob
import gzip
import json
import os
import socket
import threading

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax, profiler
from nbjax.compiler import report


def read_trace(log_dir, name=None):
    """The events of the one trace written under ``log_dir``, and its directory."""
    runs = glob.glob(os.path.join(log_dir, "plugins", "profile", "*"))
    assert len(runs) == 1
    path = os.path.join(runs[0], name or f"{socket.gethostname()}.trace.json.gz")
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"], runs[0]


def spans(events, name):
    return [e for e in events if e["ph"] == "X" and e["name"] == name]


def inside(child, parent):
    eps = 1e-3  # (rounding to ns)
    return parent["ts"] - eps <= child["ts"] and \
        child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + eps


def test_a_jitted_call_is_a_span_of_its_phases_and_timed_steps(tmp_path):
    f = nbjax.jit(lambda x, w: jnp.tanh(x @ w).sum(), backend="cpu")
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    with profiler.trace(tmp_path):
        first = f(x, x)
        second = f(x, x)
    np.testing.assert_allclose(first, np.tanh(x @ x).sum(), rtol=1e-4)
    assert float(second) == float(first)
    events, _ = read_trace(str(tmp_path))
    calls = spans(events, "jit(<lambda>)")
    assert len(calls) == 2 and calls[0]["args"]["signature"] == "f32[32,32], f32[32,32]"
    (trace,), (compile_,) = spans(events, "trace"), spans(events, "compile")
    assert inside(trace, calls[0]) and inside(compile_, calls[0])
    assert trace["ts"] + trace["dur"] <= compile_["ts"] + 1e-3  # traced, then compiled
    runs = spans(events, "run")
    assert [inside(r, c) for r, c in zip(runs, calls)] == [True, True]
    executable = f.lower(x, x).compile().executable
    names = [c.name if c.kind == "kernel" else f"{c.name} ({c.kind})"
             for c in report.step_costs(executable)]
    for run in runs:
        steps = [e for e in events if e.get("args", {}).get("timed") and inside(e, run)]
        assert [s["name"] for s in steps] == names  # each step, in plan order, end to end
        assert all(a["ts"] + a["dur"] == pytest.approx(b["ts"], abs=2e-3)
                   for a, b in zip(steps, steps[1:]))


def test_annotations_are_spans_with_their_arguments(tmp_path):
    @profiler.annotate_function
    def work(x):
        return jnp.sin(x)

    named = profiler.annotate_function(lambda x: x * 2, name="double", kind="demo")
    with profiler.trace(tmp_path):
        with profiler.TraceAnnotation("epoch", number=3):
            for i in range(2):
                with profiler.StepTraceAnnotation("train", step_num=i):
                    work(jnp.ones(3))
            named(1.0)
    events, _ = read_trace(str(tmp_path))
    (epoch,) = spans(events, "epoch")
    assert epoch["args"] == {"number": "3"}
    steps = spans(events, "train")
    assert [s["args"]["step_num"] for s in steps] == ["0", "1"]
    works = spans(events, "test_annotations_are_spans_with_their_arguments.<locals>.work")
    assert len(works) == 2 and all(inside(w, s) for w, s in zip(works, steps))
    (double,) = spans(events, "double")
    assert double["args"] == {"kind": "demo"} and inside(double, epoch)


def test_each_thread_has_its_own_track(tmp_path):
    f = nbjax.jit(lambda x: x + 1)
    with profiler.trace(tmp_path):
        f(jnp.ones(2))
        worker = threading.Thread(target=lambda: f(jnp.ones(2)), name="worker")
        worker.start()
        worker.join()
    events, _ = read_trace(str(tmp_path))
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    calls = spans(events, "jit(<lambda>)")
    assert sorted(names[c["tid"]] for c in calls) == sorted([threading.main_thread().name,
                                                             "worker"])


def test_perfetto_copies_and_link(tmp_path, capsys):
    with profiler.trace(tmp_path, create_perfetto_link=True, create_perfetto_trace=True):
        with profiler.TraceAnnotation("a"):
            pass
    events, run = read_trace(str(tmp_path), "perfetto_trace.json.gz")
    assert spans(events, "a")
    assert os.path.join(run, "perfetto_trace.json.gz") in capsys.readouterr().out


def test_one_profile_at_a_time_and_stop_needs_a_start(tmp_path):
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    profiler.start_trace(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="Profile has already been started"):
            profiler.start_trace(tmp_path)
    finally:
        profiler.stop_trace()


def test_calls_leave_the_observed_path_when_the_profile_ends(tmp_path):
    f = nbjax.jit(lambda x: x * 3)
    x = jnp.ones(4)
    f(x)
    f(x)
    before = f.slow_path_calls
    f(x)
    assert f.slow_path_calls == before  # the fast path
    with profiler.trace(tmp_path):
        f(x)
        assert f.slow_path_calls == before + 1  # observed
    f(x)
    f(x)
    assert f.slow_path_calls <= before + 2
    events, _ = read_trace(str(tmp_path))
    assert len(spans(events, "jit(<lambda>)")) == 1


def test_annotations_without_a_profile_record_nothing_and_loops_are_one_step(tmp_path):
    with profiler.TraceAnnotation("nothing"):
        pass
    g = nbjax.jit(lambda x: lax.fori_loop(0, 5, lambda i, c: jnp.sin(c), x), backend="cpu")
    with profiler.trace(tmp_path):
        out = g(jnp.ones(3))
    np.testing.assert_allclose(out, np.sin(np.sin(np.sin(np.sin(np.sin(np.ones(3)))))),
                               rtol=1e-6)
    events, _ = read_trace(str(tmp_path))
    assert not spans(events, "nothing")
    assert any("(loop)" in e["name"] for e in events if e["ph"] == "X")


@pytest.mark.parametrize("name,args", [("device_memory_profile", ()),
                                       ("save_device_memory_profile", ("f",)),
                                       ("start_server", (9999,)), ("stop_server", ())])
def test_what_is_not_rebuilt_says_so(name, args):
    with pytest.raises(NotImplementedError, match="does not rebuild"):
        getattr(profiler, name)(*args)

"""The benchmark runner's machinery on tiny sizes: it runs, prints its table, writes its JSON,
and nbjax's results agree with NumPy's. No timing is asserted (machines are noisy); timings
belong to ``make bench``."""

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nbjax

# The benchmarks package lives next to tests/, at the repository root (it is not installed).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import run, workloads  # noqa: E402
from benchmarks.contenders import (NBJAX_CACHE_DIR, empty_disk_cache, fresh,  # noqa: E402
                                   nbjax_backend)
from benchmarks.timing import BATCH_SECONDS, format_seconds, interleaved_times  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One small run of every workload (one repetition, no jax), shared by the tests below."""
    path = tmp_path_factory.mktemp("bench") / "results.json"
    printed = _capture(lambda: run.main(["--small", "--reps", "1", "--no-jax",
                                         "--json", str(path)]))
    return printed, json.loads(path.read_text())


def _capture(fn):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        fn()
    return out.getvalue()


def test_table_lists_every_workload_with_its_times(report):
    printed, _ = report
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("workload"))
    rows = {line.split()[0].rstrip("*"): line for line in lines[header + 2:] if line.strip()
            and not line.startswith(("notes", "wrote"))}
    for w in workloads.WORKLOADS:
        assert w.name in rows
        assert "error" not in rows[w.name]
    assert "memory bandwidth" in printed and "GB/s" in printed


def test_nbjax_agrees_with_numpy_on_every_workload(report):
    _, data = report
    for w in data["workloads"]:
        assert w["results"]["nbjax"]["max_rel_error"] <= run.MAX_REL_ERROR, w["name"]


def test_the_json_renders_the_same_table_and_as_markdown(report):
    printed, data = report
    assert run.render(data) in printed
    table = [line for line in run.render(data, markdown=True).splitlines()
             if line.startswith("|")]
    assert len(table) == 2 + len(workloads.WORKLOADS)
    assert table[0].startswith("| workload | size | nbjax |")
    assert table[2].startswith("| power_sum\\* | 1000x1000 |")


def test_the_backend_measured_is_named(report):
    printed, data = report
    assert data["nbjax_backend"] == nbjax.config.jit_backend
    assert f"nbjax: nbjax.jit on the {nbjax.config.jit_backend!r} backend" in printed


def test_only_filters_and_unknown_names_fail(tmp_path):
    path = tmp_path / "r.json"
    _capture(lambda: run.main(["--small", "--reps", "1", "--no-jax", "--only", "grad_1",
                               "--json", str(path)]))
    assert [w["name"] for w in json.loads(path.read_text())["workloads"]] == ["grad_1e6",
                                                                              "grad_1e7"]
    with pytest.raises(ValueError, match="no workload matches"):
        workloads.select(["no_such_workload"])
    with pytest.raises(SystemExit):
        _capture(lambda: run.parse_args(["--reps", "0"]))


def test_backend_option_selects_and_restores_jit_backend(tmp_path):
    before = nbjax.config.jit_backend
    other = "reference" if before != "reference" else "cpu"
    path = tmp_path / "r.json"
    printed = _capture(lambda: run.main(["--small", "--reps", "1", "--no-jax", "--backend",
                                         other, "--only", "dispatch", "--json", str(path)]))
    assert json.loads(path.read_text())["nbjax_backend"] == other
    assert f"nbjax.jit on the {other!r} backend" in printed
    assert nbjax.config.jit_backend == before
    with pytest.raises(ValueError, match="unknown backend"):
        run.main(["--backend", "no_such_backend", "--json", str(path)])
    assert nbjax.config.jit_backend == before


def test_first_calls_compile_into_an_empty_disk_cache_then_hit_it(monkeypatch):
    """What the two first-call columns claim: the first compiles (the cache directory starts
    empty), the second finds the code on disk; the user's cache setting is left as it was."""
    from nbjax.backends.cpu import cache
    monkeypatch.setenv(NBJAX_CACHE_DIR, "/users/own/cache")
    x = nbjax.numpy.ones(8)
    with nbjax_backend("cpu"), empty_disk_cache():
        directory = os.environ[NBJAX_CACHE_DIR]
        assert os.listdir(directory) == [] and os.stat(directory).st_mode & 0o077 == 0
        def hits():
            return cache.stats["hit"] + cache.stats["program hit"]
        before = hits()
        nbjax.jit(fresh(workloads.power_sum))(x).block_until_ready()
        assert os.listdir(directory) and hits() == before
        nbjax.jit(fresh(workloads.power_sum))(x).block_until_ready()  # a re-defined function
        assert hits() > before
    assert os.environ[NBJAX_CACHE_DIR] == "/users/own/cache"
    assert not os.path.exists(directory)


def test_warm_first_call_beyond_the_run_is_less_the_call_right_after(monkeypatch):
    """The last column: a warm first call's time less its program's next call, which runs
    the same work a moment later (so a run slower or faster than the steady median does
    not count as first-call cost)."""
    monkeypatch.setattr(run, "settle", lambda: None)

    class Contender:
        disk_cache = True
        empty_caches = staticmethod(contextlib.nullcontext)

        def function(self, workload):
            calls = []

            def fn():  # a first call costs 30 ms more than its runs of 10 ms
                time.sleep(0.04 if not calls else 0.01)
                calls.append(1)
            return fn

    args = argparse.Namespace(reps=3, budget=10.0)
    _, times = run.first_call(Contender(), None, (), args)
    assert 0.04 <= times["first_call_warm_disk_cache_s"] < 0.06
    assert 0.025 < times["first_call_warm_beyond_run_s"] < 0.04


def test_relative_error_sees_differences_and_shapes():
    a = np.array([1.0, 2.0, 4.0], np.float32)
    assert run.relative_error((a,), (a,)) == 0
    assert run.relative_error(a + np.float32(0.4), a) == pytest.approx(0.1)
    assert run.relative_error(a[:2], a) == float("inf")


def test_interleaved_times_batch_short_calls_and_take_turns():
    order = []
    slow = (lambda: order.append("slow") or time.sleep(BATCH_SECONDS), ())
    fast = (lambda: order.append("fast"), ())
    timed_slow, timed_fast = interleaved_times([slow, fast], reps=3, budget_s=10)
    assert timed_slow["batch"] == 1 and timed_fast["batch"] > 1
    assert len(timed_slow["times_s"]) == len(timed_fast["times_s"]) == 3
    assert timed_slow["median_s"] >= BATCH_SECONDS > timed_fast["median_s"]
    # a warm-up call each, then rounds in which each takes its turn: untimed calls for
    # WARM_SECONDS, then its batch
    assert order[:2] == ["slow", "fast"]
    turns = "".join("s" if o == "slow" else "f" for o in order[2:])
    assert re.fullmatch("(s+f+){3}", turns) and turns.count("s") > 2 * 3
    assert turns.count("f") > 3 * timed_fast["batch"]


def test_the_time_budget_cuts_repetitions_but_not_below_three():
    calls = [(lambda: time.sleep(0.01), ())]
    assert len(interleaved_times(calls, reps=50, budget_s=0)[0]["times_s"]) == 3
    assert len(interleaved_times(calls, reps=2, budget_s=0)[0]["times_s"]) == 2


def test_format_seconds_picks_a_unit():
    assert format_seconds(1.95) == "1.95 s"
    assert format_seconds(0.0852) == "85.2 ms"
    assert format_seconds(4.05e-6) == "4.05 us"
    assert format_seconds(None) == "-"
    assert format_seconds(-3.1e-4) == "-310 us"


def test_blas_overrides_are_dropped_by_a_re_exec(monkeypatch):
    execs = []
    monkeypatch.setattr(os, "execve", lambda *a: execs.append(a))
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("OPENBLAS_L2_SIZE", raising=False)
    run.exec_without_blas_overrides()
    assert execs == []
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setattr(sys, "argv", ["run.py", "--small"])
    run.exec_without_blas_overrides()
    (exe, argv, env), = execs
    assert argv == [sys.executable, "-m", "benchmarks.run", "--small"]
    assert "OPENBLAS_CORETYPE" not in env and env["PATH"] == os.environ["PATH"]

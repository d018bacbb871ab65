"""The optimiser process: LLVM's passes and code generation run in a worker, give what the
in-process pipeline gives, and any failure of the worker falls back to compiling here."""

import io
import logging
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.backends import compile
from nbjax.backends.cpu import optimiser, pipeline, runtime
from nbjax.backends.cpu.target import cpu_target

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    """Every compile here goes through LLVM (no entry answers from disk)."""
    monkeypatch.setenv("NBJAX_DISABLE_DISK_CACHE", "1")


@pytest.fixture
def fresh_process(monkeypatch):
    """An optimiser process of this test's own, stopped afterwards."""
    process = optimiser.OptimiserProcess()
    monkeypatch.setattr(optimiser, "compile_module", process.compile_module)
    yield process
    process.close()


def _f(x):
    return jnp.tanh(x) * 2.0 + jnp.sum(jnp.exp(-x * x), axis=1, keepdims=True)


def _check(x):
    """Compile ``_f`` afresh and check it against NumPy; the executable."""
    exe = compile(nbjax.make_jaxpr(_f)(x), "cpu", "optimised_f")
    (out,) = exe.run(x)
    expected = np.tanh(x) * 2.0 + np.sum(np.exp(-x * x), axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    return exe


def _code(text):
    return re.sub(r";.*", "", text).strip()


def test_the_worker_gives_what_the_in_process_pipeline_gives(fresh_process):
    _check(RNG.standard_normal((37, 45)).astype(np.float32))
    assert fresh_process._served == 1
    optimised, code = fresh_process.compile_module(runtime._PLAIN_LOOP, *cpu_target())
    here, here_code = pipeline.compile_module(runtime._PLAIN_LOOP, *cpu_target())
    assert _code(optimised) == _code(here) and "<" in optimised   # vectorised, identically
    assert bytes(code) == bytes(here_code)


def test_a_dead_worker_is_replaced_and_a_failing_one_falls_back(fresh_process, caplog):
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    _check(x)
    fresh_process._worker.kill()
    fresh_process._worker.wait()
    with caplog.at_level(logging.WARNING, logger="nbjax.backends.cpu.optimiser"):
        _check(x + 1)                     # the request fails: compiled here, still right
    assert "compiling in-process" in caplog.text
    assert fresh_process._worker is None
    _check(x + 2)                         # the next module starts a new worker
    assert fresh_process._worker is not None and fresh_process._served == 1


def test_the_worker_is_restarted_after_its_share_of_modules(fresh_process, monkeypatch):
    monkeypatch.setattr(optimiser, "MODULES_PER_WORKER", 2)
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    pids = []
    for k in range(5):
        _check(x + k)
        pids.append(fresh_process._worker.pid)
    assert len(set(pids)) == 3 and pids[0] == pids[1] != pids[2]


def test_a_worker_that_cannot_start_leaves_compiling_here(fresh_process, monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise OSError("no processes left")
    monkeypatch.setattr(optimiser.subprocess, "Popen", refuse)
    with caplog.at_level(logging.WARNING, logger="nbjax.backends.cpu.optimiser"):
        _check(RNG.standard_normal((3, 5)).astype(np.float32))
    assert "cannot start the optimiser process" in caplog.text
    assert fresh_process._broken


def test_llvm_errors_are_reported_and_compiled_here(fresh_process):
    assert fresh_process.compile_module("this is not IR", *cpu_target()) is None
    made = fresh_process.compile_module("define i32 @one() {\n  ret i32 1\n}\n", *cpu_target())
    assert made is not None and "ret i32 1" in made[0] and len(made[1]) > 0


def test_a_message_cut_short_reads_as_the_end_of_the_stream():
    stream = io.BytesIO()
    pipeline.write_message(stream, b"ok", b"optimised IR", b"")
    data = stream.getvalue()
    assert pipeline.read_message(io.BytesIO(data)) == [b"ok", b"optimised IR", b""]
    for cut in range(len(data)):             # a worker that died mid-reply
        assert pipeline.read_message(io.BytesIO(data[:cut])) is None

"""The optimiser processes: LLVM's passes and code generation run in workers, on the parts of
a module at once, give what the in-process pipeline gives, and any failure of a worker falls
back to compiling here."""

import ctypes
import io
import logging
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.backends import compile
from nbjax.backends.cpu import cache, optimiser, partition, pipeline, runtime
from nbjax.backends.cpu.target import cpu_target

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    """Every compile here goes through LLVM (no entry answers from disk)."""
    monkeypatch.setenv("NBJAX_DISABLE_DISK_CACHE", "1")


def _pool(monkeypatch, workers):
    pool = optimiser.OptimiserPool(workers)
    monkeypatch.setattr(runtime, "_optimisers", pool)
    return pool


@pytest.fixture
def fresh_process(monkeypatch):
    """A pool of one optimiser process of this test's own (the process), stopped after."""
    pool = _pool(monkeypatch, 1)
    yield pool.processes[0]
    pool.close()


@pytest.fixture
def two_processes(monkeypatch):
    pool = _pool(monkeypatch, 2)
    yield pool
    pool.close()


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
    assert fresh_process._served >= 1
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
    assert fresh_process._worker is not None and fresh_process._served >= 1


def test_the_worker_is_restarted_after_its_share_of_modules(fresh_process, monkeypatch):
    monkeypatch.setattr(optimiser, "MODULES_PER_WORKER", 2)
    pids = []
    for k in range(5):
        fresh_process.compile_module(runtime._PLAIN_LOOP + f"; {k}", *cpu_target())
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


# --- a module in parts --------------------------------------------------------------------

_PROGRAM = """
@"flag" = external global i32

define internal float @"helper"(float %".1") noinline
{
entry:
  %".2" = fmul float %".1", 2.0
  ret float %".2"
}

define void @"kernel_0"(float* noalias %".1", float* noalias %".2", i64 %".3", i64 %".4")
{
entry:
  %".5" = load float, float* %".2"
  %".6" = call float @"helper"(float %".5")
  store float %".6", float* %".1"
  ret void
}

define void @"kernel_1"(float* noalias %".1", float* noalias %".2", i64 %".3", i64 %".4")
{
entry:
  %".5" = load float, float* %".2"
  %".6" = fadd float %".5", 1.0
  store float %".6", float* %".1"
  ret void
}

define i32 @"program"(float* %".1", float* %".2", float* %".3")
{
entry:
  call void @"kernel_0"(float* %".2", float* %".1", i64 0, i64 1)
  call void @"kernel_1"(float* %".3", float* %".2", i64 0, i64 1)
  %".4" = load i32, i32* @"flag"
  ret i32 %".4"
}
"""


def _defined(text):
    return {f.name for f in partition._read(text)[1] if not f.internal}


def test_a_module_is_cut_between_its_functions_into_parts_that_each_verify(monkeypatch):
    monkeypatch.setattr(partition, "MIN_PART_COST", 1)  # (its functions are tiny)
    parts = partition.split(_PROGRAM, 2)
    assert len(parts) == 2
    tm = pipeline.target_machine(*cpu_target())
    owned = [_defined(p) for p in parts]
    assert set().union(*owned) == {"kernel_0", "kernel_1", "program"}
    assert not owned[0] & owned[1]                    # each function defined once
    for part in parts:
        pipeline.parse(part, tm)                      # declares what the others define
        assert '@"helper"' not in part or 'define internal float @"helper"' in part
    assert partition.split(_PROGRAM, 1) == [_PROGRAM]
    assert len(partition.split(_PROGRAM, 8)) == 3     # never more parts than functions
    with pytest.raises(ValueError, match="unterminated"):
        partition.split(_PROGRAM.rsplit("}", 1)[0], 2)


def test_a_part_gets_copies_of_the_internal_functions_it_calls_only(monkeypatch):
    """Only ``kernel_0`` calls ``helper``, which calls ``inner``: the part defining it gets
    both, the others neither (a light tier would compile an unused copy)."""
    inner = ('define internal float @"inner"(float %".1") noinline\n{\nentry:\n'
             '  ret float %".1"\n}\n')
    program = _PROGRAM.replace('%".2" = fmul float %".1", 2.0',
                               '%".2" = call float @"inner"(float %".1")') + inner
    monkeypatch.setattr(partition, "MIN_PART_COST", 1)
    parts = partition.split(program, 3)
    tm = pipeline.target_machine(*cpu_target())
    for part in parts:
        pipeline.parse(part, tm)
        copied = {f.name for f in partition._read(part)[1] if f.internal}
        assert copied == ({"helper", "inner"} if "kernel_0" in _defined(part) else set())


def test_a_part_keeps_only_the_global_variables_its_functions_use(monkeypatch):
    """A constant table that only ``kernel_1`` reads (as sin's reads its table), and the
    string it points at, go to its part; the flag goes to the program's; every part
    verifies."""
    table = ('@"table" = internal constant [2 x i8*] [i8* getelementptr ([3 x i8], '
             '[3 x i8]* @"text", i32 0, i32 0), i8* null]\n'
             '@"text" = internal constant [3 x i8] c"ab\\00"\n')
    program = table + _PROGRAM.replace(
        '%".6" = fadd float %".5", 1.0',
        '%".t" = load i8*, i8** getelementptr ([2 x i8*], [2 x i8*]* @"table", i32 0, '
        'i32 0)\n  %".6" = fadd float %".5", 1.0')
    monkeypatch.setattr(partition, "MIN_PART_COST", 1)
    parts = partition.split(program, 3)
    assert len(parts) == 3
    tm = pipeline.target_machine(*cpu_target())
    for part in parts:
        pipeline.parse(part, tm)
        defined = _defined(part)
        assert ('@"table" =' in part and '@"text" =' in part) == ("kernel_1" in defined)
        assert ('@"flag" =' in part) == ("program" in defined)


def test_no_part_is_cut_smaller_than_a_part_costs_of_its_own(monkeypatch):
    """Each part costs LLVM about a millisecond whatever it holds: three tiny functions
    (about 8,200 units each) make as many parts as ``MIN_PART_COST`` allows."""
    for min_cost, parts in [(25000, 1), (12000, 2), (8000, 3)]:
        monkeypatch.setattr(partition, "MIN_PART_COST", min_cost)
        assert len(partition.split(_PROGRAM, 8)) == parts, min_cost


def test_the_parts_run_as_the_whole_module_did(two_processes):
    """A program of several kernels and control flow, compiled in parts by two workers,
    gives the reference backend's values; both workers took parts."""
    def loop(x, w):
        def body(h, _):
            h = jnp.tanh(h @ w) + jnp.exp(-h) * 0.5
            return h, jnp.sum(h * h)
        h, sums = nbjax.lax.scan(body, x, None, length=7)
        return jnp.sin(h) * 2.0, sums.max()
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    w = RNG.standard_normal((6, 6)).astype(np.float32) * 0.3
    closed = nbjax.make_jaxpr(loop)(x, w)
    exe = compile(closed, "cpu", "loop_in_parts")
    expected = compile(closed, "reference", "loop_reference").run(x, w)
    for got, want in zip(exe.run(x, w), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert all(p._served >= 1 for p in two_processes.processes)
    assert "llvm_optimise" in exe.compile_times


def test_a_part_llvm_rejects_makes_the_module_compile_here(two_processes, monkeypatch):
    real = partition.split_by_tier
    monkeypatch.setattr(partition, "split_by_tier", lambda text, parts, light=None:
                        real(text, parts, light)[:-1] + [("not IR", None)])
    assert two_processes.compile_module(_PROGRAM, *cpu_target()) is None
    _check(RNG.standard_normal((5, 7)).astype(np.float32))   # compiled here, still right


def test_each_light_tier_gets_a_part_of_its_own():
    light = {"program": pipeline.CALLS, "kernel_1": pipeline.SMALL_LOOPS}
    parts = partition.split_by_tier(_PROGRAM, 1, light)
    assert sorted((sorted(_defined(text)), tier) for text, tier in parts) == [
        (["kernel_0"], None), (["kernel_1"], pipeline.SMALL_LOOPS),
        (["program"], pipeline.CALLS)]
    assert partition.split_by_tier(_PROGRAM, 1) == [(_PROGRAM, None)]


def _modules_made(monkeypatch):
    """A list that each module compiled from now on adds (its functions' definitions, the
    light tiers it was given) to."""
    seen = []
    real = runtime.JitModule.__init__

    def init(self, ir_text, timer, light=None):
        seen.append((partition.definitions(ir_text), light))
        real(self, ir_text, timer, light)
    monkeypatch.setattr(runtime.JitModule, "__init__", init)
    return seen


def test_code_that_runs_once_per_call_or_step_goes_to_the_light_tiers(monkeypatch):
    """Python's entry, the program, a scan's control flow and small kernels are light;
    a kernel whose loop is vectorised is compiled by O3."""
    seen = _modules_made(monkeypatch)

    def f(big, h, w):
        h, _ = nbjax.lax.scan(lambda h, _: (jnp.tanh(h @ w), None), h, None, length=3)
        return jnp.exp(big) * 2.0, h
    big = RNG.standard_normal((64, 128)).astype(np.float32)
    h, w = (RNG.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    exe = compile(nbjax.make_jaxpr(f)(big, h, w), "cpu", "tiers")
    out, h_out = exe.run(big, h, w)
    np.testing.assert_allclose(out, np.exp(big) * 2.0, rtol=1e-5, atol=1e-5)
    expected = h
    for _ in range(3):
        expected = np.tanh(expected @ w)
    np.testing.assert_allclose(h_out, expected, rtol=1e-5, atol=1e-5)
    (defined, light), = seen
    vectorised = [n for n in defined if n.startswith("kernel") and n not in light]
    assert len(vectorised) == 1   # exp(big) * 2
    assert light["program"] == pipeline.CALLS
    assert any(n.startswith("control") and tier == pipeline.CALLS for n, tier in light.items())
    assert any(n.startswith("kernel") and tier == pipeline.SMALL_LOOPS  # the scan's tanh
               for n, tier in light.items())


def test_a_small_kernel_that_a_loop_runs_is_vectorised_when_its_work_is_not_small(
        monkeypatch):
    """A kernel of fewer than ``SMALL_KERNEL`` elements is compiled by the light tier at the
    top of a program; in a loop's body only if its work (elements times its operations)
    is small too: 1000 normal random numbers per step are vectorised by O3, a counter
    and a 4-element update are not."""
    seen = _modules_made(monkeypatch)

    def draws(key, x):
        def step(c, k):
            return c * 0.5 + jnp.sum(nbjax.random.normal(k, (1000,)) ** 2), None
        total = nbjax.lax.scan(step, x[0], nbjax.random.split(key, 5))[0]
        return total, jnp.sum(nbjax.random.normal(key, (1000,)) ** 2)
    key, x = nbjax.random.PRNGKey(1), np.ones(4, np.float32)
    exe = compile(nbjax.make_jaxpr(draws)(key, x), "cpu", "draws")
    looped, alone = exe.run(key, x)
    assert np.isfinite(looped) and 800 < alone < 1200
    (defined, light), = seen
    body = [n for n in defined if n.startswith("kernel_cf")]
    top = [n for n in defined if n.startswith("kernel") and n not in body]
    assert any(n not in light for n in body)               # the draws: O3
    assert any(light.get(n) == pipeline.SMALL_LOOPS for n in body)   # the counter's
    assert all(light.get(n) in (pipeline.SMALL_LOOPS, pipeline.CALLS) for n in top)


def test_the_loops_of_a_programs_library_steps_are_compiled_by_o3(monkeypatch):
    """A whole program's own function is light, but the function of each of its library
    loops (a sort, a running sum, a scatter) is not: unoptimised, a sort ran 4x slower and
    a scatter's rows were never vectorised."""
    seen = _modules_made(monkeypatch)

    def f(x, i):
        return jnp.cumsum(jnp.sort(x * 2.0, axis=1), axis=1), x.at[i].add(1.0)
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    i = np.array([3, 1, 3], np.int32)
    exe = compile(nbjax.make_jaxpr(f)(x, i), "cpu", "library loops")
    sums, added = exe.run(x, i)
    np.testing.assert_allclose(sums, np.cumsum(np.sort(x * 2, axis=1), axis=1), rtol=1e-5,
                               atol=1e-4)
    expected = x.copy()
    np.add.at(expected, i, 1.0)
    np.testing.assert_array_equal(added, expected)
    (defined, light), = seen
    library = [n for n in defined if n.startswith("library_")]
    assert len(library) == 3 and not set(library) & set(light)
    assert light["program"] == pipeline.CALLS


@pytest.mark.parametrize("tier", [pipeline.CALLS, pipeline.SMALL_LOOPS])
def test_a_light_tier_makes_code_that_runs_as_o3s_does(tier):
    """The light tiers' passes and code generators keep the meaning of a loop with locals
    (promoted to registers), a phi and a call."""
    text = """
define internal float @"twice"(float %".1") noinline
{
entry:
  %".2" = fmul float %".1", 2.0
  ret float %".2"
}

define void @"axpy"(float* noalias %".1", float* noalias %".2", i64 %".3")
{
entry:
  %"acc" = alloca float
  store float 0.0, float* %"acc"
  br label %"loop"
loop:
  %"i" = phi i64 [0, %"entry"], [%"next", %"loop"]
  %".4" = getelementptr float, float* %".2", i64 %"i"
  %".5" = load float, float* %".4"
  %".6" = call float @"twice"(float %".5")
  %".7" = load float, float* %"acc"
  %".8" = fadd float %".7", %".6"
  store float %".8", float* %"acc"
  %".9" = getelementptr float, float* %".1", i64 %"i"
  store float %".8", float* %".9"
  %"next" = add i64 %"i", 1
  %"more" = icmp slt i64 %"next", %".3"
  br i1 %"more", label %"loop", label %"done"
done:
  ret void
}
"""
    optimised, code = pipeline.compile_module(text, *cpu_target(), light=tier)
    assert "alloca" not in optimised          # the local lives in a register
    engine = runtime.load_objects([code])
    axpy = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("axpy"))
    x = RNG.standard_normal(300).astype(np.float32)
    out = np.zeros_like(x)
    axpy(out.ctypes.data, x.ctypes.data, x.size)
    np.testing.assert_allclose(out, np.cumsum(2 * x, dtype=np.float32), rtol=1e-5,
                               atol=1e-5 * np.abs(x).sum())


def test_object_files_pack_and_unpack():
    objects = [b"first", b"", b"third part"]
    packed = cache.pack_objects(objects)
    assert cache.unpack_objects(packed) == objects
    for damaged in (packed[:-1], packed + b"x"):
        with pytest.raises(ValueError):
            cache.unpack_objects(damaged)

"""The native worker pool (``backends/cpu/workers``): kernels native code splits between
the cores, checked against the reference backend, from several threads and after a fork."""

import multiprocessing
import threading

import numpy as np
import pytest

import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import runtime, workers
from helpers import assert_close, cpu_and_reference

RNG = np.random.default_rng(7)
pytestmark = pytest.mark.skipif(not workers.supported() or runtime.THREADS < 2,
                                reason="the worker pool needs Linux and two cores")


@pytest.fixture
def small_splits(monkeypatch):
    """Kernels of any size split (on the pool), as large ones do."""
    monkeypatch.setattr(runtime, "POOL_SPLIT_WORK", 1)


def _loop(u):
    def step(i, u):
        return jnp.tanh(u * 0.9 + jnp.roll(u, 1, 0) * 0.1) + jnp.exp(-u * u)
    return lax.fori_loop(0, 5, step, u)


def _pooled_and_alone(monkeypatch, fn, x):
    """``fn(x)`` compiled with every kernel split on the pool, and with none: the two
    executables' results, and the reference's."""
    monkeypatch.setattr(runtime, "POOL_SPLIT_WORK", 1)
    pooled, ref = cpu_and_reference(fn, x)
    monkeypatch.setattr(runtime, "POOL_SPLIT_WORK", 1 << 62)
    alone, _ = cpu_and_reference(fn, x)
    return pooled, pooled.run(x)[0], alone.run(x)[0], ref.run(x)[0]


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 8, 9, 61])
def test_kernels_in_native_loops_split_on_the_pool_and_match(monkeypatch, rows):
    """Outer extents below, at and above the number of chunks (4 per thread), uneven
    ones: the values are those of the same code on one thread, bit for bit (each element
    is computed once, whichever thread runs its chunk), and close to the reference's."""
    u = RNG.standard_normal((rows, 33)).astype(np.float32)
    pooled, got, alone, want = _pooled_and_alone(monkeypatch, _loop, u)
    if rows > 1:
        assert workers.PARALLEL_FOR in pooled.jit_module.optimised_ir
    np.testing.assert_array_equal(got, alone)
    assert_close(got, want, rtol=1e-5, scale=1.0)


def test_top_level_kernels_split_on_the_pool(monkeypatch):
    x = RNG.standard_normal((37, 50)).astype(np.float32)
    pooled, got, alone, want = _pooled_and_alone(
        monkeypatch, lambda x: jnp.sin(x) * 2 + x.max(axis=1, keepdims=True), x)
    assert "split between the cores" in pooled.runs_as
    np.testing.assert_array_equal(got, alone)
    assert_close(got, want, rtol=1e-5, scale=3.0)


def _body_reasons(executable):
    loop, = [g for g in executable.plan.groups if g.kind == "loop"]
    return [d.reason for d in loop.subprograms[0].plan.decisions]


def test_the_fusion_report_gives_the_choice_and_its_measure(small_splits):
    u = RNG.standard_normal((8, 16)).astype(np.float32)
    cpu, _ = cpu_and_reference(_loop, u)
    assert any("on the worker pool (work 1,152: 128 elements, math functions counting 4 more "
               "each; at least 1)" in r for r in _body_reasons(cpu))


def test_small_kernels_stay_on_one_thread():
    u = RNG.standard_normal((8, 16)).astype(np.float32)
    cpu, _ = cpu_and_reference(_loop, u)
    assert workers.PARALLEL_FOR not in cpu.jit_module.optimised_ir
    assert any("on one thread (work 1,152: 128 elements" in r and "under the 65,536 that "
               "repay" in r for r in _body_reasons(cpu))


@pytest.mark.skipif(runtime.THREADS < 2, reason="one core: nothing splits")
def test_kernels_in_a_loop_calling_blas_split_as_any_other():
    """BLAS runs on the pool's threads (no thread of its own spins beside the kernels): a
    loop body calling BLAS splits a kernel from the same work as one without. Values as
    the reference's either way."""
    odd = RNG.standard_normal((16, 17)).astype(np.float32)

    def with_blas(h, w, xs):  # 17 columns: BLAS
        return lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h[:, :16] @ odd), h, xs)

    def without(h, w, xs):
        return lax.scan(lambda h, x: (jnp.tanh(h * 0.5 + x), None), h, xs)[0]
    h = RNG.standard_normal((80, 256)).astype(np.float32)
    w = (RNG.standard_normal((256, 256)) / 16).astype(np.float32)
    xs = RNG.standard_normal((3, 80, 256)).astype(np.float32)
    assert 80 * 256 * (1 + runtime.MATH_WORK) >= runtime.POOL_SPLIT_WORK
    for program in (with_blas, without):
        cpu, ref = cpu_and_reference(program, h, w, xs)
        assert_close(cpu.run(h, w, xs)[0], ref.run(h, w, xs)[0], rtol=1e-5, scale=1.0)
        reasons = [r for r in _body_reasons(cpu) if "tanh" in r]
        assert reasons and all("split between the" in r for r in reasons), reasons


def test_threads_calling_at_once_get_their_own_results(small_splits):
    """A second caller while the pool is busy runs its kernel on its own thread."""
    u = RNG.standard_normal((40, 64)).astype(np.float32)
    cpu, ref = cpu_and_reference(_loop, u)
    inputs = [u * k for k in range(1, 7)]
    wants = [ref.run(x)[0] for x in inputs]
    gots = [None] * len(inputs)

    def run(k):
        for _ in range(20):
            gots[k] = cpu.run(inputs[k])[0]
    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(gots, wants):
        assert_close(got, want, rtol=1e-5, scale=1.0)


def _in_child(queue):
    u = np.linspace(-2, 2, 40 * 64, dtype=np.float32).reshape(40, 64)
    runtime.POOL_SPLIT_WORK = 1
    cpu, ref = cpu_and_reference(_loop, u)
    queue.put(bool(np.allclose(cpu.run(u)[0], ref.run(u)[0], rtol=1e-5, atol=1e-6)))


def test_a_forked_process_runs_pooled_kernels(small_splits):
    """A child has none of its parent's workers: it starts its own (or runs alone) and
    never waits for the parent's."""
    u = RNG.standard_normal((40, 64)).astype(np.float32)
    cpu, ref = cpu_and_reference(_loop, u)
    assert_close(cpu.run(u)[0], ref.run(u)[0], rtol=1e-5, scale=1.0)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=5)


def test_a_stalled_worker_sends_callers_alone_for_longer_each_time():
    """A worker that holds its chunk far longer than the caller's share took is a stall:
    callers then run alone for ``ALONE_MIN`` cycles, twice as long after a further stall,
    and a job shared without one starts over from ``ALONE_MIN``."""
    import ctypes
    import time
    from nbjax.backends.cpu import support
    runtime.start_pool()
    main = threading.get_native_id()
    seen = {"worker": threading.Event()}

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    def chunk(args, start, stop):
        if threading.get_native_id() == main:
            seen["worker"].wait(30)  # (so that the worker takes a chunk of its own)
            if not seen["sleep"]:    # (a share longer than the GIL could delay the worker)
                time.sleep(0.02)
        else:
            seen["worker"].set()
            time.sleep(seen["sleep"])
    parallel_for = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        support.address(workers.PARALLEL_FOR))
    until, backoff = (ctypes.c_uint64.from_address(support.address(f"nbjax_pool_{n}"))
                      for n in ("alone_until", "backoff"))

    def job(sleep):
        seen["worker"].clear()
        seen["sleep"] = sleep
        until.value = 0
        parallel_for(ctypes.cast(chunk, ctypes.c_void_p), None, 64)
        assert seen["worker"].is_set(), "the worker took no chunk"
        return until.value, backoff.value // workers.ALONE_MIN
    backoff.value = workers.ALONE_MIN   # (as a job shared without a stall leaves it)
    until_then, doubled = job(0.25)  # (a stall even if the caller loses its core a while)
    assert until_then > 0 and doubled == 2, (until_then, doubled)
    assert job(0.25)[1] == 4
    seen_after = [job(0.0) for _ in range(3)]  # (on a loaded machine the worker may lose
    assert (0, 1) in seen_after, seen_after     # its core for a while: a stall too)

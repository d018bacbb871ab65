"""Native functions called from Python through their builtin entries (``python_entry``):
they compute what the ctypes calls computed, exist for the functions Python calls, and let
go of the GIL while the native code runs, so other Python threads go on."""

import threading
import time

import numpy as np
import pytest

import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import python_entry
from helpers import assert_close, cpu_and_reference

RNG = np.random.default_rng(5)
pytestmark = pytest.mark.cpu_compiler


def _kernel(x):
    return jnp.sin(x) * 2.0 + x


def _loop(x):
    return lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c) * 1.5 + jnp.float32(i), x)


def _program(w, x):
    h = jnp.tanh(x @ w)
    return lax.fori_loop(0, 2, lambda i, c: c @ w + 1.0, h), jnp.sum(h)


CASES = [(_kernel, [(5, 7)]), (_loop, [(4, 33)]), (_program, [(16, 16), (3, 16)])]


def _args(shapes, dtype=np.float32):
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("fn, shapes", CASES, ids=["kernel", "loop", "program"])
def test_entries_compute_what_the_reference_computes(fn, shapes):
    args = _args(shapes)
    cpu, ref = cpu_and_reference(fn, *args)
    assert cpu.layout.entries, "the function Python calls has no entry"
    for _ in range(3):  # the recycled small outputs too
        for got, want in zip(cpu.run(*args), ref.run(*args)):
            assert_close(np.asarray(got), np.asarray(want), rtol=2e-6, scale=4.0)


@pytest.mark.parametrize("fn, shapes", CASES, ids=["kernel", "loop", "program"])
def test_without_entries_the_executables_call_through_ctypes(fn, shapes, monkeypatch):
    monkeypatch.setattr(python_entry, "USABLE", False)
    monkeypatch.setenv("NBJAX_DISABLE_DISK_CACHE", "1")  # a program compiled afresh
    args = _args(shapes)
    cpu, ref = cpu_and_reference(fn, *args, name="no_entries")
    assert cpu.layout.entries == {}
    for got, want in zip(cpu.run(*args), ref.run(*args)):
        assert_close(np.asarray(got), np.asarray(want), rtol=2e-6, scale=4.0)


def test_only_the_functions_python_calls_get_entries():
    x = _args([(4, 33)])[0]
    assert list(cpu_and_reference(_kernel, x)[0].layout.entries) == ["kernel_0"]
    loop = cpu_and_reference(_loop, x)[0]
    assert list(loop.layout.entries) == [f.name for f in loop.layout.flows.values()]
    program = cpu_and_reference(_program, *_args([(16, 16), (3, 16)]))[0]
    assert list(program.layout.entries) == ["program"]
    big = np.ones(1 << 21, np.float32)  # split between the cores: not called by an entry
    assert cpu_and_reference(_kernel, big)[0].layout.entries == {}


def _spin(w, x):
    """Some tens of milliseconds of native code (a long loop of small products)."""
    return lax.fori_loop(0, 8000, lambda i, c: jnp.tanh(c @ w), x)


def test_the_native_call_lets_other_python_threads_run():
    w, x = _args([(64, 64), (64, 64)])
    cpu, _ = cpu_and_reference(_spin, w, x)
    cpu.run(w, x)
    seen, stop = [], threading.Event()

    def clock():  # what another thread does while the native code runs
        while not stop.is_set():
            seen.append(time.perf_counter())
            time.sleep(0)
    thread = threading.Thread(target=clock)
    thread.start()
    try:
        time.sleep(0.01)
        started = time.perf_counter()
        cpu.run(w, x)
        ended = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    # Holding the GIL, the native call would keep the other thread from running at all in
    # the middle of the call (it may run briefly at either end, as the GIL changes hands).
    quarter = (ended - started) / 4
    middle = [t for t in seen if started + quarter < t < ended - quarter]
    assert ended - started > 0.02, "the loop ran too briefly to tell"
    assert len(middle) > 100, f"{len(middle)} turns of the other thread in the call's middle"


def _sum_of(*xs):
    out = xs[0] * 0.5
    for k, x in enumerate(xs[1:]):
        out = out + x * float(k + 2)
    return out


@pytest.mark.parametrize("n_inputs", [1, python_entry.MAX_KERNEL_BUFFERS - 1,
                                      python_entry.MAX_KERNEL_BUFFERS])
def test_a_kernel_of_up_to_the_most_buffers_has_an_entry_and_more_call_through_ctypes(
        n_inputs):
    """The kernel entry calls a kernel through a switch on its number of buffers: the last
    case computes as the first, and a kernel of one buffer more has no entry."""
    xs = _args([(3, 5)] * n_inputs)
    cpu, ref = cpu_and_reference(_sum_of, *xs)
    kernel, = [loop for loop, _, _ in cpu.layout.kernels]
    n_buffers = len(kernel.inputs) + len(kernel.outputs)
    assert n_buffers == n_inputs + 1
    has_entry = n_buffers <= python_entry.MAX_KERNEL_BUFFERS
    assert bool(cpu.layout.entries) == has_entry
    if has_entry:  # the entry itself computes the sum, not the ctypes call after a refusal
        out = np.full((3, 5), np.nan, np.float32)
        assert cpu._kernel.entry_output[0](out, *xs) is None
        assert_close(out, np.asarray(ref.run(*xs)[0]), rtol=2e-6, scale=4.0 * n_inputs)
    for got, want in zip(cpu.run(*xs), ref.run(*xs)):
        assert_close(np.asarray(got), np.asarray(want), rtol=2e-6, scale=4.0 * n_inputs)


def test_an_entry_of_a_program_loaded_from_the_disk_cache_takes_arrays(tmp_path, monkeypatch):
    """A loaded program's descriptor names NumPy's own dtype objects (a pickled dtype is
    another object, which would make the entry refuse every array)."""
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NBJAX_DISABLE_DISK_CACHE", raising=False)
    x = _args([(5, 7)])[0]
    compiled = cpu_and_reference(_kernel, x)[0]
    loaded = cpu_and_reference(_kernel, x)[0]
    assert "codegen" in compiled.compile_times and "codegen" not in loaded.compile_times
    for cpu in (compiled, loaded):
        out = np.full((5, 7), np.nan, np.float32)
        assert cpu._kernel.entry_output[0](out, x) is None, "the entry refused"
        assert_close(out, np.sin(x) * 2.0 + x, rtol=2e-6, scale=4.0)

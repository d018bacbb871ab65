"""The object loader links compiled kernels as MCJIT would, and gives way to it on anything
it does not know (``nbjax.backends.cpu.object_loader``)."""

import ctypes
import platform
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.backends.cpu import object_loader, pipeline, runtime
from nbjax.backends.cpu.target import cpu_target

import llvmlite.binding as llvm

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64",
    reason="the loader links x86-64 ELF objects; elsewhere MCJIT loads them")

# Two parts: ``scaled_sum`` calls ``weight`` in the other object and reads a constant
# table (read-only data), and calls ``cbrt`` (libm's) and ``memset`` from the process.
CALLER = """
@table = private unnamed_addr constant [4 x double]
  [double 1.5, double -2.0, double 0.25, double 8.0]
declare double @weight(i64)
declare i8* @memset(i8*, i32, i64)
declare double @cbrt(double)

define double @scaled_sum(double* %x, i64 %n, i8* %scratch) {
entry:
  call i8* @memset(i8* %scratch, i32 7, i64 %n)
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %acc = phi double [0.0, %entry], [%sum, %loop]
  %p = getelementptr double, double* %x, i64 %i
  %u = load double, double* %p
  %v = call double @cbrt(double %u)
  %k = and i64 %i, 3
  %q = getelementptr [4 x double], [4 x double]* @table, i64 0, i64 %k
  %t = load double, double* %q
  %w = call double @weight(i64 %i)
  %vt = fmul double %v, %t
  %term = fmul double %vt, %w
  %sum = fadd double %acc, %term
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret double %sum
}
"""

CALLEE = """
define double @weight(i64 %i) noinline {
  %f = sitofp i64 %i to double
  %w = fadd double %f, 0.5
  ret double %w
}
"""


def objects(*texts):
    runtime._initialise()
    return [pipeline.compile_module(text, *cpu_target())[1] for text in texts]


def scaled_sum(x):
    table = np.array([1.5, -2.0, 0.25, 8.0])
    i = np.arange(len(x))
    return float(np.sum(np.cbrt(x) * table[i % 4] * (i + 0.5)))


def call_scaled_sum(code, x):
    fn = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)(
        code.get_function_address("scaled_sum"))
    scratch = np.zeros(len(x) + 1, np.uint8)
    result = fn(x.ctypes.data, len(x), scratch.ctypes.data)
    return result, scratch


def test_links_calls_between_objects_constants_and_process_symbols():
    loaded = object_loader.load(objects(CALLER, CALLEE), llvm.address_of_symbol)
    assert isinstance(loaded, object_loader.LoadedCode)
    x = np.random.default_rng(0).normal(size=37)
    result, scratch = call_scaled_sum(loaded, x)
    assert result == pytest.approx(scaled_sum(x), rel=1e-12, abs=1e-12)
    assert np.all(scratch[:-1] == 7) and scratch[-1] == 0  # memset, from the process
    assert loaded.get_function_address("weight") != 0
    assert loaded.get_function_address("no_such_function") == 0


def test_same_answer_as_mcjit():
    parts = objects(CALLER, CALLEE)
    x = np.linspace(-3, 3, 11)
    ours = call_scaled_sum(object_loader.load(parts, llvm.address_of_symbol), x)[0]
    tm = pipeline.target_machine("", "", opt=0)
    engine = llvm.create_mcjit_compiler(pipeline.parse("", tm), tm)
    for code in parts:
        engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(code)))
    engine.finalize_object()
    assert ours == call_scaled_sum(engine, x)[0]


def test_a_missing_symbol_gives_way_to_mcjit():
    # ``weight`` is in neither object nor the process: MCJIT would abort, so the callers
    # check symbols first; the loader just declines
    assert object_loader.load(objects(CALLER), llvm.address_of_symbol) is None
    assert object_loader.load(objects(CALLER, CALLEE), lambda name: 0) is None


def test_what_it_does_not_handle_gives_way_to_mcjit():
    writable = objects("@count = global i64 0\n"
                       "define i64 @bump() {\n  %c = load i64, i64* @count\n"
                       "  %d = add i64 %c, 1\n  store i64 %d, i64* @count\n  ret i64 %d\n}\n")
    assert object_loader.load(writable, llvm.address_of_symbol) is None
    engine = runtime.load_objects(writable)  # MCJIT takes them
    bump = ctypes.CFUNCTYPE(ctypes.c_int64)(engine.get_function_address("bump"))
    assert [bump(), bump()] == [1, 2]
    assert object_loader.load([b"not an object file"], llvm.address_of_symbol) is None
    caller, callee = objects(CALLER, CALLEE)
    parsed = object_loader._Object(caller)
    rela = next(s for s in parsed.sections if s[1] == 4 and s[7] in parsed.loaded)
    outside = bytearray(caller)  # its first relocation moved past the end of its section
    outside[rela[4]:rela[4] + 8] = (parsed.sections[rela[7]][5] - 2).to_bytes(8, "little")
    assert object_loader.load([bytes(outside), callee], llvm.address_of_symbol) is None
    assert object_loader.load([b"\x7fELF" + bytes(100)], llvm.address_of_symbol) is None


def _mapped(address):
    with open("/proc/self/maps") as maps:
        for line in maps:
            start, end = (int(a, 16) for a in line.split()[0].split("-"))
            if start <= address < end:
                return line.split()[1]
    return None


def test_code_is_read_only_and_unmapped_once_unreferenced():
    loaded = object_loader.load(objects(CALLER, CALLEE), llvm.address_of_symbol)
    address = loaded.get_function_address("scaled_sum")
    assert _mapped(address).startswith("r-x")
    del loaded
    assert _mapped(address) is None


def test_programs_load_through_it(monkeypatch, empty_disk_cache):
    """A jitted program compiled afresh and then loaded from the disk cache (a new function
    object) is linked by the loader both times, and computes the same."""
    kinds = []
    load_objects = runtime.load_objects
    monkeypatch.setattr(runtime, "load_objects", lambda *args: kinds.append(
        type(made := load_objects(*args)).__name__) or made)

    def program(w, x):
        h = jnp.tanh(x @ w)
        return jnp.sum(h * h), jnp.exp(-x).mean(axis=0)

    w = np.random.default_rng(1).normal(size=(8, 5)).astype(np.float32)
    x = np.random.default_rng(2).normal(size=(6, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no fallback to the reference backend)
        first = nbjax.jit(program, backend="cpu")(w, x)
        again = nbjax.jit(lambda w, x: program(w, x), backend="cpu")(w, x)
    assert kinds == ["LoadedCode", "LoadedCode"]
    with nbjax.disable_jit():
        want = program(w, x)
    for got in (first, again):
        for g, r in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=2e-6, atol=1e-6)

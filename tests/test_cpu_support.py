"""The support module (nbjax/backends/cpu/support.py): the float16 conversion functions that
code for CPUs without F16C calls, against NumPy's conversions, bit for bit; its object code
kept in the disk cache and loaded by later processes."""
import ctypes
import functools
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

llvm = pytest.importorskip("llvmlite.binding")
ir = pytest.importorskip("llvmlite.ir")

from nbjax.backends.cpu import python_entry, runtime, support  # noqa: E402
from helpers import assert_close  # noqa: E402

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="the support functions are x86-64's")

I64 = ir.IntType(64)
BITS = {np.float16: ir.IntType(16), np.float32: ir.IntType(32), np.float64: ir.IntType(64)}
TYPES = {np.float16: ir.HalfType(), np.float32: ir.FloatType(), np.float64: ir.DoubleType()}
CASES = {"__extendhfsf2": (np.float16, np.float32), "__truncsfhf2": (np.float32, np.float16),
         "__truncdfhf2": (np.float64, np.float16)}


@functools.lru_cache(maxsize=None)
def _converter(name):
    """A loop calling the support function ``name`` on each element, compiled for
    x86-64-v2 (no F16C), so the call goes through the registered symbol."""
    runtime._initialise()
    src, dst = CASES[name]
    m = ir.Module()
    callee = ir.Function(m, ir.FunctionType(TYPES[dst], [TYPES[src]]), name=name)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [BITS[src].as_pointer(),
                                                       BITS[dst].as_pointer(), I64]), "loop")
    entry, body, done = (fn.append_basic_block(n) for n in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", fn.args[2], ir.Constant(I64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), entry)
    value = b.bitcast(b.load(b.gep(fn.args[0], [i])), TYPES[src])
    b.store(b.bitcast(b.call(callee, [value]), BITS[dst]), b.gep(fn.args[1], [i]))
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, body)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[2]), body, done)
    b.position_at_end(done)
    b.ret_void()
    tm = llvm.Target.from_default_triple().create_target_machine(cpu="x86-64-v2", opt=2,
                                                                 jit=True)
    mod = llvm.parse_assembly(str(m))
    mod.triple = tm.triple
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    loop = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("loop"))

    def convert(x):
        x = np.ascontiguousarray(x, src)
        out = np.empty(x.shape, dst)
        loop(x.ctypes.data, out.ctypes.data, x.size)
        return out
    convert.engine = engine
    return convert


ALL_HALVES = np.arange(1 << 16, dtype=np.uint16).view(np.float16)


def _assert_same_bits(got, want):
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(f"u{got.itemsize}"),
                                  want[~nan].view(f"u{want.itemsize}"))


def _around_halves(dtype):
    """Every float16 value as ``dtype``, its neighbours, and the midpoints between halves."""
    wide = ALL_HALVES[np.isfinite(ALL_HALVES)].astype(dtype)
    ints = wide.view(f"i{wide.itemsize}")
    near = (ints[:, None] + np.arange(-2, 3)).ravel().view(dtype)
    mid = ((wide[:-1].astype(np.float64) + wide[1:]) / 2).astype(dtype)
    return np.concatenate([near, mid])


def test_half_to_float_is_exact_for_every_half():
    _assert_same_bits(_converter("__extendhfsf2")(ALL_HALVES), ALL_HALVES.astype(np.float32))


@pytest.mark.parametrize("name,dtype", [("__truncsfhf2", np.float32),
                                        ("__truncdfhf2", np.float64)])
def test_rounding_to_half_is_to_nearest_even(name, dtype):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 62, 200_000, dtype=np.int64) * (2 if dtype == np.float64 else 1)
    random = (bits if dtype == np.float64 else bits.astype(np.uint32)).view(dtype)
    special = np.array([65519.99, 65520, 65536, 2 ** -25, 1.5 * 2 ** -24, 2 ** -26, -0.0,
                        np.inf, -np.inf, np.nan], dtype)
    x = np.concatenate([_around_halves(dtype), -_around_halves(dtype), random, special])
    with np.errstate(all="ignore"):
        _assert_same_bits(_converter(name)(x), x.astype(np.float16))


# --- the module's object code in the disk cache ----------------------------------------------

_CHILD = """
import json, os, signal, sys
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import cache, interrupts, support

if os.environ.get("FORBID_BUILDING"):
    def module():
        raise AssertionError("the support module's IR was built")
    support.module = module
small = nbjax.jit(lambda x: jnp.sin(x) * 2 + 1)
x = np.linspace(-3, 3, 7, dtype=np.float32)
calls = [small(x), small(x)]  # (the kernel entry, then the checked call)
loop = nbjax.jit(lambda y: lax.fori_loop(0, 5, lambda i, c: c * 0.5 + i, y))
big = nbjax.jit(lambda y: jnp.exp(-y * y))
y = np.linspace(-2, 2, 1 << 20, dtype=np.float32)
path = cache.directory() / (support._entry_key() + cache.SUFFIX)
interrupts.arm()
print(json.dumps({"small": [np.asarray(c).tolist() for c in calls],
                  "loop": np.asarray(loop(x)).tolist(), "big": float(np.asarray(big(y)).sum()),
                  "handler": signal.getsignal(signal.SIGINT) is not None,
                  "entry": str(path), "stored": cache.read(path, support._entry_key(), bytes)
                  is not None}))
"""


def _child(cache_path, forbid_building=False):
    env = dict(os.environ, NBJAX_CACHE_DIR=str(cache_path))
    env.pop("NBJAX_DISABLE_DISK_CACHE", None)
    if forbid_building:
        env["FORBID_BUILDING"] = "1"
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _expected():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    loop = x
    for i in range(5):
        loop = loop * np.float32(0.5) + np.float32(i)
    y = np.linspace(-2, 2, 1 << 20, dtype=np.float32)
    return np.sin(x) * 2 + 1, loop, float(np.exp(-y * y).sum(dtype=np.float64))


def _check(result):
    small, loop, big = _expected()
    for got in result["small"]:
        assert_close(np.array(got, np.float32), small, rtol=1e-6)
    assert_close(np.array(result["loop"], np.float32), loop, rtol=1e-6)
    assert abs(result["big"] - big) <= 1e-5 * big


def test_a_new_process_loads_the_support_module_without_building_it(tmp_path):
    """The first process compiles the module and stores it; the next one loads it (building
    its IR would fail there) and every entry, the worker pool and the loops run from it."""
    first = _child(tmp_path / "cache")
    assert first["stored"]
    second = _child(tmp_path / "cache", forbid_building=True)
    _check(first)
    _check(second)


def test_a_damaged_support_entry_is_rebuilt(tmp_path):
    entry = Path(_child(tmp_path / "cache")["entry"])
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    with pytest.raises(AssertionError, match="was built"):
        _child(tmp_path / "cache", forbid_building=True)
    again = _child(tmp_path / "cache")
    assert again["stored"]
    _check(again)


def test_the_support_entry_s_key_holds_the_layout_and_the_python(monkeypatch):
    key = support._entry_key()
    monkeypatch.setattr(python_entry, "layout", lambda: {"object": 24})
    other_layout = support._entry_key()
    monkeypatch.undo()
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    assert len({key, other_layout, support._entry_key()}) == 3

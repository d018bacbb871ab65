"""The float16 conversion functions that code for CPUs without F16C calls
(nbjax/backends/cpu/support.py), against NumPy's conversions, bit for bit."""
import ctypes
import functools
import platform

import numpy as np
import pytest

llvm = pytest.importorskip("llvmlite.binding")
ir = pytest.importorskip("llvmlite.ir")

from nbjax.backends.cpu import runtime, support  # noqa: E402

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

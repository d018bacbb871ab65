"""Accuracy, special values and vectorisation of nbjax/backends/llvm/mathlib.py.

Each function is compiled (once per dtype) into a loop `out[i] = f(in[i], ...)` over
buffers, optimised at O3 for the host CPU as the CPU backend does, and called through
ctypes on NumPy arrays. Results are compared with NumPy in float64 (math.erf for erf),
measuring the error in ulps of the result type.
"""
import ctypes
import functools
import math
import re

import numpy as np
import pytest

ir = pytest.importorskip("llvmlite.ir")
llvm = pytest.importorskip("llvmlite.binding")

import nbjax  # noqa: E402
from nbjax.backends.llvm import mathlib  # noqa: E402
from nbjax.backends.cpu import pipeline  # noqa: E402
from nbjax.backends.cpu.runtime import float32_lanes  # noqa: E402
from nbjax.backends import compile  # noqa: E402

# Max ulp error allowed per (function, dtype). float32 is compared with the float64 result
# rounded to float32 (measured: <= 2 ulp for every function); float64 with NumPy's libm,
# itself < 1 ulp (measured: 1 for exp/log/sin/cos/pow, 2 for log1p/expm1/erf/logistic --
# whose float64 reference is a formula with its own error -- and 3 for tanh).
ULP_BOUND = {
    np.float32: dict.fromkeys(mathlib.EMITTERS, 4),
    np.float64: {"exp": 2, "log": 2, "log1p": 2, "expm1": 2, "tanh": 3, "logistic": 3,
                 "sin": 2, "cos": 2, "tan": 4, "pow": 2, "erf": 2},
}


# --- compiling a kernel ------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _llvm_ready():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return True


def _compile(module):
    """The CPU backend's recipe: a host target machine (one per engine), O3 with the new
    pass manager (``pipeline``)."""
    _llvm_ready()
    tm = pipeline.target_machine(llvm.get_host_cpu_name(),
                                 llvm.get_host_cpu_features().flatten())
    mod = pipeline.parse(str(module), tm)
    pipeline.optimise(mod, tm)
    optimised = str(mod)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return engine, optimised


def _ir_type(dtype):
    return ir.FloatType() if dtype == np.float32 else ir.DoubleType()


def _loop_module(name, dtype, branches=False):
    """void kernel(T* noalias out, T* noalias in0, ..., i64 n): out[i] = name(in0[i], ...)
    (by the form that may branch: ``mathlib.emit``'s ``branches``)."""
    ty = _ir_type(dtype)
    nargs = mathlib.ARITY[name]
    module = ir.Module(name=f"{name}_{np.dtype(dtype).name}")
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ty.as_pointer()] * (nargs + 1)
                                             + [i64]), "kernel")
    for arg in fn.args[:-1]:
        arg.add_attribute("noalias")
    out, *ins, n = fn.args
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    vals = [b.load(b.gep(p, [i], source_etype=ty), typ=ty) for p in ins]
    b.store(mathlib.emit(b, name, vals, dtype, branches=branches),
            b.gep(out, [i], source_etype=ty))
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, b.block)   # (the loop's last block: the body may branch)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return module


@functools.lru_cache(maxsize=None)
def kernel(name, dtype, branches=False):
    """(callable on NumPy arrays, optimised IR text); compiled once per (name, dtype)."""
    engine, optimised = _compile(_loop_module(name, dtype, branches))
    nargs = mathlib.ARITY[name]
    cfunc = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (nargs + 1), ctypes.c_int64)(
        engine.get_function_address("kernel"))

    def call(*arrays):
        arrays = [np.ascontiguousarray(a, dtype=dtype) for a in np.broadcast_arrays(*arrays)]
        out = np.empty_like(arrays[0])
        cfunc(out.ctypes.data, *[a.ctypes.data for a in arrays], out.size)
        return out

    call.engine = engine  # keep the engine (and its machine code) alive
    return call, optimised


# --- references and error measure ---------------------------------------------------------

_math_erf = np.frompyfunc(math.erf, 1, 1)


def _logistic64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


REFERENCE = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1,
             "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan, "pow": np.power,
             "logistic": _logistic64, "erf": lambda x: _math_erf(x).astype(np.float64)}


def reference(name, dtype, *args):
    """NumPy in float64, rounded to dtype."""
    with np.errstate(all="ignore"):
        return REFERENCE[name](*[a.astype(np.float64) for a in args]).astype(dtype)


def ulp_diff(a, b):
    """Distance in units in the last place between same-dtype float arrays (0 for -0 vs 0)."""
    ity = np.int32 if a.dtype == np.float32 else np.int64
    def ordered(v):
        i = v.view(ity).astype(np.int64)
        mag = i & np.int64(np.iinfo(ity).max)
        return np.where(i < 0, -mag, mag)
    return np.abs(ordered(a) - ordered(b))


def check_close(name, dtype, args, got, want):
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    bad = np.flatnonzero(nan_got != nan_want)
    assert bad.size == 0, f"{name} NaN mismatch at {[a[bad[:5]] for a in args]}: " \
                          f"got {got[bad[:5]]}, want {want[bad[:5]]}"
    ok = ~nan_want
    diff = ulp_diff(got[ok], want[ok])
    bound = ULP_BOUND[dtype][name]
    worst = int(np.argmax(diff)) if diff.size else 0
    assert diff.size == 0 or diff[worst] <= bound, (
        f"{name}/{np.dtype(dtype).name}: {diff[worst]} ulp (bound {bound}) at "
        f"{[a[ok][worst] for a in args]}: got {got[ok][worst]!r}, want {want[ok][worst]!r}")
    return int(diff.max()) if diff.size else 0


# --- inputs ------------------------------------------------------------------------------

FLOATS = [np.float32, np.float64]
UNARY = [n for n in mathlib.EMITTERS if mathlib.ARITY[n] == 1]
# Where each function is not constant (saturated) or trivially x: sampled densely on top
# of the random bit patterns, which mostly land on huge or tiny magnitudes.
INTERESTING = {"exp": 750, "expm1": 750, "log": 1e3, "log1p": 1e3, "tanh": 25,
               "logistic": 750, "sin": 1e4, "cos": 1e4, "tan": 1e4, "erf": 7}


def random_bits(dtype, n, rng):
    """Floats with uniformly random bit patterns: every exponent, sign, NaN, inf, subnormal."""
    uint = np.uint32 if dtype == np.float32 else np.uint64
    return rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True).view(dtype)


def sample(name, dtype, n=100_000, seed=0):
    rng = np.random.default_rng(seed)
    span = INTERESTING[name]
    dense = rng.uniform(-span, span, n).astype(dtype)
    near0 = (rng.uniform(-1, 1, n // 4) * 10.0 ** rng.uniform(-8, 0, n // 4)).astype(dtype)
    if name in ("log", "log1p"):
        dense = np.abs(dense)
    return np.concatenate([random_bits(dtype, 2 * n, rng), dense, near0])


def specials(dtype):
    info = np.finfo(dtype)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
            info.tiny, -info.tiny, info.smallest_subnormal, -info.smallest_subnormal,
            info.max, -info.max, info.eps, np.pi / 2, np.pi, 1e-30, -1e-30]
    return np.array(vals, dtype=dtype)


# --- tests -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_accuracy(name, dtype):
    f, _ = kernel(name, dtype)
    x = sample(name, dtype)
    check_close(name, dtype, [x], f(x), reference(name, dtype, x))


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values(name, dtype):
    """NaN positions, infinities and signed zeros exactly as NumPy."""
    f, _ = kernel(name, dtype)
    x = specials(dtype)
    got, want = f(x), reference(name, dtype, x)
    check_close(name, dtype, [x], got, want)
    exact = np.isinf(want) | (want == 0) | np.isnan(want)
    np.testing.assert_array_equal(got[exact], want[exact])
    signed = ~np.isnan(want)             # a NaN's sign bit carries no meaning
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


def _pow_sample(dtype, n, rng):
    """Random bit patterns, moderate bases with exponents that stay finite, negative bases
    with integer exponents, and results near overflow and underflow."""
    bits_x, bits_y = random_bits(dtype, n, rng), random_bits(dtype, n, rng)
    x = 10.0 ** rng.uniform(-3, 3, n)
    y = rng.uniform(-30, 30, n)
    neg_x = -rng.uniform(0.1, 10, n)
    int_y = rng.integers(-40, 40, n).astype(float)
    big = np.log(np.finfo(dtype).max)
    edge_x = rng.uniform(1.01, 100, n)
    edge_y = rng.choice([-1.0, 1.0], n) * big / np.log(edge_x) * rng.uniform(0.95, 1.03, n)
    with np.errstate(all="ignore"):   # edge_y overflows float32 at times: inf is wanted
        return (np.concatenate([bits_x, x, neg_x, edge_x]).astype(dtype),
                np.concatenate([bits_y, y, int_y, edge_y]).astype(dtype))


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_pow_accuracy(dtype):
    f, _ = kernel("pow", dtype)
    x, y = _pow_sample(dtype, 60_000, np.random.default_rng(1))
    check_close("pow", dtype, [x, y], f(x, y), reference("pow", dtype, x, y))


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_pow_special_values(dtype):
    """C99 pow: pow(x, +-0) = 1, pow(1, y) = 1 (also NaN), 0**negative = inf with the sign
    of an odd exponent, negative bases need integer exponents, +-inf exponents, ..."""
    f, _ = kernel("pow", dtype)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
            np.inf, -np.inf, np.nan, np.finfo(dtype).smallest_subnormal]
    x, y = (a.ravel().astype(dtype) for a in np.meshgrid(vals, vals))
    got, want = f(x, y), reference("pow", dtype, x, y)
    with np.errstate(all="ignore"):
        native = np.power(x, y)          # NumPy on dtype itself: same special cases
    np.testing.assert_array_equal(np.isnan(got), np.isnan(native))
    check_close("pow", dtype, [x, y], got, want)
    signed = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
    exact = np.isinf(want) | (want == 0) | (np.abs(want) == 1)
    np.testing.assert_array_equal(got[exact], want[exact])


@pytest.mark.parametrize("name", list(mathlib.EMITTERS))
def test_float32_loop_vectorises_without_libm_calls(name):
    """A float32 kernel of each function, compiled by the backend, is as wide as a plain
    float32 loop on this CPU (float32 pow computes in float64, which LLVM alone would
    vectorise half as wide) and calls nothing but LLVM intrinsics (and, for sin, cos and
    tan, the shared function compiled apart and linked: ``codegen._math_for``)."""
    fn = getattr(nbjax.lax, name)
    x = np.linspace(0.5, 3.0, 4096, dtype=np.float32)
    args = (x, x[::-1].copy()) if mathlib.ARITY[name] == 2 else (x,)
    closed = nbjax.make_jaxpr(fn)(*args)
    (compiled,) = compile(closed, "cpu", name).kernels
    optimised = compiled.texts["optimised LLVM IR"]
    widths = {int(n) for n in re.findall(r"<(\d+) x float>", optimised)}
    assert max(widths, default=1) == float32_lanes(), f"{name}: float vectors {widths}"
    calls = re.findall(r"call [^@]*@([\w.]+)", optimised)
    own = f"nbjax_math_{name}_float32_v{float32_lanes()}"
    assert all(c.startswith("llvm.") or c in (own, own[:own.rindex("_")]) for c in calls), \
        f"{name}: calls {set(calls)}"
    assert (own in calls) == (name in mathlib.BRANCHING), f"{name}: calls {set(calls)}"


def _chain(name, calls):
    """``calls`` applications of ``name`` in one kernel (pow's second operand fixed)."""
    fn = getattr(nbjax.lax, name)

    def chain(x):
        for _ in range(calls):
            x = fn(x, x * 0 + 0.75) if mathlib.ARITY[name] == 2 else fn(x) * 0.5 + 0.25
        return x
    return chain


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(mathlib.EMITTERS))
def test_many_calls_share_one_vector_function(name, dtype, monkeypatch):
    """A kernel calling math functions more than ``INLINE_MATH_CALLS`` times calls one
    shared copy of each (its optimisation time then grows linearly with the chain, not
    faster): the vectorised loop calls the vector variant at the loop's full width, and the
    values are the inline code's, bit for bit (specials included; sin, cos and tan's shared
    forms take a faster reduction on vectors of moderate arguments, the same values
    here)."""
    from nbjax.backends.cpu import codegen
    calls = codegen.INLINE_MATH_CALLS + 1
    x = np.concatenate([np.linspace(-3.0, 3.0, 4093), [np.nan, np.inf, -np.inf, -0.0, 0.0],
                        np.linspace(0.1, 40.0, 2000)]).astype(dtype)
    with nbjax.enable_x64(dtype == np.float64):
        shared = compile(nbjax.make_jaxpr(_chain(name, calls))(x), "cpu", name)
        monkeypatch.setattr(codegen, "INLINE_MATH_CALLS", calls)
        monkeypatch.setattr(mathlib, "BRANCHING", {})   # (else sin, cos, tan stay shared)
        inline = compile(nbjax.make_jaxpr(_chain(name, calls))(x), "cpu", name)  # (a new
        # jaxpr: a jaxpr keeps its executable)
        assert not re.search(r"call [^@]*@nbjax_", inline.kernels[0].texts["optimised LLVM IR"])
        np.testing.assert_array_equal(shared.run(x)[0], inline.run(x)[0])
    (kernel,) = shared.kernels
    optimised = kernel.texts["optimised LLVM IR"]
    width = float32_lanes() * 4 // np.dtype(dtype).itemsize
    assert re.search(rf"call <{width} x \w+> @nbjax_\w+_{np.dtype(dtype)}_v{width}\(",
                     optimised), f"{name}: no {width}-lane call"
    called = set(re.findall(r"call [^@]*@([\w.]+)", optimised))
    assert all(c.startswith(("llvm.", "nbjax_")) for c in called), called


@functools.lru_cache(maxsize=None)
def _vector_kernel(name, dtype, lanes=8, branches=False):
    """void kernel(<lanes x T>* out, <lanes x T>* in...): the emitters on explicit vectors
    (in the form that may branch with ``branches``)."""
    vty = ir.VectorType(_ir_type(dtype), lanes)
    nargs = mathlib.ARITY[name]
    module = ir.Module(name=f"vec_{name}")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [vty.as_pointer()] * (nargs + 1)),
                     "kernel")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out, *ins = fn.args
    align = np.dtype(dtype).itemsize       # NumPy buffers are not vector-aligned
    vals = [b.load(p, typ=vty, align=align) for p in ins]
    b.store(mathlib.emit(b, name, vals, dtype, branches=branches), out, align=align)
    b.ret_void()
    engine, _ = _compile(module)
    cfunc = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (nargs + 1))(
        engine.get_function_address("kernel"))
    return engine, cfunc


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(mathlib.EMITTERS))
def test_explicit_vector_operands_match_scalar_code(name, dtype):
    _, cfunc = _vector_kernel(name, dtype)
    rng = np.random.default_rng(2)
    args = [np.array([0.3, -2.5, 7.0, 1e5, -0.0, np.inf, np.nan, 3e20], dtype=dtype)]
    if mathlib.ARITY[name] == 2:
        args = [np.abs(args[0]), rng.uniform(-3, 3, 8).astype(dtype)]
    out = np.empty(8, dtype)
    cfunc(out.ctypes.data, *[a.ctypes.data for a in args])
    np.testing.assert_array_equal(out, kernel(name, dtype)[0](*args))


def test_emit_rejects_bad_requests():
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.FloatType()] * 2), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    x, y = fn.args
    with pytest.raises(KeyError, match="no emitter for 'atan'"):
        mathlib.emit(b, "atan", [x], np.float32)
    with pytest.raises(TypeError, match="takes 2 operand"):
        mathlib.emit(b, "pow", [x], np.float32)
    with pytest.raises(TypeError, match="not float64"):
        mathlib.emit(b, "exp", [x], np.float64)
    with pytest.raises(TypeError, match="float32 and float64"):
        mathlib.emit(b, "exp", [x], np.int32)


@pytest.mark.parametrize("name", sorted(mathlib.BRANCHING))
def test_sin_and_cos_that_branch_keep_the_bound_on_float32(name):
    """The form for scalar code (``branches``: a small kernel's) reduces float32 arguments
    below ``QUICK_MAX`` by two fused steps and larger ones by the table: as accurate as
    the vector form, near multiples of pi/2 (where the reduced argument is smallest),
    either side of the threshold, and on the special values."""
    f, optimised = kernel(name, np.float32, branches=True)
    assert "br i1" in optimised
    x = _branch_sample(name)
    check_close(name, np.float32, [x], f(x), reference(name, np.float32, x))


def _branch_sample(name):
    """Arguments for the forms that branch: the accuracy sample, special values, float32
    neighbours of multiples of pi/2 (where the reduced argument is smallest), and either
    side of ``QUICK_MAX``."""
    k = np.arange(1, 700_000, 7, dtype=np.float64)
    near = (k * (np.pi / 2)).astype(np.float32)
    edge = np.float32(mathlib.QUICK_MAX)
    return np.concatenate([sample(name, np.float32), specials(np.float32), near,
                           np.nextafter(near, np.float32(np.inf)), -near,
                           [edge, np.nextafter(edge, np.float32(0)), -edge]]).astype(np.float32)


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("name", sorted(mathlib.BRANCHING))
def test_sin_and_cos_of_vectors_that_branch_keep_the_bound_on_float32(name, lanes):
    """The form for explicit vectors that may branch (a shared function's, ``shared_math``)
    takes the two fused steps when every lane is below ``QUICK_MAX``, else the table for
    every lane: the bound holds on vectors of moderate arguments only (the sample sorted),
    on vectors that mix them with large ones, NaN or inf (shuffled), and agrees with the
    branch-free vector form on every vector that has to take the table."""
    _, branching = _vector_kernel(name, np.float32, lanes, branches=True)
    _, plain = _vector_kernel(name, np.float32, lanes)
    x = _branch_sample(name)
    x = x[: x.size // lanes * lanes]
    for arranged in (np.sort(np.abs(x)), np.random.default_rng(3).permutation(x)):
        got, table = np.empty_like(arranged), np.empty_like(arranged)
        for start in range(0, arranged.size, lanes):
            for fn, out in ((branching, got), (plain, table)):
                fn(out[start:].ctypes.data, arranged[start:].ctypes.data)
        check_close(name, np.float32, [arranged], got, reference(name, np.float32, arranged))
        rows = arranged.reshape(-1, lanes)
        tabled = ~(np.abs(rows) < mathlib.QUICK_MAX).all(axis=1)
        assert tabled.any() and (~tabled).any()
        np.testing.assert_array_equal(got.reshape(-1, lanes)[tabled],
                                      table.reshape(-1, lanes)[tabled])

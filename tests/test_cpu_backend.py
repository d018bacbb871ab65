"""The llvmlite CPU backend: generated code, runtime, and semantics shared with the reference
backend (the differential fuzz test is in test_fuzz_differential.py)."""

import threading
import time
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends import compile
from nbjax.backends.cpu import runtime, workers
from nbjax.backends.cpu.host_steps import SplitCall
from helpers import assert_close, cpu_and_reference, host_cumlogsumexp

from helpers import is_full_width_float32

RNG = np.random.default_rng(1)


def _check(f, *args, rtol=1e-6):
    cpu, ref = cpu_and_reference(f, *args)
    outs = cpu.run(*args)
    for a, b in zip(outs, ref.run(*args)):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
    return cpu, outs


# --- generated code ------------------------------------------------------------------------

def test_float32_elementwise_kernel_is_vectorised():
    cpu, _ = _check(lambda x: x + x * x + x * x * x, RNG.random((64, 200), np.float32))
    (kernel,) = cpu.kernels
    assert "noalias" in kernel.texts["LLVM IR"]
    assert is_full_width_float32(kernel.texts["optimised LLVM IR"])
    assert kernel.loop.pretty().startswith("kernel kernel_0 over [64, 200]")
    assert [e.primitive.name for e in kernel.eqns].count("mul") == 2


def test_exp_is_inline_so_selu_is_vectorised():
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    cpu, _ = _check(lambda x: scale * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha),
                    RNG.standard_normal((32, 64)).astype(np.float32), rtol=1e-6)
    ir_text = cpu.kernels[0].texts["optimised LLVM IR"]
    assert is_full_width_float32(ir_text)
    assert "expf" not in ir_text and "llvm.exp." not in ir_text


def test_one_module_for_all_kernels_and_compile_times(monkeypatch):
    monkeypatch.setenv("NBJAX_DISABLE_DISK_CACHE", "1")  # every LLVM phase must run
    cpu, _ = _check(lambda x: (jnp.sin(x).sum(0), (x @ x.T).max(1)),
                    RNG.random((5, 7), np.float32), rtol=1e-5)
    # sin+sum and the max (the product reads x as the transpose it multiplies by)
    assert len(cpu.kernels) == len(cpu.plan.kernels) == 2
    assert cpu.jit_module.optimised_ir.count("define void @") == 2
    assert set(cpu.compile_times) >= {"passes", "fusion", "codegen", "llvm_optimise",
                                      "machine_code"}
    assert all(t >= 0 for t in cpu.compile_times.values())


def test_rewrites_are_reported():
    cpu, _ = _check(lambda x: lax.integer_pow(x, 2) * 1.0, RNG.random(5, np.float32))
    assert any(r.rule == "simplify" for r in cpu.rewrites)


def test_per_step_timing_is_opt_in():
    x = RNG.random((3, 4), np.float32)
    cpu, _ = cpu_and_reference(lambda x: (x @ x.T).sum(), x)
    assert cpu.step_times is None
    cpu.enable_timing()
    cpu.run(x)
    cpu.run(x)
    assert sorted(cpu.step_times) == list(range(len(cpu.plan.groups)))
    assert all(len(t) == 2 for t in cpu.step_times.values())


def test_a_program_is_one_native_call_its_large_kernels_split_from_it(monkeypatch):
    """Kernels, a product, a host callback (a host step) and a loop: one native call, timed or not,
    with the reference backend's values; a kernel large enough to split is handed to the
    worker threads from inside the call."""
    def f(x, w):
        y = host_cumlogsumexp(jnp.tanh(x @ w), 1)
        return lax.fori_loop(0, 3, lambda i, c: c * 0.5 + y, y).sum(0), x.T

    x, w = RNG.standard_normal((6, 5)).astype(np.float32), RNG.random((5, 4), np.float32)
    cpu, ref = cpu_and_reference(f, x, w)
    assert cpu.runs_as == "one native call, calling back into Python for pure_callback"
    assert cpu._program is not None
    # the loop's code is compiled once: the program calls the loop step's function
    assert "@control_" in cpu.jit_module.function_ir("program")
    native = cpu.run(x, w)
    cpu.enable_timing()
    timed = cpu.run(x, w)
    for a, b, c in zip(native, timed, ref.run(x, w)):
        np.testing.assert_array_equal(a, b)
        assert_close(a, c, rtol=1e-5)
    monkeypatch.setattr(runtime, "SPLIT_THRESHOLD", 16)
    monkeypatch.setattr(runtime, "POOL_SPLIT_WORK", 16)
    monkeypatch.setattr(runtime, "THREADS", 2)
    cpu, _ = cpu_and_reference(f, x, w)
    assert cpu._program is not None and "split between the cores" in cpu.runs_as
    # (on the worker pool, from the native code, where there is one; else Python's threads)
    split_calls = [c for c in cpu.layout.host_calls if isinstance(c, SplitCall)]
    assert bool(split_calls) != workers.supported()
    for a, c in zip(cpu.run(x, w), ref.run(x, w)):
        assert_close(a, c, rtol=1e-5)


def test_a_sum_over_the_outer_axis_splits_by_its_work_not_its_elements(monkeypatch):
    """A reduction over its outer axis splits between the cores (partial sums combined)
    from ``POOL_SPLIT_WORK`` of work (``SPLIT_THRESHOLD`` without the worker pool):
    elements, and ``MATH_WORK`` more for each math function per element (a trapezoid rule
    over sin(x)**2 read at two places: 1e6 elements, ran on one core). Fewer elements of
    plain sums stay on one thread."""
    monkeypatch.setattr(runtime, "THREADS", 2)
    monkeypatch.setattr(runtime, "SPLIT_THRESHOLD", 4096)
    monkeypatch.setattr(runtime, "POOL_SPLIT_WORK", 4096)
    x = RNG.standard_normal(1000).astype(np.float32)
    cpu, ref = cpu_and_reference(lambda x: jnp.sum(jnp.sin(x) * jnp.cos(x[::-1])), x)
    assert "split between the" in cpu.plan.report()
    np.testing.assert_allclose(cpu.run(x)[0], ref.run(x)[0], rtol=1e-5, atol=1e-4)
    cpu, _ = cpu_and_reference(lambda x: jnp.sum(x * 2.0), x)
    assert "split between the" not in cpu.plan.report()


# --- semantics the kernels must share with the reference ---------------------------------

def test_integer_division_and_shifts_follow_xla():
    ints = np.array([7, -7, 0, np.iinfo(np.int32).min, 5, -1], np.int32)
    divisors = np.array([2, 2, 0, -1, 0, 40], np.int32)
    _check(lambda x, y: (lax.div(x, y), lax.rem(x, y), lax.shift_left(x, y),
                         lax.shift_right_arithmetic(x, y), lax.shift_right_logical(x, y)),
           ints, divisors)
    u = np.array([200, 7, 0, 255], np.uint8)
    _check(lambda x, y: (lax.div(x, y), lax.rem(x, y), lax.shift_right_arithmetic(x, y)),
           u, np.array([3, 0, 0, 9], np.uint8))


def test_float_special_values_conversions_and_min_max():
    x = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 2.5, -2.5, 3e9, -3e9, 0.5],
                 np.float32)
    y = x[::-1].copy()
    _check(lambda x, y: (jnp.maximum(x, y), jnp.minimum(x, y), x.astype(jnp.int32),
                         x.astype(jnp.uint8), x.astype(bool), jnp.round(x), lax.round(x, 1),
                         jnp.sign(x), x != y, x < y, jnp.isfinite(x), x.max(), x.min()),
           x, y)


def test_a_kernel_keeps_minus_zero_apart_from_zero():
    """A kernel makes each constant once, and -0.0 == 0.0 in Python: ``atan2(-0.0, x)``
    beside a ``max(x, 0.0)`` read 0.0, so the argument of a negated real taken as complex
    (``log(-(x + 0j))``, whose imaginary part is -0.0) came out +pi instead of -pi."""
    x = np.float32([-3.0, 2.0, 0.0])
    _, (_, angle, log) = _check(
        lambda x: (jnp.maximum(x, 0.0), lax.atan2(np.float32(-0.0), x),
                   lax.log(lax.neg(x.astype(np.complex64)))), x)
    np.testing.assert_array_equal(np.signbit(angle), np.signbit(np.arctan2(np.float32(-0.0), x)))
    with np.errstate(divide="ignore"):
        want = np.log(np.negative(x.astype(np.complex64)))
    np.testing.assert_array_equal(np.signbit(log.imag), np.signbit(want.imag))
    assert_close(log.imag, want.imag, 1e-6)


def test_bool_and_small_integer_buffers():
    b = RNG.random((4, 5)) > 0.5
    i8 = RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    _check(lambda b, i: (b & ~b.T.reshape(4, 5), jnp.where(b, i, -i), b.sum(), b.any(0),
                         (i * i).astype(jnp.int16), lax.population_count(i), lax.clz(i)),
           b, i8)


def test_float16_arithmetic_and_reductions():
    h = RNG.standard_normal((5, 6)).astype(np.float16)
    _check(lambda h: (h * h + 1, jnp.exp(h), h.sum(0), h.astype(jnp.float32)), h, rtol=1e-3)


def test_non_contiguous_size_zero_and_size_one_inputs():
    base = RNG.standard_normal((6, 8)).astype(np.float32)
    for x in (base[:, ::2], base.T, base[::-1], base[:0], base[:1, :1], base[2, :]):
        _check(lambda x: (jnp.sin(x) * 2.0, x.sum(axis=0), x[::-1]), x)


def test_empty_reductions_give_the_identity():
    z = np.zeros((3, 0), np.float32)
    _check(lambda z: (lax.reduce_sum(z, (1,)), lax.reduce_max(z, (1,)),
                      lax.reduce_min(z, (1,)), lax.reduce_prod(z, (1,))), z)


def test_dynamic_slice_clamps_its_runtime_start():
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    cpu, ref = cpu_and_reference(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)) * 2.0, x,
                     np.int32(0), np.int32(0))
    assert [g.kind for g in cpu.plan.groups] == ["kernel"]
    for i, j in [(0, 0), (4, 4), (-3, 2), (100, -100), (2, 1)]:
        np.testing.assert_array_equal(cpu.run(x, np.int32(i), np.int32(j))[0],
                                      ref.run(x, np.int32(i), np.int32(j))[0])


def test_large_loops_split_between_threads_and_match():
    x = RNG.standard_normal((1 << 10, 1 << 10)).astype(np.float32)  # 2**20 elements
    cpu, outs = _check(lambda x: (x * 2.0 + 1.0, jnp.sum(x * x, axis=1)), x, rtol=1e-4)
    assert runtime.splits(cpu.kernels[0].loop)



@pytest.mark.parametrize("shape", [(17, 40), (16, 16), (3, 33, 70), (1100, 1000)])
def test_kernels_reading_transposed_walk_in_blocks_with_the_same_values(shape):
    """A kernel reading an input transposed walks its last two axes in blocks
    (``blocking``), rows and columns not a multiple of a block included, with batch axes,
    and split between the cores (the largest): the values are the reference's (bit for bit
    without math functions: only the order of the iterations changes). A kernel reading in
    order is not blocked."""
    from nbjax.backends.cpu import blocking
    x = RNG.standard_normal(shape).astype(np.float32)
    swap = lambda x: jnp.swapaxes(x, -1, -2)  # noqa: E731
    for f, exact in ((lambda x: swap(x) * 2.0 + 1.0, True),
                     (lambda x: (swap(x) + jnp.sin(swap(x)[..., ::-1, :]), x[..., :1, :] - x),
                      False)):
        cpu, ref = cpu_and_reference(f, x)
        for a, b in zip(cpu.run(x), ref.run(x)):
            if exact:
                np.testing.assert_array_equal(a, b)
            else:
                assert_close(a, b, rtol=1e-6)
        assert blocking.blocked(cpu.kernels[0].loop), cpu.plan.report()
        assert runtime.splits(cpu.kernels[0].loop) == (shape == (1100, 1000))
    cpu, _ = cpu_and_reference(lambda x: x * 2.0 + 1.0, x)
    assert not blocking.blocked(cpu.kernels[0].loop)

# --- runtime -------------------------------------------------------------------------------

def test_buffers_are_aligned_and_reused_once_free():
    pool = runtime.BufferPool()
    a = pool.empty((3, 5), np.float32)
    assert runtime.address(a) % 64 == 0 and a.flags.c_contiguous
    address = runtime.address(a)
    b = pool.empty((3, 5), np.float32)
    assert runtime.address(b) != address  # a is still alive
    view = a[1:]
    del a
    assert runtime.address(pool.empty((3, 5), np.float32)) != address  # a view is alive
    del view
    c = pool.empty((3, 5), np.float32)
    assert runtime.address(c) == address
    big = pool.empty((1 << 21,), np.float32)  # a huge-page mapping
    assert runtime.address(big) % 64 == 0
    assert pool.empty((0, 4), np.int8).shape == (0, 4)


def test_the_pool_keeps_as_many_buffers_of_a_size_as_its_byte_budget_holds():
    """Many live buffers of one size (an optimiser's updates of a model's layers: nine
    784x256 results a call) come back for the next call's, up to ``KEEP_BYTES`` of them
    (or ``KEEP_MOST``), and ``KEEP_PER_SIZE`` at least of a large size: four were kept of
    any size, and the rest were allocated afresh each call, page faults and all."""
    pool = runtime.BufferPool()
    for shape, kept in [((784, 256), runtime.KEEP_BYTES // (784 * 256 * 4)),
                        ((4,), runtime.KEEP_MOST),
                        ((4 << 20,), runtime.KEEP_PER_SIZE)]:
        first = [pool.empty(shape, np.float32) for _ in range(kept + 2)]
        addresses = {runtime.address(a) for a in first}
        del first
        again = [pool.empty(shape, np.float32) for _ in range(kept + 2)]
        pooled = {runtime.address(a) for a in again if pool.entry(a) is not None}
        assert len(pooled) == kept and pooled <= addresses, shape


def test_outputs_are_not_overwritten_by_later_calls():
    x = RNG.standard_normal(16).astype(np.float32)
    cpu, _ = cpu_and_reference(lambda x: x * 2.0, x)
    first = cpu.run(x)[0]
    second = cpu.run(x + 1)[0]
    assert_close(first, x * 2)
    assert_close(second, (x + 1) * 2)


def test_kernels_run_concurrently_from_threads():
    x = RNG.standard_normal((50, 50)).astype(np.float32)
    cpu, _ = cpu_and_reference(lambda x: jnp.tanh(x).sum(0), x)
    expected = cpu.run(x)[0]
    results = []
    threads = [threading.Thread(target=lambda: results.append(cpu.run(x)[0]))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, expected)


def test_one_native_program_runs_from_threads_at_once():
    """Four threads run one native program (kernels, a product, a host callback into Python, a
    loop) on inputs of their own, many times: each gets its own values (the
    program's scratch, results and host steps' arrays are not shared between calls)."""
    def f(x, w):
        y = host_cumlogsumexp(jnp.tanh(x @ w), 1)
        return lax.fori_loop(0, 3, lambda i, c: c * 0.5 + y, y).sum(0)

    w = RNG.random((6, 6), np.float32)
    inputs = [RNG.standard_normal((5, 6)).astype(np.float32) for _ in range(4)]
    cpu, ref = cpu_and_reference(f, inputs[0], w)
    assert cpu.runs_as == "one native call, calling back into Python for pure_callback"
    expected = [ref.run(x, w)[0] for x in inputs]
    failures = []

    def work(k):
        for _ in range(50):
            got = cpu.run(inputs[k], w)[0]
            if not np.allclose(got, expected[k], rtol=1e-5, atol=1e-5):
                failures.append((k, got))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:2]


def test_jit_with_the_cpu_backend():
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    closed = nbjax.make_jaxpr(nbjax.jit(lambda x: jnp.exp(x) * 2.0))(x)
    out = compile(closed, "cpu", "outer").run(x)[0]  # the inner jit is inlined
    assert_close(out, np.exp(x) * 2, rtol=1e-6)


ZERO_D_RESULTS = {
    "dot": lambda v: jnp.dot(v, v),
    "vdot": lambda v: jnp.vdot(v, v),
    "inner": lambda v: jnp.inner(v, v),
    "einsum": lambda v: jnp.einsum("i,i->", v, v),
    "argmax": jnp.argmax,
    "digamma": lambda v: nbjax.scipy.special.digamma(v[1]),
    "erf_inv": lambda v: lax.erf_inv(v[0] / 4.0),
    "gamma": lambda v: nbjax.random.gamma(nbjax.random.PRNGKey(0), v[1]),
}


@pytest.mark.parametrize("name", list(ZERO_D_RESULTS))
def test_library_steps_with_0d_results_keep_their_shape(name):
    """Library and fallback steps returning 0-d arrays (np.ascontiguousarray makes them 1-d)."""
    import nbjax.random  # noqa: F401
    import nbjax.scipy.special  # noqa: F401
    f = ZERO_D_RESULTS[name]
    v = jnp.array([1.0, 2.5, 3.0], jnp.float32)
    eager = f(v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jitted = nbjax.jit(f)(v)
    assert jitted.shape == eager.shape == () and jitted.dtype == eager.dtype
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("where", ["top level", "in a loop"])
def test_fallback_warning_points_at_the_users_call(where):
    def top(x):
        return lax.zeta(x, x)

    def loop(x):
        return lax.scan(lambda c, _: (lax.zeta(c, c), None), x, None, length=3)[0]
    f = nbjax.jit(top if where == "top level" else loop)
    with pytest.warns(UserWarning, match="no kernel for zeta") as record:
        f(np.full(3, 2.5, np.float32))
    assert record[0].filename == __file__


def test_timing_a_native_program_times_its_steps_inside_the_call():
    """With timing on, a program that is one native call stays one (the steps' Python
    runners are not used): the call adds each step's time to an array, a loop's whole run
    in its step; the values are those of the untimed call."""
    def f(x, w):
        y = jnp.tanh(x @ w)
        y = lax.fori_loop(0, 50, lambda i, c: jnp.tanh(c @ w) * 0.5 + y, y)
        return y.sum(0), (x * 2.0).sum()

    x = RNG.standard_normal((48, 48)).astype(np.float32)
    w = (x.T * 0.1).astype(np.float32)
    cpu, _ = cpu_and_reference(f, x, w)
    assert cpu.runs_as == "one native call"
    untimed = cpu.run(x, w)
    cpu.enable_timing()
    cpu._steps = None  # the step-by-step runner would fail
    start = time.perf_counter()
    timed = cpu.run(x, w)
    wall = time.perf_counter() - start
    for a, b in zip(untimed, timed):
        np.testing.assert_array_equal(a, b)
    kinds = [g.kind for g in cpu.plan.groups]
    assert sorted(cpu.step_times) == list(range(len(kinds)))
    seconds = [samples[-1] for _, samples in sorted(cpu.step_times.items())]
    assert all(s >= 0 for s in seconds) and sum(seconds) <= wall
    loop = kinds.index("loop")
    assert seconds[loop] == max(seconds) > 0   # 50 products and tanh against single kernels
    cpu.run(x, w)
    assert all(len(samples) == 2 for samples in cpu.step_times.values())


def test_large_kernels_inside_native_loops_run_on_every_core(monkeypatch):
    """A kernel in a loop body that is large enough to split (here: the threshold lowered)
    runs on the worker pool from inside the native loop, reductions over its outer axis in
    pieces whose partial results are combined in order (without a pool: through Python's
    worker threads); the values are the reference's, the same at every run."""
    monkeypatch.setattr(runtime, "SPLIT_THRESHOLD", 256)
    monkeypatch.setattr(runtime, "POOL_SPLIT_WORK", 256)
    monkeypatch.setattr(runtime, "THREADS", 2)

    def f(u):
        def step(i, carry):
            u, total = carry
            u = jnp.tanh(u * 0.9 + jnp.roll(u, 1, 0) * 0.1)
            return u, total + u.sum(0) + jnp.abs(u).max()
        return lax.fori_loop(0, 6, step, (u, jnp.zeros(u.shape[1], u.dtype)))

    u = RNG.standard_normal((48, 40)).astype(np.float32)
    cpu, ref = cpu_and_reference(f, u)
    splits = [call for call in cpu.layout.host_calls if isinstance(call, SplitCall)]
    if workers.supported():
        assert not splits and "in 2 pieces whose partial results are combined" in \
            cpu.plan.report()
    else:
        assert splits and any(call.partials and call.combiner for call in splits)
    assert "calling back" not in cpu.runs_as
    first = cpu.run(u)
    for got, again, want in zip(first, cpu.run(u), ref.run(u)):
        assert_close(got, want, rtol=1e-5, scale=float(np.abs(want).max()))
        np.testing.assert_array_equal(got, again)

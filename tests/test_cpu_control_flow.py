"""Control flow compiled by the CPU backend: scan, while (and fori_loop, which is one of
them) and cond/switch whose sub-jaxprs are kernels run as native loops and branches; each
program is compared with the reference backend."""

import re
import threading
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from helpers import assert_close, cpu_and_reference, host_cumlogsumexp

RNG = np.random.default_rng(0)


def _run_both(f, *args, rtol=1e-6):
    """The CPU executable of ``f`` and its results, checked against the reference backend
    (same shapes, dtypes and values), with warnings turned into errors: nothing falls back."""
    cpu, ref = cpu_and_reference(f, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = cpu.run(*args)
    refs = ref.run(*args)
    assert len(outs) == len(refs)
    for a, b in zip(outs, refs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
    return cpu, outs


def _loop_decisions(executable, primitive):
    return [d for d in executable.plan.decisions if d.eqn.primitive.name == primitive]


def _assert_native(executable, primitive, what):
    [decision] = _loop_decisions(executable, primitive)
    assert executable.plan.groups[decision.group].kind == "loop"
    assert what in decision.reason, decision.reason


X = RNG.standard_normal((5, 4)).astype(np.float32)


# --- scan and fori_loop --------------------------------------------------------------------

def test_fori_loop_is_one_native_loop_step():
    def f(x):
        return lax.fori_loop(0, 1000, lambda i, v: v * 0.999 + jnp.sin(v) * 1e-3 + i * 1e-6, x)
    cpu, _ = _run_both(f, X, rtol=1e-5)
    _assert_native(cpu, "scan", "scan compiled as a native loop: body of")
    cpu.enable_timing()
    cpu.run(X)
    # one Python step for the whole loop, run once, not once per iteration
    assert [len(t) for t in cpu.step_times.values()] == [1] * len(cpu.plan.groups)
    assert "control_0" in cpu.jit_module.optimised_ir


def test_fori_loop_with_traced_bounds_is_a_native_while():
    def f(x, n):
        return lax.fori_loop(n // 2, n, lambda i, v: v + i.astype(jnp.float32) * v, x)
    for n in (0, 3, 8, -2):  # no iteration, an odd and an even number of them
        cpu, _ = _run_both(f, X[0], np.int32(n))
    _assert_native(cpu, "while", "while compiled as a native loop: cond of 1 kernel and body")


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_carries_xs_and_ys(reverse):
    def step(carry, x):
        total, count = carry
        return (total + x.sum(), count + 1), (total * x[0], x[::-1] * count)
    def f(xs, init):
        return lax.scan(step, (init, jnp.int32(0)), xs, reverse=reverse)
    xs = RNG.standard_normal((7, 3)).astype(np.float32)
    cpu, outs = _run_both(f, xs, np.float32(0.5), rtol=1e-5)
    _assert_native(cpu, "scan", "native loop")
    assert outs[1] == 7 and outs[2].shape == (7,) and outs[3].shape == (7, 3)


@pytest.mark.parametrize("length", [0, 1, 2, 5])
def test_scan_lengths_including_zero(length):
    xs = RNG.standard_normal((length, 2, 3)).astype(np.float32)
    cpu, outs = _run_both(lambda xs: lax.scan(lambda c, x: (c * 2 + x, c.T + 1.0),
                                              jnp.ones((2, 3)), xs), xs)
    _assert_native(cpu, "scan", "native loop")
    assert outs[1].shape == (length, 3, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8, np.uint8,
                                   np.bool_])
def test_loops_over_dtypes(dtype):
    xs = (RNG.standard_normal((6, 5)) * 4).astype(dtype)

    def f(xs):
        def body(c, x):
            if dtype == np.bool_:
                return c ^ x, c & x
            # a reduction in the body: float16 sums accumulate in a wider dtype
            return jnp.maximum(c, x) + (x.sum() > 0).astype(dtype), jnp.minimum(c, x).sum()
        return lax.scan(body, xs[0], xs)
    cpu, _ = _run_both(f, xs, rtol=2e-3 if dtype == np.float16 else 1e-6)
    _assert_native(cpu, "scan", "native loop")


def test_float64_loop(x64):
    x = RNG.standard_normal(8)
    cpu, _ = _run_both(lambda x: lax.fori_loop(0, 50, lambda i, v: jnp.cos(v) + i, x), x)
    _assert_native(cpu, "scan", "native loop")


def test_carries_passed_through_swapped_duplicated_and_constant():
    def body(carry, x):
        a, b, c, d = carry
        return (b, a, a + x, 3.0), (a, a, x)  # swap, pass through, duplicate, a literal
    def f(xs):
        return lax.scan(body, (xs[0], xs[1], xs[2], xs[3, 0]), xs)
    xs = RNG.standard_normal((5, 4)).astype(np.float32)
    cpu, _ = _run_both(f, xs)
    _assert_native(cpu, "scan", "native loop")


def test_body_reading_closed_over_arrays_and_non_contiguous_inputs():
    w = RNG.standard_normal((4,)).astype(np.float32)
    xs = RNG.standard_normal((4, 12)).astype(np.float32)[:, ::3].T  # (4, 4), strided
    cpu, _ = _run_both(lambda xs: lax.scan(lambda c, x: (c * w + x, jnp.sum(c * x)),
                                           jnp.zeros(4), xs), xs, rtol=1e-5)
    _assert_native(cpu, "scan", "native loop")


def test_gradient_of_a_scan_compiles_its_loops():
    def loss(w, xs):
        _, ys = lax.scan(lambda c, x: (jnp.tanh(c * w + x), c * c), jnp.zeros(3), xs)
        return ys.sum()
    xs = RNG.standard_normal((6, 3)).astype(np.float32)
    cpu, _ = _run_both(nbjax.grad(loss), np.float32(0.7), xs, rtol=1e-5)
    assert all(g.kind != "fallback" for g in cpu.plan.groups)


# --- while ---------------------------------------------------------------------------------

@pytest.mark.parametrize("start", [0.1, 1.0, 3.0, 200.0])
def test_while_with_a_data_dependent_trip_count(start):
    def f(x):
        return lax.while_loop(lambda c: c[0].sum() < 100.0,
                              lambda c: (c[0] * 2.0 + 1.0, c[1] + 1), (x, jnp.int32(0)))
    x = np.full((3,), start, np.float32)
    cpu, (_, count) = _run_both(f, x)
    _assert_native(cpu, "while", "native loop")
    expected, v = 0, x.astype(np.float64)
    while v.sum() < 100.0:
        v, expected = v * 2.0 + 1.0, expected + 1
    assert count == expected


def test_vmap_of_while_with_a_batched_predicate():
    def f(x):
        return lax.while_loop(lambda v: v < 10.0, lambda v: v * 1.5 + 1.0, x)
    x = np.float32([0.0, 3.0, 9.5, 12.0])
    cpu, _ = _run_both(nbjax.vmap(f), x)
    _assert_native(cpu, "while", "native loop")


# --- cond and switch -----------------------------------------------------------------------

@pytest.mark.parametrize("index", [-4, 0, 1, 2, 9])
def test_switch_clamps_its_index(index):
    branches = [lambda v: v + 1.0, lambda v: jnp.exp(v) * 2.0, lambda v: -v.sum() + v]
    cpu, _ = _run_both(lambda i, x: lax.switch(i, branches, x), np.int32(index), X)
    _assert_native(cpu, "cond", "native branch between 3 branches")


@pytest.mark.parametrize("pred", [False, True])
def test_cond_with_branches_passing_operands_through(pred):
    def f(p, x, y):
        return lax.cond(p, lambda a, b: (b, a), lambda a, b: (a * 2.0, b.sum()), x, y)
    cpu, _ = _run_both(f, np.bool_(pred), np.float32(1.5), np.float32(2.5))
    _assert_native(cpu, "cond", "native branch")


def test_control_flow_nested_in_a_loop_body():
    def f(xs):
        def body(c, x):
            c = lax.cond(x.sum() > 0, lambda v: v + x, lambda v: v - x, c)
            inner = lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, c)
            return c, inner
        return lax.scan(body, jnp.zeros(4), xs)
    xs = RNG.standard_normal((5, 4)).astype(np.float32)
    cpu, _ = _run_both(f, xs)
    _assert_native(cpu, "scan", "native loop")


def test_loops_and_branches_without_their_dead_results():
    """Dead code elimination drops the unused results of a scan, while and cond (and what
    computes them in their bodies, nested three deep); what remains compiles natively and
    computes what the reference backend does with everything."""
    def f(xs, y):
        def body(carry, x):
            a, b = carry
            def branch(v):
                inner = lax.fori_loop(0, 2, lambda i, w: (w[0] * 0.5, jnp.cos(w[1])), (v, v))
                return inner[0], jnp.exp(v)
            a, unused = lax.cond(x.sum() > 0, branch, lambda v: (v + x, v), a)
            return (a + b, b * 2.0), (jnp.sin(a), a * x)
        (a, _), (_, ys) = lax.scan(body, (y, y), xs)
        return a, lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + ys[0], c[2] * 2),
                                 (0, y, y))[1]
    cpu, _ = _run_both(f, X, X[0])
    _assert_native(cpu, "scan", "native loop")


# --- host steps: what a loop calls back into Python for ------------------------------------

def test_a_body_with_a_host_callback_calls_back_for_it():
    def f(xs, m):
        return lax.scan(lambda c, x: (host_cumlogsumexp(c @ m + x, 0) * 0.1, c), jnp.zeros(3),
                        xs)
    xs = RNG.standard_normal((4, 3)).astype(np.float32)
    m = RNG.standard_normal((3, 3)).astype(np.float32)
    cpu, _ = _run_both(f, xs, m, rtol=1e-5)
    _assert_native(cpu, "scan", "1 native library call, 1 host step (pure_callback)")


def test_a_step_without_kernel_warns_once_and_runs_in_the_loop():
    xs = RNG.uniform(0.5, 3, (5, 3)).astype(np.float32)
    f = nbjax.jit(lambda xs: lax.scan(lambda c, x: (c + lax.zeta(x, x), c), jnp.zeros(3), xs))
    with pytest.warns(UserWarning, match="zeta; inside a compiled loop it calls back"):
        got = f(xs)
    expected = nbjax.jit(f.fun, backend="reference")(xs)
    for a, b in zip(got, expected):
        assert_close(np.asarray(a), np.asarray(b), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per step: the second call is quiet
        f(xs)


@pytest.mark.parametrize("error", [ValueError("boom"), KeyboardInterrupt()])
def test_an_exception_in_a_host_step_leaves_the_loop_and_is_raised(error):
    calls, failing = [], [True]

    def callback(v):
        calls.append(1)
        if failing[0] and len(calls) == 3:
            raise error
        return v + 1

    def f(x):
        def step(c, _):
            return nbjax.pure_callback(callback, nbjax.ShapeDtypeStruct((2,), np.float32),
                                       c), None
        return lax.scan(step, x, None, length=10)[0]
    # (an Exception comes out as JAX's runtime error, the callback's as its cause)
    expected = type(error) if isinstance(error, KeyboardInterrupt) else nbjax.errors.JaxRuntimeError
    with pytest.raises(expected) as raised:
        nbjax.jit(f)(np.zeros(2, np.float32))
    if expected is not type(error):
        assert raised.value.__cause__ is error
    assert len(calls) == 3  # the loop stopped at the failing step
    failing[0] = False  # the executable still works afterwards
    np.testing.assert_array_equal(nbjax.jit(f)(np.zeros(2, np.float32)), [10, 10])



def test_host_steps_failing_on_several_threads_at_once_raise_each_threads_own_error():
    """One program run by several threads at once (as pmap's devices run it), its host step
    failing in each at the same moment: every thread gets the exception its own call raised."""
    threads = 4
    together = threading.Barrier(threads)

    def callback(v):
        if v[0] < 0:
            return v
        together.wait(timeout=30)
        raise ValueError(f"thread {int(v[0])} failed")

    def f(x):
        def step(c, _):
            return nbjax.pure_callback(callback, nbjax.ShapeDtypeStruct((2,), np.float32),
                                       c), None
        return lax.scan(step, x, None, length=3)[0]
    program = nbjax.jit(f)
    program(np.full(2, -1, np.float32))  # compiled once, before the threads
    for attempt in range(10):
        raised = {}

        def work(k):
            try:
                program(np.full(2, k, np.float32))
            except Exception as e:  # noqa: BLE001  (what each thread saw is the result)
                raised[k] = e
        running = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for t in running:
            t.start()
        for t in running:
            t.join()
        assert {k: repr(e.__cause__) for k, e in raised.items()} == {
            k: repr(ValueError(f"thread {k} failed")) for k in range(threads)}, attempt


def test_a_small_kernel_that_a_loop_runs_many_times_is_vectorised():
    """A kernel under ``codegen.SMALL_KERNEL`` elements is compiled without vectorising
    (LLVM's time against a few microseconds), unless compiled loops run it often enough
    (``codegen.SMALL_RUN_WORK``, a scan's length counted): 1000 logistic-map steps on 2000
    elements ran 1.1 us an iteration in scalar code, 5x jax.jit. Two steps, or a kernel of
    too few elements to fill a vector, stay scalar."""
    r = np.linspace(2.5, 4.0, 2000).astype(np.float32)

    def logistic(steps):
        return lambda r: lax.fori_loop(0, steps, lambda i, x: r * x * (1 - x), r * 0 + 0.5)
    for steps, size, vectorised in ((1000, 2000, True), (2, 2000, False), (1000, 16, False)):
        cpu, _ = _run_both(logistic(steps), r[:size], rtol=2e-5)
        (body,) = [k.name for k in cpu.kernels if "body" in k.name]
        text = cpu.jit_module.function_ir(body)
        assert bool(re.search(r"<\d+ x float>", text)) == vectorised, (steps, size)

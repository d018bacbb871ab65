"""jit's ahead-of-time API (lower / compile / cost analysis / reports) and its fast dispatch
path for eager calls on arrays."""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.compiler import report
from nbjax.compiler.fusion import FusionDecision
from helpers import assert_close, random_array

rng = np.random.default_rng(7)


@pytest.fixture
def backend():
    """Run a test with a jit backend, restoring the configured one afterwards."""
    saved = nbjax.config.jit_backend

    def use(name):
        nbjax.config.update("jit_backend", name)
    yield use
    nbjax.config.update("jit_backend", saved)


# --- lower ---------------------------------------------------------------------------------

def test_lower_takes_numpy_arguments_as_their_types_and_compiles_the_same_program():
    """NumPy arguments of ``lower`` stand for their (canonical) types, as Arrays of them do
    (int64 becomes int32 unless x64 is on), and the compiled program computes the same."""
    def f(x, n):
        return x * 2.0 + n.astype(np.float32)
    x, n = random_array(rng, (4, 3)), np.arange(3, dtype=np.int64)
    from_numpy = nbjax.jit(f).lower(x, n)
    from_arrays = nbjax.jit(f).lower(jnp.asarray(x), jnp.asarray(n))
    assert from_numpy.in_avals == from_arrays.in_avals
    assert [a.dtype for a in from_numpy.in_avals] == [np.float32, np.int32]
    assert str(from_numpy.jaxpr) == str(from_arrays.jaxpr)
    assert_close(from_numpy.compile()(x, n), x * 2.0 + n.astype(np.float32))


def test_lower_shows_the_optimised_jaxpr_and_its_rewrites():
    inner = nbjax.jit(lambda x: x * 1.0)

    @nbjax.jit
    def f(x, y):
        return {"out": inner(x) + y * 0.0 + y}

    x, y = random_array(rng, (3,)), random_array(rng, (3,))
    lowered = f.lower(x, y)
    assert [e.primitive.name for e in lowered.jaxpr.eqns][0] == "jit"  # as traced
    text = lowered.as_text()
    assert str(lowered.optimized) in text
    # Inlined and simplified: no call, no multiplication by 1 left.
    assert "jit[" not in str(lowered.optimized)
    assert "mul" not in [e.primitive.name for e in lowered.optimized.eqns
                         if any(getattr(a, "val", None) == 1.0 for a in e.invars)]
    assert lowered.rewrites and "rewrites" in text
    assert all(f"{r}" in text for r in lowered.rewrites)
    assert lowered.in_tree == nbjax.tree_util.tree_structure(((x, y), {}))  # (a tuple, as JAX)
    assert lowered.out_tree == nbjax.tree_util.tree_structure({"out": x})
    assert [a.shape for a in lowered.in_avals] == [(3,), (3,)]
    assert f.trace_count == 1
    f(x, y)  # the jitted call reuses the trace made by lower
    assert f.trace_count == 1


def test_lower_accepts_shape_dtype_structs_and_static_args():
    f = nbjax.jit(lambda x, n: x * n, static_argnums=1)
    lowered = f.lower(nbjax.ShapeDtypeStruct((2, 3), np.float32), 4)
    assert str(lowered.jaxpr.in_avals[0]) == "float32[2,3]"
    compiled = lowered.compile()
    x = random_array(rng, (2, 3))
    assert_close(compiled(x), x * 4, rtol=1e-6)  # static args are not passed
    with pytest.raises(TypeError, match="pytree"):
        compiled(x, 4)


# --- compile: text, fusion report, compile times -------------------------------------------

def test_trace_stage_knows_the_program_and_lowers_to_the_same_compiled_program():
    f = nbjax.jit(lambda x, y, scale: ({"p": x * y * scale}, x.sum()), static_argnums=2,
                  donate_argnums=0)
    x = random_array(rng, (3, 4), np.float32)
    traced = f.trace(x, 2.0, 3)
    assert isinstance(traced, nbjax.stages.Traced) and isinstance(f, nbjax.stages.Wrapped)
    assert traced.fun_name == "<lambda>" and str(traced.jaxpr) == str(f.lower(x, 2.0, 3).jaxpr)
    args, kwargs = traced.args_info
    assert kwargs == {} and [(a.shape, a.dtype, a.donated) for a in args] == \
        [((3, 4), np.float32, True), ((), np.float32, False)]
    out = traced.out_info
    assert (out[0]["p"].shape, out[0]["p"].dtype, out[1].shape) == ((3, 4), np.float32, ())
    compiled = traced.lower().compile()
    assert isinstance(compiled, nbjax.stages.Compiled)
    assert compiled.out_info[0]["p"].shape == (3, 4) and compiled.in_tree == traced.in_tree
    assert [a.donated for a in compiled.args_info[0]] == [True, False]
    result = compiled(x.copy(), 2.0)
    assert_close(result[0]["p"], x * 6.0)
    assert_close(result[1], x.sum())


def test_compiled_text_names_kernels_with_their_llvm_ir(empty_disk_cache):
    @nbjax.jit
    def f(x, a, b):
        h = jnp.tanh(x @ a)
        return (h * 2.0 + 1.0).sum(axis=1), h @ b

    x, a, b = random_array(rng, (4, 5)), random_array(rng, (5, 6)), random_array(rng, (6, 2))
    compiled = f.lower(x, a, b).compile("cpu")
    text = compiled.as_text()
    exe = compiled.executable
    assert exe.kernels, "expected at least one fused kernel"
    for k in exe.kernels:
        assert f"== {k.name} ==" in text and k.texts["LLVM IR"] in text
    assert "define void" in text
    assert "dot_general is a BLAS call" in text
    assert "== cost ==" in text and "total" in text
    times = compiled.compile_times
    assert times["trace"] > 0 and {"passes", "fusion", "codegen"} <= set(times)


def test_fusion_report_as_text_and_data():
    f = nbjax.jit(lambda x: jnp.exp(x - x.max()) / 3.0)
    compiled = f.lower(random_array(rng, (4, 8))).compile("cpu")
    fusion = compiled.fusion_report()
    assert str(fusion) == fusion.text == compiled.executable.plan.report()
    optimised = compiled.executable.jaxpr.jaxpr
    assert len(fusion.decisions) == len(optimised.eqns)
    assert all(isinstance(d, FusionDecision) for d in fusion.decisions)
    assert [d.eqn for d in fusion.decisions] == list(optimised.eqns)
    assert {d.group for d in fusion.decisions} == {g.index for g in fusion.groups}
    assert any(d.started_new_group for d in fusion.decisions)
    assert all(d.reason and str(d) in fusion.text for d in fusion.decisions)


def test_reference_backend_compiles_without_kernels():
    f = nbjax.jit(lambda x, y: x * y + x)
    x, y = random_array(rng, (5,)), random_array(rng, (5,))
    compiled = f.lower(x, y).compile("reference")
    assert "no kernels" in compiled.as_text()
    assert "no kernels" in str(compiled.fusion_report())
    assert compiled.fusion_report().decisions == []
    assert_close(compiled(x, y), x * y + x, rtol=1e-6)
    with pytest.raises(ValueError, match="timing"):
        compiled.enable_timing()
    # an equation without operands (iota) has a cost too
    arange = nbjax.jit(lambda x: x + nbjax.lax.iota(np.float32, 5)).lower(x).compile(
        "reference")
    assert [c["name"] for c in arange.cost_analysis(per_step=True)] == ["iota", "add"]


# --- Compiled.__call__ ---------------------------------------------------------------------

def test_compiled_call_checks_argument_types():
    f = nbjax.jit(lambda x, p: {"y": x * p["w"] + p["b"]})
    x, w, b = random_array(rng, (3,)), random_array(rng, (3,)), np.float32(0.5)
    compiled = f.lower(x, {"w": w, "b": b}).compile()
    out = compiled(x, {"w": w, "b": b})
    assert_close(out["y"], x * w + b, rtol=1e-6)
    assert out["y"].dtype == np.float32
    with pytest.raises(TypeError,
                       match="compiled with float32\\[3\\] and called with float32\\[4\\]"):
        compiled(random_array(rng, (4,)), {"w": w, "b": b})
    with pytest.raises(TypeError, match="called with int32\\[3\\]"):
        compiled(np.arange(3, dtype=np.int32), {"w": w, "b": b})
    with pytest.raises(TypeError, match="pytree"):
        compiled(x, {"w": w})
    with pytest.raises(TypeError, match="pytree"):
        compiled((x,), {"w": w, "b": b})
    # A weakly typed Python scalar matches its strongly typed dtype, as in JAX.
    g = nbjax.jit(lambda s: s * 2).lower(np.float32(1.5)).compile()
    assert float(g(1.5)) == 3.0


def test_compiled_runs_closures_and_shares_the_jitted_executable():
    c = random_array(rng, (3,))
    f = nbjax.jit(lambda x: jnp.sin(x) * c)
    x = random_array(rng, (3,))
    compiled = f.lower(x).compile()
    assert_close(compiled(x), np.sin(x) * c, rtol=1e-6)
    assert f.lower(x).compile().executable is compiled.executable


# --- cost analysis -------------------------------------------------------------------------

def _cost(f, *args, backend="cpu"):
    return nbjax.jit(f).lower(*args).compile(backend).cost_analysis()


def test_cost_of_an_elementwise_kernel():
    x, y = random_array(rng, (1000,)), random_array(rng, (1000,))
    cost = _cost(lambda x, y: x * y + x, x, y)
    assert cost["flops"] == 2000 and cost["transcendentals"] == 0
    assert cost["bytes read"] == 8000 and cost["bytes written"] == 4000
    assert cost["bytes accessed"] == 12000
    # The reference backend runs the two equations separately: the product is written and
    # read back.
    ref = _cost(lambda x, y: x * y + x, x, y, backend="reference")
    assert ref["flops"] == 2000
    assert ref["bytes read"] == 8000 + 8000 and ref["bytes written"] == 4000 + 4000


def test_cost_conventions_follow_xla():
    x = random_array(rng, (1000,))
    # Transcendentals are counted apart (and not as flops); a reduction of n into 1: n - 1.
    cost = _cost(lambda x: jnp.exp(x).sum(), x)
    assert cost["transcendentals"] == 1000 and cost["flops"] == 999
    assert cost["bytes read"] == 4000 and cost["bytes written"] == 4
    # where = a compare and a select per element; floor is an ordinary flop.
    assert _cost(lambda x: jnp.where(x > 0, x, 0.0), x)["flops"] == 2000
    assert _cost(lambda x: jnp.floor(x), x)["flops"] == 1000
    # Row sums of 8x16: 8 * 15 additions.
    assert _cost(lambda a: a.sum(axis=1), random_array(rng, (8, 16)))["flops"] == 8 * 15
    # dot_general: 2*M*N*K.
    cost = _cost(lambda a, b: a @ b, random_array(rng, (8, 16)), random_array(rng, (16, 4)))
    assert cost["flops"] == 2 * 8 * 4 * 16
    assert cost["bytes read"] == (8 * 16 + 16 * 4) * 4 and cost["bytes written"] == 8 * 4 * 4
    # A convolution: 2 * output size * kernel elements feeding each output (one group's).
    for w_shape, groups in [((4, 3, 3, 2), 1), ((6, 1, 3, 2), 3)]:
        def conv(x, w):
            return nbjax.lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                                  feature_group_count=groups)
        out_size = 2 * w_shape[0] * 7 * 7  # batch 2, a 9x8 image, 3x2 kernel: 7x7 positions
        per_output = w_shape[1] * 3 * 2
        cost = _cost(conv, random_array(rng, (2, 3, 9, 8)), random_array(rng, w_shape))
        assert cost["flops"] == 2 * out_size * per_output


def test_cost_ignores_index_arithmetic_and_counts_values_once():
    x = random_array(rng, (1000,))
    # The pad's bounds checks are addressing, not flops: one multiply per output element.
    cost = _cost(lambda x: jnp.pad(x, 2) * 2.0, x)
    assert cost["flops"] == 1004
    assert cost["bytes read"] == 4000 and cost["bytes written"] == 1004 * 4
    # exp of a scalar broadcast over the loop is one exp, not 1000.
    cost = _cost(lambda x, s: x * jnp.exp(s), x, np.float32(0.5))
    assert cost["transcendentals"] == 1 and cost["flops"] == 1000


@pytest.mark.cpu_compiler
def test_cost_per_step_and_timing():
    f = nbjax.jit(lambda a, b: jnp.tanh(a @ b).sum())
    a, b = random_array(rng, (6, 5)), random_array(rng, (5, 7))
    compiled = f.lower(a, b).compile("cpu")
    steps = compiled.cost_analysis(per_step=True)
    assert [s["kind"] for s in steps] == ["library", "kernel"]
    assert steps[0]["name"] == "dot_general" and steps[0]["flops"] == 2 * 6 * 7 * 5
    assert steps[1]["transcendentals"] == 42 and steps[1]["flops"] == 41
    total = compiled.cost_analysis()
    assert total["flops"] == sum(s["flops"] for s in steps)
    compiled.enable_timing()
    try:
        compiled(a, b)
        f(a, b)  # jitted calls share the executable, so they are timed too
        timed = compiled.cost_analysis(per_step=True)
        assert all(s["seconds"] > 0 for s in timed)
        assert all(len(v) == 2 for v in compiled.step_times.values())
    finally:
        compiled.enable_timing(False)
    table = report.cost_table(report.step_costs(compiled.executable))
    assert "dot_general" in table and "total" in table


# --- the fast dispatch path ----------------------------------------------------------------

def _slow(f, *args):
    """The general path of a jitted call (what every call did before the fast path)."""
    return f._call(args, {})


FAST_CASES = [
    ("elementwise", lambda x, y: x * y + 1.0,
     lambda: (random_array(rng, (4,)), random_array(rng, (4,)))),
    ("pytree out", lambda x, y: {"s": (x + y).sum(), "p": (x * y, x - y)},
     lambda: (random_array(rng, (3, 2)), random_array(rng, (3, 2)))),
    ("reduction", lambda x: jnp.max(x, axis=0), lambda: (random_array(rng, (5, 3)),)),
    ("int and bool", lambda i, m: jnp.where(m, i * 3, -i), lambda: (
        rng.integers(-9, 9, size=6).astype(np.int32), rng.random(6) > 0.5)),
    ("float64 numpy input", lambda x: x * 2.0, lambda: (rng.standard_normal(4),)),
    ("constant output", lambda x: (x + 1.0, jnp.float32(3.0)), lambda: (random_array(rng, (2,)),)),
    ("no arguments", lambda: jnp.arange(3) * 2, lambda: ()),
    ("library step", lambda a, b: jnp.tanh(a @ b),
     lambda: (random_array(rng, (3, 4)), random_array(rng, (4, 2)))),
]


@pytest.mark.parametrize("name,fun,make", FAST_CASES, ids=[c[0] for c in FAST_CASES])
@pytest.mark.parametrize("jit_backend", ["cpu", "reference"])
def test_fast_path_matches_the_general_path(name, fun, make, jit_backend, backend):
    backend(jit_backend)
    f = nbjax.jit(fun)

    def arguments():  # Arrays, except a float64 NumPy array (canonicalised to float32)
        return tuple(a if a.dtype == np.float64 else jnp.asarray(a) for a in make())

    first = f(*arguments())  # general path; registers the fast path
    assert f.slow_path_calls == 1 and len(f._fast) == 1
    args = arguments()
    fast = f(*args)
    assert f.slow_path_calls == 1, "the second call should take the fast path"
    slow = _slow(f, *args)
    fast_leaves, fast_tree = nbjax.tree_util.tree_flatten(fast)
    slow_leaves, slow_tree = nbjax.tree_util.tree_flatten(slow)
    assert fast_tree == slow_tree == nbjax.tree_util.tree_structure(first)
    for a, b in zip(fast_leaves, slow_leaves):
        assert isinstance(a, nbjax.Array)
        assert a.aval == b.aval
        np.testing.assert_array_equal(a, b)


def test_dispatch_counts():
    f = nbjax.jit(lambda x, y: x * y)
    x, y = (nbjax.numpy.asarray(random_array(rng, (4,))) for _ in range(2))
    for _ in range(10):
        out = f(x, y)
    assert f.trace_count == 1 and f.slow_path_calls == 1 and len(f._fast) == 1
    assert_close(out, np.asarray(x) * np.asarray(y), rtol=1e-6)
    # NumPy arrays of the same shapes and dtypes: the last call's checked entry takes them
    # where the target has one (the cpu backend's); else another fast key, same trace
    shortcut = f._last_call[2] is not None
    f(random_array(rng, (4,)), random_array(rng, (4,)))
    f(random_array(rng, (4,)), random_array(rng, (4,)))
    extra = 0 if shortcut else 1
    assert f.trace_count == 1 and f.slow_path_calls == 1 + extra and len(f._fast) == 1 + extra
    # of another shape: another fast key, a new trace
    f(random_array(rng, (3,)), random_array(rng, (3,)))
    f(random_array(rng, (3,)), random_array(rng, (3,)))
    assert f.trace_count == 2 and f.slow_path_calls == 2 + extra
    assert len(f._fast) == 2 + extra
    f(x, 2.0)  # a Python scalar: a new trace, then the fast path too
    f(x, 2.0)
    assert f.trace_count == 3 and f.slow_path_calls == 3 + extra
    f(x, y=y)  # keywords: the general path (a new argument structure: a new trace)
    assert f.slow_path_calls == 4 + extra and f.trace_count == 4
    g = nbjax.jit(lambda x, n: x * n, static_argnums=1)
    g(x, 2)
    g(x, 2)
    assert g.slow_path_calls == 2 and g.trace_count == 1 and not g._fast
    f.clear_cache()
    f(x, y)
    assert f.trace_count == 5 and f.slow_path_calls == 5 + extra


@pytest.mark.parametrize("jit_backend", ["cpu", "reference"])
def test_scalar_arguments_take_the_fast_path_as_the_general_path_would(jit_backend, backend):
    """Python and NumPy scalars (a step size, a count) take the fast path from a
    signature's second call, converted to their avals' dtypes (a Python float is a weakly
    typed float32, a NumPy float64 is float32 without x64): the results are the general
    path's, and a Python int the default int cannot hold is still its OverflowError."""
    backend(jit_backend)
    f = nbjax.jit(lambda x, a, n: (x * a + n, a * 2))
    x = jnp.asarray(random_array(rng, (3,)))
    for a, n in [(0.1, 3), (np.float32(0.25), np.int32(-2)), (True, 2.5), (1 + 2j, False),
                 (np.float16(1.5), 7)]:
        before = f.slow_path_calls
        first, again = f(x, a, n), f(x, a, n)
        assert f.slow_path_calls == before + 1, "the second call should take the fast path"
        for got, want in zip(nbjax.tree_util.tree_leaves(again), _slow(f, x, a, n)):
            assert got.aval == want.aval
            np.testing.assert_array_equal(got, want)
        assert [o.aval for o in first] == [o.aval for o in again]
    for _ in range(2):
        with pytest.raises(OverflowError):
            f(x, 0.5, 2 ** 40)
        assert np.asarray(f(x, np.float64(0.5), 1)[1]).dtype == np.float32


def test_fast_path_not_taken_under_transformations():
    f = nbjax.jit(lambda x: jnp.sin(x) * x)
    x = random_array(rng, (5,))
    f(x)
    f(x)
    assert f.slow_path_calls == 1
    df = nbjax.grad(lambda v: f(v).sum())(x)
    assert_close(df, np.cos(x) * x + np.sin(x), rtol=1e-5)
    assert f.slow_path_calls == 2
    assert_close(nbjax.vmap(f)(x[:, None])[:, 0], np.sin(x) * x, rtol=1e-6)
    closed = nbjax.make_jaxpr(f)(x)
    assert closed.eqns[0].primitive.name == "jit"
    assert f.slow_path_calls == 4 and f.trace_count == 2  # vmap of a [5, 1] input traced anew


def test_config_changes_are_part_of_the_fast_key(backend):
    f = nbjax.jit(lambda x: x + 1)
    x = nbjax.numpy.asarray(random_array(rng, (3,)))
    backend("cpu")
    f(x)
    f(x)
    assert f.slow_path_calls == 1
    backend("reference")
    assert_close(f(x), np.asarray(x) + 1, rtol=1e-6)
    assert f.slow_path_calls == 2
    assert "reference" in f.lower(x).jaxpr.executables


def test_retrace_explanation_counts_fast_calls(caplog):
    f = nbjax.jit(lambda x: x * 2)
    a2, b3, c4 = (nbjax.numpy.asarray(np.ones(n, np.float32)) for n in (2, 3, 4))
    nbjax.config.update("explain_cache_misses", True)
    try:
        with caplog.at_level(logging.WARNING, logger="nbjax"):
            f(a2)
            f(b3)
            f(a2)  # fast: still the last call a later miss is compared with
            f(c4)
    finally:
        nbjax.config.update("explain_cache_misses", False)
    messages = [r.getMessage() for r in caplog.records]
    assert "changed type from float32[2] to float32[4]" in messages[-1]


def test_results_are_not_overwritten_by_later_calls():
    f = nbjax.jit(lambda x: x * 2.0)
    g = nbjax.jit(lambda x: x.sum(axis=0))  # a reduction: its buffer is filled before the run
    x, y = random_array(rng, (4, 3)), random_array(rng, (4, 3))
    for fun, expect in ((f, lambda v: v * 2), (g, lambda v: v.sum(axis=0))):
        kept = fun(x)
        view = np.asarray(fun(x))[1:]   # only a view of the result survives
        for _ in range(3):
            fun(y)
        assert_close(kept, expect(x), rtol=1e-6)
        assert_close(view, expect(x)[1:], rtol=1e-6)
        with pytest.raises(ValueError):
            np.asarray(kept)[0] = 0  # results stay read-only, even reused buffers
        dropped = [fun(v) for v in (x, y)]
        assert_close(dropped[0], expect(x), rtol=1e-6)
        assert_close(dropped[1], expect(y), rtol=1e-6)


def test_fast_path_from_several_threads():
    f = nbjax.jit(lambda x: jnp.sqrt(x * x + 1.0).sum(axis=-1))
    inputs = [random_array(rng, (8, 3)) for _ in range(16)]
    expected = [np.sqrt(v * v + 1).sum(axis=-1) for v in inputs]
    f(inputs[0])
    barrier = threading.Barrier(2)

    def work(offset):
        barrier.wait()
        outs = [(i, f(inputs[i])) for _ in range(25) for i in range(offset, 16, 2)]
        return all(np.allclose(o, expected[i], rtol=1e-5) for i, o in outs)

    with ThreadPoolExecutor(2) as pool:
        assert all(pool.map(work, [0, 1]))

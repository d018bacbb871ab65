"""The compiler's pipeline over targets: explicit targets for jit and pmap, the registry,
the Executable's declared interface and jit's observer hook."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import backends, compiler, lax
from nbjax.backends.gpu import GpuUnavailable
from nbjax.backends.reference import ReferenceExecutable
from nbjax.compiler import Executable, Target
from helpers import assert_close

RNG = np.random.default_rng(7)


def _f(x, w):
    return jnp.tanh(x @ w).sum(axis=1) * 2.0 + 1.0


def _args():
    return (RNG.standard_normal((5, 4)).astype(np.float32),
            RNG.standard_normal((4, 3)).astype(np.float32))


class _option:
    """Set a config option for the block."""

    def __init__(self, name, value):
        self.name, self.value = name, value

    def __enter__(self):
        self.previous = getattr(nbjax.config, self.name)
        nbjax.config.update(self.name, self.value)

    def __exit__(self, *exc):
        nbjax.config.update(self.name, self.previous)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_jit_backend_is_explicit_and_overrides_the_option(backend):
    x, w = _args()
    other = {"cpu": "reference", "reference": "cpu"}[backend]
    f = nbjax.jit(_f, backend=backend)
    with _option("jit_backend", other):
        out = f(x, w)
        compiled = f.lower(x, w).compile()
    assert compiled.executable.target == backend
    assert_close(out, np.tanh(x @ w).sum(axis=1) * 2 + 1, rtol=1e-5)


def test_the_option_supplies_the_default_when_called():
    x, w = _args()
    f = nbjax.jit(_f)
    with _option("jit_backend", "reference"):
        assert f.lower(x, w).compile().executable.target == "reference"
    with _option("jit_backend", "cpu"):
        assert f.lower(x, w).compile().executable.target == "cpu"


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown backend 'tpu'.*cpu.*reference"):
        nbjax.jit(_f, backend="tpu")
    with pytest.raises(ValueError, match="unknown backend"):
        backends.get_target("tpu")


def test_pmap_takes_a_backend():
    x = RNG.standard_normal((1, 6)).astype(np.float32)
    for backend in ("cpu", "reference"):
        out = nbjax.pmap(lambda v: lax.psum(jnp.exp(v), "i"), "i", backend=backend)(x)
        assert_close(out, np.exp(x), rtol=1e-6)


def test_the_executable_interface_is_the_same_for_every_target():
    x, w = _args()
    closed = nbjax.make_jaxpr(_f)(x, w)
    for name in backends.target_names():
        try:
            exe = backends.compile(closed, name, "f")
        except GpuUnavailable:
            continue  # no GPU here (tests/test_gpu_codegen.py checks the error)
        assert isinstance(exe, Executable) and exe.target == name and exe.name == "f"
        assert isinstance(exe.kernels, list) and isinstance(exe.compile_times, dict)
        assert exe.step_times is None
        for kernel in exe.kernels:
            assert kernel.texts and all(isinstance(t, str) for t in kernel.texts.values())
        assert_close(exe.run(x, w)[0], np.tanh(x @ w).sum(axis=1) * 2 + 1, rtol=1e-5)
    assert isinstance(backends.compile(closed, "reference"), ReferenceExecutable)
    with pytest.raises(ValueError, match="no per-step timing"):
        backends.compile(closed, "reference").enable_timing()


def test_a_registered_target_gets_the_plan_and_names_its_library_calls(monkeypatch):
    """A new target is a Target subclass: the pipeline optimises and plans for it, asks it
    which library calls it makes, and hands it the plan to lower."""
    seen = {}

    class Counting(Target):
        name = "counting"

        def library_reason(self, eqn):
            kind = eqn.primitive.lowerings.get("library")
            return None if kind is None else f"{eqn.primitive.name} is a {kind} (counted)"

        def lower(self, name, jaxpr, plan, rewrites, timer):
            seen["plan"] = plan
            reference = backends.get_target("reference")
            exe = reference.lower(name, jaxpr, None, rewrites, timer)
            exe.target, exe.plan = self.name, plan
            return exe

    monkeypatch.setattr(backends, "_TARGETS", dict(backends._TARGETS))  # forgotten after
    backends.register_target(Counting())
    x, w = _args()
    f = nbjax.jit(_f, backend="counting")
    assert_close(f(x, w), np.tanh(x @ w).sum(axis=1) * 2 + 1, rtol=1e-5)
    reasons = [d.reason for d in seen["plan"].decisions]
    assert any("dot_general is a matrix product (counted)" in r for r in reasons)
    assert "counting" in backends.target_names()


def test_control_flow_is_compiled_only_where_the_target_says_so():
    """A target lists the control-flow primitives it compiles; others (a new control
    primitive, or one the target has not learnt) plan as reference steps."""
    def loops(x):
        y = lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0, x)
        return lax.cond(y.sum() > 0, lambda v: v + 1.0, lambda v: v - 1.0, y)

    class OnlyWhile(backends.get_target("cpu").__class__):
        name = "only-while"
        control_flow = frozenset({lax.while_p})

    closed = nbjax.make_jaxpr(loops)(np.ones(4, np.float32))
    optimised = compiler.optimized(closed)[0]
    kinds = {g.eqns[0].primitive.name: g.kind for g in
             compiler.plan(optimised.jaxpr, OnlyWhile()).groups if g.kind != "kernel"}
    assert kinds == {"while": "loop", "cond": "fallback"}
    kinds = {g.eqns[0].primitive.name: g.kind for g in
             compiler.plan(optimised.jaxpr, backends.get_target("cpu")).groups
             if g.kind != "kernel"}
    assert kinds == {"while": "loop", "cond": "loop"}


def test_lower_then_compile_optimises_once(monkeypatch, empty_disk_cache):
    calls = []
    optimize = compiler.optimize
    monkeypatch.setattr(compiler, "optimize", lambda c: calls.append(c) or optimize(c))
    x, w = _args()
    compiled = nbjax.jit(lambda x, w: _f(x, w) * 3.0).lower(x, w).compile("cpu")
    assert len(calls) == 1 and "passes" in compiled.compile_times


def test_observers_see_each_eager_call_with_its_trace_executable_and_timing():
    x, w = _args()

    def f(x, w):  # a function of its own: jit's trace cache is shared by every jit of _f
        return _f(x, w)
    f = nbjax.jit(f)
    calls, phases = [], []
    stop = f.observe(calls.append, phases.append)
    f(x, w)
    f(x, w)
    f(x[:2], w)
    assert [c.compile_seconds is None for c in calls] == [False, True, False]
    assert phases == ["tracing", "compiling"] * 2  # the first and third calls
    first = calls[0]
    assert first.function is f and first.executable.target == nbjax.config.jit_backend
    assert first.trace_seconds > 0 and first.seconds > 0
    assert first.describe_signature() == "f32[5,4], f32[4,3]"
    assert calls[2].describe_signature() == "f32[2,4], f32[4,3]"
    static = nbjax.jit(lambda field, x, n_steps: field(x) * n_steps, static_argnums=(0, 2))
    static_calls = []
    static.observe(static_calls.append)
    static(nbjax.numpy.sin, x, 3)
    assert static_calls[0].describe_signature() == "f32[5,4], field=sin, n_steps=3"
    if first.executable.timing_supported:
        steps = first.executable.plan.groups
        assert sorted(first.step_seconds) == list(range(len(steps)))
    nbjax.grad(lambda x: f(x, w).sum())(x)  # under a transformation: not observed
    assert len(calls) == 3
    stop()
    f(x, w)
    assert len(calls) == 3

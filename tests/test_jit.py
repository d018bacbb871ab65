"""jit with the reference backend: caching and retracing, static arguments, pytrees, closures,
and every transformation through jit (the compiler backends plug in behind it)."""

import logging

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.test_util import check_grads
from helpers import assert_close, random_array

rng = np.random.default_rng(2)


def test_jit_matches_eager_and_caches_per_signature():
    calls = []

    @nbjax.jit
    def f(x, y):
        calls.append(1)
        return {"s": jnp.sin(x) * y, "t": (x + y,)}

    x, y = random_array(rng, (3,)), random_array(rng, (3,))
    out = f(x, y)
    assert_close(out["s"], np.sin(x) * y, rtol=1e-6)
    assert_close(out["t"][0], x + y, rtol=1e-6)
    f(random_array(rng, (3,)), random_array(rng, (3,)))
    assert len(calls) == 1 and f.trace_count == 1
    f(random_array(rng, (4,)), random_array(rng, (4,)))
    assert f.trace_count == 2
    f(np.float32(1.0), 2.0)  # weak-typed Python float: a different signature
    assert f.trace_count == 3


def test_static_args_and_errors():
    f = nbjax.jit(lambda x, n: x * n, static_argnums=1)
    assert_close(f(random_array(rng, (2,)) * 0 + 1, 3), [3, 3])
    f(np.ones(2, np.float32), 3)
    assert f.trace_count == 1
    f(np.ones(2, np.float32), 4)
    assert f.trace_count == 2
    g = nbjax.jit(lambda x, *, mode: x * 2 if mode == "double" else x, static_argnames="mode")
    assert_close(g(np.ones(2, np.float32), mode="double"), [2, 2])
    with pytest.raises(ValueError, match="Non-hashable static"):
        f(np.ones(2, np.float32), [1])

    def branchy(x):
        if x > 0:
            return x
        return -x
    with pytest.raises(nbjax.ConcretizationTypeError, match="static_argnums"):
        nbjax.jit(branchy)(1.0)
    with pytest.raises(TypeError, match="callable"):
        nbjax.jit(3)


def test_retrace_reason_is_reported(caplog):
    f = nbjax.jit(lambda x, n: x * n, static_argnums=1)
    nbjax.config.update("explain_cache_misses", True)
    try:
        with caplog.at_level(logging.WARNING, logger="nbjax"):
            f(np.ones(2, np.float32), 1)
            f(np.ones(3, np.float32), 1)
            f(np.ones(3, np.float32), 2)
    finally:
        nbjax.config.update("explain_cache_misses", False)
    messages = [r.getMessage() for r in caplog.records]
    assert any("changed type from float32[2] to float32[3]" in m for m in messages)
    assert any("static argument 1 changed from 1 to 2" in m for m in messages)


def test_closures_over_arrays_and_tracers():
    c = random_array(rng, (3,))
    f = nbjax.jit(lambda x: x * c)
    assert_close(f(np.ones(3, np.float32)), c)

    def outer(y):
        return nbjax.jit(lambda x: x * y)(np.float32(2.0))
    assert float(nbjax.grad(outer)(np.float32(3.0))) == 2.0


def test_jit_of_jit_and_decorator_with_options():
    inner = nbjax.jit(lambda x: jnp.cos(x) + 1.0)

    @nbjax.jit
    def outer(x):
        return inner(x) * 2.0
    x = random_array(rng, (4,))
    assert_close(outer(x), (np.cos(x) + 1) * 2, rtol=1e-6)
    closed = nbjax.make_jaxpr(outer)(x)
    assert closed.eqns[0].primitive.name == "jit"
    inner_eqns = closed.eqns[0].params["jaxpr"].eqns
    assert inner_eqns[0].primitive.name == "jit"

    @nbjax.jit(static_argnums=0)
    def power(n, x):
        return x ** n
    assert_close(power(3, x), x ** 3, rtol=1e-5)


def test_transformations_through_jit():
    f = nbjax.jit(lambda x: jnp.sin(x) * x)
    x = random_array(rng, (5,))
    df = lambda v: np.cos(v) * v + np.sin(v)
    assert_close(nbjax.vmap(nbjax.grad(f))(x), df(x), rtol=1e-5)
    assert_close(nbjax.grad(lambda v: f(v).sum())(x), df(x), rtol=1e-5)
    assert_close(nbjax.jit(nbjax.grad(lambda v: f(v).sum()))(x), df(x),
                 rtol=1e-5)
    assert_close(nbjax.jit(nbjax.vmap(nbjax.grad(f)))(x), df(x), rtol=1e-5)
    assert_close(nbjax.vmap(f)(x), np.sin(x) * x, rtol=1e-6)
    check_grads(f, (x,), order=2)


def test_grad_of_jit_splits_forward_and_backward_calls():
    f = nbjax.jit(lambda x: jnp.sin(x) * 2.0)
    closed = nbjax.make_jaxpr(nbjax.grad(f))(np.float32(1.0))
    assert str(closed) == (
        "{ lambda ; a:f32[]. let\n"
        "    _:f32[] b:f32[] = jit[\n"
        "      name=<lambda>\n"
        "      jaxpr={ lambda ; a:f32[]. let\n"
        "          c:f32[] = sin a\n"
        "          b:f32[] = cos a\n"
        "          _:f32[] = mul c 2.0:f32[]\n"
        "        in (_, b) }\n"
        "    ] a\n"
        "    d:f32[] = jit[\n"
        "      name=<lambda>\n"
        "      jaxpr={ lambda ; b:f32[] e:f32[]. let\n"
        "          f:f32[] = mul e 2.0:f32[]\n"
        "          d:f32[] = mul f b\n"
        "        in (d,) }\n"
        "    ] b 1.0:f32[]\n"
        "  in (d,) }")
    nbjax.core.check_jaxpr(closed.jaxpr)


# --- JAX's other options of jit ------------------------------------------------------------

def _primitives(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


def test_inline_puts_the_callees_equations_in_the_callers_trace():
    inlined = nbjax.jit(jnp.sin, inline=True)
    called = nbjax.jit(jnp.cos)
    closed = nbjax.make_jaxpr(lambda x: inlined(x) + called(x))(1.0)
    assert _primitives(closed) == ["sin", "jit", "add"]
    x = np.float32(0.7)
    assert_close(nbjax.jit(lambda x: inlined(x) * 2)(x), 2 * np.sin(x), rtol=1e-6)
    assert_close(nbjax.grad(inlined)(x), np.cos(x), rtol=1e-6)
    xs = np.linspace(0, 1, 5, dtype=np.float32)
    assert_close(nbjax.vmap(inlined)(xs), np.sin(xs), rtol=1e-6)

    @nbjax.jit(inline=True, static_argnums=1)
    def power(x, n):
        return x ** n
    assert _primitives(nbjax.make_jaxpr(lambda x: power(x, 3))(x)) == ["integer_pow"]
    assert_close(power(x, 3), x ** 3, rtol=1e-6)   # eagerly: compiled as usual


def test_device_picks_its_platform_and_is_deprecated_as_in_jax():
    cpu = nbjax.devices()[0]
    with pytest.warns(DeprecationWarning, match="device argument on jit is deprecated"):
        f = nbjax.jit(lambda x: jnp.sin(x) * 2, device=cpu)
    assert f.backend == "cpu"
    out = f(np.float32(1.0))
    assert_close(out, 2 * np.sin(1.0), rtol=1e-6)
    assert out.devices() == {cpu}
    with pytest.raises(ValueError, match="can't specify both a device and a backend"):
        nbjax.jit(jnp.sin, device=cpu, backend="cpu")
    with pytest.raises(ValueError, match="in_shardings or out_shardings"):
        nbjax.jit(jnp.sin, device=cpu, out_shardings=nbjax.sharding.SingleDeviceSharding(cpu))
    from nbjax.core import GpuDevice
    with pytest.warns(DeprecationWarning), pytest.raises(NotImplementedError,
                                                         match="first GPU"):
        nbjax.jit(jnp.sin, device=GpuDevice(1, "a second GPU", runtime=None))


def test_shardings_of_one_device_are_taken_others_refused():
    whole = nbjax.sharding.SingleDeviceSharding(nbjax.devices()[0])
    f = nbjax.jit(lambda a, b: (a + b, a * b), in_shardings=(whole, None),
                  out_shardings=[whole, whole])
    assert f.backend == "cpu"
    assert_close(f(np.float32(2.0), np.float32(3.0))[1], 6.0, rtol=0)
    with pytest.raises(TypeError, match="in_shardings leaves must be shardings"):
        nbjax.jit(jnp.sin, in_shardings=("replicated",))


def test_keep_unused_and_compiler_options():
    f = nbjax.jit(lambda x, unused: x * 2, keep_unused=True, compiler_options={})
    assert f.keep_unused and f(np.float32(3.0), np.float32(1.0)) == 6.0
    with pytest.raises(ValueError, match="No such compile option: 'xla_cpu_fast_math'"):
        nbjax.jit(jnp.sin, compiler_options={"xla_cpu_fast_math": True})

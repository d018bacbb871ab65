"""Top-level names: closure_convert, no_tracing/no_execution, and the JAX flags nbjax
accepts without effect."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from helpers import assert_close


def test_closure_convert_hoists_only_the_tracers_of_an_enclosing_transformation():
    w, n = jnp.arange(3.0), jnp.arange(3)
    converted, hoisted = nbjax.closure_convert(lambda x: (x * w + n.sum(), {"a": x}), 1.0)
    assert hoisted == []                       # concrete values stay constants, as in JAX
    out, aux = converted(2.0)
    assert_close(out, 2.0 * np.arange(3.0) + 3, rtol=1e-6)
    assert aux == {"a": 2.0}

    def outer(s):
        converted, hoisted = nbjax.closure_convert(lambda x: jnp.sin(x * s), 1.0)
        assert len(hoisted) == 1
        return converted(2.0, *hoisted)
    assert_close(nbjax.grad(outer)(0.5), 2 * np.cos(1.0), rtol=1e-6)
    s = np.array([0.5, 1.0, -2.0], np.float32)
    assert_close(nbjax.vmap(outer)(s), np.sin(2 * s), rtol=1e-6)
    with pytest.raises(TypeError, match="structure"):
        nbjax.closure_convert(lambda x, y: x + y, 1.0, 2.0)[0]((1.0, 2.0))


def test_no_tracing_refuses_a_new_trace_but_not_a_cached_one():
    f = nbjax.jit(lambda x: x * 2)
    with nbjax.no_tracing():
        with pytest.raises(RuntimeError, match="re-tracing function <lambda> at .* for `jit`, "
                                               "but 'no_tracing' is set"):
            f(1.0)
    assert f(1.0) == 2.0
    with nbjax.no_tracing():
        assert f(3.0) == 6.0                   # same signature: the trace is reused
    assert not nbjax.config.no_tracing


def test_no_execution_refuses_to_run_but_stages():
    f = nbjax.jit(lambda x: x * 2)
    f(1.0)
    with nbjax.no_execution():
        with pytest.raises(RuntimeError, match=r"execute function jit\(<lambda>\)"):
            f(3.0)
        with pytest.raises(RuntimeError, match=r"execute function jit\(sin\)"):
            jnp.sin(3.0)
        closed = nbjax.make_jaxpr(f)(1.0)
    assert "mul" in str(closed)
    assert f(4.0) == 8.0


@pytest.mark.parametrize("name", ["softmax_custom_jvp", "jax2tf_associative_scan_reductions",
                                  "remove_size_one_mesh_axis_from_type", "thread_guard",
                                  "array_garbage_collection_guard", "auto_pcast"])
def test_flags_without_effect_are_accepted_and_restored(name):
    before = nbjax.config.read(name)
    with getattr(nbjax, name)(True):
        assert nbjax.config.read(name) is True
        assert_close(nbjax.grad(lambda x: nbjax.nn.softmax(x)[0])(jnp.ones(3)),
                     np.array([2, -1, -1]) / 9, rtol=1e-5)
    assert nbjax.config.read(name) == before
    assert "no effect" in getattr(nbjax, name).__doc__


@pytest.mark.parametrize("jitted", [False, True])
def test_fwd_and_bwd_match_vjp_and_compile_the_backward_pass_once(jitted):
    def f(x, w):
        return jnp.sin(x * w).sum(), {"n": x.shape[0]}
    fwd, bwd = nbjax.fwd_and_bwd(f, argnums=(0, 1), has_aux=True, jitted=jitted)
    x = np.linspace(0.1, 1, 5, dtype=np.float32)
    out, vjp, aux = fwd(x, 2.0)
    assert_close(out, np.sin(2 * x).sum(), rtol=1e-6)
    assert int(aux["n"]) == 5
    gx, gw = bwd(vjp, 1.0)
    assert_close(gx, 2 * np.cos(2 * x), rtol=1e-5)
    assert_close(gw, (x * np.cos(2 * x)).sum(), rtol=1e-5)
    fwd, bwd = nbjax.fwd_and_bwd(lambda x, w: x * w, argnums=0, jitted=jitted)
    for k in range(3):
        y, vjp = fwd(x + k, 3.0)
        assert_close(bwd(vjp, np.ones(5, np.float32)), np.full(5, 3.0), rtol=1e-6)
    if jitted:
        assert fwd.trace_count == 1 and bwd.trace_count == 1
    with pytest.raises(ValueError, match="unexpected tree structure"):  # (as JAX 0.10)
        bwd(vjp, (np.ones(5, np.float32),))


def test_typing_names_annotate_what_nbjax_numpy_accepts():
    import typing
    array_like = typing.get_args(nbjax.typing.ArrayLike)
    for value in (jnp.ones(2), np.ones(2), np.float32(1), 1.5, True):
        assert isinstance(value, array_like)
    assert not isinstance([1.0], array_like)  # (as JAX: lists are not arrays)

    def scale(x: nbjax.typing.ArrayLike, dtype: nbjax.typing.DTypeLike = None):
        return jnp.asarray(x, dtype) * 2
    assert typing.get_type_hints(scale)["x"] == nbjax.typing.ArrayLike
    assert scale(1, "float16").dtype == np.float16


def test_linearize_with_aux_returns_it_and_leaves_it_out_of_the_linear_map():
    out, f_jvp, aux = nbjax.linearize(lambda x: (jnp.sin(x) * 2, {"c": x * 3}), 0.5,
                                      has_aux=True)
    assert_close(out, 2 * np.sin(0.5))
    assert_close(f_jvp(1.0), 2 * np.cos(0.5))
    assert_close(aux["c"], 1.5)
    with pytest.raises(TypeError, match="has_aux=True requires"):
        nbjax.linearize(jnp.sin, 0.5, has_aux=True)


def test_keywords_jax_takes():
    """Keyword arguments JAX's functions take (tests/test_api_surface.py guards the
    rest of the record): a few whose names nbjax had differently."""
    key = nbjax.random.key(1)
    assert nbjax.random.t(key, df=3.0, shape=(2,)).shape == (2,)
    assert nbjax.random.chisquare(key, df=2.0).shape == ()
    assert nbjax.random.pareto(key, b=2.0, shape=(3,)).shape == (3,)
    assert_close(jnp.fmax(x1=np.array([1.0, np.nan]), x2=np.array([np.nan, 2.0])), [1.0, 2.0])
    assert int(jnp.gcd(x1=12, x2=18)) == 6
    assert jnp.empty_like(prototype=np.ones((2, 3), np.int8)).dtype == np.int8
    with pytest.raises(NotImplementedError, match="'out' argument to jnp.modf"):
        jnp.modf(1.5, out=np.zeros(()))


def test_device_put_takes_jaxs_keywords():
    x = jnp.arange(3.0)
    copy = nbjax.device_put(x, may_alias=False)
    assert copy is not x and copy.aval == x.aval
    assert nbjax.device_put(x, may_alias=True) is x
    nbjax.jit(lambda a: a * 2, donate_argnums=0)(x)  # x's buffer given away...
    assert_close(copy, [0.0, 1.0, 2.0])  # ...not the copy's
    moved = nbjax.device_put({"a": np.ones(2)}, nbjax.devices()[0], src=nbjax.devices()[0],
                             donate=True)
    assert_close(moved["a"], [1.0, 1.0])
    with pytest.raises(ValueError, match="may_alias and donate cannot be True"):
        nbjax.device_put(x, donate=True, may_alias=True)


def test_make_jaxpr_binds_the_named_axes_of_its_axis_env():
    f = lambda x: nbjax.lax.psum(x, "i") * nbjax.lax.axis_index("j")  # noqa: E731
    closed = nbjax.make_jaxpr(f, axis_env=[("i", 4), ("j", 2)])(1.0)
    assert [e.primitive.name for e in closed.jaxpr.eqns][:2] == ["psum", "axis_index"]
    with pytest.raises(NameError, match="unbound axis name: i"):
        nbjax.make_jaxpr(f)(1.0)


def test_default_device_is_jaxs_context_manager():
    cpu = nbjax.devices()[0]
    with nbjax.default_device(cpu):
        assert nbjax.config.jax_default_device == cpu
        assert_close(nbjax.jit(lambda x: x * 2)(jnp.ones(2)), [2.0, 2.0])
    with nbjax.default_device("cpu"):
        assert nbjax.config.default_device == "cpu"
    assert nbjax.config.default_device is None

    class Gpu:
        platform = "gpu"
    with pytest.raises(NotImplementedError, match="on a GPU only where asked"):
        nbjax.default_device(Gpu())


def test_removed_options_are_refused_as_jax_refuses_them():
    with pytest.raises(NotImplementedError, match="reduce_axes argument to grad"):
        nbjax.grad(jnp.sin, reduce_axes=("i",))
    with pytest.raises(NotImplementedError, match="reduce_axes argument to vjp"):
        nbjax.vjp(jnp.sin, 1.0, reduce_axes=("i",))
    with pytest.raises(NotImplementedError, match="`concrete` option to `jax.checkpoint`"):
        nbjax.checkpoint(jnp.sin, concrete=False)
    assert_close(nbjax.grad(jnp.sin, reduce_axes=())(0.0), 1.0)


def test_mul_out_dtype_and_vmap_spmd_axis_name():
    assert int(nbjax.lax.mul(np.int8(100), np.int8(100), out_dtype=np.int32)) == 10000
    out = nbjax.vmap(jnp.sin, spmd_axis_name="data")(jnp.ones(3))
    assert_close(out, np.sin(np.ones(3)), rtol=1e-6)

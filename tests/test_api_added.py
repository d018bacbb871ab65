"""Top-level names added for JAX tutorials: devices and host transfers, eval_shape, typeof,
jacobian, linear_transpose, named_scope/named_call, ensure_compile_time_eval, the config
context managers. Each is compared with JAX when it is importable."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None


def test_block_until_ready_and_device_get_walk_pytrees():
    tree = {"a": jnp.arange(3.0), "b": [jnp.ones(2), 7]}
    assert nbjax.block_until_ready(tree) is tree
    host = nbjax.device_get(tree)
    assert type(host["a"]) is np.ndarray and host["b"][1] == 7
    np.testing.assert_array_equal(host["a"], np.arange(3.0, dtype=np.float32))
    put = nbjax.device_put({"x": np.ones(2)}, nbjax.devices()[0])
    assert isinstance(put["x"], nbjax.Array)


def test_one_process_with_the_cpu_devices():
    assert nbjax.default_backend() == "cpu"
    assert nbjax.device_count() == nbjax.local_device_count() == len(nbjax.local_devices())
    assert (nbjax.process_index(), nbjax.process_count(), nbjax.process_indices()) == (0, 1, [0])


def _eval_shape_program(lib, calls):
    def f(x, y, scale=1.0):
        calls.append(type(x).__name__)
        return {"prod": x @ y * scale, "n": lib.numpy.sum(y, axis=0).astype(np.int32)}
    spec = lib.ShapeDtypeStruct((2, 3), np.float32)
    out = lib.eval_shape(f, spec, np.ones((3, 4), np.float32), scale=2.0)
    return {k: (v.shape, np.dtype(v.dtype)) for k, v in out.items()}


def test_eval_shape_traces_without_computing():
    calls = []
    out = _eval_shape_program(nbjax, calls)
    assert out == {"prod": ((2, 4), np.float32), "n": ((4,), np.int32)}
    assert calls == ["JaxprTracer"]
    if jax is not None:
        assert out == _eval_shape_program(jax, [])


def test_typeof_gives_the_aval():
    t = nbjax.typeof(jnp.zeros((2, 3), jnp.int32))
    assert (t.shape, t.dtype, t.weak_type) == ((2, 3), np.int32, False)
    assert nbjax.typeof(1.0).weak_type
    seen = []
    nbjax.jit(lambda x: seen.append(nbjax.typeof(x)) or x)(jnp.ones(4))
    assert seen[0].shape == (4,)


def test_jacobian_is_reverse_mode():
    f = lambda x: jnp.sin(x) * x  # noqa: E731
    x = np.array([0.5, 1.0, 2.0], np.float32)
    np.testing.assert_allclose(nbjax.jacobian(f)(x), np.diag(np.cos(x) * x + np.sin(x)),
                               rtol=1e-6, atol=1e-6)


def test_linear_transpose_of_a_linear_map():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    f_t = nbjax.linear_transpose(lambda x: jnp.dot(a, x), np.zeros(3, np.float32))
    (ct,) = f_t(np.array([1.0, -1.0], np.float32))
    np.testing.assert_allclose(ct, a.T @ np.array([1.0, -1.0]), rtol=1e-6)
    if jax is not None:
        ref = jax.linear_transpose(lambda x: jax.numpy.dot(a, x), np.zeros(3, np.float32))
        np.testing.assert_allclose(ct, ref(np.array([1.0, -1.0], np.float32))[0], rtol=1e-6)


def test_linear_transpose_of_pytrees_integers_and_affine_maps():
    v = np.arange(1, 4, dtype=np.float32)
    f_t = nbjax.linear_transpose(lambda d: (d["a"] * 2, d["a"].sum() + d["b"]),
                                 {"a": v, "b": np.float32(0)})
    (ct,) = f_t((v, np.float32(1)))
    np.testing.assert_array_equal(ct["a"], 2 * v + 1)
    assert float(ct["b"]) == 1.0
    # an integer map's cotangents are integers (a VJP's would be float0)
    (ct,) = nbjax.linear_transpose(lambda a: a * 2, np.arange(3))(np.arange(3))
    assert ct.dtype == np.int32 and ct.tolist() == [0, 2, 4]
    # a constant term is no part of the transpose, as in JAX; the map jits as a pytree
    (ct,) = nbjax.jit(lambda f, c: f(c))(nbjax.linear_transpose(lambda a: 2 * a + 1, v), v)
    np.testing.assert_array_equal(ct, 2 * v)
    with pytest.raises(TypeError, match="cotangent type does not match function output"):
        nbjax.linear_transpose(lambda a: a * 2, v)(v.astype(np.float16))
    with pytest.raises(TypeError, match="integer -> integer functions"):
        nbjax.linear_transpose(lambda a: a.astype(np.int32), v)


@pytest.mark.parametrize("fun, error, match", [
    (lambda a: a * a, ValueError, "mul of two linear values is not linear"),
    (lambda a: a @ a, ValueError, "product of two linear values is not linear"),
    (lambda a: a.sum() * a, ValueError, "mul of two linear values"),
    (lambda a: 1 / a, ValueError, "not linear in its denominator"),
    (lambda a: jnp.where(a > 0, a, 0.0), ValueError, "select_n whose choice depends"),
    (jnp.sin, NotImplementedError, "no transpose rule for primitive sin"),
    (lambda a: a ** 2, NotImplementedError, "integer_pow"),
])
def test_linear_transpose_of_a_map_that_is_not_linear_raises(fun, error, match):
    """(It used to return the VJP at zero: sin's transpose was the identity.)"""
    v = np.arange(1, 4, dtype=np.float32)
    f_t = nbjax.linear_transpose(fun, v)
    with pytest.raises(error, match=match):
        f_t(fun(v) if np.shape(fun(v)) else np.float32(1))


def test_named_scope_and_named_call_change_no_result():
    with nbjax.named_scope("layer"):
        y = nbjax.jit(nbjax.named_call(lambda x: x * 2, name="double"))(3.0)
    assert float(y) == 6.0
    assert nbjax.named_call(lambda x: x, name="double").__name__ == "double"
    with pytest.raises(TypeError, match="must be a string"):
        with nbjax.named_scope(3):
            pass


def test_ensure_compile_time_eval_computes_concrete_values_while_tracing():
    kinds = []

    def f(x):
        with nbjax.ensure_compile_time_eval():
            y = jnp.sin(2.0)
            z = x * y
        kinds.append((type(y).__name__, type(z).__name__))
        return z
    out = nbjax.jit(f)(1.5)
    assert kinds == [("Array", "JaxprTracer")]
    np.testing.assert_allclose(out, 1.5 * np.sin(2.0), rtol=1e-6)
    closed = nbjax.make_jaxpr(f)(1.0)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["mul"]


def test_config_context_managers_restore_the_setting():
    with nbjax.enable_x64():
        assert jnp.zeros(2).dtype == np.float64
    assert jnp.zeros(2).dtype == np.float32
    seen = []
    f = nbjax.jit(lambda x: seen.append(type(x).__name__) or x)
    with nbjax.disable_jit():
        f(jnp.ones(1))
    f(jnp.ones(1))
    assert seen == ["Array", "JaxprTracer"]

"""Top-level names of ``jax`` added for tutorials: pure_callback, custom_gradient,
clear_caches, the config context managers with an effect (debug_nans/infs, log_compiles,
numpy_dtype_promotion, numpy_rank_promotion) and the one-device array makers. Each program
is run with nbjax and, when it is importable, with JAX, and the results compared."""

import logging
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from helpers import assert_close

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None

LIBS = [nbjax] + ([jax] if jax is not None else [])
RNG = np.random.default_rng(0)


def _sin_plus(lib, x, y, method):
    calls = []

    def cb(a, b):
        calls.append(np.shape(a))
        return (np.sin(np.asarray(a)) + np.asarray(b)).astype(np.float32)
    spec = lib.ShapeDtypeStruct(np.broadcast_shapes(x.shape, y.shape), np.float32)
    return lambda a, b: lib.pure_callback(cb, spec, a, b, vmap_method=method), calls


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_pure_callback_under_jit_and_vmap_calls_as_jax(method):
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    y = RNG.normal(size=3).astype(np.float32)
    seen = {}
    for lib in LIBS:
        f, calls = _sin_plus(lib, x[0], y, method)
        out = lib.jit(lib.vmap(f, in_axes=(0, None)))(x, y)
        assert_close(np.asarray(out), np.sin(x) + y)
        seen[lib.__name__] = calls
        assert_close(np.asarray(lib.jit(f)(x[0], y)), np.sin(x[0]) + y)
    if jax is not None:
        assert seen["nbjax"] == seen["jax"]


def test_pure_callback_pytrees_errors_and_no_derivative():
    spec = (nbjax.ShapeDtypeStruct((), np.float32), [nbjax.ShapeDtypeStruct((2,), np.int32)])
    out = nbjax.jit(lambda v: nbjax.pure_callback(
        lambda a: (a * 2, [np.arange(2, dtype=np.int32)]), spec, v))(3.0)
    assert float(out[0]) == 6.0 and out[1][0].dtype == np.int32
    bad = nbjax.ShapeDtypeStruct((2,), np.float32)
    with pytest.raises(RuntimeError, match="dtype"):
        nbjax.pure_callback(lambda a: np.asarray(a).astype(np.int32), bad, jnp.ones(2))
    with pytest.raises(RuntimeError, match="shape"):
        nbjax.pure_callback(lambda a: np.asarray(a)[:1], bad, jnp.ones(2))
    with pytest.raises(ValueError, match="custom_jvp"):
        nbjax.grad(lambda v: nbjax.pure_callback(np.sin, v, v))(1.0)
    # An exception in the callback comes out as JAX's runtime error, eagerly and under jit,
    # its message the callback's traceback, its cause the exception itself.
    def failing(a):
        raise KeyError("missing")
    for call in (lambda v: nbjax.pure_callback(failing, bad, v),
                 nbjax.jit(lambda v: nbjax.pure_callback(failing, bad, v))):
        with pytest.raises(nbjax.errors.JaxRuntimeError,
                           match="(?s)^INTERNAL: CpuCallback error calling callback: "
                                 "Traceback.*in failing.*KeyError: 'missing'$") as raised:
            call(jnp.ones(2))
        assert isinstance(raised.value.__cause__, KeyError)
    with pytest.raises(NotImplementedError, match="vmap_method"):
        nbjax.vmap(lambda v: nbjax.pure_callback(np.sin, v, v))(jnp.ones(2))
    assert "pure_callback" in str(nbjax.make_jaxpr(lambda v: nbjax.pure_callback(np.sin, v, v))(
        1.0))


def _clipped_grad(lib):
    @lib.custom_gradient
    def f(x, y):
        return x * y, lambda g: (lib.numpy.clip(g * y, -1, 1), g * x)
    return f


def test_custom_gradient_matches_jax():
    x, y = np.float32(0.7), np.float32(3.0)
    results = [(float(_clipped_grad(lib)(x, y)),
                [float(v) for v in lib.grad(_clipped_grad(lib), argnums=(0, 1))(x, y)],
                [float(v) for v in lib.jit(lib.grad(_clipped_grad(lib)))(x, y)[None]])
               for lib in LIBS]
    assert results[0][1] == [1.0, pytest.approx(0.7)]
    assert all(r == results[0] for r in results)


def test_clear_caches_retraces():
    f = nbjax.jit(lambda v: v + 1)
    f(jnp.ones(2))
    f(jnp.ones(2))
    assert f.trace_count == 1
    nbjax.clear_caches()
    f(jnp.ones(2))
    assert f.trace_count == 2


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_debug_nans_and_infs_raise_as_jax(lib):
    with lib.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in log"):
            lib.numpy.log(-lib.numpy.ones(2))
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in log"):
            lib.jit(lambda v: lib.numpy.log(v) * 2)(-lib.numpy.ones(2))
        assert_close(np.asarray(lib.jit(lib.numpy.log)(lib.numpy.ones(2))), np.zeros(2))
    with lib.debug_infs(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
            lib.numpy.ones(2) / 0
    assert np.isnan(np.asarray(lib.numpy.log(-lib.numpy.ones(2)))).all()  # off again


def test_log_compiles_logs_each_compile(caplog):
    f = nbjax.jit(lambda v: v * 3)
    with caplog.at_level(logging.WARNING), nbjax.log_compiles():
        f(np.float32(1))
        f(np.float32(2))
        f(np.ones(2, np.float32))
    msgs = [r.getMessage() for r in caplog.records if r.name == "nbjax.compiler"]
    assert len(msgs) == 2 and "float32[]" in msgs[0] and "float32[2]" in msgs[1]


PROMOTIONS = [(np.float32, 2.0), (np.int32, 2.0), (np.float32, "f16"), (np.int32, "f32"),
              (np.float32, 2), (np.int8, 2), (np.int8, "i8")]


def _promote(lib, case):
    a, b = case
    x = lib.numpy.asarray(1, dtype=a)
    if isinstance(b, str):
        b = lib.numpy.asarray(1, dtype={"f16": np.float16, "f32": np.float32, "i8": np.int8}[b])
    with lib.numpy_dtype_promotion("strict"):
        try:
            return str((x + b).dtype)
        except ValueError as e:
            return type(e).__name__


@pytest.mark.parametrize("case", PROMOTIONS, ids=str)
def test_strict_dtype_promotion_as_jax(case):
    mine = _promote(nbjax, case)
    assert mine in ("TypePromotionError", "float32", "int8")
    if jax is not None:
        assert mine == _promote(jax, case)


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_rank_promotion_modes(lib):
    a, b = lib.numpy.ones(3), lib.numpy.ones((2, 3))
    with lib.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="rank_promotion='raise'"):
            a + b
        assert (a + 1.0).shape == (3,)
    with lib.numpy_rank_promotion("warn"), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a + b
    assert [x.category for x in w] == [UserWarning] and "rank promotion" in str(w[0].message)


def test_one_device_array_makers():
    data = RNG.normal(size=(2, 3)).astype(np.float32)
    for lib in LIBS:
        s = lib.numpy.ones(1).sharding
        out = lib.make_array_from_callback((2, 3), s, lambda idx: data[idx])
        np.testing.assert_array_equal(np.asarray(out), data)
        np.testing.assert_array_equal(
            np.asarray(lib.make_array_from_process_local_data(s, data)), data)
        one = lib.make_array_from_single_device_arrays((2, 3), s, [lib.numpy.asarray(data)])
        np.testing.assert_array_equal(np.asarray(one), data)
        tree = {"a": lib.numpy.ones(2)}
        assert lib.copy_to_host_async(tree) is tree
        assert lib.effects_barrier() is None
    assert "nbjax" in nbjax.print_environment_info(return_string=True)


def test_accepted_flags_restore_their_value():
    for name in ("enable_checks", "check_tracer_leaks", "transfer_guard", "debug_key_reuse",
                 "default_matmul_precision", "threefry_partitionable", "allow_f16_reductions"):
        before = nbjax.config.read(name)
        with getattr(nbjax, name)("x"):
            assert nbjax.config.read(name) == "x"
        assert nbjax.config.read(name) == before
        assert "no effect" in getattr(nbjax, name).__doc__
    with nbjax.checking_leaks():
        assert nbjax.config.check_tracer_leaks is True

"""pmap over CPU devices: shards on threads, collectives meeting at a rendezvous, and pmap
composed with vmap, jvp and grad. Two devices (NBJAX_NUM_CPU_DEVICES=2), as JAX's
--xla_force_host_platform_device_count=2."""

import re
import threading

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.core import Primitive, check_jaxpr, eval_jaxpr
from nbjax.test_util import check_grads
from helpers import assert_close, random_array

N = 2  # devices


@pytest.fixture(autouse=True)
def two_devices(monkeypatch):
    monkeypatch.setenv("NBJAX_NUM_CPU_DEVICES", str(N))


def pmap(f, **kwargs):
    return nbjax.pmap(f, axis_name="i", **kwargs)


# --- devices -------------------------------------------------------------------------------

def test_device_count_follows_the_environment(monkeypatch):
    assert len(nbjax.devices()) == N
    assert [d.id for d in nbjax.devices()] == list(range(N))
    assert nbjax.devices()[1] is nbjax.devices()[1]
    monkeypatch.setenv("NBJAX_NUM_CPU_DEVICES", "3")
    assert len(nbjax.devices()) == 3
    monkeypatch.setenv("NBJAX_NUM_CPU_DEVICES", "zero")
    with pytest.raises(ValueError, match="NBJAX_NUM_CPU_DEVICES"):
        nbjax.devices()
    monkeypatch.delenv("NBJAX_NUM_CPU_DEVICES")
    assert len(nbjax.devices()) >= 1


# --- pmap against a Python loop ------------------------------------------------------------

def loop(f, *xs):
    """``f`` on each slice of the leading axis, stacked: what pmap must compute."""
    return np.stack([np.asarray(f(*[x[i] for x in xs])) for i in range(len(xs[0]))])


def test_pmap_matches_a_loop():
    def f(x, y):
        return jnp.sin(x) @ y + 1.0

    x, y = random_array(0, (N, 3, 4)), random_array(1, (N, 4, 2))
    out = pmap(f)(x, y)
    assert isinstance(out, nbjax.Array) and out.shape == (N, 3, 2)
    np.testing.assert_allclose(out, loop(f, x, y), rtol=1e-5, atol=1e-6)


def test_donated_arguments_are_deleted_after_an_eager_call():
    n = nbjax.device_count()
    f = nbjax.pmap(lambda x, s: x * s, donate_argnums=(0,))
    x, s = jnp.ones((n, 3)), jnp.arange(float(n))
    assert_close(f(x, s), np.ones((n, 3)) * np.arange(n)[:, None])
    assert x.is_deleted() and not s.is_deleted()  # (as JAX)
    with pytest.raises(RuntimeError, match="deleted"):
        x + 1
    kept = np.ones((n, 3), np.float32)  # NumPy values and tracers are not deleted
    assert_close(f(kept, s), kept * np.arange(n)[:, None])
    assert_close(nbjax.vmap(f, (0, None))(jnp.ones((2, n, 3)), s).sum(), 2 * 3 * sum(range(n)))


def test_pmap_pytrees_kwargs_and_integers():
    def f(tree, scale):
        return {"sum": tree["a"] + tree["b"][0], "count": tree["n"] * 2}, scale * 2

    tree = {"a": random_array(0, (N, 3)), "b": [random_array(1, (N, 3))],
            "n": np.arange(N, dtype=np.int32)}
    out, scaled = pmap(f)(tree, scale=random_array(2, (N,)))
    assert_close(out["sum"], tree["a"] + tree["b"][0])
    np.testing.assert_array_equal(out["count"], np.arange(N) * 2)
    assert out["count"].dtype == np.int32
    assert_close(scaled, random_array(2, (N,)) * 2)


def test_in_axes_out_axes_and_static_arguments():
    x, y = random_array(0, (3, N)), random_array(1, (3,))
    out = pmap(lambda a, b: a * b, in_axes=(1, None), out_axes=1)(x, y)
    assert_close(out, x * y[:, None])
    # negative axes; an unmapped output is every shard's (equal) value
    out, shared = pmap(lambda a, b: (a * 2, lax.psum(a, "i")), in_axes=(-1, None),
                       out_axes=(-1, None))(x, y)
    assert_close(out, x * 2)
    assert_close(shared, x.sum(1), rtol=1e-6)
    f = pmap(lambda a, n, b: a * n + b, static_broadcasted_argnums=1, in_axes=(0, None, 0))
    assert_close(f(x.T, 3, y[:N]), x.T * 3 + y[:N, None])
    assert_close(f(x.T, 5, y[:N]), x.T * 5 + y[:N, None])


def test_closure_over_arrays_and_the_trace_cache():
    w, traces = random_array(0, (3,)), []

    def f(x):
        traces.append(1)
        return x * w

    g = pmap(f)
    x = random_array(0, (N, 3))
    assert_close(g(x), x * w)
    assert_close(g(x + 1), (x + 1) * w)
    assert len(traces) == 1
    g(random_array(0, (N, 4))[:, :3].copy())
    assert len(traces) == 1
    with pytest.raises(ValueError):
        g(random_array(0, (N, 4)))  # a new shape: traced again, and x * w no longer broadcasts
    assert len(traces) == 2


def test_make_jaxpr_of_pmap():
    closed = nbjax.make_jaxpr(pmap(lambda x: lax.psum(jnp.sin(x), "i")))(random_array(0, (N, 3)))
    check_jaxpr(closed.jaxpr)
    text = str(closed)
    assert "pmap[" in text and "axis_size=2" in text and "psum[axes=('i',)]" in text
    shard_jaxpr = closed.jaxpr.eqns[0].params["jaxpr"]
    assert shard_jaxpr.in_avals[0].shape == (3,)  # the shard jaxpr takes one slice
    x = random_array(0, (N, 3))
    out, = eval_jaxpr(closed.jaxpr, closed.consts, x)
    assert_close(out, np.broadcast_to(np.sin(x).sum(0), x.shape), rtol=1e-6)


# --- collectives on two devices ------------------------------------------------------------

@pytest.mark.parametrize("name, collective, expected", [
    ("psum", lambda x: lax.psum(x, "i"), lambda x: np.broadcast_to(x.sum(0), x.shape)),
    ("pmean", lambda x: lax.pmean(x, "i"), lambda x: np.broadcast_to(x.mean(0), x.shape)),
    ("pmax", lambda x: lax.pmax(x, "i"), lambda x: np.broadcast_to(x.max(0), x.shape)),
    ("pmin", lambda x: lax.pmin(x, "i"), lambda x: np.broadcast_to(x.min(0), x.shape)),
    ("all_gather", lambda x: lax.all_gather(x, "i"), lambda x: np.stack([x] * N)),
    ("all_gather axis=1", lambda x: lax.all_gather(x, "i", axis=1),
     lambda x: np.stack([np.moveaxis(x, 0, 1)] * N)),
    ("all_gather tiled", lambda x: lax.all_gather(x, "i", tiled=True),
     lambda x: np.stack([x.reshape(-1, x.shape[-1])] * N)),
    ("axis_index", lambda x: lax.axis_index("i") + 0 * x.astype(jnp.int32),
     lambda x: np.broadcast_to(np.arange(N)[:, None, None], x.shape)),
    ("ppermute shift", lambda x: lax.ppermute(x, "i", [(0, 1)]),
     lambda x: np.stack([np.zeros_like(x[0]), x[0]])),
    ("ppermute swap", lambda x: lax.ppermute(x, "i", [(0, 1), (1, 0)]), lambda x: x[::-1]),
])
def test_collectives_match_numpy(name, collective, expected):
    """Each shard holds x[i]; every result needs both threads at the rendezvous at once."""
    x = random_array(0, (N, 2, 3))
    out = pmap(collective)(x)
    assert_close(out, expected(x), rtol=1e-6)
    # the collective over a vmapped axis of the same name computes the same
    assert_close(nbjax.vmap(collective, axis_name="i")(x), expected(x),
                 rtol=1e-6)


def test_collectives_keep_dtypes_and_pytrees():
    x = np.arange(2 * N, dtype=np.int32).reshape(N, 2)
    out = pmap(lambda a: (lax.psum(a, "i"), lax.pmean(a, "i")))(x)
    np.testing.assert_array_equal(out[0], np.broadcast_to(x.sum(0), x.shape))
    assert out[0].dtype == np.int32 and out[1].dtype == np.float32
    tree = pmap(lambda a: lax.psum({"u": a, "v": [a * 2]}, "i"))(x)
    np.testing.assert_array_equal(tree["v"][0], np.broadcast_to(2 * x.sum(0), x.shape))


def test_pmean_divides_by_the_axis_size_as_a_constant():
    """As in JAX, one collective: the psum, then a division by the axis size (known where
    the axis is bound), not a second psum counting the devices."""
    x = np.arange(2 * N, dtype=np.float32).reshape(N, 2)
    text = str(nbjax.make_jaxpr(pmap(lambda a: lax.pmean(a, "i")))(x))
    assert text.count("psum") == 1 and re.search(rf"= div \w+ {float(N)}:f32\[\]", text)
    both = pmap(nbjax.vmap(lambda a: lax.pmean(a, ("i", "j")), axis_name="j"))(
        x.reshape(N, 2, 1))
    assert_close(both, np.broadcast_to(x.mean(), (N, 2, 1)), rtol=1e-6)


def test_collectives_over_a_pmap_axis_and_a_vmap_axis():
    x = random_array(0, (N, 3, 2))
    both = pmap(nbjax.vmap(lambda a: lax.psum(a, ("i", "j")), axis_name="j"))(x)
    assert_close(both, np.broadcast_to(x.sum((0, 1)), x.shape), rtol=1e-5)
    inner = pmap(nbjax.vmap(lambda a: lax.psum(a, "j"), axis_name="j"))(x)
    assert_close(inner, np.broadcast_to(x.sum(1, keepdims=True), x.shape),
                 rtol=1e-5)
    outer = pmap(nbjax.vmap(lambda a: lax.all_gather(a, "i")))(x)
    assert_close(outer, np.stack([np.moveaxis(x, 0, 1)] * N))


def test_shards_run_concurrently():
    """Each shard waits at a two-party barrier before its psum: with the shards run one after
    the other, the first would time out."""
    barrier = threading.Barrier(N, timeout=10)
    wait_p = Primitive("wait_for_other_shards")
    wait_p.def_abstract_eval(lambda x: x)

    @wait_p.def_impl
    def _(x):
        barrier.wait()
        return x

    out = pmap(lambda x: lax.psum(wait_p.bind(x), "i"))(random_array(0, (N, 3)))
    assert_close(out[0], random_array(0, (N, 3)).sum(0), rtol=1e-6)


def test_a_failing_shard_does_not_leave_the_others_waiting():
    fail_p = Primitive("fail_on_shard_1")
    fail_p.def_abstract_eval(lambda x: x)

    @fail_p.def_impl
    def _(x):
        if x[0] == 1:
            raise RuntimeError("shard 1 failed")
        return x

    with pytest.raises(RuntimeError, match="shard 1 failed"):
        pmap(lambda x: lax.psum(fail_p.bind(x), "i"))(np.arange(N, dtype=np.float32)[:, None])


def test_a_single_shard_runs_in_the_callers_thread():
    """One shard needs no thread of its own (a pmap over one device per process, the usual
    multi-process layout, then costs no thread start per call); it computes the same, and
    its errors reach the caller."""
    threads = []

    def record(x):
        threads.append(threading.current_thread())
        if x[0] < 0:
            raise ValueError("negative shard")
        return x
    one = nbjax.devices()[:1]
    f = nbjax.pmap(lambda x: lax.psum(nbjax.pure_callback(
        record, nbjax.ShapeDtypeStruct(x.shape, x.dtype), x), "i") * 2, "i", devices=one)
    x = random_array(0, (1, 3))
    assert_close(f(np.abs(x)), 2 * np.abs(x))
    assert threads == [threading.current_thread()]
    with pytest.raises(nbjax.errors.JaxRuntimeError, match="ValueError: negative shard"):
        f(-np.abs(x) - 1)


# --- errors --------------------------------------------------------------------------------

def test_more_shards_than_devices():
    with pytest.raises(ValueError, match="requires 3 logical devices, but only 2 XLA devices "
                                         r"are available \(num_replicas=3\)"):
        pmap(lambda x: x)(random_array(0, (3, 2)))
    with pytest.raises(ValueError, match="must equal the number of local devices"):
        nbjax.pmap(lambda x: x, devices=nbjax.devices()[:1])(random_array(0, (2,)))
    assert_close(nbjax.pmap(lambda x: x * 2, devices=nbjax.devices()[:1])(
        random_array(0, (1, 2))), random_array(0, (1, 2)) * 2)


def test_argument_errors():
    with pytest.raises(ValueError, match="rank should be at least 1, but is only 0"):
        pmap(lambda x: x)(1.0)
    with pytest.raises(ValueError, match="inconsistent sizes"):
        pmap(lambda x, y: x + y)(random_array(0, (2, 3)), random_array(0, (1, 3)))
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        pmap(lambda x: x, in_axes=None)(random_array(0, (2,)))
    with pytest.raises(ValueError, match="static_broadcasted_argnums"):
        pmap(lambda x, n: x, static_broadcasted_argnums=1)(random_array(0, (2,)))
    with pytest.raises(ValueError, match="Non-hashable static"):
        pmap(lambda x, n: x, static_broadcasted_argnums=1)(random_array(0, (2,)), [1])
    with pytest.raises(ValueError, match="out_axes 2 is out of range"):
        pmap(lambda x: x, out_axes=2)(random_array(0, (2, 3)))
    with pytest.raises(TypeError, match="callable"):
        nbjax.pmap(3)
    with pytest.raises(ValueError, match="non-empty"):
        nbjax.pmap(lambda x: x, devices=[])


def test_unbound_axis_names_and_nested_pmap():
    with pytest.raises(NameError, match="unbound axis name: j"):
        pmap(lambda x: lax.psum(x, "j"))(random_array(0, (N,)))
    for collective in (lambda x: lax.psum(x, "i"), lambda x: lax.axis_index("i"),
                       lambda x: lax.all_gather(x, "i"), lambda x: lax.ppermute(x, "i", [])):
        with pytest.raises(NameError, match="unbound axis name: i"):
            collective(random_array(0, (2,)))
    with pytest.raises(NotImplementedError, match="nested pmap"):
        pmap(lambda x: pmap(lambda y: y)(x[None]))(random_array(0, (N,)))
    with pytest.raises(ValueError, match="must be unique"):
        pmap(lambda x: lax.ppermute(x, "i", [(0, 1), (1, 1)]))(random_array(0, (N,)))
    with pytest.raises(ValueError, match=r"must lie in \[0, 2\)"):
        pmap(lambda x: lax.ppermute(x, "i", [(0, 2)]))(random_array(0, (N,)))


# --- transformations -----------------------------------------------------------------------

def test_vmap_of_pmap():
    def f(x, y):
        return lax.psum(x * y, "i"), lax.axis_index("i") + 0 * y.astype(jnp.int32)

    x, y = random_array(0, (4, N, 3)), random_array(1, (N, 3))
    s, idx = nbjax.vmap(pmap(f), in_axes=(0, None))(x, y)
    assert_close(s, np.broadcast_to((x * y).sum(1, keepdims=True), x.shape),
                 rtol=1e-5)
    np.testing.assert_array_equal(idx, np.broadcast_to(np.arange(N)[None, :, None], x.shape))
    # the batch axis after the mapped axis, which is not the first
    z = random_array(0, (3, N, 4))
    out = nbjax.vmap(pmap(lambda a: a * 2, in_axes=1, out_axes=1), in_axes=2)(z)
    assert_close(out, np.moveaxis(z, 2, 0) * 2)
    # an operand batched by vmap but shared by the shards; an unmapped output
    f = pmap(lambda a, b: (a * b, lax.psum(a * b, "i")), in_axes=(0, None), out_axes=(0, None))
    y5 = random_array(2, (5, 3))
    each, total = nbjax.vmap(f, in_axes=(None, 0), out_axes=1)(y, y5)
    assert_close(each, np.moveaxis(y[None] * y5[:, None], 0, 1), rtol=1e-6)
    np.testing.assert_allclose(total, (y.sum(0) * y5).T, rtol=1e-5, atol=1e-6)
    # the batched shard jaxpr keeps the mapped axis unmoved when the batch axis is in front
    text = str(nbjax.make_jaxpr(nbjax.vmap(pmap(jnp.sin)))(x))
    assert "transpose" not in text and "in_axes=(1,)" in text


def test_pmap_of_vmap_and_of_grad():
    x = random_array(0, (N, 3, 2))
    out = pmap(nbjax.vmap(lambda a: lax.pmax(jnp.sum(a), "i")))(x)
    assert_close(out, np.broadcast_to(x.sum(2).max(0), (N, 3)), rtol=1e-6)
    g = pmap(nbjax.grad(lambda a: jnp.sum(jnp.sin(a) * lax.axis_index("i"))))(x)
    assert_close(g, np.cos(x) * np.arange(N)[:, None, None], rtol=1e-6)


def test_grad_of_pmap_with_collectives():
    x, w = random_array(0, (N, 3)), random_array(1, (N, N, 3))

    def loss(x):
        s = pmap(lambda a: lax.psum(a ** 2, "i"))(x)
        g = pmap(lambda a: lax.all_gather(jnp.sin(a), "i"))(x)
        p = pmap(lambda a: lax.ppermute(a, "i", [(0, 1), (1, 0)]))(x)
        return jnp.sum(s) + jnp.sum(g * w) + jnp.sum(p * x)

    # psum's transpose is psum: every member's output depends on every member's input
    expected = 2 * x * N + np.cos(x) * w.sum(0) + 2 * x[::-1]
    np.testing.assert_allclose(nbjax.grad(loss)(x), expected, rtol=1e-5, atol=1e-6)
    check_grads(loss, (x,), order=2, modes=("fwd", "rev"))


def test_grad_of_pmap_with_unmapped_and_tiled_operands():
    x, y = random_array(0, (N, 3)), random_array(1, (3,))

    def loss(x, y):
        out = pmap(lambda a, b: jnp.tanh(a * b), in_axes=(0, None), out_axes=1)(x, y)
        tiled = pmap(lambda a: lax.all_gather(a, "i", tiled=True))(x)
        return jnp.sum(out ** 2) + jnp.sum(tiled * jnp.arange(N * 3.0))

    gx, gy = nbjax.grad(loss, argnums=(0, 1))(x, y)
    t = np.tanh(x * y)
    assert_close(gy, (2 * t * (1 - t ** 2) * x).sum(0), rtol=1e-5)
    assert_close(gx, 2 * t * (1 - t ** 2) * y + N * np.arange(N * 3.0).reshape(
        N, 3), rtol=1e-5)
    check_grads(loss, (x, y), order=1, modes=("fwd", "rev"))
    closed = nbjax.make_jaxpr(nbjax.grad(loss))(x, y)
    check_jaxpr(closed.jaxpr)


def test_jit_and_pmap_compose():
    x = random_array(0, (N, 3))
    f = pmap(nbjax.jit(lambda a: lax.psum(jnp.exp(a), "i")))
    assert_close(nbjax.jit(f)(x), np.broadcast_to(np.exp(x).sum(0), x.shape),
                 rtol=1e-6)
    assert_close(nbjax.jit(nbjax.grad(lambda a: f(a).sum()))(x),
                 N * np.exp(x), rtol=1e-5)


def test_vmap_of_grad_of_pmap_and_grad_of_vmap_of_pmap():
    x = random_array(0, (4, N, 3))

    def loss(a):
        return jnp.sum(pmap(lambda b: lax.pmean(jnp.sin(b), "i"))(a))

    expected = np.cos(x)  # pmean then sum over members: d/dx = cos(x)
    assert_close(nbjax.vmap(nbjax.grad(loss))(x), expected, rtol=1e-5)
    assert_close(nbjax.grad(lambda a: jnp.sum(nbjax.vmap(loss)(a)))(x),
                 expected, rtol=1e-5)


def test_reverse_mode_with_unmapped_output_is_not_supported():
    f = pmap(lambda a: lax.psum(a, "i"), out_axes=None)
    with pytest.raises(NotImplementedError, match="out_axes=None"):
        nbjax.grad(lambda a: f(a).sum())(random_array(0, (N, 3)))
    _, tangent = nbjax.jvp(f, (random_array(0, (N, 3)),), (np.ones((N, 3), np.float32),))
    assert_close(tangent, np.full(3, N))


@pytest.mark.parametrize("tiled", [False, True])
def test_psum_scatter_keeps_each_members_block_of_the_sum(tiled):
    """Under pmap and under vmap alike; its gradient is all_gather's (finite differences)."""
    rows = N * (3 if tiled else 1)
    x = random_array(np.random.default_rng(0), (N, rows, 2))
    total = x.sum(0)
    expected = total.reshape(N, -1, 2) if tiled else total
    scatter = lambda a: lax.psum_scatter(a, "i", tiled=tiled)  # noqa: E731
    assert_close(pmap(scatter)(x), expected, rtol=1e-6)
    assert_close(nbjax.vmap(scatter, axis_name="i")(x), expected, rtol=1e-6)
    check_grads(lambda a: pmap(lambda b: jnp.sin(scatter(b)))(a), (x,), order=1,
                modes=["rev"])
    with pytest.raises(ValueError, match="cannot be split"):
        pmap(lambda a: lax.psum_scatter(a, "i"))(np.ones((N, N + 1), np.float32))

"""shard_map against a loop over the mesh computed with NumPy: blocks cut by PartitionSpecs,
collectives over mesh axes, out specs that drop replicated axes, composed with jit, grad and
vmap; Mesh, make_mesh, PartitionSpec and set_mesh; JAX's errors. Four CPU devices
(NBJAX_NUM_CPU_DEVICES=4: shard_map computes every block itself, so the machine's cores do
not matter), and JAX's values on the same cases when jax is installed."""

import importlib.util
import itertools
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.sharding import AxisType, DuplicateSpecError, Mesh, PartitionSpec as P
from nbjax.test_util import check_grads
from helpers import assert_close, random_array


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("NBJAX_NUM_CPU_DEVICES", "4")


def line():
    return Mesh(np.array(nbjax.devices()), ("i",))


def grid():
    return Mesh(np.array(nbjax.devices()).reshape(2, 2), ("x", "y"))


# --- the reference: a loop over mesh positions --------------------------------------------

def _block_index(dims, d, position, sizes):
    """Which block of dimension ``d`` a position holds: its index over the dimension's mesh
    axes, the first one major."""
    index = 0
    for name in dims[d] if d < len(dims) else ():
        index = index * sizes[name] + position[name]
    return index


def _dims(spec):
    return [() if e is None else e if isinstance(e, tuple) else (e,) for e in spec]


def _block(x, spec, position, sizes):
    dims = _dims(spec)
    index = []
    for d, n in enumerate(x.shape):
        count = int(np.prod([sizes[a] for a in dims[d]])) if d < len(dims) else 1
        i = _block_index(dims, d, position, sizes)
        index.append(slice(i * (n // count), (i + 1) * (n // count)))
    return x[tuple(index)]


def loop_over_mesh(f, mesh, args, in_specs, out_spec):
    """What ``shard_map(f)`` must return, by NumPy slicing: ``f(position, *blocks)`` at every
    mesh position (``position``: axis name -> index), each result written into its block of
    the output; positions that share a block (an axis the out spec leaves out) must agree."""
    sizes = dict(mesh.shape)
    out = written = None
    for coords in itertools.product(*[range(s) for s in sizes.values()]):
        position = dict(zip(sizes, coords))
        y = np.asarray(f(position, *[_block(np.asarray(a), s, position, sizes)
                                     for a, s in zip(args, in_specs)]))
        if out is None:
            counts = [int(np.prod([sizes[a] for a in names])) for names in _dims(out_spec)]
            counts += [1] * (y.ndim - len(counts))
            out = np.zeros([n * c for n, c in zip(y.shape, counts)], y.dtype)
            written = np.zeros(out.shape, bool)
        index = tuple(slice(i * n, (i + 1) * n) for i, n in zip(
            [_block_index(_dims(out_spec), d, position, sizes) for d in range(y.ndim)],
            y.shape))
        if written[index].all():
            np.testing.assert_array_equal(out[index], y)
        out[index], written[index] = y, True
    return out


# --- blocks and reassembly -----------------------------------------------------------------

def test_blocks_match_a_loop_on_a_line():
    x, y = random_array(0, (8, 3)), random_array(1, (3, 5))
    f = nbjax.shard_map(lambda a, b: jnp.sin(a) @ b + 1.0, mesh=line(),
                        in_specs=(P("i", None), P()), out_specs=P("i"))
    out = f(x, y)
    assert isinstance(out, nbjax.Array) and out.shape == (8, 5)
    want = loop_over_mesh(lambda pos, a, b: np.sin(a) @ b + 1.0, line(), (x, y),
                          (P("i", None), P()), P("i"))
    assert_close(out, want, rtol=1e-6, scale=np.abs(np.sin(x)) @ np.abs(y) + 1.0)


@pytest.mark.parametrize("in_spec,out_spec", [
    (P("x", "y"), P("x", "y")),
    (P("y", "x"), P(None, ("x", "y"))),
    (P(("x", "y")), P(("y", "x"))),
    (P(None, ("y", "x")), P(("x", "y"), None)),
    (P("x"), P("x", "y")),  # replicated along y: the out spec splits copies along it
])
def test_blocks_match_a_loop_on_a_grid(in_spec, out_spec):
    x = random_array(2, (8, 4))

    def body(a):
        return a * 10.0 + lax.axis_index("x") - 3.0 * lax.axis_index("y")
    out = nbjax.shard_map(body, mesh=grid(), in_specs=P(*in_spec), out_specs=out_spec)(x)
    want = loop_over_mesh(lambda pos, a: a * 10.0 + pos["x"] - 3.0 * pos["y"], grid(), (x,),
                          (in_spec,), out_spec)
    assert_close(out, want, rtol=1e-6)


def test_pytree_specs_none_entries_and_python_scalars():
    x, b = random_array(3, (8, 2)), random_array(4, (2,))

    def body(d, scale):
        return {"out": d["a"] * scale + d["b"], "total": lax.psum(d["a"].sum(), "i")}
    f = nbjax.shard_map(body, mesh=line(), in_specs=({"a": P("i"), "b": None}, P()),
                        out_specs={"out": P("i"), "total": P()})
    got = f({"a": x, "b": b}, 3.0)
    assert_close(got["out"], x * 3.0 + b, rtol=1e-6)
    assert_close(got["total"], x.sum(), rtol=1e-5, scale=np.abs(x).sum())
    # one spec for every argument (a pytree prefix)
    same = nbjax.shard_map(lambda u, v: u - v, mesh=line(), in_specs=P("i"), out_specs=P("i"))
    assert_close(same(x, 2 * x), -x)


def test_an_axis_left_out_of_the_out_spec_returns_one_copy():
    x = random_array(5, (4, 6))
    # 2-D mesh: a mean over y is the same along y, so the out spec drops y
    f = nbjax.shard_map(lambda a: lax.pmean(a, "y"), mesh=grid(), in_specs=P("x", "y"),
                        out_specs=P("x"))
    halves = x.reshape(4, 2, 3)
    assert_close(f(x), halves.mean(axis=1), rtol=1e-6)
    # the whole input replicated: a psum of it is that many copies' sum
    g = nbjax.shard_map(lambda a: lax.psum(a, "i"), mesh=line(), in_specs=P(), out_specs=P())
    assert_close(g(x), 4 * x, rtol=1e-6)


# --- collectives over mesh axes ------------------------------------------------------------

def test_collectives_match_numpy():
    x = random_array(6, (8,))
    blocks = x.reshape(4, 2)

    def run(body, out_spec):
        return nbjax.shard_map(body, mesh=line(), in_specs=P("i"), out_specs=out_spec)(x)

    assert_close(run(lambda a: lax.psum(a, "i"), P()), blocks.sum(0), rtol=1e-6)
    assert_close(run(lambda a: lax.pmax(a, "i"), P()), blocks.max(0))
    assert_close(run(lambda a: lax.all_gather(a, "i"), P()), blocks)
    assert_close(run(lambda a: lax.all_gather(a, "i", tiled=True), P()), x)
    shift = [(j, (j + 1) % 4) for j in range(4)]
    assert_close(run(lambda a: lax.ppermute(a, "i", shift), P("i")),
                 np.roll(blocks, 1, axis=0).reshape(8))
    assert_close(run(lambda a: a * lax.axis_index("i"), P("i")),
                 (blocks * np.arange(4)[:, None]).reshape(8))
    scattered = nbjax.shard_map(lambda a: lax.psum_scatter(a, "i", tiled=True), mesh=line(),
                                in_specs=P("i"), out_specs=P("i"))
    wide = random_array(7, (32,))
    assert_close(scattered(wide), wide.reshape(4, 8).sum(0), rtol=1e-6)


def test_collectives_over_both_axes_of_a_grid():
    x = random_array(8, (4, 4))
    blocks = x.reshape(2, 2, 2, 2)  # (x, row, y, column)
    total = nbjax.shard_map(lambda a: lax.psum(a, ("x", "y")), mesh=grid(),
                            in_specs=P("x", "y"), out_specs=P())(x)
    assert_close(total, blocks.sum((0, 2)), rtol=1e-6)
    for names, want in [(("x", "y"), [0, 1, 2, 3]), (("y", "x"), [0, 2, 1, 3])]:
        index = nbjax.shard_map(lambda a: lax.axis_index(names)[None], mesh=grid(),
                                in_specs=P(), out_specs=P(("x", "y")))(x)
        np.testing.assert_array_equal(index, want)


# --- composed with jit, grad, vmap ---------------------------------------------------------

def _ring_sum(a, w):
    """A body mixing varying values (the blocks) and replicated ones (``w``, a psum)."""
    total = lax.psum(jnp.sum(jnp.sin(a) * w), "i")
    neighbour = lax.ppermute(a, "i", [(j, (j + 1) % 4) for j in range(4)])
    return a * w * total + neighbour, total


def _ring(a, w):
    return nbjax.shard_map(_ring_sum, mesh=line(), in_specs=(P("i"), P()),
                           out_specs=(P("i"), P()))(a, w)


def _ring_unsharded(a, w):
    """The same computation on whole arrays (``w`` repeated for every block, the ppermute
    a roll by one block)."""
    w = jnp.tile(w, 4)
    total = jnp.sum(jnp.sin(a) * w)
    return a * w * total + jnp.roll(a, 2), total


def _ring_loss(ring):
    def loss(a, w):
        out, total = ring(a, w)
        return jnp.sum(out ** 2) + 3.0 * total
    return loss


def test_jit_of_shard_map_matches_eager():
    x, w = random_array(9, (8,)), random_array(10, (2,))
    eager = _ring(x, w)
    for got, want, reference in zip(nbjax.jit(_ring)(x, w), eager, _ring_unsharded(x, w)):
        assert_close(got, want, rtol=1e-6)
        assert_close(got, reference, rtol=1e-5)


def test_grad_matches_the_unsharded_gradient():
    x, w = random_array(11, (8,)), random_array(12, (2,))
    got = nbjax.grad(_ring_loss(_ring), argnums=(0, 1))(x, w)
    want = nbjax.grad(_ring_loss(_ring_unsharded), argnums=(0, 1))(x, w)
    for g, r in zip(got, want):
        assert_close(g, r, rtol=2e-5)
    check_grads(_ring, (x, w), order=2, modes=("fwd", "rev"))


def test_grad_of_a_replicated_input_used_by_every_position():
    """Every position reads all of ``w``: its gradient sums their contributions."""
    x, w = random_array(13, (8,)), random_array(14, ())
    f = nbjax.shard_map(lambda a, w: lax.psum(jnp.sum(a * w), "i"), mesh=line(),
                        in_specs=(P("i"), P()), out_specs=P())
    gx, gw = nbjax.grad(f, argnums=(0, 1))(x, w)
    assert_close(gx, np.full(8, w), rtol=1e-6)
    assert_close(gw, x.sum(), rtol=1e-5, scale=np.abs(x).sum())
    copies = nbjax.shard_map(lambda w: w * 2.0, mesh=line(), in_specs=P(), out_specs=P("i"))
    weights = random_array(15, (12,))
    g = nbjax.grad(lambda w: jnp.sum(copies(w) * weights))(x[:3])
    assert_close(g, 2.0 * weights.reshape(4, 3).sum(0), rtol=1e-6)


def test_vmap_of_shard_map_matches_a_loop():
    x = random_array(16, (8, 3))
    f = nbjax.shard_map(lambda a: a * lax.psum(a.sum(), "i"), mesh=line(), in_specs=P("i"),
                        out_specs=P("i"))
    got = nbjax.vmap(f, in_axes=1, out_axes=1)(x)
    want = np.stack([x[:, k] * x[:, k].sum() for k in range(3)], axis=1)
    assert_close(got, want, rtol=1e-5, scale=np.abs(x).sum() * np.abs(x).max())
    text = str(nbjax.make_jaxpr(nbjax.vmap(f, in_axes=1))(x))
    assert "in_specs=(P(None, 'i'),)" in text


def test_make_jaxpr_shows_one_shard_map_equation_on_blocks():
    f = nbjax.shard_map(lambda a: lax.psum(a, "i"), mesh=line(), in_specs=P("i"),
                        out_specs=P())
    closed = nbjax.make_jaxpr(f)(jnp.zeros(8))
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive.name == "shard_map"
    assert [str(v.aval.str_short()) for v in eqn.params["jaxpr"].jaxpr.invars] == ["float32[2]"]
    text = str(closed)
    for part in ("in_specs=(P('i',),)", "out_specs=(P(),)", "psum[axes=('i',)]",
                 "mesh=Mesh('i': 4, axis_types=(Auto,))", "b:f32[2] = shard_map["):
        assert part in text


# --- out specs and check_vma ---------------------------------------------------------------

def test_an_out_spec_dropping_an_axis_the_value_varies_along_is_an_error():
    x = random_array(17, (8,))
    for body in (lambda a: a * 2.0, lambda a: a[:1] * 0.0 + lax.axis_index("i")):
        with pytest.raises(ValueError, match="replicat"):
            nbjax.shard_map(body, mesh=line(), in_specs=P("i"), out_specs=P())(x)
    with pytest.raises(ValueError, match="replicat"):  # varies along y, which P('x') drops
        nbjax.shard_map(lambda a: a, mesh=grid(), in_specs=P("x", "y"),
                        out_specs=P("x"))(random_array(18, (4, 4)))
    # unchecked: the first position's block, as JAX
    first = nbjax.shard_map(lambda a: a * 2.0, mesh=line(), in_specs=P("i"), out_specs=P(),
                            check_vma=False)(x)
    assert_close(first, 2.0 * x[:2])


# --- errors --------------------------------------------------------------------------------

def test_errors_have_jaxs_kinds():
    x = jnp.zeros(8)

    def call(body=lambda a: a, args=(x,), **kwargs):
        kwargs = {"mesh": line(), "in_specs": P("i"), "out_specs": P("i"), **kwargs}
        return nbjax.shard_map(body, **kwargs)(*args)

    with pytest.raises(ValueError, match="evenly divisible"):
        call(args=(jnp.zeros(6),))
    with pytest.raises(ValueError, match="refers to 'z'"):
        call(in_specs=P("z"))
    with pytest.raises(ValueError, match="refers to 'z'"):
        call(out_specs=P("z"))
    with pytest.raises(ValueError, match="prefix"):
        call(body=lambda a, b: a, args=(x, x), in_specs=(P("i"),))
    with pytest.raises(ValueError, match="prefix"):
        call(body=lambda a: (a, a), out_specs=(P("i"),))
    with pytest.raises(ValueError, match="too long"):
        call(in_specs=P("i", None))
    with pytest.raises(ValueError, match="too long"):
        call(body=jnp.sum)
    with pytest.raises(DuplicateSpecError):
        nbjax.shard_map(lambda a: a, mesh=grid(), in_specs=P("x", "x"),
                        out_specs=P("x", "x"))(jnp.zeros((4, 4)))
    with pytest.raises(TypeError, match="PartitionSpec"):
        call(in_specs=("i",))
    with pytest.raises(TypeError, match="PartitionSpec"):  # in_specs left to infer, Auto axes
        nbjax.shard_map(lambda a: a, mesh=line(), out_specs=P("i"))(x)
    with pytest.raises(ValueError, match="subset"):
        call(axis_names={"q"})
    with pytest.raises(TypeError, match="callable"):
        nbjax.shard_map(3, mesh=line(), in_specs=P("i"), out_specs=P("i"))
    with pytest.raises(NameError, match="unbound axis name"):
        call(body=lambda a: lax.psum(a, "j"))


def test_axis_names_maps_over_some_mesh_axes():
    x = random_array(19, (8,))
    f = nbjax.shard_map(lambda a: a + lax.axis_index("x"), mesh=grid(), in_specs=P("x"),
                        out_specs=P("x"), axis_names={"x"})
    assert_close(f(x), x + np.repeat([0.0, 1.0], 4), rtol=1e-6)
    with pytest.raises(NameError):  # y is not mapped over: the body does not see it
        nbjax.shard_map(lambda a: a + lax.axis_index("y"), mesh=grid(), in_specs=P("x"),
                        out_specs=P("x"), axis_names={"x"})(x)


# --- Mesh, make_mesh, PartitionSpec, set_mesh ----------------------------------------------

def test_mesh_describes_devices_with_named_axes():
    mesh = grid()
    assert list(mesh.shape.items()) == [("x", 2), ("y", 2)]
    assert mesh.axis_names == ("x", "y") and mesh.axis_sizes == (2, 2) and mesh.size == 4
    assert mesh.devices.shape == (2, 2) and mesh.devices[1, 0] == nbjax.devices()[2]
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)
    assert mesh == grid() and hash(mesh) == hash(grid()) and mesh != line()
    assert repr(mesh) == ("Mesh(axis_sizes=(2, 2), axis_names=('x', 'y'), "
                          "axis_types=(Auto, Auto))")
    assert str(mesh) == "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))"
    assert Mesh(nbjax.devices(), "i").axis_names == ("i",)
    with pytest.raises(ValueError, match="ndim"):
        Mesh(np.array(nbjax.devices()), ("x", "y"))
    with pytest.raises(ValueError, match="axis_types"):
        Mesh(np.array(nbjax.devices()), "i", axis_types=(AxisType.Auto,) * 2)
    with pytest.warns(DeprecationWarning, match="set_mesh"):
        with mesh:
            pass


def test_make_mesh():
    mesh = nbjax.make_mesh((2, 2), ("x", "y"))
    assert mesh.axis_types == (AxisType.Explicit, AxisType.Explicit)
    assert list(mesh.devices.flat) == nbjax.devices()
    assert nbjax.make_mesh((3,), ("i",)).size == 3  # the first devices, as JAX
    two = nbjax.make_mesh((2,), ("i",), (AxisType.Auto,), devices=nbjax.devices()[2:])
    assert [d.id for d in two.devices] == [2, 3] and two.axis_types == (AxisType.Auto,)
    with pytest.raises(ValueError, match="Number of devices 4 must be >= the product"):
        nbjax.make_mesh((2, 4), ("x", "y"))
    with pytest.raises(ValueError, match="ndim"):
        nbjax.make_mesh((2, 2), ("x",))
    # On Explicit axes in_specs may be left out: nbjax arrays are whole (replicated).
    f = nbjax.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, out_specs=P())
    assert_close(f(jnp.ones(3)), np.full(3, 2.0))


def test_partition_spec():
    assert repr(P()) == "P()" and repr(P("x")) == "P('x',)"
    assert repr(P("x", None, ("a", "b"))) == "P('x', None, ('a', 'b'))"
    assert P(("x",)) == P("x") and P(()) == P(None) and P("x", None) != P("x")
    assert P("x", "y") != ("x", "y") and hash(P("x")) == hash(P(("x",)))
    assert len(P("x", None)) == 2 and P("x", ("a", "b"))[1] == ("a", "b")
    assert list(P("x", None)) == ["x", None] and P("x", "y")[1:] == ("y",)
    assert nbjax.P is P and nbjax.sharding.PartitionSpec is P
    with pytest.raises(NotImplementedError, match="nbjax"):
        P("x", unreduced={"y"})


def test_set_mesh_as_a_context_and_as_a_setter():
    x = random_array(20, (8,))
    f = nbjax.shard_map(lambda a: a * lax.axis_index("i"), in_specs=P("i"), out_specs=P("i"))
    with pytest.raises(ValueError, match="context mesh cannot be empty"):
        f(x)
    with nbjax.set_mesh(line()) as entered:
        assert entered is None and nbjax.sharding.get_mesh() == line()
        assert_close(f(x), x * np.repeat(np.arange(4), 2))
    assert nbjax.sharding.get_mesh().empty
    try:
        nbjax.set_mesh(line())
        assert nbjax.sharding.get_mesh() == line()
    finally:
        nbjax.set_mesh(None)
    assert nbjax.sharding.get_mesh().empty
    with pytest.raises(ValueError, match="Expected mesh"):
        nbjax.set_mesh(3)


# --- against JAX ---------------------------------------------------------------------------

def same_cases(jax):
    """shard_map cases written once against the JAX API, run with ``jax`` (JAX, in a
    subprocess with four CPU devices) or with nbjax: name -> NumPy result."""
    jnp_, lax_, P_ = jax.numpy, jax.lax, jax.sharding.PartitionSpec
    devices = np.array(jax.devices()[:4])
    line_ = jax.sharding.Mesh(devices, ("i",))
    grid_ = jax.sharding.Mesh(devices.reshape(2, 2), ("x", "y"))
    rng = np.random.RandomState(0)
    x8, x32, w = (rng.standard_normal(s).astype(np.float32) for s in ((8,), (32,), (2,)))
    x44 = rng.standard_normal((4, 4)).astype(np.float32)

    def sm(body, in_specs, out_specs, mesh=line_, **kwargs):
        return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kwargs)

    def ring(a, w):
        total = lax_.psum(jnp_.sum(jnp_.sin(a) * w), "i")
        return a * w * total + lax_.ppermute(a, "i", [(j, (j + 1) % 4) for j in range(4)]), total

    ring_sm = sm(ring, (P_("i"), P_()), (P_("i"), P_()))
    results = {
        "psum": sm(lambda a: lax_.psum(a, "i"), P_("i"), P_())(x8),
        "grid_matmul": sm(lambda a, b: jnp_.sin(a) @ b, (P_("x", None), P_(None, "y")),
                          P_("x", "y"), grid_)(x44, x44.T),
        "tuple_axes": sm(lambda a: a + 10.0 * lax_.axis_index(("x", "y")), P_(("x", "y")),
                         P_(("y", "x")), grid_)(x8),
        "pmean_y": sm(lambda a: lax_.pmean(a, "y"), P_("x", "y"), P_("x"), grid_)(x44),
        "all_gather": sm(lambda a: lax_.all_gather(a, "i", tiled=True), P_("i"),
                         P_("i"))(x8),
        "psum_scatter": sm(lambda a: lax_.psum_scatter(a, "i", tiled=True), P_("i"),
                           P_("i"))(x32),
        "all_to_all": sm(lambda a: lax_.all_to_all(a, "i", 0, 0, tiled=True), P_("i"),
                         P_("i"))(x32),
        "ring": ring_sm(x8, w)[0],
        "jit_ring": jax.jit(ring_sm)(x8, w)[0],
        "vmap": jax.vmap(sm(lambda a: a * lax_.psum(a.sum(), "i"), P_("i"), P_("i")))(
            x32.reshape(4, 8)),
        "unchecked": sm(lambda a: a * 2.0, P_("i"), P_(), check_vma=False)(x8),
    }
    grads = jax.grad(lambda a, w: jnp_.sum(ring_sm(a, w)[0] ** 2) + 3.0 * ring_sm(a, w)[1],
                     argnums=(0, 1))(x8, w)
    results.update(grad_a=grads[0], grad_w=grads[1])
    return {name: np.asarray(value) for name, value in results.items()}


_JAX_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import jax
import test_shard_map
print(json.dumps({k: v.tolist() for k, v in test_shard_map.same_cases(jax).items()}))
"""


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_same_values_as_jax():
    tests = pathlib.Path(__file__).parent
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(tests.parent), str(tests)]))
    done = subprocess.run([sys.executable, "-c", _JAX_SCRIPT, str(tests)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    jax_results = json.loads(done.stdout.strip().splitlines()[-1])
    ours = same_cases(nbjax)
    assert sorted(ours) == sorted(jax_results)
    for name, value in ours.items():
        assert_close(value, np.asarray(jax_results[name], value.dtype), rtol=2e-5,
                     err_msg=name)

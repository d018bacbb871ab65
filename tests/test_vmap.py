"""vmap's API: in_axes/out_axes (ints, None, negative, pytree prefixes), keyword arguments,
nesting, collectives, the jaxprs it stages, and its errors."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from helpers import assert_close, random_array

rng = np.random.default_rng(0)


def loop(f, in_axes, args, out_axis=0):
    """The reference: apply f to each slice and stack the results."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)])
            for i in range(size)]
    return np.stack([np.asarray(o) for o in outs], axis=out_axis)


@pytest.mark.parametrize("in_axes", [(0, 0), (1, None), (-1, 0), (None, 1), (0, -2)])
def test_elementwise_against_loop(in_axes):
    f = lambda x, y: jnp.sin(x) * y + x
    shapes = {0: (3, 4), 1: (4, 3), -1: (4, 3), -2: (3, 4), None: (4,)}
    x = random_array(rng, (*shapes[in_axes[0]],))
    y = random_array(rng, (*shapes[in_axes[1]],))
    assert_close(nbjax.vmap(f, in_axes)(x, y), loop(f, in_axes, (x, y)),
                 rtol=1e-6)


@pytest.mark.parametrize("out_axes", [0, 1, -1])
def test_out_axes(out_axes):
    x = random_array(rng, (3, 4, 5))
    f = lambda a: a * 2.0
    out = nbjax.vmap(f, out_axes=out_axes)(x)
    assert_close(out, loop(f, (0,), (x,), out_axis=out_axes), rtol=1e-6)


def test_unbatched_output_is_broadcast_for_out_axes():
    out = nbjax.vmap(lambda x, c: c, in_axes=(0, None))(random_array(rng, (3, 2)), np.float32(7))
    np.testing.assert_array_equal(out, np.full(3, 7, np.float32))
    out = nbjax.vmap(lambda x: (x, 1.0), out_axes=(0, None))(random_array(rng, (3,)))
    assert float(out[1]) == 1.0
    with pytest.raises(ValueError, match="got axis spec None but output was batched on axis 0"):
        nbjax.vmap(lambda x: x, out_axes=None)(random_array(rng, (3,)))
    with pytest.raises(ValueError, match=r"mapped output \(axis_name=i\) but out_axes is None"):
        nbjax.vmap(lambda x: x, out_axes=None, axis_name="i")(random_array(rng, (3,)))


def test_sum_match_sums_a_mapped_output_whose_out_axes_is_none():
    """(As ``jax.vmap(..., sum_match=True)``: an unmapped output stays as it is.)"""
    x, y = random_array(rng, (2, 3)), np.float32(2.5)
    f = lambda x, y: (jnp.sin(x) * y, y, x > 0)               # noqa: E731
    total, same, count = nbjax.vmap(f, in_axes=(1, None), out_axes=None, sum_match=True)(x, y)
    assert_close(total, loop(lambda x, y: f(x, y)[0], (1, None), (x, y)).sum(0), rtol=1e-6)
    assert same == y
    assert count.dtype == np.int32
    np.testing.assert_array_equal(count, (x > 0).sum(1))
    mapped = nbjax.vmap(lambda x: x * 2, out_axes=0, sum_match=True)(x)
    assert_close(mapped, x * 2, rtol=1e-6)


def test_pytree_in_axes_and_kwargs():
    params = {"w": random_array(rng, (4, 3)), "b": random_array(rng, (3,))}
    xs = random_array(rng, (5, 4))

    def predict(params, x):
        return jnp.tanh(jnp.dot(x, params["w"]) + params["b"])
    out = nbjax.vmap(predict, in_axes=({"w": None, "b": None}, 0))(params, xs)
    expected = np.stack([np.tanh(x @ params["w"] + params["b"]) for x in xs])
    assert_close(out, expected, rtol=1e-5)
    out = nbjax.vmap(predict, in_axes=(None, 0))(params, xs)
    assert_close(out, expected, rtol=1e-5)
    out = nbjax.vmap(lambda a, b=None: a + b)(random_array(rng, (3,)), b=random_array(rng, (3,)))
    assert out.shape == (3,)


def test_nested_vmap_pairwise_distances():
    d = lambda a, b: jnp.sqrt(jnp.sum((a - b) ** 2))
    xs, ys = random_array(rng, (4, 3)), random_array(rng, (5, 3))
    pairwise = nbjax.vmap(nbjax.vmap(d, (None, 0)), (0, None))(xs, ys)
    expected = np.sqrt(((xs[:, None, :] - ys[None, :, :]) ** 2).sum(-1))
    assert_close(pairwise, expected, rtol=1e-5)


def test_vmap_inside_and_around_make_jaxpr():
    x = random_array(rng, (3, 4))
    closed = nbjax.make_jaxpr(nbjax.vmap(lambda a: jnp.sin(a) + 1.0))(x)
    assert str(closed) == ("{ lambda ; a:f32[3,4]. let\n    b:f32[3,4] = sin a\n"
                           "    c:f32[3,4] = add b 1.0:f32[]\n  in (c,) }")
    # make_jaxpr inside vmap traces the per-example function
    out = nbjax.vmap(lambda a: len(nbjax.make_jaxpr(jnp.sin)(a).eqns) + a)(x)
    assert_close(out, x + 1)


def test_seed_batched_matvec_is_one_dot_general():
    m, v = random_array(rng, (10, 6)), random_array(rng, (4, 6))
    f = nbjax.vmap(jnp.dot, in_axes=(None, 0))
    assert_close(f(m, v), (m @ v.T).T, rtol=1e-5, scale=(np.abs(m) @ np.abs(v).T).T)
    closed = nbjax.make_jaxpr(f)(m, v)
    names = [e.primitive.name for e in closed.eqns]
    assert names.count("dot_general") == 1
    # As in JAX, the only other equation moves the result's batch axis to out_axes=0:
    # neither operand is transposed or broadcast first.
    m_var, v_var = closed.jaxpr.invars
    assert closed.eqns[0].primitive.name == "dot_general"
    assert set(closed.eqns[0].invars) == {m_var, v_var}
    assert names[1:] in ([], ["transpose"])


def test_collectives_under_vmap():
    x = random_array(rng, (4, 3))
    assert_close(nbjax.vmap(lambda a: lax.psum(a, "i"), axis_name="i")(x),
                 np.broadcast_to(x.sum(0), x.shape), rtol=1e-5)
    np.testing.assert_allclose(nbjax.vmap(lambda a: a - lax.pmean(a, "i"), axis_name="i")(x),
                               x - x.mean(0), rtol=1e-5, atol=1e-6)
    assert_close(nbjax.vmap(lambda a: lax.pmax(a, "i"), axis_name="i")(x),
                 np.broadcast_to(x.max(0), x.shape))
    assert_close(nbjax.vmap(lambda a: lax.pmin(a, "i"), axis_name="i")(x),
                 np.broadcast_to(x.min(0), x.shape))
    np.testing.assert_array_equal(nbjax.vmap(lambda a: lax.axis_index("i"), axis_name="i")(x),
                                  np.arange(4))
    gathered = nbjax.vmap(lambda a: lax.all_gather(a, "i"), axis_name="i")(x)
    np.testing.assert_array_equal(gathered, np.broadcast_to(x, (4, 4, 3)))
    # an unbatched value summed over the axis counts every member
    assert_close(
        nbjax.vmap(lambda a: lax.psum(1.0, "i"), axis_name="i")(x), np.full(4, 4.0))


def test_collectives_in_nested_vmaps_name_the_right_axis():
    x = random_array(rng, (2, 3))
    out = nbjax.vmap(nbjax.vmap(lambda a: lax.psum(a, "outer"), axis_name="inner"),
                     axis_name="outer")(x)
    assert_close(out, np.broadcast_to(x.sum(0), x.shape), rtol=1e-6,
                 scale=np.broadcast_to(np.abs(x).sum(0), x.shape))
    out = nbjax.vmap(nbjax.vmap(lambda a: lax.psum(a, ("outer", "inner")), axis_name="inner"),
                     axis_name="outer")(x)
    assert_close(out, np.full(x.shape, x.sum()), rtol=1e-5, scale=np.abs(x).sum())


def test_unbound_axis_name():
    with pytest.raises(NameError, match="unbound axis name: j"):
        nbjax.vmap(lambda a: lax.psum(a, "j"), axis_name="i")(random_array(rng, (3,)))


def test_inconsistent_sizes_error_lists_each_argument():
    with pytest.raises(ValueError) as info:
        nbjax.vmap(lambda x, y: x + y)(random_array(rng, (3,)), random_array(rng, (4,)))
    msg = str(info.value)
    assert "inconsistent sizes" in msg and "size 3" in msg and "size 4" in msg
    assert "argument x" in msg and "argument y" in msg


def test_in_axes_errors():
    with pytest.raises(ValueError, match="rank should be at least 2"):
        nbjax.vmap(lambda x: x, in_axes=1)(random_array(rng, (3,)))
    with pytest.raises(ValueError, match="tree prefix"):
        nbjax.vmap(lambda x, y: x, in_axes=(0,))(random_array(rng, (3,)), random_array(rng, (3,)))
    with pytest.raises(ValueError, match="tree prefix"):
        nbjax.vmap(lambda x: x, in_axes=({"a": 0},))([random_array(rng, (3,))])
    with pytest.raises(TypeError, match="in_axes"):
        nbjax.vmap(lambda x: x, in_axes="0")(random_array(rng, (3,)))
    with pytest.raises(ValueError, match="at least one non-None"):
        nbjax.vmap(lambda x: x, in_axes=None)(random_array(rng, (3,)))
    out = nbjax.vmap(lambda x: x * 2, in_axes=None, axis_size=3)(np.float32(2))
    np.testing.assert_array_equal(out, [4, 4, 4])

"""nbjax.ops segment reductions against NumPy's ``ufunc.at`` on identity-filled outputs: values
and dtypes, empty segments, dropped or clipped out-of-range ids, buckets, the errors JAX
raises, and jit, vmap and grad (against finite differences and JAX's derivative rules)."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import ops
from nbjax.test_util import check_grads
from helpers import assert_close

rng = np.random.RandomState(0)

# name -> (ufunc that combines, identity for a dtype)
REDUCTIONS = {
    "segment_sum": (np.add, lambda dt: 0),
    "segment_prod": (np.multiply, lambda dt: 1),
    "segment_max": (np.maximum, lambda dt: False if dt == np.bool_ else
                    np.iinfo(dt).min if dt.kind in "iu" else -np.inf),
    "segment_min": (np.minimum, lambda dt: True if dt == np.bool_ else
                    np.iinfo(dt).max if dt.kind in "iu" else np.inf),
}
NAMES = list(REDUCTIONS)


def reference(name, data, ids, num_segments, clip=False):
    """The segment reduction by ``ufunc.at``: out-of-range ids dropped (or clipped)."""
    ufunc, identity = REDUCTIONS[name]
    data, ids = np.asarray(data), np.asarray(ids)
    out = np.full((num_segments,) + data.shape[1:], identity(data.dtype), data.dtype)
    if clip:
        ids = np.clip(ids, 0, num_segments - 1)
    keep = (ids >= 0) & (ids < num_segments)
    ufunc.at(out, ids[keep], data[keep])
    return out


def _data(dtype, shape):
    if dtype == np.bool_:
        return rng.rand(*shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.randint(0, 5, size=shape).astype(dtype)
    return rng.randn(*shape).astype(dtype)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float16])
def test_values_dtypes_empty_segments_and_dropped_ids(name, dtype):
    data = _data(dtype, (9, 2))
    ids = np.array([0, 4, 0, 2, -1, 7, 2, 2, 5])  # 1 and 3 empty; -1, 5 and 7 out of range
    out = getattr(ops, name)(data, ids, 5)
    assert out.dtype == dtype and out.shape == (5, 2)
    np.testing.assert_array_equal(np.asarray(out), reference(name, data, ids, 5))


@pytest.mark.parametrize("name", ["segment_max", "segment_min"])
def test_bool_extrema(name):
    data, ids = np.array([True, False, False, True]), np.array([0, 0, 1, 3])
    out = getattr(ops, name)(data, ids, 4)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(out), reference(name, data, ids, 4))


@pytest.mark.parametrize("name", ["segment_sum", "segment_prod"])
def test_bool_arithmetic_is_a_type_error(name):
    with pytest.raises(TypeError):
        getattr(ops, name)(np.array([True, False]), np.array([0, 1]), 2)


@pytest.mark.parametrize("name", NAMES)
def test_clip_mode_clamps_ids(name):
    data, ids = _data(np.float32, (6,)), np.array([0, 0, 1, 3, -1, 7])
    for mode in ("clip", lax_mode("CLIP")):
        out = getattr(ops, name)(data, ids, 5, mode=mode)
        assert_close(out, reference(name, data, ids, 5, clip=True), rtol=1e-6)


def lax_mode(name):
    return getattr(nbjax.lax.GatherScatterMode, name)


@pytest.mark.parametrize("name", NAMES)
def test_num_segments_defaults_to_max_id_plus_one(name):
    data, ids = _data(np.float32, (5,)), np.array([0, 3, 1, 3, 2])
    out = getattr(ops, name)(data, ids)
    assert out.shape == (4,)
    assert_close(out, reference(name, data, ids, 4), rtol=1e-6)
    assert getattr(ops, name)(data, ids, np.int64(6)).shape == (6,)
    assert getattr(ops, name)(data, ids, jnp.array(2)).shape == (2,)
    assert getattr(ops, name)(data, ids, 0).shape == (0,)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_buckets_give_the_same_result(name, dtype):
    data, ids = _data(dtype, (7, 3)), rng.randint(0, 4, size=7)
    f = getattr(ops, name)
    out = f(data, ids, 5, bucket_size=3)
    assert out.dtype == dtype
    np.testing.assert_allclose(np.asarray(out), reference(name, data, ids, 5), rtol=1e-6)


def test_scalar_data_broadcasts_and_empty_data_gives_identities():
    assert_close(ops.segment_sum(3.0, np.array([0, 1, 1]), 2), np.array([3.0, 6.0]))
    assert ops.segment_sum(3.0, np.array([0, 1]), 2).dtype == np.float32
    empty = jnp.zeros((0,))
    np.testing.assert_array_equal(np.asarray(ops.segment_max(empty, jnp.zeros(0, int), 2)),
                                  [-np.inf, -np.inf])
    np.testing.assert_array_equal(np.asarray(ops.segment_prod(empty, jnp.zeros(0, int), 2)),
                                  [1.0, 1.0])


def test_errors_are_jax_s():
    data, ids = jnp.arange(3.0), jnp.array([0, 1, 1])
    with pytest.raises(ValueError, match="num_segments must be non-negative"):
        ops.segment_sum(data, ids, -1)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        ops.segment_max([1.0, 2.0], ids)
    with pytest.raises(TypeError, match="Indexer must have integer"):
        ops.segment_min(data, jnp.array([0.0, 1.0, 1.0]), 2)
    with pytest.raises(TypeError):
        ops.segment_sum(data, ids, 3.0)
    with pytest.raises(ValueError, match="Unknown gather mode"):
        ops.segment_prod(data, ids, 2, mode="foo")
    with pytest.raises(ValueError, match="zero-size array"):
        ops.segment_sum(jnp.zeros(0), jnp.zeros(0, int))
    with pytest.raises(NotImplementedError):
        ops.segment_sum(data, ids, 2, out_sharding=object())


@pytest.mark.parametrize("name", NAMES)
def test_jit_needs_a_static_num_segments(name):
    f = getattr(ops, name)
    data, ids = _data(np.float32, (6, 2)), np.array([0, 0, 1, 3, -1, 2])
    assert_close(nbjax.jit(f, static_argnums=2)(data, ids, 4), f(data, ids, 4), rtol=1e-6)
    assert_close(nbjax.jit(lambda d, i: f(d, i, 4, mode="clip"))(data, ids),
                 reference(name, data, ids, 4, clip=True), rtol=1e-6)
    with pytest.raises(nbjax.errors.ConcretizationTypeError, match="num_segments"):
        nbjax.jit(f)(data, ids)
    with pytest.raises(nbjax.errors.ConcretizationTypeError, match="num_segments"):
        nbjax.jit(f)(data, ids, 4)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_matches_a_loop(name):
    f = getattr(ops, name)
    data, ids = _data(np.float32, (3, 5)), rng.randint(-1, 4, size=(3, 5))
    over_data = nbjax.vmap(lambda d: f(d, ids[0], 4))(data)
    over_both = nbjax.jit(nbjax.vmap(lambda d, i: f(d, i, 4)))(data, ids)
    for k in range(3):
        assert_close(over_data[k], reference(name, data[k], ids[0], 4), rtol=1e-6)
        assert_close(over_both[k], reference(name, data[k], ids[k], 4), rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_grads_against_finite_differences(name, x64):
    # distinct values: no ties in max/min; no empty segment (an infinite identity has no
    # finite difference); unique ids for prod: only then is scatter_mul differentiable
    data = np.array([[0.3, -1.2], [1.7, 0.4], [-0.8, 2.1], [1.1, -0.5], [0.9, 0.2]])
    unique = name == "segment_prod"
    ids = np.array([2, 0, 5, 1, -1]) if unique else np.array([0, 2, 0, 1, 5])
    f = getattr(ops, name)
    check_grads(lambda d: f(d, ids, 3, unique_indices=unique), (data,), order=1,
                modes=("fwd", "rev"))


def test_segment_prod_gradient_needs_unique_indices():
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        nbjax.grad(lambda x: ops.segment_prod(x, jnp.array([0, 0, 1]), 2).sum())(
            jnp.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("name,expected", [("segment_max", [0, 1, 0.5, 0.5, 1, 0]),
                                           ("segment_min", [1, 0, 0.5, 0.5, 0, 1])])
def test_tied_extrema_share_the_gradient(name, expected):
    """JAX's rule: the cotangent of a segment splits evenly among the tied elements."""
    x = jnp.array([1.0, 2.0, 3.0, 3.0, 5.0, -1.0])
    g = nbjax.grad(lambda x: getattr(ops, name)(x, jnp.array([0, 0, 1, 1, 2, 2]), 3).sum())(x)
    assert_close(g, np.array(expected, np.float32))


def test_segment_sum_gradient_is_a_gather():
    ids = jnp.array([0, 2, 2, -1, 7])
    w = jnp.array([1.0, 2.0, 3.0])
    g = nbjax.jit(nbjax.grad(lambda x: (ops.segment_sum(x, ids, 3) * w).sum()))(jnp.ones(5))
    assert_close(g, np.array([1.0, 3.0, 3.0, 0.0, 0.0], np.float32))


def test_reachable_from_the_package():
    assert nbjax.ops is ops
    assert sorted(ops.__all__) == sorted(NAMES)

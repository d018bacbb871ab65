"""vmap and JVP rules of sort (one or several operands, sort_key_val) and top_k."""

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.core import check_jaxpr, dtypes
from nbjax.test_util import check_grads
from helpers import check_vmap
from test_rules_reductions import primitive_names, spaced

rng = np.random.RandomState(1)
X = spaced((3, 4, 5))
KEYS = rng.randint(0, 3, (3, 4, 5)).astype(np.int32)  # ties: the stable order decides


# --- vmap ----------------------------------------------------------------------------------

@pytest.mark.parametrize("in_axis", [0, 1, -1])
@pytest.mark.parametrize("dimension", [0, 1, -1])
def test_vmap_sort(dimension, in_axis):
    check_vmap(lambda v: lax.sort(v, dimension), (X,), (in_axis,))


def batched(members, axis):
    """Batch members (along a new leading axis) as a vmap input with batch axis ``axis``,
    or the first member alone for ``axis=None``."""
    return members[0] if axis is None else np.moveaxis(members, 0, axis)


@pytest.mark.parametrize("in_axes", [(0, 0), (1, 2), (None, 1), (2, None)])
@pytest.mark.parametrize("num_keys", [1, 2])
def test_vmap_sort_several_operands(in_axes, num_keys):
    keys, values = batched(KEYS, in_axes[0]), batched(X, in_axes[1])
    check_vmap(lambda k, v: lax.sort((k, v), 0, num_keys=num_keys), (keys, values), in_axes)


@pytest.mark.parametrize("in_axes", [(0, 1), (None, 0), (1, None)])
def test_vmap_sort_key_val(in_axes):
    keys, values = batched(X, in_axes[0]), batched(KEYS, in_axes[1])
    check_vmap(lambda k, v: lax.sort_key_val(k, v, 0), (keys, values), in_axes)


@pytest.mark.parametrize("in_axis", [0, 1, -1])
@pytest.mark.parametrize("axis", [0, -1])
def test_vmap_top_k(axis, in_axis):
    check_vmap(lambda v: lax.top_k(v, 2, axis=axis), (X,), (in_axis,))


def test_vmap_nested_and_out_axes():
    f = nbjax.vmap(nbjax.vmap(lambda v: lax.top_k(v, 3)[0], in_axes=1), in_axes=0, out_axes=-1)
    expected = np.moveaxis(-np.sort(-np.swapaxes(X, 1, 2), axis=-1)[..., :3], 0, -1)
    np.testing.assert_array_equal(np.asarray(f(X)), expected)


def test_vmap_sort_moves_nothing():
    jaxpr = nbjax.make_jaxpr(nbjax.vmap(lambda v: lax.sort(v, 0), in_axes=2, out_axes=2))(X)
    assert primitive_names(jaxpr.jaxpr) == ["sort"]
    assert jaxpr.jaxpr.eqns[0].params["dimension"] == 0


# --- derivatives ---------------------------------------------------------------------------

@pytest.mark.parametrize("dimension", [0, 1])
def test_grad_sort(dimension):
    check_grads(lambda v: lax.sort(v, dimension), (X[0],), order=2)


def test_grad_sort_several_operands():
    values = rng.randn(4, 5).astype(np.float32)
    check_grads(lambda k, v: lax.sort((k, v), 1, num_keys=1), (X[0], values), order=2)
    # Integer keys: only the values are differentiated; they follow the keys' permutation.
    check_grads(lambda v: lax.sort_key_val(KEYS[0], v, 1)[1], (values,), order=2)
    _, tangents = nbjax.jvp(lambda v: lax.sort_key_val(KEYS[0], v, 1), (values,), (values,))
    order = np.argsort(KEYS[0], axis=1, kind="stable")
    np.testing.assert_array_equal(np.asarray(tangents[1]),
                                  np.take_along_axis(values, order, 1))
    assert np.asarray(tangents[0]).dtype == dtypes.float0


def test_sort_gradient_is_the_inverse_permutation():
    x = np.array([0.3, -1.0, 2.0, 0.1], np.float32)
    weights = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    grad = nbjax.grad(lambda v: lax.reduce_sum(lax.mul(lax.sort(v), weights), (0,)))(x)
    np.testing.assert_array_equal(np.asarray(grad), [3.0, 1.0, 4.0, 2.0])


@pytest.mark.parametrize("axis,k", [(-1, 2), (0, 4), (1, 1)])
def test_grad_top_k(axis, k):
    check_grads(lambda v: lax.top_k(v, k, axis=axis)[0], (X[1],), order=2)


def test_top_k_indices_have_float0_tangents():
    _, (t_values, t_indices) = nbjax.jvp(lambda v: lax.top_k(v, 2), (X[0],), (X[0],))
    assert np.asarray(t_indices).dtype == dtypes.float0
    order = np.argsort(-X[0], axis=-1)[:, :2]
    np.testing.assert_array_equal(np.asarray(t_values), np.take_along_axis(X[0], order, -1))


@pytest.mark.parametrize("f", [
    lambda v: lax.reduce_sum(lax.mul(lax.sort(v, 0), v), (0, 1)),
    lambda v: lax.reduce_sum(lax.mul(lax.top_k(v, 2)[0], lax.top_k(v, 2)[0]), (0, 1)),
])
def test_grad_jaxprs_type_check_and_vmap(f):
    closed = nbjax.make_jaxpr(nbjax.grad(f))(X[0])
    check_jaxpr(closed.jaxpr)
    check_vmap(nbjax.grad(f), (X,), (0,), rtol=1e-5)
    check_vmap(nbjax.grad(f), (X,), (2,), rtol=1e-5)

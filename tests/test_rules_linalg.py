"""vmap, JVP and transpose rules of the contractions: dot_general and conv_general_dilated.

Finite differences of these products in float32 lose digits in proportion to the values'
size, so the operands are kept small (about 0.5): every check runs at the default tolerance.
"""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.core import check_jaxpr
from nbjax.test_util import check_grads
from helpers import assert_close, check_vmap
from test_rules_reductions import primitive_names

rng = np.random.RandomState(2)


def small(*shape):
    return (0.5 * rng.randn(*shape)).astype(np.float32)


# --- dot_general ---------------------------------------------------------------------------

def test_vmap_matrix_vector_is_one_dot_general():
    M, V = small(5, 4), small(3, 4)
    closed = nbjax.make_jaxpr(nbjax.vmap(jnp.dot, in_axes=(None, 0)))(M, V)
    assert primitive_names(closed.jaxpr).count("dot_general") == 1
    m = closed.jaxpr.invars[0]
    assert not any(eqn.primitive.name == "transpose" and m in eqn.invars
                   for eqn in closed.jaxpr.eqns)
    check_vmap(jnp.dot, (M, V), (None, 0), rtol=1e-5, terms=jnp.dot)


# (lhs shape, rhs shape, dimension numbers) of the unbatched products
DOTS = [
    ((4,), (4,), (((0,), (0,)), ((), ()))),
    ((3, 4), (4, 2), (((1,), (0,)), ((), ()))),
    ((4, 3), (2, 4), (((0,), (1,)), ((), ()))),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    ((2, 4, 3), (3, 2, 4), (((0, 1), (1, 2)), ((), ()))),
]


def _batched(shape, axis, size=3):
    if axis is None:
        return small(*shape)
    return np.moveaxis(small(size, *shape), 0, axis)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (-1, 1), (1, -1),
                                     (None, -1)])
@pytest.mark.parametrize("lhs_shape,rhs_shape,dims", DOTS)
def test_vmap_dot_general(lhs_shape, rhs_shape, dims, in_axes):
    lhs, rhs = _batched(lhs_shape, in_axes[0]), _batched(rhs_shape, in_axes[1])
    f = lambda a, b: lax.dot_general(a, b, dims)  # noqa: E731
    check_vmap(f, (lhs, rhs), in_axes, rtol=1e-5, terms=f)
    closed = nbjax.make_jaxpr(nbjax.vmap(f, in_axes=in_axes))(
        lhs, rhs)
    # Nothing is moved before the product; at most the result goes to out_axes=0.
    assert primitive_names(closed.jaxpr) in (["dot_general"], ["dot_general", "transpose"])


@pytest.mark.parametrize("out_axes", [1, -1])
def test_vmap_dot_general_out_axes_and_nesting(out_axes):
    dims = (((1,), (0,)), ((), ()))
    lhs, rhs = small(2, 3, 4, 5), small(5, 3, 2)
    f = nbjax.vmap(nbjax.vmap(lambda a, b: lax.dot_general(a, b, dims), in_axes=(0, None)),
                   in_axes=(1, 1), out_axes=out_axes)
    expected = np.einsum("bqkc,cqj->qbkj", lhs, rhs)  # q: the outer vmap, b: the inner
    terms = np.einsum("bqkc,cqj->qbkj", np.abs(lhs), np.abs(rhs))
    assert_close(np.asarray(f(lhs, rhs)), np.moveaxis(expected, 0, out_axes), rtol=1e-5,
                 scale=np.moveaxis(terms, 0, out_axes))


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims", DOTS)
def test_grad_dot_general(lhs_shape, rhs_shape, dims):
    check_grads(lambda a, b: lax.dot_general(a, b, dims),
                (small(*lhs_shape), small(*rhs_shape)), order=2)


def test_grad_dot_general_mixed_dtypes():
    a = small(3, 4)
    ints = rng.randint(-3, 4, (4, 2)).astype(np.int32)
    f = lambda x: lax.dot_general(x, ints, (((1,), (0,)), ((), ())))  # noqa: E731
    check_grads(f, (a,), order=2)
    half = small(4, 2).astype(np.float16)
    g = lambda x: lax.dot_general(x, half, (((1,), (0,)), ((), ())))  # noqa: E731
    grad = nbjax.grad(lambda x: lax.reduce_sum(g(x), (0, 1)))(a)
    assert np.asarray(grad).dtype == np.float32
    assert_close(np.asarray(grad), np.broadcast_to(
        half.astype(np.float32).sum(1), (3, 4)), rtol=1e-6)
    _, pullback = nbjax.vjp(lambda h: lax.dot_general(a, h, (((1,), (0,)), ((), ()))), half)
    ct = pullback(np.ones((3, 2), np.float32))[0]
    assert np.asarray(ct).dtype == np.float16


def test_dot_general_transpose_jaxpr():
    a, b = small(2, 3, 4), small(4, 2, 5)
    dims = (((2,), (0,)), ((0,), (1,)))
    for argnums in (0, 1):
        f = lambda x, y: lax.reduce_sum(lax.dot_general(x, y, dims), (0, 1, 2))  # noqa: E731
        closed = nbjax.make_jaxpr(nbjax.grad(f, argnums))(a, b)
        check_jaxpr(closed.jaxpr)
        assert primitive_names(closed.jaxpr).count("dot_general") == 2  # forward, backward


def test_jacobians_of_matmul():
    a, b = small(3, 4), small(4, 2)
    jac = nbjax.jacrev(lambda x: jnp.dot(x, b))(a)
    expected = np.einsum("il,kj->ijlk", np.eye(3), b)  # d(a @ b)[i, j] / d a[l, k]
    assert_close(np.asarray(jac), expected, rtol=1e-6)
    assert_close(np.asarray(nbjax.jacfwd(lambda x: jnp.dot(x, b))(a)), expected,
                 rtol=1e-6)


# --- conv_general_dilated ------------------------------------------------------------------

# (lhs shape, rhs shape, keyword arguments) of unbatched convolutions
CONVS = [
    ((2, 3, 6), (4, 3, 3), dict(window_strides=(1,), padding="VALID")),
    ((2, 4, 6, 5), (6, 2, 3, 2), dict(window_strides=(2, 1), padding=((1, 0), (0, 1)),
                                      lhs_dilation=(1, 2), rhs_dilation=(2, 1),
                                      feature_group_count=2)),
    ((4, 3, 5, 5), (6, 3, 2, 3), dict(window_strides=(1, 2), padding="SAME",
                                      batch_group_count=2)),
    ((2, 5, 6, 3), (3, 2, 3, 4), dict(window_strides=(1, 1), padding=((2, -1), (1, 1)),
                                      rhs_dilation=(1, 2),
                                      dimension_numbers=("NHWC", "HWIO", "NCHW"))),
    ((2, 6, 5, 4), (3, 3, 2, 6), dict(window_strides=(2, 2), padding=((0, 1), (1, 1)),
                                      lhs_dilation=(2, 1),
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                      feature_group_count=2)),
]


def _conv(kwargs):
    return lambda lhs, rhs: lax.conv_general_dilated(lhs, rhs, **kwargs)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (1, 1), (-1, None), (None, 2)])
@pytest.mark.parametrize("lhs_shape,rhs_shape,kwargs", CONVS)
def test_vmap_conv(lhs_shape, rhs_shape, kwargs, in_axes):
    lhs, rhs = _batched(lhs_shape, in_axes[0]), _batched(rhs_shape, in_axes[1])
    check_vmap(_conv(kwargs), (lhs, rhs), in_axes, rtol=1e-5, terms=_conv(kwargs))
    check_vmap(_conv(kwargs), (lhs, rhs), in_axes, out_axes=-1, rtol=1e-5, terms=_conv(kwargs))


def test_vmap_conv_nested():
    lhs_shape, rhs_shape, kwargs = CONVS[1]
    lhs = small(2, *lhs_shape)
    rhs = small(3, *rhs_shape)
    f = nbjax.vmap(nbjax.vmap(_conv(kwargs), in_axes=(None, 0)), in_axes=(0, None))
    expected = np.stack([np.stack([np.asarray(_conv(kwargs)(x, w)) for w in rhs])
                         for x in lhs])
    assert_close(np.asarray(f(lhs, rhs)), expected, rtol=1e-5,
                 scale=np.asarray(f(np.abs(lhs), np.abs(rhs))))


def test_vmap_conv_of_an_empty_batch():
    lhs_shape, rhs_shape, kwargs = CONVS[0]
    out = nbjax.vmap(_conv(kwargs))(np.zeros((0,) + lhs_shape, np.float32),
                                    np.zeros((0,) + rhs_shape, np.float32))
    assert np.asarray(out).shape == (0, 2, 4, 4)


@pytest.mark.parametrize("lhs_shape,rhs_shape,kwargs", CONVS)
def test_grad_conv(lhs_shape, rhs_shape, kwargs, x64):
    # In float64: a second derivative of a convolution sums a dozen products of products,
    # and float32 central differences of such sums are off by ~1e-2 (checked: the float32
    # first-order test below passes at the default tolerance).
    lhs, rhs = rng.randn(*lhs_shape), rng.randn(*rhs_shape)
    check_grads(_conv(kwargs), (lhs, rhs), order=2)


@pytest.mark.parametrize("lhs_shape,rhs_shape,kwargs", CONVS)
def test_grad_conv_float32(lhs_shape, rhs_shape, kwargs):
    # A convolution is linear in each operand, so a central difference is exact for any
    # step: a large one keeps float32 rounding (~1e-7 / step) out of the comparison.
    check_grads(_conv(kwargs), (small(*lhs_shape), small(*rhs_shape)), order=1, eps=1e-2)


def test_grad_conv_jaxpr_and_vmap_of_grad():
    lhs_shape, rhs_shape, kwargs = CONVS[2]
    def loss(lhs, rhs):
        out = _conv(kwargs)(lhs, rhs)
        return lax.reduce_sum(lax.mul(out, out), tuple(range(len(lhs_shape))))
    lhs, rhs = small(*lhs_shape), small(*rhs_shape)
    closed = nbjax.make_jaxpr(nbjax.grad(loss, (0, 1)))(lhs, rhs)
    check_jaxpr(closed.jaxpr)
    assert primitive_names(closed.jaxpr).count("conv_general_dilated") == 3
    check_vmap(nbjax.grad(loss, 1), (lhs, small(2, *rhs_shape)), (None, 0), rtol=1e-4)

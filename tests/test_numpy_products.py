"""dot, matmul, tensordot, einsum and the other products, against NumPy."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbjax
import nbjax.numpy as jnp
from helpers import random_array, staged

RNG = np.random.default_rng(3)


def assert_close(got, want, dtype=None):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    if dtype is not None:
        assert got.dtype == dtype, (got.dtype, dtype)
    tol = 1e-2 if got.dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def check(f, np_f, *args, dtype=None):
    want = np_f(*args)
    assert_close(f(*args), want, dtype)
    assert_close(staged(f, *args), want, dtype)


SHAPE_PAIRS = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
               ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
               ((1, 2, 3), (6, 3, 1)), ((0, 3), (3, 2)), ((2, 0), (0, 4)),
               ((1, 2, 3), (3, 4)), ((4, 1, 2, 3), (3, 5)), ((4, 6, 2, 3), (3, 5))]


@pytest.mark.parametrize("a_shape, b_shape", SHAPE_PAIRS)
def test_matmul_shapes(a_shape, b_shape):
    a, b = random_array(RNG, a_shape), random_array(RNG, b_shape)
    check(jnp.matmul, np.matmul, a, b, dtype=np.float32)
    check(lambda x, y: x @ y, np.matmul, a, b)


@pytest.mark.parametrize("a_shape, b_shape", [((), (3,)), ((3,), ()), ((3,), (3,)),
                                              ((2, 3), (3,)), ((3,), (3, 4)),
                                              ((2, 3), (4, 3, 5)), ((2, 2, 3), (3,))])
def test_dot_shapes(a_shape, b_shape):
    a, b = random_array(RNG, a_shape), random_array(RNG, b_shape)
    check(jnp.dot, np.dot, a, b, dtype=np.float32)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.float16, np.float32,
                                   np.complex64, np.bool_])
def test_product_dtypes(dtype):
    a, b = random_array(RNG, (2, 3), dtype), random_array(RNG, (3, 4), dtype)
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(dtype) if dtype != np.bool_ and \
        np.issubdtype(dtype, np.integer) else a @ b
    check(jnp.matmul, lambda x, y: want, a, b, dtype=np.dtype(dtype))
    check(jnp.dot, lambda x, y: want, a, b, dtype=np.dtype(dtype))


def test_mixed_dtypes_promote():
    a, b = random_array(RNG, (2, 3), np.int8), random_array(RNG, (3,), np.float16)
    assert jnp.matmul(a, b).dtype == np.float16
    assert jnp.dot(2, random_array(RNG, (3,))).dtype == np.float32
    out = jnp.matmul(random_array(RNG, (3,), np.int8), random_array(RNG, (3,), np.int8),
                     preferred_element_type=np.int32)
    assert out.dtype == np.int32


def test_non_contiguous_operands():
    a = random_array(RNG, (4, 6))[:, ::2]
    b = np.ascontiguousarray(random_array(RNG, (4, 3))).T
    check(jnp.matmul, np.matmul, a, b)
    check(lambda x, y: jnp.tensordot(x, y, 1), lambda x, y: np.tensordot(x, y, 1), a.T, b.T)


@pytest.mark.parametrize("a_shape, b_shape", [((16, 2048), (4096, 2048)),
                                              ((3, 16, 1024), (1024, 8192))])
def test_wide_products_are_computed_transposed(a_shape, b_shape):
    # A result at least WIDE_RESULT times wider than tall is BLAS's product of the
    # transposes, transposed back as a view; the values are those of the product.
    a = random_array(RNG, a_shape)
    b = random_array(RNG, b_shape)
    f = (lambda x, y: x @ y.T) if a_shape[-1] == b_shape[-1] else (lambda x, y: x @ y)
    want = f(a.astype(np.float64), b.astype(np.float64))
    got = f(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
    assert not np.asarray(got).flags.c_contiguous


def test_vdot_vecdot_inner_outer():
    z = random_array(RNG, (2, 3), np.complex64)
    w = random_array(RNG, (2, 3), np.complex64)
    check(jnp.vdot, np.vdot, z, w, dtype=np.complex64)
    check(jnp.vecdot, lambda x, y: np.sum(np.conj(x) * y, axis=-1), z, w)
    check(lambda x, y: jnp.vecdot(x, y, axis=0), lambda x, y: np.sum(np.conj(x) * y, axis=0),
          z, w)
    check(lambda x, y: jnp.vecdot(x, y[0]), lambda x, y: np.sum(np.conj(x) * y[0], axis=-1),
          z, w)
    a, b = random_array(RNG, (2, 3)), random_array(RNG, (4, 3))
    check(jnp.inner, np.inner, a, b)
    check(jnp.inner, np.inner, a, np.float32(2))
    check(jnp.outer, np.outer, a, random_array(RNG, (5,)))


@pytest.mark.parametrize("a_shape, b_shape", [((2, 2), (3,)), ((2, 3), (4, 1)), ((2,), (3, 2)),
                                              ((1, 2, 2), (2, 3))])
def test_kron(a_shape, b_shape):
    check(jnp.kron, np.kron, random_array(RNG, a_shape), random_array(RNG, b_shape))


@pytest.mark.parametrize("axes, a_shape, b_shape", [
    (0, (2, 3), (4,)), (1, (3, 2), (2, 4)), (2, (3, 2, 4), (2, 4, 3)), ((1, 0), (3, 2), (2, 4)),
    (((0, 2), (1, 0)), (3, 2, 4), (4, 3, 5)), (([2], [1]), (3, 2, 4), (2, 4, 3)),
])
def test_tensordot(axes, a_shape, b_shape):
    check(lambda x, y: jnp.tensordot(x, y, axes), lambda x, y: np.tensordot(x, y, axes),
          random_array(RNG, a_shape), random_array(RNG, b_shape))


@pytest.mark.parametrize("a_shape, b_shape, kwargs", [
    ((3,), (3,), {}), ((2, 3), (2, 3), {}), ((4, 2), (4, 3), {}), ((2, 3), (4, 2, 3), {}),
    ((3, 4), (4, 3), {"axisa": 0, "axisb": -1}), ((3, 4), (3, 4), {"axis": 0}),
    ((2, 3), (2, 3), {"axisc": 0}),
])
def test_cross(a_shape, b_shape, kwargs):
    a, b = random_array(RNG, a_shape), random_array(RNG, b_shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2 deprecates 2-vectors
        check(lambda x, y: jnp.cross(x, y, **kwargs), lambda x, y: np.cross(x, y, **kwargs),
              a, b)


# --- einsum --------------------------------------------------------------------------------

EINSUM_SPECS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->", [(2, 3)]), ("ij->ji", [(2, 3)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]), ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("i,i", [(4,), (4,)]), ("i,j->ij", [(2,), (3,)]), ("ijk,kj,i->", [(2, 3, 4), (4, 3), (2,)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 2), (2, 5)]), ("iij->j", [(2, 2, 3)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]), ("...i,...i->...", [(2, 1, 3), (4, 3)]),
    ("ij,kl->ikjl", [(2, 3), (1, 2)]), ("ii,ij->j", [(2, 2), (2, 3)]),
]


@pytest.mark.parametrize("spec, shapes", EINSUM_SPECS, ids=[s for s, _ in EINSUM_SPECS])
def test_einsum_matches_numpy(spec, shapes):
    arrays = [random_array(RNG, s) for s in shapes]
    check(lambda *a: jnp.einsum(spec, *a), lambda *a: np.einsum(spec, *a), *arrays)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_einsum_random_specs(data):
    """Random contractions of 1-3 operands over labels a-e with random output labels."""
    sizes = dict(zip("abcde", data.draw(st.lists(st.integers(1, 3), min_size=5, max_size=5))))
    n_ops = data.draw(st.integers(1, 3))
    inputs = ["".join(data.draw(st.lists(st.sampled_from("abcde"), min_size=0, max_size=3,
                                         unique=True))) for _ in range(n_ops)]
    used = sorted(set("".join(inputs)))
    output = "".join(data.draw(st.permutations(used))[:data.draw(st.integers(0, len(used)))])
    spec = ",".join(inputs) + "->" + output
    arrays = [random_array(RNG, tuple(sizes[c] for c in term)) for term in inputs]
    assert_close(jnp.einsum(spec, *arrays), np.einsum(spec, *arrays))


def test_einsum_interleaved_and_dtypes():
    a, b = random_array(RNG, (2, 3), np.int8), random_array(RNG, (3, 4), np.int8)
    out = jnp.einsum(a, [0, 1], b, [1, 2], [0, 2])
    assert out.dtype == np.int8
    assert_close(out, (a.astype(np.int32) @ b.astype(np.int32)).astype(np.int8))
    out = jnp.einsum("ij,jk", a, b, preferred_element_type=np.int32)
    assert out.dtype == np.int32
    assert jnp.einsum("i,i", random_array(RNG, (3,), np.float16),
                      random_array(RNG, (3,))).dtype == np.float32


def test_einsum_contracts_with_dot_general():
    closed = nbjax.make_jaxpr(lambda x, y: jnp.einsum("ij,jk->ik", x, y))(
        random_array(RNG, (2, 3)), random_array(RNG, (3, 4)))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["dot_general"]


# --- errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, match", [
    (lambda: jnp.ones((2, 3)) @ jnp.ones((2, 3)), TypeError, r"matmul.*\(2, 3\).*\(2, 3\)"),
    (lambda: jnp.matmul(jnp.ones((2, 3)), jnp.ones(2)), TypeError, r"matmul.*\(2, 3\).*\(2,\)"),
    (lambda: jnp.matmul(jnp.ones((2, 2, 3)), jnp.ones((3, 3, 1))), TypeError, "batch"),
    (lambda: jnp.matmul(2.0, jnp.ones(3)), ValueError, "ndim at least 1"),
    (lambda: jnp.dot(jnp.ones((2, 3)), jnp.ones((2, 3))), TypeError, "dot"),
    (lambda: jnp.tensordot(jnp.ones((2, 3)), jnp.ones((2, 3)), 3), TypeError, "exceeds"),
    (lambda: jnp.einsum("ij,jk", jnp.ones((2, 3)), jnp.ones((2, 3))), ValueError, "Size of label"),
    (lambda: jnp.einsum("ij", jnp.ones(3)), ValueError, "correct number of indices"),
    (lambda: jnp.cross(jnp.ones(4), jnp.ones(3)), ValueError, "2 or 3"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()

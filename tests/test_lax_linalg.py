"""lax.dot_general and lax.dot against np.einsum: dimension numbers, dtypes, errors, printing."""

import numpy as np
import pytest

import nbjax
from nbjax import lax
from helpers import assert_close, eager_and_traced, random_array

RNG = np.random.default_rng(2)


def random_dot_case():
    """Random operand shapes, dimension numbers and the equivalent einsum subscripts."""
    n_batch, n_contract, n_lfree, n_rfree = RNG.integers(0, 3, 4)
    sizes = RNG.choice([0, 1, 2, 3], size=n_batch + n_contract + n_lfree + n_rfree,
                       p=[0.05, 0.25, 0.35, 0.35])
    letters = "abcdefghij"[:len(sizes)]
    batch = letters[:n_batch]
    contract = letters[n_batch:n_batch + n_contract]
    lfree = letters[n_batch + n_contract:n_batch + n_contract + n_lfree]
    rfree = letters[n_batch + n_contract + n_lfree:]
    size = dict(zip(letters, sizes))
    lhs = "".join(RNG.permutation(list(batch + contract + lfree)))
    rhs = "".join(RNG.permutation(list(batch + contract + rfree)))
    dims = (([lhs.index(c) for c in contract], [rhs.index(c) for c in contract]),
            ([lhs.index(c) for c in batch], [rhs.index(c) for c in batch]))
    # The result: batch axes (in dimension-number order), then the free axes of each operand
    # in the order they have there.
    lfree = "".join(c for c in lhs if c in lfree)
    rfree = "".join(c for c in rhs if c in rfree)
    subscripts = f"{lhs},{rhs}->{batch}{lfree}{rfree}"
    return [size[c] for c in lhs], [size[c] for c in rhs], dims, subscripts


def exact_einsum(subscripts, a, b, dtype):
    """The einsum in 64-bit (exact for our small ints), then cast: ints wrap as XLA's do."""
    wide = np.complex128 if np.issubdtype(dtype, np.complexfloating) else (
        np.float64 if np.issubdtype(dtype, np.floating) else np.int64)
    out = np.einsum(subscripts, a.astype(wide), b.astype(wide))
    return (out != 0) if np.dtype(dtype) == np.bool_ else out.astype(dtype)


@pytest.mark.parametrize("seed", range(40))
def test_dot_general_random_dimension_numbers_match_einsum(seed):
    lhs_shape, rhs_shape, dims, subscripts = random_dot_case()
    dtype = [np.float32, np.int32, np.int8, np.complex64][seed % 4]
    a, b = random_array(RNG, lhs_shape, dtype), random_array(RNG, rhs_shape, dtype)
    out = eager_and_traced(lambda a, b: lax.dot_general(a, b, dims), a, b)
    expected = exact_einsum(subscripts, a, b, dtype)
    assert out.dtype == np.dtype(dtype) and out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float16,
                                   np.float32, np.complex64])
def test_dot_general_each_dtype(dtype):
    a, b = random_array(RNG, (2, 3, 4), dtype), random_array(RNG, (2, 4, 5), dtype)
    out = eager_and_traced(lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
                           a, b)
    expected = exact_einsum("bij,bjk->bik", a, b, dtype)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=tol, atol=tol)


def test_dot_general_non_contiguous_inputs():
    a = random_array(RNG, (4, 6), np.float32)[:, ::2]   # (4, 3), strided
    b = random_array(RNG, (5, 3), np.float32).T         # (3, 5), transposed view
    terms = np.abs(a) @ np.abs(b)
    assert_close(lax.dot(a, b), a @ b, rtol=1e-5, scale=terms)
    assert_close(lax.dot_general(b, a, (((0,), (1,)), ((), ()))), b.T @ a.T,
                 rtol=1e-5, scale=terms.T)


def test_integer_dot_wraps_and_float16_accumulates_in_float32():
    a = np.full((2, 3), 100, np.int8)
    np.testing.assert_array_equal(lax.dot(a, a.T), np.full((2, 2), 30000 % 256))  # 48, as JAX
    ones = np.ones((1, 3000), np.float16)
    assert lax.dot(ones, ones.T)[0, 0] == 3000  # a float16 accumulator would stop at 2048


@pytest.mark.parametrize("lhs,rhs,result", [
    (np.float32, np.int32, np.float32), (np.int8, np.int32, np.int32),
    (np.uint8, np.int8, np.int8), (np.float16, np.int8, np.float16),
    (np.float16, np.complex64, np.complex64), (np.bool_, np.float32, np.float32),
    (np.bool_, np.bool_, np.bool_),
])
def test_dot_general_mixed_dtypes_take_the_more_precise(lhs, rhs, result):
    a, b = random_array(RNG, (2, 3), lhs), random_array(RNG, (3, 2), rhs)
    out = eager_and_traced(lambda a, b: lax.dot(a, b), a, b)
    assert out.dtype == np.dtype(result)
    expected = exact_einsum("ij,jk->ik", a, b, result)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-2, atol=1e-2)


def test_preferred_element_type():
    a = np.full((2, 3), 100, np.int8)
    out = lax.dot_general(a, a, (((1,), (1,)), ((), ())), preferred_element_type=np.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.full((2, 2), 30000))
    b = np.ones((2, 3), np.bool_)
    assert lax.dot(b, b.T, preferred_element_type=np.int32)[0, 0] == 3
    f = random_array(RNG, (2, 3), np.float32)
    assert lax.dot(f, f.T, preferred_element_type=np.float16).dtype == np.float16
    assert lax.dot(f, f.T, preferred_element_type=np.float64).dtype == np.float32  # no x64
    assert lax.dot(f, f.T, preferred_element_type=np.complex64).dtype == np.complex64


def test_preferred_element_type_with_x64(x64):
    f = random_array(RNG, (2, 3), np.float32)
    assert lax.dot(f, f.T, preferred_element_type=np.float64).dtype == np.float64


def test_dot_general_weak_types_and_scalars():
    weak = lax.broadcast(2.0, (2, 3))
    assert lax.dot_general(weak, weak, (((1,), (1,)), ((), ()))).weak_type
    assert not lax.dot_general(weak, np.ones((2, 3), np.float32),
                               (((1,), (1,)), ((), ()))).weak_type
    out = lax.dot_general(np.ones(3, np.float32), 3.0, (((), ()), ((), ())))
    assert out.dtype == np.float32 and not out.weak_type
    np.testing.assert_array_equal(out, [3.0, 3.0, 3.0])


def test_dot():
    v, m = random_array(RNG, (3,), np.float32), random_array(RNG, (3, 4), np.float32)
    assert_close(lax.dot(v, v), v @ v, rtol=1e-5)
    assert_close(lax.dot(v, m), v @ m, rtol=1e-5, scale=np.abs(v) @ np.abs(m))
    assert_close(lax.dot(m.T, v), m.T @ v, rtol=1e-5, scale=np.abs(m.T) @ np.abs(v))
    assert lax.dot(np.zeros((0, 3)), np.zeros((3, 2))).shape == (0, 2)
    np.testing.assert_array_equal(lax.dot(np.zeros((2, 0)), np.zeros((0, 2))),
                                  np.zeros((2, 2)))
    for a, b in (((2, 3, 4), (4, 5)), ((), (3,)), ((2, 3), (2, 3))):
        with pytest.raises(ValueError, match="dimension_numbers must be specified"):
            lax.dot(np.ones(a), np.ones(b))


def test_dot_general_jaxpr_text():
    a = np.ones((3, 4), np.float32)
    text = str(nbjax.make_jaxpr(
        lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                     preferred_element_type=np.float32))(a, a.T))
    assert text == ("{ lambda ; a:f32[3,4] b:f32[4,3]. let\n"
                    "    c:f32[3,3] = dot_general[\n"
                    "      dimension_numbers=(([1], [0]), ([], []))\n"
                    "      preferred_element_type=float32\n"
                    "    ] a b\n"
                    "  in (c,) }")
    assert str(nbjax.make_jaxpr(lambda a, b: lax.dot(a, b))(a, a.T)) == (
        "{ lambda ; a:f32[3,4] b:f32[4,3]. let\n"
        "    c:f32[3,3] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b\n"
        "  in (c,) }")
    eqn, = nbjax.make_jaxpr(lambda a: lax.dot(a, a.T, precision="highest"))(a).eqns[-1:]
    assert eqn.params["precision"] == (lax.Precision.HIGHEST, lax.Precision.HIGHEST)
    assert eqn.params["dimension_numbers"] == (((1,), (0,)), ((), ()))
    hash(tuple(eqn.params.items()))  # params stay hashable


def test_dot_general_errors():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"dot_general requires contracting dimensions to have "
                                        r"the same shape, got \(3,\) and \(2,\)\."):
        lax.dot_general(a, np.ones((2, 2), np.float32), (((1,), (1,)), ((), ())))
    with pytest.raises(TypeError, match="batch dimensions to have the same shape"):
        lax.dot_general(a, np.ones((4, 3)), (((1,), (1,)), ((0,), (0,))))
    with pytest.raises(TypeError, match="equal numbers of lhs_batch and rhs_batch"):
        lax.dot_general(a, a, (((1,), (1,)), ((0,), ())))
    with pytest.raises(TypeError, match="disjoint from contracting"):
        lax.dot_general(a, a, (((1,), (1,)), ((1,), (1,))))
    with pytest.raises(TypeError, match="lhs dimension numbers to be nonnegative"):
        lax.dot_general(a, a, (((2,), (1,)), ((), ())))
    with pytest.raises(TypeError, match="rhs dimension numbers to be nonnegative"):
        lax.dot_general(a, a, (((1,), (-1,)), ((), ())))
    with pytest.raises(TypeError, match="contracting dimensions to be distinct"):
        lax.dot_general(np.ones((3, 3)), np.ones((3, 3)), (((0, 0), (0, 1)), ((), ())))
    with pytest.raises(TypeError, match="must not be narrower"):
        lax.dot(a.astype(np.int32), a.T.astype(np.int32), preferred_element_type=np.int8)
    with pytest.raises(ValueError, match="Precision argument"):
        lax.dot(a, a.T, precision="fast-ish")

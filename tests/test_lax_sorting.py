"""lax.sort (multi-operand, num_keys, stability, NaN and signed-zero order) and lax.top_k."""

import numpy as np
import pytest

import nbjax
from nbjax import lax
from helpers import eager_and_traced

RNG = np.random.default_rng(1)


def few_values(shape, dtype):
    """Values from a small set, so that sorts meet many ties."""
    return RNG.integers(0, 3, shape).astype(dtype)


# --- sort ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float16,
                                   np.float32, np.complex64])
@pytest.mark.parametrize("shape,dimension", [((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1),
                                             ((0, 4), 0), ((4, 1), 1), ((6,), 0)])
def test_sort_matches_numpy_stable_sort(dtype, shape, dimension):
    keys = few_values(shape, dtype)
    positions = np.arange(keys.size, dtype=np.int32).reshape(shape)
    sorted_keys, carried = eager_and_traced(
        lambda k, v: lax.sort((k, v), dimension=dimension), keys, positions)
    order = np.argsort(keys, axis=dimension, kind="stable")
    np.testing.assert_array_equal(sorted_keys, np.sort(keys, axis=dimension))
    np.testing.assert_array_equal(carried, np.take_along_axis(positions, order, dimension))


def test_sort_single_operand_and_non_contiguous_input():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    for view in (x[:, ::2], x.T, x[::-1]):
        out = lax.sort(view)
        assert isinstance(out, nbjax.Array)
        np.testing.assert_array_equal(out, np.sort(view, axis=-1))
    assert isinstance(lax.sort([x]), tuple)


def test_sort_puts_nans_last_and_keeps_signed_zeros_in_order():
    x = np.array([np.nan, 0.0, -np.inf, -0.0, -np.nan, 1.0, -0.0, 0.0], np.float32)
    out = np.asarray(lax.sort(x))
    np.testing.assert_array_equal(out[:6], [-np.inf, 0.0, -0.0, -0.0, 0.0, 1.0])
    # -0.0 and 0.0 compare equal: a stable sort keeps their original order.
    np.testing.assert_array_equal(np.signbit(out[1:5]), [False, True, True, False])
    assert np.all(np.isnan(out[6:]))
    np.testing.assert_array_equal(np.signbit(out[6:]), [False, True])  # NaNs keep their order


def test_sort_complex_is_lexicographic_with_nans_last():
    nan = np.nan
    x = np.array([complex(nan, 0), 1 + 2j, complex(1, nan), 1 - 1j, complex(0, nan), 5j],
                 np.complex64)
    out = np.asarray(lax.sort(x))
    expected = np.array([5j, complex(0, nan), 1 - 1j, 1 + 2j, complex(1, nan),
                         complex(nan, 0)], np.complex64)
    np.testing.assert_array_equal(out.real, expected.real)
    np.testing.assert_array_equal(out.imag, expected.imag)


def test_sort_num_keys_is_lexicographic_and_stable():
    a = few_values((20,), np.int32)
    b = few_values((20,), np.float32)
    payload = np.arange(20, dtype=np.int32)
    sa, sb, sp = eager_and_traced(lambda a, b, p: lax.sort((a, b, p), num_keys=2),
                                  a, b, payload)
    order = np.lexsort((b, a))  # stable; a is the primary key
    for got, src in ((sa, a), (sb, b), (sp, payload)):
        np.testing.assert_array_equal(got, src[order])
    # With one key the second operand is only carried along.
    _, carried, _ = lax.sort((a, b, payload), num_keys=1)
    np.testing.assert_array_equal(carried, b[np.argsort(a, kind="stable")])


def test_sort_key_val_and_weak_types():
    keys = np.array([2, 1, 2, 1], np.int32)
    k, v = lax.sort_key_val(keys, np.array([0.0, 1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(k, [1, 1, 2, 2])
    np.testing.assert_array_equal(v, [1.0, 3.0, 0.0, 2.0])
    assert lax.sort(lax.broadcast(2.0, (3,))).weak_type


def test_sort_jaxpr_text():
    x = np.ones((3, 4), np.float32)
    assert str(nbjax.make_jaxpr(lambda x: lax.sort(x))(x)) == (
        "{ lambda ; a:f32[3,4]. let\n"
        "    b:f32[3,4] = sort[dimension=1 is_stable=True num_keys=1] a\n"
        "  in (b,) }")
    assert str(nbjax.make_jaxpr(lambda x: lax.sort_key_val(x, x, dimension=0))(x)) == (
        "{ lambda ; a:f32[3,4]. let\n"
        "    b:f32[3,4] c:f32[3,4] = sort[dimension=0 is_stable=True num_keys=1] a a\n"
        "  in (b, c) }")


def test_sort_errors():
    x = np.array([2, 1], np.int32)
    with pytest.raises(ValueError, match="num_keys=0 must be between 1 and len"):
        lax.sort((x,), num_keys=0)
    with pytest.raises(ValueError, match="num_keys=3"):
        lax.sort((x, x), num_keys=3)
    with pytest.raises(TypeError, match="Arguments to sort must have equal shapes"):
        lax.sort((x, np.ones(3, np.int32)))
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        lax.sort(np.ones((2, 3)), dimension=2)
    with pytest.raises(ValueError, match="out of bounds for array of dimension 0"):
        lax.sort(np.float32(1.0))


# --- top_k ---------------------------------------------------------------------------------

def tie_break_reference(x, k):
    """Along the last axis: sort by (value descending, index ascending) with Python."""
    rows = x.reshape(-1, x.shape[-1])
    idx = np.array([sorted(range(len(r)), key=lambda i: (-float(r[i]), i))[:k] for r in rows],
                   np.int32).reshape(x.shape[:-1] + (k,))
    return np.take_along_axis(x, idx, -1), idx


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float16,
                                   np.float32])
@pytest.mark.parametrize("shape,k", [((7,), 3), ((3, 6), 6), ((2, 3, 5), 1), ((4, 5), 0),
                                     ((0, 3), 2)])
def test_top_k_matches_reference_with_ties(dtype, shape, k):
    x = few_values(shape, dtype)
    values, indices = eager_and_traced(lambda x: lax.top_k(x, k), x)
    expected_values, expected_indices = tie_break_reference(x, k)
    assert values.dtype == np.dtype(dtype) and indices.dtype == np.int32
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(indices, expected_indices)


def test_top_k_axis_and_non_contiguous_input():
    x = RNG.standard_normal((5, 8)).astype(np.float32)[:, ::2]
    values, indices = lax.top_k(x, 2, axis=0)
    ev, ei = tie_break_reference(np.ascontiguousarray(x.T), 2)
    np.testing.assert_array_equal(values, ev.T)
    np.testing.assert_array_equal(indices, ei.T)


def test_top_k_uses_total_order_for_nan_and_zero():
    values, indices = lax.top_k(np.array([1.0, np.nan, 3.0, -np.nan, 2.0], np.float32), 3)
    np.testing.assert_array_equal(indices, [1, 2, 4])  # NaN is largest, -NaN smallest
    _, indices = lax.top_k(np.array([-np.inf, -np.nan, 1.0], np.float32), 3)
    np.testing.assert_array_equal(indices, [2, 0, 1])
    _, indices = lax.top_k(np.array([-0.0, 0.0, -0.0, 0.0], np.float32), 2)
    np.testing.assert_array_equal(indices, [1, 3])  # 0.0 above -0.0


def test_top_k_weak_type_and_jaxpr_text():
    values, indices = lax.top_k(lax.broadcast(2.0, (3,)), 1)
    assert values.weak_type and indices.weak_type  # as JAX does
    x = np.ones((3, 4), np.float32)
    assert str(nbjax.make_jaxpr(lambda x: lax.top_k(x, 2, axis=0))(x)) == (
        "{ lambda ; a:f32[3,4]. let\n    b:f32[2,4] c:i32[2,4] = top_k[axis=0 k=2] a\n"
        "  in (b, c) }")  # (82 characters on one line: JAX breaks it)


def test_top_k_errors():
    x = np.array([1.0, 2.0], np.float32)
    with pytest.raises(ValueError, match="not compatible with complex"):
        lax.top_k(np.ones(2, np.complex64), 1)
    with pytest.raises(ValueError, match=r"no larger than size along axis; got k=3"):
        lax.top_k(x, 3)
    with pytest.raises(ValueError, match="must be nonnegative, got -1"):
        lax.top_k(x, -1)
    with pytest.raises(ValueError, match="out of bounds"):
        lax.top_k(np.float32(1.0), 1)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        lax.top_k(np.ones((2, 3)), 1, axis=2)

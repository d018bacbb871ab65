"""Structural lax primitives against NumPy: reshape, transpose, squeeze, expand_dims, rev,
concatenate, pad, iota, full; eagerly and through make_jaxpr + eval_jaxpr + check_jaxpr."""

import itertools

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.core import Array, check_jaxpr, eval_jaxpr
from helpers import random_array

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.float16, np.float32, np.complex64]


def assert_same(actual, expected):
    """Equal values (NaN equal to NaN), shapes and dtypes."""
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def check(fn, args, expected):
    """``fn(*args)`` equals ``expected`` eagerly and as a traced, checked, evaluated jaxpr."""
    out = fn(*args)
    assert isinstance(out, Array)
    assert_same(out, expected)
    closed = nbjax.make_jaxpr(fn)(*args)
    check_jaxpr(closed.jaxpr)
    [traced] = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    assert_same(traced, expected)
    return closed


def noncontiguous(x):
    """A strided view with the values of ``x`` (every other element of a larger array)."""
    if not x.ndim:
        return x
    big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    big[..., ::2] = x
    view = big[..., ::2]
    assert not view.flags.c_contiguous or x.size == 0 or x.shape[-1] == 1
    return view


# --- reshape -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_matches_numpy(dtype):
    rng = np.random.default_rng(0)
    cases = [((2, 3), (3, 2)), ((2, 3, 4), (4, 6)), ((6,), (1, 6, 1)), ((), (1, 1)),
             ((1,), ()), ((0, 3), (3, 0, 2)), ((4, 1), (2, 2))]
    for shape, new in cases:
        x = random_array(rng, shape, dtype)
        check(lambda x: lax.reshape(x, new), [x], x.reshape(new))
        check(lambda x: lax.reshape(x, new), [noncontiguous(x)], x.reshape(new))


def test_reshape_with_dimensions_transposes_first():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for perm in itertools.permutations(range(3)):
        expected = np.transpose(x, perm).reshape(6, 4)
        closed = check(lambda x: lax.reshape(x, (6, 4), perm), [x], expected)
        if perm != (0, 1, 2):
            assert f"dimensions={perm}" in str(closed)


def test_reshape_jaxpr_params_and_noop():
    closed = nbjax.make_jaxpr(lambda x: lax.reshape(x, (2, 3)))(np.ones(6, np.float32))
    assert "reshape[dimensions=None new_sizes=(2, 3) sharding=None]" in str(closed)
    x = Array(np.ones((2, 3), np.float32))
    assert lax.reshape(x, (2, 3)) is x
    assert lax.reshape(x, (2, 3), (0, 1)) is x


def test_reshape_keeps_weak_type():
    assert lax.reshape(1.5, (1, 1)).weak_type
    assert not lax.reshape(np.float32(1.5), (1,)).weak_type


def test_reshape_errors():
    with pytest.raises(TypeError, match=r"cannot reshape array of shape \(3,\) \(size 3\) "
                                        r"into shape \(4,\) \(size 4\)"):
        lax.reshape(np.ones(3, np.float32), (4,))
    with pytest.raises(TypeError, match="cannot reshape"):
        nbjax.make_jaxpr(lambda x: lax.reshape(x, (2, 2)))(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="permutation of operand dimensions"):
        lax.reshape(np.ones((2, 3), np.float32), (6,), (0, 0))
    with pytest.raises(TypeError, match="non-negative"):
        lax.reshape(np.ones(3, np.float32), (-1,))


def test_collapse():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    check(lambda x: lax.collapse(x, 1), [x], x.reshape(2, 12))
    check(lambda x: lax.collapse(x, 0, 2), [x], x.reshape(6, 4))
    with pytest.raises(ValueError, match="Invalid dimension range"):
        lax.collapse(x, 2, 1)


# --- transpose -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_matches_numpy(dtype):
    rng = np.random.default_rng(1)
    for shape in [(), (3,), (2, 3), (2, 0, 3), (1, 2, 3, 4)]:
        x = random_array(rng, shape, dtype)
        for perm in itertools.permutations(range(len(shape))):
            check(lambda x: lax.transpose(x, perm), [x], np.transpose(x, perm))
    x = random_array(rng, (3, 4), dtype)
    check(lambda x: lax.transpose(x, (1, 0)), [x.T], x)  # a transposed (F-ordered) view


def test_transpose_noop_and_errors():
    x = Array(np.ones((2, 3), np.float32))
    assert lax.transpose(x, (0, 1)) is x
    closed = nbjax.make_jaxpr(lambda x: lax.transpose(x, (1, 0)))(x)
    assert "transpose[permutation=(1, 0)]" in str(closed)
    with pytest.raises(TypeError, match="isn't a permutation of operand dimensions"):
        lax.transpose(x, (1,))
    with pytest.raises(TypeError, match="isn't a permutation"):
        lax.transpose(x, (0, 0))


# --- squeeze and expand_dims ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_squeeze_and_expand_dims_match_numpy(dtype):
    rng = np.random.default_rng(2)
    x = random_array(rng, (1, 3, 1, 0, 1), dtype)
    for dims in [(0,), (2,), (0, 2, 4), (-1,), (-1, 0)]:
        check(lambda x: lax.squeeze(x, dims), [x], np.squeeze(x, dims))
    y = random_array(rng, (2, 3), dtype)
    for dims in [(0,), (2,), (-1,), (0, 3), (1, -1), (0, 1, 2)]:
        check(lambda y: lax.expand_dims(y, dims), [y], np.expand_dims(y, dims))
    check(lambda y: lax.expand_dims(y, (1,)), [noncontiguous(y)], np.expand_dims(y, 1))


def test_squeeze_noop_jaxpr_and_errors():
    x = Array(np.ones((1, 3), np.float32))
    assert lax.squeeze(x, ()) is x
    closed = nbjax.make_jaxpr(lambda x: lax.squeeze(x, (-2,)))(x)
    assert "squeeze[dimensions=(0,)]" in str(closed)
    with pytest.raises(ValueError, match="size not equal to one"):
        lax.squeeze(x, (1,))
    with pytest.raises(ValueError, match="out of bounds"):
        lax.squeeze(x, (2,))
    with pytest.raises(ValueError, match="not unique"):
        lax.squeeze(x, (0, -2))


def test_expand_dims_is_broadcast_in_dim_and_errors():
    closed = nbjax.make_jaxpr(lambda x: lax.expand_dims(x, (0, 2)))(np.ones((3, 4), np.float32))
    assert [e.primitive.name for e in closed.eqns] == ["broadcast_in_dim"]
    assert closed.out_avals[0].shape == (1, 3, 1, 4)
    with pytest.raises(ValueError, match="repeated axis"):
        lax.expand_dims(np.ones(3, np.float32), (0, 0))
    with pytest.raises(ValueError, match="repeated axis"):
        lax.expand_dims(np.ones(3, np.float32), (2, -1))
    with pytest.raises(ValueError, match="out of bounds"):
        lax.expand_dims(np.ones(3, np.float32), (5,))


# --- rev -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_rev_matches_numpy(dtype):
    rng = np.random.default_rng(3)
    x = random_array(rng, (2, 3, 4), dtype)
    for dims in [(), (0,), (1, 2), (2, 0, 1)]:
        check(lambda x: lax.rev(x, dims), [x], np.flip(x, dims))
    check(lambda x: lax.rev(x, (0,)), [noncontiguous(x)], np.flip(x, 0))
    e = random_array(rng, (0, 2), dtype)
    check(lambda e: lax.rev(e, (0, 1)), [e], e)


def test_rev_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="nonnegative"):
        lax.rev(x, (-1,))
    with pytest.raises(TypeError, match="must be unique"):
        lax.rev(x, (1, 1))
    with pytest.raises(TypeError, match="less than operand ndim"):
        lax.rev(x, (2,))


# --- concatenate ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_concatenate_matches_numpy(dtype):
    rng = np.random.default_rng(4)
    a, b, c = (random_array(rng, (2, n), dtype) for n in (3, 0, 1))
    check(lambda a, b, c: lax.concatenate([a, b, c], 1), [a, b, c],
          np.concatenate([a, b, c], 1))
    d = random_array(rng, (4, 3), dtype)
    closed = check(lambda a, d: lax.concatenate([a, d, a], 0), [noncontiguous(a), d],
                   np.concatenate([a, d, a], 0))
    assert "concatenate[dimension=0]" in str(closed)


def test_concatenate_single_weak_and_errors():
    a = Array(np.ones(3, np.float32))
    assert lax.concatenate([a], 0) is a
    assert lax.concatenate([lax.full((2,), 1.0), lax.full((1,), 2.0)], 0).weak_type
    assert not lax.concatenate([lax.full((2,), 1.0), a], 0).weak_type
    with pytest.raises(ValueError, match="non-empty"):
        lax.concatenate([], 0)
    with pytest.raises(TypeError, match="same dtypes"):
        lax.concatenate([a, np.ones(2, np.int32)], 0)
    with pytest.raises(TypeError, match="different numbers of dimensions"):
        lax.concatenate([a, 1.0], 0)
    with pytest.raises(TypeError, match="dimension out of bounds"):
        lax.concatenate([a, a], 1)
    with pytest.raises(TypeError, match="differ in dimensions other than"):
        lax.concatenate([np.ones((2, 3)), np.ones((3, 3))], 1)


# --- pad -----------------------------------------------------------------------------------

def pad_reference(x, value, config):
    """Place element j of ``x`` at ``low + j * (interior + 1)`` along each axis, if inside."""
    shape = [lo + hi + (d + (d - 1) * i if d else 0) for d, (lo, hi, i) in zip(x.shape, config)]
    out = np.full(shape, value, x.dtype)
    for j in np.ndindex(x.shape):
        p = tuple(lo + k * (i + 1) for k, (lo, _, i) in zip(j, config))
        if all(0 <= q < n for q, n in zip(p, shape)):
            out[p] = x[j]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_matches_reference(dtype):
    rng = np.random.default_rng(5)
    for shape in [(4,), (3, 2), (0, 2), (1, 1, 3)]:
        x = random_array(rng, shape, dtype)
        value = random_array(rng, (), dtype)
        for _ in range(4):
            config = []
            for d in shape:
                interior = int(rng.integers(0, 3))
                dilated = d + (d - 1) * interior if d else 0
                lo = int(rng.integers(-dilated, 3))
                hi = int(rng.integers(-(dilated + lo), 3))  # keeps the size >= 0
                config.append((lo, hi, interior))
            expected = pad_reference(x, value, config)
            check(lambda x, v: lax.pad(x, v, config), [x, value], expected)


def test_pad_examples_noncontiguous_and_jaxpr():
    x = np.arange(3, dtype=np.float32)
    check(lambda x: lax.pad(x, np.float32(0), [(-1, -1, 2)]), [x],
          np.array([0, 0, 1, 0, 0], np.float32))
    check(lambda x: lax.pad(x, np.float32(9), [(2, 1, 1)]), [x],
          np.array([9, 9, 0, 9, 1, 9, 2, 9], np.float32))
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    check(lambda m: lax.pad(m, np.int32(-1), [(1, 0, 0), (0, -2, 1)]), [m.T],
          pad_reference(m.T, -1, [(1, 0, 0), (0, -2, 1)]))
    closed = nbjax.make_jaxpr(lambda x: lax.pad(x, 0.0, [(1, 2, 1)]))(lax.full((2,), 1.0))
    assert "pad[padding_config=((1, 2, 1),)]" in str(closed)
    assert closed.out_avals[0].weak_type


def test_pad_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="same dtype: got float32 and int32"):
        lax.pad(x, 0, [(1, 1, 0)])
    with pytest.raises(ValueError, match="not at least 0"):
        lax.pad(x, np.float32(0), [(-3, -1, 0)])
    with pytest.raises(ValueError, match="interior padding"):
        lax.pad(x, np.float32(0), [(0, 0, -1)])
    with pytest.raises(ValueError, match="length of padding_config"):
        lax.pad(x, np.float32(0), [(0, 0, 0), (0, 0, 0)])
    with pytest.raises(ValueError, match="padding_value must be a scalar"):
        lax.pad(x, np.zeros(1, np.float32), [(0, 0, 0)])
    with pytest.raises(ValueError, match="triples"):
        lax.pad(x, np.float32(0), [(0, 0)])


# --- iota ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float16, np.float32,
                                   np.complex64])
def test_iota_matches_numpy(dtype):
    check(lambda: lax.iota(dtype, 5), [], np.arange(5, dtype=dtype))
    check(lambda: lax.iota(dtype, 0), [], np.arange(0, dtype=dtype))
    for dim in range(3):
        shape = (2, 3, 4)
        expected = np.broadcast_to(
            np.arange(shape[dim], dtype=dtype).reshape([-1 if i == dim else 1
                                                        for i in range(3)]), shape)
        check(lambda: lax.broadcasted_iota(dtype, shape, dim), [], expected)


def test_iota_dtypes_jaxpr_and_errors(x64):
    assert lax.iota(np.int64, 3).dtype == np.int64
    nbjax.config.update("enable_x64", False)
    assert lax.iota(np.int64, 3).dtype == np.int32
    assert lax.iota(float, 3).dtype == np.float32
    assert not lax.iota(np.float32, 3).weak_type
    closed = nbjax.make_jaxpr(lambda: lax.broadcasted_iota(np.float32, (2, 3), 1))()
    assert "iota[dimension=1 dtype=float32 shape=(2, 3) sharding=None]" in str(closed)
    with pytest.raises(TypeError, match="iota does not accept dtype bool"):
        lax.iota(np.bool_, 3)
    with pytest.raises(ValueError, match="iota dimension must be between"):
        lax.broadcasted_iota(np.int32, (2, 3), 2)


# --- full, full_like, zeros_like -----------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_full_and_full_like(dtype):
    value = random_array(np.random.default_rng(6), (), dtype)
    check(lambda v: lax.full((2, 3), v), [value], np.full((2, 3), value, dtype))
    check(lambda v: lax.full((0,), v), [value], np.full((0,), value, dtype))
    out = lax.full((2,), 1, dtype)
    assert_same(out, np.ones(2, dtype))
    assert not out.weak_type
    like = np.zeros((3, 1), dtype)
    check(lambda x: lax.full_like(x, 1), [like], np.ones((3, 1), dtype))
    check(lambda x: lax.zeros_like_array(x), [like.T], np.zeros((1, 3), dtype))


def test_full_weak_types_and_conversion():
    assert lax.full((2,), 1).weak_type and lax.full((2,), 1).dtype == np.int32
    assert lax.full((2,), 1.0).dtype == np.float32 and lax.full((2,), 1.0).weak_type
    assert not lax.full((2,), np.float32(1.0)).weak_type
    assert_same(lax.full_like(np.ones(2, np.int8), 1.7), np.ones(2, np.int8))
    assert_same(lax.full_like(np.ones(2, np.int8), 3, shape=(1, 3)), np.full((1, 3), 3, np.int8))
    assert_same(lax.full_like(np.ones(2, np.int8), 3, dtype=np.float32), np.full(2, 3, np.float32))
    weak = lax.full_like(2.0, 3)
    assert weak.weak_type and weak.shape == () and float(weak) == 3.0
    assert lax.zeros_like_array(lax.full((2,), 1.0)).weak_type
    closed = nbjax.make_jaxpr(lambda: lax.full((2, 3), 1.0))()
    assert [e.primitive.name for e in closed.eqns] == ["broadcast_in_dim"]
    with pytest.raises(TypeError, match="scalar fill_value"):
        lax.full((2,), np.ones(2, np.float32))


# --- remembered abstract evaluation (lax.standard.remembered) -----------------------------

def test_remembered_rules_answer_per_types_and_params(monkeypatch):
    """A remembered rule gives one answer per (operand types, params), the same object for
    equal ones, and stays right when its table is full and starts again."""
    from nbjax.core import ShapedArray
    from nbjax.lax import standard
    monkeypatch.setattr(standard, "REMEMBERED_TYPES", 4)
    rule = standard.remembered(
        lambda x, *, start_indices, limit_indices, strides:
        lax.slice_p.abstract_eval(x, start_indices=start_indices, limit_indices=limit_indices,
                                  strides=strides))
    x = ShapedArray((5, 6), np.float32)
    first = rule(x, start_indices=(1, 0), limit_indices=(4, 6), strides=None)
    assert first == ShapedArray((3, 6), np.float32)
    assert rule(ShapedArray((5, 6), np.float32), start_indices=(1, 0), limit_indices=(4, 6),
                strides=None) is first
    for n in range(1, 10):  # more than the table holds
        wide = ShapedArray((5, n), np.float32)
        out = rule(wide, start_indices=(0, 0), limit_indices=(5, n), strides=(2, 1))
        assert out == ShapedArray((3, n), np.float32)
    assert rule(ShapedArray((5, 6), np.int32), start_indices=(1, 0), limit_indices=(4, 6),
                strides=None) == ShapedArray((3, 6), np.int32)


def test_remembered_rules_raise_again_for_bad_operands():
    """Only results are remembered: a check that failed fails on every call."""
    x = nbjax.numpy.zeros((5, 6), np.float32)
    for _ in range(2):
        with pytest.raises(TypeError, match="limit_indices must be less than"):
            lax.slice(x, (0, 0), (6, 6))
        with pytest.raises(TypeError, match="same dtypes"):
            lax.add(x, nbjax.numpy.zeros((5, 6), np.int32))
    assert lax.slice(x, (0, 0), (5, 6)).shape == (5, 6)


def test_remembered_dot_general_types_per_dimension_numbers():
    """dot_general's rule is remembered per operand types and dimension numbers (the
    hashable DotDimensionNumbers lax makes): each contraction gets its own type, equal ones
    the same object, bad ones their error every time; unhashable (list) ones are typed
    without being remembered."""
    from nbjax.core import ShapedArray
    from nbjax.lax.dot import DotDimensionNumbers
    a, b = ShapedArray((2, 3, 4), np.float32), ShapedArray((4, 5), np.float32)
    f32 = np.dtype("float32")

    def typed(dims, lhs=a, rhs=b):
        return lax.dot_general_p.abstract_eval(lhs, rhs, dimension_numbers=dims, precision=None,
                                               preferred_element_type=f32)
    first = typed(DotDimensionNumbers((((2,), (0,)), ((), ()))))
    assert first == ShapedArray((2, 3, 5), np.float32)
    assert typed(DotDimensionNumbers((((2,), (0,)), ((), ())))) is first
    assert typed((((2,), (0,)), ((), ()))) is first  # (equal to the plain tuple)
    c = ShapedArray((4, 3), np.float32)
    assert typed((((1,), (1,)), ((), ())), rhs=c) == ShapedArray((2, 4, 4), np.float32)
    assert typed((((2,), (0,)), ((), ())), rhs=ShapedArray((4, 2), np.float32)) == \
        ShapedArray((2, 3, 2), np.float32)
    for _ in range(2):
        with pytest.raises(TypeError, match="contracting dimensions to have the same shape"):
            typed((((1,), (0,)), ((), ())))
    assert typed((([2], [0]), ([], []))) == first


def test_remembered_select_pad_and_convolution_types():
    """select_n, pad and conv_general_dilated remember their types: equal operand types and
    params give the same object, other params their own type, bad operands their error on
    every call."""
    from nbjax.core import ShapedArray
    f32, i32 = ShapedArray((4, 5), np.float32), ShapedArray((4, 5), np.int32)
    which, scalar = ShapedArray((4, 5), np.bool_), ShapedArray((), np.float32)
    picked = lax.select_n_p.abstract_eval(which, f32, f32)
    assert picked == f32 and lax.select_n_p.abstract_eval(which, f32, f32) is picked
    padded = lax.pad_p.abstract_eval(f32, scalar, padding_config=((1, 0, 0), (0, 2, 1)))
    assert padded == ShapedArray((5, 11), np.float32)
    assert lax.pad_p.abstract_eval(f32, scalar, padding_config=((1, 0, 0), (0, 2, 1))) is padded
    assert lax.pad_p.abstract_eval(f32, scalar, padding_config=((0, 0, 0), (0, 0, 0))) == f32
    for _ in range(2):
        with pytest.raises(TypeError, match="same dtypes"):
            lax.select_n_p.abstract_eval(which, f32, i32)
        with pytest.raises(TypeError, match="same dtype"):
            lax.pad_p.abstract_eval(i32, scalar, padding_config=((0, 0, 0), (0, 0, 0)))
    x, w = np.zeros((1, 6, 6, 2), np.float32), np.zeros((3, 3, 2, 4), np.float32)
    dn = ("NHWC", "HWIO", "NHWC")
    conv = nbjax.make_jaxpr(lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=dn))(x, w).eqns[0]
    typed = conv.primitive.abstract_eval(*(v.aval for v in conv.invars), **conv.params)
    assert typed == ShapedArray((1, 6, 6, 4), np.float32)
    assert conv.primitive.abstract_eval(*(v.aval for v in conv.invars), **conv.params) is typed
    valid = lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=dn)
    assert valid.shape == (1, 4, 4, 4)
    for _ in range(2):
        with pytest.raises(TypeError):
            lax.conv_general_dilated(x, w.astype(np.int32), (1, 1), "SAME",
                                     dimension_numbers=dn)

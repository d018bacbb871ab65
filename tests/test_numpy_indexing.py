"""x[idx], x.at[idx], take and the index builders, against NumPy (and JAX's rules)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbjax
import nbjax.numpy as jnp
from helpers import assert_close, staged

RNG = np.random.default_rng(0)


def primitives(f, *args):
    return {e.primitive.name for e in nbjax.make_jaxpr(f)(*args).jaxpr.eqns}


def assert_same(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_array_equal(got, want)


# --- random index expressions --------------------------------------------------------------

@st.composite
def array_and_index(draw):
    """A shape and a NumPy-valid index into it mixing every kind of index entry."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=4)))
    entries, axis, used_ellipsis = [], 0, False
    advanced_shape = draw(st.sampled_from([(), (2,), (1, 3), (3,)]))
    while axis < len(shape) and draw(st.booleans()):
        n = shape[axis]
        kinds = ["slice", "none"] + (["int", "array"] if n else []) + ["mask"] + \
            ([] if used_ellipsis else ["ellipsis"])
        kind = draw(st.sampled_from(kinds))
        if kind == "slice":
            bound = st.none() | st.integers(-n - 2, n + 2)
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            entries.append(slice(draw(bound), draw(bound), step))
            axis += 1
        elif kind == "none":
            entries.append(None)
        elif kind == "int":
            entries.append(draw(st.integers(-n, n - 1)))
            axis += 1
        elif kind == "array":
            values = draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(advanced_shape)),
                                   max_size=int(np.prod(advanced_shape))))
            entries.append(np.array(values, dtype=np.int32).reshape(advanced_shape))
            axis += 1
        elif kind == "mask":
            entries.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                                    dtype=bool))
            axis += 1
        else:
            entries.append(Ellipsis)
            used_ellipsis = True
            axis = len(shape)  # the ellipsis may stand for all remaining axes
    masks = sum(isinstance(e, np.ndarray) and e.dtype == bool for e in entries)
    arrays = sum(isinstance(e, np.ndarray) and e.dtype != bool for e in entries)
    if masks and (arrays or masks > 1):  # keep advanced indices broadcast-compatible
        entries = [slice(None) if isinstance(e, np.ndarray) and e.dtype == bool else e
                   for e in entries]
    return shape, tuple(entries)


@settings(max_examples=120, deadline=None)
@given(array_and_index())
def test_getitem_matches_numpy(case):
    shape, idx = case
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    assert_same(jnp.asarray(x)[idx], x[idx])


@settings(max_examples=30, deadline=None)
@given(array_and_index())
def test_getitem_staged_matches_numpy(case):
    shape, idx = case
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    if any(isinstance(e, np.ndarray) and e.dtype == bool for e in idx):
        return  # boolean masks need concrete values (tested below)
    assert_same(staged(lambda a: a[idx], x), x[idx])


def test_getitem_non_contiguous_and_dtypes():
    for dtype in (np.bool_, np.int8, np.uint32, np.float32, np.complex64):
        base = (RNG.normal(size=(4, 6)) * 3).astype(dtype)
        x = base[:, ::2].T  # a transposed, strided view
        for idx in [(slice(None, None, -1), 1), (np.array([2, 0, 2]),), (Ellipsis, [0, 3])]:
            out = jnp.asarray(x)[idx]
            assert out.dtype == jnp.asarray(x).dtype
            assert_same(out, x[idx])


def test_advanced_indices_separated_by_a_slice_go_first():
    x = np.arange(5 * 2 * 3).reshape(5, 2, 3)
    idx = (slice(None), [0, 1], None, [0, 2])
    assert jnp.asarray(x)[idx].shape == x[idx].shape == (2, 5, 1)
    idx = ([0, 4], slice(1, None), [2, 0])
    assert_same(jnp.asarray(x)[idx], x[idx])


# --- which primitives indexing uses (as JAX) -----------------------------------------------

def test_static_indexing_uses_slices_not_gather():
    x = np.ones((3, 4, 5), np.float32)
    prims = primitives(lambda a: a[1, ::-2, None, 1:], x)
    assert "gather" not in prims and "dynamic_slice" not in prims
    assert {"slice", "rev", "squeeze"} <= prims


def test_traced_scalar_index_uses_dynamic_slice():
    x = np.arange(6.0, dtype=np.float32)
    assert "dynamic_slice" in primitives(lambda a, i: a[i], x, 2)
    assert "gather" not in primitives(lambda a, i: a[i], x, 2)
    for i in (-6, -1, 0, 5):
        assert staged(lambda a, i: a[i], x, np.int32(i)) == x[i]


def test_out_of_range_static_integer_uses_dynamic_slice():
    """As JAX: an integer out of range (or traced) makes the whole read one dynamic_slice of
    the array, with None's axes added after, so index checks see it (checkify); beside a
    slice of another step than 1 or -1 it is a gather; mode="clip" keeps the clamped slice."""
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for index in (lambda a: a[5], lambda a: a[1, -9], lambda a: a[None, 1:, 7, None],
                  lambda a: a[::-1, 4]):
        prims = primitives(index, x)
        assert "dynamic_slice" in prims and not {"slice", "gather"} & prims
    jaxpr = nbjax.make_jaxpr(lambda a: a[None, 1:, 7, None])(x).jaxpr
    assert [e.primitive.name for e in jaxpr.eqns][-1] == "broadcast_in_dim"
    assert jaxpr.eqns[0].invars[0].aval.shape == (3, 4)
    assert "gather" in primitives(lambda a: a[::2, 7], x)
    assert "dynamic_slice" not in primitives(lambda a: a.at[1, 7].get(mode="clip"), x)


def test_array_index_uses_gather():
    x = np.arange(6.0, dtype=np.float32)
    assert "gather" in primitives(lambda a: a[np.array([0, 5])], x)


# --- JAX's out-of-bounds rules -------------------------------------------------------------

def test_out_of_bounds_reads_clamp():
    x = jnp.arange(3.0)
    assert x[10] == 2.0 and x[-10] == 0.0
    y = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for index, expected in ((np.s_[1, 9], y[1, 3]), (np.s_[None, 5, ::-1], y[None, 2, ::-1]),
                            (np.s_[-7, 1:3], y[0, 1:3]), (np.s_[::2, -9], y[::2, 0])):
        assert_same(jnp.asarray(y)[index], expected)
        assert_same(nbjax.jit(lambda a: a[index])(y), expected)
    assert jnp.asarray(y).at[1, -1].get(wrap_negative_indices=False) == y[1, 0]
    assert_same(x[jnp.array([0, 10, -10])], np.array([0.0, 2.0, 0.0], np.float32))


def test_get_with_fill_mode():
    x = jnp.arange(4.0)
    assert_same(x.at[jnp.array([1, 7])].get(mode="fill", fill_value=-1.0),
                np.array([1.0, -1.0], np.float32))
    assert x.at[7].get(mode="fill", fill_value=5.0) == 5.0
    assert x.at[2].get(mode="fill") == 2.0


# --- errors --------------------------------------------------------------------------------

def test_setitem_points_to_at():
    with pytest.raises(TypeError, match=r"\.at\["):
        jnp.arange(3)[0] = 1


def test_traced_boolean_mask_is_refused():
    with pytest.raises(jnp.NonConcreteBooleanIndexError, match="concrete"):
        nbjax.make_jaxpr(lambda a: a[a > 0])(np.ones(3, np.float32))
    assert issubclass(jnp.NonConcreteBooleanIndexError, IndexError)
    assert issubclass(jnp.NonConcreteBooleanIndexError, TypeError)


@pytest.mark.parametrize("idx, error, match", [
    (1.0, TypeError, "integer or boolean"),
    (np.array([1.0]), TypeError, "integer or boolean"),
    ([0, 1], TypeError, "non-tuple sequence"),
    ((0, 1), IndexError, "Too many indices"),
    ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    ("a", TypeError, "not supported"),
])
def test_bad_indices(idx, error, match):
    with pytest.raises(error, match=match):
        jnp.ones(3)[idx]


@pytest.mark.parametrize("index", [lambda i: np.s_[i:], lambda i: np.s_[:i],
                                   lambda i: np.s_[::i], lambda i: np.s_[:, 1:i]])
def test_traced_slice_bound_is_an_index_error(index):
    # (was the TypeError of calling __index__ on a tracer)
    with pytest.raises(IndexError, match="static integers"):
        nbjax.jit(lambda a, i: a[index(i)])(jnp.ones((3, 3)), 1)


@pytest.mark.parametrize("mode", ["bogus", "wrap"])
def test_get_refuses_an_unknown_mode_even_without_gather(mode):
    with pytest.raises(ValueError, match="mode"):
        jnp.arange(3).at[0].get(mode=mode)


def test_boolean_mask_shape_mismatch():
    with pytest.raises(IndexError, match="boolean index did not match"):
        jnp.ones((2, 3))[np.array([True, False, True])]
    with pytest.raises(IndexError, match="boolean index did not match"):
        jnp.ones(1)[np.zeros(3, bool)]


@pytest.mark.parametrize("shape,mask_shape", [((2,), (0,)), ((1, 3), (0, 3)), ((1, 3), (1, 0)),
                                              ((4, 2), (0, 2))])
def test_an_empty_boolean_mask_selects_nothing_along_an_axis_of_any_size(shape, mask_shape):
    x = np.arange(np.prod(shape)).reshape(shape)
    mask = np.zeros(mask_shape, bool)
    assert_same(jnp.asarray(x)[mask], x[mask])  # (NumPy, and JAX, allow it)


# --- .at[] updates -------------------------------------------------------------------------

UPDATES = [
    ("set", lambda out, idx, y: out.__setitem__(idx, y)),
    ("add", lambda out, idx, y: np.add.at(out, idx, y)),
    ("multiply", lambda out, idx, y: np.multiply.at(out, idx, y)),
    ("min", lambda out, idx, y: np.minimum.at(out, idx, y)),
    ("max", lambda out, idx, y: np.maximum.at(out, idx, y)),
]


@pytest.mark.parametrize("method, numpy_update", UPDATES)
@pytest.mark.parametrize("idx", [
    1, -1, (slice(None), 2), (slice(None, None, -2), [0, 3]), (Ellipsis, None, 1),
    (np.array([0, 2, 0]),),  # duplicates: accumulate (set: same value, any wins)
    (np.array([[0], [2]]), np.array([1, 3])),
])
def test_at_updates_match_numpy(method, numpy_update, idx):
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    want = x.copy()
    y_shape = x[idx].shape
    y = np.full(y_shape, 2.5, np.float32) if method == "set" else \
        RNG.normal(size=y_shape).astype(np.float32)
    numpy_update(want, idx, y)
    got = getattr(jnp.asarray(x).at[idx], method)(y)
    assert_close(np.asarray(got), want, rtol=1e-6)
    staged_out = staged(lambda a, b: getattr(a.at[idx], method)(b), x, y)
    assert_close(np.asarray(staged_out), want, rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-5, 4), min_size=0, max_size=8),
       st.sampled_from([np.int32, np.float32, np.uint8]))
def test_at_add_with_duplicates(indices, dtype):
    x = np.arange(5).astype(dtype)
    idx = np.array(indices, np.int32)
    want = x.copy()
    np.add.at(want, idx, np.ones(len(idx), dtype))
    got = jnp.asarray(x).at[idx].add(np.ones(len(idx), dtype))
    assert got.dtype == jnp.asarray(x).dtype
    assert_same(got, want)


def test_at_scalar_value_broadcasts():
    got = jnp.zeros((2, 3)).at[:, 1].set(7.0)
    want = np.zeros((2, 3), np.float32)
    want[:, 1] = 7
    assert_same(got, want)


def test_at_out_of_bounds_modes():
    x = jnp.zeros(3)
    assert_same(x.at[5].set(1.0), np.zeros(3, np.float32))  # default: dropped
    assert_same(x.at[jnp.array([5, 1])].add(1.0), np.array([0, 1, 0], np.float32))
    assert_same(x.at[5].set(1.0, mode="clip"), np.array([0, 0, 1], np.float32))
    assert_same(x.at[-1].set(1.0), np.array([0, 0, 1], np.float32))


def test_at_subtract_divide_power():
    x = np.arange(1, 5).astype(np.float32)
    idx = np.array([0, 2])
    want = x.copy()
    want[idx] -= 2
    assert_same(jnp.asarray(x).at[idx].subtract(2.0), want)
    want = x.copy()
    want[idx] /= 4
    assert_same(jnp.asarray(x).at[idx].divide(4.0), want)
    want = x.copy()
    want[idx] **= 2
    assert_same(jnp.asarray(x).at[idx].power(2.0), want)
    assert_same(jnp.arange(4).at[1].divide(2), np.array([0, 0.5, 2, 3], np.float32))


def test_at_unsafe_cast_warns_and_casts():
    with pytest.warns(FutureWarning, match="cannot safely cast"):
        out = jnp.arange(3).at[1].set(2.5)
    assert out.dtype == np.int32 and out[1] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jnp.arange(3.0).at[1].set(2).dtype == np.float32  # weak int: safe


def test_at_combines_in_the_promoted_dtype_then_casts_back():
    # As JAX: x and the values promote, the scatter runs there, the result takes x's dtype.
    idx = np.array([1, 1])
    with pytest.warns(FutureWarning, match="cannot safely cast"):
        assert_same(jnp.zeros(3, np.int32).at[idx].add(2.5), np.array([0, 5, 0], np.int32))
    with pytest.warns(FutureWarning, match="cannot safely cast"):
        assert_same(jnp.ones(3, np.int32).at[idx].multiply(2.5), np.array([1, 6, 1], np.int32))
    with pytest.warns(FutureWarning, match="cannot safely cast"):
        assert_same(jnp.full(3, 10, np.int32).at[idx].divide(2.5),
                    np.array([10, 10 / 6, 10], np.float32))
    # a boolean array takes integer additions (bool + bool has no scatter-add)
    with pytest.warns(FutureWarning, match="cannot safely cast"):
        assert_same(jnp.zeros(3, bool).at[idx].add(3), np.array([False, True, False]))
    # a float16 array accumulates float32 values in float32, rounding once
    want = np.array([0, np.float16(np.float32(1e-4) * 3)], np.float16)
    with pytest.warns(FutureWarning, match="cannot safely cast"):
        assert_same(jnp.zeros(2, np.float16).at[np.array([1, 1, 1])].add(np.float32(1e-4)),
                    want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # x's dtype counts as strong: float16 casts safely
        out = jnp.asarray(1.0).at[()].add(np.float16(1))
    assert out.dtype == np.float32 and out.weak_type and out == 2  # x's weak type is kept


@pytest.mark.parametrize("idx", [np.array([0, 2, 0]), 1, np.s_[1:], np.array([3, -1])])
def test_at_apply_matches_numpy_ufunc_at(idx):
    x = np.arange(1.0, 4.0, dtype=np.float32)
    want = x.copy()
    np.square.at(want, np.asarray(idx)[np.asarray(idx) < 3] if isinstance(idx, np.ndarray)
                 else idx)
    got = jnp.asarray(x).at[idx].apply(jnp.square)
    assert_same(got, want)
    assert_same(staged(lambda a: a.at[idx].apply(jnp.square), x), want)


def test_at_shape_mismatch():
    with pytest.raises(ValueError):
        jnp.ones((2, 3)).at[0].set(jnp.ones((2, 3)))


@pytest.mark.parametrize("update", [
    lambda x: x.at[np.array([], np.int32)].add(True),     # a bool add, which scatter refuses
    lambda x: x.at[1:1].set(np.ones((5, 7), bool)),       # values that would not broadcast
    lambda x: x.at[np.array([], np.int32)].multiply(2),
])
def test_at_updates_addressing_nothing_return_the_array_as_jax_does(update):
    """An update of an empty selection is no scatter at all in JAX: the array comes back
    unchanged, whatever the scatter would have refused (eagerly and under jit)."""
    x = jnp.asarray(np.array([True, False, True]))
    for run in (update, nbjax.jit(update)):
        out = run(x)
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out, [True, False, True])
    with pytest.raises(TypeError, match="add does not accept dtype bool"):
        x.at[np.array([0, 0])].add(True)


# --- take and take_along_axis --------------------------------------------------------------

def test_take_default_fill_and_modes():
    x = np.arange(4.0, dtype=np.float32)
    idx = np.array([0, -1, 5, -6])
    got = np.asarray(jnp.take(x, idx))
    np.testing.assert_array_equal(got[:2], [0.0, 3.0])
    assert np.isnan(got[2:]).all()
    # JAX (0.10) and NumPy clip without wrapping: -1 goes to 0.
    assert_same(jnp.take(x, idx, mode="clip"), np.take(x, idx, mode="clip"))
    assert_same(jnp.take(x, idx, mode="wrap"), np.take(x, idx, mode="wrap"))
    assert_same(jnp.take(np.arange(4), np.array([7]), fill_value=-3), np.array([-3]))
    with pytest.raises(NotImplementedError, match="'raise'"):
        jnp.take(x, idx, mode="raise")


def test_take_index_dtypes_and_empty_axis():
    x = np.arange(3, dtype=np.int32)
    # NumPy and JAX read boolean indices as 0 and 1
    assert_same(jnp.take(x, np.array([True, False])), np.take(x, np.array([True, False])))
    with pytest.raises(ValueError, match="integer"):
        jnp.take(x, np.array([1.0]))
    for mode in (None, "clip", "wrap"):
        with pytest.raises(IndexError, match="empty axis"):  # was a gather's TypeError
            jnp.take(np.zeros((0, 3)), np.array([0]), axis=0, mode=mode)
    assert jnp.take(np.zeros((0, 3)), np.array([0]), axis=1).shape == (0, 1)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take_axes(axis):
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    idx = np.array([[0, 2], [1, 1]])
    assert_same(jnp.take(x, idx, axis=axis), np.take(x, idx, axis=axis))
    assert_same(staged(lambda a: jnp.take(a, idx, axis=axis), x), np.take(x, idx, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, None])
def test_take_along_axis(axis):
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    idx = np.argsort(x, axis=axis)
    assert_same(jnp.take_along_axis(x, idx, axis=axis), np.take_along_axis(x, idx, axis=axis))
    idx = RNG.integers(-3, 3, size=(1, 4) if axis == 0 else (3, 1))
    if axis is not None:
        want = np.take_along_axis(x, idx, axis=axis)
        assert_same(jnp.take_along_axis(x, idx, axis=axis), want)


def test_take_along_axis_defaults_to_the_last_axis():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    idx = np.argsort(x)
    assert_same(jnp.take_along_axis(x, idx), np.take_along_axis(x, idx, axis=-1))


@pytest.mark.parametrize("mode,want", [(None, [np.nan, 2, np.nan]), ("fill", [-7, 2, -7]),
                                       ("clip", [0, 2, 0])])
def test_take_along_axis_without_wrapping_negative_indices(mode, want):
    """``wrap_negative_indices=False``: a negative index is out of bounds (JAX 0.10)."""
    x = np.arange(5, dtype=np.float32)
    idx = np.array([-1, 2, -2], np.int8)
    fill = -7 if mode == "fill" else None
    f = lambda x, i: jnp.take_along_axis(x, i, mode=mode, fill_value=fill,  # noqa: E731
                                         wrap_negative_indices=False)
    assert_same(f(x, idx), np.array(want, np.float32))
    assert_same(nbjax.jit(f)(x, idx), np.array(want, np.float32))
    big = np.arange(300, dtype=np.float32)  # (past the end does not fit in int8)
    assert np.isnan(np.asarray(jnp.take_along_axis(big, idx, wrap_negative_indices=False))[0])


# --- index builders ------------------------------------------------------------------------

def test_indices_and_ix():
    assert_same(jnp.indices((2, 3)), np.indices((2, 3)))
    for got, want in zip(jnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True)):
        assert_same(got, want)
    x = np.arange(12).reshape(3, 4)
    mesh = jnp.ix_(np.array([0, 2]), np.array([True, False, True, True]))
    assert_same(jnp.asarray(x)[mesh], x[np.ix_([0, 2], [True, False, True, True])])


def test_unravel_and_ravel_multi_index():
    shape = (2, 3, 4)
    flat = np.array([0, 5, 23, 17])
    for got, want in zip(jnp.unravel_index(flat, shape), np.unravel_index(flat, shape)):
        assert_same(got, want)
    # JAX clamps out-of-range flat indices (and wraps negative ones) instead of raising.
    for got, want in zip(jnp.unravel_index(np.array([-1, 99, -99]), (2, 3)),
                         ([1, 1, 0], [2, 2, 0])):
        assert_same(got, np.array(want))
    coords = (np.array([0, 1]), np.array([2, 0]), np.array([3, 1]))
    assert_same(jnp.ravel_multi_index(coords, shape), np.ravel_multi_index(coords, shape))
    bad = (np.array([0, 2]), np.array([1, 1]))
    assert_same(jnp.ravel_multi_index(bad, (2, 3), mode="clip"),
                np.ravel_multi_index(bad, (2, 3), mode="clip"))
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.ravel_multi_index(bad, (2, 3))
    # the result's type is the coordinates' (as JAX), which must hold every flat index
    small = (np.array([1], np.int8), np.array([2], np.int16))
    assert_same(jnp.ravel_multi_index(small, (2, 3)), np.array([5], np.int16))
    assert_same(jnp.ravel_multi_index(coords, shape, dtype=np.uint8),
                np.ravel_multi_index(coords, shape).astype(np.uint8))
    with pytest.raises(ValueError, match="not large enough"):
        jnp.ravel_multi_index((np.array([1], np.int8),) * 2, (20, 30))


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_triangle_and_diagonal_indices(k):
    for name in ("tril_indices", "triu_indices"):
        for got, want in zip(getattr(jnp, name)(4, k, 3), getattr(np, name)(4, k, 3)):
            assert_same(got, want)
    for got, want in zip(jnp.diag_indices(3, 3), np.diag_indices(3, 3)):
        assert_same(got, want)


@pytest.mark.parametrize("i, want", [(-11, 0.0), (10, 9.0), (-1, 9.0), (-30, 0.0)])
def test_out_of_range_array_scalar_index_is_clamped_eagerly_as_under_jit(i, want):
    """x[jnp.int32(i)] clamps the way JAX does, eagerly and under jit alike (it used to raise
    eagerly: the wrapped index was checked as if it were a Python integer)."""
    x = jnp.arange(10, dtype=jnp.float32)
    f = lambda x, i: x[i]  # noqa: E731
    assert float(f(x, jnp.int32(i))) == float(nbjax.jit(f)(x, jnp.int32(i))) == want
    assert float(nbjax.lax.dynamic_slice(x, [jnp.int32(-3)], [2],
                                         allow_negative_indices=False)[0]) == 0.0
    with pytest.raises(ValueError, match="allow_negative_indices=False"):
        nbjax.lax.dynamic_slice(x, [-3], [2], allow_negative_indices=False)


def test_take_clip_clamps_negative_indices_to_zero():
    """mode='clip' clips -1 to 0 (NumPy and JAX), it does not count it from the end."""
    x_np = np.arange(10, dtype=np.float32)
    idx = np.array([-1, -11, 3, 11], np.int32)
    want = np.take(x_np, idx, mode="clip")
    assert_same(jnp.take(jnp.asarray(x_np), idx, mode="clip"), want)
    assert_same(nbjax.jit(lambda x, i: jnp.take(x, i, mode="clip"))(x_np, idx), want)
    # take_along_axis and x[idx] still count a negative index from the end before clipping
    assert_same(jnp.take_along_axis(jnp.asarray(x_np), idx, 0, mode="clip"),
                np.array([9, 0, 3, 9], np.float32))

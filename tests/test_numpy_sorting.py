"""Sorting, searching, counting and set operations, against NumPy (JAX's padding rules)."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import ConcretizationTypeError
from helpers import assert_close, staged

RNG = np.random.default_rng(2)


def assert_same(got, want):
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def small_ints(shape, dtype=np.float32):
    """Few distinct values, so sorting has ties and unique has repeats."""
    return RNG.integers(-2, 3, size=shape).astype(dtype)


def with_nan(x):
    x = x.copy()
    x.flat[::3] = np.nan
    return x


SORT_INPUTS = [
    small_ints((7,)), small_ints((3, 4), np.int8), small_ints((3, 4), np.uint8),
    with_nan(small_ints((2, 5))), small_ints((4, 6))[:, ::2], small_ints((0, 3)),
    (small_ints((2, 3)) > 0),
]


@pytest.mark.parametrize("x", SORT_INPUTS, ids=range(len(SORT_INPUTS)))
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_sort_and_argsort(x, axis):
    assert_same(jnp.sort(x, axis=axis), np.sort(x, axis=axis))
    assert_same(jnp.argsort(x, axis=axis), np.argsort(x, axis=axis, stable=True))
    assert_same(staged(lambda a: jnp.argsort(a, axis=axis), x),
                np.argsort(x, axis=axis, stable=True))


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.float32])
def test_argsort_gives_indices_of_the_dtype_asked_for(dtype):
    x = np.array([3.0, 1.0, 2.0, 1.0], np.float32)
    for descending in (False, True):
        got = jnp.argsort(x, dtype=dtype, descending=descending)
        want = np.argsort(-x if descending else x, stable=True).astype(dtype)
        assert_same(got, want)


def test_descending_is_stable():
    x = np.array([1, 3, 1, 3, 2], np.int32)
    assert_same(jnp.sort(x, descending=True), np.sort(x)[::-1])
    # Equal elements keep their original order: a stable sort of -x.
    assert_same(jnp.argsort(x, descending=True), np.argsort(-x, stable=True))
    y = small_ints((3, 5))
    assert_same(jnp.argsort(y, axis=0, descending=True), np.argsort(-y, axis=0, stable=True))


def test_sort_complex_and_lexsort():
    z = (small_ints((6,)) + 1j * small_ints((6,))).astype(np.complex64)
    assert_same(jnp.sort(z), np.sort(z))
    ints = small_ints((5,), np.int32)
    assert_same(jnp.sort_complex(ints), np.sort_complex(ints))
    assert jnp.sort_complex(ints).dtype == np.complex64
    keys = (small_ints((8,)), small_ints((8,), np.int32), small_ints((8,)))
    assert_same(jnp.lexsort(keys), np.lexsort(keys))
    k2 = small_ints((3, 4))
    assert_same(jnp.lexsort((k2, k2[::-1]), axis=0), np.lexsort((k2, k2[::-1]), axis=0))


@pytest.mark.parametrize("kth", [0, 2, -1])
def test_partition(kth):
    x = small_ints((3, 6))
    got, idx = np.asarray(jnp.partition(x, kth)), np.asarray(jnp.argpartition(x, kth))
    k = kth % 6
    want_kth = np.sort(x, axis=-1)[:, k]
    np.testing.assert_array_equal(got[:, k], want_kth)
    assert (got[:, :k] <= want_kth[:, None]).all() and (got[:, k:] >= want_kth[:, None]).all()
    np.testing.assert_array_equal(np.take_along_axis(x, idx, -1), got)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.partition(x, 6)


# --- unique --------------------------------------------------------------------------------

UNIQUE_INPUTS = [small_ints((9,)), small_ints((3, 4), np.int32), with_nan(small_ints((7,))),
                 small_ints((0,)), small_ints((4, 6), np.uint8)[:, ::3]]


@pytest.mark.parametrize("x", UNIQUE_INPUTS, ids=range(len(UNIQUE_INPUTS)))
def test_unique_matches_numpy(x):
    got = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    assert_same(got, want)
    assert_same(jnp.unique(x), np.unique(x))


def test_unique_axis():
    x = small_ints((5, 2), np.int32)
    x[3] = x[0]
    for axis in (0, 1):
        got = jnp.unique(x, axis=axis, return_index=True, return_inverse=True,
                         return_counts=True)
        want = np.unique(x, axis=axis, return_index=True, return_inverse=True,
                         return_counts=True)
        assert_same(got, tuple(w.reshape(-1) if i == 2 else w for i, w in enumerate(want)))


def test_unique_with_size_pads_as_jax():
    x = np.array([3, 1, 3, 2], np.int32)

    def f(a):
        return jnp.unique(a, return_index=True, return_inverse=True, return_counts=True,
                          size=5, fill_value=-9)
    # Padding: fill_value for values, the smallest value's first index, zero counts.
    want = (np.array([1, 2, 3, -9, -9]), np.array([1, 3, 0, 1, 1]), np.array([2, 0, 2, 1]),
            np.array([1, 1, 2, 0, 0]))
    assert_same(f(x), want)
    assert_same(staged(f, x), want)
    assert_same(jnp.unique(x, size=4), np.array([1, 2, 3, 1]))  # default pad: the minimum
    assert_same(jnp.unique(x, size=2), np.array([1, 2]))
    with pytest.raises(ConcretizationTypeError, match="size"):
        nbjax.make_jaxpr(jnp.unique)(x)


def test_array_api_unique_functions():
    x = small_ints((3, 4), np.int32)
    values, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True)
    assert_same(jnp.unique_values(x), values)
    assert_same(tuple(jnp.unique_counts(x)), (values, counts))
    result = jnp.unique_inverse(x)
    assert_same(result.inverse_indices, inverse.reshape(x.shape))
    assert_same(tuple(jnp.unique_all(x)), (values, index, inverse.reshape(x.shape), counts))


@pytest.mark.parametrize("x", [np.array([2.0, np.nan, 1.0, np.nan, 2.0], np.float32),
                               np.array([[1.0, np.nan], [1.0, np.nan], [0.0, 5.0]], np.float32)])
def test_unique_equal_nan_false_keeps_each_nan(x):
    for axis in (None, 0):
        got = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True,
                         axis=axis, equal_nan=False)
        want = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                         axis=axis, equal_nan=False)
        assert_same(got, tuple(w.reshape(-1) if axis == 0 and i == 2 else w
                               for i, w in enumerate(want)))


def test_array_api_unique_functions_keep_each_nan():
    x = np.array([1.0, np.nan, np.nan, 1.0], np.float32)
    assert_same(jnp.unique_values(x), np.unique_values(x))
    assert_same(tuple(jnp.unique_counts(x)), tuple(np.unique_counts(x)))
    assert_same(tuple(jnp.unique_all(x)), tuple(np.unique_all(x)))


def test_unique_counts_when_size_cuts_values_off():
    x = np.array([3, 1, 3, 2, 1, 1, 2], np.int32)
    values, counts = np.unique(x, return_counts=True)
    for size in (1, 2):
        got = jnp.unique(x, return_counts=True, size=size)
        assert_same(got, (values[:size], counts[:size]))
        assert_same(staged(lambda a: jnp.unique(a, return_counts=True, size=size), x),
                    (values[:size], counts[:size]))


def test_unique_of_nothing_with_a_size_needs_a_fill_value():
    with pytest.raises(ValueError, match="fill_value"):
        jnp.unique(np.zeros(0, np.float32), size=2)
    assert_same(jnp.unique(np.zeros(0, np.float32), size=2, fill_value=7),
                np.array([7, 7], np.float32))


# --- searching and counting ----------------------------------------------------------------

@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_searchsorted(side, dtype):
    a = np.sort(small_ints((8,), dtype))
    v = small_ints((3, 2), dtype)
    assert_same(jnp.searchsorted(a, v, side=side), np.searchsorted(a, v, side=side))
    assert_same(staged(lambda p, q: jnp.searchsorted(p, q, side=side), a, v),
                np.searchsorted(a, v, side=side))
    perm = RNG.permutation(8)
    shuffled = a[perm]
    sorter = np.argsort(shuffled, stable=True)
    assert_same(jnp.searchsorted(shuffled, v, side=side, sorter=sorter),
                np.searchsorted(shuffled, v, side=side, sorter=sorter))


def test_searchsorted_nan_sorts_last():
    a = np.array([1.0, 2.0, np.nan], np.float32)
    v = np.array([np.nan, 2.0, 0.0], np.float32)
    for side in ("left", "right"):
        assert_same(jnp.searchsorted(a, v, side=side), np.searchsorted(a, v, side=side))


def test_searchsorted_complex_is_lexicographic():
    a = np.sort(np.array([1 + 1j, 1 - 1j, 2 + 0j, -1 + 3j, 1 + 1j], np.complex64))
    v = np.array([[1 + 0j, 1 + 1j], [3 - 1j, -1 + 3j]], np.complex64)
    for side in ("left", "right"):
        assert_same(jnp.searchsorted(a, v, side=side), np.searchsorted(a, v, side=side))


@pytest.mark.parametrize("n", [0, 1, 2, 7, 8, 1000])
@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "compare_all"])
def test_each_search_method_on_ties_nans_and_values_outside(method, n):
    """Every method (the halving ones: ceil(log2(n + 1)) steps) places values below,
    above, between and equal to runs of ties, NaN and the infinities as NumPy does, on
    both sides, eagerly and under jit; the default halves an interval per value, with no
    (values x n) comparisons."""
    a = np.sort(np.round(RNG.uniform(0, 10, n), 0)).astype(np.float32)
    if n > 2:
        a[-1] = np.nan
    v = np.concatenate([RNG.uniform(-1, 11, 50), a[:9], [np.nan, np.inf, -np.inf]])
    v = v.astype(np.float32).reshape(-1, 1) if n == 7 else v.astype(np.float32)
    for side in ("left", "right"):
        want = np.searchsorted(a, v, side=side)
        assert_same(jnp.searchsorted(a, v, side=side, method=method), want)
        assert_same(nbjax.jit(lambda a, v: jnp.searchsorted(a, v, side=side,
                                                            method=method))(a, v), want)
    if n == 1000:
        jaxpr = nbjax.make_jaxpr(lambda a, v: jnp.searchsorted(a, v))(a, v)
        assert max(e.outvars[0].aval.size for e in jaxpr.jaxpr.eqns) <= v.size


def test_search_methods_give_one_answer_and_others_are_refused():
    a, v = np.array([0.0, 1.0, 2.5], np.float32), np.array([-1.0, 1.0, 3.0], np.float32)
    for method in ("scan", "scan_unrolled", "sort", "compare_all"):
        assert_same(jnp.searchsorted(a, v, method=method), np.searchsorted(a, v))
        assert_same(jnp.digitize(v, a, method=method), np.digitize(v, a))
    with pytest.raises(ValueError, match="method"):
        jnp.searchsorted(a, v, method="bisect")
    with pytest.raises(ValueError, match="method"):
        jnp.digitize(v, a, method="bisect")


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("bins", [np.array([0.0, 1.0, 1.0, 2.5]), np.array([3.0, 1.0, -1.0])])
def test_digitize(right, bins):
    x = small_ints((3, 4))
    assert_same(jnp.digitize(x, bins, right=right), np.digitize(x, bins, right=right))
    assert_same(staged(lambda a, b: jnp.digitize(a, b, right=right), x, bins.astype(np.float32)),
                np.digitize(x, bins, right=right))


def test_bincount():
    x = RNG.integers(0, 5, size=12).astype(np.int32)
    assert_same(jnp.bincount(x), np.bincount(x))
    assert_same(jnp.bincount(x, minlength=9), np.bincount(x, minlength=9))
    w = RNG.normal(size=12).astype(np.float32)
    assert_close(jnp.bincount(x, weights=w), np.bincount(x, weights=w),
                 rtol=1e-5)
    assert jnp.bincount(x, weights=w).dtype == np.float32
    assert_same(jnp.bincount(np.array([0, -1, 3])), np.array([2, 0, 0, 1]))  # negatives -> 0
    assert_same(staged(lambda a: jnp.bincount(a, length=3), x), np.bincount(x)[:3])
    with pytest.raises(ConcretizationTypeError):
        nbjax.make_jaxpr(jnp.bincount)(x)
    with pytest.raises(TypeError, match="integer"):
        jnp.bincount(np.ones(3, np.float32))


def test_bincount_of_booleans_and_weights_of_another_shape():
    x = np.array([True, False, True, True])
    assert_same(jnp.bincount(x), np.bincount(x))
    assert_same(jnp.bincount(x, minlength=4), np.bincount(x, minlength=4))
    with pytest.raises(ValueError, match="type of weights must match type of x"):
        jnp.bincount(np.array([0, 1], np.int32), weights=2.0)
    with pytest.raises(ValueError, match="type of weights must match type of x"):
        jnp.bincount(np.array([0, 1], np.int32), weights=np.ones(3, np.float32))


# --- set operations ------------------------------------------------------------------------

def test_isin_and_in1d():
    x, test = small_ints((3, 4), np.int32), np.array([0, 2], np.int32)
    assert_same(jnp.isin(x, test), np.isin(x, test))
    assert_same(jnp.isin(x, test, invert=True), np.isin(x, test, invert=True))
    assert_same(staged(jnp.isin, x, test), np.isin(x, test))
    assert_same(jnp.in1d(x, test), np.isin(x.ravel(), test))


@pytest.mark.parametrize("seed", range(4))
def test_set_operations_match_numpy(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, size=7).astype(np.int32)
    b = rng.integers(3, 9, size=5).astype(np.int32)
    assert_same(jnp.union1d(a, b), np.union1d(a, b))
    assert_same(jnp.setdiff1d(a, b), np.setdiff1d(a, b))
    assert_same(jnp.intersect1d(a, b), np.intersect1d(a, b))
    got = jnp.intersect1d(a, b, return_indices=True)
    assert_same(got, np.intersect1d(a, b, return_indices=True))


def test_set_operations_with_size():
    a, b = np.array([5, 1, 3], np.int32), np.array([3, 5], np.int32)
    # JAX's padding: setdiff1d with 0, intersect1d with its first value, union1d with
    # the smallest value (unique's default).
    assert_same(staged(lambda p, q: jnp.setdiff1d(p, q, size=4), a, np.array([3], np.int32)),
                np.array([1, 5, 0, 0]))
    assert_same(staged(lambda p, q: jnp.intersect1d(p, q, size=4), a, b),
                np.array([3, 5, 3, 3]))
    assert_same(staged(lambda p, q: jnp.union1d(p, q, size=6), a, np.array([3, 6], np.int32)),
                np.array([1, 3, 5, 6, 1, 1]))
    assert_same(jnp.setdiff1d(a, b, size=3, fill_value=-1), np.array([1, -1, -1]))

"""JAX's small helpers: the index tricks of ``nbjax.numpy`` (``mgrid``, ``ogrid``, ``r_``,
``c_``, ``s_``, ``index_exp``) against NumPy's, ``nbjax.flatten_util.ravel_pytree`` (round
trips, dtypes, jit, vmap, grad), ``nbjax.dtypes`` and ``nbjax.errors`` (the class tree, and
each error raised where JAX raises it). Where JAX is importable, its values and dtypes too."""

import functools

import ml_dtypes
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import check_jaxpr
from nbjax.flatten_util import ravel_pytree
from nbjax.test_util import check_grads
from nbjax.tree_util import tree_leaves, tree_map, tree_structure
from helpers import assert_close, check_vmap

try:
    import jax
    import jax.flatten_util
    import jax.numpy as jax_numpy
except ImportError:  # JAX is a test reference only
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX is not installed")

RNG = np.random.default_rng(11)


def _close(actual, expected):
    """Values equal to float32 rounding (NumPy's are computed in float64), shapes exactly."""
    assert_close(np.asarray(actual), np.asarray(expected), rtol=1e-6)


def _canonical(dtype):
    return nbjax.dtypes.canonicalize_dtype(dtype)


# --- mgrid and ogrid -----------------------------------------------------------------------

# Keys on which JAX agrees with NumPy, in values and in dtypes once NumPy's are made 32-bit
# (NumPy's integer scalars as bounds are another matter: see the dtype test).
GRID_KEYS = [
    np.s_[0:5], np.s_[:5], np.s_[0:5:2], np.s_[5:0:-1], np.s_[-3:3:-2], np.s_[0:5:-1],
    np.s_[0:0], np.s_[5:0], np.s_[1.5:4], np.s_[0:5:2.0], np.s_[0:1:0.25], np.s_[0:1:0.3],
    np.s_[1:0:-0.3], np.s_[0.1:0.7:0.2], np.s_[-2.5:2.5:1.25], np.s_[0:1:5j],
    np.s_[3:0:4j], np.s_[0:4:1j], np.s_[0:3:2.5j], np.s_[0:3:-1j], np.s_[0:1:1 + 1j],
    np.s_[0:3:np.complex64(3j)],
    np.s_[0:3, 0:2], np.s_[-1:1:5j, 0:3], np.s_[0:3, 0:2.5:0.5], np.s_[0:2, 0:3:3j],
    np.s_[0:3, 0:0], np.s_[0:2, 0:3, 0:4], np.s_[1:10:3, -1:1:4j, 0.5:2],
    (slice(0, 3),), (),
]


@pytest.mark.parametrize("key", GRID_KEYS, ids=repr)
def test_mgrid_and_ogrid_match_numpy(key):
    dense, expected = jnp.mgrid[key], np.mgrid[key]
    _close(dense, expected)
    assert dense.dtype == _canonical(expected.dtype)
    sparse, expected_sparse = jnp.ogrid[key], np.ogrid[key]
    if isinstance(key, slice):
        _close(sparse, expected_sparse)
        return
    assert isinstance(sparse, list) and len(sparse) == len(expected_sparse)
    for axis, want in zip(sparse, expected_sparse):
        _close(axis, want)
        assert axis.dtype == dense.dtype  # the axes share one dtype


@pytest.mark.parametrize("key", [k for k in GRID_KEYS if isinstance(k, tuple) and len(k) > 1],
                         ids=repr)
def test_ogrid_broadcasts_to_mgrid(key):
    dense = np.asarray(jnp.mgrid[key])
    for axis, coordinates in enumerate(np.broadcast_arrays(*map(np.asarray, jnp.ogrid[key]))):
        np.testing.assert_array_equal(coordinates, dense[axis])


def test_grid_dtypes_follow_arange_and_linspace():
    """A slice is ``arange``'s (integers: the default int; a float anywhere: the default
    float; NumPy integer bounds keep their type) or, with an imaginary step, ``linspace``'s
    (the default float); several slices share the promotion of their ranges."""
    assert jnp.mgrid[0:5].dtype == np.int32 and jnp.mgrid[0:5:0.5].dtype == np.float32
    assert jnp.mgrid[0:5:3j].dtype == np.float32
    key = np.s_[np.int8(1):np.int8(9):np.int8(3)]
    assert jnp.mgrid[key].dtype == np.int8 and np.mgrid[key].dtype == np.int64
    np.testing.assert_array_equal(jnp.mgrid[key], np.mgrid[key])
    assert jnp.mgrid[np.uint8(1):3, np.int8(1):2].dtype == np.int16  # JAX's promotion
    assert [a.dtype for a in jnp.ogrid[0:3, 0:1:0.5]] == [np.float32, np.float32]
    assert not jnp.mgrid[0:5].weak_type
    with nbjax.enable_x64():
        assert jnp.mgrid[0:5].dtype == np.int64 and jnp.mgrid[0:1:3j].dtype == np.float64
    with nbjax.numpy_dtype_promotion("strict"):  # a grid mixes int and float axes anyway
        assert jnp.mgrid[0:2, 0:1:0.5].dtype == np.float32


def test_a_zero_step_is_a_step_of_one():
    """As in JAX (not NumPy, which makes ``0j`` a count of no points): a missing or zero
    step, ``0j`` included, is 1."""
    for key in (np.s_[0:4:0], np.s_[0:4:0.0], np.s_[0:4:0j]):
        np.testing.assert_array_equal(jnp.mgrid[key], np.arange(4))


def test_grid_bounds_must_be_concrete():
    with pytest.raises(nbjax.errors.ConcretizationTypeError, match="slice stop"):
        nbjax.jit(lambda n: jnp.mgrid[0:n])(3)
    with pytest.raises(nbjax.errors.ConcretizationTypeError, match="slice start"):
        nbjax.jit(lambda a: jnp.ogrid[a:3:3j])(0.0)
    with pytest.raises(AttributeError):  # JAX's (and NumPy's) error for a non-slice
        jnp.mgrid[0:3, 5]


@needs_jax
@pytest.mark.parametrize("key", GRID_KEYS + [np.s_[0:4:0j], np.s_[np.float64(0):1],
                                np.s_[np.int8(1):np.int8(9):np.int8(3)]], ids=repr)
def test_grids_match_jax(key):
    _same_as_jax(jnp.mgrid[key], jax_numpy.mgrid[key])
    _same_as_jax(jnp.ogrid[key], jax_numpy.ogrid[key])


def _same_as_jax(ours, theirs):
    """Same structure, dtypes, weak types and shapes; values to float32 rounding."""
    ours, theirs = tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.weak_type == b.weak_type
        _close(a, b)


# --- r_ and c_ -----------------------------------------------------------------------------

A2, B2 = np.arange(4.0).reshape(2, 2), -np.ones((2, 2))
# Keys on which JAX agrees with NumPy: 1-D pieces, any directive; n-D pieces without trans1d.
CONCAT_KEYS = {
    "r_": [
        np.s_[1, 2.5], np.s_[np.array([1, 2], np.int8), 3], np.s_[1], np.s_[[]],
        np.s_[0:3, 5, [7, 8]], np.s_[0:1:3j, 5], np.s_[-1:1:6j, 0, np.array([1, 2, 3])],
        np.s_[10:0:-3, 0.5], np.s_[np.float16(1), 2.5], np.s_[True, 2], np.s_[[1 + 2j], 3.0],
        np.s_["0,2", [1, 2, 3], [4, 5, 6]], np.s_["0,2,0", [1, 2, 3], [4, 5, 6]],
        np.s_["1,2,0", [1, 2, 3], [4, 5, 6]], np.s_["0,2,-2", [1, 2, 3], [4, 5, 6]],
        np.s_["0,2,1", 0:3], np.s_["1,3,0", 0:3], np.s_["0,3,-1", 0:3, [1, 2, 3]],
        np.s_["0,4,1", [1, 2]], np.s_["0,2,0,5", [1]], np.s_["r", [1, 2, 3], [4, 5, 6]],
        np.s_["c", [1, 2, 3], [4, 5, 6]], np.s_["c", 1], np.s_["-1", A2, B2[:, :1]],
        np.s_[A2, [[3, 3]]], np.s_["r", A2, [[3, 3]]], np.s_["0,2,0", A2, B2],
        np.s_["1,2", [1, 2], [3]],
    ],
    "c_": [
        np.s_[np.array([1, 2, 3]), np.array([4, 5, 6])], np.s_[1:4, 4:7],
        np.s_[np.array([[1, 2, 3]]), 0, 0, np.array([[4, 5, 6]])], np.s_[[1, 2]], np.s_[1],
        np.s_["0,2", [1, 2, 3], [4, 5, 6]], np.s_["0,2,-1", [1, 2, 3], [4, 5, 6]],
        np.s_["r", [1, 2, 3], [4, 5, 6]], np.s_[np.ones((2, 2, 2)), np.zeros((2, 2, 1))],
        np.s_["1,3,1", [1, 2], [3, 4]],
    ],
}
CONCAT_CASES = [(name, key) for name, keys in CONCAT_KEYS.items() for key in keys]


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's "r": a matrix
@pytest.mark.parametrize("name,key", CONCAT_CASES, ids=repr)
def test_r_and_c_match_numpy(name, key):
    out, expected = getattr(jnp, name)[key], getattr(np, name)[key]
    _close(out, expected)
    assert out.dtype == _canonical(expected.dtype)


def test_r_and_c_promote_as_jax_does():
    """The pieces are concatenated with JAX's promotion: a Python scalar is weak, an int32
    range joins a float16 array in float16 (NumPy: float64)."""
    out = jnp.c_[0:2, np.array([3, 4], np.float16)]
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, [[0, 3], [1, 4]])
    assert jnp.r_[np.array([1, 2], np.int8), 3].dtype == np.int8
    assert jnp.r_[1, 2.5].dtype == np.float32 and jnp.r_[1, 2.5].weak_type


def test_trans1d_rotates_the_axes_of_higher_rank_pieces():
    """Where JAX departs from NumPy: a piece of rank below ``ndmin`` (a slice counting as
    rank 0) has its axes rotated so that its last one lands at ``trans1d``."""
    out = jnp.r_["0,3,1", A2, B2]  # (1, 2, 2) rotated to (2, 2, 1)
    np.testing.assert_array_equal(out, np.concatenate([A2[:, :, None], B2[:, :, None]]))
    out = jnp.r_["0,3,0", A2]  # (1, 2, 2) rotated to (2, 1, 2): A2's columns come first
    np.testing.assert_array_equal(out, A2.T[:, None, :])


def test_r_and_c_trace_and_differentiate():
    x, y = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    for build in (lambda x, y: jnp.r_[x, 0.5, y, 0:2], lambda x, y: jnp.c_["0,2,0", x, 2 * x]):
        np.testing.assert_array_equal(nbjax.jit(build)(x, y), build(x, y))
        check_grads(lambda x, y: jnp.sum(build(x, y) ** 2), (x, y), order=1)
    check_vmap(lambda x, y: jnp.r_[x, y], (np.stack([x, 2 * x]), np.stack([y, y])), (0, 0))


def test_r_directive_errors():
    with pytest.raises(ValueError, match="could not understand directive"):
        jnp.r_["x", 1]
    with pytest.raises(ValueError, match="could not understand directive"):
        jnp.r_["0,a", 1]
    with pytest.raises(ValueError, match="at the beginning"):
        jnp.r_[1, "r"]
    with pytest.raises(nbjax.errors.ConcretizationTypeError, match="slice stop"):
        nbjax.jit(lambda n: jnp.r_[0:n])(3)
    assert len(jnp.r_) == len(np.r_) == 0


@needs_jax
@pytest.mark.parametrize("name,key", CONCAT_CASES + [
    ("r_", np.s_["0,3,1", A2, B2]), ("r_", np.s_["0,3,0", A2]), ("r_", np.s_["1,3,0", A2, B2]),
    ("r_", np.s_["0,4,-3", np.ones((2, 3))]), ("r_", np.s_["2,4,2", A2, B2]),
    ("r_", np.s_[np.int8(3), np.uint8(4)]), ("c_", np.s_[0:2, np.array([3, 4], np.float16)])],
    ids=repr)
def test_r_and_c_match_jax(name, key):
    _same_as_jax(getattr(jnp, name)[key], getattr(jax_numpy, name)[key])


def test_s_and_index_exp_are_numpys():
    assert jnp.s_ is np.s_ and jnp.index_exp is np.index_exp
    x = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(jnp.asarray(x)[jnp.s_[1:, ::2]], x[1:, ::2])
    assert jnp.index_exp[1:2] == (slice(1, 2),)


# --- ravel_pytree --------------------------------------------------------------------------

def _mixed_tree():
    return {"w": RNG.standard_normal((3, 2)).astype(np.float32),
            "b": (np.int32(-4), np.array([5, -6], np.int8)),
            "c": [np.array([True, False]), RNG.standard_normal((2, 2)).astype(np.float16)],
            "none": None}


def test_ravel_pytree_round_trip_with_mixed_dtypes():
    tree = _mixed_tree()
    flat, unravel = ravel_pytree(tree)
    leaves = tree_leaves(tree)
    dtype = functools.reduce(jnp.promote_types, [np.asarray(v).dtype for v in leaves])
    assert flat.dtype == dtype == np.float32 and flat.shape == (6 + 1 + 2 + 2 + 4,)
    np.testing.assert_array_equal(flat, np.concatenate([np.ravel(v).astype(dtype)
                                                        for v in leaves]))
    back = unravel(flat)
    assert tree_structure(back) == tree_structure(tree)
    for got, want in zip(tree_leaves(back), leaves):
        assert got.dtype == np.asarray(want).dtype and got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)


def test_unravel_casts_each_piece_to_its_leafs_dtype():
    flat, unravel = ravel_pytree([np.int32(1), np.array([True, True]), np.float32(2)])
    moved = np.array([-2.7, 0.0, 3.5, 9.25], np.float32)
    ints, bools, floats = unravel(moved)
    assert (ints.dtype, bools.dtype, floats.dtype) == (np.int32, np.bool_, np.float32)
    np.testing.assert_array_equal(ints, moved[0].astype(np.int32))  # toward zero
    np.testing.assert_array_equal(bools, moved[1:3].astype(bool))
    assert floats == moved[3]


def test_unravel_checks_its_argument():
    _, unravel = ravel_pytree({"a": 1.0, "b": np.arange(3)})
    with pytest.raises(TypeError, match="expected dtype float32"):
        unravel(jnp.zeros(4, np.int32))
    with pytest.raises(ValueError, match="Sum of sizes 4"):
        unravel(jnp.zeros(5))
    _, unravel_one_dtype = ravel_pytree([np.ones(2, np.float32), np.float32(3)])
    with pytest.raises(ValueError, match="Sum of sizes 3"):
        unravel_one_dtype(jnp.zeros(2))


def test_unravel_of_one_dtype_keeps_the_vectors_dtype():
    """With no conversion to undo, unravel takes any dtype (as JAX's does)."""
    _, unravel = ravel_pytree({"a": np.ones(2, np.float32), "b": np.float32(0)})
    out = unravel(np.array([1 + 2j, 3, 4j], np.complex64))
    assert out["a"].dtype == np.complex64
    np.testing.assert_array_equal(out["b"], 4j)


def test_ravel_pytree_dtypes_follow_jax_promotion():
    def flat_dtype(*leaves):
        return ravel_pytree(list(leaves))[0].dtype
    assert flat_dtype(np.int32(1), np.float16(1)) == np.float16  # NumPy would say float64
    assert flat_dtype(np.uint8(1), np.int8(1)) == np.int16
    assert flat_dtype(jnp.ones(1, jnp.bfloat16), np.float16(1)) == np.float32
    assert flat_dtype(True, np.int8(3)) == np.int8
    assert flat_dtype(1.0, 2) == np.float32  # Python scalars count as their default types
    with nbjax.enable_x64():
        assert flat_dtype(1.0, np.float32(2)) == np.float64
    with pytest.raises(nbjax.dtypes.TypePromotionError):
        ravel_pytree([jnp.ones(2, jnp.float8_e4m3fn), np.float32(1)])
    flat, unravel = ravel_pytree({})
    assert flat.dtype == np.float32 and flat.shape == (0,) and unravel(flat) == {}


def test_ravel_pytree_under_jit_vmap_and_grad():
    tree = {"a": RNG.standard_normal((2, 3)).astype(np.float32),
            "b": [RNG.standard_normal(4).astype(np.float32), np.float32(0.5)]}
    flat, unravel = ravel_pytree(tree)
    np.testing.assert_array_equal(nbjax.jit(lambda t: ravel_pytree(t)[0])(tree), flat)
    for got, want in zip(tree_leaves(nbjax.jit(unravel)(flat)), tree_leaves(tree)):
        np.testing.assert_array_equal(got, want)
    members = [tree, tree_map(lambda v: 2 * v, tree), tree_map(lambda v: -v, tree)]
    batch = tree_map(lambda *vs: np.stack(vs), *members)
    np.testing.assert_array_equal(nbjax.vmap(lambda t: ravel_pytree(t)[0])(batch),
                                  np.stack([ravel_pytree(t)[0] for t in members]))
    check_vmap(unravel, (np.stack([flat, flat ** 2]),), (0,))
    grads = nbjax.grad(lambda t: jnp.sum(ravel_pytree(t)[0] ** 3))(tree)
    for g, v in zip(tree_leaves(grads), tree_leaves(tree)):
        _close(g, 3 * np.asarray(v, np.float64) ** 2)
    check_grads(lambda v: jnp.sum(jnp.sin(unravel(v)["a"])) * unravel(v)["b"][1], (flat,),
                order=2)


def test_unravel_functions_of_equal_structures_are_equal():
    """So that one passed as a static argument of jit finds the compiled code again."""
    _, first = ravel_pytree({"a": np.ones(3, np.float32), "b": 1})
    _, second = ravel_pytree({"a": np.zeros(3, np.float32), "b": 7})
    _, other = ravel_pytree({"a": np.ones(2, np.float32), "b": 1})
    assert first == second and hash(first) == hash(second) and first != other


@needs_jax
def test_ravel_pytree_matches_jax():
    tree = _mixed_tree()
    ours, unravel = ravel_pytree(tree)
    theirs, jax_unravel = jax.flatten_util.ravel_pytree(tree)
    _same_as_jax(ours, theirs)
    _same_as_jax(unravel(ours * 3), jax_unravel(theirs * 3))


# --- nbjax.dtypes --------------------------------------------------------------------------

def test_canonicalize_dtype():
    D = nbjax.dtypes
    for wide, narrow in [(np.float64, np.float32), (np.int64, np.int32), (int, np.int32),
                         (np.uint64, np.uint32), (complex, np.complex64)]:
        assert D.canonicalize_dtype(wide) == narrow
        with nbjax.enable_x64():
            assert D.canonicalize_dtype(wide) == np.dtype(wide)
    for kept in (np.float16, jnp.bfloat16, "int4", np.bool_, D.float0):
        assert D.canonicalize_dtype(kept) == np.dtype(kept)
    assert D.canonicalize_dtype(np.str_) == np.dtype(np.str_)  # no array type, left alone
    key_dtype = nbjax.random.key(0).dtype
    with pytest.raises(ValueError, match="extended"):
        D.canonicalize_dtype(key_dtype)
    assert D.canonicalize_dtype(key_dtype, allow_extended_dtype=True) == key_dtype


NUMPY_DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32,
                np.float64, np.complex64, np.complex128]
KINDS = [np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact,
         np.floating, np.complexfloating, np.bool_, np.float32]


def test_issubdtype_agrees_with_numpy_and_files_jaxs_types():
    for dtype in NUMPY_DTYPES:
        for kind in KINDS:
            assert nbjax.dtypes.issubdtype(dtype, kind) == np.issubdtype(dtype, kind)
    D = nbjax.dtypes
    assert D.issubdtype(D.bfloat16, np.floating) and D.issubdtype("float8_e4m3fn", np.inexact)
    assert D.issubdtype("int4", np.signedinteger) and not D.issubdtype("uint4", np.signedinteger)
    key_dtype = nbjax.random.key(0).dtype
    assert D.issubdtype(key_dtype, D.prng_key) and D.issubdtype(key_dtype, D.extended)
    assert D.issubdtype(key_dtype, np.generic) and not D.issubdtype(key_dtype, np.number)
    assert not D.issubdtype(np.float32, D.prng_key) and not D.issubdtype(np.float32, key_dtype)
    assert D.issubdtype(D.prng_key, D.extended) and jnp.issubdtype(key_dtype, D.prng_key)


def test_result_type_and_its_weak_type_flag():
    result_type = nbjax.dtypes.result_type
    assert result_type(1, 2.0, return_weak_type_flag=True) == (np.float32, True)
    assert result_type(np.float16, 2.0, return_weak_type_flag=True) == (np.float16, False)
    assert result_type(np.float16, float) == np.float16  # a Python type is weak, as its values
    assert result_type(np.int8, np.uint8) == np.int16 and result_type(True) == np.bool_
    x = jnp.ones(3, jnp.bfloat16)
    assert result_type(x, 1.0) == jnp.result_type(x, 1.0) == jnp.bfloat16
    with pytest.raises(ValueError, match="at least one"):
        result_type()
    with pytest.raises(nbjax.dtypes.TypePromotionError):
        result_type("float8_e4m3fn", np.float32)
    with pytest.raises(nbjax.dtypes.TypePromotionError):
        jnp.add(jnp.ones(2, jnp.float8_e4m3fn), jnp.ones(2))
    assert issubclass(nbjax.dtypes.TypePromotionError, ValueError)


def test_finfo_iinfo_bfloat16_and_itemsize_bits():
    D = nbjax.dtypes
    assert float(D.finfo(np.float32).eps) == float(np.finfo(np.float32).eps)
    assert float(D.finfo(D.bfloat16).eps) == 2.0 ** -7  # 7 stored mantissa bits
    assert (int(D.iinfo("int4").min), int(D.iinfo("int4").max)) == (-8, 7)
    assert D.iinfo(np.uint16).max == np.iinfo(np.uint16).max
    assert D.bfloat16 is ml_dtypes.bfloat16 and jnp.zeros(2, D.bfloat16).dtype == jnp.bfloat16
    for dtype in (np.bool_, np.int8, np.uint16, np.float32, np.float64, np.complex64):
        assert D.itemsize_bits(dtype) == 8 * np.dtype(dtype).itemsize
    for name in ("int1", "uint2", "int4", "float4_e2m1fn", "float6_e2m3fn", "bfloat16"):
        info = ml_dtypes.iinfo(name) if "int" in name else ml_dtypes.finfo(name)
        assert D.itemsize_bits(name) == info.bits
    for bad in (None, D.float0, nbjax.random.key(0).dtype):
        with pytest.raises(ValueError):
            D.itemsize_bits(bad)


def test_scalar_type_of():
    scalar_type_of = nbjax.dtypes.scalar_type_of
    cases = [(True, bool), (3, int), (2.5, float), (1j, complex), (np.uint8(2), int),
             (jnp.ones(2, jnp.bfloat16), float), (jnp.ones(2, jnp.int4), int),
             (np.ones(2, np.complex64), complex), (jnp.ones(3, bool), bool)]
    for value, python_type in cases:
        assert scalar_type_of(value) is python_type
    with pytest.raises(TypeError):
        scalar_type_of(np.zeros(2, nbjax.float0))


def test_float0_is_the_dtype_of_integer_gradients():
    assert nbjax.float0 is nbjax.dtypes.float0
    grad = nbjax.grad(lambda x, i: x * i, argnums=1, allow_int=True)(2.0, 3)
    assert grad.dtype == nbjax.float0


@needs_jax
def test_dtypes_functions_match_jax():
    ours, theirs = nbjax.dtypes, jax.dtypes
    for dtype in NUMPY_DTYPES + ["bfloat16", "int4", "float8_e5m2", float, int]:
        assert ours.canonicalize_dtype(dtype) == theirs.canonicalize_dtype(dtype)
        assert ours.itemsize_bits(dtype) == theirs.itemsize_bits(dtype)
        for kind in KINDS:
            assert ours.issubdtype(dtype, kind) == theirs.issubdtype(dtype, kind)
    for args in [(1, 2.0), (np.int8, 2.0), (np.float16, float), (np.uint32, np.int32),
                 (1j, np.float16), (True, 3)]:
        assert (ours.result_type(*args, return_weak_type_flag=True)
                == theirs.result_type(*args, return_weak_type_flag=True))
    assert sorted(ours.__all__) == sorted(n for n in dir(theirs) if not n.startswith("_"))


# --- nbjax.errors --------------------------------------------------------------------------

# JAX's class tree (jax.errors), each name with its direct base.
ERROR_BASES = {
    "JAXTypeError": TypeError, "JAXIndexError": IndexError,
    "ConcretizationTypeError": "JAXTypeError",
    "TracerBoolConversionError": "ConcretizationTypeError",
    "TracerIntegerConversionError": "JAXTypeError", "TracerArrayConversionError": "JAXTypeError",
    "UnexpectedTracerError": "JAXTypeError", "KeyReuseError": "JAXTypeError",
    "NonConcreteBooleanIndexError": "JAXIndexError", "JaxprTypeError": TypeError,
    "JaxRuntimeError": RuntimeError, "InconclusiveDimensionOperation": Exception,
}


@pytest.mark.parametrize("name", sorted(ERROR_BASES))
def test_error_classes_have_jaxs_bases(name):
    base = ERROR_BASES[name]
    base = getattr(nbjax.errors, base) if isinstance(base, str) else base
    assert issubclass(getattr(nbjax.errors, name), base)
    assert name in nbjax.errors.__all__


def test_top_level_errors_are_the_same_classes():
    assert nbjax.ConcretizationTypeError is nbjax.errors.ConcretizationTypeError
    assert nbjax.UnexpectedTracerError is nbjax.errors.UnexpectedTracerError
    assert jnp.NonConcreteBooleanIndexError is nbjax.errors.NonConcreteBooleanIndexError
    assert sorted(nbjax.errors.__all__) == sorted(ERROR_BASES)


def test_misused_tracers_raise_the_named_errors():
    errors = nbjax.errors
    with pytest.raises(errors.ConcretizationTypeError):
        nbjax.jit(lambda x: float(x))(1.0)
    with pytest.raises(errors.ConcretizationTypeError, match="arange"):
        nbjax.jit(lambda n: jnp.arange(n))(3)
    with pytest.raises(errors.TracerBoolConversionError):
        nbjax.jit(lambda x: x if x > 0 else -x)(1.0)
    with pytest.raises(errors.TracerIntegerConversionError):
        nbjax.jit(lambda i: [1, 2, 3][i])(1)
    with pytest.raises(errors.TracerArrayConversionError):
        nbjax.jit(lambda x: np.sin(x))(np.ones(2, np.float32))
    leaked = []
    nbjax.make_jaxpr(lambda x: leaked.append(x) or x)(1.0)
    with pytest.raises(errors.UnexpectedTracerError):
        jnp.sin(leaked[0])


def test_traced_boolean_masks_and_bad_static_indices_raise_index_errors():
    x, mask = jnp.arange(3.0), np.array([True, False, True])
    np.testing.assert_array_equal(x[mask], [0.0, 2.0])  # a concrete mask is fine
    with pytest.raises(nbjax.errors.NonConcreteBooleanIndexError):
        nbjax.jit(lambda m: x[m])(mask)
    with pytest.raises(nbjax.errors.NonConcreteBooleanIndexError):
        nbjax.jit(lambda m: x.at[m].set(0.0))(mask)
    assert issubclass(nbjax.errors.NonConcreteBooleanIndexError, IndexError)
    with pytest.raises(IndexError, match="out of bounds"):
        jnp.zeros((3, 0))[:, 1]
    with pytest.raises(IndexError, match="Too many indices"):
        x[0, 1]


def test_ill_typed_jaxpr_and_bad_callback_raise_the_named_errors():
    closed = nbjax.make_jaxpr(jnp.sin)(np.ones(3, np.float32))
    eqn = closed.jaxpr.eqns[0]
    closed.jaxpr.eqns[0] = eqn.replace(invars=eqn.outvars)  # used before it is defined
    with pytest.raises(nbjax.errors.JaxprTypeError):
        check_jaxpr(closed.jaxpr)
    scalar = nbjax.ShapeDtypeStruct((), np.float32)
    wrong_shape = functools.partial(nbjax.pure_callback, lambda x: np.ones(3, np.float32),
                                    scalar)
    with pytest.raises(nbjax.errors.JaxRuntimeError, match="shape"):
        wrong_shape(1.0)
    with pytest.raises(nbjax.errors.JaxRuntimeError, match="shape"):
        nbjax.jit(wrong_shape)(1.0)


@needs_jax
def test_error_tree_matches_jax():
    """Each class's ancestors carry the names JAX's do (nbjax's NonConcreteBooleanIndexError
    is a TypeError too, as its other concretization errors are)."""
    for name in nbjax.errors.__all__:
        ours = {c.__name__ for c in getattr(nbjax.errors, name).__mro__}
        theirs = {c.__name__ for c in getattr(jax.errors, name).__mro__} - {"_JAXErrorMixin"}
        extra = {"TypeError"} if name == "NonConcreteBooleanIndexError" else set()
        assert ours == theirs | extra, name

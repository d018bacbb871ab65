"""Typed PRNG key arrays in array functions, as JAX 0.10.2 takes them: stacking, selecting,
indexing and updating (``.at``), reshaping, comparing, and the same under jit, vmap, scan
and cond. Each result is checked through its key data (``random.key_data``) against the
same operation on the originals' data, its words kept whole, and by drawing from it; the
operations JAX refuses on keys are refused with JAX's exception types. (The behaviours
were recorded from JAX 0.10.2; this file does not import it.)"""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax import random as R


def data(keys):
    return np.asarray(R.key_data(keys))


def assert_keys(keys, expected_data, like):
    """``keys`` are typed keys of ``like``'s dtype over ``expected_data``."""
    assert isinstance(keys, R.PRNGKeyArray) and keys.dtype == like.dtype
    assert keys.shape == expected_data.shape[:-1]
    np.testing.assert_array_equal(data(keys), expected_data)


K0, K1 = R.key(0), R.key(1)
KA, KB = R.split(K0, 3), R.split(K1, 3)
GRID = R.split(K0, (2, 3))
MASK = np.array([True, False, True])

# name -> (operation on keys, the same on their data: the key words are the last axis)
STRUCTURAL = {
    "stack": (lambda: jnp.stack([K0, K1]), lambda: np.stack([data(K0), data(K1)])),
    "stack_axis1": (lambda: jnp.stack([KA, KB], axis=1),
                    lambda: np.stack([data(KA), data(KB)], axis=1)),
    "stack_axis-1": (lambda: jnp.stack([KA, KB], axis=-1),
                     lambda: np.stack([data(KA), data(KB)], axis=1)),
    "concatenate": (lambda: jnp.concatenate([R.split(K0), R.split(K1)]),
                    lambda: np.concatenate([data(R.split(K0)), data(R.split(K1))])),
    "concatenate_axis1": (lambda: jnp.concatenate([GRID, GRID], axis=1),
                          lambda: np.concatenate([data(GRID)] * 2, axis=1)),
    "concatenate_axis_none": (lambda: jnp.concatenate([GRID, KA], axis=None),
                              lambda: np.concatenate([data(GRID).reshape(-1, 2), data(KA)])),
    "hstack": (lambda: jnp.hstack([KA, KB]), lambda: np.concatenate([data(KA), data(KB)])),
    "vstack": (lambda: jnp.vstack([KA, KB]), lambda: np.stack([data(KA), data(KB)])),
    "lax.concatenate": (lambda: lax.concatenate([KA, KB], 0),
                        lambda: np.concatenate([data(KA), data(KB)])),
    "array_of_list": (lambda: jnp.array([K0, K1]), lambda: np.stack([data(K0), data(K1)])),
    "asarray": (lambda: jnp.asarray(KA), lambda: data(KA)),
    "where_scalar": (lambda: jnp.where(True, K0, K1), lambda: data(K0)),
    "where_mask": (lambda: jnp.where(MASK, KA, KB),
                   lambda: np.where(MASK[:, None], data(KA), data(KB))),
    "where_broadcast": (lambda: jnp.where(MASK, KA, K1),
                        lambda: np.where(MASK[:, None], data(KA), data(K1))),
    "where_int_condition": (lambda: jnp.where(jnp.array([1, 0, 1]), KA, KB),
                            lambda: np.where(MASK[:, None], data(KA), data(KB))),
    "select_n": (lambda: lax.select_n(MASK, KA, KB),
                 lambda: np.where(MASK[:, None], data(KB), data(KA))),
    "select_n_scalar": (lambda: lax.select_n(True, K0, K1), lambda: data(K1)),
    "select_n_three": (lambda: lax.select_n(jnp.array([0, 1, 2]), KA, KB, KA[::-1]),
                       lambda: np.stack([data(KA)[0], data(KB)[1], data(KA)[0]])),
    "at_set": (lambda: KA.at[0].set(K1), lambda: np.stack([data(K1), *data(KA)[1:]])),
    "at_set_slice": (lambda: KA.at[1:].set(KB[1:]),
                     lambda: np.stack([data(KA)[0], *data(KB)[1:]])),
    "at_set_broadcast": (lambda: KA.at[1:].set(K1),
                         lambda: np.stack([data(KA)[0], data(K1), data(K1)])),
    "at_set_2d": (lambda: GRID.at[1, 2].set(K1),
                  lambda: np.concatenate([data(GRID).reshape(6, 2)[:5], data(K1)[None]])
                  .reshape(2, 3, 2)),
    "at_set_out_of_bounds": (lambda: KA.at[5].set(K1), lambda: data(KA)),
    "at_get": (lambda: KA.at[2].get(), lambda: data(KA)[2]),
    "at_get_fill": (lambda: KA.at[5].get(mode="fill"),
                    lambda: np.full(2, 2 ** 32 - 1, np.uint32)),
    "getitem_int": (lambda: KA[-1], lambda: data(KA)[-1]),
    "getitem_slice": (lambda: KA[1:], lambda: data(KA)[1:]),
    "getitem_step": (lambda: KA[::2], lambda: data(KA)[::2]),
    "getitem_array": (lambda: KA[jnp.array([2, 0])], lambda: data(KA)[[2, 0]]),
    "getitem_bool": (lambda: KA[MASK], lambda: data(KA)[MASK]),
    "getitem_none": (lambda: KA[None], lambda: data(KA)[None]),
    "getitem_ellipsis": (lambda: GRID[..., 1], lambda: data(GRID)[:, 1]),
    "getitem_2d_arrays": (lambda: GRID[jnp.array([0, 1]), jnp.array([2, 0])],
                          lambda: data(GRID)[[0, 1], [2, 0]]),
    "take": (lambda: jnp.take(KA, jnp.array([2, 0])), lambda: data(KA)[[2, 0]]),
    "take_axis": (lambda: jnp.take(GRID, jnp.array([2, 0]), axis=1),
                  lambda: data(GRID)[:, [2, 0]]),
    "take_fill": (lambda: jnp.take(KA, jnp.array([1, 5]), mode="fill"),
                  lambda: np.stack([data(KA)[1], np.full(2, 2 ** 32 - 1, np.uint32)])),
    "take_along_axis": (lambda: jnp.take_along_axis(KA, jnp.array([2, 0]), axis=0),
                        lambda: data(KA)[[2, 0]]),
    "dynamic_slice": (lambda: lax.dynamic_slice(KA, (1,), (2,)), lambda: data(KA)[1:]),
    "dynamic_index_in_dim": (lambda: lax.dynamic_index_in_dim(KA, 1, keepdims=False),
                             lambda: data(KA)[1]),
    "dynamic_update_slice": (lambda: lax.dynamic_update_slice(KA, KB[:2], (1,)),
                             lambda: np.stack([data(KA)[0], *data(KB)[:2]])),
    "reshape": (lambda: jnp.reshape(GRID, (3, 2)), lambda: data(GRID).reshape(3, 2, 2)),
    "reshape_method": (lambda: GRID.reshape(6), lambda: data(GRID).reshape(6, 2)),
    "ravel": (lambda: jnp.ravel(GRID), lambda: data(GRID).reshape(6, 2)),
    "transpose": (lambda: jnp.transpose(GRID), lambda: data(GRID).transpose(1, 0, 2)),
    "T": (lambda: GRID.T, lambda: data(GRID).transpose(1, 0, 2)),
    "swapaxes": (lambda: GRID.swapaxes(0, 1), lambda: data(GRID).transpose(1, 0, 2)),
    "moveaxis": (lambda: jnp.moveaxis(GRID, 0, 1), lambda: data(GRID).transpose(1, 0, 2)),
    "expand_dims": (lambda: jnp.expand_dims(KA, -1), lambda: data(KA)[:, None]),
    "squeeze": (lambda: jnp.squeeze(KA[None]), lambda: data(KA)),
    "broadcast_to": (lambda: jnp.broadcast_to(K0, (2, 3)),
                     lambda: np.broadcast_to(data(K0), (2, 3, 2))),
    "lax.broadcast_in_dim": (lambda: lax.broadcast_in_dim(KA, (2, 3), (1,)),
                             lambda: np.broadcast_to(data(KA), (2, 3, 2))),
    "flip": (lambda: jnp.flip(KA), lambda: data(KA)[::-1]),
    "fliplr": (lambda: jnp.fliplr(GRID), lambda: data(GRID)[:, ::-1]),
    "roll": (lambda: jnp.roll(KA, 1), lambda: np.roll(data(KA), 1, axis=0)),
    "rot90": (lambda: jnp.rot90(GRID), lambda: np.rot90(data(GRID))),
    "tile": (lambda: jnp.tile(KA, 2), lambda: np.concatenate([data(KA)] * 2)),
    "repeat": (lambda: jnp.repeat(KA, 2), lambda: np.repeat(data(KA), 2, axis=0)),
    "append": (lambda: jnp.append(KA, KB), lambda: np.concatenate([data(KA), data(KB)])),
    "delete": (lambda: jnp.delete(KA, 1), lambda: data(KA)[[0, 2]]),
    "zeros_like": (lambda: jnp.zeros_like(KA), lambda: np.zeros((3, 2), np.uint32)),
    "ones_like": (lambda: jnp.ones_like(KA), lambda: np.ones((3, 2), np.uint32)),
    "full_like_key": (lambda: jnp.full_like(KA, K1), lambda: np.stack([data(K1)] * 3)),
    "full_key_dtype": (lambda: jnp.full((2,), 7, dtype=K0.dtype),
                       lambda: np.full((2, 2), 7, np.uint32)),
}


@pytest.mark.parametrize("name", STRUCTURAL)
def test_structural_operations_keep_each_keys_words(name):
    keys, expected = STRUCTURAL[name]
    assert_keys(keys(), expected(), K0)


def test_split_and_unstack_give_keys():
    pieces = jnp.split(R.split(K0, 4), 2)
    assert len(pieces) == 2
    for piece, expected in zip(pieces, np.split(data(R.split(K0, 4)), 2)):
        assert_keys(piece, expected, K0)
    for key, expected in zip(jnp.unstack(KA), data(KA)):
        assert_keys(key, expected, K0)
    left, right = jnp.broadcast_arrays(KA, GRID)
    assert_keys(left, np.broadcast_to(data(KA), (2, 3, 2)), K0)
    assert_keys(right, data(GRID), K0)


def test_draws_from_combined_keys_are_the_originals_draws():
    stacked = jnp.stack([K0, K1])
    for i, key in enumerate((K0, K1)):
        np.testing.assert_array_equal(R.uniform(stacked[i], (3,)), R.uniform(key, (3,)))
    np.testing.assert_array_equal(nbjax.vmap(R.normal)(jnp.concatenate([KA, KB])),
                                  [R.normal(k) for k in (*KA, *KB)])
    picked = jnp.where(MASK, KA, KB)
    np.testing.assert_array_equal(nbjax.vmap(R.bits)(picked),
                                  [R.bits(k) for k in (KA[0], KB[1], KA[2])])
    updated = KA.at[1].set(K1)
    np.testing.assert_array_equal(R.key_data(R.split(updated[1])), R.key_data(R.split(K1)))
    np.testing.assert_array_equal(R.key_data(R.fold_in(jnp.where(False, K0, K1), 3)),
                                  R.key_data(R.fold_in(K1, 3)))


def test_keys_compare_equal_by_all_their_words():
    same = KA.at[1].set(KB[1])
    expected = np.array([True, False, True])
    for eq in (same == KA, jnp.equal(same, KA), lax.eq(same, KA)):
        np.testing.assert_array_equal(eq, expected)
    for ne in (same != KA, jnp.not_equal(same, KA), lax.ne(same, KA)):
        np.testing.assert_array_equal(ne, ~expected)
    np.testing.assert_array_equal(KA == K0, data(KA)[:, 0] == 0)  # a scalar key broadcasts
    np.testing.assert_array_equal(K0 == KA[0], False)
    assert bool(jnp.array_equal(KA, KA)) and not bool(jnp.array_equal(KA, KB))


def test_other_implementations_keep_their_key_shape():
    r0, r1 = R.key(0, impl="rbg"), R.key(1, impl="rbg")
    ra = R.split(r0, 3)
    assert_keys(jnp.stack([r0, r1]), np.stack([data(r0), data(r1)]), r0)
    assert_keys(jnp.where(MASK, ra, r1), np.where(MASK[:, None], data(ra), data(r1)), r0)
    assert_keys(ra.at[1].set(r1), np.stack([data(ra)[0], data(r1), data(ra)[2]]), r0)
    assert_keys(lax.dynamic_update_slice(ra, r1[None], (2,)),
                np.stack([*data(ra)[:2], data(r1)]), r0)
    np.testing.assert_array_equal(ra == r0, [False, False, False])
    assert_keys(jnp.zeros_like(ra), np.zeros((3, 4), np.uint32), r0)


def test_under_jit_the_eager_values():
    cases = [
        (lambda a, b: jnp.stack([a, b]), (K0, K1)),
        (lambda m, a, b: jnp.where(m, a, b), (MASK, KA, KB)),
        (lambda a, b: a.at[0].set(b), (KA, K1)),
        (lambda a, i, b: a.at[i].set(b), (KA, 2, K1)),
        (lambda a, i: a.at[i].get(mode="fill"), (KA, 7)),
        (lambda a, b: jnp.concatenate([a, b]), (KA, KB)),
        (lambda a, b, i: lax.dynamic_update_slice(a, b, (i,)), (KA, KB[:1], 2)),
        (lambda a, i: lax.dynamic_slice(a, (i,), (2,)), (KA, 1)),
        (lambda a, i: jnp.take(a, i), (KA, jnp.array([2, 0]))),
        (lambda a: a.reshape(3, 2), (GRID,)),
        (lambda a, b: jnp.array([a, b]), (K0, K1)),
        (jnp.zeros_like, (KA,)),
    ]
    for fn, args in cases:
        assert_keys(nbjax.jit(fn)(*args), data(fn(*args)), K0)
    np.testing.assert_array_equal(nbjax.jit(lambda a, b: a == b)(KA, KA.at[1].set(K1)),
                                  [True, False, True])


def test_under_vmap_each_members_value():
    assert_keys(nbjax.vmap(lambda a, b: jnp.stack([a, b]))(KA, KB),
                np.stack([data(KA), data(KB)], axis=1), K0)
    assert_keys(nbjax.vmap(lambda m, a: jnp.where(m, a, K1))(MASK, KA),
                np.where(MASK[:, None], data(KA), data(K1)), K0)
    assert_keys(nbjax.vmap(lambda a, b: a.at[0].set(b))(GRID, KA[:2]),
                np.stack([np.stack([data(KA)[i], *data(GRID)[i, 1:]]) for i in range(2)]), K0)
    assert_keys(nbjax.vmap(lambda a, i, b: a.at[i].set(b))(GRID, jnp.array([0, 2]), KA[:2]),
                np.stack([data(GRID[0].at[0].set(KA[0])), data(GRID[1].at[2].set(KA[1]))]),
                K0)
    assert_keys(nbjax.vmap(lambda a, i: a[i])(GRID, jnp.array([0, 2])),
                data(GRID)[[0, 1], [0, 2]], K0)
    assert_keys(nbjax.vmap(lambda a, i: lax.dynamic_slice(a, (i,), (1,)))(GRID,
                                                                         jnp.array([0, 2])),
                data(GRID)[[0, 1], [0, 2]][:, None], K0)
    take = nbjax.vmap(lambda a, i: jnp.take(a, i, mode="fill"))
    assert_keys(take(GRID, jnp.array([[0, 5]] * 2)),
                np.stack([np.stack([data(GRID)[i, 0], np.full(2, 2 ** 32 - 1, np.uint32)])
                          for i in range(2)]), K0)
    np.testing.assert_array_equal(nbjax.vmap(lambda a: a == K0)(KA), KA == K0)


def test_vmap_axes_count_the_keys_axes_not_their_words():
    """A negative in_axes or out_axes counts from the last axis of the keys: the words of
    each key stay last in the data."""
    mapped_over_axis_1 = data(GRID)[::-1].transpose(1, 0, 2)  # member j: GRID[::-1, j]
    for in_axes in (1, -1):
        assert_keys(nbjax.vmap(jnp.flip, in_axes=in_axes)(GRID), mapped_over_axis_1, K0)
    stacked_last = data(GRID)[:, ::-1].transpose(1, 0, 2)  # member i: GRID[i, ::-1]
    for out_axes in (1, -1):
        assert_keys(nbjax.vmap(jnp.flip, out_axes=out_axes)(GRID), stacked_last, K0)


def test_in_scan_and_cond():
    def step(carry, i):
        return carry.at[i].set(K1), carry[i] == K1
    keys, seen = lax.scan(step, KA, jnp.arange(3))
    assert_keys(keys, np.stack([data(K1)] * 3), K0)
    np.testing.assert_array_equal(seen, [False, False, False])
    last, stacked = lax.scan(lambda c, k: (jnp.where(True, k, c), jnp.stack([c, k])), K0, KA)
    assert_keys(last, data(KA)[2], K0)
    assert_keys(stacked, np.stack([np.stack([data(c), data(k)])
                                   for c, k in zip((K0, KA[0], KA[1]), KA)]), K0)
    for pred in (True, False):
        out = lax.cond(pred, lambda a: a.at[0].set(K1), lambda a: a[::-1], KA)
        assert_keys(out, data(KA.at[0].set(K1) if pred else KA[::-1]), K0)
    assert_keys(lax.cond(True, lambda: jnp.where(MASK, KA, KB), lambda: KB),
                np.where(MASK[:, None], data(KA), data(KB)), K0)


def test_grad_through_selected_keys():
    grad = nbjax.grad(lambda x: R.normal(jnp.where(True, K0, K1)) * x)(1.0)
    np.testing.assert_allclose(grad, R.normal(K0))


# --- what JAX refuses ----------------------------------------------------------------------

REFUSED = {
    # keys do not promote with other dtypes, nor with keys of another implementation
    "stack_with_ints": (ValueError, lambda: jnp.stack([K0, jnp.zeros((), jnp.uint32)])),
    "concatenate_with_ints": (ValueError, lambda: jnp.concatenate([KA, jnp.zeros(3, "uint32")])),
    "concatenate_impls": (ValueError,
                          lambda: jnp.concatenate([KA, R.split(R.key(0, impl="rbg"), 3)])),
    "where_with_int": (ValueError, lambda: jnp.where(MASK, KA, 0)),
    "where_impls": (ValueError, lambda: jnp.where(True, K0, R.key(0, impl="rbg"))),
    "array_with_int": (ValueError, lambda: jnp.array([K0, 1])),
    "equal_raw_data": (TypeError, lambda: KA == R.key_data(KA)),
    "equal_int": (TypeError, lambda: K0 == 0),
    "equal_impls": (TypeError, lambda: KA == R.split(R.key(0, impl="rbg"), 3)),
    "equal_list": (TypeError, lambda: KA == [1]),
    "at_set_int": (TypeError, lambda: KA.at[0].set(0)),
    "where_one_argument": (TypeError, lambda: jnp.where(KA)),
    "nonzero": (TypeError, lambda: jnp.nonzero(KA)),
    # keys are no numbers
    "add": (TypeError, lambda: KA + KB),
    "add_int": (TypeError, lambda: K0 + 1),
    "less": (TypeError, lambda: KA < KB),
    "neg": (TypeError, lambda: -K0),
    "at_add": (TypeError, lambda: KA.at[0].add(K1)),
    "at_min": (TypeError, lambda: KA.at[0].min(K1)),
    "sort": (TypeError, lambda: jnp.sort(KA)),
    "argsort": (TypeError, lambda: jnp.argsort(KA)),
    "sum": (TypeError, lambda: jnp.sum(KA)),
    "cumsum": (TypeError, lambda: jnp.cumsum(KA)),
    "clip": (TypeError, lambda: jnp.clip(KA, K0, K1)),
    "pad": (ValueError, lambda: jnp.pad(KA, 1)),
    "convert": (ValueError, lambda: lax.convert_element_type(KA, jnp.uint32)),
    "array_dtype": (ValueError, lambda: jnp.array(KA, dtype=jnp.uint32)),
    "astype_method": (NotImplementedError, lambda: KA.astype(jnp.uint32)),
    "sum_method": (NotImplementedError, lambda: KA.sum()),
    "item_method": (NotImplementedError, lambda: K0.item()),
    # shapes
    "concatenate_scalars": (ValueError, lambda: jnp.concatenate([K0, K1])),
    "stack_ranks": (ValueError, lambda: jnp.stack([KA, GRID])),
    "where_shapes": (ValueError, lambda: jnp.where(MASK, KA, GRID[:, :2])),
    "select_n_shapes": (TypeError, lambda: lax.select_n(MASK, KA, K0)),
    "reshape": (TypeError, lambda: jnp.reshape(KA, (2,))),
    "squeeze": (ValueError, lambda: jnp.squeeze(KA, 0)),
    "broadcast_to": (ValueError, lambda: jnp.broadcast_to(KA, (2,))),
    "too_many_indices": (IndexError, lambda: KA[0, 0]),
    "float_index": (TypeError, lambda: KA[1.0]),
    "len_scalar": (TypeError, lambda: len(K0)),
    "iter_scalar": (TypeError, lambda: list(K0)),
    "bool": (TypeError, lambda: bool(K0)),
    "numpy": (TypeError, lambda: np.asarray(KA)),
}


@pytest.mark.parametrize("name", REFUSED)
def test_what_jax_refuses_is_refused_alike(name):
    error, fn = REFUSED[name]
    with pytest.raises(error):
        fn()


def test_refusals_name_the_key_dtype():
    with pytest.raises(ValueError, match=r"dtype=key<fry> is not a valid dtype for JAX type"):
        jnp.stack([K0, jnp.zeros((), jnp.uint32)])
    with pytest.raises(TypeError, match=r"equal does not accept dtypes key<fry>, uint32"):
        jnp.equal(KA, R.key_data(KA))
    with pytest.raises(TypeError, match=r"add does not accept dtype key<fry> at position 0"):
        KA + KB
    with pytest.raises(ValueError, match=r"Cannot convert_element_type from key<fry> to uint32"):
        lax.convert_element_type(KA, jnp.uint32)
    with pytest.raises(TypeError, match=r"cannot reshape array of shape \(3,\) \(size 3\)"):
        KA.reshape(2)


def test_key_array_attributes():
    assert GRID.size == 6 and GRID.ndim == 2 and len(GRID) == 2
    assert KA.itemsize == 8 and KA.nbytes == 24 and KA.dtype.itemsize == 8
    assert R.key(0, impl="rbg").itemsize == 16
    assert KA.block_until_ready() is KA and KA.copy() is KA
    assert jnp.shape(GRID) == (2, 3) and jnp.ndim(GRID) == 2 and jnp.size(GRID) == 6
    np.testing.assert_array_equal(jnp.isnan(KA), [False] * 3)
    assert jnp.result_type(KA) == KA.dtype
    assert jnp.issubdtype(KA.dtype, nbjax.dtypes.prng_key)
    assert not jnp.issubdtype(KA.dtype, jnp.integer)

"""vmap over the whole ``nbjax.numpy`` / ``nbjax.nn`` surface: ``vmap(f, in_axes)(xs...)``
must equal ``f`` applied to each batch member in a Python loop, stacked.

Every case of test_numpy_grads.py is reused (per-example arguments are drawn from the same
makers, so they keep their domains), with the batch axis at 0, at 1 / -1 alternating over
the arguments, and with the first argument unbatched (None); then cases only vmap has:
batched integer indices and ``.at[]`` updates, sorting/searching/unique with ``size=``,
integer and boolean outputs, ``out_axes``, and nested vmaps.
"""

import zlib

import numpy as np
import pytest

import nbjax
import nbjax.nn as nn
import nbjax.numpy as jnp
from nbjax.core import check_jaxpr, pytree
from test_numpy_grads import ALL_CASES, Case, distinct, ints, normal, uniform
from helpers import random_array

B = 3  # the batch size


def _as_jnp(fn):
    """``fn`` with every argument an nbjax array (cases may use ``x.at`` and methods)."""
    return lambda *args: fn(*map(jnp.asarray, args))


def batch(rng, make, axis, dtype):
    """``B`` per-example arguments from ``make``, stacked along ``axis`` (None: one)."""
    if axis is None:
        return make(rng, dtype)
    return np.stack([make(rng, dtype) for _ in range(B)], axis=axis)


def loop(f, args, in_axes, out_axes=0):
    """The reference: ``f`` of each batch member, stacked along ``out_axes``."""
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)])
            for i in range(B)]
    return pytree.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs], axis=out_axes),
                           *outs)


def assert_vmap_matches_loop(fn, args, in_axes, out_axes=0, rtol=1e-5, atol=1e-6):
    f = _as_jnp(fn)
    actual = nbjax.vmap(f, in_axes=tuple(in_axes), out_axes=out_axes)(*args)
    expected = loop(f, args, in_axes, out_axes)
    actual_leaves, actual_tree = pytree.tree_flatten(actual)
    expected_leaves, expected_tree = pytree.tree_flatten(expected)
    assert actual_tree == expected_tree
    for a, e in zip(actual_leaves, expected_leaves):
        a = np.asarray(a)
        assert (a.dtype, a.shape) == (e.dtype, e.shape), f"in_axes={in_axes}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"in_axes={in_axes}")


def axis_variants(ndims):
    """in_axes choices for arguments of per-example ranks ``ndims``: all 0; 1 and -1
    alternating (0 for scalars); with several arguments, the first one unbatched and the
    others at -1, and the first one batched and the others unbatched."""
    variants = [(0,) * len(ndims),
                tuple((1 if i % 2 == 0 else -1) if nd >= 1 else 0 for i, nd in enumerate(ndims))]
    if len(ndims) > 1:
        variants.append((None,) + (-1,) * (len(ndims) - 1))
        variants.append((0,) + (None,) * (len(ndims) - 1))
    return variants


def run_case(case, request, out_axes=0):
    if case.x64:
        request.getfixturevalue("x64")
    dtype = np.float64 if case.x64 else np.float32
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    ndims = [np.ndim(make(rng, dtype)) for make in case.args]
    for in_axes in axis_variants(ndims):
        args = [batch(rng, make, ax, dtype) for make, ax in zip(case.args, in_axes)]
        assert_vmap_matches_loop(case.fn, args, in_axes, out_axes)


@pytest.mark.parametrize("case", [c.param() for c in ALL_CASES])
def test_vmap_of_differentiable_surface(case, request):
    run_case(case, request)


# --- what only vmap has: batched indices, integer outputs, searching ----------------------

def C(name, fn, *args):
    return Case(name, fn, args)


def sorted_rows(*shape):
    return lambda rng, dt: np.sort(rng.standard_normal(shape), axis=-1).astype(dt)


def small_ints(*shape):
    """Integers with repeats, for unique / bincount / isin."""
    return lambda rng, dt: random_array(rng, shape, np.int32, low=0, high=3)


def bools(*shape):
    return lambda rng, dt: random_array(rng, shape, bool)


VMAP_CASES = [
    # indexing with batched indices
    C("getitem_int_index", lambda x, i: x[i], normal(4, 3), ints(-4, 4)),
    C("getitem_index_array", lambda x, i: x[i], normal(5), ints(-5, 5, 2, 3)),
    C("getitem_two_index_arrays", lambda x, i, j: x[i, :, j], normal(3, 2, 4),
      ints(0, 3, 2), ints(0, 4, 2)),
    C("getitem_slice_then_index", lambda x, i: x[1:, i], normal(3, 5), ints(0, 5, 4)),
    C("getitem_bool_where", lambda x, m: jnp.where(m, x, -x), normal(3, 4), bools(3, 4)),
    C("take", lambda x, i: jnp.take(x, i, axis=1), normal(2, 5), ints(0, 5, 3)),
    C("take_clip", lambda x, i: jnp.take(x, i, mode="clip"), normal(5), ints(-7, 7, 4)),
    C("take_fill", lambda x, i: jnp.take(x, i, mode="fill", fill_value=-1.0), normal(5),
      ints(-7, 7, 4)),
    C("take_along_axis", lambda x, i: jnp.take_along_axis(x, i, axis=0), normal(4, 3),
      ints(0, 4, 2, 3)),
    C("at_set", lambda x, i, v: x.at[i].set(v), normal(5, 2), ints(0, 5), normal(2)),
    C("at_set_array", lambda x, i, v: x.at[i].set(v), normal(5), ints(0, 5, 3), normal(3)),
    C("at_add_duplicates", lambda x, i, v: x.at[i].add(v), normal(4), ints(0, 2, 5), normal(5)),
    C("at_add_2d", lambda x, i, v: x.at[:, i].add(v), normal(3, 4), ints(0, 4, 2), normal(3, 2)),
    C("at_multiply", lambda x, i, v: x.at[i].multiply(v), normal(4), ints(0, 4, 3), normal(3)),
    C("at_min", lambda x, i, v: x.at[i].min(v), normal(4), ints(0, 4, 3), normal(3)),
    C("at_max", lambda x, i, v: x.at[i].max(v), normal(4), ints(0, 4, 3), normal(3)),
    C("at_get_fill", lambda x, i: x.at[i].get(mode="fill", fill_value=0.5), normal(4),
      ints(-6, 6, 3)),
    C("at_set_drop", lambda x, i, v: x.at[i].set(v, mode="drop"), normal(4), ints(0, 7, 3),
      normal(3)),
    C("dynamic_slice", lambda x, i: nbjax.lax.dynamic_slice_in_dim(x, i, 2), normal(5),
      ints(0, 4)),
    # sorting and searching
    C("sort", lambda x: jnp.sort(x, axis=0), normal(4, 3)),
    C("sort_stable_ints", lambda x: jnp.sort(x), small_ints(6)),
    C("argsort", lambda x: jnp.argsort(x, axis=-1), distinct(3, 4)),
    C("argsort_descending", lambda x: jnp.argsort(x, descending=True), distinct(5)),
    C("lexsort", lambda a, b: jnp.lexsort((a, b)), small_ints(6), small_ints(6)),
    C("partition", lambda x: jnp.sort(jnp.partition(x, 1)), normal(5)),
    C("argpartition_kth", lambda x: jnp.argpartition(x, 2)[2], distinct(5)),
    C("unique_size", lambda x: jnp.unique(x, size=4, fill_value=-1), small_ints(6)),
    C("unique_counts", lambda x: jnp.unique(x, return_counts=True, return_inverse=True,
                                            size=5), small_ints(6)),
    C("unique_values", lambda x: jnp.unique_values(x, size=6), small_ints(6)),
    C("searchsorted", jnp.searchsorted, sorted_rows(6), normal(4)),
    C("searchsorted_right", lambda a, v: jnp.searchsorted(a, v, side="right"),
      small_ints(5), small_ints(3)),
    C("digitize", jnp.digitize, normal(5), sorted_rows(3)),
    C("bincount", lambda x: jnp.bincount(x, length=5), small_ints(6)),
    C("bincount_weights", lambda x, w: jnp.bincount(x, w, length=4), small_ints(6),
      normal(6)),
    C("isin", jnp.isin, small_ints(3, 2), small_ints(3)),
    C("argmax", lambda x: jnp.argmax(x, axis=0), distinct(3, 4)),
    C("argmin_keepdims", lambda x: jnp.argmin(x, axis=-1, keepdims=True), distinct(3, 4)),
    C("nonzero_size", lambda x: jnp.nonzero(x, size=5, fill_value=-1), bools(2, 3)),
    C("argwhere_size", lambda x: jnp.argwhere(x > 0, size=3), normal(4)),
    C("count_nonzero", lambda x: jnp.count_nonzero(x, axis=1), bools(3, 4)),
    C("all_any", lambda x: (jnp.all(x, axis=0), jnp.any(x)), bools(3, 4)),
    C("cumsum_ints", lambda x: jnp.cumsum(x, axis=-1), small_ints(2, 4)),
    # products with batched and unbatched operands
    C("matmul", jnp.matmul, normal(2, 3), normal(3, 4)),
    C("matmul_vec", jnp.matmul, normal(3), normal(2, 3, 4)),
    C("einsum_contract", lambda a, b: jnp.einsum("ij,jk->ki", a, b), normal(2, 3), normal(3, 2)),
    C("einsum_batch_dims", lambda a, b: jnp.einsum("bij,bj->bi", a, b), normal(2, 3, 4),
      normal(2, 4)),
    C("einsum_trace", lambda a: jnp.einsum("ii", a), normal(3, 3)),
    C("einsum_three", lambda a, b, c: jnp.einsum("i,ij,j->", a, b, c), normal(2), normal(2, 3),
      normal(3)),
    # element-wise on integers and booleans, where with a batched condition
    C("where_batched_cond", jnp.where, bools(3, 4), normal(3, 4), normal(4)),
    C("where_cond_only", lambda c: jnp.where(c, 1.0, 0.0), bools(4)),
    C("int_ops", lambda a, b: (a // (b + 1), a % (b + 1), a << 1, a & b), small_ints(4),
      small_ints(4)),
    C("comparisons", lambda a, b: (a < b, jnp.isclose(a, b), jnp.logical_xor(a > 0, b > 0)),
      normal(4), normal(4)),
    C("one_hot", lambda i: nn.one_hot(i, 4), small_ints(3)),
    C("pad_batched_value", lambda x, c: jnp.pad(x, 2, constant_values=c), normal(3), normal()),
    C("concatenate_ints", lambda a, b: jnp.concatenate([a, b, a]), small_ints(2), small_ints(3)),
    C("clip_batched_bounds", jnp.clip, normal(4), uniform(-1, -0.5), uniform(0.5, 1)),
]


@pytest.mark.parametrize("case", [c.param() for c in VMAP_CASES])
def test_vmap_only_cases(case, request):
    run_case(case, request)


# --- out_axes, nested vmap, staged jaxprs --------------------------------------------------

OUT_AXES_CASES = {c.name: c for c in ALL_CASES + VMAP_CASES if c.name in (
    "sum_axis0", "cumsum_axis-1", "pad_reflect", "concatenate", "matmul", "einsum_ij,jk->ik",
    "sort", "at_add_duplicates", "softmax", "split", "unique_counts")}


@pytest.mark.parametrize("out_axes", [1, -1])
@pytest.mark.parametrize("name", sorted(OUT_AXES_CASES))
def test_out_axes(name, out_axes, request):
    case = OUT_AXES_CASES[name]
    dtype = np.float64 if case.x64 else np.float32
    rng = np.random.default_rng(0)
    args = [batch(rng, make, 0, dtype) for make in case.args]
    assert_vmap_matches_loop(case.fn, args, [0] * len(args), out_axes)


def nested_loop(f, x, y):
    return np.stack([np.stack([np.asarray(f(xi, yj)) for yj in y]) for xi in x])


NESTED = [  # f of per-example (x, y), x's shape, y's shape
    ("matmul", jnp.matmul, (2, 3), (3, 2)),
    ("take", lambda x, i: jnp.take(x, i), (5,), None),
    ("at_add", lambda x, i: x.at[i].add(x[0]), (4,), None),
    ("pad_wrap", lambda x, y: jnp.pad(x * y, (1, 3), mode="wrap"), (3,), ()),
    ("concatenate", lambda x, y: jnp.concatenate([x, y]), (2,), (3,)),
    ("where_sort", lambda x, y: jnp.sort(jnp.where(x > y, x, y)), (4,), ()),
    ("cumsum", lambda x, y: jnp.cumsum(x * y, axis=0), (3, 2), (2,)),
    ("einsum", lambda x, y: jnp.einsum("ij,j->i", x, y), (2, 3), (3,)),
    ("softmax", lambda x, y: nn.softmax(x + y), (4,), ()),
    ("searchsorted", lambda x, y: jnp.searchsorted(jnp.sort(x), y), (5,), ()),
]


@pytest.mark.parametrize("name, f, xshape, yshape", NESTED, ids=[n[0] for n in NESTED])
def test_nested_vmap_is_a_double_loop(name, f, xshape, yshape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B,) + xshape).astype(np.float32)
    y = (rng.integers(0, xshape[0], (4,)).astype(np.int32) if yshape is None else
         rng.standard_normal((4,) + yshape).astype(np.float32))
    g = _as_jnp(f)
    expected = nested_loop(g, x, y)
    outer_x = nbjax.vmap(nbjax.vmap(g, in_axes=(None, 0)), in_axes=(0, None))(x, y)
    np.testing.assert_allclose(outer_x, expected, rtol=1e-5, atol=1e-6)
    # The same with the loops swapped and the result's axes put back with out_axes.
    outer_y = nbjax.vmap(nbjax.vmap(g, in_axes=(0, None)), in_axes=(None, 0), out_axes=1)(x, y)
    np.testing.assert_allclose(outer_y, expected, rtol=1e-5, atol=1e-6)


def test_vmap_of_grad_and_grad_of_vmap():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((B, 4)).astype(np.float32), rng.standard_normal(4).astype(
        np.float32)

    def loss(w, x):
        return nn.logsumexp(jnp.sort(x * w)[1:]) + jnp.sum(jnp.pad(w, 1, mode="edge") ** 2)
    per_example = nbjax.vmap(nbjax.grad(loss), in_axes=(None, 0))(w, x)
    expected = np.stack([np.asarray(nbjax.grad(loss)(w, xi)) for xi in x])
    np.testing.assert_allclose(per_example, expected, rtol=1e-5, atol=1e-6)
    total = nbjax.grad(lambda w: jnp.sum(nbjax.vmap(loss, in_axes=(None, 0))(w, x)))(w)
    np.testing.assert_allclose(total, expected.sum(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [c.param() for c in (ALL_CASES + VMAP_CASES)[::11]])
def test_vmap_jaxpr_type_checks(case, request):
    if case.x64:
        request.getfixturevalue("x64")
    dtype = np.float64 if case.x64 else np.float32
    rng = np.random.default_rng(0)
    args = [batch(rng, make, 0, dtype) for make in case.args]
    check_jaxpr(nbjax.make_jaxpr(nbjax.vmap(_as_jnp(case.fn)))(*args).jaxpr)

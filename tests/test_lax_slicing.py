"""Slicing lax primitives: slice, dynamic_slice (clamping), dynamic_update_slice, the *_in_dim
helpers, and gather/scatter against loop-by-loop NumPy transcriptions of XLA's semantics."""

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.core import Array, check_jaxpr, eval_jaxpr
from nbjax.lax.gather_scatter import default_fill_value

from test_lax_structural import DTYPES, assert_same, check, noncontiguous
from helpers import random_array

FILL, CLIP, PROMISE = (lax.GatherScatterMode.FILL_OR_DROP, lax.GatherScatterMode.CLIP,
                       lax.GatherScatterMode.PROMISE_IN_BOUNDS)


# --- slice ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_matches_numpy(dtype):
    rng = np.random.default_rng(0)
    x = random_array(rng, (5, 0, 4), dtype)
    check(lambda x: lax.slice(x, (1, 0, 0), (4, 0, 2)), [x], x[1:4, 0:0, 0:2])
    y = random_array(rng, (6, 5), dtype)
    for _ in range(10):
        starts = [int(rng.integers(0, d + 1)) for d in y.shape]
        limits = [int(rng.integers(s, d + 1)) for s, d in zip(starts, y.shape)]
        strides = [int(rng.integers(1, 4)) for _ in y.shape]
        expected = y[tuple(slice(*b) for b in zip(starts, limits, strides))]
        check(lambda y: lax.slice(y, starts, limits, strides), [y], expected)
        check(lambda y: lax.slice(y, starts, limits), [noncontiguous(y)],
              y[tuple(slice(*b) for b in zip(starts, limits))])


def test_slice_jaxpr_and_errors():
    closed = nbjax.make_jaxpr(lambda x: lax.slice(x, (0, 1), (2, 3), (1, 2)))(np.ones((3, 4)))
    assert "slice[limit_indices=(2, 3) start_indices=(0, 1) strides=(1, 2)]" in str(closed)
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="less than or equal to operand shape"):
        lax.slice(x, (1,), (4,))
    with pytest.raises(TypeError, match="greater than or equal to start_indices"):
        lax.slice(x, (2,), (1,))
    with pytest.raises(TypeError, match="length equal to the number of dimensions"):
        lax.slice(x, (0, 0), (1, 1))
    with pytest.raises(TypeError, match="strides must be positive"):
        lax.slice(x, (0,), (3,), (0,))
    with pytest.raises(TypeError, match="nonnegative"):
        lax.slice(x, (-1,), (2,))


def test_slice_in_dim_and_index_in_dim():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    check(lambda x: lax.slice_in_dim(x, 1, None, axis=2), [x], x[:, :, 1:])
    check(lambda x: lax.slice_in_dim(x, -3, -1, axis=-1), [x], x[..., -3:-1])
    check(lambda x: lax.slice_in_dim(x, None, 3, 2, axis=1), [x], x[:, 0:3:2])
    check(lambda x: lax.index_in_dim(x, -1, axis=1), [x], x[:, -1:])
    check(lambda x: lax.index_in_dim(x, 1, axis=0, keepdims=False), [x], x[1])
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 1 with size 3"):
        lax.index_in_dim(x, 3, axis=1)


# --- dynamic_slice and dynamic_update_slice ------------------------------------------------

def clamp_start(i, dim, size):
    """JAX's wrapper counts negative starts from the end; XLA then clamps into range."""
    i = i + dim if i < 0 else i
    return min(max(i, 0), dim - size)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_slice_clamps_like_xla(dtype):
    rng = np.random.default_rng(1)
    x = random_array(rng, (5, 4), dtype)
    fn = lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3))  # noqa: E731
    closed = nbjax.make_jaxpr(fn)(x, np.int32(0), np.int32(0))
    check_jaxpr(closed.jaxpr)
    for i, j in [(0, 0), (3, 1), (4, 3), (9, -1), (-2, -9), (-10, 100)]:
        a, b = clamp_start(i, 5, 2), clamp_start(j, 4, 3)
        expected = x[a:a + 2, b:b + 3]
        assert_same(fn(x, i, j), expected)  # static Python ints
        assert_same(fn(noncontiguous(x), np.int32(i), np.int32(j)), expected)
        [out] = eval_jaxpr(closed.jaxpr, closed.consts, x, np.int32(i), np.int32(j))
        assert_same(out, expected)  # traced start indices


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_update_slice_clamps_like_xla(dtype):
    rng = np.random.default_rng(2)
    x, u = random_array(rng, (4, 5), dtype), random_array(rng, (2, 2), dtype)
    fn = lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j))  # noqa: E731
    closed = nbjax.make_jaxpr(fn)(x, u, np.int32(0), np.int32(0))
    check_jaxpr(closed.jaxpr)
    for i, j in [(0, 0), (2, 3), (3, 4), (-1, -1), (-7, 50)]:
        a, b = clamp_start(i, 4, 2), clamp_start(j, 5, 2)
        expected = x.copy()
        expected[a:a + 2, b:b + 2] = u
        assert_same(fn(x, u, i, j), expected)
        assert_same(fn(x.T.T, u.T.T, np.int32(i), np.int32(j)), expected)
        [out] = eval_jaxpr(closed.jaxpr, closed.consts, x, u, np.int32(i), np.int32(j))
        assert_same(out, expected)


def test_dynamic_slice_index_forms_and_weak_types():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_same(lax.dynamic_slice(x, np.array([1, 1]), (2, 3)), x[1:3, 1:4])
    assert_same(lax.dynamic_slice(x, Array(np.array([-1, 2], np.int32)), (1, 2)), x[2:3, 2:4])
    assert_same(lax.dynamic_slice(x, (np.uint8(250), np.uint8(0)), (2, 2)), x[1:3, 0:2])
    assert_same(lax.dynamic_slice(x, (1, 1), (0, 4)), x[1:1, 0:4])
    assert lax.dynamic_slice(lax.full((3,), 1.0), (0,), (2,)).weak_type
    closed = nbjax.make_jaxpr(lambda x: lax.dynamic_slice(x, (-1, 1), (2, 2)))(x)
    assert "dynamic_slice[slice_sizes=(2, 2)]" in str(closed) and "2:i32[]" in str(closed)
    # dynamic_update_slice is weakly typed only if every operand is (JAX's standard rule).
    w = lax.full((3,), 1.0)
    assert lax.dynamic_update_slice(w, lax.full((1,), 2.0), (1,)).weak_type
    assert not lax.dynamic_update_slice(w, lax.full((1,), 2.0), (np.int32(1),)).weak_type
    assert not lax.dynamic_update_slice(w, np.ones(1, np.float32), (1,)).weak_type


def test_dynamic_slice_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="less than or equal to operand shape"):
        lax.dynamic_slice(x, (1,), (4,))
    with pytest.raises(ValueError, match="Length of slice indices"):
        lax.dynamic_slice(x, (1, 2), (1,))
    with pytest.raises(TypeError, match="must be integers of the same type, got: float32"):
        lax.dynamic_slice(x, (1.0,), (2,))
    with pytest.raises(TypeError, match="same type, got: int8, int32"):
        lax.dynamic_slice(np.ones((2, 2)), (np.int8(1), 0), (1, 1))
    with pytest.raises(TypeError, match="same dtypes"):
        lax.dynamic_update_slice(x, np.ones(2, np.int32), (0,))
    with pytest.raises(TypeError, match="same rank"):
        lax.dynamic_update_slice(x, np.ones((1, 1), np.float32), (0,))
    with pytest.raises(TypeError, match="smaller than operand"):
        lax.dynamic_update_slice(x, np.ones(4, np.float32), (0,))
    with pytest.raises(ValueError, match="allow_negative_indices=False"):
        lax.dynamic_slice(x, (-1,), (1,), allow_negative_indices=False)


def test_dynamic_in_dim_helpers():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    check(lambda x: lax.dynamic_slice_in_dim(x, 1, 2, axis=2), [x], x[:, :, 1:3])
    check(lambda x: lax.dynamic_slice_in_dim(x, -1, 2, axis=1), [x], x[:, 1:3])  # clamped
    check(lambda x: lax.dynamic_index_in_dim(x, -1, axis=-1, keepdims=False), [x], x[..., -1])
    check(lambda x, i: lax.dynamic_index_in_dim(x, i, axis=1), [x, np.int32(2)], x[:, 2:3])
    u = -np.ones((2, 1, 4), np.int32)
    expected = x.copy()
    expected[:, 1:2] = u
    check(lambda x, u: lax.dynamic_update_slice_in_dim(x, u, 1, axis=1), [x, u], expected)
    check(lambda x, u: lax.dynamic_update_index_in_dim(x, u, 1, 1), [x, u[:, 0]], expected)
    check(lambda x, u, i: lax.dynamic_update_index_in_dim(x, u, i, 1),
          [x, u[:, 0], np.int32(-2)], expected)


# --- gather: reference ---------------------------------------------------------------------

def gather_reference(operand, indices, dn, slice_sizes, mode, fill_value=None):
    """XLA's gather, one output element at a time (operation_semantics#gather)."""
    rank = operand.ndim
    batch_shape = indices.shape[:-1]
    window_dims = [d for d in range(rank)
                   if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
    out_rank = len(batch_shape) + len(window_dims)
    batch_out = [i for i in range(out_rank) if i not in dn.offset_dims]
    sizes, b, w = [], iter(batch_shape), iter(slice_sizes[d] for d in window_dims)
    for i in range(out_rank):
        sizes.append(next(w) if i in dn.offset_dims else next(b))
    out = np.empty(sizes, operand.dtype)
    for out_index in np.ndindex(*sizes):
        g = [out_index[i] for i in batch_out]
        vector = indices[tuple(g)]
        start = [0] * rank
        for k, d in enumerate(dn.start_index_map):
            start[d] = int(vector[k])
        for od, idim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            start[od] = g[idim]
        fits = all(0 <= start[d] <= operand.shape[d] - slice_sizes[d]
                   for d in dn.start_index_map)
        if mode == FILL and not fits:
            out[out_index] = fill_value
            continue
        start = [min(max(s, 0), operand.shape[d] - slice_sizes[d]) for d, s in enumerate(start)]
        offset = [0] * rank
        for d, i in zip(window_dims, dn.offset_dims):
            offset[d] = out_index[i]
        out[out_index] = operand[tuple(s + o for s, o in zip(start, offset))]
    return out


def random_gather(rng, dtype, n_operand_batch):
    """Random valid gather arguments, with out-of-bounds and negative indices."""
    rank = int(rng.integers(max(1, n_operand_batch), 4))
    shape = tuple(int(s) for s in rng.integers(1, 5, rank))
    axes = [int(a) for a in rng.permutation(rank)]
    operand_batch = sorted(axes[:n_operand_batch])
    rest = axes[n_operand_batch:]
    start_index_map = tuple(int(a) for a in rng.permutation(rest)[:rng.integers(0, len(rest) + 1)])
    collapsed = tuple(sorted(a for a in rest if rng.random() < 0.4))
    slice_sizes = tuple(1 if d in collapsed or d in operand_batch else
                        int(rng.integers(0, shape[d] + 1)) for d in range(rank))
    n_batch = int(rng.integers(n_operand_batch, n_operand_batch + 3))
    batch_shape = [int(s) for s in rng.integers(1, 4, n_batch)]
    indices_batch = [int(a) for a in rng.permutation(n_batch)[:n_operand_batch]]
    for od, idim in zip(operand_batch, indices_batch):
        batch_shape[idim] = shape[od]
    high = max(shape) + 2
    indices = rng.integers(-2, high, batch_shape + [len(start_index_map)]).astype(np.int32)
    n_window = rank - len(collapsed) - n_operand_batch
    offset_dims = tuple(sorted(int(d) for d in rng.permutation(n_batch + n_window)[:n_window]))
    dn = lax.GatherDimensionNumbers(offset_dims, collapsed, start_index_map,
                                    tuple(operand_batch), tuple(indices_batch))
    return random_array(rng, shape, dtype), indices, dn, slice_sizes


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_operand_batch", [0, 1])
def test_gather_random_dimension_numbers(dtype, n_operand_batch):
    rng = np.random.default_rng(10 + n_operand_batch)
    for case in range(12):
        operand, indices, dn, sizes = random_gather(rng, dtype, n_operand_batch)
        for mode in (CLIP, FILL, PROMISE):
            fill = None if mode != FILL else (random_array(rng, (), dtype).item() if case % 2 else None)
            out = lax.gather(operand, indices, dn, sizes, mode=mode, fill_value=fill)
            if fill is None:
                fill = default_fill_value(np.dtype(dtype)) if mode == FILL else None
            assert_same(out, gather_reference(operand, indices, dn, sizes, mode, fill))


def test_gather_standard_forms():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    idx = np.array([4, 0, 2, 2], np.int32)
    # x[idx]: one collapsed axis, the rows as windows.
    take = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                      start_index_map=(0,))
    check(lambda x, i: lax.gather(x, i[:, None], take, (1, 3)), [x, idx], x[idx])
    check(lambda x, i: lax.gather(x, i[:, None], take, (1, 3)), [x.T.T, idx], x[idx])
    # take_along_axis(x, j, axis=1): batch over rows with operand/indices batching dims.
    j = rng.integers(0, 3, (5, 2)).astype(np.int32)
    along = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(1,),
                                       start_index_map=(1,), operand_batching_dims=(0,),
                                       start_indices_batching_dims=(0,))
    check(lambda x, j: lax.gather(x, j[..., None], along, (1, 1)), [x, j],
          np.take_along_axis(x, j, axis=1))
    # Windows of size 2 x 2 at each (row, col) start; out-of-bounds starts are clamped.
    starts = np.array([[0, 0], [3, 1], [4, 2], [-1, 0]], np.int32)
    windows = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                         start_index_map=(0, 1))
    expected = np.stack([x[r:r + 2, c:c + 2] for r, c in [(0, 0), (3, 1), (3, 1), (0, 0)]])
    check(lambda x, s: lax.gather(x, s, windows, (2, 2)), [x, starts], expected)


def test_gather_fill_values_and_jaxpr():
    dn = lax.GatherDimensionNumbers((), (0,), (0,))
    idx = np.array([[-1], [3], [1]], np.int32)
    for dtype, fill in [(np.float32, np.nan), (np.int32, -2**31), (np.uint8, 255),
                        (np.bool_, True), (np.complex64, np.nan)]:
        x = np.zeros(3, dtype)
        assert_same(lax.gather(x, idx, dn, (1,), mode="fill"), np.array([fill, fill, 0], dtype))
    assert_same(lax.gather(np.ones(3, np.float32), idx, dn, (1,), mode="fill", fill_value=-1),
                np.array([-1, -1, 1], np.float32))
    assert_same(lax.gather(np.arange(3, dtype=np.int32), idx, dn, (1,)),
                np.array([0, 2, 1], np.int32))  # default mode: promise_in_bounds, clamps
    closed = nbjax.make_jaxpr(lambda x: lax.gather(x, idx, dn, (1,), mode="fill"))(
        np.arange(3, dtype=np.int32))
    check_jaxpr(closed.jaxpr)
    text = str(closed)
    assert "fill_value=-2147483648" in text and "mode=GatherScatterMode.FILL_OR_DROP" in text
    assert "GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,)" in text
    assert lax.gather(lax.full((3,), 1.0), idx, dn, (1,)).weak_type


def test_gather_scalar_operand_and_empty_indices():
    dn = lax.GatherDimensionNumbers((), (), ())
    assert_same(lax.gather(np.float32(3), np.zeros((2, 0), np.int32), dn, ()),
                np.full(2, 3, np.float32))
    take = lax.GatherDimensionNumbers((1,), (0,), (0,))
    out = lax.gather(np.ones((3, 4), np.float32), np.zeros((0, 1), np.int32), take, (1, 4))
    assert_same(out, np.zeros((0, 4), np.float32))


def test_gather_large_index_count():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1000, 3)).astype(np.float32)
    idx = rng.integers(-10, 1010, 200_000).astype(np.int32)
    dn = lax.GatherDimensionNumbers((1,), (0,), (0,))
    out = lax.gather(x, idx[:, None], dn, (1, 3), mode="clip")
    assert_same(out, x[np.clip(idx, 0, 999)])


def test_gather_errors():
    x = np.ones((3, 4), np.float32)
    take = lax.GatherDimensionNumbers((1,), (0,), (0,))
    idx = np.zeros((2, 1), np.int32)
    with pytest.raises(ValueError, match="integer type"):
        lax.gather(x, idx.astype(np.float32), take, (1, 4))
    with pytest.raises(TypeError, match="start_index_map"):
        lax.gather(x, np.zeros((2, 2), np.int32), take, (1, 4))
    with pytest.raises(TypeError, match="one slice size for every input dimension"):
        lax.gather(x, idx, take, (1,))
    with pytest.raises(TypeError, match="out of range"):
        lax.gather(x, idx, take, (1, 5))
    with pytest.raises(TypeError, match="bound 1"):
        lax.gather(x, idx, take, (2, 4))
    with pytest.raises(TypeError, match="offset_dims in gather op must be sorted"):
        lax.gather(x, np.zeros((2, 0), np.int32), lax.GatherDimensionNumbers((2, 1), (), ()),
                   (3, 4))
    with pytest.raises(TypeError, match="either be a offset dimension"):
        lax.gather(x, idx, lax.GatherDimensionNumbers((1,), (), (0,)), (1, 4))
    with pytest.raises(TypeError, match="must be disjoint"):
        lax.gather(x, np.zeros((3, 1), np.int32),
                   lax.GatherDimensionNumbers((), (0,), (0,), (0,), (0,)), (1, 1))
    with pytest.raises(TypeError, match="batching dimensions to have the same shape"):
        lax.gather(x, np.zeros((2, 1), np.int32),
                   lax.GatherDimensionNumbers((), (1,), (1,), (0,), (0,)), (1, 1))
    with pytest.raises(ValueError, match="Unknown gather mode"):
        lax.gather(x, idx, take, (1, 4), mode="wrap")


# --- scatter: reference --------------------------------------------------------------------

COMBINE = {"scatter": None, "scatter_add": np.add, "scatter_sub": np.subtract,
           "scatter_mul": np.multiply, "scatter_min": np.minimum, "scatter_max": np.maximum}


def scatter_reference(operand, indices, updates, dn, mode, combine):
    """XLA's scatter, one update element at a time (operation_semantics#scatter).

    Returns the result, and for a plain scatter (``combine`` None) the values written to each
    position, since with repeated indices any one of them may win.
    """
    out = operand.copy()
    written = {}
    rank = operand.ndim
    window_dims = [d for d in range(rank)
                   if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
    scatter_axes = [i for i in range(updates.ndim) if i not in dn.update_window_dims]
    window = [1] * rank
    for d, i in zip(window_dims, dn.update_window_dims):
        window[d] = updates.shape[i]
    for u in np.ndindex(*updates.shape):
        g = [u[i] for i in scatter_axes]
        vector = indices[tuple(g)]
        start = [0] * rank
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            start[d] = int(vector[k])
        for od, idim in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
            start[od] = g[idim]
        fits = all(0 <= start[d] <= operand.shape[d] - window[d]
                   for d in dn.scatter_dims_to_operand_dims)
        if mode == CLIP:
            start = [min(max(s, 0), operand.shape[d] - window[d]) for d, s in enumerate(start)]
        elif not fits:
            continue  # the whole window is dropped
        position = list(start)
        for d, i in zip(window_dims, dn.update_window_dims):
            position[d] += u[i]
        position = tuple(position)
        if combine is None:
            out[position] = updates[u]
            written.setdefault(position, []).append(updates[u])
        else:
            out[position] = combine(out[position], updates[u])
    return out, written


def random_scatter(rng, dtype, n_operand_batch):
    """Random valid scatter arguments, with repeated, out-of-bounds and negative indices."""
    rank = int(rng.integers(max(1, n_operand_batch), 4))
    shape = tuple(int(s) for s in rng.integers(1, 5, rank))
    axes = [int(a) for a in rng.permutation(rank)]
    operand_batch = sorted(axes[:n_operand_batch])
    rest = axes[n_operand_batch:]
    index_map = tuple(int(a) for a in rng.permutation(rest)[:rng.integers(0, len(rest) + 1)])
    inserted = tuple(sorted(a for a in rest if rng.random() < 0.4))
    window_dims = [d for d in range(rank) if d not in inserted and d not in operand_batch]
    window_shape = [int(rng.integers(0, shape[d] + 1)) for d in window_dims]
    n_batch = int(rng.integers(n_operand_batch, n_operand_batch + 3))
    batch_shape = [int(s) for s in rng.integers(1, 5, n_batch)]
    indices_batch = [int(a) for a in rng.permutation(n_batch)[:n_operand_batch]]
    for od, idim in zip(operand_batch, indices_batch):
        batch_shape[idim] = shape[od]
    indices = rng.integers(-2, max(shape) + 1, batch_shape + [len(index_map)]).astype(np.int32)
    n_updates = n_batch + len(window_dims)
    update_window_dims = tuple(sorted(int(d) for d in
                                      rng.permutation(n_updates)[:len(window_dims)]))
    b, w = iter(batch_shape), iter(window_shape)
    updates_shape = [next(w) if i in update_window_dims else next(b) for i in range(n_updates)]
    dn = lax.ScatterDimensionNumbers(update_window_dims, inserted, index_map,
                                     tuple(operand_batch), tuple(indices_batch))
    return random_array(rng, shape, dtype), indices, random_array(rng, updates_shape, dtype), dn


def small_values(rng, x):
    """Integer-valued data, so sums and products are exact in any order."""
    if x.dtype == np.bool_:
        return x
    values = rng.integers(-2, 3, x.shape)
    if np.issubdtype(x.dtype, np.unsignedinteger):
        values = np.abs(values)
    if np.issubdtype(x.dtype, np.complexfloating):
        values = values + 1j * rng.integers(-2, 3, x.shape)
    return values.astype(x.dtype)


# Arithmetic scatters reject bool (tested in test_scatter_weak_type_and_errors).
@pytest.mark.parametrize("name,dtype", [
    (name, dtype) for name in COMBINE for dtype in DTYPES
    if not (dtype == np.bool_ and name in ("scatter_add", "scatter_sub", "scatter_mul"))])
def test_scatter_random_dimension_numbers(name, dtype):
    rng = np.random.default_rng(20)
    fn = getattr(lax, name)
    for case in range(12):
        operand, indices, updates, dn = random_scatter(rng, dtype, case % 2)
        operand, updates = small_values(rng, operand), small_values(rng, updates)
        for mode in (CLIP, FILL, PROMISE):
            out = np.asarray(fn(operand, indices, updates, dn, mode=mode))
            expected, written = scatter_reference(operand, indices, updates, dn, mode,
                                                  COMBINE[name])
            if COMBINE[name] is not None:
                assert_same(out, expected)
                continue
            assert out.dtype == operand.dtype
            for position in np.ndindex(*operand.shape):  # repeated indices: any write may win
                allowed = written.get(position, [operand[position]])
                assert any(out[position] == v for v in allowed), (position, out, allowed)


def test_scatter_repeated_indices_accumulate():
    x = np.array([1, 2, 3, 4], np.float32)
    idx = np.array([[0], [2], [0], [0], [3], [9], [-1]], np.int32)
    u = np.array([10, 20, 30, 40, 50, 60, 70], np.float32)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    assert_same(lax.scatter_add(x, idx, u, dn), np.array([81, 2, 23, 54], np.float32))
    assert_same(lax.scatter_sub(x, idx, u, dn), np.array([-79, 2, -17, -46], np.float32))
    assert_same(lax.scatter_mul(x, idx, u, dn), np.array([12000, 2, 60, 200], np.float32))
    assert_same(lax.scatter_min(x, idx, u, dn), np.array([1, 2, 3, 4], np.float32))
    assert_same(lax.scatter_max(x, idx, u, dn), np.array([40, 2, 20, 50], np.float32))
    # CLIP sends 9 to the last and -1 to the first position instead of dropping them.
    assert_same(lax.scatter_add(x, idx, u, dn, mode="clip"),
                np.array([151, 2, 23, 114], np.float32))
    nan = lax.scatter_min(x, idx[:1], np.array([np.nan], np.float32), dn)
    assert np.isnan(np.asarray(nan)[0])


def test_scatter_drops_whole_windows():
    """A window that does not fit is dropped entirely, even its in-bounds part (XLA)."""
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(1,),
                                     scatter_dims_to_operand_dims=(0, 1))
    idx = np.array([[0, 0], [2, 1], [-1, 2], [1, 3], [1, 4]], np.int32)
    u = np.arange(1, 11, dtype=np.float32).reshape(5, 2)
    expected_drop = np.array([[1, 0, 0, 0], [2, 0, 0, 7], [0, 0, 0, 8]], np.float32)
    expected_clip = np.array([[1, 0, 5, 0], [2, 3, 6, 16], [0, 4, 0, 18]], np.float32)
    zeros = np.zeros((3, 4), np.float32)
    for mode, expected in [("drop", expected_drop), ("promise_in_bounds", expected_drop),
                           ("clip", expected_clip)]:
        assert_same(lax.scatter_add(zeros, idx, u, dn, mode=mode), expected)


def test_scatter_standard_forms_under_jaxpr():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    rows = np.array([4, 0, 2], np.int32)
    u = rng.standard_normal((3, 3)).astype(np.float32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    expected = x.copy()
    expected[rows] = u
    closed = check(lambda x, i, u: lax.scatter(x, i[:, None], u, dn), [x, rows, u], expected)
    text = str(closed)
    assert "scatter[" in text and "update_jaxpr=None" in text and "update_consts=()" in text
    assert "mode=GatherScatterMode.FILL_OR_DROP" in text
    expected = x.copy()
    np.add.at(expected, rows[[0, 0, 1]], u)
    closed = check(lambda x, i, u: lax.scatter_add(x, i[:, None], u, dn),
                   [x.T.T, rows[[0, 0, 1]], u], expected)
    assert "scatter-add[" in str(closed)
    # put_along_axis-style: operand and indices batched together over rows.
    j = np.array([[2], [0], [1], [1], [0]], np.int32)
    v = np.arange(5, dtype=np.float32)[:, None]
    along = lax.ScatterDimensionNumbers((), (1,), (1,), (0,), (0,))
    expected = x.copy()
    np.put_along_axis(expected, j, v, axis=1)
    check(lambda x, j, v: lax.scatter(x, j[..., None], v, along), [x, j, v], expected)


def test_scatter_large_index_count():
    rng = np.random.default_rng(6)
    idx = rng.integers(-5, 1005, 200_000).astype(np.int32)
    u = rng.integers(0, 5, 200_000).astype(np.int32)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    expected = np.zeros(1000, np.int32)
    keep = (idx >= 0) & (idx < 1000)
    np.add.at(expected, idx[keep], u[keep])
    assert_same(lax.scatter_add(np.zeros(1000, np.int32), idx[:, None], u, dn), expected)


def test_scatter_weak_type_and_errors():
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    idx = np.array([[0]], np.int32)
    assert lax.scatter(lax.full((2,), 1.0), idx, np.ones(1, np.float32), dn).weak_type
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="^add does not accept dtype bool at position 0"):
        lax.scatter_add(np.ones(2, bool), idx, np.ones(1, bool), dn)
    assert_same(lax.scatter_max(np.zeros(2, bool), idx, np.ones(1, bool), dn),
                np.array([True, False]))
    with pytest.raises(ValueError, match="integer type"):
        lax.scatter(x, idx.astype(np.float32), np.ones(1, np.float32), dn)
    with pytest.raises(TypeError, match="same dtypes"):
        lax.scatter(x, idx, np.ones(1, np.int32), dn)
    with pytest.raises(TypeError, match="Updates tensor must be of rank 1"):
        lax.scatter(x, idx, np.ones((1, 1), np.float32), dn)
    with pytest.raises(TypeError, match="Bounds of the scatter dimensions"):
        lax.scatter(x, idx, np.ones(2, np.float32), dn)
    with pytest.raises(TypeError, match="window of size"):
        lax.scatter(x, idx, np.ones(1, np.float32), lax.ScatterDimensionNumbers((), (), (0,)))
    with pytest.raises(TypeError, match="must not exceed"):
        lax.scatter(x, np.zeros((0,), np.int32), np.ones(4, np.float32),
                    lax.ScatterDimensionNumbers((0,), (), ()))
    with pytest.raises(TypeError, match="scatter_dims_to_operand_dims"):
        lax.scatter(x, np.zeros((1, 2), np.int32), np.ones(1, np.float32), dn)

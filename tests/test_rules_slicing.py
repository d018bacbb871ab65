"""Batching, JVP and transpose rules of the slicing primitives (slice, dynamic_slice,
dynamic_update_slice, gather, and the scatters): vmap against a Python loop with batched
and unbatched operands and indices, derivatives against finite differences (forward and
reverse, second order), and the jaxprs the rules stage."""

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.core import check_jaxpr, dtypes
from nbjax.test_util import check_grads
from helpers import assert_close, random_array

GD, SD = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers
B = 3  # the batch size of every vmap test
rng = np.random.default_rng(0)


def make(kind, shape):
    """A random argument: ``"f"`` floats; ``("spaced", offset)`` distinct floats on a grid
    of step 0.1 shifted by ``offset`` (for min/max: no two values within a finite-difference
    step of each other); ``("i", low, high)`` integers in [low, high); ``("pick", table)``
    index vectors: distinct rows of ``table``, in random order."""
    if kind == "f":
        return random_array(rng, shape)
    if kind[0] == "spaced":
        n = int(np.prod(shape))
        return ((rng.permutation(n) - n // 2) * 0.1 + kind[1]).reshape(shape).astype(np.float32)
    if kind[0] == "i":
        return rng.integers(kind[1], kind[2], shape).astype(np.int32)
    table = np.asarray(kind[1], np.int32)
    return table[rng.permutation(len(table))[:int(np.prod(shape[:-1]))]].reshape(shape)


def batched(kind, shape, axis):
    if axis is None:
        return make(kind, shape)
    return np.stack([make(kind, shape) for _ in range(B)], axis)


def assert_vmap_matches_loop(f, kinds, shapes, in_axes, out_axes=0):
    """``vmap(f)`` on batched random arguments equals stacking ``f`` over them in a loop."""
    args = [batched(k, s, ax) for k, s, ax in zip(kinds, shapes, in_axes)]
    out = nbjax.vmap(f, in_axes, out_axes)(*args)
    expected = [f(*[a if ax is None else np.take(a, i, ax) for a, ax in zip(args, in_axes)])
                for i in range(B)]
    assert_close(np.asarray(out), np.stack(expected, out_axes), rtol=1e-6,
                 err_msg=f"in_axes={in_axes}")


def is_float(kind):
    return kind == "f" or kind[0] == "spaced"


def check_grads_wrt_floats(f, kinds, shapes, order=2):
    """check_grads of ``f`` with respect to its float arguments, the others held fixed."""
    args = [make(k, s) for k, s in zip(kinds, shapes)]
    floats = [i for i, k in enumerate(kinds) if is_float(k)]

    def g(*float_args):
        full = list(args)
        for i, a in zip(floats, float_args):
            full[i] = a
        return f(*full)
    float_args = [args[i] for i in floats]
    # eps 1e-3, not 1e-4: float32 rounding of f over a smaller step sums up in the cotangent
    # projections; the "spaced" inputs keep ties 0.05 away, far beyond the step.
    check_grads(g, float_args, order=order, modes=("fwd", "rev"), eps=1e-3)
    loss = lambda *a: (g(*a) ** 2).sum()
    check_jaxpr(nbjax.make_jaxpr(nbjax.grad(loss, tuple(range(len(floats)))))(*float_args)
                .jaxpr)


def eqn_names(f, *args):
    closed = nbjax.make_jaxpr(f)(*args)
    check_jaxpr(closed.jaxpr)
    return [eqn.primitive.name for eqn in closed.jaxpr.eqns]


# --- slice, dynamic_slice, dynamic_update_slice ---------------------------------------------

def test_slice():
    for f in [lambda x: lax.slice(x, (1, 0), (4, 6), (2, 3)),
              lambda x: lax.slice(x, (0, 2), (5, 5)),
              lambda x: lax.slice(x, (2, 1), (2, 6), (1, 2))]:  # size 0
        for axis in (0, 1, -1):
            assert_vmap_matches_loop(f, ["f"], [(5, 6)], (axis,))
        check_grads_wrt_floats(f, ["f"], [(5, 6)])


def test_slice_cotangent_is_padded_back():
    g = nbjax.grad(lambda x: lax.slice(x, (1,), (6,), (2,)).sum())(np.zeros(7, np.float32))
    np.testing.assert_array_equal(g, [0, 1, 0, 1, 0, 1, 0])


DYNAMIC_SLICE = lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3))
# Starts cover negative (counted from the end) and clamped (too large) values.
DS_KINDS, DS_SHAPES = ["f", ("i", -2, 6), ("i", 0, 7)], [(5, 6), (), ()]


@pytest.mark.parametrize("in_axes", [(0, None, None), (1, None, None), (-1, None, None),
                                     (None, 0, None), (None, None, 0), (0, 0, 0),
                                     (2, None, 0), (None, 0, 0)])
def test_dynamic_slice_vmap(in_axes):
    assert_vmap_matches_loop(DYNAMIC_SLICE, DS_KINDS, DS_SHAPES, in_axes)


def test_dynamic_slice_grads():
    check_grads_wrt_floats(DYNAMIC_SLICE, DS_KINDS, DS_SHAPES)
    x = random_array(rng, (5, 6))
    g = nbjax.grad(lambda x: DYNAMIC_SLICE(x, 4, 1).sum())(x)  # start 4 clamps to 3
    expected = np.zeros((5, 6), np.float32)
    expected[3:5, 1:4] = 1
    np.testing.assert_array_equal(g, expected)


DYNAMIC_UPDATE = lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j))
DUS_KINDS, DUS_SHAPES = ["f", "f", ("i", -2, 6), ("i", 0, 7)], [(5, 6), (2, 3), (), ()]


@pytest.mark.parametrize("in_axes", [(0, None, None, None), (None, 1, None, None),
                                     (1, -1, None, None), (0, 0, 0, None),
                                     (None, None, 0, 0), (None, 0, None, 0),
                                     (2, None, 0, None)])
def test_dynamic_update_slice_vmap(in_axes):
    assert_vmap_matches_loop(DYNAMIC_UPDATE, DUS_KINDS, DUS_SHAPES, in_axes)


def test_dynamic_update_slice_grads():
    check_grads_wrt_floats(DYNAMIC_UPDATE, DUS_KINDS, DUS_SHAPES)
    gx, gu = nbjax.grad(lambda x, u: DYNAMIC_UPDATE(x, u, 1, 2).sum(), (0, 1))(
        random_array(rng, (5, 6)), random_array(rng, (2, 3)))
    expected = np.ones((5, 6), np.float32)
    expected[1:3, 2:5] = 0
    np.testing.assert_array_equal(gx, expected)
    np.testing.assert_array_equal(gu, np.ones((2, 3)))


def test_batched_starts_become_a_gather_or_a_scatter():
    x, u, i = random_array(rng, (5, 6)), random_array(rng, (2, 3)), np.arange(B, dtype=np.int32)
    names = eqn_names(nbjax.vmap(lambda i: DYNAMIC_SLICE(x, i, 1)), i)
    assert "gather" in names and "dynamic_slice" not in names
    names = eqn_names(nbjax.vmap(lambda i: DYNAMIC_UPDATE(x, u, 1, i)), i)
    assert "scatter" in names and "dynamic_update_slice" not in names
    # Same starts for every member: a slice of the batch axis too, which stays in place.
    xs = np.stack([x] * B, 1)
    assert eqn_names(nbjax.vmap(lambda x: DYNAMIC_SLICE(x, 1, 2), 1, 1), xs) == [
        "dynamic_slice"]


def test_start_indices_get_float0_cotangents():
    _, pullback = nbjax.vjp(DYNAMIC_SLICE, random_array(rng, (5, 6)), np.int32(1), np.int32(2))
    gx, gi, gj = pullback(np.ones((2, 3), np.float32))
    assert np.asarray(gi).dtype == dtypes.float0 and np.asarray(gj).dtype == dtypes.float0
    assert float(np.asarray(gx).sum()) == 6


# --- gather ----------------------------------------------------------------------------------

# (name, function of (operand, indices), operand shape, indices kind and shape)
GATHERS = [
    ("rows", lambda x, i: lax.gather(x, i, GD((1,), (0,), (0,)), (1, 3)), (5, 3),
     ("i", 0, 5), (4, 1)),
    ("windows", lambda x, i: lax.gather(x, i, GD((1, 2), (), (0, 1)), (2, 3)), (5, 6),
     ("i", 0, 4), (2, 2)),
    ("batching_dims", lambda x, i: lax.gather(
        x, i, GD(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                 operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1)),
     (3, 5), ("i", 0, 5), (3, 2, 1)),
    ("fill", lambda x, i: lax.gather(x, i, GD((1,), (0,), (0,)), (1, 3), mode="fill",
                                     fill_value=1.5), (5, 3), ("i", -2, 8), (4, 1)),
    ("clip", lambda x, i: lax.gather(x, i, GD((0,), (1,), (1,)), (2, 1), mode="clip"),
     (2, 5), ("i", -2, 8), (4, 1)),
]
GATHER_AXES = [(0, None), (1, None), (-1, None), (None, 0), (None, 1), (None, -1), (0, 0),
               (1, -1), (-1, 1)]


@pytest.mark.parametrize("name,f,xshape,ikind,ishape", GATHERS, ids=[g[0] for g in GATHERS])
def test_gather(name, f, xshape, ikind, ishape):
    for in_axes in GATHER_AXES:
        assert_vmap_matches_loop(f, ["f", ikind], [xshape, ishape], in_axes)
    check_grads_wrt_floats(f, ["f", ikind], [xshape, ishape])


def test_gather_batching_keeps_axes_in_place():
    f = GATHERS[0][1]
    x, i = random_array(rng, (5, B, 3)), np.array([[0], [4], [4], [2]], np.int32)
    # The operand's batch axis is a window axis before the row's: first in the output.
    assert eqn_names(nbjax.vmap(f, (1, None)), x, i) == ["gather"]
    i_batched = np.stack([i] * B, 1)  # batch axis 1 of the indices
    assert eqn_names(nbjax.vmap(f, (1, 1), 1), x, i_batched) == ["gather"]
    assert eqn_names(nbjax.vmap(f, (None, 1), 1), x[:, 0], i_batched) == ["gather"]


def test_gather_transpose_adds_repeated_reads():
    f = GATHERS[0][1]
    g = nbjax.grad(lambda x: f(x, np.array([[0], [3], [0], [0]], np.int32)).sum())(
        random_array(rng, (5, 3)))
    np.testing.assert_array_equal(g, np.array([[3] * 3, [0] * 3, [0] * 3, [1] * 3, [0] * 3]))


# --- scatters ---------------------------------------------------------------------------------

def scatter_fn(op, dnums, **kw):
    return lambda x, i, u: op(x, i, u, dnums, **kw)


ROWS = SD(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
WINDOWS = SD(update_window_dims=(1, 2), inserted_window_dims=(),
             scatter_dims_to_operand_dims=(0, 1))
BATCHED = SD(update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
             operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
# (dimension numbers, operand shape, indices shape, updates shape, index bound): repeated
# indices are likely for all three.
LAYOUTS = {"rows": (ROWS, (5, 3), (4, 1), (4, 3), 5),
           "windows": (WINDOWS, (5, 6), (3, 2), (3, 2, 3), 4),
           "batching_dims": (BATCHED, (3, 5), (3, 4, 1), (3, 4), 5)}
SCATTER_AXES = [(0, None, None), (1, None, 1), (-1, None, None), (None, None, 0),
                (None, 0, None), (0, 0, 0), (None, 1, -1), (-1, -1, 1)]
SCATTERS = {"add": lax.scatter_add, "sub": lax.scatter_sub, "mul": lax.scatter_mul,
            "min": lax.scatter_min, "max": lax.scatter_max}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", SCATTERS)
def test_scatter_vmap(op, layout):
    dnums, xshape, ishape, ushape, bound = LAYOUTS[layout]
    f = scatter_fn(SCATTERS[op], dnums)
    for in_axes in SCATTER_AXES:
        assert_vmap_matches_loop(f, ["f", ("i", 0, bound), "f"], [xshape, ishape, ushape],
                                 in_axes)


# Scatters whose windows never overlap: which of overlapping updates wins is unspecified.
DISJOINT = [(ROWS, (5, 3), ("pick", np.arange(5)[:, None]), (4, 1), (4, 3)),
            (WINDOWS, (5, 6), ("pick", [[0, 0], [0, 3], [3, 0], [3, 3]]), (3, 2), (3, 2, 3)),
            (BATCHED, (3, 5), ("i", 0, 5), (3, 1, 1), (3, 1))]


@pytest.mark.parametrize("dnums,xshape,ikind,ishape,ushape", DISJOINT,
                         ids=["rows", "windows", "batching_dims"])
def test_scatter_set_vmap(dnums, xshape, ikind, ishape, ushape):
    f = scatter_fn(lax.scatter, dnums, unique_indices=True)
    for in_axes in SCATTER_AXES:
        assert_vmap_matches_loop(f, ["f", ikind, "f"], [xshape, ishape, ushape], in_axes)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["add", "sub", "min", "max"])
def test_scatter_grads_with_repeated_indices(op, layout):
    dnums, xshape, ishape, ushape, bound = LAYOUTS[layout]
    f = scatter_fn(SCATTERS[op], dnums)
    # min/max: values that never tie (the derivative jumps where they do), except below.
    kinds = [("spaced", 0), ("i", 0, bound), ("spaced", 0.05)]
    check_grads_wrt_floats(f, kinds, [xshape, ishape, ushape])


def test_scatter_set_grads():
    x, u = random_array(rng, (5, 3)), random_array(rng, (4, 3))
    repeated = np.array([[1], [3], [1], [1]], np.int32)
    unique = np.array([[4], [0], [2], [1]], np.int32)
    for i, is_unique in [(repeated, False), (unique, True), (unique, False)]:
        f = lambda x, u: lax.scatter(x, i, u, ROWS, unique_indices=is_unique)
        check_grads(f, (x, u), order=2, modes=("fwd", "rev"))
    for layout in ("windows", "batching_dims"):
        dnums, xshape, ishape, ushape, bound = LAYOUTS[layout]
        check_grads_wrt_floats(scatter_fn(lax.scatter, dnums), ["f", ("i", 0, bound), "f"],
                               [xshape, ishape, ushape])


def test_scatter_mul_grads():
    x, u = random_array(rng, (5, 3)), random_array(rng, (4, 3))
    repeated = np.array([[1], [3], [1], [1]], np.int32)
    unique = np.array([[4], [0], [2], [1]], np.int32)
    f = lambda x: lax.scatter_mul(x, repeated, u, ROWS)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))
    g = lambda x, u: lax.scatter_mul(x, unique, u, ROWS, unique_indices=True)
    # Second order of a product: float32 finite differences of values up to ~5 carry
    # errors of ~3e-3 (float64 agrees to 1e-7).
    check_grads(g, (x, u), order=2, modes=("fwd", "rev"), atol=1e-2, rtol=1e-2)
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        nbjax.grad(lambda u: lax.scatter_mul(x, repeated, u, ROWS).sum())(u)


def test_scatter_out_of_bounds_modes_grads():
    """Dropped windows get no cotangent; clipped ones land on the clamped window."""
    x, u = random_array(rng, (5, 3)), random_array(rng, (4, 3))
    i = np.array([[1], [7], [-1], [4]], np.int32)
    for mode in ("drop", "clip"):
        for op in (lax.scatter_add, lax.scatter):
            f = lambda x, u: op(x, i, u, ROWS, mode=mode)
            check_grads(f, (x, u), order=2, modes=("fwd", "rev"))
    gu = nbjax.grad(lambda u: lax.scatter_add(x, i, u, ROWS, mode="drop").sum())(u)
    np.testing.assert_array_equal(gu, np.array([[1] * 3, [0] * 3, [0] * 3, [1] * 3]))


def test_scatter_max_splits_ties_evenly():
    """Operand and two updates tie at 2.0: each gets a third of the output's tangent."""
    x = np.array([2.0, 0.0], np.float32)
    i = np.array([[0], [0], [1]], np.int32)
    u = np.array([2.0, 2.0, -1.0], np.float32)
    dnums = SD(update_window_dims=(), inserted_window_dims=(0,),
               scatter_dims_to_operand_dims=(0,))
    f = lambda x, u: lax.scatter_max(x, i, u, dnums)
    _, t = nbjax.jvp(f, (x, u), (np.array([3.0, 1.0], np.float32),
                                 np.array([6.0, 9.0, 5.0], np.float32)))
    assert_close(t, [(3 + 6 + 9) / 3, 1.0], rtol=1e-6)


def test_scatter_batching_keeps_axes_in_place():
    f = scatter_fn(lax.scatter_add, ROWS)
    x, u = random_array(rng, (5, B, 3)), random_array(rng, (4, B, 3))
    i = np.array([[0], [4], [4], [2]], np.int32)
    assert eqn_names(nbjax.vmap(f, (1, None, 1), 1), x, i, u) == ["scatter-add"]
    i_batched = np.stack([i] * B, 1)
    assert eqn_names(nbjax.vmap(f, (1, 1, 1), 1), x, i_batched, u) == ["scatter-add"]


def test_nested_vmap_and_out_axes():
    f = GATHERS[2][1]  # batching dims already, plus two more from the vmaps
    xs = random_array(rng, (2, 3, 5, B))
    idx = rng.integers(0, 5, (B, 2, 3, 2, 1)).astype(np.int32)
    inner = nbjax.vmap(f, in_axes=(2, 0), out_axes=1)
    out = nbjax.vmap(inner, in_axes=(0, 1))(xs, idx)
    expected = np.stack([np.stack([f(xs[a, :, :, b], idx[b, a]) for b in range(B)], 1)
                         for a in range(2)])
    assert_close(out, expected, rtol=1e-6)


def test_vmap_of_grad_of_gather_and_scatter():
    i = np.array([[0], [4], [4], [2]], np.int32)
    loss = lambda x, u: (lax.scatter_add(x, i, u, ROWS) * GATHERS[0][1](x, i).sum()).sum()
    xs, us = random_array(rng, (B, 5, 3)), random_array(rng, (B, 4, 3))
    got = nbjax.vmap(nbjax.grad(loss, (0, 1)))(xs, us)
    for b in range(B):
        for g, e in zip(got, nbjax.grad(loss, (0, 1))(xs[b], us[b])):
            assert_close(np.asarray(g)[b], e, rtol=1e-5)

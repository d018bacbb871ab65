"""The jax.lax names added for JAX 0.10's surface: compositions (checked against NumPy
formulas), new primitives (against recorded scipy values, live scipy/JAX values when
importable, finite-difference derivatives and loop-vmaps), collectives under vmap."""

import math

import numpy as np
import pytest

import nbjax
import nbjax.lax as lax
from nbjax.test_util import check_grads

from helpers import assert_close, check_vmap, random_array

try:
    import jax
    import jax.lax as jlax
except ImportError:  # the recorded values below still check nbjax
    jax = jlax = None

try:
    import scipy.special as sps
except ImportError:
    sps = None

RNG = np.random.default_rng(0)


# --- compositions ------------------------------------------------------------------------

def test_square_reciprocal_values_and_errors():
    x = random_array(RNG, (3, 4))
    assert_close(lax.square(x), x * x, 1e-6)
    np.testing.assert_array_equal(lax.square(np.arange(4, dtype=np.int32)), [0, 1, 4, 9])
    assert_close(lax.reciprocal(x), 1 / x, 1e-6)
    with pytest.raises(TypeError):
        lax.reciprocal(np.arange(3, dtype=np.int32))
    with nbjax.enable_x64():
        check_grads(lax.square, (x.astype(np.float64),), 2)
        check_grads(lax.reciprocal, (np.abs(x).astype(np.float64) + 1,), 2)


def test_split_tile_stack_unstack():
    x = random_array(RNG, (2, 5, 3))
    parts = lax.split(x, (1, 0, 4), axis=1)
    for got, want in zip(parts, np.split(x, [1, 1], axis=1)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="Sum of sizes"):
        lax.split(x, (2, 2), axis=1)
    np.testing.assert_array_equal(lax.tile(x, (2, 1, 3)), np.tile(x, (2, 1, 3)))
    with pytest.raises(TypeError, match="reps length"):
        lax.tile(x, (2,))
    np.testing.assert_array_equal(lax.stack([x, x + 1], axis=-1), np.stack([x, x + 1], -1))
    with pytest.raises(ValueError, match="same shape"):
        lax.stack([x, x[:1]])
    for i, piece in enumerate(lax.unstack(x, axis=2)):
        np.testing.assert_array_equal(piece, x[:, :, i])
    check_grads(lambda v: lax.tile(v, (2, 1, 2)), (x,), 1)
    check_grads(lambda v: lax.split(v, (2, 3), 1)[1], (x,), 1)
    check_vmap(lambda v: lax.tile(v, (3, 2)), (x,), (1,))


def test_batch_matmul_and_shapes():
    a, b = random_array(RNG, (4, 2, 3)), random_array(RNG, (4, 3, 5))
    assert_close(lax.batch_matmul(a, b), a @ b, 1e-5, scale=np.abs(a) @ np.abs(b))
    with pytest.raises(ValueError):
        lax.batch_matmul(a, b[0])
    assert lax.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        lax.broadcast_shapes((2, 3), (4, 3))
    np.testing.assert_array_equal(lax.broadcast_like(np.arange(3), np.zeros((2, 3))),
                                  np.broadcast_to(np.arange(3), (2, 3)))
    assert lax.dtype(1.0) == np.float32 and lax.dtype(np.int8(1)) == np.int8
    assert lax.dtype(nbjax.numpy.ones(2, np.int16)) == np.int16
    np.testing.assert_array_equal(lax.empty((2, 3), np.float32), np.zeros((2, 3)))
    np.testing.assert_array_equal(lax.shape_as_value((2, 3)), [2, 3])


def test_index_take_and_approx_k():
    x = random_array(RNG, (3, 4, 5))
    rows, cols = np.array([0, 2, -1]), np.array([1, 6, 4])
    np.testing.assert_array_equal(lax.index_take(x, (rows, cols), (0, 2)),
                                  x[rows % 3, :, cols % 5])
    values, indices = lax.approx_max_k(x, 2, reduction_dimension=1)
    want = -np.sort(-x, axis=1)[:, :2]
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(np.take_along_axis(x, np.asarray(indices), 1), want)
    values, _ = lax.approx_min_k(x, 3)
    np.testing.assert_array_equal(values, np.sort(x, axis=-1)[..., :3])


def test_scatter_apply_counts_duplicates():
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    out = lax.scatter_apply(np.arange(5.0, dtype=np.float32), np.array([[1], [3], [1]]),
                            lambda v: v * 2 + 1, dnums, update_shape=(3,))
    np.testing.assert_array_equal(out, [0, 7, 2, 7, 4])  # index 1 twice: (1*2+1)*2+1


def test_identities_and_tokens():
    tree = {"a": random_array(RNG, (2,)), "b": (np.int32(3),)}
    out = lax.optimization_barrier(tree)
    np.testing.assert_array_equal(out["a"], tree["a"])
    assert lax.dce_sink(tree["a"]) is None
    token = lax.after_all(lax.create_token(), lax.create_token())
    with pytest.raises(TypeError):
        lax.after_all(1.0)
    assert token is not None
    assert lax.platform_dependent(2.0, cpu=lambda v: v + 1, default=lambda v: v) == 3.0
    assert lax.platform_dependent(2.0, cuda=lambda v: v + 1, default=lambda v: -v) == -2.0
    twice = lax.composite(lambda v: 2 * v, "my.twice")
    assert twice.__name__ == "my.twice" and twice(3.0) == 6.0
    assert float(lax.stage(1.5)) == 1.5


def test_ragged_dot_matches_loop_and_grads():
    lhs, rhs = random_array(RNG, (7, 4)), random_array(RNG, (3, 4, 5))
    sizes = np.array([2, 0, 4], np.int32)
    want = np.zeros((7, 5), np.float32)
    want[:2], want[2:6] = lhs[:2] @ rhs[0], lhs[2:6] @ rhs[2]  # row 6 is in no group
    assert_close(lax.ragged_dot(lhs, rhs, sizes), want, 1e-5, scale=4)
    with nbjax.enable_x64():
        check_grads(lambda a, b: lax.ragged_dot(a, b, sizes),
                    (lhs.astype(np.float64), rhs.astype(np.float64)), 1)
    dn = lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
    assert_close(lax.ragged_dot_general(lhs, rhs, sizes, dn), want, 1e-5, scale=4)


# --- reduce_window, associative_scan --------------------------------------------------------

def _pool_loop(x, window, strides, op, init):
    """Max/sum pooling of a 2-D array by loops (VALID padding)."""
    rows = (x.shape[0] - window[0]) // strides[0] + 1
    cols = (x.shape[1] - window[1]) // strides[1] + 1
    out = np.full((rows, cols), init, x.dtype)
    for i in range(rows):
        for j in range(cols):
            block = x[i * strides[0]:i * strides[0] + window[0],
                      j * strides[1]:j * strides[1] + window[1]]
            out[i, j] = op(block)
    return out


def test_reduce_window_pooling():
    x = random_array(RNG, (6, 7))
    assert_close(lax.reduce_window(x, -np.inf, lax.max, (2, 3), (2, 2), "VALID"),
                 _pool_loop(x, (2, 3), (2, 2), np.max, -np.inf), 1e-7)
    assert_close(lax.reduce_window(x, 0.0, lax.add, (3, 2), (1, 2), "VALID"),
                 _pool_loop(x, (3, 2), (1, 2), np.sum, 0.0), 1e-6, scale=6)
    same = lax.reduce_window(x, 0.0, lax.add, (3, 3), (1, 1), "SAME")
    padded = np.pad(x, 1)
    assert_close(same, _pool_loop(padded, (3, 3), (1, 1), np.sum, 0.0), 1e-6, scale=9)
    assert lax.reduce_window_shape_tuple((6, 7), (2, 3), (2, 2), ((0, 0), (1, 1))) == (3, 4)


def test_reduce_window_dilations_and_pytrees():
    x = np.arange(10, dtype=np.float32)
    # window dilation 2: elements i and i + 2
    np.testing.assert_array_equal(
        lax.reduce_window(x, 0.0, lax.add, (2,), window_dilation=(2,)), x[:-2] + x[2:])
    # base dilation 2 puts a padding cell (the init value) between elements
    np.testing.assert_array_equal(
        lax.reduce_window(x[:3], 100.0, lax.min, (2,), base_dilation=(2,)), [0, 1, 1, 2])
    values, counts = lax.reduce_window(
        (x, np.ones(10, np.float32)), (0.0, 0.0),
        lambda a, b: (a[0] + b[0], a[1] + b[1]), (3,), (3,))
    np.testing.assert_array_equal(values, [3, 12, 21])
    np.testing.assert_array_equal(counts, [3, 3, 3])
    with pytest.raises(ValueError, match="tree structure"):
        lax.reduce_window((x, x), 0.0, lax.add, (2,))


def test_reduce_window_rules():
    x = random_array(RNG, (5, 6))

    def avg_pool(v):
        return lax.reduce_window(v, 0.0, lax.add, (2, 2), (1, 2), ((1, 0), (0, 1))) / 4

    check_grads(avg_pool, (x,), 2)
    check_grads(lambda v: lax.reduce_window(v, -np.inf, lax.max, (2, 2), (2, 2), "SAME"),
                (x,), 1)
    check_vmap(avg_pool, (random_array(RNG, (3, 5, 6)),), (0,))
    check_vmap(lambda v: lax.reduce_window(v, -np.inf, lax.max, (3, 1), (1, 1), "VALID"),
               (random_array(RNG, (5, 3, 6)),), (1,))
    assert_close(nbjax.jit(avg_pool)(x), avg_pool(x), 1e-6)


# Gradients of sum(max pooling) (window 4, stride 4; window 3, stride 1, "SAME") as JAX
# 0.10.2 gives them: one element of each window gets its tangent, not a share of a tie.
_POOL_GRADIENTS = [
    ([1.0, np.nan, 0.0, 0.0], (4,), (4,), "VALID", [0, 0, 1, 0]),
    ([np.nan, 1.0, np.nan, 0.0], (4,), (4,), "VALID", [0, 0, 0, 1]),
    ([1.0, 2.0, 2.0, 0.0], (4,), (4,), "VALID", [0, 1, 0, 0]),
    ([-np.inf] * 4, (4,), (4,), "VALID", [1, 0, 0, 0]),
    ([0.0, -0.0, 0.0, 0.0], (4,), (4,), "VALID", [1, 0, 0, 0]),
    ([1.0] * 5, (3,), (1,), "SAME", [2, 1, 1, 1, 0]),
]


@pytest.mark.parametrize("x, window, strides, padding, want", _POOL_GRADIENTS)
def test_max_pooling_gradient_goes_to_one_element_of_each_window(x, window, strides,
                                                                 padding, want):
    x = np.array(x, np.float32)

    def pooled(lax, v):
        return (lax.reduce_window(v, -np.inf, lax.max, window, strides, padding) * 3.0).sum()
    for grad in (nbjax.grad(lambda v: pooled(lax, v)),
                 nbjax.jit(nbjax.grad(lambda v: pooled(lax, v)))):
        np.testing.assert_array_equal(grad(x), 3.0 * np.array(want, np.float32))
    if jax is not None:
        np.testing.assert_array_equal(jax.grad(lambda v: pooled(jlax, v))(x),
                                      3.0 * np.array(want, np.float32))


def _first_extremum_gradient(x, ct, window, pick):
    """NumPy: each window's cotangent at its first maximum (``pick``: np.argmax) or minimum
    in window order, for windows that tile ``x`` (no NaN: ``pick`` ignores none)."""
    grad = np.zeros_like(x)
    for out in np.ndindex(*ct.shape):
        corner = [i * w for i, w in zip(out, window)]
        block = x[tuple(slice(c, c + w) for c, w in zip(corner, window))]
        at = np.unravel_index(pick(block), block.shape)
        grad[tuple(c + a for c, a in zip(corner, at))] += ct[out]
    return grad


@pytest.mark.parametrize("shape, window", [((4, 8, 6, 3), (1, 2, 2, 1)), ((6, 9), (2, 3)),
                                           ((8,), (4,)), ((3, 4, 4), (3, 2, 2)),
                                           ((5, 4), (1, 1))])
@pytest.mark.parametrize("ties", [False, True])
def test_pooling_gradients_of_windows_that_tile_the_operand(shape, window, ties):
    """Windows side by side, covering the operand once (2x2 pooling): each element gets its
    window's cotangent where it is the window's first extremum, else +0.0 (also where the
    cotangent is -0.0, as adding into zeros gives, and JAX), eagerly, jitted, under vmap;
    and the gradient is computed by choosing, with no pad per window position."""
    x = RNG.standard_normal(shape).astype(np.float32)
    if ties:
        x = np.round(x)
    out_shape = tuple(n // w for n, w in zip(shape, window))
    ct = RNG.standard_normal(out_shape).astype(np.float32)
    ct.reshape(-1)[::3] = -0.0
    for init, op, pick in ((-np.inf, lax.max, np.argmax), (np.inf, lax.min, np.argmin)):
        def loss(v, init=init, op=op):
            return (lax.reduce_window(v, init, op, window, window, "VALID") * ct).sum()
        want = _first_extremum_gradient(x, ct, window, pick)
        for grad in (nbjax.grad(loss), nbjax.jit(nbjax.grad(loss))):
            got = np.asarray(grad(x))
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # (-0.0 == 0.0)
        check_vmap(nbjax.grad(loss), (np.stack([x, -x]),), (0,))
    jaxpr = nbjax.make_jaxpr(nbjax.grad(loss))(x)
    scatter, = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "select_and_scatter_add"]
    expanded = nbjax.make_jaxpr(lambda s, v: scatter.primitive.lowering("jaxpr")(
        s, v, **scatter.params))(ct, x)
    assert "pad" not in {e.primitive.name for e in expanded.jaxpr.eqns}


def test_min_pooling_is_a_primitive_with_jax_s_rules():
    x = np.array([[2.0, 1.0, 1.0, 3.0], [5.0, 5.0, 4.0, 6.0]], np.float32)
    pool = lambda v: lax.reduce_window(v, np.inf, lax.min, (1, 2), (1, 2), "VALID")
    assert [e.primitive.name for e in nbjax.make_jaxpr(pool)(x).jaxpr.eqns] == [
        "reduce_window_min"]
    np.testing.assert_array_equal(pool(x), [[1, 1], [5, 4]])
    np.testing.assert_array_equal(nbjax.grad(lambda v: pool(v).sum())(x),
                                  [[0, 1, 1, 0], [1, 0, 1, 0]])
    np.testing.assert_array_equal(nbjax.vmap(pool)(np.stack([x, -x])),
                                  np.stack([pool(x), pool(-x)]))
    # another init is not the identity: a fold of lax.min, not the primitive
    capped = nbjax.make_jaxpr(lambda v: lax.reduce_window(v, 0.0, lax.min, (1, 2), (1, 2),
                                                          "VALID"))(x)
    assert "reduce_window_min" not in str(capped)
    x = random_array(RNG, (4, 6))  # no ties: the derivative of each window's extremum
    check_grads(lambda v: lax.reduce_window(v, -np.inf, lax.max, (2, 3), (1, 2), "SAME"),
                (x,), 2)


def _chosen_loop(x, window, strides, padding, select, dilation=(1, 1)):
    """Per window of the 2-D ``x`` padded with ``select``'s identity (as in ``lax.pad``:
    ``padding`` pairs may crop), the flat index into ``x`` of the element a fold by
    ``select`` (``np.greater_equal``) ends at, -1 for a padding cell, by loops."""
    fill = -np.inf if select is np.greater_equal else np.inf
    values, indices = x, np.arange(x.size).reshape(x.shape)
    for axis, (lo, hi) in enumerate(padding):
        widths = [(0, 0)] * 2
        widths[axis] = (max(lo, 0), max(hi, 0))
        values = np.pad(values, widths, constant_values=fill)
        indices = np.pad(indices, widths, constant_values=-1)
        keep = [slice(None)] * 2
        keep[axis] = slice(max(-lo, 0), values.shape[axis] - max(-hi, 0))
        values, indices = values[tuple(keep)], indices[tuple(keep)]
    spans = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
    rows, cols = [(n - w) // s + 1 for n, w, s in zip(values.shape, spans, strides)]
    chosen = np.empty((rows, cols), np.int64)
    for i, j in np.ndindex(rows, cols):
        cells = (slice(i * strides[0], i * strides[0] + spans[0], dilation[0]),
                 slice(j * strides[1], j * strides[1] + spans[1], dilation[1]))
        block, where = values[cells].ravel(), indices[cells].ravel()
        best = 0
        for k in range(1, block.size):
            if not select(block[best], block[k]):
                best = k
        chosen[i, j] = where[best]
    return chosen


def _scattered(values, chosen, size):
    """``values`` added at the flat indices ``chosen`` (-1: dropped) of ``size`` zeros."""
    out = np.zeros(size, np.float32)
    np.add.at(out, chosen[chosen >= 0], values[chosen >= 0])
    return out


_SELECTIONS = [((2, 2), (2, 2), ((0, 0), (0, 0))), ((3, 2), (1, 2), ((1, 1), (0, 1))),
               ((2, 3), (2, 1), ((-1, 2), (1, 0)))]


@pytest.mark.parametrize("window, strides, padding", _SELECTIONS)
@pytest.mark.parametrize("select", ["ge", "le"])
def test_select_and_gather_and_scatter_add_against_loops(window, strides, padding, select):
    """JAX's two primitives of max/min pooling's derivative: the tangent at each window's
    chosen element, and the sum of the values scattered to them (its transpose), against
    loops and JAX's, as one equation each, compiled as evaluated, vmapped as a loop, with
    derivatives (linear in the values; the operand only chooses)."""
    x = np.round(random_array(RNG, (6, 7)), 1)  # ties (the first wins)
    x[2, 3] = np.nan  # passed over by the next element
    chosen = _chosen_loop(x, window, strides, padding, {
        "ge": np.greater_equal, "le": np.less_equal}[select])
    t, s = random_array(RNG, x.shape), random_array(RNG, chosen.shape)
    params = dict(window_dimensions=window, window_strides=strides, padding=padding)
    cases = {  # name: (operands, extra params, result by loops)
        "select_and_gather_add": ((t, x), dict(base_dilation=(1, 1), window_dilation=(1, 1)),
                                  np.where(chosen >= 0, t.ravel()[chosen], 0)),
        "select_and_scatter_add": ((s, x), {}, _scattered(s, chosen, x.size).reshape(x.shape))}
    for name, ((values, operand), extra, want) in cases.items():
        prim = getattr(lax, name + "_p")

        def f(v, x):
            return prim.bind(v, x, select_prim=getattr(lax, select + "_p"), **params, **extra)
        assert_close(f(values, operand), want, 1e-6, scale=4)
        assert [e.primitive.name for e in nbjax.make_jaxpr(f)(values, operand).jaxpr.eqns] \
            == [name]
        np.testing.assert_array_equal(nbjax.jit(f)(values, operand), f(values, operand))
        check_vmap(f, (np.stack([values, 2 * values]), operand), (0, None))
        check_grads(lambda v: f(v, operand), (values,), 2)
        if jax is not None and min(min(padding)) >= 0:  # (JAX's cannot crop)
            # (where a NaN is passed over, XLA's order of a window's elements decides)
            ties = np.where(np.isnan(operand), 0.5, operand).astype(np.float32)
            theirs = getattr(jlax, name + "_p").bind(
                values, ties, select_prim=getattr(jlax, select + "_p"), **params, **extra)
            assert_close(theirs, f(values, ties), 1e-6, scale=4)


@pytest.mark.parametrize("base, dilation", [((2, 1), (1, 1)), ((1, 1), (2, 2)),
                                            ((2, 2), (1, 2))])
def test_pooling_gradient_with_dilations_against_loops(base, dilation):
    """Max pooling's gradient with a base dilation (as JAX's: the operand padded between its
    elements) and with a window dilation (which JAX does not differentiate): each window's
    cotangent lands on its chosen element of the operand."""
    x = np.round(random_array(RNG, (5, 6)), 1)
    padding = ((1, 0), (0, 1))

    def pool(v):
        return lax.reduce_window(v, -np.inf, lax.max, (2, 2), (2, 3), padding,
                                 base_dilation=base, window_dilation=dilation)
    out, pullback = nbjax.vjp(pool, x)
    ct = random_array(RNG, out.shape)
    # the operand dilated, its holes -inf (chosen only where nothing else is) and index -1
    holes = [(n - 1) * b + 1 for n, b in zip(x.shape, base)]
    dilated, index = np.full(holes, -np.inf, np.float32), np.full(holes, -1)
    dilated[::base[0], ::base[1]] = x
    index[::base[0], ::base[1]] = np.arange(x.size).reshape(x.shape)
    chosen = _chosen_loop(dilated, (2, 2), (2, 3), padding, np.greater_equal, dilation)
    chosen = np.where(chosen >= 0, index.ravel()[chosen], -1)
    assert_close(pullback(ct)[0], _scattered(ct, chosen, x.size).reshape(x.shape), 1e-6,
                 scale=4)
    np.testing.assert_array_equal(nbjax.jit(lambda c: pullback(c)[0])(ct), pullback(ct)[0])
    # (a window of holes only is -inf, whatever the operand: no finite difference there)
    check_grads(lambda v: lax.max(pool(v), np.float32(-10)), (x,), 2)


@pytest.mark.parametrize("length", [1, 2, 5, 8, 13])
def test_associative_scan_matches_cumulative(length):
    x = random_array(RNG, (3, length))
    assert_close(lax.associative_scan(lax.add, x, axis=1), np.cumsum(x, 1), 1e-5,
                 scale=np.cumsum(np.abs(x), 1))
    assert_close(lax.associative_scan(lax.max, x, reverse=True, axis=-1),
                 np.maximum.accumulate(x[:, ::-1], 1)[:, ::-1], 1e-7)
    bits = x > 0
    np.testing.assert_array_equal(lax.associative_scan(lax.bitwise_or, bits, axis=1),
                                  np.logical_or.accumulate(bits, 1))


def test_associative_scan_pytree_and_rules():
    # a linear recurrence h_t = a_t h_{t-1} + b_t as pairs composed associatively
    a, b = np.abs(random_array(RNG, (6,))) / 2, random_array(RNG, (6,))

    def compose(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    _, h = lax.associative_scan(compose, (a, b))
    want, state = [], 0.0
    for t in range(6):
        state = a[t] * state + b[t]
        want.append(state)
    assert_close(h, np.array(want, np.float32), 1e-5, scale=4)
    check_grads(lambda v: lax.associative_scan(lax.mul, v), (a + 0.5,), 1)
    check_vmap(lambda v: lax.associative_scan(lax.add, v), (random_array(RNG, (4, 7)),), (1,))


# --- convolutions -----------------------------------------------------------------------------

def _dilate(x, strides):
    out = np.zeros([(d - 1) * s + 1 for d, s in zip(x.shape, strides)], x.dtype)
    out[tuple(slice(None, None, s) for s in strides)] = x
    return out


def test_conv_transpose_is_a_dilated_convolution(x64):
    lhs, rhs = random_array(RNG, (2, 4, 5, 3)), random_array(RNG, (3, 2, 3, 4))  # NHWC, HWIO
    out = lax.conv_transpose(lhs, rhs, (2, 1), "SAME")
    # "SAME" with kernel (3, 2), strides (2, 1): pads (2, 1) and (1, 0) around the dilated input
    want = lax.conv_general_dilated(lhs, rhs, (1, 1), ((2, 1), (1, 0)), (2, 1), None,
                                    ("NHWC", "HWIO", "NHWC"))
    assert_close(out, want, 1e-6)
    assert out.shape == lax.conv_transpose_shape_tuple(
        lhs.shape, rhs.shape, (2, 1), "SAME", ("NHWC", "HWIO", "NHWC")) == (2, 8, 5, 4)
    # transpose_kernel: the gradient of the forward convolution
    x = random_array(RNG, (2, 8, 5, 4))
    kernel = random_array(RNG, (3, 2, 3, 4))  # HWIO of the forward conv: 3 -> 4 features

    def forward(v):
        return lax.conv_general_dilated(v, kernel, (2, 1), "SAME", None, None,
                                        ("NHWC", "HWIO", "NHWC"))
    y = forward(random_array(RNG, (2, 8, 5, 3)))
    ct = random_array(RNG, y.shape)
    _, vjp = nbjax.vjp(forward, np.zeros((2, 8, 5, 3), np.float32))
    grad = vjp(ct)[0]
    assert_close(lax.conv_transpose(ct, kernel, (2, 1), "SAME", transpose_kernel=True),
                 grad, 1e-5, scale=10)
    del x
    # (in float64: float32 finite differences with a step of 1e-4 are off by ~1e-3)
    check_grads(lambda a, b: lax.conv_transpose(a, b, (2, 2), "VALID"),
                (random_array(RNG, (1, 3, 3, 2)).astype(np.float64),
                 random_array(RNG, (2, 2, 2, 3)).astype(np.float64)), 1)


def test_conv_general_dilated_patches_and_local():
    lhs = random_array(RNG, (2, 3, 6, 5))  # NCHW
    patches = lax.conv_general_dilated_patches(lhs, (2, 3), (1, 2), "VALID")
    assert patches.shape == (2, 3 * 6, 5, 2)
    # channel-major then window position: feature c * 6 + (di * 3 + dj)
    for c, di, dj, i, j in [(0, 0, 0, 0, 0), (2, 1, 2, 4, 1), (1, 0, 1, 3, 0)]:
        assert_close(patches[:, c * 6 + di * 3 + dj, i, j], lhs[:, c, i + di, 2 * j + dj], 1e-7)
    kernel = random_array(RNG, (5, 2, 18, 4))  # HWIO, an unshared kernel per output position
    out = lax.conv_general_dilated_local(lhs, kernel, (1, 2), "VALID", (2, 3),
                                         dimension_numbers=("NCHW", "HWIO", "NCHW"))
    want = np.einsum("bfhw,hwfo->bohw", np.asarray(patches), kernel)
    assert_close(out, want, 1e-5, scale=20)
    check_grads(lambda v: lax.conv_general_dilated_patches(v, (2, 2), (1, 1), "SAME"),
                (random_array(RNG, (1, 2, 3, 3)),), 1)


def test_conv_shape_helpers():
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 2), (2, 1), "SAME") == (2, 4, 5, 9)
    assert lax.conv_general_shape_tuple((2, 9, 9, 3), (3, 2, 3, 4), (2, 1), "VALID",
                                        ("NHWC", "HWIO", "NHWC")) == (2, 4, 8, 4)
    assert lax.conv_general_permutations(("NHWC", "HWIO", "NHWC")) == (
        (0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))


# --- collectives --------------------------------------------------------------------------------

def _vmapped(fn, x):
    return nbjax.vmap(fn, axis_name="i")(x)


def test_psum_scatter_under_vmap_and_its_transpose():
    x = random_array(RNG, (4, 4, 3))
    np.testing.assert_allclose(_vmapped(lambda v: lax.psum_scatter(v, "i"), x), x.sum(0),
                               rtol=1e-6, atol=1e-6)
    tiled = _vmapped(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True),
                     random_array(RNG, (2, 3, 4)))
    assert tiled.shape == (2, 3, 2)
    y = random_array(RNG, (4, 8))
    ct = random_array(RNG, (4, 2))
    _, vjp = nbjax.vjp(lambda v: _vmapped(lambda w: lax.psum_scatter(w, "i", tiled=True), v),
                       y)
    # the transpose is an all_gather of the cotangents: every member gets all of them
    np.testing.assert_allclose(vjp(ct)[0], np.broadcast_to(ct.reshape(1, 8), (4, 8)), rtol=1e-6)
    with pytest.raises(ValueError):
        _vmapped(lambda v: lax.psum_scatter(v, "i"), random_array(RNG, (4, 3)))


@pytest.mark.parametrize("split,concat,tiled", [(0, 0, False), (0, 1, False), (1, 0, True),
                                                (0, 1, True)])
def test_all_to_all_matches_its_definition(split, concat, tiled):
    n = 4
    x = random_array(RNG, (n, 4, 8))
    out = np.asarray(_vmapped(lambda v: lax.all_to_all(v, "i", split, concat, tiled=tiled), x))
    # member i's block j (along split) goes to member j, which orders blocks by sender
    blocks = [np.split(x[m], n, axis=split) for m in range(n)]
    for j in range(n):
        received = [blocks[m][j] for m in range(n)]
        want = (np.concatenate(received, axis=concat) if tiled
                else np.stack([b.squeeze(split) for b in received], axis=concat))
        np.testing.assert_array_equal(out[j], want)


def test_pswapaxes_pshuffle_pbroadcast_axis_size():
    x = random_array(RNG, (3, 3, 2))
    np.testing.assert_array_equal(_vmapped(lambda v: lax.pswapaxes(v, "i", 0), x),
                                  x.transpose(1, 0, 2))
    np.testing.assert_array_equal(_vmapped(lambda v: lax.pshuffle(v, "i", [2, 0, 1]), x),
                                  x[[2, 0, 1]])
    with pytest.raises(ValueError, match="permutation"):
        _vmapped(lambda v: lax.pshuffle(v, "i", [0, 0, 1]), x)
    np.testing.assert_array_equal(_vmapped(lambda v: lax.pbroadcast(v, "i", 1), x),
                                  np.broadcast_to(x[1], x.shape))
    np.testing.assert_array_equal(_vmapped(lambda v: v * lax.axis_size("i"), x), x * 3)
    with pytest.raises(NameError):
        lax.axis_size("i")


def test_collectives_under_pmap():
    x = random_array(RNG, (2, 4))
    out = nbjax.pmap(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True), axis_name="i")(x)
    np.testing.assert_array_equal(out, x.reshape(2, 2, 2).transpose(1, 0, 2).reshape(2, 4))
    out = nbjax.pmap(lambda v: lax.psum_scatter(v, "i", tiled=True), axis_name="i")(x)
    np.testing.assert_allclose(out, x.sum(0).reshape(2, 2), rtol=1e-6)


@pytest.mark.parametrize("name", ["pcast", "psend", "precv", "ragged_all_to_all",
                                  "with_sharding_constraint"])
def test_shard_map_and_sharding_stubs_say_why(name):
    fn = getattr(lax, name)
    assert isinstance(fn.not_implemented_reason, str)
    with pytest.raises(NotImplementedError, match="shard|sharding"):
        fn(np.zeros(2), "i")


# --- special functions --------------------------------------------------------------------------

# scipy.special values (float64), recorded for when neither scipy nor JAX is installed.
_RECORDED = {
    "igamma": (([0.5, 2.0, 10.0], [0.3, 3.0, 12.0]), [0.56142197, 0.80085173, 0.75760784]),
    "betainc": (([0.5, 2.0, 10.0], [1.5, 3.0, 2.0], [0.3, 0.6, 0.9]),
                [0.66074595, 0.8208, 0.69735688]),
    "bessel_i0e": (([0.0, 1.5, -40.0],), [1.0, 0.36743361, 0.06327828]),
    "bessel_i1e": (([0.0, 1.5, -40.0],), [0.0, 0.21903939, -0.06248223]),
    "zeta": (([2.0, 3.5, 4.0], [1.0, 0.5, -1.5]), [1.64493407, 11.62080466, 32.43237937]),
}


@pytest.mark.parametrize("name", sorted(_RECORDED))
def test_special_recorded_values(name):
    args, want = _RECORDED[name]
    args = [np.array(a, np.float32) for a in args]
    assert_close(getattr(lax, name)(*args), np.array(want, np.float32), 2e-6)


def _scipy_reference():
    return {"igamma": sps.gammainc, "igammac": sps.gammaincc, "betainc": sps.betainc,
            "bessel_i0e": sps.i0e, "bessel_i1e": sps.i1e, "zeta": sps.zeta}


@pytest.mark.skipif(sps is None, reason="scipy is the float64 reference")
@pytest.mark.parametrize("name", ["igamma", "igammac", "betainc", "bessel_i0e", "bessel_i1e",
                                  "zeta"])
def test_special_against_scipy_in_float64(name):
    n = 300
    if name in ("igamma", "igammac"):
        args = (RNG.uniform(0.01, 40, n), RNG.uniform(0, 50, n))
    elif name == "betainc":
        args = (RNG.uniform(0.05, 30, n), RNG.uniform(0.05, 30, n), RNG.uniform(0, 1, n))
    elif name == "zeta":
        args = (RNG.uniform(1.05, 20, n), RNG.uniform(0.05, 30, n))
    else:
        args = (RNG.uniform(-80, 80, n),)
    with nbjax.enable_x64():
        got = np.asarray(getattr(lax, name)(*args))
    assert got.dtype == np.float64
    assert_close(got, _scipy_reference()[name](*args), 1e-11)


def test_igamma_edges_and_derivatives():
    a = np.array([0.0, -1.0, 0.5, 2.0, 3.0, np.inf], np.float32)
    x = np.array([1.0, 1.0, 0.0, -1.0, np.inf, 1.0], np.float32)
    np.testing.assert_array_equal(lax.igamma(a, x), [1, np.nan, 0, np.nan, 1, np.nan])
    np.testing.assert_array_equal(lax.igammac(a, x), [0, np.nan, 1, np.nan, 0, np.nan])
    with nbjax.enable_x64():
        a64, x64 = np.array([0.7, 3.0, 12.0]), np.array([0.4, 5.0, 9.0])
        h = 1e-6
        numeric = (np.asarray(lax.igamma(a64 + h, x64))
                   - np.asarray(lax.igamma(a64 - h, x64))) / (2 * h)
        assert_close(lax.igamma_grad_a(a64, x64), numeric, 1e-7)
        # dx/da of a gamma sample: -P_a / P_x with P_x the gamma density
        density = np.exp((a64 - 1) * np.log(x64) - x64 - np.vectorize(math.lgamma)(a64))
        assert_close(lax.random_gamma_grad(a64, x64), -numeric / density, 1e-6)
        check_grads(lambda s, t: lax.igamma(s, t), (a64, x64), 1)
        check_grads(lambda s, t: lax.igammac(s, t), (a64, x64), 1)
        check_grads(lambda t: lax.betainc(1.5, 2.5, t), (np.array([0.2, 0.7]),), 1)
    with pytest.raises(ValueError, match="with respect to a and b"):
        nbjax.grad(lambda s: lax.betainc(s, 2.0, 0.3))(1.5)
    with pytest.raises(NotImplementedError):
        nbjax.grad(lambda s: lax.zeta(s, 2.0))(3.0)


def test_bessel_derivatives_and_batching():
    x = np.array([-3.0, -0.5, 0.7, 2.0, 35.0], np.float32)
    check_grads(lax.bessel_i0e, (x,), 2, rtol=2e-2)
    check_grads(lax.bessel_i1e, (x,), 1, rtol=2e-2)
    assert float(nbjax.grad(lax.bessel_i1e)(0.0)) == 0.5
    check_vmap(lambda a, t: lax.igamma(a, t),
               (np.abs(random_array(RNG, (4, 3))) + 0.5, np.abs(random_array(RNG, (3, 4)))),
               (0, 1))


def test_reduce_precision():
    x = np.array([1.0, 3.14159, 70000.0, 65519.0, 6.0e-5, -2.5e-5, np.nan, -np.inf], np.float32)
    half = np.array([1.0, 3.140625, np.inf, 65504.0, 0.0, -0.0, np.nan, -np.inf], np.float32)
    out = np.asarray(lax.reduce_precision(x, 5, 10))
    np.testing.assert_array_equal(out, half)  # float16 rounding, subnormals flushed
    assert np.signbit(out[5])
    bf16 = (x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) & 0xFFFF0000
    finite = np.isfinite(x)
    np.testing.assert_array_equal(lax.reduce_precision(x, 8, 7)[finite],
                                  bf16.view(np.float32)[finite])
    assert float(nbjax.grad(lambda v: lax.reduce_precision(v, 5, 2))(1.3)) == 1.0
    with pytest.raises(TypeError):
        lax.reduce_precision(np.arange(3), 5, 10)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64,
                                   np.uint64])
def test_mulhi_is_the_high_half(dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, 50, dtype=dtype, endpoint=True)
    y = RNG.integers(info.min, info.max, 50, dtype=dtype, endpoint=True)
    bits = info.bits
    want = [((int(a) * int(b)) >> bits) for a, b in zip(x, y)]
    want = np.array([w & ((1 << bits) - 1) for w in want], np.uint64).astype(
        np.dtype(f"u{bits // 8}")).view(dtype)
    with nbjax.enable_x64():
        np.testing.assert_array_equal(lax.mulhi(x, y), want)


@pytest.mark.skipif(jax is None, reason="JAX is the reference for these values")
def test_added_special_match_jax():
    a, x = np.abs(random_array(RNG, (50,))) * 5 + 0.1, np.abs(random_array(RNG, (50,))) * 5
    for name in ("igamma", "igammac", "igamma_grad_a", "random_gamma_grad"):
        assert_close(getattr(lax, name)(a, x), getattr(jlax, name)(a, x), 2e-5)
    assert_close(lax.bessel_i1e(x), jlax.bessel_i1e(x), 2e-6)
    assert_close(lax.reduce_precision(x * 1000, 4, 3), jlax.reduce_precision(x * 1000, 4, 3), 0)


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["digamma", "bessel_i0e", "bessel_i1e"])
def test_special_functions_compile_to_kernels(name, x64):
    """digamma and the scaled Bessel functions are one algorithm written on the kernel
    builder's ops (in float64): the eager impl runs it on NumPy arrays, compiled code in a
    kernel, with no step calling back into Python; the two agree but for the math library's
    last bits (exp, log, tan)."""
    import warnings
    from nbjax.backends import compile
    x = np.concatenate([RNG.uniform(-45, 45, 200), RNG.uniform(-2, 2, 100),
                        [0.0, -0.0, -1.0, -3.0, 30.0, 1e-30, np.inf, -np.inf, np.nan]])
    with nbjax.enable_x64(x64):
        x = x.astype(np.float64 if x64 else np.float32)
        fn = getattr(lax, name)
        cpu = compile(nbjax.make_jaxpr(fn)(x), "cpu", name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (got,) = cpu.run(x)
        want = np.asarray(fn(x))
    assert [g.kind for g in cpu.plan.groups] == ["kernel"]
    assert_close(got, want, 1e-12 if x64 else 1e-6, scale=1.0)

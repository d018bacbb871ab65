"""Batching, JVP and transpose rules of the structural primitives (broadcast_in_dim, reshape,
transpose, squeeze, rev, concatenate, pad; iota needs none): vmap against a Python loop,
derivatives against finite differences (forward and reverse, second order), and the jaxprs
the rules stage (no needless transposes, well typed)."""

import warnings

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.core import check_jaxpr, dtypes
from nbjax.test_util import check_grads
from helpers import assert_close, cpu_and_reference, random_array

rng = np.random.default_rng(0)
B = 3  # the batch size of every vmap test


def batched(x, axis):
    """B different random values like ``x``, stacked along ``axis`` (None: ``x`` itself)."""
    if axis is None:
        return x
    return np.stack([random_array(rng, (*np.shape(x),)) for _ in range(B)], axis)


def assert_vmap_matches_loop(f, args, in_axes, out_axes=0):
    """``vmap(f)`` on batched ``args`` equals stacking ``f`` over the batch in a loop."""
    out = nbjax.vmap(f, in_axes, out_axes)(*args)
    expected = [f(*[a if ax is None else np.take(a, i, ax) for a, ax in zip(args, in_axes)])
                for i in range(B)]
    assert_close(np.asarray(out), np.stack(expected, out_axes), rtol=1e-6)


def eqn_names(f, *args):
    closed = nbjax.make_jaxpr(f)(*args)
    check_jaxpr(closed.jaxpr)
    return [eqn.primitive.name for eqn in closed.jaxpr.eqns]


# (name, function, example arguments): every structural primitive, with params covering
# new axes, size-1 axes, permutations and negative/interior padding.
ONE_OPERAND = [
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)), (3, 1)),
    ("broadcast_in_dim_scalar", lambda x: lax.broadcast_in_dim(x, (2, 3), ()), ()),
    ("broadcast_in_dim_middle", lambda x: lax.broadcast_in_dim(x, (3, 2, 4), (0, 2)), (3, 4)),
    ("expand_dims", lambda x: lax.expand_dims(x, (0, 2)), (3, 4)),
    ("reshape", lambda x: lax.reshape(x, (2, 6)), (3, 4)),
    ("reshape_flatten", lambda x: lax.reshape(x, (12,)), (3, 4)),
    ("reshape_split", lambda x: lax.reshape(x, (3, 2, 2)), (3, 4)),
    ("reshape_dimensions", lambda x: lax.reshape(x, (2, 6), (1, 0)), (3, 4)),
    ("transpose", lambda x: lax.transpose(x, (2, 0, 1)), (2, 3, 4)),
    ("squeeze", lambda x: lax.squeeze(x, (1,)), (3, 1, 4)),
    ("squeeze_two", lambda x: lax.squeeze(x, (0, 2)), (1, 3, 1)),
    ("rev", lambda x: lax.rev(x, (0,)), (3, 4)),
    ("rev_both", lambda x: lax.rev(x, (0, 1)), (3, 4)),
    ("pad", lambda x: lax.pad(x, np.float32(0.5), ((1, 2, 1), (-1, 0, 0))), (3, 4)),
    ("pad_crop", lambda x: lax.pad(x, np.float32(0), ((-1, -1, 2), (0, 1, 0))), (3, 2)),
    ("tile", lambda x: lax.tile(x, (2, 1, 3)), (2, 1, 3)),
    ("split", lambda x: lax.split(x, (1, 0, 2), axis=1)[2] * 2 + lax.split(x, (1, 2), 1)[0],
     (2, 3)),
]


@pytest.mark.parametrize("name,f,shape", ONE_OPERAND, ids=[c[0] for c in ONE_OPERAND])
def test_one_operand_rules(name, f, shape):
    x = random_array(rng, shape)
    for axis in range(-1, len(shape) + 1):
        assert_vmap_matches_loop(f, (batched(x, axis),), (axis,))
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))
    check_jaxpr(nbjax.make_jaxpr(nbjax.grad(lambda x: (f(x) ** 2).sum()))(x).jaxpr)


TWO_OPERANDS = [
    ("concatenate_rows", lambda x, y: lax.concatenate([x, y], 0), (2, 3), (4, 3)),
    ("concatenate_cols", lambda x, y: lax.concatenate([x, y, x], 1), (2, 3), (2, 1)),
    ("pad_value", lambda x, v: lax.pad(x, v, ((1, 2, 1), (-1, 0, 0))), (3, 4), ()),
    ("pad_value_interior", lambda x, v: lax.pad(x, v, ((0, 0, 2),)), (3,), ()),
]
MIXED_AXES = [(0, 0), (1, 0), (-1, 0), (None, 0), (0, None), (1, None), (None, -1)]


@pytest.mark.parametrize("name,f,xshape,yshape", TWO_OPERANDS,
                         ids=[c[0] for c in TWO_OPERANDS])
def test_two_operand_rules(name, f, xshape, yshape):
    x, y = random_array(rng, xshape), random_array(rng, yshape)
    for in_axes in MIXED_AXES:
        if any(ax is not None and abs(ax) > len(s) for ax, s in zip(in_axes, (xshape, yshape))):
            continue
        assert_vmap_matches_loop(f, (batched(x, in_axes[0]), batched(y, in_axes[1])), in_axes)
    check_grads(f, (x, y), order=2, modes=("fwd", "rev"))
    check_grads(lambda x: f(x, y), (x,), order=2, modes=("fwd", "rev"))  # one linear operand
    check_grads(lambda y: f(x, y), (y,), order=2, modes=("fwd", "rev"))
    loss = lambda x, y: (f(x, y) ** 2).sum()
    check_jaxpr(nbjax.make_jaxpr(nbjax.grad(loss, (0, 1)))(x, y).jaxpr)


def test_pad_value_cotangent_is_the_sum_of_the_padding():
    """d/dv sum(pad(x, v)) counts the padded positions, cropped ones excluded."""
    x = random_array(rng, (3, 4))
    config = ((1, 2, 1), (-1, 0, 0))  # 3 -> 1 + 5 + 2 = 8 rows, 4 -> 3 columns
    gx, gv = nbjax.grad(lambda x, v: lax.pad(x, v, config).sum(), (0, 1))(x, np.float32(0))
    np.testing.assert_array_equal(gx, np.array([[0, 1, 1, 1]] * 3, np.float32))
    assert float(gv) == 8 * 3 - 3 * 3


def test_broadcast_in_dim_transpose_sums_copies():
    x = random_array(rng, (3, 1))
    g = nbjax.grad(lambda x: (lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)) * 1.5).sum())(x)
    assert_close(g, np.full((3, 1), 2 * 4 * 1.5), rtol=1e-6)


def test_out_axes_and_nested_vmap():
    x = random_array(rng, (B, 4, 5))
    f = lambda x: lax.transpose(lax.reshape(x, (5, 4)), (1, 0))
    for out_axes in (1, -1):
        assert_vmap_matches_loop(f, (x,), (0,), out_axes)
    xs = random_array(rng, (2, 4, B))  # vmap over axis 0, then (inside) over axis 1 of what is left
    g = lambda x: lax.pad(lax.rev(x, (0,)), np.float32(1), ((1, 0, 1),))
    nested = nbjax.vmap(nbjax.vmap(g, in_axes=1), in_axes=0)(xs)
    expected = np.stack([np.stack([g(xs[i, :, j]) for j in range(B)]) for i in range(2)])
    assert_close(nested, expected, rtol=1e-6)


def test_no_needless_transposes():
    x = random_array(rng, (B, 3, 4))
    # One transpose, permuting the batch axis along (JAX's jaxpr has the same one).
    closed = nbjax.make_jaxpr(nbjax.vmap(lambda x: lax.transpose(x, (1, 0))))(x)
    assert [str(e.params["permutation"]) for e in closed.jaxpr.eqns] == ["(0, 2, 1)"]
    # In axis 1, out axis 1: the batch axis is left in place by every other rule.
    xt = np.swapaxes(x, 0, 1)
    for f in [lambda x: lax.reshape(x, (3, 2, 2)), lambda x: lax.rev(x, (1,)),
              lambda x: lax.broadcast_in_dim(x, (3, 2, 4), (0, 2)),
              lambda x: lax.pad(x, np.float32(0), ((1, 1, 1), (0, 2, 0))),
              lambda x: lax.squeeze(lax.expand_dims(x, (1,)), (1,)),
              lambda x: lax.concatenate([x, x], 1)]:
        names = eqn_names(nbjax.vmap(f, in_axes=1, out_axes=1), xt)
        assert "transpose" not in names, names
    # A reshape keeps a last batch axis last; one that cannot keep the batch axis in place
    # brings it to the front as part of itself (its ``dimensions``).
    reshape = lambda x: lax.reshape(x, (2, 6))
    assert eqn_names(nbjax.vmap(reshape, 2, 2), np.moveaxis(x, 0, 2)) == ["reshape"]
    assert eqn_names(nbjax.vmap(reshape, 1, 0), xt) == ["reshape"]


def test_iota_under_vmap_and_jvp():
    """iota has no operands: vmap and jvp see it as a constant."""
    f = lambda x: x * lax.iota(np.float32, 4)
    x = random_array(rng, (B,))
    assert_close(nbjax.vmap(f)(x), x[:, None] * np.arange(4), rtol=1e-6)
    _, t = nbjax.jvp(f, (np.float32(2),), (np.float32(1),))
    assert_close(t, np.arange(4, dtype=np.float32))


def test_integer_operands_get_zero_tangents():
    i = np.arange(6, dtype=np.int32)
    f = lambda x, i: lax.reshape(lax.concatenate([i, i], 0), (3, 4)).astype(np.float32) * x
    _, pullback = nbjax.vjp(f, np.float32(2), i)
    gx, gi = pullback(np.ones((3, 4), np.float32))
    assert float(gx) == 2 * i.sum()
    assert np.asarray(gi).dtype == dtypes.float0 and np.asarray(gi).shape == (6,)


def test_grad_of_vmap_and_vmap_of_grad():
    x = random_array(rng, (B, 3, 4))
    f = lambda x: (lax.pad(lax.transpose(x, (1, 0)), np.float32(0), ((1, 0, 1), (0, 0, 0)))
                   ** 2).sum()
    per_example = nbjax.vmap(nbjax.grad(f))(x)
    assert_close(per_example, 2 * x, rtol=1e-6)
    assert_close(nbjax.grad(lambda x: nbjax.vmap(f)(x).sum())(x), 2 * x,
                 rtol=1e-6)


SPLIT_AND_TILE = [  # (name, lax function, its NumPy equivalent, operand shape)
    ("split", lambda x: lax.split(x, (1, 0, 3), axis=1),
     lambda x: np.split(x, [1, 1], axis=1), (2, 4)),
    ("tile", lambda x: lax.tile(x, (2, 3)), lambda x: np.tile(x, (2, 3)), (2, 3)),
    ("tile", lambda x: lax.tile(x, (1, 2, 1)), lambda x: np.tile(x, (1, 2, 1)), (3, 1, 2)),
]


@pytest.mark.parametrize("name,f,numpy_f,shape", SPLIT_AND_TILE)
def test_split_and_tile_are_one_equation_compiled_as_the_reference_computes(name, f, numpy_f,
                                                                            shape):
    """JAX's jaxprs show one ``split`` / ``tile`` equation; the cpu backend computes them
    (as slices, and as a kernel reading ``i % n``) with the reference's values."""
    x = random_array(rng, shape)
    assert [e.primitive.name for e in nbjax.make_jaxpr(f)(x).eqns] == [name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no step left to the reference backend
        compiled, reference = cpu_and_reference(f, x)
    expected = numpy_f(x)
    expected = expected if isinstance(expected, list) else [expected]
    for got, ref, want in zip(compiled.run(x), reference.run(x), expected, strict=True):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(ref, want)

"""Shape manipulation, joining, splitting, padding and selection, against NumPy."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import ConcretizationTypeError
from nbjax.numpy import padding
from nbjax.test_util import check_grads
from helpers import assert_close, check_vmap, random_array, staged

RNG = np.random.default_rng(1)
DTYPES = [np.bool_, np.int8, np.int32, np.uint8, np.float32, np.complex64]


def assert_same(got, want):
    """Equal values, shapes and (canonical 32-bit) dtypes; sequences compared item-wise."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    expected = want.dtype if want.dtype.itemsize <= 4 or want.dtype == np.complex64 else \
        {"f": np.float32, "i": np.int32, "u": np.uint32, "c": np.complex64}[want.dtype.kind]
    assert got.dtype == expected, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def check(f, *args, np_f=None, jit=True):
    """``f`` with jnp equals ``np_f`` (or ``f`` with np) eagerly and from its jaxpr."""
    want = (np_f or (lambda *a: f(np, *a)))(*args)
    assert_same(f(jnp, *args), want)
    if jit:
        assert_same(staged(lambda *a: f(jnp, *a), *args), want)


# Each case: (name, function of (module, x), input shape). Inputs are also tried transposed.
CASES = [
    ("reshape", lambda m, x: m.reshape(x, (2, -1)), (3, 4)),
    ("reshape_empty", lambda m, x: m.reshape(x, (4, 1, 0)), (0, 4)),
    ("ravel", lambda m, x: m.ravel(x), (3, 4)),
    ("reshape_F", lambda m, x: m.reshape(x, (4, 3, 1), order="F"), (2, 6)),
    ("ravel_F", lambda m, x: m.ravel(x, order="F"), (3, 4)),
    ("flatten_F", lambda m, x: x.flatten(order="F"), (2, 3, 2)),
    ("resize_empty", lambda m, x: m.resize(x, (2, 3)), (0,)),
    ("transpose", lambda m, x: m.transpose(x, (1, 2, 0)), (2, 3, 4)),
    ("transpose_default", lambda m, x: m.transpose(x), (2, 3, 4)),
    ("T", lambda m, x: x.T, (2, 3)),
    ("permute_dims", lambda m, x: m.permute_dims(x, (1, 0)), (2, 3)),
    ("matrix_transpose", lambda m, x: m.matrix_transpose(x), (2, 3, 4)),
    ("moveaxis", lambda m, x: m.moveaxis(x, (0, 1), (-1, 0)), (2, 3, 4)),
    ("swapaxes", lambda m, x: m.swapaxes(x, 0, -1), (2, 3, 4)),
    ("squeeze", lambda m, x: m.squeeze(x), (1, 3, 1)),
    ("squeeze_axis", lambda m, x: m.squeeze(x, -1), (1, 3, 1)),
    ("expand_dims", lambda m, x: m.expand_dims(x, (0, -1)), (2, 3)),
    ("broadcast_to", lambda m, x: m.broadcast_to(x, (2, 3, 4)), (3, 1)),
    ("atleast_1d", lambda m, x: m.atleast_1d(x), ()),
    ("atleast_2d", lambda m, x: m.atleast_2d(x), (3,)),
    ("atleast_3d", lambda m, x: m.atleast_3d(x), (2, 3)),
    ("atleast_3d_1d", lambda m, x: m.atleast_3d(x), (3,)),
    ("concatenate", lambda m, x: m.concatenate([x, x[:1]], axis=0), (2, 3)),
    ("concatenate_none", lambda m, x: m.concatenate([x, x], axis=None), (2, 3)),
    ("concatenate_empty", lambda m, x: m.concatenate([x, x], axis=1), (2, 0)),
    ("stack", lambda m, x: m.stack([x, x, x], axis=-1), (2, 3)),
    ("hstack", lambda m, x: m.hstack([x, x]), (2, 3)),
    ("hstack_1d", lambda m, x: m.hstack([x, x]), (3,)),
    ("vstack", lambda m, x: m.vstack([x, x]), (3,)),
    ("dstack", lambda m, x: m.dstack([x, x]), (2, 3)),
    ("column_stack", lambda m, x: m.column_stack([x, x]), (3,)),
    ("split", lambda m, x: m.split(x, 2, axis=1), (3, 4)),
    ("split_indices", lambda m, x: m.split(x, [1, 3, 5]), (5, 2)),
    ("split_indices_empty", lambda m, x: m.split(x, [0, 0, 2]), (5, 2)),
    ("array_split", lambda m, x: m.array_split(x, 3), (7,)),
    ("hsplit", lambda m, x: m.hsplit(x, [1]), (2, 3)),
    ("vsplit", lambda m, x: m.vsplit(x, 2), (4, 3)),
    ("dsplit", lambda m, x: m.dsplit(x, 2), (1, 2, 4)),
    ("tile", lambda m, x: m.tile(x, (2, 1, 3)), (2, 3)),
    ("tile_int", lambda m, x: m.tile(x, 2), (2, 3)),
    ("repeat", lambda m, x: m.repeat(x, 3, axis=1), (2, 3)),
    ("repeat_flat", lambda m, x: m.repeat(x, 2), (2, 3)),
    ("repeat_counts", lambda m, x: m.repeat(x, np.array([2, 0, 1]), axis=-1), (2, 3)),
    ("flip", lambda m, x: m.flip(x), (2, 3)),
    ("flip_axis", lambda m, x: m.flip(x, 1), (2, 3)),
    ("fliplr", lambda m, x: m.fliplr(x), (2, 3)),
    ("flipud", lambda m, x: m.flipud(x), (2, 3)),
    ("roll", lambda m, x: m.roll(x, 4), (2, 3)),
    ("roll_axes", lambda m, x: m.roll(x, (1, -4), (0, 1)), (2, 3)),
    ("roll_empty", lambda m, x: m.roll(x, 1, 0), (0, 3)),
    ("rot90", lambda m, x: m.rot90(x), (2, 3)),
    ("rot90_k", lambda m, x: m.rot90(x, -3, (1, 2)), (2, 3, 4)),
    ("rot90_2", lambda m, x: m.rot90(x, 2), (2, 3)),
    ("diag", lambda m, x: m.diag(x, 1), (3, 4)),
    ("diag_1d", lambda m, x: m.diag(x, -2), (3,)),
    ("diagflat", lambda m, x: m.diagflat(x), (2, 2)),
    ("diagonal", lambda m, x: m.diagonal(x), (3, 4)),
    ("diagonal_offset", lambda m, x: m.diagonal(x, -1, 2, 0), (3, 2, 4)),
    ("diagonal_past", lambda m, x: m.diagonal(x, 5), (3, 4)),
    ("tril", lambda m, x: m.tril(x), (3, 4)),
    ("tril_k", lambda m, x: m.tril(x, -1), (2, 3, 4)),
    ("triu", lambda m, x: m.triu(x, 2), (3, 4)),
    ("append", lambda m, x: m.append(x, x), (2, 3)),
    ("append_axis", lambda m, x: m.append(x, x[:1], axis=0), (2, 3)),
    ("delete", lambda m, x: m.delete(x, np.array([0, -1]), axis=1), (2, 4)),
    ("delete_slice", lambda m, x: m.delete(x, slice(None, None, 2)), (2, 3)),
    ("insert_scalar", lambda m, x: m.insert(x, 1, x[:, 0], axis=1), (2, 3)),
    ("insert_many", lambda m, x: m.insert(x, np.array([2, 0, 2]), x[0, 0]), (2, 3)),
    ("where", lambda m, x: m.where(x != 0, x, x[::-1]), (2, 3)),
    ("select", lambda m, x: m.select([x.real > 1, x.real < 0], [x, x * 2], 0), (2, 3)),
]


@pytest.mark.parametrize("name, f, shape", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_matches_numpy(name, f, shape, dtype):
    if dtype == np.int8 and name == "select":
        return
    check(f, random_array(RNG, shape, dtype, scale=3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["transpose", "concatenate", "roll_axes", "tril", "diag",
                                  "repeat_counts", "flip_axis", "insert_many", "where"])
def test_dtypes_and_non_contiguous(name, dtype):
    f, shape = {c[0]: (c[1], c[2]) for c in CASES}[name]
    base = random_array(RNG, shape[:-1] + (2 * shape[-1],), dtype, scale=3)
    check(f, base[..., ::2])  # a strided view
    if len(shape) == 2:
        transposed = np.ascontiguousarray(random_array(RNG, shape[::-1], dtype, scale=3)).T
        check(f, transposed)  # a transposed view


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap", "reflect", "symmetric"])
@pytest.mark.parametrize("widths", [2, (1, 3), ((0, 5), (7, 1))])
@pytest.mark.parametrize("shape", [(3, 2), (1, 4)])
def test_pad(mode, widths, shape):
    check(lambda m, x: m.pad(x, widths, mode=mode), random_array(RNG, shape, scale=3))


@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect", "symmetric"])
@pytest.mark.parametrize("widths", [(0, 1), (3, 3), (40, 2), (1, 60)])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_pad_modes_slice_or_gather_as_np_pad(mode, widths, n):
    """The gathering modes concatenate slices of the array where the padding makes a few
    runs of it (``padding.RUNS_MAX``) and gather where it makes more (a narrow axis padded
    many times over): both give NumPy's values."""
    x = random_array(RNG, (n, 3), np.float32, scale=3)
    check_pad(x, (widths, (1, 2)), mode)
    primitives = {e.primitive.name for e in nbjax.make_jaxpr(
        lambda a: jnp.pad(a, (widths, (0, 0)), mode))(x).jaxpr.eqns}
    source = getattr(padding, "_" + mode)(np.arange(-widths[0], n + widths[1]), n)
    assert ("gather" in primitives) == (len(padding._runs(source, None) or []) >
                                        padding.RUNS_MAX)


def test_pad_constant_values():
    x = random_array(RNG, (2, 3), np.int32, scale=3)
    check(lambda m, a: m.pad(a, ((1, 2), (2, 1)), constant_values=((1, 2), (3, 4))), x)
    check(lambda m, a: m.pad(a, 1, constant_values=7), x)
    assert_same(jnp.pad(jnp.asarray(x), 1, constant_values=jnp.int32(5)),
                np.pad(x, 1, constant_values=5))


def check_pad(x, pad_width, mode, **kwargs):
    """``jnp.pad`` equals ``np.pad`` (same dtype; floats to rounding), eagerly, from its
    jaxpr and jitted. An integer ramp may be 1 below NumPy's: JAX interpolates as
    ``start * (1 - t) + stop * t`` and floors, and that can fall an ulp short of an integer
    NumPy's ``start + i * step`` reaches (``test_pad_linear_ramp_is_jax_bit_for_bit``)."""
    want = np.pad(x, pad_width, mode, **kwargs)
    def f(a):
        return jnp.pad(a, pad_width, mode, **kwargs)
    floored = mode == "linear_ramp" and np.issubdtype(x.dtype, np.integer)
    for got in (f(x), staged(f, x), nbjax.jit(f)(x)):
        assert got.dtype == x.dtype, (got.dtype, x.dtype)
        if floored:
            np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1)
        else:
            assert_close(got, want, rtol=1e-6)


PAD_WIDTHS = [2, (1, 3), ((0, 4),), 7]  # 7: wider than the arrays (repeated reflections)


@pytest.mark.parametrize("mode", ["linear_ramp", "maximum", "minimum", "mean", "median"])
@pytest.mark.parametrize("pad_width", PAD_WIDTHS)
@pytest.mark.parametrize("shape", [(3, 2), (1, 4), (2, 1, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_pad_statistic_and_ramp_modes(mode, pad_width, shape, dtype):
    check_pad(random_array(RNG, shape, dtype, scale=3), pad_width, mode)


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
@pytest.mark.parametrize("pad_width", PAD_WIDTHS + [((9, 0), (1, 8))])
@pytest.mark.parametrize("shape", [(3, 2), (1, 4), (4, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint8, np.complex64])
def test_pad_odd_reflections(mode, pad_width, shape, dtype):
    check_pad(random_array(RNG, shape, dtype, scale=3), pad_width, mode, reflect_type="odd")


def test_pad_mode_options_in_every_form():
    x = random_array(RNG, (3, 4), np.float32, scale=3)
    for form in [5, (1, 3), ((2, 1),), ((1, 2), (3, 1))]:
        check_pad(x, (2, 3), "mean", stat_length=form)
        check_pad(x, (2, 3), "median", stat_length=form)
        check_pad(x, (2, 3), "linear_ramp", end_values=form)
        check_pad(x, (2, 3), "constant", constant_values=form)
    check_pad(x, 2, "maximum", stat_length=((1, 9), (2, 2)))  # longer than the axis: all of it
    check_pad(x, 2, "linear_ramp", end_values=jnp.asarray([[1.0, -1.0], [2.5, 0.0]]))


def test_pad_integers_round_statistics_and_ramps_down():
    x = np.array([1, 2, 4, 7], np.int32)
    check_pad(x, 3, "mean")  # 3.5 -> 4 (to even)
    check_pad(np.array([2, 3], np.int32), 1, "mean")  # 2.5 -> 2
    check_pad(np.array([1, 2, 5, 8], np.int32), 2, "median")
    check_pad(np.array([1, 10], np.int32), (3, 4), "linear_ramp", end_values=(0, -3))
    check_pad(np.array([True, False, False]), 2, "mean")


def test_pad_linear_ramp_is_jax_bit_for_bit():
    """The ramps are JAX's linspace values from a static end value (``pad_ramp``), floored
    for integers, eagerly and jitted: 1-D arrays (a scalar edge) and wider ones."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(7)
    cases = 0
    for shape in [(5,), (1,), (4, 3), (2, 3, 4)]:
        for dtype in [np.float32, np.int32, np.int8]:
            x = (rng.standard_normal(shape) * 50).astype(dtype)
            for pad_width, end_values in [(3, 0), ((2, 7), (1.5, -3)), (10, 100), (40, -2.25),
                                          (((1, 2),) + ((3, 35),) * (len(shape) - 1), 7)]:
                want = np.asarray(jax.numpy.pad(x, pad_width, "linear_ramp",
                                                end_values=end_values))
                def f(a):
                    return jnp.pad(a, pad_width, "linear_ramp", end_values=end_values)
                for got in (f(x), nbjax.jit(f)(x)):
                    assert got.dtype == want.dtype
                    np.testing.assert_array_equal(np.asarray(got), want)
                cases += 1
    assert cases == 60


def test_pad_empty_is_zeros_and_keeps_weak_types():
    x = random_array(RNG, (2, 3), np.float32)
    assert_same(jnp.pad(x, ((1, 0), (0, 2)), "empty"), np.pad(x, ((1, 0), (0, 2))))
    assert_same(jnp.pad(np.zeros((0, 2), np.int32), 1, "empty"), np.zeros((2, 4), np.int32))
    weak = jnp.asarray(3.0)[None]
    for mode, kwargs in [("mean", {}), ("linear_ramp", {}), ("empty", {}),
                         ("reflect", {"reflect_type": "odd"}), ("maximum", {})]:
        assert nbjax.core.get_aval(jnp.pad(weak, 1, mode, **kwargs)).weak_type, mode


def test_pad_leaves_0d_arrays_and_unpadded_empty_axes_alone():
    assert_same(jnp.pad(np.float32(3), 2, "mean"), np.float32(3))
    x = np.zeros((0, 3), np.float32)
    check_pad(x, ((0, 0), (1, 1)), "maximum")
    check_pad(x, ((0, 0), (1, 2)), "mean")


@pytest.mark.parametrize("mode, kwargs", [
    ("mean", {}), ("linear_ramp", {"end_values": (1.0, -2.0)}),
    ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"})])
def test_pad_gradients_and_batching(mode, kwargs):
    x = random_array(RNG, (3, 2), np.float32, scale=2)

    def f(a):
        return jnp.pad(a, ((2, 7), (1, 0)), mode, **kwargs)
    check_grads(lambda a: jnp.sum(jnp.sin(f(a))), (x,), order=1)
    check_vmap(f, (random_array(RNG, (4, 3, 2), np.float32),), (0,))
    check_vmap(f, (random_array(RNG, (3, 2, 4), np.float32),), (2,), 1)


def test_pad_gradient_of_traced_end_and_constant_values():
    x = random_array(RNG, (3,), np.float32)
    check_grads(lambda e: jnp.sum(jnp.pad(x, (3, 2), "linear_ramp", end_values=e) ** 2),
                (np.array([1.5, -0.5], np.float32),), order=1)
    check_grads(lambda c: jnp.sum(jnp.pad(x, (1, 2), constant_values=c) ** 2),
                (np.float32(0.7),), order=1)


@pytest.mark.parametrize("call, error, match", [
    (lambda: jnp.pad(jnp.ones(0), 1, mode="edge"), ValueError, "empty axis"),
    (lambda: jnp.pad(jnp.ones(0), 1, mode="mean"), ValueError, "empty axis"),
    (lambda: jnp.pad(jnp.ones((0, 2)), 1, mode="linear_ramp"), ValueError, "empty axis"),
    (lambda: jnp.pad(jnp.ones(3), 1, mode="mean", stat_length=0), ValueError, "stat_length"),
    (lambda: jnp.pad(jnp.ones(3), 1, mode="mean", stat_length=-1), ValueError, "negative"),
    (lambda: jnp.pad(jnp.ones(3), 1, mode="mean", stat_length=1.5), TypeError, "integer"),
    (lambda: jnp.pad(jnp.ones(3), -1), ValueError, "negative"),
    (lambda: jnp.pad(jnp.ones(2, bool), 1, mode="reflect", reflect_type="odd"), TypeError,
     "bool"),
    (lambda: jnp.pad(jnp.ones(2), 1, mode="reflect", reflect_type="bad"), ValueError,
     "reflect_type"),
    (lambda: jnp.pad(jnp.ones(2), 1, mode="edge", end_values=1), ValueError, "end_values"),
    (lambda: jnp.pad(jnp.ones(2), 1, mode="mean", constant_values=1), ValueError,
     "constant_values"),
    (lambda: jnp.pad(jnp.ones(2), 1, mode="sideways"), NotImplementedError, "sideways"),
    (lambda: jnp.pad(jnp.ones(2), ((1, 2, 3),)), ValueError, "pair"),
])
def test_pad_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_delete_with_a_boolean_mask():
    x = random_array(RNG, (3, 4), np.int32)
    mask = np.array([True, False, False, True])
    check(lambda m, a: m.delete(a, mask, axis=1), x)
    check(lambda m, a: m.delete(a, np.array([False, True, False]), axis=0), x)
    flat_mask = np.arange(12) % 5 == 0
    check(lambda m, a: m.delete(a, flat_mask), x)
    assert_same(jnp.delete(x, jnp.asarray(mask), axis=-1), np.delete(x, mask, axis=-1))
    assert_same(jnp.delete(x, np.ones(4, bool), axis=1), np.zeros((3, 0), np.int32))
    with pytest.raises(ValueError, match="length"):
        jnp.delete(x, np.array([True, False]), axis=1)
    with pytest.raises(ValueError, match="length"):
        jnp.delete(x, np.ones((1, 4), bool), axis=1)


def test_broadcast_arrays_and_shapes():
    a, b = random_array(RNG, (3, 1), scale=3), random_array(RNG, (1, 4), scale=3)
    assert_same(jnp.broadcast_arrays(a, b), np.broadcast_arrays(a, b))
    assert jnp.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        jnp.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError, match="Incompatible types for broadcasting"):
        jnp.broadcast_to(jnp.ones((2, 3)), (4, 3))
    with pytest.raises(ValueError, match="fewer dimensions"):
        jnp.broadcast_to(jnp.ones((2, 3)), (3,))


def test_where_promotes_and_broadcasts():
    cond = np.array([True, False, True])
    out = jnp.where(cond, 1, 2.5)
    assert out.dtype == np.float32 and out.weak_type
    assert_same(out, np.where(cond, 1, 2.5).astype(np.float32))
    x = random_array(RNG, (2, 1), np.int8, scale=3)
    assert_same(jnp.where(np.array([1, 0, 3]), x, np.int8(0)), np.where([1, 0, 3], x, 0))
    with pytest.raises(TypeError, match="where requires ndarray or scalar arguments"):
        jnp.where(cond, 1)  # (JAX's error: y is None)


def test_select_reads_non_boolean_conditions_as_nonzero():
    """JAX 0.10.2 takes them (``astype(bool)``) where NumPy raises a TypeError."""
    assert_same(jnp.select([jnp.array([1, 0])], [jnp.array([1, 2])], 5),
                np.array([1, 5], np.int32))


def test_trace():
    x = random_array(RNG, (3, 4), np.int8, scale=3)
    assert_same(jnp.trace(x), np.trace(x).astype(np.int32))
    y = random_array(RNG, (2, 3, 4), scale=3)
    assert_close(jnp.trace(y, 1, 1, 2), np.trace(y, 1, 1, 2), rtol=1e-5)


# --- nonzero and friends -------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5,), (2, 3), (0, 2)])
def test_nonzero_family_concrete(shape):
    mask = random_array(RNG, shape, scale=3) > 0
    x = mask.astype(np.int32) * random_array(RNG, shape, np.int32, scale=3)
    assert_same(jnp.nonzero(x), np.nonzero(x))
    assert_same(jnp.argwhere(x), np.argwhere(x))
    assert_same(jnp.flatnonzero(x), np.flatnonzero(x))
    assert_same(jnp.where(x), np.where(x))


def test_nonzero_with_size_under_tracing():
    x = np.array([[0, 3, 0], [4, 0, 5]], np.int32)

    def f(a):
        return jnp.nonzero(a, size=4, fill_value=-1)
    want = (np.array([0, 1, 1, -1]), np.array([1, 0, 2, -1]))
    assert_same(f(x), want)
    assert_same(staged(f, x), want)
    assert_same(jnp.argwhere(x, size=2), np.argwhere(x)[:2])
    with pytest.raises(ConcretizationTypeError, match="size argument"):
        nbjax.make_jaxpr(jnp.nonzero)(x)
    with pytest.raises(ValueError, match="0d"):
        jnp.nonzero(jnp.array(1))


def test_repeat_traced_counts_need_total_length():
    x = np.arange(3, dtype=np.float32)
    counts = np.array([1, 2, 0], np.int32)
    f = lambda a, r: jnp.repeat(a, r, total_repeat_length=5)  # noqa: E731
    # Past sum(counts) = 3, JAX repeats the last element.
    assert_same(staged(f, x, counts), np.array([0, 1, 1, 2, 2], np.float32))
    assert_same(f(x, counts), np.array([0, 1, 1, 2, 2], np.float32))
    assert_same(jnp.repeat(x, counts, total_repeat_length=2), np.array([0, 1], np.float32))
    with pytest.raises(ConcretizationTypeError, match="total_repeat_length"):
        nbjax.make_jaxpr(lambda a, r: jnp.repeat(a, r))(x, counts)


def test_traced_roll_shift():
    x = random_array(RNG, (2, 5), scale=3)
    for shift in (-7, 0, 3):
        out = staged(lambda a, s: jnp.roll(a, s, axis=1), x, np.int32(shift))
        assert_same(out, np.roll(x, shift, axis=1))


# --- errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, match", [
    (lambda: jnp.reshape(jnp.arange(3), (4,)), TypeError,
     r"cannot reshape array of shape \(3,\) \(size 3\) into shape \(4,\) \(size 4\)"),
    (lambda: jnp.reshape(jnp.arange(6), (4, -1)), TypeError, "evenly divide"),
    (lambda: jnp.reshape(jnp.arange(6), (-1, -1)), TypeError, "one unknown"),
    (lambda: jnp.reshape(jnp.arange(6), (2, 3), order="A"), NotImplementedError, "order='A'"),
    (lambda: jnp.ravel(jnp.arange(6), order="K"), NotImplementedError, "order='K'"),
    (lambda: jnp.reshape(jnp.arange(6), (2, 3), order="K"), ValueError, "order must be"),
    (lambda: jnp.squeeze(jnp.ones((2, 3)), 0), ValueError, "size not equal to one"),
    (lambda: jnp.expand_dims(jnp.ones(3), 3), ValueError, "out of bounds"),
    (lambda: jnp.moveaxis(jnp.ones((3, 4)), 0, 5), ValueError, "out of bounds"),
    # shape errors of lax's kind (TypeError) in JAX, where NumPy raises ValueError
    (lambda: jnp.transpose(jnp.ones((1, 3)), (0, 0)), TypeError, "permutation"),
    (lambda: jnp.flip(jnp.ones((1, 3)), (0, 0)), TypeError, "unique"),
    (lambda: jnp.concatenate([jnp.ones((2, 3)), jnp.ones((2, 2))]), TypeError, "differ"),
    (lambda: jnp.concatenate([jnp.ones((2, 3)), jnp.ones(3)]), TypeError, "numbers of dim"),
    (lambda: jnp.append(jnp.ones((2, 3)), 1.0, axis=0), TypeError, "numbers of dim"),
    (lambda: jnp.vstack([jnp.ones((2, 3)), jnp.ones((2, 2))]), TypeError, "differ"),
    (lambda: jnp.block([[jnp.ones((2, 2)), jnp.ones((1, 1))]]), TypeError, "differ"),
    (lambda: jnp.delete(jnp.ones(3), 1.0), ValueError, "integer"),
    (lambda: jnp.swapaxes(jnp.ones((1, 3)), 0, 2), ValueError, "out of bounds"),
    (lambda: jnp.stack([jnp.ones(2), jnp.ones(3)]), ValueError, "same shape"),
    (lambda: jnp.concatenate([jnp.ones(()), jnp.ones(())]), ValueError, "Zero-dimensional"),
    (lambda: jnp.split(jnp.ones(5), 2), ValueError, "equal division"),
    # JAX, unlike NumPy, takes no negative, decreasing or out-of-range cut
    (lambda: jnp.split(jnp.ones(5), [1, -1]), ValueError, "must be nonnegative"),
    (lambda: jnp.split(jnp.ones(5), [3, 2]), ValueError, "must be nonnegative"),
    (lambda: jnp.split(jnp.ones(5), [7]), ValueError, "must be nonnegative"),
    (lambda: jnp.tril(jnp.ones(3)), ValueError, "at least 2D"),
    (lambda: jnp.diag(jnp.ones((2, 2, 2))), ValueError, "1d or 2d"),
    (lambda: jnp.rot90(jnp.ones((2, 2)), axes=(0, 0)), ValueError, "different"),
    (lambda: jnp.matrix_transpose(jnp.ones(3)), ValueError, "two-dimensional"),
    (lambda: jnp.delete(jnp.ones(3), 5), IndexError, "out of bounds"),
    # lists are no arrays to JAX: the message names the argument as JAX's does
    (lambda: jnp.delete(jnp.ones(3), [0, 2]), TypeError,
     r"^delete requires ndarray or scalar arguments, got <class 'list'> at position 1\.$"),
    (lambda: jnp.insert(jnp.ones(3), (1,), 5.0), TypeError, "got <class 'tuple'> at position 1"),
    (lambda: jnp.insert(jnp.ones(3), 1, [5.0, 6.0]), TypeError, "got <class 'list'> at position 2"),
    (lambda: jnp.add(1.0, [2.0]), TypeError, "got <class 'list'> at position 1"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("trim", ["", "x"])
def test_trim_zeros_trims_nothing_without_f_or_b(trim):
    # an all-zero array once lost its zeros whatever ``trim`` said (JAX keeps them)
    np.testing.assert_array_equal(jnp.trim_zeros(jnp.zeros(2, np.int32), trim), [0, 0])
    np.testing.assert_array_equal(jnp.trim_zeros(jnp.asarray([0, 1, 0]), trim), [0, 1, 0])
    assert jnp.trim_zeros(jnp.zeros(2, np.int32), "f").shape == (0,)


def test_static_structural_ops_stage_without_gather():
    closed = nbjax.make_jaxpr(lambda a: jnp.flip(jnp.swapaxes(a.reshape(2, 6), 0, 1), 0))(
        np.ones((3, 4), np.float32))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["reshape", "transpose", "rev"]

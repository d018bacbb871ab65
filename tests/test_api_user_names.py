"""Top-level names a JAX program meets: ``ds`` (slices with a traced start),
``live_arrays`` and ``make_user_context``."""

import threading

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

X = np.arange(10.0, dtype=np.float32)
Y = np.arange(20.0, dtype=np.float32).reshape(4, 5)
XA, YA = jnp.asarray(X), jnp.asarray(Y)


def read_model(x, start, size, stride):
    """What ``x[ds(start, size, stride)]`` reads along axis 0: a unit stride wraps a
    negative start and moves the window to fit (dynamic_slice); another stride clamps each
    index on its own (a gather), without wrapping."""
    n = x.shape[0]
    if stride == 1:
        start = start + n if start < 0 else start
        start = min(max(start, 0), n - size)
        return x[start:start + size]
    return x[np.clip(start + stride * np.arange(size), 0, n - 1)]


def add_model(x, start, size, stride, value):
    """What ``x.at[ds(start, size, stride)].add(value)`` gives: the window is written whole,
    or dropped whole when it does not fit (no wrapping of negative starts); repeated
    coordinates (stride 0) accumulate."""
    n, out = x.shape[0], x.copy()
    idx = start + stride * np.arange(size)
    if stride == 1:
        if start >= 0 and start + size <= n:
            out[idx] += value
    else:
        keep = (idx >= 0) & (idx < n)
        np.add.at(out, idx[keep], value)
    return out


@pytest.mark.parametrize("stride", [0, 1, 2, 3])
@pytest.mark.parametrize("jitted", [False, True])
def test_ds_reads_and_writes_as_jax(stride, jitted):
    size = 3
    read = lambda x, i: x[nbjax.ds(i, size, stride)]  # noqa: E731
    add = lambda x, i: x.at[nbjax.ds(i, size, stride)].add(100.0)  # noqa: E731
    if jitted:
        read, add = nbjax.jit(read), nbjax.jit(add)
    for start in range(-12, 12):
        i = jnp.int32(start) if jitted else start
        np.testing.assert_array_equal(read(XA, i), read_model(X, start, size, stride))
        np.testing.assert_array_equal(add(XA, i), add_model(X, start, size, stride, 100.0))


def test_ds_beside_other_indices():
    i = jnp.int32(1)
    f = nbjax.jit(lambda y, i: (y[1, nbjax.ds(i, 2)], y[nbjax.ds(i, 2), 1:3],
                                y[None, nbjax.ds(i, 2), ..., nbjax.ds(2, 2)],
                                y[np.array([0, 2]), nbjax.ds(i, 2)]))
    a, b, c, d = f(YA, i)
    np.testing.assert_array_equal(a, Y[1, 1:3])
    np.testing.assert_array_equal(b, Y[1:3, 1:3])
    np.testing.assert_array_equal(c, Y[None, 1:3, 2:4])
    np.testing.assert_array_equal(d, Y[[0, 2], 1:3])
    set_rows = nbjax.jit(lambda y, i: y.at[nbjax.ds(i, 2), 0].set(-1.0))(YA, i)
    expected = Y.copy()
    expected[1:3, 0] = -1.0
    np.testing.assert_array_equal(set_rows, expected)


def test_ds_under_vmap_and_grad():
    starts = jnp.array([0, 3, 8], jnp.int32)
    rows = nbjax.vmap(lambda i: XA[nbjax.ds(i, 3)])(starts)
    np.testing.assert_array_equal(rows, [X[0:3], X[3:6], X[7:10]])
    g = nbjax.grad(lambda x, i: (x[nbjax.ds(i, 3)] ** 2).sum())(XA, jnp.int32(4))
    expected = np.zeros_like(X)
    expected[4:7] = 2 * X[4:7]
    np.testing.assert_allclose(g, expected)


def test_ds_forms_and_errors():
    assert nbjax.ds(None) == slice(None)
    assert repr(nbjax.ds(4)) == "Slice(start=0, size=4, stride=1)"
    assert repr(nbjax.ds(1, 4, 2)) == "Slice(start=1, size=4, stride=2)"
    np.testing.assert_array_equal(XA[nbjax.ds(4)], X[:4])
    with pytest.raises(TypeError, match="static integers"):
        nbjax.jit(lambda x, n: x[nbjax.ds(0, n)])(XA, 3)
    with pytest.raises(ValueError, match="stride >= 0"):
        nbjax.ds(0, 3, -1)
    with pytest.raises(TypeError):
        XA[nbjax.ds(jnp.float32(1.0), 2)]


def test_ds_matches_jax():
    jax = pytest.importorskip("jax")
    for stride in (1, 2):
        for start in (-4, 0, 8):
            ours = nbjax.jit(lambda x, i: x[nbjax.ds(i, 3, stride)])(XA, jnp.int32(start))
            theirs = jax.jit(lambda x, i: x[jax.ds(i, 3, stride)])(X, np.int32(start))
            np.testing.assert_array_equal(ours, theirs)


# Index expressions with a Slice whose start runs from -7 to 6 on a (4, 5) array: JAX counts
# a negative start from the end only where the whole index reads as a dynamic_slice, and
# ignores the start of a window as long as its axis; each is compared with JAX.
MIXED_INDICES = {
    "int and Slice": lambda d, y, i: y[1, d(i, 2)],
    "traced int and Slice": lambda d, y, i: y[i + 5, d(i, 2)],
    "two Slices": lambda d, y, i: y[d(i, 2), d(i, 3)],
    "None, Ellipsis": lambda d, y, i: y[None, ..., d(i, 2)],
    "reversed slice": lambda d, y, i: y[d(i, 2), ::-1],
    "strided slice": lambda d, y, i: y[d(i, 2), ::2],
    "integer array": lambda d, y, i: y[d(i, 2), np.array([0, 2])],
    "boolean mask": lambda d, y, i: y[np.array([True, False, True, True]), d(i, 2)],
    "strided Slice": lambda d, y, i: y[d(i, 2), d(i, 2, 2)],
    "get fill": lambda d, y, i: y.at[d(i, 2), 1].get(mode="fill", fill_value=-1),
    "get clip": lambda d, y, i: y.at[d(i, 2), 1].get(mode="clip"),
    "whole axis read": lambda d, y, i: y.at[d(i, 4)].get(mode="fill", fill_value=-1),
    "whole axis set": lambda d, y, i: y.at[d(i, 4), d(i, 2)].set(-1.0),
    "whole axis add": lambda d, y, i: y.at[1, d(i, 5)].add(1.0),
    "set with array": lambda d, y, i: y.at[np.array([0, 2]), d(i, 2)].set(-1.0),
}


@pytest.mark.parametrize("name", MIXED_INDICES)
def test_ds_start_rules_match_jax(name):
    jax = pytest.importorskip("jax")
    f = MIXED_INDICES[name]
    ours = nbjax.jit(lambda y, i: f(nbjax.ds, y, i))
    theirs = jax.jit(lambda y, i: f(jax.ds, y, i))
    for start in range(-7, 7):
        expected = np.asarray(theirs(Y, np.int32(start)))
        np.testing.assert_array_equal(ours(YA, jnp.int32(start)), expected)
        np.testing.assert_array_equal(f(nbjax.ds, YA, start), expected)


def test_slice_is_a_pytree_with_a_static_integer_start():
    """A Slice with a traced start crosses jit and vmap as JAX's does: the start is the leaf;
    an integer start is part of the structure, so a new one traces again."""
    static, traced = nbjax.ds(2, 3), nbjax.ds(jnp.int32(2), 3)
    assert nbjax.tree_util.tree_leaves(static) == []
    assert len(nbjax.tree_util.tree_leaves(traced)) == 1
    assert nbjax.tree_util.tree_unflatten(*reversed(nbjax.tree_util.tree_flatten(static))) \
        == static
    traces = []

    @nbjax.jit
    def read(x, s):
        traces.append(s.start)
        return x[s]

    for start in (1, 6):
        np.testing.assert_array_equal(read(XA, nbjax.ds(jnp.int32(start), 3)),
                                      X[start:start + 3])
    assert len(traces) == 1
    read(XA, nbjax.ds(1, 3))
    read(XA, nbjax.ds(2, 3))
    assert len(traces) == 3
    starts = jnp.array([0, 3, 8], jnp.int32)
    rows = nbjax.vmap(lambda s: XA[s])(nbjax.ds(starts, 3))
    np.testing.assert_array_equal(rows, [X[0:3], X[3:6], X[7:10]])


def test_slice_equality_and_from_slice_match_jax():
    jax = pytest.importorskip("jax")
    JaxSlice = type(jax.ds(0, 1))
    for args in [(1, 2), (1, 2, 1), (0, 3, 2)]:
        for other in [(1, 2), (1, 3), (0, 3, 2)]:
            assert (nbjax.ds(*args) == nbjax.ds(*other)) == (jax.ds(*args) == jax.ds(*other))
    for s in [slice(None), slice(2, 8), slice(-3, None), slice(1, 9, 3), slice(20, 30)]:
        ours, theirs = nbjax.numpy.indexing.Slice.from_slice(s, 10), JaxSlice.from_slice(s, 10)
        assert (ours.start, ours.size, ours.stride) == (theirs.start, theirs.size, theirs.stride)
    with pytest.raises(ValueError):
        nbjax.numpy.indexing.Slice.from_slice(slice(None, None, -1), 10)
    with pytest.raises(TypeError):
        hash(nbjax.ds(1, 2))


def test_live_arrays_lists_the_arrays_alive_now():
    before = {id(a) for a in nbjax.live_arrays()}
    a = jnp.arange(3.0)
    b = a * 2
    now = nbjax.live_arrays()
    assert any(x is a for x in now) and any(x is b for x in now)
    ids = {id(a), id(b)}
    del a, b, now
    assert not ids & ({id(x) for x in nbjax.live_arrays()} - before)
    assert all(isinstance(x, nbjax.Array) for x in nbjax.live_arrays("cpu"))
    with pytest.raises(RuntimeError, match="gpu"):
        nbjax.live_arrays("gpu")


def test_user_context_is_part_of_jits_cache_key():
    context = nbjax.make_user_context(default_value="plain")
    traces = []

    @nbjax.jit
    def f(x):
        traces.append(context.value)
        return x * 2

    f(1.0)
    with context("fast"):
        f(1.0)
        f(1.0)  # same value: the cache hits
        with context("slow"):
            f(1.0)
        f(1.0)
    f(1.0)
    assert traces == ["plain", "fast", "slow"]
    context.set_global("other")
    assert context.get_global() == "other" and context.value == "other"
    f(1.0)
    assert traces[-1] == "other"
    with pytest.raises(TypeError):
        with context([1, 2]):  # values are cache keys: they must be hashable
            pass


def test_user_context_value_is_per_thread():
    context = nbjax.make_user_context(default_value=0)
    seen = []
    with context(1):
        thread = threading.Thread(target=lambda: seen.append(context.value))
        thread.start()
        thread.join()
        seen.append(context.value)
    assert seen == [0, 1]

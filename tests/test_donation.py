"""Donated arguments (``jit(f, donate_argnums=...)``): JAX's semantics, and the cpu backend
writing outputs into the donated buffers only where that cannot change a number.

Semantics (checked against JAX 0.10 on the CPU): a donated array that an output of the same
shape and dtype can take is deleted by the call (using it raises RuntimeError); one that no
output can take is kept, with JAX's warning; an array donated and passed again in the same
call is a ValueError; static arguments cannot be donated. Under a transformation nothing is
donated (nbjax keeps the arguments alive: a transformation may need them later).

Reuse: every result is compared with the same jitted function without donation, on copies
of the same random inputs; the tests of reuse look at the data pointers of the results.
"""

import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends import compile
from nbjax.backends.cpu import buffer_plan, program_cache, runtime
from nbjax.compiler import donation
from nbjax.compiler.kernel import in_place_ok

from helpers import assert_close

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def pointer(x):
    """The address of an Array's data."""
    return np.asarray(x).ctypes.data


def same_as_undonated(f, donate_argnums, *args, calls=1, backend=None, rtol=1e-6):
    """Call ``jit(f, donate_argnums=...)`` ``calls`` times, feeding each call's results
    back as its donated arguments when ``calls > 1`` (a training loop), next to the
    undonated jit on copies; every result must agree. Returns the donated results."""
    plain = nbjax.jit(f, backend=backend)
    donating = nbjax.jit(f, donate_argnums=donate_argnums, backend=backend)
    copy = nbjax.tree_util.tree_map
    a = [copy(lambda v: jnp.asarray(np.array(v)), x) for x in args]
    b = [copy(lambda v: jnp.asarray(np.array(v)), x) for x in args]
    for _ in range(calls):
        want, got = plain(*a), donating(*b)
        for w, g in zip(nbjax.tree_util.tree_leaves(want), nbjax.tree_util.tree_leaves(got)):
            assert_close(np.asarray(g), np.asarray(w), rtol=rtol)
        if calls > 1:
            a[0], b[0] = want, got
    return got


# --- semantics -----------------------------------------------------------------------------

def test_a_donated_array_is_deleted_and_using_it_raises():
    f = nbjax.jit(lambda x, y: x + y, donate_argnums=0)
    x, y = jnp.asarray(rand(3)), jnp.asarray(rand(3))
    expected = np.asarray(x) + np.asarray(y)
    out = f(x, y)
    assert_close(out, expected)
    assert x.is_deleted() and not y.is_deleted()
    assert x.shape == (3,) and x.dtype == np.float32  # the type remains
    for use in (lambda: x + 1, lambda: np.asarray(x), lambda: f(x, y),
                lambda: nbjax.jit(lambda a: a * 2)(x), lambda: x.block_until_ready()):
        with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[3\]"):
            use()


def test_array_delete_as_jax():
    x = jnp.ones(2)
    x.delete()
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        x.tolist()


def test_every_leaf_of_a_donated_pytree_is_deleted():
    step = nbjax.jit(lambda p, g: {k: [a - b for a, b in zip(p[k], g[k])] for k in p},
                     donate_argnums=0)
    params = {"a": [jnp.asarray(rand(2)), jnp.asarray(rand(3))], "b": [jnp.asarray(rand(4))]}
    grads = {"a": [jnp.ones(2), jnp.ones(3)], "b": [jnp.ones(4)]}
    want = {k: [np.asarray(a) - 1 for a in v] for k, v in params.items()}
    out = step(params, grads)
    assert all(a.is_deleted() for v in params.values() for a in v)
    assert not any(a.is_deleted() for v in grads.values() for a in v)
    for k in want:
        for got, w in zip(out[k], want[k]):
            assert_close(got, w)


def test_donate_argnames_and_a_donated_argument_passed_by_keyword():
    by_name = nbjax.jit(lambda x, y: x * y, donate_argnames="y")
    x, y = jnp.ones(3), jnp.full(3, 2.0)
    by_name(x, y)
    assert y.is_deleted() and not x.is_deleted()
    by_number = nbjax.jit(lambda x, y: x * y, donate_argnums=1)
    x, y = jnp.ones(3), jnp.full(3, 2.0)
    assert_close(by_number(x, y=y), np.full(3, 2.0))
    assert y.is_deleted()


def test_static_arguments_cannot_be_donated():
    with pytest.raises(ValueError, match="static_argnames and donate_argnames cannot "
                                         "intersect"):
        nbjax.jit(lambda x, n: x * n, static_argnums=1, donate_argnums=1)
    with pytest.raises(ValueError, match=r"donate_argnums=\(3,\), but only accepts 1"):
        nbjax.jit(lambda x: x, donate_argnums=3)
    with pytest.raises(ValueError, match="invalid argnames {'z'} in donate_argnames"):
        nbjax.jit(lambda x: x, donate_argnames="z")


def test_an_array_donated_and_passed_again_is_an_error():
    f = nbjax.jit(lambda x, y: x * y, donate_argnums=0)
    x = jnp.ones(3)
    with pytest.raises(ValueError, match="previously donated in the same call"):
        f(x, x)
    assert not x.is_deleted()


def test_a_donation_no_output_can_take_warns_once_and_keeps_the_array():
    total = nbjax.jit(lambda x: x.sum(), donate_argnums=0)
    x = jnp.ones(3)
    with pytest.warns(UserWarning, match=r"Some donated buffers were not usable: float32\[3\]"):
        assert float(total(x)) == 3.0
    assert not x.is_deleted()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total(x)  # the same signature: no second warning


def test_a_call_that_fails_still_deletes_what_it_was_given():
    def f(x):
        y = x * 2.0
        nbjax.debug.callback(lambda v: 1 / 0, y)  # raises while the program runs
        return y

    g = nbjax.jit(f, donate_argnums=0)
    x = jnp.ones(3)
    with pytest.raises(nbjax.errors.JaxRuntimeError, match="ZeroDivisionError"):
        g(x)  # (JAX's error for a callback failing in a compiled program)
    assert x.is_deleted()


def test_python_scalars_and_numpy_arrays_can_be_donated():
    f = nbjax.jit(lambda x: x + 1, donate_argnums=0)
    assert float(f(1.0)) == 2.0
    user = np.ones(3, np.float32)
    assert_close(f(user), np.full(3, 2.0))
    assert_close(user, np.ones(3))  # NumPy arrays are copied in: the caller's stays


def test_nothing_is_donated_under_vmap_or_grad():
    f = nbjax.jit(lambda x, y: x * y, donate_argnums=0)
    x, y = jnp.asarray(rand(4, 3)), jnp.asarray(rand(4, 3))
    assert_close(nbjax.vmap(f)(x, y), np.asarray(x) * np.asarray(y))
    g = nbjax.grad(lambda y: f(x, y).sum())(y)
    assert_close(g, np.asarray(x))  # the backward pass needs x: it must still be there
    assert not x.is_deleted() and not y.is_deleted()


def test_the_reference_backend_deletes_and_computes_the_same():
    out = same_as_undonated(lambda x, y: x * 2 + y, 0, rand(5), rand(5), calls=3,
                            backend="reference")
    assert out.shape == (5,)
    f = nbjax.jit(lambda x: x + 1, donate_argnums=0, backend="reference")
    x = jnp.ones(2)
    f(x)
    assert x.is_deleted()


# --- results equal the undonated call ------------------------------------------------------

def test_element_wise_update_loop():
    same_as_undonated(lambda x, y: jnp.tanh(x) * 0.5 + y, 0, rand(64, 33), rand(64, 33),
                      calls=4)


def test_matrix_products():
    same_as_undonated(lambda x, w: jnp.maximum(x @ w, 0.0) - x, 0, rand(48, 48), rand(48, 48),
                      calls=3, rtol=1e-5)
    same_as_undonated(lambda x, w: (x @ w, x.T @ w), (0, 1), rand(16, 16), rand(16, 16))


def test_loops_carrying_the_donated_value():
    same_as_undonated(lambda x: lax.fori_loop(0, 7, lambda i, c: c * 0.9 + jnp.sin(c), x), 0,
                      rand(40), calls=3)
    same_as_undonated(lambda x, xs: lax.scan(lambda c, r: (c * r + 1.0, c.sum()), x, xs), 0,
                      rand(8), rand(5, 8))
    same_as_undonated(lambda x, xs: lax.scan(lambda c, r: (c * r + 1.0, None), x, xs)[0], 0,
                      rand(8), rand(5, 8), calls=3)


def test_gradient_step():
    def loss(p, x, y):
        h = jnp.tanh(x @ p["w"] + p["b"])
        return ((h - y) ** 2).mean()

    def step(p, x, y):
        g = nbjax.grad(loss)(p, x, y)
        return nbjax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

    params = {"w": rand(8, 4), "b": rand(4)}
    same_as_undonated(step, 0, params, rand(16, 8), rand(16, 4), calls=4, rtol=1e-5)


# --- reuse of the donated buffers (the cpu backend) ----------------------------------------

pytestmark_cpu = pytest.mark.cpu_compiler


@pytestmark_cpu
@pytest.mark.parametrize("shape", [(300, 300), (2048, 1024)])
def test_an_element_wise_update_writes_into_the_donated_buffer(shape):
    # (2048, 1024): 2^21 elements, split between the cores; 8 MiB written: streaming stores
    f = nbjax.jit(lambda x, y: x * 0.5 + y, donate_argnums=0, backend="cpu")
    x0, y = rand(*shape), jnp.asarray(rand(*shape))
    x = jnp.asarray(x0)
    where = pointer(x)
    for _ in range(3):
        x = f(x, y)
        assert pointer(x) == where
    expected = x0
    for _ in range(3):
        expected = expected * np.float32(0.5) + np.asarray(y)
    assert_close(x, expected, rtol=1e-6)


@pytestmark_cpu
def test_a_training_step_keeps_its_parameter_buffers():
    def step(p, x):
        g = nbjax.grad(lambda p: jnp.tanh(x @ p["w"] + p["b"]).sum())(p)
        return {k: p[k] - 0.01 * g[k] for k in p}

    f = nbjax.jit(step, donate_argnums=0, backend="cpu")
    params = {"w": jnp.asarray(rand(128, 128)), "b": jnp.asarray(rand(128))}
    x = jnp.asarray(rand(32, 128))
    where = {k: pointer(v) for k, v in params.items()}
    reference = {k: np.array(v) for k, v in params.items()}  # (copies: nothing held)
    plain = nbjax.jit(step, backend="cpu")
    for _ in range(3):
        params = f(params, x)
        reference = plain(reference, x)
    assert {k: pointer(v) for k, v in params.items()} == where
    for k in params:
        assert_close(params[k], reference[k], rtol=1e-5)


@pytestmark_cpu
def test_an_output_written_after_the_inputs_last_read_takes_its_buffer():
    f = nbjax.jit(lambda x, w: jnp.tanh(x @ w) * 2.0, donate_argnums=0, backend="cpu")
    x0, w = rand(64, 64), jnp.asarray(rand(64, 64))
    x = jnp.asarray(x0)
    where = pointer(x)
    out = f(x, w)
    assert pointer(out) == where
    assert_close(out, np.tanh(x0 @ np.asarray(w)) * 2, rtol=1e-5)


@pytestmark_cpu
def test_no_reuse_when_the_input_is_read_after_the_output_is_written():
    # ``o``, the first output that fits x, is computed first; x is read again after the
    # product, by the kernel computing z.
    def f(x, w):
        o = x * 2.0
        return o, (o @ w) + x

    x0, w = rand(32, 32), rand(32, 32)
    x = jnp.asarray(x0)
    where = pointer(x)
    o, z = nbjax.jit(f, donate_argnums=0, backend="cpu")(x, jnp.asarray(w))
    assert x.is_deleted()
    assert_close(o, x0 * 2)
    assert_close(z, (x0 * 2) @ w + x0, rtol=1e-5)
    assert pointer(o) != where and pointer(z) == where
    executable = compile(nbjax.make_jaxpr(f)(x0, w), "cpu")
    j = executable.jaxpr.jaxpr
    assert donation.match([v.aval for v in j.invars], {0}, [v.aval for v in j.outvars]) == {0: 0}
    # not output 0 (written first), but the last kernel, which reads x where it writes z
    assert buffer_plan.donations(j, executable.plan.groups, {0}) == {0: (1, True)}


@pytestmark_cpu
def test_a_kernel_reading_the_input_at_other_indices_is_not_in_place():
    for g in (lambda x: x + x[::-1], lambda x: x + x.T, lambda x: x + jnp.roll(x, 1, axis=1)):
        closed = nbjax.make_jaxpr(g)(rand(16, 16))
        executable = compile(closed, "cpu")
        x, (out,) = executable.jaxpr.jaxpr.invars[0], executable.jaxpr.jaxpr.outvars
        (loop,) = [s.kernel for s in executable.plan.groups
                   if s.kind == "kernel" and s.kernel.outputs[0].var is out]
        assert not in_place_ok(loop, loop.inputs.index(x), 0)
        out = same_as_undonated(g, 0, rand(16, 16), backend="cpu")
        assert out.shape == (16, 16)
    # reading it through a view (the reshape feeds two kernels) at other indices too
    def through_a_view(x):
        flat = x.reshape(256)
        total = flat.sum()
        return x * 2.0 + flat[::-1].reshape(16, 16), total
    executable = compile(nbjax.make_jaxpr(through_a_view)(rand(16, 16)), "cpu")
    assert "view" in [g.kind for g in executable.plan.groups]
    assert buffer_plan.donations(executable.jaxpr.jaxpr, executable.plan.groups, {0}) == {}
    same_as_undonated(through_a_view, 0, rand(16, 16), backend="cpu")
    closed = nbjax.make_jaxpr(lambda x: x * 3.0 + 1.0)(rand(16, 16))
    (group,) = compile(closed, "cpu").plan.groups
    assert in_place_ok(group.kernel, 0, 0)
    # a reduction of x in an earlier kernel, then x updated element-wise: in place
    scaled = nbjax.jit(lambda x: x / x.sum(axis=0), donate_argnums=0, backend="cpu")
    x0 = rand(128, 128)
    x = jnp.asarray(x0)
    where = pointer(x)
    out = scaled(x)
    assert pointer(out) == where
    assert_close(out, x0 / x0.sum(axis=0), rtol=1e-5)


@pytestmark_cpu
def test_a_buffer_someone_else_holds_is_never_overwritten():
    f = nbjax.jit(lambda x: x * 3.0, donate_argnums=0, backend="cpu")
    x0 = rand(200, 200)
    x = jnp.asarray(x0)
    held = np.asarray(x)  # the user keeps the data
    view = np.asarray(x)[1:]
    assert not runtime.private(x)
    out = f(x)
    assert x.is_deleted()
    np.testing.assert_array_equal(held, x0)
    np.testing.assert_array_equal(view, x0[1:])
    assert pointer(out) != held.ctypes.data
    assert_close(out, x0 * 3)
    # two Arrays sharing one buffer (an output passed through)
    a = nbjax.jit(lambda x: x, backend="cpu")(out)
    assert not runtime.private(out) and not runtime.private(a)
    f(out)
    assert_close(a, x0 * 3)


@pytestmark_cpu
def test_private_arrays():
    x = jnp.asarray(rand(100, 100))
    assert runtime.private(x)
    big = nbjax.jit(lambda x: x * 2, backend="cpu")(jnp.ones((512, 512)))  # a pooled buffer
    assert runtime.private(big)
    view = np.asarray(big)[3]
    assert not runtime.private(big)
    del view
    assert runtime.private(big)
    frozen = np.ones(3, np.float32)
    frozen.flags.writeable = False
    assert not runtime.private(nbjax.core.Array(frozen))  # shares the caller's read-only array


@pytestmark_cpu
def test_the_program_cache_key_includes_the_donated_inputs():
    closed = nbjax.make_jaxpr(lambda x: x + 1)(rand(4))
    key = program_cache.key(closed)
    if key is None:
        pytest.skip("no disk cache here")
    assert program_cache.key(closed, frozenset({0})) not in (None, key)


@pytestmark_cpu
def test_the_buffer_goes_to_an_output_that_can_take_it():
    # x fits both outputs; the first is written before x's last read, the second in place
    f = nbjax.jit(lambda x, w: (jnp.tanh(x @ w) * 2.0, x * 3.0 - 1.0), donate_argnums=0,
                  backend="cpu")
    x0, w = rand(64, 64), rand(64, 64)
    x = jnp.asarray(x0)
    where = pointer(x)
    a, b = f(x, jnp.asarray(w))
    assert pointer(b) == where
    assert_close(a, np.tanh(x0 @ w) * 2, rtol=1e-5)
    assert_close(b, x0 * 3 - 1, rtol=1e-6)


def test_donation_on_the_fast_path():
    # after the first call of a signature, calls take the dispatch fast path: the same
    # semantics, and the same buffer
    f = nbjax.jit(lambda x, y: x + y, donate_argnums=0)
    y = jnp.ones(4)
    x = f(jnp.zeros(4), y)
    slow = f.slow_path_calls
    for n in range(2, 5):
        old = x
        x = f(x, y)
        assert old.is_deleted()
        with pytest.raises(RuntimeError, match="deleted"):
            f(old, y)
    assert_close(x, np.full(4, 4.0))
    with pytest.raises(ValueError, match="previously donated"):
        f(x, x)
    assert not x.is_deleted()
    assert f.slow_path_calls == slow


def test_an_array_the_function_closes_over_is_not_deleted():
    c = jnp.asarray(rand(3))
    f = nbjax.jit(lambda x: x + c, donate_argnums=0)
    for _ in range(2):  # general path, then fast path
        out = f(c)
        assert not c.is_deleted()
        assert_close(out, np.asarray(c) * 2)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_ahead_of_time_calls_donate_as_eager_ones(backend):
    """``jit(f, donate_argnums=...).lower(...).compile()``: each call deletes the donated
    arrays (as JAX's Compiled does), computes what the undonated program does, and writes
    into the donated buffer where the eager call would; misuse raises as it does."""
    f = nbjax.jit(lambda p, g: p - 0.1 * g, donate_argnums=0, backend=backend)
    g = jnp.asarray(rand(4096))
    p = jnp.asarray(rand(4096)) * 1.0
    compiled = f.lower(p, g).compile()
    for _ in range(3):
        expected, where = np.asarray(p) - np.float32(0.1) * np.asarray(g), pointer(p)
        out = compiled(p, g)
        assert p.is_deleted() and not g.is_deleted()
        assert_close(out, expected)
        assert (pointer(out) == where) == (backend == "cpu")
        with pytest.raises(RuntimeError, match="deleted"):
            compiled(p, g)
        p = out
    with pytest.raises(ValueError, match="previously donated"):
        compiled(p, p)
    assert not p.is_deleted()


def test_ahead_of_time_compilation_warns_of_an_unusable_donation():
    f = nbjax.jit(lambda a, b: a.sum(), donate_argnums=1)
    with pytest.warns(UserWarning, match=r"donated buffers were not usable: float32\[4\]"):
        compiled = f.lower(jnp.ones(3), jnp.ones(4)).compile()
    b = jnp.ones(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compiled(jnp.ones(3), b) == 3.0
    assert not b.is_deleted()  # (nothing could take it: it stays)

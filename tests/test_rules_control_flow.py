"""Transformation rules of the control-flow primitives: vmap, JVP and transpose of cond and
switch, while, scan (and fori_loop / map, written with them), and stop_gradient.

vmap results are compared with a Python loop over the batch members; derivatives with
finite differences (check_grads), in forward and reverse mode, to second order.
"""

import functools

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.core import check_jaxpr, dtypes
from nbjax.test_util import check_grads
import helpers
from helpers import assert_close, random_array

# Loops of float32 steps: the batched and the per-member loop may round differently.
check_vmap = functools.partial(helpers.check_vmap, rtol=1e-5)

rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def fresh_rng():
    """The same inputs for a test however the tests are selected or ordered."""
    global rng
    rng = np.random.default_rng(0)


def jaxpr_primitives(closed):
    """Names of the primitives of a jaxpr's equations, sub-jaxprs included."""
    names = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.append(eqn.primitive.name)
            for value in eqn.params.values():
                for v in value if isinstance(value, tuple) else (value,):
                    if hasattr(v, "jaxpr"):
                        walk(v.jaxpr)
    walk(closed.jaxpr)
    return names


# --- vmap ----------------------------------------------------------------------------------

def two_way(p, x, y):
    """A cond whose branches batch differently: y may be unbatched in one, batched in the
    other, so the cond's outputs must be batched for both."""
    return lax.cond(p, lambda x, y: (jnp.sin(x) * y, y), lambda x, y: (x - y, x), x, y)


@pytest.mark.parametrize("in_axes", [(0, 0, None), (None, 0, None), (0, None, None),
                                     (None, 1, 0), (0, -1, -1), (None, None, 0)])
def test_vmap_cond(in_axes):
    shapes = {(0, 0, None): [(4,), (4, 3), (3,)], (None, 0, None): [(), (4, 3), (3,)],
              (0, None, None): [(4,), (3,), (3,)], (None, 1, 0): [(), (3, 4), (4, 3)],
              (0, -1, -1): [(4,), (3, 4), (3, 4)], (None, None, 0): [(), (3,), (4, 3)]}
    p_shape, x_shape, y_shape = shapes[in_axes]
    for p_value in (True, False):
        p = rng.random(p_shape) < 0.5 if p_shape else np.bool_(p_value)
        check_vmap(two_way, (p, random_array(rng, x_shape), random_array(rng, y_shape)), in_axes)


@pytest.mark.parametrize("in_axes", [(0, 0, None), (None, 0, 0), (0, None, None)])
def test_vmap_switch(in_axes):
    branches = [lambda x, y: x * y, lambda x, y: jnp.sin(x) + 1.0, lambda x, y: y - x]
    f = lambda i, x, y: lax.switch(i, branches, x, y)
    index = np.array([0, 1, 2, -1, 7], np.int32) if in_axes[0] == 0 else np.int32(2)
    x = random_array(rng, (5, 3)) if in_axes[1] == 0 else random_array(rng, (3,))
    y = random_array(rng, (5, 3)) if in_axes[2] == 0 else random_array(rng, (3,))
    check_vmap(f, (index, x, y), in_axes)


def test_vmap_cond_batched_predicate_is_a_select():
    """With a predicate per batch member both branches run and select_n picks, as in JAX;
    with one predicate the cond stays."""
    f = lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x)
    batched = nbjax.make_jaxpr(nbjax.vmap(f))(np.array([True, False]), random_array(rng, (2, 3)))
    assert "cond" not in jaxpr_primitives(batched)
    assert "select_n" in jaxpr_primitives(batched)
    unbatched = nbjax.make_jaxpr(nbjax.vmap(f, (None, 0)))(True, random_array(rng, (2, 3)))
    assert jaxpr_primitives(unbatched).count("cond") == 1
    assert "select_n" not in jaxpr_primitives(unbatched)


def count_to(n, x):
    """A while loop whose trip count is n (a different one per batch member if batched)."""
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5 + jnp.sin(c[1])),
                          (0, x))


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0), (None, 1)])
def test_vmap_while(in_axes):
    n = np.array([0, 3, 1, 2], np.int32) if in_axes[0] == 0 else np.int32(2)
    x = random_array(rng, {0: (4, 3), None: (3,), 1: (3, 4)}[in_axes[1]])
    check_vmap(count_to, (n, x), in_axes)


def test_vmap_while_carry_batched_by_body():
    """The initial carry is unbatched, but the body adds a batched value: the carry is
    batched from the start (the fixed point)."""
    def f(w):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + w), (0, 1.0))
    check_vmap(f, (random_array(rng, (4,)),), (0,))
    jaxpr = nbjax.make_jaxpr(nbjax.vmap(f))(random_array(rng, (4,)))
    assert "reduce_or" not in jaxpr_primitives(jaxpr)  # the predicate stays unbatched


def test_vmap_while_nested():
    f = nbjax.vmap(nbjax.vmap(count_to, (0, 0)), (None, 1))
    n, x = np.array([1, 0, 2], np.int32), random_array(rng, (3, 2, 4))
    got = f(n, x)
    for j in range(2):
        for i in range(3):
            want = count_to(n[i], x[i, j])
            assert_close(got[1][j, i], want[1], rtol=1e-6)
            assert got[0][j, i] == want[0]


def rnn(c, xs, w):
    return lax.scan(lambda c, x: (jnp.tanh(c * w + x), c + x), c, xs)


@pytest.mark.parametrize("in_axes,shapes", [
    ((None, None, 0), [(3,), (5, 3), (4, 3)]),    # batched const: carry batched by the body
    ((0, None, None), [(4, 3), (5, 3), (3,)]),    # batched carry
    ((None, 1, None), [(3,), (5, 4, 3), (3,)]),   # batched xs, already after the scan axis
    ((None, 0, None), [(3,), (4, 5, 3), (3,)]),   # batched xs at the scan axis
    ((-1, -1, -1), [(3, 4), (5, 3, 4), (3, 4)]),
])
def test_vmap_scan(in_axes, shapes):
    check_vmap(rnn, [random_array(rng, s) for s in shapes], in_axes)


def test_vmap_scan_out_axes_reverse_and_nested():
    f = lambda c, xs: lax.scan(lambda c, x: (c * x, c - x), c, xs, reverse=True)
    check_vmap(f, (random_array(rng, (4, 3)), random_array(rng, (5, 4, 3))), (0, 1), out_axes=1)
    c, xs = random_array(rng, (2, 4)), random_array(rng, (5, 2, 3, 4))
    got = nbjax.vmap(nbjax.vmap(f, (None, 1)), (0, 1))(c, xs)
    for i in range(2):
        for j in range(3):
            want = f(c[i], xs[:, i, j])
            assert_close(got[0][i, j], want[0], rtol=1e-6)
            assert_close(got[1][i, j], want[1], rtol=1e-6)


def test_vmap_scan_keeps_batch_axis_after_scan_axis():
    """Scanned operands batched at axis 1 are scanned as they are: no transpose."""
    jaxpr = nbjax.make_jaxpr(nbjax.vmap(rnn, (None, 1, None), out_axes=(0, 1)))(
        random_array(rng, (3,)), random_array(rng, (5, 4, 3)), random_array(rng, (3,)))
    assert "transpose" not in jaxpr_primitives(jaxpr)


def test_vmap_map_and_fori_loop():
    check_vmap(lambda xs: lax.map(jnp.sin, xs), (random_array(rng, (3, 4)),), (1,))
    check_vmap(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0 + i, x),
               (random_array(rng, (4, 2)),), (0,))
    check_vmap(lambda n, x: lax.fori_loop(0, n, lambda i, c: c * 2.0, x),
               (np.array([0, 2, 1], np.int32), random_array(rng, (3, 2))), (0, 0))


def test_stop_gradient_rules():
    check_vmap(lambda x: lax.stop_gradient(x) * 2.0, (random_array(rng, (3, 2)),), (1,))
    f = lambda x: jnp.sum(x * lax.stop_gradient(x))
    x = random_array(rng, (3,))
    assert_close(nbjax.grad(f)(x), x, rtol=1e-6)
    _, t = nbjax.jvp(lax.stop_gradient, (x,), (np.ones(3, np.float32),))
    np.testing.assert_array_equal(t, np.zeros(3, np.float32))


# --- autodiff ------------------------------------------------------------------------------

def check_grads_both(f, *args):
    """Second order, both modes. In float32 a central difference with eps=1e-4 carries a
    rounding error of about 2**-24 / 1e-4 ~ 6e-4 times the function's scale, and at second
    order the function differenced is itself computed in float32, so the default 2e-3 fails
    at random points for correct rules: 1e-2 it is. (Exact comparisons with unrolled loops,
    in float64, are below.)"""
    check_grads(f, args, order=2, modes=("fwd", "rev"), atol=1e-2, rtol=1e-2)


def small(*shape):
    """Inputs for loops that multiply by them at each step: kept small so that derivatives
    stay moderate and float32 finite differences accurate."""
    return random_array(rng, shape) * 0.5


@pytest.mark.parametrize("pred", [True, False])
def test_grads_cond(pred):
    f = lambda x, y: lax.cond(pred, lambda x, y: jnp.sin(x) * y, lambda x, y: x - y * y, x, y)
    check_grads_both(f, random_array(rng, (3,)), random_array(rng, (3,)))


def cond_with_integers(x, y):
    """A cond with a branch that ignores an operand, an integer operand and output."""
    return lax.cond(jnp.sum(x) > 0, lambda x, y, k: (x * x, k + 1), lambda x, y, k: (y, k),
                    x, y, np.int32(3))


def test_grads_cond_unused_and_integer_operands():
    for x in (np.abs(random_array(rng, (3,))) + 0.1, -np.abs(random_array(rng, (3,))) - 0.1):
        check_grads_both(lambda x, y: cond_with_integers(x, y)[0] * 2.0, x,
                         random_array(rng, (3,)))
        primals = (x, random_array(rng, (3,)))
        tangents = (random_array(rng, (3,)), random_array(rng, (3,)))
        (_, k), (_, kt) = nbjax.jvp(cond_with_integers, primals, tangents)
        assert kt.dtype == dtypes.float0 and kt.shape == ()
        ct_x, ct_y = nbjax.grad(lambda x, y: jnp.sum(cond_with_integers(x, y)[0]), (0, 1))(x, x)
        assert_close(ct_x + ct_y, 2 * x if x[0] > 0 else np.ones(3), rtol=1e-6)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_grads_switch(index):
    branches = [lambda x, y: x * y, lambda x, y: jnp.sin(x), lambda x, y: y - 1.0]
    check_grads_both(lambda x, y: lax.switch(index, branches, x, y), random_array(rng, (3,)),
                     random_array(rng, (3,)))


def test_grad_cond_closing_over_outer_values():
    w = random_array(rng, (3,))

    def f(x, w):
        return jnp.sum(lax.cond(jnp.sum(x) > 0, lambda x: x * w, lambda x: jnp.sin(w) + x, x))
    x = np.abs(random_array(rng, (3,)))
    assert_close(nbjax.grad(f, argnums=1)(x, w), x, rtol=1e-6)
    assert_close(nbjax.grad(f, argnums=1)(-x, w), np.cos(w), rtol=1e-6)
    check_grads_both(f, x, w)


def scan_fn(x, xs):
    return lax.scan(lambda c, a: (c * a + jnp.sin(c), c), x, xs)


def test_grads_scan():
    check_grads_both(scan_fn, random_array(rng, (3,)), small(4, 3))


def test_grads_scan_reverse_and_closure():
    def f(c, xs, w):
        return lax.scan(lambda c, x: (jnp.tanh(c * w) + x, jnp.sin(c) * w), c, xs, reverse=True)
    check_grads_both(f, random_array(rng, (3,)), random_array(rng, (4, 3)), small(3))


def test_grad_scan_of_closed_over_value():
    """d/dw of sum_t xs[t] * w, accumulated in a carry that starts at a constant: the
    carry's tangent is zero initially and nonzero after one step (the fixed point)."""
    xs = random_array(rng, (5,))

    def f(w):
        return lax.scan(lambda c, x: (c + x * w, ()), 0.0, xs)[0]
    terms = np.abs(xs).sum()
    assert_close(nbjax.grad(f)(np.float32(2.0)), xs.sum(), rtol=1e-5, scale=terms)
    assert_close(nbjax.jvp(f, (np.float32(2.0),), (np.float32(1.0),))[1],
                 xs.sum(), rtol=1e-5, scale=terms)


def test_grads_fori_loop_static_and_map():
    check_grads_both(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 1.1 + jnp.sin(c), x),
                     small(3))
    check_grads_both(lambda x: lax.fori_loop(2, 4, lambda i, c: c + jnp.cos(c) * i, x),
                     random_array(rng, (3,)))
    check_grads_both(lambda xs: lax.map(lambda x: jnp.sin(x) * x, xs), random_array(rng, (4, 2)))


def test_grads_nested_control_flow():
    def f(x, xs):
        def body(c, a):
            c = lax.cond(jnp.sum(a) > 0, lambda c: c * a, lambda c: jnp.sin(c) + a, c)
            inner = lax.scan(lambda d, b: (d * b, d), c, xs)[0]
            return inner, c
        return lax.scan(body, x, xs)
    check_grads_both(f, random_array(rng, (3,)), small(4, 3))


def test_grad_scan_matches_unrolled_loop():
    x, xs = random_array(rng, (3,)), random_array(rng, (4, 3))

    def unrolled(x, *rows):
        c, total = x, 0.0
        for a in rows:
            total = total + jnp.sum(c * c)
            c = c * a + jnp.sin(c)
        return jnp.sum(c) + total

    def scanned(x, xs):
        c, ys = scan_fn(x, xs)
        return jnp.sum(c) + jnp.sum(ys * ys)
    got_x, got_xs = nbjax.grad(scanned, (0, 1))(x, xs)
    want = nbjax.grad(unrolled, tuple(range(5)))(x, *xs)
    assert_close(got_x, want[0], rtol=1e-5)
    assert_close(got_xs, np.stack(want[1:]), rtol=1e-5)


def test_grad_scan_jaxpr():
    """make_jaxpr(grad(f)) type-checks and has two scans, as JAX's: a forward scan computing
    the primal values and stacking residuals, and a reverse scan of the transposed body."""
    f = lambda x, xs: jnp.sum(scan_fn(x, xs)[0])
    closed = nbjax.make_jaxpr(nbjax.grad(f))(random_array(rng, (3,)), random_array(rng, (4, 3)))
    check_jaxpr(closed.jaxpr)
    scans = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert [e.params["reverse"] for e in scans] == [False, True]
    check_jaxpr(nbjax.make_jaxpr(lambda x, xs: nbjax.jvp(f, (x, xs), (x, xs)))(
        random_array(rng, (3,)), random_array(rng, (4, 3))).jaxpr)


@pytest.mark.parametrize("how", ["value_and_grad", "grad"])
def test_grad_scan_stacks_no_loop_invariant_residual(how):
    """The forward scan of a recurrence's gradient stacks per-iteration values only: the
    weights (a const of the body) and their transpose (computed from consts only) are
    passed to the backward scan once, and x_t (an xs) as it is, not stacked again as JAX
    does; the gradient still matches the unrolled loop's."""
    w, u = random_array(rng, (5, 5)) * 0.4, random_array(rng, (3, 5)) * 0.4
    h, xs = random_array(rng, (2, 5)), random_array(rng, (6, 2, 3))

    def loss(w, u, h, xs):
        def step(h, x):
            h = jnp.tanh(h @ w.T + x @ u)
            return h, jnp.sum(h * h)
        h, ys = lax.scan(step, h, xs)
        return jnp.sum(ys) + jnp.sum(h)

    def unrolled(w, u, h, xs):
        total = 0.0
        for x in xs:
            h = jnp.tanh(h @ w.T + x @ u)
            total = total + jnp.sum(h * h)
        return total + jnp.sum(h)

    transform = getattr(nbjax, how)
    closed = nbjax.make_jaxpr(transform(loss, argnums=(0, 1)))(w, u, h, xs)
    check_jaxpr(closed.jaxpr)
    forward = next(e for e in closed.jaxpr.eqns if e.primitive.name == "scan")
    stacked = [v.aval.shape[1:] for v in forward.outvars[forward.params["num_carry"]:]]
    assert stacked and all(shape in ((), h.shape) for shape in stacked), stacked  # ys: ()
    got = transform(loss, argnums=(0, 1))(w, u, h, xs)
    want = transform(unrolled, argnums=(0, 1))(w, u, h, xs)
    for g, e in zip(nbjax.tree_util.tree_leaves(got), nbjax.tree_util.tree_leaves(want)):
        assert_close(g, e, rtol=1e-5)


def test_grad_of_a_recurrence_transforms_its_body_once_per_rule(monkeypatch):
    """A carry that starts at zero (an LSTM's state) gets a nonzero tangent, an unknown
    value and a linear one through the body: the fixed points of scan's JVP, partial
    evaluation and transpose start from what the body's equations propagate, so each
    transforms the body once. Carries only a counter or stop_gradient reach stay known
    and zero, and the gradient still matches the unrolled loop's."""
    from nbjax.interpreters import ad, partial_eval
    calls = []
    for module, name in [(ad, "jvp_jaxpr"), (partial_eval, "partial_eval_jaxpr")]:
        def counted(*args, _original=getattr(module, name), _name=name, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)
    w = random_array(rng, (4, 4)) * 0.5

    def loss(w, xs, unroll=False):
        def step(carry, x):
            h, c, steps, seen = carry
            c = jnp.tanh(h @ w) + c * x
            return (c * 0.5, c, steps + 1, lax.stop_gradient(seen + h)), jnp.sum(h)
        init = (jnp.zeros(4), jnp.zeros(4), 0, jnp.zeros(4))
        if unroll:
            carry = init
            for x in xs:
                carry, y = step(carry, x)
            return jnp.sum(carry[0]) + jnp.sum(carry[3])
        carry, ys = lax.scan(step, init, xs)
        return jnp.sum(carry[0]) + jnp.sum(carry[3])

    xs = random_array(rng, (5, 4))
    closed = nbjax.make_jaxpr(nbjax.grad(loss))(w, xs)
    assert calls == ["jvp_jaxpr", "partial_eval_jaxpr", "partial_eval_jaxpr"]
    backward = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"][1]
    assert backward.params["num_carry"] == 1 + 2  # w's cotangent; those of h and c
    assert_close(nbjax.grad(loss)(w, xs), nbjax.grad(loss)(w, xs, True), rtol=1e-5)


def test_per_example_gradients_through_scan():
    w = random_array(rng, (3,)) * 0.5

    inputs = random_array(rng, (2, 3))

    def loss(x, w):
        c, ys = lax.scan(lambda c, a: (jnp.tanh(c * w + a * x), c * a), x, inputs)
        return jnp.sum(c) + jnp.sum(ys)
    xs = random_array(rng, (4, 3))
    got = nbjax.vmap(nbjax.grad(loss, argnums=1), (0, None))(xs, w)
    want = np.stack([nbjax.grad(loss, argnums=1)(x, w) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got = nbjax.vmap(nbjax.grad(loss), (0, None))(xs, w)
    want = np.stack([nbjax.grad(loss)(x, w) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_per_example_gradients_through_cond():
    f = lambda x: jnp.sum(lax.cond(jnp.sum(x) > 0, jnp.sin, lambda x: x * x, x))
    xs = random_array(rng, (5, 3))
    got = nbjax.vmap(nbjax.grad(f))(xs)
    want = np.stack([nbjax.grad(f)(x) for x in xs])
    assert_close(got, want, rtol=1e-6)


def test_forward_mode_while():
    check_grads(lambda x: count_to(4, x)[1], (random_array(rng, (3,)),), order=2, modes=("fwd",))
    check_grads(lambda x, w: lax.while_loop(
        lambda c: c[1][0] < 10.0, lambda c: (c[0] * w, c[1] + 1.0), (x, x))[0],
        (random_array(rng, (3,)), random_array(rng, (3,))), order=2, modes=("fwd",))


def test_linearize_and_vmap_of_jvp_through_while():
    x, t = random_array(rng, (3,)), random_array(rng, (3,))
    f = lambda x: count_to(3, x)[1]
    out, f_jvp = nbjax.linearize(f, x)
    want_out, want_t = nbjax.jvp(f, (x,), (t,))
    assert_close(out, want_out, rtol=1e-6)
    assert_close(f_jvp(t), want_t, rtol=1e-6)
    n, xs, ts = np.array([0, 2, 1], np.int32), random_array(rng, (3, 3)), random_array(rng, (3, 3))
    g = lambda n, x, t: nbjax.jvp(lambda x: count_to(n, x)[1], (x,), (t,))
    check_vmap(g, (n, xs, ts), (0, 0, 0))


def test_reverse_mode_while_raises():
    message = "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop"
    with pytest.raises(ValueError, match=message):
        nbjax.grad(lambda x: jnp.sum(count_to(3, x)[1]))(random_array(rng, (3,)))
    with pytest.raises(ValueError, match=message):
        # Under make_jaxpr the bound n is traced: the fori_loop is a while loop.
        nbjax.make_jaxpr(nbjax.grad(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * 2.0, x)))(
            np.float32(1.0), np.int32(3))


def test_second_order_scan_matches_unrolled_loop_exactly(x64):
    """Every second-order combination of modes through a reverse scan with a closed-over
    weight agrees to rounding with the same loop unrolled in Python (float64)."""
    weights = np.arange(1.0, 13.0).reshape(4, 3) / 10
    xs = np.random.default_rng(1).standard_normal((4, 3))

    def scanned(c, w):
        c, ys = lax.scan(lambda c, x: (jnp.tanh(c * w) + x, jnp.sin(c) * w), c, xs,
                         reverse=True)
        return jnp.sum(c * c) + jnp.sum(ys * weights)

    def unrolled(c, w):
        total = 0.0
        for i in reversed(range(len(xs))):
            total = total + jnp.sum(jnp.sin(c) * w * weights[i])
            c = jnp.tanh(c * w) + xs[i]
        return jnp.sum(c * c) + total

    t = (np.ones(3), np.full(3, 0.7))
    second_orders = [
        lambda f: nbjax.jvp(lambda c, w: nbjax.jvp(f, (c, w), t)[1], args, t)[1],
        lambda f: nbjax.grad(lambda c, w: sum(jnp.sum(g) for g in nbjax.grad(f, (0, 1))(c, w)),
                             (0, 1))(*args),
        lambda f: nbjax.jvp(nbjax.grad(f, (0, 1)), args, t)[1],
        lambda f: nbjax.grad(lambda c, w: nbjax.jvp(f, (c, w), t)[1], (0, 1))(*args),
    ]
    args = (np.random.default_rng(2).standard_normal(3),
            np.random.default_rng(3).standard_normal(3))
    for second_order in second_orders:
        got = nbjax.tree_util.tree_leaves(second_order(scanned))
        want = nbjax.tree_util.tree_leaves(second_order(unrolled))
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.float64
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)

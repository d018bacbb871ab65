"""Control flow: cond/switch, while_loop, fori_loop, scan, map, stop_gradient.

Eager results are compared with the plain Python loop or ``if`` they stand for, on random
inputs; every function is also traced with make_jaxpr, type-checked and re-evaluated.
"""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.core import JaxprTypeError, UnexpectedTracerError, check_jaxpr, eval_jaxpr
from nbjax.core.errors import TracerBoolConversionError
from nbjax.tree_util import tree_leaves
from helpers import assert_close, random_array, staged

rng = np.random.default_rng(0)


def assert_tree_close(got, want, rtol=1e-6):
    got_leaves, got_tree = nbjax.tree_util.tree_flatten(got)
    want_leaves, want_tree = nbjax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        assert_close(np.asarray(g), np.asarray(w), rtol=rtol)


def traced(f, *args):
    """Trace f, check its jaxpr, evaluate it, and compare with running f eagerly."""
    outs, eager = staged(f, *args), f(*args)
    for o, e in zip(tree_leaves(outs), tree_leaves(eager), strict=True):
        assert o.dtype == e.dtype and o.shape == e.shape
        assert_close(np.asarray(o), np.asarray(e), rtol=1e-6)
    return nbjax.make_jaxpr(f)(*args)


def primitives(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


# --- cond ----------------------------------------------------------------------------------

@pytest.mark.parametrize("pred", [True, False, 0, 3, -2.5, 0.0, np.bool_(True),
                                  np.int8(0), np.float32(1)])
def test_cond_eager_matches_python_if(pred):
    x = random_array(rng, (3,))
    got = lax.cond(pred, lambda a: a * 2.0 + 1.0, lambda a: a - 3.0, x)
    want = x * 2 + 1 if pred else x - 3
    assert_tree_close(got, want.astype(np.float32))


@pytest.mark.parametrize("pred", [True, False])
def test_cond_traced_predicate(pred):
    x, y = random_array(rng, (2, 3)), random_array(rng, (3,))

    def f(p, x, y):
        return lax.cond(p, lambda a, b: a + b, lambda a, b: a * b, x, y)
    closed = traced(f, pred, x, y)
    assert primitives(closed) == ["convert_element_type", "cond"]
    branches = closed.jaxpr.eqns[1].params["branches"]
    assert [b.jaxpr.eqns[-1].primitive.name for b in branches] == ["mul", "add"]  # false first
    want = x + y if pred else x * y
    assert_close(eval_jaxpr(closed.jaxpr, closed.consts, pred, x, y)[0], want)


def test_cond_numeric_predicate_is_compared_with_zero():
    closed = traced(lambda p, x: lax.cond(p, lambda a: -a, lambda a: a, x), 0.5,
                    random_array(rng, (2,)))
    assert primitives(closed) == ["ne", "convert_element_type", "cond"]
    for p in (0.0, 2.0, -1.0):
        x = random_array(rng, (2,))
        out = eval_jaxpr(closed.jaxpr, closed.consts, np.float32(p), x)[0]
        assert_close(out, -x if p else x)


def test_cond_pytree_operands_and_outputs():
    ops = {"a": random_array(rng, (3,)), "b": (random_array(rng, (2,)), np.int32(4))}

    def true_fun(d):
        return {"sum": d["a"].sum() + d["b"][0].sum(), "n": d["b"][1] + 1}

    def false_fun(d):
        return {"sum": d["a"][0] * 0.0, "n": d["b"][1] * 2}
    for pred in (True, False):
        got = lax.cond(pred, true_fun, false_fun, ops)
        want = true_fun(ops) if pred else false_fun(ops)
        assert set(got) == {"sum", "n"}
        assert_tree_close(got, want, rtol=1e-5)
    traced(lambda p, d: lax.cond(p, true_fun, false_fun, d), True, ops)


def test_cond_without_operands_and_closures_over_arrays():
    w = jnp.asarray(random_array(rng, (4,)))
    got = lax.cond(False, lambda: w * 2.0, lambda: w + 1.0)
    assert_close(got, w + 1)
    closed = traced(lambda p: lax.cond(p, lambda: w * 2.0, lambda: w + 1.0), True)
    # the closed-over array is a constvar of the outer jaxpr, passed to cond as an operand
    assert len(closed.jaxpr.constvars) == 1
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "cond"]
    assert eqn.invars[1] is closed.jaxpr.constvars[0]
    for branch in eqn.params["branches"]:
        assert branch.consts == [] and branch.jaxpr.constvars == []


def test_cond_closure_over_traced_values():
    x, y = random_array(rng, (3,)), random_array(rng, (3,))

    def f(p, x, y):
        return lax.cond(p, lambda: x * y, lambda: x - y)
    closed = traced(f, True, x, y)
    eqn = closed.jaxpr.eqns[-1]
    assert eqn.invars[1:] == closed.jaxpr.invars[1:]  # x and y hoisted into operands
    # each branch takes both hoisted values, even the one it does not use
    for branch in eqn.params["branches"]:
        assert len(branch.jaxpr.invars) == 2
    assert_close(eval_jaxpr(closed.jaxpr, [], False, x, y)[0], x - y)


@pytest.mark.parametrize("jitted", [False, True])
def test_cond_and_switch_take_one_operand_by_keyword_as_jax_did(jitted):
    """JAX's older form ``operand=x`` (one operand), still accepted; not with others."""
    wrap = nbjax.jit if jitted else (lambda f: f)
    x = random_array(rng, (3,))
    got = wrap(lambda p, x: lax.cond(p, lambda v: v * 2.0, lambda v: v - 1.0, operand=x))
    assert_close(got(True, x), x * 2)
    assert_close(got(False, x), x - 1)
    got = wrap(lambda i, x: lax.switch(i, [jnp.sin, jnp.cos], operand=x))
    assert_close(got(1, x), np.cos(x), rtol=1e-6)
    with pytest.raises(TypeError, match="if 'operand' keyword is passed then no positional "
                                        "operands can be passed, got operand=1.0 and "
                                        r"positional operands \(2.0,\)"):
        lax.cond(True, lambda v: v, lambda v: v, 2.0, operand=1.0)
    with pytest.raises(TypeError, match="no positional operands"):
        lax.switch(0, [lambda v: v], 2.0, operand=1.0)


def test_cond_output_type_comes_from_the_false_branch():
    # JAX types the result like branches[0] (false_fun), weak types included
    out = lax.cond(True, lambda: np.float32(1), lambda: 2.0)
    assert out.dtype == np.float32 and out.weak_type and float(out) == 1.0
    out = lax.cond(True, lambda: 1.0, lambda: np.float32(2))
    assert not out.weak_type and float(out) == 1.0


def test_cond_does_not_freeze_a_users_array():
    a = np.ones(3, np.float32)
    out = lax.cond(True, lambda x: x, lambda x: x, a)
    a[0] = 5.0  # still writeable, and the result kept its own copy
    assert_close(out, [1, 1, 1])


@pytest.mark.parametrize("true_fun, false_fun, match", [
    (lambda: 1.0, lambda: (1.0, 2.0), "same pytree structure"),
    (lambda: 1.0, lambda: 1, "dtypes do not match"),
    (lambda: np.ones(2), lambda: np.ones(3), "shapes do not match"),
    (lambda: np.ones(2, np.int32), lambda: np.ones(3), "dtypes do not match, and the shapes"),
    (lambda: (1.0, 2), lambda: (1.0, 2.0), "output of true_fun at leaf 1 has type int32"),
])
def test_cond_mismatched_branches(true_fun, false_fun, match):
    with pytest.raises(TypeError, match=match):
        lax.cond(True, true_fun, false_fun)


@pytest.mark.parametrize("pred, match", [
    (np.ones(2) > 0, "Pred must be a scalar"),
    ("yes", "Pred type must be either boolean or number"),
    (1j, "Pred type must be either boolean or number, got complex64"),
])
def test_cond_bad_predicates(pred, match):
    with pytest.raises(TypeError, match=match):
        lax.cond(pred, lambda: 1.0, lambda: 2.0)


def test_cond_non_callable():
    with pytest.raises(TypeError, match="should be callable"):
        lax.cond(True, 1.0, lambda: 2.0)


def test_python_if_on_a_traced_value_inside_a_branch():
    def branch(x):
        if x > 0:
            return x
        return -x
    with pytest.raises(TracerBoolConversionError, match="lax.cond"):
        lax.cond(True, branch, branch, np.float32(1))


# --- switch --------------------------------------------------------------------------------

BRANCHES = [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: x - 3.0]


@pytest.mark.parametrize("index", [-5, 0, 1, 2, 7, np.uint8(1), np.int64(2)])
def test_switch_clamps_the_index(index):
    x = random_array(rng, (3,))
    want = BRANCHES[min(max(int(index), 0), 2)](x)
    assert_close(lax.switch(index, BRANCHES, x), want)


def test_switch_traced():
    closed = traced(lambda i, x: lax.switch(i, BRANCHES, x), 1, random_array(rng, (2,)))
    assert primitives(closed) == ["convert_element_type", "clamp", "cond"]
    assert len(closed.jaxpr.eqns[-1].params["branches"]) == 3
    x = random_array(rng, (2,))
    for i in range(-1, 4):
        out = eval_jaxpr(closed.jaxpr, [], np.int32(i), x)[0]
        assert_close(out, BRANCHES[min(max(i, 0), 2)](x))


def test_switch_with_one_branch_calls_it():
    closed = nbjax.make_jaxpr(lambda i, x: lax.switch(i, [lambda a: a * 2.0], x))(0, 1.0)
    assert primitives(closed) == ["mul"]


@pytest.mark.parametrize("index, branches, error, match", [
    (1.0, BRANCHES, TypeError, "Index type must be an integer"),
    (np.ones(2, np.int32), BRANCHES, TypeError, "Branch index must be scalar"),
    (0, [], ValueError, "Empty branch sequence"),
    (0, [BRANCHES[0], 3], TypeError, "sequence of callables"),
    (0, [lambda x: x, lambda x: x[:1]], TypeError, "branch 0 has type float32.3. but the "
                                                    "corresponding output of branch 1"),
])
def test_switch_errors(index, branches, error, match):
    with pytest.raises(error, match=match):
        lax.switch(index, branches, np.ones(3, np.float32))


# --- while_loop ----------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [0.5, 10.0, 1000.0])
def test_while_loop_matches_python(limit):
    x = np.abs(random_array(rng, (3,))) + 0.5

    def body(c):
        return c * 1.5 + 0.25

    def python(c):
        while c.sum() < limit:
            c = body(c)
        return c
    got = lax.while_loop(lambda c: c.sum() < limit, body, x)
    assert_close(got, python(x), rtol=1e-6)
    traced(lambda x: lax.while_loop(lambda c: c.sum() < limit, body, x), x)


def test_while_loop_pytree_carry_and_closure_over_traced_value():
    def f(x, n):
        def body(c):
            return {"i": c["i"] + 1, "v": c["v"] * x}
        return lax.while_loop(lambda c: c["i"] < n, body, {"i": 0, "v": np.ones(2, np.float32)})
    x = random_array(rng, (2,))
    closed = traced(f, x, 4)
    (eqn,) = closed.jaxpr.eqns
    assert eqn.params["cond_nconsts"] == 1 and eqn.params["body_nconsts"] == 1
    out = eval_jaxpr(closed.jaxpr, closed.consts, x, np.int32(3))
    assert_close(out[1], x ** 3, rtol=1e-6)
    assert int(out[0]) == 3


def test_while_loop_promotes_a_weak_initial_carry():
    out = lax.while_loop(lambda c: c < 10, lambda c: c + 1.5, 0)  # starts as a Python int
    assert out.dtype == np.float32 and not out.weak_type and float(out) == 10.5
    out = lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0)
    assert out.dtype == np.int32 and out.weak_type and int(out) == 3


@pytest.mark.parametrize("cond_fun, body_fun, init, match", [
    (lambda c: c < 10, lambda c: c * 2.0, np.int32(1),
     "(?s)carry input and carry output must have equal types.*input carry c has type int32"),
    (lambda c: c < 10, lambda c: (c, c), 1.0, "same pytree structure"),
    (lambda c: c, lambda c: c, 1.0, "cond_fun must return a boolean scalar"),
    (lambda c: c < 1, lambda c: c, np.ones(2), "cond_fun must return a boolean scalar"),
    (lambda c: (c < 1, c < 2), lambda c: c, 1.0, "but got pytree"),
    (3, lambda c: c, 1.0, "should be callable"),
])
def test_while_loop_errors(cond_fun, body_fun, init, match):
    with pytest.raises(TypeError, match=match):
        lax.while_loop(cond_fun, body_fun, init)


def test_leaked_body_tracer_is_reported():
    leaked = []

    def body(c):
        leaked.append(c)
        return c
    lax.while_loop(lambda c: c < 0, body, 1.0)
    with pytest.raises(UnexpectedTracerError, match="while_loop body_fun"):
        lax.add(leaked[0], 1.0)


# --- fori_loop -----------------------------------------------------------------------------

@pytest.mark.parametrize("lower, upper", [(0, 5), (2, 7), (3, 3), (6, 2)])
def test_fori_loop_matches_python(lower, upper):
    x = random_array(rng, (3,))

    def body(i, c):
        return c * 0.5 + i

    want = x
    for i in range(lower, upper):
        want = body(np.float32(i), want)
    assert_close(lax.fori_loop(lower, upper, body, x), want, rtol=1e-6)
    closed = traced(lambda x: lax.fori_loop(lower, upper, body, x), x)
    assert primitives(closed) == ["scan"]  # concrete bounds: a scan, as in JAX
    assert closed.jaxpr.eqns[0].params["length"] == max(upper - lower, 0)


def test_fori_loop_with_traced_bounds_is_a_while():
    def f(n, x):
        return lax.fori_loop(1, n, lambda i, c: c + i, x)
    closed = traced(f, 5, np.int32(0))
    assert primitives(closed) == ["while"]
    for n in (0, 1, 6):
        assert int(eval_jaxpr(closed.jaxpr, [], np.int32(n), np.int32(0))[0]) == sum(range(1, n))


def test_fori_loop_index_dtype():
    closed = nbjax.make_jaxpr(lambda n: lax.fori_loop(np.int8(0), n, lambda i, c: c + i, 0))(
        np.int8(3))
    assert [v.aval.dtype for v in closed.jaxpr.eqns[0].invars] == [np.int8] * 3
    with pytest.raises(TypeError, match="must have equal types, got int32 and float32"):
        lax.fori_loop(0, 3.0, lambda i, c: c, 1.0)
    with pytest.raises(TypeError, match="body_fun argument should be callable"):
        lax.fori_loop(0, 3, None, 1.0)


def test_fori_loop_unroll_needs_static_bounds():
    assert_close(lax.fori_loop(0, 4, lambda i, c: c * 2.0, 1.0, unroll=2), 16.0)
    with pytest.raises(ValueError, match="statically known"):
        nbjax.make_jaxpr(lambda n: lax.fori_loop(0, n, lambda i, c: c, 1.0, unroll=2))(3)


# --- scan ----------------------------------------------------------------------------------

@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape", [(5,), (4, 3), (1, 2), (0, 3)])
def test_scan_cumulative_sum(shape, reverse):
    xs = random_array(rng, shape)
    init = np.zeros(shape[1:], np.float32)
    carry, ys = lax.scan(lambda c, x: (c + x, c + x), init, xs, reverse=reverse)
    axis_sum = np.cumsum(xs[::-1], axis=0)[::-1] if reverse else np.cumsum(xs, axis=0)
    np.testing.assert_allclose(ys, axis_sum, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(carry, xs.sum(0), rtol=1e-5, atol=1e-6)
    traced(lambda i, x: lax.scan(lambda c, x: (c + x, c * x), i, x, reverse=reverse), init, xs)


@pytest.mark.parametrize("xs", [random_array(rng, (4, 6))[:, ::2], random_array(rng, (3, 5)).T],
                         ids=["strided", "transposed"])
def test_scan_over_non_contiguous_inputs(xs):
    carry, ys = lax.scan(lambda c, x: (c * 0.5 + x, x * c), np.ones(xs.shape[1], np.float32), xs)
    c, want = np.ones(xs.shape[1], np.float32), []
    for x in xs:
        want.append(x * c)
        c = c * 0.5 + x
    assert_close(carry, c, rtol=1e-6)
    assert_close(ys, np.stack(want), rtol=1e-6)
    out = lax.cond(True, lambda a: a[::-1], lambda a: a, xs)
    np.testing.assert_array_equal(out, xs[::-1])


def test_x64_loop_index_and_carries(x64):
    out = lax.fori_loop(0, 4, lambda i, c: c + i, 0)
    assert out.dtype == np.int64 and int(out) == 6
    closed = nbjax.make_jaxpr(lambda x: lax.cond(x > 0, lambda: x, lambda: -x))(1.0)
    assert closed.jaxpr.eqns[1].outvars[0].aval.dtype == np.int32  # the index stays int32
    carry, _ = lax.scan(lambda c, x: (c + x, None), 0, np.arange(3.0))
    assert carry.dtype == np.float64 and float(carry) == 3.0


def test_scan_pytree_carry_and_xs():
    xs = {"a": random_array(rng, (4, 2)), "b": np.arange(4, dtype=np.int32)}

    def step(carry, x):
        total, count = carry
        total = total + x["a"] * x["b"]
        return (total, count + 1), {"scaled": x["a"] * 2.0, "count": count}
    (total, count), ys = lax.scan(step, (np.zeros(2, np.float32), 0), xs)
    assert_close(total, (xs["a"] * xs["b"][:, None]).sum(0), rtol=1e-6)
    assert int(count) == 4
    assert_close(ys["scaled"], xs["a"] * 2)
    np.testing.assert_array_equal(ys["count"], np.arange(4))
    traced(lambda xs: lax.scan(step, (np.zeros(2, np.float32), 0), xs), xs)


def test_scan_without_xs_and_without_ys():
    carry, ys = lax.scan(lambda c, _: (c * 2.0, None), 1.0, None, length=5)
    assert float(carry) == 32.0 and ys is None
    carry, ys = lax.scan(lambda c, _: (c + 1, c), 0, None, length=0)
    assert int(carry) == 0 and ys.shape == (0,) and ys.dtype == np.int32


def test_scan_closures_over_arrays_and_traced_values():
    w = random_array(rng, (3,))

    def f(x, xs):
        return lax.scan(lambda c, a: (c * x + a * w, c), np.zeros(3, np.float32), xs)
    x, xs = np.float32(0.5), random_array(rng, (4, 3))
    closed = traced(f, x, xs)
    (eqn,) = closed.jaxpr.eqns
    assert eqn.params["num_consts"] == 2  # x (a tracer) and w (a constant array)
    c, want = np.zeros(3, np.float32), []
    for a in xs:
        want.append(c)
        c = c * x + a * w
    carry, ys = f(x, xs)
    assert_close(carry, c, rtol=1e-6)
    assert_close(ys, np.stack(want), rtol=1e-6)


def test_scan_promotes_a_weak_initial_carry():
    carry, ys = lax.scan(lambda c, x: (c + x, c), 0, np.arange(3, dtype=np.float32))
    assert carry.dtype == np.float32 and float(carry) == 3.0
    np.testing.assert_array_equal(ys, [0, 0, 1])
    # same dtype, only weakness differs: the carry keeps its weak input type
    carry, ys = lax.scan(lambda c, x: (c * x, c), 1.0, np.ones(3, np.float32))
    assert carry.dtype == np.float32 and not carry.weak_type and ys.weak_type


def test_scan_unroll_is_a_param():
    xs = random_array(rng, (6,))
    for unroll, expected in [(1, 1), (3, 3), (True, 6), (False, 1)]:
        closed = nbjax.make_jaxpr(
            lambda xs: lax.scan(lambda c, x: (c + x, x), 0.0, xs, unroll=unroll))(xs)
        assert closed.jaxpr.eqns[0].params["unroll"] == expected
        assert_close(eval_jaxpr(closed.jaxpr, [], xs)[0], xs.sum(), rtol=1e-5,
                     scale=np.abs(xs).sum())


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(f=lambda c, x: (c, x), xs=(np.ones(3), np.ones(4))), ValueError,
     "different leading axis sizes: 3, 4"),
    (dict(f=lambda c, x: (c, x), xs=np.ones(3), length=4), ValueError,
     "`length` argument of 4 which disagrees with leading axis sizes \\[3\\]"),
    (dict(f=lambda c, x: (c, x), xs=None), ValueError, "no values to scan over"),
    (dict(f=lambda c, x: (c, x), xs=np.float32(1)), ValueError, "no leading axis"),
    (dict(f=lambda c, x: c, xs=np.ones(3)), TypeError, "must be a pair"),
    (dict(f=3, xs=np.ones(3)), TypeError, "f argument should be a callable"),
    (dict(f=lambda c, x: (c * 2.0, x), init=np.int32(1), xs=np.ones(3)), TypeError,
     "input carry c has type int32\\[\\] but the corresponding output carry component has "
     "type float32\\[\\], so the dtypes do not match"),
    (dict(f=lambda c, x: (c + x, x), init=0.0, xs=np.ones((3, 2), np.float32)), TypeError,
     "shapes do not match"),
    (dict(f=lambda c, x: ([c], x), xs=np.ones(3)), TypeError, "same pytree structure"),
    (dict(f=lambda c, x: (c, x), xs=np.ones(3), unroll=-1), ValueError, "non-negative"),
])
def test_scan_errors(kwargs, error, match):
    kwargs.setdefault("init", 1.0)
    with pytest.raises(error, match=match):
        lax.scan(**kwargs)


# --- map, stop_gradient --------------------------------------------------------------------

def test_map_matches_a_python_loop():
    xs = random_array(rng, (4, 3))
    got = lax.map(lambda r: (r * r).sum(), xs)
    assert_close(got, [(r * r).sum() for r in xs], rtol=1e-6)
    closed = traced(lambda xs: lax.map(lambda r: {"s": r.sum(), "m": r * 2.0}, xs), xs)
    assert closed.jaxpr.eqns[0].params["num_carry"] == 0
    with pytest.raises(TypeError, match="callable"):
        lax.map(None, xs)


@pytest.mark.parametrize("batch_size", [1, 3, 7, 10])
def test_map_in_batches_matches_a_python_loop(batch_size):
    xs = {"u": random_array(rng, (7, 3)), "v": random_array(rng, (7,))}
    f = lambda x: {"s": (x["u"] * x["v"]).sum(), "m": x["u"] @ x["u"]}  # noqa: E731
    want = [f({"u": u, "v": v}) for u, v in zip(xs["u"], xs["v"])]
    for got in (lax.map(f, xs, batch_size=batch_size),
                nbjax.jit(lambda xs: lax.map(f, xs, batch_size=batch_size))(xs)):
        assert_close(got["s"], [w["s"] for w in want], rtol=1e-5)
        assert_close(got["m"], [w["m"] for w in want], rtol=1e-5)
    closed = traced(lambda xs: lax.map(f, xs, batch_size=batch_size), xs)
    scans = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert [e.params["length"] for e in scans] == [7 // batch_size]
    grads = nbjax.grad(lambda u: lax.map(lambda r: (r ** 2).sum(), u, batch_size=3).sum())
    assert_close(grads(xs["u"]), 2 * xs["u"], rtol=1e-6)
    with pytest.raises(ValueError, match="batch_size must be positive"):
        lax.map(f, xs, batch_size=0)


def test_stop_gradient_is_the_identity_on_pytrees():
    tree = {"a": random_array(rng, (2,)), "b": (np.int32(3), np.bool_(True))}
    out = lax.stop_gradient(tree)
    assert_tree_close(out, tree)
    closed = traced(lax.stop_gradient, tree)
    assert primitives(closed) == ["stop_gradient"] * 3
    a = np.ones(2, np.float32)
    lax.stop_gradient(a)
    a[0] = 2.0  # the user's array was not frozen


# --- nesting and type checking -------------------------------------------------------------

def test_nested_control_flow_with_closures():
    w = random_array(rng, (3,))

    def f(p, x, y):
        def true_fun(x):
            c, ys = lax.scan(lambda c, a: (c * y + a + w, c * 2.0), x, np.ones((4, 3), np.float32))
            return lax.while_loop(lambda c: c[0] < 100.0, lambda c: c * 1.5 + 1.0, c), ys

        def false_fun(x):
            inner = lax.fori_loop(0, 3, lambda i, c: lax.cond(i > 1, lambda: c * y, lambda: c + y),
                                  x)
            return inner, lax.map(lambda r: r - y, np.ones((4, 3), np.float32) * y)
        return lax.cond(p, true_fun, false_fun, x)
    x, y = np.abs(random_array(rng, (3,))) + 1, np.float32(1.5)
    for p in (True, False):
        traced(f, p, x, y)
    # false branch, by hand: i = 0, 1 add y; i = 2 multiplies by y
    assert_close(f(False, x, y)[0], (x + 2 * y) * y, rtol=1e-6)


def test_check_jaxpr_recurses_into_branches():
    closed = nbjax.make_jaxpr(lambda p, x: lax.cond(p, lambda a: a + 1.0, lambda a: a, x))(
        True, np.ones(3, np.float32))
    check_jaxpr(closed.jaxpr)
    branch = closed.jaxpr.eqns[1].params["branches"][1].jaxpr
    branch.eqns[0] = branch.eqns[0].replace(invars=[branch.eqns[0].outvars[0],
                                                    branch.eqns[0].invars[1]])
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        check_jaxpr(closed.jaxpr)


def test_abstract_eval_rejects_operands_of_the_wrong_type():
    closed = nbjax.make_jaxpr(lambda xs: lax.scan(lambda c, x: (c + x, x), 0.0, xs))(
        np.ones(3, np.float32))
    eqn = closed.jaxpr.eqns[0]
    with pytest.raises(TypeError, match="scan of length 3"):
        lax.scan_p.abstract_eval(*(nbjax.ShapedArray(s, np.float32) for s in [(), (4,)]),
                                 **eqn.params)
    with pytest.raises(TypeError, match="cond index must be an int32 scalar"):
        lax.cond_p.abstract_eval(nbjax.ShapedArray((), np.bool_),
                                 branches=(closed.jaxpr.eqns[0].params["jaxpr"],))

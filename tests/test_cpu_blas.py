"""Matrix products inside compiled loops: the loop stays native and calls BLAS itself."""

import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from helpers import assert_close, cpu_and_reference

pytestmark = pytest.mark.cpu_compiler
RNG = np.random.default_rng(0)


def _run_both(f, *args, rtol=1e-5):
    """The cpu executable of ``f``, its results checked against the reference backend (the
    absolute part of the tolerance scaled by the largest result), nothing falling back."""
    cpu, ref = cpu_and_reference(f, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = cpu.run(*args)
    for a, b in zip(outs, ref.run(*args)):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert_close(a, b, rtol=rtol)
    return cpu


def _assert_native_with_calls(executable, calls):
    [group] = [g for g in executable.plan.groups if g.kind == "loop"]
    assert all(g.kind != "fallback" for g in executable.plan.groups)
    assert f"{calls} native library call" in group.reason, group.reason


def rnn(w, u, xs, h0):
    def step(h, x):
        h = jnp.tanh(h @ w + x @ u)
        return h, h
    return lax.scan(step, h0, xs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_rnn_scan_compiles_into_one_native_loop(dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    w = (RNG.standard_normal((16, 16)) * 0.3).astype(dtype)
    u = (RNG.standard_normal((5, 16)) * 0.3).astype(dtype)
    xs = RNG.standard_normal((7, 3, 5)).astype(dtype)
    h0 = RNG.standard_normal((3, 16)).astype(dtype)
    cpu = _run_both(rnn, w, u, xs, h0, rtol=1e-5 if dtype == np.float32 else 1e-12)
    _assert_native_with_calls(cpu, 1)  # h @ w; x @ u is one product before the loop
    assert [g.kind for g in cpu.plan.groups] == ["library", "loop"]
    assert any(r.rule == "hoist" for r in cpu.rewrites)


@pytest.mark.parametrize("lhs_contract, rhs_contract", [(1, 0), (0, 0), (1, 1), (0, 1)])
@pytest.mark.parametrize("m, k, n", [(5, 7, 6), (1, 1, 1), (4, 0, 3), (0, 3, 2), (3, 2, 0)])
def test_every_orientation_and_size(lhs_contract, rhs_contract, m, k, n):
    a = RNG.standard_normal((m, k) if lhs_contract == 1 else (k, m)).astype(np.float32)
    b = RNG.standard_normal((k, n) if rhs_contract == 0 else (n, k)).astype(np.float32)
    dims = (((lhs_contract,), (rhs_contract,)), ((), ()))

    def f(a, b):
        def body(c, _):
            return c + 1.0, lax.dot_general(a * c, b, dims)
        return lax.scan(body, 1.0, None, length=3)

    cpu = _run_both(f, a, b)
    _assert_native_with_calls(cpu, 1)


def test_products_in_while_loops_nested_scans_and_gradients():
    w = (RNG.standard_normal((8, 8)) * 0.2).astype(np.float32)
    x = RNG.standard_normal((2, 8)).astype(np.float32)

    def power(x):
        return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, jnp.tanh(c[1] @ w)),
                              (0, x))[1]

    _run_both(power, x)

    def nested(x):
        def outer(c, _):
            inner = lax.scan(lambda d, _: (jnp.tanh(d @ w), None), c, None, length=3)[0]
            return inner, inner.sum()
        return lax.scan(outer, x, None, length=4)

    _run_both(nested, x)

    xs = RNG.standard_normal((6, 2, 8)).astype(np.float32)
    u = (RNG.standard_normal((8, 8)) * 0.2).astype(np.float32)
    grad = nbjax.grad(lambda w: rnn(w, u, xs, x)[1].sum())
    cpu = _run_both(grad, w, rtol=1e-4)
    assert all(g.kind != "fallback" for g in cpu.plan.groups)


def test_products_blas_does_not_take_are_host_steps():
    xs = RNG.integers(-3, 3, (4, 2, 3)).astype(np.int32)
    m = RNG.integers(-3, 3, (3, 3)).astype(np.int32)
    cpu = _run_both(lambda xs: lax.scan(lambda c, x: (c @ m + x, None), xs[0], xs)[0], xs)
    [group] = [g for g in cpu.plan.groups if g.kind == "loop"]
    assert "1 host step (dot_general)" in group.reason


@pytest.mark.parametrize("lhs_shape, rhs_shape, dims", [
    ((3, 4, 5), (3, 6, 5), (((2,), (2,)), ((0,), (0,)))),        # bqd,bkd->bqk
    ((3, 4, 6), (3, 6, 5), (((2,), (1,)), ((0,), (0,)))),        # bqk,bkd->bqd
    ((2, 3, 4, 5), (2, 3, 5, 6), (((3,), (2,)), ((0, 1), (0, 1)))),  # two batch axes
    ((2, 3, 5), (5, 4), (((2,), (0,)), ((), ()))),                # x @ w, x of rank 3
    ((5, 2, 3), (5, 4), (((0,), (0,)), ((), ()))),                # its transposed form
    ((4, 2, 3), (2, 3, 5), (((1, 2), (0, 1)), ((), ()))),         # two contracted axes
    ((3, 4, 0), (3, 0, 2), (((2,), (1,)), ((0,), (0,)))),         # an empty sum
    ((0, 4, 5), (0, 5, 2), (((2,), (1,)), ((0,), (0,)))),         # no batch element
    ((4, 3, 5), (3, 5, 2), (((2,), (1,)), ((1,), (0,)))),         # a batch axis inside
    # attention's heads read from (batch, seq, heads, d) in place: by BLAS (d = 8), by
    # the tiled products (x @ w.T: d = 256; x @ w: d = 32), both operands strided
    ((2, 5, 3, 8), (2, 6, 3, 8), (((3,), (3,)), ((0, 2), (0, 2)))),
    ((2, 5, 3, 256), (2, 6, 3, 256), (((3,), (3,)), ((0, 2), (0, 2)))),
    ((2, 3, 5, 6), (2, 6, 3, 32), (((3,), (1,)), ((0, 1), (0, 2)))),
    ((2, 5, 3, 6), (2, 6, 3, 32), (((3,), (1,)), ((0, 2), (0, 2)))),
])
def test_batched_and_higher_rank_products_are_native(lhs_shape, rhs_shape, dims):
    """Batches of products and operands whose free and contracted axes form two runs of
    adjacent axes (the inner one last) are BLAS calls or tiled products in the loop, a
    call per batch element, each operand read in place at its strides."""
    a = RNG.standard_normal(lhs_shape).astype(np.float32)
    b = RNG.standard_normal(rhs_shape).astype(np.float32)

    def f(a, b):
        def body(c, _):
            return c * 0.5, lax.dot_general(a * c, b, dims)
        return lax.scan(body, 1.0, None, length=2)

    _assert_native_with_calls(_run_both(f, a, b), 1)


def test_products_blas_cannot_take_as_they_are_are_transposed_first():
    """A batch axis innermost, or contracted axes out of order: BLAS cannot read the
    operand as it is, so a kernel transposes it first and the loop calls BLAS itself
    (these were host steps, calling back into Python)."""
    a = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    b = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    for dims in [(((1,), (0,)), ((0,), (2,))), (((2, 1), (1, 0)), ((), ()))]:
        cpu = _run_both(lambda a, b, dims=dims: lax.scan(
            lambda c, _: (c, lax.dot_general(a * c, b, dims)), 1.0, None, length=2), a, b)
        [group] = [g for g in cpu.plan.groups if g.kind == "loop"]
        assert "host step" not in group.reason, group.reason
        assert "1 native library call" in group.reason, group.reason


def _random_transposed_product(rng):
    """A random ``dot_general`` of transposed operands: (the function of the arrays the
    transposes start from, those arrays). Mostly each array is a stack of matrices (its
    free axes and its contracted axes two runs, the inner one last, batch axes anywhere
    else) and each operand a transpose of it that keeps the free axes in order, which the
    compiler reads in place; sometimes either order is random. Some sizes fit the tiled
    products."""
    batch = [int(rng.choice([1, 2, 3])) for _ in range(rng.integers(0, 3))]
    contract = [int(rng.choice([1, 3, 16, 256])) for _ in range(rng.integers(0, 3))]

    def side(own):
        free = [int(rng.choice([1, 2, 5, 32])) for _ in range(rng.integers(0, 3))]
        runs = [[(own, i, n) for i, n in enumerate(free)],
                [("c", i, n) for i, n in enumerate(contract)]]
        outer, inner = runs if rng.random() < 0.5 else runs[::-1]
        source = [("b", i, n) for i, n in enumerate(batch)] + [outer]
        source = [source[i] for i in rng.permutation(len(source))]
        source = [a for item in source for a in (item if isinstance(item, list) else [item])]
        source += inner
        operand = [source[i] for i in rng.permutation(len(source))]
        if rng.random() < 0.75:   # the free axes in their order again
            at = iter(sorted((a for a in operand if a[0] == own), key=lambda a: a[1]))
            operand = [next(at) if a[0] == own else a for a in operand]
        else:
            source = [source[i] for i in rng.permutation(len(source))]
        array = rng.standard_normal([n for *_, n in source]).astype(np.float32)
        return operand, tuple(source.index(a) for a in operand), array

    (left, left_perm, a), (right, right_perm, b) = side("l"), side("r")

    def where(axes, role):
        return tuple(sorted((i for i, (r, _, _) in enumerate(axes) if r == role),
                            key=lambda i: axes[i][1]))
    dims = ((where(left, "c"), where(right, "c")), (where(left, "b"), where(right, "b")))
    return (lambda a, b: lax.dot_general(lax.transpose(a, left_perm),
                                         lax.transpose(b, right_perm), dims)), a, b


@pytest.mark.parametrize("seed", range(24))
def test_products_of_transposed_operands_match_the_reference(seed):
    """Whatever the planner reads in place (strided stacks of matrices, BLAS or tiled) or
    copies first, the product is the reference's."""
    f, a, b = _random_transposed_product(np.random.default_rng(seed))
    _run_both(f, a, b)


def test_attention_in_a_scan_and_its_gradient_stay_native():
    q = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    w = (RNG.standard_normal((8, 8)) * 0.3).astype(np.float32)

    def attend(q, w):
        def layer(x, _):
            s = jnp.einsum("bqd,bkd->bqk", x @ w, x) / np.sqrt(8)
            return jnp.einsum("bqk,bkd->bqd", nbjax.nn.softmax(s, axis=-1), x), None
        return lax.scan(layer, q, None, length=3)[0].sum()

    _run_both(attend, q, w)
    cpu = _run_both(nbjax.grad(attend, argnums=1), q, w, rtol=1e-4)
    assert all(g.kind != "fallback" for g in cpu.plan.groups)
    loops = [g for g in cpu.plan.groups if g.kind == "loop"]
    assert loops and all("host step" not in g.reason for g in loops), \
        [g.reason for g in loops]


@pytest.mark.parametrize("numpy_has_blas", [True, False])
def test_the_blas_of_numpy_or_else_scipy(numpy_has_blas, monkeypatch):
    """Compiled code calls the OpenBLAS NumPy's wheel ships (64-bit integers) when it is
    there, else SciPy's (32-bit integers), each under its own symbol: both give the
    reference values."""
    from nbjax.backends.cpu import routines
    if not numpy_has_blas:
        monkeypatch.setattr(routines, "_numpy_openblas", lambda: None)
    elif routines._numpy_openblas() is None:
        pytest.skip("this NumPy does not ship OpenBLAS")
    routines.library.cache_clear()
    try:
        assert routines.library().width == (64 if numpy_has_blas else 32)
        w = (RNG.standard_normal((6, 6)) * 0.3).astype(np.float32)
        cpu = _run_both(lambda x: lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None,
                                           length=4)[0], RNG.standard_normal((3, 6)).astype(
                                               np.float32))
        _assert_native_with_calls(cpu, 1)
    finally:
        routines.library.cache_clear()


# --- products on the xs alone, computed before the loop (passes.hoist_from_loops) ----------

def _rewrites(rule, executable):
    """The rewrites of the loop pass ``rule`` ("hoist", "sink", "transpose_consts")."""
    return [r for r in executable.rewrites if r.rule == rule]


@pytest.mark.parametrize("reverse", [False, True])
def test_products_of_the_xs_alone_run_once_before_the_loop(reverse):
    w = (RNG.standard_normal((6, 6)) * 0.3).astype(np.float32)
    u = (RNG.standard_normal((6, 4)) * 0.3).astype(np.float32)
    xs = RNG.standard_normal((9, 3, 4)).astype(np.float32)
    zs = RNG.standard_normal((9, 4)).astype(np.float32)

    def f(h, xs, zs):
        def step(h, xz):
            x, z = xz
            projected = x @ u.T            # of the xs and a const (transposed) only
            gate = jnp.sin(z) @ u.T        # element-wise work on an xs, then a product
            h = jnp.tanh(h @ w + projected * gate)
            return h, (projected, h)       # a hoisted value is also a ys
        return lax.scan(step, h, (xs, zs), reverse=reverse)

    cpu = _run_both(f, np.zeros((3, 6), np.float32), xs, zs)
    [hoist] = _rewrites("hoist", cpu)
    assert "2 products" in hoist.detail and "9 iterations" in hoist.detail
    _assert_native_with_calls(cpu, 1)  # h @ w stays in the loop


def test_hoisting_in_nested_loops_and_gradients():
    w = (RNG.standard_normal((5, 5)) * 0.3).astype(np.float32)
    u = (RNG.standard_normal((3, 5)) * 0.3).astype(np.float32)
    xs = RNG.standard_normal((4, 6, 2, 3)).astype(np.float32)

    def loss(w, u, xs):
        def outer(h, x_seq):
            def inner(h, x):
                return jnp.tanh(h @ w + x @ u), jnp.sum(h)
            h, ys = lax.scan(inner, h, x_seq)
            return h * 0.5, jnp.sum(ys)
        h, totals = lax.scan(outer, jnp.zeros((2, 5), np.float32), xs)
        return jnp.sum(h * h) + jnp.sum(totals)

    cpu = _run_both(nbjax.value_and_grad(loss, argnums=(0, 1)), w, u, xs, rtol=2e-5)
    # In the outer loops' bodies, x_seq @ u: one product of [6, 2, 3] before the inner loop.
    bodies = [sub.plan for g in cpu.plan.groups if g.kind == "loop" for sub in g.subprograms]
    hoisted = [g for body in bodies for g in body.groups if g.kind == "library"
               and g.eqns[0].outvars[0].aval.shape == (6, 2, 5)]
    assert len(hoisted) >= 1, [body.report() for body in bodies]


def test_products_on_the_carry_or_too_large_stay_in_the_loop(monkeypatch):
    from nbjax.compiler import passes
    m = (RNG.standard_normal((4, 4)) * 0.3).astype(np.float32)
    xs = RNG.standard_normal((5, 2, 4)).astype(np.float32)
    on_carry = _run_both(lambda xs: lax.scan(lambda c, x: (jnp.tanh(c @ m + x), None),
                                             xs[0], xs)[0], xs)
    assert not _rewrites("hoist", on_carry)
    monkeypatch.setattr(passes, "HOIST_LIMIT", xs.nbytes - 1)  # 5 x [2, 4] float32 results
    too_large = _run_both(lambda xs: lax.scan(lambda c, x: (jnp.tanh(c + x @ m), None),
                                              xs[0], xs)[0], xs)
    assert not _rewrites("hoist", too_large)




# --- consts the products read transposed, transposed once before the loop ----------------

@pytest.mark.parametrize("reverse", [False, True])
def test_consts_read_transposed_are_transposed_once_before_the_loop(reverse):
    w = (RNG.standard_normal((4, 4)) * 0.3).astype(np.float32)
    v = (RNG.standard_normal((4, 3)) * 0.3).astype(np.float32)
    xs = RNG.standard_normal((5, 3, 4)).astype(np.float32)

    def f(w, v, xs):
        def step(h, x):
            h = jnp.tanh(h @ w.T + x)                       # the body transposes w
            g = lax.dot_general(h, w, (((1,), (1,)), ((), ())))  # reads w transposed
            return h, (v.T @ h.T, g, h @ v)    # v.T on the left; h @ v reads v as it is
        return lax.scan(step, jnp.ones((3, 4), np.float32), xs, reverse=reverse)

    cpu = _run_both(f, w, v, xs)
    [rewrite] = _rewrites("transpose_consts", cpu)
    assert "2 matrices" in rewrite.detail
    [loop] = [g for g in cpu.plan.groups if g.kind == "loop"]
    body = loop.subprograms[0].closed.jaxpr
    assert not [e for e in body.eqns if e.primitive.name == "transpose"
                and e.invars[0] in body.invars[:4]]  # no const transposed in the loop


def test_consts_stay_as_they_are_where_a_copy_would_not_help(monkeypatch):
    w = (RNG.standard_normal((4, 4)) * 0.3).astype(np.float32)
    xs = RNG.standard_normal((5, 2, 4, 4)).astype(np.float32)

    def f(w, xs):
        def step(h, x):
            batched = jnp.einsum("bij,bkj->bik", x, x)      # batch axes: not a matrix
            return h @ w + (w @ w.T).sum(), batched          # both operands consts
        return lax.scan(step, jnp.ones((3, 4), np.float32), xs)

    assert not _rewrites("transpose_consts", _run_both(f, w, xs))
    once = _run_both(lambda w, xs: lax.scan(lambda h, x: (h @ w.T, None), xs[0, 0], xs[:1, 0]),
                     w, xs)
    assert not _rewrites("transpose_consts", once)  # a single iteration
    from nbjax.compiler import passes
    monkeypatch.setattr(passes, "TRANSPOSE_LIMIT", w.nbytes - 1)
    large = _run_both(lambda w, xs: lax.scan(lambda h, x: (h @ w.T, None), xs[0, 0], xs[:, 0]),
                      w, xs)
    assert not _rewrites("transpose_consts", large)  # larger than a copy is worth

# --- products the carries accumulate, computed after the loop (passes.sink_from_loops) -----

@pytest.mark.parametrize("reverse", [False, True])
def test_accumulated_products_run_once_after_the_loop(reverse):
    w = (RNG.standard_normal((5, 5)) * 0.3).astype(np.float32)
    xs = RNG.standard_normal((7, 3, 4)).astype(np.float32)
    acc0 = RNG.standard_normal((4, 5)).astype(np.float32)

    def f(xs, acc0):
        def step(carry, x):
            h, a, b, c, d, sums = carry
            g = jnp.tanh(h @ w + jnp.pad(x, ((0, 0), (0, 1))))
            a = a + x.T @ g                 # x: an xs, transposed for the product
            b = (g.T @ h).T + b             # g: computed, stacked; the sum transposed
            c = c + g @ w                   # w is a const: stays in the loop
            d = d + h.T @ g                 # d is also read below: stays in the loop
            sums = (sums[0] + g.sum(0),     # g is stacked for b's product: summed after
                    sums[1] + x.T.reshape(-1),  # x is an xs: summed after
                    sums[2] + jnp.sin(g).sum(0))  # sin(g) is not stacked: stays
            return (g, a, b, c, d, sums), jnp.sum(d)
        zeros = jnp.zeros((5, 5), np.float32)
        return lax.scan(step, (jnp.zeros((3, 5), np.float32), acc0, zeros, zeros[:3],
                               zeros, (zeros[0], jnp.zeros(12, np.float32), zeros[0])), xs,
                        reverse=reverse)

    cpu = _run_both(f, xs, acc0)
    [sink] = _rewrites("sink", cpu)
    assert "4 sums" in sink.detail and "7 iterations" in sink.detail
    _assert_native_with_calls(cpu, 3)  # h @ w, g @ w, h.T @ g


def test_accumulations_sunk_from_a_gradient_and_nested_loops():
    """The transpose of a scan accumulates each weight's gradient: in an RNN's gradient
    both weights' products are sunk (in the inner loop of nested ones, too)."""
    w = (RNG.standard_normal((6, 6)) * 0.3).astype(np.float32)
    u = (RNG.standard_normal((4, 6)) * 0.3).astype(np.float32)
    xs = RNG.standard_normal((5, 2, 3, 4)).astype(np.float32)

    def rnn(w, u, x_seq, h):
        return lax.scan(lambda h, x: (jnp.tanh(h @ w + x @ u), None), h, x_seq)[0]

    def loss(w, u, xs):
        outer = lambda h, x_seq: (rnn(w, u, x_seq, h) * 0.9, None)  # noqa: E731
        return jnp.sum(lax.scan(outer, jnp.zeros((3, 6), np.float32), xs)[0] ** 2)

    flat = _run_both(nbjax.grad(lambda w, u, x_seq: jnp.sum(
        rnn(w, u, x_seq, jnp.zeros((3, 6), np.float32)) ** 2), argnums=(0, 1)), w, u, xs[0],
                     rtol=2e-5)
    [sink] = _rewrites("sink", flat)
    assert "2 sums" in sink.detail
    nested = _run_both(nbjax.value_and_grad(loss, argnums=(0, 1)), w, u, xs, rtol=2e-5)
    bodies = [sub for g in nested.plan.groups if g.kind == "loop" for sub in g.subprograms]
    sunk = [e for body in bodies for e in body.closed.jaxpr.eqns  # over the inner iterations
            if e.primitive.name == "dot_general" and 0 in e.params["dimension_numbers"][0][0]]
    assert len(sunk) == 2, [body.plan.report() for body in bodies]


def test_batched_and_integer_accumulations_are_sunk():
    xs = RNG.standard_normal((6, 2, 3, 4)).astype(np.float32)
    ks = RNG.integers(-50, 50, (6, 2, 4, 3)).astype(np.int32)

    def f(xs, ks):
        def step(carry, xk):
            x, k = xk
            acc, iacc, s, i = carry   # (operands of the carries: not products of xs alone)
            x, k = x * s, k + i
            return (acc + jnp.einsum("bij,bjk->bik", x, x.transpose(0, 2, 1)),
                    iacc + jnp.einsum("bij,bik->bkj", k, k), s * 0.5, i + 1), None
        return lax.scan(step, (jnp.zeros((2, 3, 3), np.float32),
                               jnp.zeros((2, 3, 3), np.int32), 1.0, 0), (xs, ks))[0]

    cpu = _run_both(f, xs, ks)
    [sink] = _rewrites("sink", cpu)
    assert "2 sums" in sink.detail
    shifted = ks + np.arange(6, dtype=np.int32)[:, None, None, None]
    np.testing.assert_array_equal(cpu.run(xs, ks)[1],
                                  np.einsum("tbij,tbik->bkj", shifted, shifted))


def test_accumulations_too_large_to_stack_stay_in_the_loop(monkeypatch):
    from nbjax.compiler import passes
    xs = RNG.standard_normal((5, 2, 4)).astype(np.float32)
    h = (RNG.standard_normal((5, 2, 3)) * 0.3).astype(np.float32)

    def f(xs, h):
        def step(carry, xh):
            (acc, s), (x, hh) = carry, xh
            return (acc + hh.T @ jnp.sin(x * s), s + 1), None
        return lax.scan(step, (jnp.zeros((3, 4), np.float32), 1.0), (xs, h))[0]
    assert _rewrites("sink", _run_both(f, xs, h))
    monkeypatch.setattr(passes, "HOIST_LIMIT", xs.nbytes - 1)  # sin(x * s) of 5 iterations
    assert not _rewrites("sink", _run_both(f, xs, h))

def test_float16_products_are_float32_products_of_their_conversions():
    """A float16 ``dot_general`` sums in float32 and rounds once (XLA's CPU, and the
    reference); compiled, its operands are converted by kernels and multiplied natively in
    float32 (it called back into Python), as the reference's (within the rounding that
    another order of the float32 sums may change): a product, a batched one, ``x @ x``, one
    of a transposed operand, a matrix by a vector, one asking for a float32 result, and
    one inside a scan."""
    a = (RNG.standard_normal((3, 40, 33)) * 4).astype(np.float16)
    b = (RNG.standard_normal((3, 33, 20)) * 4).astype(np.float16)
    cases = [(lambda a, b: a[0] @ b[0], (a, b)),
             (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (a, b)),
             (lambda a, b: a[0, :33] @ a[0, :33], (a, b)),
             (lambda a, b: a[0].T @ a[1], (a, b)),
             (lambda a, b: a[1] @ b[1, :, 0], (a, b)),
             (lambda a, b: lax.dot(a[2], b[2], preferred_element_type=np.float32), (a, b)),
             (lambda a, b: lax.scan(lambda c, x: (c @ x[:33, :33] * 0.5, None), a[0, :33],
                                    a)[0], (a, b))]
    for f, args in cases:
        cpu, ref = cpu_and_reference(f, *args)
        assert "calling back" not in cpu.runs_as, cpu.runs_as
        for got, want in zip(cpu.run(*args), ref.run(*args)):
            assert got.dtype == want.dtype
            assert_close(got, want, rtol=2 * float(np.finfo(got.dtype).eps))


def test_products_of_operands_read_as_no_matrix_stack_transpose_them_first():
    """An operand whose free axes lie on both sides of its contracted ones (an image's
    rows contracted between its columns and its channels, as a resize's weights do), or
    whose contracted axes pair in another order than theirs, is transposed by a kernel to
    batch, free and contracted axes, and the product runs natively: it called back into
    Python."""
    img = RNG.standard_normal((6, 9, 3)).astype(np.float32)
    w = RNG.standard_normal((9, 5)).astype(np.float32)
    cube = RNG.standard_normal((4, 6, 5, 3)).astype(np.float64)
    cases = [(lambda img, w: lax.dot_general(img, w, (((1,), (0,)), ((), ()))), (img, w)),
             (lambda img, w: lax.dot_general(w, img, (((0,), (1,)), ((), ()))), (img, w)),
             (lambda c, _: lax.dot_general(c, c, (((3, 1), (3, 1)), ((0,), (0,)))),
              (cube, None)),
             (lambda img, w: jnp.einsum("hwc,wv->hvc", img, w), (img, w))]
    for f, args in cases:
        args = tuple(a for a in args if a is not None)
        g = f if len(args) == 2 else (lambda c, f=f: f(c, None))
        cpu = _run_both(g, *args)
        assert "calling back" not in cpu.runs_as, cpu.runs_as
        assert any(d.eqn.primitive.name == "transpose" for d in cpu.plan.decisions)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("lhs_shape, rhs_shape, dims", [
    ((6, 5), (5,), (((1,), (0,)), ((), ()))),                  # M @ v
    ((5,), (5, 6), (((0,), (0,)), ((), ()))),                  # v @ M
    ((5, 6), (5,), (((0,), (0,)), ((), ()))),                  # M.T @ v
    ((5,), (6, 5), (((0,), (1,)), ((), ()))),                  # v @ M.T
    ((1, 5), (5, 6), (((1,), (0,)), ((), ()))),                # a one-row matrix
    ((6, 5), (5, 1), (((1,), (0,)), ((), ()))),                # a one-column matrix
    ((3, 6, 5), (3, 5), (((2,), (1,)), ((0,), (0,)))),         # a batch of them
    ((2, 3, 8), (2, 6, 3, 8), (((2,), (3,)), ((0, 1), (0, 2)))),  # a strided matrix
    ((4, 0), (0,), (((1,), (0,)), ((), ()))),                  # nothing to sum
])
def test_matrix_vector_products_call_gemv(dtype, lhs_shape, rhs_shape, dims, request):
    """A product of one row or one column is BLAS's ``gemv``, which streams the matrix
    once (``gemm`` packs it first: 4x slower for a 2000 x 2000 matrix), in every
    orientation, batched, strided, and adding into a carry (``beta = 1``)."""
    if dtype == np.float64:
        request.getfixturevalue("x64")

    def sample(shape):
        x = RNG.standard_normal(shape)
        return (x + 1j * RNG.standard_normal(shape) if dtype == np.complex64 else x) \
            .astype(dtype)
    a, b = sample(lhs_shape), sample(rhs_shape)

    def f(a, b):
        product = lax.dot_general(a, b, dims)

        def body(c, _):
            return c + lax.dot_general(a * 0.5, b, dims), None
        return product, lax.scan(body, product, None, length=3)[0]
    cpu = _run_both(f, a, b, rtol=1e-5 if dtype != np.float64 else 1e-12)
    # (with no terms to sum, gemm: it writes the zeros, where gemv leaves its output alone)
    called, other = ("gemm", "gemv") if 0 in lhs_shape else ("gemv", "gemm")
    assert called in cpu.jit_module.optimised_ir and other not in cpu.jit_module.optimised_ir

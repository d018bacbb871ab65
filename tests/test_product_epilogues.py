"""Matrix products that do the work of their result's one reader
(``fusion._product_epilogues``).

Products that add their result into a value (``c + a @ b`` as one BLAS call with
``beta = 1``, or register tiles adding into ``C``): the planner's choice, the buffer they
add into (the value's own when it is dead after, a loop's carry kept in one buffer, a
donated input's), and their values against the reference backend. Products that write
their result transposed (rows and matrices at strides: an attention's heads merged back),
against the reference on random permutations. Native programs run with
``buffer_plan.POISON``: a region given back is filled with NaN, so a step reading a value
whose buffer the product overwrote, or freed, would see it."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import buffer_plan

from helpers import assert_close, cpu_and_reference

pytestmark = pytest.mark.cpu_compiler


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    monkeypatch.setattr(buffer_plan, "POISON", True)


def _arrays(seed, *shapes, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) / np.sqrt(s[-1])).astype(dtype) for s in shapes]


def _compare(fn, *args, rtol=2e-5):
    """``fn`` compiled natively against the reference backend; the cpu executable."""
    cpu, ref = cpu_and_reference(fn, *args, name="acc")
    for out, expected in zip(cpu.run(*args), ref.run(*args), strict=True):
        assert_close(out, expected, rtol=rtol)
    return cpu


def _accumulating(plan):
    """The accumulating product steps of ``plan`` and of its loops' sub-programs."""
    found = []
    for g in plan.groups:
        if g.accumulator is not None:
            found.append(g)
        for sub in g.subprograms:
            found += _accumulating(sub.plan)
    return found


# (m, k, n) of products computed by register tiles (x @ w, x @ w.T) and by BLAS
SHAPES = [(8, 24, 32), (20, 300, 48), (96, 200, 40), (3, 5, 7)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_sum_of_products_is_one_call_adding_into_the_first(m, k, n, transposed, dtype,
                                                             request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    a, b, c, d = _arrays(m * k + n, (m, k), (n, k) if transposed else (k, n), (m, 9),
                         (9, n), dtype=dtype)

    def f(a, b, c, d):
        return c @ d + (a @ b.T if transposed else a @ b)
    cpu = _compare(f, a, b, c, d, rtol=1e-5 if dtype == np.float32 else 1e-12)
    (g,) = _accumulating(cpu.plan)
    assert [e.primitive.name for e in g.eqns] == ["dot_general", "add"] and g.in_place
    assert len(cpu.plan.groups) == 2  # the first product, the second adding into it
    assert "adds its result to the other operand" in cpu.plan.report()


def test_a_sum_of_a_sum_adds_into_its_buffer_only_once_it_is_dead():
    xs = _arrays(1, *[(16, 32)] * 3)
    ws = _arrays(2, *[(32, 48)] * 3)

    def f(x1, x2, x3, w1, w2, w3):
        s1 = x1 @ w1 + x2 @ w2        # in x1 @ w1's buffer
        s2 = s1 + x3 @ w3             # s1 is summed afterwards: into a copy
        return s2, s1.sum()
    cpu = _compare(f, *xs, *ws)
    first, second = _accumulating(cpu.plan)
    assert first.in_place and not second.in_place
    assert second.accumulator is first.outputs[0]


def test_a_value_read_after_the_product_is_not_overwritten():
    a, b, x = _arrays(3, (12, 40), (40, 24), (12, 24))

    def f(a, b, x):
        c = jnp.sin(x)             # computed, then read again after the sum
        s = c + a @ b              # (read by two kernels: materialised)
        return jnp.cos(s) * c, jnp.sum(s)

    cpu = _compare(f, a, b, x)
    (g,) = _accumulating(cpu.plan)
    assert not g.in_place


@pytest.mark.parametrize("f", [
    lambda a, b, x: (jnp.sin(x) + a @ b, jnp.sin(x)),                  # c is an output too
    lambda a, b, x: (jnp.sin(x).reshape(-1) + (a @ b).reshape(-1),     # through views
                     jnp.sin(x).reshape(12, 24)[0]),
    lambda a, b, x: jnp.sin(x) + jnp.sin(x) @ b[:24, :].T[:24, :],     # c is an operand
    lambda a, b, x: x + a @ b,                                          # c is an input
])
def test_values_the_program_needs_keep_their_buffer(f):
    a, b, x = _arrays(4, (12, 40), (40, 24), (12, 24))
    _compare(f, a, b, x)


def test_not_fused_when_the_sum_is_not_a_kernel_of_its_own():
    a, b, c = _arrays(5, (8, 16), (16, 32), (8, 32))
    cpu = _compare(lambda a, b, c: (jnp.tanh(a @ b + c), (a @ b) * 2.0), a, b, c)
    assert not _accumulating(cpu.plan)  # the product is read twice
    cpu = _compare(lambda a, b, c: a @ b + c[0], a, b, c)  # broadcast: not one shape
    assert not _accumulating(cpu.plan)


def test_a_batched_product_adds_each_matrix_into_its_slice():
    a, b, c = _arrays(6, (3, 8, 16), (3, 16, 32), (3, 8, 32))
    cpu = _compare(lambda a, b, c: c + jnp.einsum("bij,bjk->bik", a, b), a, b, c)
    assert _accumulating(cpu.plan)


@pytest.mark.parametrize("length", [1, 6, 7])
@pytest.mark.parametrize("rows", [4, 80])   # register tiles, BLAS
def test_a_scans_accumulator_is_kept_in_one_buffer(length, rows):
    """Products by a const stay in the loop (products of the iteration's values alone are
    computed after it: ``passes.sink_from_loops``), adding into the carry's buffer."""
    w, v, h0 = _arrays(7, (24, 24), (rows, 24), (rows, 24))
    (xs,) = _arrays(8, (length, rows, 24))

    def f(w, v, h0, xs):
        def step(carry, x):
            h, gw, gx = carry
            h = jnp.tanh(h @ w + x)
            return (h, gw + h.T @ v, v.T @ h + gx), h.sum()
        zeros = jnp.zeros((24, 24), jnp.float32)
        return lax.scan(step, (h0, zeros, zeros), xs)

    cpu = _compare(f, w, v, h0, xs)
    (loop,) = [g for g in cpu.plan.groups if g.kind == "loop"]
    body = loop.subprograms[0]
    # the body's inputs: the consts (v.T transposed before the loop, for length > 1), then
    # the carries h, gw, gx, then x
    consts = len(body.closed.jaxpr.invars) - 4
    assert buffer_plan.accumulated_inputs(body.closed.jaxpr, body.plan.groups) == \
        {consts + 1: 1, consts + 2: 2}


def test_a_carry_read_after_the_product_keeps_two_buffers():
    w, h0 = _arrays(9, (16, 16), (8, 16))
    (xs,) = _arrays(10, (5, 8, 16))

    def f(w, h0, xs):
        def step(carry, x):
            h, gw = carry
            h = jnp.tanh(h @ w + x)
            new = gw + h.T @ x
            return (h + 0.01 * (gw @ h.T).T, new), gw.sum()  # the old gw, read after
        return lax.scan(step, (h0, jnp.zeros((16, 16), jnp.float32)), xs)

    cpu = _compare(f, w, h0, xs)
    (loop,) = [g for g in cpu.plan.groups if g.kind == "loop"]
    body = loop.subprograms[0]
    assert buffer_plan.accumulated_inputs(body.closed.jaxpr, body.plan.groups) == {}


def test_a_while_loops_accumulator_is_updated_in_place():
    w, h0 = _arrays(11, (16, 16), (8, 16))

    def f(w, h0):
        def body(i, carry):
            h, acc = carry
            h = jnp.sin(h @ w)
            return h, acc + h.T @ h
        return lax.fori_loop(0, 5, body, (h0, jnp.zeros((16, 16), jnp.float32)))

    cpu = _compare(f, w, h0)
    assert _accumulating(cpu.plan)


def test_the_gradient_of_a_recurrence_accumulates_its_weight_gradients():
    w, u, h0 = _arrays(12, (32, 32), (16, 32), (8, 32))
    (xs,) = _arrays(13, (9, 8, 16))

    def loss(w, u, h0, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, None
        h, _ = lax.scan(step, h0, xs)
        return jnp.sum(h * h)

    cpu = _compare(nbjax.value_and_grad(loss, argnums=(0, 1)), w, u, h0, xs, rtol=1e-4)
    assert len(_accumulating(cpu.plan)) >= 2


def test_specials_in_the_accumulator_propagate():
    a, b, c = _arrays(14, (6, 20), (20, 16), (6, 16))
    c[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    a[1, 0] = np.inf

    cpu = _compare(lambda a, b, c: c + a @ b, a, b, c)
    assert _accumulating(cpu.plan)


def test_a_donated_accumulator_takes_the_sum_in_its_buffer():
    x0, a, b = _arrays(15, (32, 48), (32, 16), (16, 48))
    x = jnp.asarray(x0)
    where = np.asarray(x).ctypes.data
    f = nbjax.jit(lambda x, a, b: x + a @ b, donate_argnums=0, backend="cpu")
    out = f(x, jnp.asarray(a), jnp.asarray(b))
    assert x.is_deleted() and np.asarray(out).ctypes.data == where
    assert_close(out, x0 + a @ b, rtol=1e-5)
    # the product reads x itself: it cannot add into x's buffer
    x, w = x0[:, :32], b[:, :32].T @ b[:, :32]
    g = nbjax.jit(lambda x, w: x + x @ w, donate_argnums=0, backend="cpu")
    assert_close(g(jnp.asarray(x), jnp.asarray(w)), x + x @ w, rtol=1e-5)


# --- products written transposed -----------------------------------------------------------

def _random_permuted_product(rng):
    """A random ``dot_general`` (batch axes, free axes on both sides; some sizes tiled,
    some BLAS) whose result, transposed by a random permutation, is a program's output:
    mostly a permutation that keeps each side's free axes in order and the right side's
    last (the product writes it)."""
    batch = [int(rng.choice([1, 2, 3])) for _ in range(rng.integers(0, 3))]
    depth = int(rng.choice([3, 16, 200]))
    left = [int(rng.choice([1, 2, 5, 40])) for _ in range(rng.integers(1, 3))]
    right = [int(rng.choice([1, 3, 16, 32])) for _ in range(rng.integers(1, 3))]
    a = (rng.standard_normal(batch + left + [depth]) / np.sqrt(depth)).astype(np.float32)
    b = rng.standard_normal(batch + [depth] + right).astype(np.float32)
    nb, nl = len(batch), len(left)
    dims = (((nb + nl,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    axes = list(range(nb + nl + len(right)))
    if rng.random() < 0.75:
        outer = [("b", d) for d in axes[:nb]] + [("rows", axes[nb:nb + nl])]
        outer = [outer[i] for i in rng.permutation(len(outer))]
        permutation = [d for kind, d in outer for d in ([d] if kind == "b" else d)]
        permutation += axes[nb + nl:]
    else:
        permutation = list(rng.permutation(axes))
    return (lambda a, b: lax.transpose(lax.dot_general(a, b, dims), permutation)), a, b


@pytest.mark.parametrize("seed", range(24))
def test_products_written_transposed_match_the_reference(seed):
    f, a, b = _random_permuted_product(np.random.default_rng(seed))
    _compare(f, a, b, rtol=1e-5)


def test_an_attentions_heads_are_merged_by_the_product():
    p, v = _arrays(16, (2, 4, 16, 16), (2, 4, 16, 8))
    w, = _arrays(17, (32, 24))

    def f(p, v, w):
        merged = jnp.transpose(p @ v, (0, 2, 1, 3)).reshape(2, 16, 32)
        return merged @ w
    cpu = _compare(f, p, v, w)
    (g,) = [g for g in cpu.plan.groups if g.writes_as_reader]
    assert [e.primitive.name for e in g.eqns] == ["dot_general", "transpose"]
    assert not [k for k in cpu.plan.kernels]   # no kernel copies the heads
    assert "writes its result in this layout" in cpu.plan.report()

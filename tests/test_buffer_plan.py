"""The buffer plan of native programs (``backends/cpu/buffer_plan.py``): a scratch region is
reused once its value is dead, and never while it is live.

With ``buffer_plan.POISON`` every region given back is filled with 0xff bytes (NaN for
floats) at the point of the program where it is given back: a step that read a value
after that point, or a value whose region a later step overwrote, would see them. The
programs here are compiled that way and compared with the reference backend."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import buffer_plan, runtime

from helpers import assert_close, cpu_and_reference
from test_fuzz_differential import check_program


@pytest.fixture
def poison(monkeypatch):
    monkeypatch.setattr(buffer_plan, "POISON", True)


# --- the allocator -------------------------------------------------------------------------

def test_live_regions_never_overlap_and_freed_ones_are_reused():
    rng = np.random.default_rng(0)
    plan, live = buffer_plan.ScratchPlan(), {}
    most_live = 0
    for step in range(2000):
        if live and rng.random() < 0.45:
            key = list(live)[rng.integers(len(live))]
            plan.give_back(*live.pop(key))
        else:
            nbytes = int(rng.choice([1, 64, 100, 4096, 10_000, 65_536]))
            live[step] = (plan.take(nbytes), nbytes)
        spans = sorted((o, o + -(-n // runtime.ALIGNMENT) * runtime.ALIGNMENT)
                       for o, n in live.values())
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
        assert all(o % runtime.ALIGNMENT == 0 and end <= plan.size for o, end in spans)
        most_live = max(most_live, sum(end - o for o, end in spans))
    assert plan.size < 2 * most_live  # reuse, not one region per value
    for region in list(live.values()):
        plan.give_back(*region)
    assert plan.take(plan.size) == 0  # all merged back into one free block


# --- programs ------------------------------------------------------------------------------

def _compare(fn, *args):
    """``fn`` compiled natively (poisoned) against the reference backend; returns the cpu
    executable."""
    cpu, ref = cpu_and_reference(fn, *args, name="buffers")
    assert all(g.kind in ("kernel", "loop", "library", "view") for g in cpu.plan.groups)
    for out, expected in zip(cpu.run(*args), ref.run(*args)):
        assert_close(out, expected, rtol=2e-5)
    return cpu


def _matrices(n, *shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) / np.sqrt(shape[-1])
            for _ in range(n)]


def test_a_value_live_across_many_steps_keeps_its_region(poison):
    def f(x, w):
        first = jnp.tanh(x @ w)        # read again at the very end
        h = first
        for _ in range(6):             # intermediates that die at once
            h = jnp.sin(h @ w) + 1.0
        return h * first

    x, w = _matrices(2, 64, 64)
    cpu = _compare(f, x, w)
    # every intermediate in a region of its own would take 13 blocks of 16 KB
    assert cpu.layout.flows["program"].scratch_bytes <= 4 * x.nbytes


def test_a_view_keeps_its_operands_region_until_its_own_last_read(poison):
    """``a`` is last read by the view of it; the view is read after steps that take and
    give back regions of their own: given back at the view, ``a``'s region would be
    poisoned (or reused) before the last product reads it."""
    def f(x, w, w2):
        a = jnp.tanh(x @ w)
        v = a.reshape(32, 128)
        h = x
        for _ in range(4):
            h = jnp.sin(h @ w) + 1.0
        return (v @ w2).sum() + h.sum()

    x, w = _matrices(2, 64, 64)
    (w2,) = _matrices(1, 128, 8, seed=4)
    cpu = _compare(f, x, w, w2)
    (view,) = [g for g in cpu.plan.groups if g.kind == "view"]
    assert view.inputs[0] in {v for g in cpu.plan.groups if g.kind == "kernel"
                              for v in g.outputs}


@pytest.mark.parametrize("f", [
    lambda x, w: (x @ w).reshape(-1),                                  # into the result
    lambda x, w: ((x @ w).reshape(-1), (x @ w)[None], jnp.sin(x @ w).sum()),  # one of two
    lambda x, w: (jnp.tanh(x) @ w).reshape(2, 32, 64)[None],            # a view of a view
    lambda x, w: lax.scan(lambda c, r: (c + (r @ w).reshape(-1).sum(),
                                        (jnp.cos(r) @ w).reshape(-1)), 0.0, x.reshape(4, 16, 64)),
])
def test_results_that_are_views_are_written_once_where_the_caller_gets_them(poison, f):
    """A result that is a view of a value the program computes: the value is computed
    into the result's buffer, or kept alive to be copied there at the end."""
    x, w = _matrices(2, 64, 64)
    cpu = _compare(f, x, w)
    assert "view" in [g.kind for g in cpu.plan.groups] + [
        g.kind for s in cpu.plan.groups for sub in s.subprograms for g in sub.plan.groups]


def test_a_donated_input_is_no_view_results_buffer_while_the_step_writing_it_reads_it():
    """The product writes the view's bytes (its owner) while it reads ``x``: ``x``'s buffer
    cannot be the result's, though the view step itself comes after the product."""
    x0, w = _matrices(2, 64, 64)

    def f(x, w):
        return (x[None] @ w).reshape(64, 64)
    cpu, _ = cpu_and_reference(f, x0, w)
    assert buffer_plan.donations(cpu.jaxpr.jaxpr, cpu.plan.groups, {0}) == {}
    out = nbjax.jit(f, donate_argnums=0)(jnp.asarray(x0), jnp.asarray(w))
    assert_close(out, x0 @ w, rtol=2e-5)


def test_loop_bodies_reuse_regions_between_iterations(poison):
    def f(h, xs, w):
        def step(h, x):
            a = jnp.tanh(h @ w + x)
            b = jnp.sin(a @ w)
            return a + b, b @ w
        return lax.scan(step, h, xs)

    h, w = _matrices(2, 16, 16)
    xs = _matrices(1, 9, 16, 16, seed=1)[0]
    _compare(f, h, xs, w)


def test_nested_loops_cond_and_while(poison):
    def f(h, xs, w):
        def inner(c, x):
            y = jnp.cos(c @ w) * x
            return c + lax.cond(jnp.sum(y) > 0, lambda v: v @ w, lambda v: v * 2.0, y), y

        def outer(c, x):
            c, ys = lax.scan(inner, c, x)
            c = lax.while_loop(lambda s: jnp.max(jnp.abs(s)) > 1.0, lambda s: (s @ w) * 0.5,
                               c)
            return c, ys.sum(0) @ w

        return lax.scan(outer, h, xs)

    h, w = _matrices(2, 8, 8)
    xs = _matrices(1, 3, 4, 8, 8, seed=2)[0]
    _compare(f, h, xs, w)


def test_gradient_of_a_recurrence(poison):
    def loss(w, u, h, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, jnp.sum(h * h)
        h, ys = lax.scan(step, h, xs)
        return jnp.sum(ys) + jnp.sum(h)

    w, u, h = _matrices(3, 12, 12)
    xs = _matrices(1, 7, 12, 12, seed=3)[0]
    _compare(nbjax.value_and_grad(loss, argnums=(0, 1)), w, u, h, xs)


def _one_buffer_carries(cpu):
    """For each loop of ``cpu``'s plan (nested ones after their parent), the carries it
    keeps in one buffer, updated in place (``buffer_plan.carries_in_place``)."""
    from nbjax.backends.cpu.control_flow import carried_body
    found = []

    def visit(plan):
        for g in (g for g in plan.groups if g.kind == "loop"):
            sub, n_consts, n_carries = carried_body(g.eqns[0], g.subprograms)
            found.append(sorted(buffer_plan.carries_in_place(
                sub.closed.jaxpr, sub.plan.groups, n_consts, n_carries)))
            for s in g.subprograms:
                visit(s.plan)
    visit(cpu.plan)
    return found


def test_a_kernel_updates_a_carry_in_place_where_it_reads_it_only_at_its_own_index(poison):
    """A carry computed element-wise from itself (Newton's iteration for a square root,
    two carries each from itself) is kept in one buffer that its kernel overwrites, reading
    each element before writing it; where the carry is computed from another, read at
    another index (a roll), read after the kernel (by a later kernel, as a scan's ys) or
    through a view, the loop keeps two buffers. Values are the reference's (odd and even
    trip counts, none, nested loops, while)."""
    x = np.random.default_rng(5).random((64, 33)).astype(np.float32) + 0.5

    def newton(x, n):
        return lax.fori_loop(0, n, lambda i, y: 0.5 * (y + x / y), x + 1.0)
    for n in (0, 1, 4, 7):
        assert _one_buffer_carries(_compare(lambda x: newton(x, n), x)) == [[0]], n

    def two(x):
        return lax.fori_loop(0, 5, lambda i, c: (c[0] * 0.5, jnp.sin(c[1])), (x, x * 3.0))
    assert _one_buffer_carries(_compare(two, x)) == [[0, 1]]

    def swapped(x):  # (a, b) -> (b + 1, a * 2): each kernel reads the other carry
        return lax.fori_loop(0, 5, lambda i, c: (c[1] + 1.0, c[0] * 2.0), (x, x * 3.0))

    def rolled(x):
        return lax.fori_loop(0, 3, lambda i, y: jnp.roll(y, 1, axis=1) + y, x)

    def read_after(x):
        def step(y, _):
            z = jnp.sin(y)
            return z, jnp.cos(y) * jnp.sum(z)   # y read again after z is made
        return lax.scan(step, x, None, length=4)

    def as_ys(x):
        return lax.scan(lambda y, _: (y * 1.5 - 1.0, y), x, None, length=3)

    def through_a_view(x):
        return lax.fori_loop(0, 3, lambda i, y: (y.reshape(33, 64) * 2.0).reshape(64, 33)
                             + y.T.reshape(64, 33), x)
    for fn in (swapped, rolled, read_after, as_ys, through_a_view):
        assert _one_buffer_carries(_compare(fn, x)) == [[]], fn.__name__

    def nested(x):
        def outer(y, _):
            y = lax.while_loop(lambda s: jnp.max(s) > 1.0, lambda s: s * 0.75, y)
            return jnp.exp(y) - 0.5, None
        return lax.scan(outer, x, None, length=3)[0]
    # (the scan's next carry is computed from the while's result, not from the carry)
    assert _one_buffer_carries(_compare(nested, x)) == [[], [0]]


@pytest.mark.parametrize("seed", range(60))
def test_random_programs(poison, seed):
    check_program(10_000 + seed)

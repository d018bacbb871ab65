"""Scatters compiled into native code (``backends/cpu/scatter.py``) against the reference
backend: every combining kind, every mode, repeated and out-of-range indices, windows,
batching axes, inside loops; and no call back into Python for them."""

import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from helpers import cpu_and_reference, random_array

pytestmark = pytest.mark.cpu_compiler

RNG = np.random.default_rng(21)
KINDS = {"set": lax.scatter, "add": lax.scatter_add, "sub": lax.scatter_sub,
         "mul": lax.scatter_mul, "min": lax.scatter_min, "max": lax.scatter_max}
MODES = ["clip", "fill", "promise_in_bounds"]


def _same(fn, *args):
    """``fn`` compiled natively (one call, no host step) gives the reference's values."""
    cpu, ref = cpu_and_reference(fn, *args)
    assert "calling back" not in cpu.runs_as, cpu.runs_as
    for got, want in zip(cpu.run(*args), ref.run(*args)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    return cpu


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float64])
def test_rows_with_repeated_and_out_of_range_indices(kind, mode, dtype):
    """Rows of a matrix updated at indices that repeat, are negative or lie past the end
    (dropped, or clamped under clip), after a kernel, so the program is one native call."""
    with nbjax.enable_x64(dtype == np.float64):
        operand = random_array(RNG, (7, 5), dtype)
        updates = random_array(RNG, (6, 5), dtype)
        indices = np.array([[1], [4], [1], [-1], [9], [6]], np.int32)
        dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))

        def f(x, i, u):
            return KINDS[kind](x * 1, i, u, dn, mode=mode) + 0
        _same(f, operand, indices, updates)


@pytest.mark.parametrize("mode", MODES)
def test_windows_batching_axes_and_two_index_components(mode):
    """2x2 windows started by two index components (one clamped or dropped at the edge),
    and an operand batching axis paired with the indices' first axis."""
    operand = random_array(RNG, (3, 6, 5), np.float32)
    indices = np.array([[[0, 0], [4, 3], [5, 4]], [[2, 1], [2, 1], [-1, 2]],
                        [[1, 3], [0, 4], [3, 0]]], np.int64)
    updates = random_array(RNG, (3, 3, 2, 2), np.float32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(2, 3), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=(1, 2),
                                     operand_batching_dims=(0,),
                                     scatter_indices_batching_dims=(0,))

    def f(x, i, u):
        return lax.scatter_add(x + 0, i, u * 1, dn, mode=mode)
    _same(f, operand, indices, updates)


def test_huge_unsigned_indices_stay_out_of_range():
    operand = np.zeros(5, np.float32)
    indices = np.array([[2], [np.iinfo(np.uint64).max], [2 ** 63]], np.uint64)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    with nbjax.enable_x64(True):
        _same(lambda x, i: lax.scatter_add(x * 2, i, jnp.ones(3, np.float32), dn),
              operand, indices)


def test_at_updates_and_embedding_gradients_inside_a_loop():
    """What users write: ``.at[]`` updates and the gradient of a row lookup (a scatter-add
    of repeated rows), in the body of a scan: native loops, no host step."""
    table = random_array(RNG, (10, 4), np.float32)
    tokens = RNG.integers(0, 10, (6, 3)).astype(np.int32)

    def f(table, tokens):
        def step(acc, ids):
            g = nbjax.grad(lambda t: jnp.tanh(t[ids]).sum())(table)
            return acc.at[ids[0]].add(1.0).at[ids].max(g.sum(1)[ids]), g.sum()
        return lax.scan(step, jnp.zeros(10, np.float32), tokens)
    cpu = _same(f, table, tokens)
    report = cpu.plan.report()
    assert "scan compiled as a native loop" in report and "3 native library calls" in report
    assert "host step" not in report


def test_empty_updates_leave_the_operand():
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    _same(lambda x, i, u: lax.scatter_add(x * 1, i, u, dn) - 1,
          random_array(RNG, (4, 3), np.float32), np.zeros((0, 1), np.int32),
          np.zeros((0, 3), np.float32))


def test_a_row_of_updates_is_added_by_vector_instructions():
    """``segment_sum`` of rows: each row's index is read once, outside the loop over its
    elements, and that loop is vectorised (the alias scopes of the scatter's buffers tell
    LLVM that writing the result leaves the updates and the indices alone)."""
    x = RNG.standard_normal((300, 16)).astype(np.float32)
    segments = RNG.integers(-3, 40, 300).astype(np.int32)
    cpu = _same(lambda x, s: nbjax.ops.segment_sum(x * 1, s, 37), x, segments)
    text = cpu.jit_module.function_ir("library_scatter-add")
    assert re.search(r"fadd <\d+ x float>", text), text
    assert "!alias.scope" in text and "!noalias" in text


def _carried_in_one_buffer(cpu):
    """The positions among the body's outputs of the carries that the loop of ``cpu``'s
    plan keeps in one buffer, updated in place (``buffer_plan.accumulated_inputs``)."""
    from nbjax.backends.cpu import buffer_plan
    (loop,) = [g for g in cpu.plan.groups if g.kind == "loop"]
    body = loop.subprograms[-1]
    return sorted(buffer_plan.accumulated_inputs(body.closed.jaxpr,
                                                 body.plan.groups).values())


def test_a_loop_updates_a_carry_in_place_where_nothing_reads_it_after():
    """``x.at[i].set(v)`` and ``.add`` on a fori_loop's or a scan's carry: the loop keeps
    the carry in one buffer that the scatter updates in place (it copied the whole carry
    every iteration). Where the body reads the carry after the update (as a scan's ys,
    through a view as the scatter's own updates), the carry keeps two buffers. The
    values are the reference's either way, reads before the update included."""
    rows = random_array(RNG, (16, 8), np.float32)

    def filled(rows):
        def body(i, c):
            return c.at[i].set(rows[i] * 2.0 + c[i - 1])   # reads c before updating it
        return lax.fori_loop(0, 16, body, jnp.zeros((16, 8), np.float32))
    assert _carried_in_one_buffer(_same(filled, rows)) == [1]

    def counted(rows, ids):
        def step(c, i):
            return c.at[i].add(1.0), None
        return lax.scan(step, rows[:, 0] * 0, ids)[0]
    ids = RNG.integers(-2, 18, 40).astype(np.int32)
    assert _carried_in_one_buffer(_same(counted, rows, ids)) == [0]

    def also_output(rows, ids):
        def step(c, i):
            return c.at[i].add(1.0), c.sum()     # c read after the scatter
        return lax.scan(step, rows[:, 0] * 0 + 1, ids)
    assert _carried_in_one_buffer(_same(also_output, rows, ids)) == []

    def shifted(rows):
        def body(i, c):
            return c.at[(i + 1) % 16].set(c[i])   # c[i]: a kernel's, before the update
        return lax.fori_loop(0, 16, body, rows)
    assert _carried_in_one_buffer(_same(shifted, rows)) == [1]

    whole = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                        scatter_dims_to_operand_dims=(0,))

    def doubled(rows):
        def body(i, c):   # the updates, c[None], are a view of c's buffer
            return lax.scatter_add(c, jnp.zeros((1, 1), np.int32), c[None], whole)
        return lax.fori_loop(0, 3, body, rows[0])
    assert _carried_in_one_buffer(_same(doubled, rows)) == []


def _updated_in_place(cpu):
    """The primitive names of the top-level steps of ``cpu``'s plan that change their
    operand's buffer into their result (``FusionGroup.in_place``, no copy of it first)."""
    return [g.eqns[0].primitive.name for g in cpu.plan.groups
            if g.kind == "library" and g.in_place]


def test_a_scatter_updates_an_operand_the_program_computes_in_place(monkeypatch):
    """The gradient of a gather (an embedding's) scatters into zeros the program makes: the
    scatter adds into that buffer rather than into a copy of it (which cost 5x the adds for
    a 20000x128 table), and says so in the fusion report. An operand that is an input, that
    is read after the scatter (by a kernel, as another output, through a view) or that is
    itself an output keeps its buffer: the scatter writes a copy. Regions given back are
    poisoned (``buffer_plan.POISON``), so a step reading a value the scatter overwrote,
    or a region given back early, would give other values."""
    from nbjax.backends.cpu import buffer_plan
    monkeypatch.setattr(buffer_plan, "POISON", True)
    table = random_array(RNG, (160, 8), np.float32)  # (more than a folded constant)
    ids = RNG.integers(-3, 165, (6, 4)).astype(np.int32)
    updates = random_array(RNG, (6, 4, 8), np.float32)

    def embedding_grad(table, ids):
        return nbjax.grad(lambda t: jnp.sum(jnp.sin(t[ids]).mean(axis=1)))(table)
    cpu = _same(embedding_grad, table, ids)
    assert _updated_in_place(cpu) == ["scatter-add"]
    assert "changes its operand's buffer in place" in str(cpu.plan)

    def counted(ids, updates):    # the result is the program's: its zeros are made there
        return (jnp.zeros((160, 8), np.float32) + 1.0).at[ids].add(updates).reshape(80, 16)
    assert _updated_in_place(_same(counted, ids, updates)) == ["scatter-add"]

    def twice(table, ids, updates):   # the first result is updated in place by the second
        once = (table * 2.0).at[ids].set(updates)
        return once.at[ids[:, :2]].mul(updates[:, :2] - 1.0) + 0.5
    assert _updated_in_place(_same(twice, table, ids, updates)) == ["scatter", "scatter-mul"]

    def of_input(table, ids, updates):
        return table.at[ids].max(updates)
    assert _updated_in_place(_same(of_input, table, ids, updates)) == []

    def read_after(table, ids, updates):
        base = table - 1.0
        return base.at[ids].add(updates) * base

    def output_too(table, ids, updates):
        base = table - 1.0
        return base.at[ids].add(updates), base

    def through_a_view(table, ids, updates):
        base = table - 1.0
        wide = jnp.concatenate([updates, updates * 16.0], axis=-1)
        return base.reshape(80, 16).at[ids % 80].min(wide).reshape(-1) - base.reshape(-1)
    for fn in (read_after, output_too, through_a_view):
        assert _updated_in_place(_same(fn, table, ids, updates)) == [], fn.__name__

    def in_a_scan(table, ids):
        def step(c, i):
            histogram = jnp.zeros(1280, np.float32).at[i * 7].add(1.0)
            return c + histogram, None
        return lax.scan(step, table.reshape(-1) * 0, ids)[0]
    cpu = _same(in_a_scan, table, ids)
    (loop,) = [g for g in cpu.plan.groups if g.kind == "loop"]
    assert [g.in_place for g in loop.subprograms[-1].plan.groups if g.kind == "library"] \
        == [True]

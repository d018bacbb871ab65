"""What makes the CPU backend fast, checked in the generated code and the plans (no timings):
streaming stores for large outputs, reductions in local (float64) accumulators split across
the cores, gathers and pads as kernels, the planner materialising a value that a kernel
would otherwise recompute at many places (the 81-tap blur), and rows cut into loops where the
body compares their index with a constant (a concatenation computes each operand in its own
loop)."""

import platform
import re

import numpy as np
import pytest
from llvmlite import ir

import nbjax
import nbjax.numpy as jnp
from nbjax import lax as jax_lax
from nbjax.backends import compile
from nbjax.backends.cpu import codegen, runtime, streaming
from nbjax.compiler.kernel import KernelBuilder, KernelOutput, LoopKernel, live_ops
from helpers import cpu_and_reference

RNG = np.random.default_rng(5)
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _check(f, *args, rtol=0.0, atol=None):
    cpu, ref = cpu_and_reference(f, *args)
    for out, expected in zip(cpu.run(*args), ref.run(*args)):
        assert out.shape == expected.shape and out.dtype == expected.dtype
        np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol if atol is None else atol)
    return cpu


def power_sum(x):
    return x + x * x + x * x * x


# --- streaming (non-temporal) stores -------------------------------------------------------

@pytest.mark.skipif(not X86, reason="streaming stores are emitted on x86 only")
@pytest.mark.parametrize("shape", [(2048, 1024), (1031, 2053), (2 ** 21 + 7,)])
def test_large_memory_bound_outputs_use_streaming_stores_and_a_fence(shape):
    # Rows whose length is not a multiple of the 64-byte line exercise the ordinary head and
    # tail loops around the aligned blocks; the results must not change.
    x = RNG.standard_normal(shape).astype(np.float32)
    cpu = _check(power_sum, x)
    (kernel,) = cpu.kernels
    assert streaming.streams(kernel.loop)
    assert "!nontemporal" in kernel.texts["optimised LLVM IR"]
    assert "llvm.x86.sse.sfence" in kernel.texts["optimised LLVM IR"]


@pytest.mark.skipif(not X86, reason="streaming stores are emitted on x86 only")
def test_every_output_of_a_multi_output_kernel_streams():
    x = RNG.standard_normal((1024, 2048)).astype(np.float32)
    cpu = _check(lambda x: (x * 2.0, x + 1.0), x)
    (kernel,) = cpu.kernels
    assert len(kernel.loop.outputs) == 2 and streaming.streams(kernel.loop)
    assert kernel.texts["optimised LLVM IR"].count("!nontemporal") >= 2


def test_small_outputs_reductions_and_arithmetic_bound_bodies_do_not_stream():
    small = RNG.standard_normal((64, 64)).astype(np.float32)
    large = RNG.standard_normal((1024, 2048)).astype(np.float32)
    for f, x in [(power_sum, small), (lambda x: jnp.exp(x) * 2.0, large),
                 (lambda x: x.sum(1), large)]:
        closed = nbjax.make_jaxpr(f)(x)
        (kernel,) = compile(closed, "cpu", "t").kernels
        assert not streaming.streams(kernel.loop)
        assert "!nontemporal" not in kernel.texts["optimised LLVM IR"]


# --- reductions ----------------------------------------------------------------------------

def test_float_sums_accumulate_long_rows_in_float64():
    # A float32 running sum stops growing at 2**24 (adding 1.0 rounds back); the kernel sums
    # each row longer than ``codegen.SHORT_ROW`` in a float64 local and rounds once.
    x = np.ones(4001, np.float32)
    x[0] = 2.0 ** 24
    cpu, _ = cpu_and_reference(lambda x: jnp.sum(x), x)
    out = cpu.run(x)[0]
    assert out == np.float32(np.sum(x, dtype=np.float64))
    code = cpu.kernels[0].texts["LLVM IR"]
    assert "fadd reassoc" in code and "double" in code
    # Short rows (a softmax's, a layer norm's) are summed in float32, in many partial sums.
    x = RNG.standard_normal((8, codegen.SHORT_ROW)).astype(np.float32)
    cpu = _check(lambda x: jnp.sum(x, axis=1), x, rtol=1e-6, atol=1e-6 * codegen.SHORT_ROW)
    assert "double" not in cpu.kernels[0].texts["LLVM IR"]


def test_float_sum_is_vectorised():
    x = RNG.standard_normal((64, 256)).astype(np.float32)
    # (a row's sum may cancel to far below its terms: the absolute part scales with them)
    cpu = _check(lambda x: x.sum(1), x, rtol=1e-6, atol=1e-6 * np.abs(x).sum(1).max())
    ir_text = cpu.kernels[0].texts["optimised LLVM IR"]
    assert "x double>" in ir_text or "x float>" in ir_text


@pytest.mark.parametrize("f", [
    lambda x: jnp.sum(x * x),
    lambda x: jnp.max(x, axis=0),
    lambda x: (jnp.min(x), x.sum(axis=0), x.sum(axis=1)),
    lambda x: jnp.prod(jnp.abs(x) * 0.01 + 1.0, axis=0),
])
def test_reductions_over_the_split_axis_combine_per_core_partials(f):
    x = RNG.standard_normal((1 << 11, 1 << 9)).astype(np.float32)  # 2**20 elements: split
    x[3, 7] = np.nan
    # Sums of 2048 terms of size ~1 (results up to ~100) round differently from NumPy's
    # pairwise sums: an absolute tolerance of a few float32 ulps of the result.
    cpu = _check(f, x, rtol=1e-5, atol=1e-3)
    loops = [k.loop for k in cpu.kernels]
    assert any(runtime.partial_outputs(loop) for loop in loops)
    assert "_combine" in cpu.jit_module.optimised_ir


def test_integer_reductions_split_across_cores_are_exact():
    x = RNG.integers(-1000, 1000, (1 << 10, 1 << 10)).astype(np.int32)
    _check(lambda x: (x.sum(), x.max(0), (x & 1).astype(bool).any()), x)


def test_run_split_uses_every_core_and_short_extents():
    calls = []

    def fn(*args):
        calls.append(args[-2:])
    runtime.run_split(fn, [], 1)
    assert calls == [(0, 1)]
    calls.clear()
    runtime.run_split(fn, [], 10)
    assert sorted(calls) == [(10 * k // min(runtime.THREADS, 10),
                              10 * (k + 1) // min(runtime.THREADS, 10))
                             for k in range(min(runtime.THREADS, 10))]
    assert runtime.THREADS == runtime.core_count() >= 1


# --- gathers, pads and the blur ------------------------------------------------------------

def _blur(img):
    """The seed blur: 81 weighted shifted slices of the edge-padded image."""
    r = np.arange(9) - 4
    g = np.exp(-r ** 2 / (2 * 2.5 ** 2))
    weights = (np.outer(g, g) / np.outer(g, g).sum()).astype(np.float32)
    xp = jnp if not isinstance(img, np.ndarray) else np
    h, w = img.shape
    padded = xp.pad(img, 4, mode="edge")
    out = xp.zeros_like(img)
    for i in range(9):
        for j in range(9):
            out = out + weights[i, j] * padded[i:i + h, j:j + w]
    return out


def test_edge_padded_blur_materialises_the_pad_once_then_one_blur_kernel():
    img = RNG.standard_normal((23, 31)).astype(np.float32)
    cpu = _check(_blur, img)
    assert [g.kind for g in cpu.plan.groups] == ["kernel", "kernel"]
    pad, blur = cpu.kernels
    assert {e.primitive.name for e in pad.eqns} == {"slice", "broadcast_in_dim", "concatenate"}
    padded = blur.loop.inputs.index(pad.loop.outputs[0].var)
    assert sum(op.name == "load" and op.attr == padded for op in blur.loop.body) == 81
    assert any("read at 81 places" in d.reason for d in cpu.plan.decisions)
    np.testing.assert_allclose(cpu.run(img)[0], _blur(img), rtol=1e-6, atol=1e-6)


def test_a_value_read_at_few_places_is_still_fused():
    x = RNG.standard_normal((6, 9)).astype(np.float32)
    cpu = _check(lambda x: (lambda p: p[:-1] + p[1:])(jnp.exp(x) * 2.0), x, rtol=1e-6)
    assert [g.kind for g in cpu.plan.groups] == ["kernel"]


@pytest.mark.parametrize("f", [
    lambda x, i: x[i],
    lambda x, i: x[:, i],
    lambda x, i: jnp.take(x, i, axis=1, mode="clip"),
    lambda x, i: jnp.take(x, i, axis=0, mode="fill", fill_value=-7.0),
    lambda x, i: x[i, i[::-1]] * 2.0,
    lambda x, i: jnp.take_along_axis(x, jnp.broadcast_to(i[:5, None] % 5, (5, 4)), axis=1),
])
def test_gathers_are_kernels_matching_the_reference(f):
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    i = np.array([0, 4, -1, 9, 2, -8, 3], np.int32)  # out of range on purpose
    cpu = _check(f, x, i)
    assert all(g.kind == "kernel" for g in cpu.plan.groups)


def test_gather_with_unsigned_and_batched_indices():
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    u = np.array([[0, 9], [3, 1], [2, 2]], np.uint8)
    _check(lambda x, u: jnp.take_along_axis(x, u[:, :, None].astype(jnp.int32) % 4, axis=1), x, u)
    _check(lambda x, u: x[:, u[:, 0], :], x, u)
    _check(lambda x, u: nbjax.vmap(lambda row, k: row[k])(x, u[:, 1] % 4), x, u)


def _max_pool(x):
    """A 2x2 max-pool by four strided slices, as the CNN benchmark writes it."""
    return jnp.maximum(jnp.maximum(x[:, ::2, ::2], x[:, 1::2, ::2]),
                       jnp.maximum(x[:, ::2, 1::2], x[:, 1::2, 1::2]))


@pytest.mark.parametrize("f, shape", [
    # The gradient of the pool: its slices' transposes are pads with interior padding,
    # selected by the parity of rows and columns. The channels' axis is innermost and
    # padded by none: its index is read as it is, not clamped, so no gather.
    (nbjax.grad(lambda x: jnp.sum(_max_pool(jnp.maximum(x, 0.0)) ** 2)), (4, 10, 6, 32)),
    (lambda x, y: jax_lax.pad(x, 0.0, ((1, 2, 1), (0, 0, 0))) * y, ((5, 64), (12, 64))),
])
def test_reads_along_an_axis_a_pad_leaves_alone_stay_contiguous(f, shape):
    shapes = shape if isinstance(shape[0], tuple) else (shape,)
    args = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    cpu = _check(f, *args, rtol=1e-6, atol=1e-6)
    for kernel in cpu.kernels:
        assert "gather" not in kernel.texts["optimised LLVM IR"], kernel.name


@pytest.mark.parametrize("f, shapes", [
    (lambda x, y: x + jax_lax.pad(y * 2.0, 0.0, ((1, 1, 0), (1, 1, 0))), ((34, 70), (32, 68))),
    (lambda x, y: x.at[1:-1, 1:-1].add(y - 1.0), ((34, 70), (32, 68))),    # a wave step
    (lambda x, y: x.at[2:5, 3].set(y[:3, 0]) * 2.0, ((8, 40), (32, 68))),   # one column
    (lambda x, y: jax_lax.pad(y, -1.0, ((0, 0, 0), (-2, 5, 0))) - x, ((32, 71), (32, 68))),
])
def test_a_pad_along_the_innermost_axis_cuts_its_loop(f, shapes):
    """A pad without interior padding compares the innermost index itself with constants,
    so its loop runs in pieces (``codegen.index_pieces``), in each of which the index is
    inside or outside the operand: the operand's loads are contiguous, not gathered."""
    x, y = (RNG.standard_normal(s).astype(np.float32) for s in shapes)
    cpu = _check(f, x, y, rtol=1e-6, atol=1e-6)
    (kernel,) = cpu.kernels
    assert codegen._cuts(kernel.loop).get(len(kernel.loop.shape) - 1)
    assert "gather" not in kernel.texts["optimised LLVM IR"], kernel.name


@pytest.mark.parametrize("f, shape, step", [
    (lambda x: jnp.repeat(x, 2, axis=1) * 2.0, (16, 200), 2),                # x[i, j // 2]
    (lambda x: jnp.repeat(x, 3, axis=1)[:, :-2] + 1.0, (5, 9), 3),           # a tail left
    (lambda x: jnp.stack([x, -x, x * 2], axis=-1).reshape(x.shape[0], -1) + 1, (40, 33), 3),
    (lambda x: jnp.repeat(jnp.repeat(x, 2, 0), 2, 1) - 1.0, (37, 29), 2),   # and an outer div
    (lambda x: jnp.tile(x, (1, 2)), (3, 10), 1),                             # x[i, j % 10]
    (lambda x: jnp.repeat(x, 2, axis=1).sum(axis=1), (8, 50), 2),            # in a reduction
])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_an_innermost_index_divided_by_small_constants_runs_over_quotients(f, shape, step,
                                                                             dtype):
    """A kernel dividing its innermost index by constants whose least common multiple is
    at most ``codegen.RESIDUE_MAX`` loops over the quotients, a copy of its body per
    remainder (``CpuLoops._residue_loops``): its loads contiguous, no gather."""
    x = (RNG.standard_normal(shape) * 10).astype(dtype)
    cpu = _check(f, x, rtol=1e-6, atol=1e-5)
    (kernel,) = cpu.kernels
    assert codegen.residue_step(kernel.loop) == step
    assert step == 1 or "gather" not in kernel.texts["optimised LLVM IR"]


@pytest.mark.skipif(not X86, reason="streaming stores are emitted on x86 only")
@pytest.mark.parametrize("n", [1024, 1031])
def test_streamed_rows_run_over_quotients_where_their_blocks_allow(n):
    """An output of 8 MiB or more streams its rows in blocks (``streaming``): a block that
    starts at a multiple of the residue step runs over quotients, one that does not (rows
    of 2062 floats are not all 64-byte aligned) the plain loop; both match the reference."""
    x = RNG.standard_normal((1024, n)).astype(np.float32)
    cpu = _check(lambda x: jnp.repeat(x, 2, axis=1) + 1.0, x)
    (kernel,) = cpu.kernels
    assert streaming.streams(kernel.loop) and codegen.residue_step(kernel.loop) == 2
    assert '"q1"' in kernel.texts["LLVM IR"]


def test_compile_of_the_seed_blur_is_one_module():
    img = RNG.standard_normal((47, 72)).astype(np.float32)
    ex = compile(nbjax.make_jaxpr(_blur)(img), "cpu", "blur")
    assert ex.jit_module.optimised_ir.count("define void @") == 2
    assert set(ex.compile_times) >= {"passes", "fusion", "codegen", "machine_code"}


# --- rows cut where the body compares their index with a constant ---------------------------

def _gates(a, b, c, d):
    """Four element-wise results joined along the row, as an LSTM's gate gradients are."""
    return jnp.concatenate([a * b, -(c * d), a * c + d, b * 2.0], axis=1)


def test_a_row_concatenation_computes_each_operand_in_its_own_loop():
    xs = [RNG.standard_normal((8, 96)).astype(np.float32) for _ in range(4)]
    cpu = _check(_gates, *xs)
    (kernel,) = cpu.kernels
    whole = (ir.Constant(codegen.I64, 0), ir.Constant(codegen.I64, 384))
    pieces = codegen.index_pieces(None, kernel.loop, 1, *whole)
    assert [(lo.constant, hi.constant) for lo, hi in pieces] == \
        [(0, 96), (96, 192), (192, 288), (288, 384)]
    # Each loop reads only its own operand, contiguously: no clamped index, no select
    # between the operands, no gather.
    optimised = kernel.texts["optimised LLVM IR"]
    assert not any(word in optimised for word in ("select", "smax", "smin", "gather"))


@pytest.mark.parametrize("f, selects", [
    (lambda a, b: jnp.stack([a * b, -b, a + b], axis=1), False),
    # (an edge pad concatenates along both axes: only its rows, the innermost, are cut)
    (lambda a, b: jnp.pad(a * b + 1.0, 3, mode="edge"), True),
])
def test_concatenations_cut_the_innermost_axis_they_join_along(f, selects):
    xs = [RNG.standard_normal((40, 70)).astype(np.float32) for _ in range(2)]
    (kernel,) = _check(f, *xs, rtol=1e-6, atol=1e-6).kernels
    optimised = kernel.texts["optimised LLVM IR"]
    assert ("select" in optimised) == selects and "gather" not in optimised


def test_a_concatenation_along_the_axis_split_between_the_cores_matches_the_reference():
    # 900 x 200 elements: the threads' shares of axis 0 start and stop inside the operands.
    xs = [RNG.standard_normal((300, 200)).astype(np.float32) for _ in range(3)]
    cpu = _check(lambda a, b, c: jnp.concatenate([a * b, -c, b + c], axis=0), *xs,
                 rtol=1e-6, atol=1e-6)
    assert runtime.THREADS == 1 or any("split between" in d.reason for d in cpu.plan.decisions)


@pytest.mark.parametrize("sizes", [(1, 5, 1), (0, 7, 3), (3, 0), (1,) * 12, (40, 24)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_row_concatenations_of_any_sizes_match_the_reference(sizes, dtype):
    # Operands of one or no elements along the row; more pieces than a row is cut into.
    xs = [(RNG.standard_normal((3, n)) * 10).astype(dtype) for n in sizes]
    _check(lambda *xs: jnp.concatenate([x * (k + 2) for k, x in enumerate(xs)], axis=1), *xs)


@pytest.mark.parametrize("f", [
    lambda x: jnp.concatenate([x * 2.0, x[:, :5] - 1.0], axis=1).sum(1),
    lambda x: jnp.concatenate([jnp.exp(x), -x], axis=1).max(1),
    lambda x: jnp.concatenate([x, x * x], axis=0) + 1.0,
])
def test_reductions_and_other_axes_of_cut_rows_match_the_reference(f):
    x = RNG.standard_normal((6, 33)).astype(np.float32)
    x[2, 4] = np.nan
    _check(f, x, rtol=1e-6, atol=1e-5)


def _cuts_of(compare, swap=False, axis=1, value=20):
    """The pieces of a [4, 50] kernel's row whose body holds one comparison."""
    ctx = KernelBuilder()
    i, c = ctx.index(axis), ctx.iconst(value)
    pred = getattr(ctx, compare)(*((c, i) if swap else (i, c)))
    var = nbjax.core.Var(nbjax.core.ShapedArray((4, 50), np.dtype(np.float32)))
    out = KernelOutput(var, ctx.select(pred, ctx.const(1.0, np.float32), 0.0), (0, 1))
    loop = LoopKernel("k", (4, 50), [], [out], live_ops(ctx.ops, [out]))
    pieces = codegen.index_pieces(None, loop, 1, ir.Constant(codegen.I64, 0),
                                  ir.Constant(codegen.I64, 50))
    return [(lo.constant, hi.constant) for lo, hi in pieces]


@pytest.mark.parametrize("compare, swap, pieces", [
    ("lt", False, [(0, 20), (20, 50)]), ("le", False, [(0, 21), (21, 50)]),
    ("gt", True, [(0, 20), (20, 50)]), ("ge", True, [(0, 21), (21, 50)]),
    ("eq", False, [(0, 20), (20, 21), (21, 50)]), ("ne", True, [(0, 20), (20, 21), (21, 50)]),
])
def test_comparisons_of_the_row_index_either_way_round_cut_the_row(compare, swap, pieces):
    assert _cuts_of(compare, swap) == pieces


def test_only_comparisons_of_the_row_index_within_the_row_cut_it():
    assert _cuts_of("lt", axis=0) == [(0, 50)]
    assert _cuts_of("lt", value=50) == _cuts_of("lt", value=-3) == [(0, 50)]


# --- kernels of the same code --------------------------------------------------------------

def _two_norms(x, y, w, scale_y=2.0):
    def norm(v, scale):
        return (v - v.mean(axis=-1, keepdims=True)) * scale
    return norm(x, 2.0) @ w, norm(y, scale_y) @ w


def test_a_kernel_of_the_same_code_as_an_earlier_one_calls_it():
    x, y = (RNG.standard_normal((32, 64)).astype(np.float32) for _ in range(2))
    w = RNG.standard_normal((64, 16)).astype(np.float32)
    cpu = _check(_two_norms, x, y, w, rtol=1e-5)
    same = cpu.layout.same_code
    # each norm is one kernel (its mean, then the scaled differences: two row stages)
    assert len(cpu.kernels) == 2 and len(same) == 1, cpu.plan
    assert set(same.values()) | set(same) == {k.name for k in cpu.kernels}
    module = cpu.jit_module.optimised_ir
    for k in cpu.kernels:
        if k.name in same:
            assert k.texts["optimised LLVM IR"].startswith(
                f"; {k.name} runs the code of {same[k.name]}:")
            body = module.split(f"define void @{k.name}(", 1)[1].split("\n}", 1)[0]
            assert f"call void @{same[k.name]}(" in body and "fadd" not in body \
                and "load" not in body


def test_kernels_differing_in_a_constant_or_a_shape_keep_their_own_code():
    x, y = (RNG.standard_normal((32, 64)).astype(np.float32) for _ in range(2))
    w = RNG.standard_normal((64, 16)).astype(np.float32)
    cpu = _check(lambda x, y, w: _two_norms(x, y, w, scale_y=3.0), x, y, w, rtol=1e-5)
    assert cpu.layout.same_code == {}  # (the means are stages of the two kernels)
    cpu = _check(_two_norms, x, y[:16], w, rtol=1e-5)
    assert cpu.layout.same_code == {}


def test_the_module_text_reuses_the_kernels_text_unchanged(monkeypatch):
    """``ModuleBuilder.text`` (which does not print kernels twice) is what llvmlite prints,
    for a module with kernels of the same code, mathlib functions and control flow."""
    texts = []
    real = codegen.ModuleBuilder.text

    def text(mb):
        texts.append((real(mb), str(mb.module)))
        return texts[-1][0]
    monkeypatch.setattr(codegen.ModuleBuilder, "text", text)

    def f(x, y, w):
        a, b = _two_norms(x, y, w)
        h, _ = nbjax.lax.scan(lambda h, _: (jnp.tanh(h @ w.T) + jnp.exp(-h * h), None), x,
                              None, length=3)
        return a, b, h
    x, y = (RNG.standard_normal((32, 64)).astype(np.float32) for _ in range(2))
    _check(f, x, y, RNG.standard_normal((64, 64)).astype(np.float32) * 0.1, rtol=1e-5)
    assert texts and all(ours == llvmlites for ours, llvmlites in texts)


def test_the_code_of_a_kernel_includes_its_loops_hints():
    from llvmlite import ir
    from nbjax.backends.cpu import codegen

    mb = codegen.ModuleBuilder("m")
    fns = []
    for n, width in enumerate([8, 8, 16]):
        fn = ir.Function(mb.module, ir.FunctionType(ir.VoidType(), [ir.IntType(64)]), f"k{n}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        loop = fn.append_basic_block("loop")
        b.branch(loop)
        b.position_at_end(loop)
        b.cbranch(b.icmp_signed("<", fn.args[0], ir.Constant(ir.IntType(64), 4)), loop,
                  fn.append_basic_block("done")).set_metadata("llvm.loop", mb.loop_hints(width))
        b.position_at_end(fn.blocks[-1])
        b.ret_void()
        fns.append(fn)
    keys = [codegen._code_key(fn, str(fn)) for fn in fns]
    assert str(fns[0]).replace('"k0"', '"k1"') != str(fns[1])  # distinct loop nodes
    assert keys[0] == keys[1] != keys[2]


# --- what LLVM is given to optimise --------------------------------------------------------

def _innermost_loop_hints(loop):
    """The ``llvm.loop`` hints (their strings) on the back edge of ``loop``'s innermost
    loop, in the code generated for it."""
    import re

    mb = codegen.ModuleBuilder("m")
    mb.add_kernel(loop)
    text = mb.text()
    axis = len(loop.shape) - 1
    node = re.findall(rf'br label %"i{axis}"(?:, !llvm.loop !(\d+))?', text)[-1]  # (the
    if not node:  # back edge: the branch into the loop comes first)
        return []
    operands = re.search(rf"^!{node} = !{{(.*)}}$", text, re.M).group(1)
    return [re.search(rf"^!{n} = !{{(.*)}}$", text, re.M).group(1)
            for n in re.findall(r"!(\d+)", operands) if n != node]


@pytest.mark.parametrize("kind", ["element-wise", "reducing", "arithmetic"])
def test_rows_are_kept_from_the_unroller(kind):
    """The unroller's copies of a vectorised row made LLVM's time on a residual add 1.7x,
    and on a layer norm's rows 1.7x, for nothing measurable at run time: a row of any
    kind is vectorised and interleaved, not unrolled (``unroll.count`` 1, which leaves the
    vectoriser its interleaving, where ``unroll.disable`` would not)."""
    x = RNG.standard_normal((64, 256)).astype(np.float32)
    f = {"element-wise": lambda x: x * 2.0 + 1.0,
         "reducing": lambda x: jnp.sum(x * 2.0, axis=1),
         "arithmetic": lambda x: jnp.exp(x) * jnp.tanh(x) + jnp.sin(x) * x}[kind]
    cpu = _check(f, x, rtol=1e-5, atol=1e-5 * np.abs(x).sum(1).max())
    (kernel,) = cpu.kernels
    hints = _innermost_loop_hints(kernel.loop)
    assert any('"llvm.loop.unroll.count", i32 1' in h for h in hints), hints
    assert not any("unroll.disable" in h for h in hints), hints


@pytest.mark.parametrize("summed, row", [(False, 256), (True, 256), (True, 2048)])
def test_shared_math_functions_have_the_widths_the_loop_can_take(summed, row):
    """A kernel sharing its math functions (``codegen.INLINE_MATH_CALLS``) declares the
    vector variants its loop can be vectorised at: the float32 width, and half of it
    where the loop accumulates float32 sums in float64, those of rows longer than
    ``codegen.SHORT_ROW`` (a variant nothing calls still costs LLVM milliseconds)."""
    import re

    from nbjax.backends.cpu.runtime import float32_lanes

    def chain(x):
        for _ in range(codegen.INLINE_MATH_CALLS + 1):
            x = jnp.tanh(x) * 0.5 + 0.25
        return jnp.sum(x, axis=1) if summed else x
    x = RNG.standard_normal((16384 // row, row)).astype(np.float32)
    cpu = _check(chain, x, rtol=1e-5, atol=1e-5 * row ** 0.5)
    (kernel,) = cpu.kernels
    mb = codegen.ModuleBuilder("m")
    mb.add_kernel(kernel.loop)
    declared = r'declare <(\d+) x float> @"nbjax_math_tanh_float32_v'
    widths = {int(w) for w in re.findall(declared, mb.text())}
    lanes = float32_lanes()
    assert widths == ({lanes // 2, lanes} if summed and row > codegen.SHORT_ROW else {lanes})


def test_a_small_kernel_calls_a_shared_math_function_once_per_value():
    """A double pendulum's step, a small kernel of four elements that a loop runs: each of
    its elements (the stack's pieces) computes the sines and cosines of the same angles. The
    shared math functions are pure (``readnone``) and the light tier numbers values
    (NewGVN), so each is called once per distinct argument (1.8 -> 0.5 ms for 5000 steps)."""
    import re

    def step(s, _):
        t1, t2, w1, w2 = s[0], s[1], s[2], s[3]
        d = t1 - t2
        a1 = (-jnp.sin(t1) - jnp.sin(d) * w2 ** 2 * jnp.cos(d)) / (2 - jnp.cos(2 * d))
        a2 = (jnp.sin(d) * (w1 ** 2 + jnp.cos(t1)) * jnp.cos(d)) / (2 - jnp.cos(2 * d))
        return s + 0.001 * jnp.stack([w1, w2, a1, a2]), None

    s0 = np.array([1.0, 2.0, 0.0, 0.0], np.float32)
    cpu = _check(lambda s: jax_lax.scan(step, s, None, length=50)[0], s0, rtol=1e-5,
                 atol=1e-6)
    (kernel,) = cpu.kernels
    assert kernel.loop.math_calls > codegen.INLINE_MATH_CALLS  # (so they are shared)
    optimised = kernel.texts["optimised LLVM IR"]
    calls = re.findall(r"call float @\"?nbjax_math_(?:sin|cos)_float32\"?\(", optimised)
    assert 0 < len(calls) <= kernel.loop.math_calls  # (one per distinct call in the body)


def test_shared_math_functions_are_compiled_once_and_linked():
    """Two programs whose vectorised loops call ``sin``: neither module defines its vector
    variant, each declares it, and the process compiled it once (``library``: by O3 it
    took 40 ms, spent again in every such program when its module defined it)."""
    from nbjax.backends.cpu import library
    from nbjax.backends.cpu.runtime import float32_lanes

    variant = f"nbjax_math_sin_float32_v{float32_lanes()}"
    x = RNG.uniform(-4, 4, (64, 256)).astype(np.float32)
    first = _check(lambda x: jnp.sin(x) * 2.0, x, rtol=1e-6, atol=1e-6)
    made = library._modules[variant]
    second = _check(lambda x: jnp.sin(x + 1.0) - x, x, rtol=1e-6, atol=4e-6)
    assert library._modules[variant] is made
    for cpu in (first, second):
        code = cpu.jit_module.optimised_ir
        assert re.search(rf"declare .*@\"?{variant}\"?\(", code)
        assert not re.search(rf"define .*@\"?{variant}\"?\(", code)
        assert re.search(rf"call .*@\"?{variant}\"?\(", code)


@pytest.mark.parametrize("n", [16, 64])
def test_a_short_math_loop_that_a_scan_runs_often_is_vector_code(n):
    """A scan of 1000 steps of ``sin`` on 16 elements: its kernel is worth O3's time (its
    work counts the math function's cost, ``codegen.small``), the 16 iterations unrolled
    become calls of the vector variant (which is declared ``willreturn``: without it the
    SLP vectoriser left 16 scalar calls, 200 us a call against jax's 50; now 34)."""
    from nbjax.backends.cpu.runtime import float32_lanes

    def program(x):
        def body(c, _):
            c = jnp.sin(c) * 1.5 + 0.1
            return c, jnp.sum(c)
        return jax_lax.scan(body, x, None, length=1000)
    x = np.linspace(0, 1, n, dtype=np.float32)
    # (the map is chaotic: the carries part by ~1e-6 per step in float32 whatever the code)
    cpu, ref = cpu_and_reference(program, x)
    got, want = cpu.run(x), ref.run(x)
    np.testing.assert_allclose(got[1][:50], want[1][:50], rtol=1e-4, atol=1e-4 * n)
    (kernel,) = cpu.kernels
    assert not codegen.small(kernel.loop, 1000)
    code = kernel.texts["optimised LLVM IR"]
    assert f"nbjax_math_sin_float32_v{float32_lanes()}" in " ".join(
        re.findall(r"call [^@]*@\"?([\w.]+)", code))
    assert not re.search(r"call float @\"?nbjax_math_sin_float32\"?\(", code)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.bool_])
def test_a_kernel_that_only_writes_zeros_sets_its_rows_with_memset(dtype, monkeypatch):
    """``zeros_like`` inside a program (a scan's initial carry) is a kernel of no inputs:
    it sets exactly the rows it is given to zero (every byte; as a kernel split between
    the cores, given a share of them), compiled by the light tier (O3 took 3 ms on the
    loop it made a ``memset`` of anyway)."""
    from nbjax.backends.cpu import pipeline
    from nbjax.compiler import Timer

    x = (RNG.standard_normal((40, 70, 3)) > 0).astype(dtype)
    with nbjax.enable_x64(dtype == np.float64):
        cpu = _check(lambda x: (jnp.zeros_like(x), x + x), x)
    (fill,) = [k for k in cpu.kernels if codegen.zero_fill(k.loop)]
    monkeypatch.setattr(runtime, "splits", lambda loop: True)
    mb = codegen.ModuleBuilder("m")
    assert "llvm.memset" in mb.add_kernel(fill.loop)
    assert mb.light[fill.loop.name] == pipeline.CALLS
    out = np.full(x.nbytes, 0xA5, np.uint8)
    module = runtime.JitModule(mb.text(), Timer(), mb.light)
    module.function(fill.name, 1)(out.ctypes.data, 5, 31)  # rows [5, 31) of 40
    rows = out.reshape(40, -1)
    assert not rows[5:31].any() and (rows[:5] == 0xA5).all() and (rows[31:] == 0xA5).all()


def test_a_kernel_the_cores_do_not_share_has_its_whole_outer_axis_as_its_bounds():
    """Only a kernel split between the cores is given a share of its outer axis: any other
    is compiled with the whole axis as constants, so LLVM folds what the bounds decide. A
    ``jnp.roll`` stencil in a loop (a concatenation read through a slice: its index plus a
    constant compared with constants) is cut into pieces without a gather."""
    def burgers(u):
        def step(i, u):
            ux = (jnp.roll(u, -1) - jnp.roll(u, 1)) / 0.02
            return u - 1e-5 * u * ux + 1e-6 * (jnp.roll(u, -1) - 2 * u + jnp.roll(u, 1))
        return jax_lax.fori_loop(0, 1000, step, u)
    u = RNG.standard_normal(1024).astype(np.float32)
    (kernel,) = _check(burgers, u, rtol=1e-5, atol=1e-5).kernels
    assert codegen._cuts(kernel.loop) == {0: {1, 1023}} and not runtime.splits(kernel.loop)
    optimised = kernel.texts["optimised LLVM IR"]
    assert "gather" not in optimised and re.search(r"<(8|16) x float>", optimised)
    signature = re.search(r"define void @\S+\((.*)\)", optimised).group(1)
    start, stop = (arg.split()[-1] for arg in signature.split(", ")[-2:])
    body = optimised[optimised.index("{"):]
    assert not re.search(re.escape(start) + r"\b", body) and \
        not re.search(re.escape(stop) + r"\b", body)

"""The fusion planner: which equations become one kernel, and the recorded reasons.

Each plan is also run on the CPU backend and compared with the reference backend, so a
planning decision that computes the wrong thing fails here too."""

import warnings
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends import compile, get_target
from nbjax.backends.cpu import runtime
from nbjax.compiler import fusion, optimize
from helpers import assert_close, host_cumlogsumexp

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 10)).astype(np.float32)


def _plan(f, *args):
    closed = nbjax.make_jaxpr(f)(*args)
    optimised, _ = optimize(closed)
    plan = fusion.plan(optimised.jaxpr, get_target("cpu"))
    assert len(plan.decisions) == len(optimised.jaxpr.eqns)  # one decision per equation
    out = compile(closed, "cpu", "t").run(*args)
    ref = compile(closed, "reference", "t").run(*args)
    for a, b in zip(out, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return plan


def _kinds(plan):
    return [g.kind for g in plan.groups]


def test_power_sum_is_one_kernel():
    plan = _plan(lambda x: x + x * x + x * x * x, X)
    assert _kinds(plan) == ["kernel"]
    assert [d.started_new_group for d in plan.decisions].count(True) == 1
    assert all("joined kernel 0" in d.reason for d in plan.decisions[:-1])
    assert "program output" in plan.decisions[-1].reason


def test_selu_is_one_kernel():
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    plan = _plan(lambda x: scale * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha), X)
    assert _kinds(plan) == ["kernel"]
    names = {e.primitive.name for e in plan.groups[0].eqns}
    assert {"exp", "select_n", "gt"} <= names


def test_81_slice_blur_is_one_kernel_reading_the_image_once_per_tap():
    weights = RNG.random((9, 9)).astype(np.float32)
    image = RNG.random((20, 26)).astype(np.float32)

    def blur(padded):
        h, w = padded.shape[0] - 8, padded.shape[1] - 8
        out = 0.0
        for i in range(9):
            for j in range(9):
                out = out + float(weights[i, j]) * padded[i:i + h, j:j + w]
        return out
    plan = _plan(blur, image)
    assert _kinds(plan) == ["kernel"]
    kernel = plan.groups[0].kernel
    assert len(kernel.inputs) == 1
    assert sum(op.name == "load" for op in kernel.body) == 81
    slices = [d for d in plan.decisions if d.eqn.primitive.name == "slice"]
    assert len(slices) == 81 and all("index arithmetic" in d.reason for d in slices)


def test_blur_of_a_padded_image_reads_the_padded_image_written_once():
    """A pad read at several places (guarded: the padding value outside the image) is
    materialised, then the blur is one kernel of plain shifted loads; read at one place,
    the pad stays index arithmetic on its reader's loads."""
    weights = RNG.random((3, 3)).astype(np.float32)

    def blur(x):
        padded = lax.pad(x, 0.0, [(1, 1, 0), (1, 1, 0)])
        return sum(float(weights[i, j]) * padded[i:i + 6, j:j + 10]
                   for i in range(3) for j in range(3))
    plan = _plan(blur, X)
    assert _kinds(plan) == ["kernel", "kernel"]
    pad = next(d for d in plan.decisions if d.eqn.primitive.name == "pad")
    assert pad.started_new_group and "read at 9 places" in pad.reason
    assert [e.primitive.name for e in plan.groups[0].eqns] == ["pad"]
    plan = _plan(lambda x: lax.pad(x, 0.0, [(1, 1, 0), (1, 1, 0)])[1:, :-1] * 2.0, X)
    assert _kinds(plan) == ["kernel"]


def test_softmax_is_one_kernel_in_three_stages_on_each_row():
    def softmax(x):
        e = jnp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    plan = _plan(softmax, X)
    assert _kinds(plan) == ["kernel"]
    first, second, third = plan.groups[0].kernel.stages
    assert [e.primitive.name for e in first.eqns] == ["reduce_max"]
    # exp(x - max) is read by the sum and by the division: materialised once, and the sum
    # shares its loop.
    assert {"exp", "reduce_sum"} <= {e.primitive.name for e in second.eqns}
    assert len(second.outputs) == 2
    exp_decision = next(d for d in plan.decisions if d.eqn.primitive.name == "exp")
    assert exp_decision.started_new_group and "used by 2 kernels" in exp_decision.reason
    assert "a later stage of kernel 0" in exp_decision.reason
    assert [e.primitive.name for e in third.eqns if e.primitive.name != "broadcast_in_dim"] \
        == ["div"]
    assert "3 stages on each row" in plan.report()
    # the gpu target plans no stages: three kernels
    closed = nbjax.make_jaxpr(softmax)(X)
    gpu = fusion.plan(optimize(closed)[0].jaxpr, get_target("gpu"))
    assert [g.kind for g in gpu.groups] == ["kernel"] * 3


def test_a_value_per_row_is_a_stage_of_one_element_rows():
    """A layer norm's inverse deviation, read by two later kernels: its kernel over rows
    of one element is a stage between the reductions and the normalisation."""
    x = RNG.standard_normal((32, 48)).astype(np.float32)

    def f(x):
        centred = x - x.mean(-1, keepdims=True)
        inv = 1.0 / jnp.sqrt((centred * centred).mean(-1, keepdims=True) + 1e-5)
        return centred * inv, inv * 2.0
    plan = _plan(f, x)
    staged = [g.kernel for g in plan.groups if g.kind == "kernel" and g.kernel.stages]
    assert staged and staged[0].shape == (32, 48)
    assert (32, 1) in [s.shape for s in staged[0].stages]


@pytest.mark.parametrize("f", [
    lambda x: x / x.sum(axis=0, keepdims=True),               # a reduction over the rows
    lambda x: x / x.sum(axis=1, keepdims=True)[::-1],         # another row's result
    lambda x: jnp.exp(x)[:, ::-1] / jnp.exp(x).max(1, keepdims=True),  # at another index
    lambda x: (x.sum(axis=1, keepdims=True) + 1.0) / x.ravel().sum(),  # 1-d: no rows
])
def test_kernels_reading_outside_their_row_are_not_stages(f):
    plan = _plan(f, X)
    assert not any(g.kind == "kernel" and g.kernel.stages for g in plan.groups)


def test_a_layer_norm_over_a_batch_is_one_staged_kernel_split_by_rows():
    x = RNG.standard_normal((64, 16, 40)).astype(np.float32)

    def layer_norm(x):
        centred = x - x.mean(-1, keepdims=True)
        return centred / jnp.sqrt((centred * centred).mean(-1, keepdims=True) + 1e-5)
    plan = _plan(layer_norm, x)
    (group,) = plan.groups
    assert len(group.kernel.stages) == 3 and group.kernel.shape == (64, 16, 40)
    assert all(o.kept_axes == (0, 1) for s in group.kernel.stages for o in s.outputs
               if o.combine)
    # three passes over each element: three times the work of one when it is split
    assert "split between" in runtime.split_choice(group.kernel) or runtime.THREADS == 1
    assert runtime.kernel_work(group.kernel) >= 3 * x.size


def test_reduction_fuses_its_element_wise_producers():
    plan = _plan(lambda x: jnp.sum(jnp.sin(x) * 2.0, axis=0), X)
    assert _kinds(plan) == ["kernel"]
    reasons = [d.reason for d in plan.decisions]
    assert any("fused into the reduction" in r for r in reasons)
    assert any("roots kernel 0" in r for r in reasons)


def test_dot_general_is_a_library_step_with_its_reason():
    plan = _plan(lambda x, y: jnp.tanh(x @ y) + 1.0, X, X.T)
    assert _kinds(plan) == ["library", "kernel"]
    dot = plan.decisions[0]
    assert dot.eqn.primitive.name == "dot_general" and "BLAS" in dot.reason


def test_a_reshape_feeding_a_library_step_is_a_view_not_a_copy():
    w = RNG.standard_normal((10, 2, 3)).astype(np.float32)
    plan = _plan(lambda x, w: jnp.tanh(x @ w.reshape(10, 6)), X, w)
    assert _kinds(plan) == ["view", "library", "kernel"]
    view = plan.decisions[0]
    assert view.started_new_group and "a view of its operand's buffer" in view.reason
    # a computed operand is materialised for the view, as for a library step: one kernel
    plan = _plan(lambda x, w: x @ jnp.exp(w).reshape(10, 6), X, w)
    assert _kinds(plan) == ["kernel", "view", "library"]
    exp = plan.decisions[0]
    assert "feeds reshape, a view step" in exp.reason


@pytest.mark.parametrize("f, kinds", [
    (lambda x: (x.reshape(5, 12) @ np.ones((12, 2), np.float32), x.reshape(5, 12)),
     ["kernel", "library"]),              # an output: a kernel's copy, which the product reads
    (lambda x: x[:, None, :] @ np.ones((10, 3), np.float32), ["view", "library"]),
    (lambda x: jnp.broadcast_to(x[:1], (3, 10)) @ np.ones((10, 3), np.float32),
     ["kernel", "library"]),              # copies: not a view
    (lambda x: x[:1].squeeze(0) @ np.ones((10, 3), np.float32),
     ["kernel", "view", "library"]),      # the slice is materialised, its squeeze a view
    (lambda x: lax.reshape(x, (10, 6), dimensions=(1, 0)) @ X, ["kernel", "library"]),
])
def test_which_reshapes_and_broadcasts_are_views(f, kinds):
    """Only the same elements in the same order make a view; a program's output is never
    a view of an input (the caller owns its results' buffers)."""
    plan = _plan(f, X)
    assert _kinds(plan) == kinds
    outputs = set(plan.jaxpr.outvars)
    assert all(not outputs & set(g.outputs) for g in plan.groups if g.kind == "view")


@pytest.mark.parametrize("f, kinds", [
    (lambda x, w: (x @ w).reshape(-1), ["library", "view"]),
    (lambda x, w: (lax.iota(np.float32, 1 << 17) * 2, x @ w),        # no operand: no view
     ["kernel", "library"]),
    (lambda x, w: ((x @ w).reshape(-1), (x @ w)[None]), ["library", "view", "view"]),
    (lambda x, w: (x @ w, (x @ w).reshape(-1)), ["library", "kernel"]),  # an output's copy
    (lambda x, w: jnp.exp(x @ w).reshape(2, -1), ["library", "kernel", "view"]),
])
def test_an_output_can_be_a_view_of_a_value_the_program_computes(f, kinds):
    plan = _plan(f, X, X.T)
    assert _kinds(plan) == kinds


def test_a_view_used_by_several_kernels_and_in_a_loop_body():
    def f(x, xs):
        flat = x.reshape(60)
        def step(c, row):
            v = (c * row).reshape(6, 10)          # a view in the body, read by 2 steps
            return c + (v @ X.T).sum(), v.sum(0) + v.max(0)
        return flat.sum() + flat.max(), lax.scan(step, 1.0, xs.reshape(4, 60))
    plan = _plan(f, X, RNG.standard_normal((4, 6, 10)).astype(np.float32))
    loop = next(g for g in plan.groups if g.kind == "loop")
    (body,) = loop.subprograms
    assert "view" in _kinds(body.plan)


def test_a_value_feeding_a_library_step_and_a_kernel_is_materialised():
    def f(x):
        y = jnp.exp(x)
        return y @ y.T, y.sum()
    plan = _plan(f, X)
    exp = next(d for d in plan.decisions if d.eqn.primitive.name == "exp")
    assert exp.started_new_group and "dot_general" in exp.reason


def test_value_used_by_several_kernels_is_materialised_once():
    def f(x):
        y = jnp.exp(x)
        return y.sum(axis=0), y.max(axis=1), y[::-1] * 2.0
    plan = _plan(f, X)
    exp = next(d for d in plan.decisions if d.eqn.primitive.name == "exp")
    assert exp.started_new_group and "used by 3 kernels" in exp.reason
    producers = [g for g in plan.groups if any(o.aval.shape == (6, 10) and
                                               g.eqns[0].primitive.name == "exp"
                                               for o in g.outputs)]
    assert len(producers) == 1


def test_a_value_a_gather_reads_many_times_is_materialised_not_recomputed():
    """A gather reading each element of its operand several times (a table looked up at
    many indices, a convolution's im2col) reads a materialised operand: fused, the
    operand's computation would run at every read."""
    idx = RNG.integers(0, 6, (40,))
    plan = _plan(lambda x: jnp.exp(x)[idx], X)           # 400 reads of 60 elements
    exp = next(d for d in plan.decisions if d.eqn.primitive.name == "exp")
    assert exp.started_new_group and "gathered about 6 times" in exp.reason
    plan = _plan(lambda x: jnp.exp(x)[idx[:3]], X)       # fewer reads than elements
    exp = next(d for d in plan.decisions if d.eqn.primitive.name == "exp")
    assert not exp.started_new_group


def test_an_interleaving_read_through_another_is_materialised():
    """``associative_scan`` interleaves two halves at each level of its recursion (pads with
    interior padding): a pad that its kernel would read through another is materialised
    with its reason, so no kernel nests two levels. One interleaving stays index
    arithmetic on its reader's loads."""
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    plan = _plan(lambda x: lax.associative_scan(jnp.add, x, axis=1), x)
    nested = [d for d in plan.decisions if "through another interleaving" in d.reason]
    assert nested and all(d.started_new_group and d.eqn.primitive.name == "pad"
                          for d in nested)
    for g in plan.groups:
        pads = [e for e in g.eqns if e.primitive.name == "pad"
                and any(c[2] for c in e.params["padding_config"])]
        assert len(pads) <= 2   # the two of one level, read side by side
    scanned = compile(nbjax.make_jaxpr(lambda x: lax.associative_scan(jnp.add, x, axis=1))(x),
                      "cpu", "t").run(x)[0]
    np.testing.assert_allclose(scanned, np.cumsum(x, 1), rtol=1e-4, atol=1e-4)

    def upsampled(x):
        return lax.pad(x, 0.0, [(0, 0, 0), (0, 1, 1)]) * 2.0
    plan = _plan(upsampled, x)
    assert _kinds(plan) == ["kernel"]


def test_a_convolution_gathers_contiguous_rows_of_its_padded_input():
    """The im2col gather of a convolution reads a padded input materialised by a kernel of
    its own, a run of C features at a time (no pad arithmetic at each read)."""
    x = RNG.standard_normal((2, 7, 7, 3)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    plan = _plan(conv, x, w)
    [gather] = [g for g in plan.groups if g.kind == "kernel"
                and any(e.primitive.name == "gather" for e in g.eqns)]
    assert [e.primitive.name for e in gather.eqns] == ["gather"]
    dn = gather.eqns[0].params["dimension_numbers"]
    assert gather.eqns[0].params["slice_sizes"][-1] == 3 and dn.offset_dims[-1] == 4


def test_siblings_reading_the_same_input_share_a_loop():
    plan = _plan(lambda x: (jnp.sin(x), jnp.cos(x)), X)
    assert _kinds(plan) == ["kernel"]
    assert len(plan.groups[0].kernel.outputs) == 2


def test_siblings_share_loops_up_to_a_bounded_size():
    """Two hundred outputs of one input share loops, each merged kernel at most
    SIBLING_MAX_EQNS equations (every try at a merge builds the merged kernel: unbounded,
    many siblings cost time quadratic in their number), and compute what they should."""
    f = lambda x: [jnp.sin(x * i) + i for i in range(200)]
    plan = _plan(f, X)
    sizes = [len(g.eqns) for g in plan.groups]
    assert _kinds(plan) == ["kernel"] * len(sizes) and len(sizes) == 2
    assert max(sizes) <= fusion.SIBLING_MAX_EQNS and sum(sizes) == 3 * 200 - 1
    outs = compile(nbjax.make_jaxpr(f)(X), "cpu", "t").run(X)
    for i in (0, 57, 199):
        assert_close(outs[i], np.sin(X * np.float32(i)) + i, rtol=1e-6)


def test_structural_ops_become_index_maps():
    def f(x, i):
        y = jnp.concatenate([x[:, ::-1], lax.pad(x, 1.0, [(0, 0, 0), (1, -2, 1)])], axis=1)
        z = lax.dynamic_slice(y, (i, 3), (4, 5))
        return jnp.transpose(z).reshape(20) * 2.0
    plan = _plan(f, X, np.int32(1))
    assert _kinds(plan) == ["kernel"]
    assert all(not d.started_new_group for d in plan.decisions[:-1])


def test_control_flow_calls_back_for_what_it_cannot_compile():
    """Control flow whose branches are not all kernels (here a host callback, a library step)
    still compiles, calling back into Python for that step (a host step, named in the report);
    compiled control flow is tested in test_cpu_control_flow."""
    def f(x, p):
        return lax.cond(p, lambda y: host_cumlogsumexp(y, y.ndim - 1), lambda y: -y, jnp.sin(x))
    closed = nbjax.make_jaxpr(f)(X, True)
    executable = compile(closed, "cpu", "t")
    # sin(x) and the predicate's conversion to a branch index are kernels
    assert [g.kind for g in executable.plan.groups] == ["kernel", "kernel", "loop"]
    assert "1 host step (pure_callback)" in executable.plan.decisions[-1].reason
    for p, expected in ((False, -np.sin(X)), (True, np.logaddexp.accumulate(np.sin(X), -1))):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = executable.run(X, np.bool_(p))
        assert_close(out[0], expected, rtol=1e-6)


def test_report_lists_every_step_and_decision():
    plan = _plan(lambda x, y: jnp.sum(x @ y, axis=0) * 2.0, X, X.T)
    text = plan.report()
    assert "library step 0: dot_general" in text and "kernel 1" in text
    assert text.count("\n  ") == len(plan.decisions)


def test_sibling_kernels_do_not_move_before_a_step_they_read():
    """A kernel that reads a library step's result may not share the loop of a kernel that
    runs before that step (regression: the merged loop read an unset buffer)."""
    import nbjax.numpy as jnp
    from nbjax.backends import compile as compile_jaxpr

    def f(x, y):
        a = jnp.sin(x) + 1.0
        s = jnp.sort(y)
        b = jnp.cos(x) * s
        return a, b
    x = np.linspace(0, 1, 5).astype(np.float32)
    y = np.float32([3, 1, 2, 5, 4])
    closed = nbjax.make_jaxpr(f)(x, y)
    got = compile_jaxpr(closed, backend="cpu").run(x, y)
    want = compile_jaxpr(closed, backend="reference").run(x, y)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-6)


@pytest.mark.cpu_compiler
def test_threefry_decomposes_into_one_fused_kernel():
    """threefry2x32 has a "jaxpr" lowering (uint32 arithmetic): jitted random bits are one
    kernel, bit for bit the eager values."""
    import nbjax.random as R
    key = R.PRNGKey(7)
    f = nbjax.jit(lambda k: R.bits(k, (64,)))
    compiled = f.lower(key).compile()
    kinds = [g.kind for g in compiled.executable.plan.groups]
    assert kinds == ["kernel"]
    assert any(r.rule == "inline" and "threefry2x32" in r.detail
               for r in compiled.executable.rewrites)
    np.testing.assert_array_equal(np.asarray(f(key)), np.asarray(R.bits(key, (64,))))


def test_same_width_bitcasts_fuse_and_others_do_not():
    x = np.float32([1.5, -2.0, np.nan, 0.0, -0.0])
    for dtype in (np.int32, np.uint32):
        closed = nbjax.make_jaxpr(lambda v: lax.bitcast_convert_type(v * 2.0, dtype))(x)
        got = compile(closed, backend="cpu")
        assert [g.kind for g in got.plan.groups] == ["kernel"]
        np.testing.assert_array_equal(got.run(x)[0], (x * 2).view(dtype))
    closed = nbjax.make_jaxpr(lambda v: lax.bitcast_convert_type(v, np.uint8))(x)
    plan = fusion.plan(optimize(closed)[0].jaxpr, get_target("cpu"))
    assert "changes the shape" in plan.decisions[0].reason


def test_a_long_chain_is_split_into_kernels_of_bounded_depth():
    """A chain 600 equations deep (deeper than the stack would allow building as one body)
    plans into parts no deeper than MAX_KERNEL_DEPTH, the reason recorded (the parts then
    share one loop: same iteration space), and computes what the reference backend does."""
    def chain(x):
        for _ in range(200):
            x = (x * 3 + 7) ^ (x >> 2)
        return x
    x = np.arange(-500, 500, dtype=np.int32)
    plan = _plan(chain, x)
    parts = [members for g in plan.groups for _, members in g.parts]
    splits = [d for d in plan.decisions if "chain of over" in d.reason]
    assert len(splits) >= 600 // fusion.MAX_KERNEL_DEPTH - 1
    assert len(parts) > len(splits)


def test_a_compiler_failure_runs_the_program_on_the_reference_backend(monkeypatch):
    """A defect in the CPU compiler (here: its lowering raises) is reported with a warning
    at the user's line and the program runs on the reference backend, with its values."""
    target = get_target("cpu")

    def broken(*args):
        raise RuntimeError("simulated compiler defect")
    monkeypatch.setattr(type(target), "lower", broken)
    f = nbjax.jit(lambda x: jnp.sin(x) * 2, backend="cpu")
    with pytest.warns(UserWarning, match="cpu compiler failed.*simulated compiler defect"
                                         ".*reference backend") as caught:
        out = f(X)
    assert caught[0].filename == __file__
    assert_close(out, np.sin(X) * 2)


def test_a_program_output_read_by_one_kernel_is_one_more_output_of_it():
    """An LSTM cell's pattern: the new cell state is returned and the new hidden state is
    computed from it; with the products' sum (read by both) everything is one loop."""
    def cell(z, c):
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax_sigmoid(f) * c + jax_sigmoid(i) * jnp.tanh(g)
        return jax_sigmoid(o) * jnp.tanh(c), c

    def jax_sigmoid(x):
        return 1 / (1 + jnp.exp(-x))

    z = RNG.standard_normal((5, 16)).astype(np.float32)
    c = RNG.standard_normal((5, 4)).astype(np.float32)
    plan = _plan(lambda z, b, c: cell(z + b, c), z, RNG.standard_normal(16).astype(np.float32),
                 c)
    assert _kinds(plan) == ["kernel"] and len(plan.groups[0].kernel.outputs) == 2
    assert any("result is a program output that kernel 0 reads: one more output of kernel 0"
               in d.reason for d in plan.decisions)


def test_a_program_output_read_at_other_indices_keeps_its_own_kernel():
    """Read reversed by the kernel that would compute it, it cannot be one more output of
    that kernel (an element is read before the iteration that computes it)."""
    plan = _plan(lambda x: (jnp.sin(x), jnp.sin(x)[::-1] * 2.0 + x), X)
    assert _kinds(plan) == ["kernel", "kernel"]
    assert any("program output: materialised by kernel" in d.reason for d in plan.decisions)


def _complex_input(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def test_complex_parts_read_by_the_real_and_the_imaginary_kernel_are_not_copied_out():
    """The parts of a complex input (slices of a view of its pairs) feed the real and the
    imaginary part of a product, two kernels of one iteration space that share a loop:
    each part is index arithmetic in that loop, not a kernel copying it out first."""
    z, w = _complex_input((16, 24), 1), _complex_input((16, 24), 2)
    plan = _plan(lambda z, w: (z * w, jnp.abs(z * w + z)), z, w)
    copies = [g for g in plan.groups if g.kind == "kernel"
              and {e.primitive.name for e in g.eqns} <= {"slice", "squeeze"}]
    assert not copies, plan.report()
    shared = [d for d in plan.decisions if d.eqn.primitive.name == "squeeze"]
    assert shared and all("the loop its other readers share" in d.reason for d in shared)


def test_a_complex_loop_carry_is_read_in_place_each_step():
    """A Mandelbrot iteration on complex numbers: each step's body is the kernel of the
    update and the count, and the kernel writing the new carry's pairs, nothing copying the
    old carry's parts out; the counts are the reference backend's."""
    c = _complex_input((32, 40), 3) * np.complex64(0.8)

    def mandelbrot(c):
        def step(i, state):
            z, n = state
            z = z * z + c
            return z, n + (jnp.abs(z) < 2.0)
        return lax.fori_loop(0, 30, step, (jnp.zeros_like(c), jnp.zeros(c.shape, jnp.int32)))[1]
    plan = _plan(mandelbrot, c)
    (loop,) = [g for g in plan.groups if g.kind == "loop"]
    (body,) = loop.subprograms
    assert [g.kind for g in body.plan.groups].count("kernel") == 2, body.plan.report()


def test_a_re_striding_whose_readers_keep_apart_loops_is_materialised():
    """Two kernels of one iteration space read a slice of an input, but the second also
    reads a matrix product of the first's result, so their loops stay apart: planned again,
    the slice is written once and both read it (``fusion._Sharing``)."""
    x = RNG.standard_normal((8, 8, 2)).astype(np.float32)
    w = RNG.standard_normal((8, 8)).astype(np.float32)

    def f(x, w):
        part = x[..., 0]
        return jnp.tanh(part) @ w + part
    plan = _plan(f, x, w)
    (decision,) = [d for d in plan.decisions if d.eqn.primitive.name == "squeeze"]
    assert "the loop its other readers share" not in decision.reason
    kernels = [g for g in plan.groups if g.kind == "kernel"]
    assert any(g.eqns[-1].primitive.name in ("slice", "squeeze") for g in kernels), \
        plan.report()

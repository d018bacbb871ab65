"""The GPU backend without a GPU: its kernels' PTX assembles with NVIDIA's ptxas, and the
same kernels, built for the host with thread numbers as arguments and run over the whole
grid (``backends.gpu.emulate``), compute what the reference backend computes.

ptxas comes from the ``nvidia-cuda-nvcc-cu12`` wheel (the ``test`` extra) or a CUDA
toolkit; without it the PTX tests skip, saying so. ``NBJAX_GPU_FUZZ_EXAMPLES`` sets how many
random programs of the differential fuzz corpus each test takes (default 150)."""

import dataclasses
import os
import warnings
from types import ModuleType

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import compiler, lax
from nbjax.backends import get_target
from nbjax import backends
from nbjax.backends import register_target
from nbjax.backends.gpu import GpuTarget, GpuUnavailable, ptx, reduction, toolkit
from nbjax.backends.gpu.cuda import CupyDevice
from nbjax.backends.gpu.emulate import HostDevice
from nbjax.backends.gpu.scaffold import PartialsKernel, parallel_axes

import test_fuzz_differential as fuzz
from benchmarks import workloads
from helpers import assert_close

EXAMPLES = int(os.environ.get("NBJAX_GPU_FUZZ_EXAMPLES", "150"))
ARCHS = ("sm_80", "sm_90")
needs_ptxas = pytest.mark.skipif(
    toolkit.find_ptxas() is None,
    reason="ptxas not found (install nvidia-cuda-nvcc-cu12: the test extra, or CUDA)")
PLANNER = GpuTarget()  # planning only: nothing asks for its device


def _kernels(closed, prefix, target=PLANNER):
    """The LoopKernels ``target`` launches for ``closed`` (reductions in phases split),
    renamed ``<prefix>_<name>`` so that many programs' kernels share a module."""
    optimised = compiler.optimized(closed)[0]
    optimised = compiler.decompose_library_steps(optimised, target.decomposed)[0]
    plan = compiler.plan(optimised.jaxpr, target)
    return [dataclasses.replace(k, name=f"{prefix}_{k.name}")
            for g in plan.groups if g.kind == "kernel" for k in target.phases(g.kernel)]


def _fuzz_program(seed):
    """(the closed jaxpr of fuzz program ``seed``, its inputs, its _Program, x64)."""
    rng = np.random.default_rng(seed)
    spec = fuzz._draw_program(rng)
    with nbjax.enable_x64(spec["x64"]):
        x = fuzz._make_input(rng, spec["shape"], spec["dtype"], spec["layout"], spec["special"])
        y = fuzz._make_input(rng, spec["y_shape"], spec["y_dtype"], "c", spec["special"])
        f, programs = fuzz._trace(spec, rng)
        closed = nbjax.make_jaxpr(f)(x, y)
    return closed, (x, y), programs[0], spec["x64"]


def _assemble(kernels, name):
    """PTX of one module of ``kernels`` for each arch, assembled: {arch: {kernel: report}}."""
    reports = {}
    for arch in ARCHS:
        _, code = ptx.compile_ptx(str(ptx.kernel_module(name, kernels)[0]), arch)
        reports[arch] = toolkit.ptxas(code, arch)
        assert set(reports[arch]) == {k.name for k in kernels}
    return reports


# --- PTX ----------------------------------------------------------------------------------

@needs_ptxas
def test_fuzz_corpus_kernels_assemble_for_sm80_and_sm90():
    kernels = []
    for seed in range(EXAMPLES):
        closed, _, _, x64 = _fuzz_program(seed)
        with nbjax.enable_x64(x64):  # (the passes may trace again: decompositions)
            kernels += _kernels(closed, f"p{seed}")
    assert len(kernels) > EXAMPLES  # the corpus makes kernels, most programs several
    for start in range(0, len(kernels), 200):
        _assemble(kernels[start:start + 200], f"fuzz{start}")


def _elementwise_primitives():
    """{name: primitive} of every primitive with an element-wise kernel lowering."""
    found = {}
    modules = [getattr(lax, m) for m in dir(lax) if isinstance(getattr(lax, m), ModuleType)]
    for module in [lax] + modules:
        for attr in dir(module):
            p = getattr(module, attr)
            if attr.endswith("_p") and hasattr(p, "lowerings"):
                low = p.lowerings.get("kernel")
                if low is not None and low.kind == "elementwise":
                    found[p.name] = p
    return found


# Primitives that take parameters: how to call them.
_WITH_PARAMS = {
    "convert_element_type": lambda x: [lax.convert_element_type(x, t)
                                       for t in (np.float16, np.float32, np.int8, np.uint32,
                                                 np.int64, np.float64, np.bool_)],
    "bitcast_convert_type": lambda x: lax.bitcast_convert_type(
        x, {2: np.int16, 4: np.int32, 8: np.int64, 1: np.int8}[x.dtype.itemsize]),
    "integer_pow": lambda x: [lax.integer_pow(x, n) for n in (-2, 0, 3, 7)],
    "round": lambda x: [lax.round(x, m) for m in (0, 1)],
    "clamp": lambda x: lax.clamp(x, x, x),
    "select_n": lambda x: lax.select_n(x == x, x, x),
}
_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int32, np.uint16, np.int64, np.bool_]


def _primitive_programs():
    """(name, closed jaxpr) of each element-wise primitive on each dtype it accepts (with one
    operand, or two or three of one dtype, for primitives without parameters)."""
    programs = {}
    with nbjax.enable_x64(True):
        for name, prim in sorted(_elementwise_primitives().items()):
            for dtype in _DTYPES:
                x = np.ones((7, 3), dtype)
                fns = [_WITH_PARAMS[name]] if name in _WITH_PARAMS else \
                    [lambda x, n=n, p=prim: p.bind(*[x] * n) for n in (1, 2, 3)]
                for f in fns:
                    try:
                        programs.setdefault(name, []).append(nbjax.make_jaxpr(f)(x))
                        break
                    except (TypeError, ValueError):
                        continue
    return programs


@needs_ptxas
def test_every_elementwise_primitive_assembles():
    programs = _primitive_programs()
    missing = set(_elementwise_primitives()) - {n for n, p in programs.items() if p}
    assert not missing, f"no program built for {sorted(missing)}"
    kernels = [k for name, closed in programs.items() for n, c in enumerate(closed)
               for k in _kernels(c, f"{name}{n}")]
    covered = {e.primitive.name for k in kernels for e in k.eqns}
    assert covered >= set(programs) - {"stop_gradient"}  # (removed by the passes)
    _assemble(kernels, "primitives")


SEEDS = {"power_sum": (workloads.power_sum, (4096, 4096)),
         "selu": (workloads.selu(jnp), (4096, 4096)),
         "blur": (workloads.blur(jnp), (473, 716))}


@needs_ptxas
@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_kernels_do_not_spill(name):
    f, shape = SEEDS[name]
    kernels = _kernels(nbjax.make_jaxpr(f)(np.ones(shape, np.float32)), name)
    assert kernels
    for arch, reports in _assemble(kernels, name).items():
        for kernel, report in reports.items():
            assert report.spills == 0 and report.stack == 0, (arch, report.text)
            assert report.registers <= 64, (arch, report.text)


def test_ptxas_report_is_parsed():
    text = ("ptxas info    : Compiling entry function 'k_1' for 'sm_90'\n"
            "ptxas info    : Function properties for k_1\n"
            "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
            "ptxas info    : Used 40 registers, used 0 barriers\n")
    (report,) = toolkit.parse_ptxas_report(text).values()
    assert (report.registers, report.spill_stores, report.spill_loads, report.stack) == \
        (40, 8, 4, 16)


def test_ptx_marks_kernels_as_entry_points():
    kernels = _kernels(nbjax.make_jaxpr(workloads.power_sum)(np.ones(10, np.float32)), "ps")
    _, code = ptx.compile_ptx(str(ptx.kernel_module("m", kernels)[0]))
    assert ".visible .entry ps_kernel_0(" in code
    assert ".global" in code and "%tid.x" in code and "%nctaid.x" in code


# --- the grid, emulated on the host -------------------------------------------------------

# Small blocks and grids, so that threads stride over several points and blocks are idle;
# few threads "keep the GPU busy", so that reductions of a few dozen elements run in phases.
EMULATED = GpuTarget("gpu-emulated", HostDevice, block=4, max_blocks=3,
                     reductions=reduction.Policy(threads=16, per_partial=2, min_partials=4))


def test_fuzz_corpus_on_the_emulated_grid():
    reference = get_target("reference")
    kernels = phased = 0
    for seed in range(EXAMPLES):
        closed, args, program, x64 = _fuzz_program(seed)
        with nbjax.enable_x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gpu = compiler.compile(closed, EMULATED, "fuzz")
            outs, refs = gpu.run(*args), compiler.compile(closed, reference, "fuzz").run(*args)
        try:
            fuzz._compare_all(outs, refs, program)
        except AssertionError as e:
            raise AssertionError(f"fuzz program {seed}") from e
        kernels += len(gpu.kernels)
        phased += sum(isinstance(k.loop, PartialsKernel) for k in gpu.kernels)
    assert kernels > EXAMPLES and phased > 0


@pytest.mark.parametrize("block, max_blocks", [(1, 1), (32, 2), (256, 65536)])
def test_reductions_and_elementwise_outputs_on_any_grid(block, max_blocks):
    """A softmax (a kernel with element-wise and reduction outputs) and sums over each
    axis, on grids from one thread to more threads than points."""
    target = GpuTarget(f"gpu-emulated-{block}", HostDevice, block, max_blocks)
    x = np.random.default_rng(0).standard_normal((37, 5, 3)).astype(np.float32)

    def f(x):
        return (nbjax.nn.softmax(x, axis=1), x.sum(0), x.sum((0, 2)), x.max(),
                jnp.cumsum(x, 1) @ np.ones(3, np.float32))

    closed = nbjax.make_jaxpr(f)(x)
    outs = compiler.compile(closed, target, "f").run(x)
    refs = compiler.compile(closed, get_target("reference"), "f").run(x)
    for out, ref in zip(outs, refs):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_reductions_own_their_output_elements():
    """Every axis a reduction keeps is shared out among threads; reduced axes are looped
    over by the thread owning the output element."""
    x = np.ones((4, 5, 6), np.float32)
    (kernel,) = _kernels(nbjax.make_jaxpr(lambda x: x.sum(1))(x), "r")
    assert parallel_axes(kernel) == (0, 2)
    (kernel,) = _kernels(nbjax.make_jaxpr(lambda x: x * 2)(x), "e")
    assert parallel_axes(kernel) == (0, 1, 2)


def test_fusion_report_says_how_kernels_map_onto_threads():
    x = np.ones((8, 3), np.float32)
    exe = compiler.compile(nbjax.make_jaxpr(lambda x: (x * 2).sum(1))(x), EMULATED, "f")
    report = exe.plan.report()
    assert "on the GPU: one thread per point of axes [0]" in report
    assert "loops over the reduced axes [1]" in report


# --- reductions in phases -----------------------------------------------------------------

def _reductions(x):
    """Full and partial reductions, fused together and alone, with an element-wise output
    (``lax``'s max and min: defined on empty arrays, as XLA's)."""
    return (x.sum(), lax.reduce_max(x, (0, 1)), lax.reduce_min(x, (0, 1)),
            jnp.prod(1 + x / 64), x.sum(-1), lax.reduce_max(x, (0,)),
            jnp.argmax(x.reshape(-1)) if x.size else x.sum(), (x * x).sum(0), x * 2)


def _reference_reductions(x):
    closed = nbjax.make_jaxpr(_reductions)(x)
    return closed, compiler.compile(closed, get_target("reference"), "r").run(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (7, 13), (3, 4099)])
def test_reductions_in_phases_on_the_emulated_grid(dtype, shape):
    """Sizes 0, 1, odd and long, on a target that splits them (few "busy" threads)."""
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    if x.size > 1:
        x.flat[x.size // 2] = np.nan  # NaN propagates through sums, max and min
    with nbjax.enable_x64(dtype == np.float64):
        closed, refs = _reference_reductions(x)
        exe = compiler.compile(closed, EMULATED, "r")
        outs = exe.run(x)
    if x.size > 64:
        assert any(isinstance(k.loop, PartialsKernel) for k in exe.kernels)
    assert np.isnan(refs[0]) == (x.size > 1)
    for out, ref in zip(outs, refs):
        assert out.dtype == ref.dtype
        assert_close(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)


def _ties_and_nans(dtype, shape, rng):
    """Values with many ties; floats also with -0.0 and 0.0 side by side and a few NaNs."""
    x = rng.integers(-3, 4, shape).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[x == 0] = np.where(rng.random(int((x == 0).sum())) < 0.5, -0.0, 0.0)
        x.flat[rng.choice(x.size, size=x.size // 50, replace=False)] = np.nan
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("shape, axis", [((37, 5), 0), ((37, 5), 1), ((1, 9), 1),
                                         ((9, 1), 1), ((4099,), 0), ((3, 1, 70), 2)])
def test_arg_reductions_are_kernels_on_the_emulated_grid(dtype, shape, axis):
    """argmax and argmin run as kernels on the GPU (``GpuTarget.decomposed``: the extremum,
    then the first index holding it), in phases where long, not on the host: the first
    extremum wins, -0.0 ties with 0.0, and the first NaN wins, as on the reference backend."""
    x = _ties_and_nans(dtype, shape, np.random.default_rng(sum(shape) + axis))

    def f(x):
        return (jnp.argmax(x, axis), jnp.argmin(x, axis), lax.argmax(x, axis, np.int64),
                jnp.argmin(x.reshape(-1)))

    with nbjax.enable_x64(dtype == np.float64):
        closed = nbjax.make_jaxpr(f)(x)
        exe = compiler.compile(closed, EMULATED, "f")
        outs = exe.run(x)
        refs = compiler.compile(closed, get_target("reference"), "f").run(x)
    assert not [g for g in exe.plan.groups if g.kind == "library"]
    assert not [e for e in exe.jaxpr.jaxpr.eqns if e.primitive.name in ("argmax", "argmin")]
    assert [r.rule for r in exe.rewrites].count("decompose") >= 2  # (CSE merges the rest)
    for out, ref in zip(outs, refs):
        np.testing.assert_array_equal(out, ref)
        assert out.dtype == ref.dtype


@needs_ptxas
def test_arg_reduction_kernels_assemble():
    x = np.ones((300, 7), np.float32)
    kernels = _kernels(nbjax.make_jaxpr(lambda x: (jnp.argmax(x, 0), jnp.argmin(x)))(x), "a")
    assert any(isinstance(k, PartialsKernel) for k in kernels)
    for arch, report in _assemble(kernels, "arg").items():
        assert all(r.spills == 0 for r in report.values()), (arch, report)


def test_reduction_split_follows_the_outputs():
    """A full reduction of a large array is split; a reduction to many outputs is not; the
    fusion report says which and why."""
    big = nbjax.make_jaxpr(lambda x: x.sum())(np.ones((4096, 4096), np.float32))
    kernels = _kernels(big, "b")
    assert [type(k) for k in kernels][0] is PartialsKernel and len(kernels) >= 2
    assert kernels[0].partials == 1 << 16 and kernels[1].shape == (1 << 16,)
    report = compiler.plan(compiler.optimized(big)[0].jaxpr, PLANNER)
    PLANNER.record_choices(report)
    assert "a reduction in phases: 1 parallel point" in report.report()
    rows = nbjax.make_jaxpr(lambda x: x.sum(1))(np.ones((1 << 17, 64), np.float32))
    (kernel,) = _kernels(rows, "r")
    assert not isinstance(kernel, PartialsKernel)
    plan = compiler.plan(compiler.optimized(rows)[0].jaxpr, PLANNER)
    PLANNER.record_choices(plan)
    assert "not split in phases: its 131072 parallel points keep" in plan.report()


def test_reductions_keeping_different_axes_run_as_separate_kernels():
    """Siblings the planner fused (a full sum, a max over axis 0, an element-wise output)
    get threads of their own: the sum in phases, the max one thread per column with the
    element-wise output; the report says why."""
    closed = nbjax.make_jaxpr(lambda x: (x.sum(), lax.reduce_max(x, (0,)), x * 2))(
        nbjax.ShapeDtypeStruct((2, 3_000_001), np.float32))
    plan = compiler.plan(compiler.optimized(closed)[0].jaxpr, PLANNER)
    (group,) = [g for g in plan.groups if g.kind == "kernel"]
    first, *rest = PLANNER.phases(group.kernel)
    assert parallel_axes(first) == (1,) and len(first.outputs) == 2
    assert not isinstance(first, PartialsKernel)
    assert isinstance(rest[0], PartialsKernel) and parallel_axes(rest[0]) == ()
    PLANNER.record_choices(plan)
    assert "its reductions keep different axes ([1], [])" in plan.report()


SEED_REDUCTIONS = {"sum_4096x4096": (lambda x: x.sum(), (4096, 4096), np.float32),
                   "sum_max_rows_8x1e6": (lambda x: (x.sum(1), x.max(1)), (8, 10 ** 6),
                                          np.float32),
                   "stats_fused": (lambda x: ((x * x).sum(), x.max(0), x.min()), (4096, 512),
                                   np.float32),
                   "sum_f64": (lambda x: jnp.sum(x, 0), (10 ** 6, 3), np.float64)}


@needs_ptxas
@pytest.mark.parametrize("name", sorted(SEED_REDUCTIONS))
def test_seed_reductions_in_phases_assemble_without_spills(name):
    f, shape, dtype = SEED_REDUCTIONS[name]
    with nbjax.enable_x64(dtype == np.float64):
        kernels = _kernels(nbjax.make_jaxpr(f)(nbjax.ShapeDtypeStruct(shape, dtype)), name)
    assert any(isinstance(k, PartialsKernel) for k in kernels)
    for arch, reports in _assemble(kernels, name).items():
        for report in reports.values():
            assert report.spills == 0 and report.stack == 0, (arch, report.text)


# --- the runtime on a machine without a GPU ----------------------------------------------

def _has_gpu():
    try:
        get_target("gpu").device()
        return True
    except GpuUnavailable:
        return False


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present: the error path does not apply")
def test_without_a_gpu_jit_says_what_is_missing():
    f = nbjax.jit(lambda x: x + 1, backend="gpu")
    with pytest.raises(GpuUnavailable, match="CuPy|driver|no GPU"):
        f(np.ones(3, np.float32))


def test_importing_nbjax_imports_no_cupy():
    import subprocess
    import sys
    code = ("import sys, nbjax; nbjax.jit(lambda x: x)(1.0); "
            "import nbjax.backends.gpu; assert 'cupy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the CuPy runtime, on a stand-in for CuPy ---------------------------------------------

class _FakeCupy:
    """What ``cuda.CupyDevice`` uses of CuPy, over NumPy: its Module assembles the PTX
    with ptxas for the device's arch, and its kernel functions check their launch arguments
    as CuPy takes them, then run the kernel on the emulated grid (``emulated``, the host
    builds of the same LoopKernels by name, when the module is loaded:
    ``_EmulatingCupyDevice``). Its device arrays are ``_OnDevice`` arrays; ``transfers``
    counts the copies between them and the host, ``copied_on`` the current device
    (``with cupy.cuda.Device(n)``) of each copy to a device. It has ``count`` GPUs."""

    def __init__(self, compute_capability, count=1):
        fake = self
        self.empty, self.full, self.einsum = (
            lambda *a, _f=f, **k: _f(*a, **k).view(_OnDevice)
            for f in (np.empty, np.full, np.einsum))
        self.emulated, self.launches, self.ndarray = {}, [], _OnDevice
        self.transfers = {"to device": 0, "to host": 0, "synchronize": 0}
        self.current, self.copied_on = [0], []

        class Device:
            def __init__(self, id=None):
                self.id = fake.current[-1] if id is None else id
                self.compute_capability = compute_capability

            def __enter__(self):
                fake.current.append(self.id)

            def __exit__(self, *exc):
                fake.current.pop()

        class Module:  # cupy.cuda.function.Module
            def load(self, image):
                from nbjax.backends.gpu.cuda import arch_for
                assert isinstance(image, bytes) and image.endswith(b"\0")
                self.reports = toolkit.ptxas(image[:-1].decode(),
                                             arch_for(compute_capability))
                self.emulated = dict(fake.emulated)  # (this module's kernels, by name)

            def get_function(self, name):
                assert name in self.reports
                emulated = self.emulated[name]

                def function(grid, block, args):
                    assert isinstance(grid, tuple) and isinstance(block, tuple)
                    assert len(grid) == len(block) == 3 and grid[1:] == block[1:] == (1, 1)
                    assert all(isinstance(a, np.ndarray) and a.flags.c_contiguous
                               for a in args)
                    fake.launches.append((name, grid, block))
                    emulated(grid[0], block[0], list(args))
                return function

        class Stream:
            done = True

            def synchronize(self):
                fake.transfers["synchronize"] += 1

        self.Module = Module
        self.cuda = type("cuda", (), {
            "Device": Device, "get_current_stream": staticmethod(Stream),
            "function": type("function", (), {"Module": Module}),
            "runtime": type("runtime", (), {
                "getDeviceCount": staticmethod(lambda: count),
                "getDeviceProperties": staticmethod(lambda n: {"name": b"Fake GPU %d" % n})})})

    def asarray(self, a, order=None):
        if not isinstance(a, _OnDevice):
            self.transfers["to device"] += 1
            self.copied_on.append(self.current[-1])
        return np.array(a, order=order or "K").view(_OnDevice)

    def asnumpy(self, a):
        assert isinstance(a, _OnDevice)
        self.transfers["to host"] += 1
        return np.array(a)


class _OnDevice(np.ndarray):
    """An array in ``_FakeCupy``'s device memory."""


class _EmulatingCupyDevice(CupyDevice):
    """``cuda.CupyDevice`` on ``_FakeCupy``, whose launches run the kernels it loads on the
    emulated grid."""

    def load(self, kernels, name):
        self.cupy.emulated.update(HostDevice().load(kernels, name)[0])
        return super().load(kernels, name)


@needs_ptxas
@pytest.mark.parametrize("compute_capability", ["80", "90", "120"])
def test_cupy_device_loads_ptx_and_launches(compute_capability):
    fake = _FakeCupy(compute_capability)
    device = _EmulatingCupyDevice(fake, fake.Module)
    target = GpuTarget("gpu-fake", lambda: device)
    x = np.random.default_rng(2).standard_normal((50, 7)).astype(np.float32)

    def f(x):
        return jnp.tan(x) * 2, x.sum(1), x @ x.T

    closed = nbjax.make_jaxpr(f)(x)
    exe = compiler.compile(closed, target, "f")
    assert all("PTX (module)" in k.texts and "Used" in k.texts["ptxas -v"]
               for k in exe.kernels)
    outs = exe.run(x)
    refs = compiler.compile(closed, get_target("reference"), "f").run(x)
    for out, ref in zip(outs, refs):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert {name for name, _, _ in fake.launches} == {k.name for k in exe.kernels}


@needs_ptxas
def test_results_stay_on_the_device_until_read(monkeypatch):
    """Transfers, counted on the CuPy stand-in: operands go to the device once, results
    come back only when their values are read (once), and a result passed to another
    jitted function on the same device is not copied at all."""
    fake = _FakeCupy("90")
    device = _EmulatingCupyDevice(fake, fake.Module)
    # (registered for this test only: other tests compile for every registered target)
    monkeypatch.setattr(backends, "_TARGETS", dict(backends._TARGETS))
    register_target(GpuTarget("gpu-fake-resident", lambda: device))
    f = nbjax.jit(lambda x, y: (x * y + 1, (x * y).sum()), backend="gpu-fake-resident")
    g = nbjax.jit(lambda a: jnp.sin(a) * 2, backend="gpu-fake-resident")
    x, y = (np.random.default_rng(n).standard_normal((40, 9)).astype(np.float32)
            for n in (4, 5))
    moved = fake.transfers
    for call in range(2):  # the general path, then the fast path
        a, total = f(x, y)
        assert moved == {"to device": 2 * (call + 1), "to host": 0, "synchronize": 0}
    assert isinstance(a, nbjax.Array) and a.device.platform == "gpu"
    assert repr(a.device) == "CudaDevice(id=0)" and a.nbytes == x.nbytes
    b = g(a)
    assert moved["to device"] == 4 and moved["to host"] == 0
    assert b.block_until_ready() is b and moved["synchronize"] == 1 and b.is_ready()
    assert moved["to host"] == 0
    assert_close(np.asarray(b), np.sin(x * y + 1) * 2, rtol=1e-5)
    assert_close(np.asarray(b), np.sin(x * y + 1) * 2, rtol=1e-5)
    assert moved["to host"] == 1  # (read once)
    assert_close(float(total), (x * y).sum(), rtol=1e-5, scale=np.abs(x * y).sum())
    assert moved["to host"] == 2
    assert f"{b[0, 0]}" == f"{np.asarray(b)[0, 0]}"  # (an eager op reads b: cached)
    assert moved["to host"] == 2 and moved["to device"] == 4
    g(b)  # read on the host already, still on the device: no copy either way
    assert moved["to device"] == 4


def test_emulated_results_are_arrays_on_the_gpu():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = compiler.compile(nbjax.make_jaxpr(lambda x: (x + 1, 2.0))(x), EMULATED, "f")
    out, literal = exe.run(x)
    assert isinstance(out, nbjax.Array) and out.device.platform == "gpu"
    np.testing.assert_array_equal(np.asarray(out), x + 1)
    np.testing.assert_array_equal(exe.run(out)[0], x + 2)  # (its own buffer, as it is)
    assert float(literal) == 2.0


# --- complex numbers: computed on their parts, in the same kernels --------------------------

def _complex_programs():
    """(name, closed jaxpr, inputs) of every function of test_complex_kernels, complex64."""
    import test_complex_kernels as cases
    rng = np.random.default_rng(5)

    def z(shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    programs = []
    for name, (fn, _) in sorted(cases.UNARY.items()) + sorted(cases.BINARY.items()):
        if name in ("widened", "pad"):
            continue  # (complex128 needs x64; the pad spells a complex128 constant)
        args = (z((6, 5)),) if name in cases.UNARY else (z((6, 5)), z((6, 5)))
        programs.append((name, nbjax.make_jaxpr(fn)(*args), args))
    return programs


@needs_ptxas
def test_complex_kernels_assemble():
    kernels = [k for name, closed, _ in _complex_programs()
               for k in _kernels(closed, name.replace(" ", "_"))]
    assert len(kernels) >= 30
    for reports in _assemble(kernels, "complex").values():
        assert all(r.spills == 0 for r in reports.values())


def test_complex_functions_on_the_emulated_grid():
    reference = get_target("reference")
    for name, closed, args in _complex_programs():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (ComplexWarning of a conversion to bool)
            gpu = compiler.compile(closed, EMULATED, name)
            (out,), (want,) = gpu.run(*args), compiler.compile(closed, reference, name).run(*args)
        assert "fallback" not in [g.kind for g in gpu.plan.groups], name
        assert_close(np.asarray(out), np.asarray(want), rtol=1e-5, err_msg=name)

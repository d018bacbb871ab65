"""The GPU target: the CPU's compiler (passes, fusion planner, kernel IR, the shared LLVM
emitter) emitting PTX for NVIDIA GPUs through llvmlite's NVPTX back end, run through CuPy.

What the GPU changes is its scaffold (``scaffold``: threads and a grid-stride loop instead
of loops, buffers in global memory, libdevice for the math mathlib lacks), the PTX
compilation (``ptx``, ``toolkit``), and the runtime (``executable`` over a device:
``cuda`` on a GPU, ``emulate`` on the host for tests). ``scan``, ``while`` and ``cond`` run
as loops on the host around bodies compiled for the GPU (``control``); ``dot_general`` and
the primitives with an array-module rule (FFTs, running sums, sorts) by CuPy's own
functions; the other library steps on the host.

Importing this module imports neither CuPy nor anything of CUDA: ``GpuTarget.lower`` (and
``gpu_devices``, behind ``nbjax.devices("gpu")``) asks for the device, and raises
``cuda.GpuUnavailable`` saying what is missing.
"""

from ...compiler import Target
from . import control, executable, reduction
from .cuda import GpuUnavailable, cuda_device, cuda_devices

__all__ = ["GpuTarget", "GpuUnavailable", "TARGET"]

BLOCK = 256          # threads per block
MAX_BLOCKS = 65536   # blocks per launch at most; a grid-stride loop covers the rest


class GpuTarget(Target):
    """``device`` is a function returning the device programs run on (``cuda.cuda_device``,
    or ``emulate.HostDevice`` for tests); ``runtimes`` one returning every GPU's
    (``cuda.cuda_devices``; None: ``device``'s alone)."""

    # argmax and argmin as a reduction kernel and a kernel finding the first index of the
    # extremum, rather than on the host.
    decomposed = frozenset({"arg-reduction"})

    def __init__(self, name="gpu", device=cuda_device, block=BLOCK, max_blocks=MAX_BLOCKS,
                 reductions=reduction.Policy(), runtimes=None):
        self.name, self.device = name, device
        self.runtimes = runtimes or (lambda: (device(),))
        self.block, self.max_blocks = block, max_blocks
        self.reductions = reductions  # when reductions run in phases

    def gpu_devices(self):
        """The ``core.GpuDevice`` of each GPU (``nbjax.devices("gpu")``), or
        ``GpuUnavailable`` saying what is missing."""
        return [runtime.array_device for runtime in self.runtimes()]

    def check_available(self):
        self.device()  # (``GpuUnavailable`` says what is missing)

    def library_reason(self, eqn):
        if control.supports(eqn):
            return control.reason(eqn)
        if executable.array_module_rule(eqn) is not None:
            return f"{eqn.primitive.name} runs on the GPU through CuPy's own function"
        category = eqn.primitive.lowerings.get("library")
        if category is None:
            return None
        if executable.einsum_spec(eqn) is not None:
            return f"{eqn.primitive.name} is a cuBLAS call (einsum)"
        return (f"{eqn.primitive.name} runs on the host (its reference implementation): "
                "operands copied from the GPU, results back")

    def lower(self, name, jaxpr, plan, rewrites, timer):
        device = self.device()
        return executable.compile_plan(name, jaxpr, plan, rewrites, timer, device, self)

    def phases(self, kernel):
        """The kernels computing ``kernel`` on this target (``reduction.Policy.phases``)."""
        return self.reductions.phases(kernel)

    def kernel_choice(self, kernel):
        """How ``kernel`` maps onto threads, and whether its reductions run in phases and
        why."""
        return self.reductions.explain(kernel, self.block)


TARGET = GpuTarget(runtimes=cuda_devices)

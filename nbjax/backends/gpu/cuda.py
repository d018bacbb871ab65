"""The GPU itself, through CuPy: device memory, module loading, launches, cuBLAS.

Nothing here is imported when nbjax starts: CuPy is imported by ``cuda_devices()``, on the
first compilation for the ``gpu`` backend or ``nbjax.devices("gpu")``, which raises
``GpuUnavailable`` saying what is missing (CuPy, a driver, a device) when it cannot run.
"""

import functools

from ...core import GpuDevice
from . import executable, ptx, toolkit


class GpuUnavailable(RuntimeError):
    """The gpu backend cannot run here; the message says why."""


# The architectures our PTX targets, newest first; a newer GPU runs the newest one's PTX,
# compiled for it by the driver.
ARCHS = (90, 89, 87, 86, 80, 75)


def arch_for(compute_capability):
    """The ``sm_XX`` to compile for on a device of ``compute_capability`` (``"86"``)."""
    cc = int(compute_capability)
    for arch in ARCHS:
        if arch <= cc:
            return f"sm_{arch}"
    raise GpuUnavailable(f"the GPU's compute capability {cc / 10:.1f} is older than the "
                         f"oldest the gpu backend compiles for ({ARCHS[-1] / 10:.1f})")


@functools.lru_cache(maxsize=1)
def cuda_devices():
    """A ``CupyDevice`` for each GPU the driver shows, or ``GpuUnavailable``."""
    try:
        import cupy
        from cupy.cuda import function
    except ImportError as e:
        raise GpuUnavailable("the gpu backend needs CuPy, which is not installed "
                             f"({e}): pip install 'nbjax[gpu]' (cupy-cuda12x)") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001  (CuPy raises its own types per failure)
        raise GpuUnavailable("the gpu backend found CuPy but no usable CUDA driver "
                             f"({type(e).__name__}: {e})") from None
    if count == 0:
        raise GpuUnavailable("the gpu backend found CuPy and a CUDA driver but no GPU")
    return tuple(CupyDevice(cupy, function.Module, ordinal) for ordinal in range(count))


def cuda_device():
    """The ``CupyDevice`` jitted programs run on: the first GPU, JAX's default device."""
    return cuda_devices()[0]


class CupyDevice(executable.Runtime):
    """CuPy arrays as device memory; our kernels loaded from PTX and launched on the current
    stream. The module is CuPy's ``cupy.cuda.function.Module`` (``module_type``), the layer
    under ``RawModule``: its ``load`` hands the PTX to the driver (``cuModuleLoadData``),
    which compiles it for the device, where ``RawModule(code=...)`` would compile CUDA C.

    One per GPU (``ordinal``): copies to it and waits for it are made with it as CuPy's
    current device, as CuPy allocates on, and streams belong to, the current device."""

    xp = None

    def __init__(self, cupy, module_type, ordinal=0):
        self.cupy = self.xp = cupy
        self.module_type = module_type
        device = self._gpu = cupy.cuda.Device(ordinal)
        self.arch = arch_for(device.compute_capability)
        self.name = f"GPU {ordinal} ({self.arch})"
        kind = cupy.cuda.runtime.getDeviceProperties(ordinal)["name"]
        self.array_device = GpuDevice(ordinal, kind.decode(errors="replace"), self)

    def put(self, array):
        with self._gpu:
            return self.cupy.asarray(array)

    def get(self, array):
        return self.cupy.asnumpy(array)  # (on the array's GPU, after the work queued)

    def synchronize(self):
        with self._gpu:
            self.cupy.cuda.get_current_stream().synchronize()

    def idle(self):
        with self._gpu:
            return self.cupy.cuda.get_current_stream().done

    def load(self, kernels, name):
        """({kernel name: launch(grid, block, buffers)}, {kernel name: {stage: text}})."""
        texts, optimised, code = ptx.kernels_ptx(name, kernels, self.arch)
        module = self.module_type()
        module.load(code.encode() + b"\0")  # (the driver takes PTX as a C string)
        launches = {k.name: _launcher(module.get_function(k.name)) for k in kernels}
        reports = toolkit.ptxas(code, self.arch) if toolkit.find_ptxas() else {}
        for name, stages in texts.items():
            stages["optimised LLVM IR (module)"] = optimised
            stages["PTX (module)"] = code
            stages["PTX"] = ptx.entry_ptx(code, name)
            if name in reports:  # registers, spills: what limits the kernel's occupancy
                stages["ptxas -v"] = reports[name].text
        return launches, texts


def _launcher(function):
    """``launch(grid, block, buffers)``: CuPy's ``Function`` call, on the current stream,
    each array passed as its data pointer; the function keeps its module loaded."""
    def launch(grid, block, buffers):
        function((grid, 1, 1), (block, 1, 1), tuple(buffers))
    launch.function = function
    return launch

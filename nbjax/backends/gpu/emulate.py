"""The GPU's kernels run on the host CPU, thread by thread: how their index logic is tested
on machines without a GPU.

Each kernel is built by the same scaffold (``scaffold.GridStride``) around the same body,
with two differences only: its block and thread numbers are arguments (``HOST_INDICES``)
and the functions the GPU takes from libdevice come from libm (the inline math is the
same code). A driver function per kernel,

    void <name>_grid(buffers..., i64 grid_dim, i64 block_dim)

calls it for every block and every thread of the launch, one after the other, as the GPU
would run them in some order. Since no two threads of our kernels write the same element
(``scaffold``), any order gives the GPU's result: a kernel whose threads raced would show
it here only by chance, which is why the scaffold is built never to.

``HostDevice`` is the ``executable.Device`` that runs a compiled program this way, NumPy
arrays standing for device memory. It borrows the CPU target's runtime support (compiler-rt's
float16 conversions, which MCJIT cannot find in the process otherwise).
"""

import ctypes
import dataclasses
import itertools

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ...core import GpuDevice
from ..cpu import support
from ..llvm import I64, for_loop, mem_type
from .executable import Runtime
from .ptx import kernel_module
from .scaffold import GPU_MATH, HOST_INDICES

HOST_MATH = dataclasses.replace(GPU_MATH, prefix="")
_names = itertools.count()


def _buffer_types(kernel):
    return [mem_type(o.acc_dtype or o.var.aval.dtype).as_pointer() for o in kernel.outputs] \
        + [mem_type(v.aval.dtype).as_pointer() for v in kernel.inputs]


def _add_driver(module, kernel, fn):
    """``<name>_grid``: ``fn`` for every (block, thread) of a launch."""
    n = len(_buffer_types(kernel))
    driver = ir.Function(module, ir.FunctionType(
        ir.VoidType(), _buffer_types(kernel) + [I64, I64]), name=kernel.name + "_grid")
    b = ir.IRBuilder(driver.append_basic_block("entry"))
    buffers, (grid_dim, block_dim) = driver.args[:n], driver.args[n:]
    zero = ir.Constant(I64, 0)
    for_loop(b, zero, grid_dim, lambda block: for_loop(
        b, zero, block_dim, lambda thread: b.call(
            fn, [*buffers, block, thread, block_dim, grid_dim]), "thread"), "block")
    b.ret_void()


class _FreshMemory:
    """NumPy as the emulated device's array module, except that ``empty`` fills a new buffer
    with 0xFF bytes (NaN for floats, -1 for integers), as a GPU's new allocation holds
    whatever was there before: a kernel leaving an element unwritten shows it."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype):
        buffer = np.empty(shape, dtype)
        buffer.reshape(-1).view(np.uint8).fill(0xFF)
        return buffer


class HostDevice(Runtime):
    """Device memory as NumPy arrays, kernels launched as host loops over the grid."""

    name = "host emulation of the GPU"
    xp = _FreshMemory()

    def __init__(self):
        self.array_device = GpuDevice(0, self.name, self)

    def put(self, array):
        return np.array(array, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)

    def get(self, array):
        return np.array(array)  # (a copy, as from a GPU: the device's buffer stays its own)

    def synchronize(self):
        """Launches run to completion on the host: nothing is ever pending."""

    def idle(self):
        return True

    def load(self, kernels, name):
        """({kernel name: launch(grid, block, buffers)}, {kernel name: {stage: text}}) for
        ``kernels``, compiled for the host."""
        support.register()  # float16 conversions without F16C call functions defined there
        triple = llvm.get_process_triple()
        module, texts = kernel_module(f"{name}_{next(_names)}", kernels, HOST_INDICES, triple,
                                  HOST_MATH)
        for kernel in kernels:
            _add_driver(module, kernel, module.globals[kernel.name])
        target = llvm.Target.from_triple(triple)
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=llvm.get_host_cpu_features().flatten(),
                                          opt=1, jit=True)
        parsed = llvm.parse_assembly(str(module))
        parsed.verify()
        engine = llvm.create_mcjit_compiler(parsed, tm)
        engine.finalize_object()
        launches = {}
        for kernel in kernels:
            n = len(kernel.outputs) + len(kernel.inputs)
            proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * n, ctypes.c_int64,
                                     ctypes.c_int64)
            driver = proto(engine.get_function_address(kernel.name + "_grid"))
            launches[kernel.name] = _launcher(driver, engine)
        return launches, {k: {"LLVM IR (host emulation)": t} for k, t in texts.items()}


def _launcher(driver, engine):
    def launch(grid, block, buffers):
        driver(*[b.ctypes.data for b in buffers], grid, block)
    launch.engine = engine  # the machine code lives as long as a launch function does
    return launch

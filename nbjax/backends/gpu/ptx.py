"""LoopKernels as PTX: one LLVM module for the ``nvptx64-nvidia-cuda`` target, compiled by
llvmlite's own LLVM (which has the NVPTX back end), no CUDA toolkit needed.

``kernel_module`` defines each kernel with the GPU scaffold and marks it an entry point
(``nvvm.annotations`` "kernel"); ``compile_ptx`` links libdevice when a kernel calls one of
its ``__nv_*`` functions (the math mathlib lacks: ``tan``, ``atan2``, ``cbrt``...), runs
LLVM's O3 pipeline for the GPU (the NVPTX target adds its own passes, NVVMReflect among
them, which libdevice needs) and emits the PTX text that CUDA's driver loads.
"""

import functools

import llvmlite.binding as llvm
from llvmlite import ir

from ..llvm import I32, define_kernel
from . import toolkit
from .scaffold import GPU_MATH, NVVM_INDICES, GridStride

TRIPLE = "nvptx64-nvidia-cuda"
# PTX ISA 8.0 (CUDA 12.0): what a CUDA 12 driver loads, and enough for sm_90.
PTX_FEATURES = "+ptx80"
DEFAULT_ARCH = "sm_80"


def kernel_module(name, kernels, indices=NVVM_INDICES, triple=TRIPLE, math=GPU_MATH):
    """(an ``ir.Module`` defining ``kernels``, {kernel name: its LLVM IR text}); with
    ``indices`` and ``math`` other than the GPU's (``emulate``), for another ``triple``."""
    module = ir.Module(name=name)
    module.triple = triple
    texts = {}
    for kernel in kernels:
        fn = define_kernel(module, kernel, GridStride(kernel, indices, math))
        if indices.source == "nvvm":
            module.add_named_metadata("nvvm.annotations", [
                fn, ir.MetaDataString(module, "kernel"), ir.Constant(I32, 1)])
        texts[kernel.name] = str(fn)
    return module, texts


@functools.lru_cache(maxsize=None)
def target_machine(arch):
    """The NVPTX target machine for ``arch`` (``"sm_80"``, ``"sm_90"``)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=PTX_FEATURES, opt=3)


def compile_ptx(ir_text, arch=DEFAULT_ARCH):
    """(the optimised LLVM IR, the PTX) of the module ``ir_text`` for ``arch``."""
    tm = target_machine(arch)
    module = llvm.parse_assembly(ir_text)
    module.triple = TRIPLE
    module.data_layout = str(tm.target_data)
    _link_libdevice(module)
    module.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    return str(module), tm.emit_assembly(module)


def _link_libdevice(module):
    """Link libdevice into ``module`` if it calls ``__nv_*`` functions, its functions made
    internal so that the optimiser drops all but those called."""
    if not any(f.is_declaration and f.name.startswith("__nv_") for f in module.functions):
        return
    path = toolkit.find_libdevice()
    if path is None:
        raise RuntimeError("a kernel calls libdevice's math functions, and libdevice.10.bc "
                           "was not found: install nvidia-cuda-nvcc-cu12 (the gpu extra)")
    library = _libdevice(path)
    module.link_in(library.clone())
    for f in module.functions:
        if f.name.startswith("__nv_") and not f.is_declaration:
            f.linkage = llvm.Linkage.internal


@functools.lru_cache(maxsize=1)
def _libdevice(path):
    with open(path, "rb") as f:
        library = llvm.parse_bitcode(f.read())
    library.triple = TRIPLE
    library.data_layout = str(target_machine(DEFAULT_ARCH).target_data)
    return library


def entry_ptx(code, name):
    """The PTX of the entry function ``name`` in the module ``code``: from its
    ``.visible .entry`` line to its closing brace (the first at the start of a line: LLVM
    indents every brace inside a function)."""
    start = code.index(f".visible .entry {name}(")
    return code[start:code.index("\n}\n", start) + 2]


def kernels_ptx(name, kernels, arch=DEFAULT_ARCH):
    """{kernel name: {stage: text}} and the PTX of one module holding ``kernels``."""
    module, texts = kernel_module(name, kernels)
    optimised, ptx = compile_ptx(str(module), arch)
    return {k: {"LLVM IR": t} for k, t in texts.items()}, optimised, ptx

"""The CPU backend: fused loop kernels compiled to machine code with llvmlite.

``compile(closed_jaxpr, name)`` optimises the jaxpr (``compiler.passes``), plans the fusion
(``compiler.fusion``), generates one LLVM module for all kernels (``codegen``), compiles it
(``runtime``) and returns an ``Executable`` (``executable``).
"""

from ...compiler import fusion
from ...compiler.passes import optimize
from .executable import Executable, Timer, compile_plan

__all__ = ["compile", "Executable"]


def compile(closed_jaxpr, name="jit"):
    timer = Timer()
    with timer("passes"):
        optimised, rewrites = optimize(closed_jaxpr)
    with timer("fusion"):
        plan = fusion.plan(optimised.jaxpr)
    return compile_plan(name, optimised, plan, rewrites, timer)

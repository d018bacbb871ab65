"""The CPU target: fused loop kernels compiled to machine code with llvmlite.

The compiler's pipeline (``nbjax.compiler.compile``) optimises and plans; ``CpuTarget.lower``
generates one LLVM module for all kernels of the plan (``codegen``: the CPU's loops around
the shared emitter of ``nbjax.backends.llvm``), compiles it (``runtime``) and returns an
``Executable`` (``executable``). A program compiled by an earlier process is loaded from
the disk cache instead (``program_cache``). Library steps are BLAS and LAPACK calls or loops
in native code (scatters, dynamic updates of a loop's carry, arg-reductions, cumulative ops,
sorts); the others (FFTs by SciPy, host callbacks) call the primitive's implementation on
our buffers.
"""

import dataclasses

from ...compiler import Target
from ...compiler.target import nested_plans
from .. import reference
from . import blas, program_cache, runtime, scatter, update_slice
from .control_flow import CONTROL_FLOW, native_library_call
from .executable import Executable, compile_plan, native_library_step

__all__ = ["CpuTarget", "Executable", "TARGET"]

# How this target makes each kind of library call (``lax.standard.library_lowering``) when
# native code makes it (``native_library_call``)...
NATIVE_CALLS = {
    "matrix product": "is a BLAS call",   # (or a loop of our own: ``blas.how``)
    "scatter": "is a scatter loop in native code",
    "arg-reduction": "is a loop in native code",
    "cumulative op": "is a running loop in native code",
    "sort": "is a sort in native code (radix or merge)",
    "linear algebra": "is a LAPACK call",
    "dynamic update": "copies its update into a window of its operand in native code (in "
                      "the operand's own buffer where nothing reads it after: a loop's carry)",
}
# ... and when it calls back into Python for it (by default, the NumPy implementation).
HOST_CALLS = {
    "host callback": "calls Python back with the values (a host step)",
    "collective": "is a collective: the shards exchange values in Python",
    "parallel map": "runs its shard program on a thread per shard",
    "fft": "is SciPy's FFT (pocketfft, in single precision for single-precision operands)",
}


class CpuTarget(Target):
    name = "cpu"
    control_flow = frozenset(CONTROL_FLOW)
    host_steps_in_loops = True
    fallback = reference.TARGET
    reuses_donations = True
    row_stages = True

    def library_reason(self, eqn):
        category = eqn.primitive.lowerings.get("library")
        if category is None:
            return None
        if self.native_library_call(eqn):
            how = blas.how(eqn) if blas.supports(eqn) else NATIVE_CALLS[category]
            return f"{eqn.primitive.name} {how}"
        how = HOST_CALLS.get(category, "is a library call (NumPy)")
        return f"{eqn.primitive.name} {how}; native code calls back into Python for it"

    def native_library_call(self, eqn):
        return native_library_call(eqn)

    def updates_in_place(self, eqn):
        return update_slice.supports(eqn) or scatter.supports(eqn)

    def accumulates(self, eqn):
        return blas.accumulates(eqn)

    def writes_as(self, eqn, reader):
        return blas.writes_transposed(eqn, reader)

    def kernel_choice(self, kernel):
        return runtime.split_choice(kernel)

    def record_choices(self, plan):
        # (the first of the target's hooks after planning, on the program's whole plan)
        _choose_products(plan)
        super().record_choices(plan)

    def private(self, array):
        return runtime.private(array)

    def cached(self, closed_jaxpr, name, compile, donated=frozenset()):
        key = program_cache.key(closed_jaxpr, donated)
        executable = program_cache.load(key, closed_jaxpr, name)
        if executable is None:
            executable = compile()
            program_cache.store(key, closed_jaxpr, executable)
        return executable

    def lower(self, name, jaxpr, plan, rewrites, timer, donated=frozenset()):
        return compile_plan(name, jaxpr, plan, rewrites, timer, donated)


TARGET = CpuTarget()


def _choose_products(plan):
    """Choose between the register tiles and BLAS for the matrix products of the program
    (``plan`` and its control flow's sub-programs), and say so in the fusion report: each
    that the tiles can compute (large ones included: ``tiled_products.fits``) takes the
    faster of the two on this machine (``tile_choice``). Both run on the worker pool's
    threads (``blas``), so neither leaves threads spinning beside the program's next
    kernels. A program of one product too large to compile
    (``executable.native_library_step``) runs NumPy's."""
    lone = plan.groups[0] if len(plan.groups) == 1 else None
    if lone is not None and lone.kind == "library" and not native_library_step(plan):
        if blas.supports(lone.eqns[0]):
            _reword(plan, lone, blas.how(lone.eqns[0]), LONE_PRODUCT)
        return
    for each, _ in nested_plans(plan):
        for g in each.groups:
            if g.kind != "library" or not blas.fits_tiles(g.eqns[0], large=True):
                continue
            product = g.eqns[0]
            g.library_choice = "blas" if blas.calls_blas(product, large=True) else "tiles"
            _reword(each, g, blas.how(product), blas.how(product, large=True))


# How the report says what a program of one large product does (``_choose_products``)
LONE_PRODUCT = ("is computed by NumPy, its reference implementation: a native call would "
                "not repay compiling a program of this one step")


def _reword(plan, group, before, after):
    """Say ``after`` instead of ``before`` in the reason of the decision starting ``group``
    of ``plan``."""
    for n, d in enumerate(plan.decisions):
        if d.group == group.index and d.started_new_group and before in d.reason:
            plan.decisions[n] = dataclasses.replace(d, reason=d.reason.replace(before, after))

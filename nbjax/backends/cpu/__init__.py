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
from . import blas, program_cache, runtime, scatter, tile_choice, update_slice
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
        # (the first of the target's hooks after planning, on the program's whole plan: the
        # products' choices and the marks change how kernels split, which the report says)
        _choose_products(plan)
        _mark_kernels_beside_blas(plan)
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


def _mark_kernels_beside_blas(plan, beside=False):
    """Mark the kernels of every loop body (nested ones within) that calls BLAS
    (``LoopKernel.beside_library_threads``): they split between the cores only from more
    work (``runtime.BESIDE_BLAS_SPLIT_WORK``)."""
    for g in plan.groups:
        if g.kind == "kernel" and beside:
            g.kernel.beside_library_threads = True
        for sub in g.subprograms if g.kind == "loop" else ():
            calls = any(h.kind == "library" and _calls_blas(h) for h in sub.plan.groups)
            _mark_kernels_beside_blas(sub.plan, beside or calls)


def _calls_blas(group):
    """Whether the library step ``group`` calls BLAS: as the program chose
    (``FusionGroup.library_choice``), else as measured (``blas.calls_blas``)."""
    if group.library_choice is not None:
        return group.library_choice == "blas"
    return any(map(blas.calls_blas, group.eqns))


def _off_blas(eqn):
    """Whether the library step of ``eqn`` can run without BLAS: a matrix product the tiles
    compute (large ones included), or a step of another kind than products and linear
    algebra (LAPACK calls BLAS)."""
    category = eqn.primitive.lowerings.get("library")
    if category == "matrix product":
        return blas.fits_tiles(eqn, large=True)
    return category != "linear algebra"


def _choose_products(plan):
    """Choose between the register tiles and BLAS for the matrix products of the program
    (``plan`` and its control flow's sub-programs), and say so in the fusion report.

    A BLAS call leaves OpenBLAS's threads spinning for a tenth of a second on the cores that
    the program's next kernels and loops share out, which then run at about half speed
    (rnn_scan's loop after its hoisted input product 19 -> 11 ms without it). So a program
    whose every product the tiles can compute, large ones included
    (``tiled_products.fits``), and that has no linear algebra (``_off_blas``), computes
    them all there unless BLAS is ``tile_choice.OUTSIDE_LOOPS_MARGIN`` times faster: it
    keeps off BLAS. Otherwise its own products (not a sub-program's) that fit the tiles
    take them within that margin, and a loop body's keep the measured choice (the kernels
    beside BLAS stay off the worker pool there: ``_mark_kernels_beside_blas``). A program
    of one product too large to compile (``executable.native_library_step``) runs NumPy's."""
    lone = plan.groups[0] if len(plan.groups) == 1 else None
    if lone is not None and lone.kind == "library" and not native_library_step(plan):
        if blas.supports(lone.eqns[0]):
            _reword(plan, lone, blas.how(lone.eqns[0]), LONE_PRODUCT)
        return
    margin = tile_choice.OUTSIDE_LOOPS_MARGIN
    steps = [(each, g, inside) for each, inside in nested_plans(plan) for g in each.groups
             if g.kind == "library"]
    off_blas = all(_off_blas(g.eqns[0]) for _, g, _ in steps)
    for each, g, inside in steps:
        product = g.eqns[0]
        if (inside and not off_blas) or not blas.fits_tiles(product, large=off_blas):
            continue
        g.library_choice = "blas" if blas.calls_blas(product, margin, off_blas) else "tiles"
        _reword(each, g, blas.how(product), blas.how(product, margin, off_blas))


# How the report says what a program of one large product does (``_choose_products``)
LONE_PRODUCT = ("is computed by NumPy, its reference implementation: a native call would "
                "not repay compiling a program of this one step")


def _reword(plan, group, before, after):
    """Say ``after`` instead of ``before`` in the reason of the decision starting ``group``
    of ``plan``."""
    for n, d in enumerate(plan.decisions):
        if d.group == group.index and d.started_new_group and before in d.reason:
            plan.decisions[n] = dataclasses.replace(d, reason=d.reason.replace(before, after))

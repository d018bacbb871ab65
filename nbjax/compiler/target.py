"""What the compiler's pipeline asks of a target: the machine (or the interpreter) that a
compiled program runs on.

A target says whether the pipeline should optimise and plan for it at all, which equations
without a kernel lowering it runs as library calls (and how, in words for the fusion
report), which control flow it compiles around kernels, and how it lowers a plan into an
``Executable``. How it splits work, its code scaffold and its runtime are its own business,
behind ``lower``. Targets live in ``nbjax.backends``, which registers them by name.
"""

import dataclasses


class Target:
    """Subclass and set ``name``; override what differs from these defaults."""

    name = None
    # Whether the pipeline runs the passes and the fusion planner (the reference target
    # runs the jaxpr as traced).
    optimizes = True
    # The control-flow primitives (``Primitive`` objects with a ``"control"`` lowering) that
    # become one native ``"loop"`` step when their bodies plan into kernels; any other runs
    # as a reference step.
    control_flow = frozenset()
    # Whether compiled control flow can call back into Python for a step it cannot run
    # natively (a host step), rather than sending the whole loop to the reference backend.
    host_steps_in_loops = False
    # The target that runs a program this one fails to compile (a defect of the compiler,
    # reported with a warning), or None: the failure is raised.
    fallback = None
    # Whether the target writes outputs into donated inputs' buffers (``compiler.donation``):
    # its ``cached`` and ``lower`` then take ``donated`` (input positions) too, and its
    # executables ``run_reusing``.
    reuses_donations = False
    # The library categories ("arg-reduction"...) whose steps this target computes from
    # primitives with kernels, through each primitive's ``"kernels"`` lowering (its
    # decomposition), rather than as a library call that would run away from its kernels.
    decomposed = frozenset()
    # Whether one kernel may run several stages one after another on each row (a
    # softmax's maximum, its exponentials and their sum, the quotients), each stage
    # reading what earlier ones wrote in the row while it is in the cache.
    row_stages = False

    def check_available(self):
        """Raise an error saying what is missing when this target cannot run on this
        machine (the gpu target without CuPy, a driver or a GPU); nothing by default."""

    def private(self, array):
        """Whether a donated ``array`` (an Array) holds the only reference to its memory,
        so that a call may overwrite it (``Executable.run_reusing``); never, by default."""
        return False

    def updates_in_place(self, eqn):
        """Whether the target can compute ``eqn`` (a ``dynamic_update_slice``, a scatter)
        in its first operand's buffer as a library step. The planner lets it where nothing
        reads that operand after (``FusionGroup.in_place``), and, where it makes a program
        output of an input (a loop's carry), makes a ``dynamic_update_slice`` one even
        though it has a kernel lowering (a kernel would write every element of the
        output). Never, by default."""
        return False

    def library_reason(self, eqn):
        """Why ``eqn`` (no kernel lowering here) runs as a library call on this target, in
        words for the fusion report ("dot_general is a BLAS call"), or None: it falls back
        to the primitive's reference implementation, with a warning."""
        return None

    def native_library_call(self, eqn):
        """Whether this target's compiled control flow can make the library call ``eqn``
        itself (a BLAS call from native code), so that a loop whose body holds it still
        compiles into one native loop."""
        return False

    def accumulates(self, eqn):
        """Whether the library call ``eqn`` (a matrix product) can add its result into a
        buffer holding a value of its type, so that ``c + dot(a, b)`` is one call (BLAS's
        ``beta = 1``) instead of a call and a kernel's pass over three buffers."""
        return False

    def writes_as(self, eqn, reader):
        """Whether the library call ``eqn`` (a matrix product) can write its result laid
        out as ``reader``, an index equation reading it (a transpose), lays it out, so
        that no kernel copies it."""
        return False

    def kernel_choice(self, kernel):
        """How this target runs ``kernel`` (a LoopKernel of the plan), in words for the
        fusion report (on how many cores, in how many phases...), or None."""
        return None

    def record_choices(self, plan):
        """Add ``kernel_choice`` of each kernel to the reason of the decision that started
        it, in ``plan`` and the plans of its control flow's sub-programs: the fusion report
        says it."""
        for each, _ in nested_plans(plan):
            kernels = {g.index: g.kernel for g in each.groups if g.kind == "kernel"}
            for n, d in enumerate(each.decisions):
                if d.started_new_group and d.group in kernels:
                    how = self.kernel_choice(kernels.pop(d.group))
                    if how:
                        each.decisions[n] = dataclasses.replace(d, reason=f"{d.reason}; {how}")

    def cached(self, closed_jaxpr, name, compile, donated=frozenset()):
        """``compile()`` (the pipeline's work on the traced ``closed_jaxpr``), or what it
        made of the same program before: a target with a disk cache of whole programs
        loads the program from it, with no pass, planning or code generation (its key
        includes ``donated``, which changes the program)."""
        return compile()

    def lower(self, name, jaxpr, plan, rewrites, timer):
        """An ``Executable`` running ``plan`` (a ``FusionPlan`` of the optimised ClosedJaxpr
        ``jaxpr``; None when the target does not optimise). ``timer`` has timed the
        pipeline's phases so far; the target adds its own."""
        raise NotImplementedError

    def __repr__(self):
        return f"<target {self.name}>"


def nested_plans(plan, in_subprogram=False):
    """``(plan, in_subprogram)`` for ``plan`` and the plans of its control flow's
    sub-programs, nested ones within, each with whether it is a sub-program's."""
    yield plan, in_subprogram
    for g in plan.groups:
        for sub in g.subprograms if g.kind == "loop" else ():
            yield from nested_plans(sub.plan, True)

"""The fusion planner: which equations become one loop kernel, and why.

Input: an optimised jaxpr and the target it is planned for. Output: a ``FusionPlan``, the
ordered steps of the program (``FusionGroup``: a fused loop kernel, a library call, or a
reference fallback) and a
``FusionDecision`` for every equation saying which step it went to and why.

The rules, applied walking the program backwards (from results to inputs):

- An equation with a kernel lowering whose result has exactly one consuming kernel, and is
  not a program output, joins that kernel: element-wise ops are computed inline, and slices,
  pads, broadcasts, transposes... become index arithmetic on the consumer's loads (so a sum
  of 81 shifted slices of an image is one kernel reading the image 81 times).
- A program output that exactly one kernel of its iteration space reads, only at each
  iteration's own index, is one more output of that kernel (``_output_host``).
- Otherwise its result is materialised: it starts a kernel of its own. That happens for
  other program outputs, for values several kernels (or a library step) read, and for reductions,
  which always root their own loop (over their operand's shape) and fuse their element-wise
  producers. It also happens to a value its kernel would read at more than
  ``MAX_REREADS`` different places (the 81 shifted slices of a padded image): computed
  inline, it would be computed that many times per element (a pad's guards, a gather's
  index loads, arithmetic), so one pass writing it out is cheaper, and the consumer then
  reads plain shifted rows that vectorise. Pure re-stridings of a buffer (index lowerings
  that ``restride``: slices, transposes, broadcasts...) are exempt: re-reading them costs
  nothing more than the loads. A ``guarded`` index lowering (a pad: its padding value
  outside its operand) is materialised where its kernel would read it at two places or
  more: each read's test made its loads gathers (a 3x3 blur of a padded 2048x2048 image:
  22 ms fused, 6 ms with the pad written out first). And a pad that ``interleaves``
  (interior padding) is materialised where its kernel would read it through another one:
  nested, the divisions, remainder tests and guards of every level would run at every
  element, and the loads became gathers (``lax.associative_scan``, an interleaving per
  level of its recursion: 22 ms fused, 2 ms level by level).
- A re-striding that several kernels of one iteration space read (a complex value's real
  part, sliced out of its pairs, read by the kernels of a product's real and imaginary
  parts) joins one of them, as those kernels usually share a loop in the end; where they
  do not, the program is planned again with it materialised (``_Sharing``).
- An equation that would start a kernel only to copy its operand's elements in the same
  order (a reshape, a squeeze, a broadcast adding size-1 axes: ``KernelLowering.views``)
  is a ``"view"`` step instead: its result is its operand's buffer, read with its own
  shape. The operand is then materialised, as for a library step (a program input costs
  nothing). A program's output is a view only of a value the program computes and does
  not output: native code computes that value into the output's buffer.
- An equation the target updates in place (``Target.updates_in_place``: the CPU's
  ``dynamic_update_slice``) that makes a program output of a program input (a loop's
  carry, its next value) is a library step although it has a kernel lowering: the target
  copies the update into the input's buffer where nothing reads it after (a kernel would
  write every element of the output, the whole carry every iteration).
- Equations without a kernel lowering are library steps on materialised buffers when their
  primitive has a ``"library"`` lowering (dot_general, sort, scatter...) and the target
  runs such calls (``Target.library_reason``), else reference steps. Equations on JAX's
  narrow types from ml_dtypes (bfloat16, float8...) are reference steps by design: kernels
  compute in the machine's types, and NumPy computes these through float32, rounding once
  per operation as XLA does; being a decision, not a failure, they run without a warning.
- Control flow (primitives with a ``"control"`` lowering: ``scan``, ``while``, ``cond``) is
  planned recursively on a target that compiles control flow: when each of its sub-jaxprs
  (body, loop condition, branches) plans into kernels only (or into control flow that does,
  in turn), it is a ``"loop"`` step that the target compiles into one native loop or branch
  around those kernels; otherwise it is a reference step.

A kernel that is one equation reading a matrix product's result, its only reader, is
done by the product's library call where the target can (``_product_epilogues``): an add
into another value of its shape (BLAS's ``beta = 1``), a transpose the product writes its
result in.

Then sibling kernels with the same iteration space share one loop when nothing in between
needs the earlier one's results, and the later one reads the earlier one's results (if at
all) only at the same index: a softmax's ``exp(x - max)`` and its sum are one loop.

Last, on a target with ``row_stages``, a kernel reading the kernel just before it only
within each row (a reduction over the last axis at its row, an element-wise result at its
own index) becomes that kernel's next stage: one kernel running its stages one after
another on each row (``kernel.staged_kernel``), so a softmax or a layer norm is one kernel.
"""

import math
from dataclasses import dataclass, field

from ..core import Var
from .kernel import (CannotFuse, build_kernel, kernel_lowering, narrow_type_reason,
                     reads_at_index, staged_kernel)
from .passes import optimize

@dataclass
class FusionGroup:
    """One step of the program: a ``"kernel"`` (fused loop), a ``"loop"`` (control flow
    compiled around the kernels of its ``subprograms``), a ``"view"`` (its result is its
    operand's buffer: no work), ``"library"`` or ``"fallback"``
    (the reference implementation runs it, with a warning unless ``warns`` is false: a step
    on a narrow type is a reference step by design)."""
    kind: str
    eqns: list
    shape: tuple = ()
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    parts: list = field(default_factory=list)  # (root eqn, {var: eqn}) for kernels
    reason: str = ""
    kernel: object = None  # the LoopKernel, for kernels
    index: int = -1
    merged_into: object = None  # the kernel whose loop this one's equations joined (or
    # the product doing its work: ``_product_epilogues``)
    subprograms: list = field(default_factory=list)  # SubProgram, for loops
    warns: bool = True  # for fallbacks: whether running it says so
    stages: list = field(default_factory=list)  # (shape, parts) of each row stage, if staged
    as_stage: bool = False  # merged into ``merged_into`` as its last row stage
    # For a library product doing the work of its result's reader (``_product_epilogues``):
    # the value it adds its result into, or whether it writes its result as the reader lays
    # it out. ``in_place``: whether the step may change the buffer of the value it updates
    # (``updated_value``: that sum, a scatter's operand) into its result, else a copy's.
    accumulator: object = None
    in_place: bool = False
    writes_as_reader: bool = False
    # Set by a target: the sum's destination holds the accumulator's value when the call
    # starts (a donated input's buffer, updated in place).
    output_holds_accumulator: bool = False
    # Set by a target: how it computes this library step where it has a choice and made it
    # knowing where the step runs (the CPU: a matrix product by its register tiles or by
    # BLAS, "tiles" or "blas"); None: its choice for the equation alone.
    library_choice: object = None

    def __repr__(self):
        return f"FusionGroup({self.describe()})"

    def describe(self):
        stages = f" in {len(self.stages)} stages on each row" if self.stages else ""
        what = {"kernel": f"kernel {self.index} over {list(self.shape)}{stages}",
                "library": f"library step {self.index}",
                "loop": f"native control flow {self.index}",
                "view": f"view {self.index}",
                "fallback": f"reference step {self.index}"}[self.kind]
        return f"{what}: {', '.join(e.primitive.name for e in self.eqns)}"


@dataclass(frozen=True, eq=False)
class FusionDecision:
    eqn: object
    group: int
    started_new_group: bool
    reason: str

    def __str__(self):
        verb = "starts" if self.started_new_group else "joins"
        return f"{self.eqn.primitive.name}: {verb} step {self.group}: {self.reason}"


@dataclass
class FusionPlan:
    jaxpr: object
    groups: list
    decisions: list

    @property
    def kernels(self):
        return [g for g in self.groups if g.kind == "kernel"]

    def report(self):
        """The steps, the decisions, then each compiled control-flow step's sub-programs
        (a loop body's kernels, library calls and decisions), indented."""
        lines = [g.describe() for g in self.groups]
        lines += ["", "decisions:"] + [f"  {d}" for d in self.decisions]
        for g in self.groups:
            for sub in g.subprograms if g.kind == "loop" else ():
                lines += ["", f"{sub.role} of step {g.index} "
                              f"({g.eqns[0].primitive.name}):"]
                lines += ["  " + line if line else line
                          for line in sub.plan.report().splitlines()]
        return "\n".join(lines)

    __str__ = report


@dataclass
class SubProgram:
    """A sub-jaxpr of a control-flow equation (``role``: "body", "cond", "branch 1"...),
    optimised (``closed``, a ClosedJaxpr), and its plan."""
    role: str
    closed: object
    plan: object

    @property
    def n_kernels(self):
        return sum(1 if g.kind == "kernel" else sum(s.n_kernels for s in g.subprograms)
                   for g in self.plan.groups)


def _plan_control_flow(eqn, target, prefix):
    """(the SubPrograms of a control-flow equation, the decision's reason), or (None, why
    not) when one of its sub-jaxprs has a step that is not a kernel (nor compiled control
    flow), or (None, None) when ``eqn`` is not control flow the target compiles."""
    name = eqn.primitive.name
    control = eqn.primitive.lowerings.get("control")
    if control is None or eqn.primitive not in target.control_flow:
        return None, None
    subs = []
    for role, closed in control.sub_jaxprs(eqn.params):
        optimised, _ = optimize(closed)
        sub = plan(optimised.jaxpr, target, f"{prefix}_{role.replace(' ', '')}")
        blocking = [g for g in sub.groups if g.kind not in ("kernel", "loop", "view") and not (
            target.host_steps_in_loops or target.native_library_call(g.eqns[0]))]
        if blocking:
            step = blocking[0]
            return None, (f"{name} {role} has a {step.kind} step "
                          f"({step.eqns[0].primitive.name}): {name} runs on the reference "
                          "backend")
        subs.append(SubProgram(role, optimised, sub))
    if control.branches:
        sizes = "; ".join(_steps(s, target) for s in subs)
        return subs, f"{name} compiled as a native branch between {len(subs)} branches ({sizes})"
    what = " and ".join(f"{s.role} of {_steps(s, target)}" for s in subs)
    return subs, f"{name} compiled as a native loop: {what}"


def _step_without_kernel(eqn, why_not, target, prefix):
    """(group, (started_new_group, reason)) of an equation with no kernel lowering:
    compiled control flow, a library step or a reference step."""
    subs, why = _plan_control_flow(eqn, target, prefix)
    if subs is not None:
        return FusionGroup("loop", [eqn], reason=why, subprograms=subs), (True, why)
    if why is not None:  # control flow that cannot be compiled
        return FusionGroup("fallback", [eqn], reason=why), (True, why)
    narrow = narrow_type_reason(eqn)
    if narrow is not None:
        return FusionGroup("fallback", [eqn], reason=narrow, warns=False), \
            (True, narrow + ": runs on the reference backend, by design")
    library = target.library_reason(eqn)
    if library is not None:
        return FusionGroup("library", [eqn], reason=library), (True, library + ": library step")
    return FusionGroup("fallback", [eqn], reason=why_not), \
        (True, why_not + ": runs on the reference backend")


def _kernels(n):
    return f"{n} kernel{'s' * (n != 1)}"


def _steps(sub, target):
    """A sub-program's steps in words: its kernels, the library calls it makes natively, and
    the equations it calls back into Python for (named)."""
    others = [g.eqns[0] for g in sub.plan.groups if g.kind in ("library", "fallback")]
    native = sum(map(target.native_library_call, others))
    host = [e.primitive.name for e in others if not target.native_library_call(e)]
    words = _kernels(sub.n_kernels)
    if native:
        words += f", {native} native library call{'s' * (native != 1)}"
    if host:
        words += f", {len(host)} host step{'s' * (len(host) != 1)} ({', '.join(host)})"
    return words


def plan(jaxpr, target, prefix="kernel"):
    """The FusionPlan of an optimised (open) Jaxpr for ``target`` (a ``Target``); kernels
    are named ``<prefix>_<n>``. A re-striding that several kernels read is first planned
    into one of them (``_Sharing``); where their loops then stay apart, planned again."""
    refused = frozenset()
    while True:
        sharing = _Sharing(refused)
        result = _plan(jaxpr, target, prefix, sharing)
        unwritten = _unwritten(jaxpr, result.groups) & sharing.shared
        if not unwritten:
            return result
        refused |= unwritten


@dataclass
class _Sharing:
    """Re-stridings (a slice, a squeeze...) that several kernels of one iteration space
    read, planned into one of them (``shared``) rather than materialised: such kernels
    usually share one loop in the end (``_merge_siblings``), and there each computes the
    value once by index arithmetic, as any part of a kernel may use another's values. (A
    complex value's real and imaginary parts, read through a view of its pairs, feed the
    real and the imaginary part of each result: materialised, every step of a complex loop
    copied both out first.) ``refused``: those found read by a kernel whose loop stayed
    apart, materialised when the program is planned again."""
    refused: frozenset
    shared: set = field(default_factory=set)

    def host(self, out, lowering, users):
        """The kernel of ``users`` (all reading ``out``) that may compute it, or None."""
        if out in self.refused or not lowering.restrides or \
                any(g.kind != "kernel" for g in users) or len({g.shape for g in users}) > 1:
            return None
        self.shared.add(out)
        return users[0]


def _unwritten(jaxpr, groups):
    """The values the steps of a plan read that no step writes and the caller does not
    pass."""
    written = {*jaxpr.invars, *jaxpr.constvars, *(v for g in groups for v in g.outputs)}
    return {v for g in groups for v in g.inputs if v not in written}


def _plan(jaxpr, target, prefix, sharing):
    eqns = jaxpr.eqns
    consumers = {}
    for i, eqn in enumerate(eqns):
        for a in eqn.invars:
            if isinstance(a, Var):
                consumers.setdefault(a, []).append(i)
    program_outputs = {a for a in jaxpr.outvars if isinstance(a, Var)}
    computed = {v for eqn in eqns for v in eqn.outvars}
    group_of = [None] * len(eqns)
    reads = {}  # var -> at how many places the kernel it joined reads it (see _reads)
    interleaved = set()  # equations whose kernel reads them through an interleaving pad
    notes = [None] * len(eqns)  # (started_new_group, reason template with {g})
    depth = [0] * len(eqns)  # of each equation in its kernel's chain (see _depth)

    for i in reversed(range(len(eqns))):
        eqn = eqns[i]
        lowering, why_not = kernel_lowering(eqn)
        if lowering is not None and _updates_an_input(eqn, jaxpr, program_outputs, target):
            lowering = None
        if lowering is None and _is_view(eqn, None, program_outputs, computed):
            group_of[i], notes[i] = _view(eqn, eqn.primitive.lowerings["view"])
            continue
        if lowering is None:
            group_of[i], notes[i] = _step_without_kernel(eqn, why_not, target,
                                                         f"{prefix}_cf{i}")
            continue
        group, reason = _join_or_start(eqn, lowering, consumers, group_of, program_outputs,
                                       eqns, reads, depth, interleaved, sharing)
        if group is None and _is_view(eqn, lowering, program_outputs, computed):
            group_of[i], notes[i] = _view(eqn, "the same elements in the same order")
            continue
        depth[i] = 1 if group is None else _depth(eqn.outvars[0], group, consumers, group_of,
                                                   depth)
        if group is None:
            shape = eqn.invars[0].aval.shape if lowering.kind == "reduction" \
                else eqn.outvars[0].aval.shape
            group = FusionGroup("kernel", [], tuple(shape), parts=[(eqn, {})])
            notes[i] = (True, reason)
        elif eqn.outvars[0] in program_outputs:  # one more output (``_output_host``)
            group.parts.insert(0, (eqn, {}))
            notes[i] = (False, reason)
        else:
            notes[i] = (False, reason)
        group.eqns.insert(0, eqn)
        _add_member(group, eqn)
        group_of[i] = group
        if _interleaves(eqn, lowering) or _read_interleaved(eqn, group, consumers, group_of,
                                                             interleaved):
            interleaved.add(i)

    position = {id(e): i for i, e in enumerate(eqns)}
    groups = sorted({id(g): g for g in group_of}.values(),
                    key=lambda g: position[id(g.eqns[-1])])
    groups = _product_epilogues(groups, eqns, consumers, program_outputs, target, position)
    groups = _merge_siblings(groups)
    if target.row_stages:
        groups = _merge_row_stages(groups)
    for n, g in enumerate(groups):
        g.index = n
        _finish(g, n, prefix)
    for g in groups:
        if g.accumulator is not None or (updated_operand(g) is not None
                                         and target.updates_in_place(g.eqns[0])):
            g.in_place = _updates_in_place(g, groups, program_outputs)
    decisions = []
    for eqn, g, (started, reason) in zip(eqns, group_of, notes):
        final = _final(g)
        if final.kind == "library" and len(final.eqns) > 1 and eqn is final.eqns[-1]:
            started, reason = False, _epilogue_reason(final)
        elif final.in_place and final.accumulator is None:
            reason += ("; it changes its operand's buffer in place (the program computes it "
                       "and nothing reads it after): no copy")
        if started and final is not g:
            reason += ("; it is a later stage of kernel {g}, on each row after the earlier "
                       "ones (it reads what they wrote in the row)") if g.as_stage else \
                "; it shares the loop of kernel {g} (same iteration space)"
        decisions.append(FusionDecision(eqn, final.index, started, reason.format(g=final.index)))
    return FusionPlan(jaxpr, groups, decisions)


def _view(eqn, what):
    """The view step of ``eqn`` and its note; ``what`` its result is."""
    return FusionGroup("view", [eqn], reason="a view of its operand's buffer"), \
        (True, f"{eqn.primitive.name}: {what}: a view of its operand's buffer, no copy")


def _is_view(eqn, lowering, program_outputs, computed):
    """Whether ``eqn``, which would start a kernel of its own, can be a view of its
    operand's buffer instead (``KernelLowering.views``; with no kernel lowering, a
    primitive with a ``"view"`` lowering: its operand's bytes read as another type). A
    program's output may be one of a value the program computes (in ``computed``) that is
    no output itself: that value is then computed into the caller's buffer for the output.
    An output is never a view of an input's buffer or of another output's: the caller
    gets buffers of its own."""
    views = "view" in eqn.primitive.lowerings if lowering is None else \
        lowering.views is not None and lowering.views(eqn)
    if not views or not isinstance(eqn.invars[0], Var):
        return False
    x = eqn.invars[0]
    return eqn.outvars[0] not in program_outputs or (x in computed and x not in program_outputs)


# A value read at more places than this by the kernel it would join is materialised.
MAX_REREADS = 16
# A value a gather reads this many times per element, on average, is materialised.
GATHERED_COPIES = 2
# The longest chain of equations inside one kernel: building its body recurses through the
# chain (Python's stack), and LLVM's time to optimise a body grows faster than linearly.
MAX_KERNEL_DEPTH = 160


def _reads(out, consumers, eqns, reads):
    """At how many places (indices) the kernel computing ``out``'s consumers reads it: each
    index-arithmetic consumer reads it where its own result is read; element-wise consumers
    read it at their own indices (the same ones, counted once); a kernel's root is computed
    once per element."""
    by_index, elementwise = 0, 0
    for c in dict.fromkeys(consumers.get(out, [])):
        n = reads.get(eqns[c].outvars[0], 1)
        if eqns[c].primitive.lowerings["kernel"].kind == "index":
            by_index += n
        else:
            elementwise = max(elementwise, n)
    return by_index + elementwise


def _gathered_copies(out, consumers, eqns):
    """How many times a gather consuming ``out`` as its operand reads each element, on
    average (its result's size over ``out``'s; 0 without such a gather). Fused into the
    gather, ``out``'s computation (a pad's bounds checks, a reshape's index arithmetic)
    would run again at every read: an im2col gather of a convolution reads each input
    element once per kernel tap."""
    size = max(math.prod(out.aval.shape), 1)
    return max([math.prod(eqns[c].outvars[0].aval.shape) // size
                for c in consumers.get(out, [])
                if eqns[c].primitive.lowerings["kernel"].gathers and eqns[c].invars[0] is out],
               default=0)


def _depth(out, group, consumers, group_of, depth):
    """How deep in ``group``'s chain of equations the one computing ``out`` would sit."""
    return 1 + max(depth[c] for c in consumers[out] if group_of[c] is group)


def _interleaves(eqn, lowering):
    return lowering.interleaves is not None and lowering.interleaves(eqn)


def _read_interleaved(eqn, group, consumers, group_of, interleaved):
    """Whether ``group`` reads ``eqn``'s result through an interleaving pad."""
    return any(c in interleaved for c in consumers.get(eqn.outvars[0], [])
               if group_of[c] is group)


def _join_or_start(eqn, lowering, consumers, group_of, program_outputs, eqns, reads, depth,
                   interleaved, sharing):
    """(group to join or None, reason template): see the module docstring."""
    name = eqn.primitive.name
    out = eqn.outvars[0]
    if lowering.kind == "reduction":
        return None, f"{name}: a reduction roots kernel {{g}} and fuses its element-wise producers"
    users = [group_of[c] for c in consumers.get(out, [])]
    distinct = list({id(g): g for g in users}.values())
    if out in program_outputs:
        host = _output_host(eqn, distinct)
        if host is not None:
            return host, (f"{name}: result is a program output that kernel {{g}} reads: "
                          "one more output of kernel {g}")
        return None, f"{name}: result is a program output: materialised by kernel {{g}}"
    steps = [g for g in distinct if g.kind != "kernel"]
    if steps:
        return None, (f"{name}: result feeds {steps[0].eqns[0].primitive.name}, a "
                      f"{steps[0].kind} step: materialised by kernel {{g}}")
    if len(distinct) > 1:
        host = sharing.host(out, lowering, distinct)
        if host is None:
            return None, f"value used by {len(distinct)} kernels: materialised by kernel {{g}}"
        distinct = [host]
    if not distinct:
        return None, f"{name}: result unused: kernel {{g}}"
    target = distinct[0]
    if _depth(out, target, consumers, group_of, depth) > MAX_KERNEL_DEPTH:
        return None, (f"{name}: a chain of over {MAX_KERNEL_DEPTH} equations in one kernel: "
                      "materialised by kernel {g} (bounded kernels compile in linear time)")
    copies = _gathered_copies(out, consumers, eqns)
    if copies >= GATHERED_COPIES:
        return None, (f"{name}: each element gathered about {copies} times by one kernel: "
                      "materialised by kernel {g} (computed once, not at every read)")
    if _interleaves(eqn, lowering) and _read_interleaved(eqn, target, consumers, group_of,
                                                         interleaved):
        return None, (f"{name}: interleaves its operand, and its reader reads it through "
                      "another interleaving: materialised by kernel {g} (nested, each "
                      "level's divisions would run at every element)")
    n = _reads(out, consumers, eqns, reads)
    if n > 1 and lowering.guarded:
        return None, (f"{name}: read at {n} places by one kernel, each read behind a test of "
                      "its index: materialised by kernel {g} (plain loads of it vectorise)")
    if n > MAX_REREADS and not lowering.restrides:
        return None, (f"{name}: read at {n} places by one kernel: materialised by kernel "
                      "{g} (computing it once is cheaper)")
    reads[out] = n
    if lowering.kind == "index":
        return target, f"{name}: index arithmetic on the loads of kernel {{g}}" + (
            ", in the loop its other readers share" if out in sharing.shared else "")
    root = target.parts[0][0]
    if root.primitive.lowerings["kernel"].kind == "reduction":
        return target, "element-wise: fused into the reduction of kernel {g}"
    return target, "element-wise: joined kernel {g}"


def _output_host(eqn, users):
    """The kernel that may compute ``eqn``'s result, a program output, as one more output:
    the one kernel reading it, if it has the result's iteration space and reads it only at
    each iteration's own index (as an element-wise op does), else None. The result is then
    written once, from the loop that uses it, instead of by a kernel of its own that the
    user reads back (an LSTM step's new cell state, which its new hidden state needs)."""
    if len(users) != 1 or users[0].kind != "kernel" or \
            eqn.primitive.lowerings["kernel"].kind == "reduction" or \
            tuple(users[0].shape) != tuple(eqn.outvars[0].aval.shape):
        return None
    try:
        build_kernel("probe", users[0].shape, [(eqn, {})] + users[0].parts)
    except CannotFuse:
        return None
    return users[0]


def _add_member(group, eqn):
    root, members = group.parts[0]
    members[eqn.outvars[0]] = eqn


def _product_epilogues(groups, eqns, consumers, program_outputs, target, position):
    """Let a matrix product's library call do the work of the kernel that is its result's
    only reader, when that kernel is one equation the call can take on (the add's or the
    transpose's pass over memory is saved):

    - ``c + dot(a, b)``, the add of operands of one shape: the call adds its result into
      ``c`` (``Target.accumulates``: BLAS's ``beta = 1``), a loop's gradient accumulator
      updated every iteration; ``accumulator`` is ``c``;
    - a transpose the call can write its result in (``Target.writes_as``: rows and
      matrices at strides), an attention's heads merged back; ``writes_as_reader`` is set.

    The call runs where that kernel ran, once ``c`` is ready."""
    made = {v: g for g in groups for e in g.eqns for v in e.outvars}
    fused = []
    for g in groups:
        product, accumulator = _epilogue_of(g, made, consumers, program_outputs, target,
                                            position)
        if product is None:
            fused.append(g)
            continue
        eqn = g.eqns[0]
        fused.remove(product)
        g.merged_into = product
        product.accumulator, product.writes_as_reader = accumulator, accumulator is None
        product.eqns.append(eqn)
        fused.append(product)
        made[eqn.outvars[0]] = product
    return fused


def _epilogue_of(g, made, consumers, program_outputs, target, position):
    """(the library group of the product whose result the kernel ``g`` alone reads, the
    value it adds that result to or None), when the product's call can do ``g``'s work
    (see ``_product_epilogues``); else (None, None)."""
    if g.kind != "kernel" or len(g.eqns) != 1:
        return None, None
    eqn = g.eqns[0]
    for k, p in enumerate(eqn.invars):
        product = made.get(p)
        if product is None or product.kind != "library" or len(product.eqns) != 1 or \
                p in program_outputs or consumers[p] != [position[id(eqn)]]:
            continue
        if eqn.primitive.lowerings["kernel"].sums:
            c = eqn.invars[1 - k]
            same = all(isinstance(a, Var) and a.aval.shape == eqn.outvars[0].aval.shape and
                       a.aval.dtype == eqn.outvars[0].aval.dtype for a in eqn.invars)
            if same and c is not p and target.accumulates(product.eqns[0]):
                return product, c
        elif target.writes_as(product.eqns[0], eqn):
            return product, None
    return None, None


def _updates_in_place(g, groups, program_outputs):
    """Whether ``g`` may change the buffer of the value it updates (``updated_value``: an
    accumulating product's sum, a scatter's operand) into its result: the program computes
    that buffer's value (it is no input) and nothing reads it from ``g`` on
    (``read_after``)."""
    value = updated_value(g)
    root = buffer_owners(groups[:g.index]).get(value, value)
    return any(root in h.outputs for h in groups[:g.index]) and \
        not read_after(g, groups, value, program_outputs)


def read_after(g, groups, value, outputs):
    """Whether ``value``'s buffer (``value``, or a view of it, or what it is a view of) is
    read from the step ``g`` of ``groups`` on, other than as the value ``g`` updates (the
    one ``g``'s product adds into, a scatter's operand: ``updated_operand``): by ``g``
    itself, by a later step, or as one of ``outputs``."""
    owner = buffer_owners(groups[:g.index])
    root = owner.get(value, value)
    shared = {v for v, r in owner.items() if r is root} | {root}
    own = g.eqns[0].invars[1:] if updated_operand(g) is not None else g.eqns[0].invars
    readers = list(own) + [a for h in groups[g.index + 1:] for a in h.inputs]
    return bool(shared.intersection(readers + list(outputs)))


def _updates_an_input(eqn, jaxpr, program_outputs, target):
    """Whether ``eqn`` makes a program output of an input that ``target`` updates in
    place (``Target.updates_in_place``): a library step then, not a kernel."""
    return target.updates_in_place(eqn) and eqn.invars[0] in jaxpr.invars and \
        eqn.outvars[0] in program_outputs


# The library categories of equations that change a few elements of their first operand
UPDATES = ("scatter", "dynamic update")


def updated_operand(g):
    """The operand whose elements the library step ``g`` changes a few of to make its
    result (a scatter's, a dynamic_update_slice's), or None: a target may let it update
    that operand's buffer in place when nothing reads the operand afterwards (a loop's
    carry updated by ``x.at[i].set(v)``: see ``backends/cpu/buffer_plan``)."""
    eqn = g.eqns[0]
    if g.kind == "library" and len(g.eqns) == 1 and \
            eqn.primitive.lowerings.get("library") in UPDATES and isinstance(eqn.invars[0], Var):
        return eqn.invars[0]
    return None


def updated_value(g):
    """The value whose buffer the library step ``g`` may change into its result: the one
    its product adds into (``accumulator``), or the operand it updates
    (``updated_operand``); None for other steps."""
    return g.accumulator if g.accumulator is not None else updated_operand(g)


def _epilogue_reason(g):
    """Why the last equation of the library group ``g`` is computed by its product."""
    name = g.eqns[-1].primitive.name
    if g.writes_as_reader:
        return (f"{name}: the product of step {g.index} writes its result in this layout "
                "(its rows and matrices at strides): no copy")
    where = "that operand's buffer (nothing reads it after)" if g.in_place else \
        "the sum's buffer, holding that operand first (a copy, unless it is there already: " \
        "a loop's carry)"
    return (f"{name}: the product of step {g.index} adds its result to the other operand "
            f"as it computes it (BLAS's beta = 1), into {where}: no pass of its own")


def buffer_owners(groups):
    """{value: the value whose buffer holds it}, for the values of ``groups`` (a plan's
    steps) that have no buffer of their own: the result of a view step (its operand's,
    or that operand's own owner), and that of a step updating a value in place (a product
    accumulating into it, a scatter into it: ``in_place``)."""
    owner = {}
    for g in groups:
        if g.kind == "view":
            (x,), (v,) = g.inputs, g.outputs
            owner[v] = owner.get(x, x)
        elif g.in_place:
            value = updated_value(g)
            owner[g.outputs[0]] = owner.get(value, value)
    return owner


def _merge_siblings(groups):
    """Let a kernel share the loop of an earlier kernel with the same iteration space
    when no step in between reads the earlier one's results (it now runs later)."""
    merged = []
    for g in groups:
        partner = _sibling_for(g, merged)
        if partner is None:
            merged.append(g)
            continue
        partner.parts += g.parts
        partner.eqns += g.eqns
        g.merged_into = partner
    return merged


# How far back a kernel looks for a sibling, and how many it tries (a try builds a kernel);
# and the most equations a kernel grows to by taking siblings in: each try builds the whole
# merged kernel, so without a bound, many siblings (a complex chain, whose real and
# imaginary parts are computed side by side) cost time quadratic in their number.
SIBLING_WINDOW = 8
SIBLING_TRIES = 4
SIBLING_MAX_EQNS = 2 * MAX_KERNEL_DEPTH


def _sibling_for(g, earlier):
    if g.kind != "kernel":
        return None
    tried = 0
    g_reads = {a for e in g.eqns for a in e.invars if isinstance(a, Var)}
    for k in range(len(earlier) - 1, max(len(earlier) - 1 - SIBLING_WINDOW, -1), -1):
        cand = earlier[k]
        outs = {p[0].outvars[0] for p in cand.parts}
        between = earlier[k + 1:]
        if any(a in outs for s in between for e in s.eqns for a in e.invars):
            continue  # a step in between needs cand's results where cand runs now
        if any(v in g_reads for s in between for e in s.eqns for v in e.outvars):
            continue  # g needs a result of a step in between, which would run after it
        if cand.kind != "kernel" or cand.shape != g.shape or not _related(cand, g) or \
                len(cand.eqns) + len(g.eqns) > SIBLING_MAX_EQNS:
            continue
        try:
            build_kernel("probe", g.shape, cand.parts + g.parts)
            return cand
        except CannotFuse:
            pass
        tried += 1
        if tried == SIBLING_TRIES:
            return None
    return None


def _merge_row_stages(groups):
    """Make a kernel that reads an earlier one's results only within each row (the
    reductions over the last axis, the elements at its own index) a later stage of that
    kernel, when they are next to each other in the program (see ``staged_kernel``)."""
    merged = []
    for g in groups:
        earlier = merged[-1] if merged else None
        if earlier is None or not _reads_within_rows(earlier, g):
            merged.append(g)
            continue
        earlier.stages = _stages(earlier) + [(tuple(g.shape), g.parts)]
        earlier.parts = earlier.parts + g.parts
        earlier.eqns += g.eqns
        g.merged_into, g.as_stage = earlier, True
    return merged


def _reads_within_rows(a, b):
    """Whether kernel ``b`` can be a later stage of kernel ``a``: the same rows (two axes or
    more, all but the last alike; a stage over rows of one element computes one value per
    row); every reduction of either over the last axis alone (so a chunk of rows is the
    whole work of a thread); and ``b`` reads ``a``'s results, each only in its own row: a
    reduction at its row, an element-wise result at its own index, in their own dtype."""
    if a.kind != "kernel" or b.kind != "kernel" or len(a.shape) < 2 or \
            tuple(a.shape[:-1]) != tuple(b.shape[:-1]):
        return False
    try:
        stages = [build_kernel("probe", shape, parts) for shape, parts in _stages(a)]
        later = build_kernel("probe", tuple(b.shape), b.parts)
    except CannotFuse:
        return False
    shape = tuple(b.shape)
    rows = tuple(range(len(shape) - 1))
    if any(o.combine and o.kept_axes != rows for k in stages + [later] for o in k.outputs):
        return False
    written = {o.var: o for k in stages for o in k.outputs}
    read = [(later.inputs[op.attr], op.args[0]) for op in later.body if op.name == "load"
            and later.inputs[op.attr] in written]
    return bool(read) and all(_in_own_row(written[v], offset, shape) for v, offset in read)


def _in_own_row(out, offset, shape):
    """Whether a load at ``offset`` (an index op) of a kernel over ``shape`` reads ``out``
    (a KernelOutput) only in the row of the iteration, in the dtype it is stored in: at its
    own index, or at its row (a value per row: a reduction, or a row of one element)."""
    if out.acc_dtype not in (None, out.var.aval.dtype):
        return False
    out_shape = tuple(out.var.aval.shape)
    if out_shape == shape:
        return reads_at_index(offset, len(shape), out_shape)
    per_row = out_shape == shape[:-1] or out_shape == shape[:-1] + (1,)
    return per_row and reads_at_index(offset, len(shape) - 1, out_shape)


def _stages(g):
    """(shape, parts) of each stage of the kernel group ``g``: itself, if not staged."""
    return g.stages or [(tuple(g.shape), g.parts)]


def _related(a, b):
    """Worth sharing a loop: ``b`` reads one of ``a``'s inputs or results."""
    reads_a = {x for e in a.eqns for x in e.invars if isinstance(x, Var)} | \
        {p[0].outvars[0] for p in a.parts}
    return any(x in reads_a for e in b.eqns for x in e.invars if isinstance(x, Var))


def _final(g):
    while g.merged_into is not None:
        g = g.merged_into
    return g


def _finish(g, n, prefix):
    if g.kind != "kernel":
        g.inputs = [a for a in g.eqns[0].invars if isinstance(a, Var)]
        g.outputs = list(g.eqns[-1].outvars)
        if g.accumulator is not None:
            g.inputs.append(g.accumulator)
        return
    if g.stages:
        g.kernel = staged_kernel(f"{prefix}_{n}", [
            build_kernel(f"{prefix}_{n}_{k}", shape, parts)
            for k, (shape, parts) in enumerate(g.stages)])
        g.shape = g.kernel.shape  # (the longest stage's)
    else:
        g.kernel = build_kernel(f"{prefix}_{n}", g.shape, g.parts)
    g.inputs = list(g.kernel.inputs)
    g.outputs = [o.var for o in g.kernel.outputs]
    g.eqns = g.kernel.eqns

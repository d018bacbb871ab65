"""What the compiler made of a program, as data and as text: cost analysis and reports.

``step_costs(executable)`` estimates the work of each step of a compiled program, with XLA's
conventions so the numbers compare with ``jax.jit(f).lower(...).compile().cost_analysis()``:

- ``flops``: one per element for every arithmetic, comparison, select, bitwise op and
  conversion (integer ops included), as XLA's HloCostAnalysis counts element-wise ops.
  Transcendental functions (``exp``, ``log``, ``sin``, ``tanh``, ``sqrt``, ``pow``, ``erf``...)
  count one per element in ``transcendentals`` and ``TRANSCENDENTAL_FLOPS`` (0, as XLA) in
  ``flops``; rounding functions (``floor``, ``ceil``, ``round``...) are ordinary flops. A
  reduction of ``n`` elements into ``m`` results costs ``n - m`` (XLA's count: each result
  combines its elements pairwise). A library step costs what its primitive's ``flops`` rule
  says: ``dot_general`` ``2*M*N*K`` (a multiply and an add per term), a convolution
  ``2 * output size * kernel elements per output``.
- ``bytes read``: the size of each buffer a step reads, once (a kernel that reads 81 shifted
  windows of an image reads the image's bytes once, as XLA counts a fusion's operands);
  ``bytes written``: the size of its results. ``bytes accessed`` is their sum.

A kernel's flops are counted on its scalar body (``kernel.LoopKernel``): the ops the loop
really executes, so a lowering that computes ``sign`` with two compares and two selects
counts four. Two refinements make the count the program's, not the loop's:

- Index arithmetic is not counted: ops computed from loop indices and constants only
  (offsets, bounds checks of pads and concatenations), a load's offset computation, and
  selects whose condition is such a bounds check (a padded read).
- An op is counted once per distinct value it takes: ``n`` times where ``n`` is the product of
  the extents of the loop axes it depends on. So ``exp(b)`` of a scalar ``b`` broadcast over
  a ``[1000]`` loop counts 1, as XLA counts the ``exp`` on its scalar operand.

The reference backend runs the jaxpr one equation at a time; its costs are those of each
equation as a kernel of its own (nothing fused: every intermediate is read and written).
Steps whose cost is not modelled (sort, gather, control flow...) count their bytes and 0
flops, with a note saying so.
"""

import math
from dataclasses import dataclass, field

from ..core import Var
from .kernel import CannotFuse, build_kernel, kernel_lowering

# As XLA: a transcendental counts in ``transcendentals``, not in ``flops``.
TRANSCENDENTAL_FLOPS = 0
# ``math`` ops that are not transcendental (XLA counts them as ordinary flops).
ROUNDING_MATH = {"floor", "ceil", "round", "rint", "trunc", "nextafter"}
# Ops that move values around rather than compute.
_NOT_COUNTED = {"const", "index", "load", "bitcast"}


@dataclass
class StepCost:
    """The estimated cost of one step of a compiled program."""
    step: int
    kind: str               # "kernel", "library", "fallback" (reference), "view" or "equation"
    name: str               # the kernel's name, or the primitive's
    flops: int = 0
    transcendentals: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    note: str = ""
    seconds: list = field(default_factory=list)  # run times, when timing is on

    @property
    def bytes_accessed(self):
        return self.bytes_read + self.bytes_written

    def as_dict(self):
        d = {"step": self.step, "kind": self.kind, "name": self.name,
             "flops": float(self.flops), "transcendentals": float(self.transcendentals),
             "bytes accessed": float(self.bytes_accessed),
             "bytes read": float(self.bytes_read), "bytes written": float(self.bytes_written)}
        if self.note:
            d["note"] = self.note
        if self.seconds:
            d["seconds"] = sorted(self.seconds)[len(self.seconds) // 2]  # the median
        return d


def total_cost(costs):
    """The totals of a list of StepCosts, with JAX's ``cost_analysis`` keys."""
    keys = ("flops", "transcendentals", "bytes accessed", "bytes read", "bytes written")
    dicts = [c.as_dict() for c in costs]
    return {k: float(sum(d[k] for d in dicts)) for k in keys}


# --- kernels -------------------------------------------------------------------------------

def kernel_flops(loop):
    """(flops, transcendentals) of one run of a LoopKernel over its whole iteration space."""
    if loop.stages:
        counts = [kernel_flops(stage) for stage in loop.stages]
        return sum(f for f, _ in counts), sum(t for _, t in counts)
    deps, index_only = {}, {}  # op id -> loop axes it depends on; computed from indices only
    for op in loop.body:
        if op.name == "index":
            deps[op.id], index_only[op.id] = frozenset([op.attr]), True
        elif op.name == "load":
            deps[op.id], index_only[op.id] = deps[op.args[0].id], False
        else:
            deps[op.id] = frozenset().union(*(deps[a.id] for a in op.args))
            index_only[op.id] = all(index_only[a.id] for a in op.args)

    def is_guard(op):
        return op.name == "select" and index_only[op.args[0].id]

    computed = _values_reaching_outputs(loop, is_guard)
    flops = transcendentals = 0
    for op in loop.body:
        if op.id not in computed or op.name in _NOT_COUNTED or index_only[op.id] \
                or is_guard(op):
            continue
        n = math.prod(loop.shape[axis] for axis in deps[op.id])
        if op.name == "math" and op.attr not in ROUNDING_MATH:
            transcendentals += n
            flops += n * TRANSCENDENTAL_FLOPS
        else:
            flops += n
    size = math.prod(loop.shape)
    for out in loop.outputs:
        if out.combine is not None:
            flops += size - math.prod(out.shape)
    return flops, transcendentals


def _values_reaching_outputs(loop, is_guard):
    """Ids of the ops whose values flow into an output: not through a load's offset (that is
    addressing) nor a guard's condition."""
    by_id = {op.id: op for op in loop.body}
    seen, stack = set(), [o.value.id for o in loop.outputs]
    while stack:
        op = by_id[stack.pop()]
        if op.id in seen:
            continue
        seen.add(op.id)
        if op.name == "load":
            continue
        args = op.args[1:] if is_guard(op) else op.args
        stack.extend(a.id for a in args)
    return seen


def _buffer_bytes(reads, writes):
    """(bytes read, bytes written): each distinct buffer once; literals are not buffers."""
    distinct = list({v: None for v in reads if isinstance(v, Var)})
    return sum(v.aval.nbytes for v in distinct), sum(v.aval.nbytes for v in writes)


def kernel_cost(step, loop):
    flops, transcendentals = kernel_flops(loop)
    read, written = _buffer_bytes(loop.inputs, [o.var for o in loop.outputs])
    return StepCost(step, "kernel", loop.name, flops, transcendentals, read, written)


# --- equations (library steps, reference steps, the reference backend) ---------------------

def equation_cost(step, eqn, kind="equation"):
    """The cost of one equation run on its own (a library or reference step)."""
    name = eqn.primitive.name
    read, written = _buffer_bytes(eqn.invars, eqn.outvars)
    cost = StepCost(step, kind, name, bytes_read=read, bytes_written=written)
    flops = eqn.primitive.rules.get("flops")
    if flops is not None:
        cost.flops = flops(eqn)
    elif eqn.primitive.is_call:
        inner = eqn.params[eqn.primitive.call_param]
        sub = total_cost(equation_costs(getattr(inner, "jaxpr", inner)))
        cost.flops, cost.transcendentals = int(sub["flops"]), int(sub["transcendentals"])
    else:
        loop = _equation_as_kernel(eqn)
        if loop is None:
            cost.note = f"flops of {name} are not modelled"
        else:
            cost.flops, cost.transcendentals = kernel_flops(loop)
    return cost


def _equation_as_kernel(eqn):
    """The LoopKernel computing ``eqn`` alone, or None when it has no kernel lowering."""
    lowering, _ = kernel_lowering(eqn)
    if lowering is None:
        return None
    shape = eqn.invars[0].aval.shape if lowering.kind == "reduction" \
        else eqn.outvars[0].aval.shape
    try:
        return build_kernel(eqn.primitive.name, tuple(shape),
                            [(eqn, {eqn.outvars[0]: eqn})])
    except CannotFuse:
        return None


def equation_costs(jaxpr):
    """StepCosts of a jaxpr run one equation at a time (the reference backend)."""
    return [equation_cost(i, eqn) for i, eqn in enumerate(jaxpr.eqns)]


def _library_cost(step, g):
    """The cost of a library or reference step: its equation's, and for a product adding
    its result into a value (``FusionGroup.accumulator``), the additions and that value's
    buffer too."""
    cost = equation_cost(step, g.eqns[0], g.kind)
    if g.accumulator is not None:
        cost.flops += math.prod(g.outputs[0].aval.shape)
        cost.bytes_read, cost.bytes_written = _buffer_bytes(g.inputs, g.outputs)
    return cost


def step_costs(executable):
    """One StepCost per step of a compiled program (see the module docstring)."""
    plan = executable.plan
    if plan is None:  # the reference backend
        return equation_costs(executable.jaxpr.jaxpr)
    costs = [kernel_cost(n, g.kernel) if g.kind == "kernel"
             else StepCost(n, "view", g.eqns[0].primitive.name, note="no copy: a view")
             if g.kind == "view"
             else _library_cost(n, g) for n, g in enumerate(plan.groups)]
    for n, seconds in (executable.step_times or {}).items():
        costs[n].seconds = list(seconds)
    return costs


def cost_table(costs):
    """The StepCosts as an aligned text table, with a total line."""
    header = ("step", "kind", "name", "flops", "transc.", "bytes read", "bytes written")
    rows = [(str(c.step), c.kind, c.name, f"{c.flops:,}", f"{c.transcendentals:,}",
             f"{c.bytes_read:,}", f"{c.bytes_written:,}") for c in costs]
    total = total_cost(costs)
    rows.append(("", "total", "", f"{int(total['flops']):,}",
                 f"{int(total['transcendentals']):,}", f"{int(total['bytes read']):,}",
                 f"{int(total['bytes written']):,}"))
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths)))
             for row in [header] + rows]
    notes = [f"step {c.step}: {c.note}" for c in costs if c.note]
    return "\n".join(lines + notes)


# --- fusion report and the compiled program as text ----------------------------------------

@dataclass
class FusionReport:
    """Which equations became which step and why: ``decisions`` (``FusionDecision`` per
    equation) and ``groups`` (``FusionGroup`` per step) as data, ``text`` to read."""
    text: str
    decisions: list
    groups: list

    def __str__(self):
        return self.text

    def _repr_pretty_(self, p, cycle):  # IPython shows the text
        p.text(self.text)


REFERENCE_NOTE = ("reference backend: no kernels, no fusion; the jaxpr runs equation by "
                  "equation with the NumPy implementations")


def fusion_report(executable):
    plan = executable.plan
    if plan is None:
        return FusionReport(REFERENCE_NOTE, [], [])
    return FusionReport(plan.report(), list(plan.decisions), list(plan.groups))


def compiled_text(executable):
    """The compiled program to read: the fusion report, the cost table and each kernel, in
    the compiler's kernel IR and as the code first generated for it."""
    costs = cost_table(step_costs(executable))
    plan, backend = executable.plan, executable.target
    if plan is None:
        return "\n\n".join([f"{executable.name} on the {backend} backend", REFERENCE_NOTE,
                            str(executable.jaxpr), costs])
    counts = {}
    for g in plan.groups:
        counts[g.kind] = counts.get(g.kind, 0) + 1
    summary = ", ".join(f"{n} {kind} step{'s' * (n != 1)}" for kind, n in counts.items())
    header = f"{executable.name} on the {backend} backend: {summary or 'no steps'}"
    if executable.runs_as:
        header += f"; a call runs as {executable.runs_as}"
    sections = [header,
                "== fusion ==\n" + plan.report(), "== cost ==\n" + costs]
    for k in executable.kernels:
        stage, text = next(iter(k.texts.items()))
        sections.append(f"== {k.name} ==\n{k.loop.pretty()}\n\n-- {stage} --\n{text}")
    return "\n\n".join(sections)


__all__ = ["StepCost", "FusionReport", "step_costs", "total_cost", "kernel_flops",
           "equation_cost", "equation_costs", "cost_table", "fusion_report", "compiled_text",
           "TRANSCENDENTAL_FLOPS", "ROUNDING_MATH"]

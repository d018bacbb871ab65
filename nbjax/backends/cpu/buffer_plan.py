"""The buffer plan of a native function: where in its scratch block each value lives.

A native function (``control_flow``) gets one scratch block per call for everything its steps
compute on the way. Its layout is made while the function is emitted, in program order: a
value takes a region when the step computing it is emitted and gives it back after the last
step that reads it; a later value reuses a region given back. So the block holds at once only
what is live at one point of the program, not every intermediate of it (a transformer
block's gradient: 97 MB of intermediates, 15 MB of block).

A view's value (a reshape's: ``compiler.fusion``) takes no region: it is its operand's,
which lives until the last step reading either. A result that is a view has its owner
computed into the result's destination (``control_flow``), so the bytes of that result
are written when its owner's step runs, not at the view. The result of a step updating a
value in place (``FusionGroup.in_place``: the sum of a matrix product accumulating into
``c``, ``c + dot(a, b)``; a scatter into ``c``) takes no region either: it is ``c``'s,
which nothing reads after the step (so only the result's value is ever seen there).

The order of emission is the order of execution, with two cases that keep it safe:

- a loop body is emitted once and run many times: the values of one iteration are dead when
  it ends (the carries and rows of ``ys`` it delivers live in buffers of the loop's, taken
  before the body and given back after the loop), so the body's regions are free again at
  the end of every iteration, as they are at the end of its emission;
- a branch of a ``cond`` gives back its regions at its end, so the next branch (which runs
  instead of it, never after it) reuses them.

``POISON`` (tests) fills every region given back with ones (NaN for floats): a step that
read a value after its region was given back would see them instead of the value.

Donated inputs (``jit(f, donate_argnums=...)``) are the other reuse: ``donations`` pairs
each with an output of its type (``compiler.donation.fits``) that the program may write
into the donated buffer instead of a new one (the caller's Array is deleted; see
``executable.Executable.run_reusing``). It is safe when

- the output is the input itself (passed through): no write at all;
- the step writing the output comes after the input's last read (or the output is only
  copied out at the end, from another value): the input is dead when it is overwritten;
- the step writing the output is the kernel making the input's last read, and it reads
  every element of the input at the index where it writes the output's
  (``kernel.in_place_ok``). That kernel is generated to read the input through the output's
  pointer (``LoopKernel.in_place``), so the compiler's ``noalias`` assumption holds, and its
  output buffer must hold the input when it starts: the donated buffer itself, or a copy
  when the donated buffer cannot be reused;
- the step writing the output is a product adding into the input (``c + dot(a, b)``,
  ``FusionGroup.accumulator``) that does not read it otherwise: it adds into the output's
  buffer, which holds the input when it starts, as above
  (``FusionGroup.output_holds_accumulator``).

An input read again after the output is written (a later step, or itself as another of the
program's outputs, copied out at the end) keeps its buffer.
"""

from collections import Counter

from ...compiler import donation
from ...compiler.fusion import buffer_owners as owners, read_after, updated_value
from ...compiler.kernel import in_place_ok
from ...core import Var
from . import runtime

POISON = False  # fill each region given back with 0xff bytes (see the module docstring)


class ScratchPlan:
    """Regions of one block, taken and given back at compile time; ``size`` is the block's
    size: the most bytes live at once, give or take fragmentation."""

    def __init__(self):
        self.size = 0
        self._free = []  # (offset, nbytes) sorted by offset, neighbours merged

    def take(self, nbytes):
        """The offset of a free region of ``nbytes`` (rounded up to the alignment): the
        smallest free one that fits, else the end of the block, grown."""
        nbytes = -(-max(nbytes, 1) // runtime.ALIGNMENT) * runtime.ALIGNMENT
        fits = [k for k, (_, size) in enumerate(self._free) if size >= nbytes]
        if fits:
            k = min(fits, key=lambda k: self._free[k][1])
            offset, size = self._free[k]
            if size == nbytes:
                del self._free[k]
            else:
                self._free[k] = (offset + nbytes, size - nbytes)
            return offset
        if self._free and sum(self._free[-1]) == self.size:  # a free tail: grow it
            offset, _ = self._free.pop()
        else:
            offset = self.size
        self.size = offset + nbytes
        return offset

    def give_back(self, offset, nbytes):
        nbytes = -(-max(nbytes, 1) // runtime.ALIGNMENT) * runtime.ALIGNMENT
        k = next((k for k, (o, _) in enumerate(self._free) if o > offset), len(self._free))
        self._free.insert(k, (offset, nbytes))
        if k + 1 < len(self._free) and offset + nbytes == self._free[k + 1][0]:
            self._free[k] = (offset, nbytes + self._free.pop(k + 1)[1])
        if k and sum(self._free[k - 1]) == offset:
            previous, _ = self._free[k - 1]
            self._free[k - 1] = (previous, self._free.pop(k)[1] + offset - previous)


def lifetimes(groups, kept):
    """{step index: the values whose region the step frees}: for each value written by a
    step of ``groups`` (a plan's: ``FusionGroup.outputs``), the last step that reads it,
    itself or through a view (``inputs``; or the one writing it, if none does); values in
    ``kept`` (results the caller copies out at the end) are left out. A view has no region
    of its own."""
    owner = owners(groups)
    last = {}
    for n, g in enumerate(groups):
        for v in g.outputs:
            if v not in owner:
                last[v] = n
        for v in g.inputs:
            v = owner.get(v, v)
            if v in last:
                last[v] = n
    dying = {}
    for v, n in last.items():
        if v not in kept:
            dying.setdefault(n, []).append(v)
    return dying


def accumulated_inputs(jaxpr, groups):
    """{input position: output position} of the inputs of ``jaxpr`` (a loop body's, planned
    into ``groups``) that a step updates to make the output at that position, which the
    program delivers once, with nothing reading the input (or a view of it) from that step
    on but the update, nor outputting it: a product accumulating into it
    (``FusionGroup.accumulator``), a scatter into it (``fusion.updated_operand``). A loop
    keeps such a carry in one buffer that the step updates in place (``control_flow``),
    rather than in two (a weight's gradient summed over a scan; ``x.at[i].set(v)`` in a
    ``fori_loop``, which copied all of ``x`` every iteration)."""
    outputs = list(jaxpr.outvars)
    updated = {}
    for g in groups:
        x, out = updated_value(g), g.outputs[0] if g.outputs else None
        if x in jaxpr.invars and outputs.count(out) == 1 and \
                not read_after(g, groups, x, outputs):
            updated[jaxpr.invars.index(x)] = outputs.index(out)
    return updated


def carries_in_place(jaxpr, groups, n_consts, n_carries):
    """The carries (numbers ``k``: input ``n_consts + k``, output ``k``) of a loop body
    (``jaxpr``, planned into ``groups``) that the loop may keep in one buffer, updated in
    place by the step computing their next value: a library update
    (``accumulated_inputs``), or a kernel computing it element-wise from the carry at each
    element's own index (``kernel.in_place_ok``: a ``fori_loop`` of ``y = (y + x / y) / 2``)
    with nothing reading the carry after it. Such a kernel is marked to read the carry
    through its output's pointer (``LoopKernel.in_place``), so call this before the
    kernels' code is generated. One buffer instead of two halves the carries' share of the
    cache, and a kernel no longer writes lines it has not read (1M float32 elements, 20
    iterations: 0.087 -> 0.054 ms an iteration, as jax.jit)."""
    updated = accumulated_inputs(jaxpr, groups)
    kept = {k for k in range(n_carries) if updated.get(n_consts + k) == k}
    outputs, owner = list(jaxpr.outvars), owners(groups)
    for n, g in enumerate(groups):
        for k in range(n_carries):
            x = jaxpr.invars[n_consts + k]
            if k not in kept and g.kind == "kernel" and outputs.count(outputs[k]) == 1 and \
                    not _read_from(groups[n + 1:], x, owner, outputs) and \
                    _update_in_kernel(g.kernel, x, outputs[k], owner):
                kept.add(k)
    return kept


def _read_from(groups, x, owner, outputs):
    """Whether a step of ``groups``, or the program's ``outputs``, reads ``x`` (itself or
    through a view)."""
    return any(owner.get(v, v) is x for g in groups for v in g.inputs) or \
        any(owner.get(v, v) is x for v in outputs if isinstance(v, Var))


def donations(jaxpr, groups, donated):
    """{input position: (output position, in place)}: for each input of ``jaxpr`` (a
    plan's Jaxpr whose steps are ``groups``) at the positions ``donated``, in order, the
    first output not taken yet that fits it (``donation.fits``) and may be written into
    its buffer (see the module docstring); ``in place``: by the kernel that reads it, whose
    ``in_place`` this sets."""
    owner, last_read, written = owners(groups), {}, {}
    for n, g in enumerate(groups):
        for v in g.inputs:
            last_read[owner.get(v, v)] = n
        for v in g.outputs:
            written.setdefault(v, n)
    for view, root in owner.items():  # (a view result's bytes: its owner's, written then)
        written[view] = written.get(root, written[view])
    uses = Counter(a for a in jaxpr.outvars if isinstance(a, Var))
    free, safe = list(range(len(jaxpr.outvars))), {}
    for i in sorted(donated):
        x = jaxpr.invars[i]
        for k in [k for k in free if donation.fits(x.aval, jaxpr.outvars[k].aval)]:
            how = _reuse(x, jaxpr.outvars[k], groups, last_read, written, uses, owner)
            if how is not None:
                safe[i] = (k, how == "in place")
                free.remove(k)
                break
    return safe


def _reuse(x, out, groups, last_read, written, uses, owner):
    """How ``out`` may take the buffer of the donated input ``x`` (see ``donations``):
    "as it is" (it is ``x``), "after" (written after ``x``'s last read), "in place" (by
    the kernel making that read, which is marked so), or None: it may not."""
    if out is x:
        return "as it is"
    if x in uses:
        return None  # x is copied out at the end: read after any output is written
    n = written.get(out, len(groups)) if isinstance(out, Var) else len(groups)
    if n > last_read.get(x, -1):
        return "after"
    if n == last_read[x] and _update_in_place(groups[n], x, out, uses, owner):
        return "in place"
    return None


def _update_in_place(group, x, out, uses, owner):
    """Mark ``group``'s kernel to compute ``out`` in ``x``'s buffer if it can: it delivers
    ``out`` straight into the program's result (its one use there), ``in_place_ok``, and
    it reads ``x``'s buffer through no view (``owner``: see ``owners``). A product adding
    into ``x`` (``FusionGroup.accumulator``) can too, when it does not read ``x`` itself."""
    if uses[out] != 1:
        return False
    if group.accumulator is x and group.outputs == [out]:
        if any(a is x or owner.get(a) is x for a in group.eqns[0].invars):
            return False
        group.output_holds_accumulator = True
        return True
    return group.kind == "kernel" and _update_in_kernel(group.kernel, x, out, owner)


def _update_in_kernel(loop, x, out, owner):
    """Mark the kernel ``loop`` to compute ``out`` in ``x``'s buffer if it can: it reads
    ``x`` only at the index where it writes ``out`` (``in_place_ok``), through no view
    (``owner``: see ``owners``), and updates no other input there."""
    if x not in loop.inputs or out not in [o.var for o in loop.outputs] or \
            any(owner.get(v) is x for v in loop.inputs):
        return False
    j = loop.inputs.index(x)
    k = next(k for k, o in enumerate(loop.outputs) if o.var is out)
    if loop.in_place.get(j) == k:
        return True   # (marked already: a loop's body is planned before it is emitted)
    if j in loop.in_place or k in loop.in_place.values() or not in_place_ok(loop, j, k):
        return False
    loop.in_place[j] = k
    return True

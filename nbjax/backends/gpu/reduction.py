"""Reductions to few outputs over long axes, in phases: how the GPU planner keeps a full sum
off a single thread.

First, a planned kernel whose reductions keep different axes (the CPU's planner lets
siblings reading the same inputs share a loop: ``x.sum()`` with ``x.max(0)``) is run as
one kernel per set of kept axes (``separate``): in one loop, only the axes every reduction
keeps could be shared among threads, and a full sum among them leaves just one.

The plain scaffold gives each output element of a reduction to one thread, which loops over
the reduced axes itself (``scaffold``): right, and fast when there are many outputs, but a
full sum of 10^8 elements then runs on one thread. When a kernel's outputs are too few to
keep the GPU busy and its reduced axes are long enough, the planner (``Policy.split``)
splits it:

- phase 1 (a ``scaffold.PartialsKernel``): the same kernel, its every output element
  reduced by ``partials`` threads: partial ``c`` of an output combines the reduced elements
  ``c``, ``c + partials``, ``c + 2 * partials``... (adjacent threads read adjacent
  elements: coalesced loads), and stores its partial result in a scratch buffer of shape
  ``(*output shape, partials)``. Element-wise outputs of the kernel are stored as usual
  (each index is still visited once);
- phase 2, a small generated ``LoopKernel`` reducing the scratch buffer's last axis into
  the outputs, itself split again by the same rule when its partials are many.

No thread reads what another writes within a launch, so there are no barriers, atomics or
shuffles: the phases run, unchanged, on the host emulation of the grid (``emulate``). The
cost is one launch per phase and the scratch buffers (``partials`` elements per output).
"""

import dataclasses
import math

from ...compiler.kernel import KernelBuilder, KernelOutput, LoopKernel, live_ops
from ...core import ShapedArray
from ...core.jaxpr import Var
from .scaffold import PartialsKernel, describe, parallel_size

@dataclasses.dataclass(frozen=True)
class Split:
    """The planner's choice for one kernel: ``partials`` per output element (None: not
    split) and the reason, in words, for the fusion report."""
    partials: object
    reason: str


def _floor_pow2(n):
    return 1 << (n.bit_length() - 1) if n > 0 else 0


@dataclasses.dataclass(frozen=True)
class Policy:
    """When the GPU planner splits a reduction: when its parallel points (``scaffold``)
    would leave most of ``threads`` idle (256 blocks of 256 fill every SM of today's GPUs,
    several blocks each), into as many partials as fill them, each of ``per_partial``
    reduced elements at least (fewer cost more than they save), ``min_partials`` at least
    (fewer are not worth a launch). The scratch buffers then hold at most ``threads``
    elements each."""
    threads: int = 1 << 16
    per_partial: int = 32
    min_partials: int = 64

    def split(self, kernel):
        """The ``Split`` of ``kernel``, one of the ``separate`` parts of a planned kernel
        (its reductions keep the same axes)."""
        reductions = [o for o in kernel.outputs if o.combine is not None]
        if not reductions or math.prod(kernel.shape) == 0:  # (empty: launches nothing)
            return Split(None, "")
        points = parallel_size(kernel)
        reduced = math.prod(kernel.shape) // points
        if points >= self.threads:
            return Split(None, f"not split in phases: its {points} parallel points keep "
                               f"{self.threads} threads busy")
        limits = {"threads": _floor_pow2(self.threads // points),
                  f"partials of {self.per_partial} elements": reduced // self.per_partial}
        partials = min(limits.values())
        if partials < self.min_partials:
            limit = min(limits, key=limits.get)
            return Split(None, f"not split in phases: {reduced} reduced elements per "
                               f"parallel point would make fewer than {self.min_partials} "
                               f"partials ({limit})")
        return Split(partials, f"a reduction in phases: {points} parallel point"
                               f"{'s' * (points != 1)} would leave most of {self.threads} "
                               f"threads idle, so {partials} threads share each one's "
                               f"{reduced} reduced elements (every {partials}th), into "
                               f"scratch buffers of {partials} partials per output element, "
                               "which combining kernels reduce")

    def explain(self, kernel, block):
        """How ``kernel`` runs on the GPU, in words, for the fusion report."""
        parts = separate(kernel)
        words = []
        for part in parts:
            how = self.split(part)
            words.append(how.reason if how.partials else
                         "; ".join(filter(None, [describe(part, block), how.reason])))
        if len(parts) == 1:
            return f"on the GPU: {words[0]}"
        kept = ", ".join(str(list(p.outputs[0].kept_axes)) for p in parts)
        return (f"on the GPU: its reductions keep different axes ({kept}), so that sharing "
                f"one loop would leave only the axes all keep to the threads: it runs as "
                f"{len(parts)} kernels, one per set of kept axes (its element-wise outputs "
                "with the first): " + " | ".join(f"{p.name}: {w}" for p, w in zip(parts, words)))

    def phases(self, kernel):
        """The kernels that compute ``kernel``, in launch order: each of its ``separate``
        parts, as itself, or as its partials kernel followed by the phases of its combining
        kernels (one per output shape of its reductions)."""
        return [k for part in separate(kernel) for k in self._phases(part)]

    def _phases(self, kernel):
        partials = self.split(kernel).partials
        if partials is None:
            return [kernel]
        scratch = {k: Var(ShapedArray((*o.shape, partials), o.acc_dtype))
                   for k, o in enumerate(kernel.outputs) if o.combine is not None}
        outputs = [dataclasses.replace(o, var=scratch[k]) if k in scratch else o
                   for k, o in enumerate(kernel.outputs)]
        fields = {f.name: getattr(kernel, f.name) for f in dataclasses.fields(kernel) if f.init}
        first = PartialsKernel(**{**fields, "name": kernel.name + "_partials",
                                  "outputs": outputs}, partials=partials)
        by_shape = {}
        for k, var in scratch.items():
            by_shape.setdefault(var.aval.shape, []).append((var, kernel.outputs[k]))
        combines = [combining_kernel(f"{kernel.name}_combine{n or ''}", pairs)
                    for n, pairs in enumerate(by_shape.values())]
        return [first] + [k for c in combines for k in self._phases(c)]


def separate(kernel):
    """``kernel`` as one kernel per set of axes its reductions keep (its element-wise
    outputs with the reductions keeping the most): what one loop would give its threads is
    the axes every reduction keeps, and all of them share the same input loads only on the
    CPU. A kernel whose reductions agree is ``[kernel]``."""
    groups = {}
    for out in kernel.outputs:
        if out.combine is not None:
            groups.setdefault(tuple(out.kept_axes), []).append(out)
    if len(groups) <= 1:
        return [kernel]
    widest = max(groups, key=len)
    groups[widest] += [o for o in kernel.outputs if o.combine is None]
    ordered = sorted(groups.items(), key=lambda item: item[0] != widest)
    return [dataclasses.replace(kernel, name=f"{kernel.name}_{n}", outputs=outs,
                                body=live_ops(kernel.body, outs))
            for n, (_, outs) in enumerate(ordered)]


def combining_kernel(name, pairs):
    """A LoopKernel reducing the last axis of each scratch buffer into its output: ``pairs``
    of (scratch var, the ``KernelOutput`` it stands for), the buffers all of one shape."""
    ctx = KernelBuilder()
    shape = pairs[0][0].aval.shape
    index = [ctx.index(k) for k in range(len(shape))]
    outputs = []
    for n, (_, out) in enumerate(pairs):
        value = ctx.load(n, ctx.offset(index, shape), out.acc_dtype)
        outputs.append(KernelOutput(out.var, value, tuple(range(len(shape) - 1)), out.combine,
                                    out.identity, out.acc_dtype))
    return LoopKernel(name, shape, [b for b, _ in pairs], outputs, list(ctx.ops))

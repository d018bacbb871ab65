"""The GPU's scaffold around the shared kernel body: threads instead of loops.

A kernel is the shared function of ``backends.llvm.define_kernel``, its buffers in global
memory (address space 1), run by a grid of thread blocks. Its iteration space splits into

- the *parallel* axes: every axis that all of its reductions keep (all axes when it has
  none). Their points are numbered in row-major order and shared out among the threads by a
  grid-stride loop: thread ``t`` of block ``b`` takes the points ``b * block_dim + t``, then
  every ``block_dim * grid_dim`` further, so any grid covers any size;
- the *reduced* axes, the others: the thread that owns a parallel point loops over all of
  them itself. Each output element of a reduction is then written by exactly one thread
  (its kept axes include every parallel axis), so the shared emitter's read-combine-write
  (``KernelEmitter.store_output``) is right without atomics or barriers. An output that
  keeps exactly the parallel axes (the common case) accumulates in a register instead,
  stored once.

A ``PartialsKernel`` (phase 1 of a reduction in phases: ``reduction``) shares each parallel
point out among ``partials`` threads instead: thread item ``q`` is point ``q // partials``,
partial ``c = q % partials``, which combines every ``partials``-th element of the reduced
axes from the ``c``-th in a register and stores the result at ``[point..., c]`` of each
reduction's scratch buffer (shape ``(*output shape, partials)``): one thread per element
again. (Its reductions all keep exactly the parallel axes: ``reduction.separate``.)

Where a thread finds its block and thread numbers is the scaffold's one parameter
(``Indices``): the special registers of an NVIDIA GPU (``NVVM_INDICES``) or function
arguments (``HOST_INDICES``), with which the same body runs on the host CPU, driven over
the whole grid by a host loop (``emulate``): that is how the index logic is tested without
a GPU.
"""

import math
from dataclasses import dataclass

from llvmlite import ir

from ...compiler.kernel import LoopKernel
from ..llvm import (I32, I64, KernelScaffold, MathNames, constant, entry_alloca, for_loop,
                    reg_type)
from ..llvm.mathnames import INTRINSICS

# How the GPU computes transcendental functions: mathlib's inline polynomials (the CPU's
# accuracy), the intrinsics NVPTX lowers to single instructions, and libdevice's
# ``__nv_*`` functions for the rest (linked into the module: ``ptx``).
GPU_MATH = MathNames(intrinsics=frozenset({"sqrt", "fma", "floor", "ceil", "round", "rint"})
                     & INTRINSICS, prefix="__nv_")


@dataclass(frozen=True)
class Indices:
    """Where a thread's numbers come from: ``"nvvm"`` (the ``%tid``/``%ctaid``/``%ntid``/
    ``%nctaid`` registers) or ``"args"`` (four i64 arguments after the buffers: block,
    thread, block_dim, grid_dim); ``address_space`` is where the buffers live."""
    source: str
    address_space: int

    @property
    def extra_args(self):
        return (I64,) * 4 if self.source == "args" else ()

    def read(self, builder, args):
        """(block, thread, block_dim, grid_dim) as i64 values."""
        if self.source == "args":
            return list(args)
        names = ("ctaid.x", "tid.x", "ntid.x", "nctaid.x")
        return [builder.zext(builder.call(_sreg(builder.module, n), []), I64) for n in names]


NVVM_INDICES = Indices("nvvm", 1)
HOST_INDICES = Indices("args", 0)


def _sreg(module, name):
    fname = f"llvm.nvvm.read.ptx.sreg.{name}"
    fn = module.globals.get(fname)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(I32, []), name=fname)
    return fn


@dataclass
class PartialsKernel(LoopKernel):
    """A LoopKernel whose reduction outputs are scratch buffers of ``partials`` partial
    results per output element (shape ``(*output shape, partials)``; see the docstring)."""
    partials: int = 1


def parallel_axes(kernel):
    """The axes of ``kernel`` that threads share out (see the module docstring)."""
    axes = set(range(len(kernel.shape)))
    for out in kernel.outputs:
        if out.combine is not None:
            axes &= set(out.kept_axes)
    return tuple(sorted(axes))


def parallel_size(kernel):
    """How many points the threads share out: the product of the parallel axes' extents."""
    size = 1
    for a in parallel_axes(kernel):
        size *= kernel.shape[a]
    return size


def describe(kernel, block):
    """The GPU's choices for ``kernel`` in words, for the fusion report."""
    axes = parallel_axes(kernel)
    reduced = [a for a in range(len(kernel.shape)) if a not in axes]
    how = (f"one thread per point of axes {list(axes)} "
           f"({parallel_size(kernel)} points), blocks of {block} threads, a grid-stride loop")
    if reduced:
        how += (f"; each thread loops over the reduced axes {reduced} itself (one thread per "
                "output element: no atomics or barriers)")
    return how


class GridStride(KernelScaffold):
    """The scaffold of one kernel (see the module docstring); ``indices`` is an
    ``Indices``, ``math`` a ``MathNames`` (the host emulation's calls libm where the GPU
    calls libdevice)."""

    def __init__(self, kernel, indices=NVVM_INDICES, math=GPU_MATH):
        self.kernel, self.indices, self.math = kernel, indices, math
        self.address_space = indices.address_space
        self.extra_args = indices.extra_args
        self.parallel = parallel_axes(kernel)
        self.reduced = [a for a in range(len(kernel.shape)) if a not in self.parallel]
        self.partials = kernel.partials if isinstance(kernel, PartialsKernel) else None

    def emit(self, emitter, args):
        self.e, self.b = emitter, emitter.b
        block, thread, block_dim, grid_dim = self.indices.read(self.b, args)
        b = self.b
        start = b.add(b.mul(block, block_dim), thread, name="flat")
        stride = b.mul(block_dim, grid_dim, name="stride")
        total = ir.Constant(I64, parallel_size(self.kernel) * (self.partials or 1))
        self._grid_stride(start, total, stride)

    def _grid_stride(self, start, total, stride):
        """``for (p = start; p < total; p += stride)``: ``for_loop`` with a runtime step."""
        b = self.b
        pre = b.block
        header, body = b.append_basic_block("grid"), b.append_basic_block("grid.body")
        done = b.append_basic_block("grid.done")
        b.branch(header)
        b.position_at_end(header)
        p = b.phi(I64, name="p")
        p.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", p, total), body, done)
        b.position_at_end(body)
        if self.partials is None:
            self._point(self._unflatten(p, self.parallel), None)
        else:
            n = ir.Constant(I64, self.partials)
            self._point(self._unflatten(b.udiv(p, n), self.parallel), b.urem(p, n))
        p.add_incoming(b.add(p, stride, name="p.next"), b.block)
        b.branch(header)
        b.position_at_end(done)

    def _unflatten(self, p, axes):
        """{axis: i64 index} of point number ``p`` of ``axes`` (row-major)."""
        b, index = self.b, {}
        for a in reversed(axes):
            n = ir.Constant(I64, self.kernel.shape[a])
            if a == axes[0]:
                index[a] = p
            else:
                index[a], p = b.urem(p, n), b.udiv(p, n)
        return index

    def _point(self, index, partial):
        """Everything one thread does for one parallel point (and, for a PartialsKernel, one
        partial ``partial`` of it): the body at every index of the reduced axes it covers,
        outputs delivered."""
        b, e, kernel = self.b, self.e, self.kernel
        local = {k: self._accumulator(out) for k, out in enumerate(kernel.outputs)
                 if out.combine is not None and tuple(out.kept_axes) == self.parallel
                 and (self.reduced or partial is not None)}

        def body(full):
            for k, value in enumerate(e.values(full)):
                if k in local:
                    acc = b.load(local[k], typ=reg_type(kernel.outputs[k].acc_dtype))
                    b.store(e.accumulate(kernel.outputs[k].combine, acc, value,
                                         kernel.outputs[k].acc_dtype), local[k])
                else:
                    e.store_output(k, full, value)  # (never a reduction in a PartialsKernel)
        if partial is None:
            self._reduce_loops(0, dict(index), body)
        else:
            self._strided_loop(partial, index, body)
        for k, var in local.items():
            out = kernel.outputs[k]
            at = [index[a] for a in out.kept_axes] + ([] if partial is None else [partial])
            offset = e.offset(at, out.shape)
            e.store(e.outs[k], offset, b.load(var, typ=reg_type(out.acc_dtype)),
                    out.acc_dtype)

    def _accumulator(self, out):
        """A register (a stack slot that LLVM promotes) holding ``out``'s running value,
        starting at the identity: the output buffer's own starting value, so storing the
        total over it is the same as accumulating into it."""
        var = entry_alloca(self.b, reg_type(out.acc_dtype), 1, 8)
        self.b.store(constant(out.identity, out.acc_dtype), var)
        return var

    def _reduce_loops(self, depth, index, body):
        if depth == len(self.reduced):
            body([index[a] for a in range(len(self.kernel.shape))])
            return
        axis = self.reduced[depth]

        def inner(i):
            self._reduce_loops(depth + 1, {**index, axis: i}, body)
        for_loop(self.b, ir.Constant(I64, 0), ir.Constant(I64, self.kernel.shape[axis]), inner,
                 f"r{axis}")

    def _strided_loop(self, partial, index, body):
        """``body`` at reduced elements ``partial``, ``partial + partials``... (numbered
        row-major over the reduced axes)."""
        reduced = math.prod(self.kernel.shape[a] for a in self.reduced)

        def at(r):
            full = {**index, **self._unflatten(r, self.reduced)}
            body([full[a] for a in range(len(self.kernel.shape))])
        for_loop(self.b, partial, ir.Constant(I64, reduced), at, "r", step=self.partials)

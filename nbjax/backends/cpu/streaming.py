"""x86 non-temporal ("streaming") stores for large memory-bound kernels: a store policy of
the CPU's loop scaffold (``codegen.CpuLoops``).

Non-temporal stores write whole cache lines to memory without reading them first or evicting
useful data: for outputs much larger than the caches they are about twice as fast
(measured on the development machines). Smaller outputs are better left in the cache for their
consumer.
"""

import math
import platform

import numpy as np
from llvmlite import ir

from ..llvm import I64, entry_alloca, mem_type
from .runtime import ALIGNMENT

STREAM_MIN_BYTES = 8 << 20
STREAM_OPS_PER_BUFFER = 8  # arithmetic ops per buffer read or written: memory-bound
STREAM_BLOCK = 1024     # bytes per output computed into an L1 scratch buffer, then streamed
# Bytes per non-temporal store: the vector width LLVM picks for this CPU's loops (256-bit),
# so each store reads back exactly what one vector store of the loop wrote to the scratch
# buffer (a wider load spanning two stores would wait for them to retire).
STREAM_VECTOR = 32
_X86 = platform.machine().lower() in ("x86_64", "amd64")


def streams(kernel):
    """Whether ``kernel`` writes its outputs with non-temporal stores: on x86, when every
    output is element-wise (written once, at the iteration index) with one element size,
    together at least ``STREAM_MIN_BYTES``, in rows of several blocks, and the body is
    memory-bound."""
    outs = kernel.outputs
    if not _X86 or not kernel.shape or not outs or any(o.combine for o in outs):
        return False
    sizes = {np.dtype(o.var.aval.dtype).itemsize for o in outs}
    if len(sizes) != 1:
        return False
    size = sizes.pop()
    total = sum(math.prod(o.shape) for o in outs) * size
    return total >= STREAM_MIN_BYTES and kernel.shape[-1] * size >= 4 * STREAM_BLOCK \
        and memory_bound(kernel)


def memory_bound(kernel):
    """A body of a few arithmetic ops per element of the buffers it streams through: its
    speed is the memory's, which streaming stores raise. (Measured: SELU's body, with an
    inline ``exp``, and the 81-tap blur's are bound by arithmetic; they ran no faster, or
    slower, with streaming stores, and the blur's code took 0.5 s more to compile.)"""
    work = sum(op.name not in ("const", "index", "load") for op in kernel.body)
    buffers = len(kernel.inputs) + len(kernel.outputs)
    return not any(op.name == "math" for op in kernel.body) \
        and work <= STREAM_OPS_PER_BUFFER * buffers


def _smin(builder, x, y):
    return builder.select(builder.icmp_signed("<", x, y), x, y)


def streaming_row(loops, index, lo, hi, c=1):
    """The innermost loop, from ``lo`` to ``hi`` at the outer ``index``, of a kernel whose
    outputs bypass the cache (``loops``: its ``CpuLoops``); ``c``: the loop's ``residue_step``
    (a block runs over quotients, ``CpuLoops.quotient_loop``, where it starts at a multiple
    of ``c``).

    Elements up to the first 64-byte boundary of the outputs and after the last whole block
    run as the ordinary loop, left scalar: at most a block's worth per row, so vectorising
    them gained nothing measurable but cost a third of the kernel's compile time (grad 1e7:
    21 -> 14 ms of LLVM). No loop here is unrolled by LLVM's unroller (the vectoriser still
    interleaves): a quarter less compile time again, and grad 1e7 and the power sum ran as
    fast or faster. In between, each block of ``STREAM_BLOCK`` bytes per output is
    computed by an ordinary (vectorised) loop into a small scratch buffer that stays in L1,
    then copied to the output with aligned non-temporal vector stores.
    """
    b, e, kernel = loops.b, loops.e, loops.kernel
    dtype = kernel.outputs[0].var.aval.dtype
    size = np.dtype(dtype).itemsize
    block = STREAM_BLOCK // size
    row = e.offset(index + [ir.Constant(I64, 0)], kernel.outputs[0].shape)
    first = b.gep(e.outs[0], [b.add(row, lo)], source_etype=mem_type(dtype))
    misaligned = b.and_(b.sub(ir.Constant(I64, 0), b.ptrtoint(first, I64)),
                        ir.Constant(I64, ALIGNMENT - 1))
    head_end = _smin(b, hi, b.add(lo, b.udiv(misaligned, ir.Constant(I64, size))))
    blocks = b.sdiv(b.sub(hi, head_end), ir.Constant(I64, block))
    blocks_end = b.add(head_end, b.mul(blocks, ir.Constant(I64, block)))
    loops.for_(lo, head_end, lambda i: e.emit_body(index + [i]), "head", short=True)
    scratch = [entry_alloca(b, mem_type(o.var.aval.dtype), block, ALIGNMENT)
               for o in kernel.outputs]
    lanes = STREAM_VECTOR // size

    def into_scratch(j, start):
        for k, value in enumerate(e.values(index + [b.add(start, j)])):
            e.store(scratch[k], j, value, kernel.outputs[k].var.aval.dtype)

    in_quotients = c > 1 and block % c == 0
    if in_quotients:  # (true unless a row's first aligned element is not a multiple of c)
        aligned = b.icmp_unsigned("==", b.urem(head_end, ir.Constant(I64, c)),
                                  ir.Constant(I64, 0))

    def fill(start):
        loops.for_(ir.Constant(I64, 0), ir.Constant(I64, block),
                   lambda j: into_scratch(j, start), "lane", unroll=False)

    def one_block(start):
        if in_quotients:
            with b.if_else(aligned) as (then, otherwise):
                with then:
                    loops.quotient_loop(e, 0, block // c, c, lambda j: into_scratch(j, start),
                                        base=b.udiv(start, ir.Constant(I64, c)), unroll=False)
                with otherwise:
                    fill(start)
        else:
            fill(start)
        for out, buf in zip(e.outs, scratch):
            vec = ir.VectorType(out.type.pointee, lanes)
            loops.for_(ir.Constant(I64, 0), ir.Constant(I64, block),
                       lambda j: _stream(loops, buf, out, vec, j, b.add(row, b.add(start, j))),
                       "stream", step=lanes, unroll=False)

    loops.for_(head_end, blocks_end, one_block, "block", step=block, unroll=False)
    loops.for_(blocks_end, hi, lambda i: e.emit_body(index + [i]), "tail", short=True)


def _stream(loops, scratch, out, vec, j, offset):
    """Copy one vector from ``scratch[j]`` to ``out[offset]`` with a non-temporal store."""
    b = loops.b
    src = b.bitcast(b.gep(scratch, [j], source_etype=out.type.pointee), vec.as_pointer())
    dst = b.bitcast(b.gep(out, [offset], source_etype=out.type.pointee), vec.as_pointer())
    store = b.store(b.load(src, typ=vec, align=ALIGNMENT), dst, align=ALIGNMENT)
    store.set_metadata("nontemporal", loops.mb.nontemporal)


def fence(loops):
    """Make the weakly ordered non-temporal stores visible before the kernel returns."""
    loops.b.call(loops.e.intrinsic("llvm.x86.sse.sfence", ir.VoidType(), []), [])

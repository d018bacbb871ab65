"""The CPU's kernels: LoopKernels as LLVM functions looping over their iteration space.

All kernels of a program go into one LLVM module (``ModuleBuilder``). Each is the shared
kernel function of ``backends.llvm`` with the CPU's scaffold (``CpuLoops``),

    void kernel_N(T0* noalias out0, ..., U0* noalias in0, ..., i64 start, i64 stop)

looping over its iteration space in row-major order, axis 0 from ``start`` to ``stop`` (so
the runtime can split it between threads). Buffers are C-contiguous with static shapes, so
every stride is a constant and the innermost loop walks the output contiguously; with
``noalias`` pointers LLVM's loop vectoriser turns it into vector code.

A reduction over the innermost axis accumulates in a local variable, in float64 for float
sums (``CpuLoops._reducing_row``); large memory-bound outputs are written with non-temporal
stores (``streaming``); a kernel split between threads over a reduced axis gets a
``<name>_combine`` function that folds the per-thread partial results (``add_combiner``).
Transcendental functions are ``llvm.LIBM``'s: the inline, vectorisable polynomials of
``mathlib`` where it has the function (one shared, called copy of each in a kernel that
calls many: ``_math_for``), else LLVM intrinsics or libm calls (correct, but scalar calls
that stop the vectoriser).
"""

import dataclasses
import math
import re

import numpy as np
from llvmlite import ir

from ...core import dtypes
from ..llvm import (I8, I64, LIBM, KernelEmitter, KernelScaffold, ScalarEmitter, constant,
                    define_kernel, entry_alloca, for_loop, mathlib, mem_type, memset,
                    reg_type, shared_math)
from . import blocking, library, pipeline, runtime, streaming, workers


class ModuleBuilder:
    """One LLVM module holding every kernel of a compiled program."""

    def __init__(self, name):
        self.module = ir.Module(name=name)
        self.host_calls = []  # the module's host steps (``control_flow.host_step``)
        self.combiners = {}   # kernel name -> its combiner's (``add_combiner``)
        self.same_code = {}   # kernel name -> the earlier kernel whose code it runs
        # The functions LLVM's light tiers compile ({name: tier}, see ``pipeline``): code
        # that loops over no more than a few elements (small kernels) or only calls other
        # code (a kernel of the same code as another, Python's entries, control flow).
        self.light = {}
        self._code = {}       # a kernel's code, name and loop labels left out -> function
        self._printed = {}    # kernel name -> its IR text, printed once (``text``)
        self.nontemporal = self.module.add_metadata([ir.Constant(ir.IntType(32), 1)])

    def loop_hints(self, width=None, unroll=True, vectorise=True):
        return loop_hints(self.module, width, unroll, vectorise)

    def add_kernel(self, kernel, runs=None):
        """Emit ``kernel`` as a function (one that compiled loops run ``runs`` times a call,
        None for a step of its own); returns its LLVM IR text. A kernel is never inlined
        into the control flow that calls it: a call costs nothing next to its loop, and an
        inlined copy is optimised again (a fifth of an LSTM gradient's compile time) and
        cannot be compiled in another part of the module (``partition``).

        A kernel whose code is that of an earlier one (a transformer's second layer norm,
        the reshapes of its weights) becomes a call of the earlier one (``same_code``):
        LLVM's time goes with the number of kernels, 3-15 ms each."""
        loops = CpuLoops(self, kernel, runs)
        fn = define_kernel(self.module, kernel, loops)
        fn.attributes.add("noinline")
        text = str(fn)
        same = self._code.setdefault(_code_key(fn, text), fn)
        if same is not fn:
            fn.blocks.clear()
            builder = ir.IRBuilder(fn.append_basic_block("same_code"))
            builder.call(same, fn.args, tail=True)
            builder.ret_void()
            self.same_code[kernel.name] = same.name
        else:
            self._printed[fn.name] = text
        if same is not fn or zero_fill(kernel):
            self.light[fn.name] = pipeline.CALLS
        elif loops.small:
            self.light[fn.name] = pipeline.SMALL_LOOPS
        return text

    def text(self):
        """The module's IR text, as ``str(self.module)`` prints it, but with the text of each
        kernel ``add_kernel`` printed rather than printed again (printing took a fifth of a
        transformer gradient's code generation)."""
        m = self.module
        lines = [f'; ModuleID = "{m.name}"', f'target triple = "{m.triple}"',
                 f'target datalayout = "{m.data_layout}"', ""]
        lines += [t.get_declaration() for t in m.get_identified_types().values()]
        lines += [self._printed.get(v.name) or str(v) for v in m.globals.values()]
        lines += m._get_metadata_lines()
        return "\n".join(lines)

    def chunk_function(self, kernel):
        """``<kernel>_chunk(args, start, stop)``, the worker pool's call of ``kernel`` over
        ``[start, stop)`` of its outer axis, its buffers' addresses in the array ``args``
        (see ``workers``); emitted on first use.

        A kernel whose reductions run over its outer axis (``runtime.partial_outputs``) is
        run in ``runtime.pieces`` pieces of that axis instead: ``[start, stop)`` are piece
        numbers, and ``args`` holds after the buffers one block per such output, of a
        partial result for each piece but the first (``runtime.partial_bytes`` apart,
        filled with the reduction's identity), which accumulates into the output itself.
        The caller combines them in order (``add_combiner``)."""
        name = kernel.name + "_chunk"
        chunk = self.module.globals.get(name)
        if chunk is not None:
            return chunk
        fn = self.module.get_global(kernel.name)
        chunk = ir.Function(self.module, workers.CHUNK, name=name)
        args, start, stop = chunk.args
        b = ir.IRBuilder(chunk.append_basic_block("entry"))
        types = fn.function_type.args[:-2]
        pointers = [b.bitcast(b.load(b.gep(args, [ir.Constant(I64, k)])), t)
                    for k, t in enumerate(types)]
        partial = runtime.partial_outputs(kernel)
        if not partial:
            b.call(fn, pointers + [start, stop])
        else:
            blocks = [b.load(b.gep(args, [ir.Constant(I64, len(types) + j)]))
                      for j in range(len(partial))]

            def piece(k):
                first = b.icmp_unsigned("==", k, ir.Constant(I64, 0))
                own = list(pointers)
                for block, position in zip(blocks, partial):
                    step = runtime.partial_bytes(kernel.outputs[position])
                    at = b.gep(block, [b.mul(b.sub(k, ir.Constant(I64, 1)),
                                             ir.Constant(I64, step))])
                    own[position] = b.select(first, pointers[position],
                                             b.bitcast(at, types[position]))
                extent, n = ir.Constant(I64, kernel.shape[0]), \
                    ir.Constant(I64, runtime.pieces(kernel))
                rows = [b.udiv(b.mul(extent, j), n) for j in (k, b.add(k, ir.Constant(I64, 1)))]
                b.call(fn, own + rows)
            for_loop(b, start, stop, piece, "piece")
        b.ret_void()
        self.light[name] = pipeline.CALLS
        return chunk

    def add_combiner(self, kernel):
        """Emit ``<kernel>_combine(out0, part0, out1, part1, ...)``, which folds the partial
        results of a chunk of a split loop into the outputs that accumulate over the split
        axis (``runtime.partial_outputs``); returns its name, or None when there are
        none."""
        outputs = [kernel.outputs[k] for k in runtime.partial_outputs(kernel)]
        if not outputs:
            return None
        types = [mem_type(o.acc_dtype).as_pointer() for o in outputs for _ in range(2)]
        name = kernel.name + "_combine"
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), types), name=name)
        for arg in fn.args:
            arg.add_attribute("noalias")
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        e = ScalarEmitter(builder)
        for k, out in enumerate(outputs):
            acc, part = fn.args[2 * k], fn.args[2 * k + 1]

            def combine(i, out=out, acc=acc, part=part):
                total = e.accumulate(out.combine, e.load(acc, i, out.acc_dtype),
                                     e.load(part, i, out.acc_dtype), out.acc_dtype)
                e.store(acc, i, total, out.acc_dtype)
            for_loop(builder, ir.Constant(I64, 0), ir.Constant(I64, math.prod(out.shape)),
                     combine, f"out{k}")
        builder.ret_void()
        self.combiners[kernel.name] = name
        if sum(math.prod(o.shape) for o in outputs) < SMALL_KERNEL:
            self.light[name] = pipeline.SMALL_LOOPS  # a bias gradient's 1024 sums: O3 took 8 ms
        return name


_LOOP_LABEL = "loop."  # of the string that makes each loop's metadata node distinct
_NODE = re.compile(r"!(\d+)")


def loop_hints(m, width=None, unroll=True, vectorise=True):
    """The ``llvm.loop`` metadata (in module ``m``) asking the vectoriser for ``width``
    lanes (or, without ``vectorise``, to leave the loop scalar) and/or the unroller to leave
    the loop alone: a node that names itself first, as LLVM's loop IDs do (made distinct by
    a unique string, since llvmlite would otherwise share equal nodes between loops)."""
    hints = []
    if width:
        hints.append(m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.width"),
                                     ir.Constant(ir.IntType(32), width)]))
    if not vectorise:
        hints.append(m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.enable"),
                                     ir.Constant(ir.IntType(1), 0)]))
    if not unroll:  # (not "unroll.disable", which would stop the vectoriser interleaving)
        hints.append(m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.count"),
                                     ir.Constant(ir.IntType(32), 1)]))
    label = ir.MetaDataString(m, f"{_LOOP_LABEL}{len(m.metadata)}")
    loop_id = m.add_metadata([*hints, label])
    loop_id.operands = (loop_id,) + loop_id.operands
    return loop_id


def _code_key(fn, text):
    """``fn``'s IR ``text`` without what differs between two kernels of the same code: the
    function's name, and the numbers of its metadata nodes, written out in full instead
    (a loop's node is distinct by a label of its own, left out too)."""
    nodes = {md.name: md for md in fn.module.metadata}
    text = text.replace(f'@"{fn.name}"(', "@(", 1)
    return _NODE.sub(lambda m: _node_text(nodes[m.group(1)]), text)


def _node_text(md):
    """The metadata node ``md`` written out in full, a loop's label left out."""
    return "!{" + ", ".join(
        "self" if op is md else _node_text(op) if isinstance(op, ir.MDValue) else
        _LOOP_LABEL if isinstance(op, ir.MetaDataString)
        and op.string.startswith(_LOOP_LABEL) else str(op)
        for op in md.operands) + "}"


class CpuLoops(KernelScaffold):
    """The CPU's scaffold for one kernel: the loop nest over ``[start, stop)`` of axis 0 (for
    a kernel the runtime splits between the cores; any other covers the whole axis) and
    every index of the others, its innermost loop vectorised (with the float32 width
    asked for where needed: ``_row_width``), reductions over it accumulated in locals, and
    large outputs streamed (``streaming``)."""

    math = LIBM
    extra_args = (I64, I64)

    def __init__(self, mb, kernel, runs=None):
        self.mb, self.kernel, self.small = mb, kernel, small(kernel, runs)
        self.blocked = blocking.blocked(kernel)
        self.streaming = not kernel.stages and not self.blocked and streaming.streams(kernel)
        self.math = _math_for(kernel, self.small)
        self.row_width = _row_width(kernel, self.math)

    def emit(self, emitter, args):
        self.e, self.b = emitter, emitter.b
        self.rows = self._stage_rows(emitter) if self.kernel.stages \
            else [(emitter, self.row_width)]
        start, stop = args
        if not self.kernel.shape:
            emitter.emit_body([])
            return
        if not runtime.splits(self.kernel):
            # Only a kernel split between the cores is called on a share of its outer axis:
            # with the whole axis as constants, LLVM folds what the bounds decide (the
            # index arithmetic and selects of each piece of a cut loop, the trip counts).
            start, stop = ir.Constant(I64, 0), ir.Constant(I64, self.kernel.shape[0])
        if zero_fill(self.kernel):
            self._zero_rows(emitter, start, stop)
            return
        self._loop(0, [], start, stop)
        if self.streaming:
            streaming.fence(self)

    def _zero_rows(self, emitter, start, stop):
        """Set rows ``[start, stop)`` of every output to zero with one ``memset`` each
        (``zero_fill``)."""
        b, row = self.b, math.prod(self.kernel.shape[1:])
        for out, pointer in zip(self.kernel.outputs, emitter.outs):
            row_bytes = ir.Constant(I64, row * np.dtype(out.acc_dtype or out.var.aval.dtype)
                                    .itemsize)
            first = b.gep(b.bitcast(pointer, I8.as_pointer()), [b.mul(start, row_bytes)])
            memset(b, first, 0, b.mul(b.sub(stop, start), row_bytes))

    def for_(self, lo, hi, emit, name, step=1, width=None, unroll=True, short=False):
        """``llvm.for_loop``, vectorised ``width`` lanes wide when given, left alone by
        LLVM's unroller unless ``unroll``, neither vectorised nor unrolled when ``short``
        (a loop of a few iterations) or in a small kernel (``SMALL_KERNEL``); no loop at all
        for one iteration."""
        if isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant) \
                and hi.constant - lo.constant == 1:
            emit(lo)
            return
        back = for_loop(self.b, lo, hi, emit, name, step)
        if short or self.small:
            back.set_metadata("llvm.loop", self.mb.loop_hints(unroll=False, vectorise=False))
        elif width or not unroll:
            back.set_metadata("llvm.loop", self.mb.loop_hints(width, unroll))

    def _stage_rows(self, emitter):
        """(emitter, vector width) of each stage of a staged kernel, on its buffers: a
        stage's outputs are the kernel's; its inputs, the kernel's or an earlier stage's
        outputs."""
        kernel = self.kernel
        pointers = dict(zip(kernel.inputs, emitter.ins))
        pointers.update(zip((o.var for o in kernel.outputs), emitter.outs))
        rows = []
        for stage in kernel.stages:
            math = _math_for(stage, self.small)
            rows.append((KernelEmitter(self.b, stage, [pointers[o.var] for o in stage.outputs],
                                       [pointers[v] for v in stage.inputs], math),
                         _row_width(stage, math)))
        return rows

    def _loop(self, axis, index, lo, hi):
        last = axis + 1 == len(self.kernel.shape)
        if self.blocked and axis + 2 == len(self.kernel.shape):
            self._blocks(index, lo, hi)
        elif last and self.streaming:
            streaming.streaming_row(self, index, lo, hi, residue_step(self.kernel))
        elif last:
            for emitter, width in self.rows:  # (a staged kernel's stages, in order)
                self._reducing_row(emitter, width, index, lo, ir.Constant(
                    I64, emitter.kernel.shape[-1]) if self.kernel.stages else hi)
        else:
            # An outer loop is not unrolled: its body holds a whole vectorised inner loop,
            # and a copy of it per iteration made LLVM's SLP vectoriser take a second on a
            # 16-row reduction (the optimised code 30 times longer, for nothing).
            n = ir.Constant(I64, self.kernel.shape[axis + 1])
            for piece_lo, piece_hi in index_pieces(self.b, self.kernel, axis, lo, hi):
                self.for_(piece_lo, piece_hi, lambda i: self._loop(
                    axis + 1, index + [i], ir.Constant(I64, 0), n), f"i{axis}", unroll=False)

    def _blocks(self, index, lo, hi):
        """The last two axes (rows ``[lo, hi)`` of the one before the last) in blocks of
        ``blocking.BLOCK`` x ``blocking.BLOCK``: a kernel reading an input transposed."""
        b, step = self.b, blocking.BLOCK
        n = ir.Constant(I64, self.kernel.shape[-1])
        (emitter, width), = self.rows

        def block_end(start, end):
            stop = b.add(start, ir.Constant(I64, step))
            return b.select(b.icmp_signed("<", stop, end), stop, end)

        def block_row(r0):
            def block(c0):
                self.for_(r0, block_end(r0, hi), lambda i: self._reducing_row(
                    emitter, width, index + [i], c0, block_end(c0, n)), "rows", unroll=False)
            self.for_(ir.Constant(I64, 0), n, block, "columns", step=step, unroll=False)
        self.for_(lo, hi, block_row, "blocks", step=step, unroll=False)

    def _reducing_row(self, e, width, index, lo, hi):
        """The innermost loop of ``e``'s kernel, ``width`` lanes wide if given. Outputs
        that reduce over its axis accumulate in a local variable (a register, several
        vector lanes once LLVM vectorises), combined into the output after the loop; float
        sums of long rows accumulate in float64 there, so they do not lose the small terms
        (``_local_dtype``). The row is vectorised (and interleaved) but not unrolled
        further: LLVM's time on a residual add over (8, 128, 256) went from 12 to 7 ms, on
        an MLP step's kernels down by a quarter; a transformer's layer norm, its rows of 256
        vectorised, interleaved, then unrolled whole into 41 KB of IR, took 25 ms of O3
        and code generation, 15 without (its forward's first call 105 -> 87 ms, the CNN's
        325 -> 285), and no workload ran slower."""
        b, kernel = self.b, e.kernel
        axis = len(kernel.shape) - 1
        local = {}
        for k, out in enumerate(kernel.outputs):
            if out.combine and axis not in out.kept_axes:
                dtype = _local_dtype(out, kernel.shape[axis])
                var = entry_alloca(b, reg_type(dtype), 1, runtime.ALIGNMENT)
                b.store(constant(out.identity, dtype), var)
                local[k] = (var, dtype)

        def body(i):
            for k, value in enumerate(e.values(index + [i])):
                if k not in local:
                    e.store_output(k, index + [i], value)
                    continue
                var, dtype = local[k]
                acc = b.load(var, typ=reg_type(dtype))
                value = e.convert(value, kernel.outputs[k].acc_dtype, dtype)
                b.store(e.accumulate(kernel.outputs[k].combine, acc, value, dtype), var)
        for piece_lo, piece_hi in index_pieces(b, kernel, axis, lo, hi):
            self._residue_loops(e, body, piece_lo, piece_hi, width)
        for k, (var, dtype) in local.items():
            out = kernel.outputs[k]
            offset = e.offset([index[a] for a in out.kept_axes], out.shape)
            row = e.convert(b.load(var, typ=reg_type(dtype)), dtype, out.acc_dtype)
            total = e.accumulate(out.combine, e.load(e.outs[k], offset, out.acc_dtype),
                                 row, out.acc_dtype)
            e.store(e.outs[k], offset, total, out.acc_dtype)

    def _residue_loops(self, e, body, lo, hi, width):
        """The innermost loop of ``e``'s kernel over ``[lo, hi)``, ``body(i)`` at each
        index. Where the kernel divides that index by small constants (``residue_step``:
        ``jnp.repeat``, an upsampling, a reshape joining a short axis in), the whole
        multiples of their least common multiple ``c`` in the range run as a loop over
        ``q`` with ``c`` copies of the body, at ``q * c + r``: each copy's quotient and
        remainder are ``q`` and the constant ``r`` (``KernelEmitter.residue``), so its loads
        are contiguous in ``q`` (LLVM vectorised ``x[i // 2]`` with gathers); the indices
        before and after run as the plain loop."""
        c, axis = residue_step(e.kernel), len(e.kernel.shape) - 1
        first = last = 0
        if c > 1 and isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant):
            first, last = -(-lo.constant // c) * c, hi.constant // c * c
        if first >= last:
            self.for_(lo, hi, body, f"i{axis}", width=width, unroll=False)
            return
        self.for_(lo, ir.Constant(I64, first), body, f"i{axis}.head", unroll=False)
        self.quotient_loop(e, first // c, last // c, c, body, width=width, unroll=False)
        self.for_(ir.Constant(I64, last), hi, body, f"i{axis}.tail", unroll=False)

    def quotient_loop(self, e, lo, hi, c, body, base=None, width=None, unroll=True):
        """``body(q * c + r)`` for ``q`` in ``[lo, hi)`` (ints) and each ``r`` below ``c``,
        the index along ``e``'s innermost axis being ``(base + q) * c + r`` there (``base``:
        an i64 value, 0 if None): ``e.residue`` says so to each copy of the body."""
        b, axis = self.b, len(e.kernel.shape) - 1

        def copies(q):
            quotient = q if base is None else b.add(base, q, flags=["nuw", "nsw"])
            for r in range(c):
                e.residue = (axis, quotient, c, r)
                body(b.add(b.mul(q, ir.Constant(I64, c), flags=["nuw", "nsw"]),
                           ir.Constant(I64, r), flags=["nuw", "nsw"]))
            e.residue = None
        self.for_(ir.Constant(I64, lo), ir.Constant(I64, hi), copies, f"q{axis}",
                  width=width, unroll=unroll)


# The innermost index's divisors (``div``, ``rem`` by a constant) whose least common multiple
# is at most this make its loop a loop over quotients (``CpuLoops._residue_loops``).
RESIDUE_MAX = 8


def residue_step(kernel):
    """The least common multiple of the constants ``kernel``'s body divides its innermost
    index by, where at most ``RESIDUE_MAX``, else 1."""
    axis = len(kernel.shape) - 1
    divisors = {int(op.args[1].attr) for op in kernel.body
                if op.name in ("div", "rem") and op.args[0].name == "index"
                and op.args[0].attr == axis and op.args[1].name == "const"}
    c = math.lcm(1, *(d for d in divisors if d > 1))
    return c if c <= RESIDUE_MAX else 1


# An axis is cut into at most this many pieces (``index_pieces``): each is a copy of the
# loops inside it for LLVM to optimise.
PIECES_MAX = 8
# Where ``index <op> c`` changes its answer: at ``c + shift`` for each shift.
_CUTS = {"lt": (0,), "ge": (0,), "le": (1,), "gt": (1,), "eq": (0, 1), "ne": (0, 1)}
_FLIPPED = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}


def index_pieces(b, kernel, axis, lo, hi):
    """The ranges covering ``[lo, hi)`` (i64 values) that the loop over ``axis`` of
    ``kernel`` runs as loops of their own: cut where the body compares the axis' index with
    a constant. In each range such a comparison has one answer, so LLVM folds it and the
    selects it feeds. A concatenation (the gate gradients of an LSTM joined along the row,
    ``jnp.stack``, an edge pad), which ``concatenate``'s lowering reads from every operand
    at clamped indices and selects between, then computes only its own operand's value in
    each range, with contiguous loads LLVM vectorises, instead of all of them with
    gathers. Bounds that are not constants (a thread's share of axis 0) are clamped into
    each range with ``smax``/``smin`` (built with ``b``), which LLVM reads as ranges too.

    Only the innermost axis with cuts is cut, into ``PIECES_MAX`` ranges at most: the
    copies multiply across axes, and LLVM's time with them (the blur's edge pad, cut along
    both axes into 9 copies of its row loop, added 20 ms to its first call; cut along its
    rows alone, where the gathers were, its compile time is as before, within noise)."""
    cuts = _cuts(kernel)
    if not cuts or axis != max(cuts):
        return [(lo, hi)]
    bounds = [0] + sorted(cuts[axis]) + [kernel.shape[axis]]
    if len(bounds) - 1 > PIECES_MAX:
        return [(lo, hi)]
    if isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant):
        bounds = [lo.constant] + [c for c in bounds if lo.constant < c < hi.constant] \
            + [hi.constant]
        return [(ir.Constant(I64, x), ir.Constant(I64, y)) for x, y in zip(bounds, bounds[1:])]
    scalar, index = ScalarEmitter(b), np.dtype(np.int64)
    return [(scalar.binary("max", lo, ir.Constant(I64, x), index),
             scalar.binary("min", hi, ir.Constant(I64, y), index))
            for x, y in zip(bounds, bounds[1:])]


def _cuts(kernel):
    """{axis: the indices inside it where a comparison in ``kernel``'s body of the axis'
    index, or the index plus a constant (a slice's: ``jnp.roll`` reads a concatenation
    through one), with a constant (either way round) changes its answer}, for the axes
    with any."""
    cuts = {}
    for op in kernel.body:
        if op.name not in _CUTS:
            continue
        (x, y), name = op.args, op.name
        if x.name == "const":
            (y, x), name = op.args, _FLIPPED[name]
        shifted = _shifted_index(x)
        if shifted is not None and y.name == "const":
            axis, offset = shifted
            size = kernel.shape[axis]
            cuts.setdefault(axis, set()).update(
                c for c in (y.attr - offset + s for s in _CUTS[name]) if 0 < c < size)
    return {axis: at for axis, at in cuts.items() if at}


def _shifted_index(op):
    """(axis, c) where ``op`` is an axis' index plus the constant ``c``, else None."""
    if op.name == "index":
        return op.attr, 0
    if op.name not in ("add", "sub"):
        return None
    x, y = op.args
    if op.name == "add" and x.name == "const":
        x, y = y, x
    if x.name != "index" or y.name != "const":
        return None
    return x.attr, y.attr if op.name == "add" else -y.attr


# Float sums of rows longer than this accumulate in float64 (``_local_dtype``).
SHORT_ROW = 1024


def _local_dtype(out, row):
    """The dtype a row of ``row`` elements of reduction ``out`` accumulates in: float64 for
    float sums of long rows (cheap next to the memory traffic, and the row's rounding error
    all but disappears), else the output's accumulation dtype. A short row (``SHORT_ROW``)
    is summed by LLVM's vectorised loop in 16 or more partial sums of a few terms each,
    about as accurately, and faster where the row is in the cache: the loop's float64 sums
    halved its vectors' lanes, and a softmax over rows of 128 (its exponentials included)
    took 370 us instead of 280."""
    if out.combine == "add" and dtypes.is_float(out.acc_dtype) and row > SHORT_ROW:
        return np.dtype(np.float64)
    return np.dtype(out.acc_dtype)


# Kernels of fewer elements are compiled without vectorising or unrolling their loops: a
# few microseconds more when they run, at most, against 5-30 ms less of LLVM's time each
# (an MLP step's loss and softmax kernels over [128, 10]: its first call 223 -> 150 ms).
SMALL_KERNEL = 2048
# ... unless a compiled loop runs it and its work (elements times the operations of its
# body, a math function's call counting ``runtime.MATH_WORK`` more: in scalar code it
# branches, and its vector form is compiled once, apart) is at least this: run at every
# iteration, its scalar code cost more than LLVM's time once (1000 normal random numbers
# drawn in each step of a scan: 116 ns an element);
SMALL_LOOP_WORK = 16384
# ... or its work over all the iterations of a call is at least this, on enough elements
# to fill a vector (16 float32 on AVX-512: a loop of 16, unrolled, becomes vector code by
# the SLP vectoriser): LLVM's few milliseconds, once, against a tenth to a twentieth as
# many in every call, which a function called 10-20 times repays (a scan of 1000 steps of
# ``sin`` on 256 elements: 3.4 ms a call in scalar code, 0.19 ms in vectors, jax 0.54 ms;
# on 16 elements 200 -> 34 us, jax 50; its first call is no slower: the scalar ``sin``
# inline, which branches, took LLVM as long). (A while loop's iterations are unknown:
# ``control_flow.WHILE_RUNS``.)
SMALL_RUN_WORK = 1 << 17
VECTOR_ELEMENTS = 16


def zero_fill(kernel):
    """Whether ``kernel`` only sets whole outputs to zero (every byte: ``jnp.zeros``, a
    scan's initial carry): it is then a ``memset`` of their rows, compiled by the light
    tier. LLVM's O3 took 3 ms on the loop, which its idiom pass made a ``memset``."""
    return bool(kernel.shape) and not kernel.inputs and not kernel.stages and all(
        not out.combine and out.value.name == "const"
        and len(out.kept_axes) == len(kernel.shape)
        and not np.asarray(out.value.attr, out.acc_dtype or out.var.aval.dtype).tobytes()
        .strip(b"\0") for out in kernel.outputs)


def small(kernel, runs=None):
    """Whether ``kernel`` is compiled without vectorising or unrolling its loops; ``runs``:
    how many times compiled loops run it in a call (``control_flow.runs``), None for a
    step of its own."""
    elements = math.prod(kernel.shape)
    if elements >= SMALL_KERNEL or runs is None:
        return elements < SMALL_KERNEL
    work = elements * (len(kernel.body) + sum(len(stage.body) for stage in kernel.stages)
                       + runtime.MATH_WORK * kernel.math_calls)
    return work < SMALL_LOOP_WORK and (elements < VECTOR_ELEMENTS
                                       or work * runs < SMALL_RUN_WORK)


INLINE_MATH_CALLS = 4   # more in one kernel: one shared copy of each function, called


def _math_for(kernel, scalar=False):
    """``LIBM``, its functions inline (on ``scalar`` code, which is never vectorised, in
    their forms that branch: ``MathNames.scalar``), unless the body calls them more than
    ``INLINE_MATH_CALLS`` times: then ``LIBM`` with shared functions (``shared_math``),
    which keeps the time LLVM takes to optimise a long chain linear in its length (30
    inline ``sin`` took 4 s, shared 0.1 s), for a cost of 0-12% at run time on the cheap
    ones (``exp``, ``tanh``). Vectorised code shares sin, cos and tan always: their
    shared vector functions branch, and skip the table's reduction for a vector of moderate
    arguments (``mathlib.BRANCHING``: 1M float32 sines 2.4 -> 0.7 ms). Shared functions
    have vector variants of the widths the loop may be vectorised at: the float32 width,
    and half of it where the loop moves 8-byte values (``_has_wide_values``); a variant
    nothing calls still cost LLVM 2-4 ms (an LSTM's tanh and exp at half width: a quarter
    of its forward pass's LLVM time)."""
    calls = sum(op.name == "math" and op.attr in LIBM.inline for op in kernel.body)
    if scalar and calls <= INLINE_MATH_CALLS:
        return dataclasses.replace(LIBM, scalar=True)
    lanes = runtime.float32_lanes()
    widths = (lanes // 2, lanes) if _has_wide_values(kernel) else (lanes,)
    shared = LIBM.inline if calls > INLINE_MATH_CALLS else frozenset(mathlib.BRANCHING)
    return dataclasses.replace(LIBM, shared=shared, shared_lanes=widths,
                               shared_linked=library.name)


@library.maker("nbjax_math_", tier=None)
def _define_shared_math(module, function_name):
    """A shared math function's vector variant, compiled by O3 once (or read from the disk
    cache) and linked to every program that calls it: optimising a vector ``sin`` took
    40 ms, which each program's first call spent again when the module defined it."""
    shared_math.define_vector(module, function_name)


def _has_wide_values(kernel):
    """Whether ``kernel``'s loop loads, stores or accumulates 8-byte values (float sums
    accumulate in float64: ``_local_dtype``): the types that set how many lanes LLVM's
    vectoriser takes at most (half as many as for 4-byte values)."""
    stored = [np.dtype(v.aval.dtype) for v in kernel.inputs] + [
        np.dtype(o.acc_dtype or o.var.aval.dtype) for o in kernel.outputs]
    row = kernel.shape[-1] if kernel.shape else 1
    accumulated = [_local_dtype(o, row) for o in kernel.outputs if o.combine]
    return any(dtype.itemsize > 4 for dtype in stored + accumulated)


def _row_width(kernel, names):
    """The vector width the innermost loop asks LLVM for, or None to let it choose: the
    float32 width when the body calls an inline math function that computes in float64
    inside (``mathlib.computes_in_float64``: float32 pow, sin, cos; measured on AVX2:
    float32 pow 30% faster at 8 lanes than at the 4 LLVM picks by itself)."""
    if any(op.name == "math" and op.attr in names.inline
           and mathlib.computes_in_float64(op.attr, op.dtype) for op in kernel.body):
        return runtime.float32_lanes()
    return None

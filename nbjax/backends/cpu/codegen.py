"""LoopKernel -> LLVM IR (through ``llvmlite.ir``).

Each kernel becomes one function

    void kernel_N(T0* noalias out0, ..., U0* noalias in0, ..., i64 start, i64 stop)

looping over its iteration space in row-major order, axis 0 from ``start`` to ``stop`` (so
the runtime can split it between threads). Buffers are C-contiguous with static shapes, so
every stride is a constant and the innermost loop walks the output contiguously; with
``noalias`` pointers LLVM's loop vectoriser turns it into vector code. Bools are ``i1`` in
registers and one byte in memory.

Large memory-bound outputs are written with non-temporal (streaming) stores through an L1
scratch block (``streams``, ``_streaming_row``); a reduction over the innermost axis
accumulates in a local variable, in float64 for float sums (``_reducing_row``); a kernel
split between threads over a reduced axis gets a ``<name>_combine`` function that folds the
per-thread partial results (``add_combiner``).

Transcendental functions go through one hook, ``emit_math``: the inline, vectorisable
polynomials of ``mathlib`` where it has the function, else LLVM intrinsics or libm calls
(correct, but scalar calls that stop the vectoriser).
"""

import math
import platform

import numpy as np
from llvmlite import ir

from ...core import dtypes
from . import mathlib, runtime

I1, I8, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(64)

_FLOAT_TYPES = {dtypes.float16: ir.HalfType(), dtypes.float32: ir.FloatType(),
                dtypes.float64: ir.DoubleType()}


def reg_type(dtype):
    """The LLVM type of a value of ``dtype`` in a register."""
    dtype = np.dtype(dtype)
    if dtype == dtypes.bool_:
        return I1
    if dtypes.is_float(dtype):
        return _FLOAT_TYPES[dtype]
    return ir.IntType(8 * dtype.itemsize)


def mem_type(dtype):
    """The LLVM type of an element of ``dtype`` in memory (bools are bytes)."""
    return I8 if np.dtype(dtype) == dtypes.bool_ else reg_type(dtype)


def _is_float(dtype):
    return dtypes.is_float(dtype)


def _is_signed(dtype):
    return dtypes.is_signed_int(dtype)


# Non-temporal ("streaming") stores write whole cache lines to memory without reading them
# first or evicting useful data: for outputs much larger than the caches they are about twice
# as fast (PERF_NOTES.md). Smaller outputs are better left in the cache for their consumer.
STREAM_MIN_BYTES = 8 << 20
STREAM_OPS_PER_BUFFER = 8  # arithmetic ops per buffer read or written: memory-bound
STREAM_BLOCK = 1024     # bytes per output computed into an L1 scratch buffer, then streamed
ALIGN = 64              # a cache line; the buffer pool aligns every output to it
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
        and _memory_bound(kernel)


def _memory_bound(kernel):
    """A body of a few arithmetic ops per element of the buffers it streams through: its
    speed is the memory's, which streaming stores raise. (Measured: SELU's body, with an
    inline ``exp``, and the 81-tap blur's are bound by arithmetic; they ran no faster, or
    slower, with streaming stores, and the blur's code took 0.5 s more to compile.)"""
    work = sum(op.name not in ("const", "index", "load") for op in kernel.body)
    buffers = len(kernel.inputs) + len(kernel.outputs)
    return not any(op.name == "math" for op in kernel.body) \
        and work <= STREAM_OPS_PER_BUFFER * buffers


def _local_dtype(out):
    """The dtype a row of reduction ``out`` accumulates in: float64 for float sums (cheap
    next to the memory traffic, and the row's rounding error all but disappears), else the
    output's accumulation dtype."""
    if out.combine == "add" and _is_float(out.acc_dtype):
        return np.dtype(np.float64)
    return np.dtype(out.acc_dtype)


def _smin(builder, x, y):
    return builder.select(builder.icmp_signed("<", x, y), x, y)


def _row_width(kernel):
    """The vector width the innermost loop asks LLVM for, or None to let it choose: the
    float32 width when the body calls a math function that computes in float64 inside
    (``mathlib.computes_in_float64``: float32 pow, sin, cos; measured on AVX2: float32 pow
    30% faster at 8 lanes than at the 4 LLVM picks by itself)."""
    if any(op.name == "math" and mathlib.computes_in_float64(op.attr, op.dtype)
           for op in kernel.body):
        return runtime.float32_lanes()
    return None


class ModuleBuilder:
    """One LLVM module holding every kernel of a compiled program."""

    def __init__(self, name):
        self.module = ir.Module(name=name)
        self.nontemporal = self.module.add_metadata([ir.Constant(ir.IntType(32), 1)])

    def loop_hints(self, width):
        """The ``llvm.loop`` metadata asking the vectoriser for ``width`` lanes: a node that
        names itself first, as LLVM's loop IDs do (made distinct by a unique string, since
        llvmlite would otherwise share equal nodes between loops)."""
        m = self.module
        hint = m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.width"),
                               ir.Constant(ir.IntType(32), width)])
        loop_id = m.add_metadata([hint, ir.MetaDataString(m, f"loop.{len(m.metadata)}")])
        loop_id.operands = (loop_id,) + loop_id.operands
        return loop_id

    def intrinsic(self, name, ret, args):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return fn

    def add_kernel(self, kernel):
        """Emit ``kernel`` as a function; returns its LLVM IR text."""
        out_types = [mem_type(o.acc_dtype or o.var.aval.dtype) for o in kernel.outputs]
        in_types = [mem_type(v.aval.dtype) for v in kernel.inputs]
        fnty = ir.FunctionType(ir.VoidType(), [t.as_pointer() for t in out_types + in_types]
                               + [I64, I64])
        fn = ir.Function(self.module, fnty, name=kernel.name)
        n_out = len(kernel.outputs)
        for arg in fn.args[:-2]:
            arg.add_attribute("noalias")
        outs, ins = fn.args[:n_out], fn.args[n_out:-2]
        start, stop = fn.args[-2], fn.args[-1]
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        _KernelEmitter(self, builder, kernel, outs, ins).emit_loops(start, stop)
        builder.ret_void()
        return str(fn)

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
        emitter = _KernelEmitter(self, builder, kernel, [], [])
        for k, out in enumerate(outputs):
            acc, part = fn.args[2 * k], fn.args[2 * k + 1]

            def combine(i, out=out, acc=acc, part=part):
                total = emitter.accumulate(out.combine, emitter.load(acc, i, out.acc_dtype),
                                           emitter.load(part, i, out.acc_dtype), out.acc_dtype)
                emitter.store(acc, i, total, out.acc_dtype)
            emitter._for(ir.Constant(I64, 0), ir.Constant(I64, math.prod(out.shape)), combine,
                         f"out{k}")
        builder.ret_void()
        return name


class _KernelEmitter:
    def __init__(self, mb, builder, kernel, outs, ins):
        self.mb, self.b, self.kernel, self.outs, self.ins = mb, builder, kernel, outs, ins
        self.streaming = kernel is not None and streams(kernel)
        self.row_width = kernel is not None and _row_width(kernel)

    # --- loops
    def emit_loops(self, start, stop):
        shape = self.kernel.shape
        if not shape:
            self.emit_body([])
            return
        self._loop(0, [], start, stop)
        if self.streaming:
            # Non-temporal stores are weakly ordered: make them visible before returning.
            self.b.call(self.mb.intrinsic("llvm.x86.sse.sfence", ir.VoidType(), []), [])

    def _loop(self, axis, index, lo, hi):
        last = axis + 1 == len(self.kernel.shape)
        if last and self.streaming:
            self._streaming_row(index, lo, hi)
        elif last:
            self._reducing_row(index, lo, hi)
        else:
            n = ir.Constant(I64, self.kernel.shape[axis + 1])
            self._for(lo, hi, lambda i: self._loop(axis + 1, index + [i], ir.Constant(I64, 0),
                                                   n), f"i{axis}")

    def _reducing_row(self, index, lo, hi):
        """The innermost loop. Outputs that reduce over its axis accumulate in a local
        variable (a register, several vector lanes once LLVM vectorises), combined into the
        output after the loop; float sums accumulate in float64 there, so the sum of a
        long row does not lose the small terms."""
        b, kernel, axis = self.b, self.kernel, len(self.kernel.shape) - 1
        local = {}
        for k, out in enumerate(kernel.outputs):
            if out.combine and axis not in out.kept_axes:
                dtype = _local_dtype(out)
                var = self._entry_alloca(reg_type(dtype), 1)
                b.store(_constant(out.identity, dtype), var)
                local[k] = (var, dtype)
        self._for(lo, hi, lambda i: self.emit_body(index + [i], local=local), f"i{axis}",
                  width=self.row_width)
        for k, (var, dtype) in local.items():
            out = kernel.outputs[k]
            offset = self.offset([index[a] for a in out.kept_axes], out.shape)
            row = self.convert(b.load(var, typ=reg_type(dtype)), dtype, out.acc_dtype)
            total = self.accumulate(out.combine, self.load(self.outs[k], offset, out.acc_dtype),
                                    row, out.acc_dtype)
            self.store(self.outs[k], offset, total, out.acc_dtype)

    def _for(self, lo, hi, emit, name, step=1, width=None):
        """``for (i = lo; i < hi; i += step) emit(i)``, vectorised ``width`` lanes wide when
        given; returns nothing."""
        b = self.b
        pre = b.block
        header = b.append_basic_block(name)
        body = b.append_basic_block(name + ".body")
        done = b.append_basic_block(name + ".done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        emit(i)
        nxt = b.add(i, ir.Constant(I64, step), name=name + ".next")
        i.add_incoming(nxt, b.block)
        back = b.branch(header)
        if width:
            back.set_metadata("llvm.loop", self.mb.loop_hints(width))
        b.position_at_end(done)

    def _streaming_row(self, index, lo, hi):
        """The innermost loop of a kernel whose outputs bypass the cache (see ``streams``).

        Elements up to the first 64-byte boundary of the outputs and after the last whole
        block run as the ordinary loop. In between, each block of ``STREAM_BLOCK`` bytes per
        output is computed by an ordinary (vectorised) loop into a small scratch buffer that
        stays in L1, then copied to the output with aligned non-temporal vector stores.
        """
        b, kernel = self.b, self.kernel
        dtype = kernel.outputs[0].var.aval.dtype
        size = np.dtype(dtype).itemsize
        block = STREAM_BLOCK // size
        row = self.offset(index + [ir.Constant(I64, 0)], kernel.outputs[0].shape)
        first = b.gep(self.outs[0], [b.add(row, lo)], source_etype=mem_type(dtype))
        misaligned = b.and_(b.sub(ir.Constant(I64, 0), b.ptrtoint(first, I64)),
                            ir.Constant(I64, ALIGN - 1))
        head_end = _smin(b, hi, b.add(lo, b.udiv(misaligned, ir.Constant(I64, size))))
        blocks = b.sdiv(b.sub(hi, head_end), ir.Constant(I64, block))
        blocks_end = b.add(head_end, b.mul(blocks, ir.Constant(I64, block)))
        self._for(lo, head_end, lambda i: self.emit_body(index + [i]), "head")
        scratch = [self._entry_alloca(mem_type(o.var.aval.dtype), block)
                   for o in kernel.outputs]
        lanes = STREAM_VECTOR // size

        def one_block(start):
            self._for(ir.Constant(I64, 0), ir.Constant(I64, block),
                      lambda j: self.emit_body(index + [b.add(start, j)], scratch, j), "lane")
            for out, buf in zip(self.outs, scratch):
                vec = ir.VectorType(out.type.pointee, lanes)
                self._for(ir.Constant(I64, 0), ir.Constant(I64, block),
                          lambda j: self._stream(buf, out, vec, j, b.add(row, b.add(start, j))),
                          "stream", step=lanes)

        self._for(head_end, blocks_end, one_block, "block", step=block)
        self._for(blocks_end, hi, lambda i: self.emit_body(index + [i]), "tail")

    def _stream(self, scratch, out, vec, j, offset):
        b = self.b
        src = b.bitcast(b.gep(scratch, [j], source_etype=out.type.pointee), vec.as_pointer())
        dst = b.bitcast(b.gep(out, [offset], source_etype=out.type.pointee), vec.as_pointer())
        store = b.store(b.load(src, typ=vec, align=ALIGN), dst, align=ALIGN)
        store.set_metadata("nontemporal", self.mb.nontemporal)

    def _entry_alloca(self, element, count):
        """A pointer to an aligned stack buffer of ``count`` elements, allocated once, in
        the function's entry block."""
        b = self.b
        here = b.block
        b.position_at_start(b.function.entry_basic_block)
        buf = b.alloca(ir.ArrayType(element, count))
        buf.align = ALIGN
        pointer = b.bitcast(buf, element.as_pointer())
        b.position_at_end(here)
        return pointer

    # --- the body and the stores
    def emit_body(self, index, scratch=None, lane=None, local=None):
        """The body at ``index``; element-wise results go to ``scratch[lane]`` when given
        (see ``_streaming_row``), else to the outputs; reductions accumulate in the
        ``local`` variable of their output where it has one (see ``_reducing_row``)."""
        values = {}
        for op in self.kernel.body:
            args = [values[a.id] for a in op.args]
            values[op.id] = self.emit_op(op, args, index)
        for k, (ptr, out) in enumerate(zip(self.outs, self.kernel.outputs)):
            value = values[out.value.id]
            if out.combine is None:
                if scratch is None:
                    self.store(ptr, self.offset(index, out.shape), value, out.var.aval.dtype)
                else:
                    self.store(scratch[k], lane, value, out.var.aval.dtype)
                continue
            if local and k in local:
                var, dtype = local[k]
                acc = self.b.load(var, typ=reg_type(dtype))
                value = self.convert(value, out.acc_dtype, dtype)
                self.b.store(self.accumulate(out.combine, acc, value, dtype), var)
                continue
            offset = self.offset([index[a] for a in out.kept_axes], out.shape)
            acc = self.load(ptr, offset, out.acc_dtype)
            combined = self.accumulate(out.combine, acc, value, out.acc_dtype)
            self.store(ptr, offset, combined, out.acc_dtype)

    def accumulate(self, combine, acc, value, dtype):
        """``combine(acc, value)``; float sums and products may be reassociated, so LLVM
        keeps several partial results (one per vector lane, several vectors) and adds them
        up at the end of the loop: faster, and with a rounding error that grows more slowly
        than a strictly sequential sum's, though not bit-identical to it."""
        result = self.binary(combine.rstrip("_"), acc, value, dtype)
        if _is_float(dtype) and combine in ("add", "mul"):
            result.flags.append("reassoc")
        return result

    def offset(self, index, shape):
        total, stride = None, 1
        for i, n in reversed(list(zip(index, shape))):
            if n != 1:
                term = i if stride == 1 else self.b.mul(i, ir.Constant(I64, stride))
                total = term if total is None else self.b.add(total, term)
            stride *= n
        return ir.Constant(I64, 0) if total is None else total

    def load(self, ptr, offset, dtype):
        addr = self.b.gep(ptr, [offset], inbounds=True, source_etype=mem_type(dtype))
        value = self.b.load(addr, typ=mem_type(dtype))
        return self.b.icmp_unsigned("!=", value, ir.Constant(I8, 0)) \
            if np.dtype(dtype) == dtypes.bool_ else value

    def store(self, ptr, offset, value, dtype):
        if np.dtype(dtype) == dtypes.bool_:
            value = self.b.zext(value, I8)
        addr = self.b.gep(ptr, [offset], inbounds=True, source_etype=mem_type(dtype))
        self.b.store(value, addr)

    # --- scalar ops
    def emit_op(self, op, args, index):
        b, dtype = self.b, op.dtype
        name = op.name
        if name == "const":
            return _constant(op.attr, dtype)
        if name == "index":
            return index[op.attr]
        if name == "load":
            return self.load(self.ins[op.attr], args[0], dtype)
        if name == "select":
            return b.select(*args)
        if name == "convert":
            return self.convert(args[0], op.args[0].dtype, dtype)
        if name == "bitcast":
            return b.bitcast(args[0], reg_type(dtype))
        if name == "math":
            return emit_math(self.mb, b, op.attr, args, dtype)
        if name in _COMPARISONS:
            return self.compare(name, args[0], args[1], op.args[0].dtype)
        if len(args) == 1:
            return self.unary(name, args[0], dtype)
        return self.binary(name, args[0], args[1], dtype)

    def unary(self, name, x, dtype):
        b, t = self.b, reg_type(dtype)
        if name == "neg":
            return b.fneg(x) if _is_float(dtype) else b.sub(ir.Constant(t, 0), x)
        if name == "not":
            return b.xor(x, ir.Constant(t, -1 if t != I1 else 1))
        if name == "abs":
            if _is_float(dtype):
                return b.call(self.mb.intrinsic(f"llvm.fabs.{_suffix(t)}", t, [t]), [x])
            return b.call(self.mb.intrinsic(f"llvm.abs.{_suffix(t)}", t, [t, I1]),
                          [x, ir.Constant(I1, 0)])
        if name in ("popcount", "clz"):
            if name == "popcount":
                return b.call(self.mb.intrinsic(f"llvm.ctpop.{_suffix(t)}", t, [t]), [x])
            return b.call(self.mb.intrinsic(f"llvm.ctlz.{_suffix(t)}", t, [t, I1]),
                          [x, ir.Constant(I1, 0)])
        raise NotImplementedError(f"no CPU code for scalar op {name}")

    def binary(self, name, x, y, dtype):
        b, t = self.b, reg_type(dtype)
        fl = _is_float(dtype)
        if name in ("max", "min"):
            if t == I1:
                return b.or_(x, y) if name == "max" else b.and_(x, y)
            # llvm.maximum/minimum: NaN wins and -0.0 < +0.0, as XLA's max/min.
            kind = name + "imum" if fl else ("s" if _is_signed(dtype) else "u") + name
            return b.call(self.mb.intrinsic(f"llvm.{kind}.{_suffix(t)}", t, [t, t]), [x, y])
        if fl:
            return getattr(b, _FLOAT_BINARY[name])(x, y)
        if name in ("div", "rem"):
            signed = "s" if _is_signed(dtype) else "u"
            return getattr(b, signed + name)(x, y)
        return getattr(b, _INT_BINARY[name])(x, y)

    def compare(self, name, x, y, dtype):
        if _is_float(dtype):
            return self.b.fcmp_unordered("!=", x, y) if name == "ne" \
                else self.b.fcmp_ordered(_COMPARISONS[name], x, y)
        cmp = self.b.icmp_signed if _is_signed(dtype) else self.b.icmp_unsigned
        return cmp(_COMPARISONS[name], x, y)

    def convert(self, x, src, dst):
        """XLA's conversions (see kernel.py)."""
        b, t = self.b, reg_type(dst)
        src, dst = np.dtype(src), np.dtype(dst)
        if dst == dtypes.bool_:
            if _is_float(src):
                return b.fcmp_unordered("!=", x, ir.Constant(reg_type(src), 0.0))
            return b.icmp_unsigned("!=", x, ir.Constant(reg_type(src), 0))
        if src == dtypes.bool_:
            return b.uitofp(x, t) if _is_float(dst) else b.zext(x, t)
        if _is_float(src) and _is_float(dst):
            return b.fpext(x, t) if dst.itemsize > src.itemsize else b.fptrunc(x, t)
        if _is_float(dst):
            return b.sitofp(x, t) if _is_signed(src) else b.uitofp(x, t)
        if _is_float(src):
            kind = "fptosi" if _is_signed(dst) else "fptoui"
            fn = self.mb.intrinsic(f"llvm.{kind}.sat.{_suffix(t)}.{_suffix(reg_type(src))}",
                                   t, [reg_type(src)])
            return b.call(fn, [x])
        if dst.itemsize == src.itemsize:
            return x
        if dst.itemsize < src.itemsize:
            return b.trunc(x, t)
        return b.sext(x, t) if _is_signed(src) else b.zext(x, t)


_FLOAT_BINARY = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "rem": "frem"}
_INT_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "and": "and_", "or": "or_",
               "xor": "xor", "shl": "shl", "shr_logical": "lshr", "shr_arith": "ashr"}
_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _suffix(t):
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(t)]


def _constant(value, dtype):
    t = reg_type(dtype)
    if t == I1:
        return ir.Constant(I1, int(bool(value)))
    if isinstance(t, ir.IntType):
        return ir.Constant(t, int(value))
    return ir.Constant(t, float(value))


# --- transcendental functions: the one hook ----------------------------------------------

# Functions LLVM knows as intrinsics; the others ``mathlib`` lacks are libm calls.
_INTRINSICS = {"exp", "exp2", "log", "sin", "cos", "sqrt", "pow", "fma", "floor", "ceil",
               "round", "rint"}


def emit_math(mb, builder, name, args, dtype):
    """``name`` applied to ``args`` (float ``dtype``): mathlib's inline polynomials where it
    has the function (they vectorise), else an LLVM intrinsic or a libm call. float16
    computes in float32 and rounds once, as NumPy does."""
    dtype = np.dtype(dtype)
    if dtype == dtypes.float16:
        wide = [builder.fpext(a, ir.FloatType()) for a in args]
        return builder.fptrunc(emit_math(mb, builder, name, wide, dtypes.float32),
                               reg_type(dtype))
    if name in mathlib.EMITTERS:
        return mathlib.emit(builder, name, list(args), dtype)
    return libm_math(mb, builder, name, args, dtype)


def libm_math(mb, builder, name, args, dtype):
    """A call of LLVM's intrinsic or libm's function (``expf``/``exp``) for ``name``."""
    t = reg_type(dtype)
    if name in _INTRINSICS:
        fn = mb.intrinsic(f"llvm.{name}.{_suffix(t)}", t, [t] * len(args))
    else:
        libm = name + ("f" if np.dtype(dtype) == dtypes.float32 else "")
        fn = mb.intrinsic(libm, t, [t] * len(args))
    return builder.call(fn, list(args))

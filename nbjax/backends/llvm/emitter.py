"""The scalar emitter: the kernel IR's ops (``compiler.kernel``) as LLVM instructions, for
every LLVM target.

``ScalarEmitter`` emits one scalar op at an IRBuilder's position, loads and stores elements
and computes row-major offsets and reductions' combining steps. Nothing in it depends on a
loop, a thread or a machine: a target's one choice here, how transcendental functions are
computed, comes in as a ``MathNames``, and pointers carry their own address spaces. The
CPU's control-flow and combiner functions use it alone.

``KernelEmitter`` adds one ``LoopKernel``: its body evaluated at an index the caller has
computed (from loop counters on the CPU, from thread ids on a GPU: see ``scaffold``), and its
outputs stored there (``store_output``).
"""

import numpy as np
from llvmlite import ir

from ...compiler.kernel import row_major_offset
from ...core import dtypes
from .mathnames import LIBM, emit_math
from .types import I1, I8, I32, I64, constant, declare, mem_type, reg_type, suffix

_FLOAT_BINARY = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "rem": "frem"}
_INT_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "and": "and_", "or": "or_",
               "xor": "xor", "shl": "shl", "shr_logical": "lshr", "shr_arith": "ashr"}
_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _is_float(dtype):
    return dtypes.is_float(dtype)


def _is_signed(dtype):
    return dtypes.is_signed_int(dtype)


def _scoped(access, scope):
    for kind, node in (scope or {}).items():
        access.set_metadata(kind, node)
    return access


class ScalarEmitter:
    """Instructions at ``builder``'s position; ``math`` (a ``MathNames``) says how the
    target computes transcendental functions."""

    def __init__(self, builder, math=LIBM):
        self.b, self.math = builder, math

    def intrinsic(self, name, ret, args):
        return declare(self.b.module, name, ret, args)

    # --- memory
    def offset(self, index, shape):
        """The row-major element offset of ``index`` (i64 values) in an array of ``shape``."""
        return row_major_offset(index, shape, lambda i, s: self.b.mul(i, ir.Constant(I64, s)),
                                self.b.add, lambda: ir.Constant(I64, 0))

    def load(self, ptr, offset, dtype, scope=None):
        """The element at ``offset``; ``scope``: the alias scope of its buffer, if it has
        one (``scaffold.alias_scopes``)."""
        addr = self.b.gep(ptr, [offset], inbounds=True, source_etype=mem_type(dtype))
        value = _scoped(self.b.load(addr, typ=mem_type(dtype)), scope)
        if np.dtype(dtype) == dtypes.bfloat16:  # its bits, the upper half of a float32's
            return self.b.bitcast(self.b.shl(self.b.zext(value, I32), ir.Constant(I32, 16)),
                                  reg_type(dtype))
        return self.b.icmp_unsigned("!=", value, ir.Constant(I8, 0)) \
            if np.dtype(dtype) == dtypes.bool_ else value

    def store(self, ptr, offset, value, dtype, scope=None):
        if np.dtype(dtype) == dtypes.bool_:
            value = self.b.zext(value, I8)
        if np.dtype(dtype) == dtypes.bfloat16:  # (a float32 rounded to bfloat16 already)
            value = self.b.trunc(self.b.lshr(self.b.bitcast(value, I32), ir.Constant(I32, 16)),
                                 mem_type(dtype))
        addr = self.b.gep(ptr, [offset], inbounds=True, source_etype=mem_type(dtype))
        _scoped(self.b.store(value, addr), scope)

    def accumulate(self, combine, acc, value, dtype):
        """``combine(acc, value)``; float sums and products may be reassociated, so LLVM
        keeps several partial results (one per vector lane, several vectors) and adds them
        up at the end of the loop: faster, and with a rounding error that grows more slowly
        than a strictly sequential sum's, though not bit-identical to it."""
        result = self.binary(combine.rstrip("_"), acc, value, dtype)
        if _is_float(dtype) and combine in ("add", "mul"):
            result.flags.append("reassoc")
        return result

    # --- scalar ops
    def emit_op(self, op, args):
        """The value of ``op`` (any op but ``index`` and ``load``, which need a kernel) on
        the values ``args`` of its operands."""
        b, dtype, name = self.b, op.dtype, op.name
        if name == "const":
            return constant(op.attr, dtype)
        if name == "select":
            return b.select(*args)
        if name == "convert":
            return self.convert(args[0], op.args[0].dtype, dtype)
        if name == "bitcast":
            return b.bitcast(args[0], reg_type(dtype))
        if name == "math":
            return self.call_math(op.attr, args, dtype)
        if name in _COMPARISONS:
            return self.compare(name, args[0], args[1], op.args[0].dtype)
        if len(args) == 1:
            return self.unary(name, args[0], dtype)
        return self.binary(name, args[0], args[1], dtype)

    def call_math(self, name, args, dtype):
        """The function ``name`` (``exp``, ``log1p``...) of ``args`` (float ``dtype``), as the
        target computes it (``self.math``)."""
        return emit_math(self.b, self.math, name, args, dtype)

    def unary(self, name, x, dtype):
        b, t = self.b, reg_type(dtype)
        if name == "neg":
            return b.fneg(x) if _is_float(dtype) else b.sub(ir.Constant(t, 0), x)
        if name == "not":
            return b.xor(x, ir.Constant(t, -1 if t != I1 else 1))
        if name == "abs":
            if _is_float(dtype):
                return b.call(self.intrinsic(f"llvm.fabs.{suffix(t)}", t, [t]), [x])
            return b.call(self.intrinsic(f"llvm.abs.{suffix(t)}", t, [t, I1]),
                          [x, ir.Constant(I1, 0)])
        if name == "popcount":
            return b.call(self.intrinsic(f"llvm.ctpop.{suffix(t)}", t, [t]), [x])
        if name == "clz":
            return b.call(self.intrinsic(f"llvm.ctlz.{suffix(t)}", t, [t, I1]),
                          [x, ir.Constant(I1, 0)])
        raise NotImplementedError(f"no LLVM code for scalar op {name}")

    def binary(self, name, x, y, dtype):
        b, t = self.b, reg_type(dtype)
        fl = _is_float(dtype)
        if name in ("max", "min"):
            if t == I1:
                return b.or_(x, y) if name == "max" else b.and_(x, y)
            # llvm.maximum/minimum: NaN wins and -0.0 < +0.0, as XLA's max/min.
            kind = name + "imum" if fl else ("s" if _is_signed(dtype) else "u") + name
            return b.call(self.intrinsic(f"llvm.{kind}.{suffix(t)}", t, [t, t]), [x, y])
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
        """XLA's conversions (see ``compiler.kernel``)."""
        b, t = self.b, reg_type(dst)
        src, dst = np.dtype(src), np.dtype(dst)
        if src == dtypes.bfloat16:  # (in a float32 register: exact)
            return self.convert(x, dtypes.float32, dst)
        if dst == dtypes.bfloat16:
            return self._to_bfloat16(self.convert(x, src, dtypes.float32))
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
            # From float16 through float32 (exact): LLVM's own saturating conversion of a
            # float16 to int16 made NaN -32768 on a CPU with AVX512-FP16 (not 0, as XLA's).
            if src == dtypes.float16:
                x, src = b.fpext(x, reg_type(dtypes.float32)), np.dtype(dtypes.float32)
            return self._saturating_to_int(x, src, dst)
        if dst.itemsize == src.itemsize:
            return x
        if dst.itemsize < src.itemsize:
            return b.trunc(x, t)
        return b.sext(x, t) if _is_signed(src) else b.zext(x, t)

    def _to_bfloat16(self, x):
        """The float32 ``x`` rounded to bfloat16 (to nearest, ties to even, as ml_dtypes
        and XLA round), still a float32: its lower 16 bits cleared after adding half a
        unit of the kept part (less one, plus its last bit); a NaN stays a quiet NaN."""
        b, mask = self.b, ir.Constant(I32, 0xFFFF0000)
        bits = b.bitcast(x, I32)
        odd = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
        rounded = b.and_(b.add(bits, b.add(ir.Constant(I32, 0x7FFF), odd)), mask)
        quiet = b.and_(b.or_(bits, ir.Constant(I32, 0x400000)), mask)
        nan = b.fcmp_unordered("uno", x, x)
        return b.bitcast(b.select(nan, quiet, rounded), x.type)

    def _saturating_to_int(self, x, src, dst):
        """The float ``x`` (of ``src``) as the integer type ``dst``: truncated toward zero,
        saturating at ``dst``'s limits, NaN as 0 (XLA's conversion). LLVM's intrinsic for
        it (``fptosi.sat``) converts a vector one lane at a time on x86 (1M float32 to
        int32: 0.5 ms, 5x a plain conversion); here ``x`` is clamped into range first, so
        that the conversion itself is one vector instruction."""
        b, t, ft = self.b, reg_type(dst), reg_type(src)
        limits, top = np.iinfo(dst), 2.0 ** (8 * dst.itemsize - _is_signed(dst))
        lowest, highest = float(limits.min), float(np.nextafter(src.type(top), 0))
        clamped = b.select(b.fcmp_ordered("<", x, ir.Constant(ft, lowest)),
                           ir.Constant(ft, lowest), x)
        clamped = b.select(b.fcmp_ordered(">", clamped, ir.Constant(ft, highest)),
                           ir.Constant(ft, highest), clamped)
        clamped = b.select(b.fcmp_unordered("uno", x, x), ir.Constant(ft, 0.0), clamped)
        y = (b.fptosi if _is_signed(dst) else b.fptoui)(clamped, t)
        if int(highest) == limits.max:
            return y
        # (``highest`` truncates below ``dst``'s largest value, which no float of src is)
        return b.select(b.fcmp_ordered(">=", x, ir.Constant(ft, top)),
                        ir.Constant(t, int(limits.max)), y)


class KernelEmitter(ScalarEmitter):
    """The body of ``kernel`` (a ``LoopKernel``) on the buffer pointers ``outs`` and
    ``ins`` (its outputs' and inputs', in order)."""

    def __init__(self, builder, kernel, outs, ins, math=LIBM):
        super().__init__(builder, math)
        self.kernel, self.outs, self.ins = kernel, outs, ins
        self.residue = None  # (axis, q, c, r): the index along axis is q * c + r (``values``)

    def values(self, index):
        """The body evaluated at ``index`` (one i64 value per axis of the kernel's shape):
        the value of each output there. Where ``residue`` says that the index along an axis
        is ``q * c + r`` (``r`` a constant), its quotient and remainder by a divisor of ``c``
        are those of ``q`` and ``r``, with no division."""
        values = {}
        for op in self.kernel.body:
            args = [values[a.id] for a in op.args]
            if op.name == "index":
                values[op.id] = index[op.attr]
            elif op.name == "load":
                values[op.id] = self.load(self.ins[op.attr], args[0], op.dtype)
            else:
                folded = self._by_residue(op)
                values[op.id] = self.emit_op(op, args) if folded is None else folded
        return [values[out.value.id] for out in self.kernel.outputs]

    def _by_residue(self, op):
        """``op``'s value from ``residue`` when it divides the index along its axis by a
        constant dividing ``c`` (or takes the remainder), else None."""
        if self.residue is None or op.name not in ("div", "rem"):
            return None
        axis, q, c, r = self.residue
        x, d = op.args
        if x.name != "index" or x.attr != axis or d.name != "const":
            return None
        d = int(d.attr)
        if d <= 0 or c % d:
            return None
        if op.name == "rem":
            return ir.Constant(reg_type(op.dtype), r % d)
        return self.b.add(self.b.mul(q, ir.Constant(q.type, c // d)),
                          ir.Constant(q.type, r // d))

    def store_output(self, k, index, value):
        """Deliver ``value``, output ``k``'s value at ``index``: an element-wise result is
        stored at the index; a reduction is read, combined and written back at the index of
        its kept axes, which is right where one thread at a time owns each output element
        (a target that accumulates otherwise delivers the values itself)."""
        out, ptr = self.kernel.outputs[k], self.outs[k]
        if out.combine is None:
            self.store(ptr, self.offset(index, out.shape), value, out.var.aval.dtype)
            return
        offset = self.offset([index[a] for a in out.kept_axes], out.shape)
        acc = self.load(ptr, offset, out.acc_dtype)
        self.store(ptr, offset, self.accumulate(out.combine, acc, value, out.acc_dtype),
                   out.acc_dtype)

    def emit_body(self, index):
        """The body at ``index``, every output delivered by ``store_output``."""
        for k, value in enumerate(self.values(index)):
            self.store_output(k, index, value)

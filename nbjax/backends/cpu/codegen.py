"""LoopKernel -> LLVM IR (through ``llvmlite.ir``).

Each kernel becomes one function

    void kernel_N(T0* noalias out0, ..., U0* noalias in0, ..., i64 start, i64 stop)

looping over its iteration space in row-major order, axis 0 from ``start`` to ``stop`` (so
the runtime can split it between threads). Buffers are C-contiguous with static shapes, so
every stride is a constant and the innermost loop walks the output contiguously; with
``noalias`` pointers LLVM's loop vectoriser turns it into vector code. Bools are ``i1`` in
registers and one byte in memory.

Transcendental functions go through one hook, ``emit_math``: the inline, vectorisable
polynomials of ``mathlib`` where it has the function, else LLVM intrinsics or libm calls
(correct, but scalar calls that stop the vectoriser).
"""

import numpy as np
from llvmlite import ir

from ...core import dtypes
from . import mathlib

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


class ModuleBuilder:
    """One LLVM module holding every kernel of a compiled program."""

    def __init__(self, name):
        self.module = ir.Module(name=name)

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


class _KernelEmitter:
    def __init__(self, mb, builder, kernel, outs, ins):
        self.mb, self.b, self.kernel, self.outs, self.ins = mb, builder, kernel, outs, ins

    # --- loops
    def emit_loops(self, start, stop):
        shape = self.kernel.shape
        if not shape:
            self.emit_body([])
            return
        self._loop(0, [], start, stop)

    def _loop(self, axis, index, lo, hi):
        b = self.b
        pre = b.block
        header = b.append_basic_block(f"axis{axis}")
        body = b.append_basic_block(f"axis{axis}.body")
        done = b.append_basic_block(f"axis{axis}.done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, name=f"i{axis}")
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        if axis + 1 < len(self.kernel.shape):
            n = ir.Constant(I64, self.kernel.shape[axis + 1])
            self._loop(axis + 1, index + [i], ir.Constant(I64, 0), n)
        else:
            self.emit_body(index + [i])
        nxt = b.add(i, ir.Constant(I64, 1), name=f"i{axis}.next")
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)

    # --- the body and the stores
    def emit_body(self, index):
        values = {}
        for op in self.kernel.body:
            args = [values[a.id] for a in op.args]
            values[op.id] = self.emit_op(op, args, index)
        for ptr, out in zip(self.outs, self.kernel.outputs):
            value = values[out.value.id]
            if out.combine is None:
                self.store(ptr, self.offset(index, out.shape), value, out.var.aval.dtype)
                continue
            offset = self.offset([index[k] for k in out.kept_axes], out.shape)
            acc = self.load(ptr, offset, out.acc_dtype)
            combined = self.binary(out.combine.rstrip("_"), acc, value, out.acc_dtype)
            self.store(ptr, offset, combined, out.acc_dtype)

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
_INTRINSICS = {"exp", "exp2", "log", "sin", "cos", "sqrt", "pow", "floor", "ceil", "round",
               "rint"}


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

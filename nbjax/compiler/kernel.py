"""The backend-neutral kernel IR: one fused loop nest, its loads, scalar body and stores.

A ``LoopKernel`` iterates over an index space (``shape``) in row-major order. At each index
it evaluates a *body*: a list of scalar ``Op``s in SSA form (each op names its operands, which
are earlier ops). Index arithmetic is part of the body too: ``index`` ops are the loop
counters, and a ``load`` reads element ``offset`` (an i64 op) of an input buffer. So the
index maps of fused slices, pads, transposes, broadcasts, reshapes and dynamic slices are
ordinary integer ops feeding loads, which every backend emits the same way as the arithmetic.

Outputs are stored at the iteration index (element-wise results) or accumulated at the index
of the kept axes with a combining op (reductions: the output buffer starts at the identity).

The scalar ops and their semantics, which every backend implements:

- ``const`` (attr: the value), ``index`` (attr: the axis), ``load`` (attr: input number;
  operand: the element offset).
- ``add sub mul neg abs``: integers wrap; ``div rem``: IEEE on floats (``rem`` is fmod), C's
  truncating division on integers, never called with a zero divisor or ``MIN / -1`` (the
  lowering rules rule those out with selects, so the XLA semantics live in one place).
- ``max min``: on floats NaN wins and -0.0 < +0.0 (IEEE 754-2019 maximum/minimum, as XLA).
- ``eq ne lt le gt ge`` (bool results; float ``ne`` is true for NaN, the others false),
  ``and or xor not``, ``shl shr_logical shr_arith`` (amount below the bit width),
  ``popcount clz``, ``select(pred, on_true, on_false)``.
- ``convert`` (attr: the dtype): XLA's conversion (float to integer truncates, saturates,
  NaN to 0; to bool is ``x != 0``); ``bitcast`` between types of one width.
- ``math`` (attr: the function name, e.g. ``exp``, ``log1p``, ``atan2``, ``pow``, ``floor``,
  ``round``, ``rint``, ``nextafter``): the libm function of that name on floats.
"""

from dataclasses import dataclass, field

import numpy as np

from ..core import Literal, dtypes
from ..lax import convert_element_type_p

INDEX = np.dtype(np.int64)
BOOL = dtypes.bool_


class CannotFuse(Exception):
    """Raised while building a kernel when a planned fusion turns out to be impossible."""


def kernel_lowering(eqn):
    """The kernel lowering of ``eqn``'s primitive, or None with the reason it has none."""
    prim = eqn.primitive
    lowering = prim.lowerings.get("kernel")
    if prim.multiple_results or lowering is None:
        return None, f"no kernel lowering for {prim.name}"
    avals = [a.aval for a in eqn.invars] + [v.aval for v in eqn.outvars]
    if any(dtypes.is_complex(a.dtype) for a in avals):
        return None, f"{prim.name} on complex numbers has no kernel lowering"
    narrow = narrow_type_reason(eqn)
    if narrow is not None:
        return None, narrow
    if lowering.kind == "elementwise" and not _elementwise_shapes(eqn):
        return None, f"{prim.name} changes the shape here: no element-wise kernel"
    return lowering, None


def narrow_type_reason(eqn):
    """Why ``eqn`` is a reference step by design (it reads or writes one of the narrow types
    of ml_dtypes, which NumPy computes through float32), or None. Conversions between
    bfloat16 and float32 are kernels (mixed-precision programs convert every operand and
    result: 0.1-0.25 ms each for 512x512 as NumPy steps); other bfloat16 operations are
    not."""
    avals = [a.aval for a in eqn.invars] + [v.aval for v in eqn.outvars]
    narrow = next((a.dtype for a in avals if dtypes.is_ml_dtype(a.dtype)), None)
    if narrow is None or (eqn.primitive.name == "convert_element_type" and {
            a.dtype for a in avals} == {dtypes.bfloat16, dtypes.float32}):
        return None
    return (f"{eqn.primitive.name} on {narrow.name} has no kernel lowering (the narrow "
            "types of ml_dtypes are left to the reference backend)")


def _elementwise_shapes(eqn):
    """Every operand is rank 0 or has the output's shape up to size-1 axes (bitcasts
    between widths add or drop an axis: those are not element-wise)."""
    out = eqn.outvars[0].aval.shape
    return all(not a.aval.shape or (len(a.aval.shape) == len(out) and all(
        n in (1, m) for n, m in zip(a.aval.shape, out))) for a in eqn.invars)


@dataclass(eq=False)
class Op:
    """One scalar SSA operation of a kernel body."""
    name: str
    args: tuple
    dtype: np.dtype
    attr: object = None
    id: int = -1

    def __str__(self):
        return f"%{self.id}"


def format_op(op):
    """``%7 = add %5, %6 : f32`` (the form the notebook shows)."""
    args = ", ".join(map(str, op.args))
    attr = "" if op.attr is None else f"[{_attr_str(op.attr)}]"
    return f"%{op.id} = {op.name}{attr} {args}: {dtypes.short_name(op.dtype)}"


def _attr_str(attr):
    return attr.name if isinstance(attr, np.dtype) else repr(attr)


class KernelBuilder:
    """The ``ctx`` that kernel lowering rules build scalar operations with.

    Every method returns an ``Op``; identical ops are created once (common subexpressions
    disappear), and Python numbers passed as operands become constants of the other
    operand's dtype, so a rule can write ``ctx.select(ctx.gt(x, 0), 1, x)``.
    """

    def __init__(self):
        self.ops = []
        self._memo = {}

    def _op(self, name, args, dtype, attr=None):
        key = (name, tuple(a.id for a in args), np.dtype(dtype), _hashable(attr))
        op = self._memo.get(key)
        if op is None:
            op = Op(name, tuple(args), np.dtype(dtype), attr, len(self.ops))
            self.ops.append(op)
            self._memo[key] = op
        return op

    def _lift(self, values):
        """Turn Python numbers among ``values`` into constants of the ops' dtype."""
        like = next(v.dtype for v in values if isinstance(v, Op))
        return [v if isinstance(v, Op) else self.const(v, like) for v in values]

    # --- leaves
    def const(self, value, dtype):
        dtype = np.dtype(dtype)
        return self._op("const", (), dtype, np.asarray(value).astype(dtype).item())

    def index(self, axis):
        return self._op("index", (), INDEX, axis)

    def load(self, input_number, offset, dtype):
        return self._op("load", (offset,), dtype, input_number)

    # Arithmetic, comparisons and bit operations (``add``, ``lt``, ``and_``...) are attached
    # below the class, one line per group.

    def select(self, pred, on_true, on_false):
        on_true, on_false = self._lift([on_true, on_false])
        return self._op("select", (pred, on_true, on_false), on_true.dtype)

    def convert(self, x, dtype):
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        if x.name == "const":
            return self.const(_convert_value(x.attr, x.dtype, dtype), dtype)
        return self._op("convert", (x,), dtype, dtype)

    def bitcast(self, x, dtype):
        return self._op("bitcast", (x,), dtype, np.dtype(dtype))

    def math(self, fn, *xs):
        xs = self._lift(list(xs))
        return self._op("math", tuple(xs), xs[0].dtype, fn)

    # --- index arithmetic with the obvious simplifications (kept readable in the IR)
    def iadd(self, x, y):
        if _is_const(x, 0):
            return y
        if _is_const(y, 0):
            return x
        return self.add(x, y)

    def imul(self, x, y):
        if _is_const(x, 0) or _is_const(y, 1):
            return x
        if _is_const(y, 0) or _is_const(x, 1):
            return y
        return self.mul(x, y)

    def iconst(self, value):
        return self.const(value, INDEX)

    def offset(self, index, shape):
        """The row-major element offset of ``index`` in an array of ``shape``."""
        return row_major_offset(index, shape, lambda i, s: self.imul(i, self.iconst(s)),
                                self.iadd, lambda: self.iconst(0))


def row_major_offset(index, shape, scale, add, zero):
    """The element offset of ``index`` in a C-contiguous array of ``shape``, built with
    ``scale(i, stride)``, ``add(x, y)`` and ``zero()``: the one statement of the layout, for
    the kernel ops of loads (``KernelBuilder.offset``) and the instructions of a backend's
    stores (``backends.llvm.emitter``). Axes of extent 1 add nothing; a stride of 1 needs no
    product."""
    total, stride = None, 1
    for i, n in reversed(list(zip(index, shape))):
        if n != 1:
            term = i if stride == 1 else scale(i, stride)
            total = term if total is None else add(total, term)
        stride *= n
    return zero() if total is None else total


def _binary_method(name, result_dtype=None):
    def method(self, x, y):
        x, y = self._lift([x, y])
        return self._op(name, (x, y), result_dtype or x.dtype)
    method.__name__ = name.rstrip("_")
    return method


def _unary_method(name):
    def method(self, x):
        return self._op(name, (x,), x.dtype)
    method.__name__ = name
    return method


for _name in ("add", "sub", "mul", "div", "rem", "max", "min", "xor", "shl", "shr_logical",
              "shr_arith"):
    setattr(KernelBuilder, _name, _binary_method(_name))
for _name in ("and", "or"):
    setattr(KernelBuilder, _name + "_", _binary_method(_name))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(KernelBuilder, _name, _binary_method(_name, BOOL))
for _name in ("neg", "abs", "popcount", "clz"):
    setattr(KernelBuilder, _name, _unary_method(_name))
KernelBuilder.not_ = _unary_method("not")


def _is_const(op, value):
    return op.name == "const" and op.attr == value


def _hashable(attr):
    """``attr`` as part of a memo key. A float goes with its sign: -0.0 == 0.0 in Python,
    but a kernel must not take one constant for the other (``atan2(-0.0, -1)`` is -pi)."""
    if isinstance(attr, float):
        return attr, np.signbit(attr)
    try:
        hash(attr)
        return attr
    except TypeError:
        return repr(attr)


def _convert_value(value, old, new):
    with np.errstate(all="ignore"):
        out = convert_element_type_p.impl(np.asarray(value, old), new_dtype=new, weak_type=False)
    return np.asarray(out).item()


# --- kernels -------------------------------------------------------------------------------

@dataclass
class KernelOutput:
    """A stored result: ``value`` at each index, or accumulated with ``combine`` (a ctx
    method name) over the axes not in ``kept_axes``, starting from ``identity``."""
    var: object
    value: Op
    kept_axes: tuple
    combine: str = None
    identity: object = None
    acc_dtype: np.dtype = None

    @property
    def shape(self):
        return self.var.aval.shape


@dataclass
class LoopKernel:
    name: str
    shape: tuple
    inputs: list            # jaxpr vars read from buffers, in argument order
    outputs: list           # KernelOutput
    body: list              # Op, in order
    eqns: list = field(default_factory=list)
    # {input number: output number}: inputs read from the buffer of an output that holds
    # them when the kernel starts (a donated input updated in place; see ``in_place_ok``).
    in_place: dict = field(default_factory=dict)
    # A staged kernel (``staged_kernel``): the LoopKernels run one after another on each
    # row (each index of the axes but the last); its own body is empty, its inputs and
    # outputs are theirs.
    stages: list = field(default_factory=list)
    # How many math functions (exp, tanh...) ``body`` calls: a measure of its cost that a
    # program loaded from the disk cache keeps (it leaves the body out until a view asks).
    math_calls: int = field(init=False)

    def __post_init__(self):
        self.math_calls = sum(op.name == "math" for op in self.body) + \
            sum(stage.math_calls for stage in self.stages)

    def pretty(self):
        if self.stages:
            lines = [f"kernel {self.name} over {list(self.shape)}: {len(self.stages)} stages "
                     "on each row"]
            return "\n".join(lines + [stage.pretty() for stage in self.stages])
        ins = ", ".join(f"in{i}:{v.aval.str_short(short_dtypes=True)}"
                        for i, v in enumerate(self.inputs))
        lines = [f"kernel {self.name} over {list(self.shape)} ({ins})"]
        lines += ["  " + format_op(op) for op in self.body]
        for i, o in enumerate(self.outputs):
            how = f" {o.combine}-accumulate over axes not in {o.kept_axes}" if o.combine else ""
            lines.append(f"  out{i}:{o.var.aval.str_short(short_dtypes=True)} <- {o.value}{how}")
        return "\n".join(lines)


def staged_kernel(name, stages):
    """One kernel running the LoopKernels ``stages`` one after another on each row: stage
    k reads what earlier ones wrote in the row (a softmax's maximum, then its exponentials
    and their sum) while the row is in the cache. The stages' shapes differ at most in
    their last axis, of one element in a stage computing one value per row (a layer norm's
    inverse deviation); the kernel's shape is the longest. Its outputs are the stages';
    its inputs are theirs but for the values earlier stages write."""
    outputs = [o for stage in stages for o in stage.outputs]
    written = {o.var for o in outputs}
    inputs = list(dict.fromkeys(v for stage in stages for v in stage.inputs
                                if v not in written))
    shape = max((stage.shape for stage in stages), key=lambda shape: shape[-1])
    return LoopKernel(name, shape, inputs, outputs, [],
                      [e for stage in stages for e in stage.eqns], stages=list(stages))


def in_place_ok(kernel, j, k):
    """Whether ``kernel`` may compute output ``k`` in the buffer of its input ``j``: the
    output is element-wise over the whole iteration space, of the input's shape and dtype,
    and every load of the input is at the iteration's own index, so each element is read
    (in the same iteration) before it is overwritten and never after."""
    x, out = kernel.inputs[j], kernel.outputs[k]
    shape = tuple(kernel.shape)
    if kernel.stages or out.combine is not None or out.acc_dtype not in (None, out.var.aval.dtype) \
            or tuple(out.shape) != shape or tuple(x.aval.shape) != shape \
            or x.aval.dtype != out.var.aval.dtype:
        return False
    return all(reads_at_index(op.args[0], len(shape), shape) for op in kernel.body
               if op.name == "load" and op.attr == j)


def reads_at_index(offset, axes, shape):
    """Whether the index op ``offset`` is the row-major offset, in an array of ``shape``,
    of the iteration's first ``axes`` indices (all of them: the iteration's own element)."""
    here = row_major_offset([("index", a) for a in range(axes)], shape,
                            lambda i, s: ("mul", i, ("const", s)), lambda a, b: ("add", a, b),
                            lambda: ("const", 0))
    return _structure(offset) == here


def _structure(op):
    """An index op as nested tuples (what ``KernelBuilder.offset`` builds, compared by
    value)."""
    if op.name in ("index", "const"):
        return (op.name, op.attr)
    return (op.name, *map(_structure, op.args))


# --- building a kernel from fused equations ------------------------------------------------

class _Part:
    """One root equation of a kernel with the equations fused into it (its producers)."""

    def __init__(self, root, members):
        self.root = root
        self.members = members  # var -> eqn, for every fused equation including the root


def build_kernel(name, shape, parts):
    """A LoopKernel computing each part's root result over the iteration space ``shape``.

    ``parts`` is a list of (root eqn, {var: eqn} of the equations fused into it); a part may
    use the equations of the others too. A later part may use an earlier part's
    element-wise result only at the same index (it is computed in the same iteration);
    anything else raises CannotFuse.
    """
    ctx = KernelBuilder()
    outputs = []
    identity = [ctx.index(k) for k in range(len(shape))]
    # Every part may compute any part's fused equations: the planner puts a value that
    # parts share in one of them.
    fused = _FusedValues(ctx, {var: eqn for _, part in parts for var, eqn in part.items()})
    for root, _ in parts:
        lowering = root.primitive.lowering("kernel")
        out_var = root.outvars[0]
        if lowering.kind == "reduction":
            x_dtype = root.invars[0].aval.dtype
            acc = np.dtype(lowering.acc_dtype(x_dtype))
            val = ctx.convert(fused.value(root.invars[0], identity), acc)
            kept = tuple(k for k in range(len(shape)) if k not in root.params["axes"])
            outputs.append(KernelOutput(out_var, val, kept, lowering.rule,
                                        lowering.identity(x_dtype), acc))
            fused.reduced_here.add(out_var)
        else:
            val = fused.value(out_var, identity)
            outputs.append(KernelOutput(out_var, val, tuple(range(len(shape)))))
            fused.in_kernel[out_var] = (val, tuple(i.id for i in identity))
    eqns = [e for _, members in parts for e in _ordered(members)]
    return LoopKernel(name, tuple(shape), fused.inputs, outputs, live_ops(ctx.ops, outputs),
                      eqns)


class _FusedValues:
    """The ops of the values a kernel computes, each computed once per index, whichever
    part asks first: ``value(atom, idx)`` lowers the equation of ``atom`` (one of
    ``members``) at ``idx``, or loads ``atom`` from its buffer (one of ``inputs``). (An
    object rather than closures that call themselves: those are reference cycles, which
    left every kernel's ops and memo to Python's cyclic garbage collector.)"""

    def __init__(self, ctx, members):
        self.ctx, self.members = ctx, members
        self.inputs, self.memo = [], {}
        self.in_kernel = {}         # var -> (its op, the index it was computed at)
        self.reduced_here = set()   # the reductions this kernel computes

    def value(self, atom, idx):
        if isinstance(atom, Literal):
            return self.ctx.const(np.asarray(atom.val), atom.aval.dtype)
        key = (atom, tuple(i.id for i in idx))
        if key in self.memo:
            return self.memo[key]
        if atom in self.reduced_here:
            raise CannotFuse("reads a reduction computed by this same kernel")
        if atom in self.in_kernel:
            op, where = self.in_kernel[atom]
            if where != tuple(i.id for i in idx):
                raise CannotFuse("reads a result of this kernel at another index")
            result = op
        elif atom in self.members:
            result = _lower_eqn(self.ctx, self.members[atom], idx, self.value)
        else:
            result = self.load(atom, idx)
        self.memo[key] = result
        return result

    def load(self, var, idx):
        if var not in self.inputs:
            self.inputs.append(var)
        offset = self.ctx.offset(idx, var.aval.shape)
        return self.ctx.load(self.inputs.index(var), offset, var.aval.dtype)


def live_ops(ops, outputs):
    """The ops the outputs depend on (a rule may build ops it ends up not using; a target
    may compute some of a kernel's outputs in a kernel of their own)."""
    live = {o.value.id for o in outputs}
    for op in reversed(ops):
        if op.id in live:
            live.update(a.id for a in op.args)
    return [op for op in ops if op.id in live]


def _ordered(members):
    seen = []
    for e in members.values():
        if e not in seen:
            seen.append(e)
    return seen


def _lower_eqn(ctx, eqn, idx, value):
    """The value of ``eqn``'s result at ``idx``, by its primitive's kernel lowering rule."""
    lowering = eqn.primitive.lowering("kernel")
    out_shape = eqn.outvars[0].aval.shape
    if lowering.kind == "index":
        return lowering.rule(ctx, list(idx), lambda i, j: value(eqn.invars[i], list(j)),
                             [a.aval.shape for a in eqn.invars], **eqn.params)
    if lowering.kind != "elementwise":
        raise CannotFuse(f"{eqn.primitive.name} cannot be computed inside another kernel")
    scalars = [value(a, _broadcast_index(ctx, idx, a.aval.shape, out_shape))
               for a in eqn.invars]
    return lowering.rule(ctx, *scalars, **eqn.params)


def _broadcast_index(ctx, idx, shape, out_shape):
    """Where an element-wise operand of ``shape`` (rank 0, or size-1 axes) is read."""
    if not shape:
        return []
    return [ctx.iconst(0) if n == 1 and m != 1 else i for i, n, m in zip(idx, shape, out_shape)]

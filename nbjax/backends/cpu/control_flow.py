"""Control flow compiled natively: ``scan``, ``while`` and ``cond`` around compiled kernels.

A ``"loop"`` step of the plan (see ``compiler.fusion``) becomes one function

    i32 control_N(i8** io, i8* scratch)

which returns 0, 1 when it stopped early because the user interrupted it (its loops poll
the interrupt flag: see ``interrupts``), or 2 when a host step failed (``host_steps``).
``io`` holds the addresses of the equation's operands, then of its results, then of
constants baked into the program (a sub-jaxpr's constants, literals: ``constants``);
``scratch`` is one block for everything the sub-programs compute on the way (a kernel result
that another kernel reads, the second buffer of a loop's carries...), laid out at compile
time (``scratch_bytes`` in all), a region reused once its value is dead (``buffer_plan``).
So a loop of a thousand iterations is one call from Python.

Inside, a sub-program (a loop body, a loop condition, a branch) is a sequence of calls of its
kernels, functions of the same module (LLVM may inline them), of BLAS for its matrix
products (``blas``), of LAPACK for its decompositions (``lapack``), of the library loops of
``LIBRARY_LOOPS`` (scatters, sorts...: functions of their own in a whole program, optimised
by O3 unlike the program's), and of host steps for any other equation (``host_steps``: a
call back into Python), on buffer addresses:

- scan and while keep each carry in two buffers and swap them every iteration: the body reads
  the current ones and writes the next ones; a carry that the body's step making its next
  value updates in place (``buffer_plan.carries_in_place``) has one buffer. scan reads the
  row of its ``xs`` and writes the row of its ``ys`` of the iteration (counted from the end
  with ``reverse``);
- while evaluates its condition's kernels into a one-byte buffer before each iteration;
- cond jumps to the branch of its index, clamped into range as ``lax.switch`` does.

Control flow nested in a sub-program is emitted inline the same way. A kernel writes a
result straight where its sub-program delivers it (the next carry, the row of ``ys``, the
step's output) when that is the result's one use as an output; other outputs are copied.
"""

import dataclasses
import math
from collections import Counter

import numpy as np
from llvmlite import ir

from ...compiler.fusion import SubProgram
from ...core import Literal, Var, to_numpy
from ...lax import cond_p, scan_p, while_p
from ..llvm import (I1, I8, I32, I64, ScalarEmitter, constant, declare, for_loop, mem_type,
                    memset, pointer_array)
from . import (arg_reduction, blas, buffer_plan, cumulative, lapack, pipeline, runtime, scatter,
               sort, support, update_slice, workers)
from .host_steps import HostCall, SplitCall

I8P = I8.as_pointer()
CLOCK_MONOTONIC = 1   # Linux's
# The control-flow primitives this backend compiles, and the method of
# ``ControlFlowFunction`` that emits each.
CONTROL_FLOW = {scan_p: "scan", while_p: "while_", cond_p: "cond"}
# The modules emitting library steps as loops in native code (LAPACK's: around its
# calls): each ``supports(eqn)`` and can ``emit(f, eqn, *operands, *results)`` into a
# ControlFlowFunction ``f``.
LIBRARY_LOOPS = (scatter, update_slice, arg_reduction, cumulative, sort, lapack)


def native_library_call(eqn):
    """Whether native code runs the library equation ``eqn`` itself (a BLAS product, a
    scatter, an arg-reduction...) rather than calling back into Python for it."""
    return blas.supports(eqn) or _library_loop(eqn) is not None


def _step_clock(module):
    """``i64 step_clock(i64* times, i64 index, i64 since)``, made once per module (see
    ``ControlFlowFunction.clock``): one call after each step of a timed program, whose
    own code stays short (it is compiled unoptimised). The clock is the monotonic one of
    ``clock_gettime`` (the vDSO, ~20 ns), in nanoseconds."""
    name = "step_clock"
    if name in module.globals:
        return module.globals[name]
    times_type = I64.as_pointer()
    fn = ir.Function(module, ir.FunctionType(I64, [times_type, I64, I64]), name=name)
    fn.linkage = "internal"
    times, index, since = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    on, off = fn.append_basic_block("timed"), fn.append_basic_block("untimed")
    b.cbranch(b.icmp_unsigned("==", times, ir.Constant(times_type, None)), off, on)
    b.position_at_end(off)
    b.ret(ir.Constant(I64, 0))
    b.position_at_end(on)
    timespec = ir.LiteralStructType([I64, I64])
    clock = declare(module, "clock_gettime", I32, [I32, timespec.as_pointer()])
    reading = b.alloca(timespec)
    b.call(clock, [ir.Constant(I32, CLOCK_MONOTONIC), reading])
    seconds, nanos = (b.load(b.gep(reading, [ir.Constant(I32, 0), ir.Constant(I32, k)]),
                             typ=I64) for k in (0, 1))
    now = b.add(b.mul(seconds, ir.Constant(I64, 1_000_000_000)), nanos)
    with b.if_then(b.icmp_signed(">=", index, ir.Constant(I64, 0))):
        entry = b.gep(times, [index])
        b.store(b.add(b.load(entry, typ=I64), b.sub(now, since)), entry)
    b.ret(now)
    return fn


def _deliver(groups, direct, results):
    """How a sub-program of ``groups`` delivers its ``results``: updates ``direct`` ({value:
    the destination its step writes it into}) and returns the values whose regions hold
    results copied out at the end (they live until then). A result that is a view stays
    direct when a step computes its buffer's owner and nothing else delivers it: the owner
    is computed into the view's destination. Other views are copied at the end."""
    owner = buffer_plan.owners(groups)
    computed = {v for g in groups if g.kind != "view" for v in g.outputs}
    for view in [v for v in direct if v in owner]:
        root, dest = owner[view], direct.pop(view)
        if root in computed and root not in results and root not in direct:
            direct[root] = direct[view] = dest
    return {owner.get(a, a) for a in results} & computed - direct.keys()


def _library_loop(eqn):
    """The module of ``LIBRARY_LOOPS`` that emits ``eqn``, or None."""
    return next((m for m in LIBRARY_LOOPS if m.supports(eqn)), None)


def carried_body(eqn, subs):
    """(the SubProgram of ``subs`` that computes the next carries of the loop ``eqn``, how
    many constants its inputs start with, how many carries), or None when ``eqn`` is no
    loop."""
    ops = _operands(eqn, eqn.invars)
    if eqn.primitive is scan_p:
        return subs[0], len(ops["consts"]), len(ops["carry"])
    if eqn.primitive is while_p:
        return subs[1], len(ops["body consts"]), len(ops["carry"])
    return None


# How many iterations a while loop counts as where that matters before it runs (whether
# its kernels are worth vectorising: ``codegen.small``)
WHILE_RUNS = 100


def runs(eqn):
    """How many times the control-flow equation ``eqn`` runs its sub-programs in one run
    of its own: a scan's length, a branch once, a while loop's body and condition
    ``WHILE_RUNS`` times (unknown until it runs)."""
    if eqn.primitive is scan_p:
        return eqn.params["length"]
    return WHILE_RUNS if eqn.primitive is while_p else 1


def mark_carries_in_place(plan):
    """Mark the kernels of ``plan``'s loops, nested ones included, that update a carry in
    place (``buffer_plan.carries_in_place``): their code reads it through their output's
    pointer, so this runs before any kernel is generated."""
    for g in plan.groups:
        if g.kind != "loop":
            continue
        body = carried_body(g.eqns[0], g.subprograms)
        if body is not None:
            sub, n_consts, n_carries = body
            buffer_plan.carries_in_place(sub.closed.jaxpr, sub.plan.groups, n_consts,
                                         n_carries)
        for sub in g.subprograms:
            mark_carries_in_place(sub.plan)


def _operands(eqn, values):
    """``values`` (one per operand of the control-flow ``eqn``) grouped by the roles its
    primitive declares (``lax.standard.ControlLowering``)."""
    return eqn.primitive.lowerings["control"].split(eqn.params, values)


@dataclasses.dataclass(frozen=True)
class HostAddress:
    """A constant of a function that is the address of the module's host step ``index``
    (``ModuleBuilder.host_calls``): known only once the program is loaded."""
    index: int


@dataclasses.dataclass
class Flow:
    """What a caller of a ``ControlFlowFunction`` must pass: ``operands`` (jaxpr atoms; a
    Literal's io entry is unused), ``results`` (atoms: one buffer each), ``constants``
    (arrays, or ``HostAddress``es) and ``scratch_bytes``; ``polls`` says whether it polls
    the interrupt flag (it has a loop), ``host_calls`` which host steps it may call."""
    name: str
    operands: list
    results: list
    constants: list = dataclasses.field(default_factory=list)
    scratch_bytes: int = 0
    polls: bool = False
    host_calls: list = dataclasses.field(default_factory=list)
    timed: bool = False   # io starts with an int64 per step, or null: their times, in ns


class ControlFlowFunction:
    """Emits one function: a control-flow step's (``of_step``) or a whole program's
    (``of_program``, see ``executable``); ``flow`` says how to call it."""

    def __init__(self, mb, name, operands, results, body, whole_program=False):
        """``whole_program``: the function of ``of_program``, which is timed (``Flow``)
        and left unoptimised."""
        self.mb, self.loop_depth = mb, 0
        self.loops_over_elements = False   # it has loops of its own beyond its control flow
        self.flow = Flow(name, list(operands), list(results), timed=whole_program)
        self.plan, self.regions = buffer_plan.ScratchPlan(), {}  # {pointer: (offset, bytes)}
        fn = ir.Function(mb.module, ir.FunctionType(I32, [I8P.as_pointer(), I8P]), name=name)
        if whole_program:
            # A whole program's function is calls in sequence, thousands of lines for a
            # transformer's gradient: optimising it took 3x as long as compiling it plain,
            # on the critical path of a first call, for nothing its calls would notice.
            fn.attributes.add("noinline")
            fn.attributes.add("optnone")
        self.io, self.scratch_base = fn.args
        # Addresses are computed once, in a block of their own that runs first, so they
        # dominate every use whatever branch or loop asks for them.
        self.setup = ir.IRBuilder(fn.append_basic_block("setup"))
        start = fn.append_basic_block("start")
        self.interrupted = fn.append_basic_block("interrupted")
        ir.IRBuilder(self.interrupted).ret(ir.Constant(I32, 1))
        self.failed = fn.append_basic_block("failed")
        ir.IRBuilder(self.failed).ret(ir.Constant(I32, 2))
        self.b = ir.IRBuilder(start)
        self.e = ScalarEmitter(self.b)
        self.times = self.setup.bitcast(self.io_pointer(-1), I64.as_pointer()) \
            if whole_program else None
        ins = [self.constant(to_numpy(a.val), a.aval.dtype) if isinstance(a, Literal)
               else self.io_pointer(k) for k, a in enumerate(operands)]
        outs = [self.io_pointer(len(operands) + k) for k in range(len(results))]
        body(self, ins, outs)
        self.flow.scratch_bytes = self.plan.size
        self.b.ret(ir.Constant(I32, 0))
        self.setup.branch(start)
        if whole_program or not self.loops_over_elements:
            mb.light[name] = pipeline.CALLS   # calls, in loops at most

    @classmethod
    def of_step(cls, mb, group, name):
        """The function of a ``"loop"`` step of a plan."""
        eqn = group.eqns[0]
        return cls(mb, name, eqn.invars, eqn.outvars,
                   lambda f, ins, outs: f.emit(group, ins, outs))

    @classmethod
    def of_program(cls, mb, closed, plan, name, steps):
        """One function running every step of ``plan`` (of the ClosedJaxpr ``closed``) in
        order: its operands are the jaxpr's inputs, its results its outputs. Its control
        flow calls the functions of ``steps`` ({group index: ControlFlowFunction}, made for
        the program's steps): each loop's code is compiled once."""
        program = SubProgram("program", closed, plan)
        return cls(mb, name, closed.jaxpr.invars, closed.jaxpr.outvars,
                   lambda f, ins, outs: f.run(program, ins, outs, steps, timed=True),
                   whole_program=True)

    def poll_interrupt(self):
        """Return 1 (interrupted) if the interrupt flag is set (see ``interrupts``): at
        every iteration of a loop. Reading it costs a load and a branch, nothing next to
        the calls of a body; reading it every 1024 iterations instead let a body of a few
        milliseconds (a 512x512 product, a kernel just under the split threshold) run on
        for seconds after Ctrl-C."""
        b = self.b
        self.flow.polls = True
        module = self.mb.module
        flag = module.globals.get(support.INTERRUPT_FLAG) or \
            ir.GlobalVariable(module, I32, support.INTERRUPT_FLAG)
        go_on = b.append_basic_block("not_interrupted")
        b.cbranch(b.icmp_unsigned("!=", b.load_atomic(flag, "monotonic", 4),
                                  ir.Constant(I32, 0)), self.interrupted, go_on)
        b.position_at_end(go_on)

    # --- addresses
    def io_pointer(self, k):
        """The address in entry ``k`` of io (past the times' entry, -1, if timed)."""
        slot = self.setup.gep(self.io, [ir.Constant(I64, k + self.flow.timed)],
                              source_etype=I8P)
        return self.setup.load(slot, typ=I8P)

    def constant(self, value, dtype=None):
        f = self.flow
        f.constants.append(value if isinstance(value, HostAddress)
                           else np.asarray(value, dtype, order="C"))
        return self.io_pointer(len(f.operands) + len(f.results) + len(f.constants) - 1)

    def scratch(self, nbytes):
        """A region of the scratch block for a value computed from here on (``release``)."""
        offset = self.plan.take(nbytes)
        pointer = self.setup.gep(self.scratch_base, [ir.Constant(I64, offset)],
                                 source_etype=I8)
        self.regions[pointer] = (offset, nbytes)
        return pointer

    def release(self, pointer):
        """Give back the region of ``pointer`` (from ``scratch``): its value is dead from
        here on."""
        offset, nbytes = self.regions.pop(pointer)
        self.plan.give_back(offset, nbytes)
        if buffer_plan.POISON:
            self.memset(pointer, 0xFF, nbytes)

    def typed(self, pointer, dtype):
        return self.b.bitcast(pointer, mem_type(dtype).as_pointer())

    # --- data movement
    def copy(self, dst, src, nbytes):
        if nbytes:
            memcpy = declare(self.mb.module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                             [I8P, I8P, I64, I1])
            self.b.call(memcpy, [dst, src, ir.Constant(I64, nbytes), ir.Constant(I1, 0)])

    def memset(self, pointer, byte, nbytes):
        memset(self.b, pointer, byte, nbytes)

    def fill(self, pointer, value, dtype, n):
        """``n`` elements of ``value``: a ``memset`` when its bytes are all zero (a sum's
        identity, which the program's unoptimised code then need not loop over)."""
        if not np.asarray(value, dtype).tobytes().strip(b"\0"):
            self.memset(pointer, 0, n * np.dtype(dtype).itemsize)
            return
        typed, e = self.typed(pointer, dtype), self.e
        self.loops_over_elements = True
        for_loop(self.b, ir.Constant(I64, 0), ir.Constant(I64, n),
                 lambda i: e.store(typed, i, constant(value, dtype), dtype), "fill")

    def convert(self, dst, src, src_dtype, dst_dtype, n):
        e = self.e
        self.loops_over_elements = True
        to, frm = self.typed(dst, dst_dtype), self.typed(src, src_dtype)
        for_loop(self.b, ir.Constant(I64, 0), ir.Constant(I64, n),
                 lambda i: e.store(to, i, e.convert(e.load(frm, i, src_dtype), src_dtype,
                                                    dst_dtype), dst_dtype), "convert")

    # --- sub-programs
    def run(self, sub, ins, dests, compiled=None, timed=False):
        """Emit ``sub`` (a SubProgram) on the buffers ``ins`` of its inputs, delivering its
        results into ``dests``; its control flow is a call of the function of ``compiled``
        ({group index: ControlFlowFunction}) where there is one, else emitted here. With
        ``timed``, each step adds its time to its entry of the function's times, when it
        was given some."""
        j = sub.closed.jaxpr
        env = dict(zip(j.invars, ins))
        for v, c in zip(j.constvars, sub.closed.consts):
            env[v] = self.constant(to_numpy(c), v.aval.dtype)
        uses = Counter(a for a in j.outvars if isinstance(a, Var))
        direct = {a: d for a, d in zip(j.outvars, dests)
                  if isinstance(a, Var) and uses[a] == 1 and a not in env}
        results = {a for a in j.outvars if isinstance(a, Var)}
        copied = _deliver(sub.plan.groups, direct, results)
        dying = buffer_plan.lifetimes(sub.plan.groups, copied | direct.keys())
        clock = self.clock(-1, ir.Constant(I64, 0)) if timed else None
        for n, g in enumerate(sub.plan.groups):
            self.step(g, env, direct, compiled)
            if timed:
                clock = self.clock(n, clock)
            for v in dying.get(n, ()):
                self.release(env[v])
        for a, d in zip(j.outvars, dests):
            if not (isinstance(a, Var) and direct.get(a) is d):
                self.copy(d, self.atom(a, env), a.aval.nbytes)
        for a in copied:  # copied out above: dead now
            self.release(env[a])

    def step(self, g, env, direct, compiled):
        """Emit the plan group ``g``: a kernel call, a library call (BLAS, or a host step),
        control flow, or nothing (a view: its result is its operand's buffer)."""
        if g.kind == "kernel":
            self.kernel(g.kernel, env, direct)
            return
        eqn = g.eqns[0]
        if g.kind == "view":
            env[eqn.outvars[0]] = env[eqn.invars[0]]
            return
        if len(g.eqns) > 1:
            self.product_with_epilogue(g, env, direct)
            return
        ins = [self.atom(a, env) for a in eqn.invars]
        outs = [ins[0]] if g.in_place else [  # (an update in its operand's buffer)
            direct[v] if v in direct else self.scratch(v.aval.nbytes) for v in eqn.outvars]
        if g.kind not in ("library", "fallback"):
            if compiled and g.index in compiled:
                self.call(compiled[g.index], ins, outs)
            else:
                self.emit(g, ins, outs)
        elif blas.supports(eqn):
            blas.gemm(self.b, self.setup, eqn, *ins, *outs, choice=g.library_choice)
        elif _library_loop(eqn) is not None:
            self.library_loop(eqn, ins, outs)
        else:
            self.host_step(eqn, ins, outs, warn=g.kind == "fallback" and g.warns)
        env.update(zip(eqn.outvars, outs))

    def product_with_epilogue(self, g, env, direct):
        """Emit the product of ``g`` doing the work of its result's reader
        (``fusion._product_epilogues``): writing its result transposed, or adding it into
        ``g.accumulator``. It adds into that value's buffer (``in_place``, or when it is the
        destination already: a carry kept in one buffer), into the sum's destination when
        that holds it already (a donated input's: ``output_holds_accumulator``), else into
        a copy of it there."""
        product, reader = g.eqns
        out = reader.outvars[0]
        c = env[g.accumulator] if g.accumulator is not None else None
        where = c if g.in_place else direct[out] if out in direct else \
            self.scratch(out.aval.nbytes)
        if c is not None and where is not c and not g.output_holds_accumulator:
            self.copy(where, c, out.aval.nbytes)
        blas.gemm(self.b, self.setup, product, *(self.atom(a, env) for a in product.invars),
                  where, accumulate=c is not None,
                  permutation=reader.params["permutation"] if g.writes_as_reader else None,
                  choice=g.library_choice)
        env[out] = where

    # --- timing (``Executable.enable_timing``)
    def clock(self, index, since):
        """Add the time since ``since`` (a reading of the clock) to entry ``index`` of the
        times (``-1``: to none), and return the clock's reading now: ``step_clock``, which
        does nothing and returns 0 when the caller asked for no times."""
        return self.b.call(_step_clock(self.mb.module),
                           [self.times, ir.Constant(I64, index), since])

    def library_loop(self, eqn, ins, outs):
        """Emit the loops of the library equation ``eqn`` (``_library_loop``): here, or,
        in a whole program's function, which LLVM leaves unoptimised, as a function of
        their own that it optimises (a sort's or an argmax's loops ran 2-4x slower
        unoptimised)."""
        def body(f, ins, outs):
            f.loops_over_elements = True
            _library_loop(eqn).emit(f, eqn, *ins, *outs)
        if not self.flow.timed:
            body(self, ins, outs)
            return
        name = self.mb.module.get_unique_name(f"library_{eqn.primitive.name}")
        self.call(ControlFlowFunction(self.mb, name, eqn.invars, eqn.outvars, body), ins, outs)

    def host_step(self, eqn, ins, outs, warn):
        """Call back into Python to run ``eqn`` on the buffers ``ins`` and ``outs`` (see
        ``host_steps``); leave through ``failed`` if it raised."""
        self.callback(HostCall(eqn, warn, inside_loop=self.loop_depth > 0), ins + outs)

    def callback(self, call, pointers):
        """Call the Python side of ``call`` (a ``host_steps`` HostCall or SplitCall) with
        the array of ``pointers``; leave through ``failed`` if it raised."""
        b, calls = self.b, self.mb.host_calls
        calls.append(call)
        self.flow.host_calls.append(len(calls) - 1)
        holder = self.constant(HostAddress(len(calls) - 1))
        signature = ir.FunctionType(I32, [I8P.as_pointer()])
        target = b.inttoptr(b.load(self.typed(holder, np.uint64), typ=I64),
                            signature.as_pointer())
        status = b.call(target, [self.pointer_array(pointers)])
        go_on = b.append_basic_block("host_step_done")
        b.cbranch(b.icmp_unsigned("!=", status, ir.Constant(I32, 0)), self.failed, go_on)
        b.position_at_end(go_on)

    def pointer_array(self, pointers):
        """An ``i8**`` array (on the function's stack) holding ``pointers``."""
        return pointer_array(self.b, self.setup, pointers)

    def call(self, step, ins, outs):
        """Call ``step``'s function (another ControlFlowFunction of the module) on the
        buffers ``ins`` and ``outs``, with its constants and a part of the scratch block;
        leave as it did if it was interrupted or a host step of it failed."""
        b, flow = self.b, step.flow
        entries = ins + outs + [self.constant(c) for c in flow.constants]
        io = self.pointer_array(entries)
        block = self.scratch(flow.scratch_bytes)
        status = b.call(self.mb.module.globals[flow.name], [io, block])
        self.release(block)
        self.flow.polls = self.flow.polls or flow.polls
        self.flow.host_calls += flow.host_calls
        go_on, stopped = b.append_basic_block("step_done"), b.append_basic_block("stopped")
        b.cbranch(b.icmp_unsigned("==", status, ir.Constant(I32, 0)), go_on, stopped)
        b.position_at_end(stopped)
        b.cbranch(b.icmp_unsigned("==", status, ir.Constant(I32, 1)), self.interrupted,
                  self.failed)
        b.position_at_end(go_on)

    def atom(self, a, env):
        return self.constant(to_numpy(a.val), a.aval.dtype) if isinstance(a, Literal) \
            else env[a]

    def kernel(self, kernel, env, direct):
        """Call ``kernel`` (reductions start from their identity, and results accumulated
        in a wider dtype are converted afterwards, as ``executable.kernel_step`` does)."""
        fn = self.mb.module.globals[kernel.name]
        outs, converts = [], []
        for o in kernel.outputs:
            dtype, acc, n = o.var.aval.dtype, np.dtype(o.acc_dtype or o.var.aval.dtype), \
                math.prod(o.shape)
            where = direct[o.var] if o.var in direct else self.scratch(o.var.aval.nbytes)
            env[o.var] = where
            buf = where if acc == dtype else self.scratch(n * acc.itemsize)
            if o.combine:
                self.fill(buf, o.identity, acc, n)
            if buf is not where:
                converts.append((where, buf, acc, dtype, n))
            outs.append(buf)
        if math.prod(kernel.shape):
            pointers = outs + [env[v] for v in kernel.inputs]
            extent = kernel.shape[0] if kernel.shape else 1
            if runtime.pooled(kernel):  # on every core, through the worker pool
                self.pooled_kernel(kernel, pointers, extent)
            elif runtime.splits(kernel):  # on every core, through Python's threads
                self.callback(split_call(kernel, extent, self.mb.combiners.get(kernel.name)),
                              pointers)
            else:
                args = [self.b.bitcast(p, t) for p, t in zip(pointers, fn.function_type.args)]
                self.b.call(fn, args + [ir.Constant(I64, 0), ir.Constant(I64, extent)])
        for where, buf, acc, dtype, n in converts:
            self.convert(where, buf, acc, dtype, n)
            self.release(buf)

    def pooled_kernel(self, kernel, pointers, extent):
        """Run ``kernel`` on ``pointers`` on the worker pool, through its chunk function
        (``codegen.ModuleBuilder.chunk_function``); one whose reductions run over its outer
        axis in pieces, the partial results of all but the first in scratch blocks filled
        with their identity, then folded into its outputs in order by its combiner."""
        parallel_for = workers.declare_parallel_for(self.mb.module)
        chunk = self.mb.chunk_function(kernel)
        partial = runtime.partial_outputs(kernel)
        if not partial:
            self.b.call(parallel_for, [chunk, self.pointer_array(pointers),
                                       ir.Constant(I64, extent)])
            return
        n, blocks = runtime.pieces(kernel), []
        for position in partial:
            o = kernel.outputs[position]
            blocks.append(self.scratch((n - 1) * runtime.partial_bytes(o)))
            self.fill(blocks[-1], o.identity, o.acc_dtype or o.var.aval.dtype,
                      (n - 1) * math.prod(o.shape))
        self.b.call(parallel_for, [chunk, self.pointer_array(pointers + blocks),
                                   ir.Constant(I64, n)])
        combine = self.mb.module.globals[self.mb.combiners[kernel.name]]
        for k in range(n - 1):
            folded = []
            for position, block in zip(partial, blocks):
                at = k * runtime.partial_bytes(kernel.outputs[position])
                part = self.b.gep(block, [ir.Constant(I64, at)], source_etype=I8)
                folded += [pointers[position], part]
            self.b.call(combine, [self.b.bitcast(p, t) for p, t in
                                  zip(folded, combine.function_type.args)])
        for block in blocks:
            self.release(block)

    # --- control flow
    def emit(self, group, ins, outs):
        eqn = group.eqns[0]
        self.loop_depth += 1
        getattr(self, CONTROL_FLOW[eqn.primitive])(eqn, group.subprograms, ins, outs)
        self.loop_depth -= 1

    def carries(self, eqn, subs, init, first):
        """The second buffer of each carry of the loop ``eqn``; the first (the result's)
        starts at ``init``. A carry that the loop's body (``carried_body``) updates in place
        has none: its second buffer is its first (``buffer_plan.carries_in_place``)."""
        body, n_consts, n_carries = carried_body(eqn, subs)
        avals = [v.aval for v in eqn.outvars[:n_carries]]
        for dst, src, aval in zip(first, init, avals):
            self.copy(dst, src, aval.nbytes)
        kept = buffer_plan.carries_in_place(body.closed.jaxpr, body.plan.groups, n_consts,
                                            n_carries)
        return [f if k in kept else self.scratch(a.nbytes)
                for k, (f, a) in enumerate(zip(first, avals))]

    def swapped(self, i, first, second):
        """(current, next) carry buffers of iteration ``i``: even iterations read ``first``
        (a carry kept in one buffer is both)."""
        odd = self.b.trunc(i, I1)
        return ([f if f is s else self.b.select(odd, s, f) for f, s in zip(first, second)],
                [f if f is s else self.b.select(odd, f, s) for f, s in zip(first, second)])

    def last_carries(self, first, second, avals):
        """Copy the carries from their second buffers into their first (the results')."""
        for dst, src, aval in zip(first, second, avals):
            if src is not dst:
                self.copy(dst, src, aval.nbytes)

    def release_carries(self, first, second):
        for f, s in zip(first, second):
            if s is not f:
                self.release(s)

    def scan(self, eqn, subs, ins, outs):
        p, b = eqn.params, self.b
        ops = _operands(eqn, ins)
        consts, init, xs, length = ops["consts"], ops["carry"], ops["xs"], p["length"]
        nk = len(init)
        first = outs[:nk]
        second = self.carries(eqn, subs, init, first)

        def row(pointer, aval, t):
            size = math.prod(aval.shape[1:]) * np.dtype(aval.dtype).itemsize
            return b.gep(pointer, [b.mul(t, ir.Constant(I64, size))], source_etype=I8)

        def iteration(i):
            self.poll_interrupt()
            cur, nxt = self.swapped(i, first, second)
            t = b.sub(ir.Constant(I64, length - 1), i) if p["reverse"] else i
            x_rows = [row(x, a.aval, t) for x, a in zip(xs, _operands(eqn, eqn.invars)["xs"])]
            y_rows = [row(y, v.aval, t) for y, v in zip(outs[nk:], eqn.outvars[nk:])]
            self.run(subs[0], consts + cur + x_rows, nxt + y_rows)

        for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, length), iteration, "scan")
        if length % 2:  # the last iteration wrote the second buffers
            self.last_carries(first, second, [v.aval for v in eqn.outvars[:nk]])
        self.release_carries(first, second)

    def while_(self, eqn, subs, ins, outs):
        b, ops = self.b, _operands(eqn, ins)
        cond_consts, body_consts, init = ops["cond consts"], ops["body consts"], ops["carry"]
        avals = [v.aval for v in eqn.outvars]
        second = self.carries(eqn, subs, init, outs)
        flag = self.scratch(1)
        pre = b.block
        header, body, done = (b.append_basic_block(n) for n in ("while", "while.body",
                                                                  "while.done"))
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, name="iteration")
        i.add_incoming(ir.Constant(I64, 0), pre)
        cur, nxt = self.swapped(i, outs, second)
        self.run(subs[0], cond_consts + cur, [flag])
        b.cbranch(b.icmp_unsigned("!=", b.load(flag, typ=I8), ir.Constant(I8, 0)), body, done)
        b.position_at_end(body)
        self.poll_interrupt()
        self.run(subs[1], body_consts + cur, nxt)
        i.add_incoming(b.add(i, ir.Constant(I64, 1)), b.block)
        b.branch(header)
        b.position_at_end(done)
        with b.if_then(b.trunc(i, I1)):  # an odd number of iterations: the result is in second
            self.last_carries(outs, second, avals)
        self.release_carries(outs, second)
        self.release(flag)

    def cond(self, eqn, subs, ins, outs):
        b, last = self.b, ir.Constant(I32, len(subs) - 1)
        ops = _operands(eqn, ins)
        index = b.load(self.typed(ops["index"][0], np.int32), typ=I32)
        index = b.select(b.icmp_signed("<", index, ir.Constant(I32, 0)), ir.Constant(I32, 0),
                         b.select(b.icmp_signed(">", index, last), last, index))
        blocks = [b.append_basic_block(f"branch{k}") for k in range(len(subs))]
        done = b.append_basic_block("cond.done")
        switch = b.switch(index, blocks[-1])
        for k, (block, sub) in enumerate(zip(blocks, subs)):
            switch.add_case(ir.Constant(I32, k), block)
            b.position_at_end(block)
            self.run(sub, ops["operands"], outs)
            b.branch(done)
        b.position_at_end(done)


def split_call(kernel, extent, combiner):
    """The SplitCall running ``kernel`` over ``extent`` on every core (``runtime``)."""
    return SplitCall(kernel.name, len(kernel.inputs) + len(kernel.outputs), extent,
                     runtime.partials(kernel), combiner)

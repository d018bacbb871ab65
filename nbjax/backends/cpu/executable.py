"""A compiled program for the CPU: one native call, or its steps run one after the other.

``compile_plan`` turns a FusionPlan into an ``Executable``: every kernel of the plan (those
of compiled control flow included) goes into one LLVM module (one compilation), with one
function per control-flow step (``control_flow``) and, for a program of several steps, one
function running the whole program (``native_call``): its kernels, BLAS calls, library loops
(scatters, sorts...: ``control_flow.LIBRARY_LOOPS``) and control flow natively, a kernel
large enough to split between the cores through the worker threads, anything else as a
host step (both calls back into Python: ``host_steps``). A run of such a program is one
native call; while per-step timing is on, the call is given an array in which each step
adds its time (a loop's time is its whole run).

A program of one step runs as that step: values live in a list of slots (one per jaxpr
variable); the step reads its operands' slots and fills its results'. A kernel split
between the cores runs on worker threads; a library or fallback step calls the primitive's
reference implementation on our buffers.
"""

import ctypes
import dataclasses
import functools
import math
import sys
import time

import numpy as np

from ... import compiler
from ...compiler import KernelInfo, report
from ...core import HOST_DEVICE, Literal, host_result, to_numpy
from . import (blas, buffer_plan, codegen, control_flow, interrupts, library, python_entry,
               runtime)
from ..llvm.scaffold import release_module
from .host_steps import HostCall, host_step


class Executable(compiler.Executable):
    """A compiled program: ``program``, a ``ProgramCall`` (the whole program as one native
    call), or ``steps`` run one after the other on slots. A program that is one native call
    needs neither its jaxpr, nor its plan, nor its ``layout`` to run: loaded from the disk
    cache, it has them only once a report reads one (``report``, see the base class)."""
    timing_supported = True
    layout = compiler.reported("layout")

    def __init__(self, name, jaxpr, plan, rewrites, layout, steps, kernels, compile_times,
                 jit_module, program=None, report=None):
        super().__init__(name, "cpu", jaxpr, plan, rewrites, kernels, compile_times, report)
        self._layout = layout
        self._steps = steps
        self.jit_module = jit_module  # keeps the machine code alive
        self.program_call = program
        self._kernel = None
        if program is not None:
            self._program = program.call(jit_module)
            self._in_dtypes, self._donations = program.in_dtypes, program.donations
            self.runs_as = program.runs_as
            return
        self._program = None
        self._donations = layout.donations
        self.runs_as = _runs_as(f"{len(steps)} step{'s' * (len(steps) != 1)}", plan,
                                layout.host_calls)
        j = jaxpr.jaxpr
        self._slots = {v: i for i, v in enumerate(_all_vars(j))}
        self._n_slots = len(self._slots)
        self._const_slots = [(self._slots[v], np.asarray(to_numpy(c), order="C"))
                             for v, c in zip(j.constvars, jaxpr.consts)]
        self._env = [None] * self._n_slots  # where a run starts: the constants in place
        for slot, value in self._const_slots:
            self._env[slot] = value
        self._in = [(self._slots[v], v.aval.dtype) for v in j.invars]
        self._in_dtypes = [dtype for _, dtype in self._in]
        self._out = [(None, np.asarray(to_numpy(a.val))) if isinstance(a, Literal)
                     else (self._slots[a], None) for a in j.outvars]
        self._kernel = _whole_program_kernel(j, plan, steps)

    def run(self, *args):
        if self._kernel is not None and self.step_times is None:
            return self._kernel(*map(_as_buffer, args, self._in_dtypes))
        return self._run(args)

    def direct(self, consts, out_aval, fallback):
        """A jitted call of Arrays straight into the kernel's entry (see the base class):
        for a program that is one small kernel (``_whole_program_kernel``) with one output
        of ``out_aval``'s shape and dtype, which its ``python_entry`` computes."""
        entry = self._direct_entry(out_aval)
        return None if entry is None else _direct_call(self, entry, consts, out_aval, fallback)

    def checked_call(self, consts, out_aval):
        """The whole call in the kernel's checked call (see the base class and
        ``python_entry``), for the programs ``direct`` takes."""
        if self._direct_entry(out_aval) is None:
            return None
        name = self.plan.groups[0].kernel.name
        address = self.jit_module.address(name)
        return None if not address else self.layout.entries[name].checked_call(
            address, out_aval, HOST_DEVICE, functools.partial(_frozen_empty, out_aval), self,
            consts)

    def _direct_entry(self, out_aval):
        """The kernel's entry, if the program is one small kernel with one output of
        ``out_aval``'s shape and dtype, else None."""
        entry, shape, dtype = getattr(self._kernel, "entry_output", (None, None, None))
        if entry is None or (shape, dtype) != (out_aval.shape, out_aval.dtype) or \
                math.prod(shape) * dtype.itemsize > SMALL_OUTPUT:
            return None
        return entry

    def run_reusing(self, args, reuse):
        """``run``, writing outputs into the buffers of the donated arguments at ``reuse``
        where the program allows it (``buffer_plan.donations``, kept in ``layout``)."""
        given = {k: i for i, (k, _) in self._donations.items() if i in reuse}
        return self._run(args, given) if given else self.run(*args)

    def _run(self, args, given=None):
        """A run; ``given``: {output position: argument position} whose buffer the output
        takes (only the one-kernel program and the native program take them)."""
        given = given or {}
        if self._kernel is not None and self.step_times is None:
            buffers = list(map(_as_buffer, args, self._in_dtypes))
            return self._kernel(*buffers, given={k: buffers[i] for k, i in given.items()})
        if self._program is not None:
            buffers = list(map(_as_buffer, args, self._in_dtypes))
            given = {k: buffers[i] for k, i in given.items()}
            if self.step_times is None:
                return self._program(buffers, given=given)
            times = np.zeros(len(self.plan.groups), np.int64)
            outs = self._program(buffers, times, given)
            for n, nanoseconds in enumerate(times.tolist()):
                self.step_times.setdefault(n, []).append(nanoseconds * 1e-9)
            return outs
        env = self._env.copy()
        for (slot, dtype), a in zip(self._in, args):
            env[slot] = _as_buffer(a, dtype)
        if self.step_times is None:
            for step in self._steps:
                step(env)
        else:
            for n, step in enumerate(self._steps):
                t0 = time.perf_counter()
                step(env)
                self.step_times.setdefault(n, []).append(time.perf_counter() - t0)
        return [env[slot] if slot is not None else value.copy() for slot, value in self._out]


def _whole_program_kernel(jaxpr, plan, steps):
    """The ``kernel_call`` of a program that is one kernel taking the program's inputs and
    returning its outputs, in order (``x + 1``: the dispatch-bound case), else None."""
    if len(plan.groups) != 1 or plan.groups[0].kind != "kernel":
        return None
    loop = plan.groups[0].kernel
    if jaxpr.constvars or list(loop.inputs) != list(jaxpr.invars) or \
            [o.var for o in loop.outputs] != list(jaxpr.outvars):
        return None
    return steps[0].call


def _all_vars(jaxpr):
    seen = {}
    for v in list(jaxpr.constvars) + list(jaxpr.invars):
        seen.setdefault(v, None)
    for e in jaxpr.eqns:
        for v in e.outvars:
            seen.setdefault(v, None)
    return list(seen)


def _as_buffer(a, dtype):
    """An argument as a C-contiguous array of ``dtype`` (copied only when it is not one)."""
    if type(a) is np.ndarray and a.dtype == dtype and a.flags.c_contiguous:
        return a  # the common case, checked first: a jitted call's inputs
    a = np.asarray(to_numpy(a) if not isinstance(a, np.ndarray) else a)
    if a.dtype != dtype:
        a = a.astype(dtype)
    if not a.flags.c_contiguous:
        a = np.asarray(a, order="C")
    return a


# --- steps ---------------------------------------------------------------------------------

def kernel_call(fn, loop, combine=None, entry=None, chunk=None):
    """``call(*inputs)``: run a compiled kernel on its inputs' buffers, returning its
    outputs: allocate them (reductions start at their identity), call it with the buffers'
    addresses, on every core when it is large: on the worker pool through its ``chunk``
    function (an address), else on Python's threads (``combine`` folds the partial
    results of a reduction over the split axis, of each piece on the pool, of each
    thread's chunk on Python's threads). ``entry``, the kernel's ``python_entry``
    if it has one, runs it on one thread without ctypes. A kernel updating inputs in place
    (``loop.in_place``) is ``call(*inputs, given={output: buffer})``: each such output is
    written into the buffer given (a donated input's own), else into a copy of its input."""
    outputs = [(o.var.aval.dtype, tuple(o.shape), np.dtype(o.acc_dtype or o.var.aval.dtype),
                o.identity) for o in loop.outputs]
    size = int(np.prod(loop.shape, dtype=np.int64))
    partials = runtime.partials(loop)
    split = runtime.splits(loop) and (combine is not None or not partials)
    extent = loop.shape[0] if loop.shape else 1
    # Per output, precomputed for the run: (allocator, identity), the dtype to cast to.
    makes = [(_allocator(shape, buf_dtype, identity is not None), identity)
             for _, shape, buf_dtype, identity in outputs]
    casts = [None if buf_dtype == dtype else dtype for dtype, _, buf_dtype, _ in outputs]
    address = data_address
    in_place = {k: j for j, k in loop.in_place.items()}
    if len(makes) == 1 and makes[0][1] is None and casts == [None] and size and not split \
            and not in_place:
        (allocate, _), = makes

        if entry is not None:
            def call(*inputs, given=None):  # the common case at dispatch-bound sizes
                buf, pointer = allocate()
                if entry(buf, *inputs) is not None:  # (it refused an input: as before)
                    fn(pointer, *map(address, inputs), 0, extent)
                return [buf]
            call.entry_output = entry, outputs[0][1], outputs[0][0]
            return call

        def call(*inputs, given=None):
            buf, pointer = allocate()
            fn(pointer, *map(address, inputs), 0, extent)
            return [buf]
        return call

    def call(*inputs, given=None):
        results, pointers = [], []
        for k, (allocate, identity) in enumerate(makes):
            if k in in_place:  # the input's values, in the buffer given or a copy
                buf = given[k] if given and k in given else _copy(inputs[in_place[k]])
                ptr = address(buf)
            else:
                buf, ptr = allocate()
            if identity is not None:
                buf.fill(identity)
            results.append(buf)
            pointers.append(ptr)
        if size:
            pointers += map(address, inputs)
            if split and chunk and partials:
                runtime.run_pieces_on_pool(chunk, pointers, loop, combine)
            elif split and chunk:
                runtime.run_on_pool(chunk, pointers, extent)
            elif split:
                runtime.run_split(fn, pointers, extent, partials, combine)
            else:
                fn(*pointers, 0, extent)
        return [buf if cast is None else buf.astype(cast) for buf, cast in zip(results, casts)]
    return call


def _copy(buf):
    """A new (pooled) buffer holding ``buf``'s values."""
    out, pointer = runtime.pool.empty_with_address(buf.shape, buf.dtype)
    ctypes.memmove(pointer, data_address(buf), buf.nbytes)
    return out


def kernel_step(fn, loop, slots, combine=None, entry=None, chunk=None):
    """Run a compiled kernel (``kernel_call``) on the slots' buffers."""
    in_slots, out_slots = [slots[v] for v in loop.inputs], [slots[o.var] for o in loop.outputs]
    call = kernel_call(fn, loop, combine, entry, chunk)

    def step(env):
        for slot, buf in zip(out_slots, call(*[env[s] for s in in_slots])):
            env[slot] = buf
    step.call = call
    return step


# --- output buffers and addresses at dispatch-bound sizes ----------------------------------

SMALL_OUTPUT = 1 << 16  # bytes: outputs up to this size are recycled by their step


def _allocator(shape, dtype, fill):
    """A function returning (a new output buffer, its address) for one kernel output: the
    pool for large outputs, a ``_Recycler`` for small ones (``fill``: the step writes it with
    NumPy before the kernel runs, so it must be writeable)."""
    if math.prod(shape) * dtype.itemsize > SMALL_OUTPUT:
        return lambda: runtime.pool.empty_with_address(shape, dtype)
    return _Recycler(shape, dtype, fill)


class _Recycler:
    """The buffers of one small kernel output, each reused by a later run of the step as
    soon as nothing else refers to it (typically: the caller dropped the previous result).

    At a few elements, the pool's lock and search cost more than the kernel. Here the step
    keeps the buffers it handed out in ``spare`` and takes one back with ``list.pop`` (atomic,
    so two threads running one step never share a buffer); it is reused if its reference
    count shows that nobody else holds it (no Array, view or buffer export of it: a view of
    it has it as its ``base``). The kernel writes through its address, so a buffer frozen by
    the Array that held it needs no unfreezing, unless the step fills it first.
    """

    __slots__ = ("shape", "dtype", "fill", "spare")

    def __init__(self, shape, dtype, fill):
        self.shape, self.dtype, self.fill, self.spare = shape, dtype, fill, []

    def __call__(self):
        try:
            buf, ptr = self.spare.pop()
        except IndexError:
            buf = None
        if buf is None or sys.getrefcount(buf) != _FREE_REFS:
            buf = np.empty(self.shape, self.dtype)
            ptr = data_address(buf)
        elif self.fill:
            buf.setflags(write=True)
        self.spare.append((buf, ptr))
        return buf, ptr


def _direct_call(executable, entry, consts, aval, fallback):
    """``Executable.direct``: ``call(args)`` runs the kernel's ``entry`` on ``args``, Arrays
    (whose NumPy arrays it reads) and NumPy arrays, after the ``consts``, into a recycled output
    buffer, and makes the result Array (``host_result``). The entry checks every array, so
    an Array it cannot take as it is (on a device, deleted, non-contiguous, of another
    dtype) makes it refuse, and the call is ``fallback(args)``, which converts them; so is
    a call while ``executable`` times its steps.

    Results are read-only, so an output buffer is frozen once, when made, and reused by a
    later call as soon as nothing but ``spares`` refers to it: there are two, so that
    ``x = f(x)`` alternates between them. A buffer is checked after it is bound to a local
    (as ``_Recycler`` does): a thread that finds it free holds the only other reference."""
    spares = [_frozen_empty(aval), _frozen_empty(aval)]
    new, refs = host_result, sys.getrefcount

    def call(args):
        if executable.step_times is None:
            buf = spares[0]
            if refs(buf) != _SPARE_REFS:
                spares.reverse()
                buf = spares[0]
                if refs(buf) != _SPARE_REFS:
                    buf = spares[0] = _frozen_empty(aval)
            if entry(buf, *consts, *args) is None:
                return new(buf, aval)
        return fallback(args)
    return call


def _frozen_empty(aval):
    buf = np.empty(aval.shape, aval.dtype)
    buf.flags.writeable = False
    return buf


def _refcount_of_a_spare():
    spares = [np.empty(1)]
    buf = spares[0]
    return sys.getrefcount(buf)


_SPARE_REFS = _refcount_of_a_spare()  # a buffer only ``spares`` and a local refer to


def _refcount_of_a_local():
    buf = np.empty(1)
    return sys.getrefcount(buf)


_FREE_REFS = _refcount_of_a_local()  # a buffer only a local variable refers to


# The address of an array's first element (the portable way if the layout is not as expected).
data_address = python_entry.data_field if python_entry.USABLE else runtime.address


def native_call(fn, flow, host_steps, entry=None, in_place=None):
    """``call(buffers)``: one call of the compiled function of ``flow`` (a
    ``control_flow.Flow``: a control-flow step or a whole program) on the operands'
    ``buffers``, returning new result buffers; it passes the addresses of the operands,
    results and constants, and a scratch block. ``host_steps`` are the module's.
    ``entry``, the function's ``python_entry`` if it has one, is called in place of ``fn``
    with the arrays themselves.

    ``call(buffers, given={result: buffer})`` writes those results into the buffers given
    (donated operands'). ``in_place`` ({result: operand}, a program's donations updated in
    place by a kernel): such a result's buffer must hold the operand when the function
    starts: the buffer given, else a copy of the operand."""
    in_place = in_place or {}
    results = [_allocator(tuple(a.aval.shape), np.dtype(a.aval.dtype), False)
               for a in flow.results]
    constants = [np.array(host_steps[c.index].address, np.uint64)
                 if isinstance(c, control_flow.HostAddress) else c for c in flow.constants]
    constant_addresses = [data_address(c) for c in constants]
    scratch = _allocator((flow.scratch_bytes,), np.dtype(np.uint8), False) \
        if flow.scratch_bytes else lambda: (None, None)
    addresses = ctypes.c_void_p * (flow.timed + len(flow.operands) + len(results)
                                   + len(constants))
    address, address_of, polls = data_address, ctypes.addressof, flow.polls
    mine = [host_steps[k] for k in dict.fromkeys(flow.host_calls)]

    def call(buffers, times=None, given=None):
        """``times``: where a timed flow adds each step's time (nanoseconds, int64)."""
        if given or in_place:
            outs = [_result(k, allocate, buffers, given or {}, in_place)
                    for k, allocate in enumerate(results)]
        else:
            outs = [allocate() for allocate in results]
        block, block_address = scratch()  # ``block`` keeps the scratch alive during the call
        if polls:
            interrupts.arm()
        if entry is not None:
            status = entry(*([times] if flow.timed else []), *buffers,
                           *[buf for buf, _ in outs], *constants, block)
        else:
            timing = [None if times is None else address(times)] if flow.timed else []
            io = addresses(*timing, *map(address, buffers), *[p for _, p in outs],
                           *constant_addresses)
            status = fn(address_of(io), block_address)
        if status:
            _failed(status, mine)
        return [buf for buf, _ in outs]
    call.constants = constants  # their buffers must live as long as the call
    call.host_steps = mine  # and so must the functions native code calls back
    return call


def _result(k, allocate, buffers, given, in_place):
    """(buffer, address) of result ``k`` of a ``native_call`` (see there)."""
    if k in given:
        buf = given[k]
    elif k in in_place:
        buf = _copy(buffers[in_place[k]])
    else:
        return allocate()
    return buf, data_address(buf)


def _failed(status, host_steps):
    if status == 1:
        interrupts.raise_interrupt()
    # a host step failed: raise its exception (see ``host_steps``)
    raise next(e for e in (s.take_error() for s in host_steps) if e is not None)


_UNUSED = np.zeros(1)  # what a Literal operand's io entry points at (the code never reads it)


def control_step(fn, flow, host_steps, slots, entry=None):
    """Run a compiled control-flow step: its ``native_call`` on the slots' buffers."""
    operands = [None if isinstance(a, Literal) else slots[a] for a in flow.operands]
    results = [slots[v] for v in flow.results]
    call = native_call(fn, flow, host_steps, entry)

    def step(env):
        outs = call([_UNUSED if s is None else env[s] for s in operands])
        for slot, buf in zip(results, outs):
            env[slot] = buf
    return step


# A program of one library step is a native program only while the step is small (flops
# plus bytes accessed), or a product the register tiles compute faster than BLAS: the
# native call saves the reference implementation's NumPy calls, tens of microseconds,
# which compiling the program (about 10 ms) repays only then. On batched_matvec's product
# by BLAS (26 GFLOP) it added 10-20 ms to the first call and nothing after; by the tiles,
# on two Zen 4 cores, 136 ms against OpenBLAS's 155-162.
SMALL_LIBRARY_STEP = 1 << 26


def native_library_step(plan):
    """Whether ``plan`` is one library step that native code calls (a BLAS product, a
    scatter, a sort...) and that repays compiling: a small one, whose native call skips
    the reference implementation's NumPy calls (130 -> 105 us on a 32x256 by 256x1024
    product), or a product the register tiles compute (``blas.takes_tiles``)."""
    if len(plan.groups) != 1 or plan.groups[0].kind != "library":
        return False
    eqn = plan.groups[0].eqns[0]
    cost = report.equation_cost(0, eqn)
    return control_flow.native_library_call(eqn) and (
        cost.flops + cost.bytes_read + cost.bytes_written < SMALL_LIBRARY_STEP
        or blas.takes_tiles(eqn))


def _kernels_of(plan, runs=None):
    """(LoopKernel, how many times compiled control flow runs it in a call: None for a
    step of its own) for the kernels of a plan and, recursively, of its compiled control
    flow (``control_flow.runs``)."""
    for g in plan.groups:
        if g.kind == "kernel":
            yield g.kernel, runs
        for sub in g.subprograms:
            yield from _kernels_of(sub.plan, (runs or 1) * control_flow.runs(g.eqns[0]))


@dataclasses.dataclass
class Layout:
    """What code generation made of a plan, besides its LLVM module, that running the
    module needs: the kernels (each ``(LoopKernel, whether it is a step of its own, its
    combiner's name or None)``) with their code as generated (``texts``) and optimised
    (``optimised_texts``), the control-flow functions (``flows``: {plan group index or
    "program": ``control_flow.Flow``}) and the host steps they call (``host_calls``).
    ``externals`` names the symbols the module takes from the process (BLAS, libm...),
    ``entries`` gives the functions Python calls through a ``python_entry`` ({name: how}),
    ``donations`` the outputs that may take donated inputs' buffers, ``same_code`` the
    kernels that call an earlier kernel of the same code (``ModuleBuilder.add_kernel``).
    Together with the plan it pickles: the disk cache keeps it with the machine code."""
    kernels: list
    texts: list
    flows: dict
    host_calls: list
    externals: list
    entries: dict = dataclasses.field(default_factory=dict)
    optimised_texts: dict = dataclasses.field(default_factory=dict)
    # {donated input position: (output position, in place)}: ``buffer_plan.donations``
    donations: dict = dataclasses.field(default_factory=dict)
    same_code: dict = dataclasses.field(default_factory=dict)


def compile_plan(name, optimised, plan, rewrites, timer, donated=frozenset()):
    """The Executable of a FusionPlan (``optimised`` is the ClosedJaxpr it plans), whose
    calls give away the buffers of the inputs at ``donated``."""
    donations = buffer_plan.donations(optimised.jaxpr, plan.groups, donated)  # (marks
    # the kernels updating a donated input in place)
    layout, ir_text, light = generate(name, optimised, plan, timer)
    layout.donations = donations
    jit_module = None
    if ir_text is not None:
        library.provide(layout.externals)  # (the functions the module calls, made first)
        jit_module = runtime.JitModule(ir_text, timer, light)
        with timer("machine_code"):
            layout.optimised_texts = {loop.name: _optimised_text(jit_module, loop.name, layout)
                                      for loop, _, _ in layout.kernels}
    return assemble(name, optimised, plan, rewrites, layout, jit_module, timer.times)


def _optimised_text(jit_module, name, layout):
    """The optimised IR of kernel ``name``: that of the kernel whose code it runs."""
    same = layout.same_code.get(name)
    if same is None:
        return jit_module.function_ir(name)
    return f"; {name} runs the code of {same}:\n" + jit_module.function_ir(same)


def generate(name, optimised, plan, timer):
    """(Layout, LLVM IR text of the module or None when the plan has no kernel or loop, the
    functions LLVM's light tiers compile as {name: tier}): every kernel of the plan and of
    its control flow, a function per control-flow step and, for a program of several
    steps, one function running it all (see the module docstring)."""
    loops = list(_kernels_of(plan))
    controls = [g for g in plan.groups if g.kind == "loop"]
    whole = len(plan.groups) > 1 or native_library_step(plan)
    if not (loops or controls or whole):
        return Layout([], [], {}, [], []), None, {}
    with timer("codegen"):
        control_flow.mark_carries_in_place(plan)
        mb = codegen.ModuleBuilder(name)
        texts = [mb.add_kernel(loop, runs) for loop, runs in loops]
        kernels = [(loop, runs is None, mb.add_combiner(loop) if runtime.splits(loop) else None)
                   for loop, runs in loops]
        for loop, _ in loops:
            if runtime.pooled(loop):
                mb.chunk_function(loop)
        functions = {g.index: control_flow.ControlFlowFunction.of_step(
            mb, g, f"control_{g.index}") for g in controls}
        if whole:
            functions["program"] = control_flow.ControlFlowFunction.of_program(
                mb, optimised, plan, "program", dict(functions))
        flows = {key: f.flow for key, f in functions.items()}
        entries = _entries(plan, flows) if python_entry.USABLE else {}
        ir_text = mb.text()
        layout = Layout(kernels, texts, flows, mb.host_calls, runtime.externals(mb.module),
                        entries, same_code=mb.same_code)
        release_module(mb.module)
    return layout, ir_text, mb.light


def _entries(plan, flows):
    """{name: its ``python_entry``} for the functions Python calls: the whole program's,
    else the one step's (a kernel on one thread, or control flow)."""
    if "program" in flows or len(plan.groups) != 1:
        called = [flows["program"]] if "program" in flows else []
    else:
        group = plan.groups[0]
        if group.kind == "kernel":
            kernel = group.kernel
            entry = None if runtime.splits(kernel) else python_entry.KernelEntry.of(
                kernel.shape[0] if kernel.shape else 1, _entry_arrays(kernel))
            return {kernel.name: entry} if entry is not None else {}
        called = [flows[group.index]] if group.kind == "loop" else []
    return {flow.name: python_entry.FlowEntry(
        flow.timed + len(flow.operands) + len(flow.results) + len(flow.constants))
        for flow in called}


def _entry_arrays(loop):
    """``(shape, dtype)`` of each buffer a kernel takes: its outputs as ``kernel_call``
    allocates them, then its inputs."""
    return [(tuple(o.shape), np.dtype(o.acc_dtype or o.var.aval.dtype)) for o in loop.outputs] \
        + [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in loop.inputs]


def assemble(name, optimised, plan, rewrites, layout, jit_module, compile_times,
             report=None):
    """The Executable running ``plan`` with the functions of ``jit_module`` (the machine
    code of ``layout``'s module); ``report``: see ``compiler.Executable``. A program that
    is one native call needs no steps: none are made (a CNN step's 42 kernels took a
    millisecond of its load from the disk cache)."""
    kernels = kernel_infos(layout)
    if "program" in layout.flows:
        return Executable(name, optimised, plan, rewrites, layout, [], kernels, compile_times,
                          jit_module, ProgramCall.of(optimised, plan, layout), report)
    host_steps = [host_step(call, jit_module) for call in layout.host_calls]
    steps = _steps(optimised, plan, layout, jit_module, host_steps)
    return Executable(name, optimised, plan, rewrites, layout, steps, kernels, compile_times,
                      jit_module, None, report)


def assemble_call(name, program, jit_module, compile_times, load):
    """The Executable of a program that is one native call (``program``, a
    ``ProgramCall``) with the functions of ``jit_module``, from the disk cache: ``load()``
    returns the rest, (optimised jaxpr, plan, layout, rewrites), when a report first asks."""
    def report():
        optimised, plan, layout, rewrites = load()
        return {"jaxpr": optimised, "plan": plan, "layout": layout,
                "kernels": kernel_infos(layout), "rewrites": rewrites}
    return Executable(name, None, None, (), None, [], (), compile_times, jit_module, program,
                      report)


def kernel_infos(layout):
    """A ``KernelInfo`` per kernel of ``layout``, with its IR as generated and optimised."""
    return [KernelInfo(loop.name, loop.eqns, loop, {
        "LLVM IR": text, "optimised LLVM IR": layout.optimised_texts[loop.name]})
        for (loop, _, _), text in zip(layout.kernels, layout.texts)]


@dataclasses.dataclass
class ProgramCall:
    """What calling a program that is one native call needs, and no more, so that the disk
    cache loads it first and the rest (jaxpr, plan, ``Layout``: 0.8-1 ms of unpickling for
    a CNN step or a blur) only when a report asks: ``flow``, the program's
    ``control_flow.Flow``; ``entry``, its ``python_entry`` (or None); ``host_calls`` and
    ``donations``, the ``Layout``'s; ``in_dtypes``, the inputs' dtypes; ``runs_as``, the
    ``Executable``'s."""
    flow: object
    entry: object
    host_calls: list
    donations: dict
    in_dtypes: list
    runs_as: str

    @classmethod
    def of(cls, jaxpr, plan, layout):
        """The call of the program of ``layout`` (of ``plan``, of the ClosedJaxpr ``jaxpr``)."""
        flow = layout.flows["program"]
        return cls(flow, layout.entries.get(flow.name), layout.host_calls, layout.donations,
                   [v.aval.dtype for v in jaxpr.jaxpr.invars],
                   _runs_as("one native call", plan, layout.host_calls))

    def call(self, jit_module):
        """The ``native_call`` of the program with the functions of ``jit_module``."""
        host_steps = [host_step(call, jit_module) for call in self.host_calls]
        in_place = {k: i for i, (k, updated) in self.donations.items() if updated}
        name = self.flow.name
        entry = jit_module.entry(name, self.entry) if self.entry is not None else None
        return native_call(jit_module.function(name, 2, bounds=False, status=True), self.flow,
                           host_steps, entry, in_place)


def _runs_as(how, plan, host_calls):
    """``Executable.runs_as``: ``how`` (one native call, or steps), the kernels split
    between the cores and the callbacks into Python."""
    split = [g.kernel.name for g in plan.groups
             if g.kind == "kernel" and runtime.splits(g.kernel)]
    callbacks = [call.eqn.primitive.name for call in host_calls if isinstance(call, HostCall)]
    return how + (f" ({', '.join(split)} split between the cores)" if split else "") + (
        f", calling back into Python for {', '.join(callbacks)}" if callbacks else "")


def _steps(optimised, plan, layout, jit_module, host_steps):
    """The steps running ``plan`` one after the other, on slots (see ``Executable``)."""
    slots = {v: i for i, v in enumerate(_all_vars(optimised.jaxpr))}
    functions = {}
    for loop, _, combiner in layout.kernels:
        functions[loop.name] = jit_module.function(
            loop.name, len(loop.inputs) + len(loop.outputs))
        if combiner:
            functions[combiner] = jit_module.function(
                combiner, 2 * len(runtime.partial_outputs(loop)), bounds=False)
    calls = {key: jit_module.function(flow.name, 2, bounds=False, status=True)
             for key, flow in layout.flows.items()}
    entries = {name: jit_module.entry(name, how) for name, how in layout.entries.items()}
    combiners = {loop.name: combiner for loop, _, combiner in layout.kernels}
    steps = []
    for g in plan.groups:
        if g.kind == "kernel":
            chunk = jit_module.chunk(g.kernel.name) if runtime.pooled(g.kernel) else None
            steps.append(kernel_step(functions[g.kernel.name], g.kernel, slots,
                                     functions.get(combiners[g.kernel.name]),
                                     entries.get(g.kernel.name), chunk))
        elif g.kind == "loop":
            flow = layout.flows[g.index]
            steps.append(control_step(calls[g.index], flow, host_steps, slots,
                                      entries.get(flow.name)))
        else:
            steps.append(_in_sequence([compiler.reference_step(
                eqn, slots, g.kind == "fallback" and g.warns,
                f"nbjax cpu backend: no kernel for {eqn.primitive.name}; it runs on "
                "the reference backend") for eqn in g.eqns]))
    return steps


def _in_sequence(steps):
    """One step running ``steps`` in order (a product and the add it accumulates into)."""
    if len(steps) == 1:
        return steps[0]

    def step(env):
        for one in steps:
            one(env)
    return step

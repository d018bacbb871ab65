"""A compiled program for the CPU: its steps, run one after the other on NumPy buffers.

``compile_plan`` turns a FusionPlan into an ``Executable``: every kernel of the plan goes into
one LLVM module (one compilation), library and fallback steps call the primitive's reference
implementation on our buffers. Values live in a list of slots (one per jaxpr variable) during
a run; each step reads its operands' slots and fills its results'.
"""

import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ...core import EvalTrace, Literal, set_current_trace, to_numpy
from . import codegen, runtime


@dataclass
class KernelInfo:
    """What the notebook shows about a kernel."""
    name: str
    llvm_ir: str            # as generated
    optimised_ir: str       # after LLVM's passes
    eqns: list
    loop: object            # the LoopKernel (backend-neutral IR)


class Timer:
    """Accumulates seconds per phase: ``with timer("codegen"): ...``."""

    def __init__(self):
        self.times = {}

    @contextmanager
    def __call__(self, phase):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times[phase] = self.times.get(phase, 0.0) + time.perf_counter() - t0


class Executable:
    def __init__(self, name, jaxpr, consts, plan, rewrites, steps, kernels, compile_times,
                 jit_module):
        self.name = name
        self.jaxpr = jaxpr          # the optimised ClosedJaxpr
        self.plan = plan
        self.rewrites = rewrites
        self.kernels = kernels
        self.compile_times = compile_times
        self.step_times = None      # {step index: [seconds, ...]} when timing is on
        self._steps = steps
        self._jit_module = jit_module  # keeps the machine code alive
        j = jaxpr.jaxpr
        self._slots = {v: i for i, v in enumerate(_all_vars(j))}
        self._n_slots = len(self._slots)
        self._const_slots = [(self._slots[v], np.ascontiguousarray(to_numpy(c)))
                             for v, c in zip(j.constvars, consts)]
        self._in = [(self._slots[v], v.aval.dtype) for v in j.invars]
        self._out = [(None, np.asarray(to_numpy(a.val))) if isinstance(a, Literal)
                     else (self._slots[a], None) for a in j.outvars]

    def enable_timing(self, on=True):
        """Record each step's run time in ``step_times`` (off by default: it costs a clock
        read per step)."""
        self.step_times = {} if on else None

    def run(self, *args):
        env = [None] * self._n_slots
        for slot, value in self._const_slots:
            env[slot] = value
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

    def as_text(self):
        return "\n\n".join([self.plan.report()] + [k.loop.pretty() for k in self.kernels])


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
    a = np.asarray(to_numpy(a) if not isinstance(a, np.ndarray) else a)
    if a.dtype != dtype:
        a = a.astype(dtype)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


# --- steps ---------------------------------------------------------------------------------

def kernel_step(fn, loop, slots):
    """Run a compiled kernel: allocate its outputs (reductions start at their identity),
    call it with the buffers' addresses, on two threads when it is large."""
    in_slots = [slots[v] for v in loop.inputs]
    outputs = [(slots[o.var], o.var.aval.dtype, tuple(o.shape), np.dtype(o.acc_dtype or
                                                                       o.var.aval.dtype),
                o.identity) for o in loop.outputs]
    size = int(np.prod(loop.shape, dtype=np.int64))
    split = loop.split_axis is not None and size >= runtime.SPLIT_THRESHOLD \
        and loop.shape[0] >= 2
    extent = loop.shape[0] if loop.shape else 1
    empty, address = runtime.pool.empty_with_address, runtime.address

    def step(env):
        results, pointers = [], []
        for slot, dtype, shape, buf_dtype, identity in outputs:
            buf, ptr = empty(shape, buf_dtype)
            if identity is not None:
                buf.fill(identity)
            results.append(buf)
            pointers.append(ptr)
        if size:
            pointers += [address(env[s]) for s in in_slots]
            if split:
                runtime.run_split(fn, pointers, extent)
            else:
                fn(*pointers, 0, extent)
        for (slot, dtype, *_), buf in zip(outputs, results):
            env[slot] = buf if buf.dtype == dtype else buf.astype(dtype)
    return step


def reference_step(eqn, slots, warn):
    """Run one equation with its reference implementation on our buffers."""
    reads = [(None, to_numpy(a.val)) if isinstance(a, Literal) else (slots[a], None)
             for a in eqn.invars]
    out_slots = [slots[v] for v in eqn.outvars]
    out_dtypes = [v.aval.dtype for v in eqn.outvars]
    prim, params = eqn.primitive, eqn.params
    warned = []

    def step(env):
        if warn and not warned:
            warnings.warn(f"nbjax cpu backend: no kernel for {prim.name}; it runs on the "
                          "reference backend", stacklevel=4)
            warned.append(True)
        args = [env[s] if s is not None else v for s, v in reads]
        with set_current_trace(EvalTrace()):
            out = prim.bind(*args, **params)
        outs = out if prim.multiple_results else [out]
        for slot, dtype, o in zip(out_slots, out_dtypes, outs):
            env[slot] = np.ascontiguousarray(np.asarray(to_numpy(o)), dtype=dtype)
    return step


def compile_plan(name, optimised, plan, rewrites, timer):
    """The Executable of a FusionPlan (``optimised`` is the ClosedJaxpr it plans)."""
    slots = {v: i for i, v in enumerate(_all_vars(optimised.jaxpr))}
    loops = [g.kernel for g in plan.groups if g.kind == "kernel"]
    jit_module, kernels, functions = None, [], {}
    if loops:
        with timer("codegen"):
            mb = codegen.ModuleBuilder(name)
            texts = [mb.add_kernel(loop) for loop in loops]
            ir_text = str(mb.module)
        jit_module = runtime.JitModule(ir_text, timer)
        with timer("machine_code"):
            for loop, text in zip(loops, texts):
                n_ptr = len(loop.inputs) + len(loop.outputs)
                functions[loop.name] = jit_module.function(loop.name, n_ptr)
                kernels.append(KernelInfo(loop.name, text, jit_module.function_ir(loop.name),
                                          loop.eqns, loop))
    steps = []
    for g in plan.groups:
        if g.kind == "kernel":
            steps.append(kernel_step(functions[g.kernel.name], g.kernel, slots))
        else:
            steps.append(reference_step(g.eqns[0], slots, warn=g.kind == "fallback"))
    return Executable(name, optimised, optimised.consts, plan, rewrites, steps, kernels,
                      dict(timer.times), jit_module)

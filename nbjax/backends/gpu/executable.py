"""A compiled program for the GPU: its steps run one after the other on a ``Device``.

``compile_plan`` puts every kernel of a FusionPlan into one module, loads it on the device
once, and makes one step per plan group; a run copies the operands to the device (except
Arrays already there: their buffers are used as they are), runs the steps (kernel launches
and library calls are queued on the device's current stream: the host does not wait for
them) and returns the results as Arrays on the device (``Array.on_device`` of a
``Buffer``): they are copied to the host only when their values are read, and
``block_until_ready`` waits for the stream.

A ``Device`` is what the steps need of the machine: ``xp`` (an array module: CuPy on a GPU,
NumPy in the host emulation), ``put``/``get`` (copies to and from it), ``synchronize`` and
``idle`` (waiting for, and asking about, the work queued), ``array_device`` (the
``core.GpuDevice`` its Arrays report) and ``load`` (kernels to launch functions); it is a
``Runtime``, which makes ``device_put``'s Arrays of it. The steps
are the same code on both, so the host emulation (``emulate.HostDevice``) tests this module
too, up to what CuPy itself does.

Steps:

- a kernel: its outputs allocated (reductions' filled with their identity), one launch of
  ``grid`` blocks of ``block`` threads (a grid-stride loop inside covers any size); a
  kernel whose reductions run in phases (``reduction``) is one such step per phase, the
  scratch buffers between them taking slots of their own;
- ``dot_general`` on float or complex operands of the result's dtype: ``xp.einsum`` (cuBLAS
  under CuPy);
- a primitive with an ``"array module"`` lowering (``fft``, ``cumsum``, ``cumprod``,
  ``sort``, ``top_k``): that, with the device's array module (CuPy's own functions);
- ``scan``, ``while`` and ``cond``: a loop (a choice) on the host around their bodies
  compiled for the device, the values staying there (``control``);
- anything else (other library steps, primitives without a kernel): the
  primitive's reference implementation on the host, its operands copied from the device
  and its results back (named in the fusion report: ``GpuTarget.library_reason``).
"""

import math
import string

import numpy as np

from ... import compiler
from ...compiler import KernelInfo
from ...core import Array, Literal, Var, to_numpy
from . import control
from .scaffold import PartialsKernel, parallel_size

EINSUM_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64,
                                                np.complex128))


class Executable(compiler.Executable):
    def __init__(self, name, device, jaxpr, plan, rewrites, slots, steps, kernels,
                 compile_times):
        super().__init__(name, "gpu", jaxpr, plan, rewrites, kernels, compile_times)
        self.device, self._steps = device, steps
        self.runs_as = f"{len(steps)} step{'s' * (len(steps) != 1)} on the {device.name}"
        j = jaxpr.jaxpr
        self._slots = slots
        self._env = [None] * len(self._slots)
        for v, c in zip(j.constvars, jaxpr.consts):
            self._env[self._slots[v]] = device.put(np.asarray(to_numpy(c), order="C"))
        self._in = [(self._slots[v], np.dtype(v.aval.dtype)) for v in j.invars]
        self._out = [(None, np.asarray(to_numpy(a.val)), a.aval) if isinstance(a, Literal)
                     else (self._slots[a], None, a.aval) for a in j.outvars]

    def run(self, *args):
        env = self._env_after([self._operand(a, dtype) for (_, dtype), a in zip(self._in, args)])
        return [Array.on_device(Buffer(env[slot], self.device), aval) if slot is not None
                else value.copy() for slot, value, aval in self._out]

    def run_buffers(self, buffers):
        """The results, in the device's memory, of a run on ``buffers`` (the inputs, in it,
        of their dtypes): how control flow runs its bodies (``control``)."""
        env = self._env_after(buffers)
        return [env[slot] if slot is not None else self.device.put(value)
                for slot, value, _ in self._out]

    def _env_after(self, buffers):
        env = self._env.copy()
        for (slot, _), buffer in zip(self._in, buffers):
            env[slot] = buffer
        for step in self._steps:
            step(env)
        return env

    def _operand(self, a, dtype):
        """``a``'s buffer on the device: its own when it is an Array there, else a copy."""
        buffer = a.device_buffer if isinstance(a, Array) else None
        if isinstance(buffer, Buffer) and buffer.owner is self.device \
                and buffer.data.dtype == dtype:
            return buffer.data
        return self.device.put(np.asarray(to_numpy(a), dtype=dtype, order="C"))


class Runtime:
    """What every ``Device`` does the same way on top of its ``put``: host values copied
    into an Array on it, for ``device_put`` (the ``runtime`` of its ``core.GpuDevice``)."""

    def array(self, value, aval):
        data = self.put(np.asarray(value, dtype=aval.dtype, order="C"))
        return Array.on_device(Buffer(data, self), aval)


class Buffer:
    """The data of an Array on the GPU (``core.Array.on_device``): ``data``, an array in the
    memory of ``owner`` (a ``Device``), possibly still being written by work queued on its
    stream."""

    __slots__ = ("data", "owner")

    def __init__(self, data, owner):
        self.data, self.owner = data, owner

    @property
    def device(self):
        return self.owner.array_device

    def to_host(self):
        return self.owner.get(self.data)  # (a copy waits for the work writing it)

    def block_until_ready(self):
        self.owner.synchronize()

    def is_ready(self):
        return self.owner.idle()


def _all_vars(jaxpr):
    seen = dict.fromkeys(list(jaxpr.constvars) + list(jaxpr.invars))
    for e in jaxpr.eqns:
        seen.update(dict.fromkeys(e.outvars))
    return list(seen)


def launch_shape(kernel, block, max_blocks):
    """(grid, block) of a kernel's launch: enough blocks for one point per thread, at most
    ``max_blocks`` (the grid-stride loop does the rest)."""
    threads = parallel_size(kernel) * (kernel.partials if isinstance(kernel, PartialsKernel)
                                       else 1)
    return max(1, min(max_blocks, -(-threads // block))), block


def kernel_step(launch, kernel, slots, xp, block, max_blocks):
    """Allocate ``kernel``'s outputs and launch it on the slots' buffers. (A
    PartialsKernel writes every element of its scratch buffers: they start empty.)"""
    ins = [slots[v] for v in kernel.inputs]
    partials = isinstance(kernel, PartialsKernel)
    outs = [(slots[o.var], tuple(o.shape), np.dtype(o.acc_dtype or o.var.aval.dtype),
             np.dtype(o.var.aval.dtype), None if partials else o.identity)
            for o in kernel.outputs]
    grid, block = launch_shape(kernel, block, max_blocks)
    runs = math.prod(kernel.shape) > 0

    def step(env):
        buffers = [xp.empty(shape, buf) if identity is None else xp.full(shape, identity, buf)
                   for _, shape, buf, _, identity in outs]
        if runs:
            launch(grid, block, buffers + [env[s] for s in ins])
        for (slot, _, buf_dtype, dtype, _), b in zip(outs, buffers):
            env[slot] = b if buf_dtype == dtype else b.astype(dtype)
    return step


def einsum_spec(eqn):
    """The ``einsum`` subscripts of a ``dot_general`` equation, or None when it is not one
    einsum computes as XLA does (operands and result of one float or complex dtype)."""
    if eqn.primitive.lowerings.get("library") != "matrix product":
        return None
    dtypes = {np.dtype(a.aval.dtype) for a in eqn.invars} | {np.dtype(eqn.outvars[0].aval.dtype)}
    if len(dtypes) != 1 or dtypes.pop() not in EINSUM_DTYPES:
        return None
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    nl, nr = (len(a.aval.shape) for a in eqn.invars)
    letters = iter(string.ascii_letters)
    lhs = [next(letters) for _ in range(nl)]
    rhs = [None] * nr
    for a, b in zip(list(lc) + list(lb), list(rc) + list(rb)):
        rhs[b] = lhs[a]
    rhs = [r or next(letters) for r in rhs]
    free_l = [lhs[i] for i in range(nl) if i not in lc and i not in lb]
    free_r = [rhs[i] for i in range(nr) if i not in rc and i not in rb]
    out = [lhs[i] for i in lb] + free_l + free_r
    return f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"


def array_module_rule(eqn):
    """The primitive's ``"array module"`` lowering (``rule(xp, *operands, **params)``: its
    computation with any array module of NumPy's API, ``cumsum`` say), where the step can
    use it on the device: operands of NumPy's own dtypes (CuPy has no ``bfloat16``); else
    None."""
    rule = eqn.primitive.lowerings.get("array module")
    if rule is None or not all(
            isinstance(a, Var) and np.dtype(a.aval.dtype).isbuiltin == 1 for a in eqn.invars):
        return None
    return rule


def array_module_step(eqn, rule, slots, xp):
    """``eqn`` computed on the device by its ``"array module"`` lowering with ``xp`` (CuPy's
    ``cumsum``, ``argsort``...), its results C-contiguous, as kernels take them."""
    ins, params = [slots[a] for a in eqn.invars], eqn.params
    outs = [slots[v] for v in eqn.outvars]
    several = eqn.primitive.multiple_results

    def step(env):
        results = rule(xp, *[env[s] for s in ins], **params)
        for out, result in zip(outs, results if several else [results]):
            env[out] = xp.ascontiguousarray(result)
    return step


def einsum_step(eqn, spec, slots, xp):
    a, b = (slots[v] for v in eqn.invars)
    out = slots[eqn.outvars[0]]

    def step(env):
        env[out] = xp.asarray(xp.einsum(spec, env[a], env[b]), order="C")
    return step


def compile_plan(name, optimised, plan, rewrites, timer, device, target):
    """The Executable of a FusionPlan on ``device``, its kernels split in phases by
    ``target`` (a ``GpuTarget``: ``phases``, ``block``, ``max_blocks``)."""
    slots = {v: i for i, v in enumerate(_all_vars(optimised.jaxpr))}
    phases = {g.index: target.phases(g.kernel) for g in plan.groups if g.kind == "kernel"}
    loops = [k for ks in phases.values() for k in ks]
    for k in loops:  # (the scratch buffers between phases)
        for v in [o.var for o in k.outputs] + list(k.inputs):
            slots.setdefault(v, len(slots))
    launches, kernels = {}, []
    if loops:
        with timer("codegen"):
            launches, texts = device.load(loops, name)
        kernels = [KernelInfo(k.name, k.eqns, k, texts.get(k.name, {})) for k in loops]
    steps = []
    for g in plan.groups:
        if g.kind == "kernel":
            steps += [kernel_step(launches[k.name], k, slots, device.xp, target.block,
                                  target.max_blocks) for k in phases[g.index]]
        elif g.kind == "view":
            steps.append(compiler.view_step(g.eqns[0], slots))
        elif g.kind == "library" and (spec := einsum_spec(g.eqns[0])) is not None:
            steps.append(einsum_step(g.eqns[0], spec, slots, device.xp))
        elif g.kind == "library" and (rule := array_module_rule(g.eqns[0])) is not None:
            steps.append(array_module_step(g.eqns[0], rule, slots, device.xp))
        elif g.kind == "library" and control.supports(g.eqns[0]):
            steps.append(control.step(g.eqns[0], slots, device, lambda closed, what: (
                compiler.compile(closed, target, f"{name} {what}"))))
        else:
            steps.append(compiler.reference_step(  # on the host: operands copied over
                g.eqns[0], slots, g.kind == "fallback" and g.warns,
                f"nbjax gpu backend: no kernel for {g.eqns[0].primitive.name}; it runs on "
                "the host's reference backend", load=device.get, store=device.put))
    return Executable(name, device, optimised, plan, rewrites, slots, steps, kernels,
                      dict(timer.times))

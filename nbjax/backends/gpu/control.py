"""Control flow on the GPU: a loop (or a choice) on the host around bodies compiled for the GPU.

A ``scan``, ``while`` or ``cond`` step keeps its values on the device: each sub-jaxpr
(body, predicate, branch) is compiled for the same target, as a program of its own
(``compiler.compile``, so nested control flow works the same way), and run on the device's
buffers (``Executable.run_buffers``). A ``scan`` passes each iteration a view of its slice
of every ``xs`` and writes the iteration's ``ys`` into buffers allocated for all of them;
its carries go from one iteration to the next without leaving the device. Only what steers
the host's loop is copied to it: a ``while``'s predicate once per iteration, a ``cond``'s
index once. Kernels are launched as the loop runs, so a long loop stops on Ctrl-C between
two iterations.
"""

import numpy as np

from ...core import Literal, to_numpy
from ...lax import cond_p, scan_p, while_p


def supports(eqn):
    """Whether ``step`` makes the step of ``eqn``."""
    return eqn.primitive in _STEPS


def reason(eqn):
    """How the step runs, in words for the fusion report."""
    return _REASONS[eqn.primitive].format(name=eqn.primitive.name)


def step(eqn, slots, device, compile):
    """The step running ``eqn`` on the slots' buffers of ``device``; ``compile(closed,
    name)`` is the GPU Executable of a sub-jaxpr."""
    literals = {k: device.put(np.asarray(to_numpy(a.val), order="C"))
                for k, a in enumerate(eqn.invars) if isinstance(a, Literal)}
    sources = [None if k in literals else slots[a] for k, a in enumerate(eqn.invars)]
    out_slots = [slots[v] for v in eqn.outvars]
    run = _STEPS[eqn.primitive](eqn.params, [v.aval for v in eqn.outvars], device, compile)

    def control_step(env):
        operands = [literals[k] if s is None else env[s] for k, s in enumerate(sources)]
        for slot, value in zip(out_slots, run(operands)):
            env[slot] = value
    return control_step


def _scan(params, out_avals, device, compile):
    body = compile(params["jaxpr"], "scan body")
    n_consts, n_carry, length = params["num_consts"], params["num_carry"], params["length"]
    order = range(length - 1, -1, -1) if params["reverse"] else range(length)
    y_avals = out_avals[n_carry:]

    def run(operands):
        consts = operands[:n_consts]
        carry = operands[n_consts:n_consts + n_carry]
        xs = operands[n_consts + n_carry:]
        ys = [device.xp.empty(a.shape, a.dtype) for a in y_avals]
        for t in order:
            outs = body.run_buffers([*consts, *carry, *[x[t] for x in xs]])
            carry = outs[:n_carry]
            for y, value in zip(ys, outs[n_carry:]):
                y[t] = value
        return [*carry, *ys]
    return run


def _while(params, out_avals, device, compile):
    cond = compile(params["cond_jaxpr"], "while cond")
    body = compile(params["body_jaxpr"], "while body")
    n_cond, n_body = params["cond_nconsts"], params["body_nconsts"]

    def run(operands):
        cond_consts = operands[:n_cond]
        body_consts = operands[n_cond:n_cond + n_body]
        carry = operands[n_cond + n_body:]
        while bool(device.get(cond.run_buffers([*cond_consts, *carry])[0])):
            carry = body.run_buffers([*body_consts, *carry])
        return carry
    return run


def _cond(params, out_avals, device, compile):
    branches = [compile(b, f"cond branch {k}") for k, b in enumerate(params["branches"])]

    def run(operands):
        index = int(device.get(operands[0]))  # clamped, as XLA's conditional does
        return branches[min(max(index, 0), len(branches) - 1)].run_buffers(operands[1:])
    return run


_STEPS = {scan_p: _scan, while_p: _while, cond_p: _cond}
_REASONS = {
    scan_p: "{name} is a loop on the host over its body compiled for the GPU: carries and "
            "xs stay on the device",
    while_p: "{name} is a loop on the host over its predicate and body compiled for the "
             "GPU: the predicate is copied to the host at each iteration, the carries stay "
             "on the device",
    cond_p: "{name} runs the branch compiled for the GPU that its index (copied to the "
            "host) picks: the operands stay on the device"}

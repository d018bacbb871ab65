"""What the pipeline hands back: an ``Executable`` and what it says about itself.

Every target's executable has the same small interface, which ``jit``'s ahead-of-time API
(``Compiled``), the reports (``nbjax.compiler.report``) and the notebook's views read, and
nothing else of it:

- ``run(*args)``: NumPy arrays in, NumPy arrays out; a device's executable also takes
  Arrays on a device (``core.to_operand``: its own device's buffers used as they are) and
  returns its results as Arrays on its device (``Array.on_device``);
- ``run_reusing(args, reuse)``: ``run``, allowed to write results into the buffers of the
  donated arguments at ``reuse`` (``jit``'s ``donate_argnums``; only the cpu target does);
- ``name`` and ``target`` (the target's name);
- ``jaxpr``: the ClosedJaxpr it runs (optimised, for targets that optimise);
- ``plan``: the ``FusionPlan`` (None for a target that runs the jaxpr as it is) and
  ``rewrites``, the passes' log;
- ``kernels``: a ``KernelInfo`` per generated kernel, with the texts of each stage;
  (a program loaded from a disk cache loads what of these only reports read, such as the
  plan's decisions and the kernels' bodies, or all four, when one of them is first read:
  see ``report`` below);
- ``compile_times``: seconds per compilation phase;
- ``step_times``: when timing is on (``enable_timing``), the run times of each plan step;
- ``runs_as``: how a call runs, in words (one native call, or steps), or None.
"""

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..core import EvalTrace, Literal, set_current_trace, to_numpy
from ..core.source_info import warn_at_user_line
from ..lax.callback import compiled_program


@dataclass
class KernelInfo:
    """A generated kernel: the equations it computes, its loop (the backend-neutral
    ``LoopKernel``) and its code at each stage of lowering (stage name -> text, in order,
    e.g. ``{"LLVM IR": ..., "optimised LLVM IR": ...}``)."""
    name: str
    eqns: list
    loop: object
    texts: dict = field(default_factory=dict)


def reported(name):
    """The attribute ``name`` (``jaxpr``, ``plan``, ``rewrites``, ``kernels``, or one of a
    target's own), read and written once what only reports read is loaded
    (``Executable.__init__``'s ``report``); its value lives in ``_name``."""
    private = "_" + name

    def read(self):
        self._load_report()
        return getattr(self, private)

    def write(self, value):
        self._load_report()
        setattr(self, private, value)
    return property(read, write)


class Executable:
    """The interface above; a target's executable subclasses it and defines ``run``."""

    timing_supported = False  # whether enable_timing records per-step times

    def __init__(self, name, target, jaxpr, plan=None, rewrites=(), kernels=(),
                 compile_times=None, report=None):
        """``report``: for a program loaded from a disk cache, a function that loads what
        only reports read and returns it as ``{attribute: value}``: the passes' log
        (``rewrites``, empty until then), and the attributes given as None (``jaxpr``,
        ``plan``, ``kernels``...) where running the program needs none of them; what it
        loads into objects already here (the plan's decisions, the kernels' bodies...) it
        puts there. It runs when one of these attributes is first read: loading all of it
        was most of loading a program that is one native call."""
        self.name = name
        self.target = target
        self._jaxpr = jaxpr
        self._plan = plan
        self._rewrites = list(rewrites)
        self._kernels = list(kernels)
        self._report = report
        self.compile_times = dict(compile_times or {})
        self.step_times = None  # {step index: [seconds, ...]} while timing is on
        self.runs_as = None

    def _load_report(self):
        """Load what only reports read, if it is not yet (see ``__init__``)."""
        if self._report is not None:
            with _report_lock:
                if self._report is not None:
                    for name, value in self._report().items():
                        setattr(self, "_" + name, value)
                    self._report = None

    jaxpr = reported("jaxpr")
    plan = reported("plan")
    rewrites = reported("rewrites")
    kernels = reported("kernels")

    def run(self, *args):
        raise NotImplementedError

    def direct(self, consts, out_aval, fallback):
        """A faster way to make the eager jitted calls of one signature (``nbjax.jit``'s
        fast path), or None when the target has none for this program (the default):
        ``call(args)`` returns the one result as an Array of ``out_aval`` given ``args``,
        a tuple of Arrays and NumPy arrays (the program's inputs after ``consts``, its
        closed-over values as NumPy arrays); where it cannot take them as they are, it
        returns ``fallback(args)``."""
        return None

    def checked_call(self, consts, out_aval):
        """A call that may be made without looking the signature up (``nbjax.jit``'s
        last-call shortcut), or None when the target has none (the default):
        ``call(*args)`` returns the result as ``direct``'s call does when every argument is
        of the signature (a NumPy array, or an Array of a strong type, of the shape and
        dtype of its input), and None, having run nothing, when one is not or the
        executable times its steps."""
        return None

    def run_reusing(self, args, reuse):
        """``run(*args)``, allowed to overwrite (and return as results) the buffers of the
        arguments at the positions in ``reuse``: donated ones that nothing else refers to.
        By default nothing is reused."""
        return self.run(*args)

    def enable_timing(self, on=True):
        """Record each plan step's run time in ``step_times`` (off by default: a clock read
        per step)."""
        if not self.timing_supported:
            raise ValueError(f"the {self.target} backend has no per-step timing")
        self.step_times = {} if on else None


_report_lock = threading.Lock()  # (two threads reading a report must not load it twice)


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


def view_step(eqn, slots):
    """A step making the result of a view equation (a ``"view"`` step of the fusion plan)
    its operand's buffer with the result's shape and dtype: a NumPy or CuPy view, no copy."""
    src, dst = slots[eqn.invars[0]], slots[eqn.outvars[0]]
    shape, dtype = eqn.outvars[0].aval.shape, eqn.outvars[0].aval.dtype

    def step(env):
        x = env[src]
        env[dst] = x.reshape(shape) if x.dtype == dtype else \
            x.reshape(-1).view(dtype).reshape(shape)  # (a complex number's parts)
    return step


def reference_step(eqn, slots, warn, warning, load=None, store=None):
    """A step running ``eqn`` by its primitive's reference implementation, for targets whose
    executables keep each value in a slot of a run's environment (a list): operands read
    from ``slots`` (``load`` turns a buffer into a NumPy array: a copy from a device),
    results written back C-contiguous in their dtype (``store``: a copy to a device). With
    ``warn``, its first run warns ``warning`` at the user's line."""
    reads = [(None, to_numpy(a.val)) if isinstance(a, Literal) else (slots[a], None)
             for a in eqn.invars]
    writes = [(slots[v], v.aval.dtype) for v in eqn.outvars]
    prim, params = eqn.primitive, eqn.params
    warned = []

    def step(env):
        if warn and not warned:
            warn_at_user_line(warning)
            warned.append(True)
        args = [v if s is None else env[s] if load is None else load(env[s]) for s, v in reads]
        with set_current_trace(EvalTrace()), compiled_program():
            out = prim.bind(*args, **params)
        for (slot, dtype), o in zip(writes, out if prim.multiple_results else [out]):
            # (not np.ascontiguousarray: it turns a 0-d result into a 1-d one)
            value = np.asarray(to_numpy(o), dtype=dtype, order="C")
            env[slot] = value if store is None else store(value)
    return step

"""What the pipeline hands back: an ``Executable`` and what it says about itself.

Every target's executable has the same small interface, which ``jit``'s ahead-of-time API
(``Compiled``), the reports (``nbjax.compiler.report``) and the notebook's views read, and
nothing else of it:

- ``run(*args)``: NumPy arrays in, NumPy arrays out;
- ``name`` and ``target`` (the target's name);
- ``jaxpr``: the ClosedJaxpr it runs (optimised, for targets that optimise);
- ``plan``: the ``FusionPlan`` (None for a target that runs the jaxpr as it is) and
  ``rewrites``, the passes' log;
- ``kernels``: a ``KernelInfo`` per generated kernel, with the texts of each stage;
- ``compile_times``: seconds per compilation phase;
- ``step_times``: when timing is on (``enable_timing``), the run times of each plan step;
- ``runs_as``: how a call runs, in words (one native call, or steps), or None.
"""

import time
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class KernelInfo:
    """A generated kernel: the equations it computes, its loop (the backend-neutral
    ``LoopKernel``) and its code at each stage of lowering (stage name -> text, in order,
    e.g. ``{"LLVM IR": ..., "optimised LLVM IR": ...}``)."""
    name: str
    eqns: list
    loop: object
    texts: dict = field(default_factory=dict)


class Executable:
    """The interface above; a target's executable subclasses it and defines ``run``."""

    timing_supported = False  # whether enable_timing records per-step times

    def __init__(self, name, target, jaxpr, plan=None, rewrites=(), kernels=(),
                 compile_times=None):
        self.name = name
        self.target = target
        self.jaxpr = jaxpr
        self.plan = plan
        self.rewrites = list(rewrites)
        self.kernels = list(kernels)
        self.compile_times = dict(compile_times or {})
        self.step_times = None  # {step index: [seconds, ...]} while timing is on
        self.runs_as = None

    def run(self, *args):
        raise NotImplementedError

    def enable_timing(self, on=True):
        """Record each plan step's run time in ``step_times`` (off by default: a clock read
        per step)."""
        if not self.timing_supported:
            raise ValueError(f"the {self.target} backend has no per-step timing")
        self.step_times = {} if on else None


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

"""The compiler behind ``jit``: a jaxpr in, an executable for a target out.

One pipeline serves every target (``compile``): optimise once (``passes.optimize``: inlining,
folding, simplification, CSE, DCE, each rewrite recorded), plan for the target
(``fusion.plan``: loop kernels in the backend-neutral ``kernel.LoopKernel`` IR, library
calls, control flow, with a reason for every decision), then let the target lower the plan
(``target.Target.lower``) into an ``executable.Executable``.

``report`` describes the result: the estimated cost of each step (flops, bytes read and
written, with XLA's conventions), the fusion report, and the compiled program as text (what
``jit(f).lower(...).compile()`` shows).

The targets themselves (``"reference"``, ``"cpu"``, ``"gpu"``) live in ``nbjax.backends``,
which builds on this package; this package never imports them.
"""

import contextlib
import gc
import logging
import threading

from ..config import config
from ..core import subjaxprs
from ..core.source_info import warn_at_user_line
from . import donation, report  # noqa: F401
from .executable import (Executable, KernelInfo, Timer, reference_step, reported,  # noqa: F401
                         view_step)
from .fusion import plan
from .passes import Rewrite, decompose_library_steps, optimize  # noqa: F401
from .target import Target  # noqa: F401

_lock = threading.RLock()  # pmap shards may ask for the same executable at once (re-entered
#                           by a target compiling sub-programs: the GPU's control flow)


def optimized(closed_jaxpr):
    """``optimize(closed_jaxpr)``, computed once per jaxpr (the ahead-of-time API shows it
    before compiling, and compiling must not optimise again)."""
    with _lock:
        return _optimized(closed_jaxpr)


def _optimized(closed_jaxpr):
    if closed_jaxpr.optimized is None:
        timer = Timer()
        with timer("passes"):
            closed_jaxpr.optimized = (*optimize(closed_jaxpr), timer.times)
    return closed_jaxpr.optimized


def compile(closed_jaxpr, target, name="jit", donated=frozenset()):
    """The executable of ``closed_jaxpr`` for ``target`` (a ``Target``), compiled once.

    It is kept in ``closed_jaxpr.executables``, so it (with its machine code) is freed with
    the jaxpr: the caches that hold jaxprs (``jit``'s traces) decide how long code lives.
    ``donated``: the positions of the inputs whose buffers a call gives away (see
    ``donation``); a target that reuses them (``Target.reuses_donations``) compiles a
    program of its own for each such set, kept under ``(target name, donated)``.
    """
    donated = frozenset(donated) if target.reuses_donations else frozenset()
    key = (target.name, donated) if donated else target.name
    with _lock:
        executable = closed_jaxpr.executables.get(key)
        if executable is None:
            refuse_uncompilable(closed_jaxpr)
            if config.log_compiles:
                types = ", ".join(str(v.aval) for v in closed_jaxpr.jaxpr.invars)
                logging.getLogger("nbjax.compiler").warning(
                    "Compiling %s with argument types [%s] for the %s backend", name, types,
                    target.name)
            with collector_paused():
                executable = _compile(closed_jaxpr, target, name, donated)
            closed_jaxpr.executables[key] = executable
    return executable


def refuse_uncompilable(closed_jaxpr):
    """Raise the error of a live equation that no target can compile: one whose primitive
    has an ``"error"`` lowering (``custom_lin``, forward mode through a custom_vjp). JAX
    raises it as it lowers the program, after dead code elimination (a jvp whose tangent
    is unused compiles); so does this, on the optimised program, and before the pipeline:
    the error is the program's, not a compiler defect to fall back from with a warning."""
    with _lock:
        if _refusing(closed_jaxpr.jaxpr) is None:  # (most programs: no pass runs here)
            return
        eqn = _refusing(_optimized(closed_jaxpr)[0].jaxpr)
    if eqn is not None:
        eqn.primitive.lowering("error")(**eqn.params)


def _refusing(jaxpr):
    """The first equation of ``jaxpr`` or of its sub-jaxprs with an ``"error"`` lowering,
    or None."""
    for eqn in jaxpr.eqns:
        if "error" in eqn.primitive.lowerings:
            return eqn
        for sub in subjaxprs(eqn.params):
            found = _refusing(sub)
            if found is not None:
                return found
    return None


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused (then as it was). Compiling a program, or
    loading it from the disk cache, makes tens of thousands of objects, most of which live
    on; the collections they set off found little to free, yet now and then one reached
    the oldest generation and went through every object of the process: 20-40 ms of an
    LSTM's or a CNN's first call, one time in two, and a millisecond of a small blur's
    load. Paused, the young objects are looked at once, after the compile. ``jit`` pauses
    it while tracing too, for the same reason (its traces live on in its cache)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _compile(closed_jaxpr, target, name, donated):
    """The pipeline; a failure in it is the compiler's defect, never the program's: with a
    ``fallback`` target, the program runs there, with a warning, rather than not at all."""
    try:
        return _pipeline(closed_jaxpr, target, name, donated)
    except Exception as e:
        if target.fallback is None:
            raise
        warn_at_user_line(f"nbjax: the {target.name} compiler failed on {name} "
                          f"({type(e).__name__}: {str(e)[:300]}); it runs on the "
                          f"{target.fallback.name} backend instead")
        fallback = target.fallback
        return _compile(closed_jaxpr, fallback, name,
                        donated if fallback.reuses_donations else frozenset())


def _pipeline(closed_jaxpr, target, name, donated):
    return target.cached(closed_jaxpr, name, lambda: _lower(closed_jaxpr, target, name, donated),
                         donated)


def _lower(closed_jaxpr, target, name, donated):
    timer = Timer()
    if not target.optimizes:
        return target.lower(name, closed_jaxpr, None, [], timer)
    optimised, rewrites, times = _optimized(closed_jaxpr)
    timer.times.update(times)
    if target.decomposed:
        with timer("passes"):
            optimised, decomposed = decompose_library_steps(optimised, target.decomposed)
        rewrites = rewrites + decomposed
    with timer("fusion"):
        fusion_plan = plan(optimised.jaxpr, target)
        target.record_choices(fusion_plan)
    if donated:
        return target.lower(name, optimised, fusion_plan, rewrites, timer, donated=donated)
    return target.lower(name, optimised, fusion_plan, rewrites, timer)

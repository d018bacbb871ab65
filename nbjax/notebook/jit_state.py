"""The JSON a compiler view shows for one compilation of a jitted function.

``compiled_state`` (rebuilt when the function is traced or compiled anew): the graph of the
optimised jaxpr with its fusion kernels as clusters, the traced and optimised jaxprs, the
rewrites, the fusion plan (kernels, their equations, bytes, flops, every decision's reason)
and the generated code. ``timing_state`` (rebuilt on every call): compile phases, call
times, per-step run times with achieved GB/s and GFLOP/s, and the speed-ups over nbjax's
eager mode and over NumPy (the traced program run one NumPy call per equation).
"""

import statistics

from ..viz import DEFAULT_BUDGET
from ..viz.text import annotate
from . import machine
from .panes import graph_state, jaxpr_pane
from .source_pane import source_state

IR_LIMIT = 200_000  # characters of IR sent per kernel
CALL_SAMPLES = 200  # call times kept for the sparkline
PENDING_NOTE = ("baselines not measured yet: they run the program once by NumPy and once by "
                "nbjax eager when asked (opening the Timing pane, its button, or %nbjax "
                "--baselines on), never inside your call")


def compiled_state(comp, panes, prefix, show_all=False, toggled=(), group=None,
                   hide_identities=False):
    """What the graph, source, jaxpr, fusion and code panes show for ``comp`` (a
    Compilation); ``show_all``, ``toggled`` (clusters opened or closed) and ``group`` (the
    graph grouped by "line" or "function") and ``hide_identities`` are the browser's."""
    traced = annotate(comp.traced)
    plan = comp.plan
    drawn = comp.optimised if comp.optimised is not None else comp.traced
    drawn_text = traced if drawn is comp.traced else annotate(drawn)
    state = {"name": comp.name, "backend": comp.backend, "signature": comp.signature,
             "graph_of": "traced" if drawn is comp.traced else "optimised"}
    if "graph" in panes:
        state["graph"] = graph_state(drawn, fusion=plan, prefix=prefix,
                                     budget=None if show_all else DEFAULT_BUDGET,
                                     annotated=drawn_text, toggled=toggled,
                                     input_names=comp.input_names, group=group,
                                     hide_identities=hide_identities)
    if "jaxpr" in panes:
        state["jaxpr"] = {"traced": jaxpr_pane(traced),
                          "optimised": None if drawn is comp.traced else jaxpr_pane(drawn_text),
                          "rewrites": [{"rule": r.rule, "eqn": str(r.eqn), "detail": r.detail}
                                       for r in comp.rewrites]}
    fusion = fusion_state(comp, drawn_text) if {"fusion", "source"} & set(panes) else None
    if "fusion" in panes:
        state["fusion"] = fusion
    if "source" in panes:
        state["source"] = source_state(comp, drawn, fusion["decisions"])
    if "code" in panes:
        state["code"] = code_state(comp, drawn)
    return state


def _no_plan_note(comp):
    return (f"The {comp.backend} backend runs the jaxpr equation by equation with NumPy: "
            "nothing is fused and no code is generated. Use --backend cpu to compile it.")


def fusion_state(comp, annotated):
    """Each step of the plan (kernels, library and reference steps) and each decision."""
    if comp.plan is None:
        return {"steps": [], "decisions": [], "note": _no_plan_note(comp)}
    node_of = _node_ids(comp.optimised)

    def row(eqn):
        node = node_of.get(id(eqn))
        return {"node": node, "primitive": eqn.primitive.name,
                "text": (annotated.eqn_text(node) if node else None) or str(eqn)}

    starts = {}  # step -> why it starts: the reason of its first equation that started it
    for d in comp.plan.decisions:
        if d.started_new_group:
            starts.setdefault(d.group, d.reason)
    steps = [dict(step_cost(comp.costs[g.index]), index=g.index, kind=g.kind,
                  label=g.describe(), shape=list(g.shape),
                  reason=g.reason or starts.get(g.index, ""), eqns=[row(e) for e in g.eqns],
                  inputs=[v.aval.str_short(short_dtypes=True) for v in g.inputs],
                  outputs=[v.aval.str_short(short_dtypes=True) for v in g.outputs])
             for g in comp.plan.groups]
    decisions = [dict(row(d.eqn), step=d.group, started=d.started_new_group, reason=d.reason)
                 for d in comp.plan.decisions]
    return {"steps": steps, "decisions": decisions, "note": None}


def _node_ids(closed):
    """id(top-level equation) -> its node id in the graph and jaxpr panes."""
    return {id(e): f"e{i}" for i, e in enumerate(closed.jaxpr.eqns)}


def code_state(comp, drawn):
    """Each kernel's loop and code: ``ir`` as first generated, ``optimised_ir`` as the
    target's last stage made it (the first and last of ``KernelInfo.texts``), and
    ``stages``, every stage as ``[name, text]`` from the loop on (the gpu's: LLVM IR, the
    module's optimised IR and PTX, the kernel's PTX, ``ptxas -v``)."""
    kernels = comp.executable.kernels
    if comp.plan is None:
        return {"kernels": [], "note": _no_plan_note(comp)}
    node_of = _node_ids(drawn)
    return {"note": None if kernels else "This program has no loop kernels (only library "
                                         "or reference steps), so no code was generated.",
            "kernels": [{"name": k.name, "nodes": [node_of.get(id(e)) for e in k.eqns],
                         "loop": k.loop.pretty(), "ir": _clip(_stage(k, 0)),
                         "optimised_ir": _clip(_stage(k, -1)),
                         "stages": [["kernel IR", k.loop.pretty()]]
                         + [[name, _clip(text)] for name, text in k.texts.items()]}
                        for k in kernels]}


def _stage(kernel, n):
    return list(kernel.texts.values())[n]


def _clip(text):
    if len(text) <= IR_LIMIT:
        return text
    return text[:IR_LIMIT] + f"\n; ... {len(text) - IR_LIMIT} more characters not shown"


# --- costs ---------------------------------------------------------------------------------

def step_cost(cost):
    """A step's bytes and flops (``nbjax.compiler.report``'s estimates, XLA's conventions)."""
    return {"bytes_in": cost.bytes_read, "bytes_out": cost.bytes_written, "flops": cost.flops,
            "transcendentals": cost.transcendentals, "cost_note": cost.note or None}


# --- timing ---------------------------------------------------------------------------------

def timing_state(comp):
    """Compile phases, call times, per-step times and rates, speed-up over no jit."""
    calls = list(comp.call_seconds)
    typical = statistics.median(calls) if calls else None
    limits = machine.limits()
    state = {"signature": comp.signature, "call_count": comp.call_count,
             "calls": calls[-CALL_SAMPLES:], "last_seconds": calls[-1] if calls else None,
             "median_seconds": typical,
             # two baselines, labelled apart: nbjax's own eager mode (every operation
             # dispatched through nbjax) and the same program run by NumPy, one call per
             # equation (what the NumPy version of the function does)
             "eager_seconds": comp.eager_seconds, "speedup": _ratio(comp.eager_seconds, typical),
             "numpy_seconds": comp.numpy_seconds,
             "numpy_speedup": _ratio(comp.numpy_seconds, typical),
             "baselines_pending": comp.baseline_call is not None,
             "baselines_note": comp.baselines_note or (
                 PENDING_NOTE if comp.baseline_call is not None else None),
             "compile": compile_phases(comp), "limits": limits, "steps": []}
    labels = [g.describe() for g in comp.plan.groups] if comp.plan is not None else \
        [f"equation {c.step}: {c.name}" for c in comp.costs]
    for cost, label in zip(comp.costs, labels):
        samples = comp.step_seconds.get(cost.step)
        seconds = statistics.median(samples) if samples else None
        gbps = cost.bytes_accessed / seconds / 1e9 if seconds else None
        gflops = cost.flops / seconds / 1e9 if seconds and cost.flops else None
        state["steps"].append(dict(
            step_cost(cost), index=cost.step, kind=cost.kind, label=label, seconds=seconds,
            gbps=gbps, gflops=gflops,
            bandwidth_fraction=_fraction(gbps, limits["gbps"]),
            flops_fraction=_fraction(gflops, limits["gflops"])))
    return state


def _ratio(baseline, seconds):
    return baseline / seconds if baseline and seconds else None


def _fraction(rate, limit):
    """``rate`` as a fraction of the machine's measured ``limit``, at most 1: a kernel whose
    data sit in cache can beat the memory bandwidth measured on a large copy, and a
    percentage above 100 would say the limit is not one (the pane says "at the limit")."""
    return min(rate / limit, 1.0) if rate else None


def compile_phases(comp):
    """[{"phase", "seconds"}]: tracing, then the backend's own phases (or its total)."""
    phases = []
    if comp.trace_seconds is not None:
        phases.append({"phase": "trace", "seconds": comp.trace_seconds})
    own = comp.executable.compile_times
    if own:
        phases += [{"phase": k, "seconds": v} for k, v in own.items()]
    else:
        phases.append({"phase": "compile", "seconds": comp.compile_seconds})
    return phases

"""The annotated source pane (Cython's ``-a``, for the compiler): the user's source lines,
each with the equations, kernels and run time it produced and the fusion decisions about
its equations.

Lines come from the equations' own source information (``viz.structure.eqn_source``), so a
function jitted inside another one, defined in another cell, shows under its own cell with
its own line numbers. A kernel fusing several lines' equations shares its run time among
them by their number of equations (``line_seconds``): the kernel is one loop, so a finer
split would be a guess; the pane says so.
"""

import collections
import linecache

from ..viz.structure import eqn_id, eqn_source, open_jaxpr, sub_jaxprs, sub_prefix
from .panes import file_label

CONTEXT = 2  # lines shown above the first line that produced an equation, per file
MAX_LINES = 300  # lines shown per file
SPLIT_NOTE = "A kernel's time is shared among its lines by their number of equations."


def _walk(jaxpr, prefix="", top=None):
    """(node id, equation, the top-level equation it is in) of every equation, those of
    sub-jaxprs included, with the graph's node ids."""
    for i, eqn in enumerate(jaxpr.eqns):
        node = eqn_id(prefix, i)
        yield node, eqn, top or eqn
        for suffix, _, sub in sub_jaxprs(eqn):
            yield from _walk(open_jaxpr(sub)[0], sub_prefix(node, suffix) + "/", top or eqn)


def source_state(comp, drawn, decisions):
    """The source pane of ``comp`` (a Compilation) whose graph draws ``drawn``; decisions:
    the fusion pane's rows (``jit_state.fusion_state``), listed under their lines."""
    step_of = {}
    for group in comp.plan.groups if comp.plan is not None else ():
        step_of.update((id(e), group.index) for e in group.eqns)
    note = SPLIT_NOTE if comp.plan is not None else \
        f"The {comp.backend} backend runs each equation on its own: no kernels."
    return source_lines(drawn, note, step_of, decisions)


def source_lines(drawn, note, step_of=None, decisions=()):
    """The lines the equations of ``drawn`` (the jaxpr a graph draws) came from.

    ``step_of``: id(top-level equation) -> its plan step; ``decisions``: fusion decision
    rows (with their ``node``). ``files``: per source file (a cell), in the order of its
    first equation: ``label`` (``Cell In[3]``), ``functions``, ``lines``; each line:
    ``line``, ``text``, ``nodes`` (its equations' node ids), ``backward`` (how many of them
    are a gradient's backward pass), ``kernels`` (plan steps), ``shares`` ([step, the
    fraction of the step's equations that are this line's]), ``decisions``."""
    step_of = step_of or {}
    decision_of = {d["node"]: d for d in decisions if d["node"]}
    step_size = collections.Counter()
    lines = {}  # (file, line) -> what it produced
    for node, eqn, top in _walk(open_jaxpr(drawn)[0]):
        step = step_of.get(id(top))
        if step is not None:
            step_size[step] += 1
        info = eqn_source(eqn)
        if info is None:
            continue
        entry = lines.setdefault((info.file, info.line), {
            "function": info.function, "nodes": [], "steps": collections.Counter(),
            "decisions": [], "backward": 0})
        entry["nodes"].append(node)
        entry["backward"] += eqn.provenance is not None and eqn.provenance.phase == "backward"
        if step is not None:
            entry["steps"][step] += 1
        if node in decision_of:
            entry["decisions"].append(decision_of[node])
    by_file = {}
    for (filename, line), entry in lines.items():
        by_file.setdefault(filename, {})[line] = entry
    return {"files": [_file(f, found, step_size) for f, found in by_file.items()],
            "note": note}


def _file(filename, found, step_size):
    label, _ = file_label(filename)
    first = max(1, min(found) - CONTEXT)
    last = min(max(found), first + MAX_LINES - 1)
    rows = []
    for n in range(first, last + 1):
        entry = found.get(n)
        row = {"line": n, "text": linecache.getline(filename, n).rstrip("\n"), "nodes": [],
               "backward": 0, "kernels": [], "shares": [], "decisions": []}
        if entry is not None:
            steps = sorted(entry["steps"])
            row.update(nodes=entry["nodes"], kernels=steps, decisions=entry["decisions"],
                       backward=entry["backward"],
                       shares=[[s, entry["steps"][s] / step_size[s]] for s in steps])
        rows.append(row)
    functions = sorted({e["function"] for e in found.values()})
    return {"label": label, "functions": functions, "lines": rows}


def produced_text(row):
    """What a line produced, in a few words: its kernels (compiled), else its forward and
    backward equations (a gradient), else its equations; '' for none. The browser module
    writes the same (``producedText``)."""
    n, kernels, backward = len(row["nodes"]), len(row["kernels"]), row["backward"]
    if not n:
        return ""
    if kernels:
        return f"{kernels} kernel{'s' * (kernels != 1)}"
    if backward:
        return f"{n - backward} fwd, {backward} bwd"
    return f"{n} equation{'s' * (n != 1)}"


def line_seconds(row, timing):
    """The run time ``row`` (a line of ``source_state``) accounts for, from the timing
    pane's per-step medians; None before any call is timed."""
    seconds = {s["index"]: s["seconds"] for s in (timing or {}).get("steps", ())}
    if not row["shares"] or not any(seconds.get(step) for step, _ in row["shares"]):
        return None
    return sum(share * (seconds.get(step) or 0.0) for step, share in row["shares"])

"""A transformation pipeline side by side: the jaxpr after each stage (``f``, ``grad(f)``,
``vmap(grad(f))``, the kernels ``jit`` compiles), each equation linked to the equations of
the previous stage it came from, and the equations a stage added coloured.

Where an equation came from is read from what tracing recorded: its user-level operation
(``eqn.provenance``, set under autodiff: the primitive the user called, its source line and
whether the equation is in the forward or backward half) or, without provenance, its own
primitive and source line. Two equations of consecutive stages are linked when they share
that operation and line; an equation is new when the previous stage has no equation of the
same primitive and half for that operation (``cos`` and the backward ``mul`` of ``sin``
under ``grad``, the ``broadcast_in_dim`` a batching rule adds under ``vmap``). Equations on
one line from one operation cannot be told apart, so each links to all of them.

The rendering is static HTML (inline styles, links between stages as ``#`` anchors, no
script), so it survives saving and nbconvert exports.
"""

import html
import os
from dataclasses import dataclass, field

from .dot import KERNEL_COLOURS, PHASE_FILL
from .structure import eqn_id, open_jaxpr
from .text import annotate
from .theme import BORDER_SOFT, CARD_FG, CODE_BG, CODE_FONT, CODE_MUTED, text_style

NEW_FILL = {"grad": PHASE_FILL, "vmap": "#ede9fe"}  # transformation -> colour of new eqns
OTHER_NEW_FILL = "#fef9c3"
EQN_CHARS = 160  # an equation's text is cut after this many characters
_COLUMN_STYLE = (f"flex:0 0 auto;min-width:16em;max-width:34em;border:1px solid {BORDER_SOFT};"
                 f"border-radius:4px;padding:0.4em;background:{CODE_BG}")
_EQN_STYLE = (f"font-family:{CODE_FONT};font-size:0.92em;line-height:1.35;padding:1px 4px;"
              "border-radius:3px;white-space:pre-wrap;word-break:break-all")
_LINK_STYLE = f"color:{CODE_MUTED};font-size:0.8em;margin-left:0.5em;text-decoration:none"
# On a fixed light fill (a new equation, a kernel's box) the text is fixed dark too.
_CARD_LINK_STYLE = "color:#4b5563;font-size:0.8em;margin-left:0.5em;text-decoration:none"
_NOTE_STYLE = f"color:{CODE_MUTED};font-size:0.92em;margin:0.2em 0"
# The only rule that needs a <style>: the equation a link points at is outlined.
_TARGET_CSS = ".nbjax-pipeline .nbjax-stage-eqn:target{outline:2px solid #f59e0b}"


@dataclass
class Stage:
    """One stage: ``label`` (``vmap(grad(f))``), the ``transform`` that made it (None for
    the original function), its ``jaxpr`` and, for ``jit``, the compiled ``plan`` (with
    ``groups``, each with ``kind``, ``describe()`` and ``eqns``) of that jaxpr, or a
    ``note`` saying why there is none."""
    label: str
    transform: object
    jaxpr: object
    plan: object = None
    note: str = None
    eqns: list = field(default_factory=list)  # filled by ``link_stages``


def origin(eqn):
    """(file, line, user-level primitive) of the operation ``eqn`` belongs to, or None when
    tracing recorded no source line."""
    prov = eqn.provenance
    source = prov.source_info if prov is not None and prov.source_info else eqn.source_info
    if source is None:
        return None
    return source.file, source.line, prov.primitive if prov is not None else eqn.primitive.name


def phase(eqn):
    return eqn.provenance.phase if eqn.provenance is not None else "forward"


def _stage_eqns(stage):
    """The top-level equations a stage shows: its jaxpr's, or those of the compiled plan's
    steps, in plan order (each step's in program order), with the step they belong to."""
    jaxpr, _ = open_jaxpr(stage.jaxpr)
    if stage.plan is None:
        return [(e, None) for e in jaxpr.eqns]
    position = {id(e): i for i, e in enumerate(jaxpr.eqns)}
    return [(e, step) for step, g in enumerate(stage.plan.groups)
            for e in sorted(g.eqns, key=lambda e: position.get(id(e), 0))]


def link_stages(stages):
    """Fill each stage's ``eqns``: dicts with ``id`` (``s1-e3``), ``primitive``, ``text``,
    ``phase``, ``step`` (the plan step, for ``jit``), ``from`` (ids in the previous stage)
    and ``new``. Returns ``stages``."""
    previous = []
    for index, stage in enumerate(stages):
        annotated = annotate(stage.jaxpr)
        jaxpr, _ = open_jaxpr(stage.jaxpr)
        position = {id(e): i for i, e in enumerate(jaxpr.eqns)}
        shown = _stage_eqns(stage)
        twins = _twins([e for e, _ in shown], position)
        rows = []
        for n, (eqn, step) in enumerate(shown):
            node = eqn_id("", position[id(eqn)]) if id(eqn) in position else None
            text = (annotated.eqn_text(node) if node else None) or repr(eqn)
            sources, new = _sources(eqn, previous, twins[id(eqn)]) if index else ([], False)
            rows.append({"id": f"s{index}-e{n}", "primitive": eqn.primitive.name,
                         "text": text, "phase": phase(eqn), "step": step,
                         "from": [r["id"] for _, r in sources], "new": new,
                         "origin": origin(eqn)})
        stage.eqns = rows
        previous = list(zip((e for e, _ in shown), rows))
    return stages


def _kind(eqn):
    return origin(eqn), phase(eqn), eqn.primitive.name


def _twins(eqns, position):
    """id(eqn) -> (its rank among the equations of the same operation, half and primitive,
    in program order; how many there are)."""
    groups = {}
    for eqn in sorted(eqns, key=lambda e: position.get(id(e), 0)):
        groups.setdefault(_kind(eqn), []).append(eqn)
    return {id(e): (rank, len(group)) for group in groups.values()
            for rank, e in enumerate(group)}


def _sources(eqn, previous, twin):
    """(the previous stage's (eqn, row) pairs ``eqn`` came from, whether it is new). When
    both stages have as many equations of its kind, the k-th links to the k-th alone."""
    key = origin(eqn)
    if key is None:
        return [], True
    same_op = [(e, r) for e, r in previous if r["origin"] == key]
    same_half = [(e, r) for e, r in same_op if phase(e) == phase(eqn)]
    same = [(e, r) for e, r in same_half if e.primitive is eqn.primitive]
    rank, count = twin
    if len(same) == count > 1:
        same = [same[rank]]
    return same or same_half or same_op, not same


# --- HTML -----------------------------------------------------------------------------------

def pipeline_html(stages, prefix="", locate=None, scale=1):
    """The stages side by side (``link_stages`` first). ``prefix`` goes in front of every
    element id, for pages showing several pipelines; ``locate(file, line)`` writes a source
    location (default ``file.py:4``); ``scale`` enlarges the text (presenting)."""
    where = _Where(locate or (lambda file, line: f"{os.path.basename(file)}:{line}"))
    columns = "".join(_column(i, s, _Context(prefix, stages[i - 1] if i else None, where))
                      for i, s in enumerate(stages))
    return (f'<div class="nbjax-pipeline" data-nbjax-view="transform" '
            f'style="{text_style(scale)}">'
            f"<style>{_TARGET_CSS}</style>"
            f'<div style="display:flex;gap:0.6em;overflow-x:auto;align-items:flex-start">'
            f"{columns}</div></div>")


def _esc(x):
    return html.escape(str(x), quote=True)


def _new_fill(stage, row):
    fill = NEW_FILL.get(stage.transform, OTHER_NEW_FILL)
    return fill.get(row["phase"], OTHER_NEW_FILL) if isinstance(fill, dict) else fill


class _Context:
    """What rendering one stage needs: the id prefix, names of the previous stage's
    equations (for the links) and how to write a source location."""

    def __init__(self, prefix, before, where):
        self.prefix, self.where = prefix, where
        self.names = {r["id"]: _short_name(r) for r in (before.eqns if before else [])}


def _short_name(row):
    """``b = sin``: an equation named as its jaxpr prints its first result."""
    result = row["text"].split(":", 1)[0] if " = " in row["text"] else ""
    return f"{result} = {row['primitive']}" if result.isidentifier() else row["primitive"]


class _Where:
    def __init__(self, locate):
        self.locate = locate

    def __call__(self, row):
        if row["origin"] is None:
            return "no source line recorded"
        file, line, primitive = row["origin"]
        return f"from {primitive} at {self.locate(file, line)}, {row['phase']} pass"


def _column(index, stage, ctx):
    new = sum(r["new"] for r in stage.eqns)
    counts = f"{len(stage.eqns)} equations" + (f", {new} new" if index else "")
    head = [f'<div style="font-weight:bold">{index + 1}. {_esc(stage.label)}'
            f"</div>", f'<p style="{_NOTE_STYLE}">{_esc(counts)}</p>']
    if index:
        head.append(f'<p style="{_NOTE_STYLE}">{_esc(_legend(stage))}</p>')
    lines = str(stage.jaxpr).splitlines()
    if len(lines) > 1:
        head.append(f'<div style="{_EQN_STYLE};color:{CODE_MUTED}">{_esc(lines[0])}</div>')
    if stage.note:
        head.append(f'<p style="{_NOTE_STYLE}">{_esc(stage.note)}</p>')
    if stage.plan is not None:
        body = _steps(stage, ctx)
    else:
        body = "".join(_eqn(stage, r, ctx) for r in stage.eqns)
    tail = f'<div style="{_EQN_STYLE};color:{CODE_MUTED}">{_esc(lines[-1])}</div>' \
        if len(lines) > 1 else ""
    return (f'<div class="nbjax-stage" data-stage="{index}" '
            f'data-transform="{_esc(stage.transform or "")}" style="{_COLUMN_STYLE}">'
            f'{"".join(head)}{body}{tail}</div>')


def _legend(stage):
    if stage.plan is not None:
        return "one box per compiled step; ← links to the equations each one computes"
    if stage.transform == "grad":
        return "new: blue forward (derivatives), orange backward pass; ← where from"
    return f"coloured: new under {stage.transform}; ← where from"


def _steps(stage, ctx):
    parts = []
    for step, group in enumerate(stage.plan.groups):
        border, fill = KERNEL_COLOURS[step % len(KERNEL_COLOURS)]
        rows = "".join(_eqn(stage, r, ctx) for r in stage.eqns if r["step"] == step)
        parts.append(f'<div class="nbjax-stage-step" data-step="{step}" style="border:1.5px '
                     f'solid {border};background:{fill};color:{CARD_FG};border-radius:4px;'
                     f'margin:0.3em 0;'
                     f'padding:0.2em"><div style="color:{border};font-size:0.85em">'
                     f"{_esc(group.describe())}</div>{rows}</div>")
    return "".join(parts)


def _eqn(stage, row, ctx):
    text = row["text"] if len(row["text"]) <= EQN_CHARS else row["text"][:EQN_CHARS - 1] + "…"
    carded = row["new"] or row["step"] is not None
    style = _EQN_STYLE + (f";background:{_new_fill(stage, row)};color:{CARD_FG}"
                          if row["new"] else "")
    link_style = _CARD_LINK_STYLE if carded else _LINK_STYLE
    links = "".join(f'<a href="#{_esc(ctx.prefix + source)}" style="{link_style}" '
                    f'title="came from {_esc(ctx.names[source])}">← {_esc(ctx.names[source])}'
                    f"</a>" for source in row["from"])
    classes = "nbjax-stage-eqn" + (" nbjax-new" if row["new"] else "")
    return (f'<div id="{_esc(ctx.prefix + row["id"])}" class="{classes}" '
            f'data-from="{_esc(" ".join(row["from"]))}" data-phase="{_esc(row["phase"])}" '
            f'title="{_esc(ctx.where(row))}" style="{style}">{_esc(text)}{links}</div>')


class PipelineView:
    """The displayable result of ``%transform``: ``stages`` (with their linked ``eqns``),
    static HTML for notebooks, the stages' jaxprs as text elsewhere."""

    def __init__(self, stages, prefix="", locate=None, scale=1):
        self.stages, self.prefix, self.locate = link_stages(stages), prefix, locate
        self.scale = scale

    def html(self):
        return pipeline_html(self.stages, self.prefix, self.locate, self.scale)

    def __repr__(self):
        return "\n\n".join(f"{i + 1}. {s.label}\n{s.jaxpr}" for i, s in enumerate(self.stages))

    def _repr_html_(self):
        return self.html()

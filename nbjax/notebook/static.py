"""Static HTML of a view's state: what nbconvert, GitHub and notebook viewers show.

Plain HTML with inline styles and inline SVG, folded with ``<details>``: no scripts, no
event handlers, so it renders anywhere (the lesson of Cython's ``%%cython -a``, whose
annotated view relied on inline scripts and broke in JupyterLab).
"""

import html
import re

from ..viz import fit_width
from ..viz.dot import hidden_identities_note
from ..viz import theme as th
from .source_pane import line_seconds, produced_text

NOTE = f"color:{th.MUTED};font-size:0.92em"
TABLE = "border-collapse:collapse;font-size:0.92em;margin:0.3em 0"
CELL = f"border:1px solid {th.BORDER_SOFT};padding:2px 6px;text-align:left;vertical-align:top"
HEAD_CELL = f"{CELL};background:{th.BG_SOFT}"
PRE = (f"background:{th.CODE_BG};color:{th.FG};border:1px solid {th.BORDER_SOFT};"
       f"padding:0.5em;font-family:{th.CODE_FONT};font-size:0.85em;"
       "max-height:30em;overflow:auto;white-space:pre")
CODE = f"font-family:{th.CODE_FONT}"


def esc(x):
    return html.escape("" if x is None else str(x))


def seconds(s):
    """A duration for people: 1.23 ms, 45.6 µs, 2.01 s."""
    if s is None:
        return "–"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def number(x, unit=""):
    return "–" if x is None else f"{x:,.3g}{unit}"


def nbytes(n):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def table(header, rows):
    head = "".join(f'<th style="{HEAD_CELL}">{esc(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f'<td style="{CELL}">{c}</td>' for c in row) + "</tr>"
                   for row in rows)
    return f'<table style="{TABLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def section(title, body, open_=False):
    return (f'<details{" open" if open_ else ""} style="margin:0.3em 0">'
            f'<summary style="cursor:pointer;font-weight:600">{esc(title)}</summary>'
            f'{body}</details>')


def note(text):
    return f'<p style="{NOTE}">{esc(text)}</p>'


def sparkline(values, width=240, height=40):
    """Call times as a small SVG line (the live view draws the same)."""
    if len(values) < 2:
        return ""
    top, bottom = max(values), min(values)
    span = (top - bottom) or 1.0
    step = width / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 2 - (v - bottom) / span * (height - 4):.1f}"
                      for i, v in enumerate(values))
    return (f'<svg width="{width}" height="{height}" class="nbjax-sparkline" '
            f'xmlns="http://www.w3.org/2000/svg"><polyline fill="none" stroke="#2563eb" '
            f'stroke-width="1.5" points="{points}"/></svg>')


def graph(state, scale=1):
    if not state:
        return ""
    if state.get("svg") is None:
        return note(state.get("note") or "graph not drawn")
    extra = ""
    if state["truncated"]:
        extra = note(f"{state['shown']} nodes shown, {state['hidden']} hidden "
                     f"(budget {state['budget']})")
    if state.get("identities_hidden"):  # the view's toggle: a static copy shows the same
        extra += note(hidden_identities_note(state["identities_hidden"]))
    return (f'<div style="overflow:auto;max-height:40em;{th.GRAPH_CARD}">'
            f'{fit_width(state["svg"], scale)}</div>{extra}')


def header(view):
    status = view.status or {}
    return (f'<div><b style="{CODE}">{esc(view.title)}</b> '
            f'<span style="{NOTE}">{esc(status.get("message"))}</span> '
            f'<span class="nbjax-live-hint" style="{NOTE};font-style:italic">'
            f'({LIVE_HINT})</span></div>')


# Shown only where the live view is absent (see widgets.py): hides the widget output that
# follows this one when it failed to render (no child elements: "Error displaying widget:
# model not found" in a reopened notebook) and says how to bring the view back.
FALLBACK_STYLE = (
    "<style>.jp-OutputArea-child:has(.nbjax-static) + .jp-OutputArea-child:has("
    ".jupyter-widgets:not(:has(*))) {display: none;}</style>")
LIVE_HINT = "static copy: re-run the cell to make this view live"


def standalone(html_text):
    """The static rendering as an output of its own: with the rule that hides the dead
    widget after it."""
    return FALLBACK_STYLE + html_text


def wrap(view, body, scale=1):
    return (f'<div class="nbjax-static" data-nbjax-view="{esc(view.view)}" '
            f'style="{th.box_style(scale)}">'
            f'{header(view)}{body}</div>')


# --- the compiler view ----------------------------------------------------------------------

def jit_html(view, scale=1):
    c, t = view.compiled, view.timing
    if not c:
        return wrap(view, "", scale)
    parts = []
    if "graph" in c:
        parts.append(section("Graph", graph(c["graph"], scale), open_=True))
    if "source" in c:
        parts.append(section("Source", source_html(c["source"], t), open_=True))
    if "jaxpr" in c:
        j = c["jaxpr"]
        body = "<div>traced</div>" + j["traced"]
        if j["optimised"]:
            body += "<div>optimised</div>" + j["optimised"]
        parts.append(section("Jaxpr", body))
    if "fusion" in c:
        parts.append(section("Fusion", fusion_html(c["fusion"])))
    if "code" in c:
        parts.append(section("Code", code_html(c["code"])))
    if t:
        parts.append(section("Timing", timing_html(t), open_=True))
    return wrap(view, "".join(parts), scale)


def heat(fraction):
    """A line's background for its share of the time (or of the equations): a translucent
    amber, as strong as the share, light enough for the theme's text on light and dark
    themes (the live view's HEAT_MIN and HEAT_SPAN are the same)."""
    return f"background:{th.HEAT.format(alpha=0.06 + 0.34 * fraction):s}"


def line_heats(source, timing):
    """(seconds or None, heat in [0, 1]) per line of each file: by time once calls are
    timed, by number of equations before."""
    rows = [row for f in source["files"] for row in f["lines"]]
    times = [line_seconds(row, timing) for row in rows]
    weights = times if any(times) else [len(row["nodes"]) for row in rows]
    top = max((w or 0 for w in weights), default=0) or 1
    return {id(row): (s, (w or 0) / top) for row, s, w in zip(rows, times, weights)}


def source_html(source, timing):
    """Each file's lines, coloured by the time (or equations) they produced, with their
    kernels; then the fusion decisions line by line."""
    heats = line_heats(source, timing)
    parts, decisions = [], []
    for f in source["files"]:
        rows = []
        for row in f["lines"]:
            seconds_, fraction = heats[id(row)]
            produced = produced_text(row) + (
                f' ({", ".join(map(str, row["kernels"]))})' if row["kernels"] else "")
            cells = [esc(row["line"]), esc(produced),
                     esc(seconds(seconds_) if seconds_ is not None else ""),
                     esc(len(row["nodes"]) or ""), f'<code style="{CODE};white-space:pre">'
                     f'{esc(row["text"])}</code>']
            style = heat(fraction) if produced else ""
            rows.append(f'<tr data-line="{row["line"]}" style="{style}">' + "".join(
                f'<td style="{CELL}">{c}</td>' for c in cells) + "</tr>")
            decisions += [[esc(f'{f["label"]}, line {row["line"]}'), esc(d["text"]),
                           esc(d["step"]), esc(d["reason"])] for d in row["decisions"]]
        head = "".join(f'<th style="{HEAD_CELL}">{h}</th>'
                       for h in ("line", "produced", "time", "equations", "source"))
        parts.append(f'<div style="font-weight:600;margin-top:0.4em">{esc(f["label"])} '
                     f'<span style="{NOTE}">({esc(", ".join(f["functions"]))})</span></div>'
                     f'<table class="nbjax-source" style="{TABLE}"><thead><tr>{head}</tr>'
                     f'</thead><tbody>{"".join(rows)}</tbody></table>')
    parts.append(note(source["note"]))
    if decisions:
        parts.append(section("Fusion decisions, line by line",
                             table(["line", "equation", "step", "decision"], decisions)))
    return "".join(parts)


def fusion_html(f):
    if f["note"]:
        return note(f["note"])
    steps = table(["step", "equations", "in", "out", "flops", "reason"], [
        [esc(s["label"].split(":")[0]),
         "<br>".join(esc(e["text"]) for e in s["eqns"]),
         esc(nbytes(s["bytes_in"])), esc(nbytes(s["bytes_out"])), esc(number(s["flops"])),
         esc(s["reason"])] for s in f["steps"]])
    decisions = table(["equation", "step", "decision"], [
        [esc(d["text"]), esc(d["step"]), esc(d["reason"])] for d in f["decisions"]])
    return steps + section("Why each equation went where it did", decisions)


def code_html(code):
    if not code["kernels"]:
        return note(code["note"])
    return "".join(section(k["name"], f'<pre style="{PRE}">{esc(k["loop"])}</pre>'
                           f'<pre style="{PRE}">{esc(k["optimised_ir"])}</pre>')
                   for k in code["kernels"])


def timing_html(t):
    summary = [
        ["calls", esc(t["call_count"])],
        ["last call", esc(seconds(t["last_seconds"]))],
        ["median call", esc(seconds(t["median_seconds"]))],
        ["NumPy, one call per operation", esc(seconds(t.get("numpy_seconds")))],
        ["speed-up over NumPy", esc(number(t.get("numpy_speedup"), "×"))],
        ["nbjax eager (no jit)", esc(seconds(t["eager_seconds"]))],
        ["speed-up over nbjax eager", esc(number(t["speedup"], "×"))],
    ]
    parts = [table(["", ""], summary), sparkline(t["calls"])]
    if t.get("baselines_note"):
        parts.append(note(t["baselines_note"]))
    parts.append(table(["compile phase", "time"],
                       [[esc(p["phase"]), esc(seconds(p["seconds"]))] for p in t["compile"]]))
    if t["steps"]:
        limits = t["limits"]
        parts.append(table(
            ["step", "time", "bytes", "GB/s", "GFLOP/s"],
            [[esc(s["label"]), esc(seconds(s["seconds"])),
              esc(nbytes(s["bytes_in"] + s["bytes_out"])), esc(number(s["gbps"])),
              esc(number(s["gflops"]))] for s in t["steps"]]))
        parts.append(note(f"this machine: {limits['gbps']:.3g} GB/s, "
                          f"{limits['gflops']:.3g} GFLOP/s ({limits['how']})"))
    return "".join(parts)


# --- the gradient view ----------------------------------------------------------------------

def grad_html(view, scale=1):
    g, s = view.grad, view.steps
    if not g:
        return wrap(view, "", scale)
    left = [r for r in g["rows"] if r["side"] == "left"]
    right = [r for r in g["rows"] if r["side"] == "right"]

    def column(rows):
        return "<br>".join(f'<code style="{CODE}">{esc(r["text"])}</code>' for r in rows)

    sides = table([g["sides"]["left"], g["sides"]["right"]], [[column(left), column(right)]])
    links = table(["operation", "source", g["sides"]["left"], g["sides"]["right"]], [
        [esc(link["origin"]), esc(link["source"]), esc(", ".join(link["left"])),
         esc(", ".join(link["right"]))] for link in g["links"]])
    parts = [section("Side by side", sides + section("Links (provenance)", links), True),
             section("Graph", graph(g["graph"], scale)),
             section("Source", source_html(g["source"], None)),
             section("Jaxpr", g["jaxpr"] + (g["hessian"]["jaxpr"] if g.get("hessian") else ""))]
    if s:
        parts.append(section("Step through (final state)", steps_html(s)))
    if g.get("memory"):
        parts.append(section("Memory (kept for the backward pass)", memory_html(g["memory"])))
    return wrap(view, "".join(parts), scale)


def memory_html(m):
    if "note" in m:
        return note(m["note"])
    values = table(["value", "size", "what it is", "computed at"], [
        [f'<code style="{CODE}">{esc(r["type"])}</code>', nbytes(r["bytes"]), esc(r["origin"]),
         esc(f'{r["source"]}:  {r["source_text"]}' if r["source"] else "")] for r in m["rows"]])
    return (f'<p><b>{nbytes(m["total"])}</b> kept for the backward pass in {len(m["rows"])} '
            f'values (the differentiated inputs: {nbytes(m["arguments"])})</p>'
            + values + note(m["hint"]))


def final_state(steps):
    """Node id -> (value, derivative) after replaying every step."""
    values, derivs = {}, {}
    for step in steps["steps"]:
        values.update(step["values"])
        derivs.update(step["derivs"])
    return values, derivs


NONFINITE = re.compile(r"\b(nan|inf|NaN)\b")


def nonfinite(text):
    """Escaped text with NaN and inf in red, where a student should look."""
    return NONFINITE.sub(rf'<span style="color:{th.ERROR};font-weight:bold">\1</span>', esc(text))


def steps_html(s):
    values, derivs = final_state(s)
    rows = [[esc(r.get("name", r["id"])), f'<code style="{CODE}">{esc(r["text"])}</code>',
             nonfinite(values.get(r["id"], "")), nonfinite(derivs.get(r["id"], ""))]
            for r in s["rows"]]
    return note(f"seed: {s['seed']}") + table(["variable", "", "value", s["derivative"]], rows)

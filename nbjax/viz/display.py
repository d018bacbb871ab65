"""Rich display of jaxprs in notebooks: the coloured text and, when Graphviz is installed,
the graph as SVG.

The HTML is static and self-contained (inline styles, inline SVG, a ``<details>`` element to
fold the graph; no scripts, no event handlers), so it still shows in nbconvert HTML exports
and on GitHub, where the live widgets of the notebook layer do not run.
"""

import html
import sys

from ..core.jaxpr import ClosedJaxpr, Jaxpr
from .dot import GraphvizNotFoundError, fit_width, hidden_identities_note, to_dot, to_svg
from .grouping import check_group
from .model import DEFAULT_BUDGET, build_model
from .text import annotate, pre_html
from .theme import GRAPH_CARD, MUTED, text_style

_NOTE_STYLE = f"color:{MUTED};font-size:0.92em;margin:0.3em 0"
# Longer texts are shown uncoloured: a span per token would multiply a saved notebook's size.
COLOUR_LIMIT = 100_000
_GRAPH_BOX_STYLE = f"overflow:auto;max-height:42em;margin-top:0.3em;{GRAPH_CARD}"


class JaxprView:
    """A jaxpr shown as text and graph; ``view(j, budget=None)`` draws every node;
    ``scale`` enlarges text and graph (presenting); ``group`` ("line" or "function")
    draws each source line's or function's equations in a cluster; ``hide_identities``
    leaves the equations that change nothing (``mul x 1.0``) out of the graph (the text
    keeps them)."""

    def __init__(self, jaxpr, *, fusion=None, budget=DEFAULT_BUDGET, graph=True, scale=1,
                 group=None, hide_identities=False):
        self.jaxpr, self.fusion, self.budget, self.graph = jaxpr, fusion, budget, graph
        self.scale, self.group = scale, check_group(group)
        self.hide_identities = bool(hide_identities)

    def html(self):
        annotated = annotate(self.jaxpr)
        colour = len(annotated.text) <= COLOUR_LIMIT
        style = text_style(self.scale)
        parts = [f'<div class="nbjax-view" data-nbjax-view="jaxpr" style="{style}">',
                 pre_html(annotated.html if colour else html.escape(annotated.text))]
        if self.graph:
            parts.append(self.graph_html(annotated))
        parts.append("</div>")
        return "".join(parts)

    def graph_html(self, annotated):
        try:
            model = build_model(self.jaxpr, annotated, self.fusion, self.budget,
                                group=self.group, hide_identities=self.hide_identities)
            svg = fit_width(to_svg(to_dot(model)), self.scale)
        except GraphvizNotFoundError as e:
            return f'<p class="nbjax-note" style="{_NOTE_STYLE}">Graph not shown: ' \
                   f'{html.escape(str(e))}</p>'
        shown = len(model["nodes"]) - model["hidden"] - (1 if model["truncated"] else 0)
        summary = f"graph: {shown} nodes"
        if model["truncated"]:
            summary += (f" shown, {model['hidden']} hidden (budget {model['budget']}); "
                        "nbjax.viz.view(jaxpr, budget=None) shows all")
        if model["identities_hidden"]:
            summary += "; " + hidden_identities_note(model["identities_hidden"])
        return (f'<details class="nbjax-graph" open><summary style="{_NOTE_STYLE}">'
                f'{html.escape(summary)}</summary>'
                f'<div style="{_GRAPH_BOX_STYLE}">{svg}</div></details>')

    def __repr__(self):
        return str(self.jaxpr)

    def _repr_html_(self):
        return self.html()

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": str(self.jaxpr)}
        if _html_wanted(include, exclude):
            bundle["text/html"] = self.html()
        return bundle


def view(jaxpr, *, fusion=None, budget=DEFAULT_BUDGET, graph=True, scale=1, group=None,
         hide_identities=False):
    """A displayable view of a jaxpr; ``budget=None`` shows the whole graph; ``group``:
    "line" or "function" clusters the equations by their source; ``hide_identities``
    leaves ``mul x 1.0`` and the like out of the graph."""
    return JaxprView(jaxpr, fusion=fusion, budget=budget, graph=graph, scale=scale,
                     group=group, hide_identities=hide_identities)


def _html_wanted(include, exclude):
    """Whether the front end asked for HTML. IPython asks for every type (include=None)
    even in a terminal, so there we look at the types its formatter has switched on,
    rather than run Graphviz for output nobody sees."""
    if exclude and "text/html" in exclude:
        return False
    if include is not None:
        return "text/html" in include
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    formatter = getattr(shell, "display_formatter", None)
    return formatter is None or "text/html" in formatter.active_types


def _repr_html_(self):
    return JaxprView(self)._repr_html_()


def _repr_mimebundle_(self, include=None, exclude=None):
    return JaxprView(self)._repr_mimebundle_(include, exclude)


def install_display_hooks():
    """Give Jaxpr and ClosedJaxpr their rich display (viz sits above core, so the core
    classes receive these methods from here instead of importing viz)."""
    for cls in (Jaxpr, ClosedJaxpr):
        cls._repr_html_ = _repr_html_
        cls._repr_mimebundle_ = _repr_mimebundle_

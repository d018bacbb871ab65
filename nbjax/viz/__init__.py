"""``nbjax.viz``: jaxprs as graphs and coloured text, static HTML/SVG, rich display.

- ``graph_model(jaxpr, fusion=None, budget=150, hide_identities=False)``: the graph as
  JSON-able data (``hide_identities`` leaves ``mul x 1.0`` and the like out).
- ``to_dot(model)`` / ``to_svg(dot)``: draw it with Graphviz.
- ``jaxpr_html(jaxpr)``: ``str(jaxpr)`` with syntax colouring, equations linked to node ids.
- ``pipeline.PipelineView(stages)``: jaxprs of a transformation pipeline side by side,
  linked stage to stage (``%transform``).
- ``view(jaxpr, budget=None)``: text and graph for a notebook; importing this package also
  makes every Jaxpr/ClosedJaxpr display that way.
"""

from .display import JaxprView, install_display_hooks, view
from .dot import GraphvizNotFoundError, dot_available, fit_width, to_dot, to_svg
from .model import DEFAULT_BUDGET, graph_model, representatives
from .text import annotate, jaxpr_html

__all__ = ["DEFAULT_BUDGET", "GraphvizNotFoundError", "JaxprView", "annotate",
           "dot_available", "fit_width", "graph_model", "jaxpr_html", "representatives",
           "to_dot", "to_svg", "view"]

install_display_hooks()

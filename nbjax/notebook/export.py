"""``save_view``: any view as a standalone HTML file, for slides and handouts.

The file is the view's static rendering (the same HTML a saved notebook shows: inline
styles, inline SVG, no script, nothing loaded from the network), in a page of its own, so it
opens from disk, offline, in any browser, or goes into a slide deck as is.
"""

import html
from pathlib import Path

from ..core.jaxpr import ClosedJaxpr, Jaxpr
from ..viz import JaxprView
from ..viz.pipeline import PipelineView
from .options import session
from .widgets import NbjaxView

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body {{ margin: 1.5em; background: #ffffff; color: #111827; }}
.nbjax-live-hint {{ display: none; }}
[style*="max-height"] {{ max-height: none !important; }} /* a page scrolls; no inner boxes */
</style></head>
<body>
{body}
</body></html>
"""


def save_view(view, path, *, present=None):
    """Write ``view`` as a standalone HTML file at ``path`` and return its ``Path``.

    ``view`` is a compiler or gradient view (``f.view()``, or the one a ``%%jit``/``%%grad``
    cell showed), a function such a cell defined (``f``, ``grad_f``: its latest view), the
    result of ``%jaxpr`` or ``%transform``, or a jaxpr (``nbjax.make_jaxpr(f)(x)``).
    ``present=True`` enlarges text and graphs for a projector; by default the file follows
    ``%nbjax --present``.
    """
    scale = session.scale if present is None else session.scale_for(present)
    title, body = _title_and_html(view, scale)
    path = Path(path)
    path.write_text(PAGE.format(title=html.escape(title), body=body), encoding="utf-8")
    return path


def _title_and_html(view, scale):
    watchers = [w for w in getattr(view, "watchers", ()) if isinstance(w, NbjaxView)]
    if watchers:
        view = watchers[-1]
    elif hasattr(view, "watchers"):
        raise ValueError(f"{getattr(view, 'name', view)!r} has no view to save: show one "
                         "(f.view(), or %%jit/%%grad without --quiet) and call it first")
    if isinstance(view, NbjaxView):
        return f"{view.title} ({view.view} view)", view.static_html(scale)
    if isinstance(view, (Jaxpr, ClosedJaxpr)):
        view = JaxprView(view)
    if isinstance(view, (JaxprView, PipelineView)):
        saved, view.scale = view.scale, scale
        try:
            return ("jaxpr" if isinstance(view, JaxprView) else "pipeline"), view.html()
        finally:
            view.scale = saved
    raise TypeError(f"save_view: cannot save a {type(view).__name__}; expected an nbjax "
                    "view, a function a %%jit/%%grad cell defined, a %jaxpr or %transform "
                    "result, or a jaxpr")

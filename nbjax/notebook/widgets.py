"""The views: anywidget widgets whose whole state is JSON traitlets.

The browser module (``extension/nbjax_widgets.js``) renders that JSON and writes back only
what the user chose (``tab``, ``selected``, ``step``, ``show_all``); nothing is sent as
HTML with scripts or event handlers.

A view is displayed as two outputs: first a static HTML rendering of its state
(``static.py``), then the widget. Front ends do not fall back to a widget output's own
``text/html`` when the widget's model is gone (a reopened notebook shows "Error displaying
widget: model not found"; nbconvert writes network widget scripts when the widget state was
saved), so the static rendering is an output of its own, which every front end and exporter
shows. While the live widget is on the page, the widgets' stylesheet hides the static output
just before it; when it is not, the static output's own style rule hides the widget's error.

Updates are throttled: a function called in a tight loop updates its view at most every
``min_interval`` seconds; whatever is left is sent when the cell finishes (``after_cell``,
an IPython ``post_run_cell`` hook), which also refreshes the static HTML of the views
that changed.
"""

import logging
import time
import weakref

import anywidget
import traitlets
from IPython.display import display

from . import static
from .assets import read_asset
from .grad_state import grad_states, hessian_state
from .jit_state import compiled_state, timing_state
from .options import session
from .panes import failure_text, new_prefix, short_error

logger = logging.getLogger("nbjax.notebook")

_pending_views = weakref.WeakSet()
_shown_views = weakref.WeakSet()


class NbjaxView(anywidget.AnyWidget):
    """Shared plumbing: the browser module, throttled updates, the static fallback."""

    _esm = read_asset("nbjax_widgets.js")
    _css = read_asset("nbjax.css")

    view = traitlets.Unicode().tag(sync=True)  # which renderer: "jit" or "grad"
    title = traitlets.Unicode().tag(sync=True)
    status = traitlets.Dict().tag(sync=True)  # {"state": waiting|busy|ready|error, "message"}
    panes = traitlets.List(traitlets.Unicode()).tag(sync=True)
    tab = traitlets.Unicode("").tag(sync=True)  # the open pane (set by the browser)
    selected = traitlets.Unicode("").tag(sync=True)  # the selected node id (browser)
    scale = traitlets.Float(1.0).tag(sync=True)  # text and graph size (presenting: larger)
    # the graph's equations grouped by source "line" or "function", or not ("") (browser)
    group = traitlets.Unicode("").tag(sync=True)
    # the graph leaves out the equations that change nothing (mul x 1.0) (browser)
    hide_identities = traitlets.Bool(False).tag(sync=True)

    min_interval = 0.2  # seconds between two updates sent while cells run

    def __init__(self, **kwargs):
        super().__init__(scale=session.scale, **kwargs)
        self._pending = {}
        self._last_sent = 0.0
        self._handle = self._static_handle = None
        self._static_stale = False

    # -- updates ---------------------------------------------------------------------------

    def schedule(self, key, build):
        """Queue ``build()`` (-> {trait: value}) under ``key`` (a later one replaces it);
        run it now unless an update went out less than ``min_interval`` ago."""
        self._pending[key] = build
        _pending_views.add(self)
        if time.monotonic() - self._last_sent >= self.min_interval:
            self.flush()

    def flush(self):
        """Build and send everything queued."""
        pending, self._pending = self._pending, {}
        _pending_views.discard(self)
        values = {}
        for key, build in pending.items():
            try:
                values.update(build())
            except Exception as e:  # a view must never break the user's program
                logger.warning("nbjax view %r: could not build %s", self.title, key,
                               exc_info=True)
                values["status"] = {"state": "error",
                                    "message": f"could not show the {key}: {short_error(e)}"}
        if values:
            with self.hold_sync():
                for name, value in values.items():
                    setattr(self, name, value)
            self._static_stale = True
        self._last_sent = time.monotonic()

    # -- display ---------------------------------------------------------------------------

    def show(self):
        """Display the view under the current cell: its static rendering, then the live
        widget (both updated in place later)."""
        self._static_handle = display(self.static_bundle(), raw=True, display_id=True)
        data, metadata = self._repr_mimebundle_()
        self._handle = display(data, metadata=metadata, raw=True, display_id=True)
        self._static_stale = False
        _shown_views.add(self)

    def _ipython_display_(self):
        """``display(view)``, or a view as a cell's result, shows both outputs too."""
        self.show()

    def refresh_static(self):
        """Re-publish the static output so it matches the view's state (what a saved
        notebook or an export shows)."""
        if self._static_handle is not None and self._static_stale:
            self._static_stale = False
            self._static_handle.update(self.static_bundle(), raw=True)

    def static_bundle(self):
        """The static output's MIME bundle (HTML, and text for plain front ends)."""
        return {"text/html": static.standalone(self.static_html()),
                "text/plain": f"<nbjax {self.view} view of {self.title}: re-run its cell "
                              "to make it live>"}

    def static_html(self, scale=None):
        """The static rendering, at ``scale`` (default: the view's own)."""
        raise NotImplementedError

    def tell(self, state, message):
        """Set the status now (not throttled): a phase that is starting, or a failure."""
        self.status = {"state": state, "message": message}
        self._static_stale = True

    def on_phase(self, watched, message):
        self.tell("busy", message)

    def on_failure(self, watched, error):
        self.tell("error", failure_text(error))

    def close(self):
        """Close the view and its layout, a widget of its own that ipywidgets would keep
        in its registry after the view is gone."""
        self.layout.close()
        super().close()

    def __repr__(self):
        return f"<{type(self).__name__} of {self.title}>"


def rescale_views(scale):
    """Enlarge or shrink back every view shown (``%nbjax --present``): live at once, the
    static copies after the cell."""
    for view in list(_shown_views):
        view.scale = scale
        view._static_stale = True


def after_cell(result=None):
    """post_run_cell: measure the timing baselines asked for (outside the user's calls),
    send the updates throttled during the cell, refresh static HTML."""
    for view in list(_shown_views):
        if isinstance(view, CompilerView) and view.wants_baselines:
            view.measure_baselines()
    for view in list(_pending_views):
        view.flush()
    for view in list(_shown_views):
        view.refresh_static()


class CompilerView(NbjaxView):
    """What ``nbjax.jit`` did with one function: graph, jaxprs, fusion, code, timing.

    Attached to a WatchedJit, it is told of every call; the compiled panes are rebuilt
    when a call traces or compiles a new signature, the timing on every call."""

    compiled = traitlets.Dict().tag(sync=True)
    timing = traitlets.Dict().tag(sync=True)
    show_all = traitlets.Bool(False).tag(sync=True)  # draw every node (browser sets it)
    toggled = traitlets.List(traitlets.Unicode()).tag(sync=True)  # clusters opened/closed
    measure = traitlets.Int(0).tag(sync=True)  # "measure the baselines" clicks (browser)
    comp = None  # the Compilation shown (None before the first call, and while constructed)

    def __init__(self, watched, panes=None):
        panes = list(panes or session.panes)
        super().__init__(view="jit", title=watched.name, panes=panes, tab=panes[0])
        self.prefix = new_prefix()
        self.watched, self.comp = watched, None
        self.status = {"state": "waiting",
                       "message": f"not compiled yet: call {watched.name}(...)"}
        watched.add_watcher(self)
        if watched.current is not None:
            self.on_call(watched, watched.current)

    @property
    def wants_timing(self):
        """Whether the timing pane is shown (the baselines are measured for it only)."""
        return "timing" in self.panes

    @property
    def wants_baselines(self):
        """Whether the user asked for the timing baselines: the Timing pane is open, or
        ``%nbjax --baselines on``."""
        return self.wants_timing and (self.tab == "timing" or session.baselines)

    @traitlets.observe("tab", "measure")
    def _asked(self, change):
        """The Timing pane opened or its button clicked (between cells): measure now."""
        if change["name"] == "measure" or self.wants_baselines:
            self.measure_baselines()

    def measure_baselines(self):
        """Time the current compilation's baselines if they are still to be measured (the
        watched function tells its views, this one included, through ``on_baselines``)."""
        if self.comp is not None:
            self.watched.measure_baselines(self.comp)

    def on_baselines(self, watched, comp):
        if comp is self.comp:
            self.schedule("calls", lambda: self._calls(comp))
            self.flush()

    def on_call(self, watched, comp):
        if comp is not self.comp:
            self.comp = comp
            self.schedule("compiled", lambda: self._compiled(comp))
        self.schedule("calls", lambda: self._calls(comp))

    def _calls(self, comp):
        calls = "call" if comp.call_count == 1 else "calls"
        values = {"status": {"state": "ready",
                             "message": f"compiled for {comp.signature} on the {comp.backend} "
                                        f"backend; {comp.call_count} {calls}"}}
        if {"timing", "source"} & set(self.panes):  # the source pane's time per line too
            values["timing"] = timing_state(comp)
        return values

    def _compiled(self, comp):
        return {"compiled": compiled_state(comp, self.panes, self.prefix, self.show_all,
                                           self.toggled, self.group or None,
                                           self.hide_identities)}

    @traitlets.observe("show_all", "toggled", "group", "hide_identities")
    def _redraw(self, change):
        if self.comp is not None:
            self.schedule("compiled", lambda: self._compiled(self.comp))
            self.flush()

    def detach(self):
        """Stop watching (the function's calls no longer update this view)."""
        self.watched.remove_watcher(self)

    def close(self):
        self.detach()
        super().close()

    def static_html(self, scale=None):
        return static.jit_html(self, self.scale if scale is None else scale)


GRAD_PANES = ("linked", "graph", "source", "steps", "memory", "jaxpr")


class GradView(NbjaxView):
    """Forward and backward computation of ``grad_f`` side by side, linked by provenance,
    and a step-through of the derivative on the last concrete input."""

    grad = traitlets.Dict().tag(sync=True)  # linked_state + hessian
    steps = traitlets.Dict().tag(sync=True)  # the walk
    step = traitlets.Int(0).tag(sync=True)  # the browser's current step
    toggled = traitlets.List(traitlets.Unicode()).tag(sync=True)  # clusters opened/closed

    def __init__(self, fun, mode, argnums, names, watches):
        name = fun.__name__
        super().__init__(view="grad", title=name, panes=list(GRAD_PANES), tab=GRAD_PANES[0])
        self.fun, self.mode, self.argnums, self.names = fun, mode, argnums, names
        self.prefixes = (new_prefix(), new_prefix())
        first = " or ".join(f"{w.__name__}(...)" for w in watches)
        self.status = {"state": "waiting", "message": f"not traced yet: call {first}"}
        self.hessian = None
        self.last_input = None
        for w in watches:
            w.watchers.append(self)

    def on_input(self, watch, args, kwargs):
        if watch.kind == "hess":
            self.schedule("hessian", lambda: self._hessian(args, kwargs))
        else:
            self.schedule("grad", lambda: self._grad(args, kwargs))

    @traitlets.observe("toggled", "group", "hide_identities")
    def _redraw(self, change):
        """Clusters opened or closed, grouping chosen, or identities hidden or shown, in
        the browser: redraw the graphs."""
        if self.last_input is not None:
            self.schedule("grad", lambda: self._states(*self.last_input))
            self.flush()

    def _states(self, args, kwargs):
        linked, steps = grad_states(self.fun, args, kwargs, self.argnums, self.mode,
                                    self.names, self.prefixes, self.toggled,
                                    self.group or None, self.hide_identities)
        linked["hessian"] = self.hessian
        linked.update(name=self.title, mode=self.mode, wrt=list(self.names))
        return {"grad": linked, "steps": steps}

    def _grad(self, args, kwargs):
        self.last_input = (args, kwargs)
        values = self._states(args, kwargs)
        values.update(step=0, status={
            "state": "ready",
            "message": f"{'reverse' if self.mode == 'rev' else 'forward'} mode, at the last "
                       f"input of grad_{self.title}"})
        return values

    def _hessian(self, args, kwargs):
        self.hessian = hessian_state(self.fun, args, kwargs, self.argnums)
        values = {"grad": dict(self.grad, hessian=self.hessian)} if self.grad else {}
        if not self.grad:
            values.update(self._grad(args, kwargs))
        return values

    def static_html(self, scale=None):
        return static.grad_html(self, self.scale if scale is None else scale)


__all__ = ["CompilerView", "GradView", "after_cell"]

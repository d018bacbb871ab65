"""nbjax in Jupyter: ``%load_ext nbjax`` registers the magics and the live views.

Magics (each accepts ``--help``; bad options raise a short usage error)
-----------------------------------------------------------------------
- ``%%jit [--static NAMES] [--backend cpu|gpu|reference] [--show PANES] [--quiet]``:
  every function defined at the cell's top level becomes ``nbjax.jit`` of itself (a
  ``WatchedJit``); one compiler view per function appears under the cell and updates on
  every call. ``f.view()`` displays another view later (e.g. after ``--quiet``). Its code
  pane shows every stage of each kernel's code (on the gpu: LLVM IR, PTX, what ``ptxas``
  says of its registers and spills). ``--backend gpu`` (here, and in ``%transform`` and
  ``%nbjax``) on a machine without CuPy, a CUDA driver or a GPU is a usage error saying
  which is missing.
- ``%%grad [--wrt NAMES] [--order 1|2] [--mode rev|fwd] [--quiet]``: for each function
  ``f`` also defines ``grad_f`` (and ``hess_f`` with ``--order 2``) and shows a gradient
  view, filled at the first call of ``grad_f``/``hess_f``.
- ``%jaxpr [--budget N|all] [--text] EXPR``: the jaxpr of a call (``%jaxpr f(x)``,
  ``%jaxpr grad(f)(x)``), as text and graph.
- ``%transform [--with T1,T2,...] [--batch N] [--backend B] EXPR`` (options before or
  after the call): ``%transform f(x) --with grad,vmap,jit`` shows the jaxprs of ``f``,
  ``grad(f)`` and ``vmap(grad(f))`` side by side, then the kernels ``jit`` compiles; each
  stage's new equations are coloured (grad: blue forward derivatives, orange backward pass)
  and every equation links (``← sin (e0)``) to those of the previous stage it came from,
  found from the provenance and source line tracing recorded. ``--with`` takes grad,
  value_and_grad, jacfwd, jacrev, hessian, vmap, jit (last); from a ``vmap`` on, array
  arguments get a leading batch axis of ``--batch`` copies (default 4), or the axes
  ``--in-axes`` gives per positional argument (``None,0,0``: the first shared, as
  ``vmap(g, in_axes=(None, 0, 0))`` for per-example gradients). Static HTML
  (``<div class="nbjax-pipeline" data-nbjax-view="transform">``, one ``nbjax-stage``
  column per stage, equations ``nbjax-stage-eqn`` with ``data-from``), so it survives
  saving and export.
- ``%nbjax [--backend B] [--panes PANES] [--x64 on|off] [--present [on|off]]
  [--baselines on|off]``: show or set session options. ``--present`` (presenting, for
  projectors) enlarges the text and graphs of every view by
  ``nbjax.viz.theme.PRESENT_SCALE``, those already shown included; ``--present off``
  shrinks them back. ``--baselines on`` times every view's Timing baselines (NumPy and
  nbjax eager runs of the traced program) after each cell; off (the default), a view times
  them when its Timing pane is opened or its "measure the baselines" button clicked,
  between cells, so no call of the user's pays for them.

Views follow the notebook's theme (JupyterLab's light or dark, its content font size),
through JupyterLab's ``--jp-*`` CSS variables, with light colours where they are missing;
graphs keep their colours on a light card.

Saving a view for slides
------------------------
``nbjax.notebook.save_view(view, "file.html", present=None)`` writes a view as a
standalone HTML file (its static rendering: inline styles and SVG, no script, no network)
and returns the path. ``view`` is a view (``f.view()``), a function a ``%%jit``/``%%grad``
cell defined (its latest view: ``save_view(f, ...)``, ``save_view(grad_loss, ...)``), the
result of ``%jaxpr``/``%transform`` (``v = _``) or a jaxpr; ``present=True`` writes it
enlarged (default: as ``%nbjax --present`` says).

The cell keeps ordinary Python semantics: a syntax error is an ordinary SyntaxError, the
last expression is displayed as the cell's result, and an exception raised inside a user
function shows a traceback ending at the user's cell line (nbjax's frames are removed;
``NBJAX_TRACEBACK_FILTERING=off`` keeps them).

Views and their JSON state (``widgets.py``)
-------------------------------------------
``CompilerView`` (``view == "jit"``): traitlets ``status`` ({state: waiting|busy|ready|error,
message}; "not compiled yet: call f(...)" before the first call, "tracing f(...)…" and
"compiling f…" while the first call of a signature traces and compiles, "the last call
failed (Cell In[4], line 3): TypeError: ..." after a failed call), ``panes``, ``tab``,
``selected``, ``show_all``, ``toggled`` (sub-jaxpr clusters opened or closed),
``compiled`` ({name, backend, signature, graph_of, graph, jaxpr, fusion, code}: see
``jit_state.compiled_state``) and ``timing`` ({call_count,
calls, last_seconds, median_seconds, eager_seconds, speedup, numpy_seconds, numpy_speedup,
compile, steps, limits}:
``jit_state.timing_state``). ``GradView`` (``view == "grad"``): ``grad`` (rows of both
sides with provenance, ``links``, the graph, the jaxpr, the Hessian's) and ``steps``
(the step-through: ``rows``, ``steps`` each with ``values``/``derivs`` updates, a
``cond``'s taken branch stepped into with node ids ``e4/branches1/e0``: see
``grad_steps``) and ``step``. Every view's MIME bundle also carries static HTML (inline SVG and tables, no
script) for nbconvert and GitHub.

Stable ``data-testid`` attributes of the browser side (``extension/nbjax_widgets.js``)
-------------------------------------------------------------------------------------
Both views:

- ``nbjax-view``: the root element; ``data-view`` is ``jit`` or ``grad``, ``data-state``
  is ``waiting``, ``busy``, ``ready`` or ``error``.
- ``nbjax-title``, ``nbjax-status`` (the status message, e.g. "not compiled yet: ...").
- ``nbjax-tab-<pane>`` (tab buttons; the open one has ``aria-selected="true"``) and
  ``nbjax-pane-<pane>`` (pane containers; closed ones are ``hidden``). Panes of a compiler
  view: ``graph``, ``source``, ``jaxpr``, ``fusion``, ``code``, ``timing``; of a gradient view:
  ``linked``, ``graph``, ``source``, ``steps``, ``memory``, ``jaxpr``.
- ``nbjax-graph``: the graph container (an inline Graphviz SVG); ``nbjax-graph-note``
  replaces the SVG when Graphviz is missing. In the SVG, ``nbjax-node-<id>`` on each node's
  ``<g>`` (ids as in ``nbjax.viz.graph_model``: ``in0``, ``c0``, ``e3``, ``out0``) and
  ``nbjax-kernel-<index>`` on each fusion kernel's cluster. A selected node gets the class
  ``nbjax-selected``; nodes of the same operation in a gradient graph ``nbjax-linked``.
- Graph tools: the SVG sits in ``nbjax-graph-viewport`` (a scrolling box), sized to fit
  the box's width (never above its natural size, never below half of it) and opened at the
  top left, where the inputs are (Graphviz puts inputs on the top row, outputs on the
  bottom one); ``nbjax-graph-zoom-in``, ``nbjax-graph-zoom-out`` and ``nbjax-graph-fit``
  (buttons; Ctrl+wheel zooms too, dragging pans), the scale in the graph's ``data-zoom``;
  ``nbjax-graph-search`` (a search box: nodes whose text contains the query get the class
  ``nbjax-found``) and ``nbjax-graph-found`` ("3 found"); ``nbjax-graph-group`` (a select:
  no grouping, by line, by function; sets the view's ``group``);
  ``nbjax-graph-hide-identities`` (a checkbox: sets the view's ``hide_identities``, the graph
  then leaving out ``mul x 1.0`` and the like, its label and legend saying how many). Grouped, each source group
  is a cluster; the details of its equations have a ``nbjax-toggle-<cluster id>`` button (the
  group's id: ``src-e3``, after its first node) folding it into one node of that id (and
  unfolding it from there). Static renderings fit the same way
  (``nbjax.viz.fit_width``), without zoom.
- ``nbjax-node-details``: what clicking a node shows (equation, type, source line, kernel,
  fusion decision). ``nbjax-show-all``: button drawing every node of a truncated graph.
  In a compiler view, the details of a node owning sub-jaxprs (``cond``, ``scan``...) have
  ``nbjax-toggle-<cluster id>`` buttons opening or closing each (e.g.
  ``nbjax-toggle-e3/branches0``). An unrolled loop's repeated steps are drawn once, in a box
  "× N" (``nbjax.viz.model.find_repeats``); the details of any node of that block have a
  toggle button unfolding it, whose cluster id is the repeat's (``repeat-e0``: its first
  node's; listed with the clusters, with ``members``).
- ``nbjax-source`` (the Source pane: source lines beside the graph, which moves there while
  the pane is open), ``nbjax-source-line-<file>-<line>`` (a row per line; ``<file>``
  counts the files shown from 0; ``data-kernels`` its number of plan steps, ``data-heat``
  its time (compiler view; before any call, and in a gradient view, its number of
  equations) relative to the hottest line's), ``nbjax-source-details`` (what clicking a
  line shows) with ``nbjax-source-decisions`` (its fusion decisions, compiler view).
  Clicking a line gives its equations' graph nodes the class ``nbjax-line-node``.

Compiler view:

- ``nbjax-jaxpr`` (pane body), ``nbjax-jaxpr-traced``, ``nbjax-jaxpr-optimised``.
- ``nbjax-fusion`` (pane body), ``nbjax-fusion-step-<index>`` (one table row per plan
  step), ``nbjax-fusion-decisions``.
- ``nbjax-code`` (pane body), ``nbjax-code-kernel-<name>`` and
  ``nbjax-code-mode-<loop|ir|optimised_ir>`` (buttons), ``nbjax-code-text`` (the ``<pre>``).
- ``nbjax-timing`` (pane body), ``nbjax-call-count`` (the number of calls),
  ``nbjax-speedup-numpy`` (over NumPy), ``nbjax-speedup`` (over nbjax eager),
  ``nbjax-measure-baselines`` (the button, while the baselines are not measured),
  ``nbjax-baselines-note`` (why they are not),
  ``nbjax-sparkline`` (an ``<svg>`` whose ``data-points`` is the number of call samples),
  ``nbjax-compile-phases``, ``nbjax-step-times``.

Gradient view:

- ``nbjax-grad-forward`` and ``nbjax-grad-backward``: the two columns (forward / backward
  pass; primal / tangents in forward mode); ``nbjax-row-<id>`` each equation's row
  (``data-provenance`` = its operation), ``nbjax-selected`` on the clicked row and
  ``nbjax-linked`` on the rows of the same operation; ``nbjax-link-details``.
- Step-through: ``nbjax-step-reset``, ``nbjax-step-prev``, ``nbjax-step-play``,
  ``nbjax-step-next`` (buttons), ``nbjax-step-position`` ("step k / n"),
  ``nbjax-step-text``, ``nbjax-stepper-graph`` (its current node has class
  ``nbjax-current``), ``nbjax-step-table`` with rows ``nbjax-step-row-<id>`` and cells
  ``nbjax-value-<id>`` and ``nbjax-deriv-<id>`` (accumulated cotangent, or tangent); the
  table names each row by the jaxpr's variable (graph nodes read ``c = mul``), a backward
  step's text gives each operand's chain-rule product (``b̄ += c̄ · a = 1 × 0.7 = 0.7``),
  and NaN/inf are ``nbjax-nonfinite`` (red).
- Memory: ``nbjax-memory`` (the pane's content, a note in forward mode),
  ``nbjax-memory-total``, ``nbjax-memory-values`` (one row per value reverse mode keeps).
- ``nbjax-grad-jaxpr``, ``nbjax-hessian``.

The static fallback's root is ``<div class="nbjax-static" data-nbjax-view="jit|grad">``.
"""

from .cells import syntax_checker
from .export import save_view
from .magics import NbjaxMagics
from .options import session
from .widgets import after_cell

__all__ = ["load_ipython_extension", "unload_ipython_extension", "save_view", "session"]


def load_ipython_extension(ipython):
    """Register the magics, the check that reports a syntax error in a magic's cell as an
    ordinary one, and the hook that sends throttled view updates after each cell."""
    unload_ipython_extension(ipython)  # loading twice must not register twice
    ipython.register_magics(NbjaxMagics)
    check = syntax_checker(ipython)
    check.nbjax = True
    ipython.input_transformers_cleanup.append(check)
    ipython.events.register("post_run_cell", after_cell)


def unload_ipython_extension(ipython):
    if after_cell in ipython.events.callbacks["post_run_cell"]:
        ipython.events.unregister("post_run_cell", after_cell)
    ipython.input_transformers_cleanup[:] = [
        t for t in ipython.input_transformers_cleanup if not getattr(t, "nbjax", False)]

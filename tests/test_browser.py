"""Notebooks in a real browser: headless Chromium (Debian's, driven by Playwright) against
JupyterLab 4 and Notebook 7, each started hermetically on a free local port.

Each test runs ``notebooks/01_tour.ipynb`` from top to bottom (small sizes), then checks what
a user sees: the compiler view's graph has the expected kernel clusters, clicking a node
shows its details, calling the function again adds a sample to the timing pane while the
page is open, the ``%%grad`` step-through advances, and the browser console shows no errors.
Another runs a chapter of the book (``notebooks/ch04_differentiation.ipynb``) end to end: its
live view and its matplotlib figure show, and no cell fails.
Screenshots go to tests/artifacts/ (ignored by git).

The tests skip, with the reason, where Playwright, JupyterLab/Notebook 7 or the browser are
not installed; ``NBJAX_BROWSER`` names another Chromium-family binary than /usr/bin/chromium.
``playwright install`` is never needed (nor run): the browser is the system's. Each flag and
setting says why where it is made.
"""

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import jupyterlab_theme_css, kernels_over_ipc

ROOT = Path(__file__).resolve().parents[1]
TOUR = ROOT / "notebooks" / "01_tour.ipynb"
CHAPTER = ROOT / "notebooks" / "ch04_differentiation.ipynb"   # one of the quickest chapters
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
BROWSER = os.environ.get("NBJAX_BROWSER", "/usr/bin/chromium")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage"]
SERVER_START_S = 60
RUN_ALL_MS = 120_000      # the whole notebook
UI_MS = 20_000            # an element appearing or changing

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install -e .[test])")
sync_api.expect.set_options(timeout=UI_MS)
pytestmark = [
    pytest.mark.skipif(not (os.path.isfile(BROWSER) and os.access(BROWSER, os.X_OK)),
                       reason=f"no browser at {BROWSER} (apt-get install chromium, or set "
                              "NBJAX_BROWSER to a Chromium binary)"),
    pytest.mark.xdist_group("browser"),   # one server + browser at a time (--dist loadgroup)
]

APPS = {
    # front end: (the module that starts its server, the URL path of the notebooks' folder)
    "lab": ("jupyterlab", "lab/tree/"),
    "notebook7": ("notebook", "notebooks/"),
}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


class Server:
    """A Jupyter server of one front end, private to a test: its own port, token, folders
    (configuration, data, runtime, IPython) and process group, serving a copy of one
    notebook."""

    def __init__(self, app, tmp, notebook):
        self.app, self.tmp, self.notebook = app, tmp, notebook.name
        self.port, self.token = _free_port(), f"nbjax-{os.getpid()}-{time.monotonic_ns()}"
        self.root = tmp / "root"
        self.root.mkdir()
        shutil.copy(notebook, self.root / notebook.name)   # the run saves nothing into the repo
        self.env = self._environment()
        self.log_path = tmp / "server.log"
        self.log = self.process = None

    def _environment(self):
        env = dict(os.environ)
        dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data",
                "JUPYTER_RUNTIME_DIR": "runtime", "IPYTHONDIR": "ipython"}
        for name, sub in dirs.items():
            env[name] = str(self.tmp / sub)
        env.pop("JUPYTER_PATH", None)
        env["NBJAX_NOTEBOOK_SMALL"] = "1"
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        # The notebook's "python3" kernel is this interpreter, whatever else is installed.
        _write_json(self.tmp / "data" / "kernels" / "python3" / "kernel.json", {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"})
        _write_json(self.tmp / "config" / "jupyter_config.json", kernels_over_ipc(self.tmp))
        # Every cell stays in the DOM (JupyterLab 4 virtualises long notebooks otherwise).
        settings = self.tmp / "config" / "lab" / "user-settings" / "@jupyterlab"
        _write_json(settings / "notebook-extension" / "tracker.jupyterlab-settings",
                    {"windowingMode": "none"})
        # No "get notified about Jupyter news?" toast over the page.
        _write_json(settings / "apputils-extension" / "notification.jupyterlab-settings",
                    {"fetchNews": "false", "checkForUpdates": False})
        return env

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def start(self):
        module = APPS[self.app][0]
        command = [
            sys.executable, "-m", module, f"--ServerApp.root_dir={self.root}",
            "--ip=127.0.0.1", f"--port={self.port}", "--ServerApp.port_retries=0",
            "--no-browser", "--allow-root", f"--IdentityProvider.token={self.token}",
            "--expose-app-in-browser",
            # No network at start-up. These are JupyterLab's options, which Notebook 7's
            # server also loads (its own app class rejects them).
            "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
            "--LabApp.check_for_updates_class="
            "jupyterlab.handlers.announcements.NeverCheckForUpdate"]
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(command, env=self.env, cwd=self.root, stdout=self.log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {module} server exited:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}api/status?token={self.token}",
                                            timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the {module} server did not answer in {SERVER_START_S} s:\n"
                           f"{self.log_text()}")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.log is not None:
            self.log.close()

    def log_text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def running_server(app, tmp, notebook=TOUR):
    """A started server of front end ``app`` serving a copy of ``notebook``; its log is
    printed if the block fails."""
    if importlib.util.find_spec(APPS[app][0]) is None:
        pytest.skip(f"{APPS[app][0]} is not installed (pip install -e .[test])")
    srv = Server(app, tmp, notebook)
    try:
        srv.start()
        yield srv
    except BaseException:
        print(f"--- {app} server log ---\n{srv.log_text()}")
        raise
    finally:
        srv.stop()


@pytest.fixture
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=BROWSER, headless=True,
                                              args=BROWSER_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def artifacts_dir():
    """tests/artifacts/, which ignores itself (a ``*`` .gitignore inside)."""
    ARTIFACTS.mkdir(exist_ok=True)
    ignore = ARTIFACTS / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return ARTIFACTS


# --- driving the notebook -------------------------------------------------------------------

KERNEL_READY = """() => {
    // The execution indicator says "idle" before a kernel exists; a run-all issued then
    // runs nothing. Wait for the kernel itself.
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const session = panel && panel.sessionContext && panel.sessionContext.session;
    const kernel = session && session.kernel;
    return !!kernel && kernel.connectionStatus === "connected" && kernel.status === "idle";
}"""

CELL_ERRORS = """() => {
    const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
    const errors = [];
    for (let i = 0; i < cells.length; i++) {
        const cell = cells.get(i);
        if (cell.type !== "code") continue;
        for (let j = 0; j < cell.outputs.length; j++) {
            const out = cell.outputs.get(j).toJSON();
            if (out.output_type === "error") errors.push(`cell ${i}: ${out.ename}: ${out.evalue}`);
        }
    }
    return errors;
}"""

# Run-all returns before the cells have run. They are done when every code cell has an
# execution count and the kernel is idle, or when one failed (the kernel then skips the rest).
ALL_CELLS_RAN = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const cells = panel.content.model.cells;
    let pending = false;
    for (let i = 0; i < cells.length; i++) {
        const cell = cells.get(i);
        if (cell.type === "code" && (cell.executionCount === null
                                     || cell.executionState === "running")) pending = true;
    }
    const failed = (%s)().length > 0;
    return panel.sessionContext.session.kernel.status === "idle" && (failed || !pending);
}""" % CELL_ERRORS

EXECUTE = """async (code) => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    const reply = await kernel.requestExecute({code, store_history: false}).done;
    return reply.content.status;
}"""

# Errors the front ends log by themselves, with any notebook: (front end, message).
KNOWN_FRONT_END_ERRORS = [
    # Notebook 7.6's keyboard-shortcut settings listener reads the schema of a plugin that
    # is not loaded (seen with an empty notebook and no nbjax at all).
    ("notebook7", "Cannot read properties of undefined (reading 'schema')"),
]


def watch_console(page, app):
    """A list that collects the page's errors (console errors and uncaught exceptions)
    that are not known front-end noise."""
    problems = []

    def add(kind, text):
        if (app, text) not in KNOWN_FRONT_END_ERRORS:
            problems.append(f"{kind}: {text}")
    page.on("console", lambda m: add("console", m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: add("exception", str(e)))
    return problems


def run_notebook(page, server):
    """Open the server's notebook, run every cell, and check that none failed."""
    page.goto(f"{server.url}{APPS[server.app][1]}{server.notebook}?token={server.token}")
    page.wait_for_function(KERNEL_READY, timeout=UI_MS * 2)
    assert page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(ALL_CELLS_RAN, timeout=RUN_ALL_MS)
    assert page.evaluate(CELL_ERRORS) == []


def view_of(page, title):
    """The nbjax view whose title is ``title``."""
    title_el = page.get_by_test_id("nbjax-title").get_by_text(title, exact=True)
    return page.get_by_test_id("nbjax-view").filter(has=title_el)


def check_views_are_ready(page):
    expect = sync_api.expect
    views = page.get_by_test_id("nbjax-view")
    expect(views).to_have_count(3)
    for title, kind in (("fast_power_sum", "jit"), ("selu", "jit"), ("sum_of_cubes", "grad")):
        view = view_of(page, title)
        expect(view).to_have_attribute("data-view", kind)
        expect(view).to_have_attribute("data-state", "ready")
        assert_no_placeholder_text(view)
    # each view's static copy (for saved notebooks and exports) is hidden while it is live
    assert page.locator(".nbjax-static").count() == 3
    expect(page.locator(".nbjax-static:visible")).to_have_count(0)


def assert_no_placeholder_text(view):
    """No missing value leaked into the page as text ("null", "undefined")."""
    text = view.inner_text()
    assert "null" not in text and "undefined" not in text, text


def check_graph_and_node_details(page, shots):
    """Each element-wise function is one fused kernel: one coloured cluster in the graph,
    one step in the fusion plan. Clicking an equation shows its source line and kernel."""
    expect = sync_api.expect
    for title in ("fast_power_sum", "selu"):
        view = view_of(page, title)
        graph = view.get_by_test_id("nbjax-graph")
        expect(graph.locator("svg")).to_have_count(1)
        kernels = graph.locator('[data-testid^="nbjax-kernel-"]')
        expect(kernels).to_have_count(1)
        assert "kernel 0" in kernels.first.text_content()   # its label (an SVG <text>)
        plan = view.get_by_test_id("nbjax-fusion").locator('[data-testid^="nbjax-fusion-step-"]')
        expect(plan).to_have_count(1)
    view = view_of(page, "fast_power_sum")
    node = view.get_by_test_id("nbjax-node-e1")
    node.scroll_into_view_if_needed()
    node.click()
    expect(node).to_have_class(re.compile(r"\bnbjax-selected\b"))
    details = view.get_by_test_id("nbjax-node-details")
    expect(details).to_contain_text("return x + x * x + x * x * x")
    expect(details).to_contain_text("kernel 0")
    expect(details).to_contain_text("f32[200,200]")
    view.screenshot(path=shots / "graph-node-details.png")


def check_timing_updates_live(page, shots):
    """Another call of the function, made while the page is open, adds a sample."""
    expect = sync_api.expect
    view = view_of(page, "fast_power_sum")
    view.get_by_test_id("nbjax-tab-timing").click()
    count = view.get_by_test_id("nbjax-call-count")
    expect(count).to_be_visible()
    before = int(count.inner_text())
    assert before >= 6   # the notebook's own calls: the check and five timed ones
    assert page.evaluate(EXECUTE, "fast_power_sum(x).block_until_ready()") == "ok"
    expect(count).to_have_text(str(before + 1))
    expect(view.get_by_test_id("nbjax-sparkline")).to_have_attribute("data-points",
                                                                      str(before + 1))
    view.screenshot(path=shots / "timing.png")


def check_grad_step_through(page, shots):
    """Stepping walks the forward values, then the backward pass down to the input's
    cotangent, which is the gradient 3 x**2 = [3, 12, 27, 48]."""
    expect = sync_api.expect
    view = view_of(page, "sum_of_cubes")
    view.get_by_test_id("nbjax-tab-steps").click()
    position = view.get_by_test_id("nbjax-step-position")
    expect(position).to_have_text(re.compile(r"^step 1 / \d+$"))
    total = int(position.inner_text().split("/")[1])
    next_button = view.get_by_test_id("nbjax-step-next")
    next_button.click()
    expect(position).to_have_text(f"step 2 / {total}")
    expect(view.get_by_test_id("nbjax-value-e0")).to_contain_text("64.")   # x**3 at 4
    for step in range(3, total + 1):
        next_button.click()
        expect(position).to_have_text(f"step {step} / {total}")
    cotangent = view.get_by_test_id("nbjax-deriv-in0").inner_text()
    assert [float(v) for v in re.findall(r"\d+\.?\d*", cotangent)] == [3, 12, 27, 48]
    assert_no_placeholder_text(view)
    view.screenshot(path=shots / "grad-steps.png")


@contextlib.contextmanager
def notebook_run(app, tmp_path, browser, notebook, shots):
    """A page of front end ``app`` on which every cell of ``notebook`` has run without an
    error; on leaving, a screenshot of the page, and a check that its console stayed clean."""
    shots.mkdir(parents=True, exist_ok=True)
    with running_server(app, tmp_path, notebook) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(UI_MS)
        problems = watch_console(page, app)
        try:
            run_notebook(page, server)
            yield page
        finally:
            page.screenshot(path=shots / "page.png")
        assert problems == []


@pytest.mark.parametrize("app", list(APPS))
def test_tour_in_the_browser(app, tmp_path, browser):
    shots = artifacts_dir() / app
    with notebook_run(app, tmp_path, browser, TOUR, shots) as page:
        check_views_are_ready(page)
        check_graph_and_node_details(page, shots)
        check_timing_updates_live(page, shots)
        check_grad_step_through(page, shots)


def check_chapter_shows_its_view_and_figure(page, shots):
    """Chapter 4's one view (``%%grad`` of the least-squares loss ``mse``) is live and filled
    in by the descent that follows it; its loss curve shows as matplotlib's image."""
    expect = sync_api.expect
    expect(page.get_by_test_id("nbjax-view")).to_have_count(1)
    view = view_of(page, "mse")
    expect(view).to_have_attribute("data-view", "grad")
    expect(view).to_have_attribute("data-state", "ready")
    assert_no_placeholder_text(view)
    expect(page.locator(".nbjax-static:visible")).to_have_count(0)
    view.screenshot(path=shots / "view.png")
    images = page.locator(".jp-OutputArea-output img")
    expect(images.first).to_be_visible()
    for i in range(images.count()):   # each figure decoded, not a broken image
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 100"), i


# Of the side-by-side pane: what sticks out of the view, or out of its own box (text hidden).
OVERFLOW = """(view) => {
  const right = view.getBoundingClientRect().right, out = [];
  for (const el of view.querySelectorAll('.nbjax-columns, .nbjax-column, .nbjax-row')) {
    const box = el.getBoundingClientRect();
    if (box.right > right + 0.5 || el.scrollWidth > el.clientWidth + 1)
      out.push({cls: el.className, right: box.right, viewRight: right,
                scroll: el.scrollWidth, client: el.clientWidth});
  }
  return {out, rows: view.querySelectorAll('.nbjax-row').length,
          viewClipped: view.scrollWidth > view.clientWidth + 1}; }"""


def check_side_by_side_fits(page, shots):
    """At 1400x900 the side-by-side pane of ``mse`` (long ``dot_general`` equations) fits
    its view: no column or row sticks out of it, no text is hidden (rows wrap)."""
    page.set_viewport_size({"width": 1400, "height": 900})
    view = view_of(page, "mse")
    view.get_by_test_id("nbjax-tab-linked").click()
    sync_api.expect(view.get_by_test_id("nbjax-grad-backward")).to_be_visible()
    found = view.evaluate(OVERFLOW)
    assert found["rows"] >= 6 and found["out"] == [] and not found["viewClipped"], found
    backward = view.get_by_test_id("nbjax-grad-backward").bounding_box()
    assert backward["width"] > 200, backward
    view.screenshot(path=shots / "side-by-side.png")


@pytest.mark.parametrize("app", list(APPS))
def test_book_chapter_in_the_browser(app, tmp_path, browser):
    shots = artifacts_dir() / app / CHAPTER.stem
    with notebook_run(app, tmp_path, browser, CHAPTER, shots) as page:
        check_chapter_shows_its_view_and_figure(page, shots)
        check_side_by_side_fits(page, shots)


# --- an export, offline --------------------------------------------------------------------

def test_exported_views_render_offline(browser, tmp_path, monkeypatch):
    """``jupyter nbconvert --execute --to html`` of a notebook with a compiler view and a
    gradient view, opened from disk with every network request refused: both views show,
    filled in (graph, tables), each once."""
    nbclient = pytest.importorskip("nbclient")  # noqa: F841 (the export runs a kernel)
    from test_notebooks import export_html, private_jupyter
    page_path = export_html(private_jupyter(tmp_path, monkeypatch))
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    refused = []

    def refuse(route):
        refused.append(route.request.url)
        route.abort()
    page.route(re.compile(r"^https?://"), refuse)
    page.goto(page_path.as_uri())
    views = page.locator(".nbjax-static")
    sync_api.expect(views).to_have_count(2)
    for i, kind in enumerate(("jit", "grad")):
        view = views.nth(i)
        assert view.get_attribute("data-nbjax-view") == kind
        box = view.bounding_box()
        assert box and box["height"] > 50 and box["width"] > 200, box
    assert views.nth(0).locator("svg").count() >= 1
    assert "compiled for f32[16]" in views.nth(0).inner_text()
    page.screenshot(path=artifacts_dir() / "export-offline.png", full_page=True)


# --- a view alone, without a Jupyter server --------------------------------------------------

# The widget module rendered into a plain page, with a stand-in for anywidget's model that
# keeps the state the kernel sent and fires "change:<name>" when the browser sets a trait.
STANDALONE_PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}</style>
</head><body style="margin:8px"><div id="out" style="width:{width}px"></div>{extra}
<script type="module">
import widget from "data:text/javascript;base64,{module}";
const state = {state};
const handlers = {{}};
const model = {{
  get: (k) => state[k],
  set: (k, v) => {{ state[k] = v; for (const f of handlers["change:" + k] || []) f(); }},
  save_changes: () => {{}},
  on: (e, f) => {{ (handlers[e] = handlers[e] || []).push(f); }},
  off: () => {{}},
}};
widget.render({{ model, el: document.getElementById("out") }});
window.nbjaxModel = model;
window.nbjaxReady = true;
</script></body></html>"""


def render_standalone(browser, view, width=1300, css="", extra=""):
    """A page showing ``view`` (an NbjaxView) as the widget module draws it, with ``css``
    after the widgets' own and the HTML ``extra`` after the view."""
    import base64
    from nbjax.notebook import assets
    module = base64.b64encode(assets.read_asset("nbjax_widgets.js").encode()).decode()
    state = {name: getattr(view, name) for name in view.trait_names(sync=True)
             if not name.startswith("_") and name not in ("layout", "comm", "keys", "tabbable",
                                                          "tooltip")}
    page = browser.new_page(viewport={"width": width + 100, "height": 900})
    page.set_content(STANDALONE_PAGE.format(css=assets.read_asset("nbjax.css") + css,
                                            width=width, module=module, extra=extra,
                                            state=json.dumps(state)))
    page.wait_for_function("() => window.nbjaxReady === true")
    return page


WIDE = ("def wide(x):\n"
        "    parts = [jnp.sin(x * float(i)) + jnp.cos(x) * float(i) for i in range(6)]\n"
        "    return sum(parts)\n", "wide(np.ones(3, np.float32))")


def _jit_view(options="--show graph", function=WIDE):
    """A compiler view on the reference backend (no compile time) of ``function`` (its
    source and a call), by default one whose graph is wider than its box (six parallel
    chains summed)."""
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    source, call = function
    cell = f"%%jit --backend reference {options}\n{source}"
    for code in ("import nbjax.numpy as jnp\nimport numpy as np", cell, call):
        shell.run_cell(code).raise_error()
    (view,) = shell.user_ns[call.split("(")[0]].watchers
    view.flush()
    return view


def _big_view():
    return _jit_view()


def test_big_graph_fits_its_box_zooms_pans_and_finds_nodes(browser):
    """A graph wider than its box opens shrunk to the box's width at the top left (the
    inputs), zooms in and out around the centre, pans by dragging (a drag that ends on a
    node does not select it), and the search box outlines the matching nodes."""
    expect = sync_api.expect
    view = _big_view()
    ops = [n["primitive"] for n in view.compiled["graph"]["nodes"].values()]
    page = render_standalone(browser, view)
    graph = page.get_by_test_id("nbjax-graph")
    box = page.get_by_test_id("nbjax-graph-viewport")
    svg = box.locator("svg")
    expect(graph).to_have_attribute("data-zoom", re.compile(r"^0\.\d+$"))
    fitted = float(graph.get_attribute("data-zoom"))
    width = lambda: svg.evaluate("s => s.getBoundingClientRect().width")  # noqa: E731
    inner = box.evaluate("b => b.clientWidth")
    assert 0.5 <= fitted < 1 and inner - 10 <= width() <= inner
    assert box.evaluate("b => [b.scrollLeft, b.scrollTop]") == [0, 0]
    top_row = page.get_by_test_id("nbjax-node-in0").bounding_box()
    assert top_row["y"] - box.bounding_box()["y"] < 80  # the inputs are the first row
    page.get_by_test_id("nbjax-graph-zoom-in").click()
    page.get_by_test_id("nbjax-graph-zoom-in").click()
    assert float(graph.get_attribute("data-zoom")) == pytest.approx(fitted * 1.5625, rel=1e-2)
    assert width() > inner  # now it scrolls
    before = box.evaluate("b => b.scrollLeft")
    b = box.bounding_box()
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + 100)
    page.mouse.down()
    page.mouse.move(b["x"] + b["width"] / 2 - 150, b["y"] + 100, steps=5)
    page.mouse.up()
    assert box.evaluate("b => b.scrollLeft") > before
    expect(page.locator("g.nbjax-selected")).to_have_count(0)
    page.get_by_test_id("nbjax-graph-fit").click()
    expect(graph).to_have_attribute("data-zoom", f"{fitted:.3f}")
    page.get_by_test_id("nbjax-graph-search").fill("cos")
    found = page.locator("g.nbjax-found")
    expect(found).to_have_count(ops.count("cos"))
    assert all("cos" in found.nth(i).text_content() for i in range(ops.count("cos")))
    expect(page.get_by_test_id("nbjax-graph-found")).to_have_text(f"{ops.count('cos')} found")
    page.get_by_test_id("nbjax-graph-search").fill("sin")
    expect(found).to_have_count(ops.count("sin"))
    assert ops.count("sin") == 6
    page.screenshot(path=artifacts_dir() / "big-graph.png")
    page.close()


# --- the notebook's theme and font size -----------------------------------------------------

# Over the visible text of an element: the lowest contrast ratio (WCAG) between a text's
# colour and the background it is drawn on (the ancestors' backgrounds composited, alpha
# included), with the worst text. SVG text (Graphviz) is checked apart.
CONTRAST = """(root) => {
  const rgba = (c) => { const m = c.match(/[\\d.]+/g).map(Number);
                        return m.length === 4 ? m : [...m, 1]; };
  const over = (top, under) => top.slice(0, 3).map((v, i) => v * top[3] + under[i] * (1 - top[3]));
  const lum = (c) => { const f = (v) => { v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const background = (el) => { const chain = [];
    for (let e = el; e; e = e.parentElement) chain.unshift(getComputedStyle(e).backgroundColor);
    return chain.reduce((under, c) => over(rgba(c), under), [255, 255, 255]); };
  let worst = {ratio: 100, text: "", color: "", background: ""};
  for (const el of [root, ...root.querySelectorAll("*")]) {
    if (el.closest("svg") || !el.getClientRects().length) continue;
    const own = [...el.childNodes].filter(n => n.nodeType === 3 && n.textContent.trim());
    if (!own.length) continue;
    const bg = background(el), fg = over(rgba(getComputedStyle(el).color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    if (ratio < worst.ratio) worst = {ratio, text: own[0].textContent.trim().slice(0, 60),
                                      color: getComputedStyle(el).color, background: bg};
  }
  return worst;
}"""

LUMINANCE = """(el) => {
  const m = getComputedStyle(el).backgroundColor.match(/[\\d.]+/g).map(Number);
  return (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255; }"""


def _other_static_views():
    """The static HTML of a jaxpr's rich display and of a %transform pipeline whose last
    stage is compiled (the kernels' coloured boxes)."""
    import nbjax
    import nbjax.numpy as jnp
    from nbjax.notebook.transform import pipeline

    def f(x):
        return jnp.sum(jnp.sin(x) * x)
    x = jnp.ones(3)
    stages = pipeline(f, "f", (x,), {}, ("grad", "vmap", "jit"), backend="cpu")
    return nbjax.make_jaxpr(nbjax.grad(f))(x)._repr_html_() + stages.html()


def _check_contrast(page, locator, where):
    worst = locator.evaluate(CONTRAST)
    assert worst["ratio"] >= 4.5, f"{where}: {worst}"


def test_views_follow_the_dark_theme_and_font_size(browser):
    """Under JupyterLab's dark theme (its own CSS variables) with a larger content font, the
    live view and its static rendering are dark, every visible text in every pane keeps a
    contrast of at least 4.5 (WCAG AA) with the background it is drawn on, the font follows
    the theme's size, and the graph sits on a light card; without the variables (a plain
    page) the views are light."""
    view = _jit_view("--show all")
    dark = jupyterlab_theme_css("dark") + (  # the page's background, as JupyterLab's
        ":root { --jp-content-font-size1: 17px; } body { background: var(--jp-layout-color0) }")
    static_html = (f'<div id="static" style="width:1300px">{view.static_html()}'
                   f"{_other_static_views()}</div>")
    page = render_standalone(browser, view, css=dark, extra=static_html)
    page.evaluate("() => { document.body.dataset.jpThemeLight = 'false'; }")  # as JupyterLab
    live, static = page.get_by_test_id("nbjax-view"), page.locator(".nbjax-static")
    for where, root in (("live", live), ("static", static)):
        assert root.evaluate(LUMINANCE) < 0.1, where
        assert root.evaluate("e => getComputedStyle(e).fontSize") == "17px", where
    tabs = live.locator(".nbjax-tab")
    assert tabs.count() >= 4
    for i in range(tabs.count()):
        tabs.nth(i).click()
        _check_contrast(page, live, f"live view, tab {tabs.nth(i).inner_text()}")
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
    _check_contrast(page, static, "static view")
    for kind in ("jaxpr", "transform"):
        other = page.locator(f'[data-nbjax-view="{kind}"]')
        assert other.evaluate("e => getComputedStyle(e).fontSize") == "17px", kind
        _check_contrast(page, other, f"{kind} view")
    assert page.locator(".nbjax-stage-step").count() >= 1  # kernels' boxes: light cards
    for svg_box in (page.get_by_test_id("nbjax-graph-viewport"),
                    static.locator("div:has(> svg)").first):
        assert svg_box.evaluate(LUMINANCE) > 0.9  # a light card behind the fixed colours
    page.screenshot(path=artifacts_dir() / "dark-theme.png", full_page=True)
    page.close()
    page = render_standalone(browser, view, extra=static_html)
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
    for root in (page.get_by_test_id("nbjax-view"), page.locator(".nbjax-static"),
                 page.locator('[data-nbjax-view="transform"]')):
        assert root.evaluate(LUMINANCE) > 0.9 or root.evaluate(LUMINANCE) == 0  # transparent
        _check_contrast(page, root, "light page")
    page.close()


def _grad_view():
    """A gradient view of a small loss of dict parameters, at one input."""
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    for code in ("import nbjax.numpy as jnp\nimport numpy as np",
                 "%%grad\ndef themed(params, x):\n"
                 "    return jnp.sum(jnp.tanh(x @ params['w'] + params['b']) ** 2)\n",
                 "grad_themed({'w': np.ones((3, 2), np.float32), 'b': np.zeros(2, np.float32)},"
                 " np.ones((4, 3), np.float32))"):
        shell.run_cell(code).raise_error()
    (view,) = shell.user_ns["grad_themed"].watchers
    view.flush()
    return view


@pytest.mark.parametrize("kind", ["grad", "jit"])
@pytest.mark.parametrize("name", ["light", "dark"])
def test_view_text_reaches_aa_in_jupyterlab_themes(browser, name, kind):
    """Every visible text of every pane of a gradient view (the backward pass's orange
    heading included) and of a compiler view keeps 4.5:1 on its background under
    JupyterLab's light and dark themes (their variables, and the ``data-jp-theme-light``
    JupyterLab puts on <body>), hovered tabs included."""
    css = jupyterlab_theme_css(name) + "body { background: var(--jp-layout-color0) }"
    view = _grad_view() if kind == "grad" else _jit_view("--show all")
    page = render_standalone(browser, view, css=css)
    light = "true" if name == "light" else "false"
    page.evaluate(f"() => {{ document.body.dataset.jpThemeLight = '{light}'; }}")
    live = page.get_by_test_id("nbjax-view")
    if kind == "grad":
        sync_api.expect(live.locator(".nbjax-column-right h4")).to_have_text("backward pass")
    tabs = live.locator(".nbjax-tab")
    for i in range(tabs.count()):
        tabs.nth(i).click()
        _check_contrast(page, live, f"{name} theme, tab {tabs.nth(i).inner_text()}")
    page.close()


def test_timing_pane_offers_to_measure_the_baselines(browser):
    """Until the baselines are measured the Timing pane says so and offers a button, which
    asks the kernel (the ``measure`` trait); no speed-up figure is shown meanwhile."""
    view = _jit_view("--show graph,timing")
    assert view.timing["baselines_pending"]
    page = render_standalone(browser, view)
    page.get_by_test_id("nbjax-tab-timing").click()
    sync_api.expect(page.get_by_test_id("nbjax-baselines-note")).to_contain_text(
        "not measured yet")
    sync_api.expect(page.get_by_test_id("nbjax-speedup-numpy")).to_have_text("–")
    page.get_by_test_id("nbjax-measure-baselines").click()
    assert page.evaluate("() => window.nbjaxModel.get('measure')") == 1
    page.close()
    view.measure += 1   # what the kernel does on that change: measure, and send the figures
    assert not view.timing["baselines_pending"] and view.timing["numpy_speedup"] > 0
    page = render_standalone(browser, view)
    page.get_by_test_id("nbjax-tab-timing").click()
    sync_api.expect(page.get_by_test_id("nbjax-measure-baselines")).to_have_count(0)
    sync_api.expect(page.get_by_test_id("nbjax-speedup-numpy")).to_have_text(re.compile(r"×$"))
    page.close()


# --- presenting and slides ------------------------------------------------------------------

def test_presenting_enlarges_a_live_view_and_a_saved_view_opens_offline(browser, tmp_path):
    """A live view's ``scale`` (``%nbjax --present``) enlarges its text and its graph's fit
    at once and back; ``save_view`` writes a page that opens from disk with every network
    request refused and shows the view, graph included, enlarged when asked."""
    from nbjax.notebook import save_view
    from nbjax.viz.theme import PRESENT_SCALE
    view = _jit_view("--show graph,jaxpr")
    page = render_standalone(browser, view, width=3000)  # room for the enlarged graph
    live, graph = page.get_by_test_id("nbjax-view"), page.get_by_test_id("nbjax-graph")
    font = lambda: live.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")  # noqa: E731
    assert font() == 13 and graph.get_attribute("data-zoom") == "1.000"
    page.evaluate(f"() => window.nbjaxModel.set('scale', {PRESENT_SCALE})")
    assert font() == pytest.approx(13 * PRESENT_SCALE)
    sync_api.expect(graph).to_have_attribute("data-zoom", f"{PRESENT_SCALE:.3f}")
    page.evaluate("() => window.nbjaxModel.set('scale', 1)")
    assert font() == 13
    sync_api.expect(graph).to_have_attribute("data-zoom", "1.000")
    page.close()

    path = save_view(view, tmp_path / "slide.html", present=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.route(re.compile(r"^https?://"), lambda route: route.abort())
    page.goto(path.as_uri())
    shown = page.locator('.nbjax-static[data-nbjax-view="jit"]')
    sync_api.expect(shown).to_be_visible()
    assert shown.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") == \
        pytest.approx(13 * PRESENT_SCALE)
    svg = shown.locator("svg").first.bounding_box()
    assert svg and svg["width"] > 100 and svg["height"] > 50
    assert [u for u in requests if not u.startswith("file:")] == []
    page.screenshot(path=artifacts_dir() / "saved-view.png", full_page=True)
    page.close()


def test_a_folded_loop_unfolds_from_any_node_of_its_block(browser):
    """An unrolled loop's step is drawn once in a box "× 6"; selecting any node of it
    offers the button that unfolds it (the browser asks the kernel by ``toggled``)."""
    view = _jit_view(function=(
        "def unrolled(x, w):\n    for _ in range(6):\n        x = jnp.tanh(x @ w) + x\n"
        "    return jnp.sum(x)\n",
        "unrolled(np.ones((2, 3), np.float32), np.ones((3, 3), np.float32))"))
    page = render_standalone(browser, view)
    assert page.locator("#repeat-e0").count() == 0  # ids carry the view's prefix
    box = page.locator("g.cluster[id$='repeat-e0']")
    sync_api.expect(box).to_contain_text("× 6")
    page.get_by_test_id("nbjax-node-e1").click()
    button = page.get_by_test_id("nbjax-toggle-repeat-e0")
    sync_api.expect(button).to_contain_text("▸ open repeated block × 6 (15 nodes)")
    button.click()
    assert page.evaluate("() => window.nbjaxModel.get('toggled')") == ["repeat-e0"]
    page.close()


# --- the annotated source pane --------------------------------------------------------------

TWO_LINES = ("def two_lines(x):\n    y = jnp.sin(x) * 2.0\n"
             "    return jnp.sum(jnp.exp(y) + y)\n", "two_lines(np.ones(8, np.float32))")


def test_clicking_a_source_line_highlights_its_graph_nodes(browser):
    """The Source pane lists the cell's lines with their kernels, the graph beside them;
    clicking a line outlines its equations' nodes and lists the fusion decisions about
    them; the graph goes back to its own pane after."""
    expect = sync_api.expect
    view = _jit_view("--backend cpu --show graph,source,fusion", function=TWO_LINES)
    (cell,) = view.compiled["source"]["files"]
    line = next(row for row in cell["lines"] if "jnp.sin" in row["text"])
    assert line["line"] == 3 and len(line["nodes"]) == 2  # sin, mul
    page = render_standalone(browser, view)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.get_by_test_id("nbjax-tab-source").click()
    pane = page.get_by_test_id("nbjax-source")
    expect(pane.get_by_test_id("nbjax-graph")).to_have_count(1)  # moved beside the lines
    row = page.get_by_test_id("nbjax-source-line-0-3")
    expect(row).to_have_attribute("data-kernels", str(len(line["kernels"])))
    expect(row).to_contain_text("y = jnp.sin(x) * 2.0")
    expect(page.locator("g.nbjax-line-node")).to_have_count(0)
    row.click()
    marked = page.locator("g.nbjax-line-node")
    expect(marked).to_have_count(len(line["nodes"]))
    for node in line["nodes"]:
        expect(page.get_by_test_id(f"nbjax-node-{node}")).to_have_class(
            re.compile(r"\bnbjax-line-node\b"))
    decisions = page.get_by_test_id("nbjax-source-decisions").locator("tbody tr")
    expect(decisions).to_have_count(len(line["decisions"]))
    expect(page.get_by_test_id("nbjax-source-details")).to_contain_text("line 3")
    pane.screenshot(path=artifacts_dir() / "source-pane.png")
    row.click()  # again: nothing selected
    expect(marked).to_have_count(0)
    page.get_by_test_id("nbjax-tab-graph").click()
    expect(page.get_by_test_id("nbjax-pane-graph").get_by_test_id("nbjax-graph")).to_have_count(1)
    page.get_by_test_id("nbjax-graph-group").select_option("line")  # the kernel redraws
    assert page.evaluate("() => window.nbjaxModel.get('group')") == "line"
    assert errors == []
    page.close()


def test_a_gradient_s_source_line_highlights_its_forward_and_backward_nodes(browser):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    for code in ("import nbjax.numpy as jnp\nimport numpy as np",
                 "%%grad\ndef two_lines(x):\n    y = jnp.sin(x) * x\n"
                 "    return jnp.sum(jnp.exp(y))\n", "grad_two_lines(np.ones(3, np.float32))"):
        shell.run_cell(code).raise_error()
    (view,) = shell.user_ns["grad_two_lines"].watchers
    view.flush()
    line = next(r for r in view.grad["source"]["files"][0]["lines"] if r["line"] == 3)
    page = render_standalone(browser, view)
    page.get_by_test_id("nbjax-tab-source").click()
    row = page.get_by_test_id("nbjax-source-line-0-3")
    sync_api.expect(row).to_contain_text(f"{len(line['nodes']) - line['backward']} fwd, "
                                         f"{line['backward']} bwd")
    row.click()
    marked = page.locator("g.nbjax-line-node")
    sync_api.expect(marked).to_have_count(len(line["nodes"]))
    assert {marked.nth(i).get_attribute("data-testid") for i in range(marked.count())} == \
        {f"nbjax-node-{n}" for n in line["nodes"]}
    # The Memory pane lists, row by row, what the backward pass keeps.
    page.get_by_test_id("nbjax-tab-memory").click()
    values = page.get_by_test_id("nbjax-memory-values").locator("tbody tr")
    sync_api.expect(values).to_have_count(len(view.grad["memory"]["rows"]))
    sync_api.expect(values.first).to_be_visible()
    sync_api.expect(page.get_by_test_id("nbjax-memory-total")).to_have_text(
        f"{view.grad['memory']['total']} B")
    page.close()


def test_the_step_through_highlights_the_branch_a_cond_takes(browser):
    """Stepping back through a cond's branch marks the step's node inside the branch taken
    as current, in the step-through's graph (the branch's cluster drawn open) and table,
    never a node of the branch not taken."""
    expect = sync_api.expect
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    for code in ("import nbjax\nimport nbjax.numpy as jnp\nimport numpy as np",
                 "%%grad\ndef branchy(x):\n    return jnp.sum(nbjax.lax.cond(\n"
                 "        jnp.sum(x) > 0, lambda a: jnp.sin(a) * a, lambda a: -a, x))\n",
                 "grad_branchy(np.ones(3, np.float32))"):
        shell.run_cell(code).raise_error()
    (view,) = shell.user_ns["grad_branchy"].watchers
    view.flush()
    s = view.steps
    (cond,) = [r["id"] for r in s["rows"] if " cond[" in r["text"]]
    node, other = f"{cond}/branches1/e1", f"{cond}/branches0/e0"  # sin(a) * a; -a
    k = next(st["index"] for st in s["steps"] if st["node"] == node and
             st["phase"] == "backward")
    page = render_standalone(browser, view)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.get_by_test_id("nbjax-tab-steps").click()
    pane = page.get_by_test_id("nbjax-pane-steps")
    for _ in range(k):
        page.get_by_test_id("nbjax-step-next").click()
    expect(page.get_by_test_id("nbjax-step-position")).to_have_text(
        f"step {k + 1} / {len(s['steps'])}")
    expect(page.get_by_test_id("nbjax-step-text")).to_contain_text("backward through")
    current = re.compile(r"\bnbjax-current\b")
    expect(pane.get_by_test_id(f"nbjax-node-{node}")).to_have_class(current)
    expect(page.get_by_test_id(f"nbjax-step-row-{node}")).to_have_class(current)
    expect(page.get_by_test_id(f"nbjax-deriv-{cond}/branches1/e0")).not_to_be_empty()
    expect(pane.get_by_test_id(f"nbjax-node-{other}")).not_to_have_class(
        re.compile(r"\bnbjax-(current|changed)\b"))
    expect(page.get_by_test_id(f"nbjax-step-row-{other}")).to_have_count(0)
    assert errors == []
    page.close()


def test_the_graph_toolbar_hides_identities_and_edges_name_their_values(browser):
    """The toolbar's checkbox asks the kernel (``hide_identities``) to leave out the
    equations that change nothing, and says how many it left out; hovering an edge or its
    label shows the value's name and type (an SVG link title)."""
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    for code in ("import nbjax.numpy as jnp\nimport numpy as np",
                 "%%grad\ndef ident_loss(x):\n    return jnp.sum(jnp.sin(x * 1.0) - 0.0)\n",
                 "grad_ident_loss(np.ones(3, np.float32))"):
        shell.run_cell(code).raise_error()
    (view,) = shell.user_ns["grad_ident_loss"].watchers
    view.hide_identities = True
    view.flush()
    hidden = view.grad["graph"]["identities_hidden"]
    assert hidden >= 2
    page = render_standalone(browser, view)
    page.get_by_test_id("nbjax-tab-graph").click()
    box = page.get_by_test_id("nbjax-pane-graph").get_by_test_id("nbjax-graph-hide-identities")
    sync_api.expect(box).to_be_checked()
    sync_api.expect(box.locator("xpath=..")).to_contain_text(f"({hidden} hidden)")
    titles = page.evaluate("""() => [...document.querySelectorAll(
        "[data-testid=nbjax-pane-graph] g.edge")].map((g) => [...g.querySelectorAll("a")]
        .map((a) => a.getAttribute("xlink:title") || a.getAttributeNS(
            "http://www.w3.org/1999/xlink", "title")))""")
    assert titles and all(len(t) == 2 and t[0] == t[1] and ": f32" in t[0]
                          for t in titles if t), titles  # the line's and the label's
    box.click()
    assert page.evaluate("() => window.nbjaxModel.get('hide_identities')") is False
    page.close()


# --- graphs grouped by function: nested calls -----------------------------------------------

NESTED_CALLS = (
    "def relu(x):\n    return jnp.maximum(x, 0.0)\n\n"
    "def layer(w, b, x):\n    return relu(x @ w + b)\n",
    "%%jit --backend reference --show graph\n"
    "def mlp(w1, b1, w2, b2, x):\n    h = layer(w1, b1, x)\n"
    "    return jnp.sum(layer(w2, b2, h))\n",
    "mlp(np.ones((3, 4), np.float32), np.ones(4, np.float32), np.ones((4, 2), np.float32), "
    "np.ones(2, np.float32), np.ones((5, 3), np.float32))")


def _nested_calls_view():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    for code in ("import nbjax.numpy as jnp\nimport numpy as np", *NESTED_CALLS):
        shell.run_cell(code).raise_error()
    (view,) = shell.user_ns["mlp"].watchers
    view.group = "function"
    view.flush()
    return view


def _inside(inner, outer):
    return (outer["x"] <= inner["x"] and outer["y"] <= inner["y"]
            and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
            and inner["y"] + inner["height"] <= outer["y"] + outer["height"])


def test_function_groups_nest_and_fold_one_call_at_a_time(browser):
    """Grouped by function, mlp() holds layer() and layer() #2, each holding its relu():
    the clusters nest on the page; selecting a node of relu() #2 offers to close it, its
    layer and mlp() (not the other layer); closing layer() #2 leaves one box for it inside
    the open mlp()."""
    view = _nested_calls_view()
    groups = {c["name"]: c for c in view.compiled["graph"]["clusters"]}
    assert set(groups) == {"mlp()", "layer()", "relu()", "layer() #2", "relu() #2"}
    page = render_standalone(browser, view)

    def box(name):
        return page.locator(f"g.cluster[id$='{groups[name]['id']}']").bounding_box()
    assert _inside(box("layer() #2"), box("mlp()")) and _inside(box("relu() #2"), box("layer() #2"))
    assert not _inside(box("relu() #2"), box("layer()"))
    node = next(m for m in groups["relu() #2"]["members"] if not m.startswith("src-"))
    page.get_by_test_id(f"nbjax-node-{node}").click()
    offered = page.locator("[data-testid^='nbjax-toggle-src-']")
    sync_api.expect(offered).to_have_count(3)
    assert [t.split(" (")[0] for t in offered.all_inner_texts()] == [
        "▾ close mlp()", "▾ close layer() #2", "▾ close relu() #2"]
    page.get_by_test_id(f"nbjax-toggle-{groups['layer() #2']['id']}").click()
    toggled = page.evaluate("() => window.nbjaxModel.get('toggled')")
    assert toggled == [groups["layer() #2"]["id"]]
    page.close()

    view.toggled = toggled  # what the kernel does when the browser sets it
    view.flush()
    page = render_standalone(browser, view)
    folded = page.get_by_test_id(f"nbjax-node-{groups['layer() #2']['id']}")
    sync_api.expect(folded).to_be_visible()
    assert page.locator(f"g.cluster[id$='{groups['relu() #2']['id']}']").count() == 0
    assert _inside(folded.bounding_box(), box("mlp()"))
    page.close()

"""Every notebook in notebooks/ runs top to bottom in a real Jupyter kernel (nbclient), with
``NBJAX_NOTEBOOK_SMALL=1`` so that the notebooks use small arrays. The notebooks check their
own results with ``assert``s (a gradient against its formula, vmap against a loop...), so an
exception in any cell fails the test; the tests below also check that the rich outputs the
notebooks are for (graphs, compiler views, the benchmark chart, each chapter's views and
figures) were produced.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets.config import Config

from helpers import kernels_over_ipc

MISSING = "{} is not installed (pip install -e .[test])"
nbformat = pytest.importorskip("nbformat", reason=MISSING.format("nbformat"))
nbclient = pytest.importorskip("nbclient", reason=MISSING.format("nbclient"))
pytest.importorskip("ipykernel", reason=MISSING.format("ipykernel"))

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "nbjax-test"
CELL_TIMEOUT_S = 180
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


@pytest.fixture
def jupyter_env(tmp_path, monkeypatch):
    return private_jupyter(tmp_path, monkeypatch)


def private_jupyter(tmp_path, monkeypatch):
    """A private Jupyter/IPython configuration whose only kernel runs this interpreter (so
    the notebooks import the nbjax under test, whatever kernels the machine has), with the
    notebooks' small sizes switched on and kernels reached through IPC sockets."""
    spec_dir = tmp_path / "data" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nbjax tests", "language": "python"}))
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "jupyter_config.json").write_text(json.dumps(kernels_over_ipc(tmp_path)))
    for name, sub in (("JUPYTER_DATA_DIR", "data"), ("JUPYTER_CONFIG_DIR", "config"),
                      ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
        monkeypatch.setenv(name, str(tmp_path / sub))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "data"))
    monkeypatch.setenv("NBJAX_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")   # quiets the kernel's debugger
    return tmp_path


def execute(path, jupyter_folder):
    """The notebook at ``path``, executed in its own folder (as a user opening it would), by a
    kernel of ``private_jupyter``'s ``jupyter_folder``."""
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=KERNEL, timeout=CELL_TIMEOUT_S,
                                     config=Config(kernels_over_ipc(jupyter_folder)),
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def outputs(nb, mime):
    """The ``mime`` parts of every rich output of ``nb``, in order."""
    return [out["data"][mime] for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if mime in out.get("data", {})]


def views_under(nb, text):
    """The saved state of the widgets displayed by the first code cell whose source contains
    ``text`` (nbclient stores every widget's last state in the notebook's metadata)."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and text in c.source)
    states = nb.metadata["widgets"][WIDGET_STATE]["state"]
    return [states[out["data"][WIDGET_VIEW]["model_id"]]["state"] for out in cell.outputs
            if WIDGET_VIEW in out.get("data", {})]


def images_under(nb, text):
    """The PNG images (matplotlib's figures) shown by the first code cell whose source
    contains ``text``."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and text in c.source)
    return [out["data"]["image/png"] for out in cell.outputs if "image/png" in out.get("data", {})]


def assert_ready_view(nb, text, kind, title):
    """The cell containing ``text`` shows one ``kind`` view of ``title``, filled in by the
    calls of later cells (its status is no longer "waiting")."""
    views = views_under(nb, text)
    assert [(v["view"], v["title"]) for v in views] == [(kind, title)]
    assert views[0]["status"]["state"] == "ready", views[0]["status"]


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_tour.ipynb", "02_autodiff_classroom.ipynb", "03_seed_benchmarks.ipynb",
        "ch01_derivatives.ipynb", "ch02_forward_and_reverse.ipynb", "ch03_arrays.ipynb",
        "ch04_differentiation.ipynb", "ch05_jit.ipynb", "ch06_vmap_pmap.ipynb",
        "ch07_optimisers.ipynb", "ch08_rnn_lstm.ipynb", "ch09_case_study.ipynb",
        "ch10_physics.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_notebooks_are_valid_and_clean(path):
    """Stored without outputs, so that diffs show only what the author changed and nobody
    runs a stale result; the outputs appear when a reader runs the notebook."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert "widgets" not in nb.metadata


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, jupyter_env):
    nb = execute(path, jupyter_env)
    executed = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in executed)
    errors = [out for c in executed for out in c.outputs if out.output_type == "error"]
    assert not errors
    CHECKS.get(path.stem, check_book_chapter)(nb)


def check_tour(nb):
    # make_jaxpr's result displays as coloured text and a graph (or a note on installing
    # Graphviz); each %%jit cell shows a compiler view, compiled by the calls below it.
    assert 'data-nbjax-view="jaxpr"' in "\n".join(outputs(nb, "text/html"))
    assert_ready_view(nb, "def fast_power_sum(", "jit", "fast_power_sum")
    assert_ready_view(nb, "def selu(", "jit", "selu")
    assert_ready_view(nb, "def sum_of_cubes(", "grad", "sum_of_cubes")
    timing = views_under(nb, "def fast_power_sum(")[0]["timing"]
    assert timing["call_count"] >= 6   # the check and the five timed calls


def check_classroom(nb):
    assert images_under(nb, '"step size h"')   # the plot of error against step size
    for options in ("%%grad --mode fwd", "%%grad --wrt x1,x2"):
        assert_ready_view(nb, options, "grad", "y")
        steps = views_under(nb, options)[0]["steps"]
        assert steps["steps"], options   # something to step through


def check_benchmarks(nb):
    html = "\n".join(outputs(nb, "text/html"))
    assert 'data-testid="benchmark-table"' in html
    assert images_under(nb, "speedup_chart(report)")   # the chart of speed-ups
    for name in ("power_sum", "selu", "batched_matvec", "blur_473x716", "grad_1e6"):
        assert name in html


def check_book_chapter(nb):
    """A chapter of the book (notebooks/ch*.ipynb): every exercise cell (one calling
    ``check(...)`` at its top level) reports its placeholder as not attempted yet, every
    ``%%grad`` / ``%%jit`` cell shows its live view, filled in by the cells after it, and
    every unconditional ``plt.show()`` shows its figure."""
    cells = [c for c in nb.cells if c.cell_type == "code"]
    exercises = [c for c in cells if top_level_calls(c, "check(")]
    assert 2 <= len(exercises) <= 4
    for cell in exercises:
        shown = [out["data"]["text/plain"] for out in cell.outputs if "data" in out]
        assert len(shown) == 1 and "not attempted yet" in shown[0], (cell.source, shown)
    views = [(c, re.match(r"%%(grad|jit)\b", c.source)) for c in cells]
    assert any(magic for _, magic in views)   # each chapter shows off a view
    for cell, magic in views:
        if magic:
            function = re.search(r"^def (\w+)\(", cell.source, re.MULTILINE).group(1)
            assert_ready_view(nb, cell.source, magic.group(1), function)
    for cell in cells:   # (a conditional plt.show() may show a figure too)
        assert len(images_under(nb, cell.source)) >= top_level_calls(cell, "plt.show()"), \
            cell.source


def cell_output_html(nb, text):
    """The HTML shown by the first code cell whose source contains ``text``."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and text in c.source)
    return "\n".join(out["data"]["text/html"] for out in cell.outputs
                     if "text/html" in out.get("data", {}))


def check_jit_chapter(nb):
    """Chapter 5 also shows what grad and jit see of a pytree: its leaves, as inputs; and a
    DFT on complex numbers compiled as one kernel between two views of pairs of floats."""
    check_book_chapter(nb)
    html = cell_output_html(nb, "%transform model(")
    assert 'data-nbjax-view="transform"' in html and "jit(grad(model)) on" in html
    assert html.count("a:f32[2,3] b:f32[3] c:f32[] d:f32[2]") >= 2
    steps = views_under(nb, "def dft(")[0]["compiled"]["fusion"]["steps"]
    assert [step["kind"] for step in steps] == ["view", "kernel", "view"]


def check_vmap_chapter(nb):
    """Chapter 6 also shows the pipeline that builds per-example gradients, the parameters
    shared: the vmap stage's weight gradient has one batch axis more than the weights."""
    check_book_chapter(nb)
    html = cell_output_html(nb, "%transform loss(")
    assert 'data-nbjax-view="transform"' in html
    for label in ("grad(loss)", "vmap(grad(loss), in_axes=(None, 0, 0))",
                  "jit(vmap(grad(loss), in_axes=(None, 0, 0))) on"):
        assert label in html, label
    assert "f32[4,3,8]" in html and 'class="nbjax-stage-step"' in html


def check_rnn_chapter(nb):
    """Chapter 8 also shows a Python loop unrolled by jit, its 12 copies folded into one
    block in the graph."""
    check_book_chapter(nb)
    graph = views_under(nb, "def rnn_ahead(")[0]["compiled"]["graph"]
    assert "× 12" in graph["svg"] and "12 times" in graph["svg"]
    assert graph["hidden"] == 0 and not graph["truncated"]


def check_case_study(nb):
    """Chapter 9's %%grad takes the MLP's parameters, a list of (w, b) layers: each leaf is
    an input named by its path, and the step-through ends on each leaf's gradient."""
    check_book_chapter(nb)
    steps = views_under(nb, "def loss(params, x, y)")[0]["steps"]
    inputs = [r["text"] for r in steps["rows"] if r["id"].startswith("in")]
    assert [t.split(" (")[0] for t in inputs] == [
        "input params[0][0]", "input params[0][1]", "input params[1][0]", "input params[1][1]"]
    assert "f32[64,64]" in inputs[0]
    assert sorted(steps["steps"][-1]["derivs"]) == ["in0", "in1", "in2", "in3"]


def top_level_calls(cell, call):
    """How many lines of ``cell`` start with ``call`` (calls inside a loop, a condition or a
    function are not counted)."""
    return sum(line.startswith(call) for line in cell.source.splitlines())


CHECKS = {"01_tour": check_tour, "02_autodiff_classroom": check_classroom,
          "03_seed_benchmarks": check_benchmarks, "ch05_jit": check_jit_chapter,
          "ch06_vmap_pmap": check_vmap_chapter,
          "ch08_rnn_lstm": check_rnn_chapter, "ch09_case_study": check_case_study}


# --- exports ----------------------------------------------------------------------------------

EXPORTED_CELLS = [
    "%load_ext nbjax\nimport numpy as np\nimport nbjax.numpy as jnp",
    "%%jit\ndef exported_selu(x):\n    return jnp.where(x > 0, x, 1.67 * (jnp.exp(x) - 1.0))",
    "exported_selu(np.linspace(-2, 2, 16).astype(np.float32))",
    "%%grad\ndef exported_loss(params, x):\n    return jnp.sum(jnp.tanh(x @ params['W']))",
    "grad_exported_loss({'W': np.ones((3, 2), np.float32)}, np.ones((4, 3), np.float32))",
]


def export_html(folder):
    """``jupyter nbconvert --execute --to html`` of a small notebook with a compiler view and
    a gradient view (under ``jupyter_env``'s private kernel); the HTML file's path."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in EXPORTED_CELLS])
    path = Path(folder) / "exported.ipynb"
    nbformat.write(nb, path)
    subprocess.run([sys.executable, "-m", "nbconvert", "--execute", "--to", "html",
                    f"--ExecutePreprocessor.kernel_name={KERNEL}",
                    f"--ExecutePreprocessor.timeout={CELL_TIMEOUT_S}", str(path)],
                   check=True, capture_output=True, cwd=folder)
    return path.with_suffix(".html")


def test_nbconvert_export_shows_every_view_statically(jupyter_env):
    """Each view is exported as its static HTML (inline SVG and tables, no script of
    nbjax's), in its final state: what a handout shows with no network and no kernel."""
    html = export_html(jupyter_env).read_text()
    views = re.findall(r'<div class="nbjax-static" data-nbjax-view="(\w+)"', html)
    assert views == ["jit", "grad"]
    jit_part = html[html.index('data-nbjax-view="jit"'):html.index('data-nbjax-view="grad"')]
    assert "compiled for f32[16]" in jit_part and "<svg" in jit_part
    grad_part = html[html.index('data-nbjax-view="grad"'):]
    assert "reverse mode" in grad_part and re.search(r"input params\[(&#x27;|')W", grad_part)
    assert "not compiled yet" not in html and "not traced yet" not in html

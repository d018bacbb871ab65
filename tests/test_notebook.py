"""The notebook layer in-process: magics in IPython's InteractiveShell (no kernel, no browser).

What the browser is sent is tested as data: the JSON state of the views before and after
calls, the provenance links and step-through of the gradient view, the static HTML
fallbacks. Real-browser tests live in tests/test_browser.py.
"""

import ast
import linecache
import os
import re
import traceback
import warnings

import numpy as np
import pytest
from helpers import assert_close

IPython = pytest.importorskip("IPython")
pytest.importorskip("anywidget")

from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import nbjax  # noqa: E402
import nbjax.notebook  # noqa: E402
from nbjax.config import config  # noqa: E402
from nbjax.notebook import assets, jit_state, session, source_pane  # noqa: E402
from nbjax.notebook.watch import GradWatch, WatchedJit  # noqa: E402
from nbjax.viz import theme  # noqa: E402

NBJAX_DIR = os.path.dirname(os.path.abspath(nbjax.__file__))


@pytest.fixture(scope="module")
def ip(tmp_path_factory):
    os.environ.setdefault("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    run(shell, "import numpy as np\nimport nbjax\nimport nbjax.numpy as jnp")
    return shell


def run(shell, code):
    """Run a cell like a notebook does (the post-cell hook included); re-raise its error."""
    result = shell.run_cell(code)
    result.raise_error()
    return result.result


def view_of(fn):
    (view,) = fn.watchers
    return view


def parse_value(text):
    """A value as ``value_text`` printed it, back as an array."""
    return np.array(ast.literal_eval(text), dtype=np.float64)


# --- loading, namespaces ------------------------------------------------------------------

def test_load_ext_registers_magics_once(ip):
    magics = ip.magics_manager.magics
    assert {"jit", "grad"} <= set(magics["cell"])
    assert {"jaxpr", "nbjax"} <= set(magics["line"])
    nbjax.load_ipython_extension(ip)  # loading again replaces, never duplicates
    hooks = [h for h in ip.events.callbacks["post_run_cell"] if "after_cell" in repr(h)]
    assert len(hooks) == 1
    checks = [t for t in ip.input_transformers_cleanup if getattr(t, "nbjax", False)]
    assert len(checks) == 1


def test_jit_wraps_top_level_functions_and_returns_last_expression(ip):
    out = run(ip, """%%jit --quiet
offset = 2.0
def scale(x):
    return x * 3.0 + offset
def shift(x, y):
    def inner(z):
        return z
    return inner(x - y)
scale(np.arange(3.0, dtype=np.float32))
""")
    ns = ip.user_ns
    assert isinstance(ns["scale"], WatchedJit) and isinstance(ns["shift"], WatchedJit)
    assert "inner" not in ns and ns["offset"] == 2.0
    assert_close(np.asarray(out), np.arange(3.0) * 3 + 2)
    assert_close(np.asarray(ns["shift"](np.ones(2, np.float32), 1.0)), [0, 0])
    assert ns["scale"].watchers == []  # --quiet: no view, nothing watches the calls


def test_static_argument_names(ip):
    run(ip, """%%jit --quiet --static n
def power(x, n):
    return x ** n
""")
    power, x = ip.user_ns["power"], np.array([1.0, 2.0, 3.0], np.float32)
    assert_close(np.asarray(power(x, 3)), x ** 3)
    assert_close(np.asarray(power(x, n=2)), x ** 2)
    assert power.static_argnums == (1,) and power.static_argnames == ("n",)


# --- options and help -------------------------------------------------------------------

@pytest.mark.parametrize("magic, line, message", [
    ("jit", "--backend tpu", r"argument --backend: invalid choice: 'tpu'"),
    ("jit", "--show graph,flames", r"unknown pane 'flames'; choose from graph, source, jaxpr"),
    ("jit", "--static n", r"--static: no function in this cell has a parameter named 'n'"),
    ("jit", "--static 3x", r"expected comma-separated Python names"),
    ("jit", "--fast", r"unrecognized arguments: --fast"),
    ("grad", "--order 3", r"argument --order: invalid choice: 3"),
    ("grad", "--mode sideways", r"argument --mode: invalid choice: 'sideways'"),
    ("grad", "--wrt y", r"f\(x\) has no positional parameter named 'y'"),
])
def test_cell_magic_options_are_validated_before_the_cell_runs(ip, magic, line, message):
    ip.user_ns.pop("ran", None)
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic(magic, line, "ran = True\ndef f(x):\n    return x\n")
    assert "ran" not in ip.user_ns


@pytest.mark.parametrize("magic, line, message", [
    ("nbjax", "--x64 maybe", r"argument --x64: expected on or off"),
    ("nbjax", "--backend tpu", r"invalid choice: 'tpu'"),
    ("nbjax", "--present maybe", r"argument --present: expected on or off"),
    ("jaxpr", "--budget 0 f(1.0)", r"--budget: expected a positive number or all"),
    ("jaxpr", "1 + 2", r"expects a call such as f\(x\)"),
    ("jaxpr", "f(", r"cannot read"),
    ("transform", "f(1.0)", r"--with is required"),
    ("transform", "f(1.0) --with grad,jit,vmap", r"jit must come last"),
    ("transform", "--with grad,curl f(1.0)", r"unknown transformation 'curl'"),
    ("transform", "f(1.0) --with vmap --batch 0", r"--batch: expected a positive number"),
    ("transform", "--with grad 1 + 2", r"%transform expects a call such as f\(x\)"),
    ("transform", "f(1.0) --with vmap --in-axes 0,x", r"--in-axes: expected comma-separated"),
    ("transform", "jnp.sin(1.0) --with vmap --in-axes None,0", r"2 axes for 1 positional"),
])
def test_line_magic_options_are_validated(ip, magic, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic(magic, line)


@pytest.mark.parametrize("kind, magic, expected", [
    ("cell", "jit", ["--static NAMES", "--backend {cpu,gpu,reference}", "--show PANES",
                     "--quiet"]),
    ("cell", "grad", ["--wrt NAMES", "--order {1,2}", "--mode {rev,fwd}"]),
    ("line", "jaxpr", ["--budget N|all", "--text"]),
    ("line", "transform", ["--with T1,T2,...", "--batch N", "--in-axes A1,A2,...",
                           "--backend {cpu,gpu,reference}"]),
    ("line", "nbjax", ["--backend {cpu,gpu,reference}", "--panes PANES", "--x64 on|off"]),
])
def test_help(ip, capsys, kind, magic, expected):
    ip.user_ns.pop("ran", None)
    if kind == "cell":
        ip.run_cell_magic(magic, "--help", "ran = True\n")
    else:
        ip.run_line_magic(magic, "--help")
    printed = capsys.readouterr().out
    assert printed.startswith(f"usage: %{'%' if kind == 'cell' else ''}{magic}")
    for option in expected:
        assert option in printed
    assert "ran" not in ip.user_ns  # --help runs nothing


def _gpu_missing():
    from nbjax.backends import get_target
    try:
        get_target("gpu").check_available()
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.skipif(_gpu_missing() is None, reason="a GPU is present: nothing is missing")
@pytest.mark.parametrize("magic, line", [
    ("jit", "--backend gpu"), ("nbjax", "--backend gpu"),
    ("transform", "f(1.0) --with grad,jit --backend gpu")])
def test_gpu_backend_without_a_gpu_says_what_is_missing(ip, magic, line):
    """Before anything runs or changes: the cell, the session's backend."""
    ip.user_ns.pop("ran", None)
    run(ip, "def f(x):\n    return x * 2.0\n")
    backend = config.jit_backend
    with pytest.raises(UsageError, match=rf"%{'%' * (magic == 'jit')}{magic} --backend gpu: "
                                         r"the gpu backend (needs CuPy|found CuPy)"):
        if magic == "jit":
            ip.run_cell_magic(magic, line, "ran = True\ndef g(x):\n    return x\n")
        else:
            ip.run_line_magic(magic, line)
    assert "ran" not in ip.user_ns and config.jit_backend == backend


def test_gpu_compiler_view_shows_ptx_and_ptxas_per_kernel(ip, monkeypatch):
    """On the CuPy stand-in (its kernels run on the emulated grid): ``%%jit --backend
    gpu``'s code pane has each kernel's PTX and ptxas report, its results are on the GPU."""
    from test_gpu_codegen import _EmulatingCupyDevice, _FakeCupy
    from nbjax import backends
    from nbjax.backends.gpu import GpuTarget, toolkit
    if toolkit.find_ptxas() is None:
        pytest.skip("ptxas not found (install nvidia-cuda-nvcc-cu12: the test extra, or CUDA)")
    fake = _FakeCupy("90")
    device = _EmulatingCupyDevice(fake, fake.Module)
    monkeypatch.setitem(backends._TARGETS, "gpu", GpuTarget("gpu", lambda: device))
    run(ip, "%%jit --backend gpu\ndef on_gpu(x):\n    return jnp.sum(jnp.tanh(x)), x * 3\n")
    run(ip, "gpu_out = on_gpu(np.linspace(-2, 2, 5000).astype(np.float32))")
    out, triple = ip.user_ns["gpu_out"]
    x = np.linspace(-2, 2, 5000).astype(np.float32)
    assert out.device.platform == "gpu" and fake.transfers["to host"] == 0  # (not shown)
    assert_close(float(out), np.tanh(x).sum(), rtol=1e-5, scale=np.abs(np.tanh(x)).sum())
    assert_close(np.asarray(triple), x * 3, rtol=1e-6)
    c = view_of(ip.user_ns["on_gpu"]).compiled
    assert c["backend"] == "gpu" and "a reduction in phases" in str(c["fusion"]["steps"])
    kernels = c["code"]["kernels"]
    assert len(kernels) >= 2  # (the partial sums, then the combining kernels)
    for k in kernels:
        stages = dict(k["stages"])
        assert list(stages)[0] == "kernel IR" and stages["kernel IR"] == k["loop"]
        assert stages["PTX"].startswith(f".visible .entry {k['name']}(")
        assert stages["PTX"].count(".entry") == 1 and stages["PTX"].endswith("}")
        assert re.search(r"Used \d+ registers", stages["ptxas -v"])


def test_nbjax_magic_shows_and_sets_session_options(ip, capsys):
    saved = (config.jit_backend, config.enable_x64, session.panes)
    try:
        ip.run_line_magic("nbjax", "--backend reference --x64 on --panes timing,graph")
        assert config.jit_backend == "reference" and config.enable_x64 is True
        assert session.panes == ("graph", "timing")  # the view's order
        printed = capsys.readouterr().out
        assert "backend: reference" in printed and "x64:     on" in printed
        run(ip, "%%jit\ndef panes_default(x):\n    return x + 1\n")
        assert view_of(ip.user_ns["panes_default"]).panes == ["graph", "timing"]
        out = run(ip, "panes_default(np.ones(2))")
        assert out.dtype == np.float64  # x64 on
    finally:
        config.update("jit_backend", saved[0])
        config.update("enable_x64", saved[1])
        session.panes = saved[2]
    ip.run_line_magic("nbjax", "")
    assert f"backend: {saved[0]}" in capsys.readouterr().out


# --- the compiler view ------------------------------------------------------------------

JIT_CELL = """%%jit
def selu_sum(x):
    y = jnp.where(x > 0, x, 1.67 * (jnp.exp(x) - 1.0))
    return jnp.sum(1.05 * y)
"""


@pytest.mark.cpu_compiler
def test_compiler_view_state_before_and_after_calls(ip):
    run(ip, JIT_CELL)
    f = ip.user_ns["selu_sum"]
    view = view_of(f)
    assert view.view == "jit" and view.panes == list(session.panes)
    assert view.status == {"state": "waiting",
                           "message": "not compiled yet: call selu_sum(...)"}
    assert view.compiled == {} and view.timing == {}
    assert "not compiled yet: call selu_sum(...)" in view.static_html()

    x = np.linspace(-2, 2, 64).astype(np.float32)
    out = run(ip, "selu_sum(np.linspace(-2, 2, 64).astype(np.float32))")
    expected = np.sum(1.05 * np.where(x > 0, x, 1.67 * (np.exp(x) - 1)))
    assert_close(float(out), expected, rtol=1e-5)
    c, t = view.compiled, view.timing
    assert view.status["state"] == "ready" and "f32[64]" in view.status["message"]
    assert c["signature"] == "f32[64]" and c["backend"] == config.jit_backend

    # graph: the fused kernel is a cluster; nodes know their line, kernel and decision
    graph = c["graph"]
    assert f'id="{graph["prefix"]}group-0"' in graph["svg"].replace("&#45;", "-")
    exp_node = next(n for n in graph["nodes"].values() if n["primitive"] == "exp")
    assert exp_node["source_text"] == "y = jnp.where(x > 0, x, 1.67 * (jnp.exp(x) - 1.0))"
    assert exp_node["source"].endswith("line 3")
    assert exp_node["kernel"].startswith("kernel 0") and exp_node["fusion_reason"]
    assert exp_node["avals"] == ["f32[64]"]
    # jaxpr: traced and optimised, coloured, equations tagged with the graph's node ids
    assert 'class="nbjax-primitive"' in c["jaxpr"]["traced"]
    assert f'data-node="{exp_node["id"]}"' in c["jaxpr"]["optimised"]
    # fusion: one kernel for the whole SELU sum, with costs and a reason per equation
    (step,) = c["fusion"]["steps"]
    assert step["kind"] == "kernel" and step["bytes_in"] == 64 * 4 and step["bytes_out"] == 4
    assert step["flops"] > 0 and step["reason"]
    assert {e["primitive"] for e in step["eqns"]} >= {"exp", "select_n", "reduce_sum"}
    assert len(c["fusion"]["decisions"]) == len(step["eqns"])
    assert all(d["reason"] for d in c["fusion"]["decisions"])
    # code: LLVM IR per kernel
    (kernel,) = c["code"]["kernels"]
    assert "define" in kernel["ir"] and "define" in kernel["optimised_ir"] and kernel["loop"]
    # timing
    assert t["call_count"] == 1 and len(t["calls"]) == 1 and t["calls"][0] > 0
    assert [p["phase"] for p in t["compile"]][0] == "trace"
    # the baselines wait until asked: the Timing pane is not the open one
    assert t["baselines_pending"] and t["eager_seconds"] is None and t["speedup"] is None
    assert t["baselines_note"] == jit_state.PENDING_NOTE
    view.tab = "timing"  # the browser opens the Timing pane: measured now, between cells
    t = view.timing
    assert not t["baselines_pending"] and t["baselines_note"] is None
    assert t["eager_seconds"] > 0 and t["speedup"] > 0
    assert t["steps"][0]["seconds"] > 0 and t["steps"][0]["gbps"] > 0
    assert t["limits"]["gbps"] > 0 and t["limits"]["gflops"] > 0

    first = list(t["calls"])
    run(ip, "for _ in range(3): selu_sum(np.linspace(-2, 2, 64).astype(np.float32))")
    assert view.timing["call_count"] == 4
    assert view.timing["calls"][:1] == first and len(view.timing["calls"]) == 4
    assert view.compiled is c  # same signature: the compiled panes are not rebuilt
    assert "4 calls" in view.status["message"]


def test_new_signature_rebuilds_compiled_panes(ip):
    run(ip, "%%jit\ndef twice(x):\n    return 2 * x\n")
    run(ip, "twice(np.ones(3, np.float32))")
    run(ip, "twice(np.ones((2, 2), np.float32))")
    view = view_of(ip.user_ns["twice"])
    assert view.compiled["signature"] == "f32[2,2]" and ip.user_ns["twice"].trace_count == 2
    assert view.timing["call_count"] == 1  # counted per signature


def test_updates_are_throttled_during_a_cell_and_flushed_after(ip):
    run(ip, "%%jit\ndef inc(x):\n    return x + 1\n")
    view = view_of(ip.user_ns["inc"])
    run(ip, "inc(np.zeros(4, np.float32))")
    view.min_interval = 3600.0
    ip.user_ns["view"] = view
    run(ip, "seen = []\nfor _ in range(3):\n    inc(np.zeros(4, np.float32))\n"
            "    seen.append(view.timing['call_count'])")
    assert ip.user_ns["seen"] == [1, 1, 1]  # nothing sent while the loop ran
    assert view.timing["call_count"] == 4 and len(view.timing["calls"]) == 4


def test_static_html_is_refreshed_after_a_cell_that_changed_the_view(ip):
    run(ip, "%%jit\ndef neg(x):\n    return -x\n")
    view = view_of(ip.user_ns["neg"])

    class Handle:
        updates = 0

        def update(self, obj, raw=False):
            assert raw and obj == view.static_bundle()
            assert "compiled for f32[2]" in obj["text/html"]
            Handle.updates += 1

    view._static_handle = Handle()
    run(ip, "neg(np.ones(2, np.float32))")
    assert Handle.updates == 1
    run(ip, "1 + 1")
    assert Handle.updates == 1  # unchanged views are not re-published


def test_calls_under_transformations_are_not_timed(ip):
    run(ip, "%%jit\ndef cube(x):\n    return x * x * x\n")
    view = view_of(ip.user_ns["cube"])
    g = run(ip, "nbjax.grad(lambda x: cube(x).sum())(np.array([1.0, 2.0], np.float32))")
    v = run(ip, "nbjax.vmap(cube)(np.ones((3, 2), np.float32))")
    assert_close(np.asarray(g), [3.0, 12.0])
    assert np.asarray(v).shape == (3, 2)
    assert view.timing == {} and view.status["state"] == "waiting"


def test_reference_backend_view(ip):
    backend = config.jit_backend
    run(ip, "%%jit --backend reference\ndef ref(x):\n    return jnp.sin(x) + 1\n")
    out = run(ip, "ref(np.zeros(3, np.float32))")
    assert_close(np.asarray(out), np.ones(3))
    view = view_of(ip.user_ns["ref"])
    c = view.compiled
    assert c["backend"] == "reference" and c["graph_of"] == "traced"
    assert "reference backend" in c["fusion"]["note"] and c["code"]["kernels"] == []
    assert config.jit_backend == backend  # the override ends with the call


def test_show_all_draws_a_truncated_graph_in_full(ip, monkeypatch):
    monkeypatch.setattr(jit_state, "DEFAULT_BUDGET", 3)
    run(ip, "%%jit --show graph\ndef chain(x):\n    return jnp.cos(jnp.sin(x) * 2.0) + x\n")
    run(ip, "chain(np.ones(3, np.float32))")
    view = view_of(ip.user_ns["chain"])
    assert set(view.compiled) >= {"graph"} and "timing" not in view.compiled
    assert view.compiled["graph"]["truncated"] and view.compiled["graph"]["budget"] == 3
    view.show_all = True  # what the browser's "show all" button does
    graph = view.compiled["graph"]
    assert not graph["truncated"] and graph["budget"] is None and graph["hidden"] == 0


def test_sub_jaxprs_open_and_close(ip):
    run(ip, "%%jit --show graph\ndef branchy(x):\n"
            "    return nbjax.lax.cond(x.sum() > 0, lambda x: jnp.sin(x) * 2, lambda x: -x, x)\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cpu backend may run cond on the reference one
        run(ip, "branchy(np.ones(3, np.float32))")
    view = view_of(ip.user_ns["branchy"])
    clusters = view.compiled["graph"]["clusters"]
    assert [c["name"] for c in clusters] == ["branches[0]", "branches[1]"]
    assert not any(c["collapsed"] for c in clusters) and view.compiled["graph"]["hidden"] == 0
    first = clusters[0]
    view.toggled = [first["id"]]  # what the browser's toggle button does
    graph = view.compiled["graph"]
    assert graph["clusters"][0]["collapsed"] and not graph["clusters"][1]["collapsed"]
    assert graph["hidden"] == first["size"]
    assert "▸ branches[0]" in graph["svg"]


def test_repeated_blocks_fold_and_unfold(ip):
    """An unrolled loop's graph shows its step once, "× 6", opened and closed like a
    sub-jaxpr from the details of any node of the block."""
    run(ip, "%%jit --backend reference --show graph\ndef unrolled(x, w):\n"
            "    for _ in range(6):\n        x = jnp.tanh(x @ w) + x\n    return jnp.sum(x)\n")
    run(ip, "unrolled(np.ones((2, 3), np.float32), np.ones((3, 3), np.float32))")
    view = view_of(ip.user_ns["unrolled"])
    graph = view.compiled["graph"]
    (repeat,) = [c for c in graph["clusters"] if c.get("members")]
    assert repeat["collapsed"] and repeat["name"] == "repeated block × 6"
    assert repeat["owner"] == repeat["members"][0] and len(repeat["members"]) == 3
    assert repeat["size"] == 15 and graph["hidden"] == 0 and not graph["truncated"]
    drawn = lambda svg: svg.count('class="node ')  # noqa: E731
    folded = drawn(graph["svg"])
    assert "× 6" in graph["svg"]
    view.toggled = [repeat["id"]]  # what the browser's toggle button does
    graph = view.compiled["graph"]
    assert drawn(graph["svg"]) == folded + 15 and "× 6" not in graph["svg"]
    assert [c["collapsed"] for c in graph["clusters"] if c.get("members")] == [False]


def test_step_through_graph_draws_every_copy_of_a_repeated_block(ip):
    """The step-through visits each step of an unrolled loop, so its graph draws them all;
    the side-by-side graph folds them."""
    run(ip, "%%grad\ndef looped(x):\n    for _ in range(5):\n        x = jnp.sin(x) * x\n"
            "    return x\n")
    run(ip, "grad_looped(np.float32(0.5))")
    view = view_of(ip.user_ns["grad_looped"])
    names = [c["name"] for c in view.grad["graph"]["clusters"]]
    assert "repeated block × 5" in names  # the forward pass (the backward one folds too)
    stepper = view.steps["graph"]
    assert stepper["clusters"] == [] and "× 5" not in stepper["svg"]
    visited = {node for step in view.steps["steps"] for node in step["values"]}
    svg = stepper["svg"].replace("&#45;", "-")
    assert len(visited) > 10 and all(f'id="{stepper["prefix"]}{n}"' in svg for n in visited)


def test_grad_view_sub_jaxprs_open_and_close(ip):
    run(ip, "%%grad\ndef branchy(x):\n"
            "    return nbjax.lax.cond(x > 0, lambda x: jnp.sin(x) * 2, lambda x: -x, x)\n")
    run(ip, "grad_branchy(np.float32(0.5))")
    view = view_of(ip.user_ns["grad_branchy"])
    clusters = view.grad["graph"]["clusters"]
    assert clusters and not any(c["collapsed"] for c in clusters)
    step = view.step
    view.toggled = [clusters[0]["id"]]  # what the browser's toggle button does
    graph = view.grad["graph"]
    assert graph["clusters"][0]["collapsed"] and graph["hidden"] == clusters[0]["size"]
    assert view.step == step  # redrawing keeps the step-through where it was


def test_quiet_function_gets_a_view_later(ip):
    run(ip, "%%jit --quiet\ndef later(x):\n    return x - 1\n")
    run(ip, "later(np.ones(2, np.float32))")
    view = run(ip, "later.view()")
    assert view.status["state"] == "waiting"  # the view sees the calls made from now on
    run(ip, "later(np.ones(2, np.float32))")
    assert view.timing["call_count"] == 1


# --- static fallbacks, Graphviz missing ----------------------------------------------------

def _assert_static(html):
    assert "<script" not in html.lower()
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handlers


@pytest.mark.cpu_compiler
def test_static_fallbacks_have_svg_and_tables_but_no_script(ip):
    run(ip, JIT_CELL.replace("selu_sum", "selu_static"))
    run(ip, "selu_static(np.ones(8, np.float32))")
    view = view_of(ip.user_ns["selu_static"])
    html = view.static_bundle()["text/html"]
    _assert_static(html)
    assert "<svg" in html and "<table" in html and 'data-nbjax-view="jit"' in html
    assert "kernel 0" in html and "define" in html  # fusion and code panes


def test_graphviz_missing_still_shows_the_text_panes(ip, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on the PATH
    run(ip, "%%jit\ndef nodot(x):\n    return x * 2\n")
    run(ip, "nodot(np.ones(2, np.float32))")
    view = view_of(ip.user_ns["nodot"])
    graph = view.compiled["graph"]
    assert graph["svg"] is None and "apt-get install graphviz" in graph["note"]
    assert graph["nodes"]  # the nodes' details are still there
    html = view.static_html()
    _assert_static(html)
    assert "apt-get install graphviz" in html and "nbjax-primitive" in html


# --- ordinary Python semantics -------------------------------------------------------------

def test_syntax_error_is_an_ordinary_syntax_error(ip):
    ip.user_ns.pop("broken", None)
    result = ip.run_cell("%%jit\nbroken = 1\ndef f(x)\n    return x\n")
    error = result.error_before_exec
    assert type(error) is SyntaxError and error.lineno == 3  # the cell's line
    assert error.text.strip() == "def f(x)"
    assert "broken" not in ip.user_ns  # nothing ran
    with pytest.raises(SyntaxError) as raised:  # called directly, the magic raises it too
        ip.run_cell_magic("grad", "", "def f(x):\n    return x +\n")
    assert raised.value.lineno == 3


def _visible_frames(tb):
    """The frames IPython shows: those not marked with __tracebackhide__."""
    return [(f.f_code.co_filename, line) for f, line in traceback.walk_tb(tb)
            if not f.f_locals.get("__tracebackhide__")]


@pytest.mark.parametrize("call", ["bad_dot(np.ones(3, np.float32))",
                                  "grad_bad_dot(np.ones(3, np.float32))"])
def test_exception_in_a_user_function_points_at_the_cell_line(ip, call):
    magic = "jit" if call.startswith("bad_dot") else "grad"
    run(ip, f"%%{magic}\ndef bad_dot(x):\n    y = jnp.sin(x)\n    return jnp.dot(y, jnp.ones(4))\n")
    result = ip.run_cell(call)
    error = result.error_in_exec
    assert isinstance(error, TypeError) and "dot" in str(error)
    frames = _visible_frames(error.__traceback__)
    assert not [f for f, _ in frames if f.startswith(NBJAX_DIR)]  # nbjax internals hidden
    filename, line = frames[-1]  # the user's line, in the cell (counted from %%magic)
    assert line == 4
    assert linecache.getline(filename, line).strip() == "return jnp.dot(y, jnp.ones(4))"
    shown = "".join(ip.InteractiveTB.structured_traceback(
        type(error), error, error.__traceback__))
    assert "return jnp.dot(y, jnp.ones(4))" in shown and "jit.py" not in shown


# --- %%grad ---------------------------------------------------------------------------------

GRAD_CELL = """%%grad --order 2
def loss(x, w):
    y = jnp.sin(x) * w
    return jnp.sum(y * y)
"""


def test_grad_defines_gradient_and_hessian(ip):
    run(ip, GRAD_CELL)
    ns = ip.user_ns
    assert isinstance(ns["grad_loss"], GradWatch) and isinstance(ns["hess_loss"], GradWatch)
    assert not isinstance(ns["loss"], (GradWatch, WatchedJit))  # f itself is unchanged
    x = np.array([0.5, 1.0, -2.0], np.float32)
    w = np.float32(1.5)
    ns.update(x=x, w=w)
    g = np.asarray(run(ip, "grad_loss(x, w)"))
    assert_close(g, 2 * np.sin(x) * np.cos(x) * w * w, rtol=1e-5)
    h = np.asarray(run(ip, "hess_loss(x, w)"))
    np.testing.assert_allclose(h, np.diag(2 * np.cos(2 * x) * w * w), rtol=1e-4, atol=1e-6)


def test_grad_wrt_several_parameters(ip):
    run(ip, "%%grad --wrt w,x --quiet\ndef bilinear(x, w):\n    return jnp.sum(x * w)\n")
    gw, gx = run(ip, "grad_bilinear(np.array([1., 2.], np.float32), "
                     "np.array([3., 4.], np.float32))")  # in the order of --wrt
    assert_close(np.asarray(gx), [3, 4])
    assert_close(np.asarray(gw), [1, 2])


def test_grad_view_links_backward_equations_to_forward_ones(ip):
    run(ip, GRAD_CELL.replace("loss", "linked"))
    view = view_of(ip.user_ns["grad_linked"])
    assert view.status["message"] == "not traced yet: call grad_linked(...) or hess_linked(...)"
    run(ip, "grad_linked(np.array([0.5, 1.0, -2.0], np.float32), np.float32(1.5))")
    g = view.grad
    assert g["sides"] == {"left": "forward pass", "right": "backward pass"}
    rows = {r["id"]: r for r in g["rows"]}
    links = {link["provenance"]: link for link in g["links"]}
    # the forward pass comes first, then the backward pass
    sides = [r["side"] for r in g["rows"]]
    assert sides == sorted(sides) and "right" in sides
    for r in g["rows"]:
        if r["side"] == "right" and r["provenance"] is not None:
            link = links[r["provenance"]]
            assert r["id"] in link["right"] and link["left"]
            assert all(rows[i]["provenance"] == r["provenance"] for i in link["left"])
    sin = next(link for link in g["links"] if link["origin"] == "sin")
    assert [rows[i]["primitive"] for i in sin["left"]] == ["sin", "cos"]
    assert sin["right"] and sin["source_text"] == "y = jnp.sin(x) * w"
    # the graph nodes carry the same provenance (the browser highlights by it)
    assert g["graph"]["nodes"][sin["right"][0]]["provenance"] == sin["provenance"]
    assert g["graph"]["nodes"][sin["right"][0]]["phase"] == "backward"
    assert g["hessian"] is None
    run(ip, "hess_linked(np.array([0.5, 1.0, -2.0], np.float32), np.float32(1.5))")
    assert "nbjax-primitive" in view.grad["hessian"]["jaxpr"]
    _assert_static(view.static_html())


def _replay(steps, upto=None):
    values, derivs = {}, {}
    for step in steps["steps"][:upto]:
        values.update(step["values"])
        derivs.update(step["derivs"])
    return values, derivs


def test_step_through_walks_the_backward_pass(ip):
    run(ip, GRAD_CELL.replace("loss", "walked"))
    view = view_of(ip.user_ns["grad_walked"])
    x = np.array([0.5, 1.0, -2.0], np.float32)
    ip.user_ns.update(x=x, w=np.float32(1.5))
    grad = np.asarray(run(ip, "grad_walked(x, w)"))
    s = view.steps
    assert s["mode"] == "rev" and s["derivative"] == "cotangent"
    phases = [step["phase"] for step in s["steps"]]
    n = len(s["rows"]) - 1  # rows: the input, then one per equation
    assert phases == ["input"] + ["forward"] * n + ["seed"] + ["backward"] * n + ["result"]
    assert [r["id"] for r in s["rows"]] == ["in0"] + [f"e{i}" for i in range(n)]
    # forward steps compute the values; the first equation is sin x
    values, _ = _replay(s, upto=1 + n)
    assert_close(parse_value(values["in0"]), x)
    assert_close(parse_value(values["e0"]), np.sin(x), rtol=1e-3)
    # backward: each step's node is the equation it goes back through, in reverse order
    backward = [step for step in s["steps"] if step["phase"] == "backward"]
    assert [step["node"] for step in backward] == [f"e{i}" for i in reversed(range(n))]
    assert all(step["derivs"] and step["linked"] for step in backward)
    _, derivs = _replay(s)
    assert_close(parse_value(derivs["in0"]), grad, rtol=1e-3)
    # the output's cotangent is 1, and d out / d (y*y) is 1 for the sum's operand
    assert parse_value(derivs[f"e{n - 1}"]) == 1
    assert_close(parse_value(derivs[f"e{n - 2}"]), np.ones(3))
    # step-through steps link to the derivative's equations of the same operation
    rows = {r["id"]: r for r in view.grad["rows"]}
    first = backward[-1]  # back through sin
    assert {rows[i]["origin"] for i in first["linked"]} == {"sin"}
    assert view.step == 0


def _scalars(text):
    return [float(v) for v in re.findall(r"-?\d+\.?\d*(?:e-?\d+)?", text)]


def test_step_through_teaches_the_chain_rule_in_the_jaxpr_s_names(ip):
    """Each backward step shows, per operand, ``b̄ += d̄ · c = 1 × 2.25 = 2.25``: the
    output's cotangent times the local derivative, whose product is what the operand
    receives; the table and graph name values as the jaxpr does; no word twice in a row."""
    run(ip, "%%grad --wrt b,c\ndef chain(b, c):\n    d = b * c\n    return jnp.sin(d) + b\n")
    b, c = np.float32(0.7), np.float32(1.5)
    ip.user_ns.update(b_val=b, c_val=c)
    run(ip, "grad_chain(b_val, c_val)")
    view = view_of(ip.user_ns["grad_chain"])
    s = view.steps
    closed = nbjax.make_jaxpr(ip.user_ns["chain"])(b, c)
    names = [nbjax.viz.annotate(closed).names[v] for v in closed.jaxpr.invars]
    text = str(closed)
    # one naming scheme: the table's names are the jaxpr's, and so are the graph's labels
    assert [r["name"] for r in s["rows"]][:2] == names
    for row in s["rows"][2:]:
        assert f"{row['name']}:" in text and row["text"].startswith(f"{row['name']}:")
    labels = re.findall(r'<text[^>]*>([^<]*)</text>', s["graph"]["svg"])
    assert "c = mul" in labels and "d = sin" in labels
    # the mul's backward step: each operand gets c̄ times the other operand
    by_node = {step["node"]: step for step in s["steps"] if step["phase"] == "backward"}
    (mul_node,) = [r["id"] for r in s["rows"] if " mul " in f" {r['text']} "]
    lines = by_node[mul_node]["text"].split("\n")[1:]
    cbar = np.cos(b * c)
    assert lines[0].startswith("a\u0304 += c\u0304 · b = ")
    assert lines[1].startswith("b\u0304 += c\u0304 · a = ")
    for line, other in zip(lines, (c, b)):
        ct, local, product = _scalars(line.split(" = ", 1)[1])
        assert_close(np.float32([ct, local, product]), np.float32([cbar, other, cbar * other]),
                     rtol=1e-4)
    # sin's local derivative is named ∂d/∂c and equals cos c
    (sin_node,) = [r["id"] for r in s["rows"] if " sin " in f" {r['text']} "]
    (sin_line,) = by_node[sin_node]["text"].split("\n")[1:]
    assert sin_line.startswith("c\u0304 += d\u0304 · ∂d/∂c = ")
    assert_close(np.float32(_scalars(sin_line.split(" = ", 1)[1])[1]), cbar, rtol=1e-4)
    for step in s["steps"]:
        words = f"{step['phase']} {step['text']}".lower()
        assert not re.search(r"\b([a-z]{2,})\W+\1\b", words), words  # "forward forward"


def test_step_through_shows_nan_and_inf_in_red(ip):
    run(ip, "%%grad\ndef blows_up(x):\n    return jnp.sum(jnp.log(x) * x)\n")
    ip.user_ns["x_bad"] = np.array([0.0, -1.0, 2.0], np.float32)
    run(ip, "grad_blows_up(x_bad)")
    view = view_of(ip.user_ns["grad_blows_up"])
    static = view.static_html()
    assert f'<span style="color:{theme.ERROR};font-weight:bold">nan</span>' in static
    assert f'<span style="color:{theme.ERROR};font-weight:bold">inf</span>' in static
    js = (assets.extension_dir() / "nbjax_widgets.js").read_text()
    assert "withNonFinite(values[id]" in js and "withNonFinite(derivs[id]" in js
    assert ".nbjax-nonfinite" in (assets.extension_dir() / "nbjax.css").read_text()


def test_step_through_forward_mode_carries_tangents(ip):
    run(ip, "%%grad --mode fwd\ndef fwd(x):\n    return jnp.sum(jnp.exp(x) * x)\n")
    x = np.array([0.3, -0.7], np.float32)
    ip.user_ns["x"] = x
    grad = np.asarray(run(ip, "grad_fwd(x)"))
    assert_close(grad, np.exp(x) * (1 + x), rtol=1e-5)
    view = view_of(ip.user_ns["grad_fwd"])
    assert view.grad["sides"] == {"left": "primal", "right": "tangents"}
    right = [r for r in view.grad["rows"] if r["side"] == "right"]
    assert right and all(r["provenance"] is not None for r in right)
    s = view.steps
    assert s["derivative"] == "tangent" and "x[0]" in s["seed"]
    _, tangents = _replay(s)
    assert_close(parse_value(tangents["in0"]), [1, 0])
    out = s["steps"][-1]
    assert out["phase"] == "result"
    # the output's tangent along e_0 is the first component of the gradient
    assert_close(parse_value(tangents[out["node"]]), grad[0], rtol=1e-3)


COND_CELL = """%%grad --wrt x,y{options}
def {name}(x, y):
    z = x * 2.0
    r = nbjax.lax.cond(jnp.sum(z) > 1.0, lambda a, b: jnp.sin(a) * b,
                       lambda a, b: a * a + b, z, y)
    return jnp.sum(r)
"""


def _cond_ids(s):
    """The node ids of the cond equations in the step-through's table, outermost first."""
    return [r["id"] for r in s["rows"] if " cond[" in r["text"]]


def _shown_nodes(s):
    """Every node id a step highlights or updates."""
    return {n for step in s["steps"] for n in [step["node"] or "", *step["values"],
                                                *step["derivs"]]}


@pytest.mark.parametrize("x, taken", [([1.0, 2.0], 1), ([-1.0, 0.2], 0)])
def test_step_through_steps_into_the_branch_a_cond_takes(ip, x, taken):
    run(ip, COND_CELL.format(name="branchy", options=""))
    run(ip, COND_CELL.format(name="branchy_fwd", options=" --mode fwd"))
    x, y = np.float32(x), np.float32(3.0)
    ip.user_ns.update(x_c=x, y_c=y)
    expected = nbjax.grad(ip.user_ns["branchy"], argnums=(0, 1))(x, y)
    annotated = nbjax.viz.annotate(nbjax.make_jaxpr(ip.user_ns["branchy"])(x, y))
    z = 2 * x
    branch_values = [(z * z, z * z + y), (np.sin(z), np.sin(z) * y)][taken]
    for name in ("grad_branchy", "grad_branchy_fwd"):
        run(ip, f"{name}(x_c, y_c)")
        s = view_of(ip.user_ns[name]).steps
        (cond,) = _cond_ids(s)
        inside, other = f"{cond}/branches{taken}/", f"{cond}/branches{1 - taken}/"
        inner = [inside + "e0", inside + "e1"]
        # the table has the taken branch's inputs and equations, named as the jaxpr names them
        rows = [r for r in s["rows"] if r["id"].startswith(inside)]
        assert [r["id"] for r in rows] == [inside + "in0", inside + "in1"] + inner
        for r in rows[2:]:
            assert r["text"] == annotated.eqn_text(r["id"])
            assert r["text"].startswith(f"{r['name']}:")
        assert not any(r["id"].startswith(other) for r in s["rows"])
        # which branch runs and why; the other branch never shows as run
        (choice,) = [step for step in s["steps"] if step["phase"] == "branch"]
        truth = ("false", "true")[taken]
        assert choice["node"] == cond
        assert re.match(rf"predicate \w+ = {truth}, so branch {taken} \({truth}_fun\) runs",
                        choice["text"]), choice["text"]
        assert sorted(choice["values"]) == [inside + "in0", inside + "in1"]
        assert not any(n.startswith(other) for n in _shown_nodes(s))
        # then the branch's equations, then the cond's results
        after = s["steps"][choice["index"] + 1:choice["index"] + 4]
        assert [(step["phase"], step["node"]) for step in after] == \
            [("forward", inner[0]), ("forward", inner[1]), ("forward", cond)]
        assert rows[2]["text"] in view_of(ip.user_ns[name]).static_html()  # no &, <, >
        values, derivs = _replay(s)
        for node, value in zip(inner, branch_values):
            assert_close(parse_value(values[node]), value, rtol=1e-3)
        assert_close(parse_value(values[cond]), branch_values[1], rtol=1e-3)
        # the taken branch's cluster is open, its nodes drawn
        graph = s["graph"]
        assert not next(c for c in graph["clusters"] if c["id"] == inside[:-1])["collapsed"]
        svg = graph["svg"].replace("&#45;", "-")
        assert all(f'id="{graph["prefix"]}{n}"' in svg for n in inner)
        if name == "grad_branchy_fwd":  # the output's tangent along x[0]
            assert_close(parse_value(derivs[s["steps"][-1]["node"]]), expected[0][0],
                         rtol=1e-3)
            continue
        # reverse mode: back into the branch, through its equations in reverse with the
        # chain rule, out of it to the cond's operands; the result is grad's
        backward = [step for step in s["steps"] if step["phase"] == "backward"]
        nodes = [step["node"] for step in backward]
        at = nodes.index(inner[1])
        assert nodes[at - 1:at + 3] == [cond, inner[1], inner[0], cond]
        assert backward[at - 1]["text"].startswith(f"back into branch {taken}:")
        assert backward[at + 2]["text"].startswith(f"out of branch {taken}:")
        assert "\u0304 += " in backward[at]["text"] and "\u0304 += " in backward[at + 1]["text"]
        assert_close(parse_value(derivs["in0"]), expected[0], rtol=1e-3)
        assert_close(parse_value(derivs["in1"]), expected[1], rtol=1e-3)


SWITCH_CELL = """%%grad --wrt x{options}
def {name}(i, x):
    inner = lambda v: nbjax.lax.cond(v > 0, jnp.cos, jnp.exp, v) * v
    return nbjax.lax.switch(i, [lambda v: v, jnp.sin, inner], x)
"""


@pytest.mark.parametrize("i, x, taken, nested", [(5, 0.5, 2, 1), (5, -0.5, 2, 0),
                                                  (-3, 0.5, 0, None)])
def test_step_through_steps_into_switch_branches_and_nested_conds(ip, i, x, taken, nested):
    """An out-of-range switch index is clamped (by an equation of its own, which the step
    names); a cond inside the branch taken is stepped into in turn."""
    run(ip, SWITCH_CELL.format(name="switched", options=""))
    run(ip, SWITCH_CELL.format(name="switched_fwd", options=" --mode fwd"))
    ip.user_ns.update(i_s=np.int32(i), x_s=np.float32(x))
    expected = nbjax.grad(ip.user_ns["switched"], argnums=1)(np.int32(i), np.float32(x))
    for name in ("grad_switched", "grad_switched_fwd"):
        run(ip, f"{name}(i_s, x_s)")
        s = view_of(ip.user_ns[name]).steps
        outer = _cond_ids(s)[0]
        inside = f"{outer}/branches{taken}/"
        choices = [step for step in s["steps"] if step["phase"] == "branch"]
        assert re.match(rf"branch {taken} of 3 runs: its index \w+ = {taken} \(.* = clamp ",
                        choices[0]["text"]), choices[0]["text"]
        shown = _shown_nodes(s)
        assert not any(f"{outer}/branches{k}/" in n for n in shown for k in range(3)
                       if k != taken)
        if nested is None:  # the identity branch: nothing to step through
            assert len(choices) == 1 and _cond_ids(s) == [outer]
        else:
            (inner_cond,) = [c for c in _cond_ids(s) if c.startswith(inside)]
            assert choices[1]["node"] == inner_cond
            assert re.match(rf"predicate \w+ = {('false', 'true')[nested]}, ",
                            choices[1]["text"]), choices[1]["text"]
            deepest = f"{inner_cond}/branches{nested}/e0"  # cos or exp
            assert deepest in shown and deepest in [r["id"] for r in s["rows"]]
            assert not any(n.startswith(f"{inner_cond}/branches{1 - nested}/") for n in shown)
        _, derivs = _replay(s)
        result = derivs["in0"] if name == "grad_switched" else derivs[s["steps"][-1]["node"]]
        assert_close(parse_value(result), expected, rtol=1e-3)


def test_step_through_graph_opens_the_branch_taken_past_the_node_budget(ip):
    run(ip, "%%grad\ndef long_branch(x):\n    def many(v):\n        for k in range(55):\n"
            "            v = v + jnp.sin(v) * (k / 1000 + 0.001)\n        return v\n"
            "    return nbjax.lax.cond(x > 0, many, jnp.cos, x)\n")
    run(ip, "grad_long_branch(np.float32(0.3))")
    s = view_of(ip.user_ns["grad_long_branch"]).steps
    (cond,) = _cond_ids(s)
    # the node budget alone folds the long branch away (its steps differ: no repeated
    # block); the step-through draws it open
    model = nbjax.viz.graph_model(nbjax.make_jaxpr(ip.user_ns["long_branch"])(np.float32(0.3)))
    closed = {c["id"]: c["collapsed"] for c in model["clusters"]}
    opened = {c["id"]: c["collapsed"] for c in s["graph"]["clusters"]}
    assert closed[f"{cond}/branches1"] and not opened[f"{cond}/branches1"]
    svg = s["graph"]["svg"].replace("&#45;", "-")
    assert f'id="{s["graph"]["prefix"]}{cond}/branches1/e164"' in svg
    _, derivs = _replay(s)
    expected = nbjax.grad(ip.user_ns["long_branch"])(np.float32(0.3))
    assert_close(parse_value(derivs["in0"]), expected, rtol=1e-3)


# --- %jaxpr ---------------------------------------------------------------------------------

def test_jaxpr_magic(ip):
    run(ip, "def poly(x, coeffs):\n    return coeffs['a'] * x ** 2 + coeffs['b']")
    shown = run(ip, "%jaxpr poly(np.ones(3, np.float32), {'a': 2.0, 'b': 1.0})")
    expected = nbjax.make_jaxpr(ip.user_ns["poly"])(np.ones(3, np.float32),
                                                    {"a": 2.0, "b": 1.0})
    assert str(shown) == str(expected) and shown.graph
    text_only = run(ip, "%jaxpr --text --budget all poly(1.0, {'a': 1.0, 'b': 0.0})")
    assert not text_only.graph and text_only.budget is None
    grad_jaxpr = run(ip, "%jaxpr grad(lambda x: jnp.sin(x))(1.0)")  # grad not imported
    assert "cos" in str(grad_jaxpr)
    html = grad_jaxpr._repr_html_()
    _assert_static(html)
    result = ip.run_cell("%jaxpr undefined_function(1.0)")
    assert isinstance(result.error_in_exec, NameError)
    grouped = run(ip, "%jaxpr --group function poly(np.ones(3, np.float32), {'a': 2.0, 'b': 1.0})")
    assert grouped.group == "function"
    assert grouped._repr_html_().replace("&#45;", "-").count('id="cluster-src-') == 1  # poly()
    with pytest.raises(UsageError, match="invalid choice: 'lines'"):
        run(ip, "%jaxpr --group lines poly(1.0, {'a': 1.0, 'b': 0.0})")


def test_jaxpr_magic_hides_identities_from_the_graph_only(ip):
    run(ip, "def ident_poly(x):\n    return jnp.cos(jnp.sin(x * 1.0) - 0.0)")
    shown = run(ip, "%jaxpr ident_poly(np.ones(3, np.float32))")
    hidden = run(ip, "%jaxpr --hide-identities ident_poly(np.ones(3, np.float32))")
    assert not shown.hide_identities and hidden.hide_identities
    assert str(hidden) == str(shown) and "mul a 1.0" in str(hidden)  # the text keeps them
    page = hidden._repr_html_().replace("&#45;", "-")
    _assert_static(page)
    assert "graph: 4 nodes" in page and "2 identities hidden" in page  # in, sin, cos, out
    assert "graph: 6 nodes" in shown._repr_html_() and "hidden" not in shown._repr_html_()


# --- big graphs ------------------------------------------------------------------------------

def _node_rows(svg):
    """node id -> the y of its first text line in a Graphviz SVG (larger is lower)."""
    found = re.findall(r'<g id="([^"]+)" class="node [^"]*">.*?<text[^>]* y="([-\d.]+)"', svg,
                       re.S)
    return {node_id: float(y) for node_id, y in found}


def test_graphs_flow_from_the_inputs_on_top_to_the_outputs_at_the_bottom(ip):
    run(ip, "def spread(x, y):\n    a = x * 2.0\n    return a, jnp.sin(jnp.cos(jnp.exp(a)) + y), y")
    shown = run(ip, "%jaxpr spread(np.ones(3, np.float32), np.ones(3, np.float32))")
    dot = nbjax.viz.to_dot(nbjax.viz.graph_model(shown.jaxpr))
    assert '{ rank=min; "in0"; "in1"; }' in dot and '{ rank=max; "out0"; "out1"; "out2"; }' in dot
    rows = _node_rows(nbjax.viz.to_svg(dot))
    inputs = [rows["in0"], rows["in1"]]
    outputs = [rows[f"out{i}"] for i in range(3)]
    eqns = [y for k, y in rows.items() if k.startswith("e")]
    assert len(set(inputs)) == 1 and len(set(outputs)) == 1  # one row each
    assert max(inputs) < min(eqns) and max(eqns) < min(outputs)


def test_static_graphs_fit_the_width_of_their_box(ip):
    run(ip, "def fit_me(x):\n    return jnp.sum(jnp.sin(x) * x)")
    page = run(ip, "%jaxpr fit_me(np.ones(3, np.float32))")._repr_html_()
    run(ip, "%%jit --show graph\ndef fit_jit(x):\n    return jnp.sin(x) * 2.0\n")
    run(ip, "fit_jit(np.ones(3, np.float32))")
    static = view_of(ip.user_ns["fit_jit"]).static_html()
    for html in (page, static):
        (svg,) = re.findall(r"<svg [^>]*>", html.split('class="nbjax-sparkline"')[0])
        natural = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', svg).group(1)
        assert 'style="width:100%;height:auto;' in svg and 'width="' not in svg
        assert f"max-width:{float(natural):.0f}pt" in svg  # never enlarged past natural size
        assert f"min-width:{float(natural) / 2:.0f}pt" in svg  # nor shrunk unreadably


def _theme_problems(page):
    """Where a static rendering breaks the theme rules of nbjax/viz/theme.py: text colours
    and backgrounds outside the graph's SVG either come from the theme's variables, or a
    fixed background fixes its text colour too (a light card)."""
    problems = []
    page = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)
    for style in re.findall(r'style="([^"]*)"', page):
        decls = dict(d.split(":", 1) for d in style.split(";") if ":" in d)
        back, fore = decls.get("background"), decls.get("color")
        if back and not back.startswith(("var(--jp-", "rgba(")) and not fore:
            problems.append(f"fixed background, theme text: {style}")
    return problems


def test_static_views_follow_the_notebook_theme(ip):
    """Every static rendering (compiler, gradient, jaxpr and pipeline views) takes its font
    size, text and background colours from JupyterLab's variables, with light fallbacks,
    and its graph sits on a light card."""
    run(ip, TRANSFORM_CELL)
    run(ip, JIT_CELL.replace("selu_sum", "selu_theme"))
    run(ip, "selu_theme(np.ones(8, np.float32))")
    run(ip, GRAD_CELL.replace("loss", "theme"))
    run(ip, "grad_theme(np.array([0.5, -2.0], np.float32), np.float32(1.5))")
    pages = {"jit": view_of(ip.user_ns["selu_theme"]).static_html(),
             "grad": view_of(ip.user_ns["grad_theme"]).static_html(),
             "jaxpr": run(ip, "%jaxpr wave(x_wave)")._repr_html_(),
             "transform": run(ip, "%transform wave(x_wave) --with grad --backend reference")
             ._repr_html_()}
    for kind, page in pages.items():
        root = re.search(r'data-nbjax-view="%s"[^>]*style="([^"]*)"' % kind, page).group(1)
        assert "font-size:var(--jp-content-font-size1,13px)" in root, kind
        assert "color:var(--jp-ui-font-color1,#111827)" in root, kind
        assert _theme_problems(page) == [], kind
        assert "var(--jp-code-font-family,monospace)" in page, kind
        if "<svg" in page and kind != "transform":
            assert "background:#ffffff;color:#111827" in page.split("<svg")[0], kind


# --- presenting and saving views -----------------------------------------------------------

def _svg_bounds(page):
    """(max-width, min-width) in pt of the first fitted SVG of a page."""
    return tuple(float(x) for x in re.search(
        r'<svg style="[^"]*max-width:([\d.]+)pt;min-width:([\d.]+)pt', page).groups())


PRESENT_CELL = "%%jit --backend reference\ndef shown(x):\n    return jnp.sum(jnp.sin(x) * 2.0)\n"


def test_present_enlarges_every_view_and_off_shrinks_them_back(ip, capsys):
    """``%nbjax --present`` enlarges the text and graph of the views already shown (live
    and static) and of those shown next, ``%jaxpr`` and ``%transform`` included;
    ``--present off`` restores them."""
    big = theme.PRESENT_SCALE
    run(ip, TRANSFORM_CELL)
    run(ip, PRESENT_CELL)
    run(ip, "shown(np.ones(3, np.float32))")
    view = view_of(ip.user_ns["shown"])
    normal = view.static_html()
    jaxpr_normal = run(ip, "%jaxpr wave(x_wave)")._repr_html_()
    try:
        ip.run_line_magic("nbjax", "--present")
        assert session.present and "present: on" in capsys.readouterr().out
        assert view.scale == big
        enlarged = view.static_html()
        assert f"font-size:calc(var(--jp-content-font-size1,13px) * {big:g})" in enlarged
        assert _svg_bounds(enlarged) == pytest.approx([b * big for b in _svg_bounds(normal)],
                                                      abs=1)
        assert view.static_bundle()["text/html"].endswith(enlarged)  # what is published
        run(ip, PRESENT_CELL.replace("shown", "shown_later"))
        assert view_of(ip.user_ns["shown_later"]).scale == big
        jaxpr_big = run(ip, "%jaxpr wave(x_wave)")._repr_html_()
        assert _svg_bounds(jaxpr_big) == pytest.approx(
            [b * big for b in _svg_bounds(jaxpr_normal)], abs=1)
        assert f"* {big:g})" in jaxpr_big
        pipeline = run(ip, "%transform wave(x_wave) --with grad --backend reference")
        assert f"* {big:g})" in pipeline._repr_html_()
    finally:
        ip.run_line_magic("nbjax", "--present off")
    assert not session.present and view.scale == 1
    assert view.static_html() == normal
    assert "present: off" in capsys.readouterr().out


def _assert_standalone_page(path, kind):
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert f'data-nbjax-view="{kind}"' in page
    assert "<script" not in page.lower() and " src=" not in page  # nothing to load
    assert not re.findall(r"https?://(?!www\.w3\.org/)", page)  # only SVG namespaces
    return page


def test_save_view_writes_any_view_as_a_standalone_page(ip, tmp_path):
    run(ip, TRANSFORM_CELL)
    run(ip, PRESENT_CELL.replace("shown", "saved_jit"))
    run(ip, "saved_jit(np.ones(3, np.float32))")
    run(ip, GRAD_CELL.replace("loss", "saved"))
    run(ip, "grad_saved(np.array([0.5, -2.0], np.float32), np.float32(1.5))")
    ns = ip.user_ns
    cases = {
        "jit": (ns["saved_jit"], "jit"),
        "jit-view": (view_of(ns["saved_jit"]), "jit"),
        "grad": (ns["grad_saved"], "grad"),
        "jaxpr": (run(ip, "%jaxpr wave(x_wave)"), "jaxpr"),
        "made": (nbjax.make_jaxpr(ns["wave"])(ns["x_wave"]), "jaxpr"),
        "transform": (run(ip, "%transform wave(x_wave) --with grad,vmap --backend reference"),
                      "transform"),
    }
    for name, (view, kind) in cases.items():
        path = nbjax.notebook.save_view(view, tmp_path / f"{name}.html")
        assert path == tmp_path / f"{name}.html"
        page = _assert_standalone_page(path, kind)
        if kind != "transform":
            assert "<svg" in page, name
        assert "calc(" not in page, name
    big = nbjax.notebook.save_view(ns["saved_jit"], tmp_path / "big.html", present=True)
    assert f"* {theme.PRESENT_SCALE:g})" in big.read_text()
    assert view_of(ns["saved_jit"]).scale == 1  # the live view is left as it was
    with pytest.raises(TypeError, match="cannot save a int"):
        nbjax.notebook.save_view(42, tmp_path / "no.html")
    run(ip, "%%jit --quiet\ndef unseen(x):\n    return x\n")
    with pytest.raises(ValueError, match="has no view to save"):
        nbjax.notebook.save_view(ns["unseen"], tmp_path / "no.html")


# --- %transform -----------------------------------------------------------------------------

TRANSFORM_CELL = """def wave(x):
    y = jnp.sin(x) * x
    return jnp.sum(y * 2.0)
x_wave = np.linspace(0.1, 1.0, 3).astype(np.float32)
"""


def _rows(stage, primitive=None, new=None):
    return [r for r in stage.eqns if (primitive is None or r["primitive"] == primitive)
            and (new is None or r["new"] == new)]


def test_transform_shows_each_stage_linked_to_the_one_before(ip):
    run(ip, TRANSFORM_CELL)
    view = run(ip, "%transform wave(x_wave) --with grad,vmap,jit --backend cpu")
    wave, x = ip.user_ns["wave"], ip.user_ns["x_wave"]
    original, graded, mapped, compiled = view.stages
    assert [s.label for s in view.stages] == \
        ["wave", "grad(wave)", "vmap(grad(wave))", "jit(vmap(grad(wave))) on cpu"]
    # each stage is the jaxpr of that function; vmap's with a batch axis of --batch copies
    xs = np.stack([x] * 4)
    assert str(original.jaxpr) == str(nbjax.make_jaxpr(wave)(x))
    assert str(graded.jaxpr) == str(nbjax.make_jaxpr(nbjax.grad(wave))(x))
    assert str(mapped.jaxpr) == str(nbjax.make_jaxpr(nbjax.vmap(nbjax.grad(wave)))(xs))
    assert not any(r["new"] or r["from"] for r in original.eqns)
    # grad: sin stays, cos (its derivative) and the whole backward pass are new
    (sin0,) = _rows(original, "sin")
    (sin1,) = _rows(graded, "sin")
    (cos1,) = _rows(graded, "cos")
    assert not sin1["new"] and sin1["from"] == [sin0["id"]]
    assert cos1["new"] and cos1["from"] == [sin0["id"]]
    backward = [r for r in graded.eqns if r["phase"] == "backward"]
    assert backward and all(r["new"] and r["from"] for r in backward)
    # each of the two backward muls of `sin(x) * x` comes from that mul
    mul0 = [r["id"] for r in _rows(original, "mul") if "sin" not in r["text"]]
    assert [r["from"] for r in _rows(graded, "mul") if r["phase"] == "backward"][1:3] == \
        [mul0[:1], mul0[:1]]
    # vmap: the batching rule's broadcasts are new, the rest maps one to one
    assert {r["primitive"] for r in _rows(mapped, new=True)} == {"broadcast_in_dim"}
    assert all(len(r["from"]) == 1 for r in _rows(mapped, new=False))
    # jit: every equation sits in a compiled step, linked to what it computes
    assert compiled.plan is not None and compiled.plan.groups
    assert all(r["step"] is not None and r["from"] for r in compiled.eqns)
    for before, stage in zip(view.stages, view.stages[1:]):
        ids = {r["id"] for r in before.eqns}
        assert all(set(r["from"]) <= ids for r in stage.eqns)


def test_transform_renders_static_html_with_links_between_stages(ip):
    run(ip, TRANSFORM_CELL)
    view = run(ip, "%transform --with grad,jit --backend cpu wave(x_wave)")  # options first
    assert [s.transform for s in view.stages] == [None, "grad", "jit"]
    page = view._repr_html_()
    assert "<script" not in page and 'data-nbjax-view="transform"' in page
    ids = set(re.findall(r'id="([^"]+)"', page))
    targets = re.findall(r'href="#([^"]+)"', page)
    assert targets and set(targets) <= ids  # every link lands on an equation shown
    for stage in view.stages:
        for row in stage.eqns:
            assert view.prefix + row["id"] in ids
    new = re.findall(r'class="nbjax-stage-eqn nbjax-new"[^>]*style="[^"]*background:([^;"]+)',
                     page)
    assert len(new) == sum(r["new"] for r in view.stages[1].eqns)
    assert len(set(new)) == 2  # forward derivatives and backward pass told apart
    assert page.count('class="nbjax-stage-step"') == len(view.stages[2].plan.groups)
    assert "Cell In[" in page  # tooltips name the cell line each equation came from
    assert "grad(wave)" in repr(view)


def test_transform_maps_over_in_axes_for_per_example_gradients(ip):
    """``--in-axes None,0,0``: the parameters are shared, the examples batched, as
    ``vmap(grad(loss), in_axes=(None, 0, 0))``; the stage's jaxpr is that function's."""
    run(ip, "def example_loss(w, x, y):\n    return (jnp.dot(x, w) - y) ** 2\n"
            "w_ex, x_ex, y_ex = np.ones(3, np.float32), np.arange(3.0, dtype=np.float32), "
            "np.float32(1.0)")
    view = run(ip, "%transform example_loss(w_ex, x_ex, y_ex) --with grad,vmap,jit "
                   "--in-axes None,0,0 --batch 5 --backend cpu")
    assert [s.label for s in view.stages][2:] == [
        "vmap(grad(example_loss), in_axes=(None, 0, 0))",
        "jit(vmap(grad(example_loss), in_axes=(None, 0, 0))) on cpu"]
    ns = ip.user_ns
    xs, ys = np.stack([ns["x_ex"]] * 5), np.full(5, 1.0, np.float32)
    per_example = nbjax.vmap(nbjax.grad(ns["example_loss"]), in_axes=(None, 0, 0))
    assert str(view.stages[2].jaxpr) == str(nbjax.make_jaxpr(per_example)(ns["w_ex"], xs, ys))
    assert [v.aval.shape for v in view.stages[2].jaxpr.jaxpr.invars] == [(3,), (5, 3), (5,)]
    assert [v.aval.shape for v in view.stages[2].jaxpr.jaxpr.outvars] == [(5, 3)]


def test_transform_of_a_reference_backend_says_nothing_is_fused(ip):
    run(ip, TRANSFORM_CELL)
    view = run(ip, "%transform wave(x_wave) --with vmap,jit --backend reference")
    assert view.stages[-1].plan is None and "nothing is fused" in view.stages[-1].note
    assert all(len(r["from"]) == 1 for r in view.stages[-1].eqns)


# --- the browser side -----------------------------------------------------------------------

def test_widget_assets_are_found_and_documented_test_ids_exist():
    js = (assets.extension_dir() / "nbjax_widgets.js").read_text()
    assert "export default { render }" in js
    assert (assets.extension_dir() / "nbjax.css").is_file()
    doc = nbjax.notebook.__doc__
    section = doc[doc.index("Stable ``data-testid``"):doc.index("The static fallback")]
    ids = set(re.findall(r"``(nbjax-[a-z-]+)(?:<|``)", section))
    assert len(ids) > 30
    missing = [i for i in ids if i not in js and i.rstrip("-") not in js]
    assert not missing


def test_a_cell_run_again_closes_the_views_of_the_functions_it_replaces(ip):
    """Re-running a %%jit or %%grad cell must not keep one more view (and its compiled code)
    per run: the replaced functions' views are closed and leave ipywidgets' registry."""
    import gc

    import ipywidgets
    from nbjax.notebook.widgets import NbjaxView

    def live_views():
        gc.collect()
        return [o for o in gc.get_objects() if isinstance(o, NbjaxView)]

    def registered():
        return len(ipywidgets.widgets.widget._instances)

    cells = ["%%jit\ndef rerun_f(x):\n    return jnp.sin(x) * 2.0\n",
             "%%grad\ndef rerun_g(x):\n    return jnp.sum(jnp.tanh(x))\n"]
    for cell in cells:
        run(ip, cell)
    run(ip, "rerun_f(np.ones(3, np.float32)); grad_rerun_g(np.ones(3, np.float32))")
    before_views, before_widgets = len(live_views()), registered()
    for _ in range(5):
        for cell in cells:
            run(ip, cell)
        run(ip, "rerun_f(np.ones(3, np.float32)); grad_rerun_g(np.ones(3, np.float32))")
    assert len(live_views()) == before_views
    assert registered() == before_widgets


# --- pytrees in the views ------------------------------------------------------------------

MLP_CELL = """%%grad{options}
def mlp_loss(params, x, y):
    h = jnp.tanh(x @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    return jnp.mean((out - y) ** 2)
"""


def _mlp_inputs(ip):
    rng = np.random.default_rng(0)
    params = {"W1": rng.normal(size=(3, 4)).astype(np.float32),
              "b1": rng.normal(size=4).astype(np.float32),
              "W2": rng.normal(size=(4, 1)).astype(np.float32),
              "b2": np.zeros(1, np.float32)}
    ip.user_ns.update(params=params, x=rng.normal(size=(5, 3)).astype(np.float32),
                      y=rng.normal(size=(5, 1)).astype(np.float32))
    return params


def test_grad_view_of_a_function_of_dict_parameters_steps_to_the_gradient(ip):
    run(ip, MLP_CELL.format(options=""))
    params = _mlp_inputs(ip)
    grads = run(ip, "grad_mlp_loss(params, x, y)")
    view = view_of(ip.user_ns["grad_mlp_loss"])
    assert view.status["state"] == "ready", view.status
    s = view.steps
    # the inputs are the parameters' leaves, named by their paths (in flattening order)
    keys = sorted(params)
    inputs = [r for r in s["rows"] if r["id"].startswith("in")]
    assert [r["text"].split(" (")[0] for r in inputs] == [f"input params['{k}']" for k in keys]
    assert all(r["text"].endswith(f"f32[{','.join(map(str, params[k].shape))}]")
               for r, k in zip(inputs, keys))
    # replayed to the end, the step-through's cotangents are the gradient, leaf by leaf
    _, derivs = _replay(s)
    for r, k in zip(inputs, keys):
        assert_close(parse_value(derivs[r["id"]]), np.asarray(grads[k]), rtol=1e-4)
    # both graphs name their inputs
    for graph in (s["graph"], view.grad["graph"]):
        names = [graph["nodes"][r["id"]]["name"] for r in inputs]
        assert names == [f"params['{k}']" for k in keys]
        assert "params[&#39;W1&#39;]" in graph["svg"] or "params['W1']" in graph["svg"]
    _assert_static(view.static_html())


def test_grad_view_memory_lists_what_the_backward_pass_keeps(ip):
    """The Memory pane: each value reverse mode keeps, with its size and origin (an
    argument, held fixed or not, or the line whose operation made it); a checkpoint keeps
    less; forward mode keeps nothing."""
    run(ip, MLP_CELL.format(options=""))
    _mlp_inputs(ip)
    run(ip, "grad_mlp_loss(params, x, y)")
    view = view_of(ip.user_ns["grad_mlp_loss"])
    memory = view.grad["memory"]
    origins = [r["origin"] for r in memory["rows"]]
    assert "the argument x (not differentiated)" in origins
    assert "the argument params['W2']" in origins   # out = h @ W2: its backward needs W2
    tanh = next(r for r in memory["rows"] if r["origin"] == "output of tanh")
    assert tanh["type"] == "f32[5,4]" and tanh["bytes"] == 5 * 4 * 4
    assert tanh["source_text"] == 'h = jnp.tanh(x @ params["W1"] + params["b1"])'
    assert memory["total"] == sum(r["bytes"] for r in memory["rows"])
    assert memory["arguments"] == (3 * 4 + 4 + 4 * 1 + 1) * 4
    html = view.static_html()
    _assert_static(html)
    assert "Memory (kept for the backward pass)" in html and "output of tanh" in html

    run(ip, "%%grad\ndef remat_loss(params, x, y):\n"
            "    return nbjax.checkpoint(mlp_loss)(params, x, y)\n")
    run(ip, "grad_remat_loss(params, x, y)")
    kept = view_of(ip.user_ns["grad_remat_loss"]).grad["memory"]
    assert kept["total"] < memory["total"]
    assert all(r["origin"].startswith("the argument") for r in kept["rows"])

    run(ip, "%%grad --mode fwd\ndef fwd_memory(x):\n    return jnp.sum(jnp.exp(x))\n")
    run(ip, "grad_fwd_memory(np.ones(3, np.float32))")
    assert "keeps nothing" in view_of(ip.user_ns["grad_fwd_memory"]).grad["memory"]["note"]


def test_forward_mode_grad_of_nested_containers(ip):
    run(ip, "%%grad --mode fwd\ndef layered(layers, x):\n"
            "    (w, b), scale = layers\n    return jnp.sum(jnp.tanh(x * w + b) * scale)\n")
    w, b = np.array([0.5, -1.0], np.float32), np.array([0.1, 0.2], np.float32)
    x = np.array([1.0, 2.0], np.float32)
    ip.user_ns.update(layers=((w, b), np.float32(2.0)), x=x)
    run(ip, "grad_layered(layers, x)")
    view = view_of(ip.user_ns["grad_layered"])
    assert view.status["state"] == "ready", view.status
    s = view.steps
    assert "layers[0][0][0]" in s["seed"]
    # the walk's output tangent is d out / d w[0]
    _, tangents = _replay(s)
    expected = 2.0 * x[0] * (1 - np.tanh(x[0] * w[0] + b[0]) ** 2)
    assert_close(parse_value(tangents[s["steps"][-1]["node"]]), expected, rtol=1e-4)
    graph = view.grad["graph"]  # the tangent inputs are named after their primals
    names = [n["name"] for n in graph["nodes"].values() if n["kind"] == "input"]
    assert names[:3] == ["layers[0][0]", "layers[0][1]", "layers[1]"]
    assert names[3:] == [f"tangent of {n}" for n in names[:3]]


def test_compiler_view_of_a_function_of_pytrees(ip):
    run(ip, "%%jit --show graph,timing --static n\ndef tree_fn(params, n, x):\n"
            "    h = jnp.tanh(x @ params['W'] + params['b'][0])\n"
            "    return {'out': h * n, 'parts': [h, h.sum()]}\n")
    params = {"W": np.ones((3, 2), np.float32), "b": [np.zeros(2, np.float32)]}
    ip.user_ns.update(params=params, x=np.ones((4, 3), np.float32))
    out = run(ip, "tree_fn(params, 2, x)")
    assert_close(np.asarray(out["out"]), 2 * np.tanh(np.full((4, 2), 3.0)), rtol=1e-5)
    view = view_of(ip.user_ns["tree_fn"])
    assert view.status["state"] == "ready", view.status
    nodes = view.compiled["graph"]["nodes"]
    inputs = [n for n in nodes.values() if n["kind"] == "input"]
    assert [n["name"] for n in inputs] == ["params['W']", "params['b'][0]", "x"]


def test_value_text_summarises_large_arrays_and_containers():
    from nbjax.notebook.panes import value_text
    rng = np.random.default_rng(1)
    big = rng.normal(size=(40, 30)).astype(np.float32)
    big[3, 4], big[5, 6], big[7, 8] = np.nan, np.inf, -np.inf
    text = value_text(big)
    finite = big[np.isfinite(big)]
    assert text.startswith("f32[40,30] ")
    low, high = re.search(r"min (\S+) max (\S+?),", text).groups()
    assert_close(float(low), finite.min(), rtol=1e-3)
    assert_close(float(high), finite.max(), rtol=1e-3)
    assert "1 NaN" in text and "2 inf" in text and len(text) < 200
    small = rng.normal(size=(2, 3))
    assert_close(parse_value(value_text(small)), small, rtol=1e-3)  # small arrays whole
    lines = value_text({"W": small, "b": [np.zeros(2), 3.0]}).splitlines()
    assert [line.split(":")[0] for line in lines] == ["['W']", "['b'][0]", "['b'][1]"]


def test_an_error_building_a_view_is_short(ip, monkeypatch):
    from nbjax.notebook import widgets

    def fail(*args, **kwargs):
        raise TypeError("Value " + "[1.0, 2.0] " * 2000 + "is not a valid nbjax type")
    monkeypatch.setattr(widgets, "grad_states", fail)
    run(ip, "%%grad\ndef failing(x):\n    return jnp.sum(x)\n")
    run(ip, "grad_failing(np.ones(3, np.float32))")
    status = view_of(ip.user_ns["grad_failing"]).status
    assert status["state"] == "error" and "TypeError: Value [1.0" in status["message"]
    assert len(status["message"]) <= 400


# --- cell numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("magic", ["jit", "grad"])
def test_cell_numbers_are_those_of_the_cell_that_defined_the_function(ip, magic):
    """IPython numbers a cell before running it; the magic's functions must be reported
    under that number (``Cell In[4]``) in tracebacks, node details and the static HTML,
    not the next one."""
    result = ip.run_cell(f"%%{magic}\ndef numbered(x):\n    y = jnp.sin(x)\n"
                         "    return jnp.dot(y, jnp.ones(4))\n", store_history=True)
    result.raise_error()
    defined_in = f"In[{result.execution_count}]"
    call = "numbered" if magic == "jit" else "grad_numbered"
    error = ip.run_cell(f"{call}(np.ones(3, np.float32))", store_history=True).error_in_exec
    filename, line = _visible_frames(error.__traceback__)[-1]
    assert ip.compile.format_code_name(filename) == ("Cell", defined_in) and line == 4
    shown = "".join(ip.InteractiveTB.structured_traceback(
        type(error), error, error.__traceback__))
    assert f"Cell {defined_in}, line 4" in re.sub(r"\x1b\[[0-9;]*m", "", shown)
    # the views' source locations
    ok = ip.run_cell(f"%%{magic}\ndef located(x):\n    return jnp.sin(x) * 2.0\n",
                     store_history=True)  # as a kernel runs a cell
    call = "located" if magic == "jit" else "grad_located"
    run(ip, f"{call}(np.float32(0.5))")
    view = view_of(ip.user_ns[call])
    graph = view.compiled["graph"] if magic == "jit" else view.steps["graph"]
    sin = next(n for n in graph["nodes"].values() if n["primitive"] == "sin")
    assert sin["source"] == f"Cell In[{ok.execution_count}], line 3"
    if magic == "grad":  # the static HTML's table of links names the source line
        assert f"Cell In[{ok.execution_count}], line 3" in view.static_html()


def test_a_view_is_shown_as_a_static_output_then_the_widget(ip, monkeypatch):
    """Front ends do not fall back to a widget output's own text/html when its model is gone
    (reopened notebooks, exports): the static rendering is an output of its own, before the
    widget, with the rule hiding the dead widget and the hint to re-run the cell."""
    from nbjax.notebook import widgets
    shown = []

    def display(obj, raw=False, metadata=None, display_id=None):
        shown.append(obj)
    monkeypatch.setattr(widgets, "display", display)
    run(ip, "%%jit\ndef shown_twice(x):\n    return x * 2\n")
    static, widget = shown
    assert set(static) == {"text/html", "text/plain"}
    assert "application/vnd.jupyter.widget-view+json" in widget and "text/html" not in widget
    assert widget["application/vnd.jupyter.widget-view+json"]["model_id"] == \
        view_of(ip.user_ns["shown_twice"]).model_id
    html = static["text/html"]
    _assert_static(html)
    assert 'data-nbjax-view="jit"' in html and "re-run the cell to make this view live" in html
    assert ".jupyter-widgets:not(:has(*))" in html  # hides "model not found" after it
    css = (assets.extension_dir() / "nbjax.css").read_text()
    assert ":has(.nbjax-static):has(+ .jp-OutputArea-child .nbjax-root)" in css
    shown.clear()
    run(ip, "shown_twice.view()")  # a view as a cell's result: both outputs again
    assert len(shown) == 2 and "text/html" in shown[0]


# --- honest states --------------------------------------------------------------------------

def test_compiler_view_says_tracing_then_compiling_then_ready(ip):
    run(ip, "%%jit\ndef phased(x):\n    return jnp.sin(x) * 2.0\n")
    view = view_of(ip.user_ns["phased"])
    seen = []
    view.observe(lambda change: seen.append(dict(change["new"])), names="status")
    run(ip, "phased(np.ones(3, np.float32))")
    states = [s["state"] for s in seen]
    assert states == ["busy", "busy", "ready"], seen
    assert seen[0]["message"] == "tracing phased(...)…"
    assert seen[1]["message"].startswith("compiling phased")
    seen.clear()
    run(ip, "phased(np.ones(3, np.float32))")  # cached: no phase to announce
    assert [s["state"] for s in seen] == ["ready"]
    seen.clear()
    run(ip, "phased(np.ones(5, np.float32))")  # a new signature traces and compiles again
    assert [(s["state"], s["message"][:9]) for s in seen[:2]] == [("busy", "tracing p"),
                                                                  ("busy", "compiling")]
    assert [s["state"] for s in seen[2:]] == ["ready"]


@pytest.mark.parametrize("magic", ["jit", "grad"])
def test_a_failed_call_shows_its_error_and_cell_line(ip, magic):
    cell = ip.run_cell(f"%%{magic}\ndef failing_dot(x):\n    y = jnp.sin(x)\n"
                       "    return jnp.dot(y, jnp.ones(4))\n", store_history=True)
    call = "failing_dot" if magic == "jit" else "grad_failing_dot"
    view = view_of(ip.user_ns[call])
    result = ip.run_cell(f"{call}(np.ones(3, np.float32))")
    assert isinstance(result.error_in_exec, TypeError)
    status = view.status
    assert status["state"] == "error"
    assert status["message"].startswith(
        f"the last call failed (Cell In[{cell.execution_count}], line 4): TypeError:")
    assert len(status["message"]) < 400 and "not compiled yet" not in status["message"]
    assert status["message"] in view.static_bundle()["text/html"]


@pytest.mark.cpu_compiler
def test_timing_has_two_labelled_baselines_and_no_percentage_above_the_limit(ip, monkeypatch):
    from nbjax.notebook import machine
    limits = dict(machine.limits(), gbps=1e-9, gflops=1e-9)  # a limit every kernel beats
    monkeypatch.setattr(jit_state.machine, "limits", lambda: limits)
    run(ip, "%%jit --show timing\ndef timed(x):\n    return jnp.sum(jnp.exp(x) * 2.0)\n")
    run(ip, "timed(np.linspace(0, 1, 4096).astype(np.float32))")
    t = view_of(ip.user_ns["timed"]).timing
    assert t["numpy_seconds"] > 0 and t["eager_seconds"] > 0
    assert_close(t["numpy_speedup"], t["numpy_seconds"] / t["median_seconds"], rtol=1e-9)
    assert_close(t["speedup"], t["eager_seconds"] / t["median_seconds"], rtol=1e-9)
    assert t["steps"] and all(s["bandwidth_fraction"] == 1.0 for s in t["steps"])
    html = view_of(ip.user_ns["timed"]).static_html()
    assert "speed-up over NumPy" in html and "speed-up over nbjax eager" in html


@pytest.fixture
def baseline_runs(monkeypatch):
    """The calls of the two baseline runners, as ("eager" | "numpy", function name)."""
    runs = []

    def counted(kind, runner):
        def run_and_count(self, *args):
            runs.append((kind, self.name))
            return runner(self, *args)
        return run_and_count

    monkeypatch.setattr(WatchedJit, "_eager_seconds",
                        counted("eager", WatchedJit._eager_seconds))
    monkeypatch.setattr(WatchedJit, "_numpy_seconds",
                        counted("numpy", WatchedJit._numpy_seconds))
    return runs


def test_the_first_call_does_not_run_the_baselines(ip, baseline_runs):
    """The baselines run after the cell that made the first call (the Timing pane open),
    never inside it: what the cell measures of the first call is the call alone."""
    run(ip, "%%jit --show timing\ndef first(x):\n    return jnp.tanh(x) * 3.0\n")
    ip.user_ns["baseline_runs"] = baseline_runs
    run(ip, "first(np.ones(5, np.float32))\nruns_in_cell = list(baseline_runs)")
    assert ip.user_ns["runs_in_cell"] == []  # nothing during the cell of the first call
    assert baseline_runs == [("eager", "first"), ("numpy", "first")]  # after it, once
    t = view_of(ip.user_ns["first"]).timing
    assert t["eager_seconds"] > 0 and t["numpy_seconds"] > 0 and not t["baselines_pending"]
    run(ip, "first(np.ones(5, np.float32))")
    assert len(baseline_runs) == 2  # once per compilation


def test_baselines_wait_for_the_button_or_the_session_option(ip, baseline_runs):
    """With another pane open, the baselines are measured when the Timing pane's button
    is clicked (the ``measure`` trait), or after each cell under ``%nbjax --baselines on``;
    until then the pane and its static copy say they are not measured."""
    run(ip, "%%jit --show graph,timing\ndef asked(x):\n    return jnp.cos(x) + 1.0\n")
    run(ip, "asked(np.ones(4, np.float32))")
    view = view_of(ip.user_ns["asked"])
    assert baseline_runs == [] and view.timing["baselines_pending"]
    assert view.timing["numpy_speedup"] is None
    assert "baselines not measured yet" in view.static_bundle()["text/html"]
    view.measure += 1  # the button
    assert baseline_runs == [("eager", "asked"), ("numpy", "asked")]
    t = view.timing
    assert t["numpy_seconds"] > 0 and not t["baselines_pending"]
    assert_close(t["numpy_speedup"], t["numpy_seconds"] / t["median_seconds"], rtol=1e-9)
    view.measure += 1  # measured once per compilation
    assert len(baseline_runs) == 2

    run(ip, "%%jit --show graph,timing\ndef by_option(x):\n    return jnp.cos(x) * 2.0\n")
    try:
        ip.run_line_magic("nbjax", "--baselines on")
        assert session.baselines is True
        run(ip, "by_option(np.ones(4, np.float32))")
    finally:
        session.baselines = False
    # every view shown in the session (earlier ones too), each once
    assert [r for r in baseline_runs if r[1] == "by_option"] == [("eager", "by_option"),
                                                                ("numpy", "by_option")]
    assert view_of(ip.user_ns["by_option"]).timing["eager_seconds"] > 0


def test_baselines_are_not_run_for_a_long_loop(ip):
    """The baselines run the program one equation at a time: a scan of 30,000 iterations
    (or a while loop, whose count is unknown) is not run that way (it would take seconds
    more than the compiled call); the pane says why. A short program still gets them."""
    run(ip, "from nbjax import lax")
    run(ip, "%%jit --show timing\ndef long_loop(x):\n"
            "    return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None, length=30000)[0]\n")
    run(ip, "long_loop(np.ones(3, np.float32))")
    t = view_of(ip.user_ns["long_loop"]).timing
    assert t["eager_seconds"] is None and t["numpy_seconds"] is None
    note = t["baselines_note"]
    assert re.search(r"\d{2},\d{3} equations", note) and "not measured" in note
    assert t["baselines_note"] in view_of(ip.user_ns["long_loop"]).static_html()
    run(ip, "%%jit --show timing\ndef until(x):\n"
            "    return lax.while_loop(lambda c: c < 10.0, lambda c: c + 1.0, x)\n")
    run(ip, "until(np.float32(0.0))")
    assert "a while loop" in view_of(ip.user_ns["until"]).timing["baselines_note"]
    run(ip, "%%jit --show timing\ndef short(x):\n    return jnp.sin(x) + 1.0\n")
    run(ip, "short(np.ones(3, np.float32))")
    t = view_of(ip.user_ns["short"]).timing
    assert t["eager_seconds"] > 0 and t["baselines_note"] is None


def test_a_view_runs_the_function_once_per_trace(ip):
    """The timing baselines do not call the function again: its side effects (a print, a
    list counting traces) happen once per trace, as under plain jit; the eager baseline
    is still measured (the traced program, equation by equation)."""
    run(ip, "traces = []")
    run(ip, "%%jit --show timing\ndef counted(x, n):\n    traces.append(n)\n"
            "    return jnp.sin(x) * n\n")
    for n in (2.0, 2.0, 3.0):
        run(ip, f"counted(np.ones(3, np.float32), {n})")
    assert len(ip.user_ns["traces"]) == 1   # n is traced: one signature
    t = view_of(ip.user_ns["counted"]).timing
    assert t["eager_seconds"] > 0 and t["numpy_seconds"] > 0


# --- the annotated source, grouping, faded dead code -----------------------------------------

INNER_CELL = "@nbjax.jit\ndef src_inner(x):\n    y = jnp.sin(x)\n    return y * 2.0\n"
OUTER_CELL = ("%%jit\ndef src_outer(x):\n    a = jnp.exp(x)\n    b = src_inner(a)\n"
              "    c = jnp.sum(b + a)\n    return c * jnp.cumsum(a)\n")


def _source_pane(ip):
    """The source pane of a %%jit function calling a jitted function of another cell."""
    inner = ip.run_cell(INNER_CELL, store_history=True)
    outer = ip.run_cell(OUTER_CELL, store_history=True)
    inner.raise_error()
    outer.raise_error()
    run(ip, "for _ in range(3): src_outer(np.linspace(0, 1, 500).astype(np.float32))")
    view = view_of(ip.user_ns["src_outer"])
    return view, inner.execution_count, outer.execution_count


@pytest.mark.cpu_compiler
def test_source_pane_lines_carry_their_kernels_time_and_decisions(ip):
    view, inner_cell, outer_cell = _source_pane(ip)
    source, graph = view.compiled["source"], view.compiled["graph"]
    files = {f["label"]: f for f in source["files"]}
    # the inner function's lines are its own cell's, not the calling line's
    assert list(files) == [f"Cell In[{outer_cell}]", f"Cell In[{inner_cell}]"]
    lines = {(label, row["line"]): row for label, f in files.items() for row in f["lines"]}
    inner = {row["text"].strip(): row for (label, _), row in lines.items()
             if label == f"Cell In[{inner_cell}]"}
    assert inner["y = jnp.sin(x)"]["line"] == 3 and inner["return y * 2.0"]["line"] == 4
    prims = {i: n["primitive"] for i, n in graph["nodes"].items()}
    assert [prims[i] for i in inner["y = jnp.sin(x)"]["nodes"]] == ["sin"]
    # every equation is on exactly one line, whose kernels are its equations' plan steps
    owned = [i for row in lines.values() for i in row["nodes"]]
    assert sorted(owned) == sorted(i for i, n in graph["nodes"].items() if n["kind"] == "eqn")
    for row in lines.values():
        assert row["kernels"] == sorted({graph["nodes"][i]["group"] for i in row["nodes"]})
        assert [d["node"] for d in row["decisions"]] == row["nodes"]
    call_line = lines[(f"Cell In[{outer_cell}]", 4)]
    assert call_line["text"] == "    b = src_inner(a)" and call_line["nodes"] == []
    cumsum_line = lines[(f"Cell In[{outer_cell}]", 6)]
    assert len(cumsum_line["kernels"]) == 2  # cumsum (a library step) and the product
    # the time of every step is shared out among its lines, none lost or counted twice
    steps = sum(s["seconds"] for s in view.timing["steps"])
    per_line = [source_pane.line_seconds(row, view.timing) for row in lines.values()]
    assert_close(sum(s for s in per_line if s), steps, rtol=1e-9)


@pytest.mark.cpu_compiler
def test_static_source_pane_has_each_line_s_kernel_count(ip):
    view, inner_cell, outer_cell = _source_pane(ip)
    html = view.static_html()
    _assert_static(html)
    assert ">Source</summary>" in html and f"Cell In[{inner_cell}]" in html
    first = re.search(r'<table class="nbjax-source".*?</table>', html).group(0)  # outer's
    rows = re.findall(r'<tr data-line="(\d+)" style="[^"]*">(.*?)</tr>', first)
    cells = {line: re.findall(r"<td[^>]*>(.*?)</td>", row) for line, row in rows}
    outer = {row["line"]: row for row in view.compiled["source"]["files"][0]["lines"]}
    for line, row in outer.items():
        count = len(row["kernels"])
        kernels = cells[str(line)][1]
        if row["nodes"]:
            assert kernels.startswith(f"{count} kernel{'s' if count != 1 else ''}")
        else:
            assert kernels == ""
    assert "2 kernels" in cells["6"][1] and "background:rgba(245,158,11," in html
    assert "Fusion decisions, line by line" in html


@pytest.mark.cpu_compiler
def test_compiler_view_groups_its_graph_by_line_and_folds_a_group(ip):
    view, _, outer_cell = _source_pane(ip)
    view.group = "line"
    graph = view.compiled["graph"]
    groups = [c for c in graph["clusters"] if c["id"].startswith("src-")]
    assert graph["group"] == "line" and groups
    by_line = {}
    for i, n in graph["nodes"].items():
        if n["kind"] == "eqn":
            by_line.setdefault(n["source"], set()).add(i)
    assert sorted(map(sorted, (set(g["members"]) for g in groups))) == \
        sorted(map(sorted, by_line.values()))  # each line's equations run together here
    svg = graph["svg"].replace("&#45;", "-")
    assert all(f'id="{graph["prefix"]}cluster-{g["id"]}"' in svg for g in groups)
    folded = groups[-1]
    view.toggled = [folded["id"]]
    svg = view.compiled["graph"]["svg"].replace("&#45;", "-")
    assert f'id="{graph["prefix"]}{folded["id"]}"' in svg  # one node for the group
    assert not any(f'id="{graph["prefix"]}{m}"' in svg for m in folded["members"])
    view.group, view.toggled = "", []


@pytest.mark.cpu_compiler
def test_compiler_view_groups_an_inlined_jitted_call_inside_its_caller(ip):
    """The compiler view draws the optimised program, the jitted function of the other
    cell inlined: grouped by function, its equations are a group inside the caller's."""
    view, _, _ = _source_pane(ip)
    view.group = "function"
    graph = view.compiled["graph"]
    groups = [c for c in graph["clusters"] if c["id"].startswith("src-")]
    assert [g["name"] for g in groups] == ["src_outer()", "src_inner()"]
    outer, inner = groups
    prims = {i: n["primitive"] for i, n in graph["nodes"].items()}
    assert sorted(prims[i] for i in inner["members"]) == ["mul", "sin"]
    assert set(inner["members"]) < set(outer["members"])
    eqns = {i for i, n in graph["nodes"].items() if n["kind"] == "eqn"}
    assert set(outer["members"]) == eqns | {inner["id"]}
    view.group = ""


def test_grad_view_groups_by_function_nest_the_calls_of_the_cells_functions(ip):
    """Grouped by function, the gradient's graph has a group per call, nested as the calls
    are, forward and backward apart; IPython's frames are in none; folding a call from the
    browser draws it as one node inside its caller's open cluster."""
    run(ip, "def nest_relu(x):\n    return jnp.maximum(x, 0.0)\n\n"
            "def nest_layer(w, x):\n    return nest_relu(x * w) + 1.0\n")
    run(ip, "%%grad\ndef nest_net(x):\n    for w in (2.0, -3.0):\n"
            "        x = nest_layer(w, x)\n    return jnp.sum(x)\n")
    run(ip, "grad_nest_net(np.linspace(-1, 1, 3).astype(np.float32))")
    view = view_of(ip.user_ns["grad_nest_net"])
    view.group = "function"
    graph = view.grad["graph"]
    groups = {c["name"]: c for c in graph["clusters"] if c["id"].startswith("src-")}
    assert list(groups) == [
        "nest_net()", "nest_layer()", "nest_relu()", "nest_layer() #2", "nest_relu() #2",
        "nest_net() · backward", "nest_layer() #2 · backward", "nest_relu() #2 · backward",
        "nest_layer() · backward", "nest_relu() · backward"]
    forward, second = groups["nest_net()"], groups["nest_layer() #2"]
    assert set(second["members"]) < set(forward["members"])
    assert groups["nest_relu() #2"]["id"] in forward["members"]  # fold the caller from it
    svg = graph["svg"].replace("&#45;", "-")
    assert all(f'id="{graph["prefix"]}cluster-{g["id"]}"' in svg for g in groups.values())
    view.toggled = [second["id"]]
    svg = view.grad["graph"]["svg"].replace("&#45;", "-")
    assert f'id="{graph["prefix"]}{second["id"]}"' in svg
    assert not any(f'id="{graph["prefix"]}{m}"' in svg for m in second["members"])
    assert f'id="{graph["prefix"]}cluster-{forward["id"]}"' in svg  # the caller stays open
    view.group, view.toggled = "", []


def test_grad_view_fades_the_dead_forward_code(ip):
    run(ip, "%%grad\ndef faded(x):\n    return jnp.sum(jnp.exp(jnp.sin(x)) * 2.0)\n")
    run(ip, "grad_faded(np.ones(3, np.float32))")
    graph = view_of(ip.user_ns["grad_faded"]).grad["graph"]
    dead = {i: n for i, n in graph["nodes"].items() if n["dim"]}
    # grad keeps the forward pass whole: the primal's `* 2.0` and sum, which nothing reads
    assert sorted(n["primitive"] for n in dead.values()) == ["mul", "reduce_sum"]
    assert all(n["phase"] == "forward" and "DCE" in n["dim"] for n in dead.values())
    assert graph["dimmed"] == 2 and "unused (DCE drops it)" in graph["svg"]


def test_grad_view_hides_its_graph_s_identities_on_the_browser_s_toggle(ip):
    from nbjax.viz.unused import IDENTITY
    run(ip, "%%grad\ndef ident(x):\n    return jnp.sum(jnp.sin(x * 1.0) - 0.0)\n")
    run(ip, "grad_ident(np.ones(3, np.float32))")
    view = view_of(ip.user_ns["grad_ident"])
    shown, rows, jaxpr = view.grad["graph"], view.grad["rows"], view.grad["jaxpr"]
    assert shown["hide_identities"] is False and shown["identities_hidden"] == 0
    # x * 1.0 and - 0.0 (the forward pass's, faded as identities, or as dead code)
    identity = re.compile(r"= (mul \w+ 1\.0|sub \w+ 0\.0):f32\[\]$")
    identities = {i for i, n in shown["nodes"].items() if identity.search(n["text"])}
    assert len(identities) >= 2
    assert {i for i, n in shown["nodes"].items() if n["dim"] == IDENTITY} <= identities
    view.hide_identities = True  # what the toolbar's checkbox sets
    hidden = view.grad["graph"]
    assert hidden["hide_identities"] is True
    assert hidden["identities_hidden"] == len(identities)
    assert set(shown["nodes"]) - set(hidden["nodes"]) == identities
    assert f"{len(identities)} identities hidden" in hidden["svg"]
    assert f"{len(identities)} identities hidden" in view.static_html()
    # the jaxpr panes keep every equation, the step-through's graph too (it visits all)
    assert [r["text"] for r in view.grad["rows"]] == [r["text"] for r in rows]
    assert view.grad["jaxpr"] == jaxpr
    assert len(rows) == sum(n["kind"] == "eqn" for n in shown["nodes"].values())
    assert view.steps["graph"]["identities_hidden"] == 0
    view.hide_identities = False
    assert view.grad["graph"]["identities_hidden"] == 0


def test_compiler_view_round_trips_its_hide_identities_toggle(ip):
    run(ip, "%%jit\ndef ident_jit(x):\n    return jnp.sin(x * 1.0)\n")
    run(ip, "ident_jit(np.ones(3, np.float32))")
    view = view_of(ip.user_ns["ident_jit"])
    assert view.compiled["graph"]["hide_identities"] is False
    view.hide_identities = True
    graph = view.compiled["graph"]
    # the cpu compiler already removed x * 1.0 from the program it draws, leaving nothing
    # to hide; the reference backend draws the program as traced
    optimised = nbjax.config.jit_backend != "reference"
    assert graph["hide_identities"] is True and graph["identities_hidden"] == (not optimised)
    assert [n["primitive"] for n in graph["nodes"].values() if n["kind"] == "eqn"] == ["sin"]
    view.hide_identities = False


STEP_CELLS = ["%%grad\ndef small(x):\n    return jnp.sum(jnp.sin(x) * x)\n",
              "%%grad --mode fwd\ndef small_fwd(x):\n    return jnp.sum(jnp.sin(x) * x)\n"]


def _repeated_words(text):
    """Words of three letters or more said twice in a row ("forward forward", "the the");
    the jaxpr variables of these small programs (``mul b b``) are shorter."""
    return re.findall(r"\b([A-Za-z]{3,})\s+\1\b", text, flags=re.IGNORECASE)


def test_step_through_texts_repeat_no_word(ip):
    for cell in STEP_CELLS:
        run(ip, cell)
    run(ip, MLP_CELL.format(options=""))
    _mlp_inputs(ip)
    run(ip, "grad_small(np.ones(3, np.float32)); grad_small_fwd(np.ones(3, np.float32))")
    run(ip, "grad_mlp_loss(params, x, y)")
    for name in ("grad_small", "grad_small_fwd", "grad_mlp_loss"):
        view = view_of(ip.user_ns[name])
        s = view.steps
        assert len(s["steps"]) > 3, name
        rows = {r["id"]: r["text"] for r in view.grad["rows"]}
        texts = [s["seed"]] + [r["text"] for r in s["rows"]]
        for step in s["steps"]:  # as the browser shows a step: its phase, text and links
            texts.append(f"{step['phase']} {step['text']} in the derivative's jaxpr: "
                         + ";  ".join(rows.get(i, "") for i in step["linked"]))
        assert all(_repeated_words(t) == [] for t in texts), \
            [t for t in texts if _repeated_words(t)]


def test_grad_view_source_pane_counts_each_line_s_forward_and_backward_equations(ip):
    cell = ip.run_cell("%%grad\ndef two_step(x):\n    y = jnp.sin(x) * x\n"
                       "    return jnp.sum(jnp.exp(y))\n", store_history=True)
    cell.raise_error()
    run(ip, "grad_two_step(np.ones(3, np.float32))")
    view = view_of(ip.user_ns["grad_two_step"])
    graph, (file,) = view.grad["graph"], view.grad["source"]["files"]
    assert file["label"] == f"Cell In[{cell.execution_count}]"
    rows = {row["line"]: row for row in file["lines"] if row["nodes"]}
    assert sorted(rows) == [3, 4]
    for row in rows.values():  # the graph's nodes of each line, by phase
        phases = [graph["nodes"][i]["phase"] for i in row["nodes"]]
        assert row["backward"] == phases.count("backward") > 0
        assert len(row["nodes"]) - row["backward"] == phases.count("forward") > 0
        assert {graph["nodes"][i]["source"] for i in row["nodes"]} == \
            {f"Cell In[{cell.execution_count}], line {row['line']}"}
    html = view.static_html()
    _assert_static(html)
    f3 = rows[3]
    assert f">{len(f3['nodes']) - f3['backward']} fwd, {f3['backward']} bwd<" in html


@pytest.mark.cpu_compiler
def test_source_pane_without_the_timing_pane_times_its_lines_but_runs_no_baseline(ip):
    run(ip, "%%jit --backend cpu --show graph,source\ndef timed_lines(x):\n"
            "    return jnp.sum(jnp.sin(x))\n")
    run(ip, "timed_lines(np.ones(256, np.float32))")
    view = view_of(ip.user_ns["timed_lines"])
    (row,) = [r for r in view.compiled["source"]["files"][0]["lines"] if r["nodes"]]
    assert source_pane.line_seconds(row, view.timing) > 0
    assert view.timing["eager_seconds"] is None and view.timing["numpy_seconds"] is None

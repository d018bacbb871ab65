"""The architecture of docs/architecture.md, checked: the layers (import-linter, with the
contracts in pyproject.toml) and the import cycles that remain."""

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent

# Known cycles among sibling modules, left to untangle: none. No cycle may appear.
KNOWN_CYCLES = []


def test_layers_follow_the_contracts():
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def strongly_connected(edges):
    """The strongly connected components (with more than one module) of a directed graph."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def test_strongly_connected_finds_cycles():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert strongly_connected(edges) == [{"a", "b", "c"}]


def test_no_import_cycles_but_the_known_ones():
    graph = grimp.build_graph("nbjax", cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    for cycle in strongly_connected(edges):
        assert any(cycle <= known for known in KNOWN_CYCLES), f"import cycle: {sorted(cycle)}"


# The imports nbjax makes inside functions, each for a reason a top-level import cannot serve.
IMPORTS_INSIDE_FUNCTIONS = {
    "__init__.py": "the notebook layer (IPython, widgets) loads only with %load_ext nbjax",
    "distributed/__init__.py": "mpi4py initialises MPI when imported: only when a run asks",
    "backends/cpu/routines.py": "scipy.linalg (150-300 ms to import), where NumPy's BLAS is not found",
    "backends/gpu/cuda.py": "CuPy: imported when a program is compiled for the gpu, never before",
    "lax/linalg/util.py": "scipy.linalg: a third of nbjax's import time; a few routines need it",
    "lax/fft.py": "scipy.fft (its transforms are pocketfft's): only when a program transforms",
    "numpy/creation.py": "llvmlite (60 ms to import) for the CPU's features: a float16 linspace",
}


def test_imports_are_at_the_top_but_the_listed_ones():
    """An import inside a function hides a dependency (and often a cycle) from the reader."""
    hidden = set()
    for path in sorted((ROOT / "nbjax").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.walk(fn)):
                hidden.add(path.relative_to(ROOT / "nbjax").as_posix())
    assert hidden == set(IMPORTS_INSIDE_FUNCTIONS), f"imports inside functions: {sorted(hidden)}"

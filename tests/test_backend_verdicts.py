"""The suite's verdicts do not depend on the backend jit compiles for.

The suite itself runs with jit on the cpu backend (the default), where every test must
pass; this test runs it again, in a child process, with ``NBJAX_JIT_BACKEND=reference``,
where every test must pass too: the same verdicts. Tests of what the cpu backend compiles
(marked ``cpu_compiler``) are skipped there; modules that name their backend explicitly give
the same verdict under either setting and are left out to save time, as are the notebook runs.
"""
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
SAME_EITHER_WAY = ["test_backend_verdicts.py", "test_browser.py", "test_notebooks.py",
                   "test_fuzz_differential.py", "test_compile_cache.py", "test_cpu_backend.py",
                   "test_cpu_mathlib.py", "test_cpu_targets.py", "test_cpu_support.py",
                   "test_cpu_control_flow.py", "test_cpu_performance_features.py"]


def test_every_verdict_is_the_same_with_the_reference_backend():
    ignored = [f"--ignore={TESTS / name}" for name in SAME_EITHER_WAY]
    env = dict(os.environ, NBJAX_JIT_BACKEND="reference")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", "-rf", str(TESTS), *ignored],
                         env=env, capture_output=True, text=True, timeout=1800)
    failed = [line for line in run.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert run.returncode == 0, "\n".join(failed) or run.stdout[-3000:] + run.stderr[-3000:]

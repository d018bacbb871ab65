import os
import shutil
import tempfile

import pytest

# Tests compile into their own disk cache, not the user's (~/.cache/nbjax). The process that
# makes it (pytest-xdist's workers inherit it) removes it when the session ends.
_OWN_CACHE = None
if "NBJAX_CACHE_DIR" not in os.environ:
    _OWN_CACHE = os.environ["NBJAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="nbjax-test-cache-")


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)

# A product that fits the register tiles uses them on every machine in the tests (by
# default the faster of them and BLAS, measured: tests/test_cpu_tiled_products.py).
os.environ.setdefault("NBJAX_PRODUCT_TILES", "always")

import nbjax  # noqa: E402


@pytest.fixture
def empty_disk_cache(tmp_path, monkeypatch):
    """Compile into an empty disk cache: a program is compiled, not loaded whole."""
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path / "nbjax-cache"))


@pytest.fixture
def x64():
    """Run a test with 64-bit types enabled, restoring the previous setting afterwards."""
    with nbjax.enable_x64(True):
        yield


@pytest.fixture(autouse=True)
def _deterministic_module_rng(request):
    """Reseed a test module's shared random generator (``rng``/``RNG``) for each test from
    the test's id, so a test sees the same inputs whatever ran before it (pytest-xdist
    distributes tests differently on every run)."""
    import zlib

    import numpy as np
    module = request.module
    seed = zlib.crc32(request.node.nodeid.encode())
    for name in ("rng", "RNG", "_rng"):
        current = getattr(module, name, None)
        if isinstance(current, np.random.RandomState):
            setattr(module, name, np.random.RandomState(seed))
        elif isinstance(current, np.random.Generator):
            setattr(module, name, np.random.default_rng(seed))
    yield


def pytest_collection_modifyitems(config, items):
    """Under another jit backend (NBJAX_JIT_BACKEND=reference), skip the tests of what the
    cpu backend compiles: every other test must give the same verdict on both backends
    (test_backend_verdicts.py)."""
    if nbjax.config.jit_backend == "cpu":
        return
    skip = pytest.mark.skip(reason="checks the cpu backend's compiled code, not results")
    for item in items:
        if "cpu_compiler" in item.keywords:
            item.add_marker(skip)

"""The libraries a workload runs on: NumPy, ``nbjax.jit`` on a chosen backend, and ``jax.jit``.

A contender turns a workload into a fresh callable (so a first call traces and compiles) and
the workload's NumPy inputs into its own arrays (converted once, outside the timings, as a
user keeps arrays on a device), so the runner times every library the same way.
"""

import contextlib
import functools
import os
import tempfile

import numpy as np

import nbjax
from nbjax import backends
from nbjax.tree_util import tree_map

from .timing import block

NBJAX_CACHE_DIR = "NBJAX_CACHE_DIR"   # where nbjax's CPU backend keeps compiled code


class NumPyContender:
    name = "NumPy"
    description = f"NumPy {np.__version__}"
    backend = None
    compiles = False

    def prepare(self, inputs):
        return inputs

    def function(self, workload):
        return workload.numpy


class TracingContender:
    """A JAX-style library: ``workload.build(module)`` is the function, ``jit`` compiles it.

    ``empty_caches()`` is a context manager under which compilation starts from nothing: a
    function jitted in it compiles from scratch on its first call. With ``disk_cache``, a
    second function jitted in the same block finds its code in the library's on-disk cache,
    as a re-run notebook would.
    """
    compiles = True

    def __init__(self, name, description, module, jit, to_array, empty_caches,
                 disk_cache=False, backend=None):
        self.name = name
        self.description = description
        self.module = module
        self.jit = jit
        self.to_array = to_array
        self.empty_caches = empty_caches
        self.disk_cache = disk_cache
        self.backend = backend

    def prepare(self, inputs):
        return tree_map(self.to_array, inputs)

    def warm_up(self):
        """One tiny jitted call, so that one-time start-up (importing a compiler, starting a
        backend) is not charged to the first workload's first call."""
        with self.empty_caches():
            block(self.jit(lambda x: x + 1)(self.to_array(np.ones(4, np.float32))))

    def function(self, workload):
        """A newly jitted, newly defined function (as a re-run notebook cell defines it): its
        first call traces (and compiles, unless a cache has its code) and runs. A jit of the
        same function object again would find its trace in memory, as in JAX."""
        return self.jit(fresh(workload.build(self.module)))


def fresh(fn):
    """A new function object that calls ``fn``."""
    return functools.wraps(fn)(lambda *args, **kwargs: fn(*args, **kwargs))


# --- nbjax ----------------------------------------------------------------------------------------

@contextlib.contextmanager
def nbjax_backend(name=None):
    """Run the block with ``nbjax.jit`` compiling for backend ``name`` (None: leave the
    ``jit_backend`` option as it is, which ``NBJAX_JIT_BACKEND`` sets), restoring the option
    afterwards. Yields the backend in use. An unknown name fails here, before any measurement."""
    previous = nbjax.config.jit_backend
    if name is not None:
        backends.get_target(name)
        nbjax.config.update("jit_backend", name)
    try:
        yield nbjax.config.jit_backend
    finally:
        nbjax.config.update("jit_backend", previous)


@contextlib.contextmanager
def empty_disk_cache():
    """nbjax's on-disk compile cache moved to a new, empty directory for the block (and
    removed afterwards): a first call compiles from scratch, a second one finds the cache
    warm, and the user's own cache is left alone. (nbjax's in-memory cache serves only the
    same function object jitted again, so a newly defined function is traced anew.)"""
    previous = os.environ.get(NBJAX_CACHE_DIR)
    with tempfile.TemporaryDirectory(prefix="nbjax-bench-") as directory:  # mode 0700
        os.environ[NBJAX_CACHE_DIR] = directory
        try:
            yield
        finally:
            if previous is None:
                del os.environ[NBJAX_CACHE_DIR]
            else:
                os.environ[NBJAX_CACHE_DIR] = previous


def nbjax_contender(backend):
    """nbjax through ``nbjax.jit``; call it inside ``nbjax_backend(...)``. On the gpu
    backend its inputs are put on the GPU first, as jax.jit's are."""
    to_array = on_the_gpu if backend == "gpu" else nbjax.numpy.asarray
    return TracingContender("nbjax", f"nbjax.jit on the {backend!r} backend", nbjax, nbjax.jit,
                            to_array, empty_disk_cache, disk_cache=True, backend=backend)


def on_the_gpu(x):
    """``x`` as an nbjax Array on the first GPU, where the gpu backend runs (copied before
    the timing, as the other contenders' inputs are)."""
    return block(nbjax.device_put(x, nbjax.devices("gpu")[0]))


# --- jax ------------------------------------------------------------------------------------------

def jax_contender(platform="cpu"):
    """``jax.jit`` on JAX's ``platform`` (``"cpu"``, or ``"cuda"`` against nbjax's gpu
    backend), or None when jax is not installed (it is optional: ``pip install .[bench]``)."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_platforms", platform)

    @contextlib.contextmanager
    def cleared_caches():
        jax.clear_caches()
        yield

    return TracingContender("jax.jit", f"jax {jax.__version__} on {platform.upper()}", jax,
                            jax.jit, jax.device_put, cleared_caches)

"""A second instance of NumPy's OpenBLAS that computes on the thread calling it, for the
matrix products native code shares out between the cores itself (``blas``).

OpenBLAS shares a product between threads of its own, which then spin for a tenth of a
second waiting for the next one: on the cores that the program's next kernels share out,
or that another process needs. A product split between them waits for the slowest, for a
scheduler's time slice when a core is taken (a CNN step 4 -> 8-40 ms beside one busy
process). Their number is the library's, for the whole process (NumPy's own products use
it), so native code calls another instance of the library, on one thread, and the worker
pool runs its calls: a large product in pieces, one call per piece.

The dynamic loader loads a file once, whatever it is called through, so the instance is
loaded from a copy of the file: kept in the disk cache's directory (a 25 MB file, written
once, ~13 ms), or else in a temporary one, removed once loaded. ``OPENBLAS_NUM_THREADS=1``
while it loads keeps it from starting threads at all.
"""

import contextlib
import ctypes
import logging
import os
import shutil
import tempfile
import threading

from . import cache

log = logging.getLogger(__name__)
_THREADS = "OPENBLAS_NUM_THREADS"
_environment_lock = threading.Lock()


def load(path, threads_function):
    """The library at ``path`` (an OpenBLAS) loaded again as an instance of its own that
    runs each call on the calling thread (``threads_function``: the name of its function
    answering its number of threads), or None where that cannot be done."""
    try:
        with _copy(path) as copy, _one_thread():
            lib = ctypes.CDLL(copy)
        threads = getattr(lib, threads_function)
        threads.restype = ctypes.c_int
        if threads() == 1:
            return lib
        log.debug("nbjax: the copy of %s runs %d threads", path, threads())
    except (OSError, AttributeError) as e:
        log.debug("nbjax: no copy of %s: %s", path, e)
    return None


@contextlib.contextmanager
def _copy(path):
    """The path of a copy of the file ``path``: in the disk cache, or a temporary file
    removed after the block."""
    stat = os.stat(path)
    directory = cache.directory()
    if directory is not None:
        kept = directory / f"{stat.st_size}-{stat.st_mtime_ns}-{os.path.basename(path)}"
        if not kept.exists() or kept.stat().st_size != stat.st_size:
            with open(path, "rb") as f:
                cache.write(kept, f.read())
        if kept.exists():
            yield str(kept)
            return
    with tempfile.TemporaryDirectory(prefix="nbjax-") as temporary:
        copy = os.path.join(temporary, os.path.basename(path))
        shutil.copyfile(path, copy)
        yield copy


@contextlib.contextmanager
def _one_thread():
    """``OPENBLAS_NUM_THREADS=1`` in this process's environment for the block (OpenBLAS
    reads it as it loads)."""
    with _environment_lock:
        before = os.environ.get(_THREADS)
        os.environ[_THREADS] = "1"
        try:
            yield
        finally:
            if before is None:
                del os.environ[_THREADS]
            else:
                os.environ[_THREADS] = before

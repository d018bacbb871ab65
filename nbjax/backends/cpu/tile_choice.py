"""Whether a product that fits the register tiles (``tiled_products.fits``) uses them or
BLAS: the faster on this machine, timed once per process and shape.

Which is faster depends on the machine. OpenBLAS packs its operands on every call: on an
AMD EPYC (Zen 5) the tiles took 69 us where it took 88 (32x256 by 256x1024); on an Intel
Xeon (Sapphire Rapids) they took 138 us where it took 94 (32x512 by 512x512), and an LSTM's
gradient ran 17% faster on BLAS. So the first time a process plans a product of a shape,
both compute it (``measured``: the tiles first, as BLAS's threads spin for a while after a
call), and the fusion report gives both times. ``CHOICE`` "always" takes the tiles
wherever they fit (the tests', for the same code on every machine).
"""

import ctypes
import math
import os
import time

import numpy as np
from llvmlite import binding as llvm

from . import library, runtime
from .target import for_the_host
from .tiled_products import (ARGS, PACKED_ROWS_MIN, arguments, by_rows, fits, loop_name,
                             pooled_on_cores, tile_count, tile_names, tile_width)

# "measured" (the faster of the tiles and BLAS) or "always" (the tiles wherever they fit)
CHOICE = os.environ.get("NBJAX_PRODUCT_TILES", "measured")
MEASURED_WORK = 1 << 23  # multiply-adds at most in a product timed (~0.1 ms)


# Outside loops, a product takes the tiles unless BLAS is this many times faster: a BLAS
# call leaves OpenBLAS's threads spinning for a tenth of a second on the cores that the
# program's next kernels and loops share out (rnn_scan, its input product hoisted before the
# loop: 19 -> 10.7 ms; the LSTM's forward: 21 -> 12 ms, its tiles 1.35x BLAS's time alone).
OUTSIDE_LOOPS_MARGIN = 2.0


def uses_tiles(m, k, n, a_last, b_first, dtype, margin=1.0, large=False):
    """Whether the product (``fits``' arguments, ``large`` included) is computed here
    rather than by BLAS: where it fits and, unless ``CHOICE`` is "always", the tiles ran
    faster (``measured``), or at most ``margin`` times slower."""
    if not fits(m, k, n, a_last, b_first, dtype, large):
        return False
    if CHOICE == "always":
        return True
    times = measured(m, k, n, b_first, dtype)
    return times is None or times[0] <= times[1] * margin


_MEASURED = {}  # (m, k, n, b_first, dtype name) -> (tiles' seconds, BLAS's), or None


def measured(m, k, n, b_first, dtype):
    """(seconds of the tiles, of BLAS) for this product (its left operand row-major) on
    this machine, the best of five runs, measured once per process; None where it is not
    measured (code for another CPU than this one, or a product too large to time: eight
    rows by one tile's columns over ``MEASURED_WORK``). A larger product is timed on its
    first rows (the tiles of a short contraction take any number), then its first columns,
    the rows of ``B`` and ``C`` as far apart as in the product (``B``'s, unless it would
    hold over ``MEASURED_WORK`` elements).

    The tiles are timed on one core, and a product the pool would share out is counted at
    that time over the cores its column tiles go to (they split without synchronising):
    BLAS's threads, still spinning after an earlier product's timing, would have taken a
    core from the pool's (a transformer's products timed on the pool one after another:
    tiles 0.7-2.1 times BLAS's; 0.3 s apart, 0.7-1.6)."""
    key = (m, k, n, b_first, np.dtype(dtype).name)
    if key not in _MEASURED:
        _MEASURED.setdefault(key, _measure(m, k, n, b_first, np.dtype(dtype)))
    return _MEASURED[key]


def _measure(m, k, n, b_first, dtype):
    rows_of_b = by_rows(m, n, b_first, dtype)
    width = tile_width(rows_of_b, dtype)
    fewest = PACKED_ROWS_MIN if rows_of_b and not b_first else 8  # (rows keeping its form)
    m = min(m, max(fewest, MEASURED_WORK // max(k * n, 1)))
    columns = min(n, max(width, MEASURED_WORK // max(m * k, 1) // width * width))
    if not for_the_host() or m * k * columns > MEASURED_WORK:
        return None
    wide = n if k * n <= MEASURED_WORK else columns  # (no 400 MB copy of a huge B)
    a, bm, c = (_filled((rows, cols), dtype) for rows, cols in
                [(m, k), (k, wide) if b_first else (columns, k), (m, n)])
    right = bm[:, :columns] if b_first else bm.T
    shared = min(runtime.THREADS, tile_count(columns, rows_of_b, dtype)) \
        if pooled_on_cores(m, k, columns) else 1
    return (_best_time(_tiles_runner(a, bm, c, columns, b_first)) / shared,
            _best_time(lambda: np.matmul(a, right, out=c[:, :columns])))


def _filled(shape, dtype):
    """An aligned array of ones, as the buffers of a program are aligned (``runtime``): a
    vector load across two cache lines is slower."""
    array = runtime.pool.empty(shape, dtype)
    array.fill(1)
    return array


def _tiles_runner(a, bm, c, n, b_first):
    """A function computing the first ``n`` columns of ``c = a @ bm`` (or ``a @ bm.T``) by
    the tiles on the calling thread, as a product in native code calls them."""
    (m, k), dtype = a.shape, a.dtype
    rows_of_b = by_rows(m, n, b_first, dtype)
    names = tile_names(m, n, rows_of_b, dtype)
    loop = loop_name(m, n, b_first, dtype)
    library.provide([loop, *filter(None, names.values())])
    values = arguments(m, k, n, (k, 1), bm.shape[1], 1 if b_first else bm.shape[1],
                       c.shape[1], b_first, dtype, False)
    values.update({part: name and llvm.address_of_symbol(name)
                   for part, name in names.items()})
    pointers = [runtime.address(x) for x in (a, bm, c)] + [values[s] or 0 for s in ARGS[3:]]
    tiles, address = tile_count(n, rows_of_b, dtype), llvm.address_of_symbol(loop)
    args = (ctypes.c_void_p * len(pointers))(*pointers)
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(address)
    return lambda: call(args, 0, tiles)


def _best_time(run, repeats=5):
    """The shortest of ``repeats`` timings of ``run()`` (after one untimed call), each of
    enough calls to last 50 us."""
    start = time.perf_counter()
    run()
    calls = max(1, int(50e-6 / max(time.perf_counter() - start, 1e-9)))
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, (time.perf_counter() - start) / calls)
    return best

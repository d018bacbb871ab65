"""Whether a product that fits the register tiles (``tiled_products.fits``) uses them or
BLAS: the faster on this machine, timed once per process and shape.

Which is faster depends on the machine. OpenBLAS packs its operands on every call: on an
AMD EPYC (Zen 5) the tiles took 69 us where it took 88 (32x256 by 256x1024); on an Intel
Xeon (Sapphire Rapids) they took 138 us where it took 94 (32x512 by 512x512), and a
transformer block's 1024x256 by 256x1024 ran twice as fast on BLAS. So the first time a
process plans a product of a shape, both compute it (``measured``) as a program would: on
one thread each, BLAS's calls in the copy of OpenBLAS on one thread that the worker pool
shares a product out to (``blas``), and the fusion report gives both times. ``CHOICE``
"always" takes the tiles wherever they fit (the tests', for the same code on every
machine), "never" BLAS.
"""

import ctypes
import math
import os
import time

import numpy as np
from llvmlite import binding as llvm

from . import library, routines, runtime
from .target import for_the_host
from .tiled_products import (ARGS, DEPTH_BLOCK, PACKED_ROWS_MIN, arguments, by_rows, fits,
                             loop_name, pooled_on_cores, tile_count, tile_names, tile_width)

# "measured" (the faster of the tiles and BLAS), "always" (the tiles wherever they fit) or
# "never" (BLAS)
CHOICE = os.environ.get("NBJAX_PRODUCT_TILES", "measured")
MEASURED_WORK = 1 << 23  # multiply-adds at most in a product timed (~0.1 ms)


def uses_tiles(m, k, n, a_last, b_first, dtype, large=False):
    """Whether the product (``fits``' arguments, ``large`` included) is computed here
    rather than by BLAS: where it fits and, with ``CHOICE`` "measured", the tiles ran
    faster (``measured``)."""
    if not fits(m, k, n, a_last, b_first, dtype, large) or CHOICE == "never":
        return False
    if CHOICE == "always":
        return True
    times = measured(m, k, n, b_first, dtype)
    return times is None or times[0] <= times[1]


_MEASURED = {}  # (m, k, n, b_first, dtype name) -> (tiles' seconds, BLAS's), or None


def measured(m, k, n, b_first, dtype):
    """(seconds of the tiles, of BLAS) for this product (its left operand row-major) on
    this machine, the best of five runs, measured once per process; None where it is not
    measured (code for another CPU than this one, or a product too large to time: the
    fewest rows of its form by one tile's columns by ``DEPTH_BLOCK`` contracted over
    ``MEASURED_WORK``). A larger product is timed on a block of its first rows and
    columns, about as many of each (BLAS packs both operands: on 20 rows of a 128x784 by
    784x512 product its packing of ``B`` took half the time; the tiles of a short
    contraction take any number of rows), and where one tile's columns are still too
    many, on ``DEPTH_BLOCK`` contracted (a 128x10000 by 10000x10000 product: 128 by 512
    by 128); the rows of ``B`` and ``C`` as far apart as in the product (``B``'s, unless it
    would hold over ``MEASURED_WORK`` elements).

    Both are timed on one core (timed on the pool, each would find the other's threads
    still spinning), and where the pool would share the whole product out, counted at that
    time over the cores its parts go to: the tiles' columns or BLAS's pieces
    (``runtime.product_pieces``), which need no synchronisation."""
    key = (m, k, n, b_first, np.dtype(dtype).name)
    if key not in _MEASURED:
        _MEASURED.setdefault(key, _measure(m, k, n, b_first, np.dtype(dtype)))
    return _MEASURED[key]


def _measure(m, k, n, b_first, dtype):
    full = (m, k, n)
    rows_of_b = by_rows(m, n, b_first, dtype)
    width = tile_width(rows_of_b, dtype)
    fewest = PACKED_ROWS_MIN if rows_of_b and not b_first else 8  # (rows keeping its form)
    m = min(m, max(fewest, math.isqrt(MEASURED_WORK // max(k, 1))))
    if m * k * width > MEASURED_WORK:  # (the tiles repeat themselves every DEPTH_BLOCK)
        k = DEPTH_BLOCK
    columns = min(n, max(width, MEASURED_WORK // max(m * k, 1) // width * width))
    if not for_the_host() or m * k * columns > MEASURED_WORK:
        return None
    wide = n if k * n <= MEASURED_WORK else columns  # (no 400 MB copy of a huge B)
    a, bm, c = (_filled((rows, cols), dtype) for rows, cols in
                [(m, k), (k, wide) if b_first else (columns, k), (m, n)])
    shared = min(runtime.THREADS, tile_count(full[2], rows_of_b, dtype)) \
        if pooled_on_cores(*full) else 1
    blas_shared = min(runtime.THREADS, runtime.product_pieces(1, *full)[0])
    return (_best_time(_tiles_runner(a, bm, c, columns, b_first)) / shared,
            _best_time(_blas_runner(a, bm, c, columns, b_first)) / blas_shared)


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


def _blas_runner(a, bm, c, n, b_first):
    """A function computing the first ``n`` columns of ``c = a @ bm`` (or ``a @ bm.T``) by
    one BLAS call on the calling thread, as a piece of a product in native code is
    (``routines.ON_CALLER``). Column-major, ``C^T = op(B) A^T`` (see ``blas``)."""
    (m, k), dtype = a.shape, a.dtype
    return routines.host_call("gemm", dtype, ["N" if b_first else "T", "N", n, m, k, 1.0, bm,
                                              bm.shape[1], a, k, 0.0, c, c.shape[1]],
                              on_caller=True)


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

"""This machine's limits, measured once per session, so the timing pane can say how close a
kernel comes to them: memory bandwidth (a large NumPy copy, bytes read + written per
second) and arithmetic throughput (NumPy's float32 matrix product, GFLOP/s). Both are
what NumPy reaches here, a practical ceiling rather than the data sheet's peak."""

import functools
import time

import numpy as np

COPY_BYTES = 32 * 2**20
MATMUL_N = 384
REPEATS = 3


def _best_time(fn):
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@functools.lru_cache(maxsize=None)
def limits():
    """{"gbps", "gflops", "how"}: measured on first use (about 0.1 s)."""
    src = np.ones(COPY_BYTES // 4, np.float32)
    dst = np.empty_like(src)
    copy_s = _best_time(lambda: np.copyto(dst, src))
    a = np.ones((MATMUL_N, MATMUL_N), np.float32)
    matmul_s = _best_time(lambda: a @ a)
    return {"gbps": 2 * src.nbytes / copy_s / 1e9,
            "gflops": 2 * MATMUL_N ** 3 / matmul_s / 1e9,
            "how": f"NumPy copy of {COPY_BYTES // 2**20} MiB (read + write) and "
                   f"float32 {MATMUL_N}x{MATMUL_N} matmul, best of {REPEATS}"}

"""How the benchmarks measure: call times, first-call times and the memory bandwidth.

Every timed call blocks on its result (``block_until_ready`` where a library dispatches
asynchronously), so a time covers the computation and not just its launch. Steady-state times
are the median of several repetitions after a warm-up call, the libraries taking turns: a
median resists the noise of a shared machine better than a mean, and taking turns keeps the
ratios fair when the load changes. A call shorter than ``BATCH_SECONDS`` is repeated in a batch
and the batch's time divided, so the clock's resolution does not dominate tiny calls.

A library's turn must not pay for the one before it. NumPy's OpenBLAS leaves its threads
spinning for about a tenth of a second after a product, on the cores the next library's
threads need: measured on a 2-core VM, nbjax's first calls right after NumPy's turn took
20-35% longer than after a pause (the LSTM's 54 ms against 40), and its steady run of
``rnn_scan`` twice as long. So every turn (a timed batch, a cold first call) starts after
``SETTLE_SECONDS`` of quiet (``settle``). A pause has its own cost: on a VM, a core that
idled comes back slowly (the second call of ``rnn_scan`` after a pause still ran at one
core's speed, 10 ms against 5.6), so a timed batch follows ``WARM_SECONDS`` of untimed
calls of its own, as in a steady loop.
"""

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from nbjax.tree_util import tree_leaves

BATCH_SECONDS = 2e-3
MAX_BATCH = 10_000
MIN_REPS = 3
SETTLE_SECONDS = 0.15   # OpenBLAS's threads spin 2^28 cycles after a product (0.1 s at 2.7 GHz)
WARM_SECONDS = 0.03     # untimed calls before a timed batch (one at least)


def block(result):
    """Wait until every array in ``result`` (any library's pytree of outputs) is computed."""
    for leaf in tree_leaves(result):
        wait = getattr(leaf, "block_until_ready", None)
        if wait is not None:
            wait()
    return result


def settle():
    """Wait until other libraries' helper threads have stopped spinning (see the module
    docstring)."""
    time.sleep(SETTLE_SECONDS)


def warm_up(fn, args):
    """Untimed calls ``fn(*args)`` for ``WARM_SECONDS`` (one at least)."""
    start = time.perf_counter()
    block(fn(*args))
    while time.perf_counter() - start < WARM_SECONDS:
        block(fn(*args))


def call_time(fn, args):
    """Seconds for one blocking call ``fn(*args)``."""
    start = time.perf_counter()
    block(fn(*args))
    return time.perf_counter() - start


def batch_size(fn, args):
    """How many calls to time together: one warm-up call sizes the batch so that a batch lasts
    at least ``BATCH_SECONDS``."""
    warm = call_time(fn, args)
    if warm >= BATCH_SECONDS:
        return 1
    return min(MAX_BATCH, int(BATCH_SECONDS / max(warm, 1e-9)) + 1)


def batch_time(fn, args, batch):
    """Seconds per call of ``batch`` blocking calls ``fn(*args)``."""
    start = time.perf_counter()
    for _ in range(batch):
        block(fn(*args))
    return (time.perf_counter() - start) / batch


def interleaved_times(calls, reps, budget_s):
    """The median seconds per call of each ``(fn, args)`` in ``calls``, after a warm-up call.

    The repetitions are interleaved: each round times every call once, so a change in the
    machine's load (other processes come and go) affects all of them alike and their ratios
    stay meaningful. Each turn settles, then makes ``WARM_SECONDS`` of untimed calls, then
    times its batch (see the module docstring). Runs ``reps`` rounds, or fewer (at least
    ``MIN_REPS``) once ``budget_s`` seconds are spent, so slow workloads do not stretch a
    run to hours. Returns, per call, the median, every repetition's time and the batch
    size used.
    """
    batches = [batch_size(fn, args) for fn, args in calls]
    times = [[] for _ in calls]
    start = time.perf_counter()
    for done in range(1, reps + 1):
        for (fn, args), batch, series in zip(calls, batches, times):
            settle()
            warm_up(fn, args)
            series.append(batch_time(fn, args, batch))
        if done >= min(MIN_REPS, reps) and time.perf_counter() - start > budget_s:
            break
    return [{"median_s": statistics.median(series), "times_s": series, "batch": batch}
            for series, batch in zip(times, batches)]


def copy_bandwidth(nbytes, threads, reps=7):
    """GB/s of copying ``nbytes`` between two existing buffers, counting bytes read plus bytes
    written, with the copy split over ``threads`` threads (NumPy releases the GIL while it
    copies). The destination is written once before timing, so page faults are not counted:
    a kernel that streams into reused buffers is held to this figure."""
    n = int(nbytes) // 4
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    bounds = np.linspace(0, n, threads + 1).astype(int)
    pieces = [(dst[a:b], src[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    with ThreadPoolExecutor(threads) as pool:
        def copy():
            list(pool.map(lambda piece: np.copyto(*piece), pieces))
        copy()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            copy()
            times.append(time.perf_counter() - t0)
    return 2 * src.nbytes / statistics.median(times) / 1e9


def core_count():
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def format_seconds(seconds):
    """A time with a readable unit: ``85.2 ms``, ``4.05 us``, ``1.95 s``, ``-310 us`` (a
    difference of times)."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"

"""``python -m benchmarks.run`` (``make bench``): every workload on NumPy, nbjax and ``jax.jit``.

For each workload it prints nbjax's median time, its ratio to NumPy's and to jax.jit's
(measured in this process), the first call's time (trace + compile + run) and, for the
element-wise workloads, the fraction of the machine's memory bandwidth nbjax reaches; then it
writes the same as JSON. ``--small`` shrinks every workload about 100x, ``--only NAME`` keeps
the workloads whose name contains NAME, ``--backend`` picks the nbjax backend. Run from the
repository root. See README.md, "Performance".
"""

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np

from nbjax.tree_util import tree_leaves

from . import distributed, workloads
from .contenders import NumPyContender, jax_contender, nbjax_backend, nbjax_contender
from .timing import (SETTLE_SECONDS, WARM_SECONDS, call_time, copy_bandwidth, core_count,
                     format_seconds, interleaved_times, settle)

BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
FIRST_CALL_REPS = 3
BANDWIDTH_BYTES = {False: 400e6, True: 40e6}   # by --small
MAX_REL_ERROR = 1e-3


def exec_without_blas_overrides():
    """Restart this process without OpenBLAS's kernel overrides, if any is set: OpenBLAS reads
    them when NumPy loads, and forcing another kernel slows NumPy's BLAS (shared/PERF_NOTES.md).
    Only the benchmark process sees the cleaned environment."""
    if any(name in os.environ for name in BLAS_OVERRIDES):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_OVERRIDES}
        os.execve(sys.executable, [sys.executable, "-m", "benchmarks.run", *sys.argv[1:]], env)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="shrink every workload ~100x")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run the workloads whose name contains NAME (repeatable)")
    parser.add_argument("--backend", default=None,
                        help="the backend nbjax.jit compiles for (default: the jit_backend "
                        "option, which NBJAX_JIT_BACKEND sets)")
    parser.add_argument("--reps", type=int, default=7, help="repetitions per measurement")
    parser.add_argument("--budget", type=float, default=15.0, metavar="SECONDS",
                        help="stop repeating a workload's measurements after this long "
                        "(3 repetitions at least)")
    parser.add_argument("--no-jax", action="store_true", help="skip jax even if installed")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table as Markdown (for README.md)")
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results.json"),
                        metavar="PATH", help="where to write the results (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    multi = [n for n in distributed.NAMES if not args.only or any(o in n for o in args.only)]
    only = [o for o in args.only or () if not any(o in n for n in distributed.NAMES)]
    chosen = workloads.select(only) if only or not args.only else []
    with nbjax_backend(args.backend) as backend:
        report = benchmark(chosen, backend, args)
    if multi:  # under mpirun, in processes of their own (benchmarks/distributed.py)
        report["distributed"] = distributed.measure(args.small, multi)
    print(render(report, args.markdown))
    if multi:
        print("\n" + distributed.render(report["distributed"]))
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {args.json}")
    return report


def benchmark(chosen, backend, args):
    """Measure the ``chosen`` workloads on every contender: the report as a dict."""
    contenders = [NumPyContender(), nbjax_contender(backend)]
    jax = None if args.no_jax else jax_contender("cuda" if backend == "gpu" else "cpu")
    if jax is not None:
        contenders.append(jax)
    for contender in contenders:
        if contender.compiles:
            contender.warm_up()
    report = {
        "date": datetime.datetime.now().isoformat(timespec="minutes"),
        "machine": machine(),
        "libraries": {c.name: c.description for c in contenders},
        "nbjax_backend": backend,
        "settings": {"small": args.small, "reps": args.reps, "budget_s": args.budget},
        "bandwidth": bandwidth(args.small),
        "workloads": [],
    }
    for workload in chosen:
        progress(f"{workload.name}: ")
        report["workloads"].append(measure_workload(workload, contenders, args,
                                                    report["bandwidth"]["gbps"]))
        progress("done\n")
    report["machine"]["load_average_end"] = _load_average()
    return report


def progress(text):
    sys.stderr.write(text)
    sys.stderr.flush()


# --- the machine ----------------------------------------------------------------------------------

def machine():
    return {
        "cpu": _cpu_name(),
        "llvm_cpu": _llvm_cpu(),
        "cores": core_count(),
        "load_average": _load_average(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": blas(),
    }


def _load_average():
    """The 1-minute load average: above 1 per core, other processes shared the machine."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _llvm_cpu():
    import llvmlite.binding as llvm  # a dependency of nbjax's CPU backend
    return llvm.get_host_cpu_name()


def blas():
    """NumPy's BLAS, with the kernel in use when threadpoolctl is installed (optional)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        try:
            info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            return f"{info['name']} {info['version']} (install threadpoolctl to see its kernel)"
        except (TypeError, KeyError):
            return "unknown"
    return "; ".join(f"{i['internal_api']} {i['version']}, {i.get('architecture')} kernel, "
                     f"{i['num_threads']} threads"
                     for i in threadpool_info() if i.get("user_api") == "blas") or "unknown"


def bandwidth(small):
    """The machine's copy bandwidth on all its cores, and on one for comparison."""
    progress("memory bandwidth: ")
    nbytes = BANDWIDTH_BYTES[small]
    cores = core_count()
    result = {"bytes": nbytes, "threads": cores, "gbps": copy_bandwidth(nbytes, cores),
              "gbps_one_thread": copy_bandwidth(nbytes, 1)}
    progress(f"{result['gbps']:.1f} GB/s\n")
    return result


# --- measuring --------------------------------------------------------------------------------

def measure_workload(workload, contenders, args, gbps):
    """Time ``workload`` on each contender: first calls and a correctness check one contender
    after the other (NumPy first: its result is the one the others are checked against), then
    the steady-state repetitions, interleaved."""
    size, inputs = workload.setup(args.small)
    row = {"name": workload.name, "what": workload.what, "size": size, "seed": workload.seed,
           "results": {}}
    expected, calls = None, {}
    for contender in contenders:
        progress(f"{contender.name} ")
        result, call, output = start(contender, workload, inputs, args, expected)
        if expected is None:
            expected = output
        row["results"][contender.name] = result
        if call is not None:
            calls[contender.name] = call
    progress("(timing) ")
    try:
        timings = interleaved_times(list(calls.values()), args.reps, args.budget)
    except Exception as e:  # noqa: BLE001 - reported in the table and the JSON
        timings = [{"error": f"while timing: {type(e).__name__}: {e}"} for _ in calls]
    for name, timing in zip(calls, timings):
        row["results"][name].update(timing)
    if workload.streams:
        row["bytes"] = _nbytes(inputs) + _nbytes(expected)
        for result in row["results"].values():
            if "median_s" in result:
                result["gbps"] = row["bytes"] / result["median_s"] / 1e9
                result["bandwidth_fraction"] = result["gbps"] / gbps
    row["ratios"] = ratios(row["results"])
    gc.collect()
    return row


def start(contender, workload, inputs, args, expected):
    """One contender's set-up on one workload: its inputs, the first-call times of freshly
    jitted functions, and its result's error against ``expected``. Returns the result so far,
    the ``(function, inputs)`` to time (None after a failure) and the output. A failure is
    recorded, not raised, so one unsupported workload does not stop the run."""
    result = {}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            values = contender.prepare(inputs)
            if contender.compiles:
                fn, first_calls = first_call(contender, workload, values, args)
                result.update(first_calls)
            else:
                fn = contender.function(workload)
            output = fn(*values)
            if expected is not None:
                result["max_rel_error"] = relative_error(output, expected)
        messages = sorted({str(w.message) for w in caught})
        if messages:
            result["warnings"] = messages
    except Exception as e:  # noqa: BLE001 - reported in the table and the JSON
        result["error"] = f"{type(e).__name__}: {e}"
        return result, None, None
    return result, (fn, values), output


def first_call(contender, workload, values, args):
    """First calls of freshly jitted functions, each compiling from empty caches and, for a
    library with a disk cache, followed by one whose code is on disk: up to
    ``FIRST_CALL_REPS`` of each, fewer once the time budget is spent, each pair after a
    ``settle``. The warm first call's cost beyond the run is its time less that of the call
    right after it (the same program on the same data, a moment later: the steady run time
    measured later drifts with the machine by more than the few ms in question). Returns the
    last function (compiled), and the median times in a dict."""
    cold, warm, beyond = [], [], []
    start = time.perf_counter()
    while len(cold) < min(args.reps, FIRST_CALL_REPS) and (
            not cold or time.perf_counter() - start < args.budget):
        with contender.empty_caches():
            fn = contender.function(workload)
            settle()
            cold.append(call_time(fn, values))
            if contender.disk_cache:  # (right after: the library's threads are awake)
                fn = contender.function(workload)
                warm.append(call_time(fn, values))
                beyond.append(warm[-1] - call_time(fn, values))
    times = {"first_call_s": statistics.median(cold)}
    if warm:
        times["first_call_warm_disk_cache_s"] = statistics.median(warm)
        times["first_call_warm_beyond_run_s"] = statistics.median(beyond)
    return fn, times


def relative_error(output, expected):
    """The largest absolute difference over the largest magnitude, over all outputs."""
    worst = 0.0
    for got, want in zip(tree_leaves(output), tree_leaves(expected)):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got.shape != want.shape:
            return float("inf")
        scale = max(float(np.max(np.abs(want), initial=0.0)), np.finfo(np.float32).tiny)
        worst = max(worst, float(np.max(np.abs(got - want), initial=0.0)) / scale)
    return worst


def ratios(results):
    """nbjax's times over the others' (below 1: nbjax is faster)."""
    nbjax = results.get("nbjax", {})
    out = {}
    for name, key in (("NumPy", "median_s"), ("jax.jit", "median_s"),
                      ("jax.jit first call", "first_call_s")):
        other = results.get(name.split()[0], {})
        if key in nbjax and key in other:
            out[f"nbjax/{name}"] = nbjax[key] / other[key]
    return out


def _nbytes(tree):
    return sum(np.asarray(leaf).nbytes for leaf in tree_leaves(tree))


# --- the table ----------------------------------------------------------------------------------

COLUMNS = ["workload", "size", "nbjax", "NumPy", "jax.jit", "nbjax/NumPy", "nbjax/jax",
           "nbjax GB/s (of copy)", "nbjax 1st call", "jax 1st call", "1st nbjax/jax",
           "nbjax 1st, disk cache warm", "beyond the run"]


def render(report, markdown=False):
    """The report as text: a few lines about the machine and the method, the table, and the
    notes; with ``markdown``, as Markdown (bullets and a pipe table) for the README."""
    about, notes = _about(report), _notes(report["workloads"])
    rows = [_row(w) for w in report["workloads"]]
    if markdown:
        return "\n".join([*(f"- {line}" for line in about), "", *_markdown_table(COLUMNS, rows),
                          *(["", "Notes:", ""] + [f"- {n}" for n in notes] if notes else [])])
    return "\n".join([*about, "", *_table(COLUMNS, rows),
                      *(["", "notes:", *notes] if notes else [])])


def _about(report):
    m, bw = report["machine"], report["bandwidth"]
    return [
        f"nbjax benchmarks, {report['date']}, {m['cpu']} ({m['llvm_cpu']}), {m['cores']} cores, "
        f"load average {m['load_average']:.1f} at start, {m['load_average_end']:.1f} at the end",
        f"Python {m['python']}; BLAS: {m['blas']}",
        *[f"{name}: {text}" for name, text in report["libraries"].items()],
        f"memory bandwidth (copy of {bw['bytes'] / 1e6:.0f} MB, bytes read + written): "
        f"{bw['gbps']:.1f} GB/s on {bw['threads']} threads, {bw['gbps_one_thread']:.1f} GB/s "
        "on 1",
        f"medians of up to {report['settings']['reps']} repetitions after a warm-up, the "
        f"libraries taking turns, each turn after {SETTLE_SECONDS} s of quiet (another "
        f"library's spinning threads are not counted) and {WARM_SECONDS} s of untimed calls; "
        "first call = trace + compile + run of a freshly jitted function (one-time start-up "
        "excluded; disk cache empty, or warm in the last two columns, the last one less the "
        "call right after it); ratios are time ratios (below 1: nbjax is faster); * = seed "
        "workload",
    ]


def _row(w):
    r, q = w["results"], w["ratios"]
    nbjax = r.get("nbjax", {})

    def time(name, key="median_s"):
        result = r.get(name, {})
        return "error" if "error" in result else format_seconds(result.get(key))

    fraction = (f"{nbjax['gbps']:.1f} ({nbjax['bandwidth_fraction']:.0%})"
                if "gbps" in nbjax else "-")
    return [w["name"] + ("*" if w["seed"] else ""), w["size"], time("nbjax"), time("NumPy"),
            time("jax.jit"), _ratio(q.get("nbjax/NumPy")), _ratio(q.get("nbjax/jax.jit")),
            fraction, time("nbjax", "first_call_s"), time("jax.jit", "first_call_s"),
            _ratio(q.get("nbjax/jax.jit first call")),
            time("nbjax", "first_call_warm_disk_cache_s"),
            time("nbjax", "first_call_warm_beyond_run_s")]


def _ratio(value):
    return "-" if value is None else f"{value:.3g}x"


def _table(header, rows):
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]

    def line(cells):
        return "  ".join(c.ljust(n) if i < 2 else c.rjust(n)
                         for i, (c, n) in enumerate(zip(cells, widths)))
    return [line(header), line(["-" * n for n in widths]), *[line(r) for r in rows]]


def _markdown_table(header, rows):
    def line(cells):
        return "| " + " | ".join(c.replace("*", "\\*") for c in cells) + " |"
    return [line(header), "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|",
            *[line(r) for r in rows]]


def _notes(rows):
    """Errors, warnings, and results that disagree with NumPy's, below the table."""
    notes = []
    for w in rows:
        for name, result in w["results"].items():
            if "error" in result:
                notes.append(f"{w['name']}: {name} failed: {result['error']}")
            if result.get("max_rel_error", 0.0) > MAX_REL_ERROR:
                notes.append(f"{w['name']}: {name}'s result differs from NumPy's (max relative "
                             f"error {result['max_rel_error']:.2g})")
            for message in result.get("warnings", []):
                notes.append(f"{w['name']}: {name} warned: {message}")
    return notes


if __name__ == "__main__":
    exec_without_blas_overrides()
    main()

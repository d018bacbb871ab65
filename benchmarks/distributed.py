"""Multi-process benchmarks (``make bench``, or ``python -m benchmarks.distributed``): run
under ``mpirun`` on localhost, one CPU device per process.

- ``allreduce_{8B,1KB,4KB,16KB,64KB,1MB,16MB,256MB}``: a float32 sum over 2 processes, by mpi4py's
  own ``Allreduce``, by nbjax's collective (``Communicator.allreduce``: with the check that
  the processes run the same collective, see nbjax/distributed/mpi.py) and by a whole
  ``pmap`` of ``psum`` (slicing the shard, the thread, stacking the result); bandwidth as the
  buffer's bytes per second, and the collective's ratio to mpi4py's. A small all-reduce
  takes microseconds: it is timed over a loop of calls, the three ways interleaved, and the
  fastest repetition kept (the one least disturbed by other work on the machine; the two
  processes share its cores). ``--small`` divides the sizes from 1 MB up by 100.
- ``data_parallel_mlp``: one SGD step of an MLP on a fixed global batch, over 2 processes
  (each half the batch, gradients averaged with pmean) against 1.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

NAMES = ("allreduce", "data_parallel_mlp")
SIZES = (8, 2 ** 10, 2 ** 12, 2 ** 14, 2 ** 16, 2 ** 20, 2 ** 24, 2 ** 28)


def _label(nbytes):
    unit = max(u for u in range(0, 30, 10) if nbytes >= 2 ** u)
    return f"{nbytes >> unit}{ {0: 'B', 10: 'KB', 20: 'MB'}[unit]}"


def _median_time(fn, reps, barrier):
    return statistics.median(_times({"": fn}, reps, barrier, 1)[""])


def _times(fns, reps, barrier, calls):
    """Per-call times of each of ``fns`` (by name), interleaved: ``reps`` rounds in which each
    runs ``calls`` times after a barrier, so that a busy moment of the machine falls on all
    of them."""
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            barrier()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / calls)
    return times


def _allreduce_rows(small, comm, nbjax):
    from mpi4py import MPI
    from nbjax import lax
    ours = nbjax.distributed.communicator()
    psum = nbjax.pmap(lambda v: lax.psum(v, "i"), "i")
    rows = []
    for size in SIZES:
        nbytes = size // 100 if small and size >= 2 ** 20 else size
        x = np.random.default_rng(comm.rank).standard_normal(nbytes // 4).astype(np.float32)
        out = np.empty_like(x)
        reps, calls = ((3, 1) if size >= 2 ** 28 else (7, 1) if size >= 2 ** 20 else
                       (15, 2 ** 20 // max(size, 2 ** 12)))
        times = {name: min(t) for name, t in _times({
            "mpi4py": lambda: comm.Allreduce(x, out, op=MPI.SUM),
            "nbjax_collective": lambda: ours.allreduce(x, "psum", "bench"),
            "nbjax_pmap": lambda: psum(x[None]).block_until_ready()},
            reps, comm.Barrier, calls).items()}
        rows.append({"name": f"allreduce_{_label(size)}", "bytes": nbytes,
                     **{f"{k}_s": t for k, t in times.items()},
                     **{f"{k}_gbps": nbytes / t / 1e9 for k, t in times.items()},
                     "ratio": times["mpi4py"] / times["nbjax_collective"]})
    return rows


def _mlp_step_time(small, comm, nbjax):
    import nbjax.numpy as jnp
    from nbjax import lax
    batch, sizes = (64, (32, 64, 10)) if small else (2048, (256, 512, 10))
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((m, n)).astype(np.float32) / np.sqrt(m),
               np.zeros(n, np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.standard_normal((batch, sizes[-1])).astype(np.float32)

    def loss(params, x, y):
        (w1, b1), (w2, b2) = params
        return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)

    def step(params, x, y):
        grads = lax.pmean(nbjax.grad(loss)(params, x, y), "i")
        return nbjax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
    share = batch // comm.size
    mine = slice(comm.rank * share, (comm.rank + 1) * share)
    shard = (x[mine][None], y[mine][None])
    pstep = nbjax.pmap(step, "i", in_axes=(None, 0, 0))
    nbjax.block_until_ready(pstep(params, *shard))  # compile
    return _median_time(lambda: nbjax.block_until_ready(pstep(params, *shard)), 10,
                        comm.Barrier)


def worker(small, what, outfile):
    """Under mpirun: measure ``what`` and write process 0's results to ``outfile``."""
    import nbjax
    nbjax.distributed.initialize()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    result = (_allreduce_rows(small, comm, nbjax) if what == "allreduce"
              else _mlp_step_time(small, comm, nbjax))
    if comm.rank == 0:
        with open(outfile, "w") as f:
            json.dump(result, f)


def _launch(processes, small, what):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               NBJAX_NUM_CPU_DEVICES="1",
               PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(),
                                                        os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        subprocess.run(["mpirun", "-n", str(processes), "--oversubscribe", "-x", "PYTHONPATH",
                        "-x", "NBJAX_NUM_CPU_DEVICES", sys.executable, "-m",
                        "benchmarks.distributed", "--worker", what, out]
                       + (["--small"] if small else []), env=env, check=True, timeout=600)
        with open(out) as f:
            return json.load(f)


def measure(small, names=NAMES):
    """The multi-process rows (skipped, with the reason, without mpirun or mpi4py)."""
    if shutil.which("mpirun") is None:
        return {"skipped": "mpirun not installed"}
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return {"skipped": "mpi4py not installed"}
    report = {}
    if "allreduce" in names:
        report["allreduce"] = _launch(2, small, "allreduce")
    if "data_parallel_mlp" in names:
        one, two = _launch(1, small, "mlp"), _launch(2, small, "mlp")
        report["data_parallel_mlp"] = {"one_process_s": one, "two_processes_s": two,
                                       "speedup": one / two}
    return report


def render(report):
    if "skipped" in report:
        return f"multi-process benchmarks skipped: {report['skipped']}"
    lines = []
    if "allreduce" in report:
        lines.append(f"{'all-reduce, 2 processes':22} {'mpi4py us':>10} {'GB/s':>6} "
                     f"{'nbjax coll. us':>14} {'GB/s':>6} {'ratio':>6} {'nbjax pmap us':>14}")
        for r in report["allreduce"]:
            lines.append(f"{r['name']:22} {r['mpi4py_s'] * 1e6:10.2f} {r['mpi4py_gbps']:6.2f} "
                         f"{r['nbjax_collective_s'] * 1e6:14.2f} "
                         f"{r['nbjax_collective_gbps']:6.2f} {r['ratio']:6.2f} "
                         f"{r['nbjax_pmap_s'] * 1e6:14.1f}")
    if "data_parallel_mlp" in report:
        d = report["data_parallel_mlp"]
        lines.append(f"data-parallel MLP step: 1 process {d['one_process_s'] * 1e3:.2f} ms, "
                     f"2 processes {d['two_processes_s'] * 1e3:.2f} ms "
                     f"({d['speedup']:.2f}x)")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    small = "--small" in argv
    if "--worker" in argv:
        what, out = argv[argv.index("--worker") + 1:argv.index("--worker") + 3]
        return worker(small, what, out)
    print(render(measure(small)))


if __name__ == "__main__":
    main()

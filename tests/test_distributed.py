"""pmap across processes over MPI: tests/distributed_worker.py run under ``mpirun -n 2`` and
``-n 4`` on localhost (oversubscribed), every process with two CPU devices; its results
checked against NumPy and against the same program run in one process. Each launch costs
about a second of MPI start-up and nbjax import, so one launch runs many checks.

The fault cases: a process that raises inside its shards, one that exits, one killed, one
stuck elsewhere, and processes running different collectives: the others must fail with an
error that names what happened (or, for a killed process, mpirun must end the job, naming
it), well within the collective timeout, never hang.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import assert_close

HERE = Path(__file__).resolve().parent
WORKER = HERE / "distributed_worker.py"
LOCAL_DEVICES = 2
TIMEOUT = 3  # seconds a collective waits for the others in the fault cases

pytestmark = [
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (Open MPI) not installed"),
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                       reason="mpi4py not installed"),
    pytest.mark.xdist_group("mpi"),  # launches of several processes: one at a time
]


def launch_worker(processes, case, outdir, timeout=TIMEOUT):
    """Run the worker's ``case`` on ``processes`` processes (a collective waiting at most
    ``timeout`` seconds); mpirun's completed process."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=str(HERE.parent), NBJAX_NUM_CPU_DEVICES=str(LOCAL_DEVICES),
               NBJAX_COLLECTIVE_TIMEOUT=str(timeout))
    passed = [a for name in ("PYTHONPATH", "NBJAX_NUM_CPU_DEVICES", "NBJAX_COLLECTIVE_TIMEOUT")
              for a in ("-x", name)]
    return subprocess.run(["mpirun", "-n", str(processes), "--oversubscribe", *passed,
                           sys.executable, str(WORKER), case, str(outdir)],
                          env=env, capture_output=True, text=True, timeout=120)


def mpirun(processes, case, outdir):
    """Run the worker's ``case`` on ``processes`` processes; their results by rank."""
    run = launch_worker(processes, case, outdir)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return outdir


def load_worker():
    spec = importlib.util.spec_from_file_location("distributed_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def worker():
    return load_worker()


# --- every collective, grads, training ---------------------------------------------------

@pytest.fixture(scope="module", params=[2, 4])
def launch(request, tmp_path_factory):
    """The main case on 2 and 4 processes: each rank's results."""
    outdir = mpirun(request.param, "main", tmp_path_factory.mktemp(f"mpi{request.param}"))
    ranks = [dict(np.load(outdir / f"rank{r}.npz")) for r in range(request.param)]
    return request.param, ranks


def stacked(ranks, key):
    """A per-shard result of every process, in global shard order."""
    return np.concatenate([r[key] for r in ranks])


def test_devices_are_numbered_process_by_process(launch):
    processes, ranks = launch
    for r, result in enumerate(ranks):
        assert list(result["devices"]) == [r * LOCAL_DEVICES + i for i in range(LOCAL_DEVICES)]
        assert list(result["gathered"]) == list(range(processes))
        assert list(result["broadcast"]) == [0, 0]


def test_collectives_against_numpy(launch, worker):
    processes, ranks = launch
    n = processes * LOCAL_DEVICES
    x = worker.global_input(n)
    every = np.broadcast_to

    def check(key, expected, **kw):
        assert_close(stacked(ranks, key), expected, err_msg=key, **kw)

    check("psum", every(x.sum(0), x.shape), rtol=1e-6)
    check("pmean", every(x.mean(0), x.shape), rtol=1e-6)
    check("pmax", every(x.max(0), x.shape))
    check("pmin", every(x.min(0), x.shape))
    check("pmax_scalar", np.full(n, x[:, 0].max()))
    check("psum_int", every(x.astype(np.int32).sum(0), x.shape))
    check("psum_f16", every(x.astype(np.float16).astype(np.float32).sum(0), x.shape),
          rtol=5e-3)
    check("axis_index", np.arange(n, dtype=np.int32))
    check("size", np.full(n, n))
    check("all_gather", every(x, (n,) + x.shape))
    check("all_gather_tiled", every(x.reshape(-1), (n, x.size)))
    shifted = np.zeros_like(x)
    for src, dst in worker.shift_perm_for(n):
        shifted[dst] = x[src]
    check("ppermute", shifted)
    check("psum_scatter", np.arange(n, dtype=np.float32)[:, None] * x.sum(0), rtol=1e-6)
    for scale in (1, 2):
        check(f"psum_large{scale}", every(np.tile(scale * x.sum(0), 300), (n, 900)), rtol=1e-6)


def test_grad_through_collectives(launch, worker):
    """Each process differentiates the sum of its own outputs; the backward collectives make
    it the gradient of the sum over every process (as in JAX)."""
    processes, ranks = launch
    n = processes * LOCAL_DEVICES
    x = worker.global_input(n)
    weights = np.arange(1.0, n + 1, dtype=np.float32)
    assert_close(stacked(ranks, "grad_psum"), 2 * n * x, rtol=1e-6)
    assert_close(stacked(ranks, "grad_pmean"), 2 * x, rtol=1e-6)
    assert_close(stacked(ranks, "grad_all_gather"),
                 np.broadcast_to(n * weights[:, None], x.shape))
    expected = np.zeros_like(x)
    for src, dst in worker.shift_perm_for(n):
        expected[src] = weights[dst]
    assert_close(stacked(ranks, "grad_ppermute"), expected)


def test_training_matches_one_process(launch, worker, monkeypatch):
    """Data-parallel SGD over the processes: the parameters of a single process running the
    same pmap on as many devices."""
    processes, ranks = launch
    n = processes * LOCAL_DEVICES
    monkeypatch.setenv("NBJAX_NUM_CPU_DEVICES", str(n))
    import nbjax
    expected = nbjax.tree_util.tree_leaves(worker.train(*worker.training_data(n)))
    for result in ranks:
        for i, leaf in enumerate(expected):
            assert_close(result[f"param{i}"], np.asarray(leaf), rtol=1e-5)


# --- faults ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fault(tmp_path_factory):
    """Run a fault case on 2 processes; what each reported."""
    def run(case):
        outdir = mpirun(2, case, tmp_path_factory.mktemp(case))
        return [json.loads(p.read_text()) for p in sorted(outdir.glob("rank*.json"))]
    return run


def test_a_process_that_raises_fails_the_others(fault):
    first, second = fault("raise")
    assert second["error"] == "JaxRuntimeError"  # (a callback's exception, as JAX's)
    assert first["error"] == "ProcessFailedError"
    assert "process 1" in first["message"] and "failed on purpose" in first["message"]
    assert first["seconds"] < TIMEOUT  # told at once, not timed out


def test_a_process_that_exits_fails_the_others(fault):
    (first,) = fault("exit")
    assert first["error"] == "ProcessFailedError"
    assert "process 1" in first["message"] and "exited" in first["message"]
    assert first["seconds"] < TIMEOUT


@pytest.mark.parametrize("case, says", [
    ("kill", r"process rank 1 with PID \d+ on\s+node \S+ exited on signal 9"),
    ("exit_abruptly", r"process rank 1 with PID \d+ on\s+node \S+ exiting improperly")])
def test_a_process_killed_ends_the_job_without_waiting_for_the_timeout(case, says, tmp_path):
    """A process killed outright (or leaving by os._exit) sends no notice: mpirun sees it
    die and ends the job at once, naming it; the others never wait out their timeout."""
    timeout = 120
    start = time.monotonic()
    run = launch_worker(2, case, tmp_path, timeout=timeout)
    took = time.monotonic() - start
    assert run.returncode != 0
    assert re.search(says, run.stdout + run.stderr), run.stdout[-3000:] + run.stderr[-3000:]
    assert not list(tmp_path.glob("rank*.json"))  # process 0 was stopped inside its psum
    assert took < timeout / 4


def test_a_process_stuck_elsewhere_times_the_others_out(fault):
    first, second = fault("stuck")
    assert first["error"] == "CollectiveTimeoutError", first
    assert f"within {TIMEOUT} s" in first["message"] and "psum" in first["message"]
    assert TIMEOUT <= first["seconds"] < TIMEOUT + 5


@pytest.mark.parametrize("case, second", [
    ("mismatch", "pmax(float32[3], axis i)"),            # another reduction
    ("mismatch_kind", "all_gather(float32[3], axis i)"),  # another kind of collective
    ("mismatch_shape", "psum(float32[300], axis i)"),    # a buffer MPI finds too long
    ("mismatch_large", "psum(float32[6000], axis i)")])  # one checked before its data moves
def test_mismatched_programs_are_named_at_the_first_collective(fault, case, second):
    reports = fault(case)
    for report in reports:
        assert report["error"] == "CollectiveMismatchError", report
        assert "process 0: psum(float32[3], axis i)" in report["message"]
        assert f"process 1: {second}" in report["message"]
        assert report["seconds"] < TIMEOUT, report  # named at once, not at the deadline


def test_initialize_without_a_launcher_explains_mpi():
    """Asking for several processes outside mpirun/srun says how to start them."""
    code = ("import nbjax\n"
            "try:\n"
            "    nbjax.distributed.initialize('localhost:1234', num_processes=2, process_id=0)\n"
            "except RuntimeError as e:\n"
            "    print('RuntimeError', e)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "SLURM"))}
    env["PYTHONPATH"] = str(HERE.parent)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60).stdout
    assert out.startswith("RuntimeError") and "mpirun -n 2" in out, out


# --- buffers --------------------------------------------------------------------------------

def test_a_large_result_is_recycled_only_once_nothing_holds_it():
    """A large all-reduce writes into the previous call's result when its caller has let go
    of it (fresh memory costs page faults), even one an nbjax Array had made read-only; a
    result still held, or viewed, stays intact."""
    from mpi4py import MPI
    from nbjax.distributed.mpi import SPECULATE_BYTES, Communicator
    comm = Communicator(MPI.COMM_SELF, timeout=10)
    try:
        inputs = [np.full(SPECULATE_BYTES, float(i), np.float32) for i in range(4)]
        held = comm.allreduce(inputs[0], "psum", "psum")
        view = comm.allreduce(inputs[1], "psum", "psum")[::2]
        comm.allreduce(inputs[2], "psum", "psum").flags.writeable = False  # (as an Array does)
        again = comm.allreduce(inputs[3], "psum", "psum")
        assert_close(held, inputs[0])
        assert_close(view, inputs[1][::2])
        assert_close(again, inputs[3])
    finally:
        comm.close()


# --- the notebook magic --------------------------------------------------------------------

def test_mpirun_magic_shows_every_process_output(capsys):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbjax")
    cell = ("import numpy as np, nbjax\nfrom nbjax import lax\n"
            "x = np.full((nbjax.local_device_count(),), nbjax.process_index() + 1.0)\n"
            "print('sum', nbjax.pmap(lambda v: lax.psum(v, 'i'), 'i')(x)[0])\n"
            "if nbjax.process_index() == 1:\n    raise ValueError('only process 1 fails')\n")
    shell.run_cell_magic("mpirun", f"-n 2 --devices {LOCAL_DEVICES}", cell)
    out = capsys.readouterr().out
    zero, one = out.split("── process 1")
    assert "── process 0" in zero and "sum 6.0" in zero and "ValueError" not in zero
    assert "sum 6.0" in one and "ValueError: only process 1 fails" in one

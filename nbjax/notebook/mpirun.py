"""``%%mpirun -n 4``: run a cell as a program of several processes, under ``mpirun``.

The cell is written to a file and run by N fresh Python processes, each of which calls
``nbjax.distributed.initialize()`` first: a ``pmap`` in the cell then spans the devices of
every process. The processes do not share the notebook's variables, so the cell must be
self-contained (its imports, its data). Each process's output (stdout and stderr, tracebacks
included) goes to a file of its own; the magic shows them one after another, labelled by
process.
"""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from IPython.core.error import UsageError

from .options import MagicParser

PARSER = MagicParser(
    "%%mpirun", "Run the cell in N processes under mpirun (Open MPI or MPICH), after "
    "nbjax.distributed.initialize(), and show each process's output. The cell runs in new "
    "processes: it must import and define everything it uses.",
    epilog="Example:\n  %%mpirun -n 2\n  import nbjax, nbjax.numpy as jnp\n"
           "  from nbjax import lax\n  x = jnp.ones((nbjax.local_device_count(), 3))\n"
           "  print(nbjax.process_index(), nbjax.pmap(lambda v: lax.psum(v, 'i'), 'i')(x))")
PARSER.add_argument("-n", "--np", type=int, default=2, metavar="N",
                    help="the number of processes (default 2)")
PARSER.add_argument("--devices", type=int, default=None, metavar="D",
                    help="CPU devices per process (NBJAX_NUM_CPU_DEVICES; default: one per "
                         "core)")
PARSER.add_argument("--timeout", type=float, default=300, metavar="SECONDS",
                    help="stop the processes after this long (default 300)")
PARSER.add_argument("--mpirun-args", default="", metavar="ARGS",
                    help="more arguments for mpirun, e.g. '--hostfile hosts'")

# What each process runs: initialise, send its output to its own file, run the cell.
BOOTSTRAP = """\
import os, runpy, sys
import nbjax
nbjax.distributed.initialize()
out = open(os.path.join(sys.argv[2], f"process{nbjax.process_index()}.txt"), "w")
sys.stdout.flush(); sys.stderr.flush()
os.dup2(out.fileno(), 1); os.dup2(out.fileno(), 2)
sys.argv = sys.argv[1:2]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def mpirun_command(args, script, outdir):
    """The mpirun command line (as root, Open MPI must be told that this is intended)."""
    command = ["mpirun", "-n", str(args.np)]
    if shutil.which("ompi_info"):  # Open MPI: allow more processes than cores (a laptop),
        command += ["--oversubscribe", "-x", "PYTHONPATH"]  # pass nbjax's path to every host
        command += ["-x", "NBJAX_NUM_CPU_DEVICES"] if args.devices is not None else []
    command += shlex.split(args.mpirun_args)
    return command + [sys.executable, "-c", BOOTSTRAP, str(script), str(outdir)]


def _environment(args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    package_root = str(Path(__file__).resolve().parents[2])  # where this nbjax is imported from
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if args.devices is not None:
        env["NBJAX_NUM_CPU_DEVICES"] = str(args.devices)
    return env


def run_cell(line, cell):
    """Run ``cell`` under mpirun with the options of ``line``; print every process's output
    under a label. Returns mpirun's exit status."""
    args = PARSER.parse(line)
    if args.help:
        print(PARSER.format_help())
        return None
    if shutil.which("mpirun") is None:
        raise UsageError("%%mpirun needs an MPI installation (mpirun not found; Debian: "
                         "apt-get install openmpi-bin libopenmpi-dev) and mpi4py")
    if args.np < 1:
        raise UsageError("%%mpirun: -n must be at least 1")
    with tempfile.TemporaryDirectory(prefix="nbjax-mpirun-") as tmp:
        script = Path(tmp, "cell.py")
        script.write_text(cell)
        try:
            run = subprocess.run(mpirun_command(args, script, tmp), env=_environment(args),
                                 capture_output=True, text=True, timeout=args.timeout)
            status, launcher = run.returncode, run.stdout + run.stderr
        except subprocess.TimeoutExpired as stopped:
            status = None
            launcher = f"stopped after {args.timeout:g} s (--timeout)\n" + \
                (stopped.stderr or b"").decode(errors="replace")
        for rank in range(args.np):
            path = Path(tmp, f"process{rank}.txt")
            text = path.read_text() if path.exists() else "(no output: it did not start)\n"
            print(f"── process {rank} " + "─" * 30)
            print(text, end="" if text.endswith("\n") else "\n")
    if status != 0 and launcher.strip():
        print("── mpirun " + "─" * 37)
        print(launcher.rstrip()[-3000:])
    return status

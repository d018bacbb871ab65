"""Several processes, possibly on several hosts, as one program: ``nbjax.distributed``.

``initialize()`` (as ``jax.distributed.initialize``) joins the processes that ``mpirun`` or
Slurm's ``srun`` started. From then on ``nbjax.devices()`` lists the devices of every process,
``nbjax.local_devices()`` this process's, and a ``pmap`` runs over all of them: each process
runs its own shards on threads, and the collectives inside combine the local shards first,
then the processes through MPI (``nbjax.distributed.mpi``). We write no networking of our
own: MPI runs from one laptop to thousands of nodes.

mpi4py is imported only when ``initialize`` finds an MPI launcher, so nbjax needs no MPI to
run in one process.
"""

import os

import numpy as np

from ..core import pytree, to_numpy
from ..core.array import cpu_device_count, processes, set_process_layout

__all__ = ["initialize", "is_initialized", "shutdown", "process_allgather",
           "broadcast_one_to_all", "sync_global_devices"]

# Environment variables by which MPI launchers tell a process it is one of several.
_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS",
                       "SLURM_NTASKS")
DEFAULT_TIMEOUT = 300.0


class _State:
    initialized = False
    communicator = None  # the MPI communicator (nbjax.distributed.mpi.Communicator)


_state = _State()


def communicator():
    """The communicator between the processes, or None in a single-process run."""
    return _state.communicator


def is_initialized():
    return _state.initialized


def _launched_by_mpi():
    return any(name in os.environ for name in _LAUNCHER_VARIABLES)


def _collective_timeout(timeout):
    if timeout is not None:
        return float(timeout)
    return float(os.environ.get("NBJAX_COLLECTIVE_TIMEOUT", DEFAULT_TIMEOUT))


def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, cluster_detection_method=None,
               initialization_timeout=300, coordinator_bind_address=None, *,
               collective_timeout=None):
    """Join the processes of a distributed run, as ``jax.distributed.initialize``.

    Under ``mpirun``/``srun`` no argument is needed: MPI tells each process its rank and the
    number of processes (``num_processes``/``process_id``, if given, must agree with it;
    ``coordinator_address`` is not needed, MPI connects the processes). Outside a launcher
    the run is one process. ``local_device_ids`` chooses how many devices this process
    has (default: ``NBJAX_NUM_CPU_DEVICES`` or one per core); all processes must have as
    many. ``collective_timeout`` (seconds; default ``NBJAX_COLLECTIVE_TIMEOUT`` or 300) bounds
    how long a collective waits for the other processes before it raises.
    """
    if _state.initialized:
        raise RuntimeError("distributed.initialize should only be called once.")
    local = len(local_device_ids) if local_device_ids is not None else cpu_device_count()
    if not _launched_by_mpi():
        if (num_processes or 1) != 1 or (process_id or 0) != 0:
            raise RuntimeError(
                f"nbjax.distributed connects processes through MPI, and this process was not "
                f"started by an MPI launcher: start the {num_processes} processes with "
                f"`mpirun -n {num_processes} python ...` (or Slurm's `srun`); "
                "coordinator_address alone cannot join processes started separately.")
        set_process_layout(0, 1, local)
        _state.initialized = True
        return
    from . import mpi  # imports mpi4py, which initialises MPI
    comm = mpi.Communicator.world(_collective_timeout(collective_timeout),
                                  float(initialization_timeout))
    for name, given, actual in (("num_processes", num_processes, comm.size),
                                ("process_id", process_id, comm.rank)):
        if given is not None and given != actual:
            raise ValueError(f"initialize got {name}={given}, but MPI started this process "
                             f"with {name}={actual}")
    counts = comm.allgather_ints([local], "initialize: local device counts")
    if len(set(counts)) != 1:
        raise RuntimeError(f"every process needs the same number of local devices, got "
                           f"{counts} (set NBJAX_NUM_CPU_DEVICES the same everywhere)")
    set_process_layout(comm.rank, comm.size, local)
    _state.communicator, _state.initialized = comm, True


def shutdown():
    """Leave the distributed run (as ``jax.distributed.shutdown``): tell the other processes
    this one is done and stop; MPI itself is finalised when the process exits."""
    if _state.communicator is not None:
        _state.communicator.close()
    _state.communicator, _state.initialized = None, False
    set_process_layout(0, 1, None)


# --- helpers for the usual patterns (as jax.experimental.multihost_utils) ----------------

def process_allgather(x, tiled=False):
    """Every process's ``x`` (a pytree of arrays), stacked on a new leading axis in process
    order (``tiled``: concatenated along axis 0), as NumPy arrays on every process: a global
    array assembled from per-process shards, or a result gathered for printing."""
    comm = _state.communicator

    def gather(leaf):
        leaf = np.asarray(to_numpy(leaf))
        every = leaf[None] if comm is None else comm.allgather(
            leaf[None], f"process_allgather({leaf.dtype}{list(leaf.shape)})")
        return np.concatenate(list(every)) if tiled else every
    return pytree.tree_map(gather, x)


def broadcast_one_to_all(x, is_source=None):
    """Process 0's ``x`` (a pytree of arrays) on every process (``is_source``: whether this
    process is the one that sends; default: process 0)."""
    source = processes.index == 0 if is_source is None else bool(is_source)
    comm = _state.communicator
    if comm is None:
        return pytree.tree_map(lambda leaf: np.asarray(to_numpy(leaf)), x)
    sources = comm.allgather_ints([int(source)], "broadcast_one_to_all: sources")
    if sum(sources) != 1:
        raise ValueError(f"broadcast_one_to_all needs exactly one source, got {sources}")
    root = sources.index(1)
    return pytree.tree_map(lambda leaf: comm.broadcast(np.asarray(to_numpy(leaf)), root), x)


def sync_global_devices(name):
    """Wait until every process has reached the barrier ``name`` (mismatched names raise)."""
    if _state.communicator is not None:
        _state.communicator.allgather_ints([0], f"sync_global_devices({name!r})")

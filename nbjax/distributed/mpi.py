"""The processes' communicator: MPI collectives on NumPy buffers, with deadlines and checks.

Every collective starts with a *meeting*: the processes exchange (nonblocking, polled
against a deadline) a short description of the collective each is about to run (its name,
axis, operand type). This detects mismatched programs at the first collective where they
differ, with both descriptions in the error, and processes that never arrive (exited,
crashed, stuck elsewhere) with a timeout instead of a hang. Once every process is known to
be at the same collective, the data moves through MPI's own blocking collectives
(``Allreduce``, ``Allgather``, ``Sendrecv``) on the buffers directly, never pickled, at
MPI's full speed.

A process that fails inside a pmap, raises an uncaught exception or exits sends a short
notice (with how many collectives it completed) to the others on a second communicator;
a process waiting for it at a later collective raises at once, naming it.
"""

import atexit
import sys
import time

import numpy as np
from mpi4py import MPI

DESCRIPTION_BYTES = 256
NOTICE_BYTES = 512
NOTICE_TAG = 7

_OPS = {"psum": MPI.SUM, "pmax": MPI.MAX, "pmin": MPI.MIN}
_NUMPY_OPS = {"psum": np.add, "pmax": np.maximum, "pmin": np.minimum}
# The dtypes MPI reduces natively (others: gathered and reduced with NumPy).
_MPI_DTYPES = {np.dtype(t) for t in ("float32", "float64", "int8", "int16", "int32", "int64",
                                     "uint8", "uint16", "uint32", "uint64")}


class DistributedError(RuntimeError):
    """A collective across processes could not complete."""


class CollectiveMismatchError(DistributedError):
    """The processes reached different collectives: their programs differ."""


class CollectiveTimeoutError(DistributedError, TimeoutError):
    """Some process did not reach a collective within the timeout."""


class ProcessFailedError(DistributedError):
    """Another process failed or exited before reaching this collective."""


def _encode(text, size):
    data = text.encode()[:size]
    return np.frombuffer(data.ljust(size, b"\0"), np.uint8).copy()


def _decode(row):
    return bytes(row).rstrip(b"\0").decode(errors="replace")


def _contiguous(x):
    """``x`` as a C-contiguous array of its own shape (``np.ascontiguousarray`` makes 0-d
    arrays 1-d)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy()


def _raw(x):
    """A contiguous array's bytes, as a flat uint8 array (any dtype, bfloat16 included)."""
    return _contiguous(x).reshape(-1).view(np.uint8)


class Communicator:
    """The processes of a run, as this one sees them: collectives with meetings and
    deadlines, and the notices of failed or exited processes."""

    def __init__(self, comm, timeout):
        self.comm, self.control = comm.Dup(), comm.Dup()
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = timeout
        self.completed = 0      # collectives completed by this process
        self.broken = None      # why the processes are out of step (later collectives raise)
        self.notices = {}       # rank -> (collectives it completed, what happened to it)
        self._notice = np.zeros(NOTICE_BYTES, np.uint8)
        self._notice_request = self.control.Irecv([self._notice, MPI.BYTE], MPI.ANY_SOURCE,
                                                  NOTICE_TAG)
        self._sent = None       # the notice this process sent, and its requests
        self._hook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self.close)

    @classmethod
    def world(cls, timeout, initialization_timeout):
        """The communicator of every process MPI started (the first meeting, with
        ``initialization_timeout``, checks that all of them are there)."""
        comm = cls(MPI.COMM_WORLD, timeout)
        comm.timeout, timeout = initialization_timeout, comm.timeout
        try:
            comm.meet("initialize")
        finally:
            comm.timeout = timeout
        return comm

    # --- meetings ------------------------------------------------------------------------

    def meet(self, description):
        """Wait (until the deadline) for every process to reach this collective, and check
        that they all describe it alike."""
        if self.broken is not None:
            raise DistributedError(f"an earlier collective failed ({self.broken}); the "
                                   "processes are out of step")
        number = self.completed + 1
        mine = _encode(description, DESCRIPTION_BYTES)
        every = np.empty((self.size, DESCRIPTION_BYTES), np.uint8)
        request = self.comm.Iallgather([mine, MPI.BYTE], [every, MPI.BYTE])
        self._wait(request, f"collective #{number} ({description})")
        texts = [_decode(row) for row in every]
        if len(set(texts)) > 1:
            differ = "; ".join(f"process {r}: {t}" for r, t in enumerate(texts))
            raise self._fail(CollectiveMismatchError(
                f"the processes' programs differ at collective #{number}: {differ}"))
        self.completed = number

    def _wait(self, request, what):
        deadline, spins = time.monotonic() + self.timeout, 0
        while not request.Test():
            self._check_notices(what)
            if time.monotonic() > deadline:
                raise self._fail(CollectiveTimeoutError(
                    f"{what}: not every one of the {self.size} processes reached it within "
                    f"{self.timeout:g} s (one may have exited, crashed or be stuck elsewhere; "
                    "the timeout is initialize(collective_timeout=) or "
                    "NBJAX_COLLECTIVE_TIMEOUT)"))
            spins += 1
            if spins > 200:  # a fast collective is answered within the spins
                time.sleep(min(1e-3, 1e-5 * (spins - 200)))

    def _check_notices(self, what):
        status = MPI.Status()
        while self._notice_request.Test(status):
            completed, = self._notice[:8].view(np.int64)
            self.notices[status.Get_source()] = (int(completed), _decode(self._notice[8:]))
            self._notice_request = self.control.Irecv([self._notice, MPI.BYTE],
                                                      MPI.ANY_SOURCE, NOTICE_TAG)
        for rank, (completed, event) in sorted(self.notices.items()):
            if completed <= self.completed:  # it will never reach this collective
                raise self._fail(ProcessFailedError(
                    f"{what}: process {rank}, after {completed} collectives, {event}; it "
                    "will never reach this one"))

    def _fail(self, error):
        self.broken = str(error)
        return error

    # --- notices -------------------------------------------------------------------------

    def notify(self, event):
        """Tell the other processes what happened to this one (once): ``event`` reads
        after "process N", e.g. "failed: ValueError: ...". Waits briefly for delivery."""
        if self._sent is not None or self.size == 1:
            return
        notice = np.zeros(NOTICE_BYTES, np.uint8)
        notice[:8] = np.array([self.completed], np.int64).view(np.uint8)
        notice[8:] = _encode(event, NOTICE_BYTES - 8)
        requests = [self.control.Isend([notice, MPI.BYTE], rank, NOTICE_TAG)
                    for rank in range(self.size) if rank != self.rank]
        self._sent = (notice, requests)
        deadline = time.monotonic() + 1.0
        while not MPI.Request.Testall(requests) and time.monotonic() < deadline:
            time.sleep(1e-4)

    def notify_failure(self, error):
        if not isinstance(error, ProcessFailedError):  # (the failed one has told the others)
            self.notify(f"failed: {type(error).__name__}: {error}")

    def _excepthook(self, kind, value, traceback):
        self.notify_failure(value)
        self._hook(kind, value, traceback)

    def close(self):
        """This process is done: tell the others (one still waiting for it then fails at
        once) and withdraw the notice receive, so that MPI can finalise."""
        if self._notice_request is None:
            return
        self.notify("exited")
        self._notice_request.Cancel()
        self._notice_request.Wait()
        self._notice_request = None
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._hook

    # --- collectives on buffers ----------------------------------------------------------

    def allreduce(self, x, op, description):
        """``x`` (an array) reduced over the processes with ``op`` ("psum", "pmax",
        "pmin"), the same on every process."""
        self.meet(description)
        x = _contiguous(x)
        if x.dtype not in _MPI_DTYPES:
            return _NUMPY_OPS[op].reduce(self._allgather(x[None]), axis=0)
        out = np.empty_like(x)
        self.comm.Allreduce(x.reshape(-1), out.reshape(-1), op=_OPS[op])
        return out

    def allgather(self, x, description):
        """Every process's ``x`` (whose leading axis counts its shards), concatenated in
        process order along that axis."""
        self.meet(description)
        return self._allgather(x)

    def _allgather(self, x):
        x = _contiguous(x)
        out = np.empty((self.size * x.shape[0],) + x.shape[1:], x.dtype)
        self.comm.Allgather([_raw(x), MPI.BYTE], [_raw(out), MPI.BYTE])
        return out

    def allgather_ints(self, values, description):
        """Every process's few integers, in process order (one list, flattened)."""
        return [int(v) for v in self.allgather(np.asarray(values, np.int64), description)]

    def broadcast(self, x, root):
        """Process ``root``'s array ``x`` on every process (all pass one of that type)."""
        self.meet(f"broadcast({x.dtype}{list(x.shape)}) from process {root}")
        x = np.array(x, order="C")
        self.comm.Bcast([_raw(x), MPI.BYTE], root=root)
        return x

    def exchange(self, sends, receives, like, description):
        """Point-to-point: ``sends`` maps a process to the array sent to it, ``receives`` a
        process to how many values of ``like``'s type come from it; returns those arrays."""
        self.meet(description)
        out = {q: np.empty((n,) + like.shape, like.dtype) for q, n in receives.items()}
        requests = [self.comm.Irecv([_raw(buf), MPI.BYTE], q, 0) for q, buf in out.items()]
        sent = [_contiguous(buf) for buf in sends.values()]
        requests += [self.comm.Isend([_raw(buf), MPI.BYTE], q, 0)
                     for q, buf in zip(sends, sent)]
        MPI.Request.Waitall(requests)
        return out

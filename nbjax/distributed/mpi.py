"""The processes' communicator: MPI collectives on NumPy buffers, with deadlines and checks.

Every collective checks that all processes run the same one, without a round trip of its
own: each process appends a fingerprint of its collective to the very buffer it reduces or
gathers (``nbjax.distributed.fingerprint``). A fingerprint that does not come back as
predicted, or MPI failing on mismatched buffers, makes the processes exchange their full
descriptions (on a communicator used only for that) and raise an error naming the
difference: a mismatched program is detected at the first collective where it differs.
The process that finds it asks the others to join at once (an empty message they probe
for while they wait): MPI may never complete a mismatched collective for some of them,
which would otherwise learn of it only at their deadline.

Collectives on small buffers (up to SPECULATE_BYTES) move data and fingerprint in one
nonblocking MPI collective, polled against a deadline. Larger ones first agree on the
fingerprint alone (a small nonblocking all-reduce, whose round trip is negligible next to
the data), then move the data through MPI's blocking collectives (``Allreduce``,
``Allgather``, ``Bcast``) at MPI's full speed, never pickled and without a copy.

A process that reaches no collective within the deadline makes the others raise a timeout
(after a short diagnosis, in case the processes wait at different collectives that MPI could
not tell apart). A process that fails inside a pmap, raises an uncaught exception or exits
sends a short notice (with how many collectives it completed) to the others on a second
communicator; a process waiting for it at a later collective raises at once, naming it.
"""

import atexit
import os
import sys
import time

import numpy as np
from mpi4py import MPI

from .fingerprint import fingerprint, gather_tail, reduction_tail

# Up to this many bytes (data and fingerprint) travel together. Mismatched programs then
# hand MPI mismatched buffers: Open MPI 4.1 reports a message longer than the receiver's
# buffer as truncated while it is sent eagerly (4 KB between processes of one host), but
# corrupts memory or crashes beyond that. So every buffer sent unchecked stays well below.
SPECULATE_BYTES = 2048
FAST_SPINS = 100             # polls of a collective before its deadline and notices count
SPIN_SECONDS = 0.02          # then how long it is polled without sleeping
DIAGNOSIS_GRACE = 2.0        # how long a process that timed out waits for the others' account
DESCRIPTION_BYTES = 256
OPERAND_BYTES = 64
NOTICE_BYTES = 512
NOTICE_TAG = 7
DIAGNOSIS_TAG = 8            # "I found the collectives differ: tell me what you run"

_OPS = {"psum": MPI.SUM, "pmax": MPI.MAX, "pmin": MPI.MIN}
_NUMPY_OPS = {"psum": np.add, "pmax": np.maximum, "pmin": np.minimum}
# The dtypes MPI reduces natively (others: gathered and reduced with NumPy).
_MPI_DTYPES = {np.dtype(t) for t in ("float32", "float64", "int8", "int16", "int32", "int64",
                                     "uint8", "uint16", "uint32", "uint64")}


_GATHERED = "gathered"  # how an all-reduce of a type MPI cannot reduce runs
_NOTHING = np.empty(0, np.int64)  # the data of a meeting


class DistributedError(RuntimeError):
    """A collective across processes could not complete."""


class CollectiveMismatchError(DistributedError):
    """The processes reached different collectives: their programs differ."""


class CollectiveTimeoutError(DistributedError, TimeoutError):
    """Some process did not reach a collective within the timeout."""


class ProcessFailedError(DistributedError):
    """Another process failed or exited before reaching this collective."""


def _summary(error):
    """``error``'s message in a notice's few hundred bytes: a message of several lines (a
    callback's traceback, which a ``JaxRuntimeError`` carries) as its first and last ones,
    where the error that started it is named."""
    lines = str(error).strip().splitlines()
    return lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1]}"


class _DiagnosisAsked(Exception):
    """Another process found that the collectives differ and waits for this one's account."""


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


class _Reduction:
    """A small all-reduce as one call site runs it, prepared once (a call then costs little
    more than MPI's): send and receive buffers with the fingerprint's tail in place, views
    of their data, and the tail expected back."""

    __slots__ = ("send", "receive", "data", "result", "tail", "expected", "op", "operand")

    def __init__(self, dtype, shape, op, operand, tail, expected):
        size = int(np.prod(shape, dtype=np.int64))
        send = np.concatenate([np.zeros(size, dtype), tail])
        receive = np.empty_like(send)
        kind = MPI.Datatype.fromcode(dtype.char)  # (named: no format to parse per call)
        self.send, self.receive = [send, kind], [receive, kind]
        self.data, self.result = send[:size].reshape(shape), receive[:size].reshape(shape)
        self.tail, self.expected = receive[size:], expected
        self.op, self.operand = _OPS[op], operand


class _Large:
    """An all-reduce too large to travel with its check: ``meeting`` (the plan of an
    all-reduce of the fingerprint alone) first, then MPI's blocking all-reduce into a
    result buffer recycled once its caller has let go of it: fresh memory costs a page
    fault per 4 KB, which made a fresh 16 MB result cost as much again as the all-reduce."""

    __slots__ = ("meeting", "spare")

    def __init__(self, meeting):
        self.meeting, self.spare = meeting, None

    def result(self, like):
        """An array like ``like`` that nothing else references."""
        if self.spare is None or sys.getrefcount(self.spare) > 2:  # (this one, the argument)
            self.spare = np.empty_like(like)
        else:  # (an nbjax Array that wrapped it made it read-only; none is left)
            self.spare.flags.writeable = True
        return self.spare


class Communicator:
    """The processes of a run, as this one sees them: collectives with fingerprints and
    deadlines, and the notices of failed or exited processes."""

    def __init__(self, comm, timeout):
        self.comm, self.control, self.diagnosis = comm.Dup(), comm.Dup(), comm.Dup()
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = timeout
        self.completed = 0      # collectives completed by this process
        self.broken = None      # why the processes are out of step (later collectives raise)
        self.notices = {}       # rank -> (collectives it completed, what happened to it)
        self._plans = {}        # (description, op, dtype, shape) -> how it runs (_plan)
        self._tails = {}        # (description, operand) -> the tail of a gather
        self._notice = np.zeros(NOTICE_BYTES, np.uint8)
        self._notice_request = self.control.Irecv([self._notice, MPI.BYTE], MPI.ANY_SOURCE,
                                                  NOTICE_TAG)
        self._sent = None       # the notice this process sent, and its requests
        self._asked = []        # its requests asking the others for a diagnosis
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
            comm.meet("initialize", "")
        finally:
            comm.timeout = timeout
        return comm

    # --- checks --------------------------------------------------------------------------

    def meet(self, description, operand):
        """Wait (until the deadline) for every process to reach this collective, checking
        that they all run the same one (before a large collective moves its data)."""
        self._reduce_small(self._meeting(description, operand), _NOTHING, description)

    def _meeting(self, description, operand):
        """The plan of a meeting: an all-reduce of nothing but the fingerprint."""
        key = (description, "meet", operand)
        return self._plans.get(key) or self._plan(key, _NOTHING, "pmax", description, operand)

    def _reduce_small(self, plan, x, description):
        """``x`` reduced over the processes in one nonblocking all-reduce that also carries
        the collective's fingerprint (``plan``: the call site's ``_Reduction``)."""
        if self.broken is not None:
            self._raise_broken()
        plan.data[...] = x
        self._wait(self.comm.Iallreduce(plan.send, plan.receive, plan.op), description,
                   plan.operand)
        if plan.tail.tobytes() != plan.expected:
            self._diagnose(description, plan.operand, None)
        self.completed += 1
        return plan.result.copy()

    def _plan(self, key, x, op, description, operand=None):
        """How the collective ``key`` runs: a ``_Reduction`` if ``x`` is small and of a type
        that can carry a fingerprint, else a ``_Large`` (a meeting first, then MPI's
        blocking all-reduce) or ``_GATHERED`` (a type MPI cannot reduce)."""
        if len(self._plans) > 1024:  # (a program of ever new shapes)
            self._plans.clear()
        operand = f"{op} {x.dtype}{list(x.shape)}" if operand is None else operand
        tail = reduction_tail(fingerprint(description, operand), x.dtype, op, self.size)
        plan = (_GATHERED if x.dtype not in _MPI_DTYPES else
                _Large(self._meeting(description, operand))
                if tail is None or x.nbytes + tail[0].nbytes > SPECULATE_BYTES else
                _Reduction(x.dtype, x.shape, op, operand, *tail))
        self._plans[key] = plan
        return plan

    def _raise_broken(self):
        raise DistributedError(f"an earlier collective failed ({self.broken}); the "
                               "processes are out of step")

    def _what(self, description):
        return f"collective #{self.completed + 1} ({description})"

    def _wait(self, request, description, operand):
        """Wait for a collective, first polling it briefly, then against the deadline and
        the notices of failed processes; on a timeout or an MPI error, diagnose."""
        try:
            for _ in range(FAST_SPINS):
                if request.Test():
                    return
            if self._poll(request, self.timeout, self._what(description)):
                return
        except MPI.Exception as error:
            self._diagnose(description, operand, DistributedError(
                f"{self._what(description)}: MPI failed: {error}"))
        except _DiagnosisAsked:
            self._diagnose(description, operand, DistributedError(
                f"{self._what(description)}: another process could not complete it (a "
                "process may have exited, crashed or be stuck elsewhere)"))
        self._diagnose(description, operand, CollectiveTimeoutError(
            f"{self._what(description)}: not every one of the {self.size} processes reached "
            f"it within {self.timeout:g} s (one may have exited, crashed or be stuck "
            "elsewhere; the timeout is initialize(collective_timeout=) or "
            "NBJAX_COLLECTIVE_TIMEOUT)"), DIAGNOSIS_GRACE)

    def _poll(self, request, seconds, what=None):
        """Whether ``request`` completed within ``seconds``; with ``what`` (the collective
        waited for), a notice of a process that will never reach it raises meanwhile, and
        another process asking for a diagnosis raises ``_DiagnosisAsked``."""
        start = time.monotonic()
        spins = 0
        while not request.Test():
            os.sched_yield()  # (processes may outnumber cores: let the one awaited run)
            spins += 1
            if spins % 64:
                continue
            if what is not None:
                self._check_notices(what)
                if self.control.Iprobe(MPI.ANY_SOURCE, DIAGNOSIS_TAG):
                    raise _DiagnosisAsked()
            waited = time.monotonic() - start
            if waited > seconds:
                return False
            if waited > SPIN_SECONDS:  # not an answer about to come: let the others run
                time.sleep(min(1e-3, waited / 100))
        return True

    def _diagnose(self, description, operand, error, seconds=None):
        """The collective failed (``error``, None if its fingerprint came back altered): the
        processes exchange what they are running, on a communicator used only for this
        (once: the processes are then out of step), and raise the error that names the
        difference, else ``error``. The others may notice only when their own deadline
        passes (MPI can leave them waiting at a mismatched collective): by default this
        process waits for them that long, and a little more."""
        seconds = self.timeout + DIAGNOSIS_GRACE if seconds is None else seconds
        what = self._what(description)
        self._ask_for_diagnosis()
        mine = np.concatenate([_encode(description, DESCRIPTION_BYTES),
                               _encode(operand, OPERAND_BYTES)])
        every = np.empty((self.size, mine.size), np.uint8)
        request = self.diagnosis.Iallgather([mine, MPI.BYTE], [every, MPI.BYTE])
        error = error or DistributedError(
            f"{what}: the processes' fingerprints of it differ, but not every process "
            "said what it runs")
        if self._poll(request, seconds):
            for texts, field in (([_decode(r[:DESCRIPTION_BYTES]) for r in every], ""),
                                 ([_decode(r[DESCRIPTION_BYTES:]) for r in every], "on ")):
                if len(set(texts)) > 1:
                    differ = "; ".join(f"process {r}: {field}{t}" for r, t in enumerate(texts))
                    error = CollectiveMismatchError(f"the processes' programs differ at "
                                                    f"collective #{self.completed + 1}: "
                                                    f"{differ}")
                    break
        raise self._fail(error)

    def _ask_for_diagnosis(self):
        """Make the others, waiting at a collective MPI may never complete for them (a
        mismatched one), join the diagnosis at once rather than at their deadline (an
        empty message each: ``_poll`` probes for it; kept, as the processes are out of
        step from now on)."""
        self._asked = [self.control.Isend([_NOTHING, MPI.BYTE], rank, DIAGNOSIS_TAG)
                       for rank in range(self.size) if rank != self.rank]

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
            self.notify(f"failed: {type(error).__name__}: {_summary(error)}")

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
        x = np.asarray(x)
        key = (description, op, x.dtype, x.shape)
        plan = self._plans.get(key) or self._plan(key, x, op, description)
        if type(plan) is _Reduction:
            return self._reduce_small(plan, x, description)
        if plan is _GATHERED:
            return _NUMPY_OPS[op].reduce(self.allgather(x[None], description), axis=0)
        self._reduce_small(plan.meeting, _NOTHING, description)
        x = _contiguous(x)
        out = plan.result(x)
        self.comm.Allreduce(x.reshape(-1), out.reshape(-1), op=_OPS[op])
        return out

    def allgather(self, x, description):
        """Every process's ``x`` (whose leading axis counts its shards), concatenated in
        process order along that axis."""
        if self.broken is not None:
            self._raise_broken()
        x = _contiguous(x)
        out = np.empty((self.size * x.shape[0],) + x.shape[1:], x.dtype)
        operand = f"allgather {x.dtype}{list(x.shape)}"
        data, tail = _raw(x), self._tails.get((description, operand))
        if tail is None:
            tail = self._tails[description, operand] = gather_tail(
                fingerprint(description, operand))
        if self.size * (data.size + tail.size) > SPECULATE_BYTES:  # (what each receives)
            self.meet(description, operand)
            self.comm.Allgather([data, MPI.BYTE], [_raw(out), MPI.BYTE])
            return out
        every = np.empty((self.size, data.size + tail.size), np.uint8)
        self._wait(self.comm.Iallgather([np.concatenate([data, tail]), MPI.BYTE],
                                        [every, MPI.BYTE]), description, operand)
        if (every[:, data.size:] != tail).any():
            self._diagnose(description, operand, None)
        self.completed += 1
        _raw(out)[:] = every[:, :data.size].reshape(-1)
        return out

    def allgather_ints(self, values, description):
        """Every process's few integers, in process order (one list, flattened)."""
        return [int(v) for v in self.allgather(np.asarray(values, np.int64), description)]

    def broadcast(self, x, root):
        """Process ``root``'s array ``x`` on every process (all pass one of that type)."""
        self.meet(f"broadcast from process {root}", f"{x.dtype}{list(x.shape)}")
        x = np.array(x, order="C")
        self.comm.Bcast([_raw(x), MPI.BYTE], root=root)
        return x

    def exchange(self, sends, receives, like, description):
        """Point-to-point: ``sends`` maps a process to the array sent to it, ``receives`` a
        process to how many values of ``like``'s type come from it; returns those arrays."""
        self.meet(description, f"exchange of {like.dtype}{list(like.shape)}")
        out = {q: np.empty((n,) + like.shape, like.dtype) for q, n in receives.items()}
        requests = [self.comm.Irecv([_raw(buf), MPI.BYTE], q, 0) for q, buf in out.items()]
        sent = [_contiguous(buf) for buf in sends.values()]
        requests += [self.comm.Isend([_raw(buf), MPI.BYTE], q, 0)
                     for q, buf in zip(sends, sent)]
        MPI.Request.Waitall(requests)
        return out

"""The native worker pool: native code runs a kernel on every core without Python.

A kernel that native code (a compiled loop, a whole program) splits between the cores
calls ``nbjax_parallel_for(chunk, args, extent)``, where ``chunk(args, start, stop)`` runs
the kernel over ``[start, stop)`` of its outer axis (``args``: its buffers' addresses). The
caller posts the job (``CHUNKS_PER_THREAD`` chunks per thread), wakes the workers that
sleep, and claims chunks itself like any worker, each by a compare-and-swap, so a worker
that comes late (it was asleep) leaves its share to the others. When none is left the caller
waits for the chunks the workers are running, spinning, then (after ``SPIN_CYCLES``)
yielding its core: on a machine busier than its cores, the worker it waits for may be
waiting for one. Such a worker can hold the caller up for a scheduler's time slice
(milliseconds): another process, or OpenBLAS's threads, which spin for a tenth of a second
after each decomposition (``lapack``), take the core it needs. So when the caller waits
``STALL_CYCLES`` (about 0.3 ms) longer than its own share took (a worker woken from its
futex comes tens of microseconds late: that is no stall), callers run alone for a while,
then try the workers again: ``ALONE_MIN`` cycles (a few milliseconds) after a first stall
(this VM's cores stall now and then with nothing else running), twice as long after each
further one, up to ``ALONE_MAX`` (a third of a second: a competitor like OpenBLAS's
threads stays that long); a job shared without a stall starts over from ``ALONE_MIN``.
Handing chunks over costs about a microsecond while the workers are awake.

The workers are Python threads, each inside one native call of ``nbjax_pool_worker`` that
never returns (ctypes released the GIL). After a job a worker spins on the job counter for
``IDLE_SPIN_CYCLES`` (under a millisecond), then sleeps in a futex until the next job wakes
it. Matrix products run on the workers too (``blas``). A second thread calling
``nbjax_parallel_for`` while the pool is busy, or any call before the pool is started or
after a ``fork`` (which keeps only the calling thread), runs the kernel on its own thread.
"""

import ctypes
import os
import platform
import threading
import time

from llvmlite import ir

from ..llvm.types import I8, I32, I64, declare

I8P = I8.as_pointer()
CHUNK = ir.FunctionType(ir.VoidType(), [I8P.as_pointer(), I64, I64])
PARALLEL_FOR = "nbjax_parallel_for"
WORKER = "nbjax_pool_worker"
WORKERS = "nbjax_pool_workers"   # the number of workers running (0: no pool)
READY = "nbjax_pool_ready"       # the number of workers that have begun to wait for jobs
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98}.get(platform.machine().lower())
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129   # the _PRIVATE operations
SPIN_CYCLES = 20_000      # time-stamp counter cycles a caller spins before it yields
# ... and a worker spins after a job before it sleeps: a program's next job (its next call
# from Python, tens of microseconds later) finds it awake. Woken from its futex, a worker on
# this VM came so late that the caller had run its half of a product too (an MLP step
# 1.4 -> 2.2 ms, its products on the pool at half speed).
IDLE_SPIN_CYCLES = 1 << 21
STALL_CYCLES = 1 << 20    # a wait this much longer than the caller's own share: a stall
ALONE_MIN = 1 << 23       # how long callers then work alone, doubled at each stall that
ALONE_MAX = 1 << 30       # follows, up to this; a job shared without a stall resets it
CHUNKS_PER_THREAD = 4     # a job's chunks: a thread that comes late finds some left


def declare_parallel_for(module):
    """``nbjax_parallel_for``, declared in ``module`` (native code calls it)."""
    return declare(module, PARALLEL_FOR, ir.VoidType(), [CHUNK.as_pointer(),
                                                         I8P.as_pointer(), I64])


def supported():
    """Whether this system has the futex the sleeping workers wait on (Linux)."""
    return _SYS_FUTEX is not None and os.name == "posix" and platform.system() == "Linux"


def _c(ty, value):
    return ir.Constant(ty, value)


class _Pool:
    """The pool's globals in a module under construction: the job (chunk function,
    arguments, extent, number of chunks), its number (``generation``, the futex word), the
    claims on its chunks (the job's number above the next chunk's), and the counters its
    threads synchronise on."""

    def __init__(self, m):
        def var(name, ty):
            g = ir.GlobalVariable(m, ty, "nbjax_pool_" + name)
            g.initializer = _c(ty, None if isinstance(ty, ir.PointerType) else 0)
            return g
        self.generation, self.finished, self.sleepers, self.busy = (
            var(n, I32) for n in ("generation", "finished", "sleepers", "busy"))
        self.workers, self.ready = var("workers", I32), var("ready", I32)
        self.claims, self.alone_until = var("claims", I64), var("alone_until", I64)
        self.backoff = var("backoff", I64)  # how long the next stall sends callers alone
        self.chunk, self.args = var("chunk", CHUNK.as_pointer()), var("args", I8P.as_pointer())
        self.extent, self.chunks = var("extent", I64), var("chunks", I64)
        self.syscall = ir.Function(m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        self.sched_yield = ir.Function(m, ir.FunctionType(I32, []), "sched_yield")
        self.pause = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause") \
            if platform.machine().lower() in ("x86_64", "amd64") else None
        self.clock = ir.Function(m, ir.FunctionType(I64, []), "llvm.readcyclecounter")
        self.take = _take(m, self)

    def futex(self, b, op, value):
        word = b.bitcast(self.generation, I32.as_pointer())
        b.call(self.syscall, [_c(I64, _SYS_FUTEX), b.ptrtoint(word, I64), _c(I32, op), value,
                              _c(I8P, None)])

    def relax(self, b):
        if self.pause is not None:
            b.call(self.pause, [])

    def take_chunks(self, b, job):
        """Run chunks of job number ``job`` until none is left to claim."""
        b.call(self.take, [job, b.load(self.chunk), b.load(self.args), b.load(self.extent),
                           b.load(self.chunks)])


def _take(m, pool):
    """``nbjax_pool_take(job, chunk, args, extent, chunks)``: claim the next chunk of job
    number ``job`` and run it, until all are claimed or another job has begun. A claim is a
    compare-and-swap of the job's number with the chunk's, so a thread that read the job's
    fields before the next job replaced them never runs a chunk with them."""
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I32, CHUNK.as_pointer(),
                                                        I8P.as_pointer(), I64, I64]),
                     "nbjax_pool_take")
    job, chunk, args, extent, chunks = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    claim, run, done = (fn.append_basic_block(n) for n in ("claim", "run", "done"))
    b.branch(claim)
    b.position_at_end(claim)
    word = b.load_atomic(pool.claims, "acquire", 8)
    k = b.and_(word, _c(I64, 0xFFFFFFFF))
    current = b.icmp_unsigned("==", b.trunc(b.lshr(word, _c(I64, 32)), I32), job)
    open_ = b.and_(current, b.icmp_unsigned("<", k, chunks))
    try_claim = fn.append_basic_block("try_claim")
    b.cbranch(open_, try_claim, done)
    b.position_at_end(try_claim)
    taken = b.cmpxchg(pool.claims, word, b.add(word, _c(I64, 1)), "acq_rel", "acquire")
    b.cbranch(b.extract_value(taken, 1), run, claim)
    b.position_at_end(run)
    start = b.udiv(b.mul(extent, k), chunks)
    stop = b.udiv(b.mul(extent, b.add(k, _c(I64, 1))), chunks)
    b.call(chunk, [args, start, stop])
    b.atomic_rmw("add", pool.finished, _c(I32, 1), "release")
    b.branch(claim)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _parallel_for(m, pool):
    """``nbjax_parallel_for(chunk, args, extent)``: see the module docstring."""
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [CHUNK.as_pointer(), I8P.as_pointer(),
                                                        I64]), PARALLEL_FOR)
    chunk, args, extent = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    alone, shared = fn.append_basic_block("alone"), fn.append_basic_block("shared")
    workers = b.load_atomic(pool.workers, "monotonic", 4)
    idle = b.icmp_unsigned("==", workers, _c(I32, 0))
    small = b.icmp_unsigned("<", extent, _c(I64, 2))
    posted = b.call(pool.clock, [])
    backing_off = b.icmp_unsigned("<", posted, b.load_atomic(pool.alone_until, "monotonic", 8))
    go = b.append_basic_block("take")
    b.cbranch(b.or_(b.or_(idle, small), backing_off), alone, go)
    b.position_at_end(go)
    taken = b.cmpxchg(pool.busy, _c(I32, 0), _c(I32, 1), "acquire", "monotonic")
    b.cbranch(b.extract_value(taken, 1), shared, alone)

    b.position_at_end(alone)
    b.call(chunk, [args, _c(I64, 0), extent])
    b.ret_void()

    b.position_at_end(shared)
    wanted = b.mul(b.add(b.zext(workers, I64), _c(I64, 1)), _c(I64, CHUNKS_PER_THREAD))
    chunks = b.select(b.icmp_unsigned("<", extent, wanted), extent, wanted)
    for var, value in ((pool.chunk, chunk), (pool.args, args), (pool.extent, extent),
                       (pool.chunks, chunks)):
        b.store(value, var)
    b.store_atomic(_c(I32, 0), pool.finished, "monotonic", 4)
    job = b.add(b.load_atomic(pool.generation, "monotonic", 4), _c(I32, 1))
    b.store_atomic(b.shl(b.zext(job, I64), _c(I64, 32)), pool.claims, "release", 8)
    b.store_atomic(job, pool.generation, "seq_cst", 4)
    with b.if_then(b.icmp_unsigned("!=", b.load_atomic(pool.sleepers, "seq_cst", 4),
                                   _c(I32, 0))):
        pool.futex(b, _FUTEX_WAKE, _c(I32, 0x7FFFFFFF))
    b.call(pool.take, [job, chunk, args, extent, chunks])
    began = b.call(pool.clock, [])
    own = b.sub(began, posted)
    wait, finished = fn.append_basic_block("wait"), fn.append_basic_block("finished")
    waiting = fn.append_basic_block("waiting")
    b.branch(wait)
    b.position_at_end(wait)                      # for chunks the workers claimed
    all_done = b.icmp_unsigned("==", b.zext(b.load_atomic(pool.finished, "acquire", 4), I64),
                               chunks)
    b.cbranch(all_done, finished, waiting)
    b.position_at_end(waiting)  # (a worker another thread displaced needs this core back)
    now = b.call(pool.clock, [])
    waited = b.sub(now, began)
    stalled = b.icmp_unsigned(">", waited, b.add(own, _c(I64, STALL_CYCLES)))
    noted = b.icmp_unsigned(">", b.load_atomic(pool.alone_until, "monotonic", 8), began)
    with b.if_then(b.and_(stalled, b.not_(noted))):    # (once per job)
        backoff = b.load_atomic(pool.backoff, "monotonic", 8)
        backoff = b.select(b.icmp_unsigned("<", backoff, _c(I64, ALONE_MIN)),
                           _c(I64, ALONE_MIN), backoff)
        b.store_atomic(b.add(now, backoff), pool.alone_until, "monotonic", 8)
        doubled = b.shl(backoff, _c(I64, 1))
        b.store_atomic(b.select(b.icmp_unsigned(">", doubled, _c(I64, ALONE_MAX)),
                                _c(I64, ALONE_MAX), doubled), pool.backoff, "monotonic", 8)
    with b.if_else(b.icmp_unsigned(">", waited, _c(I64, SPIN_CYCLES))) as (then, otherwise):
        with then:
            b.call(pool.sched_yield, [])
        with otherwise:
            pool.relax(b)
    b.branch(wait)
    b.position_at_end(finished)
    with b.if_then(b.icmp_unsigned("<=", b.load_atomic(pool.alone_until, "monotonic", 8),
                                   began)):        # shared without a stall
        b.store_atomic(_c(I64, ALONE_MIN), pool.backoff, "monotonic", 8)
    b.store_atomic(_c(I32, 0), pool.busy, "release", 4)
    b.ret_void()


def _worker(m, pool):
    """``nbjax_pool_worker(index)``: take chunks of every job, forever."""
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64]), WORKER)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    first_seen = b.load_atomic(pool.generation, "acquire", 4)
    b.atomic_rmw("add", pool.ready, _c(I32, 1), "release")
    idle, wait = fn.append_basic_block("idle"), fn.append_basic_block("wait")
    work, sleep = fn.append_basic_block("work"), fn.append_basic_block("sleep")
    pausing = fn.append_basic_block("pause")
    b.branch(idle)

    b.position_at_end(idle)                      # a job done: note when the wait began
    seen = b.phi(I32, "seen")
    seen.add_incoming(first_seen, entry)
    began = b.call(pool.clock, [])
    b.branch(wait)

    b.position_at_end(wait)
    now = b.load_atomic(pool.generation, "acquire", 4)
    spinning = b.append_basic_block("spin")
    b.cbranch(b.icmp_unsigned("!=", now, seen), work, spinning)
    b.position_at_end(spinning)
    waited = b.sub(b.call(pool.clock, []), began)
    b.cbranch(b.icmp_unsigned("<", waited, _c(I64, IDLE_SPIN_CYCLES)), pausing, sleep)
    b.position_at_end(pausing)
    pool.relax(b)
    b.branch(wait)

    b.position_at_end(sleep)                     # until a job's number changes
    b.atomic_rmw("add", pool.sleepers, _c(I32, 1), "seq_cst")
    with b.if_then(b.icmp_unsigned("==", b.load_atomic(pool.generation, "seq_cst", 4), seen)):
        pool.futex(b, _FUTEX_WAIT, seen)
    b.atomic_rmw("sub", pool.sleepers, _c(I32, 1), "seq_cst")
    b.branch(wait)

    b.position_at_end(work)
    pool.take_chunks(b, now)
    seen.add_incoming(now, b.block)
    b.branch(idle)


def define(m):
    """Add the pool's functions and globals to the support module ``m``."""
    pool = _Pool(m)
    _parallel_for(m, pool)
    _worker(m, pool)


# --- the threads ---------------------------------------------------------------------------

_lock = threading.Lock()
_started_in = None   # the process that started the workers


def start(address, threads):
    """Start ``threads - 1`` workers (once per process), given ``address``, that of a
    support module symbol by name. Jobs are posted to them only once all have begun to
    wait: a worker that missed the first would never take part in it."""
    global _started_in
    if threads < 2 or _started_in == os.getpid() or not supported():
        return
    with _lock:
        if _started_in == os.getpid():
            return
        _started_in = os.getpid()
        ready = ctypes.c_int32.from_address(address(READY))
        ready.value = 0
        run = ctypes.CFUNCTYPE(None, ctypes.c_int64)(address(WORKER))
        for k in range(1, threads):
            threading.Thread(target=run, args=(k,), name=f"nbjax-native-{k}",
                             daemon=True).start()
        while ready.value < threads - 1:
            time.sleep(0.0001)
        ctypes.c_int32.from_address(address(WORKERS)).value = threads - 1
        if hasattr(os, "register_at_fork") and _forget_after_fork.address is None:
            _forget_after_fork.address = address
            os.register_at_fork(after_in_child=_forget_after_fork)


def _forget_after_fork():
    """In a child process, which has none of the workers: kernels run on the calling
    thread until ``start`` is called again."""
    for name in (WORKERS, "nbjax_pool_busy"):
        ctypes.c_int32.from_address(_forget_after_fork.address(name)).value = 0


_forget_after_fork.address = None

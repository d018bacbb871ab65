"""The optimiser processes: LLVM's passes and code generation in workers, so that what
llvmlite leaks per module (``pipeline.py``) is left in processes we restart, and so that the
parts of a large module (``partition``) are compiled on several cores at once.

``OptimiserPool.compile_module(ir_text, cpu, features, light)`` cuts the module into parts
(the functions of each light tier, ``light``: {name: tier}, in parts of their own:
``pipeline``), has the workers compile them (each worker takes the next part as soon as it
is free) and returns the parts' (optimised IR texts, object codes), or None when the workers
cannot be used (none could start, one died, or LLVM reported an error): the caller then
compiles in this process, as before. The workers are started on first use and each is
replaced every ``MODULES_PER_WORKER`` modules.
"""

import atexit
import contextlib
import json
import logging
import selectors
import subprocess
import sys
import threading

from . import partition, pipeline

log = logging.getLogger(__name__)

MODULES_PER_WORKER = 256    # ~70 KB each: a worker grows by ~18 MB before it is replaced
MAX_WORKERS = 4             # LLVM's memory per worker (~60 MB) bounds it, not the cores
PARTS_PER_WORKER = 3        # smaller parts balance the workers' loads, each costs a message


class OptimiserProcess:
    """One worker: a request is sent, then its reply received (``compile_module`` does
    both); any failure stops it, and the next request starts a new one."""

    def __init__(self):
        self._worker = None
        self._served = 0
        self._broken = False   # the worker cannot start here: stop trying

    def compile_module(self, ir_text, cpu, features, light=None):
        """(optimised IR, object code) of ``ir_text`` (by the light tier ``light`` if
        given), or None."""
        if not self.send(ir_text, cpu, features, light):
            return None
        try:
            return self.receive()
        except BaseException:
            self.stop()   # interrupted mid-request: its replies would be out of step
            raise

    def send(self, ir_text, cpu, features, light=None):
        """Hand ``ir_text`` to the worker; False when there is no worker to take it."""
        worker = self._running(cpu, features)
        if worker is None:
            return False
        header = json.dumps({"cpu": cpu, "features": features, "light": light}).encode()
        try:
            pipeline.write_message(worker.stdin, header, ir_text.encode())
        except OSError as e:
            self._failed(e)
            return False
        return True

    def receive(self):
        """The reply to the request sent: (optimised IR, object code), or None."""
        try:
            reply = pipeline.read_message(self._worker.stdout)
        except OSError as e:
            reply, why = None, e
        else:
            why = "it exited"
        if reply is None:
            self._failed(why)
            return None
        self._served += 1
        if reply[0] != b"ok":
            log.debug("nbjax optimiser process: %s", reply[1].decode())
            return None
        return reply[1].decode(), reply[2]

    def start(self, cpu, features):
        """Start the worker (for ``cpu``/``features``) if it is not running. The pool starts
        them all on its first module, so that one with fewer parts than workers (a
        benchmark's warm-up) does not leave the start of the others to the next module's
        time."""
        self._running(cpu, features)

    def fileno(self):
        return self._worker.stdout.fileno()

    def _failed(self, why):
        log.warning("nbjax: the optimiser process failed (%s); compiling in-process", why)
        self.stop()

    def _running(self, cpu, features):
        if self._broken:
            return None
        if self._worker is not None and self._served >= MODULES_PER_WORKER:
            self.stop()
        if self._worker is None:
            try:
                self._worker = subprocess.Popen(
                    [sys.executable, pipeline.__file__, json.dumps([cpu, features])],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            except OSError as e:
                log.warning("nbjax: cannot start the optimiser process (%s); compiling "
                            "in-process", e)
                self._broken = True
                return None
            self._served = 0
        return self._worker

    def stop(self):
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()
            worker.wait()
            for stream in (worker.stdin, worker.stdout):
                with contextlib.suppress(OSError):  # unsent bytes to a dead worker
                    stream.close()


class OptimiserPool:
    """Up to ``workers`` optimiser processes sharing the parts of each module."""

    def __init__(self, workers):
        self._lock = threading.Lock()
        self.processes = [OptimiserProcess() for _ in range(max(1, workers))]
        atexit.register(self.close)

    def compile_module(self, ir_text, cpu, features, light=None):
        """(optimised IR texts, object codes) of the parts of ``ir_text``, or None; the
        functions of ``light`` ({name: tier}) by their light tier."""
        parts = partition.split_by_tier(ir_text, PARTS_PER_WORKER * len(self.processes),
                                        light)
        with self._lock:
            for process in self.processes:
                process.start(cpu, features)
            try:
                replies = self._compile_parts(parts, cpu, features)
            except BaseException:
                self._stop()    # interrupted: the busy workers' replies are out of step
                raise
        if replies is None or None in replies:
            return None
        return [r[0] for r in replies], [r[1] for r in replies]

    def _compile_parts(self, parts, cpu, features):
        """Each part's reply (None for a part that failed), the parts handed to whichever
        worker is free; None when no worker could take any."""
        pending = list(enumerate(parts))
        replies = [None] * len(parts)
        failed = False
        with selectors.DefaultSelector() as busy:
            def hand_out(process):
                while pending and not failed:
                    index, (text, tier) = pending[0]
                    if not process.send(text, cpu, features, tier):
                        return
                    pending.pop(0)
                    busy.register(process, selectors.EVENT_READ, index)
                    return
            for process in self.processes:
                hand_out(process)
            if not busy.get_map():
                return None
            while busy.get_map():
                for key, _ in busy.select():
                    busy.unregister(key.fileobj)
                    replies[key.data] = key.fileobj.receive()
                    failed = failed or replies[key.data] is None
                    hand_out(key.fileobj)
        return None if pending else replies

    def _stop(self):
        for process in self.processes:
            process.stop()

    def close(self):
        with self._lock:
            self._stop()

"""The optimiser process: LLVM's passes and code generation in a worker, so that what
llvmlite leaks per module (``pipeline.py``) is left in a process we restart.

``compile_module(ir_text, cpu, features)`` sends a module to the worker and returns its
(optimised IR, object code), or None when the worker cannot be used (it failed to start,
died, or LLVM reported an error): the caller then compiles in this process, as before.
The worker is started on first use and replaced every ``MODULES_PER_WORKER`` modules.
"""

import atexit
import contextlib
import json
import logging
import subprocess
import sys
import threading

from . import pipeline

log = logging.getLogger(__name__)

MODULES_PER_WORKER = 256    # ~70 KB each: a worker grows by ~18 MB before it is replaced


class OptimiserProcess:
    def __init__(self):
        self._lock = threading.Lock()
        self._worker = None
        self._served = 0
        self._broken = False   # the worker cannot start here: stop trying

    def compile_module(self, ir_text, cpu, features):
        with self._lock:
            if self._broken:
                return None
            try:
                return self._ask(ir_text, cpu, features)
            except BaseException:
                self._stop()   # interrupted or dead mid-request: its replies are out of step
                raise

    def _ask(self, ir_text, cpu, features):
        worker = self._running()
        if worker is None:
            return None
        header = json.dumps({"cpu": cpu, "features": features}).encode()
        try:
            pipeline.write_message(worker.stdin, header, ir_text.encode())
            reply = pipeline.read_message(worker.stdout)
        except OSError as e:
            reply, why = None, e
        else:
            why = "it exited"
        if reply is None:
            log.warning("nbjax: the optimiser process failed (%s); compiling in-process", why)
            self._stop()
            return None
        self._served += 1
        if reply[0] != b"ok":
            log.debug("nbjax optimiser process: %s", reply[1].decode())
            return None
        return reply[1].decode(), reply[2]

    def _running(self):
        if self._worker is not None and self._served >= MODULES_PER_WORKER:
            self._stop()
        if self._worker is None:
            try:
                self._worker = subprocess.Popen([sys.executable, pipeline.__file__],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            except OSError as e:
                log.warning("nbjax: cannot start the optimiser process (%s); compiling "
                            "in-process", e)
                self._broken = True
                return None
            self._served = 0
        return self._worker

    def _stop(self):
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()
            worker.wait()
            for stream in (worker.stdin, worker.stdout):
                with contextlib.suppress(OSError):  # unsent bytes to a dead worker
                    stream.close()

    def close(self):
        with self._lock:
            self._stop()


_process = OptimiserProcess()
atexit.register(_process.close)
compile_module = _process.compile_module

"""Steps a native loop cannot run itself, run by calling back into Python from inside it.

A loop body holding one equation the CPU target cannot compile (a sort, a product of
vectors, an op on complex numbers...) still compiles into one native loop: at that step the
native code calls a ``HostStep`` through a C function pointer, with the addresses of the
equation's operands and results; the host step views them as NumPy arrays, runs the
primitive's reference implementation (as a top-level reference step does) and writes the
results in place. The call costs microseconds, where sending the whole loop to the reference
backend costs the Python evaluation of every equation of every iteration.

A kernel in native code (a loop, a whole program) that is large enough to repay splitting
it between the cores (``runtime.splits``) is called the same way (a ``SplitCall``): Python hands its chunks to
the worker threads, which call it natively (``runtime.run_split``), as for a top-level
kernel; a few tens of microseconds per call, next to a millisecond of work at least.

A host step returns 0, or 1 after an exception (a ``KeyboardInterrupt`` too), which it keeps
for the caller of the native function to raise once that function has returned: an
exception cannot cross native frames. Native code calls back on the thread that called it,
and one program may run on several threads at once (pmap's devices, user threads), so the
exception is kept per thread.
"""

import ctypes
import dataclasses
import threading

import numpy as np

from ...config import config
from ...core import EvalTrace, set_current_trace, to_numpy
from ...core.source_info import warn_at_user_line
from ...lax.callback import compiled_program
from . import runtime

SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


@dataclasses.dataclass(frozen=True)
class HostCall:
    """What a host step runs: made with the code that calls it, and kept with that code in
    the disk cache of whole programs (a ``HostStep`` is made of it where the code runs)."""
    eqn: object
    warn: bool          # warn, once, that the equation has no kernel
    inside_loop: bool


@dataclasses.dataclass(frozen=True)
class SplitCall:
    """A kernel of the module that a native loop runs on every core: its name and number
    of buffers, its outer extent, the outputs that accumulate over the outer axis
    (``runtime.run_split``'s ``partials``) and the name of the function combining them."""
    kernel: str
    n_pointers: int
    extent: int
    partials: tuple = ()
    combiner: str = None

    def step(self, jit_module):
        return SplitStep(self, jit_module)


def host_step(call, jit_module):
    """The callable of ``call`` (a HostCall or a SplitCall) in the loaded ``jit_module``."""
    return HostStep(call) if isinstance(call, HostCall) else call.step(jit_module)


class _Callback:
    """What native code calls with an array of buffer addresses: ``address`` is the C
    function; an exception is kept, for the calling thread (``take_error``), and reported
    as status 1."""

    def __init__(self):
        self._kept = threading.local()
        self.function = SIGNATURE(self)  # kept alive as long as the step is
        self.address = ctypes.cast(self.function, ctypes.c_void_p).value

    def __call__(self, addresses):
        try:
            self.call(addresses)
            return 0
        except BaseException as e:  # noqa: BLE001  (raised again once the native call returns)
            self._kept.error = e
            return 1

    def take_error(self):
        """The exception this thread's last call raised, if any; forgotten once taken."""
        error = getattr(self._kept, "error", None)
        self._kept.error = None
        return error


class SplitStep(_Callback):
    """A kernel run on every core from inside native code, a loop or a whole program (see
    the module docstring)."""

    def __init__(self, call, jit_module):
        super().__init__()
        self.extent, self.partials, self.n = call.extent, call.partials, call.n_pointers
        self.kernel = jit_module.function(call.kernel, call.n_pointers)
        self.combine = call.combiner and jit_module.function(
            call.combiner, 2 * len(call.partials), bounds=False)

    def call(self, addresses):
        runtime.run_split(self.kernel, [addresses[k] for k in range(self.n)], self.extent,
                          self.partials, self.combine)


class HostStep(_Callback):
    """One equation run by the host on buffers a native function owns; ``address`` is the
    C function to call with an array of the operands' then the results' addresses."""

    def __init__(self, call):
        super().__init__()
        self.eqn, self.warn = call.eqn, call.warn
        self.where = "inside a compiled loop it calls back into Python" if call.inside_loop \
            else "it runs on the reference backend"
        self.buffers = [_Buffer(a.aval) for a in (*call.eqn.invars, *call.eqn.outvars)]

    def call(self, addresses):
        views = [b.view(addresses[k]) for k, b in enumerate(self.buffers)]
        self.run(views[:len(self.eqn.invars)], views[len(self.eqn.invars):])

    def run(self, ins, outs):
        prim = self.eqn.primitive
        if self.warn:
            self.warn = False
            warn_at_user_line(f"nbjax cpu backend: no kernel for {prim.name}; {self.where}")
        with compiled_program():
            if config.debug_nans or config.debug_infs:  # bound, so that the check runs
                with set_current_trace(EvalTrace()):
                    out = prim.bind(*ins, **self.eqn.params)
            else:  # the jaxpr has checked the types: straight to the implementation
                out = prim.impl(*ins, **self.eqn.params)
        for view, value in zip(outs, out if prim.multiple_results else [out]):
            view[...] = np.asarray(to_numpy(value), view.dtype)


class _Buffer:
    """How one operand or result of a host step is seen: a NumPy array over the native
    buffer at an address. A loop passes the same few addresses every iteration (its two
    buffers of each carry), so the arrays made for the last few are kept: making one costs
    more than many an equation."""

    KEEP = 4

    def __init__(self, aval):
        self.dtype, self.shape = np.dtype(aval.dtype), tuple(aval.shape)
        self.bytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.memory = ctypes.c_char * self.bytes
        self.seen = {}

    def view(self, address):
        """The array over ``address`` (valid while the native call that passed it runs;
        an address passed again is live memory again, so its array is reused)."""
        array = self.seen.get(address)
        if array is None:
            array = np.empty(self.shape, self.dtype) if self.bytes == 0 else \
                np.frombuffer(self.memory.from_address(address), self.dtype).reshape(self.shape)
            if len(self.seen) >= self.KEEP:
                self.seen.clear()  # (one call: safe while another thread runs the step)
            self.seen[address] = array
        return array

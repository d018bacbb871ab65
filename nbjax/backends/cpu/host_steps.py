"""Steps a native loop cannot run itself, run by calling back into Python from inside it.

A loop body holding one equation the CPU target cannot compile (a sort, a product of
vectors, an op on complex numbers...) still compiles into one native loop: at that step the
native code calls a ``HostStep`` through a C function pointer, with the addresses of the
equation's operands and results; the host step views them as NumPy arrays, runs the
primitive's reference implementation (as a top-level reference step does) and writes the
results in place. The call costs microseconds, where sending the whole loop to the reference
backend costs the Python evaluation of every equation of every iteration.

A host step returns 0, or 1 after an exception (a ``KeyboardInterrupt`` too), which it keeps
for the caller of the native function to raise once that function has returned: an
exception cannot cross native frames.
"""

import ctypes
import dataclasses

import numpy as np

from ...config import config
from ...core import EvalTrace, set_current_trace, to_numpy
from ...core.source_info import warn_at_user_line

SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


@dataclasses.dataclass(frozen=True)
class HostCall:
    """What a host step runs: made with the code that calls it, and kept with that code in
    the disk cache of whole programs (a ``HostStep`` is made of it where the code runs)."""
    eqn: object
    warn: bool          # warn, once, that the equation has no kernel
    inside_loop: bool


class HostStep:
    """One equation run by the host on buffers a native function owns; ``address`` is the
    C function to call with an array of the operands' then the results' addresses."""

    def __init__(self, call):
        self.eqn, self.warn, self.error = call.eqn, call.warn, None
        self.where = "inside a compiled loop it calls back into Python" if call.inside_loop \
            else "it runs on the reference backend"
        self.buffers = [_Buffer(a.aval) for a in (*call.eqn.invars, *call.eqn.outvars)]
        self.function = SIGNATURE(self)  # kept alive as long as the step is
        self.address = ctypes.cast(self.function, ctypes.c_void_p).value

    def __call__(self, addresses):
        try:
            views = [b.view(addresses[k]) for k, b in enumerate(self.buffers)]
            self.run(views[:len(self.eqn.invars)], views[len(self.eqn.invars):])
            return 0
        except BaseException as e:  # noqa: BLE001  (raised again once the native call returns)
            self.error = e
            return 1

    def run(self, ins, outs):
        prim = self.eqn.primitive
        if self.warn:
            self.warn = False
            warn_at_user_line(f"nbjax cpu backend: no kernel for {prim.name}; {self.where}")
        if config.debug_nans or config.debug_infs:  # bound, so that the check runs
            with set_current_trace(EvalTrace()):
                out = prim.bind(*ins, **self.eqn.params)
        else:  # the jaxpr has checked the types: straight to the implementation
            out = prim.impl(*ins, **self.eqn.params)
        for view, value in zip(outs, out if prim.multiple_results else [out]):
            view[...] = np.asarray(to_numpy(value), view.dtype)

    def take_error(self):
        error, self.error = self.error, None
        return error


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

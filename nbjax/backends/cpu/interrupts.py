"""Ctrl-C (and Jupyter's "interrupt kernel") during a compiled loop.

Python handles SIGINT by setting a flag that the interpreter looks at between bytecodes;
during one native call that runs a whole loop, it never looks. So before such a call
``arm()`` puts ``support``'s handler in front of Python's: on SIGINT it sets
``nbjax_interrupt_flag`` and calls Python's handler as before. Compiled loops read the flag
at every iteration and return early when it is set; ``raise_interrupt()`` then
runs Python's handler (which raises ``KeyboardInterrupt``, or whatever the user installed)
and raises ``KeyboardInterrupt`` in any case: a loop cut short has no result to return.

The handler is re-armed before every call because anyone may install another SIGINT handler
in between (IPython does around each cell); the flags and mask of the handler in place are
kept. Nothing is installed where SIGINT is ignored or left to its default action.
"""

import ctypes
import functools
import os
import signal
import threading
import types

from . import support

_SIGACTION_BYTES = 512  # more than any C library's ``struct sigaction``
_lock = threading.Lock()
_libc = None


def _sigaction():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return _libc.sigaction


def arm():
    """Make the next SIGINT set the interrupt flag too, and clear the flag."""
    words = _words()
    words.flag.value = 0
    if os.name != "posix":
        return
    with _lock:
        sigaction, action = _sigaction(), words.action
        if sigaction(signal.SIGINT, None, action) != 0:
            return
        handler = words.handler
        if handler.value in (None, words.ours, 1):  # SIG_DFL, already ours, SIG_IGN
            return
        words.previous.value = handler.value
        handler.value = words.ours
        sigaction(signal.SIGINT, action, None)


@functools.cache
def _words():
    """What ``arm`` reads and writes, found once (a compiled loop's every call arms: finding
    the support module's symbols again took most of a small loop's call, 10 of 24 us):
    the interrupt flag, our handler's address, the previous handler's slot, and a buffer
    for a ``struct sigaction`` whose first field is the handler (on Linux and macOS)."""
    action = ctypes.create_string_buffer(_SIGACTION_BYTES)
    return types.SimpleNamespace(
        flag=ctypes.c_int32.from_address(support.address(support.INTERRUPT_FLAG)),
        ours=support.address("nbjax_on_sigint"),
        previous=ctypes.c_void_p.from_address(support.address("nbjax_previous_sigint")),
        action=action, handler=ctypes.c_void_p.from_buffer(action))


def raise_interrupt():
    """After a compiled loop returned early: run the pending Python signal handlers, then
    raise ``KeyboardInterrupt`` if they did not raise already."""
    ctypes.pythonapi.PyErr_CheckSignals()
    raise KeyboardInterrupt

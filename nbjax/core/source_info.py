"""Where in the user's code an equation came from, so errors and the notebook can point at it."""

import contextlib
import itertools
import linecache
import os
import sys
import threading
import warnings
from dataclasses import dataclass, field

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class SourceInfo:
    file: str
    line: int
    function: str

    def source_line(self):
        """The text of the line, stripped, or '' when the file cannot be read (e.g. a REPL)."""
        return linecache.getline(self.file, self.line).strip()

    def __str__(self):
        return f"{self.file}:{self.line} ({self.function})"


_INTERNAL = {}   # file name -> whether it is nbjax's (every equation traced asks, ~10 times)


def is_internal(filename):
    known = _INTERNAL.get(filename)
    if known is None:
        known = _INTERNAL[filename] = filename.startswith((_PACKAGE_DIR, "<frozen"))
    return known


def user_frame(skip=1):
    """The innermost stack frame outside nbjax, as a SourceInfo (None if there is none)."""
    frame = sys._getframe(skip)
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    return SourceInfo(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def warn_at_user_line(message, category=UserWarning):
    """``warnings.warn`` attributed to the innermost line of user code on the stack (the call
    of a jitted function, say), where a user can act on it, not to the line inside nbjax
    that noticed the problem."""
    frame, level = sys._getframe(1), 2
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def function_location(fun):
    """A SourceInfo for where ``fun`` is defined (its first line), or None."""
    code = getattr(getattr(fun, "__wrapped__", fun), "__code__", None)
    if code is None:
        return None
    return SourceInfo(code.co_filename, code.co_firstlineno, code.co_name)


# --- provenance: which user-level operation an equation belongs to -------------------------

@dataclass(frozen=True)
class Provenance:
    """Ties together the equations one user-level operation turned into.

    Differentiating ``sin x`` at a line of user code stages forward equations (``sin``,
    ``cos``) and, after transposition, backward ones (``mul``); all carry the same
    Provenance, so the notebook can link a backward equation to the forward one it came from.
    ``phase`` says which half an equation is in.
    """
    primitive: str
    source_info: object
    id: int = field(default_factory=itertools.count().__next__)
    phase: str = "forward"

    def backward(self):
        return Provenance(self.primitive, self.source_info, self.id, "backward")


class _ProvenanceContext(threading.local):
    current = None


_provenance = _ProvenanceContext()


def current_provenance():
    return _provenance.current


@contextlib.contextmanager
def provenance(tag):
    """Tag every equation staged inside the block with ``tag`` (innermost tag wins)."""
    previous = _provenance.current
    _provenance.current = tag
    try:
        yield
    finally:
        _provenance.current = previous

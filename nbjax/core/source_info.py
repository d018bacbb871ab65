"""Where in the user's code an equation came from, so errors and the notebook can point at it."""

import linecache
import os
import sys
from dataclasses import dataclass

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


def _is_internal(filename):
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<frozen")


def user_frame(skip=1):
    """The innermost stack frame outside nbjax, as a SourceInfo (None if there is none)."""
    frame = sys._getframe(skip)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    return SourceInfo(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def function_location(fun):
    """A SourceInfo for where ``fun`` is defined (its first line), or None."""
    code = getattr(getattr(fun, "__wrapped__", fun), "__code__", None)
    if code is None:
        return None
    return SourceInfo(code.co_filename, code.co_firstlineno, code.co_name)

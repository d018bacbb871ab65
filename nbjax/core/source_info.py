"""Where in the user's code an equation came from, so errors and the notebook can point at it."""

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
    """A line of user code. Inside a function being traced it also knows how it was reached:
    ``callers``, the user frames from the traced function's own frame down to the one that
    called this frame, outermost first (each a SourceInfo at its calling line), and
    ``call``, a number (unique in the process) for this call of ``function``, so that two
    calls of one function from one line are told apart. Outside a traced function (eager
    code, the caller of ``make_jaxpr``) ``callers`` is None and ``call`` 0. An equation the
    compiler inlined from a called jaxpr has ``inlined`` instead (``inlined_at``). None of
    these takes part in equality: a SourceInfo names a line."""
    file: str
    line: int
    function: str
    callers: tuple = field(default=None, compare=False, repr=False)
    call: object = field(default=0, compare=False, repr=False)
    inlined: tuple = field(default=None, compare=False, repr=False)

    @property
    def call_path(self):
        """``callers`` and this frame: the nesting of user functions this line runs in,
        from the traced function down; None outside a traced function."""
        if self.inlined is not None:
            return _inlined_path(*self.inlined)
        return None if self.callers is None else self.callers + (self,)

    def __reduce__(self):
        # An inlined equation's info is pickled as what it refers to, so a program loaded
        # from the disk cache (which pickles the traced jaxpr's infos as their places in
        # the new trace) takes its line and call path from the new trace.
        if self.inlined is not None:
            return _inlined_info, self.inlined
        return SourceInfo, (self.file, self.line, self.function, self.callers, self.call)

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
    """The innermost stack frame outside nbjax, as a SourceInfo (None if there is none);
    while a function is being traced, with its call path (``SourceInfo.callers``).

    nbjax's own code tracing a function while a transformation re-binds an equation (a
    scan's JVP rule tracing the body's JVP, say) has no user frame inside that trace: what
    it stages there comes from the equation being re-bound (``restaging``)."""
    frame = sys._getframe(skip)
    # (``is_internal`` inlined: every equation traced walks the ~10-30 nbjax frames between
    # its ``bind`` and the user's line, and a call per frame was most of that walk's cost)
    while frame is not None:
        code = frame.f_code
        internal = _INTERNAL.get(code.co_filename)
        if internal is None:
            internal = is_internal(code.co_filename)
        if not internal:
            break
        if code is _ENTRY and _tracing.around[-1] is not None:
            return _tracing.around[-1]
        frame = frame.f_back
    if frame is None:
        return None
    frames = _tracing.frames
    if frames is None:
        return SourceInfo(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    known = frames.get(id(frame))
    if known is None:
        known = _enter(frame)
    # (by the instruction's offset: reading ``f_lineno`` works the line out from it)
    at_offset = known[4]
    info = at_offset.get(frame.f_lasti)
    if info is None:
        info = at_offset[frame.f_lasti] = _at_line(known, frame.f_lineno)
    return info


# --- call paths: the user frames inside the function being traced --------------------------
#
# ``call_traced`` runs the function a trace records; its frame on the stack marks where the
# user's frames of that trace start (anything above it, IPython's or a test runner's, is
# not in any call path). Equations are traced often, so a user frame's SourceInfo is made
# once per line it runs and kept with the frame: the next equation of that line costs a
# dictionary lookup, and a frame's callers are worked out once (they cannot change while it
# runs). The frames are held until the outermost trace ends, so that no new frame reuses a
# finished one's id (two calls of ``layer`` stay two calls).

class _Tracing(threading.local):
    depth = 0      # traces in progress in this thread
    # while tracing: id(frame) -> (frame, call number, callers, {line: info},
    # {instruction offset: info})
    frames = None
    equation = None  # the SourceInfo of the equation being re-bound (``restaging``), if any
    around = None    # per trace in progress, the ``equation`` when it began, innermost last


_tracing = _Tracing()
_calls = itertools.count(1)


def call_traced(fun, args):
    """``fun(*args)``, the function a trace records: the user frames it runs are those its
    equations' call paths hold. (An equation a transformation re-binds around it, if any,
    is the source only of what nbjax's own code stages in it: ``user_frame``.)"""
    if not _tracing.depth:
        _tracing.frames, _tracing.around = {}, []
    _tracing.depth += 1
    _tracing.around.append(_tracing.equation)
    _tracing.equation = None
    try:
        return fun(*args)
    finally:
        _tracing.equation = _tracing.around.pop()
        _tracing.depth -= 1
        if not _tracing.depth:
            _tracing.frames = _tracing.around = None


def equation_source(skip=1):
    """The source of an equation staged now: that of the equation a transformation is
    re-binding (``restaging``), else the user's line on the stack (``user_frame``)."""
    return _tracing.equation or user_frame(skip + 1)


class restaging:
    """``with restaging(eqns) as each:`` for an interpreter of a jaxpr's equations
    (``eval_jaxpr``, a transpose): ``for eqn in each:`` makes ``eqn`` the source of what is
    staged while it is bound. A transformed equation comes from its original's line and call
    path, as JAX's do; walking the stack instead would find the line that called the
    transformation, and costs a walk over nbjax's frames per equation."""

    __slots__ = ("eqns", "previous")

    def __init__(self, eqns):
        self.eqns = eqns

    def __enter__(self):
        self.previous = _tracing.equation
        return self._each()

    def _each(self):
        state = _tracing
        for eqn in self.eqns:
            state.equation = eqn.source_info
            yield eqn

    def __exit__(self, *exc_info):
        _tracing.equation = self.previous


_ENTRY = call_traced.__code__


def _at_line(known, line):
    """The SourceInfo of a recorded frame (``_Tracing.frames``) at ``line``."""
    frame, call, callers, infos, _ = known
    info = infos.get(line)
    if info is None:
        code = frame.f_code
        info = infos[line] = SourceInfo(code.co_filename, line, code.co_name, callers, call)
    return info


def _enter(frame):
    """Record ``frame`` and the user frames above it not yet recorded, up to the first
    recorded one, or the trace's entry (the traced function's frame has callers ()), or
    the top of the stack (frames no trace runs: callers None). Returns ``frame``'s record."""
    new, callers, above = [frame], None, frame.f_back
    while above is not None:
        if above.f_code is _ENTRY:
            callers = ()
            break
        if not is_internal(above.f_code.co_filename):
            known = _tracing.frames.get(id(above))
            if known is not None:
                callers = _at_line(known, above.f_lineno).call_path
                break
            new.append(above)
        above = above.f_back
    for f in reversed(new):  # outermost first: calls are numbered in the order they began
        known = _tracing.frames[id(f)] = (f, next(_calls), callers, {}, {})
        if callers is not None and f is not frame:
            callers = _at_line(known, f.f_lineno).call_path
    return known


def inlined_at(site):
    """A function giving the SourceInfo of an equation of one copy of a called jaxpr (a
    jit's) inlined at a call whose equation's source is ``site``: the same line, its call
    path the call's continued by the callee's, each call on the callee's path numbered
    ``(copy, call)`` (two copies of one callee are two sets of calls). The new SourceInfo
    refers to the callee's and the call's (``inlined``) rather than copying their paths,
    so the program cache, which pickles those two by their places in the traced jaxpr,
    gives a program it loads the current trace's paths."""
    copy = next(_calls)

    def relocate(info):
        return info if info is None or site is None else _inlined_info(info, site, copy)
    return relocate


def _inlined_info(origin, site, copy):
    return SourceInfo(origin.file, origin.line, origin.function, inlined=(origin, site, copy))


def _inlined_path(origin, site, copy):
    outer, inner = site.call_path, origin.call_path
    if outer is None or inner is None:
        return inner
    path = outer
    for frame in inner:
        path += (SourceInfo(frame.file, frame.line, frame.function, path, (copy, frame.call)),)
    return path


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


class provenance:
    """``with provenance(tag):`` tags every equation staged inside the block with ``tag``
    (innermost tag wins). (A class, as ``trace.set_current_trace`` is: autodiff enters one
    per equation.)"""

    __slots__ = ("tag", "previous")

    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        self.previous = _provenance.current
        _provenance.current = self.tag

    def __exit__(self, *exc_info):
        _provenance.current = self.previous

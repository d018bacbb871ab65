"""Traces and tracers: how ``bind`` reaches the transformation currently in charge.

There is one *current trace*. Evaluation is the outermost (``EvalTrace``, in ``eager.py``: it
makes Arrays, which are defined on top of this module, so it registers itself here). A transformation
runs the user's function with its own trace made current, and that trace's parent is whatever
was current before; its rules compute by binding in the parent. A tracer belongs to one trace;
when a transformation ends it invalidates its trace, so a tracer that escaped is recognised
the next time it is used.
"""

import contextlib
import operator
import threading

import numpy as np

from . import dtypes
from .abstract import ShapedArray
from .errors import (ConcretizationTypeError, TracerArrayConversionError,
                     TracerBoolConversionError, TracerIntegerConversionError,
                     UnexpectedTracerError)
from .source_info import user_frame


class Trace:
    """Base class: a transformation's way of processing primitives."""

    def __init__(self, parent, description="a transformation"):
        self.parent = parent
        self.description = description  # e.g. "make_jaxpr of f at file.py:3"
        self.is_valid = True

    def process_primitive(self, primitive, args, params):
        raise NotImplementedError

    def invalidate(self):
        self.is_valid = False


class _Context(threading.local):
    def __init__(self):
        self.trace = None  # the outermost trace, made on first use in each thread


# The thread's current trace is ``context.trace`` (None until first used in the thread: see
# ``current_trace``). Code that must spend as little as possible on asking reads it directly
# (jit's last-call shortcut compares it with the trace it saw before).
context = _Context()
_outermost = []  # the class of the outermost trace (``eager.EvalTrace``, registered there)


def set_outermost_trace(trace_class):
    """Make ``trace_class()`` the trace every thread starts with."""
    _outermost[:] = [trace_class]


def current_trace():
    trace = context.trace  # (one read of the thread's state: a jitted call makes one)
    if trace is None:
        trace = context.trace = _outermost[0]()
    return trace


class set_current_trace:
    """``with set_current_trace(trace):`` makes ``trace`` current for the block. (A class
    rather than a ``contextlib`` generator: transformations enter one for nearly every
    equation they process, and a generator costs several times as much to enter.)"""

    __slots__ = ("trace", "previous")

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.previous = current_trace()
        context.trace = self.trace
        return self.trace

    def __exit__(self, *exc_info):
        context.trace = self.previous


@contextlib.contextmanager
def new_trace(make_trace):
    """Make ``make_trace(parent)`` current for a block and invalidate it afterwards."""
    trace = make_trace(current_trace())
    try:
        with set_current_trace(trace):
            yield trace
    finally:
        trace.invalidate()


def check_live(x):
    """Raise UnexpectedTracerError if ``x`` is a tracer whose transformation has ended."""
    if isinstance(x, Tracer) and not x._trace.is_valid:
        raise UnexpectedTracerError(
            f"Encountered an unexpected tracer {x.aval.str_short()}: it was created by "
            f"{x._trace.description}, which has already finished. A tracer escaped its "
            "transformation, e.g. by being stored in a global or a closure, or returned in an "
            "auxiliary output. Return it as an output of the transformed function instead.")


def _concretization_message(tracer, what):
    where = user_frame(3)
    at = ""
    if where is not None:
        at = f"\nThe problem arose at {where}"
        src = where.source_line()
        if src:
            at += f":\n    {src}"
    return (f"{what} of traced array with shape {tracer.aval.str_short()}.\n"
            f"The value was traced by {tracer._trace.description}, so it has no concrete "
            f"value here.{at}\n"
            "Python control flow (`if`, `while`, `int(x)`) on a traced value cannot be traced. "
            "Use lax.cond / lax.while_loop / jnp.where for value-dependent control flow, or "
            "mark the argument static (static_argnums) if it does not change between calls.")


class Tracer:
    """A stand-in for an array inside a transformation; its trace gives it meaning.

    Arithmetic operators and array methods are attached by ``nbjax.numpy`` (they are the
    same for tracers and arrays), so this core class stays free of NumPy semantics.
    """

    __array_priority__ = 1000
    __slots__ = ("_trace", "__weakref__")

    def __init__(self, trace):
        self._trace = trace

    @property
    def aval(self):
        raise NotImplementedError

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of unsized object")
        return self.aval.shape[0]

    def __iter__(self):
        if not self.aval.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.aval.shape[0]))

    def to_concrete_value(self):
        """The value this tracer stands for where it is known while tracing, else None: a
        JVP's primal is (``grad(lambda x: x * int(x))`` works, as in JAX), a staged or
        batched value is not."""
        return None

    # As in JAX: ``bool``, ``int`` and ``operator.index`` take a known value; ``float``
    # and ``complex`` never do. The checks of shape and dtype come before the error about
    # tracing, and raise what NumPy would.
    def __bool__(self):
        value = self.to_concrete_value()
        if value is not None:
            return bool(value)
        if self.aval.size != 1:
            raise ValueError(
                "The truth value of an empty array is ambiguous. Use `array.size > 0` to check "
                "that an array is not empty." if self.aval.size == 0 else
                "The truth value of an array with more than one element is ambiguous. Use "
                "a.any() or a.all()")
        raise TracerBoolConversionError(
            _concretization_message(self, "Attempted boolean conversion"))

    def __index__(self):
        value = self.to_concrete_value()
        if value is not None:
            return operator.index(value)
        if self.aval.shape or not dtypes.is_int(self.aval.dtype):
            raise TypeError("Only integer scalar arrays can be converted to a scalar index.")
        raise TracerIntegerConversionError(
            _concretization_message(self, "The __index__() method was called"))

    def __int__(self):
        value = self.to_concrete_value()
        if value is not None:
            return int(value)
        self._check_scalar()
        raise ConcretizationTypeError(_concretization_message(self, "Attempted int conversion"))

    def __float__(self):
        self._check_scalar()
        raise ConcretizationTypeError(_concretization_message(self, "Attempted float conversion"))

    def __complex__(self):
        self._check_scalar()
        raise ConcretizationTypeError(
            _concretization_message(self, "Attempted complex conversion"))

    def _check_scalar(self):
        if self.aval.ndim:
            raise TypeError("Only scalar arrays can be converted to Python scalars; "
                            f"got arr.ndim={self.aval.ndim}")

    def item(self, *args):
        raise ConcretizationTypeError(_concretization_message(self, "Attempted item()"))

    def tolist(self):
        raise ConcretizationTypeError(_concretization_message(self, "Attempted tolist()"))

    def tobytes(self, order="C"):
        raise ConcretizationTypeError(_concretization_message(self, "Attempted tobytes()"))

    def __array__(self, *args, **kwargs):
        raise TracerArrayConversionError(
            f"The numpy.ndarray conversion method __array__() was called on a traced array "
            f"with shape {self.aval.str_short()} (traced by {self._trace.description}). "
            "NumPy functions cannot run on traced values: use nbjax.numpy instead of numpy.")

    def __setitem__(self, idx, value):
        raise TypeError(
            "nbjax arrays are immutable and do not support in-place item assignment. Instead "
            "of x[idx] = y, use x = x.at[idx].set(y).")

    __hash__ = None

    def __repr__(self):
        """``JitTracer(float32[3])``, ``VmapTracer(aval=..., batched=...)``: each kind of
        tracer prints as JAX's of its transformation does (``print(x)`` inside one)."""
        return f"{type(self).__name__}<{self.aval}>"


def short_repr(x):
    """How a tracer prints a value it holds: a tracer by its ``repr``, an array as ``str``
    prints it (``[1. 2.]``), as JAX's do."""
    return repr(x) if isinstance(x, Tracer) else str(x)


# --- abstract values of any value ----------------------------------------------------------

_python_scalars = (bool, int, float, complex)


def is_python_scalar(x):
    """A Python bool/int/float/complex, which is weakly typed; NumPy scalars (np.float64
    subclasses float) are not."""
    return type(x) in _python_scalars


def get_aval(x):
    """The ShapedArray of an array, tracer, NumPy value or Python scalar."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if is_python_scalar(x):
        dtype, weak = dtypes.python_scalar_dtype(x)
        return ShapedArray((), dtype, weak)
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype), False)
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid nbjax type")


def valid_value(x):
    return isinstance(x, (Tracer, np.ndarray, np.generic) + _python_scalars) or \
        isinstance(getattr(x, "aval", None), ShapedArray)

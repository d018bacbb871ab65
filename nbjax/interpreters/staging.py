"""The staging trace: run a Python function on tracers and record a jaxpr of what it did.

Values from outside the function (closed-over arrays, or tracers of an enclosing
transformation) become constvars; scalar constants are written into equations as literals.
"""

import numpy as np

from ..core import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Trace, Tracer, Var, get_aval,
                    new_trace)
from ..core.array import Array
from ..core.source_info import (call_traced, current_provenance, equation_source,
                                 function_location)


class JaxprTracer(Tracer):
    # (``_var``, not ``var``: a tracer answers to the array methods, ``x.var()`` included)
    __slots__ = ("_var",)

    def __init__(self, trace, var):
        self._trace, self._var = trace, var

    @property
    def aval(self):
        return self._var.aval

    def __repr__(self):
        return f"JitTracer({self.aval})"


class JaxprTrace(Trace):
    """Records equations instead of computing; each tracer stands for a jaxpr variable."""

    partial = False  # it records only what is unknown (``partial_eval.PartialEvalTrace``)

    def __init__(self, parent, description):
        super().__init__(parent, description)
        self.invars, self.eqns = [], []
        self.constvars, self.consts = [], []
        self._const_ids = {}  # id(value) -> constvar, so a closed-over value appears once

    def new_arg(self, aval):
        var = Var(aval)
        self.invars.append(var)
        return JaxprTracer(self, var)

    def to_atom(self, x):
        """The jaxpr atom for ``x``: its own variable, a literal, or a new constvar."""
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x._var
        aval = get_aval(x)
        if not isinstance(x, Tracer) and aval.shape == ():
            return Literal(x, aval)
        key = id(x)
        if key not in self._const_ids:
            var = Var(aval)
            self._const_ids[key] = var
            self.constvars.append(var)
            self.consts.append(x)
        return self._const_ids[key]

    def process_primitive(self, primitive, args, params):
        invars = [a._var if type(a) is JaxprTracer and a._trace is self else self.to_atom(a)
                  for a in args]  # (``to_atom``'s first case inline: most operands)
        out_avals = primitive.abstract_eval(*[v.aval for v in invars], **params)
        if primitive.multiple_results:
            outvars = [Var(a) for a in out_avals]
            outs = [JaxprTracer(self, v) for v in outvars]
        else:
            outvars = [Var(out_avals)]
            outs = JaxprTracer(self, outvars[0])
        self.eqns.append(JaxprEqn(invars, outvars, primitive, params, equation_source(2),
                                  current_provenance()))
        return outs

    def to_jaxpr(self, outs):
        outvars = [self.to_atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        return jaxpr, list(self.consts)


def describe(fun, transformation):
    """'make_jaxpr of f at file.py:3', for error messages about this trace's tracers."""
    where = function_location(fun)
    name = getattr(fun, "__name__", type(fun).__name__)
    return f"{transformation} of {name}" + (f" at {where.file}:{where.line}" if where else "")


def trace_to_jaxpr(fun, in_avals, description="make_jaxpr"):
    """Trace ``fun`` (flat list in, flat list out) on abstract inputs.

    Returns ``(jaxpr, consts)``; the consts may be tracers of enclosing transformations.
    The equations' source infos hold their call paths from ``fun`` down (``call_traced``).
    """
    with new_trace(lambda parent: JaxprTrace(parent, description)) as trace:
        args = [trace.new_arg(a) for a in in_avals]
        outs = call_traced(fun, args)
        return trace.to_jaxpr(outs)


def trace_to_closed_jaxpr(fun, in_avals, description="make_jaxpr"):
    jaxpr, consts = trace_to_jaxpr(fun, in_avals, description)
    return ClosedJaxpr(jaxpr, consts)


def convert_constvars(jaxpr):
    """Turn constvars into leading invars (closure conversion, for control-flow bodies)."""
    return Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns)


def is_array_value(x):
    return isinstance(x, (Tracer, Array, np.ndarray, np.generic))

"""Partial evaluation: compute what is known now, stage what is not into a jaxpr.

Running a JVP whose tangent inputs are *unknown* (tracers of a PartialEvalTrace) computes the
primal outputs at once and records the tangent computation, which is linear in the tangents,
as a jaxpr. That is ``linearize``; transposing the jaxpr gives reverse mode (transpose.py).
The known values the linear jaxpr needs (``cos x`` for the tangent of ``sin x``) become its
constvars: the *residuals* carried from the forward pass to the backward one.
"""

from ..core import dtypes, get_aval, new_trace, set_current_trace
from .ad import Zero, instantiate, jvp_flat, tangent_aval
from .staging import JaxprTrace, JaxprTracer


class PartialEvalTrace(JaxprTrace):
    """Stages an operation only if one of its operands is unknown; computes it otherwise."""

    def is_unknown(self, x):
        return isinstance(x, JaxprTracer) and x._trace is self

    def process_primitive(self, primitive, args, params):
        if not any(map(self.is_unknown, args)):
            with set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        return super().process_primitive(primitive, args, params)


def linearize_flat(fun, primals, description="linearize"):
    """``fun``'s primal outputs and its linear (tangent) map as ``(jaxpr, residuals)``.

    The jaxpr takes one tangent per primal input (integer inputs get float0 tangents, which
    are symbolic zeros) and returns one tangent per output.
    """
    with new_trace(lambda parent: PartialEvalTrace(parent, description)) as trace:
        tangents = []
        for p in primals:
            aval = tangent_aval(get_aval(p))
            arg = trace.new_arg(aval)  # float0 tangents stay symbolic zeros inside the JVP
            tangents.append(Zero(aval) if aval.dtype == dtypes.float0 else arg)
        primals_out, tangents_out = jvp_flat(fun, primals, tangents, description)
        tangents_out = [instantiate(t) for t in tangents_out]
        jaxpr, residuals = trace.to_jaxpr(tangents_out)
    return primals_out, jaxpr, residuals

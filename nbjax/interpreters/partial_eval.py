"""Partial evaluation: compute what is known now, stage what is not into a jaxpr.

Running a JVP whose tangent inputs are *unknown* (tracers of a PartialEvalTrace) computes the
primal outputs at once and records the tangent computation, which is linear in the tangents,
as a jaxpr. That is ``linearize``; transposing the jaxpr gives reverse mode (transpose.py).
The known values the linear jaxpr needs (``cos x`` for the tangent of ``sin x``) become its
constvars: the *residuals* carried from the forward pass to the backward one.
"""

from ..core import (ClosedJaxpr, dtypes, eval_closed_jaxpr, get_aval, new_trace,
                   set_current_trace)
from .ad import Zero, instantiate, jvp_flat, tangent_aval
from .staging import JaxprTrace, JaxprTracer, convert_constvars, trace_to_jaxpr


class PartialEvalTrace(JaxprTrace):
    """Stages an operation only if one of its operands is unknown; computes it otherwise."""

    partial = True

    def is_unknown(self, x):
        return isinstance(x, JaxprTracer) and x._trace is self

    def process_primitive(self, primitive, args, params):
        unknowns = [self.is_unknown(a) for a in args]
        if not any(unknowns):
            with set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        rule = primitive.rules.get("partial_eval")
        if rule is not None:
            return rule(self, args, unknowns, **params)
        return self.stage(primitive, args, params)

    def stage(self, primitive, args, params):
        """Record the operation in the jaxpr of unknowns."""
        return super().process_primitive(primitive, args, params)

    def compute_known(self, primitive, args, params):
        """Compute an operation whose operands are all known, in the parent trace."""
        with set_current_trace(self.parent):
            return primitive.bind(*args, **params)

    def evaluate_known(self, closed, *args):
        """Run a ClosedJaxpr whose operands are all known, in the parent trace."""
        with set_current_trace(self.parent):
            return eval_closed_jaxpr(closed, *args)


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


def partial_eval_jaxpr(closed, unknowns, instantiate=False):
    """Split a closed jaxpr into the part computable from known inputs and the rest.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` takes the known inputs and
    returns the known outputs followed by ``num_res`` residuals; ``unknown`` takes the
    residuals followed by the unknown inputs and returns the unknown outputs. Outputs marked
    in ``instantiate`` are made unknown even if computable. Used by the rules of control-flow
    primitives (a scan's forward pass keeps the residuals its backward pass needs).
    """
    n_out = len(closed.out_avals)
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * n_out
    known_avals = [a for a, u in zip(closed.in_avals, unknowns) if not u]
    result = {}

    def known_fun(*known_vals):
        with new_trace(lambda parent: PartialEvalTrace(parent, "partial_eval_jaxpr")) as pe:
            vals = iter(known_vals)
            args = [pe.new_arg(a) if u else next(vals) for a, u in zip(closed.in_avals, unknowns)]
            outs = eval_closed_jaxpr(closed, *args)
            out_unknowns = [pe.is_unknown(o) or inst for o, inst in zip(outs, instantiate)]
            unknown_jaxpr, residuals = pe.to_jaxpr([o for o, u in zip(outs, out_unknowns) if u])
        result.update(out_unknowns=out_unknowns, unknown_jaxpr=unknown_jaxpr,
                      res_avals=[get_aval(r) for r in residuals])
        return [o for o, u in zip(outs, out_unknowns) if not u] + list(residuals)

    known_jaxpr, known_consts = trace_to_jaxpr(known_fun, known_avals, "partial_eval_jaxpr")
    unknown = ClosedJaxpr(convert_constvars(result["unknown_jaxpr"]), [])
    return (ClosedJaxpr(known_jaxpr, known_consts), unknown, result["out_unknowns"],
            len(result["res_avals"]))

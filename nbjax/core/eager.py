"""Eager evaluation: the outermost trace, where primitives run on concrete values.

It wraps results as Arrays, which build on ``trace`` (an Array is not a Tracer, but knows
them), so it lives here, above both, and registers itself as the trace every thread starts
with.
"""

from .array import Array, to_numpy
from .errors import UnexpectedTracerError
from .trace import Trace, Tracer, check_live, get_aval, set_outermost_trace


class EvalTrace(Trace):
    """The outermost trace: primitives run their reference implementation on NumPy values."""

    def __init__(self):
        super().__init__(None, "eager evaluation")

    def process_primitive(self, primitive, args, params):
        for a in args:
            if isinstance(a, Tracer):
                check_live(a)
                raise UnexpectedTracerError(
                    f"a tracer of {a._trace.description} reached eager evaluation of "
                    f"{primitive.name}; it escaped its transformation")
        avals = [get_aval(a) for a in args]
        out_avals = primitive.abstract_eval(*avals, **params)
        out = primitive.impl(*map(to_numpy, args), **params)
        if primitive.multiple_results:
            return [Array.wrap(o, aval) for o, aval in zip(out, out_avals)]
        return Array.wrap(out, out_avals)


set_outermost_trace(EvalTrace)

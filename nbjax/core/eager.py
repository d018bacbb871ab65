"""Eager evaluation: the outermost trace, where primitives run on concrete values.

It wraps results as Arrays, which build on ``trace`` (an Array is not a Tracer, but knows
them), so it lives here, above both, and registers itself as the trace every thread starts
with.
"""

import numpy as np

from ..config import config
from .array import Array, to_numpy, to_operand
from .errors import UnexpectedTracerError
from .jaxpr import eval_jaxpr
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
        if _values["no_execution"]:
            name = params.get("name", primitive.name)
            raise RuntimeError(f"nbjax tried to execute function jit({name}), but the "
                               "no_execution config option is set")
        avals = [get_aval(a) for a in args]
        out_avals = primitive.abstract_eval(*avals, **params)
        out = primitive.impl(*map(to_operand if primitive.device_operands else to_numpy, args),
                             **params)
        if _values["debug_nans"] or _values["debug_infs"]:
            _check_values(primitive, args, params, out)
        if primitive.multiple_results:
            return [Array.wrap(o, aval) for o, aval in zip(out, out_avals)]
        return Array.wrap(out, out_avals)


_values = config._values


def _check_values(primitive, args, params, out):
    """``config.debug_nans``/``debug_infs``: FloatingPointError on a NaN (inf) result. For a
    call (``jit``), its jaxpr is run again op by op, so the error names the op that made it;
    if that run has none (the compiled code computed differently), the call is named."""
    outs = out if primitive.multiple_results else [out]
    for kind, flag, test in (("nan", "debug_nans", np.isnan), ("inf", "debug_infs", np.isinf)):
        bad = _values[flag] and any(np.issubdtype(np.asarray(o).dtype, np.inexact)
                                    and test(o).any() for o in outs)
        if not bad:
            continue
        if primitive.call_param is not None:
            closed = params[primitive.call_param]
            eval_jaxpr(closed.jaxpr, closed.consts, *args)
        where = f"{primitive.name}({params['name']})" if "name" in params else primitive.name
        raise FloatingPointError(f"invalid value ({kind}) encountered in {where}")


set_outermost_trace(EvalTrace)

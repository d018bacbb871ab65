"""Forward-mode autodiff: a JVPTracer carries a primal value and its tangent.

Each primitive's ``jvp`` rule maps ``(primals, tangents, **params)`` to ``(primal_out,
tangent_out)``; tangents may be symbolic ``Zero``s, so differentiating with respect to one
input does no work for the others. Registrars below write the common rules in a line.
Reverse mode (partial_eval.py + transpose.py) is built from these same rules.
"""

import numpy as np

from ..core import (Array, ClosedJaxpr, Primitive, ShapedArray, Trace, Tracer, dtypes,
                   eval_closed_jaxpr, get_aval, new_trace, set_current_trace)
from ..core.trace import short_repr
from ..core.source_info import Provenance, current_provenance, equation_source, provenance
from .staging import JaxprTracer, trace_to_jaxpr


# --- tangent types and symbolic zeros ------------------------------------------------------

def tangent_aval(aval):
    """Tangents of inexact values have the same type; of ints and bools, ``float0``."""
    if dtypes.is_inexact(aval.dtype):
        return aval
    return ShapedArray(aval.shape, dtypes.float0, False)


class Zero:
    """A tangent known to be zero; only its type is kept."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    @staticmethod
    def like(x):
        return Zero(tangent_aval(get_aval(x)))

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def _numpy_zeros(aval):
    return Array.wrap(np.zeros(aval.shape, aval.dtype), aval)


_zeros_maker = _numpy_zeros


def register_zeros_maker(maker):
    """lax provides a zeros that stages as ``broadcast_in_dim 0.0`` rather than a constant."""
    global _zeros_maker
    _zeros_maker = maker


def zeros_like_aval(aval):
    if aval.dtype == dtypes.float0:
        return _numpy_zeros(aval)
    return _zeros_maker(aval)


def instantiate(t):
    """A concrete value for a tangent that may be symbolic."""
    return zeros_like_aval(t.aval) if isinstance(t, Zero) else t


# --- add_any: the sum of two tangents / cotangents -----------------------------------------

add_any_p = Primitive("add_any")


@add_any_p.def_abstract_eval
def _add_any_abstract_eval(x, y):
    if x.shape != y.shape or x.dtype != y.dtype:
        raise TypeError(f"add_any of mismatched types {x.str_short()} and {y.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type and y.weak_type)


@add_any_p.def_impl
def _add_any_impl(x, y):
    return x if x.dtype == dtypes.float0 else np.add(x, y)


def add_tangents(x, y):
    """Sum two (co)tangents, skipping symbolic zeros."""
    if isinstance(x, Zero):
        return y
    if isinstance(y, Zero):
        return x
    return add_any_p.bind(x, y)


# --- the JVP trace -------------------------------------------------------------------------

class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        super().__init__(trace)
        self.primal, self.tangent = primal, tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def to_concrete_value(self):
        primal = self.primal
        return primal.to_concrete_value() if isinstance(primal, Tracer) else primal

    def __repr__(self):
        """``JVPTracer(primal=..., tangent=...)``; under ``grad``, ``vjp`` or ``linearize``,
        whose tangents are staged, ``GradTracer(primal=..., typeof(tangent)=f32[3])``."""
        primal = short_repr(self.primal)
        if isinstance(self.tangent, JaxprTracer) and self.tangent._trace.partial:
            tangent = self.tangent.aval.str_short(short_dtypes=True)
            return f"GradTracer(primal={primal}, typeof(tangent)={tangent})"
        return f"JVPTracer(primal={primal}, tangent={short_repr(self.tangent)})"


class JVPTrace(Trace):
    def unpack(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        return x, Zero.like(x)

    def process_primitive(self, primitive, args, params):
        primals, tangents = zip(*map(self.unpack, args)) if args else ((), ())
        tag = current_provenance() or Provenance(primitive.name, equation_source(2))
        with set_current_trace(self.parent), provenance(tag):
            if all(isinstance(t, Zero) for t in tangents):
                return primitive.bind(*primals, **params)
            out, tangent_out = primitive.rule("jvp")(primals, tangents, **params)
        if primitive.multiple_results:
            return [self.wrap(p, t) for p, t in zip(out, tangent_out)]
        return self.wrap(out, tangent_out)

    def wrap(self, primal, tangent):
        return primal if isinstance(tangent, Zero) else JVPTracer(self, primal, tangent)


# --- registrars for common JVP rules -------------------------------------------------------

def defjvp(prim, *partials):
    """JVP from one function per operand: ``partials[i](g_i, *primals, **params)`` is the
    tangent contribution of operand i (None: that operand is not differentiable)."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        total = Zero(tangent_aval(get_aval(out)))
        for partial, t in zip(partials, tangents):
            if partial is not None and not isinstance(t, Zero):
                total = add_tangents(total, partial(t, *primals, **params))
        return out, total
    prim.def_jvp(rule)
    prim.tangent_from_operands = True


def defjvp2(prim, *partials):
    """Like defjvp, but each partial also receives the primal output: ``(g, ans, *primals)``."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        total = Zero(tangent_aval(get_aval(out)))
        for partial, t in zip(partials, tangents):
            if partial is not None and not isinstance(t, Zero):
                total = add_tangents(total, partial(t, out, *primals, **params))
        return out, total
    prim.def_jvp(rule)
    prim.tangent_from_operands = True


def defjvp_zero(prim):
    """The output does not depend differentiably on the inputs (comparisons, floor, ...)."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if prim.multiple_results:
            return out, [Zero.like(o) for o in out]
        return out, Zero.like(out)
    prim.def_jvp(rule)


def deflinear(prim, transpose_rule):
    """A primitive linear in all its operands: its tangent is itself applied to tangents."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        tangent = prim.bind(*map(instantiate, tangents), **params)
        return out, tangent
    prim.def_jvp(rule)
    prim.def_transpose(transpose_rule)
    prim.tangent_from_operands = True


add_any_p.def_jvp(lambda primals, tangents: (add_any_p.bind(*primals),
                                             add_tangents(*tangents)))
add_any_p.def_transpose(lambda ct, x, y: [ct, ct])
add_any_p.tangent_from_operands = True


def _symbolic_if_float0(t):
    """A float0 tangent (of an integer input) carries nothing: make it a symbolic zero."""
    if not isinstance(t, Zero) and get_aval(t).dtype == dtypes.float0:
        return Zero(get_aval(t))
    return t


def jvp_flat(fun, primals, tangents, description="jvp"):
    """Run ``fun`` (flat in, flat out) forward with tangents; returns (primals, tangents)."""
    with new_trace(lambda parent: JVPTrace(parent, description)) as trace:
        tracers = [trace.wrap(p, _symbolic_if_float0(t)) for p, t in zip(primals, tangents)]
        outs = fun(*tracers)
        pairs = [trace.unpack(o) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def jvp_jaxpr(closed, nonzeros, instantiate_out):
    """The JVP of a closed jaxpr as a closed jaxpr, for rules of primitives with sub-jaxprs.

    The result takes the primals, then tangents for the inputs marked in ``nonzeros``, and
    returns the primal outputs, then tangents of the outputs it reports as nonzero (always
    for those marked in ``instantiate_out``, a bool or a list of bools).
    """
    n = len(closed.in_avals)
    if isinstance(instantiate_out, bool):
        instantiate_out = [instantiate_out] * len(closed.out_avals)
    out_nonzeros = []

    def fun(*args):
        primals, nz_tangents = args[:n], iter(args[n:])
        tangents = [next(nz_tangents) if nz else Zero(tangent_aval(a))
                    for nz, a in zip(nonzeros, closed.in_avals)]
        outs, touts = jvp_flat(lambda *p: eval_closed_jaxpr(closed, *p), primals, tangents)
        touts = [instantiate(t) if inst else t for t, inst in zip(touts, instantiate_out)]
        out_nonzeros[:] = [not isinstance(t, Zero) for t in touts]
        return list(outs) + [t for t in touts if not isinstance(t, Zero)]

    in_avals = list(closed.in_avals) + [tangent_aval(a) for a, nz in
                                        zip(closed.in_avals, nonzeros) if nz]
    jaxpr, consts = trace_to_jaxpr(fun, in_avals, "jvp of a sub-jaxpr")
    return ClosedJaxpr(jaxpr, consts), out_nonzeros

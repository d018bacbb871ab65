"""Reverse mode: transpose a linear jaxpr, walking it backwards with cotangents.

``vjp = linearize + transpose``. Each linear primitive's ``transpose`` rule maps the
cotangent of its output to cotangents of its linear operands; those operands arrive as
``UndefinedPrimal`` (their value is what we solve for), the others as values. Equations of
the backward pass inherit the provenance of the forward equation they transpose.
"""

from ..core import Literal, get_aval
from ..core.source_info import provenance, restaging
from .ad import Zero, add_tangents, instantiate, zeros_like_aval


class UndefinedPrimal:
    """A linear operand of a primitive being transposed: only its type is known."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x):
    return isinstance(x, UndefinedPrimal)


def backward_pass(jaxpr, consts, cotangents_out, linear=None):
    """Cotangents of ``jaxpr``'s invars given cotangents of its outvars.

    ``linear[i]`` says whether invar i is a linear input (default: all are); non-linear
    invars must then be given as values in ``consts`` after the constvars' values.
    Equations that involve no linear input are evaluated forward first.
    """
    linear = [True] * len(jaxpr.invars) if linear is None else list(linear)
    n_const = len(jaxpr.constvars)
    nonlinear_vals = iter(consts[n_const:])
    primal_env = dict(zip(jaxpr.constvars, consts[:n_const]))
    linear_vars = set()
    for v, is_lin in zip(jaxpr.invars, linear):
        if is_lin:
            linear_vars.add(v)
        else:
            primal_env[v] = next(nonlinear_vals)

    def read(a):
        if isinstance(a, Literal):
            return a.val
        return UndefinedPrimal(a.aval) if a in linear_vars else primal_env[a]

    linear_eqns = []
    with restaging(jaxpr.eqns) as eqns:
        for eqn in eqns:
            if not linear_vars.isdisjoint(eqn.invars):  # (a Literal is never among them)
                linear_eqns.append(eqn)
                linear_vars.update(eqn.outvars)
            else:
                out = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
                primal_env.update(zip(eqn.outvars,
                                      out if eqn.primitive.multiple_results else [out]))

    ct_env = {}
    for v, ct in zip(jaxpr.outvars, cotangents_out):
        if not isinstance(v, Literal) and v in linear_vars and not isinstance(ct, Zero):
            ct_env[v] = add_tangents(ct_env.get(v, Zero(v.aval)), ct)
    with restaging(linear_eqns[::-1]) as eqns:
        for eqn in eqns:
            _transpose_equation(eqn, ct_env, read, linear_vars)
    return [ct_env.get(v, Zero(v.aval)) if is_lin else None
            for v, is_lin in zip(jaxpr.invars, linear)]


def _transpose_equation(eqn, ct_env, read, linear_vars):
    """Add the cotangents of ``eqn``'s linear operands into ``ct_env`` (taking its outputs')."""
    cts = [ct_env.pop(v, Zero(v.aval)) for v in eqn.outvars]
    if all(isinstance(c, Zero) for c in cts):
        return
    tag = eqn.provenance.backward() if eqn.provenance is not None else None
    with provenance(tag):
        ct = cts if eqn.primitive.multiple_results else cts[0]
        cts_in = eqn.primitive.rule("transpose")(ct, *map(read, eqn.invars), **eqn.params)
        for a, ct_in in zip(eqn.invars, cts_in):
            if ct_in is None or isinstance(a, Literal) or a not in linear_vars:
                continue
            ct_env[a] = add_tangents(ct_env.get(a, Zero(a.aval)), ct_in)


def zeros_like(x):
    return zeros_like_aval(get_aval(x))


def transposed_call(closed, linear):
    """The backward function of a call primitive (jit, pmap): from the non-linear operands
    followed by the output cotangents, the cotangents of the linear operands. A call's
    transpose rule stages it as a new call."""
    n_nonlinear = list(linear).count(False)

    def transposed(*res_and_cts):
        res, cts = res_and_cts[:n_nonlinear], res_and_cts[n_nonlinear:]
        cts_in = backward_pass(closed.jaxpr, list(closed.consts) + list(res), list(cts), linear)
        return [instantiate(c) for c, lin in zip(cts_in, linear) if lin]
    return transposed

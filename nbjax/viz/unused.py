"""Equations a graph draws faded, and why: those whose results reach no output, and those
that change nothing (``mul x 1.0``).

``make_jaxpr(grad(f))`` keeps the whole forward pass, the primal result included (the
``_ = reduce_sum ...`` that computed ``f(x)``, which ``grad`` then drops), and nothing runs
DCE before a view draws it; JAX's DCE (and nbjax's compiler) would drop those equations.
Drawing them at full strength shows a student work that never happens, so the graph keeps
them (the jaxpr beside it has them) but fades them, with a legend saying why.
"""

from ..core.dce import RESULT_UNUSED, dce_equations
from ..core.jaxpr import Var

DEAD = "unused: no output needs its result (DCE drops it; the compiled program never runs it)"
IDENTITY = ("identity: returns its operand unchanged (x·1, x−0, a conversion to the same "
            "type); the compiler removes it")


def dead_equations(jaxpr):
    """Positions of the equations of ``jaxpr`` whose results reach none of its outputs
    (through other equations), effects aside: what the compiler's DCE removes."""
    dead = set()

    def dropped(eqn, why):
        if why == RESULT_UNUSED:  # (not a loop kept with fewer results)
            dead.add(id(eqn))
    dce_equations(jaxpr.eqns, {a for a in jaxpr.outvars if isinstance(a, Var)}, dropped)
    return [i for i, eqn in enumerate(jaxpr.eqns) if id(eqn) in dead]


def kept_operand(eqn):
    """The position of the operand ``eqn`` returns unchanged, by its primitive's own
    ``simplify`` rule, the one the compiler applies (``x * 1``, ``x - 0``, a conversion to
    the same type...; the identities are the primitives' knowledge, in ``nbjax.lax``), or
    None when it is no identity. Rewrites that look at other equations (``-(-x)``) are not
    identities of this one."""
    rule = eqn.primitive.rules.get("simplify")
    if rule is None:
        return None
    result = rule(eqn, list(eqn.invars), lambda var: None, lambda atom: 1, lambda atom: None)
    if result is None:
        return None
    return next((i for i, a in enumerate(eqn.invars) if result[0] is a), None)


def is_identity(eqn):
    """Whether ``eqn`` returns one of its operands unchanged (``kept_operand``)."""
    return kept_operand(eqn) is not None


def dim_reasons(jaxpr):
    """Position -> why the equation is drawn faded (``DEAD`` before ``IDENTITY``)."""
    reasons = {i: IDENTITY for i, eqn in enumerate(jaxpr.eqns) if is_identity(eqn)}
    reasons.update(dict.fromkeys(dead_equations(jaxpr), DEAD))
    return reasons

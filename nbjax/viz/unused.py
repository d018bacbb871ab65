"""Equations a graph draws faded, and why: those whose results reach no output, and those
that change nothing (``mul x 1.0``).

``make_jaxpr(grad(f))`` keeps the whole forward pass, the primal result included (the
``_ = reduce_sum ...`` that computed ``f(x)``, which ``grad`` then drops), and nothing runs
DCE before a view draws it; JAX's DCE (and nbjax's compiler) would drop those equations.
Drawing them at full strength shows a student work that never happens, so the graph keeps
them (the jaxpr beside it has them) but fades them, with a legend saying why.
"""

import numpy as np

from ..core.jaxpr import Literal, Var, has_effect

DEAD = "unused: no output needs its result (DCE drops it; the compiled program never runs it)"
IDENTITY = "identity: returns its operand unchanged (x·1, x+0); the compiler removes it"

# primitive -> (its unit, the operand positions where the unit leaves the other unchanged)
_UNITS = {"mul": (1, (0, 1)), "add": (0, (0, 1)), "add_any": (0, (0, 1)), "sub": (0, (1,)),
          "div": (1, (1,))}


def dead_equations(jaxpr):
    """Positions of the equations of ``jaxpr`` whose results reach none of its outputs
    (through other equations), effects aside: what a DCE pass removes."""
    live = {a for a in jaxpr.outvars if isinstance(a, Var)}
    dead = []
    for i in range(len(jaxpr.eqns) - 1, -1, -1):
        eqn = jaxpr.eqns[i]
        if any(v in live for v in eqn.outvars) or has_effect(eqn):
            live.update(a for a in eqn.invars if isinstance(a, Var))
        else:
            dead.append(i)
    return dead[::-1]


def is_identity(eqn):
    """Whether ``eqn`` is ``x * 1``, ``1 * x``, ``x + 0``, ``x - 0`` or ``x / 1`` with a
    literal unit and a result of ``x``'s very shape and dtype (no broadcast, no cast)."""
    rule = _UNITS.get(eqn.primitive.name)
    if rule is None or len(eqn.invars) != 2 or len(eqn.outvars) != 1:
        return False
    unit, positions = rule
    out = eqn.outvars[0].aval
    for p in positions:
        literal, other = eqn.invars[p], eqn.invars[1 - p]
        if isinstance(literal, Literal) and np.all(np.asarray(literal.val) == unit) \
                and other.aval.shape == out.shape and other.aval.dtype == out.dtype:
            return True
    return False


def dim_reasons(jaxpr):
    """Position -> why the equation is drawn faded (``DEAD`` before ``IDENTITY``)."""
    reasons = {i: IDENTITY for i, eqn in enumerate(jaxpr.eqns) if is_identity(eqn)}
    reasons.update(dict.fromkeys(dead_equations(jaxpr), DEAD))
    return reasons

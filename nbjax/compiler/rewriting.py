"""Rewriting a jaxpr equation by equation: what the compiler's passes share.

A pass copies the equations it keeps (``Rewriter.emit``), replaces others by the equations
of a jaxpr traced for them (``emit_inlined``: a call's body, a primitive's decomposition, a
complex operation on its parts) and reports each change as a ``Rewrite``.
"""

from dataclasses import dataclass

from ..core import Jaxpr, JaxprEqn, Literal, Var
from ..core.source_info import inlined_at


@dataclass(frozen=True, eq=False)
class Rewrite:
    """One rewrite: ``rule`` fired on ``eqn`` (the equation as it was), with a ``detail``."""
    rule: str
    eqn: JaxprEqn
    detail: str = ""

    def __str__(self):
        return f"{self.rule}: {self.detail} ({self.eqn.primitive.name})"


class Rewriter:
    """Rebuilds a jaxpr equation by equation, with variables renamed through ``env``."""

    def __init__(self, jaxpr):
        self.env = {}
        self.eqns = []
        self.new_consts = []  # (var, value) made by constant folding
        self.jaxpr = jaxpr
        self._const_vars = {}  # id(value) -> the new constvar holding it (``const_var``)

    def read(self, atom):
        return atom if isinstance(atom, Literal) else self.env.get(atom, atom)

    def bind_outputs(self, outvars, atoms):
        for v, a in zip(outvars, atoms):
            self.env[v] = a

    def emit(self, eqn):
        self.eqns.append(eqn.replace(invars=[self.read(a) for a in eqn.invars]))

    def const_var(self, value, aval):
        """A new constvar holding ``value``: one per object, so that two inlined calls of
        one constant table (an im2col's window offsets) read one variable, and the equations
        reading it can be found the same (``cse``)."""
        var = self._const_vars.get(id(value))
        if var is None:
            var = self._const_vars[id(value)] = Var(aval)
            self.new_consts.append((var, value))
        return var

    def finish(self, extra_constvars=()):
        j = self.jaxpr
        return Jaxpr(list(j.constvars) + list(extra_constvars), j.invars,
                     [self.read(a) for a in j.outvars], self.eqns)


def at(eqn):
    """``where`` for inlined equations that are ``eqn``'s: its source and provenance."""
    return lambda inner_eqn: {"source_info": eqn.source_info, "provenance": eqn.provenance}


def called_from(site):
    """``where`` for the equations of a call inlined at a line: their own lines, reached
    through the call."""
    relocate = inlined_at(site)
    return lambda inner_eqn: {"source_info": relocate(inner_eqn.source_info)}


def emit_inlined(rw, closed, operands, where):
    """Emit the equations of ``closed`` on ``operands`` (atoms of the jaxpr being rewritten)
    with fresh variables (its consts become new constvars, ``where(eqn)`` gives the source
    information of an equation's copy); returns the atoms of its outputs."""
    local = {v: rw.const_var(c, v.aval) for v, c in zip(closed.jaxpr.constvars, closed.consts)}
    local.update(zip(closed.jaxpr.invars, [rw.read(a) for a in operands]))

    def read_local(a):
        return a if isinstance(a, Literal) else local[a]
    for inner_eqn in closed.jaxpr.eqns:
        fresh = [Var(v.aval) for v in inner_eqn.outvars]
        rw.eqns.append(inner_eqn.replace(invars=[read_local(a) for a in inner_eqn.invars],
                                         outvars=fresh, **where(inner_eqn)))
        local.update(zip(inner_eqn.outvars, fresh))
    return [read_local(a) for a in closed.jaxpr.outvars]

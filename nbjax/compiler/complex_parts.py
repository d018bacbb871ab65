"""The pass that computes complex numbers on their parts, so that they fuse into kernels.

Kernels compute real scalars. An equation on complex numbers whose primitive has a
``"complex parts"`` lowering (``lax.complex_parts``: products, quotients, ``exp``, ``abs``,
sums, slices, selects...) becomes the equations of that rule on the real and imaginary parts
of its operands, which the fusion planner puts into kernels as it does any real arithmetic.

The parts of a complex value that no rule computed (a program input, an FFT's result) are
read through a view of its buffer as pairs of floats; a complex value that a step without
a rule needs whole (a library call, a program output, a loop) is written as pairs of floats
by a kernel and viewed as complex. A value split once is not split again, and a chain of
rules never builds the complex value in between. The planner makes the two views "view"
steps: no copy.
"""

import numpy as np

from ..core import Literal, ShapedArray, dtypes, has_effect
from ..interpreters.staging import trace_to_closed_jaxpr
from ..lax.complex_parts import (PairedParts, Parts, floats_as_complex, join, real_dtype,
                                 split)
from .rewriting import Rewrite, Rewriter, at, emit_inlined


def split_complex(jaxpr, consts, log):
    """The pass (``passes.optimize``'s signature): see the module docstring."""
    if not any(map(_on_complex, jaxpr.eqns)):
        return jaxpr, consts
    rw = Rewriter(jaxpr)
    known = _KnownParts(rw)
    for eqn in jaxpr.eqns:
        rule = eqn.primitive.lowerings.get("complex parts")
        if rule is None or not _on_complex(eqn) or has_effect(eqn):
            for a in eqn.invars:
                known.materialise(a, at(eqn))
            rw.emit(eqn)
            continue
        operands = [known.parts(a, at(eqn)) if _is_complex(a) else rw.read(a)
                    for a in eqn.invars]
        n_before = len(rw.eqns)
        outs = emit_inlined(rw, _traced(eqn, rule, operands), _flat(operands), at(eqn))
        (out,) = eqn.outvars
        if _is_complex(out):
            known.computed(out, Parts(*outs[:2]), *outs[2:])
        else:
            rw.bind_outputs([out], outs)
        log.append(Rewrite("complex parts", eqn, f"{eqn.primitive.name} computed on the "
                           f"real and imaginary parts: {len(rw.eqns) - n_before} equations"))
    for a in jaxpr.outvars:
        known.materialise(a, lambda inner_eqn: {})
    return rw.finish([v for v, _ in rw.new_consts]), \
        list(consts) + [c for _, c in rw.new_consts]


class _KnownParts:
    """The parts of the complex values met so far, and which of them exist only as parts."""

    def __init__(self, rw):
        self.rw = rw
        self.found = {}        # a complex variable of the input jaxpr -> its Parts
        self.only_parts = set()  # those a rule computed, not (yet) built whole
        self.pairs = {}        # of those, the ones a rule computed as pairs of floats

    def computed(self, var, parts, pairs=None):
        self.found[var] = parts
        self.only_parts.add(var)
        if pairs is not None:
            self.pairs[var] = pairs

    def parts(self, atom, where):
        """The parts of a complex operand: a literal's two numbers, those a rule computed,
        or those read through a view of the value's buffer (once per value)."""
        if isinstance(atom, Literal):
            value = np.asarray(atom.val)
            aval = ShapedArray((), real_dtype(value.dtype), atom.aval.weak_type)
            return Parts(Literal(value.real.astype(aval.dtype), aval),
                         Literal(value.imag.astype(aval.dtype), aval))
        if atom not in self.found:
            self.found[atom] = Parts(*self._emit(lambda z: list(split(z)), [atom], where))
        return self.found[atom]

    def materialise(self, atom, where):
        """Build the complex value ``atom`` whole if it exists only as parts: a view of the
        pairs a rule computed, or a kernel writing the parts as pairs and a view of them."""
        if isinstance(atom, Literal) or atom not in self.only_parts:
            return
        self.only_parts.discard(atom)
        if atom in self.pairs:
            whole = self._emit(lambda pairs: [floats_as_complex(pairs)], [self.pairs[atom]],
                               where)
        else:
            whole = self._emit(lambda re, im: [join(Parts(re, im))], list(self.found[atom]),
                               where)
        self.rw.env[atom], = whole

    def _emit(self, fn, operands, where):
        """Emit the equations of ``fn`` traced on ``operands``; its outputs' atoms."""
        closed = trace_to_closed_jaxpr(fn, [a.aval for a in operands], "complex parts")
        return emit_inlined(self.rw, closed, operands, where)


def _flat(operands):
    return [p for o in operands for p in (o if isinstance(o, Parts) else [o])]


def _traced(eqn, rule, operands):
    """The ClosedJaxpr of ``rule`` on ``operands`` (each Parts of atoms, or an atom) as
    flat arguments, returning its result's parts (and the pairs they were read from, if
    any: ``PairedParts``) or value."""
    def flat(*args):
        it = iter(args)
        values = [Parts(next(it), next(it)) if isinstance(o, Parts) else next(it)
                  for o in operands]
        out = rule(*values, **eqn.params)
        if isinstance(out, PairedParts):
            return [*out, out.pairs]
        return list(out) if isinstance(out, Parts) else [out]
    return trace_to_closed_jaxpr(flat, [a.aval for a in _flat(operands)],
                                 f"{eqn.primitive.name} on complex parts")


def _is_complex(atom):
    return dtypes.is_complex(atom.aval.dtype)


def _on_complex(eqn):
    return not eqn.primitive.multiple_results and any(
        map(_is_complex, list(eqn.invars) + list(eqn.outvars)))

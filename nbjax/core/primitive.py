"""Primitives: the operations every program is made of, each with a table of rules.

A primitive's rules are looked up by kind:

- ``abstract_eval(*avals, **params)``: output aval(s); checks shapes and dtypes.
- ``impl(*ndarrays, **params)``: the reference implementation on NumPy arrays.
- ``jvp``, ``transpose``, ``batch``: filled in by the transformations.
- ``partial_eval`` (optional): how partial evaluation splits the primitive when only some
  operands are known (primitives with sub-jaxprs), instead of staging all of it.
- ``simplify`` (optional): an algebraic simplification the compiler's ``simplify`` pass
  may apply to an equation of the primitive,
  ``rule(eqn, ins, producer_of, use_count, value_of)``: ``ins`` are the equation's
  operands after earlier rewrites, ``producer_of(atom)`` the (rewritten) equation computing
  ``atom`` or None, ``use_count(atom)`` how many times the program reads it,
  ``value_of(atom)`` its value where the program knows it (a literal's, a constant's: a
  NumPy array) or None. The rule returns None (no rewrite), ``(atom, description)`` when the
  result equals an existing atom, or ``([eqns], description)`` when cheaper equations
  compute the same outvars; ``description`` names the identity in the rewrite log.
- ``extended`` (optional): how the primitive applies to operands of an extended dtype
  (typed PRNG keys), on their physical data: ``rule(in_avals, out_avals, *physical,
  **params)`` (``core.extended``; the structural primitives' are in ``nbjax.lax.extended``).
  Without one, such operands are refused with a TypeError, as JAX refuses them.
- ``flops`` (optional): ``rule(eqn)``, the floating-point operations of an equation the
  compiler runs as a library call (its cost report cannot count them on a loop body).
- lowerings, by kind, which tell a compiler what the primitive is to it (written in
  ``nbjax.lax``, read by the compiler and the targets): ``"kernel"`` (one element of the
  result inside a fused loop), ``"library"`` (a call on whole buffers, by category),
  ``"control"`` (control flow around sub-programs), ``"jaxpr"`` (a decomposition into other
  primitives), ``"scatter"`` (how a scatter combines an element with an update), ``"error"``
  (it cannot be compiled: ``rule(**params)`` raises the program's error, as JAX's lowering).

Rules for one primitive are written together in ``nbjax.lax``; a missing rule raises
``NotImplementedError("no <kind> rule for primitive <name>")`` rather than guessing.
"""

import pickle

from .extended import ExtendedArray, bind_extended
from .trace import Tracer, check_live, current_trace

RULE_KINDS = ("abstract_eval", "impl", "jvp", "transpose", "batch", "partial_eval", "simplify",
              "dce", "flops", "extended")


# Every primitive by name, so that a pickled jaxpr (the compiler's disk cache of whole
# programs) names its primitives rather than copying their rule tables. A later primitive
# of a name already taken (a user's ``Primitive("neg")``) does not pickle, so a program
# holding it is compiled afresh rather than cached, and nbjax's own keeps its name.
_BY_NAME = {}


def primitive_named(name):
    return _BY_NAME[name]


class Primitive:
    def __init__(self, name, multiple_results=False):
        _BY_NAME.setdefault(name, self)  # the first of a name keeps it (see __reduce__)
        self.name = name
        self.multiple_results = multiple_results
        self.rules = {}
        self.lowerings = {}  # kind ("kernel", "library"...) -> lowering
        self.pp_hidden = ()  # params not printed in jaxprs (implied by the output type)
        self.is_call = False  # a call of its ``jaxpr`` param on its operands (jit)
        # The param holding a jaxpr this primitive applies to its operands unchanged (jit,
        # checkpoint, custom_jvp/vjp calls): executing it may inline that jaxpr.
        self.call_param = None
        # Running it does something besides computing its results (a host callback): the
        # compiler must never drop it as dead, merge two of them, or run it at compile time.
        self.effectful = False
        # Its reference implementation takes Arrays on a device as they are (``to_operand``):
        # a compiled call, whose executable may use their buffers where they are.
        self.device_operands = False
        # Its JVP's output tangent is nonzero whenever an operand's tangent is (it is
        # linear, or each operand's partial derivative is a nonzero expression): a loop's
        # JVP starts its fixed point from the carries such equations make nonzero.
        self.tangent_from_operands = False

    def pp_params(self, params):
        """The params a jaxpr prints for this primitive (JAX hides some, e.g. shapes)."""
        return {k: v for k, v in params.items() if k not in self.pp_hidden}

    def __repr__(self):
        return self.name

    def __reduce__(self):
        if _BY_NAME.get(self.name) is not self:  # another primitive took the name
            raise pickle.PicklingError(f"primitive {self.name!r} is not the one of that name")
        return primitive_named, (self.name,)

    def bind(self, *args, **params):
        """Apply the primitive under the current trace (evaluation, or a transformation);
        to an array of an extended dtype (a typed key) by its physical data."""
        for a in args:  # (``check_live``'s test inline: every equation traced binds)
            if isinstance(a, Tracer):
                if not a._trace.is_valid:
                    check_live(a)
            elif isinstance(a, ExtendedArray):
                return bind_extended(self, args, params)
        return current_trace().process_primitive(self, args, params)

    def def_rule(self, kind, rule):
        if kind not in RULE_KINDS:
            raise ValueError(f"unknown rule kind {kind!r}; expected one of {RULE_KINDS}")
        self.rules[kind] = rule
        return rule

    def rule(self, kind):
        try:
            return self.rules[kind]
        except KeyError:
            raise NotImplementedError(f"no {kind} rule for primitive {self.name}") from None

    def def_lowering(self, kind, rule):
        self.lowerings[kind] = rule
        return rule

    def lowering(self, kind):
        try:
            return self.lowerings[kind]
        except KeyError:
            raise NotImplementedError(
                f"no {kind} lowering rule for primitive {self.name}") from None

    # The two rules every primitive has, callable directly.
    def abstract_eval(self, *avals, **params):
        return self.rule("abstract_eval")(*avals, **params)

    def impl(self, *args, **params):
        return self.rule("impl")(*args, **params)

    # Decorator forms: ``@prim.def_impl``.
    def def_abstract_eval(self, rule):
        return self.def_rule("abstract_eval", rule)

    def def_impl(self, rule):
        return self.def_rule("impl", rule)

    def def_jvp(self, rule):
        return self.def_rule("jvp", rule)

    def def_transpose(self, rule):
        return self.def_rule("transpose", rule)

    def def_batch(self, rule):
        return self.def_rule("batch", rule)

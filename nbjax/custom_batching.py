"""``custom_vmap`` and ``sequential_vmap``: functions that bring their own batching rule
(``jax.custom_batching``).

A call of such a function is traced at once and becomes one equation, ``custom_vmap_call``,
holding the traced function (``call``) and the user's rule (``rule``). Evaluating, staging or
compiling the equation runs ``call`` (the compiler inlines it); only ``vmap`` looks at the
rule: it hands the rule the operands with their batch axes moved to the front and a pytree
of flags saying which ones are batched, and takes back the outputs with flags saying which
of them are.

Forward mode differentiates ``call``; the JVP is again a ``custom_vmap_call``, whose rule is
the JVP of the user's rule, so ``vmap`` of a JVP still goes through the rule. Reverse mode
is not supported, as in JAX: the JVP equation cannot be split into a known forward part
and a linear one.
"""

import functools
import inspect
import re

from . import lax
from .calls import CallRules, FlatCall, Traced, as_array
from .core import Primitive, get_aval, new_trace, pytree
from .interpreters import ad, batching, staging
from .lax.batch_util import broadcast_batch
from .lax.shapes import moveaxis

__all__ = ["custom_vmap", "sequential_vmap"]


# --- the primitive -------------------------------------------------------------------------

custom_vmap_call_p = Primitive("custom_vmap_call", multiple_results=True)
custom_vmap_call_p.call_param = "call"
CallRules(custom_vmap_call_p, "call").register("abstract_eval", "impl")


def _at_front(x, dim):
    """``x`` with its batch axis (if it has one) first."""
    return x if dim is None else moveaxis(x, dim, 0)


@custom_vmap_call_p.def_batch
def _custom_vmap_call_batch(axis_data, vals, dims, *, call, rule, in_tree, out_tree):
    outs, out_batched = rule(axis_data.size, [d is not None for d in dims],
                             [_at_front(x, d) for x, d in zip(vals, dims)])
    return outs, [0 if b else None for b in out_batched]


@custom_vmap_call_p.def_jvp
def _custom_vmap_call_jvp(primals, tangents, *, call, rule, in_tree, out_tree):
    """A ``custom_vmap_call`` of ``call``'s JVP (every tangent instantiated, as JAX does)
    whose rule is the JVP of ``rule``."""
    jvp_call, _ = ad.jvp_jaxpr(call, [True] * len(primals), True)
    outs = custom_vmap_call_p.bind(
        *primals, *map(ad.instantiate, tangents), call=jvp_call,
        rule=_JVPOfRule(rule, len(primals)), in_tree=pytree.treedef_tuple((in_tree, in_tree)),
        out_tree=pytree.treedef_tuple((out_tree, out_tree)))
    n = len(outs) // 2
    return outs[:n], outs[n:]


@functools.partial(custom_vmap_call_p.def_rule, "partial_eval")
def _custom_vmap_call_partial_eval(trace, args, unknowns, **params):
    """Reverse mode splits each equation of a JVP into a known forward part and a linear
    part; this one has no such split (its rule batches it whole), so linearizing fails,
    with JAX's error."""
    raise ValueError(
        "Linearization failed to produce known values for all output primals. This is "
        "typically caused by attempting to differentiate a function uses an operation that "
        "does not support reverse-mode autodiff.")


# --- rules on flat lists -------------------------------------------------------------------
# The ``rule`` param of an equation is called as ``rule(axis_size, in_batched, args)`` with
# flat lists (one flag and one value per operand, batched ones with the batch axis first)
# and returns ``(outs, out_batched)``, flat lists too.

def _shown(obj):
    """``str(obj)`` with memory addresses masked, as JAX prints a function in a jaxpr, so
    that a printed jaxpr is the same in every run."""
    return re.sub(r" at 0x([0-9a-fA-F]+)", lambda m: " at 0x" + "X" * len(m.group(1)),
                  str(obj))


class _UserRule:
    """The user's rule behind the pytree bookkeeping: the flat operands are the values the
    function closes over (which no vmap may batch), then its arguments (``in_tree``);
    the rule's output must have the function's output structure (``out_tree``) and so
    must its flags."""

    def __init__(self, fun, name, in_tree, out_tree):
        self.fun, self.name = fun, name
        self.in_tree, self.out_tree = in_tree, out_tree

    def __call__(self, axis_size, in_batched, args):
        consts_batched, args_batched = self.in_tree.unflatten(in_batched)
        if any(consts_batched):
            raise ValueError(
                f"custom_vmap function {self.name} closes over a value that vmap batches; "
                "pass that value to the function as an argument instead.")
        _, arg_values = self.in_tree.unflatten(args)
        out, out_batched = self.fun(axis_size, list(args_batched), *arg_values)
        flat_out, tree = pytree.tree_flatten(out)
        flat_batched, batched_tree = pytree.tree_flatten(out_batched)
        self._check_trees(tree, batched_tree)
        flat_out = [as_array(x) for x in flat_out]
        self._check_batch_axes(flat_out, flat_batched, axis_size)
        return flat_out, flat_batched

    @property
    def rule_name(self):
        return getattr(self.fun, "__name__", "<unnamed rule>")

    def _check_trees(self, tree, batched_tree):
        if tree != batched_tree:
            raise ValueError(
                "structure of output value and output batching specification returned by "
                f"custom vmap rule ({self.rule_name}) do not match.\nOutput values: {tree}\n"
                f"Batching spec: {batched_tree}")
        if tree != self.out_tree:
            raise ValueError(
                f"structure of output returned by custom vmap rule ({self.rule_name}) does "
                "not match that of original custom-vmapped function.\n"
                f"Original output: {self.out_tree}\nRule output: {tree}")

    def _check_batch_axes(self, flat_out, flat_batched, axis_size):
        """A batched output must have the batch axis first (JAX does not check this, and
        fails later, somewhere else)."""
        for x, batched in zip(flat_out, flat_batched):
            shape = get_aval(x).shape
            if batched and shape[:1] != (axis_size,):
                raise ValueError(
                    f"custom vmap rule ({self.rule_name}) returned an output marked batched "
                    f"whose shape {shape} does not start with the batch axis of size "
                    f"{axis_size}.")

    def __str__(self):
        return _shown(self.fun)


class _JVPOfRule:
    """The rule of a JVP equation (primals then tangents in, primal then tangent outputs):
    the JVP of ``rule``, which takes ``num_args`` operands.

    An operand whose primal and tangent are both batched is batched for ``rule``. Where
    only one of the two is, JAX runs the JVP of ``rule`` under a second vmap over those
    values, ``rule`` seeing them unbatched. When some operand is batched for ``rule``,
    that second vmap would give its outputs two batch axes (JAX's results are wrong
    there), so the unbatched half of each such pair is broadcast instead.
    """

    def __init__(self, rule, num_args):
        self.rule, self.num_args = rule, num_args

    def __call__(self, axis_size, in_batched, args):
        n = self.num_args
        both = [p and t for p, t in zip(in_batched[:n], in_batched[n:])]
        if any(both):
            either = [p or t for p, t in zip(in_batched[:n], in_batched[n:])]
            args = [x if b or not e else broadcast_batch(x, axis_size)
                    for x, b, e in zip(args, in_batched, either + either)]
            both, in_batched = either, either + either
        out_batched = []

        def jvp_of_rule(*values):
            def apply_rule(*primals):
                outs, batched = self.rule(axis_size, both, list(primals))
                out_batched[:] = batched
                return outs
            outs, tangents = ad.jvp_flat(apply_rule, values[:n], values[n:])
            return list(outs) + [ad.instantiate(t) for t in tangents]

        extra_dims = [0 if b and not rule_batched else None
                      for b, rule_batched in zip(in_batched, both + both)]
        outs = _vmap_unrestricted(jvp_of_rule, args, extra_dims, axis_size)
        return ([_at_front(x, d) for x, d in outs],
                [b or d is not None for b, (_, d) in zip(out_batched + out_batched, outs)])

    def __str__(self):
        return f"jvp_of_rule({self.rule})"


def _vmap_unrestricted(fun, args, dims, axis_size):
    """``fun`` (flat in, flat out) mapped over the axes ``dims`` of its arguments (None: not
    mapped): ``(value, batch axis)`` of each output, the axis None where it is unbatched."""
    axis_data = batching.AxisData(None, axis_size)
    with new_trace(lambda parent: batching.BatchTrace(parent, axis_data,
                                                      "vmap in a custom_vmap JVP")) as trace:
        outs = fun(*[trace.wrap(x, d) for x, d in zip(args, dims)])
        return [trace.unpack(o) for o in outs]


# --- the front ends ------------------------------------------------------------------------

def _positional(fun, name, args, kwargs):
    """The arguments as positional ones, as the rule takes them: keywords and defaults
    bound by ``fun``'s signature."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        bound.apply_defaults()
        if bound.kwargs:
            raise TypeError("keyword arguments could not be resolved to positions")
    except TypeError as e:
        raise TypeError(
            f"The input arguments to the custom_vmap-decorated function {name} could not be "
            f"resolved to positional-only arguments. Binding failed with the error:\n{e}"
        ) from e
    return bound.args


class custom_vmap:
    """A function with a user-defined batching rule: ``f = custom_vmap(f)``, then
    ``@f.def_vmap``. Outside ``vmap`` it computes ``f``; under ``vmap`` the rule does."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule = None

    def def_vmap(self, vmap_rule):
        """``vmap_rule(axis_size, in_batched, *args) -> (out, out_batched)``.

        ``args`` are the arguments, batched ones with the batch axis (of ``axis_size``)
        first; ``in_batched`` is a list of pytrees of bools, one per argument, saying which
        leaves are batched. ``out_batched`` says the same of ``out`` (which has the
        function's output structure); unbatched outputs are broadcast where needed.
        """
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        name = getattr(self.fun, "__name__", "f")
        args = _positional(self.fun, name, args, kwargs)
        if self.vmap_rule is None:
            raise AttributeError(
                f"No batching rule defined for custom_vmap function {name} using def_vmap.")
        call = FlatCall(self.fun, args, {})
        call.leaves = [as_array(x) for x in call.leaves]
        traced = Traced(call, [get_aval(x) for x in call.leaves],
                        staging.describe(self.fun, "custom_vmap"))
        in_tree = pytree.tree_structure((list(traced.consts), args))
        outs = custom_vmap_call_p.bind(
            *traced.consts, *call.leaves, call=traced.jaxpr,
            rule=_UserRule(self.vmap_rule, name, in_tree, traced.out_tree), in_tree=in_tree,
            out_tree=traced.out_tree)
        return traced.out_tree.unflatten(outs)


def sequential_vmap(f):
    """``f`` as a ``custom_vmap`` whose rule is a loop: under ``vmap`` it runs once per batch
    member (``lax.map``), for functions that cannot be batched otherwise."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        leaves, tree = pytree.tree_flatten(list(args))
        batched = pytree.tree_leaves(in_batched)

        def one_member(mapped):
            mapped = iter(mapped)
            return f(*tree.unflatten([next(mapped) if b else x
                                      for x, b in zip(leaves, batched)]))

        out = lax.map(one_member, [x for x, b in zip(leaves, batched) if b])
        return out, pytree.tree_map(lambda _: True, out)

    return f

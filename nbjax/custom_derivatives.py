"""``custom_jvp`` and ``custom_vjp``: functions that bring their own derivative rules.

Called outside any transformation, such a function is plain Python, as in JAX: it runs on
its concrete arguments (``if x > 0:`` works) and returns what it returns. Under a
transformation, a call becomes one equation (``custom_jvp_call`` / ``custom_vjp_call``)
holding the traced function as a sub-jaxpr, so evaluation, staging and vmap see an ordinary
function, while the JVP trace uses the user's rule instead of differentiating the body.
Reverse mode through a custom_vjp goes through ``custom_lin``, a linear primitive whose
transpose calls ``bwd``. ``linear_call`` brings a transpose instead: a call of a linear
function whose transpose rule calls the user's transpose function (and that one's, the
function again).
"""

import dataclasses
import functools
import inspect

from .calls import CallRules, FlatCall, Traced, abstractify, as_array, unmapped_aval
from .core import (EvalTrace, Primitive, Tracer, current_trace, dtypes, eval_jaxpr, get_aval,
                   pytree)
from .core.abstract import ShapedArray
from .core.errors import UnexpectedTracerError
from .interpreters import ad, staging
from .interpreters.transpose import is_undefined
from .lax import batch_util
from .vmap import vmap


def _resolve_args(fun, args, kwargs):
    """Positional arguments only (keyword arguments bound by the signature), as JAX does."""
    if not kwargs:
        return tuple(args)
    bound = inspect.signature(fun).bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args) + tuple(bound.kwargs.values())


def _trace_call(fun, args, nondiff_argnums, what):
    """``fun`` on ``args`` traced as a call (the arguments at ``nondiff_argnums`` static):
    the ``FlatCall`` (its leaves made arrays) and the ``Traced``."""
    call = FlatCall(fun, args, {}, nondiff_argnums)
    call.leaves = [as_array(x) for x in call.leaves]
    return call, Traced(call, [get_aval(x) for x in call.leaves], staging.describe(fun, what))


# --- symbolic zeros: what a rule defined with ``symbolic_zeros=True`` is given --------------

class SymbolicZero:
    """A zero tangent (or cotangent) handed to a custom rule defined with
    ``symbolic_zeros=True``, in place of an array of zeros: only its type is known, so the
    rule can skip the work a zero would cost. It answers for its type's attributes
    (``shape``, ``dtype``, ``ndim``...). A rule may also return one for a zero output."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __getattr__(self, name):
        if name == "aval":  # (not set yet: a copy being made)
            raise AttributeError(name)
        try:
            return getattr(self.aval, name)
        except AttributeError:
            raise AttributeError(f"SymbolicZero has no attribute {name}") from None

    def __repr__(self):
        return "SymbolicZero"

    @staticmethod
    def from_primal_value(value):
        """The symbolic zero tangent of ``value`` (float0 for an integer or bool)."""
        return SymbolicZero(ad.tangent_aval(get_aval(value)))


def zero_from_primal(val, symbolic_zeros=False):
    """A zero tangent for each leaf of ``val``: ``SymbolicZero``s, or arrays of zeros."""
    def zero(x):
        aval = ad.tangent_aval(get_aval(x))
        return SymbolicZero(aval) if symbolic_zeros else ad.zeros_like_aval(aval)
    return pytree.tree_map(zero, val)


@dataclasses.dataclass(slots=True)
class CustomVJPPrimal:
    """An argument of a ``custom_vjp``'s forward rule defined with ``symbolic_zeros=True``:
    the primal ``value``, and whether it is ``perturbed`` (differentiated: its tangent is
    not known to be zero), so the rule can skip residuals nobody will need."""
    value: object
    perturbed: bool


def custom_vjp_primal_tree_values(tree):
    """``tree`` with each ``CustomVJPPrimal`` leaf replaced by its value."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return pytree.tree_map(value, tree)


def _to_rule(tangents, symbolic_zeros):
    """Tangents as a user's rule takes them: a symbolic zero (``ad.Zero``) becomes a
    ``SymbolicZero`` under ``symbolic_zeros``, else an array of zeros."""
    return [(SymbolicZero(t.aval) if symbolic_zeros else ad.instantiate(t))
            if isinstance(t, ad.Zero) else t for t in tangents]


def _from_rule(t):
    return ad.Zero(t.aval) if isinstance(t, SymbolicZero) else t


def _vmapped_rule(rule, axis_size):
    """``rule(values, tangents)`` (a JVP rule: primals and tangents; a bwd rule: residuals
    and cotangents) mapped over axis 0 of every value and nonzero tangent. A zero tangent
    is not mapped: the rule is given a symbolic zero of one batch element's type."""
    def batched(values, tangents):
        zero = [isinstance(t, ad.Zero) for t in tangents]

        def per_element(values, nonzero_tangents):
            given = iter(nonzero_tangents)
            tangents_here = [ad.Zero(unmapped_aval(t.aval, 0)) if z else next(given)
                             for t, z in zip(tangents, zero)]
            return pytree.tree_map(ad.instantiate, rule(values, tangents_here))
        return vmap(per_element, axis_size=axis_size)(
            values, [t for t, z in zip(tangents, zero) if not z])
    return batched


def _vmapped_fwd(fwd, axis_size):
    """A custom_vjp's ``fwd(primals, perturbed)`` mapped over axis 0 of the primals."""
    def batched(primals, perturbed):
        return vmap(lambda p: fwd(p, perturbed), axis_size=axis_size)(primals)
    return batched


class _CustomCallRules(CallRules):
    """A custom-rule call: the callee is ``call_jaxpr``; the user's rules (the params named
    in ``rule_params``, each with the function that maps it over a batch axis) are
    functions, vmapped along with the callee."""

    def __init__(self, primitive, rule_params):
        super().__init__(primitive, "call_jaxpr")
        self.rule_params = rule_params
        self.register("abstract_eval", "impl", "batch")
        primitive.def_rule("partial_eval", self.inline_partial_eval)

    def batch(self, axis_data, vals, dims, **params):
        # Every operand gets the batch axis at 0 (unbatched ones are broadcast): simple, and
        # the broadcast's own rules take care of summing cotangents back.
        vals = [batch_util.bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
        batched, _ = batch_util.batch_jaxpr(params[self.param], axis_data, [True] * len(vals),
                                            True)
        rules = {k: mapped(params[k], axis_data.size) for k, mapped in self.rule_params.items()}
        outs = self.primitive.bind(*vals, **self.rebuild(dict(params, **rules), batched, (), ()))
        return outs, [0] * len(outs)


def _untransformed():
    """Whether no transformation is active: then a custom-rule function is called as plain
    Python (its rules only matter to a transformation)."""
    return type(current_trace()) is EvalTrace


def _check_no_closure_tangents(tangents, num_consts, kind):
    """Refuse to differentiate a custom-rule function through a value it closes over. JAX
    0.10 meets this as the closed-over tracer escaping its rule, an UnexpectedTracerError
    (a TypeError); the error is of that class, with a message that says what happened."""
    if any(not isinstance(t, ad.Zero) for t in tangents[:num_consts]):
        raise UnexpectedTracerError(
            f"Detected differentiation of a {kind} function with respect to a closed-over "
            f"value. That isn't supported because the custom rule only specifies how to "
            f"differentiate the {kind} function with respect to explicit input parameters. "
            "Pass the value as an explicit argument instead.")


# --- custom_jvp ----------------------------------------------------------------------------

custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_jvp_call_p.call_param = "call_jaxpr"
custom_jvp_call_p.pp_hidden = ("jvp",)
_CustomCallRules(custom_jvp_call_p, {"jvp": _vmapped_rule})


@custom_jvp_call_p.def_jvp
def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp, num_consts, name,
                         symbolic_zeros):
    # (``jvp`` takes the tangents as they are, symbolic zeros (``ad.Zero``) included)
    _check_no_closure_tangents(tangents, num_consts, "custom_jvp")
    return jvp(list(primals[num_consts:]), list(tangents[num_consts:]))


class _Wrapping:
    """A decorator object that answers for the function it wraps, as JAX's do: attributes
    it lacks are the function's (``f.def_vmap`` of a ``custom_vmap`` function wrapped by
    ``custom_vjp``)."""

    def __getattr__(self, name):
        fun = self.__dict__.get("fun")
        if fun is None:
            raise AttributeError(name)
        return getattr(fun, name)


class custom_jvp(_Wrapping):
    """A function with a user-defined JVP: ``f = custom_jvp(f)``, then ``@f.defjvp``."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False

    def defjvp(self, jvp, symbolic_zeros=False):
        """``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``. With
        ``symbolic_zeros``, a tangent known to be zero is passed as a ``SymbolicZero``
        rather than an array of zeros, and the rule may return one."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps):
        """One function per argument: ``jvps[i](t_i, primal_out, *primals)`` (None: zero)."""
        def jvp(primals, tangents):
            out = self(*primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                contribution = rule(t, out, *primals)
                total = contribution if total is None else pytree.tree_map(
                    lambda a, b: a + b, total, contribution)
            if total is None:
                total = pytree.tree_map(lambda o: o * 0, out)
            return out, total
        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        name = getattr(self.fun, "__name__", "f")
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        if _untransformed():
            return self.fun(*args, **kwargs)
        call, traced = _trace_call(self.fun, _resolve_args(self.fun, args, kwargs),
                                   self.nondiff_argnums, "custom_jvp")
        flat_jvp = functools.partial(self._flat_jvp, call, traced.out_tree,
                                     self.symbolic_zeros)
        outs = custom_jvp_call_p.bind(*traced.consts, *call.leaves, call_jaxpr=traced.jaxpr,
                                      jvp=flat_jvp, num_consts=len(traced.consts), name=name,
                                      symbolic_zeros=self.symbolic_zeros)
        return traced.out_tree.unflatten(outs)

    def _flat_jvp(self, call, out_tree, symbolic_zeros, primals, tangents):
        primal_args = call.dyn_args_of(primals)
        tangent_args = call.dyn_args_of(_to_rule(tangents, symbolic_zeros))
        nondiff = [v for _, v in call.static]
        out, tangent_out = self.jvp(*nondiff, primal_args, tangent_args)
        flat_out, tree = pytree.tree_flatten(out)
        flat_t, tree_t = pytree.tree_flatten(tangent_out)
        if tree != out_tree or tree_t != out_tree:
            raise TypeError(
                "Custom JVP rule must produce primal and tangent outputs with equal container "
                f"(pytree) structures to the function's output, but got {tree} and {tree_t} "
                f"for a function output of structure {out_tree}.")
        _check_tangent_types(flat_out, flat_t)
        return flat_out, [_from_rule(t) for t in flat_t]


def _check_tangent_types(primals, tangents):
    """JAX's TypeError unless each tangent a JVP rule returned has its primal's tangent type
    (shape and dtype, weak types aside): a float16 tangent of a float32 output would
    change the derivative's dtype downstream."""
    def strong(x):
        aval = x.aval if isinstance(x, SymbolicZero) else get_aval(x)
        return ShapedArray(aval.shape, aval.dtype)
    p_avals = [strong(p) for p in primals]
    expected = [ad.tangent_aval(a) for a in p_avals]
    got = [strong(t) for t in tangents]
    wrong = [(p, e, g) for p, e, g in zip(p_avals, expected, got) if e != g]
    if not wrong:
        return
    if len(primals) == 1:
        (p, e, g), = wrong
        raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes. Expected {e.str_short()} (tangent "
                        f"type of {p.str_short()}) but got {g.str_short()}.")
    raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                    "corresponding shapes and dtypes, but got:\n" + "\n".join(
                        f"  primal {p.str_short()} with tangent {g.str_short()}, expecting "
                        f"tangent {e.str_short()}" for p, e, g in wrong))


# --- custom_vjp ----------------------------------------------------------------------------

custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_vjp_call_p.call_param = "call_jaxpr"
custom_vjp_call_p.pp_hidden = ("fwd", "bwd")
_CustomCallRules(custom_vjp_call_p, {"fwd": _vmapped_fwd, "bwd": _vmapped_rule})


@custom_vjp_call_p.def_jvp
def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd, bwd, num_consts, name):
    _check_no_closure_tangents(tangents, num_consts, "custom_vjp")
    args, arg_tangents = primals[num_consts:], tangents[num_consts:]
    outs, residuals = fwd(list(args), [not isinstance(t, ad.Zero) for t in arg_tangents])
    lin_tangents = [ad.instantiate(t) for t in arg_tangents]
    tangent_outs = custom_lin_p.bind(
        *residuals, *lin_tangents, num_res=len(residuals), bwd=bwd,
        out_avals=tuple(ad.tangent_aval(get_aval(o)) for o in outs))
    return outs, tangent_outs


custom_lin_p = Primitive("custom_lin", multiple_results=True)
custom_lin_p.pp_hidden = ("bwd",)
custom_lin_p.def_abstract_eval(lambda *avals, out_avals, **_: list(out_avals))


def _forward_mode_error(*args, **params):
    """Evaluating ``custom_lin`` (an eager jvp), batching it (jacfwd: vmap of a jvp) or
    compiling it (jit of a jvp) is forward mode through a custom_vjp, which only has a
    reverse rule; the error is JAX's. Only transposing it (reverse mode) means something,
    and staging it (make_jaxpr of a jvp), which JAX allows too."""
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


custom_lin_p.def_impl(_forward_mode_error)
custom_lin_p.def_batch(_forward_mode_error)
# The compiler raises it before compiling a program where it is live (as JAX's lowering
# rule does), rather than running it on the reference backend with a warning.
custom_lin_p.def_lowering("error", _forward_mode_error)


@custom_lin_p.def_transpose
def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals):
    # (``bwd`` takes the cotangents as they are, symbolic zeros (``ad.Zero``) included)
    residuals, linear = args[:num_res], args[num_res:]
    cts_in = bwd(list(residuals), list(cts))
    out = []
    for ct, x in zip(cts_in, linear):
        aval = x.aval if is_undefined(x) else get_aval(x)
        out.append(ad.zeros_like_aval(ad.tangent_aval(aval)) if ct is None else ct)
    return [None] * num_res + out


class custom_vjp(_Wrapping):
    """A function with a user-defined VJP: ``f = custom_vjp(f)``; ``f.defvjp(fwd, bwd)``.

    ``fwd(*args) -> (out, residuals)``; ``bwd(*nondiff_args, residuals, g)`` returns a tuple
    with one cotangent (pytree) per differentiable argument.
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = self.bwd = None
        self.symbolic_zeros = False

    def defvjp(self, fwd, bwd, symbolic_zeros=False):
        """With ``symbolic_zeros``, ``fwd`` is given each argument's leaves as
        ``CustomVJPPrimal(value, perturbed)`` and ``bwd`` a zero cotangent as a
        ``SymbolicZero``; ``bwd`` may return ``None`` or a ``SymbolicZero`` for a zero."""
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, symbolic_zeros

    def __call__(self, *args, **kwargs):
        name = getattr(self.fun, "__name__", "f")
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        if _untransformed():
            return self.fun(*args, **kwargs)
        call, traced = _trace_call(self.fun, _resolve_args(self.fun, args, kwargs),
                                   self.nondiff_argnums, "custom_vjp")
        out_tree, dyn, nondiff = traced.out_tree, call.dyn_args, [v for _, v in call.static]
        symbolic_zeros, res_trees = self.symbolic_zeros, []

        def flat_fwd(primals, perturbed):
            if symbolic_zeros:
                primals = [CustomVJPPrimal(p, q) for p, q in zip(primals, perturbed)]
            out = self.fwd(*call.merge(call.dyn_args_of(primals)))
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"Custom VJP fwd rule {name} must produce a pair (list or "
                                "tuple of length two) representing primal outputs and "
                                "residuals (values stored from the forward pass for use on "
                                f"the backward pass), got {type(out).__name__}.")
            primal_out, res = out
            flat_out, tree = pytree.tree_flatten(primal_out)
            if tree != out_tree:
                raise TypeError(f"Custom VJP fwd rule {name} must produce primal outputs with "
                                f"the same structure as the function ({out_tree}), got {tree}.")
            res_leaves, res_tree = pytree.tree_flatten(res)
            res_trees.append(res_tree)
            return flat_out, [as_array(r) for r in res_leaves]

        def flat_bwd(residuals, cts):
            res = res_trees[-1].unflatten(residuals)
            cts = out_tree.unflatten(_to_rule(cts, symbolic_zeros))
            cts_in = self.bwd(*nondiff, res, cts)
            if not isinstance(cts_in, (tuple, list)) or len(cts_in) != len(dyn):
                raise TypeError(
                    "Custom VJP bwd rule must produce an output with the same container "
                    "(pytree) structure as the args tuple of the primal function, and in "
                    "particular must produce a tuple of length equal to the number of "
                    f"arguments to the primal function, but got bwd output structure "
                    f"{pytree.tree_structure(cts_in)} for primal input structure "
                    f"{pytree.tree_structure(dyn)}.")
            flat = []
            for k, (ct, arg) in enumerate(zip(cts_in, dyn)):
                arg_tree = pytree.tree_structure(arg)
                if ct is None:
                    flat.extend([None] * arg_tree.num_leaves)
                    continue
                ct_leaves, ct_tree = pytree.tree_flatten(ct)
                if ct_tree != arg_tree:
                    raise TypeError(f"Custom VJP bwd rule {name} produced a cotangent of "
                                    f"structure {ct_tree} for an argument of structure "
                                    f"{arg_tree}.")
                flat.extend(_checked_cotangent(c, a, (pytree.SequenceKey(k), *path))
                            for c, (path, a) in zip(ct_leaves,
                                                    pytree.tree_flatten_with_path(arg)[0]))
            return flat

        outs = custom_vjp_call_p.bind(*traced.consts, *call.leaves, call_jaxpr=traced.jaxpr,
                                      fwd=flat_fwd, bwd=flat_bwd, num_consts=len(traced.consts),
                                      name=name)
        return out_tree.unflatten(outs)


def _checked_cotangent(ct, primal, path):
    """A bwd rule's cotangent ``ct`` for the input ``primal`` (at ``path`` in the args
    tuple), or None for a zero (a SymbolicZero, or any cotangent of an integer input). Its
    shape must be the input's, and its dtype too unless the input is inexact (JAX lets
    float16 stand for float32 there); JAX's ValueError otherwise."""
    aval = get_aval(primal)
    if isinstance(ct, SymbolicZero) or ad.tangent_aval(aval).dtype == dtypes.float0:
        return None
    got = get_aval(ct)
    if got.shape != aval.shape or (got.dtype != aval.dtype
                                   and not dtypes.is_inexact(aval.dtype)):
        raise ValueError("Custom VJP bwd rule must produce an output with the same type as "
                         "the args tuple of the primal function, but at "
                         f"output{pytree.keystr(path)} the bwd rule produced an output of "
                         f"type {got.str_short()} corresponding to an input of type "
                         f"{aval.str_short()}")
    return ct


def closure_convert(fun, *example_args):
    """``(converted, hoisted)``: ``fun`` traced on arguments like ``example_args``, with the
    floating-point values it closes over that belong to an enclosing transformation (the
    tracers of a ``grad`` or ``vmap`` around this call) made explicit trailing arguments:
    ``converted(*args, *hoisted)`` computes ``fun(*args)``. Other closed-over values stay
    constants. As in JAX, for the rules of ``custom_vjp`` and other higher-order functions,
    which must not close over values they would differentiate or batch.
    """
    call = FlatCall(fun, example_args, {})
    jaxpr, consts = staging.trace_to_jaxpr(call, [abstractify(x) for x in call.leaves],
                                           staging.describe(fun, "closure_convert"))
    in_tree, out_tree = pytree.tree_structure(example_args), call.out_tree
    hoist = [isinstance(c, Tracer) and dtypes.is_inexact(get_aval(c).dtype) for c in consts]
    hoisted = [c for c, h in zip(consts, hoist) if h]

    def converted(*args):
        n = len(args) - len(hoisted)
        leaves, tree = pytree.tree_flatten(args[:n])
        if tree != in_tree:
            raise TypeError(f"closure_convert: the converted function takes arguments of "
                            f"structure {in_tree} (then the hoisted values), got {tree}")
        values = iter(args[n:])
        given = [next(values) if h else c for c, h in zip(consts, hoist)]
        return out_tree.unflatten(eval_jaxpr(jaxpr, given, *leaves))
    return converted, hoisted


def custom_gradient(fun):
    """``fun(*args) -> (value, vjp)`` made a function of its value whose reverse-mode
    derivative is ``vjp(cotangent) -> (cotangent of each arg,...)`` (``jax.custom_gradient``).

    It is a ``custom_vjp`` whose residuals are the arguments: the backward pass calls
    ``fun`` again to get ``vjp`` (a closure cannot outlive the forward trace), so the
    forward computation runs twice under ``grad``."""
    @custom_vjp
    def value(*args):
        return fun(*args)[0]

    def fwd(*args):
        return fun(*args)[0], args

    def bwd(args, ct):
        return tuple(fun(*args)[1](ct))

    value.defvjp(fwd, bwd)
    return value


# --- linear_call: a linear function with its own transpose ---------------------------------

linear_call_p = Primitive("linear_call", multiple_results=True)
linear_call_p.call_param = "callee"
linear_call_p.pp_hidden = ("transpose",)
CallRules(linear_call_p, "callee").register("abstract_eval", "impl")


def linear_call(fun, fun_transpose, residual_args, linear_args):
    """``fun(residual_args, linear_args)``, where ``fun`` is linear in ``linear_args`` and
    ``fun_transpose(residual_args, cotangent)`` is its transpose, as
    ``jax.custom_derivatives.linear_call``: reverse mode (``grad``, ``vjp``,
    ``linear_transpose``) calls ``fun_transpose`` instead of transposing ``fun``'s
    operations, and transposing that calls ``fun`` again. ``residual_args`` (and what
    ``fun`` closes over) are not differentiated."""
    call, traced = _trace_call(fun, (residual_args, linear_args), (), "linear_call fun")
    res_tree, lin_tree = (pytree.tree_structure(a) for a in (residual_args, linear_args))
    n_res = res_tree.num_leaves
    res_avals = [get_aval(x) for x in call.leaves[:n_res]]
    lin_avals = [get_aval(x) for x in call.leaves[n_res:]]

    @functools.cache
    def transpose():
        examples = (res_tree.unflatten(res_avals), traced.out_tree.unflatten(
            traced.jaxpr.out_avals))
        t_call = FlatCall(fun_transpose, examples, {})
        t_traced = Traced(t_call, [*res_avals, *traced.jaxpr.out_avals],
                          staging.describe(fun_transpose, "linear_call fun_transpose"))
        if t_call.out_tree != lin_tree:
            raise TypeError("transpose output pytree structure must match that of linear "
                            f"inputs, got output structure {t_call.out_tree} and input "
                            f"structure {lin_tree}.")
        if [(a.shape, a.dtype) for a in t_traced.jaxpr.out_avals] != \
                [(a.shape, a.dtype) for a in lin_avals]:
            raise TypeError(f"linear_call: fun_transpose returned "
                            f"{[a.str_short() for a in t_traced.jaxpr.out_avals]} for linear "
                            f"inputs of types {[a.str_short() for a in lin_avals]}")
        return t_traced.jaxpr, t_traced.consts

    outs = linear_call_p.bind(*traced.consts, *call.leaves, callee=traced.jaxpr,
                              transpose=transpose, num_consts=len(traced.consts),
                              num_res=n_res)
    return traced.out_tree.unflatten(outs)


@linear_call_p.def_jvp
def _linear_call_jvp(primals, tangents, *, num_consts, num_res, **params):
    """Linear in the linear operands: the same call on their tangents."""
    n = num_consts + num_res
    if not all(isinstance(t, ad.Zero) for t in tangents[:n]):
        raise TypeError("linear_call does not differentiate its residual_args (nor the "
                        "values fun closes over): they have tangents here")
    params = dict(params, num_consts=num_consts, num_res=num_res)
    outs = linear_call_p.bind(*primals, **params)
    return outs, linear_call_p.bind(*primals[:n], *map(ad.instantiate, tangents[n:]), **params)


@linear_call_p.def_transpose
def _linear_call_transpose(cts, *args, callee, transpose, num_consts, num_res):
    """A call of the transpose function on the residuals and the cotangents, whose own
    transpose is ``callee`` again."""
    consts, res = args[:num_consts], args[num_consts:num_consts + num_res]
    if any(is_undefined(x) for x in (*consts, *res)):
        raise ValueError("linear_call's residual_args depend on the linear values: cannot "
                         "transpose it")
    t_callee, t_consts = transpose()
    cts = [ad.instantiate(c) for c in cts]
    outs = linear_call_p.bind(*t_consts, *res, *cts, callee=t_callee,
                              transpose=lambda: (callee, list(consts)),
                              num_consts=len(t_consts), num_res=num_res)
    return [None] * (num_consts + num_res) + list(outs)

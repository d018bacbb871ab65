"""Call primitives: what ``jit``, ``pmap``, ``checkpoint`` and the custom-derivative calls share.

A call primitive's equation applies a closed jaxpr (one of its params) to its operands. Its
transformation rules all have one shape: transform the callee, then bind the primitive again
on the transformed jaxpr. ``CallRules`` writes those rules once (batching, JVP, partial
evaluation, transpose, plus the interpreted ``abstract_eval``/``impl``); a primitive states
only what differs: how its params follow a new jaxpr (``rebuild``: jit keeps its params,
pmap also adjusts ``in_axes``/``out_axes``), where its operands are mapped, and what must be
bound while its callee is retraced (pmap's axis), and how partial evaluation's residuals
pass from the known call to the unknown one (``split``).

The front ends share the way a Python function becomes such a call: split off the static
arguments and flatten the others (``FlatCall``), trace it, and make the values it closes
over leading operands (closure conversion, ``Traced``). ``vmap`` and ``pmap`` share the
flattening and checking of ``in_axes`` and the mapped size.

This module sits below ``custom_derivatives`` and ``numpy``: it uses only ``core``,
``interpreters`` and ``lax``.
"""

import contextlib
import inspect
import time

from .core import (ClosedJaxpr, ExtendedArray, ShapedArray, Tracer, dtypes, eval_closed_jaxpr,
                   get_aval, pytree)
from .core.abstract import ShapeDtypeStruct
from .interpreters import ad, staging
from .interpreters.partial_eval import partial_eval_jaxpr
from .interpreters.transpose import is_undefined, transposed_call
from .lax import batch_util
from .lax.shapes import moveaxis, reduce_sum
from .lax.standard import as_array  # noqa: F401  (the front ends' name for it)


# --- arguments -----------------------------------------------------------------------------

def abstractify(x):
    """The aval of an argument: arrays and scalars, or anything with a shape and a dtype."""
    if isinstance(x, ShapedArray):
        return x
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype), x.weak_type)
    return get_aval(x)


def static_positions(argnums, nargs):
    """The static positions among ``nargs`` arguments (an int or a sequence, negative ones
    counted from the end); ValueError for one out of range."""
    if isinstance(argnums, int):
        argnums = (argnums,)
    out = set()
    for i in argnums or ():
        if not -nargs <= i < nargs:
            raise ValueError(f"static_argnums {i} is out of range for {nargs} arguments")
        out.add(i % nargs)
    return out


class Static:
    """A static argument in a trace cache key: equal to another only when of the same type
    as well as equal, for ``1``, ``1.0`` and ``True`` are equal in Python but trace into
    different programs (as in JAX, which traces again when the type changes)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Static) and type(self.value) is type(other.value) \
            and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return repr(self.value)


class FlatCall:
    """A call ``fun(*args, **kwargs)`` seen as a function of flat array leaves.

    The arguments at ``positions`` and the keywords in ``names`` are static: they reach
    ``fun`` as the Python values given (``static``, ``static_kw``: sorted ``(position or
    name, value)`` pairs, part of a trace's signature). The others are flattened, as the
    pytree ``(dyn_args, dyn_kwargs)`` with ``dyn_args`` a tuple (as JAX's ``in_tree``), into
    ``leaves`` and ``in_tree``. Calling the object on leaves calls ``fun`` with the static
    arguments put back in place and returns its flat outputs, recording ``out_tree``.
    """

    def __init__(self, fun, args, kwargs, positions=(), names=()):
        self.fun, self.nargs = fun, len(args)
        self.static = tuple((i, args[i]) for i in sorted(positions))
        self.static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in names))
        # (what a trace cache keys them by)
        self.static_key = tuple((i, Static(v)) for i, v in self.static)
        self.static_kw_key = tuple((k, Static(v)) for k, v in self.static_kw)
        self.dyn_args = tuple(a for i, a in enumerate(args) if i not in positions)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
        self.leaves, self.in_tree = pytree.tree_flatten((self.dyn_args, dyn_kwargs))
        self.out_tree = None

    def check_hashable(self, name):
        """Static arguments key trace caches, so they must be hashable (JAX's ValueError)."""
        for where, value in self.static + self.static_kw:
            try:
                hash(value)
            except TypeError:
                raise ValueError(f"Non-hashable static arguments are not supported: argument "
                                 f"{where} of {name} is {type(value).__name__}, which is "
                                 "unhashable. Make it hashable (e.g. a tuple) or not static."
                                 ) from None

    def dyn_args_of(self, leaves):
        """The dynamic positional arguments that ``leaves`` (of ``in_tree``) stand for."""
        return self.in_tree.unflatten(leaves)[0]

    def merge(self, dyn_args):
        """All positional arguments: ``dyn_args`` with the static ones put back."""
        static, it = dict(self.static), iter(dyn_args)
        return [static[i] if i in static else next(it) for i in range(self.nargs)]

    def __call__(self, *leaves):
        dyn_args, dyn_kwargs = self.in_tree.unflatten(leaves)
        out = self.fun(*self.merge(dyn_args), **dyn_kwargs, **dict(self.static_kw))
        out_leaves, self.out_tree = pytree.tree_flatten(out)
        return out_leaves


def closure_convert(jaxpr, consts):
    """A call's jaxpr: the values ``jaxpr`` closes over (``consts``, which may be tracers of
    enclosing transformations) become its leading operands. Returns ``(closed, consts)``."""
    return ClosedJaxpr(staging.convert_constvars(jaxpr), []), list(consts)


class Traced:
    """A ``FlatCall`` traced on ``avals`` for a call primitive, closure-converted: bind the
    primitive on ``consts`` then the argument leaves. ``cacheable``: no const is a tracer
    (a trace closing over one cannot be reused once its transformation ends)."""

    def __init__(self, fun, avals, description):
        t0 = time.perf_counter()
        jaxpr, consts = staging.trace_to_jaxpr(fun, list(avals), description)
        self.trace_seconds = time.perf_counter() - t0
        self.jaxpr, self.consts = closure_convert(jaxpr, consts)
        self.out_tree = fun.out_tree
        self.cacheable = not any(isinstance(c, Tracer) for c in consts)


# --- mapped arguments (vmap, pmap) ---------------------------------------------------------

def flatten_axes(what, tree, axes, n):
    """One axis per leaf of ``tree``, from ``axes``, a pytree prefix of it (None a leaf). A
    typed key array is one leaf, its data, whose trailing key axes a negative axis skips: it
    counts from the last axis of the keys, as in JAX."""
    proxy = tree.unflatten([object()] * n)
    spec_leaves, spec_tree = pytree.tree_flatten(axes, is_leaf=lambda x: x is None)
    try:
        subtrees = spec_tree.flatten_up_to(proxy)
    except ValueError:
        raise ValueError(f"{what} specification must be a tree prefix of the corresponding "
                         f"value, got specification {axes} for value tree {tree}.") from None
    flat = []
    for spec, sub in zip(spec_leaves, subtrees):
        for leaf in pytree.tree_leaves(sub, is_leaf=lambda x: isinstance(x, ExtendedArray)):
            keys = isinstance(leaf, ExtendedArray) and spec is not None and spec < 0
            flat.append(spec - len(leaf.dtype.element_shape) if keys else spec)
    return flat


def canonical_in_axes(args, axes, what="vmap"):
    """Arrays for the mapped arguments, and their mapped axes made non-negative."""
    out_args, out_axes = [], []
    for x, d in zip(args, axes):
        if d is not None:
            x = as_array(x)
            shape = get_aval(x).shape
            if not -len(shape) <= d < len(shape):
                raise ValueError(
                    f"{what} was requested to map its argument along axis {d}, which implies "
                    f"that its rank should be at least {d + 1 if d >= 0 else -d}, but is only "
                    f"{len(shape)} (its shape is {shape})")
            d %= len(shape)
        out_args.append(x)
        out_axes.append(d)
    return out_args, out_axes


def mapped_size(fun, in_tree, args, axes, axis_size, what="vmap"):
    """The size of the mapped axis; ValueError listing every argument's size if they differ."""
    sizes = {get_aval(x).shape[d] for x, d in zip(args, axes) if d is not None}
    if axis_size is not None:
        sizes.add(axis_size)
    if len(sizes) == 1:
        return sizes.pop()
    if not sizes:
        raise ValueError(f"{what} must have at least one non-None value in in_axes or "
                         "axis_size must be specified")
    names = _argument_names(fun, in_tree, len(args))
    lines = [f"  * one axis had size {get_aval(x).shape[d]}: axis {d} of {name} of type "
             f"{get_aval(x).str_short()}" for x, d, name in zip(args, axes, names)
             if d is not None]
    raise ValueError(f"{what} got inconsistent sizes for array axes to be mapped:\n" +
                     ";\n".join(lines))


def _argument_names(fun, in_tree, n):
    """'argument x' / "argument params['w']" for each flat argument, for error messages."""
    proxy_args, proxy_kwargs = in_tree.unflatten(list(range(n)))
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    names = [None] * n
    for i, a in enumerate(proxy_args):
        base = f"argument {params[i]}" if i < len(params) else f"argument {i}"
        _name_leaves(a, base, names)
    for k, a in proxy_kwargs.items():
        _name_leaves(a, f"keyword argument {k}", names)
    return names


def _name_leaves(tree, base, names):
    leaves = pytree.tree_leaves(tree)
    for j, idx in enumerate(leaves):
        names[idx] = base if len(leaves) == 1 else f"{base} (leaf {j})"


def unmapped_aval(aval, axis):
    """The aval of one slice of ``aval`` along its mapped ``axis`` (None: not mapped)."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


# --- the rules -----------------------------------------------------------------------------

class CallRules:
    """The rules of a call primitive whose callee is its ``param`` (a closed jaxpr).

    Every rule transforms the callee and binds the primitive again through ``rebuild``.
    Operands and results may be mapped along an axis (``axes``; None everywhere for a call
    that maps nothing); values a mapped call computes once per slice and hands to another
    call (residuals, cotangents of unmapped operands) are stacked at ``stack_axis``.
    ``register`` installs the rules a primitive takes from here.
    """

    stack_axis = None
    transpose_name = "transpose of {name}"  # the transposed callee's trace, for messages

    def __init__(self, primitive, param="jaxpr"):
        self.primitive, self.param = primitive, param

    def register(self, *kinds):
        for kind in kinds:
            self.primitive.def_rule(kind, getattr(self, kind))

    # What differs between call primitives.

    def axes(self, params):
        """``(in_axes, out_axes)``: the mapped axis of each operand and result (tuples)."""
        callee = params[self.param]
        return (None,) * len(callee.in_avals), (None,) * len(callee.out_avals)

    def rebuild(self, params, callee, in_axes, out_axes):
        """The params of a call of ``callee`` with these axes, made from ``params``."""
        return dict(params, **{self.param: callee})

    def tracing(self, params):
        """A context to retrace the callee in (pmap binds its axis there)."""
        return contextlib.nullcontext()

    def split(self, params, unknowns):
        """The callee partially evaluated: ``(known, unknown, out_unknowns, res_axes)``, the
        residuals passing from the known call to the unknown one mapped at ``res_axes``."""
        with self.tracing(params):
            known, unknown, out_unknowns, num_res = partial_eval_jaxpr(params[self.param],
                                                                       unknowns)
        return known, unknown, out_unknowns, (self.stack_axis,) * num_res

    # The rules.

    def abstract_eval(self, *avals, **params):
        return params[self.param].out_avals

    def impl(self, *args, **params):
        return eval_closed_jaxpr(params[self.param], *args)

    def batch(self, axis_data, vals, dims, **params):
        """Each batched operand gets the batch axis first in every slice; so does each
        batched result, stacked after it at the mapped axis."""
        in_axes, out_axes = self.axes(params)
        operands, new_in_axes = [], []
        for x, d, axis in zip(vals, dims, in_axes):
            x, axis = (x, axis) if d is None else _batched_operand(x, d, axis)
            operands.append(x)
            new_in_axes.append(axis)
        with self.tracing(params):
            batched, out_batched = batch_util.batch_jaxpr(
                params[self.param], axis_data, [d is not None for d in dims], False)
        new_out_axes = [axis if not b or axis is None else axis + 1
                        for axis, b in zip(out_axes, out_batched)]
        outs = self.primitive.bind(*operands, **self.rebuild(params, batched, tuple(new_in_axes),
                                                             tuple(new_out_axes)))
        return outs, [0 if b else None for b in out_batched]

    def jvp(self, primals, tangents, **params):
        """One call of the JVP of the callee on the primals and the nonzero tangents."""
        in_axes, out_axes = self.axes(params)
        nonzeros = [not isinstance(t, ad.Zero) for t in tangents]
        with self.tracing(params):
            jvp_closed, out_nonzeros = ad.jvp_jaxpr(params[self.param], nonzeros, False)
        outs = self.primitive.bind(
            *primals, *[t for t in tangents if not isinstance(t, ad.Zero)],
            **self.rebuild(params, jvp_closed, in_axes + _where(in_axes, nonzeros),
                           out_axes + _where(out_axes, out_nonzeros)))
        n = len(out_axes)
        nz_tangents = iter(outs[n:])
        tangent_outs = [next(nz_tangents) if nz else ad.Zero.like(out)
                        for nz, out in zip(out_nonzeros, outs[:n])]
        return outs[:n], tangent_outs

    def partial_eval(self, trace, args, unknowns, **params):
        """Known operands run a forward call now; the rest is staged as a call on the
        residuals it returns."""
        in_axes, out_axes = self.axes(params)
        known, unknown, out_unknowns, res_axes = self.split(params, unknowns)
        num_res = len(res_axes)
        known_outs = trace.compute_known(self.primitive, _where_not(args, unknowns), self.rebuild(
            params, known, _where_not(in_axes, unknowns),
            _where_not(out_axes, out_unknowns) + res_axes))
        n_known = len(known_outs) - num_res
        unknown_outs = trace.stage(
            self.primitive, [*known_outs[n_known:], *_where(args, unknowns)], self.rebuild(
                params, unknown, res_axes + _where(in_axes, unknowns),
                _where(out_axes, out_unknowns)))
        known_iter, unknown_iter = iter(known_outs[:n_known]), iter(unknown_outs)
        return [next(unknown_iter) if u else next(known_iter) for u in out_unknowns]

    def inline_partial_eval(self, trace, args, unknowns, **params):
        """Partial evaluation of a call whose rules only matter to some transformations (a
        custom-rule function applied to unknown values): stage the callee's body."""
        return eval_closed_jaxpr(params[self.param], *args)

    def transpose(self, cts, *args, **params):
        """A backward call: the transposed callee, from the non-linear operands and the
        cotangents. A mapped call sums the stacked cotangents of an unmapped linear operand
        (every slice used it)."""
        in_axes, out_axes = self.axes(params)
        callee = params[self.param]
        linear = [is_undefined(a) for a in args]
        nonlinear = [a for a in args if not is_undefined(a)]
        cts = [ad.instantiate(c) for c in cts]
        operand_axes = _where_not(in_axes, linear) + out_axes
        in_avals = [unmapped_aval(get_aval(x), axis)
                    for x, axis in zip(nonlinear + cts, operand_axes)]
        with self.tracing(params):
            t_jaxpr, consts = closure_convert(*staging.trace_to_jaxpr(
                transposed_call(callee, linear), in_avals, self.transpose_name.format(**params)))
        linear_axes = _where(in_axes, linear)
        outs = self.primitive.bind(*consts, *nonlinear, *cts, **self.rebuild(
            params, t_jaxpr,
            (None,) * len(consts) + operand_axes,
            tuple(self.stack_axis if axis is None else axis for axis in linear_axes)))
        if self.stack_axis is not None:
            outs = [ct if axis is not None else reduce_sum(ct, (self.stack_axis,))
                    for ct, axis in zip(outs, linear_axes)]
        outs = iter(outs)
        return [next(outs) if lin else None for lin in linear]


def _where(values, keep):
    """The values whose flag in ``keep`` is set, as a tuple."""
    return tuple(v for v, k in zip(values, keep) if k)


def _where_not(values, drop):
    """The values whose flag in ``drop`` is not set, as a tuple."""
    return tuple(v for v, d in zip(values, drop) if not d)


def _batched_operand(x, bdim, axis):
    """The operand and its mapped axis such that every slice has the batch axis at 0."""
    if axis is None:
        return moveaxis(x, bdim, 0), None
    mapped = axis + (axis >= bdim)  # the mapped axis among x's axes
    if bdim - (mapped < bdim) == 0:  # removing the mapped axis leaves the batch axis first
        return x, mapped
    return moveaxis(x, bdim, 0), axis + 1

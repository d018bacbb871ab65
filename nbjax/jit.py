"""``jit``: stage a function to a jaxpr once per input signature and run it as one call.

A jitted call is a ``jit`` equation holding the traced jaxpr, so every transformation
passes through it: vmap batches the jaxpr, JVP differentiates it, partial evaluation splits
it into a known (forward) call and an unknown (linear) call, and transposition turns the
linear call into a backward call. Executing a ``jit`` equation compiles its jaxpr once per
backend and caches the executable (``nbjax.compiler``).
"""

import functools
import logging
import operator

from . import compiler
from .config import config
from .core import (Array, ClosedJaxpr, Primitive, Tracer, dtypes, get_aval, pytree)
from .interpreters import ad, staging
from .interpreters.partial_eval import partial_eval_jaxpr
from .interpreters.transpose import is_undefined, transposed_call
from .lax import batch_util

logger = logging.getLogger("nbjax")

jit_p = Primitive("jit", multiple_results=True)
jit_p.is_call = True
jit_p.call_param = "jaxpr"
# JAX prints the name before the jaxpr.
jit_p.pp_params = lambda params: [("name", params["name"]), ("jaxpr", params["jaxpr"])]


@jit_p.def_abstract_eval
def _jit_abstract_eval(*avals, jaxpr, name):
    return jaxpr.out_avals


@jit_p.def_impl
def _jit_impl(*args, jaxpr, name):
    return compiler.compile(jaxpr, name=name, backend=config.jit_backend).run(*args)


@jit_p.def_batch
def _jit_batch(axis_data, vals, dims, *, jaxpr, name):
    vals = [batch_util.bdim_at_front(v, d, axis_data.size) if d is not None else v
            for v, d in zip(vals, dims)]
    batched, out_batched = batch_util.batch_jaxpr(jaxpr, axis_data,
                                                  [d is not None for d in dims], False)
    outs = jit_p.bind(*vals, jaxpr=batched, name=name)
    return outs, [0 if b else None for b in out_batched]


@jit_p.def_jvp
def _jit_jvp(primals, tangents, *, jaxpr, name):
    nonzeros = [not isinstance(t, ad.Zero) for t in tangents]
    jvp_closed, out_nonzeros = ad.jvp_jaxpr(jaxpr, nonzeros, False)
    outs = jit_p.bind(*primals, *[t for t in tangents if not isinstance(t, ad.Zero)],
                      jaxpr=jvp_closed, name=name)
    n = len(jaxpr.out_avals)
    nz_tangents = iter(outs[n:])
    tangent_outs = [next(nz_tangents) if nz else ad.Zero(ad.tangent_aval(a))
                    for nz, a in zip(out_nonzeros, jaxpr.out_avals)]
    return outs[:n], tangent_outs


def _jit_partial_eval(trace, args, unknowns, *, jaxpr, name):
    """Known operands run a forward call now; the rest is staged as a call on residuals."""
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(jaxpr, unknowns)
    known_args = [a for a, u in zip(args, unknowns) if not u]
    known_outs = trace.compute_known(jit_p, known_args, dict(jaxpr=known, name=name))
    residuals = known_outs[len(known_outs) - num_res:]
    unknown_args = [a for a, u in zip(args, unknowns) if u]
    unknown_outs = trace.stage(jit_p, [*residuals, *unknown_args],
                               dict(jaxpr=unknown, name=name))
    known_iter, unknown_iter = iter(known_outs[:len(known_outs) - num_res]), iter(unknown_outs)
    return [next(unknown_iter) if u else next(known_iter) for u in out_unknowns]


jit_p.def_rule("partial_eval", _jit_partial_eval)


@jit_p.def_transpose
def _jit_transpose(cts, *args, jaxpr, name):
    linear = [is_undefined(a) for a in args]
    nonlinear = [a for a in args if not is_undefined(a)]
    cts = [ad.instantiate(c) for c in cts]
    in_avals = [get_aval(a) for a in nonlinear] + [get_aval(c) for c in cts]
    t_jaxpr, consts = staging.trace_to_jaxpr(transposed_call(jaxpr, linear), in_avals,
                                             f"transpose of {name}")
    closed = ClosedJaxpr(staging.convert_constvars(t_jaxpr), [])
    outs = iter(jit_p.bind(*consts, *nonlinear, *cts, jaxpr=closed, name=name))
    return [next(outs) if lin else None for lin in linear]


# --- the user-facing wrapper -------------------------------------------------------------

class JitWrapped:
    """``jit(f)``: call it like ``f``; it traces once per input signature."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums = _as_tuple(static_argnums)
        self.static_argnames = _as_tuple(static_argnames)
        self.donate_argnums = _as_tuple(donate_argnums)  # accepted; buffers are not donated yet
        self.name = getattr(fun, "__name__", type(fun).__name__)
        self._cache = {}
        self._last_key = None
        self.trace_count = 0

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        closed, leaves, out_tree = self._trace(args, kwargs)
        outs = jit_p.bind(*closed.consts_as_args, *leaves, jaxpr=closed.jaxpr, name=self.name)
        return out_tree.unflatten(outs)

    def _split_args(self, args, kwargs):
        nargs = len(args)
        static_nums = {operator.index(i) % nargs for i in self.static_argnums if -nargs <= i < nargs}
        static = tuple((i, args[i]) for i in sorted(static_nums))
        static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        dyn_args = [a for i, a in enumerate(args) if i not in static_nums]
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        for where, value in list(static) + list(static_kw):
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"Non-hashable static arguments are not supported: argument "
                                f"{where} of {self.name} is {type(value).__name__}, which is "
                                "unhashable. Make it hashable (e.g. a tuple) or not static.")
        return static, static_kw, dyn_args, dyn_kwargs

    def _trace(self, args, kwargs):
        static, static_kw, dyn_args, dyn_kwargs = self._split_args(args, kwargs)
        leaves, in_tree = pytree.tree_flatten((dyn_args, dyn_kwargs))
        leaves = [x if isinstance(x, (Array, Tracer)) else _as_array(x) for x in leaves]
        avals = tuple(get_aval(x) for x in leaves)
        key = (in_tree, avals, static, static_kw, config.enable_x64)
        entry = self._cache.get(key)
        if entry is None:
            self._explain_miss(key, args)
            entry = self._stage(args, static, static_kw, in_tree, avals)
            if entry.cacheable:
                self._cache[key] = entry
        self._last_key = key
        return entry, leaves, entry.out_tree

    def _stage(self, args, static, static_kw, in_tree, avals):
        self.trace_count += 1
        static_pos = dict(static)
        out_trees = []

        def flat(*xs):
            dyn_args, dyn_kwargs = in_tree.unflatten(xs)
            it = iter(dyn_args)
            full = [static_pos[i] if i in static_pos else next(it) for i in range(len(args))]
            out = self.fun(*full, **dyn_kwargs, **dict(static_kw))
            out_leaves, tree = pytree.tree_flatten(out)
            out_trees.append(tree)
            return out_leaves

        jaxpr, consts = staging.trace_to_jaxpr(flat, list(avals),
                                               staging.describe(self.fun, "jit"))
        return _Traced(jaxpr, consts, out_trees[0])

    def _explain_miss(self, key, args):
        if not config.explain_cache_misses or self._last_key is None:
            return
        logger.warning("TRACING CACHE MISS for %s: %s", self.name,
                       explain_difference(self._last_key, key))

    def clear_cache(self):
        self._cache.clear()
        self._last_key = None


class _Traced:
    """One cache entry: the traced jaxpr with its closed-over values made leading operands."""

    def __init__(self, jaxpr, consts, out_tree):
        # Closed-over tracers (of an enclosing transformation) must be passed each call, and
        # such a trace cannot be reused once that transformation ends.
        self.cacheable = not any(isinstance(c, Tracer) for c in consts)
        self.jaxpr = ClosedJaxpr(staging.convert_constvars(jaxpr), [])
        self.consts_as_args = list(consts)
        self.out_tree = out_tree


def explain_difference(old, new):
    """Why a call missed the cache: what changed between two cache keys, in words."""
    old_tree, old_avals, old_static, old_kw, old_x64 = old
    new_tree, new_avals, new_static, new_kw, new_x64 = new
    reasons = []
    if old_x64 != new_x64:
        reasons.append(f"enable_x64 changed from {old_x64} to {new_x64}")
    if old_tree != new_tree:
        reasons.append(f"the argument structure changed from {old_tree} to {new_tree}")
    else:
        for i, (a, b) in enumerate(zip(old_avals, new_avals)):
            if a != b:
                reasons.append(f"argument leaf {i} changed type from {_describe(a)} to "
                               f"{_describe(b)}")
    for (i, a), (j, b) in zip(old_static, new_static):
        if a != b:
            reasons.append(f"static argument {j} changed from {a!r} to {b!r}")
    if old_kw != new_kw:
        reasons.append(f"static keyword arguments changed from {old_kw} to {new_kw}")
    return "; ".join(reasons) or "no previous trace matched"


def _describe(aval):
    return aval.str_short() + (" (weak)" if aval.weak_type else "")


def _as_tuple(x):
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _as_array(x):
    from .numpy.util import to_array
    return to_array(x)


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=()):
    """Compile ``fun`` (``@jit`` or ``jit(f, static_argnums=...)``), as ``jax.jit``."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums)
    if not callable(fun):
        raise TypeError(f"jit expects a callable, got {type(fun).__name__}")
    return JitWrapped(fun, static_argnums, static_argnames, donate_argnums)

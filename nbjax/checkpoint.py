"""``checkpoint`` (``remat``): trade compute for memory in reverse mode.

The function becomes one ``checkpoint`` equation. Its JVP stages the tangent computation,
*including the primal computation it needs*, as a second checkpoint equation whose only
residuals are the inputs; transposing it re-runs the primal part in the backward pass
instead of storing intermediate values.
"""

import functools

from .core import ClosedJaxpr, Primitive, eval_closed_jaxpr, get_aval, pytree
from .interpreters import ad, staging
from .interpreters.transpose import backward_pass, is_undefined
from .lax import batch_util

checkpoint_p = Primitive("checkpoint", multiple_results=True)
checkpoint_p.call_param = "jaxpr"
checkpoint_p.def_abstract_eval(lambda *avals, jaxpr, **_: jaxpr.out_avals)
checkpoint_p.def_impl(lambda *args, jaxpr, **_: eval_closed_jaxpr(jaxpr, *args))


@checkpoint_p.def_jvp
def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    nonzeros = [not isinstance(t, ad.Zero) for t in tangents]
    jvp_closed, out_nonzeros = ad.jvp_jaxpr(jaxpr, nonzeros, True)
    n_out = len(jaxpr.out_avals)
    # Keep only the tangent outputs: the primal outputs come from the plain call below.
    tangent_only = ClosedJaxpr(_select_outputs(jvp_closed.jaxpr, range(n_out, 2 * n_out)),
                               jvp_closed.consts)
    outs = checkpoint_p.bind(*primals, jaxpr=jaxpr, prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    nz_tangents = [t for t in tangents if not isinstance(t, ad.Zero)]
    tangent_outs = checkpoint_p.bind(*primals, *nz_tangents, jaxpr=tangent_only,
                                     prevent_cse=prevent_cse, differentiated=True, policy=policy)
    return outs, tangent_outs


def _select_outputs(jaxpr, indices):
    from .core import Jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [jaxpr.outvars[i] for i in indices], jaxpr.eqns)


@checkpoint_p.def_transpose
def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    linear = [is_undefined(a) for a in args]
    nonlinear = [a for a in args if not is_undefined(a)]
    cts_in = backward_pass(jaxpr.jaxpr, list(jaxpr.consts) + nonlinear, cts, linear)
    return [ad.instantiate(c) if lin else None for c, lin in zip(cts_in, linear)]


@checkpoint_p.def_batch
def _checkpoint_batch(axis_data, vals, dims, *, jaxpr, prevent_cse, differentiated, policy):
    vals = [batch_util.bdim_at_front(v, d, axis_data.size) if d is not None else v
            for v, d in zip(vals, dims)]
    batched, out_batched = batch_util.batch_jaxpr(jaxpr, axis_data,
                                                  [d is not None for d in dims], False)
    outs = checkpoint_p.bind(*vals, jaxpr=batched, prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    return outs, [0 if b else None for b in out_batched]


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=()):
    """Make ``fun`` recompute its intermediate values in the backward pass (as jax.checkpoint)."""
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else static_argnums

    @functools.wraps(fun)
    def remat_fun(*args):
        static = {i % len(args): args[i] for i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = pytree.tree_flatten(dyn)
        out_trees = []

        def flat(*xs):
            it = iter(in_tree.unflatten(xs))
            full = [static[i] if i in static else next(it) for i in range(len(args))]
            out_leaves, tree = pytree.tree_flatten(fun(*full))
            out_trees.append(tree)
            return out_leaves

        from .numpy.util import to_array
        leaves = [to_array(x) for x in leaves]
        jaxpr, consts = staging.trace_to_jaxpr(flat, [get_aval(x) for x in leaves],
                                               staging.describe(fun, "checkpoint"))
        closed = ClosedJaxpr(staging.convert_constvars(jaxpr), [])
        outs = checkpoint_p.bind(*consts, *leaves, jaxpr=closed, prevent_cse=prevent_cse,
                                 differentiated=False, policy=policy)
        return out_trees[0].unflatten(outs)
    return remat_fun


remat = checkpoint

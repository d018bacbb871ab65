"""``checkpoint`` (``remat``): trade compute for memory in reverse mode.

The function becomes one ``checkpoint`` equation. Its JVP stages the tangent computation,
*including the primal computation it needs*, as a second checkpoint equation whose only
residuals are the inputs; transposing it re-runs the primal part in the backward pass
instead of storing intermediate values.
"""

import functools

from .calls import CallRules, FlatCall, Traced, as_array, static_positions
from .core import ClosedJaxpr, Jaxpr, Primitive, get_aval
from .interpreters import ad, staging
from .interpreters.transpose import backward_pass, is_undefined

checkpoint_p = Primitive("checkpoint", multiple_results=True)
checkpoint_p.call_param = "jaxpr"
# Batching is a call's; the JVP and transpose are what make it a checkpoint.
CallRules(checkpoint_p).register("abstract_eval", "impl", "batch")


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
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [jaxpr.outvars[i] for i in indices], jaxpr.eqns)


@checkpoint_p.def_transpose
def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    linear = [is_undefined(a) for a in args]
    nonlinear = [a for a in args if not is_undefined(a)]
    cts_in = backward_pass(jaxpr.jaxpr, list(jaxpr.consts) + nonlinear, cts, linear)
    return [ad.instantiate(c) if lin else None for c, lin in zip(cts_in, linear)]


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=()):
    """Make ``fun`` recompute its intermediate values in the backward pass (as jax.checkpoint)."""
    @functools.wraps(fun)
    def remat_fun(*args):
        call = FlatCall(fun, args, {}, static_positions(static_argnums, len(args)))
        leaves = [as_array(x) for x in call.leaves]
        traced = Traced(call, [get_aval(x) for x in leaves],
                        staging.describe(fun, "checkpoint"))
        outs = checkpoint_p.bind(*traced.consts, *leaves, jaxpr=traced.jaxpr,
                                 prevent_cse=prevent_cse, differentiated=False, policy=policy)
        return traced.out_tree.unflatten(outs)
    return remat_fun


remat = checkpoint

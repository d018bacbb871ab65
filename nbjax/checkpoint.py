"""``checkpoint`` (``remat``): trade compute for memory in reverse mode.

The function becomes one ``checkpoint`` equation. Its JVP stages the tangent computation,
*including the primal computation it needs*, as a second checkpoint equation whose only
residuals are the inputs; transposing it re-runs the primal part in the backward pass
instead of storing intermediate values. A ``policy`` names intermediate values worth
keeping after all (the products, say, or values tagged with ``checkpoint_name``): the
forward call returns them too, and the tangent call takes them instead of recomputing them.
"""

import functools
from typing import NamedTuple

from .calls import CallRules, FlatCall, Traced, as_array, static_positions
from .core import ClosedJaxpr, Jaxpr, Primitive, Var, get_aval, has_effect, pytree
from .interpreters import ad, staging
from .interpreters.transpose import backward_pass, is_undefined
from .lax.standard import owned_results

checkpoint_p = Primitive("checkpoint", multiple_results=True)
checkpoint_p.call_param = "jaxpr"
# Batching is a call's; the JVP and transpose are what make it a checkpoint.
CallRules(checkpoint_p).register("abstract_eval", "impl", "batch")

# ``checkpoint_name``'s tag: the identity, for policies to recognise a value by.
name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda x, *, name: owned_results([x])[0])
ad.deflinear(name_p, lambda ct, x, *, name: [name_p.bind(ct, name=name)])
name_p.def_batch(lambda axis_data, vals, dims, *, name: (name_p.bind(vals[0], name=name),
                                                          dims[0]))
name_p.def_lowering("jaxpr", lambda x, *, name: x)  # compiled away


def checkpoint_name(x, name):
    """``x`` (a pytree) tagged ``name``, for policies such as ``save_only_these_names``."""
    return pytree.tree_map(lambda leaf: name_p.bind(as_array(leaf), name=name), x)


class _Decision:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


# What a policy may answer besides True/False (JAX's values): keep, recompute, or keep in
# another memory (the host's, on an accelerator; here there is one memory, so: keep).
Saveable, Recompute = _Decision("Saveable"), _Decision("Recompute")


class Offloadable(NamedTuple):
    src: str
    dst: str


@checkpoint_p.def_jvp
def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    nonzeros = [not isinstance(t, ad.Zero) for t in tangents]
    jvp_closed, out_nonzeros = ad.jvp_jaxpr(jaxpr, nonzeros, True)
    n_out = len(jaxpr.out_avals)
    forward, tangent_only, n_saved = _split(jvp_closed, len(primals), n_out, policy)
    outs = checkpoint_p.bind(*primals, jaxpr=forward or jaxpr, prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    outs, saved = outs[:n_out], outs[n_out:]
    nz_tangents = [t for t in tangents if not isinstance(t, ad.Zero)]
    tangent_outs = checkpoint_p.bind(*primals, *saved, *nz_tangents, jaxpr=tangent_only,
                                     prevent_cse=prevent_cse, differentiated=True, policy=policy)
    return outs, tangent_outs


def _split(jvp_closed, n_primals, n_out, policy):
    """``(forward, tangent_only, n_saved)`` from the JVP of a checkpointed function.

    ``tangent_only`` computes the tangent outputs from the primals, the values ``policy``
    lets the forward pass keep (``n_saved`` of them) and the tangents, recomputing every
    other primal value it needs. ``forward`` returns the primal outputs and the saved
    values, or is None when nothing is saved (the checkpointed jaxpr itself serves)."""
    jaxpr = jvp_closed.jaxpr
    primal_outs, tangent_outs = jaxpr.outvars[:n_out], jaxpr.outvars[n_out:]
    primal_eqns, saveable = _primal_part(jaxpr, n_primals, policy)
    needed, saved = _live(jaxpr.eqns, tangent_outs, cut=saveable, keep=has_effect)
    primal_invars, tangent_invars = jaxpr.invars[:n_primals], jaxpr.invars[n_primals:]
    tangent_only = ClosedJaxpr(Jaxpr(jaxpr.constvars, primal_invars + saved + tangent_invars,
                                     tangent_outs, needed), jvp_closed.consts)
    if not saved:
        return None, tangent_only, 0
    kept, _ = _live(primal_eqns, primal_outs + saved, cut=set(), keep=has_effect)
    forward = ClosedJaxpr(Jaxpr(jaxpr.constvars, primal_invars, primal_outs + saved, kept),
                          jvp_closed.consts)
    return forward, tangent_only, len(saved)


def _primal_part(jaxpr, n_primals, policy):
    """``(equations, saveable)``: the equations computed from the primals alone (no
    tangent), and those of their results that ``policy`` lets the forward pass keep."""
    known = set(jaxpr.constvars) | set(jaxpr.invars[:n_primals])
    equations, saveable = [], set()
    for eqn in jaxpr.eqns:
        if all(not isinstance(a, Var) or a in known for a in eqn.invars):
            equations.append(eqn)
            known.update(eqn.outvars)
            if policy is not None and _saves(policy, eqn):
                saveable.update(eqn.outvars)
    return equations, saveable


def _saves(policy, eqn):
    """Whether ``policy`` (called as JAX calls one: the primitive, its operand types, its
    params) keeps the results of ``eqn``: True, ``Saveable`` or an ``Offloadable`` (one
    memory here, so offloading is keeping)."""
    decision = policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params)
    return decision is not Recompute and bool(decision)


def _live(eqns, outputs, cut, keep=lambda eqn: False):
    """``(equations, inputs)``: the equations that ``outputs`` need, in order, computing
    none of the values in ``cut``, which become ``inputs`` instead (in the order of the
    equations that computed them); ``keep`` marks equations kept regardless (effects)."""
    live = {a for a in outputs if isinstance(a, Var)}
    needed, inputs = [], []
    for eqn in reversed(eqns):
        if not (keep(eqn) or any(v in live for v in eqn.outvars)):
            continue
        if cut and all(v in cut for v in eqn.outvars):
            inputs += [v for v in reversed(eqn.outvars) if v in live]
            continue
        needed.append(eqn)
        live.update(a for a in eqn.invars if isinstance(a, Var))
    return needed[::-1], inputs[::-1]


@checkpoint_p.def_transpose
def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    linear = [is_undefined(a) for a in args]
    nonlinear = [a for a in args if not is_undefined(a)]
    cts_in = backward_pass(jaxpr.jaxpr, list(jaxpr.consts) + nonlinear, cts, linear)
    return [ad.instantiate(c) if lin else None for c, lin in zip(cts_in, linear)]


_REMOVED = object()  # (the default of an option JAX removed: giving it at all is refused)


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=(), static_argnames=(),
               concrete=_REMOVED):
    """Make ``fun`` recompute its intermediate values in the backward pass (as jax.checkpoint),
    except those ``policy`` saves (see ``checkpoint_policies``)."""
    if concrete is not _REMOVED:
        raise NotImplementedError(
            "The `concrete` option to `jax.checkpoint` was deprecated in JAX v0.8.2, and removed "
            "in JAX v0.10.0. In its place please use `static_argnums`; for details refer to "
            "https://docs.jax.dev/en/latest/jep/11830-new-remat-checkpoint.html.")
    static_argnames = (static_argnames,) if isinstance(static_argnames, str) else \
        tuple(static_argnames)

    @functools.wraps(fun)
    def remat_fun(*args, **kwargs):
        call = FlatCall(fun, args, kwargs, static_positions(static_argnums, len(args)),
                        static_argnames)
        leaves = [as_array(x) for x in call.leaves]
        traced = Traced(call, [get_aval(x) for x in leaves],
                        staging.describe(fun, "checkpoint"))
        outs = checkpoint_p.bind(*traced.consts, *leaves, jaxpr=traced.jaxpr,
                                 prevent_cse=prevent_cse, differentiated=False, policy=policy)
        return traced.out_tree.unflatten(outs)
    return remat_fun


remat = checkpoint

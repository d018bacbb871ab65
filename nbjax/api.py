"""The user-facing transformations: make_jaxpr and autodiff (jvp, linearize, vjp, grad,
value_and_grad, jacfwd, jacrev, hessian). jit lives in jit.py, vmap in vmap.py and pmap in
pmap.py (both re-exported here), custom rules in custom_derivatives.py, checkpoint in
checkpoint.py; what their front ends share, in calls.py."""

import contextlib
import functools

import numpy as np

from .calls import FlatCall, abstractify, as_array, static_positions
from .core import (Array, ClosedJaxpr, EvalTrace, Trace, Tracer, eval_jaxpr, get_aval,
                   new_trace, pytree, set_current_trace, valid_value)
from .core import dtypes
from .core.abstract import ShapeDtypeStruct, ShapedArray
from . import lax
from .interpreters import ad, partial_eval, staging, transpose
from .jit import jit
from .lax.parallel import AxisFrame, extend_axis_env
from .pmap import pmap  # noqa: F401  (the user-facing transformations, with the others)
from .vmap import vmap


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False):
    """``make_jaxpr(f)(*args)``: the jaxpr ``f`` computes on arguments like ``args``.

    Arguments may be arrays, scalars, ``ShapeDtypeStruct``-likes or ShapedArrays (only their
    shape and dtype matter); ``static_argnums`` are passed to ``f`` as Python values.
    ``axis_env``, pairs ``(name, size)``, binds named axes as pmap would, so that a function
    with collectives (``lax.psum(x, "i")``) can be traced on its own.
    """
    @functools.wraps(fun)
    def make(*args, **kwargs):
        call = FlatCall(fun, args, kwargs, static_positions(static_argnums, len(args)))
        in_avals = [abstractify(x) for x in call.leaves]
        desc = staging.describe(fun, "make_jaxpr")
        with contextlib.ExitStack() as axes:
            for name, size in axis_env or ():
                axes.enter_context(extend_axis_env(AxisFrame(name, size)))
            jaxpr, consts = staging.trace_to_jaxpr(call, in_avals, desc)
        closed = ClosedJaxpr(jaxpr, consts)
        if return_shape:
            return closed, call.out_tree.unflatten([ShapeDtypeStruct(
                a.shape, a.dtype, weak_type=a.weak_type) for a in jaxpr.out_avals])
        return closed
    return make


# --- autodiff ------------------------------------------------------------------------------

def _flat_fun(fun, in_tree, out_trees):
    """``fun`` on flat leaves; records the output tree in ``out_trees``."""
    def flat(*leaves):
        args = in_tree.unflatten(leaves)
        out = fun(*args)
        leaves_out, tree = pytree.tree_flatten(out)
        out_trees.append(tree)
        return leaves_out
    return flat


def _to_arrays(leaves):
    return [as_array(x) for x in leaves]


def jvp(fun, primals, tangents, has_aux=False):
    """Forward mode: ``(fun(*primals), J @ tangents)`` for pytrees of arrays."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    flat_p, tree_p = pytree.tree_flatten(tuple(primals))
    flat_t, tree_t = pytree.tree_flatten(tuple(tangents))
    if tree_p != tree_t:
        raise TypeError("primal and tangent arguments to jvp must have the same tree "
                        f"structure; primals have tree structure {tree_p} whereas tangents "
                        f"have tree structure {tree_t}.")
    flat_p, flat_t = _to_arrays(flat_p), _to_arrays(flat_t)
    for p, t in zip(flat_p, flat_t):
        _check_tangent(get_aval(p), get_aval(t))
    out_trees = []
    fn = _aux_split(fun, has_aux)
    outs, touts = ad.jvp_flat(_flat_fun(fn, tree_p, out_trees), flat_p, flat_t,
                              staging.describe(fun, "jvp"))
    tree = out_trees[0]
    touts = [ad.instantiate(t) for t in touts]
    return _aux_join(tree, outs, touts, has_aux)


def _check_tangent(p, t):
    expected = ad.tangent_aval(p)
    if t.dtype != expected.dtype:
        raise TypeError(
            "primal and tangent arguments to jvp do not match; dtypes must be equal, or in case "
            f"of int/bool primal dtype the tangent dtype must be float0. Got primal dtype "
            f"{p.dtype.name} and so expected tangent dtype {expected.dtype.name}, but got "
            f"tangent dtype {t.dtype.name} instead.")
    if t.shape != p.shape:
        raise ValueError("jvp called with different primal and tangent shapes; Got primal "
                         f"shape {p.shape} and tangent shape as {t.shape}")


def _check_linearized_tangent(p, t):
    """A tangent given to ``linearize``'s function must have its primal's tangent type; JAX
    0.10 refuses any other (shape or dtype) with one ValueError, where ``jvp`` refuses a
    dtype with a TypeError."""
    expected = ad.tangent_aval(p)
    if t.shape != p.shape or t.dtype != expected.dtype:
        raise ValueError("linearized function called on tangent values inconsistent with the "
                         f"original primal values:\nGot tangent aval {t.str_short()} for "
                         f"primal aval {p.str_short()} but expected {expected.str_short()}.")


def _aux_split(fun, has_aux):
    """With has_aux, ``fun`` returns ``(out, aux)``: differentiate ``out``, carry ``aux``."""
    if not has_aux:
        return fun

    def main(*args):
        out = fun(*args)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("has_aux=True requires the function to return a pair (output, "
                            f"auxiliary data), got {type(out).__name__}.")
        return out[0], _AuxBox(out[1])
    return main


class _AuxBox:
    """Auxiliary outputs (has_aux=True), travelling with the main ones but not differentiated.
    Its leaves that are arrays or scalars travel as outputs (traced ones come out as their
    values); any other leaf (a string, an object) is handed back as it is, as in JAX."""

    def __init__(self, value):
        self.value = value

    def flatten(self):
        leaves, tree = pytree.tree_flatten(self.value)
        kept = tuple((i, x) for i, x in enumerate(leaves) if not valid_value(x))
        return [x for x in leaves if valid_value(x)], (tree, kept)

    @staticmethod
    def unflatten(aux_data, values):
        tree, kept = aux_data
        leaves, values = [None] * tree.num_leaves, iter(values)
        for i, x in kept:
            leaves[i] = x
        kept_at = {i for i, _ in kept}
        leaves = [x if i in kept_at else next(values) for i, x in enumerate(leaves)]
        return _AuxBox(tree.unflatten(leaves))


pytree.register_pytree_node(_AuxBox, _AuxBox.flatten, _AuxBox.unflatten)


def _aux_join(tree, outs, touts, has_aux):
    if not has_aux:
        return tree.unflatten(outs), tree.unflatten(touts)
    out, aux = tree.unflatten(outs)
    n_main = len(pytree.tree_leaves(out))
    tout = pytree.tree_structure(out).unflatten(touts[:n_main])
    return out, tout, aux.value


def linearize(fun, *primals, has_aux=False):
    """``(fun(*primals), f_jvp)``, and ``aux`` with ``has_aux``: f_jvp evaluates the linear
    map (a staged jaxpr)."""
    flat_p, in_tree = pytree.tree_flatten(primals)
    flat_p = _to_arrays(flat_p)
    out_trees = []
    outs, jaxpr, residuals = partial_eval.linearize_flat(
        _flat_fun(_aux_split(fun, has_aux), in_tree, out_trees), flat_p,
        staging.describe(fun, "linearize"))
    out_tree, aux = _without_aux(out_trees[0], outs, has_aux)
    n = out_tree.num_leaves

    def f_jvp(*tangents):
        flat_t, tree_t = pytree.tree_flatten(tangents)
        if tree_t != in_tree:
            raise TypeError(f"linearized function called with tangents of structure {tree_t}, "
                            f"expected {in_tree}")
        for p, t in zip(flat_p, _to_arrays(flat_t)):
            _check_linearized_tangent(get_aval(p), get_aval(t))
        return out_tree.unflatten(eval_jaxpr(jaxpr, residuals, *flat_t)[:n])
    f_jvp.jaxpr = ClosedJaxpr(jaxpr, residuals)
    out = out_tree.unflatten(outs[:n])
    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


def _without_aux(out_tree, outs, has_aux):
    """``(the tree of the differentiated outputs, aux)``: with ``has_aux``, ``outs`` (flat)
    ends with the aux outputs' leaves, which the function's VJP or JVP leaves out."""
    if not has_aux:
        return out_tree, None
    out_tree, aux_tree = out_tree.children()
    return out_tree, aux_tree.unflatten(outs[out_tree.num_leaves:]).value


def _no_reduce_axes(reduce_axes, what):
    """JAX 0.10 still takes ``reduce_axes``, only to refuse it when given."""
    if reduce_axes:
        raise NotImplementedError(f"reduce_axes argument to {what} is deprecated")


def vjp(fun, *primals, has_aux=False, reduce_axes=()):
    """``(fun(*primals), vjp_fun)``: vjp_fun maps an output cotangent to input cotangents."""
    _no_reduce_axes(reduce_axes, "vjp")
    out, vjp_fun, aux = _linearized(fun, primals, has_aux, "vjp")
    return (out, vjp_fun, aux) if has_aux else (out, vjp_fun)


def _linearized(fun, primals, has_aux, what):
    """``(fun(*primals), its VJP, aux)``, ``aux`` None unless ``has_aux``."""
    flat_p, in_tree = pytree.tree_flatten(primals)
    out_trees = []
    flat_fn = _flat_fun(_aux_split(fun, has_aux), in_tree, out_trees)
    outs, jaxpr, residuals = partial_eval.linearize_flat(flat_fn, _to_arrays(flat_p),
                                                         staging.describe(fun, what))
    out_tree, aux = _without_aux(out_trees[0], outs, has_aux)  # (aux: zero cotangents)
    vjp_fun = VJP(residuals, (jaxpr, in_tree, out_tree, tuple(get_aval(o) for o in outs)))
    return out_tree.unflatten(outs[:out_tree.num_leaves]), vjp_fun, aux


class VJP:
    """A function's backward pass at a point: called with an output cotangent, the
    cotangents of its inputs (a tuple, one per argument). A pytree whose leaves are the
    residuals (so jit passes it along) and whose static part is the linear map they feed."""

    def __init__(self, residuals, backward):
        self.residuals, self.backward = list(residuals), backward

    def __call__(self, cotangent, *extra):
        jaxpr, in_tree, out_tree, out_avals = self.backward
        if extra:
            raise TypeError(f"The function returned by `jax.vjp` was called with "
                            f"{len(extra) + 1} arguments, but functions returned by `jax.vjp` "
                            f"must be called with a single argument corresponding to the "
                            f"single value returned by the function being differentiated "
                            f"(even if that returned value is a tuple or other container).")
        flat_ct, ct_tree = pytree.tree_flatten(cotangent)
        if ct_tree != out_tree:
            self._tree_error(out_tree, ct_tree)
        flat_ct = self._check(_to_arrays(flat_ct), out_avals)
        aux_zeros = [ad.Zero(ad.tangent_aval(a)) for a in out_avals[len(flat_ct):]]
        cts = transpose.backward_pass(jaxpr, self.residuals, flat_ct + aux_zeros)
        return in_tree.unflatten([ad.instantiate(c) for c in cts])

    @staticmethod
    def _tree_error(out_tree, ct_tree):
        raise ValueError(f"unexpected tree structure.\n\nThe argument to a VJP function "
                         f"returned by `jax.vjp` must match the pytree structure of the "
                         f"differentiated function's output, {out_tree}, but got {ct_tree}.")

    @staticmethod
    def _check(cts, out_avals):
        """The cotangents, checked as JAX 0.10's ``vjp`` checks them (a ValueError): each
        has its output's tangent type, up to weak typing. An output without tangents (an
        integer's, float0) takes a cotangent of any dtype of its shape, which carries
        nothing and becomes a symbolic zero."""
        checked = []
        for ct, aval in zip(cts, out_avals):
            got, expected = get_aval(ct), ad.tangent_aval(aval)
            if expected.dtype == dtypes.float0 and got.shape == aval.shape:
                checked.append(ad.Zero(expected))
                continue
            if got.shape != aval.shape or got.dtype != expected.dtype:
                raise ValueError(f"unexpected JAX type (e.g. shape/dtype) for argument to VJP "
                                 f"function: got {got.str_short()}, but expected "
                                 f"{expected.str_short()} because the corresponding output of "
                                 f"the differentiated function had JAX type "
                                 f"{aval.str_short()}")
            checked.append(ct)
        return checked


class LinearTranspose(VJP):
    """``linear_transpose``'s function: a ``VJP`` whose cotangents have the outputs' own
    types (an integer function's are integers, not float0) and whose residuals are the
    traced function's constants."""

    @staticmethod
    def _tree_error(out_tree, ct_tree):
        raise TypeError(f"cotangent tree does not match function output, expected {out_tree} "
                        f"but got {ct_tree}")

    @staticmethod
    def _check(cts, out_avals):
        got = [get_aval(ct) for ct in cts]
        if any(g.shape != a.shape or g.dtype != a.dtype for g, a in zip(got, out_avals)):
            raise TypeError("cotangent type does not match function output, expected "
                            f"{[a.str_short() for a in out_avals]} but got "
                            f"{[g.str_short() for g in got]}")
        return cts


def _register_backward(kind):
    """A backward function is a pytree: its residuals are leaves (jit passes them along)."""
    pytree.register_pytree_node(kind, lambda v: (v.residuals, v.backward),
                                lambda backward, residuals: kind(residuals, backward))


_register_backward(VJP)
_register_backward(LinearTranspose)


def fwd_and_bwd(fun, argnums, has_aux=False, jitted=True):
    """``(fwd, bwd)``: ``fwd(*args)`` is ``(fun(*args), vjp)`` (``(out, vjp, aux)`` with
    ``has_aux``) and ``bwd(vjp, cotangent)`` the cotangents of the ``argnums`` arguments, as
    ``jax.fwd_and_bwd``. ``vjp`` is a pytree of residual arrays, so with ``jitted`` (the
    default) both are jitted and ``bwd`` compiles once for a loop of ``fwd``/``bwd`` calls.
    """
    def fwd(*args):
        nums, _ = _argnums_tuple(argnums, len(args), "fwd_and_bwd")
        out, vjp_fun, aux = _linearized(_partial_on(fun, args, nums),
                                        tuple(args[i] for i in nums), has_aux, "fwd_and_bwd")
        return (out, vjp_fun, aux) if has_aux else (out, vjp_fun)

    def bwd(vjp_fun, cotangent):
        grads = vjp_fun(cotangent)
        return grads if isinstance(argnums, (tuple, list)) else grads[0]
    if jitted:
        return jit(fwd), jit(bwd)
    return fwd, bwd


def _argnums_tuple(argnums, nargs, name):
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)
    for i in nums:
        if not isinstance(i, int):
            raise TypeError(f"{name} argnums must be an int or a tuple of ints, got {argnums!r}")
    if name == "grad" and max(nums, default=-1) >= nargs:  # (JAX's errors, grad's its own)
        raise TypeError(f"differentiating with respect to argnums={argnums!r} requires at "
                        f"least {max(nums) + 1} positional arguments to be passed by the "
                        f"caller, but got only {nargs} positional arguments.")
    for i in nums:
        if not -nargs <= i < nargs:
            raise ValueError("Positional argument indices, e.g. for `static_argnums`, must "
                             "have value greater than or equal to -len(args) and less than "
                             f"len(args), but got value {i} for len(args) == {nargs}.")
    return tuple(i % nargs for i in nums), many


def _partial_on(fun, args, argnums):
    """A function of only the ``argnums`` arguments, the others fixed at ``args``."""
    def f(*dyn):
        full = list(args)
        for i, x in zip(argnums, dyn):
            full[i] = x
        return fun(*full)
    return f


def _check_complex(name, what, dt):
    if not dtypes.is_complex(dt):
        raise TypeError(f"{name} with holomorphic=True requires {what} with complex dtype, "
                        f"but got {dt.name}.")


def _check_input_dtypes(name, leaves, holomorphic, allow_int):
    """Reverse mode's (grad, jacrev) check of its inputs, as JAX's: inexact, or complex
    with ``holomorphic``; integers and bools only with ``allow_int``."""
    for x in leaves:
        dt = get_aval(x).dtype
        if holomorphic:
            _check_complex(name, "inputs", dt)
        elif not dtypes.is_inexact(dt) and not allow_int:
            raise TypeError(
                f"{name} requires real- or complex-valued inputs (input dtype that is a sub-dtype"
                f" of np.inexact), but got {dt.name}. If you want to use Boolean- or "
                "integer-valued inputs, use vjp or set allow_int to True.")


def _check_real_dtypes(name, what, leaves, holomorphic, advice):
    """Complex ``what`` (inputs or outputs) with ``holomorphic``, else real ones: a
    complex (or integer) one has no real Jacobian; ``advice`` says what to use instead."""
    for x in leaves:
        dt = get_aval(x).dtype
        if holomorphic:
            _check_complex(name, what, dt)
        elif not dtypes.is_float(dt):
            raise TypeError(f"{name} requires real-valued {what} ({what[:-1]} dtype that is a "
                            f"sub-dtype of np.floating), but got {dt.name}. {advice(dt)}")


def _check_reverse_outputs(name, leaves, holomorphic):
    """Reverse mode's (grad, jacrev) check of its outputs."""
    def advice(dt):
        if dtypes.is_complex(dt):
            return ("For holomorphic differentiation, pass holomorphic=True. For "
                    "differentiation of non-holomorphic functions involving complex outputs, "
                    "use vjp directly.")
        return "For differentiation of functions with integer outputs, use vjp directly."
    _check_real_dtypes(name, "outputs", leaves, holomorphic, advice)


def _check_forward_inputs(leaves, holomorphic):
    """jacfwd's check of its inputs: a tangent basis of a complex (or integer) input is not
    one of real directions."""
    _check_real_dtypes(
        "jacfwd", "inputs", leaves, holomorphic,
        lambda _: ("For holomorphic differentiation, pass holomorphic=True. For "
                   "differentiation of non-holomorphic functions involving complex inputs or "
                   "integer inputs, use jvp directly."))


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=()):
    """``(fun(*args), gradient)`` of a scalar-output function, by reverse mode."""
    _no_reduce_axes(reduce_axes, "grad")
    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        nums, many = _argnums_tuple(argnums, len(args), "grad")
        f = _partial_on(lambda *a: fun(*a, **kwargs), args, nums)
        dyn = [args[i] for i in nums]
        _check_input_dtypes("grad", pytree.tree_leaves(dyn), holomorphic, allow_int)
        result = vjp(f, *dyn, has_aux=has_aux)
        out, pullback = result[0], result[1]
        _check_scalar_output(out, holomorphic)
        ct = _ones_like(out)
        grads = pullback(ct)
        grads = grads if many else grads[0]
        value = (out, result[2]) if has_aux else out
        return value, grads
    return value_and_grad_f


def _check_scalar_output(out, holomorphic):
    leaves = pytree.tree_leaves(out)
    if len(leaves) != 1:
        raise TypeError("Gradient only defined for scalar-output functions; the output is a "
                        f"pytree with {len(leaves)} leaves. Use jacrev or vjp instead.")
    aval = get_aval(leaves[0])
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: "
                        f"{aval.shape}. Use jacrev (a Jacobian) or vjp for non-scalar outputs.")
    _check_reverse_outputs("grad", leaves, holomorphic)


def _ones_like(x):
    """``grad``'s output cotangent: one, of the output's type, weak type included (as JAX's:
    the gradient of a function of a Python float is then weakly typed, as its input)."""
    aval = get_aval(x)
    return Array(np.ones(aval.shape, aval.dtype), weak_type=aval.weak_type)


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """The gradient of a scalar-output function with respect to ``argnums``."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return grad_f


# --- Jacobians and Hessians (built on vmap) ------------------------------------------------

def _std_basis(leaves):
    """One-hot tangents for every element of ``leaves``, batched along a leading axis: the
    identity, its columns cut into one block per leaf. Built from iotas, as ``jnp.eye`` is,
    so that a ``jit`` computes it where it is read instead of holding it as a constant (a
    Hessian of 300 inputs read a 360 KB one across its rows; of 10,000, it would hold 400
    MB)."""
    sizes = [get_aval(x).size for x in leaves]
    total = sum(sizes)
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        aval = get_aval(x)
        shape = (total,) + aval.shape
        if dtypes.is_inexact(aval.dtype):
            rows = lax.broadcasted_iota(dtypes.int32, (total, n), 0)
            columns = lax.broadcasted_iota(dtypes.int32, (total, n), 1)
            one_hot = lax.eq(rows, lax.add(columns, np.int32(start)))
            block = lax.convert_element_type(one_hot, aval.dtype, weak_type=aval.weak_type)
            out.append(lax.reshape(block, shape))
        else:
            out.append(Array.wrap(np.zeros(shape, dtypes.float0),
                                  ShapedArray(shape, dtypes.float0)))
        start += n
    return out, total


def _jac_reshape(jac, in_leaf, out_leaf, in_first):
    """Reshape a flat Jacobian block into ``out.shape + in.shape`` (jacfwd/jacrev layout),
    typed as JAX makes it: as the output (jacfwd) or the input (jacrev) it differentiates.
    An integer's (float0) block is zeros of that integer type."""
    in_shape, out_shape = get_aval(in_leaf).shape, get_aval(out_leaf).shape
    typed_as = get_aval(out_leaf if in_first else in_leaf)
    if get_aval(jac).dtype == dtypes.float0:
        return Array(np.zeros(out_shape + in_shape, typed_as.dtype),
                     weak_type=typed_as.weak_type)
    if in_first:  # jacfwd: (in_size, *out_shape) -> (*out_shape, in_size)
        rank = get_aval(jac).ndim
        jac = lax.transpose(jac, tuple(range(1, rank)) + (0,))
    jac = lax.reshape(jac, out_shape + in_shape)
    if get_aval(jac).weak_type == typed_as.weak_type:
        return jac
    return lax.convert_element_type(jac, get_aval(jac).dtype, weak_type=typed_as.weak_type)


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian by forward mode: one JVP per input element, batched with vmap."""
    def jac_f(*args):
        nums, many = _argnums_tuple(argnums, len(args), "jacfwd")
        f = _partial_on(fun, args, nums)
        dyn = tuple(args[i] for i in nums)
        _check_forward_inputs(pytree.tree_leaves(dyn), holomorphic)
        flat_in, in_tree = pytree.tree_flatten(dyn)
        flat_in = _to_arrays(flat_in)
        basis, _ = _std_basis(flat_in)

        def push(*flat_t):
            return jvp(lambda *a: f(*in_tree.unflatten(a)), flat_in, flat_t, has_aux=has_aux)
        res = vmap(push, in_axes=(0,) * len(basis), out_axes=(None, 0, None) if has_aux
                   else (None, 0))(*basis)
        out, tangents = res[0], res[1]
        flat_out, out_tree = pytree.tree_flatten(out)
        if holomorphic:  # (as JAX: without it, jacfwd takes outputs of any dtype)
            for o in flat_out:
                _check_complex("jacfwd", "outputs", get_aval(o).dtype)
        flat_t = pytree.tree_leaves(tangents)
        blocks = _split_blocks(flat_t, flat_in)
        jac = out_tree.unflatten([
            in_tree.unflatten([_jac_reshape(b, x, o, True) for b, x in zip(bs, flat_in)])
            for bs, o in zip(blocks, flat_out)])
        jac = _select_argnums(jac, out_tree, many)
        return (jac, res[2]) if has_aux else jac
    return jac_f


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian by reverse mode: one VJP per output element, batched with vmap."""
    def jac_f(*args):
        nums, many = _argnums_tuple(argnums, len(args), "jacrev")
        f = _partial_on(fun, args, nums)
        dyn = tuple(args[i] for i in nums)
        _check_input_dtypes("jacrev", pytree.tree_leaves(dyn), holomorphic, allow_int)
        result = vjp(f, *dyn, has_aux=has_aux)
        out, pullback = result[0], result[1]
        flat_out, out_tree = pytree.tree_flatten(out)
        _check_reverse_outputs("jacrev", flat_out, holomorphic)
        basis, _ = _std_basis(_to_arrays(flat_out))
        cts = vmap(lambda *b: pullback(out_tree.unflatten(b)))(*basis)
        flat_in, in_tree = pytree.tree_flatten(dyn)
        flat_cts = pytree.tree_leaves(cts)
        # flat_cts[j] has shape (total_out, *in_j.shape); split rows by output leaf.
        jac_rows = []
        for o, rows in zip(flat_out, _split_rows(flat_cts, flat_out)):
            jac_rows.append(in_tree.unflatten([_jac_reshape(r, x, o, False)
                                               for r, x in zip(rows, flat_in)]))
        jac = out_tree.unflatten(jac_rows)
        jac = _select_argnums(jac, out_tree, many)
        return (jac, result[2]) if has_aux else jac
    return jac_f


def _split_leading(x, leaves):
    """``x`` cut along its leading axis into one block per leaf (of the leaf's size): the
    leading axis of a batched Jacobian runs over all elements of the inputs (jacfwd) or of the
    outputs (jacrev)."""
    ends = np.cumsum([get_aval(leaf).size for leaf in leaves]).tolist()
    if len(ends) == 1:
        return [x]
    return [lax.slice_in_dim(x, start, end, axis=0) for start, end in zip([0] + ends, ends)]


def _split_blocks(flat_t, flat_in):
    """jacfwd: each output tangent's blocks, one per input leaf."""
    return [_split_leading(t, flat_in) for t in flat_t]


def _split_rows(flat_cts, flat_out):
    """jacrev: for each output leaf, its rows of every input cotangent."""
    return [list(rows) for rows in zip(*(_split_leading(c, flat_out) for c in flat_cts))]


def _select_argnums(jac, out_tree, many):
    """With a single argnum the Jacobian of each output is w.r.t. that argument, not a tuple."""
    if many:
        return jac
    return out_tree.unflatten([j[0] for j in out_tree.flatten_up_to(jac)])


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Hessian: forward-over-reverse, ``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


# --- shapes, linear transposes, names, compile-time evaluation -----------------------------

jacobian = jacrev  # as jax.jacobian


def typeof(x):
    """The abstract value (shape, dtype, weak type) of an array, tracer or scalar."""
    return get_aval(x)


def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes ``fun(*args, **kwargs)`` would return, as a pytree of
    ``ShapeDtypeStruct``s, found by tracing (nothing is computed). Arguments may be
    arrays or anything with ``shape`` and ``dtype``."""
    return make_jaxpr(lambda a, k: fun(*a, **k), return_shape=True)(args, kwargs)[1]


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function ``fun`` at arguments shaped like ``primals``
    (only their types matter): ``f_t(ct)`` returns a tuple of cotangents, one per argument.

    ``fun`` is traced once, its inputs the unknowns of a linear map, and ``f_t`` transposes
    that trace, as JAX's does: an operation that is not linear in the inputs (``sin`` of
    one, a product of two) has no transpose and raises there. (A VJP taken at zero would
    quietly give the derivative at zero of a function that is not linear.)"""
    _no_reduce_axes(reduce_axes, "transpose")
    flat, in_tree = pytree.tree_flatten(primals)
    in_avals = [abstractify(p) for p in flat]
    out_trees = []
    jaxpr, consts = staging.trace_to_jaxpr(_flat_fun(fun, in_tree, out_trees), in_avals,
                                           staging.describe(fun, "linear_transpose"))
    out_avals = [v.aval for v in jaxpr.outvars]
    avals = in_avals + out_avals
    if not (all(dtypes.is_inexact(a.dtype) for a in avals)
            or all(dtypes.is_int(a.dtype) for a in avals)):
        raise TypeError("linear_transpose only supports [float or complex] -> [float or "
                        "complex], and integer -> integer functions, but got "
                        f"{[a.dtype.name for a in in_avals]} -> "
                        f"{[a.dtype.name for a in out_avals]}.")
    return LinearTranspose(consts, (jaxpr, in_tree, out_trees[0], tuple(out_avals)))


def named_call(fun, *, name=None):
    """``fun`` under another name (JAX names the call in its compiled program; nbjax's
    jaxprs inline it, so only the Python name changes)."""
    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    if name is not None:
        named.__name__ = named.__qualname__ = name
    return named


@contextlib.contextmanager
def named_scope(name):
    """``with named_scope("layer1"):`` a name for the operations in the block (JAX writes it
    into compiled programs' metadata; it never changes a result)."""
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    yield


class _CompileTimeEvalTrace(Trace):
    """Computes operations on concrete operands at once; stages the others as usual."""

    def process_primitive(self, primitive, args, params):
        concrete = not any(isinstance(a, Tracer) for a in args)
        with set_current_trace(EvalTrace() if concrete else self.parent):
            return primitive.bind(*args, **params)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """``with ensure_compile_time_eval():`` operations whose operands are all concrete are
    computed while tracing (``jnp.sin(2.0)`` inside ``jit`` is an Array, not a tracer);
    operations on traced values are traced as usual."""
    with new_trace(lambda parent: _CompileTimeEvalTrace(parent, "ensure_compile_time_eval")):
        yield

"""``custom_linear_solve`` and ``custom_root``: solvers differentiated implicitly.

An iterative solver (conjugate gradients, Newton's method) is a loop; differentiating
through its iterations is slow, memory-hungry and often wrong (the derivative of an
approximate solution is not the approximate derivative). Both functions run the user's
solver for the value and differentiate the *equation* it solves instead:

- ``custom_linear_solve(matvec, b, solve)``: ``x = A^-1 b`` where ``A = matvec``. It is one
  primitive, linear in ``b``: its JVP solves again with the right-hand side
  ``b' - A'x``, and its transpose is the same primitive on the transposed problem
  (``transpose_solve`` with ``A^T``), so reverse mode never differentiates the solver.
- ``custom_root(f, x0, solve, tangent_solve)``: ``x`` with ``f(x) = 0``. By the implicit
  function theorem ``x' = -(df/dx)^-1 (df/dparams) params'``: a primitive whose JVP rule
  calls ``tangent_solve`` on the linearisation of ``f`` at the solution (a primitive, not a
  ``custom_jvp``, because ``custom_derivatives`` sits above ``lax``).

As in JAX, the functions are traced at the call into closure-converted jaxprs whose
closed-over values (the matrix, the parameters of ``f``) become explicit operands, so
derivatives flow to them and ``jit``/``vmap`` see ordinary operands.
"""

import collections
import functools

from ..core import Primitive, ShapedArray, eval_closed_jaxpr, get_aval, pytree
from ..interpreters import ad
from ..interpreters.transpose import is_undefined, transposed_call
from . import elementwise
from .batch_util import batch_jaxpr, bdim_at_front
from .control_flow import hoist_consts, split_sizes, trace_converted
from .standard import as_array, owned_results

__all__ = ["custom_linear_solve", "custom_linear_solve_p", "linear_solve_p", "custom_root",
           "custom_root_p"]


def _avals(leaves):
    return [ShapedArray(a.shape, a.dtype) for a in map(get_aval, leaves)]


def _trace_like(what, fun, tree, avals, nargs=1):
    """``fun`` traced on ``nargs`` arguments, each a pytree ``tree`` of ``avals``:
    ``(jaxpr, consts, out_tree)``, the jaxpr taking ``consts`` first."""
    proto = tree.unflatten([0] * tree.num_leaves)
    return trace_converted(fun, pytree.tree_structure((proto,) * nargs), avals * nargs, what)


def _check_same(what, name, tree, avals, out_tree, out_avals):
    """TypeError unless a function returned the structure and types of its argument."""
    if out_tree != tree:
        raise TypeError(f"{what}() output pytree structure must match {name}, got "
                        f"{out_tree} and {tree}.")
    got = [(a.shape, a.dtype) for a in out_avals]
    want = [(a.shape, a.dtype) for a in avals]
    if got != want:
        raise TypeError(f"{what}() output shapes and dtypes must match {name}, got "
                        f"{[a.str_short() for a in out_avals]} and "
                        f"{[a.str_short() for a in avals]}.")


def _solution_tree(what, out_tree, tree, has_aux):
    """The solution's structure (and the aux's) of a solver's output: ``x`` or ``(x, aux)``."""
    if has_aux:
        children = out_tree.children() if out_tree.node_class in (tuple, list) else []
        if len(children) != 2:
            raise TypeError(f"{what}() with has_aux=True must return a pair (solution, aux), "
                            f"got a tree of structure {out_tree}.")
        x_tree, aux_tree = children
    else:
        x_tree, aux_tree = out_tree, None
    if x_tree != tree:
        raise TypeError(f"{what}() output pytree structure must match b, got {x_tree} and "
                        f"{tree}.")
    return aux_tree


# --- custom_linear_solve -------------------------------------------------------------------

# One entry per function of a linear solve: A, A^T, A^-1 and A^-T (None where absent).
LinearSolveTuple = collections.namedtuple("LinearSolveTuple",
                                          "matvec vecmat solve transpose_solve")


def _transposed(t):
    """The functions of the transposed problem ``A^T y = c``."""
    return LinearSolveTuple(t.vecmat, t.matvec, t.transpose_solve, t.solve)


custom_linear_solve_p = Primitive("custom_linear_solve", multiple_results=True)
linear_solve_p = custom_linear_solve_p  # JAX's name for it in jax.lax


def _operands(args, const_lengths):
    """``(LinearSolveTuple of const lists, b leaves)``."""
    *consts, b = split_sizes(args, const_lengths)
    return LinearSolveTuple(*consts), b


def _runs_its_solver(prim, solver_operands):
    """What both solver primitives share: their value is the user's solver (the ``solve``
    of their ``jaxprs``) run on ``solver_operands(operands, const_lengths)``, eagerly and in
    compiled programs; their other functions only serve transformations."""
    def outputs(*args, const_lengths, jaxprs):
        return eval_closed_jaxpr(jaxprs.solve, *solver_operands(args, const_lengths))
    prim.def_abstract_eval(lambda *avals, const_lengths, jaxprs: list(jaxprs.solve.out_avals))
    prim.def_impl(lambda *args, **params: owned_results(outputs(*args, **params)))
    prim.def_lowering("jaxpr", outputs)


def _linear_solve_operands(args, const_lengths):
    consts, b = _operands(args, const_lengths)
    return [*consts.solve, *b]


_runs_its_solver(custom_linear_solve_p, _linear_solve_operands)


def _linear_solve_jvp(primals, tangents, *, const_lengths, jaxprs):
    """``x' = A^-1 (b' - A' x)``: the solve again, on the tangent right-hand side (the
    tangents of the solver's own operands do not matter: it only has to invert ``A``)."""
    consts, _ = _operands(primals, const_lengths)
    const_tangents, b_dot = _operands(tangents, const_lengths)
    outs = custom_linear_solve_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    x, aux = outs[:len(b_dot)], outs[len(b_dot):]
    aux_dot = [ad.Zero(ad.tangent_aval(get_aval(a))) for a in aux]
    matvec_nonzero = [not isinstance(t, ad.Zero) for t in const_tangents.matvec]
    rhs = list(b_dot)
    if any(matvec_nonzero):
        jvp, _ = ad.jvp_jaxpr(jaxprs.matvec, matvec_nonzero + [False] * len(x), True)
        a_dot_x = eval_closed_jaxpr(
            jvp, *consts.matvec, *x,
            *[t for t, nz in zip(const_tangents.matvec, matvec_nonzero) if nz])[len(x):]
        rhs = [elementwise.neg(d) if isinstance(r, ad.Zero) else elementwise.sub(r, d)
               for r, d in zip(rhs, a_dot_x)]
    if all(isinstance(r, ad.Zero) for r in rhs):
        return outs, [ad.Zero(ad.tangent_aval(get_aval(v))) for v in x] + aux_dot
    rhs = [ad.instantiate(r) for r in rhs]
    n_consts = sum(const_lengths)
    x_dot = custom_linear_solve_p.bind(*primals[:n_consts], *rhs, const_lengths=const_lengths,
                                       jaxprs=jaxprs)[:len(x)]
    return outs, x_dot + aux_dot


custom_linear_solve_p.def_jvp(_linear_solve_jvp)


def _linear_solve_transpose(cts, *args, const_lengths, jaxprs):
    """The cotangent of ``b`` is ``A^-T`` of the solution's cotangent: the same primitive
    on the transposed problem."""
    if jaxprs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic "
                        "differentiation of custom_linear_solve")
    consts, b = _operands(args, const_lengths)
    if any(is_undefined(c) for group in consts for c in group):
        raise NotImplementedError("custom_linear_solve cannot be transposed with respect to "
                                  "the values its functions close over")
    cts_x = [ad.zeros_like_aval(get_aval(x) if not is_undefined(x) else x.aval)
             if isinstance(c, ad.Zero) else c for c, x in zip(cts[:len(b)], b)]
    flipped = _transposed(consts)
    cts_b = custom_linear_solve_p.bind(
        *[c for group in flipped for c in group], *cts_x,
        const_lengths=_transposed(const_lengths), jaxprs=_transposed(jaxprs))[:len(b)]
    return [None] * sum(const_lengths) + [ct if is_undefined(x) else None
                                          for ct, x in zip(cts_b, b)]


custom_linear_solve_p.def_transpose(_linear_solve_transpose)


def _linear_solve_batch(axis_data, vals, dims, *, const_lengths, jaxprs):
    """vmap: ``b`` and the solution are always batched (the batch axis first); each
    function is batched over its batched consts and ``b``."""
    consts, b = _operands(vals, const_lengths)
    const_dims, b_dims = _operands(dims, const_lengths)
    b = [bdim_at_front(v, d, axis_data.size) for v, d in zip(b, b_dims)]
    new_consts, new_jaxprs = [], []
    for group, group_dims, jaxpr in zip(consts, const_dims, jaxprs):
        batched = [d is not None for d in group_dims]
        group = [bdim_at_front(v, d, axis_data.size) if d is not None else v
                 for v, d in zip(group, group_dims)]
        if jaxpr is not None:
            jaxpr, extra = hoist_consts(batch_jaxpr(jaxpr, axis_data, batched + [True] * len(b),
                                              True)[0])
            group = extra + group
        new_consts.append(group)
        new_jaxprs.append(jaxpr)
    outs = custom_linear_solve_p.bind(
        *[c for group in new_consts for c in group], *b,
        const_lengths=LinearSolveTuple(*[len(g) for g in new_consts]),
        jaxprs=LinearSolveTuple(*new_jaxprs))
    return outs, [0] * len(outs)


custom_linear_solve_p.def_batch(_linear_solve_batch)


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """``x`` solving ``matvec(x) = b``, computed by ``solve(matvec, b)``, with derivatives
    from the linear equation rather than from ``solve``'s steps.

    ``matvec`` must be linear; ``solve(matvec, b)`` (and ``transpose_solve(vecmat, b)``,
    needed for reverse mode unless ``symmetric``, when ``solve`` serves for both) returns a
    pytree like ``b``, or ``(x, aux)`` with ``has_aux`` (then ``(x, aux)`` is returned;
    ``aux`` gets no derivative).
    """
    b_flat, tree = pytree.tree_flatten(b)
    b_flat = [as_array(v) for v in b_flat]
    avals = _avals(b_flat)
    matvec_jaxpr, matvec_consts, out_tree = _trace_like("matvec", matvec, tree, avals)
    _check_same("matvec", "b", tree, avals, out_tree, matvec_jaxpr.out_avals)

    def traced_solver(what, fun, linear_fun):
        jaxpr, consts, out_tree = _trace_like(what, functools.partial(fun, linear_fun),
                                              tree, avals)
        aux_tree = _solution_tree(what, out_tree, tree, has_aux)
        _check_same(what, "b", tree, avals, tree, jaxpr.out_avals[:len(b_flat)])
        return jaxpr, consts, aux_tree

    solve_jaxpr, solve_consts, aux_tree = traced_solver("solve", solve, matvec)
    vecmat_jaxpr = tr_jaxpr = None
    vecmat_consts, tr_consts = [], []
    if symmetric:
        vecmat_jaxpr, vecmat_consts = matvec_jaxpr, matvec_consts
        tr_jaxpr, tr_consts = solve_jaxpr, solve_consts
    elif transpose_solve is not None:
        transposed = transposed_call(matvec_jaxpr, [False] * len(matvec_consts) +
                                     [True] * len(b_flat))

        def vecmat(y):
            return tree.unflatten(transposed(*matvec_consts, *pytree.tree_leaves(y)))
        vecmat_jaxpr, vecmat_consts, _ = _trace_like("vecmat", vecmat, tree, avals)
        tr_jaxpr, tr_consts, _ = traced_solver("transpose_solve", transpose_solve, vecmat)
    consts = LinearSolveTuple(matvec_consts, vecmat_consts, solve_consts, tr_consts)
    outs = custom_linear_solve_p.bind(
        *[c for group in consts for c in group], *b_flat,
        const_lengths=LinearSolveTuple(*[len(g) for g in consts]),
        jaxprs=LinearSolveTuple(matvec_jaxpr, vecmat_jaxpr, solve_jaxpr, tr_jaxpr))
    x = tree.unflatten(outs[:len(b_flat)])
    return (x, aux_tree.unflatten(outs[len(b_flat):])) if has_aux else x


# --- custom_root ---------------------------------------------------------------------------

def _jvp_of(closed, primals, tangents):
    """The tangents of ``closed``'s outputs at ``primals`` along ``tangents``."""
    return ad.jvp_flat(lambda *p: eval_closed_jaxpr(closed, *p), primals, tangents)[1]


def _linearized(f_flat, tree, x_leaves):
    """``t -> df(x)[t]``: the function ``tangent_solve`` receives, on pytrees like ``x``."""
    def g(t):
        t_leaves = [elementwise.convert_element_type(v, get_aval(x).dtype)
                    for v, x in zip(pytree.tree_leaves(t), x_leaves)]
        return tree.unflatten([ad.instantiate(d) for d in
                               ad.jvp_flat(f_flat, x_leaves, t_leaves)[1]])
    return g


# The functions of a root-finding problem: f, the solver, and the tangent-space solver
# (which also linearises f at the root).
RootJaxprs = collections.namedtuple("RootJaxprs", "f solve tangent_solve")

custom_root_p = Primitive("custom_root", multiple_results=True)


def _root_operands(args, const_lengths):
    _, solve_consts, _, guess = split_sizes(args, const_lengths)
    return [*solve_consts, *guess]


_runs_its_solver(custom_root_p, _root_operands)


def _root_jvp(primals, tangents, *, const_lengths, jaxprs):
    """The implicit function theorem: ``f(params, x(params)) = 0``, so
    ``df/dx x' = -df/dparams params'``, solved by ``tangent_solve``. The guess and the
    solver's own values get no derivative."""
    f_consts, _, ls_consts, guess = split_sizes(primals, const_lengths)
    outs = custom_root_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    x, aux = outs[:len(guess)], outs[len(guess):]
    aux_dot = [ad.Zero(ad.tangent_aval(get_aval(a))) for a in aux]
    f_dot = tangents[:len(f_consts)]
    if all(isinstance(t, ad.Zero) for t in f_dot):
        return outs, [ad.Zero(ad.tangent_aval(get_aval(v))) for v in x] + aux_dot
    rhs = _jvp_of(jaxprs.f, list(f_consts) + list(x),
                  list(f_dot) + [ad.Zero(ad.tangent_aval(get_aval(v))) for v in x])
    x_dot = eval_closed_jaxpr(jaxprs.tangent_solve, *ls_consts, *x,
                              *[ad.instantiate(r) for r in rhs])
    return outs, [elementwise.neg(d) for d in x_dot] + aux_dot


custom_root_p.def_jvp(_root_jvp)


def _root_batch(axis_data, vals, dims, *, const_lengths, jaxprs):
    """vmap: every operand gets the batch axis first and each function is batched over all
    of its inputs (the solution and the values it closes over usually all vary)."""
    vals = [bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
    *groups, guess = split_sizes(vals, const_lengths)
    new_groups, new_jaxprs = [], []
    for group, jaxpr in zip(groups, jaxprs):
        n_in = len(jaxpr.in_avals)
        batched, extra = hoist_consts(batch_jaxpr(jaxpr, axis_data, [True] * n_in, True)[0])
        new_groups.append(extra + group)
        new_jaxprs.append(batched)
    outs = custom_root_p.bind(*[v for g in new_groups for v in g], *guess,
                              const_lengths=tuple(len(g) for g in new_groups),
                              jaxprs=RootJaxprs(*new_jaxprs))
    return outs, [0] * len(outs)


custom_root_p.def_batch(_root_batch)


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """A root of ``f`` found by ``solve(f, initial_guess)``, differentiated implicitly.

    The derivative of the root with respect to values ``f`` closes over comes from the
    implicit function theorem: ``tangent_solve(g, y)`` must solve the linear system
    ``g(x) = y`` for ``g`` the linearisation of ``f`` at the root (``lambda g, y: y / g(1.0)``
    for a scalar; ``custom_linear_solve`` for a vector). ``solve``'s own steps are never
    differentiated, and the root does not depend on ``initial_guess``. With ``has_aux``,
    ``solve`` returns ``(root, aux)`` and so does this function.
    """
    guess, tree = pytree.tree_flatten(initial_guess)
    guess = [as_array(v) for v in guess]
    avals = _avals(guess)
    f_jaxpr, f_consts, out_tree = _trace_like("f", f, tree, avals)
    _check_same("f", "initial_guess", tree, avals, out_tree, f_jaxpr.out_avals)
    solve_jaxpr, solve_consts, sol_tree = _trace_like(
        "solve", functools.partial(solve, f), tree, avals)
    aux_tree = _solution_tree("solve", sol_tree, tree, has_aux)
    _check_same("solve", "initial_guess", tree, avals, tree,
                solve_jaxpr.out_avals[:len(guess)])

    def linearize_and_solve(x, rhs):
        g = _linearized(lambda *v: eval_closed_jaxpr(f_jaxpr, *f_consts, *v), tree,
                        pytree.tree_leaves(x))
        return tangent_solve(g, rhs)
    ls_jaxpr, ls_consts, ls_tree = _trace_like("tangent_solve", linearize_and_solve, tree,
                                               avals, nargs=2)
    _check_same("tangent_solve", "initial_guess", tree, avals, ls_tree, ls_jaxpr.out_avals)
    outs = custom_root_p.bind(*f_consts, *solve_consts, *ls_consts, *guess,
                              const_lengths=(len(f_consts), len(solve_consts), len(ls_consts)),
                              jaxprs=RootJaxprs(f_jaxpr, solve_jaxpr, ls_jaxpr))
    x = tree.unflatten(outs[:len(guess)])
    return (x, aux_tree.unflatten(outs[len(guess):])) if has_aux else x

"""``nbjax.scipy.sparse.linalg``: Krylov solvers for ``A x = b``: ``cg``, ``bicgstab``,
``gmres``, as ``jax.scipy.sparse.linalg``.

``A`` and the preconditioner ``M`` (which approximates ``A^-1``) are square matrices or
linear functions of a pytree shaped like ``b``. Each solver stops at SciPy's (non-legacy)
test ``||r|| <= max(tol ||b||, atol)`` or after ``maxiter`` steps, and returns ``(x,
None)``; gmres returns ``(x, info)``, ``info`` -1 where ``x`` is NaN, else 0, as JAX 0.10.2.

The algorithms work on one flat vector: ``b`` is raveled (``flatten_util``) and ``A``, ``M``
act on such vectors, so each reads as in a textbook. Each is a ``lax.while_loop`` (so it
runs eagerly, under ``jit`` and under ``vmap``) inside ``lax.custom_linear_solve``, so
derivatives solve the transposed system rather than differentiate the iterations: they are
as accurate as that second solve.
"""

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...flatten_util import ravel_pytree
from ...tree_util import tree_leaves, tree_map, tree_structure

__all__ = ["cg", "gmres", "bicgstab"]


# --- what the solvers share ------------------------------------------------------------------

def _as_function(operator):
    """``operator`` (a function of pytrees, or a square matrix) as a function."""
    if callable(operator):
        return operator
    if not hasattr(operator, "shape"):
        raise TypeError(f"linear operator must be either a function or ndarray: {operator}")
    shape = np.shape(operator)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"linear operator must be a square matrix, but has shape: {shape}")
    return lambda x: jnp.matmul(operator, x)


def _shapes(tree):
    return [np.shape(leaf) for leaf in tree_leaves(tree)]


def _prepare(A, b, x0, M, check_shapes=True):
    """``A`` and ``M`` as functions, ``b`` and ``x0`` (zeros unless given) as arrays."""
    A = _as_function(A)
    M = (lambda x: x) if M is None else _as_function(M)
    b = tree_map(jnp.asarray, b)
    x0 = tree_map(jnp.zeros_like, b) if x0 is None else tree_map(jnp.asarray, x0)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError("x0 and b must have matching tree structure: "
                         f"{tree_structure(x0)} vs {tree_structure(b)}")
    if check_shapes and _shapes(x0) != _shapes(b):
        raise ValueError(f"arrays in x0 and b must have matching shapes: {_shapes(x0)} vs "
                         f"{_shapes(b)}")
    return A, b, x0, M


def _solve_flat(method, x0, M, **options):
    """The ``solve(matvec, b)`` of ``custom_linear_solve``: ``method(A, b, x0, M,
    **options)`` on the raveled ``b`` and ``x0``, with ``matvec`` (the operator, or its
    transpose for a transposed solve) and ``M`` acting on flat vectors."""
    def solve(matvec, b):
        flat_b, unravel = ravel_pytree(b)
        flat_x0 = ravel_pytree(x0)[0].astype(flat_b.dtype)
        return unravel(method(_on_vectors(matvec, unravel), flat_b, flat_x0,
                              _on_vectors(M, unravel), **options))
    return solve


def _on_vectors(operator, unravel):
    """A function of pytrees (``unravel`` makes one of a flat vector) on flat vectors."""
    return lambda v: ravel_pytree(operator(unravel(v)))[0].astype(v.dtype)


def _inner(u, v):
    """``u^H v``."""
    return jnp.vdot(u, v)


def _norm(v):
    return jnp.sqrt(_inner(v, v).real)


def _squared_bound(b, tol, atol):
    """SciPy's stopping bound on ``||r||^2``: ``max(tol^2 ||b||^2, atol^2)``."""
    return jnp.maximum(tol ** 2 * _inner(b, b).real, atol ** 2)


def _solve(method, A, b, x0, M, symmetric=False, **options):
    """``method`` solving ``A x = b``, and the transposed system for derivatives."""
    solve = _solve_flat(method, x0, M, **options)
    return lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve,
                                   symmetric=symmetric)


# --- conjugate gradients and BiCGSTAB ---------------------------------------------------------

def _cg(A, b, x0, M, *, bound, maxiter):
    """Preconditioned conjugate gradients: the search directions ``p`` are A-conjugate, so
    each step minimises the error's A-norm over one more direction."""
    r = b - A(x0)
    z = M(r)
    rz = _inner(r, z).real

    def going(state):
        _, r, _, _, k = state
        return (_inner(r, r).real > bound) & (k < maxiter)

    def step(state):
        x, r, p, rz, k = state
        Ap = A(p)
        alpha = (rz / _inner(p, Ap).real).astype(b.dtype)
        x, r = x + alpha * p, r - alpha * Ap
        z = M(r)
        rz_next = _inner(r, z).real
        return x, r, z + (rz_next / rz).astype(b.dtype) * p, rz_next, k + 1
    return lax.while_loop(going, step, (x0, r, z, rz, 0))[0]


def _bicgstab(A, b, x0, M, *, bound, maxiter):
    """Van der Vorst's BiCGSTAB, preconditioned: a BiCG step (along ``p``, against the
    shadow residual ``r0``), then a one-dimensional minimal-residual step (along ``t``).
    It stops early on a breakdown (``rho`` or ``omega`` zero), where it cannot go on."""
    r = b - A(x0)
    shadow = r
    zero, one = jnp.zeros_like(b), jnp.ones((), b.dtype)

    def going(state):
        _, r, _, _, rho, _, omega, k = state
        return (_inner(r, r).real > bound) & (k < maxiter) & (rho != 0) & (omega != 0)

    def step(state):
        x, r, p, v, rho, alpha, omega, k = state
        rho_next = _inner(shadow, r)
        p = r + (rho_next / rho) * (alpha / omega) * (p - omega * v)
        p_hat = M(p)
        v = A(p_hat)
        alpha = rho_next / _inner(shadow, v)
        s = r - alpha * v
        s_hat = M(s)
        t = A(s_hat)
        tt = _inner(t, t).real
        done = _inner(s, s).real <= bound  # (then t may be 0: stop after half a step)
        omega = jnp.where(done | (tt == 0), 0, _inner(t, s) / jnp.where(tt == 0, 1, tt))
        omega = omega.astype(b.dtype)
        return (x + alpha * p_hat + omega * s_hat, s - omega * t, p, v, rho_next, alpha,
                jnp.where(done, one, omega), k + 1)
    return lax.while_loop(going, step, (x0, r, zero, zero, one, one, one, 0))[0]


def _krylov(method, A, b, x0, tol, atol, maxiter, M, symmetric):
    A, b, x0, M = _prepare(A, b, x0, M)
    flat_b = ravel_pytree(b)[0]
    maxiter = 10 * flat_b.size if maxiter is None else maxiter
    x = _solve(method, A, b, x0, M, symmetric=symmetric,
               bound=_squared_bound(flat_b, tol, atol), maxiter=maxiter)
    return x, None


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve ``A x = b`` for a Hermitian positive definite ``A`` by conjugate gradients:
    ``(x, None)``, ``x`` a pytree like ``b``. ``maxiter`` (steps) defaults to 10 times the
    unknowns, as in SciPy."""
    real = not any(jnp.iscomplexobj(leaf) for leaf in tree_leaves(b))
    return _krylov(_cg, A, b, x0, tol, atol, maxiter, M, symmetric=real)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve ``A x = b`` for any square ``A`` by BiCGSTAB: ``(x, None)``; the arguments
    are cg's."""
    return _krylov(_bicgstab, A, b, x0, tol, atol, maxiter, M, symmetric=False)


# --- GMRES ------------------------------------------------------------------------------------

def _arnoldi_step(A, M, j, basis, hessenberg):
    """Extend the orthonormal basis of the Krylov space of ``M A`` by one vector (rows of
    ``basis``; rows past ``j`` are zero), Gram-Schmidt run twice, as one pass loses
    orthogonality; column ``j`` of ``hessenberg`` takes the coefficients. A vector that
    vanishes (the space is invariant: the solution is in it) is left zero."""
    w = M(A(basis[j]))
    h = jnp.zeros(basis.shape[0], basis.dtype)
    for _ in range(2):
        c = jnp.matmul(basis.conj(), w)
        w, h = w - jnp.matmul(c, basis), h + c
    norm = _norm(w)
    tiny = jnp.finfo(norm.dtype).eps * _norm(h)
    h = h.at[j + 1].set(norm.astype(h.dtype))
    unit = jnp.where(norm > tiny, w / jnp.where(norm > tiny, norm, 1).astype(w.dtype), 0)
    return basis.at[j + 1].set(unit), hessenberg.at[:, j].set(h)


def _least_squares(hessenberg, beta):
    """(y minimising ``||H y - beta e1||``, that minimum): GMRES's small problem."""
    rhs = jnp.zeros(hessenberg.shape[0], hessenberg.dtype).at[0].set(beta)
    y = jnp.linalg.lstsq(hessenberg, rhs)[0]
    return y, _norm(jnp.matmul(hessenberg, y) - rhs)


def _gmres_cycle(A, b, M, x, residual, residual_norm, ptol, restart, incremental):
    """One cycle of restarted GMRES from ``x``: the best ``x + V y`` over the Krylov space of
    ``restart`` dimensions built from the preconditioned ``residual``; ``incremental`` stops
    building it once the small problem's residual meets ``ptol``."""
    n = b.shape[0]
    safe = jnp.where(residual_norm > 0, residual_norm, 1).astype(b.dtype)
    basis = jnp.zeros((restart + 1, n), b.dtype).at[0].set(residual / safe)
    hessenberg = jnp.zeros((restart + 1, restart), b.dtype)
    if incremental:
        def going(state):
            j, _, _, estimate = state
            return (j < restart) & (estimate > ptol)

        def extend(state):
            j, basis, hessenberg, _ = state
            basis, hessenberg = _arnoldi_step(A, M, j, basis, hessenberg)
            return j + 1, basis, hessenberg, _least_squares(hessenberg, residual_norm)[1]
        _, basis, hessenberg, _ = lax.while_loop(going, extend,
                                                 (0, basis, hessenberg, residual_norm))
    else:
        basis, hessenberg = lax.fori_loop(
            0, restart, lambda j, s: _arnoldi_step(A, M, j, *s), (basis, hessenberg))
    y = _least_squares(hessenberg, residual_norm)[0]
    return x + jnp.matmul(y, basis[:restart])


def _gmres(A, b, x0, M, *, ptol, restart, maxiter, incremental):
    """Restarted GMRES on the left-preconditioned system ``M A x = M b``, ``maxiter``
    cycles at most, until the preconditioned residual's norm is at most ``ptol``."""
    def preconditioned_residual(x):
        r = M(b - A(x))
        return r, _norm(r)

    def going(state):
        _, _, norm, k = state
        return (norm > ptol) & (k < maxiter)

    def cycle(state):
        x, r, norm, k = state
        x = _gmres_cycle(A, b, M, x, r, norm, ptol, restart, incremental)
        return (x, *preconditioned_residual(x), k + 1)
    return lax.while_loop(going, cycle, (x0, *preconditioned_residual(x0), 0))[0]


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """Solve ``A x = b`` for any square ``A`` by restarted GMRES: ``(x, info)``, ``info``
    0, or -1 where ``x`` is NaN (as in JAX).

    ``restart`` is the dimension of the Krylov space built between restarts (at most the
    number of unknowns); ``maxiter`` the number of restarts (default 10 times the
    unknowns). ``solve_method="batched"`` builds the whole space each cycle;
    ``"incremental"`` stops a cycle as soon as its residual meets the tolerance. The
    tolerance applies to the preconditioned residual, scaled by ``||M b|| / ||b||``.
    """
    if solve_method not in ("batched", "incremental"):
        raise ValueError(f"invalid solve_method {solve_method}, must be either "
                         "'incremental' or 'batched'")
    A, b, x0, M = _prepare(A, b, x0, M, check_shapes=False)
    flat_b = ravel_pytree(b)[0]
    size = flat_b.size
    b_norm = _norm(flat_b)
    atol = jnp.maximum(tol * b_norm, atol)
    ptol = _norm(ravel_pytree(M(b))[0]) * jnp.minimum(1.0, atol / b_norm)
    x = _solve(_gmres, A, b, x0, M, ptol=ptol, restart=min(restart, size),
               maxiter=10 * size if maxiter is None else maxiter,
               incremental=solve_method == "incremental")
    return x, jnp.where(jnp.isnan(_norm(ravel_pytree(x)[0])), -1, 0)

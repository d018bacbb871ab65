"""The decompositions and triangular solves of ``jax.lax.linalg``: triangular_solve,
cholesky, LU with partial pivoting, QR, SVD, eigh and eig.

Every primitive here works on the last two axes of its operands and treats the axes in front
of them as batch axes (a stack of matrices). So their batching rules are short: a vmapped axis
that is already one of the leading axes stays where it is; one among the matrix axes moves to
the front. ``triangular_solve`` is the exception worth reading: an unbatched matrix solves a
batch of right-hand sides by folding the batch into extra columns (or rows).

Reference implementations are NumPy's ``linalg`` where it has the decomposition (Cholesky, QR,
SVD, eigh, eig) and written here otherwise (LU with partial pivoting, triangular
substitution). Outputs follow LAPACK's conventions, as JAX's do: ``lu`` packs L and U in one
matrix with row-swap ``pivots``, ``svd`` returns ``(s, u, vh)``, ``eigh`` ``(v, w)``. The
algorithm choices of ``svd``, ``eigh`` and ``eig`` are JAX's enums (``SvdAlgorithm``,
``EighImplementation``, ``EigImplementation``): nbjax computes the same LAPACK routine on
every backend, so it accepts the choices JAX accepts on CPU and refuses the others as JAX does.

The JVP rules are the classical perturbation formulas (references next to each rule); they
are built from ``triangular_solve`` and matrix products, so reverse mode needs only the
transpose rule of ``triangular_solve`` (linear in its right-hand side) and of ``dot_general``.
"""

import enum
import warnings

import numpy as np

from ...core import Primitive, ShapedArray, dtypes, get_aval
from ...interpreters import ad
from ...interpreters.transpose import is_undefined
from .. import batch_util
from ..elementwise import (abs as _abs, add, complex as _complex, conj, convert_element_type, div,
                           eq, imag, integer_pow, mul, neg, real, sub)
from ..reductions import argmax
from ..shapes import broadcast_in_dim, moveaxis, reduce_sum, reshape, squeeze
from ..standard import INT, check_dtype, same_dtypes, scalar_like
from ..structural import broadcasted_iota, concatenate, full, pad
from .util import (check_matrix, cols_of, complex_dtype, conj_if_complex, diagonal_of, dtype_of,
                   each_col, each_row, identity_matrix, linalg_primitive,
                   linear_algebra_lowering, mH, mT, mm, nan_array, nan_where_lapack_fails, ndim_of,
                   outer_diff, per_matrix, permutation_matrix, pivot_magnitude, real_dtype, rows_of,
                   scipy_linalg, shape_of, symmetrize, tril, triu, zeros_of)

__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "cholesky_p",
           "eig", "eig_p", "eigh", "eigh_p", "lu", "lu_p",
           "lu_pivots_to_permutation", "lu_pivots_to_permutation_p", "qr", "qr_p", "svd",
           "svd_p", "triangular_solve", "triangular_solve_p"]


# --- triangular_solve ---------------------------------------------------------------------------

triangular_solve_p = Primitive("triangular_solve")
linear_algebra_lowering(triangular_solve_p, "triangular solve")


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    check_matrix("triangular_solve", a, 0)
    check_matrix("triangular_solve", b, 1)
    same_dtypes("triangular_solve", (a, b))
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        raise TypeError(f"triangular_solve requires both operands to have the same batch "
                        f"dimensions, got {a.shape} and {b.shape}")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError("The first input to triangular_solve must be a square matrix. Got "
                         f"shape {a.shape}.")
    if a.shape[-1] != b.shape[-2 if left_side else -1]:
        raise ValueError(f"Incompatible shapes for arguments to triangular_solve: {a.shape} "
                         f"and {b.shape}.")
    return ShapedArray(b.shape, b.dtype, a.weak_type and b.weak_type)


def _substitute(m, b, lower, unit_diagonal):
    """Solve ``m @ x = b`` for triangular ``m`` (stacks of them, zero off the triangle), one
    row of ``x`` at a time: forward substitution from the top for lower triangles, back
    substitution from the bottom for upper ones."""
    n = m.shape[-1]
    x = np.zeros(np.broadcast_shapes(m.shape[:-2], b.shape[:-2]) + b.shape[-2:], b.dtype)
    for i in (range(n) if lower else reversed(range(n))):
        # Rows of x not solved yet are still zero, so the whole row of m can be used.
        rest = b[..., i, :] - np.einsum("...j,...jk->...k", m[..., i, :], x)
        x[..., i, :] = rest if unit_diagonal else rest / m[..., i, i, None]
    return x


@triangular_solve_p.def_impl
def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    n = a.shape[-1]
    keep = np.tril(np.ones((n, n), bool), -unit_diagonal) if lower else \
        np.triu(np.ones((n, n), bool), unit_diagonal)
    m = np.where(keep, a, np.zeros((), a.dtype))  # the triangle read; a unit diagonal is 0
    m = np.conj(m) if conjugate_a else m
    if transpose_a:
        m, lower = np.swapaxes(m, -1, -2), not lower
    with np.errstate(all="ignore"):  # a singular a gives inf/nan, as LAPACK does
        if left_side:
            return _substitute(m, b, lower, unit_diagonal)
        # x op(a) = b  <=>  op(a)^T x^T = b^T
        xt = _substitute(np.swapaxes(m, -1, -2), np.swapaxes(b, -1, -2), not lower,
                         unit_diagonal)
    return np.swapaxes(xt, -1, -2).copy()


def _triangular_solve_jvp_a(g_a, ans, a, b, *, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    """``d(op(A)^{-1} B) = -op(A)^{-1} op(dA) X`` (left side; mirrored for the right side),
    where only the triangle of ``dA`` that the solve reads counts. The product is ordered so
    that the solve runs on the smaller operand."""
    k = 1 if unit_diagonal else 0
    g_a = neg(tril(g_a, -k) if lower else triu(g_a, k))
    g_a = mT(g_a) if transpose_a else g_a
    g_a = conj_if_complex(g_a) if conjugate_a else g_a
    m, n = shape_of(b)[-2:]

    def a_inverse(rhs):
        return triangular_solve(a, rhs, left_side=left_side, lower=lower,
                                transpose_a=transpose_a, conjugate_a=conjugate_a,
                                unit_diagonal=unit_diagonal)
    if left_side:
        return a_inverse(mm(g_a, ans)) if m > n else mm(a_inverse(g_a), ans)
    return a_inverse(mm(ans, g_a)) if m < n else mm(ans, a_inverse(g_a))


ad.defjvp2(triangular_solve_p, _triangular_solve_jvp_a,
           lambda g_b, ans, a, b, **params: triangular_solve_p.bind(a, g_b, **params))


@triangular_solve_p.def_transpose
def _triangular_solve_transpose(ct, a, b, **params):
    """Linear in ``b``: the transpose of ``b -> op(A)^{-1} b`` is ``ct -> op(A)^{-T} ct``, the
    same solve with ``transpose_a`` flipped (a plain transpose, no conjugation)."""
    assert not is_undefined(a) and is_undefined(b)
    if isinstance(ct, ad.Zero):
        return [None, ad.Zero(b.aval)]
    params = dict(params, transpose_a=not params["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **params)]


@triangular_solve_p.def_batch
def _triangular_solve_batch(axis_data, vals, dims, *, left_side, **params):
    """With one ``a`` for the whole batch, the batch of ``b``s becomes extra columns (left
    side) or rows (right side) of a single right-hand side; otherwise both go to the front."""
    (a, b), (da, db) = vals, dims
    bind = lambda a, b: triangular_solve_p.bind(a, b, left_side=left_side, **params)  # noqa
    if da is None:
        n = ndim_of(b)
        axis = n - 1 if left_side else n - 2
        b = moveaxis(b, db, axis)
        shape = shape_of(b)
        if left_side:  # [..., m, cols, B] -> [..., m, cols * B]
            flat = reshape(b, shape[:-2] + (shape[-2] * shape[-1],))
        else:  # [..., rows, B, m] -> [..., rows * B, m]
            flat = reshape(b, shape[:-3] + (shape[-3] * shape[-2], shape[-1]))
        return reshape(bind(a, flat), shape), axis
    if da == db and da < ndim_of(a) - 2:
        return bind(a, b), da
    size = axis_data.size
    return bind(batch_util.bdim_at_front(a, da, size), batch_util.bdim_at_front(b, db, size)), 0


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    """Solve ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular ``a``.

    ``op`` transposes ``a`` if ``transpose_a`` and conjugates it if ``conjugate_a``; only the
    ``lower`` (or upper) triangle of ``a`` is read, and its diagonal is taken as ones if
    ``unit_diagonal``. A ``b`` with one axis fewer than ``a`` is a (stack of) vector(s).
    """
    conjugate_a = bool(conjugate_a) and dtypes.is_complex(dtype_of(a))
    vector = ndim_of(b) == ndim_of(a) - 1
    if vector:  # a column (left side) or a row (right side)
        *batch, n = shape_of(b)
        shape = (*batch, n, 1) if left_side else (*batch, 1, n)
        kept = tuple(range(len(batch))) + ((len(batch),) if left_side else (len(batch) + 1,))
        b = broadcast_in_dim(b, shape, kept)
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                  transpose_a=bool(transpose_a), conjugate_a=conjugate_a,
                                  unit_diagonal=bool(unit_diagonal))
    if vector:
        out = squeeze(out, (ndim_of(out) - 1 if left_side else ndim_of(out) - 2,))
    return out


# --- cholesky -----------------------------------------------------------------------------------

cholesky_p = linalg_primitive("cholesky")
linear_algebra_lowering(cholesky_p, "cholesky")


@cholesky_p.def_abstract_eval
def _cholesky_abstract_eval(x):
    check_matrix("cholesky", x, square=True)
    return x


@cholesky_p.def_impl
def _cholesky_impl(x):
    """The lower factor, zero above the diagonal; NaN on and below it for matrices that
    are not positive definite (JAX's convention: no exception from inside a compiled
    program)."""
    return nan_where_lapack_fails(
        lambda m: (np.linalg.cholesky(m),), x,
        lambda m: (np.tril(nan_array(m.shape, m.dtype)),))[0]


@cholesky_p.def_jvp
def _cholesky_jvp(primals, tangents):
    """``dL = L phi(L^{-1} dA L^{-H})`` where ``phi`` takes the lower triangle with the
    diagonal halved (Murray 2016, arXiv:1602.07527)."""
    (x,), (dx,) = primals, tangents
    L = cholesky_p.bind(x)
    tmp = triangular_solve(L, dx, left_side=False, lower=True, transpose_a=True,
                           conjugate_a=True)
    inner = triangular_solve(L, tmp, left_side=True, lower=True)
    eye = identity_matrix(dtype_of(inner), shape_of(inner))
    half_diagonal = sub(tril(inner), mul(scalar_like(inner, 0.5), mul(inner, eye)))
    return L, mm(L, half_diagonal)


def cholesky(x, *, symmetrize_input=True):
    """The lower-triangular ``L`` with ``x = L @ L^H``, for Hermitian positive-definite ``x``
    (NaNs where it fails). With ``symmetrize_input`` the Hermitian part of ``x`` is used;
    otherwise only its lower triangle is read."""
    if symmetrize_input:
        check_matrix("cholesky", get_aval(x), square=True)
        x = symmetrize(x)
    return cholesky_p.bind(x)


# --- LU with partial pivoting -------------------------------------------------------------------

lu_p = linalg_primitive("lu", multiple_results=True)
linear_algebra_lowering(lu_p, "lu")


@lu_p.def_abstract_eval
def _lu_abstract_eval(x):
    check_matrix("lu", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    return [x, ShapedArray(batch + (min(m, n),), np.int32),
            ShapedArray(batch + (m,), np.int32)]


@lu_p.def_impl
def _lu_impl(x):
    """Doolittle elimination with partial pivoting, on the whole stack at once.

    At step j the row with the largest entry in column j (from row j down) is swapped into
    row j; the entries below the pivot become the multipliers (column j of L) and the
    trailing block gets the rank-1 update. A zero pivot leaves its column as it is.
    """
    *batch, m, n = x.shape
    a = x.reshape(int(np.prod(batch)), m, n).copy()
    stack = np.arange(a.shape[0])
    k = min(m, n)
    pivots = np.zeros((a.shape[0], k), np.int32)
    perm = np.tile(np.arange(m, dtype=np.int32), (a.shape[0], 1))
    with np.errstate(all="ignore"):
        for j in range(k):
            p = j + np.argmax(pivot_magnitude(a[:, j:, j]), axis=1)
            pivots[:, j] = p
            a[stack, j], a[stack, p] = a[stack, p], a[stack, j].copy()
            perm[stack, j], perm[stack, p] = perm[stack, p], perm[stack, j].copy()
            pivot = a[:, j, j, None]
            a[:, j + 1:, j] = np.where(pivot != 0, a[:, j + 1:, j] / pivot, a[:, j + 1:, j])
            a[:, j + 1:, j + 1:] -= a[:, j + 1:, j, None] * a[:, j, None, j + 1:]
    batch = tuple(batch)
    return [a.reshape(x.shape), pivots.reshape(batch + (k,)), perm.reshape(batch + (m,))]


def _lu_factors(lu_matrix):
    """Unpack ``lu`` ([..., m, n]) into square ``l`` ([..., m, m], unit diagonal) and ``u``
    ([..., n, n]), completed with identity blocks when the matrix is not square."""
    m, n = shape_of(lu_matrix)[-2:]
    k = min(m, n)
    dtype = dtype_of(lu_matrix)
    batch = shape_of(lu_matrix)[:-2]
    zero = scalar_like(lu_matrix, 0)
    no_pad = [(0, 0, 0)] * len(batch)
    l = pad(tril(cols_of(lu_matrix, 0, k), -1), zero, no_pad + [(0, 0, 0), (0, m - k, 0)])
    l = add(l, identity_matrix(dtype, batch + (m, m)))
    u = pad(triu(rows_of(lu_matrix, 0, k)), zero, no_pad + [(0, n - k, 0), (0, 0, 0)])
    u = add(u, identity_matrix(dtype, batch + (n, n), start=k))
    return l, u


@lu_p.def_jvp
def _lu_jvp(primals, tangents):
    """From ``P A = L U``: ``L^{-1} P dA U^{-1} = L^{-1} dL + dU U^{-1}``, a strictly lower
    plus an upper triangular matrix; so ``dL = L tril(X, -1)`` and ``dU = triu(X) U`` with
    ``X = L^{-1} P dA U^{-1}`` (de Hoog, Anderssen and Lukas). Pivots get no tangent."""
    (a,), (a_dot,) = primals, tangents
    lu_matrix, pivots, permutation = lu_p.bind(a)
    l, u = _lu_factors(lu_matrix)
    pa_dot = mm(permutation_matrix(permutation, dtype_of(a)), a_dot)
    la = triangular_solve(l, pa_dot, left_side=True, lower=True, unit_diagonal=True)
    x = triangular_solve(u, la, left_side=False, lower=False)
    lu_dot = add(mm(l, tril(x, -1)), mm(triu(x), u))
    return [lu_matrix, pivots, permutation], [lu_dot, ad.Zero.like(pivots),
                                              ad.Zero.like(permutation)]


def lu(x):
    """LU decomposition with partial pivoting: ``(lu, pivots, permutation)`` with
    ``x[..., permutation, :] = L @ U``; ``lu`` holds ``U`` and the strictly lower part of the
    unit-lower ``L``; ``pivots[i]`` is the row swapped with row ``i`` at step ``i``."""
    return lu_p.bind(x)


lu_pivots_to_permutation_p = linalg_primitive("lu_pivots_to_permutation", core_rank=1)


@lu_pivots_to_permutation_p.def_abstract_eval
def _lu_pivots_to_permutation_abstract_eval(pivots, *, permutation_size):
    check_dtype("lu_pivots_to_permutation", pivots, INT)
    if pivots.dtype != np.int32 or pivots.ndim < 1:
        raise TypeError("lu_pivots_to_permutation requires int32 pivots of rank at least 1, "
                        f"got {pivots.str_short()}")
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the "
                         f"trailing dimension of the pivots. Got pivots size "
                         f"{pivots.shape[-1]}")
    return ShapedArray(pivots.shape[:-1] + (permutation_size,), np.int32)


@lu_pivots_to_permutation_p.def_impl
def _lu_pivots_to_permutation_impl(pivots, *, permutation_size):
    """Apply the row swaps, in order, to ``0 .. size-1``."""
    flat = pivots.reshape(int(np.prod(pivots.shape[:-1])), pivots.shape[-1])
    perm = np.tile(np.arange(permutation_size, dtype=np.int32), (flat.shape[0], 1))
    stack = np.arange(flat.shape[0])
    for i in range(flat.shape[1]):
        j = flat[:, i]
        perm[stack, i], perm[stack, j] = perm[stack, j], perm[stack, i].copy()
    return perm.reshape(pivots.shape[:-1] + (permutation_size,))


def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation that the row swaps ``pivots`` (as ``lu`` returns them) make."""
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def lu_solve(lu_matrix, permutation, b, trans=0):
    """Solve ``a x = b`` (``trans=0``), ``a^T x = b`` (1) or ``a^H x = b`` (2) from the LU
    factors of ``a``; ``b`` is ``[..., m, k]`` with the batch axes of ``lu_matrix``.

    ``P a = L U``, so ``a x = b`` is ``L U x = P b``: two triangular solves. The transposed
    system ``U^T L^T P x = b`` solves in the other order and un-permutes at the end.
    """
    p = permutation_matrix(permutation, dtype_of(lu_matrix))
    if trans == 0:
        x = triangular_solve(lu_matrix, mm(p, b), left_side=True, lower=True,
                             unit_diagonal=True)
        return triangular_solve(lu_matrix, x, left_side=True, lower=False)
    if trans not in (1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    conj_a = trans == 2
    x = triangular_solve(lu_matrix, b, left_side=True, lower=False, transpose_a=True,
                         conjugate_a=conj_a)
    x = triangular_solve(lu_matrix, x, left_side=True, lower=True, unit_diagonal=True,
                         transpose_a=True, conjugate_a=conj_a)
    return mm(mT(p), x)


def solve(a, b):
    """``a^{-1} b`` for square ``a`` ([..., m, m]) and ``b`` ([..., m, k]), through LU.

    Differentiating it differentiates the LU decomposition; ``jnp.linalg.solve`` has a
    cheaper custom rule. This one is for rules whose ``a`` is a primal (constant) value.
    """
    lu_matrix, _, permutation = lu(a)
    return lu_solve(lu_matrix, permutation, b)


# --- QR -----------------------------------------------------------------------------------------

qr_p = linalg_primitive("qr", multiple_results=True)
linear_algebra_lowering(qr_p, "qr")


@qr_p.def_abstract_eval
def _qr_abstract_eval(x, *, full_matrices, pivoting, use_magma):
    check_matrix("qr", x)
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    factors = [x.update(shape=(*batch, m, k)), x.update(shape=(*batch, k, n))]
    return factors + [ShapedArray((*batch, n), np.dtype(np.int32))] if pivoting else factors


@qr_p.def_impl
def _qr_impl(x, *, full_matrices, pivoting, use_magma):
    if not pivoting or x.size == 0:  # (an empty matrix: LAPACK is not called, p is zeros)
        factors = list(np.linalg.qr(x, mode="complete" if full_matrices else "reduced"))
        return factors + [np.zeros(x.shape[:-2] + x.shape[-1:], np.int32)] * pivoting
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    mode = "full" if full_matrices else "economic"
    # (SciPy's geqp3, which NumPy lacks)
    return per_matrix(lambda a: scipy_linalg().qr(a, mode=mode, pivoting=True,
                                                  check_finite=False),
                      [x], tuple(batch), ((m, k), x.dtype), ((k, n), x.dtype),
                      ((n,), np.int32))


def _thin_qr_jvp(q, r, dx):
    """JVP of ``x = q r`` for ``[..., m, n]`` with ``m >= n`` (q: m x n, r: n x n).

    With ``C = q^H dx r^{-1}``, ``dr r^{-1} = C - Ω`` must be upper triangular and ``Ω =
    q^H dq`` skew-Hermitian; so Ω is fixed by the strictly lower part of C (and, for complex
    values, by the imaginary part of C's diagonal, which the real diagonal of r cannot take).
    See j-towns.github.io/papers/qr-derivative.pdf.
    """
    dx_rinv = triangular_solve(r, dx)  # dx r^{-1}: right side, upper triangle
    c = mm(mH(q), dx_rinv)
    c_lower = tril(c, -1)
    omega = sub(c_lower, mH(c_lower))
    if dtypes.is_complex(dtype_of(c)):
        imag_diag = _complex(zeros_of(real(c)), imag(c))
        omega = add(omega, mul(identity_matrix(dtype_of(c), shape_of(c)), imag_diag))
    dq = add(mm(q, sub(omega, c)), dx_rinv)
    dr = mm(sub(c, omega), r)
    return dq, dr


@qr_p.def_jvp
def _qr_jvp(primals, tangents, **params):
    """Square and tall thin factors use ``_thin_qr_jvp``. A wide ``x = [x1 x2]`` (m < n) has
    ``x1 = q r1``, whose JVP is the square case, and ``r2 = q^H x2``. The complete ``q`` of a
    tall matrix also needs its last ``m - n`` columns: see arXiv:2409.13374 (eqs. 32, 33).
    With pivoting, ``x[..., p] = q r`` for the permutation ``p``, held fixed (as JAX)."""
    (x,), (dx,) = primals, tangents
    outs = qr_p.bind(x, **params)
    q, r = outs[:2]
    if params["pivoting"]:
        columns = mT(permutation_matrix(outs[2], dtype_of(x)))  # a[..., p] = a @ P^T
        x, dx = mm(x, columns), mm(dx, columns)
    m, n = shape_of(x)[-2:]
    if m < n:
        dq, dr1 = _thin_qr_jvp(q, cols_of(r, 0, m), cols_of(dx, 0, m))
        dr2 = add(mm(mH(dq), cols_of(x, m, n)), mm(mH(q), cols_of(dx, m, n)))
        tangents = [dq, concatenate([dr1, dr2], ndim_of(x) - 1)]
    else:
        full_matrices = params["full_matrices"]
        q_mn = cols_of(q, 0, n) if full_matrices else q
        r_nn = rows_of(r, 0, n) if full_matrices else r
        tangents = list(_thin_qr_jvp(q_mn, r_nn, dx))
        if full_matrices and m > n:
            tangents = list(_complete_qr_tangents(q, q_mn, *tangents, m, n))
    return outs, tangents + [ad.Zero.like(p) for p in outs[2:]]


def _complete_qr_tangents(q, q_mn, dq_mn, dr_nn, m, n):
    """Extend the thin tangents to the complete factors of a tall matrix (arXiv:2409.13374):
    ``Z = q_pn (q_nn - I)^{-1}``, ``dq_mp = dq_mn Z^H - (q_mn + q_mp Z)(dq_pn - Z dq_nn)^H``,
    and the extra rows of ``dr`` are zero."""
    q_nn, q_pn = rows_of(q_mn, 0, n), rows_of(q_mn, n, m)
    q_mp = cols_of(q, n, m)
    dq_nn, dq_pn = rows_of(dq_mn, 0, n), rows_of(dq_mn, n, m)
    shifted = sub(q_nn, identity_matrix(dtype_of(q), shape_of(q_nn)))
    lu_matrix, _, permutation = lu(shifted)
    z_h = lu_solve(lu_matrix, permutation, mH(q_pn), trans=2)  # (q_nn - I)^{-H} q_pn^H
    z = mH(z_h)
    dq_mp = sub(mm(dq_mn, z_h),
                mm(add(q_mn, mm(q_mp, z)), mH(sub(dq_pn, mm(z, dq_nn)))))
    dq = concatenate([dq_mn, dq_mp], ndim_of(q) - 1)
    zero_rows = full(shape_of(dr_nn)[:-2] + (m - n, n), 0, dtype_of(dr_nn))
    return dq, concatenate([dr_nn, zero_rows], ndim_of(q) - 2)


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """``(q, r)`` with ``x = q @ r``, ``q`` unitary (``[..., m, m]``, or ``[..., m, k]`` with
    ``k = min(m, n)`` unless ``full_matrices``) and ``r`` upper triangular; with
    ``pivoting``, ``(q, r, p)`` with ``x[..., p] = q @ r``, the columns chosen greatest norm
    first (LAPACK's geqp3), ``p`` int32. ``use_magma`` (a GPU library's choice) is recorded
    and ignored, as JAX does on the CPU."""
    return tuple(qr_p.bind(x, full_matrices=bool(full_matrices), pivoting=bool(pivoting),
                           use_magma=use_magma))


# --- SVD ----------------------------------------------------------------------------------------

svd_p = linalg_primitive("svd", multiple_results=True)
linear_algebra_lowering(svd_p, "svd")


@svd_p.def_abstract_eval
def _svd_abstract_eval(x, *, full_matrices, compute_uv):
    check_matrix("svd", x)
    *batch, m, n = x.shape
    k = min(m, n)
    s = ShapedArray((*batch, k), real_dtype(x.dtype), x.weak_type)
    if not compute_uv:
        return [s]
    return [s, x.update(shape=(*batch, m, m if full_matrices else k)),
            x.update(shape=(*batch, n if full_matrices else k, n))]


@svd_p.def_impl
def _svd_impl(x, *, full_matrices, compute_uv):
    *batch, m, n = x.shape
    if min(m, n) == 0:  # LAPACK is not called on empty matrices: identities complete u, vh
        s = np.zeros((*batch, 0), real_dtype(x.dtype))
        if not compute_uv:
            return [s]
        u = np.broadcast_to(np.eye(m, m if full_matrices else 0, dtype=x.dtype), (*batch, m,
                            m if full_matrices else 0))
        vh = np.broadcast_to(np.eye(n if full_matrices else 0, n, dtype=x.dtype),
                             (*batch, n if full_matrices else 0, n))
        return [s, u.copy(), vh.copy()]
    if not compute_uv:
        return nan_where_lapack_fails(lambda a: (np.linalg.svd(a, compute_uv=False),), x)
    u, s, vh = nan_where_lapack_fails(
        lambda a: np.linalg.svd(a, full_matrices=full_matrices), x)
    return [s, u, vh]


@svd_p.def_jvp
def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    """With ``dS = U^H dA V``: ``ds = Re diag(dS)``; ``dU = U (F * (dS S + S dS^H)) + ...`` with
    ``F[i, j] = 1 / (s_j^2 - s_i^2)`` (0 on the diagonal), plus the imaginary diagonal part for
    complex values and the components outside the span of U (or V) for non-square matrices
    (Townsend, "Differentiating the singular value decomposition"; Giles 2008)."""
    (a,), (da,) = primals, tangents
    m, n = shape_of(a)[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            "Singular value decomposition JVP not implemented for full matrices")
    s, u, vh = svd_p.bind(a, full_matrices=False, compute_uv=True)
    dtype = dtype_of(a)
    v = mH(vh)
    ds_mat = mm(mm(mH(u), da), v)
    ds = real(diagonal_of(ds_mat)) if dtypes.is_complex(dtype) else diagonal_of(ds_mat)
    if not compute_uv:
        return [s], [ds]
    k = shape_of(s)[-1]
    eye = identity_matrix(dtype_of(s), shape_of(s) + (k,))
    s_row, s_col = each_row(s, k), each_col(s, k)
    f = sub(integer_pow(add(mul(add(s_row, s_col), sub(s_row, s_col)), eye), -1), eye)
    f = convert_element_type(f, dtype)  # 1 / (s_j^2 - s_i^2), 0 on the diagonal
    ds_s = mul(ds_mat, each_row(s, k, dtype))  # dS diag(s)
    s_ds = mul(each_col(s, k, dtype), ds_mat)  # diag(s) dS
    du_inner = mul(f, add(ds_s, mH(ds_s)))
    if dtypes.is_complex(dtype):
        s_zero = convert_element_type(eq(s, scalar_like(s, 0)), dtype_of(s))
        s_inv = sub(integer_pow(add(s, s_zero), -1), s_zero)  # 1/s, and 0 for s = 0
        s_inv_mat = mul(identity_matrix(dtype, shape_of(eye)), each_row(s_inv, k, dtype))
        anti_hermitian = mul(scalar_like(ds_mat, 0.5), sub(ds_mat, mH(ds_mat)))
        du_inner = add(du_inner, mul(anti_hermitian, s_inv_mat))
    du = mm(u, du_inner)
    dv = mm(v, mul(f, add(s_ds, mH(s_ds))))
    if m > n:  # the part of dA V outside the span of U
        dav = mm(da, v)
        du = add(du, div(sub(dav, mm(u, mm(mH(u), dav))), each_row(s, m, dtype)))
    if n > m:
        dahu = mm(mH(da), u)
        dv = add(dv, div(sub(dahu, mm(v, mm(vh, dahu))), each_row(s, n, dtype)))
    return [s, u, vh], [ds, du, mH(dv)]


class SvdAlgorithm(enum.Enum):
    """The SVD algorithms JAX can choose between. Every backend of nbjax computes LAPACK's
    ``gesdd`` (through NumPy); the algorithms JAX runs on CPU are accepted (the QR one, LAPACK's
    ``gesvd``, agrees with it to rounding), the others refused as JAX refuses them there."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """Singular values ``s`` (descending), or ``(u, s, vh)`` with ``x = u diag(s) vh`` if
    ``compute_uv``; ``u``/``vh`` are square unless not ``full_matrices``. ``algorithm``: a
    ``SvdAlgorithm`` (see there). ``subset_by_index`` may only name them all, as on JAX's
    CPU."""
    if algorithm not in (None, SvdAlgorithm.DEFAULT, SvdAlgorithm.QR,
                         SvdAlgorithm.DIVIDE_AND_CONQUER):
        raise NotImplementedError(
            "The SVD Jacobi and Polar algorithms are not implemented on CPU.")
    if not _all_of(subset_by_index, min(get_aval(x).shape[-2:])):
        if full_matrices:
            raise ValueError("full_matrices and subset_by_index cannot both be set")
        raise NotImplementedError("subset_by_index not implemented for CPU and GPU")
    out = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if compute_uv:
        s, u, vh = out
        return u, s, vh
    return out[0]


# --- eigh -----------------------------------------------------------------------------------

eigh_p = linalg_primitive("eigh", multiple_results=True)
linear_algebra_lowering(eigh_p, "eigh")


@eigh_p.def_abstract_eval
def _eigh_abstract_eval(x, *, lower, sort_eigenvalues):
    check_matrix("eigh", x, square=True)
    return [x, ShapedArray(x.shape[:-1], real_dtype(x.dtype), x.weak_type)]


@eigh_p.def_impl
def _eigh_impl(x, *, lower, sort_eigenvalues):
    """LAPACK's ``syevd``/``heevd`` (through NumPy): eigenvalues always ascending; a matrix
    on which it does not converge (one holding NaN) gives NaN, the rest of the stack does not."""
    w, v = nan_where_lapack_fails(lambda a: np.linalg.eigh(a, UPLO="L" if lower else "U"), x)
    return [v, w]


@eigh_p.def_jvp
def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues):
    """Non-degenerate perturbation theory: with ``B = V^H dA V``, ``dw = Re diag(B)`` and
    ``dV = V (F * B)``, ``F[i, j] = 1 / (w_j - w_i)`` off the diagonal and 0 on it (Giles,
    "An extended collection of matrix derivative results", 2008). Valid for distinct
    eigenvalues; ``dA`` must be Hermitian (``eigh`` symmetrizes its input)."""
    (a,), (a_dot,) = primals, tangents
    v, w = eigh_p.bind(symmetrize(a), lower=lower, sort_eigenvalues=sort_eigenvalues)
    dtype = dtype_of(a)
    diffs = convert_element_type(outer_diff(w), dtype)
    eye = identity_matrix(dtype, shape_of(diffs))
    f = sub(integer_pow(add(eye, diffs), -1), eye)
    b = mm(mm(mH(v), a_dot), v)
    dv = mm(v, mul(f, b))
    dw = diagonal_of(real(b) if dtypes.is_complex(dtype) else b)
    return [v, w], [dv, dw]


class EighImplementation(enum.Enum):
    """The algorithms JAX can compute ``eigh`` with. nbjax computes LAPACK's ``syevd``/``heevd``
    (through NumPy) on every backend: ``QR``, what JAX computes on CPU, is accepted, the others
    refused as JAX refuses them there."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


def _all_of(subset_by_index, n):
    """Whether ``subset_by_index`` asks for all ``n`` values (None does)."""
    return subset_by_index is None or tuple(subset_by_index) == (0, n)


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True, subset_by_index=None,
         implementation=None):
    """``(v, w)``: eigenvectors (columns of ``v``) and ascending real eigenvalues of Hermitian
    ``x``. With ``symmetrize_input`` the Hermitian part of ``x`` is used; otherwise only the
    ``lower`` (or upper) triangle is read. ``implementation``: see ``EighImplementation``.
    ``subset_by_index`` may only name them all, as on JAX's CPU."""
    if not _all_of(subset_by_index, get_aval(x).shape[-1]):
        raise NotImplementedError("subset_by_index not supported on CPU and GPU")
    if implementation == EighImplementation.JACOBI:
        raise NotImplementedError("Jacobi implementation is not supported on CPU")
    if implementation == EighImplementation.QDWH:
        raise NotImplementedError("QDWH implementation is only supported on TPU")
    if symmetrize_input:
        check_matrix("eigh", get_aval(x), square=True)
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))
    return v, w


# --- eig ----------------------------------------------------------------------------------------

eig_p = linalg_primitive("eig", multiple_results=True)


@eig_p.def_abstract_eval
def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
                       enable_eigvec_derivs):
    check_matrix("eig", x, square=True)
    dtype = complex_dtype(x.dtype)
    count = compute_left_eigenvectors + compute_right_eigenvectors
    return ([ShapedArray(x.shape[:-1], dtype)] + [ShapedArray(x.shape, dtype)] * count)


def _normalize_columns(v):
    """Unit-norm columns whose largest-magnitude entry is real and positive (LAPACK ``geev``
    makes it real)."""
    v = v / np.linalg.norm(v, axis=-2, keepdims=True)
    k = np.argmax(np.abs(v), axis=-2)[..., None, :]
    big = np.take_along_axis(v, k, axis=-2)
    return v * (np.conj(big) / np.abs(big))


@eig_p.def_impl
def _eig_impl(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
              enable_eigvec_derivs):
    """Right eigenvectors from NumPy (LAPACK ``geev``); left ones are the rows of ``vr^{-1}``
    (``vl^H a = w vl^H``), conjugated and normalised as ``geev`` does."""
    dtype = complex_dtype(x.dtype)
    # (complex per matrix: NumPy gives a real result for a matrix with real eigenvalues, and
    # storing it would drop the imaginary parts of the others when a stack is split up)
    w, vr = nan_where_lapack_fails(lambda a: [o.astype(dtype) for o in np.linalg.eig(a)], x)
    out = [w]
    if compute_left_eigenvectors:
        out.append(_normalize_columns(np.conj(np.swapaxes(np.linalg.inv(vr), -1, -2)))
                   .astype(dtype))
    if compute_right_eigenvectors:
        out.append(vr)
    return out


def _eig_vec_jvp(w, v, da):
    """Eigenvalue and eigenvector tangents of ``a v = v diag(w)`` (Giles 2008, sec. 3.1) with
    the eigenvectors normalised as LAPACK's ``geev`` does: unit 2-norm and a real entry of
    largest magnitude. That fixes the free multiple ``c_j v_j`` of each column's tangent."""
    dtype = dtype_of(v)
    p = solve(v, mm(da, v))  # v^{-1} da v
    eye = identity_matrix(dtype, shape_of(p))
    f = sub(integer_pow(add(eye, outer_diff(w)), -1), eye)
    dw = diagonal_of(p)
    u = mm(v, mul(f, p))
    axis = ndim_of(v) - 2
    k = argmax(_abs(v), axis, np.int32)
    rows = broadcasted_iota(np.int32, shape_of(v), axis)
    mask = convert_element_type(eq(rows, broadcast_in_dim(k, shape_of(v), (*range(axis),
                                                                            axis + 1))), dtype)
    c = _complex(neg(real(reduce_sum(mul(conj(v), u), (axis,)))),
                 div(neg(imag(reduce_sum(mul(mask, u), (axis,)))),
                     real(reduce_sum(mul(mask, v), (axis,)))))
    return dw, add(u, mul(v, each_row(c, shape_of(v)[-2])))


@eig_p.def_jvp
def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs):
    """Eigenvalues: ``dw = diag(vr^{-1} da vr)``. Eigenvector tangents depend on a
    normalisation JAX cannot check, so they need ``enable_eigvec_derivs=True``, as in JAX."""
    (a,), (da,) = primals, tangents
    vectors = compute_left_eigenvectors or compute_right_eigenvectors
    if vectors and not enable_eigvec_derivs:
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on "
            "the input that nbjax cannot check (see the enable_eigvec_derivs argument to "
            "lax.linalg.eig). Pass enable_eigvec_derivs=True to lax.linalg.eig to opt in. "
            "See https://github.com/jax-ml/jax/issues/2748 for discussion.")
    outs = eig_p.bind(a, compute_left_eigenvectors=compute_left_eigenvectors,
                      compute_right_eigenvectors=True,
                      enable_eigvec_derivs=enable_eigvec_derivs)
    w, vr = outs[0], outs[-1]
    da = convert_element_type(da, dtype_of(vr))
    if not vectors:
        return [w], [diagonal_of(mm(solve(vr, da), vr))]
    dw, dvr = _eig_vec_jvp(w, vr, da)
    primal_out, tangent_out = [w], [dw]
    if compute_left_eigenvectors:
        _, dvl = _eig_vec_jvp(conj(w), outs[1], mH(da))
        primal_out.append(outs[1])
        tangent_out.append(dvl)
    if compute_right_eigenvectors:
        primal_out.append(vr)
        tangent_out.append(dvr)
    return primal_out, tangent_out


class EigImplementation(enum.Enum):
    """The libraries JAX can compute ``eig`` with. nbjax computes LAPACK's ``geev`` (through
    NumPy) on every backend: ``LAPACK`` is accepted, the GPU libraries refused, as JAX refuses
    them on CPU."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False, implementation=None, use_magma=None):
    """Eigenvalues ``w`` and (optionally) left and right eigenvectors of a general square
    matrix, all complex: ``[w, vl, vr]`` with the eigenvectors not asked for left out.
    ``implementation``: see ``EigImplementation``; ``use_magma`` is its deprecated form."""
    if use_magma is not None:
        warnings.warn("use_magma is deprecated, please use implementation=EigImplementation.MAGMA "
                      "instead.", DeprecationWarning, stacklevel=2)
        implementation = EigImplementation.MAGMA if use_magma else EigImplementation.LAPACK
    if implementation not in (None, EigImplementation.LAPACK):
        raise ValueError("Only the lapack implementation is supported on CPU.")
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs))

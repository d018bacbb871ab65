"""Linear-algebra primitives (``jax.lax.linalg``): matrix decompositions and triangular solves.

Every primitive here works on the last two axes of its operands and treats the axes in front
of them as batch axes (a stack of matrices). So their batching rules are short: a vmapped axis
that is already one of the leading axes stays where it is; one among the matrix axes moves to
the front. ``triangular_solve`` is the exception worth reading: an unbatched matrix solves a
batch of right-hand sides by folding the batch into extra columns (or rows).

Reference implementations are NumPy's ``linalg`` where it has the decomposition (Cholesky, QR,
SVD, eigh, eig), SciPy's LAPACK wrappers for the routines NumPy lacks (Schur, Hessenberg,
Householder products), and written here otherwise (LU with partial pivoting, triangular
substitution). Outputs follow LAPACK's conventions, as JAX's do: ``lu`` packs L and U in one
matrix with row-swap ``pivots``, ``svd`` returns ``(s, u, vh)``, ``eigh`` ``(v, w)``.

The JVP rules are the classical perturbation formulas (references next to each rule); they
are built from ``triangular_solve`` and matrix products, so reverse mode needs only the
transpose rule of ``triangular_solve`` (linear in its right-hand side) and of ``dot_general``.
"""

import numpy as np

from ..core import Primitive, ShapedArray, dtypes, get_aval
from ..interpreters import ad
from ..interpreters.transpose import is_undefined
from . import batch_util
from .dot import Precision, dot_general
from .elementwise import (abs as _abs, add, bitwise_and, complex as _complex, conj,
                          convert_element_type, div, eq, ge, imag, integer_pow, mul, neg, real,
                          select, sub)
from .reductions import argmax
from .shapes import broadcast_in_dim, moveaxis, reduce_sum, reshape, squeeze, transpose
from .standard import FLOAT, INEXACT, INT, check_dtype, same_dtypes, scalar_like
from .structural import broadcasted_iota, concatenate, full, pad, slice as _slice

__all__ = ["cholesky", "cholesky_p", "eig", "eig_p", "eigh", "eigh_p", "hessenberg",
           "hessenberg_p", "householder_product", "householder_product_p", "lu", "lu_p",
           "lu_pivots_to_permutation", "lu_pivots_to_permutation_p", "qr", "qr_p", "schur",
           "schur_p", "svd", "svd_p", "triangular_solve", "triangular_solve_p"]
__all__ += ["cholesky_update", "cholesky_update_p", "ormqr", "ormqr_p", "symmetric_product",
            "symmetric_product_p", "tridiagonal", "tridiagonal_p"]


# --- matrix helpers on (batched) lax values --------------------------------------------------
# The rules below compute with these; each is one or two lax operations on the last two axes.

def _ndim(x):
    return get_aval(x).ndim


def _shape(x):
    return get_aval(x).shape


def _dtype(x):
    return get_aval(x).dtype


def _T(x):
    """Swap the last two axes."""
    n = _ndim(x)
    return transpose(x, (*range(n - 2), n - 1, n - 2))


def _conj(x):
    """The conjugate of a complex value; a real value as it is (``lax.conj`` makes it complex)."""
    return conj(x) if dtypes.is_complex(_dtype(x)) else x


def _H(x):
    """The conjugate transpose (adjoint) of a stack of matrices."""
    return _conj(_T(x))


def _mm(a, b):
    """Matrix product of two stacks of matrices with the same leading (batch) axes."""
    batch = tuple(range(_ndim(a) - 2))
    return dot_general(a, b, (((_ndim(a) - 1,), (_ndim(b) - 2,)), (batch, batch)),
                       precision=Precision.HIGHEST)


def _zeros(x):
    return full(_shape(x), 0, _dtype(x))


def _matrix_mask(shape, test):
    """A bool array of ``shape`` that is ``test(row, col)`` on its last two axes."""
    n = len(shape)
    rows = broadcasted_iota(np.int32, shape[-2:], 0)
    cols = broadcasted_iota(np.int32, shape[-2:], 1)
    return broadcast_in_dim(test(rows, cols), shape, (n - 2, n - 1))


def _tril(x, k=0):
    """Zero above the ``k``-th diagonal."""
    mask = _matrix_mask(_shape(x), lambda r, c: ge(add(r, full((), k, np.int32)), c))
    return select(mask, x, _zeros(x))


def _triu(x, k=0):
    """Zero below the ``k``-th diagonal."""
    mask = _matrix_mask(_shape(x), lambda r, c: ge(add(r, full((), k - 1, np.int32)), c))
    return select(mask, _zeros(x), x)


def _eye(dtype, shape, start=0):
    """Identity matrices of ``shape`` (batch axes first); with ``start``, the ones before
    diagonal position ``start`` are left out."""
    def test(r, c):
        diagonal = eq(r, c)
        return diagonal if start == 0 else bitwise_and(diagonal,
                                                       ge(c, full((), start, np.int32)))
    return convert_element_type(_matrix_mask(shape, test), dtype)


def _diagonal(x):
    """The main diagonal of stacks of square matrices, as ``[..., n]`` (linear in ``x``)."""
    return reduce_sum(mul(x, _eye(_dtype(x), _shape(x))), (_ndim(x) - 1,))


def _rows(x, start, stop):
    """``x[..., start:stop, :]``."""
    n = _ndim(x)
    return _slice(x, (0,) * (n - 2) + (start, 0), _shape(x)[:-2] + (stop, _shape(x)[-1]))


def _cols(x, start, stop):
    """``x[..., :, start:stop]``."""
    n = _ndim(x)
    return _slice(x, (0,) * (n - 1) + (start,), _shape(x)[:-1] + (stop,))


def _each_row(s, nrows, dtype=None):
    """``s[..., None, :]`` repeated ``nrows`` times: ``m * _each_row(s, rows) = m diag(s)``."""
    n = _ndim(s)
    s = s if dtype is None else convert_element_type(s, dtype)
    return broadcast_in_dim(s, _shape(s)[:-1] + (nrows, _shape(s)[-1]), (*range(n - 1), n))


def _each_col(s, ncols, dtype=None):
    """``s[..., :, None]`` repeated ``ncols`` times: ``_each_col(s, cols) * m = diag(s) m``."""
    n = _ndim(s)
    s = s if dtype is None else convert_element_type(s, dtype)
    return broadcast_in_dim(s, _shape(s) + (ncols,), tuple(range(n)))


def _outer_diff(w):
    """``d[..., i, j] = w[j] - w[i]`` for a stack of vectors ``w``."""
    n = _shape(w)[-1]
    return sub(_each_row(w, n), _each_col(w, n))


def permutation_matrix(permutation, dtype):
    """``P`` with ``P @ a == a[..., permutation, :]``: ``P[..., i, j] = permutation[i] == j``."""
    m = _shape(permutation)[-1]
    shape = _shape(permutation) + (m,)
    rows = broadcast_in_dim(permutation, shape, tuple(range(len(shape) - 1)))
    return convert_element_type(eq(rows, broadcasted_iota(np.int32, shape, len(shape) - 1)),
                                dtype)


def symmetrize(x):
    """``(x + x^H) / 2``: the Hermitian part, which the decompositions of Hermitian matrices
    read (so their derivatives see only symmetric perturbations)."""
    return div(add(x, _H(x)), scalar_like(x, 2))


# --- checks shared by the shape rules ---------------------------------------------------------

def _check_matrix(name, aval, position=None, square=False, kind=INEXACT):
    """A stack of matrices of an inexact dtype (or ``kind``); TypeError on rank/dtype,
    ValueError if not square where it must be (as JAX raises)."""
    check_dtype(name, aval, kind, position)
    if aval.ndim < 2:
        at = "" if position is None else f" {position}"
        raise TypeError(f"Input{at} to {name} must have rank at least 2, but got "
                        f"shape={aval.shape}")
    if square and aval.shape[-1] != aval.shape[-2]:
        raise ValueError(f"The input to {name} must be a square matrix. Got shape "
                         f"{aval.shape}.")


def _check_batch_ranks(name, avals, core_ranks):
    """Operands with as many batch axes each (their ranks less ``core_ranks``) and the same
    batch shape: TypeError for the count, ValueError for the sizes."""
    counts = [a.ndim - r for a, r in zip(avals, core_ranks)]
    if len(set(counts)) != 1:
        raise TypeError(f"All inputs to {name} must have the same number of batch dimensions, "
                        f"but got {counts} batch dimensions for the inputs.")
    if len({a.shape[:n] for a, n in zip(avals, counts)}) != 1:
        raise ValueError(f"The batch dimensions of the inputs to {name} must be equal, got "
                         f"shapes {', '.join(str(a.shape) for a in avals)}")


def _real_dtype(dtype):
    return np.finfo(dtype).dtype


def _complex_dtype(dtype):
    return np.result_type(dtype, np.complex64)


# --- batching: leading axes are batch axes already --------------------------------------------

def _batch_leading(prim):
    """Batch rule of a one-operand primitive that maps over leading axes: a batch axis in front
    of the matrix axes stays (every output has it at the same place); one among the matrix axes
    moves to the front."""
    def rule(axis_data, vals, dims, **params):
        (x,), (d,) = vals, dims
        if d >= _ndim(x) - prim.core_rank:
            x, d = moveaxis(x, d, 0), 0
        out = prim.bind(x, **params)
        return (out, [d] * len(out)) if prim.multiple_results else (out, d)
    return rule


def _linalg_primitive(name, core_rank=2, multiple_results=False):
    prim = Primitive(name, multiple_results)
    prim.core_rank = core_rank
    prim.def_batch(_batch_leading(prim))
    return prim


def _per_matrix(fn, operands, batch, *out_shapes):
    """Run ``fn`` (a NumPy function of one member of each operand, returning a tuple) on each
    member of stacks whose leading axes are ``batch``, filling outputs of the given
    per-member shapes and dtypes. Nothing is called when the stack or its members are empty
    (LAPACK is not called on empty matrices)."""
    outs = [np.empty(batch + shape, dtype) for shape, dtype in out_shapes]
    if operands[0].size == 0:
        return outs
    for idx in np.ndindex(*batch):
        for out, value in zip(outs, fn(*(x[idx] for x in operands))):
            out[idx] = value
    return outs


# --- triangular_solve ---------------------------------------------------------------------------

triangular_solve_p = Primitive("triangular_solve")


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    _check_matrix("triangular_solve", a, 0)
    _check_matrix("triangular_solve", b, 1)
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
    g_a = neg(_tril(g_a, -k) if lower else _triu(g_a, k))
    g_a = _T(g_a) if transpose_a else g_a
    g_a = _conj(g_a) if conjugate_a else g_a
    m, n = _shape(b)[-2:]

    def a_inverse(rhs):
        return triangular_solve(a, rhs, left_side=left_side, lower=lower,
                                transpose_a=transpose_a, conjugate_a=conjugate_a,
                                unit_diagonal=unit_diagonal)
    if left_side:
        return a_inverse(_mm(g_a, ans)) if m > n else _mm(a_inverse(g_a), ans)
    return a_inverse(_mm(ans, g_a)) if m < n else _mm(ans, a_inverse(g_a))


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
        n = _ndim(b)
        axis = n - 1 if left_side else n - 2
        b = moveaxis(b, db, axis)
        shape = _shape(b)
        if left_side:  # [..., m, cols, B] -> [..., m, cols * B]
            flat = reshape(b, shape[:-2] + (shape[-2] * shape[-1],))
        else:  # [..., rows, B, m] -> [..., rows * B, m]
            flat = reshape(b, shape[:-3] + (shape[-3] * shape[-2], shape[-1]))
        return reshape(bind(a, flat), shape), axis
    if da == db and da < _ndim(a) - 2:
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
    conjugate_a = bool(conjugate_a) and dtypes.is_complex(_dtype(a))
    vector = _ndim(b) == _ndim(a) - 1
    if vector:  # a column (left side) or a row (right side)
        *batch, n = _shape(b)
        shape = (*batch, n, 1) if left_side else (*batch, 1, n)
        kept = tuple(range(len(batch))) + ((len(batch),) if left_side else (len(batch) + 1,))
        b = broadcast_in_dim(b, shape, kept)
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                  transpose_a=bool(transpose_a), conjugate_a=conjugate_a,
                                  unit_diagonal=bool(unit_diagonal))
    if vector:
        out = squeeze(out, (_ndim(out) - 1 if left_side else _ndim(out) - 2,))
    return out


# --- cholesky -----------------------------------------------------------------------------------

cholesky_p = _linalg_primitive("cholesky")


@cholesky_p.def_abstract_eval
def _cholesky_abstract_eval(x):
    _check_matrix("cholesky", x, square=True)
    return x


@cholesky_p.def_impl
def _cholesky_impl(x):
    """The lower factor, zero above the diagonal; NaN for matrices that are not positive
    definite (JAX's convention: no exception from inside a compiled program)."""
    try:
        return np.linalg.cholesky(x)
    except np.linalg.LinAlgError:
        def one(m):
            try:
                return (np.linalg.cholesky(m),)
            except np.linalg.LinAlgError:
                return (np.full(m.shape, np.nan, m.dtype),)
        return _per_matrix(one, [x], x.shape[:-2], (x.shape[-2:], x.dtype))[0]


@cholesky_p.def_jvp
def _cholesky_jvp(primals, tangents):
    """``dL = L phi(L^{-1} dA L^{-H})`` where ``phi`` takes the lower triangle with the
    diagonal halved (Murray 2016, arXiv:1602.07527)."""
    (x,), (dx,) = primals, tangents
    L = cholesky_p.bind(x)
    tmp = triangular_solve(L, dx, left_side=False, lower=True, transpose_a=True,
                           conjugate_a=True)
    inner = triangular_solve(L, tmp, left_side=True, lower=True)
    half_diagonal = sub(_tril(inner), mul(scalar_like(inner, 0.5),
                                          mul(inner, _eye(_dtype(inner), _shape(inner)))))
    return L, _mm(L, half_diagonal)


def cholesky(x, *, symmetrize_input=True):
    """The lower-triangular ``L`` with ``x = L @ L^H``, for Hermitian positive-definite ``x``
    (NaNs where it fails). With ``symmetrize_input`` the Hermitian part of ``x`` is used;
    otherwise only its lower triangle is read."""
    if symmetrize_input:
        _check_matrix("cholesky", get_aval(x), square=True)
        x = symmetrize(x)
    return cholesky_p.bind(x)


# --- LU with partial pivoting -------------------------------------------------------------------

lu_p = _linalg_primitive("lu", multiple_results=True)


@lu_p.def_abstract_eval
def _lu_abstract_eval(x):
    _check_matrix("lu", x)
    *batch, m, n = x.shape
    batch = tuple(batch)
    return [x, ShapedArray(batch + (min(m, n),), np.int32),
            ShapedArray(batch + (m,), np.int32)]


def _pivot_magnitude(col):
    """What partial pivoting maximises: ``|x|``, or ``|re| + |im|`` for complex x (LAPACK)."""
    return np.abs(col.real) + np.abs(col.imag) if np.iscomplexobj(col) else np.abs(col)


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
            p = j + np.argmax(_pivot_magnitude(a[:, j:, j]), axis=1)
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
    m, n = _shape(lu_matrix)[-2:]
    k = min(m, n)
    dtype = _dtype(lu_matrix)
    batch = _shape(lu_matrix)[:-2]
    zero = scalar_like(lu_matrix, 0)
    no_pad = [(0, 0, 0)] * len(batch)
    l = pad(_tril(_cols(lu_matrix, 0, k), -1), zero, no_pad + [(0, 0, 0), (0, m - k, 0)])
    l = add(l, _eye(dtype, batch + (m, m)))
    u = pad(_triu(_rows(lu_matrix, 0, k)), zero, no_pad + [(0, n - k, 0), (0, 0, 0)])
    u = add(u, _eye(dtype, batch + (n, n), start=k))
    return l, u


@lu_p.def_jvp
def _lu_jvp(primals, tangents):
    """From ``P A = L U``: ``L^{-1} P dA U^{-1} = L^{-1} dL + dU U^{-1}``, a strictly lower
    plus an upper triangular matrix; so ``dL = L tril(X, -1)`` and ``dU = triu(X) U`` with
    ``X = L^{-1} P dA U^{-1}`` (de Hoog, Anderssen and Lukas). Pivots get no tangent."""
    (a,), (a_dot,) = primals, tangents
    lu_matrix, pivots, permutation = lu_p.bind(a)
    l, u = _lu_factors(lu_matrix)
    pa_dot = _mm(permutation_matrix(permutation, _dtype(a)), a_dot)
    la = triangular_solve(l, pa_dot, left_side=True, lower=True, unit_diagonal=True)
    x = triangular_solve(u, la, left_side=False, lower=False)
    lu_dot = add(_mm(l, _tril(x, -1)), _mm(_triu(x), u))
    return [lu_matrix, pivots, permutation], [lu_dot, ad.Zero.like(pivots),
                                              ad.Zero.like(permutation)]


def lu(x):
    """LU decomposition with partial pivoting: ``(lu, pivots, permutation)`` with
    ``x[..., permutation, :] = L @ U``; ``lu`` holds ``U`` and the strictly lower part of the
    unit-lower ``L``; ``pivots[i]`` is the row swapped with row ``i`` at step ``i``."""
    return lu_p.bind(x)


lu_pivots_to_permutation_p = _linalg_primitive("lu_pivots_to_permutation", core_rank=1)


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
    p = permutation_matrix(permutation, _dtype(lu_matrix))
    if trans == 0:
        x = triangular_solve(lu_matrix, _mm(p, b), left_side=True, lower=True,
                             unit_diagonal=True)
        return triangular_solve(lu_matrix, x, left_side=True, lower=False)
    if trans not in (1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    conj_a = trans == 2
    x = triangular_solve(lu_matrix, b, left_side=True, lower=False, transpose_a=True,
                         conjugate_a=conj_a)
    x = triangular_solve(lu_matrix, x, left_side=True, lower=True, unit_diagonal=True,
                         transpose_a=True, conjugate_a=conj_a)
    return _mm(_T(p), x)


def solve(a, b):
    """``a^{-1} b`` for square ``a`` ([..., m, m]) and ``b`` ([..., m, k]), through LU.

    Differentiating it differentiates the LU decomposition; ``jnp.linalg.solve`` has a
    cheaper custom rule. This one is for rules whose ``a`` is a primal (constant) value.
    """
    lu_matrix, _, permutation = lu(a)
    return lu_solve(lu_matrix, permutation, b)


# --- QR -----------------------------------------------------------------------------------------

qr_p = _linalg_primitive("qr", multiple_results=True)


@qr_p.def_abstract_eval
def _qr_abstract_eval(x, *, full_matrices):
    _check_matrix("qr", x)
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    return [x.update(shape=(*batch, m, k)), x.update(shape=(*batch, k, n))]


@qr_p.def_impl
def _qr_impl(x, *, full_matrices):
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q, r]


def _thin_qr_jvp(q, r, dx):
    """JVP of ``x = q r`` for ``[..., m, n]`` with ``m >= n`` (q: m x n, r: n x n).

    With ``C = q^H dx r^{-1}``, ``dr r^{-1} = C - Ω`` must be upper triangular and ``Ω =
    q^H dq`` skew-Hermitian; so Ω is fixed by the strictly lower part of C (and, for complex
    values, by the imaginary part of C's diagonal, which the real diagonal of r cannot take).
    See j-towns.github.io/papers/qr-derivative.pdf.
    """
    dx_rinv = triangular_solve(r, dx)  # dx r^{-1}: right side, upper triangle
    c = _mm(_H(q), dx_rinv)
    c_lower = _tril(c, -1)
    omega = sub(c_lower, _H(c_lower))
    if dtypes.is_complex(_dtype(c)):
        imag_diag = _complex(_zeros(real(c)), imag(c))
        omega = add(omega, mul(_eye(_dtype(c), _shape(c)), imag_diag))
    dq = add(_mm(q, sub(omega, c)), dx_rinv)
    dr = _mm(sub(c, omega), r)
    return dq, dr


@qr_p.def_jvp
def _qr_jvp(primals, tangents, *, full_matrices):
    """Square and tall thin factors use ``_thin_qr_jvp``. A wide ``x = [x1 x2]`` (m < n) has
    ``x1 = q r1``, whose JVP is the square case, and ``r2 = q^H x2``. The complete ``q`` of a
    tall matrix also needs its last ``m - n`` columns: see arXiv:2409.13374 (eqs. 32, 33)."""
    (x,), (dx,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    m, n = _shape(x)[-2:]
    if m < n:
        dq, dr1 = _thin_qr_jvp(q, _cols(r, 0, m), _cols(dx, 0, m))
        dr2 = add(_mm(_H(dq), _cols(x, m, n)), _mm(_H(q), _cols(dx, m, n)))
        return [q, r], [dq, concatenate([dr1, dr2], _ndim(x) - 1)]
    q_mn = _cols(q, 0, n) if full_matrices else q
    r_nn = _rows(r, 0, n) if full_matrices else r
    dq, dr = _thin_qr_jvp(q_mn, r_nn, dx)
    if full_matrices and m > n:
        dq, dr = _complete_qr_tangents(q, q_mn, dq, dr, m, n)
    return [q, r], [dq, dr]


def _complete_qr_tangents(q, q_mn, dq_mn, dr_nn, m, n):
    """Extend the thin tangents to the complete factors of a tall matrix (arXiv:2409.13374):
    ``Z = q_pn (q_nn - I)^{-1}``, ``dq_mp = dq_mn Z^H - (q_mn + q_mp Z)(dq_pn - Z dq_nn)^H``,
    and the extra rows of ``dr`` are zero."""
    q_nn, q_pn = _rows(q_mn, 0, n), _rows(q_mn, n, m)
    q_mp = _cols(q, n, m)
    dq_nn, dq_pn = _rows(dq_mn, 0, n), _rows(dq_mn, n, m)
    shifted = sub(q_nn, _eye(_dtype(q), _shape(q_nn)))
    lu_matrix, _, permutation = lu(shifted)
    z_h = lu_solve(lu_matrix, permutation, _H(q_pn), trans=2)  # (q_nn - I)^{-H} q_pn^H
    z = _H(z_h)
    dq_mp = sub(_mm(dq_mn, z_h),
                _mm(add(q_mn, _mm(q_mp, z)), _H(sub(dq_pn, _mm(z, dq_nn)))))
    dq = concatenate([dq_mn, dq_mp], _ndim(q) - 1)
    zero_rows = full(_shape(dr_nn)[:-2] + (m - n, n), 0, _dtype(dr_nn))
    return dq, concatenate([dr_nn, zero_rows], _ndim(q) - 2)


def qr(x, *, full_matrices=True):
    """``(q, r)`` with ``x = q @ r``, ``q`` unitary (``[..., m, m]``, or ``[..., m, k]`` with
    ``k = min(m, n)`` unless ``full_matrices``) and ``r`` upper triangular."""
    return tuple(qr_p.bind(x, full_matrices=bool(full_matrices)))


# --- SVD ----------------------------------------------------------------------------------------

svd_p = _linalg_primitive("svd", multiple_results=True)


@svd_p.def_abstract_eval
def _svd_abstract_eval(x, *, full_matrices, compute_uv):
    _check_matrix("svd", x)
    *batch, m, n = x.shape
    k = min(m, n)
    s = ShapedArray((*batch, k), _real_dtype(x.dtype), x.weak_type)
    if not compute_uv:
        return [s]
    return [s, x.update(shape=(*batch, m, m if full_matrices else k)),
            x.update(shape=(*batch, n if full_matrices else k, n))]


@svd_p.def_impl
def _svd_impl(x, *, full_matrices, compute_uv):
    *batch, m, n = x.shape
    if min(m, n) == 0:  # LAPACK is not called on empty matrices: identities complete u, vh
        s = np.zeros((*batch, 0), _real_dtype(x.dtype))
        if not compute_uv:
            return [s]
        u = np.broadcast_to(np.eye(m, m if full_matrices else 0, dtype=x.dtype), (*batch, m,
                            m if full_matrices else 0))
        vh = np.broadcast_to(np.eye(n if full_matrices else 0, n, dtype=x.dtype),
                             (*batch, n if full_matrices else 0, n))
        return [s, u.copy(), vh.copy()]
    if not compute_uv:
        return [np.linalg.svd(x, compute_uv=False)]
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    return [s, u, vh]


@svd_p.def_jvp
def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    """With ``dS = U^H dA V``: ``ds = Re diag(dS)``; ``dU = U (F * (dS S + S dS^H)) + ...`` with
    ``F[i, j] = 1 / (s_j^2 - s_i^2)`` (0 on the diagonal), plus the imaginary diagonal part for
    complex values and the components outside the span of U (or V) for non-square matrices
    (Townsend, "Differentiating the singular value decomposition"; Giles 2008)."""
    (a,), (da,) = primals, tangents
    m, n = _shape(a)[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            "Singular value decomposition JVP not implemented for full matrices")
    s, u, vh = svd_p.bind(a, full_matrices=False, compute_uv=True)
    dtype = _dtype(a)
    v = _H(vh)
    ds_mat = _mm(_mm(_H(u), da), v)
    ds = real(_diagonal(ds_mat)) if dtypes.is_complex(dtype) else _diagonal(ds_mat)
    if not compute_uv:
        return [s], [ds]
    k = _shape(s)[-1]
    eye = _eye(_dtype(s), _shape(s) + (k,))
    s_row, s_col = _each_row(s, k), _each_col(s, k)
    f = sub(integer_pow(add(mul(add(s_row, s_col), sub(s_row, s_col)), eye), -1), eye)
    f = convert_element_type(f, dtype)  # 1 / (s_j^2 - s_i^2), 0 on the diagonal
    ds_s = mul(ds_mat, _each_row(s, k, dtype))  # dS diag(s)
    s_ds = mul(_each_col(s, k, dtype), ds_mat)  # diag(s) dS
    du_inner = mul(f, add(ds_s, _H(ds_s)))
    if dtypes.is_complex(dtype):
        s_zero = convert_element_type(eq(s, scalar_like(s, 0)), _dtype(s))
        s_inv = sub(integer_pow(add(s, s_zero), -1), s_zero)  # 1/s, and 0 for s = 0
        s_inv_mat = mul(_eye(dtype, _shape(eye)), _each_row(s_inv, k, dtype))
        anti_hermitian = mul(scalar_like(ds_mat, 0.5), sub(ds_mat, _H(ds_mat)))
        du_inner = add(du_inner, mul(anti_hermitian, s_inv_mat))
    du = _mm(u, du_inner)
    dv = _mm(v, mul(f, add(s_ds, _H(s_ds))))
    if m > n:  # the part of dA V outside the span of U
        dav = _mm(da, v)
        du = add(du, div(sub(dav, _mm(u, _mm(_H(u), dav))), _each_row(s, m, dtype)))
    if n > m:
        dahu = _mm(_H(da), u)
        dv = add(dv, div(sub(dahu, _mm(v, _mm(vh, dahu))), _each_row(s, n, dtype)))
    return [s, u, vh], [ds, du, _H(dv)]


def svd(x, *, full_matrices=True, compute_uv=True):
    """Singular values ``s`` (descending), or ``(u, s, vh)`` with ``x = u diag(s) vh`` if
    ``compute_uv``; ``u``/``vh`` are square unless not ``full_matrices``."""
    out = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if compute_uv:
        s, u, vh = out
        return u, s, vh
    return out[0]


# --- eigh -----------------------------------------------------------------------------------

eigh_p = _linalg_primitive("eigh", multiple_results=True)


@eigh_p.def_abstract_eval
def _eigh_abstract_eval(x, *, lower, sort_eigenvalues):
    _check_matrix("eigh", x, square=True)
    return [x, ShapedArray(x.shape[:-1], _real_dtype(x.dtype), x.weak_type)]


@eigh_p.def_impl
def _eigh_impl(x, *, lower, sort_eigenvalues):
    """LAPACK's ``syevd``/``heevd`` (through NumPy): eigenvalues always ascending."""
    w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
    return [v, w]


@eigh_p.def_jvp
def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues):
    """Non-degenerate perturbation theory: with ``B = V^H dA V``, ``dw = Re diag(B)`` and
    ``dV = V (F * B)``, ``F[i, j] = 1 / (w_j - w_i)`` off the diagonal and 0 on it (Giles,
    "An extended collection of matrix derivative results", 2008). Valid for distinct
    eigenvalues; ``dA`` must be Hermitian (``eigh`` symmetrizes its input)."""
    (a,), (a_dot,) = primals, tangents
    v, w = eigh_p.bind(symmetrize(a), lower=lower, sort_eigenvalues=sort_eigenvalues)
    dtype = _dtype(a)
    diffs = convert_element_type(_outer_diff(w), dtype)
    eye = _eye(dtype, _shape(diffs))
    f = sub(integer_pow(add(eye, diffs), -1), eye)
    b = _mm(_mm(_H(v), a_dot), v)
    dv = _mm(v, mul(f, b))
    dw = _diagonal(real(b) if dtypes.is_complex(dtype) else b)
    return [v, w], [dv, dw]


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True):
    """``(v, w)``: eigenvectors (columns of ``v``) and ascending real eigenvalues of Hermitian
    ``x``. With ``symmetrize_input`` the Hermitian part of ``x`` is used; otherwise only the
    ``lower`` (or upper) triangle is read."""
    if symmetrize_input:
        _check_matrix("eigh", get_aval(x), square=True)
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))
    return v, w


# --- eig ----------------------------------------------------------------------------------------

eig_p = _linalg_primitive("eig", multiple_results=True)


@eig_p.def_abstract_eval
def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
                       enable_eigvec_derivs):
    _check_matrix("eig", x, square=True)
    dtype = _complex_dtype(x.dtype)
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
    dtype = _complex_dtype(x.dtype)
    w, vr = np.linalg.eig(x)
    w, vr = w.astype(dtype), vr.astype(dtype)
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
    dtype = _dtype(v)
    p = solve(v, _mm(da, v))  # v^{-1} da v
    eye = _eye(dtype, _shape(p))
    f = sub(integer_pow(add(eye, _outer_diff(w)), -1), eye)
    dw = _diagonal(p)
    u = _mm(v, mul(f, p))
    axis = _ndim(v) - 2
    k = argmax(_abs(v), axis, np.int32)
    rows = broadcasted_iota(np.int32, _shape(v), axis)
    mask = convert_element_type(eq(rows, broadcast_in_dim(k, _shape(v), (*range(axis),
                                                                            axis + 1))), dtype)
    c = _complex(neg(real(reduce_sum(mul(conj(v), u), (axis,)))),
                 div(neg(imag(reduce_sum(mul(mask, u), (axis,)))),
                     real(reduce_sum(mul(mask, v), (axis,)))))
    return dw, add(u, mul(v, _each_row(c, _shape(v)[-2])))


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
    da = convert_element_type(da, _dtype(vr))
    if not vectors:
        return [w], [_diagonal(_mm(solve(vr, da), vr))]
    dw, dvr = _eig_vec_jvp(w, vr, da)
    primal_out, tangent_out = [w], [dw]
    if compute_left_eigenvectors:
        _, dvl = _eig_vec_jvp(conj(w), outs[1], _H(da))
        primal_out.append(outs[1])
        tangent_out.append(dvl)
    if compute_right_eigenvectors:
        primal_out.append(vr)
        tangent_out.append(dvr)
    return primal_out, tangent_out


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False):
    """Eigenvalues ``w`` and (optionally) left and right eigenvectors of a general square
    matrix, all complex: ``[w, vl, vr]`` with the eigenvectors not asked for left out."""
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs))


# --- LAPACK routines NumPy lacks: Schur, Hessenberg and tridiagonal forms, Householder products --
# Their references call SciPy's LAPACK wrappers (gees, gehrd, sytrd/hetrd, orgqr/ungqr), the
# routines JAX calls on CPU. ``scipy.linalg`` is imported inside them: it adds about a third to
# the time of ``import nbjax``, which most programs would pay without using these routines.
# None of them has a derivative rule (as in JAX): differentiating them raises
# NotImplementedError.

def _lapack(name, x):
    """The LAPACK routine ``name`` for ``x``'s dtype (``s``/``d``/``c``/``z`` prefix)."""
    import scipy.linalg  # lazily: see above
    return scipy.linalg.get_lapack_funcs((name,), (x,))[0]


schur_p = _linalg_primitive("schur", multiple_results=True)


@schur_p.def_abstract_eval
def _schur_abstract_eval(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    _check_matrix("schur", x, 0, square=True)
    return [x] * (1 + compute_schur_vectors)


def _schur_one(m):
    """``(T, Z)`` of one matrix (LAPACK ``gees``): quasi-triangular ``T`` for real ``m``,
    triangular for complex; NaNs where LAPACK does not converge (a NaN input)."""
    import scipy.linalg  # lazily: see above
    try:
        return scipy.linalg.schur(m, check_finite=False)
    except np.linalg.LinAlgError:
        nan = np.full(m.shape, np.nan, m.dtype)
        return nan, nan


@schur_p.def_impl
def _schur_impl(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    outs = _per_matrix(_schur_one, [x], x.shape[:-2], *[(x.shape[-2:], x.dtype)] * 2)
    return outs if compute_schur_vectors else outs[:1]


def schur(x, *, compute_schur_vectors=True, sort_eig_vals=False, select_callable=None):
    """The Schur decomposition ``x = Z T Z^H``: ``[T, Z]`` (``[T]`` without
    ``compute_schur_vectors``), ``Z`` unitary and ``T`` upper triangular (complex ``x``) or
    quasi-triangular with 2x2 blocks for complex-conjugate eigenvalue pairs (real ``x``).
    Sorting the eigenvalues (``sort_eig_vals``, ``select_callable``) is not provided, as in
    JAX."""
    if sort_eig_vals:
        raise NotImplementedError("The sort feature of LAPACK's gees routine is not "
                                  "implemented.")
    return schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                        sort_eig_vals=False, select_callable=select_callable)


hessenberg_p = _linalg_primitive("hessenberg", multiple_results=True)


@hessenberg_p.def_abstract_eval
def _hessenberg_abstract_eval(x):
    _check_matrix("hessenberg", x, 0)
    *batch, m, n = x.shape
    if m != n:
        raise ValueError("Argument to Hessenberg reduction must have shape [..., n, n], got "
                         f"shape {x.shape}")
    return [x, x.update(shape=(*batch, max(n - 1, 0)))]


@hessenberg_p.def_impl
def _hessenberg_impl(x):
    """LAPACK's ``gehrd``: the matrix with ``H`` on and above its first subdiagonal and the
    Householder vectors below it, and their scale factors ``taus``."""
    n = x.shape[-1]
    return _per_matrix(lambda m: _lapack("gehrd", m)(m)[:2], [x], x.shape[:-2],
                       ((n, n), x.dtype), ((max(n - 1, 0),), x.dtype))


def hessenberg(x):
    """The Hessenberg reduction ``x = Q H Q^H`` in LAPACK's packed form ``(a, taus)``: ``H`` is
    ``a`` on and above the first subdiagonal; ``Q`` is ``householder_product`` of the vectors
    below it (``a[..., 1:, :-1]``) and ``taus``, bordered by a leading 1."""
    a, taus = hessenberg_p.bind(x)
    return a, taus


tridiagonal_p = _linalg_primitive("tridiagonal", multiple_results=True)


@tridiagonal_p.def_abstract_eval
def _tridiagonal_abstract_eval(x, *, lower):
    _check_matrix("tridiagonal", x, 0, square=True)
    *batch, n = x.shape[:-1]
    real = ShapedArray((*batch, n), _real_dtype(x.dtype))
    off = (*batch, max(n - 1, 0))
    return [x, real, real.update(shape=off), x.update(shape=off)]


@tridiagonal_p.def_impl
def _tridiagonal_impl(x, *, lower):
    """LAPACK's ``sytrd``/``hetrd``."""
    n = x.shape[-1]
    name = "hetrd" if np.iscomplexobj(x) else "sytrd"
    real, off = _real_dtype(x.dtype), (max(n - 1, 0),)
    return _per_matrix(lambda m: _lapack(name, m)(m, lower=int(lower))[:4], [x], x.shape[:-2],
                       ((n, n), x.dtype), ((n,), real), (off, real), (off, x.dtype))


def tridiagonal(a, *, lower=True):
    """The reduction of Hermitian ``a`` (its ``lower`` or upper triangle) to a real symmetric
    tridiagonal ``T = Q^H a Q`` in LAPACK's packed form ``(a, d, e, taus)``: ``d`` the diagonal
    of ``T``, ``e`` its off-diagonal, the Householder vectors of ``Q`` in the rest of ``a``."""
    return tuple(tridiagonal_p.bind(a, lower=bool(lower)))


householder_product_p = Primitive("householder_product")


@householder_product_p.def_abstract_eval
def _householder_product_abstract_eval(a, taus):
    _check_matrix("householder_product", a, 0)
    check_dtype("householder_product", taus, INEXACT, 1)
    if taus.ndim < 1:
        raise TypeError("Input 1 to householder_product must have rank at least 1, but got "
                        f"shape={taus.shape}")
    same_dtypes("householder_product", (a, taus))
    _check_batch_ranks("householder_product", (a, taus), (2, 1))
    m, n = a.shape[-2:]
    if m < n:
        raise ValueError("The first argument to householder_product must have at least as "
                         f"many rows as columns, got shape {a.shape}")
    if taus.shape[-1] > min(m, n):
        raise ValueError("The second argument to householder_product must not have more rows "
                         "than the minimum of the first argument's rows and columns.")
    return a.update(weak_type=False)


@householder_product_p.def_impl
def _householder_product_impl(a, taus):
    """LAPACK's ``orgqr``/``ungqr``: the first columns of ``H_1 H_2 ... H_k`` with
    ``H_i = I - tau_i v_i v_i^H``, ``v_i`` column ``i`` of ``a`` below the diagonal (with a
    unit diagonal entry)."""
    name = "ungqr" if np.iscomplexobj(a) else "orgqr"
    return _per_matrix(lambda m, t: _lapack(name, m)(m, t)[:1], [a, taus], a.shape[:-2],
                       (a.shape[-2:], a.dtype))[0]


def _batch_all_front(prim):
    """Batch rule of a primitive of several operands with the same leading (batch) axes: every
    operand's batch axis goes to the front (an unbatched operand is broadcast)."""
    def rule(axis_data, vals, dims, **params):
        vals = [batch_util.bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
        return prim.bind(*vals, **params), 0
    prim.def_batch(rule)


_batch_all_front(householder_product_p)


def householder_product(a, taus):
    """The product of Householder reflectors ``H_1 ... H_k`` (``k`` the length of ``taus``)
    stored as LAPACK stores them in ``a`` ([..., m, n], m >= n): its first ``n`` columns."""
    return householder_product_p.bind(a, taus)


# --- products with Householder and triangular factors ------------------------------------------
# As in JAX, these have no derivative rules.

ormqr_p = Primitive("ormqr")


@ormqr_p.def_abstract_eval
def _ormqr_abstract_eval(a, taus, c, *, left, transpose):
    for i, (x, rank) in enumerate(((a, 2), (taus, 1), (c, 2))):
        check_dtype("ormqr", x, INEXACT, i)
        if x.ndim < rank:
            raise TypeError(f"Input {i} to ormqr must have rank at least {rank}, but got "
                            f"shape={x.shape}")
    same_dtypes("ormqr", (a, taus, c))
    _check_batch_ranks("ormqr", (a, taus, c), (2, 1, 2))
    m = a.shape[-2]
    if left and c.shape[-2] != m:
        raise ValueError("ormqr with left=True expects c to have the same number of rows as "
                         f"the Householder matrix a. Got a shape {a.shape} and c shape "
                         f"{c.shape}.")
    if not left and c.shape[-1] != m:
        raise ValueError("ormqr with left=False expects c to have the same number of columns "
                         f"as the Householder matrix a has rows. Got a shape {a.shape} and c "
                         f"shape {c.shape}.")
    if taus.shape[-1] > min(a.shape[-2:]):
        raise ValueError("ormqr expects no more Householder scalars than the minimum of a's "
                         f"rows and columns. Got a shape {a.shape} and taus shape "
                         f"{taus.shape}.")
    return c.update(weak_type=False)


@ormqr_p.def_impl
def _ormqr_impl(a, taus, c, *, left, transpose):
    """The square ``Q`` is the Householder product of ``a``'s first ``m`` columns (padded with
    zero columns when there are fewer): the reflectors fill all of it."""
    m, n = a.shape[-2:]
    square = np.zeros(a.shape[:-1] + (m,), a.dtype)
    square[..., :min(m, n)] = a[..., :m]
    q = _householder_product_impl(square, taus)
    q = np.conj(np.swapaxes(q, -1, -2)) if transpose else q
    return q @ c if left else c @ q


_batch_all_front(ormqr_p)


def ormqr(a, taus, c, *, left=True, transpose=False):
    """``Q @ c`` (``c @ Q`` unless ``left``) for the ``Q`` of a QR factorization in LAPACK's
    form (Householder vectors ``a`` [..., m, n], scalars ``taus``); ``Q^H`` with
    ``transpose`` (``Q^T`` for real values)."""
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


symmetric_product_p = Primitive("symmetric_product")


@symmetric_product_p.def_abstract_eval
def _symmetric_product_abstract_eval(a, c, *, alpha, beta, symmetrize_output):
    _check_matrix("symmetric_product", a, 0, kind=FLOAT)
    _check_matrix("symmetric_product", c, 1, kind=FLOAT)
    same_dtypes("symmetric_product", (a, c))
    _check_batch_ranks("symmetric_product", (a, c), (2, 2))
    m = a.shape[-2]
    if c.shape[-2:] != (m, m):
        raise ValueError("symmetric_update expects a rectangular matrix of shape (m, n) and a "
                         f"square matrix of shape (n, n). Got shapes {a.shape} and {c.shape}.")
    return c.update(weak_type=False)


@symmetric_product_p.def_impl
def _symmetric_product_impl(a, c, *, alpha, beta, symmetrize_output):
    out = (alpha * (a @ np.swapaxes(a, -1, -2)) + beta * c).astype(c.dtype)
    if symmetrize_output:  # the lower triangle mirrored (BLAS syrk computes only that one)
        out = np.tril(out) + np.swapaxes(np.tril(out, -1), -1, -2)
    return out


_batch_all_front(symmetric_product_p)


def symmetric_product(a_matrix, c_matrix, *, alpha=1., beta=0., symmetrize_output=False):
    """``alpha * a @ a^T + beta * c`` for real ``a`` [..., m, n] and symmetric ``c``
    [..., m, m]; only the lower triangle is meant to be read unless ``symmetrize_output``
    mirrors it into the upper one."""
    return symmetric_product_p.bind(a_matrix, c_matrix, alpha=alpha, beta=beta,
                                    symmetrize_output=bool(symmetrize_output))


cholesky_update_p = Primitive("cholesky_update")


@cholesky_update_p.def_abstract_eval
def _cholesky_update_abstract_eval(r, w):
    for i, (x, rank) in enumerate(((r, 2), (w, 1))):
        check_dtype("cholesky_update", x, FLOAT, i)
        if x.ndim != rank:
            raise TypeError(f"Input {i} to cholesky_update must have a rank of exactly {rank}, "
                            f"but got shape={x.shape}")
    same_dtypes("cholesky_update", (r, w))
    if r.shape != w.shape * 2:
        raise ValueError("Rank-1 update to Cholesky decomposition takes a square matrix and a "
                         f"vector of the same size as input. Got shapes {r.shape} and "
                         f"{w.shape} instead")
    return r.update(weak_type=False)


@cholesky_update_p.def_impl
def _cholesky_update_impl(r, w):
    """Givens rotations, one row of ``R`` at a time: row ``k`` and ``w`` are rotated so that
    ``w_k`` becomes zero, which keeps ``R^T R + w w^T`` unchanged."""
    r, w = r.copy(), w.copy()
    for k in range(r.shape[0]):
        diagonal = np.hypot(r[k, k], w[k])
        cos, sin = diagonal / r[k, k], w[k] / r[k, k]
        r[k, k] = diagonal
        r[k, k + 1:] = (r[k, k + 1:] + sin * w[k + 1:]) / cos
        w[k + 1:] = cos * w[k + 1:] - sin * r[k, k + 1:]
    return r


def cholesky_update(r_matrix, w_vector):
    """The upper Cholesky factor of ``R^T R + w w^T`` from that of ``R^T R`` (``r_matrix``),
    in O(n^2). One matrix only: as in JAX, there is no batching rule."""
    return cholesky_update_p.bind(r_matrix, w_vector)

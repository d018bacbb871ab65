"""The LAPACK routines of ``jax.lax.linalg`` that NumPy lacks: Schur, Hessenberg and
tridiagonal forms, the packed QR factorization (geqrf), products with Householder
reflectors (householder_product, ormqr) and with triangular factors (symmetric_product,
cholesky_update).

Their references call SciPy's LAPACK wrappers (gees, gehrd, sytrd/hetrd, geqrf,
orgqr/ungqr, ormqr/unmqr), the routines JAX calls on CPU. None of them has a derivative
rule (as in JAX): differentiating them raises NotImplementedError.
"""

import numpy as np

from ...core import Primitive, ShapedArray
from .. import batch_util
from ..standard import FLOAT, INEXACT, check_dtype, same_dtypes
from .util import (check_batch_ranks, check_matrix, linalg_primitive, nan_array, per_matrix,
                   real_dtype, scipy_linalg)

__all__ = ["cholesky_update", "cholesky_update_p", "geqrf", "geqrf_p", "hessenberg",
           "hessenberg_p", "householder_product", "householder_product_p", "ormqr", "ormqr_p",
           "schur", "schur_p", "symmetric_product", "symmetric_product_p", "tridiagonal",
           "tridiagonal_p"]


# --- LAPACK routines NumPy lacks: Schur, Hessenberg and tridiagonal forms, Householder products --
# Their references call SciPy's LAPACK wrappers (gees, gehrd, sytrd/hetrd, orgqr/ungqr), the
# routines JAX calls on CPU. ``scipy.linalg`` is imported when they first run
# (``util.scipy_linalg``): it adds about a third to the time of ``import nbjax``, which most
# programs would pay without using these routines.
# None of them has a derivative rule (as in JAX): differentiating them raises
# NotImplementedError.

def _lapack(name, x):
    """The LAPACK routine ``name`` for ``x``'s dtype (``s``/``d``/``c``/``z`` prefix)."""
    return scipy_linalg().get_lapack_funcs((name,), (x,))[0]


schur_p = linalg_primitive("schur", multiple_results=True)


@schur_p.def_abstract_eval
def _schur_abstract_eval(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    check_matrix("schur", x, 0, square=True)
    return [x] * (1 + compute_schur_vectors)


def _schur_one(m):
    """``(T, Z)`` of one matrix (LAPACK ``gees``): quasi-triangular ``T`` for real ``m``,
    triangular for complex; NaNs where LAPACK does not converge (a NaN input)."""
    try:
        return scipy_linalg().schur(m, check_finite=False)
    except np.linalg.LinAlgError:
        nan = nan_array(m.shape, m.dtype)
        return nan, nan


@schur_p.def_impl
def _schur_impl(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    outs = per_matrix(_schur_one, [x], x.shape[:-2], *[(x.shape[-2:], x.dtype)] * 2)
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


hessenberg_p = linalg_primitive("hessenberg", multiple_results=True)


@hessenberg_p.def_abstract_eval
def _hessenberg_abstract_eval(x):
    check_matrix("hessenberg", x, 0)
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
    return per_matrix(lambda m: _lapack("gehrd", m)(m)[:2], [x], x.shape[:-2],
                       ((n, n), x.dtype), ((max(n - 1, 0),), x.dtype))


def hessenberg(a):
    """The Hessenberg reduction ``a = Q H Q^H`` in LAPACK's packed form ``(a, taus)``: ``H``
    is the result ``a`` on and above the first subdiagonal; ``Q`` is ``householder_product``
    of the vectors below it (``a[..., 1:, :-1]``) and ``taus``, bordered by a leading 1."""
    packed, taus = hessenberg_p.bind(a)
    return packed, taus


tridiagonal_p = linalg_primitive("tridiagonal", multiple_results=True)


@tridiagonal_p.def_abstract_eval
def _tridiagonal_abstract_eval(x, *, lower):
    check_matrix("tridiagonal", x, 0, square=True)
    *batch, n = x.shape[:-1]
    real = ShapedArray((*batch, n), real_dtype(x.dtype))
    off = (*batch, max(n - 1, 0))
    return [x, real, real.update(shape=off), x.update(shape=off)]


@tridiagonal_p.def_impl
def _tridiagonal_impl(x, *, lower):
    """LAPACK's ``sytrd``/``hetrd``."""
    n = x.shape[-1]
    name = "hetrd" if np.iscomplexobj(x) else "sytrd"
    real, off = real_dtype(x.dtype), (max(n - 1, 0),)
    return per_matrix(lambda m: _lapack(name, m)(m, lower=int(lower))[:4], [x], x.shape[:-2],
                       ((n, n), x.dtype), ((n,), real), (off, real), (off, x.dtype))


def tridiagonal(a, *, lower=True):
    """The reduction of Hermitian ``a`` (its ``lower`` or upper triangle) to a real symmetric
    tridiagonal ``T = Q^H a Q`` in LAPACK's packed form ``(a, d, e, taus)``: ``d`` the diagonal
    of ``T``, ``e`` its off-diagonal, the Householder vectors of ``Q`` in the rest of ``a``."""
    return tuple(tridiagonal_p.bind(a, lower=bool(lower)))


geqrf_p = linalg_primitive("geqrf", multiple_results=True)


@geqrf_p.def_abstract_eval
def _geqrf_abstract_eval(x):
    check_matrix("geqrf", x, 0)
    *batch, m, n = x.shape
    return [x, x.update(shape=(*batch, min(m, n)))]


@geqrf_p.def_impl
def _geqrf_impl(x):
    """LAPACK's ``geqrf`` (SciPy's wrapper: NumPy's ``qr(mode='raw')`` gives the same
    numbers transposed, as Fortran stores them)."""
    m, n = x.shape[-2:]
    return per_matrix(lambda a: _lapack("geqrf", a)(a)[:2], [x], x.shape[:-2],
                      ((m, n), x.dtype), ((min(m, n),), x.dtype))


def geqrf(a):
    """The QR factorization ``a = Q R`` in LAPACK's packed form ``(a, taus)``: ``R`` on and
    above the diagonal of ``a``, ``Q`` the product of the Householder reflectors
    ``I - tau_i v_i v_i^H`` whose vectors lie below it (``v_i``'s leading 1 implied):
    ``householder_product(a, taus)``. No derivative rule, as in JAX."""
    a, taus = geqrf_p.bind(a)
    return a, taus


householder_product_p = Primitive("householder_product")


@householder_product_p.def_abstract_eval
def _householder_product_abstract_eval(a, taus):
    check_matrix("householder_product", a, 0)
    check_dtype("householder_product", taus, INEXACT, 1)
    if taus.ndim < 1:
        raise TypeError("Input 1 to householder_product must have rank at least 1, but got "
                        f"shape={taus.shape}")
    same_dtypes("householder_product", (a, taus))
    check_batch_ranks("householder_product", (a, taus), (2, 1))
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
    return per_matrix(lambda m, t: _lapack(name, m)(m, t)[:1], [a, taus], a.shape[:-2],
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
    check_batch_ranks("ormqr", (a, taus, c), (2, 1, 2))
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
    check_matrix("symmetric_product", a, 0, kind=FLOAT)
    check_matrix("symmetric_product", c, 1, kind=FLOAT)
    same_dtypes("symmetric_product", (a, c))
    check_batch_ranks("symmetric_product", (a, c), (2, 2))
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

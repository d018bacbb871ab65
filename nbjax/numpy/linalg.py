"""``nbjax.numpy.linalg``: NumPy's linear algebra with JAX's semantics.

Everything is built on the primitives of ``nbjax.lax.linalg`` (``lu``, ``qr``,
``svd``, ``eigh``, ``eig``, ``cholesky``, ``triangular_solve``) and on ordinary ``jnp``
operations, so it batches over leading axes and differentiates. Three functions bring their
own derivative (``custom_jvp``), as in JAX, because differentiating their implementation would
be wasteful or wrong: ``solve`` (re-uses the LU factors for the tangent), ``det`` (stays
correct for singular matrices through a cofactor solve) and ``slogdet``; ``pinv`` too.
"""

import functools
import math
import operator
from typing import NamedTuple

import numpy as np

from .. import lax
from ..core import Array, dtypes
from ..custom_derivatives import custom_jvp
from ..lax import linalg as lax_linalg
from ..lax.linalg.decompositions import lu_solve, solve as lax_solve
from ..lax.linalg.util import permutation_matrix
from ..sharding import refuse_out_sharding
from . import creation, indexing, manipulation, products, reductions, sorting, ufuncs
from .util import canonicalize_axis, check_arraylike, promote_dtypes_inexact, to_array

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
           "eigvalsh", "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve",
           "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
           "vector_norm"]


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def _inexact(name, *args):
    """Check array-likes and promote them to a common inexact dtype."""
    check_arraylike(name, *args)
    return promote_dtypes_inexact(*args)


def _matrices(name, a, square=False):
    """``a`` promoted to inexact, checked to be a stack of (square) matrices (ValueError)."""
    a, = _inexact(name, a)
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        kind = "[..., n, n]" if square else "[..., m, n]"
        raise ValueError(f"Argument to {name} must have shape {kind}, got {a.shape}")
    return a


def _H(x):
    return ufuncs.conj(manipulation.swapaxes(x, -1, -2))


# --- decompositions ---------------------------------------------------------------------------

def cholesky(a, *, upper=False, symmetrize_input=True):
    """The Cholesky factor of Hermitian positive-definite ``a``: lower ``L`` with
    ``a = L L^H`` (or upper ``L^H``); NaNs where ``a`` is not positive definite."""
    a = _matrices("jnp.linalg.cholesky", a, square=True)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


def qr(a, mode="reduced"):
    """``(Q, R)`` with ``a = Q R``; ``mode`` 'reduced' (thin factors), 'complete' (square Q)
    or 'r' (only R). 'raw' gives LAPACK's packed factorization as JAX and NumPy do:
    ``(h, tau)`` from ``geqrf`` with ``h`` transposed ([..., n, m], as Fortran stores it;
    not conjugated): ``R`` in its lower triangle, the Householder vectors above it."""
    a = _matrices("jnp.linalg.qr", a)
    if mode == "raw":
        h, taus = lax_linalg.geqrf(a)
        return QRResult(manipulation.swapaxes(h, -1, -2), taus)
    if mode not in ("reduced", "r", "full", "complete"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """``(U, S, Vh)`` with ``a = U diag(S) Vh`` and ``S`` descending, or only ``S``.

    With ``hermitian`` the SVD comes from ``eigh``: the singular values are ``|w|``, sorted
    descending, and the signs of ``w`` move into ``Vh``. ``subset_by_index`` may only name
    them all, as on JAX's CPU (``lax.linalg.svd``).
    """
    a = _matrices("jnp.linalg.svd", a)
    if not hermitian or subset_by_index is not None:
        out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                             subset_by_index=subset_by_index)
        return SVDResult(*out) if compute_uv else out
    v, w = lax_linalg.eigh(a)
    order = sorting.argsort(-ufuncs.abs(w), axis=-1, stable=True)
    s = indexing.take_along_axis(ufuncs.abs(w), order, axis=-1)
    if not compute_uv:
        return s
    u = indexing.take_along_axis(v, order[..., None, :], axis=-1)
    sign = indexing.take_along_axis(ufuncs.sign(w), order, axis=-1)
    return SVDResult(u, s, _H(u * sign[..., None, :].astype(u.dtype)))


def svdvals(x, /):
    """The singular values of ``x``, descending."""
    return svd(x, compute_uv=False)


def eigh(a, UPLO=None, symmetrize_input=True):
    """``(eigenvalues, eigenvectors)`` of Hermitian ``a``, eigenvalues ascending; ``UPLO``
    says which triangle is read when not ``symmetrize_input``."""
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    a = _matrices("jnp.linalg.eigh", a, square=True)
    v, w = lax_linalg.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """The eigenvalues of Hermitian ``a``, ascending."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


def eig(a):
    """``(eigenvalues, eigenvectors)`` of a general square matrix, both complex."""
    a = _matrices("jnp.linalg.eig", a, square=True)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    """The (complex) eigenvalues of a general square matrix."""
    a = _matrices("jnp.linalg.eigvals", a, square=True)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


# --- solving and inverting ----------------------------------------------------------------------

@custom_jvp
def _solve(a, b):
    """``a^{-1} b`` for ``a`` [..., m, m] and ``b`` [..., m, k] with equal batch axes."""
    lu, _, permutation = lax_linalg.lu(a)
    return lu_solve(lu, permutation, b)


@_solve.defjvp
def _solve_jvp(primals, tangents):
    """``dx = a^{-1} (db - da x)``, solved with the factors of the primal solve: no
    derivative of the LU decomposition is needed."""
    (a, b), (da, db) = primals, tangents
    lu, _, permutation = lax_linalg.lu(a)
    x = lu_solve(lu, permutation, b)
    return x, lu_solve(lu, permutation, db - products.matmul(da, x))


def solve(a, b):
    """The solution ``x`` of ``a @ x = b``: ``b`` is a vector ``[m]`` or (a stack of)
    matrices ``[..., m, k]``; leading axes broadcast."""
    a, b = _inexact("jnp.linalg.solve", a, b)
    if a.ndim < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got "
                         f"a.shape={a.shape!r}")
    if (b.ndim > 1 and a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]
            and a.shape[-1] != b.shape[-2]):
        raise ValueError(f"Invalid shapes for solve: {a.shape}, {b.shape}. To solve for a "
                         "batch of vectors, use solve(a, b[..., None]).squeeze(-1).")
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if a.shape[-1] != a.shape[-2] or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"The arguments to solve must have shapes a=[..., m, m] and "
                         f"b=[..., m, k] or b=[..., m]; got a={a.shape} and b={b.shape}")
    batch = manipulation.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    x = _solve(manipulation.broadcast_to(a, batch + a.shape[-2:]),
               manipulation.broadcast_to(b, batch + b.shape[-2:]))
    return x[..., 0] if vector else x


def inv(a):
    """The inverse of (a stack of) square matrices: ``solve(a, I)``."""
    a = _matrices("jnp.linalg.inv", a, square=True)
    return solve(a, manipulation.broadcast_to(creation.eye(a.shape[-1], dtype=a.dtype), a.shape))


# --- determinants -------------------------------------------------------------------------------

def _lu_sign_parity(pivots, n):
    """How many row swaps the LU pivots made (each flips the determinant's sign)."""
    return reductions.count_nonzero(pivots != creation.arange(n, dtype=pivots.dtype), axis=-1)


@custom_jvp
def _slogdet_lu(a):
    """``det(a) = (-1)^swaps prod(diag(U))``, summed in logarithms."""
    n = a.shape[-1]
    lu, pivots, _ = lax_linalg.lu(a)
    diag = manipulation.diagonal(lu, axis1=-2, axis2=-1)
    is_zero = reductions.any(diag == 0, axis=-1)
    parity = _lu_sign_parity(pivots, n)
    if dtypes.is_complex(a.dtype):
        sign = reductions.prod(diag / ufuncs.abs(diag).astype(diag.dtype), axis=-1)
    else:  # (a NaN on the diagonal makes the sign NaN, as JAX's)
        sign = reductions.prod(ufuncs.sign(diag), axis=-1)
    sign = manipulation.where(is_zero, creation.zeros((), a.dtype),
                     sign * (1 - 2 * (parity % 2)).astype(a.dtype))
    log_abs = reductions.sum(ufuncs.log(ufuncs.abs(diag)), axis=-1)
    logdet = manipulation.where(is_zero, -np.inf, log_abs)
    return sign, ufuncs.real(logdet)


@custom_jvp
def _slogdet_qr(a):
    """``det(a) = det(Q) prod(diag(R))`` from LAPACK's packed QR: ``Q`` is a product of
    Householder reflectors, each of determinant -1 where its ``tau`` is not 0 (JAX counts
    the first n - 1; the last, of a 1x1 block, flips only a sign that R's diagonal holds).
    Real matrices only, as in JAX."""
    n = a.shape[-1]
    r, taus = lax_linalg.geqrf(a)
    diag = manipulation.diagonal(r, axis1=-2, axis2=-1)
    reflections = reductions.count_nonzero(taus[..., :n - 1] != 0, axis=-1)
    sign = reductions.prod(ufuncs.sign(diag), axis=-1)
    log_abs = reductions.sum(ufuncs.log(ufuncs.abs(diag)), axis=-1)
    return sign * (1 - 2 * (reflections % 2)).astype(a.dtype), log_abs


@_slogdet_lu.defjvp
@_slogdet_qr.defjvp
def _slogdet_jvp(primals, tangents):
    """``d log det(a) = trace(a^{-1} da)``; for complex ``a`` its imaginary part turns the
    sign (a phase) instead. The primal comes from LU whichever method was asked for, as in
    JAX."""
    (x,), (g,) = primals, tangents
    sign, logdet = _slogdet_lu(x)
    # lax's solve, not jnp's: a custom_jvp function applied to a tangent cannot be transposed
    log_dot = reductions.trace(lax_solve(x, g), axis1=-1, axis2=-2)
    if dtypes.is_complex(x.dtype):
        sign_dot = (log_dot - ufuncs.real(log_dot).astype(log_dot.dtype)) * sign
        log_dot = ufuncs.real(log_dot)
    else:
        sign_dot = creation.zeros_like(sign)
    return (sign, logdet), (sign_dot, log_dot)


def slogdet(a, *, method=None):
    """``(sign, logabsdet)`` with ``det(a) = sign * exp(logabsdet)``, via LU (``method`` None
    or "lu") or QR ("qr": no row pivoting, which batches better on some hardware)."""
    if method not in (None, "lu", "qr"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         "(`None`), and 'qr'.")
    a = _matrices("jnp.linalg.slogdet", a, square=True)
    if method != "qr":
        return SlogdetResult(*_weak_as(a, *_slogdet_lu(a)))
    if dtypes.is_complex(a.dtype):
        raise NotImplementedError("slogdet method='qr' not implemented for complex inputs")
    return SlogdetResult(*_weak_as(a, *_slogdet_qr(a)))


def _weak_as(a, *results):
    """``results`` weakly typed where ``a`` is, as JAX's determinants are (its arithmetic
    on the factors keeps the weak type; ours makes constants of the dtype)."""
    if not a.weak_type:
        return results
    return [lax.convert_element_type(r, r.dtype, weak_type=True) for r in results]


def _cofactor_solve(a, b):
    """``(det(a), adj(a) @ b)`` for square ``a`` and ``b`` of the same shape, also when ``a``
    is singular (where ``det(a) a^{-1}`` is not defined but the adjugate is).

    With ``P a = L U``: ``adj(a) = det(a) a^{-1}`` and ``det(a) = ±prod(diag(U))``. The last
    diagonal entry of U (the one that is zero for a rank n-1 matrix) is replaced by
    ``1 / (partial determinant)`` so the solve never divides by it, and the factor it would
    have contributed is multiplied back in. Matrices of rank below n - 1 have a zero adjugate.
    """
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu, pivots, permutation = lax_linalg.lu(a)
    diag = manipulation.diagonal(lu, axis1=-2, axis2=-1)
    sign = (1 - 2 * (_lu_sign_parity(pivots, n) % 2)).astype(a.dtype)
    partial_det = reductions.cumprod(diag, axis=-1) * sign[..., None]
    last = (creation.arange(n)[:, None] == n - 1) & (creation.arange(n)[None, :] == n - 1)
    lu = manipulation.where(last, (1 / partial_det[..., -2])[..., None, None], lu)
    probe = lax_linalg.triangular_solve(lu, creation.ones(a.shape[:-1], a.dtype), left_side=True,
                                        lower=False)
    low_rank = reductions.any(ufuncs.isnan(probe) | ufuncs.isinf(probe), axis=-1)[..., None, None]
    x = manipulation.where(low_rank, creation.zeros_like(b), b)
    x = products.matmul(permutation_matrix(permutation, a.dtype), x)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = manipulation.concatenate([x[..., :-1, :] * partial_det[..., -1, None, None],
                                  x[..., -1:, :]], axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    return partial_det[..., -1], manipulation.where(low_rank, creation.zeros_like(x), x)


@custom_jvp
def _det(a):
    sign, logdet = _slogdet_lu(a)
    return sign * ufuncs.exp(logdet).astype(sign.dtype)


@_det.defjvp
def _det_jvp(primals, tangents):
    """``d det(a) = trace(adj(a) da)`` (Jacobi's formula), with the adjugate from a cofactor
    solve so that singular matrices get the right derivative too."""
    (x,), (g,) = primals, tangents
    det, adj_g = _cofactor_solve(x, g)
    return det, reductions.trace(adj_g, axis1=-1, axis2=-2)


def det(a):
    """The determinant of (a stack of) square matrices."""
    a = _matrices("jnp.linalg.det", a, square=True)
    return _weak_as(a, _det(a))[0]


# --- pseudo-inverse, least squares, rank, condition number ----------------------------------

def _pinv_impl(a, rtol, hermitian):
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return creation.zeros(a.shape[:-2] + (n, m), a.dtype)
    if rtol is None:
        rtol = 10.0 * max(m, n) * float(np.finfo(a.dtype).eps)
    rtol = creation.asarray(rtol)
    u, s, vh = svd(ufuncs.conj(a), full_matrices=False, hermitian=hermitian)
    cutoff = rtol[..., None] * s[..., 0:1]
    s = manipulation.where(s > cutoff, s, np.inf).astype(u.dtype)
    return products.matmul(manipulation.swapaxes(vh, -1, -2),
                           manipulation.swapaxes(u, -1, -2) / s[..., :, None])


_pinv = custom_jvp(_pinv_impl, nondiff_argnums=(1, 2))


@_pinv.defjvp
def _pinv_jvp(rtol, hermitian, primals, tangents):
    """The derivative of the Moore-Penrose inverse (Golub and Pereyra 1973), valid where
    the rank does not change."""
    (a,), (a_dot,) = primals, tangents
    p = _pinv(a, rtol, hermitian)
    if hermitian:
        a, a_dot = (a + _H(a)) / 2, (a_dot + _H(a_dot)) / 2
    mm = products.matmul
    s = mm(mm(p, _H(p)), _H(a_dot))
    t = mm(mm(_H(a_dot), _H(p)), p)
    p_dot = -mm(mm(p, a_dot), p) + s - mm(mm(s, a), p) + t - mm(mm(p, a), t)
    return p, p_dot


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse, from the SVD; singular values below ``rtol`` times
    the largest count as zero."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    a = _matrices("jnp.linalg.pinv", a)
    return _pinv(a, rtol, hermitian)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """``(x, residuals, rank, s)``: the least-squares solution of ``a x = b`` through the SVD
    (singular values below ``rcond`` times the largest are dropped). ``residuals`` holds the
    squared norms of ``b - a x`` per column (NumPy leaves it empty for rank-deficient or wide
    ``a``, which ``numpy_resid=True`` copies)."""
    a, b = _inexact("jnp.linalg.lstsq", a, b)
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or "
                        "two-dimensional")
    if a.shape[0] != b.shape[0]:
        raise ValueError("Leading dimensions of input arrays must match")
    vector = b.ndim == 1
    b = b[:, None] if vector else b
    m, n = a.shape
    if a.size == 0:
        s = creation.zeros((0,), ufuncs.real(a).dtype)
        rank = creation.asarray(0, dtype=int)
        x = creation.zeros((n, b.shape[1]), a.dtype)
    else:
        eps = float(np.finfo(a.dtype).eps)
        rcond = eps * max(m, n) if rcond is None else manipulation.where(rcond < 0, eps, rcond)
        u, s, vh = svd(a, full_matrices=False)
        keep = (s > 0) & (s >= creation.asarray(rcond, s.dtype) * s[0])
        rank = reductions.sum(keep)
        s_inv = manipulation.where(keep, 1 / manipulation.where(keep, s, 1), 0).astype(a.dtype)
        x = products.matmul(_H(vh), s_inv[:, None] * products.matmul(_H(u), b))
    if numpy_resid and (int(rank) < n or m <= n):
        resid = creation.zeros((0,), ufuncs.real(a).dtype)
    else:
        resid = reductions.sum(ufuncs.abs(b - products.matmul(a, x)) ** 2, axis=0)
    return (x[:, 0] if vector else x), resid, rank, s


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    """The number of singular values above a threshold: by default the largest one times
    ``max(m, n) * eps``. A given ``rtol`` (or ``tol``) is the threshold itself, as JAX 0.10
    compares it (its docstring and NumPy scale it by the largest singular value)."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    M, = _inexact("jnp.linalg.matrix_rank", M)
    if M.ndim < 2:
        return reductions.any(M != 0).astype(np.int32)
    s = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        rtol = reductions.max(s, axis=-1) * max(M.shape[-2:]) * float(np.finfo(s.dtype).eps)
    return reductions.sum(s > manipulation.expand_dims(rtol, -1), axis=-1)


def cond(x, p=None):
    """The condition number ``norm(x, p) * norm(inv(x), p)`` (the ratio of extreme singular
    values for ``p`` of None, 2 or -2); inf for singular matrices."""
    arr, = _inexact("jnp.linalg.cond", x)
    if arr.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got "
                         f"arr.shape={arr.shape!r}")
    if arr.shape[-1] == 0 or arr.shape[-2] == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got "
                         f"arr.shape={arr.shape!r}")
    if p is None or p == 2:
        s = svdvals(arr)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svdvals(arr)
        r = s[..., -1] / s[..., 0]
    else:
        if arr.shape[-2] != arr.shape[-1]:
            raise ValueError(f"jnp.linalg.cond: for p={p!r}, array must be square; got "
                             f"arr.shape={arr.shape!r}")
        r = norm(arr, ord=p, axis=(-2, -1)) * norm(inv(arr), ord=p, axis=(-2, -1))
    nan_input = reductions.any(ufuncs.isnan(arr), axis=(-2, -1))
    return manipulation.where(ufuncs.isnan(r) & ~nan_input, np.inf, r)


# --- norms ----------------------------------------------------------------------------------

def _sum_abs2(x, axis, keepdims):
    return reductions.sum(ufuncs.real(x * ufuncs.conj(x)), axis=axis, keepdims=keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """``(sum |x|^ord)^(1/ord)`` over ``axis`` (all axes by default); ``ord`` inf/-inf is the
    largest/smallest ``|x|``, 0 counts the nonzero entries. As in JAX, only the 2-norm and
    the general ``ord`` promote an integer or bool ``x``: inf/-inf and 1 keep its dtype
    (``vector_norm(int_x, ord=1)`` is an int sum) and 0 wants an inexact ``x``."""
    check_arraylike("jnp.linalg.vector_norm", x)
    x = to_array(x)
    if ord is None or ord == 2:
        return ufuncs.sqrt(_sum_abs2(x, axis, keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm.")
    if ord == np.inf:
        return reductions.max(ufuncs.abs(x), axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return reductions.min(ufuncs.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return reductions.sum(x != 0, axis=axis, keepdims=keepdims,
                              dtype=dtypes.finfo(x.dtype).dtype)
    if ord == 1:
        return reductions.sum(ufuncs.abs(x), axis=axis, keepdims=keepdims)
    x, = promote_dtypes_inexact(x)
    abs_x = ufuncs.abs(x)
    return reductions.sum(abs_x ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


# Matrix norms that are a reduction of absolute row or column sums: ord -> (sum over, then
# reduce with).
_SUM_NORMS = {1: ("rows", "max"), -1: ("rows", "min"),
              np.inf: ("cols", "max"), -np.inf: ("cols", "min")}


def _matrix_norm(x, ord, axes, keepdims):
    row_axis, col_axis = axes
    if ord is None or ord in ("f", "fro"):
        return ufuncs.sqrt(_sum_abs2(x, axes, keepdims))
    if ord in _SUM_NORMS:
        summed, reduce = _SUM_NORMS[ord]
        first, second = (row_axis, col_axis) if summed == "rows" else (col_axis, row_axis)
        if not keepdims and second > first:
            second -= 1
        sums = reductions.sum(ufuncs.abs(x), axis=first, keepdims=keepdims)
        if reduce == "max":
            return reductions.max(sums, axis=second, keepdims=keepdims, initial=0)
        return reductions.min(sums, axis=second, keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        s = svd(manipulation.moveaxis(x, axes, (-2, -1)), compute_uv=False)
        y = {"nuc": lambda: reductions.sum(s, axis=-1),
             2: lambda: reductions.max(s, axis=-1, initial=0),
             -2: lambda: reductions.min(s, axis=-1)}[ord]()
        return manipulation.expand_dims(y, axes) if keepdims else y
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")


def norm(x, ord=None, axis=None, keepdims=False):
    """A vector norm (one axis, or a 1-D input) or a matrix norm (two axes, or a 2-D input),
    with NumPy's ``ord`` values."""
    x, = _inexact("jnp.linalg.norm", x)
    if axis is None:
        if ord is None:
            return ufuncs.sqrt(_sum_abs2(x, None, keepdims))
        axis = tuple(range(x.ndim))
    elif isinstance(axis, (tuple, list)):
        axis = tuple(canonicalize_axis(a, x.ndim) for a in axis)
    else:
        axis = (canonicalize_axis(axis, x.ndim),)
    if len(axis) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axis, keepdims=keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError(f"Improper number of axes for norm: axis={axis!r}. Pass one axis to "
                     "compute a vector-norm, or two axes to compute a matrix-norm.")


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix norm over the last two axes."""
    return norm(x, ord=ord, keepdims=keepdims, axis=(-2, -1))


# --- products and shape helpers (the array API's linalg extension) ---------------------------

def matrix_power(a, n):
    """``a`` multiplied by itself ``n`` times by repeated squaring (``n < 0``: of ``inv(a)``;
    ``n == 0``: the identity)."""
    a = to_array(a) if not isinstance(a, (list, tuple)) else creation.asarray(a)
    if a.ndim < 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be at least "
                        "two-dimensional")
    if a.shape[-2] != a.shape[-1]:
        raise TypeError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return manipulation.broadcast_to(creation.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    result, square = None, a
    while True:
        n, bit = divmod(n, 2)
        if bit:
            result = square if result is None else products.matmul(result, square)
        if n == 0:
            return result
        square = products.matmul(square, square)


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices (the first and last may be vectors), multiplied
    in the order that needs the fewest scalar multiplications (the classic dynamic
    programme over split points)."""
    arrs = [creation.asarray(a) for a in arrays]
    if len(arrs) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got "
                         f"len(arrays)={len(arrs)}")
    if not (arrs[0].ndim in (1, 2) and arrs[-1].ndim in (1, 2)
            and all(a.ndim == 2 for a in arrs[1:-1])):
        raise ValueError("multi_dot: input arrays must all be two-dimensional, except for "
                         "the first and last array which may be 1 or 2 dimensional. Got "
                         f"array shapes {[a.shape for a in arrs]}")
    first_vector, last_vector = arrs[0].ndim == 1, arrs[-1].ndim == 1
    if first_vector:
        arrs[0] = arrs[0][None, :]
    if last_vector:
        arrs[-1] = arrs[-1][:, None]
    if any(a.shape[1] != b.shape[0] for a, b in zip(arrs[:-1], arrs[1:])):
        raise ValueError("multi_dot: last dimension of each array must match first "
                         "dimension of following array. Got array shapes "
                         f"{[a.shape for a in arrays]}")
    dims = [a.shape[0] for a in arrs] + [arrs[-1].shape[1]]
    split = _chain_order(dims)

    def product(i, j):
        if i == j:
            return arrs[i]
        k = split[i, j]
        return products.matmul(product(i, k), product(k + 1, j), precision=precision)
    out = product(0, len(arrs) - 1)
    if first_vector:
        out = out[0]
    return out[..., 0] if last_vector else out


@functools.lru_cache(maxsize=64)
def _chain_order_cached(dims):
    n = len(dims) - 1
    cost = {(i, i): 0 for i in range(n)}
    split = {}
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i, j], split[i, j] = min(
                (cost[i, k] + cost[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j))
    return split


def _chain_order(dims):
    """``split[i, j]``: where the product of matrices i..j is best split in two."""
    return _chain_order_cached(tuple(dims))


def matrix_transpose(x, /):
    """Swap the last two axes."""
    x = creation.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got "
                         f"ndim={x.ndim}")
    return lax.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def outer(x1, x2, /):
    """The outer product of two vectors."""
    x1, x2 = creation.asarray(x1), creation.asarray(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={x1.ndim} x2.ndim={x2.ndim}")
    return products.outer(x1, x2)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of (stacks of) 3-vectors along ``axis``."""
    x1, x2 = creation.asarray(x1), creation.asarray(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have x1.shape[axis]={x1.shape[axis]} and "
                         f"x2.shape[axis]={x2.shape[axis]}")
    return products.cross(x1, x2, axis=axis)


def diagonal(x, /, *, offset=0):
    """The diagonal of the last two axes."""
    return manipulation.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the diagonal of the last two axes."""
    return reductions.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """``sum(conj(x1) * x2)`` along ``axis``."""
    return products.vecdot(x1, x2, axis=axis, precision=precision,
                      preferred_element_type=preferred_element_type)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    return products.matmul(x1, x2, precision=precision,
                      preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None,
              out_sharding=None):
    if out_sharding is not None:
        refuse_out_sharding("jnp.linalg.tensordot", out_sharding)
    return products.tensordot(x1, x2, axes=axes, precision=precision,
                              preferred_element_type=preferred_element_type)


def tensorinv(a, ind=2):
    """The inverse of ``a`` seen as a linear map from its last axes to its first ``ind``
    ones: ``tensordot(tensorinv(a, ind), a, ind)`` is the identity."""
    a = creation.asarray(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind!r}")
    out_shape, in_shape = a.shape[:ind], a.shape[ind:]
    rows, cols = math.prod(out_shape), math.prod(in_shape)
    if rows != cols:
        raise ValueError("tensorinv is only possible when the product of the first `ind` "
                         "dimensions equals that of the remaining dimensions. got "
                         f"arr.shape={a.shape!r} with ind={ind!r}.")
    return manipulation.reshape(inv(manipulation.reshape(a, (rows, cols))), in_shape + out_shape)


def tensorsolve(a, b, axes=None):
    """``x`` with ``tensordot(a, x, x.ndim) = b``; ``axes`` of ``a`` move to the end first."""
    a, b = creation.asarray(a), creation.asarray(b)
    if axes is not None:
        a = manipulation.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape:
        raise ValueError("After moving axes to end, leading shape of a must match shape of "
                         f"b. got a.shape={a.shape}, b.shape={b.shape}")
    if b.size != math.prod(out_shape):
        raise ValueError("Input arrays must have prod(a.shape[:b.ndim]) == "
                         f"prod(a.shape[b.ndim:]); got a.shape={a.shape}, b.ndim={b.ndim}.")
    x = solve(manipulation.reshape(a, (b.size, math.prod(out_shape))), manipulation.ravel(b))
    return manipulation.reshape(x, out_shape)

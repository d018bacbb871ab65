"""``nbjax.scipy.linalg``: SciPy's linear-algebra signatures, as ``jax.scipy.linalg``.

The factorizations are the primitives of ``nbjax.lax.linalg`` with SciPy's
conventions on top (upper Cholesky factors by default, ``(p, l, u)`` for ``lu``, pivots for
``lu_factor``). ``expm`` is the scaling-and-squaring Padé algorithm of Higham (2005), as in
SciPy and JAX, written with lax control flow so that it can be jitted, batched and
differentiated. ``sqrtm`` and ``funm`` work on the complex Schur form, filling the upper
triangle of the result one superdiagonal at a time (see ``_fill_upper``). SciPy's
``overwrite_*`` and ``check_finite`` arguments are accepted and ignored (nbjax arrays are
immutable and compiled code cannot check values).
"""

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..core import Tracer
from ..lax import linalg as lax_linalg
from ..lax.linalg.decompositions import lu_solve as lax_lu_solve
from ..lax.linalg.util import permutation_matrix
from ..numpy import linalg as jnp_linalg
from ..numpy.util import promote_dtypes_inexact
from .linalg_matrices import *  # noqa: F401,F403
from .linalg_matrices import __all__ as _matrices

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "expm_frechet", "funm",
           "hessenberg", "inv", "lu", "lu_factor", "lu_solve", "qr", "rsf2csf", "schur", "solve",
           "solve_triangular", "sqrtm", "svd"] + _matrices


def _H(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _batched_rhs(a, b, solve):
    """Apply ``solve(a, b)`` (equal batch axes, ``b`` a stack of matrices) to SciPy-style
    arguments: ``b`` is a vector ``[n]`` or matrices ``[..., n, k]``, batch axes broadcast."""
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    x = solve(jnp.broadcast_to(a, batch + a.shape[-2:]),
              jnp.broadcast_to(b, batch + b.shape[-2:]))
    return x[..., 0] if vector else x


# --- triangular and Cholesky solves -------------------------------------------------------------

_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """Solve ``op(a) x = b`` for triangular ``a``; ``trans`` 0/'N', 1/'T' or 2/'C' makes
    ``op`` the identity, the transpose or the conjugate transpose."""
    if trans not in _TRANS:
        raise ValueError(f"Invalid 'trans' value {trans}")
    transpose_a, conjugate_a = _TRANS[trans]
    a, b = promote_dtypes_inexact(jnp.asarray(a), jnp.asarray(b))
    return _batched_rhs(a, b, lambda a, b: lax_linalg.triangular_solve(
        a, b, left_side=True, lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
        unit_diagonal=unit_diagonal))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of Hermitian positive-definite ``a``: upper ``U`` with
    ``a = U^H U`` by default (SciPy's convention), lower ``L`` if ``lower``. Only that
    triangle of ``a`` is read."""
    a, = promote_dtypes_inexact(jnp.asarray(a))
    L = lax_linalg.cholesky(a if lower else _H(a), symmetrize_input=False)
    return L if lower else _H(L)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for ``cho_solve``."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` from the Cholesky factor of ``a``: two triangular solves,
    ``L y = b`` then ``L^H x = y`` (mirrored for an upper factor)."""
    c, lower = c_and_lower
    c, b = promote_dtypes_inexact(jnp.asarray(c), jnp.asarray(b))

    def solve(c, b):
        y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower,
                                        transpose_a=not lower, conjugate_a=not lower)
        return lax_linalg.triangular_solve(c, y, left_side=True, lower=lower,
                                           transpose_a=lower, conjugate_a=lower)
    return _batched_rhs(c, b, solve)


# --- LU -------------------------------------------------------------------------------------

def lu_factor(a, overwrite_a=False, check_finite=True):
    """``(lu, piv)``: the packed LU factors and LAPACK's row swaps."""
    a, = promote_dtypes_inexact(jnp.asarray(a))
    lu_matrix, pivots, _ = lax_linalg.lu(a)
    return lu_matrix, pivots


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` (``trans`` 0), ``a^T x = b`` (1) or ``a^H x = b`` (2) from
    ``lu_factor(a)``."""
    lu_matrix, pivots = lu_and_piv
    lu_matrix, b = promote_dtypes_inexact(jnp.asarray(lu_matrix), jnp.asarray(b))
    permutation = lax_linalg.lu_pivots_to_permutation(jnp.asarray(pivots),
                                                      lu_matrix.shape[-1])
    batch = jnp.broadcast_shapes(lu_matrix.shape[:-2], permutation.shape[:-1])
    permutation = jnp.broadcast_to(permutation, batch + permutation.shape[-1:])

    def solve(lu_matrix, b):
        perm = jnp.broadcast_to(permutation, lu_matrix.shape[:-1])
        return lax_lu_solve(lu_matrix, perm, b, trans)
    return _batched_rhs(jnp.broadcast_to(lu_matrix, batch + lu_matrix.shape[-2:]), b, solve)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """``(p, l, u)`` with ``a = p @ l @ u`` (``p`` a permutation matrix, ``l`` unit lower
    trapezoidal, ``u`` upper trapezoidal), or ``(p @ l, u)`` with ``permute_l``. ``p`` is
    real for complex ``a``, as SciPy's."""
    a, = promote_dtypes_inexact(jnp.asarray(a))
    lu_matrix, _, permutation = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    # P a = L U with P[i, perm[i]] = 1, so a = P^T L U.
    p = jnp.swapaxes(permutation_matrix(permutation, jnp.finfo(a.dtype).dtype), -1, -2)
    l = jnp.tril(lu_matrix, -1)[..., :, :k] + jnp.eye(m, k, dtype=a.dtype)
    u = jnp.triu(lu_matrix)[..., :k, :]
    return (jnp.matmul(p, l), u) if permute_l else (p, l, u)


# --- other decompositions and solvers -------------------------------------------------------

def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """``(q, r)``: complete factors (``mode='full'``), thin ones ('economic'), or ``(r,)``
    ('r'); with ``pivoting``, the column permutation ``p`` after them (``a[:, p] = q r``)."""
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    a, = promote_dtypes_inexact(jnp.asarray(a))
    q, r, *p = lax_linalg.qr(a, pivoting=pivoting, full_matrices=mode != "economic")
    return (r, *p) if mode == "r" else (q, r, *p)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """``(u, s, vh)`` or ``s``, as ``jnp.linalg.svd``."""
    a, = promote_dtypes_inexact(jnp.asarray(a))
    return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):
    """``(w, v)`` (or ``w``) of Hermitian ``a``, reading its ``lower`` (or upper) triangle.
    The generalised problem (``b``), ``eigvals`` subsets and ``type`` are not provided."""
    if b is not None or eigvals is not None or type != 1:
        raise NotImplementedError("Only the b=None, eigvals=None, type=1 case of eigh is "
                                  "implemented.")
    a, = promote_dtypes_inexact(jnp.asarray(a))
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=False)
    return w if eigvals_only else (w, v)


def inv(a, overwrite_a=False, check_finite=True):
    return jnp_linalg.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    return jnp_linalg.det(a)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """Solve ``a x = b``; ``assume_a='pos'`` (positive definite) solves through the
    Cholesky factor of the ``lower`` (or upper) triangle, the other kinds through LU."""
    valid = ("gen", "sym", "her", "pos")
    if assume_a not in valid:
        raise ValueError(f"Expected assume_a to be one of {list(valid)}; got {assume_a!r}")
    if assume_a != "pos":
        return jnp_linalg.solve(a, b)
    return cho_solve(cho_factor(a, lower=lower), b)


# --- expm -----------------------------------------------------------------------------------

# Padé coefficients b_0 .. b_q of degree q (Higham 2005, table 2.3).
_PADE_COEFFICIENTS = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
        3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.),
}

# Per precision: the largest 1-norm handled without scaling, and the 1-norm bounds up to
# which each Padé degree is accurate (Higham's theta_m) with the degrees themselves.
_EXPM_PARAMS = {
    np.dtype(np.float64): (5.371920351148152,
                           (0.01495585217958292, 0.253939833006323, 0.9504178996162932,
                            2.097847961257068), (3, 5, 7, 9, 13)),
    np.dtype(np.float32): (3.92572478313866, (0.4258730016922831, 1.880152677804762),
                           (3, 5, 7)),
}


def _pade(degree):
    """The branch computing ``(U, V)`` for one degree: ``exp(A) ~ (V - U)^{-1} (V + U)`` with
    ``U = A sum_k b_{2k+1} A^{2k}`` (the odd terms) and ``V = sum_k b_{2k} A^{2k}``."""
    b = _PADE_COEFFICIENTS[degree]

    def branch(a):
        a2 = jnp.matmul(a, a)
        power = jnp.eye(a.shape[-1], dtype=a.dtype)
        odd, even = b[1] * power, b[0] * power
        for k in range(1, degree // 2 + 1):
            power = jnp.matmul(power, a2)
            odd, even = odd + b[2 * k + 1] * power, even + b[2 * k] * power
        return jnp.matmul(a, odd), even
    return branch


def _expm_single(a, max_squarings):
    """Scale ``a`` by ``2^-s`` until its 1-norm is small, take the Padé approximant of the
    degree that suffices for that norm, and square the result ``s`` times."""
    if a.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise TypeError(f"A.dtype={a.dtype} is not supported.")
    maxnorm, bounds, degrees = _EXPM_PARAMS[np.finfo(a.dtype).dtype]
    norm1 = jnp_linalg.norm(a, 1)
    squarings = jnp.maximum(0, jnp.floor(jnp.log2(norm1 / maxnorm)))
    scaled = a / (2.0 ** squarings).astype(a.dtype)
    index = jnp.digitize(norm1, jnp.asarray(bounds, norm1.dtype))
    u, v = lax.switch(index, [_pade(d) for d in degrees], scaled)
    r = jnp_linalg.solve(v - u, v + u)

    def square(r, i):
        return lax.cond(i < squarings, lambda r: jnp.matmul(r, r), lambda r: r, r), None
    r, _ = lax.scan(square, r, jnp.arange(max_squarings, dtype=squarings.dtype))
    return jnp.where(squarings > max_squarings, jnp.full_like(r, np.nan), r)


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential of (a stack of) square matrices; NaN if more than
    ``max_squarings`` squarings would be needed. (``upper_triangular`` is accepted for
    JAX's signature; the general solve is used either way.)"""
    A, = promote_dtypes_inexact(jnp.asarray(A))
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={A.shape!r}.")
    return jnp.vectorize(lambda a: _expm_single(a, max_squarings), signature="(n,n)->(n,n)")(A)


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """The Fréchet derivative of ``expm`` at ``A`` in the direction ``E`` (and ``expm(A)``):
    the top right block of ``expm([[A, E], [0, A]])``."""
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"Unknown implementation {method!r}")
    A, E = promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(E))
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape != E.shape:
        raise ValueError("expected A and E to be square matrices of the same shape")
    n = A.shape[0]
    big = jnp.block([[A, E], [jnp.zeros_like(A), A]])
    out = expm(big)
    frechet = out[:n, n:]
    return (out[:n, :n], frechet) if compute_expm else frechet


# --- Schur and Hessenberg forms ---------------------------------------------------------------

def schur(a, output="real"):
    """``(T, Z)`` with ``a = Z T Z^H``: ``T`` quasi-triangular for real ``a`` (2x2 blocks for
    complex-conjugate eigenvalues) unless ``output='complex'``, which makes it triangular."""
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got "
                         f"output={output!r}.")
    a = jnp.asarray(a)
    if output == "complex":
        a = a.astype(jnp.promote_types(a.dtype, np.complex64))
    return lax_linalg.schur(a)


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """``H`` (zero below the first subdiagonal) with ``a = Q H Q^H``, or ``(H, Q)`` with
    ``calc_q``. ``Q`` is the product of the Householder reflectors LAPACK's reduction leaves
    below the subdiagonal; they act on rows 1.., so ``Q``'s first row and column are ``e_0``."""
    a = jnp.asarray(a)
    packed, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    if a.shape[-1] == 0:
        return h, h
    inner = lax_linalg.householder_product(packed[..., 1:, :-1], taus)
    q = jnp.pad(inner, [(0, 0)] * (a.ndim - 2) + [(1, 0), (1, 0)]).at[..., 0, 0].set(1)
    return h, q


def _fill_upper(diagonal, entry):
    """The upper-triangular matrix with ``diagonal`` whose entries above it are filled one
    superdiagonal at a time: ``entry(m)`` computes every position from ``m``, which holds the
    superdiagonals filled so far (zeros further up), and those of the next one are kept.

    Schur-Parlett recurrences (``sqrtm``, ``funm``) have this shape: entry ``(i, j)`` depends
    only on entries closer to the diagonal, through a sum that a matrix product of ``m``
    computes exactly because the entries not filled yet are zero."""
    n = diagonal.shape[-1]
    offset = jnp.arange(n)[None, :] - jnp.arange(n)[:, None]  # j - i at (i, j)
    start = jnp.where(offset == 0, diagonal[..., None, :], jnp.zeros((), diagonal.dtype))
    return lax.fori_loop(1, n, lambda d, m: jnp.where(offset == d, entry(m), m), start)


def sqrtm(A, blocksize=1):
    """The principal square root of a square matrix, complex: with ``A = Z T Z^H`` (complex
    Schur form), ``R`` upper triangular with ``R^2 = T`` has ``sqrt(T_ii)`` on its diagonal and
    ``R_ij = (T_ij - sum_{i<k<j} R_ik R_kj) / (R_ii + R_jj)``; the root is ``Z R Z^H``."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    A = jnp.asarray(A)
    if A.ndim > 2:  # lower ranks and non-square matrices get schur's errors, as in JAX
        raise ValueError(f"sqrtm expected a square matrix, got shape {A.shape}")
    T, Z = schur(A, output="complex")
    root = jnp.sqrt(jnp.diagonal(T))
    R = _fill_upper(root, lambda r: (T - r @ r) / (root[:, None] + root[None, :]))
    return Z @ R @ _H(Z)


def funm(A, func, disp=True):
    """``func`` of a square matrix by the Schur-Parlett recurrence (Golub and Van Loan,
    algorithm 11.1.1): ``F = f(T)`` commutes with ``T`` (the complex Schur form of ``A``),
    which gives each ``F_ij`` from entries nearer the diagonal, divided by ``T_jj - T_ii``.
    Inaccurate for close eigenvalues: with ``disp=False`` it returns ``(F, errest)``, SciPy's
    error estimate; with ``disp`` (and a concrete result) it prints a warning when that is
    large. ``func`` receives the eigenvalues as a vector."""
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:  # one matrix: JAX vmaps funm over stacks
        raise ValueError(f"funm expected a square matrix, got shape {A.shape}")
    T, Z = schur(A, output="complex")
    t = jnp.diagonal(T)
    gap = t[None, :] - t[:, None]  # T_jj - T_ii at (i, j)
    no_gap = gap == 0

    def entry(f):  # (T F - F T)_ij = T_ij (F_jj - F_ii) + sum_{i<k<j} (T_ik F_kj - F_ik T_kj)
        s = T @ f - f @ T
        return jnp.where(no_gap, s, s / jnp.where(no_gap, 1, gap))
    F = _fill_upper(jnp.asarray(func(t)).astype(T.dtype), entry)
    F = Z @ F @ _H(Z)
    err = _funm_error(T, gap, F)
    if disp:
        if not isinstance(err, Tracer) and err > 1000 * np.finfo(err.dtype).eps:
            print("funm result may be inaccurate, approximate err =", err)
        return F
    return F, err


def _funm_error(T, gap, F):
    """SciPy's error estimate of ``funm``: ``eps * ||triu(T, 1)||_1`` over the smallest
    eigenvalue gap (or ``|T_00|`` if smaller; ``eps`` if that is 0), at most 1; infinite if
    ``F`` is not finite."""
    eps = np.finfo(T.dtype).eps
    upper = jnp.triu(jnp.ones(T.shape, bool), 1)
    smallest = jnp.minimum(jnp.abs(T[0, 0]), jnp.min(jnp.where(upper, jnp.abs(gap), np.inf)))
    smallest = jnp.where(smallest == 0, eps, smallest)
    err = jnp.minimum(1, jnp.maximum(eps, eps / smallest * jnp_linalg.norm(jnp.triu(T, 1), 1)))
    return jnp.where(jnp.all(jnp.isfinite(F)), err, np.inf)


def rsf2csf(T, Z, check_finite=True):
    """The complex Schur form ``(T, Z)`` of a real one: each 2x2 block of ``T`` (a pair of
    complex-conjugate eigenvalues) is made triangular by a complex Givens rotation ``G``
    (``T <- G T G^H``, ``Z <- Z G^H``), from the bottom right up. Works on stacks."""
    T, Z = jnp.asarray(T), jnp.asarray(Z)
    for name, x in (("T", T), ("Z", Z)):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"Input '{name}' must be square.")
    if T.shape != Z.shape:
        raise ValueError(f"Input array shapes must match: Z: {Z.shape} vs. T: {T.shape}")
    dtype = jnp.promote_types(jnp.result_type(T, Z), np.complex64)
    n = T.shape[-1]

    def step(k, tz):
        T, Z = tz
        G = _block_rotation(T, n - 1 - k)
        GH = _H(G)
        return G @ T @ GH, Z @ GH
    T, Z = lax.fori_loop(0, max(n - 1, 0), step, (T.astype(dtype), Z.astype(dtype)))
    return jnp.triu(T), Z


def _block_rotation(T, m):
    """The unitary ``G`` that zeroes ``T[m, m-1]`` in ``G T G^H`` when rows and columns
    ``m-1, m`` of ``T`` hold a 2x2 block (the identity otherwise): it rotates the eigenvector
    ``(mu, T[m, m-1])`` of the block, ``mu`` its eigenvalue with positive imaginary part less
    ``T[m, m]``, onto ``e_0``."""
    n = T.shape[-1]
    batch = T.shape[:-2]
    block = lax.dynamic_slice(T, (0,) * len(batch) + (m - 1, m - 1), batch + (2, 2))
    a, b, c, d = block[..., 0, 0], block[..., 0, 1], block[..., 1, 0], block[..., 1, 1]
    eps = np.finfo(T.dtype).eps
    is_block = jnp.abs(c) > eps * (jnp.abs(a) + jnp.abs(d))
    half = (a - d) / 2
    # Safe values off the blocks, where G is the identity, keep NaNs out of gradients.
    mu = half + jnp.sqrt(jnp.where(is_block, half * half + b * c, 1))
    r = jnp.sqrt(jnp.where(is_block, jnp.abs(mu) ** 2 + jnp.abs(c) ** 2, 1)).astype(T.dtype)
    cos = jnp.where(is_block, mu / r, 1)[..., None, None]
    sin = jnp.where(is_block, c / r, 0)[..., None, None]
    rows, cols = jnp.arange(n)[:, None], jnp.arange(n)[None, :]

    def at(i, j):
        return ((rows == i) & (cols == j)).astype(T.dtype)
    return (jnp.eye(n, dtype=T.dtype) + (jnp.conj(cos) - 1) * at(m - 1, m - 1)
            + sin * (at(m - 1, m) - at(m, m - 1)) + (cos - 1) * at(m, m))

"""``nbjax.scipy.linalg``: SciPy's linear-algebra signatures, as ``jax.scipy.linalg``.

The factorizations are the primitives of ``nbjax.lax.linalg`` with SciPy's
conventions on top (upper Cholesky factors by default, ``(p, l, u)`` for ``lu``, pivots for
``lu_factor``). ``expm`` is the scaling-and-squaring Padé algorithm of Higham (2005), as in
SciPy and JAX, written with lax control flow so that it can be jitted, batched and
differentiated. SciPy's ``overwrite_*`` and ``check_finite`` arguments are accepted and
ignored (nbjax arrays are immutable and compiled code cannot check values).
"""

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..lax import linalg as lax_linalg
from ..numpy import linalg as jnp_linalg
from ..numpy.util import promote_dtypes_inexact
from .linalg_matrices import *  # noqa: F401,F403
from .linalg_matrices import __all__ as _matrices

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "expm_frechet", "inv",
           "lu", "lu_factor", "lu_solve", "qr", "solve", "solve_triangular", "svd"] + _matrices


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
        return lax_linalg.lu_solve(lu_matrix, perm, b, trans)
    return _batched_rhs(jnp.broadcast_to(lu_matrix, batch + lu_matrix.shape[-2:]), b, solve)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """``(p, l, u)`` with ``a = p @ l @ u`` (``p`` a permutation matrix, ``l`` unit lower
    trapezoidal, ``u`` upper trapezoidal), or ``(p @ l, u)`` with ``permute_l``."""
    a, = promote_dtypes_inexact(jnp.asarray(a))
    lu_matrix, _, permutation = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    # P a = L U with P[i, perm[i]] = 1, so a = P^T L U.
    p = jnp.swapaxes(lax_linalg.permutation_matrix(permutation, a.dtype), -1, -2)
    l = jnp.tril(lu_matrix, -1)[..., :, :k] + jnp.eye(m, k, dtype=a.dtype)
    u = jnp.triu(lu_matrix)[..., :k, :]
    return (jnp.matmul(p, l), u) if permute_l else (p, l, u)


# --- other decompositions and solvers -------------------------------------------------------

def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """``(q, r)``: complete factors (``mode='full'``), thin ones ('economic'), or ``(r,)``
    ('r'). Column pivoting is not provided."""
    if pivoting:
        raise NotImplementedError("qr(pivoting=True) is not implemented in nbjax")
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    a, = promote_dtypes_inexact(jnp.asarray(a))
    q, r = lax_linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


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

"""The special-matrix constructors of ``jax.scipy.linalg`` (Toeplitz, Hankel, circulant,
companion, Pascal, Hilbert...), and the factorizations built from others: ``polar`` (from
the SVD), ``qr_multiply``,
``eigh_tridiagonal`` and ``solve_sylvester``.

Constructors of a matrix from an array gather its entries with an index matrix computed
here (the shape is static), so they trace, differentiate and batch like any gather. Those of
a matrix from its size alone are computed exactly in Python integers (Pascal and inverse
Hilbert entries overflow floats' precision long before they overflow) and converted once.
"""

import math

import numpy as np

from .. import numpy as jnp
from ..numpy.util import promote_dtypes_inexact

__all__ = ["block_diag", "circulant", "companion", "convolution_matrix", "dft",
           "eigh_tridiagonal", "fiedler", "fiedler_companion", "hadamard",
           "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal",
           "polar", "qr_multiply", "solve_sylvester", "toeplitz"]


def _float_dtype():
    return jnp.asarray(0.0).dtype


def _from_integers(rows):
    """A float matrix (the default float dtype) from a square list of lists of exact Python
    integers (of any size, ``0 x 0`` included)."""
    n = len(rows)
    return jnp.asarray(np.array(rows, dtype=np.float64).reshape(n, n), _float_dtype())


def _gather(values, index):
    """``values[index]`` for a static integer index matrix."""
    return jnp.take(values, jnp.asarray(index))


# --- from arrays ------------------------------------------------------------------------------

def toeplitz(c, r=None):
    """The matrix constant along diagonals with first column ``c`` and first row ``r``
    (``conj(c)`` by default: a Hermitian matrix); ``r[0]`` is ignored."""
    c = jnp.ravel(jnp.asarray(c))
    r = jnp.conj(c) if r is None else jnp.ravel(jnp.asarray(r))
    dtype = jnp.result_type(c, r)
    c, r = c.astype(dtype), r.astype(dtype)
    m, n = c.shape[0], r.shape[0]
    values = jnp.concatenate([c[::-1], r[1:]])  # entry (i, j) is values[m - 1 - i + j]
    return _gather(values, m - 1 - np.arange(m)[:, None] + np.arange(n))


def hankel(c, r=None):
    """The matrix constant along anti-diagonals with first column ``c`` and last row ``r``
    (zeros by default); ``r[0]`` is ignored."""
    c = jnp.ravel(jnp.asarray(c))
    r = jnp.zeros_like(c) if r is None else jnp.ravel(jnp.asarray(r))
    dtype = jnp.result_type(c, r)
    m, n = c.shape[0], r.shape[0]
    values = jnp.concatenate([c.astype(dtype), r[1:].astype(dtype)])
    return _gather(values, np.arange(m)[:, None] + np.arange(n))


def circulant(c):
    """The matrix whose columns are the cyclic shifts of ``c``: ``C[i, j] = c[(i - j) % n]``."""
    c = jnp.ravel(jnp.asarray(c))
    n = c.shape[0]
    return _gather(c, (np.arange(n)[:, None] - np.arange(n)) % n)


def companion(a):
    """The companion matrix of the polynomial with coefficients ``a`` (highest degree
    first): first row ``-a[1:] / a[0]``, ones on the subdiagonal."""
    a = jnp.atleast_1d(jnp.asarray(a))
    if a.ndim != 1:
        raise ValueError("Incorrect shape for `a`. `a` must be one-dimensional.")
    if a.shape[0] < 2:
        raise ValueError("The length of `a` must be at least 2.")
    a, = promote_dtypes_inexact(a)
    n = a.shape[0] - 1
    first = -a[1:] / a[0]
    return jnp.concatenate([first[None], jnp.eye(n - 1, n, dtype=a.dtype)], axis=0)


def convolution_matrix(a, n, mode="full"):
    """The matrix ``A`` with ``A @ v == convolve(a, v, mode)`` for vectors ``v`` of length
    ``n``."""
    a = jnp.ravel(jnp.asarray(a))
    m = a.shape[0]
    if n <= 0 or m == 0:
        raise ValueError("n and len(a) must be positive")
    rows = {"full": (0, m + n - 1),
            "same": ((min(n, m) - 1) // 2, (min(n, m) - 1) // 2 + max(n, m)),
            "valid": (min(n, m) - 1, max(n, m))}.get(mode)
    if rows is None:
        raise ValueError(f"mode={mode!r} is not one of 'full', 'same' or 'valid'")
    offset = np.arange(*rows)[:, None] - np.arange(n)  # entry (i, j) is a[i - j]
    inside = (offset >= 0) & (offset < m)
    return jnp.where(jnp.asarray(inside), _gather(a, np.clip(offset, 0, m - 1)), 0)


def fiedler(a):
    """The symmetric matrix ``|a[i] - a[j]|``."""
    a = jnp.ravel(jnp.asarray(a))
    return jnp.abs(a[:, None] - a[None, :])


def fiedler_companion(a):
    """Fiedler's pentadiagonal companion matrix of the polynomial ``a`` (highest degree
    first): the same eigenvalues as ``companion(a)``. The coefficients ``-a[k] / a[0]`` sit
    on the first sub- and superdiagonal (rows of even index take the even coefficients), with
    ones two places off the diagonal and one below the top left corner."""
    a = jnp.ravel(jnp.asarray(a))
    a, = promote_dtypes_inexact(a)
    if a.shape[0] <= 2:
        return (-a[1:] / a[0]).reshape(a.shape[0] - 1, a.shape[0] - 1)
    n = a.shape[0] - 1
    coeff = -a[1:] / a[0]  # coeff[k - 1] belongs to a[k]
    out = jnp.zeros((n, n), a.dtype).at[0, 0].set(coeff[0]).at[1, 0].set(1)
    even, odd = np.arange(0, n - 1, 2), np.arange(2, n, 2)
    out = out.at[even, even + 1].set(coeff[even + 1])  # a[2], a[4], ... above the diagonal
    out = out.at[odd, odd - 1].set(coeff[odd])  # a[3], a[5], ... below it
    out = out.at[even[:len(odd)], odd].set(1)
    below = np.arange(3, n, 2)
    return out.at[below, below - 2].set(1)


def leslie(f, s):
    """The Leslie matrix: fecundities ``f`` in the first row, survival rates ``s`` on the
    subdiagonal."""
    f, s = jnp.atleast_1d(jnp.asarray(f)), jnp.atleast_1d(jnp.asarray(s))
    if f.ndim != 1 or s.ndim != 1 or s.shape[0] != f.shape[0] - 1 or f.shape[0] < 2:
        raise ValueError("f and s must be 1-D with len(s) == len(f) - 1 >= 1")
    dtype = jnp.result_type(f, s)
    below = jnp.concatenate([jnp.diag(s.astype(dtype)), jnp.zeros((s.shape[0], 1), dtype)], 1)
    return jnp.concatenate([f.astype(dtype)[None], below], axis=0)


def block_diag(*arrs):
    """The block-diagonal matrix of ``arrs`` (scalars and vectors count as one row)."""
    if not arrs:
        arrs = (jnp.zeros((1, 0)),)
    arrs = [jnp.atleast_2d(jnp.asarray(a)) for a in arrs]
    if any(a.ndim != 2 for a in arrs):
        raise ValueError("block_diag: arguments must have at most two dimensions")
    dtype = jnp.result_type(*arrs)
    total = sum(a.shape[1] for a in arrs)
    rows, left = [], 0
    for a in arrs:
        rows.append(jnp.pad(a.astype(dtype), ((0, 0), (left, total - left - a.shape[1]))))
        left += a.shape[1]
    return jnp.concatenate(rows, axis=0)


# --- from a size ------------------------------------------------------------------------------

def dft(n, scale=None, *, dtype=None):
    """The discrete Fourier transform matrix ``exp(-2 pi i j k / n)``, divided by ``sqrt(n)``
    (``scale='sqrtn'``) or ``n`` (``'n'``)."""
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; {scale!r} is not valid.")
    jk = np.outer(np.arange(n), np.arange(n)) % max(n, 1)  # reduce before the angle: exact
    m = np.exp(-2j * np.pi * jk / max(n, 1))
    m = m / {None: 1, "sqrtn": math.sqrt(n), "n": n}[scale]
    return jnp.asarray(m, dtype or jnp.result_type(_float_dtype(), np.complex64))


def hadamard(n, dtype=int):
    """Sylvester's Hadamard matrix of order ``n`` (a power of 2): ``[[H, H], [H, -H]]``."""
    if n < 1 or n & (n - 1):
        raise ValueError("n must be an positive integer, and n must be a power of 2")
    h = np.ones((1, 1), np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtype)


def helmert(n, full=False):
    """The Helmert matrix: orthogonal, first row ``1 / sqrt(n)``; row ``i`` has ``i``
    entries ``1 / sqrt(i (i+1))`` then ``-i / sqrt(i (i+1))``. Without ``full`` the first
    row is left out."""
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1
    d[0] = n
    h = h / np.sqrt(d)[:, None]
    return jnp.asarray(h if full else h[1:], _float_dtype())


def hilbert(n):
    """The Hilbert matrix ``1 / (i + j + 1)``."""
    i = np.arange(n)
    return jnp.asarray(1.0 / (i[:, None] + i + 1), _float_dtype())


def invhilbert(n):
    """The inverse of ``hilbert(n)``, from its closed form in binomial coefficients."""
    return _from_integers([[(-1) ** (i + j) * (i + j + 1) * math.comb(n + i, n - j - 1)
                            * math.comb(n + j, n - i - 1) * math.comb(i + j, i) ** 2
                            for j in range(n)] for i in range(n)])


def _pascal_kind(kind):
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"Expected kind to be 'symmetric', 'lower', or 'upper'; got {kind!r}")
    return kind


def _lower_pascal(n, sign):
    return [[sign ** (i - j) * math.comb(i, j) if j <= i else 0 for j in range(n)]
            for i in range(n)]


def pascal(n, kind=None):
    """Pascal's matrix: ``C(i + j, i)`` (symmetric), or its lower / upper Cholesky-like
    factors ``C(i, j)`` / ``C(j, i)``."""
    kind = _pascal_kind(kind)
    if kind == "symmetric":
        return _from_integers([[math.comb(i + j, i) for j in range(n)] for i in range(n)])
    lower = _from_integers(_lower_pascal(n, 1))
    return lower if kind == "lower" else lower.T


def invpascal(n, kind=None):
    """The inverse of ``pascal(n, kind)``; the triangular inverses are ``(-1)^(i-j) C(i, j)``
    and the symmetric one is ``L^-T L^-1``."""
    kind = _pascal_kind(kind)
    lower = np.array(_lower_pascal(n, -1), dtype=object).reshape(n, n)
    if kind == "symmetric":
        return _from_integers((lower.T @ lower).tolist())
    return _from_integers((lower if kind == "lower" else lower.T).tolist())


# --- factorizations built from others ---------------------------------------------------------

def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """``(u, p)``: ``a = u p`` (``side='right'``) or ``a = p u`` (``'left'``) with ``u``
    having orthonormal columns and ``p`` Hermitian positive semi-definite. Computed from the
    SVD ``a = W S V^H`` (``u = W V^H``) whatever ``method`` says, so it is differentiable
    where the SVD is."""
    if side not in ("left", "right"):
        raise ValueError(f"side={side!r} must be 'left' or 'right'")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"Unknown polar decomposition method {method!r}")
    a, = promote_dtypes_inexact(jnp.asarray(a))
    if a.ndim != 2:
        raise ValueError("The input `a` must be a 2-D array.")
    w, s, vh = jnp.linalg.svd(a, full_matrices=False)
    u = w @ vh
    basis = vh.conj().T if side == "right" else w
    p = (basis * s.astype(a.dtype)) @ basis.conj().T
    return u, p


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """``(Q c, R)`` (``mode='left'``) or ``(c Q, R)`` (``'right'``) with the economic QR
    factors of ``a``; ``conjugate`` uses ``conj(Q)``."""
    if pivoting:
        raise NotImplementedError("qr_multiply(pivoting=True) is not implemented in nbjax")
    if mode not in ("left", "right"):
        raise ValueError(f"mode={mode!r} must be 'left' or 'right'")
    a, c = promote_dtypes_inexact(jnp.asarray(a), jnp.asarray(c))
    q, r = jnp.linalg.qr(a, mode="reduced")
    if conjugate:
        q = jnp.conj(q)
    vector = c.ndim == 1
    if mode == "left":
        out = q @ (c[:, None] if vector else c)
    else:
        out = (c[None, :] if vector else c) @ q
    return (jnp.ravel(out) if vector else out), r


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None,
                     key=None):
    """Eigenvalues (and eigenvectors) of the symmetric tridiagonal matrix with diagonal
    ``d`` and off-diagonal ``e``, through ``eigh`` of the dense matrix (so differentiable
    like it). Only ``select='a'`` (all eigenvalues) is provided."""
    if select != "a":
        raise NotImplementedError(f"eigh_tridiagonal(select={select!r}) is not implemented")
    d, e = promote_dtypes_inexact(jnp.asarray(d), jnp.asarray(e))
    if d.ndim != 1 or e.shape != (max(d.shape[0] - 1, 0),):
        raise ValueError("d must be 1-D and e one element shorter")
    matrix = jnp.diag(d) + jnp.diag(e, 1) + jnp.diag(jnp.conj(e), -1)
    w, v = jnp.linalg.eigh(matrix)
    return w if eigvals_only else (w, v)


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """``X`` with ``A X + X B = C``, as the linear system ``(A ⊗ I + I ⊗ B^T) vec(X) = vec(C)``
    (row-major ``vec``): exact and differentiable, but cubic in the number of entries of
    ``X``, so meant for small matrices. (JAX goes through Schur forms; ``method`` and ``tol``
    are accepted for its signature.)"""
    A, B, C = promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    m, n = C.shape
    if A.shape != (m, m) or B.shape != (n, n):
        raise ValueError(f"incompatible shapes A {A.shape}, B {B.shape}, C {C.shape}")
    system = jnp.kron(A, jnp.eye(n, dtype=A.dtype)) + jnp.kron(jnp.eye(m, dtype=A.dtype), B.T)
    return jnp.linalg.solve(system, jnp.ravel(C)).reshape(m, n)

"""``tridiagonal_solve``: linear systems whose matrix is tridiagonal, given by its three
diagonals.

The matrix ``A`` of each system is ``dl`` below the diagonal, ``d`` on it and ``du`` above
it (``A[i, i-1] = dl[i]``, ``A[i, i] = d[i]``, ``A[i, i+1] = du[i]``; so ``dl[..., 0]`` and
``du[..., -1]`` are never read), and ``b`` holds the right-hand sides as columns. The leading
axes of all four are batch axes.

The reference implementation is LAPACK's ``gtsv`` (Gaussian elimination with partial
pivoting, which JAX calls on CPU) written in NumPy for a whole stack at once: a row swap
brings a second superdiagonal into ``U``. A system with a zero pivot is singular and its
solution is NaN, as JAX's; ``perturb_singular`` instead nudges such pivots away from zero,
which is what inverse iteration needs. Compiled programs call back into this reference for
it (a library step).

Derivatives follow from ``x = A^{-1} b`` being linear in ``b``: ``dx = A^{-1} (db - dA x)``,
and the transpose solves with ``A^T``, whose diagonals are the same with ``dl`` and ``du``
exchanged (and shifted by one place).
"""

import numpy as np

from ...core import Primitive, ShapedArray
from ...interpreters import ad
from ...interpreters.transpose import is_undefined
from .. import batch_util
from ..elementwise import add, mul, neg
from ..shapes import moveaxis, reshape
from ..standard import INEXACT, check_dtype, same_dtypes, scalar_like
from ..structural import pad
from .util import each_col, linear_algebra_lowering, ndim_of, pivot_magnitude, shape_of

__all__ = ["tridiagonal_solve", "tridiagonal_solve_p"]

tridiagonal_solve_p = Primitive("tridiagonal_solve")
linear_algebra_lowering(tridiagonal_solve_p, "tridiagonal solve")


@tridiagonal_solve_p.def_abstract_eval
def _tridiagonal_solve_abstract_eval(dl, d, du, b, *, perturb_singular):
    """JAX's checks, in its order: ranks, then shapes, then dtypes."""
    name = "tridiagonal_solve"
    for position, (x, rank) in enumerate(((dl, 1), (d, 1), (du, 1), (b, 2))):
        if x.ndim < rank:
            raise TypeError(f"Input {position} to {name} must have rank at least {rank}, "
                            f"but got shape={x.shape}")
    if not dl.shape == d.shape == du.shape:
        raise TypeError(f"{name} requires that all diagonal arguments have the same shape.")
    if b.shape[:-1] != d.shape:
        raise TypeError(f"{name} requires that the leading ndim-1 dimensions of b equal the "
                        "dimensions of the diagonal arguments.")
    for position, x in enumerate((dl, d, du, b)):
        check_dtype(name, x, INEXACT, position)
    same_dtypes(name, (dl, d, du, b))
    return ShapedArray(b.shape, b.dtype, all(x.weak_type for x in (dl, d, du, b)))


# --- the reference: LAPACK's elimination, in NumPy --------------------------------------------

def _larger_entry(d, du):
    """LAPACK ``gtsv``'s pivoting: rows swap when the entry below the pivot is larger
    (``|re| + |im|`` for complex values)."""
    return lambda pivot, low, diag, up: pivot_magnitude(low) > pivot_magnitude(pivot)


def _larger_relative_entry(d, du):
    """LAPACK ``lagtf``'s pivoting (JAX's with ``perturb_singular``): each candidate is
    measured relative to the size (sum of magnitudes) of the row of ``A`` it comes from, so
    that a row does not win by the scale of its entries alone."""
    scale = np.abs(d[..., 0]) + np.abs(du[..., 0])  # (of the row being eliminated)

    def swaps(pivot, low, diag, up):
        nonlocal scale
        below = np.abs(low) + np.abs(diag) + np.abs(up)
        swap = np.abs(low) / below > np.where(pivot == 0, 0, np.abs(pivot) / scale)
        scale = np.where(swap, scale, below)
        return swap
    return swaps


def _eliminate(dl, d, du, b, pivoting):
    """Gaussian elimination with partial pivoting, row by row, on every system at once:
    ``(u0, u1, u2, y)`` with ``U`` upper triangular with three diagonals (``u0`` its diagonal)
    and ``U x = y`` the system left to solve.

    At step ``i`` the row being eliminated (``pivot``, ``right`` in columns ``i``, ``i+1``)
    meets row ``i+1`` of ``A``; the one that ``pivoting(d, du)`` prefers becomes row ``i`` of
    ``U``, and the other, less a multiple of it, goes on to the next step. A zero pivot (so
    zero below it too) eliminates nothing, as LAPACK's ``gttrf`` does.
    """
    n = d.shape[-1]
    u0, u1, u2, y = np.empty_like(d), np.zeros_like(d), np.zeros_like(d), np.empty_like(b)
    if n == 0:
        return u0, u1, u2, y
    swaps = pivoting(d, du)
    pivot, right, rhs = d[..., 0], du[..., 0], b[..., 0, :]
    for i in range(n - 1):
        low, diag, below = dl[..., i + 1], d[..., i + 1], b[..., i + 1, :]
        up = du[..., i + 1] if i + 2 < n else np.zeros_like(diag)
        swap = swaps(pivot, low, diag, up)
        f = np.where(swap, pivot / low, np.where(pivot == 0, 0, low / pivot))
        u0[..., i], u1[..., i] = np.where(swap, low, pivot), np.where(swap, diag, right)
        u2[..., i] = np.where(swap, up, 0)
        y[..., i, :] = np.where(swap[..., None], below, rhs)
        pivot, right = np.where(swap, right - f * diag, diag - f * right), \
            np.where(swap, -f * up, up)
        rhs = np.where(swap[..., None], rhs - f[..., None] * below,
                       below - f[..., None] * rhs)
    u0[..., n - 1], y[..., n - 1, :] = pivot, rhs
    return u0, u1, u2, y


def _perturbed_quotient(t, pivot, tol):
    """``t / pivot`` for a ``pivot`` that may be zero or tiny: while it is zero, or small
    enough that the quotient would overflow, the pivot moves away from zero by ``tol``, then
    ``2 tol``, ``4 tol``... (on the side of its sign), as LAPACK's ``lagts`` perturbs."""
    big = 1 / np.finfo(t.dtype).tiny
    pivot = np.broadcast_to(pivot, t.shape)
    size = np.abs(pivot)
    step = tol * np.where(size == 0, 1, pivot / np.where(size == 0, 1, size))
    while True:
        grow = (size == 0) | ((size < 1) & (np.abs(t) > size * big))
        if not grow.any():
            return t / pivot
        pivot = np.where(grow, pivot + step, pivot)
        step = np.where(grow, 2 * step, step)
        size = np.abs(pivot)


def _perturbation(u0, u1, u2):
    """The ``tol`` of each system: ``eps * max |U|``, or the smallest normal number for a
    zero ``U``."""
    info = np.finfo(u0.dtype)
    largest = np.max(np.abs(np.concatenate([u0, u1, u2], -1)), axis=-1, initial=0)
    tol = info.eps * largest
    return np.where(tol == 0, info.tiny, tol)[..., None]


def _back_substitute(u0, u1, u2, y, divide):
    """``x`` with ``U x = y``, from the last row up, ``divide`` dividing by the pivots."""
    n = u0.shape[-1]
    x = np.empty_like(y)
    for i in reversed(range(n)):
        t = y[..., i, :]
        if i + 1 < n:
            t = t - u1[..., i, None] * x[..., i + 1, :]
        if i + 2 < n:
            t = t - u2[..., i, None] * x[..., i + 2, :]
        x[..., i, :] = divide(t, u0[..., i, None])
    return x


@tridiagonal_solve_p.def_impl
def _tridiagonal_solve_impl(dl, d, du, b, *, perturb_singular):
    """LAPACK has no half-precision solver, so JAX refuses float16 and bfloat16 here."""
    if b.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise NotImplementedError(f"Unsupported dtype {b.dtype.name}.")
    with np.errstate(all="ignore"):
        u0, u1, u2, y = _eliminate(
            dl, d, du, b, _larger_relative_entry if perturb_singular else _larger_entry)
        if perturb_singular:
            tol = _perturbation(u0, u1, u2)
            return _back_substitute(u0, u1, u2, y,
                                    lambda t, pivot: _perturbed_quotient(t, pivot, tol))
        x = _back_substitute(u0, u1, u2, y, np.divide)
    singular = np.any(u0 == 0, axis=-1)[..., None, None]
    return np.where(singular, np.array(np.nan, b.dtype), x)


# --- derivatives ---------------------------------------------------------------------------------

def _shifted(v, by, axis):
    """``v`` moved ``by`` places along ``axis`` (down for ``by > 0``), zeros filling in."""
    config = [(0, 0, 0)] * ndim_of(v)
    config[axis] = (by, -by, 0)
    return pad(v, scalar_like(v, 0), config)


def _tridiagonal_product(dl, d, du, x):
    """``A x`` for the tridiagonal ``A`` of ``(dl, d, du)``: row ``i`` of ``x`` times ``dl[i+1]``
    moves down a row, times ``du[i-1]`` up a row, so ``dl[..., 0]`` and ``du[..., -1]`` are
    shifted out unread (even a NaN there changes nothing)."""
    k, rows, diagonal = shape_of(x)[-1], ndim_of(x) - 2, ndim_of(d) - 1
    lower = _shifted(mul(each_col(_shifted(dl, -1, diagonal), k), x), 1, rows)
    upper = _shifted(mul(each_col(_shifted(du, 1, diagonal), k), x), -1, rows)
    return add(add(mul(each_col(d, k), x), lower), upper)


@tridiagonal_solve_p.def_jvp
def _tridiagonal_solve_jvp(primals, tangents, *, perturb_singular):
    """``dx = A^{-1} (db - dA x)``: a second solve with the same matrix."""
    *diagonals, _ = primals
    *diagonal_dots, b_dot = tangents
    x = tridiagonal_solve_p.bind(*primals, perturb_singular=perturb_singular)
    rhs = b_dot
    if not all(isinstance(t, ad.Zero) for t in diagonal_dots):
        a_dot_x = _tridiagonal_product(*map(ad.instantiate, diagonal_dots), x)
        rhs = ad.add_tangents(b_dot, neg(a_dot_x))
    if isinstance(rhs, ad.Zero):
        return x, rhs
    return x, tridiagonal_solve_p.bind(*diagonals, rhs, perturb_singular=perturb_singular)


@tridiagonal_solve_p.def_transpose
def _tridiagonal_solve_transpose(ct, dl, d, du, b, *, perturb_singular):
    """Linear in ``b``: the cotangent of ``b`` solves ``A^T y = ct``. Row ``i`` of ``A^T``
    has ``du[i-1]`` below the diagonal and ``dl[i+1]`` above it (no conjugation)."""
    assert is_undefined(b) and not any(map(is_undefined, (dl, d, du)))
    if isinstance(ct, ad.Zero):
        return [None, None, None, ad.Zero(b.aval)]
    axis = ndim_of(d) - 1
    transposed = (_shifted(du, 1, axis), d, _shifted(dl, -1, axis))
    return [None, None, None,
            tridiagonal_solve_p.bind(*transposed, ct, perturb_singular=perturb_singular)]


@tridiagonal_solve_p.def_batch
def _tridiagonal_solve_batch(axis_data, vals, dims, **params):
    """With the same matrix for the whole batch, the batch of right-hand sides becomes extra
    columns of one; otherwise every operand gets the batch axis in front."""
    *diagonals, b = vals
    *diagonal_dims, b_dim = dims
    if all(dim is None for dim in diagonal_dims):
        axis = ndim_of(b) - 1
        b = moveaxis(b, b_dim, axis)  # [..., n, B, k]
        shape = shape_of(b)
        flat = reshape(b, shape[:-2] + (shape[-2] * shape[-1],))
        return reshape(tridiagonal_solve_p.bind(*diagonals, flat, **params), shape), axis
    vals = [batch_util.bdim_at_front(v, dim, axis_data.size) for v, dim in zip(vals, dims)]
    return tridiagonal_solve_p.bind(*vals, **params), 0


def tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
    """The solution ``x`` of ``A x = b`` for tridiagonal ``A`` with lower, main and upper
    diagonals ``dl``, ``d``, ``du`` (``[..., m]``; ``dl[..., 0]`` and ``du[..., -1]`` are not
    read) and right-hand sides ``b`` (``[..., m, k]``). A singular system gives NaNs, unless
    ``perturb_singular``: then zero (and overflowing) pivots are perturbed by about
    ``eps * max |U|`` and the solution is finite."""
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))

"""Polynomials as coefficient arrays, highest power first (NumPy's ``poly*`` functions)."""

import numpy as np

from .. import lax
from ..core import ConcretizationTypeError, Tracer, dtypes, get_aval
from ..lax.standard import scalar_like
from . import reductions
from .creation import vander
from .indexing import IndexUpdateHelper
from .linalg import eigvals, inv, lstsq
from .manipulation import (atleast_1d, broadcast_shapes, concatenate, diag, roll, stack,
                           trim_zeros)
from .products import convolve, dot, outer
from .util import (check_arraylike, concrete_value, promote_dtypes, promote_dtypes_inexact,
                   select_where, to_array)

__all__ = ["polyval", "polyadd", "polysub", "polyder", "polyint", "polymul", "polydiv", "poly",
           "polyfit", "roots"]


def _coefficients(name, *ps):
    check_arraylike(name, *ps)
    for p in ps:
        if get_aval(p).ndim != 1:
            raise ValueError(f"{name}: coefficients must be one-dimensional")
    return promote_dtypes(*ps)


def polyval(p, x, *, unroll=16):
    """``p[0] * x**(n-1) + ... + p[n-1]`` by Horner's rule (``unroll`` is accepted for JAX's
    signature; the loop is unrolled in Python). Each column of a many-dimensional ``p`` is
    a polynomial, broadcast against ``x``. The result is never weak: JAX's Horner loop
    starts from zeros of ``x``'s dtype, strongly typed."""
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(p, x)
    if not get_aval(p).ndim:
        raise ValueError("polyval: coefficients must be at least one-dimensional")
    shape = broadcast_shapes(get_aval(p).shape[1:], get_aval(x).shape)
    y = lax.full(shape, 0, get_aval(x).dtype)
    for k in range(get_aval(p).shape[0]):
        y = y * x + p[k]
    return y


def polyadd(a1, a2):
    """The sum of two polynomials, as JAX computes it: the shorter one (along the first
    axis) added into the end of the other, ``a1.at[-len(a2):].add(a2)``. So higher-dimensional
    coefficients are accepted where those shapes broadcast (each column a polynomial); 0-d
    ones have no length (IndexError: tuple index out of range), and an empty one is added
    to all of the other (``[-0:]``), which fails to broadcast. Boolean coefficients are
    refused (add's TypeError) rather than or-ed."""
    check_arraylike("polyadd", a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    n1, n2 = get_aval(a1).shape[0], get_aval(a2).shape[0]
    if n2 <= n1:
        return IndexUpdateHelper(a1)[-n2:].add(a2)
    return IndexUpdateHelper(a2)[-n1:].add(a1)


def polysub(a1, a2):
    """The difference of two polynomials: ``polyadd(a1, -a2)``, as in JAX (so ``-a2``
    refuses boolean coefficients)."""
    check_arraylike("polysub", a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    return polyadd(a1, -a2)


def polyder(p, m=1):
    """The ``m``-th derivative: each coefficient times its power, ``m`` times. The result is
    inexact (integer and bool coefficients become floats, even for ``m=0``), as in JAX."""
    (p,) = promote_dtypes_inexact(*_coefficients("polyder", p))
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    for _ in range(m):
        n = get_aval(p).shape[0]
        p = p[:-1] * np.arange(n - 1, 0, -1, dtype=get_aval(p).dtype) if n > 1 else p[:0]
    return p


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative, with integration constants ``k`` (0 by default; one
    per integration, the first used first). ``p`` is promoted with ``k``, as in JAX (complex
    constants give complex coefficients)."""
    k = 0 if k is None else k
    check_arraylike("polyint", p, k)
    p, k = promote_dtypes_inexact(*_coefficients("polyint", p), k)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = atleast_1d(k)
    if get_aval(k).shape == (1,):
        k = lax.broadcast_in_dim(k[0], (m,), ())
    if get_aval(k).shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    dtype = get_aval(p).dtype
    for i in range(m):
        n = get_aval(p).shape[0]
        p = concatenate([p / np.arange(n, 0, -1, dtype=dtype), k[i:i + 1]])
    return p


def _inexact_coefficients(name, *ps):
    check_arraylike(name, *ps)
    return promote_dtypes_inexact(*ps)


def _leading_zeros(name, p, tol=None):
    """How many leading entries of the concrete 1-D ``p`` are zero (or, given ``tol``, below
    it in magnitude, as JAX's ``trim_zeros_tol``). A NaN is not zero: it stays."""
    if isinstance(p, Tracer):
        raise ConcretizationTypeError(
            f"jnp.{name} needs concrete coefficients to strip leading zeros (the result's "
            f"shape depends on them); got the traced {get_aval(p).str_short()}.")
    p = np.asarray(p)
    zero = p == 0 if tol is None else np.abs(p) < tol
    nonzero = np.flatnonzero(~zero)
    return int(nonzero[0]) if nonzero.size else p.shape[0]


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials: the convolution of their coefficients."""
    a1, a2 = _inexact_coefficients("polymul", a1, a2)
    if trim_leading_zeros and (get_aval(a1).shape[0] > 1 or get_aval(a2).shape[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if not get_aval(a1).shape[0]:
        a1 = lax.full((1,), 0, get_aval(a2).dtype)
    if not get_aval(a2).shape[0]:
        a2 = lax.full((1,), 0, get_aval(a1).dtype)
    return convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros=False):
    """``(quotient, remainder)`` of polynomial long division. The remainder keeps ``u``'s
    length (NumPy trims its leading zeros: ``trim_leading_zeros`` does, within
    sqrt(eps), on concrete values)."""
    u, v = _inexact_coefficients("polydiv", u, v)
    m, n = get_aval(u).shape[0] - 1, get_aval(v).shape[0] - 1
    scale = 1.0 / v[0]
    q = lax.full((max(m - n + 1, 1),), 0, get_aval(u).dtype)
    for k in range(m - n + 1):
        d = scale * u[k]
        q = IndexUpdateHelper(q)[k].set(d)
        u = IndexUpdateHelper(u)[k:k + n + 1].add(-d * v)
    if trim_leading_zeros:
        u = u[_leading_zeros("polydiv", u, np.sqrt(dtypes.finfo(get_aval(u).dtype).eps)):]
    return q, u


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (of the eigenvalues, for
    a square matrix), one factor ``(x - r)`` at a time."""
    (zeros,) = _inexact_coefficients("poly", seq_of_zeros)
    zeros = atleast_1d(zeros)
    shape = get_aval(zeros).shape
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        zeros = eigvals(zeros)
    if get_aval(zeros).ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    dtype = get_aval(zeros).dtype
    a = lax.full((1,), 1, dtype) if get_aval(zeros).shape[0] else lax.full((), 1, dtype)
    for k in range(get_aval(zeros).shape[0]):
        a = convolve(a, stack([lax.full((), 1, dtype), -zeros[k]]), mode="full")
    return a


def _complex_dtype(p):
    """The complex dtype of the precision of ``p``'s (float32 -> complex64)."""
    return np.result_type(get_aval(p).dtype, np.complex64)


def _companion_roots(p):
    """The eigenvalues of the companion matrix of ``p`` (``p[0] != 0``)."""
    n = get_aval(p).shape[0]
    if n < 2:
        return lax.full((0,), 0, _complex_dtype(p))
    a = diag(lax.full((n - 2,), 1, get_aval(p).dtype), -1)
    a = IndexUpdateHelper(a)[0, :].set(-p[1:] / p[0])
    return eigvals(a)


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial ``p``: the eigenvalues of its companion matrix, as JAX.
    Leading zeros are stripped (``p`` must then be concrete); with ``strip_zeros=False``
    each one gives a NaN root instead, so ``p`` may be traced."""
    (p,) = _inexact_coefficients("roots", p)
    p = atleast_1d(p)
    if get_aval(p).ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    n = get_aval(p).shape[0]
    if n < 2:
        return lax.full((0,), 0, _complex_dtype(p))
    if strip_zeros:
        return _companion_roots(p[_leading_zeros("roots", p):])
    is_zero = lax.eq(p, lax.full_like(p, 0))
    leading = select_where(reductions.all(is_zero), n, reductions.argmin(is_zero))
    p = select_where(lax.eq(leading, scalar_like(leading, n)), lax.full_like(p, 1), p)
    r = _companion_roots(roll(p, -leading))
    r = lax.sort_key_val(lax.eq(r, lax.full_like(r, 0)), r)[1]
    return select_where(lax.lt(lax.iota(dtypes.default_int(), n - 1), n - 1 - leading), r,
                  lax.full_like(r, complex(np.nan, np.nan)))


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial fit of degree ``deg``: ``lstsq`` of the (column-scaled)
    Vandermonde matrix, as NumPy and JAX do; ``full`` adds ``(residuals, rank, s, rcond)``,
    ``cov`` the covariance of the coefficients."""
    check_arraylike("polyfit", x, y, *([] if w is None else [w]))
    x, y = promote_dtypes_inexact(x, y)
    deg = int(concrete_value("polyfit", deg))  # (int(), as JAX: a float degree is truncated)
    order = deg + 1
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if get_aval(x).ndim != 1:
        raise TypeError("expected 1D vector for x")
    if not get_aval(x).size:
        raise TypeError("expected non-empty vector for x")
    if not 1 <= get_aval(y).ndim <= 2:
        raise TypeError("expected 1D or 2D array for y")
    if get_aval(x).shape[0] != get_aval(y).shape[0]:
        raise TypeError("expected x and y to have same length")
    n = get_aval(x).shape[0]
    rcond = float(n * dtypes.finfo(get_aval(x).dtype).eps if rcond is None else rcond)
    lhs, rhs = vander(x, order), y
    if w is not None:
        (w,) = promote_dtypes_inexact(w)
        if get_aval(w).ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if get_aval(w).shape[0] != n:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if get_aval(rhs).ndim == 2 else w)
    scale = lax.sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale[None, :]
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = (c.T / scale).T
    if full:
        return c, resids, rank, s, to_array(rcond)  # (a Python float: weak, as in JAX)
    if not cov:
        return c
    vbase = inv(dot(lhs.T, lhs)) / outer(scale, scale)
    if cov == "unscaled":
        fac = lax.full((), 1, get_aval(x).dtype)
    else:
        if n <= order:
            raise ValueError("the number of data points must exceed order to scale the "
                             "covariance matrix")
        fac = resids / (n - order)
    if get_aval(y).ndim == 1:
        return c, vbase * atleast_1d(fac)[None]
    return c, vbase[:, :, None] * atleast_1d(fac)[None, None, :]

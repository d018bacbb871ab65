"""``qdwh``: the polar decomposition ``x = u h`` (``u`` with orthonormal columns, ``h``
Hermitian positive semi-definite) by the QR-based dynamically weighted Halley iteration
(Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl. 31(5), 2010).

Each step maps ``X`` to ``X (a I + b X^H X)(I + c X^H X)^{-1}``, which moves every singular
value ``s`` of ``X`` to ``s (a + b s^2) / (1 + c s^2)`` and leaves the singular vectors
alone; the polar factor ``u`` is what is left when all singular values are 1. Halley's
method is ``(a, b, c) = (3, 1, 3)``: cubic near 1, but slow from small singular values. The
dynamic weights map the interval ``[l, 1]`` known to hold the singular values as close to 1
as a rational function of that form can, given a lower bound ``l``; from ``l = eps`` (nothing
better is assumed, as in JAX) six steps reach double precision.

The weights depend on ``l`` alone, which follows its own recurrence, so they are computed in
Python before any array is touched, and so is the number of steps: the program is a fixed
sequence of steps, then a ``while_loop`` of Halley steps until ``X`` stops moving. A step is
computed in one of two equivalent ways:

- through a QR decomposition, ``[sqrt(c) X; I] = [Q1; Q2] R``:
  ``X <- (b/c) X + (a - b/c) / sqrt(c) Q1 Q2^H``, while ``c`` is large (forming
  ``I + c X^H X`` would lose the small singular values);
- through a Cholesky factorization, ``W W^H = I + c X^H X``:
  ``X <- (b/c) X + (a - b/c) X W^{-H} W^{-1}``, cheaper, once ``c`` is moderate.

``dynamic_shape = (m, n)`` (possibly traced) says that ``x`` pads an ``m x n`` matrix with
zeros; the steps keep the padding zero, so ``u`` and ``h`` come back padded the same way.
"""

import numpy as np

from ...core import dtypes
from ..elementwise import (abs as _abs, add, bitwise_and, bitwise_not, convert_element_type, eq, gt,
                           lt, mul, real, select, sub)
from ..loops import while_loop
from ..reductions import reduce_max
from ..shapes import reduce_sum
from ..slicing import dynamic_slice, dynamic_update_slice
from ..standard import as_array, scalar_like
from ..structural import broadcasted_iota, concatenate, full, full_like, pad
from ..transcendental import rsqrt, sqrt
from .decompositions import cholesky, qr, triangular_solve
from .util import (conj_if_complex, dtype_of, identity_matrix, mH, mm, rows_of, shape_of,
                   symmetrize, zeros_of)

__all__ = ["qdwh"]

QR_ABOVE = 100  # the weight c above which a step is computed through QR


def _weights(eps, max_iterations):
    """The weights ``(a, b, c)`` of the fixed steps: while the bound ``l`` on the smallest
    singular value (from ``eps``) is not within ``5 eps`` of 1, at most ``max_iterations``."""
    l, weights = eps, []
    while l + 5 * eps < 1 and len(weights) < max_iterations:
        l2 = l * l
        d = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        root = (1 + d) ** 0.5
        a = root + (2 - d + 2 * (2 - l2) / (l2 * root)) ** 0.5
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        weights.append((a, b, c))
        l = l * (a + b * l2) / (1 + c * l2)
    return weights


def _inside(x, rows, cols):
    """``x`` in its first ``rows`` rows and ``cols`` columns (bounds that may be traced; None
    for all), zero elsewhere."""
    if rows is None:
        return x
    shape = shape_of(x)
    keep = [lt(broadcasted_iota(np.int32, shape, axis), convert_element_type(bound, np.int32))
            for axis, bound in enumerate((rows, cols))]
    return select(bitwise_and(*keep), x, zeros_of(x))


def _scaled(x):
    """``x / alpha`` with ``alpha = sqrt(|x|_1 |x|_inf) >= |x|_2``, so that the singular values
    lie in ``(0, 1]``; a zero ``x`` as it is."""
    magnitudes = _abs(x)
    one_norm = reduce_max(reduce_sum(magnitudes, (0,)), (0,))
    inf_norm = reduce_max(reduce_sum(magnitudes, (1,)), (0,))
    inverse = mul(rsqrt(one_norm), rsqrt(inf_norm))
    inverse = select(eq(one_norm, scalar_like(one_norm, 0)), full_like(inverse, 1), inverse)
    return mul(x, convert_element_type(inverse, dtype_of(x)))


def _qr_step(u, weights, rows, cols):
    """One step through the QR decomposition of ``[sqrt(c) X; I]``; with a dynamic shape the
    identity goes right under the ``m`` rows of ``X`` and the blocks of ``Q`` are read from
    there."""
    a, b, c = weights
    big_m, big_n = shape_of(u)
    eye = identity_matrix(dtype_of(u), (big_n, big_n))
    top = mul(u, scalar_like(u, c ** 0.5))
    if rows is None:
        stacked = concatenate([top, eye], 0)
    else:
        room = pad(top, scalar_like(u, 0), [(0, big_n, 0), (0, 0, 0)])
        stacked = dynamic_update_slice(room, eye, (rows, 0))
    q, _ = qr(stacked, full_matrices=False)
    q1 = _inside(rows_of(q, 0, big_m), rows, cols)
    if rows is None:
        q2 = rows_of(q, big_m, big_m + big_n)
    else:
        q2 = _inside(dynamic_slice(q, (rows, 0), (big_n, big_n)), cols, cols)
    e = b / c
    return add(mul(u, scalar_like(u, e)), mul(mm(q1, mH(q2)), scalar_like(u, (a - e) / c ** 0.5)))


def _cholesky_step(u, weights):
    """One step through the Cholesky factor of ``I + c X^H X`` (identity where ``X`` is
    padding, whose zero columns stay zero)."""
    a, b, c = weights
    n = shape_of(u)[1]
    gram = add(mul(mm(mH(u), u), scalar_like(u, c)), identity_matrix(dtype_of(u), (n, n)))
    w = cholesky(gram, symmetrize_input=False)
    z = triangular_solve(w, u, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    z = triangular_solve(w, z, left_side=False, lower=True)  # X (W W^H)^{-1}
    e = b / c
    return add(mul(u, scalar_like(u, e)), mul(z, scalar_like(u, a - e)))


def _moved(u, u_next, tol):
    """Whether a step moved ``X`` by more than ``tol`` (Frobenius norm)."""
    diff = sub(u_next, u)
    squares = mul(conj_if_complex(diff), diff)
    if dtypes.is_complex(dtype_of(diff)):
        squares = real(squares)
    distance = sqrt(reduce_sum(squares, (0, 1)))
    return gt(distance, scalar_like(distance, tol))


def _halley_loop(u, steps_made, moving, max_iterations, tol):
    """Halley steps while ``X`` still moves, up to ``max_iterations`` steps in all:
    ``(steps made, X, whether it still moved)``."""
    def cond(state):
        k, _, still = state
        return bitwise_and(still, lt(k, scalar_like(k, max_iterations)))

    def body(state):
        k, u, _ = state
        u_next = _cholesky_step(u, (3.0, 1.0, 3.0))
        return add(k, scalar_like(k, 1)), u_next, _moved(u, u_next, tol)
    return while_loop(cond, body, (steps_made, u, moving))


def qdwh(x, *, is_hermitian=False, max_iterations=None, eps=None, dynamic_shape=None):
    """The polar decomposition of an ``M x N`` matrix ``x`` (``M >= N``, full rank):
    ``(u, h, num_iters, is_converged)`` with ``x = u @ h``, ``u`` with orthonormal columns,
    ``h`` Hermitian positive semi-definite; ``num_iters`` steps were made, and
    ``is_converged`` says whether ``u`` stopped moving (by ``(5 eps)^(1/3)``) within
    ``max_iterations`` (default 10). ``is_hermitian`` is accepted and unused, as in JAX.
    ``dynamic_shape = (m, n)``: ``x`` is an ``m x n`` matrix padded to ``M x N``."""
    del is_hermitian
    x = as_array(x)
    default_eps = float(np.finfo(dtype_of(x)).eps)  # (a ValueError for integers, as JAX's)
    eps = default_eps if eps is None else eps
    max_iterations = 10 if max_iterations is None else int(max_iterations)
    if len(shape_of(x)) != 2:
        raise ValueError(f"qdwh expects a matrix, got shape {shape_of(x)}")
    if shape_of(x)[0] < shape_of(x)[1]:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    rows, cols = (None, None) if dynamic_shape is None else dynamic_shape
    x = _inside(x, rows, cols)
    u = _scaled(x)
    weights = _weights(eps, max_iterations)
    tol = (5 * eps) ** (1 / 3)
    moving = full((), True, np.bool_)
    for step in weights:
        if step[2] > QR_ABOVE:
            u = _qr_step(u, step, rows, cols)
        else:  # (c only decreases: the QR steps come first, and only these are tested)
            u_next = _cholesky_step(u, step)
            u, moving = u_next, _moved(u, u_next, tol)
    num_iters, u, moving = _halley_loop(u, len(weights), moving, max_iterations, tol)
    # One Newton-Schulz step, u <- u (3 I - u^H u) / 2, polishes the orthogonality.
    u = sub(mul(u, scalar_like(u, 1.5)), mul(mm(u, mm(mH(u), u)), scalar_like(u, 0.5)))
    h = symmetrize(mm(mH(u), x))
    return u, h, num_iters, bitwise_not(moving)

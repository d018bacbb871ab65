"""Matrix products called from native code: BLAS's ``gemm``, by address (``routines``
finds it in the OpenBLAS NumPy ships, or else SciPy's BLAS).

``gemm`` emits the calls for a ``dot_general`` that is a batch of matrix products: float32
or float64, the result in that dtype, the batch axes leading on both operands, and each
operand's other axes two contiguous groups, its free axes and its contracting axes (in
either order): the operand is then a row-major matrix of (free size x contracted size), or
its transpose, at a fixed stride per batch element. That covers ``x @ w`` of any rank
against a matrix, ``einsum("bqd,bkd->bqk")`` and the transposes that autodiff makes of
them. BLAS is column-major, and a row-major matrix is its transpose there, so ``C = A B``
is computed as ``C^T = B^T A^T``, each operand transposed (``"T"``) or not according to
which of its groups comes last; a loop over the batch makes one call per element.
"""

import functools

import numpy as np
from llvmlite import ir

from ..llvm import I64, for_loop
from . import routines, tiled_products
from .routines import REAL, by_reference


def supports(eqn):
    """Whether ``eqn`` is a ``dot_general`` (the primitive of the ``"matrix product"``
    library lowering) that ``gemm`` emits (see the module docstring)."""
    return eqn.primitive.lowerings.get("library") == "matrix product" \
        and _products(eqn) is not None


def how(eqn):
    """How native code computes ``eqn`` (``supports(eqn)``), for the fusion report."""
    _, (m, k, a_last), (n, _, b_last) = _products(eqn)
    if tiled_products.fits(m, k, n, a_last, not b_last, eqn.outvars[0].aval.dtype):
        return (f"is a register-tiled loop in native code ({m} rows, {k} contracted: "
                "where BLAS does no better)")
    return "is a BLAS call"


def _products(eqn):
    """(batch, (m, k, lhs contracted last), (n, k, rhs contracted last)) for a
    ``dot_general`` that is a batch of ``m x k`` by ``k x n`` products, else None (the
    contracted axes are in increasing order on both sides, so they pair up in order)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval for a in eqn.invars)
    if not (lhs.dtype == rhs.dtype == eqn.outvars[0].aval.dtype and lhs.dtype in REAL):
        return None
    nb = len(lb)
    if tuple(lb) != tuple(range(nb)) or tuple(rb) != tuple(range(nb)):
        return None
    a, b = _matrix(lhs.shape, nb, lc), _matrix(rhs.shape, nb, rc)
    if a is None or b is None:
        return None
    return int(np.prod(lhs.shape[:nb], dtype=np.int64)), a, b


def _matrix(shape, nb, contracting):
    """(free size, contracted size, whether the contracted group is last) of an operand
    whose axes after the ``nb`` batch axes are a free group and a contracted group (the
    contracted ones in increasing order), else None."""
    rest = list(range(nb, len(shape)))
    c = sorted(contracting)
    if list(contracting) != c or (c and c != list(range(c[0], c[-1] + 1))):
        return None
    free = [d for d in rest if d not in c]
    if free and free != list(range(free[0], free[-1] + 1)):
        return None
    last = not c or not free or c[0] > free[0]
    return _size(shape, free), _size(shape, c), last


def _size(shape, axes):
    return int(np.prod([shape[d] for d in axes], dtype=np.int64))


def gemm(b, setup, eqn, lhs, rhs, out):
    """Emit, with the builder ``b``, the BLAS calls computing ``eqn`` (``supports(eqn)``)
    from the buffers ``lhs`` and ``rhs`` (``i8*``) into ``out``; ``setup`` builds in the
    function's entry block."""
    batch, (m, k, a_last), (n, _, b_last) = _products(eqn)
    if batch == 0 or m == 0 or n == 0:
        return
    b_first = not b_last
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    if tiled_products.fits(m, k, n, a_last, b_first, dtype):
        tiled_products.emit(b, setup, lhs, rhs, out, (batch, m, k, n, a_last, b_first, dtype))
        return
    real, size = REAL[dtype], dtype.itemsize
    # Column-major: C^T (n x m) = op(B) (n x k) times op(A) (k x m). A row-major operand
    # is, column-major, its transpose with its row length as leading dimension; it is
    # transposed again ("T") when its contracted group is the other one.
    ref, integer = functools.partial(by_reference, b, setup), \
        functools.partial(routines.integer, b, setup)
    fixed = [routines.character(b, setup, "N" if b_first else "T"),
             routines.character(b, setup, "N" if a_last else "T"),
             *(integer(v) for v in (n, m, k)), ref(ir.Constant(real, 1.0))]
    ld_b, ld_a = integer(max(n if b_first else k, 1)), integer(max(k if a_last else m, 1))
    zero, ld_c = ref(ir.Constant(real, 0.0)), integer(n)

    def one(i):
        def at(buf, elements):  # batch element i of a buffer of such matrices
            offset = b.mul(i, ir.Constant(I64, elements * size))
            return b.bitcast(b.gep(buf, [offset]), real.as_pointer())
        routines.call(b, "gemm", dtype, fixed + [at(rhs, k * n), ld_b, at(lhs, m * k), ld_a,
                                                 zero, at(out, m * n), ld_c])
    if batch == 1:
        one(ir.Constant(I64, 0))
    else:
        for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, batch), one, "batch")

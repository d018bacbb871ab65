"""What the linear-algebra primitives share: matrix helpers on (batched) lax values, the
checks of their shape rules, and their batching (leading axes are batch axes already).

The rules compute with the helpers; each is one or two lax operations on the last two axes
(``mT``/``mH`` are the transpose and the conjugate transpose, as NumPy names them).
"""

import numpy as np

from ...core import Primitive, dtypes, get_aval
from ..dot import Precision, dot_general
from ..elementwise import (add, bitwise_and, conj, convert_element_type, div, eq, ge, mul, select,
                           sub)
from ..shapes import broadcast_in_dim, moveaxis, reduce_sum, transpose
from ..standard import INEXACT, check_dtype, library_lowering, scalar_like
from ..structural import broadcasted_iota, full, slice as _slice


# --- matrix helpers on (batched) lax values --------------------------------------------------
# The rules below compute with these; each is one or two lax operations on the last two axes.

def ndim_of(x):
    return get_aval(x).ndim


def shape_of(x):
    return get_aval(x).shape


def dtype_of(x):
    return get_aval(x).dtype


def mT(x):
    """Swap the last two axes."""
    n = ndim_of(x)
    return transpose(x, (*range(n - 2), n - 1, n - 2))


def conj_if_complex(x):
    """The conjugate of a complex value; a real value as it is (``lax.conj`` makes it complex)."""
    return conj(x) if dtypes.is_complex(dtype_of(x)) else x


def mH(x):
    """The conjugate transpose (adjoint) of a stack of matrices."""
    return conj_if_complex(mT(x))


def mm(a, b):
    """Matrix product of two stacks of matrices with the same leading (batch) axes."""
    batch = tuple(range(ndim_of(a) - 2))
    return dot_general(a, b, (((ndim_of(a) - 1,), (ndim_of(b) - 2,)), (batch, batch)),
                       precision=Precision.HIGHEST)


def zeros_of(x):
    return full(shape_of(x), 0, dtype_of(x))


def _matrix_mask(shape, test):
    """A bool array of ``shape`` that is ``test(row, col)`` on its last two axes."""
    n = len(shape)
    rows = broadcasted_iota(np.int32, shape[-2:], 0)
    cols = broadcasted_iota(np.int32, shape[-2:], 1)
    return broadcast_in_dim(test(rows, cols), shape, (n - 2, n - 1))


def tril(x, k=0):
    """Zero above the ``k``-th diagonal."""
    mask = _matrix_mask(shape_of(x), lambda r, c: ge(add(r, full((), k, np.int32)), c))
    return select(mask, x, zeros_of(x))


def triu(x, k=0):
    """Zero below the ``k``-th diagonal."""
    mask = _matrix_mask(shape_of(x), lambda r, c: ge(add(r, full((), k - 1, np.int32)), c))
    return select(mask, zeros_of(x), x)


def identity_matrix(dtype, shape, start=0):
    """Identity matrices of ``shape`` (batch axes first); with ``start``, the ones before
    diagonal position ``start`` are left out."""
    def test(r, c):
        diagonal = eq(r, c)
        return diagonal if start == 0 else bitwise_and(diagonal,
                                                       ge(c, full((), start, np.int32)))
    return convert_element_type(_matrix_mask(shape, test), dtype)


def diagonal_of(x):
    """The main diagonal of stacks of square matrices, as ``[..., n]`` (linear in ``x``)."""
    return reduce_sum(mul(x, identity_matrix(dtype_of(x), shape_of(x))), (ndim_of(x) - 1,))


def rows_of(x, start, stop):
    """``x[..., start:stop, :]``."""
    n = ndim_of(x)
    return _slice(x, (0,) * (n - 2) + (start, 0), shape_of(x)[:-2] + (stop, shape_of(x)[-1]))


def cols_of(x, start, stop):
    """``x[..., :, start:stop]``."""
    n = ndim_of(x)
    return _slice(x, (0,) * (n - 1) + (start,), shape_of(x)[:-1] + (stop,))


def each_row(s, nrows, dtype=None):
    """``s[..., None, :]`` repeated ``nrows`` times: ``m * each_row(s, rows) = m diag(s)``."""
    n = ndim_of(s)
    s = s if dtype is None else convert_element_type(s, dtype)
    return broadcast_in_dim(s, shape_of(s)[:-1] + (nrows, shape_of(s)[-1]), (*range(n - 1), n))


def each_col(s, ncols, dtype=None):
    """``s[..., :, None]`` repeated ``ncols`` times: ``each_col(s, cols) * m = diag(s) m``."""
    n = ndim_of(s)
    s = s if dtype is None else convert_element_type(s, dtype)
    return broadcast_in_dim(s, shape_of(s) + (ncols,), tuple(range(n)))


def outer_diff(w):
    """``d[..., i, j] = w[j] - w[i]`` for a stack of vectors ``w``."""
    n = shape_of(w)[-1]
    return sub(each_row(w, n), each_col(w, n))


def permutation_matrix(permutation, dtype):
    """``P`` with ``P @ a == a[..., permutation, :]``: ``P[..., i, j] = permutation[i] == j``."""
    m = shape_of(permutation)[-1]
    shape = shape_of(permutation) + (m,)
    rows = broadcast_in_dim(permutation, shape, tuple(range(len(shape) - 1)))
    return convert_element_type(eq(rows, broadcasted_iota(np.int32, shape, len(shape) - 1)),
                                dtype)


def symmetrize(x):
    """``(x + x^H) / 2``: the Hermitian part, which the decompositions of Hermitian matrices
    read (so their derivatives see only symmetric perturbations)."""
    return div(add(x, mH(x)), scalar_like(x, 2))


# --- checks shared by the shape rules ---------------------------------------------------------

def check_matrix(name, aval, position=None, square=False, kind=INEXACT):
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


def check_batch_ranks(name, avals, core_ranks):
    """Operands with as many batch axes each (their ranks less ``core_ranks``) and the same
    batch shape: TypeError for the count, ValueError for the sizes."""
    counts = [a.ndim - r for a, r in zip(avals, core_ranks)]
    if len(set(counts)) != 1:
        raise TypeError(f"All inputs to {name} must have the same number of batch dimensions, "
                        f"but got {counts} batch dimensions for the inputs.")
    if len({a.shape[:n] for a, n in zip(avals, counts)}) != 1:
        raise ValueError(f"The batch dimensions of the inputs to {name} must be equal, got "
                         f"shapes {', '.join(str(a.shape) for a in avals)}")


def real_dtype(dtype):
    return np.finfo(dtype).dtype


def complex_dtype(dtype):
    return np.result_type(dtype, np.complex64)


# --- batching: leading axes are batch axes already --------------------------------------------

def _batch_leading(prim):
    """Batch rule of a one-operand primitive that maps over leading axes: a batch axis in front
    of the matrix axes stays (every output has it at the same place); one among the matrix axes
    moves to the front."""
    def rule(axis_data, vals, dims, **params):
        (x,), (d,) = vals, dims
        if d >= ndim_of(x) - prim.core_rank:
            x, d = moveaxis(x, d, 0), 0
        out = prim.bind(x, **params)
        return (out, [d] * len(out)) if prim.multiple_results else (out, d)
    return rule


def scipy_linalg():
    """``scipy.linalg``, for the LAPACK routines NumPy lacks (Schur, Hessenberg and
    tridiagonal forms, Householder products, QR with column pivoting), imported when one is
    first called: it adds about a third to the time of ``import nbjax``."""
    import scipy.linalg
    return scipy.linalg


def linalg_primitive(name, core_rank=2, multiple_results=False):
    prim = Primitive(name, multiple_results)
    prim.core_rank = core_rank
    prim.def_batch(_batch_leading(prim))
    return prim


def linear_algebra_lowering(prim, operation):
    """Mark ``prim`` as a call into a linear-algebra library on materialised buffers (LAPACK
    and BLAS on the CPU) computing ``operation`` ("cholesky", "triangular solve", "lu"), as
    its reference implementation does, LAPACK's conventions included: a target that makes
    such a call from native code says which operations it can make."""
    library_lowering(prim, "linear algebra")
    prim.def_lowering("linear algebra", operation)


def pivot_magnitude(x):
    """What partial pivoting maximises (in NumPy): ``|x|``, or ``|re| + |im|`` for complex
    ``x`` (LAPACK's ``cabs1``)."""
    return np.abs(x.real) + np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)


def nan_array(shape, dtype):
    """What a failed LAPACK call gives in JAX: NaN, and NaN in both parts of a complex
    number."""
    return np.full(shape, complex(np.nan, np.nan) if np.dtype(dtype).kind == "c" else np.nan,
                   dtype)


def nan_where_lapack_fails(fn, x, failed=None):
    """``fn(x)`` (NumPy's LAPACK call, a tuple of arrays) on a stack of matrices; where it
    raises (a matrix not positive definite, not converging, holding NaN or inf), each
    matrix of the stack is computed alone, and those that fail give ``failed(matrix)``
    (default: NaN in every output), as JAX returns them from inside a compiled program."""
    try:
        return tuple(fn(x))
    except np.linalg.LinAlgError:
        pass
    # (the outputs' shapes and dtypes, from a matrix LAPACK cannot fail on)
    specimen = [np.asarray(o) for o in fn(np.eye(*x.shape[-2:], dtype=x.dtype))]

    def one(m):
        try:
            return tuple(fn(m))
        except np.linalg.LinAlgError:
            if failed is not None:
                return failed(m)
            return tuple(nan_array(o.shape, o.dtype) for o in specimen)
    return tuple(per_matrix(one, [x], x.shape[:-2], *[(o.shape, o.dtype) for o in specimen]))


def per_matrix(fn, operands, batch, *out_shapes):
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

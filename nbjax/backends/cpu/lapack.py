"""Decompositions and triangular solves called from native code: LAPACK's ``potrf``
(``cholesky``), ``getrf`` (``lu``), ``geqrf`` and ``orgqr`` (``qr``), ``syevd``
(``eigh``), ``gesdd`` (``svd``) and BLAS's ``trsm`` (``triangular_solve``), by address
(``routines`` finds them in the OpenBLAS NumPy ships, or else SciPy's), on float32 and
float64; complex values and eig call back into Python.

A primitive asks for one of these by its ``"linear algebra"`` lowering, which names the
operation its reference implementation computes ("cholesky", "triangular solve", "lu",
"qr", "eigh"), LAPACK's conventions included; ``EMITTERS`` says how each is emitted. Each
works on the last two axes, and a loop makes one call per matrix of the stack. The
routines' scratch (pivots, ``tau``, workspaces: sized at compile time, with room for
LAPACK's blocked algorithms, ``BLOCK``) comes from the function's scratch block.

LAPACK is column-major, where a row-major matrix reads as its transpose:

- ``trsm`` solves in place, on a copy of the right-hand side in the result: ``op(A) X = B``
  is ``X^T op(A)^T = B^T``, so the side flips, and so does the triangle (the lower one of
  ``A`` is the upper one of ``A^T``), while ``A^T`` transposed (``"T"``) is ``op(A)^T``
  exactly when ``transpose_a`` asks for it.
- the factorisations work on a column-major copy of the matrix (written transposed into
  the scratch block: ``_ColumnMajor``), which the results are read back from: factoring
  the transpose would be another factorisation (``getrf`` would pivot columns), or the
  same one rounded differently from NumPy's, which factors such a copy. So float64
  Cholesky, QR and eigh factors equal the reference's bit for bit; ``eigh`` computes in
  float64 for float32 too, as NumPy does, so that its eigenvectors, defined up to their
  signs, have the reference's signs.

What comes back follows the reference implementation: ``cholesky`` is zero above the
diagonal and NaN on and below it where ``potrf`` reports a matrix that is not positive
definite (``info > 0``: its partial factor is never read), as JAX's; ``lu`` returns its
pivots 0-based, as ``int32``, with the permutation they make (the swaps applied in order
to ``0..m-1``); a singular matrix (``info > 0``) is a valid factorisation with a zero on
U's diagonal, as in the reference. An ``eigh`` that does not converge is NaN, as in JAX,
where NumPy raises ``LinAlgError``. An empty matrix or stack calls nothing (LAPACK is not
called on them); an ``lu`` of ``m x 0`` still writes its identity permutation and a
complete ``qr`` of ``m x 0`` its identity ``q``.
"""

import functools
import math

import numpy as np
from llvmlite import ir

from ..llvm import I32, I64, constant, for_loop
from . import routines
from .rows import loop


def supports(eqn):
    """Whether ``emit`` compiles ``eqn``: an operation of ``EMITTERS`` (its primitive's
    ``"linear algebra"`` lowering) on float32 or float64 matrices (a QR without column
    pivoting: geqp3 is not among the routines)."""
    return eqn.primitive.lowerings.get("linear algebra") in EMITTERS and \
        np.dtype(eqn.invars[0].aval.dtype) in routines.REAL and \
        not eqn.params.get("pivoting", False)


def emit(f, eqn, *buffers):
    """Emit ``eqn`` (``supports(eqn)``) into ``f`` (a ``control_flow.ControlFlowFunction``)
    on the buffers of its operands, then of its results."""
    EMITTERS[eqn.primitive.lowerings["linear algebra"]](f, eqn, *buffers)


class _Stack:
    """A stack of ``rows x cols`` matrices of ``dtype`` in the buffer ``pointer``, for the
    builder of ``f``."""

    def __init__(self, f, pointer, shape, dtype):
        self.f, self.dtype = f, np.dtype(dtype)
        self.rows, self.cols = shape[-2:]
        self.base = f.typed(pointer, dtype)

    def start(self, i):
        """The element offset of matrix ``i`` (an i64)."""
        return self.f.b.mul(i, ir.Constant(I64, self.rows * self.cols))

    def matrix(self, i):
        """A pointer to matrix ``i``, for a LAPACK routine."""
        return self.f.b.gep(self.base, [self.start(i)])

    def at(self, i, r, c, column_major=False):
        """The offset of element ``(r, c)`` of matrix ``i``."""
        b = self.f.b
        if column_major:
            within = b.add(b.mul(c, ir.Constant(I64, self.rows)), r)
        else:
            within = b.add(b.mul(r, ir.Constant(I64, self.cols)), c)
        return b.add(self.start(i), within)

    def load(self, i, r, c, column_major=False):
        return self.f.e.load(self.base, self.at(i, r, c, column_major), self.dtype)

    def store(self, i, r, c, value, column_major=False):
        self.f.e.store(self.base, self.at(i, r, c, column_major), value, self.dtype)


def _each_matrix(f, shape, body):
    """``body(i)`` for each matrix ``i`` of a stack of ``shape`` (batch axes, then two)."""
    loop(f, math.prod(shape[:-2]), body, "matrix")


def _identities(f, stack, shape):
    """Fill each matrix of ``stack`` (one per matrix of a stack of ``shape``) with the
    identity's first rows and columns."""
    one, zero, b = constant(1, stack.dtype), constant(0, stack.dtype), f.b
    def identity(i):
        _each_element(f, stack.rows, stack.cols, lambda r, c: stack.store(
            i, r, c, b.select(b.icmp_signed("==", r, c), one, zero)))
    _each_matrix(f, shape, identity)


def _each_element(f, rows, cols, body):
    """``body(r, c)`` for each element of a ``rows x cols`` matrix, row by row."""
    loop(f, rows, lambda r: loop(f, cols, lambda c: body(r, c), "col"), "row")


class _ColumnMajor:
    """A column-major working copy of one ``rows x cols`` matrix of ``dtype`` in the scratch
    block, which LAPACK routines factor in place (``pointer``): ``fill`` writes a matrix of
    a _Stack into its first columns, ``load`` reads an element back; ``release`` gives the
    scratch back."""

    def __init__(self, f, rows, cols, dtype):
        self.f, self.dtype = f, np.dtype(dtype)
        self.region = f.scratch(rows * cols * self.dtype.itemsize)
        self.stack = _Stack(f, self.region, (rows, cols), dtype)
        self.pointer = self.stack.matrix(ir.Constant(I64, 0))

    def fill(self, source, i):
        """Copy matrix ``i`` of the _Stack ``source`` in (converted to this copy's dtype)."""
        zero = ir.Constant(I64, 0)
        _each_element(self.f, source.rows, source.cols, lambda r, c: self.stack.store(
            zero, r, c, _converted(self.f, source.load(i, r, c), source.dtype, self.dtype),
            column_major=True))

    def load(self, r, c, dtype):
        """Element ``(r, c)`` as a ``dtype``."""
        value = self.stack.load(ir.Constant(I64, 0), r, c, column_major=True)
        return _converted(self.f, value, self.dtype, dtype)

    def release(self):
        self.f.release(self.region)


def _converted(f, value, src, dst):
    return value if np.dtype(src) == np.dtype(dst) else f.e.convert(value, src, dst)


def _failed(f, info):
    """Whether the routine that wrote the ``info`` slot reported a failure."""
    int_type = routines.library()
    return f.b.icmp_signed("!=", f.b.load(info, typ=int_type), ir.Constant(int_type, 0))


def _info(f):
    """A slot for a routine's ``info`` result (made in the function's first block)."""
    return f.setup.alloca(routines.library())


def _cholesky(f, eqn, x, out):
    aval = eqn.invars[0].aval
    if aval.size == 0:
        return
    n, dtype, b, setup = aval.shape[-1], np.dtype(aval.dtype), f.b, f.setup
    source, result = _Stack(f, x, aval.shape, dtype), _Stack(f, out, aval.shape, dtype)
    work, info = _ColumnMajor(f, n, n, dtype), _info(f)
    args = [routines.character(b, setup, "L"), routines.integer(b, setup, n), work.pointer,
            routines.integer(b, setup, n), info]

    def one(i):
        work.fill(source, i)
        routines.call(b, "potrf", dtype, args)
        failed = _failed(f, info)

        def element(r, c):  # L below and on the diagonal (NaN there if it failed), 0 above
            lower = b.select(failed, constant(np.nan, dtype), work.load(r, c, dtype))
            result.store(i, r, c, b.select(b.icmp_signed("<=", c, r), lower,
                                           constant(0, dtype)))
        _each_element(f, n, n, element)
    _each_matrix(f, aval.shape, one)
    work.release()


def _triangular_solve(f, eqn, a, rhs, out):
    a_aval, b_aval = (v.aval for v in eqn.invars)
    if b_aval.size == 0:
        return
    p, dtype, b, setup = eqn.params, np.dtype(b_aval.dtype), f.b, f.setup
    m, n, k = b_aval.shape[-2], b_aval.shape[-1], a_aval.shape[-1]
    f.copy(out, rhs, b_aval.nbytes)  # (trsm solves in place)
    matrix, solution = _Stack(f, a, a_aval.shape, dtype), _Stack(f, out, b_aval.shape, dtype)
    letters = ("R" if p["left_side"] else "L", "U" if p["lower"] else "L",
               "T" if p["transpose_a"] else "N", "U" if p["unit_diagonal"] else "N")
    # Column-major, the right-hand side is B^T, n x m.
    head = [*(routines.character(b, setup, x) for x in letters), routines.integer(b, setup, n),
            routines.integer(b, setup, m),
            routines.by_reference(b, setup, constant(1, dtype))]
    lda, ldb = routines.integer(b, setup, k), routines.integer(b, setup, n)
    _each_matrix(f, b_aval.shape, lambda i: routines.call(
        b, "trsm", dtype, head + [matrix.matrix(i), lda, solution.matrix(i), ldb]))


def _lu(f, eqn, x, lu_out, pivots_out, perm_out):
    aval = eqn.invars[0].aval
    *batch, m, n = aval.shape
    if math.prod(batch) == 0:
        return
    k, dtype, b, setup = min(m, n), np.dtype(aval.dtype), f.b, f.setup
    int_type, zero = routines.library(), ir.Constant(I64, 0)
    source, result = _Stack(f, x, aval.shape, dtype), _Stack(f, lu_out, aval.shape, dtype)
    pivots = _Stack(f, pivots_out, (1, k), np.int32)  # (one row per matrix)
    perm = _Stack(f, perm_out, (1, m), np.int32)
    if k:
        work, ipiv = _ColumnMajor(f, m, n, dtype), f.scratch(k * int_type.width // 8)
        args = [routines.integer(b, setup, m), routines.integer(b, setup, n), work.pointer,
                routines.integer(b, setup, m), ipiv, _info(f)]
        ipiv_typed = b.bitcast(ipiv, int_type.as_pointer())

    def swap(i, j):  # pivots[j] 0-based; the permutation's rows j and pivots[j] swapped
        row = b.sub(b.load(b.gep(ipiv_typed, [j], source_etype=int_type), typ=int_type),
                    ir.Constant(int_type, 1))
        row = b.sext(row, I64) if int_type.width < 64 else row
        pivots.store(i, zero, j, b.trunc(row, I32))
        here, there = perm.load(i, zero, j), perm.load(i, zero, row)
        perm.store(i, zero, j, there)
        perm.store(i, zero, row, here)

    def one(i):
        loop(f, m, lambda r: perm.store(i, zero, r, b.trunc(r, I32)), "identity")
        if not k:
            return
        work.fill(source, i)
        routines.call(b, "getrf", dtype, args)  # (info > 0: singular, factored all the same)
        _each_element(f, m, n, lambda r, c: result.store(i, r, c, work.load(r, c, dtype)))
        for_loop(b, zero, ir.Constant(I64, k), lambda j: swap(i, j), "pivots")
    _each_matrix(f, aval.shape, one)
    if k:
        work.release()
        f.release(ipiv)


# Room for LAPACK's blocked algorithms: a workspace of this many elements per column (its
# ``ilaenv`` asks for blocks of 32 columns; OpenBLAS's for as many or fewer).
BLOCK = 64


def _qr(f, eqn, x, q_out, r_out):
    aval = eqn.invars[0].aval
    *batch, m, n = aval.shape
    if math.prod(batch) == 0 or m == 0:
        return
    k, dtype, b, setup = min(m, n), np.dtype(aval.dtype), f.b, f.setup
    q_cols = m if eqn.params["full_matrices"] else k
    source, q, upper = (_Stack(f, x, aval.shape, dtype), _Stack(f, q_out, (m, q_cols), dtype),
                        _Stack(f, r_out, (q_cols, n), dtype))
    if k == 0:  # no reflector: q is the identity (m x m, or m x 0), r empty
        _identities(f, q, aval.shape)
        return
    # geqrf factors the first n columns of m x max(n, q_cols); orgqr makes its first q_cols
    # columns q (those past the k reflectors start as the identity's), once r is read.
    work = _ColumnMajor(f, m, max(n, q_cols), dtype)
    lwork = max(n, q_cols) * BLOCK
    tau, space = f.scratch(k * dtype.itemsize), f.scratch(lwork * dtype.itemsize)
    integer = functools.partial(routines.integer, b, setup)
    tail = [tau, space, integer(lwork), _info(f)]
    geqrf = [integer(m), integer(n), work.pointer, integer(m)] + tail
    orgqr = [integer(m), integer(q_cols), integer(k), work.pointer, integer(m)] + tail

    def one(i):
        work.fill(source, i)
        routines.call(b, "geqrf", dtype, geqrf)
        _each_element(f, q_cols, n, lambda r, c: upper.store(i, r, c, b.select(
            b.icmp_signed(">=", c, r), work.load(r, c, dtype), constant(0, dtype))))
        routines.call(b, "orgqr", dtype, orgqr)
        _each_element(f, m, q_cols, lambda r, c: q.store(i, r, c, work.load(r, c, dtype)))
    _each_matrix(f, aval.shape, one)
    work.release()
    f.release(tau)
    f.release(space)


def _eigh(f, eqn, x, v_out, w_out):
    """``syevd`` in float64 whatever the dtype: the reference (NumPy) computes float32
    matrices so, and eigenvectors, defined up to their sign, then come out with its signs."""
    aval = eqn.invars[0].aval
    if aval.size == 0:
        return
    n, dtype, b, setup = aval.shape[-1], np.dtype(aval.dtype), f.b, f.setup
    exact, int_type = np.dtype(np.float64), routines.library()
    source, v = _Stack(f, x, aval.shape, dtype), _Stack(f, v_out, aval.shape, dtype)
    w = _Stack(f, w_out, (1, n), dtype)  # (one row per matrix)
    work = _ColumnMajor(f, n, n, exact)
    lwork, liwork = max(1 + 6 * n + 2 * n * n, (2 + BLOCK) * n), 3 + 5 * n
    regions = [f.scratch(n * exact.itemsize), f.scratch(lwork * exact.itemsize),
               f.scratch(liwork * int_type.width // 8)]
    values, (space, ints) = _Stack(f, regions[0], (1, n), exact), regions[1:]
    integer, info = functools.partial(routines.integer, b, setup), _info(f)
    args = [routines.character(b, setup, "V"),
            routines.character(b, setup, "L" if eqn.params["lower"] else "U"), integer(n),
            work.pointer, integer(n), values.matrix(ir.Constant(I64, 0)), space, integer(lwork),
            ints, integer(liwork), info]
    zero, nan = ir.Constant(I64, 0), constant(np.nan, dtype)

    def one(i):
        work.fill(source, i)
        routines.call(b, "syevd", exact, args)
        failed = _failed(f, info)  # (did not converge: NaN, where NumPy raises)
        _each_element(f, n, n, lambda r, c: v.store(
            i, r, c, b.select(failed, nan, work.load(r, c, dtype))))
        loop(f, n, lambda c: w.store(i, zero, c, b.select(
            failed, nan, _converted(f, values.load(zero, zero, c), exact, dtype))), "values")
    _each_matrix(f, aval.shape, one)
    work.release()
    for region in regions:
        f.release(region)


def _svd(f, eqn, x, s_out, u_out=None, vh_out=None):
    """``gesdd`` on a column-major copy of each matrix, as NumPy calls it (the reference):
    in float64 whatever the dtype, ``jobz`` "A", "S" or "N", the workspace its query asks
    for (``routines.workspace``), so that the factors (and the signs of the singular
    vectors) come out as the reference's; ``u`` and ``vh`` read back from column-major.
    A matrix ``gesdd`` fails on is NaN, as in JAX (the reference raises NumPy's
    ``LinAlgError``)."""
    aval = eqn.invars[0].aval
    *batch, m, n = aval.shape
    k = min(m, n)
    if math.prod(batch) == 0:
        return
    if k == 0:  # LAPACK is not called on empty matrices: identities complete u and vh
        _svd_of_empty(f, eqn, aval, u_out, vh_out)
        return
    dtype, exact, b, setup = np.dtype(aval.dtype), np.dtype(np.float64), f.b, f.setup
    full, vectors = eqn.params["full_matrices"], eqn.params["compute_uv"]
    jobz = "N" if not vectors else "A" if full else "S"
    u_cols, vt_rows = (m, n) if full else (k, k)
    source, work = _Stack(f, x, aval.shape, dtype), _ColumnMajor(f, m, n, exact)
    values = _Stack(f, s_out, (1, k), dtype)  # (one row per matrix)
    u_copy = _ColumnMajor(f, m, u_cols, exact) if vectors else None
    vt_copy = _ColumnMajor(f, vt_rows, n, exact) if vectors else None
    lwork = routines.workspace("gesdd", exact, [jobz, m, n, None, m, None, None, m, None,
                                                vt_rows, "work", "query", None, 0])
    int_type = routines.library()
    regions = [f.scratch(k * exact.itemsize), f.scratch(lwork * exact.itemsize),
               f.scratch(8 * k * int_type.width // 8)]
    sigma, (space, ints) = _Stack(f, regions[0], (1, k), exact), regions[1:]
    integer, info = functools.partial(routines.integer, b, setup), _info(f)
    unused = work.pointer  # (u and vt are not read with jobz "N": any valid pointer)
    args = [routines.character(b, setup, jobz), integer(m), integer(n), work.pointer,
            integer(m), sigma.matrix(ir.Constant(I64, 0)),
            u_copy.pointer if vectors else unused, integer(m),
            vt_copy.pointer if vectors else unused, integer(vt_rows), space, integer(lwork),
            ints, info]
    zero, nan = ir.Constant(I64, 0), constant(np.nan, dtype)

    def one(i):
        work.fill(source, i)
        routines.call(b, "gesdd", exact, args)
        failed = _failed(f, info)
        loop(f, k, lambda c: values.store(i, zero, c, b.select(
            failed, nan, _converted(f, sigma.load(zero, zero, c), exact, dtype))), "values")
        if vectors:
            for copy, out, rows, cols in ((u_copy, u_out, m, u_cols),
                                          (vt_copy, vh_out, vt_rows, n)):
                stack = _Stack(f, out, (rows, cols), dtype)
                _each_element(f, rows, cols, lambda r, c, copy=copy, stack=stack: stack.store(
                    i, r, c, b.select(failed, nan, copy.load(r, c, dtype))))
    _each_matrix(f, aval.shape, one)
    for copy in (work, u_copy, vt_copy):
        if copy is not None:
            copy.release()
    for region in regions:
        f.release(region)


def _svd_of_empty(f, eqn, aval, u_out, vh_out):
    """The reference's results for ``m x 0`` or ``0 x n`` matrices: no singular value, and
    (with ``compute_uv``) identities for the square factors of full matrices."""
    if not eqn.params["compute_uv"]:
        return
    *_, m, n = aval.shape
    full, dtype = eqn.params["full_matrices"], np.dtype(aval.dtype)
    for out, rows, cols in ((u_out, m, m if full else 0), (vh_out, n if full else 0, n)):
        if rows and cols:
            _identities(f, _Stack(f, out, (rows, cols), dtype), aval.shape)


# How each operation a primitive's ``"linear algebra"`` lowering names is emitted: a
# function of (ControlFlowFunction, equation, operand buffers..., result buffers...).
EMITTERS = {"cholesky": _cholesky, "triangular solve": _triangular_solve, "lu": _lu,
            "qr": _qr, "eigh": _eigh, "svd": _svd}

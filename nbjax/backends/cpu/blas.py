"""Matrix products called from native code: BLAS's ``gemm`` (``gemv`` for a matrix times a
vector), by address (``routines`` finds them in the OpenBLAS NumPy ships, or else SciPy's
BLAS).

``gemm`` emits the calls for a ``dot_general`` that is a stack of matrix products read in
place: float32, float64, complex64 or complex128, the result in that dtype, and each operand a
``lax.dot.matrix_stack``. Its free axes and its contracted axes are two runs of adjacent
axes (in either order), so that it is a row-major matrix of (free size x contracted size),
or its transpose, whose outer group's elements lie a fixed stride apart (BLAS's leading
dimension); its batch axes lie anywhere else, each at its own stride. That covers ``x @ w``
of any rank against a matrix, ``einsum("bqd,bkd->bqk")``, the transposes that autodiff
makes of them, and an attention's heads read from the ``(batch, sequence, heads, width)``
projections without a transpose. BLAS is column-major, and a row-major matrix is its
transpose there, so ``C = A B`` is computed as ``C^T = B^T A^T``, each operand transposed
(``"T"``) or not according to which of its groups comes last; a loop over the batch makes
one call per element. A large stack is shared out between the cores by the worker pool, in
pieces of one call each, computed by a copy of OpenBLAS on the thread that runs the piece
(``openblas_copy``, ``runtime.product_pieces``): OpenBLAS's own threads would spin on the
cores the program's next kernels share out.
"""

import functools

import numpy as np
from llvmlite import ir

from ...lax.shapes import transpose_p
from ...lax.dot import MatrixStack, matrix_stack, result_stack
from ..llvm import I64, for_loop, mem_type, pointer_array
from . import routines, runtime, tile_choice, tiled_products, workers
from .routines import SCALARS, by_reference


def supports(eqn):
    """Whether ``eqn`` is a ``dot_general`` (the primitive of the ``"matrix product"``
    library lowering) that ``gemm`` emits (see the module docstring)."""
    return eqn.primitive.lowerings.get("library") == "matrix product" \
        and _products(eqn) is not None


def accumulates(eqn):
    """Whether ``gemm`` can add the result of ``eqn`` into its output buffer (``accumulate``):
    when it emits ``eqn`` and the product contracts over elements (an empty contraction's
    zeros would leave a ``-0.0`` that adding ``+0.0`` makes ``+0.0``)."""
    if not supports(eqn):
        return False
    _, a, _ = _products(eqn)
    return a.depth > 0


def writes_transposed(eqn, transpose):
    """Whether ``gemm`` can write the result of ``eqn`` as the ``transpose`` equation
    reading it lays it out (``lax.dot.result_stack``), instead of a kernel copying it."""
    return supports(eqn) and transpose.primitive is transpose_p and \
        _result_stack(eqn, transpose.params["permutation"]) is not None


def how(eqn, large=False):
    """How native code computes ``eqn`` (``supports(eqn)``), for the fusion report (for
    ``large`` products: ``tile_choice.uses_tiles``)."""
    batch_shape, a, b = _products(eqn)
    strided = "" if _packed(batch_shape, a) and _packed(batch_shape, b) else \
        "; it reads its operands in place through their strides"
    shape = _tile_arguments(eqn)
    count = int(np.prod(batch_shape, dtype=np.int64))
    if not tiled_products.fits(*shape, large):
        return f"is a BLAS call{strided}{_shared_out(count, a.rows, a.depth, b.rows)}"
    times = None if tile_choice.CHOICE != "measured" else \
        tile_choice.measured(*shape[:3], *shape[4:])
    timed = "" if times is None else \
        f": {times[0] * 1e6:.0f} us against BLAS's {times[1] * 1e6:.0f} us on this machine"
    if tile_choice.uses_tiles(*shape, large=large):
        shared = f"; its {count} matrices shared out between the cores" \
            if tiled_products.matrices_on_cores(count, a.rows, a.depth, b.rows) else ""
        return (f"is a register-tiled loop in native code ({a.rows} rows, {a.depth} "
                f"contracted{timed}{strided}{shared})")
    return (f"is a BLAS call (faster than register tiles{timed}{strided})"
            f"{_shared_out(count, a.rows, a.depth, b.rows)}")


def _shared_out(count, m, k, n):
    """How a stack of BLAS products is shared out between the cores, for the report."""
    per_matrix, block = runtime.product_pieces(count, m, k, n)
    if block is None or count * per_matrix == 1:
        return ""
    what = "rows" if m >= n else "columns"
    pieces = f"in {count * per_matrix} pieces of {min(block, max(m, n))} {what}" \
        if per_matrix > 1 else f"its {count} matrices"
    return f", {pieces} shared out between the cores by the worker pool, each a call on one " \
        "thread"


def fits_tiles(eqn, large=False):
    """Whether ``eqn`` is a product native code can compute by the register tiles (those
    of ``large`` products included: ``tiled_products.fits``)."""
    return supports(eqn) and tiled_products.fits(*_tile_arguments(eqn), large)


def takes_tiles(eqn):
    """Whether ``eqn``, a product alone in its program, is computed by the register tiles:
    they fit it (large products included) and ran faster than BLAS, or could not be timed
    (``tile_choice.uses_tiles``)."""
    return fits_tiles(eqn, large=True) and not calls_blas(eqn, large=True)


def calls_blas(eqn, large=False):
    """Whether native code computes ``eqn`` by BLAS calls (not by the register tiles; for
    ``large`` products: ``tile_choice.uses_tiles``)."""
    return supports(eqn) and not tile_choice.uses_tiles(*_tile_arguments(eqn),
                                                        large=large)


def _tile_arguments(eqn):
    """The arguments of ``tiled_products.fits`` for ``eqn`` (``supports(eqn)``)."""
    _, a, b = _products(eqn)
    return (a.rows, a.depth, b.rows, a.contracted_last, not b.contracted_last,
            eqn.outvars[0].aval.dtype)


def _products(eqn):
    """(batch shape, lhs's ``MatrixStack``, rhs's) for a ``dot_general`` that is a stack of
    ``m x k`` by ``k x n`` products read in place, of a dtype BLAS has, else None."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval for a in eqn.invars)
    if not (lhs.dtype == rhs.dtype == eqn.outvars[0].aval.dtype and lhs.dtype in SCALARS):
        return None
    a, b = matrix_stack(lhs.shape, lc, lb), matrix_stack(rhs.shape, rc, rb)
    if a is None or b is None:
        return None
    return tuple(lhs.shape[d] for d in lb), a, b


def _packed(batch_shape, stack):
    """Whether ``stack``'s matrices lie one after the other, each with its rows adjacent."""
    size, inner = stack.rows * stack.depth, stack.depth if stack.contracted_last else stack.rows
    packed = (size * int(np.prod(batch_shape[j + 1:], dtype=np.int64))
              for j in range(len(batch_shape)))
    return stack.leading == max(inner, 1) and all(
        stride == p for stride, p, n in zip(stack.batch_strides, packed, batch_shape) if n > 1)


def _batch_offset(b, i, batch_shape, stack):
    """The element offset of matrix ``i`` (an ``i64``, the flat index over ``batch_shape``)
    of ``stack``: its index along each batch axis times that axis's stride."""
    if len(batch_shape) == 1:
        return b.mul(i, ir.Constant(I64, stack.batch_strides[0]))
    offset = ir.Constant(I64, 0)
    for size, stride in reversed(list(zip(batch_shape, stack.batch_strides))):
        index, i = b.urem(i, ir.Constant(I64, size)), b.udiv(i, ir.Constant(I64, size))
        offset = b.add(offset, b.mul(index, ir.Constant(I64, stride)))
    return offset


def _matrix_at(b, buf, offset, dtype):
    """The ``dtype*`` ``offset`` elements into ``buf`` (``i8*``)."""
    return b.bitcast(b.gep(buf, [b.mul(offset, ir.Constant(I64, np.dtype(dtype).itemsize))]),
                     mem_type(dtype).as_pointer())


def _for_each_matrix(b, batch_shape, one):
    """``one(i)`` for each flat batch index ``i`` (an ``i64``), in a loop unless just one."""
    count = int(np.prod(batch_shape, dtype=np.int64))
    if count == 1:
        one(ir.Constant(I64, 0))
    else:
        for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, count), one, "batch")


def gemm(b, setup, eqn, lhs, rhs, out, accumulate=False, permutation=None, choice=None):
    """Emit, with the builder ``b``, the BLAS calls (or register tiles) computing ``eqn``
    (``supports(eqn)``) from the buffers ``lhs`` and ``rhs`` (``i8*``) into ``out``, or
    adding it to what ``out`` holds with ``accumulate`` (``accumulates(eqn)``), or writing
    it transposed by ``permutation`` (``writes_transposed``); ``setup`` builds in the
    function's entry block. ``choice``: "tiles" or "blas" where the program chose
    (``FusionGroup.library_choice``), else ``calls_blas``."""
    batch_shape, a, bs = _products(eqn)
    m, k, n = a.rows, a.depth, bs.rows
    if 0 in batch_shape or m == 0 or n == 0:
        return
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    c = _result_stack(eqn, permutation)
    by_blas = calls_blas(eqn) if choice is None else choice == "blas"
    stacks, count = (a, bs, c), int(np.prod(batch_shape, dtype=np.int64))
    if not by_blas and tiled_products.matrices_on_cores(count, m, k, n):
        def on_a_core(chunk, chunk_setup, i, buffers):
            product = tiled_products.emitter(chunk, chunk_setup, a, bs, dtype, accumulate,
                                             c.leading, alone=True)
            product(*_matrices_at(chunk, i, buffers, batch_shape, stacks, dtype))
        _for_each_on_cores(b, setup, count, (lhs, rhs, out), on_a_core)
        return
    if by_blas:
        _blas_calls(b, setup, batch_shape, stacks, dtype, accumulate, (lhs, rhs, out))
        return
    product = tiled_products.emitter(b, setup, a, bs, dtype, accumulate, c.leading)
    _for_each_matrix(b, batch_shape, lambda i: product(
        *_matrices_at(b, i, (lhs, rhs, out), batch_shape, stacks, dtype)))


def _blas_calls(b, setup, batch_shape, stacks, dtype, accumulate, buffers):
    """The BLAS calls computing the products of ``stacks`` (``MatrixStack``s of ``A``,
    ``B`` and ``C``) from ``buffers``: shared out between the worker pool's threads in
    ``runtime.product_pieces``, each piece a block of one matrix's rows or columns and one
    call computed on the thread running it (``routines.ON_CALLER``), or one call after
    another."""
    a, bs, c = stacks
    shape, count = (a.rows, a.depth, bs.rows), int(np.prod(batch_shape, dtype=np.int64))
    per_matrix, block = runtime.product_pieces(count, *shape)
    on_caller = workers.supported()  # (else the library's threads share out each call)
    if count * per_matrix == 1 or block is None:
        product = _gemm_call(b, setup, shape, a, bs, c.leading, dtype, accumulate, on_caller)
        _for_each_matrix(b, batch_shape, lambda i: product(
            *_matrices_at(b, i, buffers, batch_shape, stacks, dtype)))
        return

    def piece(chunk, chunk_setup, p, passed):
        i, j = (chunk.udiv(p, ir.Constant(I64, per_matrix)),
                chunk.urem(p, ir.Constant(I64, per_matrix)))
        start = chunk.mul(j, ir.Constant(I64, block))
        length = max(shape[0], shape[2])
        size = chunk.sub(_smaller(chunk, chunk.add(start, ir.Constant(I64, block)), length),
                         start)
        product = _gemm_call(chunk, chunk_setup, shape, a, bs, c.leading, dtype, accumulate,
                             on_caller, size)
        matrices = _matrices_at(chunk, i, passed, batch_shape, stacks, dtype)
        product(*_piece_at(chunk, matrices, start, shape, stacks))
    _for_each_on_cores(b, setup, count * per_matrix, buffers, piece)


def _smaller(b, value, bound):
    """min(``value``, ``bound``) of an i64 and an int."""
    bound = ir.Constant(I64, bound)
    return b.select(b.icmp_signed("<", value, bound), value, bound)


def _piece_at(b, matrices, start, shape, stacks):
    """The first elements of a piece's ``A``, ``B`` and ``C`` from ``start`` along the
    longer of ``C``'s rows (``m``) and columns (``n``): ``C`` row-major with its rows
    ``c.leading`` apart."""
    (lhs, rhs, out), (m, _, n), (a, bs, c) = matrices, shape, stacks
    if m >= n:
        return (_advance(b, lhs, start, a.leading if a.contracted_last else 1), rhs,
                _advance(b, out, start, c.leading))
    return (lhs, _advance(b, rhs, start, bs.leading if bs.contracted_last else 1),
            _advance(b, out, start, 1))


def _advance(b, pointer, start, stride):
    """``pointer`` moved ``start`` (an i64) times ``stride`` elements on."""
    return b.gep(pointer, [b.mul(start, ir.Constant(I64, stride))])


def _matrices_at(b, i, buffers, batch_shape, stacks, dtype):
    """The first elements (``dtype*``) of matrix ``i`` of each of ``stacks`` in ``buffers``."""
    return [_matrix_at(b, buf, _batch_offset(b, i, batch_shape, stack), dtype)
            for buf, stack in zip(buffers, stacks)]


def _for_each_on_cores(b, setup, count, buffers, one):
    """``one(builder, its setup, i, buffers)`` for each index ``i`` below ``count`` (a
    matrix, a piece of one), in a chunk function of the module (``workers.CHUNK``) that the
    worker pool runs over the indices, ``buffers`` (``i8*``) passed to it in an array on the
    stack."""
    chunk = ir.Function(b.module, workers.CHUNK, b.module.get_unique_name("matrices"))
    chunk.linkage = "internal"
    array, start, stop = chunk.args
    chunk_setup = ir.IRBuilder(chunk.append_basic_block("setup"))
    body = chunk.append_basic_block("matrices")
    inner = ir.IRBuilder(body)
    passed = [inner.load(inner.gep(array, [ir.Constant(I64, n)])) for n in range(len(buffers))]
    for_loop(inner, start, stop, lambda i: one(inner, chunk_setup, i, passed), "matrix")
    inner.ret_void()
    chunk_setup.branch(body)
    b.call(workers.declare_parallel_for(b.module),
           [chunk, pointer_array(b, setup, buffers), ir.Constant(I64, count)])


def _result_stack(eqn, permutation):
    """The ``MatrixStack`` of the result of ``eqn`` (``supports(eqn)``) transposed by
    ``permutation`` (``lax.dot.result_stack``; None where it cannot be), or, without one,
    as it is: its products' results one after the other."""
    if permutation is not None:
        return result_stack(eqn.params["dimension_numbers"], len(eqn.invars[0].aval.shape),
                            eqn.outvars[0].aval.shape, permutation)
    batch_shape, a, bs = _products(eqn)
    size = a.rows * bs.rows
    return MatrixStack(tuple(size * int(np.prod(batch_shape[j + 1:], dtype=np.int64))
                             for j in range(len(batch_shape))),
                       a.rows, bs.rows, True, max(bs.rows, 1))


def _gemm_call(b, setup, shape, a, bs, c_row, dtype, accumulate, on_caller=False, size=None):
    """A function ``product(lhs, rhs, out)`` emitting the BLAS call for one pair of
    matrices of the stacks ``a`` and ``bs`` (``dtype*``: their first elements), into a
    matrix whose rows are ``c_row`` apart, adding to its elements with ``accumulate``
    (``beta = 1``), computed on the calling thread with ``on_caller``; ``size`` (an i64),
    the rows or columns of a piece in place of the longer of ``C``'s (``_piece_at``)."""
    m, k, n = shape
    if (m == 1 or n == 1) and k > 0:  # (gemv leaves y as it was when it sums nothing)
        return _gemv_call(b, setup, shape, a, bs, c_row, dtype, accumulate, on_caller, size)
    if size is not None:
        m, n = (size, n) if m >= n else (m, size)
    # Column-major: C^T (n x m) = op(B) (n x k) times op(A) (k x m). A row-major operand
    # is, column-major, its transpose with its outer group's stride as leading dimension;
    # it is transposed again ("T") when its contracted group is the other one.
    ref, integer = functools.partial(by_reference, b, setup), \
        functools.partial(_dimension, b, setup)
    fixed = [routines.character(b, setup, "T" if bs.contracted_last else "N"),
             routines.character(b, setup, "N" if a.contracted_last else "T"),
             *(integer(v) for v in (n, m, k)), ref(routines.scalar(dtype, 1.0))]
    ld_b, ld_a = integer(max(bs.leading, 1)), integer(max(a.leading, 1))
    beta, ld_c = ref(routines.scalar(dtype, 1.0 if accumulate else 0.0)), integer(c_row)
    return lambda lhs, rhs, out: routines.call(
        b, "gemm", dtype, fixed + [rhs, ld_b, lhs, ld_a, beta, out, ld_c], on_caller)


def _gemv_call(b, setup, shape, a, bs, c_row, dtype, accumulate, on_caller, size):
    """``_gemm_call`` for a product of one row or one column, a matrix times a vector:
    BLAS's ``gemv``, which streams the matrix once, where ``gemm`` packed it first (a 2000 x
    2000 float32 matrix times a vector: 0.55-0.8 ms, ``gemv`` 0.13-0.3 ms). Column-major,
    with ``_gemm_call``'s operands: one row of ``A`` (``m == 1``) makes ``C^T = op(B) x``,
    ``x`` that row; else (``n == 1``) ``C = op(A)^T x``, ``x`` the column of ``B``. The
    matrix is passed as it is stored, transposed (``"T"``) where its contracted elements
    are the contiguous ones; the vectors' elements are one or a leading dimension apart."""
    m, k, n = shape
    ref, integer = functools.partial(by_reference, b, setup), \
        functools.partial(_dimension, b, setup)
    if m == 1:
        matrix, transposed, outputs = bs, bs.contracted_last, n
        incx, incy = 1 if a.contracted_last else a.leading, 1
    else:
        matrix, transposed, outputs = a, a.contracted_last, m
        incx, incy = 1 if bs.contracted_last else bs.leading, c_row
    outputs = outputs if size is None else size
    rows, columns = (k, outputs) if transposed else (outputs, k)
    fixed = [routines.character(b, setup, "T" if transposed else "N"), integer(rows),
             integer(columns), ref(routines.scalar(dtype, 1.0))]
    ld, beta = integer(max(matrix.leading, 1)), \
        ref(routines.scalar(dtype, 1.0 if accumulate else 0.0))
    incx, incy = integer(max(incx, 1)), integer(max(incy, 1))

    def product(lhs, rhs, out):
        matrix_at, vector_at = (rhs, lhs) if m == 1 else (lhs, rhs)
        routines.call(b, "gemv", dtype, fixed + [matrix_at, ld, vector_at, incx, beta, out,
                                                 incy], on_caller)
    return product


def _dimension(b, setup, value):
    """A pointer to the integer ``value`` (an int or an i64) in the library's type."""
    if isinstance(value, int):
        return routines.integer(b, setup, value)
    int_type = routines.library()
    return by_reference(b, setup, value if int_type == I64 else b.trunc(value, int_type))

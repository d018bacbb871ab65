"""Matrix products of few rows, compiled into the program instead of calling BLAS.

A recurrent network's step multiplies a state of a few dozen rows by a weight matrix:
32x256 by 256x1024 in the LSTM benchmark. OpenBLAS packs both operands into its panel
layout on every call and, at so few rows, reaches about half the rate it reaches on large
products (88 us on two cores here; one core of the kernel below: 69 us). So where a product
has 2 to ``ROWS_MAX`` rows (one row is BLAS's ``gemv``, bound by memory), the right operand
is a row-major ``k x n`` matrix (``x @ w``, not ``x @ w.T``) and ``n`` a whole number of
vectors, native code computes it itself:

- ``C`` is cut into tiles of ``rows`` x ``vectors`` vectors (6 x 4 of 16 float32 lanes
  with AVX-512's 32 registers; 4 x 3 with 16 registers), each computed in registers: for
  each ``k``, the tile's vectors of row ``k`` of ``B`` are loaded once, each of its rows'
  element of ``A`` broadcast, and one fused multiply-add made per accumulator. The
  accumulators stay in registers for the whole ``k`` loop and are stored once.
- A product is a function over its columns' tiles, ``(args, start, stop)``: the worker
  pool's chunk signature (``workers``). From ``SPLIT_WORK`` multiply-adds its tiles are
  shared out between the cores; below, the calling thread runs them all.

Each element is a sum over ``k`` in order, with one rounding per step: the values differ
from BLAS's, whose blocking sums in another order, by rounding only.
"""

import math

import numpy as np
from llvmlite import ir

from ..llvm import I64, for_loop, mem_type
from ..llvm.types import I8, I32
from . import codegen, runtime, workers

ROWS_MAX = 64            # products with more rows call BLAS (unless ``DEPTH_MAX`` allows)
DEPTH_MAX = 128          # contractions this short are tiled for any number of rows
SPLIT_WORK = 1 << 20     # multiply-adds from which a product's tiles go to the worker pool
I8P = I8.as_pointer()


def lanes(dtype):
    """The vector width for ``dtype`` (that of a plain loop: ``runtime.float32_lanes``)."""
    return max(1, runtime.float32_lanes() * 4 // np.dtype(dtype).itemsize)


def tile_shape():
    """(rows, vectors) of a register tile: its accumulators, the row of ``B`` and one
    broadcast fit in the vector registers (32 with AVX-512, 16 before)."""
    return (6, 4) if runtime.float32_lanes() >= 16 else (4, 3)


def fits(m, k, n, a_last, b_first, dtype):
    """Whether a product of ``m`` rows, ``k`` contracted and ``n`` columns is computed
    here: ``b_first``, the right operand's contracted group comes first (it is a row-major
    ``k x n`` matrix); ``a_last``, the left one's comes last. Any number of rows when the
    contraction is short (``DEPTH_MAX``) and the left operand row-major: a tile's column
    of ``B`` then stays in the cache while all rows stream past (an RNN's inputs by its
    input weights, hoisted out of the loop), and the program keeps OpenBLAS's threads,
    which spin for a tenth of a second after each call, off the cores of its loops."""
    rows = 2 <= m <= ROWS_MAX or (m >= 2 and a_last and k <= DEPTH_MAX)
    return b_first and rows and n > 0 and n % lanes(dtype) == 0 \
        and np.dtype(dtype) in (np.float32, np.float64)


def emit(b, setup, lhs, rhs, out, product):
    """Emit the products of ``product`` = (batch, m, k, n, a_last, dtype) from the
    buffers ``lhs``, ``rhs`` into ``out`` (``i8*``); ``setup`` builds in the entry block.
    ``a_last``: the left operand is a row-major ``m x k`` matrix (else ``k x m``)."""
    batch, m, k, n, a_last, dtype = product
    size = np.dtype(dtype).itemsize
    fn = _product_function(b.module, m, k, n, a_last, dtype)
    tiles = _tile_count(n, dtype)
    args = setup.alloca(ir.ArrayType(I8P, 3))
    pooled = m * n * k >= SPLIT_WORK and runtime.THREADS > 1 and workers.supported()

    def one(i):
        for slot, (buf, elements) in enumerate(((lhs, m * k), (rhs, k * n), (out, m * n))):
            at = b.gep(buf, [b.mul(i, ir.Constant(I64, elements * size))])
            b.store(at, b.gep(args, [ir.Constant(I32, 0), ir.Constant(I32, slot)]))
        array = b.bitcast(args, I8P.as_pointer())
        if pooled:
            pool = workers.declare_parallel_for(b.module)
            b.call(pool, [fn, array, ir.Constant(I64, tiles)])
        else:
            b.call(fn, [array, ir.Constant(I64, 0), ir.Constant(I64, tiles)])
    if batch == 1:
        one(ir.Constant(I64, 0))
    else:
        for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, batch), one, "batch")


def _tile_count(n, dtype):
    _, vectors = tile_shape()
    return math.ceil(n / (vectors * lanes(dtype)))


def _product_function(module, m, k, n, a_last, dtype):
    """``void name(i8** args, i64 start, i64 stop)``: the column tiles ``[start, stop)``
    of ``args[2] = args[0] @ args[1]`` (once per module and shape)."""
    name = f"tiled_product_{np.dtype(dtype).name}_{m}x{k}x{n}_{'n' if a_last else 't'}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, workers.CHUNK, name=name)
    args, start, stop = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    real = mem_type(dtype).as_pointer()
    a, bm, c = (b.bitcast(b.load(b.gep(args, [ir.Constant(I64, s)])), real) for s in range(3))
    rows, vectors = tile_shape()
    width = vectors * lanes(dtype)
    full, rest = divmod(n, width)
    a_row, a_col = (k, 1) if a_last else (1, m)

    def column_tile(t, tile_vectors):
        n0 = b.mul(t, ir.Constant(I64, width))

        def row_block(m0, height):
            tile = _tile_function(module, height, tile_vectors, k, n, a_row, a_col, dtype)
            b.call(tile, [b.gep(a, [b.mul(m0, ir.Constant(I64, a_row))]), b.gep(bm, [n0]),
                          b.gep(c, [b.add(n0, b.mul(m0, ir.Constant(I64, n)))])])
        whole = m - m % rows
        if whole:
            back = for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, whole),
                            lambda m0: row_block(m0, rows), "rows", step=rows)
            back.set_metadata("llvm.loop", codegen.loop_hints(module, unroll=False,
                                                              vectorise=False))
        if m % rows:
            row_block(ir.Constant(I64, whole), m % rows)
    last = b.select(b.icmp_signed("<", stop, ir.Constant(I64, full)), stop,
                    ir.Constant(I64, full))
    back = for_loop(b, start, last, lambda t: column_tile(t, vectors), "tile")
    back.set_metadata("llvm.loop", codegen.loop_hints(module, unroll=False, vectorise=False))
    if rest:
        with b.if_then(b.icmp_signed(">", stop, ir.Constant(I64, full))):
            column_tile(ir.Constant(I64, full), rest // lanes(dtype))
    b.ret_void()
    return fn


def _tile_function(module, rows, vectors, k, n, a_row, a_col, dtype):
    """``void name(A*, B*, C*)``: a tile of ``rows`` x ``vectors`` vectors of ``C``, its
    accumulators in registers through the ``k`` loop (see the module docstring).
    ``A``'s element (r, j) is at ``r * a_row + j * a_col``; ``B``'s and ``C``'s rows are
    ``n`` apart."""
    name = f"tile_{np.dtype(dtype).name}_{rows}x{vectors}_{k}_{n}_{a_row}_{a_col}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    scalar, width = mem_type(dtype), lanes(dtype)
    vec = ir.VectorType(scalar, width)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [scalar.as_pointer()] * 3), name)
    fn.attributes.add("noinline")  # (one copy, optimised once: LLVM took 50 ms a product)
    for arg in fn.args:
        arg.add_attribute("noalias")
    a, bm, c = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(vec, [0.0] * width)
    sums = [[zero] * vectors for _ in range(rows)]
    if k:
        sums = _accumulate(b, fn, a, bm, rows, vectors, k, n, a_row, a_col, vec)
    for r in range(rows):
        for j in range(vectors):
            at = b.gep(c, [ir.Constant(I64, r * n + j * width)])
            b.store(sums[r][j], b.bitcast(at, vec.as_pointer()), align=np.dtype(dtype).itemsize)
    b.ret_void()
    return fn


def _accumulate(b, fn, a, bm, rows, vectors, k, n, a_row, a_col, vec):
    """The ``k`` loop of a tile: its accumulators' values after it."""
    width = vec.count
    fma, align = _fma(b.module, vec), 4 if vec.element == ir.FloatType() else 8
    entry, loop, done = b.block, fn.append_basic_block("k"), fn.append_basic_block("k.done")
    b.branch(loop)
    b.position_at_end(loop)
    j = b.phi(I64, "j")
    j.add_incoming(ir.Constant(I64, 0), entry)
    sums = [[b.phi(vec) for _ in range(vectors)] for _ in range(rows)]
    row = b.gep(bm, [b.mul(j, ir.Constant(I64, n))])
    bs = [b.load(b.bitcast(b.gep(row, [ir.Constant(I64, v * width)]), vec.as_pointer()),
                 align=align) for v in range(vectors)]
    lane0 = ir.Constant(I32, 0)
    mask = ir.Constant(ir.VectorType(I32, width), [0] * width)
    updated = []
    for r in range(rows):
        x = b.load(b.gep(a, [b.add(ir.Constant(I64, r * a_row),
                                   b.mul(j, ir.Constant(I64, a_col)))]))
        splat = b.shuffle_vector(b.insert_element(ir.Constant(vec, ir.Undefined), x, lane0),
                                 ir.Constant(vec, ir.Undefined), mask)
        updated.append([b.call(fma, [splat, bs[v], sums[r][v]]) for v in range(vectors)])
    following = b.add(j, ir.Constant(I64, 1))
    j.add_incoming(following, b.block)
    zero = ir.Constant(vec, [0.0] * width)
    for r in range(rows):
        for v in range(vectors):
            sums[r][v].add_incoming(zero, entry)
            sums[r][v].add_incoming(updated[r][v], b.block)
    back = b.cbranch(b.icmp_signed("<", following, ir.Constant(I64, k)), loop, done)
    back.set_metadata("llvm.loop", codegen.loop_hints(b.module, unroll=False, vectorise=False))
    b.position_at_end(done)
    return updated


def _fma(module, vec):
    kind = "f32" if vec.element == ir.FloatType() else "f64"
    name = f"llvm.fma.v{vec.count}{kind}"
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(vec, [vec] * 3), name)

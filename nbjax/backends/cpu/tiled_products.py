"""Matrix products of few rows, computed by register tiles of our own instead of BLAS.

A recurrent network's step multiplies a state of a few dozen rows by a weight matrix:
32x256 by 256x1024 in the LSTM benchmark. OpenBLAS packs both operands into its panel
layout on every call and, at so few rows, reaches about half the rate it reaches on large
products (88 us on two cores of an AMD EPYC; one core of the tiles below: 69 us). So where
a product has 2 to ``ROWS_MAX`` rows (one row is BLAS's ``gemv``, bound by memory), native
code computes it itself (``fits`` says which products), where that is faster on the
machine (``tile_choice``: on an Intel Xeon it was not). A program whose every product the
tiles can compute takes them for large products too, to keep BLAS's threads off the cores
of its kernels (``fits``' ``large``):

- ``x @ w``, the right operand a row-major ``k x n`` matrix (its rows at any stride: an
  attention's heads are read in place) and ``n`` a whole number of vectors: ``C`` is cut
  into tiles of ``rows`` x ``vectors`` vectors (6 x 4 of 16 float32 lanes with AVX-512's
  32 registers; 4 x 3 with 16 registers), each computed in registers:
  for each ``k``, the tile's vectors of row ``k`` of ``B`` are loaded once, each of its
  rows' element of ``A`` broadcast, and one fused multiply-add made per accumulator. The
  accumulators stay in registers through a block of ``DEPTH_BLOCK`` along ``k`` and are
  then stored, or added to what earlier blocks stored. Each element is a sum over ``k``
  in order within a block, with one rounding per step.
- ``x @ w.T``, the right operand ``n x k``, ``k`` a whole number of vectors: tiles of dot
  products (4 x 4 with 32 registers, 3 x 3 with 16), one accumulator vector per element
  along ``k`` (a vector of ``A``'s row and one of ``B``'s loaded per step), summed across
  its lanes at the end. Of ``PACKED_ROWS_MIN`` rows or more (and ``n`` whole vectors),
  by the tiles of ``x @ w`` instead, each block of ``B`` they read transposed first into
  a buffer on the stack (``_define_pack``: 16 x 16 squares in registers).
- The tiles and the loop over them are library functions (``library``), compiled once
  per process for each dtype and tile shape and shared by every program: a program's
  product fills an array of arguments (``ARGS``: buffers, shapes, tile functions) and
  calls the loop, ``(args, start, stop)`` over the columns' tiles, the worker pool's chunk
  signature (``workers``). From ``SPLIT_WORK`` multiply-adds the tiles are shared out
  between the cores; below, the calling thread runs them all. LLVM compiles them by its
  light tier: their loops are written as vector code already, and O3 made the same
  instructions in twice the time.

The values differ from BLAS's, whose blocking sums in another order, by rounding only, and
are the same on any number of threads.
"""

import math

import numpy as np
from llvmlite import ir

from ..llvm import I64, for_loop, mem_type
from ..llvm.types import I8, I32
from . import codegen, library, runtime, workers

ROWS_MAX = 64            # products with more rows call BLAS (unless ``DEPTH_MAX`` allows)
DEPTH_MAX = 128          # contractions this short are tiled for any number of rows
SPLIT_WORK = 1 << 20     # multiply-adds from which a product's tiles go to the worker pool
DOT_DEPTH_MIN = 16       # vectors along ``k`` from which ``x @ w.T`` is tiled: each of a
                         # tile's dot products ends with a sum across its lanes
LARGE_DOT_DEPTH_MIN = 4  # ... where tiles are timed against BLAS (64-wide attention heads)
# A tile column's rows of ``B`` are read in blocks of this many along ``k`` for all its row
# tiles, then the next block's, the partial sums added into ``C``: a block of B stays in
# the core's L2 cache (128 KB of float32 at AVX-512's 64 columns) while the rows pass.
# Unblocked, a 3200-deep column (800 KB) was read from further out for each row tile: an
# LSTM gradient's 256x3200 by 3200x1024 took 25.5 ms on one Zen 4 core (66 GFLOP/s), 15.7
# so. (``x @ w.T``'s dot tiles read both rows along ``k`` in order: not blocked, as each
# block would add a sum across lanes and ran 10-15% slower.)
DEPTH_BLOCK = 512
# ``x @ w.T`` of this many rows or more (where tiles are timed against BLAS: ``fits``) is
# computed by the tiles of ``x @ w``: each block of ``B`` (a tile's columns by
# ``DEPTH_BLOCK``) is first transposed into a buffer on the stack, in 16 x 16 blocks in
# registers (``_define_pack``). That costs about 5% of the product's time at 128 rows, and
# the tiles of ``x @ w`` run 20-30% faster than the dot tiles on long contractions:
# batched_matvec's 128 x 10000 by 10000 x 10000, on one Zen 4 core, 99 GFLOP/s where the
# dot tiles reach 80 and OpenBLAS 90.
PACKED_ROWS_MIN = 128
I8P = I8.as_pointer()


def lanes(dtype):
    """The vector width for ``dtype`` (that of a plain loop: ``runtime.float32_lanes``)."""
    return max(1, runtime.float32_lanes() * 4 // np.dtype(dtype).itemsize)


def tile_shape():
    """(rows, vectors) of a register tile: its accumulators, the row of ``B`` and one
    broadcast fit in the vector registers (32 with AVX-512, 16 before)."""
    return (6, 4) if runtime.float32_lanes() >= 16 else (4, 3)


def by_rows(m, n, b_first, dtype):
    """Whether ``C`` is computed by the tiles of ``x @ w`` (whole vectors of ``B``'s rows):
    for ``x @ w``, and for ``x @ w.T`` of ``PACKED_ROWS_MIN`` rows or more whose ``n`` is
    a whole number of vectors, on ``B``'s blocks transposed (``PACKED_ROWS_MIN``)."""
    return b_first or (m >= PACKED_ROWS_MIN and n % lanes(dtype) == 0)


def loop_name(m, n, b_first, dtype):
    """The library function looping over the tiles of the product."""
    packed = "_packed" if not b_first and by_rows(m, n, b_first, dtype) else ""
    return library.name(f"nbjax_tiled_product_{np.dtype(dtype).name}{packed}")


def fits(m, k, n, a_last, b_first, dtype, large=False):
    """Whether a product of ``m`` rows, ``k`` contracted and ``n`` columns is computed
    here: ``b_first``, the right operand's contracted group comes first (it is a row-major
    ``k x n`` matrix, ``x @ w``; else it is ``n x k``, ``x @ w.T``); ``a_last``, the left
    one's comes last. ``x @ w`` is tiled by rows of ``B`` (``n`` whole vectors), for any
    number of rows when the contraction is short (``DEPTH_MAX``) and the left operand
    row-major: a tile's column of ``B`` then stays in the cache while all rows stream past
    (an RNN's inputs by its input weights, hoisted out of the loop). ``x @ w.T`` is tiled
    by dot products along ``k`` (whole vectors, at least ``DOT_DEPTH_MIN``), both
    operands' rows being contiguous there.

    ``large``: where the tiles are timed against BLAS (``tile_choice``: the CPU target's
    choices, ``cpu._choose_products``), any number of rows and any depth, and dot products
    of ``LARGE_DOT_DEPTH_MIN`` vectors; ``x @ w.T`` of ``PACKED_ROWS_MIN`` rows, its ``n``
    a whole number of vectors, by the tiles of ``x @ w`` (``by_rows``), at any depth and
    through any strides of ``A``. On large products the tiles run about as fast as BLAS on
    two Zen 4 cores (~200 GFLOP/s for a transformer's 1024x256 by 256x1024, OpenBLAS
    150-195), a little faster on long contractions (``PACKED_ROWS_MIN``); on two Sapphire
    Rapids cores at half BLAS's speed."""
    if np.dtype(dtype) not in (np.float32, np.float64) or n <= 0 or m < 2:
        return False
    if b_first:
        rows = m <= ROWS_MAX or large or (a_last and k <= DEPTH_MAX)
        return rows and n % lanes(dtype) == 0
    if large and by_rows(m, n, b_first, dtype):
        return True
    depth = LARGE_DOT_DEPTH_MIN if large else DOT_DEPTH_MIN
    return a_last and (large or m <= ROWS_MAX) and k >= depth * lanes(dtype) \
        and k % lanes(dtype) == 0


def _tiling(rows_of_b, dtype):
    """(the names' prefix of the tile functions, a tile's rows, its columns in units, the
    columns of a unit): tiles of whole vectors of ``B``'s rows (``rows_of_b``: ``by_rows``),
    else of dot products (accumulators, loaded rows and a broadcast fit in the vector
    registers: 32 with AVX-512, 16 before)."""
    rows, across = tile_shape() if rows_of_b else dot_tile_shape()
    return ("nbjax_tile_" if rows_of_b else "nbjax_dot_tile_"), rows, across, \
        (lanes(dtype) if rows_of_b else 1)


def dot_tile_shape():
    """(rows, columns) of a tile of dot products: one accumulator vector each, a row of
    ``A`` and one of ``B`` loaded per accumulator row and column."""
    return (4, 4) if runtime.float32_lanes() >= 16 else (3, 3)


# The product's array of arguments, ``args`` of the loop over the tiles: pointers, the
# tile functions of each part of ``C`` (null where the part is empty), then integers:
# the shapes, ``A``'s strides, how far apart ``B``'s rows are and its columns (1 for
# ``x @ w``, its rows' stride for ``x @ w.T``), how far apart ``C``'s rows are, a tile's
# rows and its width in columns, and whether the product is added to what ``C`` holds
# (1) or replaces it (0).
ARGS = ("a", "b", "c", "full", "rows_rest", "columns_rest", "corner", "m", "k", "n",
        "a_row", "a_col", "b_row", "b_column", "b_depth", "c_row", "rows", "width",
        "depth_block", "accumulate")
_SLOT = {name: i for i, name in enumerate(ARGS)}


def emitter(b, setup, a, bs, dtype, accumulate, c_row, alone=False):
    """A function ``product(lhs, rhs, out)`` emitting with ``b`` the product of one pair of
    matrices of the stacks ``a`` and ``bs`` (``lax.dot.MatrixStack``s that ``fit``), given
    their first elements and the result's (``i8*``; the result's rows ``c_row`` apart),
    added to the result's elements with ``accumulate``; ``setup`` builds in the entry
    block. Its tiles go to the worker pool where the product is large enough
    (``pooled_on_cores``), unless ``alone``: the calling thread computes them all."""
    m, k, n, b_first = a.rows, a.depth, bs.rows, not bs.contracted_last
    loop = library.declare(b.module, loop_name(m, n, b_first, dtype), workers.CHUNK)
    tiles = tile_count(n, by_rows(m, n, b_first, dtype), dtype)
    values = arguments(m, k, n, (a.leading, 1) if a.contracted_last else (1, a.leading),
                       bs.leading, 1 if b_first else bs.leading, c_row, b_first, dtype,
                       accumulate)
    values.update({part: name and library.declare(b.module, name, _tile_type(dtype))
                   for part, name in tile_names(m, n, by_rows(m, n, b_first, dtype),
                                                 dtype).items()})
    args = setup.alloca(ir.ArrayType(I8P, len(ARGS)))
    pooled = not alone and pooled_on_cores(m, k, n)

    def store(slot, value):
        b.store(value, b.gep(args, [ir.Constant(I32, 0), ir.Constant(I32, _SLOT[slot])]))

    def product(lhs, rhs, out):
        for slot, buf in zip("abc", (lhs, rhs, out)):
            store(slot, b.bitcast(buf, I8P))
        for slot, value in values.items():
            store(slot, b.inttoptr(ir.Constant(I64, value), I8P) if isinstance(value, int)
                  else b.bitcast(value, I8P) if value is not None else ir.Constant(I8P, None))
        array = b.bitcast(args, I8P.as_pointer())
        if pooled:
            pool = workers.declare_parallel_for(b.module)
            b.call(pool, [loop, array, ir.Constant(I64, tiles)])
        else:
            b.call(loop, [array, ir.Constant(I64, 0), ir.Constant(I64, tiles)])
    return product


def arguments(m, k, n, a_strides, b_row, b_column, c_row, b_first, dtype, accumulate):
    """The integers of a product's ``ARGS`` (``a_strides``: how far apart ``A``'s rows and
    its columns are), by name."""
    rows_of_b = by_rows(m, n, b_first, dtype)
    _, rows, across, unit = _tiling(rows_of_b, dtype)
    return {"m": m, "k": k, "n": n, "a_row": a_strides[0], "a_col": a_strides[1],
            "b_row": b_row, "b_column": b_column, "b_depth": b_row if b_first else 1,
            "c_row": c_row, "rows": rows, "width": across * unit,
            "depth_block": DEPTH_BLOCK if rows_of_b else max(k, 1),
            "accumulate": int(accumulate)}


def tile_width(rows_of_b, dtype):
    """How many columns of ``C`` a tile computes (``rows_of_b``: ``by_rows``)."""
    _, _, across, unit = _tiling(rows_of_b, dtype)
    return across * unit


def tile_count(n, rows_of_b, dtype):
    """How many tiles wide ``C`` is (the loop's extent)."""
    return math.ceil(n / tile_width(rows_of_b, dtype))


def pooled_on_cores(m, k, n):
    """Whether a product's tiles are shared out between the cores."""
    return m * n * k >= SPLIT_WORK and runtime.THREADS > 1 and workers.supported()


def matrices_on_cores(count, m, k, n):
    """Whether a stack of ``count`` products is shared out between the cores by whole
    matrices, each computed by one thread, rather than by the column tiles of one matrix
    after another: where each core gets two matrices at least and all together make
    ``SPLIT_WORK`` multiply-adds. An attention's 32 heads (128x64 by 64x128) took one
    round of the pool each (0.98 ms; shared out, 0.33)."""
    return runtime.THREADS > 1 and workers.supported() and count >= 2 * runtime.THREADS \
        and count * m * k * n >= SPLIT_WORK


def tile_names(m, n, rows_of_b, dtype):
    """{part of ``C``: the name of its tile function, None if it is empty}: the whole
    tiles, those of the rows left below them, of the columns left to their right, and the
    corner where both are left (``rows_of_b``: ``by_rows``)."""
    prefix, rows, across, unit = _tiling(rows_of_b, dtype)
    whole, rows_left = m - m % rows, m % rows
    full, rest = divmod(n, across * unit)
    rest //= unit
    shapes = {"full": (whole and full and rows, across),
              "rows_rest": (full and rows_left, across),
              "columns_rest": (whole and rows, rest), "corner": (rows_left, rest)}
    return {part: library.name(f"{prefix}{np.dtype(dtype).name}_{h}x{v}") if h and v
            else None for part, (h, v) in shapes.items()}


def _tile_type(dtype):
    """``void (A*, B*, C*, k, c_row, a_row, a_col, b_row, accumulate)``: see
    ``_define_tile``."""
    real = mem_type(dtype).as_pointer()
    return ir.FunctionType(ir.VoidType(), [real] * 3 + [I64] * 6)


def _parse(function_name, prefix):
    """The dtype and the rest of a library function's name, its CPU left out."""
    dtype, _, rest = function_name.split(".")[0].removeprefix(prefix).partition("_")
    return np.dtype(dtype), rest


@library.maker("nbjax_tiled_product_", shaped_by=lambda: DEPTH_BLOCK)
def _define_product(module, function_name):
    """``void nbjax_tiled_product_<dtype>[_packed](i8** args, i64 start, i64 stop)``: the
    column tiles ``[start, stop)`` of ``C = A @ B`` (or ``A @ B.T``), the worker pool's
    chunk signature; ``args`` (``ARGS``) holds the buffers, the tile functions and the
    shapes. ``_packed``: ``A @ B.T`` by the tiles of ``x @ w``, each block of ``B`` they
    read first transposed into a buffer (``PACKED_ROWS_MIN``)."""
    dtype, form = _parse(function_name, "nbjax_tiled_product_")
    fn = ir.Function(module, workers.CHUNK, name=function_name)
    args, start, stop = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    packed = _packed_blocks(b, dtype) if form == "packed" else None
    arg = {name: b.load(b.gep(args, [ir.Constant(I64, i)])) for i, name in enumerate(ARGS)}
    real, tile = mem_type(dtype).as_pointer(), _tile_type(dtype).as_pointer()
    a, bm, c = (b.bitcast(arg[name], real) for name in "abc")
    m, k, n, a_row, a_col, b_row, b_column, b_depth, c_row, rows, width, block, \
        accumulate = (b.ptrtoint(arg[name], I64) for name in ARGS[7:])
    whole = b.sub(m, b.srem(m, rows))

    def column_tile(t, main, below):
        n0 = b.mul(t, width)

        def depth_block(k0):
            depth = b.sub(k, k0)
            depth = b.select(b.icmp_signed("<", depth, block), depth, block)
            adds = b.select(b.icmp_signed(">", k0, ir.Constant(I64, 0)),
                            ir.Constant(I64, 1), accumulate)
            a_k, b_k = b.gep(a, [b.mul(k0, a_col)]), b.gep(bm, [b.mul(k0, b_depth)])
            b_tile, b_tile_row = b.gep(b_k, [b.mul(n0, b_column)]), b_row
            if packed is not None:
                b_tile, b_tile_row = packed(b_tile, b_column, depth, b.sub(n, n0))

            def row_block(m0, part):
                b.call(b.bitcast(arg[part], tile),
                       [b.gep(a_k, [b.mul(m0, a_row)]), b_tile,
                        b.gep(c, [b.add(n0, b.mul(m0, c_row))]), depth, c_row, a_row, a_col,
                        b_tile_row, adds])
            _loop(b, ir.Constant(I64, 0), whole, lambda m0: row_block(m0, main), "rows", rows)
            with b.if_then(b.icmp_signed("<", whole, m)):
                row_block(whole, below)
        # (one block at least: a product contracting nothing still writes its zeros)
        depth_end = b.select(b.icmp_signed(">", k, ir.Constant(I64, 0)), k,
                             ir.Constant(I64, 1))
        _loop(b, ir.Constant(I64, 0), depth_end, depth_block, "depth", block)
    full = b.sdiv(n, width)
    last = b.select(b.icmp_signed("<", stop, full), stop, full)
    _loop(b, start, last, lambda t: column_tile(t, "full", "rows_rest"), "tile", 1)
    with b.if_then(b.icmp_signed(">", stop, full)):
        column_tile(full, "columns_rest", "corner")
    b.ret_void()


def _packed_blocks(b, dtype):
    """A function ``pack(source, row, depth, columns)`` emitting with ``b`` the transposing
    of a tile's block of ``B`` (its rows ``row`` apart: ``C``'s columns, ``columns`` of
    them left from there, up to a tile's width, by ``depth`` along ``k``) into a buffer on
    the stack, and giving (the buffer, how far apart its rows are): the block as the
    tiles of ``x @ w`` read it."""
    width = tile_width(True, dtype)
    real = mem_type(dtype)
    buffer = b.alloca(ir.ArrayType(real, DEPTH_BLOCK * width), name="packed")
    buffer.align = 64
    packed = b.bitcast(buffer, real.as_pointer())
    transpose = _define_pack(b.module, b.function.name, dtype, width)

    def pack(source, row, depth, columns):
        vectors = b.sdiv(b.select(b.icmp_signed("<", columns, ir.Constant(I64, width)),
                                  columns, ir.Constant(I64, width)),
                         ir.Constant(I64, lanes(dtype)))
        b.call(transpose, [source, row, packed, depth, vectors])
        return packed, ir.Constant(I64, width)
    return pack


def _define_pack(module, product_name, dtype, width):
    """``void <product>.pack(source, row, out, depth, vectors)``: ``out[j * width + i] =
    source[i * row + j]`` for ``j < depth`` and ``i`` below ``vectors`` vectors' lanes:
    ``L`` rows of ``source`` at a time (``L`` lanes), transposed in registers
    ``L`` x ``L`` (``_transposed``), the depth that is not a whole number of vectors
    element by element."""
    real = mem_type(dtype)
    vec = ir.VectorType(real, lanes(dtype))
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [real.as_pointer(), I64,
                                                             real.as_pointer(), I64, I64]),
                     name=f"{product_name}.pack")
    fn.linkage = "internal"
    source, row, out, depth, vectors = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    count, align = vec.count, np.dtype(dtype).itemsize
    whole = b.sub(depth, b.srem(depth, ir.Constant(I64, count)))

    def group(g):
        first = b.mul(g, ir.Constant(I64, count))
        rows = [b.gep(source, [b.mul(b.add(first, ir.Constant(I64, i)), row)])
                for i in range(count)]

        def square(j):
            loaded = [b.load(b.bitcast(b.gep(r, [j]), vec.as_pointer()), align=align)
                      for r in rows]
            for i, value in enumerate(_transposed(b, loaded)):
                at = b.gep(out, [b.add(b.mul(b.add(j, ir.Constant(I64, i)),
                                             ir.Constant(I64, width)), first)])
                b.store(value, b.bitcast(at, vec.as_pointer()), align=align)

        def element(j):
            for i, r in enumerate(rows):
                at = b.gep(out, [b.add(b.mul(j, ir.Constant(I64, width)),
                                       b.add(first, ir.Constant(I64, i)))])
                b.store(b.load(b.gep(r, [j])), at)
        _loop(b, ir.Constant(I64, 0), whole, square, "square", count)
        _loop(b, whole, depth, element, "element", 1)
    _loop(b, ir.Constant(I64, 0), vectors, group, "group", 1)
    b.ret_void()
    return fn


def _transposed(b, rows):
    """The columns of the square of vectors ``rows`` (as many as their lanes): for each
    bit of an index, rows that differ in it swap the lanes that differ in it (log2 of the
    lanes rounds of shuffles)."""
    count = len(rows)
    bit = 1
    while bit < count:
        swapped = list(rows)
        for i in range(count):
            if i & bit:
                continue
            low, high = rows[i], rows[i | bit]
            swapped[i] = b.shuffle_vector(low, high, ir.Constant(
                ir.VectorType(I32, count),
                [j if not j & bit else count + (j ^ bit) for j in range(count)]))
            swapped[i | bit] = b.shuffle_vector(low, high, ir.Constant(
                ir.VectorType(I32, count),
                [j ^ bit if not j & bit else count + j for j in range(count)]))
        rows, bit = swapped, bit * 2
    return rows


def _loop(b, lo, hi, emit, name, step):
    """``for_loop``, neither unrolled nor vectorised (its body calls a tile)."""
    back = for_loop(b, lo, hi, emit, name, step)
    back.set_metadata("llvm.loop", codegen.loop_hints(b.module, unroll=False, vectorise=False))


@library.maker("nbjax_tile_")
def _define_tile(module, function_name):
    """``void nbjax_tile_<dtype>_<rows>x<vectors>(A*, B*, C*, k, c_row, a_row, a_col,
    b_row, accumulate)``: a tile of ``rows`` x ``vectors`` vectors of ``C``, its accumulators in
    registers through the ``k`` loop (see the module docstring), stored into ``C`` or,
    when ``accumulate`` is not 0, added to it. ``A``'s element (r, j) is at
    ``r * a_row + j * a_col``; ``B``'s rows are ``b_row`` apart, ``C``'s ``c_row``."""
    dtype, shape = _parse(function_name, "nbjax_tile_")
    rows, vectors = map(int, shape.split("x"))
    vec, b, (a, bm, c, k, c_row, a_row, a_col, b_row, accumulate) = _tile_function(
        module, function_name, dtype)
    width, align = vec.count, dtype.itemsize
    splat_mask = ir.Constant(ir.VectorType(I32, width), [0] * width)

    def step(j, sums):
        row = b.gep(bm, [b.mul(j, b_row)])
        bs = [b.load(b.bitcast(b.gep(row, [ir.Constant(I64, v * width)]), vec.as_pointer()),
                     align=align) for v in range(vectors)]
        column, updated = b.mul(j, a_col), []
        for r in range(rows):
            x = b.load(b.gep(a, [b.add(b.mul(ir.Constant(I64, r), a_row), column)]))
            splat = b.shuffle_vector(b.insert_element(ir.Constant(vec, ir.Undefined), x,
                                                      ir.Constant(I32, 0)),
                                     ir.Constant(vec, ir.Undefined), splat_mask)
            updated += [b.call(_fma(module, vec), [splat, bs[v], sums[r * vectors + v]])
                        for v in range(vectors)]
        return updated
    sums = _k_loop(b, k, ir.Constant(I64, 1), rows * vectors, vec, step)
    stores = []
    for r in range(rows):
        row = b.gep(c, [b.mul(ir.Constant(I64, r), c_row)])
        stores += [(sums[r * vectors + v], b.bitcast(b.gep(row, [ir.Constant(I64, v * width)]),
                                                      vec.as_pointer()))
                   for v in range(vectors)]
    _store(b, stores, accumulate, align)
    b.ret_void()


@library.maker("nbjax_dot_tile_")
def _define_dot_tile(module, function_name):
    """``void nbjax_dot_tile_<dtype>_<rows>x<columns>(A*, B*, C*, k, c_row, a_row, a_col,
    b_row, accumulate)``: the ``rows`` x ``columns`` elements of ``C = A @ B.T`` at ``C``
    (or added to them), each the dot product of a row of ``A`` (``a_row`` apart) with a
    row of ``B`` (``b_row`` apart), summed in vectors along ``k`` (a whole number of them),
    then across their lanes; ``C``'s rows are ``c_row`` apart."""
    dtype, shape = _parse(function_name, "nbjax_dot_tile_")
    rows, columns = map(int, shape.split("x"))
    vec, b, (a, bm, c, k, c_row, a_row, _, b_row, accumulate) = _tile_function(
        module, function_name, dtype)
    align = dtype.itemsize

    def load(base, stride, index, j):
        at = b.gep(base, [b.add(b.mul(ir.Constant(I64, index), stride), j)])
        return b.load(b.bitcast(at, vec.as_pointer()), align=align)

    def step(j, sums):
        xs = [load(a, a_row, r, j) for r in range(rows)]
        ys = [load(bm, b_row, col, j) for col in range(columns)]
        return [b.call(_fma(module, vec), [xs[r], ys[col], sums[r * columns + col]])
                for r in range(rows) for col in range(columns)]
    sums = _k_loop(b, k, ir.Constant(I64, vec.count), rows * columns, vec, step)
    add = _lane_sum(module, vec)
    stores = [(b.call(add, [ir.Constant(vec.element, -0.0), sums[r * columns + col]],
                      fastmath=("reassoc",)),
               b.gep(c, [b.add(b.mul(ir.Constant(I64, r), c_row), ir.Constant(I64, col))]))
              for r in range(rows) for col in range(columns)]
    _store(b, stores, accumulate, align)
    b.ret_void()


def _store(b, stores, accumulate, align):
    """Store each ``(value, address)`` of ``stores``, or, when ``accumulate`` (an ``i64``)
    is not 0, add it to the value there: the tile's part of a product added into its
    output (``blas.gemm``'s ``accumulate``), once its sums over ``k`` are complete."""
    adding = b.icmp_unsigned("!=", accumulate, ir.Constant(I64, 0))
    with b.if_else(adding) as (then, otherwise):
        with then:
            for value, at in stores:
                b.store(b.fadd(b.load(at, align=align), value), at, align=align)
        with otherwise:
            for value, at in stores:
                b.store(value, at, align=align)


def _tile_function(module, function_name, dtype):
    """(the vector type, a builder at its entry, its arguments) of a new tile function."""
    vec = ir.VectorType(mem_type(dtype), lanes(dtype))
    fn = ir.Function(module, _tile_type(dtype), function_name)
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    return vec, ir.IRBuilder(fn.append_basic_block("entry")), fn.args


def _k_loop(b, k, step, count, vec, update):
    """The ``k`` loop of a tile, ``j = 0, step, ...`` while ``j < k``, with ``count`` vector
    accumulators starting at zero; ``update(j, sums)`` gives their values after a step.
    Returns their values after the loop (zero when ``k`` is)."""
    fn = b.function
    entry, loop, done = b.block, fn.append_basic_block("k"), fn.append_basic_block("k.done")
    zero = ir.Constant(vec, [0.0] * vec.count)
    b.cbranch(b.icmp_signed(">", k, ir.Constant(I64, 0)), loop, done)
    b.position_at_end(loop)
    j = b.phi(I64, "j")
    j.add_incoming(ir.Constant(I64, 0), entry)
    sums = [b.phi(vec) for _ in range(count)]
    updated = update(j, sums)
    following = b.add(j, step)
    j.add_incoming(following, b.block)
    for phi, value in zip(sums, updated):
        phi.add_incoming(zero, entry)
        phi.add_incoming(value, b.block)
    back = b.cbranch(b.icmp_signed("<", following, k), loop, done)
    back.set_metadata("llvm.loop", codegen.loop_hints(b.module, unroll=False, vectorise=False))
    b.position_at_end(done)
    results = []
    for value in updated:
        phi = b.phi(vec)
        phi.add_incoming(zero, entry)
        phi.add_incoming(value, loop)
        results.append(phi)
    return results


def _fma(module, vec):
    kind = "f32" if vec.element == ir.FloatType() else "f64"
    name = f"llvm.fma.v{vec.count}{kind}"
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(vec, [vec] * 3), name)


def _lane_sum(module, vec):
    """``llvm.vector.reduce.fadd``: a start value plus a vector's lanes (in a tree, with
    the ``reassoc`` flag the calls carry)."""
    kind = "f32" if vec.element == ir.FloatType() else "f64"
    name = f"llvm.vector.reduce.fadd.v{vec.count}{kind}"
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(
        module, ir.FunctionType(vec.element, [vec.element, vec]), name)

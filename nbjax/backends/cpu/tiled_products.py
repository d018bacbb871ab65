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
- The tiles and the loop over them are library functions (``library``), compiled once
  per process for each dtype and tile shape and shared by every program: a program's
  product fills an array of arguments (``ARGS``: buffers, shapes, tile functions) and
  calls the loop, ``(args, start, stop)`` over the columns' tiles, the worker pool's chunk
  signature (``workers``). From ``SPLIT_WORK`` multiply-adds the tiles are shared out
  between the cores; below, the calling thread runs them all. LLVM compiles them by its
  light tier: their loops are written as vector code already, and O3 made the same
  instructions in twice the time.

Each element is a sum over ``k`` in order, with one rounding per step: the values differ
from BLAS's, whose blocking sums in another order, by rounding only.
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


# The product's array of arguments, ``args`` of the loop over the tiles: pointers, the
# tile functions of each part of ``C`` (null where the part is empty), then integers.
ARGS = ("a", "b", "c", "full", "rows_rest", "columns_rest", "corner",
        "m", "k", "n", "a_row", "a_col")
_SLOT = {name: i for i, name in enumerate(ARGS)}


def emit(b, setup, lhs, rhs, out, product):
    """Emit the products of ``product`` = (batch, m, k, n, a_last, dtype) from the
    buffers ``lhs``, ``rhs`` into ``out`` (``i8*``); ``setup`` builds in the entry block.
    ``a_last``: the left operand is a row-major ``m x k`` matrix (else ``k x m``)."""
    batch, m, k, n, a_last, dtype = product
    size = np.dtype(dtype).itemsize
    loop = library.declare(b.module, library.name(f"nbjax_tiled_product_{np.dtype(dtype).name}"),
                           workers.CHUNK)
    values = {**_tiles(b.module, m, n, dtype), "m": m, "k": k, "n": n,
              **dict(zip(("a_row", "a_col"), (k, 1) if a_last else (1, m)))}
    args = setup.alloca(ir.ArrayType(I8P, len(ARGS)))
    pooled = m * n * k >= SPLIT_WORK and runtime.THREADS > 1 and workers.supported()

    def store(slot, value):
        b.store(value, b.gep(args, [ir.Constant(I32, 0), ir.Constant(I32, _SLOT[slot])]))

    def one(i):
        for slot, (buf, elements) in zip("abc", ((lhs, m * k), (rhs, k * n), (out, m * n))):
            store(slot, b.gep(buf, [b.mul(i, ir.Constant(I64, elements * size))]))
        for slot, value in values.items():
            store(slot, b.inttoptr(ir.Constant(I64, value), I8P) if isinstance(value, int)
                  else b.bitcast(value, I8P) if value is not None else ir.Constant(I8P, None))
        array = b.bitcast(args, I8P.as_pointer())
        if pooled:
            pool = workers.declare_parallel_for(b.module)
            b.call(pool, [loop, array, ir.Constant(I64, _tile_count(n, dtype))])
        else:
            b.call(loop, [array, ir.Constant(I64, 0), ir.Constant(I64, _tile_count(n, dtype))])
    if batch == 1:
        one(ir.Constant(I64, 0))
    else:
        for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, batch), one, "batch")


def _tiles(module, m, n, dtype):
    """{part of ``C``: its tile function declared in ``module``, None if it is empty}: the
    whole tiles, those of the rows left below them, of the columns left to their right,
    and the corner where both are left."""
    rows, vectors = tile_shape()
    whole, rows_left = m - m % rows, m % rows
    full, rest = divmod(n, vectors * lanes(dtype))
    rest //= lanes(dtype)
    shapes = {"full": (whole and full and rows, vectors),
              "rows_rest": (full and rows_left, vectors),
              "columns_rest": (whole and rows, rest), "corner": (rows_left, rest)}
    return {part: library.declare(module, _tile_name(dtype, h, v), _tile_type(dtype))
            if h and v else None for part, (h, v) in shapes.items()}


def _tile_count(n, dtype):
    _, vectors = tile_shape()
    return math.ceil(n / (vectors * lanes(dtype)))


def _tile_name(dtype, rows, vectors):
    return library.name(f"nbjax_tile_{np.dtype(dtype).name}_{rows}x{vectors}")


def _tile_type(dtype):
    """``void (A*, B*, C*, k, n, a_row, a_col)``: see ``_define_tile``."""
    real = mem_type(dtype).as_pointer()
    return ir.FunctionType(ir.VoidType(), [real] * 3 + [I64] * 4)


def _parse(function_name, prefix):
    """The dtype and the rest of a library function's name, its CPU left out."""
    dtype, _, rest = function_name.split(".")[0].removeprefix(prefix).partition("_")
    return np.dtype(dtype), rest


@library.maker("nbjax_tiled_product_")
def _define_product(module, function_name):
    """``void nbjax_tiled_product_<dtype>(i8** args, i64 start, i64 stop)``: the column
    tiles ``[start, stop)`` of ``C = A @ B``, the worker pool's chunk signature; ``args``
    (``ARGS``) holds the buffers, the tile functions and the shapes."""
    dtype, _ = _parse(function_name, "nbjax_tiled_product_")
    fn = ir.Function(module, workers.CHUNK, name=function_name)
    args, start, stop = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    arg = {name: b.load(b.gep(args, [ir.Constant(I64, i)])) for i, name in enumerate(ARGS)}
    real, tile = mem_type(dtype).as_pointer(), _tile_type(dtype).as_pointer()
    a, bm, c = (b.bitcast(arg[name], real) for name in "abc")
    m, k, n, a_row, a_col = (b.ptrtoint(arg[name], I64) for name in ARGS[7:])
    rows, vectors = tile_shape()
    width = ir.Constant(I64, vectors * lanes(dtype))
    whole = b.sub(m, b.srem(m, ir.Constant(I64, rows)))

    def column_tile(t, main, below):
        n0 = b.mul(t, width)

        def row_block(m0, part):
            b.call(b.bitcast(arg[part], tile),
                   [b.gep(a, [b.mul(m0, a_row)]), b.gep(bm, [n0]),
                    b.gep(c, [b.add(n0, b.mul(m0, n))]), k, n, a_row, a_col])
        back = for_loop(b, ir.Constant(I64, 0), whole, lambda m0: row_block(m0, main), "rows",
                        step=rows)
        back.set_metadata("llvm.loop", codegen.loop_hints(module, unroll=False,
                                                          vectorise=False))
        with b.if_then(b.icmp_signed("<", whole, m)):
            row_block(whole, below)
    full = b.sdiv(n, width)
    last = b.select(b.icmp_signed("<", stop, full), stop, full)
    back = for_loop(b, start, last, lambda t: column_tile(t, "full", "rows_rest"), "tile")
    back.set_metadata("llvm.loop", codegen.loop_hints(module, unroll=False, vectorise=False))
    with b.if_then(b.icmp_signed(">", stop, full)):
        column_tile(full, "columns_rest", "corner")
    b.ret_void()


@library.maker("nbjax_tile_")
def _define_tile(module, function_name):
    """``void nbjax_tile_<dtype>_<rows>x<vectors>(A*, B*, C*, k, n, a_row, a_col)``: a tile
    of ``rows`` x ``vectors`` vectors of ``C``, its accumulators in registers through the
    ``k`` loop (see the module docstring). ``A``'s element (r, j) is at
    ``r * a_row + j * a_col``; ``B``'s and ``C``'s rows are ``n`` apart."""
    dtype, shape = _parse(function_name, "nbjax_tile_")
    rows, vectors = map(int, shape.split("x"))
    width = lanes(dtype)
    vec = ir.VectorType(mem_type(dtype), width)
    fn = ir.Function(module, _tile_type(dtype), function_name)
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    a, bm, c, k, n, a_row, a_col = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    sums = _accumulate(b, fn, (a, bm, k, n, a_row, a_col), rows, vectors, vec)
    for r in range(rows):
        row = b.gep(c, [b.mul(ir.Constant(I64, r), n)])
        for j in range(vectors):
            at = b.gep(row, [ir.Constant(I64, j * width)])
            b.store(sums[r][j], b.bitcast(at, vec.as_pointer()), align=dtype.itemsize)
    b.ret_void()


def _accumulate(b, fn, operands, rows, vectors, vec):
    """The ``k`` loop of a tile: its accumulators' values after it (zero when ``k`` is)."""
    a, bm, k, n, a_row, a_col = operands
    width, align = vec.count, 4 if vec.element == ir.FloatType() else 8
    fma = _fma(b.module, vec)
    entry, loop, done = b.block, fn.append_basic_block("k"), fn.append_basic_block("k.done")
    zero = ir.Constant(vec, [0.0] * width)
    b.cbranch(b.icmp_signed(">", k, ir.Constant(I64, 0)), loop, done)
    b.position_at_end(loop)
    j = b.phi(I64, "j")
    j.add_incoming(ir.Constant(I64, 0), entry)
    sums = [[b.phi(vec) for _ in range(vectors)] for _ in range(rows)]
    row = b.gep(bm, [b.mul(j, n)])
    bs = [b.load(b.bitcast(b.gep(row, [ir.Constant(I64, v * width)]), vec.as_pointer()),
                 align=align) for v in range(vectors)]
    lane0 = ir.Constant(I32, 0)
    mask = ir.Constant(ir.VectorType(I32, width), [0] * width)
    column = b.mul(j, a_col)
    updated = []
    for r in range(rows):
        x = b.load(b.gep(a, [b.add(b.mul(ir.Constant(I64, r), a_row), column)]))
        splat = b.shuffle_vector(b.insert_element(ir.Constant(vec, ir.Undefined), x, lane0),
                                 ir.Constant(vec, ir.Undefined), mask)
        updated.append([b.call(fma, [splat, bs[v], sums[r][v]]) for v in range(vectors)])
    following = b.add(j, ir.Constant(I64, 1))
    j.add_incoming(following, b.block)
    for r in range(rows):
        for v in range(vectors):
            sums[r][v].add_incoming(zero, entry)
            sums[r][v].add_incoming(updated[r][v], b.block)
    back = b.cbranch(b.icmp_signed("<", following, k), loop, done)
    back.set_metadata("llvm.loop", codegen.loop_hints(b.module, unroll=False, vectorise=False))
    b.position_at_end(done)
    results = []
    for r in range(rows):
        results.append([])
        for v in range(vectors):
            phi = b.phi(vec)
            phi.add_incoming(zero, entry)
            phi.add_incoming(updated[r][v], loop)
            results[r].append(phi)
    return results
def _fma(module, vec):
    kind = "f32" if vec.element == ir.FloatType() else "f64"
    name = f"llvm.fma.v{vec.count}{kind}"
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(vec, [vec] * 3), name)

"""Matrix products compiled into register tiles (``backends/cpu/tiled_products``), against
the reference backend: shapes around the register tile's, transposed left operands,
batches, float32 and float64, in loops and alone, on one core and on the pool; which
products take the tiles and which BLAS (programs kept off BLAS, the measured choice)."""

import re

import numpy as np
from llvmlite import binding as llvm
import pytest

import nbjax.numpy as jnp
from nbjax import lax
import nbjax.backends.cpu as nbjax_cpu
from nbjax.backends.cpu import (executable, library, runtime, tile_choice, tiled_products,
                                workers)
from helpers import assert_close, cpu_and_reference

RNG = np.random.default_rng(11)


def _in_loop(h, w):
    """Three steps of ``h <- tanh(h @ w)``-like updates (``h`` keeps its shape when ``w``
    is square; else one product)."""
    if w.shape[0] != w.shape[1]:
        return lax.fori_loop(0, 2, lambda i, acc: acc + h @ w, jnp.zeros((h.shape[0],
                                                                          w.shape[1]),
                                                                         h.dtype))
    return lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w), h)


def _check(fn, *args, dtype=np.float32):
    cpu, ref = cpu_and_reference(fn, *args)
    got, want = cpu.run(*args)[0], ref.run(*args)[0]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert_close(got, want, rtol=rtol, scale=float(np.abs(want).max(initial=0.0)) + 1.0)
    return cpu


def _uses_tiles(cpu):
    return "tiled_product" in cpu.jit_module.optimised_ir


@pytest.mark.parametrize("m", [2, 5, 6, 7, 13, 64])
@pytest.mark.parametrize("k, n", [(1, 16), (3, 48), (37, 80), (64, 64), (256, 128)])
def test_products_of_few_rows_in_loops_match(m, k, n):
    h = RNG.standard_normal((m, k)).astype(np.float32)
    w = (RNG.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    cpu = _check(_in_loop, h, w)
    assert _uses_tiles(cpu)


def test_the_fusion_report_says_which_products_are_tiled():
    h, w = np.ones((32, 64), np.float32), np.ones((64, 128), np.float32)
    cpu = _check(lambda h, w: (h @ w) * 2.0, h, w)
    reasons = [d.reason for d in cpu.plan.decisions]
    assert any("dot_general is a register-tiled loop in native code (32 rows, 64 "
               "contracted" in r for r in reasons)
    deep = tiled_products.DEPTH_MAX + 1
    cpu = _check(_beside_blas(lambda h, w: (h @ w) * 2.0), np.ones((65, deep), np.float32),
                 np.ones((deep, 128), np.float32))
    assert any("dot_general is a BLAS call" in d.reason for d in cpu.plan.decisions)


_ODD = RNG.standard_normal((16, tiled_products.lanes(np.float32) + 1)).astype(np.float32)


def _beside_blas(fn):
    """``fn`` in a program that calls BLAS anyway: beside a product of columns that are not
    whole vectors (``fn``'s first operand has 16 columns at least)."""
    return lambda x, w: (fn(x, w), x[:, :16] @ _ODD)


def test_the_tiles_compute_large_products():
    """The tiles compute large products too (many rows, a long contraction; dot products
    of a few vectors, as an attention's heads), in a program with linear algebra as in any
    other. The values are the reference's."""
    deep = tiled_products.DEPTH_MAX + 3 * tiled_products.lanes(np.float32)
    x = RNG.standard_normal((tiled_products.ROWS_MAX + 13, deep)).astype(np.float32)
    columns = tiled_products.LARGE_DOT_DEPTH_MIN * tiled_products.lanes(np.float32)
    w = (RNG.standard_normal((deep, columns)) / np.sqrt(deep)).astype(np.float32)
    spd = np.eye(columns, dtype=np.float32) * deep

    def with_cholesky(x, w):
        return x @ w, jnp.linalg.cholesky(w.T @ w + spd)
    for program in (lambda x, w: jnp.tanh(x @ w) @ w.T, with_cholesky):
        cpu = _check(program, x, w)
        assert "tiled_product" in cpu.jit_module.optimised_ir
        reasons = [d.reason for d in cpu.plan.decisions]
        assert any(f"register-tiled loop in native code ({x.shape[0]} rows, {deep} "
                   "contracted" in r for r in reasons), reasons
    heads = RNG.standard_normal((2, 80, 4, 4 * tiled_products.lanes(np.float32)))
    q = heads.astype(np.float32)
    cpu = _check(lambda q, k: jnp.einsum("bshd,bthd->bhst", q, k) * 0.5, q, q[:, ::-1] + 1)
    assert "gemm" not in cpu.jit_module.optimised_ir
    if tiled_products.matrices_on_cores(8, 80, q.shape[-1], 80):
        assert any("its 8 matrices shared out between the cores" in d.reason
                   for d in cpu.plan.decisions)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_square_recurrence_in_both_dtypes(x64, dtype):
    h = RNG.standard_normal((9, 96)).astype(dtype)
    w = (RNG.standard_normal((96, 96)) / 10).astype(dtype)
    assert _uses_tiles(_check(_in_loop, h, w, dtype=dtype))


def test_transposed_left_operands_and_batches():
    x = RNG.standard_normal((40, 6)).astype(np.float32)      # x.T @ w: 6 x 40 by 40 x 32
    w = RNG.standard_normal((40, 32)).astype(np.float32)
    assert _uses_tiles(_check(lambda x, w: x.T @ w * 2.0, x, w))
    a = RNG.standard_normal((3, 5, 24)).astype(np.float32)
    b = RNG.standard_normal((3, 24, 48)).astype(np.float32)
    assert _uses_tiles(_check(lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b) + 1.0, a, b))


def test_many_rows_by_a_short_contraction_are_tiled():
    """An RNN's inputs by its input weights, hoisted out of the loop: any number of rows
    when the contraction is at most ``DEPTH_MAX`` long (rows not a multiple of the tile's
    too)."""
    x = RNG.standard_normal((301, tiled_products.DEPTH_MAX)).astype(np.float32)
    w = RNG.standard_normal((tiled_products.DEPTH_MAX, 48)).astype(np.float32)
    assert _uses_tiles(_check(lambda x, w: (x @ w) + 1.0, x, w))
    xt = x[:, :40].T.copy()  # (a transposed left operand: as many rows as a large product)
    contract_first = (((0,), (0,)), ((), ()))
    assert _uses_tiles(_check(_beside_blas(
        lambda x, w: lax.dot_general(x, w, contract_first) + 1.0), xt, w[:40]))


def _by_transpose(h, w):
    """Two steps adding ``h @ w.T`` (the right operand ``n x k``: dot-product tiles)."""
    return lax.fori_loop(0, 2, lambda i, acc: acc + h @ w.T,
                         jnp.zeros((h.shape[0], w.shape[0]), h.dtype))


@pytest.mark.parametrize("m", [2, 3, 4, 5, 13, 64])
@pytest.mark.parametrize("k, n", [(256, 1), (272, 3), (256, 4), (512, 9), (1024, 64)])
def test_products_by_a_transposed_right_operand_are_dot_tiles(m, k, n):
    h = RNG.standard_normal((m, k)).astype(np.float32)
    w = (RNG.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    assert _uses_tiles(_check(_by_transpose, h, w))
    assert _uses_tiles(_check(lambda h, w: jnp.tanh(h @ w.T), h, w))


def test_dot_tiles_in_float64_and_with_special_values(x64):
    h = RNG.standard_normal((6, 8 * tiled_products.DOT_DEPTH_MIN)).astype(np.float64)
    w = RNG.standard_normal((5, h.shape[1])).astype(np.float64)
    assert _uses_tiles(_check(_by_transpose, h, w, dtype=np.float64))
    h = RNG.standard_normal((6, 16 * tiled_products.DOT_DEPTH_MIN)).astype(np.float32)
    w = RNG.standard_normal((5, h.shape[1])).astype(np.float32)
    h[0, 2], h[1, 5], h[2, :] = np.nan, np.inf, -0.0
    cpu, ref = cpu_and_reference(lambda h, w: (h @ w.T) * 1.0, h, w)
    got, want = cpu.run(h, w)[0], ref.run(h, w)[0]
    assert _uses_tiles(cpu)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[1:3], want[1:3])  # +-inf, and zeros
    np.testing.assert_array_equal(np.signbit(got[2]), np.signbit(want[2]))
    assert_close(got[3:], want[3:], rtol=1e-5, scale=float(np.abs(want[3:]).max()) + 1.0)


def test_an_empty_contraction_gives_zeros():
    h, w = np.ones((4, 0), np.float32), np.ones((0, 32), np.float32)
    cpu = _check(lambda h, w: (h @ w) + 1.0, h, w)
    np.testing.assert_array_equal(cpu.run(h, w)[0], np.ones((4, 32), np.float32))


@pytest.mark.parametrize("k", [0, 5, 16, 37, 100])
@pytest.mark.parametrize("fn", [_in_loop, lambda h, w: (h @ w) * 2.0])
def test_long_contractions_are_summed_in_blocks(monkeypatch, k, fn):
    # Blocks of 16 along k: none, part of one, exactly one, several with a part left; each
    # block's sums added into C (the loop's product adds into its carry as well).
    monkeypatch.setattr(tiled_products, "DEPTH_BLOCK", 16)
    h = RNG.standard_normal((13, k)).astype(np.float32)
    w = RNG.standard_normal((k, 48)).astype(np.float32)
    assert _uses_tiles(_check(fn, h, w))


def test_special_values_propagate():
    h = RNG.standard_normal((3, 8)).astype(np.float32)
    h[0, 2], h[1, 5], h[2, 0] = np.nan, np.inf, -0.0
    w = RNG.standard_normal((8, 16)).astype(np.float32)
    _check(lambda h, w: (h @ w) * 1.0, h, w)


def test_other_products_call_blas():
    """One row, a transposed right operand of a short contraction, columns that are not
    whole vectors: BLAS's ``gemm``."""
    deep = tiled_products.DEPTH_MAX + 1
    many = RNG.standard_normal((tiled_products.ROWS_MAX + 1, deep)).astype(np.float32)
    w = RNG.standard_normal((deep, 32)).astype(np.float32)
    assert not _uses_tiles(_check(lambda x, w: (x @ w) + 1.0, many[:1], w))
    w = w[:16]
    few = RNG.standard_normal((4, 16)).astype(np.float32)
    contract_last = (((1,), (1,)), ((), ()))          # x @ v.T, v of 32 rows of 16
    assert not _uses_tiles(_check(lambda x, v: lax.dot_general(x, v, contract_last) + 1.0,
                                  few, w.T.copy()))
    assert not _uses_tiles(_check(lambda x, w: (x @ w) + 1.0, few, _ODD))


@pytest.mark.skipif(not workers.supported() or runtime.THREADS < 2,
                    reason="the worker pool needs Linux and two cores")
def test_large_products_share_their_tiles_on_the_pool(monkeypatch):
    """Each element is summed in the same order whichever thread computes its tile: the
    values on the pool are those on one thread, bit for bit."""
    h = RNG.standard_normal((13, 64)).astype(np.float32)
    w = (RNG.standard_normal((64, 400)) / 8).astype(np.float32)[:, :400 // 16 * 16]
    monkeypatch.setattr(tiled_products, "SPLIT_WORK", 1)
    pooled = _check(_in_loop, h, w)
    assert workers.PARALLEL_FOR in pooled.jit_module.optimised_ir
    monkeypatch.setattr(tiled_products, "SPLIT_WORK", 1 << 62)
    alone, _ = cpu_and_reference(_in_loop, h, w)
    np.testing.assert_array_equal(pooled.run(h, w)[0], alone.run(h, w)[0])


def test_a_lone_product_too_large_to_repay_a_native_program_calls_numpy(monkeypatch, tmp_path):
    """A program of one product whose native call would not repay its compile
    (``executable.SMALL_LIBRARY_STEP``), and that the tiles cannot compute (its columns
    not a whole number of vectors), runs NumPy's matmul, as the report says; one the tiles
    compute is a native program."""
    monkeypatch.setattr(executable, "SMALL_LIBRARY_STEP", 0)
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path))
    x = RNG.standard_normal((tiled_products.ROWS_MAX + 16, 64)).astype(np.float32)
    w = RNG.standard_normal((64, 81)).astype(np.float32)
    cpu = _check(lambda x, w: x @ w, x, w)
    assert cpu.jit_module is None
    assert [d.reason for d in cpu.plan.decisions] == [
        f"dot_general {nbjax_cpu.LONE_PRODUCT}: library step"]
    assert _uses_tiles(_check(lambda x, w: x @ w, x, w[:, :80]))


def _packed(cpu):
    return "tiled_product_float32_packed" in cpu.jit_module.optimised_ir or \
        "tiled_product_float64_packed" in cpu.jit_module.optimised_ir


@pytest.mark.parametrize("m, k, n", [
    (tiled_products.PACKED_ROWS_MIN, 37, 64),    # one column tile, depth not whole vectors
    (tiled_products.PACKED_ROWS_MIN + 3, 100, 48),   # rows left below, columns left
    (200, 513, 80),                              # blocks of 16 along k (below), a part left
    (130, 16, 144),
])
def test_x_by_w_transposed_of_many_rows_transposes_blocks_of_w_for_the_row_tiles(
        monkeypatch, m, k, n):
    """``x @ w.T`` of ``PACKED_ROWS_MIN`` rows or more, alone in its program (or in one kept
    off BLAS), is computed by the tiles of ``x @ w`` on each block of ``w`` transposed:
    blocks of 16 along ``k`` exercise the depth left after whole blocks and vectors."""
    monkeypatch.setattr(tiled_products, "DEPTH_BLOCK", 16 if k > 500 else 512)
    x = RNG.standard_normal((m, k)).astype(np.float32)
    w = (RNG.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    assert _packed(_check(lambda x, w: x @ w.T, x, w))
    assert _packed(_check(lambda x, w: jnp.tanh(x[:, ::-1] @ w.T) * 2.0, x, w))  # strides
    x[0, 1], x[1, 2], w[2, k - 1] = np.nan, np.inf, -np.inf
    cpu, ref = cpu_and_reference(lambda x, w: x @ w.T, x, w)
    got, want = cpu.run(x, w)[0], ref.run(x, w)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


def test_packed_products_in_float64_and_in_stacks(x64):
    x = RNG.standard_normal((3, tiled_products.PACKED_ROWS_MIN, 40)).astype(np.float64)
    w = RNG.standard_normal((3, 24, 40)).astype(np.float64)
    cpu = _check(lambda x, w: jnp.einsum("bmk,bnk->bmn", x, w) + 1.0, x, w, dtype=np.float64)
    assert _packed(cpu)


@pytest.mark.skipif(not workers.supported() or runtime.THREADS < 2,
                    reason="the worker pool needs Linux and two cores")
def test_stacks_of_products_share_their_matrices_between_the_cores(monkeypatch):
    """A stack of products, two matrices a core at least (an odd number of them here), is
    shared out by whole matrices: the values are those of one thread, bit for bit."""
    count = 2 * runtime.THREADS + 1
    a = RNG.standard_normal((count, 20, 32)).astype(np.float32)
    b = RNG.standard_normal((count, 32, 48)).astype(np.float32)

    def products(a, b):
        return jnp.einsum("bmk,bkn->bmn", a, b) + 1.0
    monkeypatch.setattr(tiled_products, "SPLIT_WORK", 1)
    shared = _check(products, a, b)
    assert any(f"its {count} matrices shared out between the cores" in d.reason
               for d in shared.plan.decisions)
    monkeypatch.setattr(tiled_products, "SPLIT_WORK", 1 << 62)
    alone, _ = cpu_and_reference(products, a, b)
    assert not any("shared out" in d.reason for d in alone.plan.decisions)
    np.testing.assert_array_equal(shared.run(a, b)[0], alone.run(a, b)[0])


def test_tiles_are_library_functions_made_once_per_process():
    """Two programs whose products share tile shapes: the second makes no library function,
    and neither defines a tile itself (each declares the library's)."""
    h = RNG.standard_normal((13, 64)).astype(np.float32)
    first = _check(_in_loop, h, (RNG.standard_normal((64, 64)) / 8).astype(np.float32))
    made = set(library._modules)
    second = _check(lambda h, w: jnp.tanh(h @ w), h[:, :48],
                    RNG.standard_normal((48, 64)).astype(np.float32))
    assert set(library._modules) == made
    for cpu in (first, second):
        code = cpu.jit_module.optimised_ir
        assert "declare void @nbjax_tiled_product_float32" in code
        assert not re.search(r"define .*@\"?nbjax_tile", code)


def test_a_library_function_is_found_in_the_disk_cache_whatever_was_made_with_it(
        monkeypatch, tmp_path):
    """Each library function is a module of its own in the disk cache: a process that
    lacks only one of the functions an earlier process made together loads it from there
    rather than compiling it (a program loaded from the cache asks for all of its
    products' functions at once, which a process that planned them had made apart)."""
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path))
    names = [tiled_products.loop_name(13, 40, True, np.float32),
             *filter(None, tiled_products.tile_names(13, 40, True, np.float32).values())]
    assert len(names) >= 3
    kept = dict(library._modules)
    try:
        monkeypatch.setattr(library, "_modules", {})   # (a new process, as far as they go)
        library.provide(names)
        assert not any(library._modules[n].from_disk_cache for n in names)
        for name in names[::-1]:
            monkeypatch.setattr(library, "_modules", {})
            library.provide([name])
            assert library._modules[name].from_disk_cache
        a, b = (RNG.standard_normal(s).astype(np.float32) for s in [(13, 64), (64, 40)])
        _check(lambda a, b: jnp.tanh(a @ b), a, b)   # (the loaded code computes the product)
    finally:  # the symbols name the code of the modules this process keeps, not of those
        for name, module in kept.items():
            llvm.add_symbol(name, module.code.get_function_address(name))


def test_a_library_function_found_in_the_disk_cache_is_not_made_again(monkeypatch, tmp_path):
    """A library function's entry is named by what makes it (its name, nbjax's source, the
    settings that shape its code, the CPU), so a process that finds it there does not make
    its IR; a setting that shapes the code (how much of ``B`` a packed product transposes
    at a time, on the stack) names another entry. The code loaded computes the product."""
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path))
    name = tiled_products.loop_name(128, 64, False, np.float32)
    assert name.endswith("_packed")
    make, tier, shaped_by = library._maker(name)
    made = []

    def counting(module, function_name):
        made.append(function_name)
        make(module, function_name)
    monkeypatch.setitem(library._makers, "nbjax_tiled_product_", (counting, tier, shaped_by))

    def provided():
        monkeypatch.setattr(library, "_modules", {})   # (a new process, as far as it goes)
        library.provide([name])
        buffer, = re.findall(r"alloca \[(\d+) x float\]", library.function_ir(name))
        return library._modules[name].from_disk_cache, int(buffer)
    kept = dict(library._modules)
    try:
        (first, size), (second, same) = provided(), provided()
        assert (first, second, made, same) == (False, True, [name], size)
        a, b = (RNG.standard_normal(s).astype(np.float32) for s in [(128, 600), (64, 600)])
        assert "packed" in _check(lambda a, b: a @ b.T, a, b).jit_module.optimised_ir
        monkeypatch.setattr(tiled_products, "DEPTH_BLOCK", tiled_products.DEPTH_BLOCK // 2)
        assert provided() == (False, size // 2) and made == [name, name]
    finally:  # the symbols name the code of the modules this process keeps, not of those
        for kept_name, module in kept.items():
            llvm.add_symbol(kept_name, module.code.get_function_address(kept_name))


# --- tiles or BLAS, measured on the machine -----------------------------------------------

def test_the_faster_of_tiles_and_blas_is_chosen(monkeypatch, tmp_path):
    """With ``CHOICE`` "measured", a product that fits is tiled where the tiles ran faster
    than BLAS (its measured times given here), in a loop or not, beside other BLAS calls or
    not; the fusion report says so with the times; either way the values are the
    reference's. (A program in the disk cache keeps the choice it was compiled with: each
    choice compiles into a cache of its own here.)"""
    monkeypatch.setattr(tile_choice, "CHOICE", "measured")
    h = RNG.standard_normal((13, 64)).astype(np.float32)
    w = (RNG.standard_normal((64, 64)) / 8).astype(np.float32)
    key = (13, 64, 64, True, "float32")
    for times, said in [
            ((2e-6, 5e-6), "dot_general is a register-tiled loop in native code (13 rows, 64 "
             "contracted: 2 us against BLAS's 5 us on this machine)"),
            ((5e-6, 2e-6), "dot_general is a BLAS call (faster than register tiles: 5 us "
             "against BLAS's 2 us on this machine)")]:
        monkeypatch.setitem(tile_choice._MEASURED, key, times)
        monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path / f"tiles-{times[0]}"))
        tiles = times[0] <= times[1]
        for program in (_in_loop, _beside_blas(_in_loop)):
            assert _uses_tiles(_check(program, h, w)) == tiles
        cpu = _check(lambda h, w: (h @ w) * 2.0, h, w)
        assert _uses_tiles(cpu) == tiles
        reasons = [d.reason for d in cpu.plan.decisions]
        assert any(said in r for r in reasons), reasons


@pytest.mark.parametrize("b_first", [True, False])
def test_tiles_and_blas_are_timed_on_the_product(b_first):
    """``measured`` times both on this machine (once per process and shape): two
    positive times, the same on asking again, a long contraction included."""
    shape = (8, 16 * tiled_products.lanes(np.float32), 48 if b_first else 40)
    times = tile_choice.measured(*shape, b_first, np.float32)
    assert times is not None and all(0 < t < 0.1 for t in times), times
    assert tile_choice.measured(*shape, b_first, np.float32) is times
    deep = (8, tile_choice.MEASURED_WORK, 64)  # (timed on DEPTH_BLOCK of its contraction)
    times = tile_choice.measured(*deep, b_first, np.float32)
    assert times is not None and all(0 < t < 0.1 for t in times), times

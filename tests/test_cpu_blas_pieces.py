"""Matrix products by BLAS shared out between the worker pool's threads in pieces, each a
block of one matrix's rows or columns computed by one call of the copy of OpenBLAS that
runs on the calling thread (``blas``, ``openblas_copy``): against the reference backend
for every orientation, sizes that are no multiple of a piece, stacks, accumulation,
transposed results, strided operands, dtypes, loops and empty products."""

import ctypes
import os

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import openblas_copy, routines, runtime, tile_choice, workers
from helpers import assert_close, cpu_and_reference

pytestmark = pytest.mark.cpu_compiler
RNG = np.random.default_rng(7)


@pytest.fixture
def blas_in_pieces(monkeypatch, tmp_path):
    """BLAS for every product (``tile_choice.CHOICE`` "never"), in pieces from any work
    (``runtime.BLAS_SPLIT_WORK``), compiled into a disk cache of their own."""
    if runtime.THREADS < 2 or not workers.supported():
        pytest.skip("the worker pool needs Linux and two cores")
    monkeypatch.setattr(tile_choice, "CHOICE", "never")
    monkeypatch.setattr(runtime, "BLAS_SPLIT_WORK", 1)
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path))


def _check(f, *args, rtol=1e-5):
    """The cpu executable of ``f``, its results the reference backend's (the absolute part
    of the tolerance from the products of the operands' magnitudes)."""
    cpu, ref = cpu_and_reference(f, *args)
    scales = ref.run(*(np.abs(a) for a in args))
    for got, want, scale in zip(cpu.run(*args), ref.run(*args), scales):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert_close(got, want, rtol=rtol, scale=np.abs(scale))
    return cpu


def _reasons(cpu):
    return [d.reason for d in cpu.plan.decisions]


def _normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("lhs_contract, rhs_contract", [(1, 0), (0, 0), (1, 1), (0, 1)])
@pytest.mark.parametrize("m, k, n", [(70, 9, 45), (45, 9, 70), (1, 40, 100), (100, 40, 1),
                                     (33, 5, 65), (0, 3, 40), (40, 0, 50)])
def test_every_orientation_in_pieces(blas_in_pieces, lhs_contract, rhs_contract, m, k, n):
    a = _normal(*((m, k) if lhs_contract == 1 else (k, m)))
    b = _normal(*((k, n) if rhs_contract == 0 else (n, k)))
    dims = (((lhs_contract,), (rhs_contract,)), ((), ()))
    cpu = _check(lambda a, b: lax.dot_general(a, b, dims) * 2.0, a, b)
    if m * k * n and max(m, n) > runtime.PIECE_GRAIN:
        axis = "rows" if m >= n else "columns"
        assert any(f"in 2 pieces of {runtime.PIECE_GRAIN * -(-max(m, n) // 64)} {axis}" in r
                   for r in _reasons(cpu)), _reasons(cpu)


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_stacks_strided_heads_and_transposed_results(blas_in_pieces, batch):
    x, y = _normal(batch, 70, 8), _normal(batch, 8, 40)
    cpu = _check(lambda x, y: jnp.einsum("bij,bjk->bik", x, y) + 1.0, x, y)
    if batch > 1:
        assert any(f"its {batch} matrices shared out" in r for r in _reasons(cpu)), \
            _reasons(cpu)
    q, k = _normal(batch, 40, 3, 8), _normal(batch, 36, 3, 8)
    _check(lambda q, k: jnp.einsum("bqhd,bkhd->bhqk", q, k) * 0.5, q, k)
    _check(lambda x, y: jnp.swapaxes(jnp.einsum("bij,bjk->bik", x, y), 1, 2), x, y)


def test_a_sum_into_the_product_and_a_loop(blas_in_pieces):
    """``c + x @ w`` (the product adds into the sum's buffer: BLAS's ``beta = 1``), and
    products in pieces inside a scan's body."""
    x, w, c = _normal(70, 24), _normal(24, 45) / 5, _normal(70, 45)
    _check(lambda x, w, c: c + x @ w, x, w, c)
    h0, wh = _normal(70, 64), _normal(64, 64) / 8

    def rnn(h, w):
        return lax.scan(lambda h, _: (jnp.tanh(h @ w), h[0]), h, None, length=4)
    cpu = _check(rnn, h0, wh)
    assert [g.kind for g in cpu.plan.groups] == ["loop"]


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.complex128])
def test_other_dtypes_in_pieces(blas_in_pieces, x64, dtype):
    def sample(*shape):
        z = _normal(*shape, dtype=np.float64)
        return (z + 1j * _normal(*shape, dtype=np.float64) if np.iscomplexobj(dtype(0))
                else z).astype(dtype)
    a, b = sample(66, 20), sample(20, 50)
    _check(lambda a, b: a @ b, a, b, rtol=1e-5 if dtype == np.complex64 else 1e-12)
    _check(lambda a, b: a[:1] @ b, a, b, rtol=1e-5 if dtype == np.complex64 else 1e-12)


def test_the_copy_of_openblas_runs_on_one_thread_beside_numpys():
    """The products native code shares out call a second instance of NumPy's OpenBLAS,
    on one thread; NumPy's own keeps its threads. Without a disk cache the copy is a
    temporary file, removed once loaded."""
    paths = routines._numpy_openblas_paths()
    if not paths:
        pytest.skip("this NumPy does not ship OpenBLAS")
    count = "scipy_openblas_get_num_threads64_"
    numpy_threads = getattr(ctypes.CDLL(paths[0]), count)
    before = numpy_threads()
    assert routines.address("gemm", np.float32, on_caller=True) != \
        routines.address("gemm", np.float32)
    copy = openblas_copy.load(paths[0], count)
    assert copy is not None and getattr(copy, count)() == 1
    assert numpy_threads() == before


def test_without_a_disk_cache_the_copy_is_temporary(monkeypatch, tmp_path):
    paths = routines._numpy_openblas_paths()
    if not paths:
        pytest.skip("this NumPy does not ship OpenBLAS")
    monkeypatch.setenv("NBJAX_DISABLE_DISK_CACHE", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(openblas_copy.tempfile, "tempdir", None)
    environment = dict(os.environ)
    assert openblas_copy.load(paths[0], "scipy_openblas_get_num_threads64_") is not None
    assert list(tmp_path.iterdir()) == []
    assert dict(os.environ) == environment


def test_results_in_pieces_through_jit(blas_in_pieces):
    x, w = _normal(130, 64), _normal(64, 96)
    got = nbjax.jit(lambda x, w: jnp.tanh(x @ w))(x, w)
    assert_close(np.asarray(got), np.tanh(x.astype(np.float64) @ w), rtol=1e-5, scale=1.0)


def test_without_a_copy_the_pieces_call_numpys_openblas(blas_in_pieces, monkeypatch):
    """Where no copy loads, the routines on the calling thread are the library's own
    (OpenBLAS takes concurrent calls): the same values."""
    monkeypatch.setattr(openblas_copy, "load", lambda path, threads_function: None)
    routines.library.cache_clear()
    try:
        routines.library()
        assert routines.address("gemm", np.float32, on_caller=True) == \
            routines.address("gemm", np.float32)
        x, w = _normal(130, 64), _normal(64, 96)
        cpu = _check(lambda x, w: jnp.tanh(x @ w), x, w)
        assert any("in 2 pieces of" in r for r in _reasons(cpu)), _reasons(cpu)
    finally:
        routines.library.cache_clear()
        routines.library()

"""The special-matrix constructors of nbjax.scipy.linalg and the factorizations built from
others (polar, expm_frechet, qr_multiply, eigh_tridiagonal, solve_sylvester), against
scipy.linalg on random inputs; gradients where JAX's are defined."""

import numpy as np
import pytest
import scipy.linalg as sl

import nbjax
import nbjax.scipy.linalg as L
from nbjax.test_util import check_grads
from helpers import assert_close

rng = np.random.RandomState(0)


def _vec(n):
    return lambda r: (r.randn(n),)


# name -> argument sampler (the same arguments go to nbjax and SciPy).
FROM_ARRAYS = {
    "toeplitz": lambda r: (r.randn(4), r.randn(6)),
    "hankel": lambda r: (r.randn(5), r.randn(3)),
    "circulant": _vec(5),
    "companion": lambda r: (r.randn(5) + 3,),
    "fiedler": _vec(6),
    "leslie": lambda r: (r.uniform(0, 2, 4), r.uniform(0, 1, 3)),
    "block_diag": lambda r: (r.randn(2, 2), r.randn(), r.randn(1, 3), r.randn(3)),
}
FROM_SIZES = ["hilbert", "invhilbert", "pascal", "invpascal", "helmert", "dft", "hadamard"]


@pytest.mark.parametrize("name", sorted(FROM_ARRAYS))
def test_from_arrays(name):
    args = FROM_ARRAYS[name](rng)
    got = getattr(L, name)(*[np.asarray(a, np.float32) for a in args])
    assert got.dtype == np.float32
    assert_close(got, getattr(sl, name)(*args), rtol=1e-6)


def test_one_argument_forms():
    c = rng.randn(4)
    assert_close(L.toeplitz(c), sl.toeplitz(c).astype(np.float32), rtol=1e-6)
    assert_close(L.hankel(c), sl.hankel(c).astype(np.float32), rtol=1e-6)
    z = c + 1j * rng.randn(4)
    assert_close(L.toeplitz(z.astype(np.complex64)), sl.toeplitz(z), rtol=1e-6)  # Hermitian
    assert_close(L.block_diag(), sl.block_diag())


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("m, n", [(4, 2), (4, 4), (3, 6)])
def test_convolution_matrix(mode, m, n):
    a, v = rng.randn(m).astype(np.float32), rng.randn(n).astype(np.float32)
    matrix = L.convolution_matrix(a, n, mode)
    assert_close(matrix, sl.convolution_matrix(a, n, mode))
    assert_close(matrix @ v, np.convolve(a, v, mode), rtol=1e-5)


@pytest.mark.parametrize("size", range(2, 9))
def test_fiedler_companion(size):
    a = rng.randn(size) + 3
    matrix = L.fiedler_companion(a.astype(np.float32))
    assert_close(matrix, sl.fiedler_companion(a), rtol=1e-5)
    assert_close(np.sort_complex(np.linalg.eigvals(matrix)), np.sort_complex(np.roots(a)),
                 rtol=1e-3)
    assert L.fiedler_companion(a[:1]).shape == (0, 0)  # JAX's shape (SciPy's is (0,))


@pytest.mark.parametrize("name", FROM_SIZES)
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_from_sizes(name, n, x64):
    if name == "hadamard" and n == 5:
        n = 4  # powers of 2 only
    variants = {"pascal": [(k,) for k in ("symmetric", "lower", "upper")],
                "invpascal": [(k,) for k in ("symmetric", "lower", "upper")],
                "helmert": [(False,), (True,)],
                "dft": [(None,), ("sqrtn",), ("n",)]}.get(name, [()])
    for extra in variants:
        got, want = getattr(L, name)(n, *extra), getattr(sl, name)(n, *extra)
        assert_close(got, want, rtol=1e-12)  # (SciPy's integer Pascal matrices are float here)


def test_size_zero():
    """Empty matrices, as SciPy's (they failed to reshape); Helmert's needs a first row."""
    for name in ("hilbert", "invhilbert", "pascal", "invpascal"):
        assert_close(getattr(L, name)(0), getattr(sl, name)(0))
    assert L.pascal(0, "upper").shape == L.invpascal(0, "lower").shape == (0, 0)
    for full in (False, True):
        with pytest.raises(ValueError, match="positive integer"):
            L.helmert(0, full)


def test_sizes_default_to_float32_and_errors():
    assert L.hilbert(3).dtype == np.float32 and L.dft(3).dtype == np.complex64
    assert L.pascal(3).dtype == L.invhilbert(3).dtype == np.float32
    assert L.hadamard(4).dtype == np.int32 and L.hadamard(4, np.float32).dtype == np.float32
    assert_close(L.invpascal(6) @ L.pascal(6), np.eye(6, dtype=np.float32), rtol=1e-5)
    with pytest.raises(ValueError):
        L.hadamard(6)
    with pytest.raises(ValueError):
        L.pascal(3, "diagonal")


def test_constructors_trace_and_differentiate():
    c, r = rng.randn(4).astype(np.float32), rng.randn(4).astype(np.float32)
    assert_close(nbjax.jit(L.toeplitz)(c, r), L.toeplitz(c, r))
    check_grads(lambda c, r: L.toeplitz(c, r) @ c, (c, r), order=1, atol=1e-2, rtol=1e-2)
    check_grads(lambda c: L.companion(c).sum(), (c + 3,), order=1, atol=1e-2, rtol=1e-2)


# --- factorizations ---------------------------------------------------------------------------

@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
def test_polar(side, shape, x64):
    a = rng.randn(*shape)
    u, p = L.polar(a, side)
    want_u, want_p = sl.polar(a, side)
    assert_close(u, want_u, rtol=1e-10)
    assert_close(p, want_p, rtol=1e-10)
    check_grads(lambda a: L.polar(a, side)[1], (a,), order=1, atol=1e-5, rtol=1e-5)


def test_expm_frechet(x64):
    a, e = rng.randn(4, 4) / 2, rng.randn(4, 4)
    got_expm, got = L.expm_frechet(a, e)
    want_expm, want = sl.expm_frechet(a, e)
    assert_close(got_expm, want_expm, rtol=1e-10)
    assert_close(got, want, rtol=1e-10)
    assert_close(L.expm_frechet(a, e, compute_expm=False), want, rtol=1e-10)
    # The Fréchet derivative is the directional derivative of expm.
    assert_close(nbjax.jvp(L.expm, (a,), (e,))[1], want, rtol=1e-8)


@pytest.mark.parametrize("mode", ["left", "right"])
@pytest.mark.parametrize("conjugate", [False, True])
def test_qr_multiply(mode, conjugate, x64):
    a = rng.randn(5, 3) + 1j * rng.randn(5, 3)
    c = rng.randn(3, 2) if mode == "left" else rng.randn(4, 5)
    got, r = L.qr_multiply(a, c, mode, conjugate=conjugate)
    want, want_r = sl.qr_multiply(a, c, mode, conjugate=conjugate)
    assert_close(got, want, rtol=1e-10)
    assert_close(r, want_r, rtol=1e-10)


def test_eigh_tridiagonal(x64):
    d, e = rng.randn(6), rng.randn(5)
    assert_close(L.eigh_tridiagonal(d, e, eigvals_only=True),
                 sl.eigh_tridiagonal(d, e, eigvals_only=True), rtol=1e-10)
    w, v = L.eigh_tridiagonal(d, e)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    assert_close(t @ v, v * w, rtol=1e-10, scale=np.abs(t).sum())
    check_grads(lambda d, e: L.eigh_tridiagonal(d, e, eigvals_only=True), (d, e), order=1,
                atol=1e-5, rtol=1e-5)
    with pytest.raises(NotImplementedError):
        L.eigh_tridiagonal(d, e, select="i", select_range=(0, 2))


def test_solve_sylvester(x64):
    a, b, c = rng.randn(4, 4), rng.randn(3, 3), rng.randn(4, 3)
    assert_close(L.solve_sylvester(a, b, c), sl.solve_sylvester(a, b, c), rtol=1e-9)
    a, b = a + 4 * np.eye(4), b + 4 * np.eye(3)  # well conditioned for finite differences
    check_grads(L.solve_sylvester, (a, b, c), order=1, atol=1e-5, rtol=1e-5)

"""lax.linalg.tridiagonal_solve against scipy.linalg.solve_banded (values, singular systems,
errors, derivatives by finite differences, vmap, jit), qdwh against scipy.linalg.polar, the
implementation enums of eigh/svd/eig, and all of them against JAX when it is installed."""

import numpy as np
import pytest
import scipy.linalg as sl

import nbjax
from nbjax.lax import linalg as la
from nbjax.test_util import check_grads
from helpers import assert_close, check_vmap, random_array

pytestmark = pytest.mark.usefixtures("x64")

rng = np.random.default_rng(0)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS = {np.float32: 1e-7, np.complex64: 1e-7, np.float64: 1e-16, np.complex128: 1e-16}


def system(batch, n, k, dtype, dominant):
    """Random diagonals (``d`` dominant, or as random as the others) and right-hand sides;
    ``dl[..., 0]`` and ``du[..., -1]``, which are never read, are NaN."""
    dl, d, du = (random_array(rng, batch + (n,), dtype) for _ in range(3))
    if dominant:
        d = d + (3 * np.sign(d.real)).astype(dtype)
    dl[..., :1] = du[..., n - 1:] = np.nan
    return dl, d, du, random_array(rng, batch + (n, k), dtype)


def dense(dl, d, du):
    """The tridiagonal matrices, float64 (complex128)."""
    wide = np.result_type(dl.dtype, np.float64)
    n = d.shape[-1]
    a = np.zeros(d.shape + (n,), wide)
    i = np.arange(n)
    a[..., i, i] = d
    a[..., i[1:], i[:-1]] = dl[..., 1:]
    a[..., i[:-1], i[1:]] = du[..., :-1]
    return a


def banded_solution(dl, d, du, b):
    """``scipy.linalg.solve_banded`` of each system, in float64 (complex128)."""
    wide = np.result_type(b.dtype, np.float64)
    x = np.empty(b.shape, wide)
    for idx in np.ndindex(*d.shape[:-1]):
        bands = np.zeros((3, d.shape[-1]), wide)
        bands[0, 1:], bands[1], bands[2, :-1] = du[idx][:-1], d[idx], dl[idx][1:]
        x[idx] = sl.solve_banded((1, 1), bands, b[idx].astype(wide))
    return x


def assert_solves(x, dl, d, du, b, rtol):
    """``x`` is the solution to within ``rtol`` times the systems' condition numbers."""
    a = dense(dl, d, du)
    cond = np.max(np.linalg.cond(a)) if a.size else 1.0
    want = banded_solution(dl, d, du, b)
    assert x.dtype == b.dtype and x.shape == b.shape
    assert_close(x, want, rtol=rtol * cond)


# --- tridiagonal_solve: values ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dominant", [True, False])
def test_tridiagonal_solve_matches_solve_banded(dtype, dominant):
    for batch, n, k in [((), 7, 1), ((3,), 6, 3), ((2, 2), 5, 2), ((), 1, 2), ((2,), 2, 1)]:
        dl, d, du, b = system(batch, n, k, dtype, dominant)
        x = la.tridiagonal_solve(dl, d, du, b)
        assert_solves(np.asarray(x), dl, d, du, b, 20 * EPS[dtype])


def test_tridiagonal_solve_pivots_on_a_zero_diagonal():
    """A zero on the diagonal needs the row swap of partial pivoting."""
    dl = np.array([0.0, 1.0, 2.0, 1.0])
    d = np.array([0.0, 0.0, 1.0, 3.0])
    du = np.array([1.0, 1.0, 1.0, 0.0])
    b = rng.standard_normal((4, 2))
    assert_solves(np.asarray(la.tridiagonal_solve(dl, d, du, b)), dl, d, du, b, 1e-14)


def test_tridiagonal_solve_empty_and_weak_types():
    x = la.tridiagonal_solve(*(np.zeros((2, 0)),) * 3, np.zeros((2, 0, 3)))
    assert x.shape == (2, 0, 3) and x.dtype == np.float64
    ones = nbjax.lax.full((3,), 1.0)
    weak = la.tridiagonal_solve(ones, ones * 4, ones, nbjax.lax.full((3, 1), 1.0))
    assert nbjax.core.get_aval(weak).weak_type
    with nbjax.enable_x64(False):
        x = la.tridiagonal_solve(*(np.ones(3, np.float32),) * 3, np.ones((3, 2), np.float32))
        assert x.dtype == np.float32


def test_tridiagonal_solve_singular_systems():
    """A singular system gives NaN (only that one of the batch); ``perturb_singular`` makes it
    finite, with ``A x`` tiny next to ``x`` (an approximate null vector, what inverse iteration
    needs), and changes nothing for a regular system."""
    dl = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]])
    d = np.array([[1.0, 1.0, 3.0], [1.0, 1.0, 5.0]])
    du = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])  # rows 0 and 1 of the first are equal
    b = rng.standard_normal((2, 3, 2))
    x = np.asarray(la.tridiagonal_solve(dl, d, du, b))
    assert np.isnan(x[0]).all()
    assert_solves(x[1:], dl[1:], d[1:], du[1:], b[1:], 1e-14)
    y = np.asarray(la.tridiagonal_solve(dl, d, du, b, perturb_singular=True))
    assert np.isfinite(y).all()
    a = dense(dl, d, du)
    residual = np.linalg.norm(a[0] @ y[0], axis=0) / np.linalg.norm(y[0], axis=0)
    assert (residual < 1e-12).all()
    assert_close(y[1], x[1], rtol=1e-14)
    zero = np.zeros(2)
    z = np.asarray(la.tridiagonal_solve(zero, zero, zero, np.ones((2, 1)), perturb_singular=True))
    assert np.isfinite(z).all() and (z > 0).all()


def test_tridiagonal_solve_errors():
    v, b = np.ones(3), np.ones((3, 2))
    with pytest.raises(TypeError, match="Input 3 to tridiagonal_solve must have rank at least 2"):
        la.tridiagonal_solve(v, v, v, v)
    with pytest.raises(TypeError, match="Input 0 to tridiagonal_solve must have rank at least 1"):
        la.tridiagonal_solve(np.float64(1.0), v, v, b)
    with pytest.raises(TypeError, match="all diagonal arguments have the same shape"):
        la.tridiagonal_solve(v, v, v[:2], b)
    with pytest.raises(TypeError, match="leading ndim-1 dimensions of b"):
        la.tridiagonal_solve(v, v, v, b[:2])
    with pytest.raises(TypeError, match="does not accept dtype int32 at position 0"):
        la.tridiagonal_solve(*(np.ones(3, np.int32),) * 3, np.ones((3, 1), np.int32))
    with pytest.raises(TypeError, match="same dtypes"):
        la.tridiagonal_solve(v.astype(np.float32), v, v, b)
    with pytest.raises(NotImplementedError, match="float16"):
        la.tridiagonal_solve(*(np.ones(3, np.float16),) * 3, np.ones((3, 1), np.float16))


# --- tridiagonal_solve: transformations ------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_tridiagonal_solve_gradients(dtype):
    dl, d, du, b = system((2,), 4, 2, dtype, dominant=True)
    dl[..., 0] = du[..., -1] = 0  # (finite differences would move them)
    check_grads(la.tridiagonal_solve, (dl, d, du, b), order=2, modes=("fwd", "rev"))


def test_tridiagonal_solve_gradients_ignore_the_unread_corners():
    """``dl[..., 0]`` and ``du[..., -1]`` get zero gradients, even when they are NaN."""
    dl, d, du, b = system((), 5, 2, np.float64, dominant=True)
    grads = nbjax.grad(lambda *a: la.tridiagonal_solve(*a).sum(), argnums=(0, 1, 2, 3))(
        dl, d, du, b)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)
    assert grads[0][0] == 0 and grads[2][-1] == 0


def test_tridiagonal_solve_vmap():
    dl, d, du, b = system((3,), 5, 2, np.float64, dominant=False)
    for in_axes in [(0, 0, 0, 0), (None, None, None, 0), (0, None, 0, None),
                    (None, 0, None, 2)]:
        args = [v if ax is not None else v[0] for v, ax in zip((dl, d, du, b), in_axes)]
        args[3] = np.moveaxis(args[3], 0, 2) if in_axes[3] == 2 else args[3]
        check_vmap(la.tridiagonal_solve, args, in_axes, rtol=1e-12)
    check_vmap(lambda *a: la.tridiagonal_solve(*a, perturb_singular=True), (dl, d, du, b),
               (0, 0, 0, 0), rtol=1e-12)


def test_tridiagonal_solve_jit_agrees_with_eager():
    dl, d, du, b = system((2,), 6, 3, np.float64, dominant=False)

    def f(dl, d, du, b):
        return 2.0 * la.tridiagonal_solve(dl, d, du, b + 1.0)
    assert_close(nbjax.jit(f)(dl, d, du, b), f(dl, d, du, b), rtol=1e-15)

    def loop(dl, d, du, b):  # a solve in a compiled loop's body
        return nbjax.lax.fori_loop(0, 3, lambda i, x: la.tridiagonal_solve(dl, d, du, x), b)
    assert_close(nbjax.jit(loop)(dl, d, du, b), loop(dl, d, du, b), rtol=1e-14)
    grad = nbjax.grad(lambda d, b: f(dl, d, du, b).sum(), argnums=(0, 1))
    for got, want in zip(nbjax.jit(grad)(d, b), grad(d, b)):
        assert_close(got, want, rtol=1e-14)


# --- qdwh -----------------------------------------------------------------------------------------

def ill_conditioned(m, n, dtype, condition):
    u = np.linalg.qr(random_array(rng, (m, n), dtype))[0]
    v = np.linalg.qr(random_array(rng, (n, n), dtype))[0]
    return ((u * np.logspace(0, -np.log10(condition), n)) @ v.conj().T).astype(dtype)


def assert_polar(x, u, h, num_iters, is_converged, rtol):
    """``u`` has orthonormal columns, ``h`` is Hermitian positive semi-definite, ``u h = x``,
    and both are SciPy's polar factors."""
    u, h = np.asarray(u), np.asarray(h)
    assert u.dtype == h.dtype == x.dtype and u.shape == x.shape and h.shape == x.shape[1:] * 2
    assert np.asarray(num_iters).dtype == np.int64 and bool(is_converged)
    n = x.shape[1]
    assert_close(u.conj().T @ u, np.eye(n), rtol=rtol)
    assert_close(h, h.conj().T, rtol=rtol)
    assert np.linalg.eigvalsh(h.astype(np.complex128)).min() > -rtol * np.abs(h).max()
    assert_close(u @ h, x, rtol=rtol)
    want_u, want_h = sl.polar(x.astype(np.complex128 if np.iscomplexobj(x) else np.float64))
    assert_close(h, want_h, rtol=rtol)
    return want_u


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (7, 3)])
def test_qdwh_is_the_polar_decomposition(dtype, shape):
    x = random_array(rng, shape, dtype)
    u, h, num_iters, is_converged = la.qdwh(x)
    rtol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-12
    want_u = assert_polar(x, u, h, num_iters, is_converged, rtol)
    assert_close(u, want_u, rtol=rtol * np.linalg.cond(x))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_qdwh_ill_conditioned(dtype):
    x = ill_conditioned(6, 4, dtype, 1e10)
    u, h, num_iters, is_converged = la.qdwh(x)
    want_u = assert_polar(x, u, h, num_iters, is_converged, 1e-12)
    assert_close(u, want_u, rtol=1e-14 * 1e10)


def test_qdwh_options_and_errors():
    x = random_array(rng, (5, 3), np.float64)
    _, _, num_iters, is_converged = la.qdwh(x, max_iterations=1)
    assert int(num_iters) == 1 and not bool(is_converged)
    u, h, num_iters, is_converged = la.qdwh(x, eps=1e-3)
    assert int(num_iters) < int(la.qdwh(x)[2]) and bool(is_converged)
    assert_close(np.asarray(u) @ np.asarray(h), x, rtol=1e-10)
    u, h, _, _ = la.qdwh(np.zeros((3, 3)))
    assert not np.asarray(u).any() and not np.asarray(h).any()
    with pytest.raises(ValueError, match="M >= N"):
        la.qdwh(random_array(rng, (3, 5), np.float64))
    with pytest.raises(ValueError):
        la.qdwh(random_array(rng, (2, 3, 3), np.float64))
    with pytest.raises(ValueError, match="not inexact"):
        la.qdwh(np.eye(3, dtype=np.int32))


def test_qdwh_dynamic_shape():
    """An ``m x n`` matrix padded to ``M x N``: its polar factors, padded with zeros, also with
    the shape traced under jit."""
    x = random_array(rng, (4, 2), np.float64)
    padded = np.zeros((6, 3))
    padded[:4, :2] = x
    padded[4:, :] = padded[:, 2:] = 7.0  # (not read)
    want_u, want_h = sl.polar(x)
    for u, h, _, _ in [la.qdwh(padded, dynamic_shape=(4, 2)),
                       nbjax.jit(lambda a, m: la.qdwh(a, dynamic_shape=(m, 2)))(padded, 4)]:
        u, h = np.asarray(u), np.asarray(h)
        assert_close(u[:4, :2], want_u, rtol=1e-12)
        assert_close(h[:2, :2], want_h, rtol=1e-12)
        assert not u[4:].any() and not u[:, 2:].any() and not h[2:].any() and not h[:, 2:].any()


def test_qdwh_jit_and_vmap():
    x = random_array(rng, (2, 5, 3), np.float64)
    for got, want in zip(nbjax.jit(la.qdwh)(x[0]), la.qdwh(x[0])):
        assert_close(got, want, rtol=1e-13)
    check_vmap(lambda a: la.qdwh(a)[:2], (x,), (0,), rtol=1e-12)


# --- the implementation enums -----------------------------------------------------------------------

def test_implementation_enums():
    assert [e.value for e in la.EighImplementation] == ["qr", "jacobi", "qdwh"]
    assert [e.value for e in la.SvdAlgorithm] == ["default", "QR", "Jacobi", "polar",
                                                  "divide_and_conquer"]
    assert [e.value for e in la.EigImplementation] == ["cusolver", "magma", "lapack"]
    x = random_array(rng, (4, 4), np.float64)
    x = x + x.T
    w = np.linalg.eigvalsh(x)
    assert_close(la.eigh(x, implementation=la.EighImplementation.QR)[1], w, rtol=1e-13)
    for algorithm in (la.SvdAlgorithm.DEFAULT, la.SvdAlgorithm.QR,
                      la.SvdAlgorithm.DIVIDE_AND_CONQUER):
        assert_close(la.svd(x, algorithm=algorithm, compute_uv=False),
                     np.linalg.svd(x, compute_uv=False), rtol=1e-13)
    assert_close(np.sort_complex(np.asarray(la.eig(
        x, implementation=la.EigImplementation.LAPACK)[0])), w.astype(complex), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="Jacobi"):
        la.eigh(x, implementation=la.EighImplementation.JACOBI)
    with pytest.raises(NotImplementedError, match="QDWH"):
        la.eigh(x, implementation=la.EighImplementation.QDWH)
    with pytest.raises(NotImplementedError, match="Jacobi and Polar"):
        la.svd(x, algorithm=la.SvdAlgorithm.POLAR)
    with pytest.raises(ValueError, match="lapack"):
        la.eig(x, implementation=la.EigImplementation.MAGMA)
    with pytest.warns(DeprecationWarning, match="use_magma"):
        la.eig(x, use_magma=False)


# --- against JAX ---------------------------------------------------------------------------------

def test_tridiagonal_solve_matches_jax():
    jax = pytest.importorskip("jax")
    singular = (np.array([0.0, 2.0, 0.0]), np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0]),
                np.ones((3, 2)))
    cases = [system((2,), 5, 2, dtype, dominant=False) for dtype in DTYPES] + [singular]
    with jax.enable_x64(True):
        for args in cases:
            args = [np.nan_to_num(a) for a in args]
            for perturb in (False, True):
                want = np.asarray(jax.lax.linalg.tridiagonal_solve(
                    *args, perturb_singular=perturb))
                got = np.asarray(la.tridiagonal_solve(*args, perturb_singular=perturb))
                assert_close(got, want, rtol=20 * EPS[args[3].dtype.type])


def test_qdwh_matches_jax():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        for x, options in [(random_array(rng, (5, 3), np.float32), {}), (random_array(rng, (4, 4), np.complex128), {}),
                           (random_array(rng, (5, 3), np.float64), {"max_iterations": 2}),
                           (random_array(rng, (6, 4), np.float64), {"dynamic_shape": (5, 3)})]:
            want = jax.lax.linalg.qdwh(x, **options)
            got = la.qdwh(x, **options)
            rtol = 1e-5 if x.dtype == np.float32 else 1e-12
            for g, w in zip(got[:2], want[:2]):
                assert_close(g, w, rtol=rtol)
            assert int(got[2]) == int(want[2]) and bool(got[3]) == bool(want[3])

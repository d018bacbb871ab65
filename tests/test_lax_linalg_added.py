"""lax.linalg.ormqr, symmetric_product, cholesky_update and tridiagonal against NumPy/SciPy:
values, dtypes, errors, vmap (where JAX batches them) and no derivative rules, as in JAX."""

import numpy as np
import pytest
import scipy.linalg as sl

import nbjax
from nbjax.lax import linalg as la
from helpers import assert_close, check_vmap

pytestmark = pytest.mark.usefixtures("x64")

rng = np.random.default_rng(0)


def householder(shape, dtype):
    """LAPACK's QR factorization (``geqrf``) of a random matrix: ``(a, taus, Q)``, the
    reflectors in ``a``'s lower part and the complete ``Q`` they make."""
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    a = a.astype(dtype)
    geqrf, = sl.lapack.get_lapack_funcs(("geqrf",), (a,))
    packed, taus = geqrf(a)[:2]
    return packed, taus, np.linalg.qr(a, mode="complete")[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_ormqr(dtype, shape):
    a, taus, q = householder(shape, dtype)
    rtol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    m = shape[0]
    c = rng.standard_normal((m, 2)).astype(dtype)
    for left, transpose in [(True, False), (True, True), (False, False), (False, True)]:
        op = np.conj(q.T) if transpose else q
        cc = c if left else c.T
        got = la.ormqr(a, taus, cc, left=left, transpose=transpose)
        assert got.dtype == dtype
        assert_close(got, op @ cc if left else cc @ op, rtol=rtol)


def test_ormqr_errors_and_vmap():
    a, taus, q = householder((4, 3), np.float64)
    with pytest.raises(ValueError, match="same number of rows"):
        la.ormqr(a, taus, np.ones((3, 3)))
    with pytest.raises(ValueError, match="same number of columns"):
        la.ormqr(a, taus, np.ones((4, 2)), left=False)
    with pytest.raises(TypeError, match="same dtypes"):
        la.ormqr(a, taus.astype(np.float32), np.ones((4, 2)))
    with pytest.raises(TypeError, match="batch dimensions"):
        la.ormqr(np.stack([a, a]), taus, np.ones((2, 4, 2)))
    check_vmap(la.ormqr, (a, taus, rng.standard_normal((3, 4, 2))), (None, None, 0),
               rtol=1e-12)
    with pytest.raises(NotImplementedError):
        nbjax.jvp(lambda c: la.ormqr(a, taus, c), (np.eye(4),), (np.eye(4),))


def test_symmetric_product():
    a, c = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 4))
    full = 2 * a @ np.swapaxes(a, -1, -2) + 0.5 * c
    assert_close(la.symmetric_product(a, c, alpha=2., beta=0.5), full, rtol=1e-12)
    mirrored = np.tril(full) + np.swapaxes(np.tril(full, -1), -1, -2)
    assert_close(la.symmetric_product(a, c, alpha=2., beta=0.5, symmetrize_output=True),
                 mirrored, rtol=1e-12)
    check_vmap(la.symmetric_product, (a, c[0]), (0, None), rtol=1e-12)
    with pytest.raises(TypeError, match="complex128"):
        la.symmetric_product(a + 0j, c + 0j)
    with pytest.raises(ValueError, match="square matrix"):
        la.symmetric_product(a, c[..., :3])
    with pytest.raises(NotImplementedError):
        nbjax.grad(lambda a: la.symmetric_product(a, c).sum())(a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_update(dtype):
    m = rng.standard_normal((5, 5))
    spd = m @ m.T + 5 * np.eye(5)
    r = np.linalg.cholesky(spd).T.astype(dtype)
    w = rng.standard_normal(5).astype(dtype)
    got = la.cholesky_update(r, w)
    assert got.dtype == dtype
    want = np.linalg.cholesky(spd + np.outer(w, w)).T
    assert_close(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    # Only R^T R matters: a factor with negative diagonal entries updates to the same one.
    assert_close(la.cholesky_update(-r, w), want, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_cholesky_update_errors():
    with pytest.raises(ValueError, match="Rank-1 update"):
        la.cholesky_update(np.eye(3), np.ones(2))
    with pytest.raises(TypeError, match="rank of exactly 2"):
        la.cholesky_update(np.ones((2, 3, 3)), np.ones(3))
    with pytest.raises(TypeError, match="complex128"):
        la.cholesky_update(np.eye(2) + 0j, np.ones(2) + 0j)
    with pytest.raises(NotImplementedError):
        nbjax.vmap(la.cholesky_update)(np.stack([np.eye(2)] * 2), np.ones((2, 2)))
    with pytest.raises(NotImplementedError):
        nbjax.grad(lambda w: la.cholesky_update(np.eye(2), w).sum())(np.ones(2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal(dtype, lower):
    m = rng.standard_normal((2, 5, 5))
    if np.issubdtype(dtype, np.complexfloating):
        m = m + 1j * rng.standard_normal((2, 5, 5))
    a = (m + np.conj(np.swapaxes(m, -1, -2))).astype(dtype)
    out = la.tridiagonal(a, lower=lower)
    real = np.finfo(dtype).dtype
    assert [x.dtype for x in out] == [dtype, real, real, dtype]
    assert [x.shape for x in out] == [(2, 5, 5), (2, 5), (2, 4), (2, 4)]
    sytrd, = sl.lapack.get_lapack_funcs(("hetrd" if a.dtype.kind == "c" else "sytrd",), (a,))
    rtol = 1e-5 if real == np.float32 else 1e-12
    for i in range(2):
        for got, want in zip(out, sytrd(a[i], lower=int(lower))[:4]):
            assert_close(got[i], want, rtol=rtol)
    # d and e are the tridiagonal matrix similar to a: same eigenvalues.
    d, e = (np.asarray(x, np.float64) for x in out[1:3])
    t = [np.diag(d[i]) + np.diag(e[i], 1) + np.diag(e[i], -1) for i in range(2)]
    assert_close(np.linalg.eigvalsh(t), np.linalg.eigvalsh(a), rtol=rtol * 10)
    check_vmap(lambda x: la.tridiagonal(x, lower=lower), (a,), (0,), rtol=rtol)


def test_tridiagonal_errors():
    with pytest.raises(ValueError, match="square"):
        la.tridiagonal(np.ones((3, 4)))
    with pytest.raises(NotImplementedError):
        nbjax.grad(lambda a: la.tridiagonal(a)[1].sum())(np.eye(3))


# --- QR with column pivoting ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (3, 4, 3)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_pivoted_qr_is_lapacks(dtype, shape, full_matrices):
    """``a[..., p] = q r``, p LAPACK's geqp3 choice (SciPy's), the diagonal of r falling in
    magnitude; under jit too (a step calling back: geqp3 is not among the native routines)."""
    rng = np.random.default_rng(sum(shape))
    a = (rng.standard_normal(shape) * np.arange(1, shape[-1] + 1)).astype(dtype)
    with nbjax.enable_x64(dtype == np.float64):
        q, r, p = la.qr(a, pivoting=True, full_matrices=full_matrices)
        jq, jr, jp = nbjax.jit(lambda a: la.qr(a, pivoting=True,
                                               full_matrices=full_matrices))(a)
    q, r, p = map(np.asarray, (q, r, p))
    assert p.dtype == np.int32 and q.dtype == r.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert_close(q @ r, np.take_along_axis(a, p[..., None, :], -1), tol, scale=np.abs(a).max())
    np.testing.assert_array_equal(np.triu(r), r)
    assert (np.diff(np.abs(np.diagonal(r, axis1=-2, axis2=-1)), axis=-1) <= 1e-6).all()
    for index in np.ndindex(*shape[:-2]):
        want = sl.qr(a[index], pivoting=True, mode="full" if full_matrices else "economic")
        np.testing.assert_array_equal(p[index], want[2])
        assert_close(r[index], want[1], tol, scale=np.abs(a).max())
    np.testing.assert_array_equal(np.asarray(jp), p)
    assert_close(np.asarray(jr), r, tol, scale=np.abs(a).max())


def test_pivoted_qr_prints_derives_and_batches_as_jax():
    a = (np.random.default_rng(3).standard_normal((5, 3)) * [1, 5, 2]).astype(np.float64)
    text = str(nbjax.make_jaxpr(lambda a: la.qr(a, pivoting=True))(a.astype(np.float32)))
    assert "qr[\n      full_matrices=True\n      pivoting=True\n      use_magma=None\n    ]" in text
    assert "d:i32[3] = qr" in text
    with nbjax.enable_x64():
        from nbjax.test_util import check_grads
        check_grads(lambda a: la.qr(a, pivoting=True)[1], (a,), 1, modes=["fwd", "rev"])
        check_grads(lambda a: la.qr(a, pivoting=True, full_matrices=False)[0], (a,), 1,
                    modes=["fwd", "rev"])
    stack = np.stack([a, a[:, ::-1]]).astype(np.float32)
    check_vmap(lambda m: la.qr(m, pivoting=True)[2], (stack,), (0,))
    import nbjax.scipy.linalg as nsl
    r, p = nsl.qr(a.astype(np.float32), pivoting=True, mode="r")
    np.testing.assert_array_equal(p, sl.qr(a, pivoting=True, mode="r")[1])
    empty = nsl.qr(np.zeros((0, 3), np.float32), pivoting=True)
    assert [x.shape for x in empty] == [(0, 0), (0, 3), (3,)]
    np.testing.assert_array_equal(empty[2], [0, 0, 0])  # (LAPACK is not called: JAX's zeros)


# --- geqrf and jnp.linalg.qr(mode="raw") -------------------------------------------------------

@pytest.mark.filterwarnings("ignore:nbjax cpu backend. no kernel for geqrf")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3), (0, 3), (3, 0)])
def test_geqrf_and_raw_qr_are_lapacks(dtype, shape):
    """``geqrf`` is LAPACK's packed factorization (SciPy's geqrf, which JAX also calls on
    CPU), bit for bit; ``jnp.linalg.qr(mode="raw")`` is it with ``h`` transposed (not
    conjugated), which is NumPy's raw mode too; eagerly, jitted and vmapped."""
    import nbjax.numpy as jnp
    a = np.random.default_rng(sum(shape)).standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * np.random.default_rng(1).standard_normal(shape)
    a = a.astype(dtype)
    k = min(shape[-2:])
    packed, taus = la.geqrf(a)
    assert packed.shape == shape and taus.shape == shape[:-2] + (k,)
    assert packed.dtype == taus.dtype == dtype
    for index in np.ndindex(*shape[:-2]):
        if a[index].size:
            want = sl.lapack.get_lapack_funcs(("geqrf",), (a[index],))[0](a[index])
            np.testing.assert_array_equal(np.asarray(packed)[index], want[0])
            np.testing.assert_array_equal(np.asarray(taus)[index], want[1])
    h, tau = jnp.linalg.qr(a, mode="raw")
    np.testing.assert_array_equal(h, np.swapaxes(np.asarray(packed), -1, -2))
    np.testing.assert_array_equal(tau, taus)
    if len(shape) == 2:  # (NumPy computes in double precision)
        want_h, want_tau = np.linalg.qr(a, mode="raw")
        tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-15
        assert_close(h, want_h.astype(dtype), tol, scale=np.abs(a).max(initial=1))
        assert_close(tau, want_tau.astype(dtype), tol, scale=1)
    jh, jtau = nbjax.jit(lambda a: jnp.linalg.qr(a, mode="raw"))(a)
    np.testing.assert_array_equal(jh, h)
    np.testing.assert_array_equal(jtau, tau)
    if len(shape) == 3:
        vh, vtau = nbjax.vmap(lambda m: jnp.linalg.qr(m, mode="raw"))(a)
        np.testing.assert_array_equal(vh, h)
        np.testing.assert_array_equal(vtau, tau)


def test_geqrf_rebuilds_q_prints_and_has_no_derivative_as_jax():
    import nbjax.numpy as jnp
    a = np.random.default_rng(5).standard_normal((5, 3))
    packed, taus = la.geqrf(a)
    q = la.householder_product(packed, taus)
    assert_close(np.asarray(q) @ np.triu(np.asarray(packed))[:3], a, 1e-12)
    h, tau = jnp.linalg.qr(np.arange(6).reshape(3, 2), mode="raw")  # integers: promoted
    assert h.dtype == tau.dtype == np.float64 and h.shape == (2, 3)
    text = str(nbjax.make_jaxpr(la.geqrf)(a.astype(np.float32)))
    assert "b:f32[5,3] c:f32[3] = geqrf a" in text
    with pytest.raises(NotImplementedError):
        nbjax.grad(lambda a: la.geqrf(a)[1].sum())(a)
    with pytest.raises(TypeError, match="rank at least 2"):
        la.geqrf(np.ones(3))


def test_raw_qr_matches_jax():
    jax = pytest.importorskip("jax")
    import nbjax.numpy as jnp
    rng = np.random.default_rng(9)
    cases = 0
    with jax.enable_x64(True):
        for shape in [(4, 4), (6, 3), (3, 6), (2, 5, 2), (0, 2)]:
            for dtype in [np.float32, np.float64, np.complex64, np.complex128]:
                a = rng.standard_normal(shape).astype(dtype)
                if np.issubdtype(dtype, np.complexfloating):
                    a = a + 1j * rng.standard_normal(shape).astype(dtype)
                got, want = jnp.linalg.qr(a, mode="raw"), jax.numpy.linalg.qr(a, mode="raw")
                for g, w in zip(got, want):
                    assert g.dtype == w.dtype and g.shape == w.shape
                    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
                cases += 1
    assert cases == 20

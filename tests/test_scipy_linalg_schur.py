"""Schur and Hessenberg forms and the functions built on them (scipy.linalg.schur, hessenberg,
rsf2csf, sqrtm, funm; lax.linalg.schur, hessenberg, householder_product) against SciPy:
values, reconstruction identities, dtypes, errors, vmap, jit and (the lack of) derivatives."""

import numpy as np
import pytest
import scipy.linalg as sl

import nbjax
import nbjax.numpy as jnp
import nbjax.scipy.linalg as L
from nbjax.lax import linalg as la
from nbjax.test_util import check_grads
from helpers import assert_close, check_vmap, random_array

pytestmark = [pytest.mark.usefixtures("x64"),
              pytest.mark.filterwarnings("ignore:nbjax cpu backend:UserWarning")]

rng = np.random.default_rng(0)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
RTOL = {np.float32: 1e-4, np.complex64: 1e-4, np.float64: 1e-11, np.complex128: 1e-11}


def positive_spectrum(n, dtype):
    """A matrix whose eigenvalues have positive real parts (a principal square root exists and
    SciPy's real-arithmetic result is the same root)."""
    a = random_array(rng, (n, n), dtype)
    return (a @ np.conj(a.T) + n * np.eye(n) + 0.3 * random_array(rng, (n, n), dtype)).astype(dtype)


def H(x):
    return np.conj(np.swapaxes(np.asarray(x), -1, -2))


def complex_of(dtype):
    return np.result_type(dtype, np.complex64)


# --- schur ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur(dtype, output):
    a = random_array(rng, (5, 5), dtype)
    T, Z = L.schur(a, output=output)
    want_t, want_z = sl.schur(a, output=output)
    out_dtype = dtype if output == "real" else complex_of(dtype)
    assert T.dtype == Z.dtype == out_dtype
    assert_close(T, want_t, rtol=RTOL[dtype])
    assert_close(Z, want_z, rtol=RTOL[dtype])
    T, Z = np.asarray(T), np.asarray(Z)
    assert_close(Z @ T @ H(Z), a, rtol=RTOL[dtype])
    assert_close(Z @ H(Z), np.eye(5), rtol=RTOL[dtype])
    below = 1 if output == "real" and not np.iscomplexobj(a) else 0  # 2x2 blocks
    assert np.all(np.tril(T, -1 - below) == 0)


def test_lax_schur_options_and_errors():
    a = random_array(rng, (3, 4, 4), np.float64)
    T, Z = la.schur(a)
    for i in range(3):
        assert_close(T[i], sl.schur(a[i])[0], rtol=1e-11)
    only_t = la.schur(a, compute_schur_vectors=False)
    assert len(only_t) == 1
    assert_close(only_t[0], T, rtol=0)
    with pytest.raises(NotImplementedError, match="sort"):
        la.schur(a, sort_eig_vals=True)
    with pytest.raises(TypeError, match="int32"):
        la.schur(np.ones((3, 3), np.int32))
    with pytest.raises(TypeError, match="rank at least 2"):
        la.schur(np.ones(3))
    with pytest.raises(ValueError, match="square"):
        L.schur(np.ones((3, 4)))
    with pytest.raises(ValueError, match="output"):
        L.schur(np.eye(3), output="foo")
    # An integer matrix is made complex for output="complex" only, as in JAX.
    assert L.schur(np.eye(3, dtype=np.int32), output="complex")[0].dtype == np.complex64
    assert all(x.shape == (0, 0) for x in L.schur(np.zeros((0, 0))))
    assert np.isnan(np.asarray(L.schur(np.full((2, 2), np.nan))[1])).all()  # no exception


# --- hessenberg ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_hessenberg(dtype):
    a = random_array(rng, (6, 6), dtype)
    h, q = L.hessenberg(a, calc_q=True)
    want_h, want_q = sl.hessenberg(a, calc_q=True)
    assert h.dtype == q.dtype == dtype
    assert_close(h, want_h, rtol=RTOL[dtype])
    assert_close(q, want_q, rtol=RTOL[dtype])
    assert_close(np.asarray(q) @ np.asarray(h) @ H(q), a, rtol=RTOL[dtype])
    assert np.all(np.tril(np.asarray(h), -2) == 0)
    assert_close(L.hessenberg(a), want_h, rtol=RTOL[dtype])


def test_lax_hessenberg_and_householder_product():
    a = random_array(rng, (2, 5, 5), np.complex128)
    packed, taus = la.hessenberg(a)
    assert packed.shape == (2, 5, 5) and taus.shape == (2, 4)
    gehrd, = sl.lapack.get_lapack_funcs(("gehrd",), (a[0],))
    for i in range(2):
        want_packed, want_taus, _ = gehrd(a[i])
        assert_close(packed[i], want_packed, rtol=1e-11)
        assert_close(taus[i], want_taus, rtol=1e-11)
    tall = random_array(rng, (5, 3), np.float64)
    q = la.householder_product(tall, np.array([0.5, 1.2]))
    assert_close(q, sl.lapack.dorgqr(tall, np.array([0.5, 1.2]))[0], rtol=1e-12)
    for n in (0, 1, 2):  # the edge sizes: no reflectors, and 0x0
        h, q = L.hessenberg(np.eye(n), calc_q=True)
        assert_close(h, np.eye(n), rtol=0)
        assert_close(q, np.eye(n), rtol=0)


def test_hessenberg_errors():
    with pytest.raises(ValueError, match="Hessenberg"):
        la.hessenberg(np.ones((3, 4)))
    with pytest.raises(TypeError, match="int32"):
        L.hessenberg(np.ones((3, 3), np.int32))
    with pytest.raises(ValueError, match="at least as many rows"):
        la.householder_product(np.ones((2, 4)), np.ones(2))
    with pytest.raises(ValueError, match="must not have more rows"):
        la.householder_product(np.ones((4, 3)), np.ones(4))
    with pytest.raises(TypeError, match="same dtypes"):
        la.householder_product(np.ones((4, 3)), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="batch dimensions"):
        la.householder_product(np.ones((4, 3)), np.ones((2, 3)))


# --- rsf2csf -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rsf2csf(dtype):
    a = random_array(rng, (6, 6), dtype)
    t, z = sl.schur(a)
    T, Z = L.rsf2csf(t, z)
    want_t, want_z = sl.rsf2csf(t, z)
    assert T.dtype == Z.dtype == complex_of(dtype)
    assert_close(T, want_t, rtol=RTOL[dtype])
    assert_close(Z, want_z, rtol=RTOL[dtype])
    T, Z = np.asarray(T), np.asarray(Z)
    assert np.all(np.tril(T, -1) == 0)
    assert_close(Z @ T @ H(Z), a, rtol=RTOL[dtype])


def test_rsf2csf_dtypes_and_errors():
    t, z = sl.schur(random_array(rng, (4, 4), np.float64))
    assert L.rsf2csf(t.astype(np.int32), z)[0].dtype == np.complex128
    assert L.rsf2csf(t.astype(np.int32), z.astype(np.int32))[0].dtype == np.complex64
    T, Z = L.rsf2csf(t.astype(np.complex64), z.astype(np.complex64))  # already triangular-ish
    assert T.dtype == np.complex64
    with pytest.raises(ValueError, match="'T' must be square"):
        L.rsf2csf(np.ones((3, 4)), np.ones((3, 4)))
    with pytest.raises(ValueError, match="'Z' must be square"):
        L.rsf2csf(np.ones((4, 4)), np.ones((3, 4)))
    with pytest.raises(ValueError, match="shapes must match"):
        L.rsf2csf(np.ones((4, 4)), np.ones((3, 3)))


def test_rsf2csf_grad():
    """Derivatives along perturbations that keep ``t`` a real Schur form (its nonzero pattern:
    any other entry below the diagonal would make a new 2x2 block, a jump)."""
    t, z = sl.schur(random_array(rng, (5, 5), np.float64))
    pattern = (t != 0).astype(np.float64)
    assert np.tril(pattern, -1).any()  # the test needs a 2x2 block

    def f(u, z):
        return L.rsf2csf(t + pattern * u, z)
    u = np.zeros_like(t)
    check_grads(lambda u, z: f(u, z)[0], (u, z), order=1, atol=1e-5, rtol=1e-5)
    check_grads(lambda u, z: f(u, z)[1], (u, z), order=1, atol=1e-5, rtol=1e-5)


# --- sqrtm and funm -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_sqrtm(dtype):
    a = positive_spectrum(5, dtype)
    root = L.sqrtm(a)
    assert root.dtype == complex_of(dtype)
    assert_close(root, sl.sqrtm(a), rtol=RTOL[dtype] * 10)
    general = random_array(rng, (5, 5), dtype)  # any square root of a general matrix squares back
    root = np.asarray(L.sqrtm(general))
    assert_close(root @ root, general, rtol=RTOL[dtype] * 10)


def test_sqrtm_options_and_errors():
    assert_close(L.sqrtm(np.diag([4., 0., 1.])), np.diag([2., 0., 1.]), rtol=0)
    assert L.sqrtm(np.eye(2, dtype=np.int32)).dtype == np.complex64
    with pytest.raises(NotImplementedError, match="Blocked"):
        L.sqrtm(np.eye(3), blocksize=2)
    with pytest.raises(ValueError, match="square"):
        L.sqrtm(np.ones((3, 4)))
    with pytest.raises(ValueError):
        L.sqrtm(np.ones((2, 3, 3)))
    with pytest.raises(TypeError, match="rank at least 2"):
        L.sqrtm(np.ones(3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_funm(dtype):
    a = random_array(rng, (5, 5), dtype)
    f = L.funm(a, jnp.exp)
    assert f.dtype == complex_of(dtype)
    assert_close(f, sl.expm(a), rtol=RTOL[dtype] * 10)
    assert_close(L.funm(a, jnp.sin), sl.funm(a, np.sin), rtol=RTOL[dtype] * 10)
    f, err = L.funm(a, jnp.exp, disp=False)
    _, want_err = sl.funm(a, np.exp, disp=False)
    assert err.dtype == np.finfo(dtype).dtype
    eps = np.finfo(dtype).eps
    assert eps <= err < 1000 * eps and 0.1 < err / want_err < 10


def test_funm_repeated_eigenvalue(capsys):
    """The recurrence divides by eigenvalue gaps: a Jordan block gets SciPy's (wrong) result,
    the worst error estimate, and a printed warning unless disp=False."""
    jordan = np.array([[1., 1.], [0., 1.]])
    f, err = L.funm(jordan, jnp.exp, disp=False)
    assert_close(f, sl.funm(jordan, np.exp, disp=False)[0], rtol=1e-12)
    assert err == 1
    assert capsys.readouterr().out == ""
    L.funm(jordan, jnp.exp)
    assert "may be inaccurate" in capsys.readouterr().out
    nbjax.jit(lambda x: L.funm(x, jnp.exp))(jordan)  # no concrete estimate to print
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="square"):
        L.funm(np.ones((3, 4)), jnp.exp)
    assert L.funm(np.eye(2, dtype=np.int32), jnp.exp).dtype == np.complex64


# --- transformations -------------------------------------------------------------------------

def test_vmap():
    a = random_array(rng, (3, 4, 4), np.float64)
    check_vmap(L.schur, (a,), (0,), rtol=1e-10)
    cube = random_array(rng, (4, 4, 4), np.float64)  # batch axes among the matrix axes
    check_vmap(lambda x: L.schur(x, output="complex"), (cube,), (2,), rtol=1e-10)
    check_vmap(lambda x: L.hessenberg(x, calc_q=True), (cube,), (1,), rtol=1e-10)
    check_vmap(L.sqrtm, (a,), (0,), rtol=1e-10)
    check_vmap(lambda x: L.funm(x, jnp.exp), (a,), (0,), rtol=1e-10)
    t, z = np.stack([sl.schur(m)[0] for m in a]), np.stack([sl.schur(m)[1] for m in a])
    check_vmap(L.rsf2csf, (t, z), (0, 0), rtol=1e-10)
    check_vmap(L.rsf2csf, (t, z[0]), (0, None), rtol=1e-10)
    packed, taus = la.hessenberg(a)
    check_vmap(la.householder_product, (np.asarray(packed), np.asarray(taus)[0]), (0, None),
               rtol=1e-12)
    # rsf2csf takes stacks itself
    T, Z = L.rsf2csf(t, z)
    assert_close(T[1], sl.rsf2csf(t[1], z[1])[0], rtol=1e-11)


def test_jit():
    a = random_array(rng, (4, 4), np.float64)
    for f in (L.schur, lambda x: L.hessenberg(x, calc_q=True), L.sqrtm,
              lambda x: L.funm(x, jnp.exp), lambda x: L.rsf2csf(*L.schur(x))):
        for got, want in zip(nbjax.tree_util.tree_leaves(nbjax.jit(f)(a)),
                             nbjax.tree_util.tree_leaves(f(a))):
            assert got.dtype == want.dtype
            assert_close(got, want, rtol=1e-12)


@pytest.mark.parametrize("f", [lambda x: L.schur(x)[0], L.hessenberg, L.sqrtm,
                               lambda x: L.funm(x, jnp.exp)])
def test_no_derivatives(f):
    """JAX has no derivative rule for schur or hessenberg: differentiating raises."""
    a = random_array(rng, (3, 3), np.float64)
    with pytest.raises(NotImplementedError):
        nbjax.grad(lambda x: jnp.real(f(x)).sum())(a)
    with pytest.raises(NotImplementedError):
        nbjax.jvp(f, (a,), (a,))

"""nbjax.scipy: linalg (SciPy's signatures), special functions and stats.norm, against NumPy
and Python's math module (SciPy itself is not a dependency)."""

import math

import numpy as np
import pytest

import nbjax
from nbjax.scipy import linalg as sl
from nbjax.scipy import special
from nbjax.scipy.stats import norm
from nbjax.test_util import check_grads
from helpers import assert_close, random_array, staged

RNG = np.random.default_rng(4321)
GRAD_TOL = dict(atol=2e-2, rtol=2e-2)  # float32 finite differences of matrix functions


def H(x):
    return np.conj(np.swapaxes(np.asarray(x), -1, -2))


def well_conditioned(shape, dtype=np.float32):
    return (random_array(RNG, shape, dtype) + 3 * np.eye(shape[-1])).astype(dtype)


def hpd(shape, dtype=np.float32):
    a = random_array(RNG, shape, dtype)
    return (a @ H(a) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def close(a, b, tol=1e-4):
    a = np.asarray(a)
    np.testing.assert_allclose(a, np.broadcast_to(b, a.shape), rtol=tol, atol=tol)


def expm_reference(a):
    """exp(a) by eigendecomposition (a is diagonalizable with probability one) in float64."""
    w, v = np.linalg.eig(a.astype(np.complex128))
    out = (v * np.exp(w)[..., None, :]) @ np.linalg.inv(v)
    return out if np.iscomplexobj(a) else out.real


# --- linalg ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [True, False])
def test_solve_triangular(dtype, trans, lower):
    a, b = well_conditioned((3, 3), dtype), random_array(RNG, (3, 2), dtype)
    x = sl.solve_triangular(a, b, trans=trans, lower=lower)
    m = np.tril(a) if lower else np.triu(a)
    op = {0: m, 1: m.T, 2: np.conj(m.T)}[{"N": 0, "T": 1, "C": 2}.get(trans, trans)]
    close(op @ np.asarray(x), b, 1e-3)
    close(sl.solve_triangular(a, b[:, 0], trans=trans, lower=lower), np.asarray(x)[:, 0], 1e-4)


def test_solve_triangular_batched_and_errors():
    a, b = well_conditioned((2, 3, 3)), random_array(RNG, (3, 4))
    x = np.asarray(sl.solve_triangular(a, b, lower=True, unit_diagonal=True))
    assert x.shape == (2, 3, 4)
    close((np.tril(a, -1) + np.eye(3)) @ x, b, 1e-3)
    with pytest.raises(ValueError, match="Invalid 'trans'"):
        sl.solve_triangular(a, b, trans=3)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_and_cho_solve(dtype, lower):
    a = hpd((2, 3, 3), dtype)
    c = np.asarray(sl.cholesky(a, lower=lower))
    close(c @ H(c) if lower else H(c) @ c, a, 1e-3)
    close(np.tril(c, -1) if not lower else np.triu(c, 1), 0)
    b = random_array(RNG, (3, 2), dtype)
    x = sl.cho_solve(sl.cho_factor(a, lower=lower), b)
    close(x, np.linalg.solve(a, b), 1e-3)
    close(sl.solve(a, b, assume_a="pos", lower=lower), np.linalg.solve(a, b), 1e-3)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3)])
def test_lu(shape):
    a = random_array(RNG, shape)
    p, l, u = map(np.asarray, sl.lu(a))
    k = min(shape[-2:])
    assert l.shape[-2:] == (shape[-2], k) and u.shape[-2:] == (k, shape[-1])
    close(p @ l @ u, a, 1e-4)
    close(np.triu(l, 1), 0)
    close(np.diagonal(l, axis1=-2, axis2=-1), 1)
    close(np.tril(u, -1), 0)
    pl, u2 = sl.lu(a, permute_l=True)
    close(np.asarray(pl) @ np.asarray(u2), a, 1e-4)


def test_lu_complex_has_a_real_permutation():
    """``p`` is a real matrix for complex ``a``, as SciPy's (and JAX's)."""
    a = random_array(RNG, (4, 4), np.complex64)
    p, l, u = sl.lu(a)
    assert p.dtype == np.float32 and l.dtype == u.dtype == np.complex64
    p = np.asarray(p)
    assert np.isin(p, [0, 1]).all() and np.array_equal(p @ p.T, np.eye(4))  # a permutation
    close(np.asarray(p) @ np.asarray(l) @ np.asarray(u), a, 1e-4)


@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_factor_and_lu_solve(trans):
    a, b = well_conditioned((3, 3), np.complex64), random_array(RNG, (3, 2), np.complex64)
    lu, piv = sl.lu_factor(a)
    assert np.asarray(piv).dtype == np.int32
    x = sl.lu_solve((lu, piv), b, trans=trans)
    op = {0: a, 1: a.T, 2: np.conj(a.T)}[trans]
    close(op @ np.asarray(x), b, 1e-3)
    close(sl.lu_solve((lu, piv), b[:, 1], trans=trans), np.asarray(x)[:, 1])


def test_lu_solve_batched():
    a, b = well_conditioned((2, 3, 3)), random_array(RNG, (2, 3, 1))
    x = sl.lu_solve(sl.lu_factor(a), b)
    close(a @ np.asarray(x), b, 1e-3)


def test_qr_svd_eigh_inv_det_solve():
    a = random_array(RNG, (4, 3))
    q, r = sl.qr(a)
    assert q.shape == (4, 4) and r.shape == (4, 3)
    close(np.asarray(q) @ np.asarray(r), a)
    q, r = sl.qr(a, mode="economic")
    assert q.shape == (4, 3) and r.shape == (3, 3)
    r_only, = sl.qr(a, mode="r")
    assert r_only.shape == (4, 3)
    u, s, vh = sl.svd(a)
    close(np.asarray(u)[:, :3] * np.asarray(s) @ np.asarray(vh), a)
    close(sl.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False))
    h = hpd((3, 3))
    w, v = sl.eigh(h)
    close(w, np.linalg.eigvalsh(h), 1e-3)
    close(sl.eigh(h, eigvals_only=True), w)
    # Only the chosen triangle is read (as SciPy): garbage in the other one changes nothing.
    close(sl.eigh(h + np.triu(random_array(RNG, (3, 3)), 1), lower=True, eigvals_only=True), w,
          1e-3)
    with pytest.raises(NotImplementedError):
        sl.eigh(h, b=h)
    sq, rhs = well_conditioned((3, 3)), random_array(RNG, (3,))
    close(sl.inv(sq), np.linalg.inv(sq), 1e-3)
    close(sl.det(sq), np.linalg.det(sq), 1e-3)
    close(sl.solve(sq, rhs), np.linalg.solve(sq, rhs), 1e-3)
    with pytest.raises(ValueError, match="assume_a"):
        sl.solve(sq, rhs, assume_a="banded")


@pytest.mark.parametrize("scale", [0.01, 0.3, 1.0, 3.0, 30.0])
def test_expm_float32(scale):
    # The norms span every Padé degree and the scaling-and-squaring path. A fixed matrix per
    # case (not the shared stream, whose state depends on test order): with scale 30 a
    # random draw can have exp(A) beyond float32's range.
    a = (np.random.default_rng(7).standard_normal((3, 3)) * scale / 3).astype(np.float32)
    expected = expm_reference(a)
    close(sl.expm(a), expected, 1e-4 * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("scale", [0.001, 0.1, 0.5, 1.5, 10.0])
def test_expm_float64(scale, x64):
    a = RNG.standard_normal((3, 3)) * scale
    out = sl.expm(a)
    assert np.asarray(out).dtype == np.float64
    expected = expm_reference(a)
    close(out, expected, 1e-10 * max(1.0, np.abs(expected).max()))


def test_expm_special_cases():
    close(sl.expm(np.zeros((3, 3), np.float32)), np.eye(3))
    d = np.diag([1.0, -2.0, 0.5]).astype(np.float32)
    close(sl.expm(d), np.diag(np.exp([1.0, -2.0, 0.5])), 1e-5)
    # exp of a nilpotent matrix is a finite series: I + N + N^2 / 2.
    n = np.array([[0, 1, 2], [0, 0, 3], [0, 0, 0]], np.float32)
    close(sl.expm(n), np.eye(3) + n + n @ n / 2, 1e-5)
    batch = random_array(RNG, (2, 3, 3))
    close(sl.expm(batch), expm_reference(batch), 1e-4)
    c = random_array(RNG, (3, 3), np.complex64)
    close(sl.expm(c), expm_reference(c), 1e-4)
    assert np.all(np.isnan(np.asarray(sl.expm(np.full((2, 2), 1e8, np.float32),
                                              max_squarings=4))))
    with pytest.raises(ValueError, match="square"):
        sl.expm(np.ones((2, 3), np.float32))


def test_expm_grads_jit_vmap():
    rng = np.random.default_rng(12)  # fixed inputs: float32 differences of large values
    a = (rng.standard_normal((3, 3)) * 0.5).astype(np.float32)
    check_grads(sl.expm, (a,), order=1, modes=("fwd", "rev"), **GRAD_TOL)
    big = (rng.standard_normal((2, 2)) * 2.5).astype(np.float32)  # needs squarings
    check_grads(sl.expm, (big,), order=1, modes=("fwd", "rev"), atol=0.1, rtol=2e-2)
    close(nbjax.jit(sl.expm)(a), expm_reference(a), 1e-4)
    batch = random_array(RNG, (3, 2, 2))
    close(nbjax.vmap(sl.expm)(batch), expm_reference(batch), 1e-4)
    close(staged(sl.expm, a), expm_reference(a), 1e-4)


def test_linalg_grads():
    a, b = well_conditioned((3, 3)), random_array(RNG, (3, 2))
    check_grads(lambda a, b: sl.solve_triangular(a, b, lower=True, trans=1), (a, b),
                order=2, modes=("fwd", "rev"), **GRAD_TOL)
    h = hpd((3, 3))
    # cho_factor reads one triangle, as LAPACK does: differentiate along symmetric directions.
    check_grads(lambda h, b: sl.cho_solve(sl.cho_factor((h + h.T) / 2), b), (h, b), order=1,
                modes=("fwd", "rev"), **GRAD_TOL)
    check_grads(lambda a: sl.lu(a)[2], (a,), order=1, modes=("fwd", "rev"), **GRAD_TOL)


# --- special ----------------------------------------------------------------------------------

def _vectorized(fn):
    return np.vectorize(fn, otypes=[np.float64])


@pytest.mark.parametrize("name,ref,domain", [
    ("erf", math.erf, (-3, 3)),
    ("erfc", math.erfc, (-3, 3)),
    ("gammaln", math.lgamma, (0.1, 10)),
    ("expit", lambda x: 1 / (1 + math.exp(-x)), (-10, 10)),
    ("logit", lambda p: math.log(p / (1 - p)), (0.01, 0.99)),
    ("ndtr", lambda x: 0.5 * math.erfc(-x / math.sqrt(2)), (-5, 5)),
])
def test_unary_special(name, ref, domain):
    x = RNG.uniform(*domain, size=(3, 4)).astype(np.float32)
    fn = getattr(special, name)
    close(fn(x), _vectorized(ref)(x.astype(np.float64)), 2e-5)
    assert np.asarray(fn(x)).dtype == np.float32
    if name == "ndtr":  # JAX refuses integers there (test_fidelity_round2)
        with pytest.raises(TypeError, match="x.dtype=int32 is not supported"):
            fn(np.arange(1, 4))
    else:
        assert np.asarray(fn(np.arange(1, 4))).dtype == np.float32  # ints become floats


def test_erfinv_ndtri_digamma():
    y = np.linspace(-0.99, 0.99, 11).astype(np.float32)
    close(special.erf(special.erfinv(y)), y, 1e-5)
    p = np.linspace(0.01, 0.99, 9).astype(np.float32)
    close(special.ndtr(special.ndtri(p)), p, 1e-5)
    # outside [0, 1], NaN, tiny negative probabilities included (SciPy's and JAX's answer)
    outside = np.float32([-1e-30, -1e-20, -1e-10, -0.5, 1.5, 1 + 1e-6, np.nan])
    assert np.isnan(np.asarray(special.ndtri(outside))).all()
    assert np.isnan(np.asarray(nbjax.jit(special.ndtri)(outside))).all()
    np.testing.assert_array_equal(special.ndtri(np.float32([0.0, 1.0])), [-np.inf, np.inf])
    # digamma is the derivative of gammaln (and digamma(1) = -euler_gamma).
    x = np.array([0.5, 1.0, 2.5, 7.0], np.float32)
    close(special.digamma(x), nbjax.vmap(nbjax.grad(special.gammaln))(x), 1e-4)
    close(special.digamma(1.0), -np.euler_gamma, 1e-6)


def test_xlogy_xlog1py():
    x = np.array([0.0, 0.0, 1.5, 2.0], np.float32)
    y = np.array([0.0, 3.0, 2.0, 0.5], np.float32)
    close(special.xlogy(x, y), [0.0, 0.0, 1.5 * np.log(2.0), 2 * np.log(0.5)])
    close(special.xlog1py(x, y - 1), [0.0, 0.0, 1.5 * np.log(2.0), 2 * np.log(0.5)])
    # d/dy at x = 0 is x / y = 0 for y != 0 (the where() alone would give the same, but
    # d/dx at x = 0 is log(y), finite, where a plain where() of x*log(y) is fine too);
    # the custom rule keeps both finite at x = 0, y > 0.
    gx, gy = nbjax.grad(special.xlogy, argnums=(0, 1))(0.0, 2.0)
    close(gx, np.log(2.0))
    assert float(gy) == 0.0
    gx, gy = nbjax.grad(special.xlog1py, argnums=(0, 1))(0.0, 1.0)
    close(gx, np.log(2.0))
    assert float(gy) == 0.0
    xs, ys = RNG.uniform(0.5, 2, (2, 3)).astype(np.float32)
    check_grads(special.xlogy, (xs, ys), order=2, modes=("fwd", "rev"), **GRAD_TOL)
    check_grads(special.xlog1py, (xs, ys), order=2, modes=("fwd", "rev"), **GRAD_TOL)


def _logsumexp_ref(a, axis=None, b=None, keepdims=False):
    a = np.asarray(a, np.float64)
    b = np.ones_like(a) if b is None else np.asarray(b, np.float64)
    return np.log(np.sum(b * np.exp(a), axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp(axis, keepdims):
    a = random_array(RNG, (2, 3, 4)) * 3
    b = RNG.uniform(0.1, 2, (2, 3, 4)).astype(np.float32)
    close(special.logsumexp(a, axis=axis, keepdims=keepdims),
          _logsumexp_ref(a, axis, keepdims=keepdims), 1e-5)
    close(special.logsumexp(a, axis=axis, b=b, keepdims=keepdims),
          _logsumexp_ref(a, axis, b, keepdims), 1e-5)


def test_logsumexp_stability_sign_and_grads():
    big = np.array([1000.0, 1000.0], np.float32)
    close(special.logsumexp(big), 1000 + np.log(2), 1e-3)
    assert float(special.logsumexp(np.array([-np.inf, -np.inf], np.float32))) == -np.inf
    out, sign = special.logsumexp(np.array([0.0, 1.0], np.float32),
                                  b=np.array([1.0, -1.0], np.float32), return_sign=True)
    close(out, np.log(np.e - 1), 1e-5)
    assert float(sign) == -1.0
    # The gradient is softmax, with exactly 0 (not NaN) for -inf entries.
    a = np.array([-np.inf, 0.0, 1.0], np.float32)
    g = np.asarray(nbjax.grad(special.logsumexp)(a))
    close(g, [0.0, 1 / (1 + np.e), np.e / (1 + np.e)], 1e-6)
    x = random_array(RNG, (3, 4))
    check_grads(lambda x: special.logsumexp(x, axis=1), (x,), order=2,
                modes=("fwd", "rev"), **GRAD_TOL)
    close(special.softmax(x, axis=1), np.exp(x) / np.exp(x).sum(1, keepdims=True), 1e-5)
    close(special.log_softmax(x, axis=1),
          x - _logsumexp_ref(x, 1, keepdims=True), 1e-5)
    # SciPy's (and JAX's scipy.special's) softmax takes every axis by default
    close(special.softmax(x), np.exp(x) / np.exp(x).sum(), 1e-5)
    close(special.log_softmax(x), x - _logsumexp_ref(x, None, keepdims=True), 1e-5)
    with pytest.raises(TypeError):
        special.softmax(x, 1)  # (axis is keyword-only)


def test_log_ndtr():
    x = np.array([-30.0, -12.0, -8.0, -3.0, 0.0, 2.0, 4.0, 6.0, 10.0], np.float32)
    # Reference in float64 from erfc where it does not underflow, else the asymptotic
    # series summed far further than log_ndtr's three terms.
    def ref(v):
        if v > 0:
            return math.log1p(-0.5 * math.erfc(v / math.sqrt(2)))
        if v > -30:
            return math.log(0.5 * math.erfc(-v / math.sqrt(2)))
        series = sum((-1) ** n * math.prod(range(1, 2 * n, 2)) / v ** (2 * n)
                     for n in range(8))
        return -v * v / 2 - math.log(-v) - 0.5 * math.log(2 * math.pi) + math.log(series)
    expected = np.array([ref(float(v)) for v in x])
    got = np.asarray(special.log_ndtr(x))
    # Between the segments log(ndtr) is taken in float32, so the absolute error is ~ulp(1).
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    assert_close(got[-1], expected[-1], rtol=1e-5)  # the far upper tail
    assert np.all(np.isfinite(got))


# --- stats.norm -------------------------------------------------------------------------------

def test_norm_distribution():
    x = np.linspace(-3, 4, 8).astype(np.float32)
    loc, scale = 0.5, 2.0
    z = (x.astype(np.float64) - loc) / scale
    pdf = np.exp(-z * z / 2) / (scale * np.sqrt(2 * np.pi))
    cdf = 0.5 * _vectorized(math.erfc)(-z / np.sqrt(2))
    close(norm.pdf(x, loc, scale), pdf, 1e-6)
    close(norm.logpdf(x, loc, scale), np.log(pdf), 1e-5)
    close(norm.cdf(x, loc, scale), cdf, 1e-6)
    close(norm.logcdf(x, loc, scale), np.log(cdf), 1e-5)
    close(norm.sf(x, loc, scale), 1 - cdf, 1e-6)
    close(norm.logsf(x, loc, scale), np.log1p(-cdf), 1e-5)
    close(norm.ppf(cdf.astype(np.float32), loc, scale), x, 1e-3)
    close(norm.isf((1 - cdf).astype(np.float32), loc, scale), x, 1e-3)
    close(norm.ppf(0.975), 1.959964, 1e-5)
    # Broadcasting of loc and scale, default standard normal.
    out = norm.pdf(x[:, None], np.zeros(3, np.float32), np.ones(3, np.float32))
    assert out.shape == (8, 3)
    close(out, norm.pdf(x)[:, None], 1e-7)
    check_grads(lambda x, s: norm.logpdf(x, 0.3, s), (x, np.float32(1.5)), order=2,
                modes=("fwd", "rev"), **GRAD_TOL)
    check_grads(norm.cdf, (x,), order=1, modes=("fwd", "rev"), **GRAD_TOL)


def test_norm_x64(x64):
    x = np.linspace(-5, 5, 5)
    assert np.asarray(norm.cdf(x)).dtype == np.float64
    close(norm.cdf(x), 0.5 * _vectorized(math.erfc)(-x / np.sqrt(2)), 1e-12)

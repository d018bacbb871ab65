"""nbjax.scipy.stats at invalid parameters and at the edges of each distribution's support:
against SciPy where it agrees (jax-free), and against jax.scipy.stats directly."""

import numpy as np
import pytest
import scipy.stats as ss

import nbjax.scipy.stats as S

nan, inf = np.nan, np.inf
f32 = np.float32


def _check(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-5, atol=1e-38, equal_nan=True)


# (function, args, expected) where SciPy agrees with JAX.
CASES = [
    ("expon.cdf", (nan,), nan), ("expon.sf", (nan,), nan), ("expon.logpdf", (nan,), nan),
    ("expon.logcdf", (0.0, 0.0, 0.0), nan), ("expon.sf", (0.0, 0.0, 0.0), nan),
    ("gamma.cdf", (0.5, inf), 0.0), ("gamma.sf", (0.5, inf), 1.0),
    ("gamma.cdf", (0.5, 0.0), nan), ("gamma.cdf", (0.0, nan), nan),
    ("chi2.cdf", (0.5, inf), 0.0), ("chi2.cdf", (0.5, 0.0), nan),
    ("chi2.logpdf", (0.0, 2.0), np.log(0.5)),
    ("bernoulli.pmf", (nan, 0.3), nan), ("bernoulli.logpmf", (nan, 0.3), nan),
    ("geom.pmf", (nan, 0.3), nan), ("geom.pmf", (2.0, 1.5), nan), ("geom.pmf", (2.0, nan), nan),
]


@pytest.mark.parametrize("name,args,want", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_values_as_scipy(name, args, want):
    dist, fn = name.split(".")
    args32 = tuple(f32(a) for a in args)
    _check(getattr(getattr(S, dist), fn)(*args32), want)
    with np.errstate(all="ignore"):
        ref = getattr(getattr(ss, dist), fn)(*[np.float64(a) for a in args])
    _check(ref, want)


def test_jax_values_where_scipy_differs():
    # norm density at a negative scale: that of |scale| (SciPy: NaN)
    _check(S.norm.pdf(f32(0.0), 0.0, -1.0), 1 / np.sqrt(2 * np.pi))
    # expon at scale < 0 and x < loc: 0 (SciPy: NaN)
    _check(S.expon.cdf(f32(0.0), 1.5, -1.0), 0.0)



def _grid(*axes):
    return [m.ravel().astype(f32) for m in np.meshgrid(*[np.array(a, f32) for a in axes],
                                                       indexing="ij")]


X = [0., -0.5, 0.5, 1., 2., -1., inf, -inf, nan, 30.]
Q = [0., 0.5, 1., -0.1, 1.1, nan, 0.999999]
LOC, SCALE = [0., 1.5], [1., 2., 0., -1.]
PARAM = [0.5, 1., 2., 0., -1., inf, nan]
K, P = [0., 1., 2., 3., -1., 2.5, inf, nan], [0., 0.3, 1., -0.1, 1.5, nan]

JAX_CASES = (
    [(f"expon.{f}", (X, LOC, SCALE)) for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")]
    # (not cauchy's quantiles: JAX gives a number for q outside [0, 1], nbjax NaN as SciPy)
    + [("expon.ppf", (Q, LOC, SCALE)), ("norm.logpdf", (X, LOC, SCALE)),
       ("norm.pdf", (X, LOC, SCALE)), ("gamma.cdf", (X, PARAM, LOC, SCALE)),
       ("gamma.logpdf", (X, [0.5, 2., 0., -1., inf, nan], LOC, SCALE)),
       ("chi2.cdf", (X, PARAM, LOC, SCALE)),
       ("bernoulli.pmf", (K, P, [0., 1.5])), ("bernoulli.logpmf", (K, P, [0., 1.5])),
       ("geom.logpmf", (K, [0., 0.3, 1., -0.1, nan], [0.]))])


@pytest.mark.parametrize("name,axes", JAX_CASES, ids=[c[0] for c in JAX_CASES])
def test_against_jax(name, axes):
    jax = pytest.importorskip("jax")
    import jax.scipy.stats as SJ
    dist, fn = name.split(".")
    args = _grid(*axes)
    want = getattr(getattr(SJ, dist), fn)(*args)
    got = getattr(getattr(S, dist), fn)(*args)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    _check(got, want)

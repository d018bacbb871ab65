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
    # betainc(a, b, 0) = 0 even where a = 0 or b = inf
    ("beta.cdf", (0.0, 0.5, inf), 0.0), ("beta.logcdf", (0.0, 0.5, inf), -inf),
    ("beta.sf", (0.5, 1.0, 1.0, 0.0, 1.0), 0.5),
    ("beta.pdf", (0.5, 0.0, 1.0), nan), ("beta.logpdf", (0.5, 2.0, -1.0), nan),
    ("beta.pdf", (0.5, 2.0, 2.0, 0.0, -1.0), nan), ("beta.cdf", (nan, 2.0, 2.0), nan),
    ("poisson.cdf", (nan, 1.0), nan), ("poisson.cdf", (-1.0, 1.0), 0.0),
    ("poisson.pmf", (2.5, 1.0), 0.0), ("poisson.entropy", (-1.0,), nan),
    ("uniform.pdf", (0.5,), 1.0), ("uniform.pdf", (2.0,), 0.0), ("uniform.cdf", (2.0,), 1.0),
    ("uniform.ppf", (1.1,), nan),
    ("pareto.cdf", (2.0, 1.0), 0.5), ("pareto.cdf", (0.5, 1.0), 0.0),
    ("pareto.cdf", (2.0, -1.0), nan), ("pareto.ppf", (0.5, -1.0), nan),
    ("pareto.logpdf", (2.0, -1.0, 0.0, -1.0), nan), ("pareto.ppf", (1.1, 1.0), nan),
    ("gumbel_l.cdf", (0.0, 0.0, -1.0), nan), ("gumbel_l.logpdf", (0.0, 0.0, 0.0), nan),
    ("gumbel_r.sf", (0.0, 0.0, -1.0), nan),
    ("gumbel_r.logsf", (-2.5,), np.log1p(-np.exp(-np.exp(2.5)))),
    ("gumbel_r.ppf", (nan,), nan),
    ("truncnorm.logpdf", (0.0, 1.0, 1.0), nan), ("truncnorm.cdf", (0.0, 1.0, -1.0), nan),
    ("truncnorm.cdf", (nan, -1.0, 1.0), nan), ("truncnorm.sf", (nan, -1.0, 1.0), nan),
    ("truncnorm.cdf", (0.0, -1.0, nan), nan), ("truncnorm.logcdf", (2.0, -1.0, 1.0), 0.0),
    ("truncnorm.logsf", (-2.0, -1.0, 1.0), 0.0),
    ("betabinom.pmf", (0.0, -1.0, 1.0, 1.0), nan), ("betabinom.pmf", (0.0, 2.0, 0.0, 1.0), nan),
    ("betabinom.pmf", (3.0, 2.0, 1.0, 1.0), 0.0), ("betabinom.pmf", (-1.0, 2.0, 1.0, 1.0), 0.0),
    ("betabinom.pmf", (nan, 2.0, 1.0, 1.0), nan), ("betabinom.pmf", (1.0, 2.0, 1.0, 1.0), 1 / 3),
    ("bernoulli.cdf", (nan, 0.3), nan), ("bernoulli.cdf", (1.0, 0.3), 1.0),
    # cauchy's quantiles: exact ends, and the far tails to float32's precision (JAX: finite
    # at 0 and 1, and 3% off at 1e-6)
    ("cauchy.ppf", (0.0,), -inf), ("cauchy.ppf", (1.0,), inf), ("cauchy.isf", (0.0,), inf),
    ("cauchy.ppf", (1e-6,), -1 / np.tan(np.pi * 1e-6)), ("cauchy.isf", (1e-6, 1.0, 2.0),
                                                         1 + 2 / np.tan(np.pi * 1e-6)),
    ("cauchy.ppf", (0.75,), 1.0), ("cauchy.isf", (0.75,), -1.0), ("cauchy.ppf", (0.5,), 0.0),
    # vonmises: NaN for kappa < 0; kappa = 0 is uniform (JAX: NaN)
    ("vonmises.pdf", (0.5, -1.0), nan), ("vonmises.pdf", (0.5, 0.0), 1 / (2 * np.pi)),
    # wrapcauchy: NaN unless 0 < c < 1, and at a NaN x; 0 outside [0, 2 pi]
    ("wrapcauchy.pdf", (0.5, 0.0), nan), ("wrapcauchy.pdf", (0.5, 1.5), nan),
    ("wrapcauchy.logpdf", (nan, 0.5), nan), ("wrapcauchy.pdf", (7.0, 0.5), 0.0),
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


def test_jax_edges_of_the_special_functions():
    import nbjax.scipy.special as sp
    # betainc(a, b, 0) = 0 before a == 0 or b == inf give 1 (SciPy agrees); (inf, inf) NaN
    _check(sp.betainc(np.array([0, 0.5, 2, 0, inf], f32), np.array([1, inf, inf, 0, inf], f32),
                      np.zeros(5, f32)), [0, 0, 0, nan, nan])
    # gammainc(0, x): NaN for 0 < x < 1 (JAX's series), 1 from x = 1 on (SciPy: 1); Q = 0
    _check(sp.gammainc(f32(0), np.array([0, 0.5, 1, 2, inf], f32)), [nan, nan, 1, 1, 1])
    _check(sp.gammaincc(f32(0), np.array([0.5, 1, 2], f32)), [0, 0, 0])
    import nbjax
    for fn in (nbjax.jit(sp.betainc), sp.betainc):
        _check(fn(f32(0.5), f32(inf), f32(0)), 0.0)
    _check(nbjax.jit(sp.gammainc)(f32(0), f32(0.5)), nan)
    # the derivative in x still works
    _check(nbjax.grad(lambda t: sp.betainc(2.0, 3.0, t))(0.3), 12 * 0.3 * 0.7 ** 2)
    _check(nbjax.grad(lambda t: sp.gammainc(2.0, t))(0.3), 0.3 * np.exp(-0.3))
    # betaln keeps a weak type weak
    assert sp.betaln(0.5, 20.0).weak_type


def test_jax_values_where_scipy_differs_more():
    from math import gamma
    # poisson: the integer test is on k itself, so a non-integer loc gives the formula's
    # continuous extension (SciPy: 0), and a non-integer k mass 0 even where k - loc is whole
    _check(S.poisson.pmf(f32(2), 1.0, 1.5), np.exp(-1) / gamma(1.5))
    _check(S.poisson.pmf(f32(0.5), 0.5, 0.5), 0.0)
    # uniform: density inf at scale 0, cdf 0 at a NaN x and not weakly typed
    _check(S.uniform.pdf(f32(0), 0, 0), inf)
    _check(S.uniform.cdf(f32(nan)), 0.0)
    assert not S.uniform.cdf(0.5).weak_type
    # gumbel: quantiles NaN at 0 and 1 (SciPy: -inf, inf), whatever the scale
    _check(S.gumbel_r.ppf(np.array([0, 1], f32)), [nan, nan])
    _check(S.gumbel_l.ppf(np.array([0, 1], f32)), [nan, nan])
    _check(S.gumbel_l.ppf(f32(0.5), 0, -1.0), -np.log(np.log(2)))
    # t and truncnorm: a negative scale acts as |scale|, as in norm
    _check(S.t.pdf(f32(0), 1.0, 0.0, -1.0), 1 / np.pi)
    _check(S.truncnorm.pdf(f32(0), -1.0, 0.0, 0.0, -1.0),
           ss.norm.pdf(0) / (ss.norm.cdf(0) - ss.norm.cdf(-1)))
    # betabinom: mass 1 at n = 0 whatever a and b; floor(k) (so 2.5 has the mass of 2)
    _check(S.betabinom.pmf(f32(0), 0.0, 0.5, inf), 1.0)
    _check(S.betabinom.pmf(f32(2.5), 2.0, 1.0, 1.0), 1 / 3)
    # binom: mass 1 at k = n = 0 even for a NaN p
    _check(S.binom.pmf(f32(0), 0.0, nan), 1.0)
    # beta: -inf outside [loc, loc + scale] before the NaN of invalid parameters
    _check(S.beta.logpdf(f32(2.0), 2.0, 2.0), -inf)
    _check(S.beta.logpdf(f32(2.0), 0.0, 2.0), nan)



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

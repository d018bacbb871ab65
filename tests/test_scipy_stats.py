"""nbjax.scipy.stats against scipy.stats: every function of every distribution module on
random parameters, in float32 and float64; gradients of log-densities against finite
differences; jit and vmap; the multivariate distributions, mode, rankdata, sem and
gaussian_kde."""

import inspect

import numpy as np
import pytest
import scipy.stats as ss

import nbjax
import nbjax.scipy.stats as stats
from nbjax.test_util import check_grads
from helpers import assert_close, check_vmap

rng = np.random.RandomState(0)

# Distributions with loc and scale: name -> (shape-parameter sampler, range of standardised
# points, a little wider than the support so that the outside is checked too).
CONTINUOUS = {
    "beta": (lambda r: (r.uniform(0.5, 4), r.uniform(0.5, 4)), (-0.2, 1.2)),
    "cauchy": (lambda r: (), (-8, 8)),
    "chi2": (lambda r: (r.uniform(1, 6),), (-1, 12)),
    "expon": (lambda r: (), (-1, 6)),
    "gamma": (lambda r: (r.uniform(0.5, 5),), (-1, 10)),
    "gumbel_l": (lambda r: (), (-5, 2)),
    "gumbel_r": (lambda r: (), (-2, 5)),
    "laplace": (lambda r: (), (-6, 6)),
    "logistic": (lambda r: (), (-8, 8)),
    "norm": (lambda r: (), (-5, 5)),
    "pareto": (lambda r: (r.uniform(0.5, 4),), (0.5, 6)),
    "t": (lambda r: (r.uniform(1, 10),), (-6, 6)),
    "truncnorm": (lambda r: tuple(np.sort(r.uniform(-2, 2, 2))), (-2.5, 2.5)),
    "uniform": (lambda r: (), (-0.5, 1.5)),
}
# Distributions of ``k - loc`` on the integers: name -> shape-parameter sampler.
DISCRETE = {
    "bernoulli": lambda r: (r.uniform(0.1, 0.9),),
    "betabinom": lambda r: (r.randint(1, 12), r.uniform(0.5, 4), r.uniform(0.5, 4)),
    "binom": lambda r: (r.randint(1, 12), r.uniform(0.1, 0.9)),
    "geom": lambda r: (r.uniform(0.1, 0.9),),
    "nbinom": lambda r: (r.randint(1, 8), r.uniform(0.2, 0.9)),
    "poisson": lambda r: (r.uniform(0.5, 8),),
}
# No loc or scale: name -> (shape-parameter sampler, range of points).
PLAIN = {
    "gennorm": (lambda r: (r.uniform(0.5, 3),), (-4, 4)),
    "vonmises": (lambda r: (r.uniform(0.1, 5),), (-7, 7)),
    "wrapcauchy": (lambda r: (r.uniform(0.05, 0.9),), (-1, 7)),
}
QUANTILE = ("ppf", "isf")
RTOL = {np.float32: 2e-4, np.float64: 1e-8}
GRAD_TOL = dict(atol=1e-5, rtol=1e-5)


def _functions(name):
    functions = [f for f in getattr(stats, name).__all__ if f != "entropy"]
    assert functions
    return functions


def _check(name, fn, args, dtype, rtol=None):
    got = getattr(getattr(stats, name), fn)(*[np.asarray(a, dtype) for a in args])
    want = getattr(getattr(ss, name), fn)(*args)
    assert np.asarray(got).dtype == dtype, (name, fn)
    assert_close(got, want, rtol=rtol or RTOL[dtype], err_msg=f"{name}.{fn}")


def _quantile_points(r):
    return np.concatenate([r.uniform(0.02, 0.98, 12), [-0.5, 0.5, 1.5]])


def _run_all(dtype):
    for name, (sample, (low, high)) in CONTINUOUS.items():
        shape = sample(rng)
        loc, scale = rng.uniform(-1, 1), rng.uniform(0.5, 2)
        z = np.concatenate([rng.uniform(low, high, 20), [low, high]])
        for fn in _functions(name):
            first = _quantile_points(rng) if fn in QUANTILE else loc + scale * z
            _check(name, fn, (first, *shape, loc, scale), dtype)
    for name, sample in DISCRETE.items():
        shape, loc = sample(rng), rng.randint(-2, 3)
        for fn in _functions(name):
            first = _quantile_points(rng) if fn in QUANTILE else np.arange(-4, 16) + loc
            takes_loc = "loc" in inspect.signature(getattr(getattr(stats, name), fn)).parameters
            _check(name, fn, (first, *shape) + ((loc,) if takes_loc else ()), dtype)
    for name, (sample, (low, high)) in PLAIN.items():
        shape = sample(rng)
        for fn in _functions(name):
            _check(name, fn, (rng.uniform(low, high, 20), *shape), dtype)


def test_distributions_float32():
    _run_all(np.float32)


def test_distributions_float64(x64):
    _run_all(np.float64)


def test_every_jax_distribution_is_tested():
    assert {*CONTINUOUS, *DISCRETE, *PLAIN} | {"dirichlet", "multinomial",
                                              "multivariate_normal"} == {
        name for name in dir(stats)
        if not name.startswith("_") and inspect.ismodule(getattr(stats, name))} - {"kde"}


def test_tails_keep_relative_accuracy(x64):
    """Far tails, where ``1 - cdf`` or ``1/2 + arctan / pi`` would cancel to 0."""
    x = np.array([-30.0, -1e6, 40.0])
    assert_close(stats.cauchy.cdf(x), ss.cauchy.cdf(x), rtol=1e-12)
    assert_close(stats.cauchy.sf(-x), ss.cauchy.sf(-x), rtol=1e-12)
    assert_close(stats.truncnorm.logpdf(10.5, 10.0, 12.0), ss.truncnorm.logpdf(10.5, 10.0, 12.0),
                 rtol=1e-10)
    assert_close(stats.truncnorm.logcdf(-10.5, -12.0, -10.0),
                 ss.truncnorm.logcdf(-10.5, -12.0, -10.0), rtol=1e-10)


def test_poisson_entropy(x64):
    mu = np.array([0.0, 0.3, 2.5, 40.0, 900.0, 1100.0])
    assert_close(stats.poisson.entropy(mu), ss.poisson.entropy(mu), rtol=1e-10)
    # SciPy's sum does not converge this far out; the normal limit holds to O(1/mu).
    assert_close(stats.poisson.entropy(1e7), 0.5 * np.log(2 * np.pi * np.e * 1e7), rtol=1e-8)
    assert_close(stats.poisson.entropy(mu.astype(np.float32)[1:]), ss.poisson.entropy(mu[1:]),
                 rtol=1e-4)


def test_bernoulli_ppf_at_zero_is_zero():
    """JAX's choice (SciPy returns loc - 1 = -1 there)."""
    assert float(stats.bernoulli.ppf(0.0, 0.3)) == 0.0


# --- multivariate ------------------------------------------------------------------------------

def _spd(r, d, batch=()):
    a = r.randn(*batch, d, d)
    return a @ np.swapaxes(a, -1, -2) + d * np.eye(d)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multivariate_normal(dtype, x64):
    mean, cov = rng.randn(3), _spd(rng, 3)
    x = rng.randn(5, 3)
    for fn in ("logpdf", "pdf"):
        got = getattr(stats.multivariate_normal, fn)(x.astype(dtype), mean.astype(dtype),
                                                     cov.astype(dtype))
        assert np.asarray(got).dtype == dtype
        assert_close(got, getattr(ss.multivariate_normal, fn)(x, mean, cov), rtol=RTOL[dtype])
    mvn = stats.multivariate_normal.logpdf
    assert_close(mvn(x, mean, 2.0), ss.multivariate_normal.logpdf(x, mean, 2.0), rtol=1e-10)
    assert_close(mvn(x, mean, np.array([1.0, 2.0, 3.0])),
                 ss.multivariate_normal.logpdf(x, mean, np.array([1.0, 2.0, 3.0])), rtol=1e-10)
    assert_close(mvn(x[:, 0], 0.5, 2.0), ss.norm.logpdf(x[:, 0], 0.5, np.sqrt(2.0)), rtol=1e-10)
    covs = _spd(rng, 3, (4,))  # a batch of covariances, one per point
    assert_close(mvn(x[:4], mean, covs),
                 [ss.multivariate_normal.logpdf(x[i], mean, covs[i]) for i in range(4)],
                 rtol=1e-10)
    with pytest.raises(ValueError, match="incompatible shapes"):
        mvn(x, mean, np.eye(2))


def test_dirichlet(x64):
    alpha = rng.uniform(0.5, 3, 4)
    x = rng.dirichlet(alpha, 6).T  # components along the first axis
    want = [ss.dirichlet.logpdf(x[:, i], alpha) for i in range(6)]
    assert_close(stats.dirichlet.logpdf(x, alpha), want, rtol=1e-10)
    assert_close(stats.dirichlet.pdf(x[:-1], alpha), np.exp(want), rtol=1e-10)  # last implied
    off = x[:, 0] * 1.1
    assert stats.dirichlet.logpdf(off, alpha) == -np.inf
    assert_close(stats.dirichlet.logpdf(x.astype(np.float32), alpha.astype(np.float32)), want,
                 rtol=1e-4)
    with pytest.raises(ValueError):
        stats.dirichlet.logpdf(x[:2], alpha)


def test_multinomial(x64):
    p = rng.dirichlet(np.ones(4))
    x = rng.multinomial(10, p, size=5)
    assert_close(stats.multinomial.logpmf(x, 10, p), ss.multinomial.logpmf(x, 10, p),
                 rtol=1e-10)
    assert_close(stats.multinomial.pmf(x, 10, p), ss.multinomial.pmf(x, 10, p), rtol=1e-10)
    assert stats.multinomial.logpmf(x[0], 11, p) == -np.inf
    with pytest.raises(ValueError, match="integer"):
        stats.multinomial.logpmf(x.astype(float), 10, p)


# --- transformations --------------------------------------------------------------------------

GRAD_CASES = [  # (log-density, arguments: the point, then the parameters)
    (stats.norm.logpdf, (0.3, 0.1, 1.7)),
    (stats.gamma.logpdf, (1.2, 2.5, 0.1, 1.3)),
    (stats.beta.logpdf, (0.3, 2.0, 3.5)),
    (stats.t.logpdf, (0.7, 4.0, 0.2, 1.1)),
    (stats.truncnorm.logpdf, (0.2, -1.0, 1.5, 0.1, 0.8)),
    (stats.vonmises.logpdf, (0.4, 2.0)),
    (lambda mu: stats.poisson.logpmf(3.0, mu), (2.5,)),  # mass only on the integers
    (stats.logistic.cdf, (0.4, 0.1, 2.0)),
]


@pytest.mark.parametrize("fn, args", GRAD_CASES)
def test_grads(fn, args, x64):
    check_grads(fn, tuple(np.float64(a) for a in args), order=2, modes=("fwd", "rev"),
                **GRAD_TOL)


def test_multivariate_normal_grad(x64):
    check_grads(stats.multivariate_normal.logpdf, (rng.randn(3), rng.randn(3), _spd(rng, 3)),
                order=1, modes=("fwd", "rev"), **GRAD_TOL)


@pytest.mark.parametrize("fn, args", [
    (stats.gamma.logpdf, (np.linspace(0.1, 5, 6), np.linspace(0.5, 3, 6))),
    (stats.binom.logpmf, (np.arange(6.0), np.full(6, 7.0), np.linspace(0.1, 0.9, 6))),
    (stats.truncnorm.cdf, (np.linspace(-1, 1, 6), np.full(6, -1.5), np.linspace(0.5, 2, 6))),
])
def test_jit_and_vmap(fn, args):
    args = tuple(a.astype(np.float32) for a in args)
    assert_close(nbjax.jit(fn)(*args), fn(*args), rtol=1e-6)
    check_vmap(fn, args, (0,) * len(args))
    check_vmap(fn, args, (0,) + (None,) * (len(args) - 1))


def test_keywords_and_signatures():
    assert_close(stats.gamma.pdf(x=2.0, a=3.0, scale=2.0), ss.gamma.pdf(2.0, 3.0, scale=2.0),
                 rtol=1e-6)
    assert_close(stats.poisson.pmf(k=3, mu=2.0, loc=1), ss.poisson.pmf(3, 2.0, loc=1), rtol=1e-6)
    with pytest.raises(TypeError):
        stats.gamma.pdf(2.0)  # the shape parameter is required
    assert stats.norm.cdf(np.int32(1)).dtype == np.float32


# --- mode, rankdata, sem ----------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("keepdims", [False, True])
def test_mode(axis, keepdims):
    a = rng.randint(0, 4, (5, 7)).astype(np.float32)
    got = stats.mode(a, axis=axis, keepdims=keepdims)
    want = ss.mode(a, axis=axis, keepdims=keepdims)
    assert_close(got.mode, want.mode.astype(np.float32))
    assert_close(got.count, want.count.astype(np.int32))


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_rankdata(method, axis):
    a = rng.randint(0, 5, (4, 6))
    got = stats.rankdata(a, method, axis=axis)
    assert np.asarray(got).dtype == np.float32
    assert_close(got, ss.rankdata(a, method, axis=axis).astype(np.float32))


def test_rankdata_jit_and_errors():
    a = rng.randn(8).astype(np.float32)
    assert_close(nbjax.jit(stats.rankdata)(a), ss.rankdata(a).astype(np.float32))
    with pytest.raises(ValueError, match="unknown method"):
        stats.rankdata(a, "first")


@pytest.mark.parametrize("axis, ddof", [(0, 1), (1, 0), (None, 1)])
def test_sem(axis, ddof, x64):
    a = rng.randn(5, 6)
    assert_close(stats.sem(a, axis, ddof), ss.sem(a, axis, ddof), rtol=1e-12)
    a[1, 2] = np.nan
    assert_close(stats.sem(a, axis, ddof, "omit"), ss.sem(a, axis, ddof, "omit"), rtol=1e-12)


# --- gaussian_kde -----------------------------------------------------------------------------

@pytest.mark.parametrize("d, bw, weighted", [(1, None, False), (2, "silverman", True),
                                             (2, 0.4, False)])
def test_gaussian_kde(d, bw, weighted, x64):
    data = rng.randn(d, 12)
    weights = rng.uniform(0.5, 2, 12) if weighted else None
    got, want = stats.gaussian_kde(data, bw, weights), ss.gaussian_kde(data, bw, weights)
    points = rng.randn(d, 5)
    assert_close(got.covariance, want.covariance, rtol=1e-12)
    assert_close(got.neff, want.neff, rtol=1e-12)
    assert_close(got(points), want(points), rtol=1e-10)
    assert_close(got.logpdf(points), want.logpdf(points), rtol=1e-10)
    mean, cov = rng.randn(d), _spd(rng, d)
    assert_close(got.integrate_gaussian(mean, cov), want.integrate_gaussian(mean, cov),
                 rtol=1e-10)
    other = ss.gaussian_kde(rng.randn(d, 7))
    assert_close(got.integrate_kde(stats.gaussian_kde(other.dataset)),
                 want.integrate_kde(other), rtol=1e-10)
    if d == 1:
        assert_close(got.integrate_box_1d(-0.5, 1.0), want.integrate_box_1d(-0.5, 1.0),
                     rtol=1e-10)
    sample = got.resample(nbjax.random.key(0), (2000,))
    assert sample.shape == (d, 2000)
    assert_close(np.mean(sample, axis=1), np.average(data, axis=1, weights=weights), rtol=0.2,
                 scale=1.0)


def test_gaussian_kde_is_a_pytree():
    kde = stats.gaussian_kde(rng.randn(10).astype(np.float32))
    points = np.linspace(-1, 1, 4).astype(np.float32)
    assert_close(nbjax.jit(lambda k, x: k.pdf(x))(kde, points), kde.pdf(points), rtol=1e-6)
    with pytest.raises(NotImplementedError):
        kde.set_bandwidth("scott")

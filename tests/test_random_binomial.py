"""random.binomial and random.multinomial: JAX's draws for the same key (recorded from JAX
0.10.2, compared live over many parameters when JAX is importable), the distributions'
moments, edge cases, dtypes, errors, and jit/vmap."""

import numpy as np
import pytest

import nbjax
import nbjax.random as random

try:
    import jax
    import jax.random as jrandom
except ImportError:  # the recorded values and the moments still check nbjax
    jax = jrandom = None

N = np.array([3.0, 40.0, 500.0, 8.0], np.float32)  # inversion, BTRS, BTRS flipped, inversion
P = np.array([0.2, 0.5, 0.9, 0.7], np.float32)
P4 = np.array([0.1, 0.2, 0.3, 0.4], np.float32)


def test_recorded_draws():
    np.testing.assert_array_equal(np.asarray(random.binomial(random.PRNGKey(7), N, P)),
                                  [1.0, 16.0, 452.0, 5.0])
    np.testing.assert_array_equal(np.asarray(random.multinomial(random.PRNGKey(7), 100., P4)),
                                  [13.0, 17.0, 37.0, 33.0])


@pytest.mark.skipif(jax is None, reason="JAX not installed")
def test_binomial_draws_match_jax():
    """Counts from both samplers (n p around 10 and far above), p on both sides of 1/2,
    and invalid parameters (NaN p, negative n, infinite n)."""
    rng = np.random.default_rng(0)
    for seed in range(12):
        n = np.floor(rng.exponential(rng.choice([3, 30, 3000]), 17)).astype(np.float32)
        p = rng.uniform(0, 1, 17).astype(np.float32)
        n[:3], p[3:6] = [-1.0, np.inf, 0.0], [np.nan, 0.0, 1.0]
        ours = np.asarray(random.binomial(random.PRNGKey(seed), n, p))
        theirs = np.asarray(jrandom.binomial(jrandom.PRNGKey(seed), n, p))
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.skipif(jax is None, reason="JAX not installed")
def test_multinomial_draws_match_jax():
    rng = np.random.default_rng(1)
    for seed in range(6):
        p = rng.dirichlet(np.ones(5)).astype(np.float32)
        n = np.array([7.0, 300.0], np.float32)
        ours = random.multinomial(random.key(seed), n, p, shape=(2, 5))
        theirs = jrandom.multinomial(jrandom.key(seed), n, p, shape=(2, 5))
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("n, p", [(6.0, 0.3), (25.0, 0.2), (400.0, 0.35), (400.0, 0.8)])
def test_binomial_moments_and_frequencies(n, p):
    """Mean and variance within 5 standard errors; a chi-square test of the frequencies of
    the likely counts (a wrong sampler, even one off by a count, fails)."""
    size = 20000
    k = np.asarray(random.binomial(random.PRNGKey(3), n, p, (size,)))
    assert k.dtype == np.float32 and (k == np.floor(k)).all() and (k >= 0).all() and \
        (k <= n).all()
    mean, var = n * p, n * p * (1 - p)
    assert abs(k.mean() - mean) < 5 * np.sqrt(var / size)
    assert abs(k.var() - var) < 5 * var * np.sqrt(2 / size)
    from scipy import stats
    support = np.arange(int(n) + 1)
    expected = stats.binom.pmf(support, n, p) * size
    likely = expected > 20
    observed = np.bincount(k.astype(int), minlength=support.size)[likely]
    rest = size - observed.sum()
    chi2 = ((observed - expected[likely]) ** 2 / expected[likely]).sum() + \
        (rest - (size - expected[likely].sum())) ** 2 / max(size - expected[likely].sum(), 1)
    assert stats.chi2.sf(chi2, likely.sum()) > 1e-4


def test_binomial_edge_cases_and_broadcasting():
    key = random.PRNGKey(0)
    n = np.array([[0.0], [5.0], [7.5]], np.float32)  # a float n is floored, as NumPy does
    p = np.array([0.0, 1.0, 0.5], np.float32)
    k = np.asarray(random.binomial(key, n, p))
    assert k.shape == (3, 3)
    np.testing.assert_array_equal(k[:, :2], [[0, 0], [0, 5], [0, 7]])
    assert 0 <= k[1, 2] <= 5 and 0 <= k[2, 2] <= 7
    bad = np.asarray(random.binomial(key, np.array([-1.0, np.nan, 5.0, np.inf]),
                                     np.array([0.5, 0.5, 1.5, 0.5], np.float32)))
    assert np.isnan(bad[:3]).all() and bad[3] == np.inf
    assert random.binomial(key, 10, 0.5, shape=(4, 2)).shape == (4, 2)


def test_multinomial_counts_sum_to_n_and_follow_p():
    counts = np.asarray(random.multinomial(random.PRNGKey(5), 50.0, P4, shape=(4000, 4)))
    assert counts.shape == (4000, 4) and (counts.sum(-1) == 50).all()
    se = np.sqrt(50 * P4 * (1 - P4) / 4000)
    assert (abs(counts.mean(0) - 50 * P4) < 5 * se).all()
    zero = np.asarray(random.multinomial(random.PRNGKey(1), 9.0, np.array([0.5, 0.0, 0.5])))
    assert zero[1] == 0 and zero.sum() == 9


def test_dtypes_and_errors():
    key = random.PRNGKey(0)
    assert random.multinomial(key, 10, P4, dtype=np.int32).dtype == np.int32
    with nbjax.enable_x64():
        assert random.binomial(key, 10, 0.5, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="must be a float dtype, got int32"):
        random.binomial(key, 10, 0.5, dtype=np.int32)
    with pytest.raises(ValueError, match="broadcast"):
        random.binomial(key, np.ones(3), 0.5, shape=(2,))
    with pytest.raises(TypeError, match="ndarray or scalar"):
        random.binomial(key, [10, 3], 0.5)
    with pytest.raises(TypeError, match="ndarray or scalar"):
        random.multinomial(key, 10, [0.5, 0.5])


def test_jit_and_vmap():
    keys = random.split(random.PRNGKey(2), 3)
    f = lambda k: random.binomial(k, N, P)  # noqa: E731
    batched = np.asarray(nbjax.vmap(f)(keys))
    for i in range(3):
        np.testing.assert_array_equal(batched[i], np.asarray(f(keys[i])))
    np.testing.assert_array_equal(np.asarray(nbjax.jit(f)(keys[0])), batched[0])
    g = nbjax.jit(lambda k, n: random.multinomial(k, n, P4))
    np.testing.assert_array_equal(np.asarray(g(keys[1], 100.0)),
                                  np.asarray(random.multinomial(keys[1], 100.0, P4)))

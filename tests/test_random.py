"""nbjax.random: JAX's exact streams, the distributions, keys, and traceability.

JAX's outputs come from tests/data/random_jax_reference.npz, recorded once by
tests/data/record_random_reference.py (which needs JAX; these tests do not import it).
"""

import json
import math
import os

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
import nbjax.random as R
from nbjax.core import check_jaxpr
from helpers import assert_close, staged

# --- JAX's streams -------------------------------------------------------------------------

_DATA = np.load(os.path.join(os.path.dirname(__file__), "data", "random_jax_reference.npz"))
_SPECS = json.loads(str(_DATA["specs"]))

# Float outputs through a transcendental function (erf_inv, log, log1p, tan, pow, lgamma)
# differ from XLA's by a few ulps; uniform with a non-trivial range by one (XLA fuses the
# multiply-add). Errors are measured in eps of max(|x|, 1): float64 gets a looser bound as
# XLA's float64 log/log1p on the CPU are less accurate than NumPy's.
# (float32: nbjax's eager exp/log are correctly rounded, XLA's are not, and the gamma
# gradient chains many of them: up to ~5 eps.)
_EPS_TOLERANCE = {np.dtype(np.float16): 1, np.dtype(np.float32): 6, np.dtype(np.float64): 64}
# Floats with no transcendental function and the default range are bit-exact, and so are
# float16/float32 normal draws: their erf_inv is XLA's algorithm, operation for operation.
_EXACT_FLOAT_CASES = {c["name"] for c in _SPECS
                      if (c["fn"] == "uniform" and "minval" not in c["kwargs"])
                      or (c["fn"] == "normal" and not c["x64"])}


def _decode(value):
    if isinstance(value, dict) and "array" in value:
        return jnp.asarray(np.array(value["array"], value["dtype"]))
    return value


def _replay(case):
    fn = getattr(R, case["fn"])
    args = [_decode(a) for a in case["args"]]
    kwargs = {k: _decode(v) for k, v in case["kwargs"].items()}
    if "shape" in kwargs:
        kwargs["shape"] = tuple(kwargs["shape"])
    if case["fn"] == "split" and isinstance(args[0], list):
        args[0] = tuple(args[0])
    if case["key"] is None:
        return fn(*args, **kwargs)
    key = R.PRNGKey(case["key"]["seed"])
    if case["grad"]:
        return nbjax.grad(lambda a: fn(key, a, *args[1:], **kwargs).sum())(args[0])
    return fn(key, *args, **kwargs)


@pytest.fixture
def x64_if(request):
    previous = nbjax.config.enable_x64
    yield lambda on: nbjax.config.update("enable_x64", on)
    nbjax.config.update("enable_x64", previous)


@pytest.mark.parametrize("index", range(len(_SPECS)), ids=[c["name"] for c in _SPECS])
def test_matches_jax_stream(index, x64_if):
    case = _SPECS[index]
    x64_if(case["x64"])
    expected = _DATA[f"case{index}"]
    out = np.asarray(_replay(case))
    assert out.shape == expected.shape and out.dtype == expected.dtype
    if not np.issubdtype(expected.dtype, np.floating) or case["name"] in _EXACT_FLOAT_CASES:
        np.testing.assert_array_equal(out, expected)
        return
    scale = np.maximum(np.abs(expected.astype(np.float64)), 1.0)
    error = np.abs(out.astype(np.float64) - expected) / scale / np.finfo(expected.dtype).eps
    tolerance = _EPS_TOLERANCE[expected.dtype]
    assert np.max(error, initial=0) <= tolerance, np.max(error)


def test_threefry_known_answers():
    """The Random123 known-answer vectors for Threefry-2x32 with 20 rounds."""
    vectors = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
               ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
               ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for key, count, expected in vectors:
        out = R.threefry2x32_p.bind(*(np.uint32(v) for v in key + count))
        assert tuple(int(o) for o in out) == expected


# --- keys ----------------------------------------------------------------------------------

def test_typed_key_repr_and_attributes():
    k = R.key(0)
    assert repr(k) == "Array((), dtype=key<fry>) overlaying:\n[0 0]"
    assert str(k.dtype) == "key<fry>" and k.shape == () and k.ndim == 0
    ks = R.split(k, 3)
    assert isinstance(ks, R.PRNGKeyArray) and ks.shape == (3,) and len(ks) == 3
    np.testing.assert_array_equal(R.key_data(ks), R.split(R.PRNGKey(0), 3))
    np.testing.assert_array_equal(R.key_data(ks[1]), np.asarray(R.key_data(ks))[1])
    np.testing.assert_array_equal(R.key_data(ks[1:]), np.asarray(R.key_data(ks))[1:])
    assert [R.key_data(x).tolist() for x in ks] == np.asarray(R.key_data(ks)).tolist()
    np.testing.assert_array_equal(ks == ks[0], [True, False, False])
    grid = R.split(k, (2, 3))
    assert grid.shape == (2, 3) and grid.reshape(6).shape == (6,) and grid.T.shape == (3, 2)
    np.testing.assert_array_equal(R.key_data(grid[..., 0]), np.asarray(R.key_data(grid))[:, 0])
    with pytest.raises(TypeError, match="len"):
        len(k)
    with pytest.raises(IndexError):
        ks[0, 0]
    with pytest.raises(TypeError, match="boolean"):
        bool(k)
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(k)


def test_typed_and_raw_keys_agree():
    raw, typed = R.PRNGKey(7), R.key(7)
    np.testing.assert_array_equal(R.key_data(typed), raw)
    np.testing.assert_array_equal(R.wrap_key_data(raw) == typed, True)
    for sample in (lambda k: R.uniform(k, (4,)), lambda k: R.normal(k, (2, 2)),
                   lambda k: R.randint(k, (3,), 0, 9), lambda k: R.gamma(k, 2.0, (3,))):
        np.testing.assert_array_equal(sample(raw), sample(typed))
    np.testing.assert_array_equal(R.key_data(R.fold_in(typed, 3)), R.fold_in(raw, 3))
    assert R.clone(typed) is typed and R.key_impl(typed) == "threefry2x32"


def test_seed_conversions(x64_if):
    np.testing.assert_array_equal(R.PRNGKey(np.int32(-1)), [0, 2 ** 32 - 1])
    np.testing.assert_array_equal(R.PRNGKey(np.uint32(7)), [0, 7])
    np.testing.assert_array_equal(R.PRNGKey(jnp.int8(-1)), [0, 2 ** 32 - 1])
    x64_if(True)
    np.testing.assert_array_equal(R.PRNGKey(np.int64(-2)), [2 ** 32 - 1, 2 ** 32 - 2])
    np.testing.assert_array_equal(R.PRNGKey(2 ** 40 + 3), [2 ** 8, 3])


def test_key_errors():
    keys = R.split(R.PRNGKey(0), 3)
    with pytest.raises(ValueError, match="single key"):
        R.uniform(keys)
    with pytest.raises(ValueError, match="single key"):
        R.split(R.split(R.key(0), 3))
    with pytest.raises(TypeError, match="key_data.dtype"):
        R.uniform(np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="end with"):
        R.uniform(np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match="scalar seed"):
        R.PRNGKey(np.arange(3))
    with pytest.raises(TypeError, match="integer"):
        R.PRNGKey(1.5)
    with pytest.raises(OverflowError):
        R.PRNGKey(2 ** 64)
    with pytest.raises(OverflowError):
        R.fold_in(R.PRNGKey(0), -1)
    with pytest.raises(TypeError, match="scalar"):
        R.fold_in(R.PRNGKey(0), np.arange(2))
    with pytest.raises(TypeError, match="expected key_data to have ndim"):  # JAX's
        R.normal("key")
    with pytest.raises(TypeError, match="PRNG key type"):
        R.normal({})
    with pytest.raises(ValueError, match="float dtype"):
        R.uniform(R.PRNGKey(0), dtype=jnp.int32)
    with pytest.raises(TypeError, match="integer dtypes"):
        R.randint(R.PRNGKey(0), (), 0, 3, dtype=jnp.float32)
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        R.gamma(R.PRNGKey(0), jnp.ones(3), shape=(2,))
    with pytest.raises(ValueError, match="broadcast-compatible"):
        R.gamma(R.PRNGKey(0), jnp.ones(3), shape=(1,))
    with pytest.raises(ValueError, match="larger sample"):
        R.choice(R.PRNGKey(0), 3, (4,), replace=False)


def test_fold_in_is_split_and_keys_are_distinct():
    """With partitionable threefry, fold_in(k, i) and split(k, n)[i] both hash the counter
    (0, i), so they coincide (as in JAX)."""
    k = R.PRNGKey(0)
    folded = np.stack([np.asarray(R.fold_in(k, i)) for i in range(50)])
    np.testing.assert_array_equal(folded, R.split(k, 50))
    assert len({tuple(row) for row in folded.tolist()}) == 50


# --- distributions -------------------------------------------------------------------------

N = 4000
KS_CRITICAL = 1.95 / math.sqrt(N)  # the 0.1% level of the Kolmogorov-Smirnov statistic


def ks_statistic(samples, cdf):
    x = np.sort(np.asarray(samples, np.float64).ravel())
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


def _erf(x):
    return np.vectorize(math.erf)(x)


def normal_cdf(x):
    return 0.5 * (1 + _erf(x / math.sqrt(2)))


def gamma_cdf(a):
    """The regularized lower incomplete gamma P(a, x), by its power series."""
    def cdf(x):
        x = np.asarray(x, np.float64)
        term = np.ones_like(x) / a
        total = term.copy()
        for n in range(1, 400):
            term = term * x / (a + n)
            total += term
        with np.errstate(divide="ignore"):
            log_front = a * np.log(x) - x - math.lgamma(a)
        return np.where(x > 0, np.exp(log_front) * total, 0.0)
    return cdf


def student_t3_cdf(x):
    s = x / math.sqrt(3)
    return 0.5 + (s / (1 + s * s) + np.arctan(s)) / math.pi


CONTINUOUS = {
    # name: (sample(key, n), cdf, mean, variance)
    "uniform": (lambda k: R.uniform(k, (N,), minval=-1.0, maxval=3.0),
                lambda x: (x + 1) / 4, 1.0, 16 / 12),
    "normal": (lambda k: R.normal(k, (N,)), normal_cdf, 0.0, 1.0),
    "exponential": (lambda k: R.exponential(k, (N,)), lambda x: 1 - np.exp(-x), 1.0, 1.0),
    "laplace": (lambda k: R.laplace(k, (N,)),
                lambda x: np.where(x < 0, 0.5 * np.exp(x), 1 - 0.5 * np.exp(-x)), 0.0, 2.0),
    "logistic": (lambda k: R.logistic(k, (N,)), lambda x: 1 / (1 + np.exp(-x)), 0.0,
                 math.pi ** 2 / 3),
    "cauchy": (lambda k: R.cauchy(k, (N,)), lambda x: 0.5 + np.arctan(x) / math.pi, None,
               None),
    "gumbel": (lambda k: R.gumbel(k, (N,)), lambda x: np.exp(-np.exp(-x)), np.euler_gamma,
               math.pi ** 2 / 6),
    "gamma0.5": (lambda k: R.gamma(k, 0.5, (N,)), gamma_cdf(0.5), 0.5, 0.5),
    "gamma3": (lambda k: R.gamma(k, 3.0, (N,)), gamma_cdf(3.0), 3.0, 3.0),
    "beta2,3": (lambda k: R.beta(k, 2.0, 3.0, (N,)),
                lambda x: 6 * x ** 2 - 8 * x ** 3 + 3 * x ** 4, 0.4, 0.04),
    "t3": (lambda k: R.t(k, 3.0, (N,)), student_t3_cdf, None, None),  # heavy tails
    "chisquare4": (lambda k: R.chisquare(k, 4.0, (N,)), lambda x: gamma_cdf(2.0)(x / 2), 4.0,
                   8.0),
    "pareto3": (lambda k: R.pareto(k, 3.0, (N,)), lambda x: 1 - x ** -3.0, 1.5, 0.75),
    "truncated_normal": (
        lambda k: R.truncated_normal(k, -0.5, 1.5, (N,)),
        lambda x: (normal_cdf(x) - normal_cdf(-0.5)) / (normal_cdf(1.5) - normal_cdf(-0.5)),
        None, None),
}


@pytest.mark.parametrize("name", CONTINUOUS)
def test_continuous_distribution(name):
    sample, cdf, mean, var = CONTINUOUS[name]
    x = np.asarray(sample(R.PRNGKey(123)), np.float64)
    assert x.shape == (N,) and np.all(np.isfinite(x))
    assert ks_statistic(x, cdf) < KS_CRITICAL
    if mean is not None:
        assert abs(x.mean() - mean) < 5 * math.sqrt(var / N)
    if var is not None and name not in ("pareto3",):  # pareto's fourth moment is infinite
        assert abs(x.var() - var) < 0.1 * var


def test_supports():
    k = R.PRNGKey(5)
    tn = np.asarray(R.truncated_normal(k, 0.5, 0.7, (N,)))
    assert np.all((tn > 0.5) & (tn < 0.7))
    u = np.asarray(R.uniform(k, (N,), minval=2.0, maxval=2.5))
    assert np.all((u >= 2.0) & (u < 2.5))
    ints = np.asarray(R.randint(k, (N,), -3, 4))
    assert ints.min() == -3 and ints.max() == 3
    counts = np.bincount(ints + 3)
    assert np.all(np.abs(counts / N - 1 / 7) < 5 * math.sqrt(1 / 7 * 6 / 7 / N))
    assert np.all(np.asarray(R.randint(k, (10,), 5, 5)) == 5)  # empty range gives minval
    u8 = np.asarray(R.randint(k, (N,), 0, 256, jnp.uint8))
    assert u8.dtype == np.uint8 and u8.max() == 255
    assert np.asarray(R.bits(k, (3,), jnp.uint16)).dtype == np.uint16
    b = np.asarray(R.beta(k, 0.5, 0.5, (N,)))
    assert np.all((b >= 0) & (b <= 1))
    ball = np.asarray(R.ball(k, 3, shape=(500,)))
    assert ball.shape == (500, 3) and np.all(np.linalg.norm(ball, axis=-1) <= 1)
    assert set(np.unique(np.asarray(R.rademacher(k, (100,))))) == {-1, 1}


def test_dirichlet():
    alpha = np.array([0.5, 1.0, 2.5])
    x = np.asarray(R.dirichlet(R.PRNGKey(2), alpha, (N,)))
    assert_close(x.sum(-1), np.ones(x.shape[:-1]), rtol=1e-5)
    np.testing.assert_allclose(x.mean(0), alpha / alpha.sum(), atol=0.02)


@pytest.mark.parametrize("lam", [0.7, 4.0, 30.0])
def test_poisson(lam):
    x = np.asarray(R.poisson(R.PRNGKey(3), lam, (N,)))
    assert x.dtype == np.int32 and x.min() >= 0
    assert abs(x.mean() - lam) < 5 * math.sqrt(lam / N)
    assert abs(x.var() - lam) < 0.12 * lam
    k = np.arange(x.max() + 1)
    pmf = np.exp(k * math.log(lam) - lam - np.array([math.lgamma(i + 1) for i in k]))
    assert np.max(np.abs(np.cumsum(np.bincount(x)) / N - np.cumsum(pmf))) < KS_CRITICAL


def test_bernoulli_categorical_choice_frequencies():
    k = R.PRNGKey(4)
    assert abs(np.asarray(R.bernoulli(k, 0.3, (N,))).mean() - 0.3) < 0.04
    logits = np.log(np.array([0.1, 0.2, 0.7]))
    cat = np.asarray(R.categorical(k, logits, shape=(N,)))
    np.testing.assert_allclose(np.bincount(cat, minlength=3) / N, [0.1, 0.2, 0.7], atol=0.03)
    p = np.array([0.5, 0.0, 0.25, 0.25], np.float32)
    ch = np.asarray(R.choice(k, 4, (N,), p=p))
    np.testing.assert_allclose(np.bincount(ch, minlength=4) / N, p, atol=0.03)
    no_repeat = np.asarray(R.choice(k, 10, (10,), replace=False))
    assert sorted(no_repeat.tolist()) == list(range(10))
    picked = np.asarray(R.categorical(k, jnp.zeros((5, 6)), axis=1, shape=(5,), replace=False))
    assert picked.shape == (5,)


def test_permutation():
    k = R.PRNGKey(6)
    x = np.arange(20).reshape(4, 5)
    rows = np.asarray(R.permutation(k, x))
    assert sorted(rows.tolist()) == x.tolist() and rows.tolist() != x.tolist()
    cols = np.asarray(R.permutation(k, x, axis=1, independent=True))
    assert all(sorted(r) == sorted(o) for r, o in zip(cols.tolist(), x.tolist()))
    firsts = np.array([np.asarray(R.permutation(R.fold_in(k, i), 3))[0] for i in range(300)])
    np.testing.assert_allclose(np.bincount(firsts) / 300, [1 / 3] * 3, atol=0.1)
    with pytest.warns(DeprecationWarning):
        np.testing.assert_array_equal(R.shuffle(k, jnp.arange(5)),
                                      R.permutation(k, jnp.arange(5), independent=True))


def test_linalg_samplers():
    try:
        cov = np.array([[2.0, 0.6], [0.6, 1.0]], np.float32)
        x = np.asarray(R.multivariate_normal(R.PRNGKey(8), np.zeros(2), cov, (N,)))
        q = np.asarray(R.orthogonal(R.PRNGKey(9), 4))
    except NotImplementedError as e:
        pytest.skip(f"needs nbjax.numpy.linalg: {e}")
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.15)
    for method in ("eigh", "svd"):
        y = np.asarray(R.multivariate_normal(R.PRNGKey(8), np.ones(2), cov, (N,), method=method))
        np.testing.assert_allclose(np.cov(y.T), cov, atol=0.15)
        np.testing.assert_allclose(y.mean(0), 1, atol=0.1)
    np.testing.assert_allclose(q @ q.T, np.eye(4), atol=1e-5)


# --- traceability --------------------------------------------------------------------------

SAMPLERS = {
    "uniform": lambda k: R.uniform(k, (3,)),
    "normal": lambda k: R.normal(k, (2, 2)),
    "randint": lambda k: R.randint(k, (4,), 0, 10),
    "bits": lambda k: R.bits(k, (3,)),
    "permutation": lambda k: R.permutation(k, 6),
    "categorical": lambda k: R.categorical(k, jnp.zeros(4), shape=(3,)),
    "gamma": lambda k: R.gamma(k, jnp.array([0.5, 2.0])),
    "poisson": lambda k: R.poisson(k, 3.0, (3,)),
    "split": lambda k: R.split(k, 3),
    "fold_in": lambda k: R.fold_in(k, 7),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_jaxpr_jit_and_vmap(name):
    f = SAMPLERS[name]
    key = R.PRNGKey(11)
    eager = np.asarray(f(key))
    np.testing.assert_array_equal(staged(f, key), eager)
    np.testing.assert_array_equal(nbjax.jit(f)(key), eager)
    keys = R.split(key, 3)
    loop = np.stack([np.asarray(f(k)) for k in keys])
    np.testing.assert_array_equal(nbjax.vmap(f)(keys), loop)
    np.testing.assert_array_equal(nbjax.jit(nbjax.vmap(f))(keys), loop)
    np.testing.assert_array_equal(nbjax.vmap(f, in_axes=1, out_axes=1)(keys.T),
                                  np.moveaxis(loop, 0, 1))


def test_vmap_over_typed_keys_and_parameters():
    keys = R.split(R.key(1), 4)
    out = nbjax.vmap(lambda k: R.normal(k, (2,)))(keys)
    np.testing.assert_array_equal(out, np.stack([np.asarray(R.normal(k, (2,))) for k in keys]))
    new = nbjax.vmap(lambda k: R.split(k))(keys)
    assert isinstance(new, R.PRNGKeyArray) and new.shape == (4, 2)
    a = jnp.array([0.5, 1.0, 4.0])
    k = R.PRNGKey(2)
    np.testing.assert_array_equal(nbjax.vmap(lambda a: R.gamma(k, a, (2,)))(a),
                                  np.stack([np.asarray(R.gamma(k, ai, (2,))) for ai in a]))
    seeds = jnp.arange(3)
    np.testing.assert_array_equal(nbjax.vmap(R.PRNGKey)(seeds),
                                  np.stack([np.asarray(R.PRNGKey(int(s))) for s in seeds]))
    np.testing.assert_array_equal(nbjax.jit(R.PRNGKey)(5), R.PRNGKey(5))
    typed = nbjax.jit(lambda k: R.split(k, 2))(R.key(3))
    assert isinstance(typed, R.PRNGKeyArray)
    np.testing.assert_array_equal(R.key_data(typed), R.split(R.PRNGKey(3), 2))


def test_threefry_batching_and_zero_tangent():
    rng = np.random.default_rng(0)
    words = [rng.integers(0, 2 ** 32, (3, 4), dtype=np.uint32) for _ in range(4)]
    f = R.threefry_2x32
    loop = [f(*(w[i] for w in words)) for i in range(3)]
    for axes in [(0, 0, 0, 0), (0, None, 1, 0)]:
        args = [w if ax == 0 else (w[0] if ax is None else w.T) for w, ax in zip(words, axes)]
        if axes[1] is None:
            expected = [f(words[0][i], words[1][0], words[2][i], words[3][i]) for i in range(3)]
        else:
            expected = loop
        out = nbjax.vmap(f, in_axes=axes)(*args)
        for j in range(2):
            np.testing.assert_array_equal(out[j], np.stack([np.asarray(e[j]) for e in expected]))
    _, tangents = nbjax.jvp(lambda x: R.threefry_2x32(x, x, x, x)[0], (np.uint32([1, 2]),),
                            (np.zeros(2, nbjax.core.dtypes.float0),))
    assert tangents.dtype == nbjax.core.dtypes.float0


def test_grad_of_reparameterized_normal():
    z = np.asarray(R.normal(R.PRNGKey(0), (5,)))
    g_mu, g_sigma = nbjax.grad(
        lambda mu, sigma: jnp.sum(mu + sigma * R.normal(R.PRNGKey(0), (5,))), (0, 1))(1.0, 2.0)
    assert_close(g_mu, 5.0)
    assert_close(g_sigma, z.sum(), rtol=1e-6, scale=np.abs(z).sum())


def test_gamma_implicit_gradient(x64_if):
    """The gradient of a gamma sample x with respect to a is the implicit one, holding the
    CDF fixed: dx/da = -(dF/da) / f(x). (It is not the derivative of the Marsaglia-Tsang
    transform for a fixed key, so finite differences of samples would not match it.) dF/da
    is checked by central differences of the CDF in float64."""
    x64_if(True)
    key = R.PRNGKey(21)
    a = np.array([0.3, 0.9, 1.5, 4.0, 12.0])
    x = np.asarray(R.gamma(key, a))
    grad = np.asarray(nbjax.grad(lambda a: R.gamma(key, a).sum())(a))
    h = 1e-5
    dF_da = np.array([(gamma_cdf(ai + h)(xi) - gamma_cdf(ai - h)(xi)) / (2 * h)
                      for ai, xi in zip(a, x)])
    pdf = np.exp((a - 1) * np.log(x) - x - np.array([math.lgamma(ai) for ai in a]))
    assert_close(grad, -dF_da / pdf, rtol=1e-5)
    assert_close(R.random_gamma_grad(a, x), grad, rtol=1e-12)
    # Forward mode, jit, and loggamma (d log x / da = (dx / da) / x) agree with it.
    _, t = nbjax.jvp(lambda a: nbjax.jit(R.gamma)(key, a), (a,), (np.ones_like(a),))
    assert_close(t, grad, rtol=1e-12)
    assert_close(nbjax.grad(lambda a: R.loggamma(key, a).sum())(a), grad / x,
                 rtol=1e-8)
    check_jaxpr(nbjax.make_jaxpr(nbjax.grad(lambda a: R.gamma(key, a).sum()))(a).jaxpr)


def test_gamma_gradient_is_unbiased():
    """E[x] = a for x ~ Gamma(a), so the mean of the sample gradients is near 1."""
    for a in (0.5, 3.0):
        g = nbjax.grad(lambda a: jnp.mean(R.gamma(R.PRNGKey(4), a, (N,))))(a)
        assert abs(float(g) - 1) < 0.05


def test_samplers_take_jax_out_sharding_keyword():
    """``out_sharding=None`` changes nothing (an nbjax array is whole on one device); a
    sharding asked for is refused, saying so."""
    k = R.key(3)
    np.testing.assert_array_equal(R.uniform(k, (3,), out_sharding=None),
                                  R.uniform(k, (3,)))
    assert R.randint(k, (2,), 0, 5, out_sharding=None).dtype == np.int32
    with pytest.raises(NotImplementedError, match="random.normal: out_sharding is not"):
        R.normal(k, (2,), out_sharding=nbjax.sharding.P("x"))


@pytest.mark.cpu_compiler
@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("log_space", [False, True])
def test_gamma_compiles_into_native_rejection_loops(log_space, x64):
    """Under jit, ``random_gamma`` is its decomposition (the vmapped rejection loops, a
    native while loop over kernels), not a host step evaluating them op by op: the samples
    are the eager ones (to the few ulp by which compiled log and pow may differ), for shapes
    a < 1 (boosted) and a >= 1 mixed, batched keys, and no elements."""
    from nbjax.random.gamma import random_gamma_p
    with nbjax.enable_x64(x64):
        a = jnp.array([[0.3, 1.0, 2.5, 40.0]] * 50)
        keys = R.split(R.PRNGKey(5), 50)

        def sample(keys, a):
            return random_gamma_p.bind(keys, a, impl="threefry2x32", log_space=log_space)
        compiled = nbjax.jit(sample)
        eps = np.finfo(a.dtype).eps
        np.testing.assert_allclose(compiled(keys, a), sample(keys, a), rtol=8 * eps,
                                   atol=8 * eps)
        report = compiled.lower(keys, a).compile().as_text()
        assert "calling back into Python" not in report and "while" in report, report[:600]
        empty = jnp.zeros((0, 4), a.dtype)
        assert compiled(keys[:0], empty).shape == (0, 4)

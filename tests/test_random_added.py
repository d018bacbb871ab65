"""The samplers added to nbjax.random: JAX's values for the same key (recorded from JAX 0.10.2,
and compared live when JAX is importable), the distributions' moments, dtypes and errors."""

import numpy as np
import pytest

import nbjax
import nbjax.random as random

try:
    import jax.random as jrandom
except ImportError:  # the recorded values still check nbjax
    jrandom = None

# name: (args after the key, JAX's values for PRNGKey(7))
CASES = {
    "lognormal": ((0.7, (4,)), [1.371444582939148, 3.9251935482025146, 0.6967228055000305,
                                0.9060523509979248]),
    "maxwell": (((4,),), [2.070286750793457, 0.7144703269004822, 1.4999796152114868,
                          1.7056729793548584]),
    "double_sided_maxwell": ((1.0, 2.0, (4,)), [-1.4771909713745117, -4.170105457305908,
                                                3.7603445053100586, 5.872409343719482]),
    "rayleigh": ((1.5, (4,)), [1.3322023153305054, 0.34014514088630676, 2.3184962272644043,
                               1.9115722179412842]),
    "wald": ((1.3, (4,)), [0.3925773799419403, 1.5275630950927734, 0.7226343750953674,
                           0.7973179221153259]),
    "geometric": ((0.3, (6,)), [2, 1, 4, 3, 1, 2]),
    "triangular": ((0.0, 0.3, 2.0, (4,)), [0.9473394155502319, 1.7062269449234009,
                                           0.46041178703308105, 0.625030517578125]),
    "weibull_min": ((2.0, 1.5, (4,)), [2.1584150791168213, 4.761716365814209,
                                       1.0135159492492676, 1.4019919633865356]),
    "f": ((3.0, 5.0, (4,)), [0.48384320735931396, 1.1076066493988037, 1.6477009057998657,
                             0.6544947624206543]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_values_as_jax_for_the_same_key(name):
    args, recorded = CASES[name]
    out = np.asarray(getattr(random, name)(random.PRNGKey(7), *args))
    expected = np.array(recorded, out.dtype)
    assert out.dtype == (np.int32 if name == "geometric" else np.float32)
    # through log/sqrt/pow a few ulps may differ from XLA's; integers must be equal
    np.testing.assert_allclose(out, expected, rtol=4e-6, atol=0)
    if jrandom is not None:
        theirs = np.asarray(getattr(jrandom, name)(jrandom.PRNGKey(7), *args))
        np.testing.assert_allclose(out, theirs, rtol=4e-6, atol=0)
    typed = np.asarray(getattr(random, name)(random.key(7), *args))
    np.testing.assert_array_equal(typed, out)


def _mean_var(name, *args, n=20000):
    x = np.asarray(getattr(random, name)(random.PRNGKey(1), *args, shape=(n,)), np.float64)
    return x.mean(), x.var()


@pytest.mark.parametrize("name,args,mean,var", [
    ("lognormal", (0.5,), np.exp(0.125), (np.exp(0.25) - 1) * np.exp(0.25)),
    ("rayleigh", (2.0,), 2.0 * np.sqrt(np.pi / 2), (4 - np.pi) / 2 * 4.0),
    ("wald", (1.5,), 1.5, 1.5 ** 3),
    ("geometric", (0.25,), 4.0, 0.75 / 0.25 ** 2),
    ("triangular", (0.0, 1.0, 4.0), 5 / 3, (0 + 16 + 1 - 0 - 0 - 4) / 18),
    ("f", (5.0, 10.0), 10 / 8, 2 * 100 * 13 / (5 * 64 * 6)),
])
def test_moments(name, args, mean, var):
    got_mean, got_var = _mean_var(name, *args)
    # the sample mean is within 5 standard errors
    assert abs(got_mean - mean) < 5 * np.sqrt(var / 20000), (got_mean, mean)
    assert abs(got_var - var) < 0.1 * var, (got_var, var)


def test_maxwell_weibull_and_double_sided_shapes():
    x = np.asarray(random.maxwell(random.PRNGKey(2), (20000,)), np.float64)
    assert abs(x.mean() - 2 * np.sqrt(2 / np.pi)) < 0.02
    w = np.asarray(random.weibull_min(random.PRNGKey(3), 2.0, 3.0, (20000,)), np.float64)
    assert abs(w.mean() - 2.0 * 0.8929795) < 0.02  # scale * Gamma(1 + 1/3)
    d = random.double_sided_maxwell(random.PRNGKey(4), np.zeros(3), 1.0, (5,))
    assert d.shape == (5, 3)  # shape, then the parameters' shape (as JAX)
    assert random.double_sided_maxwell(random.PRNGKey(4), np.zeros(3), 1.0).shape == (3, 3)


def test_dtypes_errors_and_key_dtype():
    assert random.geometric(random.PRNGKey(0), 0.5, (3,), np.int16).dtype == np.int16
    with pytest.raises(ValueError, match="int dtype"):
        random.geometric(random.PRNGKey(0), 0.5, dtype=np.float32)
    with pytest.raises(ValueError, match="float dtype"):
        random.rayleigh(random.PRNGKey(0), 1.0, dtype=np.int32)
    with pytest.raises(ValueError, match="broadcast"):
        random.wald(random.PRNGKey(0), np.ones(3), shape=(4,))
    with nbjax.enable_x64():
        assert random.lognormal(random.PRNGKey(0), 1.0, (2,), np.float64).dtype == np.float64
    assert random.key_dtype() == random.key(0).dtype
    assert random.key_dtype("rbg") == random.key(0, impl="rbg").dtype != random.key(0).dtype
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        random.key_dtype("philox4x32")  # JAX has it, nbjax does not


def test_samplers_under_jit_and_vmap():
    keys = random.split(random.PRNGKey(5), 3)
    batched = nbjax.vmap(lambda k: random.triangular(k, 0.0, 0.5, 1.0, (4,)))(keys)
    looped = np.stack([random.triangular(k, 0.0, 0.5, 1.0, (4,)) for k in keys])
    np.testing.assert_array_equal(batched, looped)
    jitted = nbjax.jit(lambda k: random.wald(k, 2.0, (4,)))(keys[0])
    np.testing.assert_allclose(jitted, random.wald(keys[0], 2.0, (4,)), rtol=1e-6)
    grad = nbjax.grad(lambda s: random.rayleigh(random.PRNGKey(0), s, (3,)).sum())(2.0)
    np.testing.assert_allclose(grad, random.rayleigh(random.PRNGKey(0), 1.0, (3,)).sum(),
                               rtol=1e-6)


# The families whose samplers refuse parameters of a type wider than the samples' (JAX's
# _check_all_safe_to_cast), with how many parameters each takes.
SAFE_CAST_FAMILIES = {"t": 1, "chisquare": 1, "pareto": 1, "rayleigh": 1, "wald": 1,
                      "lognormal": 1, "beta": 2, "f": 2, "triangular": 3}


@pytest.mark.parametrize("name", sorted(SAFE_CAST_FAMILIES))
def test_parameters_wider_than_the_samples_raise_type_promotion_errors(name):
    """float32 parameters for float16 samples raise JAX's TypePromotionError; Python numbers
    (weakly typed), float16 parameters and float32 samples do not."""
    key, arity = random.key(0), SAFE_CAST_FAMILIES[name]
    sampler = getattr(random, name)

    def params(value):
        return [value * 0, value, value * 2][:arity] if name == "triangular" else \
            [value] * arity
    with pytest.raises(nbjax.dtypes.TypePromotionError,
                       match=f"In arguments to {name}, cannot safely cast argument of type "
                             "float32 to float16"):
        sampler(key, *params(np.float32(3.0)), shape=(2,), dtype=np.float16)
    for value, dtype in ((3.0, np.float16), (np.float16(3.0), np.float16),
                         (np.float32(3.0), np.float32), (np.int32(3), np.float16)):
        assert sampler(key, *params(value), shape=(2,), dtype=dtype).dtype == dtype
    if jrandom is not None:
        with pytest.raises(Exception) as raised:
            getattr(jrandom, name)(jrandom.key(0), *params(np.float32(3.0)), shape=(2,),
                                   dtype=np.float16)
        assert type(raised.value).__name__ == "TypePromotionError"

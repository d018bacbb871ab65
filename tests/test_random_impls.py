"""nbjax.random's PRNG implementations, threefry2x32, rbg and unsafe_rbg: JAX's keys, splits,
folds and draws for each, bit for bit (a few recorded from JAX 0.10.2 on the CPU, the rest
compared live when JAX is importable); typed keys of each kind, the default implementation
(config ``jax_default_prng_impl``), errors, and jit/vmap/grad over rbg keys."""

import re
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.random as R

try:
    import jax
    import jax.random as jrandom
except ImportError:  # the recorded values still check nbjax
    jax = jrandom = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX not installed")

IMPLS = ["threefry2x32", "rbg", "unsafe_rbg"]
RBG_IMPLS = ["rbg", "unsafe_rbg"]


@pytest.fixture
def restore_default_impl():
    """Put the default implementation (nbjax's, and JAX's when importable) back after."""
    yield
    nbjax.config.update("jax_default_prng_impl", "threefry2x32")
    if jax is not None:
        jax.config.update("jax_default_prng_impl", "threefry2x32")


def data(keys):
    return np.asarray(R.key_data(keys))


def assert_same(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


# --- recorded from JAX 0.10.2 (CPU) --------------------------------------------------------

RECORDED = {  # split(key(0)), fold_in(key(5), 7), bits(key(0), (2,))
    "rbg": ([[1797259609, 2579123966, 1797259609, 2579123966],
             [928981903, 3453687069, 928981903, 3453687069]],
            [1394159668, 1590028285, 1394159668, 1590028285], [1713891541, 3781805453]),
    "unsafe_rbg": ([[1713891541, 3781805453, 3159862348, 2600524760],
                    [3614953066, 3503513258, 724076422, 3372229774]],
                   [2104303640, 250182030, 1106406590, 1983638451], [1713891541, 3781805453]),
}


@pytest.mark.parametrize("impl", RBG_IMPLS)
def test_recorded_keys_and_bits(impl):
    split, folded, bits = RECORDED[impl]
    np.testing.assert_array_equal(data(R.key(0, impl=impl)), [0, 0, 0, 0])
    np.testing.assert_array_equal(R.PRNGKey(5, impl=impl), [0, 5, 0, 5])
    np.testing.assert_array_equal(data(R.split(R.key(0, impl=impl))), split)
    np.testing.assert_array_equal(data(R.fold_in(R.key(5, impl=impl), 7)), folded)
    np.testing.assert_array_equal(R.bits(R.key(0, impl=impl), (2,)), bits)


# --- compared with JAX ---------------------------------------------------------------------

def both(impl, seed):
    """The typed key of ``seed`` in nbjax and in JAX."""
    return R.key(seed, impl=impl), jrandom.key(seed, impl=impl)


@needs_jax
@pytest.mark.parametrize("impl", IMPLS)
def test_keys_split_and_fold_in_match_jax(impl):
    for seed in (0, 42, 2 ** 31 + 5):
        ours, theirs = both(impl, seed)
        assert_same(data(ours), jrandom.key_data(theirs))
        assert_same(R.PRNGKey(seed, impl=impl), jrandom.PRNGKey(seed, impl=impl))
        for num in (2, 3, 0, (2, 3)):
            assert_same(data(R.split(ours, num)), jrandom.key_data(jrandom.split(theirs, num)))
        for x in (0, 7, 2 ** 32 - 1):
            assert_same(data(R.fold_in(ours, x)), jrandom.key_data(jrandom.fold_in(theirs, x)))


SHAPES = [(), (3,), (2, 3), (5, 4, 3)]


@needs_jax
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_draws_match_jax(impl, shape):
    ours, theirs = both(impl, 7)
    for dtype in (np.uint8, np.uint16, np.uint32):
        assert_same(R.bits(ours, shape, dtype), jrandom.bits(theirs, shape, dtype))
    for dtype in (np.float32, np.float16, "bfloat16"):
        assert_same(R.uniform(ours, shape, dtype), jrandom.uniform(theirs, shape, dtype))
        assert_same(R.normal(ours, shape, dtype), jrandom.normal(theirs, shape, dtype))
    for dtype in (np.int32, np.int8, np.uint16):
        assert_same(R.randint(ours, shape, -3, 100, dtype),
                     jrandom.randint(theirs, shape, -3, 100, dtype))


@needs_jax
@pytest.mark.parametrize("impl", IMPLS)
def test_permutation_and_categorical_match_jax(impl):
    ours, theirs = both(impl, 3)
    x = np.arange(12).reshape(3, 4)
    assert_same(R.permutation(ours, 10), jrandom.permutation(theirs, 10))
    assert_same(R.permutation(ours, x, 1), jrandom.permutation(theirs, x, 1))
    assert_same(R.permutation(ours, x, 1, independent=True),
                jrandom.permutation(theirs, x, 1, independent=True))
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]], np.float32))
    assert_same(R.categorical(ours, logits), jrandom.categorical(theirs, logits))
    assert_same(R.categorical(ours, logits, shape=(4, 2)),
                jrandom.categorical(theirs, logits, shape=(4, 2)))
    assert_same(R.categorical(ours, logits[0], shape=(2,), replace=False),
                jrandom.categorical(theirs, logits[0], shape=(2,), replace=False))


@needs_jax
@pytest.mark.parametrize("impl", RBG_IMPLS)
def test_64_bit_draws_match_jax(impl):
    with nbjax.enable_x64(), jax.enable_x64(True):
        ours, theirs = both(impl, 2 ** 40 + 3)
        assert_same(data(ours), jrandom.key_data(theirs))
        for shape in ((), (3,), (2, 3)):
            assert_same(R.bits(ours, shape, np.uint64), jrandom.bits(theirs, shape, np.uint64))
            assert_same(R.uniform(ours, shape, np.float64),
                        jrandom.uniform(theirs, shape, np.float64))
            assert_same(R.randint(ours, shape, -5, 2 ** 40, np.int64),
                        jrandom.randint(theirs, shape, -5, 2 ** 40, np.int64))


@needs_jax
@pytest.mark.parametrize("impl", RBG_IMPLS)
def test_raw_keys_follow_the_default_impl_as_in_jax(impl, restore_default_impl):
    nbjax.config.update("jax_default_prng_impl", impl)
    jax.config.update("jax_default_prng_impl", impl)
    ours, theirs = R.PRNGKey(11), jrandom.PRNGKey(11)
    assert_same(ours, theirs)
    assert_same(R.split(ours, 3), jrandom.split(theirs, 3))
    assert_same(R.fold_in(ours, 3), jrandom.fold_in(theirs, 3))
    assert_same(R.uniform(ours, (4,)), jrandom.uniform(theirs, (4,)))
    assert str(R.key(0).dtype) == str(jrandom.key(0).dtype)


# --- typed keys of each implementation -----------------------------------------------------

@pytest.mark.parametrize("impl, tag, size", [("threefry2x32", "fry", 2), ("rbg", "rbg", 4),
                                             ("unsafe_rbg", "urbg", 4)])
def test_typed_keys_print_and_name_their_impl(impl, tag, size):
    k = R.key(0, impl=impl)
    zeros = " ".join(["0"] * size)
    assert repr(k) == f"Array((), dtype=key<{tag}>) overlaying:\n[{zeros}]"
    assert str(k.dtype) == f"key<{tag}>" and k.dtype == R.key_dtype(impl)
    assert R.key_impl(k) == impl and isinstance(R.key_impl(k), str)
    keys = R.split(k, (2, 3))
    assert keys.shape == (2, 3) and data(keys).shape == (2, 3, size)
    assert R.key_impl(keys) == impl and keys.dtype == k.dtype
    assert keys.reshape(6).shape == (6,) and keys[1].dtype == k.dtype
    assert R.key_dtype(k.dtype) == k.dtype and R.key(0, dtype=k.dtype).dtype == k.dtype


def test_key_dtypes_and_keys_of_different_impls_differ():
    fry, rbg, urbg = (R.key(0, impl=impl) for impl in IMPLS)
    assert len({fry.dtype, rbg.dtype, urbg.dtype}) == 3
    with pytest.raises(TypeError, match="key<rbg>, key<urbg>"):
        rbg == urbg


@pytest.mark.parametrize("impl", IMPLS)
def test_wrap_key_data_round_trip(impl):
    keys = R.split(R.key(3, impl=impl), 4)
    raw = R.key_data(keys)
    wrapped = R.wrap_key_data(raw, impl=impl)
    assert wrapped.dtype == keys.dtype and R.key_impl(wrapped) == impl
    np.testing.assert_array_equal(wrapped == keys, True)
    np.testing.assert_array_equal(R.key_data(wrapped), raw)
    np.testing.assert_array_equal(R.uniform(wrapped[2], (3,)), R.uniform(keys[2], (3,)))
    assert R.wrap_key_data(raw, dtype=keys.dtype).dtype == keys.dtype


def test_errors():
    with pytest.raises(TypeError, match=r"end with \(4,\); got shape=\(3, 2\)"):
        R.wrap_key_data(np.zeros((3, 2), np.uint32), impl="rbg")
    with pytest.raises(TypeError, match=r"end with \(2,\); got shape=\(4,\)"):
        R.wrap_key_data(np.zeros(4, np.uint32))
    with pytest.raises(TypeError, match=r"end with \(2,\)"):
        R.normal(np.zeros(4, np.uint32))  # a raw key is of the default implementation
    unknown = re.escape('unrecognized PRNG implementation "philox4x32". Did you mean one of: '
                        '"threefry2x32", "rbg", "unsafe_rbg"?')
    for make in (lambda: R.key(0, impl="philox4x32"), lambda: R.PRNGKey(0, impl="philox4x32"),
                 lambda: R.wrap_key_data(np.zeros(2, np.uint32), impl="philox4x32"),
                 lambda: R.key_dtype("philox4x32")):
        with pytest.raises(ValueError, match=unknown):
            make()
    with pytest.raises(TypeError, match="unrecognized type"):
        R.key(0, impl=3)
    with pytest.raises(ValueError, match="both `impl` and `dtype`"):
        R.key(0, impl="rbg", dtype="rbg")
    with pytest.raises(ValueError, match="must be one of"):
        nbjax.default_prng_impl("philox4x32")
    with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32"):
        R.poisson(R.key(0, impl="rbg"), 3.0)  # as JAX


def test_default_impl_option(restore_default_impl):
    with nbjax.default_prng_impl("unsafe_rbg"):
        assert R.key_impl(R.key(0)) == "unsafe_rbg" and R.PRNGKey(1).shape == (4,)
        np.testing.assert_array_equal(R.split(R.PRNGKey(1)),
                                      data(R.split(R.key(1, impl="unsafe_rbg"))))
    assert R.key_impl(R.key(0)) == "threefry2x32"
    nbjax.config.update("jax_default_prng_impl", "rbg")
    assert R.key_impl(R.PRNGKey(0)) == "rbg"  # raw (4,) data read as an rbg key


# --- transformations -----------------------------------------------------------------------

def sample(k):
    return R.normal(k, (3,))


@pytest.mark.parametrize("impl", RBG_IMPLS)
def test_jit_and_vmap_give_the_eager_values(impl):
    k = R.key(1, impl=impl)
    keys = R.split(k, 3)
    looped = np.stack([sample(x) for x in keys])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled, rng_bit_generator called back: no fallback
        np.testing.assert_array_equal(nbjax.jit(sample)(k), sample(k))
    np.testing.assert_array_equal(nbjax.vmap(sample)(keys), looped)
    np.testing.assert_array_equal(nbjax.jit(nbjax.vmap(sample))(keys), looped)
    # JAX's own vmap of rng_bit_generator gives other bits than its eager calls; nbjax's
    # give each key's eager bits (what JAX's gamma gets with lax.map).
    draws = nbjax.vmap(lambda k: R.binomial(k, 30.0, 0.4, (4,)))(keys)
    np.testing.assert_array_equal(draws, np.stack([R.binomial(x, 30.0, 0.4, (4,))
                                                   for x in keys]))


@pytest.mark.parametrize("impl", RBG_IMPLS)
def test_transformations_return_keys_of_their_impl(impl):
    k = R.key(2, impl=impl)
    split = nbjax.jit(lambda k: R.split(k, 4))(k)
    assert isinstance(split, R.PRNGKeyArray) and split.dtype == k.dtype
    np.testing.assert_array_equal(data(split), data(R.split(k, 4)))
    folded = nbjax.vmap(lambda k: R.fold_in(k, 5))(R.split(k, 3))
    assert folded.dtype == k.dtype
    np.testing.assert_array_equal(data(folded), [data(R.fold_in(x, 5)) for x in R.split(k, 3)])
    grad = nbjax.grad(lambda a: R.gamma(k, a, (3,)).sum())
    np.testing.assert_allclose(nbjax.jit(grad)(2.0), grad(2.0), rtol=1e-6)
    assert "impl=" + impl in str(nbjax.make_jaxpr(lambda k: R.gamma(k, 2.0))(k))

"""lax.rng_bit_generator and lax.rng_uniform: JAX's CPU bits for the same key (recorded from
JAX 0.10.2, and compared live over many shapes and dtypes when JAX is importable), key
updates, dtypes, jit/vmap, and the errors."""

import numpy as np
import pytest

import nbjax
from nbjax import lax

try:
    import jax
except ImportError:  # the recorded values still check nbjax
    jax = None

KEY = np.array([0, 42, 1, 2], np.uint32)
# algorithm: (new key, bits of shape (2, 3)) from JAX 0.10.2 on CPU for KEY
RECORDED = {
    lax.RandomAlgorithm.RNG_THREE_FRY: ([0, 42, 4, 2], [[709564837, 2785676203, 2249681128],
                                                        [4281175804, 444958131, 4275608359]]),
    lax.RandomAlgorithm.RNG_PHILOX: ([0, 42, 3, 2], [[2045279911, 391726348, 1490865745],
                                                     [780254410, 3503059488, 378572451]]),
}
RECORDED[lax.RandomAlgorithm.RNG_DEFAULT] = RECORDED[lax.RandomAlgorithm.RNG_PHILOX]


@pytest.mark.parametrize("algorithm", list(lax.RandomAlgorithm))
def test_recorded_bits(algorithm):
    new_key, bits = lax.rng_bit_generator(KEY, (2, 3), algorithm=algorithm)
    want_key, want_bits = RECORDED[algorithm]
    assert bits.dtype == np.uint32 and new_key.dtype == np.uint32
    np.testing.assert_array_equal(np.asarray(new_key), want_key)
    np.testing.assert_array_equal(np.asarray(bits), want_bits)


SHAPES = [(), (0,), (1,), (5,), (6,), (2, 3), (3, 2), (3, 3), (3, 5), (5, 3), (2, 4), (4, 6),
          (1, 5), (5, 1), (3, 1, 5), (2, 5, 3), (3, 3, 3), (6, 2, 4)]


@pytest.mark.skipif(jax is None, reason="JAX not installed")
@pytest.mark.parametrize("algorithm", [1, 2])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bits_match_jax_on_cpu(algorithm, dtype):
    rng = np.random.default_rng(algorithm)
    for shape in SHAPES:
        key = rng.integers(0, 2 ** 32, 4, dtype=np.uint64).astype(np.uint32)
        if shape == (5,):  # the 64-bit counter wraps around
            key[2:] = 0xFFFFFFFF
        with jax.enable_x64(True):
            want = jax.lax.rng_bit_generator(key, shape, dtype,
                                             jax.lax.RandomAlgorithm(algorithm))
        with nbjax.enable_x64():
            got = lax.rng_bit_generator(key, shape, dtype, algorithm)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype, shape
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=str(shape))


def test_uint64_key_and_canonical_dtype():
    """A uint64[2] key is ``(key, counter)``; without x64, uint64 bits become uint32."""
    with nbjax.enable_x64():
        key64 = np.array([42 << 32, 1 | 2 << 32], np.uint64)
        new, bits = lax.rng_bit_generator(key64, (2, 3), algorithm=1)
        assert new.dtype == np.uint64
        np.testing.assert_array_equal(np.asarray(new), [42 << 32, 4 | 2 << 32])
        np.testing.assert_array_equal(
            np.asarray(bits), RECORDED[lax.RandomAlgorithm.RNG_THREE_FRY][1])
    _, bits = lax.rng_bit_generator(KEY, (3,), np.uint64)
    assert bits.dtype == np.uint32


def test_jit_vmap_and_jaxpr():
    def f(k):
        return lax.rng_bit_generator(k, (2, 3), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    keys = np.stack([KEY, KEY + 1, KEY * 3])
    for got, want in zip(nbjax.jit(f)(KEY), f(KEY)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    batched = nbjax.vmap(f)(keys)
    for i, k in enumerate(keys):
        for got, want in zip(batched, f(k)):
            np.testing.assert_array_equal(np.asarray(got)[i], np.asarray(want))
    text = str(nbjax.make_jaxpr(f)(KEY))
    assert "rng_bit_generator[" in text and "algorithm=RNG_THREE_FRY" in text


def test_rng_bit_generator_errors():
    with pytest.raises(TypeError, match="unsupported dtype int32"):
        lax.rng_bit_generator(KEY, (2,), np.int32)
    with pytest.raises(TypeError, match="key"):
        lax.rng_bit_generator(KEY[:2], (2,))


def test_rng_uniform_range_dtype_and_statefulness():
    f = nbjax.jit(lambda: lax.rng_uniform(np.float32(-2.0), np.float32(3.0), (1000,)))
    a, b = np.asarray(f()), np.asarray(f())
    assert a.dtype == np.float32 and a.shape == (1000,)
    assert (a >= -2).all() and (a < 3).all() and abs(a.mean() - 0.5) < 0.3
    assert not np.array_equal(a, b)  # a hidden state: each run draws new numbers
    ints = np.asarray(lax.rng_uniform(0, 10, (500,)))
    assert ints.dtype == np.int32 and set(ints.tolist()) == set(range(10))
    assert "rng_uniform[shape=(3,)]" in str(nbjax.make_jaxpr(
        lambda: lax.rng_uniform(0.0, 1.0, (3,)))())
    with pytest.raises(ValueError, match="must be scalars"):
        lax.rng_uniform(np.zeros(2), 1.0, (3,))
    with pytest.raises(ValueError, match="identical dtypes"):
        lax.rng_uniform(np.int32(0), np.float32(1), (3,))

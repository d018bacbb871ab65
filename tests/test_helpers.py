"""The shared helpers of tests/helpers.py: the comparison (what it accepts and what it rejects),
the random inputs and the staging."""

import numpy as np
import pytest

import nbjax.numpy as jnp
from helpers import assert_close, random_array, staged


def test_an_element_near_zero_is_judged_against_the_scale_of_its_terms():
    # The case of nbjax issue 13: a convolution output of 1.45e-4, a sum of terms of size ~1,
    # off by 4e-9 on another CPU.
    expected = np.array([2.1, 1.45e-4], np.float32)
    actual = expected + np.float32([0, 4e-9])
    assert_close(actual, expected, rtol=1e-5)  # the default scale: the largest |expected|
    assert_close(actual, expected, rtol=1e-5, scale=np.float32([2.5, 0.8]))
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        assert_close(actual, expected, rtol=1e-5, scale=np.float32([2.5, 1e-4]))
    with pytest.raises(AssertionError):
        assert_close(np.float32(1.45e-4 + 4e-9), np.float32(1.45e-4), rtol=1e-5)


def test_relative_tolerance_still_applies():
    assert_close([1000.0, 1.0], [1000.5, 1.0], rtol=1e-3)
    with pytest.raises(AssertionError):
        assert_close([1000.0, 1.0], [1002.5, 1.0], rtol=1e-3)


def test_shapes_must_match_exactly():
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(np.ones(3), 1.0)
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(np.ones((1, 3)), np.ones(3))


def test_nans_at_the_same_positions_and_equal_infinities():
    assert_close([np.nan, np.inf, -np.inf, 1.0], [np.nan, np.inf, -np.inf, 1.0])
    for actual in ([1.0, np.inf, -np.inf, 1.0], [np.nan, -np.inf, -np.inf, 1.0],
                   [np.nan, 1e300, -np.inf, 1.0]):
        with pytest.raises(AssertionError):
            assert_close(actual, [np.nan, np.inf, -np.inf, 1.0], rtol=1e-3)


def test_all_zero_expected_asks_for_zeros():
    assert_close(np.zeros(3), np.zeros(3), rtol=1e-5)
    with pytest.raises(AssertionError):
        assert_close(np.float32([0, 1e-30, 0]), np.zeros(3), rtol=1e-5)


def test_integers_and_booleans_are_exact():
    assert_close(np.int32([1, 2]), np.int64([1, 2]), rtol=0.5)
    with pytest.raises(AssertionError):
        assert_close(np.int32([1, 2]), [1, 3], rtol=0.5)
    with pytest.raises(AssertionError):
        assert_close(np.array([True, False]), np.array([True, True]), rtol=0.5)


def test_complex_values_by_modulus():
    expected = np.array([1 + 1j, 1e-4j], np.complex64)
    assert_close(expected + np.complex64(4e-9j), expected, rtol=1e-5)
    with pytest.raises(AssertionError):
        assert_close(expected + np.complex64(1e-4), expected, rtol=1e-5)


ALL_KINDS = [np.bool_, np.int8, np.uint8, np.int32, np.uint64, np.float16, np.float32,
             np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", ALL_KINDS)
def test_random_array_dtype_shape_and_determinism(dtype):
    x = random_array(3, (4, 5), dtype)
    assert x.dtype == np.dtype(dtype) and x.shape == (4, 5)
    np.testing.assert_array_equal(x, random_array(np.random.default_rng(3), (4, 5), dtype))
    assert len(np.unique(x)) > 1


def test_random_array_ranges():
    ints = random_array(0, (200,), np.int8, low=-3, high=3)
    assert ints.min() == -3 and ints.max() == 3  # both ends included
    assert random_array(0, (200,), np.uint8).min() >= 0  # the default range, cut at 0
    floats = random_array(0, (200,), np.float32, low=0.5, high=2)
    assert floats.min() >= 0.5 and floats.max() < 2
    z = random_array(0, (200,), np.complex64, low=1, high=2)
    assert z.real.min() >= 1 and z.imag.min() >= 1
    with pytest.raises(ValueError, match="both bounds"):
        random_array(0, (3,), np.float32, low=0)


def test_random_array_special_values():
    x = random_array(1, (50,), np.float32, special=True)
    assert np.isnan(x).any() and np.isposinf(x).any() and np.isneginf(x).any()
    assert (np.signbit(x) & (x == 0)).any()
    i = random_array(1, (50,), np.int16, special=True)
    assert i.min() == np.iinfo(np.int16).min and i.max() == np.iinfo(np.int16).max
    z = random_array(1, (50,), np.complex64, special=True)
    assert np.isnan(z.real).any() and np.isfinite(z.imag).all()


def test_staged_keeps_the_output_tree_and_takes_pytree_arguments():
    x = np.arange(3, dtype=np.float32)
    out = staged(lambda d: (d["a"] * 2, {"s": jnp.sum(d["a"])}), {"a": x})
    assert isinstance(out, tuple) and set(out[1]) == {"s"}
    assert_close(out[0], x * 2)
    assert_close(out[1]["s"], x.sum())

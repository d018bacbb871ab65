"""The shared comparison of tests/helpers.py: what it accepts and what it rejects."""

import numpy as np
import pytest

from helpers import assert_close


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

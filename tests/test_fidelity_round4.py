"""Fidelity to JAX 0.10.2, round four: ``linalg.vector_norm`` keeps an integer dtype for
``ord`` 1 and inf (and wants an inexact one for 0); ``fft`` with ``norm`` of an empty axis,
JAX's invalid-``norm`` wording and its axis errors; ``round`` of float16 (scaled in float32)
and beyond the dtype's precision; ``select`` with non-boolean conditions; ``digitize`` of
complex bins; and the error wording of ``take``, ``take_along_axis`` and ``searchsorted``."""

import numpy as np
import pytest

import nbjax.numpy as jnp

from helpers import assert_close

I = jnp.array([1, -2, 3])


# --- linalg.vector_norm ---------------------------------------------------------------------

@pytest.mark.parametrize("ord_, dtype, value", [(1, np.int32, 6), (np.inf, np.int32, 3),
                                                (-np.inf, np.int32, 1), (2, np.float32, 14**.5)])
def test_vector_norm_of_ints_keeps_dtype(ord_, dtype, value):
    """JAX promotes only where the formula needs it (sqrt, powers)."""
    out = jnp.linalg.vector_norm(I, ord=ord_)
    assert out.dtype == dtype
    assert_close(out, value)


def test_vector_norm_of_bools():
    b = jnp.array([True, False, True])
    assert jnp.linalg.vector_norm(b, ord=np.inf).dtype == np.bool_
    assert jnp.linalg.vector_norm(b, ord=1).dtype == np.int32


def test_vector_norm_ord_zero_wants_inexact():
    with pytest.raises(ValueError, match="not inexact"):
        jnp.linalg.vector_norm(I, ord=0)
    out = jnp.linalg.vector_norm(jnp.array([1., 0, 2], jnp.float16), ord=0)
    assert out.dtype == np.float16 and float(out) == 2


def test_norm_still_promotes():
    assert jnp.linalg.norm(I, ord=1).dtype == np.float32


# --- fft --------------------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["ortho", "forward"])
@pytest.mark.parametrize("fn", ["fft", "ifft", "hfft", "fft2", "fftn"])
def test_fft_norm_of_an_empty_axis(fn, norm):
    out = getattr(jnp.fft, fn)(jnp.zeros((3, 0)), norm=norm)
    assert out.shape == (3, 0)


def test_fft_invalid_norm_wording():
    with pytest.raises(ValueError, match='^Invalid norm value bad; should be "backward","ortho" '
                                         'or "forward".$'):
        jnp.fft.fft(jnp.ones(4), norm="bad")


def test_fft_axis_errors():
    with pytest.raises(ValueError, match="^axis -1 is out of bounds for array of dimension 0$"):
        jnp.fft.fft(3.0)
    with pytest.raises(ValueError, match="^axis -2 is out of bounds for array of dimension 1$"):
        jnp.fft.fft2(jnp.ones(4))
    with pytest.raises(ValueError, match=r"fftn does not support repeated axes. Got axes "
                                         r"\(0, 0\)."):
        jnp.fft.fftn(jnp.ones(4), axes=(0, 0))


# --- round ------------------------------------------------------------------------------------

def test_round_float16_scales_in_float32():
    """6.85 (float16 6.8516) times 10 is 68.5 in float16, which rounds to even: 6.8."""
    out = jnp.round(jnp.array([6.85], jnp.float16), 1)
    assert out.dtype == np.float16
    assert_close(out, np.array([6.9], np.float16))


def test_round_beyond_precision_is_a_no_op():
    x = jnp.array([1.25, 3e30], jnp.float32)
    assert_close(jnp.round(x, 40), x)
    assert_close(jnp.round(jnp.array([2.5], jnp.float16), 5), [2.5])
    assert jnp.round(jnp.array(2.345), 2).weak_type


# --- select, digitize -------------------------------------------------------------------------

def test_select_non_boolean_conditions():
    out = jnp.select([jnp.array([0, 2, 0]), jnp.array([1., 1, 0])],
                     [jnp.array([1, 2, 3]), jnp.array([4, 5, 6])], -1)
    assert_close(out, [4, 2, -1])


def test_digitize_complex():
    x = jnp.array([1 + 1j, 3])
    assert_close(jnp.digitize(x, jnp.array([0, 2 + 0j, 4])), [1, 2])
    assert_close(jnp.digitize(x, jnp.array([4, 2 + 0j, 0])), [2, 1])


# --- error wording ----------------------------------------------------------------------------

def test_take_errors():
    with pytest.raises(ValueError, match="^Invalid mode 'bad' for np.take$"):
        jnp.take(jnp.ones(3), jnp.array([0]), mode="bad")
    with pytest.raises(ValueError, match="^indices must have an integer type$"):
        jnp.take(jnp.ones(3), jnp.array([0.]))
    with pytest.raises(ValueError, match='^Unknown gather mode "bad"$'):
        jnp.take_along_axis(jnp.ones((2, 2)), jnp.array([[0]]), axis=1, mode="bad")
    with pytest.raises(TypeError, match="^take_along_axis indices must be of integer type, "
                                        "got float32$"):
        jnp.take_along_axis(jnp.ones((2, 2)), jnp.array([[0.]]), axis=1)


def test_searchsorted_side_error():
    with pytest.raises(ValueError, match="^invalid argument side='middle', expected 'left' or "
                                         "'right'$"):
        jnp.searchsorted(jnp.arange(3), 1, side="middle")

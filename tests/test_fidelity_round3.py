"""Fidelity to JAX 0.10.2, round three: ml_dtypes scalars as operands (``bfloat16(2) * x``,
and so ``nn.gelu`` of bfloat16); reductions' ``where`` masks that do not broadcast (JAX's
ValueError), that broadcast the array up, and the order of their checks; bools summed without
``promote_integers``; ``nanmax``/``nanmin`` with ``initial``; the names in the errors of
``std``, ``median``, ``softmax``...; ``cumulative_sum``'s errors and ``cumsum`` of a Python
scalar; ``astype`` from complex; the complex refusals of ``clip``, ``hypot``, ``signbit``...;
and in ``nbjax.random``: complex ``lognormal``, the dtype checks of ``orthogonal`` and
``categorical``, shapes that do not broadcast, bool seeds, what counts as a raw key, and the
OverflowError of an int out of range."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import nbjax.nn as nn
import nbjax.numpy as jnp
import nbjax.random as random

from helpers import assert_close

W = np.array([[True, False, True], [False, True, True]])

# --- ml_dtypes scalars are operands ---------------------------------------------------------


def test_ml_dtypes_scalars_are_operands():
    """They are ``np.generic`` but not of module ``numpy``: JAX takes them, so Python must
    not fall back to ``bfloat16.__mul__`` (a TypeError)."""
    x = jnp.ones(2, jnp.bfloat16)
    out = ml_dtypes.bfloat16(2) * x
    assert out.dtype == jnp.bfloat16
    assert_close(out, [2, 2])
    assert (ml_dtypes.bfloat16(2) * jnp.ones(2)).dtype == np.float32
    assert (ml_dtypes.bfloat16(2) * jnp.ones(2, np.int32)).dtype == jnp.bfloat16
    assert (ml_dtypes.bfloat16(3) > x).dtype == np.bool_


def test_gelu_of_bfloat16():
    x = np.array([-1.5, 0, 2.5], jnp.bfloat16)
    out = nn.gelu(x)  # its tanh constant is a bfloat16 scalar
    assert out.dtype == jnp.bfloat16
    assert_close(out, nn.gelu(x.astype(np.float32)), rtol=1e-2)


# --- reductions: where masks ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["sum", "prod", "all", "any", "nansum", "nanprod", "nanmean",
                                  "nanvar"])
def test_where_that_does_not_broadcast_is_jnp_wheres_error(name):
    with pytest.raises(ValueError) as info:
        getattr(jnp, name)(np.ones((2, 3), np.float32), where=W[:, :2])
    assert str(info.value) == "Incompatible shapes for broadcasting: shapes=[(2, 2), (2, 3), ()]"
    with pytest.raises(ValueError, match=r"shapes=\[\(2, 2\), \(2, 3\), \(\)\]"):
        jnp.max(np.ones((2, 3), np.float32), where=W[:, :2], initial=0.0)


@pytest.mark.parametrize("name", ["mean", "var", "std"])
def test_mean_where_that_does_not_broadcast_is_broadcast_tos_error(name):
    """The count of the mask comes first, by ``broadcast_to(where, a.shape)``."""
    with pytest.raises(ValueError) as info:
        getattr(jnp, name)(np.ones((2, 3), np.float32), where=W[:, :2])
    assert str(info.value) == ("Incompatible types for broadcasting: input type=bool[2,2] and "
                               "requested type=bool[2,3]")


def test_where_broadcasts_size_one_axes_up():
    """JAX (not NumPy, which refuses) masks with ``jnp.where``: a size-1 axis of the array
    stretches to the mask's (values recorded from JAX 0.10.2)."""
    x = np.float32([[7.0]])
    out = jnp.sum(x, where=W)
    assert out.dtype == np.float32 and out.shape == ()
    assert_close(out, 28.0)
    assert_close(jnp.sum(x, axis=1, keepdims=True, where=W), [[14.0], [14.0]])
    assert_close(jnp.sum(np.ones((2, 3), np.float32), axis=1, keepdims=True,
                         where=np.array([True, False, True])), [[2.0], [2.0]])


def test_where_without_identity_is_checked_before_the_empty_reduction():
    with pytest.raises(ValueError) as info:
        jnp.max(np.zeros((0, 3), np.float32), where=W)
    assert str(info.value) == ("reduction operation max does not have an identity, so to use "
                               "a where mask one has to specify 'initial'")
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        jnp.min(np.zeros((0, 3), np.float32))


def test_bools_are_counted_without_promote_integers():
    bools = np.array([True, True, True])
    total = jnp.sum(bools, promote_integers=False)
    assert total.dtype == np.int32 and int(total) == 3
    product = jnp.prod(np.array([True, True, False]), promote_integers=False)
    assert product.dtype == np.int32 and int(product) == 0
    assert jnp.sum(np.int8([100, 100]), promote_integers=False).dtype == np.int8


def test_nan_extrema_with_initial_do_not_give_nan():
    x = np.float32([[np.nan, np.nan], [1, np.nan]])
    assert_close(jnp.nanmax(x, axis=1, initial=-5.0), [-5.0, 1.0])
    assert_close(jnp.nanmin(x, axis=1, initial=5.0), [5.0, 1.0])
    assert_close(jnp.nanmax(np.zeros((0, 2), np.float32), initial=10.0), 10.0)
    assert_close(jnp.nanmax(x, axis=1), [np.nan, 1.0])


@pytest.mark.parametrize("name", ["std", "nanstd", "median", "nanmedian"])
def test_reduction_errors_name_the_function_called(name):
    with pytest.raises(TypeError) as info:
        getattr(jnp, name)([1.0, 2.0])
    assert str(info.value) == (f"{name} requires ndarray or scalar arguments, got "
                               "<class 'list'> at position 0.")


# --- cumulative reductions ------------------------------------------------------------------

@pytest.mark.parametrize("name, what", [("cumulative_sum", "cumulative sum"),
                                        ("cumulative_prod", "cumulative product")])
def test_cumulative_array_api_errors(name, what):
    with pytest.raises(ValueError) as info:
        getattr(jnp, name)(np.ones((2, 3)))
    assert str(info.value) == ("The input array has rank 2, however axis was not set to an "
                               "explicit value. The axis argument is only optional for "
                               "one-dimensional arrays.")
    with pytest.raises(ValueError) as info:
        getattr(jnp, name)(np.float32(1))
    assert str(info.value) == (f"The input must be non-scalar to take a {what}, however a "
                               "scalar value or scalar array was given.")


def test_cumsum_of_a_python_scalar_is_one_dimensional():
    out = jnp.cumsum(2.5, axis=0)
    assert out.shape == (1,) and out.dtype == np.float32
    assert_close(out, [2.5])
    assert_close(jnp.cumprod(3, axis=-1), np.array([3], np.int32))
    with pytest.raises(ValueError, match="axis 0 is out of bounds for array of dimension 0"):
        jnp.cumsum(np.float32(2.5), axis=0)  # a NumPy scalar stays 0-d


# --- astype and the complex refusals --------------------------------------------------------

def test_astype_from_complex():
    z = np.complex64([5j, 0, 1])
    assert_close(jnp.asarray(z).astype(bool), [True, False, True])
    with pytest.warns(DeprecationWarning, match="Casting from complex to real dtypes"):
        out = jnp.astype(np.complex64([1.5 + 2j]), np.float32)
    assert out.dtype == np.float32
    assert_close(out, [1.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jnp.astype(z, np.complex64).dtype == np.complex64


COMPLEX_REFUSALS = [
    ("hypot", (1j, 1.0), "jnp.hypot is not well defined for complex-valued inputs. Please "
                         "convert to real values first, such as by using abs(x)"),
    ("clip", (np.ones(2), 1j, 2), "Clip received a complex value either through the input or "
                                  "the min/max keywords. Complex values have no ordering and "
                                  "cannot be clipped. Please convert to a real value or array "
                                  "by taking the real or imaginary components via "
                                  "jax.numpy.real/imag respectively."),
    ("signbit", (np.complex64(1j),), "jax.numpy.signbit is not well defined for complex64"),
    ("isposinf", (1j,), "isposinf/isneginf are not well defined for complex types"),
    ("isneginf", (1j,), "isposinf/isneginf are not well defined for complex types"),
    ("spacing", (1j,), "jnp.spacing is not defined for complex inputs."),
    ("i0", (np.complex64(1),), "Unsupported input type to jax.numpy.i0: complex64"),
]


@pytest.mark.parametrize("name, args, message", COMPLEX_REFUSALS)
def test_complex_refusals_are_jaxs(name, args, message):
    with pytest.raises(ValueError) as info:
        getattr(jnp, name)(*args)
    assert str(info.value) == message


@pytest.mark.parametrize("name, args", [("frexp", (np.complex64(1),)),
                                        ("copysign", (np.complex64(1), 1.0))])
def test_frexp_copysign_refuse_complex_in_jaxs_words(name, args):
    with pytest.raises(TypeError) as info:
        getattr(jnp, name)(*args)
    assert str(info.value) == f"{name} does not support complex-valued inputs"


def test_softmax_errors_name_what_jax_names():
    """JAX's ``softmax`` checks its input in ``jnp.max``; ``log_softmax`` itself."""
    with pytest.raises(TypeError, match=r"^max requires ndarray or scalar arguments"):
        nn.softmax([1.0, 2.0])
    with pytest.raises(TypeError, match=r"^log_softmax requires ndarray or scalar arguments"):
        nn.log_softmax([1.0, 2.0])


# --- nbjax.random ---------------------------------------------------------------------------

def test_lognormal_draws_complex_numbers():
    key = random.PRNGKey(0)
    out = random.lognormal(key, 0.5, (2,), np.complex64)
    assert out.dtype == np.complex64
    # values recorded from JAX 0.10.2: exp(0.5 * normal(key, (2,), complex64))
    assert_close(out, [0.92663807 - 1.0840765j, 0.5458168 - 0.47844973j], rtol=1e-5)
    assert_close(out, np.exp(0.5 * np.asarray(random.normal(key, (2,), np.complex64))),
                 rtol=1e-5)
    with pytest.raises(ValueError) as info:
        random.lognormal(key, dtype=np.int32)
    assert str(info.value) == ("dtype argument to `lognormal` must be a float or complex "
                               "dtype, got int32")


def test_dtype_errors_name_the_sampler_jax_names():
    key = random.PRNGKey(0)
    with pytest.raises(ValueError) as info:
        random.orthogonal(key, 3, dtype=np.int32)
    assert str(info.value) == ("dtype argument to `normal` must be a float or complex dtype, "
                               "got int32")
    for logits in (np.zeros(3, np.int32), np.zeros(3, np.complex64)):
        with pytest.raises(ValueError) as info:
            random.categorical(key, logits)
        assert str(info.value) == ("dtype argument to `gumbel` must be a float dtype, got "
                                   f"{logits.dtype}")


def test_parameter_shapes_that_do_not_broadcast():
    key = random.PRNGKey(0)
    with pytest.raises(ValueError) as info:
        random.bernoulli(key, np.float32([0.1, 0.9]), (3,))
    assert str(info.value) == "Incompatible shapes for broadcasting: shapes=[(3,), (2,)]"
    with pytest.raises(ValueError) as info:
        random.multivariate_normal(key, np.zeros((4, 2)), np.eye(2), (3,))
    assert str(info.value) == "Incompatible shapes for broadcasting: shapes=[(3,), (4,), ()]"
    with pytest.raises(ValueError, match="must be broadcast-compatible with shape argument"):
        random.bernoulli(key, np.zeros((2, 3)), (3,))  # broadcasts, but not to (3,)


def test_bool_seeds_are_ints():
    assert_close(random.PRNGKey(True), np.uint32([0, 1]))
    assert_close(random.key_data(random.key(False)), np.uint32([0, 0]))
    with pytest.raises(TypeError, match="PRNG key seed must be an integer"):
        random.PRNGKey(np.True_)  # a NumPy bool is not a Python int


def test_what_counts_as_a_raw_key():
    """JAX takes arrays and scalars as raw key data (refusing a scalar for its lack of
    ``ndim``), but not lists or tuples, even of uint32 words."""
    for bad in ([np.uint32(0), np.uint32(0)], (0, 0), {}):
        with pytest.raises(TypeError) as info:
            random.normal(bad)
        assert str(info.value) == f"unexpected PRNG key type {type(bad)}"
    for bad in (0, 1.5):
        with pytest.raises(TypeError) as info:
            random.split(bad)
        assert str(info.value) == ("nbjax encountered invalid PRNG key data: expected key_data "
                                   f"to have ndim, shape, and dtype attributes. Got {bad}")
    assert random.normal(np.uint32([0, 0])).dtype == np.float32


def test_python_ints_out_of_range_are_numpys_overflow_error():
    with pytest.raises(OverflowError) as info:
        random.fold_in(random.PRNGKey(0), -3)
    assert str(info.value) == "Python integer -3 out of bounds for uint32"
    with pytest.raises(OverflowError) as info:
        jnp.asarray(2 ** 40, np.int32)
    assert str(info.value) == "Python integer 1099511627776 out of bounds for int32"
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        jnp.uint8(300)

"""nbjax.nn against NumPy formulas (computed in float64), and stability at extreme inputs."""

import math

import numpy as np
import pytest

import nbjax
import nbjax.nn as nn
import nbjax.numpy as jnp
from helpers import assert_close, eager_and_traced

RNG = np.random.default_rng(3)
F16, F32 = np.float16, np.float32


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


_ERF = np.vectorize(math.erf)
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# name -> float64 NumPy reference
REFERENCE = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "sigmoid": _sigmoid,
    "log_sigmoid": lambda x: -np.logaddexp(0, -x),
    "softplus": lambda x: np.logaddexp(x, 0),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "silu": lambda x: x * _sigmoid(x),
    "swish": lambda x: x * _sigmoid(x),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "elu": _elu,
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "celu": lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)),
    "selu": lambda x: SELU_SCALE * _elu(x, SELU_ALPHA),
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
}


def tol(dtype):
    return 2e-2 if dtype == F16 else 2e-6


@pytest.mark.parametrize("name", sorted(REFERENCE))
@pytest.mark.parametrize("dtype", [F16, F32])
def test_activation(name, dtype):
    x = np.concatenate([RNG.uniform(-8, 8, 20), [0.0, -3.0, 3.0, 6.0, -1.0, 1.0]]).astype(dtype)
    out = getattr(nn, name)(x)
    assert out.dtype == dtype and out.shape == x.shape
    np.testing.assert_allclose(np.asarray(out, np.float64), REFERENCE[name](x.astype(np.float64)),
                               rtol=tol(dtype), atol=tol(dtype))


def test_activation_parameters_and_integer_inputs():
    x = np.linspace(-3, 3, 13).astype(F32)
    x64 = x.astype(np.float64)
    assert_close(nn.elu(x, alpha=0.5), _elu(x64, 0.5), rtol=1e-6)
    np.testing.assert_allclose(nn.celu(x, alpha=2.0),
                               np.maximum(x64, 0) + 2 * np.expm1(np.minimum(x64, 0) / 2),
                               rtol=1e-6, atol=1e-7)
    assert_close(nn.leaky_relu(x, negative_slope=0.2),
                 np.where(x64 >= 0, x64, 0.2 * x64), rtol=1e-6)
    np.testing.assert_allclose(nn.gelu(x, approximate=False),
                               x64 * (1 + _ERF(x64 / np.sqrt(2))) / 2, rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match="logistic does not accept dtype int32"):
        nn.sigmoid(np.arange(3))  # (as JAX: lax.logistic takes no integers)
    assert nn.elu(np.arange(3)).dtype == F32
    assert nn.relu(np.arange(-2, 2)).dtype == np.int32
    out = nn.hard_tanh(np.arange(-3, 3, dtype=np.int8))
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, np.clip(np.arange(-3, 3), -1, 1))


def test_extreme_inputs_stay_finite():
    big = np.array([1000.0, -1000.0, 88.0, -104.0], F32)
    np.testing.assert_allclose(nn.softplus(big), [1000.0, 0.0, 88.0, 0.0], atol=1e-30)
    np.testing.assert_allclose(nn.log_sigmoid(big), [0.0, -1000.0, 0.0, -104.0], atol=1e-30)
    np.testing.assert_allclose(nn.sigmoid(big), [1.0, 0.0, 1.0, _sigmoid(-104.0)], atol=1e-30)
    assert_close(nn.elu(big), [1000.0, -1.0, 88.0, -1.0])
    np.testing.assert_allclose(nn.silu(big), [1000.0, 0.0, 88.0, -104.0 * _sigmoid(-104.0)],
                               atol=1e-30)
    assert np.all(np.isfinite(nn.gelu(big))) and np.all(np.isfinite(nn.celu(big)))


# --- softmax family --------------------------------------------------------------------------

def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis, keepdims=True))
    return e / np.sum(e, axis, keepdims=True)


def _logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtype", [F16, F32])
def test_softmax_log_softmax(axis, dtype):
    x = RNG.normal(0, 3, (3, 4, 5)).astype(dtype)
    x64 = x.astype(np.float64)
    out = nn.softmax(x, axis)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, _softmax(x64, axis), rtol=tol(dtype), atol=tol(dtype) / 10)
    np.testing.assert_allclose(nn.log_softmax(x, axis), np.log(_softmax(x64, axis)),
                               rtol=tol(dtype), atol=tol(dtype))


def test_softmax_tuple_axis_and_where():
    x = RNG.normal(0, 2, (3, 4)).astype(F32)
    x64 = x.astype(np.float64)
    assert_close(nn.softmax(x, axis=(0, 1)), _softmax(x64, (0, 1)), rtol=1e-6)
    where = RNG.random((3, 4)) < 0.7
    where[:, 0] = True
    masked = np.where(where, x64, -np.inf)
    assert_close(nn.softmax(x, where=where), _softmax(masked, -1), rtol=1e-6)
    out = nn.log_softmax(x, where=where)
    with np.errstate(divide="ignore"):  # log of the masked-out zeros
        expected = np.where(where, np.log(_softmax(masked, -1)), 0)
    assert_close(np.where(where, out, 0), expected, rtol=1e-5)
    assert np.all(np.asarray(out)[~where] == -np.inf)


def test_softmax_extremes():
    assert_close(nn.softmax(np.array([1000.0, 1000.0], F32)), [0.5, 0.5])
    assert_close(nn.softmax(np.array([1e4, 0.0, -np.inf], F32)), [1, 0, 0])
    assert_close(nn.log_softmax(np.array([1000.0, 0.0], F32)), [0.0, -1000.0])


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp(axis, keepdims):
    x = RNG.normal(0, 5, (2, 3, 4)).astype(F32)
    out = nn.logsumexp(x, axis, keepdims=keepdims)
    assert_close(out, _logsumexp(x.astype(np.float64), axis, keepdims),
                 rtol=1e-6)


def test_logsumexp_extremes():
    inf = np.inf
    x = np.array([[-inf, -inf], [inf, 1.0], [1000.0, 1000.0], [-1000.0, -inf],
                  [np.nan, 1.0]], F32)
    out = np.asarray(nn.logsumexp(x, axis=1))
    assert_close(out, [-inf, inf, 1000.0 + np.log(2), -1000.0, np.nan])


def test_logsumexp_weights_and_sign():
    a = RNG.normal(size=(3, 4)).astype(F32)
    b = RNG.normal(size=(4,)).astype(F32)
    total = np.sum(b * np.exp(a.astype(np.float64)), axis=1)
    out, sign = nn.logsumexp(a, axis=1, b=b, return_sign=True)
    assert_close(out, np.log(np.abs(total)), rtol=1e-5)
    np.testing.assert_array_equal(sign, np.sign(total))
    b_pos = np.abs(b)
    assert_close(nn.logsumexp(a, axis=1, b=b_pos),
                 np.log(np.sum(b_pos * np.exp(a.astype(np.float64)), axis=1)),
                 rtol=1e-5)
    negative = nn.logsumexp(np.zeros(2, F32), b=np.array([-1.0, -1.0], F32))
    assert np.isnan(negative)


def test_logsumexp_leaves_terms_weighed_by_zero_out_of_its_shift():
    """A term ``b`` weighs by zero is no term: a huge one must not be the maximum that the
    others are shifted by (they would underflow to a sum of 0, and a log of -inf); its
    derivative is 0 (as in JAX)."""
    a, b = np.array([0.0, 1000.0, 1.0], F32), np.array([1.0, 0.0, 2.0], F32)
    want = np.log(1.0 + 2.0 * np.exp(1.0))
    assert_close(nn.logsumexp(a, b=b), want, rtol=1e-6)
    out, sign = nn.logsumexp(a, b=b, return_sign=True)
    assert_close(out, want, rtol=1e-6)
    assert float(sign) == 1.0
    assert_close(nbjax.scipy.special.logsumexp(np.array([0.0, 100.0], F32),
                                               b=np.array([1.0, 0.0], F32)), 0.0)
    weights = np.where(b != 0, b * np.exp(np.where(b != 0, a, 0.0).astype(np.float64)), 0.0)
    assert_close(nbjax.grad(lambda a: nn.logsumexp(a, b=b))(a), weights / weights.sum(),
                 rtol=1e-6)


def test_logsumexp_where():
    a = RNG.normal(size=(3, 4)).astype(F32)
    where = np.array([True, False, True, True])
    assert_close(nn.logsumexp(a, axis=1, where=where),
                 _logsumexp(a[:, where].astype(np.float64), 1), rtol=1e-6)


# --- one_hot and standardize ---------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    x = np.array([[0, 2, 5], [1, -1, 3]], np.int32)
    out = nn.one_hot(x, 4, axis=axis)
    expected = np.moveaxis((x[..., None] == np.arange(4)).astype(F32), -1, axis)
    assert out.dtype == F32
    np.testing.assert_array_equal(out, expected)
    assert nn.one_hot(x, 4, dtype=np.int8).dtype == np.int8


def test_one_hot_needs_concrete_integer_num_classes():
    with pytest.raises(nbjax.ConcretizationTypeError):
        nbjax.make_jaxpr(lambda n: nn.one_hot(np.arange(2), n))(3)
    with pytest.raises(TypeError, match="integer"):
        nn.one_hot(np.arange(2), 2.5)  # (as JAX: it was truncated to 2)
    assert nn.one_hot(np.arange(2), np.int32(3)).shape == (2, 3)


def test_standardize():
    x = RNG.normal(2, 3, (4, 5)).astype(F32)
    x64 = x.astype(np.float64)
    for axis in (-1, 0, (0, 1)):
        mean = x64.mean(axis, keepdims=True)
        var = x64.var(axis, keepdims=True)
        np.testing.assert_allclose(nn.standardize(x, axis), (x64 - mean) / np.sqrt(var + 1e-5),
                                   rtol=1e-4, atol=1e-4)
    assert_close(nn.standardize(x, mean=1.0, variance=4.0, epsilon=0.0),
                 (x64 - 1) / 2, rtol=1e-6)
    # far from 0, E[x^2] - E[x]^2 cancels; the two-pass variance does not
    far = x + F32(1e4)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(nn.standardize(far, algorithm="stable"), want, atol=2e-3)
    with pytest.raises(ValueError, match="Unknown algorithm"):
        nn.standardize(x, algorithm="exact")


# --- traced evaluation ---------------------------------------------------------------------

@pytest.mark.parametrize("fn", [nn.gelu, nn.softplus, nn.softmax, nn.log_softmax, nn.selu,
                                lambda x: nn.logsumexp(x, axis=0, return_sign=True),
                                lambda x: nn.one_hot(jnp.argmax(x, axis=1), 4)])
def test_traced_matches_eager(fn):
    x = RNG.normal(size=(3, 4)).astype(F32)
    eager_and_traced(fn, x)

"""``nbjax.nn`` on integer, bool and Python-scalar inputs, ``standardize`` and the shape
checks of ``dot_product_attention``, as in JAX.

JAX's activations are its formulas on the input as given (not converted to a float first),
so JAX's promotion decides the result: an int32 or bool array, or a Python int, meeting a
Python float constant gives a *weakly typed* float32; ``lax.logistic`` (sigmoid, silu, glu)
takes no integers or bools (TypeError), nor do ``neg`` (log_sigmoid, log1mexp) and ``sub``
(softmax, log_softmax) take bools.
"""

import math

import numpy as np
import pytest

import nbjax.numpy as jnp
from nbjax import nn

I32 = np.array([-2, 0, 1, 3], np.int32)
BOOL = np.array([True, False, True])

# (function, NumPy formula in float64) whose result on int32/bool arrays and Python ints is
# a weakly typed float32 in JAX.
_SELU = 1.0507009873554805, 1.6732632423543772
WEAK_FLOAT = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "celu": lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)),
    "selu": lambda x: _SELU[0] * np.where(x > 0, x, _SELU[1] * np.expm1(np.minimum(x, 0))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: 0.5 * np.clip(x + 1, 0, 2),
}


def _check(out, expected, weak):
    assert out.dtype == np.float32 and out.weak_type == weak
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(WEAK_FLOAT))
@pytest.mark.parametrize("x", [I32, BOOL, 2], ids=["int32", "bool", "pyint"])
def test_integer_inputs_give_weak_float32(name, x):
    _check(getattr(nn, name)(x), WEAK_FLOAT[name](np.asarray(x, np.float64)), weak=True)


@pytest.mark.parametrize("x", [BOOL, 2], ids=["bool", "pyint"])
def test_mish_and_soft_sign_of_bool_and_python_int_are_weak(x):
    xf = np.asarray(x, np.float64)
    _check(nn.soft_sign(x), xf / (np.abs(xf) + 1), weak=True)
    _check(nn.mish(x), xf * np.tanh(np.logaddexp(xf, 0)), weak=True)


def test_int32_arrays_stay_strong_where_jax_keeps_them_strong():
    xf = I32.astype(np.float64)
    _check(nn.soft_sign(I32), xf / (np.abs(xf) + 1), weak=False)  # int32 / int32: strong
    _check(nn.log_sigmoid(I32), -np.logaddexp(-xf, 0), weak=False)


def test_python_int_log1mexp_and_log_sigmoid_are_weak():
    _check(nn.log1mexp(2), math.log(-math.expm1(-2)), weak=True)
    _check(nn.log_sigmoid(2), -math.log1p(math.exp(-2)), weak=True)


def test_squareplus_of_bool_and_gelu_of_python_float_are_strong():
    # (squareplus: bool + int32 b; gelu: its constants are NumPy scalars of x's dtype)
    _check(nn.squareplus(BOOL), (BOOL + np.sqrt(BOOL + 4.0)) / 2, weak=False)
    _check(nn.gelu(0.7), 0.7 * 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi)
                                                       * (0.7 + 0.044715 * 0.7 ** 3))),
           weak=False)
    _check(nn.gelu(0.7, approximate=False), 0.7 * (1 + math.erf(0.7 / math.sqrt(2))) / 2,
           weak=False)


@pytest.mark.parametrize("name", ["sigmoid", "silu", "swish"])
@pytest.mark.parametrize("x", [I32, BOOL, 2], ids=["int32", "bool", "pyint"])
def test_logistic_rejects_integers(name, x):
    with pytest.raises(TypeError, match="logistic does not accept dtype"):
        getattr(nn, name)(x)


def test_glu_rejects_integers():
    with pytest.raises(TypeError, match="logistic does not accept dtype int32"):
        nn.glu(np.array([[1, 2]], np.int32))


@pytest.mark.parametrize("name,op", [("softmax", "sub"), ("log_softmax", "sub"),
                                     ("log_sigmoid", "neg"), ("log1mexp", "neg")])
def test_bool_rejected(name, op):
    with pytest.raises(TypeError, match=f"{op} does not accept dtype bool"):
        getattr(nn, name)(BOOL)


def test_softmax_of_integers_is_float32():
    out = nn.softmax(I32)
    e = np.exp(I32 - I32.max())
    _check(out, e / e.sum(), weak=False)


def test_standardize_clips_the_fast_variance_and_rejects_complex():
    # E[x^2] - E[x]^2 rounds below 0 here; JAX clips it at 0, so the result stays finite.
    x = np.full(3, 1234.567, np.float32)
    assert np.all(np.isfinite(np.asarray(nn.standardize(x))))
    with pytest.raises(ValueError, match="complex"):
        nn.standardize(np.complex64([1 + 1j, 2, 3]))


def _qkv(q_shape=(1, 3, 2, 4), kv_shape=(1, 5, 2, 4)):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in (q_shape, kv_shape, kv_shape)]


@pytest.mark.parametrize("change,message", [
    (lambda q, k, v: (q, q, np.swapaxes(q, 1, 2)),
     r"value shape should be \[1, 3, 2, 4\]: but got \(1, 2, 3, 4\)"),
    (lambda q, k, v: (q, k, v.astype(np.float16)), "value dtype should be float32"),
    (lambda q, k, v: (q.astype(np.float16), k, v), "query dtype should be float32"),
    (lambda q, k, v: (q[..., :3], k, v), r"query shape should be \[1, -1, -1, 4\]"),
    (lambda q, k, v: (np.concatenate([q, q]), k, v), r"query shape should be \[1, -1, -1, 4\]"),
])
def test_attention_checks_query_and_value(change, message):
    with pytest.raises(ValueError, match=message):
        nn.dot_product_attention(*change(*_qkv()))


@pytest.mark.parametrize("kwargs,message", [
    (dict(mask=np.ones((1, 2, 3, 5), np.int32)), "mask dtype should be bool"),
    (dict(mask=np.ones((1, 1, 2, 3, 5), bool)), "mask ndim should be 4, but got 5"),
    (dict(bias=np.ones((1, 1, 1, 3, 5), np.float32)), "bias ndim should be 4, but got 5"),
    (dict(query_seq_lengths=np.array([2, 3], np.int32)),
     r"query_seq_lengths shape should be \[1\]"),
    (dict(key_value_seq_lengths=np.array([4.0])),
     "key_value_seq_lengths dtype should be int32"),
])
def test_attention_checks_masks_and_lengths(kwargs, message):
    with pytest.raises(ValueError, match=message):
        nn.dot_product_attention(*_qkv(), **kwargs)


def test_attention_with_lengths_still_matches_numpy():
    q, k, v = _qkv()
    out = nn.dot_product_attention(q, k, v, key_value_seq_lengths=jnp.array([4]))
    logits = np.einsum("btnh,bsnh->bnts", q, k) / 2.0
    logits[..., 4:] = -np.inf
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, np.einsum("bnts,bsnh->btnh", p, v), rtol=1e-5, atol=1e-6)

"""The jax.nn names added to nbjax.nn, against float64 NumPy formulas (and JAX's values when
JAX is importable), with their gradients and vmap."""

import math

import numpy as np
import pytest

import nbjax
import nbjax.nn as nn
import nbjax.numpy as jnp
from nbjax.test_util import check_grads

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None

RNG = np.random.default_rng(7)


def _softplus(x):
    return np.logaddexp(x, 0)


REFERENCE = {
    "identity": lambda x: x,
    "tanh": np.tanh,
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip((x + 1) / 2, 0, 1),
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "glu": lambda x: x[..., :x.shape[-1] // 2] / (1 + np.exp(-x[..., x.shape[-1] // 2:])),
}


def _close(actual, expected, rtol=2e-6):
    expected = np.asarray(expected, np.float64)
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=rtol,
                               atol=rtol * max(1.0, float(np.max(np.abs(expected), initial=0))))


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_activation_matches_numpy_and_jax(name):
    x = (RNG.standard_normal((3, 8)) * 2).astype(np.float32)
    x[0, :3] = [-1.0, 1.0, 0.0]  # the kinks of the sparse functions
    out = getattr(nn, name)(x)
    assert out.dtype == np.float32
    _close(out, REFERENCE[name](x.astype(np.float64)))
    if jax is not None:
        _close(out, getattr(jax.nn, name)(x))


@pytest.mark.parametrize("name", ["squareplus", "mish", "glu", "sparse_plus", "tanh"])
def test_activation_grads_and_vmap(name):
    x = (RNG.standard_normal((2, 4)) * 2).astype(np.float32)
    fn = getattr(nn, name)
    check_grads(lambda v: fn(v), (x[0],), order=2, eps=1e-2, rtol=2e-2, atol=2e-2)
    batched = nbjax.vmap(fn)(x)
    _close(batched, np.stack([fn(row) for row in x]))


def test_glu_needs_an_even_axis():
    with pytest.raises(ValueError, match="divisible by 2"):
        nn.glu(jnp.ones((2, 3)))
    _close(nn.glu(np.ones((4, 2), np.float32), axis=0), np.full((2, 2), 1 / (1 + np.exp(-1))))


def test_log1mexp_is_accurate_at_both_ends_and_its_derivative_too():
    x = np.array([1e-6, 0.1, 0.5, math.log(2), 1.0, 5.0, 30.0], np.float32)
    expected = np.log(-np.expm1(-x.astype(np.float64)))
    _close(nn.log1mexp(x), expected, rtol=1e-6)
    _close(nbjax.vmap(nbjax.grad(nn.log1mexp))(x), 1 / np.expm1(x.astype(np.float64)),
           rtol=1e-5)
    if jax is not None:
        _close(nn.log1mexp(x), jax.nn.log1mexp(x), rtol=1e-6)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (0, True)])
def test_logmeanexp(axis, keepdims):
    x = (RNG.standard_normal((3, 5)) * 10).astype(np.float32)
    x64 = x.astype(np.float64)
    n = x.size if axis is None else x.shape[axis]
    m = x64.max(axis=axis, keepdims=True)
    expected = np.log(np.exp(x64 - m).sum(axis=axis, keepdims=True) / n) + m
    expected = expected if keepdims else np.squeeze(expected, axis)
    _close(nn.logmeanexp(x, axis=axis, keepdims=keepdims), expected, rtol=1e-5)
    where = x > 0
    out = nn.logmeanexp(x, axis=1, where=where)
    rows = [np.log(np.mean(np.exp(r[w].astype(np.float64)))) for r, w in zip(x, where)]
    _close(out, rows, rtol=1e-5)


def _attention_reference(q, k, v, bias=None, mask=None, scale=None, causal=False):
    """float64 NumPy attention on [B, T, N, H] (keys/values repeated for grouped heads)."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    groups = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    logits = np.einsum("btnh,bsnh->bnts", q, k) * (scale or 1 / np.sqrt(q.shape[-1]))
    if bias is not None:
        logits = logits + bias
    keep = np.ones(logits.shape, bool)
    if mask is not None:
        keep &= mask
    if causal:
        keep &= np.tril(np.ones(logits.shape[-2:], bool))
    logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v)


@pytest.mark.parametrize("heads,kv_heads,causal,with_bias,with_mask", [
    (2, 2, False, False, False), (4, 2, True, False, False), (2, 1, False, True, True)])
def test_dot_product_attention(heads, kv_heads, causal, with_bias, with_mask):
    B, T, S, H = 2, 3, 5 if not causal else 3, 4
    q = RNG.standard_normal((B, T, heads, H)).astype(np.float32)
    k = RNG.standard_normal((B, S, kv_heads, H)).astype(np.float32)
    v = RNG.standard_normal((B, S, kv_heads, H)).astype(np.float32)
    bias = RNG.standard_normal((1, heads, T, S)).astype(np.float32) if with_bias else None
    mask = RNG.random((B, 1, T, S)) > 0.3 if with_mask else None
    out = nn.dot_product_attention(q, k, v, bias, mask, is_causal=causal)
    assert out.shape == q.shape
    _close(out, _attention_reference(q, k, v, bias, mask, causal=causal), rtol=1e-5)
    if jax is not None:
        _close(out, jax.nn.dot_product_attention(q, k, v, bias, mask, is_causal=causal),
               rtol=1e-5)


def test_dot_product_attention_lengths_window_no_batch_and_grads():
    q = RNG.standard_normal((2, 4, 2, 3)).astype(np.float32)
    k = RNG.standard_normal((2, 4, 2, 3)).astype(np.float32)
    v = RNG.standard_normal((2, 4, 2, 3)).astype(np.float32)
    kw = dict(query_seq_lengths=np.array([4, 2], np.int32),
              key_value_seq_lengths=np.array([3, 4], np.int32), local_window_size=1, scale=0.5)
    out = nn.dot_product_attention(q, k, v, **kw)
    mask = np.ones((2, 1, 4, 4), bool)
    for b, (ql, kl) in enumerate([(4, 3), (2, 4)]):
        mask[b, :, ql:, :] = False
        mask[b, :, :, kl:] = False
    i = np.arange(4)
    mask &= np.abs(i[:, None] - i[None, :]) <= 1
    expected = _attention_reference(q, k, v, mask=mask, scale=0.5)
    expected[1, 2:] = 0  # query rows past the length are zero
    _close(out, expected, rtol=1e-5)
    if jax is not None:
        _close(out, jax.nn.dot_product_attention(q, k, v, **kw), rtol=1e-5)
    _close(nn.dot_product_attention(q[0], k[0], v[0]), _attention_reference(q[:1], k[:1], v[:1])[0],
           rtol=1e-5)
    check_grads(lambda q: nn.dot_product_attention(q, k, v, is_causal=True), (q,), order=1,
                eps=1e-2, rtol=2e-2, atol=2e-2)

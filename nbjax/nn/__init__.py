"""``nbjax.nn``: activation functions, softmax and friends, as in ``jax.nn``.

Each is a few ``jnp`` operations, written to stay finite where the naive formula overflows:
``softplus`` is ``logaddexp(x, 0)``, and ``softmax``/``logsumexp`` subtract the maximum first.
They are JAX's formulas on the input as given, not converted to a float first, so that the
result's dtype and weak type, and the errors, are JAX's: ``elu`` of an int32 array is a weakly
typed float32 (the int meets a Python float), ``sigmoid`` of one raises TypeError (``logistic``
takes no integers), ``softmax`` of a bool array too (``sub`` takes no bools).
"""

import math
import operator

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..core import dtypes, get_aval
from ..custom_derivatives import custom_jvp
from ..numpy.creation import concrete_argument
from ..numpy.util import (broadcast_together, canonicalize_axis, check_arraylike,
                          promote_args_inexact)
from .scaled import get_scaled_dot_general_config, scaled_dot_general, scaled_matmul
from . import initializers  # noqa: F401  (nbjax.nn.initializers.glorot_normal ...)

__all__ = [
    "relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "soft_sign", "silu", "swish",
    "gelu", "elu", "leaky_relu", "celu", "selu", "hard_tanh", "hard_sigmoid", "hard_silu",
    "hard_swish", "softmax", "log_softmax", "logsumexp", "one_hot", "standardize", "normalize",
    "identity", "tanh", "squareplus", "sparse_plus", "sparse_sigmoid", "mish", "glu",
    "log1mexp", "logmeanexp", "dot_product_attention", "scaled_matmul", "scaled_dot_general",
    "get_scaled_dot_general_config",
]


def _float(name, x):
    """``x`` as an inexact array (``logsumexp`` of integers is a float)."""
    x = _arraylike(name, x)
    if not dtypes.is_inexact(x.dtype):
        x = jnp.astype(x, dtypes.default_float())
    return x


def _arraylike(name, x):
    """``x`` as an array (a Python scalar weakly typed), TypeError if it is not array-like."""
    check_arraylike(name, x)
    return jnp.asarray(x)


def _zero_outside(inside):
    """A JVP that passes the tangent where ``inside(x)`` and gives 0 elsewhere: at the kinks
    (relu at 0, relu6 at 0 and 6) the derivative is 0, as in JAX, not the 1/2 that
    ``maximum``'s tie-splitting rule would give."""
    return lambda g, ans, x: jnp.where(inside(x), g, jnp.zeros_like(g))


@custom_jvp
def relu(x):
    """``max(x, 0)``."""
    return jnp.maximum(x, 0)


relu.defjvps(_zero_outside(lambda x: x > 0))


@custom_jvp
def relu6(x):
    """``min(max(x, 0), 6)``."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(_zero_outside(lambda x: (x > 0) & (x < 6)))


def sigmoid(x):
    """``1 / (1 + exp(-x))``, the logistic function."""
    return lax.logistic(x)


def softplus(x):
    """``log(1 + exp(x))``, computed as ``logaddexp(x, 0)`` so large ``x`` gives ``x``."""
    return jnp.logaddexp(x, 0)


def log_sigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``, finite for very negative ``x``."""
    return jnp.negative(softplus(jnp.negative(_arraylike("log_sigmoid", x))))


def soft_sign(x):
    """``x / (|x| + 1)``."""
    x = _arraylike("soft_sign", x)
    return x / (jnp.abs(x) + 1)


def silu(x):
    """``x * sigmoid(x)`` (also called swish)."""
    x = _arraylike("silu", x)
    return x * sigmoid(x)


swish = silu


def gelu(x, approximate=True):
    """Gaussian error linear unit: ``x * Phi(x)``; by default the tanh approximation. The
    constants have ``x``'s dtype (a strong one: gelu of a Python float is strongly typed, as
    in JAX)."""
    [x] = promote_args_inexact("gelu", x)
    if approximate:
        sqrt_2_over_pi = np.sqrt(2 / np.pi).astype(x.dtype)
        return x * (0.5 * (1.0 + jnp.tanh(sqrt_2_over_pi * (x + 0.044715 * x ** 3))))
    sqrt_half = np.sqrt(0.5).astype(x.dtype)
    return jnp.asarray(0.5 * x * lax.erfc(-x * sqrt_half), dtype=x.dtype)


def elu(x, alpha=1.0):
    """``x`` for positive inputs, ``alpha * (exp(x) - 1)`` otherwise."""
    x = _arraylike("elu", x)
    safe = jnp.where(x > 0, 0.0, x)  # keeps expm1 of large positive x out of the result
    return jnp.where(x > 0, x, alpha * jnp.expm1(safe))


def leaky_relu(x, negative_slope=0.01):
    """``x`` for non-negative inputs, ``negative_slope * x`` otherwise."""
    x = _arraylike("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


def celu(x, alpha=1.0):
    """Continuously differentiable ELU: ``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``."""
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """Scaled ELU with the self-normalizing constants of Klambauer et al. (2017)."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def hard_tanh(x):
    """``x`` clipped to ``[-1, 1]`` (integers stay integers)."""
    check_arraylike("hard_tanh", x)
    x = jnp.asarray(x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def hard_sigmoid(x):
    """``relu6(x + 3) / 6``, a piecewise-linear sigmoid."""
    return relu6(_arraylike("hard_sigmoid", x) + 3.0) / 6.0


def hard_silu(x):
    """``x * hard_sigmoid(x)``."""
    x = _arraylike("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def identity(x):
    """``x`` itself (as an array)."""
    check_arraylike("identity", x)
    return jnp.asarray(x)


tanh = jnp.tanh


def squareplus(x, b=4):
    """``(x + sqrt(x^2 + b)) / 2``, a smooth ReLU (So, 2021)."""
    check_arraylike("squareplus", x, b)
    x, b = jnp.asarray(x), jnp.asarray(b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


def sparse_plus(x):
    """0 below -1, ``(x + 1)^2 / 4`` on ``[-1, 1]``, ``x`` above 1: softplus's sparse twin."""
    x = _arraylike("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x):
    """``clip((x + 1) / 2, 0, 1)``, the derivative of ``sparse_plus``."""
    return 0.5 * jnp.clip(_arraylike("sparse_sigmoid", x) + 1.0, 0.0, 2.0)


def mish(x):
    """``x * tanh(softplus(x))``."""
    x = _arraylike("mish", x)
    return x * jnp.tanh(softplus(x))


def glu(x, axis=-1):
    """Gated linear unit: the first half of ``x`` along ``axis`` times the sigmoid of the
    second half."""
    x = _arraylike("glu", x)
    if x.shape[axis] % 2:
        raise ValueError(f"glu: axis size must be divisible by 2, got {x.shape[axis]}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


@custom_jvp
def log1mexp(x):
    """``log(1 - exp(-x))``: through ``expm1`` for small ``x``, ``log1p`` for large ones
    (Maechler's split at log 2), so neither end loses precision."""
    x = _arraylike("log1mexp", x)
    return jnp.where(x < math.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """``logsumexp(x) - log(n)``, ``n`` the number of elements reduced (those in ``where``)."""
    lse = logsumexp(x, axis=axis, keepdims=keepdims, where=where)
    ones = jnp.ones(jnp.shape(x), get_aval(lse).dtype)
    count = jnp.sum(ones, axis=axis, keepdims=keepdims, where=where)
    return lse - jnp.log(count)


# --- attention -----------------------------------------------------------------------------

def _as_4d(t):
    t = jnp.asarray(t)
    return jnp.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t


def _check_attention_operand(t, shape, dtype, name):
    """JAX's checks of a ``dot_product_attention`` operand (after ``_as_4d``): its rank, its
    dtype (when ``dtype`` is given) and each dimension that ``shape`` fixes (not -1), each a
    ValueError saying what it should be."""
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
    if any(want not in (-1, got) for want, got in zip(shape, t.shape)):
        raise ValueError(f"{name} shape should be {shape}: but got {t.shape}")


def _check_attention_operands(q, k, v, bias, mask, q_lengths, kv_lengths):
    """Value as key, query as key in batch and head size, a boolean mask, int32 lengths
    per batch element: JAX's checks, before any arithmetic can fail less clearly."""
    B, S, K, H = k.shape
    _check_attention_operand(v, [B, S, K, H], k.dtype, "value")
    _check_attention_operand(q, [B, -1, -1, H], k.dtype, "query")
    _check_attention_operand(mask, [-1] * 4, np.dtype(bool), "mask")
    _check_attention_operand(bias, [-1] * 4, None, "bias")
    _check_attention_operand(q_lengths, [B], np.dtype(np.int32), "query_seq_lengths")
    _check_attention_operand(kv_lengths, [B], np.dtype(np.int32), "key_value_seq_lengths")


def _attention_mask(shape, mask, is_causal, q_lengths, kv_lengths, window):
    """The boolean ``[B, N, T, S]`` mask of the logits that take part, or None for all."""
    B, N, T, S = shape
    keep = None if mask is None else jnp.broadcast_to(mask, shape)

    def both(m):
        return m if keep is None else jnp.logical_and(keep, m)
    q_pos = jnp.arange(T)[:, None]
    k_pos = jnp.arange(S)[None, :]
    if is_causal:
        keep = both(jnp.broadcast_to(q_pos >= k_pos, shape))
    if window is not None:
        left, right = (window, window) if isinstance(window, int) else window
        keep = both(jnp.broadcast_to((q_pos <= k_pos + left) & (q_pos >= k_pos - right), shape))
    if q_lengths is not None or kv_lengths is not None:
        pad = jnp.ones((B, 1, T, S), bool)
        if q_lengths is not None:
            pad = pad & (jnp.arange(T)[None, None, :, None] < q_lengths[:, None, None, None])
        if kv_lengths is not None:
            pad = pad & (jnp.arange(S)[None, None, None, :] < kv_lengths[:, None, None, None])
        keep = both(jnp.broadcast_to(pad, shape))
    return keep


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None, return_residual=False):
    """Scaled dot-product attention, ``softmax(scale * q k^T + bias, masked) v``, on
    ``[B, T, N, H]`` queries and ``[B, S, K, H]`` keys/values (``N`` a multiple of ``K``:
    grouped-query attention; the batch axis may be left out). Masked logits get a large
    negative number, the softmax runs in float32 and query rows past ``query_seq_lengths``
    are zero, as in JAX's "xla" implementation (the only one here)."""
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation {implementation!r} is not "
                         "available in nbjax; use None or 'xla'")
    out_shape = jnp.shape(query)
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    bias = None if bias is None else _as_4d(bias)
    mask = None if mask is None else _as_4d(mask)
    query_seq_lengths = None if query_seq_lengths is None else jnp.asarray(query_seq_lengths)
    key_value_seq_lengths = (None if key_value_seq_lengths is None
                             else jnp.asarray(key_value_seq_lengths))
    _check_attention_operands(q, k, v, bias, mask, query_seq_lengths, key_value_seq_lengths)
    B, T, N, H = q.shape
    K = k.shape[2]
    if N % K:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    if N != K:  # grouped queries: every key/value head serves N // K query heads
        k, v = jnp.repeat(k, N // K, axis=2), jnp.repeat(v, N // K, axis=2)
    logits_dtype = jnp.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("BTNH,BSNH->BNTS", q, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.asarray(1.0 / math.sqrt(H) if scale is None else scale,
                                  logits_dtype)
    if bias is not None:
        logits = (logits + bias).astype(logits_dtype)
    keep = _attention_mask(logits.shape, mask, is_causal, query_seq_lengths,
                           key_value_seq_lengths, local_window_size)
    if keep is not None:
        large_negative = -0.7 * min(float(jnp.finfo(logits_dtype).max),
                                    float(jnp.finfo(np.float32).max))
        logits = jnp.where(keep, logits, jnp.asarray(large_negative, logits_dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(k.dtype)
    encoded = jnp.einsum("BNTS,BSNH->BTNH", probs, v)
    if query_seq_lengths is not None:
        rows = jnp.arange(T)[None, :] < query_seq_lengths[:, None]
        encoded = encoded * rows[:, :, None, None].astype(encoded.dtype)
    encoded = jnp.reshape(encoded, out_shape)
    if not return_residual:
        return encoded
    residual = jnp.transpose(logsumexp(logits, axis=-1).astype(k.dtype), (0, 2, 1))
    return encoded, lax.stop_gradient(jnp.reshape(residual, out_shape[:-1]))


# --- normalisations over an axis -----------------------------------------------------------

def _shifted(x, axis, where):
    """``x - max(x)`` along ``axis`` (the max over ``where`` only), so exp cannot overflow.
    ``jnp.max`` checks ``x`` first: a list is its TypeError, as in JAX's ``softmax``."""
    x_max = jnp.max(x, axis, keepdims=True, where=where, initial=-np.inf)
    return jnp.asarray(x) - lax.stop_gradient(x_max)  # the shift needs no derivative


def softmax(x, axis=-1, where=None):
    """``exp(x) / sum(exp(x))`` along ``axis``; entries outside ``where`` get 0."""
    unnormalized = jnp.exp(_shifted(x, axis, where))
    result = unnormalized / jnp.sum(unnormalized, axis, keepdims=True, where=where)
    return result if where is None else jnp.where(where, result, 0)


def log_softmax(x, axis=-1, where=None):
    """``x - logsumexp(x)`` along ``axis``; entries outside ``where`` get -inf."""
    shifted = _shifted(_arraylike("log_softmax", x), axis, where)
    total = jnp.sum(jnp.exp(shifted), axis, keepdims=True, where=where)
    result = shifted - jnp.log(total)
    return result if where is None else jnp.where(where, result, -np.inf)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """``log(sum(b * exp(a)))`` along ``axis``, stable for large and infinite inputs.

    The maximum is subtracted first (0 if it is infinite, so all -inf gives -inf and +inf
    gives inf); terms that ``b`` weighs by zero are left out of it, so that one of them
    does not make the others underflow (as in JAX). With ``return_sign`` returns
    ``(log|sum|, sign(sum))``, otherwise a negative sum gives NaN.
    """
    a = _float("logsumexp", a)
    if b is not None:
        a, b = broadcast_together(*promote_args_inexact("logsumexp", a, b))
        a = jnp.where(b != 0, a, -np.inf)
    amax = jnp.max(a, axis, keepdims=True, where=where, initial=-np.inf)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0))
    exp_a = jnp.exp(a - amax)
    if b is not None:
        exp_a = exp_a * b
    total = jnp.sum(exp_a, axis, keepdims=keepdims, where=where)
    if not keepdims:
        amax = lax.reshape(amax, get_aval(total).shape)
    sign = jnp.sign(total)
    out = jnp.log(jnp.abs(total) if return_sign else total) + amax
    return (out, sign) if return_sign else out


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """``x[..., None] == arange(num_classes)`` as ``dtype`` (default float), with the class
    axis at ``axis``; out-of-range indices give all zeros."""
    num_classes = operator.index(concrete_argument("one_hot", "num_classes", num_classes))
    x = jnp.asarray(x)
    out_ndim = x.ndim + 1
    axis = canonicalize_axis(axis, out_ndim)
    shape = x.shape[:axis] + (num_classes,) + x.shape[axis:]
    classes = lax.broadcasted_iota(x.dtype, shape, axis)
    x = lax.broadcast_in_dim(x, shape, [i for i in range(out_ndim) if i != axis])
    return lax.convert_element_type(lax.eq(x, classes), dtype or dtypes.default_float())


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast"):
    """``(x - mean) / sqrt(variance + epsilon)`` along ``axis`` (statistics computed when
    not given). The variance: ``algorithm="fast"`` ``E[x^2] - E[x]^2`` (JAX's default, one
    pass, which cancels catastrophically when the mean is large), ``"stable"``
    ``E[(x - E[x])^2]``; the fast one is clipped at 0 (so complex ``x`` raises ValueError,
    as in JAX)."""
    x = _arraylike("standardize", x)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(x - mean), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = jnp.clip(jnp.mean(jnp.square(x), axis, keepdims=True, where=where)
                                - jnp.square(mean), 0)
        else:
            raise ValueError(f"Unknown algorithm {algorithm!r}. Expected 'fast' or 'stable'.")
    return (x - mean) * lax.rsqrt(variance + epsilon)


normalize = standardize

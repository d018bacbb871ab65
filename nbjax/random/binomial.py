"""Binomial and multinomial counts, drawn the way JAX draws them so a key gives JAX's counts.

``binomial(n, p)`` works with ``q = min(p, 1 - p)`` (and reflects the count back when
``p > 1/2``), choosing per element between two exact samplers, as TensorFlow does:

- inversion, for ``n q <= 10``: the number of successes is the number of geometric waiting
  times (``ceil(log u / log(1 - q))``) that fit in ``n`` trials;
- BTRS, Hormann's transformed rejection with squeeze ("The generation of binomial random
  variates", 1993), otherwise: a proposal from a transformed uniform, accepted by a quick
  bound or by comparing with the log pmf written with Stirling's series.

Both run on every element (on harmless parameters where not chosen) and ``where`` picks one,
so vmap and jit see fixed-shape loops. Invalid parameters (``p`` outside [0, 1] or NaN, ``n``
negative or NaN) give NaN; ``n = inf`` gives inf. ``multinomial`` draws its categories in turn:
category ``i`` is binomial in what the earlier ones left, with probability ``p_i`` over the
probability that remains.
"""

import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..core import canonical_shape, dtypes
from ..numpy.util import check_arraylike
from . import floats
from .distributions import check_shape, float_dtype, shape_of
from .keys import check_key, split_keys, split_list

__all__ = ["binomial", "multinomial"]


def _inexact(x):
    """``x`` as an array of its inexact dtype (integers and bools become the default float)."""
    x = jnp.asarray(x)
    return x if dtypes.is_inexact(x.dtype) else x.astype(dtypes.default_float())


# --- the two samplers ------------------------------------------------------------------------

def _by_inversion(key, n, q):
    """Count geometric waiting times (in trials) until their sum passes ``n``."""
    log1m_q = lax.log1p(-q)

    def body(state):
        i, count, total, key = state
        draw_key, key = split_list(key, 2)
        count = jnp.where(total <= n, count + 1, count)
        u = floats.uniform(draw_key, q.shape, q.dtype)
        return i + 1, count, total + lax.ceil(lax.log(u) / log1m_q), key

    def cond(state):
        return jnp.any(state[2] <= n)

    zeros = jnp.zeros(q.shape, q.dtype)
    return lax.while_loop(cond, body, (np.int32(0), zeros, zeros, key))[1] - 1


def _stirling_tail(k):
    """``log k! - [(k + 1/2) log(k + 1) - (k + 1) + log(2 pi)/2]``: exact values for
    k <= 9, the series ``(1/12 - 1/360 m^-2 + 1/1260 m^-4) / m`` above. JAX evaluates the
    series at ``m = min(k, 9) + 1`` (not ``k + 1``), a coarser bound; so does this, to
    accept the proposals JAX accepts."""
    exact = np.array([math.lgamma(j + 1) - (j + 0.5) * math.log(j + 1) + (j + 1)
                      - 0.5 * math.log(2 * math.pi) for j in range(10)])
    kc = lax.clamp(np.asarray(0, k.dtype), k, np.asarray(9, k.dtype))
    m2 = (kc + 1) * (kc + 1)
    series = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / m2) / m2) / (kc + 1)
    small = jnp.asarray(exact.astype(k.dtype))[kc.astype(np.int32)]
    return jnp.where(k <= 9, small, series)


def _btrs(key, n, q):
    """Hormann's BTRS: accept ``k`` from ``u`` (centred) and ``v`` uniform when the
    squeeze holds or ``log v`` lies under the log pmf ratio to the mode."""
    spread = lax.sqrt(n * q * (1 - q))
    b = 1.15 + 2.53 * spread
    a = -0.0873 + 0.0248 * b + 0.01 * q
    c = n * q + 0.5
    v_r = 0.92 - 4.2 / b
    odds = q / (1 - q)
    alpha = (2.83 + 5.1 / b) * spread
    mode = lax.floor((n + 1) * q)

    def body(state):
        i, k_out, accepted, key = state
        key, key_u, key_v = split_list(key, 3)
        u = floats.uniform(key_u, q.shape, q.dtype) - 0.5
        v = floats.uniform(key_v, q.shape, q.dtype)
        us = 0.5 - abs(u)
        k = lax.floor((2 * a / us + b) * u + c)
        quick = (us >= 0.07) & (v <= v_r)
        outside = (k < 0) | (k > n)
        log_v = lax.log(v * alpha / (a / (us * us) + b))
        bound = ((mode + 0.5) * lax.log((mode + 1) / (odds * (n - mode + 1)))
                 + (n + 1) * lax.log((n - mode + 1) / (n - k + 1))
                 + (k + 0.5) * lax.log(odds * (n - k + 1) / (k + 1))
                 + _stirling_tail(mode) + _stirling_tail(n - mode)
                 - _stirling_tail(k) - _stirling_tail(n - k))
        accept = quick | (~outside & (log_v <= bound))
        # As in JAX, an element takes the latest accepted proposal: one accepted before may
        # be replaced while the loop runs on for the others.
        return i + 1, jnp.where(accept, k, k_out), accepted | accept, key

    def cond(state):
        return jnp.any(~state[2])

    init = (np.int32(0), jnp.full(q.shape, -1, q.dtype), jnp.zeros(q.shape, bool), key)
    return lax.while_loop(cond, body, init)[1]


def _binomial(key, n, p, shape, dtype):
    p = _inexact(p)
    if shape is None:
        shape = np.broadcast_shapes(shape_of(n), p.shape)
    n = jnp.broadcast_to(lax.convert_element_type(n, p.dtype), shape)
    p = jnp.broadcast_to(p, shape)
    flip = ~(p < 0.5)
    q = jnp.where(flip, 1 - p, p)
    bad_n = jnp.isnan(n) | (n < 0)
    bad_q = jnp.isnan(q) | (q < 0)
    q = jnp.where(bad_q, np.asarray(0.01, q.dtype), q)
    small = bad_n | (n * q <= 10)
    n = lax.floor(n)
    # Each sampler runs everywhere: elsewhere on parameters it handles quickly.
    by_inversion = _by_inversion(key, jnp.where(small, n, 0), q)
    by_btrs = _btrs(key, jnp.where(small, np.asarray(1e4, n.dtype), n),
                    jnp.where(small, np.asarray(0.5, q.dtype), q))
    k = jnp.where(small, by_inversion, by_btrs).astype(dtype)
    invalid = bad_n | bad_q
    k = jnp.where(invalid, np.asarray(np.nan, dtype), k)
    k = jnp.where((n == np.inf) & ~invalid, np.asarray(np.inf, dtype), k)
    keep = ~flip | bad_n | jnp.isnan(q) | (n == np.inf)
    return jnp.where(keep, k, n.astype(dtype) - k)


def binomial(key, n, p, shape=None, dtype=float):
    """Binomial(n, p) counts (as floats of ``dtype``): successes in ``n`` trials of
    probability ``p``; ``n`` and ``p`` broadcast to ``shape``."""
    key, _ = check_key("binomial", key)
    check_arraylike("binomial", n, p)
    dtype = float_dtype("binomial", dtype)
    if shape is not None:
        shape = canonical_shape(shape)
        check_shape("binomial", shape, shape_of(n), shape_of(p))
    return _binomial(key, n, p, shape, dtype)


def multinomial(key, n, p, *, shape=None, dtype=float, unroll=1):
    """Multinomial counts of ``n`` trials over the categories on ``p``'s last axis (which
    should sum to 1), as ``dtype`` (float by default); ``shape`` (the result's, categories last) is
    what ``p`` broadcasts to, and ``n`` to ``shape[:-1]``."""
    key, _ = check_key("multinomial", key)
    check_arraylike("multinomial", n, p)
    dtype = dtypes.canonicalize(dtype)
    n, p = jnp.asarray(n), jnp.asarray(p)
    common = jnp.result_type(n, p)
    common = common if dtypes.is_inexact(common) else dtypes.default_float()
    n, p = n.astype(common), p.astype(common)
    shape = p.shape if shape is None else canonical_shape(shape)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = split_keys(key, (ratios.shape[0],))

    def step(left, ratio_and_key):
        ratio, key = ratio_and_key
        count = _binomial(key, left, jnp.clip(ratio, 0, 1), None, left.dtype)
        return left - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)

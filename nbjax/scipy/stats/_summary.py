"""``mode``, ``rankdata`` and ``sem`` of ``jax.scipy.stats``: summaries of samples, written
with sorting and reductions along one axis so that they jit and vmap."""

from typing import NamedTuple

from ... import lax
from ... import numpy as jnp
from ...numpy.util import promote_dtypes_inexact

__all__ = ["ModeResult", "mode", "rankdata", "sem"]


class ModeResult(NamedTuple):
    mode: object
    count: object


def _along_last(a, axis):
    """``a`` with ``axis`` moved last (flattened for ``axis=None``)."""
    a = jnp.asarray(a)
    return jnp.ravel(a) if axis is None else jnp.moveaxis(a, axis, -1)


def _check_nan_policy(nan_policy, allowed=("propagate",)):
    if nan_policy not in allowed:
        raise NotImplementedError(f"nan_policy={nan_policy!r} is not supported; "
                                  f"use one of {allowed}")


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most frequent value along ``axis`` (the smallest of equally frequent ones) and how
    often it occurs; NaNs count as equal to each other. Counting compares every pair of
    values (quadratic in the axis length, but only sorts and sums)."""
    _check_nan_policy(nan_policy)
    values = _along_last(a, axis)
    s = jnp.sort(values, axis=-1)
    same = s[..., :, None] == s[..., None, :]
    if jnp.issubdtype(s.dtype, jnp.inexact):
        same = same | (jnp.isnan(s)[..., :, None] & jnp.isnan(s)[..., None, :])
    counts = jnp.sum(same, axis=-1, dtype=jnp.int32)
    first = jnp.argmax(counts, axis=-1)[..., None]  # first maximum: the smallest value
    out = (jnp.take_along_axis(s, first, axis=-1)[..., 0],
           jnp.take_along_axis(counts, first, axis=-1)[..., 0])
    if keepdims:
        kept = (1,) * jnp.ndim(a) if axis is None else None
        out = tuple(x.reshape(kept) if axis is None else jnp.expand_dims(x, axis) for x in out)
    return ModeResult(*out)


def _rank_ties(s):
    """For sorted values (last axis), each position's group of equal values: the 1-based
    ranks of the group's first and last positions, and the group's 1-based number."""
    n = s.shape[-1]
    new = jnp.concatenate([jnp.ones_like(s[..., :1], bool), s[..., 1:] != s[..., :-1]], -1)
    ends = jnp.concatenate([new[..., 1:], jnp.ones_like(new[..., :1])], -1)
    index = jnp.broadcast_to(jnp.arange(n), s.shape)
    first = lax.cummax(jnp.where(new, index, 0), axis=s.ndim - 1) + 1
    last = lax.cummin(jnp.where(ends, index, n), axis=s.ndim - 1, reverse=True) + 1
    return first, last, jnp.cumsum(new, axis=-1)


_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """The ranks (from 1) of the values along ``axis`` (of all values, flattened, by
    default); ``method`` says how ties are ranked: their ``average``, ``min`` or ``max``
    rank, consecutive group numbers (``dense``) or order of appearance (``ordinal``).
    Floating point, as in JAX."""
    _check_nan_policy(nan_policy)
    if method not in _RANK_METHODS:
        raise ValueError(f"unknown method '{method}'")
    values = _along_last(a, axis)
    order = jnp.argsort(values, axis=-1, stable=True)
    inverse = jnp.argsort(order, axis=-1)
    s = jnp.take_along_axis(values, order, axis=-1)
    if method == "ordinal":
        sorted_ranks = jnp.broadcast_to(jnp.arange(1, s.shape[-1] + 1), s.shape)
    else:
        first, last, group = _rank_ties(s)
        sorted_ranks = {"min": first, "max": last, "dense": group,
                        "average": None}.get(method)
        if sorted_ranks is None:
            sorted_ranks = 0.5 * (first + last)
    ranks = jnp.take_along_axis(sorted_ranks, inverse, axis=-1)
    ranks = ranks.astype(promote_dtypes_inexact(ranks)[0].dtype)
    return ranks if axis is None else jnp.moveaxis(ranks, -1, axis)


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean, ``std(a, ddof) / sqrt(n)``; ``nan_policy='omit'``
    leaves NaNs out of both."""
    _check_nan_policy(nan_policy, ("propagate", "omit"))
    a, = promote_dtypes_inexact(jnp.asarray(a))
    if nan_policy == "omit":
        n = jnp.sum(~jnp.isnan(a), axis=axis, keepdims=keepdims)
        return jnp.nanstd(a, axis=axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(n)
    n = a.size if axis is None else a.shape[axis]
    return jnp.std(a, axis=axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(n).astype(a.dtype)

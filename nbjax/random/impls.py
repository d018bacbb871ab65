"""The PRNG implementations: JAX's ``threefry2x32`` (the default), ``rbg`` and
``unsafe_rbg``, each one small object (JAX's ``PRNGImpl``) registered by name.

An implementation says what a raw key is (a uint32 array of shape ``key_shape``) and gives
the four operations every sampler is built from:

- ``seed(s)``: a key from an integer scalar;
- ``split(key, shape)``: new keys, an array of shape ``shape + key_shape``;
- ``fold_in(key, x)``: a new key from a key and a uint32 scalar;
- ``random_bits(key, bit_width, shape)``: uniform unsigned integers of 8 to 64 bits.

The samplers only ever call these four, so a key of any implementation draws every
distribution. The implementations differ in how they make bits:

- ``threefry2x32`` (tag ``fry``): keys ``uint32[2]``; everything hashes counters with
  Threefry-2x32 (``threefry.py``), so bits are the same on every backend.
- ``rbg`` (tag ``rbg``): keys ``uint32[4]``, two threefry keys side by side. ``seed``,
  ``split`` and ``fold_in`` are threefry's on each half; the bits come from XLA's
  ``RngBitGenerator`` (``lax.rng_bit_generator``) with the whole key as its state, which is
  faster on accelerators, but whose bits XLA may change between backends and versions (nbjax
  makes those of JAX on the CPU).
- ``unsafe_rbg`` (tag ``urbg``): as ``rbg``, but ``split`` and ``fold_in`` use
  ``RngBitGenerator`` too, as a hash (ten draws per key, of which it keeps the first or the
  last): cheaper still, with no guarantee that the keys it derives are independent.
"""

import dataclasses
import math
import typing

import numpy as np

from .. import lax
from ..core import dtypes
from . import threefry

__all__ = ["PRNGImpl", "PRNG_IMPLS"]


@dataclasses.dataclass(frozen=True, eq=False)
class PRNGImpl:
    """A PRNG implementation: its name (what ``impl=`` and ``jax_default_prng_impl`` say),
    its tag (what key dtypes print: ``key<tag>``), the shape of one raw key (one axis) and
    its operations on raw keys. There is one object per implementation, so two are equal
    only if they are the same object (``eq=False``): cheap to compare and hash, as jit does
    with every typed key's implementation."""
    name: str
    tag: str
    key_shape: tuple
    seed: typing.Callable
    split: typing.Callable
    fold_in: typing.Callable
    random_bits: typing.Callable

    def __repr__(self):
        return f"PRNGImpl({self.name!r})"


THREEFRY = PRNGImpl("threefry2x32", "fry", (2,), threefry.seed_to_key, threefry.split_key,
                    threefry.fold_in_key, threefry.random_bits)


# --- rbg: threefry keys, RngBitGenerator bits ----------------------------------------------

def _rbg_seed(seed):
    """The threefry key of ``seed``, twice."""
    half = threefry.seed_to_key(seed)
    return lax.concatenate([half, half], 0)


def _halves(key):
    """The two threefry keys (``uint32[2]``) of an rbg key."""
    return lax.slice_in_dim(key, 0, 2), lax.slice_in_dim(key, 2, 4)


def _rbg_split(key, shape):
    """Each half split as a threefry key; the new keys put the halves' keys side by side."""
    first, second = _halves(key)
    return lax.concatenate([threefry.split_key(first, shape),
                            threefry.split_key(second, shape)], len(shape))


def _rbg_fold_in(key, data):
    """``data`` folded into each half as into a threefry key."""
    first, second = _halves(key)
    return lax.concatenate([threefry.fold_in_key(first, data),
                            threefry.fold_in_key(second, data)], 0)


def _rbg_random_bits(key, bit_width, shape):
    """The bits ``RngBitGenerator`` (its default algorithm) makes from the key as its state."""
    _, bits = lax.rng_bit_generator(key, shape, dtype=np.dtype(f"uint{bit_width}"))
    return bits


RBG = PRNGImpl("rbg", "rbg", (4,), _rbg_seed, _rbg_split, _rbg_fold_in, _rbg_random_bits)


# --- unsafe_rbg: RngBitGenerator for everything ---------------------------------------------

def _hash_draws(key, n):
    """``10 n`` uint32[4] words drawn from ``key``: ten rounds of the generator per key
    wanted, which JAX takes as a hash of the key."""
    _, words = lax.rng_bit_generator(key, (10 * n, 4), dtype=dtypes.uint32)
    return words


def _unsafe_rbg_split(key, shape):
    """Every tenth draw (the first of each ten) as a new key."""
    keys = lax.slice_in_dim(_hash_draws(key, math.prod(shape)), None, None, stride=10)
    return lax.reshape(keys, (*shape, 4))


def _unsafe_rbg_fold_in(key, data):
    """The key XOR the last of ten draws from the rbg key seeded with ``data``."""
    last = lax.index_in_dim(_hash_draws(_rbg_seed(data), 1), 9, keepdims=False)
    return lax.bitwise_xor(key, last)


UNSAFE_RBG = PRNGImpl("unsafe_rbg", "urbg", (4,), _rbg_seed, _unsafe_rbg_split,
                      _unsafe_rbg_fold_in, _rbg_random_bits)

# By name (the order in which errors list them).
PRNG_IMPLS = {impl.name: impl for impl in (THREEFRY, RBG, UNSAFE_RBG)}

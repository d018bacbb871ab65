"""The threefry2x32 hash and the key operations JAX builds on it.

Threefry-2x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011) maps a
key of two 32-bit words and a counter of two 32-bit words to two pseudo-random 32-bit words.
It is the one primitive of the PRNG (``lax.threefry.threefry2x32_p``, element-wise on four
uint32 arrays); everything else is ordinary lax code around it, so it traces under jit, vmap
and grad.

With ``jax_threefry_partitionable`` on (JAX's default since 0.5), a key makes the bits of an
array of shape ``s`` by hashing the 64-bit row-major index of every element, split into a
high and a low 32-bit word; ``split`` does the same for an array of keys and keeps both
output words as the new key. Keys here are raw ``uint32[..., 2]`` arrays; ``impls.py`` makes
these functions the ``threefry2x32`` implementation (and the key derivation of ``rbg``).
"""

import math

import numpy as np

from .. import lax
from ..core import dtypes, get_aval
from ..lax.threefry import threefry2x32_p, threefry_2x32

__all__ = ["threefry2x32_p", "threefry_2x32", "seed_to_key", "split_key", "fold_in_key",
           "random_bits"]

# --- keys ----------------------------------------------------------------------------------

def _key_words(key):
    """The two uint32 words of a raw key ``uint32[2]``, as scalars."""
    return (lax.index_in_dim(key, 0, keepdims=False), lax.index_in_dim(key, 1, keepdims=False))


def seed_to_key(seed):
    """A raw key from an integer scalar: the seed's 64 bits as (high word, low word).

    Seeds of 32 bits or fewer have a zero high word; negative seeds are taken in two's
    complement (int32 -1 gives ``[0, 0xFFFFFFFF]``, int64 -1 gives both words all ones).
    """
    aval = get_aval(seed)
    if aval.shape:
        raise TypeError(f"PRNG key seed must be a scalar; got an array of shape {aval.shape}.")
    if not dtypes.is_int(aval.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got dtype {aval.dtype.name}.")
    low = lax.convert_element_type(seed, dtypes.uint32)
    if aval.dtype.itemsize == 8:
        high = lax.convert_element_type(
            lax.shift_right_logical(seed, np.array(32, aval.dtype)), dtypes.uint32)
    else:
        high = lax.full((), 0, dtypes.uint32)
    return lax.concatenate([lax.expand_dims(high, (0,)), lax.expand_dims(low, (0,))], 0)


def _iota_2x32(shape):
    """The row-major index of each element of ``shape`` as 64 bits: (high, low) uint32."""
    size = math.prod(shape)
    if size > 2 ** 32:
        raise NotImplementedError("random bits for more than 2**32 elements")
    high = lax.full(shape, 0, dtypes.uint32)
    if not shape:
        return high, high
    return high, lax.reshape(lax.iota(dtypes.uint32, size), shape)


def _hash_counts(key, shape):
    k1, k2 = _key_words(key)
    high, low = _iota_2x32(shape)
    return threefry_2x32(k1, k2, high, low)


def split_key(key, shape):
    """``shape`` new raw keys from one: the hash of each key's index, both words kept."""
    bits1, bits2 = _hash_counts(key, shape)
    return lax.concatenate([lax.expand_dims(bits1, (len(shape),)),
                            lax.expand_dims(bits2, (len(shape),))], len(shape))


def fold_in_key(key, data):
    """A new raw key from a key and a uint32 scalar: the hash of the counter (0, data)."""
    k1, k2 = _key_words(key)
    bits1, bits2 = threefry_2x32(k1, k2, lax.full((), 0, dtypes.uint32), data)
    return lax.concatenate([lax.expand_dims(bits1, (0,)), lax.expand_dims(bits2, (0,))], 0)


_UINT_OF_WIDTH = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def random_bits(key, bit_width, shape):
    """Uniform random unsigned integers of ``bit_width`` bits (8, 16, 32 or 64).

    Each element hashes its index; 32 bits are the XOR of the two output words, 64 bits are
    the two words side by side, 8 and 16 bits the low bits of the XOR.
    """
    if bit_width not in _UINT_OF_WIDTH:
        raise TypeError(f"requires 8-, 16-, 32- or 64-bit field width, got {bit_width}")
    bits1, bits2 = _hash_counts(key, shape)
    dtype = _UINT_OF_WIDTH[bit_width]
    if bit_width == 64:
        high = lax.convert_element_type(bits1, dtype)
        low = lax.convert_element_type(bits2, dtype)
        return lax.bitwise_or(lax.shift_left(high, np.array(32, dtype)), low)
    mixed = lax.bitwise_xor(bits1, bits2)
    return mixed if bit_width == 32 else lax.convert_element_type(mixed, dtype)

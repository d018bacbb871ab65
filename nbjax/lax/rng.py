"""XLA's random-number operations: ``rng_bit_generator`` (explicit state) and ``rng_uniform``
(hidden state). ``nbjax.random`` is the portable PRNG; these exist for programs written
against XLA's own generators.

``rng_bit_generator(key, shape)`` returns ``(new_key, bits)``. Its bits are, in JAX,
whatever the backend's implementation makes; nbjax reproduces what JAX 0.10 gives on CPU
for a ``uint32[4]`` (or ``uint64[2]``) key, bit for bit:

- ``RNG_THREE_FRY``: the key is ``(k0, k1, c_lo, c_hi)``; counter ``c + i`` (64 bits)
  hashed by threefry2x32 under ``(k0, k1)`` gives two words. A 64-bit element takes both
  words of one counter (low word first). Smaller elements take one word each (truncated):
  the output is split into pairs along its first even dimension (else its largest one,
  padded to even), both words of one counter going to the two elements of a pair.
- ``RNG_PHILOX`` and ``RNG_DEFAULT`` (Philox on CPU): Philox-4x32-10 under ``(k0, k1)`` of
  the 128-bit counter ``(c + i, (k0, k1))`` gives four words, laid out in row-major order (two
  words, low first, per 64-bit element).

The new key advances the counter by the number of counters used. Under ``vmap`` each key's
bits are those it gives alone (JAX's batched CPU bits differ; they are not specified).
"""

import enum

import numpy as np

from ..core import Primitive, ShapedArray, dtypes
from ..core.abstract import canonical_shape
from ..interpreters import ad
from .shapes import expand_dims, moveaxis
from .standard import as_array, library_lowering
from .structural import concatenate, index_in_dim
from .threefry import threefry2x32_p

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_bit_generator_p", "rng_uniform",
           "rng_uniform_p"]


class RandomAlgorithm(enum.IntEnum):
    """The algorithms of ``rng_bit_generator`` (XLA's ``RandomAlgorithm``)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self):
        return self.name


_BIT_DTYPES = (np.uint8, np.uint16, np.uint32, np.uint64)
_MASK32 = (1 << 32) - 1


# --- the generators, on NumPy values -------------------------------------------------------

def _key_words(key):
    """The key as four uint32 words ``(k0, k1, c_lo, c_hi)`` (a uint64[2] key split)."""
    key = np.asarray(key)
    if key.dtype.itemsize == 8:
        key = key.astype(np.uint64)
        return [int(w) for v in key for w in (v & _MASK32, v >> 32)]
    return [int(w) for w in key.astype(np.uint32)]


def _advanced_key(key, words, used):
    """The new key: the counter advanced by ``used`` (64-bit, wrapping)."""
    counter = (words[2] | words[3] << 32) + used & ((1 << 64) - 1)
    new = [words[0], words[1], counter & _MASK32, counter >> 32]
    key = np.asarray(key)
    if key.dtype.itemsize == 8:
        return np.array([new[0] | new[1] << 32, counter], np.uint64).astype(key.dtype)
    return np.array(new, np.uint32).astype(key.dtype)


def _counters(words, n):
    """The 64-bit counters ``c, c+1, ... c+n-1`` as (low, high) uint32 arrays, plus the
    carries out of 64 bits."""
    c = np.uint64(words[2] | words[3] << 32) + np.arange(n, dtype=np.uint64)
    wrapped = c < np.uint64(words[2] | words[3] << 32)
    return (c & np.uint64(_MASK32)).astype(np.uint32), (c >> np.uint64(32)).astype(np.uint32), \
        wrapped


def _threefry_words(words, n):
    lo, hi, _ = _counters(words, n)
    k0, k1 = np.full(n, words[0], np.uint32), np.full(n, words[1], np.uint32)
    return threefry2x32_p.impl(k0, k1, lo, hi)


def _split_axis(shape):
    """The axis THREE_FRY pairs elements along: the first even one, else the largest (the
    first of equal ones, padded to even), else None (at most one element)."""
    if int(np.prod(shape)) <= 1:
        return None
    even = [d for d, n in enumerate(shape) if n % 2 == 0]
    return even[0] if even else max(range(len(shape)), key=lambda d: (shape[d], -d))


def _threefry_bits(words, shape, dtype):
    size = int(np.prod(shape, dtype=np.int64))
    if np.dtype(dtype).itemsize == 8:
        a, b = _threefry_words(words, size)
        bits = a.astype(np.uint64) | b.astype(np.uint64) << np.uint64(32)
        return bits.reshape(shape), size
    d = _split_axis(shape)
    if d is None:
        a, _ = _threefry_words(words, size)
        return a.reshape(shape).astype(dtype), size
    pre, n, post = int(np.prod(shape[:d])), shape[d], int(np.prod(shape[d + 1:]))
    half = (n + 1) // 2
    a, b = _threefry_words(words, pre * half * post)
    pairs = np.stack([a.reshape(pre, half, post), b.reshape(pre, half, post)], axis=2)
    bits = pairs.reshape(pre, 2 * half, post)[:, :n].reshape(shape)
    return bits.astype(dtype), pre * half * post


def _mulhilo(a, b):
    p = a.astype(np.uint64) * np.uint64(b)
    return (p >> np.uint64(32)).astype(np.uint32), (p & np.uint64(_MASK32)).astype(np.uint32)


def _philox_words(words, n):
    """Philox-4x32-10 of ``n`` consecutive counters: a ``(n, 4)`` uint32 array."""
    lo, hi, wrapped = _counters(words, n)
    key_hi = np.uint64(words[0] | words[1] << 32) + wrapped.astype(np.uint64)
    c = [lo, hi, (key_hi & np.uint64(_MASK32)).astype(np.uint32),
         (key_hi >> np.uint64(32)).astype(np.uint32)]
    k0, k1 = np.uint32(words[0]), np.uint32(words[1])
    with np.errstate(over="ignore"):
        for _ in range(10):
            hi0, lo0 = _mulhilo(c[0], 0xD2511F53)
            hi1, lo1 = _mulhilo(c[2], 0xCD9E8D57)
            c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
            k0, k1 = k0 + np.uint32(0x9E3779B9), k1 + np.uint32(0xBB67AE85)
    return np.stack(c, axis=-1)


def _philox_bits(words, shape, dtype):
    size = int(np.prod(shape, dtype=np.int64))
    wide = np.dtype(dtype).itemsize == 8
    n_words = size * (2 if wide else 1)
    used = -(-n_words // 4)
    flat = _philox_words(words, used).ravel()[:n_words]
    if wide:
        flat = flat[0::2].astype(np.uint64) | flat[1::2].astype(np.uint64) << np.uint64(32)
    return flat.astype(dtype).reshape(shape), used


# --- rng_bit_generator ---------------------------------------------------------------------

rng_bit_generator_p = Primitive("rng_bit_generator", multiple_results=True)
# Compiled programs call its implementation (NumPy) back: a host step, not a fallback.
library_lowering(rng_bit_generator_p, "random bits")


@rng_bit_generator_p.def_abstract_eval
def _rng_bit_generator_abstract_eval(key, *, shape, dtype, algorithm, out_sharding):
    wide = np.dtype(key.dtype).itemsize == 8
    if key.dtype not in (np.uint32, np.int32, np.uint64, np.int64) or \
            key.shape != ((2,) if wide else (4,)):
        raise TypeError("rng_bit_generator requires a uint32[4] key (or a uint64[2] one), got "
                        f"{key.str_short()}")
    return [ShapedArray(key.shape, key.dtype), ShapedArray(shape, np.dtype(dtype))]


@rng_bit_generator_p.def_impl
def _rng_bit_generator_impl(key, *, shape, dtype, algorithm, out_sharding):
    words = _key_words(key)
    generate = _threefry_bits if algorithm == RandomAlgorithm.RNG_THREE_FRY else _philox_bits
    bits, used = generate(words, shape, dtype)
    return [_advanced_key(key, words, used), bits]


def _rng_bit_generator_batch(axis_data, vals, dims, **params):
    """One key at a time, stacked: each batch member's bits are those its key gives."""
    keys = moveaxis(vals[0], dims[0], 0)
    outs = [rng_bit_generator_p.bind(index_in_dim(keys, i, 0, keepdims=False), **params)
            for i in range(axis_data.size)]
    return [concatenate([expand_dims(o[j], (0,)) for o in outs], 0) for j in range(2)], [0, 0]


rng_bit_generator_p.def_batch(_rng_bit_generator_batch)
ad.defjvp_zero(rng_bit_generator_p)


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT,
                      *, out_sharding=None):
    """``(new_key, bits)``: an array of ``shape`` of random unsigned ``dtype`` bits from
    ``key``'s state, and the state to use next (see the module docstring for the bits)."""
    dtype = dtypes.canonicalize(dtype)
    if dtype not in [np.dtype(d) for d in _BIT_DTYPES]:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype.name}")
    return tuple(rng_bit_generator_p.bind(
        as_array(key), shape=canonical_shape(shape), dtype=dtype,
        algorithm=RandomAlgorithm(algorithm), out_sharding=out_sharding))


# --- rng_uniform ---------------------------------------------------------------------------

rng_uniform_p = Primitive("rng_uniform")
rng_uniform_p.effectful = True  # each run draws new numbers: never merged or folded
library_lowering(rng_uniform_p, "random numbers")  # (compiled: called back at every run)
_hidden_state = np.random.default_rng()


@rng_uniform_p.def_abstract_eval
def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.shape or b.shape:
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} "
                         f"and {b.shape}.")
    if a.dtype != b.dtype:
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got "
                         f"{a.dtype.name} and {b.dtype.name}.")
    return ShapedArray(shape, a.dtype)


@rng_uniform_p.def_impl
def _rng_uniform_impl(a, b, *, shape):
    dtype = np.asarray(a).dtype
    if np.issubdtype(dtype, np.integer):
        return _hidden_state.integers(a, b, shape, dtype=dtype, endpoint=False) \
            if b > a else np.full(shape, a, dtype)
    return (a + (b - a) * _hidden_state.random(shape)).astype(dtype)


def rng_uniform(a, b, shape):
    """Numbers drawn uniformly from ``[a, b)`` by a hidden, stateful generator: each call
    (each run of a compiled program) gives new ones, not reproducible (as in XLA, whose
    stream is implementation-defined). Prefer ``nbjax.random``."""
    return rng_uniform_p.bind(as_array(a), as_array(b), shape=canonical_shape(shape))

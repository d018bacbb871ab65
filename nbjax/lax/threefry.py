"""The threefry2x32 hash (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
2011): a key of two 32-bit words and a counter of two 32-bit words map to two pseudo-random
32-bit words. It is the one primitive of the PRNG, element-wise on four uint32 arrays; the
key operations built on it live in ``nbjax.random.threefry``, and ``lax.rng_bit_generator``
uses it too.
"""

import numpy as np

from ..core import Primitive, ShapedArray, dtypes, get_aval
from ..interpreters import ad
from .batch_util import elementwise_batcher
from .shapes import broadcast_in_dim
from .standard import broadcast_shapes

__all__ = ["threefry2x32_p", "threefry_2x32"]

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)

# Threefry-2x32's rotation distances: five groups of four rounds alternate between the two.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# The key schedule's third word is k1 ^ k2 ^ this constant (from the Threefish cipher).
_KEY_SCHEDULE_PARITY = np.uint32(0x1BD11BDA)


@threefry2x32_p.def_abstract_eval
def _threefry2x32_abstract_eval(k1, k2, x1, x2):
    avals = (k1, k2, x1, x2)
    if any(a.dtype != dtypes.uint32 for a in avals):
        raise TypeError("threefry2x32 requires uint32 arguments, got "
                        f"{', '.join(a.dtype.name for a in avals)}")
    shape = broadcast_shapes("threefry2x32", *(a.shape for a in avals))
    return [ShapedArray(shape, dtypes.uint32)] * 2


def _rotate_left(x, distance):
    return (x << np.uint32(distance)) | (x >> np.uint32(32 - distance))


def _rounds(k1, k2, x1, x2):
    """The 20 rounds, written with operators only, so the same code runs on NumPy uint32
    arrays (the reference impl) and on nbjax arrays (the compiler's decomposition)."""
    schedule = (k1, k2, k1 ^ k2 ^ _KEY_SCHEDULE_PARITY)
    x1, x2 = x1 + schedule[0], x2 + schedule[1]
    for group in range(5):
        for distance in _ROTATIONS[group % 2]:
            x1 = x1 + x2
            x2 = _rotate_left(x2, distance) ^ x1
        # Inject the key schedule, rotated by one word per group, and the group counter.
        x1 = x1 + schedule[(group + 1) % 3]
        x2 = x2 + schedule[(group + 2) % 3] + np.uint32(group + 1)
    return [x1, x2]


@threefry2x32_p.def_impl
def _threefry2x32_impl(k1, k2, x1, x2):
    """The rounds on NumPy uint32 arrays (additions wrap modulo 2**32)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (k1, k2, x1, x2)))
    # Flat 1-d copies: uint32 arithmetic on arrays wraps silently (on 0-d values it warns).
    flat = (np.broadcast_to(np.asarray(a, np.uint32), shape).ravel() for a in (k1, k2, x1, x2))
    return [x.reshape(shape) for x in _rounds(*flat)]


def _threefry2x32_decomposition(k1, k2, x1, x2):
    """For the compiler: the hash as element-wise uint32 operations, which fuse."""
    shape = np.broadcast_shapes(*(get_aval(a).shape for a in (k1, k2, x1, x2)))
    return _rounds(*(_broadcast_to(a, shape) for a in (k1, k2, x1, x2)))


def _broadcast_to(x, shape):
    rank = get_aval(x).ndim
    return broadcast_in_dim(x, shape, tuple(range(len(shape) - rank, len(shape))))


threefry2x32_p.def_lowering("jaxpr", _threefry2x32_decomposition)


_elementwise_batch = elementwise_batcher(threefry2x32_p)


def _threefry2x32_batch(axis_data, vals, dims):
    """Element-wise batching; both results carry the batch axis where the rule put it."""
    outs, out_dim = _elementwise_batch(axis_data, vals, dims)
    return outs, [out_dim, out_dim]


threefry2x32_p.def_batch(_threefry2x32_batch)
ad.defjvp_zero(threefry2x32_p)  # integer outputs: their tangents are float0 zeros


def threefry_2x32(k1, k2, x1, x2):
    """Hash counters ``(x1, x2)`` under key ``(k1, k2)``: two uint32 arrays."""
    return threefry2x32_p.bind(k1, k2, x1, x2)

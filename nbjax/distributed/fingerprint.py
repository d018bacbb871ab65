"""Fingerprints of collectives, carried inside the collective's own data.

Every process checks that the others run the same collective. Exchanging a description
first costs a second round trip per collective (a small all-reduce here takes about a
microsecond, as does the round trip); instead each process appends a *tail* of a few
elements, derived from a 64-bit hash of its collective, to the very buffer it reduces or
gathers. When the processes run the same collective, every one can predict the reduced
tail; when they do not, the tail comes back different (or MPI fails on the mismatched
buffers) and only then do the processes exchange their full descriptions, to name the
difference.

For a reduction the tail must survive the operation exactly and reveal any difference
under sum, max and min alike: it holds words ``w`` (small positive integers, so that a sum
over the processes is exact in the buffer's type) followed by order-reversed copies ``-w``
(``2**b + 1 - w`` for unsigned types). Under max, ``max(w)`` and ``max(-w) = -min(w)`` equal
this process's ``w`` and ``-w`` exactly when every process has the same ``w``; under sum,
a process sees ``P * w`` for ``P`` processes; with two distinct values among the processes,
their mean lies strictly between them, so every process sees the difference (with three or
more, a coincidence of every word's mean with one process's word would be needed).
"""

import hashlib

import numpy as np

HASH_BITS = 62  # (so that -hash fits an int64)
MAX_WORD_BITS = 16


def fingerprint(*parts):
    """A hash of ``parts`` that is the same in every process (Python's ``hash`` of a
    string is randomised per process)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << HASH_BITS) - 1)


def _largest_exact(dtype):
    """The largest integer the type holds exactly, and below which all do."""
    if dtype.kind == "f":
        return 2 ** (np.finfo(dtype).nmant + 1)
    return int(np.iinfo(dtype).max)


def _word_bits(dtype, processes):
    """Bits per word such that ``processes`` words of up to ``2**bits`` sum exactly."""
    bits = 0
    while bits < MAX_WORD_BITS and processes * 2 ** (bits + 1) <= _largest_exact(dtype):
        bits += 1
    return bits


def reduction_tail(hashed, dtype, op, processes):
    """The tail a process appends to a buffer of ``dtype`` reduced with ``op`` ("psum",
    "pmax", "pmin") over ``processes`` processes, and the bytes it must find there after
    the reduction; None where the type is too narrow to carry one (int8 over many
    processes)."""
    dtype = np.dtype(dtype)
    bits = _word_bits(dtype, processes)
    if bits == 0:
        return None
    words = [((hashed >> shift) & ((1 << bits) - 1)) + 1 for shift in range(0, HASH_BITS, bits)]
    reversed_ = [-w if dtype.kind != "u" else 2 ** bits + 1 - w for w in words]
    tail = np.array(words + reversed_, dtype)
    expected = tail * processes if op == "psum" else tail
    return tail, expected.astype(dtype).tobytes()


def gather_tail(hashed):
    """The tail a process appends to the bytes it gathers: the hash itself (every process
    sees every other's, so any difference shows)."""
    return np.frombuffer(hashed.to_bytes(8, "little"), np.uint8)

"""The fingerprints that ride in a collective's own buffer (nbjax.distributed.fingerprint):
the reduction of the processes' tails, done here with NumPy as MPI does it, must come back
as each process predicts exactly when their collectives agree, for every type MPI reduces
and every operation, and differ on every process when they do not."""

import numpy as np
import pytest

from nbjax.distributed.fingerprint import fingerprint, reduction_tail

TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
         "uint32", "uint64")
REDUCE = {"psum": np.add, "pmax": np.maximum, "pmin": np.minimum}


def reduced(tails, op):
    return REDUCE[op].reduce(np.stack(tails), axis=0, dtype=tails[0].dtype)  # (no upcast)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", sorted(REDUCE))
@pytest.mark.parametrize("processes", [2, 4, 16])
def test_a_tail_comes_back_as_predicted_only_when_the_collectives_agree(dtype, op, processes):
    same = fingerprint("psum(float32[3], axis i)", "psum float32[3]")
    other = fingerprint("pmax(float32[3], axis i)", "pmax float32[3]")
    tail, expected = reduction_tail(same, dtype, op, processes)
    assert tail.dtype == np.dtype(dtype)
    assert reduced([tail] * processes, op).tobytes() == expected
    odd, odd_expected = reduction_tail(other, dtype, op, processes)
    for position in range(processes):  # one process differs: every one sees it
        tails = [tail] * processes
        tails[position] = odd
        result = reduced(tails, op).tobytes()
        assert result != expected and result != odd_expected


def test_the_tail_carries_the_whole_hash():
    """Two hashes differing in any one bit give different tails."""
    tail, _ = reduction_tail(0, "int8", "psum", 2)
    for bit in range(62):
        assert not np.array_equal(reduction_tail(1 << bit, "int8", "psum", 2)[0], tail)


def test_a_type_too_narrow_for_the_processes_carries_none():
    assert reduction_tail(fingerprint("x"), "int8", "psum", 128) is None
    assert fingerprint("a", "b") == fingerprint("a", "b") != fingerprint("a", "c")

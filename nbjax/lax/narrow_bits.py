"""Bit operations on ml_dtypes' 1-, 2- and 4-bit integers (int1/2/4, uint1/2/4).

NumPy holds each of these in a whole byte and would shift, count and look for leading
zeros in all 8 bits (and its shifts do not wrap into the type). Here each element is read as
its ``bits``-bit pattern, the operation is done on that pattern, and the result is cut to
``bits`` and read back in the type: XLA's results, as JAX gives them (except one XLA quirk:
its population_count of a negative int4 counts the sign-extended byte; here, the 4 bits).
Shift amounts are read as unsigned; shifting by the width or more gives 0, or the sign for an
arithmetic right shift, as for the wider types.
"""

import ml_dtypes
import numpy as np


def _width(dtype):
    return ml_dtypes.iinfo(dtype).bits


def _pattern(x):
    return x.astype(np.int16) & ((1 << _width(x.dtype)) - 1)


def _signed(pattern, bits):
    return np.where(pattern >= 1 << (bits - 1), pattern - (1 << bits), pattern)


def _in_type(pattern, dtype):
    """The low bits of ``pattern`` as a value of ``dtype``."""
    bits = _width(dtype)
    pattern = pattern & ((1 << bits) - 1)
    if ml_dtypes.iinfo(dtype).min < 0:
        pattern = _signed(pattern, bits)
    return pattern.astype(dtype)


def shift_left(x, y):
    bits, p, n = _width(x.dtype), _pattern(x), _pattern(y)
    return _in_type(np.where(n >= bits, 0, p << np.minimum(n, bits)), x.dtype)


def shift_right_logical(x, y):
    bits, p, n = _width(x.dtype), _pattern(x), _pattern(y)
    return _in_type(np.where(n >= bits, 0, p >> np.minimum(n, bits)), x.dtype)


def shift_right_arithmetic(x, y):
    """Copies of the top bit of the pattern shift in, whatever ``x``'s signedness."""
    bits, p, n = _width(x.dtype), _pattern(x), _pattern(y)
    return _in_type(_signed(p, bits) >> np.minimum(n, bits - 1), x.dtype)


def population_count(x):
    p = _pattern(x)
    return _in_type(sum((p >> k) & 1 for k in range(_width(x.dtype))), x.dtype)


def clz(x):
    """Leading zeros of the pattern: the width less one less the highest set bit's index."""
    bits, p = _width(x.dtype), _pattern(x)
    zeros = np.full(p.shape, bits, np.int16)
    for k in range(bits):  # higher bits last: the highest set one decides
        zeros = np.where((p >> k) & 1, bits - 1 - k, zeros)
    return _in_type(zeros, x.dtype)

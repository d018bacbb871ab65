"""From random bits to floats: the uniform, normal and exponential draws every sampler uses.

These take a typed key (of any implementation) and static shape and dtype, and are plain
lax code.
"""

import numpy as np

from .. import lax
from ..core import dtypes
from .keys import random_bits, split_list

_UINT_OF_WIDTH = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def uniform(key, shape, dtype, minval=0.0, maxval=1.0):
    """Floats in ``[minval, maxval)``: random mantissa bits under the exponent of 1.0 give a
    float in [1, 2); subtracting 1 and scaling maps it to the range, by one fused
    multiply-add where XLA computes one (its 16-bit products are rounded to 16 bits first), so
    the draws are JAX's. ``max`` with ``minval`` guards against rounding below the range."""
    finfo = dtypes.finfo(dtype)
    uint = _UINT_OF_WIDTH[finfo.bits]
    # Fewer than 8 mantissa bits (bfloat16): JAX draws bytes, widened to the float's width.
    rng_bits = 8 if finfo.nmant < 8 else finfo.bits
    bits = lax.convert_element_type(random_bits(key, rng_bits, shape), uint)
    mantissa = lax.shift_right_logical(bits, np.array(rng_bits - finfo.nmant, uint))
    one_bits = np.array(1.0, dtype).view(uint)
    in_one_two = lax.bitcast_convert_type(lax.bitwise_or(mantissa, one_bits), dtype)
    floats = lax.sub(in_one_two, np.array(1.0, dtype))
    minval = lax.broadcast_to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = lax.broadcast_to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    span = lax.sub(maxval, minval)
    if finfo.bits == 16:
        return lax.max(minval, lax.add(lax.mul(floats, span), minval))
    return lax.max(minval, lax.fma(floats, span, minval))


def normal(key, shape, dtype):
    """Standard normals by inverting the CDF: ``sqrt(2) erfinv(u)`` for u uniform in
    (-1, 1) (the open lower end keeps erfinv finite)."""
    if dtypes.is_complex(dtype):
        real_dtype = dtypes.finfo(dtype).dtype
        key_re, key_im = split_list(key, 2)
        parts = lax.complex(normal(key_re, shape, real_dtype), normal(key_im, shape, real_dtype))
        return lax.div(parts, np.array(np.sqrt(2), dtype))
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(u))


def exponential(key, shape, dtype):
    """``-log(1 - u)``: 1 - u lies in (0, 1], so the log is finite (XLA's log1p, so the
    draws are JAX's)."""
    u = uniform(key, shape, dtype)
    return lax.neg(lax.xla_log1p(lax.neg(u)))


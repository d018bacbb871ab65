"""Block-scaled ("microscaling") products, as ``jax.nn`` defines them: ``scaled_matmul``,
``scaled_dot_general`` and ``get_scaled_dot_general_config``.

An operand is stored in a narrow float (float8, float4) together with one scale per block of
``block_size`` consecutive elements along the contracting axis; the value is the element
times its block's scale. JAX runs these products only on NVIDIA GPUs (cuDNN); nbjax computes
what JAX's documentation says they compute, on the CPU: operands times their repeated
scales in float32, then the product.

``scaled_dot_general`` takes ordinary operands, quantizes each (a block's scale makes its
largest magnitude the narrow type's largest: rounded up to a power of two for ``mxfp8``,
stored as float8 after a global scale for ``nvfp4``), multiplies the quantized operands and,
in reverse mode, quantizes the cotangent too (the "straight-through" gradient, which
ignores the rounding and zeroes what ``nvfp4`` clipped).
"""

import dataclasses
import math
import warnings

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..core import dtypes, get_aval
from ..custom_derivatives import custom_vjp

__all__ = ["BlockScaleConfig", "get_scaled_dot_general_config", "scaled_matmul",
           "scaled_dot_general"]


@dataclasses.dataclass
class BlockScaleConfig:
    """How ``scaled_dot_general`` quantizes one operand: the element and scale types, the
    block size along the contracting axis, and (``nvfp4``) a global scale."""
    mode: str
    block_size: int
    data_type: object
    scale_type: object
    global_scale: object
    infer_only: bool


def get_scaled_dot_general_config(mode, global_scale=None):
    """The configuration of a quantization mode: ``"mxfp8"`` (float8_e4m3fn elements, a
    power-of-two float8_e8m0fnu scale per 32) or ``"nvfp4"`` (float4_e2m1fn elements, a
    float8_e4m3fn scale per 16, and a float32 global scale, 1 by default)."""
    if mode == "nvfp4":
        return BlockScaleConfig("nvfp4", 16, jnp.float4_e2m1fn.dtype, jnp.float8_e4m3fn.dtype,
                                jnp.ones((1,), np.float32) if global_scale is None
                                else global_scale, False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, jnp.float8_e4m3fn.dtype,
                                jnp.float8_e8m0fnu.dtype, None, False)
    raise ValueError(f"Unsupported mode: {mode}")


def _check_3d(lhs, rhs, lhs_scales, rhs_scales):
    shapes = [get_aval(x).shape for x in (lhs, rhs, lhs_scales, rhs_scales)]
    if any(len(s) != 3 for s in shapes):
        raise ValueError(f"scaled_matmul takes 3-D operands and scales, got shapes {shapes}")
    (b, _, k), (b2, _, k2), (_, _, ka), (_, _, kb) = shapes
    if b != b2 or k != k2 or not ka or not kb or k % ka or k % kb:
        raise ValueError(f"scaled_matmul: operands (B, M, K) and (B, N, K) with scales "
                         f"(B, M, K_a) and (B, N, K_b), K a multiple of K_a and K_b; got "
                         f"shapes {shapes}")
    return k


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """``einsum("BMK,BNK->BMN", lhs * repeat(lhs_scales), rhs * repeat(rhs_scales))``, the
    scales repeated along K over blocks of ``K // K_a`` (``K // K_b``), computed in float32
    and returned as ``preferred_element_type``."""
    k = _check_3d(lhs, rhs, lhs_scales, rhs_scales)

    def scaled(x, scales):
        repeats = k // get_aval(scales).shape[-1]
        return jnp.asarray(x, np.float32) * jnp.repeat(jnp.asarray(scales, np.float32),
                                                        repeats, axis=-1)
    out = lax.dot_general(scaled(lhs, lhs_scales), scaled(rhs, rhs_scales),
                          (((2,), (2,)), ((0,), (0,))), preferred_element_type=np.float32)
    return out.astype(dtypes.canonicalize(preferred_element_type))


# --- quantizing ------------------------------------------------------------------------------

def _power_of_two_at_least(x):
    """The float8_e8m0fnu code of the smallest power of two not below each positive float32
    ``x``: its exponent field, one more when the mantissa is not zero (a subnormal rounds up
    past 2**-127 only above half of it; 2**127 is the largest code's value)."""
    bits = lax.bitcast_convert_type(jnp.asarray(x, np.float32), np.uint32)
    exponent, mantissa = bits >> 23, bits & 0x7FFFFF
    up = (mantissa > 0) & (exponent != 0xFE) & ~((exponent == 0) & (mantissa <= 0x400000))
    return jnp.where(up, exponent + 1, exponent).astype(np.uint8)


def _power_of_two(codes, dtype):
    """The value of e8m0 ``codes`` (``2 ** (code - 127)``) in ``dtype``; code 0 stands for
    the smallest scale the dtype can divide by (2**-127, or 2**-15 in float16)."""
    values = lax.bitcast_convert_type(codes.astype(np.uint32) << 23, np.float32)
    tiny = 2.0 ** -15 if dtype == np.float16 else 2.0 ** -127
    return jnp.where(values == 0, np.float32(tiny), values).astype(dtype)


def _quantize(x, config):
    """``(elements, scales)`` of a ``(B, M, K)`` operand: each block of ``block_size`` along
    K divided by a scale that brings its largest magnitude to the element type's maximum."""
    b, m, k = x.shape
    size = config.block_size
    if k < size or k % size:
        raise ValueError(f"scaled_dot_general: the contracting size {k} must be a multiple "
                         f"of the block size {size}")
    blocks = jnp.reshape(x, (b, m, k // size, size))
    top = np.asarray(dtypes.finfo(config.data_type).max, np.float32).astype(x.dtype)
    amax = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True) / top
    if config.mode == "mxfp8":
        codes = _power_of_two_at_least(amax)
        scaled = blocks / _power_of_two(codes, x.dtype)
        scales = lax.bitcast_convert_type(codes, config.scale_type)
    else:
        blocks = blocks / config.global_scale
        scale_top = np.asarray(dtypes.finfo(config.scale_type).max, np.float32)
        scales = jnp.clip(amax, 0, scale_top.astype(x.dtype)).astype(config.scale_type)
        scaled = blocks / scales.astype(np.float32)
    elements = jnp.clip(scaled, -top, top).astype(config.data_type)
    return jnp.reshape(elements, x.shape), jnp.reshape(scales, (b, m, k // size))


# --- scaled_dot_general ------------------------------------------------------------------------

def _as_3d(x, contracting, batch):
    """``x`` as ``(batch, rows, contracting)``: its axes in that order, each group merged."""
    groups = [sorted(batch), _kept(x.ndim, contracting, batch), sorted(contracting)]
    sizes = [math.prod(x.shape[d] for d in group) for group in groups]
    return jnp.reshape(jnp.transpose(x, [d for group in groups for d in group]), sizes)


def _product(x3, y3, x_config, y_config, out_dtype):
    """``einsum("BMK,BNK->BMN", x3, y3)`` of the two operands quantized as configured (for
    ``nvfp4``: in float32, times both global scales, then ``out_dtype``)."""
    (xq, xs), (yq, ys) = _quantize(x3, x_config), _quantize(y3, y_config)
    if x_config.mode != "nvfp4":
        return scaled_matmul(xq, yq, xs, ys, out_dtype)
    out = scaled_matmul(xq, yq, xs, ys, np.float32)
    return (out * (x_config.global_scale * y_config.global_scale)).astype(out_dtype)


def _kept(ndim, contracting, batch):
    return [d for d in range(ndim) if d not in contracting and d not in batch]


def _forward(lhs, rhs, dims, configs, out_dtype):
    (lc, rc), (lb, rb) = dims
    out = _product(_as_3d(lhs, lc, lb), _as_3d(rhs, rc, rb), configs[0], configs[1],
                   out_dtype)
    shape = [lhs.shape[d] for d in sorted(lb)] + [lhs.shape[d] for d in _kept(lhs.ndim, lc, lb)]
    return jnp.reshape(out, shape + [rhs.shape[d] for d in _kept(rhs.ndim, rc, rb)])


def _cotangent(g, g_rows, g_cols, other, own, other_dims, configs, out_dtype):
    """The cotangent of one operand (``own``: its contracting, batch axes) of the product
    with ``other``: ``g``'s axes ``g_rows`` (this operand's kept ones) times ``other``'s
    contracting axes, summed over ``g_cols`` (the other operand's kept axes), each side
    quantized as configured (``nvfp4``: an exact product), laid out as the operand."""
    (own_contract, own_batch), (other_contract, other_batch) = own, other_dims
    nb = len(own_batch)
    g3 = _as_3d(g, g_cols, list(range(nb)))
    other3 = _as_3d(other, _kept(other.ndim, other_contract, other_batch), other_batch)
    if configs[0].mode == "nvfp4":
        out = jnp.matmul(g3, jnp.swapaxes(other3, 1, 2), preferred_element_type=out_dtype)
    else:
        out = _product(g3, other3, configs[0], configs[1], out_dtype)
    contract_by_other = [own_contract[i] for i in np.argsort(other_contract)]
    shape = [g.shape[d] for d in range(nb)] + [g.shape[d] for d in g_rows]
    out = jnp.reshape(out, shape + [other.shape[d] for d in sorted(other_contract)])
    ndim = nb + len(g_rows) + len(own_contract)
    own_kept = _kept(ndim, own_contract, own_batch)
    return jnp.transpose(out, np.argsort(list(own_batch) + own_kept + contract_by_other))


def _backward(lhs, rhs, g, dims, configs, out_dtype):
    (lc, rc), (lb, rb) = dims
    nb, n_lhs_kept = len(lb), len(_kept(lhs.ndim, lc, lb))
    lhs_rows = list(range(nb, nb + n_lhs_kept))
    rhs_rows = list(range(nb + n_lhs_kept, g.ndim))
    d_lhs = _cotangent(g, lhs_rows, rhs_rows, rhs, (lc, lb), (rc, rb),
                       [configs[2], configs[1]], out_dtype)
    d_rhs = _cotangent(g, rhs_rows, lhs_rows, lhs, (rc, rb), (lc, lb),
                       [configs[2], configs[0]], out_dtype)
    if configs[2].mode == "nvfp4":  # what quantizing clipped passes no gradient
        limit = (float(dtypes.finfo(configs[0].data_type).max)
                 * float(dtypes.finfo(configs[0].scale_type).max))
        d_lhs = jnp.where(jnp.abs(lhs) <= configs[0].global_scale * limit, d_lhs, 0)
        d_rhs = jnp.where(jnp.abs(rhs) <= configs[1].global_scale * limit, d_rhs, 0)
    return d_lhs.astype(lhs.dtype), d_rhs.astype(rhs.dtype)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """``lax.dot_general`` of ``lhs`` and ``rhs`` quantized per ``configs`` (for lhs, rhs
    and the cotangent; see ``get_scaled_dot_general_config``), or exactly when ``configs``
    is None. Reverse mode quantizes the cotangent with ``configs[2]``."""
    if implementation is not None:
        warnings.warn("Backend selector, now ignored. The system chooses the backend "
                      "automatically.", DeprecationWarning, stacklevel=2)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    out_dtype = np.dtype(preferred_element_type)
    if out_dtype not in (np.float32, dtypes.bfloat16, np.float16):
        raise TypeError(f"Only support preferred_element_type in (f32, bf16, f16), but got "
                        f"{preferred_element_type}")
    (lc, rc), (lb, rb) = [[tuple(axes) for axes in pair] for pair in dimension_numbers]
    lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
    unbatched = not lb
    if unbatched:  # a size-1 batch axis at the end of each operand, squeezed off the result
        lhs, rhs = lhs[..., None], rhs[..., None]
        lb, rb = (lhs.ndim - 1,), (rhs.ndim - 1,)
    dims = ((lc, rc), (lb, rb))

    @custom_vjp
    def product(x, y):
        return _forward(x, y, dims, configs, out_dtype)

    product.defvjp(lambda x, y: (product(x, y), (x, y)),
                   lambda res, g: _backward(*res, g, dims, configs, out_dtype))
    out = product(lhs, rhs)
    return out[0] if unbatched else out

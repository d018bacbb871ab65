"""Convolution: ``conv_general_dilated`` and its convenience wrappers.

The primitive works in a canonical layout, (batch, feature, spatial...) for the input and the
output and (out feature, in feature, spatial...) for the kernel; ``dimension_numbers`` say where
those axes are in the actual arrays. In canonical terms the reference implementation:

1. dilates the input (``lhs_dilation``: zeros between elements, a transposed convolution),
2. pads it (``padding``, per spatial axis; negative padding crops),
3. dilates the kernel (``rhs_dilation``: an atrous convolution),
4. takes every window of the kernel's size, ``window_strides`` apart,
5. contracts windows with the kernel, group by group: with ``feature_group_count`` G the
   input features and the output features are split into G groups that only see each other;
   with ``batch_group_count`` G the *batch* is split into G groups instead, output feature
   group g reading batch group g.
"""

import collections
import functools
import math
import operator

import numpy as np

from ..core import Primitive, ShapedArray, dtypes, get_aval
from ..sharding import refuse_out_sharding
from . import gather_scatter, structural
from .dot import (accumulation_dtype, as_accumulation, bilinear_jvp, bilinear_transpose,
                  canonicalize_precision, check_preferred_element_type, dot_general,
                  finish_accumulation)
from .elementwise import add, convert_element_type, mul
from .shapes import broadcast_in_dim, moveaxis, reshape, transpose
from .standard import library_lowering, remembered

__all__ = ["ConvDimensionNumbers", "conv_dimension_numbers", "padtype_to_pads",
           "conv_general_dilated", "conv_general_dilated_p", "conv",
           "conv_with_general_padding"]


# --- dimension numbers ---------------------------------------------------------------------

ConvDimensionNumbers = collections.namedtuple(
    "ConvDimensionNumbers", ["lhs_spec", "rhs_spec", "out_spec"])
ConvDimensionNumbers.__doc__ = """Where the canonical axes are in each array.

``lhs_spec = (batch axis, feature axis, spatial axes...)``, ``rhs_spec = (out feature axis,
in feature axis, spatial axes...)``, ``out_spec`` like ``lhs_spec``; spatial axes are listed in
the same order in all three."""


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """``dimension_numbers`` (None, three layout strings, or ConvDimensionNumbers) as a
    ConvDimensionNumbers. None means ``("NCHW", "OIHW", "NCHW")`` for any number of spatial
    axes."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        identity = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(identity, identity, identity)
    if not isinstance(dimension_numbers, (tuple, list)) or len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers must be None, a ConvDimensionNumbers "
                        f"or three layout strings, got {dimension_numbers!r}.")
    if not all(isinstance(spec, str) for spec in dimension_numbers):
        raise TypeError(f"convolution dimension_numbers elements must be strings, got "
                        f"{tuple(map(type, dimension_numbers))}.")
    for i, spec in enumerate(dimension_numbers):
        if len(spec) != len(lhs_shape):
            raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the "
                            f"ndim of lhs and rhs, got {len(spec)} for lhs and rhs shapes "
                            f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
    return ConvDimensionNumbers(*_layout_permutations(*dimension_numbers))


def _layout_permutations(lhs, rhs, out):
    """Axis permutations from layout strings such as ("NHWC", "HWIO", "NHWC").

    'N'/'C' mark batch and feature axes, 'O'/'I' the kernel's; every other letter is a spatial
    axis, and spatial axes are ordered as they appear in the kernel's string.
    """
    specs = ((lhs, "NC"), (rhs, "OI"), (out, "NC"))
    for i, (spec, (a, b)) in enumerate(specs):
        if not spec.count(a) == spec.count(b) == 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {spec}.")
        if len(set(spec)) != len(spec):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                            f"characters, got {spec}.")
    spatial = [c for c in rhs if c not in "OI"]
    if not all(set(spec) - set(pair) == set(spatial) for spec, pair in specs):
        raise TypeError(f"convolution dimension_numbers elements must each have the same set "
                        f"of spatial characters, got {(lhs, rhs, out)}.")
    return tuple(tuple(spec.index(c) for c in pair + "".join(spatial)) for spec, pair in specs)


# --- padding -------------------------------------------------------------------------------

def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(low, high) pads per spatial axis for "VALID", "SAME" or "SAME_LOWER".

    "SAME" pads so that the output has ``ceil(in / stride)`` elements, the odd one at the end;
    "SAME_LOWER" puts the odd one at the start.
    """
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind not in ("VALID", "SAME", "SAME_LOWER"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                           f"'SAME_LOWER', got {padding}.")
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for size, window, stride in zip(in_shape, window_shape, window_strides):
        out = -(-size // stride)
        total = max((out - 1) * stride + window - size, 0)
        small, large = total // 2, total - total // 2
        pads.append((small, large) if kind == "SAME" else (large, small))
    return pads


def _dilated_size(size, dilation):
    return 0 if size == 0 else (size - 1) * dilation + 1


# --- the primitive -------------------------------------------------------------------------

conv_general_dilated_p = Primitive("conv_general_dilated")
library_lowering(conv_general_dilated_p, "convolution")


def _conv_flops(eqn):
    """For the compiler's cost report: a multiply and an add per kernel element feeding each
    output element (the kernel's elements divided among its output features)."""
    rhs = eqn.invars[1].aval.shape
    out_features = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
    per_output = math.prod(rhs) // max(out_features, 1)
    return 2 * math.prod(eqn.outvars[0].aval.shape) * per_output


conv_general_dilated_p.def_rule("flops", _conv_flops)


def _check_groups(lhs, rhs, dn, feature_group_count, batch_group_count):
    """The feature/batch group checks, with JAX's messages (ValueError, as JAX raises)."""
    name = "conv_general_dilated"
    in_features = lhs.shape[dn.lhs_spec[1]]
    kernel_in, out_features = rhs.shape[dn.rhs_spec[1]], rhs.shape[dn.rhs_spec[0]]
    batch = lhs.shape[dn.lhs_spec[0]]
    for what, count in (("feature_group_count", feature_group_count),
                        ("batch_group_count", batch_group_count)):
        if count < 1:
            raise ValueError(f"{name} {what} must be a positive integer, got {count}.")
    if in_features % feature_group_count:
        raise ValueError(f"{name} feature_group_count must divide lhs feature dimension size, "
                         f"but {feature_group_count} does not divide {in_features}.")
    if in_features // feature_group_count != kernel_in:
        raise ValueError(f"{name} lhs feature dimension size divided by feature_group_count "
                         f"must equal the rhs input feature dimension size, but "
                         f"{in_features} // {feature_group_count} != {kernel_in}.")
    if batch % batch_group_count:
        raise ValueError(f"{name} batch_group_count must divide lhs batch dimension size, "
                         f"but {batch_group_count} does not divide {batch}.")
    for what, count in (("feature_group_count", feature_group_count),
                        ("batch_group_count", batch_group_count)):
        if out_features % count:
            raise ValueError(f"{name} rhs output feature dimension size must be a multiple "
                             f"of {what}, but {out_features} is not a multiple of {count}.")
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError(f"At most one of batch_group_count and feature_group_count may be > "
                         f"1, got batch_group_count={batch_group_count} and "
                         f"feature_group_count={feature_group_count}")


def _check_spatial_params(n, window_strides, padding, lhs_dilation, rhs_dilation):
    name = "conv_general_dilated"
    if len(window_strides) != n:
        raise ValueError(f"{name} window and window_strides must have the same number of "
                         f"dimensions, but got {n} and {len(window_strides)}")
    if len(padding) != n:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {n}, got "
                        f"{len(padding)}.")
    for what, values in (("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(values) != n:
            raise ValueError(f"{name} {what} must have {n} entries, got {values}.")
    for what, values in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                         ("rhs_dilation", rhs_dilation)):
        if any(v < 1 for v in values):
            raise ValueError(f"{name} {what} must be positive, got {values}.")


def _out_spatial_shape(in_spatial, kernel_spatial, window_strides, padding, lhs_dilation,
                       rhs_dilation):
    out = []
    for size, k, stride, (lo, hi), ld, rd in zip(in_spatial, kernel_spatial, window_strides,
                                                  padding, lhs_dilation, rhs_dilation):
        padded = _dilated_size(size, ld) + lo + hi
        if padded < 0:
            raise ValueError(f"Negative padding is larger than the size of the corresponding "
                             f"dimension: got padding={padding} for lhs spatial shape "
                             f"{tuple(in_spatial)}")
        window = _dilated_size(k, rd)
        out.append(max((padded - window) // stride + 1, 0))
    return tuple(out)


def _conv_result_dtype(lhs, rhs, preferred_element_type):
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"lax.conv_general_dilated requires arguments to have the same "
                        f"dtypes, got {lhs.dtype.name}, {rhs.dtype.name}.")
    if preferred_element_type is not None:
        _check_conv_preferred(lhs.dtype, preferred_element_type)
    return check_preferred_element_type("conv_general_dilated", lhs.dtype,
                                        preferred_element_type)


_KINDS = (dtypes.is_int, dtypes.is_float, dtypes.is_complex)


def _check_conv_preferred(dtype, preferred):
    """JAX's rules for a convolution's ``preferred_element_type``, stricter than
    dot_general's: the same kind of number (integers may also accumulate in floats), the
    same signedness, and never narrower (not even a float: float32 to float16 is refused)."""
    if not (dtypes.is_int(dtype) and dtypes.is_float(preferred)):
        if any(kind(dtype) and not kind(preferred) for kind in _KINDS):
            raise TypeError("Input type is incompatible with `preferred_element_type`. The "
                            "compatible combinations of (input_type, preferred_element_type) "
                            "are (integral, integral), (integral, floating), "
                            "(floating, floating), (complex, complex.")
        if dtypes.is_signed_int(dtype) and not dtypes.is_signed_int(preferred):
            raise TypeError("`preferred_element_type` must have the same signedness as the "
                            "original type.")
    if np.dtype(preferred).itemsize < np.dtype(dtype).itemsize:
        raise TypeError("`preferred_element_type` must not be narrower than the original "
                        "type.")


@conv_general_dilated_p.def_abstract_eval
@remembered  # (its checks cost ~14 us; a gradient types each convolution three times)
def _conv_general_dilated_abstract_eval(
        lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
        feature_group_count, batch_group_count, precision, preferred_element_type,
        out_sharding=None):
    dn = dimension_numbers
    if lhs.ndim != rhs.ndim:
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got {lhs.ndim} "
                        f"and {rhs.ndim}.")
    if lhs.ndim < 2 or not all(sorted(spec) == list(range(lhs.ndim)) for spec in dn):
        raise TypeError(f"conv_general_dilated dimension_numbers must be permutations of the "
                        f"{lhs.ndim} axes, got {dn}.")
    dtype = _conv_result_dtype(lhs, rhs, preferred_element_type)
    _check_spatial_params(lhs.ndim - 2, window_strides, padding, lhs_dilation, rhs_dilation)
    _check_groups(lhs, rhs, dn, feature_group_count, batch_group_count)
    spatial = _out_spatial_shape([lhs.shape[d] for d in dn.lhs_spec[2:]],
                                 [rhs.shape[d] for d in dn.rhs_spec[2:]],
                                 window_strides, padding, lhs_dilation, rhs_dilation)
    canonical = (lhs.shape[dn.lhs_spec[0]] // batch_group_count,
                 rhs.shape[dn.rhs_spec[0]]) + spatial
    shape = tuple(canonical[i] for i in np.argsort(dn.out_spec))
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def _dilate(x, dilations, first_axis):
    """Insert ``dilation - 1`` zeros between neighbours along axes ``first_axis``, ..."""
    if all(d == 1 for d in dilations):
        return x
    axes = range(first_axis, first_axis + len(dilations))
    shape = list(x.shape)
    for axis, d in zip(axes, dilations):
        shape[axis] = _dilated_size(x.shape[axis], d)
    out = np.zeros(shape, x.dtype)
    index = [slice(None)] * x.ndim
    for axis, d in zip(axes, dilations):
        index[axis] = slice(None, None, d)
    out[tuple(index)] = x
    return out


def _pad_spatial(x, padding, first_axis):
    """Pad the spatial axes ``first_axis``, ...; negative padding removes elements."""
    axes = range(first_axis, first_axis + len(padding))
    grow, crop = [(0, 0)] * x.ndim, [slice(None)] * x.ndim
    for axis, (lo, hi) in zip(axes, padding):
        grow[axis] = (max(lo, 0), max(hi, 0))
        crop[axis] = slice(max(-lo, 0), x.shape[axis] + max(lo, 0) + max(hi, 0) - max(-hi, 0))
    return np.pad(x, grow)[tuple(crop)]


def _convolve(x, w, window_strides, rhs_dilation, feature_group_count, batch_group_count):
    """The convolution of ``x`` (N, spatial..., C, padded and dilated) with ``w`` (O, I,
    kernel spatial...), its elements ``rhs_dilation`` apart: (N / batch groups, O, out
    spatial...). (A dilated kernel's gaps are not zeros: an inf or NaN in the input under
    a gap does not reach the output, as in XLA.)

    As im2col and one matrix product per group, so BLAS does the work: every window laid
    out as a row of (kernel position, feature) values, times the kernels laid out the same
    way as columns. Features go last so that laying the windows out copies runs of them
    (with the kernel position last, it copied 3 values at a time: most of a CNN's step)."""
    n_sp = x.ndim - 2
    k_sp = w.shape[2:]
    x = np.ascontiguousarray(x)  # (so that a window's features are one run in memory)
    extent = tuple(_dilated_size(k, r) for k, r in zip(k_sp, rhs_dilation))
    windows = np.lib.stride_tricks.sliding_window_view(x, extent,
                                                       axis=tuple(range(1, n_sp + 1)))
    windows = windows[(slice(None),) + tuple(slice(None, None, s) for s in window_strides)
                      + (slice(None),) + tuple(slice(None, None, r) for r in rhs_dilation)]
    n, out_sp, c = windows.shape[0], windows.shape[1:1 + n_sp], windows.shape[1 + n_sp]
    out_axes = tuple(range(1, 1 + n_sp))
    if batch_group_count > 1:   # (G, N/G, out..., C, k...) -> (G, N/G, out..., k..., C)
        groups, c_g = batch_group_count, c
        rows = windows.reshape((groups, n // groups) + windows.shape[1:])
        rows = rows.transpose((0, 1) + tuple(a + 1 for a in out_axes)
                              + tuple(range(3 + n_sp, 3 + 2 * n_sp)) + (2 + n_sp,))
        n //= groups
    else:                       # (N, out..., G, C/G, k...) -> (G, N, out..., k..., C/G)
        groups = feature_group_count
        c_g = c // groups
        rows = windows.reshape((n,) + out_sp + (groups, c_g) + k_sp)
        g_axis = 1 + n_sp
        rows = rows.transpose((g_axis, 0) + out_axes
                              + tuple(range(g_axis + 2, g_axis + 2 + n_sp)) + (g_axis + 1,))
    rows = rows.reshape(groups, n * math.prod(out_sp), math.prod(k_sp) * c_g)
    per_group = w.shape[0] // groups                              # w: G, O/G, c, k...
    cols = np.moveaxis(w.reshape((groups, per_group) + w.shape[1:]), (1, 2), (-1, -2))
    cols = cols.reshape(groups, math.prod(k_sp) * c_g, per_group)
    product = np.matmul(rows, cols)                               # G, n * out, O/G
    product = product.reshape((groups, n) + tuple(out_sp) + (per_group,))
    return np.moveaxis(product, (0, product.ndim - 1), (1, 2)).reshape(
        (n, groups * per_group) + tuple(out_sp))


@conv_general_dilated_p.def_impl
def _conv_general_dilated_impl(
        lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
        feature_group_count, batch_group_count, precision, preferred_element_type,
        out_sharding=None):
    dn = dimension_numbers
    out = _conv_general_dilated_abstract_eval(
        get_aval(lhs), get_aval(rhs), window_strides=window_strides, padding=padding,
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=feature_group_count, batch_group_count=batch_group_count,
        precision=precision, preferred_element_type=preferred_element_type)
    acc = accumulation_dtype(out.dtype)
    n, c, *spatial = dn.lhs_spec
    x = as_accumulation(np.transpose(lhs, (n, *spatial, c)), acc)  # N, spatial, C
    w = as_accumulation(np.transpose(rhs, dn.rhs_spec), acc)       # O, I, spatial
    canonical_shape = tuple(out.shape[d] for d in dn.out_spec)
    if 0 in canonical_shape:
        return np.zeros(out.shape, out.dtype)
    x = _pad_spatial(_dilate(x, lhs_dilation, 1), padding, 1)
    result = _convolve(x, w, window_strides, rhs_dilation, feature_group_count,
                       batch_group_count)
    result = result.reshape(canonical_shape)
    return finish_accumulation(np.transpose(result, np.argsort(dn.out_spec)), out.dtype)


# --- as one matrix product (compiled programs) ----------------------------------------------
#
# In compiled programs a convolution is decomposed (``compiler.passes.inline_calls``) into the
# product of its im2col matrix and its kernel: the input in (batch, spatial..., feature)
# order, dilated and padded by one ``pad``, its windows gathered into the matrix by one
# ``gather`` (a packing kernel) and contracted with the kernel by one ``dot_general`` (a BLAS
# call; batched over the groups). The matrix, (N, P..., K, C), has a row per batch element
# and output position and a column per window position and feature: element (n, p, k, c) is
# element base[p] + offset[k] + c of image n flattened, two small tables of offsets made at
# trace time, so the packing kernel reads each element once, features contiguously. (Strided
# slices joined by a concatenate computed every slice's load at every element, and chose
# between them: an im2col of a CNN's step took 2-5 ms instead of under 1.)

def _conv_as_product(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                     dimension_numbers, feature_group_count, batch_group_count, precision,
                     preferred_element_type, out_sharding=None):
    out = _conv_general_dilated_abstract_eval(
        get_aval(lhs), get_aval(rhs), window_strides=window_strides, padding=padding,
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
        feature_group_count=feature_group_count, batch_group_count=batch_group_count,
        precision=precision, preferred_element_type=preferred_element_type)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    out_sp = [out.shape[d] for d in out_spec[2:]]
    if out.size == 0 or get_aval(rhs).size == 0:
        return structural.zeros_like_shaped_array(out)
    n, c, *spatial = lhs_spec
    o, i, *k_spatial = rhs_spec
    if feature_group_count == batch_group_count == 1 and \
            math.prod(out_sp) < math.prod(get_aval(rhs).shape[d] for d in k_spatial):
        return _correlation_as_product(lhs, rhs, out_sp, padding, lhs_dilation,
                                       window_strides, rhs_dilation, dimension_numbers,
                                       precision, preferred_element_type)
    x = _padded(transpose(lhs, (n, *spatial, c)), padding, lhs_dilation)  # N, S..., C
    w = transpose(rhs, (*k_spatial, i, o))                                 # K..., C/G, O
    if _by_taps(get_aval(w), out.dtype, feature_group_count, batch_group_count):
        product = _sum_of_taps(x, w, out_sp, window_strides, rhs_dilation)  # N, P..., O
    else:
        cols = _im2col(x, get_aval(w).shape[:-2], out_sp, window_strides, rhs_dilation)
        product = _grouped_product(cols, w, feature_group_count, batch_group_count,
                                   precision, preferred_element_type)     # N, P..., O
    where = [out_spec[0], *out_spec[2:], out_spec[1]]
    return transpose(product, tuple(np.argsort(where)))


def _padded(x, padding, lhs_dilation):
    """``x`` (any, S..., any) dilated and padded along its spatial axes."""
    return structural.pad(x, np.zeros((), get_aval(x).dtype), [(0, 0, 0)] + [
        (lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation)] + [(0, 0, 0)])


def _correlation_as_product(lhs, rhs, out_sp, padding, lhs_dilation, window_strides,
                            rhs_dilation, dimension_numbers, precision, preferred):
    """An ungrouped convolution whose kernel has more positions than its result (a kernel's
    gradient: the input correlated with the output cotangent) as one product whose rows are
    the kernel's positions and its input features: the matrix of the input's windows
    gathered by *output* position, (C, K..., P, N), element (c, k, p, n) the input at
    position p * s + k * d. For a kernel's gradient that is the forward pass's own im2col,
    the same pad and gather of the input in its own layout (one computation, once the
    compiler merges them), and the output cotangent is the kernel as it is: the transposes
    of both and the gather of the input's transpose, each a kernel, are gone."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    n, c, *spatial = lhs_spec
    o, i, *k_spatial = rhs_spec
    x = _padded(transpose(lhs, (c, *spatial, n)), padding, lhs_dilation)  # C, S..., N
    w = transpose(rhs, (i, *k_spatial, o))                                 # C, K..., O
    k_shape = get_aval(w).shape[1:-1]
    cols = _im2col(x, out_sp, k_shape, rhs_dilation, window_strides)       # C, K..., P, N
    nk = len(k_shape)
    contracted = tuple(range(nk + 1))
    product = dot_general(cols, w, ((contracted, contracted), ((), ())), precision,
                          preferred)                                       # P, N, O
    product = reshape(product, (*out_sp, *get_aval(product).shape[1:]))    # P..., N, O
    where = [*out_spec[2:], out_spec[0], out_spec[1]]
    return transpose(product, tuple(np.argsort(where)))


# A convolution with at most this many (input feature, output feature) pairs, ungrouped, is
# a sum of its window's shifted slices times weights, element-wise: a product of so few
# columns is a matrix-vector product (a 3x3 filter of one channel in a loop: 185 us a step
# by im2col and BLAS, where XLA took 46).
TAPS_MAX_FEATURES = 4


def _by_taps(w, out_dtype, feature_groups, batch_groups):
    """Whether the kernel ``w`` (K..., C, O) convolves by ``_sum_of_taps``."""
    c_in, c_out = w.shape[-2:]
    # (float32 and float64 only: a product of half floats accumulates in float32, rounding
    # once, where a sum of their products would round at every term)
    return feature_groups == batch_groups == 1 and c_in * c_out <= TAPS_MAX_FEATURES and \
        w.dtype in (dtypes.float32, dtypes.float64) and w.dtype == out_dtype


def _sum_of_taps(x, w, out_sp, strides, rhs_dilation):
    """(N, P..., O): for each window position and input feature, the strided slice of the
    dilated, padded input ``x`` (N, S..., C) that it meets, times its weight for each output
    feature, summed: element-wise work that fuses into one kernel reading ``x`` once per
    window position (the blur's shifted slices)."""
    shape, w_shape = get_aval(x).shape, get_aval(w).shape
    c_in, c_out = w_shape[-2:]
    total = None
    for tap in np.ndindex(*w_shape[:-2]):
        first = [t * r for t, r in zip(tap, rhs_dilation)]
        for c in range(c_in):
            start = [0, *first, c]
            limit = [shape[0], *[f + (p - 1) * s + 1 for f, p, s in zip(first, out_sp, strides)],
                     c + 1]
            rows = structural.slice(x, start, limit, [1, *strides, 1])     # N, P..., 1
            out_shape = get_aval(rows).shape[:-1] + (c_out,)
            weights = reshape(structural.slice(w, [*tap, c, 0], [t + 1 for t in tap] +
                                               [c + 1, c_out]), (c_out,))
            term = mul(broadcast_in_dim(reshape(rows, out_shape[:-1]), out_shape,
                                        tuple(range(len(out_shape) - 1))),
                       broadcast_in_dim(weights, out_shape, (len(out_shape) - 1,)))
            total = term if total is None else add(total, term)
    return total


def _im2col(x, k_shape, out_sp, strides, rhs_dilation):
    """(N, P..., K, C): element (n, p, k, c) is element c of the window position k of
    output position p, from the dilated, padded input ``x`` (N, S..., C). One gather of
    the input seen as (N, S, C), S its spatial positions flattened: row (p, k) is the
    features of position ``base[p] + offset[k]``, a contiguous run of C."""
    shape = get_aval(x).shape
    batch, spatial, features = shape[0], shape[1:-1], shape[-1]
    starts = _window_starts(spatial, tuple(k_shape), tuple(out_sp), tuple(strides),
                            tuple(rhs_dilation))
    dn = gather_scatter.GatherDimensionNumbers(
        offset_dims=(0, len(out_sp) + 2), collapsed_slice_dims=(1,), start_index_map=(1,))
    return gather_scatter.gather(reshape(x, (batch, math.prod(spatial), features)), starts,
                                 dn, (batch, 1, features), mode="promise_in_bounds")


@functools.lru_cache(maxsize=64)
def _window_starts(spatial, k_shape, out_sp, strides, rhs_dilation):
    """``_im2col``'s table, (P..., K, 1): the flattened spatial position of each output
    position's window element. One (read-only) array per set of sizes, so that the
    compiler sees two gathers by it as the same (a weight gradient's and the forward's)."""
    steps = [math.prod(spatial[j + 1:]) for j in range(len(spatial))]
    index = np.int32 if math.prod(spatial) < 2 ** 31 else np.int64
    base = sum(np.arange(p).reshape([-1 if a == j else 1 for a in range(len(out_sp))])
               * (s * step) for j, (p, s, step) in enumerate(zip(out_sp, strides, steps)))
    offset = sum(np.arange(k).reshape([-1 if a == j else 1 for a in range(len(k_shape))])
                 * (r * step) for j, (k, r, step) in enumerate(zip(k_shape, rhs_dilation,
                                                                   steps)))
    starts = (np.asarray(base, index).reshape(*out_sp, 1)
              + np.asarray(offset, index).reshape(-1))
    starts = starts.reshape(*starts.shape, 1)
    starts.flags.writeable = False
    return starts


def _grouped_product(cols, w, feature_groups, batch_groups, precision, preferred):
    """``cols`` (N, P..., K, C) times the kernel ``w`` (K..., C/G, O): (N/B, P..., O);
    feature group g of the columns (or batch group g of the rows) meets output feature
    group g."""
    shape, w_shape = get_aval(cols).shape, get_aval(w).shape
    batch, out_sp = shape[0], shape[1:-2]
    k, in_features, out_features = math.prod(w_shape[:-2]), w_shape[-2], w_shape[-1]
    rows = batch * math.prod(out_sp)
    if feature_groups == batch_groups == 1:
        nd = len(shape)
        return dot_general(cols, reshape(w, (k, in_features, out_features)),
                           (((nd - 2, nd - 1), (0, 1)), ((), ())), precision, preferred)
    groups = max(feature_groups, batch_groups)
    per_group = out_features // groups
    w = transpose(reshape(w, (k * in_features, groups, per_group)), (1, 0, 2))
    if feature_groups > 1:      # feature g * C/G + c
        cols = reshape(cols, (rows, k, groups, in_features))
        cols = reshape(transpose(cols, (2, 0, 1, 3)), (groups, rows, k * in_features))
    else:                       # row (g * N/B + n) * P + p
        cols = reshape(cols, (groups, rows // groups, k * in_features))
    product = dot_general(cols, w, (((2,), (1,)), ((0,), (0,))), precision,
                          preferred)                                       # G, rows/G, O/G
    if feature_groups > 1:
        product = transpose(product, (1, 0, 2))
    else:
        product = transpose(reshape(product, (groups, batch // groups, math.prod(out_sp),
                                              per_group)), (1, 2, 0, 3))
    return reshape(product, (batch // batch_groups, *out_sp, out_features))


conv_general_dilated_p.def_lowering("jaxpr", _conv_as_product)


# --- autodiff ------------------------------------------------------------------------------
#
# Ignoring space, a convolution is a matrix product [batch m, in j] x [in j, out k] -> [m, k],
# so its transposes are products too: the lhs cotangent is [m, k] x [k, j] (a convolution of
# the output cotangent with the kernel, in and out features swapped and space reversed), the
# kernel cotangent is [j, m] x [m, k] (the input and the output cotangent convolved, with the
# batch as the contracted "feature" axis). Strides and dilations trade places, and groups
# change kind: feature groups of the forward pass are batch groups of the kernel's transpose,
# and batch groups become feature groups.

conv_general_dilated_p.def_jvp(bilinear_jvp(conv_general_dilated_p))


def _swap_first_two(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _spatial_sizes(shape, spec):
    return [shape[d] for d in spec[2:]]


def _conv_transpose_lhs(ct, lhs_aval, rhs, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count,
                        batch_group_count, precision, preferred_element_type,
                        out_sharding=None):
    """The input's cotangent: the output cotangent convolved with the space-reversed kernel,
    its in/out features swapped, strides becoming input dilation (and vice versa)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    rhs_shape = get_aval(rhs).shape
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:  # the group axis moves from the kernel's out features to its in features
        rhs = _split_axis(rhs, rhs_spec[0], groups)
        rhs = _merge_axis_into(rhs, rhs_spec[0], rhs_spec[1])
    pads = _lhs_transpose_padding(
        _spatial_sizes(lhs_aval.shape, lhs_spec), _spatial_sizes(rhs_shape, rhs_spec),
        window_strides, _spatial_sizes(get_aval(ct).shape, out_spec), padding, lhs_dilation,
        rhs_dilation)
    rhs = structural.rev(rhs, tuple(rhs_spec[2:]))
    if get_aval(rhs).dtype != get_aval(ct).dtype:
        rhs = _convert(rhs, get_aval(ct).dtype)
    out = conv_general_dilated_p.bind(
        ct, rhs, window_strides=tuple(lhs_dilation), padding=pads,
        lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=ConvDimensionNumbers(out_spec, _swap_first_two(rhs_spec), lhs_spec),
        feature_group_count=groups, batch_group_count=1, precision=precision,
        preferred_element_type=preferred_element_type, out_sharding=None)
    if batch_group_count > 1:  # the groups were batch groups: move them back to the batch
        out = _split_axis(out, lhs_spec[1], batch_group_count)
        out = _merge_axis_into(out, lhs_spec[1], lhs_spec[0])
    return out


def _conv_transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count,
                        batch_group_count, precision, preferred_element_type,
                        out_sharding=None):
    """The kernel's cotangent: the input convolved with the output cotangent as a kernel,
    batch and feature axes swapped, strides becoming kernel dilation; feature groups turn
    into batch groups and batch groups into feature groups."""
    if 0 in get_aval(ct).shape:  # nothing flowed through: avoid a degenerate convolution
        return structural.zeros_like_shaped_array(rhs_aval)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_shape = get_aval(lhs).shape
    pads = _rhs_transpose_padding(
        _spatial_sizes(lhs_shape, lhs_spec), _spatial_sizes(rhs_aval.shape, rhs_spec),
        window_strides, _spatial_sizes(get_aval(ct).shape, out_spec), padding, lhs_dilation,
        rhs_dilation)
    if get_aval(lhs).dtype != get_aval(ct).dtype:
        lhs = _convert(lhs, get_aval(ct).dtype)
    return conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=pads,
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=ConvDimensionNumbers(_swap_first_two(lhs_spec),
                                               _swap_first_two(out_spec),
                                               _swap_first_two(rhs_spec)),
        feature_group_count=batch_group_count, batch_group_count=feature_group_count,
        precision=precision, preferred_element_type=preferred_element_type,
        out_sharding=None)


def _lhs_transpose_padding(in_sizes, kernel_sizes, strides, out_sizes, padding, lhs_dilation,
                           rhs_dilation):
    """Pads that make the transposed convolution's output exactly the input's size: a window
    that overlapped the input's first element by one reaches back kernel - 1 - low."""
    pads = []
    for size, k, s, out, (lo, _), ld, rd in zip(in_sizes, kernel_sizes, strides, out_sizes,
                                                 padding, lhs_dilation, rhs_dilation):
        kernel = _dilated_size(k, rd)
        before = kernel - lo - 1
        after = _dilated_size(size, ld) + kernel - 1 - _dilated_size(out, s) - before
        pads.append((before, after))
    return tuple(pads)


def _rhs_transpose_padding(in_sizes, kernel_sizes, strides, out_sizes, padding, lhs_dilation,
                           rhs_dilation):
    """Pads that make the kernel's transposed convolution produce the kernel's size."""
    pads = []
    for size, k, s, out, (lo, _), ld, rd in zip(in_sizes, kernel_sizes, strides, out_sizes,
                                                 padding, lhs_dilation, rhs_dilation):
        high = (_dilated_size(out, s) - _dilated_size(size, ld)) + (_dilated_size(k, rd) - lo - 1)
        pads.append((lo, high))
    return tuple(pads)


def _convert(x, dtype):
    return convert_element_type(x, dtype)


conv_general_dilated_p.def_transpose(bilinear_transpose(_conv_transpose_lhs,
                                                        _conv_transpose_rhs))


# --- vmap ----------------------------------------------------------------------------------

def _merge_axis_into(x, src, dst):
    """Fold axis ``src`` into axis ``dst`` (numbered without ``src``) as its major part."""
    x = moveaxis(x, src, dst)
    shape = get_aval(x).shape
    return reshape(x, shape[:dst] + (shape[dst] * shape[dst + 1],) + shape[dst + 2:])


def _split_axis(x, axis, major):
    """Split ``axis`` into (``major``, rest), the major part first."""
    shape = get_aval(x).shape
    return reshape(x, shape[:axis] + (major, shape[axis] // major) + shape[axis + 1:])


def _conv_batch_rule(axis_data, vals, dims, **params):
    """vmap of a convolution folds the vmapped axis into one the convolution already has:
    a batched input into its batch axis, a batched kernel into its out features (as extra
    output features), both into feature groups (each vmapped member a group of its own)."""
    lhs, rhs = vals
    lbd, rbd = dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    size = axis_data.size
    if size == 0:
        return _empty_batch(lhs, rhs, lbd, rbd, params), 0
    if lbd is not None and rbd is not None:
        if bgc > 1:
            lhs, bgc = _merge_axis_into(lhs, lbd, lhs_spec[0]), bgc * size
        else:
            lhs, fgc = _merge_axis_into(lhs, lbd, lhs_spec[1]), fgc * size
        rhs = _merge_axis_into(rhs, rbd, rhs_spec[0])
        out = _bind(lhs, rhs, params, fgc, bgc)
        return _split_axis(out, out_spec[1], size), out_spec[1]
    if lbd is not None:
        if bgc == 1:
            lhs = _merge_axis_into(lhs, lbd, lhs_spec[0])
        else:  # the batch groups must stay outermost in the batch axis: vmap inside them
            lhs = _split_axis(lhs, lhs_spec[0] + (lbd <= lhs_spec[0]), bgc)
            lhs = _merge_axis_into(lhs, lbd + (lhs_spec[0] < lbd), lhs_spec[0] + 1)
            lhs = _merge_axis_into(lhs, lhs_spec[0], lhs_spec[0])
        out = _bind(lhs, rhs, params, fgc, bgc)
        return _split_axis(out, out_spec[0], size), out_spec[0]
    groups = max(fgc, bgc)
    if groups == 1:
        out = _bind(lhs, _merge_axis_into(rhs, rbd, rhs_spec[0]), params, fgc, bgc)
        return _split_axis(out, out_spec[1], size), out_spec[1]
    # Groups must stay outermost in the kernel's out features: vmap inside each group.
    rhs = _split_axis(rhs, rhs_spec[0] + (rbd <= rhs_spec[0]), groups)
    rhs = _merge_axis_into(rhs, rbd + (rhs_spec[0] < rbd), rhs_spec[0] + 1)
    rhs = _merge_axis_into(rhs, rhs_spec[0], rhs_spec[0])
    out = _bind(lhs, rhs, params, fgc, bgc)
    out = _split_axis(out, out_spec[1], groups)           # groups, size * per-group
    out = _split_axis(out, out_spec[1] + 1, size)         # groups, size, per-group
    return _merge_axis_into(out, out_spec[1], out_spec[1] + 1), out_spec[1]


def _bind(lhs, rhs, params, feature_group_count, batch_group_count):
    return conv_general_dilated_p.bind(lhs, rhs, **dict(
        params, feature_group_count=feature_group_count, batch_group_count=batch_group_count))


def _empty_batch(lhs, rhs, lbd, rbd, params):
    """A vmap of size 0: zeros of the unbatched result's type with an empty axis in front
    (folding an empty axis into another would lose that axis's size)."""
    lhs_aval, rhs_aval = (_unbatched_aval(v, d) for v, d in ((lhs, lbd), (rhs, rbd)))
    out = conv_general_dilated_p.abstract_eval(lhs_aval, rhs_aval, **params)
    return structural.full((0,) + out.shape, 0, out.dtype)


def _unbatched_aval(x, bdim):
    aval = get_aval(x)
    if bdim is None:
        return aval
    return aval.update(shape=aval.shape[:bdim] + aval.shape[bdim + 1:])


conv_general_dilated_p.def_batch(_conv_batch_rule)


# --- lax wrappers --------------------------------------------------------------------------

def _ints(values, what):
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"conv_general_dilated {what} must be a sequence of integers, got "
                        f"{values!r}") from None


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None,
                         out_sharding=None):
    """The general convolution (XLA's ConvGeneralDilated); see the module docstring.

    ``padding`` is "VALID", "SAME", "SAME_LOWER" or a (low, high) pair per spatial axis;
    ``dimension_numbers`` is None (NCHW/OIHW/NCHW), a ConvDimensionNumbers, or three layout
    strings such as ``("NHWC", "HWIO", "NHWC")``.
    """
    if out_sharding is not None:
        refuse_out_sharding("lax.conv_general_dilated", out_sharding)
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    n = len(lhs_shape) - 2
    lhs_dilation = (1,) * n if lhs_dilation is None else _ints(lhs_dilation, "lhs_dilation")
    rhs_dilation = (1,) * n if rhs_dilation is None else _ints(rhs_dilation, "rhs_dilation")
    window_strides = _ints(window_strides, "window_strides")
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ValueError("String padding is not implemented for transposed convolution "
                             "using this op. Please either exactly specify the required "
                             "padding or use conv_transpose.")
        kernel = [_dilated_size(rhs_shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads([lhs_shape[d] for d in dn.lhs_spec[2:]], kernel,
                                  window_strides, padding)
    try:
        padding = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ValueError(f"padding argument to conv_general_dilated should be a string or a "
                         f"sequence of (low, high) pairs, got {padding}") from None
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize(preferred_element_type)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=operator.index(feature_group_count),
        batch_group_count=operator.index(batch_group_count),
        precision=canonicalize_precision(precision),
        preferred_element_type=preferred_element_type, out_sharding=None)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """An NCHW/OIHW convolution with strides and padding only."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """An NCHW/OIHW convolution with strides, padding and both dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)

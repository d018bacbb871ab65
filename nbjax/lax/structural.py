"""Structural primitives: they rearrange, select or replicate elements without arithmetic.

rev, concatenate, pad, slice, split, tile and iota, each with its lax wrapper (and ``slice_in_dim``,
``index_in_dim``), plus the filled arrays built on them (``full``, ``full_like``,
``zeros_like_array``). The shape primitives they are written in (broadcast_in_dim, reshape,
transpose, squeeze) are in ``shapes``. Every rule of one primitive sits in its own section,
ending with its kernel lowering: which operand element each result element reads.

All of them are linear, so their JVP applies the primitive to the tangents and their
transpose sends each output element's cotangent back to the element(s) it came from
(``pad`` and ``slice`` are each other's transposes; ``concatenate`` transposes to slices).
Their batching rules leave the batch axis where it is whenever the primitive can work
around it. Reference implementations return arrays that own their memory: an ``Array``
wraps the result without copying, so a view of an input (which may be a user's writable
NumPy array) must not leak into it.
"""

import builtins
import operator

import numpy as np

from ..core import Primitive, ShapedArray, canonical_shape, dtypes, get_aval
from ..interpreters import ad
from ..interpreters.transpose import is_undefined
from ..sharding import refuse_out_sharding
from . import elementwise
from .batch_util import bdim_at, broadcast_batch
from .shapes import (aval_of, broadcast, broadcast_in_dim, canonicalize_axis, check_int_tuple,
                     is_array, reduce_sum, reshape, shift_axes, squeeze, tuple_insert)
from .standard import check_dtype, kernel_index, remembered, same_dtypes

__all__ = ["rev", "rev_p", "concatenate", "concatenate_p", "pad", "pad_p",
           "slice", "slice_p", "slice_in_dim", "index_in_dim", "split", "split_p", "tile",
           "tile_p",
           "iota", "iota_p", "broadcasted_iota", "full", "full_like", "zeros_like_array",
           "zeros_like_shaped_array"]


# --- rev -----------------------------------------------------------------------------------

rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_abstract_eval(x, *, dimensions):
    check_int_tuple("rev", "dimensions", dimensions)
    if len(set(dimensions)) != len(dimensions):
        raise TypeError(f"rev dimensions must be unique, got {dimensions}.")
    if dimensions and max(dimensions) >= x.ndim:
        raise TypeError(f"rev dimensions must all be less than operand ndim, got dimensions "
                        f"{dimensions} for operand ndim {x.ndim}.")
    return x


@rev_p.def_impl
def _rev_impl(x, *, dimensions):
    return np.flip(x, dimensions).copy()


def rev(operand, dimensions):
    """Reverse the order of elements along each of ``dimensions``."""
    return rev_p.bind(operand, dimensions=tuple(operator.index(d) for d in dimensions))


rev_p.def_batch(lambda axis_data, vals, dims, *, dimensions:
                (rev(vals[0], shift_axes(dimensions, dims[0])), dims[0]))
ad.deflinear(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])


def _kernel_rev(ctx, index, read, shapes, *, dimensions):
    return read(0, [ctx.sub(ctx.iconst(n - 1), i) if k in dimensions else i
                    for k, (i, n) in enumerate(zip(index, shapes[0]))])


kernel_index(rev_p, _kernel_rev, restrides=True)


# --- concatenate ---------------------------------------------------------------------------

concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*operands, dimension):
    if not operands:
        raise TypeError("concatenate expects at least one operand, got 0.")
    shapes = ", ".join(str(o.shape) for o in operands)
    if len({o.ndim for o in operands}) != 1:
        raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: "
                        f"got {shapes}.")
    if not 0 <= dimension < operands[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for "
                        f"shapes {shapes}.")
    others = {o.shape[:dimension] + o.shape[dimension + 1:] for o in operands}
    if len(others) != 1:
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions "
                        f"other than the one being concatenated: concatenating along "
                        f"dimension {dimension} for shapes {shapes}.")
    same_dtypes("concatenate", operands)
    shape = list(operands[0].shape)
    shape[dimension] = sum(o.shape[dimension] for o in operands)
    return ShapedArray(shape, operands[0].dtype, all(o.weak_type for o in operands))


@concatenate_p.def_impl
def _concatenate_impl(*operands, dimension):
    return np.concatenate(operands, axis=dimension)


def _concatenate_batch_rule(axis_data, vals, dims, *, dimension):
    """Join along the shifted ``dimension`` at the first batched operand's batch axis; other
    operands are brought there (moved, or broadcast when unbatched)."""
    bdim = next(d for d in dims if d is not None)
    operands = [bdim_at(v, d, bdim, axis_data.size) for v, d in zip(vals, dims)]
    return concatenate(operands, dimension + (dimension >= bdim)), bdim


def _concatenate_transpose_rule(ct, *operands, dimension):
    """Each linear operand's cotangent is its own stretch of ``ct`` along ``dimension``."""
    cts, start = [], 0
    for x in operands:
        stop = start + aval_of(x).shape[dimension]
        cts.append(slice_in_dim(ct, start, stop, axis=dimension) if is_undefined(x) else None)
        start = stop
    return cts


concatenate_p.def_batch(_concatenate_batch_rule)
ad.deflinear(concatenate_p, _concatenate_transpose_rule)


def concatenate(operands, dimension):
    """Join ``operands`` (equal dtypes and ranks) along ``dimension``."""
    operands = list(operands)
    if not operands:
        raise ValueError("concatenate requires a non-empty sequences of arrays")
    if len(operands) == 1 and is_array(operands[0]):
        return operands[0]
    return concatenate_p.bind(*operands, dimension=operator.index(dimension))


def _kernel_concatenate(ctx, index, read, shapes, *, dimension):
    """Every operand is read (at an index clamped into it) and a select keeps the right one."""
    at, result, start = index[dimension], None, 0
    for k, shape in enumerate(shapes):
        size = shape[dimension]
        if size == 0:
            continue
        local = ctx.min(ctx.max(ctx.sub(at, ctx.iconst(start)), ctx.iconst(0)),
                        ctx.iconst(size - 1))
        value = read(k, index[:dimension] + [local] + index[dimension + 1:])
        result = value if result is None else ctx.select(ctx.lt(at, ctx.iconst(start)),
                                                        result, value)
        start += size
    return read(0, index) if result is None else result  # None: the result is empty


kernel_index(concatenate_p, _kernel_concatenate)


# --- pad -----------------------------------------------------------------------------------

pad_p = Primitive("pad")


def _padded_size(size, low, high, interior):
    """``low`` + the size after putting ``interior`` values between elements + ``high``."""
    dilated = 0 if size == 0 else size + (size - 1) * interior
    return low + dilated + high


@pad_p.def_abstract_eval
@remembered
def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.ndim != 0:
        raise ValueError(f"padding_value must be a scalar; got shape {padding_value.shape}")
    if x.dtype != padding_value.dtype:
        raise TypeError(f"pad operand and padding_value must be same dtype: got "
                        f"{x.dtype.name} and {padding_value.dtype.name}.")
    if len(padding_config) != x.ndim:
        raise ValueError(f"length of padding_config must equal the number of axes of operand, "
                         f"got padding_config {padding_config} for operand shape {x.shape}")
    if any(interior < 0 for _, _, interior in padding_config):
        raise ValueError(f"interior padding in padding_config must be nonnegative, got "
                         f"padding_config {padding_config}")
    shape = tuple(_padded_size(d, *cfg) for d, cfg in zip(x.shape, padding_config))
    if any(d < 0 for d in shape):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{shape}, for padding_config {padding_config} and operand shape "
                         f"{x.shape}")
    return ShapedArray(shape, x.dtype, x.weak_type and padding_value.weak_type)


@pad_p.def_impl
def _pad_impl(x, padding_value, *, padding_config):
    # Pad by the non-negative amounts, then crop where low/high are negative.
    grown = [_padded_size(d, max(lo, 0), max(hi, 0), i)
             for d, (lo, hi, i) in zip(x.shape, padding_config)]
    out = np.full(grown, padding_value, dtype=x.dtype)
    place = tuple(builtins.slice(max(lo, 0), max(lo, 0) + _padded_size(d, 0, 0, i), i + 1)
                  for d, (lo, _, i) in zip(x.shape, padding_config))
    out[place] = x
    crop = tuple(builtins.slice(-min(lo, 0), g + min(hi, 0))
                 for g, (lo, hi, _) in zip(grown, padding_config))
    return out[crop].copy()


def _pad_batch_rule(axis_data, vals, dims, *, padding_config):
    """The batch axis is not padded. A batched padding value cannot be a pad's scalar: pad
    with zeros, then select each member's padding value wherever padding went."""
    (x, padding_value), (x_dim, value_dim) = vals, dims
    if x_dim is None:
        x, x_dim = broadcast_batch(x, axis_data.size, 0), 0
    config = list(padding_config)
    config.insert(x_dim, (0, 0, 0))
    if value_dim is None:
        return pad(x, padding_value, config), x_dim
    padded = pad(x, _zero_scalar(x), config)
    from_operand = pad(full_like(x, True, np.bool_), np.bool_(False), config)
    fill = broadcast_in_dim(padding_value, get_aval(padded).shape, (x_dim,))
    return elementwise.select(from_operand, padded, fill), x_dim


def _unpad(ct, padding_config):
    """The elements of a padded array that came from the operand: crop the low/high padding
    (a pad by its negation, which also puts zeros where the operand itself was cropped),
    then step over the interior padding."""
    if any(lo or hi for lo, hi, _ in padding_config):
        ct = pad(ct, _zero_scalar(ct), [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    if any(interior for _, _, interior in padding_config):
        shape = get_aval(ct).shape
        ct = slice(ct, (0,) * len(shape), shape, [i + 1 for _, _, i in padding_config])
    return ct


def _pad_transpose_rule(ct, x, padding_value, *, padding_config):
    """The operand's cotangent is ``ct`` where the operand landed; the padding value was
    copied everywhere else, so its cotangent is the sum of the rest of ``ct``."""
    from_operand = _unpad(ct, padding_config)
    ct_value = None
    if is_undefined(padding_value):
        def total(y):
            return reduce_sum(y, tuple(range(get_aval(y).ndim)))
        ct_value = elementwise.sub(total(ct), total(from_operand))
    return [from_operand if is_undefined(x) else None, ct_value]


def _zero_scalar(x):
    return np.zeros((), get_aval(x).dtype)


pad_p.def_batch(_pad_batch_rule)
ad.deflinear(pad_p, _pad_transpose_rule)


def pad(operand, padding_value, padding_config):
    """Pad each axis by ``(low, high, interior)``; negative low/high crop.

    ``padding_value`` must be a scalar of ``operand``'s dtype (as in JAX; ``jnp.pad``
    converts it).
    """
    config = tuple(tuple(operator.index(v) for v in cfg) for cfg in padding_config)
    if any(len(cfg) != 3 for cfg in config):
        raise ValueError(f"padding_config must be a sequence of (low, high, interior) "
                         f"triples, got {padding_config}")
    return pad_p.bind(operand, padding_value, padding_config=config)


def _kernel_pad(ctx, index, read, shapes, *, padding_config):
    """Operand element ``(i - low) / (interior + 1)`` where that divides exactly and lies
    inside the operand, else the padding value."""
    if 0 in shapes[0]:
        return read(1, [])
    inside, operand_index, checked = None, [], []
    for i, n, (low, high, interior) in zip(index, shapes[0], padding_config):
        shifted = ctx.sub(i, ctx.iconst(low)) if low else i
        step = interior + 1
        j = ctx.div(shifted, ctx.iconst(step)) if step != 1 else shifted
        checks = []
        if interior:
            checks += [ctx.ge(shifted, ctx.iconst(0)),
                       ctx.eq(ctx.rem(shifted, ctx.iconst(step)), ctx.iconst(0)),
                       ctx.lt(j, ctx.iconst(n))]
        else:  # (the index itself compared with constants: a backend may cut its loop there)
            checks += [ctx.ge(i, ctx.iconst(low))] if low > 0 else []
            checks += [ctx.lt(i, ctx.iconst(low + n))] if high > 0 else []
        for c in checks:
            inside = c if inside is None else ctx.and_(inside, c)
        operand_index.append(j)
        checked.append(bool(checks))
    if inside is None:
        return read(0, operand_index)
    # Read at index 0 where outside, along the axes it may leave only: another axis's
    # index, the innermost's above all, is read as it is, so that its loads stay contiguous
    # (a max-pool's gradient, four strided pads selected by the parity of rows and columns,
    # made 20 gathers per vector of channels: 1.8 -> 0.3 ms on the CNN benchmark's).
    safe = [ctx.select(inside, j, ctx.iconst(0)) if c else j
            for j, c in zip(operand_index, checked)]
    return ctx.select(inside, read(0, safe), read(1, []))


kernel_index(pad_p, _kernel_pad, guarded=True, interleaves=lambda eqn: any(
    interior for _, _, interior in eqn.params["padding_config"]))


# --- slice ---------------------------------------------------------------------------------

slice_p = Primitive("slice")


def _strided_size(size, stride):
    return 0 if size == 0 else (size - 1) // stride + 1


@slice_p.def_abstract_eval
@remembered
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    check_int_tuple("slice", "start_indices", start_indices)
    check_int_tuple("slice", "limit_indices", limit_indices)
    if len(start_indices) != x.ndim:
        raise TypeError(f"slice start_indices must have length equal to the number of "
                        f"dimensions of the operand, got indices {start_indices} for operand "
                        f"shape {x.shape}.")
    if len(limit_indices) != len(start_indices):
        raise TypeError(f"slice limit_indices must have the same length as start_indices, got "
                        f"start_indices {start_indices} and limit_indices {limit_indices}.")
    if any(lim > d for lim, d in zip(limit_indices, x.shape)):
        raise TypeError(f"slice limit_indices must be less than or equal to operand shape, got "
                        f"limit_indices {limit_indices} for operand shape {x.shape}.")
    if any(lim < s for s, lim in zip(start_indices, limit_indices)):
        raise TypeError(f"slice limit_indices must be greater than or equal to start_indices, "
                        f"got start_indices {start_indices} and limit_indices {limit_indices}.")
    sizes = [lim - s for s, lim in zip(start_indices, limit_indices)]
    if strides is not None:
        check_int_tuple("slice", "strides", strides)
        if len(strides) != x.ndim:
            raise TypeError(f"slice strides must have length equal to the number of dimensions "
                            f"of the operand, got strides {strides} for operand shape "
                            f"{x.shape}.")
        if any(s == 0 for s in strides):
            raise TypeError(f"slice strides must be positive, got {strides}")
        sizes = [_strided_size(n, s) for n, s in zip(sizes, strides)]
    return ShapedArray(sizes, x.dtype, x.weak_type)


@slice_p.def_impl
def _slice_impl(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(*b) for b in zip(start_indices, limit_indices, strides))].copy()


def slice(operand, start_indices, limit_indices, strides=None):
    """``operand[start:limit:stride]`` along every axis, with static bounds (``lax.slice``)."""
    def ints(seq):
        return tuple(operator.index(i) for i in seq)
    return slice_p.bind(operand, start_indices=ints(start_indices),
                        limit_indices=ints(limit_indices),
                        strides=None if strides is None else ints(strides))


def _slice_batch_rule(axis_data, vals, dims, *, start_indices, limit_indices, strides):
    """The batch axis is sliced whole, and stays where it is."""
    (x,), (bdim,) = vals, dims
    return slice(x, tuple_insert(start_indices, bdim, 0),
                 tuple_insert(limit_indices, bdim, axis_data.size),
                 None if strides is None else tuple_insert(strides, bdim, 1)), bdim


def _slice_transpose_rule(ct, x, *, start_indices, limit_indices, strides):
    """The cotangent goes back where the slice took its elements, zeros elsewhere: a pad
    with the gaps before, after and between (the stride) the taken elements."""
    strides = strides or (1,) * x.aval.ndim
    config = []
    for start, n, stride, size in zip(start_indices, get_aval(ct).shape, strides,
                                       x.aval.shape):
        end = start + (n - 1) * stride + 1 if n else start
        config.append((start, size - end, stride - 1))
    return [pad(ct, np.zeros((), get_aval(ct).dtype), config)]


slice_p.def_batch(_slice_batch_rule)
ad.deflinear(slice_p, _slice_transpose_rule)


def _kernel_slice(ctx, index, read, shapes, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(index)
    return read(0, [ctx.iadd(ctx.imul(i, ctx.iconst(s)), ctx.iconst(start))
                    for i, start, s in zip(index, start_indices, strides)])


kernel_index(slice_p, _kernel_slice, restrides=True)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """``lax.slice`` along one ``axis``; ``None`` and negative bounds mean what they do in
    Python (but bounds are not clipped to the axis)."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    size = shape[axis]
    start = 0 if start_index is None else operator.index(start_index)
    limit = size if limit_index is None else operator.index(limit_index)
    starts[axis] = start + size if start < 0 else start
    limits[axis] = limit + size if limit < 0 else limit
    strides[axis] = operator.index(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """``operand[..., index]`` along ``axis`` for a static ``index`` (IndexError if out of
    range); ``keepdims`` keeps the axis with size 1."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    index = operator.index(index)
    wrapped = index + shape[axis] if index < 0 else index
    if not 0 <= wrapped < shape[axis]:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size "
                         f"{shape[axis]}")
    result = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
    return result if keepdims else squeeze(result, (axis,))


# --- split ---------------------------------------------------------------------------------

split_p = Primitive("split", multiple_results=True)


@split_p.def_abstract_eval
def _split_abstract_eval(x, *, sizes, axis):
    if any(n < 0 for n in sizes):
        raise ValueError(f"Sizes passed to split must be nonnegative, got {list(sizes)}")
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                         f"operand shape {list(x.shape)}")
    return [ShapedArray(x.shape[:axis] + (n,) + x.shape[axis + 1:], x.dtype, x.weak_type)
            for n in sizes]


@split_p.def_impl
def _split_impl(x, *, sizes, axis):
    return [piece.copy() for piece in np.split(x, np.cumsum(sizes[:-1]), axis)]


def _split_as_slices(x, *, sizes, axis):
    """The pieces as slices: how a compiler computes them (each fuses as a read)."""
    starts = np.cumsum((0,) + sizes).tolist()
    return [slice_in_dim(x, lo, hi, 1, axis) for lo, hi in zip(starts, starts[1:])]


def _split_transpose_rule(cts, x, *, sizes, axis):
    """The pieces' cotangents joined again (zeros for the pieces nothing used)."""
    return [concatenate([ad.instantiate(ct) for ct in cts], axis)]


split_p.def_batch(lambda axis_data, vals, dims, *, sizes, axis: (
    split_p.bind(vals[0], sizes=sizes, axis=axis + (dims[0] <= axis)), [dims[0]] * len(sizes)))
ad.deflinear(split_p, _split_transpose_rule)
split_p.def_lowering("jaxpr", _split_as_slices)


def split(operand, sizes, axis=0):
    """Consecutive pieces of ``operand`` along ``axis`` with the given ``sizes`` (which must
    add up to the axis' length)."""
    axis = canonicalize_axis(axis, aval_of(operand).ndim)
    return split_p.bind(operand, sizes=tuple(operator.index(n) for n in sizes), axis=axis)


# --- tile ----------------------------------------------------------------------------------

tile_p = Primitive("tile")


@tile_p.def_abstract_eval
def _tile_abstract_eval(x, *, reps):
    if len(reps) != x.ndim:
        raise TypeError(f"reps length must be equal to the ndim of x, got len(reps)={len(reps)} "
                        f"and x.ndim={x.ndim}.")
    return ShapedArray(tuple(r * n for r, n in zip(reps, x.shape)), x.dtype, x.weak_type)


tile_p.def_impl(lambda x, *, reps: np.tile(x, reps))


def _tile_transpose_rule(ct, x, *, reps):
    """Every copy's cotangent summed: the result's axes split into (copy, element) pairs,
    the copy axes reduced."""
    shape = aval_of(x).shape
    pairs = tuple(d for r, n in zip(reps, shape) for d in (r, n))
    return [reduce_sum(reshape(ct, pairs), tuple(range(0, 2 * len(shape), 2)))]


tile_p.def_batch(lambda axis_data, vals, dims, *, reps: (
    tile_p.bind(vals[0], reps=tuple_insert(reps, dims[0], 1)), dims[0]))
ad.deflinear(tile_p, _tile_transpose_rule)
kernel_index(tile_p, lambda ctx, index, read, shapes, *, reps: read(0, [
    ctx.rem(i, ctx.iconst(n)) if r != 1 else i for i, r, n in zip(index, reps, shapes[0])]))


def tile(operand, reps):
    """``operand`` repeated ``reps[i]`` times along each axis i (``len(reps)`` must be its
    rank)."""
    return tile_p.bind(operand, reps=tuple(operator.index(r) for r in reps))


# --- iota ----------------------------------------------------------------------------------

# iota has no operands, so vmap and jvp never see it: it needs no batching or JVP rule.
iota_p = Primitive("iota")

_IOTA_DTYPES = ("integer, floating, complexfloating", lambda d: not dtypes.is_bool(d))


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension, sharding=None):
    check_int_tuple("iota", "shape", shape)
    check_dtype("iota", ShapedArray((), dtype), _IOTA_DTYPES)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}")
    return ShapedArray(shape, dtype)


@iota_p.def_impl
def _iota_impl(*, dtype, shape, dimension, sharding=None):
    line = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(expanded), shape).copy()


def broadcasted_iota(dtype, shape, dimension, *, out_sharding=None):
    """An array of ``shape`` whose elements count 0, 1, ... along ``dimension``."""
    if out_sharding is not None:
        refuse_out_sharding("lax.broadcasted_iota", out_sharding)
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=canonical_shape(shape),
                       dimension=operator.index(dimension), sharding=None)


def iota(dtype, size):
    """``[0, 1, ..., size - 1]`` in ``dtype`` (``lax.iota``)."""
    return broadcasted_iota(dtype, (size,), 0)


def _kernel_iota(ctx, index, read, shapes, *, dtype, shape, dimension, sharding=None):
    return ctx.convert(index[dimension], dtype)


kernel_index(iota_p, _kernel_iota)


# --- filled arrays -------------------------------------------------------------------------

def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of ``shape`` filled with the scalar ``fill_value``.

    Without ``dtype`` the result has ``fill_value``'s dtype, weakly typed if it is a Python
    scalar (``full((2,), 1.0)`` is a weak f32 array), as in JAX.
    """
    shape = canonical_shape(shape)
    aval = get_aval(fill_value)
    if aval.shape:
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{aval.shape}.")
    if isinstance(dtype, dtypes.ExtendedDType):  # typed keys: of a key, or of a number
        if aval.dtype == dtype:
            return broadcast(fill_value, shape)
        # (each key's words are the number, as in JAX)
        return dtype.wrap(full(shape + dtype.element_shape, fill_value, dtype.physical_dtype))
    if dtype is None:
        dtype, weak_type = aval.dtype, aval.weak_type
    else:
        dtype, weak_type = dtypes.canonicalize(dtype), False
    return broadcast(elementwise.convert_element_type(fill_value, dtype, weak_type), shape)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """Like ``full``, with the shape and dtype (and weak type) of ``x`` by default.
    (``sharding``, as ``full``'s, is accepted for JAX's signature: an array is whole on one
    device.)"""
    aval = get_aval(x)
    shape = aval.shape if shape is None else canonical_shape(shape)
    weak_type = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dtype
    if isinstance(dtype, dtypes.ExtendedDType):
        return full(shape, fill_value, dtype)
    dtype = dtypes.canonicalize(dtype)
    return full(shape, elementwise.convert_element_type(fill_value, dtype, weak_type))


def zeros_like_shaped_array(aval):
    """Zeros of ``aval``'s shape, dtype and weak type."""
    return broadcast(elementwise.convert_element_type(0, aval.dtype, aval.weak_type), aval.shape)


def zeros_like_array(x):
    """Zeros with the shape, dtype and weak type of ``x``."""
    return zeros_like_shaped_array(get_aval(x))



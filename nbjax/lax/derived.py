"""lax functions that are compositions of other lax functions.

Each is written only in terms of existing primitives, so its JVP, transpose and batching come
from theirs: nothing here needs a rule of its own.
"""

import enum
import operator
import typing
from typing import NamedTuple

import numpy as np

from ..core import Array, Tracer, dtypes, get_aval, pytree
from .loops import while_loop
from .convolution import ConvDimensionNumbers
from .dot import Precision, dot_general
from .elementwise import (add, bitwise_and, bitwise_not, convert_element_type, ge, integer_pow, lt,
                          mul, neg, rem, select, sub)
from .gather_scatter import GatherDimensionNumbers, gather, scatter_add
from .reductions import cumsum, reduce_max
from .shapes import (broadcast_in_dim, canonicalize_axis, expand_dims, reduce_sum, squeeze,
                     transpose)
from .sorting import top_k
from .standard import as_array
from .structural import broadcasted_iota, concatenate, full, slice_in_dim

__all__ = ["reciprocal", "stack", "unstack", "batch_matmul",
           "broadcast_shapes", "broadcast_like", "dtype", "empty", "index_take",
           "approx_max_k", "approx_min_k", "scatter_apply", "optimization_barrier",
           "create_token", "after_all", "stage", "dce_sink", "shape_as_value",
           "platform_dependent", "composite", "ragged_dot", "ragged_dot_general",
           "RaggedDotDimensionNumbers", "AccuracyMode", "Tolerance", "DotAlgorithm",
           "DotAlgorithmPreset", "RandomAlgorithm", "DotDimensionNumbers", "PrecisionLike",
           "ConvGeneralDilatedDimensionNumbers"]


# --- element-wise ---------------------------------------------------------------------------

def reciprocal(x):
    """Element-wise ``1 / x``, as JAX writes it: ``integer_pow(x, -1)`` (so integers are a
    TypeError)."""
    return integer_pow(x, -1)


# --- splitting, stacking, tiling -------------------------------------------------------------

def stack(operands, axis=0):
    """Arrays of one shape stacked along a new ``axis``."""
    operands = list(operands)
    if not operands:
        raise ValueError("Need at least one array to stack.")
    shapes = [get_aval(x).shape for x in operands]
    if len(set(shapes)) != 1:
        raise ValueError("All input arrays must have the same shape. Got "
                         f"{', '.join(map(str, shapes))}.")
    axis = canonicalize_axis(axis, len(shapes[0]) + 1)
    return concatenate([expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple of arrays of one rank less."""
    shape = get_aval(x).shape
    axis = canonicalize_axis(axis, len(shape))
    return tuple(squeeze(slice_in_dim(x, i, i + 1, 1, axis), (axis,)) for i in range(shape[axis]))


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over leading batch axes: ``(..., m, k) @ (..., k, n)``, both of one rank
    of at least 2."""
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    if len(lhs_shape) != len(rhs_shape) or len(lhs_shape) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D and have the same "
                         f"number of dimensions, got {len(lhs_shape)} and {len(rhs_shape)}.")
    batch = tuple(range(len(lhs_shape) - 2))
    nd = len(lhs_shape)
    return dot_general(lhs, rhs, (((nd - 1,), (nd - 2,)), (batch, batch)), precision=precision)


# --- shapes and dtypes -----------------------------------------------------------------------

def broadcast_shapes(*shapes):
    """The NumPy broadcast of ``shapes`` (ValueError naming them when they do not
    broadcast)."""
    if not shapes:
        raise ValueError("broadcast_shapes requires at least one shape")
    shapes = [tuple(operator.index(d) for d in s) for s in shapes]
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    out = []
    for sizes in zip(*padded):
        non_one = {d for d in sizes if d != 1}
        if len(non_one) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}")
        out.append(non_one.pop() if non_one else 1)
    return tuple(out)


def broadcast_like(arr, like_arr):
    """``arr`` broadcast (NumPy-style) to the shape of ``like_arr``."""
    shape, target = get_aval(arr).shape, get_aval(like_arr).shape
    broadcast_shapes(shape, target)  # the same ValueError as JAX for shapes that do not fit
    dims = tuple(range(len(target) - len(shape), len(target)))
    return broadcast_in_dim(arr, target, dims)


def dtype(x):
    """The (canonical) dtype of a value, an array or a type, as ``jax.lax.dtype``."""
    if isinstance(x, (Array, Tracer)):
        return get_aval(x).dtype
    if isinstance(x, (bool, int, float, complex)):
        return dtypes.python_scalar_dtype(x)[0]
    if isinstance(x, type) and x in (bool, int, float, complex):
        return dtypes.python_scalar_dtype(x(0))[0]
    return dtypes.canonicalize(np.result_type(x))


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` whose values are unspecified; here they are zeros, as JAX's."""
    return full(shape, 0, dtype)


def shape_as_value(shape):
    """A shape as an int32 array (shapes here are always concrete)."""
    return np.asarray([operator.index(d) for d in shape], np.int32)


# --- selection -------------------------------------------------------------------------------

def index_take(src, idxs, axes):
    """``src[idxs[0], idxs[1], ...]`` along ``axes``, indices taken modulo the axis sizes (as
    JAX's gather with wrapped indices)."""
    axes = tuple(operator.index(a) for a in axes)
    shape = get_aval(src).shape
    columns = [expand_dims(i, (1,)) for i in idxs]
    indices = concatenate(columns, 1)
    sizes = np.array([shape[a] for a in axes], get_aval(indices).dtype)
    sizes = broadcast_in_dim(sizes, get_aval(indices).shape, (1,))
    indices = rem(add(rem(indices, sizes), sizes), sizes)  # a positive modulo for any sign
    slice_sizes = tuple(1 if d in axes else n for d, n in enumerate(shape))
    offset_dims = tuple(range(1, len(shape) - len(axes) + 1))
    dnums = GatherDimensionNumbers(offset_dims=offset_dims, collapsed_slice_dims=axes,
                                   start_index_map=axes)
    return gather(src, indices, dnums, slice_sizes)


def _approx_k(operand, k, reduction_dimension, largest):
    """The exact top (or bottom) ``k``: JAX's CPU implementation is exact as well."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(reduction_dimension, len(shape))
    if not 0 <= k <= shape[axis]:
        raise ValueError(f"k must be in [0, {shape[axis]}], got {k}")
    moved = tuple(i for i in range(len(shape)) if i != axis) + (axis,)
    x = transpose(operand, moved) if axis != len(shape) - 1 else operand
    if not largest:
        x = _order_reversed(x)
    values, indices = top_k(x, k)
    if not largest:
        values = _order_reversed(values)
    back = tuple(np.argsort(moved))
    if axis != len(shape) - 1:
        values, indices = transpose(values, back), transpose(indices, back)
    return values, indices


def _order_reversed(x):
    """A value whose order is the reverse of x's (negation; bitwise NOT for unsigned)."""
    aval = get_aval(x)
    return bitwise_not(x) if dtypes.is_unsigned_int(aval.dtype) else neg(x)


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The ``k`` largest values along ``reduction_dimension`` and their indices (exact: a
    recall of 1 meets every ``recall_target``)."""
    return _approx_k(operand, operator.index(k), reduction_dimension, True)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The ``k`` smallest values along ``reduction_dimension`` and their indices (exact)."""
    return _approx_k(operand, operator.index(k), reduction_dimension, False)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``func`` applied to the elements of ``operand`` that the scatter addresses, once per
    time each is addressed (as XLA's scatter applies its update computation).

    The number of hits per element is a scatter-add of ones; ``func`` (element-wise) is then
    applied where the count is at least 1, 2, ... up to the largest count.
    """
    aval = get_aval(operand)
    ones = full(update_shape, 1, np.int32)
    counts = scatter_add(full(aval.shape, 0, np.int32), scatter_indices, ones,
                         dimension_numbers, indices_are_sorted=indices_are_sorted,
                         unique_indices=unique_indices, mode=mode)
    once = select(ge(counts, np.int32(1)), func(operand), operand)
    if unique_indices:
        return once

    def again(state):
        times, x = state
        return add(times, np.int32(1)), select(ge(counts, times), func(x), x)
    most = reduce_max(counts, tuple(range(len(aval.shape))))
    return while_loop(lambda state: ge(most, state[0]), again, (np.int32(2), once))[1]


# --- tokens, barriers and staging: identities here --------------------------------------------

class Token:
    """A value that orders side effects in XLA. nbjax runs effects in program order, so a
    token carries nothing; it exists for code that threads one through."""

    def __repr__(self):
        return "Token()"


def create_token(_=None):
    """A fresh token."""
    return Token()


def after_all(*operands):
    """A token that comes after the given tokens."""
    for x in operands:
        if not isinstance(x, Token):
            raise TypeError(f"after_all operands must be tokens, got {type(x).__name__}")
    return Token()


def optimization_barrier(operand, /):
    """``operand`` (a pytree) unchanged, its leaves as arrays (a Python scalar weakly typed,
    as JAX's barrier returns it): a barrier only stops XLA moving code across it, and
    nbjax's compiler does not move code across a function's outputs."""
    return pytree.tree_map(as_array, operand)


def stage(x, /):
    """``x`` as an array (JAX lifts it into the current trace; nbjax binds lazily)."""
    return x if isinstance(x, (Array, Tracer)) else convert_element_type(x, dtype(x))


def dce_sink(val, *, prevent_mlir_dce=False):
    """Keeps ``val`` alive through dead-code elimination in JAX; returns None, as JAX's."""
    return None


def platform_dependent(*args, default=None, **per_platform):
    """The branch for this platform ("cpu") applied to ``args``, else ``default``."""
    branch = per_platform.get("cpu", default)
    if branch is None:
        raise NotImplementedError(
            f"platform_dependent: no branch for platform cpu among {sorted(per_platform)} and "
            "no default.")
    return branch(*args)


def composite(decomposition, name, version=0):
    """``decomposition`` itself: a composite is only a name XLA may match on; its meaning is
    the decomposition."""
    def fn(*args, **kwargs):
        return decomposition(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = decomposition.__doc__
    fn.composite_name, fn.composite_version = name, version
    return fn


# --- ragged dot ------------------------------------------------------------------------------

class RaggedDotDimensionNumbers(NamedTuple):
    """Which axes of a ragged dot are contracted/batched, which lhs axis is ragged and which
    rhs axis indexes the groups."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple


def _group_mask(group_sizes, rows, dtype):
    """``mask[g, r]`` = 1 where row r belongs to group g (groups are consecutive runs of rows
    of the given sizes; rows after the last group belong to none)."""
    ends = cumsum(group_sizes, 0)
    starts = sub(ends, group_sizes)
    num_groups = get_aval(group_sizes).shape[0]
    row = broadcasted_iota(get_aval(group_sizes).dtype, (num_groups, rows), 1)
    inside = bitwise_and(ge(row, broadcast_in_dim(starts, (num_groups, rows), (0,))),
                         lt(row, broadcast_in_dim(ends, (num_groups, rows), (0,))))
    return convert_element_type(inside, dtype)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """``out[r] = lhs[r] @ rhs[g(r)]`` where rows come in consecutive groups of
    ``group_sizes``: lhs ``(m, k)``, rhs ``(g, k, n)``, out ``(m, n)`` (zeros for rows past
    the last group). Every group's product is computed and masked, so the rules are the dot's.
    """
    if group_offset is not None:
        raise NotImplementedError("ragged_dot: group_offset is not supported")
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    if len(lhs_shape) != 2 or len(rhs_shape) != 3:
        raise TypeError(f"ragged_dot expects lhs of rank 2 and rhs of rank 3, got shapes "
                        f"{lhs_shape} and {rhs_shape}")
    if get_aval(group_sizes).shape != (rhs_shape[0],):
        raise TypeError(f"ragged_dot: group_sizes must have shape ({rhs_shape[0]},), got "
                        f"{get_aval(group_sizes).shape}")
    products = dot_general(lhs, rhs, (((1,), (1,)), ((), ())), precision=precision,
                           preferred_element_type=preferred_element_type)  # (m, g, n)
    dt = get_aval(products).dtype
    mask = _group_mask(group_sizes, lhs_shape[0], dt)  # (g, m)
    mask = broadcast_in_dim(transpose(mask, (1, 0)), get_aval(products).shape, (0, 1))
    return reduce_sum(mul(products, mask), (1,))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """The general ragged dot, for the layout of ``ragged_dot`` (lhs ``(m, k)`` ragged in m,
    rhs ``(g, k, n)`` grouped in axis 0); other layouts raise NotImplementedError."""
    dn = ragged_dot_dimension_numbers
    if (tuple(map(tuple, dn.dot_dimension_numbers[0])) == ((1,), (1,))
            and not any(dn.dot_dimension_numbers[1][0]) and not any(dn.dot_dimension_numbers[1][1])
            and tuple(dn.lhs_ragged_dimensions) == (0,)
            and tuple(dn.rhs_group_dimensions) == (0,)):
        return ragged_dot(lhs, rhs, group_sizes, precision, preferred_element_type,
                          group_offset)
    raise NotImplementedError(f"ragged_dot_general supports only ragged_dot's layout, got {dn}")


# --- types that describe options --------------------------------------------------------------

class AccuracyMode(enum.Enum):
    """How accurately a unary function is computed (nbjax computes one way)."""
    HIGHEST = 1
    DEFAULT = 2


class Tolerance(NamedTuple):
    """Error tolerances asked of a unary function's implementation."""
    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0


class DotAlgorithm(NamedTuple):
    """The types a dot product is computed in (nbjax: its accumulation dtype, always)."""
    lhs_precision_type: object
    rhs_precision_type: object
    accumulation_type: object
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """Known dot algorithms, named by input, input and accumulation types."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self):
        return f"DotAlgorithmPreset.{self.name}"

    __str__ = __repr__


class RandomAlgorithm(enum.IntEnum):
    """The bit generator of ``rng_bit_generator``."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


# Type aliases, as JAX's (for annotations).
DotDimensionNumbers = tuple[tuple[typing.Sequence[int], typing.Sequence[int]],
                            tuple[typing.Sequence[int], typing.Sequence[int]]]
PrecisionLike = typing.Union[None, str, Precision, tuple[str, str],
                             tuple[Precision, Precision], DotAlgorithm, DotAlgorithmPreset]
ConvGeneralDilatedDimensionNumbers = typing.Union[tuple[str, str, str], ConvDimensionNumbers,
                                                  None]

"""Collectives derived from ``parallel``'s primitives: psum_scatter, all_to_all, pswapaxes,
pshuffle, pbroadcast and axis_size; stand-ins for what nbjax's shard_map lacks (varying
types, point-to-point sends, sharding constraints).

Each is a composition of psum, all_gather, ppermute, axis_index and slicing, so it works under
``vmap(..., axis_name=)`` and ``pmap`` alike, and its JVP, transpose and batching are theirs:
``psum_scatter``'s transpose, for instance, comes out as JAX's (an all_gather of the
cotangents), through psum's and dynamic_slice's.
"""

import operator

import numpy as np

from ..core import get_aval, pytree
from ..core.errors import unavailable
from .elementwise import eq, mul, select
from .parallel import all_gather, axis_index, axis_names, bound_axis_size, ppermute, psum
from .shapes import canonicalize_axis, reshape, transpose
from .slicing import dynamic_index_in_dim, dynamic_slice_in_dim
from .structural import full_like

__all__ = ["psum_scatter", "all_to_all", "pswapaxes", "pshuffle", "pbroadcast", "axis_size",
           "pcast", "psend", "precv", "with_sharding_constraint", "ragged_all_to_all"]


def _no_groups(name, axis_index_groups):
    if axis_index_groups is not None:
        raise NotImplementedError(f"{name}: axis_index_groups is not supported")


def _single_axis(name, axis_name):
    axes = axis_names(axis_name)
    if len(axes) != 1:
        raise NotImplementedError(f"{name} over several axis names is not supported")
    return axes[0]


def axis_size(axis_name):
    """The size of the named mapped axis (the product of the sizes, for several names)."""
    size = 1
    for name in axis_names(axis_name):
        size *= bound_axis_size(name)
    return size


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """``psum`` whose result member i keeps only block i of ``scatter_dimension``: row i (its
    size must be the axis size), or with ``tiled`` the i-th of as many equal blocks."""
    _no_groups("psum_scatter", axis_index_groups)
    name = _single_axis("psum_scatter", axis_name)
    size = bound_axis_size(name)

    def scatter(leaf):
        shape = get_aval(leaf).shape
        dim = canonicalize_axis(scatter_dimension, len(shape))
        total, index = psum(leaf, name), axis_index(name)
        if not tiled:
            if shape[dim] != size:
                raise ValueError(f"psum_scatter: the scatter dimension {dim} of shape {shape} "
                                 f"must equal the axis size {size} (or use tiled=True)")
            return dynamic_index_in_dim(total, index, dim, keepdims=False)
        if shape[dim] % size:
            raise ValueError(f"psum_scatter: the scatter dimension {dim} of shape {shape} "
                             f"must be divisible by the axis size {size}")
        block = shape[dim] // size
        return dynamic_slice_in_dim(total, mul(index, np.int32(block)), block, dim)
    return pytree.tree_map(scatter, x)


def _move_first_to(x, position):
    ndim = get_aval(x).ndim
    order = list(range(1, ndim))
    order.insert(position, 0)
    return transpose(x, tuple(order))


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Member i sends block j of its ``split_axis`` to member j, and stacks (or with
    ``tiled`` concatenates) the blocks it receives, in member order, along ``concat_axis``.

    Written as: gather every member's ``x``, keep block i of each (i = this member), and move
    the member axis to ``concat_axis``.
    """
    _no_groups("all_to_all", axis_index_groups)
    name = _single_axis("all_to_all", axis_name)
    size = bound_axis_size(name)

    def exchange(leaf):
        shape = get_aval(leaf).shape
        split = canonicalize_axis(split_axis, len(shape))
        index = axis_index(name)
        gathered = all_gather(leaf, name)  # (size, *shape)
        if not tiled:
            if shape[split] != size:
                raise ValueError(f"all_to_all: the split axis {split} of shape {shape} must "
                                 f"equal the axis size {size} (or use tiled=True)")
            mine = dynamic_index_in_dim(gathered, index, split + 1, keepdims=False)
            return _move_first_to(mine, canonicalize_axis(concat_axis, len(shape)))
        if shape[split] % size:
            raise ValueError(f"all_to_all: the split axis {split} of shape {shape} must be "
                             f"divisible by the axis size {size}")
        block = shape[split] // size
        mine = dynamic_slice_in_dim(gathered, mul(index, np.int32(block)), block, split + 1)
        concat = canonicalize_axis(concat_axis, len(shape))
        moved = _move_first_to(mine, concat)
        out_shape = list(get_aval(mine).shape[1:])
        out_shape[concat] *= size
        return reshape(moved, tuple(out_shape))
    return pytree.tree_map(exchange, x)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the mapped axis with the unmapped ``axis`` (an all_to_all splitting and stacking
    at ``axis``)."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def pshuffle(x, axis_name, perm):
    """Member i receives the value of member ``perm[i]`` (a ppermute)."""
    perm = [operator.index(p) for p in perm]
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def pbroadcast(x, axis_name, source):
    """Every member receives member ``source``'s value: a psum of that value and zeros."""
    name = _single_axis("pbroadcast", axis_name)
    source = operator.index(source)
    if not 0 <= source < bound_axis_size(name):
        raise ValueError(f"pbroadcast: source {source} is outside the axis {name!r} of size "
                         f"{bound_axis_size(name)}")

    def broadcast(leaf):
        mine = eq(axis_index(name), np.int32(source))
        return psum(select(mine, leaf, full_like(leaf, 0)), name)
    return pytree.tree_map(broadcast, x)


_NO_SHARD_MAP = ("nbjax has no per-axis varying/unreduced types, which {} works on (its "
                 "shard_map finds where a value varies by batching it with vmap)")

pcast = unavailable("pcast", "jax.lax.pcast changes a value's varying/unreduced type "
                        "inside shard_map: " + _NO_SHARD_MAP.format("it"))
psend = unavailable("psend", "jax.lax.psend is a point-to-point send between devices of a "
                        "shard_map (with precv): " + _NO_SHARD_MAP.format("it"))
precv = unavailable("precv", "jax.lax.precv is a point-to-point receive between devices "
                        "of a shard_map (with psend): " + _NO_SHARD_MAP.format("it"))
ragged_all_to_all = unavailable(
    "ragged_all_to_all", "jax.lax.ragged_all_to_all writes into a preallocated output buffer "
    "of each device of a shard_map: " + _NO_SHARD_MAP.format("it"))
with_sharding_constraint = unavailable(
    "with_sharding_constraint", "jax.lax.with_sharding_constraint takes jax.sharding objects "
    "(meshes, NamedSharding); nbjax has no sharding: an array lives whole on one device")

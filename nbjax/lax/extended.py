"""The structural primitives on arrays of an extended dtype (typed PRNG keys).

An element of such an array is held as the trailing axes of its physical data (a threefry
key: two uint32 words), so a primitive that only moves, selects or replicates elements
applies to the data with its params extended over those axes, kept whole: a reshape to
``new_sizes + element_shape``, a slice of all of each element, a gather whose windows take
every word. ``bind`` has already checked the logical operand types (``core.extended``);
these rules compute on the data, ``rule(in_avals, out_avals, *physical, **params)``.
Equality compares every word of each element. Every other primitive refuses such operands
(arithmetic on keys means nothing), as JAX's do.
"""

import numpy as np

from ..core import Array
from . import elementwise, gather_scatter, reductions, shapes, slicing, structural


def _element_shape(aval):
    return aval.dtype.element_shape


def _trailing(aval, ndim):
    """The axes of an element's words in physical data whose logical rank is ``ndim``."""
    return tuple(range(ndim, ndim + len(_element_shape(aval))))


def _reshape(in_avals, out_avals, x, *, new_sizes, dimensions, sharding):
    (aval,) = in_avals
    if dimensions is not None:
        dimensions = dimensions + _trailing(aval, aval.ndim)
    return shapes.reshape_p.bind(x, new_sizes=new_sizes + _element_shape(aval),
                                 dimensions=dimensions, sharding=sharding)


def _broadcast_in_dim(in_avals, out_avals, x, *, shape, broadcast_dimensions, sharding):
    (aval,) = in_avals
    return shapes.broadcast_in_dim_p.bind(
        x, shape=shape + _element_shape(aval),
        broadcast_dimensions=broadcast_dimensions + _trailing(aval, len(shape)),
        sharding=sharding)


def _transpose(in_avals, out_avals, x, *, permutation):
    (aval,) = in_avals
    return shapes.transpose_p.bind(x, permutation=permutation + _trailing(aval, aval.ndim))


def _slice(in_avals, out_avals, x, *, start_indices, limit_indices, strides):
    (aval,) = in_avals
    words = _element_shape(aval)
    return structural.slice_p.bind(
        x, start_indices=start_indices + (0,) * len(words),
        limit_indices=limit_indices + words,
        strides=None if strides is None else strides + (1,) * len(words))


def _tile(in_avals, out_avals, x, *, reps):
    return structural.tile_p.bind(x, reps=reps + (1,) * len(_element_shape(in_avals[0])))


def _unchanged(prim):
    """The rule of a primitive whose params name only leading axes (``squeeze``, ``rev``,
    ``concatenate``, ``split``): it applies to the data as it is."""
    return lambda in_avals, out_avals, *xs, **params: prim.bind(*xs, **params)


def _select_n(in_avals, out_avals, which, *cases):
    """A ``which`` of the cases' shape picks each element whole: it is broadcast over the
    words (a scalar one picks whole arrays as it is)."""
    if in_avals[0].ndim:
        shape = shapes.aval_of(cases[0]).shape
        which = shapes.broadcast_in_dim(which, shape, range(in_avals[0].ndim))
    return elementwise.select_n_p.bind(which, *cases)


def _zero_indices(aval, start_indices):
    """A start of 0 for each word axis, of the start indices' dtype."""
    dtype = shapes.aval_of(start_indices[0]).dtype if start_indices else np.dtype(np.int32)
    return (Array(np.zeros((), dtype)),) * len(_element_shape(aval))


def _dynamic_slice(in_avals, out_avals, x, *start_indices, slice_sizes):
    aval = in_avals[0]
    return slicing.dynamic_slice_p.bind(x, *start_indices, *_zero_indices(aval, start_indices),
                                        slice_sizes=slice_sizes + _element_shape(aval))


def _dynamic_update_slice(in_avals, out_avals, x, update, *start_indices):
    return slicing.dynamic_update_slice_p.bind(
        x, update, *start_indices, *_zero_indices(in_avals[0], start_indices))


def _gather(in_avals, out_avals, operand, indices, *, dimension_numbers, slice_sizes,
            **params):
    """Each window takes whole elements: the words are offset axes, last in the result."""
    aval = in_avals[0]
    dn = dimension_numbers._replace(
        offset_dims=dimension_numbers.offset_dims + _trailing(aval, out_avals.ndim))
    return gather_scatter.gather_p.bind(operand, indices, dimension_numbers=dn,
                                        slice_sizes=slice_sizes + _element_shape(aval),
                                        **params)


def _scatter(in_avals, out_avals, operand, indices, updates, *, dimension_numbers, **params):
    """Each update window writes whole elements: the words are window axes, last in the
    updates."""
    aval, updates_aval = in_avals[0], in_avals[2]
    dn = dimension_numbers._replace(
        update_window_dims=dimension_numbers.update_window_dims
        + _trailing(aval, updates_aval.ndim))
    return gather_scatter.scatter_p.bind(operand, indices, updates, dimension_numbers=dn,
                                         **params)


def _comparison(compare, reduce):
    """``eq`` (``ne``): the words compared, then all equal (any different) per element. A
    rank-0 operand, which lax broadcasts, is broadcast over the result's elements first."""
    def rule(in_avals, out_avals, x, y):
        shape = out_avals.shape + _element_shape(in_avals[0])
        x, y = (shapes.broadcast_in_dim(v, shape, range(len(shape) - shapes.aval_of(v).ndim,
                                                        len(shape)))
                for v in (x, y))
        return reduce(compare(x, y), _trailing(in_avals[0], out_avals.ndim))
    return rule


_RULES = {
    shapes.reshape_p: _reshape,
    shapes.broadcast_in_dim_p: _broadcast_in_dim,
    shapes.transpose_p: _transpose,
    shapes.squeeze_p: _unchanged(shapes.squeeze_p),
    structural.rev_p: _unchanged(structural.rev_p),
    structural.concatenate_p: _unchanged(structural.concatenate_p),
    structural.split_p: _unchanged(structural.split_p),
    structural.slice_p: _slice,
    structural.tile_p: _tile,
    elementwise.select_n_p: _select_n,
    slicing.dynamic_slice_p: _dynamic_slice,
    slicing.dynamic_update_slice_p: _dynamic_update_slice,
    gather_scatter.gather_p: _gather,
    gather_scatter.scatter_p: _scatter,
    elementwise.eq_p: _comparison(elementwise.eq, reductions.reduce_and),
    elementwise.ne_p: _comparison(elementwise.ne, reductions.reduce_or),
}
for _prim, _rule in _RULES.items():
    _prim.def_rule("extended", _rule)

"""``nbjax.scipy.ndimage``: ``map_coordinates``, as ``jax.scipy.ndimage`` (orders 0 and 1).

Interpolation in n dimensions is a product of one-dimensional ones. Along each axis a
coordinate ``c`` picks grid points with weights: order 0 the nearest point, with weight 1;
order 1 the points ``floor(c)`` and ``floor(c) + 1``, with weights ``1 - frac(c)`` and
``frac(c)``. The interpolated value is the sum, over every choice of one point per axis
(the ``2^n`` corners of a cell for order 1), of the input at that point times the product of
its weights. Points outside the grid are brought back inside by ``mode``, or (``"constant"``)
replaced by ``cval``.

The modes are those SciPy documents: JAX's ``"constant"`` and ``"wrap"`` are SciPy's
``"grid-constant"`` and ``"grid-wrap"`` (SciPy kept older, inconsistent behaviours under the
plain names).
"""

import functools
import itertools
import operator

import numpy as np

from .. import lax
from .. import numpy as jnp

__all__ = ["map_coordinates"]


def _mirror(index, size):
    """``... d c b | a b c d | c b a ...``: reflected about the first and last samples."""
    if size == 1:
        return jnp.zeros_like(index)
    period = 2 * (size - 1)
    folded = index % period
    return jnp.where(folded < size, folded, period - folded)


def _reflect(index, size):
    """``... c b a | a b c | c b a ...``: reflected about the outer edges of the first and
    last samples, which repeat."""
    period = 2 * size
    folded = index % period
    return jnp.where(folded < size, folded, period - 1 - folded)


# mode -> the in-range index standing for a grid index (``"constant"`` clips only to read
# something: points outside are replaced by cval).
_INDEX_FIXERS = {
    "constant": lambda index, size: jnp.clip(index, 0, size - 1),
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _nearest_point(coordinate):
    """Order 0: ``[(index, weight)]`` of the nearest grid point (halves round away from 0)."""
    if not jnp.issubdtype(coordinate.dtype, np.inexact):
        return [(coordinate.astype(np.int32), 1)]
    return [(lax.round(coordinate).astype(np.int32), 1)]


def _neighbours(coordinate):
    """Order 1: ``[(index, weight)]`` of the grid points on either side."""
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


_POINTS = {0: _nearest_point, 1: _neighbours}


def _corner_value(input, corner, mode, cval):
    """The input at one choice of grid point per axis, times the product of the weights."""
    indices, weights = [], []
    inside = True
    for (index, weight), size in zip(corner, input.shape):
        indices.append(_INDEX_FIXERS[mode](index, size))
        weights.append(weight)
        if mode == "constant":
            inside = inside & (index >= 0) & (index < size)
    value = input[tuple(indices)]
    if mode == "constant":
        value = jnp.where(inside, value, cval)
    return functools.reduce(operator.mul, weights, 1) * value


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """``input`` interpolated at the points whose i-th coordinates are ``coordinates[i]``:
    nearest-neighbour (``order=0``) or linear (``order=1``) interpolation, points outside
    handled by ``mode`` (``"constant"``, ``"nearest"``, ``"wrap"``, ``"mirror"``,
    ``"reflect"``). Integer inputs give results rounded to integers."""
    input = jnp.asarray(input)
    coordinates = [jnp.asarray(c) for c in coordinates]
    cval = jnp.asarray(cval, input.dtype)
    if len(coordinates) != input.ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but "
                         f"{len(coordinates)} != {input.ndim}")
    if mode not in _INDEX_FIXERS:
        raise NotImplementedError(
            f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
            f"Currently supported modes are {set(_INDEX_FIXERS)}.")
    if order not in _POINTS:
        raise NotImplementedError(
            "jax.scipy.ndimage.map_coordinates currently requires order<=1")
    points_per_axis = [_POINTS[order](c) for c in coordinates]
    result = sum(_corner_value(input, corner, mode, cval)
                 for corner in itertools.product(*points_per_axis))
    if jnp.issubdtype(input.dtype, np.integer) and jnp.issubdtype(result.dtype, np.inexact):
        result = lax.round(result)
    return result.astype(input.dtype)

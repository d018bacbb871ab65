"""``nbjax.scipy.interpolate``: interpolation on a rectangular grid, as
``jax.scipy.interpolate``.

A query point is first located in its grid cell, one axis at a time: a binary search
(``searchsorted``) gives the index ``i`` of the cell's lower edge and the point's fractional
position ``t`` in ``[0, 1]`` between ``grid[i]`` and ``grid[i + 1]``. *Linear* interpolation
then mixes the ``2**n`` corners of the cell, each weighted by the product over the axes of
``t`` (upper edge) or ``1 - t`` (lower edge); *nearest* takes the corner whose edges are the
closer ones. Both are built from ``jnp`` operations, so an interpolant differentiates with
respect to the query points and the grid values, and works under ``jit`` and ``vmap``.
"""

import itertools

import numpy as np

from .. import numpy as jnp
from ..core.pytree import register_pytree_node_class
from ..numpy.util import check_arraylike, promote_dtypes_inexact

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method {method!r} is not defined")


def _check_grid(grid, values_shape):
    """Each grid axis must be a vector as long as the matching axis of the values (shapes are
    static, so this costs nothing; that the coordinates increase is up to the caller, as in
    JAX: checking it would need the values)."""
    for axis, (coordinates, size) in enumerate(zip(grid, values_shape)):
        if coordinates.ndim != 1:
            raise ValueError(f"The points in dimension {axis} must be 1-dimensional")
        if coordinates.shape[0] != size:
            raise ValueError(f"There are {coordinates.shape[0]} points and {size} values in "
                             f"dimension {axis}")


@register_pytree_node_class
class RegularGridInterpolator:
    """Interpolate ``values`` given on the grid ``points`` (one increasing coordinate vector
    per leading axis of ``values``; further axes of ``values`` are carried along), as
    :class:`scipy.interpolate.RegularGridInterpolator`.

    ``method`` is ``"linear"`` or ``"nearest"``. Points outside the grid get ``fill_value``,
    or, with ``fill_value=None``, are extrapolated from the nearest cell. ``bounds_error=True``
    raises NotImplementedError, as in JAX: compiled code cannot raise on values.
    """

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        _check_method(method)
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT")
        check_arraylike("RegularGridInterpolator", values)
        values, = promote_dtypes_inexact(jnp.asarray(values))
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{values.ndim} dimensions")
        check_arraylike("RegularGridInterpolator", *points)
        grid = tuple(jnp.asarray(p) for p in points)
        _check_grid(grid, values.shape)
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = jnp.asarray(fill_value)
            if not jnp.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError("fill_value must be either 'None' or of a type compatible "
                                 "with values")
        self.method, self.bounds_error = method, bounds_error
        self.grid, self.values, self.fill_value = grid, values, fill_value

    def tree_flatten(self):
        return (self.grid, self.values, self.fill_value), (self.method, self.bounds_error)

    @classmethod
    def tree_unflatten(cls, aux, children):
        interpolator = object.__new__(cls)
        interpolator.method, interpolator.bounds_error = aux
        interpolator.grid, interpolator.values, interpolator.fill_value = children
        return interpolator

    def __call__(self, xi, method=None):
        """The interpolant at the points ``xi``: an array ``(..., ndim)`` of coordinates (a
        vector when ``ndim`` is 1), or a tuple of ``ndim`` coordinate arrays that broadcast
        together. The result has ``xi``'s batch shape followed by the carried axes."""
        method = self.method if method is None else method
        _check_method(method)
        xi = self._query_points(xi)
        cells, offsets, outside = self._locate(xi.reshape(-1, xi.shape[-1]))
        if method == "linear":
            result = self._linear(cells, offsets)
        else:
            result = self._nearest(cells, offsets)
        if self.fill_value is not None:
            result = jnp.where(self._per_point(outside, result.ndim), self.fill_value, result)
        return result.reshape(xi.shape[:-1] + self.values.shape[len(self.grid):])

    def _query_points(self, xi):
        """``xi`` as one array of shape ``(..., ndim)``."""
        ndim = len(self.grid)
        if isinstance(xi, tuple) and len(xi) == 1:
            xi = xi[0]
        if isinstance(xi, tuple):
            xi = jnp.asarray(jnp.stack(jnp.broadcast_arrays(*xi), axis=-1), dtype=float)
        else:
            check_arraylike("RegularGridInterpolator", xi)
            xi = jnp.asarray(xi)
            if xi.ndim == 1:
                xi = xi.reshape(-1, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, "
                             f"but this RegularGridInterpolator has dimension {ndim}")
        return xi

    def _locate(self, points):
        """For points ``(m, ndim)``: per axis, the index of each point's cell (clipped to the
        first or last cell outside the grid) and its position ``t`` within the cell; and
        whether each point lies outside the grid."""
        cells, offsets = [], []
        outside = jnp.zeros(points.shape[:1], bool)
        for x, coordinates in zip(points.T, self.grid):
            lower = jnp.clip(jnp.searchsorted(coordinates, x) - 1, 0, coordinates.shape[0] - 2)
            cells.append(lower)
            offsets.append((x - coordinates[lower]) /
                           (coordinates[lower + 1] - coordinates[lower]))
            outside = outside | (x < coordinates[0]) | (x > coordinates[-1])
        return cells, offsets, outside

    def _linear(self, cells, offsets):
        """The sum over the cell's corners of corner value times corner weight."""
        total = 0
        for corner in itertools.product((0, 1), repeat=len(cells)):
            weight = 1.0
            for upper, t in zip(corner, offsets):
                weight = weight * (t if upper else 1 - t)
            corner_values = self.values[tuple(i + upper for i, upper in zip(cells, corner))]
            total = total + self._per_point(weight, corner_values.ndim) * corner_values
        return total

    def _nearest(self, cells, offsets):
        """The value at the nearest corner (a point half-way between two grid lines takes
        the lower one, as in SciPy)."""
        return self.values[tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(cells, offsets))]

    @staticmethod
    def _per_point(x, ndim):
        """A per-point vector ``x`` shaped to broadcast against results of rank ``ndim``
        (points first, then the carried axes of the values)."""
        return x.reshape(x.shape + (1,) * (ndim - 1))

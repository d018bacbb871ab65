"""Index tricks: ``mgrid``, ``ogrid``, ``r_`` and ``c_`` build arrays from slice notation;
``s_`` and ``index_exp`` are NumPy's (they build index tuples, no arrays).

These are objects to index, not functions to call, so that ``mgrid[0:2, 0:3]`` reads like
the grid it builds. A slice ``start:stop:step`` stands for ``arange(start, stop, step)``;
an imaginary step (``0:1:5j``) counts points instead, for ``linspace(start, stop, 5)``,
which includes ``stop``. As with ``arange``, the bounds must be concrete (not traced).
"""

import numpy as np

from ..config import numpy_dtype_promotion
from .creation import arange, array, concrete_argument, linspace, meshgrid
from .manipulation import concatenate, expand_dims, stack, transpose
from .util import promote_dtypes

__all__ = ["mgrid", "ogrid", "r_", "c_", "s_", "index_exp"]

s_, index_exp = np.s_, np.index_exp


def _slice_to_range(s, name):
    """The 1-D array that the slice ``s`` stands for in ``jnp.<name>``. As in JAX, a start
    that is missing or zero becomes the integer 0, and a step that is missing or zero
    becomes 1 (so ``0j`` is a step of 1, not a count of none)."""
    start, stop, step = (concrete_argument(name, f"slice {part}", getattr(s, part))
                         for part in ("start", "stop", "step"))
    start, step = start or 0, step or 1
    if np.iscomplex(step):
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


class _Grid:
    """``mgrid`` (``sparse=False``): the coordinates of every point of the grid whose axes
    the slices describe, stacked on a new first axis. ``ogrid`` (``sparse=True``): one array
    per axis, with size-1 axes elsewhere, which broadcast to the dense grid. One slice gives
    its 1-D range; several share one promoted dtype."""

    def __init__(self, name, sparse):
        self.name, self.sparse = name, sparse

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _slice_to_range(key, self.name)
        axes = [_slice_to_range(s, self.name) for s in key]
        with numpy_dtype_promotion("standard"):  # the grid's axes mix ints and floats freely
            axes = promote_dtypes(*axes) if axes else []
        grids = meshgrid(*axes, indexing="ij", sparse=self.sparse)
        if self.sparse:
            return grids
        return stack(grids) if grids else arange(0)


mgrid = _Grid("mgrid", sparse=False)
ogrid = _Grid("ogrid", sparse=True)


class _Concatenator:
    """``r_`` and ``c_``: concatenate arrays, scalars and slices (their ranges) along
    ``axis``, each first made at least ``ndmin``-dimensional. A string first entry changes
    the defaults: ``"axis,ndmin,trans1d"`` (any leading part of it), or ``"r"``/``"c"``,
    which turn a 1-D result into a row (1, n) or a column (n, 1)."""

    def __init__(self, name, axis, ndmin, trans1d):
        self.name, self.defaults = name, (axis, ndmin, trans1d)

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        (axis, ndmin, trans1d), matrix_axis = self.defaults, None
        if items and isinstance(items[0], str):
            (axis, ndmin, trans1d), matrix_axis = self._directive(items[0])
            items = items[1:]
        out = concatenate([self._piece(item, ndmin, trans1d) for item in items], axis=axis)
        if matrix_axis is not None and out.ndim == 1:
            out = expand_dims(out, matrix_axis)
        return out

    def __len__(self):  # as NumPy's r_ and c_, which are objects to index, not sequences
        return 0

    def _directive(self, directive):
        """``((axis, ndmin, trans1d), matrix_axis)`` from a string directive: ``"r"`` and
        ``"c"`` keep the defaults and name the axis a 1-D result gains; otherwise up to three
        comma-separated integers replace the defaults in order (more are ignored)."""
        if directive in ("r", "c"):
            return self.defaults, "rc".index(directive)
        given = directive.split(",")[:3]
        try:
            values = [int(v) for v in given]
        except ValueError:
            raise ValueError(f"could not understand directive {directive!r}") from None
        return tuple(values) + self.defaults[len(values):], None

    def _piece(self, item, ndmin, trans1d):
        """``item`` as an array of at least ``ndmin`` dimensions: its shape padded with
        leading 1s, then, unless ``trans1d`` is -1, its axes rotated so that the last one
        lands at position ``trans1d``. A slice's range counts as 0-dimensional here, as in
        JAX, so it is always rotated."""
        if isinstance(item, str):
            raise ValueError("string directive must be placed at the beginning")
        if isinstance(item, slice):
            piece, item_ndim = _slice_to_range(item, self.name), 0
        else:
            piece = array(item, copy=False)
            item_ndim = piece.ndim
        piece = array(piece, copy=False, ndmin=ndmin)
        if trans1d != -1 and ndmin > item_ndim:
            shift = (ndmin - 1 - trans1d) % ndmin
            piece = transpose(piece, tuple(range(shift, ndmin)) + tuple(range(shift)))
        return piece


r_ = _Concatenator("r_", axis=0, ndmin=1, trans1d=-1)
c_ = _Concatenator("c_", axis=-1, ndmin=2, trans1d=0)

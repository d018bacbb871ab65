"""``nbjax.flatten_util``: a pytree of arrays as one flat vector, and back.

Code written for a single vector (an optimizer, a sampler, a Newton step solving with a
Hessian matrix) can then work on a model's parameters, a nested dict of arrays: ravel them,
work on the vector, unravel the result. Both directions are ordinary nbjax operations
(reshape, concatenate, slice, convert), so they trace under jit, vmap and grad.
"""

import dataclasses
import math

import numpy as np

from . import lax
from . import numpy as jnp
from .core import dtypes, get_aval
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree):
    """``(flat, unravel)``: the leaves of ``pytree`` raveled and concatenated into one 1-D
    array, and the function that cuts such a vector back into a pytree like ``pytree``.

    ``flat``'s dtype is the promotion of the leaves' dtypes (int32 and float32 leaves give
    float32). ``unravel`` converts each piece back to its leaf's dtype, and so insists on
    that promoted dtype. When every leaf has the same dtype it converts nothing and takes
    a vector of any dtype (a tangent, a float64 copy). A pytree without leaves gives an
    empty float32 vector.
    """
    leaves, treedef = tree_flatten(pytree)
    avals = [get_aval(leaf) for leaf in leaves]
    shapes = tuple(aval.shape for aval in avals)
    if not leaves:
        return jnp.zeros(0, dtypes.float32), _Unravel(treedef, shapes, None, None)
    leaf_dtypes = tuple(aval.dtype for aval in avals)
    flat_dtype = jnp.result_type(*leaf_dtypes)
    pieces = [jnp.ravel(leaf) for leaf in leaves]
    if all(dtype == flat_dtype for dtype in leaf_dtypes):
        return jnp.concatenate(pieces), _Unravel(treedef, shapes, None, None)
    flat = jnp.concatenate([lax.convert_element_type(p, flat_dtype) for p in pieces])
    return flat, _Unravel(treedef, shapes, leaf_dtypes, flat_dtype)


@dataclasses.dataclass(frozen=True)
class _Unravel:
    """The inverse of one ``ravel_pytree``: cut a flat vector into pieces the sizes of the
    leaves, reshape each and convert it to its leaf's dtype. A value rather than a closure,
    so that the unravel functions of equal structures are equal (a static argument of
    ``jit`` then hits the cache)."""

    treedef: object
    shapes: tuple
    leaf_dtypes: tuple | None  # None: the leaves shared one dtype, there is nothing to convert
    flat_dtype: np.dtype | None

    def __call__(self, flat):
        if not self.shapes:
            return tree_unflatten(self.treedef, [])
        if self.leaf_dtypes is not None and get_aval(flat).dtype != self.flat_dtype:
            raise TypeError(f"unravel function given array of dtype {get_aval(flat).dtype}, "
                            f"but expected dtype {self.flat_dtype}")
        pieces = lax.split(flat, [math.prod(shape) for shape in self.shapes])
        leaves = [jnp.reshape(p, shape) for p, shape in zip(pieces, self.shapes)]
        if self.leaf_dtypes is not None:
            leaves = [lax.convert_element_type(leaf, dtype)
                      for leaf, dtype in zip(leaves, self.leaf_dtypes)]
        return tree_unflatten(self.treedef, leaves)

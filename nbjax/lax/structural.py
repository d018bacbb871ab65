"""Structural primitives: they move, select or replicate elements without arithmetic.

broadcast_in_dim, reshape, transpose, squeeze, rev, slice, concatenate, pad, iota,
select_n, clamp ... (each with its lax wrapper).
"""

import numpy as np

from ..core import Primitive, ShapedArray, canonical_shape, get_aval

__all__ = ["broadcast_in_dim", "broadcast_in_dim_p", "broadcast", "broadcast_to_rank"]

# --- broadcast_in_dim ----------------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.pp_hidden = ("shape", "sharding")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions, sharding=None):
    dims = broadcast_dimensions
    if len(dims) != x.ndim:
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must have length equal to "
                        f"operand ndim; got broadcast_dimensions {dims} for operand ndim "
                        f"{x.ndim}.")
    if any(not 0 <= d < len(shape) for d in dims) or list(dims) != sorted(set(dims)):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be strictly increasing "
                        f"and in range for shape {shape}; got {dims}.")
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(f"broadcast_in_dim operand dimension sizes must either be 1, or be "
                            f"equal to their corresponding dimensions in the target broadcast "
                            f"shape; got operand of shape {x.shape}, target broadcast shape "
                            f"{shape}, broadcast_dimensions {dims}.")
    return ShapedArray(shape, x.dtype, x.weak_type)


@broadcast_in_dim_p.def_impl
def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions, sharding=None):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape).copy()


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Place ``operand``'s axes at ``broadcast_dimensions`` of ``shape`` and replicate."""
    shape = canonical_shape(shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    aval = get_aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims,
                                   sharding=None)


def broadcast(operand, sizes):
    """Add leading axes of ``sizes`` (``lax.broadcast``)."""
    aval = get_aval(operand)
    sizes = canonical_shape(sizes)
    return broadcast_in_dim(operand, sizes + aval.shape,
                            range(len(sizes), len(sizes) + aval.ndim))


def broadcast_to_rank(x, rank):
    """Prepend size-1 axes until ``x`` has ``rank`` dimensions."""
    aval = get_aval(x)
    extra = rank - aval.ndim
    if extra <= 0:
        return x
    return broadcast_in_dim(x, (1,) * extra + aval.shape, range(extra, rank))

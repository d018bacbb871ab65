"""``vmap``: vectorise a function over a mapped axis of its arguments, by running it once
under a ``batching.BatchTrace`` (each primitive's batch rule does the work).

It sits below ``numpy`` and ``custom_derivatives`` (which vmap user rules), so it uses
only the core, the interpreters, lax and ``calls``."""

import functools

from .calls import as_array, canonical_in_axes, flatten_axes, mapped_size
from .core import get_aval, new_trace, pytree
from .interpreters import batching, staging
from .lax import batch_util

__all__ = ["vmap"]


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None,
         sum_match=False):
    """Vectorise ``fun`` over a mapped axis of its arguments, as ``jax.vmap``.

    ``in_axes``/``out_axes`` are an int, None, or pytree prefixes of the positional arguments
    / outputs; keyword arguments are mapped over axis 0. An output whose ``out_axes`` is None
    must not vary along the mapped axis, or with ``sum_match`` it is summed over it.
    ``axis_name`` names the mapped axis for collectives (``lax.psum(x, axis_name)``).
    ``spmd_axis_name`` (the mesh axes JAX shards the mapped axis over) changes nothing here:
    an nbjax array is whole on one device.
    """
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or isinstance(in_axes, (int, tuple, dict))):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, got {in_axes!r}.")
    _check_axis_spec("in_axes", in_axes)
    _check_axis_spec("out_axes", out_axes)

    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        axes = in_axes if not isinstance(in_axes, tuple) else tuple(in_axes)
        if isinstance(axes, tuple) and len(axes) != len(args):
            raise ValueError(
                f"vmap in_axes specification must be a tree prefix of the corresponding value, "
                f"got specification {in_axes} for value tree "
                f"{pytree.tree_structure(args)}.")
        flat_args, in_tree = pytree.tree_flatten((args, kwargs))
        flat_axes = flatten_axes("vmap in_axes", in_tree, (axes, 0), len(flat_args))
        flat_args, flat_axes = canonical_in_axes(flat_args, flat_axes)
        size = mapped_size(fun, in_tree, flat_args, flat_axes, axis_size)
        desc = staging.describe(fun, "vmap")
        axis_data = batching.AxisData(axis_name, size)
        with new_trace(lambda parent: batching.BatchTrace(parent, axis_data, desc)) as trace:
            tracers = [trace.wrap(x, d) for x, d in zip(flat_args, flat_axes)]
            a, kw = in_tree.unflatten(tracers)
            out = fun(*a, **kw)
            flat_out, out_tree = pytree.tree_flatten(out)
            unpacked = [trace.unpack(x) for x in flat_out]
        flat_out_axes = flatten_axes("vmap out_axes", out_tree, out_axes, len(flat_out))
        outs = [_to_out_axis(v, d, oa, size, axis_name, sum_match)
                for (v, d), oa in zip(unpacked, flat_out_axes)]
        return out_tree.unflatten(outs)
    return vmapped


def _check_axis_spec(name, spec):
    for leaf in pytree.tree_leaves(spec, is_leaf=lambda x: x is None):
        if leaf is not None and not isinstance(leaf, int):
            raise TypeError(f"vmap {name} must contain only ints and None, got {leaf!r}")


def _to_out_axis(val, dim, out_axis, size, axis_name, sum_match):
    if out_axis is None:
        if dim is None:
            return val
        if sum_match:
            return as_array(val).sum(dim)
        if axis_name is not None:
            raise ValueError(f"vmap has mapped output (axis_name={axis_name}) but out_axes is "
                             "None")
        raise ValueError(f"at vmap out_axes, got axis spec None but output was batched on "
                         f"axis {dim}")
    val = as_array(val)
    nd = get_aval(val).ndim + (dim is None)
    if not -nd <= out_axis < nd:
        raise ValueError(f"vmap out_axes {out_axis} is out of range for an output of rank {nd}")
    return batch_util.bdim_at(val, dim, out_axis % nd, size)

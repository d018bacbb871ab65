"""Collectives over a named mapped axis: psum, pmean, pmax, pmin, all_gather, axis_index.

They are meaningful only inside a transformation that names the axis (``vmap(...,
axis_name="i")`` now, ``pmap`` later); evaluated outside one they raise NameError, as in JAX.
Under vmap a collective over the vmapped axis is a reduction over the batch dimension.
"""

from ..core import Primitive, ShapedArray, dtypes, get_aval, pytree
from ..interpreters import batching
from . import batch_util
from .elementwise import convert_element_type, div, mul
from .reductions import reduce_max, reduce_min, reduce_sum
from .structural import iota, reshape

__all__ = ["psum", "psum_p", "pmean", "pmax", "pmax_p", "pmin", "pmin_p", "all_gather",
           "all_gather_p", "axis_index", "axis_index_p"]


def _axes(axis_name):
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _unbound(axes, **_):
    raise NameError(f"unbound axis name: {axes[0]}. The following axis names (e.g. defined "
                    "by vmap(..., axis_name=) or pmap) are available to collective operations: "
                    "none here.")


def _collective(name, reduce, unbatched):
    """A reduction over named axes: ``reduce(x, axis)`` over the batch axis of a vmap whose
    name is listed, ``unbatched(x, size)`` for a value the same across that axis."""
    prim = Primitive(name)
    prim.def_abstract_eval(lambda x, *, axes: x)
    prim.def_impl(lambda x, *, axes: _unbound(axes))

    @prim.def_batch
    def batch_rule(axis_data, vals, dims, *, axes):
        (x,), (d,) = vals, dims
        if axis_data.name not in axes:
            return prim.bind(x, axes=axes), d
        x = unbatched(x, axis_data.size) if d is None else reduce(x, d)
        rest = tuple(a for a in axes if a != axis_data.name)
        return (prim.bind(x, axes=rest) if rest else x), None

    batching.axis_primitives.add(prim)
    return prim


def _times_size(x, size):
    aval = get_aval(x)
    return mul(x, convert_element_type(size, aval.dtype, weak_type=aval.weak_type))


psum_p = _collective("psum", lambda x, d: reduce_sum(x, (d,)), _times_size)
pmax_p = _collective("pmax", lambda x, d: reduce_max(x, (d,)), lambda x, size: x)
pmin_p = _collective("pmin", lambda x, d: reduce_min(x, (d,)), lambda x, size: x)


def psum(x, axis_name):
    """Sum a pytree of arrays over the named mapped axis (or axes)."""
    axes = _axes(axis_name)
    return pytree.tree_map(lambda leaf: psum_p.bind(leaf, axes=axes), x)


def pmax(x, axis_name):
    axes = _axes(axis_name)
    return pytree.tree_map(lambda leaf: pmax_p.bind(leaf, axes=axes), x)


def pmin(x, axis_name):
    axes = _axes(axis_name)
    return pytree.tree_map(lambda leaf: pmin_p.bind(leaf, axes=axes), x)


def pmean(x, axis_name):
    """Mean over the named axis: psum divided by the axis size (itself a psum of ones)."""
    axes = _axes(axis_name)

    def mean(leaf):
        aval = get_aval(leaf)
        if not dtypes.is_inexact(aval.dtype):  # as x / n in JAX: integers give floats
            leaf = convert_element_type(leaf, dtypes.default_float())
        total = psum_p.bind(leaf, axes=axes)
        count = psum_p.bind(convert_element_type(1, get_aval(total).dtype), axes=axes)
        return div(total, count)
    return pytree.tree_map(mean, x)


# --- all_gather ----------------------------------------------------------------------------

all_gather_p = Primitive("all_gather")
all_gather_p.def_impl(lambda x, **params: _unbound(params["axes"]))


@all_gather_p.def_abstract_eval
def _all_gather_abstract_eval(x, *, axes, axis_size, all_gather_dimension, tiled):
    shape = list(x.shape)
    if tiled:
        shape[all_gather_dimension] *= axis_size
    else:
        shape.insert(all_gather_dimension, axis_size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


@all_gather_p.def_batch
def _all_gather_batch(axis_data, vals, dims, *, axes, axis_size, all_gather_dimension, tiled):
    (x,), (d,) = vals, dims
    axis = all_gather_dimension
    if axis_data.name != axes[0]:
        # Gathering over an outer axis: keep our batch axis out of the way.
        pos = axis if (d is None or axis <= d) else axis + 1
        out = all_gather_p.bind(x, axes=axes, axis_size=axis_size, all_gather_dimension=pos,
                                tiled=tiled)
        return out, (None if d is None else d + (not tiled and pos <= d))
    x = batch_util.bdim_at(x, d, axis, axis_data.size)
    if tiled:
        shape = get_aval(x).shape
        merged = shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:]
        x = reshape(x, merged)
    return x, None


def all_gather(x, axis_name, *, axis=0, tiled=False, axis_size=None):
    """Gather a pytree of arrays from every member of the named axis, stacked at ``axis``."""
    axes = _axes(axis_name)
    if len(axes) != 1:
        raise NotImplementedError("all_gather over several axis names is not supported")

    def gather(leaf):
        nd = get_aval(leaf).ndim
        if not -nd - (not tiled) <= axis < nd + (not tiled):
            raise ValueError(f"all_gather axis {axis} is out of range for rank {nd}")
        size = axis_size if axis_size is not None else _axis_size(axes[0])
        return all_gather_p.bind(leaf, axes=axes, axis_size=size,
                                 all_gather_dimension=axis % (nd + (not tiled)), tiled=tiled)
    return pytree.tree_map(gather, x)


batching.axis_primitives.add(all_gather_p)


# --- axis_index ----------------------------------------------------------------------------

axis_index_p = Primitive("axis_index")
axis_index_p.def_abstract_eval(lambda *, axes: ShapedArray((), dtypes.int32, False))
axis_index_p.def_impl(lambda *, axes: _unbound(axes))


@axis_index_p.def_batch
def _axis_index_batch(axis_data, vals, dims, *, axes):
    if axis_data.name != axes[0]:
        return axis_index_p.bind(axes=axes), None
    return iota(dtypes.int32, axis_data.size), 0


batching.axis_primitives.add(axis_index_p)


def axis_index(axis_name):
    """The position of this member along the named mapped axis (an int32 scalar)."""
    return axis_index_p.bind(axes=_axes(axis_name))


def _axis_size(name):
    """The size of the named axis, found from the enclosing traces."""
    from ..core import current_trace
    trace = current_trace()
    while trace is not None:
        data = getattr(trace, "axis_data", None)
        if data is not None and data.name == name:
            return data.size
        trace = trace.parent
    _unbound((name,))

"""The user-facing transformations. Now: ``make_jaxpr``; vmap, grad and jit come next."""

import functools

from .core import ClosedJaxpr, get_aval, pytree
from .core import dtypes
from .core.abstract import ShapedArray, ShapeDtypeStruct
from .interpreters import staging


def _static_argnums(static_argnums, nargs):
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    out = set()
    for i in static_argnums or ():
        if not -nargs <= i < nargs:
            raise ValueError(f"static_argnums {i} is out of range for {nargs} arguments")
        out.add(i % nargs)
    return out


def _abstractify(x):
    """The aval of an argument: arrays and scalars, or anything with a shape and a dtype."""
    if isinstance(x, ShapedArray):
        return x
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype), x.weak_type)
    return get_aval(x)


def make_jaxpr(fun, static_argnums=(), return_shape=False):
    """``make_jaxpr(f)(*args)``: the jaxpr ``f`` computes on arguments like ``args``.

    Arguments may be arrays, scalars, ``ShapeDtypeStruct``-likes or ShapedArrays (only their
    shape and dtype matter); ``static_argnums`` are passed to ``f`` as Python values.
    """
    @functools.wraps(fun)
    def make(*args, **kwargs):
        static = _static_argnums(static_argnums, len(args))
        dyn = [a for i, a in enumerate(args) if i not in static]
        flat_args, in_tree = pytree.tree_flatten((dyn, kwargs))
        in_avals = [_abstractify(x) for x in flat_args]
        out_tree_box = []

        def flat_fun(*flat):
            dyn_args, kw = in_tree.unflatten(flat)
            it = iter(dyn_args)
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            out = fun(*full, **kw)
            flat_out, out_tree = pytree.tree_flatten(out)
            out_tree_box.append(out_tree)
            return flat_out

        desc = staging.describe(fun, "make_jaxpr")
        jaxpr, consts = staging.trace_to_jaxpr(flat_fun, in_avals, desc)
        closed = ClosedJaxpr(jaxpr, consts)
        if return_shape:
            shapes = out_tree_box[0].unflatten(jaxpr.out_avals)
            return closed, shapes
        return closed
    return make

"""Arrays of extended dtypes (typed PRNG keys), and how primitives apply to them.

Such an array is a logical array of ``shape`` over *physical* data of shape
``shape + dtype.element_shape`` (a batch of threefry keys: uint32 data with a trailing axis
of two words). Transformations never see one: to them it is a pytree whose one leaf is the
data. What reaches ``Primitive.bind`` with one among its operands is applied by
``bind_extended``: the primitive checks the logical operand types (so its errors speak of
the array the user holds, as JAX's do), and its ``extended`` rule computes on the physical
data (the structural primitives' are in ``nbjax.lax.extended``); results of an extended
dtype are wrapped again. A primitive without one refuses the operand, with JAX's TypeError:
arithmetic on keys means nothing.
"""

import math

from .abstract import ShapedArray
from .dtypes import ExtendedDType
from .trace import get_aval


class ExtendedArray:
    """Base of arrays of an extended dtype: a subclass gives ``dtype`` (an
    ``ExtendedDType``) and ``physical`` (its data, an Array or tracer)."""

    __slots__ = ()

    dtype = physical = None

    @property
    def shape(self):
        shape = get_aval(self.physical).shape
        return shape[:len(shape) - len(self.dtype.element_shape)]

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    aval = property(lambda self: ShapedArray(self.shape, self.dtype))
    weak_type = False
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def block_until_ready(self):
        self.physical.block_until_ready()
        return self


def bind_extended(prim, args, params):
    """``prim`` applied to ``args``, some of them ExtendedArrays: checked on their logical
    types, computed by the primitive's ``extended`` rule on their physical data as
    ``rule(in_avals, out_avals, *physical, **params)``, which returns physical results."""
    in_avals = [get_aval(a) for a in args]
    rule = prim.rules.get("extended")
    if rule is None:
        i, aval = next((i, a) for i, a in enumerate(in_avals)
                       if isinstance(a.dtype, ExtendedDType))
        raise TypeError(f"{prim.name} does not accept dtype {aval.dtype} at position {i}.")
    out_avals = prim.abstract_eval(*in_avals, **params)
    physical = [a.physical if isinstance(a, ExtendedArray) else a for a in args]
    outs = rule(in_avals, out_avals, *physical, **params)
    if not prim.multiple_results:
        return _logical(outs, out_avals)
    return [_logical(o, aval) for o, aval in zip(outs, out_avals)]


def _logical(out, aval):
    return aval.dtype.wrap(out) if isinstance(aval.dtype, ExtendedDType) else out

"""Abstract values: what a transformation knows about an array without its contents."""

import math
import operator

import numpy as np

from . import dtypes


def canonical_shape(shape, what="shape"):
    """Turn a shape-like into a tuple of non-negative ints, or raise TypeError."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise TypeError(f"{what} must have non-negative dimensions, got {dims}")
    return dims


class ShapedArray:
    """An array's shape, dtype and whether its dtype is weak (came from a Python scalar). The
    dtype is a NumPy dtype, or an extended one (a typed key's ``key<fry>``): the types of
    those arrays are asked about by jnp's and lax's checks, but never reach a trace, which
    sees their physical data (``core.extended``)."""

    __slots__ = ("shape", "dtype", "weak_type", "_hash")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            if not isinstance(dtype, dtypes.ExtendedDType):
                raise
            self.dtype = dtype
        self.weak_type = bool(weak_type)
        self._hash = None

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def nbytes(self):
        """The bytes an array of this type takes (a compiler's buffers, its limits)."""
        return self.size * self.dtype.itemsize

    def update(self, shape=None, dtype=None, weak_type=None):
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self):
        return self.update(weak_type=False) if self.weak_type else self

    def str_short(self, short_dtypes=False):
        """``float32[3,4]``, as JAX's messages write a type; with ``short_dtypes``,
        ``f32[3,4]``, the form jaxprs print."""
        name = dtypes.short_name(self.dtype) if short_dtypes else dtypes.name(self.dtype)
        return f"{name}[{','.join(map(str, self.shape))}]"

    def __eq__(self, other):
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        """Computed once (avals key jit's caches, and a call looks its signature up)."""
        if self._hash is None:
            self._hash = hash((self.shape, self.dtype, self.weak_type))
        return self._hash

    def __reduce__(self):  # (not the hash: strings' hashes differ between processes)
        return type(self), (self.shape, self.dtype, self.weak_type)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short()}{weak})"

    def __str__(self):
        """``float32[3,4]``; ``~float32[]`` for a weak type (a Python scalar's), as JAX."""
        return ("~" if self.weak_type else "") + self.str_short()


class ShapeDtypeStruct:
    """A shape and dtype standing in for an argument (``make_jaxpr(f)(ShapeDtypeStruct(...))``)."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = canonical_shape(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = weak_type

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

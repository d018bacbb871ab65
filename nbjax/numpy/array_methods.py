"""Operators and methods of ``Array`` and of tracers, defined once in terms of ``jnp``.

Both classes get the same methods here (as JAX does), so ``x + 1`` means the same eagerly
and under any transformation. Called once when ``nbjax.numpy`` is imported.
"""

import numpy as np

from .. import lax
from ..core import Array, ExtendedArray, Tracer, dtypes
from ..sharding import refuse_out_sharding
from . import array_api, creation, indexing, manipulation, selection, ufuncs, vectorize

# operator -> jnp function name; reflected operators swap the operands.
_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift", "divmod": "divmod",
}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
# Operators a list or tuple operand must not reach Python's fallbacks for (see ``_forward``).
_REFUSING_SEQUENCES = {"eq": "==", "ne": "!=", "mul": "*"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "invert"}

# method name -> jnp function name (the array is the first argument).
_METHODS = {
    "all": "all", "any": "any", "argmax": "argmax", "argmin": "argmin",
    "argpartition": "argpartition", "argsort": "argsort", "astype": "astype",
    "choose": "choose", "clip": "clip", "conj": "conj",
    "conjugate": "conjugate", "cumprod": "cumprod", "cumsum": "cumsum",
    "diagonal": "diagonal", "dot": "dot", "flatten": "ravel", "max": "max", "mean": "mean",
    "min": "min", "nonzero": "nonzero", "prod": "prod", "ptp": "ptp", "ravel": "ravel",
    "repeat": "repeat", "round": "round", "searchsorted": "searchsorted", "sort": "sort",
    "squeeze": "squeeze", "std": "std", "sum": "sum", "swapaxes": "swapaxes", "take": "take",
    "trace": "trace", "var": "var",
}
_PROPERTIES = {"T": "_transpose_all", "mT": "matrix_transpose", "real": "real", "imag": "imag"}


def _function(jnp, name):
    """The ``jnp`` function an operator calls: for a ufunc (``jnp.add``), the function it
    calls, without the checks of its ``__call__`` (an operator's operands are arrays)."""
    fn = getattr(jnp, name)
    return fn._function if isinstance(fn, vectorize.ufunc) else fn


def _forward(jnp, name, reflected=False, symbol=None):
    """The operator method calling ``jnp.<name>``. With ``symbol`` (``==``, ``!=``, ``*``)
    a list or tuple operand is JAX's TypeError: returning NotImplemented would let Python
    fall back to identity, and ``x == [1, 2]`` be False, or repeat the list
    (``[1, 2] * x``, a scalar ``x``, as its ``__index__``)."""
    fn = _function(jnp, name)

    def method(self, other):
        if not _is_operand(other):
            if symbol is not None and isinstance(other, (list, tuple)):
                left, right = (other, self) if reflected else (self, other)
                raise TypeError(f"unsupported operand type(s) for {symbol}: "
                                f"{type(left).__name__!r} and {type(right).__name__!r}")
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    return method


def _is_operand(x):
    """JAX's accepted operand types: ``np.generic`` takes in the ml_dtypes scalars too
    (``bfloat16(2) * x``), which are not ``numpy``'s; typed keys are arrays too."""
    return isinstance(x, (Array, Tracer, ExtendedArray, int, float, complex, np.generic,
                          np.ndarray))


def _forward_unary(jnp, name):
    fn = _function(jnp, name)

    def method(self):
        return fn(self)
    return method


def _forward_method(jnp, name):
    def method(self, *args, **kwargs):
        return getattr(jnp, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


def _reshape(self, *shape, order="C", out_sharding=None):
    if out_sharding is not None:
        refuse_out_sharding("Array.reshape", out_sharding)
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
    return manipulation.reshape(self, shape, order=order)


def _transpose(self, *axes):
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
        axes = axes[0]
    return manipulation.transpose(self, axes or None)


def _compress(self, condition, axis=None, *, size=None, fill_value=0, out=None):
    """``x.compress(condition)`` is ``selection.compress(condition, x)``: the array comes second."""
    return selection.compress(condition, self, axis, size=size, fill_value=fill_value, out=out)


def _view(self, dtype=None, type=None):
    """``x.view(dtype)``: the same bytes read as ``dtype``; the last axis shrinks or grows
    by the ratio of the item sizes, as in NumPy and JAX."""
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    if dtype is None:
        return self
    dtype = dtypes.canonicalize(dtype)
    bits_in, bits_out = self.dtype.itemsize, dtype.itemsize
    if self.ndim == 0:
        if bits_in != bits_out:
            raise ValueError("view() of a 0d array is only supported if the itemsize is "
                             "unchanged.")
        return _view(self[None], dtype)[0]
    if (self.shape[-1] * bits_in) % bits_out:
        raise ValueError("When changing to a larger dtype, its size must be a divisor of the "
                         "total size in bytes of the last axis of the array.")
    if self.dtype == dtype:
        return self
    if dtypes.is_bool(self.dtype):
        return _view(self.astype(np.uint8), dtype)
    if dtypes.is_complex(self.dtype):  # interleave (real, imag) as float pairs
        parts = manipulation.stack([ufuncs.real(self), ufuncs.imag(self)], axis=-1)
        return _view(parts.reshape(*self.shape[:-1], -1), dtype)
    if dtypes.is_bool(dtype):
        return _view(self, np.uint8).astype(bool)
    if dtypes.is_complex(dtype):
        pairs = _view(self, dtypes.finfo(dtype).dtype).astype(dtype)
        return pairs[..., 0::2] + 1j * pairs[..., 1::2]
    if bits_in < bits_out:
        grouped = self.reshape(*self.shape[:-1], -1, bits_out // bits_in)
        return lax.bitcast_convert_type(grouped, dtype)
    if bits_in > bits_out:
        split = lax.bitcast_convert_type(self, dtype)
        return split.reshape(*self.shape[:-1], -1)
    return lax.bitcast_convert_type(self, dtype)


def _round(self, ndigits=None):
    """``round(x)`` is an integer array (as Python's ``round`` gives an int), ``round(x, n)``
    has ``x``'s dtype, as JAX's."""
    out = ufuncs.round(self, ndigits or 0)
    return out.astype(int) if ndigits is None else out


def _byteswap(self, inplace=False):
    """``x.byteswap()``: each element's bytes in reverse order (``inplace`` must be False)."""
    if inplace:
        raise ValueError("Inplace byteswapping not supported.")
    if self.dtype.itemsize == 1:
        return self
    if creation.iscomplexobj(self):  # NumPy swaps the real and imaginary parts' bytes separately
        return lax.complex(ufuncs.real(self).byteswap(), ufuncs.imag(self).byteswap())
    as_bytes = _view(manipulation.ravel(self), np.uint8).reshape(-1, self.dtype.itemsize)
    return _view(manipulation.flip(as_bytes, -1).reshape(-1), self.dtype).reshape(self.shape)


def _namespace_method(jnp):
    def __array_namespace__(self, *, api_version=None):
        """``x.__array_namespace__()``: ``nbjax.numpy``, which implements one revision."""
        array_api.check_api_version(api_version)
        return jnp
    return __array_namespace__


def _register_operators(jnp, cls):
    for op, name in _BINARY.items():
        symbol = _REFUSING_SEQUENCES.get(op)
        setattr(cls, f"__{op}__", _forward(jnp, name, symbol=symbol))
        setattr(cls, f"__r{op}__", _forward(jnp, name, reflected=True, symbol=symbol))
    for op, name in _COMPARE.items():
        setattr(cls, f"__{op}__", _forward(jnp, name, symbol=_REFUSING_SEQUENCES.get(op)))
    for op, name in _UNARY.items():
        setattr(cls, f"__{op}__", _forward_unary(jnp, name))


# What arrays of an extended dtype (typed keys) have of an array's methods, as in JAX: the
# structural ones. The others are JAX's abstract methods there (NotImplementedError).
_EXTENDED_METHODS = ("flatten", "ravel", "squeeze", "swapaxes", "take")


def _abstract(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"Cannot call abstract method {name}")
    method.__name__ = name
    return method


def _register_extended(jnp):
    """The operators and structural methods of arrays of an extended dtype: ``nbjax.numpy``'s,
    which apply to them through the primitives' rules for extended dtypes (``==`` compares
    keys; ``+`` raises JAX's TypeError)."""
    cls = ExtendedArray
    _register_operators(jnp, cls)
    for meth, name in _METHODS.items():
        setattr(cls, meth, _forward_method(jnp, name) if meth in _EXTENDED_METHODS
                else _abstract(meth))
    for prop in ("mT", "real", "imag"):
        setattr(cls, prop, property(_abstract(prop)))
    for meth in ("compress", "view", "byteswap", "item"):
        setattr(cls, meth, _abstract(meth))
    cls.flat = property(_abstract("flat"))
    cls.T = property(_forward_unary(jnp, _PROPERTIES["T"]))
    cls.reshape = _reshape
    cls.transpose = _transpose
    cls.__getitem__ = indexing.getitem
    cls.at = property(indexing.IndexUpdateHelper)
    cls.copy = lambda self: self  # immutable: a copy is the same value


def register(jnp):
    """Attach the operators and methods to Array and Tracer (and those that apply to them to
    arrays of an extended dtype)."""
    _register_extended(jnp)
    for cls in (Array, Tracer):
        _register_operators(jnp, cls)
        for meth, name in _METHODS.items():
            setattr(cls, meth, _forward_method(jnp, name))
        for prop, name in _PROPERTIES.items():
            setattr(cls, prop, property(_forward_unary(jnp, name)))
        cls.reshape = _reshape
        cls.transpose = _transpose
        cls.compress = _compress
        cls.view = _view
        cls.byteswap = _byteswap
        # NumPy's flat iterator, read-only: the ravelled array indexes and iterates the same
        # (JAX raises here instead).
        cls.flat = property(manipulation.ravel)
        cls.__getitem__ = indexing.getitem
        cls.at = property(indexing.IndexUpdateHelper)
        cls.__round__ = _round
        cls.__array_namespace__ = _namespace_method(jnp)
        cls.to_device = array_api.to_device_method
    Array.__dlpack__ = array_api.dlpack_method
    Array.__dlpack_device__ = array_api.dlpack_device_method
    Array.copy = lambda self: self  # immutable: a copy is the same value
    Tracer.copy = lambda self: self

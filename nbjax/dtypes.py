"""``nbjax.dtypes``: JAX's public dtype helpers, as ``jax.dtypes`` has them.

The promotion lattice and the dtype predicates live in ``nbjax/core/dtypes.py``, which every
layer uses; this module is the small public face users import: canonicalizing a dtype (64-bit
types become 32-bit unless x64 is on), promotion (``result_type``), the type hierarchy with
JAX's extra types (``issubdtype``: bfloat16, int4, PRNG keys), and bit widths.
"""

import ml_dtypes
import numpy as np

from .core import dtypes as _core
from .core import get_aval
from .core.dtypes import TypePromotionError, extended, float0, iinfo, prng_key
from .numpy import finfo
from .numpy import util as _numpy_util

__all__ = ["canonicalize_dtype", "issubdtype", "result_type", "finfo", "iinfo", "bfloat16",
           "float0", "TypePromotionError", "itemsize_bits", "scalar_type_of", "prng_key",
           "extended"]

bfloat16 = ml_dtypes.bfloat16  # the scalar type, as in jax.dtypes (jnp.bfloat16 makes arrays)


def issubdtype(a, b):
    """Whether ``a`` is ``b`` or below it in the type hierarchy, with JAX's extra types
    filed as JAX files them (``nbjax.numpy.issubdtype``, whose arguments are named as
    NumPy's: ``arg1``, ``arg2``)."""
    return _core.issubdtype(a, b)


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """The dtype nbjax stores values of ``dtype`` in: 64-bit types become 32-bit unless x64
    is on. Types nbjax holds no arrays of (strings, objects) come back as NumPy's dtype.
    An extended dtype (a key array's) is returned only with ``allow_extended_dtype``."""
    if _core.is_extended(dtype):
        if not allow_extended_dtype:
            raise ValueError(f"canonicalize_dtype called on extended dtype {dtype} with "
                             "allow_extended_dtype=False")
        return dtype
    dtype = np.dtype(dtype)
    return _core.canonicalize(dtype) if _core.is_supported(dtype) else dtype


def result_type(*args, return_weak_type_flag=False):
    """The dtype JAX gives the result of combining ``args`` (arrays, scalars, dtypes); with
    ``return_weak_type_flag``, the pair ``(dtype, weak_type)``: weak when only Python
    scalars (or the types ``int``, ``float``, ``complex``) took part."""
    dtype, weak_type = _numpy_util.result_type(*args)
    return (dtype, weak_type) if return_weak_type_flag else dtype


def itemsize_bits(dtype):
    """The bits one element of ``dtype`` takes: not ``itemsize * 8`` for the sub-byte types
    (int4 is 4 bits, float6_e2m3fn 6), which NumPy stores one to a byte."""
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    if _core.is_extended(dtype) or not _is_numeric(np.dtype(dtype)):
        raise ValueError(f"unexpected input: dtype={dtype!r}")
    dtype = np.dtype(dtype)
    if _core.is_ml_dtype(dtype):
        return (ml_dtypes.iinfo if _core.is_int(dtype) else ml_dtypes.finfo)(dtype).bits
    return dtype.itemsize * 8


def _is_numeric(dtype):
    return _core.is_bool(dtype) or _core.is_int(dtype) or _core.is_inexact(dtype)


_PYTHON_SCALAR_TYPES = ((_core.is_bool, bool), (_core.is_int, int), (_core.is_float, float),
                        (_core.is_complex, complex))


def scalar_type_of(x):
    """The Python scalar type whose values ``x``'s elements are: ``bool``, ``int`` (every
    integer width), ``float`` (bfloat16 and the float8s too) or ``complex``."""
    dtype = np.dtype(x.dtype) if hasattr(x, "dtype") else get_aval(x).dtype
    for holds, python_type in _PYTHON_SCALAR_TYPES:
        if holds(dtype):
            return python_type
    raise TypeError(f"Invalid scalar value {x}")

"""``jnp.float32`` and friends: usable as dtypes and callable to make arrays, as in JAX.

``jnp.float32(3)`` is ``Array(3., dtype=float32)``; ``np.dtype(jnp.float32)`` is float32
(NumPy reads the ``dtype`` attribute), so they work anywhere a dtype is expected.
"""

import ml_dtypes
import numpy as np

from .creation import asarray

__all__ = ["ComplexWarning", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "float16", "float32", "float64", "complex64", "complex128",
           "generic", "number", "inexact", "floating", "complexfloating", "integer",
           "signedinteger", "unsignedinteger", "double", "single", "csingle", "cdouble", "float_",
           "complex_", "int_", "uint", "character", "flexible", "object_"]
# JAX's narrow float and integer types, from ml_dtypes (see nbjax.core.dtypes).
_ML_DTYPES = ["bfloat16", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4",
              "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
              "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int1", "int2", "int4",
              "uint1", "uint2", "uint4"]
__all__ += _ML_DTYPES

ComplexWarning = np.exceptions.ComplexWarning

# NumPy's abstract scalar classes, for ``jnp.issubdtype(x.dtype, jnp.floating)``.
generic, number, inexact, floating = np.generic, np.number, np.inexact, np.floating
complexfloating, integer = np.complexfloating, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger


class _ScalarMeta(type):
    def __call__(cls, x):
        return asarray(x, dtype=cls.dtype)

    def __eq__(cls, other):
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other):
        return not cls == other

    def __hash__(cls):
        return hash(cls.dtype.type)

    def __repr__(cls):
        return f"<class 'nbjax.numpy.{cls.__name__}'>"


def _scalar_type(name, np_type):
    return _ScalarMeta(name, (object,), {"dtype": np.dtype(np_type)})


bool_ = _scalar_type("bool_", np.bool_)
int8, int16, int32, int64 = (_scalar_type(n, n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_scalar_type(n, n)
                                 for n in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (_scalar_type(n, n) for n in ("float16", "float32", "float64"))
complex64, complex128 = _scalar_type("complex64", "complex64"), \
    _scalar_type("complex128", "complex128")


# NumPy's C-style names, which JAX keeps as aliases (64-bit ones follow enable_x64 on use).
double, single, float_ = float64, float32, float64
csingle, cdouble, complex_ = complex64, complex128, complex128
int_, uint = int64, uint64
character, flexible, object_ = np.character, np.flexible, np.object_
for _name in _ML_DTYPES:
    globals()[_name] = _scalar_type(_name, getattr(ml_dtypes, _name))

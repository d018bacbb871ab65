"""Element-wise primitives: arithmetic, transcendental functions, comparisons, bit ops.

Each primitive is declared with a registrar from ``standard`` and wrapped by a lax function
of the same name (``add_p`` / ``add``). Their transformation rules will sit beside them.
"""

import numpy as np

from ..core import Array, Primitive, ShapedArray, Tracer, dtypes, get_aval, to_numpy
from .standard import ANY, INEXACT, NUMBER, binop, check_dtype, scalars_like, unop

__all__ = ["add", "add_p", "sub", "sub_p", "mul", "mul_p", "neg", "neg_p", "sin", "sin_p",
           "cos", "cos_p", "convert_element_type", "convert_element_type_p"]

# --- arithmetic ----------------------------------------------------------------------------

add_p = binop("add", np.add, [NUMBER, NUMBER])
sub_p = binop("sub", np.subtract, [NUMBER, NUMBER])
mul_p = binop("mul", np.multiply, [NUMBER, NUMBER])
neg_p = unop("neg", np.negative, NUMBER)


def add(x, y):
    """Element-wise ``x + y``; operands must have equal dtypes (``jnp.add`` promotes)."""
    return add_p.bind(*scalars_like(x, y))


def sub(x, y):
    return sub_p.bind(*scalars_like(x, y))


def mul(x, y):
    return mul_p.bind(*scalars_like(x, y))


def neg(x):
    return neg_p.bind(x)


# --- transcendental ------------------------------------------------------------------------

sin_p = unop("sin", np.sin, INEXACT)
cos_p = unop("cos", np.cos, INEXACT)


def sin(x):
    return sin_p.bind(x)


def cos(x):
    return cos_p.bind(x)


# --- dtype conversion ----------------------------------------------------------------------

convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_element_type_abstract_eval(x, *, new_dtype, weak_type):
    check_dtype("convert_element_type", x, ANY)
    return ShapedArray(x.shape, new_dtype, weak_type)


@convert_element_type_p.def_impl
def _convert_element_type_impl(x, *, new_dtype, weak_type):
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = np.real(x)  # JAX drops the imaginary part, as NumPy does with a warning
    if dtypes.is_float(x.dtype) and dtypes.is_int(new_dtype):
        # JAX (XLA) converts NaN to 0 and saturates out-of-range values.
        info = np.iinfo(new_dtype)
        x = np.clip(np.nan_to_num(x, nan=0), info.min, info.max)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x).astype(new_dtype)


def convert_element_type(x, new_dtype, weak_type=False):
    """Convert ``x`` to ``new_dtype`` (canonicalized: 32-bit unless x64 is on)."""
    new_dtype = dtypes.canonicalize(new_dtype)
    aval = get_aval(x)
    if aval.dtype == new_dtype and aval.weak_type == weak_type and isinstance(x, (Array, Tracer)):
        return x
    params = dict(new_dtype=new_dtype, weak_type=bool(weak_type))
    if not isinstance(x, Tracer):  # a constant: convert it now rather than stage the conversion
        out_aval = convert_element_type_p.abstract_eval(aval, **params)
        return Array.wrap(convert_element_type_p.impl(to_numpy(x), **params), out_aval)
    return convert_element_type_p.bind(x, **params)

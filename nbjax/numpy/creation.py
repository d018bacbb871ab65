"""Array creation: ``array``/``asarray``, filled arrays, ranges, grids, and dtype helpers.

Values that are known in Python (lists, ranges) are built with NumPy and become constants;
shapes and ``arange``'s bounds must be concrete, as in JAX. Everything that depends on an
array argument (``full(shape, x)``, ``linspace(a, b)``, a list holding tracers) is built from
lax primitives so it can be traced.
"""

import builtins
import functools
import operator

import numpy as np

from .. import lax
from ..core import (Array, ConcretizationTypeError, ExtendedArray, Tracer, canonical_shape,
                    dtypes, get_aval)
from ..core.array import scalar_in_range
from ..core.trace import is_python_scalar
from ..lax.standard import scalar_like
from ..sharding import takes_out_sharding
from . import ufuncs, util
from .ufuncs import i0, power
from .util import broadcast_to_shape, check_arraylike, select_where, to_array

__all__ = [
    "array", "asarray", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
    "full_like", "empty_like", "arange", "linspace", "logspace", "geomspace", "eye",
    "identity", "meshgrid", "tri", "copy", "dtype", "result_type", "can_cast", "issubdtype",
    "isscalar", "ndim", "shape", "size", "iscomplexobj", "isrealobj", "iterable", "bartlett",
    "blackman", "hamming", "hanning", "vander", "fromfunction",
    "kaiser", "array_repr", "array_str", "get_printoptions", "set_printoptions", "printoptions",
    "save", "savez", "load", "frombuffer", "fromfile", "fromiter", "fromstring"]

dtype = np.dtype
can_cast = np.can_cast
issubdtype = dtypes.issubdtype

_SCALARS = (bool, int, float, complex)


def result_type(*args):
    """The dtype JAX gives the result of combining ``args`` (arrays, scalars, dtypes)."""
    return util.result_type(*args)[0]


def _canonical_dtype(dtype, function):
    return None if dtype is None else dtypes.requested(dtype, function)


# --- array / asarray -----------------------------------------------------------------------

def _leaves(obj):
    """The leaves of a nested list/tuple, depth-first. A range is one leaf: the NumPy array
    it makes (JAX takes it as an array-like, so ``range(0)`` is a float array, as NumPy's)."""
    if isinstance(obj, (list, tuple)):
        return [leaf for item in obj for leaf in _leaves(item)]
    return [np.asarray(obj) if isinstance(obj, range) else obj]


def _list_dtype(leaves):
    """JAX's dtype for a list: the promotion of its leaves, never weak."""
    if not leaves:
        return dtypes.default_float()
    text = next((leaf for leaf in leaves if _is_text(leaf)), None)
    if text is not None:
        raise _not_numeric(text, np.asarray(text).dtype)
    return dtypes.promote(*((a.dtype, a.weak_type) for a in map(get_aval, leaves)))[0]


def _from_nested(obj, dtype):
    """A (possibly traced) array from a nested list holding Arrays or tracers: stack rows."""
    if not isinstance(obj, (list, tuple)):
        return lax.convert_element_type(to_array(obj), dtype)
    rows = [_from_nested(item, dtype) for item in obj]
    shapes = {get_aval(r).shape for r in rows}
    if len(shapes) > 1:
        raise ValueError(f"setting an array element with a sequence: the rows have "
                         f"different shapes {sorted(shapes)}")
    (row_shape,) = shapes
    rows = [lax.broadcast_in_dim(r, (1,) + row_shape, range(1, len(row_shape) + 1))
            for r in rows]
    return lax.concatenate(rows, 0)


def _from_python(obj, leaves, dtype):
    """A constant Array from a nested list of scalars / NumPy values (its ``leaves``)."""
    target = dtype or _list_dtype(leaves)
    for leaf in leaves:
        if isinstance(leaf, int) and not isinstance(leaf, bool) and dtypes.is_int(target):
            scalar_in_range(leaf, target)
    value = np.array(obj)  # raises the ValueError JAX raises for ragged lists
    if dtype is not None and _is_text(value):
        return _as_array_leaf(value, dtype)
    if value.dtype.kind not in "biufc" and not dtypes.is_ml_dtype(value.dtype):
        raise TypeError(f"array: cannot make a numeric array from {obj!r}")
    return lax.convert_element_type(value, target)


def array(object, dtype=None, copy=True, order="K", ndmin=0, *, device=None):
    """An Array from an array, scalar or nested list, with JAX's dtype rules: Python scalars
    stay weakly typed; lists take the promotion of their elements, strongly typed; lists that
    hold tracers are stacked (so ``array([x, y])`` can be traced)."""
    del copy, device  # arrays are immutable and live on the one CPU device
    if order not in ("K", "A", "C", None):
        raise NotImplementedError(f"array: order={order!r} is not supported")
    dtype = _canonical_dtype(dtype, "array")
    leaves = _leaves(object)
    if any(leaf is None for leaf in leaves):
        raise ValueError("None is not a valid value for jnp.array")
    if not isinstance(object, (list, tuple)):
        out = _as_array_leaf(leaves[0], dtype)
    elif any(isinstance(leaf, (Array, Tracer, ExtendedArray)) for leaf in leaves):
        out = _from_nested(object, dtype or _list_dtype(leaves))
    else:
        out = _from_python(object, leaves, dtype)
    ndim = get_aval(out).ndim
    if ndmin > ndim:
        shape = (1,) * (ndmin - ndim) + get_aval(out).shape
        out = lax.broadcast_in_dim(out, shape, range(ndmin - ndim, ndmin))
    return out


def _as_array_leaf(obj, dtype):
    """An Array (or tracer) for a non-list value; NumPy values are strongly typed even when
    they subclass Python's float or int (``np.float64``)."""
    if dtype is not None and _is_text(obj):
        # Numbers written as text (``jnp.float32("1.5")``): NumPy parses them for a numeric
        # dtype, as JAX lets it.
        return Array(np.asarray(obj, dtype))
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.kind not in "biufc" and not dtypes.is_ml_dtype(obj.dtype):
            raise _not_numeric(obj, obj.dtype)
        return lax.convert_element_type(np.asarray(obj), dtype or dtypes.canonicalize(obj.dtype))
    if is_python_scalar(obj) and dtype is not None:  # check the range of the dtype asked for
        return Array(np.asarray(scalar_in_range(obj, dtype), dtype))
    if isinstance(obj, (Array, Tracer, ExtendedArray) + _SCALARS):
        out = to_array(obj)
        return out if dtype is None else lax.convert_element_type(out, dtype)
    if hasattr(obj, "__array__"):
        return _as_array_leaf(np.asarray(obj), dtype)
    raise TypeError(f"Value {obj!r} of type {type(obj).__name__} is not a valid JAX array "
                    "type. Only arrays of numeric types are supported by JAX.")


def _not_numeric(value, dtype):
    """JAX's error for a value of a dtype that is not numeric (text, objects)."""
    return TypeError(f"Value {value!r} with dtype {dtype} is not a valid JAX array type. "
                     "Only arrays of numeric types are supported by JAX.")


def _is_text(obj):
    """Whether ``obj`` is a string or bytes, or a NumPy array of them."""
    return isinstance(obj, (str, bytes)) or \
        isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in "SU"


def asarray(a, dtype=None, order=None, *, copy=None, device=None):
    """Like ``array``; arrays already of the right dtype are returned as they are."""
    return array(a, _canonical_dtype(dtype, "asarray"), copy=False, order=order or "K",
                 device=device)


def copy(a, order=None):
    """A copy of ``a`` (arrays are immutable, so the value itself); a list is refused, as in
    JAX (``array`` takes one)."""
    check_arraylike("copy", a)
    return array(a, copy=True, order=order or "K")


# --- filled arrays -------------------------------------------------------------------------

def _shape_argument(shape):
    """``shape`` as a tuple of ints; any 0-d value (an int, or a 0-d NumPy array or Array
    holding one) is a single dimension, as in JAX."""
    if not isinstance(shape, (tuple, list)) and np.ndim(shape) == 0:
        shape = (shape,)
    return canonical_shape(shape)


def full(shape, fill_value, dtype=None, *, device=None):
    """An array of ``shape`` filled with ``fill_value`` (which may be an array that
    broadcasts to ``shape``)."""
    shape = _shape_argument(shape)
    check_arraylike("full", fill_value)
    if isinstance(dtype, dtypes.ExtendedDType):  # typed keys: ``lax.full``'s
        return lax.full(shape, fill_value, dtype)
    fill = to_array(fill_value)
    if dtype is not None:
        fill = lax.convert_element_type(fill, dtypes.requested(dtype, "full"))
    return broadcast_to_shape(fill, shape)


def zeros(shape, dtype=None, *, device=None):
    """An array of zeros (float32 unless ``dtype`` says otherwise)."""
    return full(shape, 0, _canonical_dtype(dtype, "zeros") or dtypes.default_float())


def ones(shape, dtype=None, *, device=None):
    return full(shape, 1, _canonical_dtype(dtype, "ones") or dtypes.default_float())


empty = zeros


def full_like(a, fill_value, dtype=None, shape=None, *, device=None):
    """``full`` with ``a``'s shape and dtype (and weak type) unless given; of typed keys,
    ``lax.full_like``'s (keys whose words are ``fill_value``, or a key repeated)."""
    check_arraylike("full_like", a, fill_value)
    aval = get_aval(a)
    if isinstance(aval.dtype if dtype is None else dtype, dtypes.ExtendedDType):
        return lax.full_like(a, fill_value, dtype, shape)
    target = aval.shape if shape is None else _shape_argument(shape)
    if dtype is None:
        fill = lax.convert_element_type(to_array(fill_value), aval.dtype, aval.weak_type)
    else:
        fill = lax.convert_element_type(to_array(fill_value), dtypes.requested(dtype,
                                                                              "full_like"))
    return broadcast_to_shape(fill, target)


def zeros_like(a, dtype=None, shape=None, *, device=None):
    return full_like(a, 0, _canonical_dtype(dtype, "zeros_like"), shape)


def ones_like(a, dtype=None, shape=None, *, device=None):
    return full_like(a, 1, _canonical_dtype(dtype, "ones_like"), shape)


def empty_like(prototype, dtype=None, shape=None, *, device=None):
    """``zeros_like``: nbjax arrays are never left uninitialised (as JAX's)."""
    return zeros_like(prototype, dtype, shape, device=device)


# --- ranges --------------------------------------------------------------------------------

def concrete_argument(name, argname, x):
    if isinstance(x, Tracer):
        raise ConcretizationTypeError(
            f"jnp.{name} requires a concrete value for its argument {argname!r}, got a traced "
            f"array {x.aval.str_short()}. It arose in the jnp.{name} argument {argname!r}. "
            "Pass a Python number or mark the argument static.")
    return x


def arange(start, stop=None, step=None, dtype=None, *, device=None):
    """Evenly spaced values in ``[start, stop)``. Integers give the default int, any float
    the default float; the bounds must be concrete (not traced). Computed as JAX computes
    it, ``start + step * iota`` in ``dtype`` (float32 for narrower floats), so the values
    wrap around in a narrow integer type (``arange(-3, 3, dtype=uint8)`` starts at 253)."""
    for argname, x in (("start", start), ("stop", stop), ("step", step)):
        concrete_argument("arange", argname, x)
    bounds = [x for x in (start, stop, step) if x is not None]
    check_arraylike("arange", *bounds)
    if any(np.iscomplexobj(x) for x in bounds):
        raise ValueError("Passing complex start/stop/step to jnp.arange is no longer supported "
                         "starting in JAX v0.10.0.")
    dtype = _canonical_dtype(dtype, "arange") or result_type(*bounds)
    start, stop, step = (None if x is None else np.asarray(x).item() for x in (start, stop, step))
    if stop is None:
        start, stop = 0, start
    if step is None:
        values = lax.iota(dtype, max(0, int(np.ceil(stop - start))))
        return values if start == 0 else lax.add(lax.convert_element_type(start, dtype), values)
    working = dtypes.float32 if dtypes.is_float(dtype) and dtypes.finfo(dtype).bits < 32 \
        else dtype
    values = lax.iota(working, max(0, int(np.ceil((stop - start) / step))))
    values = lax.add(lax.convert_element_type(start, working),
                     lax.mul(lax.convert_element_type(step, working), values))
    return lax.convert_element_type(values, dtype)


def _linspace_parts(name, start, stop, num, dtype, axis):
    """``start``/``stop`` broadcast together in the dtype to compute in, the output shape,
    and the canonical sample ``axis``. The dtype is JAX's: the inexact type of ``dtype``
    when one is asked for (float32 for int32 and the narrow ints, float64 for int64, a
    float type itself, bfloat16 and the other narrow floats included), whatever
    ``start``/``stop`` are; else the inexact type of their promoted type."""
    num = operator.index(concrete_argument(name, "num", num))
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    check_arraylike(name, start, stop)
    if dtype is None:
        start, stop = util.promote_dtypes_inexact(start, stop)
        compute = get_aval(start).dtype
    else:
        start, stop = to_array(start), to_array(stop)
        compute = dtypes.to_inexact(dtypes.requested(dtype, name))
    shape = util.broadcast_shapes(get_aval(start).shape, get_aval(stop).shape, name=name)
    start, stop = (broadcast_to_shape(lax.convert_element_type(v, compute), shape)
                   for v in (start, stop))
    axis = util.canonicalize_axis(axis, len(shape) + 1)
    return start, stop, shape[:axis] + (num,) + shape[axis:], axis


def _along(v, out_shape, axis):
    """Repeat ``v`` along the new sample ``axis`` of ``out_shape``."""
    return lax.broadcast_in_dim(v, out_shape, [i for i in range(len(out_shape)) if i != axis])


def _finish(out, dtype):
    """The result, strongly typed; integer dtypes round down as JAX does."""
    if dtype is None:
        return lax.convert_element_type(out, get_aval(out).dtype)
    if dtypes.is_int(dtypes.canonicalize(dtype)):
        out = lax.floor(out)
    return lax.convert_element_type(out, dtype)


_UNROLLED = 33   # LLVM unrolls XLA's loop over at most this many samples (see _interpolate)


def _over(x, div):
    """``x / div`` as XLA computes a division by a constant: ``x`` times the reciprocal of
    ``div`` (first rounded to ``x``'s type), rounded to the type; a complex ``x`` has each
    part scaled, a narrow float's (bfloat16, float8) product is computed in float32."""
    dtype = get_aval(x).dtype
    if dtypes.is_ml_dtype(dtype):
        wide = lax.convert_element_type(x, np.float32)
        return lax.convert_element_type(_over(wide, float(np.array(div, dtype))), dtype)
    real = dtypes.finfo(dtype).dtype
    return lax.mul(x, scalar_like(x, np.array(1, real) / np.array(div, real)))


def _interpolate(start, stop, t_shape, axis, sizes, start_known):
    """The ``div`` samples ``start * (1 - t) + stop * t``, ``t = i / div``, as JAX 0.10's
    jitted linspace computes them on the CPU, so that the values are JAX's bit for bit
    rather than within an ulp (which, floored to an integer dtype, would be off by 1).
    XLA rewrites the division by the constant ``div`` as a multiplication by the rounded
    reciprocal ``c`` (``_over``); a scalar ``stop`` is reassociated, ``stop * (i * c)``
    becoming ``i * (stop * c)``; and LLVM contracts one multiply feeding the add into an
    fma: the second term's for scalar bounds (the first's at ``i = 1`` when the loop is
    unrolled, the multiplication by 1 folded away), a scalar ``start``, samples along the
    last axis or a complex type (each part), the first's when ``start`` has the bounds'
    shape or ``stop`` is a scalar, none when both are broadcast. (Seen in XLA's CPU
    output over many shapes; array bounds laid out otherwise, and complex types past 33
    samples, vectorize differently and may still differ by an ulp.) Narrow floats
    (bfloat16, float8) keep each operation rounded (XLA converts between them), so there
    is nothing to contract; nor is there for float16 on a CPU without AVX512-FP16, where
    LLVM computes each float16 operation in float32 and rounds it (``_fused``). ``sizes``:
    those of ``start`` and ``stop`` as given, and of the bounds. ``start_known``: ``start``
    is a constant when XLA compiles it (``pad_ramp``), so ``start * (1 - t)`` is folded and
    nothing is contracted at ``i = 1``."""
    dtype = get_aval(start).dtype
    div = t_shape[axis]
    i = lax.broadcasted_iota(dtypes.finfo(dtype).dtype, t_shape, axis)
    start_b, stop_b = _along(start, t_shape, axis), _along(stop, t_shape, axis)
    t = _over(i, div)
    rest = lax.sub(scalar_like(t, 1), t)
    if dtypes.is_ml_dtype(dtype):
        return lax.add(lax.mul(start_b, rest), lax.mul(stop_b, t))
    if dtypes.is_complex(dtype):
        return lax.complex(*(lax.fma(part(stop_b), t, lax.mul(part(start_b), rest))
                             for part in (lax.real, lax.imag)))
    start_size, stop_size, bounds_size = sizes
    fma = _fused(dtype)
    if stop_size == 1:
        stop_c = _along(_over(stop, div), t_shape, axis)
        if start_size != 1:
            return fma(start_b, rest, lax.mul(i, stop_c))
        out = fma(i, stop_c, lax.mul(start_b, rest))
        if div <= _UNROLLED and not start_known:
            index = lax.broadcasted_iota(dtypes.int32, t_shape, axis)
            at_one = fma(start_b, rest, stop_c)
            out = select_where(lax.eq(index, scalar_like(index, 1)), at_one, out)
        return out
    if start_size == 1 or axis == len(t_shape) - 1:
        return fma(stop_b, t, lax.mul(start_b, rest))
    if start_size == bounds_size:
        return fma(start_b, rest, lax.mul(stop_b, t))
    return lax.add(lax.mul(start_b, rest), lax.mul(stop_b, t))


def _fused(dtype):
    """``fma(a, b, c)`` as XLA's CPU code computes a multiply feeding an add in ``dtype``:
    fused, except for float16 on a CPU without native float16 arithmetic, where each
    operation is rounded (an AMD Zen 4 has AVX-512 but not AVX512-FP16)."""
    if dtype == np.float16 and not _native_float16():
        return lambda a, b, c: lax.add(lax.mul(a, b), c)
    return lax.fma


@functools.cache
def _native_float16():
    """Whether this CPU computes float16 natively (AVX512-FP16), as LLVM then does for XLA."""
    import llvmlite.binding as llvm  # (nbjax's compiler's; imported only when asked)
    return bool(llvm.get_host_cpu_features().get("avx512fp16"))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``num`` evenly spaced values from ``start`` to ``stop`` (included when ``endpoint``),
    as JAX 0.10 computes them, not NumPy's ``start + i * step``: with ``div = num - 1``
    (``num`` without the endpoint), ``start * (1 - t) + stop * t`` for ``t = i / div``,
    ``i < div``, rounded as XLA's CPU rounds it (``_interpolate``); with ``endpoint`` the
    last value is ``stop`` itself (appended). Integer dtypes take the floor, as JAX does.
    A single sample is ``start``; ``retstep``'s step is ``(stop - start) / div`` (by the
    reciprocal, ``_over``), and a scalar NaN when there is none (``num`` 0, or 1 with
    ``endpoint``), as in JAX. ``dtype`` sets the type computed in (``_linspace_parts``)."""
    return _linspace(start, stop, num, endpoint, retstep, dtype, axis, start_known=False)


def pad_ramp(end_value, edge, width, dtype, axis):
    """``linspace(end_value, edge, width, endpoint=False)``, as JAX's ``pad`` computes its
    ``linear_ramp``: ``end_value`` is a static argument there, so XLA compiles it as a
    constant (see ``_interpolate``)."""
    return _linspace(end_value, edge, width, False, False, dtype, axis, start_known=True)


def _linspace(start, stop, num, endpoint, retstep, dtype, axis, start_known):
    sizes = [int(np.prod(np.shape(v))) for v in (start, stop)]
    start, stop, shape, axis = _linspace_parts("linspace", start, stop, num, dtype, axis)
    compute = get_aval(start).dtype
    num = shape[axis]
    div = num - 1 if endpoint else num
    if num > 1:
        step = _over(lax.sub(stop, start), div)
        t_shape = shape[:axis] + (div,) + shape[axis + 1:]
        out = _interpolate(start, stop, t_shape, axis, sizes + [get_aval(start).size],
                           start_known)
        if endpoint:
            out = lax.concatenate([out, lax.expand_dims(stop, (axis,))], axis)
    else:
        out = _along(start, shape, axis) if num else lax.full(shape, 0, compute)
        if num == 1 and not endpoint:
            step = lax.sub(stop, start)
        else:
            step = lax.full((), np.nan, compute)
    out = _finish(out, dtype)
    if retstep:
        return out, step
    return out


def _space_parts(name, start, stop, num, dtype, axis):
    """``start``/``stop`` in the dtype JAX computes ``name`` in (as given, not broadcast),
    the result's dtype, and ``num`` and ``axis`` checked."""
    num = operator.index(concrete_argument(name, "num", num))
    axis = operator.index(concrete_argument(name, "axis", axis))
    check_arraylike(name, start, stop)
    start, stop = util.promote_dtypes_inexact(start, stop)
    dtype = get_aval(start).dtype if dtype is None else dtypes.requested(dtype, name)
    compute = dtypes.to_inexact(dtype)
    start, stop = (lax.convert_element_type(v, compute) for v in (start, stop))
    return start, stop, dtype, num, axis


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop)``, as JAX 0.10 computes it: the exponents in the
    inexact type of ``dtype`` (the bounds' when None), the power in their type promoted
    with ``base``'s, converted (truncated for integers) to ``dtype``."""
    start, stop, dtype, num, axis = _space_parts("logspace", start, stop, num, dtype, axis)
    exponents = linspace(start, stop, num, endpoint, axis=axis)
    return lax.convert_element_type(power(base, exponents), dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Values spaced evenly on a log scale from ``start`` to ``stop``, as JAX 0.10 computes
    them: ``sign(start) * logspace(log10(start / sign), log10(stop / sign))`` (so bounds of
    different signs, or a zero one, give NaNs, and complex bounds follow the logarithmic
    spiral), the end points rounded as the power rounds them, not pinned."""
    start, stop, dtype, num, axis = _space_parts("geomspace", start, stop, num, dtype, axis)
    sign = ufuncs.sign(start)
    res = ufuncs.multiply(sign, logspace(ufuncs.log10(ufuncs.divide(start, sign)),
                                         ufuncs.log10(ufuncs.divide(stop, sign)), num,
                                         endpoint, dtype=get_aval(start).dtype))
    axis = util.canonicalize_axis(axis, get_aval(res).ndim)
    perm = list(range(1, get_aval(res).ndim))
    perm.insert(axis, 0)
    return lax.convert_element_type(lax.transpose(res, perm), dtype)


# --- matrices and grids --------------------------------------------------------------------

def _diagonal_mask(name, N, M, k, compare):
    """``compare(col - row, k)`` over an ``N x M`` grid, built from iotas."""
    N = operator.index(concrete_argument(name, "N", N))
    M = N if M is None else operator.index(concrete_argument(name, "M", M))
    k = operator.index(concrete_argument(name, "k", k))
    if N < 0 or M < 0:
        raise ValueError(f"negative dimensions are not allowed, got ({N}, {M})")
    rows = lax.broadcasted_iota(dtypes.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (N, M), 1)
    # col - row lies in [-N + 1, M - 1]: a k beyond [-N, M] compares as the nearest bound,
    # which keeps it in int32 (eye(3, k=2**31) is all zeros, as in JAX, not an overflow).
    return compare(lax.sub(cols, rows), np.int32(builtins.min(builtins.max(k, -N), M)))


def eye(N, M=None, k=0, dtype=None, *, device=None):
    """An ``N x M`` matrix with ones on the ``k``-th diagonal."""
    mask = _diagonal_mask("eye", N, M, k, lax.eq)
    return lax.convert_element_type(mask, _canonical_dtype(dtype, "eye")
                                    or dtypes.default_float())


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """Ones at and below the ``k``-th diagonal."""
    mask = _diagonal_mask("tri", N, M, k, lax.le)
    return lax.convert_element_type(mask, _canonical_dtype(dtype, "tri")
                                    or dtypes.default_float())


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D vectors; ``xy`` swaps the first two output axes (Cartesian
    indexing), ``ij`` keeps them (matrix indexing); ``sparse`` leaves size-1 axes."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing!r}")
    check_arraylike("meshgrid", *xi)
    xi = [to_array(x) for x in xi]
    for x in xi:
        if get_aval(x).ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.meshgrid must be 1D, got shape "
                             f"{get_aval(x).shape}")
    sizes = [get_aval(x).shape[0] for x in xi]
    axes = list(range(len(xi)))
    if indexing == "xy" and len(xi) > 1:
        axes[0], axes[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for x, ax in zip(xi, axes):
        shape = tuple(d if i == ax or not sparse else 1 for i, d in enumerate(sizes))
        out.append(lax.broadcast_in_dim(x, shape, (ax,)))
    return out


# --- introspection -------------------------------------------------------------------------

def isscalar(element):
    """True for Python/NumPy scalars and rank-0 arrays (JAX counts those as scalars)."""
    if isinstance(element, _SCALARS + (np.generic,)):
        return True
    aval = getattr(element, "aval", None)
    return aval is not None and aval.ndim == 0


def ndim(a):
    return np.ndim(a) if not hasattr(a, "aval") else a.aval.ndim


def shape(a):
    return np.shape(a) if not hasattr(a, "aval") else a.aval.shape


def size(a, axis=None):
    s = shape(a)
    if axis is None:
        return int(np.prod(s, dtype=np.int64))
    return s[util.canonicalize_axis(axis, len(s))]


def iscomplexobj(x):
    """Whether ``x`` has a complex dtype (its values do not matter)."""
    if x is None:
        return False
    dtype = getattr(x, "dtype", None)
    return dtypes.is_complex(dtype if dtype is not None else np.asarray(x).dtype)


def isrealobj(x):
    return not iscomplexobj(x)


def iterable(y):
    """Whether ``iter(y)`` works."""
    try:
        iter(y)
    except TypeError:
        return False
    return True


def _window(name, M, terms):
    """The cosine-sum window ``sum_k a_k cos(2 pi k n / (M - 1))`` of ``M`` points."""
    M = int(concrete_argument(name, "M", M))
    if M <= 1:
        return full((max(M, 0),), 1.0, dtypes.default_float())
    n = arange(M, dtype=dtypes.default_float())
    out = zeros((M,), dtypes.default_float())
    for k, a in enumerate(terms):
        out = out + a * lax.cos(2 * np.pi * k * n / (M - 1))
    return out


def hanning(M):
    """The Hann window, ``0.5 - 0.5 cos(2 pi n / (M - 1))``."""
    return _window("hanning", M, (0.5, -0.5))


def hamming(M):
    """The Hamming window, ``0.54 - 0.46 cos(2 pi n / (M - 1))``."""
    return _window("hamming", M, (0.54, -0.46))


def blackman(M):
    """The Blackman window, ``0.42 - 0.5 cos(2 pi n / (M-1)) + 0.08 cos(4 pi n / (M-1))``."""
    return _window("blackman", M, (0.42, -0.5, 0.08))


def bartlett(M):
    """The triangular window, ``1 - |2 n / (M - 1) - 1|``."""
    M = int(concrete_argument("bartlett", "M", M))
    if M <= 1:
        return full((max(M, 0),), 1.0, dtypes.default_float())
    n = arange(M, dtype=dtypes.default_float())
    return 1 - lax.abs(2 * n / (M - 1) - 1)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-D ``x``: columns ``x**(N-1), ..., x, 1`` (or the
    reverse with ``increasing``)."""
    check_arraylike("vander", x)
    x = asarray(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    N = x.shape[0] if N is None else int(concrete_argument("vander", "N", N))
    if N < 0:
        raise ValueError("N must be nonnegative")
    powers = arange(N, dtype=x.dtype if dtypes.is_inexact(x.dtype) else None)
    if not increasing:
        powers = powers[::-1]
    return power(x[:, None], powers[None, :])


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function(*indices)`` where ``indices`` are the index grids of ``shape`` (as
    ``dtype``), evaluated once on whole arrays as NumPy does."""
    shape = canonical_shape(shape)
    dtype = dtypes.canonicalize(dtype)
    grids = [lax.broadcasted_iota(dtype, shape, i) for i in range(len(shape))]
    return function(*grids, **kwargs)


def kaiser(M, beta):
    """The Kaiser window ``i0(beta sqrt(1 - (2 n / (M - 1) - 1)**2)) / i0(beta)``."""
    M = int(concrete_argument("kaiser", "M", M))
    if M <= 1:
        return full((max(M, 0),), 1.0, dtypes.default_float())
    check_arraylike("kaiser", beta)
    n = arange(M, dtype=dtypes.default_float())
    alpha = (M - 1) / 2.0
    return i0(beta * lax.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(
        lax.convert_element_type(to_array(beta), dtypes.default_float()))


# --- printing and I/O: NumPy's, on the host ------------------------------------------------

array_repr, array_str = np.array_repr, np.array_str
get_printoptions, set_printoptions, printoptions = (np.get_printoptions, np.set_printoptions,
                                                    np.printoptions)
save, savez = np.save, np.savez


def _from_numpy_reader(np_fn):
    """A reader that returns an Array of what NumPy's ``np_fn`` reads. It runs on the host
    when called (reading a file or consuming an iterator is not something to trace), as JAX
    suggests with ``jnp.asarray(np.fromfile(...))``."""
    def fn(*args, **kwargs):
        return asarray(np_fn(*args, **kwargs))
    fn.__name__ = fn.__qualname__ = np_fn.__name__
    fn.__doc__ = f"``asarray(np.{np_fn.__name__}(...))``, read on the host when called."
    return fn


fromfile, fromiter = _from_numpy_reader(np.fromfile), _from_numpy_reader(np.fromiter)


def load(file, *args, **kwargs):
    """``np.load``, returning a saved array as an Array (an object array, or the archive of
    an ``.npz`` file, stays NumPy's, as in JAX)."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray) and out.dtype != object:
        return asarray(out)
    return out


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """The bytes of ``buffer`` read as a 1-D array of ``dtype``."""
    return asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    """The numbers written in ``string``, separated by ``sep`` (text mode only, as NumPy)."""
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


# JAX's keyword ``out_sharding`` on the functions that make arrays (None: an nbjax array is
# whole on one device; a sharding is refused).
for _name in ("array", "asarray", "arange", "empty", "full", "full_like", "ones", "ones_like",
              "zeros", "zeros_like"):
    globals()[_name] = takes_out_sharding(globals()[_name], _name)
del _name

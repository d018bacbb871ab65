"""Reductions: sums, extrema, statistics, cumulative sums and quantiles, as ``jnp`` has them.

Every reduction goes through ``_reduce``: it picks the dtype to compute in (small integers are
summed as the default int, as JAX does), masks ``where``-excluded elements with the
reduction's identity, calls one lax reduction primitive over the canonical axes, folds in
``initial`` and restores ``keepdims`` axes. The statistics build on it.
"""

import builtins

import numpy as np

from .. import lax
from ..core import dtypes, get_aval
from ..lax.reductions import highest, lowest
from ..lax.standard import scalar_like
from ..sharding import refuse_out_sharding
from . import ufuncs
from .array_api import diff
from .creation import asarray
from .manipulation import atleast_2d, concatenate, diagonal, moveaxis, ravel, reshape
from .manipulation import where as _where  # (``where`` is the reductions' mask parameter)
from .products import dot
from .util import (broadcast_to_shape, canonicalize_axes, canonicalize_axis, check_arraylike,
                   check_broadcast_to, filled_like, promote_dtypes, promote_dtypes_inexact,
                   select_where, to_array)

__all__ = [
    "sum", "prod", "mean", "var", "std", "min", "max", "amin", "amax", "argmin", "argmax",
    "all", "any", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "nancumsum",
    "nancumprod", "nansum", "nanprod", "nanmean", "nanmin", "nanmax", "nanvar", "nanstd",
    "nanargmin", "nanargmax", "median", "nanmedian", "quantile", "nanquantile", "percentile",
    "nanpercentile", "average", "count_nonzero", "ptp", "allclose", "array_equal",
    "array_equiv", "ediff1d", "trapezoid", "cov", "corrcoef", "gradient", "unwrap", "trace"]


def _asarray(name, a):
    check_arraylike(name, a)
    return to_array(a)


def _dtype(x):
    return get_aval(x).dtype


def _upcast_small_ints(dtype):
    """sum/prod accumulate bools and narrow integers in the default (u)int, as JAX does."""
    if dtypes.is_bool(dtype) or dtypes.is_signed_int(dtype):
        return dtypes.promote_types(dtype, dtypes.default_int())
    if dtypes.is_unsigned_int(dtype):
        return dtypes.promote_types(dtype, dtypes.default_uint())
    return dtype


def _mask(a, where, identity):
    """Replace ``where``-excluded elements by the reduction's identity: JAX's ``jnp.where``,
    so a mask that does not broadcast is its ValueError, and one with more (or longer) axes
    broadcasts ``a`` up to it."""
    if where is None:
        return a
    return _where(where, a, scalar_like(a, identity))


def _min_value(dtype):
    if dtypes.is_bool(dtype):
        return False
    return -np.inf if dtypes.is_inexact(dtype) else dtypes.iinfo(dtype).min


def _max_value(dtype):
    if dtypes.is_bool(dtype):
        return True
    return np.inf if dtypes.is_inexact(dtype) else dtypes.iinfo(dtype).max


# name -> (lax reduction, its identity for a dtype, how ``initial`` is combined)
_REDUCERS = {
    "sum": (lax.reduce_sum, lambda dtype: 0, lax.add),
    "prod": (lax.reduce_prod, lambda dtype: 1, lax.mul),
    "max": (lax.reduce_max, _min_value, lax.max),
    "min": (lax.reduce_min, _max_value, lax.min),
    "all": (lax.reduce_and, lambda dtype: True, lax.bitwise_and),
    "any": (lax.reduce_or, lambda dtype: False, lax.bitwise_or),
}
# lax sums and multiplies only numbers: a boolean sum is ``any``, a boolean product ``all``
# (JAX's rule, which NumPy's saturating ``True + True == True`` agrees with).
_BOOL_REDUCERS = {"sum": "any", "prod": "all"}


def _reduce(name, a, axis, keepdims, initial, where, dtype, has_identity=True):
    """The shared body of the reductions, reducing in (and returning) ``dtype``."""
    if dtypes.is_bool(dtype):
        name = _BOOL_REDUCERS.get(name, name)
    reduce_fn, identity_fn, combine = _REDUCERS[name]
    shape = get_aval(a).shape
    axes = canonicalize_axes(axis, len(shape))
    a = lax.convert_element_type(a, dtype)
    if initial is None and not has_identity:
        if where is not None:  # (checked first, as JAX does)
            raise ValueError(f"reduction operation {name} does not have an identity, so to "
                             "use a where mask one has to specify 'initial'")
        if builtins.any(shape[i] == 0 for i in axes):
            raise ValueError(f"zero-size array to reduction operation {name} which has no "
                             "identity")
    result = reduce_fn(_mask(a, where, identity_fn(dtype)), axes)
    if initial is not None:
        result = combine(result, lax.convert_element_type(initial, dtype))
    return lax.expand_dims(result, axes) if keepdims else result


def _out_unsupported(out):
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp reductions is not supported.")


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
        promote_integers=True):
    """Sum over ``axis``; bools and narrow integers are summed in the default (u)int."""
    _out_unsupported(out)
    a = _asarray("sum", a)
    compute = _sum_dtype(a, dtype, promote_integers)
    return _reduce("sum", a, axis, keepdims, initial, where, compute)


def _sum_dtype(a, dtype, promote_integers=True):
    """Without ``promote_integers`` narrow ints keep their type, but bools are still
    counted (in the default int: JAX makes them numbers first)."""
    if dtype is not None:
        return dtypes.requested(dtype, "sum")
    if promote_integers or dtypes.is_bool(_dtype(a)):
        return _upcast_small_ints(_dtype(a))
    return _dtype(a)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    """Product over ``axis``; bools and narrow integers multiply in the default (u)int."""
    _out_unsupported(out)
    a = _asarray("prod", a)
    compute = _sum_dtype(a, dtype, promote_integers)
    return _reduce("prod", a, axis, keepdims, initial, where, compute)


def _extremum(name):
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        _out_unsupported(out)
        a = _asarray(name, a)
        return _reduce(name, a, axis, keepdims, initial, where, _dtype(a), has_identity=False)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"The {name}imum over ``axis``; an empty reduction needs ``initial``, and "
                  "so does a ``where`` mask.")
    return fn


max = amax = _extremum("max")
min = amin = _extremum("min")


def _logical_reduction(name):
    def fn(a, axis=None, out=None, keepdims=False, *, where=None):
        _out_unsupported(out)
        a = ufuncs.to_bool(_asarray(name, a))
        return _reduce(name, a, axis, keepdims, None, where, dtypes.bool_)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Whether {name} elements along ``axis`` are true."
    return fn


all = _logical_reduction("all")
any = _logical_reduction("any")


def ptp(a, axis=None, out=None, keepdims=False):
    """Peak to peak: ``max - min`` along ``axis``."""
    a = _asarray("ptp", a)
    return lax.sub(max(a, axis, out, keepdims), min(a, axis, out, keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    """How many elements along ``axis`` are not zero (in the default int)."""
    a = _asarray("count_nonzero", a)
    return sum(ufuncs.to_bool(a), axis, dtypes.default_int(), keepdims=keepdims)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum along a diagonal (``sum(diagonal(...), axis=-1)``)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.trace is not supported.")
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)



# --- means and moments ---------------------------------------------------------------------

def _accumulation_dtype(dtype):
    """At least float32: float16 and bfloat16 sums of many terms overflow or lose digits.
    The 8-bit (and narrower) floats stay as they are, as in JAX: they promote with nothing."""
    inexact = dtypes.to_inexact(dtype)
    if inexact in dtypes.NARROW_FLOATS:
        return inexact
    return dtypes.promote_types(inexact, dtypes.float32)


def _computation_dtype(dtype):
    """The dtype a mean or variance in ``dtype`` is computed in: inexact types as
    ``_accumulation_dtype`` says, integer and bool types as they are (as JAX does)."""
    return _accumulation_dtype(dtype) if dtypes.is_inexact(dtype) else dtype


def _count(a, axis, keepdims, where, dtype):
    """How many elements each reduction sees (``where`` counts only selected ones)."""
    shape = get_aval(a).shape
    if where is None:
        axes = canonicalize_axes(axis, len(shape))
        n = np.prod([shape[i] for i in axes], dtype=np.int64)
        return lax.convert_element_type(int(n), dtype)
    where = to_array(where)
    check_broadcast_to(get_aval(where), shape)  # JAX's ValueError for a mask that does not fit
    return sum(broadcast_to_shape(where, shape), axis, dtype, keepdims=keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean; integers average as the default float (NaN for empty slices). An
    integer ``dtype`` casts the elements first and divides as integers, as NumPy and JAX do
    (the mean of ``[1.5, 2.5, 2.7]`` as int32 is ``(1 + 2 + 2) // 3``)."""
    _out_unsupported(out)
    a = _asarray("mean", a)
    compute = dtypes.requested(dtype, "mean") if dtype is not None else \
        dtypes.to_inexact(_dtype(a))
    accumulate = _computation_dtype(compute)
    count = _count(a, axis, keepdims, where, accumulate)  # (first: its error is JAX's)
    total = sum(a, axis, accumulate, keepdims=keepdims, where=where)
    return lax.convert_element_type(lax.div(total, count), compute)


_mean = mean  # (for ``var`` and the others, whose parameter ``mean`` hides the function)


def _resolve_ddof(ddof, correction):
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """Variance ``mean(|a - mean(a)|**2)`` with ``N - ddof`` in the denominator; the variance
    of complex numbers is real. ``mean``: the mean if already computed (with the reduced
    axes kept, as ``keepdims=True`` gives it)."""
    _out_unsupported(out)
    a = _asarray("var", a)
    ddof = _resolve_ddof(ddof, correction)
    out_dtype, compute = _var_dtypes(_dtype(a), dtype)
    a = lax.convert_element_type(a, compute)
    if mean is None:
        mean = _mean(a, axis, compute, keepdims=True, where=where)
    centered = lax.sub(a, lax.convert_element_type(_asarray("var", mean), compute))
    if dtypes.is_complex(compute):
        squares = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        squares = lax.mul(centered, centered)
    total = sum(squares, axis, _dtype(squares), keepdims=keepdims, where=where)
    count = _count(a, axis, keepdims, where, _dtype(total))
    normalizer = lax.sub(count, lax.convert_element_type(ddof, _dtype(count)))
    result = lax.convert_element_type(lax.div(total, normalizer), out_dtype)
    # JAX's rule (NumPy gives inf instead): no degrees of freedom left (ddof >= N) is NaN.
    return _where(lax.gt(normalizer, filled_like(normalizer, 0)), result, np.nan)


def _var_dtypes(a_dtype, dtype):
    """``var``'s result dtype and the dtype it computes in. Without ``dtype``: the input's
    inexact type, the result real. A given ``dtype`` is both, as in JAX: an integer one
    makes the mean an integer mean; a complex one gives the (real) variance as a complex
    number; a real one for complex elements is refused (JAX finds NumPy's meaning unclear:
    NumPy drops the imaginary parts)."""
    if dtype is None:
        compute = dtypes.to_inexact(a_dtype)
        out = dtypes.canonicalize(dtypes.finfo(compute).dtype) if dtypes.is_complex(compute) \
            else compute
        return out, _computation_dtype(compute)
    compute = dtypes.requested(dtype, "var")
    if dtypes.is_complex(a_dtype) and not dtypes.is_complex(compute):
        raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                         "computing the variance of an array of complex values. The semantics "
                         "of numpy.var seem unclear in this case. Please comment on "
                         "https://github.com/jax-ml/jax/issues/2283 if this behavior is "
                         "important to you.")
    return compute, _computation_dtype(compute)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """Standard deviation: the square root of ``var``. JAX refuses a ``dtype`` that is not
    inexact here (``var`` takes one: see ``_var_dtypes``)."""
    if dtype is not None and not dtypes.is_inexact(dtypes.canonicalize(dtype)):
        raise ValueError("dtype argument to jnp.std must be inexact; got "
                         f"{dtypes.canonicalize(dtype)}")
    return lax.sqrt(var(_asarray("std", a), axis, dtype, out, ddof, keepdims, where=where,
                        mean=mean, correction=correction))


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Weighted mean ``sum(a * w) / sum(w)``; ``returned`` also gives ``sum(w)``. 1-D weights
    apply along a single ``axis``."""
    a = _asarray("average", a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        total = _count(a, axis, keepdims, None, _dtype(avg))
    else:
        a, weights = promote_dtypes(a, _asarray("average", weights))
        a, weights = (lax.convert_element_type(v, dtypes.to_inexact(_dtype(v)))
                      for v in (a, weights))
        weights = _align_weights(a, weights, axis)
        total = sum(weights, axis, keepdims=keepdims)
        avg = lax.div(sum(lax.mul(a, weights), axis, keepdims=keepdims), total)
    return (avg, broadcast_to_shape(total, get_aval(avg).shape)) if returned else avg


def _align_weights(a, weights, axis):
    """Weights of ``a``'s shape, or 1-D along ``axis`` (placed on that axis)."""
    a_shape, w_shape = get_aval(a).shape, get_aval(weights).shape
    if w_shape == a_shape:
        return weights
    if axis is None:
        raise ValueError("Axis must be specified when shapes of a and weights differ.")
    if len(w_shape) != 1:
        raise ValueError("1D weights expected when shapes of a and weights differ.")
    axis = canonicalize_axis(axis, len(a_shape))
    if w_shape[0] != a_shape[axis]:
        raise ValueError("Length of weights not compatible with specified axis.")
    return lax.broadcast_in_dim(weights, a_shape, (axis,))


# --- arg-extrema ---------------------------------------------------------------------------

def _flatten(a):
    return lax.reshape(a, (get_aval(a).size,))


def _argextremum(name, lax_fn):
    def fn(a, axis=None, out=None, keepdims=None):
        _out_unsupported(out)
        a = _asarray(name, a)
        shape = get_aval(a).shape
        if axis is None:
            a, axis_c = _flatten(a), 0
        else:
            axis_c = canonicalize_axis(axis, len(shape))
        if get_aval(a).shape[axis_c] == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        result = lax_fn(a, axis_c, dtypes.default_int())
        if keepdims:
            axes = tuple(range(len(shape))) if axis is None else (axis_c,)
            result = lax.reshape(result, tuple(1 if i in axes else d
                                               for i, d in enumerate(shape)))
        return result
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Index of the first {name[3:]}imum along ``axis`` (of the flattened "
                  "array when ``axis`` is None); NaN counts as extreme.")
    return fn


argmax = _argextremum("argmax", lax.argmax)
argmin = _argextremum("argmin", lax.argmin)


# --- cumulative reductions -----------------------------------------------------------------

def _cumulative(name, lax_fn, a, axis, dtype, upcast_ints=False):
    """A running reduction; bools (and with ``upcast_ints`` narrow ints, as the array API's
    cumulative_sum does) accumulate in the default int."""
    a = _asarray(name, a)
    if dtype is not None and dtypes.is_bool(dtypes.canonicalize(dtype)):
        return _bool_cumulative(name, lax_fn, a, axis)
    if axis is None or (get_aval(a).ndim == 0 and get_aval(a).weak_type):
        a, axis = _flatten(a), 0 if axis is None else axis  # (JAX's: a Python scalar is 1-d)
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    if dtype is not None:
        out_dtype = dtypes.requested(dtype, name)
    elif dtypes.is_bool(_dtype(a)) or upcast_ints:
        out_dtype = _upcast_small_ints(_dtype(a))
    else:
        out_dtype = _dtype(a)
    a = lax.convert_element_type(a, out_dtype)
    return lax_fn(a, axis, reverse=False)


def _bool_cumulative(name, lax_fn, a, axis):
    """A running reduction into bools, as JAX computes it: lax accumulates only numbers, so
    the truth values accumulate as ints (values such as -1 and 1 would cancel), and a
    nonzero result is True."""
    counts = _cumulative(name, lax_fn, ufuncs.to_bool(a), axis, None)
    return lax.convert_element_type(counts, dtypes.bool_)


def cumsum(a, axis=None, dtype=None, out=None):
    """Running sum along ``axis`` (flattened when None); bools count in the default int."""
    _out_unsupported(out)
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    """Running product along ``axis`` (flattened when None)."""
    _out_unsupported(out)
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype)


def _cumulative_array_api(name, what, lax_fn, identity, x, axis, dtype, include_initial,
                          upcast_ints):
    x = _asarray(name, x)
    ndim = get_aval(x).ndim
    if ndim == 0:
        raise ValueError(f"The input must be non-scalar to take a {what}, however a scalar "
                         "value or scalar array was given.")
    if axis is None:
        if ndim > 1:
            raise ValueError(f"The input array has rank {ndim}, however axis was not set to "
                             "an explicit value. The axis argument is only optional for "
                             "one-dimensional arrays.")
        axis = 0
    axis = canonicalize_axis(axis, get_aval(x).ndim)
    result = _cumulative(name, lax_fn, x, axis, dtype, upcast_ints)
    if include_initial:
        shape = list(get_aval(result).shape)
        shape[axis] = 1
        start = lax.broadcast_in_dim(lax.convert_element_type(identity, _dtype(result)),
                                     tuple(shape), ())
        result = lax.concatenate([start, result], axis)
    return result


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API running sum; ``include_initial`` prepends the empty sum (zero). Narrow
    ints sum in the default int (the standard's rule, which JAX follows here only)."""
    return _cumulative_array_api("cumulative_sum", "cumulative sum", lax.cumsum, 0, x, axis,
                                 dtype, include_initial, True)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API running product; ``include_initial`` prepends the empty product (one).
    Ints keep their type, as JAX's (bools become the default int)."""
    return _cumulative_array_api("cumulative_prod", "cumulative product", lax.cumprod, 1, x,
                                 axis, dtype, include_initial, False)


# --- NaN-ignoring variants -----------------------------------------------------------------

def _replace_nan(a, value):
    a = to_array(a)
    if not dtypes.is_inexact(_dtype(a)):
        return a
    return select_where(ufuncs.isnan(a), filled_like(a, value), a)


def _not_nan(a):
    return ufuncs.logical_not(ufuncs.isnan(a))


def _and_where(mask, where):
    """``mask & where`` by ``jnp.where``, whose error for shapes that do not broadcast is the
    one JAX's NaN-ignoring statistics give."""
    return mask if where is None else _where(where, mask, False)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``sum`` treating NaN as zero."""
    a = _asarray("nansum", a)
    return sum(_replace_nan(a, 0), axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``prod`` treating NaN as one."""
    a = _asarray("nanprod", a)
    return prod(_replace_nan(a, 1), axis, dtype, out, keepdims, initial, where)


def nancumsum(a, axis=None, dtype=None, out=None):
    return cumsum(_replace_nan(_asarray("nancumsum", a), 0), axis, dtype, out)


def nancumprod(a, axis=None, dtype=None, out=None):
    return cumprod(_replace_nan(_asarray("nancumprod", a), 1), axis, dtype, out)


def _nan_extremum(name, reduce_fn, fill):
    """``reduce_fn`` ignoring NaNs: each replaced by ``fill(dtype)``, the reduction's
    identity (the least finite value of a float type without infinities, as JAX)."""
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        a = _asarray(name, a)
        result = reduce_fn(_replace_nan(a, fill(_dtype(a))), axis, out, keepdims, initial,
                           where)
        if not dtypes.is_inexact(_dtype(a)) or initial is not None:  # initial is not NaN
            return result
        all_nan = all(ufuncs.isnan(a), axis, keepdims=keepdims)
        return select_where(all_nan, filled_like(result, np.nan), result)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``{name[3:]}`` ignoring NaNs (NaN only where a slice is all NaN and "
                  "there is no ``initial``).")
    return fn


nanmax = _nan_extremum("nanmax", max, lowest)
nanmin = _nan_extremum("nanmin", min, highest)


def _nan_argextremum(name, arg_fn, fill):
    def fn(a, axis=None, out=None, keepdims=None):
        a = _asarray(name, a)
        result = arg_fn(_replace_nan(a, fill(_dtype(a))), axis, out, keepdims)
        if not dtypes.is_inexact(_dtype(a)):
            return result
        all_nan = all(ufuncs.isnan(a), axis, keepdims=bool(keepdims))
        return select_where(all_nan, filled_like(result, -1), result)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name[3:]}`` ignoring NaNs; -1 for an all-NaN slice (as JAX)."
    return fn


nanargmax = _nan_argextremum("nanargmax", argmax, lowest)
nanargmin = _nan_argextremum("nanargmin", argmin, highest)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """``mean`` of the non-NaN elements."""
    a = _asarray("nanmean", a)
    if not dtypes.is_inexact(_dtype(a)):
        return mean(a, axis, dtype, out, keepdims, where=where)
    return mean(a, axis, dtype, out, keepdims, where=_and_where(_not_nan(a), where))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None,
           *, correction=None):
    """``var`` of the non-NaN elements. The NaNs are also replaced by zeros: ``where`` alone
    would leave them in ``(a - mean)**2``, whose derivative (NaN * 0) poisons the gradient.
    An integer ``dtype`` is the result's, as in JAX (``var``'s NaN guard makes it a float)."""
    a = _asarray("nanvar", a)
    if dtypes.is_inexact(_dtype(a)):
        where = _and_where(_not_nan(a), where)
        a = _replace_nan(a, 0)
    result = var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                 correction=correction)
    if dtype is None:
        return result
    return lax.convert_element_type(result, _var_dtypes(_dtype(a), dtype)[0])


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None,
           *, correction=None):
    """``std`` of the non-NaN elements."""
    return lax.sqrt(nanvar(_asarray("nanstd", a), axis, dtype, out, ddof, keepdims, where, mean,
                           correction=correction))


# --- quantiles -----------------------------------------------------------------------------

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _move_axes_last(a, axis):
    """``a`` with the ``axis`` axes merged into one last axis (all axes when None)."""
    shape = get_aval(a).shape
    axes = canonicalize_axes(axis, len(shape))
    rest = [i for i in range(len(shape)) if i not in axes]
    a = lax.transpose(a, tuple(rest) + axes)
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    return lax.reshape(a, tuple(shape[i] for i in rest) + (n,)), axes


def _pick(sorted_a, index):
    """``sorted_a[..., index]`` for an index array shaped ``q + rest + (1,)``: a select-sum
    over the last axis, which needs no gather."""
    n = get_aval(sorted_a).shape[-1]
    shape = get_aval(index).shape[:-1] + (n,)
    positions = lax.broadcasted_iota(_dtype(index), shape, len(shape) - 1)
    hit = lax.eq(positions, broadcast_to_shape(index, shape))
    values = broadcast_to_shape(sorted_a, shape)
    return lax.reduce_sum(select_where(hit, values, filled_like(values, 0)), (len(shape) - 1,))


def _interpolate(method, sorted_a, pos):
    """The value at fractional position ``pos`` (shaped ``q + rest + (1,)``) of each sorted
    slice, as ``method`` says to combine its two neighbours."""
    low, high = lax.floor(pos), lax.ceil(pos)
    if method == "nearest":  # (halfway: the lower one, as JAX; NumPy's rounds to even)
        low = high = lax.select(lax.le(lax.sub(pos, low), scalar_like(pos, 0.5)), low, high)
    index_dtype = dtypes.default_int()
    low_v = _pick(sorted_a, lax.convert_element_type(low, index_dtype))
    high_v = _pick(sorted_a, lax.convert_element_type(high, index_dtype))
    if method in ("lower", "nearest"):
        return low_v
    if method == "higher":
        return high_v
    if method == "midpoint":
        return lax.mul(lax.add(low_v, high_v), scalar_like(low_v, 0.5))
    frac = lax.reshape(lax.sub(pos, low), get_aval(low_v).shape)
    return lax.add(lax.mul(low_v, lax.sub(scalar_like(frac, 1), frac)), lax.mul(high_v, frac))


def _inverted_cdf(sorted_a, sorted_weights, q, pos_shape):
    """The first sorted value whose cumulative weight reaches the fraction ``q`` of the
    slice's total: the inverse of the (weighted) empirical distribution function."""
    cumulative = cumsum(sorted_weights, -1)
    total = lax.slice_in_dim(cumulative, get_aval(cumulative).shape[-1] - 1, None, axis=-1)
    target = lax.mul(lax.broadcast_in_dim(q, pos_shape, range(get_aval(q).ndim)),
                     broadcast_to_shape(total, pos_shape))
    n = get_aval(sorted_a).shape[-1]
    below = sum(lax.lt(broadcast_to_shape(cumulative, pos_shape[:-1] + (n,)),
                       broadcast_to_shape(target, pos_shape[:-1] + (n,))),
                -1, dtypes.default_int(), keepdims=True)
    return _pick(sorted_a, lax.min(below, filled_like(below, n - 1)))


def _quantile(name, a, q, axis, method, keepdims, ignore_nan, weights=None):
    """Sort the reduced axes (merged into one, last), find each quantile's position among
    the slice's valid elements, and interpolate (``inverted_cdf``: walk the cumulative
    ``weights``); slices with NaNs (all NaNs when ``ignore_nan``) give NaN, and so do
    negative weights."""
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"{method} doesn't support weights. Only method "
                                  "'inverted_cdf' supports weights.")
    a, q = _asarray(name, a), _asarray(name, q)
    if dtypes.is_complex(_dtype(a)):
        raise ValueError(f"{name} does not support complex input, as the operation is "
                         "poorly defined.")
    dtype = dtypes.to_inexact(_dtype(a))  # (q's type does not matter, as in JAX)
    a, q = (lax.convert_element_type(v, dtype) for v in (a, q))
    if get_aval(q).ndim > 1:
        raise ValueError(f"{name}: q must be a scalar or 1-D, got shape {get_aval(q).shape}")
    flat, axes = _move_axes_last(a, axis)
    *rest, n = get_aval(flat).shape
    rest = tuple(rest)
    nan = ufuncs.isnan(flat)
    if method == "inverted_cdf":
        weights = filled_like(a, 1) if weights is None else lax.convert_element_type(
            _align_weights(a, _asarray(name, weights), axis), dtype)
        flat_weights, _ = _move_axes_last(weights, axis)
        flat_weights = select_where(nan, filled_like(flat_weights, 0), flat_weights)
        sorted_a, sorted_weights = lax.sort((flat, flat_weights), dimension=len(rest),
                                            num_keys=1)
        q_shape = get_aval(q).shape
        result = _inverted_cdf(sorted_a, sorted_weights, q, q_shape + rest + (1,))
        negative = lax.reduce_or(lax.lt(flat_weights, filled_like(flat_weights, 0)),
                                 (len(rest),))
        return _finish_quantile(result, nan, negative, q_shape, rest, a, axes, keepdims,
                                ignore_nan)
    sorted_a = lax.sort(flat, dimension=len(rest))  # NaNs sort last, after the valid values
    if ignore_nan:
        count = sum(ufuncs.logical_not(nan), -1, dtype, keepdims=True)
    else:
        count = lax.broadcast_in_dim(lax.convert_element_type(n, dtype), rest + (1,), ())
    q_shape = get_aval(q).shape
    pos_shape = q_shape + rest + (1,)
    last = lax.sub(broadcast_to_shape(count, pos_shape), scalar_like(count, 1))
    pos = lax.mul(lax.broadcast_in_dim(q, pos_shape, range(len(q_shape))),
                  lax.max(last, filled_like(last, 0)))
    result = _interpolate(method, sorted_a, pos)
    return _finish_quantile(result, nan, None, q_shape, rest, a, axes, keepdims, ignore_nan)


def _finish_quantile(result, nan, invalid, q_shape, rest, a, axes, keepdims, ignore_nan):
    """NaN for the slices with NaNs (all NaNs when ``ignore_nan``), with no values (as
    NumPy's median) or ``invalid``, and the reduced axes kept if asked."""
    no_values = get_aval(nan).shape[-1] == 0  # (reduce_and of nothing: True)
    with_nan = (lax.reduce_and if ignore_nan or no_values else lax.reduce_or)(nan, (len(rest),))
    invalid = with_nan if invalid is None else lax.bitwise_or(with_nan, invalid)
    invalid = broadcast_to_shape(invalid, q_shape + rest)
    result = select_where(invalid, filled_like(result, np.nan), result)
    if keepdims:
        shape = get_aval(a).shape
        result = lax.reshape(result, q_shape + tuple(1 if i in axes else d
                                                     for i, d in enumerate(shape)))
    return result


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """The ``q``-th quantiles (q in [0, 1]) along ``axis``; the result has ``q``'s shape in
    front. Any NaN in a slice makes its quantile NaN. ``weights`` (of ``a``'s shape, or 1-D
    along ``axis``) weigh the elements, with ``method="inverted_cdf"`` only."""
    _out_unsupported(out)
    return _quantile("quantile", a, q, axis, interpolation or method, keepdims, False,
                     weights)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    """``quantile`` of the non-NaN elements."""
    _out_unsupported(out)
    return _quantile("nanquantile", a, q, axis, interpolation or method, keepdims, True,
                     weights)


def _percent(q):
    return ufuncs.true_divide(q, 100)  # keeps a Python scalar's weak type


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, out_sharding=None, interpolation=None):
    """``quantile`` with ``q`` in percent (JAX's quantile takes no ``out_sharding``)."""
    if out_sharding is not None:
        refuse_out_sharding("jnp.percentile", out_sharding)
    return quantile(a, _percent(q), axis, out, overwrite_input, method, keepdims,
                    weights=weights, interpolation=interpolation)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    return nanquantile(a, _percent(q), axis, out, overwrite_input, method, keepdims,
                       weights=weights, interpolation=interpolation)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The middle value (mean of the two middle values for even counts)."""
    return quantile(_asarray("median", a), 0.5, axis, out, overwrite_input, "midpoint",
                    keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return nanquantile(_asarray("nanmedian", a), 0.5, axis, out, overwrite_input, "midpoint",
                       keepdims)


# --- whole-array comparisons ---------------------------------------------------------------

def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element pair is ``isclose``."""
    return all(ufuncs.isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """Same shape and equal elements (NaNs equal with ``equal_nan``). Lists are taken, as
    by ``asarray`` (JAX's does too)."""
    a1, a2 = asarray(a1), asarray(a2)
    if get_aval(a1).shape != get_aval(a2).shape:
        return to_array(False)
    equal = ufuncs.equal(a1, a2)
    if equal_nan:
        equal = ufuncs.logical_or(equal, ufuncs.logical_and(ufuncs.isnan(a1),
                                                            ufuncs.isnan(a2)))
    return all(equal)


def array_equiv(a1, a2):
    """Equal elements after broadcasting (False when the shapes do not broadcast). Lists are
    taken, as by ``asarray``."""
    a1, a2 = asarray(a1), asarray(a2)
    try:
        return all(ufuncs.equal(a1, a2))
    except ValueError:
        return to_array(False)


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened ``ary``, with ``to_begin`` and
    ``to_end`` (flattened, cast to its dtype) around them."""
    check_arraylike("ediff1d", ary, *(a for a in (to_begin, to_end) if a is not None))
    flat = ravel(ary)
    dtype = get_aval(flat).dtype
    parts = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        parts.insert(0, ravel(lax.convert_element_type(to_array(to_begin), dtype)))
    if to_end is not None:
        parts.append(ravel(lax.convert_element_type(to_array(to_end), dtype)))
    return concatenate(parts)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoidal rule along ``axis``: sum of ``(y[i] + y[i+1]) / 2`` times the spacing
    (``dx``, or the differences of ``x``)."""
    check_arraylike("trapezoid", y)
    if x is None:
        (y,), spacing = promote_dtypes_inexact(y), dx
    else:
        check_arraylike("trapezoid", x)
        y, x = promote_dtypes_inexact(y, x)
        x = moveaxis(x, axis, -1) if get_aval(x).ndim > 1 else x
        spacing = x[..., 1:] - x[..., :-1]
    y = moveaxis(y, axis, -1)
    return sum(spacing * (y[..., 1:] + y[..., :-1]), axis=-1) * 0.5


# --- covariance, numerical derivatives, phase unwrapping -----------------------------------

def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """The covariance matrix of the variables in the rows (columns if not ``rowvar``) of
    ``m`` (and ``y``), with frequency and reliability weights, as NumPy computes it."""
    check_arraylike("cov", m, *(a for a in (y, fweights, aweights) if a is not None))
    if get_aval(m).ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    (x,) = promote_dtypes_inexact(atleast_2d(m))
    if dtype is not None:
        x = lax.convert_element_type(x, dtype)
    if not rowvar and get_aval(x).shape[0] != 1:
        x = x.T
    if get_aval(x).shape[0] == 0:
        return lax.full((0, 0), 0, get_aval(x).dtype)
    if y is not None:
        if get_aval(y).ndim > 2:
            raise ValueError("y has more than 2 dimensions")
        y = atleast_2d(y)
        if not rowvar and get_aval(y).shape[0] != 1:
            y = y.T
        x = concatenate([x, y], axis=0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    w = _cov_weights(fweights, aweights, get_aval(x).shape[1])
    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    if w is None:
        f = w_sum - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = w_sum - ddof
    else:
        f = w_sum - ddof * sum(w * to_array(aweights)) / w_sum
    x = x - avg[:, None]
    x_w = x if w is None else x * w
    c = dot(x, ufuncs.conj(x_w).T) / f
    return lax.squeeze(c, tuple(i for i, d in enumerate(get_aval(c).shape) if d == 1))


def _cov_weights(fweights, aweights, n):
    """The product of the frequency and reliability weights (None when neither is given)."""
    w = None
    for name, weights in (("fweights", fweights), ("aweights", aweights)):
        if weights is None:
            continue
        weights = to_array(weights)
        if get_aval(weights).ndim > 1:
            raise RuntimeError(f"cannot handle multidimensional {name}")
        if get_aval(weights).shape[0] != n:
            raise RuntimeError(f"incompatible numbers of samples and {name}")
        if name == "fweights" and not dtypes.is_int(get_aval(weights).dtype):
            raise TypeError("fweights must be integer.")
        w = weights if w is None else w * weights
    return w


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """The correlation coefficients ``cov[i, j] / sqrt(cov[i, i] cov[j, j])``, their real
    parts clipped to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if get_aval(c).ndim == 0:
        return c / c  # a single variable: 1 (NaN for a constant one), as NumPy
    stddev = lax.sqrt(ufuncs.real(diagonal(c)))
    c = c / stddev[:, None] / stddev[None, :]
    clipped = ufuncs.clip(ufuncs.real(c), -1, 1)
    if dtypes.is_complex(get_aval(c).dtype):
        return lax.complex(clipped, ufuncs.clip(ufuncs.imag(c), -1, 1))
    return clipped


def _gradient_along_axis(a, h, axis):
    """Central differences inside, one-sided at the two ends, for a scalar spacing or the
    coordinates ``h`` of the points along ``axis`` (second-order accurate, as NumPy)."""

    def sliced(x, start, stop):
        return lax.slice_in_dim(x, start, stop, axis=axis)
    n = get_aval(a).shape[axis]
    upper = sliced(a, 1, 2) - sliced(a, 0, 1)
    lower = sliced(a, n - 1, n) - sliced(a, n - 2, n - 1)
    if get_aval(h).ndim == 0:
        inner = (sliced(a, 2, n) - sliced(a, 0, n - 2)) * 0.5 / h
        upper, lower = upper / h, lower / h
    elif get_aval(h).ndim == 1:
        if get_aval(h).shape[0] != n:
            raise ValueError("Spacing arrays must have the same length as the dimension along "
                             "which the gradient is calculated.")
        h = reshape(h, [n if i == axis else 1 for i in range(get_aval(a).ndim)])
        upper = upper / (sliced(h, 1, 2) - sliced(h, 0, 1))
        lower = lower / (sliced(h, n - 1, n) - sliced(h, n - 2, n - 1))
        dx1 = sliced(h, 1, n - 1) - sliced(h, 0, n - 2)
        dx2 = sliced(h, 2, n) - sliced(h, 1, n - 1)
        inner = (-dx2 / (dx1 * (dx1 + dx2)) * sliced(a, 0, n - 2)
                 + (dx2 - dx1) / (dx1 * dx2) * sliced(a, 1, n - 1)
                 + dx1 / (dx2 * (dx1 + dx2)) * sliced(a, 2, n))
    else:
        raise ValueError("Spacing arrays must be 1D arrays or scalars.")
    return concatenate((upper, inner, lower), axis=axis)


def gradient(f, *varargs, axis=None, edge_order=None):
    """The numerical derivative of ``f`` along each axis in ``axis`` (all by default), with
    a scalar spacing or the points' coordinates per axis (a list of arrays, or one array
    when there is one axis). ``edge_order=2`` is not supported, as in JAX."""
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    check_arraylike("gradient", f, *varargs)
    a, *spacing = promote_dtypes_inexact(f, *varargs)
    axes = canonicalize_axes(axis, get_aval(a).ndim)
    if not axes or builtins.min(get_aval(a).shape[ax] for ax in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "(edge_order + 1) elements are required.")
    if not spacing:
        spacing = [1.0] * len(axes)
    elif len(spacing) == 1:
        spacing = spacing * len(axes)
    elif len(spacing) != len(axes):
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    grads = [_gradient_along_axis(a, to_array(h), ax) for ax, h in zip(axes, spacing)]
    return grads[0] if len(axes) == 1 else grads


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """``p`` with jumps between neighbours larger than ``discont`` (``period / 2`` by
    default) along ``axis`` removed by adding multiples of ``period``."""
    check_arraylike("unwrap", p)
    p, period = promote_dtypes_inexact(p, period)
    axis = canonicalize_axis(axis, get_aval(p).ndim)
    discont = period / 2 if discont is None else discont
    interval = period / 2
    dd = diff(p, axis=axis)
    ddmod = ufuncs.remainder(dd + interval, period) - interval
    ddmod = select_where(ufuncs.logical_and(ddmod == -interval, dd > 0), interval, ddmod)
    correction = select_where(ufuncs.abs(dd) < discont, 0, ddmod - dd)
    n = get_aval(p).shape[axis]
    if n == 0:
        return p
    return concatenate((lax.slice_in_dim(p, 0, 1, axis=axis),
                        lax.slice_in_dim(p, 1, n, axis=axis) + cumsum(correction, axis=axis)),
                       axis=axis)

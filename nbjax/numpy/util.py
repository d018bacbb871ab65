"""Shared helpers of the NumPy layer: argument checks, dtype and shape promotion, axes."""

import functools
import operator
import warnings

import numpy as np

from .. import lax
from ..config import config
from ..core import (Array, ConcretizationTypeError, ExtendedArray, ShapedArray, Tracer, dtypes,
                    get_aval, valid_value)
from ..core.array import host_result, scalar_in_range, to_numpy
from ..core.errors import unavailable
from ..core.trace import is_python_scalar
from ..lax.standard import IncompatibleShapesError, accumulation_dtype, as_array
from ..lax.standard import broadcast_shapes as lax_broadcast_shapes  # equal ranks only

_SCALARS = (bool, int, float, complex)


def check_arraylike(name, *args, first=0):
    """Raise JAX's TypeError unless every argument is an array, tracer, NumPy value or
    scalar (``first``: the position of ``args[0]`` among the function's arguments, which
    the message names)."""
    for i, a in enumerate(args, first):
        if not valid_value(a) or isinstance(a, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at "
                            f"position {i}.")


to_array = as_array  # the name the numpy modules use


def result_type(*args):
    """``(dtype, weak_type)`` of promoting array-likes and dtypes together, as JAX does.
    The Python types ``int``, ``float`` and ``complex`` stand for their values, so they are
    weak: ``result_type(float16, float)`` is float16."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    pairs = []
    for a in args:
        if isinstance(a, (np.dtype, type, str)) and not isinstance(a, _SCALARS):
            pairs.append((dtypes.canonicalize(a), a is int or a is float or a is complex))
        else:
            aval = get_aval(a)
            pairs.append((aval.dtype, aval.weak_type))
    result = dtypes.promote(*pairs)
    dtypes.check_strict_promotion(pairs, result)
    return result


def promote_dtypes(*args):
    """Convert operands to their common dtype (weak only if every operand is weak)."""
    dtype, weak = result_type(*args)
    return [_converted(a, dtype, weak) for a in args]


def promote_dtypes_inexact(*args):
    """Like promote_dtypes, then integers and bools become floats (``jnp.sin``;
    ``dtypes.to_inexact``)."""
    dtype, weak = result_type(*args)
    dtype = dtypes.to_inexact(dtype, weak)
    return [_converted(a, dtype, weak) for a in args]


def _converted(x, dtype, weak):
    """``x`` as an array of the canonical ``dtype``: itself when it is one already (most
    operands of a promotion; ``convert_element_type`` would canonicalize ``dtype`` again
    to find that out). A Python scalar of ``dtype``'s kind (``x + 1.0``, ``x > 0``), or an
    int that ``dtype`` holds exactly (``1 / x``), is made at ``dtype`` and ``weak`` at once
    (the same value), rather than made weak and then converted; so is a NumPy scalar of
    ``dtype`` (``w[i, j] * x``, ``w`` a NumPy array), without the checks of ``to_array``."""
    if is_python_scalar(x):
        own = dtypes.python_scalar_dtype(x)[0]
        if own == dtype or type(x) is int and _holds_exactly(dtype, scalar_in_range(x, own)):
            return _scalar_array(scalar_in_range(x, dtype), dtype, weak)
    elif isinstance(x, np.generic) and x.dtype == dtype and not weak:
        return _scalar_array(x, dtype, weak)
    x = to_array(x)
    aval = get_aval(x)
    if aval.dtype == dtype and aval.weak_type == weak:
        return x
    return lax.convert_element_type(x, dtype, weak_type=weak)


def _scalar_array(value, dtype, weak):
    value = np.array(value, dtype)
    value.flags.writeable = False
    return host_result(value, ShapedArray((), dtype, weak))


def _holds_exactly(dtype, n):
    """Whether ``dtype`` represents the int ``n`` exactly (a float: every int up to
    ``|n|``), so that converting ``n`` from the default int to it changes nothing."""
    if dtypes.is_int(dtype):
        info = dtypes.iinfo(dtype)
        return info.min <= n <= info.max
    return dtypes.is_float(dtype) and abs(n) <= 2 ** (dtypes.finfo(dtype).nmant + 1)


def broadcast_shapes(*shapes, name="broadcast_shapes"):
    """NumPy broadcasting of shapes: lax's rule (equal ranks, size-1 axes stretch) after
    padding the ranks; IncompatibleShapesError (a TypeError) naming both shapes."""
    shapes = [tuple(s) for s in shapes]
    rank = max((len(s) for s in shapes), default=0)
    try:
        return lax_broadcast_shapes(name, *((1,) * (rank - len(s)) + s for s in shapes))
    except IncompatibleShapesError:
        raise IncompatibleShapesError(
            f"{name}: incompatible shapes for broadcasting: "
            f"{' and '.join(map(str, shapes))}.") from None


def promote_shapes(name, *args):
    """Give operands equal rank (leading size-1 axes); lax broadcasts size-1 axes itself."""
    shapes = [get_aval(a).shape for a in args]
    if len({s for s in shapes if s}) <= 1:  # one shape and scalars (most): nothing to do
        return list(args)
    broadcast_shapes(*shapes, name=name)  # raises on mismatch, naming the function
    ranks = {len(s) for s in shapes if s}
    if len(ranks) <= 1:
        return list(args)
    _rank_promotion(name, shapes)
    rank = max(ranks)
    return [a if not get_aval(a).shape else lax.broadcast_to_rank(a, rank) for a in args]


def _rank_promotion(name, shapes):
    """``config.numpy_rank_promotion``: ``"warn"`` or ``"raise"`` when operands of different
    non-zero ranks are broadcast together."""
    mode = config.numpy_rank_promotion
    if mode == "allow":
        return
    listed = " ".join(map(str, shapes))
    note = "For more information, see https://docs.jax.dev/en/latest/rank_promotion_warning.html."
    if mode == "raise":
        raise ValueError(f"Operands could not be broadcast together for {name} on shapes "
                         f"{listed} and with the config option "
                         f"jax_numpy_rank_promotion='raise'. {note}")
    warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {listed}. "
                  "Set the jax_numpy_rank_promotion config option to 'allow' to disable "
                  f"this warning; for more information, see "
                  "https://docs.jax.dev/en/latest/rank_promotion_warning.html.", stacklevel=4)


def promote_args(name, *args):
    """Check, promote dtypes and ranks: the preamble of every binary ``jnp`` function."""
    promoted = _promoted_simply(args, inexact=False)
    if promoted is not None:
        return promoted
    check_arraylike(name, *args)
    check_keys(name, args)
    return promote_shapes(name, *promote_dtypes(*args))


def promote_args_inexact(name, *args):
    promoted = _promoted_simply(args, inexact=True)
    if promoted is not None:
        return promoted
    check_arraylike(name, *args)
    check_keys(name, args)
    return promote_shapes(name, *promote_dtypes_inexact(*args))


def check_keys(name, args):
    """JAX's TypeError for typed keys among operands of another dtype (``keys == 0``); keys
    of one dtype go on to the primitive, which compares them or refuses them."""
    if any(isinstance(a, ExtendedArray) for a in args):
        dts = [get_aval(a).dtype for a in args]
        if any(d != dts[0] for d in dts):
            raise TypeError(f"{name} does not accept dtypes "
                            f"{', '.join(map(dtypes.name, dts))}.")


def _promoted_simply(args, inexact):
    """What promotion returns for the common operands, at a fraction of its full cost, or
    None: arrays or tracers of one type (shape, dtype, weak type), with Python numbers
    (``x * 2.0``) or NumPy scalars of that dtype, where that type is the promoted one
    (``inexact``: and is a float or complex type). The arrays are then returned as they are
    and the scalars converted (rank 0: no broadcast); no strict-promotion error can arise
    (Python bools, strong, are left to the full promotion). Nearly every traced operation
    promotes its operands, so this case is told apart first."""
    aval, scalar_pairs = None, []
    for a in args:
        if isinstance(a, (Array, Tracer)):
            if aval is None:
                aval = a.aval
            elif a.aval is not aval and a.aval != aval:
                return None
        elif is_python_scalar(a) and type(a) is not bool:
            scalar_pairs.append(dtypes.python_scalar_dtype(a))
        elif isinstance(a, np.generic):
            scalar_pairs.append((dtypes.canonicalize(a.dtype), False))
        else:
            return None
    if aval is None or (inexact and not dtypes.is_inexact(aval.dtype)):
        return None
    pair = (aval.dtype, aval.weak_type)
    if dtypes.promote(pair, *scalar_pairs) != pair or \
            any(not weak and dtype != pair[0] for dtype, weak in scalar_pairs):
        return None
    return [a if isinstance(a, (Array, Tracer)) else _converted(a, *pair) for a in args]


def canonicalize_axis(axis, ndim):
    """A non-negative axis; ValueError (as NumPy/JAX) when out of range."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else axis


def canonicalize_axes(axis, ndim):
    """``axis`` (None, int or sequence) as a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    axes = tuple(canonicalize_axis(a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in {tuple(axis)}")
    return tuple(sorted(axes))


def concrete_value(name, x):
    """The NumPy value of ``x``, or ConcretizationTypeError naming ``name`` when traced."""
    if isinstance(x, Tracer):
        raise ConcretizationTypeError(
            f"Abstract tracer value encountered where concrete value is expected: "
            f"traced array {get_aval(x).str_short()} in jnp.{name}, whose result's shape "
            "depends on its values. Pass a concrete array, or the size= argument where "
            "there is one.")
    return to_numpy(x) if isinstance(x, Array) else np.asarray(x)


def not_implemented(name, reason=None):
    """A stand-in for a function nbjax does not provide: calling it says so. With a
    ``reason`` (why it cannot exist here) it is ``core.errors.unavailable``'s stand-in,
    which carries the reason for ``tools/api_coverage.py``; without one it is only missing."""
    if reason is not None:
        return unavailable(name, reason)

    def fn(*args, **kwargs):
        raise NotImplementedError(f"nbjax.numpy.{name} is not implemented")
    fn.__name__ = name
    return fn


# --- array helpers shared by the jnp modules -----------------------------------------------

def broadcast_to_shape(x, shape):
    """NumPy-broadcast ``x`` (an Array or tracer) to ``shape`` with broadcast_in_dim."""
    ndim = get_aval(x).ndim
    return lax.broadcast_in_dim(x, tuple(shape), range(len(shape) - ndim, len(shape)))


def check_broadcast_to(aval, shape):
    """Raise JAX's ValueError unless an array of type ``aval`` broadcasts to ``shape``."""
    old = aval.shape
    if len(shape) < len(old):
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: arr_shape={old} "
                         f"shape={shape}")
    if any(d not in (1, n) for d, n in zip(old, shape[len(shape) - len(old):])):
        requested = aval.update(shape=tuple(shape), weak_type=False)
        raise ValueError(f"Incompatible types for broadcasting: input type={aval} and "
                         f"requested type={requested}")


def broadcast_together(*args):
    """The arrays (or tracers) ``args`` NumPy-broadcast to their common shape."""
    shape = broadcast_shapes(*(get_aval(a).shape for a in args))
    return [broadcast_to_shape(a, shape) for a in args]


def filled_like(x, value, dtype=None):
    """An array of ``value`` shaped like ``x`` (weakly typed when ``x`` is and no dtype)."""
    aval = get_aval(x)
    weak = aval.weak_type if dtype is None else False
    dtype = aval.dtype if dtype is None else dtype
    scalar = lax.convert_element_type(value, dtype, weak_type=weak)
    return lax.broadcast_in_dim(scalar, aval.shape, ())


def all_weak(*args):
    """Whether every one of ``args`` is weakly typed (a Python number, or an array made
    from one). Anything else counts as not weak, for the checks that follow to refuse."""
    return all((is_python_scalar(a) or isinstance(a, (Array, Tracer))) and get_aval(a).weak_type
               for a in args)


def with_weak_type(x, weak):
    """``x``, weakly typed or not as ``weak`` says. For the functions whose result's weak
    type JAX does not take from promoting their operands (its implementation converts
    with a plain dtype, or compares with a strongly typed constant): results keep JAX's
    type, which decides how they promote later (``jnp.hypot(i, 1.5) + float16`` is float32)."""
    return _converted(x, get_aval(x).dtype, weak)


def half_precision_in_float32(fn):
    """``fn`` of one array computed in float32 where the array is float16 or bfloat16, its
    results rounded back: the series and continued fractions of some special functions
    lose several half-precision ulps to rounding in their terms (JAX's compute in float32)."""
    @functools.wraps(fn)
    def wrapped(x):
        if not isinstance(x, (Array, Tracer, np.ndarray, np.generic)):
            return fn(x)
        dtype = get_aval(x).dtype
        wider = accumulation_dtype(dtype)  # (float32 for float16 and bfloat16)
        if wider == dtype:
            return fn(x)
        out = fn(lax.convert_element_type(x, wider))
        if isinstance(out, tuple):
            return tuple(lax.convert_element_type(o, dtype) for o in out)
        return lax.convert_element_type(out, dtype)
    return wrapped


def select_where(condition, x, y):
    """``select`` with NumPy broadcasting; scalar branches take the other branch's dtype."""
    if is_python_scalar(x):
        x = filled_like(y, x)
    if is_python_scalar(y):
        y = filled_like(x, y)
    condition, x, y = broadcast_together(to_array(condition), x, y)
    return lax.select(condition, x, y)

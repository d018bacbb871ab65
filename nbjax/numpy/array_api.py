"""The Python array API standard (2024.12 revision), as ``jax.numpy`` conforms to it.

Nearly every function of the standard is an ordinary ``jnp`` function defined elsewhere;
this module adds the few that are not (``isdtype``, ``diff``, ``unstack``, ``from_dlpack``,
``finfo`` with Python floats),
the namespace metadata (``__array_api_version__``, ``__array_namespace_info__()``), and the
array methods the standard asks for that ``array_methods`` attaches to ``Array`` and tracers
(``__array_namespace__``, ``to_device``, ``__dlpack__``, ``__dlpack_device__``).
"""

import operator

import numpy as np

from .. import lax
from ..core import Array, dtypes
from ..core.array import devices as _devices
from .manipulation import broadcast_to, concatenate, moveaxis
from .scalar_types import bool_ as bool  # noqa: A004  (the standard's name for bool_)
from .util import canonicalize_axis, check_arraylike, to_array

__all__ = ["__array_api_version__", "__array_namespace_info__", "bool", "isdtype", "diff",
           "unstack", "from_dlpack", "finfo"]

__array_api_version__ = "2024.12"

# --- machine limits ------------------------------------------------------------------------

class finfo:
    """The machine limits of a floating dtype (or of a complex dtype's parts), JAX's
    (``ml_dtypes.finfo``: bfloat16 and the float8 types included) with its floating fields
    as Python floats, as the array API standard asks (exactly: every float32 or narrower
    value is a float64). ``dtype``, ``bits`` and the integer fields are as in NumPy."""

    _FLOATS = ("eps", "epsneg", "max", "min", "resolution", "smallest_normal",
               "smallest_subnormal", "tiny")
    _OTHERS = ("bits", "dtype", "iexp", "machep", "maxexp", "minexp", "negep", "nexp",
               "nmant", "precision")

    def __init__(self, dtype):
        info = dtypes.finfo(dtype)
        for name in self._FLOATS:
            setattr(self, name, float(getattr(info, name)))
        for name in self._OTHERS:
            setattr(self, name, getattr(info, name))

    def __repr__(self):
        at = np.dtype(self.dtype).type  # each field printed at its dtype's precision
        return (f"finfo(resolution={str(at(self.resolution))}, min={str(at(self.min))}, "
                f"max={str(at(self.max))}, dtype={self.dtype})")


# --- dtype kinds ---------------------------------------------------------------------------

# (with ml_dtypes' narrow types where JAX files them: bfloat16 and the float8/6/4 types are
# real floating, int1/2/4 and uint1/2/4 integers)
_DTYPE_KINDS = {
    "bool": {dtypes.bool_},
    "signed integer": {dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
                       *dtypes.NARROW_SIGNED},
    "unsigned integer": {dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64,
                         *dtypes.NARROW_UNSIGNED},
    "real floating": {dtypes.float16, dtypes.float32, dtypes.float64, dtypes.bfloat16,
                      *dtypes.NARROW_FLOATS},
    "complex floating": {dtypes.complex64, dtypes.complex128},
}
_DTYPE_KINDS["integral"] = _DTYPE_KINDS["signed integer"] | _DTYPE_KINDS["unsigned integer"]
_DTYPE_KINDS["numeric"] = (_DTYPE_KINDS["integral"] | _DTYPE_KINDS["real floating"]
                           | _DTYPE_KINDS["complex floating"])


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``: a kind name ("integral", "real floating", ...), a
    dtype, or a tuple of those (any of them)."""
    the_dtype = np.dtype(dtype)
    options = set()
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str) and k in _DTYPE_KINDS:
            options |= _DTYPE_KINDS[k]
            continue
        try:
            options.add(np.dtype(k))
        except TypeError:
            if isinstance(k, str):
                raise ValueError(f"Unrecognized kind={k!r} expected one of "
                                 f"{list(_DTYPE_KINDS)}, or a compatible input for "
                                 "jnp.dtype()") from None
            raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}")
    return the_dtype in options


# --- functions the other modules do not provide --------------------------------------------

def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The ``n``-th discrete difference along ``axis`` (``x[1:] - x[:-1]``, repeated);
    bools give ``x[1:] != x[:-1]``. Scalar ``prepend``/``append`` values count as one
    entry along ``axis``."""
    check_arraylike("diff", a)
    arr = to_array(a)
    n, axis = operator.index(n), operator.index(axis)
    if n == 0:
        return arr
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if arr.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    axis = canonicalize_axis(axis, arr.ndim)
    edge_shape = arr.shape[:axis] + (1,) + arr.shape[axis + 1:]

    def edge(v):
        check_arraylike("diff", v)
        v = to_array(v)
        return broadcast_to(v, edge_shape) if v.ndim == 0 else v
    parts = [edge(prepend)] if prepend is not None else []
    parts.append(arr)
    if append is not None:
        parts.append(edge(append))
    if len(parts) > 1:
        arr = concatenate(parts, axis)
    step = lax.ne if arr.dtype == dtypes.bool_ else lax.sub
    for _ in range(n):
        size = arr.shape[axis]
        arr = step(lax.slice_in_dim(arr, min(1, size), size, axis=axis),
                   lax.slice_in_dim(arr, 0, max(size - 1, 0), axis=axis))  # (empty stays so)
    return arr


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple of arrays of one dimension less."""
    check_arraylike("unstack", x)
    x = to_array(x)
    if x.ndim == 0:
        raise ValueError("Unstack requires arrays with rank > 0, however a scalar array "
                         "was passed.")
    x = moveaxis(x, canonicalize_axis(axis, x.ndim), 0)
    return tuple(lax.index_in_dim(x, i, 0, keepdims=False) for i in range(x.shape[0]))


# --- devices and DLPack --------------------------------------------------------------------

def _check_device(name, device):
    """Only ``None`` (any device) and nbjax's own devices name a place an array can go."""
    if device is not None and device not in _devices():
        raise ValueError(f"{name}: device must be None or one of nbjax.devices() "
                         f"{_devices()}, got {device!r}")


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array of the data of any DLPack producer (a NumPy array, a torch CPU tensor...).

    The data is shared when possible: a read-only producer (another nbjax Array) is not
    copied. Writable producer memory could change under the immutable Array, so it is
    copied, and ``copy=False`` then raises ValueError. 64-bit data become 32-bit unless
    x64 is on, as everywhere in nbjax.
    """
    _check_device("from_dlpack", device)
    value = np.from_dlpack(x, copy=copy)
    dtype = dtypes.canonicalize(value.dtype)
    if copy is False and (value.flags.writeable or value.dtype != dtype):
        raise ValueError(f"from_dlpack: copy=False, but the {value.dtype} data must be copied "
                         f"(nbjax arrays are immutable and {dtype} here).")
    return Array(value.astype(dtype, copy=False))


def dlpack_method(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """``Array.__dlpack__``: NumPy exports the data. DLPack before 1.0 cannot mark memory
    read-only, so older consumers get a copy (unless they forbid copies)."""
    value = self._value
    if (max_version is None or max_version[0] < 1) and copy is not False:
        value = value.copy()
    return value.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                            copy=copy)


def dlpack_device_method(self):
    """``Array.__dlpack_device__``: (kDLCPU, 0)."""
    return self._value.__dlpack_device__()


def to_device_method(self, device, *, stream=None):
    """``x.to_device(d)``: there is one device, so the array is already there."""
    _check_device("to_device", device)
    return self


def check_api_version(api_version):
    """``x.__array_namespace__(api_version=...)`` accepts only the revision implemented."""
    if api_version is not None and api_version != __array_api_version__:
        raise ValueError(f"api_version={api_version!r} is not available; available versions "
                         f"are: {[__array_api_version__]}")


# --- namespace metadata --------------------------------------------------------------------

def __array_namespace_info__():
    return ArrayNamespaceInfo()


class ArrayNamespaceInfo:
    """What ``nbjax.numpy`` supports, as the standard's inspection API reports it."""

    def capabilities(self):
        # Inside transformations shapes must be static, as in JAX.
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 64}

    def default_device(self):
        # None, as in JAX: arrays are not committed to a device.
        return None

    def devices(self):
        return [None] + _devices()

    def default_dtypes(self, *, device=None):
        return {"real floating": dtypes.default_float(),
                "complex floating": dtypes.default_complex(),
                "integral": dtypes.default_int(), "indexing": dtypes.default_int()}

    def dtypes(self, *, device=None, kind=None):
        """The standard's dtypes of ``kind`` (default: all), by name; 64-bit ones only
        with x64 on. float16 and ml_dtypes' narrow types are not standard dtypes."""
        if kind is None:
            kinds = ("numeric", "bool")
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
        found = set().union(*(_DTYPE_KINDS[k] for k in kinds))
        return {d.name: d for d in dtypes.SUPPORTED
                if d in found and d != dtypes.float16 and not dtypes.is_ml_dtype(d)
                and dtypes.canonicalize(d) == d}

"""Dtypes and JAX's type-promotion lattice, including weak types for Python scalars.

A *weak* type is what a Python scalar has: ``1`` is a weak int, ``1.5`` a weak float. Weak types
sit low in the lattice, so ``int8_array + 1`` stays ``int8`` and ``int32_array + 1.5`` becomes
``float32`` (weakly typed), as in JAX. Values are 32-bit unless ``enable_x64`` is on.

The narrow types JAX takes from ml_dtypes are NumPy dtypes too (NumPy computes with them,
through float32): ``bfloat16`` promotes as ``float16`` does; the 8-, 6- and 4-bit floats
and the 1-, 2- and 4-bit integers promote with nothing but Python scalars (and bool), since
mixing them with another type is almost always a mistake: JAX raises then, and so do we.
"""

import functools

import ml_dtypes
import numpy as np

from ..config import config
from .source_info import warn_at_user_line

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
NARROW_FLOATS = tuple(np.dtype(getattr(ml_dtypes, name)) for name in (
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn",
    "float6_e3m2fn"))
NARROW_SIGNED = tuple(np.dtype(getattr(ml_dtypes, n)) for n in ("int1", "int2", "int4"))
NARROW_UNSIGNED = tuple(np.dtype(getattr(ml_dtypes, n)) for n in ("uint1", "uint2", "uint4"))
_ML_FLOATS = frozenset((bfloat16,) + NARROW_FLOATS)
_ML_INTS = frozenset(NARROW_SIGNED + NARROW_UNSIGNED)

# The dtype of tangents and cotangents of integer and bool values: they carry no information.
float0 = np.dtype([("float0", np.void, 0)])


class extended(np.generic):
    """The scalar type of JAX's *extended* dtypes, those NumPy has no dtype for: an extended
    dtype (a key array's ``key<fry>``) names its scalar type as its ``type``, as a NumPy
    dtype does, so ``issubdtype`` files it in NumPy's hierarchy, under ``extended``."""


class prng_key(extended):
    """The scalar type of PRNG key dtypes: ``issubdtype(key.dtype, prng_key)``."""


class ExtendedDType:
    """Base of the extended dtypes themselves (``key<fry>``): each element is held as an array
    of ``element_shape`` and ``physical_dtype`` (a threefry key: two uint32 words), so an
    array of one is *physical* data with those trailing axes, and the structural primitives
    apply to it by applying to that data (``nbjax.lax.extended``). ``wrap(data)`` makes an
    array of this dtype over physical data; ``name`` prints the dtype."""

    type = extended
    element_shape = ()
    physical_dtype = None
    __slots__ = ()

    def wrap(self, data):
        raise NotImplementedError

    @property
    def itemsize(self):
        return int(np.prod(self.element_shape)) * np.dtype(self.physical_dtype).itemsize

    def __repr__(self):
        return self.name

    __str__ = __repr__


def is_extended(dtype):
    """Whether ``dtype`` is an extended dtype or the scalar type of one (``prng_key``)."""
    scalar_type = dtype if isinstance(dtype, type) else getattr(dtype, "type", None)
    return isinstance(scalar_type, type) and issubclass(scalar_type, extended)


SUPPORTED = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
             float16, float32, float64, complex64, complex128, bfloat16,
             *NARROW_FLOATS, *NARROW_SIGNED, *NARROW_UNSIGNED)
_SUPPORTED_SET = frozenset(SUPPORTED)

_SHORT_NAMES = {bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
                uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
                float16: "f16", float32: "f32", float64: "f64",
                complex64: "c64", complex128: "c128", float0: "float0", bfloat16: "bf16",
                **{d: d.name.replace("uint", "u").replace("int", "i").replace("float", "f")
                   for d in NARROW_FLOATS + NARROW_SIGNED + NARROW_UNSIGNED}}

_TO_32_BIT = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def short_name(dtype):
    """The name jaxprs print: ``f32``, ``i32``, ``bool`` ... (an extended dtype's own)."""
    if isinstance(dtype, ExtendedDType):
        return dtype.name
    return _SHORT_NAMES[np.dtype(dtype)]


def name(dtype):
    """The name JAX's messages write: ``float32``, ``bool``, ``float0`` (NumPy's name of
    the structured dtype standing for it is ``void``)."""
    if isinstance(dtype, ExtendedDType):
        return dtype.name
    dtype = np.dtype(dtype)
    return "float0" if dtype == float0 else dtype.name


def is_supported(dtype):
    """Whether nbjax holds arrays of ``dtype`` (a NumPy dtype): not strings, objects, dates."""
    return dtype in _SUPPORTED_SET or dtype == float0


def check_supported(dtype, what="nbjax"):
    """Return ``dtype`` as a NumPy dtype, or raise TypeError naming it."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}: {dtype!r} is not a dtype") from None
    if not is_supported(dt):
        raise TypeError(f"{what}: dtype {dt} is not supported; supported dtypes are "
                        f"{', '.join(d.name for d in SUPPORTED)}")
    return dt


def canonicalize(dtype):
    """Map a dtype to the one nbjax stores: 64-bit types become 32-bit unless x64 is on. An
    extended dtype (a typed key's) is its own."""
    if isinstance(dtype, ExtendedDType):
        return dtype
    dt = check_supported(dtype)
    if config.enable_x64:
        return dt
    return _TO_32_BIT.get(dt, dt)


def requested(dtype, function):
    """``canonicalize(dtype)`` for a dtype a user asked ``function`` for: a 64-bit one made
    32-bit (x64 off) says so with JAX's warning, for the values are rounded (the classroom's
    "where did my float64 go"). Python's ``int``, ``float`` and ``complex`` ask for the
    default types, whatever their width."""
    if isinstance(dtype, ExtendedDType):
        return dtype
    dt = check_supported(dtype)
    stored = canonicalize(dt)
    if stored != dt and dtype not in (int, float, complex):
        warn_at_user_line(
            f"Explicitly requested dtype {dt.name} requested in {function} is not available, "
            f"and will be truncated to dtype {stored.name}. To enable more dtypes, set the "
            "jax_enable_x64 configuration option or the JAX_ENABLE_X64 shell environment "
            "variable. See https://github.com/jax-ml/jax#current-gotchas for more.")
    return stored


def default_int():
    return int64 if config.enable_x64 else int32


def default_uint():
    return uint64 if config.enable_x64 else uint32


def default_float():
    return float64 if config.enable_x64 else float32


def default_complex():
    return complex128 if config.enable_x64 else complex64


def to_inexact(dtype, weak_type=False):
    """The type an inexact operation (``jnp.sin``, ``mean``, ``fft``) computes ``dtype`` in,
    as JAX 0.10 does: a float or complex type itself; a Python int the default float; an
    array's bool or integer type float32, or float64 for the 64-bit integers (which exist
    only under x64: ``sin`` of an int32 array is float32 even then)."""
    dt = np.dtype(dtype)
    if is_inexact(dt):
        return dt
    if weak_type:
        return np.dtype(default_float())
    return np.dtype(float64 if dt.itemsize == 8 else float32)


# Read from the dtype's kind (much cheaper than np.issubdtype, and these run on every
# operation); NumPy files ml_dtypes' types under none of its kinds (theirs is "V"), so the
# predicates name them: bfloat16 and the narrow floats are floats, the narrow ints ints. An
# extended dtype (a typed key's) is none of these kinds, as in JAX's ``issubdtype``: they
# read it as an opaque NumPy type.
_OPAQUE = np.dtype("V1")


def _as_numpy(dtype):
    return _OPAQUE if isinstance(dtype, ExtendedDType) else np.dtype(dtype)


def is_ml_dtype(dtype):
    """Whether ``dtype`` is one of the types ml_dtypes adds (bfloat16, float8, int4...)."""
    dt = np.dtype(dtype)
    return dt in _ML_FLOATS or dt in _ML_INTS


def computed_as(dtype):
    """The wider float XLA's CPU computes a narrow float (``NARROW_FLOATS``: 8, 6 and 4
    bits) in, converting the result back: float16 where it holds each of ``dtype``'s
    values, subnormals included, else float32 (float8_e8m0fnu); None for other types. Code
    working on such a type's own bits or roundings (``reduce_precision``, ``exp2``'s
    formula) differs: a float8_e4m3 subnormal, the fnuz types' NaN pattern."""
    if np.dtype(dtype) not in NARROW_FLOATS:
        return None
    info, half = ml_dtypes.finfo(dtype), ml_dtypes.finfo(np.float16)
    fits = float(info.max) <= float(half.max) and \
        float(info.smallest_subnormal) >= float(half.smallest_subnormal)
    return np.dtype(np.float16) if fits else np.dtype(np.float32)


_ABSTRACT_KINDS = (np.generic, np.number, np.inexact, np.floating, np.integer,
                   np.signedinteger, np.unsignedinteger)


def _numpy_kind(dt):
    """The abstract NumPy class JAX files an ml_dtypes type under."""
    if dt in _ML_FLOATS:
        return np.floating
    return np.signedinteger if dt in NARROW_SIGNED else np.unsignedinteger


def issubdtype(arg1, arg2):
    """``jnp.issubdtype``: NumPy's, with ml_dtypes' types filed as JAX files them (bfloat16
    and the narrow floats under ``floating``, the narrow ints under ``(un)signedinteger``)
    and extended dtypes under their scalar types (``key<fry>`` < ``prng_key`` < ``extended``
    < ``generic``)."""
    if is_extended(arg1) or is_extended(arg2):
        return issubclass(_scalar_type(arg1), _scalar_type(arg2))
    if arg2 in _ABSTRACT_KINDS:
        try:
            dt = np.dtype(arg1)
        except TypeError:
            dt = None
        if dt is not None and is_ml_dtype(dt):
            return issubclass(_numpy_kind(dt), arg2)
    return np.issubdtype(arg1, arg2)


def _scalar_type(dtype):
    """The scalar type a dtype (NumPy's or an extended one) or a scalar type stands for."""
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        return dtype
    return dtype.type if is_extended(dtype) else np.dtype(dtype).type


def is_float(dtype):
    dt = _as_numpy(dtype)
    return dt.kind == "f" or dt in _ML_FLOATS


def is_complex(dtype):
    return _as_numpy(dtype).kind == "c"


def is_inexact(dtype):
    dt = _as_numpy(dtype)
    return dt.kind in "fc" or dt in _ML_FLOATS


def is_int(dtype):
    dt = _as_numpy(dtype)
    return dt.kind in "iu" or dt in _ML_INTS


def is_signed_int(dtype):
    dt = _as_numpy(dtype)
    return dt.kind == "i" or dt in NARROW_SIGNED


def is_unsigned_int(dtype):
    dt = _as_numpy(dtype)
    return dt.kind == "u" or dt in NARROW_UNSIGNED


def is_bool(dtype):
    return _as_numpy(dtype) == bool_


# --- the promotion lattice -----------------------------------------------------------------

class _Weak:
    """The lattice node of a weakly typed Python scalar kind (int, float or complex)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX = _Weak("i*"), _Weak("f*"), _Weak("c*")
_PYTHON_TYPE = {WEAK_INT: "int", WEAK_FLOAT: "float", WEAK_COMPLEX: "complex"}

_LATTICE = {
    bool_: [WEAK_INT],
    WEAK_INT: [uint8, int8, *NARROW_SIGNED, *NARROW_UNSIGNED],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64], uint64: [WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [WEAK_FLOAT],
    WEAK_FLOAT: [float16, bfloat16, *NARROW_FLOATS, WEAK_COMPLEX],
    float16: [float32], bfloat16: [float32], float32: [float64, complex64],
    float64: [complex128],
    WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
    **{d: [] for d in NARROW_FLOATS + NARROW_SIGNED + NARROW_UNSIGNED},
}


def _upper_bounds():
    """For each node, the set of nodes at or above it in the lattice."""
    ub = {}

    def visit(node):
        if node not in ub:
            ub[node] = {node}.union(*(visit(n) for n in _LATTICE[node]))
        return ub[node]
    for node in _LATTICE:
        visit(node)
    return ub


_UPPER = _upper_bounds()


class TypePromotionError(ValueError):
    """Operands whose dtypes are not promoted implicitly: the narrow types with any other
    type, or anything but equal types under ``numpy_dtype_promotion="strict"``."""


@functools.lru_cache(maxsize=None)
def _join(nodes):
    common = set.intersection(*(_UPPER[n] for n in nodes))
    # The least upper bound is the common bound that every other common bound lies above.
    for cand in common:
        if common <= _UPPER[cand]:
            return cand
    # Only the narrow types end here: nothing lies above them but themselves.
    names = tuple(f"<class '{_PYTHON_TYPE[n]}'>" if isinstance(n, _Weak) else n.name
                  for n in nodes)
    what = ("8-bit floats" if any(n in NARROW_FLOATS for n in nodes)
            else "1-bit, 2-bit and 4-bit integers")
    raise TypePromotionError(
        f"Input dtypes {names} have no available implicit dtype promotion path. To avoid "
        f"unintended promotion, {what} do not support implicit promotion. If you'd like "
        "your inputs to be promoted to another type, you can do so explicitly using e.g. "
        "x.astype('float32')")


def _lattice_node(dtype, weak_type):
    dt = np.dtype(dtype)
    if dt not in _LATTICE:  # float0 (the tangents of integers), strings, objects
        raise ValueError(f"dtype={dt!r} is not a valid dtype for JAX type promotion.")
    if not weak_type:
        return dt
    if is_bool(dt):
        return dt
    if is_complex(dt):
        return WEAK_COMPLEX
    if is_float(dt):
        return WEAK_FLOAT
    return WEAK_INT


def _node_dtype(node):
    return {WEAK_INT: default_int, WEAK_FLOAT: default_float,
            WEAK_COMPLEX: default_complex}.get(node, lambda: node)()


def promote(*dtype_weak_pairs):
    """The result of promoting ``(dtype, weak_type)`` pairs: a ``(dtype, weak_type)`` pair.

    The result is weak only if the join is a weak node (all inputs weak, or weak ones joined
    with bool); it is canonicalized (32-bit unless x64 is on).
    """
    return _promote(dtype_weak_pairs, config.enable_x64)


@functools.lru_cache(maxsize=None)  # (few distinct pairs; nearly every jnp operation asks)
def _promote(dtype_weak_pairs, x64):
    """``promote``, remembered per the pairs and ``enable_x64``, which canonicalizes."""
    if any(isinstance(d, ExtendedDType) for d, _ in dtype_weak_pairs):
        return _promote_extended(dtype_weak_pairs)
    node = _join(tuple(_lattice_node(d, w) for d, w in dtype_weak_pairs))
    return canonicalize(_node_dtype(node)), isinstance(node, _Weak)


def _promote_extended(dtype_weak_pairs):
    """Extended dtypes are outside the lattice: one promotes only with itself (the keys that
    ``jnp.stack`` joins), else JAX's ValueError naming the first dtype outside it."""
    dts = [d for d, _ in dtype_weak_pairs]
    if all(d == dts[0] for d in dts):
        return dts[0], False
    outside = next(d for d in dts if isinstance(d, ExtendedDType) or d not in _LATTICE)
    raise ValueError(f"dtype={outside!r} is not a valid dtype for JAX type promotion.")


def check_strict_promotion(dtype_weak_pairs, result):
    """Under ``numpy_dtype_promotion="strict"``, TypePromotionError unless the promotion of
    ``dtype_weak_pairs`` to ``result`` (their ``promote``) changes no strong dtype: the
    strong operands share one dtype and weak ones (Python scalars) fit in it."""
    if config.numpy_dtype_promotion != "strict":
        return
    strong = {d for d, weak in dtype_weak_pairs if not weak}
    if not strong or strong == {result[0]}:
        return
    names = [f"<class '{_WEAK_NAMES[_kind(d)]}'>" if weak else d.name
             for d, weak in dtype_weak_pairs]
    raise TypePromotionError(
        f"Input dtypes {tuple(names)} have no available implicit dtype promotion path when "
        "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired "
        "output type, or set jax_numpy_dtype_promotion=standard.")


_WEAK_NAMES = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}


def _kind(dtype):
    return np.dtype(dtype).kind


def promote_types(a, b):
    """``jnp.promote_types``: promotion of two strong dtypes."""
    return promote((check_supported(a), False), (check_supported(b), False))[0]


def python_scalar_dtype(x):
    """The (dtype, weak_type) JAX gives a Python scalar."""
    if isinstance(x, bool):
        return bool_, False
    if isinstance(x, int):
        return default_int(), True
    if isinstance(x, float):
        return default_float(), True
    if isinstance(x, complex):
        return default_complex(), True
    raise TypeError(f"{type(x).__name__} is not a Python scalar")


def finfo(dtype):
    return ml_dtypes.finfo(check_supported(dtype))


def iinfo(dtype):
    return ml_dtypes.iinfo(check_supported(dtype))

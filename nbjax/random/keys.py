"""PRNG keys: raw uint32 arrays (``PRNGKey``) and typed keys (``key``), of any of the PRNG
implementations of ``impls.py`` (threefry2x32, the default; rbg; unsafe_rbg).

A raw key is a plain uint32 array of the implementation's key shape (``uint32[2]`` for
threefry2x32, ``uint32[4]`` for the rbg ones); a batch of them has shape ``(..., 2)`` (or
``(..., 4)``). A raw key does not say which implementation it is for: it is read as a key of
the default one, config ``jax_default_prng_impl``, as in JAX. A typed key
(``PRNGKeyArray``) carries its implementation and hides that trailing axis: its shape is the
shape of the batch of keys and its dtype prints ``key<fry>`` (``key<rbg>``, ``key<urbg>``).
To nbjax's transformations it is a pytree whose one child is the raw data and whose aux data
is the implementation, so jit, vmap and grad see ordinary uint32 arrays and rebuild keys of
the right kind; to users' pytree functions (``nbjax.tree_util``) it is a leaf, as in JAX.
Every operation accepts both kinds and returns keys of the kind it was given, as JAX does.
Its dtype is an extended dtype (``core.extended``), so the array functions that only move,
select or replicate elements (``jnp.stack``, ``jnp.where``, indexing, ``.at[...].set``,
reshapes, ``==``) take typed keys too, through the primitives' rules for extended dtypes
(``nbjax.lax.extended``), and refuse arithmetic on them, as JAX's do.

The samplers work on typed keys (``check_key`` wraps a raw one) and make new keys and bits
through the key's implementation only (``split_keys``, ``split_list``, ``random_bits``).
"""

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..config import config
from ..core import (Array, ExtendedArray, Tracer, basearray, canonical_shape, dtypes, get_aval,
                   pytree)
from ..core.array import scalar_in_range
from .impls import PRNG_IMPLS, PRNGImpl

__all__ = ["PRNGKeyArray", "key", "PRNGKey", "key_data", "wrap_key_data", "key_impl",
           "key_dtype", "split", "fold_in", "clone"]


class KeyDType(dtypes.ExtendedDType):
    """The dtype of typed keys of one implementation, printed ``key<tag>`` (``key<fry>``
    for threefry2x32). An extended dtype: its scalar type is ``prng_key``
    (``nbjax.dtypes.prng_key``), each key is held as the implementation's uint32 words. Two
    are equal when their implementations are."""

    type = dtypes.prng_key
    physical_dtype = dtypes.uint32
    __slots__ = ("impl",)

    def __init__(self, impl):
        self.impl = impl

    name = property(lambda self: f"key<{self.impl.tag}>")
    element_shape = property(lambda self: self.impl.key_shape)

    def wrap(self, data):
        return PRNGKeyArray(self.impl, data)

    def __eq__(self, other):
        return isinstance(other, KeyDType) and other.impl is self.impl

    def __hash__(self):
        return hash((KeyDType, self.impl.name))


class PRNGKeyArray(ExtendedArray):
    """An array of typed PRNG keys of implementation ``impl`` over raw key data of shape
    ``shape + impl.key_shape`` (JAX's arguments, in JAX's order). Its operators and its
    structural methods (indexing, ``.at``, ``reshape``...) are ``nbjax.numpy``'s, as for
    any array of an extended dtype (``array_methods``), and apply to the data by the
    primitives' rules for extended dtypes (``nbjax.lax.extended``)."""

    __slots__ = ("_impl", "_data")
    __array_priority__ = 100

    def __init__(self, impl, data):
        self._impl = impl
        self._data = data  # not checked here: pytree unflattening passes placeholders

    dtype = property(lambda self: KeyDType(self._impl))
    physical = property(lambda self: self._data)

    def _keys(self, data):
        """Keys of the same implementation over other data."""
        return PRNGKeyArray(self._impl, data)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("nbjax array with PRNGKey dtype cannot be converted to a NumPy array. "
                        "Use nbjax.random.key_data(arr) if you wish to extract the underlying "
                        "integer array.")

    __hash__ = None

    def __repr__(self):
        return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{self._data}"


# The implementation is the aux data: static to transformations (and part of jit's cache key),
# and unflattening gives keys of the same kind back.
basearray.Array.register(PRNGKeyArray)  # (as jax.random.key's arrays are jax.Arrays)
pytree.register_leaf_to_users(PRNGKeyArray, lambda k: ((k._data,), k._impl),
                              lambda impl, children: PRNGKeyArray(impl, children[0]))


# --- implementations -----------------------------------------------------------------------

def resolve_impl(spec):
    """The implementation ``impl=`` (or ``dtype=``) names: None for the default (config
    ``jax_default_prng_impl``), a name, a key dtype, or a PRNGImpl."""
    if spec is None:
        spec = config.default_prng_impl
    if isinstance(spec, str):
        if spec not in PRNG_IMPLS:
            choices = ", ".join(f'"{name}"' for name in PRNG_IMPLS)
            raise ValueError(f'unrecognized PRNG implementation "{spec}". Did you mean one of: '
                             f"{choices}?")
        return PRNG_IMPLS[spec]
    if isinstance(spec, KeyDType):
        return spec.impl
    if isinstance(spec, PRNGImpl):
        return spec
    raise TypeError(f"unrecognized type {type(spec)} for specifying PRNG implementation.")


def _impl_or_dtype(ctor, impl, dtype):
    """What a constructor's ``impl=`` or ``dtype=`` (two names for one thing) names."""
    if impl is not None and dtype is not None:
        raise ValueError(f"Cannot specify both `impl` and `dtype` arguments to "
                         f"nbjax.random.{ctor}")
    return resolve_impl(impl if dtype is None else dtype)


def key_dtype(impl_spec=None):
    """The dtype of typed keys of an implementation (the default one without argument)."""
    return KeyDType(resolve_impl(impl_spec))


# --- checking keys -------------------------------------------------------------------------

def _check_key_data(data, impl):
    aval = get_aval(data)
    if aval.ndim < 1:
        raise TypeError("nbjax encountered invalid PRNG key data: expected key_data.ndim >= 1; "
                        f"got ndim={aval.ndim}")
    if aval.shape[-1:] != impl.key_shape:
        raise TypeError("nbjax encountered invalid PRNG key data: expected key_data.shape to "
                        f"end with {impl.key_shape}; got shape={aval.shape} for "
                        f"impl={impl.name}")
    if aval.dtype != dtypes.uint32:
        raise TypeError("nbjax encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={aval.dtype}")


def check_key(name, key, allow_batched=False):
    """``(typed key, was_typed)`` of a raw or typed key argument of function ``name``; raw
    data is read as a key of the default implementation."""
    if isinstance(key, PRNGKeyArray):
        typed = True
    elif isinstance(key, (Array, Tracer, np.ndarray, np.generic)) or np.isscalar(key):
        # JAX's array-likes (a Python number too, refused below: it has no ``ndim``)
        data, impl = _as_raw_data(key), resolve_impl(None)
        _check_key_data(data, impl)
        key, typed = PRNGKeyArray(impl, data), False
    else:  # lists and tuples too, as in JAX
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    if not allow_batched and key.ndim:
        shape = key.shape if typed else get_aval(key._data).shape
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{shape} != (). Use nbjax.vmap for batching.")
    return key, typed


def rewrap(key, typed):
    """Typed keys as the kind the caller passed in (``typed``: as they are)."""
    return key if typed else key._data


def _as_array(x):
    return x if isinstance(x, (Array, Tracer)) else jnp.asarray(x)


def _as_raw_data(x):
    """Raw key data as an array: only arrays (and NumPy scalars) are, as in JAX."""
    if not all(hasattr(x, attr) for attr in ("ndim", "shape", "dtype")):
        raise TypeError("nbjax encountered invalid PRNG key data: expected key_data to have "
                        f"ndim, shape, and dtype attributes. Got {x}")
    return _as_array(x)


# --- what samplers draw from a typed key ---------------------------------------------------

def split_keys(key, shape):
    """Keys of ``shape`` split from one typed key, by its implementation."""
    return key._keys(key._impl.split(key._data, shape))


def split_list(key, n):
    """``n`` keys split from one typed key, as a list (what samplers unpack)."""
    keys = key._impl.split(key._data, (n,))
    return [key._keys(lax.index_in_dim(keys, i, keepdims=False)) for i in range(n)]


def random_bits(key, bit_width, shape):
    """Uniform unsigned integers of ``bit_width`` bits (8, 16, 32 or 64) and ``shape``
    from one typed key, by its implementation."""
    return key._impl.random_bits(key._data, bit_width, shape)


# --- constructors --------------------------------------------------------------------------

def _seed_array(ctor, seed):
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, int):
        # As JAX: a Python int (or bool) is read as int64 (OverflowError beyond), then,
        # without x64, its low 32 bits are kept, so large hashes still make keys in 32-bit
        # mode.
        seed = np.int64(seed)
        if not config.enable_x64:
            seed = seed.astype(np.int32)
    seed = _as_array(seed)
    if get_aval(seed).ndim:
        raise TypeError(f"{ctor} accepts a scalar seed, but was given an array of shape "
                        f"{get_aval(seed).shape} != (). Use nbjax.vmap for batching")
    return seed


def key(seed, *, impl=None, dtype=None):
    """A typed PRNG key (``key<fry>[]`` by default) from an integer seed."""
    impl = _impl_or_dtype("key", impl, dtype)
    return PRNGKeyArray(impl, impl.seed(_seed_array("key", seed)))


def PRNGKey(seed, *, impl=None):
    """A raw PRNG key from an integer seed: for threefry2x32 a ``uint32[2]`` array, the seed's
    high and low 32 bits (for rbg and unsafe_rbg ``uint32[4]``: those, twice)."""
    impl = resolve_impl(impl)
    return impl.seed(_seed_array("PRNGKey", seed))


def key_data(keys):
    """The raw ``uint32[..., *key_shape]`` data of (a batch of) keys."""
    keys, _ = check_key("key_data", keys, allow_batched=True)
    return keys._data


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys over raw key data whose trailing axis is the implementation's key shape."""
    impl = _impl_or_dtype("wrap_key_data", impl, dtype)
    data = _as_array(key_bits_array)
    _check_key_data(data, impl)
    return PRNGKeyArray(impl, data)


def key_impl(keys):
    """The name of the keys' PRNG implementation (``"threefry2x32"``, ``"rbg"``...)."""
    keys, _ = check_key("key_impl", keys, allow_batched=True)
    return keys._impl.name


# --- deriving keys -------------------------------------------------------------------------

def split(key, num=2):
    """``num`` new keys (an int, or a shape) from one key, along new leading axes."""
    key, typed = check_key("split", key)
    shape = canonical_shape(tuple(num) if isinstance(num, (tuple, list)) else (num,))
    return rewrap(split_keys(key, shape), typed)


def fold_in(key, data):
    """A new key from a key and a 32-bit integer (e.g. a step number)."""
    key, typed = check_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use nbjax.vmap for batching.")
    if isinstance(data, int) and not isinstance(data, bool):
        # OverflowError outside [0, 2**32), as JAX
        word = np.uint32(scalar_in_range(data, dtypes.uint32))
    else:
        word = lax.convert_element_type(data, dtypes.uint32)
    return rewrap(key._keys(key._impl.fold_in(key._data, word)), typed)


def clone(key):
    """The same key. JAX uses it to mark deliberate reuse for its key-reuse checker, which
    nbjax does not have, so it is the identity here."""
    return key


"""PRNG keys: raw ``uint32[2]`` keys (``PRNGKey``) and typed keys (``key``).

A raw key is a plain array of two uint32 words; a batch of them has shape ``(..., 2)``. A
typed key (``PRNGKeyArray``) hides that trailing axis: its shape is the shape of the batch
of keys and its dtype prints ``key<fry>``. To nbjax's transformations it is a pytree whose
one child is the raw data, so jit, vmap and grad see ordinary uint32 arrays; to users'
pytree functions (``nbjax.tree_util``) it is a leaf, as in JAX. Every operation accepts
both kinds and returns keys of the kind it was given, as JAX does.
"""

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..config import config
from ..core import Array, Tracer, canonical_shape, dtypes, get_aval, pytree
from ..core.array import scalar_in_range
from . import threefry

__all__ = ["PRNGKeyArray", "key", "PRNGKey", "key_data", "wrap_key_data", "key_impl",
           "split", "fold_in", "clone"]

IMPL_NAME = "threefry2x32"


class KeyDType:
    """The dtype of typed keys. JAX prints it ``key<fry>`` ("fry": threefry2x32). An
    extended dtype: its scalar type is ``prng_key`` (``nbjax.dtypes.prng_key``)."""

    name = "key<fry>"
    type = dtypes.prng_key

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, KeyDType)

    def __hash__(self):
        return hash(KeyDType)


KEY_DTYPE = KeyDType()


class PRNGKeyArray:
    """An array of typed PRNG keys over raw key data of shape ``shape + (2,)``."""

    __slots__ = ("_data",)
    __array_priority__ = 100

    def __init__(self, data):
        self._data = data  # not checked here: pytree unflattening passes placeholders

    shape = property(lambda self: tuple(get_aval(self._data).shape[:-1]))
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))
    dtype = property(lambda self: KEY_DTYPE)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        consumed = sum(getattr(i, "ndim", 1) for i in idx if i is not None and i is not Ellipsis)
        if consumed > self.ndim:
            raise IndexError(f"Too many indices for key array of shape {self.shape}: "
                             f"{consumed} were indexed")
        # The key words stay whole: index only the leading (logical) axes.
        trailing = (slice(None),) if Ellipsis in idx else (Ellipsis, slice(None))
        return PRNGKeyArray(self._data[idx + trailing])

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return PRNGKeyArray(jnp.reshape(self._data, (*shape, 2)))

    def ravel(self):
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis=None):
        axes = tuple(i for i, d in enumerate(self.shape) if d == 1) if axis is None else axis
        return PRNGKeyArray(jnp.squeeze(self._data, axes))

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        perm = tuple(axes) if axes else tuple(reversed(range(self.ndim)))
        return PRNGKeyArray(jnp.transpose(self._data, (*perm, self.ndim)))

    T = property(lambda self: self.transpose())

    def copy(self):
        return PRNGKeyArray(self._data)

    def __eq__(self, other):
        return jnp.all(self._data == _raw_data("==", other), axis=-1)

    def __ne__(self, other):
        return jnp.logical_not(self == other)

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("nbjax array with PRNGKey dtype cannot be converted to a NumPy array. "
                        "Use nbjax.random.key_data(arr) if you wish to extract the underlying "
                        "integer array.")

    __hash__ = None

    def __repr__(self):
        return f"Array({self.shape}, dtype={KEY_DTYPE.name}) overlaying:\n{self._data}"


pytree.register_leaf_to_users(PRNGKeyArray, lambda k: ((k._data,), None),
                              lambda _, children: PRNGKeyArray(children[0]))


def _raw_data(name, key):
    if isinstance(key, PRNGKeyArray):
        return key._data
    raise TypeError(f"{name} expects a typed key array, got {type(key).__name__}")


# --- checking and unwrapping keys ----------------------------------------------------------

def _check_key_data(data):
    aval = get_aval(data)
    if aval.ndim < 1:
        raise TypeError("nbjax encountered invalid PRNG key data: expected key_data.ndim >= 1; "
                        f"got ndim={aval.ndim}")
    if aval.shape[-1:] != (2,):
        raise TypeError("nbjax encountered invalid PRNG key data: expected key_data.shape to "
                        f"end with (2,); got shape={aval.shape} for impl={IMPL_NAME}")
    if aval.dtype != dtypes.uint32:
        raise TypeError("nbjax encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={aval.dtype}")


def unwrap(name, key, allow_batched=False):
    """``(raw key data, was_typed)`` of a raw or typed key argument of function ``name``."""
    if isinstance(key, PRNGKeyArray):
        data, typed = key._data, True
    elif isinstance(key, (Array, Tracer, np.ndarray, list, tuple)):
        data, typed = _as_array(key), False
        _check_key_data(data)
    else:
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    if not allow_batched and get_aval(data).ndim > 1:
        shape = get_aval(data).shape[:-1] if typed else get_aval(data).shape
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{shape} != (). Use nbjax.vmap for batching.")
    return data, typed


def rewrap(data, typed):
    """Keys of the kind the caller passed in."""
    return PRNGKeyArray(data) if typed else data


def _as_array(x):
    return x if isinstance(x, (Array, Tracer)) else jnp.asarray(x)


# --- constructors --------------------------------------------------------------------------

def _seed_array(ctor, seed):
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, int) and not isinstance(seed, bool):
        # As JAX: a Python int is read as int64 (OverflowError beyond), then, without x64,
        # its low 32 bits are kept, so large hashes still make keys in 32-bit mode.
        seed = np.int64(seed)
        if not config.enable_x64:
            seed = seed.astype(np.int32)
    seed = _as_array(seed)
    if get_aval(seed).ndim:
        raise TypeError(f"{ctor} accepts a scalar seed, but was given an array of shape "
                        f"{get_aval(seed).shape} != (). Use nbjax.vmap for batching")
    return seed


def check_impl(impl):
    if impl not in (None, IMPL_NAME, KEY_DTYPE, KEY_DTYPE.name):
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
                         f'"{IMPL_NAME}"?')


def key(seed, *, impl=None, dtype=None):
    """A typed PRNG key (``key<fry>[]``) from an integer seed."""
    check_impl(impl if dtype is None else dtype)
    return PRNGKeyArray(threefry.seed_to_key(_seed_array("key", seed)))


def PRNGKey(seed, *, impl=None):
    """A raw PRNG key: a ``uint32[2]`` array, the seed's high and low 32 bits."""
    check_impl(impl)
    return threefry.seed_to_key(_seed_array("PRNGKey", seed))


def key_data(keys):
    """The raw ``uint32[..., 2]`` data of (a batch of) keys."""
    data, _ = unwrap("key_data", keys, allow_batched=True)
    return data


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys over raw key data of shape ``(..., 2)``."""
    check_impl(impl if dtype is None else dtype)
    data = _as_array(key_bits_array)
    _check_key_data(data)
    return PRNGKeyArray(data)


def key_impl(keys):
    """The name of the keys' PRNG implementation (always ``"threefry2x32"``)."""
    unwrap("key_impl", keys, allow_batched=True)
    return IMPL_NAME


# --- deriving keys -------------------------------------------------------------------------

def split(key, num=2):
    """``num`` new keys (an int, or a shape) from one key, along new leading axes."""
    data, typed = unwrap("split", key)
    shape = canonical_shape(tuple(num) if isinstance(num, (tuple, list)) else (num,))
    return rewrap(threefry.split_key(data, shape), typed)


def fold_in(key, data):
    """A new key from a key and a 32-bit integer (e.g. a step number)."""
    key_words, typed = unwrap("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use nbjax.vmap for batching.")
    if isinstance(data, int) and not isinstance(data, bool):
        # OverflowError outside [0, 2**32), as JAX
        word = np.uint32(scalar_in_range(data, dtypes.uint32))
    else:
        word = lax.convert_element_type(data, dtypes.uint32)
    return rewrap(threefry.fold_in_key(key_words, word), typed)


def clone(key):
    """The same key. JAX uses it to mark deliberate reuse for its key-reuse checker, which
    nbjax does not have, so it is the identity here."""
    return key


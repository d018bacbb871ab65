"""``nbjax.nn.initializers``: the starting weights of a network, as in
``jax.nn.initializers``.

An initializer is a function ``init(key, shape, dtype=None)`` returning a fresh array; the
functions here either are one (``zeros``, ``ones``) or build one from its parameters
(``normal(stddev)``, ``glorot_uniform()`` ...). The randomness comes from ``nbjax.random``
with the explicit ``key``, which draws JAX's streams, so real-valued weights are JAX's for the
same key.

The variance-scaling family (Glorot, He, LeCun) picks the weights' variance from the numbers
of inputs and outputs of the layer (its "fans") so that, at the start of training,
activations neither shrink nor blow up from layer to layer.
"""

import math
import typing

import numpy as np

from .. import numpy as jnp
from .. import random
from ..core import dtypes
from ..core.abstract import canonical_shape
from ..sharding import refuse_out_sharding

__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
    "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
    "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
    "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]


@typing.runtime_checkable
class Initializer(typing.Protocol):
    """What every initializer is: a function of a PRNG key, a shape and an optional dtype
    (the default float when None) that returns a new array."""

    def __call__(self, key, shape, dtype=None, out_sharding=None):
        ...


def _resolved_dtype(dtype, out_sharding):
    """The dtype to build (the default float for None), after refusing a sharding: an nbjax
    array lives whole on one device."""
    refuse_out_sharding("nn.initializers", out_sharding)
    return dtypes.default_float() if dtype is None else dtype


# --- constants -----------------------------------------------------------------------------

def zeros(key, shape, dtype=None, out_sharding=None):
    """An array of zeros (``key`` is ignored)."""
    return jnp.zeros(shape, _resolved_dtype(dtype, out_sharding))


def ones(key, shape, dtype=None, out_sharding=None):
    """An array of ones (``key`` is ignored)."""
    return jnp.ones(shape, _resolved_dtype(dtype, out_sharding))


def constant(value, dtype=None):
    """An initializer giving arrays full of ``value``; ``dtype`` is its default dtype."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        return jnp.full(shape, value, _resolved_dtype(dtype, out_sharding))
    return init


# --- plain distributions -------------------------------------------------------------------

def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from ``[0, scale)``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _resolved_dtype(dtype, out_sharding)
        return random.uniform(key, shape, dtype) * jnp.asarray(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing from a normal distribution with mean 0 and standard deviation
    ``stddev`` (a complex dtype gives a complex normal of that total variance)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _resolved_dtype(dtype, out_sharding)
        return random.normal(key, shape, dtype) * jnp.asarray(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing ``stddev * z``, ``z`` standard normal conditioned on
    ``lower < z < upper``. ``stddev`` is the deviation before truncation (the samples' own is
    smaller); ``variance_scaling`` is the one that corrects for it."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _resolved_dtype(dtype, out_sharding)
        return random.truncated_normal(key, lower, upper, shape, dtype) * \
            jnp.asarray(stddev, dtype)
    return init


# --- variance scaling ----------------------------------------------------------------------

def _size(shape, axes):
    """The number of elements along ``axes`` (one axis or a sequence of them)."""
    if isinstance(axes, int):
        return shape[axes]
    return math.prod(shape[axis] for axis in axes)


def _fans(shape, in_axis, out_axis, batch_axis):
    """``(fan_in, fan_out)`` of a weight array: the sizes of its input and output axes, each
    times the receptive field, i.e. the size of the remaining axes (a convolution's spatial
    ones). ``batch_axis`` holds independent kernels and counts for neither."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive_field = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive_field, out_size * receptive_field


_FAN_MODES = {
    "fan_in": lambda fan_in, fan_out: fan_in,
    "fan_out": lambda fan_in, fan_out: fan_out,
    "fan_avg": lambda fan_in, fan_out: (fan_in + fan_out) / 2,
    "fan_geo_avg": lambda fan_in, fan_out: (fan_in * fan_out) ** 0.5,
}

# The standard deviation of a standard normal truncated to [-2, 2],
# sqrt(1 - 4 phi(2) / erf(sqrt 2)): dividing by it gives the truncated samples the variance
# asked for.
_TRUNCATED_NORMAL_STDDEV = .87962566103423978
# JAX's counterpart for a complex normal whose modulus is truncated at 2. Its exact value
# would be sqrt(1 - 4 / (e^4 - 1)) = 0.96196; with JAX's constant, kept here so that the
# weights are JAX's, complex truncated-normal weights have 1.9% more variance than asked.
_COMPLEX_TRUNCATED_NORMAL_STDDEV = .95311164380491208


def _complex_polar(key, shape, dtype, radius):
    """A rotation-invariant complex sample ``radius(u) * exp(i theta)``, with ``u`` uniform on
    [0, 1) and the angle ``theta`` uniform on [0, 2 pi), independent: ``radius`` is the
    inverse CDF of the modulus."""
    key_radius, key_angle = random.split(key)
    real = np.finfo(dtype).dtype
    modulus = radius(random.uniform(key_radius, shape, real))
    angle = 2 * np.pi * random.uniform(key_angle, shape, real)
    return modulus.astype(dtype) * jnp.exp(1j * angle.astype(dtype))


def _complex_uniform_disk(key, shape, dtype):
    """Uniform on the disk of radius sqrt(2), whose mean |z|^2 is 1: the modulus's CDF is
    ``r^2 / 2``."""
    return _complex_polar(key, shape, dtype, lambda u: jnp.sqrt(2 * u))


def _complex_truncated_normal(key, upper, shape, dtype):
    """A complex normal of mean |z|^2 1 conditioned on ``|z| < upper``: |z|^2 of a complex
    normal is exponential, so ``|z|^2 = -log(1 - t)`` with ``t`` uniform on
    ``[0, 1 - exp(-upper^2))``."""
    def radius(u):
        return jnp.sqrt(-jnp.log1p(-(1 - math.exp(-upper ** 2)) * u))
    return _complex_polar(key, shape, dtype, radius)


def _sample_with_variance(distribution, key, shape, dtype, variance):
    """Weights of mean 0 and ``variance`` drawn from ``distribution``."""
    is_complex = dtypes.is_complex(dtypes.canonicalize(dtype))
    if distribution == "truncated_normal":
        if is_complex:
            stddev = jnp.sqrt(variance) / jnp.asarray(_COMPLEX_TRUNCATED_NORMAL_STDDEV, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        stddev = jnp.sqrt(variance) / jnp.asarray(_TRUNCATED_NORMAL_STDDEV, dtype)
        return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
    if distribution == "normal":
        return random.normal(key, shape, dtype) * jnp.sqrt(variance)
    if distribution == "uniform":
        if is_complex:
            return _complex_uniform_disk(key, shape, dtype) * jnp.sqrt(variance)
        # uniform on [-1, 1) has variance 1/3
        return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
    raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer whose weights have mean 0 and variance ``scale / n``, ``n`` the fan
    chosen by ``mode``: ``"fan_in"``, ``"fan_out"``, their mean ``"fan_avg"`` or geometric
    mean ``"fan_geo_avg"``.

    ``distribution`` is ``"truncated_normal"`` (cut at two standard deviations, then scaled
    so that the variance is still ``scale / n``), ``"normal"`` or ``"uniform"`` (a disk for
    complex dtypes). The fans are read from the weights' shape: ``in_axis`` and ``out_axis``
    (an axis or a sequence of axes) are the inputs and outputs, ``batch_axis`` is ignored,
    and every other axis is the receptive field of a convolution. ``mode`` and
    ``distribution`` are checked when the initializer is called, as in JAX.
    """
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _resolved_dtype(dtype, out_sharding)
        shape = canonical_shape(shape)
        if mode not in _FAN_MODES:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        fan = _FAN_MODES[mode](*_fans(shape, in_axis, out_axis, batch_axis))
        variance = jnp.asarray(scale / fan, dtype)
        return _sample_with_variance(distribution, key, shape, dtype, variance)
    return init


def _variance_scaling_preset(name, scale, mode, distribution, reference):
    """The named initializer ``variance_scaling(scale, mode, distribution, ...)``."""
    def preset(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis,
                                dtype)
    preset.__name__ = preset.__qualname__ = name
    preset.__doc__ = (f"{reference}: ``variance_scaling({scale}, {mode!r}, "
                      f"{distribution!r})`` with the given axes and dtype.")
    return preset


glorot_uniform = _variance_scaling_preset(
    "glorot_uniform", 1.0, "fan_avg", "uniform", "Glorot & Bengio (2010)")
glorot_normal = _variance_scaling_preset(
    "glorot_normal", 1.0, "fan_avg", "truncated_normal", "Glorot & Bengio (2010)")
lecun_uniform = _variance_scaling_preset(
    "lecun_uniform", 1.0, "fan_in", "uniform", "LeCun et al. (1998)")
lecun_normal = _variance_scaling_preset(
    "lecun_normal", 1.0, "fan_in", "truncated_normal", "LeCun et al. (1998)")
he_uniform = _variance_scaling_preset(
    "he_uniform", 2.0, "fan_in", "uniform", "He et al. (2015), for ReLU layers")
he_normal = _variance_scaling_preset(
    "he_normal", 2.0, "fan_in", "truncated_normal", "He et al. (2015), for ReLU layers")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


# --- orthogonal ----------------------------------------------------------------------------

def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer giving ``scale`` times a uniformly random orthogonal matrix: the axis
    ``column_axis`` indexes its columns, all other axes together its rows. A non-square one
    has orthonormal columns when it has more rows than columns, orthonormal rows otherwise."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _resolved_dtype(dtype, out_sharding)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if 0 in shape:
            return jnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        q = random.orthogonal(key, math.prod(shape) // n_cols, (), dtype, n_cols)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.asarray(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer for a convolution kernel of shape ``(*spatial, in, out)`` (1 to 3
    spatial axes, ``in <= out``) that is zero except at the spatial centre, where it is an
    ``in x out`` orthogonal matrix: the convolution then starts out as an orthogonal map of
    the channels, which keeps very deep networks trainable (Xiao et al., 2018)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _resolved_dtype(dtype, out_sharding)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        channels = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
        centre = tuple((size - 1) // 2 for size in shape[:-2])
        return jnp.zeros(shape, dtype).at[centre].set(channels)
    return init

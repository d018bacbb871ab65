"""``nbjax.image``: resizing and resampling images, as in ``jax.image``.

Pixels are unit squares: along an axis, input pixel ``i`` covers ``[i, i + 1)`` and its value
sits at its centre ``i + 0.5``. ``scale_and_translate`` maps an input position ``p`` to the
output position ``p * scale + translation``; ``resize`` is the case ``scale = out / in``,
``translation = 0``. Each output pixel's centre is mapped back into the input, and its value
is a weighted mean of the input pixels around there, the weights given by a kernel of the
distance (triangle for linear interpolation, Keys cubic, Lanczos) or by overlaps of pixel
squares (area). When an axis shrinks, ``antialias`` widens the kernel by the shrink factor,
so that every input pixel contributes (a low-pass filter) instead of aliasing.

Along an axis of ``m`` input and ``n`` output pixels the weights form an ``m x n`` matrix, and
the image is contracted with one such matrix per resized axis. So resampling is linear in
the image, written in ``nbjax.numpy``, and differentiable (in the scale and translation too),
batchable and compilable like any other function.
"""

import enum

import numpy as np

from . import lax
from . import numpy as jnp
from .core import dtypes
from .core.abstract import canonical_shape
from .numpy.util import canonicalize_axis, check_arraylike, promote_dtypes_inexact

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """How output pixels are computed from input pixels.

    - ``NEAREST``: the value of the input pixel under the output pixel's centre.
    - ``LINEAR``: linear interpolation (a triangle kernel of radius 1).
    - ``LANCZOS3``, ``LANCZOS5``: Lanczos resampling, the windowed sinc of radius 3 or 5.
    - ``CUBIC``: Keys' cubic convolution (``a = -0.5``, radius 2).
    - ``CUBIC_PYTORCH``: PyTorch's bicubic (``a = -0.75``, edges repeated instead of cut
      off); the same as ``CUBIC`` when antialiasing.
    - ``AREA``: the mean of the input over the output pixel's square (a box filter).
    """

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s):
        """The method named ``s`` ("nearest", "linear", "bilinear", "cubic", ...)."""
        if s not in _METHOD_NAMES:
            raise ValueError(f'Unknown resize method "{s}"')
        return _METHOD_NAMES[s]


_METHOD_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    "linear": ResizeMethod.LINEAR, "bilinear": ResizeMethod.LINEAR,
    "trilinear": ResizeMethod.LINEAR, "triangle": ResizeMethod.LINEAR,
    "lanczos3": ResizeMethod.LANCZOS3,
    "lanczos5": ResizeMethod.LANCZOS5,
    "cubic": ResizeMethod.CUBIC, "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
    "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
    "area": ResizeMethod.AREA,
}


def _resize_method(method):
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"method must be a ResizeMethod or its name, got {method!r}")
    return method


# --- kernels: the weight of an input pixel at distance x >= 0 from the sample --------------

def _triangle(x):
    return jnp.maximum(0, 1 - x)


def _keys_cubic(a):
    """Keys' (1981) piecewise-cubic kernel of radius 2 with parameter ``a``: it is 1 at 0, 0
    at the other integers, and has a continuous slope."""
    def kernel(x):
        inner = ((a + 2) * x - (a + 3)) * x * x + 1
        outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return jnp.where(x >= 2, 0.0, jnp.where(x >= 1, outer, inner))
    return kernel


def _lanczos(radius):
    """``sinc(x) * sinc(x / radius)`` within ``radius``, 0 beyond: the ideal (sinc)
    interpolator tapered by a wider sinc so that it has finite support."""
    def kernel(x):
        return jnp.where(x > radius, 0.0, jnp.sinc(x) * jnp.sinc(x / radius))
    return kernel


_KERNELS = {  # method: (radius, kernel)
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _keys_cubic(-0.75)),
}


# --- weight matrices -----------------------------------------------------------------------

def _kernel_weights(sample, in_size, kernel, kernel_scale, dtype):
    """``kernel(|sample - centre| / kernel_scale)`` for every input pixel centre (rows) and
    sample (columns)."""
    centres = jnp.arange(in_size, dtype=dtype)
    return kernel(jnp.abs(sample[None, :] - centres[:, None]) / kernel_scale)


def _edge_repeating_weights(sample, in_size, method, dtype):
    """Kernel weights as if the input were extended past each edge by the kernel's radius,
    repeating its edge pixels: the weight of each position outside goes to the edge pixel."""
    radius, kernel = _KERNELS[method]
    positions = np.arange(-radius, in_size + radius)
    weights = kernel(jnp.abs(sample[None, :] - jnp.asarray(positions, dtype)[:, None]))
    pixel = np.clip(positions, 0, in_size - 1)
    return jnp.zeros((in_size, sample.shape[0]), dtype).at[pixel].add(weights)


def _area_weights(in_size, out_size, inv_scale, translation, dtype):
    """The length of the overlap of each input pixel's interval (rows) with each output
    pixel's interval mapped into the input (columns)."""
    out_left = jnp.arange(out_size, dtype=dtype) * inv_scale - translation * inv_scale
    in_left = jnp.arange(in_size, dtype=dtype)[:, None]
    overlap = jnp.minimum(out_left + inv_scale, in_left + 1) - jnp.maximum(out_left, in_left)
    return jnp.maximum(0, overlap)


def _normalize_columns(weights):
    """Each column divided by its sum, so the weights of an output pixel add up to 1; a
    column summing to about 0 (no input pixel in reach) becomes 0."""
    total = jnp.sum(weights, axis=0, keepdims=True)
    significant = jnp.abs(total) > 1000 * float(np.finfo(np.float32).eps)
    # the inner where keeps the unused quotients (and so the gradients) finite
    return jnp.where(significant, weights / jnp.where(significant, total, 1), 0)


def _weight_matrix(in_size, out_size, scale, translation, method, antialias, dtype):
    """The ``in_size x out_size`` matrix whose column ``j`` holds the weights of the input
    pixels in output pixel ``j``, in ``dtype``."""
    inv_scale = 1 / scale
    # output pixel j's centre j + 0.5 mapped into the input, measured from pixel 0's centre
    sample = ((jnp.arange(out_size, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale
              - 0.5)
    repeat_edges = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    if repeat_edges:
        return _normalize_columns(_edge_repeating_weights(sample, in_size, method, dtype))
    if method is ResizeMethod.AREA:
        weights = _area_weights(in_size, out_size, inv_scale, translation, dtype)
    else:
        kernel_scale = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
        weights = _kernel_weights(sample, in_size, _KERNELS[method][1], kernel_scale, dtype)
    inside = (sample >= -0.5) & (sample <= in_size - 0.5)  # samples off the image are 0
    return jnp.where(inside[None, :], _normalize_columns(weights), 0)


def _resample(image, shape, spatial_dims, scale, translation, method, antialias, precision,
              dtype):
    """``image`` contracted along each of ``spatial_dims`` with its weight matrix (the weights
    computed in ``dtype``, then cast to the image's dtype)."""
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    for i, axis in enumerate(spatial_dims):
        axis = canonicalize_axis(axis, image.ndim)
        weights = _weight_matrix(image.shape[axis], shape[axis], scale[i], translation[i],
                                 method, antialias, dtype).astype(image.dtype)
        image = jnp.tensordot(image, weights, axes=([axis], [0]), precision=precision)
        image = jnp.moveaxis(image, -1, axis)
    return image


# --- the public functions ------------------------------------------------------------------

def _checked_shape(name, image, shape):
    check_arraylike(name, image)
    shape = canonical_shape(shape)
    if len(shape) != jnp.ndim(image):
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {jnp.shape(image)}")
    return shape


def _resize_nearest(image, shape):
    """Each output pixel copies the input pixel under its centre: along an axis of ``m``
    input and ``n`` output pixels, pixel ``j`` copies ``floor((j + 0.5) * m / n)`` (computed
    in float32, as JAX does)."""
    image = jnp.asarray(image)
    for axis, (m, n) in enumerate(zip(image.shape, shape)):
        if m != n:
            centres = (np.arange(n, dtype=np.float32) + np.float32(0.5)) * np.float32(m)
            source = np.floor(centres / np.float32(n)).astype(np.int32)
            image = jnp.take(image, source, axis=axis)
    return image


def resize(image, shape, method, antialias=True, precision=lax.Precision.HIGHEST):
    """``image`` resampled to ``shape`` (every axis; an axis of unchanged size is left as it
    is) with ``method``, a ``ResizeMethod`` or its name ("nearest", "linear", "bilinear",
    "trilinear", "triangle", "lanczos3", "lanczos5", "cubic", "bicubic", "tricubic",
    "cubic-pytorch", "bicubic-pytorch", "area").

    ``NEAREST`` keeps the image's dtype (and ignores ``antialias`` and ``precision``); the
    other methods return floats (integers and bools become the default float). With
    ``antialias`` a shrinking axis is low-pass filtered.
    """
    shape = _checked_shape("resize", image, shape)
    method = _resize_method(method)
    if method is ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    (image,) = promote_dtypes_inexact(image)
    spatial_dims = [axis for axis, (m, n) in enumerate(zip(image.shape, shape)) if m != n]
    # an axis resized to 0 samples nothing, and any scale will do
    scale = [shape[axis] / image.shape[axis] if shape[axis] else 1.0 for axis in spatial_dims]
    return _resample(image, shape, spatial_dims, scale, [0.0] * len(spatial_dims), method,
                     antialias, precision, dtypes.default_float())


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias=True, precision=lax.Precision.HIGHEST):
    """``image`` resampled to ``shape`` under the map ``p -> p * scale + translation`` of
    positions along ``spatial_dims`` (``scale`` and ``translation``: arrays with one entry
    per spatial axis; pixel ``i`` is centred at ``i + 0.5``). Output pixels whose centres
    map to outside the input are 0 (but for ``CUBIC_PYTORCH`` without ``antialias``, which
    repeats the edge pixels outwards).

    ``method`` is a ``ResizeMethod`` or its name, anything but nearest; the result is a
    float array. With ``antialias``, axes with ``scale < 1`` are low-pass filtered. The
    result is differentiable in ``scale`` and ``translation`` as well as in ``image``.
    """
    shape = _checked_shape("scale_and_translate", image, shape)
    method = _resize_method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    check_arraylike("scale_and_translate", scale, translation)
    spatial_dims = tuple(spatial_dims)
    if not len(spatial_dims) == jnp.size(scale) == jnp.size(translation):
        raise ValueError(f"scale_and_translate: spatial_dims, scale and translation must have "
                         f"the same length, got {len(spatial_dims)}, {jnp.size(scale)} and "
                         f"{jnp.size(translation)}")
    (image,) = promote_dtypes_inexact(image)
    scale, translation = promote_dtypes_inexact(scale, translation)
    return _resample(image, shape, spatial_dims, jnp.ravel(scale), jnp.ravel(translation),
                     method, antialias, precision, scale.dtype)

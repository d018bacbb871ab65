"""nbjax.image: resize and scale_and_translate against a float64 NumPy statement of their
semantics (half-pixel centres, textbook kernels, normalised weights, antialiasing by
widening the kernel), against exact answers (identity, ramps, constants, block means, the
nearest pixel), and against JAX's values when JAX imports; with their dtypes, errors,
gradients, vmap and jit."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.image import ResizeMethod, resize, scale_and_translate
from nbjax.test_util import check_grads

from helpers import assert_close, check_vmap

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None

RNG = np.random.default_rng(11)
KERNEL_METHODS = ["linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]


# --- a float64 NumPy statement of the semantics, one axis at a time --------------------------

def _keys_cubic(a):
    def kernel(x):
        return np.where(x < 1, (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1,
                        np.where(x < 2, a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a, 0))
    return kernel


KERNELS = {  # method: (radius, kernel of the distance x >= 0)
    "linear": (1, lambda x: np.maximum(0, 1 - x)),
    "cubic": (2, _keys_cubic(-0.5)),
    "cubic-pytorch": (2, _keys_cubic(-0.75)),
    "lanczos3": (3, lambda x: np.where(x < 3, np.sinc(x) * np.sinc(x / 3), 0)),
    "lanczos5": (5, lambda x: np.where(x < 5, np.sinc(x) * np.sinc(x / 5), 0)),
}


def _reference_weights(m, n, scale, translation, method, antialias):
    """Row ``j`` of the ``n x m`` result: the weights of the ``m`` input pixels in output
    pixel ``j``, straight from the definitions, in float64."""
    weights = np.zeros((n, m))
    for j in range(n):
        # output pixel j covers [j, j + 1); its centre maps to input position p
        p = (j + 0.5 - translation) / scale
        repeat_edges = method == "cubic-pytorch" and not antialias
        if not (0 <= p <= m or repeat_edges):  # outside the input: 0
            continue
        if method == "area":
            left, right = (j - translation) / scale, (j + 1 - translation) / scale
            row = [max(0.0, min(right, i + 1) - max(left, i)) for i in range(m)]
        elif repeat_edges:  # the edge pixels continue outwards
            radius, kernel = KERNELS[method]
            row = np.zeros(m)
            for i in range(-radius, m + radius):
                row[min(max(i, 0), m - 1)] += kernel(abs(p - (i + 0.5)))
        else:
            widen = max(1 / scale, 1) if antialias else 1
            kernel = KERNELS["cubic" if method == "cubic-pytorch" else method][1]
            row = kernel(np.abs(p - (np.arange(m) + 0.5)) / widen)
        if np.sum(row):  # else no input pixel is within the kernel's reach: 0
            weights[j] = np.asarray(row) / np.sum(row)
    return weights


def _reference(image, shape, spatial_dims, scale, translation, method, antialias=True):
    out = np.asarray(image, np.float64)
    for axis, s, t in zip(spatial_dims, scale, translation):
        w = _reference_weights(out.shape[axis], shape[axis], s, t, method, antialias)
        out = np.moveaxis(np.tensordot(out, w, axes=([axis], [1])), -1, axis)
    return out


def _reference_resize(image, shape, method, antialias=True):
    dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    scale = [shape[d] / image.shape[d] for d in dims]
    return _reference(image, shape, dims, scale, [0.0] * len(dims), method, antialias)


def _close(actual, expected, rtol=1e-5):
    """Agreement to float32 rounding: output pixels are short weighted sums of inputs."""
    assert_close(np.asarray(actual), expected, rtol=rtol)


# --- against the NumPy statement -------------------------------------------------------------

@pytest.mark.parametrize("method", KERNEL_METHODS)
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("shape", [(9, 13, 2), (3, 4, 2), (4, 11, 2), (5, 7, 2)])
def test_resize_matches_the_definition(method, antialias, shape):
    image = RNG.standard_normal((5, 7, 2)).astype(np.float32)
    out = resize(image, shape, method, antialias)
    assert out.dtype == np.float32 and out.shape == shape
    _close(out, _reference_resize(image, shape, method, antialias))


@pytest.mark.parametrize("method", KERNEL_METHODS)
@pytest.mark.parametrize("antialias", [True, False])
def test_scale_and_translate_matches_the_definition(method, antialias):
    image = RNG.standard_normal((6, 5)).astype(np.float32)
    for scale, translation in [((1.7, 0.45), (0.6, -1.3)), ((0.6, 2.5), (-0.8, 2.2))]:
        out = scale_and_translate(image, (7, 9), (0, 1), np.array(scale, np.float32),
                                  np.array(translation, np.float32), method, antialias)
        _close(out, _reference(image, (7, 9), (0, 1), scale, translation, method, antialias))


def test_only_the_named_spatial_dims_are_resampled():
    image = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    out = scale_and_translate(image, (4, 3, 8), (-1,), np.array([1.5]), np.array([0.25]),
                              "cubic")
    _close(out, _reference(image, (4, 3, 8), (2,), [1.5], [0.25], "cubic"))


# --- exact answers ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["nearest"] + KERNEL_METHODS)
def test_the_same_shape_is_the_identity(method):
    image = RNG.standard_normal((3, 4)).astype(np.float32)
    assert np.array_equal(np.asarray(resize(image, image.shape, method)), image)
    if method != "nearest":  # every kernel is 1 at 0 and 0 at the other integers
        out = scale_and_translate(image, (3, 4), (0, 1), np.ones(2), np.zeros(2), method)
        _close(out, image, rtol=1e-6)


@pytest.mark.parametrize("m,n", [(4, 9), (5, 12), (3, 3 * 7)])
def test_linear_upsampling_of_a_ramp_is_exact(m, n):
    """Inside the input the samples lie on the ramp; past the outer pixel centres only one
    pixel is in reach, so the ramp is clamped there."""
    ramp = (0.75 * np.arange(m) - 2).astype(np.float32)
    sample = (np.arange(n) + 0.5) * m / n - 0.5  # from pixel 0's centre
    _close(resize(ramp, (n,), "linear"), 0.75 * np.clip(sample, 0, m - 1) - 2, rtol=1e-6)


def test_cubic_upsampling_reproduces_a_quadratic_away_from_the_edges():
    m, n = 8, 29
    quadratic = (0.3 * np.arange(m) ** 2 - np.arange(m) + 2).astype(np.float32)
    sample = (np.arange(n) + 0.5) * m / n - 0.5
    interior = (np.floor(sample) >= 1) & (np.floor(sample) + 2 <= m - 1)  # 4 taps inside
    out = np.asarray(resize(quadratic, (n,), "cubic"))
    _close(out[interior], (0.3 * sample ** 2 - sample + 2)[interior], rtol=1e-6)


@pytest.mark.parametrize("method", KERNEL_METHODS)
@pytest.mark.parametrize("shape", [(3, 2), (5, 7), (1, 1), (4, 3)])
def test_downsampling_a_constant_gives_the_constant(method, shape):
    image = np.full((12, 9), 2.5, np.float32)
    for antialias in [True, False]:
        _close(resize(image, shape, method, antialias), np.full(shape, 2.5), rtol=1e-6)


def test_area_and_antialiased_linear_downsampling_by_integer_factors():
    x = RNG.standard_normal(12).astype(np.float32)
    _close(resize(x, (4,), "area"), x.reshape(4, 3).mean(axis=1))
    _close(resize(x, (6,), "linear", antialias=False), x.reshape(6, 2).mean(axis=1))
    # antialiased, the triangle is twice as wide: taps 1/8, 3/8, 3/8, 1/8 around each pair
    inner = np.asarray(resize(x, (6,), "linear"))[1:-1]
    j = np.arange(1, 5)
    _close(inner, (x[2 * j - 1] + 3 * x[2 * j] + 3 * x[2 * j + 1] + x[2 * j + 2]) / 8)


def test_translation_by_whole_pixels_shifts_and_leaves_zeros_outside():
    x = np.arange(1, 6, dtype=np.float32)
    out = scale_and_translate(x, (8,), (0,), np.array([1.0]), np.array([2.0]), "linear")
    _close(out, [0, 0, 1, 2, 3, 4, 5, 0], rtol=1e-6)


@pytest.mark.parametrize("m,n,expected", [
    (3, 5, [0, 0, 1, 2, 2]),  # (j + 0.5) * 3/5 = 0.3, 0.9, 1.5, 2.1, 2.7
    (5, 2, [1, 3]),  # (j + 0.5) * 5/2 = 1.25, 3.75
    (4, 8, [0, 0, 1, 1, 2, 2, 3, 3]),
    (6, 3, [1, 3, 5]),
    (7, 1, [3]),
])
def test_nearest_picks_the_pixel_under_each_centre(m, n, expected):
    image = np.arange(m, dtype=np.int32)
    out = resize(image, (n,), "nearest")
    assert out.dtype == np.int32
    assert np.array_equal(np.asarray(out), expected)
    grid = resize(np.arange(m * 2).reshape(m, 2), (n, 2), ResizeMethod.NEAREST)
    assert np.array_equal(np.asarray(grid), np.arange(m * 2).reshape(m, 2)[expected])


def test_dtypes():
    ints = np.arange(12, dtype=np.uint8).reshape(3, 4)
    for dtype in [np.int32, np.uint8, np.bool_, np.float16, "bfloat16", np.complex64]:
        image = ints.astype(dtype)
        assert resize(image, (5, 7), "nearest").dtype == np.dtype(dtype)
        floats = np.float32 if dtype in (np.int32, np.uint8, np.bool_) else dtype
        assert resize(image, (5, 7), "linear").dtype == np.dtype(floats)
    # integers are not rounded: they become floats
    _close(resize(np.array([0, 1], np.int32), (4,), "linear"), [0, 0.25, 0.75, 1], rtol=1e-6)
    c = resize(np.array([1j, 3 + 1j], np.complex64), (4,), "linear")
    _close(c, [1j, 0.75 + 1j, 2.25 + 1j, 3 + 1j], rtol=1e-6)
    assert resize(np.float32(2), (), "cubic").dtype == np.float32
    with nbjax.enable_x64(True):
        assert resize(ints.astype(np.int64), (5, 7), "linear").dtype == np.float64
        # an 8-bit image computes in float32 even under x64, whatever the scale's type (JAX)
        assert scale_and_translate(ints, (5, 7), (0, 1), np.ones(2), np.zeros(2),
                                   "cubic").dtype == np.float32


def test_resize_methods_and_their_names():
    assert [m.name for m in ResizeMethod] == ["NEAREST", "LINEAR", "LANCZOS3", "LANCZOS5",
                                              "CUBIC", "CUBIC_PYTORCH", "AREA"]
    names = {"nearest": "NEAREST", "linear": "LINEAR", "bilinear": "LINEAR",
             "trilinear": "LINEAR", "triangle": "LINEAR", "lanczos3": "LANCZOS3",
             "lanczos5": "LANCZOS5", "cubic": "CUBIC", "bicubic": "CUBIC",
             "tricubic": "CUBIC", "cubic-pytorch": "CUBIC_PYTORCH",
             "bicubic-pytorch": "CUBIC_PYTORCH", "area": "AREA"}
    for name, member in names.items():
        assert ResizeMethod.from_string(name) is ResizeMethod[member]
    image = RNG.standard_normal((3, 4)).astype(np.float32)
    assert np.array_equal(np.asarray(resize(image, (5, 5), "bicubic")),
                          np.asarray(resize(image, (5, 5), ResizeMethod.CUBIC)))


def test_errors():
    image = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="shape must have length"):
        resize(image, (5,), "linear")
    with pytest.raises(ValueError, match="Unknown resize method"):
        resize(image, (5, 5), "LINEAR")
    with pytest.raises(TypeError, match="ResizeMethod"):
        resize(image, (5, 5), 1)
    with pytest.raises(TypeError):
        resize([[1.0, 2.0]], (2, 2), "linear")
    with pytest.raises(ValueError, match="Nearest neighbor"):
        scale_and_translate(image, (5, 5), (0, 1), np.ones(2), np.zeros(2), "nearest")
    with pytest.raises(ValueError, match="same length"):
        scale_and_translate(image, (5, 5), (0, 1), np.ones(1), np.zeros(1), "linear")
    with pytest.raises(TypeError):
        scale_and_translate(image, (5, 5), (0, 1), [1.0, 1.0], [0.0, 0.0], "linear")
    with pytest.raises(ZeroDivisionError):  # as JAX: no scale maps an empty axis
        resize(np.ones((0, 3)), (2, 3), "linear")
    assert resize(image, (0, 4), "linear").shape == (0, 4)


# --- transformations -------------------------------------------------------------------------

@pytest.mark.parametrize("method", KERNEL_METHODS)
def test_gradients(method):
    image = RNG.standard_normal((4, 5)).astype(np.float32)
    check_grads(lambda x: resize(x, (7, 3), method), (image,), order=1, eps=1e-2,
                rtol=1e-2, atol=1e-2)
    # scale and translation chosen so that no sample sits on a kernel's kink or an edge
    scale, translation = np.array([1.37, 0.73], np.float32), np.array([0.31, -0.17],
                                                                       np.float32)
    check_grads(lambda s, t: scale_and_translate(image, (6, 6), (0, 1), s, t, method),
                (scale, translation), order=1, eps=1e-3, rtol=2e-2, atol=2e-2)


def test_vmap_over_images_and_over_scales():
    images = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    check_vmap(lambda x: resize(x, (7, 3), "lanczos3"), [images], [0], rtol=1e-6)
    check_vmap(lambda x: resize(x, (2, 6), "nearest"), [images], [2], rtol=1e-6)
    scales = np.array([[1.3, 0.7], [0.5, 2.0], [1.0, 1.0]], np.float32)
    check_vmap(lambda x, s: scale_and_translate(x, (6, 6), (0, 1), s, jnp.zeros(2), "cubic"),
               [images, scales], [0, 0], rtol=1e-6)


@pytest.mark.parametrize("method", ["linear", "cubic-pytorch", "nearest"])
def test_jit_matches_eager(method):
    image = RNG.standard_normal((5, 6)).astype(np.float32)
    compiled = nbjax.jit(lambda x: resize(x, (8, 4), method, antialias=False))(image)
    _close(compiled, np.asarray(resize(image, (8, 4), method, antialias=False)), rtol=1e-6)
    scale, translation = np.array([1.2, 0.6], np.float32), np.array([0.4, 0.1], np.float32)
    compiled = nbjax.jit(lambda s, t: scale_and_translate(image, (6, 6), (0, 1), s, t,
                                                          "area"))(scale, translation)
    eager = scale_and_translate(image, (6, 6), (0, 1), scale, translation, "area")
    _close(compiled, np.asarray(eager), rtol=1e-6)


# --- against JAX -----------------------------------------------------------------------------

@pytest.mark.skipif(jax is None, reason="jax not installed")
@pytest.mark.parametrize("method", ["nearest"] + KERNEL_METHODS)
def test_resize_matches_jax(method):
    image = RNG.standard_normal((5, 7, 3)).astype(np.float32)
    for shape in [(9, 13, 3), (2, 3, 3), (11, 1, 3)]:  # up, down, both
        for antialias in [True, False]:
            ours = resize(image, shape, method, antialias)
            theirs = jax.image.resize(image, shape, method, antialias)
            assert ours.dtype == theirs.dtype
            _close(ours, np.asarray(theirs), rtol=1e-6)


@pytest.mark.skipif(jax is None, reason="jax not installed")
@pytest.mark.parametrize("method", KERNEL_METHODS)
def test_scale_and_translate_and_its_gradient_match_jax(method):
    image = RNG.standard_normal((6, 5)).astype(np.float32)
    # away from the kernels' kinks, where derivatives are one-sided (and JAX's jit and eager
    # ones differ)
    scale, translation = np.array([0.63, 1.71], np.float32), np.array([0.77, -1.29],
                                                                       np.float32)

    def loss(module, s, t):
        out = module.image.scale_and_translate(image, (7, 9), (0, 1), s, t, method)
        return (out * np.arange(63).reshape(7, 9)).sum()
    _close(scale_and_translate(image, (7, 9), (0, 1), scale, translation, method),
           np.asarray(jax.image.scale_and_translate(image, (7, 9), (0, 1), scale,
                                                    translation, method)), rtol=1e-6)
    ours = nbjax.grad(lambda s, t: loss(nbjax, s, t), argnums=(0, 1))(scale, translation)
    theirs = jax.jit(jax.grad(lambda s, t: loss(jax, s, t), argnums=(0, 1)))(scale,
                                                                           translation)
    for a, b in zip(ours, theirs):
        _close(a, np.asarray(b), rtol=1e-4)


@pytest.mark.skipif(jax is None, reason="jax not installed")
def test_dtypes_match_jax():
    image = np.arange(12).reshape(3, 4)
    for dtype in [np.int32, np.uint8, np.bool_, np.float16, np.complex64]:
        for method in ["nearest", "linear"]:
            ours = resize(image.astype(dtype), (5, 7), method)
            theirs = jax.image.resize(image.astype(dtype), (5, 7), method)
            assert ours.dtype == theirs.dtype
            if dtype != np.float16:  # float16 rounds after each axis here, once in JAX
                _close(ours, np.asarray(theirs), rtol=1e-6)


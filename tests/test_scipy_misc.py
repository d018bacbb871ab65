"""nbjax.scipy.fft (the DCT), nbjax.scipy.integrate and nbjax.scipy.ndimage against SciPy in
float64 on random inputs, with JAX's dtypes and errors, gradients against finite differences,
vmap against a loop, jit against eager, and JAX's own values when JAX imports."""

import numpy as np
import pytest
import scipy.fft as sf
import scipy.integrate as si
import scipy.ndimage as nd

import nbjax
import nbjax.numpy as jnp
import nbjax.scipy.fft as F
import nbjax.scipy.integrate as I
import nbjax.scipy.ndimage as N
from nbjax.test_util import check_grads
from helpers import assert_close, check_vmap, random_array

try:
    import jax
    import jax.scipy.fft as jax_fft
    import jax.scipy.ndimage as jax_ndimage
except ImportError:  # JAX is a test reference only
    jax = None

rng = np.random.default_rng(1)


def _wide(x):
    return np.asarray(x).astype(np.result_type(np.asarray(x).dtype, np.float64))


# --- the discrete cosine transform ----------------------------------------------------------

DCT_SHAPES = [(1,), (2,), (5,), (8,), (3, 4), (4, 1, 5), (1, 6)]


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", DCT_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["dct", "idct"])
def test_dct_matches_scipy(name, shape, dtype):
    x = random_array(rng, shape, dtype)
    for axis in range(-len(shape), len(shape)):
        for n in [None, 1, 3, 9]:
            for norm in [None, "backward", "ortho"]:
                got = getattr(F, name)(x, n=n, axis=axis, norm=norm)
                assert got.dtype == dtype
                want = getattr(sf, name)(_wide(x), n=n, axis=axis, norm=norm)
                # FFT rounding errors are relative to the largest output (the default scale)
                assert_close(got, want, rtol=1e-5, err_msg=f"axis={axis} n={n} norm={norm}")


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("s, axes", [(None, None), ([3], None), (4, None), (None, 0),
                                     ([2, 7], (1, 0)), (None, (-1, 1)), ([1, 3, 2], None)],
                         ids=str)
@pytest.mark.parametrize("name", ["dctn", "idctn"])
def test_dctn_matches_scipy(name, s, axes, dtype):
    x = random_array(rng, (3, 4, 5), dtype)
    for norm in [None, "ortho"]:
        got = getattr(F, name)(x, s=s, axes=axes, norm=norm)
        assert got.dtype == dtype
        want = getattr(sf, name)(_wide(x), s=s, axes=axes, norm=norm)
        assert_close(got, want, rtol=1e-5, err_msg=str(norm))


def test_idct_inverts_dct():
    x = random_array(rng, (3, 7))
    for norm in [None, "ortho"]:
        assert_close(F.idct(F.dct(x, norm=norm), norm=norm), x, rtol=1e-5)
        assert_close(F.idctn(F.dctn(x, norm=norm), norm=norm), x, rtol=1e-5)


@pytest.mark.parametrize("dtype, x64, expected", [
    (np.int32, False, np.float32), (np.bool_, False, np.float32),
    (np.float16, False, np.float32), (np.float32, False, np.float32),
    (np.complex64, False, np.complex64), (np.float64, True, np.float64),
    (np.complex128, True, np.complex128)])
def test_dct_dtypes_as_jax(dtype, x64, expected):
    """As JAX's: the real type of the complex FFT inside (float16 transforms as float32)."""
    with nbjax.enable_x64(x64):
        x = random_array(rng, (2, 4), dtype)
        for fn in [F.dct, F.idct, F.dctn, F.idctn]:
            assert fn(x).dtype == expected, fn.__name__


def test_dct_errors_as_jax():
    x = jnp.ones((3, 4))
    for fn in [F.dct, F.idct, F.dctn, F.idctn]:
        with pytest.raises(NotImplementedError, match="Only DCT type 2"):
            fn(x, type=3)
        with pytest.raises(ValueError, match="norm='forward' is not implemented"):
            fn(x, norm="forward")
        with pytest.raises(TypeError, match="ndarray or scalar"):
            fn([1.0, 2.0])
    with pytest.raises(ValueError, match="out of bounds"):
        F.dct(x, axis=2)
    with pytest.raises(ValueError, match="s must have at most x.ndim"):
        F.dctn(x, s=[1, 2, 3])
    with pytest.raises(ValueError, match="repeated axis"):
        F.idctn(x, axes=(0, 0))


@pytest.mark.filterwarnings("ignore:nbjax cpu backend")  # complex steps run on the reference
def test_dct_transforms():
    x = random_array(rng, (3, 6))

    def fns():
        yield lambda x: F.dct(x, norm="ortho")
        yield lambda x: F.idct(x, n=8)
        yield lambda x: F.dctn(x, s=[5], axes=[0])
        yield lambda x: F.idctn(x, norm="ortho")
    for fn in fns():
        check_vmap(fn, (x,), (0,), rtol=1e-5)
        check_vmap(fn, (x,), (1,), rtol=1e-5)
        assert_close(nbjax.jit(fn)(x), fn(x), rtol=1e-6)
        with nbjax.enable_x64():
            check_grads(fn, (x.astype(np.float64),), order=2)
    z = random_array(rng, (4,), np.complex128)
    with nbjax.enable_x64():
        check_grads(F.dct, (z,), order=1)


# --- integration -----------------------------------------------------------------------------

def test_trapezoid_matches_scipy():
    y = random_array(rng, (3, 7))
    x = np.sort(random_array(rng, (7,)))
    assert I.trapezoid(y).dtype == np.float32
    assert_close(I.trapezoid(y), si.trapezoid(_wide(y)), rtol=1e-5, scale=np.abs(y).sum())
    assert_close(I.trapezoid(y, dx=0.5, axis=0), si.trapezoid(_wide(y), dx=0.5, axis=0),
                 rtol=1e-5, scale=np.abs(y).sum())
    assert_close(I.trapezoid(y, x), si.trapezoid(_wide(y), _wide(x)), rtol=1e-5,
                 scale=np.abs(y).sum() * np.ptp(x))
    assert I.trapezoid(np.arange(5)).dtype == np.float32
    check_vmap(lambda y: I.trapezoid(y, x), (y,), (0,), rtol=1e-5)


# --- interpolation ---------------------------------------------------------------------------

# JAX's modes are SciPy's documented ones: its "constant" and "wrap" are SciPy's grid- modes.
SCIPY_MODE = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap",
              "mirror": "mirror", "reflect": "reflect"}


def _coordinates(shape, points=9):
    """Coordinates inside, near and far outside each axis (none at a half-integer, where
    rounding conventions differ)."""
    return [rng.uniform(-2 * n - 1.3, 3 * n + 1.3, points).astype(np.float32) for n in shape]


@pytest.mark.parametrize("mode", sorted(SCIPY_MODE))
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("shape", [(1,), (2,), (5,), (4, 6), (1, 3), (3, 2, 4)], ids=str)
def test_map_coordinates_matches_scipy(shape, order, mode):
    x = random_array(rng, shape)
    coordinates = _coordinates(shape)
    got = N.map_coordinates(x, coordinates, order, mode, cval=0.5)
    assert got.dtype == np.float32
    want = nd.map_coordinates(_wide(x), np.array(coordinates, np.float64), order=order,
                              mode=SCIPY_MODE[mode], cval=0.5)
    assert_close(got, want, rtol=1e-5, scale=np.abs(x).max())


def test_map_coordinates_dtypes_as_jax():
    """The input's dtype; integer inputs are rounded (halves away from zero)."""
    image = np.array([[0, -10, 20], [30, 40, 50]], np.int32)
    got = N.map_coordinates(image, [np.array([0.0, 0.5]), np.array([0.25, 1.5])], 1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [-3, 25])  # -2.5 and the mean of four
    ints = N.map_coordinates(image, [np.array([1, -1]), np.array([2, 4])], 0, "wrap")
    np.testing.assert_array_equal(ints, [50, 40])
    with nbjax.enable_x64():
        assert N.map_coordinates(image.astype(np.float32), [np.array([0.5])] * 2,
                                 1).dtype == np.float32


def test_map_coordinates_errors_as_jax():
    x = jnp.ones((3, 4))
    with pytest.raises(ValueError, match="coordinates must be a sequence of length"):
        N.map_coordinates(x, [jnp.zeros(2)], 1)
    with pytest.raises(NotImplementedError, match="does not yet support mode grid-wrap"):
        N.map_coordinates(x, [jnp.zeros(2)] * 2, 1, "grid-wrap")
    with pytest.raises(NotImplementedError, match="requires order<=1"):
        N.map_coordinates(x, [jnp.zeros(2)] * 2, 3)


def test_map_coordinates_transforms():
    x = random_array(rng, (4, 5))
    coordinates = np.stack(_coordinates((4, 5), points=6))
    for mode in SCIPY_MODE:
        fn = lambda x, c: N.map_coordinates(x, list(c), 1, mode, cval=0.25)  # noqa: E731
        check_vmap(fn, (np.stack([x, -x]), coordinates), (0, None), rtol=1e-6)
        check_vmap(fn, (x, np.stack([coordinates, coordinates[::-1]])), (None, 0), rtol=1e-6)
        assert_close(nbjax.jit(fn)(x, coordinates), fn(x, coordinates), rtol=1e-6)
        with nbjax.enable_x64():  # linear between grid points: differentiable there
            check_grads(fn, (x.astype(np.float64), coordinates.astype(np.float64)), order=1)


# --- JAX's own values --------------------------------------------------------------------------

@pytest.mark.skipif(jax is None, reason="JAX is not installed")
def test_values_and_dtypes_as_jax():
    x = random_array(rng, (5, 6))
    coordinates = _coordinates((5, 6))
    cases = [(F.dct, jax_fft.dct, (x,), {"n": 8, "axis": 0, "norm": "ortho"}),
             (F.idct, jax_fft.idct, (x.astype(np.complex64),), {}),
             (F.dctn, jax_fft.dctn, (x,), {"s": [3, 9]}),
             (F.idctn, jax_fft.idctn, (x,), {"axes": [1], "norm": "ortho"})]
    cases += [(N.map_coordinates, jax_ndimage.map_coordinates, (x, coordinates),
               {"order": order, "mode": mode, "cval": 1.5})
              for order in [0, 1] for mode in SCIPY_MODE]
    for ours, theirs, args, kwargs in cases:
        got = ours(*args, **kwargs)
        want = theirs(*jax.tree_util.tree_map(jax.numpy.asarray, args), **kwargs)
        assert got.dtype == want.dtype
        assert_close(got, want, rtol=1e-5, err_msg=str(kwargs))

"""nbjax.nn.initializers: shapes and dtypes, the statistics of large samples (variance within
a tolerance from the sample size, truncation bounds, orthogonality), the fans read from
conv-shaped kernels, JAX's errors, and (when JAX imports) the very weights JAX draws for the
same key: nbjax.random draws JAX's streams."""

import inspect
import math

import numpy as np
import pytest
from scipy import stats

import nbjax
from nbjax.nn import initializers as init

from helpers import assert_close

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None

KEY = nbjax.random.key(42)
PRESETS = {  # name: (scale, mode, distribution), as documented by JAX
    "glorot_uniform": (1.0, "fan_avg", "uniform"),
    "glorot_normal": (1.0, "fan_avg", "truncated_normal"),
    "xavier_uniform": (1.0, "fan_avg", "uniform"),
    "xavier_normal": (1.0, "fan_avg", "truncated_normal"),
    "lecun_uniform": (1.0, "fan_in", "uniform"),
    "lecun_normal": (1.0, "fan_in", "truncated_normal"),
    "he_uniform": (2.0, "fan_in", "uniform"),
    "he_normal": (2.0, "fan_in", "truncated_normal"),
    "kaiming_uniform": (2.0, "fan_in", "uniform"),
    "kaiming_normal": (2.0, "fan_in", "truncated_normal"),
}
# A conv kernel (height, width, in, out): fan_in = 3 * 3 * 16, fan_out = 3 * 3 * 32.
CONV_SHAPE, CONV_FAN_IN, CONV_FAN_OUT = (3, 3, 16, 32), 144, 288
FAN = {"fan_in": CONV_FAN_IN, "fan_out": CONV_FAN_OUT, "fan_avg": (144 + 288) / 2,
       "fan_geo_avg": math.sqrt(144 * 288)}
BUILDERS = {  # every initializer, built with its defaults
    "zeros": init.zeros, "ones": init.ones, "constant": init.constant(-1.5),
    "uniform": init.uniform(), "normal": init.normal(), "truncated_normal":
    init.truncated_normal(), "orthogonal": init.orthogonal(), "delta_orthogonal":
    init.delta_orthogonal(), **{name: getattr(init, name)() for name in PRESETS},
}
COMPLEX_OK = {"zeros", "ones", "constant", "normal", "orthogonal", "delta_orthogonal",
              *PRESETS}


def _array(x):
    return np.asarray(x)


def _within_standard_errors(estimate, expected, standard_error, k=5):
    """``estimate`` is ``expected`` up to ``k`` standard errors of the estimator: the sample
    is fixed by the key, so the check is deterministic, and 5 standard errors leave room for
    any fair key while still catching a variance off by a few per cent."""
    assert abs(estimate - expected) <= k * standard_error, (estimate, expected, standard_error)


def _check_mean_and_variance(w, variance):
    """The sample's mean is 0 and its mean square ``variance`` (E|w|^2 for complex ``w``),
    each within the standard error of its estimator; the fourth moment bounds that of the
    mean square."""
    w = np.asarray(w, np.complex128).ravel()
    n = w.size
    squares = np.abs(w) ** 2
    _within_standard_errors(abs(w.mean()), 0.0, math.sqrt(variance / n))
    _within_standard_errors(squares.mean(), variance, squares.std() / math.sqrt(n))


def test_the_names_are_jaxs():
    assert set(init.__all__) == {
        "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
        "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
        "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
        "variance_scaling", "xavier_normal", "xavier_uniform", "zeros"}
    assert init.xavier_normal is init.glorot_normal and init.kaiming_uniform is init.he_uniform
    assert nbjax.nn.initializers is init
    if jax is not None:
        public = {n for n in dir(jax.nn.initializers) if not n.startswith("_")}
        assert set(init.__all__) == public


@pytest.mark.skipif(jax is None, reason="jax not installed")
@pytest.mark.parametrize("name", sorted(n for n in PRESETS) + [
    "constant", "uniform", "normal", "truncated_normal", "orthogonal", "delta_orthogonal",
    "variance_scaling", "zeros", "ones"])
def test_signatures_are_jaxs(name):
    ours = inspect.signature(getattr(init, name)).parameters
    theirs = inspect.signature(getattr(jax.nn.initializers, name)).parameters
    assert [(p.name, p.default, p.kind) for p in ours.values()] == \
        [(p.name, p.default, p.kind) for p in theirs.values()]


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("dtype", [None, np.float32, "bfloat16", np.complex64])
def test_shapes_and_dtypes(name, dtype):
    if dtype == np.complex64 and name not in COMPLEX_OK:
        pytest.skip("uniform and truncated_normal draw real numbers only (as in JAX)")
    if dtype == "bfloat16" and "orthogonal" in name:
        pytest.skip("QR has no bfloat16 (nor in JAX)")
    fn = BUILDERS[name]
    assert isinstance(fn, init.Initializer)
    shape = (3, 4, 5, 6)
    out = fn(KEY, shape) if dtype is None else fn(KEY, shape, dtype)
    assert out.shape == shape
    assert out.dtype == np.dtype(np.float32 if dtype is None else dtype)


def test_the_default_dtype_is_the_default_float():
    shape = (4, 6)
    with nbjax.enable_x64(True):
        for fn in [init.zeros, init.constant(2), init.normal(), init.glorot_uniform(),
                   init.orthogonal()]:
            assert fn(KEY, shape).dtype == np.float64
        assert init.lecun_normal()(KEY, shape, np.complex128).dtype == np.complex128
    assert init.constant(3, dtype=np.int32)(KEY, (2,)).dtype == np.int32  # a builder default
    assert init.zeros(None, (2,), np.int32).dtype == np.int32  # the key is not needed


def test_constants():
    assert np.array_equal(_array(init.zeros(KEY, (2, 3))), np.zeros((2, 3)))
    assert np.array_equal(_array(init.ones(KEY, 4)), np.ones(4))
    assert np.array_equal(_array(init.constant(-7)(KEY, (2, 3))), np.full((2, 3), -7.0))
    c = init.constant(1 + 2j)(KEY, (2,), np.complex64)
    assert c.dtype == np.complex64 and np.array_equal(_array(c), [1 + 2j, 1 + 2j])


def test_uniform_normal_and_truncated_normal_statistics():
    shape = (200, 250)
    u = _array(init.uniform(3.0)(KEY, shape))
    assert u.min() >= 0 and u.max() < 3.0 and u.max() > 2.99
    _within_standard_errors(u.mean(), 1.5, u.std() / math.sqrt(u.size))
    _check_mean_and_variance(_array(init.normal(2.5)(KEY, shape)), 2.5 ** 2)
    # asymmetric bounds, in units of stddev before the scaling
    t = _array(init.truncated_normal(0.5, lower=-1.0, upper=3.0)(KEY, shape))
    assert t.min() > -0.5 and t.max() < 1.5 and t.min() < -0.499 and t.max() > 1.3
    truncated = stats.truncnorm(-1.0, 3.0, scale=0.5)
    _within_standard_errors(t.mean(), truncated.mean(), truncated.std() / math.sqrt(t.size))
    _within_standard_errors(t.var(), truncated.var(),
                            math.sqrt(truncated.moment(4) / t.size))


def test_the_truncation_correction_is_the_truncated_normals_stddev():
    assert init._TRUNCATED_NORMAL_STDDEV == pytest.approx(stats.truncnorm(-2, 2).std(),
                                                          rel=1e-15)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_have_the_variance_of_their_fan(name):
    scale, mode, distribution = PRESETS[name]
    variance = scale / FAN[mode]
    w = _array(getattr(init, name)()(KEY, CONV_SHAPE))
    _check_mean_and_variance(w, variance)
    bound = (math.sqrt(3 * variance) if distribution == "uniform" else
             2 * math.sqrt(variance) / init._TRUNCATED_NORMAL_STDDEV)
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    assert np.abs(w).max() >= bound * 0.99  # the sample reaches the bound: nothing is cut


@pytest.mark.parametrize("mode", sorted(FAN))
def test_variance_scaling_modes(mode):
    w = _array(init.variance_scaling(3.0, mode, "normal")(KEY, CONV_SHAPE))
    _check_mean_and_variance(w, 3.0 / FAN[mode])


@pytest.mark.parametrize("shape,axes,fan_in,fan_out", [
    (CONV_SHAPE, {}, CONV_FAN_IN, CONV_FAN_OUT),  # HWIO
    ((32, 16, 3, 3), dict(in_axis=1, out_axis=0), 144, 288),  # OIHW
    ((2, 5, 3, 16, 32), dict(in_axis=-2, out_axis=-1), 16 * 30, 32 * 30),  # 3-d conv
    ((4, 5, 6, 7), dict(in_axis=(0, 1), out_axis=2, batch_axis=3), 20, 6),
    ((3, 4, 5), dict(batch_axis=0), 4, 5),  # three independent 4 x 5 matrices
    ((6, 2, 3, 4), dict(in_axis=-2, out_axis=-1, batch_axis=(0,)), 6, 8),
    ((5,), dict(in_axis=0, out_axis=0), 1, 1),  # a bias: 5 / 5 / 5 receptive field
])
def test_fans_of_conv_shaped_kernels(shape, axes, fan_in, fan_out):
    """``variance_scaling(s, mode, "normal")`` is ``normal(key) * sqrt(s / fan)``, so the
    ratio to a plain normal draw with the same key reads the fan off exactly."""
    unit = _array(nbjax.random.normal(KEY, shape))
    for mode, fan in [("fan_in", fan_in), ("fan_out", fan_out),
                      ("fan_avg", (fan_in + fan_out) / 2),
                      ("fan_geo_avg", math.sqrt(fan_in * fan_out))]:
        w = _array(init.variance_scaling(2.0, mode, "normal", **axes)(KEY, shape))
        assert_close(w, unit * np.float32(math.sqrt(2.0 / fan)), rtol=1e-6)


def test_complex_variance_scaling():
    """Complex weights are circularly symmetric (E w^2 = 0) with E|w|^2 the variance; the
    uniform ones fill a disk, the truncated-normal ones keep JAX's correction constant."""
    variance = 1.0 / CONV_FAN_IN
    for distribution in ["normal", "uniform", "truncated_normal"]:
        w = _array(init.variance_scaling(1.0, "fan_in", distribution)(
            KEY, CONV_SHAPE, np.complex64)).astype(np.complex128).ravel()
        _within_standard_errors(abs(np.mean(w ** 2)), 0.0, variance / math.sqrt(w.size))
        if distribution == "truncated_normal":
            # |z|^2 of a unit complex normal is Exp(1); cut at 4 its mean is 1 - 4/(e^4 - 1)
            c = init._COMPLEX_TRUNCATED_NORMAL_STDDEV
            _check_mean_and_variance(w, variance * (1 - 4 / (math.e ** 4 - 1)) / c ** 2)
            assert np.abs(w).max() <= 2 * math.sqrt(variance) / c * (1 + 1e-6)
        else:
            _check_mean_and_variance(w, variance)
        if distribution == "uniform":
            assert np.abs(w).max() <= math.sqrt(2 * variance) * (1 + 1e-6)


def test_orthogonal():
    for shape in [(5, 3), (3, 5), (4, 4)]:
        q = _array(init.orthogonal(2.0)(KEY, shape)).astype(np.float64)
        gram = q.T @ q if shape[0] >= shape[1] else q @ q.T
        assert_close(gram, 4 * np.eye(min(shape)), rtol=1e-6)
    # columns along axis 0; the rows are all the other axes together
    w = _array(init.orthogonal(column_axis=0)(KEY, (3, 2, 4))).astype(np.float64)
    columns = np.moveaxis(w, 0, -1).reshape(8, 3)
    assert_close(columns.T @ columns, np.eye(3), rtol=1e-6)
    c = _array(init.orthogonal()(KEY, (6, 4), np.complex64)).astype(np.complex128)
    assert_close(c.conj().T @ c, np.eye(4), rtol=1e-6)
    assert np.array_equal(_array(init.orthogonal()(KEY, (0, 3))), np.zeros((0, 3)))


@pytest.mark.parametrize("shape", [(3, 4, 4), (4, 3, 2, 5), (2, 3, 5, 3, 3)])
def test_delta_orthogonal_is_an_orthogonal_matrix_at_the_centre(shape):
    w = _array(init.delta_orthogonal(1.5)(KEY, shape)).astype(np.float64)
    centre = tuple((k - 1) // 2 for k in shape[:-2])  # even sizes: the left of the two
    middle = w[centre]
    assert_close(middle @ middle.T, 1.5 ** 2 * np.eye(shape[-2]), rtol=1e-6)
    rest = w.copy()
    rest[centre] = 0
    assert not rest.any()


def test_errors_are_jaxs():
    bad_mode = init.variance_scaling(1.0, "fan_geo", "normal")  # built without complaint
    with pytest.raises(ValueError, match="invalid mode"):
        bad_mode(KEY, (3, 4))
    with pytest.raises(ValueError, match="invalid distribution"):
        init.variance_scaling(1.0, "fan_in", "gamma")(KEY, (3, 4))
    for shape in [(5,), ()]:
        with pytest.raises(ValueError, match="at least 2D or specify in_axis"):
            init.glorot_normal()(KEY, shape)
    with pytest.raises(ValueError, match="float dtype"):
        init.he_uniform()(KEY, (3, 4), np.int32)
    with pytest.raises(ValueError, match="float dtype"):
        init.uniform()(KEY, (3, 4), np.complex64)
    with pytest.raises(ValueError, match="at least a 2D shape"):
        init.orthogonal()(KEY, (3,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init.delta_orthogonal()(KEY, (3, 3))
    with pytest.raises(ValueError, match="fan_in"):
        init.delta_orthogonal()(KEY, (3, 5, 4))
    with pytest.raises(NotImplementedError, match="sharding"):
        init.normal()(KEY, (2,), out_sharding="x")
    with pytest.raises(ZeroDivisionError):  # a zero fan (JAX divides by it too)
        init.glorot_normal()(KEY, (0, 4))
    with pytest.raises(IndexError):  # an axis the shape does not have
        init.glorot_normal(in_axis=5)(KEY, (3, 4))


def test_traced_scale_vmap_over_keys_and_jit():
    keys = nbjax.random.split(KEY, 3)
    build = init.he_normal()
    batched = nbjax.vmap(lambda k: build(k, (4, 5)))(keys)
    loop = np.stack([_array(build(k, (4, 5))) for k in keys])
    assert np.array_equal(_array(batched), loop)
    compiled = nbjax.jit(lambda k, s: init.variance_scaling(s, "fan_avg", "uniform")(
        k, (4, 5)))(keys[0], 2.0)
    eager = init.variance_scaling(2.0, "fan_avg", "uniform")(keys[0], (4, 5))
    assert_close(compiled, _array(eager), rtol=1e-6)


JAX_CASES = {  # name: (builder of an initializer from a module, dtype, shape)
    **{name: (lambda m, name=name: getattr(m, name)(), np.float32, CONV_SHAPE)
       for name in PRESETS},
    "zeros": (lambda m: m.zeros, np.float32, (3, 4)),
    "constant": (lambda m: m.constant(0.3), np.float32, (3, 4)),
    "uniform": (lambda m: m.uniform(2.0), np.float32, (30, 40)),
    "normal": (lambda m: m.normal(2.0), np.float32, (30, 40)),
    "truncated_normal": (lambda m: m.truncated_normal(2.0, lower=-1, upper=3), np.float32,
                         (30, 40)),
    "fan_geo_avg": (lambda m: m.variance_scaling(
        3.0, "fan_geo_avg", "normal", in_axis=(0, 1), out_axis=2, batch_axis=3),
        np.float32, (4, 5, 6, 7)),
    "bfloat16": (lambda m: m.glorot_normal(), "bfloat16", CONV_SHAPE),
}
JAX_CLOSE_CASES = {  # through QR or complex exp/log: a few ulps from JAX's
    "orthogonal": (lambda m: m.orthogonal(2.0, column_axis=0), np.float32, (3, 2, 4)),
    "delta_orthogonal": (lambda m: m.delta_orthogonal(), np.float32, (3, 4, 4, 5)),
    "complex_orthogonal": (lambda m: m.orthogonal(), np.complex64, (5, 3)),
    "complex_uniform": (lambda m: m.glorot_uniform(), np.complex64, (16, 32)),
    "complex_truncated_normal": (lambda m: m.he_normal(), np.complex64, (16, 32)),
}


@pytest.mark.skipif(jax is None, reason="jax not installed")
@pytest.mark.parametrize("name", sorted(JAX_CASES) + sorted(JAX_CLOSE_CASES))
def test_jaxs_weights_for_the_same_key(name):
    build, dtype, shape = {**JAX_CASES, **JAX_CLOSE_CASES}[name]
    ours = build(init)(nbjax.random.key(7), shape, dtype)
    theirs = build(jax.nn.initializers)(jax.random.key(7), shape, dtype)
    assert ours.dtype == theirs.dtype
    if name in JAX_CASES:
        np.testing.assert_array_equal(_array(ours), np.asarray(theirs))
    else:
        assert_close(_array(ours), np.asarray(theirs), rtol=1e-6)


"""nbjax.example_libraries (optimizers and stax, as jax.example_libraries): every optimizer's
update rule against its formula written out in NumPy, a few steps on a pytree of float32
parameters; the schedules' values; the state as a pytree (jit, grad, pack/unpack); each stax
layer's output and param shapes, worked out by hand, and its outputs against NumPy (a direct
convolution, windows of pooling, batch statistics); the combinators; and a small MLP trained
with Adam under jit."""

import math
import pickle

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.example_libraries import optimizers, stax
from nbjax.tree_util import tree_leaves, tree_map, tree_structure

from helpers import assert_close

rng = np.random.RandomState(0)
KEY = nbjax.random.key(0)


def _f32(*shape):
    return rng.randn(*shape).astype(np.float32)


# --- optimizers: the update rules ------------------------------------------------------------
#
# The loss sum(x**4 / 4 - x) has gradient x**3 - 1, which NumPy computes for the reference
# while nbjax.grad differentiates the loss for the optimizer.

def _loss(params):
    return sum(jnp.sum(x ** 4 / 4 - x) for x in tree_leaves(params))


def _np_grad(x):
    return x ** 3 - 1


def _params():
    return {"w": _f32(3, 2) * 0.5, "b": (_f32(2) * 0.5, np.float32(0.3)), "v": _f32(4) * 0.5}


def _np_sgd(lr):
    def update(i, g, x):
        return x - lr(i) * g
    return lambda x: x, update, lambda x: x


def _np_momentum(lr, mass, nesterov=False):
    def update(i, g, state):
        x, v = state
        v = mass * v + g
        return x - lr(i) * ((mass * v + g) if nesterov else v), v
    return lambda x: (x, np.zeros_like(x)), update, lambda s: s[0]


def _np_adagrad(lr, mom):
    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + g ** 2
        inv = np.where(g_sq > 0, 1 / np.sqrt(g_sq), 0)
        m = (1 - mom) * g * inv + mom * m
        return x - lr(i) * m, g_sq, m
    return lambda x: (x, np.zeros_like(x), np.zeros_like(x)), update, lambda s: s[0]


def _np_rmsprop(lr, gamma, eps):
    def update(i, g, state):
        x, avg = state
        avg = gamma * avg + (1 - gamma) * g ** 2
        return x - lr(i) * g / np.sqrt(avg + eps), avg
    return lambda x: (x, np.zeros_like(x)), update, lambda s: s[0]


def _np_rmsprop_momentum(lr, gamma, eps, mom):
    def update(i, g, state):
        x, avg, m = state
        avg = gamma * avg + (1 - gamma) * g ** 2
        m = mom * m + lr(i) * g / np.sqrt(avg + eps)
        return x - m, avg, m
    return lambda x: (x, np.zeros_like(x), np.zeros_like(x)), update, lambda s: s[0]


def _np_adam(lr, b1, b2, eps):
    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * g ** 2 + b2 * v
        mhat, vhat = m / (1 - b1 ** (i + 1)), v / (1 - b2 ** (i + 1))
        return x - lr(i) * mhat / (np.sqrt(vhat) + eps), m, v
    return lambda x: (x, np.zeros_like(x), np.zeros_like(x)), update, lambda s: s[0]


def _np_adamax(lr, b1, b2, eps):
    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = np.maximum(b2 * u, np.abs(g))
        return x - lr(i) / (1 - b1 ** (i + 1)) * m / (u + eps), m, u
    return lambda x: (x, np.zeros_like(x), np.zeros_like(x)), update, lambda s: s[0]


def _np_sm3(lr, mom):
    """One accumulator vector per axis; a coordinate's accumulator is the smallest of its
    vectors' entries plus g**2, and each vector keeps the maxima over the other axes."""
    def init(x):
        x = np.atleast_1d(x)
        return x, np.zeros_like(x), [np.zeros(n, x.dtype) for n in x.shape]

    def update(i, g, state):
        x, m, vs = state
        g = np.atleast_1d(g)
        views = [v.reshape([-1 if a == j else 1 for a in range(x.ndim)])
                 for j, v in enumerate(vs)]
        accum = np.minimum.reduce(np.broadcast_arrays(*views)) + g ** 2
        m = (1 - mom) * g * np.where(accum > 0, 1 / np.sqrt(accum), 0) + mom * m
        others = [tuple(a for a in range(x.ndim) if a != j) for j in range(x.ndim)]
        return x - lr(i) * m, m, [accum.max(axis=axes) for axes in others]
    return init, update, lambda s: s[0]


def _lr(i):
    return 0.1 / (1 + 0.5 * i)  # a schedule, so that the step number matters


OPTIMIZERS = {  # name: (nbjax optimizer, NumPy reference (init, update, get_params))
    "sgd": (optimizers.sgd(0.1), _np_sgd(lambda i: 0.1)),
    "sgd_schedule": (optimizers.sgd(_lr), _np_sgd(_lr)),
    "momentum": (optimizers.momentum(_lr, 0.9), _np_momentum(_lr, 0.9)),
    "nesterov": (optimizers.nesterov(0.1, 0.8), _np_momentum(lambda i: 0.1, 0.8, True)),
    "adagrad": (optimizers.adagrad(_lr), _np_adagrad(_lr, 0.9)),
    "rmsprop": (optimizers.rmsprop(0.05, gamma=0.8), _np_rmsprop(lambda i: 0.05, 0.8, 1e-8)),
    "rmsprop_momentum": (optimizers.rmsprop_momentum(_lr, eps=1e-6, momentum=0.5),
                         _np_rmsprop_momentum(_lr, 0.9, 1e-6, 0.5)),
    "adam": (optimizers.adam(0.1), _np_adam(lambda i: 0.1, 0.9, 0.999, 1e-8)),
    "adam_b": (optimizers.adam(_lr, b1=0.5, b2=0.9, eps=1e-4), _np_adam(_lr, 0.5, 0.9, 1e-4)),
    "adamax": (optimizers.adamax(_lr), _np_adamax(_lr, 0.9, 0.999, 1e-8)),
    "sm3": (optimizers.sm3(0.1, momentum=0.7), _np_sm3(lambda i: 0.1, 0.7)),
}
STEPS = 4


def _run_nbjax(opt, params, update=None):
    init, update_fn, get_params = opt
    update = update or update_fn
    state = init(tree_map(jnp.asarray, params))
    for i in range(STEPS):
        state = update(i, nbjax.grad(_loss)(get_params(state)), state)
    return state


def _run_numpy(reference, params):
    init, update, get_params = reference

    def leaf(x):
        state = init(np.asarray(x, np.float64))
        for i in range(STEPS):
            state = update(i, _np_grad(get_params(state)), state)
        return get_params(state).reshape(np.shape(x))
    return tree_map(leaf, params)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_update_rule_matches_the_formula(name):
    opt, reference = OPTIMIZERS[name]
    params = _params()
    state = _run_nbjax(opt, params)
    got = opt.params_fn(state)
    assert tree_structure(got) == tree_structure(tree_map(jnp.asarray, params))
    for leaf in tree_leaves(state):
        if not isinstance(leaf, int):  # sm3 records each parameter's shape
            assert leaf.dtype == np.float32, name
    for actual, expected in zip(tree_leaves(got), tree_leaves(_run_numpy(reference, params))):
        assert actual.dtype == np.float32
        assert_close(actual, expected, rtol=2e-5, scale=1.0, err_msg=name)


@pytest.mark.parametrize("name", ["sgd", "momentum", "adagrad", "adam", "adamax", "sm3"])
def test_jitted_update_equals_eager(name):
    """The whole state is a pytree of arrays, so the update step compiles as it is."""
    opt = OPTIMIZERS[name][0]
    params = _params()
    eager = _run_nbjax(opt, params)
    jitted = _run_nbjax(opt, params, update=nbjax.jit(opt.update_fn))
    assert tree_structure(jitted) == tree_structure(eager)
    for a, b in zip(tree_leaves(jitted), tree_leaves(eager)):
        assert_close(a, b, rtol=1e-6, scale=1.0)


def test_jitted_training_step_with_grad_inside():
    opt_init, opt_update, get_params = optimizers.momentum(0.05, 0.9)

    @nbjax.jit
    def step(i, state):
        return opt_update(i, nbjax.grad(_loss)(get_params(state)), state)

    params = tree_map(jnp.asarray, _params())
    eager = jitted = opt_init(params)
    for i in range(3):
        eager, jitted = opt_update(i, nbjax.grad(_loss)(get_params(eager)), eager), step(i, jitted)
    for a, b in zip(tree_leaves(jitted), tree_leaves(eager)):
        assert_close(a, b, rtol=1e-6, scale=1.0)


def test_grad_with_respect_to_the_state_is_a_state():
    opt_init, _, get_params = optimizers.adam(0.1)
    state = opt_init({"w": jnp.arange(3.0)})
    g = nbjax.grad(lambda s: jnp.sum(get_params(s)["w"] ** 2))(state)
    assert isinstance(g, optimizers.OptimizerState)
    assert tree_structure(g) == tree_structure(state)
    w, m, v = g.packed_state[0]
    assert_close(w, [0.0, 2.0, 4.0])
    assert_close(m, np.zeros(3))


def test_optimizer_state_layout():
    """As JAX's: the flat state of each parameter leaf, and the two levels of tree defs."""
    params = {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}
    state = optimizers.adam(0.1).init_fn(params)
    assert state.tree_def == tree_structure(params)
    assert state.subtree_defs == (tree_structure((0, 0, 0)),) * 2
    assert [len(leaves) for leaves in state.packed_state] == [3, 3]


def test_gradient_tree_must_match_the_parameters():
    opt_init, opt_update, _ = optimizers.sgd(0.1)
    state = opt_init({"a": jnp.ones(2)})
    with pytest.raises(TypeError, match="did not match the parameter tree"):
        opt_update(0, {"b": jnp.ones(2)}, state)


def test_optimizer_decorator_lifts_a_custom_method():
    @optimizers.optimizer
    def sign_sgd(step_size):
        def update(i, g, state):
            x, count = state
            return x - step_size * jnp.sign(g), count + 1
        return (lambda x0: (x0, jnp.zeros((), jnp.int32))), update, lambda state: state[0]

    opt = sign_sgd(0.5)
    assert isinstance(opt, optimizers.Optimizer) and sign_sgd.__name__ == "sign_sgd"
    state = opt.init_fn([jnp.array([1.0, -2.0]), jnp.float32(3.0)])
    state = opt.update_fn(0, [jnp.array([0.3, -4.0]), jnp.float32(-1.0)], state)
    x, scalar = opt.params_fn(state)
    assert_close(x, [0.5, -1.5])
    assert_close(scalar, 3.5)
    assert int(state.packed_state[0][1]) == 1


def test_update_must_keep_the_state_structure():
    @optimizers.optimizer
    def broken():
        return (lambda x0: (x0, x0)), (lambda i, g, state: (state[0],)), lambda s: s[0]

    opt_init, opt_update, _ = broken()
    with pytest.raises(TypeError, match="did not match its input structure"):
        opt_update(0, jnp.ones(2), opt_init(jnp.ones(2)))


def test_pack_unpack_round_trip():
    opt_init, opt_update, get_params = optimizers.adam(0.1)
    params = tree_map(jnp.asarray, _params())
    state = opt_update(0, tree_map(jnp.ones_like, params), opt_init(params))
    marked = optimizers.unpack_optimizer_state(state)
    assert isinstance(marked["w"], optimizers.JoinPoint)
    x, m, v = marked["w"].subtree
    assert_close(x, get_params(state)["w"])
    restored = optimizers.pack_optimizer_state(pickle.loads(pickle.dumps(marked)))
    assert tree_structure(restored) == tree_structure(state)
    for a, b in zip(tree_leaves(restored), tree_leaves(state)):
        np.testing.assert_array_equal(a, b)


def test_l2_norm_and_clip_grads():
    grads = {"a": _f32(3, 2), "b": [_f32(4)]}
    norm = np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in tree_leaves(grads)))
    assert_close(optimizers.l2_norm(grads), norm, rtol=1e-6)
    clipped = optimizers.clip_grads(grads, norm / 2)
    assert_close(optimizers.l2_norm(clipped), norm / 2, rtol=1e-6)
    assert_close(clipped["a"], grads["a"] / 2, rtol=1e-6)
    unclipped = optimizers.clip_grads(grads, norm * 2)
    assert_close(unclipped["b"][0], grads["b"][0])


# --- schedules -------------------------------------------------------------------------------

@pytest.mark.parametrize("schedule, formula", [
    (optimizers.constant(0.3), lambda i: 0.3),
    (optimizers.exponential_decay(0.1, 3, 0.5), lambda i: 0.1 * 0.5 ** (i / 3)),
    (optimizers.inverse_time_decay(0.1, 2, 0.5), lambda i: 0.1 / (1 + 0.5 * i / 2)),
    (optimizers.inverse_time_decay(0.1, 2, 0.5, staircase=True),
     lambda i: 0.1 / (1 + 0.5 * (i // 2))),
    (optimizers.polynomial_decay(1.0, 4, 0.1, power=2.0),
     lambda i: (1 - min(i, 4) / 4) ** 2 * 0.9 + 0.1),
    (optimizers.piecewise_constant([2, 4], [1.0, 0.5, 0.1]),
     lambda i: 1.0 if i <= 2 else 0.5 if i <= 4 else 0.1),
])
def test_schedule_values(schedule, formula):
    for i in range(8):
        assert_close(schedule(i), formula(i), rtol=1e-6, err_msg=f"step {i}")
    jitted = nbjax.jit(schedule)
    for i in (0, 3, 5):
        assert_close(jitted(i), formula(i), rtol=1e-6, err_msg=f"jitted, step {i}")


def test_piecewise_constant_dtype_and_errors():
    assert optimizers.piecewise_constant([2], [1.0, 0.5])(3).dtype == np.float32
    with pytest.raises(ValueError, match="one shorter"):
        optimizers.piecewise_constant([1, 2], [1.0, 0.5])
    with pytest.raises(ValueError, match="sequences"):
        optimizers.piecewise_constant(1, [1.0, 0.5])


def test_make_schedule():
    assert optimizers.make_schedule(_lr) is _lr
    assert optimizers.make_schedule(0.25)(7) == 0.25
    assert optimizers.make_schedule(jnp.float32(0.5))(1) == 0.5
    with pytest.raises(TypeError):
        optimizers.make_schedule([0.1, 0.2])


# --- stax: shapes ----------------------------------------------------------------------------

SHAPES = [  # (layer, input shape, output shape, params' shapes)
    (stax.Dense(5), (4, 3), (4, 5), ((3, 5), (5,))),
    (stax.Dense(2), (-1, 6, 3), (-1, 6, 2), ((3, 2), (2,))),
    # SAME with stride (1, 2): ceil(7 / 1), ceil(8 / 2); the bias broadcasts over N, H, W.
    (stax.Conv(4, (3, 3), (1, 2), "SAME"), (2, 7, 8, 3), (2, 7, 4, 4),
     ((3, 3, 3, 4), (1, 1, 1, 4))),
    (stax.Conv(4, (3, 2)), (2, 7, 8, 3), (2, 5, 7, 4), ((3, 2, 3, 4), (1, 1, 1, 4))),
    # VALID with stride (2, 1): (7 - 2) // 2 + 1, 8 - 3 + 1, in channel-first layouts.
    (stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (2, 3), (2, 1)), (2, 3, 7, 8),
     (2, 4, 3, 6), ((4, 3, 2, 3), (1, 4, 1, 1))),
    # Transposed, SAME: the input's size times the stride.
    (stax.ConvTranspose(4, (3, 3), (2, 2), "SAME"), (2, 5, 6, 3), (2, 10, 12, 4),
     ((3, 3, 3, 4), (1, 1, 1, 4))),
    # Transposed, VALID: (5 - 1) * 2 + 3.
    (stax.Conv1DTranspose(4, (3,), (2,)), (2, 5, 3), (2, 11, 4), ((3, 3, 4), (1, 1, 4))),
    (stax.BatchNorm(), (4, 3, 3, 2), (4, 3, 3, 2), ((2,), (2,))),
    (stax.BatchNorm(axis=0, center=False), (4, 3), (4, 3), ((), (3,))),
    (stax.MaxPool((2, 2), (2, 1), "SAME"), (2, 5, 6, 3), (2, 3, 6, 3), ()),
    (stax.SumPool((2, 3)), (2, 5, 6, 3), (2, 4, 4, 3), ()),
    (stax.AvgPool((3, 3), (2, 2), "SAME"), (2, 5, 6, 3), (2, 3, 3, 3), ()),
    (stax.AvgPool((3, 2), spec="NCHW"), (2, 3, 5, 6), (2, 3, 3, 5), ()),
    (stax.Flatten, (2, 3, 4), (2, 12), ()),
    (stax.Identity, (2, 3), (2, 3), ()),
    (stax.Dropout(0.5), (2, 3), (2, 3), ()),
    (stax.FanOut(3), (2, 3), [(2, 3)] * 3, ()),
    (stax.FanInSum, [(2, 3), (2, 3)], (2, 3), ()),
    (stax.FanInConcat(axis=1), [(2, 3, 5), (2, 4, 5)], (2, 7, 5), ()),
    (stax.FanInConcat(), [(2, 3), (2, 4)], (2, 7), ()),
    (stax.serial(stax.Dense(8), stax.Relu, stax.Dense(2)), (5, 3), (5, 2),
     [((3, 8), (8,)), (), ((8, 2), (2,))]),
] + [(getattr(stax, name), (3, 4), (3, 4), ()) for name in (
    "Tanh", "Relu", "Exp", "LogSoftmax", "Softmax", "Softplus", "Sigmoid", "Elu", "LeakyRelu",
    "Selu", "Gelu")]


@pytest.mark.parametrize("layer, in_shape, out_shape, param_shapes", SHAPES)
def test_init_shapes(layer, in_shape, out_shape, param_shapes):
    init_fun, _ = layer
    got_shape, params = init_fun(KEY, in_shape)
    assert got_shape == out_shape
    assert tree_map(np.shape, params) == param_shapes
    for leaf in tree_leaves(params):
        assert leaf.dtype == np.float32


@pytest.mark.parametrize("layer, in_shape, out_shape, param_shapes",
                         [s for s in SHAPES if -1 not in s[1]])
def test_apply_gives_the_init_shape(layer, in_shape, out_shape, param_shapes):
    init_fun, apply_fun = layer
    shape, params = init_fun(KEY, in_shape)
    many = isinstance(in_shape, list)
    inputs = [jnp.asarray(_f32(*s)) for s in in_shape] if many else jnp.asarray(_f32(*in_shape))
    assert tree_map(np.shape, apply_fun(params, inputs, rng=KEY)) == shape


# --- stax: values ----------------------------------------------------------------------------

def _same_pads(size, window, stride):
    """XLA's SAME padding of one axis: ceil(size / stride) outputs, the extra cell at the
    end."""
    total = max((math.ceil(size / stride) - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def _np_conv_nhwc(x, w, strides, padding):
    """The convolution written out: every output pixel is the sum over the window and the
    input channels of input times kernel (HWIO)."""
    kh, kw = w.shape[:2]
    if padding == "SAME":
        pads = [_same_pads(x.shape[1], kh, strides[0]), _same_pads(x.shape[2], kw, strides[1])]
        x = np.pad(x, [(0, 0), *pads, (0, 0)])
    oh = (x.shape[1] - kh) // strides[0] + 1
    ow = (x.shape[2] - kw) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw]
            out[:, i, j] = np.einsum("nhwc,hwco->no", patch, w)
    return out


def test_dense_values():
    init_fun, apply_fun = stax.Dense(4)
    _, (W, b) = init_fun(KEY, (5, 3))
    x = _f32(5, 3)
    assert_close(apply_fun((W, b), x), x @ np.asarray(W) + np.asarray(b), rtol=1e-6)


@pytest.mark.parametrize("strides, padding", [((1, 1), "VALID"), ((2, 1), "SAME")])
def test_conv_against_a_direct_convolution(strides, padding):
    init_fun, apply_fun = stax.Conv(4, (3, 2), strides, padding)
    x = _f32(2, 6, 5, 3)
    _, (W, _) = init_fun(KEY, x.shape)
    b = _f32(1, 1, 1, 4)
    expected = _np_conv_nhwc(x, np.asarray(W), strides, padding) + b
    assert_close(apply_fun((W, b), x), expected, rtol=1e-5)


def test_general_conv_channel_first_layout():
    init_fun, apply_fun = stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 2, (2, 3), (1, 2), "SAME")
    x = _f32(2, 3, 5, 6)
    _, (W, b) = init_fun(KEY, x.shape)
    expected = _np_conv_nhwc(x.transpose(0, 2, 3, 1), np.asarray(W).transpose(2, 3, 1, 0),
                             (1, 2), "SAME").transpose(0, 3, 1, 2) + np.asarray(b)
    assert_close(apply_fun((W, b), x), expected, rtol=1e-5)


def test_conv1d_transpose_scatters_the_flipped_kernel():
    """A VALID transposed convolution with stride s spreads each input element over the
    output: out[i * s + k] += x[i] * W[K - 1 - k] (lax.conv_transpose flips the kernel's
    spatial axis unless transpose_kernel)."""
    init_fun, apply_fun = stax.Conv1DTranspose(2, (3,), (2,))
    x = _f32(2, 4, 3)
    _, (W, b) = init_fun(KEY, x.shape)
    W = np.asarray(W)
    expected = np.zeros((2, 9, 2))
    for i in range(4):
        for k in range(3):
            expected[:, i * 2 + k] += x[:, i] @ W[2 - k]
    assert_close(apply_fun((W, b), x), expected + np.asarray(b), rtol=1e-5)


def _np_pool(x, window, strides, padding, reduce):
    """Pool NHWC ``x`` over its spatial axes: ``reduce`` of each window, padding cells being
    NaN (so nanmax/nansum/nanmean skip them)."""
    if padding == "SAME":
        pads = [_same_pads(n, w, s) for n, w, s in zip(x.shape[1:3], window, strides)]
        x = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)], constant_values=np.nan)
    oh = (x.shape[1] - window[0]) // strides[0] + 1
    ow = (x.shape[2] - window[1]) // strides[1] + 1
    return np.stack([np.stack([
        reduce(x[:, i * strides[0]:i * strides[0] + window[0],
                 j * strides[1]:j * strides[1] + window[1]], axis=(1, 2))
        for j in range(ow)], axis=1) for i in range(oh)], axis=1)


@pytest.mark.parametrize("layer, reduce", [
    (stax.MaxPool, np.nanmax), (stax.SumPool, np.nansum), (stax.AvgPool, np.nanmean)])
@pytest.mark.parametrize("window, strides, padding", [
    ((2, 2), None, "VALID"), ((3, 2), (2, 2), "SAME")])
def test_pooling_values(layer, reduce, window, strides, padding):
    """AvgPool divides by the number of real (unpadded) inputs in each window."""
    x = _f32(2, 5, 6, 3)
    init_fun, apply_fun = layer(window, strides, padding)
    out = apply_fun((), x)
    assert out.shape == init_fun(KEY, x.shape)[0]
    expected = _np_pool(x, window, strides or (1, 1), padding, reduce)
    assert_close(out, expected, rtol=1e-6)


def test_avg_pool_channel_first_spec():
    x = _f32(2, 3, 5, 6)
    out = stax.AvgPool((3, 3), (1, 2), "SAME", spec="NCHW")[1]((), x)
    expected = _np_pool(x.transpose(0, 2, 3, 1), (3, 3), (1, 2), "SAME", np.nanmean)
    assert_close(out, expected.transpose(0, 3, 1, 2), rtol=1e-6)


def test_batch_norm_uses_the_batch_statistics():
    init_fun, apply_fun = stax.BatchNorm()
    x = _f32(4, 3, 3, 2) * 3 + 1
    _, (beta, gamma) = init_fun(KEY, x.shape)
    assert_close(beta, np.zeros(2))
    assert_close(gamma, np.ones(2))
    beta, gamma = _f32(2), _f32(2)
    mean, var = x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))
    expected = (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
    assert_close(apply_fun((beta, gamma), x), expected, rtol=1e-5)


def test_batch_norm_without_center_or_scale():
    x = _f32(6, 3)
    z = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3)
    gamma, beta = _f32(3), _f32(3)
    layer = stax.BatchNorm(axis=0, epsilon=1e-3, center=False)
    assert_close(layer[1]((beta, gamma), x), z * gamma, rtol=1e-5)
    layer = stax.BatchNorm(axis=0, epsilon=1e-3, scale=False)
    assert_close(layer[1]((beta, gamma), x), z + beta, rtol=1e-5)
    layer = stax.BatchNorm(axis=0, epsilon=1e-3, center=False, scale=False)
    assert layer[0](KEY, x.shape)[1] == ((), ())
    assert_close(layer[1](((), ()), x), z, rtol=1e-5)


def test_dropout_train_and_test_modes():
    """JAX's convention: ``rate`` is the probability of keeping, survivors are divided by
    it."""
    x = _f32(50, 40)
    key = nbjax.random.key(7)
    keep = np.asarray(nbjax.random.bernoulli(key, 0.7, x.shape))
    out = np.asarray(stax.Dropout(0.7)[1]((), x, rng=key))
    assert_close(out, np.where(keep, x / 0.7, 0), rtol=1e-6)
    assert abs(keep.mean() - 0.7) < 0.05
    assert_close(stax.Dropout(0.7, mode="test")[1]((), x, rng=key), x)
    with pytest.raises(ValueError, match="PRNG key"):
        stax.Dropout(0.7)[1]((), x)


def test_elementwise_layers():
    x = _f32(3, 4)
    shifted = x - x.max(-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    expected = {
        "Tanh": np.tanh(x), "Relu": np.maximum(x, 0), "Exp": np.exp(x),
        "LogSoftmax": log_softmax, "Softmax": np.exp(log_softmax),
        "Softplus": np.log1p(np.exp(x)), "Sigmoid": 1 / (1 + np.exp(-x)),
        "Elu": np.where(x > 0, x, np.expm1(x)), "LeakyRelu": np.where(x > 0, x, 0.01 * x),
        "Selu": 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
        "Gelu": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    }
    for name, value in expected.items():
        assert_close(getattr(stax, name)[1]((), x), value, rtol=1e-5, err_msg=name)
    assert_close(stax.elementwise(jnp.clip, min=-0.5, max=0.5)[1]((), x), np.clip(x, -0.5, 0.5))


# --- stax: combinators -------------------------------------------------------------------------

def test_serial_composes_in_order():
    init_fun, apply_fun = stax.serial(stax.Dense(6), stax.Relu, stax.Dense(2), stax.Softmax)
    x = _f32(5, 3)
    _, params = init_fun(KEY, x.shape)
    (W1, b1), (W2, b2) = (tree_map(np.asarray, params[i]) for i in (0, 2))
    logits = np.maximum(x @ W1 + b1, 0) @ W2 + b2
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert_close(apply_fun(params, x), expected, rtol=1e-5)


def test_serial_gives_each_layer_its_own_key():
    _, apply_fun = stax.serial(stax.Dropout(0.5), stax.Dropout(0.5))
    x = jnp.ones((8, 8))
    key = nbjax.random.key(3)
    k1, k2 = nbjax.random.split(key)
    keep = (np.asarray(nbjax.random.bernoulli(k1, 0.5, x.shape))
            & np.asarray(nbjax.random.bernoulli(k2, 0.5, x.shape)))
    assert_close(apply_fun([(), ()], x, rng=key), np.where(keep, 4.0, 0.0))


def test_fan_out_parallel_fan_in_concat():
    init_fun, apply_fun = stax.serial(stax.FanOut(3),
                                      stax.parallel(stax.Dense(2), stax.Identity, stax.Tanh),
                                      stax.FanInConcat())
    x = _f32(4, 3)
    out_shape, params = init_fun(KEY, x.shape)
    assert out_shape == (4, 8)
    W, b = params[1][0]
    expected = np.concatenate([x @ np.asarray(W) + np.asarray(b), x, np.tanh(x)], axis=-1)
    assert_close(apply_fun(params, x), expected, rtol=1e-5)


def test_residual_block_with_fan_in_sum():
    init_fun, apply_fun = stax.serial(stax.FanOut(2),
                                      stax.parallel(stax.Dense(3), stax.Identity),
                                      stax.FanInSum)
    x = _f32(4, 3)
    out_shape, params = init_fun(KEY, x.shape)
    assert out_shape == (4, 3)
    W, b = params[1][0]
    assert_close(apply_fun(params, x), x @ np.asarray(W) + np.asarray(b) + x, rtol=1e-5)


def test_parallel_takes_a_list_of_inputs():
    init_fun, apply_fun = stax.parallel(stax.Dense(2), stax.Relu)
    shapes, params = init_fun(KEY, [(3, 4), (3, 5)])
    assert shapes == ((3, 2), (3, 5))
    x, y = _f32(3, 4), _f32(3, 5)
    out = apply_fun(params, [x, y], rng=KEY)
    assert isinstance(out, list) and len(out) == 2
    W, b = params[0]
    assert_close(out[0], x @ np.asarray(W) + np.asarray(b), rtol=1e-5)
    assert_close(out[1], np.maximum(y, 0))


def test_shape_dependent_builds_from_the_input_shape():
    init_fun, apply_fun = stax.shape_dependent(lambda shape: stax.Dense(2 * shape[-1]))
    out_shape, (W, b) = init_fun(KEY, (5, 3))
    assert out_shape == (5, 6) and W.shape == (3, 6)
    assert apply_fun((W, b), jnp.ones((5, 3))).shape == (5, 6)


def test_initializer_names():
    assert stax.glorot is stax.glorot_normal and stax.randn is stax.normal
    assert stax.logsoftmax is stax.log_softmax
    W = stax.glorot()(KEY, (3, 4))
    assert W.shape == (3, 4) and W.dtype == np.float32
    assert_close(stax.zeros(KEY, (2,)), np.zeros(2))
    assert_close(stax.ones(KEY, (2,)), np.ones(2))


# --- end to end ----------------------------------------------------------------------------------

def test_mlp_trained_with_adam_under_jit():
    """The tutorials' loop: a stax MLP, Adam, and a jitted step that differentiates the loss
    and updates the state."""
    x = rng.uniform(-1, 1, (64, 2)).astype(np.float32)
    y = np.sin(3 * x[:, :1]) + x[:, 1:] ** 2
    init_fun, apply_fun = stax.serial(stax.Dense(16), stax.Tanh, stax.Dense(16), stax.Relu,
                                      stax.Dense(1))
    _, params = init_fun(nbjax.random.PRNGKey(0), (-1, 2))
    opt_init, opt_update, get_params = optimizers.adam(0.02)

    def loss(params, x, y):
        return jnp.mean((apply_fun(params, x) - y) ** 2)

    @nbjax.jit
    def step(i, state, x, y):
        value, grads = nbjax.value_and_grad(loss)(get_params(state), x, y)
        return value, opt_update(i, grads, state)

    state = opt_init(params)
    losses = []
    for i in range(20):
        value, state = step(i, state, x, y)
        losses.append(float(value))
    assert losses[-1] < 0.5 * losses[0]
    assert all(leaf.dtype == np.float32 for leaf in tree_leaves(get_params(state)))

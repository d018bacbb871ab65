"""What the benchmarks measure: each workload as a NumPy baseline and as a JAX-style function.

The JAX-style function is built from a module (``nbjax`` or ``jax``: they share an API), so
one definition serves both libraries; the runner jits it. Most baselines are the same code on
NumPy; where NumPy needs another formulation (a batched product, a hand-written gradient, a
Python loop for ``scan``) it is written as a NumPy user would.

The seed workloads (``seed=True``) come from the documents the project was created from
(``shared/SEEDS.md``), at their sizes. ``setup(small)`` gives a size label and the NumPy
inputs; ``small=True`` shrinks the work about 100x for quick runs.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
LEARNING_RATE = 0.01


@dataclass(frozen=True)
class Workload:
    name: str
    what: str
    setup: Callable      # small -> (size label, tuple of NumPy inputs)
    numpy: Callable      # the NumPy baseline, called on the inputs
    build: Callable      # module (nbjax or jax) -> the function to jit
    seed: bool = False   # from the seed documents
    streams: bool = False  # element-wise: bounded by memory bandwidth, bytes = inputs + outputs


def _normal(*shape, seed=0, scale=1.0):
    values = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return values * np.float32(scale) if scale != 1.0 else values


def _label(shape):
    return "x".join(str(n) for n in shape)


def _array_of(full, small):
    """A setup giving one normal float32 array of the ``full`` or ``small`` shape."""
    def setup(is_small):
        shape = small if is_small else full
        return _label(shape), (_normal(*shape),)
    return setup


# --- the element-wise seeds ------------------------------------------------------------------

def power_sum(x):
    return x + x * x + x * x * x


def selu(xp):
    def selu(x):
        return SELU_SCALE * xp.where(x > 0, x, SELU_ALPHA * xp.exp(x) - SELU_ALPHA)
    return selu


# --- the 81-slice Gaussian blur ----------------------------------------------------------------

def gaussian_kernel(size=9, sigma=2.5):
    """The normalised 2-D Gaussian, as float32 weights."""
    r = np.arange(size) - size // 2
    g = np.exp(-r ** 2 / (2 * sigma ** 2))
    k = np.outer(g, g)
    return (k / k.sum()).astype(np.float32)


def blur(xp):
    """The seed article's blur: pad by the kernel's radius (edge values), then sum the 81
    weighted shifted slices of the padded image."""
    kernel = gaussian_kernel()
    size = kernel.shape[0]

    def blur(img):
        h, w = img.shape
        padded = xp.pad(img, size // 2, mode="edge")
        out = xp.zeros_like(img)
        for i in range(size):
            for j in range(size):
                out = out + kernel[i, j] * padded[i:i + h, j:j + w]
        return out
    return blur


# --- the batched matrix-vector product ---------------------------------------------------------

def _matvec_setup(is_small):
    n = 1000 if is_small else 10000
    return f"{n}x{n} @ 128x{n}", (_normal(n, n), _normal(128, n, seed=1))


def numpy_matvec(m, v):
    return (m @ v.T).T


# --- a two-layer MLP's training step -----------------------------------------------------------

def _mlp_setup(is_small):
    batch, hidden = (16, 64) if is_small else (128, 512)
    n_in, n_out = 784, 10
    params = (_normal(n_in, hidden, seed=1, scale=n_in ** -0.5), np.zeros(hidden, np.float32),
              _normal(hidden, n_out, seed=2, scale=hidden ** -0.5), np.zeros(n_out, np.float32))
    x = _normal(batch, n_in, seed=3)
    labels = np.random.default_rng(4).integers(0, n_out, batch)
    y = np.eye(n_out, dtype=np.float32)[labels]
    return f"batch {batch}, {n_in}-{hidden}-{n_out}", (params, x, y)


def _log_softmax(xp, logits):
    shifted = logits - xp.max(logits, axis=1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=1, keepdims=True))


def mlp_step(lib):
    """One SGD step on the softmax cross-entropy of ``tanh(x W1 + b1) W2 + b2``."""
    xp = lib.numpy

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        logits = xp.tanh(x @ w1 + b1) @ w2 + b2
        return -xp.mean(xp.sum(y * _log_softmax(xp, logits), axis=1))

    def step(params, x, y):
        value, grads = lib.value_and_grad(loss)(params, x, y)
        return tuple(p - LEARNING_RATE * g for p, g in zip(params, grads)), value
    return step


def numpy_mlp_step(params, x, y):
    """The same step with the gradient written by hand (softmax minus labels, back through
    the layers), as one would in NumPy."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    log_p = _log_softmax(np, h @ w2 + b2)
    value = -np.mean(np.sum(y * log_p, axis=1))
    d_logits = (np.exp(log_p) - y) / x.shape[0]
    d_h = (d_logits @ w2.T) * (1 - h * h)
    grads = (x.T @ d_h, d_h.sum(axis=0), h.T @ d_logits, d_logits.sum(axis=0))
    return tuple(p - LEARNING_RATE * g for p, g in zip(params, grads)), value


# --- a recurrent loop with scan ----------------------------------------------------------------

RNN_STEPS = 100


def _rnn_setup(is_small):
    batch, hidden, n_in = (8, 128, 32) if is_small else (32, 512, 128)
    w = _normal(hidden, hidden, seed=1, scale=hidden ** -0.5)
    u = _normal(n_in, hidden, seed=2, scale=n_in ** -0.5)
    xs = _normal(RNN_STEPS, batch, n_in, seed=3)
    return (f"{RNN_STEPS} steps, batch {batch}, {n_in}->{hidden}",
            (w, u, np.zeros((batch, hidden), np.float32), xs))


def rnn(lib):
    """``h = tanh(W h + U x_t)`` over the steps of ``xs`` (rows are batch elements)."""
    def rnn(w, u, h, xs):
        def step(h, x_t):
            return lib.numpy.tanh(h @ w + x_t @ u), None
        return lib.lax.scan(step, h, xs)[0]
    return rnn


def numpy_rnn(w, u, h, xs):
    for x_t in xs:
        h = np.tanh(h @ w + x_t @ u)
    return h


# --- an LSTM with scan: forward, and value_and_grad -------------------------------------------

LSTM_STEPS = 100


def _lstm_setup(is_small):
    batch, hidden, n_in = (8, 32, 16) if is_small else (32, 256, 64)
    wx = _normal(n_in, 4 * hidden, seed=1, scale=n_in ** -0.5)
    wh = _normal(hidden, 4 * hidden, seed=2, scale=hidden ** -0.5)
    b = np.zeros(4 * hidden, np.float32)
    xs = _normal(LSTM_STEPS, batch, n_in, seed=3)
    r = _normal(batch, hidden, seed=4)
    return (f"{LSTM_STEPS} steps, batch {batch}, {n_in}->{hidden}",
            (wx, wh, b, xs, np.zeros((batch, hidden), np.float32), r))


def _sigmoid(xp, x):
    return 1 / (1 + xp.exp(-x))


def _lstm(lib):
    """The final hidden state of an LSTM (gates i, f, g, o from one product each of the
    input and the state) run over the steps of ``xs`` with ``scan``."""
    xp = lib.numpy

    def lstm(wx, wh, b, xs, h0):
        def step(carry, x):
            h, c = carry
            i, f, g, o = xp.split(x @ wx + h @ wh + b, 4, axis=-1)
            c = _sigmoid(xp, f) * c + _sigmoid(xp, i) * xp.tanh(g)
            return (_sigmoid(xp, o) * xp.tanh(c), c), None
        return lib.lax.scan(step, (h0, xp.zeros_like(h0)), xs)[0][0]
    return lstm


def lstm_forward(lib):
    lstm = _lstm(lib)
    return lambda wx, wh, b, xs, h0, r: lstm(wx, wh, b, xs, h0)


def lstm_grad(lib):
    """``sum(h_T * r)`` and its gradient with respect to the weights."""
    lstm = _lstm(lib)

    def loss(wx, wh, b, xs, h0, r):
        return lib.numpy.sum(lstm(wx, wh, b, xs, h0) * r)
    return lib.value_and_grad(loss, argnums=(0, 1, 2))


def _numpy_lstm_steps(wx, wh, b, xs, h0):
    """The forward pass in a Python loop, keeping what the backward pass needs."""
    h, c, tape = h0, np.zeros_like(h0), []
    for x in xs:
        i, f, g, o = np.split(x @ wx + h @ wh + b, 4, axis=-1)
        i, f, g, o = _sigmoid(np, i), _sigmoid(np, f), np.tanh(g), _sigmoid(np, o)
        c_next = f * c + i * g
        tape.append((x, h, c, i, f, g, o, np.tanh(c_next)))
        h, c = o * tape[-1][-1], c_next
    return h, tape


def numpy_lstm_forward(wx, wh, b, xs, h0, r):
    return _numpy_lstm_steps(wx, wh, b, xs, h0)[0]


def numpy_lstm_grad(wx, wh, b, xs, h0, r):
    """The same gradient by backpropagation through time, written by hand."""
    h, tape = _numpy_lstm_steps(wx, wh, b, xs, h0)
    d_wx, d_wh, d_b = np.zeros_like(wx), np.zeros_like(wh), np.zeros_like(b)
    d_h, d_c = r, np.zeros_like(h)
    for x, h_prev, c_prev, i, f, g, o, tanh_c in reversed(tape):
        d_c = d_c + d_h * o * (1 - tanh_c * tanh_c)
        d_z = np.concatenate([d_c * g * i * (1 - i), d_c * c_prev * f * (1 - f),
                              d_c * i * (1 - g * g), d_h * tanh_c * o * (1 - o)], axis=-1)
        d_wx += x.T @ d_z
        d_wh += h_prev.T @ d_z
        d_b += d_z.sum(axis=0)
        d_h, d_c = d_z @ wh.T, d_c * f
    return np.sum(h * r), (d_wx, d_wh, d_b)


# --- a small CNN's training step --------------------------------------------------------------

CNN_DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def _cnn_setup(is_small):
    batch, side = (4, 16) if is_small else (32, 32)
    n_flat, n_out = (side // 4) ** 2 * 32, 10
    params = (_normal(3, 3, 3, 16, seed=1, scale=27 ** -0.5), _normal(16, seed=2, scale=0.1),
              _normal(3, 3, 16, 32, seed=3, scale=144 ** -0.5), _normal(32, seed=4, scale=0.1),
              _normal(n_flat, n_out, seed=5, scale=n_flat ** -0.5), np.zeros(n_out, np.float32))
    x = _normal(batch, side, side, 3, seed=6)
    y = np.eye(n_out, dtype=np.float32)[np.random.default_rng(7).integers(0, n_out, batch)]
    return f"batch {batch}, {side}x{side}x3, conv 16, conv 32, dense 10", (params, x, y)


def cnn_step(lib):
    """One SGD step on the softmax cross-entropy of two (3x3 convolution, bias, ReLU, 2x2
    max-pool) stages, then a dense layer, on NHWC images."""
    xp, lax = lib.numpy, lib.lax

    def conv_relu(x, w, b):
        return xp.maximum(lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                   dimension_numbers=CNN_DIMENSIONS) + b, 0)

    def pool(x):
        return lax.reduce_window(x, -xp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(params, x, y):
        w1, b1, w2, b2, w3, b3 = params
        h = pool(conv_relu(pool(conv_relu(x, w1, b1)), w2, b2))
        logits = h.reshape(h.shape[0], -1) @ w3 + b3
        return -xp.mean(xp.sum(y * _log_softmax(xp, logits), axis=1))

    def step(params, x, y):
        value, grads = lib.value_and_grad(loss)(params, x, y)
        return tuple(p - LEARNING_RATE * g for p, g in zip(params, grads)), value
    return step


def _patches(x):
    """The 3x3 neighbourhoods of an NHWC array zero-padded by one ("SAME"): an
    ``(N, H, W, C, 3, 3)`` view, which ``tensordot`` copies into the im2col matrix."""
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))


def _numpy_conv(x, w):
    """A 3x3 "SAME" convolution, ``w`` in HWIO layout: im2col and one matrix product."""
    return np.tensordot(_patches(x), w, axes=([3, 4, 5], [2, 0, 1]))


def _numpy_conv_grad_w(x, d_out):
    """The gradient of ``_numpy_conv(x, w)`` with respect to ``w``."""
    return np.tensordot(_patches(x), d_out, axes=([0, 1, 2], [0, 1, 2])).transpose(1, 2, 0, 3)


def _numpy_conv_grad_x(w, d_out):
    """The gradient of ``_numpy_conv(x, w)`` with respect to ``x``: the convolution of
    ``d_out`` with the kernel flipped in space, its in and out channels swapped."""
    return _numpy_conv(d_out, w[::-1, ::-1].transpose(0, 1, 3, 2))


def _numpy_pool(x):
    """2x2 max-pool with stride 2, and the mask of each window's (first) largest element."""
    n, h, w, c = x.shape
    windows = x.reshape(n, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4)
    windows = windows.reshape(n, h // 2, w // 2, c, 4)
    mask = np.arange(4) == windows.argmax(axis=-1)[..., None]
    return windows.max(axis=-1), mask


def _numpy_pool_backward(mask, d_out):
    """Each window's gradient goes to its largest element."""
    n, h, w, c, _ = mask.shape
    d_windows = (mask * d_out[..., None]).reshape(n, h, w, c, 2, 2)
    return d_windows.transpose(0, 1, 4, 2, 5, 3).reshape(n, 2 * h, 2 * w, c)


def numpy_cnn_step(params, x, y):
    """The same step with the backward pass written by hand: im2col convolutions, and
    max-pools that route each window's gradient through an argmax mask."""
    w1, b1, w2, b2, w3, b3 = params
    a1 = np.maximum(_numpy_conv(x, w1) + b1, 0)
    p1, mask1 = _numpy_pool(a1)
    a2 = np.maximum(_numpy_conv(p1, w2) + b2, 0)
    p2, mask2 = _numpy_pool(a2)
    flat = p2.reshape(len(x), -1)
    log_p = _log_softmax(np, flat @ w3 + b3)
    value = -np.mean(np.sum(y * log_p, axis=1))
    d_logits = (np.exp(log_p) - y) / len(x)
    d_a2 = _numpy_pool_backward(mask2, (d_logits @ w3.T).reshape(p2.shape)) * (a2 > 0)
    d_a1 = _numpy_pool_backward(mask1, _numpy_conv_grad_x(w2, d_a2)) * (a1 > 0)
    grads = (_numpy_conv_grad_w(x, d_a1), d_a1.sum(axis=(0, 1, 2)),
             _numpy_conv_grad_w(p1, d_a2), d_a2.sum(axis=(0, 1, 2)),
             flat.T @ d_logits, d_logits.sum(axis=0))
    return tuple(p - LEARNING_RATE * g for p, g in zip(params, grads)), value


# --- a transformer block: forward, and value_and_grad ------------------------------------------

GELU_C = float(np.sqrt(2 / np.pi))
GELU_A = 0.044715
LN_EPS = 1e-5


def _transformer_setup(is_small):
    """The block's parameters, its input ``x`` and the cotangent ``r``. The query, key and
    value projections are ``(width, heads, head width)``, the output one ``(heads, head
    width, width)``: the number of heads is in the shapes, not in a traced argument."""
    batch, seq, width, heads, hidden = (2, 16, 32, 2, 128) if is_small else (8, 128, 256, 4, 1024)
    head_shape, seeds = (width, heads, width // heads), iter(range(1, 20))

    def normal(*shape, scale):
        return _normal(*shape, seed=next(seeds), scale=scale)

    params = {"ln1_scale": 1 + normal(width, scale=0.1), "ln1_bias": normal(width, scale=0.1),
              "wq": normal(*head_shape, scale=width ** -0.5),
              "wk": normal(*head_shape, scale=width ** -0.5),
              "wv": normal(*head_shape, scale=width ** -0.5),
              "wo": normal(heads, width // heads, width, scale=width ** -0.5),
              "ln2_scale": 1 + normal(width, scale=0.1), "ln2_bias": normal(width, scale=0.1),
              "w1": normal(width, hidden, scale=width ** -0.5), "b1": normal(hidden, scale=0.1),
              "w2": normal(hidden, width, scale=hidden ** -0.5), "b2": normal(width, scale=0.1)}
    x, r = normal(batch, seq, width, scale=1.0), normal(batch, seq, width, scale=1.0)
    return (f"batch {batch}, seq {seq}, width {width}, {heads} heads, MLP {hidden}",
            (params, x, r))


def _layer_norm(xp, x, scale, bias):
    """LayerNorm, and what a hand-written backward pass needs."""
    centred = x - xp.mean(x, axis=-1, keepdims=True)
    inv_std = 1 / xp.sqrt(xp.mean(centred * centred, axis=-1, keepdims=True) + LN_EPS)
    normed = centred * inv_std
    return normed * scale + bias, (normed, inv_std, scale)


def _gelu(xp, x):
    """GELU, tanh approximation."""
    return 0.5 * x * (1 + xp.tanh(GELU_C * (x + GELU_A * x * x * x)))


def _softmax(xp, x):
    e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def _split_heads(x, heads):
    """``(batch, seq, heads * d)`` to ``(batch, heads, seq, d)``."""
    b, t, width = x.shape
    return x.reshape(b, t, heads, width // heads).transpose(0, 2, 1, 3)


def _merge_heads(x):
    b, heads, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, heads * d)


def _attention_scale(p):
    return np.float32(p["wq"].shape[2] ** -0.5)


def _attention(xp, p, h):
    """Multi-head self-attention of ``h``, and what a hand-written backward pass needs."""
    width, heads, _ = p["wq"].shape
    q, k, v = (_split_heads(h @ p[w].reshape(width, width), heads) for w in ("wq", "wk", "wv"))
    attention = _softmax(xp, q @ xp.swapaxes(k, -1, -2) * _attention_scale(p))
    merged = _merge_heads(attention @ v)
    return merged @ p["wo"].reshape(width, width), (h, q, k, v, attention, merged)


def _transformer_block(xp, p, x):
    """A pre-LayerNorm block: ``x + attention(LN(x))``, then ``+ MLP(LN(.))`` with GELU."""
    x = x + _attention(xp, p, _layer_norm(xp, x, p["ln1_scale"], p["ln1_bias"])[0])[0]
    h = _layer_norm(xp, x, p["ln2_scale"], p["ln2_bias"])[0]
    return x + _gelu(xp, h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def transformer_forward(lib):
    return lambda params, x, r: _transformer_block(lib.numpy, params, x)


def transformer_grad(lib):
    """``sum(block(x) * r)`` and its gradient with respect to the parameters."""
    def loss(params, x, r):
        return lib.numpy.sum(_transformer_block(lib.numpy, params, x) * r)
    return lib.value_and_grad(loss)


def numpy_transformer_forward(params, x, r):
    return _transformer_block(np, params, x)


def _rows(x):
    """``x`` as a matrix of its last axis' vectors."""
    return x.reshape(-1, x.shape[-1])


def _numpy_layer_norm_backward(tape, d_out):
    """The gradients with respect to the input, the scale and the bias."""
    normed, inv_std, scale = tape
    d_normed = d_out * scale
    d_x = inv_std * (d_normed - d_normed.mean(axis=-1, keepdims=True)
                     - normed * (d_normed * normed).mean(axis=-1, keepdims=True))
    return d_x, _rows(d_out * normed).sum(axis=0), _rows(d_out).sum(axis=0)


def _numpy_attention_backward(p, tape, d_out):
    """The gradients with respect to the input and the four projections: back through the
    output projection, the two batched products and the softmax, then the projections."""
    h, q, k, v, attention, merged = tape
    width, heads, d = p["wq"].shape
    grads = {"wo": (_rows(merged).T @ _rows(d_out)).reshape(heads, d, width)}
    d_heads = _split_heads(d_out @ p["wo"].reshape(width, width).T, heads)
    d_attention = d_heads @ np.swapaxes(v, -1, -2)
    d_scores = attention * (d_attention - np.sum(d_attention * attention, axis=-1,
                                                 keepdims=True)) * _attention_scale(p)
    d_h = np.zeros_like(h)
    for name, d_z in (("wq", d_scores @ k), ("wk", np.swapaxes(d_scores, -1, -2) @ q),
                      ("wv", np.swapaxes(attention, -1, -2) @ d_heads)):
        d_z = _merge_heads(d_z)
        grads[name] = (_rows(h).T @ _rows(d_z)).reshape(width, heads, d)
        d_h += d_z @ p[name].reshape(width, width).T
    return d_h, grads


def _numpy_gelu_grad(x):
    t = np.tanh(GELU_C * (x + GELU_A * x * x * x))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * GELU_A * x * x)


def numpy_transformer_grad(p, x, r):
    """``sum(block(x) * r)`` and its gradient, backpropagated by hand layer by layer."""
    h1, ln1 = _layer_norm(np, x, p["ln1_scale"], p["ln1_bias"])
    attended, attention_tape = _attention(np, p, h1)
    x1 = x + attended
    h2, ln2 = _layer_norm(np, x1, p["ln2_scale"], p["ln2_bias"])
    u = h2 @ p["w1"] + p["b1"]
    g = _gelu(np, u)
    value = np.sum((x1 + g @ p["w2"] + p["b2"]) * r)
    d_u = (r @ p["w2"].T) * _numpy_gelu_grad(u)
    grads = {"w2": _rows(g).T @ _rows(r), "b2": _rows(r).sum(axis=0),
             "w1": _rows(h2).T @ _rows(d_u), "b1": _rows(d_u).sum(axis=0)}
    d_x1, grads["ln2_scale"], grads["ln2_bias"] = _numpy_layer_norm_backward(ln2, d_u @ p["w1"].T)
    d_h1, attention_grads = _numpy_attention_backward(p, attention_tape, d_x1 + r)
    grads.update(attention_grads)
    _, grads["ln1_scale"], grads["ln1_bias"] = _numpy_layer_norm_backward(ln1, d_h1)
    return value, grads


# --- dispatch ------------------------------------------------------------------------------------

def add_one(x):
    return x + 1


def _dispatch_setup(is_small):
    return "4", (np.arange(4, dtype=np.float32),)


WORKLOADS = [
    Workload("power_sum", "x + x*x + x*x*x", _array_of((10000, 10000), (1000, 1000)),
             power_sum, lambda lib: power_sum, seed=True, streams=True),
    Workload("selu", "scale * where(x > 0, x, alpha*exp(x) - alpha)",
             _array_of((10000, 10000), (1000, 1000)), selu(np),
             lambda lib: selu(lib.numpy), seed=True, streams=True),
    Workload("batched_matvec", "vmap(dot, in_axes=(None, 0)); NumPy (M @ V.T).T",
             _matvec_setup, numpy_matvec,
             lambda lib: lib.vmap(lib.numpy.dot, in_axes=(None, 0)), seed=True),
    Workload("blur_473x716", "9x9 Gaussian blur, 81 shifted slices of an edge-padded image",
             _array_of((473, 716), (47, 72)), blur(np), lambda lib: blur(lib.numpy), seed=True),
    Workload("blur_4096x4096", "the same blur on a larger image",
             _array_of((4096, 4096), (410, 410)), blur(np), lambda lib: blur(lib.numpy),
             seed=True),
    Workload("grad_1e6", "grad(lambda x: sum(x**3)); NumPy 3*x**2",
             _array_of((10 ** 6,), (10 ** 4,)), lambda x: 3 * x ** 2,
             lambda lib: lib.grad(lambda x: lib.numpy.sum(x ** 3)), seed=True, streams=True),
    Workload("grad_1e7", "the same gradient on a larger vector",
             _array_of((10 ** 7,), (10 ** 5,)), lambda x: 3 * x ** 2,
             lambda lib: lib.grad(lambda x: lib.numpy.sum(x ** 3)), seed=True, streams=True),
    Workload("mlp_step", "MLP training step: tanh, softmax cross-entropy, SGD",
             _mlp_setup, numpy_mlp_step, mlp_step),
    Workload("rnn_scan", "scan of h = tanh(W h + U x_t); NumPy a Python loop",
             _rnn_setup, numpy_rnn, rnn),
    Workload("lstm_forward", "LSTM over 100 steps with scan; NumPy a Python loop",
             _lstm_setup, numpy_lstm_forward, lstm_forward),
    Workload("lstm_grad", "value_and_grad of the LSTM; NumPy backpropagation through time",
             _lstm_setup, numpy_lstm_grad, lstm_grad),
    Workload("cnn_step", "CNN training step: two conv + ReLU + max-pool, dense, softmax "
             "cross-entropy, SGD; NumPy im2col and a hand-written backward pass",
             _cnn_setup, numpy_cnn_step, cnn_step),
    Workload("transformer_fwd", "pre-LayerNorm transformer block: attention, GELU MLP",
             _transformer_setup, numpy_transformer_forward, transformer_forward),
    Workload("transformer_grad", "value_and_grad of the transformer block; NumPy "
             "backpropagation written by hand", _transformer_setup, numpy_transformer_grad,
             transformer_grad),
    Workload("dispatch", "x + 1 on 4 elements: the cost of one call", _dispatch_setup,
             add_one, lambda lib: add_one),
]


def select(names):
    """The workloads whose name contains one of ``names`` (all when ``names`` is empty)."""
    if not names:
        return list(WORKLOADS)
    chosen = [w for w in WORKLOADS if any(n in w.name for n in names)]
    unknown = [n for n in names if not any(n in w.name for w in WORKLOADS)]
    if unknown:
        raise ValueError(f"no workload matches {unknown}; workloads: "
                         f"{[w.name for w in WORKLOADS]}")
    return chosen

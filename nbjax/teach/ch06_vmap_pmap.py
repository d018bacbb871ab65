"""Chapter 6, parallel computing: pairwise distances with ``vmap``, per-example gradient
clipping, a collective over the devices' axis."""

import numpy as np

from .. import numpy as jnp
from ..api import pmap, vmap
from ..host import local_device_count
from ..jit import jit
from .checking import Wrong, as_array, call, compare, exercise, require


def _rng_array(seed, shape, scale=1.0):
    return jnp.asarray(np.random.default_rng(seed).normal(0, scale, shape), jnp.float32)


@exercise("ch06.pairwise_distances")
def pairwise_distances(answer):
    """``answer(xs, ys)``: the (n, m) matrix of Euclidean distances between the rows of
    ``xs`` (n, d) and of ``ys`` (m, d), under ``jit``."""
    xs, ys = _rng_array(13, (4, 3)), _rng_array(14, (5, 3))
    want = np.linalg.norm(np.asarray(xs)[:, None] - np.asarray(ys)[None], axis=-1)
    what = "jit(pairwise_distances)(xs, ys) for 4 xs and 5 ys"
    compare(call(jit(answer), xs, ys, what=what), want, f"the result of {what}", rtol=1e-5)


def _square_error(w, x, y):
    """The loss the clipping exercise is checked with: one example of linear regression."""
    return (jnp.dot(x, w) - y) ** 2


def _clipped_mean(per_example, max_norm, clip_each=True):
    """The mean of the rows of ``per_example``, each row scaled down to norm ``max_norm``
    first (or, with ``clip_each=False``, the mean scaled down: the mistake to spot)."""
    def clip(g):
        norm = np.linalg.norm(g, axis=-1, keepdims=True)
        return g * np.minimum(1.0, max_norm / np.maximum(norm, 1e-12))
    return clip(per_example).mean(0) if clip_each else clip(per_example.mean(0))


@exercise("ch06.clipped_mean_gradient")
def clipped_mean_gradient(answer):
    """``answer(loss, w, xs, ys, max_norm)``: the mean over the examples of the gradients of
    ``loss(w, x, y)``, each clipped to norm at most ``max_norm`` before averaging."""
    w, xs = _rng_array(15, (3,)), _rng_array(16, (8, 3), scale=2.0)
    ys = _rng_array(17, (8,))
    residual = np.asarray(xs) @ np.asarray(w) - np.asarray(ys)
    per_example = 2 * residual[:, None] * np.asarray(xs, np.float64)
    for max_norm in (1.0, 1e3):
        what = f"clipped_mean_gradient(loss, w, xs, ys, max_norm={max_norm:g}) for 8 examples"
        got = as_array(call(answer, _square_error, w, xs, ys, max_norm, what=what), what)
        mean_clipped = _clipped_mean(per_example, max_norm, clip_each=False)
        if got.shape == (3,) and not np.allclose(mean_clipped, per_example.mean(0)) \
                and np.allclose(got, mean_clipped, rtol=1e-4):
            raise Wrong(f"{what}: you clipped the mean gradient; clip each example's gradient "
                        "before averaging")
        compare(got, _clipped_mean(per_example, max_norm), f"the result of {what}", rtol=1e-4,
                atol=1e-5)


@exercise("ch06.global_centre")
def global_centre(answer):
    """``answer(x)``: run on every device of an axis named ``"devices"``, ``x`` minus the mean
    of every element on every device. Tried under ``vmap(axis_name="devices")`` (4 shards,
    whatever the machine) and under ``pmap`` over this machine's devices."""
    for mapped, shards in ((vmap, 4), (pmap, local_device_count())):
        x = _rng_array(18 + shards, (shards, 3)) + jnp.arange(shards, dtype=jnp.float32)[:, None]
        what = f"{mapped.__name__}(global_centre, axis_name='devices') on {shards} shards"
        got = as_array(call(mapped(answer, axis_name="devices"), x, what=what), what)
        local = np.asarray(x) - np.asarray(x).mean(1, keepdims=True)
        require(not (shards > 1 and got.shape == x.shape and np.allclose(got, local)),
                f"{what}: each shard subtracted its own mean; the mean should be over all "
                "the shards (a collective)")
        compare(got, np.asarray(x) - np.asarray(x).mean(), f"the result of {what}", rtol=1e-5,
                atol=1e-6)

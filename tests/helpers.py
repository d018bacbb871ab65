"""Checks shared by the test modules."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nbjax
from nbjax.backends import compile
from nbjax.core import check_jaxpr, eval_jaxpr
from nbjax.tree_util import tree_flatten, tree_leaves, tree_map, tree_structure

SMALL_INTS = (-9, 9)  # random_array's default integer range: every integer dtype holds it


def assert_close(actual, expected, rtol=1e-7, scale=None, err_msg=""):
    """``actual`` equals ``expected`` in shape and, element-wise, within
    ``rtol * |expected| + rtol * scale``.

    The absolute part is there because of cancellation: an element computed as a sum of large
    terms (a dot, a convolution, a reduction, a difference) can come out near zero, and its
    rounding error is relative to the terms, not to itself, so the CPU's summation order alone
    moves it by many of its own ulps. ``scale`` is the magnitude of those terms: callers that
    know it pass the same computation on the operands' absolute values (the sum of |terms|,
    scalar or per element); by default it is the largest finite |expected|. NaNs must sit at the
    same positions, infinities must be equal, integer and boolean results must match exactly.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (
        f"shapes differ: {actual.shape} (actual), {expected.shape} (expected) {err_msg}")
    if not (np.issubdtype(actual.dtype, np.inexact) or np.issubdtype(expected.dtype, np.inexact)):
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    if scale is None:
        finite = np.abs(expected[np.isfinite(expected)])
        scale = finite.max() if finite.size else 0.0
    scale = np.abs(np.asarray(scale, np.float64))
    atol = rtol * np.maximum(np.where(np.isfinite(scale), scale, 0.0), np.finfo(np.float64).tiny)
    close = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        bad = ~close
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        with np.errstate(invalid="ignore"):  # inf - inf where infinities differ in sign
            error = np.abs(actual.astype(np.complex128) - expected)
        allowed = np.broadcast_to(atol + rtol * np.abs(expected), expected.shape)
        raise AssertionError(
            f"Not equal to tolerance rtol={rtol:g}, atol=rtol*scale {err_msg}\n"
            f"Mismatched elements: {bad.sum()} / {bad.size}; the first at {where}: "
            f"{actual[where]} (actual), {expected[where]} (expected), "
            f"|difference| {error[where]:.3g} > allowed {allowed[where]:.3g}\n"
            f"ACTUAL: {actual!r}\nEXPECTED: {expected!r}")


def loop_vmap(f, args, in_axes, out_axes=0):
    """What ``vmap(f, in_axes, out_axes)(*args)`` must be: ``f`` of each batch member, stacked."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)])
            for i in range(size)]
    return tree_map(lambda *ys: np.stack([np.asarray(y) for y in ys], axis=out_axes), *outs)


def check_vmap(f, args, in_axes, out_axes=0, rtol=1e-6, terms=None):
    """``vmap(f, in_axes, out_axes)(*args)`` agrees with a Python loop over the batch (same tree,
    dtypes and shapes, values to ``assert_close``), and its jaxpr type-checks.

    ``terms``, for an ``f`` whose outputs are sums (a dot or a convolution: ``f`` itself), is a
    function like ``f`` that gives at ``|args|`` the sum of |terms| of each output element: the
    scale of the outputs' rounding errors.
    """
    got_leaves, got_tree = tree_flatten(nbjax.vmap(f, in_axes, out_axes)(*args))
    want_leaves, want_tree = tree_flatten(loop_vmap(f, args, in_axes, out_axes))
    assert got_tree == want_tree
    scales = ([None] * len(want_leaves) if terms is None else
              tree_leaves(loop_vmap(terms, [np.abs(a) for a in args], in_axes, out_axes)))
    for got, want, scale in zip(got_leaves, want_leaves, scales, strict=True):
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert_close(got, want, rtol=rtol, scale=scale)
    check_jaxpr(nbjax.make_jaxpr(nbjax.vmap(f, in_axes, out_axes))(*args).jaxpr)


def random_array(rng, shape=(), dtype=np.float32, *, low=None, high=None, scale=1.0,
                 special=False):
    """Random test input of ``shape`` and ``dtype``, drawn from ``rng`` (a numpy Generator, or
    a seed for one): the same arguments and generator state give the same array.

    - bool: a fair coin.
    - integers: uniform on [low, high], both ends included (default ``SMALL_INTS``: small,
      so sums and products stay meaningful), cut to what ``dtype`` holds (unsigned from 0).
    - floats: uniform on [low, high) when both are given (``low=0.5`` keeps them positive),
      else standard normal times ``scale``.
    - complex: real and imaginary parts each drawn like the floats of the component type.

    ``special`` adds the extremes, each at a random position: for integers the dtype's min and
    max, and a quarter of the values drawn from its whole range (so arithmetic wraps around);
    for floats NaN, +inf, -inf, -0.0 and half the largest finite value; for complex numbers
    the same in the real part.
    """
    rng, dtype = np.random.default_rng(rng), np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        part = np.finfo(dtype).dtype
        real = random_array(rng, shape, part, low=low, high=high, scale=scale, special=special)
        out = np.empty(shape, dtype)  # not real + 1j * imag: that loses a real -0.0
        out.real = real
        out.imag = random_array(rng, shape, part, low=low, high=high, scale=scale)
        return out
    if dtype.kind in "iu":
        x = _random_ints(rng, shape, dtype, low, high)
    else:
        x = _random_floats(rng, shape, dtype, low, high, scale)
    if special and x.size:
        _add_extremes(rng, x)
    return x


def _random_ints(rng, shape, dtype, low, high):
    info = np.iinfo(dtype)
    low = max(SMALL_INTS[0] if low is None else low, info.min)
    high = min(SMALL_INTS[1] if high is None else high, info.max)
    return rng.integers(low, high, shape, dtype=dtype, endpoint=True)


def _random_floats(rng, shape, dtype, low, high, scale):
    if (low is None) != (high is None):
        raise ValueError("random floats take both bounds or neither")
    x = rng.standard_normal(shape) * scale if low is None else rng.uniform(low, high, shape)
    return x.astype(dtype)


def _add_extremes(rng, x):
    """Write ``random_array``'s special values into ``x`` (ints or floats) in place."""
    flat = x.reshape(-1)  # a view: x is freshly made, contiguous
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        n = 1 + x.size // 4
        flat[rng.integers(0, x.size, n)] = rng.integers(info.min, info.max, n, dtype=x.dtype,
                                                       endpoint=True)
        extremes = [info.min, info.max]
    else:
        extremes = [np.nan, np.inf, -np.inf, -0.0, np.finfo(x.dtype).max / 2]
    for value in extremes:
        flat[rng.integers(0, x.size)] = value


def staged(fn, *args):
    """``fn(*args)`` computed the staged way: ``fn`` traced to a jaxpr with make_jaxpr, the
    jaxpr type-checked and evaluated with eval_jaxpr. The outputs come back in ``fn``'s output
    tree (one array, a tuple, a dict ...); arguments may be pytrees too."""
    closed, shapes = nbjax.make_jaxpr(fn, return_shape=True)(*args)
    check_jaxpr(closed.jaxpr)
    outs = eval_jaxpr(closed.jaxpr, closed.consts, *tree_leaves(args))
    return tree_structure(shapes).unflatten(outs)


def eager_and_traced(fn, *args):
    """``fn(*args)`` eagerly, checked against ``staged(fn, *args)``: both must agree exactly
    (values, dtypes and shapes of every output)."""
    out = fn(*args)
    for e, t in zip(tree_leaves(out), tree_leaves(staged(fn, *args)), strict=True):
        assert e.dtype == t.dtype and e.shape == t.shape
        np.testing.assert_array_equal(np.asarray(e), np.asarray(t))
    return out


def cpu_and_reference(fn, *args, name="t"):
    """``fn`` traced on ``args`` and compiled by the cpu backend and by the reference one:
    the two executables, for tests that compare them or look at the cpu's code."""
    closed = nbjax.make_jaxpr(fn)(*args)
    return compile(closed, "cpu", name), compile(closed, "reference", name)


def host_cumlogsumexp(x, axis):
    """``lax.cumlogsumexp(x, axis)`` computed by NumPy in an explicit host callback
    (``pure_callback``): a step that compiled code calls back into Python for, whatever the
    compiler learns to compile, for the tests of host steps. (A function of this module's,
    not a lambda: the disk cache can key programs that hold it.)"""
    return nbjax.pure_callback(_logaddexp_accumulate, nbjax.ShapeDtypeStruct(x.shape, x.dtype),
                               x, axis=axis)


def _logaddexp_accumulate(x, axis):
    return np.logaddexp.accumulate(np.asarray(x), axis=axis)


def is_full_width_float32(ir_text):
    """Whether optimised LLVM IR holds float32 vectors as wide as a plain float32 loop gets
    on the CPU compiled for (8 lanes on AVX2, 8 or 16 on AVX-512, 4 with SSE only). Give
    it rows of 64 elements or more: on a 16-lane CPU (AMD Zen 5) LLVM vectorises a row of
    40 with 8 lanes, sparing itself a long remainder loop; and kernels of
    ``codegen.SMALL_KERNEL`` elements or more: smaller ones are not vectorised."""
    import re

    from nbjax.backends.cpu.runtime import float32_lanes
    widths = [int(n) for n in re.findall(r"<(\d+) x float>", ir_text)]
    return max(widths, default=1) == float32_lanes()


def jupyterlab_theme_css(name):
    """The stylesheet of JupyterLab's installed theme ``name`` ("light", "dark"), which
    defines its ``--jp-*`` variables (skips the test without JupyterLab)."""
    jupyterlab = pytest.importorskip("jupyterlab")
    path = (Path(jupyterlab.__file__).parent / "themes" / "@jupyterlab" /
            f"theme-{name}-extension" / "index.css")
    if not path.is_file():
        pytest.skip(f"JupyterLab's {name} theme is not installed at {path}")
    return path.read_text()


def kernels_over_ipc(folder):
    """Jupyter settings (for a jupyter_config.json, which every Jupyter app reads, or a
    client's config) under which kernels talk to their clients through IPC sockets in
    ``folder``. Over TCP the manager picks ports that are free when picked, and another test's
    kernel may bind one first: this kernel then dies at start ("Address already in use")."""
    return {"KernelManager": {"transport": "ipc", "ip": str(Path(folder) / "kernel")}}


def new_process_json(script, cache_dir):
    """Run the Python file ``script`` in a new process whose disk cache is ``cache_dir``
    (on, whatever this process's setting) and return its last line of output, read as
    JSON (the child prints what the test checks)."""
    env = dict(os.environ, NBJAX_CACHE_DIR=str(cache_dir))
    env.pop("NBJAX_DISABLE_DISK_CACHE", None)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])

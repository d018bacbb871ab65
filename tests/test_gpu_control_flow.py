"""Control flow and library steps on the GPU without a GPU: ``scan``, ``while`` and ``cond``
run as loops (a choice) on the host around bodies compiled for the emulated GPU
(``backends.gpu.control``), running sums and products and FFTs by the device's array
module, computing what the reference backend computes, their values staying on the
device: only a ``while``'s predicate and a ``cond``'s index are copied to the host."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import compiler, lax
from nbjax.backends import get_target
from nbjax.backends.gpu import GpuTarget, reduction
from nbjax.backends.gpu.emulate import HostDevice
from helpers import assert_close


class CountingDevice(HostDevice):
    """The emulated GPU, counting the copies to the host (``get``)."""
    copies = 0

    def get(self, array):
        CountingDevice.copies += 1
        return super().get(array)


TARGET = GpuTarget("gpu-emulated-control", CountingDevice, block=4, max_blocks=3,
                   reductions=reduction.Policy(threads=16, per_partial=2, min_partials=4))
RNG = np.random.default_rng(5)


def _on_both(f, *args):
    """(the emulated GPU's executable, its results, the reference backend's)."""
    closed = nbjax.make_jaxpr(f)(*args)
    exe = compiler.compile(closed, TARGET, f.__name__)
    CountingDevice.copies = 0
    outs = exe.run(*args)
    copies = CountingDevice.copies
    refs = compiler.compile(closed, get_target("reference"), f.__name__).run(*args)
    for out, ref in zip(outs, refs):
        assert_close(np.asarray(out), ref, rtol=1e-5)
        assert np.asarray(out).dtype == ref.dtype
    return exe, outs, copies


def _rnn(w, xs, reverse=False):
    """A scan whose body holds a product, kernels, a reduction and an argmax."""
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, (h.sum(1), jnp.argmax(h, 1))
    h, (sums, best) = lax.scan(step, jnp.zeros((xs.shape[1], w.shape[0]), w.dtype), xs,
                               reverse=reverse)
    return h, sums, best


@pytest.mark.parametrize("length", [0, 1, 7])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_runs_its_body_on_the_device(length, reverse):
    w = RNG.standard_normal((6, 6)).astype(np.float32) * 0.5
    xs = RNG.standard_normal((length, 3, 6)).astype(np.float32)

    def rnn(w, xs):
        return _rnn(w, xs, reverse)
    exe, outs, copies = _on_both(rnn, w, xs)
    assert [g.kind for g in exe.plan.groups if g.eqns[0].primitive.name == "scan"] == ["library"]
    assert "loop on the host over its body compiled for the GPU" in exe.plan.report()
    assert copies == 0  # carries and ys never left the device
    assert all(o.device.platform == "gpu" for o in outs)


def test_reverse_scan_passing_its_carry_through_with_a_const():
    xs = RNG.standard_normal((5, 4)).astype(np.float32)

    def f(xs, c):
        return lax.scan(lambda carry, x: (carry, jnp.cumsum(x) * c + carry), 1.5, xs,
                        reverse=True)
    _on_both(f, xs, np.float32(2))


def test_nested_scans_three_deep():
    xs = RNG.standard_normal((3, 4, 2, 5)).astype(np.float32)

    def f(xs):
        def inner(c, x):
            return lax.scan(lambda c2, y: (c2 + y.sum(), c2 * y), c, x)
        def middle(c, x):
            return lax.scan(inner, c, x)
        return lax.scan(middle, np.float32(0), xs)
    _, _, copies = _on_both(f, xs)
    assert copies == 0


def test_while_copies_only_its_predicate():
    x = RNG.standard_normal(8).astype(np.float32)

    def f(x):
        return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1 + 1),
                              (0, x))
    _, outs, copies = _on_both(f, x)
    assert int(np.asarray(outs[0])) == 10
    assert copies == 11  # the predicate, each time it is asked


def test_fori_loop_and_an_empty_while():
    x = RNG.standard_normal((4, 3)).astype(np.float32)

    def f(x, n):
        y = lax.fori_loop(0, n, lambda i, c: c + i * x.sum(0), jnp.zeros(3, np.float32))
        z = lax.while_loop(lambda c: c.sum() > 1e9, lambda c: c * 2, x)
        return y, z
    _on_both(f, x, np.int32(5))


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 9])
def test_switch_runs_the_branch_its_index_picks(index):
    x = RNG.standard_normal((5, 4)).astype(np.float32)

    def f(i, x):
        return lax.switch(i, [lambda x: x.sum(0), lambda x: jnp.max(x, 0),
                              lambda x: jnp.argmax(x, 0).astype(np.float32)], x)
    _, _, copies = _on_both(f, np.int32(index), x)
    assert copies == 1


def test_cond_inside_a_scan():
    xs = RNG.standard_normal((6, 3)).astype(np.float32)

    def f(xs):
        def step(c, x):
            c = lax.cond(x.sum() > 0, lambda c: c + x, lambda c: c - x, c)
            return c, c.max()
        return lax.scan(step, jnp.zeros(3, np.float32), xs)
    _on_both(f, xs)


def test_grad_through_a_scan_on_the_device():
    w = RNG.standard_normal((4, 4)).astype(np.float32) * 0.5
    xs = RNG.standard_normal((5, 2, 4)).astype(np.float32)

    def loss(w, xs):
        h, _ = lax.scan(lambda h, x: (jnp.tanh(h @ w + x), None), jnp.zeros((2, 4)), xs)
        return (h * h).sum()
    _on_both(nbjax.grad(loss), w, xs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("shape, axis", [((37, 5), 0), ((37, 5), 1), ((0, 3), 0), ((1, 7), 1)])
def test_running_sums_and_products_stay_on_the_device(dtype, shape, axis):
    """cumsum and cumprod (forward and reverse, float16 accumulating in float32, integers
    wrapping) by the device's array module (CuPy's own functions on a GPU), not on the host;
    between kernels, which take their results as they are."""
    x = (RNG.standard_normal(shape) * 2).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x.flat[::7] = np.nan

    def f(x):
        y = x * 1 + 1
        return (lax.cumsum(y, axis), lax.cumsum(y, axis, reverse=True), lax.cumprod(y, axis),
                lax.cumprod(y, axis, reverse=True) + 1)
    with nbjax.enable_x64(dtype == np.float64):
        exe, _, copies = _on_both(f, x)
    assert copies == 0
    assert "cumsum runs on the GPU through CuPy's own function" in exe.plan.report()


def test_bfloat16_running_sums_run_on_the_host():
    x = np.ones((4, 3), jnp.bfloat16)
    exe, _, copies = _on_both(lambda x: lax.cumsum(x, 0), x)
    assert copies == 1  # (CuPy has no bfloat16: the reference implementation, on the host)


@pytest.mark.parametrize("x64", [False, True])
def test_ffts_stay_on_the_device(x64):
    """FFTs of each type, over one and two axes, by the device's array module (cuFFT through
    CuPy on a GPU), after a kernel; and a transform of nothing (size 0). (Element-wise
    kernels of complex numbers, and the transposes and pads ``jnp.fft`` adds around other
    axes and lengths, are not compiled for the GPU yet: the complex operand is an input.)"""
    dtype = np.float64 if x64 else np.float32
    x = RNG.standard_normal((6, 10)).astype(dtype)
    z = (x + 1j * RNG.standard_normal((6, 10))).astype(np.result_type(dtype, np.complex64))

    def f(x, z):
        return (jnp.fft.fft(z), jnp.fft.ifft(z), jnp.fft.rfft(x * 2), jnp.fft.irfft(z),
                jnp.fft.fft2(z), jnp.fft.rfft(x[:0]))
    with nbjax.enable_x64(x64):
        exe, _, copies = _on_both(f, x, z)
    assert copies == 0
    assert "fft runs on the GPU through CuPy's own function" in exe.plan.report()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("shape, axis", [((9, 5), 0), ((9, 5), 1), ((0, 3), 1), ((1, 6), 1)])
def test_sorts_stay_on_the_device(dtype, shape, axis):
    """sort (by one key, by two with a payload) and top_k by the device's array module
    (stable argsorts of integer keys: CuPy's radix sorts on a GPU): ties keep their order,
    NaNs of either sign go last, -0.0 sorts equal to 0.0, and top_k takes IEEE's total
    order; bitwise what the reference computes."""
    x = (RNG.integers(-3, 3, shape) * 0.5).astype(dtype)  # (many ties)
    if np.issubdtype(dtype, np.floating) and x.size:
        x.flat[::4] = -0.0
        x.flat[1::7], x.flat[2::9] = np.nan, -np.nan
    payload = np.arange(x.size, dtype=np.int32).reshape(shape)

    def f(x, payload):
        y = x * 1  # (a kernel first: the sorts take its result on the device)
        by_two = lax.sort((y, payload * 0 + 1, payload), dimension=axis, num_keys=2)
        outs = (lax.sort(y, dimension=axis), *lax.sort_key_val(y, payload, axis), *by_two)
        if shape[-1] >= 3 and axis == len(shape) - 1 and dtype != np.bool_:
            outs += tuple(lax.top_k(y, 3))
        return outs
    with nbjax.enable_x64(dtype == np.float64):
        closed = nbjax.make_jaxpr(f)(x, payload)
        exe = compiler.compile(closed, TARGET, "sorts")
        CountingDevice.copies = 0
        outs = exe.run(x, payload)
        assert CountingDevice.copies == 0
        refs = compiler.compile(closed, get_target("reference"), "sorts").run(x, payload)
    for out, ref in zip(outs, refs):
        out = np.asarray(out)
        assert out.dtype == ref.dtype and out.tobytes() == ref.tobytes()
    assert "sort runs on the GPU through CuPy's own function" in exe.plan.report()


"""The gpu backend on a real GPU (``make gpu-check``): the differential fuzz corpus, the seed
workloads and the library steps against the reference backend. Every test here is marked
``gpu`` and skips, saying what is missing, on a machine without CuPy, a driver or a GPU."""

import os
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import compiler
from nbjax.backends import get_target
from nbjax.backends.gpu import GpuUnavailable

import test_fuzz_differential as fuzz
from benchmarks import workloads
from helpers import assert_close
from test_gpu_codegen import _fuzz_program, _reductions


def _missing():
    try:
        get_target("gpu").device()
        return None
    except GpuUnavailable as e:
        return str(e)


MISSING = _missing()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
EXAMPLES = int(os.environ.get("NBJAX_GPU_FUZZ_EXAMPLES", "150"))


def test_fuzz_corpus_on_the_gpu():
    gpu, reference = get_target("gpu"), get_target("reference")
    for seed in range(EXAMPLES):
        closed, args, program, x64 = _fuzz_program(seed)
        with nbjax.enable_x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = compiler.compile(closed, gpu, "fuzz").run(*args)
            refs = compiler.compile(closed, reference, "fuzz").run(*args)
        try:
            fuzz._compare_all(outs, refs, program)
        except AssertionError as e:
            raise AssertionError(f"fuzz program {seed}") from e


@pytest.mark.parametrize("name", ["power_sum", "selu", "blur"])
def test_seed_workloads(name):
    f = {"power_sum": workloads.power_sum, "selu": workloads.selu(jnp),
         "blur": workloads.blur(jnp)}[name]
    expected = {"power_sum": workloads.power_sum, "selu": workloads.selu(np),
                "blur": workloads.blur(np)}[name]
    x = np.random.default_rng(0).standard_normal((300, 500)).astype(np.float32)
    assert_close(nbjax.jit(f, backend="gpu")(x), expected(x), rtol=1e-5)


def test_dot_general_and_reductions():
    rng = np.random.default_rng(1)
    m = rng.standard_normal((64, 33)).astype(np.float32)
    v = rng.standard_normal((10, 33)).astype(np.float32)

    def f(m, v):
        y = nbjax.vmap(jnp.dot, in_axes=(None, 0))(m, v)
        return y, nbjax.nn.softmax(y, axis=1), y.sum(), jnp.tan(jnp.tanh(y))  # (no poles)

    outs = nbjax.jit(f, backend="gpu")(m, v)
    y = (m @ v.T).T
    e = np.exp(y - y.max(1, keepdims=True))
    for out, ref in zip(outs, [y, e / e.sum(1, keepdims=True), y.sum(), np.tan(np.tanh(y))]):
        assert_close(out, ref, rtol=1e-4)


def test_compiled_program_shows_its_ptx():
    exe = compiler.compile(nbjax.make_jaxpr(workloads.power_sum)(np.ones(8, np.float32)),
                           get_target("gpu"), "f")
    (kernel,) = exe.kernels
    assert ".entry" in kernel.texts["PTX (module)"]
    assert kernel.texts["PTX"].startswith(f".visible .entry {kernel.name}(")
    assert "registers" in kernel.texts["ptxas -v"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (7, 13), (3, 4099), (2, 3_000_001)])
def test_reductions_in_phases(dtype, shape):
    """Sums, max, min, prod of sizes 0, 1, odd and long (the last split in phases by the
    default planner), NaN included, against the reference backend."""
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    if x.size > 1:
        x.flat[x.size // 3] = np.nan
    with nbjax.enable_x64(dtype == np.float64):
        closed = nbjax.make_jaxpr(_reductions)(x)
        exe = compiler.compile(closed, get_target("gpu"), "r")
        outs = exe.run(x)
        refs = compiler.compile(closed, get_target("reference"), "r").run(x)
        clean = np.nan_to_num(x, nan=0.0)  # a large sum with no NaN, against NumPy's
        total = nbjax.jit(jnp.sum, backend="gpu")(clean)
    if x.size > 10 ** 6:
        assert any("partials" in k.name for k in exe.kernels)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for out, ref in zip(outs, refs):
        assert_close(out, ref, rtol=rtol)
    assert total.dtype == dtype
    assert_close(total, clean.sum(dtype=np.float64), rtol=rtol, scale=np.abs(clean).sum())


def test_results_stay_on_the_device(monkeypatch):
    """Transfers counted on the device's put and get: operands go over once, results come
    back only when read, and a result passed on to another jitted call stays where it is."""
    device = get_target("gpu").device()
    moved = {"put": 0, "get": 0}

    def counting(name, fn):
        def counted(a):
            moved[name] += 1
            return fn(a)
        return counted
    monkeypatch.setattr(device, "put", counting("put", device.put))
    monkeypatch.setattr(device, "get", counting("get", device.get))
    f = nbjax.jit(lambda x: (x * 2, jnp.sum(x)), backend="gpu")
    g = nbjax.jit(lambda y: jnp.sin(y) + 1, backend="gpu")
    x = np.random.default_rng(6).standard_normal((1000, 1000)).astype(np.float32)
    y, total = f(x)
    z = g(y)
    assert moved == {"put": 1, "get": 0}
    assert isinstance(z.device_buffer.data, device.cupy.ndarray) and z.device.platform == "gpu"
    assert z.block_until_ready() is z and z.is_ready()
    assert_close(np.asarray(z), np.sin(x * 2) + 1, rtol=1e-5)
    assert_close(float(total), x.sum(dtype=np.float64), rtol=1e-5, scale=np.abs(x).sum())
    assert moved == {"put": 1, "get": 2}


@pytest.mark.parametrize("value", [
    np.linspace(-3, 3, 4099, dtype=np.float32), np.arange(-7, 8, dtype=np.int32).reshape(3, 5),
    np.array([True, False, True]), np.float32(2.5), np.zeros((0, 3), np.float32)],
    ids=["float32", "int32", "bool", "0-d", "size-0"])
def test_device_put_on_the_gpus(monkeypatch, value):
    """``devices("gpu")`` as CuPy sees them; ``device_put`` copies there once, a jitted
    call takes the array as it is, and values come back as they went."""
    device = get_target("gpu").device()
    cupy = device.cupy
    gpus = nbjax.devices("gpu")
    assert len(gpus) == nbjax.device_count("gpu") == cupy.cuda.runtime.getDeviceCount()
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    assert gpus[0] is device.array_device and gpus[0].device_kind == name
    assert repr(gpus[0]) == "CudaDevice(id=0)" and gpus[0].platform == "gpu"
    puts = []
    monkeypatch.setattr(device, "put", lambda a, _put=device.put: puts.append(1) or _put(a))
    y = nbjax.device_put(value, gpus[0])
    assert y.device is gpus[0] and isinstance(y.device_buffer.data, cupy.ndarray)
    assert nbjax.device_put(y, gpus[0]) is y and y.block_until_ready() is y
    z = nbjax.jit(lambda a: a + a, backend="gpu")(y)
    assert len(puts) == 1 and z.device is gpus[0]
    back = nbjax.device_put(y, nbjax.devices("cpu")[0])
    assert back.device_buffer is None and back.dtype == np.asarray(value).dtype
    np.testing.assert_array_equal(np.asarray(back), value)
    np.testing.assert_array_equal(np.asarray(z), np.add(value, value))  # (exact: doubled)
    for other in gpus[1:]:  # (a second GPU, where the machine has one)
        np.testing.assert_array_equal(np.asarray(nbjax.device_put(y, other)), value)


def test_control_flow_and_arg_reductions_on_the_gpu():
    """scan, while, cond (``control``), argmax/argmin (two reduction kernels), running
    sums and products and FFTs (CuPy's own) on the device, against the reference backend:
    what the emulated grid checks
    (``test_gpu_control_flow.py``, ``test_arg_reductions_are_kernels_on_the_emulated_grid``)
    with CuPy's own slicing, allocation and copies."""
    from test_gpu_codegen import _ties_and_nans
    from test_gpu_control_flow import _rnn
    rng = np.random.default_rng(4)
    w = rng.standard_normal((64, 64)).astype(np.float32) * 0.2
    xs = rng.standard_normal((20, 8, 64)).astype(np.float32)
    x = _ties_and_nans(np.float32, (300, 70), rng)

    def f(w, xs, x):
        n = nbjax.lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 1.5, c[1] + 1),
                                 (w[0], 0))
        pick = nbjax.lax.switch(2, [jnp.sum, jnp.max, lambda v: v.mean()], w)
        return (*_rnn(w, xs, True), *n, pick, jnp.argmax(x, 0), jnp.argmin(x, 1),
                jnp.argmax(x), nbjax.lax.cumsum(w, 0, reverse=True),
                nbjax.lax.cumprod(w * 0.1 + 1, 1), jnp.fft.rfft(w * 2), jnp.fft.fft2(xs))

    closed = nbjax.make_jaxpr(f)(w, xs, x)
    outs = compiler.compile(closed, get_target("gpu"), "f").run(w, xs, x)
    refs = compiler.compile(closed, get_target("reference"), "f").run(w, xs, x)
    for out, ref in zip(outs, refs):
        assert_close(np.asarray(out), ref, rtol=1e-4)


def test_sorts_on_the_gpu():
    """sort (one key, two keys with a payload) and top_k by CuPy's stable argsorts, bitwise
    as on the reference backend: NaNs of either sign last, -0.0 equal to 0.0 (ties keep
    their order), top_k in IEEE's total order. What ``test_sorts_stay_on_the_device``
    checks on the emulated device, with CuPy's radix sorts."""
    from test_gpu_codegen import _ties_and_nans
    rng = np.random.default_rng(6)
    x = _ties_and_nans(np.float32, (300, 70), rng)
    x.flat[::97] = -np.nan
    payload = np.arange(x.size, dtype=np.int32).reshape(x.shape)

    def f(x, payload):
        return (nbjax.lax.sort(x, dimension=0), *nbjax.lax.sort_key_val(x, payload, 1),
                *nbjax.lax.sort((x, payload % 3, payload), dimension=1, num_keys=2),
                *nbjax.lax.top_k(x, 5), jnp.sort(x.astype(jnp.float16), axis=None))

    closed = nbjax.make_jaxpr(f)(x, payload)
    exe = compiler.compile(closed, get_target("gpu"), "f")
    assert "sort runs on the GPU through CuPy's own function" in exe.plan.report()
    refs = compiler.compile(closed, get_target("reference"), "f").run(x, payload)
    for out, ref in zip(exe.run(x, payload), refs):
        out = np.asarray(out)
        assert out.dtype == ref.dtype and out.tobytes() == ref.tobytes()


"""GPUs as devices (``nbjax.devices("gpu")``, ``device_put``), without a GPU: CuPy is the
stand-in of test_gpu_codegen (``_FakeCupy``), installed as the ``cupy`` module, so that the
gpu backend finds it as it finds CuPy (``cuda.cuda_devices``) and counts every copy."""

import sys

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import backends
from nbjax.backends import gpu
from nbjax.backends.gpu import GpuUnavailable, cuda

from helpers import assert_close
from test_gpu_codegen import _EmulatingCupyDevice, _FakeCupy, needs_ptxas


@pytest.fixture
def install_cupy(monkeypatch):
    """``install(cupy)``: make ``import cupy`` give ``cupy`` (None: fail, as without CuPy)
    for this test, the gpu backend looking for its GPUs again (and again after the test)."""
    def install(cupy):
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        monkeypatch.setitem(sys.modules, "cupy.cuda", getattr(cupy, "cuda", None))
        monkeypatch.setitem(backends._TARGETS, "gpu", gpu.TARGET)
        cuda.cuda_devices.cache_clear()
    yield install
    cuda.cuda_devices.cache_clear()


@pytest.fixture
def fake_gpus(monkeypatch, install_cupy):
    """Two stand-in GPUs, whose kernels run on the emulated grid."""
    fake = _FakeCupy("90", count=2)
    monkeypatch.setattr(cuda, "CupyDevice", _EmulatingCupyDevice)
    install_cupy(fake)
    return fake


def test_devices_lists_the_gpus(fake_gpus):
    devs = nbjax.devices("gpu")
    assert [d.id for d in devs] == [0, 1] and {d.platform for d in devs} == {"gpu"}
    assert [d.device_kind for d in devs] == ["Fake GPU 0", "Fake GPU 1"]
    assert [repr(d) for d in devs] == [str(d) for d in devs] == ["CudaDevice(id=0)",
                                                                  "CudaDevice(id=1)"]
    assert all(a is b for a, b in zip(devs, nbjax.devices(backend="gpu")))
    assert nbjax.local_devices(backend="gpu") == devs
    assert nbjax.device_count("gpu") == nbjax.local_device_count("gpu") == 2
    assert devs[0] is backends.get_target("gpu").device().array_device  # (where jit runs)
    assert {d.platform for d in nbjax.devices()} == {"cpu"}
    assert nbjax.devices()[0].device_kind == "cpu"
    assert fake_gpus.transfers == {"to device": 0, "to host": 0, "synchronize": 0}


@pytest.mark.parametrize("value", [
    np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5,
    np.array([-3, 0, 2 ** 31 - 1], np.int32),
    np.array([[True, False, True]]),
    np.float32(2.5),
    np.zeros((0, 3), np.float32),
], ids=["float32", "int32", "bool", "0-d", "size-0"])
def test_device_put_round_trip(fake_gpus, value):
    """One copy there, none while it stays, one back when read; put back on a CPU device,
    it is copied back once."""
    device, cpu = nbjax.devices("gpu")[0], nbjax.devices()[0]
    moved = fake_gpus.transfers
    y = nbjax.device_put(value, device)
    assert isinstance(y, nbjax.Array) and y.device is device and y.devices() == {device}
    assert (y.shape, y.dtype) == (np.shape(value), np.asarray(value).dtype)
    assert y.device_buffer.device is device and moved["to device"] == 1
    assert nbjax.device_put(y, device) is y and y.block_until_ready() is y and y.is_ready()
    assert (moved["to device"], moved["to host"]) == (1, 0)
    back = nbjax.device_put(y, cpu)
    assert back.device == cpu and back.device_buffer is None and moved["to host"] == 1
    for out in (np.asarray(back), np.asarray(y)):  # (y's host copy: no second transfer)
        assert out.dtype == np.asarray(value).dtype
        np.testing.assert_array_equal(out, value)
    assert moved == {"to device": 1, "to host": 1, "synchronize": 1}


def test_device_put_pytrees_weak_types_and_a_second_gpu(fake_gpus):
    second = nbjax.devices("gpu")[1]
    tree = nbjax.device_put({"a": np.ones(3, np.float32), "b": [2.0, jnp.arange(4)]}, second)
    leaves = nbjax.tree_util.tree_leaves(tree)
    assert all(leaf.device is second for leaf in leaves)
    assert fake_gpus.copied_on == [1, 1, 1]  # (each copy made with GPU 1 current)
    assert tree["b"][0].weak_type and tree["b"][0].dtype == np.float32  # (as in JAX)
    first = nbjax.device_put(tree["a"], nbjax.devices("gpu")[0])  # (through the host)
    assert first.device.id == 0 and fake_gpus.copied_on == [1, 1, 1, 0]
    np.testing.assert_array_equal(np.asarray(first), np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(tree["b"][1]), np.arange(4, dtype=np.int32))


@needs_ptxas
def test_jit_takes_device_put_arrays_without_a_copy(fake_gpus):
    """The executable reads the buffer device_put made (counted: no copy to the device
    after the put), for every dtype the kernel takes."""
    device = nbjax.devices("gpu")[0]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((33, 5)).astype(np.float32)
    n = rng.integers(-4, 4, (33, 5)).astype(np.int32)
    mask = x > 0
    xs, ns, masks = nbjax.device_put((x, n, mask), device)
    assert fake_gpus.transfers["to device"] == 3
    f = nbjax.jit(lambda x, n, m: jnp.where(m, x * n, -x).sum(0), backend="gpu")
    out = f(xs, ns, masks)
    assert fake_gpus.transfers == {"to device": 3, "to host": 0, "synchronize": 0}
    assert out.device is device
    expected = np.where(mask, x * n, -x).sum(0)
    assert_close(out, expected, rtol=1e-5, scale=np.abs(x * n).sum(0))
    assert fake_gpus.transfers["to host"] == 1


@pytest.mark.parametrize("missing, message", [
    ("cupy", "needs CuPy, which is not installed"),
    ("driver", "found CuPy but no usable CUDA driver"),
    ("device", "found CuPy and a CUDA driver but no GPU"),
])
def test_without_a_gpu_the_error_says_what_is_missing(monkeypatch, install_cupy, missing,
                                                      message):
    fake = _FakeCupy("90", count=0)
    if missing == "driver":
        def no_driver():
            raise RuntimeError("cudaErrorInsufficientDriver")
        monkeypatch.setattr(fake.cuda.runtime, "getDeviceCount", staticmethod(no_driver))
    install_cupy(None if missing == "cupy" else fake)
    for ask in (lambda: nbjax.devices("gpu"), lambda: nbjax.local_devices(backend="gpu"),
                lambda: nbjax.device_count("gpu")):
        with pytest.raises(RuntimeError, match=message) as info:
            ask()
        assert isinstance(info.value, GpuUnavailable)
    assert {d.platform for d in nbjax.devices()} == {"cpu"}
    x = nbjax.device_put(np.ones(2, np.float32), nbjax.devices()[0])
    assert x.device == nbjax.devices()[0] and x.device_buffer is None


def test_device_put_on_something_not_a_device():
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        nbjax.device_put(np.ones(2), "gpu")


def test_device_put_under_transformations_leaves_tracers(fake_gpus):
    device = nbjax.devices("gpu")[0]
    assert nbjax.grad(lambda x: nbjax.device_put(x, device) * 3)(2.0) == 3.0
    assert nbjax.jit(lambda x: nbjax.device_put(x, nbjax.devices()[0]) + 1)(1.0) == 2.0
    assert fake_gpus.transfers["to device"] == 0

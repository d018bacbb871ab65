"""Devices, processes and moving values between Python and arrays, as JAX's top level.

nbjax runs on the CPU devices of ``nbjax.devices()``: those of one process, or of every
process of a distributed run (``nbjax.distributed.initialize``); an Array's data there is
always ready when the call that made it returns, so waiting is a no-op that JAX code can
still write. Arrays on a GPU (``devices("gpu")``: the gpu backend's results, and what
``device_put`` puts there) stay there until read: waiting for them waits for the GPU's
stream.
"""

import gc
import platform
import sys

import llvmlite
import numpy as np

from .core import Array, Device, devices, pytree, to_numpy
from .core import local_devices as _local_devices
from .core.array import processes
from .numpy import asarray
from .version import __version__

__all__ = ["block_until_ready", "copy_to_host_async", "default_backend", "device_count",
           "device_get", "device_put", "effects_barrier", "host_count", "host_id", "host_ids",
           "live_arrays", "local_device_count", "local_devices", "make_array_from_callback",
           "make_array_from_process_local_data", "make_array_from_single_device_arrays",
           "print_environment_info", "process_count", "process_index", "process_indices"]


def block_until_ready(x):
    """Wait for every array of the pytree ``x`` to be computed; returns ``x``."""
    for leaf in pytree.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """Place a value (an array or a pytree of them) on ``device``: an array on a GPU is
    copied there from the host once, and stays there until its values are read; one there
    already is not copied; one put on a CPU device is copied back. Without ``device``,
    arrays stay where they are and other values become arrays on the host.

    ``may_alias=False`` asks for a copy even where none is needed (so that donating one of
    the two arrays to a jitted call cannot change the other). ``src`` (where the value is)
    and ``donate`` (whether its buffer may be reused) are accepted as JAX takes them; as
    JAX on the CPU, nbjax neither needs the one nor deletes the donated array."""
    if donate and may_alias:
        raise ValueError("may_alias and donate cannot be True at the same time.")
    if device is not None and (not isinstance(device, Device) or
                               device not in devices(device.platform)):
        raise ValueError(f"unknown device {device!r}; available: {devices()}")

    def put(leaf):
        value = asarray(leaf)
        if may_alias is False and value is leaf:
            value = Array.wrap(np.array(to_numpy(value)), value.aval)
        return value if device is None else _put(value, device)
    return pytree.tree_map(put, x)


def _put(value, device):
    """An Array on ``device``; a tracer (``device_put`` under a transformation) as it is: the
    program being traced is placed where it runs."""
    return device.put(value) if isinstance(value, Array) else value


def device_get(x):
    """The pytree ``x`` with its Arrays as NumPy arrays (other leaves unchanged)."""
    return pytree.tree_map(lambda a: np.asarray(to_numpy(a)) if isinstance(a, Array) else a, x)


def default_backend():
    """The platform jitted functions run on: ``"cpu"``."""
    return "cpu"


def live_arrays(platform=None):
    """The arrays alive now (``jax.live_arrays``), on the devices of ``platform``.

    Read from the garbage collector's list of the objects it tracks (arrays are among them),
    so that making an array costs nothing to keep this list; tracers are not arrays.
    """
    devices(platform)  # an unknown platform raises, as in JAX
    return [x for x in gc.get_objects() if isinstance(x, Array)]


def device_count(backend=None):
    return len(devices(backend))


def local_devices(process_index=None, backend=None, host_id=None):
    """The devices of this process (or of process ``process_index``)."""
    index = process_index if process_index is not None else host_id
    if index is None or index == processes.index:
        return _local_devices(backend)
    return [d for d in devices(backend) if d.process_index == index]


def local_device_count(backend=None):
    return len(_local_devices(backend))


def process_index(backend=None):
    """This process's index among the processes of a distributed run (0 in one process)."""
    return processes.index


def process_count(backend=None):
    return processes.count


def process_indices(backend=None):
    return list(range(processes.count))


host_id, host_count, host_ids = process_index, process_count, process_indices


def copy_to_host_async(x):
    """Start copying every array of the pytree ``x`` to the host; returns ``x``. nbjax's
    arrays are in host memory already."""
    for leaf in pytree.tree_leaves(x):
        if hasattr(leaf, "copy_to_host_async"):
            leaf.copy_to_host_async()
    return x


def effects_barrier():
    """Wait until every callback of the programs run so far has run: nbjax runs them in
    order, before the call that binds them returns, so there is nothing to wait for."""


def print_environment_info(return_string=False):
    """The versions of nbjax, Python, NumPy and llvmlite, and the devices (for bug reports)."""
    lines = [f"nbjax:    {__version__}", f"numpy:    {np.__version__}",
             f"llvmlite: {llvmlite.__version__}", f"python:   {sys.version}",
             f"device info: {devices()}, {device_count()} local devices",
             f"process_count: {process_count()}", f"platform: {platform.uname()}"]
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None


def _check_sharding(sharding):
    """nbjax's arrays live whole on one device: the sharding must be such a placement."""
    if len(sharding.device_set) != 1 or not set(sharding.device_set) <= set(devices()):
        raise ValueError(f"nbjax places an array whole on one of its devices; got {sharding!r}")


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """The array of ``shape`` whose data ``data_callback(index)`` gives, as JAX calls it for
    each device's part: nbjax has one part, the whole array (``index`` is a tuple of
    ``slice(None)``)."""
    _check_sharding(sharding)
    shape = tuple(shape)
    data = asarray(data_callback((slice(None),) * len(shape)), dtype=dtype)
    if data.shape != shape:
        raise ValueError(f"data_callback returned shape {data.shape}, expected {shape}")
    return data


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """The array of ``shape`` made of one array per device: nbjax's arrays live on one
    device, so ``arrays`` has one, of the whole ``shape``."""
    _check_sharding(sharding)
    arrays = list(arrays)
    if len(arrays) != 1 or tuple(arrays[0].shape) != tuple(shape):
        raise ValueError(f"expected one array of shape {tuple(shape)} (one device), got "
                         f"{[tuple(a.shape) for a in arrays]}")
    return asarray(arrays[0], dtype=dtype)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """The global array of this process's data: nbjax runs one process, so it is all of it
    (``global_shape`` must be its shape, when given)."""
    _check_sharding(sharding)
    data = asarray(local_data)
    if global_shape is not None and tuple(global_shape) != data.shape:
        raise ValueError(f"global_shape {tuple(global_shape)} is not the shape {data.shape} "
                         "of the data of the one nbjax process")
    return data

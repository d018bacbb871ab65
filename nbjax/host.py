"""Devices, processes and moving values between Python and arrays, as JAX's top level.

nbjax runs in one process on the CPU devices of ``nbjax.devices()``; an Array's data is
always ready when the call that made it returns, so waiting is a no-op that JAX code can
still write.
"""

import numpy as np

from .core import Array, devices, pytree, to_numpy

__all__ = ["block_until_ready", "default_backend", "device_count", "device_get", "device_put",
           "host_count", "host_id", "host_ids", "local_device_count", "local_devices",
           "process_count", "process_index", "process_indices"]


def block_until_ready(x):
    """Wait for every array of the pytree ``x`` to be computed; returns ``x``."""
    for leaf in pytree.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


def device_put(x, device=None):
    """Place a value (an array or a pytree of them) on ``device`` (the CPU device now)."""
    from .numpy import asarray
    if device is not None and device not in devices():
        raise ValueError(f"unknown device {device!r}; available: {devices()}")
    return pytree.tree_map(asarray, x)


def device_get(x):
    """The pytree ``x`` with its Arrays as NumPy arrays (other leaves unchanged)."""
    return pytree.tree_map(lambda a: np.asarray(to_numpy(a)) if isinstance(a, Array) else a, x)


def default_backend():
    """The platform jitted functions run on: ``"cpu"``."""
    return "cpu"


def device_count(backend=None):
    return len(devices(backend))


def local_devices(process_index=None, backend=None, host_id=None):
    """This process's devices: all of them (nbjax runs in one process)."""
    return devices(backend)


def local_device_count(backend=None):
    return len(devices(backend))


def process_index(backend=None):
    return 0


def process_count(backend=None):
    return 1


def process_indices(backend=None):
    return [0]


host_id, host_count, host_ids = process_index, process_count, process_indices

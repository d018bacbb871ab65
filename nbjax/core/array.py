"""``Array``: the immutable value users hold, and the devices an array can live on.

On the CPU an Array wraps a read-only NumPy array. An Array made by a device (a GPU
executable's result, ``Array.on_device``) holds the device's buffer instead, and copies it
to the host once, the first time its values are read (``np.asarray``, printing, ``item``...);
a compiled call on that device takes the buffer as it is (``to_operand``). An array donated to a
jitted call (``donate_argnums``) or ``delete``d keeps its type but not its data: reading it
raises RuntimeError, as in JAX. Methods and
operators with NumPy semantics are attached by ``nbjax.numpy`` (shared with tracers),
keeping this class to storage.
"""

import operator
import os

import numpy as np

from . import dtypes
from .abstract import ShapedArray
from .trace import Tracer, is_python_scalar


class Device:
    """A place arrays live: a CPU device (those of ``devices()``), or a ``GpuDevice``."""

    platform = "cpu"
    device_kind = "cpu"

    def __init__(self, id, process_index=0):
        self.id, self.process_index = id, process_index

    def __repr__(self):
        return f"CpuDevice(id={self.id})"

    def __eq__(self, other):
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform, other.id)

    def __hash__(self):
        return hash((self.platform, self.id))

    def put(self, array):
        """``array`` (an Array) in host memory, where every CPU device's arrays are: an
        array on a GPU is copied back (once: its host copy is kept)."""
        return array if array.device_buffer is None else Array.wrap(array._value, array.aval)


class GpuDevice(Device):
    """A GPU (``devices("gpu")``, and ``x.device`` of an array there), as JAX's
    ``CudaDevice``. The gpu backend makes them, so that the core knows nothing of CUDA:
    ``runtime`` is the backend's handle on the GPU's memory, whose ``array(value, aval)``
    copies host values into an Array there."""

    platform = "gpu"

    def __init__(self, id, device_kind, runtime):
        super().__init__(id)
        self.device_kind, self.runtime = device_kind, runtime

    def __repr__(self):
        return f"CudaDevice(id={self.id})"

    def put(self, array):
        """``array`` on this GPU: as it is when it is here already, else one copy from the
        host (an array on another GPU goes through the host)."""
        if array.device is self:
            return array
        return self.runtime.array(to_numpy(array), array.aval)


# The devices of platforms other than the CPU, by name: functions listing them, which a
# layer above registers (``register_platform``), so that asking for a GPU loads its backend
# only then, and the core imports nothing of it.
_platforms = {}


def register_platform(name, list_devices):
    """Make ``devices(name)`` answer ``list_devices()`` (which raises a RuntimeError saying
    what is missing when the platform cannot run here)."""
    _platforms[name] = list_devices


_CPU0 = Device(0)
HOST_DEVICE = _CPU0  # the device of the Arrays of compiled calls' results (``host_result``)
_cpu_devices = {(0, 0): _CPU0}  # (id, process) -> Device: the same object every time


class _Processes:
    """This process's place among the processes of a distributed run (``nbjax.distributed``
    sets it once): devices are numbered process by process, ``local`` of them in each."""
    index, count, local = 0, 1, None


processes = _Processes()


def set_process_layout(index, count, local):
    """Record this process as ``index`` of ``count``, each with ``local`` devices."""
    processes.index, processes.count, processes.local = index, count, local


def cpu_device_count():
    """``NBJAX_NUM_CPU_DEVICES`` if set (as JAX's ``--xla_force_host_platform_device_count``),
    else one device per core this process may run on. Read at every call, so tests can
    change it."""
    value = os.environ.get("NBJAX_NUM_CPU_DEVICES")
    if value is None:
        cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        return len(cores) if cores else (os.cpu_count() or 1)
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"NBJAX_NUM_CPU_DEVICES must be a positive integer, got {value!r}")
    return count


def _platform_devices(backend):
    """The devices of ``backend`` other than the CPU (``register_platform``)."""
    if backend not in _platforms:
        raise RuntimeError(f"Unknown backend {backend!r}; available backends: "
                           f"{', '.join(['cpu', *_platforms])}")
    return list(_platforms[backend]())


def _device(id, process):
    return _cpu_devices.setdefault((id, process), Device(id, process))


def devices(backend=None):
    """The available devices (``nbjax.devices()``: the CPU's, of every process of a
    distributed run, on which pmap runs one shard each; ``devices("gpu")``: this machine's
    GPUs)."""
    if backend not in (None, "cpu"):
        return _platform_devices(backend)
    if processes.count == 1:
        return [_device(i, 0) for i in range(cpu_device_count())]
    local = processes.local
    return [_device(p * local + i, p) for p in range(processes.count) for i in range(local)]


def local_devices(backend=None):
    """This process's devices: all of them, unless ``nbjax.distributed`` started several
    (each process sees its own GPUs)."""
    if backend not in (None, "cpu"):
        return _platform_devices(backend)
    if processes.count == 1:
        return devices()
    first = processes.index * processes.local
    return [_device(first + i, processes.index) for i in range(processes.local)]


def first_local_device():
    """The CPU device an array made in this process reports (every CPU device's arrays live
    in its memory): device 0, or this process's first under MPI."""
    return _CPU0 if processes.count == 1 else local_devices()[0]


class SingleDeviceSharding:
    """How an array is laid out: whole, on one device (the only layout nbjax makes outside
    ``pmap``), as JAX's ``jax.sharding.SingleDeviceSharding``."""

    def __init__(self, device, *, memory_kind="device"):
        self._device, self.memory_kind = device, memory_kind

    device_set = property(lambda self: {self._device})
    is_fully_addressable = property(lambda self: True)
    is_fully_replicated = property(lambda self: True)
    num_devices = property(lambda self: 1)

    def devices_indices_map(self, global_shape):
        return {self._device: (slice(None),) * len(global_shape)}

    def shard_shape(self, global_shape):
        return tuple(global_shape)

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and (
            (self._device, self.memory_kind) == (other._device, other.memory_kind))

    def __hash__(self):
        return hash((self._device, self.memory_kind))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


class Shard:
    """One device's part of an array (``x.addressable_shards``): on one device, all of it."""

    def __init__(self, device, index, replica_id, data):
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


class Array:
    """An immutable n-dimensional array (``nbjax.Array``)."""

    __array_priority__ = 100
    # ``_host``: the values as a read-only NumPy array (None until a device buffer is read);
    # ``_buffer``: the device's buffer (None for an array made on the host).
    __slots__ = ("_host", "_buffer", "_aval", "_device", "__weakref__")

    def __init__(self, value, weak_type=False, device=None):
        value = np.asarray(value)
        if value.flags.writeable:  # someone else may hold it: keep our own frozen copy
            value = value.copy()
            value.flags.writeable = False
        self._host, self._buffer = value, None
        self._aval = ShapedArray(value.shape, value.dtype, weak_type)
        self._device = device or _CPU0

    @classmethod
    def wrap(cls, value, aval):
        """Wrap a primitive's NumPy result, which the caller gives away, as ``aval`` says (an
        Array on a device, which a device's executable returns, stays there)."""
        if isinstance(value, Array) and value._buffer is not None:
            if (value.shape, value.dtype) != (aval.shape, aval.dtype):
                raise AssertionError(f"impl returned {value.aval}, abstract_eval {aval}")
            return value if value.aval == aval else cls.on_device(value._buffer, aval)
        value = np.asarray(value, dtype=aval.dtype)
        if value.shape != aval.shape:
            raise AssertionError(f"impl returned shape {value.shape}, abstract_eval {aval.shape}")
        if value.flags.writeable:
            value.flags.writeable = False
        return host_result(value, aval)

    @classmethod
    def on_device(cls, buffer, aval):
        """An Array of ``aval`` whose data is ``buffer``, in a device's memory. The buffer
        has ``device`` (a ``Device``), ``to_host()`` (a NumPy copy, once the work writing it
        is done), ``block_until_ready()`` and ``is_ready()``; its executable may read its
        own ``data``."""
        arr = object.__new__(cls)
        arr._host, arr._buffer, arr._aval, arr._device = None, buffer, aval, buffer.device
        return arr

    @property
    def _value(self):
        """The values as a read-only NumPy array: copied from the device at the first read."""
        host = self._host
        if host is None:
            if self._buffer is None:
                raise RuntimeError(f"Array has been deleted with shape={self._aval.str_short()}.")
            host = np.asarray(self._buffer.to_host(), dtype=self._aval.dtype)
            if host.flags.writeable:
                host.flags.writeable = False
            self._host = host
        return host

    aval = property(lambda self: self._aval)
    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: self._aval.ndim)
    size = property(lambda self: self._aval.size)
    weak_type = property(lambda self: self._aval.weak_type)
    nbytes = property(lambda self: self._aval.size * self.itemsize)
    itemsize = property(lambda self: np.dtype(self._aval.dtype).itemsize)

    @property
    def device(self):
        return self._device

    @property
    def device_buffer(self):
        """The buffer in a device's memory that holds the data (see ``on_device``), or None
        for an array on the host: what an executable on that device reads without a copy."""
        return self._buffer

    def devices(self):
        return {self._device}

    def is_deleted(self):
        """Whether the array was deleted (``delete``, or donated to a jitted call): its data
        is gone, and reading it raises RuntimeError."""
        return self._host is None and self._buffer is None

    def delete(self):
        """Free the data now (as JAX's ``Array.delete``); only the type remains."""
        self._host = self._buffer = None

    # Placement, as JAX reports it for an array on one device. Arrays are never committed:
    # an array is wherever it was made or ``device_put`` copied it, and computations on it
    # run on the backend the call names, not on its device.
    sharding = property(lambda self: SingleDeviceSharding(self._device))
    committed = property(lambda self: False)
    is_fully_addressable = property(lambda self: True)
    is_fully_replicated = property(lambda self: True)

    @property
    def addressable_shards(self):
        return [Shard(self._device, (slice(None),) * self.ndim, 0, self)]

    global_shards = addressable_shards

    def addressable_data(self, index):
        """The data of shard ``index``: there is one, the whole array."""
        return self.addressable_shards[index].data

    def copy_to_host_async(self):
        """Start copying to the host: a host array's data is already there; a device array's
        is copied now (the copy is synchronous)."""
        if self._buffer is not None:
            self._value  # noqa: B018  (the read copies)

    def block_until_ready(self):
        """Wait until the value is computed: on the host it is when the call returns; on a
        device, the work queued before it must finish."""
        buffer = self._buffer  # (no method calls: timing loops call this after every call)
        if buffer is not None:
            buffer.block_until_ready()
        elif self._host is None:
            self._value  # noqa: B018  (raises: deleted)
        return self

    def is_ready(self):
        return self._buffer is None or self._buffer.is_ready()

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self._value, dtype=dtype)
        return self._value if dtype is None else self._value.astype(dtype, copy=False)

    def item(self, *args):
        return self._value.item(*args)

    def tolist(self):
        return self._value.tolist()

    def tobytes(self, order="C"):
        """The raw bytes of the values, as NumPy's ``tobytes`` gives them."""
        return self._value.tobytes(order=order)

    def clone(self):
        """A new Array of the same values on the same device (JAX's ``clone``). A host
        array shares its read-only data, which neither can change (nor donate: a target
        reuses only buffers nothing else refers to); a device array's buffer is copied, so
        that deleting or donating one leaves the other."""
        if self._buffer is None:
            return host_result(self._value, self._aval)
        return self._device.runtime.array(self._value, self._aval)

    def platform(self):
        """The platform of the array's device: ``"cpu"`` or ``"gpu"``."""
        return self._device.platform

    def on_device_size_in_bytes(self):
        """The memory the data takes on its device: its ``nbytes`` (dense, unpadded)."""
        return self.nbytes

    # Where the array was made: JAX records it only in its C++ runtime, which may be
    # configured not to (then None, as here).
    traceback = property(lambda self: None)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (Array.wrap(row, ShapedArray(row.shape, self.dtype, self.weak_type))
                for row in self._value)

    def __bool__(self):
        return bool(self._value)

    def __int__(self):
        return int(self._value)

    def __float__(self):
        return float(self._value)

    def __complex__(self):
        return complex(self._value)

    def __index__(self):
        if not dtypes.is_int(self.dtype):
            raise TypeError(f"only integer scalar arrays can be converted to a scalar index, "
                            f"got dtype {self.dtype}")
        return operator.index(self._value)

    def __setitem__(self, idx, value):
        raise TypeError(
            "nbjax arrays are immutable and do not support in-place item assignment. Instead "
            "of x[idx] = y, use x = x.at[idx].set(y) or another .at[] method.")

    __hash__ = None

    def __repr__(self):
        """As JAX prints an array: NumPy's lines of values, wrapped as if only a comma
        followed them, then the dtype (after a wider gap when the last line is full)."""
        name = "float0" if self.dtype == dtypes.float0 else self.dtype.name
        dtype = f"dtype={name}, weak_type=True" if self.weak_type else f"dtype={name}"
        prefix, width = "Array(", np.get_printoptions()["linewidth"]
        if self.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._value, prefix=prefix, suffix=",", separator=", ",
                                   max_line_width=width)
        last_line = len(body) - body.rfind("\n") + 1
        gap = " " * len(prefix) if last_line + len(dtype) + 2 > width else " "
        return f"{prefix}{body},{gap}{dtype})"

    def __str__(self):
        return str(self._value)

    def __format__(self, spec):
        # (an array of several elements formats as NumPy's: only with an empty spec)
        return format(self._value.item() if self.ndim == 0 else np.asarray(self._value), spec)

    def __reduce__(self):
        return (Array, (np.array(self._value), self.weak_type))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def host_result(value, aval, _new=object.__new__):
    """The Array of ``value``, a read-only NumPy array of ``aval``'s shape and dtype that the
    caller gives away (a compiled call's new result): ``Array.wrap`` without its conversions
    and checks, for the jitted calls that know their results to be such (``nbjax.jit``'s
    fast path)."""
    arr = _new(Array)
    arr._host = value
    arr._buffer = None
    arr._aval = aval
    arr._device = HOST_DEVICE
    return arr


def to_numpy(x):
    """The NumPy value behind an Array / NumPy value / Python scalar, in its canonical dtype
    (an Array on a device is copied to the host, once)."""
    if isinstance(x, Array):
        host = x._host
        return host if host is not None else x._value
    if is_python_scalar(x):
        dtype, _ = dtypes.python_scalar_dtype(x)
        return np.asarray(scalar_in_range(x, dtype), dtype)
    if isinstance(x, (np.ndarray, np.generic)):
        dtype = dtypes.canonicalize(x.dtype)
        return np.asarray(x, dtype)
    if isinstance(x, Tracer):
        raise TypeError(f"cannot convert tracer {x!r} to a NumPy value")
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid nbjax type")


def to_operand(x):
    """An operand of a compiled call: ``to_numpy(x)``, except that an Array on a device
    stays one, so that an executable on that device takes its buffer without a copy (the
    others call ``to_numpy`` on it)."""
    if isinstance(x, Array) and x._buffer is not None:
        return x
    return to_numpy(x)


def scalar_in_range(x, dtype):
    """Check a Python int fits ``dtype`` (JAX raises OverflowError rather than wrapping; not
    for ml_dtypes' 1-, 2- and 4-bit integers, which wrap, as their conversion does in JAX)."""
    if isinstance(x, int) and not isinstance(x, bool) and dtypes.is_int(dtype) \
            and not dtypes.is_ml_dtype(dtype):
        info = dtypes.iinfo(dtype)
        if not info.min <= x <= info.max:
            raise OverflowError(f"Python integer {x} out of bounds for {np.dtype(dtype).name}")
    return x

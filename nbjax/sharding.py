"""JAX's sharding vocabulary: meshes of devices with named axes (``Mesh``, ``make_mesh``), the
mesh in context (``set_mesh``, ``get_mesh``), and ``PartitionSpec`` (``P``), which says along
which mesh axes each dimension of a value is split.

These are descriptions, used by ``shard_map`` (``nbjax.shard_map``), which computes each
block of a value on its own position of a mesh. An nbjax array itself always lives whole on
one device: ``SingleDeviceSharding`` is the one layout an array has, so ``NamedSharding`` and
``reshard``, which would place an array's blocks on several devices, raise
NotImplementedError saying so, as does ``smap``.
"""

import collections
import enum
import functools
import inspect
import math
import operator
import types
import warnings

import numpy as np

from .core.array import SingleDeviceSharding
from .core.array import devices as all_devices
from .core.errors import unavailable

__all__ = ["NamedSharding", "P", "SingleDeviceSharding", "make_mesh", "set_mesh", "reshard",
           "smap"]


class AxisType(enum.Enum):
    """How a mesh axis is used: ``Auto`` (the compiler chooses how values are split along it),
    ``Explicit`` (values carry their split in their types), ``Manual`` (inside ``shard_map``,
    each position computes its own block). nbjax arrays carry no split, so shard_map treats
    Auto and Explicit axes alike."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


class DuplicateSpecError(Exception):
    """A PartitionSpec that splits two dimensions along the same mesh axis (JAX's class, an
    Exception)."""


# --- PartitionSpec -------------------------------------------------------------------------

def _canonical_entry(entry):
    """JAX's spelling of one dimension's entry: a tuple of one axis name is that name, an
    empty tuple is None (the dimension is not split)."""
    if isinstance(entry, list):
        entry = tuple(entry)
    if isinstance(entry, tuple) and len(entry) <= 1:
        return entry[0] if entry else None
    return entry


class PartitionSpec:
    """How a value is split over a mesh: one entry per leading dimension of the value, each
    None (not split), a mesh axis name, or a tuple of names (split over all of them, the
    first one major). Dimensions beyond the entries are not split; ``P()`` splits nothing
    (the value is replicated)."""

    __slots__ = ("_partitions",)

    def __init__(self, *partitions, unreduced=frozenset(), reduced=frozenset()):
        if unreduced or reduced:
            raise NotImplementedError("PartitionSpec(unreduced=, reduced=) describe partial "
                                      "sums held per device, which nbjax arrays (whole on one "
                                      "device) do not have")
        self._partitions = tuple(map(_canonical_entry, partitions))

    def __len__(self):
        return len(self._partitions)

    def __getitem__(self, index):
        return self._partitions[index]

    def __iter__(self):
        return iter(self._partitions)

    def index(self, value):
        return self._partitions.index(value)

    def count(self, value):
        return self._partitions.count(value)

    def __eq__(self, other):
        return isinstance(other, PartitionSpec) and self._partitions == other._partitions

    def __hash__(self):
        return hash(self._partitions)

    def __repr__(self):
        return "P" + repr(self._partitions)


P = PartitionSpec


# --- Mesh ----------------------------------------------------------------------------------

class Mesh:
    """An array of devices with a name for each of its axes: ``Mesh(devices, axis_names)``.

    ``shape`` maps each axis name to its size, in order. Used by ``shard_map``, which runs
    its function once per position of the mesh.
    """

    def __init__(self, devices, axis_names, axis_types=None):
        self.devices = np.array(devices, dtype=object)
        self.axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if self.devices.ndim != len(self.axis_names):
            raise ValueError(
                "Mesh requires the ndim of its first argument (`devices`) to equal the length "
                "of its second argument (`axis_names`), but got devices.ndim == "
                f"{self.devices.ndim} and len(axis_names) == {len(self.axis_names)}.")
        if axis_types is None:
            axis_types = (AxisType.Auto,) * len(self.axis_names)
        self.axis_types = (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types)
        if len(self.axis_types) != len(self.axis_names):
            raise ValueError(
                "Number of axis names should match the number of axis_types. Got "
                f"axis_names={self.axis_names} and axis_types={self.axis_types}")

    @property
    def shape(self):
        return collections.OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def shape_tuple(self):
        return tuple(self.shape.items())

    @property
    def axis_sizes(self):
        return self.devices.shape

    @property
    def size(self):
        return self.devices.size

    @property
    def empty(self):
        return self.devices.ndim == 0

    @property
    def device_ids(self):
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def is_multi_process(self):
        return len({d.process_index for d in self.devices.flat}) > 1

    def _key(self):
        return (self.axis_names, self.devices.shape, self.axis_types,
                tuple((d.platform, d.id) for d in self.devices.flat))

    def __eq__(self, other):
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        types_ = f", axis_types={self.axis_types}" if self.axis_names else ""
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}"
                f"{types_})")

    def __str__(self):
        axes = ", ".join(f"{name!r}: {size}" for name, size in self.shape.items())
        return f"Mesh({axes}, axis_types={self.axis_types})"

    def __enter__(self):
        """Deprecated in JAX, where it sets a mesh that ``shard_map`` does not read (that is
        ``set_mesh``'s): here it only warns."""
        warnings.warn("`with mesh:` context manager has been deprecated. Please use `with "
                      "jax.set_mesh(mesh):` instead.", DeprecationWarning, stacklevel=2)
        return self

    def __exit__(self, *exc_info):
        return None


_EMPTY_MESH = Mesh(np.empty((), dtype=object), ())


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """A mesh of the given shape over the first devices (``nbjax.devices()`` unless given),
    with Explicit axes unless ``axis_types`` says otherwise, as ``jax.make_mesh``."""
    axis_shapes = tuple(operator.index(size) for size in axis_shapes)
    devices = list(all_devices() if devices is None else devices)
    if len(devices) < math.prod(axis_shapes):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of "
                         f"mesh_shape {axis_shapes}")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(axis_names)
    grid = np.array(devices[:math.prod(axis_shapes)], dtype=object).reshape(axis_shapes)
    return Mesh(grid, axis_names, axis_types)


# --- the mesh in context -------------------------------------------------------------------

_context = types.SimpleNamespace(mesh=_EMPTY_MESH)


class set_mesh:
    """Make ``mesh`` the mesh ``shard_map`` uses when given none, as ``jax.set_mesh``: at
    once (``set_mesh(mesh)``), or for a block (``with set_mesh(mesh):``, which restores the
    previous mesh at its end). ``set_mesh(None)`` clears it. One mesh for the process."""

    def __init__(self, mesh):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise ValueError(f"Expected mesh of type `jax.sharding.Mesh`. Got {type(mesh)}")
        self._previous = _context.mesh
        _context.mesh = _EMPTY_MESH if mesh is None else mesh

    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        _context.mesh = self._previous


def get_mesh():
    """The mesh in context (``set_mesh``), or an empty mesh."""
    return _context.mesh


# --- what nbjax does not have --------------------------------------------------------------

_NO_SHARDING = ("nbjax has no sharded arrays: an array lives whole on one device (shard_map "
                "computes its blocks; use pmap to spread work over devices)")

NamedSharding = unavailable("NamedSharding", f"jax.NamedSharding: {_NO_SHARDING}")
reshard = unavailable("reshard", f"jax.reshard: {_NO_SHARDING}")
smap = unavailable("smap", "jax.smap (shard_map over one axis with vmap-style in_axes) is not "
                           "implemented in nbjax: use nbjax.shard_map")


def refuse_out_sharding(what, out_sharding):
    """JAX's ``out_sharding`` keyword: None is the one layout an nbjax array has (whole on
    one device); any sharding asked for is refused, saying so. Functions on tracing's hot
    path (``lax.reshape``, ``jnp.dot`` ...) take the keyword themselves and call this only
    when ``out_sharding is not None``: the call costs about 5% of a reshape that does
    nothing, and ``takes_out_sharding``'s wrapper would cost more."""
    if out_sharding is not None:
        raise NotImplementedError(f"{what}: out_sharding is not supported; nbjax has no "
                                  "sharding (an array lives whole on one device)")


def takes_out_sharding(fn, what):
    """``fn`` with JAX's keyword-only ``out_sharding`` added to its signature
    (``refuse_out_sharding``); ``what`` names it in the error (``random.uniform``)."""
    @functools.wraps(fn)
    def wrapped(*args, out_sharding=None, **kwargs):
        refuse_out_sharding(what, out_sharding)
        return fn(*args, **kwargs)
    signature = inspect.signature(fn)
    keyword = inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)
    wrapped.__signature__ = signature.replace(
        parameters=[*signature.parameters.values(), keyword])
    return wrapped

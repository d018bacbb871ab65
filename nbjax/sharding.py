"""JAX's sharding API, which nbjax does not have: an nbjax array lives whole on one device,
and ``pmap`` is how work is spread over devices. Each name raises NotImplementedError with
that reason, so code written for JAX fails at the line that needs sharding, saying why;
``SingleDeviceSharding`` (an array whole on one device) is the one layout there is."""

from .core.array import SingleDeviceSharding
from .core.errors import unavailable

__all__ = ["NamedSharding", "P", "SingleDeviceSharding", "make_mesh", "set_mesh", "reshard",
           "shard_map", "smap"]

_NO_SHARDING = ("nbjax has no sharding: an array lives whole on one device (use pmap to "
                "spread work over devices)")

NamedSharding = unavailable("NamedSharding", f"jax.NamedSharding: {_NO_SHARDING}")
P = unavailable("P", f"jax.P (PartitionSpec): {_NO_SHARDING}")
make_mesh = unavailable("make_mesh", f"jax.make_mesh: {_NO_SHARDING}")
set_mesh = unavailable("set_mesh", f"jax.set_mesh: {_NO_SHARDING}")
reshard = unavailable("reshard", f"jax.reshard: {_NO_SHARDING}")
shard_map = unavailable("shard_map", f"jax.shard_map: {_NO_SHARDING}")
smap = unavailable("smap", f"jax.smap: {_NO_SHARDING}")

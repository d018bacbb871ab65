"""JAX's mutable array references (``jax.new_ref`` and friends), which nbjax does not have:
its arrays are immutable and its jaxprs have no effects on state, which references need.
Each name raises NotImplementedError with that reason."""

from .core.errors import unavailable

__all__ = ["Ref", "new_ref", "empty_ref", "free_ref", "freeze"]

_NO_REFS = ("nbjax has no mutable array references: its arrays are immutable and its "
            "jaxprs have no state effects")

Ref = unavailable("Ref", f"jax.Ref: {_NO_REFS}")
new_ref = unavailable("new_ref", f"jax.new_ref: {_NO_REFS}")
empty_ref = unavailable("empty_ref", f"jax.empty_ref: {_NO_REFS}")
free_ref = unavailable("free_ref", f"jax.free_ref: {_NO_REFS}")
freeze = unavailable("freeze", f"jax.freeze: {_NO_REFS}")

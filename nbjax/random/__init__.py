"""nbjax.random (being written)."""

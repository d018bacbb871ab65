"""nbjax.scipy (being written)."""

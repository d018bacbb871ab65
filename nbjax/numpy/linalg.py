"""nbjax.numpy.linalg (being written)."""

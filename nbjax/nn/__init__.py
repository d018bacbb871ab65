"""nbjax.nn: activation functions and friends (being written)."""

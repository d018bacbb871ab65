"""nbjax.numpy.fft (being written)."""

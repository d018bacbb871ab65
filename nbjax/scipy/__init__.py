"""``nbjax.scipy``: the parts of SciPy that ``jax.scipy`` provides, on nbjax arrays."""

from . import linalg, special, stats  # noqa: F401
from . import fft, integrate, ndimage, signal  # noqa: F401
from . import cluster, interpolate, optimize, sparse, spatial  # noqa: F401

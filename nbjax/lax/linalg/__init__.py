"""``jax.lax.linalg``: matrix decompositions (``decompositions``), the condensed forms and
Householder products LAPACK computes (``forms``), tridiagonal systems
(``tridiagonal_systems``), the polar decomposition by iteration (``polar``), and what they
share (``util``)."""

from .decompositions import *  # noqa: F401,F403
from .forms import *  # noqa: F401,F403
from .polar import *  # noqa: F401,F403
from .tridiagonal_systems import *  # noqa: F401,F403

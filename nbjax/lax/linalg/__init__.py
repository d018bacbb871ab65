"""``jax.lax.linalg``: matrix decompositions (``decompositions``), the condensed forms and
Householder products LAPACK computes (``forms``), and what they share (``util``)."""

from .decompositions import *  # noqa: F401,F403
from .forms import *  # noqa: F401,F403

"""``nbjax.scipy.sparse``: what ``jax.scipy.sparse`` provides, its iterative solvers
(``linalg``: cg, gmres, bicgstab); nbjax has no sparse matrix type."""

from . import linalg  # noqa: F401

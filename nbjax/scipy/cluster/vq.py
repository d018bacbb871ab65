"""``nbjax.scipy.cluster.vq``: assigning observations to the nearest code of a code book,
as ``jax.scipy.cluster.vq`` (SciPy's k-means helpers need data-dependent loops; JAX leaves
them out too)."""

from ... import numpy as jnp
from ...numpy.util import check_arraylike, promote_dtypes_inexact

__all__ = ["vq"]


def vq(obs, code_book, check_finite=True):
    """``(code, dist)``: for each row of ``obs`` (``M`` observations of ``N`` features) the
    index of the nearest row of ``code_book`` (``K`` codes) and the Euclidean distance to it.

    One-dimensional ``obs`` and ``code_book`` hold one feature per observation. Every
    observation is compared with every code (an ``M x K`` table of distances), which suits
    the small code books vector quantization uses. ``check_finite`` is accepted for SciPy's
    signature; compiled code cannot raise on values.
    """
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, code_book = promote_dtypes_inexact(jnp.asarray(obs), jnp.asarray(code_book))
    if obs.ndim != code_book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    distances = jnp.linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)
    code = jnp.argmin(distances, axis=-1)
    return code, jnp.take_along_axis(distances, code[:, None], axis=-1)[:, 0]

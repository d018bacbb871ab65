"""``nbjax.scipy.cluster``: vector quantization, as ``jax.scipy.cluster``."""

from . import vq  # noqa: F401

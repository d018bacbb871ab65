"""``nbjax.typing``: the type annotations of ``jax.typing``, for functions that take arrays.

``ArrayLike``: what ``nbjax.numpy`` functions accept as an array (an ``nbjax.Array`` or a
tracer, a NumPy array or scalar, a Python scalar). ``DTypeLike``: what they accept as a
dtype (a name, a scalar type, a NumPy dtype, or anything with a ``dtype``).
"""

from typing import Any, Protocol, Union

import numpy as np

from .core.basearray import Array


class SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]

__all__ = ["ArrayLike", "DTypeLike"]

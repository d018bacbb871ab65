"""``nbjax.numpy``: NumPy's API with JAX's semantics, written only in terms of ``nbjax.lax``.

Each submodule lists its functions in ``__all__``; array operators and methods are attached
to ``Array`` and tracers by ``array_methods.register`` at the end of this file. The
submodules are layers, each importing (at its top) only from those before it: util <
ufuncs < creation < scalar_types < indexing < manipulation < products, index_tricks <
array_api < reductions < sorting < selection < fft, linalg < vectorize < padding (a
callable mode runs ``apply_along_axis``) < polynomial < array_methods.
Helpers shared across modules have public names but stay out of ``__all__``.
"""

import numpy as _np

from ..core.basearray import Array as ndarray  # noqa: F401  (jnp.ndarray, for isinstance)
from ..core.dtypes import iinfo, promote_types  # noqa: F401
from . import array_methods as _array_methods
from . import fft, linalg  # noqa: F401
from .util import not_implemented as _not_implemented
from .array_api import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .index_tricks import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .manipulation import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .polynomial import *  # noqa: F401,F403
from .products import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .scalar_types import *  # noqa: F401,F403
from .selection import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .ufuncs import *  # noqa: F401,F403
from .vectorize import *  # noqa: F401,F403


pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None

_array_methods.register(__import__(__name__, fromlist=["*"]))


def __getattr__(name):
    """NumPy functions nbjax lacks exist as stubs that raise NotImplementedError naming them."""
    if not name.startswith("_") and callable(getattr(_np, name, None)):
        return _not_implemented(name)
    raise AttributeError(f"module 'nbjax.numpy' has no attribute {name!r}")

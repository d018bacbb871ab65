"""``nbjax.lax``: the primitives every program is made of, and control flow.

Each module defines ``__all__`` (lax functions and their ``*_p`` primitives).
"""

from .elementwise import *  # noqa: F401,F403
from .standard import IncompatibleShapesError  # noqa: F401
from .structural import *  # noqa: F401,F403

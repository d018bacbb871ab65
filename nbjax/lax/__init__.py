"""``nbjax.lax``: the primitives every program is made of, and control flow.

Each module defines ``__all__`` (lax functions and their ``*_p`` primitives). The modules
form layers, each written in the ones below it (a contract in pyproject.toml), bottom up:
``standard`` (dtype kinds, checks, registrars, lowering declarations) and ``narrow_bits``
(NumPy-level bit operations of the 1-, 2- and 4-bit integers); ``shapes`` (the
shape primitives and ``reduce_sum``, which every rule uses); ``batch_util``;
``elementwise``, ``threefry`` and ``control_flow`` (what cond and the loops share);
``transcendental``, ``structural``, ``dot``, ``fft``, ``cond``, ``solvers``;
``gather_scatter``, ``reductions``, ``special``, ``rng``, ``callback``; ``convolution``
(compiled, a gather and a product); ``slicing``, ``loops``, ``sorting``,
``special_functions``, ``windowed``; ``linalg`` (a package, whose polar decomposition
iterates with ``while_loop``); ``derived``, ``parallel``, ``complex_parts`` (complex
arithmetic on real and imaginary parts, for the compiler), ``extended`` (the structural
primitives' rules for typed PRNG keys, on their data); ``collectives``.
"""

from .callback import (debug_callback, debug_callback_p, io_callback_p,  # noqa: F401
                       pure_callback_p)
from .collectives import *  # noqa: F401,F403
from .cond import *  # noqa: F401,F403
from .convolution import *  # noqa: F401,F403
from .derived import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from . import extended  # noqa: F401  (registers the structural rules for typed keys)
from .fft import *  # noqa: F401,F403
from .loops import *  # noqa: F401,F403
from .gather_scatter import *  # noqa: F401,F403
from .dot import *  # noqa: F401,F403
from . import linalg  # noqa: F401  (lax.linalg: decompositions, as jax.lax.linalg)
from .parallel import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .rng import *  # noqa: F401,F403
from .shapes import *  # noqa: F401,F403
from .slicing import *  # noqa: F401,F403
from .solvers import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
from .special_functions import *  # noqa: F401,F403
from .standard import IncompatibleShapesError  # noqa: F401
from .structural import *  # noqa: F401,F403
from .transcendental import *  # noqa: F401,F403
from .windowed import *  # noqa: F401,F403

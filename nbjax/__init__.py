"""nbjax: JAX rebuilt from scratch in Python, made visible in Jupyter."""

from .config import config, disable_jit, enable_x64, explain_cache_misses  # noqa: F401
from .core import Array, default_device, devices  # noqa: F401
from .core.abstract import ShapeDtypeStruct, ShapedArray  # noqa: F401
from .core.array import Device  # noqa: F401
from .core.errors import (ConcretizationTypeError, TracerArrayConversionError,  # noqa: F401
                          TracerBoolConversionError, TracerIntegerConversionError,
                          UnexpectedTracerError)
from . import tree_util, tree, test_util  # noqa: F401
from .api import (ensure_compile_time_eval, eval_shape, grad, hessian, jacfwd,  # noqa: F401
                  jacobian, jacrev, jvp, linear_transpose, linearize, make_jaxpr, named_call,
                  named_scope, pmap, typeof, value_and_grad, vjp, vmap)
from .host import *  # noqa: F401,F403
from . import debug, lax, numpy, random, scipy  # noqa: F401
from .checkpoint import checkpoint, remat  # noqa: F401
from .custom_derivatives import custom_jvp, custom_vjp  # noqa: F401
from .jit import jit  # noqa: F401
from . import viz  # noqa: F401  (installs the rich display of jaxprs)

__version__ = "0.1.0"


def load_ipython_extension(ipython):
    """``%load_ext nbjax``: the magics ``%%jit``, ``%%grad``, ``%jaxpr``, ``%nbjax``."""
    from .notebook import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook import unload_ipython_extension as unload
    unload(ipython)

"""nbjax: JAX rebuilt from scratch in Python, made visible in Jupyter."""

from .config import config
from .core import Array, default_device, devices  # noqa: F401
from .core.abstract import ShapeDtypeStruct, ShapedArray  # noqa: F401
from .core.array import Device  # noqa: F401
from .core.errors import (ConcretizationTypeError, TracerArrayConversionError,  # noqa: F401
                          TracerBoolConversionError, TracerIntegerConversionError,
                          UnexpectedTracerError)
from . import tree_util, tree, test_util  # noqa: F401
from .api import (grad, hessian, jacfwd, jacrev, jvp, linearize, make_jaxpr,  # noqa: F401
                  pmap, value_and_grad, vjp, vmap)
from . import debug, lax, numpy, random, scipy  # noqa: F401
from .checkpoint import checkpoint, remat  # noqa: F401
from .custom_derivatives import custom_jvp, custom_vjp  # noqa: F401
from .jit import jit  # noqa: F401
from . import viz  # noqa: F401  (installs the rich display of jaxprs)

__version__ = "0.1.0"


def device_put(x, device=None):
    """Place a value (an array or a pytree of them) on ``device`` (the CPU device now)."""
    from .numpy import asarray
    if device is not None and device not in devices():
        raise ValueError(f"unknown device {device!r}; available: {devices()}")
    return tree_util.tree_map(asarray, x)


def load_ipython_extension(ipython):
    """``%load_ext nbjax``: the magics ``%%jit``, ``%%grad``, ``%jaxpr``, ``%nbjax``."""
    from .notebook import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook import unload_ipython_extension as unload
    unload(ipython)

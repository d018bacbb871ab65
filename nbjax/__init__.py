"""nbjax: JAX rebuilt from scratch in Python, made visible in Jupyter."""

from .config import (config, default_device, disable_jit, enable_x64,  # noqa: F401
                     explain_cache_misses, make_user_context)
from .config import (allow_f16_reductions, array_garbage_collection_guard,  # noqa: F401
                     auto_pcast, check_tracer_leaks, checking_leaks, debug_infs,
                     debug_key_reuse, debug_nans, default_matmul_precision,
                     default_prng_impl, enable_checks, enable_custom_prng,
                     jax2tf_associative_scan_reductions, legacy_prng_key, log_compiles,
                     no_execution, no_tracing, numpy_dtype_promotion, numpy_rank_promotion,
                     remove_size_one_mesh_axis_from_type, softmax_custom_jvp, thread_guard,
                     threefry_partitionable, transfer_guard, transfer_guard_device_to_device,
                     transfer_guard_device_to_host, transfer_guard_host_to_device)
from .core import devices  # noqa: F401
from .core.basearray import Array  # noqa: F401
from .core.abstract import ShapeDtypeStruct, ShapedArray  # noqa: F401
from .core.array import Device, Shard  # noqa: F401
from .core.errors import (ConcretizationTypeError, TracerArrayConversionError,  # noqa: F401
                          TracerBoolConversionError, TracerIntegerConversionError,
                          UnexpectedTracerError)
from . import tree_util, tree, test_util  # noqa: F401
from .api import (ensure_compile_time_eval, eval_shape, fwd_and_bwd,  # noqa: F401
                  grad, hessian, jacfwd, jacobian, jacrev, jvp, linear_transpose,
                  linearize, make_jaxpr, named_call, named_scope, pmap, typeof,
                  value_and_grad, vjp, vmap)
from .host import *  # noqa: F401,F403
from . import debug, distributed, lax, numpy, random, scipy  # noqa: F401
from . import dtypes, errors, flatten_util, ops  # noqa: F401
from .dtypes import float0  # noqa: F401
from . import image  # noqa: F401
from .checkpoint import checkpoint, remat  # noqa: F401
from . import ad_checkpoint, checkpoint_policies  # noqa: F401
from .custom_derivatives import (closure_convert, custom_gradient, custom_jvp,  # noqa: F401
                                 custom_vjp)
from . import custom_batching  # noqa: F401
from . import profiler, stages, typing  # noqa: F401
from .jit import clear_caches, jit  # noqa: F401
from .lax.callback import pure_callback  # noqa: F401
from .numpy.indexing import ds  # noqa: F401
from .refs import *  # noqa: F401,F403
from .sharding import *  # noqa: F401,F403
from . import sharding  # noqa: F401
from .shard_map import shard_map  # noqa: F401
from . import viz  # noqa: F401  (installs the rich display of jaxprs)
from .version import __version__  # noqa: F401


def load_ipython_extension(ipython):
    """``%load_ext nbjax``: the magics ``%%jit``, ``%%grad``, ``%%mpirun``, ``%jaxpr``,
    ``%nbjax``."""
    # Imported here, not above: the notebook layer (IPython's magics, the widgets) sits on
    # top of everything, and scripts that never load the extension do not pay for it.
    from .notebook import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook import unload_ipython_extension as unload
    unload(ipython)

"""The compiler behind ``jit``: a jaxpr in, an executable out, cached per backend.

``passes.optimize`` rewrites jaxprs (inlining, folding, simplification, CSE, DCE) and records
each rewrite; ``fusion.plan`` groups the equations into loop kernels (``kernel.LoopKernel``,
backend-neutral) and library steps, recording why; a backend turns the plan into machine code.

``report`` describes the result: the estimated cost of each step (flops, bytes read and
written, with XLA's conventions), the fusion report, and the compiled program as text (what
``jit(f).lower(...).compile()`` shows).

Backends: ``"reference"`` runs the jaxpr as traced with the NumPy implementations (the
semantics every other backend is tested against); ``"cpu"`` compiles fused kernels with
llvmlite (``nbjax.backends.cpu``).
"""

import importlib
import logging
import threading

from ..backends import reference
from ..config import config
from . import report  # noqa: F401
from .passes import Rewrite, optimize  # noqa: F401

_BACKENDS = {"reference": reference.compile}
# Backends imported on first use (llvmlite takes a moment to load).
_LAZY_BACKENDS = {"cpu": "nbjax.backends.cpu"}
_lock = threading.Lock()  # pmap shards may ask for the same executable at once


def register_backend(name, compile_fn):
    """Add a backend: ``compile_fn(closed_jaxpr, name)`` returns an object with ``run``."""
    _BACKENDS[name] = compile_fn


def backend(name):
    if name not in _BACKENDS and name in _LAZY_BACKENDS:
        _BACKENDS[name] = importlib.import_module(_LAZY_BACKENDS[name]).compile
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known backends: "
                         f"{sorted(set(_BACKENDS) | set(_LAZY_BACKENDS))}") from None


def compile(closed_jaxpr, name="jit", backend="reference"):
    """An executable for ``closed_jaxpr`` on ``backend``, compiled once.

    It is kept in ``closed_jaxpr.executables``, so it (with its machine code) is freed with
    the jaxpr: the caches that hold jaxprs (``jit``'s traces) decide how long code lives.
    """
    with _lock:
        executable = closed_jaxpr.executables.get(backend)
        if executable is None:
            if config.log_compiles:
                types = ", ".join(str(v.aval) for v in closed_jaxpr.jaxpr.invars)
                logging.getLogger("nbjax.compiler").warning(
                    "Compiling %s with argument types [%s] for the %s backend", name, types,
                    backend)
            executable = _backend_fn(backend)(closed_jaxpr, name)
            closed_jaxpr.executables[backend] = executable
    return executable


_backend_fn = backend

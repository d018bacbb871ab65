"""The targets compiled programs run on, by name: ``"reference"`` (the NumPy interpreter
that defines the semantics), ``"cpu"`` (kernels compiled with llvmlite) and ``"gpu"``
(the same kernels as PTX, run through CuPy).

Each is a ``nbjax.compiler.Target``; ``get_target(name)`` finds one (importing its module on
first use: llvmlite takes a moment to load), ``register_target`` adds one. ``jit``, ``pmap``
and the notebook ask here; ``config.jit_backend`` only supplies the default name.
"""

import importlib

from .. import compiler
from ..config import config
from ..core import register_platform

_TARGETS = {}
# Targets whose modules are imported on first use; each module defines ``TARGET``.
_MODULES = {"reference": "nbjax.backends.reference", "cpu": "nbjax.backends.cpu",
            "gpu": "nbjax.backends.gpu"}


def register_target(target):
    """Make ``target`` (a ``Target`` with a ``name``) available to ``jit(..., backend=name)``."""
    _TARGETS[target.name] = target


def get_target(name=None):
    """The target called ``name`` (None: the configured default, ``config.jit_backend``)."""
    name = name or config.jit_backend
    if name not in _TARGETS and name in _MODULES:
        register_target(importlib.import_module(_MODULES[name]).TARGET)
    try:
        return _TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known backends: "
                         f"{target_names()}") from None


def _gpu_devices():
    """``devices("gpu")``: the GPUs of the ``gpu`` target, whose module is imported now."""
    return get_target("gpu").gpu_devices()


register_platform("gpu", _gpu_devices)


def target_names():
    return sorted(set(_TARGETS) | set(_MODULES))


def compile(closed_jaxpr, backend=None, name="jit"):
    """``nbjax.compiler.compile`` for the target called ``backend`` (None: the default)."""
    return compiler.compile(closed_jaxpr, get_target(backend), name)

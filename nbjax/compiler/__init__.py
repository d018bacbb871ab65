"""The compiler behind ``jit``: a jaxpr in, an executable out, cached per backend.

Today the only backend is the reference interpreter; the optimising passes, fusion planner
and the llvmlite (CPU) and CuPy (GPU) backends plug in behind ``compile``.
"""

from ..backends import reference

_BACKENDS = {"reference": reference.compile}
_cache = {}


def compile(closed_jaxpr, name="jit", backend="reference"):
    """An executable for ``closed_jaxpr`` on ``backend``, compiled once and cached."""
    key = (id(closed_jaxpr), backend)
    entry = _cache.get(key)
    if entry is None or entry[0] is not closed_jaxpr:
        entry = (closed_jaxpr, _BACKENDS[backend](closed_jaxpr, name))
        _cache[key] = entry
    return entry[1]

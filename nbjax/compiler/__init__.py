"""The compiler behind ``jit``: a jaxpr in, an executable out, cached per backend.

``passes.optimize`` rewrites jaxprs (inlining, folding, simplification, CSE, DCE) and records
each rewrite. The only backend today is the reference interpreter, which runs the jaxpr as
traced: it defines the semantics every compiling backend (llvmlite on CPU, CuPy on GPU) is
tested against.
"""

from ..backends import reference
from .passes import Rewrite, optimize  # noqa: F401

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

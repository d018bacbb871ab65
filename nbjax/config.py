"""Global settings, read and written as JAX's are: ``nbjax.config.update("enable_x64", True)``."""

import contextlib
import os


class Config:
    """A small option store; options are attributes (``config.enable_x64``)."""

    _defaults = {
        "enable_x64": os.environ.get("NBJAX_ENABLE_X64", "0").lower() in ("1", "true"),
        "explain_cache_misses": False,
        # jit(f)(x) calls f(x) directly, op by op (nbjax.disable_jit()).
        "disable_jit": False,
        # Which backend executes jitted functions: "cpu" (our llvmlite compiler) or
        # "reference" (the NumPy interpreter that defines the semantics).
        "jit_backend": os.environ.get("NBJAX_JIT_BACKEND", "cpu"),
        # The CPU the cpu backend compiles for: "host", or a CPU name LLVM knows
        # ("x86-64-v3", "znver3", ...), to inspect or test the code made for another CPU.
        "cpu_target": os.environ.get("NBJAX_CPU_TARGET", "host"),
    }

    def __init__(self):
        self._values = dict(self._defaults)

    def update(self, name, value):
        """Set an option; ``jax_``-prefixed names are accepted as in JAX."""
        key = name[4:] if name.startswith("jax_") else name
        if key not in self._values:
            raise AttributeError(f"unknown nbjax option {name!r}; known: {sorted(self._values)}")
        self._values[key] = value

    def read(self, name):
        return self._values[name[4:] if name.startswith("jax_") else name]

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][name[4:] if name.startswith("jax_") else name]
        except KeyError:
            raise AttributeError(name) from None


config = Config()


@contextlib.contextmanager
def _option(name, value):
    """Set option ``name`` for the duration of a ``with`` block."""
    old = config.read(name)
    config.update(name, value)
    try:
        yield
    finally:
        config.update(name, old)


def enable_x64(new_val=True):
    """``with nbjax.enable_x64():`` 64-bit types by default inside the block."""
    return _option("enable_x64", bool(new_val))


def disable_jit(disable=True):
    """``with nbjax.disable_jit():`` jitted functions run op by op, as plain Python."""
    return _option("disable_jit", bool(disable))


def explain_cache_misses(new_val=True):
    """``with nbjax.explain_cache_misses():`` jit says why it traces again."""
    return _option("explain_cache_misses", bool(new_val))

"""``nbjax.stages``: the ahead-of-time stages of a jitted function, as ``jax.stages``.

``jit(f)`` is a ``Wrapped``; ``jit(f).trace(*args)`` a ``Traced`` (the jaxpr and the
arguments' types), ``.lower()`` a ``Lowered`` (what the compiler's passes make of it),
``.compile()`` a ``Compiled`` (the executable, its fusion report and costs), callable on
arguments of the traced types. ``CompilerOptions`` is the type of ``compile``'s options in
JAX; nbjax's compiler takes its options from ``nbjax.config`` instead.
"""

from .jit import ArgInfo, Compiled, JitWrapped as Wrapped, Lowered, Traced

CompilerOptions = dict

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]

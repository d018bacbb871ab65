"""The errors nbjax raises, with JAX's names and JAX's class tree (``nbjax.errors`` shows them).

JAX files its own errors under ``JAXTypeError`` (a TypeError) and ``JAXIndexError`` (an
IndexError), so ``except TypeError`` still catches a misused tracer. Most are about traced
values, which have no concrete value at trace time.
"""


class JAXTypeError(TypeError):
    """The base of JAX's own TypeErrors."""


class JAXIndexError(IndexError):
    """The base of JAX's own IndexErrors."""


class ConcretizationTypeError(JAXTypeError):
    """A traced value was used where Python needs a concrete one (``if``, ``int()``, ...)."""


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool()`` of a tracer: Python control flow (``if``, ``while``, ``and``) on a traced
    value."""


class TracerIntegerConversionError(JAXTypeError):
    """``__index__`` of a tracer: a traced value used as a Python index, size or ``range``
    bound."""


class TracerArrayConversionError(JAXTypeError):
    """A tracer handed to NumPy (``np.asarray(x)``, ``np.sin(x)``), which needs its values."""


class NonConcreteBooleanIndexError(JAXIndexError, TypeError):
    """A traced boolean mask: the result's shape would depend on the mask's values.

    An IndexError as in JAX, and a TypeError like JAX's other concretization errors.
    """


class UnexpectedTracerError(JAXTypeError):
    """A tracer was used after the transformation that made it had finished (it leaked)."""


class KeyReuseError(JAXTypeError):
    """A PRNG key used twice (JAX's ``debug_key_reuse`` check, which nbjax does not make)."""


class JaxprTypeError(TypeError):
    """A jaxpr that does not type-check: a variable used before its definition, an equation
    whose types disagree with its primitive's rule."""


class JaxRuntimeError(RuntimeError):
    """A failure while a computation runs, rather than while it is traced or compiled (a
    host callback whose result has the wrong shape or dtype)."""


class InconclusiveDimensionOperation(Exception):
    """JAX's error for a symbolic dimension whose comparison cannot be decided. nbjax's
    shapes are always concrete, so it never raises it; the name is here for code that
    catches it."""


def unavailable(name, reason):
    """A stand-in for a JAX function that cannot exist in nbjax: calling it raises
    NotImplementedError with ``reason``, which it also carries as ``not_implemented_reason``
    (read by ``tools/api_coverage.py``). For lax and random, which sit below
    ``nbjax.numpy.util.not_implemented``."""
    def fn(*args, **kwargs):
        raise NotImplementedError(reason)
    fn.__name__ = fn.__qualname__ = name
    fn.not_implemented_reason = reason
    return fn

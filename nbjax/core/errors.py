"""The errors nbjax raises for misuse of traced values, as JAX names them."""


class ConcretizationTypeError(TypeError):
    """A traced value was used where Python needs a concrete one (``if``, ``int()``, ...)."""


class TracerBoolConversionError(ConcretizationTypeError):
    pass


class TracerIntegerConversionError(ConcretizationTypeError):
    pass


class TracerArrayConversionError(TypeError):
    pass


class UnexpectedTracerError(Exception):
    """A tracer was used after the transformation that made it had finished (it leaked)."""


class JaxprTypeError(TypeError):
    pass


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

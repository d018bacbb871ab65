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

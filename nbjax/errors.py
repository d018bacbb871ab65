"""``nbjax.errors``: the exceptions nbjax raises under JAX's names, to catch them by name
(``except nbjax.errors.ConcretizationTypeError``). They are defined in
``nbjax/core/errors.py``, where the code that raises them finds them."""

from .core.errors import (ConcretizationTypeError, InconclusiveDimensionOperation,
                          JAXIndexError, JAXTypeError, JaxprTypeError, JaxRuntimeError,
                          KeyReuseError, NonConcreteBooleanIndexError,
                          TracerArrayConversionError, TracerBoolConversionError,
                          TracerIntegerConversionError, UnexpectedTracerError)

__all__ = ["ConcretizationTypeError", "InconclusiveDimensionOperation", "JAXIndexError",
           "JAXTypeError", "JaxRuntimeError", "JaxprTypeError", "KeyReuseError",
           "NonConcreteBooleanIndexError", "TracerArrayConversionError",
           "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError"]

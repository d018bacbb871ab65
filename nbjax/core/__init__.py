"""The core: abstract values, primitives, traces, the jaxpr IR, pytrees and Array."""

from . import dtypes
from .abstract import ShapedArray, canonical_shape
from .array import (HOST_DEVICE, Array, Device, GpuDevice, devices, first_local_device,
                    host_result, local_devices, register_platform, to_numpy, to_operand)
from .eager import EvalTrace
from .extended import ExtendedArray
from .errors import (ConcretizationTypeError, JaxprTypeError, TracerArrayConversionError,
                     TracerBoolConversionError, TracerIntegerConversionError,
                     UnexpectedTracerError)
from .jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, check_jaxpr,
                    eval_closed_jaxpr, eval_jaxpr, has_effect, subjaxprs)
from .primitive import Primitive
from .source_info import SourceInfo, user_frame
from .trace import (Trace, Tracer, current_trace, get_aval, new_trace,
                    set_current_trace, valid_value)
from . import basearray

basearray.Array.register(Array)
basearray.Array.register(Tracer)

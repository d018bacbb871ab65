"""The reference target: run a jaxpr equation by equation with the NumPy implementations.

It defines what every other target must compute; differential tests compare against it.
"""

import numpy as np

from ..compiler import Executable, Target
from ..core import EvalTrace, eval_closed_jaxpr, set_current_trace
from ..lax.callback import compiled_program


class ReferenceExecutable(Executable):
    def run(self, *args):
        """Evaluate on NumPy values, eagerly (never under the caller's trace)."""
        with set_current_trace(EvalTrace()), compiled_program():
            outs = eval_closed_jaxpr(self.jaxpr, *args)
        return [np.asarray(o) for o in outs]


class ReferenceTarget(Target):
    name = "reference"
    optimizes = False  # it runs the program exactly as traced

    def lower(self, name, jaxpr, plan, rewrites, timer):
        return ReferenceExecutable(name, self.name, jaxpr)


TARGET = ReferenceTarget()

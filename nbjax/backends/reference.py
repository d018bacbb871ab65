"""The reference backend: run a jaxpr equation by equation with the NumPy implementations.

It defines what every other backend must compute; differential tests compare against it.
"""

import numpy as np

from ..core import EvalTrace, eval_closed_jaxpr, set_current_trace


class Executable:
    def __init__(self, closed_jaxpr, name):
        self.jaxpr = closed_jaxpr
        self.name = name

    def run(self, *args):
        """Evaluate on NumPy values, eagerly (never under the caller's trace)."""
        with set_current_trace(EvalTrace()):
            outs = eval_closed_jaxpr(self.jaxpr, *args)
        return [np.asarray(o) for o in outs]


def compile(closed_jaxpr, name):
    return Executable(closed_jaxpr, name)

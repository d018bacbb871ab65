"""What ``minimize`` returns, with JAX's fields."""

from typing import Any, NamedTuple


class OptimizeResults(NamedTuple):
    """The outcome of ``minimize``.

    - ``x``: the final point; ``fun`` and ``jac``: the objective and its gradient there (as
      in JAX, not quite after a failed line search: see ``_line_search``).
    - ``success``: whether the gradient's norm fell below ``gtol`` (and the last line search
      did not fail).
    - ``status``: 0 converged; 1 out of iterations; for BFGS 3 (or 5) the line search failed
      while zooming in (or bracketing); for L-BFGS 2 (or 3) out of function (or gradient)
      evaluations, 4 too little progress (``ftol``), 5 the line search failed; -1 undefined.
    - ``hess_inv``: BFGS's estimate of the inverse Hessian (None for L-BFGS).
    - ``nfev``, ``njev``: evaluations of the objective and of its gradient (always made
      together); ``nit``: iterations.
    """
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any

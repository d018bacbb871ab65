"""``nbjax.scipy.optimize``: unconstrained minimization, as ``jax.scipy.optimize``.

``minimize`` runs BFGS (``method="BFGS"``) or, as JAX, an experimental L-BFGS
(``method="l-bfgs-experimental-do-not-rely-on-this"``). Gradients come from reverse-mode
autodiff, and each method is a ``lax.while_loop`` (with the line search another inside it),
so ``minimize`` works under ``jit`` and, over a batch of starting points, under ``vmap``.
"""

from ... import numpy as jnp
from ...numpy.util import check_arraylike
from ._bfgs import minimize_bfgs
from ._lbfgs import minimize_lbfgs
from ._results import OptimizeResults

__all__ = ["OptimizeResults", "minimize"]

_METHODS = {"bfgs": minimize_bfgs, "l-bfgs-experimental-do-not-rely-on-this": minimize_lbfgs}


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimize ``fun(x, *args)`` (a real scalar) over vectors ``x`` from ``x0``, as
    :func:`scipy.optimize.minimize`, returning :class:`OptimizeResults`.

    ``method`` is required. ``options`` are the method's: for BFGS ``maxiter`` (default
    ``200 * len(x0)``), ``norm`` (of the gradient, for the convergence test; default inf),
    ``gtol`` (1e-5) and ``line_search_maxiter`` (10); for L-BFGS ``maxiter``, ``norm``,
    ``maxcor``, ``ftol``, ``gtol``, ``maxfun``, ``maxgrad`` and ``maxls``. ``tol`` is accepted
    and, as in JAX, ignored: ``gtol`` sets the tolerance.
    """
    if not isinstance(args, tuple):
        raise TypeError("args argument to nbjax.scipy.optimize.minimize must be a tuple, got "
                        f"{args}")
    solver = _METHODS.get(method.lower())
    if solver is None:
        raise ValueError(f"Method {method} not recognized")
    return solver(lambda x: fun(x, *args), _checked_start(x0), **(options or {}))


def _checked_start(x0):
    """``x0`` as an array: a vector of floating-point (or, for L-BFGS, complex) numbers."""
    check_arraylike("minimize", x0)
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        # JAX fails at the same point with these kinds: IndexError for a scalar (it reads
        # x0.shape[0]), TypeError for more axes
        error = IndexError if x0.ndim == 0 else TypeError
        raise error(f"minimize requires x0 to be a vector of shape (n,), got shape {x0.shape}")
    if not jnp.issubdtype(x0.dtype, jnp.inexact):
        raise TypeError("minimize requires real- or complex-valued x0 (a sub-dtype of "
                        f"np.inexact), but got {x0.dtype.name}.")
    return x0

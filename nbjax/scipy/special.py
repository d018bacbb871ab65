"""``nbjax.scipy.special``: special functions, as ``jax.scipy.special``.

Most are one lax primitive (``erf``, ``gammaln`` = ``lax.lgamma`` ...). ``xlogy`` and
``xlog1py`` define ``0 * log(0) = 0`` and carry a custom JVP so that their derivative at
``x = 0`` is finite too. ``logsumexp`` is ``nbjax.nn``'s; ``softmax`` and ``log_softmax``
are too, but over every axis by default, as SciPy's (``nbjax.nn``'s take the last).
"""

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..custom_derivatives import custom_jvp
from .. import nn
from ..nn import logsumexp
from ..numpy.util import promote_args_inexact
from .special_added import *  # noqa: F401,F403
from .special_added import __all__ as _added
from .special_integrals import *  # noqa: F401,F403
from .special_integrals import __all__ as _integrals, float32_or_64
from .special_series import *  # noqa: F401,F403
from .special_series import __all__ as _series

__all__ = ["digamma", "erf", "erfc", "erfinv", "expit", "gammaln", "log_ndtr",
           "log_softmax", "logit", "logsumexp", "ndtr", "ndtri", "softmax", "xlog1py",
           "xlogy"] + _added + _integrals + _series


def softmax(x, /, *, axis=None):
    """``exp(x) / sum(exp(x))`` over ``axis`` (None: every axis, SciPy's default)."""
    return nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """``x - logsumexp(x)`` over ``axis`` (None: every axis, SciPy's default)."""
    return nn.log_softmax(x, axis=axis)


def _unary(name, prim_fn, doc):
    """A ``scipy.special`` function that applies one lax function to a float array."""
    def fn(x):
        x, = promote_args_inexact(name, x)
        return prim_fn(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


erf = _unary("erf", lax.erf, "The error function.")
erfc = _unary("erfc", lax.erfc, "``1 - erf(x)``, accurate where erf(x) is near 1.")
erfinv = _unary("erfinv", lax.erf_inv, "The inverse of ``erf`` on (-1, 1).")
gammaln = _unary("gammaln", lax.lgamma, "``log|Γ(x)|``.")
digamma = _unary("digamma", lax.digamma, "The derivative of ``gammaln``.")
expit = _unary("expit", lax.logistic, "The logistic sigmoid ``1 / (1 + exp(-x))``.")


@custom_jvp
def logit(x):
    """The inverse of ``expit``: ``log(x / (1 - x))``. Its derivative is JAX's closed form
    ``1 / (x (1 - x))``: +inf at 0 and 1, where the composition's is NaN."""
    x, = promote_args_inexact("logit", x)
    return jnp.log(x / (1 - x))


logit.defjvps(lambda x_dot, out, x: x_dot / (x * (1 - x)))


def _xlog_jvp(log_fn, shift):
    """The JVP of ``x * log_fn(y)``: ``dx log_fn(y) + dy x / (y + shift)``, without the
    ``where`` that makes the primal 0 at ``x = 0`` (so the derivative is finite there)."""
    def jvp(primals, tangents):
        (x, y), (x_dot, y_dot) = primals, tangents
        out = _XLOG[log_fn](x, y)
        return out, (x_dot * log_fn(y) + y_dot * x / (y + shift)).astype(out.dtype)
    return jvp


def _xlog(log_fn, name, doc):
    def fn(x, y):
        x, y = promote_args_inexact(name, x, y)
        return jnp.where((x != 0) | jnp.isnan(y), x * log_fn(y), jnp.zeros_like(x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return custom_jvp(fn)


xlogy = _xlog(jnp.log, "xlogy", "``x * log(y)``, and 0 where ``x == 0`` (even for y = 0; "
              "NaN for a NaN y).")
xlog1py = _xlog(jnp.log1p, "xlog1py", "``x * log1p(y)``, and 0 where ``x == 0`` (NaN for a NaN "
                "y).")
_XLOG = {jnp.log: xlogy, jnp.log1p: xlog1py}
xlogy.defjvp(_xlog_jvp(jnp.log, 0))
xlog1py.defjvp(_xlog_jvp(jnp.log1p, 1))


def ndtr(x):
    """The standard normal CDF, ``(1 + erf(x / sqrt 2)) / 2``, computed through ``erfc`` so
    that the lower tail keeps its relative accuracy."""
    x = float32_or_64(x)
    return 0.5 * lax.erfc(-x / np.sqrt(2).astype(x.dtype))


def ndtri(p):
    """The inverse of ``ndtr``: ``sqrt(2) erfinv(2p - 1)`` on ``[1/4, 3/4]``, where ``2p - 1`` is
    exact. In the tails ``2p - 1`` would round away ``p`` (to -1 below ``eps / 4``), so there
    ``-ndtri(q)``, ``q = min(p, 1 - p)`` (exact), is the root of ``log_ndtr(x) = log q``,
    found by Newton's method: ``log_ndtr`` keeps its relative accuracy in the tail. Outside
    ``[0, 1]`` it is NaN (a tiny negative ``p`` would round ``2p - 1`` to -1, whose
    ``erfinv`` is -inf)."""
    p = float32_or_64(p)
    dtype = p.dtype
    central = np.sqrt(2).astype(dtype) * lax.erf_inv(2 * p - 1)
    q = jnp.minimum(p, 1 - p)
    tail = _ndtri_lower_tail(jnp.where((q > 0) & (q < 0.25), q, jnp.full_like(q, 0.125)))
    tail = jnp.where(p < 0.5, tail, -tail)
    in_tails = (q < 0.25) & (q > 0)
    return jnp.where((p < 0) | (p > 1), np.nan, jnp.where(in_tails, tail, central))


def _ndtri_lower_tail(q):
    """``ndtri(q)`` for ``0 < q < 1/4``: Newton's method on ``log_ndtr(x) - log q``, whose
    slope is ``pdf(x) / ndtr(x)``. It starts from ``sqrt(2) erfinv(2q - 1)`` while that is
    finite and accurate to a few digits (``q > 1e-6``), else from the asymptotic
    ``x^2 = t - log t - log(2 pi)``, ``t = -2 log q``; four steps reach float64 precision."""
    dtype = q.dtype
    log_q = jnp.log(q)
    t = -2 * log_q
    asymptotic = -jnp.sqrt(t - jnp.log(t) - np.log(2 * np.pi).astype(dtype))
    x = jnp.where(q > 1e-6, np.sqrt(2).astype(dtype) * lax.erf_inv(2 * q - 1), asymptotic)
    half_log_2pi = (0.5 * np.log(2 * np.pi)).astype(dtype)
    for _ in range(4):
        log_cdf = log_ndtr(x)
        slope = jnp.exp(-0.5 * x * x - half_log_2pi - log_cdf)
        x = x - (log_cdf - log_q) / slope
    return x


# Where log_ndtr switches method, per precision: (lower, upper).
_LOG_NDTR_SEGMENTS = {np.dtype(np.float32): (-10.0, 5.0), np.dtype(np.float64): (-20.0, 8.0)}


def log_ndtr(x, series_order=3):
    """``log(ndtr(x))`` accurate in both tails.

    Above ``upper`` it is ``log1p(-ndtr(-x))``; below ``lower``, where ``ndtr`` underflows, it
    is the asymptotic series ``log(e^{-x^2/2} / (-x sqrt(2 pi)) (1 + sum_n (-1)^n
    (2n-1)!! / x^{2n}))`` with ``series_order`` terms; in between plainly ``log(ndtr(x))``.
    """
    if not isinstance(series_order, int) or not 0 <= series_order <= 30:
        raise ValueError("series_order must be a Python integer in [0, 30].")
    x = float32_or_64(x, detail="")
    lower, upper = _LOG_NDTR_SEGMENTS[x.dtype]
    high = x > upper
    middle = jnp.log(ndtr(jnp.where(high, -x, jnp.maximum(x, lower))))
    middle = jnp.where(high, -jnp.exp(middle), middle)  # log1p(-e) ~ -e for tiny e
    x_low = jnp.minimum(x, lower)  # keeps the unused branch finite
    x2 = x_low * x_low
    series, term = jnp.ones_like(x), jnp.ones_like(x)
    for n in range(1, series_order + 1):
        term = -term * (2 * n - 1) / x2
        series = series + term
    asymptotic = (-0.5 * x2 - jnp.log(-x_low) - 0.5 * np.log(2 * np.pi).astype(x.dtype)
                  + jnp.log(series))
    return jnp.where(x < lower, asymptotic, middle)

"""Special functions: erf, erfc, erf_inv, lgamma, digamma.

The reference implementations compute in float64 and round to the input's type, so float32
results are correctly rounded (up to a rare double rounding) and float64 results are within a
few ulps. ``erf``, ``erfc`` and ``lgamma`` come from Python's ``math`` module; ``erf_inv`` and
``digamma`` are written here, as NumPy has neither.
"""

import math

import numpy as np

from .elementwise import quiet, unary_function
from .standard import FLOAT, unop

__all__ = ["erf", "erf_p", "erfc", "erfc_p", "erf_inv", "erf_inv_p",
           "lgamma", "lgamma_p", "digamma", "digamma_p"]


def _in_float64(fn):
    """An impl that runs ``fn`` on float64 values and returns the input's dtype."""
    @quiet
    def impl(x):
        return np.asarray(fn(x.astype(np.float64))).astype(x.dtype)
    return impl


def _lgamma_scalar(x):
    """log|Γ(x)|; +inf at the poles (0 and the negative integers), where ``math`` raises."""
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def _erf_inv(y):
    """The inverse of erf: an approximation good to ~2e-3, then Halley steps.

    The start is Winitzki's closed form. Each Halley step on ``f(x) = erf(x) - y`` (with
    ``f' = 2/sqrt(pi) exp(-x**2)`` and ``f'' = -2x f'``) triples the correct digits, so three
    reach float64 rounding. Near ``|y| = 1`` erf(x) is 1 to working precision, so the residual
    there is taken as ``(1 - |y|) - erfc(x)``, whose terms are exact or accurate.
    """
    a = np.abs(y)
    log_term = np.log((1 - a) * (1 + a))  # log(1 - y**2) without cancelling
    k = 0.147
    c = 2 / (np.pi * k) + log_term / 2
    x = np.sqrt(np.sqrt(c * c - log_term / k) - c)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    for _ in range(3):
        residual = np.where(a <= 0.5, erf(x) - a, (1 - a) - erfc(x))
        step = residual / (2 / np.sqrt(np.pi) * np.exp(-x * x))
        x = x - step / (1 + x * step)
    x = np.where(a == 1, np.inf, np.where(a > 1, np.nan, x))  # and NaN stays NaN
    return np.copysign(x, y)


# Coefficients of the asymptotic series digamma(x) ~ log x - 1/(2x) - sum c_k / x**(2k):
# c_k = B_2k / (2k) with the Bernoulli numbers B_2 .. B_14.
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def _cot_pi(x):
    """cot(pi x), accurate for large x and near the zeros at half-integers: x is reduced to
    r in [-1/2, 1/2] (exactly), and where |r| > 1/4, cot(pi r) = ±tan(pi (1/2 - |r|))."""
    r = x - np.round(x)
    near_zero = np.abs(r) <= 0.25
    return np.where(near_zero, 1 / np.tan(np.pi * r),
                    np.sign(r) * np.tan(np.pi * (0.5 - np.abs(r))))


def _digamma(x):
    """The digamma function, the derivative of lgamma; NaN at the poles (0, -1, -2 ...) and
    at -inf, as XLA gives.

    Negative x reflect to positive: ``digamma(x) = digamma(1 - x) - pi cot(pi x)``. Then the
    recurrence ``digamma(x) = digamma(x + 1) - 1/x`` moves x to at least 10, where the
    asymptotic series above is accurate to float64 rounding (its next term is below 5e-17).
    Near the positive root (x = 1.4616...) only the absolute error is that small.
    """
    pole = (x <= 0) & (x == np.floor(x))
    reflect = x < 0
    offset = np.where(reflect, -np.pi * _cot_pi(x), 0.0)
    x = np.where(reflect, 1 - x, x)
    for _ in range(10):
        small = x < 10
        offset = offset - np.where(small, 1 / x, 0.0)
        x = np.where(small, x + 1, x)
    inv_x2 = 1 / (x * x)
    series = 0.0
    for c in reversed(_DIGAMMA_SERIES):
        series = (series + c) * inv_x2
    out = offset + np.log(x) - 0.5 / x - series
    return np.where(pole, np.nan, out)


erf_p = unop("erf", _in_float64(np.vectorize(math.erf, otypes=[np.float64])), FLOAT)
erfc_p = unop("erfc", _in_float64(np.vectorize(math.erfc, otypes=[np.float64])), FLOAT)
erf_inv_p = unop("erf_inv", _in_float64(_erf_inv), FLOAT)
lgamma_p = unop("lgamma", _in_float64(np.vectorize(_lgamma_scalar, otypes=[np.float64])),
                FLOAT)
digamma_p = unop("digamma", _in_float64(_digamma), FLOAT)

erf = unary_function(erf_p, "Element-wise error function.")
erfc = unary_function(erfc_p, "Element-wise ``1 - erf(x)``, accurate where erf is near 1.")
erf_inv = unary_function(erf_inv_p, "Element-wise inverse of ``erf`` (±inf at ±1, NaN "
                                    "beyond).")
lgamma = unary_function(lgamma_p, "Element-wise ``log|Γ(x)|``.")
digamma = unary_function(digamma_p, "Element-wise digamma function, ``d/dx lgamma(x)``.")

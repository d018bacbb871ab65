"""More samplers, each JAX's transformation of uniform, normal or chi-square draws written
the same way, so that the same key gives JAX's values (exactly where only exact operations are
involved, to a few ulps through log, sqrt and pow): lognormal, maxwell, double_sided_maxwell,
rayleigh, wald, geometric, triangular, weibull_min and the F distribution.
"""

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..core import canonical_shape, dtypes
from . import floats
from .distributions import (check_safe_casts, chisquare_values, float_dtype, inexact_dtype,
                            random_signs, result_shape, shape_of)
from .keys import check_key, split_list

__all__ = ["lognormal", "maxwell", "double_sided_maxwell", "rayleigh", "wald", "geometric",
           "triangular", "weibull_min", "f"]


def _params(dtype, shape, *params):
    """Each parameter in ``dtype``, broadcast to ``shape``."""
    return [jnp.broadcast_to(lax.convert_element_type(p, dtype), shape) for p in params]


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """Log-normal variates ``exp(sigma n)``, n standard normal (complex for a complex
    ``dtype``, as in JAX)."""
    key, _ = check_key("lognormal", key)
    dtype = inexact_dtype("lognormal", dtype)
    check_safe_casts("lognormal", dtype, sigma)
    shape = result_shape("lognormal", shape, shape_of(sigma))
    return lax.exp(floats.normal(key, shape, dtype) * lax.convert_element_type(sigma, dtype))


def maxwell(key, shape=(), dtype=None):
    """Maxwell variates: the length of a standard normal 3-vector."""
    key, _ = check_key("maxwell", key)
    dtype = float_dtype("maxwell", dtype)
    return _maxwell(key, canonical_shape(shape), dtype)


def _maxwell(key, shape, dtype):
    return jnp.linalg.norm(floats.normal(key, shape + (3,), dtype), axis=-1)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """``loc + scale s m``, m Maxwell and s a random sign; the sample shape is ``shape``
    followed by the parameters' broadcast shape (as JAX)."""
    key, _ = check_key("double_sided_maxwell", key)
    dtype = float_dtype("double_sided_maxwell", dtype)
    param_shape = np.broadcast_shapes(shape_of(loc), shape_of(scale))
    shape = canonical_shape(shape) or param_shape
    shape = shape + param_shape
    maxwell_key, sign_key = split_list(key, 2)
    sign = random_signs(sign_key, shape, dtype)
    return sign * _maxwell(maxwell_key, shape, dtype) * scale + loc


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh variates ``scale sqrt(-2 log u)``."""
    key, _ = check_key("rayleigh", key)
    dtype = float_dtype("rayleigh", dtype)
    check_safe_casts("rayleigh", dtype, scale)
    shape = result_shape("rayleigh", shape, shape_of(scale))
    u = floats.uniform(key, shape, dtype)
    scale, = _params(dtype, shape, scale)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), np.array(-2, dtype))))


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian, unit shape) variates by Michael, Schucany and Haas'
    transformation of a normal, with a uniform choosing between the two roots."""
    key, _ = check_key("wald", key)
    dtype = float_dtype("wald", dtype)
    check_safe_casts("wald", dtype, mean)
    shape = result_shape("wald", shape, shape_of(mean))
    k1, k2 = split_list(key, 2)
    mean, = _params(dtype, shape, mean)
    v = floats.normal(k1, shape, dtype)
    z = floats.uniform(k2, shape, dtype)
    y = lax.integer_pow(v, 2)
    mean_sq = lax.integer_pow(mean, 2)
    root = lax.sqrt(4 * mean * y + mean_sq * lax.integer_pow(y, 2))
    x = mean + mean_sq * y / 2 - mean / 2 * root
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def geometric(key, p, shape=None, dtype=None):
    """Geometric counts (trials up to the first success) ``floor(log u / log(1 - p)) + 1``."""
    key, _ = check_key("geometric", key)
    dtype = dtypes.canonicalize(int if dtype is None else dtype)
    if not dtypes.is_int(dtype):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = result_shape("geometric", shape, shape_of(p))
    p = jnp.asarray(p)
    if not dtypes.is_inexact(p.dtype):
        p = p.astype(dtypes.default_float())
    u = floats.uniform(key, shape, p.dtype)
    u = jnp.where(u == 0, np.array(1, p.dtype), u)  # as JAX: no log(0)
    log_one_minus_p = jnp.broadcast_to(lax.log1p(-p), shape)
    return (lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1).astype(dtype)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular variates by inverting the CDF on either side of the mode."""
    key, _ = check_key("triangular", key)
    dtype = float_dtype("triangular", dtype)
    check_safe_casts("triangular", dtype, left, mode, right)
    shape = result_shape("triangular", shape, shape_of(left), shape_of(mode),
                          shape_of(right))
    left, right, mode = _params(dtype, shape, left, right, mode)
    fc = (mode - left) / (right - left)
    u = floats.uniform(key, shape, dtype)
    below = left + lax.sqrt(u * (right - left) * (mode - left))
    above = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, below, above)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull variates ``scale (-log(1 - u))^(1/concentration)``."""
    key, _ = check_key("weibull_min", key)
    dtype = float_dtype("weibull_min", dtype)
    u = floats.uniform(key, canonical_shape(shape), dtype)
    return jnp.power(-jnp.log1p(-u), 1.0 / jnp.asarray(concentration)) * scale


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F variates ``(X1 / dfnum) / (X2 / dfden)`` of two chi-squares."""
    key, _ = check_key("f", key)
    dtype = float_dtype("f", dtype)
    check_safe_casts("f", dtype, dfnum, dfden)
    shape = result_shape("f", shape, shape_of(dfnum), shape_of(dfden))
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    key_den, key_num = split_list(key, 2)
    num = lax.div(chisquare_values(key_num, jnp.broadcast_to(dfnum, shape), shape, dtype), dfnum)
    den = lax.div(chisquare_values(key_den, jnp.broadcast_to(dfden, shape), shape, dtype), dfden)
    return lax.div(num, den)

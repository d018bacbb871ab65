"""Gamma variates: the ``random_gamma`` primitive and its implicit reparameterization gradient.

Sampling is Marsaglia and Tsang's rejection method ("A simple method for generating gamma
variables", 2000), one loop per element, as JAX writes it: every element has its own key
(split from the caller's key), draws normals until ``v = (1 + c x)**3`` is positive, then a
uniform, and repeats until the squeeze or the log test accepts. ``a < 1`` is boosted to
``a + 1`` and the sample multiplied by ``u**(1/a)``. The per-element loops run together by
vmapping them (a vmapped while_loop keeps each element's state once its own loop has ended).

The sample is not a differentiable function of ``a`` through the rejection loop, so the
primitive's JVP uses the implicit derivative instead (Figurnov et al., "Implicit
Reparameterization Gradients", 2018): with F(x; a) the gamma CDF held fixed,
``dx/da = -(dF/da) / (dF/dx)``. ``random_gamma_grad`` evaluates it with the series (small x)
and continued fraction (large x) of the incomplete gamma function, differentiated term by
term, as JAX does.
"""

import functools
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..vmap import vmap
from ..core import Primitive, ShapedArray, dtypes
from ..interpreters import ad
from ..lax import batch_util
from ..lax.standard import library_lowering
from . import floats
from .impls import PRNG_IMPLS
from .keys import key_data, key_impl, split_keys, split_list, wrap_key_data

__all__ = ["random_gamma_p", "random_gamma", "random_gamma_grad"]


# --- one sample ----------------------------------------------------------------------------

def _gamma_one(key, alpha, log_space):
    """One Gamma(alpha) sample (its log with ``log_space``) from a typed key; scalar alpha."""
    dtype = alpha.dtype

    def const(value):
        return np.array(value, dtype)

    zero, one = const(0), const(1)
    boost = lax.ge(alpha, one)  # alpha >= 1 needs no boost
    alpha_orig = alpha
    alpha = lax.select(boost, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, const(1 / 3))
    c = lax.div(const(1 / 3), lax.sqrt(d))

    def rejected(state):
        _, x2, v, u = state
        squeeze_fails = lax.ge(u, lax.sub(one, lax.mul(const(0.0331), lax.mul(x2, x2))))
        log_fails = lax.ge(lax.log(u), lax.add(lax.mul(x2, const(0.5)),
                                               lax.mul(d, lax.add(lax.sub(one, v), lax.log(v)))))
        return lax.bitwise_and(squeeze_fails, log_fails)

    def next_normal(state):
        key, _, _ = state
        key, subkey = split_list(key, 2)
        x = floats.normal(subkey, (), dtype)
        return key, x, lax.add(one, lax.mul(x, c))

    def propose(state):
        key, x_key, u_key = split_list(state[0], 3)
        _, x, v = lax.while_loop(lambda s: lax.le(s[2], zero), next_normal,
                                 (x_key, zero, const(-1)))
        v3 = lax.mul(lax.mul(v, v), v)
        return key, lax.mul(x, x), v3, floats.uniform(u_key, (), dtype)

    key, subkey = split_list(key, 2)
    # The initial state (x**2 = 0, v = 1, u = 2) fails both tests, so the loop proposes.
    _, _, v, _ = lax.while_loop(rejected, propose, (key, zero, one, const(2)))
    if log_space:
        log_u = lax.neg(floats.exponential(subkey, (), dtype))
        log_boost = lax.select(lax.bitwise_or(boost, lax.eq(log_u, zero)), zero,
                               lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    u = lax.sub(one, floats.uniform(subkey, (), dtype))
    boost_factor = lax.select(boost, one, lax.pow(u, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, v), boost_factor)


# --- the primitive -------------------------------------------------------------------------

random_gamma_p = Primitive("random_gamma")
# Compiled programs compute its decomposition (the vmapped rejection loops) natively, where
# it compiles; else they call its implementation back: a host step.
library_lowering(random_gamma_p, "random numbers")


@random_gamma_p.def_abstract_eval
def _random_gamma_abstract_eval(key, a, *, impl, log_space):
    key_shape = PRNG_IMPLS[impl].key_shape
    if key.dtype != dtypes.uint32 or key.shape[-1:] != key_shape:
        raise TypeError(f"random_gamma expects the raw data of {impl} keys, uint32[..., "
                        f"{key_shape[0]}], got {key.str_short()}")
    if a.shape[:key.ndim - 1] != key.shape[:-1]:
        raise TypeError(f"random_gamma: the shape {a.shape} of a must start with the key "
                        f"batch shape {key.shape[:-1]}")
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"random_gamma requires a floating a, got {a.dtype.name}")
    return ShapedArray(a.shape, a.dtype)


def _random_gamma(key, a, *, impl, log_space):
    """Each key is split into one key per element of its slice of ``a``; the per-element
    loops run vmapped over the flattened elements. (The primitive's implementation, and
    its decomposition for the compiler: a while loop whose body is a few kernels, where
    evaluated op by op each iteration cost a NumPy call per operation: 10^5 samples took
    0.5 s.)"""
    if a.size == 0:
        return jnp.zeros(a.shape, a.dtype)
    keys = wrap_key_data(key, impl=impl)
    per_key = math.prod(a.shape[keys.ndim:])
    keys = vmap(lambda k: split_keys(k, (per_key,)))(keys.ravel())
    one = functools.partial(_gamma_one, log_space=log_space)
    return vmap(one)(keys.ravel(), a.reshape(-1)).reshape(a.shape)


random_gamma_p.def_impl(lambda key, a, **params: np.asarray(_random_gamma(key, a, **params)))
random_gamma_p.def_lowering("jaxpr", _random_gamma)


@random_gamma_p.def_batch
def _random_gamma_batch(axis_data, vals, dims, **params):
    key, a = (batch_util.bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims))
    return random_gamma_p.bind(key, a, **params), 0


def _gamma_sample_grad(sample, a, log_space):
    """d sample / d a; in log space d log(x) / d a = (dx / da) / x."""
    if not log_space:
        return random_gamma_grad(a, sample)
    x = lax.exp(sample)
    x = jnp.where(x == 0, np.array(np.finfo(x.dtype).tiny, x.dtype), x)
    return lax.div(random_gamma_grad(a, x), x)


ad.defjvp2(random_gamma_p, None,
           lambda t, sample, key, a, *, impl, log_space: lax.mul(
               t, _gamma_sample_grad(sample, a, log_space)))


def random_gamma(key, a, log_space=False):
    """Gamma(a) samples (or their logs), one per element of ``a``, from a typed key. The
    primitive takes the key's raw data; its implementation, a name, is a static parameter."""
    return random_gamma_p.bind(key_data(key), a, impl=key_impl(key), log_space=log_space)


# --- the implicit derivative ---------------------------------------------------------------

def random_gamma_grad(a, x):
    """``dx/da`` for a sample x of Gamma(a, 1), element-wise (float16 computes in float32).

    For x <= 1 or x <= a the lower incomplete gamma series is used, otherwise the continued
    fraction of the upper one; both carry the derivatives of their terms with respect to a.
    """
    a, x = jnp.broadcast_arrays(a, x)
    dtype = a.dtype
    if dtype == dtypes.float16:
        a, x = a.astype(np.float32), x.astype(np.float32)
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    x_is_zero = x == 0
    domain_error = (x < 0) | (a <= 0)
    use_fraction = (x > 1) & (x > a)
    log_ax = a * lax.log(x) - x - lax.lgamma(a)
    underflow = log_ax < -np.log(np.finfo(a.dtype).max)
    ax = lax.exp(log_ax)
    enabled = ~(x_is_zero | domain_error | underflow | is_nan)
    out = jnp.where(use_fraction,
                    -_continued_fraction_grad(ax, x, a, enabled & use_fraction),
                    _series_grad(ax, x, a, enabled & ~use_fraction))
    out = jnp.where(x_is_zero, np.zeros((), out.dtype), out)
    out = jnp.where(domain_error | is_nan, np.array(np.nan, out.dtype), out)
    return out.astype(dtype)


def _masked(enabled, new, old):
    """Advance only the elements still iterating."""
    return [jnp.where(enabled, n, o) for n, o in zip(new, old)]


def _series_grad(ax, x, a, enabled):
    eps = np.finfo(a.dtype).eps

    def body(state):
        enabled, r, c, ans, dc_da, dans_da = state
        r = r + 1
        dc_da = dc_da * (x / r) - (c * x) / (r * r)
        dans_da = dans_da + dc_da
        c = c * (x / r)
        ans = ans + c
        still = enabled & (jnp.abs(dc_da / dans_da) > eps)
        return [still, *_masked(enabled, (r, c, ans, dc_da, dans_da), state[1:])]

    ones, zeros = jnp.ones_like(a), jnp.zeros_like(a)
    init = [enabled, a, ones, ones, zeros, zeros]
    _, _, _, ans, _, dans_da = lax.while_loop(lambda s: jnp.any(s[0]), body, init)
    dlogax_da = lax.log(x) - lax.digamma(a + 1)
    return -(dans_da + ans * dlogax_da) * x / a


def _continued_fraction_grad(ax, x, a, enabled):
    eps = np.finfo(a.dtype).eps

    def body(state):
        (enabled, ans, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = state
        c = c + 1
        y = y + 1
        z = z + 2
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        qk_nonzero = qk != 0
        ans = jnp.where(qk_nonzero, pk / qk, ans)
        dpk_da = dpkm1_da * z - pkm1 - dpkm2_da * yc + pkm2 * c
        dqk_da = dqkm1_da * z - qkm1 - dqkm2_da * yc + qkm2 * c
        dans_da_new = jnp.where(qk_nonzero, (dpk_da - ans * dqk_da) / qk, dans_da)
        change = jnp.where(qk_nonzero, jnp.abs(dans_da_new - dans_da), 1)
        # Shift the recurrence, rescaling when the numerators grow too large.
        rescale = jnp.abs(pk) > 1 / eps
        shifted = [pk, qk, pkm1, qkm1, dpkm1_da, dqkm1_da, dpk_da, dqk_da]
        pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (
            jnp.where(rescale, v * eps, v) for v in shifted)
        still = enabled & (change > eps)
        new = (ans, y, z)
        rest = (pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da_new)
        return [still, *_masked(enabled, new, state[1:4]), c,
                *_masked(enabled, rest, state[5:])]

    y = 1 - a
    z = x + y + 1
    pkm1, qkm1 = x + 1, z * x
    ans = pkm1 / qkm1
    zeros = jnp.zeros_like(x)
    init = [enabled, ans, y, z, np.zeros((), a.dtype), pkm1, qkm1, jnp.ones_like(x), x,
            zeros, zeros, zeros, -x, (zeros - ans * -x) / qkm1]
    out = lax.while_loop(lambda s: (s[4] < 2000) & jnp.any(s[0]), body, init)
    ans, dans_da = out[1], out[13]
    dlogax_da = lax.log(x) - lax.digamma(a)
    return -(dans_da + ans * dlogax_da) * x

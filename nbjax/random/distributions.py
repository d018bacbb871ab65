"""The samplers, with JAX's signatures and algorithms, written in lax and jnp.

Each public sampler checks its key (raw or typed, one key: vmap over batches of keys), its
shape and dtype, then calls a traceable body on the key, made typed (``keys.check_key``), so
that the body splits it and draws bits by the key's PRNG implementation, whichever that is.
Shapes and dtypes are static; parameters such as ``minval`` or ``a`` may be traced (and
differentiated where the sample is a differentiable function of them).
"""

import math
import warnings

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..core import Array, Tracer, canonical_shape, dtypes, get_aval
from ..numpy.util import canonicalize_axis, check_arraylike
from . import floats
from .gamma import random_gamma
from .keys import check_key, key_impl, random_bits, split_list

__all__ = ["bits", "uniform", "normal", "truncated_normal", "randint", "bernoulli",
           "categorical", "choice", "permutation", "shuffle", "gumbel", "exponential",
           "gamma", "loggamma", "beta", "dirichlet", "poisson", "multivariate_normal",
           "orthogonal", "laplace", "logistic", "cauchy", "t", "chisquare", "pareto",
           "rademacher", "generalized_normal", "ball"]


# --- argument checking ---------------------------------------------------------------------

def float_dtype(name, dtype):
    dt = dtypes.canonicalize(float if dtype is None else dtype)
    if not dtypes.is_float(dt):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dt}")
    return dt


def inexact_dtype(name, dtype):
    """The samplers that also draw complex numbers (``normal`` and those built on it)."""
    dt = dtypes.canonicalize(float if dtype is None else dtype)
    if not dtypes.is_inexact(dt):
        raise ValueError(f"dtype argument to `{name}` must be a float or complex dtype, "
                         f"got {dt}")
    return dt


def check_safe_casts(name, dtype, *params):
    """TypePromotionError, as JAX's samplers of these families raise, where a parameter's
    type is wider than the samples' ``dtype`` (float32 parameters for float16 samples; a
    Python number is weakly typed, so always safe)."""
    for param in params:
        if jnp.result_type(param, dtype) != dtype:
            raise dtypes.TypePromotionError(
                f"In arguments to {name}, cannot safely cast argument of type "
                f"{jnp.asarray(param).dtype} to {dtype}")


def shape_of(x):
    return get_aval(x).shape if isinstance(x, (Array, Tracer)) else np.shape(x)


def check_shape(name, shape, *param_shapes):
    """Parameters must broadcast to exactly ``shape`` (shapes that do not broadcast at all
    are ``lax.broadcast_shapes``'s ValueError, as in JAX)."""
    result = lax.broadcast_shapes(shape, *param_shapes)
    if result != shape:
        raise ValueError(
            f"{name} parameter shapes must be broadcast-compatible with shape argument, and "
            f"the result of broadcasting the shapes must equal the shape argument, but got "
            f"result {result} for shape argument {shape}.")


def result_shape(name, shape, *param_shapes):
    """``shape`` checked against the parameters' shapes, or their broadcast when None."""
    if shape is None:
        return np.broadcast_shapes(*param_shapes) if param_shapes else ()
    shape = canonical_shape(shape)
    check_shape(name, shape, *param_shapes)
    return shape


def _asarray(x):
    return x if isinstance(x, (Array, Tracer)) else jnp.asarray(x)


# --- bits and uniform floats ---------------------------------------------------------------

def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned integers (uint32 by default, uint64 under x64)."""
    key, _ = check_key("bits", key)
    dtype = dtypes.default_uint() if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_unsigned_int(dtype):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return random_bits(key, dtype.itemsize * 8, canonical_shape(shape))


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in ``[minval, maxval)``."""
    key, _ = check_key("uniform", key)
    return floats.uniform(key, canonical_shape(shape), float_dtype("uniform", dtype),
                          minval, maxval)


def normal(key, shape=(), dtype=None):
    """Standard normal floats (complex dtypes: independent real and imaginary parts)."""
    key, _ = check_key("normal", key)
    return floats.normal(key, canonical_shape(shape), inexact_dtype("normal", dtype))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normals conditioned on ``lower < x < upper``: the inverse CDF of a uniform
    between the CDF values of the bounds, clamped into the open interval."""
    key, _ = check_key("truncated_normal", key)
    dtype = float_dtype("truncated_normal", dtype)
    shape = result_shape("truncated_normal", shape, shape_of(lower), shape_of(upper))
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    u = floats.uniform(key, shape, dtype, lax.erf(lax.div(lower, sqrt2)),
                       lax.erf(lax.div(upper, sqrt2)))
    out = lax.mul(sqrt2, lax.erf_inv(u))
    return jnp.clip(out, lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype)))


# --- integers ------------------------------------------------------------------------------

def _convert_and_clip(x, dtype):
    """Convert an integer array to ``dtype``, clipping to its range instead of wrapping."""
    lo = max(dtypes.iinfo(dtype).min, dtypes.iinfo(x.dtype).min)
    hi = min(dtypes.iinfo(dtype).max, dtypes.iinfo(x.dtype).max)
    return jnp.clip(x, np.array(lo, x.dtype), np.array(hi, x.dtype)).astype(dtype)


def randint(key, shape, minval, maxval, dtype=None):
    """Integers in ``[minval, maxval)``. Types under 32 bits are sampled as int32."""
    key, _ = check_key("randint", key)
    dtype = dtypes.canonicalize(int if dtype is None else dtype)
    if not dtypes.is_int(dtype):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    shape = canonical_shape(shape)
    info = dtypes.iinfo(dtype)
    if info.bits < 32:
        minval = jnp.clip(_asarray(minval).astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(_asarray(maxval).astype(np.int32), int(info.min), int(info.max) + 1)
        return _randint(key, shape, minval, maxval, dtypes.int32).astype(dtype)
    return _randint(key, shape, minval, maxval, dtype)


def _randint(key, shape, minval, maxval, dtype):
    """``minval + (r mod span)`` for a random r of twice the type's bits, which keeps the
    modulo bias small; ``2**nbits mod span`` is computed as a square to avoid overflow."""
    check_shape("randint", shape, shape_of(minval), shape_of(maxval))
    minval, maxval = _asarray(minval), _asarray(maxval)
    minval = minval if dtypes.is_int(minval.dtype) else minval.astype(int)
    maxval = maxval if dtypes.is_int(maxval.dtype) else maxval.astype(int)
    nbits = dtypes.iinfo(dtype).bits
    # maxval beyond the type's range (randint(k, s, 0, 256, uint8)) widens the span by one.
    type_max = _convert_and_clip(_asarray(np.array(dtypes.iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = maxval > type_max
    minval = lax.broadcast_to_rank(_convert_and_clip(minval, dtype), len(shape))
    maxval = lax.broadcast_to_rank(_convert_and_clip(maxval, dtype), len(shape))
    key_high, key_low = split_list(key, 2)
    high = random_bits(key_high, nbits, shape)
    low = random_bits(key_low, nbits, shape)
    unsigned = high.dtype
    span = (maxval - minval).astype(unsigned)
    span = jnp.where(maxval <= minval, np.array(1, unsigned), span)  # empty range: minval
    span = jnp.where(maxval_out_of_range & (maxval > minval), span + np.array(1, unsigned), span)
    multiplier = lax.rem(jnp.full_like(span, 2 ** (nbits // 2)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(high, span), multiplier), lax.rem(low, span))
    offset = lax.rem(offset, span)
    return minval + offset.astype(dtype)


# --- Bernoulli, categorical, choice, permutations ------------------------------------------

def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability ``p``: ``uniform < p``. ``mode="high"`` adds
    a second uniform below the first one's resolution, for tiny ``p``."""
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    key, _ = check_key("bernoulli", key)
    p = _asarray(p)
    if not dtypes.is_float(p.dtype):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {p.dtype}.")
    shape = result_shape("bernoulli", shape, p.shape)
    if mode == "high":
        u = floats.uniform(key, (2, *shape), p.dtype)
        u1, u2 = u[0], u[1] * 2.0 ** -dtypes.finfo(p.dtype).nmant
        return u2 < p - u1
    return floats.uniform(key, shape, p.dtype) < p


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with equal probability."""
    key, _ = check_key("rademacher", key)
    dtype = dtypes.canonicalize(int if dtype is None else dtype)
    return random_signs(key, canonical_shape(shape), dtype)


def random_signs(key, shape, dtype):
    heads = floats.uniform(key, shape, dtypes.default_float()) < 0.5  # bernoulli(key, 0.5)
    return (2 * heads.astype(dtype) - 1).astype(dtype)


def _gumbel(key, shape, dtype, mode):
    info = dtypes.finfo(dtype)
    if mode == "low":
        u = floats.uniform(key, shape, dtype, np.array(info.tiny, dtype), 1.0)
        return lax.neg(lax.xla_log(lax.neg(lax.xla_log(u))))
    if mode == "high":  # a second uniform fills in the first one's low bits near 0
        u = floats.uniform(key, (2, *shape), dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high,
                      high + np.array(2.0 ** -info.nmant, dtype) * low + np.array(info.tiny, dtype))
        return lax.neg(lax.xla_log(lax.neg(lax.xla_log1p(lax.neg(x)))))
    raise NotImplementedError(f"gumbel mode {mode!r} is not implemented (use 'low' or 'high')")


def gumbel(key, shape=(), dtype=None, mode=None):
    """Gumbel variates ``-log(-log(u))``."""
    key, _ = check_key("gumbel", key)
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return _gumbel(key, canonical_shape(shape), float_dtype("gumbel", dtype), mode)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Category indices with probabilities ``softmax(logits, axis)``: the argmax of logits
    plus Gumbel noise (with replacement), or the top k of one perturbation (without)."""
    key, _ = check_key("categorical", key)
    mode = "low" if mode is None else mode
    logits = _asarray(logits)
    float_dtype("gumbel", logits.dtype)  # JAX's check: the noise is drawn in logits' dtype
    axis = canonicalize_axis(axis, logits.ndim)
    batch_shape = tuple(np.delete(logits.shape, axis))
    shape = result_shape("categorical", shape, batch_shape)
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        noise_shape = (*prefix, *shape[len(prefix):axis + len(prefix)], logits.shape[axis],
                       *shape[axis + len(prefix):])
        noisy = _gumbel(key, noise_shape, logits.dtype, mode) + \
            lax.expand_dims(logits, tuple(range(len(prefix))))
        return jnp.argmax(noisy, axis=axis + len(prefix))
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number "
                         f"of categories ({logits.shape[axis]}).")
    noisy = logits + _gumbel(key, logits.shape, logits.dtype, mode)
    _, indices = lax.top_k(jnp.moveaxis(noisy, axis, -1), k)
    return lax.reshape(indices, shape, (indices.ndim - 1, *range(indices.ndim - 1)))


def _shuffle(key, x, axis):
    """Sort by random 32-bit keys, repeated with fresh keys often enough (3 log n / log 2**32
    rounds, tjablin's heuristic) that ties between keys are unlikely to bias the order."""
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(dtypes.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, subkey = split_list(key, 2)
        sort_keys = random_bits(subkey, 32, x.shape)
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` (int x) or of ``x`` along ``axis``; with
    ``independent`` every slice along ``axis`` is shuffled separately."""
    key, _ = check_key("permutation", key)
    if not np.ndim(x):
        if not dtypes.is_int(get_aval(x).dtype):
            raise TypeError("x must be an integer or at least 1-dimensional")
        canonicalize_axis(axis, 1)
        return _shuffle(key, jnp.arange(int(x)), 0)
    x = _asarray(x)
    axis = canonicalize_axis(axis, x.ndim)
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, order, axis, unique_indices=True)


def shuffle(key, x, axis=0):
    """Shuffle each slice of ``x`` along ``axis`` independently (the semantics of JAX's
    deprecated ``shuffle``, removed by JAX 0.10; use ``permutation(..., independent=True)``)."""
    warnings.warn("nbjax.random.shuffle is deprecated; use permutation with "
                  "independent=True.", DeprecationWarning, stacklevel=2)
    key, _ = check_key("shuffle", key)
    x = _asarray(x)
    return _shuffle(key, x, canonicalize_axis(axis, x.ndim))


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Samples of ``a`` (or of ``arange(a)``) along ``axis``, optionally weighted by ``p``."""
    key, _ = check_key("choice", key)
    check_arraylike("choice", a)  # (a list is refused, as in JAX)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape argument of nbjax.random.choice must be a sequence, got {shape}")
    shape = canonical_shape(shape)
    arr = _asarray(a)
    if arr.ndim == 0:
        n_inputs = int(a)
    else:
        axis = canonicalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size "
                         f"{n_inputs}) when 'replace=False'")
    if p is None and replace:
        ind = randint(key, shape, 0, n_inputs)
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    elif p is None:
        picked = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)
        result = lax.slice_in_dim(picked, 0, n_draws, axis=axis if arr.ndim else 0)
    else:
        p = _asarray(p)
        p = p if dtypes.is_inexact(p.dtype) else p.astype(dtypes.default_float())
        if p.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as "
                             f"a.shape[axis]. p has shape {p.shape} and a.shape[axis] is "
                             f"{n_inputs}.")
        if replace:  # invert the CDF at uniform points
            cdf = jnp.cumsum(p)
            r = cdf[-1] * (1 - floats.uniform(key, shape, cdf.dtype))
            ind = jnp.searchsorted(cdf, r).astype(int)
        else:  # Gumbel top-k
            g = _gumbel(key, (n_inputs,), p.dtype, "low" if mode is None else mode) + jnp.log(p)
            ind = lax.top_k(g, n_draws)[1].astype(int)
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    out_shape = shape if arr.ndim == 0 else arr.shape[:axis] + shape + arr.shape[axis + 1:]
    return result.reshape(out_shape)


# --- continuous distributions from one uniform ---------------------------------------------

def _simple(name, transform):
    """A sampler ``f(key, shape=(), dtype=None)`` that transforms uniform-based draws."""
    def sampler(key, shape=(), dtype=None):
        key, _ = check_key(name, key)
        return transform(key, canonical_shape(shape), float_dtype(name, dtype))
    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = transform.__doc__
    return sampler


def _laplace(key, shape, dtype):
    """Laplace variates ``sign(u) log(1 - |u|)``, u uniform in (-1, 1)."""
    u = floats.uniform(key, shape, dtype, -1.0 + dtypes.finfo(dtype).epsneg, 1.0)
    return lax.mul(lax.sign(u), lax.xla_log1p(lax.neg(lax.abs(u))))


def _logistic(key, shape, dtype):
    """Logistic variates ``log(u) - log(1 - u)``."""
    x = floats.uniform(key, shape, dtype, np.array(dtypes.finfo(dtype).tiny, dtype), 1.0)
    return lax.sub(lax.xla_log(x), lax.xla_log1p(lax.neg(x)))


def _cauchy(key, shape, dtype):
    """Cauchy variates ``tan(pi (u - 1/2))``."""
    u = floats.uniform(key, shape, dtype, np.array(dtypes.finfo(dtype).eps, dtype), 1.0)
    return lax.tan(lax.mul(np.array(np.pi, dtype), lax.sub(u, np.array(0.5, dtype))))


def _exponential(key, shape, dtype):
    """Exponential variates ``-log(1 - u)``."""
    return floats.exponential(key, shape, dtype)


laplace = _simple("laplace", _laplace)
logistic = _simple("logistic", _logistic)
cauchy = _simple("cauchy", _cauchy)
exponential = _simple("exponential", _exponential)


# --- gamma and its relatives ---------------------------------------------------------------

def _gamma(key, a, shape, dtype, log_space=False):
    shape = result_shape("gamma", shape, shape_of(a))
    a = lax.convert_element_type(a, dtype)
    if get_aval(a).shape != shape:
        a = jnp.broadcast_to(a, shape)
    return random_gamma(key, a, log_space)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) variates (Marsaglia-Tsang); differentiable in ``a`` (implicitly)."""
    key, _ = check_key("gamma", key)
    return _gamma(key, a, shape, float_dtype("gamma", dtype))


def loggamma(key, a, shape=None, dtype=None):
    """Logs of Gamma(a, 1) variates, accurate for small ``a`` where samples underflow."""
    key, _ = check_key("loggamma", key)
    return _gamma(key, a, shape, float_dtype("loggamma", dtype), log_space=True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) variates ``Ga / (Ga + Gb)``, from log-gammas scaled by their maximum."""
    key, _ = check_key("beta", key)
    dtype = float_dtype("beta", dtype)
    check_safe_casts("beta", dtype, a, b)
    shape = result_shape("beta", shape, shape_of(a), shape_of(b))
    key_a, key_b = split_list(key, 2)
    a = jnp.broadcast_to(lax.convert_element_type(a, dtype), shape)
    b = jnp.broadcast_to(lax.convert_element_type(b, dtype), shape)
    log_ga = _gamma(key_a, a, shape, dtype, log_space=True)
    log_gb = _gamma(key_b, b, shape, dtype, log_space=True)
    log_max = lax.max(log_ga, log_gb)
    ga, gb = jnp.exp(log_ga - log_max), jnp.exp(log_gb - log_max)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors along the last axis: normalised log-space gammas."""
    key, _ = check_key("dirichlet", key)
    dtype = float_dtype("dirichlet", dtype)
    alpha_shape = shape_of(alpha)
    if len(alpha_shape) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{len(alpha_shape)}")
    shape = result_shape("dirichlet", shape, alpha_shape[:-1])
    alpha = lax.convert_element_type(alpha, dtype)
    log_g = _gamma(key, alpha, shape + alpha_shape[-1:], dtype, log_space=True)
    unnormalized = jnp.exp(log_g - lax.stop_gradient(jnp.max(log_g, -1, keepdims=True)))
    return unnormalized / jnp.sum(unnormalized, -1, keepdims=True)


def _one_parameter_family(name, draw, key, param, shape, dtype):
    """Samples of a one-parameter family: ``draw(key, param, shape, dtype)``, once the key,
    dtype and shapes are checked."""
    key, _ = check_key(name, key)
    dtype = float_dtype(name, dtype)
    check_safe_casts(name, dtype, param)
    shape = result_shape(name, shape, shape_of(param))
    return draw(key, lax.convert_element_type(param, dtype), shape, dtype)


def _t(key, df, shape, dtype):
    """Student's t variates ``n sqrt((df/2) / g)``, n normal and g Gamma(df/2)."""
    key_n, key_g = split_list(key, 2)
    n = floats.normal(key_n, shape, dtype)
    half_df = lax.div(df, np.array(2, dtype))
    g = _gamma(key_g, half_df, shape, dtype)
    return n * jnp.sqrt(half_df / g)


def chisquare_values(key, df, shape, dtype):
    """Chi-square variates: twice Gamma(df/2), drawn in log space."""
    two = np.array(2, dtype)
    log_g = _gamma(key, lax.div(df, two), shape, dtype, log_space=True)
    return lax.mul(jnp.exp(log_g), two)


def _pareto(key, b, shape, dtype):
    """Pareto variates ``exp(e / b)``, e exponential."""
    return lax.exp(floats.exponential(key, shape, dtype) / b)


def t(key, df, shape=None, dtype=None):
    """Student's t variates with ``df`` degrees of freedom."""
    return _one_parameter_family("t", _t, key, df, shape, dtype)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square variates with ``df`` degrees of freedom."""
    return _one_parameter_family("chisquare", chisquare_values, key, df, shape, dtype)


def pareto(key, b, shape=None, dtype=None):
    """Pareto variates of shape ``b`` (support from 1)."""
    return _one_parameter_family("pareto", _pareto, key, b, shape, dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) counts: Knuth's product of uniforms for lam < 10, Hormann's transformed
    rejection above (the choice of TensorFlow and NumPy). ``lam`` is taken as float32."""
    key, _ = check_key("poisson", key)
    if key_impl(key) != "threefry2x32":  # as JAX (a limit it means to lift)
        raise NotImplementedError("`poisson` is only implemented for the threefry2x32 RNG, "
                                  f"not {key_impl(key)}")
    dtype = dtypes.canonicalize(int if dtype is None else dtype)
    shape = shape_of(lam) if shape is None else canonical_shape(shape)
    lam = lax.convert_element_type(jnp.broadcast_to(lam, shape), dtypes.float32)
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = jnp.where(use_knuth, lam, np.float32(0))
    # Rejection's acceptance rate tends to 89% as lam grows: any large lam keeps it cheap.
    lam_rejection = jnp.where(use_knuth, np.float32(1e5), lam)
    max_iters = np.array(dtypes.iinfo(dtype).max, dtype)  # no practical limit
    result = jnp.where(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                       _poisson_rejection(key, lam_rejection, shape, dtype, max_iters))
    return jnp.where(lam == 0, np.zeros((), dtype), result)


def _poisson_knuth(key, lam, shape, dtype, max_iters):
    """Count uniforms until their product falls below exp(-lam) (in logs)."""
    def body(state):
        i, k, key, log_prod = state
        key, subkey = split_list(key, 2)
        k = jnp.where(log_prod > -lam, k + 1, k)
        u = floats.uniform(subkey, shape, dtypes.float32)
        return i + 1, k, key, log_prod + jnp.log(u)

    def cond(state):
        i, _, _, log_prod = state
        return jnp.any(log_prod > -lam) & (i < max_iters)

    init = (np.zeros((), dtype), jnp.zeros(shape, dtype), key, jnp.zeros(shape, np.float32))
    k = lax.while_loop(cond, body, init)[1]
    return (k - 1).astype(dtype)


def _poisson_rejection(key, lam, shape, dtype, max_iters):
    """Hormann's PTRS ("The transformed rejection method for generating Poisson random
    variables", 1993): a proposal from a transformed uniform, accepted by a quick bound or
    by comparing with the log pmf."""
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(state):
        i, k_out, accepted, key = state
        key, key_u, key_v = split_list(key, 3)
        u = floats.uniform(key_u, shape, lam.dtype) - 0.5
        v = floats.uniform(key_v, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept_quickly = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept_quickly | (~reject & (s <= t))
        return i + 1, jnp.where(accept, k, k_out), accepted | accept, key

    def cond(state):
        i, _, accepted, _ = state
        return jnp.any(~accepted) & (i < max_iters)

    init = (np.zeros((), dtype), jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


# --- vectors and matrices ------------------------------------------------------------------

def _linalg(name):
    fn = getattr(jnp.linalg, name, None)
    if fn is None:
        raise NotImplementedError(f"this sampler needs nbjax.numpy.linalg.{name}, which is not "
                                  "implemented yet")
    return fn


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """``mean + factor @ z`` for standard normal z, where ``factor factor^T = cov`` comes
    from a Cholesky factorisation, or (for singular cov) ``eigh`` or ``svd``."""
    key, _ = check_key("multivariate_normal", key)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    mean, cov = _asarray(mean), _asarray(cov)
    inexact = jnp.result_type(mean, cov)
    inexact = inexact if dtypes.is_inexact(inexact) else dtypes.default_float()
    mean, cov = mean.astype(inexact), cov.astype(inexact)
    dtype = mean.dtype if dtype is None else float_dtype("multivariate_normal", dtype)
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov.shape}.")
    if shape is None:
        shape = np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    else:
        shape = canonical_shape(shape)
        check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
    if method == "svd":
        u, s, _ = _linalg("svd")(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = _linalg("eigh")(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = _linalg("cholesky")(cov)
    z = floats.normal(key, shape + mean.shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """A uniformly random (semi-)orthogonal ``n x m`` matrix: Q of the QR factorisation of a
    normal matrix, with column signs fixed by diag(R) (Mezzadri 2007)."""
    key, _ = check_key("orthogonal", key)
    dtype = inexact_dtype("normal", dtype)  # (JAX's message: the matrix is drawn by normal)
    shape = canonical_shape(shape)
    n = int(n)
    m = n if m is None else int(m)
    z = floats.normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = _linalg("qr")(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x


def generalized_normal(key, p, shape=(), dtype=None):
    """Variates with density proportional to ``exp(-|x|**p)``: a random sign times
    ``Gamma(1/p)**(1/p)``."""
    key, _ = check_key("generalized_normal", key)
    dtype = float_dtype("generalized_normal", dtype)
    return _generalized_normal(key, p, canonical_shape(shape), dtype)


def _generalized_normal(key, p, shape, dtype):
    key_g, key_r = split_list(key, 2)
    g = _gamma(key_g, 1 / p, shape, dtype)
    return random_signs(key_r, shape, dtype) * g ** (1 / p)


def ball(key, d, p=2, shape=(), dtype=None):
    """Uniform points in the unit Lp ball of dimension ``d`` (Barthe et al. 2005)."""
    key, _ = check_key("ball", key)
    dtype = float_dtype("ball", dtype)
    shape = canonical_shape(shape)
    d = int(d)
    key_g, key_e = split_list(key, 2)
    g = _generalized_normal(key_g, p, (*shape, d), dtype)
    e = floats.exponential(key_e, shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]

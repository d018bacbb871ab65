"""Derivatives of the whole ``nbjax.numpy`` / ``nbjax.nn`` surface against finite differences.

Every differentiable function is checked with ``check_grads(f, args, order=2, modes=("fwd",
"rev"))`` at two random points, with points chosen away from kinks (ties of max/sort, zeros
of abs/relu, integers for floor, clip bounds), including broadcasting operands and several
axis choices. Then the numerically careful cases, each checked against what JAX gives
(values derived by hand below).

Tolerances: inputs are float32, and check_grads' central differences with its default step
(eps = 1e-4) carry a relative error of about ulp/eps ~ 1e-3 of the output's magnitude, which
the float32 default tolerance (2e-3) does not reliably cover (e.g. rad2deg, cosh, second
derivatives), so float32 cases take a step of ``EPS32 = 1e-3`` (still far inside the margins
the inputs keep from kinks) and ``TOL32 = 1e-2`` for atol and rtol; a wrong derivative
formula is off by far more. Cases whose finite differences are too noisy even for that run in float64
(``x64=True``) with check_grads' float64 default (1e-5).

Also here: make_jaxpr(grad(f)) type-checks, jacfwd equals jacrev (batching rules of the
tangent and cotangent computations), and the numerically careful cases.
"""

import zlib
from dataclasses import dataclass

import numpy as np
import pytest

import nbjax
import nbjax.nn as nn
import nbjax.numpy as jnp
from nbjax.core import check_jaxpr, dtypes
from nbjax.test_util import check_grads
from helpers import assert_close, random_array

TOL32 = 1e-2  # float32 finite differences are this noisy (see the module docstring)
EPS32 = 1e-3  # and take this step: with 1e-4, x ** 3 or exp(z) failed for ~2% of draws


# --- argument makers: fn(rng, float_dtype) -> array ----------------------------------------

def normal(*shape):
    return lambda rng, dt: random_array(rng, shape, dt)


def uniform(lo, hi, *shape):
    return lambda rng, dt: random_array(rng, shape, dt, low=lo, high=hi)


def cnormal(*shape):
    """Complex values (complex64 with float32, complex128 under x64)."""
    return lambda rng, dt: random_array(rng, shape, np.result_type(dt, np.complex64))


def away(*shape, lo=0.4, hi=1.5):
    """Magnitudes in [lo, hi] with random signs: away from 0 (abs, relu, sign, division)."""
    return lambda rng, dt: rng.choice([-1, 1], shape).astype(dt) * uniform(lo, hi, *shape)(rng, dt)


def offint(*shape):
    """Values at least 0.2 from an integer (floor, round, ...)."""
    fraction = uniform(0.2, 0.8, *shape)
    return lambda rng, dt: rng.integers(-3, 3, shape).astype(dt) + fraction(rng, dt)


def distinct(*shape):
    """Distinct values in about [-1.5, 1.5], neighbours at least 2.5/size apart, random order:
    finite differences never cross a tie of max, min, sort or a quantile."""
    def make(rng, dt):
        n = int(np.prod(shape))
        step = 3.0 / max(n, 1)
        vals = (rng.permutation(n) - n / 2) * step + rng.uniform(0, step / 6, n)
        return vals.reshape(shape).astype(dt)
    return make


def ints(lo, hi, *shape):
    """int32 values in [lo, hi)."""
    return lambda rng, dt: random_array(rng, shape, np.int32, low=lo, high=hi - 1)


def _nan_positions(shape):
    """The first element and one near the end: no slice along any axis is all NaN."""
    n = int(np.prod(shape))
    return [0, n - 2]


def with_nans(*shape):
    """Normal values with two NaNs (for the nan* reductions)."""
    def make(rng, dt):
        x = rng.standard_normal(shape)
        x.reshape(-1)[_nan_positions(shape)] = np.nan
        return x.astype(dt)
    return make


def distinct_with_nans(*shape):
    def make(rng, dt):
        x = distinct(*shape)(rng, dt)
        x.reshape(-1)[_nan_positions(shape)] = np.nan
        return x
    return make


@dataclass
class Case:
    """A function, makers of its arguments, and how to check it (tolerance, float64)."""
    name: str
    fn: object
    args: tuple
    tol: float = None
    x64: bool = False

    def param(self):
        return pytest.param(self, id=self.name)


def C(name, fn, *args, tol=None, x64=False):
    return Case(name, fn, args, tol, x64)


MASK34 = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1]], bool)
MASK234 = np.arange(24).reshape(2, 3, 4) % 3 != 1
ROWS = np.array([[1, 0, 2], [2, 2, 0]], np.int32)  # duplicates: scatter-add in the transpose
V34 = random_array(1, (3, 4), low=0.5, high=2)
COND34 = np.array([[True, False, True, False]] * 2 + [[False, True, True, False]])


# --- element-wise functions ----------------------------------------------------------------

_UNARY = {
    normal(3, 4): ["negative", "positive", "sin", "cos", "sinh", "cosh", "tanh", "arctan",
                   "atan", "arcsinh", "asinh", "exp", "exp2", "expm1", "square", "deg2rad",
                   "radians", "rad2deg", "degrees", "sinc", "real", "conj", "conjugate",
                   "nan_to_num", "imag"],
    away(3, 4): ["abs", "absolute", "fabs", "sign", "cbrt", "reciprocal", "angle"],
    offint(3, 4): ["floor", "ceil", "round", "around", "rint", "trunc", "fix"],
    uniform(0.3, 3.0, 3, 4): ["log", "log2", "log10", "sqrt"],
    uniform(-0.6, 2.0, 3, 4): ["log1p"],
    uniform(-1.2, 1.2, 3, 4): ["tan"],
    uniform(-0.8, 0.8, 3, 4): ["arcsin", "asin", "arccos", "acos", "arctanh", "atanh"],
    uniform(1.3, 3.0, 3, 4): ["arccosh", "acosh"],
}
UNARY_CASES = [C(name, getattr(jnp, name), make)
               for make, names in _UNARY.items() for name in names]

_BINARY = [  # (name, x maker, y maker)
    ("add", normal(3, 4), normal(4)),
    ("subtract", normal(3, 1), normal(1, 4)),
    ("multiply", normal(2, 3, 4), normal(3, 1)),
    ("divide", normal(3, 4), away(4)),
    ("true_divide", normal(), away(3, 4)),
    ("floor_divide", uniform(0.1, 0.9, 3, 4), uniform(1.1, 1.9, 4)),
    ("remainder", uniform(0.1, 0.9, 3, 4), uniform(1.1, 1.9, 4)),
    ("mod", uniform(-0.9, -0.1, 3, 4), uniform(1.1, 1.9, 3, 4)),
    ("fmod", uniform(-0.9, -0.1, 3, 4), uniform(1.1, 1.9, 3, 4)),
    ("power", uniform(0.5, 2.0, 3, 4), normal(4)),
    ("pow", uniform(0.5, 2.0, 3), uniform(-2, 2, 2, 3)),
    ("float_power", uniform(0.5, 2.0, 3, 4), normal(3, 4)),
    ("logaddexp", normal(3, 4), normal(4)),
    ("logaddexp2", normal(3, 1), normal(4)),
    ("arctan2", away(4), away(3, 4)),
    ("atan2", away(3, 4), away(3, 4)),
    ("hypot", away(3, 4), away(1, 4)),
    ("copysign", away(3, 4), away(4)),
    ("heaviside", away(3, 4), normal(3, 4)),
]
BINARY_CASES = [C(name, getattr(jnp, name), x, y) for name, x, y in _BINARY]


def apart(*shape):
    """Two operands whose elements differ by at least 0.3 (maximum/minimum away from ties)."""
    def make_y(rng, dt):
        return away(*shape, lo=0.3, hi=1.0)(rng, dt)
    return make_y


ELEMENTWISE_CASES = UNARY_CASES + BINARY_CASES + [
    C("maximum", lambda x, d: jnp.maximum(x, x + d), normal(3, 4), apart(3, 4)),
    C("minimum_bcast", lambda x, d: jnp.minimum(x[:1], x + d), normal(3, 4), apart(3, 4)),
    C("fmax", lambda x, d: jnp.fmax(x, x + d), normal(3, 4), apart(3, 4)),
    C("fmin", lambda x, d: jnp.fmin(x + d, x), normal(3, 4), apart(3, 4)),
    C("maximum_scalar", lambda x: jnp.maximum(x, 0.1), away(3, 4)),
    C("clip", lambda x: jnp.clip(x, -0.5, 0.6), offint(3, 4)),
    C("clip_array_bounds", lambda x, lo, hi: jnp.clip(x, lo, hi),
      uniform(-2, 2, 3, 4), uniform(-0.5, -0.2, 4), uniform(0.2, 0.5, 3, 1)),
    C("ldexp", lambda x, n: jnp.ldexp(x, n), normal(3, 4), ints(-2, 3, 3, 4)),
    C("modf", lambda x: jnp.modf(x), offint(3, 4)),
    C("astype_f32", lambda x: jnp.astype(x, jnp.float32) * 2.0, normal(3), x64=True,
      tol=TOL32),
    C("power_int_exponent", lambda x: jnp.power(x, 3), normal(3, 4)),
    C("power_scalar_base", lambda y: jnp.power(2.0, y), normal(3, 4)),
    C("operators", lambda x, y: (x * y - x / (y ** 2 + 1.0)) @ y.T, normal(3, 4), normal(3, 4)),
    C("reflected_operators", lambda x: (2.0 - x) / (3.0 + x * x) + 2.0 ** x - (-x) % 1.5
      + abs(x), away(3, 4)),
    C("divmod", lambda x, y: jnp.divmod(x, y), uniform(0.1, 0.9, 3, 4), uniform(1.1, 1.9, 4)),
]
COMPLEX_CASES = [
    C(f"complex_{name}", getattr(jnp, name), cnormal(3, 2))
    for name in ("real", "imag", "conj", "abs", "angle", "exp", "sin", "square", "sqrt")
] + [
    C("complex_multiply", jnp.multiply, cnormal(3, 2), cnormal(2)),
    C("complex_divide", jnp.divide, cnormal(3, 2), cnormal(3, 2)),
    C("complex_from_reals", lambda x, y: jnp.abs(x + 1j * y) ** 2, normal(3), normal(3)),
    C("complex_sum_matmul", lambda a, b: jnp.sum(a @ b, axis=0), cnormal(2, 3), cnormal(3, 2)),
    C("complex_vdot", jnp.vdot, cnormal(3), cnormal(3)),
    C("complex_mean_var", lambda x: (jnp.mean(x, axis=0), jnp.var(x, axis=1)), cnormal(3, 4)),
]


# --- reductions ----------------------------------------------------------------------------

def axis_variants(name, fn, make, axes=(None, 0, -1, (0, 2)), **kw):
    return [C(f"{name}_axis{a}", lambda x, a=a: fn(x, axis=a, **kw), make) for a in axes]


REDUCTION_CASES = (
    axis_variants("sum", jnp.sum, normal(2, 3, 4))
    + axis_variants("prod", jnp.prod, uniform(0.5, 1.5, 2, 3, 4))
    + axis_variants("mean", jnp.mean, normal(2, 3, 4))
    + axis_variants("var", jnp.var, normal(2, 3, 4))
    + axis_variants("std", jnp.std, normal(2, 3, 4), axes=(None, 1, (0, 2)))
    + axis_variants("max", jnp.max, distinct(2, 3, 4))
    + axis_variants("min", jnp.min, distinct(2, 3, 4))
    + axis_variants("amax", jnp.amax, distinct(2, 3, 4), axes=(1,))
    + axis_variants("amin", jnp.amin, distinct(2, 3, 4), axes=((1, 2),))
    + axis_variants("ptp", jnp.ptp, distinct(2, 3, 4), axes=(None, 1))
    + axis_variants("median", jnp.median, distinct(2, 3, 4), axes=(None, 1, -1, (0, 2)))
    + axis_variants("cumsum", jnp.cumsum, normal(2, 3, 4), axes=(None, 0, -1))
    + axis_variants("cumprod", jnp.cumprod, uniform(0.5, 1.5, 2, 3, 4), axes=(None, 1))
    + axis_variants("nansum", jnp.nansum, with_nans(2, 3, 4), axes=(None, -1))
    + axis_variants("nanprod", jnp.nanprod, with_nans(2, 3), axes=(None, 1))
    + axis_variants("nanmean", jnp.nanmean, with_nans(2, 3, 4), axes=(None, -1))
    + axis_variants("nanvar", jnp.nanvar, with_nans(2, 3, 4), axes=(None, -1))
    + axis_variants("nanstd", jnp.nanstd, with_nans(2, 3, 4), axes=(None, -1))
    + axis_variants("nanmax", jnp.nanmax, distinct_with_nans(2, 3, 4), axes=(None, -1))
    + axis_variants("nanmin", jnp.nanmin, distinct_with_nans(2, 3, 4), axes=(1,))
    + axis_variants("nanmedian", jnp.nanmedian, distinct_with_nans(2, 3, 5), axes=(None, -1))
    + axis_variants("nancumsum", jnp.nancumsum, with_nans(2, 3), axes=(None, 1))
    + axis_variants("nancumprod", jnp.nancumprod, with_nans(2, 3), axes=(1,))
    + [
        C("sum_keepdims", lambda x: jnp.sum(x, axis=(0, 2), keepdims=True), normal(2, 3, 4)),
        C("sum_where", lambda x: jnp.sum(x, axis=1, where=MASK234), normal(2, 3, 4)),
        C("sum_initial", lambda x: jnp.sum(x, axis=0, initial=2.0), normal(2, 3)),
        C("prod_where_keepdims", lambda x: jnp.prod(x, axis=-1, where=MASK234, keepdims=True),
          uniform(0.5, 1.5, 2, 3, 4)),
        C("prod_with_a_zero", lambda x: jnp.prod(x * np.array([1, 0, 1, 1], np.float32),
                                                 axis=-1), normal(3, 4)),
        C("mean_where", lambda x: jnp.mean(x, axis=(0, 2), where=MASK234), normal(2, 3, 4)),
        C("var_ddof_keepdims", lambda x: jnp.var(x, axis=0, ddof=1, keepdims=True),
          normal(3, 4)),
        C("var_where", lambda x: jnp.var(x, axis=-1, where=MASK34), normal(3, 4)),
        C("std_where_ddof", lambda x: jnp.std(x, axis=-1, ddof=1, where=MASK34), normal(3, 4)),
        C("max_keepdims", lambda x: jnp.max(x, axis=1, keepdims=True), distinct(2, 3, 4)),
        C("max_where_initial", lambda x: jnp.max(x, axis=-1, where=MASK34, initial=-5.0),
          distinct(3, 4)),
        C("min_where_initial", lambda x: jnp.min(x, axis=0, where=MASK34, initial=5.0),
          distinct(3, 4)),
        C("cumulative_sum", lambda x: jnp.cumulative_sum(x, axis=1, include_initial=True),
          normal(3, 4)),
        C("cumulative_prod", lambda x: jnp.cumulative_prod(x, axis=0),
          uniform(0.5, 1.5, 3, 4)),
        C("average", lambda x: jnp.average(x, axis=1), normal(3, 4)),
        C("average_weights", lambda x, w: jnp.average(x, axis=-1, weights=w),
          normal(3, 4), uniform(0.5, 1.5, 4)),
        C("average_weights_full", lambda x, w: jnp.average(x, weights=w),
          normal(3, 4), uniform(0.5, 1.5, 3, 4)),
        C("average_returned", lambda x, w: jnp.average(x, axis=0, weights=w, returned=True),
          normal(3, 4), uniform(0.5, 1.5, 3)),
        C("median_keepdims", lambda x: jnp.median(x, axis=0, keepdims=True), distinct(4, 3)),
    ]
    + [C(f"quantile_{m}", lambda x, m=m: jnp.quantile(x, np.float32(0.3), axis=1, method=m),
         distinct(3, 5)) for m in ("linear", "lower", "higher", "nearest", "midpoint")]
    + [
        C("quantile_q_array", lambda x, q: jnp.quantile(x, q, axis=(0, 2)),
          distinct(2, 3, 4), uniform(0.1, 0.9, 3), x64=True),
        C("quantile_keepdims", lambda x: jnp.quantile(x, np.array([0.2, 0.7]), axis=-1,
                                                       keepdims=True), distinct(2, 5)),
        C("percentile", lambda x, q: jnp.percentile(x, q), distinct(3, 4),
          uniform(10, 90, 2), x64=True),
        C("nanquantile", lambda x: jnp.nanquantile(x, 0.4, axis=-1),
          distinct_with_nans(2, 5)),
        C("nanpercentile", lambda x: jnp.nanpercentile(x, np.array([30.0, 60.0])),
          distinct_with_nans(2, 5)),
        C("diff", lambda x: jnp.diff(x, n=2, axis=0), normal(4, 3)),
        C("diff_prepend", lambda x, p: jnp.diff(x, prepend=p), normal(3, 4), normal(3, 1)),
    ]
)


# --- manipulation --------------------------------------------------------------------------

def _split_sum(parts):
    return [p * (i + 1.0) for i, p in enumerate(parts)]


MANIPULATION_CASES = [
    C("reshape", lambda x: jnp.reshape(x, (4, -1)) ** 2, normal(2, 3, 4)),
    C("reshape_method", lambda x: x.reshape(6, 4).T, normal(2, 3, 4)),
    C("ravel", lambda x: jnp.ravel(x) * jnp.arange(12.0), normal(3, 4), x64=True),
    C("transpose", lambda x: jnp.transpose(x, (2, 0, 1)), normal(2, 3, 4)),
    C("transpose_default", jnp.transpose, normal(2, 3, 4)),
    C("matrix_transpose", jnp.matrix_transpose, normal(2, 3, 4)),
    C("permute_dims", lambda x: jnp.permute_dims(x, (1, 2, 0)), normal(2, 3, 4)),
    C("moveaxis", lambda x: jnp.moveaxis(x, (0, 1), (-1, 0)), normal(2, 3, 4)),
    C("swapaxes", lambda x: jnp.swapaxes(x, 0, -1), normal(2, 3, 4)),
    C("squeeze", lambda x: jnp.squeeze(x, axis=(0, 2)), normal(1, 3, 1, 2)),
    C("expand_dims", lambda x: jnp.expand_dims(x, (0, -1)), normal(3, 4)),
    C("broadcast_to", lambda x: jnp.broadcast_to(x, (2, 3, 4)), normal(3, 1)),
    C("broadcast_arrays", lambda x, y: jnp.broadcast_arrays(x, y), normal(3, 1), normal(4)),
    C("atleast_3d", lambda x, y: jnp.atleast_3d(x, y), normal(3), normal(2, 3)),
    C("atleast_2d", lambda x: jnp.atleast_2d(x), normal()),
    C("atleast_1d", lambda x: jnp.atleast_1d(x), normal()),
    C("concatenate", lambda x, y: jnp.concatenate([x, y, x], axis=1),
      normal(2, 3), normal(2, 2)),
    C("concatenate_none", lambda x, y: jnp.concatenate([x, y], axis=None),
      normal(2, 3), normal(4)),
    C("concat", lambda x, y: jnp.concat([x, y]), normal(2, 3), normal(1, 3)),
    C("stack", lambda x, y: jnp.stack([x, y], axis=-1), normal(2, 3), normal(2, 3)),
    C("hstack", lambda x, y: jnp.hstack([x, y]), normal(3), normal(2)),
    C("vstack", lambda x, y: jnp.vstack([x, y]), normal(3), normal(2, 3)),
    C("dstack", lambda x, y: jnp.dstack([x, y]), normal(2, 3), normal(2, 3)),
    C("column_stack", lambda x, y: jnp.column_stack([x, y]), normal(3), normal(3, 2)),
    C("split", lambda x: _split_sum(jnp.split(x, [1, 3], axis=1)), normal(2, 5)),
    C("split_sections", lambda x: _split_sum(jnp.split(x, 2)), normal(4, 3)),
    C("array_split", lambda x: _split_sum(jnp.array_split(x, 3, axis=-1)), normal(2, 5)),
    C("hsplit", lambda x: _split_sum(jnp.hsplit(x, 2)), normal(3, 4)),
    C("vsplit", lambda x: _split_sum(jnp.vsplit(x, [1])), normal(3, 4)),
    C("dsplit", lambda x: _split_sum(jnp.dsplit(x, 2)), normal(2, 1, 4)),
    C("unstack", lambda x: _split_sum(jnp.unstack(x, axis=1)), normal(2, 3)),
    C("tile", lambda x: jnp.tile(x, (2, 1, 3)), normal(2, 3)),
    C("repeat", lambda x: jnp.repeat(x, 2, axis=0), normal(2, 3)),
    C("repeat_array", lambda x: jnp.repeat(x, np.array([1, 0, 3]), axis=1), normal(2, 3)),
    C("repeat_flat", lambda x: jnp.repeat(x, 3), normal(2, 2)),
    C("flip", lambda x: jnp.flip(x, axis=(0, 2)), normal(2, 3, 4)),
    C("flip_all", jnp.flip, normal(2, 3)),
    C("fliplr", jnp.fliplr, normal(2, 3)),
    C("flipud", jnp.flipud, normal(2, 3)),
    C("roll", lambda x: jnp.roll(x, 2, axis=1), normal(2, 5)),
    C("roll_flat", lambda x: jnp.roll(x, -3), normal(2, 5)),
    C("roll_multi", lambda x: jnp.roll(x, (1, -2), axis=(0, 1)), normal(3, 4)),
    C("rot90", lambda x: jnp.rot90(x, k=3, axes=(1, 2)), normal(2, 3, 4)),
    C("where", lambda x, y: jnp.where(COND34, x, y), normal(3, 4), normal(4)),
    C("where_scalar", lambda x: jnp.where(COND34, x, 0.5), normal(3, 4)),
    C("where_traced_cond", lambda x, y: jnp.where(x > y, x * y, y), normal(3, 4), normal(4)),
    C("select", lambda x, y: jnp.select([COND34, ~COND34[::-1]], [x, y], default=x * 3),
      normal(3, 4), normal(3, 4)),
    C("diag_of_vector", lambda v: jnp.diag(v, k=1), normal(3)),
    C("diag_of_matrix", lambda x: jnp.diag(x, k=-1), normal(3, 4)),
    C("diagflat", lambda v: jnp.diagflat(v, k=-1), normal(2, 2)),
    C("diagonal", lambda x: jnp.diagonal(x, offset=1, axis1=0, axis2=2), normal(3, 2, 4)),
    C("trace", lambda x: jnp.trace(x, offset=-1), normal(3, 4)),
    C("trace_axes", lambda x: jnp.trace(x, axis1=1, axis2=2), normal(2, 3, 3)),
    C("tril", lambda x: jnp.tril(x, k=1), normal(2, 3, 4)),
    C("triu", lambda x: jnp.triu(x, k=-1), normal(3, 4)),
    C("append", lambda x, y: jnp.append(x, y, axis=0), normal(2, 3), normal(1, 3)),
    C("append_flat", lambda x, y: jnp.append(x, y), normal(2, 3), normal(2)),
    C("insert", lambda x, v: jnp.insert(x, 1, v, axis=1), normal(3, 4), normal(3)),
    C("insert_many", lambda x, v: jnp.insert(x, np.array([0, 2]), v), normal(4), normal(2)),
    C("delete", lambda x: jnp.delete(x, np.array([0, 2]), axis=1), normal(3, 4)),
    C("delete_slice", lambda x: jnp.delete(x, slice(1, None, 2)), normal(5)),
]
PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")
MANIPULATION_CASES += [
    C(f"pad_{mode}", lambda x, mode=mode: jnp.pad(x, ((1, 2), (2, 0)), mode=mode), normal(3, 4))
    for mode in PAD_MODES
] + [
    C("pad_reflect_wide", lambda x: jnp.pad(x, 5, mode="reflect"), normal(3)),
    C("pad_wrap_wide", lambda x: jnp.pad(x, (4, 6), mode="wrap"), normal(2, 3)),
    C("pad_constant_values", lambda x: jnp.pad(x, 1, constant_values=((1.0, 2.0), (3.0, 4.0))),
      normal(2, 3)),
    C("pad_traced_constant", lambda x, c: jnp.pad(x, (1, 2), constant_values=c),
      normal(2, 3), normal()),
]


# --- indexing ------------------------------------------------------------------------------

INDEXING_CASES = [
    C("getitem_int", lambda x: x[1], normal(3, 4)),
    C("getitem_negative", lambda x: x[-1, -2], normal(3, 4)),
    C("getitem_slice_step", lambda x: x[::2, 3:0:-2], normal(5, 4)),
    C("getitem_reverse", lambda x: x[::-1], normal(5)),
    C("getitem_none_ellipsis", lambda x: x[None, ..., 1:, None], normal(2, 3, 4)),
    C("getitem_int_array", lambda x: x[np.array([2, 0, 2, -1])], normal(4, 3)),
    C("getitem_int_array_2d", lambda x: x[:, np.array([[1, 0], [3, 3]])], normal(2, 4)),
    C("getitem_two_arrays", lambda x: x[np.array([0, 2]), np.array([[1], [3]])], normal(3, 4)),
    C("getitem_separated_arrays", lambda x: x[np.array([1, 0]), :, np.array([2, 2])],
      normal(2, 3, 4)),
    C("getitem_bool_mask", lambda x: x[MASK34], normal(3, 4)),
    C("getitem_bool_rows", lambda x: x[np.array([True, False, True])], normal(3, 4)),
    C("getitem_traced_int", lambda x, i: x[i], normal(4, 3), ints(-4, 4)),
    C("getitem_traced_array", lambda x, i: x[:, i], normal(2, 5), ints(-5, 5, 3, 2)),
    C("getitem_dynamic_slice", lambda x, i: jnp.take(x, i + np.arange(2), axis=0),
      normal(5, 2), ints(0, 3)),
    C("at_set", lambda x, v: x.at[1].set(v), normal(3, 4), normal(4)),
    C("at_set_slice", lambda x, v: x.at[:, ::2].set(v), normal(3, 4), normal(3, 1)),
    C("at_set_array", lambda x, v: x.at[np.array([2, 0])].set(v), normal(3, 4), normal(2, 4)),
    C("at_set_mask", lambda x: x.at[MASK34].set(0.5), normal(3, 4)),
    C("at_set_duplicates", lambda x, v: x.at[np.array([0, 2, 0])].set(v), normal(3, 4),
      normal(3, 4)),
    C("at_set_negative_step", lambda x, v: x.at[::-2].set(v), normal(5), normal(3)),
    C("at_set_traced_index", lambda x, i, v: x.at[i, 1:].set(v), normal(4, 3), ints(-4, 4),
      normal(2)),
    C("at_add_drop", lambda x, v: x.at[np.array([0, 7, -9])].add(v, mode="drop"), normal(4),
      normal(3)),
    C("at_add_duplicates", lambda x, v: x.at[ROWS].add(v), normal(3, 4), normal(2, 3, 4)),
    C("at_add_scalar", lambda x, v: x.at[1:, 2].add(v), normal(3, 4), normal()),
    C("at_multiply_repeated", lambda x: x.at[np.array([0, 2, 0])].multiply(V34), normal(3, 4)),
    C("at_multiply_unique", lambda x, v: x.at[np.array([2, 0])].multiply(
        v, unique_indices=True), normal(3, 4), normal(2, 4)),
    C("at_multiply_method", lambda x, v: x.at[1, 1:3].mul(v), normal(3, 4), normal(2)),
    C("at_min", lambda x, d: x.at[np.array([0, 2])].min(x[np.array([1, 0])] + d),
      normal(3, 4), apart(2, 4)),
    C("at_max", lambda x, d: x.at[:, 1].max(x[:, 2] + d), normal(3, 4), apart(3)),
    C("at_get", lambda x: x.at[np.array([3, 1])].get(), normal(4, 2)),
    C("at_get_fill", lambda x: x.at[np.array([3, 9])].get(mode="fill", fill_value=2.0),
      normal(4, 2)),
    C("at_traced_index", lambda x, i, v: x.at[i].add(v), normal(5), ints(0, 5, 3), normal(3)),
    C("take", lambda x: jnp.take(x, np.array([[0, 3], [1, 1]]), axis=1), normal(2, 4)),
    C("take_flat", lambda x: jnp.take(x, np.array([5, 0, 5])), normal(2, 3)),
    C("take_clip", lambda x: jnp.take(x, np.array([7, -9, 1]), axis=0, mode="clip"),
      normal(4, 2)),
    C("take_fill", lambda x: jnp.take(x, np.array([7, 1]), axis=0, mode="fill",
                                      fill_value=0.5), normal(4, 2)),
    C("take_along_axis", lambda x: jnp.take_along_axis(x, np.array([[0, 2], [1, 1]]), axis=1),
      normal(2, 3)),
    C("take_along_axis_bcast", lambda x: jnp.take_along_axis(x, np.array([[[1], [0]]]),
                                                             axis=-1), normal(2, 2, 3)),
]


# --- sorting -------------------------------------------------------------------------------

SORTING_CASES = [
    C("sort", jnp.sort, distinct(3, 4)),
    C("sort_axis0", lambda x: jnp.sort(x, axis=0), distinct(3, 4)),
    C("sort_flat", lambda x: jnp.sort(x, axis=None), distinct(3, 4)),
    C("sort_descending", lambda x: jnp.sort(x, axis=1, descending=True), distinct(2, 5)),
    C("argsort_gather", lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=0), axis=0),
      distinct(3, 4)),
    C("argsort_permute_other", lambda x, y: y[jnp.argsort(x)], distinct(5), normal(5)),
    C("argmax_gather", lambda x: x[jnp.argmax(x)] * x, distinct(5)),
    C("partition", lambda x: jnp.sort(jnp.partition(x, 2, axis=-1), axis=-1), distinct(2, 5)),
    C("lexsort_gather", lambda x, y: y[jnp.lexsort((y, x))], distinct(5), normal(5)),
]


# --- products ------------------------------------------------------------------------------

_EINSUMS = [("ij,jk->ik", (2, 3), (3, 4)), ("ii->i", (3, 3)), ("ij->", (2, 3)),
            ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)), ("i,i->", (3,), (3,)),
            ("ij,ij->i", (2, 3), (2, 3)), ("...ij,...jk", (2, 2, 3), (3, 2)),
            ("ijk->kji", (2, 3, 4)), ("ij,jk,kl->il", (2, 3), (3, 2), (2, 2)),
            ("i,j->ij", (2,), (3,))]

PRODUCT_CASES = [
    C("dot_vv", jnp.dot, normal(3), normal(3)),
    C("dot_mv", jnp.dot, normal(2, 3), normal(3)),
    C("dot_mm", jnp.dot, normal(2, 3), normal(3, 4)),
    C("dot_scalar", jnp.dot, normal(), normal(2, 3)),
    C("dot_nd", jnp.dot, normal(2, 2, 3), normal(2, 3, 2)),
    C("vdot", jnp.vdot, normal(2, 3), normal(3, 2)),
    C("matmul", jnp.matmul, normal(2, 3), normal(3, 4)),
    C("matmul_batched_bcast", jnp.matmul, normal(2, 1, 2, 3), normal(3, 3, 2)),
    C("matmul_vec_mat", jnp.matmul, normal(3), normal(2, 3, 2)),
    C("matmul_mat_vec", lambda a, b: a @ b, normal(2, 2, 3), normal(3)),
    C("inner", jnp.inner, normal(2, 3), normal(4, 3)),
    C("outer", jnp.outer, normal(3), normal(2, 2)),
    C("kron", jnp.kron, normal(2, 3), normal(2, 2)),
    C("tensordot_int", lambda a, b: jnp.tensordot(a, b, axes=1), normal(2, 3), normal(3, 2)),
    C("tensordot_pairs", lambda a, b: jnp.tensordot(a, b, axes=([1, 0], [0, 2])),
      normal(2, 3, 2), normal(3, 4, 2)),
    C("cross", jnp.cross, normal(2, 3), normal(3)),
    C("cross_axis", lambda a, b: jnp.cross(a, b, axis=0), normal(3, 2), normal(3, 2)),
    C("cross_2d", jnp.cross, normal(3, 2), normal(3, 2)),
    C("vecdot", lambda a, b: jnp.vecdot(a, b, axis=0), normal(3, 2), normal(3, 1)),
] + [C(f"einsum_{spec}", lambda *ops, spec=spec: jnp.einsum(spec, *ops),
       *[normal(*s) for s in shapes]) for spec, *shapes in _EINSUMS]


# --- nn ------------------------------------------------------------------------------------

NN_CASES = [C(name, getattr(nn, name), away(3, 4)) for name in (
    "relu", "sigmoid", "log_sigmoid", "softplus", "soft_sign", "silu", "swish", "elu",
    "leaky_relu", "celu", "selu")] + [
    C("hard_tanh", nn.hard_tanh, offint(3, 4)),  # kinks at -1, 0 and 1
    C("relu6", nn.relu6, uniform(0.3, 5.7, 3, 4)),
    C("gelu_tanh", lambda x: nn.gelu(x, approximate=True), normal(3, 4)),
    C("gelu_erf", lambda x: nn.gelu(x, approximate=False), normal(3, 4)),
    C("elu_alpha", lambda x: nn.elu(x, alpha=0.5), away(3, 4)),
    C("celu_alpha", lambda x: nn.celu(x, alpha=2.0), away(3, 4)),
    C("leaky_relu_slope", lambda x: nn.leaky_relu(x, 0.2), away(3, 4)),
    C("hard_sigmoid", nn.hard_sigmoid, uniform(-2.7, 2.7, 3, 4)),
    C("hard_silu", nn.hard_silu, uniform(-2.7, 2.7, 3, 4)),
    C("hard_swish", nn.hard_swish, uniform(-2.7, 2.7, 3, 4)),
    C("softmax", nn.softmax, normal(3, 4)),
    C("softmax_axis0", lambda x: nn.softmax(x, axis=0), normal(3, 4)),
    C("softmax_axes", lambda x: nn.softmax(x, axis=(0, 2)), normal(2, 3, 2)),
    C("softmax_where", lambda x: nn.softmax(x, where=MASK34), normal(3, 4)),
    C("log_softmax", nn.log_softmax, normal(3, 4)),
    C("log_softmax_axis0", lambda x: nn.log_softmax(x, axis=0), normal(3, 4)),
    C("log_softmax_where", lambda x: jnp.where(MASK34, nn.log_softmax(x, where=MASK34), 0.0),
      normal(3, 4)),
    C("logsumexp", nn.logsumexp, normal(3, 4)),
    C("logsumexp_axis", lambda x: nn.logsumexp(x, axis=1, keepdims=True), normal(3, 4)),
    C("logsumexp_axes", lambda x: nn.logsumexp(x, axis=(0, 2)), normal(2, 3, 2)),
    C("logsumexp_b", lambda x, b: nn.logsumexp(x, axis=-1, b=b), normal(3, 4),
      uniform(0.5, 2.0, 4)),
    C("logsumexp_sign", lambda x, b: nn.logsumexp(x, axis=0, b=b, return_sign=True)[0],
      normal(3, 4), away(3, 4)),
    C("logsumexp_where", lambda x: nn.logsumexp(x, axis=-1, where=MASK34), normal(3, 4)),
    C("standardize", nn.standardize, normal(3, 4), x64=True),
    C("standardize_axis0", lambda x: nn.standardize(x, axis=0), normal(3, 4), x64=True),
    C("standardize_axes", lambda x: nn.standardize(x, axis=(1, 2)), normal(2, 3, 2), x64=True),
    C("standardize_given", lambda x, m, v: nn.standardize(x, mean=m, variance=v),
      normal(3, 4), normal(3, 1), uniform(0.5, 2.0, 4), x64=True),
    # distinct: a row's two unmasked values never nearly equal (a tiny variance, huge slopes)
    C("standardize_where", lambda x: nn.standardize(x, where=MASK34), distinct(3, 4), x64=True),
    C("normalize", nn.normalize, normal(2, 5), x64=True),
]

FFT_CASES = [
    C("fft_real_part", lambda x: jnp.real(jnp.fft.fft(x)), normal(2, 4)),
    C("rfft_abs", lambda x: jnp.abs(jnp.fft.rfft(x, axis=0)), normal(4, 2)),
    C("irfft", lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * 2.0), normal(2, 4)),
]

CREATION_CASES = [
    C("asarray", lambda x: jnp.asarray(x) * jnp.array(x), normal(3)),
    C("copy", lambda x: jnp.copy(x) ** 2, normal(3)),
    C("full", lambda v: jnp.full((2, 3), v), normal()),
    C("full_like", lambda x, v: jnp.full_like(x, v) * x, normal(2, 3), normal()),
    C("zeros_ones_like", lambda x: jnp.zeros_like(x) + jnp.ones_like(x) * x, normal(2, 3)),
    C("linspace", lambda a, b: jnp.linspace(a, b, 5), normal(), normal()),
    C("linspace_arrays", lambda a, b: jnp.linspace(a, b, 4, axis=-1, endpoint=False),
      normal(2), normal(2)),
    C("logspace", lambda a, b: jnp.logspace(a, b, 4), uniform(-1, 0), uniform(0, 1)),
    C("geomspace", lambda a, b: jnp.geomspace(a, b, 4), uniform(0.5, 1), uniform(2, 3)),
    C("meshgrid", lambda x, y: jnp.meshgrid(x, y, indexing="ij"), normal(2), normal(3)),
]

METHOD_CASES = [
    C("methods_reductions", lambda x: (x.sum(0), x.mean(axis=1), x.var(), x.std(1), x.prod(1),
                                       x.cumsum(1), x.cumprod(0)), uniform(0.5, 1.5, 3, 4)),
    C("methods_extrema", lambda x: (x.max(0), x.min(), x.ptp(1)), distinct(3, 4)),
    C("methods_shape", lambda x: (x.T, x.flatten(), x.ravel(), x.squeeze(), x.swapaxes(0, 1),
                                  x.transpose(1, 0), x.reshape((4, 3)), x.repeat(2, 0)),
      normal(3, 4)),
    C("methods_other", lambda x, y: (x.dot(y.T), x.clip(-0.5, 0.5), x.take(np.array([1, 1])),
                                     x.diagonal(), x.trace(), x.conj(), x.real, x.imag,
                                     x.astype(jnp.float32), x.sort(1)), away(3, 4), normal(3, 4)),
]

EDGE_SHAPE_CASES = [  # size-0 and size-1 axes
    C("sum_empty_axis", lambda x: jnp.sum(x, axis=0), normal(0, 3)),
    C("mean_size1", lambda x: jnp.mean(x, axis=1), normal(3, 1)),
    C("max_size1", lambda x: jnp.max(x, axis=-1), normal(3, 1)),
    C("median_size1", lambda x: jnp.median(x, axis=0), normal(1, 3)),
    C("var_ddof1_size2", lambda x: jnp.var(x, axis=0, ddof=1), distinct(2, 3)),
    C("sort_size1", lambda x: jnp.sort(x, axis=0), normal(1, 3)),
    C("cumprod_size1", lambda x: jnp.cumprod(x, axis=1), normal(3, 1)),
    C("softmax_size1", lambda x: nn.softmax(x, axis=0), normal(1, 3)),
    C("matmul_empty_inner", jnp.matmul, normal(2, 0), normal(0, 3)),
    C("concatenate_with_empty", lambda x, y: jnp.concatenate([x, y]), normal(0, 2),
      normal(3, 2)),
    C("pad_zero_width", lambda x: jnp.pad(x, ((0, 0), (1, 0)), mode="reflect"), normal(2, 3)),
    C("getitem_empty_slice", lambda x: x[2:2] + 1.0, normal(3, 2)),
    C("broadcast_size1", lambda x, y: x * y, normal(1, 3), normal(2, 1)),
    C("scalar_ops", lambda x, y: jnp.arctan2(x, y) * jnp.exp(x) / (1 + y * y), normal(),
      normal()),
]

ALL_CASES = (ELEMENTWISE_CASES + COMPLEX_CASES + EDGE_SHAPE_CASES + CREATION_CASES + METHOD_CASES
             + REDUCTION_CASES + MANIPULATION_CASES + INDEXING_CASES
             + SORTING_CASES + PRODUCT_CASES + NN_CASES + FFT_CASES)


def _args(case, rng):
    dt = np.float64 if case.x64 else np.float32
    return [make(rng, dt) for make in case.args]


def _differentiable(fn, args):
    """``fn`` as a function of its inexact arguments only, with the integer ones held fixed
    (check_grads' second order feeds the arguments back in as tangents, and an integer
    argument's tangent must be float0), every argument passed as an nbjax array (so cases
    may use methods such as ``.at``)."""
    inexact = [dtypes.is_inexact(np.asarray(a).dtype) for a in args]

    def f(*diff_args):
        it = iter(diff_args)
        return fn(*[jnp.asarray(next(it) if d else a) for a, d in zip(args, inexact)])
    return f, [a for a, d in zip(args, inexact) if d]


@pytest.mark.parametrize("case", [c.param() for c in ALL_CASES])
def test_check_grads(case, request):
    if case.x64:
        request.getfixturevalue("x64")
    tol = case.tol or (None if case.x64 else TOL32)
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    for _ in range(2):
        f, args = _differentiable(case.fn, _args(case, rng))
        check_grads(f, args, order=2, modes=("fwd", "rev"), atol=tol, rtol=tol,
                    eps=None if case.x64 else EPS32)


def _to_scalar(out):
    """A real scalar that depends on every inexact output (grad needs one)."""
    leaves = [o for o in nbjax.tree_util.tree_leaves(out) if dtypes.is_inexact(o.dtype)]
    return sum(jnp.real(jnp.sum(jnp.sin(o))) for o in leaves)


@pytest.mark.parametrize("case", [c.param() for c in ALL_CASES])
def test_grad_jaxpr_type_checks(case, request):
    """make_jaxpr(grad(f)) is a well-typed jaxpr (forward pass, then backward pass)."""
    if case.x64:
        request.getfixturevalue("x64")
    args = _args(case, np.random.default_rng(0))
    argnums = tuple(i for i, a in enumerate(args) if dtypes.is_inexact(np.asarray(a).dtype))
    closed = nbjax.make_jaxpr(nbjax.grad(lambda *a: _to_scalar(case.fn(*a)), argnums))(*args)
    check_jaxpr(closed.jaxpr)


def _float_outputs(fn):
    return lambda *a: [o for o in nbjax.tree_util.tree_leaves(fn(*a))
                       if dtypes.is_float(o.dtype)]


REAL_CASES = [c for c in ALL_CASES if not any(
    np.iscomplexobj(make(np.random.default_rng(0), np.float32)) for make in c.args)]


@pytest.mark.parametrize("case", [c.param() for c in REAL_CASES])
def test_jacfwd_equals_jacrev(case, request):
    """The same Jacobian by vmap of JVPs and by vmap of VJPs: exercises the batching rules
    of the tangent and cotangent computations (check_grads has checked the values)."""
    if case.x64:
        request.getfixturevalue("x64")
    f, args = _differentiable(case.fn, _args(case, np.random.default_rng(0)))
    argnums = tuple(range(len(args)))
    forward = nbjax.jacfwd(_float_outputs(f), argnums)(*args)
    reverse = nbjax.jacrev(_float_outputs(f), argnums)(*args)
    for a, b in zip(nbjax.tree_util.tree_leaves(forward), nbjax.tree_util.tree_leaves(reverse),
                    strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


# --- numerically careful cases (expected values derived by hand; JAX gives the same) -------

def _softmax_np(x):
    e = np.exp(x - np.max(x))
    return e / e.sum()


BIG = np.array([1000.0, 1001.0, 999.0], np.float32)


@pytest.mark.parametrize("shift", [1000.0, -1000.0, 0.0])
def test_logsumexp_and_softmax_derivatives_at_large_inputs(shift):
    """d logsumexp = softmax, d softmax = diag(s) - s s^T: finite however large the inputs,
    because the subtracted maximum carries no derivative."""
    x = (BIG - 1000.0 + shift).astype(np.float32)
    s = _softmax_np(np.float64(x) - shift)
    assert_close(nbjax.grad(nn.logsumexp)(x), s, rtol=1e-6)
    np.testing.assert_allclose(nbjax.hessian(nn.logsumexp)(x), np.diag(s) - np.outer(s, s),
                               rtol=1e-5, atol=1e-7)
    t = np.array([1.0, 0.0, 0.0], np.float32)
    _, softmax_t = nbjax.jvp(nn.softmax, (x,), (t,))
    np.testing.assert_allclose(softmax_t, s * t - s * np.dot(s, t), rtol=1e-5, atol=1e-7)
    _, pullback = nbjax.vjp(nn.log_softmax, x)
    np.testing.assert_allclose(pullback(t)[0], t - s * t.sum(), rtol=1e-5, atol=1e-7)


def test_softplus_and_logaddexp_derivatives():
    """softplus' = sigmoid, softplus'' = sigmoid (1 - sigmoid), finite at +-1000 (where
    exp overflows), and exactly 1/2 and 1/4 at 0: logaddexp's derivative at a tie x == y is
    (1/2, 1/2), not what differentiating max + log1p(exp(-|x - y|)) gives (0, 1)."""
    x = np.array([1000.0, 30.0, 0.0, -30.0, -1000.0], np.float32)
    sig = np.exp(-np.logaddexp(0, -np.float64(x)))  # sigmoid, without overflow
    d1 = nbjax.vmap(nbjax.grad(nn.softplus))(x)
    d2 = nbjax.vmap(nbjax.grad(nbjax.grad(nn.softplus)))(x)
    np.testing.assert_allclose(d1, sig, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(d2, sig * (1 - sig), rtol=1e-5, atol=1e-7)  # 1 - sig rounds
    np.testing.assert_allclose(nbjax.vmap(nbjax.grad(nn.log_sigmoid))(x), sig[::-1],
                               rtol=1e-6, atol=1e-30)  # sigmoid(-x) = 1 - sigmoid(x)
    for fn in (jnp.logaddexp, jnp.logaddexp2):
        gx, gy = nbjax.grad(fn, argnums=(0, 1))(np.float32(3.0), np.float32(3.0))
        assert_close([gx, gy], [0.5, 0.5], rtol=1e-4)
    # One argument -inf: all the weight on the other one, nothing NaN.
    gx, gy = nbjax.grad(jnp.logaddexp, argnums=(0, 1))(np.float32(-np.inf), np.float32(1.0))
    assert (float(gx), float(gy)) == (0.0, 1.0)


def test_sqrt_and_abs_at_zero():
    """sqrt'(0) = 1 / (2 sqrt(0)) = inf; JAX's abs' at 0 is 1 (the sign of +0 taken as +),
    and abs'' is 0."""
    assert float(nbjax.grad(jnp.sqrt)(np.float32(0.0))) == np.inf
    assert float(nbjax.grad(jnp.abs)(np.float32(0.0))) == 1.0
    assert float(nbjax.grad(nbjax.grad(jnp.abs))(np.float32(0.0))) == 0.0


def test_ties_split_the_derivative():
    """max/min over tied elements share the cotangent equally, as do maximum/minimum of two
    equal values; relu and relu6 have derivative 0 at their kinks (JAX's custom rules)."""
    np.testing.assert_array_equal(nbjax.grad(jnp.max)(np.array([1.0, 3.0, 3.0], np.float32)),
                                  [0, 0.5, 0.5])
    assert_close(
        nbjax.grad(jnp.min)(np.array([1.0, 1.0, 3.0, 1.0], np.float32)), [1 / 3, 1 / 3, 0, 1 / 3])
    x = np.array([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]], np.float32)
    np.testing.assert_array_equal(
        nbjax.grad(lambda x: jnp.sum(jnp.amax(x, axis=1, keepdims=True)))(x),
        [[0.5, 0.5, 0], [0, 0.5, 0.5]])
    np.testing.assert_array_equal(nbjax.grad(jnp.ptp)(np.array([3.0, 1.0, 3.0, 1.0],
                                                               np.float32)),
                                  [0.5, -0.5, 0.5, -0.5])
    for fn in (jnp.maximum, jnp.minimum):
        assert [float(g) for g in nbjax.grad(fn, argnums=(0, 1))(2.0, 2.0)] == [0.5, 0.5]
    kinks = np.array([0.0, 6.0], np.float32)
    np.testing.assert_array_equal(nbjax.vmap(nbjax.grad(nn.relu))(kinks), [0, 1])
    np.testing.assert_array_equal(nbjax.vmap(nbjax.grad(nn.relu6))(kinks), [0, 0])
    np.testing.assert_array_equal(nbjax.vmap(nbjax.grad(nn.hard_sigmoid))(
        np.array([-3.0, 0.0, 3.0], np.float32)), np.float32([0, 1 / 6, 0]))


def test_where_nan_trick():
    """Both branches of where are differentiated: the unselected log(0) = -inf contributes
    0 * inf = NaN. Making the unselected branch's input safe gives the exact 0."""
    def unsafe(x):
        return jnp.where(x > 0, jnp.log(x), 0.0)

    def safe(x):
        return jnp.where(x > 0, jnp.log(jnp.where(x > 0, x, 1.0)), 0.0)
    assert np.isnan(nbjax.grad(unsafe)(np.float32(0.0)))
    assert float(nbjax.grad(safe)(np.float32(0.0))) == 0.0
    assert float(nbjax.grad(safe)(np.float32(2.0))) == 0.5
    xs = np.array([0.0, 0.5, -1.0, 4.0], np.float32)
    np.testing.assert_array_equal(nbjax.grad(lambda x: jnp.sum(safe(x)))(xs),
                                  [0, 2, 0, 0.25])


def test_nan_reductions_give_zero_derivatives_at_nans():
    """nanvar/nanstd/nanmean ignore NaNs in the value and in the gradient (no NaN * 0)."""
    x = np.array([[1.0, np.nan, 3.0, 4.0], [np.nan, 2.0, 2.5, 0.5]], np.float32)
    ok = ~np.isnan(x)
    n = ok.sum(1, keepdims=True)
    mean = np.nanmean(x, 1, keepdims=True)
    assert_close(nbjax.grad(lambda x: jnp.sum(jnp.nanvar(x, axis=1)))(x),
                 np.where(ok, 2 * (x - mean) / n, 0), rtol=1e-6)
    assert_close(nbjax.grad(lambda x: jnp.sum(jnp.nanmean(x, axis=1)))(x),
                 np.where(ok, 1 / n, 0), rtol=1e-6)


def test_integer_inputs_get_float0_cotangents():
    """With allow_int, the gradient with respect to an integer input is a float0 zero of its
    shape; vjp gives float0 cotangents for integer inputs too."""
    float0 = dtypes.float0
    g = nbjax.grad(lambda i: jnp.sum(jnp.astype(i * 2, jnp.float32)), allow_int=True)(
        np.arange(3, dtype=np.int32))
    assert g.dtype == float0 and g.shape == (3,)
    x = np.arange(3.0, dtype=np.float32)
    gx, gi = nbjax.grad(lambda x, i: x[i] * 3.0, argnums=(0, 1), allow_int=True)(
        x, np.int32(1))
    np.testing.assert_array_equal(gx, [0, 3, 0])
    assert gi.dtype == float0 and gi.shape == ()
    _, pullback = nbjax.vjp(lambda x, i: x * i, x, np.array([1, 2, 3], np.int32))
    cx, ci = pullback(np.ones(3, np.float32))
    np.testing.assert_array_equal(cx, [1, 2, 3])
    assert ci.dtype == float0 and ci.shape == (3,)
    with pytest.raises(TypeError, match="allow_int"):
        nbjax.grad(lambda i: jnp.sum(i * 1.0))(np.arange(3, dtype=np.int32))


def test_scatter_multiply_with_repeated_indices_is_not_differentiable_in_updates():
    """As in JAX: with an index array that may repeat, the derivative of x.at[i].multiply(v)
    with respect to v is not implemented (with respect to x it is, see the table)."""
    x, v = np.ones((3, 2), np.float32), np.full((2, 2), 2.0, np.float32)
    with pytest.raises(NotImplementedError, match="unique_indices"):
        nbjax.grad(lambda v: jnp.sum(jnp.asarray(x).at[np.array([0, 2])].multiply(v)))(v)

"""Transformation rules of the element-wise primitives: vmap against a Python loop, JVPs and
VJPs against finite differences (to second order), and the values JAX gives at the points
where a derivative is a convention (ties of max/min, abs and sqrt at 0, the ``where`` trick).

Every expected value is derived here: from the loop, from finite differences, or by hand
from the formula JAX uses (checked once against JAX itself, which the tests do not import).
"""

import functools

import numpy as np
import pytest
import scipy.special

import nbjax
from nbjax import lax
from nbjax.core import check_jaxpr, dtypes
from nbjax import test_util
from nbjax.test_util import numerical_jvp
from helpers import assert_close, check_vmap, random_array, staged

rng = np.random.default_rng(0)

# Central differences in float32 lose ``ulp / eps`` to rounding: with the default eps = 1e-4
# that is ~2e-3 per element, the whole tolerance. A step of 1e-3 (the optimum is near
# ulp**(1/3) ~ 5e-3) keeps both rounding and truncation errors well inside it.
check_grads = functools.partial(test_util.check_grads, eps=1e-3)


def uniform(lo, hi, shape=(3,)):
    """float32 inputs on [lo, hi): the tables below name only the interval of each function."""
    return random_array(rng, shape, low=lo, high=hi)


def away_from_zero(lo, hi, shape=(3,)):
    """Magnitudes in [lo, hi) with random signs."""
    return uniform(lo, hi, shape) * rng.choice(np.float32([-1, 1]), shape)


# --- the unary functions and where they are smooth -----------------------------------------

UNARY = {
    "neg": (lax.neg, lambda: uniform(-2, 2)),
    "square": (lax.square, lambda: uniform(-2, 2)),
    "exp": (lax.exp, lambda: uniform(-2, 2)),
    "exp2": (lax.exp2, lambda: uniform(-2, 2)),
    "log": (lax.log, lambda: uniform(0.3, 3)),
    "log1p": (lax.log1p, lambda: uniform(-0.6, 2)),
    "expm1": (lax.expm1, lambda: uniform(-2, 2)),
    "tanh": (lax.tanh, lambda: uniform(-2, 2)),
    "logistic": (lax.logistic, lambda: uniform(-3, 3)),
    "sin": (lax.sin, lambda: uniform(-3, 3)),
    "cos": (lax.cos, lambda: uniform(-3, 3)),
    "tan": (lax.tan, lambda: uniform(-1.2, 1.2)),
    "asin": (lax.asin, lambda: uniform(-0.8, 0.8)),
    "acos": (lax.acos, lambda: uniform(-0.8, 0.8)),
    "atan": (lax.atan, lambda: uniform(-3, 3)),
    "sinh": (lax.sinh, lambda: uniform(-2, 2)),
    "cosh": (lax.cosh, lambda: uniform(-2, 2)),
    "asinh": (lax.asinh, lambda: uniform(-3, 3)),
    "acosh": (lax.acosh, lambda: uniform(1.3, 3)),
    "atanh": (lax.atanh, lambda: uniform(-0.8, 0.8)),
    "sqrt": (lax.sqrt, lambda: uniform(0.3, 3)),
    "rsqrt": (lax.rsqrt, lambda: uniform(0.3, 3)),
    "cbrt": (lax.cbrt, lambda: away_from_zero(0.3, 3)),
    "abs": (lax.abs, lambda: away_from_zero(0.2, 3)),
    "erf": (lax.erf, lambda: uniform(-2, 2)),
    "erfc": (lax.erfc, lambda: uniform(-2, 2)),
    "erf_inv": (lax.erf_inv, lambda: uniform(-0.8, 0.8)),
    "lgamma": (lax.lgamma, lambda: uniform(0.5, 4)),
    "digamma": (lax.digamma, lambda: uniform(0.5, 4)),
    "polygamma1": (functools.partial(lax.polygamma, 1.0), lambda: uniform(0.5, 4)),
    "integer_pow3": (lambda x: lax.integer_pow(x, 3), lambda: uniform(-2, 2)),
    "integer_pow-2": (lambda x: lax.integer_pow(x, -2), lambda: away_from_zero(0.5, 2)),
    "integer_pow1": (lambda x: lax.integer_pow(x, 1), lambda: uniform(-2, 2)),
    "integer_pow0": (lambda x: lax.integer_pow(x, 0), lambda: uniform(-2, 2)),
    "convert_to_complex": (lambda x: lax.real(lax.convert_element_type(x, np.complex64)),
                           lambda: uniform(-2, 2)),
}

# Piecewise constant: zero derivative away from the jumps.
STEPS = {
    "sign": lax.sign, "floor": lax.floor, "ceil": lax.ceil, "round": lax.round,
    "round_even": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_grads_to_second_order(name):
    f, sample = UNARY[name]
    for _ in range(2):
        check_grads(f, (sample(),), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_grad_jaxprs_type_check_and_evaluate_to_grad(name):
    f, sample = UNARY[name]
    x = sample()
    g = nbjax.grad(lambda v: f(v).sum())
    assert_close(staged(g, x), g(x), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(STEPS))
def test_piecewise_constant_functions_have_zero_derivatives(name):
    f = STEPS[name]
    # At least 0.1 from every integer and half-integer: no jump within a finite-difference step.
    x = rng.integers(-3, 3, 3).astype(np.float32) + uniform(0.1, 0.4)
    _, t = nbjax.jvp(f, (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(t, np.zeros(3, np.float32))
    np.testing.assert_array_equal(nbjax.grad(lambda v: (f(v) * v).sum())(x), f(x))
    check_grads(lambda v: f(v) * v, (x,), order=2)


def test_second_derivatives_of_the_gamma_family_chain_through_polygamma():
    x = np.float32([0.7, 1.5, 3.25])
    # d/dx digamma = polygamma(1), d/dx polygamma(m) = polygamma(m + 1), ...
    d3 = nbjax.vmap(nbjax.grad(nbjax.grad(nbjax.grad(lax.lgamma))))(x)
    assert_close(d3, lax.polygamma(np.float32(2), x), rtol=1e-5)
    check_grads(lambda v: lax.polygamma(np.float32(2), v), (x,), order=2)
    with pytest.raises(ValueError, match="respect to m"):
        nbjax.grad(lambda m: lax.polygamma(m, np.float32(2.0)))(np.float32(1.0))


def test_polygamma_values():
    """psi'(x) = sum_k 1/(x+k)^2, summed to convergence in float64 by hand; reflection below
    zero: psi'(x) + psi'(1-x) = pi^2 / sin^2(pi x)."""
    def trigamma(x):
        k = np.arange(200000.0)
        return np.sum(1 / (x + k) ** 2) + 1 / (x + 200000.0)  # + the tail's integral
    xs = [0.3, 1.0, 2.5, 11.0]
    got = lax.polygamma(np.float32(1), np.float32(xs))
    assert_close(got, [trigamma(x) for x in xs], rtol=2e-6)
    x = -2.3
    expected = np.pi ** 2 / np.sin(np.pi * x) ** 2 - trigamma(1 - x)
    assert_close(lax.polygamma(np.float32(1), np.float32(x)), expected, rtol=1e-5)
    # pi^2/6 = psi'(1); psi''(1) = -2 zeta(3); non-integer orders are NaN (as JAX).
    assert_close(lax.polygamma(np.float32([1, 2]), np.float32(1)),
                 [np.pi ** 2 / 6, -2 * 1.2020569031595942], rtol=1e-6)
    assert np.isnan(lax.polygamma(np.float32(1.5), np.float32(2)))


# --- binary functions, with broadcasting ---------------------------------------------------

def _rem_operands(shape_x, shape_y):
    """x = y * (n + u) with u in (0.2, 0.8): away from rem's jumps (at multiples of y)."""
    y = away_from_zero(0.5, 2, shape_y)
    n_u = rng.integers(-2, 3, shape_x) + uniform(0.2, 0.8, shape_x)
    return (y * n_u).astype(np.float32), y


BINARY = {
    "add": (lax.add, lambda sx, sy: (uniform(-2, 2, sx), uniform(-2, 2, sy))),
    "sub": (lax.sub, lambda sx, sy: (uniform(-2, 2, sx), uniform(-2, 2, sy))),
    "mul": (lax.mul, lambda sx, sy: (uniform(-2, 2, sx), uniform(-2, 2, sy))),
    "div": (lax.div, lambda sx, sy: (uniform(-2, 2, sx), away_from_zero(0.5, 2, sy))),
    "rem": (lax.rem, _rem_operands),
    "pow": (lax.pow, lambda sx, sy: (uniform(0.5, 2, sx), uniform(-2, 2, sy))),
    "atan2": (lax.atan2, lambda sx, sy: (away_from_zero(0.5, 2, sx), away_from_zero(0.5, 2, sy))),
    "max": (lax.max, lambda sx, sy: (uniform(-2, 2, sx), uniform(-2, 2, sy))),
    "min": (lax.min, lambda sx, sy: (uniform(-2, 2, sx), uniform(-2, 2, sy))),
    "complex_parts": (lambda x, y: lax.abs(lax.complex(x, y)),
                      lambda sx, sy: (away_from_zero(0.5, 2, sx), uniform(-2, 2, sy))),
}

SHAPES = [((3,), (3,)), ((), (2, 3)), ((2, 3), ()), ((2, 1), (1, 3))]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_grads_to_second_order_with_broadcasting(name, shapes):
    f, sample = BINARY[name]
    check_grads(f, sample(*shapes), order=2, modes=("fwd", "rev"))


def test_pow_with_an_integer_exponent_array():
    x = away_from_zero(0.5, 2, (5,))
    y = np.int32([-2, 0, 1, 2, 3])
    check_grads(lambda x: lax.pow(x, y), (x,), order=2)
    # d/dx x**0 is exactly 0 even at x = 0 (where y * x**(y-1) would be 0 * inf); the other
    # exponents give y * 0**(y-1): -2 * inf, 1 * 1, 2 * 0, 3 * 0.
    g = nbjax.grad(lambda x: lax.pow(x, y).sum())(np.zeros(5, np.float32))
    np.testing.assert_array_equal(g, [-np.inf, 0, 1, 0, 0])


def test_pow_at_zero_base_follows_jax():
    """JAX's formulas: d/dx x**y = y x**(y-1) (so 0 * inf = nan at x = 0, y = 0.0), and
    d/dy x**y = log(x) x**y with log(0) replaced by 0."""
    dx = nbjax.grad(lax.pow, argnums=0)
    dy = nbjax.grad(lax.pow, argnums=1)
    zero = np.float32(0)
    assert np.isnan(dx(zero, np.float32(0.0)))
    assert dx(zero, np.float32(1.0)) == 1.0 and dx(zero, np.float32(2.0)) == 0.0
    assert dx(zero, np.float32(0.5)) == np.inf
    assert dy(zero, np.float32(2.0)) == 0.0 and dy(zero, np.float32(0.0)) == 0.0
    assert np.isnan(dy(np.float32(-2.0), np.float32(2.0)))


def test_zeta_of_large_orders_ends_and_is_its_first_terms():
    """zeta(s, q) for s far above the 10 + s terms summed before the asymptotic tail: the
    terms fall below rounding after a few (1e30 terms were summed before: a hang)."""
    s = np.float32([60, 200, 1e6, 1e30, np.inf, 1e30, np.inf])
    q = np.float32([1, 1.5, 2, 2, 2, 0.5, 1])
    direct = [sum((qi + k) ** -si for k in range(4)) if si < 1e3 else
              (np.inf if qi < 1 else float(qi == 1)) for si, qi in zip(map(float, s),
                                                                      map(float, q))]
    with np.errstate(over="ignore"):
        assert_close(lax.zeta(s, q), np.float32(direct), rtol=1e-6)
    assert_close(lax.polygamma(np.float32(20), np.float32(0.7)),
                 -np.prod(np.arange(1.0, 21)) * sum((0.7 + k) ** -21.0 for k in range(60)),
                 rtol=1e-5)


def test_zeta_at_its_poles_and_outside_its_domain_as_xla():
    """+inf at s = 1 and where q = 0, -1, ... meets an even s (0^-s is +inf from both sides),
    NaN there for other s, for other s < 1, and for a negative q with a fractional s."""
    s = np.float32([0, -0.0, 0.5, -2, 0, 2, 1, 1, 2.5, 3, 1, 4, -3])
    q = np.float32([0, 0, 0, -1, 1, 0, 0, -3, 0, -2, 2, -1, -1.5])
    inf, nan = np.inf, np.nan
    want = np.float32([inf, inf, nan, inf, nan, inf, inf, inf, nan, nan, inf, inf, nan])
    np.testing.assert_array_equal(np.asarray(lax.zeta(s, q)), want)


def test_polygamma_of_huge_or_infinite_orders():
    """n! beyond float64 (n > 170) is +inf, an infinite order is not whole (NaN): no
    OverflowError from Python's integers, and no n-th derivative of cot built for n = 1e6."""
    m = np.float32([np.inf, 1e6, 200, 200, 1e6, 30])
    x = np.float32([1, 2, 0.5, -0.5, -0.5, -0.5])
    got = np.asarray(lax.polygamma(m, x))
    np.testing.assert_array_equal(got[:5], np.float32([np.nan, np.nan, -np.inf, np.nan,
                                                       np.nan]))
    assert_close(got[5], scipy.special.polygamma(30, -0.5), rtol=1e-5)


def test_integer_pow_takes_only_integers():
    assert float(lax.integer_pow(np.float32(2), np.int32(3))) == 8
    with pytest.raises(TypeError, match="integer"):
        lax.integer_pow(np.float32(2), 1.5)


def test_polygamma_grad_with_broadcast_order():
    x = uniform(0.5, 3, (2, 3))
    check_grads(lambda x: lax.polygamma(np.float32([[1.0], [2.0]]), x), (x,), order=2)


# --- complex numbers -----------------------------------------------------------------------

def _complex_sample(shape=(3,)):
    return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(0.3, 1, shape)).astype(np.complex64)


def check_vjp_pairing(f, args, rtol=2e-3):
    """JAX's convention for complex reverse mode: a cotangent ``c`` pairs with a tangent ``t``
    as ``Re(sum(c * t))``, and ``vjp`` is the transpose of ``jvp`` for that pairing:
    ``Re(<vjp(c), t>) == Re(<c, jvp(t)>)``, with ``jvp`` by finite differences."""
    out, pullback = nbjax.vjp(f, *args)
    tangents = tuple(random_array(rng, np.shape(a), np.asarray(a).dtype) for a in args)
    t_out = numerical_jvp(f, args, tangents, eps=1e-3)
    c = random_array(rng, np.shape(out), np.asarray(out).dtype)
    lhs = sum(np.real(np.sum(np.asarray(ct, np.complex128) * t))
              for ct, t in zip(pullback(c), tangents))
    rhs = np.real(np.sum(np.asarray(c, np.complex128) * t_out))
    np.testing.assert_allclose(lhs, rhs, rtol=rtol, atol=rtol)


HOLOMORPHIC = {
    "exp": lax.exp, "log": lax.log, "sin": lax.sin, "cos": lax.cos, "tanh": lax.tanh,
    "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "logistic": lax.logistic, "atan": lax.atan,
    "square": lax.square, "square_as_pow": lambda z: lax.integer_pow(z, 2),
    "recip": lambda z: lax.div(1 + 0j, z),
    "mul": lambda z: lax.mul(z, z + 1j), "pow": lambda z: lax.pow(z, z),
}
NON_HOLOMORPHIC = {
    "real": lax.real, "imag": lax.imag, "conj": lax.conj, "abs": lax.abs,
    "abs_sq": lambda z: lax.mul(z, lax.conj(z)),
    "to_real": lambda z: lax.convert_element_type(z * 2, np.float32),
}


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # to_real, on purpose
@pytest.mark.parametrize("name", sorted(HOLOMORPHIC) + sorted(NON_HOLOMORPHIC))
def test_complex_derivatives(name):
    f = HOLOMORPHIC.get(name) or NON_HOLOMORPHIC[name]
    z = _complex_sample()
    check_grads(f, (z,), order=2, modes=("fwd",))
    check_vjp_pairing(f, (z,))
    t = random_array(rng, np.shape(z), np.asarray(z).dtype)
    check_vjp_pairing(lambda z: nbjax.jvp(f, (z,), (t,))[1], (z,))  # reverse of forward
    if name in HOLOMORPHIC:  # element-wise: the jacobian is diagonal, its transpose itself
        c = random_array(rng, np.shape(z), np.asarray(z).dtype)
        assert_close(nbjax.vjp(f, z)[1](c)[0], nbjax.jvp(f, (z,), (c,))[1],
                     rtol=1e-5)


def test_complex_from_real_parts_and_conj_of_real():
    x, y = uniform(-2, 2), uniform(-2, 2)
    for f, args in [(lax.complex, (x, y)), (lambda x: lax.complex(x, 2.0), (x,)),
                    (lax.conj, (x,)), (lambda x: lax.convert_element_type(x, np.complex64), (x,))]:
        check_grads(f, args, order=2, modes=("fwd",))
        check_vjp_pairing(f, args)


def test_complex_transposes_match_jax():
    """Values of JAX's transposes, derived from the Re(c * t) pairing."""
    z, c = np.complex64(0.3 + 0.7j), np.complex64(1.1 - 0.4j)
    assert nbjax.vjp(lax.real, z)[1](np.float32(1.5))[0] == 1.5 + 0j
    assert nbjax.vjp(lax.imag, z)[1](np.float32(1.5))[0] == -1.5j
    assert nbjax.vjp(lax.conj, z)[1](c)[0] == np.conj(c)
    assert nbjax.vjp(lax.conj, np.float32(2))[1](c)[0] == np.float32(c.real)
    ct_x, ct_y = nbjax.vjp(lax.complex, np.float32(1), np.float32(2))[1](c)
    assert (ct_x, ct_y) == (np.float32(1.1), np.float32(0.4))
    # d|z| = Re(conj(z) dz) / |z|, so the cotangent is c conj(z) / |z|.
    assert_close(nbjax.vjp(lax.abs, z)[1](np.float32(1.3))[0],
                 1.3 * np.conj(z) / abs(z), rtol=1e-6)
    # The derivative of |z| at 0 is taken as 0, as JAX does.
    assert nbjax.jvp(lax.abs, (np.complex64(0),), (np.complex64(1),))[1] == 0


# --- conventions at special points, as JAX --------------------------------------------------

def test_max_min_split_ties_evenly():
    for op in (lax.max, lax.min):
        gx, gy = nbjax.grad(op, argnums=(0, 1))(np.float32(1.0), np.float32(1.0))
        assert (gx, gy) == (0.5, 0.5)
        x, y = np.float32([1, 2, 3]), np.float32([1, 0, 5])
        gx, gy = nbjax.grad(lambda x, y: op(x, y).sum(), argnums=(0, 1))(x, y)
        picks_x = (x > y) if op is lax.max else (x < y)
        np.testing.assert_array_equal(gx, np.where(x == y, 0.5, picks_x * 1.0))
        np.testing.assert_array_equal(gy, np.where(x == y, 0.5, ~picks_x * 1.0))
    # A scalar gets all of each element where it wins and half of each tie: 1 + 0.5 + 0 + 0.5.
    g = nbjax.grad(lambda s: lax.max(s, np.float32([0, 1, 2, 1])).sum())(np.float32(1))
    assert g == 2.0


def test_abs_and_sqrt_at_zero():
    assert nbjax.grad(lax.abs)(np.float32(0.0)) == 1.0  # JAX: select(x >= 0, g, -g)
    assert nbjax.grad(lax.abs)(np.float32(-2.0)) == -1.0
    assert nbjax.grad(lax.sqrt)(np.float32(0.0)) == np.inf
    assert nbjax.grad(lax.rsqrt)(np.float32(4.0)) == -0.0625


def test_where_trick_nan_and_its_safe_version():
    x = np.float32([-1.0, 2.0, 0.0])
    zeros = np.zeros(3, np.float32)

    def unsafe(x):  # sqrt(-1) is nan, and nan * 0 = nan in the backward pass
        return lax.select_n(x > 0, zeros, lax.sqrt(x)).sum()

    def safe(x):
        return lax.select_n(x > 0, zeros, lax.sqrt(lax.select_n(x > 0, zeros + 1, x))).sum()

    g = nbjax.grad(unsafe)(x)
    assert np.isnan(g[0]) and np.isnan(g[2])
    assert_close(g[1], 0.5 / np.sqrt(2), rtol=1e-6)
    assert_close(nbjax.grad(safe)(x), [0, 0.5 / np.sqrt(2), 0], rtol=1e-6)


def test_seed_example_is_exact_and_stages_like_jax():
    import nbjax.numpy as jnp
    f = nbjax.grad(lambda x: jnp.sum(x ** 3))
    x = jnp.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(f(x), [3.0, 12.0, 27.0, 48.0])
    closed = nbjax.make_jaxpr(f)(x)
    check_jaxpr(closed.jaxpr)
    eqns = [(e.primitive.name, e.params) for e in closed.jaxpr.eqns]
    assert ("integer_pow", {"y": 2}) in eqns  # 3 * x**2, the power again an integer_pow
    assert [name for name, _ in eqns].count("mul") == 2


def test_instantiated_zeros_stage_as_a_broadcast_literal():
    closed = nbjax.make_jaxpr(lambda x: nbjax.jvp(lambda x: lax.add(x, 2.0), (x,),
                                                  (np.zeros(3, np.float32),)))(uniform(0, 1))
    check_jaxpr(closed.jaxpr)
    closed = nbjax.make_jaxpr(lambda x: nbjax.jvp(lax.floor, (x,), (x,)))(uniform(0, 1))
    zeros = [e for e in closed.jaxpr.eqns if e.primitive.name == "broadcast_in_dim"]
    assert len(zeros) == 1 and zeros[0].invars[0].val == 0  # a literal, not a constvar
    assert not closed.jaxpr.constvars


# --- zero and float0 tangents --------------------------------------------------------------

def float0_zeros(x):
    return np.zeros(np.shape(x), dtypes.float0)


INTEGER_OPS = {
    "population_count": lambda x, y: lax.population_count(x),
    "clz": lambda x, y: lax.clz(x),
    "not": lambda x, y: lax.bitwise_not(x),
    "and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor,
    "shift_left": lax.shift_left, "shift_right_logical": lax.shift_right_logical,
    "shift_right_arithmetic": lax.shift_right_arithmetic,
    "eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge,
}


@pytest.mark.parametrize("name", sorted(INTEGER_OPS))
def test_integer_and_bool_results_have_float0_tangents(name):
    f = INTEGER_OPS[name]
    x, y = np.int32([5, -3, 7]), np.int32([1, 2, 3])
    out, t = nbjax.jvp(f, (x, y), (float0_zeros(x), float0_zeros(y)))
    assert t.dtype == dtypes.float0 and t.shape == (3,)
    np.testing.assert_array_equal(out, f(x, y))


def test_float_inputs_to_integer_results():
    x, y = uniform(-2, 2), uniform(-2, 2)
    for f in (lax.lt, lax.eq, lambda x, y: lax.is_finite(x),
              lambda x, y: lax.convert_element_type(x, np.int32),
              lambda x, y: lax.bitcast_convert_type(x, np.int32)):
        _, t = nbjax.jvp(f, (x, y), (x, y))
        assert t.dtype == dtypes.float0
    with pytest.raises(NotImplementedError, match="nextafter"):  # (as JAX: not a zero)
        nbjax.jvp(lambda x: lax.nextafter(x, x + 1), (x,), (x,))
    # Through an integer conversion the derivative is zero, not an error.
    g = nbjax.grad(lambda x: (lax.convert_element_type(lax.convert_element_type(x, np.int32),
                                                       np.float32) * x).sum())(x)
    np.testing.assert_array_equal(g, np.trunc(x))
    # From integers the tangent is a zero of the new (inexact) type.
    i = np.int32([1, 2])
    _, t = nbjax.jvp(lambda i: lax.convert_element_type(i, np.float32), (i,), (float0_zeros(i),))
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t, [0, 0])
    g = nbjax.grad(lambda x, i: lax.mul(x, lax.convert_element_type(i, np.float32)),
                   argnums=1, allow_int=True)(np.float32(2), np.int32(3))
    assert g.dtype == dtypes.float0


# --- select_n and clamp ---------------------------------------------------------------------

def test_select_n_grads():
    a, b, c = uniform(-2, 2), uniform(-2, 2), uniform(-2, 2)
    pred, which = np.array([True, False, True]), np.int32([2, 0, 1])
    check_grads(lambda a, b: lax.select_n(pred, a, b), (a, b), order=2)
    check_grads(lambda a, b, c: lax.select_n(which, a, b, c), (a, b, c), order=2)
    check_grads(lambda a, b: lax.select_n(np.True_, a * b, b), (a, b), order=2)
    g = nbjax.grad(lambda a, b, c: lax.select_n(which, a, b, c).sum(), argnums=(0, 1, 2))(a, b, c)
    np.testing.assert_array_equal(np.stack(g), [[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    g = nbjax.grad(lambda b: lax.select_n(pred, a, b).sum())(b)
    np.testing.assert_array_equal(g, pred * 1.0)
    closed = nbjax.make_jaxpr(nbjax.grad(lambda a, b: lax.select_n(pred, a, b).sum()))(a, b)
    check_jaxpr(closed.jaxpr)


CLAMP_CASES = {
    "scalar_bounds": lambda: (np.float32(-0.5), uniform(-2, 2, (5,)), np.float32(0.7)),
    "array_bounds": lambda: (uniform(-2, -0.5, (5,)), uniform(-2, 2, (5,)), uniform(0.5, 2, (5,))),
    "array_lo": lambda: (uniform(-2, 0, (5,)), uniform(-2, 2, (5,)), np.float32(1.0)),
}


@pytest.mark.parametrize("case", sorted(CLAMP_CASES))
def test_clamp_grads(case):
    lo, x, hi = CLAMP_CASES[case]()
    check_grads(lax.clamp, (lo, x, hi), order=2)


def test_clamp_tangent_goes_to_the_chosen_operand_and_ties_to_none():
    lo, x, hi = np.float32(0), np.float32([-1, 0, 0.5, 1, 2]), np.float32(1)
    glo, gx, ghi = nbjax.grad(lambda *a: lax.clamp(*a).sum(), argnums=(0, 1, 2))(lo, x, hi)
    np.testing.assert_array_equal(gx, [0, 0, 1, 0, 0])
    assert (glo, ghi) == (1.0, 1.0)  # x = -1 below lo, x = 2 above hi; the ties get nothing


# --- vmap against a Python loop --------------------------------------------------------------

def batched(per_example_shape, axis, size=4, sample=lambda s: uniform(0.5, 1.5, s)):
    """An array of per-example shape with a batch axis of ``size`` at ``axis``."""
    if axis is None:
        return sample(per_example_shape)
    x = sample((size,) + per_example_shape)
    return np.moveaxis(x, 0, axis)


# (per-example shapes of the operands, in_axes): rank-0 operands mixed with arrays.
BINARY_VMAP = [
    (((2, 3), (2, 3)), (0, 0)), (((2, 3), (2, 3)), (1, -1)), (((2, 3), (2, 3)), (None, 1)),
    (((2, 3), ()), (0, None)), (((2, 3), ()), (2, 0)), (((), (2, 3)), (0, -1)),
    (((), ()), (0, None)), (((2, 1), (1, 3)), (1, 0)), (((2, 3), (2, 3)), (-1, None)),
]
UNARY_VMAP_FUNCTIONS = sorted(UNARY) + sorted(STEPS)


@pytest.mark.parametrize("name", UNARY_VMAP_FUNCTIONS)
def test_vmap_unary(name):
    f = UNARY[name][0] if name in UNARY else STEPS[name]
    for axis in (0, 1, -1):
        check_vmap(f, (batched((2, 3), axis, sample=lambda s: uniform(0.3, 0.8, s)),), (axis,))
    check_vmap(f, (batched((), 0, sample=lambda s: uniform(0.3, 0.8, s)),), (0,))


BINARY_VMAP_FUNCTIONS = {
    **{k: BINARY[k][0] for k in BINARY}, "nextafter": lax.nextafter,
    "polygamma": lambda m, x: lax.polygamma(lax.floor(m * 3), x),
    "lt": lax.lt, "eq": lax.eq, "complex": lax.complex,
}


@pytest.mark.parametrize("shapes,in_axes", BINARY_VMAP, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY_VMAP_FUNCTIONS))
def test_vmap_binary(name, shapes, in_axes):
    f = BINARY_VMAP_FUNCTIONS[name]
    args = [batched(s, ax) for s, ax in zip(shapes, in_axes)]
    check_vmap(f, args, in_axes)


INT_SAMPLE = functools.partial(lambda s: rng.integers(-50, 50, s).astype(np.int32))


@pytest.mark.parametrize("name", sorted(INTEGER_OPS))
def test_vmap_integer_ops(name):
    f = INTEGER_OPS[name]
    if name.startswith("shift"):
        sample_y = lambda s: rng.integers(0, 40, s).astype(np.int32)
    else:
        sample_y = INT_SAMPLE
    for (sx, sy), in_axes in BINARY_VMAP[:6]:
        x = batched(sx, in_axes[0], sample=INT_SAMPLE)
        y = batched(sy, in_axes[1], sample=sample_y)
        check_vmap(f, (x, y), in_axes)


def test_vmap_out_axes_and_nesting():
    x, y = batched((2, 3), 1), batched((2, 3), 0)
    check_vmap(lax.mul, (x, y), (1, 0), out_axes=1)
    check_vmap(lax.atan2, (x, y), (1, 0), out_axes=-1)
    xs, ys = uniform(0.5, 1, (3, 4, 2)), uniform(0.5, 1, (4, 2))
    got = nbjax.vmap(nbjax.vmap(lax.pow, (0, None)), (1, 0))(xs, ys)
    assert got.shape == (4, 3, 2)
    expected = np.stack([np.stack([np.power(xs[i, j], ys[j]) for i in range(3)])
                         for j in range(4)])
    assert_close(got, expected, rtol=1e-6)


def test_vmap_pow_with_integer_exponents_and_integer_pow():
    x = uniform(0.5, 2, (4, 3))
    n = rng.integers(-2, 4, (3,)).astype(np.int32)
    check_vmap(lax.pow, (x, n), (0, None))
    check_vmap(lax.pow, (x, n), (1, 0))
    check_vmap(lambda x: lax.integer_pow(x, 3), (x,), (1,))


SELECT_VMAP = [  # (per-example shapes of which and the cases, in_axes)
    (((3,), (3,), (3,)), (0, 0, 0)), (((3,), (3,), (3,)), (None, 1, 0)),
    (((), (3,), (3,)), (0, None, 1)), (((), (3,), (3,)), (None, 0, 0)),
    (((), (3,), (3,)), (None, 0, 1)), (((), (), ()), (0, None, None)),
    (((2, 3), (2, 3), (2, 3)), (2, None, -1)), (((), (2, 3), (2, 3)), (0, 1, None)),
    (((), (3,), (3,)), (0, None, None)),
]


@pytest.mark.parametrize("shapes,in_axes", SELECT_VMAP, ids=str)
def test_vmap_select_n(shapes, in_axes):
    bools = lambda s: rng.random(s) > 0.5
    which = batched(shapes[0], in_axes[0], sample=bools)
    cases = [batched(s, ax) for s, ax in zip(shapes[1:], in_axes[1:])]
    check_vmap(lax.select_n, (which, *cases), in_axes)
    three = lambda s: rng.integers(0, 3, s).astype(np.int32)
    which = batched(shapes[0], in_axes[0], sample=three)
    check_vmap(lax.select_n, (which, *cases, cases[0]), in_axes + (in_axes[1],))


CLAMP_VMAP = [  # (per-example shapes of lo, x, hi; in_axes)
    (((), (3,), ()), (None, 0, None)), (((), (3,), ()), (0, 1, None)),
    (((3,), (3,), ()), (0, None, None)), (((), (), ()), (0, None, 0)),
    (((2, 3), (2, 3), (2, 3)), (1, 2, None)), (((), (2, 3), (2, 3)), (0, None, -1)),
]


@pytest.mark.parametrize("shapes,in_axes", CLAMP_VMAP, ids=str)
def test_vmap_clamp(shapes, in_axes):
    samples = [lambda s: uniform(-1, 0, s), lambda s: uniform(-2, 2, s),
               lambda s: uniform(0, 1, s)]
    args = [batched(s, ax, sample=sample) for s, ax, sample in zip(shapes, in_axes, samples)]
    check_vmap(lax.clamp, args, in_axes)


def test_vmap_conversions():
    x = batched((2, 3), 1, sample=lambda s: uniform(-300, 300, s))
    for dtype in (np.int32, np.uint8, np.bool_, np.complex64, np.float16):
        check_vmap(lambda v: lax.convert_element_type(v, dtype), (x,), (1,))
    for axis in (0, 1, -1):  # narrowing adds a trailing axis, widening consumes one
        check_vmap(lambda v: lax.bitcast_convert_type(v, np.uint8), (x,), (axis,))
        narrow = batched((3, 2), axis,
                         sample=lambda s: rng.integers(0, 2 ** 16, s).astype(np.uint16))
        check_vmap(lambda v: lax.bitcast_convert_type(v, np.float32), (narrow,), (axis,))
    z = batched((3,), 0, sample=_complex_sample)
    for f in (lax.real, lax.imag, lax.conj, lambda v: lax.abs(v)):
        check_vmap(f, (z,), (0,))


def test_vmap_of_grad_and_grad_of_vmap():
    x = uniform(0.5, 2, (4, 3))
    f = lambda x: lax.mul(lax.sin(x), lax.max(x, 1.0)).sum()
    per_example = [nbjax.grad(f)(row) for row in x]
    assert_close(nbjax.vmap(nbjax.grad(f))(x), per_example, rtol=1e-6)
    assert_close(nbjax.grad(lambda x: nbjax.vmap(f)(x).sum())(x), per_example,
                 rtol=1e-6)


def test_batched_jaxprs_move_no_axes_needlessly():
    x, y = batched((2, 3), 1), batched((2, 3), 1)
    closed = nbjax.make_jaxpr(nbjax.vmap(lambda x, y: lax.sin(lax.add(x, y) * 2.0),
                                         (1, 1), 1))(x, y)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["add", "mul", "sin"]
    pred = batched((2, 3), 2, sample=lambda s: rng.random(s) > 0.5)
    closed = nbjax.make_jaxpr(nbjax.vmap(lax.select_n, (2, 2, 2), 2))(
        pred, batched((2, 3), 2), batched((2, 3), 2))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["select_n"]
    closed = nbjax.make_jaxpr(nbjax.vmap(lax.clamp, (None, 1, None), 1))(
        np.float32(0), x, np.float32(1))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["clamp"]
    # An unbatched array operand gets a size-1 axis, not a copy per batch member.
    closed = nbjax.make_jaxpr(nbjax.vmap(lax.mul, (1, None)))(x, uniform(0, 1, (2, 3)))
    names = [e.primitive.name for e in closed.jaxpr.eqns]
    assert names.count("transpose") <= 1 and "mul" in names
    check_jaxpr(closed.jaxpr)


# --- reverse mode through broadcasting -----------------------------------------------------

def test_transposes_sum_cotangents_back_to_operand_shapes():
    x, y = uniform(-1, 1, (2, 1)), uniform(-1, 1, (1, 3))
    for op, dx, dy in [(lax.add, 1, 1), (lax.sub, 1, -1)]:
        gx, gy = nbjax.grad(lambda x, y: op(x, y).sum(), argnums=(0, 1))(x, y)
        assert_close(gx, np.full((2, 1), 3.0 * dx))
        assert_close(gy, np.full((1, 3), 2.0 * dy))
    gx, gy = nbjax.grad(lambda x, y: lax.mul(x, y).sum(), argnums=(0, 1))(x, y)
    assert_close(gx, np.broadcast_to(y.sum(), (2, 1)), rtol=1e-6)
    assert_close(gy, np.broadcast_to(x.sum(), (1, 3)), rtol=1e-6)
    s = np.float32(1.5)
    g = nbjax.grad(lambda s, a: lax.div(a, s).sum())(s, uniform(1, 2, (2, 3)))
    assert np.shape(g) == ()
    closed = nbjax.make_jaxpr(nbjax.grad(lambda x, y: lax.mul(x, y).sum(), argnums=(0, 1)))(x, y)
    check_jaxpr(closed.jaxpr)

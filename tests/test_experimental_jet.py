"""nbjax.experimental.jet: Taylor-mode differentiation.

Every rule is checked against nested ``jvp``: term k of ``jet(f, (x,), ([x1..xK],))`` is
the k-th derivative at t = 0 of ``f`` along the path ``x(t) = x + sum_k xk t^k / k!``, which
K nested jvps in ``t`` compute independently (the path's terms are all random, so every part
of Faa di Bruno's formula is exercised, not only the straight line). Then compositions,
pytrees, the transformations around and inside jet, the errors, and JAX's jet itself.
"""

import math

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.experimental.jet import jet, jet_rules, zero_series, zero_term

rng = np.random.RandomState(0)
ORDER = 4
TOL = {"float32": 1e-4, "float64": 1e-9}


# --- the reference: nested jvp along the path ----------------------------------------------

def _one_more_derivative(h):
    """``t -> [g, g', ..., g^(m)]`` to ``t -> [g, ..., g^(m+1)]``: jvp in t gives the
    derivative of every entry."""
    def h_next(t):
        values, tangents = nbjax.jvp(h, (t,), (jnp.ones_like(t),))
        return values[:1] + tangents
    return h_next


def derivatives_along_path(fun, primals, series, order):
    """``fun`` at the path's start and its first ``order`` derivatives along it, by nested
    jvp (2^order evaluations: a reference only)."""
    dtype = jnp.result_type(*primals)

    def along(t):
        return fun(*[p + sum(s * t ** k / math.factorial(k) for k, s in enumerate(terms, 1))
                     for p, terms in zip(primals, series)])

    def derivatives(t):
        return [along(t)]

    for _ in range(order):
        derivatives = _one_more_derivative(derivatives)
    return derivatives(jnp.zeros((), dtype))


def assert_close(got, want):
    """Equal to the precision of their dtype, relative to the magnitude of ``want``."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    tol = TOL["float64" if got.dtype in (np.float64, np.complex128) else "float32"]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(np.abs(want).max(), 1e-3))


def check_jet(fun, primals, dtype, order=ORDER):
    """jet's output equals nested jvp's on a random path through ``primals``."""
    series = [[rng.normal(size=np.shape(p)).astype(dtype) * 0.5 for _ in range(order)]
              for p in primals]
    out, terms = jet(fun, tuple(primals), tuple(series))
    want = derivatives_along_path(fun, primals, series, order)
    assert len(terms) == order
    for got, expected in zip([out] + terms, want):
        assert_close(got, expected)


def uniform(lo, hi, shape=(2, 3)):
    return lambda dtype: rng.uniform(lo, hi, size=shape).astype(dtype)


def away_from_zero(dtype, shape=(2, 3)):
    return (rng.uniform(0.3, 2.0, size=shape) * rng.choice([-1, 1], size=shape)).astype(dtype)


ANY = uniform(-2, 2)
POSITIVE = uniform(0.5, 2)
UNIT = uniform(-0.8, 0.8)
INDEX = np.array([2, 0, 2], np.int32)


# (name, function of the moving arguments, a sampler per argument)
CASES = [
    # zero and linear rules
    ("neg", lax.neg, [ANY]),
    ("add_sub", lambda x, y: (x + 2.0) - y + x, [ANY, ANY]),
    ("add_scalar_moving", lambda x, y: x + y, [uniform(-1, 1, ()), ANY]),
    ("zero_rules", lambda x: x * (jnp.sign(x) + jnp.floor(x) + jnp.ceil(x) + jnp.round(x)
                                  + lax.stop_gradient(x)), [ANY]),
    ("convert", lambda x: x.astype(jnp.complex64).real * 2.0, [ANY]),
    ("complex_parts", lambda x, y: lax.imag(lax.complex(x, y) * lax.conj(lax.complex(y, x))),
     [ANY, ANY]),
    ("fft", lambda x: jnp.abs(jnp.fft.fft(x * x)), [uniform(0.5, 2, (5,))]),
    ("shapes", lambda x: jnp.transpose(x).reshape(6)[None, :].squeeze(0)[1:5:2], [ANY]),
    ("broadcast_rev_tile", lambda x: lax.rev(jnp.tile(x, (2, 1)), (0,)) + x[0], [ANY]),
    ("pad_concatenate", lambda x, c: jnp.concatenate(
        [jnp.pad(x, 1, constant_values=c), jnp.pad(x * x, ((0, 0), (2, 0)))], axis=0),
     [ANY, uniform(-1, 1, ())]),
    ("split", lambda x: jnp.split(x, 3, axis=1)[2] * jnp.split(x, 3, axis=1)[0], [ANY]),
    ("dynamic_slice", lambda x: lax.dynamic_slice(x, (1, 1), (1, 2)), [ANY]),
    ("dynamic_update_slice", lambda x, u: lax.dynamic_update_slice(x, u, (1, 1)),
     [ANY, uniform(-1, 1, (1, 2))]),
    ("gather_scatter", lambda x, u: x[:, INDEX] * x.at[0, INDEX].add(u)[:, :3]
     + x.at[1, INDEX[:2]].set(u[:2])[:, :3], [ANY, uniform(-1, 1, (3,))]),
    ("select", lambda x, y: jnp.where(x > 0, x, y * y), [ANY, ANY]),
    ("reductions", lambda x: jnp.sum(x * x, axis=0) + jnp.max(x, axis=1).sum()
     + jnp.min(x), [ANY]),
    ("cumulative", lambda x: lax.cumsum(x, 1) * lax.cumprod(x, 1, reverse=True)
     + lax.cummax(x, 0) - lax.cummin(x, 1), [ANY]),
    ("checkpoint_name", lambda x: nbjax.ad_checkpoint.checkpoint_name(x * x, "h"), [ANY]),
    ("grad_inside", nbjax.grad(lambda x: jnp.sum(jnp.sin(x) * x ** 3 / (1.0 + x * x))), [ANY]),
    # bilinear
    ("mul", lambda x, y: x * y * 3.0, [ANY, ANY]),
    ("dot", lambda x, y: x @ y.T @ x, [ANY, ANY]),
    ("conv", lambda x, w: lax.conv(x[None, None], w[None, None], (1, 1), "SAME"),
     [ANY, uniform(-1, 1, (2, 2))]),
    ("fma", lambda x, y: lax.fma(x, y, x * x), [ANY, ANY]),
    # element-wise nonlinear
    ("sin", lax.sin, [ANY]), ("cos", lax.cos, [ANY]), ("tan", lax.tan, [UNIT]),
    ("sinh", lax.sinh, [ANY]), ("cosh", lax.cosh, [ANY]), ("tanh", lax.tanh, [ANY]),
    ("exp", lax.exp, [ANY]), ("exp2", lax.exp2, [ANY]), ("expm1", lax.expm1, [ANY]),
    ("log", lax.log, [POSITIVE]), ("log1p", lax.log1p, [uniform(-0.5, 2)]),
    ("sqrt", lax.sqrt, [POSITIVE]), ("rsqrt", lax.rsqrt, [POSITIVE]),
    ("cbrt", lax.cbrt, [away_from_zero]), ("square", lax.square, [ANY]),
    ("logistic", lax.logistic, [ANY]), ("erf", lax.erf, [ANY]), ("erfc", lax.erfc, [ANY]),
    ("erf_inv", lax.erf_inv, [UNIT]),
    ("asin", lax.asin, [UNIT]), ("acos", lax.acos, [UNIT]), ("atan", lax.atan, [ANY]),
    ("asinh", lax.asinh, [ANY]), ("acosh", lax.acosh, [uniform(1.5, 3)]),
    ("atanh", lax.atanh, [UNIT]),
    ("abs", lax.abs, [away_from_zero]),
    ("abs_complex", lambda x, y: lax.abs(lax.complex(x, y)), [away_from_zero, ANY]),
    ("integer_pow", lambda x: lax.integer_pow(x, 5) + lax.integer_pow(x, 1)
     + lax.integer_pow(x, 0), [ANY]),
    ("integer_pow_negative", lambda x: lax.integer_pow(x, -3), [away_from_zero]),
    ("pow_constant_exponent", lambda x: lax.pow(x, 2.5) + lax.pow(-x, 2.0), [POSITIVE]),
    ("pow_constant_base", lambda y: lax.pow(1.7, y), [ANY]),
    ("pow", lax.pow, [POSITIVE, ANY]),
    ("div", lambda x, y: x / y + 1.0 / y + x / 3.0, [ANY, away_from_zero]),
    ("atan2", lax.atan2, [ANY, away_from_zero]),
    ("max_min", lambda x, y: jnp.maximum(x, y) * jnp.minimum(x, 0.5) + jnp.maximum(0.0, y),
     [ANY, ANY]),
    ("clamp", lambda lo, x: lax.clamp(lo, x, 1.0), [uniform(-1, 0, ()), ANY]),
    ("rem", lambda x, y: lax.rem(x, y) + lax.rem(x, 0.7), [uniform(-3, 3), uniform(0.5, 1)]),
    ("complex", lambda x, y: (lambda z: jnp.exp(z) * jnp.sin(z) / z + jnp.log(z) * jnp.sqrt(z)
                              + jnp.tanh(z) ** 3)(lax.complex(x, y)), [POSITIVE, ANY]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fun,samplers", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_nested_jvp(request, name, fun, samplers, dtype):
    if dtype == "float64":
        request.getfixturevalue("x64")
    check_jet(fun, [sample(dtype) for sample in samplers], dtype)


def test_every_rule_is_exercised():
    """Each primitive in the rule table appears in some case's jaxpr (so a rule cannot go
    untested)."""
    seen = set()

    def primitives(jaxpr):
        for eqn in jaxpr.eqns:
            seen.add(eqn.primitive)
            for sub in eqn.params.values():
                if hasattr(sub, "jaxpr"):
                    primitives(sub.jaxpr)

    for _, fun, samplers in CASES:
        primitives(nbjax.make_jaxpr(fun)(*[s("float32") for s in samplers]).jaxpr)
    missing = {p.name for p in jet_rules} - {p.name for p in seen}
    assert missing <= {"bitcast_convert_type", "scatter-sub"}, missing


# --- compositions --------------------------------------------------------------------------

def mlp(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return nbjax.nn.logsumexp(x @ w + b) + jnp.sum(nbjax.nn.softplus(x))


def test_mlp_along_input(x64):
    shapes = [(4, 8), (8, 8), (8, 3)]
    params = [(rng.normal(size=s) / np.sqrt(s[0]), rng.normal(size=s[1])) for s in shapes]
    check_jet(lambda x: mlp(params, x), [rng.normal(size=(5, 4))], "float64")


def test_softmax_and_normalisation():
    check_jet(lambda x: nbjax.nn.softmax(x, axis=-1) * nbjax.nn.gelu(x),
              [ANY("float32")], "float32")
    check_jet(lambda x: x / jnp.linalg.norm(x), [POSITIVE("float32")], "float32")


def test_polynomial_is_exact():
    """A cubic along a straight line: its derivatives by hand, and zero beyond the third."""
    x, v = np.float32(0.7), np.float32(1.3)
    out, terms = jet(lambda x: 2 * x ** 3 - x ** 2 + 5 * x - 1, (x,), ([v, 0.0, 0.0, 0.0],))
    want = [6 * x ** 2 - 2 * x + 5, 12 * x - 2, 12.0, 0.0]
    np.testing.assert_allclose(out, 2 * x ** 3 - x ** 2 + 5 * x - 1, rtol=1e-6)
    np.testing.assert_allclose(terms, [w * v ** k for k, w in enumerate(want, 1)], rtol=1e-5,
                               atol=1e-5)


def test_jax_convention_for_sin():
    """Terms are derivatives of the path: sin along x + t gives cos x, -sin x, -cos x."""
    out, terms = jet(jnp.sin, (1.0,), ([1.0, 0.0, 0.0],))
    np.testing.assert_allclose([out, *terms], [np.sin(1), np.cos(1), -np.sin(1), -np.cos(1)],
                               rtol=1e-6)


def test_coefficients_without_factorial_scaling():
    x, terms = np.float32(0.4), [np.float32(0.3), np.float32(-0.2), np.float32(0.5)]
    _, scaled = jet(jnp.exp, (x,), (terms,))
    coefficients = [t / math.factorial(k) for k, t in enumerate(terms, 1)]
    _, raw = jet(jnp.exp, (x,), (coefficients,), factorial_scaled=False)
    np.testing.assert_allclose([r * math.factorial(k) for k, r in enumerate(raw, 1)],
                               scaled, rtol=1e-5)


def test_pytree_output_and_several_arguments():
    x, y = ANY("float32"), POSITIVE("float32")

    def f(x, y):
        return {"a": (jnp.sin(x) * y, 3.0), "b": [jnp.log(y)]}

    out, terms = jet(f, (x, y), ([x, y], [y, x]))
    assert nbjax.tree_util.tree_structure(out) == nbjax.tree_util.tree_structure(f(x, y))
    assert isinstance(terms["a"][0], list) and len(terms["b"][0]) == 2
    np.testing.assert_array_equal(terms["a"][1], [0.0, 0.0])  # a constant output
    want = derivatives_along_path(lambda x, y: jnp.log(y), [x, y], [[x, y], [y, x]], 2)
    for got, expected in zip(terms["b"][0], want[1:]):
        assert_close(got, expected)


def test_symbolic_zeros_cost_nothing():
    """A constant matrix times a moving vector: one product per term, not a Cauchy sum of
    products with zeros; and a function of constants only does no Taylor arithmetic."""
    w = rng.normal(size=(3, 3)).astype(np.float32)
    x = np.ones(3, np.float32)
    jaxpr = nbjax.make_jaxpr(lambda x: jet(lambda x: w @ x, (x,), ([x, x, x],)))(x)
    assert sum(e.primitive is lax.dot_general_p for e in jaxpr.eqns) == 4
    jaxpr = nbjax.make_jaxpr(lambda x: jet(lambda x: jnp.sin(w) @ x, (x,), ([x, x],)))(x)
    assert sum(e.primitive is lax.sin_p for e in jaxpr.eqns) == 1


def test_zero_series_zero_term_integers_and_order_zero():
    x, y = np.float32(0.5), np.float32(2.0)
    _, terms = jet(lambda x, y: x * y, (x, y), ([1.0, zero_term], zero_series))
    np.testing.assert_allclose(terms, [2.0, 0.0])
    out, terms = jet(lambda x, n: x * n, (x, 3), ([1.0, 1.0], [5, 5]))
    np.testing.assert_allclose(terms, [3.0, 3.0])  # an integer does not move
    out, terms = jet(lambda x: (jnp.argmax(x), x), (np.ones(2, np.float32),),
                     ([np.ones(2, np.float32)],))
    assert terms[0][0].dtype == out[0].dtype and np.all(terms[0][0] == 0)
    out, terms = jet(jnp.sin, (x,), ([],))
    assert terms == [] and np.allclose(out, np.sin(x))


# --- transformations -----------------------------------------------------------------------

def second_derivative_of(f):
    return lambda x: jet(f, (x,), ([jnp.ones_like(x), jnp.zeros_like(x)],))[1][1]


def test_under_jit_vmap_and_grad():
    x = POSITIVE("float32")

    def f(x):
        return jnp.sin(x) * jnp.log(x)

    eager = second_derivative_of(f)(x)
    np.testing.assert_allclose(nbjax.jit(second_derivative_of(f))(x), eager, rtol=1e-5)
    np.testing.assert_allclose(nbjax.vmap(second_derivative_of(f))(x.ravel()), eager.ravel(),
                               rtol=1e-5)
    # d/dx of f'' is f''' (the third term of the jet)
    third = jet(f, (x,), ([np.ones_like(x), np.zeros_like(x), np.zeros_like(x)],))[1][2]
    np.testing.assert_allclose(nbjax.grad(lambda x: second_derivative_of(f)(x).sum())(x),
                               third, rtol=1e-4)


def test_jit_inside_stays_a_call():
    x = ANY("float32")
    inner = nbjax.jit(lambda x, y: (jnp.tanh(x) * y, y + 1.0))

    def f(x):
        return inner(x, 2.0)[0] * x

    check_jet(f, [x], "float32")
    jaxpr = nbjax.make_jaxpr(lambda x: jet(f, (x,), ([x, x],)))(x)
    assert [e.primitive.name for e in jaxpr.eqns].count("jit") == 1


def test_custom_rules_followed_through_primal_function():
    """custom_jvp (relu, softplus's logaddexp), custom_vjp and checkpoint: the jet of the
    primal function, whatever the custom rule says."""
    @nbjax.custom_vjp
    def cube(x):
        return x ** 3

    cube.defvjp(lambda x: (cube(x), x), lambda x, g: (g * 0.0,))  # deliberately wrong

    @nbjax.custom_jvp
    def twice(x):
        return 2.0 * jnp.sin(x)

    twice.defjvp(lambda p, t: (twice(*p), 0.0 * t[0]))  # deliberately wrong

    def f(x):
        return cube(x) + twice(x) + nbjax.checkpoint(jnp.exp)(x) + nbjax.nn.relu(x)

    def plain(x):
        return x ** 3 + 2 * jnp.sin(x) + jnp.exp(x) + jnp.maximum(x, 0.0)

    x = away_from_zero("float32")
    _, terms = jet(f, (x,), ([np.ones_like(x)] * 3,))
    _, want = jet(plain, (x,), ([np.ones_like(x)] * 3,))
    np.testing.assert_allclose(terms, want, rtol=1e-5)


# --- errors --------------------------------------------------------------------------------

def test_argument_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(jnp.add, (x, x), ([x, x], [x]))
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(lambda: 1.0, (), ())
    with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
        jet(lambda d: d["a"], ({"a": x},), ([{"a": x}],))
    with pytest.raises(ValueError, match="term 1 for argument 0 is not an array"):
        jet(jnp.sin, (x,), ([x, (x, x)],))
    with pytest.raises(TypeError, match="shape"):
        jet(jnp.sin, (x,), ([np.ones(2, np.float32)],))
    with pytest.raises(TypeError, match="complex"):
        jet(jnp.sin, (x,), ([x + 1j],))
    with pytest.raises(TypeError, match="tuples or lists"):
        jet(jnp.sin, x, ([x],))
    with pytest.raises(TypeError, match="list or tuple of terms"):
        jet(jnp.sin, (x,), (x,))
    with pytest.raises(TypeError, match="2 primals but 1 series"):
        jet(jnp.add, (x, x), ([x],))
    # another dtype is converted to the primal's, as the path has the primal's type
    _, terms = jet(jnp.sin, (x,), ([np.ones(3, np.int32)],))
    assert terms[0].dtype == np.float32


@pytest.mark.parametrize("name,fun", [
    ("scan", lambda x: lax.scan(lambda c, _: (c * 2.0, None), x, None, length=3)[0]),
    ("while", lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0),
                                       (0, x))[1]),
    ("cond", lambda x: lax.cond(True, jnp.sin, jnp.cos, x)),
    ("sort", jnp.sort),
])
def test_missing_rules(name, fun):
    x = np.arange(1.0, 4.0, dtype=np.float32)
    with pytest.raises(NotImplementedError, match=f"Jet rule for '{name}' not implemented"):
        jet(fun, (x,), ([x],))
    # with no series reaching it, the primitive just runs
    out, terms = jet(lambda y: fun(x) + y, (x,), ([x],))
    np.testing.assert_allclose(out, fun(x) + x)


# --- JAX's jet -----------------------------------------------------------------------------

def with_ties(dtype):
    """Some elements exactly 1, where x, round(x) and 2x - 1 tie."""
    x = uniform(-0.9, 0.9)(dtype)
    x[0, :2] = 1.0
    return x


def _jax_cases():
    jax = pytest.importorskip("jax")
    jj = jax.numpy
    w = rng.normal(size=(3, 4)).astype(np.float32)
    return [
        (lambda x: jnp.tanh(x @ w) * nbjax.nn.sigmoid(x @ w),
         lambda x: jj.tanh(x @ w) * jax.nn.sigmoid(x @ w), ANY),
        (lambda x: nbjax.nn.softmax(x), lambda x: jax.nn.softmax(x), ANY),
        (lambda x: lax.erf_inv(x) + jnp.arcsinh(x), lambda x: jax.lax.erf_inv(x)
         + jj.arcsinh(x), UNIT),
        (lambda x: x ** 2.5 / (1.0 + x) + x ** -2, lambda x: x ** 2.5 / (1.0 + x) + x ** -2,
         POSITIVE),
        (lambda x: jnp.arctan2(x, x * x + 1.0) + jnp.abs(x - 1.0),
         lambda x: jj.arctan2(x, x * x + 1.0) + jj.abs(x - 1.0), ANY),
        # ties: max and reduce_max split the terms between equal operands
        (lambda x: jnp.maximum(x, jnp.round(x)) + jnp.max(jnp.stack([x, 2 * x - 1]), axis=0),
         lambda x: jj.maximum(x, jj.round(x)) + jj.max(jj.stack([x, 2 * x - 1]), axis=0),
         with_ties),
        (lambda x: lax.cumprod(x, 1) + lax.cummax(x, 1),
         lambda x: jax.lax.cumprod(x, 1) + jax.lax.cummax(x, 1), ANY),
    ]


def test_against_jax():
    cases = _jax_cases()
    from jax.experimental.jet import jet as jax_jet
    for ours, theirs, sample in cases:
        x = sample("float32")
        terms = [rng.normal(size=x.shape).astype(np.float32) for _ in range(3)]
        out, series = jet(ours, (x,), (terms,))
        jax_out, jax_series = jax_jet(theirs, (x,), (terms,))
        for got, want in zip([out, *series], [jax_out, *jax_series]):
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4,
                                       atol=1e-4 * np.abs(want).max())


def test_against_jax_convention_and_errors():
    jax = pytest.importorskip("jax")
    from jax.experimental import jet as jax_jet
    x = np.float32(0.3)
    out, terms = jet(jnp.sin, (x,), ([1.0, 0.0],))
    jax_out, jax_terms = jax_jet.jet(jax.numpy.sin, (x,), ([1.0, 0.0],))
    np.testing.assert_allclose([out, *terms], [jax_out, *jax_terms], rtol=1e-6)
    for args in [((x, x), ([1.0], [1.0, 2.0])), (({"a": x},), ([{"a": x}],))]:
        with pytest.raises(ValueError) as theirs:
            jax_jet.jet(lambda *a: a[0], *args)
        with pytest.raises(ValueError) as ours:
            jet(lambda *a: a[0], *args)
        assert str(ours.value) == str(theirs.value)

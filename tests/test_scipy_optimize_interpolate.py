"""nbjax.scipy.optimize.minimize (BFGS and JAX's experimental L-BFGS) and
nbjax.scipy.interpolate.RegularGridInterpolator, against SciPy in float64 (and JAX's values
when JAX is importable), with jit, vmap and gradients."""

import numpy as np
import pytest
import scipy.interpolate
import scipy.optimize
import scipy.special

import nbjax
import nbjax.numpy as jnp
from nbjax.scipy.interpolate import RegularGridInterpolator
from nbjax.scipy.optimize import OptimizeResults, minimize
from nbjax.test_util import check_grads
from tests.helpers import assert_close, check_vmap, staged

try:
    import jax
    import jax.scipy.interpolate
    import jax.scipy.optimize
except ImportError:  # JAX is a test reference only
    jax = None

RNG = np.random.default_rng(3)
LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def bowl(n, quartic=0.0):
    """``(f, centre, a)``: ``f(x) = d^T a d / 2 + quartic * sum(d^4)`` with ``d = x - centre``
    and a random positive-definite ``a``. Its one minimum is ``centre``, where ``f`` is 0, so
    float32 resolves ``f`` well near the minimum (rounding of a large minimum value would
    hide the last decreases from the line search)."""
    m = RNG.standard_normal((n, n))
    a = (m @ m.T + n * np.eye(n)) / n
    centre = RNG.uniform(-2, 2, n)

    def f(x):
        d = x - jnp.asarray(centre, x.dtype)
        return 0.5 * jnp.dot(d, jnp.matmul(jnp.asarray(a, x.dtype), d)) + quartic * jnp.sum(d ** 4)
    return f, centre, a


def softmax_regression(xp, logsumexp, a):
    """``logsumexp(a x) + |x|^2 / 2`` (smooth, strongly convex, its minimum not known in
    closed form), written with the array module ``xp``."""
    return lambda x: logsumexp(xp.matmul(a, x)) + 0.5 * xp.sum(x * x)


# --- minimize --------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["BFGS", LBFGS])
def test_minimize_finds_the_minimum_of_a_quadratic(method):
    f, centre, a = bowl(5)
    result = minimize(f, jnp.zeros(5), method=method)
    assert isinstance(result, OptimizeResults)
    assert result.x.dtype == np.float32 and result.jac.dtype == np.float32
    assert result.fun.dtype == np.float32 and result.success.dtype == np.bool_
    for count in (result.status, result.nfev, result.njev, result.nit):
        assert count.dtype == np.int32 and count.shape == ()
    assert bool(result.success) and int(result.status) == 0
    assert int(result.nfev) == int(result.njev) >= int(result.nit) + 1
    assert np.max(np.abs(np.asarray(result.jac))) < 1e-5  # the default gtol, inf-norm
    assert_close(result.x, centre, rtol=1e-5, scale=2.0)
    if method == "BFGS":  # an estimate of a^-1: symmetric positive definite
        hess_inv = np.asarray(result.hess_inv, np.float64)
        assert hess_inv.shape == (5, 5)
        np.testing.assert_allclose(hess_inv, hess_inv.T, atol=1e-5)
        assert np.linalg.eigvalsh(hess_inv + hess_inv.T).min() > 0
    else:
        assert result.hess_inv is None


# Starts from which JAX's line search (which nbjax's follows) does not give up in the valley
# (checked against jax 0.10.2; from (-1.2, 1), say, it does: test_scipy_optimize_bfgs.py)
@pytest.mark.parametrize("method, x0", [
    ("BFGS", [1.2, 1.2]), ("BFGS", [1.1, 1.3, 1.0, 0.9]), (LBFGS, [1.2, 1.2]),
    (LBFGS, [2.0, 2.0, 2.0])])
def test_minimize_rosenbrock_matches_scipy(x64, method, x0):
    x0 = np.array(x0)
    gtol = 1e-9
    result = minimize(rosenbrock, jnp.asarray(x0), method=method, options={"gtol": gtol})
    reference = scipy.optimize.minimize(
        scipy.optimize.rosen, x0, jac=scipy.optimize.rosen_der,
        method="BFGS" if method == "BFGS" else "L-BFGS-B",
        options={"gtol": gtol} if method == "BFGS" else {"gtol": gtol, "ftol": 1e-15})
    assert result.x.dtype == np.float64 and result.nit.dtype == np.int64
    assert int(result.status) in (0, 4)  # L-BFGS may stop on ftol first
    assert_close(result.x, reference.x, rtol=1e-6, scale=1.0)
    assert_close(result.x, np.ones(len(x0)), rtol=1e-6, scale=1.0)
    assert float(result.fun) < 1e-12


@pytest.mark.parametrize("method", ["BFGS", LBFGS])
def test_minimize_smooth_convex_matches_scipy_and_jax(x64, method):
    a = RNG.standard_normal((6, 4))
    # From ones, JAX's BFGS (and so nbjax's) gives up after 4 iterations, its line search
    # failed (status 3; checked against jax 0.10.2)
    result = minimize(softmax_regression(jnp, nbjax.nn.logsumexp, a), jnp.zeros(4),
                      method=method)
    assert bool(result.success) or int(result.status) == 4
    reference = scipy.optimize.minimize(softmax_regression(np, scipy.special.logsumexp, a),
                                        np.zeros(4), method="BFGS", options={"gtol": 1e-10})
    assert_close(result.x, reference.x, rtol=1e-5, scale=1.0)
    assert_close(result.fun, reference.fun, rtol=1e-10)
    if jax is not None:  # the same algorithm: the same path to the minimum
        with jax.enable_x64(True):
            theirs = jax.scipy.optimize.minimize(
                softmax_regression(jax.numpy, jax.nn.logsumexp, a), jax.numpy.zeros(4),
                method=method)
        for field in ("status", "nit", "nfev", "njev"):
            assert int(getattr(result, field)) == int(getattr(theirs, field)), field
        assert_close(result.x, np.asarray(theirs.x), rtol=1e-10, scale=1.0)


def test_minimize_passes_args_and_applies_the_options():
    f, centre, _ = bowl(3)
    shifted = minimize(lambda x, shift: f(x - shift), jnp.zeros(3), args=(jnp.ones(3),),
                       method="bfgs")
    assert_close(shifted.x, centre + 1, rtol=1e-5, scale=3.0)
    capped = minimize(rosenbrock, jnp.zeros(4), method="BFGS", options={"maxiter": 3})
    assert int(capped.nit) == 3 and int(capped.status) == 1 and not bool(capped.success)
    loose = minimize(rosenbrock, jnp.zeros(4), method="BFGS",
                     options={"gtol": 1e-1, "norm": 2})
    assert np.linalg.norm(np.asarray(loose.jac)) < 1e-1
    assert int(loose.nit) < int(minimize(rosenbrock, jnp.zeros(4), method="BFGS").nit)


def test_lbfgs_budgets_set_the_status():
    for options, status in (({"maxiter": 2}, 1), ({"maxfun": 3}, 2), ({"maxgrad": 3}, 3),
                            ({"ftol": 1.0}, 4)):
        result = minimize(rosenbrock, jnp.zeros(4), method=LBFGS, options=options)
        assert int(result.status) == status and not bool(result.success), options


def test_lbfgs_minimizes_over_complex_vectors(x64):
    """A real function of complex z is minimized over its real and imaginary parts."""
    target = np.array([1 + 2j, -0.5j])

    def f(z):
        return jnp.sum(jnp.abs(z - target) ** 2) + 0.1 * jnp.sum(jnp.abs(z) ** 4)

    result = minimize(f, jnp.full(2, 0.1 + 0.1j), method=LBFGS, options={"gtol": 1e-9})
    assert result.x.dtype == np.complex128

    def split(v):
        z = v[:2] + 1j * v[2:]
        return np.sum(np.abs(z - target) ** 2) + 0.1 * np.sum(np.abs(z) ** 4)

    reference = scipy.optimize.minimize(split, np.full(4, 0.1), method="BFGS",
                                        options={"gtol": 1e-10}).x
    assert_close(result.x, reference[:2] + 1j * reference[2:], rtol=1e-6, scale=2.0)


def test_minimize_under_jit_matches_eager():
    f, centre, _ = bowl(4, quartic=0.1)

    def solve(x0):
        return minimize(f, x0, method="BFGS"), minimize(f, x0, method=LBFGS)

    x0 = jnp.array([-1.0, 0.5, 0.2, 1.5])
    for eager, jitted in zip(solve(x0), nbjax.jit(solve)(x0), strict=True):
        assert bool(eager.success) and bool(jitted.success)
        assert int(jitted.nit) == int(eager.nit)
        assert_close(jitted.x, eager.x, rtol=1e-5, scale=2.0)
        assert_close(jitted.x, centre, rtol=1e-4, scale=2.0)
    assert_close(staged(solve, x0)[0].x, solve(x0)[0].x, rtol=1e-5, scale=2.0)


@pytest.mark.parametrize("method", ["BFGS", LBFGS])
def test_minimize_batches_over_starting_points(method):
    """Members converge after different numbers of iterations; each keeps its own."""
    f, _, _ = bowl(3, quartic=0.1)
    starts = RNG.uniform(-3, 3, (3, 3)).astype(np.float32)
    check_vmap(lambda x0: minimize(f, x0, method=method), (starts,), (0,), rtol=1e-5)


def test_minimize_rejects_bad_arguments():
    def f(x):
        return jnp.sum(x * x)

    with pytest.raises(TypeError, match="must be a tuple"):
        minimize(f, jnp.ones(2), args=[1], method="BFGS")
    with pytest.raises(ValueError, match="Method nelder-mead not recognized"):
        minimize(f, jnp.ones(2), method="nelder-mead")
    with pytest.raises(TypeError):
        minimize(f, jnp.ones((2, 2)), method="BFGS")
    with pytest.raises(IndexError):
        minimize(f, jnp.float32(1), method="BFGS")
    with pytest.raises(TypeError, match="inexact"):
        minimize(f, jnp.ones(2, int), method="BFGS")
    with pytest.raises(TypeError, match="unexpected keyword"):
        minimize(f, jnp.ones(2), method="BFGS", options={"maxcor": 3})
    with pytest.raises(TypeError, match="scalar-output"):
        minimize(lambda x: x, jnp.ones(2), method="BFGS")
    with pytest.raises(TypeError, match="real x0"):
        minimize(f, jnp.ones(2, np.complex64), method="BFGS")


# --- RegularGridInterpolator -----------------------------------------------------------------

def random_grid(shape):
    """Increasing, unevenly spaced coordinates for each axis of ``shape``."""
    return tuple(np.cumsum(RNG.uniform(0.2, 1.0, n)) - 1.0 for n in shape)


def query_points(grid, count, margin=0.5):
    """Random points covering the grid and a ``margin`` around it (so some lie outside)."""
    return np.stack([RNG.uniform(g[0] - margin, g[-1] + margin, count) for g in grid], -1)


def scipy_interpolate(grid, values, xi, **kwargs):
    return scipy.interpolate.RegularGridInterpolator(grid, values, **kwargs)(xi)


@pytest.mark.parametrize("method", ["linear", "nearest"])
@pytest.mark.parametrize("shape", [(5,), (4, 6), (3, 4, 5), (4, 3, 2)])
def test_interpolator_matches_scipy(method, shape):
    grid = random_grid(shape[:2] if shape == (4, 3, 2) else shape)  # (4, 3, 2): values carry
    values = RNG.standard_normal(shape)  # an axis of 2
    xi = query_points(grid, 40)
    xi[0] = [g[1] for g in grid]  # on grid nodes
    for fill_value in (np.nan, None, -3.0):
        ours = RegularGridInterpolator([jnp.asarray(g) for g in grid], values, method=method,
                                       fill_value=fill_value)(xi)
        assert ours.dtype == np.float32 and ours.shape == (40,) + shape[len(grid):]
        expected = scipy_interpolate(grid, values, xi, method=method, bounds_error=False,
                                     fill_value=fill_value)
        assert_close(ours, expected, rtol=2e-5, scale=np.abs(values).max())


def test_interpolator_query_forms():
    """Points as a tuple of coordinate arrays (broadcast together), a batch of points of any
    shape, or (for one axis) a vector; integer values become floats."""
    grid = random_grid((4, 5))
    values = RNG.integers(-5, 5, (4, 5))
    interpolate = RegularGridInterpolator([jnp.asarray(g) for g in grid], jnp.asarray(values))
    a, b = np.meshgrid(np.linspace(grid[0][0], grid[0][-1], 3),
                       np.linspace(grid[1][0], grid[1][-1], 7), indexing="ij")
    expected = scipy_interpolate(grid, values.astype(float), (a, b))
    ours = interpolate((jnp.asarray(a), jnp.asarray(b)))
    assert ours.dtype == np.float32 and ours.shape == (3, 7)
    assert_close(ours, expected, rtol=1e-5)
    assert_close(interpolate(np.stack([a, b], -1)), expected, rtol=1e-5)
    assert_close(interpolate(np.stack([a, b], -1), method="nearest"),
                 scipy_interpolate(grid, values.astype(float), (a, b), method="nearest"))
    line = RegularGridInterpolator((jnp.asarray(grid[0]),), jnp.asarray(values[:, 0]))
    x = np.linspace(grid[0][0], grid[0][-1], 6)
    assert_close(line(x), np.interp(x, grid[0], values[:, 0]), rtol=1e-5)


def test_interpolator_keeps_float64_values(x64):
    grid = random_grid((6,))
    values = RNG.standard_normal(6)
    ours = RegularGridInterpolator((jnp.asarray(grid[0]),), jnp.asarray(values))
    xi = query_points(grid, 9, margin=0.0)
    out = ours(xi)
    assert out.dtype == np.float64
    assert_close(out, scipy_interpolate(grid, values, xi), rtol=1e-13)


def test_interpolator_gradients():
    grid = tuple(jnp.asarray(g, jnp.float32) for g in random_grid((4, 5)))
    values = RNG.standard_normal((4, 5)).astype(np.float32)
    inside = np.stack([np.asarray([0.3, 0.6]) * (g[-1] - g[0]) + g[0] for g in
                       map(np.asarray, grid)], -1).astype(np.float32)  # away from grid lines

    def linear(points, values):
        return RegularGridInterpolator(grid, values)(points)

    check_grads(linear, (inside, values), order=1, eps=1e-3, rtol=2e-2, atol=2e-2)
    check_grads(lambda v: RegularGridInterpolator(grid, v, method="nearest")(inside),
                (values,), order=1, eps=1e-3, rtol=2e-2, atol=2e-2)
    # The interpolant is linear in the values: its gradient is the weights of the corners.
    weights = nbjax.grad(lambda v: linear(inside[:1], v)[0])(values)
    ones_at = scipy_interpolate(tuple(map(np.asarray, grid)), np.eye(20).reshape(4, 5, 20),
                                inside[:1])[0].reshape(4, 5)
    assert_close(weights, ones_at, rtol=1e-5, scale=1.0)


def test_interpolator_under_jit_and_vmap():
    grid = tuple(jnp.asarray(g) for g in random_grid((4, 5)))
    values = jnp.asarray(RNG.standard_normal((4, 5)).astype(np.float32))
    xi = query_points([np.asarray(g) for g in grid], 12).astype(np.float32)
    interpolate = RegularGridInterpolator(grid, values, fill_value=0.0)
    eager = interpolate(xi)
    assert_close(nbjax.jit(lambda f, x: f(x))(interpolate, xi), eager, rtol=1e-6)
    assert_close(nbjax.jit(lambda v, x: RegularGridInterpolator(grid, v)(x))(values, xi),
                 RegularGridInterpolator(grid, values)(xi), rtol=1e-6)
    check_vmap(lambda x: interpolate(x), (xi.reshape(3, 4, 2),), (1,))
    check_vmap(lambda v: RegularGridInterpolator(grid, v)(xi),
               (np.stack([np.asarray(values), -np.asarray(values)]),), (0,))


def test_interpolator_rejects_bad_arguments():
    grid = (jnp.arange(3.0), jnp.arange(4.0))
    values = jnp.zeros((3, 4))
    with pytest.raises(ValueError, match="method 'cubic' is not defined"):
        RegularGridInterpolator(grid, values, method="cubic")
    with pytest.raises(ValueError, match="not defined"):
        RegularGridInterpolator(grid, values)(jnp.zeros((1, 2)), method="spline")
    with pytest.raises(NotImplementedError, match="bounds_error"):
        RegularGridInterpolator(grid, values, bounds_error=True)
    with pytest.raises(ValueError, match="3 point arrays"):
        RegularGridInterpolator(grid + (jnp.arange(2.0),), values)
    with pytest.raises(ValueError, match="There are 4 points and 3 values"):
        RegularGridInterpolator(grid[::-1], values)
    with pytest.raises(ValueError, match="fill_value"):
        RegularGridInterpolator(grid, values, fill_value=1j)
    with pytest.raises(TypeError):
        RegularGridInterpolator(grid, [[0.0] * 4] * 3)
    with pytest.raises(ValueError, match="dimension 3"):
        RegularGridInterpolator(grid, values)(jnp.zeros((5, 3)))


@pytest.mark.skipif(jax is None, reason="jax is not installed (a cross-check only)")
@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_interpolator_agrees_with_jax(method):
    grid = random_grid((4, 5, 3))
    values = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    xi = query_points(grid, 30).astype(np.float32)
    for fill_value in (np.nan, None):
        ours = RegularGridInterpolator([jnp.asarray(g, jnp.float32) for g in grid], values,
                                       method=method, fill_value=fill_value)(xi)
        theirs = jax.scipy.interpolate.RegularGridInterpolator(
            [jax.numpy.asarray(g, jax.numpy.float32) for g in grid], values, method=method,
            fill_value=fill_value)(xi)
        assert ours.dtype == theirs.dtype
        assert_close(ours, np.asarray(theirs), rtol=1e-6)

"""The jax.scipy.special names added to nbjax.scipy.special: scipy.special's float64 values
(recorded here, and compared live on random inputs when scipy is importable), JAX's edge
cases (poles, zeros, infinities), errors and derivatives."""

import numpy as np
import pytest

import nbjax
import nbjax.scipy.special as special
from nbjax.test_util import check_grads

from helpers import assert_close

try:
    import scipy.special as sps
except ImportError:  # the recorded values still check nbjax
    sps = None

nan, inf = np.nan, np.inf
X = np.array([-2.5, -0.5, 0.5, 3.0, 7.3])
P, Q = np.array([5.0, 3.0, 1.0, 2.5, 0.5]), np.array([2.0, 1.5, 2.0, 0.7, 0.25])

# scipy.special at X (unary) or at (P, Q) (binary), recorded in float64.
UNARY = {
    "gamma": [-0.945308720483, -3.544907701811, 1.772453850906, 2.0, 1271.423633663909],
    "gammasgn": [-1.0, -1.0, 1.0, 1.0, 1.0],
    "loggamma": [nan, nan, 0.572364942925, 0.69314718056, 7.147892523022],
    "factorial": [0.0, 0.0, 0.886226925453, 6.0, 9281.39252574655],
    "i0": [3.28983914405, 1.063483370741, 1.063483370741, 4.880792585865, 222.658799873012],
    "i1": [-2.516716245289, -0.257894305391, 0.257894305391, 3.953370217403, 206.791670046226],
    "i0e": [0.270046441612, 0.645035270449, 0.645035270449, 0.243000354162, 0.150414652952],
    "i1e": [-0.206584649531, -0.156420803185, 0.156420803185, 0.196826713297, 0.139695791503],
    "entr": [-inf, -inf, 0.34657359028, -3.295836866004, -14.511482741527],
    "erfcx": [1035.814842972623, 1.952360489183, 0.615690344193, 0.179001151181,
              0.076580608471],
}
BINARY = {
    "comb": [10.0, 3.395305452627, 0.0, 2.181643534736, 1.078705202377],
    "poch": [30.0, 5.815864198284, 2.0, 1.823434766212, 0.691367339036],
    "rel_entr": [4.581453659371, 2.07944154168, -0.69314718056, 3.182414189532, 0.34657359028],
    "kl_div": [1.581453659371, 0.57944154168, 0.30685281944, 1.382414189532, 0.09657359028],
    "boxcox": [12.0, 2.797434948471, 0.0, 1.284492117616, -0.636414338985],
    "boxcox1p": [17.5, 4.666666666667, 1.5, 2.005027707642, 0.426727678801],
    "beta": [0.033333333333, 0.152380952381, 0.5, 0.711873743279, 5.244115108584],
    "betaln": [-3.401197381662, -1.881371627918, -0.69314718056, -0.33985471015,
               1.657106516191],
    "gammainc": [0.052653017344, 0.191153169462, 0.864664716763, 0.075686727198,
                 0.520499877813],
    "gammaincc": [0.947346982656, 0.808846830538, 0.135335283237, 0.924313272802,
                  0.479500122187],
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_recorded(name):
    with nbjax.enable_x64():
        got = np.asarray(getattr(special, name)(X))
    assert got.dtype == np.float64
    assert_close(got, np.array(UNARY[name]), 1e-10)
    out32 = getattr(special, name)(X.astype(np.float32))
    assert np.asarray(out32).dtype == np.float32
    assert_close(out32, np.array(UNARY[name], np.float32), 5e-6)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_recorded(name):
    with nbjax.enable_x64():
        got = getattr(special, name)(P, Q)
    assert_close(got, np.array(BINARY[name]), 1e-10)


@pytest.mark.skipif(sps is None, reason="scipy is the float64 reference")
@pytest.mark.parametrize("name", ["gamma", "gammasgn", "factorial", "i0", "i1", "i0e", "i1e",
                                  "entr", "erfcx", "comb", "poch", "rel_entr", "kl_div",
                                  "boxcox", "boxcox1p", "beta", "betaln", "gammainc",
                                  "gammaincc", "betainc", "zeta"])
def test_against_scipy_on_random_inputs(name):
    rng = np.random.default_rng(1)
    n = 200
    if name in ("comb", "poch"):
        args = (rng.uniform(0, 15, n), rng.uniform(0, 6, n))
    elif name in ("gammainc", "gammaincc"):
        args = (rng.uniform(0.01, 30, n), rng.uniform(0, 40, n))
    elif name == "betainc":
        args = (rng.uniform(0.1, 10, n), rng.uniform(0.1, 10, n), rng.uniform(0, 1, n))
    elif name == "zeta":
        args = (rng.uniform(1.1, 10, n), rng.uniform(0.1, 10, n))
    elif name in ("rel_entr", "kl_div", "boxcox", "boxcox1p", "beta", "betaln"):
        args = (rng.uniform(0.01, 10, n), rng.uniform(-2, 10, n) if name.startswith("box")
                else rng.uniform(0.01, 10, n))
    elif name == "erfcx":
        args = (rng.uniform(-5, 50, n),)
    else:
        args = (rng.uniform(-12, 12, n),)
    with nbjax.enable_x64():
        got = np.asarray(getattr(special, name)(*args))
    assert_close(got, getattr(sps, name)(*args), 1e-9)


def test_edges_as_jax():
    edge = np.array([-2.0, 0.0, nan, -inf, inf], np.float32)
    np.testing.assert_array_equal(special.gammasgn(edge), [nan, 1, nan, nan, 1])
    np.testing.assert_array_equal(special.gamma(edge), [nan, inf, nan, nan, inf])
    np.testing.assert_array_equal(special.loggamma(edge), [nan, nan, nan, nan, inf])
    np.testing.assert_array_equal(special.entr(np.array([0.0, nan, inf], np.float32)),
                                  [0, nan, -inf])
    np.testing.assert_array_equal(special.comb(np.array([5.0, 3.0, -1.0]),
                                               np.array([6.0, -1.0, 1.0])), [0, 0, 0])
    np.testing.assert_array_equal(
        special.rel_entr(np.array([0.0, 0.0, 1.0, -1.0]), np.array([0.0, 1.0, 0.0, 1.0])),
        [0, 0, inf, inf])
    np.testing.assert_array_equal(special.erfcx(np.array([-10.0, inf, -inf], np.float32)),
                                  [inf, 0, inf])
    assert_close(special.erfcx(np.float32(1e5)), np.float32(5.6418958e-06), 1e-6)
    np.testing.assert_array_equal(special.gammainc(0.0, 0.0), nan)


def test_errors():
    with pytest.raises(NotImplementedError, match="Riemann"):
        special.zeta(2.0)
    with pytest.raises(ValueError, match="integer type"):
        special.polygamma(1.0, 2.0)
    with pytest.raises(ValueError):
        special.factorial(3, exact=True)
    assert_close(special.multigammaln(np.array([2.5, 3.0]), 3),
                 np.array([1.8809954, 2.6949249], np.float32), 2e-6)
    assert_close(special.polygamma(np.array([0, 1, 2]), 1.5),
                 np.array([0.03648997, 0.9348022, -0.82879664], np.float32), 2e-6)


def test_derivatives():
    with nbjax.enable_x64():
        x = np.array([0.7, 1.9, 3.2])
        for fn in (special.gamma, special.i0, special.i1, special.erfcx, special.entr,
                   lambda v: special.gammainc(2.5, v), lambda v: special.betainc(2.0, 3.0, v / 4),
                   lambda v: special.kl_div(v, 2.0), lambda v: special.boxcox(v, 0.3)):
            check_grads(fn, (x,), 1)
        check_grads(lambda a: special.gammaincc(a, 1.7), (x,), 1)
        # i0e' = i1e - sign(x) i0e
        assert_close(nbjax.grad(special.i0e)(1.5), special.i1e(1.5) - special.i0e(1.5), 1e-12)


# scipy.special.ndtri at the float64 values of P_TAILS (1e-300 is 0 in float32), recorded.
P_TAILS = np.array([1e-30, 1e-8, 5e-5, 0.01, 0.3, 0.99, 1 - 2.0 ** -20])
NDTRI_TAILS = [-11.464024688443613, -5.612001244174789, -3.890591886413094,
               -2.3263478740408408, -0.5244005127080409, 2.3263478740408408, 4.763001034267814]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ndtri_keeps_relative_accuracy_in_the_tails(dtype, x64):
    """``ndtri`` as ``sqrt(2) erfinv(2p - 1)`` rounded ``2p - 1`` to -1 below ``eps / 4``
    (-inf at 1e-8 in float32) and lost digits above it (1e-5 relative at 5e-5)."""
    p = P_TAILS.astype(dtype)
    expected = np.array(NDTRI_TAILS)
    if dtype == np.float32:  # (the float32 inputs are not exactly P_TAILS)
        expected = expected + (p.astype(np.float64) - P_TAILS) / np.exp(
            -0.5 * expected ** 2) * np.sqrt(2 * np.pi)
    assert_close(special.ndtri(p), expected.astype(dtype), rtol=8 * np.finfo(dtype).eps,
                 scale=0)
    with nbjax.enable_x64(True):
        assert abs(float(special.ndtri(1e-300)) + 37.0470962993612) < 1e-12 * 37
    assert_close(special.ndtri(np.array([0, 1, -0.5, 1.5, nan], dtype)),
                 np.array([-inf, inf, nan, nan, nan], dtype))


# scipy.special.betaln at (A_LARGE, B_LARGE), recorded in float64 (but log(1 / (1000 * 1001))
# exactly for B(2, 1000), where SciPy is 7e-14 off).
A_LARGE, B_LARGE = np.array([0.5, 1.0, 2.0, 3.5, 0.5]), np.array([1e8, 1e8, 1e3, 25.0, 1e30])
BETALN_LARGE = [-8.637975427801484, -18.420680743952367, -13.816510058297357,
                -10.233473833089636, -33.966411451985984]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_betaln_with_a_large_argument(dtype, x64):
    """``gammaln(b) - gammaln(a + b)`` cancelled to 0 when ``a + b`` rounds to ``b`` (betaln
    was 0 at (0.5, 1e8) in float32, and at (0.5, 1e30) in float64)."""
    expected = np.array(BETALN_LARGE, dtype)
    tol = 16 * np.finfo(dtype).eps
    assert_close(special.betaln(A_LARGE.astype(dtype), B_LARGE.astype(dtype)), expected,
                 rtol=tol, scale=0)
    assert_close(special.betaln(B_LARGE.astype(dtype), A_LARGE.astype(dtype)), expected,
                 rtol=tol, scale=0)
    assert_close(special.beta(np.array([1.0, 2.0], dtype), np.array([1e3, 1e3], dtype)),
                 np.array([1e-3, 1 / (1e3 * 1001)], dtype), rtol=tol, scale=0)


def test_signed_zero_and_nan_edge_cases():
    """``Gamma(-0) = -inf`` (``gammasgn(-0) = -1``), as in SciPy and JAX; ``xlogy(0, nan)``
    and ``xlog1py(0, nan)`` are NaN (SciPy, JAX): only a number's ``0 * log`` is 0."""
    zeros = np.array([-0.0, 0.0], np.float32)
    assert_close(special.gamma(zeros), np.array([-inf, inf], np.float32))
    assert_close(special.gammasgn(zeros), np.array([-1.0, 1.0], np.float32))
    y = np.array([nan, 0.0, -1.0], np.float32)
    assert_close(special.xlogy(np.zeros(3, np.float32), y), np.array([nan, 0, 0], np.float32))
    assert_close(special.xlog1py(np.zeros(3, np.float32), y), np.array([nan, 0, 0], np.float32))


def test_gammainc_gammaincc_at_infinite_a_as_jax():
    """a == inf: P = 0, Q = 1 for 0 <= x < 1, NaN for finite x >= 1, P = 1, Q = 0 at x = inf
    (JAX's values; they were all NaN)."""
    import nbjax.scipy.special as nsp
    a = np.float32(np.inf)
    x = np.array([0.0, 0.5, 1.0, 2.0, np.inf, np.nan, -1.0], np.float32)
    p = [0.0, 0.0, np.nan, np.nan, 1.0, np.nan, np.nan]
    np.testing.assert_array_equal(np.asarray(nsp.gammainc(a, x)), np.array(p, np.float32))
    np.testing.assert_array_equal(np.asarray(nsp.gammaincc(a, x)),
                                  1 - np.array(p, np.float32))

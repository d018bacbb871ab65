"""The integrals, series and recurrences added to nbjax.scipy.special (exp1, expi, expn, sici,
fresnel, dawsn, spence, wofz, bernoulli, bessel_jn, hyp1f1, hyp2f1, owens_t, sph_harm_y):
values against scipy.special on random inputs in float64 and float32, edge cases, closed-form
derivatives against finite differences, jit and vmap."""

import numpy as np
import pytest

import nbjax
import nbjax.scipy.special as special
from nbjax.test_util import check_grads

from helpers import assert_close, check_vmap

sps = pytest.importorskip("scipy.special")

N = 120


def _inputs(name, rng):
    """Random arguments over the domain each function supports."""
    uniform = rng.uniform
    wide = np.concatenate([uniform(-30, 30, N), 10 ** uniform(-6, 2, N)])
    if name in ("exp1", "spence"):
        return (np.abs(wide),)
    if name == "expn":
        return rng.integers(0, 25, 2 * N), np.abs(wide)
    if name == "wofz":
        return (rng.normal(size=N) * 6 + 1j * rng.normal(size=N) * 6,)
    if name == "hyp1f1":
        return uniform(0.5, 30, N), uniform(0.5, 30, N), uniform(0.5, 30, N)
    if name == "hyp2f1":
        return tuple(uniform(0.1, 0.9, N) for _ in range(4))
    if name == "owens_t":
        return rng.normal(size=N) * 3, rng.normal(size=N) * 3
    if name == "sph_harm_y":
        return (rng.integers(0, 8, N), rng.integers(-8, 9, N), uniform(0, np.pi, N),
                uniform(-4, 4, N))
    return (wide,)


SCIPY_NAMES = ["dawsn", "exp1", "expi", "expn", "fresnel", "sici", "spence", "wofz", "hyp1f1",
               "hyp2f1", "owens_t", "sph_harm_y"]
# Relative tolerances in float64 (wofz and fresnel go through Weideman's expansion of w).
TOL64 = {"wofz": 1e-13, "fresnel": 1e-13, "dawsn": 1e-13, "hyp1f1": 1e-12}
# float32 tolerances: the series and fractions add a few roundings.
TOL32 = {"hyp1f1": 3e-5, "expi": 2e-5, "expn": 2e-5}


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", SCIPY_NAMES)
def test_against_scipy_float64(name):
    args = _inputs(name, np.random.default_rng(sorted(SCIPY_NAMES).index(name)))
    with nbjax.enable_x64():
        got = _as_tuple(getattr(special, name)(*args))
    want = _as_tuple(getattr(sps, name)(*args))
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == w.dtype
        assert_close(g, w, TOL64.get(name, 1e-14))


@pytest.mark.parametrize("name", SCIPY_NAMES)
def test_against_scipy_float32(name):
    args = _inputs(name, np.random.default_rng(7))
    args32 = tuple(a.astype(np.complex64 if a.dtype.kind == "c" else np.float32)
                   if a.dtype.kind in "fc" else a for a in args)
    got = _as_tuple(getattr(special, name)(*args32))
    want = _as_tuple(getattr(sps, name)(*[a.astype(np.result_type(a, np.float64))
                                          if a.dtype.kind in "fc" else a for a in args32]))
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g)
        assert g.dtype == (np.complex64 if w.dtype.kind == "c" else np.float32)
        finite = np.isfinite(w) & (np.abs(w) < np.finfo(np.float32).max)  # no float32 overflow
        assert_close(g[finite], w[finite], TOL32.get(name, 5e-6))


def test_exponential_integrals_at_the_edges():
    edge = np.array([-1.0, 0.0, np.inf, -np.inf, np.nan], np.float32)
    np.testing.assert_array_equal(special.exp1(edge), sps.exp1(edge))
    np.testing.assert_array_equal(special.expi(edge[1:]), sps.expi(edge[1:]))
    n = np.array([0, 1, 2, 3, -1, 2])
    x = np.array([0.0, 0.0, 0.0, np.inf, 1.0, -1.0], np.float32)
    np.testing.assert_array_equal(special.expn(n, x), [np.inf, np.inf, 1, 0, np.nan, np.nan])
    assert np.isnan(special.expn(2.5, 1.0))  # n must be an integer, as in JAX
    assert np.asarray(special.expn(np.arange(3), np.float32(1.0))).dtype == np.float32


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
def test_fresnel_stays_accurate_for_large_arguments(x64):
    """The oscillation of S and C around 1/2 is exp(i pi x^2 / 2) / (pi x): its phase comes
    from x^2 modulo 4, not from x^2 rounded (an ulp of x^2 is 2 at x = 4000 in float32); far
    out, both are 1/2."""
    dtype = np.float64 if x64 else np.float32
    x = np.concatenate([np.geomspace(1.5, 1e4, 400), [36974.0, 1e5, 1e6, 1e20, 3e38]])
    with nbjax.enable_x64(x64):
        got = special.fresnel(x.astype(dtype))
    want = sps.fresnel(x.astype(dtype).astype(np.float64))
    for g, w in zip(got, want):
        w = np.where(np.isnan(w), 0.5, w)  # (SciPy gives NaN past 1e300 or so)
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=0,
                                   atol=1e-10 if x64 else 3e-7)


def test_fresnel_float32_within_a_few_ulps():
    """Float32 S and C within 4 ulps of the exact values (SciPy in float64 at the float32
    inputs) over [-1e4, 1e4]: near x = 1.45 the alternating power series loses up to 11 ulps
    to cancellation (JAX's rational, within 1), so float32 switches to the large-argument
    form at 1.15."""
    rng = np.random.default_rng(2)
    x = np.concatenate([np.linspace(-3, 3, 60001), np.linspace(-1e4, 1e4, 40001),
                        10 ** rng.uniform(-3, 4, 20000)]).astype(np.float32)
    got = special.fresnel(x)
    for g, w in zip(got, sps.fresnel(x.astype(np.float64))):
        ulp = np.spacing(np.abs(w).astype(np.float32)).astype(np.float64)
        assert np.max(np.abs(np.asarray(g, np.float64) - w) / ulp) < 4


def test_other_edges_as_scipy():
    edge = np.array([0.0, np.inf, -np.inf, np.nan], np.float32)
    for name in ("dawsn", "sici", "fresnel"):
        for got, want in zip(_as_tuple(getattr(special, name)(edge)),
                             _as_tuple(getattr(sps, name)(edge))):
            np.testing.assert_array_equal(got, want.astype(np.float32))
    h, a = np.array([0.0, 1.0, np.inf, 1.0, -2.0]), np.array([1.0, np.inf, 1.0, 0.0, -np.inf])
    with nbjax.enable_x64():
        edge = np.array([-1.0, 0.0, 1.0, np.inf, np.nan])
        np.testing.assert_array_equal(special.spence(edge), sps.spence(edge))
        assert_close(special.owens_t(h, a), sps.owens_t(h, a), 1e-14)
    assert np.isnan(special.owens_t(np.nan, 1.0))


@pytest.mark.parametrize("name", ["dawsn", "erfcx", "exp1", "expi", "fresnel"])
def test_half_precision_within_two_ulps_of_scipy(name):
    """Computed in float32 and rounded (in float16 itself their terms' rounding cost 3-12
    ulps)."""
    x = np.linspace(-3, 6, 91).astype(np.float16)
    with np.errstate(all="ignore"):
        wants = _as_tuple(getattr(sps, name)(x.astype(np.float64)))
    for got, want in zip(_as_tuple(getattr(special, name)(x)), wants):
        got, want = np.asarray(got), want.astype(np.float16)
        assert got.dtype == np.float16
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ulp = np.spacing(np.abs(want[finite])).astype(np.float64)
        error = np.abs(got[finite].astype(np.float64) - want[finite]) / ulp
        assert error.max() <= 2, (name, error.max())


def test_wofz_of_half_precision_and_python_numbers_is_complex64():
    """As JAX's: float16 (no complex32) and Python numbers give a strongly typed
    complex64."""
    x = np.array([0.5, 2.0], np.float16)
    for value in (x, 1.5, 3):
        out = special.wofz(value)
        assert out.dtype == np.complex64 and not out.weak_type
        assert_close(out, sps.wofz(np.asarray(value, np.float64)), 1e-6)


def test_hypergeometric_beyond_the_plain_series():
    rng = np.random.default_rng(3)
    a, b, c = (rng.uniform(0.1, 3, N) for _ in range(3))
    x = rng.uniform(-9, 0, N)  # through Pfaff's transformation
    with nbjax.enable_x64():
        assert_close(special.hyp2f1(a, b, c, x), sps.hyp2f1(a, b, c, x), 1e-12)
        # at x = 1 Gauss's sum (finite for c > a + b); above 1 NaN
        assert_close(special.hyp2f1(0.3, 0.4, 1.5, 1.0), sps.hyp2f1(0.3, 0.4, 1.5, 1.0), 1e-13)
        assert np.isinf(special.hyp2f1(1.0, 2.0, 3.0, 1.0))
        assert np.isnan(special.hyp2f1(1.0, 2.0, 3.5, 1.5))
        # Kummer's transformation at x < 0: accurate relative to the largest value
        x = -rng.uniform(0, 10, N)
        a, b = rng.uniform(0.5, 10, N), rng.uniform(0.5, 10, N)
        assert_close(special.hyp1f1(a, b, x), sps.hyp1f1(a, b, x), 1e-10)
    np.testing.assert_array_equal(special.hyp1f1(1.0, 0.0, 1.0), np.inf)


def test_bernoulli_numbers():
    with nbjax.enable_x64():
        got = special.bernoulli(30)
    assert got.shape == (31,) and got.dtype == np.float64
    assert_close(got, sps.bernoulli(30), 1e-13)
    assert np.asarray(special.bernoulli(4)).dtype == np.float32
    np.testing.assert_array_equal(special.bernoulli(0), [1.0])
    with pytest.raises(ValueError, match="non-negative"):
        special.bernoulli(-1)
    with pytest.raises(TypeError):
        special.bernoulli(2.5)


def test_bessel_jn():
    rng = np.random.default_rng(4)
    z = np.concatenate([rng.uniform(-25, 25, N), [0.0, 1e-20, -3.0]])
    with nbjax.enable_x64():
        got = special.bessel_jn(z, v=6)
    want = np.stack([sps.jv(n, z) for n in range(7)])
    assert got.shape == (7, z.size)
    assert_close(got, want, 1e-12)
    out32 = special.bessel_jn(np.ones((2, 3), np.float32), v=1)
    assert out32.shape == (2, 2, 3) and out32.dtype == np.float32
    assert_close(out32[1], np.full((2, 3), sps.j1(1.0), np.float32), 2e-6)


def test_sph_harm_y():
    with pytest.raises(NotImplementedError, match="diff_n"):
        special.sph_harm_y(1, 0, 0.3, 0.2, diff_n=1)
    n, m = np.array([3, 2, 1]), np.array([-2, 2, 3])
    theta, phi = np.array([0.4, 2.0, 1.0]), np.array([1.0, -0.5, 0.0])
    f = nbjax.jit(lambda t, p: special.sph_harm_y(n, m, t, p, n_max=3))
    out = f(theta, phi)
    assert out.dtype == np.complex64
    assert_close(out, sps.sph_harm_y(n, m, theta, phi).astype(np.complex64), 2e-6)


GRADS = {  # a function of one float64 array, and where it is differentiable
    "exp1": (special.exp1, (0.2, 8)),
    "expi": (special.expi, (-6, 6)),
    "expn": (lambda x: special.expn(3, x), (0.2, 8)),
    "expn0": (lambda x: special.expn(0, x), (0.2, 8)),
    "dawsn": (special.dawsn, (-6, 6)),
    "spence": (special.spence, (0.1, 4)),
    "si": (lambda x: special.sici(x)[0], (-8, 8)),
    "ci": (lambda x: special.sici(x)[1], (0.2, 8)),
    "fresnel_s": (lambda x: special.fresnel(x)[0], (-3, 3)),
    "fresnel_c": (lambda x: special.fresnel(x)[1], (-3, 3)),
    "hyp1f1": (lambda x: special.hyp1f1(x, 2.5, x / 2), (0.5, 4)),
    "hyp2f1": (lambda x: special.hyp2f1(x, 0.4, 0.8, x / 5), (0.1, 0.9)),
    "owens_t_h": (lambda x: special.owens_t(x, 1.7), (-3, 3)),
    "owens_t_a": (lambda x: special.owens_t(0.6, x), (-3, 3)),
    "bessel_jn": (lambda x: special.bessel_jn(x, v=3), (-10, 10)),
    "wofz_re": (lambda x: special.wofz(x + 0.5j).real, (-4, 4)),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_derivatives(name):
    fn, (low, high) = GRADS[name]
    x = np.random.default_rng(5).uniform(low, high, 6)
    with nbjax.enable_x64():
        check_grads(fn, (x,), 1)


def test_closed_form_derivatives():
    with nbjax.enable_x64():
        x = np.array([0.3, 1.5, 4.5])
        assert_close(nbjax.vmap(nbjax.grad(special.expi))(x), np.exp(x) / x, 1e-13)
        assert_close(nbjax.vmap(nbjax.grad(special.dawsn))(x), 1 - 2 * x * sps.dawsn(x), 1e-13)
        # spence'(x) = log(x) / (1 - x), and -1 at x = 1
        assert_close(nbjax.vmap(nbjax.grad(special.spence))(np.array([0.5, 1.0, 2.0])),
                     np.array([2 * np.log(0.5), -1.0, -np.log(2.0)]), 1e-13)
        assert_close(nbjax.grad(lambda v: special.sici(v)[0])(0.0), 1.0, 1e-15)
        z = np.complex128(0.7 + 0.4j)
        _, tangent = nbjax.jvp(special.wofz, (z,), (np.complex128(1.0),))
        assert_close(tangent, 2j / np.sqrt(np.pi) - 2 * z * sps.wofz(z), 1e-13)


@pytest.mark.parametrize("name", SCIPY_NAMES)
def test_jit_and_vmap(name):
    args = tuple(a[:8] for a in _inputs(name, np.random.default_rng(6)))
    args = tuple(a.astype(np.complex64 if a.dtype.kind == "c" else np.float32)
                 if a.dtype.kind in "fc" else a for a in args)
    fn = getattr(special, name)
    if name == "sph_harm_y":
        fn = lambda *a: special.sph_harm_y(*a, n_max=8)  # noqa: E731
    for got, want in zip(_as_tuple(nbjax.jit(fn)(*args)), _as_tuple(fn(*args))):
        assert_close(got, want, 1e-5)
    check_vmap(fn, args, (0,) * len(args), rtol=1e-5)

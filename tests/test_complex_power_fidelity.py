"""Complex ``pow`` and ``log1p`` at special and extreme values: the reference backend (eager)
and compiled code agree on every pair of a grid of zeros, ones, infinities, NaNs, huge and
tiny parts; both follow XLA's complex power (``lax.transcendental._complex_pow``), checked
here against its exact cases and Python's own complex power, not against JAX; ``log1p`` is
accurate to an ulp or two for tiny, huge and cancelling arguments, checked against sums
computed exactly in rationals."""

import cmath
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax

from helpers import cpu_and_reference

PARTS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e30, 1e-30]
DTYPES = pytest.mark.parametrize("dtype", [np.complex64, np.complex128],
                                 ids=["complex64", "complex128"])


def _grid(dtype):
    """Every complex number with two parts from PARTS."""
    return np.array([complex(a, b) for a in PARTS for b in PARTS], dtype)


def _pairs(dtype):
    """Every pair (x, y) of grid values, as two arrays."""
    z = _grid(dtype)
    return np.repeat(z, z.size), np.tile(z, z.size)


def _eager_and_compiled(fn, *args):
    """``fn(*args)`` by the reference backend and by compiled code (which must not fall back
    to the reference backend), as NumPy arrays."""
    cpu, ref = cpu_and_reference(fn, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        (compiled,) = cpu.run(*args)
    (eager,) = ref.run(*args)
    return np.asarray(eager), np.asarray(compiled)


def _same_parts(got, want, rtol):
    """Element-wise: NaN where ``want`` has NaN, equal infinities, zeros of the same sign,
    finite parts within ``rtol`` of |want| (both parts scaled by the modulus)."""
    ok = np.ones(want.shape, bool)
    with np.errstate(invalid="ignore", over="ignore"):
        modulus = np.abs(want.astype(np.complex128))
    scale = np.where(np.isfinite(modulus), modulus, 0)
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        g, w = g.astype(np.float64), w.astype(np.float64)
        with np.errstate(invalid="ignore"):
            close = np.abs(g - w) <= rtol * scale
        zeros = (g == 0) & (w == 0)
        ok &= np.where(np.isnan(w), np.isnan(g),
                       np.where(zeros, np.signbit(g) == np.signbit(w), (g == w) | close))
    return ok


def _rtol(dtype):
    return 8 * np.finfo(dtype).eps


def _with_x64(dtype):
    return nbjax.enable_x64(np.dtype(dtype) == np.complex128)


@DTYPES
def test_pow_eager_and_compiled_agree_on_every_pair_of_special_values(dtype):
    """All 14,641 pairs: NaNs, infinities and their signs, zeros and their signs, finite
    values. Where an exponent part is 1e30, the phase c arg x + d log|x| is a huge number,
    whose cosine and sine hang on the last bit of arg x and log|x|: there only which parts
    are NaN, infinite or zero must agree, not their signs."""
    with _with_x64(dtype):
        x, y = _pairs(dtype)
        eager, compiled = _eager_and_compiled(lax.pow, x, y)
    huge_phase = (abs(y.real) >= 1e30) | (abs(y.imag) >= 1e30)
    same = _same_parts(compiled, eager, _rtol(dtype))
    assert same[~huge_phase].all(), (x[~same & ~huge_phase], y[~same & ~huge_phase])
    for part in (np.real, np.imag):
        for kind in (np.isnan, np.isinf, lambda v: v == 0):
            np.testing.assert_array_equal(kind(part(compiled)), kind(part(eager)))


@DTYPES
def test_pow_exact_cases(dtype):
    """XLA's exact results, which hold for any other operand (NaN included): x ** 0 and
    1 ** y are 1 + 0i; 0 ** y is 0 for a positive real y and NaN for any other y (the
    formula's inf or 0 times the cosine of an infinite phase); +inf ** y for a real y is
    inf (y > 0) or 0 (y < 0)."""
    z = _grid(dtype)
    with _with_x64(dtype):
        zeros = np.zeros_like(z)
        ones = np.ones_like(z)
        positive = np.array([0.5, 1, 2, 1e30], dtype)
        cases = [  # (x, y, expected)
            (z, zeros, ones), (ones, z, ones), (np.zeros(4, dtype), positive, 0),
            (np.full(4, np.inf, dtype), positive, np.inf),
            (np.full(4, np.inf, dtype), -positive, 0),
            (np.zeros(5, dtype), np.array([-1, -0.5, 1j, 1 + 1j, -2 - 1j], dtype),
             complex(np.nan, np.nan))]
        for x, y, expected in cases:
            expected = np.broadcast_to(np.asarray(expected, dtype), x.shape)
            for got in _eager_and_compiled(lax.pow, x, y):
                assert got.dtype == dtype
                ok = _same_parts(got, expected, 0)
                assert ok.all(), (x[~ok], y[~ok], got[~ok])


@DTYPES
def test_pow_of_finite_values_against_pythons_complex_power(dtype):
    """Finite, ordinary operands: the polar formula to a few ulps of |x ** y| (Python's
    complex power, in float64, is the truth for complex64; for complex128 its own rounding
    counts too, so the tolerance is wider)."""
    parts = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 0.1]
    z = np.array([complex(a, b) for a in parts for b in parts], dtype)
    x, y = np.repeat(z, z.size), np.tile(z, z.size)
    with _with_x64(dtype):
        results = _eager_and_compiled(lax.pow, x, y)
    truth = np.array([_python_power(complex(a), complex(b)) for a, b in zip(x, y)])
    defined = ~np.isnan(truth)
    rtol = 16 * np.finfo(dtype).eps * (1 if dtype == np.complex64 else 8)
    for got in results:
        error = np.abs(got[defined].astype(np.complex128) - truth[defined])
        assert (error <= rtol * np.abs(truth[defined]) + 1e-300).all()


def _python_power(x, y):
    """x ** y by Python (C's complex arithmetic on exp and log), NaN where Python refuses
    (0 to a complex or negative power) and at 0 ** y = 0 for positive real y (exact)."""
    if y == 0:
        return 1
    if x == 0:
        return 0 if (y.imag == 0 and y.real > 0) else complex(math.nan, math.nan)
    return cmath.exp(y * cmath.log(x))


@DTYPES
def test_pow_modulus_overflow_gives_nan_in_a_part_whose_phase_factor_is_zero(dtype):
    """Each part is the modulus |x|^c e^(-d arg x) times cos q or sin q: where the modulus
    overflows and q is 0 (a positive real x to a real power), the imaginary part is
    inf * 0, NaN; the real part is inf. (XLA's values; NumPy's repeated squaring gives
    inf + 0i.)"""
    huge = 1e30 if dtype == np.complex64 else 1e300
    with _with_x64(dtype):
        x, y = np.array([huge, 2], dtype), np.array([2, huge], dtype)
        for got in _eager_and_compiled(lax.pow, x, y):
            assert np.isposinf(got.real).all() and np.isnan(got.imag).all()


@DTYPES
def test_power_promotes_a_real_operand_and_keeps_the_complex_rule(dtype):
    """jnp.power with a real base or exponent promotes it to complex and computes the same
    values as two complex operands; an integer exponent array is converted to the base's
    type (lax.pow)."""
    real = np.array([0.0, -0.0, 2.0, -1.0, np.inf, np.nan], np.finfo(dtype).dtype)
    with _with_x64(dtype):
        z = _grid(dtype)
        x, y = np.repeat(real, z.size), np.tile(z, real.size)
        want = np.asarray(lax.pow(x.astype(dtype), y))
        eager, compiled = np.asarray(jnp.power(x, y)), np.asarray(nbjax.jit(jnp.power)(x, y))
        ints = np.array([-3, -1, 0, 1, 2, 7], np.int32)
        base, n = np.repeat(z, ints.size), np.tile(ints, z.size)
        int_want = np.asarray(lax.pow(base, n.astype(dtype)))
        int_eager, int_compiled = _eager_and_compiled(lax.pow, base, n)
    assert eager.dtype == compiled.dtype == dtype
    assert _same_parts(eager, want, 0).all() and _same_parts(int_eager, int_want, 0).all()
    # (Compiled: where the phase is a huge multiple of arg x, or an overflowed power's phase
    # is near a multiple of pi/2, the last bit of arg x decides the signs.)
    huge_phase = (abs(y.real) >= 1e30) | (abs(y.imag) >= 1e30)
    assert _same_parts(compiled, want, _rtol(dtype))[~huge_phase].all()
    huge_power = (abs(base) >= 1e30) & (abs(n) > 1)
    assert _same_parts(int_compiled, int_want, _rtol(dtype))[~huge_power].all()


# --- log1p -----------------------------------------------------------------------------

def _log1p_truth(z):
    """log|1 + z| + i arg(1 + z) for a Python complex z of two floats: the real part
    log(1 + s) / 2 with s = 2a + a^2 + b^2 summed exactly in rationals (then log1p where s
    is small, else the log of its power-of-two scaled value); arg by atan2 in float64."""
    a, b = Fraction(z.real), Fraction(z.imag)
    s = 2 * a + a * a + b * b
    angle = math.atan2(z.imag, float(1 + a))
    if s == -1:
        return complex(-math.inf, angle)
    if abs(s) < 0.5:
        return complex(math.log1p(float(s)) / 2, angle)
    t = 1 + s
    k = t.numerator.bit_length() - t.denominator.bit_length()
    return complex((math.log(float(t / Fraction(2) ** k)) + k * math.log(2)) / 2, angle)


def _log1p_samples(dtype):
    """Tiny, ordinary and huge arguments in every direction, points on the circle
    |1 + z| = 1 (where the real part cancels) and next to -1."""
    rng = np.random.default_rng(3)
    smallest, largest = (-40, 38) if dtype == np.complex64 else (-300, 300)
    angle = rng.uniform(-np.pi, np.pi, 400)
    spread = 10.0 ** rng.uniform(smallest, largest, 400) * np.exp(1j * angle)
    circle = np.exp(1j * angle) - 1
    near_minus_one = -1 + 10.0 ** rng.uniform(smallest, -1, 400) * np.exp(1j * angle)
    biggest = float(np.finfo(dtype).max)  # (|1 + z| beyond it: hypot(1 + a, b) overflows)
    fixed = [1e-20 + 1e-20j, -1e-20 + 1e-20j, 1e-30j, 1e-30, -2 + 1e-30j, -0.5 + 1e-10j,
             complex(0.9 * biggest, 0.9 * biggest), complex(-biggest, 1)]
    z = np.concatenate([spread, circle, near_minus_one, fixed]).astype(dtype)
    return z[np.isfinite(z)]


@DTYPES
def test_log1p_is_accurate_for_tiny_huge_and_cancelling_arguments(dtype):
    """Each part within a few ulps of itself, or of |log1p z| for a part far below it
    (arg(1 + z) near 0 at a real z); the reference once computed log(1 + z), which is 0 at
    1e-20 + 1e-20i."""
    with _with_x64(dtype):
        z = _log1p_samples(dtype)
        results = _eager_and_compiled(lax.log1p, z)
        tiny = np.asarray(1e-20 + 1e-20j, dtype)
        np.testing.assert_allclose(np.asarray(jnp.log1p(tiny)), tiny, rtol=np.finfo(dtype).eps)
    truth = np.array([_log1p_truth(complex(v)) for v in z])
    eps, atol = np.finfo(dtype).eps, np.finfo(dtype).smallest_subnormal
    for got in results:
        got = got.astype(np.complex128)
        for g, w in ((got.real, truth.real), (got.imag, truth.imag)):
            allowed = 4 * eps * np.abs(w) + atol
            assert (np.abs(g - w) <= allowed).all(), z[np.abs(g - w) > allowed]


@DTYPES
def test_log1p_eager_and_compiled_agree_on_special_values(dtype):
    """Every grid value (tiny parts included): the same NaNs, infinities, signed zeros."""
    with _with_x64(dtype):
        z = _grid(dtype)
        eager, compiled = _eager_and_compiled(lax.log1p, z)
    assert _same_parts(compiled, eager, _rtol(dtype)).all()


@DTYPES
def test_log1p_special_values_are_c99s_log_of_1_plus_z(dtype):
    """C99's clog (Annex G) at 1 + z: a pole at -1, +inf real parts at infinities (with
    NaN, too), the angle of an infinite point, NaN elsewhere with a NaN part."""
    inf, nan, pi = math.inf, math.nan, math.pi
    cases = [((-1, 0), (-inf, 0)), ((-1, -0.0), (-inf, -0.0)), ((inf, nan), (inf, nan)),
             ((nan, inf), (inf, nan)), ((-inf, nan), (inf, nan)), ((-inf, 1), (inf, pi)),
             ((-inf, -1), (inf, -pi)), ((inf, 1), (inf, 0)), ((inf, inf), (inf, pi / 4)),
             ((-inf, inf), (inf, 3 * pi / 4)), ((1, inf), (inf, pi / 2)),
             ((nan, 1), (nan, nan)), ((-0.0, -0.0), (0, -0.0))]
    z, want = [np.array([complex(*case[k]) for case in cases], dtype) for k in (0, 1)]
    with _with_x64(dtype):
        for got in _eager_and_compiled(lax.log1p, z):
            assert _same_parts(got, want, _rtol(dtype)).all(), (z, got)

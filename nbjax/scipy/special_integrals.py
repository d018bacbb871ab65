"""The exponential, sine/cosine and Fresnel integrals, Dawson's integral, the dilogarithm
(``spence``) and the Faddeeva function ``wofz``, for ``jax.scipy.special``.

Each is a composition of jnp/lax operations over a fixed number of terms (so jit, vmap and
the other transformations work), with the classical method for each part of the domain: a
power series near 0 and a continued fraction or asymptotic series far from it. Those whose
derivative has a closed form carry it as a custom JVP (``expi' = e^x / x``, ``dawsn' = 1 - 2x
dawsn`` ...), cheaper and more accurate than differentiating the series term by term.

Complex intermediate values (the continued fraction of ``E1(ix)``, ``w(z)``) are carried as
(real, imaginary) pairs of real arrays, so the functions with real inputs compile to real
code.
"""

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..custom_derivatives import custom_jvp
from ..numpy.util import half_precision_in_float32, promote_args_inexact

__all__ = ["dawsn", "exp1", "expi", "expn", "fresnel", "sici", "spence", "wofz"]

_EULER = 0.5772156649015329  # Euler's constant gamma
_SQRT_PI = float(np.sqrt(np.pi))


def _nan_like(x):
    return jnp.full_like(x, np.nan)


def _strongly_typed(*xs):
    """``xs``, no longer weakly typed: JAX computes ``dawsn``, ``expn``, ``exp1``, ``fresnel``
    and ``spence`` with constants of their operand's dtype (or through ``jnp.piecewise``),
    which make their results strongly typed even for Python numbers."""
    return [lax.convert_element_type(x, x.dtype, weak_type=False) for x in xs]


def float32_or_64(x, detail=", see docstring for supported types"):
    """``x`` as an array, which must be float32 or float64: JAX refuses any other dtype
    (integers, bool and half precision included, rather than promote them) in ``ndtr``,
    ``log_ndtr``, ``ndtri`` and ``spence``, whose approximations are written for those two.
    The TypeError is JAX's (``detail`` ends its message)."""
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported{detail}.")
    return x


# --- complex arithmetic on (real, imaginary) pairs ----------------------------------------------

def _cmul(a, b):
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


def _cdiv(a, b):
    """``a / b``, scaled by the larger part of b so that |b|^2 does not overflow."""
    big_re = jnp.abs(b[0]) >= jnp.abs(b[1])
    small, large = jnp.where(big_re, b[1], b[0]), jnp.where(big_re, b[0], b[1])
    ratio = small / large
    denom = large + small * ratio
    re = jnp.where(big_re, a[0] + a[1] * ratio, a[0] * ratio + a[1]) / denom
    im = jnp.where(big_re, a[1] - a[0] * ratio, a[1] * ratio - a[0]) / denom
    return re, im


def _cexp_i(theta):
    """``exp(i theta)``."""
    return jnp.cos(theta), jnp.sin(theta)


# --- the exponential integrals E_n, E1 and Ei -----------------------------------------------------

_EXPN_SERIES_TERMS = 30    # x < 2: 2^30 / 30! is below float64 rounding
_EXPN_FRACTION_TERMS = 50  # x >= 2: measured to converge to rounding


def _expn_series(n, x):
    """``E_n(x)`` for 0 < x < 2 and integer n >= 1: the power series
    ``E_n(x) = (-x)^(n-1) / (n-1)! (psi(n) - log x) - sum_{i != n-1} (-x)^i / ((i-n+1) i!)``,
    whose i = 0 term is ``1/(n-1)`` (or, for n = 1, ``-gamma - log x``)."""
    nm1 = n - 1
    log_x = jnp.log(x)
    total = jnp.where(nm1 == 0, -log_x - _EULER, 1 / jnp.where(nm1 == 0, 1.0, nm1))
    psi = lax.digamma(jnp.maximum(n, 1.0))
    fact = jnp.ones_like(x)
    for i in range(1, _EXPN_SERIES_TERMS + 1):
        fact = fact * (-x / i)
        hit = nm1 == i
        term = jnp.where(hit, fact * (psi - log_x), -fact / jnp.where(hit, 1.0, i - nm1))
        total = total + term
    return total


def _expn_fraction(n, x):
    """``E_n(x)`` for x >= 2: ``e^-x / (x + n - 1 n / (x + n + 2 - 2 (n+1) / (x + n + 4 -
    ...)))``, evaluated from the tail."""
    tail = jnp.zeros_like(x)
    for k in range(_EXPN_FRACTION_TERMS, 0, -1):
        tail = k * (n - 1 + k) / (x + n + 2 * k - tail)
    return jnp.exp(-x) / (x + n - tail)


def _expn_value(n, x):
    small = x < 2
    series = _expn_series(n, jnp.where(small & (x > 0), x, 1.0))
    fraction = _expn_fraction(n, jnp.where(small, 2.0, x))
    out = jnp.where(small, series, fraction)
    safe_x = jnp.where(x > 0, x, 1.0)
    out = jnp.where(n == 0, jnp.exp(-safe_x) / safe_x, out)
    at_zero = jnp.where(n > 1, 1 / jnp.maximum(n - 1, 1.0), jnp.full_like(x, np.inf))
    out = jnp.where(x == 0, at_zero, jnp.where(x == np.inf, jnp.zeros_like(x), out))
    bad = (x < 0) | (n < 0) | (n != jnp.floor(n)) | jnp.isnan(x) | jnp.isnan(n)
    return jnp.where(bad, _nan_like(x), out)


@custom_jvp
def _expn(n, x):
    return _expn_value(n, x)


@_expn.defjvp
def _expn_jvp(primals, tangents):
    """``dE_n/dx = -E_{n-1}(x)``, with ``E_{-1}(x) = e^-x (x + 1) / x^2`` for n = 0; n is an
    integer, so it has no tangent."""
    (n, x), (_, x_dot) = primals, tangents
    safe_x = jnp.where(x > 0, x, 1.0)
    lower = jnp.where(n == 0, jnp.exp(-safe_x) * (safe_x + 1) / (safe_x * safe_x),
                      _expn_value(jnp.maximum(n - 1, 0.0), x))
    return _expn(n, x), -lower * x_dot


def expn(n, x):
    """The generalized exponential integral ``E_n(x) = int_1^inf e^(-xt) / t^n dt`` for
    integer ``n >= 0`` and ``x >= 0`` (NaN elsewhere)."""
    n, x = jnp.broadcast_arrays(*_strongly_typed(*promote_args_inexact("expn", n, x)))
    return _expn(n, x)


@half_precision_in_float32
def exp1(x):
    """The exponential integral ``E1(x) = int_x^inf e^-t / t dt`` (NaN for x < 0)."""
    x, = _strongly_typed(*promote_args_inexact("exp1", x))
    return _expn(jnp.ones_like(x), x)


_EXPI_SWITCH = 40.0   # where the asymptotic series of Ei reaches float64 rounding
_EXPI_SERIES_TERMS = 120  # x^k / (k k!) at x = 40, k = 120: below rounding of Ei(40)


def _expi_positive(x):
    """``Ei(x)`` for x > 0: ``gamma + log x + sum_k x^k / (k k!)`` up to 40, then the
    asymptotic ``e^x / x sum_k k! / x^k`` (its terms shrink down to ~1e-17 at k = 40)."""
    small = x <= _EXPI_SWITCH
    xs = jnp.where(small, x, 1.0)

    def body(k, carry):
        term, total = carry
        k = k.astype(xs.dtype) + 1
        term = term * xs / k
        return term, total + term / k
    _, total = lax.fori_loop(0, _EXPI_SERIES_TERMS, body, (jnp.ones_like(xs), jnp.zeros_like(xs)))
    series = _EULER + jnp.log(xs) + total
    xl = jnp.where(small, _EXPI_SWITCH, x)
    term, asymptotic = jnp.ones_like(x), jnp.ones_like(x)
    for k in range(1, int(_EXPI_SWITCH)):
        term = term * k / xl
        asymptotic = asymptotic + term
    return jnp.where(small, series, jnp.exp(xl) / xl * asymptotic)


@half_precision_in_float32
def expi(x):
    """The exponential integral ``Ei(x) = PV int_-inf^x e^t / t dt``: ``-E1(-x)`` for x < 0,
    -inf at 0."""
    x, = promote_args_inexact("expi", x)
    return _expi(x)


@custom_jvp
def _expi(x):
    positive = _expi_positive(jnp.where(x > 0, x, 1.0))
    negative = -_expn_value(jnp.ones_like(x), jnp.where(x < 0, -x, 1.0))
    out = jnp.where(x > 0, positive, negative)
    out = jnp.where(x == np.inf, x, out)
    return jnp.where(x == 0, jnp.full_like(x, -np.inf), jnp.where(jnp.isnan(x), x, out))


_expi.defjvps(lambda t, out, x: t * jnp.exp(x) / x)


# --- the sine and cosine integrals ----------------------------------------------------------------

_SICI_SWITCH = 4.0
_SICI_SERIES_TERMS = 40    # 4^40 / 40! is below float64 rounding
_SICI_FRACTION_TERMS = 40  # measured to converge to rounding from x = 4


def _sici_series(x):
    """``Si = sum_k (-1)^k x^(2k+1) / ((2k+1) (2k+1)!)`` and ``Ci = gamma + log x + sum_k>0
    (-1)^k x^(2k) / (2k (2k)!)``, built from the terms ``x^j / j!``."""
    term, si, ci = jnp.ones_like(x), jnp.zeros_like(x), jnp.zeros_like(x)
    for j in range(1, _SICI_SERIES_TERMS + 1):
        term = term * x / j
        sign = 1 if (j // 2) % 2 == 0 else -1
        if j % 2:
            si = si + sign * term / j
        else:
            ci = ci + sign * term / j
    return si, ci + _EULER + jnp.log(x)


def _sici_fraction(x):
    """``E1(ix) = -Ci(x) + i (Si(x) - pi/2)`` by the continued fraction ``e^-z / (z + 1 -
    1 / (z + 3 - 4 / (z + 5 - ...)))`` at z = ix, from the tail."""
    def step(i, tail):
        k = (_SICI_FRACTION_TERMS - i).astype(x.dtype)
        inverse = _cdiv((jnp.ones_like(x), jnp.zeros_like(x)), (2 * k + 1 - tail[0], x - tail[1]))
        return k * k * inverse[0], k * k * inverse[1]
    tail = lax.fori_loop(0, _SICI_FRACTION_TERMS, step, (jnp.zeros_like(x), jnp.zeros_like(x)))
    cos, sin = _cexp_i(x)
    e1 = _cdiv((cos, -sin), (1 - tail[0], x - tail[1]))
    return e1[1] + np.pi / 2, -e1[0]


@custom_jvp
def _sici(x):
    ax = jnp.abs(x)
    small = ax <= _SICI_SWITCH
    si_s, ci_s = _sici_series(jnp.where(small, ax, 1.0))
    si_f, ci_f = _sici_fraction(jnp.where(small | jnp.isinf(ax), 2 * _SICI_SWITCH, ax))
    si, ci = jnp.where(small, si_s, si_f), jnp.where(small, ci_s, ci_f)
    si = jnp.where(jnp.isinf(ax), np.pi / 2, si)
    ci = jnp.where(x == 0, -np.inf, jnp.where(x == np.inf, 0.0, ci))
    ci = jnp.where(x == -np.inf, np.nan, ci)
    return jnp.where(x < 0, -si, si), ci


@_sici.defjvp
def _sici_jvp(primals, tangents):
    """``Si' = sin x / x`` (1 at 0) and ``Ci' = cos x / x``."""
    (x,), (x_dot,) = primals, tangents
    safe = jnp.where(x == 0, 1.0, x)
    sinc = jnp.where(x == 0, 1.0, jnp.sin(safe) / safe)
    return _sici(x), (sinc * x_dot, jnp.cos(x) / x * x_dot)


def sici(x):
    """The sine and cosine integrals ``(Si(x), Ci(x))``: ``Si = int_0^x sin t / t dt``,
    ``Ci = gamma + log|x| + int_0^|x| (cos t - 1) / t dt`` (the real part for x < 0)."""
    x, = promote_args_inexact("sici", x)
    return _sici(x)


# --- the Faddeeva function w(z) = exp(-z^2) erfc(-iz) ---------------------------------------------

def _weideman_coefficients(n):
    """The coefficients of Weideman's rational expansion of w(z) in the upper half-plane
    (SIAM J. Numer. Anal. 31, 1994): the Fourier coefficients, by FFT, of
    ``exp(-t^2) (L^2 + t^2)`` at ``t = L tan(theta / 2)``, with ``L = sqrt(n / sqrt 2)``;
    highest power first."""
    m = 2 * n
    scale = np.sqrt(n / np.sqrt(2))
    t = scale * np.tan(np.arange(-m + 1, m) * np.pi / m / 2)
    samples = np.concatenate([[0.0], np.exp(-t * t) * (scale * scale + t * t)])
    coefficients = np.real(np.fft.fft(np.fft.fftshift(samples))) / (2 * m)
    return float(scale), [float(c) for c in coefficients[1:n + 1][::-1]]


_W_SCALE, _W_COEFFICIENTS = _weideman_coefficients(40)  # relative error ~1e-14


def _w_upper(re, im):
    """``w(z)`` for Im z >= 0: ``2 p(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz))`` with
    ``Z = (L + iz) / (L - iz)`` and p the polynomial of Weideman's coefficients."""
    below = (_W_SCALE + im, -re)  # L - iz
    ratio = _cdiv((_W_SCALE - im, re), below)
    poly = (jnp.zeros_like(re), jnp.zeros_like(re))
    for c in _W_COEFFICIENTS:
        poly = _cmul(poly, ratio)
        poly = (poly[0] + c, poly[1])
    main = _cdiv(_cdiv((2 * poly[0], 2 * poly[1]), below), below)
    tail = _cdiv((jnp.full_like(re, 1 / _SQRT_PI), jnp.zeros_like(re)), below)
    return main[0] + tail[0], main[1] + tail[1]


def _w(re, im):
    """``w(z)`` on the plane: in the lower half by ``w(z) = 2 exp(-z^2) - w(-z)``."""
    lower = im < 0
    w_re, w_im = _w_upper(jnp.where(lower, -re, re), jnp.abs(im))
    magnitude = jnp.exp(jnp.where(lower, im * im - re * re, 0.0))
    cos, sin = _cexp_i(jnp.where(lower, -2 * re * im, 0.0))
    return (jnp.where(lower, 2 * magnitude * cos - w_re, w_re),
            jnp.where(lower, 2 * magnitude * sin - w_im, w_im))


@custom_jvp
def _wofz(z):
    w_re, w_im = _w(lax.real(z), lax.imag(z))
    return lax.complex(w_re, w_im)


@_wofz.defjvp
def _wofz_jvp(primals, tangents):
    """``w'(z) = 2i / sqrt(pi) - 2 z w(z)`` (w is analytic)."""
    (z,), (z_dot,) = primals, tangents
    w = _wofz(z)
    return w, (2j / _SQRT_PI - 2 * z * w) * z_dot


def wofz(z):
    """The Faddeeva function ``w(z) = exp(-z^2) erfc(-iz)``; complex for real inputs too
    (complex64 for float16 and bfloat16, as JAX's)."""
    z, = promote_args_inexact("wofz", z)
    if not jnp.iscomplexobj(z):
        z = z.astype(jnp.promote_types(z.dtype, jnp.float32))
        z = lax.complex(z, jnp.zeros_like(z))
    return _wofz(z)


# --- the Fresnel integrals ------------------------------------------------------------------------

# Where the power series gives way to the large-argument form. The series alternates, and
# its terms outgrow the sum as x grows (at x = 1.5 they reach 7 while C is 0.45): in float32
# that costs C up to 11 ulps between 1.35 and 1.5, where the large-argument form is within 4
# (and JAX's Cephes rational within 1); below 1.15 the series is within 4 ulps, and the
# large-argument form is not (S at x = 0.8: 7 ulps). Float64 keeps 1.5.
_FRESNEL_SWITCH = {8: 1.5, 4: 1.15}
_FRESNEL_SERIES_TERMS = 32  # (pi/2 1.5^2)^32 / 32! is below float64 rounding


def _fresnel_series(x):
    """``C = x sum_k (-1)^k u^(2k) / ((2k)! (4k+1))`` and ``S = x sum_k (-1)^k u^(2k+1) /
    ((2k+1)! (4k+3))`` with ``u = pi x^2 / 2``, built from the terms ``u^j / j!``."""
    u = (np.pi / 2) * x * x
    term, s, c = jnp.ones_like(x), jnp.zeros_like(x), jnp.ones_like(x)
    for j in range(1, _FRESNEL_SERIES_TERMS + 1):
        term = term * u / j
        sign = 1 if (j // 2) % 2 == 0 else -1
        if j % 2:
            s = s + sign * term / (2 * j + 1)
        else:
            c = c + sign * term / (2 * j + 1)
    return x * s, x * c


def _square_mod_4(x):
    """``x^2`` modulo 4 (``exp(i pi x^2 / 2)`` has period 4 in ``x^2``), to the accuracy of
    a float in [0, 4) even where ``x^2`` has no bits left below 4 (x = 3000 in float32):
    ``x`` is split (Veltkamp) into a head of half the significand's bits and a tail, the
    partial products ``h^2`` and ``2ht`` are exact, and each is reduced modulo 4 exactly."""
    bits = jnp.finfo(x.dtype).nmant + 1
    c = x * float(2 ** ((bits + 1) // 2) + 1)
    head = c - (c - x)
    tail = x - head
    return (jnp.fmod(head * head, 4.0) + jnp.fmod(2 * head * tail, 4.0)) + tail * tail


def _fresnel_large(x):
    """``C + iS = (1+i)/2 (1 - exp(i pi x^2 / 2) w((1+i) s))`` with ``s = sqrt(pi) x / 2``,
    from ``C + iS = (1+i)/2 erf((1-i) s)`` and ``erfc(z) = exp(-z^2) w(iz)``."""
    s = (_SQRT_PI / 2) * x
    w = _w(s, s)
    rotated = _cmul(_cexp_i((np.pi / 2) * _square_mod_4(x)), w)
    rest = (1 - rotated[0], -rotated[1])
    return (rest[0] + rest[1]) / 2, (rest[0] - rest[1]) / 2  # (1+i)/2 rest = (S, C) swapped


@custom_jvp
def _fresnel(x):
    ax = jnp.abs(x)
    switch = _FRESNEL_SWITCH.get(ax.dtype.itemsize, 1.15)
    small = ax < switch
    s_s, c_s = _fresnel_series(jnp.where(small, ax, 0.0))
    # (beyond 4/eps, S and C are 1/2 to the type's precision: their oscillation is 1/(pi x))
    limit = ax > 4 / float(jnp.finfo(ax.dtype).eps)
    s_l, c_l = _fresnel_large(jnp.where(small | limit, 2 * switch, ax))
    s, c = jnp.where(small, s_s, s_l), jnp.where(small, c_s, c_l)
    s, c = jnp.where(limit, 0.5, s), jnp.where(limit, 0.5, c)
    negative = x < 0
    return jnp.where(negative, -s, s), jnp.where(negative, -c, c)


@_fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    """``S' = sin(pi x^2 / 2)``, ``C' = cos(pi x^2 / 2)``."""
    (x,), (x_dot,) = primals, tangents
    phase = (np.pi / 2) * _square_mod_4(x)
    return _fresnel(x), (jnp.sin(phase) * x_dot, jnp.cos(phase) * x_dot)


@half_precision_in_float32
def fresnel(x):
    """The Fresnel integrals ``(S(x), C(x))``: ``int_0^x sin(pi t^2 / 2) dt`` and
    ``int_0^x cos(pi t^2 / 2) dt``."""
    x, = _strongly_typed(*promote_args_inexact("fresnel", x))
    return _fresnel(x)


# --- Dawson's integral ----------------------------------------------------------------------------

_DAWSN_SERIES_SWITCH = 0.2
_DAWSN_SERIES_TERMS = 12
_DAWSN_STEP = 0.2       # Rybicki's sampling step: the method's error is ~exp(-(pi/2h)^2)
_DAWSN_SAMPLES = 18     # exp(-((2*18+1) 0.2)^2) is below float64 rounding
_DAWSN_ASYMPTOTIC = 1e4


def _dawsn_rybicki(x):
    """Rybicki's sum for ``F(x)``, x >= 0.2 (Numerical Recipes 6.10): with ``x0`` the even
    multiple of h nearest x and ``t = x - x0``, ``F(x) ~ exp(-t^2) / sqrt(pi) sum_{n odd}
    exp(-(n h)^2) (exp(2 t n h) / (n0 + n) + exp(-2 t n h) / (n0 - n))``."""
    h = _DAWSN_STEP
    n0 = 2 * jnp.round(0.5 * x / h)
    t = x - n0 * h
    step = jnp.exp(2 * t * h)
    grow = step * step
    total = jnp.zeros_like(x)
    for i in range(_DAWSN_SAMPLES):
        n = 2 * i + 1
        weight = float(np.exp(-(n * h) ** 2))
        total = total + weight * (step / (n0 + n) + 1 / ((n0 - n) * step))
        step = step * grow
    return jnp.exp(-t * t) * total / _SQRT_PI


@custom_jvp
def _dawsn(x):
    ax = jnp.abs(x)
    small = ax < _DAWSN_SERIES_SWITCH
    x2 = x * x
    term, series = jnp.ones_like(x), jnp.ones_like(x)
    for k in range(1, _DAWSN_SERIES_TERMS + 1):
        term = term * (-2 * x2) / (2 * k + 1)
        series = series + term
    large = ax > _DAWSN_ASYMPTOTIC
    middle = _dawsn_rybicki(jnp.where(small | large, 1.0, ax))
    far = jnp.where(large, ax, 1.0)
    asymptotic = (1 + 0.5 / (far * far)) / (2 * far)
    out = jnp.where(large, asymptotic, middle)
    return jnp.where(small, x * series, jnp.where(x < 0, -out, out))


_dawsn.defjvps(lambda t, out, x: t * (1 - 2 * x * out))


@half_precision_in_float32
def dawsn(x):
    """Dawson's integral ``F(x) = exp(-x^2) int_0^x exp(t^2) dt``."""
    x, = _strongly_typed(*promote_args_inexact("dawsn", x))
    return _dawsn(x)


# --- the dilogarithm ------------------------------------------------------------------------------

_LI2_TERMS = 56  # for |t| <= 1/2: 2^-56 / 56^2 is below float64 rounding
_PI2_6 = np.pi ** 2 / 6


def _li2_series(t):
    """``Li2(t) = sum_k t^k / k^2`` for |t| <= 1/2."""
    power, total = jnp.ones_like(t), jnp.zeros_like(t)
    for k in range(1, _LI2_TERMS + 1):
        power = power * t
        total = total + power / (k * k)
    return total


def _spence_value(x):
    """``Li2(1 - x)``, reduced to the series at |t| <= 1/2 by Euler's reflection
    ``Li2(t) + Li2(1-t) = pi^2/6 - log t log(1-t)`` and Landen's identity
    ``Li2(1-x) = -Li2((x-1)/x) - log^2(x) / 2`` for x > 1."""
    low = x <= 0.5
    mid = (x > 0.5) & (x <= 1.5)
    near = (x > 1.5) & (x <= 2)
    safe = jnp.where(x > 0, jnp.where(jnp.isinf(x), 2.0, x), 1.0)
    log_x = jnp.log(safe)
    a = _PI2_6 - log_x * jnp.log1p(-jnp.where(low, safe, 0.0)) - _li2_series(
        jnp.where(low, safe, 0.0))
    b = _li2_series(jnp.where(mid, 1 - safe, 0.0))
    w = (safe - 1) / safe
    c = -_li2_series(jnp.where(near, w, 0.0)) - 0.5 * log_x * log_x
    li2_w = _PI2_6 + jnp.log(w) * log_x - _li2_series(jnp.where(near | low | mid, 0.5, 1 / safe))
    d = -li2_w - 0.5 * log_x * log_x
    out = jnp.where(low, a, jnp.where(mid, b, jnp.where(near, c, d)))
    out = jnp.where(x == 0, _PI2_6, out)
    return jnp.where((x < 0) | ~jnp.isfinite(x), _nan_like(x), out)


@custom_jvp
def _spence(x):
    return _spence_value(x)


_spence.defjvps(lambda t, out, x: t * jnp.where(
    x == 1, -1.0, jnp.log(x) / (1 - jnp.where(x == 1, 0.0, x))))


def spence(x):
    """Spence's function, the dilogarithm ``Li2(1 - x) = int_1^x log t / (1 - t) dt``, for
    finite x >= 0 (NaN elsewhere, as scipy)."""
    x, = _strongly_typed(float32_or_64(x))
    return _spence(x)

"""Fidelity of scipy.special and of a sampler's derivative to JAX 0.10.2: the Hurwitz zeta
function at negative q (SciPy's values) and its derivatives, the derivatives of entr and logit
at the ends of their domains, the JVP of fma (the samplers' multiply-add) with an operand of
size-1 axes, and which special functions return weakly typed results for Python numbers."""

import numpy as np
import pytest
import scipy.special

import nbjax
import nbjax.numpy as jnp
import nbjax.random as random
import nbjax.scipy.special as special
from nbjax import lax

from helpers import assert_close

# (s, q) at negative, non-integer q, where SciPy sums the terms (scipy.special.zeta).
ZETA_NEGATIVE_Q = [(3, -0.5), (3, -1.25), (3, -1.5), (5, -7.3), (4, -2.5), (2, -0.5),
                   (3, -0.001), (7, -3.7)]


def _central_difference(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def _assert_matches_difference(derivative, f, x, h, rtol):
    """``derivative`` is the central difference of ``f`` at ``x`` within ``rtol``, relative to
    it and to ``|f(x)|`` (the difference's rounding error is relative to f's values)."""
    difference = _central_difference(f, x, h)
    assert_close(derivative, difference, rtol=rtol, scale=abs(difference) + abs(f(x)))


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-6), (np.float64, 1e-13)])
def test_zeta_at_negative_q_is_scipys(x64, dtype, rtol):
    """(At the q that the dtype holds exactly: near a pole a rounded q moves zeta far.)"""
    cases = [(s, q) for s, q in ZETA_NEGATIVE_Q if float(dtype(q)) == q]
    s, q = (np.array(operand, dtype) for operand in zip(*cases))
    got = special.zeta(s, q)
    assert got.dtype == dtype
    want = scipy.special.zeta(*(np.array(operand, np.float64) for operand in zip(*cases)))
    assert_close(got, want, rtol=rtol, scale=np.abs(want))


def test_zeta_at_negative_q_keeps_a_small_sum_accurate(x64):
    """For an odd s the terms at ``-n - 1/2 .. -1/2`` cancel those at ``1/2 .. n + 1/2``, so
    ``zeta(s, -n - 1/2) = zeta(s, n + 3/2)``: about 5e-13 for s = 3, n = 1e6, where summing
    the terms (SciPy) loses three digits to rounding."""
    for n in (0.0, 10.0, 1e6):
        assert_close(special.zeta(3.0, -n - 0.5), special.zeta(3.0, n + 1.5), rtol=1e-14)
    even = special.zeta(4.0, -2.5)
    assert_close(even, 2.5 ** -4 + 1.5 ** -4 + 2 * 0.5 ** -4 + special.zeta(4.0, 1.5),
                 rtol=1e-14)


def test_zeta_is_differentiable_in_s_and_q(x64):
    """JAX differentiates scipy.special.zeta through a series in both operands (lax.zeta
    itself has no derivative): ``d/dq zeta(s, q) = -s zeta(s + 1, q)``, and d/ds as the
    finite difference."""
    s, q = 2.0, 0.7
    ds, dq = nbjax.grad(special.zeta, argnums=(0, 1))(s, q)
    assert_close(dq, -s * special.zeta(s + 1, q), rtol=1e-12)
    _assert_matches_difference(ds, lambda v: float(special.zeta(v, q)), s, 1e-5, 1e-8)
    ds32, dq32 = nbjax.grad(special.zeta, argnums=(0, 1))(np.float32(s), np.float32(q))
    assert ds32.dtype == dq32.dtype == np.float32
    assert_close([ds32, dq32], [ds, dq], rtol=1e-6)
    qs = np.array([0.7, 1.5, 4.0])
    assert_close(nbjax.vmap(nbjax.grad(special.zeta, 1), (None, 0))(3.0, qs),
                 -3 * special.zeta(4.0, qs), rtol=1e-12)
    with pytest.raises(NotImplementedError):
        nbjax.grad(lax.zeta)(2.0, 0.7)
    with pytest.raises(NotImplementedError, match="Riemann"):
        nbjax.grad(special.zeta)(2.0)


def test_entr_and_logit_derivatives_at_the_domain_ends():
    """JAX: ``entr' = -(log x + 1)`` is +inf at 0, ``logit' = 1 / (x (1 - x))`` is +inf at 0
    and 1 (the compositions would give 0 and NaN); the values are unchanged."""
    assert nbjax.grad(special.entr)(0.0) == np.inf
    assert nbjax.grad(special.logit)(0.0) == nbjax.grad(special.logit)(1.0) == np.inf
    entr_at_zero = special.entr(0.0)
    assert entr_at_zero == 0 and np.signbit(entr_at_zero)
    assert special.logit(0.0) == -np.inf and special.logit(1.0) == np.inf
    assert special.entr(-1.0) == -np.inf


@pytest.mark.parametrize("fn", [special.entr, special.logit])
def test_entr_and_logit_derivatives_inside_the_domain(x64, fn):
    for x in (0.1, 0.5, 0.8):
        _assert_matches_difference(nbjax.grad(fn)(x), lambda v: float(fn(v)), x, 1e-6, 1e-8)


def test_uniform_derivative_in_a_scalar_minval():
    """``u = minval + (maxval - minval) r`` for draws r that do not depend on the bounds, so
    ``d sum(u) / d minval = sum(1 - r) = sum((maxval - u) / (maxval - minval))``."""
    key = random.PRNGKey(0)

    def total(low):
        return random.uniform(key, (3,), minval=low, maxval=5.0).sum()

    u = np.asarray(random.uniform(key, (3,), minval=1.0, maxval=5.0), np.float64)
    assert_close(nbjax.grad(total)(1.0), np.sum((5.0 - u) / 4.0), rtol=1e-6, scale=3.0)
    _, tangent = nbjax.jvp(lambda low: random.uniform(key, (3,), minval=low, maxval=5.0),
                           (1.0,), (1.0,))
    assert tangent.shape == (3,)
    assert_close(tangent, (5.0 - u) / 4.0, rtol=1e-6, scale=1.0)


def test_truncated_normal_derivative_in_a_scalar_lower(x64):
    key = random.PRNGKey(0)

    def total(low):
        return random.truncated_normal(key, low, 2.0, (3,), dtype=np.float64).sum()

    _assert_matches_difference(nbjax.grad(total)(-1.0), lambda v: float(total(v)), -1.0,
                               1e-6, 1e-7)


def test_fma_tangents_have_the_output_shape():
    """An operand with size-1 axes broadcasts in fma, and so must its tangent's term."""
    x, y, z = np.float32([1.0, 2.0, 3.0]), np.float32([4.0]), np.float32([0.5])
    _, tangent = nbjax.jvp(lax.fma, (x, y, z), (np.zeros(3, np.float32), np.float32([1.0]),
                                                np.float32([1.0])))
    assert_close(tangent, x + 1)
    _, tangent = nbjax.jvp(lambda a: lax.fma(a, y, z), (np.float32([2.0]),), (np.float32([1.0]),))
    assert_close(tangent, [4.0])
    grads = nbjax.grad(lambda a, b, c: lax.fma(a, b, c).sum(), argnums=(0, 1, 2))(x, y, z)
    assert [g.shape for g in grads] == [(3,), (1,), (1,)]
    assert_close(grads[1], [x.sum()])
    assert_close(grads[2], [3.0])


@pytest.mark.parametrize("name, args", [("dawsn", (0.5,)), ("exp1", (0.5,)),
                                        ("expn", (1, 0.5)), ("fresnel", (0.5,)),
                                        ("spence", (0.5,))])
def test_series_functions_of_python_numbers_are_strongly_typed(name, args):
    """JAX computes these with constants of the operand's dtype (or jnp.piecewise): their
    results are strongly typed float32 even for Python numbers."""
    for out in nbjax.tree_util.tree_leaves(getattr(special, name)(*args)):
        assert out.dtype == np.float32 and not out.weak_type


def test_factorial_of_a_python_number_is_weakly_typed():
    """JAX's ``where(n < 0, 0, exp(lgamma(n + 1)))`` keeps a Python number's weak type."""
    out = special.factorial(2.5)
    assert out.weak_type and out.dtype == np.float32
    assert not special.factorial(np.float32(2.5)).weak_type
    assert_close(special.factorial(np.array([-1.0, 0.0, 3.0, 2.5])),
                 [0.0, 1.0, 6.0, 3.323350970447843], rtol=1e-6)
    assert jnp.isnan(special.factorial(np.nan))

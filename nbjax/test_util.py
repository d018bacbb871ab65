"""``check_grads``: compare autodiff with finite differences, as ``jax.test_util`` does.

Derivatives are checked along one random direction: forward mode against a central
difference, reverse mode through the identity <ct, J t> = <J^T ct, t>. Order 2 checks the
derivatives of the derivative functions the same way.
"""

import functools

import numpy as np

from . import api
from .core import dtypes, get_aval, pytree

EPS = 1e-4

# Finite differences in float32 lose about half the digits; tolerances follow JAX's.
_TOLERANCE = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
              np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 2e-3,
              np.dtype(np.complex128): 1e-5}


def _tolerance(tol, dtype):
    if tol is None:
        return _TOLERANCE.get(np.dtype(dtype), 0)
    if isinstance(tol, dict):
        return {np.dtype(k): v for k, v in tol.items()}.get(np.dtype(dtype),
                                                            _TOLERANCE.get(np.dtype(dtype), 0))
    return tol


def _rand_like(rng, x):
    aval = get_aval(x)
    if not dtypes.is_inexact(aval.dtype):
        return np.zeros(aval.shape, dtypes.float0)
    r = rng.standard_normal(aval.shape)
    if dtypes.is_complex(aval.dtype):
        r = r + 1j * rng.standard_normal(aval.shape)
    return np.asarray(r, aval.dtype)


def _step(x, t, eps):
    if np.asarray(t).dtype == dtypes.float0:
        return x
    return np.asarray(x) + eps * np.asarray(t, np.asarray(x).dtype)


def numerical_jvp(f, primals, tangents, eps=EPS):
    """The central difference (f(x + eps t) - f(x - eps t)) / 2 eps, leaf-wise."""
    plus = f(*pytree.tree_map(lambda x, t: _step(x, t, eps), primals, tangents))
    minus = f(*pytree.tree_map(lambda x, t: _step(x, t, -eps), primals, tangents))
    return pytree.tree_map(
        lambda a, b: (np.asarray(a, np.complex128 if np.iscomplexobj(a) else np.float64)
                      - np.asarray(b)) / (2 * eps)
        if dtypes.is_inexact(np.asarray(a).dtype) else np.zeros(np.shape(a), dtypes.float0),
        plus, minus)


def _inner(xs, ys):
    """Re <xs, ys>, the real inner product (complex values count as pairs of reals)."""
    total = 0.0
    for x, y in zip(pytree.tree_leaves(xs), pytree.tree_leaves(ys)):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype == dtypes.float0 or y.dtype == dtypes.float0:
            continue
        total = total + np.sum(np.conj(x.astype(np.complex128)) * y.astype(np.complex128))
    return np.real(total)


def _conj(x):
    x = np.asarray(x)
    return x if x.dtype == dtypes.float0 else np.conj(x)


def check_close(actual, expected, atol=None, rtol=None, err_msg=""):
    for a, e in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected)):
        a, e = np.asarray(a), np.asarray(e)
        if a.dtype == dtypes.float0 or e.dtype == dtypes.float0:
            continue
        dtype = a.dtype if dtypes.is_inexact(a.dtype) else np.float64
        np.testing.assert_allclose(a.astype(np.complex128), e.astype(np.complex128),
                                   atol=_tolerance(atol, dtype), rtol=_tolerance(rtol, dtype),
                                   err_msg=err_msg)


def _scalar_check(actual, expected, atol, rtol, dtype, err_msg):
    np.testing.assert_allclose(actual, expected, atol=_tolerance(atol, dtype),
                               rtol=_tolerance(rtol, dtype), err_msg=err_msg)


def _lowest_precision(tree):
    leaves = [np.asarray(x).dtype for x in pytree.tree_leaves(tree)]
    inexact = [d for d in leaves if dtypes.is_inexact(d)]
    return min(inexact, key=lambda d: d.itemsize) if inexact else np.dtype(np.float64)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check ``f_jvp(args, tangents)`` (like ``partial(jvp, f)``) against finite differences."""
    rng = np.random.RandomState(0)
    tangent = pytree.tree_map(functools.partial(_rand_like, rng), args)
    v_out, t_out = f_jvp(args, tangent)
    check_close(v_out, f(*args), atol=atol, rtol=rtol, err_msg=f"{err_msg} primal")
    t_expected = numerical_jvp(f, args, tangent, eps=eps)
    check_close(t_out, t_expected, atol=atol, rtol=rtol, err_msg=f"{err_msg} tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check ``f_vjp(*args)`` (like ``partial(vjp, f)``) through <ct, J t> = <J^T ct, t>."""
    rng = np.random.RandomState(0)
    v_out, vjp_fun = f_vjp(*args)
    check_close(v_out, f(*args), atol=atol, rtol=rtol, err_msg=f"{err_msg} primal")
    tangent = pytree.tree_map(functools.partial(_rand_like, rng), args)
    t_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = pytree.tree_map(functools.partial(_rand_like, rng), v_out)
    ct_out = vjp_fun(pytree.tree_map(_conj, cotangent))
    ct_out = pytree.tree_map(_conj, ct_out)
    dtype = _lowest_precision((args, v_out))
    _scalar_check(_inner(tangent, ct_out), _inner(t_out, cotangent), atol, rtol, dtype,
                  f"{err_msg} cotangent projection")


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check forward- and/or reverse-mode derivatives of ``f`` at ``args`` up to ``order``.

    Raises AssertionError naming the derivative (e.g. "VJP of JVP") that disagrees.
    """
    args = tuple(args)
    eps = eps or EPS

    def check(f, args, order, label):
        if "fwd" in modes:
            name = f"JVP of {label}" if label else "JVP"
            check_jvp(f, functools.partial(api.jvp, f), args, atol, rtol, eps, name)
            if order > 1:
                check(functools.partial(api.jvp, f), (args, args), order - 1, name)
        if "rev" in modes:
            name = f"VJP of {label}" if label else "VJP"
            check_vjp(f, functools.partial(api.vjp, f), args, atol, rtol, eps, name)
            if order > 1:
                def f_vjp(*primals):
                    out, pullback = api.vjp(f, *primals)
                    return pullback(out)
                check(f_vjp, args, order - 1, name)

    check(f, args, order, "")

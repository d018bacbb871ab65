"""Polynomials as coefficient arrays, highest power first (NumPy's ``poly*`` functions)."""

import numpy as np

from .. import lax
from ..core import get_aval
from .util import check_arraylike, promote_dtypes, promote_dtypes_inexact

__all__ = ["polyval", "polyadd", "polysub", "polyder", "polyint"]


def _coefficients(name, *ps):
    check_arraylike(name, *ps)
    for p in ps:
        if get_aval(p).ndim != 1:
            raise ValueError(f"{name}: coefficients must be one-dimensional")
    return promote_dtypes(*ps)


def polyval(p, x, *, unroll=16):
    """``p[0] * x**(n-1) + ... + p[n-1]`` by Horner's rule (``unroll`` is accepted for JAX's
    signature; the loop is unrolled in Python)."""
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(p, x)
    (p,) = _coefficients("polyval", p)
    y = lax.full_like(x, 0)
    for k in range(get_aval(p).shape[0]):
        y = y * x + p[k]
    return y


def _pad_front(p, n):
    from .manipulation import pad
    return pad(p, (n - get_aval(p).shape[0], 0))


def polyadd(a1, a2):
    """The sum of two polynomials (the shorter padded with leading zeros)."""
    a1, a2 = _coefficients("polyadd", a1, a2)
    n = max(get_aval(a1).shape[0], get_aval(a2).shape[0])
    return _pad_front(a1, n) + _pad_front(a2, n)


def polysub(a1, a2):
    """The difference of two polynomials."""
    a1, a2 = _coefficients("polysub", a1, a2)
    n = max(get_aval(a1).shape[0], get_aval(a2).shape[0])
    return _pad_front(a1, n) - _pad_front(a2, n)


def polyder(p, m=1):
    """The ``m``-th derivative: each coefficient times its power, ``m`` times."""
    (p,) = _coefficients("polyder", p)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    for _ in range(m):
        n = get_aval(p).shape[0]
        p = p[:-1] * np.arange(n - 1, 0, -1, dtype=get_aval(p).dtype) if n > 1 else p[:0]
    return p


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative, with integration constants ``k`` (0 by default; one
    per integration, the first used first)."""
    from .manipulation import concatenate
    (p,) = promote_dtypes_inexact(*_coefficients("polyint", p))
    if k is not None:
        check_arraylike("polyint", k)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    dtype = get_aval(p).dtype
    k = np.zeros(m) if k is None else np.broadcast_to(np.asarray(k, dtype).ravel(), (m,))
    for i in range(m):
        n = get_aval(p).shape[0]
        p = concatenate([p / np.arange(n, 0, -1, dtype=dtype), np.asarray([k[i]], dtype)])
    return p

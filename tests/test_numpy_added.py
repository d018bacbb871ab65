"""The jax.numpy names added to nbjax.numpy, against NumPy (and JAX when importable), with
gradients and vmap where the function is differentiable."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.test_util import check_grads

try:
    import jax.numpy as jax_numpy
except ImportError:  # JAX is a test reference only
    jax_numpy = None

RNG = np.random.default_rng(11)
X = RNG.standard_normal((3, 4)).astype(np.float32)
V = RNG.standard_normal(5).astype(np.float32)
P = np.array([1.5, -2.0, 0.5, 3.0], np.float32)

# (name, args, kwargs): NumPy's function of the same name is the reference.
CASES = [
    ("vander", (V[:4],), {}), ("vander", (V[:4], 3), {"increasing": True}),
    ("ediff1d", (X,), {}), ("ediff1d", (V,), {"to_begin": np.array([-1, 0]), "to_end": 9}),
    ("trapezoid", (X,), {}), ("trapezoid", (X,), {"dx": 0.5, "axis": 0}),
    ("trapezoid", (X, np.cumsum(np.abs(X), axis=1)), {}),
    ("polyval", (P, V), {}), ("polyadd", (P, P[:2]), {}), ("polysub", (P[:2], P), {}),
    ("polyder", (P,), {}), ("polyder", (P, 2), {}), ("polyint", (P,), {}),
    ("polyint", (P, 2), {"k": np.array([1.0, -1.0])}),
    ("hanning", (6,), {}), ("hamming", (5,), {}), ("blackman", (7,), {}), ("bartlett", (6,), {}),
    ("hanning", (1,), {}), ("bartlett", (0,), {}),
    ("rollaxis", (np.ones((2, 3, 4)), 2), {}), ("rollaxis", (np.ones((2, 3, 4)), 0, 3), {}),
    ("resize", (np.arange(3), (2, 4)), {}), ("resize", (X, 5), {}),
    ("matvec", (X, V[:4]), {}), ("vecmat", (V[:3], X), {}),
]


def _close(actual, expected):
    expected = np.asarray(expected)
    assert np.shape(actual) == expected.shape
    scale = max(1.0, float(np.max(np.abs(expected), initial=0)))
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected.astype(np.float64),
                               rtol=2e-6, atol=2e-6 * scale)


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=lambda c: str(c)[:30])
def test_matches_numpy_and_jax(name, args, kwargs):
    out = getattr(jnp, name)(*args, **kwargs)
    if name in ("matvec", "vecmat"):  # NumPy 2.2+ has them; the definition is the reference
        a, b = (np.asarray(a, np.float64) for a in args)
        expected = a @ b if name == "matvec" else b.T @ a
    else:
        numpy_name = "trapz" if name == "trapezoid" and not hasattr(np, "trapezoid") else name
        f64 = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else a for a in args]
        expected = getattr(np, numpy_name)(*f64, **kwargs)
    _close(out, expected)
    if jax_numpy is not None:
        ref = getattr(jax_numpy, name)(*args, **kwargs)
        _close(out, ref)
        assert out.dtype == ref.dtype, (out.dtype, ref.dtype)


def test_fromfunction_passes_index_grids():
    out = jnp.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int)
    np.testing.assert_array_equal(out, np.fromfunction(lambda i, j: i * 10 + j, (2, 3),
                                                       dtype=int))
    assert out.dtype == np.int32
    assert jnp.fromfunction(lambda i: i, (3,)).dtype == np.float32


def test_type_predicates_and_aliases():
    assert jnp.iscomplexobj(jnp.ones(2, jnp.complex64)) and not jnp.iscomplexobj(X)
    assert jnp.isrealobj(3.0) and not jnp.isrealobj(1j)
    assert jnp.iterable([1]) and not jnp.iterable(3)
    assert jnp.single(2).dtype == np.float32 and jnp.csingle(1).dtype == np.complex64
    assert np.dtype(jnp.double) == np.float64 and np.dtype(jnp.int_) == np.int64
    assert np.dtype(jnp.uint) == np.uint64 and jnp.issubdtype(np.str_, jnp.character)


def test_errors_like_numpy():
    with pytest.raises(ValueError):
        jnp.vander(X)
    with pytest.raises(ValueError):
        jnp.polyder(P, -1)
    with pytest.raises(ValueError):
        jnp.resize(X, (-1, 2))
    with pytest.raises(TypeError):  # lists are not arrays, as in JAX
        jnp.ediff1d(V, to_begin=[1, 2])


def test_grads_and_vmap():
    check_grads(lambda x: jnp.polyval(P, x), (V,), order=2, eps=1e-2, rtol=2e-2, atol=2e-2)
    check_grads(lambda y: jnp.trapezoid(y, dx=0.3), (X,), order=1, eps=1e-2)
    check_grads(lambda x: jnp.vander(x, 3), (V,), order=1, eps=1e-2, rtol=2e-2, atol=2e-2)
    _close(nbjax.vmap(lambda y: jnp.trapezoid(y))(X), np.trapezoid(X.astype(np.float64), axis=1)
           if hasattr(np, "trapezoid") else np.trapz(X.astype(np.float64), axis=1))
    _close(nbjax.jit(nbjax.vmap(jnp.polyval, in_axes=(None, 0)))(P, V),
           np.polyval(P.astype(np.float64), V.astype(np.float64)))

"""Jacobians of complex and integer functions, forward mode through a ``custom_vjp``,
``lax.optimization_barrier`` of Python scalars and the host-side ``Array`` methods, as in
JAX.

JAX's rules: ``jacfwd`` takes only real floating inputs, and ``jacrev`` (as ``grad``) only
real floating outputs, unless ``holomorphic=True`` (then both take only complex ones);
anything else is a TypeError. A ``custom_vjp`` function has no forward-mode rule: ``jvp``
and ``jacfwd`` of it raise TypeError("can't apply forward-mode autodiff (jvp) to a
custom_vjp function."), while reverse mode, and forward over reverse (``hessian``), work.
"""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax

C = np.complex64([1 + 1j])
R = np.float32([1.0])


def test_jacfwd_requires_real_inputs():
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs .* but got "
                                        "complex64. For holomorphic differentiation"):
        nbjax.jacfwd(lambda a: jnp.real(a) ** 2)(C)
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs .* but got int32"):
        nbjax.jacfwd(lambda a: a * 2.0)(np.int32([1]))
    # a real input and a complex output are fine: one column per real input direction
    np.testing.assert_allclose(nbjax.jacfwd(lambda a: a * (1 + 2j))(R), [[1 + 2j]])


def test_jacrev_requires_real_outputs():
    with pytest.raises(TypeError, match="jacrev requires real-valued outputs .* but got "
                                        "complex64. For holomorphic differentiation"):
        nbjax.jacrev(lambda a: a * (1 + 1j))(R)
    with pytest.raises(TypeError, match="jacrev requires real-valued outputs .* but got "
                                        "int32. For differentiation of functions with integer"):
        nbjax.jacrev(lambda a: a.astype(np.int32))(R)
    with pytest.raises(TypeError, match="grad requires real-valued outputs .* but got int32"):
        nbjax.grad(lambda a: a.astype(np.int32).sum())(R)
    # a complex input and a real output are fine: the gradient of Re(a) is 1
    np.testing.assert_allclose(nbjax.jacrev(jnp.real)(C), [[1.0]])


def test_holomorphic_jacobians_require_complex_types():
    np.testing.assert_allclose(nbjax.jacfwd(lambda a: a ** 2, holomorphic=True)(C), [[2 * C[0]]])
    np.testing.assert_allclose(nbjax.jacrev(lambda a: a ** 2, holomorphic=True)(C), [[2 * C[0]]])
    with pytest.raises(TypeError, match="jacfwd with holomorphic=True requires inputs with "
                                        "complex dtype, but got float32"):
        nbjax.jacfwd(lambda a: a ** 2, holomorphic=True)(R)
    with pytest.raises(TypeError, match="jacfwd with holomorphic=True requires outputs with "
                                        "complex dtype, but got float32"):
        nbjax.jacfwd(jnp.real, holomorphic=True)(C)
    with pytest.raises(TypeError, match="jacrev with holomorphic=True requires outputs with "
                                        "complex dtype, but got float32"):
        nbjax.jacrev(jnp.real, holomorphic=True)(C)
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs"):
        nbjax.hessian(lambda a: (jnp.real(a) ** 2).sum())(C)


def test_integer_jacobian_blocks_are_zeros_of_the_integer_type():
    # JAX: the block of an integer output (jacfwd) or input (jacrev, allow_int) is zeros of
    # that integer dtype, not float0
    out = nbjax.jacfwd(lambda a: a.astype(np.int32))(R)
    assert out.dtype == np.int32 and out.shape == (1, 1) and not out.weak_type
    out = nbjax.jacrev(lambda a: a * 2.0, allow_int=True)(2)
    assert out.dtype == np.int32 and out.shape == () and out.weak_type
    np.testing.assert_array_equal(out, 0)


@nbjax.custom_vjp
def _sin(x):
    return jnp.sin(x)


_sin.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))
_NO_JVP = "can't apply forward-mode autodiff \\(jvp\\) to a custom_vjp function"
X = np.float32([0.5, 1.0])


@pytest.mark.parametrize("forward", [
    lambda: nbjax.jvp(_sin, (X,), (X,)),
    lambda: nbjax.jacfwd(_sin)(X),
    lambda: nbjax.jacfwd(lambda a: _sin(a).sum())(X),
], ids=["jvp", "jacfwd", "jacfwd_scalar"])
def test_forward_mode_of_custom_vjp_raises(forward):
    with pytest.raises(TypeError, match=_NO_JVP):
        forward()


def test_reverse_and_forward_over_reverse_of_custom_vjp_work():
    np.testing.assert_allclose(nbjax.jacrev(_sin)(X), np.diag(np.cos(X)), rtol=1e-6)
    np.testing.assert_allclose(nbjax.hessian(lambda a: _sin(a).sum())(X),
                               np.diag(-np.sin(X)), rtol=1e-6)


def test_optimization_barrier_returns_arrays():
    out = lax.optimization_barrier(2)
    assert isinstance(out, nbjax.Array) and out.dtype == np.int32 and out.weak_type
    a, (b, none) = lax.optimization_barrier([2.5, (np.float32([1, 2]), None)])
    assert a.dtype == np.float32 and a.weak_type and none is None
    assert b.dtype == np.float32 and not b.weak_type


def test_array_host_methods():
    x = jnp.arange(6, dtype=np.float32).reshape(2, 3)
    ref = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert x.tobytes() == ref.tobytes() and x.tobytes(order="F") == ref.tobytes(order="F")
    assert x.platform() == "cpu"
    assert x.on_device_size_in_bytes() == 24
    assert jnp.ones(3, bool).on_device_size_in_bytes() == 3
    assert x.traceback is None
    weak = jnp.asarray(2)
    copy = weak.clone()
    assert copy is not weak and copy.weak_type and copy.dtype == np.int32 and int(copy) == 2
    copy.delete()
    np.testing.assert_array_equal(weak, 2)  # the clone's data is its own to delete


def test_traced_values_are_arrays_for_isinstance():
    """``isinstance(x, nbjax.Array)`` (or ``jnp.ndarray``) answers alike inside a
    transformation and outside, as ``jax.Array`` does; typed keys are arrays, NumPy's are
    not, and the type makes no arrays itself."""
    seen = []

    def f(x):
        seen.append((isinstance(x, nbjax.Array), isinstance(x, jnp.ndarray)))
        return x * 2
    nbjax.jit(f)(1.0)
    nbjax.grad(f)(1.0)
    nbjax.vmap(f)(jnp.ones(2))
    nbjax.make_jaxpr(f)(1.0)
    f(jnp.ones(2))
    assert seen == [(True, True)] * 5
    assert isinstance(nbjax.random.key(0), nbjax.Array)
    assert not isinstance(np.ones(2), nbjax.Array)
    with pytest.raises(TypeError, match="cannot be instantiated"):
        nbjax.Array([1.0])

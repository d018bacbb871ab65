"""Tracers as JAX 0.10 shows them to a user: how ``print(x)`` inside a transformation
writes each kind, how types are written, and which Python conversions a tracer allows (a
JVP's known primal converts; anything of the wrong shape fails as NumPy would)."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core.abstract import ShapedArray
from nbjax.core.errors import (ConcretizationTypeError, TracerBoolConversionError,
                               TracerIntegerConversionError)


def _printed(transform, f=lambda x: x):
    """The repr of the tracer ``f`` sees under ``transform(g)``."""
    seen = []

    def g(x):
        seen.append(repr(x))
        return f(x)
    transform(g)
    return seen[0]


ONES = np.ones(3, np.float32)


@pytest.mark.parametrize("transform, expected", [
    (lambda g: nbjax.jit(g)(ONES), "JitTracer(float32[3])"),
    (lambda g: nbjax.make_jaxpr(g)(ONES), "JitTracer(float32[3])"),
    (lambda g: nbjax.jvp(g, (ONES,), (2 * ONES,)),
     "JVPTracer(primal=[1. 1. 1.], tangent=[2. 2. 2.])"),
    (lambda g: nbjax.linearize(g, ONES), "GradTracer(primal=[1. 1. 1.], typeof(tangent)=f32[3])"),
    (lambda g: nbjax.vjp(g, ONES), "GradTracer(primal=[1. 1. 1.], typeof(tangent)=f32[3])"),
    (lambda g: nbjax.vmap(g)(np.ones((2, 3), np.float32)),
     "VmapTracer(aval=float32[3], batched=float32[2,3])"),
    (lambda g: nbjax.lax.scan(lambda c, a: (g(c), a), ONES, ONES[:2]), "JitTracer(float32[3])"),
    (lambda g: nbjax.jit(lambda x: nbjax.jvp(g, (x,), (x,)))(ONES),
     "JVPTracer(primal=JitTracer(float32[3]), tangent=JitTracer(float32[3]))"),
    (lambda g: nbjax.jit(nbjax.grad(lambda x: g(x).sum()))(ONES),
     "GradTracer(primal=JitTracer(float32[3]), typeof(tangent)=f32[3])"),
    (lambda g: nbjax.vmap(nbjax.grad(lambda x: g(x).sum()))(np.ones((2, 3), np.float32)),
     "GradTracer(primal=VmapTracer(aval=float32[3], batched=float32[2,3]), "
     "typeof(tangent)=f32[3])"),
    (lambda g: nbjax.hessian(lambda x: g(x).sum())(ONES),
     "GradTracer(primal=JVPTracer(primal=[1. 1. 1.], tangent=VmapTracer(aval=float32[3], "
     "batched=float32[3,3])), typeof(tangent)=f32[3])"),
    (lambda g: nbjax.jit(lambda x: g(x[0] + 1))(ONES), "JitTracer(float32[])"),
])
def test_tracers_print_as_jax_prints_them(transform, expected):
    assert _printed(transform) == expected


def test_types_are_written_with_dtype_names_and_jaxprs_keep_short_ones():
    weak = ShapedArray((), np.dtype(np.int32), True)
    strong = ShapedArray((3, 4), np.dtype(np.float32), False)
    assert (str(strong), repr(strong), strong.str_short()) == \
        ("float32[3,4]", "ShapedArray(float32[3,4])", "float32[3,4]")
    assert (str(weak), repr(weak)) == ("~int32[]", "ShapedArray(int32[], weak_type=True)")
    assert strong.str_short(short_dtypes=True) == "f32[3,4]"
    text = str(nbjax.make_jaxpr(lambda x: x * 2)(ONES))
    assert text == "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }"
    with pytest.raises(TypeError, match=r"traced array with shape float32\[3\]"):
        nbjax.jit(lambda x: np.asarray(x))(ONES)


def _finite_difference(f, x, eps=1e-3):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def test_a_known_primal_converts_to_bool_int_and_index_under_autodiff():
    """JAX's JVP and grad tracers hold their primal: Python control flow, ``int`` and
    indexing on it work, as outside any transformation; ``float`` never does."""
    def piecewise(x):
        return x * int(x) if x > 0 else -x * [2.0, 3.0][int(-x) % 2]
    for x in (3.25, -1.5):
        expected = _finite_difference(piecewise, x)
        got = float(nbjax.grad(piecewise)(np.float32(x)))
        assert abs(got - expected) <= 1e-3 * (1 + abs(expected))
        _, tangent = nbjax.jvp(piecewise, (np.float32(x),), (np.float32(1.0),))
        assert abs(float(tangent) - expected) <= 1e-3 * (1 + abs(expected))
    assert float(nbjax.grad(lambda i, x: x * [1.0, 5.0][i], argnums=1)(1, 2.0)) == 5.0
    with pytest.raises(ConcretizationTypeError, match="float conversion"):
        nbjax.grad(lambda x: x * float(x))(2.0)
    with pytest.raises(ConcretizationTypeError, match="int conversion"):
        nbjax.jit(nbjax.grad(lambda x: x * int(x)))(2.0)
    with pytest.raises(TracerBoolConversionError):
        nbjax.vmap(lambda x: x if x > 0 else -x)(ONES)


@pytest.mark.parametrize("convert, x, error, message", [
    (bool, ONES, ValueError, "more than one element is ambiguous"),
    (bool, ONES[:0], ValueError, "empty array is ambiguous"),
    (bool, ONES[0], TracerBoolConversionError, "boolean conversion of traced array with shape "
     r"float32\[\]"),
    (int, ONES, TypeError, "Only scalar arrays can be converted to Python scalars"),
    (float, ONES, TypeError, "Only scalar arrays can be converted to Python scalars"),
    (complex, ONES, TypeError, "Only scalar arrays can be converted to Python scalars"),
    (int, ONES[0], ConcretizationTypeError, "int conversion"),
    (lambda x: [0, 1][x], ONES[0], TypeError, "Only integer scalar arrays"),
    (lambda x: [0, 1][x], np.arange(2), TypeError, "Only integer scalar arrays"),
    (lambda x: [0, 1][x], np.int32(1), TracerIntegerConversionError, "__index__"),
    (lambda x: len(x.tobytes()), ONES, ConcretizationTypeError, "tobytes"),
])
def test_conversions_of_traced_values_fail_as_in_jax(convert, x, error, message):
    with pytest.raises(error, match=message):
        nbjax.jit(lambda x: jnp.zeros(()) + convert(x))(x)

"""Fidelity to JAX 0.10.2, round two: the dtypes that ``ndtr``, ``log_ndtr``, ``ndtri`` and
``spence`` refuse; ``polyadd``/``polysub`` on N-d coefficients; ``pad``'s errors for
negative and non-integral widths; forward mode through a ``custom_vjp`` under ``jit``
(an error raised before anything runs, with no fallback warning); ``var``/``std`` with a
complex or integer ``dtype``; and the weak type of the derivative of ``x ** 2.0``."""

import warnings

import numpy as np
import pytest
import scipy.special
import scipy.stats

import nbjax
import nbjax.numpy as jnp
import nbjax.scipy.stats
import nbjax.scipy.special as special
from nbjax import lax

from helpers import assert_close

# --- ndtr, log_ndtr, ndtri, spence: float32 and float64 only ---------------------------------

NORMAL_FAMILY = [("ndtr", ", see docstring for supported types."), ("log_ndtr", "."),
                 ("ndtri", ", see docstring for supported types."),
                 ("spence", ", see docstring for supported types.")]


@pytest.mark.parametrize("name, tail", NORMAL_FAMILY)
@pytest.mark.parametrize("x, dtype", [(np.int32([1, 2]), "int32"), (1, "int32"),
                                      (True, "bool"), (np.uint8(1), "uint8"),
                                      (np.float16(0.5), "float16"),
                                      (jnp.bfloat16(0.5), "bfloat16"),
                                      (np.complex64(0.5), "complex64")])
def test_normal_family_refuses_other_dtypes(name, tail, x, dtype):
    """JAX refuses them (no promotion of integers, nor of half precision to float32)."""
    with pytest.raises(TypeError) as info:
        getattr(special, name)(x)
    assert str(info.value) == f"x.dtype={dtype} is not supported{tail}"


@pytest.mark.parametrize("name", [name for name, _ in NORMAL_FAMILY])
def test_normal_family_takes_float32_and_python_floats(name):
    x = np.float32([0.1, 0.5, 0.9])
    out = getattr(special, name)(x)
    assert out.dtype == np.float32
    assert_close(out, getattr(scipy.special, name)(x.astype(np.float64)), rtol=1e-5)
    scalar = getattr(special, name)(0.5)
    assert scalar.dtype == np.float32 and not scalar.weak_type
    refusal = "x.dtype=int32 is not supported"
    with pytest.raises(TypeError, match=refusal):
        nbjax.jit(getattr(special, name))(np.int32(1))
    with pytest.raises(TypeError, match=refusal):
        nbjax.vmap(getattr(special, name))(np.int32([1, 2]))


def test_normal_family_in_float64(x64):
    x = np.array([0.1, 0.5, 0.9])
    for name, _ in NORMAL_FAMILY:
        out = getattr(special, name)(x)
        assert out.dtype == np.float64
        assert_close(out, getattr(scipy.special, name)(x), rtol=1e-12)
    with pytest.raises(TypeError, match="x.dtype=int64 is not supported"):
        special.ndtr(1)


@pytest.mark.parametrize("fn", ["ppf", "isf"])
def test_normal_quantiles_refuse_what_ndtri_refuses(fn):
    """``norm.ppf``/``isf`` pass ``q`` to ``ndtri`` as given (JAX's), while ``cdf``
    promotes an integer ``x`` first; a float ``q`` gives the default float dtype."""
    quantile = getattr(nbjax.scipy.stats.norm, fn)
    for q, dtype in ((np.int32(0), "int32"), (0, "int32"), (np.float16(0.5), "float16")):
        with pytest.raises(TypeError, match=f"x.dtype={dtype} is not supported"):
            quantile(q)
    out = quantile(np.float32([0.1, 0.9]), 1.0, 2.0)
    want = getattr(scipy.stats.norm, fn)(np.array([0.1, 0.9]), 1.0, 2.0)
    assert out.dtype == np.float32 and not out.weak_type
    assert_close(out, want, rtol=1e-5)
    assert nbjax.scipy.stats.norm.cdf(1).dtype == np.float32


# --- polyadd, polysub: JAX's ``a1.at[-len(a2):].add(a2)`` --------------------------------------

def test_polyadd_adds_along_the_first_axis_of_nd_coefficients():
    a = np.array([[2, 3, 1]])
    b = np.array([[5, 7, 3], [8, 2, 6]])
    assert_close(jnp.polyadd(a, b), [[5, 7, 3], [10, 5, 7]])
    assert_close(jnp.polysub(a, b), [[-5, -7, -3], [-6, 1, -5]])
    assert_close(jnp.polysub(b, np.array([2])), [[5, 7, 3], [6, 0, 4]])  # the last row
    assert jnp.polyadd(a, b).dtype == np.int32
    x = np.ones((2, 2, 2))
    assert_close(jnp.polyadd(x, np.float64([1, 2])), x + [1, 2])  # broadcast into each row
    assert_close(nbjax.jit(jnp.polyadd)(np.ones((1, 3)), np.ones((2, 3))),
                 [[1, 1, 1], [2, 2, 2]])
    grad = nbjax.grad(lambda c: jnp.polyadd(c, np.ones((2, 3))).sum())(np.ones((1, 3)))
    assert_close(grad, np.ones((1, 3)))
    # one-dimensional coefficients: NumPy's polyadd
    assert_close(jnp.polyadd(np.float32([1, 2]), np.float32([1, 2, 3, 4])),
                 np.polyadd([1, 2], [1, 2, 3, 4]))
    assert_close(jnp.polysub(np.float32([1, 2]), np.float32([1, 2, 3, 4])),
                 np.polysub([1, 2], [1, 2, 3, 4]))


@pytest.mark.parametrize("fn", [jnp.polyadd, jnp.polysub])
def test_polyadd_errors_are_jaxs(fn):
    with pytest.raises(ValueError) as info:
        fn(np.ones((2, 3)), np.ones((2, 2)))  # (2, 2) into (2, 3)
    assert str(info.value) == ("Incompatible types for broadcasting: input type=float32[2,2] "
                               "and requested type=float32[2,3]")
    with pytest.raises(ValueError, match="Cannot broadcast to shape with fewer dimensions"):
        fn(np.ones(2), np.ones((2, 3)))
    with pytest.raises(ValueError) as info:
        fn(np.ones(3), np.ones(0))  # an empty one is added to all of the other ([-0:])
    assert str(info.value) == ("Incompatible types for broadcasting: input type=float32[0] "
                               "and requested type=float32[3]")
    with pytest.raises(IndexError, match="tuple index out of range"):
        fn(np.float32(1), np.float32([1, 2]))  # a 0-d one has no length
    with pytest.raises(IndexError, match="tuple index out of range"):
        nbjax.jit(fn)(1.0, 2.0)


def test_broadcast_errors_name_the_types_as_jaxs():
    """``jnp.broadcast_to`` and an ``.at[...]`` update: the input's type (``~`` when weak)
    and the one requested."""
    with pytest.raises(ValueError) as info:
        jnp.broadcast_to(jnp.asarray(2.0) + jnp.zeros(3, jnp.int32), (2, 2))
    assert str(info.value) == ("Incompatible types for broadcasting: input type=~float32[3] "
                               "and requested type=float32[2,2]")
    with pytest.raises(ValueError) as info:
        jnp.zeros((2, 2), jnp.int8).at[0].set(np.ones(3, np.int8))
    assert str(info.value) == ("Incompatible types for broadcasting: input type=int8[3] and "
                               "requested type=int8[2]")


def test_polyadd_and_polysub_refuse_booleans():
    t, tf = np.array([True]), np.array([True, False])
    with pytest.raises(TypeError, match="^add does not accept dtype bool at position 0"):
        jnp.polyadd(t, tf)
    with pytest.raises(TypeError, match="^neg does not accept dtype bool"):
        jnp.polysub(t, tf)


# --- pad: widths must be non-negative integers -----------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap", "mean", "empty"])
@pytest.mark.parametrize("width", [-1, (-1, 2), ((0, -1),), np.array([[1, -2]]),
                                   jnp.array([-1, 1])])
def test_pad_refuses_negative_widths(mode, width):
    with pytest.raises(ValueError) as info:
        jnp.pad(np.arange(4.0), width, mode=mode)
    assert str(info.value) == "index can't contain negative values"


@pytest.mark.parametrize("width", [((-1, 0), (1, 1)), ((0, 0), (1, -1)), ((0, -2), (-1, -1))])
def test_pad_with_a_function_crops_at_negative_widths(width):
    """JAX's callable mode zero-pads with ``lax.pad`` first, which crops at a negative
    width, then hands the function the widths as given (its other modes refuse them)."""
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)

    def first_cells(row, widths, axis, kwargs):
        return row.at[:max(widths[0], 0)].set(-1.0 - axis)
    zero_padded = np.asarray(lax.pad(x, np.float32(0), [(lo, hi, 0) for lo, hi in width]))
    want = zero_padded.copy()
    want[:max(width[0][0], 0)] = -1.0
    want[:, :max(width[1][0], 0)] = -2.0
    np.testing.assert_array_equal(jnp.pad(x, width, mode=first_cells), want)
    np.testing.assert_array_equal(
        nbjax.jit(lambda v: jnp.pad(v, width, mode=first_cells))(x), want)


@pytest.mark.parametrize("width", [1.5, 1.0, True, np.array([True, False]),
                                   np.array([1.0, 2.0]), None, "a", 1j])
def test_pad_refuses_widths_that_are_not_integers(width):
    with pytest.raises(TypeError) as info:
        jnp.pad(np.arange(4.0), width)
    assert str(info.value) == "`pad_width` must be of integral type."
    with pytest.raises(TypeError, match="`pad_width` must be of integral type"):
        jnp.pad(np.arange(4.0), width, mode=lambda row, widths, axis, kwargs: row)


def test_pad_takes_numpy_integer_widths_and_ignores_them_for_0d():
    assert_close(jnp.pad(np.arange(2.0), np.uint8(1)), np.pad(np.arange(2.0), 1))
    assert_close(jnp.pad(np.arange(2.0), (np.int64(0), 2)), np.pad(np.arange(2.0), (0, 2)))
    assert_close(jnp.pad(np.float32(1), -1), 1.0)  # a 0-d array has no widths to check


# --- forward mode through a custom_vjp ---------------------------------------------------------

FORWARD_MODE = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."


@nbjax.custom_vjp
def _sin(x):
    return jnp.sin(x)


_sin.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda cos_x, g: (cos_x * g,))


def _jvp_sin(x):
    return nbjax.jvp(_sin, (x,), (jnp.ones_like(x),))


def _jvp_sin_in_scan(x):
    return nbjax.jvp(lambda y: lax.scan(lambda c, _: (_sin(c), None), y, None, length=2)[0],
                     (x,), (x,))


def _jvp_sin_in_cond(x):
    return nbjax.jvp(lambda y: lax.cond(y > 0, _sin, jnp.cos, y), (x,), (x,))


@pytest.mark.parametrize("run", [
    _jvp_sin,
    nbjax.jit(_jvp_sin),
    nbjax.jit(_jvp_sin_in_scan),
    nbjax.jit(_jvp_sin_in_cond),
    nbjax.jit(lambda x: nbjax.jvp(nbjax.jit(_sin), (x,), (x,))),
    lambda x: nbjax.jit(_jvp_sin).lower(x),
    lambda x: nbjax.jit(_jvp_sin).trace(x).lower().compile(),
    nbjax.vmap(_jvp_sin),
    nbjax.jacfwd(_sin),
    lambda x: nbjax.linearize(_sin, x)[1](x),
], ids=["eager", "jit", "jit-scan", "jit-cond", "jvp-of-jit", "lower", "compile", "vmap",
        "jacfwd", "linearize"])
def test_forward_mode_through_custom_vjp_is_jaxs_error_without_a_warning(run):
    x = np.float32([1.0]) if run.__name__ == "_jvp_sin" else np.float32(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no kernel for custom_lin" fallback warning
        with pytest.raises(TypeError) as info:
            run(x)
    assert str(info.value) == FORWARD_MODE


def test_custom_vjp_forward_mode_that_jax_allows():
    """Staging the jvp (make_jaxpr, trace, eval_shape) is fine in JAX; reverse mode under
    jit too."""
    x = np.float32(1.0)
    assert "custom_lin" in str(nbjax.make_jaxpr(_jvp_sin)(x))
    nbjax.jit(_jvp_sin).trace(x)
    assert nbjax.eval_shape(_jvp_sin, x)[1].shape == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(nbjax.jit(nbjax.grad(_sin))(x), np.cos(1.0), rtol=1e-6)
        assert_close(nbjax.jit(nbjax.grad(
            lambda y: lax.scan(lambda c, _: (_sin(c), None), y, None, length=2)[0]))(x),
            np.cos(np.sin(1.0)) * np.cos(1.0), rtol=1e-6)


@pytest.mark.cpu_compiler
def test_custom_vjp_jvp_whose_tangent_is_dead_compiles():
    """JAX eliminates dead code before lowering, so a jvp whose tangent is unused compiles,
    also inside a scan or a cond; the cpu compiler's dead code elimination drops it too
    (constants are not folded through it first). The reference backend runs the jaxpr as
    traced: it evaluates the jvp."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(nbjax.jit(lambda y: _jvp_sin(y)[0])(np.float32(1.0)), np.sin(1.0),
                     rtol=1e-6)
        assert_close(nbjax.jit(lambda: nbjax.jvp(_sin, (1.0,), (1.0,))[0])(), np.sin(1.0),
                     rtol=1e-6)
        # inside a scan or a cond: their unused results go, with what computes them
        assert_close(nbjax.jit(lambda y: _jvp_sin_in_scan(y)[0])(np.float32(1.0)),
                     np.sin(np.sin(1.0)), rtol=1e-6)
        assert_close(nbjax.jit(lambda y: _jvp_sin_in_cond(y)[0])(np.float32(1.0)),
                     np.sin(1.0), rtol=1e-6)


# --- var and std with a dtype ----------------------------------------------------------------

Z = np.array([1 + 2j, 3 - 1j, -2 + 0.5j], np.complex64)


@pytest.mark.parametrize("fn, ref", [(jnp.var, np.var), (jnp.std, np.std),
                                     (jnp.nanvar, np.nanvar), (jnp.nanstd, np.nanstd)])
def test_var_with_a_complex_dtype_is_complex(fn, ref):
    """JAX computes in the given dtype and casts the (real) result to it, as NumPy does."""
    for x in (Z, np.float32([1, 2, 4]), np.int32([1, 2, 4])):
        out = fn(x, dtype=np.complex64)
        assert out.dtype == np.complex64
        assert_close(out, ref(x.astype(np.complex128), dtype=np.complex128), rtol=1e-6)
    out = fn(Z.reshape(1, 3), axis=1, dtype=np.complex64)
    assert out.shape == (1,) and out.dtype == np.complex64
    assert jnp.var(Z).dtype == jnp.std(Z).dtype == np.float32  # without dtype: real


@pytest.mark.parametrize("fn", [jnp.var, jnp.std, jnp.nanvar, jnp.nanstd])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_var_of_complex_numbers_refuses_a_real_dtype(fn, dtype):
    with pytest.raises(ValueError) as info:
        fn(Z, dtype=dtype)
    assert str(info.value).startswith(
        "jax.numpy.var does not yet support real dtype parameters when computing the "
        "variance of an array of complex values. The semantics of numpy.var seem unclear")


def test_std_refuses_a_dtype_that_is_not_inexact():
    for x in (np.float32([1, 2, 4]), Z):
        with pytest.raises(ValueError, match="^dtype argument to jnp.std must be inexact; "
                                             "got int32$"):
            jnp.std(x, dtype=np.int32)
    with pytest.raises(ValueError, match="got bool$"):
        jnp.std(np.float32([1, 2]), dtype=bool)


def test_nanvar_with_an_integer_dtype_returns_it():
    """JAX's nanvar casts its result to an integer ``dtype`` (var's NaN guard promotes it to
    a float), so nanstd then refuses it (sqrt of integers)."""
    out = jnp.nanvar(np.float32([1.5, 2.5, 2.7]), dtype=np.int32)  # [1, 2, 2]: 2 // 3
    assert out.dtype == np.int32 and int(out) == 0
    assert int(jnp.nanvar(np.int32([1, 2, 4]), dtype=np.int32)) == 1  # 14 // 9 ... // 3
    with pytest.raises(TypeError, match="sqrt does not accept dtype int32"):
        jnp.nanstd(np.int32([1, 2, 4]), dtype=np.int32)
    assert jnp.var(np.int32([1, 2, 4]), dtype=np.int32).dtype == np.float32


# --- weak types of derivatives ---------------------------------------------------------------

@pytest.mark.parametrize("fn", [lambda x: x ** 2.0, lambda x: lax.pow(x, x)])
def test_pow_tangents_are_strongly_typed(fn):
    """JAX's pow JVP converts its operands to the result dtype, which drops a weak type:
    the derivative of ``x ** 2.0`` at a Python float is a strong float32."""
    for x in (2.0, jnp.float32(2.0)):
        g = nbjax.grad(fn)(x)
        assert g.dtype == np.float32 and not g.weak_type
        _, tangent = nbjax.jvp(fn, (x,), (x,))
        assert not tangent.weak_type


def test_weak_derivatives_jax_keeps():
    """An integer exponent (integer_pow), a scan, and pow's derivatives where jnp promoted
    the Python float (the promotion's transpose restores the weak type) stay weak for a
    Python float, as in JAX; a float32 argument's derivative is strong."""
    fns = [lambda x: x ** 2, lambda x: jnp.power(2.0, x),
           lambda x: jnp.power(x, jnp.float32(3.0)),
           lambda x: lax.scan(lambda c, _: (c * 2.0, None), x, None, length=3)[0],
           lambda x: lax.scan(lambda c, _: (c ** 2, None), x, None, length=2)[0]]
    for fn in fns:
        assert nbjax.grad(fn)(2.0).weak_type
        assert not nbjax.grad(fn)(np.float32(2.0)).weak_type
    assert_close(nbjax.grad(fns[-1])(2.0), 32.0)

"""jit, lax and custom derivatives behaving as JAX's own tests expect: static arguments by
name or position, checks of static_argnums/static_argnames, reuse of compiled code for a
function jitted again, memory per compiled function, lax's dtype rules, and custom_jvp /
custom_vjp functions called outside transformations (nbjax issue 13)."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp


def _scale(x, n):
    """Python control flow on ``n``: it only traces when ``n`` is static."""
    if n > 5:
        return x * n
    return x - n


# --- 1. static arguments by name or by position --------------------------------------------

@pytest.mark.parametrize("options", [dict(static_argnames=["n"]), dict(static_argnums=1),
                                     dict(static_argnames="n", static_argnums=1)])
def test_static_argument_is_static_however_it_is_passed(options):
    f = nbjax.jit(_scale, **options)
    x = np.float32(2.0)
    assert float(f(x, 20)) == 40.0
    assert float(f(x, n=20)) == 40.0
    assert float(f(x, 3)) == -1.0
    assert f.static_argnums == (1,) and f.static_argnames == ("n",)


def test_jit_with_only_options_is_a_decorator():
    @nbjax.jit(static_argnames="n")
    def scale(x, n):
        return _scale(x, n)
    assert float(scale(np.float32(2.0), 20)) == 40.0
    assert float(scale(np.float32(2.0), n=3)) == -1.0

    @nbjax.jit(static_argnums=(0,))
    def power(n, x):
        return x ** n if n > 1 else x
    assert float(power(3, np.float32(2.0))) == 8.0
    assert float(power(n=3, x=np.float32(2.0))) == 8.0


def test_keyword_only_and_varargs_static_arguments():
    f = nbjax.jit(lambda x, *, mode: x * 2 if mode == "double" else x, static_argnames="mode")
    assert f.static_argnums == ()
    np.testing.assert_array_equal(f(np.ones(2, np.float32), mode="double"), [2, 2])
    g = nbjax.jit(lambda *xs: xs[0] * xs[1] if xs[1] > 1 else xs[0], static_argnums=1)
    assert float(g(np.float32(3.0), 2)) == 6.0
    nbjax.jit(lambda *xs: xs[0], static_argnums=5)  # any position: the function takes *xs
    h = nbjax.jit(lambda x, **kw: x * kw["k"] if kw["k"] > 1 else x, static_argnames="k")
    assert float(h(np.float32(3.0), k=2)) == 6.0


# --- 2. static positions and names the function does not have ------------------------------

@pytest.mark.parametrize("options, message", [
    (dict(static_argnums=2), r"static_argnums=\(2,\), but only accepts 2 positional"),
    (dict(static_argnums=(-3,)), r"static_argnums=\(-3,\), but only accepts 2 positional"),
    (dict(static_argnames="m"), r"invalid argnames \{'m'\} in static_argnames. Function does "
                                "not take these args"),
])
def test_static_arguments_the_function_lacks_raise_at_jit_time(options, message):
    with pytest.raises(ValueError, match=message):
        nbjax.jit(_scale, **options)


def test_positional_only_static_argname_raises():
    def f(x, n, /):
        return x * n
    with pytest.raises(ValueError, match="positional-only"):
        nbjax.jit(f, static_argnames="n")


def test_static_argument_errors_match_jax():
    jax = pytest.importorskip("jax")
    for options in [dict(static_argnums=2), dict(static_argnums=(-3,)),
                    dict(static_argnames="m")]:
        with pytest.raises(ValueError) as theirs:
            jax.jit(_scale, **options)
        with pytest.raises(ValueError) as ours:
            nbjax.jit(_scale, **options)
        assert str(ours.value) == str(theirs.value)

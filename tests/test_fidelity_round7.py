"""Fidelity to JAX 0.10.2, round seven (a sweep of composed transformations against jax):
reverse mode through a ``cond`` whose predicate vmap batches sends no gradient into the
branch a member does not take; a ``vjp`` function checks its cotangent as JAX 0.10's does
(ValueErrors, and any dtype for an integer output); ``nextafter`` is not
differentiable (it had a zero derivative); a linearized function refuses a tangent of
another type with JAX's ValueError; differentiating a custom rule's function through a
value it closes over is an UnexpectedTracerError."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax


def _sqrt_or_zero(x, w):
    return lax.cond(x > 0, lambda v, s: jnp.sqrt(v) * s, lambda v, s: v * 0.0 + s, x, w)


@pytest.mark.parametrize("jitted", [False, True])
def test_grad_of_vmapped_cond_gets_no_nan_from_the_untaken_branch(jitted):
    # The sqrt branch runs on -1 and 0 too (every branch runs on the whole batch), but
    # those members take the other branch: their gradient is that branch's, 0, not NaN.
    def loss(xs, w):
        return nbjax.vmap(_sqrt_or_zero, in_axes=(0, None))(xs, w).sum()
    grad = nbjax.grad(loss, argnums=(0, 1))
    gx, gw = (nbjax.jit(grad) if jitted else grad)(jnp.array([-1.0, 0.0, 4.0]), 2.0)
    np.testing.assert_allclose(gx, [0.0, 0.0, 0.5])
    assert float(gw) == 4.0  # 1 + 1 + sqrt(4): the unbatched operand's gradient is summed


def test_grad_of_vmapped_switch_with_a_batched_index():
    branches = [lambda x: jnp.log(x), lambda x: x ** 2, lambda x: jnp.arcsin(x)]

    def loss(idx, xs):
        return nbjax.vmap(lambda i, x: lax.switch(i, branches, x))(idx, xs).sum()
    g = nbjax.grad(loss, argnums=1)(jnp.array([1, 0, 2, 1]), jnp.array([-3.0, 2.0, 0.5, 5.0]))
    np.testing.assert_allclose(g, [-6.0, 0.5, 1 / np.sqrt(0.75), 10.0], rtol=1e-6)
    # the values themselves are untouched
    out = nbjax.vmap(lambda i, x: lax.switch(i, branches, x))(jnp.array([1, 0]),
                                                              jnp.array([-3.0, 2.0]))
    np.testing.assert_allclose(out, [9.0, np.log(2.0)], rtol=1e-6)


def test_a_vjp_cotangent_of_the_wrong_structure_is_a_value_error():
    _, pullback = nbjax.vjp(lambda x: (x, x * 2), jnp.ones(2))
    with pytest.raises(ValueError, match="unexpected tree structure"):
        pullback(jnp.ones(2))
    with pytest.raises(ValueError, match="unexpected tree structure"):
        pullback([jnp.ones(2), jnp.ones(2)])  # a list, where the output is a tuple
    with pytest.raises(ValueError, match=r"got float32\[3\], but expected float32\[2\]"):
        pullback((jnp.ones(2), jnp.ones(3)))
    with pytest.raises(TypeError, match="must be called with a single argument"):
        pullback(jnp.ones(2), jnp.ones(2))


def test_an_integer_output_takes_a_cotangent_of_any_dtype_of_its_shape():
    # JAX 0.10 accepts the integer output's own type (or float0) there; it carries nothing.
    _, pullback = nbjax.vjp(lambda x: (x * 3.0, x.astype(jnp.int32)), jnp.ones(2))
    for zero in (jnp.zeros(2, jnp.int32), np.zeros(2, nbjax.dtypes.float0)):
        grad, = pullback((jnp.ones(2), zero))
        assert grad.tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="unexpected JAX type"):
        pullback((jnp.ones(2), jnp.zeros(3, jnp.int32)))


@pytest.mark.parametrize("argnums", [0, 1])
def test_nextafter_is_not_differentiable_as_in_jax(argnums):
    # Its derivative in x1 is 1 almost everywhere, so the zero it had was wrong; JAX has
    # no rule. Undifferentiated, and under vmap, it is unchanged.
    with pytest.raises(NotImplementedError, match="nextafter"):
        nbjax.grad(lambda x, y: lax.nextafter(x, y), argnums=argnums)(1.0, 2.0)
    out = nbjax.vmap(lax.nextafter)(jnp.ones(2), jnp.array([2.0, 0.0]))
    assert out.tolist() == [np.nextafter(np.float32(1), np.float32(2)),
                            np.nextafter(np.float32(1), np.float32(0))]


def test_a_linearized_function_refuses_a_tangent_of_another_type_with_a_value_error():
    _, f_jvp = nbjax.linearize(lambda x: x ** 2, jnp.ones(2))
    assert f_jvp(jnp.ones(2)).tolist() == [2.0, 2.0]
    for tangent in (jnp.ones(2, jnp.float16), jnp.ones(3), jnp.ones(2, jnp.int32)):
        with pytest.raises(ValueError, match="linearized function called on tangent values "
                                             "inconsistent with the original primal values"):
            f_jvp(tangent)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_differentiating_through_a_closed_over_value_is_an_unexpected_tracer_error(kind):
    def outer(w):
        if kind == "custom_jvp":
            g = nbjax.custom_jvp(lambda x: x * w)
            g.defjvp(lambda p, t: (g(p[0]), t[0] * w))
        else:
            g = nbjax.custom_vjp(lambda x: x * w)
            g.defvjp(lambda x: (g(x), None), lambda r, ct: (ct * w,))
        return g(2.0)
    # JAX 0.10's class (the closed-over tracer escapes the rule); still a TypeError
    with pytest.raises(nbjax.errors.UnexpectedTracerError, match="closed-over value"):
        nbjax.grad(outer)(3.0)
    assert issubclass(nbjax.errors.UnexpectedTracerError, TypeError)
    assert nbjax.vmap(outer)(jnp.ones(2)).tolist() == [2.0, 2.0]  # (only AD refuses)

"""Fidelity to JAX 0.10.2, round seven (a sweep of composed transformations against jax):
reverse mode through a ``cond`` whose predicate vmap batches sends no gradient into the
branch a member does not take."""

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

"""lax.custom_linear_solve and lax.custom_root: values from the user's solver, derivatives
from the equation solved (against finite differences and JAX), under jit and vmap."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.test_util import check_grads
from helpers import assert_close

try:
    import jax
except ImportError:  # finite differences still check nbjax; JAX adds a cross-check
    jax = None


def _matrix(rng, n=4, dtype=np.float64):
    return (rng.normal(size=(n, n)) + n * np.eye(n)).astype(dtype)


def _conjugate_gradients(L, steps=30):
    """A CG solver written with ``L.while_loop`` (which reverse mode cannot go through),
    for a symmetric positive definite ``matvec``."""
    def solve(matvec, b):
        def body(state):
            x, r, p, i = state
            ap = matvec(p)
            alpha = (r @ r) / (p @ ap)
            x, r_new = x + alpha * p, r - alpha * ap
            beta = (r_new @ r_new) / (r @ r)
            return x, r_new, r_new + beta * p, i + 1

        def cond(state):
            return (state[3] < steps) & (state[1] @ state[1] > 1e-30)
        return L.while_loop(cond, body, (b * 0, b, b, 0))[0]
    return solve


def _linear_solve(L, linalg_solve, symmetric):
    """``x = A^-1 b`` through custom_linear_solve, with a direct solver (nonsymmetric) or
    CG (symmetric: ``A`` is made ``M M^T + n I``)."""
    def f(m, b):
        a = m @ m.T + m.shape[0] * np.eye(m.shape[0], dtype=m.dtype) if symmetric else m
        matvec = lambda x: a @ x  # noqa: E731
        if symmetric:
            return L.custom_linear_solve(matvec, b, _conjugate_gradients(L), symmetric=True)
        return L.custom_linear_solve(matvec, b, lambda mv, y: linalg_solve(a, y),
                                     lambda vm, y: linalg_solve(a.T, y))
    return f


@pytest.mark.parametrize("symmetric", [False, True])
def test_linear_solve_value_and_gradients_against_finite_differences(symmetric):
    rng = np.random.default_rng(0)
    m, b = _matrix(rng), rng.normal(size=4)
    f = _linear_solve(lax, jnp.linalg.solve, symmetric)
    with nbjax.enable_x64():
        a = m @ m.T + 4 * np.eye(4) if symmetric else m
        assert_close(f(m, b), np.linalg.solve(a, b), rtol=1e-10)
        check_grads(f, (m, b), order=2 if not symmetric else 1, modes=("fwd", "rev"))


@pytest.mark.skipif(jax is None, reason="JAX not installed")
@pytest.mark.parametrize("symmetric", [False, True])
def test_linear_solve_derivatives_match_jax(symmetric):
    rng = np.random.default_rng(1)
    m, b = _matrix(rng, dtype=np.float32), rng.normal(size=4).astype(np.float32)
    t_m, t_b = _matrix(rng, dtype=np.float32), rng.normal(size=4).astype(np.float32)
    ours = _linear_solve(lax, jnp.linalg.solve, symmetric)
    theirs = _linear_solve(jax.lax, jax.numpy.linalg.solve, symmetric)
    for got, want in zip(nbjax.jvp(ours, (m, b), (t_m, t_b)),
                         jax.jvp(theirs, (m, b), (t_m, t_b))):
        assert_close(got, want, rtol=2e-4)
    loss = lambda f: lambda m, b: (f(m, b) ** 2).sum()  # noqa: E731
    for got, want in zip(nbjax.grad(loss(ours), (0, 1))(m, b),
                         jax.grad(loss(theirs), (0, 1))(m, b)):
        assert_close(got, want, rtol=2e-4)


def test_linear_solve_under_jit_and_vmap():
    rng = np.random.default_rng(2)
    m, bs = _matrix(rng, dtype=np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    f = _linear_solve(lax, jnp.linalg.solve, False)
    want = np.linalg.solve(m, bs.T).T
    assert_close(nbjax.jit(f)(m, bs[0]), want[0], rtol=1e-5)
    assert_close(nbjax.vmap(f, (None, 0))(m, bs), want, rtol=1e-5)
    ms = np.stack([m, m.T, 2 * m])
    assert_close(nbjax.vmap(f)(ms, bs), np.stack(
        [np.linalg.solve(a, b) for a, b in zip(ms, bs)]), rtol=1e-5)
    loss = lambda m, b: f(m, b).sum()  # noqa: E731
    g = nbjax.vmap(nbjax.grad(loss, (0, 1)), (None, 0))(m, bs)
    g_loop = [nbjax.grad(loss, (0, 1))(m, b) for b in bs]
    for i in range(2):
        assert_close(g[i], np.stack([np.asarray(gl[i]) for gl in g_loop]), rtol=1e-5)
    assert_close(nbjax.jit(nbjax.grad(loss))(m, bs[0]), g_loop[0][0], rtol=1e-5)


def test_linear_solve_pytree_and_aux():
    """``b`` a pytree (a block-diagonal system); ``has_aux`` returns the solver's extra
    output, which gets no derivative."""
    def f(scale, b):
        matvec = lambda x: {"u": scale * x["u"], "v": 2.0 * x["v"]}  # noqa: E731
        solve = lambda mv, y: ({"u": y["u"] / scale, "v": y["v"] / 2.0}, jnp.int32(3))  # noqa
        x, aux = lax.custom_linear_solve(matvec, b, solve, symmetric=True, has_aux=True)
        return x["u"].sum() + x["v"].sum(), aux
    b = {"u": np.array([1.0, 2.0], np.float32), "v": np.float32(4.0)}
    value, aux = f(np.float32(4.0), b)
    assert_close(value, 0.75 + 2.0, rtol=1e-6)
    assert int(aux) == 3
    grad = nbjax.grad(lambda s: f(s, b)[0])(np.float32(4.0))
    assert_close(grad, -3.0 / 16.0, rtol=1e-6)


def test_linear_solve_errors():
    b = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="matvec"):
        lax.custom_linear_solve(lambda x: x[:2], b, lambda mv, y: y)
    with pytest.raises(TypeError, match="solve"):
        lax.custom_linear_solve(lambda x: x, b, lambda mv, y: (y, y))
    f = lambda b: lax.custom_linear_solve(lambda x: 2 * x, b, lambda mv, y: y / 2).sum()  # noqa
    assert_close(nbjax.jvp(f, (b,), (b,))[1], 1.5, rtol=1e-6)  # forward mode needs no transpose
    with pytest.raises(TypeError, match="transpose_solve required"):
        nbjax.grad(f)(b)


# --- custom_root ---------------------------------------------------------------------------

def _newton_sqrt(L, grad):
    """sqrt(a) as the root of ``x^2 - a``, found by a Newton while loop."""
    def f(a):
        def newton(fun, x0):
            def body(state):
                x, i = state
                return x - fun(x) / grad(fun)(x), i + 1
            return L.while_loop(lambda s: s[1] < 30, body, (x0, 0))[0]
        return L.custom_root(lambda x: x ** 2 - a, a * 0 + 1.0, newton,
                             lambda g, y: y / g(1.0))
    return f


def test_root_newton_value_and_gradients():
    f = _newton_sqrt(lax, nbjax.grad)
    with nbjax.enable_x64():
        a = np.float64(3.0)
        assert_close(f(a), np.sqrt(3.0), rtol=1e-12)
        check_grads(f, (a,), order=2, modes=("fwd", "rev"))
        assert_close(nbjax.grad(f)(a), 0.5 / np.sqrt(3.0), rtol=1e-12)


@pytest.mark.skipif(jax is None, reason="JAX not installed")
def test_root_derivatives_match_jax():
    ours, theirs = _newton_sqrt(lax, nbjax.grad), _newton_sqrt(jax.lax, jax.grad)
    a = np.float32(2.0)
    for got, want in zip(nbjax.jvp(ours, (a,), (np.float32(1.0),)),
                         jax.jvp(theirs, (a,), (np.float32(1.0),))):
        assert_close(got, want, rtol=1e-6)
    assert_close(nbjax.grad(nbjax.grad(ours))(a), jax.grad(jax.grad(theirs))(a), rtol=1e-5)


def test_root_under_jit_and_vmap():
    f = _newton_sqrt(lax, nbjax.grad)
    a = np.array([1.0, 4.0, 9.0, 2.0], np.float32)
    assert_close(nbjax.vmap(f)(a), np.sqrt(a), rtol=1e-6)
    assert_close(nbjax.jit(nbjax.vmap(nbjax.grad(f)))(a), 0.5 / np.sqrt(a), rtol=1e-6)


def test_root_of_a_vector_system_with_linear_solve_and_aux():
    """A vector root: ``x`` with ``A x + x^3 = c`` (Newton on the Jacobian), the tangent
    system solved with custom_linear_solve, the iteration count as aux."""
    rng = np.random.default_rng(3)
    a, c = _matrix(rng, 3), rng.normal(size=3)

    def root(c):
        f = lambda x: a @ x + x ** 3 - c  # noqa: E731

        def newton(fun, x0):
            jac = nbjax.jacfwd(fun)
            x = lax.fori_loop(0, 30, lambda i, x: x - jnp.linalg.solve(jac(x), fun(x)), x0)
            return x, jnp.int32(30)

        def tangent_solve(g, y):
            return lax.custom_linear_solve(
                g, y, lambda mv, r: jnp.linalg.solve(nbjax.jacfwd(mv)(r), r),
                lambda vm, r: jnp.linalg.solve(nbjax.jacfwd(vm)(r), r))
        return lax.custom_root(f, jnp.zeros(3), newton, tangent_solve, has_aux=True)

    with nbjax.enable_x64():
        x, steps = root(c)
        assert int(steps) == 30
        assert_close(a @ np.asarray(x) + np.asarray(x) ** 3, c, rtol=1e-10)
        check_grads(lambda c: root(c)[0], (c,), order=1, modes=("fwd", "rev"))


def test_root_errors():
    with pytest.raises(TypeError, match="f"):
        lax.custom_root(lambda x: x[:1], jnp.ones(2), lambda f, x: x, lambda g, y: y)
    with pytest.raises(TypeError, match="pair"):
        lax.custom_root(lambda x: x, 1.0, lambda f, x: x, lambda g, y: y, has_aux=True)

"""nbjax.scipy.sparse.linalg's cg, bicgstab and gmres against SciPy and NumPy: converged
solutions, the iterates after a few steps (cg and bicgstab follow SciPy's recurrences),
operators as matrices, functions and on pytrees, preconditioners, dtypes, JAX's errors, and
jit, vmap and derivatives (implicit, through custom_linear_solve) against finite
differences."""

import functools

import numpy as np
import pytest
import scipy.sparse.linalg as sp_linalg

import nbjax
import nbjax.numpy as jnp
from nbjax.scipy.sparse import linalg
from nbjax.test_util import check_grads
from helpers import assert_close

N = 6
rng = np.random.RandomState(0)


def _spd(n=N, seed=0):
    b = np.random.RandomState(seed).randn(n, n)
    return b @ b.T + n * np.eye(n)


def _nonsymmetric(n=N, seed=1):
    return np.random.RandomState(seed).randn(n, n) + n * np.eye(n)


SOLVERS = {
    "cg": linalg.cg,
    "bicgstab": linalg.bicgstab,
    "gmres_batched": functools.partial(linalg.gmres, solve_method="batched"),
    "gmres_incremental": functools.partial(linalg.gmres, solve_method="incremental"),
}
SCIPY = {"cg": sp_linalg.cg, "bicgstab": sp_linalg.bicgstab,
         "gmres_batched": sp_linalg.gmres, "gmres_incremental": sp_linalg.gmres}
GENERAL = ["bicgstab", "gmres_batched", "gmres_incremental"]  # any invertible A


def _matrix_for(name):
    return _spd() if name == "cg" else _nonsymmetric()


@pytest.mark.parametrize("name", list(SOLVERS))
def test_converged_solution_matches_scipy_and_numpy(name, x64):
    a, b = _matrix_for(name), rng.randn(N)
    x, info = SOLVERS[name](a, b, tol=1e-12)
    expected, sp_info = SCIPY[name](a, b, rtol=1e-12, atol=0.0)
    assert sp_info == 0 and x.dtype == np.float64
    assert_close(x, np.linalg.solve(a, b), rtol=1e-9)
    assert_close(x, expected, rtol=1e-9)
    if name.startswith("gmres"):
        assert int(info) == 0
    else:
        assert info is None


@pytest.mark.parametrize("name", ["cg", "bicgstab"])
@pytest.mark.parametrize("maxiter", [1, 2, 3])
def test_iterates_follow_scipy(name, maxiter, x64):
    """JAX's cg and bicgstab run SciPy's recurrences: the same x after ``maxiter`` steps."""
    a, b = _matrix_for(name) + np.diag(np.arange(N) * 3.0), rng.randn(N)
    x, _ = SOLVERS[name](a, b, maxiter=maxiter)
    expected, _ = SCIPY[name](a, b, maxiter=maxiter, rtol=1e-5, atol=0.0)
    assert_close(x, expected, rtol=1e-10)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_function_operator_x0_and_preconditioner(name, x64):
    a, b = _matrix_for(name), rng.randn(N)
    jacobi = np.diag(1 / np.diag(a))
    for m in (jacobi, lambda v: jnp.asarray(jacobi) @ v):
        x, _ = SOLVERS[name](lambda v: jnp.asarray(a) @ v, b, x0=np.ones(N), M=m, tol=1e-12)
        assert_close(x, np.linalg.solve(a, b), rtol=1e-9)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_pytree_operator(name, x64):
    """``A`` acts on a dict of arrays: the block system ``[[3I, 1], [1^T, 4I]]``."""
    def op(t):
        return {"u": 3 * t["u"] + t["v"].sum(), "v": (t["u"].sum() + 4 * t["v"])}
    b = {"u": np.arange(3.0) + 1, "v": np.array([1.0, -1.0])}
    x, _ = SOLVERS[name](op, b, tol=1e-12)
    dense = np.block([[3 * np.eye(3), np.ones((3, 2))], [np.ones((2, 3)), 4 * np.eye(2)]])
    expected = np.linalg.solve(dense, np.concatenate([b["u"], b["v"]]))
    assert set(x) == {"u", "v"}
    assert_close(np.concatenate([x["u"], x["v"]]), expected, rtol=1e-9)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_float32_and_complex(name):
    a, b = _matrix_for(name).astype(np.float32), rng.randn(N).astype(np.float32)
    x, _ = SOLVERS[name](jnp.asarray(a), jnp.asarray(b))
    assert x.dtype == np.float32
    assert_close(x, np.linalg.solve(a, b), rtol=1e-4)
    c = rng.randn(N, N) + 1j * rng.randn(N, N)
    hpd = (c @ c.conj().T + N * np.eye(N)).astype(np.complex64)
    bc = (rng.randn(N) + 1j * rng.randn(N)).astype(np.complex64)
    xc, _ = SOLVERS[name](hpd, bc)
    assert xc.dtype == np.complex64
    assert_close(xc, np.linalg.solve(hpd, bc), rtol=1e-4)


@pytest.mark.parametrize("name", GENERAL)
def test_tolerances_and_restart(name, x64):
    a, b = _nonsymmetric(), rng.randn(N)
    x, _ = SOLVERS[name](a, b, tol=0.0, atol=1e-3)
    residual = np.linalg.norm(a @ np.asarray(x) - b)
    assert residual <= 1e-3 < np.linalg.norm(b)
    if name.startswith("gmres"):
        x, _ = SOLVERS[name](a, b, restart=2, maxiter=200, tol=1e-10)
        assert_close(x, np.linalg.solve(a, b), rtol=1e-8)


def test_zero_right_hand_side_gives_zero():
    for solve in SOLVERS.values():
        x, _ = solve(jnp.asarray(_spd(), jnp.float32), jnp.zeros(N))
        np.testing.assert_array_equal(np.asarray(x), np.zeros(N))


@pytest.mark.parametrize("name", list(SOLVERS))
def test_jit_matches_eager(name):
    a, b = _matrix_for(name).astype(np.float32), rng.randn(N).astype(np.float32)
    f = nbjax.jit(lambda a, b: SOLVERS[name](a, b)[0])
    assert_close(f(a, b), SOLVERS[name](a, b)[0], rtol=1e-5)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_vmap_matches_a_loop(name):
    a = _matrix_for(name).astype(np.float32)
    bs = rng.randn(3, N).astype(np.float32)
    xs = nbjax.vmap(lambda b: SOLVERS[name](a, b)[0])(bs)
    for b, x in zip(bs, xs):
        assert_close(x, SOLVERS[name](a, b)[0], rtol=1e-5)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_derivatives_against_finite_differences(name, x64):
    """With respect to ``b`` and to the matrix inside the operator (implicit derivatives:
    one more solve, with the transposed operator in reverse mode)."""
    a, b = _matrix_for(name), rng.randn(N)
    solve = SOLVERS[name]

    def f(a, b):
        return solve(lambda v: a @ v, b, tol=1e-13)[0]
    check_grads(f, (a, b), order=1, modes=("fwd", "rev"), rtol=1e-5, atol=1e-5)


def test_grad_of_cg_is_another_cg_solve(x64):
    a, b = _spd(), rng.randn(N)
    g = nbjax.grad(lambda b: linalg.cg(a, b, tol=1e-13)[0].sum())(b)
    assert_close(g, np.linalg.solve(a.T, np.ones(N)), rtol=1e-9)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_errors_are_jax_s(name):
    solve = SOLVERS[name]
    with pytest.raises(ValueError, match="must be a square matrix"):
        solve(jnp.ones((2, 3)), jnp.ones(2))
    with pytest.raises(TypeError, match="either a function or ndarray"):
        solve("A", jnp.ones(2))
    with pytest.raises(ValueError, match="matching tree structure"):
        solve(jnp.eye(2), jnp.ones(2), x0=(jnp.ones(2),))


def test_x0_shape_is_checked_by_cg_and_bicgstab():
    for solve in (linalg.cg, linalg.bicgstab):
        with pytest.raises(ValueError, match="matching shapes"):
            solve(jnp.eye(2), jnp.ones(2), x0=jnp.ones(3))


def test_unknown_gmres_method():
    with pytest.raises(ValueError, match="invalid solve_method"):
        linalg.gmres(jnp.eye(2), jnp.ones(2), solve_method="lu")


def test_reachable_from_the_package():
    assert nbjax.scipy.sparse.linalg is linalg
    assert sorted(linalg.__all__) == ["bicgstab", "cg", "gmres"]

"""cholesky, triangular_solve and lu called natively (LAPACK's potrf and getrf, BLAS's trsm:
``backends/cpu/lapack.py``), against the reference backend: at top level, between kernels
and inside loops, batched, float32 and float64, empty and 1x1 matrices, matrices that are
not positive definite or are singular; and no call back into Python for them."""

import math

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.lax import linalg
from helpers import assert_close, cpu_and_reference, new_process_json

pytestmark = pytest.mark.cpu_compiler

RNG = np.random.default_rng(23)
DTYPES = [np.float32, np.float64]
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def _same(fn, *args, native=True):
    """``fn`` compiled for the cpu gives the reference's values (floats within rounding,
    scaled to each result's magnitude; NaNs at the same places; integers exactly), with no
    call back into Python if ``native``."""
    cpu, ref = cpu_and_reference(fn, *args)
    if native:
        assert "calling back" not in cpu.runs_as, cpu.runs_as
        assert "host step" not in cpu.plan.report()
    for got, want in zip(cpu.run(*args), ref.run(*args), strict=True):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert_close(got, want, rtol=RTOL.get(got.dtype, 0))
    return cpu


def _x64(dtype):
    return nbjax.enable_x64(np.dtype(dtype).itemsize == 8)


def _spd(shape, dtype):
    """Symmetric positive-definite matrices of ``shape`` (a stack)."""
    m = RNG.standard_normal(shape)
    return (m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _linalg_steps(cpu):
    return [g for g in cpu.plan.groups if g.kind == "library"]


# --- cholesky ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (2, 3, 4, 4), (0, 0), (0, 3, 3), (2, 0, 0)])
def test_cholesky_alone_and_between_kernels(dtype, shape):
    x = _spd(shape, dtype)
    with _x64(dtype):
        cpu = _same(lambda a: linalg.cholesky(a, symmetrize_input=False), x)
        assert "cholesky is a LAPACK call" in cpu.plan.report()
        _same(lambda a: linalg.cholesky(a * 2) + 1, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_reads_the_lower_triangle_and_zeroes_the_upper(dtype):
    x = _spd((3, 6, 6), dtype)
    x[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] = 1e3  # never read
    with _x64(dtype):
        got = _same(lambda a: linalg.cholesky(a, symmetrize_input=False), x).run(x)[0]
    assert np.all(np.triu(np.asarray(got), 1) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_of_matrices_not_positive_definite_is_nan(dtype):
    """Only the members that fail are NaN, on and below the diagonal (not potrf's partial
    factor), zero above it as JAX's."""
    x = _spd((4, 5, 5), dtype)
    x[1] = -x[1]                   # fails at the first column
    x[2, 3, 3] = -50.0             # fails further down
    x[3, 0, 0] = np.nan
    with _x64(dtype):
        got = np.asarray(_same(lambda a: linalg.cholesky(a, symmetrize_input=False),
                               x).run(x)[0])
    lower = np.tril(np.ones((5, 5), bool))
    for k in (1, 2, 3):
        assert np.isnan(got[k][lower]).all() and (got[k][~lower] == 0).all()
    assert np.isfinite(got[0]).all()
    x1 = -np.ones((1, 1), dtype)
    with _x64(dtype):
        _same(lambda a: linalg.cholesky(a), x1)


def test_cholesky_inside_scan_and_fori_loop():
    a = _spd((6, 6), np.float32)
    xs = _spd((5, 4, 4), np.float32)

    def scanned(xs):
        def step(c, x):
            chol = linalg.cholesky(x + c * jnp.eye(4, dtype=np.float32))
            return c + 0.25, chol.sum(axis=0)
        return lax.scan(step, jnp.float32(0), xs)

    def looped(a):
        return lax.fori_loop(0, 4, lambda i, v: linalg.cholesky(v @ v.T * 0.2 + a), a)
    for cpu in (_same(scanned, xs), _same(looped, a)):
        assert "compiled as a native loop" in cpu.plan.report()
        assert "1 native library call" in cpu.plan.report() or \
            "native library calls" in cpu.plan.report()


def test_gradient_of_a_cholesky_loss():
    """``grad`` of a Gaussian log-likelihood (a cholesky, triangular solves and products)
    compiled natively, against the reference."""
    a = _spd((5, 5), np.float64)
    y = RNG.standard_normal((5, 2))

    def nll(a):
        chol = linalg.cholesky(a)
        z = linalg.triangular_solve(chol, y, left_side=True, lower=True)
        return 0.5 * jnp.sum(z * z) + jnp.sum(jnp.log(jnp.diagonal(chol)))
    with nbjax.enable_x64(True):
        cpu = _same(nbjax.grad(nll), a)
        got = cpu.run(a)[0]
        assert_close(got, nbjax.jit(nbjax.grad(nll))(a), rtol=1e-12)
    inv = np.linalg.inv(a)
    assert_close(got, 0.5 * (inv - inv @ y @ y.T @ inv), rtol=1e-9)
    assert len(_linalg_steps(cpu)) >= 3


# --- triangular_solve ----------------------------------------------------------------------

def _triangular(k, dtype, batch=()):
    """Well-conditioned triangular factors (both triangles filled: only one is read)."""
    a = RNG.standard_normal(batch + (k, k)) * 0.3
    return (a + 3 * np.eye(k)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solve_every_form(dtype, left_side, lower, transpose_a, unit_diagonal):
    a = _triangular(4, dtype, (2,))
    b = RNG.standard_normal((2, 4, 3) if left_side else (2, 3, 4)).astype(dtype)
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=True, unit_diagonal=unit_diagonal)
    with _x64(dtype):
        cpu = _same(lambda a, b: linalg.triangular_solve(a, b, **params), a, b)
        assert "triangular_solve is a LAPACK call" in cpu.plan.report()
        _same(lambda a, b: linalg.triangular_solve(a * 2, b - 1, **params) * 3, a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape,b_shape", [((1, 1), (1, 1)), ((3, 3), (3, 0)),
                                             ((0, 0), (0, 2)), ((0, 3, 3), (0, 3, 2)),
                                             ((5, 5), (5,))])
def test_triangular_solve_sizes(dtype, a_shape, b_shape):
    a = _triangular(a_shape[-1], dtype, a_shape[:-2])
    b = RNG.standard_normal(b_shape).astype(dtype)
    with _x64(dtype):
        _same(lambda a, b: linalg.triangular_solve(a, b, left_side=True, lower=True), a, b)


def test_triangular_solve_with_a_zero_on_the_diagonal():
    """A singular triangle: infinities where the reference's substitution has them (a zero
    pivot in the last row of a forward solve: that row infinite, the others finite)."""
    a = _triangular(4, np.float64)
    a[3, 3] = 0.0
    b = RNG.standard_normal((4, 2))
    with nbjax.enable_x64(True):
        got = _same(lambda a, b: linalg.triangular_solve(a, b, left_side=True, lower=True),
                    a, b).run(a, b)[0]
    assert np.isinf(got[3]).all() and np.isfinite(got[:3]).all()


def test_triangular_solve_inside_scan():
    a = _triangular(5, np.float32)
    xs = RNG.standard_normal((6, 5, 2)).astype(np.float32)

    def scanned(a, xs):
        def step(c, x):
            s = linalg.triangular_solve(a, x + c, left_side=True, lower=False,
                                        transpose_a=True)
            return c + s[0, 0], s
        return lax.scan(step, jnp.float32(0), xs)
    cpu = _same(scanned, a, xs)
    assert "compiled as a native loop" in cpu.plan.report()


# --- lu ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (5, 3), (3, 5), (2, 3, 4, 4), (0, 0),
                                   (3, 0), (0, 3), (0, 3, 3), (2, 4, 0)])
def test_lu_alone_and_between_kernels(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype)
    with _x64(dtype):
        cpu = _same(linalg.lu, x)
        assert "lu is a LAPACK call" in cpu.plan.report()
        _same(lambda v: [o * 2 for o in linalg.lu(v - 1)], x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_of_singular_matrices(dtype):
    """Zero pivots (getrf's ``info > 0``) leave their column as the reference does; the
    matrices are small integers, so both compute exactly."""
    x = np.array([[[1, 2, 3], [2, 4, 6], [1, 1, 1]],
                  [[0, 0, 0], [0, 0, 0], [0, 0, 0]],
                  [[0, 1, 2], [0, 2, 4], [0, 3, 7]],
                  [[4, 2, 0], [2, 1, 0], [1, 3, 0]]], dtype)
    with _x64(dtype):
        cpu, ref = cpu_and_reference(linalg.lu, x)
        assert "calling back" not in cpu.runs_as
        for got, want in zip(cpu.run(x), ref.run(x), strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_lu_pivots_and_permutation():
    """The pivots are 0-based int32 rows, and the permutation rebuilds the matrix."""
    x = RNG.standard_normal((3, 6, 6))
    with nbjax.enable_x64(True):
        cpu = _same(linalg.lu, x)
        lu, pivots, perm = (np.asarray(v) for v in cpu.run(x))
    assert pivots.dtype == perm.dtype == np.int32 and (pivots >= np.arange(6)).all()
    lower = np.tril(lu, -1) + np.eye(6)
    assert_close(lower @ np.triu(lu), np.take_along_axis(x, perm[..., None], 1), rtol=1e-13)


def test_lu_inside_fori_loop_and_jnp_solve():
    """``jnp.linalg.solve`` (an lu and two triangular solves) and ``det`` in a loop body."""
    a = RNG.standard_normal((5, 5)).astype(np.float32) + 3 * np.eye(5, dtype=np.float32)
    b = RNG.standard_normal((5, 2)).astype(np.float32)

    def looped(a, b):
        return lax.fori_loop(0, 3, lambda i, v: jnp.linalg.solve(a + i, v) +
                             jnp.linalg.det(a) * 1e-3, b)
    cpu = _same(looped, a, b)
    assert "compiled as a native loop" in cpu.plan.report()


# --- qr ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (6, 3), (3, 6), (2, 5, 3), (70, 40),
                                   (40, 70), (3, 0), (0, 3), (0, 0), (0, 3, 3)])
def test_qr_alone_and_between_kernels(dtype, full_matrices, shape):
    """Householder signs are the reference's (R's diagonal signs are not normalised
    away): q and r are compared as they are."""
    x = RNG.standard_normal(shape).astype(dtype)
    with _x64(dtype):
        cpu = _same(lambda a: linalg.qr(a, full_matrices=full_matrices), x)
        assert "qr is a LAPACK call" in cpu.plan.report()
        _same(lambda a: [o + 1 for o in linalg.qr(a * 2, full_matrices=full_matrices)], x)


def test_qr_of_a_rank_deficient_matrix():
    x = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0], [1.0, 2.0, 0.0]])
    with nbjax.enable_x64(True):
        q, r = (np.asarray(v) for v in _same(linalg.qr, x).run(x))
    assert_close(q @ r, x, rtol=1e-14)


def test_qr_inside_scan():
    """Gram-Schmidt's job in a loop: orthonormalise a moving basis every step."""
    xs = RNG.standard_normal((6, 5, 3)).astype(np.float32)

    def scanned(xs):
        def step(c, x):
            q, r = linalg.qr(x + c, full_matrices=False)
            return c + 0.5 * q, r
        return lax.scan(step, jnp.zeros((5, 3), np.float32), xs)
    cpu = _same(scanned, xs)
    assert "compiled as a native loop" in cpu.plan.report()


# --- eigh ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 5, 5), (60, 60), (0, 0), (0, 3, 3)])
def test_eigh_alone_and_between_kernels(dtype, lower, shape):
    """Eigenvectors with the reference's signs (syevd in float64, as NumPy computes), from
    the triangle asked for (the other one holds garbage)."""
    x = RNG.standard_normal(shape).astype(dtype)
    with _x64(dtype):
        cpu = _same(lambda a: linalg.eigh(a, lower=lower, symmetrize_input=False), x)
        assert "eigh is a LAPACK call" in cpu.plan.report()
        _same(lambda a: [o * 2 for o in linalg.eigh(a + 1)], x)


def test_eigh_of_repeated_eigenvalues():
    x = np.diag([2.0, 2.0, 1.0, 2.0]) + 0.0
    q = np.linalg.qr(RNG.standard_normal((4, 4)))[0]
    with nbjax.enable_x64(True):
        _same(linalg.eigh, np.stack([x, q @ x @ q.T, np.eye(4)]))


def test_eigh_that_does_not_converge_is_nan():
    """syevd's failure (``info > 0``, a matrix of NaNs) gives NaNs, as in JAX, where the
    reference raises NumPy's LinAlgError; the other members of the stack are unaffected."""
    x = RNG.standard_normal((2, 3, 3))
    x[1] = np.nan
    with nbjax.enable_x64(True):
        cpu, _ = cpu_and_reference(linalg.eigh, x)
        v, w = (np.asarray(o) for o in cpu.run(x))
        want_v, want_w = (np.asarray(o) for o in linalg.eigh(x[:1]))
    assert np.isnan(v[1]).all() and np.isnan(w[1]).all()
    assert_close(v[:1], want_v, rtol=1e-12)
    assert_close(w[:1], want_w, rtol=1e-12)


def test_eigh_inside_fori_loop_and_its_gradient():
    a = _spd((5, 5), np.float32)

    def looped(a):
        def body(i, m):
            v, w = linalg.eigh(m)
            return (v * w[None, :]) @ v.T * 0.5 + a * 0.5
        return lax.fori_loop(0, 4, body, a)

    def top_eigenvalue(a):
        return linalg.eigh(a)[1][-1]
    for cpu in (_same(looped, a), _same(nbjax.grad(top_eigenvalue), a)):
        assert "calling back" not in cpu.runs_as


# --- svd -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (6, 3), (3, 6), (2, 5, 3), (50, 40),
                                   (0, 3), (3, 0), (2, 0, 0), (0, 2, 2)])
def test_svd_alone_and_between_kernels(dtype, full_matrices, shape):
    """gesdd in float64 with the workspace NumPy asks for: singular vectors with the
    reference's signs; empty matrices complete u and vh with identities."""
    x = RNG.standard_normal(shape).astype(dtype)
    with _x64(dtype):
        cpu = _same(lambda a: linalg.svd(a, full_matrices=full_matrices), x)
        if min(shape[-2:]) and math.prod(shape):
            assert "svd is a LAPACK call" in cpu.plan.report()
        _same(lambda a: [o * 2 for o in linalg.svd(a + 1, full_matrices=full_matrices)], x)
        _same(lambda a: linalg.svd(a * 3, compute_uv=False), x)


def test_svd_of_rank_deficient_and_failing_matrices():
    """Repeated and zero singular values; a matrix of NaNs, on which gesdd fails, is NaN
    (as in JAX, where the reference raises), the rest of the stack unaffected."""
    rank_one = np.outer(np.arange(1.0, 5.0), np.arange(1.0, 4.0))
    with nbjax.enable_x64(True):
        _same(linalg.svd, np.stack([rank_one, np.zeros((4, 3)), np.eye(4, 3)]))
        x = RNG.standard_normal((2, 4, 3))
        x[1] = np.nan
        cpu, _ = cpu_and_reference(lambda a: linalg.svd(a, full_matrices=False), x)
        u, s, vh = (np.asarray(o) for o in cpu.run(x))
        want = [np.asarray(o) for o in linalg.svd(x[:1], full_matrices=False)]
    assert np.isnan(s[1]).all() and np.isnan(u[1]).all() and np.isnan(vh[1]).all()
    for got, expected in zip((u, s, vh), want):
        assert_close(got[:1], expected, rtol=1e-12)


def test_svd_inside_scan_and_its_gradient():
    xs = RNG.standard_normal((3, 5, 4)).astype(np.float32)

    def scanned(xs):
        def step(c, x):
            u, s, vh = linalg.svd(x + c, full_matrices=False)
            return c + s[0] * 0.01, (u * s[None, :]) @ vh
        return lax.scan(step, jnp.float32(0), xs)

    def nuclear_norm(a):
        return linalg.svd(a, compute_uv=False).sum()
    for cpu in (_same(scanned, xs), _same(nbjax.grad(nuclear_norm), xs[0])):
        assert "calling back" not in cpu.runs_as


# --- what stays a call back into Python ----------------------------------------------------

def test_complex_values_call_back_into_python_and_say_so():
    xs = (_spd((2, 3, 3), np.float32) + 0j).astype(np.complex64)

    def scanned(xs):
        return lax.scan(lambda c, x: (c, linalg.cholesky(x, symmetrize_input=False)), 0, xs)
    cpu = _same(scanned, xs, native=False)
    assert cpu.runs_as == "1 step, calling back into Python for cholesky"
    assert "1 host step (cholesky)" in cpu.plan.report()


def test_the_lapack_of_scipy_where_numpy_ships_none(monkeypatch):
    """Without NumPy's OpenBLAS, compiled code calls SciPy's LAPACK and BLAS (32-bit
    integers, pivots included), with the same values."""
    from nbjax.backends.cpu import routines
    monkeypatch.setattr(routines, "_numpy_openblas", lambda: None)
    routines.library.cache_clear()
    try:
        assert routines.library().width == 32
        x = _spd((2, 4, 4), np.float64)
        x[1] = -x[1]
        with nbjax.enable_x64(True):
            _same(lambda a: (linalg.cholesky(a), *linalg.lu(a * 3),
                             linalg.triangular_solve(a, a[..., :2], left_side=True)), x)
            _same(lambda a: linalg.svd(a * 2), x)
    finally:
        routines.library.cache_clear()


_CHILD = """
import json
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax import lax
from nbjax.lax import linalg
from nbjax.backends.cpu import cache

def program(a):
    return lax.fori_loop(0, 3, lambda i, v: linalg.cholesky(v @ v.T * 0.1 + a)
                         + linalg.lu(v)[0] * 0.01, a)

a = (np.eye(4) * 4 + np.linspace(0, 1, 16).reshape(4, 4)).astype(np.float32)
exe = nbjax.jit(program).lower(a).compile("cpu").executable
print(json.dumps({"stats": dict(cache.stats), "runs as": exe.runs_as,
                  "out": exe.run(a)[0].tolist()}))
"""


def test_a_new_process_loads_the_program_and_finds_lapack(tmp_path):
    """A program calling LAPACK, loaded from the disk cache by another process, resolves
    the routines' symbols again (no address is baked into its object code)."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    runs = [new_process_json(script, tmp_path / "cache") for _ in range(2)]
    assert runs[0]["stats"].get("program store") == 1
    assert runs[1]["stats"].get("program hit") == 1
    assert runs[0]["runs as"] == runs[1]["runs as"] == "1 step"
    assert runs[1]["out"] == runs[0]["out"] and np.isfinite(runs[0]["out"]).all()

"""Linear algebra: the lax primitives (nbjax.lax.linalg) and nbjax.numpy.linalg,
checked against NumPy through reconstruction identities, with derivatives against finite
differences, vmap against Python loops, and traced jaxprs against eager results."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import check_jaxpr
from nbjax.lax import linalg as la
from nbjax.test_util import check_grads
from nbjax.tree_util import tree_leaves
import helpers
from helpers import random_array, staged

RNG = np.random.default_rng(1234)

FLOAT_TYPES = [np.float32, np.complex64]


def well_conditioned(shape, dtype=np.float32):
    """Square matrices with the diagonal pushed away from zero."""
    n = shape[-1]
    return (0.5 * random_array(RNG, shape, dtype) + 3 * np.eye(n)).astype(dtype)


def hpd(shape, dtype=np.float32):
    """Hermitian positive-definite matrices."""
    a = random_array(RNG, shape, dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def tol(dtype):
    return 1e-4 if np.finfo(dtype).bits == 32 else 1e-10


def H(x):
    return np.conj(np.swapaxes(np.asarray(x), -1, -2))


def assert_close(a, b, dtype=np.float32, scale=1.0):
    t = tol(dtype) * scale * 10
    a = np.asarray(a)
    np.testing.assert_allclose(a, np.broadcast_to(b, a.shape), rtol=t, atol=t)


def check_traced(f, *args):
    """The traced jaxpr type-checks and evaluates to the eager result."""
    traced, eager = staged(f, *args), f(*args)
    for t, e in zip(tree_leaves(traced), tree_leaves(eager), strict=True):
        np.testing.assert_allclose(np.asarray(t), np.asarray(e), rtol=1e-5, atol=1e-5)


# --- primitives: values ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
def test_cholesky(shape, dtype):
    a = hpd(shape, dtype)
    L = np.asarray(la.cholesky(a))
    assert L.dtype == dtype and L.shape == shape
    assert_close(np.triu(L, 1), 0, dtype)
    assert_close(L @ H(L), a, dtype, scale=shape[-1])
    check_traced(la.cholesky, a)


def test_cholesky_not_positive_definite_gives_nan():
    """NaN on and below the diagonal of the members that fail, zero above it, as JAX."""
    a = np.stack([hpd((3, 3)), -np.eye(3, dtype=np.float32)])
    L = np.asarray(la.cholesky(a))
    lower = np.tril(np.ones((3, 3), bool))
    assert np.all(np.isfinite(L[0]))
    assert np.all(np.isnan(L[1][lower])) and np.all(L[1][~lower] == 0)


def test_decompositions_of_non_finite_matrices_are_nan_not_errors():
    """Where NumPy's LAPACK wrappers raise (an SVD that does not converge, eig of a matrix
    holding NaN or inf), the member is NaN and the others are computed, as JAX returns
    them; slogdet's sign is NaN too."""
    bad = np.array([[1.0, np.nan], [0.0, 1.0]], np.float32)
    a = np.stack([bad, np.diag(np.float32([2.0, 3.0]))])
    s = np.asarray(jnp.linalg.svd(a, compute_uv=False))
    assert np.isnan(s[0]).all() and np.array_equal(s[1], [3.0, 2.0])
    u, s, vh = map(np.asarray, jnp.linalg.svd(a))
    assert np.isnan(u[0]).all() and np.isnan(vh[0]).all() and np.isfinite(u[1]).all()
    w, v = map(np.asarray, jnp.linalg.eig(a))
    assert np.isnan(w[0]).all() and np.isnan(v[0]).all()
    assert np.array_equal(np.sort(w[1].real), [2.0, 3.0])
    for fn in (jnp.linalg.pinv, jnp.linalg.eigvals):
        assert np.isnan(np.asarray(fn(bad))).all()
    assert np.isnan(np.asarray(jnp.linalg.lstsq(bad, np.ones(2, np.float32))[0])).all()
    sign, logdet = jnp.linalg.slogdet(bad)
    assert np.isnan(float(sign)) and np.isnan(float(logdet))
    sign, logdet = jnp.linalg.slogdet(np.float32([[-2.0, 1.0], [0.0, 3.0]]))
    assert float(sign) == -1.0 and abs(float(logdet) - np.log(6.0)) < 1e-6


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_eigh_and_eig_of_a_stack_with_a_non_finite_member(dtype):
    """A member LAPACK does not converge on (``syevd``/``heevd`` and ``geev`` on a matrix
    holding NaN) is NaN, in both parts of a complex number, as JAX returns it; the other
    members are computed, and keep the imaginary parts of their complex eigenvalues."""
    bad = np.array([[np.nan, 1, 2], [1, 1, 0], [2, 0, 1]], dtype)
    sym = np.array([[2, 1, 0], [1, 2, 0], [0, 0, 5]], dtype)  # eigenvalues 1, 3, 5
    rotation = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 2]], dtype)  # eigenvalues +-i, 2
    for eigvalsh in (jnp.linalg.eigvalsh, nbjax.jit(jnp.linalg.eigvalsh)):
        w = np.asarray(eigvalsh(np.stack([sym, bad])))
        assert_close(w[0], [1, 3, 5], dtype)
        assert np.isnan(w[1]).all()
    w, v = map(np.asarray, jnp.linalg.eigh(np.stack([bad, sym])))
    assert np.isnan(w[0]).all() and np.isnan(v[0]).all()
    assert_close(np.abs(v[1]) ** 2, np.float32([[.5, .5, 0], [.5, .5, 0], [0, 0, 1]]), dtype)
    w, v = map(np.asarray, jnp.linalg.eig(np.stack([rotation, bad])))
    assert_close(w[0][np.argsort(w[0].imag)], [-1j, 2, 1j], dtype)
    assert_close(rotation @ v[0], v[0] * w[0], dtype, scale=2)
    assert np.isnan(w[1].real).all() and np.isnan(w[1].imag).all()


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5), (5, 3), (0, 0)])
def test_lu(shape, dtype):
    a = random_array(RNG, shape, dtype)
    lu, pivots, perm = la.lu(a)
    lu, pivots, perm = map(np.asarray, (lu, pivots, perm))
    m, n = shape[-2:]
    k = min(m, n)
    assert pivots.dtype == np.int32 and pivots.shape == shape[:-2] + (k,)
    assert perm.dtype == np.int32 and perm.shape == shape[:-2] + (m,)
    l = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    u = np.triu(lu)[..., :k, :]
    permuted = np.take_along_axis(a, perm[..., :, None], axis=-2)
    assert_close(l @ u, permuted, dtype, scale=3)
    # Partial pivoting bounds L: |l| <= 1 (sqrt 2 for complex values, whose pivots maximise
    # LAPACK's |re| + |im|).
    bound = np.sqrt(2) if np.iscomplexobj(a) else 1
    assert np.all(np.abs(np.tril(lu, -1)) <= bound + 1e-6)
    np.testing.assert_array_equal(la.lu_pivots_to_permutation(pivots, m), perm)
    check_traced(la.lu, a)


def test_lu_pivots_to_permutation_hand_derived():
    # Swaps (0<->2), then (1<->2) applied to [0, 1, 2, 3]: [2, 1, 0, 3] -> [2, 0, 1, 3].
    pivots = np.array([2, 2], np.int32)
    np.testing.assert_array_equal(la.lu_pivots_to_permutation(pivots, 4), [2, 0, 1, 3])
    with pytest.raises(ValueError, match="permutation size"):
        la.lu_pivots_to_permutation(pivots, 1)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 2)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_qr(shape, dtype, full_matrices):
    a = random_array(RNG, shape, dtype)
    q, r = map(np.asarray, la.qr(a, full_matrices=full_matrices))
    m, n = shape[-2:]
    k = m if full_matrices else min(m, n)
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    assert_close(q @ r, a, dtype)
    assert_close(H(q) @ q, np.eye(k), dtype)
    assert_close(np.tril(r, -1), 0, dtype)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 4), (0, 3)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd(shape, dtype, full_matrices):
    a = random_array(RNG, shape, dtype)
    u, s, vh = map(np.asarray, la.svd(a, full_matrices=full_matrices))
    m, n = shape[-2:]
    k = min(m, n)
    assert s.dtype == np.finfo(dtype).dtype and s.shape == shape[:-2] + (k,)
    assert_close(s, np.linalg.svd(a, compute_uv=False) if k else s, dtype)
    assert_close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, dtype)
    assert_close(H(u) @ u, np.eye(u.shape[-1]), dtype)
    assert_close(vh @ H(vh), np.eye(vh.shape[-2]), dtype)
    assert_close(la.svd(a, compute_uv=False), s, dtype)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
@pytest.mark.parametrize("lower", [True, False])
def test_eigh(shape, dtype, lower):
    a = random_array(RNG, shape, dtype)
    a = a + H(a)
    v, w = map(np.asarray, la.eigh(a, lower=lower))
    assert w.dtype == np.finfo(dtype).dtype
    assert_close(w, np.linalg.eigvalsh(a), dtype)
    assert_close(a @ v, v * w[..., None, :], dtype, scale=3)
    assert_close(H(v) @ v, np.eye(shape[-1]), dtype)
    # Without symmetrizing, only the chosen triangle is read.
    other = random_array(RNG, shape, dtype)
    garbage = np.triu(other, 1) if lower else np.tril(other, -1)
    _, w2 = la.eigh(a + garbage, lower=lower, symmetrize_input=False)
    assert_close(w2, w, dtype)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_eig(dtype):
    a = random_array(RNG, (2, 4, 4), dtype)
    w, vl, vr = map(np.asarray, la.eig(a))
    assert w.dtype == vr.dtype == np.result_type(dtype, np.complex64)
    assert_close(a @ vr, vr * w[..., None, :], dtype, scale=3)
    assert_close(H(vl) @ a, w[..., :, None] * H(vl), dtype, scale=3)
    assert_close(np.linalg.norm(vl, axis=-2), 1, dtype)
    w_only, = la.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    assert_close(np.sort_complex(np.asarray(w_only)), np.sort_complex(np.linalg.eigvals(a)),
                 dtype, scale=3)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, False),
                                                     (True, True), (False, True)])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_triangular_solve(dtype, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    a = well_conditioned((2, 3, 3), dtype)
    b = random_array(RNG, (2, 3, 2) if left_side else (2, 2, 3), dtype)
    x = np.asarray(la.triangular_solve(a, b, left_side=left_side, lower=lower,
                                       transpose_a=transpose_a, conjugate_a=conjugate_a,
                                       unit_diagonal=unit_diagonal))
    m = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        m = m - m * np.eye(3) + np.eye(3)
    m = np.conj(m) if conjugate_a else m
    m = np.swapaxes(m, -1, -2) if transpose_a else m
    assert_close(m @ x if left_side else x @ m, b, dtype)


def test_triangular_solve_vector_and_errors():
    a, b = well_conditioned((3, 3)), random_array(RNG, (3,))
    x = np.asarray(la.triangular_solve(a, b, left_side=True, lower=True))
    assert_close(np.tril(a) @ x, b)
    with pytest.raises(TypeError, match="triangular_solve does not accept dtype int32"):
        la.triangular_solve(np.eye(3, dtype=np.int32), np.ones((3, 1), np.int32))
    with pytest.raises(ValueError, match="square"):
        la.triangular_solve(np.ones((3, 2), np.float32), np.ones((3, 1), np.float32))
    with pytest.raises(ValueError, match="Incompatible shapes"):
        la.triangular_solve(a, np.ones((2, 1), np.float32), left_side=True)
    with pytest.raises(TypeError, match="same dtypes"):
        la.triangular_solve(a, np.ones((3, 1), np.complex64), left_side=True)


def test_primitive_errors():
    with pytest.raises(TypeError, match="cholesky does not accept dtype int32"):
        la.cholesky(np.eye(3, dtype=np.int32))
    with pytest.raises(ValueError, match="square"):
        la.cholesky(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="rank at least 2"):
        la.lu(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="square"):
        la.eigh(np.ones((2, 3), np.float32))


def test_float64(x64):
    a = well_conditioned((3, 3), np.float64)
    lu, _, perm = la.lu(a)
    assert np.asarray(lu).dtype == np.float64
    u, s, vh = la.svd(a)
    np.testing.assert_allclose((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), a,
                               rtol=1e-12, atol=1e-12)
    assert_close(jnp.linalg.det(a), np.linalg.det(a), np.float64)
    assert_close(jnp.linalg.inv(a), np.linalg.inv(a), np.float64)
    check_grads(jnp.linalg.inv, (a,), order=1, modes=("fwd", "rev"))


# --- primitives: vmap -------------------------------------------------------------------------

def _loop(f, xs, axis):
    outs = [f(np.take(xs, i, axis)) for i in range(xs.shape[axis])]
    return nbjax.tree_util.tree_map(lambda *o: np.stack([np.asarray(x) for x in o]), *outs)


@pytest.mark.parametrize("name,f,make", [
    ("cholesky", la.cholesky, lambda: np.stack([hpd((3, 3)) for _ in range(2)], 2)),
    ("lu", la.lu, lambda: random_array(RNG, (3, 4, 2))),
    ("qr", lambda x: la.qr(x, full_matrices=False), lambda: random_array(RNG, (4, 3, 2))),
    ("svd", la.svd, lambda: random_array(RNG, (3, 2, 3))),
    ("eigh", la.eigh, lambda: (lambda a: a + np.swapaxes(a, 0, 1))(random_array(RNG, (3, 3, 2)))),
])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_vmap_unary(name, f, make, axis):
    x = make()
    if name == "eigh" or name == "cholesky":
        x = np.moveaxis(x, 2, axis)  # the batch axis of the symmetric stack
    expected = _loop(f, x, axis)
    got = nbjax.vmap(f, in_axes=axis)(x)
    for g, e in zip(nbjax.tree_util.tree_leaves(got), nbjax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-4, atol=1e-4)


def test_vmap_leading_batch_axis_needs_no_transpose():
    jaxpr = str(nbjax.make_jaxpr(nbjax.vmap(la.lu, in_axes=1, out_axes=1))(
        random_array(RNG, (2, 5, 3, 3))))
    assert "transpose[" not in jaxpr
    jaxpr = str(nbjax.make_jaxpr(nbjax.vmap(
        lambda b: la.triangular_solve(well_conditioned((3, 3)), b, left_side=True),
        in_axes=2, out_axes=2))(random_array(RNG, (3, 2, 4))))  # batch of columns: folded
    assert "transpose[" not in jaxpr


@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (0, 0), (1, 2), (None, -1)])
@pytest.mark.parametrize("left_side", [True, False])
def test_vmap_triangular_solve(in_axes, left_side):
    size = 3
    a_shape, b_shape = (4, 4), ((4, 2) if left_side else (2, 4))
    a = well_conditioned(a_shape)
    b = random_array(RNG, b_shape)
    if in_axes[0] is not None:
        a = np.stack([well_conditioned(a_shape) for _ in range(size)], in_axes[0])
    if in_axes[1] is not None:
        b = np.stack([random_array(RNG, b_shape) for _ in range(size)], in_axes[1])

    def f(a, b):
        return la.triangular_solve(a, b, left_side=left_side, lower=True)
    got = nbjax.vmap(f, in_axes=in_axes)(a, b)
    expected = [f(a if in_axes[0] is None else np.take(a, i, in_axes[0]),
                  b if in_axes[1] is None else np.take(b, i, in_axes[1]))
                for i in range(size)]
    np.testing.assert_allclose(np.asarray(got), np.stack(expected), rtol=1e-4, atol=1e-4)


def test_nested_vmap_and_out_axes():
    x = random_array(RNG, (2, 3, 4, 4))
    inner = nbjax.vmap(lambda a: la.lu(a)[0], in_axes=0, out_axes=1)  # (2, 4, 4) -> (4, 2, 4)
    got = nbjax.vmap(inner, in_axes=1, out_axes=0)(x)  # (3, 4, 2, 4)
    expected = np.transpose(np.asarray(la.lu(x)[0]), (1, 2, 0, 3))
    helpers.assert_close(np.asarray(got), expected, rtol=1e-6)


# --- primitives: derivatives ---------------------------------------------------------------

GRAD_TOL = dict(atol=2e-2, rtol=2e-2)  # float32 finite differences of matrix functions


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower,transpose_a,unit_diagonal", [(True, False, False),
                                                             (False, True, True)])
def test_triangular_solve_grads(left_side, lower, transpose_a, unit_diagonal):
    a = well_conditioned((3, 3))
    b = random_array(RNG, (3, 2) if left_side else (2, 3))

    def f(a, b):
        return la.triangular_solve(a, b, left_side=left_side, lower=lower,
                                   transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    check_grads(f, (a, b), order=2, modes=("fwd", "rev"), **GRAD_TOL)


def test_triangular_solve_complex_grads():
    a, b = well_conditioned((3, 3), np.complex64), random_array(RNG, (3, 2), np.complex64)
    check_grads(lambda a, b: la.triangular_solve(a, b, left_side=True, lower=True,
                                                 conjugate_a=True, transpose_a=True),
                (a, b), order=1, modes=("fwd", "rev"), **GRAD_TOL)


def test_cholesky_grads():
    a = hpd((2, 3, 3))
    check_grads(la.cholesky, (a,), order=2, modes=("fwd", "rev"), **GRAD_TOL)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_lu_grads(shape):
    a = random_array(RNG, shape)
    check_grads(lambda a: la.lu(a)[0], (a,), order=1, modes=("fwd", "rev"), **GRAD_TOL)
    primals, tangents = nbjax.jvp(la.lu, (a,), (a,))
    assert tangents[1].dtype == nbjax.core.dtypes.float0


@pytest.mark.parametrize("shape,full_matrices", [((3, 3), True), ((4, 2), False),
                                                 ((4, 2), True), ((2, 4), True)])
def test_qr_grads(shape, full_matrices):
    a = random_array(RNG, shape)
    check_grads(lambda a: la.qr(a, full_matrices=full_matrices), (a,), order=1,
                modes=("fwd", "rev"), **GRAD_TOL)


def test_qr_complex_grads():
    a = random_array(RNG, (3, 2), np.complex64)
    check_grads(lambda a: la.qr(a, full_matrices=False), (a,), order=1,
                modes=("fwd", "rev"), **GRAD_TOL)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4)])
def test_svd_grads(shape):
    # Distinct singular values (a diagonal ramp plus noise) keep U and V well defined;
    # u * v_h-type products are gauge invariant (sign flips of a pair cancel).
    a = random_array(RNG, shape) * 0.1
    a[..., range(min(shape)), range(min(shape))] += np.arange(1, min(shape) + 1)
    check_grads(lambda a: la.svd(a, compute_uv=False), (a,), order=2, modes=("fwd", "rev"),
                **GRAD_TOL)

    def gauge_invariant(a):
        u, s, vh = la.svd(a, full_matrices=False)
        return jnp.matmul(u * s[None, :] ** 2, vh)
    check_grads(gauge_invariant, (a,), order=1, modes=("fwd", "rev"), **GRAD_TOL)


def test_svd_full_matrices_jvp_not_implemented():
    with pytest.raises(NotImplementedError, match="full matrices"):
        nbjax.jvp(la.svd, (random_array(RNG, (3, 2)),), (random_array(RNG, (3, 2)),))


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_eigh_grads(dtype):
    a = random_array(RNG, (3, 3), dtype) * 0.1
    a = a + H(a) + np.diag([1.0, 2.0, 3.0]).astype(dtype)

    def f(a):  # eigenvalues, and v diag(w) v^H without the phase freedom of v
        v, w = la.eigh(a)
        return w, jnp.matmul(v * w[None, :] ** 2, jnp.conj(v.T))
    check_grads(f, (a,), order=1, modes=("fwd", "rev"), **GRAD_TOL)
    check_grads(lambda a: la.eigh(a)[1], (a,), order=2, modes=("fwd", "rev"), **GRAD_TOL)


def test_eig_grads():
    a = random_array(RNG, (3, 3)) * 0.1 + np.diag([1.0, 2.0, 4.0]).astype(np.float32)

    def eigenvalues(a):
        w, = la.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
        return jnp.real(w) + jnp.imag(w)
    check_grads(eigenvalues, (a,), order=1, modes=("fwd", "rev"), **GRAD_TOL)

    def eigvecs(a):
        w, v = la.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
        return jnp.real(v) + jnp.imag(v)
    check_grads(eigvecs, (a,), order=1, modes=("fwd",), **GRAD_TOL)
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs"):
        nbjax.jvp(lambda a: la.eig(a)[0], (a,), (a,))


# --- nbjax.numpy.linalg ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_inv_solve_det(dtype):
    a, b = well_conditioned((2, 3, 3), dtype), random_array(RNG, (2, 3, 2), dtype)
    assert_close(jnp.linalg.inv(a), np.linalg.inv(a), dtype)
    assert_close(jnp.linalg.solve(a, b), np.linalg.solve(a, b), dtype)
    assert_close(jnp.linalg.det(a), np.linalg.det(a), dtype, scale=10)
    sign, logdet = jnp.linalg.slogdet(a)
    sign_np, logdet_np = np.linalg.slogdet(a)
    assert_close(sign, sign_np, dtype)
    assert_close(logdet, logdet_np, dtype)


def test_solve_broadcasting_and_vector():
    a, b = well_conditioned((2, 1, 3, 3)), random_array(RNG, (4, 3, 2))
    x = np.asarray(jnp.linalg.solve(a, b))
    assert x.shape == (2, 4, 3, 2)
    assert_close(a @ x, np.broadcast_to(b, x.shape))
    v = random_array(RNG, (3,))
    assert_close(jnp.linalg.solve(a[0, 0], v), np.linalg.solve(a[0, 0], v))
    assert jnp.linalg.solve(a, v).shape == (2, 1, 3)
    with pytest.raises(ValueError, match="Invalid shapes for solve"):
        jnp.linalg.solve(well_conditioned((2, 3, 3)), random_array(RNG, (2, 3)))
    with pytest.raises(ValueError, match="at least two dimensional"):
        jnp.linalg.solve(random_array(RNG, (3,)), random_array(RNG, (3,)))


def test_det_singular_and_empty():
    assert float(jnp.linalg.det(np.ones((3, 3), np.float32))) == 0.0
    assert float(jnp.linalg.det(np.zeros((0, 0), np.float32))) == 1.0
    sign, logdet = jnp.linalg.slogdet(np.zeros((2, 2), np.float32))
    assert float(sign) == 0 and float(logdet) == -np.inf
    # d det / dA = adj(A)^T, nonzero for a rank n-1 matrix, computed without inverting A.
    a = np.array([[1., 2., 3.], [4., 5., 6.], [7., 8., 9.]], np.float32)
    adj_t = np.array([[-3., 6., -3.], [6., -12., 6.], [-3., 6., -3.]])
    assert_close(nbjax.grad(jnp.linalg.det)(a), adj_t, scale=10)


@pytest.mark.parametrize("f", [jnp.linalg.inv, jnp.linalg.det,
                               lambda a: jnp.linalg.slogdet(a)[1],
                               lambda a: jnp.linalg.solve(a, np.ones((3, 2), np.float32))],
                         ids=["inv", "det", "slogdet", "solve"])
def test_grads_of_inverse_functions(f):
    a = well_conditioned((3, 3))
    check_grads(f, (a,), order=2, modes=("fwd", "rev"), **GRAD_TOL)


def test_solve_grads_wrt_b_and_complex():
    a, b = well_conditioned((3, 3), np.complex64), random_array(RNG, (3,), np.complex64)
    check_grads(jnp.linalg.solve, (a, b), order=1, modes=("fwd", "rev"), **GRAD_TOL)
    check_grads(lambda a: jnp.linalg.slogdet(a)[1],
                (well_conditioned((3, 3), np.complex64),), order=1, modes=("fwd", "rev"),
                **GRAD_TOL)


def test_solve_jaxprs():
    a, b = well_conditioned((3, 3)), random_array(RNG, (3,))
    check_traced(jnp.linalg.solve, a, b)
    check_jaxpr(nbjax.make_jaxpr(nbjax.grad(lambda a: jnp.sum(jnp.linalg.solve(a, b))))(a)
                .jaxpr)
    check_jaxpr(nbjax.make_jaxpr(nbjax.grad(jnp.linalg.det))(a).jaxpr)


def test_jit_and_vmap_of_numpy_linalg():
    a = well_conditioned((4, 3, 3))
    np.testing.assert_allclose(np.asarray(nbjax.jit(jnp.linalg.inv)(a)), np.linalg.inv(a),
                               rtol=1e-4, atol=1e-4)
    helpers.assert_close(np.asarray(nbjax.vmap(jnp.linalg.det)(a)), np.linalg.det(a),
                         rtol=1e-4)
    g = nbjax.jit(nbjax.grad(lambda a: jnp.linalg.slogdet(a)[1]))(a[0])
    np.testing.assert_allclose(np.asarray(g), np.linalg.inv(a[0]).T, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_decompositions_numpy_api(dtype):
    a = random_array(RNG, (2, 4, 3), dtype)
    q, r = jnp.linalg.qr(a)
    assert q.shape == (2, 4, 3) and r.shape == (2, 3, 3)
    assert_close(np.asarray(q) @ np.asarray(r), a, dtype)
    assert jnp.linalg.qr(a, mode="complete").Q.shape == (2, 4, 4)
    assert_close(jnp.linalg.qr(a, mode="r"), r, dtype)
    with pytest.raises(ValueError, match="Unsupported QR"):
        jnp.linalg.qr(a, mode="bogus")
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    assert_close((np.asarray(u) * np.asarray(s)[..., None, :]) @ np.asarray(vh), a, dtype)
    assert_close(jnp.linalg.svdvals(a), np.linalg.svd(a, compute_uv=False), dtype)
    h = hpd((3, 3), dtype)
    assert_close(jnp.linalg.cholesky(h), np.linalg.cholesky(h), dtype, scale=3)
    assert_close(jnp.linalg.cholesky(h, upper=True), H(np.linalg.cholesky(h)), dtype, scale=3)
    w, v = jnp.linalg.eigh(h)
    assert_close(w, np.linalg.eigvalsh(h), dtype, scale=3)
    assert_close(jnp.linalg.eigvalsh(h, UPLO="U"), np.linalg.eigvalsh(h, UPLO="U"), dtype,
                 scale=3)
    with pytest.raises(ValueError, match="UPLO"):
        jnp.linalg.eigh(h, UPLO="X")
    g = random_array(RNG, (3, 3), dtype)
    w, v = jnp.linalg.eig(g)
    assert_close(g @ np.asarray(v), np.asarray(v) * np.asarray(w), dtype, scale=3)
    assert_close(np.sort_complex(np.asarray(jnp.linalg.eigvals(g))),
                 np.sort_complex(np.linalg.eigvals(g)), dtype, scale=3)


def test_svd_hermitian():
    h = random_array(RNG, (3, 3))
    h = h + h.T
    u, s, vh = map(np.asarray, jnp.linalg.svd(h, hermitian=True))
    assert_close(s, np.linalg.svd(h, compute_uv=False))
    assert_close((u * s) @ vh, h)


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norm(ord, keepdims):
    x = random_array(RNG, (3, 2, 4))
    for axis in [(1, 2), (2, 0)]:
        assert_close(jnp.linalg.norm(x, ord, axis, keepdims),
                     np.linalg.norm(x, ord, axis, keepdims))
    assert_close(jnp.linalg.matrix_norm(x, ord=ord or "fro", keepdims=keepdims),
                 np.linalg.norm(x, ord or "fro", (-2, -1), keepdims))


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3, 0.5])
@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_vector_norm(ord, dtype):
    x = random_array(RNG, (3, 4), dtype)
    x[0, 1] = 0
    assert_close(jnp.linalg.norm(x, ord, 1), np.linalg.norm(x, ord, 1), dtype)
    assert_close(jnp.linalg.norm(x[0], ord), np.linalg.norm(x[0], ord), dtype)
    assert_close(jnp.linalg.vector_norm(x, ord=2 if ord is None else ord, axis=0,
                                        keepdims=True),
                 np.linalg.norm(x, ord, 0, keepdims=True), dtype)


def test_norm_errors_and_default():
    x = random_array(RNG, (2, 3, 4))
    assert_close(jnp.linalg.norm(x), np.linalg.norm(x.ravel()))
    with pytest.raises(ValueError, match="Invalid order"):
        jnp.linalg.norm(x, "fro", axis=1)
    with pytest.raises(ValueError, match="Improper number of axes"):
        jnp.linalg.norm(x, 2, axis=(0, 1, 2))


def test_norm_grads():
    x = random_array(RNG, (3, 4))
    check_grads(lambda x: jnp.linalg.norm(x), (x,), order=2, modes=("fwd", "rev"),
                **GRAD_TOL)
    check_grads(lambda x: jnp.linalg.norm(x, "nuc"), (x,), order=1, modes=("fwd", "rev"),
                **GRAD_TOL)


def test_pinv_lstsq_rank_cond():
    a = random_array(RNG, (5, 3))
    assert_close(jnp.linalg.pinv(a), np.linalg.pinv(a), scale=3)
    check_grads(jnp.linalg.pinv, (a,), order=1, modes=("fwd", "rev"), **GRAD_TOL)
    b = random_array(RNG, (5, 2))
    x, resid, rank, s = jnp.linalg.lstsq(a, b)
    x_np, resid_np, rank_np, s_np = np.linalg.lstsq(a, b, rcond=None)
    assert_close(x, x_np, scale=3)
    assert_close(resid, resid_np, scale=3)
    assert int(rank) == rank_np
    for a_ in (a, np.zeros((0, 3), np.float32)):  # (the rank of an empty matrix: also not weak)
        rank = jnp.linalg.lstsq(a_, np.ones(len(a_), np.float32))[2]
        assert rank.dtype == np.int32 and not rank.weak_type
    assert_close(jnp.linalg.lstsq(a, b[:, 0])[0], x_np[:, 0], scale=3)
    low_rank = random_array(RNG, (4, 2)) @ random_array(RNG, (2, 4))
    assert int(jnp.linalg.matrix_rank(low_rank)) == 2 == np.linalg.matrix_rank(low_rank)
    sq = well_conditioned((3, 3))
    for p in [None, 1, -1, 2, -2, np.inf, "fro"]:
        assert_close(jnp.linalg.cond(sq, p), np.linalg.cond(sq, p), scale=10)


def test_matrix_power_multi_dot_and_array_api_names():
    a = well_conditioned((2, 3, 3)) / 3
    for n in [0, 1, 2, 3, 5, -1, -3]:
        assert_close(jnp.linalg.matrix_power(a, n), np.linalg.matrix_power(a, n), scale=10)
    with pytest.raises(TypeError, match="exponent must be an integer"):
        jnp.linalg.matrix_power(a, 1.5)
    chain = [random_array(RNG, (4,)), random_array(RNG, (4, 10)), random_array(RNG, (10, 2)),
             random_array(RNG, (2, 5)), random_array(RNG, (5,))]
    assert_close(jnp.linalg.multi_dot(chain), np.linalg.multi_dot(chain), scale=10)
    assert_close(jnp.linalg.multi_dot(chain[1:4]), np.linalg.multi_dot(chain[1:4]), scale=10)
    x = random_array(RNG, (2, 3, 4))
    np.testing.assert_array_equal(jnp.linalg.matrix_transpose(x), np.swapaxes(x, -1, -2))
    assert_close(jnp.linalg.diagonal(x, offset=1), np.diagonal(x, 1, -2, -1))
    assert_close(jnp.linalg.trace(x), np.trace(x, axis1=-2, axis2=-1))
    assert_close(jnp.linalg.outer(x[0, 0], x[0, 1]), np.outer(x[0, 0], x[0, 1]))
    assert_close(jnp.linalg.cross(x[..., :3], x[..., 1:]), np.cross(x[..., :3], x[..., 1:]))
    assert_close(jnp.linalg.vecdot(x, x), np.sum(x * x, -1))
    t = random_array(RNG, (2, 3, 6))
    assert_close(jnp.linalg.tensorinv(t, ind=2), np.linalg.tensorinv(t, ind=2), scale=100)
    rhs = random_array(RNG, (2, 3))
    assert_close(jnp.linalg.tensorsolve(t, rhs), np.linalg.tensorsolve(t, rhs), scale=100)
    with pytest.raises(ValueError, match="one-dimensional"):
        jnp.linalg.outer(x, x)


@pytest.mark.parametrize("f", [
    la.cholesky, lambda a: la.lu(a)[0], lambda a: la.qr(a)[1],
    lambda a: la.svd(a, compute_uv=False), lambda a: la.eigh(a)[1],
    lambda a: la.triangular_solve(a, a, left_side=True, lower=True)],
    ids=["cholesky", "lu", "qr", "svd", "eigh", "triangular_solve"])
def test_grad_jaxprs_type_check(f):
    a = hpd((3, 3))
    g = nbjax.grad(lambda a: jnp.sum(f(a)))
    np.testing.assert_allclose(staged(g, a), g(a), rtol=1e-5, atol=1e-5)


def test_non_contiguous_inputs():
    base = random_array(RNG, (4, 8))
    a = base[:, ::2]  # strided view
    lu, _, perm = map(np.asarray, la.lu(a))
    l, u = np.tril(lu, -1) + np.eye(4), np.triu(lu)
    assert_close(l @ u, a[perm])
    t = hpd((3, 3)).T  # transposed view
    assert_close(jnp.linalg.solve(t, base[:3, ::3]), np.linalg.solve(t, base[:3, ::3]))
    assert_close(la.triangular_solve(t, base[:3, 1::3], left_side=True, lower=True),
                 np.linalg.solve(np.tril(t), base[:3, 1::3]))


def test_subset_by_index_names_every_value_or_is_refused_as_on_jaxs_cpu():
    a = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]], np.float32)
    v, w = nbjax.lax.linalg.eigh(a, subset_by_index=(0, 3))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-5)
    u, s, vh = jnp.linalg.svd(a, subset_by_index=(0, 3))
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="subset_by_index not supported"):
        nbjax.lax.linalg.eigh(a, subset_by_index=(1, 3))
    with pytest.raises(ValueError, match="full_matrices and subset_by_index"):
        jnp.linalg.svd(a, subset_by_index=(0, 2))
    with pytest.raises(NotImplementedError, match="subset_by_index not implemented"):
        nbjax.lax.linalg.svd(a, full_matrices=False, subset_by_index=(0, 2))

"""nbjax.numpy where it used to differ from JAX 0.10.2: derivatives of ``sinc`` at 0, complex
``logaddexp``, the dtype rules of ``mean``/``var``/``sum``/``cumsum``/``polyder``,
``matrix_rank``'s tolerance, ``slogdet(method="qr")``, ``ravel_multi_index(order="F")``,
``pad`` with a function, array creation from ranges, strings and 0-d shapes, and
``wrap_negative_indices``. Checked against NumPy where it agrees with JAX; where it does not,
the test states JAX's rule."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

RNG = np.random.default_rng(7)


def close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=atol)


# --- sinc: derivatives of every order at 0 -------------------------------------------------

def _derivative(f, n):
    for _ in range(n):
        f = nbjax.grad(f)
    return f


def _finite_difference(n, x, h):
    """The ``n``-th derivative of NumPy's sinc at ``x`` (float64, central differences)."""
    stencil = {1: [-0.5, 0, 0.5], 2: [1, -2, 1], 3: [-0.5, 1, 0, -1, 0.5],
               4: [1, -4, 6, -4, 1]}[n]
    offsets = np.arange(len(stencil)) - len(stencil) // 2
    return np.dot(stencil, np.sinc(x + offsets * h)) / h ** n


def test_sinc_derivatives_match_finite_differences():
    for order in (1, 2, 3, 4):
        for x in (0.0, 0.3):
            expected = _finite_difference(order, x, 0.02)  # (-pi^2/3: the second at 0)
            close(_derivative(jnp.sinc, order)(np.float32(x)), expected, rtol=2e-3,
                  atol=2e-3 * max(1.0, abs(expected)))


def test_sinc_second_derivative_at_zero_under_transformations():
    expected = -np.pi ** 2 / 3
    close(nbjax.hessian(jnp.sinc)(0.0), expected)
    close(nbjax.jacfwd(nbjax.jacfwd(jnp.sinc))(0.0), expected)
    close(nbjax.jit(_derivative(jnp.sinc, 2))(0.0), expected)
    close(nbjax.vmap(_derivative(jnp.sinc, 2))(np.float32([0.0, 0.0])), [expected] * 2)
    close(jnp.sinc(np.float32([0.0, 0.5, 1.0])), np.sinc([0.0, 0.5, 1.0]), atol=1e-7)


# --- logaddexp of complex numbers ----------------------------------------------------------

X = np.complex64([1 + 1j, -2j, 3 + 4j, -1 - 5j, 2j])
Y = np.complex64([0, 1 - 3j, -2 + 6j, 1j, -2j])


def _wrapped_near(actual, expected, half_period):
    """Equal, the imaginary parts modulo the period (JAX wraps them into
    ``[-half_period, half_period]``, NumPy's principal logarithm into ``(-h, h]``)."""
    actual = np.asarray(actual)
    assert np.all(np.abs(actual.imag) <= half_period + 1e-5)
    close(actual.real, expected.real, rtol=1e-5, atol=1e-5)
    gap = (actual.imag - expected.imag + half_period) % (2 * half_period) - half_period
    close(gap, 0 * gap, atol=1e-5)


def test_logaddexp_of_complex_numbers():
    x, y = X.astype(np.complex128), Y.astype(np.complex128)
    out = jnp.logaddexp(X, Y)
    assert out.dtype == np.complex64
    _wrapped_near(out, np.log(np.exp(x) + np.exp(y)), np.pi)
    _wrapped_near(jnp.logaddexp2(X, Y), np.log2(np.exp2(x) + np.exp2(y)), np.pi / np.log(2))
    _wrapped_near(jnp.logaddexp(X, 0), np.log(np.exp(x) + 1), np.pi)


def test_logaddexp_of_complex_numbers_differentiates_as_softmax_weights():
    _, tangent = nbjax.jvp(jnp.logaddexp, (X, Y), (np.ones_like(X), np.zeros_like(Y)))
    x, y = X.astype(np.complex128), Y.astype(np.complex128)
    close(tangent, np.exp(x) / (np.exp(x) + np.exp(y)), rtol=1e-4, atol=1e-5)


# --- reductions: dtype rules ---------------------------------------------------------------

def test_mean_with_an_integer_dtype_casts_the_elements_first():
    x = np.float32([[1.5, 2.5, 2.7], [-1.6, 4.0, 0.2]])
    for axis in (None, 0, 1):
        out = jnp.mean(x, axis, dtype=np.int32)
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, np.mean(x, axis, dtype=np.int32))
    # The sum is taken in the dtype too: int8 wraps (300 -> 44, 44 // 3 == 14), as NumPy's.
    assert int(jnp.mean(np.int8([100, 100, 100]), dtype=np.int8)) == 14


def test_var_and_std_without_degrees_of_freedom_are_nan():
    # JAX's rule (NumPy gives inf): ddof >= N leaves no degrees of freedom, the result is NaN.
    x = np.float32([1.5, 2.5, 2.7])
    for value in (jnp.var(x, ddof=3), jnp.std(x, ddof=5), jnp.nanvar(x, ddof=4),
                  jnp.nanstd(np.float32([1, np.nan, 3]), ddof=2),
                  jnp.var(np.complex64([1, 1j]), ddof=2)):
        assert np.isnan(value) and value.dtype == np.float32
    m = np.float32([[1, 2, 4], [3, 5, 9]])
    where = np.array([[True, False, True], [False, False, True]])
    close(jnp.var(m, axis=1, ddof=1, where=where), [4.5, np.nan])
    close(jnp.var(x, ddof=2), np.var(x.astype(np.float64), ddof=2))


def test_var_with_an_integer_dtype_computes_in_it():
    # JAX's rule: the elements and the mean are integers ([1, 2, 2], mean 1), so the
    # variance 2 // 3 == 0; the NaN guard then promotes it to a weakly typed float.
    out = jnp.var(np.float32([1.5, 2.5, 2.7]), dtype=np.int32)
    assert out.dtype == np.float32 and out.weak_type and float(out) == 0.0


@pytest.mark.parametrize("x", [np.array([True, False, True]), np.array([0, 2, -2]),
                               np.float32([0.0, 0.5, 0.0]), np.array([False, False])])
def test_sums_and_products_into_bool(x):
    for fn in (jnp.sum, jnp.prod, jnp.cumsum, jnp.cumprod, jnp.nansum):
        out = fn(x, dtype=bool)
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out, getattr(np, fn.__name__)(x, dtype=bool))
    np.testing.assert_array_equal(jnp.sum(np.array([[True, False], [False, False]]), axis=0,
                                          dtype=bool), [True, False])
    assert bool(jnp.sum(np.array([False]), dtype=bool, initial=True))
    np.testing.assert_array_equal(
        jnp.cumulative_prod(np.array([True, False]), dtype=bool, include_initial=True),
        [True, True, False])


# --- polynomials ---------------------------------------------------------------------------

@pytest.mark.parametrize("p", [np.array([1, 2, 3, 4]), np.array([True, False, True]),
                               np.int8([3, 1])])
@pytest.mark.parametrize("m", [0, 1, 2])
def test_polyder_is_inexact(p, m):
    # JAX's rule (NumPy keeps the integer type): the derivative is float, even for m=0.
    out = jnp.polyder(p, m)
    assert out.dtype == np.float32
    close(out, np.polyder(p.astype(np.float64), m))


def test_polyadd_refuses_booleans():
    # JAX's rule (NumPy ors them): boolean coefficients cannot be added.
    with pytest.raises(TypeError):
        jnp.polyadd(np.array([True]), np.array([True, False]))
    np.testing.assert_array_equal(jnp.polyadd(np.array([True]), np.array([1, 2])), [1, 3])


# --- linear algebra ------------------------------------------------------------------------

def test_matrix_rank_compares_singular_values_with_the_tolerance_itself():
    # JAX 0.10's rule (NumPy scales rtol by the largest singular value): count S > rtol.
    a = RNG.standard_normal((3, 5, 5)).astype(np.float32)
    s = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    for tol in (0.5, 1.0, 2.0):
        np.testing.assert_array_equal(jnp.linalg.matrix_rank(a, rtol=tol), (s > tol).sum(-1))
        np.testing.assert_array_equal(jnp.linalg.matrix_rank(a, tol=tol), (s > tol).sum(-1))
    per_matrix = np.float32([0.5, 1.0, 2.0])
    np.testing.assert_array_equal(jnp.linalg.matrix_rank(a, rtol=per_matrix),
                                  (s > per_matrix[:, None]).sum(-1))


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 4), (3, 5, 5)])
def test_slogdet_by_qr(shape):
    a = RNG.standard_normal(shape).astype(np.float32)
    sign, logabsdet = jnp.linalg.slogdet(a, method="qr")
    expected_sign, expected_log = np.linalg.slogdet(a.astype(np.float64))
    np.testing.assert_array_equal(sign, expected_sign)
    close(logabsdet, expected_log, rtol=1e-4, atol=1e-4)
    if len(shape) == 2:
        grad = nbjax.grad(lambda m: jnp.linalg.slogdet(m, method="qr")[1])(a)
        close(grad, np.linalg.inv(a.astype(np.float64)).T, rtol=1e-3, atol=1e-4)


def test_slogdet_by_qr_of_a_permutation_and_its_errors():
    flip = np.eye(3, dtype=np.float32)[::-1].copy()  # one swap: determinant -1
    sign, logabsdet = jnp.linalg.slogdet(flip, method="qr")
    assert float(sign) == -1.0 and abs(float(logabsdet)) < 1e-6
    with pytest.raises(NotImplementedError):  # as in JAX
        jnp.linalg.slogdet(np.complex64([[1, 2], [3, 4j]]), method="qr")
    with pytest.raises(ValueError, match="Unknown slogdet method"):
        jnp.linalg.slogdet(flip, method="cholesky")


# --- indexing and padding ------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_ravel_multi_index_in_fortran_order(mode):
    coords = (np.array([0, 2, 1]), np.array([1, 3, 0]), np.array([4, 1, 2]))
    if mode != "raise":
        coords = (np.array([5, -2, 1]),) + coords[1:]
    for order in ("C", "F"):
        np.testing.assert_array_equal(
            jnp.ravel_multi_index(coords, (3, 4, 5), mode=mode, order=order),
            np.ravel_multi_index(coords, (3, 4, 5), mode=mode, order=order))
    with pytest.raises(ValueError, match="invalid order"):
        jnp.ravel_multi_index(coords, (3, 4, 5), mode=mode, order="K")


def _pad_with(vector, pad_width, iaxis, kwargs):
    """NumPy's example of a padding function, written to return the vector (JAX's form)."""
    value = kwargs.get("padder", 10) * (iaxis + 1)
    vector = vector.at[:pad_width[0]].set(value)
    return vector.at[vector.shape[0] - pad_width[1]:].set(value)


def _pad_with_in_place(vector, pad_width, iaxis, kwargs):
    """The same, as NumPy's protocol has it: filling ``vector`` in place."""
    value = kwargs.get("padder", 10) * (iaxis + 1)
    vector[:pad_width[0]] = value
    vector[vector.shape[0] - pad_width[1]:] = value


@pytest.mark.parametrize("widths, kwargs", [(((1, 2), (2, 1)), {}), (1, {"padder": -1}),
                                            ((0, 3), {})])
def test_pad_with_a_function(widths, kwargs):
    x = np.arange(6).reshape(2, 3)
    expected = np.pad(x, widths, _pad_with_in_place, **kwargs)
    np.testing.assert_array_equal(jnp.pad(x, widths, _pad_with, **kwargs), expected)
    np.testing.assert_array_equal(
        nbjax.jit(lambda v: jnp.pad(v, widths, _pad_with, **kwargs))(x), expected)


def test_wrap_negative_indices_false_makes_negative_indices_out_of_bounds():
    # JAX's rule: a negative index then addresses nothing, and the mode decides: updates
    # drop it (or clip it to 0), reads clamp it to 0 (or fill).
    x = jnp.arange(5)
    no_wrap = {"wrap_negative_indices": False}
    np.testing.assert_array_equal(x.at[-1].set(9, **no_wrap), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(x.at[-1].set(9), [0, 1, 2, 3, 9])
    np.testing.assert_array_equal(x.at[np.array([-1, 1])].add(9, **no_wrap), [0, 10, 2, 3, 4])
    np.testing.assert_array_equal(x.at[-1].set(9, mode="clip", **no_wrap), [9, 1, 2, 3, 4])
    np.testing.assert_array_equal(x.at[-2:].set(9, **no_wrap), [0, 1, 2, 9, 9])  # slices wrap
    for method in ("multiply", "min", "max", "power"):
        np.testing.assert_array_equal(getattr(x.at[-1], method)(7, **no_wrap), x)
    np.testing.assert_array_equal(x.at[-1].apply(lambda v: v * 7, **no_wrap), x)
    assert int(x.at[-1].get(**no_wrap)) == 0
    assert int(x.at[-1].get(mode="fill", fill_value=7, **no_wrap)) == 7
    np.testing.assert_array_equal(x.at[np.array([-1, 2])].get(mode="fill", fill_value=-5,
                                                              **no_wrap), [-5, 2])
    assert int(nbjax.jit(lambda i: x.at[i].get(mode="fill", fill_value=-5, **no_wrap))(-1)) == -5
    np.testing.assert_array_equal(nbjax.jit(lambda i: x.at[i].set(9, **no_wrap))(-1), x)


# --- creation ------------------------------------------------------------------------------

def test_array_from_a_range():
    for r in (range(3), range(2, 11, 3), range(0)):
        out = jnp.array(r)
        expected = np.array(r)
        assert out.dtype == (np.int32 if len(r) else np.float32)  # (range(0): NumPy's float)
        np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(jnp.asarray([range(2), range(2)]), [[0, 1], [0, 1]])
    assert jnp.array(range(3), dtype=float).dtype == np.float32


def test_array_of_none_is_a_value_error():
    for value in (None, [None], [1, None]):
        with pytest.raises(ValueError, match="None is not a valid value"):
            jnp.array(value)


@pytest.mark.parametrize("shape", [jnp.array(2), np.array(2)])
def test_a_zero_dimensional_integer_array_is_a_shape(shape):
    for make in (jnp.zeros, jnp.ones, jnp.empty, lambda s: jnp.full(s, 5.0)):
        assert make(shape).shape == (2,)
    assert jnp.zeros_like(np.ones(3), shape=shape).shape == (2,)
    with pytest.raises(TypeError):
        jnp.zeros(jnp.array(2.0))


@pytest.mark.parametrize("scalar_type, text", [
    (jnp.float32, "1.5"), (jnp.float16, "1e3"), (jnp.int32, "7"), (jnp.uint8, "7"),
    (jnp.bool_, "False"), (jnp.bool_, ""), (jnp.complex64, "1+2j"), (jnp.float32, b"2.5"),
    (jnp.float32, "inf")])
def test_scalar_types_parse_text_as_numpys(scalar_type, text):
    out = scalar_type(text)
    expected = np.asarray(text, scalar_type.dtype)
    assert out.dtype == expected.dtype and not out.weak_type
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(jnp.float32(["1.5", "2"]), [1.5, 2.0])
    with pytest.raises(ValueError):
        jnp.int32("1.5")


def test_arange_wraps_around_narrow_integer_types():
    # JAX's rule (NumPy raises OverflowError): start + step * iota computed in the dtype.
    for args, dtype in [((-3, 3), np.uint8), ((250, 260, 3), np.uint8), ((120, 130), np.int8),
                        ((3, -3, -1), np.uint8), ((-2, 2), np.uint32)]:
        out = jnp.arange(*args, dtype=dtype)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, np.arange(*args).astype(dtype))


def test_reshape_errors_are_numpys_for_numpy_arrays():
    # JAX hands a NumPy array to its own reshape method: NumPy's ValueError; its own
    # arrays raise TypeError.
    for shape in ((-1, -1), (3, -1), (3, 2)):
        with pytest.raises(ValueError):
            jnp.reshape(np.ones(4), shape)
        with pytest.raises(TypeError):
            jnp.reshape(jnp.ones(4), shape)

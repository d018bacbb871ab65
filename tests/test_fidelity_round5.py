"""Fidelity to JAX 0.10.2, round five: histograms (``bins`` checked as Python's ``int()``,
``range`` shown as an array, ``histogram2d`` with one list of edges for both axes, the weight
checks of ``histogramdd`` and ``bincount``); set operations (``setxor1d`` keeps a NaN found in
one array, ``assume_unique`` skips the deduplication as in NumPy, ``size`` padding with the
smallest result or 0 and index padding past the ends, weak types, ``isin``'s ``method``, the
``unique_*`` names in errors); polynomials (``polyval`` of columns of coefficients and never
weak, ``polyint`` promoting with ``k``, ``polyfit``'s ``deg`` and ``rcond``, NaN kept by
``polydiv``'s trimming); ``interp`` of mixed dtypes and complex ``left``; ``sort``'s ``kind``
and ``order``; ``lexsort`` of scalars; a convolution's ``preferred_element_type`` rules;
``einsum``'s subscript errors and boolean sums; a real ``preferred_element_type`` for a
product of complex operands (the complex product's real part)."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

from helpers import assert_close

NAN = float("nan")


# --- histograms -------------------------------------------------------------------------------

def test_histogram_bins_must_be_an_int():
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        jnp.histogram(jnp.ones(3), bins=3.0)


def test_histogram_range_is_shown_as_an_array():
    with pytest.raises(ValueError, match=r"sequence of scalars, got \[0\. 2\. 3\.\]"):
        jnp.histogram_bin_edges(jnp.ones(3), range=[0, 2, 3])


def test_histogram2d_one_list_of_edges_for_both_axes():
    x, y = np.array([0.5, 1.5, 2.5, 0.2]), np.array([1.0, 0.1, 2.9, 1.2])
    edges = [0.0, 1.0, 2.0, 3.0]
    hist, xe, ye = jnp.histogram2d(x, y, bins=edges)
    expected, _, _ = np.histogram2d(x, y, bins=[edges, edges])
    assert_close(hist, expected)
    assert_close(xe, edges)
    assert_close(ye, edges)


def test_histogramdd_wants_one_weight_per_sample():
    with pytest.raises(ValueError, match="^should have one weight for each sample.$"):
        jnp.histogramdd(jnp.ones((4, 2)), weights=jnp.ones(3))


def test_bincount_weights_message():
    with pytest.raises(ValueError, match=r"^type of weights must match type of x. Got "
                                         r"typeof\(x\)=i32\[2\] and typeof\(weights\)=f32\[\]$"):
        jnp.bincount(np.array([0, 1], np.int32), weights=2.0)


# --- set operations ---------------------------------------------------------------------------

def test_unique_ignores_fill_value_without_size():
    """So a Python scalar's weak type survives, as in JAX."""
    out = jnp.unique(3, fill_value=7)
    assert out.weak_type and out.tolist() == [3]


@pytest.mark.parametrize("name", ["unique_values", "unique_counts", "unique_inverse",
                                  "unique_all"])
def test_unique_api_errors_name_the_function(name):
    with pytest.raises(TypeError, match=f"^{name} requires ndarray"):
        getattr(jnp, name)([1, 2])


def test_setdiff1d_assume_unique_keeps_the_order():
    a, b = np.array([3, 1, 2, 5]), np.array([1])
    expected = np.setdiff1d(a, b, assume_unique=True)
    assert jnp.setdiff1d(a, b, assume_unique=True).tolist() == expected.tolist() == [3, 2, 5]
    out = jnp.setdiff1d(a, b, assume_unique=True, size=5, fill_value=-1)
    assert out.tolist() == [3, 2, 5, -1, -1]


def test_setdiff1d_keeps_a_weak_type():
    assert jnp.setdiff1d(3, np.array([1])).weak_type
    assert jnp.setdiff1d(3, np.array([1]), size=2).weak_type


def test_setxor1d_keeps_a_nan_of_one_array():
    a, b = np.array([0.0, 1.0, NAN], np.float32), np.array([1.0, 2.0], np.float32)
    assert_close(jnp.setxor1d(a, b), np.setxor1d(a, b))  # [0, 2, nan]
    # With size, the padding is the smallest result, which max then min make NaN.
    assert_close(jnp.setxor1d(a, b, size=5), [0, 2, NAN, NAN, NAN])
    assert_close(jnp.setxor1d(a, b, size=5, fill_value=-1), [0, 2, NAN, -1, -1])


def test_setxor1d_assume_unique_as_numpy():
    a, b = np.array([1, 1, 4]), np.array([4, 5])
    assert jnp.setxor1d(a, b, assume_unique=True).tolist() == \
        np.setxor1d(a, b, assume_unique=True).tolist()


def test_intersect1d_padding():
    a, b = np.array([5, 1, 3, 1]), np.array([3, 7, 5])
    values, i1, i2 = jnp.intersect1d(a, b, return_indices=True, size=4)
    assert values.tolist() == [3, 5, 3, 3]
    assert i1.tolist() == [2, 0, 4, 4]  # padded with len(a)
    assert i2.tolist() == [0, 2, 3, 3]  # and len(b), past the ends
    assert jnp.intersect1d(a, np.array([9]), size=2).tolist() == [0, 0]  # nothing: 0


def test_intersect1d_with_an_empty_array():
    values, i1, i2 = jnp.intersect1d(np.array([1, 2]), np.zeros(0, np.int32),
                                     return_indices=True)
    assert values.shape == i1.shape == i2.shape == (0,)
    _, i1, i2 = jnp.intersect1d(np.array([1, 2]), np.zeros(0, np.int32), return_indices=True,
                                size=2)
    assert i1.tolist() == [2, 2] and i2.tolist() == [0, 0]


def test_intersect1d_assume_unique_as_numpy():
    a, b = np.array([4, 1, 3]), np.array([3, 4, 9])
    expected = np.intersect1d(a, b, assume_unique=True, return_indices=True)
    for out, ref in zip(jnp.intersect1d(a, b, assume_unique=True, return_indices=True),
                        expected):
        assert out.tolist() == ref.tolist()


def test_set_operations_under_jit_with_size():
    f = nbjax.jit(lambda a, b: jnp.intersect1d(a, b, size=3, return_indices=True))
    values, i1, i2 = f(jnp.array([4, 1, 3]), jnp.array([3, 4, 9]))
    assert values.tolist() == [3, 4, 3] and i1.tolist() == [2, 0, 3]
    assert i2.tolist() == [0, 1, 3]


def test_isin_checks_method():
    with pytest.raises(ValueError, match="method='bad' is not implemented"):
        jnp.isin(jnp.ones(2), jnp.ones(2), method="bad")
    assert jnp.isin(np.array([1, 2]), np.array([2]), method="sort").tolist() == [False, True]


# --- polynomials ------------------------------------------------------------------------------

def test_polyval_of_columns_of_coefficients():
    p = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]], np.float32)
    x = np.array([2.0, -1.0], np.float32)
    assert_close(jnp.polyval(p, x), np.polyval(p, x), rtol=1e-6)


def test_polyval_is_never_weak():
    out = jnp.polyval(np.array([1, 2], np.int32), 1.5)
    assert out.dtype == np.float32 and not out.weak_type and float(out) == 3.5


def test_polyint_promotes_with_k():
    out = jnp.polyint(np.array([3.0, 2.0], np.float32), k=1j)
    assert out.dtype == np.complex64
    assert_close(out, [1.5, 2, 1j])
    assert_close(jnp.polyint(np.array([6.0]), m=2, k=np.array([1.0, 2.0])),
                 np.polyint(np.array([6.0]), m=2, k=[1.0, 2.0]))


def test_polyint_k_errors():
    with pytest.raises(ValueError, match="k must be a scalar or a rank-1 array of length 1 or m"):
        jnp.polyint(jnp.ones(2), m=2, k=jnp.ones(3))
    with pytest.raises(TypeError, match="at position 1"):
        jnp.polyint(jnp.ones(2), m=2, k=[1, 2])


def test_polyfit_degree_and_rcond():
    x = np.linspace(-1, 1, 7).astype(np.float32)
    y = x ** 2 - 0.5 * x
    assert_close(jnp.polyfit(x, y, 2.0), [1, -0.5, 0], rtol=1e-4, scale=1)  # deg: int()
    rcond = jnp.polyfit(x, y, 2, full=True)[4]
    assert rcond.weak_type and rcond.dtype == np.float32


def test_polydiv_trimming_keeps_a_nan():
    _, remainder = jnp.polydiv(np.array([1.0, NAN]), np.array([1.0]), trim_leading_zeros=True)
    assert remainder.shape == (1,) and np.isnan(remainder[0])


# --- interp, sorting, convolution -------------------------------------------------------------

def test_interp_of_float16_values_at_float32_points():
    out = jnp.interp(np.float32(0.5), np.array([0.0, 1.0], np.float32),
                     np.array([1.0, 2.0], np.float16))
    assert out.dtype == np.float32 and float(out) == 1.5


def test_interp_complex_left_makes_a_complex_result():
    out = jnp.interp(np.array([-1.0, 0.5]), np.array([0.0, 1.0]), np.array([1.0, 3.0]),
                     left=1j)
    assert out.dtype == np.complex64
    assert_close(out, [1j, 2])


def test_interp_string_left_message():
    with pytest.raises(ValueError, match="is 'extrapolate', but got: 'bad'$"):
        jnp.interp(0.5, jnp.ones(2), jnp.ones(2), left="bad")


@pytest.mark.parametrize("fn", ["sort", "argsort"])
def test_sort_refuses_kind_and_order(fn):
    with pytest.raises(TypeError, match=f"'kind' argument to {fn} is not supported. Use "
                                        "stable=True or stable=False"):
        getattr(jnp, fn)(jnp.ones(3), kind="quicksort")
    with pytest.raises(TypeError, match=f"'order' argument to {fn} is not supported."):
        getattr(jnp, fn)(jnp.ones(3), order="x")


def test_lexsort_of_scalars():
    out = jnp.lexsort([np.float32(1.0)])
    assert out.shape == () and int(out) == 0


@pytest.mark.parametrize("a, preferred, message", [
    (np.ones(2, np.complex64), np.float32, "Input type is incompatible"),
    (np.ones(2, np.float32), np.int32, "Input type is incompatible"),
    (np.ones(2, np.float32), np.float16, "must not be narrower"),
    (np.ones(2, np.int32), np.uint32, "must have the same signedness"),
])
def test_convolve_preferred_element_type_rules(a, preferred, message):
    with pytest.raises(TypeError, match=message):
        jnp.convolve(a, a, preferred_element_type=preferred)


def test_convolve_integers_into_floats():
    out = jnp.convolve(np.array([1, 2], np.int32), np.array([1, 1], np.int32),
                       preferred_element_type=np.float32)
    assert out.dtype == np.float32 and out.tolist() == [1, 3, 2]


# --- einsum -----------------------------------------------------------------------------------

A, B = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)


@pytest.mark.parametrize("subscripts, operands, message", [
    ("ij,jk->ikk", (A, B), "Output character 'k' appeared more than once in the output."),
    ("ij,jk->iq", (A, B), "Output character 'q' did not appear in the input"),
    ("ij,jk->ik", (A,), "Number of einsum subscripts, 2, must be equal to the number of "
                        "operands, 1."),
    ("i,i", (np.ones(2), np.ones(3)), r"Size of label 'i' for operand 1 \(2\) does not match "
                                      r"previous terms \(3\)."),
    ("ij", (np.ones(2),), "Einstein sum subscript 'ij' does not contain the correct number of "
                          "indices for operand 0."),
])
def test_einsum_subscript_errors(subscripts, operands, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        jnp.einsum(subscripts, *operands)


def test_einsum_sums_booleans_with_or():
    x = np.array([[True, False, False], [True, False, True]])
    out = jnp.einsum("ij->j", x)
    assert out.dtype == np.bool_ and out.tolist() == [True, False, True]


# --- products -------------------------------------------------------------------------------

@pytest.mark.parametrize("jit", [False, True])
def test_a_real_result_of_complex_operands_is_the_products_real_part(jit):
    # XLA multiplies in complex and keeps the real part: the imaginary parts' product
    # (i * i = -1) counts. Dropping them first would give 1 + 4 = 5.
    z = np.array([1 + 1j, 2], np.complex64)
    f = lambda a, b: jnp.dot(a, b, preferred_element_type=np.float32)
    f = nbjax.jit(f) if jit else f
    out = f(z, z)
    assert out.dtype == np.float32 and float(out) == 4.0
    assert float(f(z, np.array([3, 4], np.complex64))) == 11.0

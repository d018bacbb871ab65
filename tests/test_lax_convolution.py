"""lax.conv_general_dilated (and conv, conv_with_general_padding) against a nested-loop
reference written from XLA's definition of convolution."""

import itertools

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.lax import convolution
from helpers import assert_close, eager_and_traced, random_array

RNG = np.random.default_rng(3)


def naive_conv(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation,
               feature_group_count=1, batch_group_count=1):
    """NCHW x OIHW -> NCHW, one output element at a time (computed in float64/int64)."""
    wide = np.complex128 if np.iscomplexobj(lhs) else (
        np.float64 if np.issubdtype(lhs.dtype, np.floating) else np.int64)
    lhs, rhs = lhs.astype(wide), rhs.astype(wide)
    n_batch, n_in = lhs.shape[:2]
    n_out, n_kernel_in = rhs.shape[:2]
    spatial, kernel = lhs.shape[2:], rhs.shape[2:]

    def out_size(size, k, s, lo, hi, ld, rd):
        padded = ((size - 1) * ld + 1 if size else 0) + lo + hi
        return max((padded - ((k - 1) * rd + 1)) // s + 1, 0)
    out_spatial = [out_size(*a) for a in zip(spatial, kernel, strides, *zip(*padding),
                                              lhs_dilation, rhs_dilation)]
    groups = max(feature_group_count, batch_group_count)
    out = np.zeros((n_batch // batch_group_count, n_out, *out_spatial), wide)

    def lhs_value(n, c, position):
        """The dilated, padded input at ``position``: zero between and outside elements."""
        index = []
        for p, (lo, _), ld, size in zip(position, padding, lhs_dilation, spatial):
            q, r = divmod(p - lo, ld)
            if r or not 0 <= q < size:
                return 0
            index.append(q)
        return lhs[(n, c, *index)]

    for n, o, *y in itertools.product(range(out.shape[0]), range(n_out),
                                      *map(range, out_spatial)):
        group = o // (n_out // groups)
        n_src = group * out.shape[0] + n if batch_group_count > 1 else n
        c_first = group * n_kernel_in if feature_group_count > 1 else 0
        for c, *k in itertools.product(range(n_kernel_in), *map(range, kernel)):
            position = [yi * s + ki * rd for yi, s, ki, rd in zip(y, strides, k, rhs_dilation)]
            out[(n, o, *y)] += lhs_value(n_src, c_first + c, position) * rhs[(o, c, *k)]
    return out


def check(lhs, rhs, strides, padding, lhs_dilation=None, rhs_dilation=None, **kwargs):
    n = lhs.ndim - 2
    out = eager_and_traced(
        lambda a, b: lax.conv_general_dilated(a, b, strides, padding, lhs_dilation,
                                              rhs_dilation, **kwargs), lhs, rhs)
    expected = naive_conv(lhs, rhs, strides, padding, lhs_dilation or (1,) * n,
                          rhs_dilation or (1,) * n, kwargs.get("feature_group_count", 1),
                          kwargs.get("batch_group_count", 1))
    assert out.dtype == lhs.dtype and out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strides", [(1, 1), (2, 1), (2, 3)])
@pytest.mark.parametrize("padding", [((0, 0), (0, 0)), ((1, 2), (2, 0)), ((-1, 1), (0, -1))])
def test_conv_strides_and_padding(strides, padding):
    check(random_array(RNG, (2, 3, 6, 5)), random_array(RNG, (4, 3, 3, 2)), strides, padding)


@pytest.mark.parametrize("lhs_dilation,rhs_dilation", [((2, 1), (1, 1)), ((1, 1), (2, 3)),
                                                       ((3, 2), (2, 1))])
def test_conv_dilations(lhs_dilation, rhs_dilation):
    check(random_array(RNG, (1, 2, 4, 5)), random_array(RNG, (3, 2, 2, 2)), (1, 2),
          ((1, 1), (0, 2)), lhs_dilation, rhs_dilation)


@pytest.mark.parametrize("groups", [2, 3])
def test_conv_feature_group_count(groups):
    check(random_array(RNG, (2, 2 * groups, 5, 4)), random_array(RNG, (2 * groups, 2, 3, 2)),
          (1, 1), ((1, 0), (0, 1)), feature_group_count=groups)


@pytest.mark.parametrize("groups", [2, 3])
def test_conv_batch_group_count(groups):
    check(random_array(RNG, (groups * 2, 3, 5, 4)), random_array(RNG, (groups, 3, 2, 2)), (2, 1),
          ((0, 1), (1, 1)), rhs_dilation=(1, 2), batch_group_count=groups)


def test_conv_1d_and_3d():
    check(random_array(RNG, (2, 3, 7)), random_array(RNG, (4, 3, 3)), (2,), ((1, 1),), (1,), (2,))
    check(random_array(RNG, (1, 2, 3, 4, 3)), random_array(RNG, (2, 2, 2, 2, 2)), (1, 2, 1),
          ((0, 1), (1, 0), (0, 0)))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float16, np.complex64])
def test_conv_dtypes(dtype):
    lhs, rhs = random_array(RNG, (2, 2, 4, 4), dtype), random_array(RNG, (3, 2, 2, 2), dtype)
    out = lax.conv_general_dilated(lhs, rhs, (1, 1), "VALID")
    expected = naive_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1))
    assert out.dtype == np.dtype(dtype)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(np.asarray(out), expected.astype(dtype), rtol=tol, atol=tol)


def test_bool_conv_is_or_of_ands_and_preferred_element_type():
    lhs, rhs = random_array(RNG, (1, 2, 3, 3), np.bool_), random_array(RNG, (2, 2, 2, 2), np.bool_)
    counts = naive_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1))
    np.testing.assert_array_equal(lax.conv(lhs, rhs, (1, 1), "VALID"), counts > 0)
    as_int = lax.conv(lhs, rhs, (1, 1), "VALID", preferred_element_type=np.int32)
    assert as_int.dtype == np.int32
    np.testing.assert_array_equal(as_int, counts)
    big = np.full((1, 1, 2, 2), 100, np.int8)
    wide = lax.conv(big, big, (1, 1), "VALID", preferred_element_type=np.int32)
    np.testing.assert_array_equal(wide, [[[[40000]]]])


def nhwc(x):
    return np.ascontiguousarray(np.moveaxis(x, 1, -1))


def test_nhwc_hwio_layouts_match_nchw():
    lhs, rhs = random_array(RNG, (2, 4, 5, 6)), random_array(RNG, (6, 2, 3, 2))
    expected = naive_conv(lhs, rhs, (2, 1), ((1, 1), (0, 1)), (1, 1), (1, 2),
                          feature_group_count=2)
    hwio = np.transpose(rhs, (2, 3, 1, 0))
    out = eager_and_traced(lambda a, b: lax.conv_general_dilated(
        a, b, (2, 1), ((1, 1), (0, 1)), rhs_dilation=(1, 2),
        dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2), nhwc(lhs), hwio)
    np.testing.assert_allclose(np.asarray(out), nhwc(expected), rtol=1e-4, atol=1e-5)
    # The output layout may differ from the input's.
    out = lax.conv_general_dilated(nhwc(lhs), hwio, (2, 1), ((1, 1), (0, 1)),
                                   rhs_dilation=(1, 2), feature_group_count=2,
                                   dimension_numbers=("NHWC", "HWIO", "NCHW"))
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-5)


def test_conv_dimension_numbers_from_strings():
    dn = lax.conv_dimension_numbers((2, 5, 6, 4), (3, 2, 4, 6), ("NHWC", "HWIO", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    # Spatial axes are ordered as the kernel's string lists them.
    dn = lax.conv_dimension_numbers((2, 5, 6, 4), (3, 2, 4, 6), ("NWHC", "HWIO", "NCHW"))
    assert dn.lhs_spec == (0, 3, 2, 1)
    assert lax.conv_dimension_numbers((1, 1, 1), (1, 1, 1), None) == ((0, 1, 2),) * 3


def test_non_contiguous_inputs():
    lhs = random_array(RNG, (2, 3, 8, 5))[:, :, ::2]
    rhs = random_array(RNG, (2, 3, 2, 4)).transpose(0, 1, 3, 2)
    check(lhs, rhs, (1, 1), ((0, 0), (1, 1)))


@pytest.mark.parametrize("padding", ["SAME", "SAME_LOWER", "VALID", "same"])
def test_string_padding(padding):
    lhs, rhs = random_array(RNG, (1, 2, 7, 6)), random_array(RNG, (3, 2, 3, 2))
    pads = lax.padtype_to_pads((7, 6), (5, 2), (2, 3), padding)  # rhs dilation (2, 1)
    out = lax.conv_general_dilated(lhs, rhs, (2, 3), padding, rhs_dilation=(2, 1))
    np.testing.assert_allclose(
        np.asarray(out), naive_conv(lhs, rhs, (2, 3), pads, (1, 1), (2, 1)), rtol=1e-4,
        atol=1e-5)
    if padding.upper().startswith("SAME"):
        assert out.shape[2:] == (4, 2)  # ceil(size / stride)


def test_padtype_to_pads():
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME_LOWER") == [(1, 1), (1, 0)]
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "VALID") == [(0, 0), (0, 0)]
    assert lax.padtype_to_pads((2,), (5,), (1,), "SAME") == [(2, 2)]
    with pytest.raises(RuntimeError, match="Unrecognized padding type"):
        lax.padtype_to_pads((5,), (3,), (1,), "FULL")


def test_conv_and_conv_with_general_padding():
    lhs, rhs = random_array(RNG, (2, 3, 5, 6)), random_array(RNG, (4, 3, 3, 2))
    np.testing.assert_allclose(
        np.asarray(lax.conv(lhs, rhs, (1, 2), "VALID")),
        naive_conv(lhs, rhs, (1, 2), ((0, 0), (0, 0)), (1, 1), (1, 1)), rtol=1e-4, atol=1e-5)
    out = lax.conv_with_general_padding(lhs, rhs, (1, 1), ((1, 0), (0, 2)), (2, 1), (1, 2))
    np.testing.assert_allclose(
        np.asarray(out), naive_conv(lhs, rhs, (1, 1), ((1, 0), (0, 2)), (2, 1), (1, 2)),
        rtol=1e-4, atol=1e-5)


def test_empty_outputs_and_weak_type():
    empty = lax.conv(random_array(RNG, (0, 2, 5, 5)), random_array(RNG, (3, 2, 3, 3)), (1, 1),
                     "VALID")
    assert empty.shape == (0, 3, 3, 3)
    out = lax.conv(random_array(RNG, (1, 2, 2, 5)), random_array(RNG, (3, 2, 3, 3)), (1, 1),
                   "VALID")
    assert out.shape == (1, 3, 0, 3)
    weak = lax.conv(lax.broadcast(1.0, (1, 1, 3, 3)), lax.broadcast(1.0, (1, 1, 2, 2)),
                    (1, 1), "VALID")
    assert weak.weak_type
    np.testing.assert_array_equal(weak, np.full((1, 1, 2, 2), 4.0))


def test_conv_jaxpr_params():
    lhs, rhs = random_array(RNG, (2, 5, 6, 4)), random_array(RNG, (3, 2, 4, 6))
    closed = nbjax.make_jaxpr(lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))(lhs, rhs)
    eqn, = closed.eqns
    assert eqn.params["padding"] == ((1, 1), (0, 1))
    assert eqn.params["dimension_numbers"] == lax.ConvDimensionNumbers(
        (0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    text = str(closed)
    assert ("dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, "
            "0, 1), out_spec=(0, 3, 1, 2))") in text
    assert "preferred_element_type=None" in text and "window_strides=(1, 1)" in text
    hash(tuple(eqn.params.items()))


def test_conv_errors():
    lhs, rhs = np.ones((2, 4, 5, 5), np.float32), np.ones((6, 2, 3, 3), np.float32)
    conv = lax.conv_general_dilated
    with pytest.raises(ValueError, match="3 does not divide 4"):
        conv(lhs, rhs, (1, 1), "VALID", feature_group_count=3)
    with pytest.raises(ValueError, match=r"4 // 1 != 2"):
        conv(lhs, rhs, (1, 1), "VALID")
    with pytest.raises(ValueError, match="multiple of feature_group_count"):
        conv(lhs, np.ones((5, 2, 3, 3), np.float32), (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(ValueError, match="batch_group_count must divide lhs batch"):
        conv(np.ones((3, 2, 5, 5)), np.ones((6, 2, 3, 3)), (1, 1), "VALID",
             batch_group_count=2)
    with pytest.raises(ValueError, match="At most one of batch_group_count"):
        conv(np.ones((4, 4, 5, 5)), np.ones((4, 2, 3, 3)), (1, 1), "VALID",
             batch_group_count=2, feature_group_count=2)
    with pytest.raises(TypeError, match="lhs and rhs ndim to be equal"):
        conv(lhs, np.ones((6, 4, 3)), (1,), "VALID")
    with pytest.raises(ValueError, match="window and window_strides must have the same"):
        conv(lhs, rhs, (1,), "VALID", feature_group_count=2)
    with pytest.raises(ValueError, match="window_strides must be positive"):
        conv(lhs, rhs, (0, 1), "VALID", feature_group_count=2)
    with pytest.raises(TypeError, match="Wrong number of explicit pads"):
        conv(lhs, rhs, (1, 1), [(1, 1)], feature_group_count=2)
    with pytest.raises(ValueError, match="sequence of \\(low, high\\) pairs"):
        conv(lhs, rhs, (1, 1), [1, 1], feature_group_count=2)
    with pytest.raises(ValueError, match="String padding is not implemented"):
        conv(lhs, rhs, (1, 1), "SAME", lhs_dilation=(2, 1), feature_group_count=2)
    with pytest.raises(TypeError, match="requires arguments to have the same dtypes"):
        conv(lhs, rhs.astype(np.int32), (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(TypeError, match="must not be narrower"):
        conv(lhs.astype(np.int32), rhs.astype(np.int32), (1, 1), "VALID",
             feature_group_count=2, preferred_element_type=np.int8)
    with pytest.raises(TypeError, match="must contain the characters 'N' and 'C'"):
        conv(lhs, rhs, (1, 1), "VALID", dimension_numbers=("NHWX", "OIHW", "NCHW"))
    with pytest.raises(TypeError, match="same set of spatial characters"):
        conv(lhs, rhs, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHX", "NCHW"))


# --- compiled: one im2col packing kernel and one matrix product --------------------------

_COMPILED = [  # lhs NCHW, rhs OIHW, strides, padding, lhs_dilation, rhs_dilation, groups
    ((2, 3, 9, 8), (4, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), {}),
    ((2, 3, 9, 8), (4, 3, 3, 2), (2, 3), ((1, 2), (-1, 0)), (1, 2), (2, 1), {}),
    ((2, 6, 7, 5), (6, 3, 2, 2), (1, 2), ((0, 0), (1, 1)), (1, 1), (1, 1),
     {"feature_group_count": 2}),
    ((4, 3, 7, 5), (6, 3, 2, 2), (1, 1), ((0, 1), (1, 1)), (1, 1), (1, 1),
     {"batch_group_count": 2}),
    ((3, 2, 20), (4, 2, 15), (1,), ((2, 2),), (1,), (1,), {}),        # more windows than outputs
    ((2, 3, 4, 4), (5, 3, 4, 4), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), {}),   # one output
    ((1, 2, 3, 4, 3), (2, 2, 2, 1, 2), (1, 2, 1), ((1, 0), (0, 0), (1, 1)), (1, 1, 2),
     (1, 1, 1), {}),
    ((0, 3, 4, 4), (5, 3, 2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), {}),   # size 0
]


@pytest.mark.cpu_compiler
@pytest.mark.parametrize("case", _COMPILED, ids=lambda c: "x".join(map(str, c[0])))
def test_compiled_conv_is_a_packing_kernel_and_a_product(case):
    lhs_shape, rhs_shape, strides, padding, lhs_dilation, rhs_dilation, groups = case
    lhs = random_array(RNG, lhs_shape, np.float32)
    rhs = random_array(RNG, rhs_shape, np.float32)

    def conv(a, b):
        return lax.conv_general_dilated(a, b, strides, padding, lhs_dilation, rhs_dilation,
                                        **groups)
    compiled = nbjax.jit(conv).lower(lhs, rhs).compile()
    out = compiled(lhs, rhs)
    expected = naive_conv(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation,
                          groups.get("feature_group_count", 1),
                          groups.get("batch_group_count", 1))
    assert out.shape == expected.shape and out.dtype == np.float32
    scale = np.abs(lhs).max(initial=0) * np.abs(rhs).sum(axis=0).max(initial=0)
    assert_close(out, expected, rtol=1e-5, scale=scale)
    report = str(compiled.fusion_report())
    assert "conv_general_dilated" not in report
    by_taps = not groups and rhs_shape[0] * rhs_shape[1] <= convolution.TAPS_MAX_FEATURES
    if out.size:
        assert ("dot_general" in report) != by_taps


@pytest.mark.cpu_compiler
@pytest.mark.parametrize("rhs_shape", [(1, 1, 3, 3), (2, 1, 3, 2), (1, 3, 1, 5), (2, 2, 2, 2)])
def test_a_convolution_of_few_features_is_a_sum_of_shifted_slices(rhs_shape):
    """A kernel with at most ``TAPS_MAX_FEATURES`` (input, output) feature pairs (a filter
    of one channel, RGB to grey) convolves as its window positions' strided slices of the
    padded input times their weights, summed: one kernel after the padded input, no
    im2col gather, no product; strides, dilations and padding as XLA's."""
    lhs = random_array(RNG, (2, rhs_shape[1], 12, 10), np.float32)
    rhs = random_array(RNG, rhs_shape, np.float32)
    args = ((1, 2), ((1, 1), (2, 1)), (1, 1), (2, 1))

    def conv(a, b):
        return lax.conv_general_dilated(a, b, *args)
    compiled = nbjax.jit(conv).lower(lhs, rhs).compile()
    expected = naive_conv(lhs, rhs, *args, 1, 1)
    scale = np.abs(lhs).max() * np.abs(rhs).sum(axis=0).max()
    assert_close(compiled(lhs, rhs), expected, rtol=1e-5, scale=scale)
    report = str(compiled.fusion_report())
    assert "dot_general" not in report and "gather" not in report
    assert report.count("\nkernel ") + report.startswith("kernel ") <= 3
    # half floats keep the product, which accumulates in float32 and rounds once
    half = nbjax.jit(conv).lower(lhs.astype(np.float16), rhs.astype(np.float16)).compile()
    assert "dot_general" in str(half.fusion_report())


@pytest.mark.cpu_compiler
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float16, np.complex64, np.bool_])
def test_compiled_conv_dtypes_match_eager(dtype):
    lhs, rhs = random_array(RNG, (2, 2, 5, 4), dtype), random_array(RNG, (3, 2, 2, 2), dtype)

    def conv(a, b):
        return lax.conv_general_dilated(a, b, (2, 1), ((1, 0), (0, 1)))
    out, eager = nbjax.jit(conv)(lhs, rhs), conv(lhs, rhs)
    assert out.dtype == eager.dtype == np.dtype(dtype)
    tol = {np.float16: 2e-3, np.complex64: 1e-5}.get(dtype, 0)
    scale = float(np.abs(lhs).max() * np.abs(rhs).max() * 8) if tol else None
    assert_close(np.asarray(out), np.asarray(eager), rtol=tol, scale=scale)


@pytest.mark.cpu_compiler
def test_compiled_conv_gradients_match_eager():
    """The transposed convolutions of the gradient (input dilation, kernel-sized outputs,
    groups) decompose into products too."""
    x = random_array(RNG, (2, 4, 9, 7), np.float32)
    w = random_array(RNG, (6, 2, 3, 2), np.float32)

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, 1)), rhs_dilation=(1, 2),
                                     feature_group_count=2)
        return (nbjax.numpy.tanh(y) ** 2).sum()
    grads = nbjax.jit(nbjax.grad(loss, argnums=(0, 1)))(x, w)
    eager = nbjax.grad(loss, argnums=(0, 1))(x, w)
    for got, want, operand in zip(grads, eager, (w, x)):
        assert_close(got, want, rtol=1e-5, scale=float(np.abs(operand).sum()))


_CORRELATIONS = [  # lhs NCHW, rhs OIHW (more kernel positions than outputs), strides,
    # padding, lhs_dilation, rhs_dilation
    ((2, 3, 9, 8), (4, 3, 7, 6), (1, 1), ((1, 1), (0, 1)), (1, 1), (1, 1)),
    ((3, 2, 11, 10), (2, 2, 4, 4), (2, 3), ((1, 0), (2, 1)), (1, 1), (2, 2)),
    ((1, 4, 6, 7), (3, 4, 8, 5), (1, 2), ((1, 2), (0, 0)), (2, 1), (1, 1)),
]


@pytest.mark.cpu_compiler
@pytest.mark.parametrize("case", _CORRELATIONS, ids=lambda c: "x".join(map(str, c[1])))
def test_a_kernel_larger_than_the_result_gathers_the_windows_by_output_position(case):
    """A convolution whose kernel has more positions than its result (a kernel's gradient,
    the input correlated with the output cotangent) is one product of the input's windows
    gathered by output position, with strides, dilations and padding as XLA's."""
    lhs_shape, rhs_shape, strides, padding, lhs_dilation, rhs_dilation = case
    lhs = random_array(RNG, lhs_shape, np.float32)
    rhs = random_array(RNG, rhs_shape, np.float32)

    def conv(a, b):
        return lax.conv_general_dilated(a, b, strides, padding, lhs_dilation, rhs_dilation)
    compiled = nbjax.jit(conv).lower(lhs, rhs).compile()
    expected = naive_conv(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation, 1, 1)
    assert 0 < np.prod(expected.shape[2:]) < np.prod(rhs_shape[2:])
    scale = np.abs(lhs).max() * np.abs(rhs).sum(axis=0).max()
    assert_close(compiled(lhs, rhs), expected, rtol=1e-5, scale=scale)
    steps = str(compiled.fusion_report()).split("\ndecisions:")[0].splitlines()
    assert sum("gather" in line for line in steps if line.startswith("kernel ")) == 1
    assert any(line.endswith(": dot_general") for line in steps)


@pytest.mark.cpu_compiler
def test_a_kernel_gradient_reuses_the_forward_pass_windows():
    """The gradient of an NHWC convolution layer with respect to its kernel is a product of
    the forward pass's own im2col matrix and the output cotangent as it is: the step
    gathers windows twice, the input's (for the output and the kernel's gradient) and the
    cotangent's (for the input's gradient), and copies neither transposed; the gradients
    are those of the eager (NumPy) convolution's."""
    x = random_array(RNG, (4, 10, 9, 3), np.float32)
    w = random_array(RNG, (3, 3, 3, 5), np.float32)
    numbers = ("NHWC", "HWIO", "NHWC")

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=numbers)
        return (nbjax.numpy.tanh(y) ** 2).sum()
    step = nbjax.jit(nbjax.value_and_grad(loss, argnums=(0, 1)))
    report = str(step.lower(x, w).compile().fusion_report()).split("\ndecisions:")[0]
    kernels = [line for line in report.splitlines() if line.startswith("kernel ")]
    assert sum("gather" in k for k in kernels) == 2
    assert not any("transpose" in k for k in kernels if "rev" not in k)
    _, grads = step(x, w)
    _, eager = nbjax.value_and_grad(loss, argnums=(0, 1))(x, w)
    for got, want, operand in zip(grads, eager, (w, x)):
        assert_close(got, want, rtol=1e-5, scale=float(np.abs(operand).sum()))


def test_a_nan_under_a_dilated_kernels_gap_stays_out():
    """XLA's kernel dilation skips the gaps (they are not zero weights): a NaN or inf there
    does not reach the output, eagerly or compiled."""
    lhs = random_array(RNG, (1, 2, 7, 6), np.float32)
    lhs[0, 0, 1, 1], lhs[0, 1, 3, 2] = np.nan, np.inf
    rhs = random_array(RNG, (2, 2, 2, 2), np.float32)

    def conv(a, b):
        return lax.conv_general_dilated(a, b, (1, 1), ((0, 0), (0, 0)), rhs_dilation=(2, 2))
    expected = naive_conv(lhs, rhs, (1, 1), ((0, 0), (0, 0)), (1, 1), (2, 2))
    assert np.isfinite(expected).any() and np.isnan(expected).any()
    for out in (conv(lhs, rhs), nbjax.jit(conv)(lhs, rhs)):
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)

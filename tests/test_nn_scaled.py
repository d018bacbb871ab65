"""Block-scaled products: lax.scaled_dot, nn.scaled_matmul, nn.scaled_dot_general."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.nn import scaled

from helpers import assert_close

RNG = np.random.default_rng(0)
F8, E8M0 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu


@pytest.fixture(autouse=True)
def _quiet_reference_steps():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "nbjax cpu backend: no kernel")
        yield


def bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.mark.parametrize("preferred", [None, np.float32])
def test_scaled_dot_rounds_through_bfloat16_and_sums_in_float32(preferred):
    b, m, n, k, block = 2, 3, 4, 64, 32
    lhs, rhs = RNG.standard_normal((b, m, k)), RNG.standard_normal((b, k, n))
    ls, rs = RNG.uniform(0.5, 2, (b, m, k // block)), RNG.uniform(0.5, 2, (b, k // block, n))
    got = nbjax.lax.scaled_dot(lhs.astype(np.float32), rhs.astype(np.float32),
                               lhs_scale=ls.astype(np.float32), rhs_scale=rs.astype(np.float32),
                               preferred_element_type=preferred)
    a = bf16(bf16(lhs) * np.repeat(bf16(ls), block, axis=-1))
    c = bf16(bf16(rhs) * np.repeat(bf16(rs), block, axis=1))
    expected = np.einsum("bmk,bkn->bmn", a, c)
    assert got.dtype == (ml_dtypes.bfloat16 if preferred is None else np.float32)
    tol = 2 ** -8 if preferred is None else 1e-6
    assert_close(np.asarray(got, np.float32), expected, rtol=tol,
                 scale=np.einsum("bmk,bkn->bmn", abs(a), abs(c)))
    with pytest.raises(ValueError, match="does not fit"):
        nbjax.lax.scaled_dot(lhs, rhs, lhs_scale=np.ones((b, m, 3)), rhs_scale=rs)


def test_scaled_dot_matches_jax():
    jax = pytest.importorskip("jax")
    lhs = RNG.standard_normal((2, 3, 64)).astype(F8)
    rhs = RNG.standard_normal((2, 64, 4)).astype(F8)
    ls = (2.0 ** RNG.integers(-3, 3, (2, 3, 2))).astype(E8M0)
    rs = (2.0 ** RNG.integers(-3, 3, (2, 2, 4))).astype(E8M0)
    ours = nbjax.lax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs)
    theirs = jax.lax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_scaled_matmul_is_its_documented_formula():
    lhs = RNG.standard_normal((2, 5, 64)).astype(F8)
    rhs = RNG.standard_normal((2, 6, 64)).astype(F8)
    ls = (2.0 ** RNG.integers(-4, 4, (2, 5, 2))).astype(E8M0)
    rs = (2.0 ** RNG.integers(-4, 4, (2, 6, 4))).astype(E8M0)
    got = nbjax.nn.scaled_matmul(lhs, rhs, ls, rs)
    a = lhs.astype(np.float32) * np.repeat(ls.astype(np.float32), 32, axis=-1)
    b = rhs.astype(np.float32) * np.repeat(rs.astype(np.float32), 16, axis=-1)
    expected = np.einsum("bmk,bnk->bmn", a, b)
    assert got.dtype == np.float32 and got.shape == (2, 5, 6)
    assert_close(np.asarray(got), expected, rtol=1e-6,
                 scale=np.einsum("bmk,bnk->bmn", abs(a), abs(b)))
    assert nbjax.nn.scaled_matmul(lhs, rhs, ls, rs, jnp.bfloat16).dtype == ml_dtypes.bfloat16
    with pytest.raises(ValueError, match="multiple"):
        nbjax.nn.scaled_matmul(lhs, rhs, ls[..., :1].repeat(3, -1), rs)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_quantize_is_jaxs(mode):
    jax = pytest.importorskip("jax")
    from jax._src.cudnn.scaled_matmul_stablehlo import quantize
    x = (RNG.standard_normal((2, 4, 64)) * 10.0 ** RNG.integers(-3, 3, (2, 4, 1))).astype(
        np.float32)
    if mode == "nvfp4":
        # An all-zero block: its scale is 0, and 0 / 0 is NaN in JAX's algorithm too. (Under
        # mxfp8 the scale is 2**-127, a subnormal that XLA's CPU flushes to zero, so JAX's
        # elements come out NaN there where the algorithm means 0: we keep the 0.)
        x[0, 0, :16] = 0.0
    ours = scaled._quantize(jnp.asarray(x), nbjax.nn.get_scaled_dot_general_config(mode))
    theirs = quantize(jax.numpy.asarray(x), jax.nn.get_scaled_dot_general_config(mode))
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


def test_quantize_scales_blocks_to_the_element_types_range():
    x = RNG.standard_normal((1, 2, 64)).astype(np.float32) * 100
    elements, scales = scaled._quantize(jnp.asarray(x),
                                        nbjax.nn.get_scaled_dot_general_config("mxfp8"))
    assert elements.dtype == F8 and scales.dtype == E8M0 and scales.shape == (1, 2, 2)
    s = np.asarray(scales, np.float32)
    assert np.all(np.log2(s) == np.round(np.log2(s)))  # powers of two
    blocks = np.asarray(elements, np.float32).reshape(1, 2, 2, 32)
    assert np.abs(blocks).max() <= 448
    back = (blocks * s[..., None]).reshape(x.shape)
    assert_close(back, x, rtol=2 ** -3, scale=np.abs(x).max())


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_approximates_dot_general_and_its_gradient(mode):
    lhs = RNG.standard_normal((3, 32, 64)).astype(np.float32)
    rhs = RNG.standard_normal((3, 64, 64)).astype(np.float32)
    dims = (((2,), (2,)), ((0,), (0,)))
    configs = [nbjax.nn.get_scaled_dot_general_config(mode)] * 3
    w = RNG.standard_normal((3, 32, 64)).astype(np.float32)

    def loss(a, b):
        return jnp.sum(nbjax.nn.scaled_dot_general(a, b, dims, configs=configs) * w)

    out = nbjax.nn.scaled_dot_general(lhs, rhs, dims, configs=configs)
    exact = np.einsum("bmk,bnk->bmn", lhs, rhs)
    rel = 2 ** -3 if mode == "mxfp8" else 2 ** -1  # 3 and 1 mantissa bits
    assert out.shape == exact.shape and out.dtype == np.float32
    assert_close(np.asarray(out), exact, rtol=rel, scale=np.abs(exact).max())
    d_lhs, d_rhs = nbjax.grad(loss, argnums=(0, 1))(lhs, rhs)
    exact_lhs = np.einsum("bmn,bnk->bmk", w, rhs)
    exact_rhs = np.einsum("bmn,bmk->bnk", w, lhs)
    assert_close(np.asarray(d_lhs), exact_lhs, rtol=2 ** -3, scale=np.abs(exact_lhs).max())
    assert_close(np.asarray(d_rhs), exact_rhs, rtol=2 ** -3, scale=np.abs(exact_rhs).max())
    jitted = nbjax.jit(lambda a, b: nbjax.nn.scaled_dot_general(a, b, dims, configs=configs))
    # (the same products, summed in another order: the compiled ones by register tiles)
    assert_close(np.asarray(jitted(lhs, rhs)), np.asarray(out), rtol=1e-6,
                 scale=np.abs(exact).max())


def test_scaled_dot_general_without_configs_or_batch():
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    y = RNG.standard_normal((64, 32)).astype(np.float32)
    dims = (((1,), (0,)), ((), ()))
    assert_close(np.asarray(nbjax.nn.scaled_dot_general(x, y, dims)), x @ y, rtol=1e-6,
                 scale=np.abs(x) @ np.abs(y))
    configs = [nbjax.nn.get_scaled_dot_general_config("mxfp8")] * 3
    out = nbjax.nn.scaled_dot_general(x, y, dims, configs=configs)
    assert out.shape == (32, 32)
    assert_close(np.asarray(out), x @ y, rtol=2 ** -3, scale=np.abs(x @ y).max())
    with pytest.raises(TypeError, match="preferred_element_type"):
        nbjax.nn.scaled_dot_general(x, y, dims, preferred_element_type=np.int32, configs=configs)
    with pytest.raises(ValueError, match="Unsupported mode"):
        nbjax.nn.get_scaled_dot_general_config("fp16")
    config = nbjax.nn.get_scaled_dot_general_config("nvfp4")
    assert (config.block_size, config.data_type, config.scale_type) == (
        16, np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(F8))
    assert float(config.global_scale[0]) == 1.0

"""JAX's narrow types (from ml_dtypes): bfloat16, the 8-, 6- and 4-bit floats, the 1-, 2-
and 4-bit integers. Their promotion, values, derivatives and compiled code."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import dtypes

from helpers import assert_close

NARROW_FLOATS = ["float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
                 "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                 "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"]
NARROW_INTS = ["int1", "int2", "int4", "uint1", "uint2", "uint4"]
ALL = ["bfloat16"] + NARROW_FLOATS + NARROW_INTS
STANDARD = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "float32",
            "complex64"]


def dt(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


@pytest.fixture(autouse=True)
def _quiet_reference_steps():
    """jit runs these types on the reference backend and says so once per primitive."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "nbjax cpu backend: no kernel")
        yield


def expected_promotion(a, b):
    """JAX's rule for these types: bfloat16 promotes as float16 does (any integer or bool
    to bfloat16, float16 to float32, complex64 to complex64); a narrow type meets nothing
    but itself and bool (the narrow floats also meet every integer, which ranks below
    floats): anything else is a TypePromotionError."""
    a, b = dt(a), dt(b)
    if a == b:
        return a
    narrow = dtypes.NARROW_FLOATS + dtypes.NARROW_SIGNED + dtypes.NARROW_UNSIGNED
    for x, y in ((a, b), (b, a)):
        if x in narrow:
            meets = y.kind == "b" or (x in dtypes.NARROW_FLOATS and y.kind in "iu")
            return x if meets else None
    for x, y in ((a, b), (b, a)):
        if x == dtypes.bfloat16:
            if y.kind in "biu":
                return x
            return dtypes.float32 if y == dtypes.float16 else np.promote_types(np.float32, y)
    raise AssertionError("one of the two is a narrow type")


@pytest.mark.parametrize("a", ALL)
@pytest.mark.parametrize("b", ALL + STANDARD)
def test_promotion(a, b):
    expected = expected_promotion(a, b)
    if expected is None:
        with pytest.raises(dtypes.TypePromotionError, match="no available implicit dtype"):
            jnp.promote_types(dt(a), dt(b))
    else:
        assert jnp.promote_types(dt(a), dt(b)) == expected
        assert jnp.promote_types(dt(b), dt(a)) == expected


@pytest.mark.parametrize("name", ALL)
def test_python_scalars_take_the_arrays_type(name):
    x = jnp.ones(3, getattr(jnp, name))
    assert (x + 1).dtype == dt(name) and not (x + 1).weak_type
    if name in NARROW_INTS:
        with pytest.raises(dtypes.TypePromotionError):
            x + 1.5
    else:
        assert (x + 1.5).dtype == dt(name)
    if name == "bfloat16":
        assert (x + 1j).dtype == np.complex64
    else:
        with pytest.raises(dtypes.TypePromotionError):
            x + 1j


def test_names_kinds_and_limits_follow_jax():
    for name in ALL:
        t = getattr(jnp, name)
        assert np.dtype(t) == dt(name)
        assert jnp.issubdtype(t, jnp.floating) == (name not in NARROW_INTS)
        assert jnp.issubdtype(t, jnp.signedinteger) == (name in ("int1", "int2", "int4"))
        assert jnp.issubdtype(t, jnp.unsignedinteger) == name.startswith("uint")
        assert jnp.issubdtype(t, jnp.number) and jnp.issubdtype(t, t)
        assert not jnp.issubdtype(t, jnp.float32)
    assert jnp.finfo(jnp.bfloat16).eps == 2.0 ** -7
    assert jnp.finfo(jnp.float8_e4m3fn).max == 448
    assert (jnp.iinfo(jnp.int4).min, jnp.iinfo(jnp.int4).max) == (-8, 7)
    assert jnp.bfloat16(1.5).dtype == dtypes.bfloat16 and float(jnp.bfloat16(1.5)) == 1.5
    assert repr(jnp.array([1.5], jnp.bfloat16)) == "Array([1.5], dtype=bfloat16)"
    jaxpr = str(nbjax.make_jaxpr(lambda x, y, z: (x * 2, y, z))(
        jnp.ones(3, jnp.bfloat16), jnp.ones(2, jnp.float8_e4m3fn), jnp.ones(1, jnp.int4)))
    assert "bf16[3]" in jaxpr and "f8_e4m3fn[2]" in jaxpr and "i4[1]" in jaxpr


UNARY = {"negative": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log,
         "sin": np.sin, "tanh": np.tanh, "sqrt": np.sqrt, "floor": np.floor}
BINARY = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract,
          "divide": np.divide, "maximum": np.maximum}


def reference(fn, dtype, *xs):
    """``fn`` computed in float32 and rounded once to ``dtype``: the result each operation
    of these types has (ml_dtypes' loops, XLA's CPU code)."""
    with np.errstate(all="ignore"):
        return fn(*(x.astype(np.float32) for x in xs)).astype(dtype)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("jitted", [False, True])
def test_arithmetic_rounds_once_from_float32(name, jitted):
    rng = np.random.default_rng(0)
    dtype = dt(name)
    x = rng.uniform(0.25, 4, 64).astype(dtype)
    y = rng.uniform(0.25, 4, 64).astype(dtype)
    wrap = nbjax.jit if jitted else (lambda f: f)
    for fname, fn in UNARY.items():
        got = wrap(getattr(jnp, fname))(jnp.asarray(x))
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32),
                                      reference(fn, dtype, x).astype(np.float32), fname)
    for fname, fn in BINARY.items():
        got = wrap(getattr(jnp, fname))(jnp.asarray(x), jnp.asarray(y))
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32),
                                      reference(fn, dtype, x, y).astype(np.float32), fname)


def test_special_values_and_reductions():
    x = jnp.array([np.nan, np.inf, -0.0, 1.0], jnp.bfloat16)
    assert np.isnan(np.asarray(x[0], np.float32)) and np.isinf(np.asarray(x + 1, np.float32)[1])
    assert np.signbit(np.asarray(x, np.float32)[2])
    # float8_e4m3fn has no infinity: max/min of nothing start from its extremes, not NaN.
    f8 = jnp.array([-2.5, 1.5, 3.0], jnp.float8_e4m3fn)
    assert float(jnp.max(f8)) == 3.0 and float(jnp.min(f8)) == -2.5
    assert jnp.max(f8).dtype == dtypes.NARROW_FLOATS[3]
    assert float(jnp.max(jnp.zeros(0, jnp.float8_e4m3fn), initial=-448)) == -448
    # bfloat16 sums accumulate in float32; the narrow floats keep their type, as in JAX.
    big = jnp.ones(4096, jnp.bfloat16)
    assert float(jnp.sum(big)) == 4096 and jnp.sum(big).dtype == dtypes.bfloat16
    assert float(jnp.mean(big)) == 1.0
    assert jnp.mean(f8).dtype == dtypes.NARROW_FLOATS[3]


def test_integer_types():
    x = jnp.array([-8, -1, 0, 7], jnp.int4)
    assert (x + 1).dtype == dt("int4")
    np.testing.assert_array_equal(np.asarray(x, np.int8), [-8, -1, 0, 7])
    np.testing.assert_array_equal(np.asarray(x.astype(jnp.int32)), [-8, -1, 0, 7])
    np.testing.assert_array_equal(np.asarray(jnp.array([1, 2], jnp.uint4) * 3, np.int8), [3, 6])


def test_grad_and_vmap_of_bfloat16_code():
    def f(x):
        return jnp.sum(jnp.tanh(x) * x)

    x32 = np.linspace(-2, 2, 9, dtype=np.float32)
    x16 = jnp.asarray(x32, jnp.bfloat16)
    g = nbjax.grad(f)(x16)
    assert g.dtype == dtypes.bfloat16
    exact = np.tanh(x32) + x32 / np.cosh(x32) ** 2
    assert_close(np.asarray(g, np.float32), exact, rtol=2 ** -6, scale=4.0)
    fd = (np.asarray(jnp.tanh(x32 + 1e-3) * (x32 + 1e-3)) - np.tanh(x32 - 1e-3)
          * (x32 - 1e-3)) / 2e-3
    assert_close(np.asarray(g, np.float32), fd, rtol=2 ** -5, scale=4.0)
    rows = nbjax.vmap(jnp.sum)(jnp.ones((3, 5), jnp.bfloat16))
    assert rows.dtype == dtypes.bfloat16
    np.testing.assert_array_equal(np.asarray(rows, np.float32), [5, 5, 5])


def test_random_draws_in_bfloat16():
    key = nbjax.random.key(0)
    u = nbjax.random.uniform(key, (10_000,), jnp.bfloat16)
    assert u.dtype == dtypes.bfloat16
    u32 = np.asarray(u, np.float32)
    assert u32.min() >= 0 and u32.max() < 1 and abs(u32.mean() - 0.5) < 0.02
    # 7 mantissa bits: every draw is a multiple of 2**-7 (or finer below 1/2).
    assert np.all(u32 * 2 ** 8 == np.round(u32 * 2 ** 8))


def test_random_matches_jax():
    jax = pytest.importorskip("jax")
    for draw in ("uniform", "normal", "exponential"):
        ours = getattr(nbjax.random, draw)(nbjax.random.key(3), (256,), jnp.bfloat16)
        theirs = getattr(jax.random, draw)(jax.random.key(3), (256,), jax.numpy.bfloat16)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_promotion_matches_jax():
    jax = pytest.importorskip("jax")
    for a in ALL:
        for b in ALL + STANDARD:
            try:
                theirs = jax.numpy.promote_types(dt(a), dt(b))
            except Exception:  # noqa: BLE001  (JAX's TypePromotionError)
                theirs = None
            assert expected_promotion(a, b) == theirs, (a, b)


@pytest.mark.cpu_compiler
def test_compiled_code_runs_these_types_on_the_reference_backend():
    f = nbjax.jit(lambda x, y: (jnp.sin(x) * 2 + 1, y * 2.0))
    x = jnp.asarray(np.linspace(0, 1, 7), jnp.bfloat16)
    y = jnp.asarray(np.linspace(0, 1, 7), jnp.float32)
    out_x, out_y = f(x, y)
    np.testing.assert_array_equal(np.asarray(out_x), np.asarray(jnp.sin(x) * 2 + 1))
    np.testing.assert_array_equal(np.asarray(out_y), np.asarray(y) * 2)
    report = f.lower(x, y).compile().fusion_report()
    kinds = {g.eqns[0].outvars[0].aval.dtype: g.kind for g in report.groups}
    assert kinds[dtypes.bfloat16] == "fallback" and kinds[np.dtype(np.float32)] == "kernel"
    assert any("on bfloat16 has no kernel lowering" in d.reason for d in report.decisions)

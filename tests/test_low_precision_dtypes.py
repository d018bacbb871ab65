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
WIDE = ["int64", "uint64", "float64", "complex128"]


def dt(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


@pytest.fixture(autouse=True)
def _no_warnings():
    """jit leaves these types to the reference backend by design: it does so silently."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def both_widths(request):
    """Run a test with 64-bit types off and on, in nbjax and (when it is there) in JAX."""
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", request.param)
    try:
        with nbjax.enable_x64(request.param):
            yield jax
    finally:
        jax.config.update("jax_enable_x64", before)


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


def test_promotion_table_and_weak_scalars_match_jax(both_widths):
    """Every pair (the 64-bit types too, x64 off and on), and each type with Python
    scalars: the result dtype and weak type JAX gives, or a TypePromotionError where it
    raises. (Without x64 JAX's promote_types may answer a 64-bit type, which its arrays
    then store in 32 bits; ours answers the stored type.)"""
    jax = both_widths
    for a in ALL:
        for b in ALL + STANDARD + WIDE:
            try:
                theirs = jax.dtypes.canonicalize_dtype(jax.numpy.promote_types(dt(a), dt(b)))
            except Exception:  # noqa: BLE001  (JAX's TypePromotionError)
                theirs = None
            if theirs is None:
                with pytest.raises(dtypes.TypePromotionError):
                    jnp.promote_types(dt(a), dt(b))
            else:
                assert jnp.promote_types(dt(a), dt(b)) == theirs, (a, b)
        for scalar in (True, 2, 1.5, 1j):
            ours = theirs = None
            try:  # (abstractly: JAX's CPU backend cannot run some of these types)
                theirs = jax.eval_shape(lambda x, s=scalar: x + s,
                                        jax.ShapeDtypeStruct((2,), dt(a)))
            except Exception:  # noqa: BLE001  (JAX's TypePromotionError)
                pass
            try:
                ours = jnp.ones(2, dt(a)) + scalar
            except dtypes.TypePromotionError:
                pass
            assert (ours is None) == (theirs is None), (a, scalar)
            if ours is not None:
                assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type)


NARROW_JIT = {
    "elementwise": lambda x: x * x + x,
    "sum": lambda x: nbjax.lax.reduce_sum(x, (0,)),  # (jnp.sum of int4 promotes: an error)
    "max": lambda x: jnp.max(x, axis=1),
    "dot": lambda x: x @ x.T,
    "where": lambda x: jnp.where(x > x[0], x, x[1]),
    "sort": lambda x: jnp.sort(x, axis=-1),
    "round trip": lambda x: (x.astype(jnp.float32) * 2).astype(x.dtype),
    "slices": lambda x: jnp.concatenate([x.reshape(-1)[::2], x[1]]),
    "fori_loop": lambda x: nbjax.lax.fori_loop(0, 3, lambda i, c: c * x + x, x),
    "scan": lambda x: nbjax.lax.scan(lambda c, r: (c + r, c * r), x[0], x),
    "cond": lambda x: nbjax.lax.cond(x[0, 0] > x[0, 1], lambda: x + x, lambda: x * x),
}


def _random(name, shape, rng, low=-2.0, high=2.0):
    dtype = dt(name)
    if name in NARROW_INTS:
        info = ml_dtypes.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)
    if name == "float8_e8m0fnu":  # powers of two only, no sign, no zero
        low, high = 0.25, high
    return rng.uniform(low, high, shape).astype(dtype)


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.astype(np.float32), b.astype(np.float32))


@pytest.mark.parametrize("name", ALL)
def test_jit_agrees_with_eager_bit_for_bit(name):
    """Compiled code on these types (control flow too) gives the eager values exactly."""
    x = jnp.asarray(_random(name, (3, 4), np.random.default_rng(1)))
    for what, fn in NARROW_JIT.items():
        for e, j in zip(nbjax.tree_util.tree_leaves(fn(x)),
                        nbjax.tree_util.tree_leaves(nbjax.jit(fn)(x))):
            _same(e, j)


@pytest.mark.cpu_compiler
def test_conversions_between_bfloat16_and_float32_are_kernels_rounding_as_ml_dtypes():
    """A mixed-precision program converts each operand and result: those conversions are
    kernels (0.1-0.25 ms each for 512x512 as NumPy steps), bit for bit ml_dtypes' (to
    nearest, ties to even; NaN stays NaN, overflow is infinite, -0.0 and subnormals
    kept), fused with the float32 work around them, in a loop too."""
    bits = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0x7F7FFFFF, 0x7F7F8000, 0x80000000,
                     0x00000001, 0x807FFFFF, 0x7FC00001, 0xFF800000, 0x3F7FFFFF], np.uint32)
    rng = np.random.default_rng(11)
    x = np.concatenate([bits.view(np.float32), [np.nan, np.inf, 0.0],
                        rng.standard_normal(4096 - 14).astype(np.float32) * 1e3])
    x = x.astype(np.float32).reshape(64, 64)
    to_bf16 = nbjax.jit(lambda x: (x * 2.0).astype(jnp.bfloat16))
    with np.errstate(over="ignore"):  # (the largest floats double to infinity)
        want = (x * np.float32(2)).astype(ml_dtypes.bfloat16)
    got = np.asarray(to_bf16(x))
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    (group,) = to_bf16.lower(x).compile().fusion_report().groups
    assert group.kind == "kernel"
    from_bf16 = nbjax.jit(lambda y: jnp.tanh(y.astype(jnp.float32)) + 1.0)
    assert_close(np.asarray(from_bf16(want)), np.tanh(want.astype(np.float32)) + 1, rtol=1e-6)
    assert all(g.kind == "kernel" for g in from_bf16.lower(want).compile().fusion_report().groups)

    def looped(y):
        return nbjax.lax.fori_loop(0, 3, lambda i, c: (c.astype(jnp.float32) * 0.5)
                                   .astype(jnp.bfloat16), y)
    expected = want
    for _ in range(3):
        expected = (expected.astype(np.float32) * np.float32(0.5)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(nbjax.jit(looped)(want)).view(np.uint16),
                                  expected.view(np.uint16))


@pytest.mark.cpu_compiler
@pytest.mark.parametrize("preferred", [None, "float32"])
def test_a_bfloat16_product_is_the_float32_product_of_its_conversions(preferred):
    """As a float16 one: the operands converted (kernels, exact), multiplied natively in
    float32 (BLAS) and rounded once to bfloat16 unless float32 is asked for; the values
    are the eager ones (which sum in float32 too), and no step is left to NumPy."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((96, 80)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((80, 64)).astype(ml_dtypes.bfloat16)
    f = nbjax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=preferred))
    got, eager = np.asarray(f(a, b)), np.asarray(jnp.dot(a, b, preferred_element_type=preferred))
    assert got.dtype == eager.dtype == (np.float32 if preferred else ml_dtypes.bfloat16)
    terms = np.abs(a.astype(np.float32)) @ np.abs(b.astype(np.float32))
    assert_close(got.astype(np.float32), eager.astype(np.float32),
                 rtol=1e-6 if preferred else 8e-3, scale=terms)
    report = f.lower(a, b).compile().fusion_report()
    kinds = [g.kind for g in report.groups]
    assert kinds.count("library") == 1 and set(kinds) == {"kernel", "library"}


@pytest.mark.cpu_compiler
def test_the_fusion_report_says_narrow_steps_are_by_design():
    f = nbjax.jit(lambda x: nbjax.lax.fori_loop(0, 2, lambda i, c: jnp.exp(c), x))
    x = jnp.ones(4, jnp.bfloat16)
    report = str(f.lower(x).compile().fusion_report())
    assert "host step" in report  # the loop is native; its bfloat16 steps call back
    g = nbjax.jit(lambda x: jnp.exp(x))
    decision = g.lower(x).compile().fusion_report().decisions[0]
    assert "exp on bfloat16" in decision.reason and "by design" in decision.reason


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_contractions_sum_in_float32_and_round_once(name):
    """dot, einsum and convolutions of these types: the float32 result of their values,
    rounded once, as XLA on the CPU."""
    rng = np.random.default_rng(2)
    a, b = _random(name, (5, 7), rng), _random(name, (7, 3), rng)
    f32 = np.float32
    _same(jnp.asarray(a) @ jnp.asarray(b), (a.astype(f32) @ b.astype(f32)).astype(a.dtype))
    _same(jnp.einsum("ij,jk->ik", a, b), (a.astype(f32) @ b.astype(f32)).astype(a.dtype))
    u, v = a[0], b[:, 0]
    for mode in ("full", "same", "valid"):
        expected = np.convolve(u.astype(f32), v.astype(f32), mode).astype(a.dtype)
        _same(jnp.convolve(u, v, mode), expected)
        _same(nbjax.jit(jnp.convolve, static_argnums=2)(u, v, mode), expected)


def test_narrow_integer_contractions_wrap_like_the_type():
    x = jnp.array([[7, 7, 7]], jnp.int4)
    # 147 does not fit in 4 bits: it wraps to 147 - 9 * 16 = 3, as XLA's int4 does
    _same(x @ x.T, np.array([[3]], ml_dtypes.int4))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
def test_rsqrt_rounds_once_from_float32(name):
    y = _random(name, 200, np.random.default_rng(3), 0.5, 8.0)
    _same(nbjax.lax.rsqrt(y), (1 / np.sqrt(y.astype(np.float32))).astype(y.dtype))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
def test_exp2_log10_and_linspace_match_jax(name):
    """Computed as JAX computes them in these types: exp2 as exp(x * log 2), log10 as
    log(x) / log(10) by a multiplication, linspace by interpolation, each step rounded."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(4)
    x, y = _random(name, 300, rng, -4, 4), _random(name, 300, rng, 0.1, 8)
    _same(jnp.exp2(x), jax.numpy.exp2(x))
    _same(jnp.log10(y), jax.numpy.log10(y))
    for start, stop, num, endpoint in ((0, 1, 5, True), (-3, 7, 13, True), (0.1, 2.9, 9, False),
                                       (-1, 3, 300, True)):
        _same(jnp.linspace(start, stop, num, endpoint, dtype=dt(name)),
              jax.numpy.linspace(start, stop, num, endpoint, dtype=dt(name)))


def test_signbit_of_8_bit_floats_is_not_implemented_as_in_jax():
    with pytest.raises(NotImplementedError, match="16, 32, and 64-bit"):
        jnp.signbit(jnp.ones(2, jnp.float8_e4m3fn))
    np.testing.assert_array_equal(jnp.signbit(jnp.array([-0.0, 1.0], jnp.bfloat16)),
                                  [True, False])


def _pattern(x):
    bits = ml_dtypes.iinfo(x.dtype).bits
    return x.astype(np.int64) & ((1 << bits) - 1)


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
def test_bit_operations_of_narrow_integers_work_on_their_bits(name):
    """Every pair of values: shifts, population counts and leading zeros of the type's
    own bits (NumPy's whole byte would give others), against the bits in Python."""
    dtype = dt(name)
    info = ml_dtypes.iinfo(dtype)
    bits, values = info.bits, np.arange(info.min, info.max + 1)
    a, b = (m.ravel().astype(dtype) for m in np.meshgrid(values, values))
    pa, pb = _pattern(a), _pattern(b)

    def typed(patterns):
        patterns = np.asarray(patterns) & ((1 << bits) - 1)
        if info.min < 0:
            patterns = np.where(patterns >= 1 << (bits - 1), patterns - (1 << bits), patterns)
        return patterns.astype(dtype)

    signed = np.where(pa >= 1 << (bits - 1), pa - (1 << bits), pa)
    expected = {
        "shift_left": typed(np.where(pb >= bits, 0, pa << np.minimum(pb, bits))),
        "shift_right_logical": typed(np.where(pb >= bits, 0, pa >> np.minimum(pb, bits))),
        "shift_right_arithmetic": typed(signed >> np.minimum(pb, bits - 1)),
    }
    for op, want in expected.items():
        _same(getattr(nbjax.lax, op)(a, b), want)
        _same(nbjax.jit(getattr(nbjax.lax, op))(a, b), want)
    _same(nbjax.lax.population_count(a), typed([bin(p).count("1") for p in pa]))
    _same(nbjax.lax.clz(a), typed([bits - int(p).bit_length() for p in pa]))


def test_isdtype_files_them_as_jax_does():
    jax = pytest.importorskip("jax")
    kinds = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
             "complex floating", "numeric", np.float32, ("integral", "real floating")]
    for name in ALL:
        for kind in kinds:
            assert jnp.isdtype(dt(name), kind) == jax.numpy.isdtype(dt(name), kind), (name, kind)


def test_python_ints_wrap_into_the_narrow_integers_as_in_jax():
    """ml_dtypes' conversion wraps (JAX's too); the wider integers raise OverflowError."""
    _same(jnp.array([9, -9, 17], jnp.int4), np.array([9, -9, 17]).astype(ml_dtypes.int4))
    _same(jnp.uint2(5), np.array(5).astype(ml_dtypes.uint2))
    with pytest.raises(OverflowError):
        jnp.array(300, jnp.int8)


@pytest.mark.parametrize("name", ["bfloat16"] + NARROW_FLOATS)
def test_sort_and_top_k_order_by_value(name):
    """sort and top_k order these types by value as they do float32 (exact for each of
    them), whatever their bits: float4's sign is bit 3, the ``fnuz`` types' NaN has
    -0.0's pattern, float8_e8m0fnu has no sign. NaNs last, -0.0 tied with 0.0."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(60) * 3).astype(np.float32)
    x[::7], x[1::9], x[2::11] = np.nan, -0.0, 0.0
    x = x.astype(dt(name))
    wide = x.astype(np.float32)
    key = np.where(np.isnan(wide), np.inf, wide + 0)  # (NaN last, after inf)
    order = np.lexsort([np.isnan(wide), key][::-1])
    got = np.asarray(jnp.sort(x))
    assert got.dtype == x.dtype and got.tobytes() == x[order].tobytes()
    values, indices = nbjax.lax.top_k(x, 5)
    assert np.array_equal(np.asarray(indices), nbjax.lax.top_k(wide, 5)[1])
    assert np.asarray(values).tobytes() == x[np.asarray(indices)].tobytes()


def _same_values(a, b):
    """Equal bit for bit, except that any NaN equals any NaN (XLA's NaN payloads vary)."""
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a.astype(np.float32))
    return np.array_equal(nan, np.isnan(b.astype(np.float32))) and \
        a[~nan].tobytes() == b[~nan].tobytes()


@pytest.mark.parametrize("name", [n for n in NARROW_FLOATS if not n.startswith("float6")])
def test_reduce_precision_rounds_as_xla_does(name):
    """The 8- and 4-bit floats are reduced as XLA's CPU computes them, in float16 (float32
    for float8_e8m0fnu, which float16 cannot hold), not on their own bits: a float8_e4m3
    subnormal is flushed by 4 exponent bits, an fnuz type's overflow is its NaN."""
    x = np.array([1.3, -2.7, 0.1, -0.0, 100.0, np.nan, 0.01, 2.0 ** -7], np.float32)
    x = x.astype(dt(name))
    wide = np.float32 if name == "float8_e8m0fnu" else np.float16
    for bits in [(2, 1), (4, 2), (5, 10)]:
        got = nbjax.lax.reduce_precision(x, *bits)
        want = nbjax.lax.reduce_precision(x.astype(wide), *bits)
        assert _same_values(got, np.asarray(want).astype(x.dtype)), bits
    if name == "float8_e4m3":
        assert float(nbjax.lax.reduce_precision(x, 4, 2)[6]) == 0.0  # (0.0078125 flushed)
    if name == "float8_e4m3fnuz":
        assert np.isnan(float(nbjax.lax.reduce_precision(x, 2, 1)[4]))  # (inf: its NaN)


@pytest.mark.parametrize("name", [n for n in NARROW_FLOATS if not n.startswith("float6")])
def test_reduce_precision_matches_jax(name):
    jax = pytest.importorskip("jax")
    x = np.array([1.3, -2.7, 0.1, -0.0, 100.0, np.nan, 0.01, 2.0 ** -7, 3e-3, -7e-4],
                 np.float32).astype(dt(name))
    for bits in [(2, 1), (3, 3), (4, 2), (5, 10), (8, 7)]:
        assert _same_values(nbjax.lax.reduce_precision(x, *bits),
                            jax.lax.reduce_precision(x, *bits)), bits


def test_exp2_of_the_narrow_floats_rounds_as_xla_does():
    """``exp(x * log 2)`` with the product in the type and the exponential rounded to the
    wider type XLA computes the 8-bit floats in: float8_e5m2's 2 ** -0.5 is float16's
    0.6875, then 0.75 (ties to even), not 0.625, the nearest to exp's own value."""
    x = np.array([-0.5], ml_dtypes.float8_e5m2)
    assert float(jnp.exp2(x)[0]) == 0.75
    x = np.array([-0.5], ml_dtypes.float8_e4m3fn)
    assert float(jnp.exp2(x)[0]) == 0.6875


@pytest.mark.parametrize("name", ["bfloat16"] + [n for n in NARROW_FLOATS
                                                  if not n.startswith("float6")])
def test_exp2_matches_jax(name):
    jax = pytest.importorskip("jax")
    x = np.array([1.3, -2.7, 0.1, -0.0, 100.0, np.nan, 0.01, -0.5, 3.0, 0.75, -1.0, 0.3, 1.7,
                  -5.0, 4.5, -0.1], np.float32).astype(dt(name))
    assert _same_values(jnp.exp2(x), jax.numpy.exp2(x))


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_nan_extrema_of_types_without_infinity(name):
    """nanmax and nanmin put each NaN aside as the type's least (greatest) finite value
    where it has no infinity (as JAX): -inf would become a NaN again."""
    x = np.array([1.0, np.nan, 96.0, -2.0], np.float32).astype(dt(name))
    assert float(jnp.nanmax(x)) == 96.0 and float(jnp.nanmin(x)) == -2.0
    assert int(jnp.nanargmax(x)) == 2 and int(jnp.nanargmin(x)) == 3
    assert np.isnan(float(jnp.nanmax(np.full(3, np.nan, np.float32).astype(dt(name)))))

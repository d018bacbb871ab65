"""Type promotion against JAX's documented table, weak types, and 32/64-bit canonicalization."""

import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import dtypes

# JAX's type-promotion table (x64 enabled), as documented in "Type promotion semantics";
# ``*`` marks a weak type (the type of a Python scalar). Row + column -> entry.
PROMOTION_TABLE = """
        b1    u8   u16   u32   u64    i8   i16   i32   i64   f16   f32   f64   c64  c128    i*    f*    c*
   b1   b1    u8   u16   u32   u64    i8   i16   i32   i64   f16   f32   f64   c64  c128    i*    f*    c*
   u8   u8    u8   u16   u32   u64   i16   i16   i32   i64   f16   f32   f64   c64  c128    u8    f*    c*
  u16  u16   u16   u16   u32   u64   i32   i32   i32   i64   f16   f32   f64   c64  c128   u16    f*    c*
  u32  u32   u32   u32   u32   u64   i64   i64   i64   i64   f16   f32   f64   c64  c128   u32    f*    c*
  u64  u64   u64   u64   u64   u64    f*    f*    f*    f*   f16   f32   f64   c64  c128   u64    f*    c*
   i8   i8   i16   i32   i64    f*    i8   i16   i32   i64   f16   f32   f64   c64  c128    i8    f*    c*
  i16  i16   i16   i32   i64    f*   i16   i16   i32   i64   f16   f32   f64   c64  c128   i16    f*    c*
  i32  i32   i32   i32   i64    f*   i32   i32   i32   i64   f16   f32   f64   c64  c128   i32    f*    c*
  i64  i64   i64   i64   i64    f*   i64   i64   i64   i64   f16   f32   f64   c64  c128   i64    f*    c*
  f16  f16   f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f64   c64  c128   f16   f16   c64
  f32  f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   c64  c128   f32   f32   c64
  f64  f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64  c128  c128   f64   f64  c128
  c64  c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64  c128   c64  c128   c64   c64   c64
 c128 c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128
   i*   i*    u8   u16   u32   u64    i8   i16   i32   i64   f16   f32   f64   c64  c128    i*    f*    c*
   f*   f*    f*    f*    f*    f*    f*    f*    f*    f*   f16   f32   f64   c64  c128    f*    f*    c*
   c*   c*    c*    c*    c*    c*    c*    c*    c*    c*   c64   c64  c128   c64  c128    c*    c*    c*
"""

_CODES = {"b1": "bool", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
          "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "f16": "float16",
          "f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128"}
_WEAK = {"i*": ("int64", True), "f*": ("float64", True), "c*": ("complex128", True)}


def _parse(code):
    return _WEAK.get(code, (_CODES.get(code), False))


def _table():
    lines = [line.split() for line in PROMOTION_TABLE.strip().splitlines()]
    cols = lines[0]
    for row in lines[1:]:
        for col, entry in zip(cols, row[1:]):
            yield row[0], col, entry


def _value(code):
    """A rank-0 operand of the given lattice type: Python scalars for the weak types."""
    return {"i*": 1, "f*": 1.0, "c*": 1j}.get(code) if code in _WEAK else \
        jnp.zeros((), _CODES[code])


@pytest.mark.parametrize("a,b,expected", list(_table()))
def test_promotion_table_lattice(a, b, expected, x64):
    got = dtypes.promote(_parse(a), _parse(b))
    dtype, weak = _parse(expected)
    assert (got[0].name, got[1]) == (dtype, weak)


@pytest.mark.parametrize("a,b,expected", [t for t in _table() if "b1" not in t[:2]][::7])
def test_promotion_through_jnp_add(a, b, expected, x64):
    out = jnp.add(_value(a), _value(b))
    dtype, weak = _parse(expected)
    assert (out.dtype.name, out.weak_type) == (dtype, weak)


def test_x32_canonicalizes_results():
    assert not nbjax.config.enable_x64
    i32 = jnp.zeros(3, "int32")
    out = i32 + 1.5
    assert out.dtype == np.float32 and out.weak_type
    u8 = jnp.zeros(3, "uint8")
    assert (u8 + 10).dtype == np.uint8
    assert jnp.add(jnp.zeros(2, "uint32"), jnp.zeros(2, "int32")).dtype == np.int32
    assert jnp.add(jnp.zeros(2, "int8"), 1.0).dtype == np.float32
    with pytest.warns(UserWarning, match="float64 requested in zeros is not available"):
        assert jnp.zeros(2, "float64").dtype == np.float32
    assert (jnp.zeros(2, "float16") + 2.0).dtype == np.float16


@pytest.mark.parametrize("make, function", [
    (lambda: jnp.zeros(2, jnp.float64), "zeros"), (lambda: jnp.ones(2, "int64"), "ones"),
    (lambda: jnp.full(2, 1.0, jnp.float64), "full"),
    (lambda: jnp.array([1.0], jnp.float64), "array"),
    (lambda: jnp.asarray([1.0], dtype="float64"), "asarray"),
    (lambda: jnp.ones(2).astype(jnp.float64), "astype"),
    (lambda: jnp.arange(3, dtype=jnp.int64), "arange"),
    (lambda: jnp.zeros_like(jnp.ones(2), jnp.complex128), "zeros_like"),
    (lambda: jnp.eye(2, dtype=jnp.float64), "eye"),
    (lambda: jnp.linspace(0, 1, 3, dtype=jnp.float64), "linspace"),
    (lambda: jnp.sum(jnp.ones(2), dtype=jnp.float64), "sum"),
    (lambda: jnp.mean(jnp.ones(2), dtype=jnp.float64), "mean"),
    (lambda: jnp.cumsum(jnp.ones(2), dtype=jnp.uint64), "cumsum"),
])
def test_a_64_bit_dtype_asked_for_without_x64_warns_that_it_is_truncated(make, function):
    """JAX's warning, naming the function, where a user asks for a 64-bit dtype with x64
    off: the values are rounded to 32 bits. Nothing warns under x64, or for the 32-bit
    types a NumPy float64 array or a Python float become without being asked."""
    with pytest.warns(UserWarning, match=rf"Explicitly requested dtype \w+(64|128) requested "
                                         rf"in {function} is not available, and will be "
                                         r"truncated to dtype \w+(32|64)\."):
        make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with nbjax.enable_x64(True):
            make()
        jnp.asarray(np.ones(2)), jnp.asarray(1.0), jnp.zeros(2, jnp.float32)
        jnp.zeros(2, float), jnp.asarray([1], int), jnp.ones(2, complex)


def test_x64_flag_changes_defaults(x64):
    assert jnp.zeros(2, "float64").dtype == np.float64
    assert jnp.add(1, 2).dtype == np.int64
    assert (jnp.zeros(3, "int32") + 1.5).dtype == np.float64


def test_promotion_follows_x64_switched_mid_session():
    """``promote`` remembers its answers per ``enable_x64``: switching the flag back and
    forth gives each setting's answer, never the other's remembered one."""
    pairs = ((dtypes.int32, False), (dtypes.int32, True))
    weak_float = ((dtypes.float32, True),)
    assert dtypes.promote(*pairs) == (np.int32, False)
    assert dtypes.promote(*weak_float) == (np.float32, True)
    with nbjax.enable_x64(True):
        assert dtypes.promote(*pairs) == (np.int32, False)
        assert dtypes.promote(*weak_float) == (np.float64, True)
        assert dtypes.promote((dtypes.int64, False)) == (np.int64, False)
    assert dtypes.promote(*weak_float) == (np.float32, True)
    assert dtypes.promote((dtypes.int64, False)) == (np.int32, False)


def test_arrays_made_under_x64_are_canonicalized_after_it():
    """Operands of one type are passed through unchanged (a fast path) only when that type
    promotes to itself: a float64 array made under x64 becomes float32 after it."""
    with nbjax.enable_x64(True):
        a = jnp.ones(2, "float64")
        assert (a + a).dtype == np.float64
    assert (a + a).dtype == np.float32
    assert jnp.sin(a).dtype == np.float32
    jaxpr = nbjax.make_jaxpr(lambda x: x * x)(a)
    assert "convert_element_type" in str(jaxpr)


def test_promote_types_and_errors():
    assert jnp.promote_types("int8", "uint8") == np.int16
    assert jnp.promote_types(np.float16, np.int32) == np.float16
    with pytest.raises(TypeError, match="not supported"):
        dtypes.check_supported("datetime64[s]")


def test_python_int_overflow_raises():
    with pytest.raises(OverflowError, match="int32"):
        jnp.add(jnp.zeros(2, "int32"), 2**40)


def _fully_promoted(*args):
    """jnp's promotion spelled out from its parts, without its shortcuts: the result type,
    then every operand made an array and converted to it."""
    from nbjax import lax
    from nbjax.numpy import util
    dtype, weak = util.result_type(*args)
    return util.promote_shapes("add", *(lax.convert_element_type(util.to_array(a), dtype,
                                                                 weak_type=weak)
                                        for a in args))


@pytest.mark.parametrize("array,scalar", [
    ("float32", 2.0), ("float32", 2), ("float32", np.float32(2.5)), ("float32", np.float64(2.5)),
    ("float16", 2.0), ("float16", 1e6), ("int32", 3), ("int32", True), ("uint8", 7),
    ("int8", 2.5), ("float32", 1j), ("weak", 2.0), ("weak", np.float32(2.0)),
    ("float64", np.float32(2.0)), ("float32", 2 ** 24), ("float32", -2 ** 24 - 1),
    ("float16", 2049), ("bfloat16", 255), ("bfloat16", 257), ("float8_e4m3fn", 17),
    ("uint8", 255), ("uint8", 300), ("int8", -129), ("uint32", 2 ** 31 + 1), ("int4", 7)])
@pytest.mark.parametrize("bits64", [False, True])
def test_promotion_of_arrays_with_scalars_matches_the_full_rules(array, scalar, bits64):
    """Arrays of one type with Python numbers or NumPy scalars take a shortcut through
    promotion; each operand comes out as the full promotion makes it (dtype, weak type,
    value, or error), also when the scalar's type wins or must be converted."""
    from nbjax.numpy import util
    with nbjax.enable_x64(bits64):
        x = jnp.asarray(1.5) if array == "weak" else jnp.ones(3, array)
        _check_promoted_alike(util, x, scalar)


def _check_promoted_alike(util, x, scalar):
    for args in ((x, scalar), (scalar, x), (x, x, scalar)):
        try:
            want = _fully_promoted(*args)
        except OverflowError as e:  # (a Python int the default int cannot hold)
            with pytest.raises(OverflowError, match=str(e)):
                util.promote_args("add", *args)
            continue
        got = util.promote_args("add", *args)
        for g, w in zip(got, want):
            assert (g.dtype, g.weak_type, g.shape) == (w.dtype, w.weak_type, w.shape)
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("bits64", [False, True])
def test_strict_promotion_is_not_skipped_by_the_scalar_shortcut(bits64):
    """A Python bool is a strong type and a NumPy scalar of another dtype a strong operand:
    under strict promotion both still raise, as the full rules say."""
    with nbjax.enable_x64(bits64), nbjax.numpy_dtype_promotion("strict"):
        with pytest.raises(dtypes.TypePromotionError):
            jnp.zeros(2, "int32") + True
        with pytest.raises(dtypes.TypePromotionError):
            jnp.zeros(2, "float32") + np.float16(1)
        assert (jnp.zeros(2, "float32") + 1.0).dtype == np.float32

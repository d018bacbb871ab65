"""lax's n-ary element-wise functions require their operands to have one dtype, as JAX's do.

Only ``jax.numpy`` promotes. A Python scalar is not given the other operand's dtype: it has its
own default one (int32, float32, complex64, bool; 64-bit with x64), weakly, so
``lax.add(float32_array, 2.0)`` works and ``lax.add(float16_array, 2.0)`` or
``lax.add(float32_array, 2)`` raise. NumPy scalars and arrays keep their (canonical) dtype.

Each case's outcome is derived from that rule (``expected``); ``test_rule_is_jax`` checks the
rule itself against JAX when JAX is installed.
"""

import itertools
import re

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.core import dtypes

F16, F32, I8, I32, U8, C64, BOOL = (np.dtype(d) for d in (
    "float16", "float32", "int8", "int32", "uint8", "complex64", "bool"))

# name -> (the name in JAX's message, array dtypes the op accepts, Python scalars it accepts).
# Operands are drawn from what the op accepts, so the only question is whether dtypes agree.
BINARY = {
    "add": ("add", [F16, F32, I8, I32, U8, C64], [2, 2.5, 2j]),
    "sub": ("sub", [F16, F32, I8, U8, C64], [2, 2.5, 2j]),
    "mul": ("mul", [F16, F32, I32, U8, C64], [2, 2.5, 2j]),
    "div": ("div", [F16, F32, I8, I32, C64], [2, 2.5]),
    "rem": ("rem", [F16, F32, I8, I32], [2, 2.5]),
    "max": ("max", [F16, F32, I8, I32, U8], [2, 2.5]),
    "min": ("min", [F16, F32, I32], [2, 2.5]),
    "eq": ("eq", [F16, F32, I8, I32, BOOL, C64], [2, 2.5, True]),
    "ne": ("ne", [F32, I32, BOOL], [2, 2.5, True]),
    "lt": ("lt", [F16, F32, I8, I32, U8], [2, 2.5]),
    "ge": ("ge", [F16, F32, I32], [2, 2.5]),
    "atan2": ("atan2", [F16, F32], [2.5]),
    "nextafter": ("nextafter", [F16, F32], [2.5]),
    "bitwise_and": ("and", [I8, I32, U8, BOOL], [2, True]),
    "bitwise_or": ("or", [I8, I32, BOOL], [2, True]),
    "bitwise_xor": ("xor", [I32, U8, BOOL], [2, True]),
    "shift_left": ("shift_left", [I8, I32, U8], [2]),
    "shift_right_logical": ("shift_right_logical", [I8, I32, U8], [2]),
    "shift_right_arithmetic": ("shift_right_arithmetic", [I8, I32], [2]),
    "complex": ("complex", [F32], [2.5]),
    "igamma": ("igamma", [F16, F32], [2.5]),
    "igammac": ("igammac", [F32], [2.5]),
    "zeta": ("zeta", [F32], [2.5]),
    "random_gamma_grad": ("random_gamma_grad", [F32], []),
}


def _operand(kind, dtype_or_scalar):
    """An operand of the case's ``kind``: a (3,)-array, a NumPy scalar or a Python scalar."""
    if kind == "python":
        return dtype_or_scalar
    value = np.full(3 if kind == "array" else (), 2, dtype_or_scalar)
    return value if kind == "array" else value[()]


def _cases():
    for name, (_, arrays, scalars) in BINARY.items():
        for a, b in itertools.product(arrays, repeat=2):
            yield name, (("array", a), ("array", b))
        for a, s in itertools.product(arrays, scalars):
            yield name, (("array", a), ("python", s))
            yield name, (("python", s), ("array", a))
        for s, t in itertools.product(scalars, repeat=2):
            yield name, (("python", s), ("python", t))
        wide = [d for d in map(np.dtype, ("float64", "int64", "complex128"))
                if dtypes.canonicalize(d) in arrays]  # 32-bit once canonicalized
        for a, b in itertools.product(arrays[:2], wide):
            yield name, (("array", a), ("numpy", b))


CASES = list(_cases())


def _ids(case):
    name, operands = case
    return name + "-" + "-".join(f"{k}:{v}" for k, v in operands)


def expected(name, operands):
    """What the rule says: the result's (dtype, weak_type), or the TypeError's message."""
    dts, weak = [], []
    for kind, value in operands:
        if kind == "python":
            dt, w = dtypes.python_scalar_dtype(value)
            dts.append(np.dtype(dt))
            weak.append(w)
        else:
            dts.append(np.dtype(dtypes.canonicalize(np.dtype(value))))
            weak.append(False)
    if len(set(dts)) > 1:
        error_name = BINARY[name][0]
        return None, (f"lax.{error_name} requires arguments to have the same dtypes, got "
                      f"{', '.join(d.name for d in dts)}.")
    out = dts[0]
    if name in ("eq", "ne", "lt", "ge"):
        out = BOOL
    elif name == "complex":
        out = np.dtype(np.result_type(out, np.complex64))
    return (out, all(weak)), None


def _run(module, name, operands):
    """``module.name(*operands)``: ('ok', dtype, weak_type) or ('error', type, message)."""
    try:
        out = getattr(module, name)(*(_operand(k, v) for k, v in operands))
    except (TypeError, ValueError) as e:
        return "error", type(e).__name__, str(e)
    return "ok", np.dtype(out.dtype), bool(out.weak_type)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_binary(case):
    name, operands = case
    result, message = expected(name, operands)
    got = _run(lax, name, operands)
    if message is None:
        assert got == ("ok",) + result
    else:
        assert got[:2] == ("error", "TypeError"), got
        assert got[2].startswith(message), got[2]


def test_message_names_the_promoting_jnp_function():
    """As in JAX, the message points to the jnp function that promotes, where there is one."""
    with pytest.raises(TypeError, match=re.escape(
            "lax.mul requires arguments to have the same dtypes, got float16, float32. (Tip: "
            "jnp.multiply is a similar function that does automatic type promotion on inputs).")):
        lax.mul(np.ones(3, F16), 2.0)
    with pytest.raises(TypeError, match=r"got int32, float32\.$"):
        lax.lt(1, 1.0)


# --- ops with more operands, or their own rules ----------------------------------------------

A16, A32, AI32 = np.ones(3, F16), np.ones(3, F32), np.ones(3, I32)


@pytest.mark.parametrize("call,dtype", [
    (lambda: lax.clamp(0.0, A32, 3.0), F32),
    (lambda: lax.clamp(A16, A16, A16), F16),
    (lambda: lax.clamp(0, AI32, 3), I32),
    (lambda: lax.select_n(True, 1.0, 2.0), F32),
    (lambda: lax.select_n(AI32 > 0, A16, A16), F16),
    (lambda: lax.select_n(AI32, A32, A32), F32),
    (lambda: lax.pow(A32, 2), F32),
    (lambda: lax.pow(A32, 2.0), F32),
    (lambda: lax.pow(A16, AI32), F16),
    (lambda: lax.pow(np.ones(3, C64), AI32), C64),
    (lambda: lax.betainc(A32, 1.5, A32), F32),
])
def test_nary_accepts_equal_dtypes(call, dtype):
    assert call().dtype == dtype


@pytest.mark.parametrize("call,message", [
    (lambda: lax.clamp(0, A32, 1), "lax.clamp requires arguments to have the same dtypes, got "
                                   "int32, float32, int32."),
    (lambda: lax.clamp(0.0, A16, 1.0), "lax.clamp requires arguments to have the same dtypes, "
                                       "got float32, float16, float32."),
    (lambda: lax.select_n(AI32 > 0, A32, AI32), "lax.select requires arguments to have the "
                                                "same dtypes, got float32, int32."),
    (lambda: lax.select_n(True, 1, 2.0), "lax.select requires arguments to have the same "
                                         "dtypes, got int32, float32."),
    (lambda: lax.betainc(A32, A16, A32), "lax.regularized_incomplete_beta requires arguments "
                                         "to have the same dtypes, got float32, float16, "
                                         "float32."),
    (lambda: lax.pow(A16, 2.0), "the first argument to pow must have an inexact dtype"),
    (lambda: lax.pow(np.ones(3, C64), 2.0), "two inexact dtypes must match, but got complex64 "
                                            "and float32"),
    (lambda: lax.polygamma(1, A32), "polygamma does not accept dtype int32 at position 0"),
])
def test_nary_rejects_mixed_dtypes(call, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        call()


def test_x64_python_scalars_are_64_bit(x64):
    """With x64 on, a Python float is float64: it no longer matches a float32 array."""
    assert lax.add(np.ones(3), 2.0).dtype == np.float64
    with pytest.raises(TypeError, match="got float32, float64"):
        lax.add(A32, 2.0)
    with pytest.raises(TypeError, match="got int32, int64"):
        lax.add(AI32, 2)


def test_jnp_still_promotes():
    """jnp promotes first and calls lax with equal dtypes: weak scalars take the array's."""
    import nbjax.numpy as jnp
    assert jnp.add(A16, 2.0).dtype == F16
    assert jnp.multiply(np.ones(3, I8), 2).dtype == I8
    assert jnp.add(AI32, A32).dtype == F32
    assert jnp.where(AI32 > 0, A16, 1.0).dtype == F16


def test_jit_traces_the_same_check():
    with pytest.raises(TypeError, match="lax.add requires arguments to have the same dtypes"):
        nbjax.jit(lambda x: lax.add(x, 2.0))(A16)
    assert nbjax.jit(lambda x: lax.add(x, 2.0))(A32).dtype == F32


# --- the rule itself, against JAX ------------------------------------------------------------

@pytest.mark.parametrize("case", CASES[::7], ids=_ids)
def test_rule_is_jax(case):
    jax = pytest.importorskip("jax")
    name, operands = case
    got = _run(jax.lax, name, operands)
    result, message = expected(name, operands)
    if message is None:
        assert got == ("ok",) + result
    else:
        assert got[:2] == ("error", "TypeError") and got[2].startswith(message), got
        assert got == _run(lax, name, operands)  # the whole message, Tip included

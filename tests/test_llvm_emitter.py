"""The shared LLVM emitter (nbjax/backends/llvm) is target-neutral: a target's scaffold
chooses how indices are found, where buffers live and how transcendental functions are
computed, and the emitted IR follows. Checked on the IR text (a GPU-like target's code is
not run here), which must also parse and verify as LLVM IR."""

import re

import numpy as np
import pytest

ir = pytest.importorskip("llvmlite.ir")
llvm = pytest.importorskip("llvmlite.binding")

import nbjax  # noqa: E402
import nbjax.numpy as jnp  # noqa: E402
from nbjax import compiler  # noqa: E402
from nbjax.backends import get_target  # noqa: E402
from nbjax.backends.llvm import (I64, LIBM, KernelScaffold, MathNames,  # noqa: E402
                                 define_kernel)

# What a CUDA target would choose: libdevice for every function, sqrt as an intrinsic.
LIBDEVICE = MathNames(inline=frozenset(), intrinsics=frozenset({"sqrt"}), prefix="__nv_")


class ThreadScaffold(KernelScaffold):
    """A GPU-like scaffold: one element per thread, whose flat index is the one argument
    after the buffers (a GPU would read it from its thread-id registers), buffers in
    address space 1."""

    address_space = 1
    extra_args = (I64,)

    def __init__(self, math):
        self.math = math

    def emit(self, emitter, args):
        b, (flat,) = emitter.b, args
        index = []
        for n in reversed(emitter.kernel.shape):
            index.insert(0, b.urem(flat, ir.Constant(I64, n)))
            flat = b.udiv(flat, ir.Constant(I64, n))
        emitter.emit_body(index)


def _kernel(f, *args):
    """The one loop kernel the CPU target's planner makes of ``f`` (nothing compiled)."""
    optimised = compiler.optimized(nbjax.make_jaxpr(f)(*args))[0]
    (group,) = compiler.plan(optimised.jaxpr, get_target("cpu")).groups
    return group.kernel


def _ir(kernel, math):
    module = ir.Module(name="t")
    define_kernel(module, kernel, ThreadScaffold(math))
    text = str(module)
    llvm.parse_assembly(text).verify()
    return text


def _callees(text):
    return set(re.findall(r'call [^@]*@"?([\w.]+)"?\(', text))


def _mixed(x, y):
    return jnp.exp(x) + jnp.log1p(jnp.abs(y)) * jnp.sin(x) + jnp.arctan2(x, y) \
        + jnp.sqrt(jnp.abs(x))


@pytest.mark.parametrize("dtype, f", [(np.float32, "f"), (np.float64, ""),
                                      (np.float16, "f")])
def test_a_math_policy_of_external_functions_calls_them_instead_of_the_inline_library(
        dtype, f, x64):
    x = np.ones((3, 5), dtype)
    kernel = _kernel(_mixed, x, x)
    text = _ir(kernel, LIBDEVICE)
    width = {np.float32: "f32", np.float64: "f64", np.float16: "f32"}[dtype]
    assert _callees(text) >= {f"__nv_exp{f}", f"__nv_log1p{f}", f"__nv_sin{f}",
                              f"__nv_atan2{f}", f"llvm.sqrt.{width}"}
    assert not any(name.startswith("nbjax_mathlib") for name in re.findall(r"@(\w+)", text))
    assert "addrspace(1)*" in text and "float*" not in text.replace("addrspace(1)*", "")


def test_the_cpu_policy_inlines_what_the_math_library_has_and_calls_libm_for_the_rest():
    x = np.ones((3, 5), np.float32)
    text = _ir(_kernel(_mixed, x, x), LIBM)
    callees = _callees(text)
    assert "atan2f" in callees and "llvm.sqrt.f32" in callees
    assert not callees & {"expf", "log1pf", "sinf", "llvm.exp.f32", "llvm.sin.f32"}
    assert not any(name.startswith("__nv_") for name in callees)
    # sin's range reduction reads mathlib's table of 2/pi.
    assert "nbjax_mathlib_rem_pio2" in text


def test_only_the_math_differs_between_policies():
    """Loads, arithmetic and stores of a body without math are the same under any policy,
    and the index the scaffold computes reaches the loads and stores."""
    x = np.ones((4, 6), np.float32)
    kernel = _kernel(lambda x, y: x[:, ::-1] * 2.0 - y.T.T, x, x)
    assert _ir(kernel, LIBM) == _ir(kernel, LIBDEVICE)
    text = _ir(kernel, LIBM)
    assert text.count("urem i64") == 2 and text.count("store float") == 1

"""Complex numbers in compiled code: the compiler computes them on their real and imaginary
parts (``compiler.complex_parts``, rules in ``lax.complex_parts``), in kernels, with no step
calling back into Python; results against NumPy in complex128 and the reference backend."""

import contextlib
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.compiler import optimize
from nbjax.core import eval_closed_jaxpr

from helpers import assert_close, cpu_and_reference

RNG = np.random.default_rng(7)


def _complex(shape, dtype, scale=1.0):
    z = RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)
    return (z * scale).astype(dtype)


def _compiled(fn, *args):
    """The cpu executable of ``fn`` and its results; no warning may be raised (no step
    falls back to the reference backend)."""
    cpu, _ = cpu_and_reference(fn, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = cpu.run(*args)
    return cpu, outs


@contextlib.contextmanager
def _on_the_reference_backend():
    previous = nbjax.config.jit_backend
    nbjax.config.update("jit_backend", "reference")
    try:
        yield
    finally:
        nbjax.config.update("jit_backend", previous)


def _steps(cpu):
    return [g.kind for g in cpu.plan.groups]


# Each function with a complex-parts rule, and NumPy's complex128 value of it (the truth).
UNARY = {
    "exp": (lax.exp, np.exp), "log": (lax.log, np.log), "sqrt": (lax.sqrt, np.sqrt),
    "rsqrt": (lax.rsqrt, lambda z: 1 / np.sqrt(z)), "sin": (lax.sin, np.sin),
    "cos": (lax.cos, np.cos), "tan": (lax.tan, np.tan), "sinh": (lax.sinh, np.sinh),
    "cosh": (lax.cosh, np.cosh), "tanh": (lax.tanh, np.tanh),
    "expm1": (lax.expm1, np.expm1),
    "log1p": (lax.log1p, lambda z: np.log(1 + z)),  # (NumPy's complex log1p is log(1 + z))
    "sign": (lax.sign, lambda z: np.where(z == 0, 0, z / np.abs(z))),
    "asin": (lax.asin, np.arcsin), "acos": (lax.acos, np.arccos), "atan": (lax.atan, np.arctan),
    "asinh": (lax.asinh, np.arcsinh), "acosh": (lax.acosh, np.arccosh),
    "atanh": (lax.atanh, np.arctanh),
    "square": (lax.square, np.square), "abs": (lax.abs, np.abs), "exp2": (lax.exp2, np.exp2),
    "real": (lax.real, np.real), "imag": (lax.imag, np.imag),
    "conj": (lax.conj, np.conj), "neg": (lax.neg, np.negative),
    "cube": (lambda z: lax.integer_pow(z, 3), lambda z: z ** 3),
    "inverse square": (lambda z: lax.integer_pow(z, -2), lambda z: z ** -2.0),
    "power 0": (lambda z: lax.integer_pow(z, 0), lambda z: np.ones_like(z)),
    "sum": (lambda z: lax.reduce_sum(z, (0,)), lambda z: z.sum(0)),
    "cumsum": (lambda z: lax.cumsum(z, z.ndim - 1), lambda z: np.cumsum(z, -1)),
    "reverse": (lambda z: lax.rev(z, (z.ndim - 1,)), lambda z: z[..., ::-1]),
    "transpose": (lambda z: z.T, lambda z: z.T),
    "to bool": (lambda z: z.astype(bool), lambda z: z != 0),
    "widened": (lambda z: lax.convert_element_type(z, np.complex128), lambda z: z),
    "pad": (lambda z: lax.pad(z, lax.convert_element_type(1 - 2j, z.dtype),
                              [(1, 0, 1)] * (z.ndim - 1) + [(0, 2, 0)]),
            lambda z: np.pad(z, [(1, 0)] * (z.ndim - 1) + [(0, 2)], constant_values=1 - 2j)
            if z.ndim == 1 else None),
}
BINARY = {
    "add": (lax.add, np.add), "sub": (lax.sub, np.subtract), "mul": (lax.mul, np.multiply),
    "div": (lax.div, np.divide), "eq": (lax.eq, np.equal), "ne": (lax.ne, np.not_equal),
    "select": (lambda a, b: lax.select(lax.real(a) > 0, a, b),
               lambda a, b: np.where(a.real > 0, a, b)),
    "complex": (lambda a, b: lax.complex(lax.real(a), lax.imag(b)),
                lambda a, b: a.real + 1j * b.imag),
    "pow": (lax.pow, np.power),
    "max": (lax.max, lambda a, b: np.where(_lexicographic_greater(a, b), a, b)),
    "min": (lax.min, lambda a, b: np.where(_lexicographic_greater(b, a), a, b)),
}


def _lexicographic_greater(a, b):
    return np.where(a.real == b.real, a.imag > b.imag, a.real > b.real)


def _tolerance(dtype):
    return 2e-6 if np.dtype(dtype) == np.complex64 else 1e-14


@pytest.mark.parametrize("x64", [False, True], ids=["complex64", "complex128"])
@pytest.mark.parametrize("shape", [(4, 5), (), (0, 3), (1,)])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_are_kernels(name, shape, x64):
    if name == "widened" and not x64:
        pytest.skip("complex128 needs x64")
    fn, truth = UNARY[name]
    dtype = np.complex128 if x64 else np.complex64
    with nbjax.enable_x64(x64):
        z = _complex(shape, dtype, 2.0)
        if (name in ("sum", "cumsum", "reverse", "pad") and not shape) or \
                (name == "pad" and len(shape) != 1):
            pytest.skip("needs an axis" if not shape else "NumPy's pad spelt for one axis")
        cpu, (out,) = _compiled(fn, z)
    assert "fallback" not in _steps(cpu)
    want = truth(z.astype(np.complex128))
    assert_close(out, np.asarray(want).astype(out.dtype), rtol=8 * _tolerance(dtype),
                 err_msg=name)


@pytest.mark.parametrize("x64", [False, True], ids=["complex64", "complex128"])
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 1), (1, 5)), ((), (3,))])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_are_kernels(name, shapes, x64):
    fn, truth = BINARY[name]
    dtype = np.complex128 if x64 else np.complex64
    with nbjax.enable_x64(x64):
        a, b = (_complex(s, dtype) for s in shapes)
        if name in ("eq", "ne"):
            b = np.where(RNG.random(b.shape) < 0.5, np.broadcast_to(a, b.shape) if
                         a.shape == b.shape else b, b).astype(dtype)
        if name in ("select", "complex") and a.shape != b.shape:
            pytest.skip("lax.select and lax.complex take operands of one shape here")
        cpu, (out,) = _compiled(fn, a, b)
    assert "fallback" not in _steps(cpu)
    assert_close(out, np.asarray(truth(a.astype(np.complex128), b)).astype(out.dtype),
                 rtol=8 * _tolerance(dtype), err_msg=name)


def _special_values(dtype):
    """Every pair of these parts: zeros of both signs, +-1, +-inf, NaN, huge and tiny ones."""
    huge, tiny = (1e30, 1e-30) if np.dtype(dtype) == np.complex64 else (1e300, 1e-300)
    parts = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, huge, -huge, tiny, -tiny, 2.5]
    return np.array([complex(a, b) for a in parts for b in parts], dtype)


def _assert_same_special_values(got, want, scale, rtol, name):
    """NaNs where the reference has them, infinities of its signs, finite values within
    ``rtol`` of ``scale`` (the operands' size) or of the value."""
    got, want = [x.astype(np.float32) if x.dtype == bool else x for x in (got, want)]
    for g, w in ((got.real, want.real), (got.imag, want.imag)) if np.iscomplexobj(want) \
            else ((got, want),):
        finite = np.isfinite(w)
        tolerance = rtol * np.maximum(np.abs(w), np.where(np.isfinite(scale), scale, 0))
        same = np.where(finite, np.abs(g - w) <= tolerance,
                        (np.isnan(g) & np.isnan(w)) | (g == w))
        assert same.all(), (name, got[~same], want[~same])


ELEMENTWISE = sorted(set(UNARY) - {"sum", "cumsum", "reverse", "transpose", "pad", "widened"})


@pytest.mark.parametrize("x64", [False, True], ids=["complex64", "complex128"])
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_unary_functions_agree_with_the_reference_backend_on_special_values(name, x64):
    """Infinities, NaNs, signed zeros, huge and tiny parts: the compiled rules give the
    reference's values (C99's special cases, as glibc computes them for NumPy): exp, sinh and
    tanh of +-inf + NaN i, asin and acos of inf + inf i, atanh of 1 + 1e-30i..."""
    dtype = np.complex128 if x64 else np.complex64
    with nbjax.enable_x64(x64):
        z = _special_values(dtype)
        cpu, ref = cpu_and_reference(UNARY[name][0], z)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (NumPy's invalid-value warnings, in the reference)
            (out,), (want,) = cpu.run(z), ref.run(z)
    _assert_same_special_values(np.asarray(out), np.asarray(want), 0,
                                8 * _tolerance(dtype), name)


@pytest.mark.parametrize("x64", [False, True], ids=["complex64", "complex128"])
@pytest.mark.parametrize("name", ["mul", "div"])
def test_products_and_quotients_agree_with_the_reference_backend_on_special_values(name, x64):
    """Every pair of special values: a product's parts are NumPy's (one product fused into
    each sum), so a part whose other product overflows is infinite, not NaN."""
    dtype = np.complex128 if x64 else np.complex64
    with nbjax.enable_x64(x64):
        z = _special_values(dtype)
        a, b = np.repeat(z, z.size), np.tile(z, z.size)
        cpu, ref = cpu_and_reference(BINARY[name][0], a, b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (out,), (want,) = cpu.run(a, b), ref.run(a, b)
    with np.errstate(all="ignore"):
        scale = np.abs(a) * np.abs(b) if name == "mul" else np.abs(a) / np.abs(b)
    _assert_same_special_values(np.asarray(out), np.asarray(want), scale,
                                8 * _tolerance(dtype), name)


def test_powers_as_xla_computes_them():
    """XLA's polar formula for every exponent, integral ones too (no repeated squaring, as
    NumPy's): 0 to a positive real power 0, anything to the power 0 one, 0 to any other
    power NaN (where NumPy 2 gives 0 for any positive real part); an integer exponent array
    is converted to the base's type. (tests/test_complex_power_fidelity.py: special values.)"""
    x, y = _complex((40,), np.complex64), _complex((40,), np.complex64)
    y[:12] = np.arange(-6, 6)
    y[12:14] = [99, -99]
    x[14:18], y[14:18] = 0, [2.5, 0, -1, 1j]
    y[18] = 0
    x[19] = np.nan
    y[19] = 0
    x[20:22], y[20:22] = 0, [1 + 1j, 2.5 - 1j]
    assert np.isnan(np.asarray(lax.pow(x[20:22], y[20:22]))).all()
    ints = np.arange(-20, 20, dtype=np.int32)
    for fn, args in ((lax.pow, (x, y)), (lambda a: lax.pow(a, ints), (x,))):
        cpu, ref = cpu_and_reference(fn, *args)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            (out,) = cpu.run(*args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (NumPy's invalid-value warning at 0 ** -1)
            (want,) = ref.run(*args)
        finite = np.isfinite(want)
        assert_close(np.where(finite, out, 0), np.where(finite, want, 0), rtol=2e-5)
        assert (np.isnan(out) == np.isnan(want)).all()
    assert "fallback" not in _steps(cpu)


def test_a_fourier_sum_is_one_kernel_between_two_views():
    """A DFT written with exp and a sum: one kernel reading the input's pairs of floats and
    writing the result's, no step calling back (each op was one before)."""
    n = 64
    x = _complex((n,), np.complex64)
    k = np.arange(n)

    def dft(x):
        phase = jnp.exp(-2j * np.pi * jnp.outer(k, k).astype(np.float32) / n)
        return jnp.sum(phase * x[None, :], axis=1)
    cpu, (out,) = _compiled(dft, x)
    assert_close(out, np.fft.fft(x.astype(np.complex128)).astype(np.complex64), rtol=1e-5,
                 scale=np.abs(x).sum())
    assert "fallback" not in _steps(cpu) and "library" not in _steps(cpu)
    assert _steps(cpu) == ["view", "kernel", "view"]


@pytest.mark.parametrize("x64", [False, True], ids=["complex64", "complex128"])
def test_a_complex_matrix_product_is_one_native_blas_call(x64):
    """cgemm or zgemm of the OpenBLAS NumPy calls for complex ``matmul``: the same numbers."""
    dtype = np.complex128 if x64 else np.complex64
    with nbjax.enable_x64(x64):
        a, b = _complex((2, 17, 9), dtype), _complex((9, 5), dtype)
        cpu, (out, total) = _compiled(lambda a, b: (a @ b, jnp.sum(a @ b) * 2), a, b)
    want = np.matmul(a, b)
    assert_close(out, want, rtol=4 * _tolerance(dtype), scale=np.abs(a) @ np.abs(b))
    assert_close(total, want.sum() * 2, rtol=4 * _tolerance(dtype),
                 scale=(np.abs(a) @ np.abs(b)).sum() * 2)
    products = [g for g in cpu.plan.groups if g.kind == "library"]
    assert [g.eqns[0].primitive.name for g in products] == ["dot_general"]
    assert "is a BLAS call" in \
        nbjax.jit(lambda a, b: a @ b).lower(a, b).compile("cpu").as_text()
    assert "fallback" not in _steps(cpu)


def test_a_scan_with_a_complex_carry():
    """A rotating phasor: the loop's body computes on the parts; the carry crosses the
    loop as a complex array."""
    w = np.complex64(np.exp(0.1j) * 0.999)
    z0 = _complex((8,), np.complex64)

    def rotate(z0):
        def step(z, _):
            z = z * w + 0.01j * jnp.conj(z)
            return z, jnp.abs(z)
        return lax.scan(step, z0, None, length=50)
    cpu, ref = cpu_and_reference(rotate, z0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = cpu.run(z0)
    for got, want in zip(outs, ref.run(z0)):
        assert_close(got, want, rtol=1e-5)
    assert "fallback" not in _steps(cpu)


def test_gradients_through_complex_intermediates():
    """grad of a real function of complex values (a spectrum's power), compiled, against
    the reference backend and finite differences."""
    k = np.arange(5, dtype=np.float32)

    def power(t):
        return jnp.sum(jnp.abs(jnp.sum(jnp.exp(1j * t[:, None] * k[None, :]), 0)) ** 2)
    t = np.linspace(0.1, 0.9, 4).astype(np.float32)
    got = nbjax.jit(nbjax.grad(power), backend="cpu")(t)
    want = nbjax.jit(nbjax.grad(power), backend="reference")(t)
    assert_close(got, want, rtol=1e-5)
    with nbjax.enable_x64():
        t64 = t.astype(np.float64)
        eps = 1e-6
        numeric = [(power(t64 + eps * e) - power(t64 - eps * e)) / (2 * eps)
                   for e in np.eye(4)]
    assert_close(got, np.array(numeric, np.float32), rtol=1e-3)


def test_outputs_never_share_the_inputs_buffer():
    """conj(conj(z)) simplifies to z's parts: the output is still a buffer of its own."""
    z = _complex((6,), np.complex64)
    out = nbjax.jit(lambda z: jnp.conj(jnp.conj(z)))(nbjax.numpy.asarray(z))
    np.testing.assert_array_equal(np.asarray(out), z)
    source = nbjax.numpy.asarray(z)
    out = nbjax.jit(lambda z: jnp.conj(jnp.conj(z)))(source)
    assert not np.shares_memory(np.asarray(out), np.asarray(source))


def test_the_rewrites_are_recorded_and_exact_for_sums_and_parts():
    """The pass records each equation it computed on the parts; no complex arithmetic is
    left; for sums, conjugates and parts the optimised jaxpr gives the same bits as the
    traced one on the reference backend (products: within rounding, as NumPy's vector loop
    fuses a multiply and an add)."""
    z, w = _complex((3, 4), np.complex64), _complex((3, 4), np.complex64)

    def f(z, w):
        return (z + w - jnp.conj(z)) + lax.real(w), lax.imag(-z), z * w
    closed = nbjax.make_jaxpr(f)(z, w)
    optimised, rewrites = optimize(closed)
    rules = [r for r in rewrites if r.rule == "complex parts"]
    assert {r.eqn.primitive.name for r in rules} >= {"mul", "sub", "conj", "add", "neg"}
    assert not any(e.primitive.name in ("mul", "add", "conj") and np.iscomplexobj(
        np.empty(0, e.outvars[0].aval.dtype)) for e in optimised.jaxpr.eqns)
    with _on_the_reference_backend():  # (equations of the jaxprs evaluated by NumPy)
        traced, rewritten = [eval_closed_jaxpr(c, z, w) for c in (closed, optimised)]
    for a, b in zip(traced[:2], rewritten[:2]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert_close(rewritten[2], traced[2], rtol=1e-6)


def test_the_fusion_report_names_the_views():
    z = _complex((5,), np.complex64)
    text = nbjax.jit(lambda z: z * z + 1).lower(z).compile("cpu").as_text()
    assert "complex_as_floats: its operand's buffer, read as pairs of floats" in text
    assert "floats_as_complex: its operand's pairs of floats, read as complex" in text
    assert "reference step" not in text


def test_complex_programs_are_kept_in_the_disk_cache(tmp_path, monkeypatch):
    """The views and the complex product pickle with the program: a second compilation of
    the same trace loads it and computes the same."""
    from nbjax.backends import compile
    from nbjax.backends.cpu import cache
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NBJAX_DISABLE_DISK_CACHE", raising=False)
    a, b = _complex((4, 3), np.complex64), _complex((3, 4), np.complex64)

    def f(a, b):
        return jnp.abs(jnp.exp(a) @ b) ** 2, jnp.sum(a * b.T, axis=0)
    first = compile(nbjax.make_jaxpr(f)(a, b), "cpu", "f")
    hits = cache.stats["program hit"]
    second = compile(nbjax.make_jaxpr(f)(a, b), "cpu", "f")
    assert cache.stats["program hit"] == hits + 1
    for got, want in zip(second.run(a, b), first.run(a, b)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert_close(second.run(a, b)[1], (a * b.T).sum(0), rtol=1e-6)

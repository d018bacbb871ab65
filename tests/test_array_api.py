"""nbjax.numpy as a namespace of the Python array API standard (2024.12): every name, the
keyword arguments the standard requires, results against NumPy's own array API functions,
the inspection API, array attributes, DLPack, and a sample of the special cases."""

import inspect
import math

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import dtypes
from helpers import assert_close, staged

RNG = np.random.default_rng(0)

# The names of the 2024.12 standard (as array-api-strict 2.6 lists them).
MAIN_FUNCTIONS = [
    "abs", "acos", "acosh", "add", "all", "any", "arange", "argmax", "argmin", "argsort",
    "asarray", "asin", "asinh", "astype", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "broadcast_arrays", "broadcast_shapes", "broadcast_to", "can_cast", "ceil", "clip",
    "concat", "conj", "copysign", "cos", "cosh", "count_nonzero", "cumulative_prod",
    "cumulative_sum", "diff", "divide", "empty", "empty_like", "equal", "exp", "expand_dims",
    "expm1", "eye", "finfo", "flip", "floor", "floor_divide", "from_dlpack", "full",
    "full_like", "greater", "greater_equal", "hypot", "iinfo", "imag", "isdtype", "isfinite",
    "isin", "isinf", "isnan", "less", "less_equal", "linspace", "log", "log10", "log1p", "log2",
    "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "matmul",
    "matrix_transpose", "max", "maximum", "mean", "meshgrid", "min", "minimum", "moveaxis",
    "multiply", "negative", "nextafter", "nonzero", "not_equal", "ones", "ones_like",
    "permute_dims", "positive", "pow", "prod", "real", "reciprocal", "remainder", "repeat",
    "reshape", "result_type", "roll", "round", "searchsorted", "sign", "signbit", "sin", "sinh",
    "sort", "sqrt", "square", "squeeze", "stack", "std", "subtract", "sum", "take",
    "take_along_axis", "tan", "tanh", "tensordot", "tile", "tril", "triu", "trunc",
    "unique_all", "unique_counts", "unique_inverse", "unique_values", "unstack", "var",
    "vecdot", "where", "zeros", "zeros_like", "__array_namespace_info__"]
LINALG_FUNCTIONS = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
    "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet",
    "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]
FFT_FUNCTIONS = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft",
                 "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64", "float32", "float64", "complex64", "complex128"]
CONSTANTS = {"e": math.e, "pi": math.pi, "inf": math.inf}

# Parameters the standard makes keyword-only: they must be accepted by keyword.
KEYWORDS = {
    "all": ["axis", "keepdims"], "any": ["axis", "keepdims"], "arange": ["dtype", "device"],
    "argmax": ["axis", "keepdims"], "argmin": ["axis", "keepdims"],
    "argsort": ["axis", "descending", "stable"], "asarray": ["dtype", "device", "copy"],
    "astype": ["copy", "device"], "concat": ["axis"], "count_nonzero": ["axis", "keepdims"],
    "cumulative_prod": ["axis", "dtype", "include_initial"],
    "cumulative_sum": ["axis", "dtype", "include_initial"],
    "diff": ["axis", "n", "prepend", "append"], "empty": ["dtype", "device"],
    "empty_like": ["dtype", "device"], "eye": ["k", "dtype", "device"], "flip": ["axis"],
    "from_dlpack": ["device", "copy"], "full": ["dtype", "device"],
    "full_like": ["dtype", "device"], "isin": ["invert"],
    "linspace": ["dtype", "device", "endpoint"], "max": ["axis", "keepdims"],
    "mean": ["axis", "keepdims"], "meshgrid": ["indexing"], "min": ["axis", "keepdims"],
    "ones": ["dtype", "device"], "ones_like": ["dtype", "device"],
    "prod": ["axis", "dtype", "keepdims"], "repeat": ["axis"], "reshape": ["copy"],
    "roll": ["axis"], "searchsorted": ["side", "sorter"],
    "sort": ["axis", "descending", "stable"], "stack": ["axis"],
    "std": ["axis", "correction", "keepdims"], "sum": ["axis", "dtype", "keepdims"],
    "take": ["axis"], "take_along_axis": ["axis"], "tensordot": ["axes"], "tril": ["k"],
    "triu": ["k"], "unstack": ["axis"], "var": ["axis", "correction", "keepdims"],
    "vecdot": ["axis"], "zeros": ["dtype", "device"], "zeros_like": ["dtype", "device"],
    "fft.fft": ["n", "axis", "norm"], "fft.ifft": ["n", "axis", "norm"],
    "fft.fftn": ["s", "axes", "norm"], "fft.ifftn": ["s", "axes", "norm"],
    "fft.rfft": ["n", "axis", "norm"], "fft.irfft": ["n", "axis", "norm"],
    "fft.rfftn": ["s", "axes", "norm"], "fft.irfftn": ["s", "axes", "norm"],
    "fft.hfft": ["n", "axis", "norm"], "fft.ihfft": ["n", "axis", "norm"],
    "fft.fftfreq": ["d", "dtype", "device"], "fft.rfftfreq": ["d", "dtype", "device"],
    "fft.fftshift": ["axes"], "fft.ifftshift": ["axes"],
    "linalg.cholesky": ["upper"], "linalg.cross": ["axis"], "linalg.diagonal": ["offset"],
    "linalg.matrix_norm": ["keepdims", "ord"], "linalg.matrix_rank": ["rtol"],
    "linalg.pinv": ["rtol"], "linalg.qr": ["mode"], "linalg.svd": ["full_matrices"],
    "linalg.tensordot": ["axes"], "linalg.trace": ["offset", "dtype"],
    "linalg.vecdot": ["axis"], "linalg.vector_norm": ["axis", "keepdims", "ord"],
}

_LINALG_WRITTEN = hasattr(jnp.linalg, "__all__") and bool(jnp.linalg.__all__)
_needs_linalg = pytest.mark.skipif(not _LINALG_WRITTEN,
                                   reason="nbjax.numpy.linalg is not written yet")


def _resolve(qualified):
    """``"fft.rfft"`` -> ``jnp.fft.rfft``; a bare name is looked up in ``jnp`` itself."""
    obj = jnp
    for part in qualified.split("."):
        obj = getattr(obj, part)
    return obj


def _is_stub(fn):
    """nbjax.numpy answers unknown NumPy names with a stub that raises NotImplementedError."""
    return getattr(fn, "__qualname__", "").startswith("not_implemented.")


# --- every name exists ---------------------------------------------------------------------

@pytest.mark.parametrize("name", MAIN_FUNCTIONS + [f"fft.{n}" for n in FFT_FUNCTIONS])
def test_standard_function_exists(name):
    fn = _resolve(name)
    assert callable(fn) and not _is_stub(fn), name


@_needs_linalg
@pytest.mark.parametrize("name", LINALG_FUNCTIONS)
def test_standard_linalg_function_exists(name):
    fn = getattr(jnp.linalg, name)
    assert callable(fn) and not _is_stub(fn), name


def test_constants_dtypes_and_version():
    assert jnp.__array_api_version__ == "2024.12"
    for name, value in CONSTANTS.items():
        assert getattr(jnp, name) == value
    assert math.isnan(jnp.nan) and jnp.newaxis is None
    for name in DTYPE_NAMES:
        assert np.dtype(getattr(jnp, name)) == np.dtype(name)
    assert jnp.bool(True).dtype == np.bool_


@pytest.mark.parametrize("name", sorted(KEYWORDS))
def test_keyword_arguments_of_the_standard_are_accepted(name):
    if name.startswith("linalg.") and not _LINALG_WRITTEN:
        pytest.skip("nbjax.numpy.linalg is not written yet")
    params = inspect.signature(_resolve(name)).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return  # forwards **kwargs
    for kw in KEYWORDS[name]:
        assert kw in params and params[kw].kind != params[kw].POSITIONAL_ONLY, (name, kw)


# --- results against NumPy's implementation of the standard --------------------------------

def _f(shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


X = _f((3, 4))
I = RNG.integers(-5, 5, size=(3, 4)).astype(np.int32)
U = RNG.integers(0, 8, size=(6,)).astype(np.int32)
S = np.sort(_f((5,)))

# (name, positional args, keyword args[, reference]): called on nbjax.numpy and on NumPy
# (the same name, unless a reference function is given).
CALLS = [
    ("permute_dims", (X,), {"axes": (1, 0)}),
    ("concat", ([X, X],), {"axis": 1}),
    ("concat", ([X, X],), {"axis": None}),
    ("cumulative_sum", (X,), {"axis": 1, "include_initial": True}),
    ("cumulative_sum", (I,), {"axis": 0}),
    ("cumulative_prod", (X,), {"axis": 0, "include_initial": True}),
    ("astype", (X, np.int32), {"copy": True}),
    ("result_type", (np.int8, np.float32), {}),
    ("take_along_axis", (X, np.argsort(X, axis=1)), {"axis": 1}),
    ("searchsorted", (S, X[0]), {"side": "right"}),
    ("clip", (X,), {"min": -0.5, "max": 0.5}),
    ("copysign", (X, -X), {}),
    ("hypot", (X, X[::-1]), {}),
    ("logaddexp", (X, X[::-1]), {}),
    ("nextafter", (X, np.float32(0)), {}),
    ("reciprocal", (X,), {}),
    ("signbit", (X,), {}),
    ("diff", (X,), {"axis": 0, "n": 2}),
    ("diff", (I,), {"prepend": 0, "append": I[:, :1]}),
    ("count_nonzero", (I,), {"axis": 1, "keepdims": True}),
    ("tile", (X, (2, 1)), {}),
    ("unstack", (X,), {"axis": 1}),
    ("moveaxis", (X[None], 0, 2), {}),
    ("repeat", (X, 2), {"axis": 0}),
    ("meshgrid", (S, X[0]), {"indexing": "ij"}),
    ("matrix_transpose", (X[None],), {}),
    ("vecdot", (X, X[::-1]), {"axis": 0}),
    ("tensordot", (X, X.T), {"axes": ([1], [0])}),
    ("sort", (X,), {"axis": 0, "descending": True, "stable": True},
     lambda x, axis, **_: -np.sort(-x, axis=axis)),
    ("argsort", (I,), {"axis": 1, "descending": True},  # stable: ties keep their order
     lambda x, axis, **_: np.argsort(-x, axis=axis, stable=True)),
    ("std", (X,), {"axis": 0, "correction": 1}),
    ("var", (X,), {"correction": 1.5, "keepdims": True}),
    ("linspace", (0, 1), {"num": 5, "endpoint": False}),
    ("eye", (3, 4), {"k": 1}),
    ("sum", (I,), {"axis": 1, "dtype": np.float32}),
    ("prod", (X,), {"axis": 1, "keepdims": True}),
    ("max", (X,), {"axis": 0, "keepdims": True}),
    ("reshape", (X, (2, 6)), {"copy": None}),
    ("roll", (X, 1), {"axis": 1}),
    ("squeeze", (X[None],), {"axis": 0}),
    ("stack", ([X, X],), {"axis": 2}),
    ("flip", (X,), {"axis": (0, 1)}),
    ("take", (X, np.array([2, 0])), {"axis": 1}),
    ("isin", (U, U[:3]), {"invert": True}),
    ("unique_values", (U,), {}, np.unique),  # NumPy's own result is not sorted
    ("unique_counts", (U,), {}),
    ("unique_inverse", (U,), {}),
    ("unique_all", (U,), {}),
    ("bitwise_left_shift", (I, np.int32(2)), {}),
    ("bitwise_right_shift", (I, np.int32(1)), {}),
    ("bitwise_invert", (I,), {}),
    ("isdtype", (np.dtype(np.int8), ("real floating", "signed integer")), {}),
    ("can_cast", (np.int8, np.float32), {}),
    ("broadcast_shapes", ((3, 1), (1, 4)), {}),
    ("nonzero", (I,), {}),
    ("where", (X > 0, X, np.float32(0)), {}),
    ("trunc", (X * 3,), {}),
    ("round", (X * 3,), {}),
    ("sign", (X,), {}),
    ("pow", (np.abs(X), X), {}),
]


def _canonical(dtype):
    return dtypes.canonicalize(np.dtype(dtype)) if np.dtype(dtype) != np.float16 else dtype


def _assert_matches(got, want):
    if isinstance(want, (tuple, list)):  # includes the unique_* named tuples
        assert len(got) == len(want)
        if hasattr(want, "_fields"):
            assert tuple(got._fields) == tuple(want._fields)
        for g, w in zip(got, want):
            _assert_matches(g, w)
        return
    if isinstance(want, (bool, int, np.dtype, type)) or want is None:
        assert got == want if not isinstance(want, type) else np.dtype(got) == np.dtype(want)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == _canonical(want.dtype), (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("call", CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)])
def test_results_match_numpy_array_api(call):
    name, args, kwargs = call[:3]
    reference = call[3] if len(call) > 3 else getattr(np, name)
    want = reference(*args, **kwargs)
    got = getattr(jnp, name)(*args, **kwargs)
    _assert_matches(got, want)


def test_isdtype_kinds_and_errors():
    assert jnp.isdtype(np.float32, "real floating")
    assert not jnp.isdtype(np.float32, "complex floating")
    assert jnp.isdtype(np.uint8, "integral") and not jnp.isdtype(np.bool_, "numeric")
    assert jnp.isdtype(jnp.complex64, ("bool", jnp.complex64))
    with pytest.raises(ValueError, match="Unrecognized kind"):
        jnp.isdtype(np.float32, "floating-ish")
    with pytest.raises(TypeError, match="Expected kind to be a dtype"):
        jnp.isdtype(np.float32, 3)


def test_diff_and_unstack_edge_cases():
    b = np.array([True, False, False, True])
    np.testing.assert_array_equal(jnp.diff(b), np.diff(b))
    assert jnp.diff(X, n=0) is not None and np.array_equal(jnp.diff(X, n=0), X)
    with pytest.raises(ValueError, match="order must be non-negative"):
        jnp.diff(X, n=-1)
    with pytest.raises(ValueError, match="at least one dimensional"):
        jnp.diff(np.float32(1))
    with pytest.raises(ValueError, match="rank > 0"):
        jnp.unstack(np.float32(1))
    assert_close(staged(lambda a: jnp.diff(a, axis=0), X), np.diff(X, axis=0), rtol=1e-6)
    for empty, kwargs in [(np.zeros((0, 4), np.float32), {"axis": 0}),
                          (np.zeros((3, 0), np.int32), {}), (np.ones((3, 2)), {"n": 3})]:
        want = np.diff(empty, **kwargs)  # (differences past the axis' length: empty)
        got = jnp.diff(empty, **kwargs)
        assert got.shape == want.shape and got.dtype == jnp.asarray(empty).dtype


# --- inspection API ------------------------------------------------------------------------

def test_namespace_info():
    info = jnp.__array_namespace_info__()
    assert info.capabilities() == {"boolean indexing": False, "data-dependent shapes": False,
                                   "max dimensions": 64}
    assert info.default_device() is None
    assert info.devices() == [None] + nbjax.devices()
    assert info.default_dtypes() == {"real floating": np.float32,
                                     "complex floating": np.complex64,
                                     "integral": np.int32, "indexing": np.int32}
    assert set(info.dtypes()) == {"bool", "int8", "int16", "int32", "uint8", "uint16",
                                  "uint32", "float32", "complex64"}
    assert info.dtypes(kind="integral") == {n: np.dtype(n) for n in
                                            ("int8", "int16", "int32", "uint8", "uint16",
                                             "uint32")}
    assert set(info.dtypes(kind=("bool", "real floating"))) == {"bool", "float32"}
    assert info.dtypes(device=None, kind="complex floating") == {"complex64":
                                                                 np.dtype("complex64")}


def test_namespace_info_x64(x64):
    info = jnp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == np.float64
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    assert "uint64" in info.dtypes() and "complex128" in info.dtypes()


# --- array attributes, devices and DLPack --------------------------------------------------

def test_array_namespace_device_and_mT():
    x = jnp.asarray(X)
    assert x.__array_namespace__() is jnp
    assert x.__array_namespace__(api_version="2024.12") is jnp
    with pytest.raises(ValueError, match="api_version='2021.12' is not available"):
        x.__array_namespace__(api_version="2021.12")
    assert x.device == nbjax.devices()[0]
    assert x.to_device(x.device) is x and x.to_device(None) is x
    with pytest.raises(ValueError, match="device must be None or one of"):
        x.to_device("gpu")
    np.testing.assert_array_equal(x[None].mT, np.swapaxes(X[None], -1, -2))


def test_tracers_have_the_namespace_methods():
    def f(a):
        assert a.__array_namespace__() is jnp
        return a.to_device(nbjax.devices()[0]).mT * 2
    np.testing.assert_array_equal(nbjax.vmap(f)(X[None]), 2 * X.T[None])


def test_dlpack_round_trip_with_numpy():
    x = jnp.asarray(X)
    assert x.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    y = np.from_dlpack(x)
    np.testing.assert_array_equal(y, X)
    assert np.shares_memory(y, np.asarray(x))  # DLPack 1.0 shares read-only memory
    assert not y.flags.writeable
    z = jnp.from_dlpack(x, copy=False)  # an Array's memory is immutable: shared
    assert np.shares_memory(np.asarray(z), np.asarray(x))
    w = jnp.from_dlpack(X)
    assert isinstance(w, nbjax.Array) and w.dtype == np.float32
    np.testing.assert_array_equal(w, X)
    assert not np.shares_memory(np.asarray(w), X)  # NumPy's memory is writable: copied


def test_dlpack_legacy_consumers_get_a_copy():
    x = jnp.asarray(X)
    capsule = x.__dlpack__()  # no max_version: DLPack 0.x cannot mark read-only memory
    assert "dltensor" in repr(capsule)
    with pytest.raises(BufferError):
        x.__dlpack__(copy=False)


def test_from_dlpack_dtypes_and_copy_rules():
    f64 = np.arange(3.0)
    out = jnp.from_dlpack(f64)
    assert out.dtype == np.float32  # 64-bit data become 32-bit without x64, as in JAX
    with pytest.raises(ValueError, match="copy=False"):
        jnp.from_dlpack(f64, copy=False)
    with pytest.raises(ValueError, match="device must be None"):
        jnp.from_dlpack(f64, device="cpu")
    assert jnp.from_dlpack(f64, device=nbjax.devices()[0]).shape == (3,)


def test_from_dlpack_x64_keeps_float64(x64):
    assert jnp.from_dlpack(np.arange(3.0)).dtype == np.float64


# --- special cases of element-wise functions (jax.numpy follows the standard here) ----------

inf, nan = math.inf, math.nan
SPECIAL_CASES = [
    ("sign", [complex(3, 4)], complex(0.6, 0.8)), ("sign", [complex(0, 0)], complex(0, 0)),
    ("sign", [-0.0], -0.0), ("sign", [nan], nan),
    ("pow", [nan, 0.0], 1.0), ("pow", [1.0, nan], 1.0), ("pow", [-0.0, -3.0], -inf),
    ("pow", [-0.0, -2.0], inf), ("pow", [-inf, 3.0], -inf), ("pow", [-inf, -3.0], -0.0),
    ("pow", [-2.0, 0.5], nan), ("pow", [0.5, inf], 0.0), ("pow", [2.0, -inf], 0.0),
    ("pow", [-1.0, inf], 1.0),
    ("sqrt", [-0.0], -0.0), ("sqrt", [-1.0], nan), ("sqrt", [complex(-4.0, 0.0)], 2j),
    ("log", [0.0], -inf), ("log", [-1.0], nan), ("log", [complex(-0.0, 0.0)],
                                                  complex(-inf, math.pi)),
    ("log1p", [-1.0], -inf), ("log2", [0.0], -inf), ("log10", [inf], inf),
    ("expm1", [-0.0], -0.0), ("exp", [-inf], 0.0), ("exp", [complex(-inf, 0.0)], 0j),
    ("tanh", [inf], 1.0), ("sinh", [-0.0], -0.0), ("cosh", [-inf], inf),
    ("asinh", [-inf], -inf), ("acosh", [1.0], 0.0), ("atanh", [1.0], inf),
    ("atanh", [-1.0], -inf), ("sin", [-0.0], -0.0), ("tan", [-0.0], -0.0), ("cos", [inf], nan),
    ("asin", [2.0], nan), ("acos", [1.0], 0.0), ("atan", [-inf], -math.pi / 2),
    ("atan2", [0.0, -0.0], math.pi), ("atan2", [-0.0, -0.0], -math.pi),
    ("atan2", [inf, -inf], 3 * math.pi / 4),
    ("hypot", [inf, nan], inf), ("copysign", [2.0, -0.0], -2.0),
    ("signbit", [-0.0], True), ("signbit", [nan], False),
    ("abs", [-0.0], 0.0), ("positive", [-0.0], -0.0), ("negative", [0.0], -0.0),
    ("divide", [1.0, -0.0], -inf), ("divide", [0.0, 0.0], nan),
    ("floor_divide", [5.0, -0.0], -inf), ("floor_divide", [-5.0, 0.0], -inf),
    ("floor_divide", [0.0, 0.0], nan),
    ("remainder", [-5.0, 3.0], 1.0), ("remainder", [5.0, -3.0], -1.0),
    ("remainder", [5.0, inf], 5.0),
    ("maximum", [nan, 1.0], nan), ("minimum", [1.0, nan], nan), ("clip", [nan, 0.0, 1.0], nan),
    ("round", [2.5], 2.0), ("round", [-0.5], -0.0), ("trunc", [-0.5], -0.0),
    ("ceil", [-0.5], -0.0), ("floor", [-0.0], -0.0),
    ("logaddexp", [inf, inf], inf), ("logaddexp", [-inf, 1.0], 1.0),
    ("nextafter", [0.0, -1.0], -float(np.finfo(np.float32).smallest_subnormal)),
    ("reciprocal", [-0.0], -inf), ("square", [complex(1, 1)], 2j),
    ("conj", [complex(1.0, -0.0)], complex(1.0, 0.0)), ("real", [complex(nan, 1)], nan),
    ("isfinite", [nan], False), ("equal", [nan, nan], False), ("not_equal", [nan, nan], True),
]


def _same_special_value(got, want):
    """Equal, with NaN equal to NaN and the sign of zero significant."""
    if isinstance(want, complex):
        got = complex(got)
        return _same_special_value(got.real, want.real) and \
            _same_special_value(got.imag, want.imag)
    if isinstance(want, bool):
        return bool(got) == want
    got = float(got)
    if math.isnan(want):
        return math.isnan(got)
    if want == 0:
        return got == 0 and math.copysign(1, got) == math.copysign(1, want)
    return math.isclose(got, want, rel_tol=1e-6)


@pytest.mark.parametrize("name,args,want", SPECIAL_CASES)
def test_special_cases(name, args, want):
    args = [np.complex64(a) if isinstance(a, complex) else np.float32(a) for a in args]
    got = getattr(jnp, name)(*args)
    assert _same_special_value(got, want), (name, args, got, want)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16", "complex64",
                                   "float8_e4m3fn"])
def test_finfo_fields_are_python_floats_with_the_dtypes_values(dtype):
    """The standard asks for Python floats; the values are those of the dtype (JAX's
    ml_dtypes.finfo), exactly."""
    import ml_dtypes
    with nbjax.enable_x64(True):
        got, want = jnp.finfo(dtype), ml_dtypes.finfo(dtype)
    for name in ("eps", "epsneg", "max", "min", "resolution", "smallest_normal",
                 "smallest_subnormal", "tiny"):
        value = getattr(got, name)
        assert type(value) is float and value == float(getattr(want, name)), name
    assert got.dtype == want.dtype and got.bits == want.bits
    assert got.nmant == want.nmant and got.maxexp == want.maxexp
    with pytest.raises(ValueError):
        jnp.finfo(np.int32)

"""Every function of ``nbjax.numpy`` that takes one or two arrays, against ``jax.numpy``'s, on
operands of every kind: float32 and float16 arrays (NaN, infinities and -0.0 among their
values), int32 (its largest), uint8, bool and complex64 arrays, Python floats and ints. The
result must have JAX's dtype, shape and weak type (which decides how it promotes later:
``jnp.hypot(i, 1.5) + float16`` is float32), values within float32's tolerance of JAX's or,
where JAX's differ from NumPy's (complex infinities), of NumPy's, and there must be an error
exactly where JAX raises one. (No INT32_MIN: ``jax.numpy.gcd`` never returns on it.)

This is the sweep that found complex ``less``, boolean shifts, ``cumulative_prod``'s dtype,
``matvec``'s missing core dimension and a dozen weak types. Skipped without JAX, the
reference (``pip install .[bench]``)."""

import inspect
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

jax = pytest.importorskip("jax")
jax_numpy = pytest.importorskip("jax.numpy")

_rng = np.random.default_rng(0)
_f32 = np.concatenate([(_rng.standard_normal(5) * 2), [np.nan, np.inf, -np.inf, -0.0, 0.0]])
OPERANDS = {
    "f32": _f32.astype(np.float32), "f16": _f32.astype(np.float16),
    "i32": np.array([-5, 3, 0, 1, -1, 2, 4, 2 ** 31 - 1, -7, 6], np.int32),
    "u8": np.array([0, 1, 255, 2, 7, 5, 128, 3, 3, 4], np.uint8),
    "bool": _rng.integers(0, 2, 10).astype(bool),
    "c64": (_rng.standard_normal(10) + 1j * _rng.standard_normal(10)).astype(np.complex64),
    "float": 1.5, "int": 3,
}
FIRST = ["f32", "i32", "bool", "float", "int", "u8", "c64"]
SECOND = ["f32", "i32", "float", "int", "u8", "bool"]

# Functions whose required arguments are not (only) arrays of these kinds, or whose results
# are checked elsewhere against NumPy/JAX with the arguments they need.
NOT_SWEPT = {
    # shapes, axes, indices, sizes, dtypes or Python objects as arguments
    "arange", "array", "asarray", "astype", "broadcast_shapes", "broadcast_to", "can_cast",
    "diag_indices", "dtype", "empty", "expand_dims", "eye", "finfo", "full", "full_like",
    "identity", "iinfo", "indices", "isdtype", "issubdtype", "linspace", "logspace",
    "geomspace", "mask_indices", "moveaxis", "ones", "promote_types", "ravel_multi_index",
    "repeat", "reshape", "resize", "result_type", "rollaxis", "roll", "split", "array_split",
    "hsplit", "vsplit", "dsplit", "swapaxes", "take", "take_along_axis", "tile", "tri",
    "tril_indices", "triu_indices", "unravel_index", "zeros", "pad", "put", "put_along_axis",
    "insert", "delete", "choose", "compress", "extract", "place", "fill_diagonal", "select",
    "tril_indices_from", "triu_indices_from", "diag_indices_from", "partition",
    "argpartition", "apply_along_axis", "apply_over_axes", "fromfunction", "frompyfunc",
    "piecewise", "vectorize", "einsum", "einsum_path", "from_dlpack", "frombuffer",
    "fromfile", "fromiter", "fromstring", "load", "save", "savez", "printoptions",
    "set_printoptions", "get_printoptions", "iterable", "ndim", "shape", "size", "ufunc",
    "array_repr", "array_str", "block", "concatenate", "stack", "vstack", "hstack", "dstack",
    "column_stack", "row_stack", "meshgrid", "ix_", "unstack", "lexsort", "sort_complex",
    "histogram", "histogram2d", "histogramdd", "histogram_bin_edges", "bincount",
    "digitize", "searchsorted", "interp", "polyfit", "polyval", "roots", "poly", "polyadd",
    "polysub", "polymul", "polydiv", "polyder", "polyint", "trim_zeros", "unique",
    "unique_all", "unique_counts", "unique_inverse", "unique_values", "nonzero", "argwhere",
    "flatnonzero", "packbits", "unpackbits", "percentile", "quantile", "nanpercentile",
    "nanquantile", "vander", "diagflat", "tensordot", "kron",
    # products and array-shaped operands, compared in their own tests
    "dot", "vdot", "vecdot", "matmul", "inner", "outer", "cross", "matvec", "vecmat",
    "convolve", "correlate", "cov", "corrcoef", "trapezoid", "gradient", "diagonal",
    "diag", "trace", "rot90", "matrix_transpose", "permute_dims", "transpose",
    "setdiff1d", "union1d", "intersect1d", "setxor1d", "in1d", "isin",
}


def _required_positional(fn):
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(p.default is inspect.Parameter.empty and
               p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


def _swept():
    names = []
    for name in sorted(dir(jax_numpy)):
        fn = getattr(jax_numpy, name)
        if name.startswith("_") or name in NOT_SWEPT or isinstance(fn, type) or \
                not callable(fn) or not hasattr(jnp, name):
            continue
        if _required_positional(fn) in (1, 2):
            names.append(name)
    return names


def _call(fn, args, kwargs=None):
    """(result, None) or (None, the exception's type name)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **(kwargs or {})), None
        except Exception as e:  # noqa: BLE001 - compared with JAX's
            return None, type(e).__name__


def _differences(name, args, kwargs=None, what=""):
    """What differs between nbjax's and JAX's ``name(*args, **kwargs)``: results, or
    whether it raises. Where JAX alone raises or its values differ, NumPy's result decides
    (JAX's limitations and complex edge cases are not copied)."""
    want, jax_error = _call(getattr(jax_numpy, name), args, kwargs)
    got, error = _call(getattr(jnp, name), args, kwargs)
    numpy_results = _numpy_results(name, args, kwargs)
    if jax_error is not None and error is None and numpy_results is not None:
        return [f"{name}{what}: {problem}" for problem in _compare_values(got, numpy_results)]
    if (jax_error is None) != (error is None):
        return [f"{name}{what}: jax {jax_error or 'returns'}, nbjax {error or 'returns'}"]
    if error is not None:
        return []
    wants, gots = jax.tree.leaves(want), nbjax.tree_util.tree_leaves(got)
    if len(wants) != len(gots):
        return [f"{name}{what}: {len(gots)} results, jax {len(wants)}"]
    if numpy_results is None or len(numpy_results) != len(wants):
        numpy_results = [None] * len(wants)
    return [f"{name}{what}: {problem}" for w, g, n in zip(wants, gots, numpy_results)
            for problem in [_compare(w, g, n)] if problem]


def _numpy_results(name, args, kwargs):
    """NumPy's results for ``name``, as a list, or None where NumPy has no such function or
    fails."""
    result, error = _call(getattr(np, name), args, kwargs) if hasattr(np, name) else (None, 1)
    if error is not None:
        return None
    return list(result) if isinstance(result, tuple) else [result]


def _compare_values(got, numpy_results):
    """Where only NumPy has a result: the same shapes and values (NumPy's dtypes are its
    own: float64 for the median of integers)."""
    gots = nbjax.tree_util.tree_leaves(got)
    if len(gots) != len(numpy_results):
        return [f"{len(gots)} results, NumPy {len(numpy_results)} (jax raises)"]
    return [f"{np.asarray(g)}, NumPy {n} (jax raises)" for g, n in zip(gots, numpy_results)
            if not _close(np.asarray(g), np.asarray(n))]


def _compare(want, got, numpy_result):
    want_weak = bool(getattr(want, "weak_type", False))
    got_weak = bool(getattr(nbjax.core.get_aval(got), "weak_type", False))
    want, got = np.asarray(want), np.asarray(got)
    if (want.dtype, want.shape, want_weak) != (got.dtype, got.shape, got_weak):
        return (f"{got.dtype}{got.shape}{' weak' * got_weak}, "
                f"jax {want.dtype}{want.shape}{' weak' * want_weak}")
    if _close(got, want) or numpy_result is not None and _close(got, np.asarray(numpy_result)):
        return None
    wrong = np.flatnonzero(~_close(got, want, elementwise=True))[:4]
    return f"at {wrong}: {got.ravel()[wrong]}, jax {want.ravel()[wrong]}"


def _close(got, want, elementwise=False):
    """Equal (integers, bools), or within float32's tolerance, scaled to the finite values."""
    if got.shape != want.shape:
        return False
    if want.dtype.kind not in "fc":
        close = np.ravel(got == want)
    else:
        finite = np.abs(want[np.isfinite(want)])
        scale = float(np.max(finite, initial=1.0))
        close = np.ravel(np.isclose(got, want.astype(got.dtype), rtol=2e-3, atol=1e-5 * scale,
                                    equal_nan=True))
    return close if elementwise else bool(close.all())


@pytest.mark.parametrize("name", _swept())
def test_matches_jax_on_every_kind_of_operand(name):
    if _required_positional(getattr(jax_numpy, name)) == 1:
        combos = [(k,) for k in OPERANDS]
    else:
        combos = [(a, b) for a in FIRST for b in SECOND]
    differences = [d for combo in combos for d in
                   _differences(name, [OPERANDS[k] for k in combo], what=str(combo))]
    assert not differences, "\n".join(differences)


_matrix = _rng.standard_normal((3, 4)).astype(np.float32)
_matrix[0, 1], _matrix[2, 2] = np.nan, -0.0
MATRICES = {
    "f32": _matrix, "i32": _rng.integers(-4, 5, (3, 4)).astype(np.int32),
    "bool": _rng.integers(0, 2, (3, 4)).astype(bool),
    "c64": (_rng.standard_normal((3, 4)) + 1j * _rng.standard_normal((3, 4))).astype(
        np.complex64),
    "no rows": np.zeros((0, 4), np.float32), "no columns": np.zeros((3, 0), np.int32),
}
AXES = [{}, {"axis": 0}, {"axis": -1, "keepdims": True}]


def _along_axes():
    return [name for name in _swept() if _required_positional(getattr(jax_numpy, name)) == 1
            and "axis" in inspect.signature(getattr(jax_numpy, name)).parameters]


@pytest.mark.parametrize("name", _along_axes())
def test_matches_jax_along_each_axis(name):
    """Reductions, cumulative and other functions along an axis, of 2-D operands (NaN and
    -0.0 among them, and operands with no rows or no columns)."""
    keepdims = "keepdims" in inspect.signature(getattr(jax_numpy, name)).parameters
    differences = [d for k, x in MATRICES.items() for kwargs in AXES
                   if keepdims or "keepdims" not in kwargs
                   for d in _differences(name, [x], kwargs, f"({k}, {kwargs})")]
    assert not differences, "\n".join(differences)

"""Library steps compiled into native code: arg-reductions (``backends/cpu/arg_reduction.py``),
cumulative ops (``cumulative.py``) and sorts (``sort.py``), against the reference backend
(and JAX where it is installed): at top level alone, between kernels and inside loops, on
inputs with NaN, infinities, -0.0, ties and size-1 axes; and no call back into Python for
them."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from helpers import assert_close, cpu_and_reference, random_array
from nbjax.backends.cpu import sort

try:
    import jax
except ImportError:  # the cross-checks against JAX are skipped
    jax = None

pytestmark = pytest.mark.cpu_compiler

RNG = np.random.default_rng(15)
DTYPES = [np.float32, np.float64, np.int32]
# (shape, axis): rows along the last, first and middle axes, size-1 axes on both sides.
SHAPES = [((7,), 0), ((4, 5), 1), ((4, 5), 0), ((3, 1, 6), 2), ((2, 3, 4), 1),
          ((1, 5, 1), 1), ((3, 1), 1)]


def _tied(shape, dtype):
    """Small integers (many ties, 0.0 and -0.0) with the extremes: for floats NaN (about one
    in ten, so rows hold none, one or several), infinities and -0.0."""
    if np.dtype(dtype).kind in "iu":
        return random_array(RNG, shape, dtype, low=-3, high=3, special=True)
    x = np.round(random_array(RNG, shape, dtype, scale=2.0, special=True))
    x[RNG.random(shape) < 0.1] = np.nan
    return x


def _with_signed_nans(x):
    """``x`` (a float array) with NaNs of both signs and zeros of both signs."""
    x = x.copy()
    if x.dtype.kind == "f" and x.size:
        flat = x.reshape(-1)
        flat[RNG.random(flat.size) < 0.08] = -np.nan
        flat[RNG.random(flat.size) < 0.08] = -0.0
    return x


def _same(fn, *args, exact=True):
    """``fn`` compiled natively (no call back into Python) gives the reference's values
    (exactly, or within float rounding)."""
    cpu, ref = cpu_and_reference(fn, *args)
    assert "calling back" not in cpu.runs_as, cpu.runs_as
    assert "host step" not in cpu.plan.report()
    for got, want in zip(cpu.run(*args), ref.run(*args), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            assert_close(got, want, rtol=1e-6 if got.dtype == np.float32 else 1e-13)
    return cpu


def _x64(dtype):
    return nbjax.enable_x64(np.dtype(dtype).itemsize == 8)


# --- argmax / argmin -----------------------------------------------------------------------

ARG = {"argmax": lax.argmax, "argmin": lax.argmin}


@pytest.mark.parametrize("name", list(ARG))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_arg_reduction_alone_and_between_kernels(name, dtype, shape, axis):
    """The first extremum's index (the first NaN's, if any), alone and between kernels."""
    x = _tied(shape, dtype)
    with _x64(dtype):
        _same(lambda v: ARG[name](v, axis, np.int32), x)
        _same(lambda v: ARG[name](v * 2, axis, np.int32) + 1, x)


@pytest.mark.parametrize("index_dtype", [np.int8, np.uint8, np.int64])
def test_arg_reduction_index_dtype(index_dtype):
    x = _tied((3, 200), np.float32)
    with nbjax.enable_x64(True):
        cpu = _same(lambda v: lax.argmax(v + 0, 1, index_dtype), x)
    assert cpu.run(x)[0].dtype == index_dtype


@pytest.mark.parametrize("dtype", [np.uint8, np.bool_])
def test_arg_reduction_of_unsigned_and_bool(dtype):
    x = random_array(RNG, (4, 9), dtype, special=True)
    _same(lambda v: (lax.argmax(v, 1, np.int32), lax.argmin(v, 0, np.int32)), x)


def test_signed_zeros_and_nan_rows():
    """-0.0 ties with 0.0 (the first wins); a row of NaNs, a NaN after and before the
    maximum, infinities; as JAX answers."""
    x = np.array([[-0.0, 0.0, -0.0], [0.0, -0.0, 0.0], [np.nan, np.nan, np.nan],
                  [1.0, np.nan, 2.0], [np.inf, 3.0, np.nan], [-np.inf, -np.inf, -np.inf]],
                 np.float32)
    for arg in (lax.argmax, lax.argmin):
        cpu = _same(lambda v: arg(v * 1, 1, np.int32), x)
        if jax is not None:
            want = (jax.lax.argmax if arg is lax.argmax else jax.lax.argmin)(x, 1, np.int32)
            np.testing.assert_array_equal(cpu.run(x)[0], np.asarray(want))


@pytest.mark.skipif(jax is None, reason="jax is not installed (the cross-check needs it)")
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_arg_reductions_agree_with_jax(dtype):
    x = _tied((6, 11), dtype)
    for axis in (0, 1):
        cpu, _ = cpu_and_reference(lambda v: (lax.argmax(v, axis, np.int32),
                                              lax.argmin(v, axis, np.int32)), x)
        got = cpu.run(x)
        np.testing.assert_array_equal(got[0], np.asarray(jax.numpy.argmax(x, axis)))
        np.testing.assert_array_equal(got[1], np.asarray(jax.numpy.argmin(x, axis)))


def test_accuracy_inside_scan_and_fori_loop():
    """What a training loop computes: the accuracy of argmax predictions inside a scan, and
    a running argmin inside a fori_loop: native loops with no host step."""
    logits = _tied((5, 8, 4), np.float32)
    labels = RNG.integers(0, 4, (5, 8)).astype(np.int32)

    def accuracy(logits, labels):
        def step(total, batch):
            lg, lb = batch
            hits = (jnp.argmax(lg, axis=-1) == lb).astype(np.float32)
            return total + hits.mean(), jnp.argmin(lg, axis=0)
        return lax.scan(step, jnp.float32(0), (logits, labels))

    def running(x):
        return lax.fori_loop(0, 3, lambda i, v: v.at[i].set(
            jnp.argmax(v * 0.5, axis=0).astype(np.float32)), x)
    for cpu in (_same(accuracy, logits, labels), _same(running, logits[0])):
        assert "compiled as a native loop" in cpu.plan.report()


# --- cumulative ops ------------------------------------------------------------------------

CUMULATIVE = {"cumsum": lax.cumsum, "cumprod": lax.cumprod, "cummax": lax.cummax,
              "cummin": lax.cummin}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", list(CUMULATIVE))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_cumulative_alone_and_between_kernels(name, dtype, shape, axis, reverse):
    """Bit for bit the reference's values (NaN, infinities, integer wrap-around included):
    the same sequential order of combination."""
    x = _tied(shape, dtype)
    op = CUMULATIVE[name]
    with _x64(dtype):
        _same(lambda v: op(v, axis, reverse), x)
        _same(lambda v: op(v - 1, axis, reverse) * 2, x)


@pytest.mark.parametrize("reverse", [False, True])
def test_long_float32_sums_round_as_the_reference(reverse):
    """Running sums of 3000 float32 terms, along either axis: float rounding makes any other
    order of additions differ in the last bits."""
    x = random_array(RNG, (3000, 3), np.float32)
    for axis in (0, 1):
        _same(lambda v: lax.cumsum(v * 1, axis, reverse), x)
    _same(lambda v: lax.cumsum(v, 0, reverse), x.T.copy().reshape(-1))


@pytest.mark.skipif(jax is None, reason="jax is not installed (the cross-check needs it)")
def test_running_max_and_min_of_signed_zeros_as_jax():
    """0.0 is greater than -0.0 for cummax and cummin, as in JAX (XLA's max and min)."""
    x = np.array([[-0.0, 0.0, -0.0, np.nan, 1.0], [0.0, -0.0, 0.0, -1.0, np.nan]], np.float32)
    for ours, theirs in ((lax.cummax, jax.lax.cummax), (lax.cummin, jax.lax.cummin)):
        for reverse in (False, True):
            got = _same(lambda v: ours(v, 1, reverse), x).run(x)[0]
            want = np.asarray(theirs(x, 1, reverse))
            np.testing.assert_array_equal(got, want)
            number = ~np.isnan(want)  # (a NaN's sign bit means nothing)
            np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))


def test_running_ops_inside_scan_and_fori_loop():
    xs = _tied((4, 6, 3), np.float32)

    def scanned(xs):
        def step(c, x):
            return c + lax.cumsum(x, 0, True).sum(), (lax.cummax(x * c, 1), lax.cumprod(x, 0))
        return lax.scan(step, jnp.float32(1), xs)

    def looped(x):
        return lax.fori_loop(0, 3, lambda i, v: lax.cummin(v, 0) + lax.cumsum(v, 1), x)
    for cpu in (_same(scanned, xs), _same(looped, xs[0])):
        assert "compiled as a native loop" in cpu.plan.report()


# cumlogsumexp: NumPy's logaddexp on the inline exp and log1p, so within float rounding of the
# reference (libm's exp and log1p), not bit for bit.

def _logaddexp_extremes(shape, dtype):
    """Normal values with, at random places (about one in sixteen each), -inf, inf, NaN and
    the large magnitudes 1e30 and -1e30."""
    x = random_array(RNG, shape, dtype, scale=3.0)
    for value in (-np.inf, np.inf, np.nan, 1e30, -1e30):
        x[RNG.random(shape) < 1 / 16] = value
    return x


def _running_magnitude(x, axis, reverse):
    """The largest finite |x| from the start of the walk to each element."""
    finite = np.where(np.isfinite(x), np.abs(x), 0).astype(np.float64)
    if reverse:
        return np.flip(np.maximum.accumulate(np.flip(finite, axis), axis), axis)
    return np.maximum.accumulate(finite, axis)


def _same_cumlogsumexp(fn, x, operand, axis, reverse):
    """``fn`` (a cumlogsumexp of ``operand`` along ``axis``, computed from ``x`` with
    element-wise work around it) compiled natively gives the reference's values within float
    rounding: relative to each result, and to the largest magnitude combined up to it (a
    step's rounding error is relative to the larger of the two it combines, which may
    cancel: logaddexp(-0.7, -0.7) is -0.007)."""
    cpu, ref = cpu_and_reference(fn, x)
    assert cpu.runs_as == "one native call", cpu.runs_as
    assert "cumlogsumexp is a running loop in native code" in cpu.plan.report()
    assert "calls back" not in cpu.plan.report()
    got, want = cpu.run(x)[0], ref.run(x)[0]
    assert got.dtype == want.dtype == x.dtype
    assert_close(got, want, rtol=1e-6 if x.dtype == np.float32 else 1e-13,
                 scale=_running_magnitude(operand, axis, reverse) + 1)
    return cpu


CUMLOGSUMEXP_SHAPES = SHAPES + [((0,), 0), ((3, 0), 1), ((0, 4), 1), ((2, 0, 3), 2)]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", CUMLOGSUMEXP_SHAPES)
def test_cumlogsumexp_alone_and_between_kernels(dtype, shape, axis, reverse):
    """Along the first, a middle and the last axis, rows of 0, 1 and several elements, with
    infinities, NaN and magnitudes of 1e30 in them."""
    x = _logaddexp_extremes(shape, dtype)
    with _x64(dtype):
        _same_cumlogsumexp(lambda v: lax.cumlogsumexp(v, axis, reverse), x, x, axis, reverse)
        _same_cumlogsumexp(lambda v: lax.cumlogsumexp(v * 2 - 1, axis, reverse) + 1,
                           x, x * 2 - 1, axis, reverse)


@pytest.mark.parametrize("reverse", [False, True])
def test_long_float32_running_log_sum_exps_stay_within_rounding(reverse):
    """3000 steps along either axis: each step's rounding carries on, within the bound."""
    x = random_array(RNG, (3000, 3), np.float32, scale=3.0)
    for axis in (0, 1):
        _same_cumlogsumexp(lambda v: lax.cumlogsumexp(v * 1, axis, reverse), x, x, axis,
                           reverse)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cumlogsumexp_of_special_values_as_numpy(dtype):
    """Each branch of NumPy's ``npy_logaddexp``: equal arguments (-inf and -inf stay -inf,
    inf and inf stay inf, 1 and 1 give 1 + ln 2), opposite infinities, NaN, and differences
    beyond exp's range either way (1e30 against -1e30), along rows and columns."""
    inf, nan = np.inf, np.nan
    x = np.array([[-inf, -inf, -inf, 2.0], [inf, inf, 1.0, -inf], [-inf, inf, -inf, 0.5],
                  [1.0, 1.0, 1.0, 1.0], [nan, 1.0, -inf, inf], [1e30, -1e30, 1e30, 0.0],
                  [-1e30, -1e30, 0.0, -1e30], [0.0, -0.0, 30.0, -30.0]], dtype)
    with _x64(dtype):
        for axis in (0, 1):
            for reverse in (False, True):
                _same_cumlogsumexp(lambda v: lax.cumlogsumexp(v, axis, reverse), x, x, axis,
                                   reverse)
    np.testing.assert_array_equal(x[:3, :2], [[-inf, -inf], [inf, inf], [-inf, inf]])


def test_cumlogsumexp_inside_scan_and_fori_loop():
    """Running log-sum-exps in loop bodies are native loops too: no host step in the body."""
    xs = random_array(RNG, (4, 6, 3), np.float32, scale=3.0)

    def scanned(xs):
        def step(c, x):
            y = lax.cumlogsumexp(x + c, 0, True)
            return c + 0.1 * y.max(), (y, lax.cumlogsumexp(x, 1))
        return lax.scan(step, jnp.float32(0), xs)

    def looped(x):
        return lax.fori_loop(0, 3, lambda i, v: lax.cumlogsumexp(v, 1) * 0.5 - 1.0, x)
    for cpu in (_same(scanned, xs, exact=False), _same(looped, xs[0], exact=False)):
        report = cpu.plan.report()
        assert "compiled as a native loop" in report
        assert "cumlogsumexp is a running loop in native code" in report
        assert "calls back" not in report


@pytest.mark.parametrize("dtype,fn,runs_as", [
    (np.float16, lambda v: lax.cumlogsumexp(v * 2, 0) + 1,  # between native kernels
     "one native call, calling back into Python for cumlogsumexp"),
    (np.complex64, lambda v: lax.cumlogsumexp(v, 1, True), "1 step")])  # (the host step alone)
def test_cumlogsumexp_of_half_floats_and_complex_numbers_still_calls_back(dtype, fn, runs_as):
    """float16 (which the reference sums in float32) and complex numbers (summed as complex
    exponentials in complex128) stay host steps, named as such, with the reference's values."""
    x = random_array(RNG, (5, 4), dtype)
    cpu, ref = cpu_and_reference(fn, x)
    assert cpu.runs_as == runs_as
    assert "cumlogsumexp is a library call (NumPy); native code calls back into Python " \
        "for it" in cpu.plan.report()
    got, want = cpu.run(x)[0], ref.run(x)[0]
    assert got.dtype == want.dtype == dtype
    assert_close(got, want, rtol=1e-3 if dtype == np.float16 else 1e-6)


# --- sort ----------------------------------------------------------------------------------

def _iota(shape, axis):
    return np.broadcast_to(np.arange(shape[axis], dtype=np.int32).reshape(
        [-1 if d == axis else 1 for d in range(len(shape))]), shape).copy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_sort_alone_and_between_kernels(dtype, shape, axis):
    """Values in order (NaNs last), and a payload of positions that shows the order among
    ties (-0.0 and 0.0, NaNs): stable, as the reference."""
    x, where = _tied(shape, dtype), _iota(shape, axis)
    with _x64(dtype):
        _same(lambda v: lax.sort(v, axis), x)
        _same(lambda v, w: lax.sort((v * 2, w), axis, num_keys=1), x, where)
        _same(lambda v, w: [o + 1 for o in lax.sort((v, w), axis, is_stable=False)], x, where)


@pytest.mark.parametrize("n", [2, 3, 5, 16, 17, 100, 1025])
def test_sort_rows_of_every_length(n):
    """Merge passes over runs that do and do not fill the row."""
    x = _tied((3, n), np.float32)
    _same(lambda v, w: lax.sort((v, w), 1, num_keys=1), x, _iota(x.shape, 1))
    y = random_array(RNG, (n, 2), np.int32, special=True)
    _same(lambda v: lax.sort(v + 0, 0), y)


def test_sort_by_two_keys_with_payloads_of_other_types():
    """Lexicographic over two keys (an int and a float, both with ties), payloads of 1, 2
    and 8 bytes an element moved along."""
    shape = (4, 40)
    first = random_array(RNG, shape, np.int32, low=0, high=2)
    second = _tied(shape, np.float32)
    payloads = (random_array(RNG, shape, np.uint8), random_array(RNG, shape, np.float16),
                random_array(RNG, shape, np.float64))
    with nbjax.enable_x64(True):
        _same(lambda a, b, *p: lax.sort((a, b, *p), 1, num_keys=2), first, second, *payloads)


@pytest.mark.parametrize("n", [13, 300])
@pytest.mark.parametrize("dtype", [np.uint8, np.bool_, np.int8, np.int16, np.uint16,
                                   np.uint32])
def test_sort_of_narrow_and_unsigned_keys(dtype, n):
    """Rows merged (13) and radix-sorted (300), payload showing the order among ties."""
    x = random_array(RNG, (5, n), dtype, special=True)
    _same(lambda v, w: lax.sort((v, w), 1, num_keys=1), x, _iota(x.shape, 1))
    _same(lambda v: lax.top_k(v, 7), x)


@pytest.mark.parametrize("n", [sort.RADIX_MIN - 1, sort.RADIX_MIN, 4099])
def test_rows_either_side_of_the_radix_threshold(n):
    x = _with_signed_nans(_tied((3, n), np.float32))
    x[0, :5] = [np.inf, -np.inf, -0.0, 0.0, np.float32(1e-45)]   # and a denormal
    _same(lambda v, w: lax.sort((v, w), 1, num_keys=1), x, _iota(x.shape, 1))
    _same(lambda v: lax.top_k(v, n), x)


def test_sorts_of_every_kind_poll_for_ctrl_c():
    """Merge and radix sorts alike look at the interrupt flag (test_interrupts stops a long
    one): the program's function says it polls, though it holds no loop of its own."""
    for n in (40, 7):
        x = random_array(RNG, (3, n), np.float32)
        cpu = _same(lambda v: lax.sort(v * 2.0, 1), x)
        assert cpu.layout.flows["program"].polls


@pytest.mark.skipif(jax is None, reason="jax is not installed (the cross-check needs it)")
def test_sort_agrees_with_jax():
    """NaNs (of both signs) last in their order, -0.0 and 0.0 in theirs, as JAX's
    lax.sort."""
    x = np.array([[0.0, -0.0, 1.0, np.nan, 2.0, -np.nan, -1.0, np.inf, -np.inf, 0.0, -0.0]],
                 np.float32)
    x = np.concatenate([x, _tied((3, 11), np.float32)])
    where = _iota(x.shape, 1)
    cpu, _ = cpu_and_reference(lambda v, w: lax.sort((v, w), 1, num_keys=1), x, where)
    want = jax.lax.sort((x, where), dimension=1, num_keys=1)
    for got, theirs in zip(cpu.run(x, where), want, strict=True):
        np.testing.assert_array_equal(got, np.asarray(theirs))


def test_sort_inside_scan_and_fori_loop():
    xs = _tied((4, 3, 9), np.float32)

    def scanned(xs):
        def step(c, x):
            s = jnp.sort(x + c, axis=-1)
            return c + 0.5, (s, jnp.argsort(x, axis=0))
        return lax.scan(step, jnp.float32(0), xs)

    def looped(x):
        return lax.fori_loop(0, 3, lambda i, v: jnp.sort(v[::-1] * -1.0, axis=1), x)
    for cpu in (_same(scanned, xs), _same(looped, xs[0])):
        assert "compiled as a native loop" in cpu.plan.report()


def test_all_three_inside_while_loop_and_cond():
    """A while loop (bounds known only at run time) and a cond around the three kinds."""
    x = _tied((6, 5), np.float32)

    def f(v, n):
        def body(carry):
            k, w = carry
            w = lax.cond(k % 2 == 0, lambda u: lax.sort(u, 0), lambda u: lax.cummax(u, 1), w)
            first = lax.argmax(w, 1, np.int32).astype(np.float32)
            return k + 1, lax.cumsum(w, 0) * 0.5 + first[:, None]
        return lax.while_loop(lambda c: c[0] < n, body, (0, v))
    cpu = _same(f, x, np.int32(3))
    assert "while compiled as a native loop" in cpu.plan.report()


# --- top_k ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_top_k_alone_and_between_kernels(dtype, shape, axis):
    """The k greatest in IEEE's total order (NaN > inf > ... > 0.0 > -0.0 > ... > -NaN),
    ties lowest index first, and their int32 indices: the reference's, bit for bit."""
    x = _with_signed_nans(_tied(shape, dtype))
    n = shape[axis]
    with _x64(dtype):
        for k in sorted({1, (n + 1) // 2, n}):
            _same(lambda v: lax.top_k(v, k, axis=axis), x)
            _same(lambda v: [o * 2 for o in lax.top_k(v + 1, k, axis=axis)], x)


@pytest.mark.parametrize("n", [2, 9, 100, 1025])
def test_top_k_of_long_rows(n):
    x = _with_signed_nans(_tied((3, n), np.float32))
    for k in sorted({1, min(3, n), n}):
        _same(lambda v: lax.top_k(v, k), x)


@pytest.mark.parametrize("k", [1, sort.SELECT_MAX, sort.SELECT_MAX + 1])
@pytest.mark.parametrize("order", ["ascending", "descending", "tied"])
def test_top_k_selected_in_one_pass_or_sorted(order, k):
    """Up to ``SELECT_MAX``, top_k keeps the best so far while it reads each row; above
    it, it sorts the row: the same results on rows where every element enters the kept
    ones (ascending), none after the first k (descending), and ties across the boundary."""
    n = 300
    x = {"ascending": np.arange(n, dtype=np.float32)[None].repeat(3, 0),
         "descending": np.arange(n, 0, -1).astype(np.float32)[None].repeat(3, 0),
         "tied": _with_signed_nans(_tied((3, n), np.float32))}[order]
    x[1] = -x[1]
    _same(lambda v: lax.top_k(v, k), x)
    _same(lambda v: lax.top_k(v * 2, k, axis=0), x[:, :k].T.copy())


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.bool_])
def test_top_k_of_small_integers_and_bools(dtype):
    x = random_array(RNG, (4, 11), dtype, special=True)
    _same(lambda v: lax.top_k(v, 4), x)


@pytest.mark.skipif(jax is None, reason="jax is not installed (the cross-check needs it)")
def test_top_k_agrees_with_jax():
    x = np.array([[0.0, -0.0, 1.0, np.nan, 2.0, -np.nan, -1.0, np.inf, -np.inf, 0.0, -0.0]],
                 np.float32)
    x = np.concatenate([x, _tied((3, 11), np.float32)])
    cpu, _ = cpu_and_reference(lambda v: lax.top_k(v, 7), x)
    got, want = cpu.run(x), jax.lax.top_k(x, 7)
    np.testing.assert_array_equal(got[1], np.asarray(want[1]))
    np.testing.assert_array_equal(got[0], np.asarray(want[0]))
    number = ~np.isnan(got[0])
    np.testing.assert_array_equal(np.signbit(got[0][number]),
                                  np.signbit(np.asarray(want[0])[number]))


def test_top_k_inside_scan_and_fori_loop():
    xs = _tied((4, 3, 9), np.float32)

    def scanned(xs):
        def step(c, x):
            values, where = lax.top_k(x * c, 4)
            return c + 0.5, (values, where)
        return lax.scan(step, jnp.float32(1), xs)

    def looped(x):
        return lax.fori_loop(0, 3, lambda i, v: lax.top_k(v[::-1] + 1.0, 9)[0], x)
    for cpu in (_same(scanned, xs), _same(looped, xs[0])):
        assert "compiled as a native loop" in cpu.plan.report()


# --- dynamic_update_slice updating an input -------------------------------------------

def _kept_in_one_buffer(cpu):
    from nbjax.backends.cpu import buffer_plan
    (loop,) = [g for g in cpu.plan.groups if g.kind == "loop"]
    body = loop.subprograms[-1]
    return sorted(buffer_plan.accumulated_inputs(body.closed.jaxpr,
                                                 body.plan.groups).values())


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.float64])
def test_a_dynamic_update_of_a_carry_is_a_window_copied_in_place(dtype):
    """``dynamic_update_slice`` making a loop's next carry of the carry is a library step
    that copies the update into its window of the carry's one buffer, in place (a kernel
    wrote every element, the whole carry every iteration); starts clamped as XLA's (below
    0, past the end, of unsigned and 64-bit types); rows and 2-d windows."""
    cache = random_array(RNG, (6, 5, 4), dtype)
    rows = random_array(RNG, (9, 5, 4), dtype)
    with _x64(dtype):
        def filled(cache, rows):
            def body(i, c):
                return lax.dynamic_update_slice(c, rows[i][None], (i - 2, 0, 0))
            return lax.fori_loop(0, 9, body, cache)
        cpu = _same(filled, cache, rows)
        assert "dynamic_update_slice copies its update into a window" in cpu.plan.report()
        assert _kept_in_one_buffer(cpu) == [1]

        def windows(cache, rows, starts):
            def step(c, s):
                return lax.dynamic_update_slice(c, rows[:2, 1:4, :3], (s[0], s[1], s[2])), None
            return lax.scan(step, cache, starts)[0]
        for index_dtype in (np.int32, np.uint8, np.int64, np.uint64):
            starts = np.array([[0, 0, 0], [5, 4, 3], [-1, 2, 9], [200, 1, 1]])
            _same(windows, cache, rows, starts.astype(index_dtype))


def test_a_dynamic_update_that_keeps_its_operand_or_makes_no_output_is_a_kernel():
    """Where the operand is read after the update (a scan's ys), the carry keeps two
    buffers and the window is copied after the carry; an update of a value the program
    computes, not of an input, stays a kernel (it fuses); the top level's output made of
    an input copies the input first; an empty update copies only."""
    x = random_array(RNG, (8, 3), np.float32)

    def read_after(x):
        def step(c, i):
            return lax.dynamic_update_slice(c, c[:1] * 2, (i, 0)), c.sum()
        return lax.scan(step, x, jnp.arange(8))
    assert _kept_in_one_buffer(_same(read_after, x, exact=False)) == []
    cpu = _same(lambda x: lax.dynamic_update_slice(x * 2, x[:2], (3, 1)) + 1, x)
    assert "dynamic_update_slice" not in [g.eqns[0].primitive.name for g in cpu.plan.groups
                                          if g.kind == "library"]
    cpu = _same(lambda x, u: lax.dynamic_update_slice(x, u, (5, 1)), x, x[:2, :2] + 1)
    assert [g.kind for g in cpu.plan.groups] == ["library"]
    _same(lambda x: lax.dynamic_update_slice(x, x[:0], (5, 1)), x)


# --- empty arrays --------------------------------------------------------------------------

def test_empty_arrays():
    """Zero rows, or rows of zero elements: nothing to do, and the reference's empty
    results; an arg-reduction over an empty axis is refused when tracing, as in JAX."""
    x = np.zeros((0, 4), np.float32)
    _same(lambda v: (lax.argmax(v + 1, 1, np.int32), lax.cumsum(v, 1), lax.sort(v, 1)), x)
    _same(lambda v: (lax.cummax(v * 2, 0, True), lax.sort((v, v + 1), 0)[1]), x.T.copy())
    _same(lambda v: (lax.top_k(v + 1, 2), lax.top_k(v.T, 0)), x)
    with pytest.raises(ValueError, match="non-empty reduced dimension"):
        nbjax.jit(lambda v: lax.argmax(v, 0, np.int32))(x)

"""Complex arithmetic as real arithmetic on the parts: how compiled code computes complex numbers.

A kernel's scalar operations are real (``compiler.kernel``). So before planning, the compiler
(``compiler.complex_parts``) rewrites each equation on complex numbers whose primitive has a
``"complex parts"`` lowering here into equations on the real and imaginary parts, which fuse
into kernels like any others: ``z * w`` becomes ``(a*c - b*d) + (a*d + b*c) i``. The parts of
a complex array the program reads come from a view of its buffer as pairs of floats
(``complex_as_floats``), and a complex result a later step needs whole is written as such
pairs and viewed as complex again (``floats_as_complex``): no copy either way.

A rule takes the operands of the equation, each complex one as its ``Parts``, the others
as they are, with the equation's params, and returns ``Parts`` (a complex result) or an
array (a real one). The formulas are NumPy's where NumPy's are more than the schoolbook
ones (division by Smith's method, ``abs`` without overflow), so compiled results agree with
the reference backend to rounding on finite numbers; at infinities and NaNs they give the
reference's values, C99's special cases (Annex G, as glibc computes them), each a ``select``
after the formula, so that finite numbers pay a few selects for them and no branch.
Primitives without a rule (products, maxima and minima of all elements) stay steps on the
reference backend, as before.
"""

from typing import NamedTuple

import numpy as np

from ..core import Array, Primitive, ShapedArray, get_aval
from ..core import dtypes
from .elementwise import (abs_p, add, add_p, bitcast_convert_type, complex_p, conj_p,
                          convert_element_type, convert_element_type_p, div, div_p, eq, eq_p,
                          ge, gt, imag_p, integer_pow_p, is_finite, lt, max, max_p, min, min_p,
                          mul, mul_p, ne, ne_p, neg, neg_p, power_by_squaring, real_p, select,
                          select_n_p, sign_p, square_p, sub, sub_p)
from .elementwise import bitwise_and as and_, bitwise_not as not_, bitwise_or as or_
from .gather_scatter import GatherScatterMode, default_fill_value, gather_p
from .reductions import cumsum_p
from .shapes import (broadcast_in_dim, broadcast_in_dim_p, reduce_sum_p, reshape_p,
                     squeeze_p, transpose_p)
from .slicing import dynamic_slice_p, dynamic_update_slice_p
from .special import fma
from .standard import array_module_lowering
from .structural import concatenate, concatenate_p, index_in_dim, pad_p, rev_p, slice_p
from .transcendental import (acos_p, acosh_p, asin_p, asinh, asinh_p, atan2, atan_p, atanh_p,
                             cos, cos_p, cosh, cosh_p, exp, exp2_p, exp_p, expm1, expm1_p, log,
                             log1p, log1p_p, log_p, pow_p, rsqrt_p, sin, sin_p, sinh, sinh_p,
                             sqrt, sqrt_p, tan, tan_p, tanh_p)
from .transcendental import pow as power

__all__ = ["Parts", "PairedParts", "complex_as_floats", "complex_as_floats_p",
           "floats_as_complex", "floats_as_complex_p", "split", "join"]


class Parts(NamedTuple):
    """A complex array as its real and imaginary parts (float arrays of its shape)."""
    re: object
    im: object


class PairedParts(Parts):
    """Parts read from ``pairs``, an array of the complex value's pairs of floats as its
    buffer holds them (a rule's result computed that way): building the value whole takes
    a view of ``pairs``, no kernel."""

    @classmethod
    def of(cls, pairs):
        parts = cls(*_parts_of(pairs))
        parts.pairs = pairs
        return parts


def _parts_of(pairs):
    """The two parts of an array of pairs of floats (its last axis, of 2)."""
    last = len(get_aval(pairs).shape) - 1
    return Parts(*[index_in_dim(pairs, k, last, keepdims=False) for k in (0, 1)])


def real_dtype(dtype):
    return np.finfo(dtype).dtype


def _complex_dtype(real):
    return dtypes.complex128 if np.dtype(real) == dtypes.float64 else dtypes.complex64


# --- the two views between a complex array and its parts -----------------------------------

def _as_floats(xp, x):
    flat = xp.ascontiguousarray(x.reshape(-1))  # (a 0-d array becomes 1-d here)
    return flat.view(real_dtype(x.dtype)).reshape(x.shape + (2,))


def _as_complex(xp, x):
    flat = xp.ascontiguousarray(x.reshape(-1))
    return flat.view(_complex_dtype(x.dtype)).reshape(x.shape[:-1])


complex_as_floats_p = Primitive("complex_as_floats")
complex_as_floats_p.def_abstract_eval(lambda x: ShapedArray(
    x.shape + (2,), real_dtype(x.dtype), x.weak_type))
array_module_lowering(complex_as_floats_p, lambda xp, x: _as_floats(xp, x).copy())
complex_as_floats_p.def_lowering("view", "its operand's buffer, read as pairs of floats")

floats_as_complex_p = Primitive("floats_as_complex")
floats_as_complex_p.def_abstract_eval(lambda x: ShapedArray(
    x.shape[:-1], _complex_dtype(x.dtype), x.weak_type))
array_module_lowering(floats_as_complex_p, lambda xp, x: _as_complex(xp, x).copy())
floats_as_complex_p.def_lowering("view", "its operand's pairs of floats, read as complex")


def complex_as_floats(x):
    """A complex array's elements as pairs of floats: one more axis, of 2 (compiler use)."""
    return complex_as_floats_p.bind(x)


def floats_as_complex(x):
    """Pairs of floats (the last axis, of 2) as complex numbers (compiler use)."""
    return floats_as_complex_p.bind(x)


def split(z):
    """The Parts of the complex array ``z``, read from a view of its buffer."""
    return _parts_of(complex_as_floats(z))


def join(parts):
    """The complex array of ``parts``: the pairs written by one kernel, viewed as complex."""
    return floats_as_complex(_pairs(parts))


def _pairs(parts):
    """The parts side by side: one more axis, of 2 (real, imaginary)."""
    shape = get_aval(parts.re).shape
    column = [broadcast_in_dim(p, shape + (1,), tuple(range(len(shape)))) for p in parts]
    return concatenate(column, len(shape))


def complex_parts_lowering(prim, rule):
    prim.def_lowering("complex parts", rule)


# --- helpers -------------------------------------------------------------------------------

def _c(value, like):
    """A rank-0 constant of ``like``'s dtype (it broadcasts in lax's element-wise ops): an
    Array of that type, which a NumPy value would not keep for float64 with x64 off (some
    float32 values are computed in float64: ``_rounded_once``)."""
    dtype = get_aval(like).dtype
    return Array.wrap(np.asarray(value, dtype), ShapedArray((), dtype, False))


def _rounded_once(fn, *args):
    """``fn(*args)`` for float32 operands computed in float64 and rounded once, as the
    reference computes those values (``transcendental._rounded_once``), so that the two
    agree to the last bit where a last bit matters: a power's phase may be a huge multiple
    of ``arg x`` or ``log|x|``, and log1p's real part is summed from exact squares."""
    dtype = get_aval(args[0]).dtype
    if dtype == dtypes.float64:
        return fn(*args)
    wide = [convert_element_type_p.bind(x, new_dtype=dtypes.float64, weak_type=False)
            for x in args]
    return convert_element_type_p.bind(fn(*wide), new_dtype=dtype, weak_type=False)


def _select(pred, on_true, on_false):
    """``select`` with lax's element-wise broadcasting (rank 0, size-1 axes) of its operands,
    as the other element-wise primitives have."""
    operands = (pred, on_true, on_false)
    shape = tuple(np.broadcast_shapes(*[get_aval(x).shape for x in operands]))
    return select(*[_broadcast_to(x, shape) for x in operands])


def _broadcast_to(x, shape):
    """``x`` (rank 0, or of ``shape`` but for size-1 axes) at ``shape``."""
    if get_aval(x).shape == shape:
        return x
    return broadcast_in_dim(x, shape, tuple(range(len(get_aval(x).shape))))


def _zeros(x):
    return broadcast_in_dim(_c(0, x), get_aval(x).shape, ())


def _is_zero(x):
    return eq(x, _c(0, x))


def _is_inf(x):
    return eq(abs_p.bind(x), _c(np.inf, x))


def _is_nan(x):
    return ne(x, x)


def _not_finite(x):
    return not_(is_finite(x))


def _finite(z):
    """Whether both parts of ``z`` are finite."""
    return and_(is_finite(z.re), is_finite(z.im))


def _signed_zero(x):
    """``x * 0``: a zero of ``x``'s sign where ``x`` is finite, NaN where it is not."""
    return mul(x, _c(0, x))


def _sign_bit(x):
    """Whether ``x``'s sign bit is set (-0.0 and negative NaNs included)."""
    bits = np.dtype(f"int{8 * get_aval(x).dtype.itemsize}")
    return lt(bitcast_convert_type(x, bits), np.asarray(0, bits))


def _copysign(magnitude, sign):
    return _select(_sign_bit(sign), neg(magnitude), magnitude)


def _hypot(x, y):
    """``sqrt(x*x + y*y)`` without overflow or underflow in the squares; infinite when
    either is (even with the other NaN), as C's ``hypot``."""
    ax, ay = abs_p.bind(x), abs_p.bind(y)
    big, small = max(ax, ay), min(ax, ay)
    ratio = div(small, _select(_is_zero(big), _c(1, big), big))
    h = mul(big, sqrt(add(_c(1, ratio), mul(ratio, ratio))))
    return _select(or_(_is_inf(x), _is_inf(y)), _c(np.inf, h), h)


def _mul(z, w):
    """Each part as NumPy's vector loop (and XLA on the CPU) computes it: one product rounded,
    the other fused with the sum (``fma``). So the bits are NumPy's, and a part whose unfused
    product overflows is the other product's infinity, not NaN: ``(1e30 + inf i)(1e30 +
    1e30 i)`` in complex64 is ``-inf + inf i``, as ``1e30 * 1e30 - inf`` is exactly."""
    (a, b), (c, d) = z, w
    return Parts(fma(a, c, neg(mul(b, d))), fma(a, d, mul(b, c)))


def _div(z, w):
    """Smith's method, as NumPy: scaled by the larger part of the divisor."""
    (a, b), (c, d) = z, w
    by_re = ge(abs_p.bind(c), abs_p.bind(d))
    small = _select(by_re, d, c)
    big = _select(by_re, c, d)
    ratio = div(small, big)
    scale = div(_c(1, big), add(big, mul(small, ratio)))
    re_re, im_re = mul(add(a, mul(b, ratio)), scale), mul(sub(b, mul(a, ratio)), scale)
    re_im, im_im = mul(add(mul(a, ratio), b), scale), mul(sub(mul(b, ratio), a), scale)
    # Both parts of the divisor zero: NumPy divides each part by |c| and |d| (inf or NaN).
    zero = and_(_is_zero(c), _is_zero(d))
    return Parts(_select(zero, div(a, abs_p.bind(c)), _select(by_re, re_re, re_im)),
                 _select(zero, div(b, abs_p.bind(d)), _select(by_re, im_re, im_im)))


def _abs(z):
    return _hypot(*z)


def _exp(z):
    """exp(a) (cos b + i sin b), exp(a) as the square of exp(a/2), so that a product with
    a small cos b or sin b stays finite where exp(a) alone overflows (as C's cexp)."""
    a, b = z
    half = exp(mul(a, _c(0.5, a)))
    # exp(x + 0i) is exp(x) + 0i even where exp(x) is infinite (inf * sin(0) is NaN).
    value = Parts(mul(mul(half, cos(b)), half),
                  _select(_is_zero(b), b, mul(mul(half, sin(b)), half)))
    # C99: exp(+inf + yi) for an infinite or NaN y is inf + NaN i; exp(-inf + yi), 0 + 0i.
    grows = gt(a, _c(0, a))
    limit = Parts(_select(grows, _c(np.inf, a), _c(0, a)),
                  _select(grows, _c(np.nan, b), _copysign(_c(0, b), b)))
    return _choose(and_(_is_inf(a), _not_finite(b)), limit, value)


def _log(z):
    """log|z| + i arg z; near |z| = 1, log|z| as log1p of (|z|^2 - 1), computed from the
    larger part so that it keeps its relative accuracy."""
    a, b = z
    modulus = _hypot(a, b)
    big, small = max(abs_p.bind(a), abs_p.bind(b)), min(abs_p.bind(a), abs_p.bind(b))
    near_one = and_(gt(modulus, _c(0.75, a)), lt(modulus, _c(1.5, a)))
    near = mul(_c(0.5, a), log1p(add(mul(sub(big, _c(1, a)), add(big, _c(1, a))),
                                     mul(small, small))))
    return Parts(_select(near_one, near, log(modulus)), atan2(b, a))


def _sqrt(z):
    """C99's csqrt: t = sqrt((|a| + |z|)/2), then the parts from t by the sign of a."""
    a, b = z
    t = sqrt(mul(add(abs_p.bind(a), _hypot(a, b)), _c(0.5, a)))
    other = div(abs_p.bind(b), add(t, t))
    zero = _is_zero(t)
    re = _select(ge(a, _c(0, a)), t, other)
    im = _select(ge(a, _c(0, a)), div(b, add(t, t)), _copysign(t, b))
    re, im = _select(zero, _c(0, a), re), _select(zero, b, im)
    infinite = _is_inf(b)  # sqrt(x + inf i) = inf + inf i, whatever x is (NaN included)
    return Parts(_select(infinite, _c(np.inf, a), re), _select(infinite, b, im))


# In the products of sinh and cosh, a factor that is zero (sinh 0, sin 0) makes a zero of the
# product's sign even where the other factor has overflowed: sinh(1e30 + 0i) is inf + 0i
# (cosh(1e30) * 0 would be NaN), as in C99. Where b is infinite or NaN, C99's values: sinh
# and cosh of +-inf + bi are inf + NaN i; sinh(+-0 + bi) is +-0 + NaN i, cosh(+-0 + bi)
# NaN + 0i. sin z = -i sinh(iz) and cos z = cosh(iz), as C99 defines them.

def _sinh(z, infinity=np.inf):
    """``infinity``: the real part at +-inf + bi for an infinite or NaN b, whose sign C99
    leaves open (glibc: +inf for sinh; for sin, whose imaginary part it is, -inf)."""
    a, b = z
    not_finite_b = _not_finite(b)
    re = _select(_is_zero(a), _select(lt(cos(b), _c(0, b)), neg(a), a), mul(sinh(a), cos(b)))
    return Parts(_select(and_(_is_inf(a), not_finite_b), _c(infinity, a), re),
                 _select(_is_zero(b), b, mul(cosh(a), sin(b))))


def _cosh(z):
    a, b = z
    not_finite_b = _not_finite(b)
    im = _select(_is_zero(b), _select(_is_nan(a), b, mul(b, sign_p.bind(a))),
                 mul(sinh(a), sin(b)))
    return Parts(_select(and_(_is_inf(a), not_finite_b), _c(np.inf, a), mul(cosh(a), cos(b))),
                 _select(and_(_is_zero(a), not_finite_b), _c(0, b), im))


def _sin(z):
    return _times_minus_i(_sinh(_times_i(z), -np.inf))


def _cos(z):
    return _cosh(_times_i(z))


def _tanh(z):
    """Kahan's formula (as C libraries' ctanh); past a real part where tanh is +-1 to
    working precision, the limits (so that sinh(a)^2 never overflows). The imaginary part
    of tanh(a + 0i) is that zero, a NaN included. Where b is infinite or NaN, C99's values:
    +-1 + 0i (the zero of b's sign) at a = +-inf, a + NaN i at a = +-0, else NaN + NaN i."""
    a, b = z
    t, s = tan(b), sinh(a)
    beta = add(_c(1, t), mul(t, t))
    rho = sqrt(add(_c(1, s), mul(s, s)))
    den = add(_c(1, s), mul(beta, mul(s, s)))
    far = gt(abs_p.bind(a), _c(12 if get_aval(a).dtype.itemsize == 4 else 22, a))
    tail = mul(mul(_c(4, b), mul(sin(b), cos(b))), exp(mul(_c(-2, a), abs_p.bind(a))))
    not_finite_b, infinite_a = _not_finite(b), _is_inf(a)
    re = _select(far, sign_p.bind(a), div(mul(beta, mul(rho, s)), den))
    im = _select(_is_zero(b), b, _select(far, tail, div(t, den)))
    return Parts(
        _select(and_(not_finite_b, not_(infinite_a)),
                _select(_is_zero(a), a, _c(np.nan, a)), re),
        _select(and_(not_finite_b, infinite_a), _copysign(_c(0, b), b), im))


def _tan(z):
    """tan z = -i tanh(i z)."""
    return _times_minus_i(_tanh(_times_i(z)))


def _expm1(z):
    """exp(a) cos(b) - 1 as expm1(a) cos(b) - 2 sin(b/2)^2: accurate for small z."""
    a, b = z
    half = sin(mul(b, _c(0.5, b)))
    re = sub(mul(expm1(a), cos(b)), mul(_c(2, b), mul(half, half)))
    return Parts(re, _select(_is_zero(b), b, mul(exp(a), sin(b))))


def _log1p(z):
    """log|1 + z| + i arg(1 + z) by the reference's formulas (``transcendental.
    _complex_log1p``, which says why): log1p(2a + a^2 + b^2) / 2, the sum to twice the
    working precision, but near z = -1, at large z (halved, so that it cannot overflow) and
    at infinities and NaNs (C99's values), the log of hypot(1 + a, b)."""
    a, b = z
    one_plus = add(_c(1, a), a)
    large = gt(max(abs_p.bind(a), abs_p.bind(b)),
               _c(1e152 if get_aval(a).dtype == dtypes.float64 else 1e17, a))
    half = _select(large, _c(0.5, a), _c(1, a))
    far = add(log(_hypot(mul(half, one_plus), mul(half, b))),
              _select(large, _c(np.log(2), a), _c(0, a)))
    near_zero = mul(_c(0.5, a), log1p(_two_a_plus_squares(a, b)))
    use_near_zero = and_(ge(add(abs_p.bind(one_plus), abs_p.bind(b)), _c(0.2, a)), not_(large))
    return Parts(_select(use_near_zero, near_zero, far), atan2(b, one_plus))


def _two_a_plus_squares(a, b):
    """2a + a^2 + b^2, which cancels where |1 + a + bi| is near 1, to twice the working
    precision (``_exact_sum``): float64 squares as Dekker's products (the rounded product
    and its error, by ``fma``; below 1e152, where they cannot overflow); float32 ones are
    exact in float64, and summed there (below 1e17, where the sum fits a float32)."""
    if get_aval(a).dtype == dtypes.float64:
        return _exact_sum(add(a, a), *_exact_square(a), *_exact_square(b))
    return _rounded_once(lambda a, b: _exact_sum(add(a, a), mul(a, a), mul(b, b)), a, b)


def _exact_square(x):
    """x * x as the rounded product and its rounding error (exact: ``fma``)."""
    square = mul(x, x)
    return square, fma(x, x, neg(square))


def _exact_sum(*terms):
    """The sum of ``terms`` to about twice the working precision, as the reference's
    ``transcendental._exact_sum``: each addition's rounding error (Knuth's two-sum) is
    collected and added once at the end."""
    total, errors = terms[0], None
    for term in terms[1:]:
        new = add(total, term)
        back = sub(new, total)
        error = add(sub(total, sub(new, back)), sub(term, back))
        errors, total = error if errors is None else add(errors, error), new
    return add(total, errors)


def _sign(z):
    """z / |z|, and 0 at 0."""
    a, b = z
    modulus = _hypot(a, b)
    zero = _is_zero(modulus)
    safe = _select(zero, _c(1, modulus), modulus)
    return Parts(_select(zero, a, div(a, safe)), _select(zero, b, div(b, safe)))


def _square(z):
    """(a - b)(a + b) + 2ab i, as XLA (and nbjax's ``square``)."""
    a, b = z
    ab = mul(a, b)
    return Parts(mul(sub(a, b), add(a, b)), add(ab, ab))


def _integer_pow(z, *, y):
    """Repeated squaring with complex products, as XLA; a negative power divides 1 by it."""
    result = power_by_squaring(z, abs(y), _mul)
    if result is None:
        result = _ones(z.re)
    return _div(_ones(z.re), result) if y < 0 else result


def _ones(like):
    """1 + 0i at ``like``'s shape."""
    return Parts(broadcast_in_dim(_c(1, like), get_aval(like).shape, ()), _zeros(like))


def _exp2(z):
    """2^z = exp(z log 2)."""
    ln2 = _c(np.log(2), z.re)
    return _exp(Parts(mul(z.re, ln2), mul(z.im, ln2)))


def _pow(x, y):
    """XLA's complex power, as the reference computes it (``transcendental._complex_pow``,
    whose docstring says why): |x|^c e^(-d arg x) (cos q + i sin q), q = c arg x + d log|x|,
    and 1 at y = 0 or x = 1, 0 at x = 0 for a positive real y, inf or 0 at x = +inf for a
    real y > 0 or < 0. An integer y is converted to x's type first, as XLA does."""
    if not isinstance(y, Parts):
        y = Parts(convert_element_type(y, get_aval(x.re).dtype), _zeros(x.re))
    x, y = [Parts(*[_broadcast_to(p, _shape_of(x, y)) for p in z]) for z in (x, y)]
    (a, b), (c, d) = x, y
    modulus = _rounded_once(_hypot, a, b)
    angle, log_modulus = _rounded_once(atan2, b, a), _rounded_once(log, modulus)
    size = mul(power(modulus, c), exp(mul(neg(d), angle)))
    q = add(mul(c, angle), mul(d, log_modulus))
    value = Parts(mul(size, cos(q)), mul(size, sin(q)))
    real_y, real_x = _is_zero(d), _is_zero(b)
    infinite_x = and_(eq(a, _c(np.inf, a)), and_(real_x, real_y))
    one = or_(and_(_is_zero(c), real_y), and_(eq(a, _c(1, a)), real_x))
    zero = or_(and_(and_(_is_zero(modulus), real_y), gt(c, _c(0, c))),
               and_(infinite_x, lt(c, _c(0, c))))
    infinite = and_(infinite_x, gt(c, _c(0, c)))
    exact = Parts(_select(one, _c(1, a), _select(zero, _c(0, a), _c(np.inf, a))), _zeros(a))
    return _choose(or_(or_(one, zero), infinite), exact, value)


def _shape_of(*zs):
    return tuple(np.broadcast_shapes(*[get_aval(p).shape for z in zs for p in z]))


def _choose(pred, z, w):
    """``select`` of two complex values."""
    return Parts(_select(pred, z.re, w.re), _select(pred, z.im, w.im))


def _lexicographic(compare):
    """Complex max or min as XLA (and the reference): real parts compared, imaginary parts
    on a tie; ``z`` where the comparison holds, else ``w``, so a NaN part never wins."""
    def rule(z, w):
        take_z = _select(eq(z.re, w.re), compare(z.im, w.im), compare(z.re, w.re))
        return _choose(take_z, z, w)
    return rule


# The inverse functions by Kahan's formulas ("Branch cuts for complex elementary functions",
# 1987), from square roots of 1 - z and 1 + z: accurate near the branch points, with no
# overflow in between, where log(z + sqrt(z^2 + 1)) loses digits or overflows.

def _one_minus(z):
    """1 - z as (1 - a) - bi (the imaginary part's sign kept, zero included)."""
    return Parts(sub(_c(1, z.re), z.re), neg(z.im))


def _one_plus(z):
    return Parts(add(_c(1, z.re), z.re), z.im)


def _conj_times(z, w):
    """conj(z) * w."""
    return _mul(Parts(z.re, neg(z.im)), w)


def _asin(z):
    s, t = _sqrt(_one_minus(z)), _sqrt(_one_plus(z))
    return _choose(_finite(z), Parts(atan2(z.re, _mul(s, t).re), asinh(_conj_times(s, t).im)),
                   _asin_of_non_finite(z))


def _acos(z):
    s, t = _sqrt(_one_minus(z)), _sqrt(_one_plus(z))
    return _choose(_finite(z), Parts(mul(_c(2, z.re), atan2(s.re, t.re)),
                                     asinh(_conj_times(t, s).im)),
                   _acos_of_non_finite(z))


def _acosh(z):
    """At a non-finite z, +-i acos z, the sign that makes the real part (the +-inf) +inf:
    -i where the imaginary part's sign bit is set."""
    s, t = _sqrt(Parts(sub(z.re, _c(1, z.re)), z.im)), _sqrt(_one_plus(z))
    special = _acos_of_non_finite(z)
    special = _choose(_sign_bit(z.im), _times_minus_i(special), _times_i(special))
    return _choose(_finite(z), Parts(asinh(_conj_times(s, t).re),
                                     mul(_c(2, z.re), atan2(s.im, t.re))), special)


def _asin_of_non_finite(z):
    """C99's asin (as -i asinh(iz), the values glibc gives) where a part is infinite or NaN:
    at x = +-inf, +-pi/4 (y infinite), +-pi/2 (finite) or NaN (NaN), with x's sign, + i inf
    with y's; else x's zero + yi where y is infinite, or x is 0 and y NaN; else NaN + NaN i
    but for an infinite y."""
    x, y = z
    infinite_x, infinite_y = _is_inf(x), _is_inf(y)
    angle = _select(infinite_y, _c(np.pi / 4, y), add(_c(np.pi / 2, y), _signed_zero(y)))
    nan = _c(np.nan, x)
    return Parts(_select(infinite_x, _copysign(angle, x),
                         _select(or_(infinite_y, _is_zero(x)), _signed_zero(x), nan)),
                 _select(infinite_x, _copysign(_c(np.inf, y), y),
                         _select(is_finite(y), nan, y)))


def _acos_of_non_finite(z):
    """acos z = pi/2 - asin z, as glibc computes it where a part is infinite or NaN."""
    re, im = _asin_of_non_finite(z)
    return Parts(sub(_c(np.pi / 2, re), re), neg(im))


def _times_i(z):
    return Parts(neg(z.im), z.re)


def _times_minus_i(z):
    return Parts(z.im, neg(z.re))


def _asinh(z):
    """asinh z = -i asin(iz)."""
    return _times_minus_i(_asin(_times_i(z)))


def _atanh(z):
    """Re = log1p(4a / ((1-a)^2 + b^2)) / 4 for a >= 0 (odd in a), its lengths divided by
    s = max(|a|, |b|, 1) so that no square overflows (no cancellation near 0, none between
    two large logarithms); where the squares underflow (a = +-1 exactly, |b| tiny), the
    quotient 4 / b^2 may overflow, and 1 + it rounds to it: Re = log(q), q = sqrt(2 / |b|).
    Im = (atan2(b, 1+a) + atan2(b, 1-a)) / 2, two angles of one sign."""
    a, b = z
    size = abs_p.bind(a)  # (Re is odd in a: computed for |a|, where log1p's argument >= 0)
    s = max(max(size, abs_p.bind(b)), _c(1, a))
    b_s, below = div(b, s), div(sub(_c(1, a), size), s)
    squares = add(mul(below, below), mul(b_s, b_s))
    ratio = div(div(mul(_c(4, a), div(size, s)), s), squares)
    tiny = lt(squares, _c(2.0 ** (-120 if get_aval(a).dtype.itemsize == 4 else -1000), a))
    q = div(_c(np.sqrt(2), b), sqrt(abs_p.bind(b)))
    re = mul(_select(tiny, _c(1, a), _c(0.25, a)), log1p(_select(tiny, q, ratio)))
    im = mul(_c(0.5, a), add(atan2(b, add(_c(1, a), a)), atan2(b, sub(_c(1, a), a))))
    # C99: a zero of a's sign where a part is infinite or a is 0 (b NaN); pi/2 of b's sign
    # where b is infinite (a NaN too).
    infinite_b = _is_inf(b)
    on_an_axis = or_(or_(_is_inf(a), infinite_b), _is_zero(a))
    return Parts(_copysign(_select(on_an_axis, _c(0, a), re), a),
                 _select(infinite_b, _copysign(_c(np.pi / 2, b), b), im))


def _atan(z):
    """atan z = -i atanh(iz)."""
    return _times_minus_i(_atanh(_times_i(z)))


def _rsqrt(z):
    return _div(_ones(z.re), _sqrt(z))


# --- rules ---------------------------------------------------------------------------------

for _prim, _fn in ((mul_p, _mul), (div_p, _div), (exp_p, _exp), (log_p, _log),
                   (sqrt_p, _sqrt), (rsqrt_p, _rsqrt), (sin_p, _sin), (cos_p, _cos),
                   (tan_p, _tan), (sinh_p, _sinh), (cosh_p, _cosh), (tanh_p, _tanh),
                   (expm1_p, _expm1), (log1p_p, _log1p), (sign_p, _sign),
                   (square_p, _square), (exp2_p, _exp2), (pow_p, _pow),
                   (max_p, _lexicographic(gt)), (min_p, _lexicographic(lt)),
                   (asin_p, _asin), (acos_p, _acos), (atan_p, _atan), (asinh_p, _asinh),
                   (acosh_p, _acosh), (atanh_p, _atanh)):
    complex_parts_lowering(_prim, lambda *zs, _fn=_fn, **params: _fn(*zs))
complex_parts_lowering(integer_pow_p, _integer_pow)
complex_parts_lowering(abs_p, _abs)
complex_parts_lowering(real_p, lambda z: z.re)
complex_parts_lowering(imag_p, lambda z: z.im)
complex_parts_lowering(complex_p, lambda x, y: Parts(*_broadcast_both(x, y)))
complex_parts_lowering(eq_p, lambda z, w: and_(eq(z.re, w.re), eq(z.im, w.im)))
complex_parts_lowering(ne_p, lambda z, w: or_(ne(z.re, w.re), ne(z.im, w.im)))


def _broadcast_both(x, y):
    """``complex(x, y)``'s operands at its result's shape (a rank-0 operand or size-1 axes
    broadcast)."""
    shape = tuple(np.broadcast_shapes(get_aval(x).shape, get_aval(y).shape))
    return [_broadcast_to(p, shape) for p in (x, y)]


def _conj(x, *, input_dtype):
    if isinstance(x, Parts):
        return Parts(x.re, neg(x.im))
    return Parts(x, _zeros(x))


complex_parts_lowering(conj_p, _conj)


def _convert(x, *, new_dtype, weak_type, **params):
    """Between complex types part by part; a real number gains a zero imaginary part; a
    complex number converted to a real type (bool too) keeps its real part, as JAX's."""
    if not isinstance(x, Parts):
        parts = real_dtype(new_dtype)
        return Parts(convert_element_type(x, parts), _zeros(convert_element_type(x, parts)))
    if dtypes.is_complex(new_dtype):
        return Parts(*[convert_element_type(p, real_dtype(new_dtype)) for p in x])
    return convert_element_type(x.re, new_dtype)


complex_parts_lowering(convert_element_type_p, _convert)


def _componentwise(prim):
    """The rule of a primitive that is linear and acts on the parts alike (adds, moves,
    sums or selects elements): the primitive on the real parts, and on the imaginary ones;
    real operands (indices, predicates) are passed to both as they are."""
    def rule(*operands, **params):
        return Parts(*[prim.bind(*[o[k] if isinstance(o, Parts) else o for o in operands],
                                 **params) for k in (0, 1)])
    return rule


for _prim in (add_p, sub_p, neg_p, cumsum_p, broadcast_in_dim_p, reshape_p,
              squeeze_p, transpose_p, slice_p, rev_p, pad_p, concatenate_p, dynamic_slice_p,
              dynamic_update_slice_p, select_n_p):
    complex_parts_lowering(_prim, _componentwise(_prim))


def _reduce_sum(z, *, axes, **params):
    """One sum of the parts side by side (the pairs of floats, as ``join`` writes them),
    split again: a single reduction kernel computes both from the operand's producers, where
    a sum of each part would be two kernels, each needing those producers' values."""
    return PairedParts.of(reduce_sum_p.bind(_pairs(z), axes=axes, **params))


complex_parts_lowering(reduce_sum_p, _reduce_sum)


def _gather(operand, indices, *, mode, fill_value, **params):
    """A gather of each part; out of bounds (``FILL_OR_DROP``), each part of the fill."""
    fills = (None, None)
    if mode == GatherScatterMode.FILL_OR_DROP:
        fill = complex(default_fill_value(np.complex64) if fill_value is None else fill_value)
        fills = (fill.real, fill.imag)
    return Parts(*[gather_p.bind(part, indices, mode=mode, fill_value=fill, **params)
                   for part, fill in zip(operand, fills)])


complex_parts_lowering(gather_p, _gather)

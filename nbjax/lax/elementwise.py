"""Element-wise primitives: arithmetic, rounding, comparisons, bit ops, complex numbers,
selection and dtype conversion (the transcendental functions are in ``transcendental``).

Each primitive is declared with a registrar defined here (``unop``/``binop``: abstract eval,
NumPy implementation, the shared batching rule) and wrapped by a lax function of the same
name (``add_p`` / ``add``); the bitwise ones are the exception JAX makes (``bitwise_and``
binds ``and_p``). The reference implementations are NumPy, corrected wherever NumPy and XLA
disagree: integer division, right shifts, float-to-int conversion, signed zeros in
``max``/``min``, ties in ``round``. Each correction says which rule it encodes.

Each section declares its primitives, then their derivatives, written as JAX writes them: a
JVP rule (usually one partial derivative per operand, through ``ad.defjvp``) and, for the
primitives that are linear in some operand, a transpose rule for reverse mode. Element-wise
operands may be rank-0 or have size-1 axes, so a transpose sums the cotangent back to its
operand's shape (``shapes.unbroadcast``). The batching rule of most of them is the shared
``batch_util.elementwise_batcher``, which the registrars attach; the few primitives with
their own shape rules (``select_n``, ``clamp``, ``bitcast_convert_type``) have their own.
Each section ends with its kernel lowerings: one element of the result in the compiler's
scalar operations (``ctx``; see ``standard.KernelLowering``).
"""

import enum
import functools
import operator
import warnings

import numpy as np

from ..core import (Array, Primitive, ShapedArray, Tracer, Var, dtypes, get_aval, pytree,
                   to_numpy)
from ..interpreters import ad
from ..interpreters.transpose import is_undefined
from . import batch_util, narrow_bits
from .shapes import broadcast_in_dim, filled, moveaxis, unbroadcast
from .standard import (ANY, COMPLEX, FLOAT, FLOAT_OR_INT, INT, INT_OR_BOOL, NUMBER,
                       ORDERED, SIGNED, broadcast_shapes, check_dtype, identity_simplification,
                       kernel_elementwise, owned_results, remembered, same_dtypes, same_type,
                       scalar_like)

__all__ = [
    # arithmetic
    "add", "add_p", "sub", "sub_p", "mul", "mul_p", "div", "div_p", "rem", "rem_p",
    "neg", "neg_p", "sign", "sign_p", "abs", "abs_p", "max", "max_p", "min", "min_p",
    "integer_pow", "integer_pow_p", "square", "square_p",
    # rounding and floating-point structure
    "floor", "floor_p", "ceil", "ceil_p", "round", "round_p", "RoundingMethod",
    "nextafter", "nextafter_p", "is_finite", "is_finite_p",
    # the identity that autodiff treats as a constant
    "stop_gradient", "stop_gradient_p",
    # comparisons
    "eq", "eq_p", "ne", "ne_p", "lt", "lt_p", "le", "le_p", "gt", "gt_p", "ge", "ge_p",
    # bits
    "bitwise_and", "and_p", "bitwise_or", "or_p", "bitwise_not", "not_p",
    "bitwise_xor", "xor_p", "shift_left", "shift_left_p",
    "shift_right_logical", "shift_right_logical_p",
    "shift_right_arithmetic", "shift_right_arithmetic_p",
    "population_count", "population_count_p", "clz", "clz_p",
    # complex numbers
    "real", "real_p", "imag", "imag_p", "conj", "conj_p", "complex", "complex_p",
    # selection
    "select", "select_n", "select_n_p", "clamp", "clamp_p",
    # dtype conversion
    "convert_element_type", "convert_element_type_p",
    "bitcast_convert_type", "bitcast_convert_type_p",
]


# --- helpers shared by the declarations below (and by ``special``) ---------------------------

def quiet(fn):
    """Silence NumPy's floating-point warnings: lax computes the IEEE result of 0/0, log(0),
    overflow... without complaint, as XLA does."""
    @functools.wraps(fn)
    def impl(*args, **params):
        with np.errstate(all="ignore"):
            return fn(*args, **params)
    return impl


def unop(name, impl, kind, result_dtype=None):
    """An element-wise unary primitive (abstract eval, quiet NumPy impl, the shared batching
    rule); ``result_dtype(dtype)`` when it changes the dtype."""
    prim = Primitive(name)

    def abstract_eval(x):
        check_dtype(name, x, kind)
        if result_dtype is None:
            return x
        return ShapedArray(x.shape, result_dtype(x.dtype), x.weak_type)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(quiet(impl))
    prim.def_batch(batch_util.elementwise_batcher(prim))
    return prim


def binop(name, impl, kinds, result_dtype=None):
    """An element-wise n-ary primitive taking one dtype kind per operand: equal dtypes, and
    only rank-0 operands and size-1 axes broadcast, as in JAX's lax."""
    prim = Primitive(name)

    def abstract_eval(*avals):
        if len(avals) != len(kinds):
            raise TypeError(f"{name} takes {len(kinds)} operands, got {len(avals)}")
        for i, (a, k) in enumerate(zip(avals, kinds)):
            check_dtype(name, a, k, i if len(kinds) > 1 else None)
        same_dtypes(name, avals)
        shape = broadcast_shapes(name, *(a.shape for a in avals))
        dtype = avals[0].dtype if result_dtype is None else result_dtype(avals[0].dtype)
        return ShapedArray(shape, dtype, all(a.weak_type for a in avals))
    prim.def_abstract_eval(remembered(abstract_eval))
    prim.def_impl(quiet(impl))
    prim.def_batch(batch_util.elementwise_batcher(prim))
    return prim


def _param_unop(name, impl, kind, result_dtype=None):
    """A unary primitive with params that do not change its output type (``round``)."""
    prim = unop(name, impl, kind, result_dtype)
    rule = prim.rule("abstract_eval")
    prim.def_abstract_eval(lambda x, **params: rule(x))
    return prim


def _kernel_method(name):
    """A kernel lowering that is one of the compiler builder's scalar ops (``ctx.add``)."""
    return lambda ctx, *xs, **params: getattr(ctx, name)(*xs)


def kernel_math(name):
    """A kernel lowering that calls the math library's ``name`` (``ctx.math("exp", x)``)."""
    return lambda ctx, *xs, **params: ctx.math(name, *xs)


def _named(fn, name, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def unary_function(prim, doc, name=None):
    """The lax function that binds a unary primitive."""
    def fn(x):
        return prim.bind(x)
    return _named(fn, name or prim.name, doc)


def accuracy_function(prim, doc):
    """A unary lax function that also takes JAX's ``accuracy`` (an ``AccuracyMode`` or a
    ``Tolerance``): nbjax has one implementation of each (within a few ulps: its math
    library), which it uses whatever is asked, as JAX does where it has only one."""
    def fn(x, accuracy=None):
        return prim.bind(x)
    return _named(fn, prim.name, doc)


def binary_function(prim, doc, name=None):
    """The lax function that binds a binary primitive. Its operands must have equal dtypes; a
    Python scalar has its own default dtype (weakly), as in JAX: lax never promotes."""
    def fn(x, y):
        return prim.bind(x, y)
    return _named(fn, name or prim.name, doc)


def _unsigned(dtype):
    return np.dtype(f"u{dtype.itemsize}")


def _signed(dtype):
    return np.dtype(f"i{dtype.itemsize}")


def _real_dtype(dtype):
    """float32 for complex64, float64 for complex128; real dtypes are their own."""
    return dtypes.finfo(dtype).dtype if dtypes.is_complex(dtype) else dtype


def _complex_dtype(dtype):
    """complex64 for float32 (and complex64), complex128 for float64 (and complex128)."""
    return np.result_type(dtype, np.complex64)


def _full_like(x, value):
    """``value`` in the shape, dtype and weak type of ``x`` (a literal when ``x`` is rank-0)."""
    return filled(get_aval(x), value)


def broadcast_operand(x, shape):
    """``x`` (rank-0, or of equal rank with size-1 axes) broadcast as an element-wise
    primitive broadcasts its operands to the output ``shape``."""
    old_shape = get_aval(x).shape
    if old_shape == shape:
        return x
    dims = tuple(range(len(shape))) if old_shape else ()
    return broadcast_in_dim(x, shape, dims)


def _from_parts(re, im):
    """``re + i*im`` built field by field: arithmetic would turn ``inf * 1j`` into nan+inf*j."""
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, _complex_dtype(re.dtype))
    out.real, out.imag = re, im
    return out


# --- arithmetic ----------------------------------------------------------------------------

def _c_division(x, y):
    """Integer quotient and remainder as XLA defines them on integers.

    Both round toward zero, as in C (NumPy's ``//`` rounds down): ``-7 / 2 == -3`` and
    ``-7 % 2 == -1`` (the remainder has the dividend's sign). XLA also defines what C leaves
    undefined: ``x / 0`` has every bit set (-1, or the maximum of an unsigned type), ``x % 0``
    is ``x``, and ``INT_MIN / -1`` wraps to ``INT_MIN`` with remainder 0.
    """
    by_zero = y == 0
    safe_y = np.where(by_zero, np.ones((), y.dtype), y)
    r = np.fmod(x, safe_y)  # C's %; NumPy makes INT_MIN % -1 == 0
    q = np.floor_divide(x - r, safe_y)  # x - r is a multiple of y: the division is exact
    all_bits = np.array(-1).astype(x.dtype)
    return np.where(by_zero, all_bits, q), np.where(by_zero, x, r)


def _div_impl(x, y):
    if dtypes.is_int(x.dtype):
        return _c_division(x, y)[0]
    return np.true_divide(x, y)


def _rem_impl(x, y):
    if dtypes.is_int(x.dtype):
        return _c_division(x, y)[1]
    return np.fmod(x, y)  # C's fmod: the result has the dividend's sign


def _sign_impl(x):
    """-1, 0 or 1; NaN stays NaN, -0.0 stays -0.0 (NumPy makes it 0.0); a complex number
    becomes ``x / |x|`` (0 for 0), computed part by part as XLA does."""
    if dtypes.is_complex(x.dtype):
        r = np.abs(x)
        return np.where(x == 0, np.zeros((), x.dtype), _from_parts(x.real / r, x.imag / r))
    return np.where(x == 0, x, np.sign(x))


def _lexicographic(compare, x, y):
    """Complex max/min as XLA: compare real parts, imaginary parts on a tie; pick ``x`` where
    the comparison holds, else ``y`` (so a NaN part never wins)."""
    take_x = np.where(x.real == y.real, compare(x.imag, y.imag), compare(x.real, y.real))
    return np.where(take_x, x, y)


def _max_impl(x, y):
    if dtypes.is_complex(x.dtype):
        return _lexicographic(np.greater, x, y)
    if not dtypes.is_float(x.dtype):
        return np.maximum(x, y)
    # NaN wins; on a tie of zeros 0.0 beats -0.0 (NumPy's maximum returns either one).
    take_x = (x > y) | np.isnan(x) | ((x == y) & np.signbit(y))
    return np.where(take_x, x, y)


def _min_impl(x, y):
    if dtypes.is_complex(x.dtype):
        return _lexicographic(np.less, x, y)
    if not dtypes.is_float(x.dtype):
        return np.minimum(x, y)
    # NaN wins; on a tie of zeros -0.0 beats 0.0.
    take_x = (x < y) | np.isnan(x) | ((x == y) & ~np.signbit(y))
    return np.where(take_x, x, y)


add_p = binop("add", np.add, [NUMBER, NUMBER])
sub_p = binop("sub", np.subtract, [NUMBER, NUMBER])
mul_p = binop("mul", np.multiply, [NUMBER, NUMBER])
div_p = binop("div", _div_impl, [NUMBER, NUMBER])
rem_p = binop("rem", _rem_impl, [FLOAT_OR_INT, FLOAT_OR_INT])
max_p = binop("max", _max_impl, [ANY, ANY])
min_p = binop("min", _min_impl, [ANY, ANY])
neg_p = unop("neg", np.negative, NUMBER)
sign_p = unop("sign", _sign_impl, NUMBER)
abs_p = unop("abs", np.abs, SIGNED, _real_dtype)

add = binary_function(add_p, "Element-wise ``x + y``; operands must have equal dtypes "
                             "(``jnp.add`` promotes).")
sub = binary_function(sub_p, "Element-wise ``x - y``.")
def mul(x, y, out_dtype=None):
    """Element-wise ``x * y``; with ``out_dtype``, of the operands converted to it first (as
    JAX says its backends typically do: ``int8 * int8`` exact in ``int32``)."""
    if out_dtype is not None:
        x, y = (convert_element_type(v, out_dtype) for v in (x, y))
    return mul_p.bind(x, y)
div = binary_function(div_p, "Element-wise ``x / y``; integers round toward zero, as in C.")
rem = binary_function(rem_p, "Element-wise remainder of ``div``: it has the sign of ``x``, "
                             "as C's ``%`` and ``fmod``.")
max = binary_function(max_p, "Element-wise maximum; NaN propagates, complex numbers compare "
                             "lexicographically.")
min = binary_function(min_p, "Element-wise minimum; NaN propagates, complex numbers compare "
                             "lexicographically.")
neg = unary_function(neg_p, "Element-wise ``-x`` (unsigned integers wrap around).")
sign = unary_function(sign_p, "Element-wise sign: -1, 0 or 1 (``x / |x|`` for complex).")
abs = unary_function(abs_p, "Element-wise ``|x|``; complex inputs give their real dtype.")

# What the compiler may simplify: x * 1 and x - 0 are exact; x + 0 only for integers.
identity_simplification(mul_p, "*", 1, commutes=True, exact_for_complex=False)
identity_simplification(sub_p, "-", 0, commutes=False)
identity_simplification(add_p, "+", 0, commutes=True, exact_for_floats=False)


def _simplify_double_negation(eqn, ins, producer_of, use_count, value_of):
    producer = producer_of(ins[0])
    if producer is not None and producer.primitive is neg_p:
        return producer.invars[0], "double negation"
    return None


neg_p.def_rule("simplify", _simplify_double_negation)


def power_by_squaring(base, n, multiply):
    """``base ** n`` for a whole ``n`` from ``multiply`` alone: square ``base`` repeatedly and
    multiply in the powers the bits of ``n`` select, in the order JAX's lowering of
    ``integer_pow`` does (so that every implementation of it rounds alike). The product
    starts from ``base`` itself, not from 1 (``1 * (inf+1j)`` would be ``inf+nanj``); None
    for ``n = 0``."""
    result = None
    while n:
        if n & 1:
            result = base if result is None else multiply(result, base)
        n >>= 1
        if n:
            base = multiply(base, base)
    return result


def _integer_pow_impl(x, *, y):
    """``x ** y`` by repeated squaring, as JAX lowers it (so floats round as in JAX), and
    ``1 / x ** -y`` for negative ``y``. ``x ** 0`` is 1 even for NaN."""
    if y == 0:
        return np.ones_like(x)
    result = power_by_squaring(x, abs(y), operator.mul)
    return 1 / result if y < 0 else result


integer_pow_p = Primitive("integer_pow")
integer_pow_p.def_impl(quiet(_integer_pow_impl))


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x, *, y):
    check_dtype("integer_pow", x, NUMBER)
    if y < 0 and dtypes.is_int(x.dtype):
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.str_short()}, {y})")
    return x


def integer_pow(x, y):
    """Element-wise ``x ** y`` for a static Python integer ``y`` (TypeError for any other
    number, as JAX: 1.5 was truncated to 1)."""
    return integer_pow_p.bind(x, y=operator.index(y))


def _square_impl(x):
    """``x * x``; a complex ``a + bi`` squared as XLA squares it, ``(a - b)(a + b) + 2ab i``,
    whose real part stays finite where ``a² - b²`` would be ``inf - inf``."""
    if not np.iscomplexobj(x):
        return x * x
    a, b = x.real, x.imag
    out = np.empty_like(x)
    out.real, out.imag = (a - b) * (a + b), 2 * (a * b)
    return out


square_p = unop("square", _square_impl, NUMBER)
square = unary_function(square_p, "Element-wise ``x * x`` (``jnp.square``'s one equation, as "
                                  "JAX's); its derivative is ``2 x``.")


def _simplify_integer_pow(eqn, ins, producer_of, use_count, value_of):
    """Small powers as multiplies, which fuse like any element-wise op."""
    (x,), (out,), y = ins, eqn.outvars, eqn.params["y"]
    if y == 1:
        return x, "x ** 1"

    def mul(a, b, result):
        return eqn.replace(invars=[a, b], outvars=[result], primitive=mul_p, params={})
    if y == 2:
        return [mul(x, x, out)], "x ** 2 as x * x"
    if y == 3:
        square = Var(x.aval)
        return [mul(x, x, square), mul(square, x, out)], "x ** 3 as (x * x) * x"
    return None


integer_pow_p.def_rule("simplify", _simplify_integer_pow)


# Derivatives of the arithmetic primitives.

def _add_sub_jvp(prim, sign_of_second):
    """add and sub are linear: the output tangent is the sum (difference) of the tangents.
    A tangent alone is broadcast to the output's shape, as the other operand would be."""
    def rule(primals, tangents):
        out = prim.bind(*primals)
        shape = get_aval(out).shape
        tx, ty = tangents
        if isinstance(tx, ad.Zero):
            return out, broadcast_operand(sign_of_second(ty), shape)
        if isinstance(ty, ad.Zero):
            return out, broadcast_operand(tx, shape)
        return out, prim.bind(tx, ty)
    prim.tangent_from_operands = True
    return rule


def _ct_for(operand, ct):
    """The cotangent of an operand that is being solved for, summed to its shape; None (no
    cotangent) for an operand that is a known value."""
    return unbroadcast(ct, operand.aval) if is_undefined(operand) else None


def _mul_transpose(ct, x, y):
    """``mul`` is linear in whichever operand is unknown: ``t -> t * y`` transposes to
    ``ct -> ct * y`` (no conjugation: transposes are plain transposes, as in JAX)."""
    if is_undefined(x) and is_undefined(y):
        raise ValueError("mul of two linear values is not linear: cannot transpose it")
    if is_undefined(x):
        return [unbroadcast(mul(ct, y), x.aval), None]
    return [None, unbroadcast(mul(x, ct), y.aval)]


def _div_transpose(ct, x, y):
    """``div`` is linear in its numerator only."""
    if is_undefined(y):
        raise ValueError("div is not linear in its denominator: cannot transpose it")
    return [unbroadcast(div(ct, y), x.aval), None]


def _balanced_eq(x, ans, other):
    """The share of ``x``'s tangent in ``max``/``min``: 1 where ``x`` was chosen, halved where
    ``other`` ties with it (JAX splits a tie evenly), 0 elsewhere."""
    chosen = select(eq(x, ans), _full_like(ans, 1), _full_like(ans, 0))
    tie = select(eq(other, ans), _full_like(ans, 2), _full_like(ans, 1))
    return div(chosen, tie)


def replace_zero(x):
    """``x`` with its zeros replaced by ones: a divisor (or log argument) that is safe where
    the quantity it feeds is multiplied by zero anyway."""
    return select(eq(x, _full_like(x, 0)), _full_like(x, 1), x)


def _abs_jvp(g, ans, x):
    """Real: ``sign(x) g``, with the derivative at 0 taken as +1 (``x >= 0``), as JAX does.
    Complex: ``Re(conj(x) g) / |x|``, taken as 0 at 0."""
    if dtypes.is_complex(get_aval(x).dtype):
        magnitude = replace_zero(convert_element_type(ans, get_aval(x).dtype))
        return real(mul(g, div(conj(x), magnitude)))
    return select(ge(x, _full_like(x, 0)), g, neg(g))


def _integer_pow_jvp(g, x, *, y):
    """``y x**(y-1) g``; the power is again an integer_pow, so ``x**3`` has an exact gradient."""
    if y == 0:
        return ad.Zero(get_aval(g))
    if y == 1:
        return g
    if y == 2:
        return mul(g, mul(scalar_like(x, 2), x))
    return mul(g, mul(scalar_like(x, y), integer_pow(x, y - 1)))


add_p.def_jvp(_add_sub_jvp(add_p, lambda t: t))
add_p.def_transpose(lambda ct, x, y: [_ct_for(x, ct), _ct_for(y, ct)])
sub_p.def_jvp(_add_sub_jvp(sub_p, neg))
sub_p.def_transpose(lambda ct, x, y: [_ct_for(x, ct), _ct_for(y, neg(ct))])
ad.defjvp(mul_p, lambda g, x, y: mul(g, y), lambda g, x, y: mul(x, g))
mul_p.def_transpose(_mul_transpose)
ad.defjvp(div_p, lambda g, x, y: div(g, y),
          lambda g, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))
div_p.def_transpose(_div_transpose)
# rem(x, y) = x - trunc(x / y) * y, and trunc is locally constant.
ad.defjvp(rem_p, lambda g, x, y: broadcast_operand(g, broadcast_shapes("rem", get_aval(x).shape,
                                                                   get_aval(y).shape)),
          lambda g, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))
ad.defjvp2(max_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
           lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
ad.defjvp2(min_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
           lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
ad.deflinear(neg_p, lambda ct, x: [neg(ct)])
ad.defjvp_zero(sign_p)
ad.defjvp2(abs_p, _abs_jvp)
ad.defjvp(integer_pow_p, _integer_pow_jvp)
ad.defjvp(square_p, lambda g, x: mul(g, mul(scalar_like(x, 2), x)))
integer_pow_p.def_batch(batch_util.elementwise_batcher(integer_pow_p))


def _kernel_division(ctx, x, y, quotient):
    """XLA's integer division: ``x / 0`` has every bit set, ``x % 0`` is ``x``, ``MIN / -1``
    wraps to ``MIN`` (remainder 0); elsewhere C's division (see ``_c_division``)."""
    if not dtypes.is_int(x.dtype):
        return ctx.div(x, y) if quotient else ctx.rem(x, y)
    by_zero = ctx.eq(y, 0)
    unsafe = by_zero
    if dtypes.is_signed_int(x.dtype):
        overflow = ctx.and_(ctx.eq(x, int(dtypes.iinfo(x.dtype).min)), ctx.eq(y, -1))
        unsafe = ctx.or_(by_zero, overflow)
    safe_y = ctx.select(unsafe, 1, y)
    if quotient:
        return ctx.select(by_zero, -1, ctx.div(x, safe_y))
    return ctx.select(by_zero, x, ctx.rem(x, safe_y))


def _kernel_integer_pow(ctx, x, *, y):
    """Repeated squaring, as ``_integer_pow_impl`` (so the rounding is the same)."""
    result = power_by_squaring(x, abs(y), ctx.mul)
    result = ctx.const(1, x.dtype) if result is None else result
    return ctx.div(1, result) if y < 0 else result


for _prim in (add_p, ad.add_any_p):
    kernel_elementwise(_prim, _kernel_method("add"), sums=True)
for _prim, _name in ((sub_p, "sub"), (mul_p, "mul"), (max_p, "max"), (min_p, "min"),
                     (neg_p, "neg"), (abs_p, "abs")):
    kernel_elementwise(_prim, _kernel_method(_name))
kernel_elementwise(div_p, lambda ctx, x, y: _kernel_division(ctx, x, y, True))
kernel_elementwise(rem_p, lambda ctx, x, y: _kernel_division(ctx, x, y, False))
kernel_elementwise(sign_p, lambda ctx, x: ctx.select(ctx.gt(x, 0), 1,
                                                     ctx.select(ctx.lt(x, 0), -1, x)))
kernel_elementwise(integer_pow_p, _kernel_integer_pow)
kernel_elementwise(square_p, lambda ctx, x: ctx.mul(x, x))


# --- rounding and floating-point structure -------------------------------------------------

class RoundingMethod(enum.IntEnum):
    """How ``round`` breaks ties: ``0.5 -> 1, -0.5 -> -1`` or ``0.5 -> 0, 1.5 -> 2``."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1

    def __str__(self):  # jaxprs print ``round[rounding_method=1]``, on every Python version
        return str(self.value)


def _round_impl(x, *, rounding_method):
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return np.rint(x)
    whole = np.trunc(x)
    # x - trunc(x) is exact in floating point, so the tie test is too (floor(x + 0.5) is not:
    # it rounds 0.49999997 up). Infinities give inf - inf = NaN, which fails the test.
    return np.where(np.abs(x - whole) >= 0.5, whole + np.copysign(1, x), whole)


floor_p = unop("floor", np.floor, FLOAT)
ceil_p = unop("ceil", np.ceil, FLOAT)
round_p = _param_unop("round", _round_impl, FLOAT)
nextafter_p = binop("nextafter", np.nextafter, [FLOAT, FLOAT])
is_finite_p = unop("is_finite", np.isfinite, FLOAT, lambda d: dtypes.bool_)

floor = unary_function(floor_p, "Element-wise round toward -inf.")
ceil = unary_function(ceil_p, "Element-wise round toward +inf.")
def nextafter(x1, x2):
    """The next representable float after ``x1`` in the direction of ``x2``."""
    return nextafter_p.bind(x1, x2)
is_finite = unary_function(is_finite_p, "Element-wise: neither infinite nor NaN.")


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Element-wise round to an integral value; ties as ``rounding_method`` says."""
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


# Piecewise constant: the derivative is zero wherever it exists. (Not ``nextafter``, whose
# derivative in ``x1`` is 1 almost everywhere: it has no JVP rule, so differentiating it is
# JAX's NotImplementedError rather than a silent zero.)
for _prim in (floor_p, ceil_p, round_p, is_finite_p):
    ad.defjvp_zero(_prim)


for _prim in (floor_p, ceil_p, nextafter_p):
    kernel_elementwise(_prim, kernel_math(_prim.name))
kernel_elementwise(round_p, lambda ctx, x, rounding_method: ctx.math(
    "rint" if rounding_method == RoundingMethod.TO_NEAREST_EVEN else "round", x))
kernel_elementwise(is_finite_p, lambda ctx, x: ctx.lt(ctx.abs(x), np.inf))


# --- comparisons ---------------------------------------------------------------------------

def _to_bool(dtype):
    return dtypes.bool_


eq_p = binop("eq", np.equal, [ANY, ANY], _to_bool)
ne_p = binop("ne", np.not_equal, [ANY, ANY], _to_bool)
lt_p = binop("lt", np.less, [ORDERED, ORDERED], _to_bool)
le_p = binop("le", np.less_equal, [ORDERED, ORDERED], _to_bool)
gt_p = binop("gt", np.greater, [ORDERED, ORDERED], _to_bool)
ge_p = binop("ge", np.greater_equal, [ORDERED, ORDERED], _to_bool)

eq = binary_function(eq_p, "Element-wise ``x == y``.")
ne = binary_function(ne_p, "Element-wise ``x != y``.")
lt = binary_function(lt_p, "Element-wise ``x < y``.")
le = binary_function(le_p, "Element-wise ``x <= y``.")
gt = binary_function(gt_p, "Element-wise ``x > y``.")
ge = binary_function(ge_p, "Element-wise ``x >= y``.")


for _prim in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p):
    kernel_elementwise(_prim, _kernel_method(_prim.name))


# --- bits ----------------------------------------------------------------------------------

# C leaves shifts by negative amounts or by the bit width or more undefined; XLA defines
# them, and NumPy (since 1.17) defines them the same way: the amount is read as unsigned, a
# left or logical right shift that far gives 0, an arithmetic one fills with the sign bit. What
# NumPy does not do is choose the kind of right shift by anything but the signedness of
# ``x``, so the two right shifts reinterpret the bits first (same width, so ``view``).

def _narrow_or(impl, name):
    """``impl``, or for ml_dtypes' 1-, 2- and 4-bit integers ``narrow_bits.<name>`` (NumPy
    would work on their whole byte)."""
    narrow = getattr(narrow_bits, name)

    @functools.wraps(impl)
    def dispatch(x, *rest):
        return (narrow if dtypes.is_ml_dtype(x.dtype) else impl)(x, *rest)
    return dispatch


def _shift_right_logical_impl(x, y):
    """Shift in zeros, even for signed ``x``."""
    unsigned = _unsigned(x.dtype)
    return np.right_shift(x.view(unsigned), y.view(unsigned)).view(x.dtype)


def _shift_right_arithmetic_impl(x, y):
    """Shift in copies of the top bit, even for unsigned ``x`` (uint8 128 >> 1 == 192)."""
    signed = _signed(x.dtype)
    return np.right_shift(x.view(signed), y.view(signed)).view(x.dtype)


def _bits(x):
    """Each element's bits, most significant first, along a new last axis."""
    big_endian = np.asarray(x, x.dtype.newbyteorder(">"))
    as_bytes = np.frombuffer(big_endian.tobytes(), np.uint8)
    return np.unpackbits(as_bytes.reshape(x.shape + (x.dtype.itemsize,)), axis=-1)


def _population_count_impl(x):
    return _bits(x).sum(axis=-1).astype(x.dtype)


def _clz_impl(x):
    """Leading zero bits: the index of the first set bit, or the bit width if there is none."""
    bits = _bits(x)
    return np.where(bits.any(axis=-1), bits.argmax(axis=-1), bits.shape[-1]).astype(x.dtype)


and_p = binop("and", np.bitwise_and, [INT_OR_BOOL, INT_OR_BOOL])
or_p = binop("or", np.bitwise_or, [INT_OR_BOOL, INT_OR_BOOL])
xor_p = binop("xor", np.bitwise_xor, [INT_OR_BOOL, INT_OR_BOOL])
not_p = unop("not", np.invert, INT_OR_BOOL)
shift_left_p = binop("shift_left", _narrow_or(np.left_shift, "shift_left"), [INT, INT])
shift_right_logical_p = binop(
    "shift_right_logical", _narrow_or(_shift_right_logical_impl, "shift_right_logical"),
    [INT, INT])
shift_right_arithmetic_p = binop(
    "shift_right_arithmetic",
    _narrow_or(_shift_right_arithmetic_impl, "shift_right_arithmetic"), [INT, INT])
population_count_p = unop("population_count",
                          _narrow_or(_population_count_impl, "population_count"), INT)
clz_p = unop("clz", _narrow_or(_clz_impl, "clz"), INT)

bitwise_and = binary_function(and_p, "Element-wise AND of bools or integer bits.",
                              "bitwise_and")
bitwise_or = binary_function(or_p, "Element-wise OR of bools or integer bits.", "bitwise_or")
bitwise_xor = binary_function(xor_p, "Element-wise XOR of bools or integer bits.",
                              "bitwise_xor")
bitwise_not = unary_function(not_p, "Element-wise NOT of bools or integer bits.",
                             "bitwise_not")
shift_left = binary_function(shift_left_p, "Element-wise ``x << y``; shifting by the bit "
                                           "width or more gives 0.")
shift_right_logical = binary_function(
    shift_right_logical_p, "Element-wise right shift filling with zeros; shifting by the bit "
                           "width or more gives 0.")
shift_right_arithmetic = binary_function(
    shift_right_arithmetic_p, "Element-wise right shift filling with the sign bit; shifting "
                              "by the bit width or more fills every bit with it.")
population_count = unary_function(population_count_p, "Element-wise number of set bits.")
clz = unary_function(clz_p, "Element-wise number of leading zero bits.")


# Comparisons and bit operations have boolean or integer results: float0 (zero) tangents.
for _prim in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p, and_p, or_p, xor_p, not_p, shift_left_p,
              shift_right_logical_p, shift_right_arithmetic_p, population_count_p, clz_p):
    ad.defjvp_zero(_prim)


def _kernel_shift(kind):
    """Shifts by a negative amount or by the bit width or more: 0, or the sign fill."""
    def rule(ctx, x, y):
        bits = 8 * x.dtype.itemsize
        too_far = ctx.ge(y, bits)
        if dtypes.is_signed_int(y.dtype):
            too_far = ctx.or_(too_far, ctx.lt(y, 0))
        shifted = getattr(ctx, kind)(x, ctx.select(too_far, 0, y))
        fill = ctx.shr_arith(x, bits - 1) if kind == "shr_arith" else 0
        return ctx.select(too_far, fill, shifted)
    return rule


for _prim, _name in ((and_p, "and_"), (or_p, "or_"), (xor_p, "xor"), (not_p, "not_"),
                     (population_count_p, "popcount"), (clz_p, "clz")):
    kernel_elementwise(_prim, _kernel_method(_name))
kernel_elementwise(shift_left_p, _kernel_shift("shl"))
kernel_elementwise(shift_right_logical_p, _kernel_shift("shr_logical"))
kernel_elementwise(shift_right_arithmetic_p, _kernel_shift("shr_arith"))


# --- complex numbers -----------------------------------------------------------------------

# ``complex`` and ``conj`` accept float32 and float64 (there is no complex32 for float16).
_COMPLEX_PARTS = ("float32, float64", lambda d: d in (dtypes.float32, dtypes.float64))
_CONJ_INPUT = ("float32, complexfloating, float64",
               lambda d: _COMPLEX_PARTS[1](d) or dtypes.is_complex(d))

real_p = unop("real", np.real, COMPLEX, _real_dtype)
imag_p = unop("imag", np.imag, COMPLEX, _real_dtype)
complex_p = binop("complex", _from_parts, [_COMPLEX_PARTS, _COMPLEX_PARTS], _complex_dtype)
# ``input_dtype`` records whether the input was real, which conj's transpose needs.
conj_p = _param_unop("conj", lambda x, *, input_dtype: np.conj(x).astype(_complex_dtype(x.dtype)),
                     _CONJ_INPUT, _complex_dtype)

real = unary_function(real_p, "Element-wise real part.")
imag = unary_function(imag_p, "Element-wise imaginary part.")
complex = binary_function(complex_p, "Element-wise ``x + i y`` from two float arrays.")


def conj(x):
    """Element-wise complex conjugate; a real input becomes complex."""
    return conj_p.bind(x, input_dtype=get_aval(x).dtype)


# Derivatives of the complex-number primitives: all are linear (over the reals). Their
# transposes follow JAX's convention, which pairs a cotangent ``c`` with a tangent ``t``
# as ``Re(c * t)`` (no conjugate): so ``imag``'s transpose is ``-i c`` and ``conj``'s is
# ``conj``.

def _complex_transpose(ct, x, y):
    return [unbroadcast(real(ct), x.aval) if is_undefined(x) else None,
            unbroadcast(neg(imag(ct)), y.aval) if is_undefined(y) else None]


def _conj_transpose(ct, x, *, input_dtype):
    return [conj(ct) if dtypes.is_complex(input_dtype) else real(ct)]


ad.deflinear(real_p, lambda ct, x: [complex(ct, scalar_like(ct, 0))])
ad.deflinear(imag_p, lambda ct, x: [complex(scalar_like(ct, 0), neg(ct))])
ad.deflinear(complex_p, _complex_transpose)
ad.deflinear(conj_p, _conj_transpose)


# --- selection -----------------------------------------------------------------------------

select_n_p = Primitive("select_n")


@select_n_p.def_abstract_eval
@remembered
def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise TypeError("select must have at least one case")
    if any(c.shape != cases[0].shape for c in cases[1:]):
        raise TypeError(f"select cases must have the same shapes, got "
                        f"[{', '.join(str(c.shape) for c in cases)}].")
    if which.shape and which.shape != cases[0].shape:
        raise TypeError(f"select `which` must be scalar or have the same shape as cases, got "
                        f"`which` shape {which.shape} but case shape {cases[0].shape}.")
    same_dtypes("select", cases)
    if not (dtypes.is_bool(which.dtype) or dtypes.is_int(which.dtype)):
        raise TypeError(f"select `which` must be boolean or integer type, got {which.dtype}.")
    if dtypes.is_bool(which.dtype) and len(cases) > 2:
        raise TypeError("select with boolean `which` cannot have > 2 cases.")
    return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


@select_n_p.def_impl
def _select_n_impl(which, *cases):
    # XLA lowers select_n to comparisons of ``which`` with the case numbers, so a value below
    # 0 picks the first case and one past the end the last. (Going through float64 keeps huge
    # uint64 values huge; every index that matters is exact there.)
    index = np.clip(which.astype(np.float64), 0, len(cases) - 1).astype(np.intp)
    stacked = np.stack(cases)
    index = np.broadcast_to(index, stacked.shape[1:])
    return np.take_along_axis(stacked, index[None], axis=0)[0]


def select_n(which, *cases):
    """``cases[which]`` element-wise; ``which`` is a bool (two cases) or an integer array."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` holds, else ``on_false`` (``select_n`` lists the false case
    first, as it is case 0)."""
    return select_n(pred, on_false, on_true)


clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_abstract_eval(lo, x, hi):
    for name, bound in (("min", lo), ("max", hi)):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(f"clamp requires {name}.shape == operand.shape or {name}.shape == "
                            f"(), got {name}.shape={bound.shape}, operand.shape={x.shape}.")
    same_dtypes("clamp", [lo, x, hi])
    return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


@clamp_p.def_impl
def _clamp_impl(lo, x, hi):
    return _min_impl(_max_impl(x, lo), hi)  # XLA's order: with lo > hi every value is hi


def clamp(min, x, max):
    """``x`` limited to ``[min, max]``; the bounds are scalars or arrays shaped like ``x``."""
    return clamp_p.bind(min, x, max)


# Derivatives and batching of select_n and clamp.

def _select_n_jvp(primals, tangents):
    """Linear in the cases (the chosen tangent passes through), constant in ``which``."""
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    case_tangents = tangents[1:]
    if all(isinstance(t, ad.Zero) for t in case_tangents):
        return out, ad.Zero.like(out)
    return out, select_n_p.bind(which, *map(ad.instantiate, case_tangents))


def _select_n_transpose(ct, which, *cases):
    """Case i receives the cotangent where it was chosen, zero elsewhere: the same select
    with ``ct`` as case i and zeros as every other case."""
    if is_undefined(which):
        raise ValueError("select_n whose choice depends on the linear values is not linear: "
                         "cannot transpose it")
    zeros = _full_like(ct, 0)

    def ct_of(i):
        return select_n_p.bind(which, *[ct if j == i else zeros for j in range(len(cases))])
    return [None] + [ct_of(i) if is_undefined(case) else None for i, case in enumerate(cases)]


def _batched_to(x, bdim, shape, out_dim, keep_scalar):
    """``x`` as an operand of a batched select_n or clamp whose full operands have ``shape``
    (batch axis at ``out_dim``). Those primitives do not broadcast size-1 axes, only rank-0
    operands, and only in some positions: an unbatched rank-0 ``x`` stays so if
    ``keep_scalar``; a batched per-example scalar is broadcast along the batch axis."""
    rank = batch_util.ndim(x)
    if bdim is None:
        if rank == 0:
            return x if keep_scalar else broadcast_in_dim(x, shape, ())
        return batch_util.broadcast_batch(x, shape[out_dim], out_dim)
    if rank == 1 and len(shape) > 1:
        return broadcast_in_dim(x, shape, (out_dim,))
    return moveaxis(x, bdim, out_dim)


def _batch_axis_and_shape(vals, dims, full_index):
    """Where the batched result keeps its batch axis, and its shape: the batch axis stays where
    an operand of the full (per-example) rank has it already, else it goes in front."""
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    full, full_dim = vals[full_index], dims[full_index]
    example_shape = list(get_aval(full).shape)
    if full_dim is not None:
        del example_shape[full_dim]
    rank = len(example_shape)
    out_dim = next((d for v, d in zip(vals, dims)
                    if d is not None and batch_util.ndim(v) == rank + 1), 0)
    return out_dim, tuple(example_shape[:out_dim] + [size] + example_shape[out_dim:])


def _select_n_batch(axis_data, vals, dims):
    out_dim, shape = _batch_axis_and_shape(vals, dims, full_index=1)
    which = _batched_to(vals[0], dims[0], shape, out_dim, keep_scalar=True)
    cases = [_batched_to(c, d, shape, out_dim, keep_scalar=False)
             for c, d in zip(vals[1:], dims[1:])]
    return select_n_p.bind(which, *cases), out_dim


def _clamp_batch(axis_data, vals, dims):
    out_dim, shape = _batch_axis_and_shape(vals, dims, full_index=1)
    lo, x, hi = (_batched_to(v, d, shape, out_dim, keep_scalar=(i != 1))
                 for i, (v, d) in enumerate(zip(vals, dims)))
    return clamp_p.bind(lo, x, hi), out_dim


def _clamp_partial(condition):
    """The tangent of one clamp operand: passed on where ``condition(lo, x, hi)`` says that
    operand is the result (broadcast first if it is a rank-0 bound), zero elsewhere."""
    def partial(g, lo, x, hi):
        shape = get_aval(x).shape
        return select(condition(lo, x, hi), broadcast_operand(g, shape), _full_like(x, 0))
    return partial


select_n_p.def_jvp(_select_n_jvp)
select_n_p.def_transpose(_select_n_transpose)
select_n_p.def_batch(_select_n_batch)
# JAX's rule: where x equals a bound, no operand gets the tangent. (With lo > hi, where the
# result is hi everywhere, it too gives hi's tangent only where x > hi.)
ad.defjvp(clamp_p,
          _clamp_partial(lambda lo, x, hi: bitwise_and(gt(lo, x), lt(lo, hi))),
          _clamp_partial(lambda lo, x, hi: bitwise_and(gt(x, lo), lt(x, hi))),
          _clamp_partial(lambda lo, x, hi: lt(hi, x)))
clamp_p.def_batch(_clamp_batch)


def _kernel_select_n(ctx, which, *cases):
    """Case ``which``, where a value below 0 picks case 0 and one past the end the last."""
    if which.dtype == dtypes.bool_:
        return ctx.select(which, cases[1], cases[0]) if len(cases) > 1 else cases[0]
    result = cases[0]
    for i, case in enumerate(cases[1:], 1):
        result = ctx.select(ctx.ge(which, i), case, result)
    return result


kernel_elementwise(select_n_p, _kernel_select_n)
kernel_elementwise(clamp_p, lambda ctx, lo, x, hi: ctx.min(ctx.max(x, lo), hi))


# --- dtype conversion ----------------------------------------------------------------------

def _float_to_int(x, dtype):
    """Float to integer as XLA converts: toward zero, saturating at the type's bounds, NaN to 0.

    The bounds ``min`` and ``max + 1`` are powers of two (or 0), so comparing against them is
    exact in any float type; clipping to ``max`` instead would round ``2**31 - 1`` up to
    ``2**31`` in float32, which then overflows.
    """
    info = dtypes.iinfo(dtype)
    whole = np.trunc(x)
    above = whole >= float(info.max + 1)
    below = whole < float(info.min)
    fits = ~(above | below | np.isnan(whole))
    out = np.where(fits, whole, 0).astype(dtype)
    return np.where(above, info.max, np.where(below, info.min, out)).astype(dtype)


convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_element_type_abstract_eval(x, *, new_dtype, weak_type):
    check_dtype("convert_element_type", x, ANY)
    return ShapedArray(x.shape, new_dtype, weak_type)


@convert_element_type_p.def_impl
@quiet
def _convert_element_type_impl(x, *, new_dtype, weak_type):
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = np.real(x)  # JAX keeps the real part, also when converting to bool
    if dtypes.is_float(x.dtype) and dtypes.is_int(new_dtype):
        return _float_to_int(x, new_dtype)
    # Everything else is NumPy's astype: integers wrap, floats round to nearest (overflowing
    # to inf), and bool is ``x != 0`` (so NaN is True).
    return np.asarray(x).astype(new_dtype)


def convert_element_type(operand, new_dtype, weak_type=False):
    """Convert ``operand`` to ``new_dtype`` (canonicalized: 32-bit unless x64 is on)."""
    aval = get_aval(operand)
    if isinstance(aval.dtype, dtypes.ExtendedDType) or \
            isinstance(new_dtype, dtypes.ExtendedDType):
        return _convert_extended(operand, aval.dtype, new_dtype)
    new_dtype = dtypes.canonicalize(new_dtype)
    if dtypes.is_complex(aval.dtype) and not dtypes.is_complex(new_dtype):
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=2)
    if (aval.dtype == new_dtype and aval.weak_type == weak_type
            and isinstance(operand, (Array, Tracer))):
        return operand
    params = dict(new_dtype=new_dtype, weak_type=bool(weak_type))
    if not isinstance(operand, Tracer):  # a constant: convert it now, not stage the conversion
        out_aval = convert_element_type_p.abstract_eval(aval, **params)
        # A Python int may not fit the default int (2**100 -> float32 is fine): let NumPy hold it.
        value = np.asarray(operand) if type(operand) is int else to_numpy(operand)
        return Array.wrap(convert_element_type_p.impl(value, **params), out_aval)
    return convert_element_type_p.bind(operand, **params)


def _convert_extended(operand, dtype, new_dtype):
    """An extended dtype (a typed key's) converts only to itself, as in JAX: its elements
    are no numbers (``random.key_data`` and ``wrap_key_data`` convert keys and words)."""
    if dtype != new_dtype:
        raise ValueError(f"Cannot convert_element_type from {dtypes.name(dtype)} to "
                         f"{dtypes.name(new_dtype)}")
    return operand


# Derivatives and batching of the dtype conversions.

def _convert_element_type_jvp(primals, tangents, *, new_dtype, weak_type):
    """Linear between inexact types; to or from integers and bools the tangent is zero."""
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if not (dtypes.is_inexact(get_aval(x).dtype) and dtypes.is_inexact(new_dtype)):
        return out, ad.Zero.like(out)
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_element_type_transpose(ct, x, *, new_dtype, weak_type):
    """Convert back. Complex to real keeps the real part, real to complex adds a zero
    imaginary part: each is the other's transpose under ``Re(c * t)``."""
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype, weak_type=x.aval.weak_type)]


def _simplify_same_type_conversion(eqn, ins, producer_of, use_count, value_of):
    (x,), (out,) = ins, eqn.outvars
    if same_type(x, out) and x.aval.weak_type == out.aval.weak_type:
        return x, "conversion to the same type"
    return None


convert_element_type_p.def_rule("simplify", _simplify_same_type_conversion)
convert_element_type_p.def_jvp(_convert_element_type_jvp)
convert_element_type_p.def_transpose(_convert_element_type_transpose)
convert_element_type_p.def_batch(batch_util.elementwise_batcher(convert_element_type_p))
kernel_elementwise(convert_element_type_p,
                   lambda ctx, x, new_dtype, weak_type: ctx.convert(x, new_dtype))


def _bitcast_shape(shape, old, new):
    """Same width keeps the shape; a narrower type adds a trailing axis of the width ratio; a
    wider one consumes a trailing axis of exactly that ratio."""
    if old.itemsize == new.itemsize:
        return shape
    if old.itemsize > new.itemsize:
        return shape + (old.itemsize // new.itemsize,)
    last = shape[-1] if shape else 1
    if last * old.itemsize != new.itemsize:
        raise ValueError(
            f"Attempting to convert array of shape {shape} from {old} of size "
            f"{8 * old.itemsize} bits to {new} of size {8 * new.itemsize} bits, but "
            f"{last} * {8 * old.itemsize} != {8 * new.itemsize}")
    return shape[:-1]


bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_convert_type_abstract_eval(x, *, new_dtype):
    kinds_with_layout = (dtypes.is_bool, dtypes.is_complex)
    if x.dtype != new_dtype and any(k(d) for k in kinds_with_layout for d in (x.dtype, new_dtype)):
        raise TypeError("lax.bitcast_convert_type does not support bool or complex values "
                        "unless the operand and destination types match. Got operand "
                        f"dtype={x.dtype}, new_dtype={new_dtype}.")
    return ShapedArray(_bitcast_shape(x.shape, x.dtype, new_dtype), new_dtype, False)


@bitcast_convert_type_p.def_impl
def _bitcast_convert_type_impl(x, *, new_dtype):
    # The bytes in row-major order, read back as the new type (little-endian, as XLA on CPU).
    out = np.frombuffer(x.tobytes(), new_dtype)
    return out.reshape(_bitcast_shape(x.shape, x.dtype, new_dtype))


def bitcast_convert_type(operand, new_dtype):
    """Reinterpret the bits of ``operand`` as ``new_dtype`` (see ``_bitcast_shape``)."""
    return bitcast_convert_type_p.bind(operand, new_dtype=dtypes.canonicalize(new_dtype))


def _bitcast_convert_type_batch(axis_data, vals, dims, *, new_dtype):
    """Bitcasting adds or consumes a trailing axis; the batch axis may stay anywhere else."""
    (x,), (bdim,) = vals, dims
    widening = np.dtype(new_dtype).itemsize > get_aval(x).dtype.itemsize
    if widening and bdim == batch_util.ndim(x) - 1:
        x, bdim = moveaxis(x, bdim, 0), 0
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), bdim


ad.defjvp_zero(bitcast_convert_type_p)  # reinterpreted bits have no useful derivative
bitcast_convert_type_p.def_batch(_bitcast_convert_type_batch)
kernel_elementwise(bitcast_convert_type_p,  # between types of one width (see fusion.py)
                   lambda ctx, x, *, new_dtype: ctx.bitcast(x, new_dtype))


# --- stop_gradient --------------------------------------------------------------------------------

# The identity on values; autodiff will treat its output as a constant. It is a primitive
# (as in JAX, whose jaxprs show `stop_gradient`) so that transformations can recognise it.
stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_impl(lambda x: owned_results([x])[0])
ad.defjvp_zero(stop_gradient_p)
stop_gradient_p.def_batch(lambda axis_data, vals, dims: (stop_gradient_p.bind(*vals), dims[0]))
kernel_elementwise(stop_gradient_p, lambda ctx, x: x)  # compiled code computes no gradients


def stop_gradient(x):
    """``x`` unchanged (every leaf of a pytree), but with no gradient flowing through it."""
    return pytree.tree_map(stop_gradient_p.bind, x)

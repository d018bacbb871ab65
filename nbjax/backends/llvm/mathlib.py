"""Inline, vectorisable transcendental functions emitted as LLVM IR.

LLVM lowers `llvm.exp.f32` and friends to one scalar libm call per element on the CPU
(there is no vector math library), which stops the loop vectoriser. The functions here
emit the whole computation inline instead: range reduction, a minimax polynomial, and
selects for the special values, using only arithmetic, comparisons, selects, bitcasts and
integer ops, and the `llvm.fma` / `llvm.fabs` / `llvm.floor` / `llvm.rint` /
`llvm.copysign` intrinsics, which LLVM widens to vector instructions. The code is plain,
target-neutral LLVM IR: any LLVM target may use it (``mathnames.MathNames.inline`` says
which functions a target takes from here).

Contract (what the scalar emitter relies on)
--------------------------------------------
- `emit(builder, name, args, dtype)` appends the IR computing `name` (a key of
  `EMITTERS`: exp, log, log1p, expm1, tanh, logistic, sin, cos, tan, pow, erf) at the
  builder's position and returns the result `ir.Value`. `args` are `ir.Value`s of one
  float type: `float`/`double` or a vector of them (`<8 x float>`, ...); `dtype` is the
  matching NumPy dtype (float32 or float64) and is checked against the operands. The
  result has the operands' type. `pow` takes two operands, the others one.
- The emitted code has no branches and no calls other than the intrinsics above, so it
  can sit in any basic block of a loop body; written on scalars it is widened by the
  loop vectoriser. (With `emit`'s `branches`, for code that may branch, sin, cos and tan
  of float32 branch around their table's reduction: `_quick_or_table`.) sin/cos/tan read
  a constant table (`@nbjax_mathlib_rem_pio2_*`) that the emitter adds to the builder's
  module once; the vectoriser turns its loads into gathers.
- Special values follow NumPy: NaN in -> NaN out; overflow gives inf and underflow
  gradual-underflow subnormals then 0 (no flush); log(0) = -inf, log(x<0) = NaN;
  sin/cos/tan(inf) = NaN; signed zeros are kept where NumPy keeps them (exp/log1p/expm1/
  tanh/sin/tan/erf of -0 is -0); pow follows C99/IEEE pow (pow(x, 0) = pow(1, y) = 1 even for NaN,
  a negative base needs an integer exponent, 0**negative = inf with the sign of an odd
  exponent, ...); erf(+-inf) = +-1; logistic(-inf) = 0.
- Accuracy (measured by tests/test_cpu_mathlib.py against NumPy in float64): float32
  results are within 4 ulp (measured <= 2) of the correctly rounded value over the whole
  float32 range; float64 results within 2 ulp of NumPy's libm (tanh: 3; tan, a quotient of
  the two: 4, measured 2); the test states the bound per function. float32 pow, sin, cos
  and tan compute in float64 and round once
  (`computes_in_float64`): correctly rounded but for about one case in 2**27, so equal to
  the eager (NumPy float64) values. Exception: float64 sin/cos of huge arguments that lie
  within about 2**-49 relative of a multiple of pi/2 lose relative accuracy, because the
  reduced argument carries an absolute error of about 2**-103.
- `logistic(x)` is computed as exp(x)/(1+exp(x)) for x < 0, which keeps its tiny values
  (down to the subnormals) where the literal 1/(1+exp(-x)) would round them to 0.

Coefficients come from tools/fit_minimax.py (Remez fits in mpmath); its comments give the
polynomial forms. Algorithms follow the classic fdlibm designs (Cody-Waite reduction for
exp, the s = f/(2+f) series for log, Payne-Hanek reduction for sin/cos).
"""
import functools
import math

import numpy as np
from llvmlite import ir

__all__ = ["emit", "EMITTERS", "ARITY"]

# --- polynomial coefficients, lowest degree first (see tools/fit_minimax.py) ------------
_COEFFS = {
    ("exp", "f32"): (0.5, 0.16666573286056519, 0.04166686162352562, 0.008363739587366581,
                     0.001390153425745666),
    ("exp", "f64"): (0.5, 0.1666666666666667, 0.041666666666666616, 0.008333333333325574,
                     0.0013888888888920364, 0.0001984126987677808, 2.4801587242310106e-05,
                     2.755725292743395e-06, 2.755735085122914e-07, 2.5106240657861797e-08,
                     2.088962834794298e-09),
    ("expm1", "f32"): (0.1666666716337204, 0.04166654869914055, 0.008333345875144005,
                       0.0013926903484389186, 0.00019862364570144564),
    ("expm1", "f64"): (0.16666666666666669, 0.04166666666666665, 0.008333333333329801,
                       0.001388888888890152, 0.00019841269864345857, 2.4801587273525452e-05,
                       2.75572664638829e-06, 2.7557330027210836e-07, 2.5101328451175408e-08,
                       2.089432015674401e-09),
    ("log", "f32"): (0.6666668653488159, 0.3998853266239166, 0.29590892791748047),
    ("log", "f64"): (0.6666666666666666, 0.40000000000000946, 0.2857142857076264,
                     0.22222222400913083, 0.1818179466575303, 0.1538629226986865,
                     0.13267376120392418, 0.13101129817924878),
    ("sin", "f32"): (-0.166666641831398, 0.008332720957696438, -0.00019582278036978096),
    ("sin", "f64"): (-0.16666666666666663, 0.008333333333330672, -0.00019841269836351475,
                     2.7557315895843387e-06, -2.5051089568928415e-08, 1.5915135145649394e-10),
    ("cos", "f32"): (0.0416666641831398, -0.001388827688060701, 2.4542523533455096e-05),
    ("cos", "f64"): (0.041666666666666664, -0.001388888888888723, 2.4801587298518515e-05,
                     -2.755731714574698e-07, 2.0876120425005248e-09, -1.1380797657280943e-11),
    ("erf_small", "f32"): (1.1283791065216064, -0.3761262595653534, 0.1128358542919159,
                           -0.026853812858462334, 0.005188327748328447,
                           -0.0008010193705558777, 7.853861461626366e-05),
    ("erf_small", "f64"): (1.1283791670955126, -0.3761263890318352, 0.11283791670944185,
                           -0.026866170643111465, 0.0052239776061184665, -0.000854832592931415,
                           0.00012055293576890935, -1.4924712301836077e-05,
                           1.644713156930302e-06, -1.6206313744668596e-07,
                           1.371098034374777e-08, -7.77946839746417e-10),
    # erfc(x) * exp(x*x) as a polynomial in (1/x - 0.625) on 1 <= x <= 4
    ("erf_tail", "f32"): (0.3059529960155487, 0.3822838366031647, -0.17239360511302948,
                          0.04376080259680748, 0.023261981084942818, -0.04678604006767273,
                          0.044619929045438766, -0.028408335521817207, -0.006946619134396315,
                          0.030713392421603203),
    # ... in (x - 1.75) on 1 <= x <= 2.5
    ("erf_tail_near", "f64"): (
        0.2849722347374364, -0.1309763455144852, 0.05576363008708727, -0.022259995241388327,
        0.008404319207328871, -0.0030209746514251235, 0.001039204522444301,
        -0.0003435333534706165, 0.00010950528847722415, -3.3755355254660844e-05,
        1.0086683276746838e-05, -2.927938072284567e-06, 8.271323549821497e-07,
        -2.277626572198498e-07, 6.121972291896871e-08, -1.608330602152925e-08,
        4.1371914097905915e-09, -1.0413755201132444e-09, 2.532797449300194e-10,
        -6.159425502265863e-11, 1.7490172550525635e-11, -4.0037896155962296e-12),
    # ... in (1/x - 0.28) on 2.5 <= x <= 6
    ("erf_tail_far", "f64"): (
        0.15239540756777034, 0.5081701736152904, -0.17043560881433123, -0.08835668461375966,
        0.19610394364727535, -0.12001106610897742, -0.09630140634405845, 0.3132422445284954,
        -0.323388081761581, -0.04449863563212735, 0.745587265464414, -1.3313868677960679,
        0.9247574056945589, 1.4218708470240893, -5.676228725886618, 7.654803252270298),
}

# ln 2 and pi/2 as (double, double) pairs: the second term is the rounding error of the first.
_LN2 = (0.6931471805599453, 2.3190468138462996e-17)
_PIO2 = (1.5707963267948966, 6.123233995736766e-17)
_LOG2E = 1.4426950408889634


class _Format:
    """Bit layout and range facts of one IEEE binary format."""

    def __init__(self, name, bits, mant_bits, exp_clamp, expm1_low, tanh_sat, erf_sat):
        self.name, self.bits, self.mant_bits = name, bits, mant_bits
        self.precision = mant_bits + 1
        self.bias = (1 << (bits - mant_bits - 2)) - 1
        self.np = np.float32 if bits == 32 else np.float64
        self.exp_clamp = exp_clamp        # exp(x) is 0 below / inf above: keeps 2**n in range
        self.expm1_low = expm1_low        # expm1(x) rounds to -1 below this
        self.tanh_sat = tanh_sat          # tanh(x) rounds to 1 above this
        self.erf_sat = erf_sat            # erf(x) rounds to 1 above this

    def split(self, hi, lo, drop_bits):
        """(hi', lo') with hi' = hi rounded to precision-drop_bits bits: k*hi' is exact for
        integers k below 2**drop_bits (Cody-Waite)."""
        e = math.frexp(hi)[1] - (self.precision - drop_bits)
        head = math.ldexp(round(math.ldexp(hi, -e)), e)
        return head, float(self.np((hi - head) + lo))

    def round(self, value):
        return float(self.np(value))


_F32 = _Format("f32", 32, 23, (-104.0, 89.0), -30.0, 10.0, 4.0)
_F64 = _Format("f64", 64, 52, (-746.0, 710.0), -40.0, 20.0, 6.0)


class _Ops:
    """Builder helpers over one float type (scalar or vector), so each function is written
    once for float32/float64 and scalars/vectors."""

    def __init__(self, builder, ty):
        self.b = builder
        self.ty = ty
        scalar = ty.element if isinstance(ty, ir.VectorType) else ty
        if isinstance(scalar, ir.FloatType):
            self.fmt = _F32
        elif isinstance(scalar, ir.DoubleType):
            self.fmt = _F64
        else:
            raise TypeError(f"mathlib: expected a float or double (vector) type, got {ty}")
        self.scalar = scalar
        self.lanes = ty.count if isinstance(ty, ir.VectorType) else None
        # the largest exponent of a finite operand: the format's, or float32's for one
        # widened from float32 (``_float64_inside``), which sin/cos's table need not cover
        self.max_exponent = self.fmt.bias
        self.branches = False   # scalar code that may branch (``emit``'s ``branches``)
        self.iscalar = ir.IntType(self.fmt.bits)
        self.ity = self._like(self.iscalar)

    def _like(self, scalar):
        return ir.VectorType(scalar, self.lanes) if self.lanes else scalar

    def _splat(self, scalar_ty, value):
        c = ir.Constant(scalar_ty, value)
        return ir.Constant(self._like(scalar_ty), [c] * self.lanes) if self.lanes else c

    # constants
    def c(self, value):
        return self._splat(self.scalar, self.fmt.round(value))

    def ic(self, value):
        return self._splat(self.iscalar, int(value))

    # float arithmetic
    def add(self, a, b): return self.b.fadd(a, b)
    def sub(self, a, b): return self.b.fsub(a, b)
    def mul(self, a, b): return self.b.fmul(a, b)
    def div(self, a, b): return self.b.fdiv(a, b)
    def neg(self, a): return self.b.fneg(a)

    def _intrinsic(self, name, *args):
        module = self.b.module
        suffix = (f"v{self.lanes}" if self.lanes else "") + self.scalar.intrinsic_name
        full = f"{name}.{suffix}"
        fn = module.globals.get(full)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(self.ty, [self.ty] * len(args)), full)
        return self.b.call(fn, args)

    def fma(self, a, b, c): return self._intrinsic("llvm.fma", a, b, c)
    def fabs(self, a): return self._intrinsic("llvm.fabs", a)
    def floor(self, a): return self._intrinsic("llvm.floor", a)
    def rint(self, a): return self._intrinsic("llvm.rint", a)
    def copysign(self, a, b): return self._intrinsic("llvm.copysign", a, b)

    def poly(self, x, coeffs):
        """Horner's rule with fma: coeffs[0] + coeffs[1]*x + ..."""
        coeffs = [c if isinstance(c, ir.Value) else self.c(c) for c in coeffs]
        acc = coeffs[-1]
        for coef in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, coef)
        return acc

    # comparisons (ordered: false when an operand is NaN) and selects
    def lt(self, a, b): return self.b.fcmp_ordered("<", a, b)
    def le(self, a, b): return self.b.fcmp_ordered("<=", a, b)
    def gt(self, a, b): return self.b.fcmp_ordered(">", a, b)
    def ge(self, a, b): return self.b.fcmp_ordered(">=", a, b)
    def eq(self, a, b): return self.b.fcmp_ordered("==", a, b)
    def ne(self, a, b): return self.b.fcmp_unordered("!=", a, b)
    def isnan(self, a): return self.b.fcmp_unordered("uno", a, a)
    def select(self, cond, a, b): return self.b.select(cond, a, b)

    def clamp(self, x, lo, hi):
        """min(max(x, lo), hi) that maps NaN to lo (callers restore NaN at the end)."""
        x = self.select(self.gt(x, self.c(lo)), x, self.c(lo))
        return self.select(self.lt(x, self.c(hi)), x, self.c(hi))

    # integer / bit views
    def bits(self, x): return self.b.bitcast(x, self.ity)
    def from_bits(self, i): return self.b.bitcast(i, self.ty)
    def to_int(self, x): return self.b.fptosi(x, self.ity)
    def to_float(self, i): return self.b.sitofp(i, self.ty)

    def pow2(self, n):
        """2**n for an integer vector n within the normal exponent range."""
        biased = self.b.add(n, self.ic(self.fmt.bias))
        return self.from_bits(self.b.shl(biased, self.ic(self.fmt.mant_bits)))

    def nan(self):
        return self.c(float("nan"))

    def inf(self):
        return self.c(float("inf"))

    # error-free transformations
    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        err = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, err

    def fast_two_sum(self, a, b):
        """Requires |a| >= |b| (or a = 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_prod(self, a, b):
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))


def _coeffs(o, name):
    return _COEFFS[(name, o.fmt.name)]


# --- exp / expm1 -----------------------------------------------------------------------

def _cody_waite_ln2(o, x):
    """x = n*ln2 + r with n = rint(x/ln2), |r| <= ln2/2 (x already clamped, not NaN)."""
    n = o.rint(o.mul(x, o.c(_LOG2E)))
    hi, lo = o.fmt.round(_LN2[0]), o.fmt.round((_LN2[0] - o.fmt.round(_LN2[0])) + _LN2[1])
    r = o.fma(o.neg(n), o.c(hi), x)
    return n, o.fma(o.neg(n), o.c(lo), r)


def _exp_reduced(o, n, r):
    """exp(n*ln2 + r): polynomial for exp(r), then times 2**n in two halves so that results
    in the subnormal range round once and large n overflows to inf."""
    q = o.fma(o.mul(r, r), o.poly(r, _coeffs(o, "exp")), r)
    p = o.add(o.c(1.0), q)
    ni = o.to_int(n)
    n1 = o.b.ashr(ni, o.ic(1))
    n2 = o.b.sub(ni, n1)
    return o.mul(o.mul(p, o.pow2(n1)), o.pow2(n2))


def exp(b, x):
    o = _Ops(b, x.type)
    xc = o.clamp(x, *o.fmt.exp_clamp)
    n, r = _cody_waite_ln2(o, xc)
    return o.select(o.isnan(x), x, _exp_reduced(o, n, r))


def expm1(b, x):
    """expm1(x) = 2**n * expm1(r) + (2**n - 1), as one fma; for n above the largest normal
    exponent the last factor of 2 is applied separately (it then overflows to inf)."""
    o = _Ops(b, x.type)
    xc = o.clamp(x, o.fmt.expm1_low, o.fmt.exp_clamp[1])
    n, r = _cody_waite_ln2(o, xc)
    em = o.fma(o.mul(r, r), o.fma(r, o.poly(r, _coeffs(o, "expm1")), o.c(0.5)), r)
    ni = o.to_int(n)
    top = o.ic(o.fmt.bias)
    nc = o.b.select(o.b.icmp_signed(">", ni, top), top, ni)
    s = o.pow2(nc)
    res = o.mul(o.fma(s, em, o.sub(s, o.c(1.0))), o.pow2(o.b.sub(ni, nc)))
    res = o.select(o.eq(x, o.c(0.0)), x, res)      # keeps -0
    return o.select(o.isnan(x), x, res)


# --- log / log1p -----------------------------------------------------------------------

_SQRT1_2 = 0.7071067811865476


def _decompose(o, x):
    """x = 2**k * m with m in [sqrt(1/2), sqrt(2)), for positive normal x: returns the
    float k and f = m - 1 (exact)."""
    fmt = o.fmt
    one = fmt.bias << fmt.mant_bits
    sqrt_half = int(np.array(fmt.round(_SQRT1_2), fmt.np).view(f"u{fmt.bits // 8}"))
    ix = o.b.add(o.bits(x), o.ic(one - sqrt_half))
    k = o.b.sub(o.b.ashr(ix, o.ic(fmt.mant_bits)), o.ic(fmt.bias))
    m = o.from_bits(o.b.add(o.b.and_(ix, o.ic((1 << fmt.mant_bits) - 1)), o.ic(sqrt_half)))
    return o.to_float(k), o.sub(m, o.c(1.0))


def _log_ln2(o):
    """ln2 split so that k*hi is exact for every exponent k."""
    return o.fmt.split(_LN2[0], _LN2[1], 12)


def _log_reduced(o, k, f, c):
    """k*ln2 + log(1+f) + c for |f| < 0.42 and a small correction c (fdlibm's form:
    log(1+f) = f - f*f/2 + s*(f*f/2 + R), s = f/(2+f))."""
    hi, lo = _log_ln2(o)
    s = o.div(f, o.add(o.c(2.0), f))
    z = o.mul(s, s)
    big_r = o.mul(z, o.poly(z, _coeffs(o, "log")))
    hfsq = o.mul(o.c(0.5), o.mul(f, f))
    tail = o.fma(s, o.add(hfsq, big_r), o.fma(k, o.c(lo), c))
    return o.fma(k, o.c(hi), o.neg(o.sub(o.sub(hfsq, tail), f)))


def _scale_subnormal(o, x):
    """(x', dk) with x' = x * 2**p normal when x is subnormal, dk the exponent to add."""
    p = o.fmt.precision
    tiny = o.lt(x, o.c(2.0 ** (1 - o.fmt.bias)))
    return (o.select(tiny, o.mul(x, o.c(2.0 ** p)), x),
            o.select(tiny, o.c(-p), o.c(0.0)))


def _log_specials(o, x, res, zero_at):
    """NumPy's log conventions around the pole `zero_at` (0 for log, -1 for log1p)."""
    res = o.select(o.eq(x, o.c(zero_at)), o.neg(o.inf()), res)
    res = o.select(o.lt(x, o.c(zero_at)), o.nan(), res)
    res = o.select(o.eq(x, o.inf()), x, res)
    return o.select(o.isnan(x), x, res)


def log(b, x):
    o = _Ops(b, x.type)
    xs, dk = _scale_subnormal(o, x)
    k, f = _decompose(o, xs)
    res = _log_reduced(o, o.add(k, dk), f, o.c(0.0))
    return _log_specials(o, x, res, 0.0)


def log1p(b, x):
    """log(u) with u = 1 + x rounded, plus the rounding error of u as c = (x-(u-1))/u
    (fdlibm); when u is within [sqrt(1/2), sqrt(2)), f = x exactly."""
    o = _Ops(b, x.type)
    one = o.c(1.0)
    u = o.add(one, x)
    k, f = _decompose(o, u)
    k_is_0 = o.eq(k, o.c(0.0))
    c = o.select(o.gt(k, o.c(0.0)), o.sub(one, o.sub(u, x)), o.sub(x, o.sub(u, one)))
    c = o.div(c, u)
    c = o.select(o.lt(k, o.c(o.fmt.precision + 1)), c, o.c(0.0))
    res = _log_reduced(o, k, o.select(k_is_0, x, f), o.select(k_is_0, o.c(0.0), c))
    res = o.select(o.eq(x, o.c(0.0)), x, res)
    return _log_specials(o, x, res, -1.0)


# --- tanh / logistic / erf ---------------------------------------------------------------

def tanh(b, x):
    """fdlibm: with t = expm1(-2|x|) for |x| < 1, tanh|x| = -t/(t+2); otherwise with
    t = expm1(2|x|), tanh|x| = 1 - 2/(t+2)."""
    o = _Ops(b, x.type)
    ax = o.clamp(o.fabs(x), 0.0, o.fmt.tanh_sat)
    small = o.lt(ax, o.c(1.0))
    two_ax = o.add(ax, ax)
    t = expm1(b, o.select(small, o.neg(two_ax), two_ax))
    t2 = o.add(t, o.c(2.0))
    res = o.select(small, o.div(o.neg(t), t2), o.sub(o.c(1.0), o.div(o.c(2.0), t2)))
    return o.select(o.isnan(x), x, o.copysign(res, x))


def logistic(b, x):
    o = _Ops(b, x.type)
    e = exp(b, o.neg(o.fabs(x)))
    d = o.add(o.c(1.0), e)
    return o.select(o.ge(x, o.c(0.0)), o.div(o.c(1.0), d), o.div(e, d))


def erf(b, x):
    """x*P(x*x) for |x| < 1; above, 1 - exp(-x*x)*Q(v) with Q ~ erfc(x)*exp(x*x), in
    v = 1/x (float64 below 2.5: in v = x, with its own coefficients picked per lane)."""
    o = _Ops(b, x.type)
    small = o.mul(x, o.poly(o.mul(x, x), _coeffs(o, "erf_small")))
    ax = o.clamp(o.fabs(x), 1.0, o.fmt.erf_sat)
    if o.fmt is _F32:
        q = o.poly(o.sub(o.div(o.c(1.0), ax), o.c(0.625)), _coeffs(o, "erf_tail"))
    else:
        near = o.lt(ax, o.c(2.5))
        v = o.select(near, o.sub(ax, o.c(1.75)), o.sub(o.div(o.c(1.0), ax), o.c(0.28)))
        far_c = _coeffs(o, "erf_tail_far")
        near_c = _coeffs(o, "erf_tail_near")
        far_c = far_c + (0.0,) * (len(near_c) - len(far_c))
        q = o.poly(v, [o.select(near, o.c(a), o.c(b_)) for a, b_ in zip(near_c, far_c)])
    e = exp(b, o.neg(o.mul(ax, ax)))
    tail = o.copysign(o.sub(o.c(1.0), o.mul(e, q)), x)
    res = o.select(o.lt(o.fabs(x), o.c(1.0)), small, tail)
    return o.select(o.isnan(x), x, res)


# --- sin / cos ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _two_over_pi(frac_bits):
    """floor(2/pi * 2**frac_bits), from Machin's formula in integer arithmetic."""
    guard = frac_bits + 64

    def arctan_inv(k):  # atan(1/k) * 2**guard
        total, term, n, sign = 0, (1 << guard) // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n += 2
            sign = -sign
        return total

    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)
    return (1 << (guard + frac_bits + 1)) // pi


_TABLE_BITS = 1400      # fraction bits of 2/pi kept: 971 (largest exponent) + 4*53 + margin


@functools.lru_cache(maxsize=None)
def _rem_pio2_table(fmt):
    """Rows of 4 chunks c0 > c1 > c2 > c3 (fmt.precision bits each, non-overlapping) with
    c0+c1+c2+c3 ~ (2/pi * 2**E) mod 4, for x = m * 2**E (m an integer below 2**p). Then
    x*2/pi = m*(c0+...+c3) mod 4, which only needs exact products of small numbers (Payne-
    Hanek). One row per biased exponent from bias-1 (x >= 0.5) to the largest finite one."""
    p = fmt.precision
    value = _two_over_pi(_TABLE_BITS)          # 2/pi = value * 2**-_TABLE_BITS
    rows = []
    for be in range(fmt.bias - 1, 2 * fmt.bias + 1):
        e = be - fmt.bias - (p - 1)
        frac_bits = _TABLE_BITS - e            # 2/pi * 2**e = value * 2**-frac_bits
        w = value % (1 << (frac_bits + 2)) if frac_bits + 2 > 0 else 0
        row = []
        for _ in range(4):
            shift = max(w.bit_length() - p, 0)
            chunk = (w >> shift) << shift
            row.append(math.ldexp(chunk >> shift, shift - frac_bits) if chunk else 0.0)
            w -= chunk
        rows.append(row)
    return rows


def _table(o):
    """The rows of ``_rem_pio2_table`` for the exponents of ``o``'s operands (float32's
    129 of float64's 1025, for a float32 sin: LLVM printed, parsed and compiled all of them
    in every function's module, 15 ms each)."""
    module = o.b.module
    rows = o.max_exponent + 2
    name = f"nbjax_mathlib_rem_pio2_{o.fmt.name}_{rows}"
    table = module.globals.get(name)
    if table is None:
        flat = [v for row in _rem_pio2_table(o.fmt)[:rows] for v in row]
        ty = ir.ArrayType(o.scalar, len(flat))
        table = ir.GlobalVariable(module, ty, name)
        table.global_constant = True
        table.linkage = "internal"
        table.initializer = ir.Constant(ty, flat)
    return table


def _load_chunks(o, row):
    """The 4 table chunks of each lane's row (a gather once vectorised)."""
    table = _table(o)
    zero = ir.Constant(o.iscalar, 0)

    def load(index):
        ptr = o.b.gep(table, [zero, index], source_etype=table.value_type)
        return o.b.load(ptr, typ=o.scalar)

    chunks = []
    for j in range(4):
        idx = o.b.add(o.b.mul(row, o.ic(4)), o.ic(j))
        if o.lanes is None:
            chunks.append(load(idx))
            continue
        vec = ir.Constant(o.ty, ir.Undefined)
        for lane in range(o.lanes):
            lane_c = ir.Constant(ir.IntType(32), lane)
            vec = o.b.insert_element(vec, load(o.b.extract_element(idx, lane_c)), lane_c)
        chunks.append(vec)
    return chunks


def _rem_pio2(o, ax):
    """ax = (n + f) * pi/2 with an integer n and |f| <= 1/2; returns (n, r_hi, r_lo) with
    r_hi + r_lo = f*pi/2 in double-word precision. ax positive and finite (other lanes
    produce garbage that the caller discards)."""
    fmt = o.fmt
    be = o.b.lshr(o.bits(ax), o.ic(fmt.mant_bits))
    lo_be, hi_be = fmt.bias - 1, fmt.bias + o.max_exponent
    be = o.b.select(o.b.icmp_signed("<", be, o.ic(lo_be)), o.ic(lo_be), be)
    be = o.b.select(o.b.icmp_signed(">", be, o.ic(hi_be)), o.ic(hi_be), be)
    # m = ax * 2**-E, E = be - bias - (p-1): 2**-E has biased exponent 2*bias + p-1 - be
    inv_scale = o.from_bits(o.b.shl(o.b.sub(o.ic(2 * fmt.bias + fmt.precision - 1), be),
                                    o.ic(fmt.mant_bits)))
    m = o.mul(ax, inv_scale)
    c0, c1, c2, c3 = _load_chunks(o, o.b.sub(be, o.ic(lo_be)))

    p0, q0 = o.two_prod(m, c0)
    p0 = o.sub(p0, o.mul(o.c(4.0), o.floor(o.mul(p0, o.c(0.25)))))   # exact mod 4
    p1, q1 = o.two_prod(m, c1)
    p2, q2 = o.two_prod(m, c2)
    h, e_a = o.two_sum(p0, q0)
    h, e_b = o.two_sum(h, p1)
    n = o.rint(h)
    h = o.sub(h, n)
    h, e_c = o.two_sum(h, q1)
    h, e_d = o.two_sum(h, p2)
    lo = o.add(o.add(o.add(e_a, e_b), o.add(e_c, e_d)), o.fma(m, c3, q2))
    f_hi, f_lo = o.fast_two_sum(h, lo)
    n2 = o.rint(f_hi)
    n = o.add(n, n2)
    f_hi, f_lo = o.fast_two_sum(o.sub(f_hi, n2), f_lo)
    pio2_hi = fmt.round(_PIO2[0])
    pio2_lo = fmt.round((_PIO2[0] - pio2_hi) + _PIO2[1])
    r_hi, r_err = o.two_prod(f_hi, o.c(pio2_hi))
    r_lo = o.fma(f_hi, o.c(pio2_lo), o.fma(f_lo, o.c(pio2_hi), r_err))
    r_hi, r_lo = o.fast_two_sum(r_hi, r_lo)
    return n, r_hi, r_lo


# Below this, a float32 operand (in float64) is reduced by pi/2 in two fused steps where
# the code may branch (``_quick_or_table``): n*pi/2 is then at most 2**20, whose rounding
# errors stay far below float32's precision of the reduced argument.
QUICK_MAX = 2.0 ** 20


def _quick_or_table(o, x):
    """``_rem_pio2``'s (n, r_hi, r_lo) for x >= 0 where the code may branch
    (``o.branches``): below ``QUICK_MAX``, for an operand widened from float32, by
    Cody-Waite's two fused steps (x - n*P1 - n*P2, pi/2 = P1 + P2 in doubles), a tenth of
    the table's work (its loads are gathers in vector code); else by the table. A vector
    takes the quick branch when every lane is below ``QUICK_MAX`` (NaN and inf are not)."""
    if not o.branches or o.max_exponent >= o.fmt.bias:
        return _rem_pio2(o, x)
    b = o.b
    quick_enough = o.lt(x, o.c(QUICK_MAX))
    if o.lanes:
        every = ir.IntType(o.lanes)
        quick_enough = b.icmp_unsigned("==", b.bitcast(quick_enough, every),
                                       ir.Constant(every, -1))
    with b.if_else(quick_enough) as (quick, table):
        with quick:
            n = o.rint(o.mul(x, o.c(2 / math.pi)))
            reduced = [n, o.fma(o.neg(n), o.c(_PIO2[1]), o.fma(o.neg(n), o.c(_PIO2[0]), x)),
                       o.c(0.0)]
            from_quick = b.block
        with table:
            tabled = _rem_pio2(o, x)
            from_table = b.block
    merged = []
    for q, t in zip(reduced, tabled):
        phi = b.phi(q.type)
        phi.add_incoming(q, from_quick)
        phi.add_incoming(t, from_table)
        merged.append(phi)
    return merged


def _sin_cos_reduced(o, x):
    """(quadrant as an integer vector, sin(r), cos(r)) for x = quadrant*pi/2 + r, x >= 0."""
    small = o.le(x, o.c(math.pi / 4 * 0.999))
    finite = o.lt(x, o.inf())
    n, r_hi, r_lo = _quick_or_table(o, x)
    use_table = o.b.and_(o.b.not_(small), finite)
    zero = o.c(0.0)
    n = o.select(use_table, n, zero)
    r_hi = o.select(use_table, r_hi, x)
    r_lo = o.select(use_table, r_lo, zero)
    quadrant = o.b.and_(o.to_int(n), o.ic(3))

    z = o.mul(r_hi, r_hi)
    # sin(r_hi + r_lo) ~ r_hi + r_hi^3*S(z) + r_lo*(1 - z/2)
    sin_tail = o.fma(o.mul(z, r_hi), o.poly(z, _coeffs(o, "sin")),
                     o.mul(r_lo, o.fma(o.c(-0.5), z, o.c(1.0))))
    sin_r = o.add(r_hi, sin_tail)
    # cos(r_hi + r_lo) ~ 1 - z/2 + z^2*C(z) - r_hi*r_lo, with 1 - z/2 compensated
    hz = o.mul(o.c(0.5), z)
    w = o.sub(o.c(1.0), hz)
    small_terms = o.fma(o.mul(z, z), o.poly(z, _coeffs(o, "cos")), o.neg(o.mul(r_hi, r_lo)))
    cos_r = o.add(w, o.add(o.sub(o.sub(o.c(1.0), w), hz), small_terms))
    return quadrant, sin_r, cos_r


def _flip_if(o, cond_bits, value):
    """-value where cond_bits (an integer vector of 0/1) is 1."""
    sign = o.b.shl(cond_bits, o.ic(o.fmt.bits - 1))
    return o.from_bits(o.b.xor(o.bits(value), sign))


def _sin_core(o, x):
    quadrant, sin_r, cos_r = _sin_cos_reduced(o, o.fabs(x))
    odd = o.b.trunc(quadrant, o._like(ir.IntType(1)))
    val = o.select(odd, cos_r, sin_r)
    val = _flip_if(o, o.b.lshr(quadrant, o.ic(1)), val)
    sign_x = o.b.and_(o.bits(x), o.ic(1 << (o.fmt.bits - 1)))
    val = o.from_bits(o.b.xor(o.bits(val), sign_x))
    return o.select(o.lt(o.fabs(x), o.inf()), val, o.sub(x, x))


def _cos_core(o, x):
    quadrant, sin_r, cos_r = _sin_cos_reduced(o, o.fabs(x))
    odd = o.b.trunc(quadrant, o._like(ir.IntType(1)))
    val = o.select(odd, sin_r, cos_r)
    negate = o.b.and_(o.b.lshr(o.b.add(quadrant, o.ic(1)), o.ic(1)), o.ic(1))
    val = _flip_if(o, negate, val)
    return o.select(o.lt(o.fabs(x), o.inf()), val, o.sub(x, x))


def _tan_core(o, x):
    """sin(r)/cos(r), or -cos(r)/sin(r) in odd quadrants: each part within about an ulp
    (the reduction is double-word), so the quotient within two or three."""
    quadrant, sin_r, cos_r = _sin_cos_reduced(o, o.fabs(x))
    odd = o.b.trunc(quadrant, o._like(ir.IntType(1)))
    val = o.select(odd, o.neg(o.div(cos_r, sin_r)), o.div(sin_r, cos_r))
    sign_x = o.b.and_(o.bits(x), o.ic(1 << (o.fmt.bits - 1)))
    val = o.from_bits(o.b.xor(o.bits(val), sign_x))
    return o.select(o.lt(o.fabs(x), o.inf()), val, o.sub(x, x))


def sin(b, x):
    return _float64_inside(b, _sin_core, x)


def cos(b, x):
    return _float64_inside(b, _cos_core, x)


def tan(b, x):
    return _float64_inside(b, _tan_core, x)


# --- pow ---------------------------------------------------------------------------------

def _log_double_word(o, x):
    """log(x) as hi + lo with about 2**-64 relative error, for positive finite x.

    Same series as `log`, 2*atanh(s) = 2s + s**3*P(s**2), but s, s**3 and P are carried as
    double-words and every partial sum goes through two_sum: pow multiplies this by y, so
    its absolute error becomes the relative error of the result."""
    xs, dk = _scale_subnormal(o, x)
    k, f = _decompose(o, xs)
    k = o.add(k, dk)
    two = o.c(2.0)
    d_hi = o.add(two, f)
    d_lo = o.sub(f, o.sub(d_hi, two))
    s_hi = o.div(f, d_hi)
    s_lo = o.div(o.sub(o.fma(o.neg(s_hi), d_hi, f), o.mul(s_hi, d_lo)), d_hi)
    z_hi, z_lo = o.two_prod(s_hi, s_hi)
    s3_hi, s3_err = o.two_prod(s_hi, z_hi)
    s3_lo = o.fma(o.mul(o.c(3.0), z_hi), s_lo, o.fma(s_hi, z_lo, s3_err))  # (s_hi+s_lo)**3
    coeffs = _coeffs(o, "log")            # P(z) = 2/3 + z*Q(z): the 2/3 in double-word
    two_thirds_lo = 2 / 3 - coeffs[0] + 3.700743415417188e-17
    p_hi, p_lo = o.fast_two_sum(o.c(coeffs[0]), o.mul(z_hi, o.poly(z_hi, coeffs[1:])))
    p_lo = o.add(p_lo, o.c(two_thirds_lo))
    t_hi, t_err = o.two_prod(s3_hi, p_hi)
    t_lo = o.fma(s3_hi, p_lo, o.fma(s3_lo, p_hi, t_err))
    ln2_hi, ln2_lo = _log_ln2(o)
    h, e1 = o.two_sum(o.mul(k, o.c(ln2_hi)), o.add(s_hi, s_hi))
    h, e2 = o.two_sum(h, t_hi)
    lo = o.add(o.add(e1, e2), o.fma(k, o.c(ln2_lo), o.add(o.add(s_lo, s_lo), t_lo)))
    return o.fast_two_sum(h, lo)


def _pow_core(o, x, y):
    """pow in the type of `o` (float64): exp(y*log|x|) in double-word, then C99's special
    cases."""
    ax = o.fabs(x)
    l_hi, l_lo = _log_double_word(o, ax)
    z_hi, z_err = o.two_prod(y, l_hi)
    z_lo = o.fma(y, l_lo, z_err)
    lo_lim, hi_lim = o.fmt.exp_clamp
    in_range = o.b.and_(o.gt(z_hi, o.c(lo_lim)), o.lt(z_hi, o.c(hi_lim)))
    z_lo = o.select(in_range, z_lo, o.c(0.0))
    n, r = _cody_waite_ln2(o, o.clamp(z_hi, lo_lim, hi_lim))
    mag = _exp_reduced(o, n, o.add(r, z_lo))

    zero, one, inf = o.c(0.0), o.c(1.0), o.inf()
    y_neg = o.lt(y, zero)
    y_int = o.eq(o.floor(y), y)
    half = o.mul(y, o.c(0.5))
    y_odd = o.b.and_(y_int, o.ne(o.floor(half), half))
    y_inf = o.eq(o.fabs(y), inf)
    mag = o.select(o.eq(ax, zero), o.select(y_neg, inf, zero), mag)
    mag = o.select(o.eq(ax, inf), o.select(y_neg, zero, inf), mag)
    grows = o.b.xor(o.gt(ax, one), y_neg)
    mag = o.select(y_inf, o.select(grows, inf, zero), mag)
    res = o.select(y_odd, o.copysign(mag, x), mag)
    neg_base = o.b.and_(o.lt(x, zero), o.gt(x, o.neg(inf)))
    invalid = o.b.or_(o.b.and_(neg_base, o.b.not_(y_int)),
                      o.b.or_(o.isnan(x), o.isnan(y)))
    res = o.select(invalid, o.nan(), res)
    unit = o.b.or_(o.b.or_(o.eq(x, one), o.eq(y, zero)),
                   o.b.and_(o.eq(ax, one), y_inf))
    return o.select(unit, one, res)


def pow(b, x, y):
    return _float64_inside(b, _pow_core, x, y)


def _float64_inside(b, core, *args, branches=False):
    """``core(ops, *args)`` directly on float64 operands; float32 ones are widened to float64
    (exactly), computed there and rounded once, which makes the result correctly rounded
    except where the float64 value falls within its own few-ulp error of a float32 rounding
    boundary (about one case in 2**27): the same value as the eager (NumPy float64) path.
    ``computes_in_float64`` names the functions written this way. ``branches``: scalar code
    that may branch (``emit``)."""
    o = _Ops(b, args[0].type)
    o.branches = branches
    if o.fmt is _F64:
        return core(o, *args)
    wide = ir.VectorType(ir.DoubleType(), o.lanes) if o.lanes else ir.DoubleType()
    inside = _Ops(b, wide)
    inside.max_exponent, inside.branches = o.max_exponent, branches
    res = core(inside, *(b.fpext(a, wide) for a in args))
    return b.fptrunc(res, args[0].type)


# --- registry ----------------------------------------------------------------------------

EMITTERS = {"exp": exp, "log": log, "log1p": log1p, "expm1": expm1, "tanh": tanh,
            "logistic": logistic, "sin": sin, "cos": cos, "tan": tan, "pow": pow, "erf": erf}
ARITY = {name: 2 if name == "pow" else 1 for name in EMITTERS}


_FLOAT64_INSIDE = frozenset({"pow", "sin", "cos", "tan"})


def computes_in_float64(name, dtype):
    """Whether ``name`` on ``dtype`` computes in float64 inside (float32 pow, sin, cos
    and tan do: ``_float64_inside``). LLVM sizes a loop's vectors by its widest type, so such a loop
    is vectorised half as wide as the float32 loops around it unless it is asked for their
    width (``backends.cpu.codegen``)."""
    return name in _FLOAT64_INSIDE \
        and np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float16))

_DTYPES = {np.dtype(np.float32): _F32, np.dtype(np.float64): _F64}


# Functions with a faster form for code that may branch (``emit``'s ``branches``)
BRANCHING = {"sin": lambda b, x: _float64_inside(b, _sin_core, x, branches=True),
             "cos": lambda b, x: _float64_inside(b, _cos_core, x, branches=True),
             "tan": lambda b, x: _float64_inside(b, _tan_core, x, branches=True)}


def emit(builder, name, args, dtype, branches=False):
    """Emit `name(*args)` at `builder` for `dtype` (float32/float64); see the module doc.
    With ``branches``, for code that LLVM's loop vectoriser will not widen (a small
    kernel's scalar loop, a function of explicit vectors), the code may branch: sin and
    cos of float32 then reduce moderate arguments by two fused steps and leave the table's
    reduction to a branch (``_quick_or_table``)."""
    if name not in EMITTERS:
        raise KeyError(f"mathlib: no emitter for {name!r}; have {sorted(EMITTERS)}")
    if len(args) != ARITY[name]:
        raise TypeError(f"mathlib: {name} takes {ARITY[name]} operand(s), got {len(args)}")
    fmt = _DTYPES.get(np.dtype(dtype))
    if fmt is None:
        raise TypeError(f"mathlib: {name} supports float32 and float64, not {np.dtype(dtype)}")
    for arg in args:
        if _Ops(builder, arg.type).fmt is not fmt:
            raise TypeError(f"mathlib: {name} operand of type {arg.type} is not {np.dtype(dtype)}")
    if branches and name in BRANCHING:
        return BRANCHING[name](builder, *args)
    return EMITTERS[name](builder, *args)

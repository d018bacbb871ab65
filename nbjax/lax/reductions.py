"""Reductions over axes, arg-reductions, cumulative (scan-like) reductions, and ``lax.reduce``.

- ``reduce_sum``, ``reduce_prod``, ``reduce_max``, ``reduce_min``, ``reduce_and``,
  ``reduce_or``, ``reduce_xor`` (param ``axes``): an empty reduction gives the monoid's
  identity (``reduce_max`` of nothing is ``-inf``, or the integer minimum), as XLA does.
- ``argmax``, ``argmin`` (params ``axes``, ``index_dtype``): the first maximum wins, and a NaN
  counts as the maximum (and the minimum), so the first NaN wins.
- ``cumsum``, ``cumprod``, ``cummax``, ``cummin``, ``cumlogsumexp`` (params ``axis``,
  ``reverse``).
"""

import operator

import numpy as np

from ..core import Primitive, ShapedArray, Tracer, dtypes, get_aval, pytree, to_numpy
from ..interpreters import ad
from ..interpreters.staging import trace_to_jaxpr
from ..sharding import refuse_out_sharding
from . import elementwise, structural, transcendental
from .shapes import broadcast_in_dim, kept_axes, reduce_sum, reshape, squeeze, transpose
from .standard import (ANY, INEXACT, INT_OR_BOOL, NUMBER, ORDERED, accumulation_dtype,
                       canonical_axes, check_dtype, kernel_reduction, library_lowering,
                       reduction, reduction_batch_rule)

__all__ = ["reduce_prod", "reduce_prod_p",
           "reduce_max", "reduce_max_p", "reduce_min", "reduce_min_p",
           "reduce_and", "reduce_and_p", "reduce_or", "reduce_or_p",
           "reduce_xor", "reduce_xor_p", "reduce",
           "argmax", "argmax_p", "argmin", "argmin_p",
           "cumsum", "cumsum_p", "cumprod", "cumprod_p", "cummax", "cummax_p",
           "cummin", "cummin_p", "cumlogsumexp", "cumlogsumexp_p"]


# --- identities ----------------------------------------------------------------------------

def lowest(dtype):
    """The identity of max: -inf, or the least finite value of a float type without
    infinities (float8_e4m3fn: -448), or an integer type's minimum."""
    if dtypes.is_bool(dtype):
        return False
    if dtypes.is_int(dtype):
        return dtypes.iinfo(dtype).min
    return -np.inf if _has_infinity(dtype) else dtypes.finfo(dtype).min


def highest(dtype):
    """The identity of min (``lowest``'s mirror)."""
    if dtypes.is_bool(dtype):
        return True
    if dtypes.is_int(dtype):
        return dtypes.iinfo(dtype).max
    return np.inf if _has_infinity(dtype) else dtypes.finfo(dtype).max


def _has_infinity(dtype):
    """Most float8 (and float4, float6) types have no infinity: their extremes are finite."""
    return bool(np.isinf(np.array(np.inf).astype(dtype)))


def _no_bits(dtype):
    """The identity of OR and XOR: zero (False for bools)."""
    return np.zeros((), dtype)[()]


def _all_ones(dtype):
    """The identity of AND: every bit set (True for bools, -1 for signed ints)."""
    return True if dtypes.is_bool(dtype) else np.array(-1).astype(dtype)


# --- the reductions over axes --------------------------------------------------------------

def _prod(x, axes):
    return np.prod(x, axis=axes, dtype=accumulation_dtype(x.dtype))


def _signed_zero_as_xla(result, x, negative, seen):
    """XLA orders -0.0 below +0.0 in max/min; NumPy returns whichever zero it met first.

    A zero result of max is +0.0 if any +0.0 was reduced (of min: -0.0 if any -0.0 was):
    ``seen`` reduces a mask of ``x`` as ``result`` reduced ``x`` (over axes, or running).
    """
    if not dtypes.is_float(x.dtype):
        return result
    found = seen((x == 0) & (np.signbit(x) == negative))
    preferred, other = (-0.0, 0.0) if negative else (0.0, -0.0)
    return np.where(result == 0, np.where(found, preferred, other), result)


def _max(x, axes):
    result = np.max(x, axis=axes, initial=lowest(x.dtype))
    return _signed_zero_as_xla(result, x, False, lambda m: np.any(m, axis=axes))


def _min(x, axes):
    result = np.min(x, axis=axes, initial=highest(x.dtype))
    return _signed_zero_as_xla(result, x, True, lambda m: np.any(m, axis=axes))


def _bitwise(ufunc, identity):
    def impl(x, axes):
        return ufunc.reduce(x, axis=axes, initial=identity(x.dtype))
    return impl


reduce_prod_p = reduction("reduce_prod", NUMBER, _prod)
reduce_max_p = reduction("reduce_max", ANY, _max)  # complex numbers compare lexicographically
reduce_min_p = reduction("reduce_min", ANY, _min)
reduce_and_p = reduction("reduce_and", INT_OR_BOOL, _bitwise(np.bitwise_and, _all_ones),
                          keeps_weak_type=False)
reduce_or_p = reduction("reduce_or", INT_OR_BOOL, _bitwise(np.bitwise_or, _no_bits),
                         keeps_weak_type=False)
reduce_xor_p = reduction("reduce_xor", INT_OR_BOOL, _bitwise(np.bitwise_xor, _no_bits),
                          keeps_weak_type=False)


# How the compiler combines two values of each, and where it starts.
kernel_reduction(reduce_prod_p, "mul", lambda dtype: 1, accumulation_dtype)
kernel_reduction(reduce_max_p, "max", lowest)
kernel_reduction(reduce_min_p, "min", highest)
kernel_reduction(reduce_and_p, "and_", _all_ones)
kernel_reduction(reduce_or_p, "or_", _no_bits)
kernel_reduction(reduce_xor_p, "xor", _no_bits)


# --- derivatives of the reductions over axes -----------------------------------------------

def _reduce_prod_jvp(primals, tangents, *, axes):
    """The JVP of a tree of pairwise products (as JAX's), which is right at zeros too.

    The textbook ``prod(x) / x_i * t_i`` divides by zero; multiplying halves together in
    log2(n) rounds uses only ``mul``, whose derivatives hold everywhere, at every order.
    """
    (x,), (t,) = primals, tangents
    outs, tangents_out = ad.jvp_flat(lambda v: [_product_tree(v)],
                                     [_reduced_axes_first(x, axes)],
                                     [_reduced_axes_first(t, axes)])
    return outs[0], tangents_out[0]


def _reduced_axes_first(x, axes):
    """``x`` with the reduced ``axes`` moved to the front and flattened into one axis."""
    shape = get_aval(x).shape
    kept = kept_axes(len(shape), axes)
    moved = transpose(x, tuple(axes) + kept)
    size = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    return reshape(moved, (size,) + tuple(shape[d] for d in kept))


def _product_tree(x):
    """The product over axis 0, multiplying the first half by the second until one is left
    (an odd element out waits for the next round)."""
    aval = get_aval(x)
    n = aval.shape[0]
    if n == 0:
        return structural.full(aval.shape[1:], 1, aval.dtype)
    while n > 1:
        half = n // 2
        product = elementwise.mul(structural.slice_in_dim(x, 0, half),
                                  structural.slice_in_dim(x, half, 2 * half))
        if n % 2:
            product = structural.concatenate([product, structural.slice_in_dim(x, n - 1, n)], 0)
        x, n = product, half + n % 2
    return squeeze(x, (0,))


reduce_prod_p.def_jvp(_reduce_prod_jvp)


def _chooser_jvp(g, ans, x, *, axes):
    """reduce_max/min pass on the tangent of the chosen element; ties share it equally (the
    mean of the tied tangents), as JAX does."""
    shape = get_aval(x).shape
    kept = kept_axes(len(shape), axes)
    chosen = elementwise.eq(x, broadcast_in_dim(ans, shape, kept))
    location_indicators = elementwise.convert_element_type(chosen, get_aval(g).dtype)
    counts = reduce_sum(location_indicators, axes)
    return elementwise.div(reduce_sum(elementwise.mul(g, location_indicators), axes), counts)


ad.defjvp2(reduce_max_p, _chooser_jvp)
ad.defjvp2(reduce_min_p, _chooser_jvp)
for _prim in (reduce_and_p, reduce_or_p, reduce_xor_p):
    ad.defjvp_zero(_prim)


def reduce_prod(operand, axes):
    return reduce_prod_p.bind(operand, axes=canonical_axes(axes))


def reduce_max(operand, axes):
    return reduce_max_p.bind(operand, axes=canonical_axes(axes))


def reduce_min(operand, axes):
    return reduce_min_p.bind(operand, axes=canonical_axes(axes))


def reduce_and(operand, axes):
    return reduce_and_p.bind(operand, axes=canonical_axes(axes))


def reduce_or(operand, axes):
    return reduce_or_p.bind(operand, axes=canonical_axes(axes))


def reduce_xor(operand, axes):
    return reduce_xor_p.bind(operand, axes=canonical_axes(axes))


# --- lax.reduce: a reduction given by its binary computation -------------------------------

# The primitive a one-equation computation is made of -> (reduction, its identity).
_MONOIDS = {
    "add": (reduce_sum, lambda dtype: 0),
    "mul": (reduce_prod, lambda dtype: 1),
    "max": (reduce_max, lowest),
    "min": (reduce_min, highest),
    "and": (reduce_and, _all_ones),
    "or": (reduce_or, _no_bits),
    "xor": (reduce_xor, _no_bits),
}


def _monoid_name(computation, dtype):
    """The name of the primitive ``computation(a, b)`` applies to scalars, when it is exactly
    one primitive applied to both arguments; otherwise None."""
    scalar = ShapedArray((), dtype)
    jaxpr, consts = trace_to_jaxpr(lambda a, b: [computation(a, b)], [scalar, scalar],
                                   "lax.reduce computation")
    if consts or len(jaxpr.eqns) != 1:
        return None
    eqn, = jaxpr.eqns
    if set(eqn.invars) != set(jaxpr.invars) or jaxpr.outvars != eqn.outvars:
        return None
    return eqn.primitive.name


def _is_identity(init, dtype, identity):
    if isinstance(init, Tracer):
        return False
    return bool(np.all(to_numpy(init) == identity(dtype)))


def monoid_of(computation, init, dtype):
    """``"max"``, ``"add"``...: the monoid ``computation`` is on ``dtype`` when ``init`` is
    its identity, else None (``reduce_window`` gives max and min pooling JAX's
    derivative by it)."""
    name = _monoid_name(computation, dtype)
    if name in _MONOIDS and _is_identity(init, dtype, _MONOIDS[name][1]):
        return name
    return None


def monoid_identity(name, dtype):
    """The identity of monoid ``name`` (``monoid_of``) on ``dtype``."""
    return np.asarray(_MONOIDS[name][1](dtype), dtype)


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """Reduce ``operands`` over ``dimensions`` with the binary ``computation`` from
    ``init_values`` (``lax.reduce``).

    The common monoids (add, mul, max, min, and, or, xor) on one operand become their
    reduction primitive, the result combined with ``init_values`` when it is not the
    identity. Any other computation, on one operand or a tree of them (an argmax carrying
    its index), is applied to whole arrays by ``_pairwise``. As XLA's, the result is defined
    for an associative ``computation``.
    """
    if out_sharding is not None:
        refuse_out_sharding("lax.reduce", out_sharding)
    flat_operands, tree = pytree.tree_flatten(operands)
    flat_inits, init_tree = pytree.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: "
                         f"{tree} vs. {init_tree}")
    if len(flat_operands) == 1:
        operand, init = flat_operands[0], flat_inits[0]
        dtype = get_aval(operand).dtype
        name = _monoid_name(computation, dtype)
        if name in _MONOIDS:
            reduce_fn, identity = _MONOIDS[name]
            out = reduce_fn(operand, dimensions)
            if not _is_identity(init, dtype, identity):
                out = computation(out, init)
            return out  # as JAX's monoid reductions return it, whatever the operands' tree
    _check_reduce(flat_operands, flat_inits, dimensions)

    def combine(a, b):
        return pytree.tree_leaves(computation(pytree.tree_unflatten(tree, a),
                                              pytree.tree_unflatten(tree, b)))
    return pytree.tree_unflatten(tree, _pairwise(flat_operands, flat_inits, combine,
                                                 tuple(dimensions)))


def _check_reduce(operands, inits, dimensions):
    """JAX's errors for a reduction it would hand to XLA's generic ``reduce``."""
    avals, init_avals = [get_aval(x) for x in operands], [get_aval(v) for v in inits]
    if any(a.shape != avals[0].shape for a in avals):
        raise ValueError("reduce operands must all have the same shape, got "
                         f"{[a.shape for a in avals]}")
    if any(a.shape for a in init_avals):
        raise ValueError("reduce found non-scalar initial value: "
                         f"{[a.shape for a in init_avals if a.shape]}")
    if any(a.dtype != v.dtype for a, v in zip(avals, init_avals)):
        raise TypeError("reduce operand dtypes should match corresponding initial value "
                        f"dtypes, got operands={avals} and initial_values={init_avals}")
    ndim = avals[0].ndim
    if len(set(dimensions)) != len(dimensions) or \
            any(not 0 <= d < ndim for d in dimensions):
        raise ValueError(f"reduce dimensions {tuple(dimensions)} are not distinct axes of an "
                         f"operand of rank {ndim}")


def _pairwise(operands, inits, combine, dimensions):
    """Reduce the ``dimensions`` of ``operands`` by ``combine`` (lists of arrays in and
    out) applied to whole arrays: the reduced axes are moved last and flattened in
    row-major order, then neighbours are combined, ``(x0, x1), (x2, x3), ...``, halving the
    axis at each step (``log2`` of its length steps, each a few traced operations, where a
    fold would take one per element); the inits come first. Each value combined stands
    for a run of consecutive elements, left before right, so a computation that is
    associative but not commutative (an argmax keeping the first maximum) folds as in
    order."""
    shape = get_aval(operands[0]).shape
    kept = [d for d in range(len(shape)) if d not in dimensions]
    out_shape = tuple(shape[d] for d in kept)
    count = int(np.prod([shape[d] for d in dimensions], dtype=np.int64))
    xs = [reshape(transpose(x, (*kept, *sorted(dimensions))), (*out_shape, count))
          for x in operands]
    last = len(out_shape)
    while count > 1:
        half, odd = count // 2, count % 2
        evens = [structural.slice_in_dim(x, 0, 2 * half, 2, last) for x in xs]
        odds = [structural.slice_in_dim(x, 1, 2 * half, 2, last) for x in xs]
        pairs = combine(evens, odds)
        xs = [structural.concatenate([p, structural.slice_in_dim(x, count - 1, count, 1, last)],
                                     last) if odd else p for p, x in zip(pairs, xs)]
        count = half + odd
    starts = [broadcast_in_dim(v, out_shape, ()) for v in inits]
    if count == 0:
        return starts
    return combine(starts, [squeeze(x, (last,)) for x in xs])


# --- argmax / argmin -----------------------------------------------------------------------

def _arg_reduction(name, np_arg, comparison):
    """``argmax``/``argmin`` over one axis (``axes=(axis,)``), giving ``index_dtype`` indices.

    NumPy's ``argmax``/``argmin`` already agree with JAX: the first extremum wins, NaN counts as
    the extremum, and -0.0 equals 0.0. Its ``"arg-reduction"`` lowering is ``comparison``
    ("gt", "lt"): an element beats the best so far when it compares so with it, or is a NaN
    (for a target that writes the loop itself); its ``"kernels"`` lowering computes it from
    primitives with kernels (``_arg_by_reductions``), for a target that would otherwise run
    the library step away from its kernels (``Target.decomposed``).
    """
    prim = Primitive(name)
    library_lowering(prim, "arg-reduction")
    prim.def_lowering("arg-reduction", comparison)
    prim.def_lowering("kernels", lambda x, *, axes, index_dtype: _arg_by_reductions(
        reduce_max if comparison == "gt" else reduce_min, x, axes[0], index_dtype))

    def abstract_eval(x, *, axes, index_dtype):
        check_dtype(name, x, ORDERED)
        if not dtypes.is_int(index_dtype):
            raise TypeError(f"{name}: index_dtype must be an integer type, but got "
                            f"{np.dtype(index_dtype).name}")
        axis, = axes
        if not 0 <= axis < x.ndim:
            raise ValueError(f"Invalid axis {axis} for operand shape {x.shape}")
        if x.shape[axis] == 0:
            raise ValueError(f"argmin and argmax require non-empty reduced dimension. "
                             f"operand.shape={x.shape} axis={axis}")
        return ShapedArray(x.shape[:axis] + x.shape[axis + 1:], index_dtype)

    def impl(x, *, axes, index_dtype):
        return np_arg(x, axis=axes[0]).astype(index_dtype)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    prim.def_batch(reduction_batch_rule(prim))
    ad.defjvp_zero(prim)  # integer indices: a float0 tangent
    return prim


def _arg_by_reductions(extremum, x, axis, index_dtype):
    """The arg-reduction of ``x`` along ``axis`` as two reductions: the extremum
    (``extremum``, ``reduce_max`` or ``reduce_min``, which a NaN wins), then the least index
    of an element equal to it (-0.0 ties with 0.0) or a NaN, so the first extremum, or the
    first NaN, wins as in the primitive."""
    if dtypes.is_bool(x.dtype):
        x = elementwise.convert_element_type(x, np.uint8)
    kept = kept_axes(x.ndim, (axis,))
    best = broadcast_in_dim(extremum(x, (axis,)), x.shape, kept)
    found = elementwise.bitwise_or(elementwise.eq(x, best), elementwise.ne(x, x))
    none = structural.full(x.shape, x.shape[axis], index_dtype)
    index = structural.broadcasted_iota(index_dtype, x.shape, axis)
    return reduce_min(elementwise.select_n(found, none, index), (axis,))


argmax_p = _arg_reduction("argmax", np.argmax, "gt")
argmin_p = _arg_reduction("argmin", np.argmin, "lt")


def _index_dtype(index_dtype):
    dt = np.dtype(index_dtype)
    return dtypes.canonicalize(dt) if dtypes.is_int(dt) else dt  # non-ints: abstract_eval says


def argmax(operand, axis, index_dtype):
    """The index of the (first) maximum along ``axis``; NaN counts as the maximum."""
    return argmax_p.bind(operand, axes=(operator.index(axis),),
                         index_dtype=_index_dtype(index_dtype))


def argmin(operand, axis, index_dtype):
    """The index of the (first) minimum along ``axis``; NaN counts as the minimum."""
    return argmin_p.bind(operand, axes=(operator.index(axis),),
                         index_dtype=_index_dtype(index_dtype))


# --- cumulative reductions -----------------------------------------------------------------

def _cumulative(name, kind, accumulate, monoid=None):
    """A primitive of running reductions along ``axis``, from the end when ``reverse``.

    ``accumulate(x, axis)`` computes the forward running reduction on a NumPy array, one
    element after the other; or ``accumulate`` names the array module's function doing so
    (``"cumsum"``, accumulating in ``accumulation_dtype``), which any array module with
    NumPy's API has: its ``"array module"`` lowering, ``rule(xp, x, axis=, reverse=)``, is
    then the reduction with the module ``xp``, for a target keeping arrays on a device (CuPy
    on a GPU). ``monoid`` ("add", "max"...: ``monoid_of``; or cumlogsumexp's "logaddexp",
    NumPy's ``logaddexp`` on real numbers), when the reduction is one, is its ``"cumulative
    op"`` lowering, for a target that writes the loop itself.
    """
    prim = Primitive(name)
    library_lowering(prim, "cumulative op")
    if monoid is not None:
        prim.def_lowering("cumulative op", monoid)

    def abstract_eval(x, *, axis, reverse):
        check_dtype(name, x, kind)
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for array of shape "
                             f"{x.shape}")
        return x

    def running(xp, x, *, axis, reverse):
        if reverse:
            x = xp.flip(x, axis)
        if isinstance(accumulate, str):
            out = getattr(xp, accumulate)(x, axis=axis, dtype=accumulation_dtype(x.dtype))
        else:
            out = accumulate(x, axis)
        out = xp.asarray(out).astype(x.dtype, copy=False)
        return xp.flip(out, axis) if reverse else out

    def impl(x, *, axis, reverse):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return running(np, x, axis=axis, reverse=reverse)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    prim.def_batch(_cumulative_batch_rule(prim))
    if isinstance(accumulate, str):
        prim.def_lowering("array module", running)
    return prim


def _cumulative_batch_rule(prim):
    """vmap of a running reduction: the same running reduction, along the shifted axis."""
    def rule(axis_data, vals, dims, *, axis, reverse):
        (x,), (bdim,) = vals, dims
        return prim.bind(x, axis=axis + (axis >= bdim), reverse=reverse), bdim
    return rule


def _running_logsumexp(x, axis):
    """log(cumsum(exp(x))): ``logaddexp`` keeps real inputs from overflowing; complex inputs
    are summed directly in complex128 (enough range for complex64 inputs)."""
    if dtypes.is_complex(x.dtype):
        return np.log(np.cumsum(np.exp(x.astype(dtypes.complex128)), axis=axis))
    return np.logaddexp.accumulate(x.astype(accumulation_dtype(x.dtype)), axis=axis)


cumsum_p = _cumulative("cumsum", NUMBER, "cumsum", "add")
cumprod_p = _cumulative("cumprod", NUMBER, "cumprod", "mul")
def _running_extremum(ufunc, negative):
    def accumulate(x, axis):
        return _signed_zero_as_xla(ufunc.accumulate(x, axis=axis), x, negative,
                                   lambda m: np.logical_or.accumulate(m, axis=axis))
    return accumulate


cummax_p = _cumulative("cummax", NUMBER, _running_extremum(np.maximum, False), "max")
cummin_p = _cumulative("cummin", NUMBER, _running_extremum(np.minimum, True), "min")
cumlogsumexp_p = _cumulative("cumlogsumexp", INEXACT, _running_logsumexp, "logaddexp")


# --- derivatives of the cumulative reductions ----------------------------------------------

def _cumsum_transpose(ct, x, *, axis, reverse):
    """Element i was added into every running sum from i on: its cotangent is the running
    sum of the cotangents taken from the other end."""
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


ad.deflinear(cumsum_p, _cumsum_transpose)


def _prefix_scan(combine, x, axis, reverse):
    """The running ``combine`` along ``axis`` in log2(n) rounds of element-wise ops (Hillis
    and Steele's scan): after the round with ``shift`` s, element i holds the combination of
    the 2s elements ending at i (starting at i when ``reverse``).

    It is made of slices, concatenations and ``combine`` only, so autodiff sees through it:
    the JVPs of cumprod, cummax, cummin and cumlogsumexp are its JVP, as JAX's are that of
    its associative scan.
    """
    n = get_aval(x).shape[axis]
    shift = 1
    while shift < n:
        combined = combine(structural.slice_in_dim(x, 0, n - shift, axis=axis),
                           structural.slice_in_dim(x, shift, n, axis=axis))
        if reverse:  # element i combines elements i and i + shift
            pieces = [combined, structural.slice_in_dim(x, n - shift, n, axis=axis)]
        else:  # element i combines elements i - shift and i
            pieces = [structural.slice_in_dim(x, 0, shift, axis=axis), combined]
        x = structural.concatenate(pieces, axis)
        shift *= 2
    return x


def _logaddexp(a, b):
    """``log(exp(a) + exp(b))`` without overflow: the larger (by real part) plus
    ``log1p(exp(smaller - larger))``, smooth where a == b. Equal infinities, whose
    difference is NaN, give ``a + b``."""
    ew = elementwise
    key = ew.real if dtypes.is_complex(get_aval(a).dtype) else (lambda v: v)
    a_larger = ew.ge(key(a), key(b))
    larger, smaller = ew.select(a_larger, a, b), ew.select(a_larger, b, a)
    delta = ew.sub(smaller, larger)
    return ew.select(ew.ne(delta, delta), ew.add(a, b),
                     ew.add(larger, transcendental.log1p(transcendental.exp(delta))))


def _scan_jvp(combine):
    def rule(primals, tangents, *, axis, reverse):
        outs, tangents_out = ad.jvp_flat(
            lambda v: [_prefix_scan(combine, v, axis, reverse)], primals, tangents)
        return outs[0], tangents_out[0]
    return rule


# (lambdas: ``elementwise`` may still be loading when this module is.)
cumprod_p.def_jvp(_scan_jvp(lambda a, b: elementwise.mul(a, b)))
cummax_p.def_jvp(_scan_jvp(lambda a, b: elementwise.max(a, b)))
cummin_p.def_jvp(_scan_jvp(lambda a, b: elementwise.min(a, b)))
cumlogsumexp_p.def_jvp(_scan_jvp(_logaddexp))


def _cumulative_params(axis, reverse):
    axis = operator.index(axis)
    if axis < 0:
        raise ValueError("XLA operations do not allow negative axes")
    return dict(axis=axis, reverse=bool(reverse))


def cumsum(operand, axis=0, reverse=False):
    """Running sums along ``axis`` (from the end when ``reverse``)."""
    return cumsum_p.bind(operand, **_cumulative_params(axis, reverse))


def cumprod(operand, axis=0, reverse=False):
    return cumprod_p.bind(operand, **_cumulative_params(axis, reverse))


def cummax(operand, axis=0, reverse=False):
    return cummax_p.bind(operand, **_cumulative_params(axis, reverse))


def cummin(operand, axis=0, reverse=False):
    return cummin_p.bind(operand, **_cumulative_params(axis, reverse))


def cumlogsumexp(operand, axis=0, reverse=False):
    """Running ``log(sum(exp(x)))`` along ``axis``, computed without overflow."""
    return cumlogsumexp_p.bind(operand, **_cumulative_params(axis, reverse))

"""Contractions: ``dot_general`` (and ``dot``), plus what they share with convolution.

``dot_general`` contracts chosen axes of two arrays, with optional batch axes that are matched
rather than summed. Its result holds the batch axes, then the free (neither batch nor
contracted) axes of ``lhs``, then those of ``rhs``. The reference implementation moves the axes
into that order and calls ``np.matmul``: integers multiply exactly and wrap as XLA's do,
``float16`` accumulates in ``float32`` as XLA does on the CPU.
"""

import enum
import math
import operator
from typing import NamedTuple

import numpy as np

from ..core import Primitive, ShapedArray, Var, dtypes, get_aval
from ..interpreters import ad
from ..interpreters.transpose import is_undefined
from ..sharding import refuse_out_sharding
from .elementwise import convert_element_type, convert_element_type_p, mul, mul_p
from .shapes import broadcast_in_dim, broadcast_in_dim_p, reshape, transpose, transpose_p
from .standard import library_lowering, remembered

__all__ = ["Precision", "dot_general", "dot_general_p", "dot", "scaled_dot"]


# --- rules shared with convolution ---------------------------------------------------------

def bilinear_jvp(prim):
    """The JVP of a primitive linear in each operand separately (a product):
    ``d(lhs . rhs) = dlhs . rhs + lhs . drhs``."""
    def rule(primals, tangents, **params):
        lhs, rhs = primals
        t_lhs, t_rhs = tangents
        out = prim.bind(lhs, rhs, **params)
        tangent = ad.Zero(ad.tangent_aval(get_aval(out)))
        if not isinstance(t_lhs, ad.Zero):
            tangent = ad.add_tangents(tangent, prim.bind(t_lhs, rhs, **params))
        if not isinstance(t_rhs, ad.Zero):
            tangent = ad.add_tangents(tangent, prim.bind(lhs, t_rhs, **params))
        return out, tangent
    prim.tangent_from_operands = True
    return rule


def bilinear_transpose(transpose_lhs, transpose_rhs):
    """The transpose rule of a bilinear primitive: exactly one operand is the linear unknown;
    ``transpose_lhs(ct, lhs_aval, rhs, **params)`` (and the mirror image) give its cotangent,
    cast to its dtype."""
    def rule(ct, lhs, rhs, **params):
        if is_undefined(lhs) and is_undefined(rhs):
            raise ValueError("a product of two linear values is not linear: cannot "
                             "transpose it")
        if is_undefined(lhs):
            return [_cast(transpose_lhs(ct, lhs.aval, rhs, **params), lhs.aval), None]
        return [None, _cast(transpose_rhs(ct, lhs, rhs.aval, **params), rhs.aval)]
    return rule


def _cast(x, aval):
    if get_aval(x).dtype == aval.dtype:
        return x
    return convert_element_type(x, aval.dtype, aval.weak_type)


# --- precision -----------------------------------------------------------------------------

class Precision(enum.Enum):
    """How precisely an accelerator should multiply floats (``lax.Precision``).

    The reference implementation always computes at full precision; the value is kept in the
    params so that compiled backends can honour it.
    """

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        return _PRECISION_NAMES.get(value)

    def __repr__(self):
        return f"Precision.{self.name}"

    __str__ = __repr__


_PRECISION_NAMES = {
    "default": Precision.DEFAULT, "bfloat16": Precision.DEFAULT, "fastest": Precision.DEFAULT,
    "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
}


def canonicalize_precision(precision):
    """None, or a pair of Precisions (one per operand), as JAX stores it in params."""
    if precision is None:
        return None
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        return tuple(_one_precision(p, precision) for p in precision)
    p = _one_precision(precision, precision)
    return (p, p)


def _one_precision(p, whole):
    try:
        return Precision(p)
    except ValueError:
        raise ValueError(f"Precision argument must be None, a lax.Precision, one of the "
                         f"strings {sorted(_PRECISION_NAMES)}, or a pair of these; "
                         f"got {whole!r}.") from None


# --- result and accumulation dtypes (shared with convolution) ------------------------------

def check_preferred_element_type(name, result_dtype, preferred):
    """The dtype a contraction returns given ``preferred_element_type`` (as XLA's MaybeUpcast).

    An integer or bool result may not be asked for in a narrower type.
    """
    if preferred is None or preferred == result_dtype:
        return result_dtype
    if not dtypes.is_inexact(result_dtype) and _bit_width(preferred) < _bit_width(result_dtype):
        raise TypeError(f"{name}: `preferred_element_type` must not be narrower than the "
                        f"original type, got preferred_element_type of {preferred.name} for "
                        f"result type of {result_dtype.name}.")
    return preferred


def _bit_width(dtype):
    return 1 if dtypes.is_bool(dtype) else np.dtype(dtype).itemsize * 8


def accumulation_dtype(result_dtype):
    """The dtype a contraction sums in: float16 and ml_dtypes' narrow floats (bfloat16,
    float8...) in float32, as XLA on the CPU, their narrow integers in int32 (wrapping into
    the result type once, as XLA's does); bools are counted as integers (an OR of ANDs is a
    count that is non-zero)."""
    if result_dtype == dtypes.float16 or (dtypes.is_ml_dtype(result_dtype)
                                          and dtypes.is_float(result_dtype)):
        return dtypes.float32
    if dtypes.is_ml_dtype(result_dtype):
        return dtypes.int32
    if dtypes.is_bool(result_dtype):
        return np.dtype(np.int64)
    return result_dtype


def finish_accumulation(acc, result_dtype):
    """Turn the accumulated value into the result dtype (bool: was anything counted?; a
    complex product asked for as a real result: its real part, as XLA keeps)."""
    if dtypes.is_bool(result_dtype):
        return acc != 0
    if dtypes.is_complex(acc.dtype) and not dtypes.is_complex(result_dtype):
        acc = acc.real
    with np.errstate(invalid="ignore", over="ignore"):
        return acc.astype(result_dtype, copy=False)


def as_accumulation(x, acc_dtype):
    """An operand in the accumulation dtype."""
    return x.astype(acc_dtype, copy=False)


# --- dot_general ---------------------------------------------------------------------------

class DotDimensionNumbers(tuple):
    """``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``: a plain tuple of tuples
    (hashable, equal to the tuple) that prints its axis lists as lists, as JAX's jaxprs do."""

    def __str__(self):
        (lc, rc), (lb, rb) = self
        return f"(({list(lc)}, {list(rc)}), ({list(lb)}, {list(rb)}))"


def _dimension_numbers(dimension_numbers):
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        return DotDimensionNumbers(((_axes(lc), _axes(rc)), (_axes(lb), _axes(rb))))
    except (TypeError, ValueError):
        raise TypeError("dot_general dimension_numbers must be ((lhs_contracting, "
                        "rhs_contracting), (lhs_batch, rhs_batch)), got "
                        f"{dimension_numbers!r}") from None


def _axes(axes):
    if isinstance(axes, (int, np.integer)):
        return (int(axes),)
    return tuple(operator.index(a) for a in axes)


def _higher_precision_dtype(a, b):
    """The operand dtype that can represent the other's values best, as XLA chooses it:
    complex over real, then more exponent bits, more mantissa bits, more bits, signed."""
    if a == b:
        return a

    def rank(dt):
        real = dtypes.finfo(dt) if dtypes.is_inexact(dt) else None
        return (dtypes.is_complex(dt),
                real.maxexp if real else -1, real.nmant if real else -1,
                _bit_width(real.dtype if real else dt), not dtypes.is_unsigned_int(dt))
    return a if rank(a) >= rank(b) else b


def _check_dot_axes(side, aval, contract, batch):
    if not all(0 <= d < aval.ndim for d in contract + batch):
        raise TypeError(f"dot_general requires {side} dimension numbers to be nonnegative and "
                        f"less than the number of axes of the {side} value, got {side}_batch "
                        f"of {batch} and {side}_contracting of {contract} for {side} of rank "
                        f"{aval.ndim}")
    for what, axes in (("batch", batch), ("contracting", contract)):
        if len(set(axes)) != len(axes):
            raise TypeError(f"dot_general requires {side} {what} dimensions to be distinct, "
                            f"got {side}_{what} {axes}.")
    if set(contract) & set(batch):
        raise TypeError(f"dot_general requires {side} batch dimensions to be disjoint from "
                        f"contracting dimensions, got {side}_batch {batch} and "
                        f"{side}_contracting {contract}.")


def _free_axes(ndim, contract, batch):
    return [d for d in range(ndim) if d not in contract and d not in batch]


dot_general_p = Primitive("dot_general")
library_lowering(dot_general_p, "matrix product")
# As JAX prints it: the sharding never, precision and preferred type only when set.
dot_general_p.pp_params = lambda params: {
    k: v for k, v in params.items()
    if k != "out_sharding" and not (k in ("precision", "preferred_element_type") and v is None)}


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision,
                               preferred_element_type, out_sharding=None):
    (lc, rc), (lb, rb) = dimension_numbers
    _check_dot_axes("lhs", lhs, lc, lb)
    _check_dot_axes("rhs", rhs, rc, rb)
    if len(lb) != len(rb):
        raise TypeError(f"dot_general requires equal numbers of lhs_batch and rhs_batch "
                        f"dimensions, got lhs_batch {lb} and rhs_batch {rb}.")
    for what, la, ra in (("lhs batch dimensions and rhs batch dimensions", lb, rb),
                         ("contracting dimensions", lc, rc)):
        lshape = tuple(lhs.shape[d] for d in la)
        rshape = tuple(rhs.shape[d] for d in ra)
        if lshape != rshape:
            raise TypeError(f"dot_general requires {what} to have the same shape, got "
                            f"{lshape} and {rshape}.")
    shape = (tuple(lhs.shape[d] for d in lb)
             + tuple(lhs.shape[d] for d in _free_axes(lhs.ndim, lc, lb))
             + tuple(rhs.shape[d] for d in _free_axes(rhs.ndim, rc, rb)))
    dtype = _dot_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


# (Remembered: every contraction of a gradient is typed three times, forward and two
# transposes; its dimension numbers are DotDimensionNumbers, hashable tuples.)
dot_general_p.def_abstract_eval(remembered(_dot_general_abstract_eval))


def _dot_result_dtype(lhs_dtype, rhs_dtype, preferred_element_type):
    return check_preferred_element_type(
        "dot_general", _higher_precision_dtype(lhs_dtype, rhs_dtype), preferred_element_type)


def _matrix_order(ndim, contract, batch):
    """The axes of an operand of ``ndim`` axes in the order that makes it a stack of
    matrices: its batch axes, its free axes, its contracted ones (each as given)."""
    return (*batch, *_free_axes(ndim, contract, batch), *contract)


def _as_matrices(x, contract, batch):
    """``x`` with its axes ordered (batch, free, contract), flattened to a stack of matrices
    (b, free, contract); also returns the unflattened free shape."""
    free = _free_axes(x.ndim, contract, batch)
    free_shape = tuple(x.shape[d] for d in free)
    sizes = [math.prod(x.shape[d] for d in axes) for axes in (batch, free, contract)]
    x = np.transpose(x, _matrix_order(x.ndim, contract, batch))
    return x.reshape(sizes), free_shape


def _for_blas(stack):
    """``stack`` (of matrices) as it is when BLAS takes its matrices (rows or columns
    contiguous), else a contiguous copy: NumPy multiplies other layouts in a loop of its
    own, which disagrees with BLAS on infinities in complex products, so the values would
    depend on where the operands came from (a strided argument, a kernel's output)."""
    if stack.size == 0 or stack[0].flags.c_contiguous or stack[0].flags.f_contiguous:
        return stack
    return np.ascontiguousarray(stack)


# BLAS takes a product whose result is much wider than it is tall faster transposed: on
# OpenBLAS 0.3 (AMD EPYC, Zen 4; one thread or two) 128 x 10000 by 10000 x 10000 took
# 153 ms so against 168, 32 x 4096 by 4096 x 4096 9.5 against 13.2, and no product as
# large ran slower. The result is then the transpose of the product computed: a view.
WIDE_RESULT = 4            # columns per row from which a product is computed transposed
WIDE_RESULT_WORK = 1 << 26  # multiply-adds from which that pays


def _matmul(a, b):
    """``a @ b`` for stacks of matrices laid out for BLAS (``_for_blas``), computed as
    ``(b^T a^T)^T`` where they are real floats and the result is wide (``WIDE_RESULT``)."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    if dtypes.is_float(a.dtype) and m * WIDE_RESULT <= n and m * k * n >= WIDE_RESULT_WORK:
        return np.matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2)).swapaxes(-1, -2)
    return np.matmul(a, b)


@dot_general_p.def_impl
def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                      out_sharding=None):
    (lc, rc), (lb, rb) = dimension_numbers
    dtype = _dot_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    acc = accumulation_dtype(dtype)
    if dtypes.is_complex(lhs.dtype) or dtypes.is_complex(rhs.dtype):
        # (a real result of complex operands is the complex product's real part: its
        # imaginary parts multiply each other into it)
        acc = np.result_type(acc, np.complex64)
    a, lhs_free = _as_matrices(lhs, lc, lb)
    b, rhs_free = _as_matrices(rhs, rc, rb)
    a = _for_blas(as_accumulation(a, acc))
    b = _for_blas(np.swapaxes(as_accumulation(b, acc), 1, 2))
    with np.errstate(over="ignore", invalid="ignore"):
        product = _matmul(a, b)
    batch_shape = tuple(lhs.shape[d] for d in lb)
    return finish_accumulation(product, dtype).reshape(batch_shape + lhs_free + rhs_free)


# --- dot_general's transformation rules ----------------------------------------------------

dot_general_p.def_jvp(bilinear_jvp(dot_general_p))


def _dot_general_transpose_lhs(ct, x_aval, y, *, dimension_numbers, swap_ans=False,
                               **params):
    """The cotangent of ``x`` in ``dot_general(x, y)`` (``swap_ans``: in ``dot_general(y,
    x)``): contract the cotangent with ``y`` over the axes ``y`` kept, matching batch axes,
    then put the axes back in ``x``'s order."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept = _free_axes(x_aval.ndim, x_contract, x_batch)
    y_kept = _free_axes(get_aval(y).ndim, y_contract, y_batch)
    n_batch = len(x_batch)
    # The product's axes: batch, then lhs free, then rhs free; y's are lhs free if swapped.
    y_first = n_batch if swap_ans else n_batch + len(x_kept)
    ans_y = tuple(range(y_first, y_first + len(y_kept)))
    ans_batch = tuple(range(n_batch))
    product = dot_general_p.bind(ct, y, dimension_numbers=DotDimensionNumbers(
        ((ans_y, tuple(y_kept)), (ans_batch, tuple(y_batch)))), **params)
    # product's axes: x's batch axes, x's kept axes, then y's contracted axes in ascending
    # order, each of which stands for the x axis it was contracted with.
    x_contract_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    x_axes = list(x_batch) + x_kept + x_contract_by_y
    return transpose(product, tuple(np.argsort(x_axes)))


def _dot_general_transpose_rhs(ct, x, y_aval, *, dimension_numbers, **params):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return _dot_general_transpose_lhs(ct, y_aval, x, dimension_numbers=swapped,
                                      swap_ans=True, **params)


dot_general_p.def_transpose(bilinear_transpose(_dot_general_transpose_lhs,
                                               _dot_general_transpose_rhs))


def _shift_past(axes, bdim):
    """Axes of an unbatched operand, renumbered for the operand with a batch axis at bdim."""
    return tuple(a + (a >= bdim) for a in axes)


def _dot_general_batch_rule(axis_data, vals, dims, *, dimension_numbers, **params):
    """vmap of dot_general without moving any axis: two batched operands get one more batch
    axis pair (first, so the result's batch axis is 0); a batched operand alone keeps its
    batch axis as a free axis, which the result holds where dot_general puts free axes."""
    lhs, rhs = vals
    lbd, rbd = dims
    (lc, rc), (lb, rb) = dimension_numbers
    if lbd is not None and rbd is not None:
        new_dims = (((_shift_past(lc, lbd), _shift_past(rc, rbd)),
                     ((lbd,) + _shift_past(lb, lbd), (rbd,) + _shift_past(rb, rbd))))
        out_dim = 0
    elif lbd is not None:
        lhs_free = _free_axes(get_aval(lhs).ndim - 1, lc, lb)
        new_dims = ((_shift_past(lc, lbd), rc), (_shift_past(lb, lbd), rb))
        out_dim = len(lb) + sum(d < lbd for d in lhs_free)
    else:
        rhs_free = _free_axes(get_aval(rhs).ndim - 1, rc, rb)
        new_dims = ((lc, _shift_past(rc, rbd)), (lb, _shift_past(rb, rbd)))
        lhs_out_axes = get_aval(lhs).ndim - len(lc)  # batch + free axes of lhs
        out_dim = lhs_out_axes + sum(d < rbd for d in rhs_free)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=DotDimensionNumbers(new_dims),
                             **params)
    return out, out_dim


dot_general_p.def_batch(_dot_general_batch_rule)


# --- what the compiler asks of dot_general: its cost and a simplification ------------------

def _dot_general_flops(eqn):
    """A multiply and an add per term: ``2 * result size * contracted size``."""
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    k = math.prod(lhs[d] for d in lhs_contract)
    return 2 * math.prod(eqn.outvars[0].aval.shape) * k


dot_general_p.def_rule("flops", _dot_general_flops)


def _simplify_transpose_of_dot(eqn, ins, producer_of, use_count, value_of):
    """``transpose(dot(a, b))`` that puts the right operand's free axes before the left
    one's is ``transpose(dot(b, a))`` by what is left of the permutation: nothing when it
    only swapped the two (the library computes the product in the layout wanted), else a
    transpose keeping each matrix's columns last, which the product can write itself
    (``fusion._product_epilogues``: the gradient of an attention's values, merged back
    into its heads). Only when nothing else reads the dot, which would otherwise run
    twice."""
    dot = producer_of(ins[0])
    if dot is None or dot.primitive is not dot_general_p or use_count(ins[0]) != 1:
        return None
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    lhs, rhs = dot.invars
    permutation = tuple(eqn.params["permutation"])
    n_batch, n_out = len(lb), len(permutation)
    n_left = lhs.aval.ndim - len(lc) - n_batch
    left, right = range(n_batch, n_batch + n_left), range(n_batch + n_left, n_out)
    at = {axis: i for i, axis in enumerate(permutation)}
    if not (left and right) or max(at[a] for a in right) > min(at[a] for a in left):
        return None
    n_right = n_out - n_batch - n_left
    # the swapped dot's axes: the batch axes, the right operand's free axes, the left's
    swapped_axis = {**{a: a for a in range(n_batch)},
                    **{a: a + n_right for a in left}, **{a: a - n_left for a in right}}
    rest = tuple(swapped_axis[a] for a in permutation)
    precision = dot.params.get("precision")
    params = dict(dot.params, dimension_numbers=DotDimensionNumbers(((rc, lc), (rb, lb))),
                  precision=tuple(precision[::-1]) if isinstance(precision, tuple)
                  else precision)
    if rest == tuple(range(n_out)):
        swapped = dot.replace(invars=[rhs, lhs], outvars=list(eqn.outvars), params=params)
        return [swapped], "transpose of a dot as the dot with its operands swapped"
    shape = dot.outvars[0].aval.shape
    product = Var(dot.outvars[0].aval.update(
        shape=shape[:n_batch] + shape[n_batch + n_left:] + shape[n_batch:n_batch + n_left]))
    swapped = dot.replace(invars=[rhs, lhs], outvars=[product], params=params)
    return [swapped, eqn.replace(invars=[product], params=dict(eqn.params, permutation=rest))], \
        "transpose of a dot as a transpose of the dot with its operands swapped"


class MatrixStack(NamedTuple):
    """A row-major operand of a ``dot_general`` read in place as a stack of matrices: one
    per index of its batch axes, ``batch_strides`` elements apart along each; each matrix
    ``rows`` (its free axes' size) by ``depth`` (its contracted axes'), or the transpose
    when not ``contracted_last``; the elements of its outer group ``leading`` apart (BLAS's
    leading dimension), those of its inner group adjacent."""
    batch_strides: tuple
    rows: int
    depth: int
    contracted_last: bool
    leading: int


def matrix_stack(shape, contracting, batch):
    """How a row-major operand of ``shape`` reads as a ``MatrixStack`` for a ``dot_general``
    contracting its axes ``contracting`` (in increasing order, as the other operand's pair
    with them) and batching over ``batch``, or None when it cannot: its free axes and its
    contracted axes must each be a run of adjacent axes (flattening to one stride), and the
    inner run must end at the last axis; axes of size 1 are left out, being anywhere at no
    cost. Batch axes may be anywhere else: the heads of an attention's
    ``(batch, sequence, heads, width)`` projection need no transpose."""
    contracting, ndim = list(contracting), len(shape)
    if contracting != sorted(contracting):
        return None
    long = [d for d in range(ndim) if shape[d] != 1]
    free, contracted = ([d for d in group if shape[d] != 1]
                        for group in (_free_axes(ndim, contracting, batch), contracting))
    if any(long.index(g[-1]) - long.index(g[0]) != len(g) - 1
           for g in (free, contracted) if g):
        return None
    contracted_last = not free or bool(contracted) and contracted[-1] > free[-1]
    inner, outer = (contracted, free) if contracted_last else (free, contracted)
    if inner and inner[-1] != long[-1]:
        return None
    strides = [math.prod(shape[d + 1:]) for d in range(ndim)]
    size = math.prod(shape[d] for d in inner)
    return MatrixStack(tuple(strides[d] for d in batch), math.prod(shape[d] for d in free),
                       math.prod(shape[d] for d in contracted), contracted_last,
                       strides[outer[-1]] if outer else max(size, 1))


def result_stack(dimension_numbers, lhs_ndim, shape, permutation):
    """How the result of a ``dot_general`` (of ``shape``: its batch axes, the left
    operand's free axes, the right one's), transposed by ``permutation``,
    lies in memory as a ``MatrixStack`` of its products' results: each a matrix of (left
    free size) rows by (right free size) columns, rows ``leading`` apart and columns
    adjacent, one per index of the batch axes at their strides; None when the transpose
    does not keep that form (the left free axes out of order, or the right ones not the
    last, in order). A product can then write its results transposed (an attention's
    heads merged back into ``(batch, sequence, heads, width)``) instead of a kernel
    copying them."""
    (lc, _), (lb, _) = dimension_numbers
    permutation = tuple(permutation)
    at = [permutation.index(j) for j in range(len(shape))]  # where each axis went
    n_batch, n_rows = len(lb), lhs_ndim - len(lc) - len(lb)
    batch, rows, columns = at[:n_batch], at[n_batch:n_batch + n_rows], at[n_batch + n_rows:]
    if rows != sorted(rows):
        return None
    stack = matrix_stack([shape[j] for j in permutation], columns, batch)
    return stack if stack is not None and stack.contracted_last else None


def _untransposed(atom, producer_of):
    """(the array a chain of transposes ending in ``atom`` starts from, the permutation
    they make together): ``atom``'s axis ``i`` is that array's axis ``permutation[i]``."""
    permutation = None
    while (t := producer_of(atom)) is not None and t.primitive is transpose_p:
        step = tuple(t.params["permutation"])
        permutation = step if permutation is None else tuple(step[p] for p in permutation)
        atom = t.invars[0]
    return atom, permutation


def _simplify_dot_of_transposed(eqn, ins, producer_of, use_count, value_of):
    """``dot_general`` of a transposed operand (``x @ w.T``, a linear layer as PyTorch
    writes it and what autodiff makes of ``x @ w``; an attention's heads split off by a
    transpose) as the ``dot_general`` of the untransposed array, its dimension numbers
    carried through the permutation, where that array reads as a ``matrix_stack``: matrix
    products read it in place (BLAS's "T" and leading dimension, the tiled products'
    strides), so the transpose need not be copied first. It stays only for whatever else
    reads it. The result's free axes must keep their order."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    operands, numbers = list(ins), [[list(lc), list(lb)], [list(rc), list(rb)]]
    for i, atom in enumerate(ins):
        source, perm = _untransposed(atom, producer_of)
        if perm is None:
            continue
        free = [perm[d] for d in _free_axes(len(perm), *numbers[i])]
        if free == sorted(free):
            operands[i] = source
            numbers[i] = [[perm[d] for d in axes] for axes in numbers[i]]
    if operands == list(ins):
        return None
    pairs = sorted(zip(numbers[0][0], numbers[1][0]))   # contracted in increasing order
    numbers[0][0], numbers[1][0] = [a for a, _ in pairs], [b for _, b in pairs]
    if any(matrix_stack(a.aval.shape, *n) is None for a, n in zip(operands, numbers)):
        return None
    params = dict(eqn.params, dimension_numbers=DotDimensionNumbers(
        ((tuple(numbers[0][0]), tuple(numbers[1][0])),
         (tuple(numbers[0][1]), tuple(numbers[1][1])))))
    return [eqn.replace(invars=operands, params=params)], \
        "a dot of a transposed operand as the dot of the untransposed one, read in place"


def _simplify_transpose(eqn, ins, producer_of, use_count, value_of):
    """A transpose of a chain of transposes (autodiff's, undoing and redoing an
    attention's head split) as one transpose of the array the chain starts from, or that
    array itself when they undo each other: one kernel's copy at most, and a product's
    result transposed once can be written in that layout (``fusion._product_epilogues``).
    Else ``_simplify_transpose_of_dot``."""
    source, inner = _untransposed(ins[0], producer_of)
    if inner is None:
        return _simplify_transpose_of_dot(eqn, ins, producer_of, use_count, value_of)
    permutation = tuple(inner[p] for p in eqn.params["permutation"])
    if permutation == tuple(range(len(permutation))):
        return source, "transposes that undo each other"
    return [eqn.replace(invars=[source], params=dict(eqn.params, permutation=permutation))], \
        "a transpose of a transpose as one transpose"


# transpose's simplifications matter most to dots, so they are written here, with
# dot_general.
def _simplify_dot_without_contraction(eqn, ins, producer_of, use_count, value_of):
    """``dot_general`` contracting no axis (what ``vmap`` makes of per-example gradients:
    a scalar per row times the row) as the product of its operands broadcast to its
    result, which fuses with what computes and reads them: a library call made it a
    batch of 1x1 by 1xn matrix products. Where each operand's axes keep their order in the
    result, and its dtype is both operands' (one product, rounded once, either way)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = ins
    out = eqn.outvars[0]
    if lc or rc or not (lhs.aval.dtype == rhs.aval.dtype == out.aval.dtype) or \
            dtypes.is_complex(out.aval.dtype) or out.aval.dtype == dtypes.bool_:
        return None
    n_batch, n_left = len(lb), lhs.aval.ndim - len(lb)
    places = []
    for operand, batch, first in ((lhs, lb, n_batch), (rhs, rb, n_batch + n_left)):
        free = iter(range(first, out.aval.ndim))
        place = [batch.index(a) if a in batch else next(free) for a in range(operand.aval.ndim)]
        if place != sorted(place):
            return None
        places.append(tuple(place))
    spread = [Var(out.aval), Var(out.aval)]
    broadcasts = [eqn.replace(invars=[x], outvars=[v], primitive=broadcast_in_dim_p,
                              params={"shape": out.aval.shape, "broadcast_dimensions": place,
                                      "sharding": None})
                  for x, v, place in zip(ins, spread, places)]
    product = eqn.replace(invars=spread, outvars=[out], primitive=mul_p, params={})
    return broadcasts + [product], "a dot contracting no axis as a product of broadcasts"


def _simplify_float16_dot(eqn, ins, producer_of, use_count, value_of):
    """A ``dot_general`` of float16 (or bfloat16) operands as what it computes
    (``accumulation_dtype``): the product of their float32 conversions (exact), rounded
    once to a result of their type. The conversions are kernels and the product a float32
    one, which BLAS computes natively; a float16 product was a call back into Python
    (512x512: 2.5x jax.jit), a bfloat16 one a reference step converting in NumPy."""
    out = eqn.outvars[0]
    narrow = ins[0].aval.dtype
    if narrow not in (dtypes.float16, dtypes.bfloat16) or \
            any(x.aval.dtype != narrow for x in ins) or \
            out.aval.dtype not in (narrow, dtypes.float32):
        return None
    f32 = np.dtype(np.float32)
    converted = {x: Var(ShapedArray(x.aval.shape, f32)) for x in ins}   # (once for x @ x)
    product = Var(ShapedArray(out.aval.shape, f32)) if out.aval.dtype != f32 else out
    eqns = [eqn.replace(primitive=convert_element_type_p, invars=[x], outvars=[w],
                        params={"new_dtype": f32, "weak_type": False})
            for x, w in converted.items()]
    wide = [converted[x] for x in ins]
    eqns.append(eqn.replace(invars=wide, outvars=[product],
                            params=dict(eqn.params, preferred_element_type=f32)))
    if product is not out:
        eqns.append(eqn.replace(primitive=convert_element_type_p, invars=[product],
                                outvars=[out], params={"new_dtype": out.aval.dtype,
                                                       "weak_type": out.aval.weak_type}))
    return eqns, f"a {narrow.name} dot as the float32 dot of its conversions"


def _simplify_dot_of_unstacked(eqn, ins, producer_of, use_count, value_of):
    """A float ``dot_general`` an operand of which reads as no matrix stack
    (``matrix_stack``: its free axes on both sides of its contracted ones, an image's
    rows contracted between its columns and its channels) as the dot of that operand
    transposed to its batch, free and contracted axes in turn (``_matrix_order``), which
    does: one kernel's copy, as the reference's ``_as_matrices`` makes, where the product
    called back into Python (a bilinear resize of a 256x256x3 image: 6.6 -> 4.0 ms,
    jax.jit 4.1-4.4)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    if not lc or any(x.aval.dtype not in (np.float32, np.float64) for x in ins):
        return None
    eqns, operands, numbers = [], [], []
    for x, contracting, batch in zip(ins, (lc, rc), (lb, rb)):
        if matrix_stack(x.aval.shape, contracting, batch) is not None:
            operands.append(x)
            numbers.append((tuple(contracting), tuple(batch)))
            continue
        permutation = _matrix_order(x.aval.ndim, contracting, batch)
        moved = Var(ShapedArray(tuple(x.aval.shape[d] for d in permutation), x.aval.dtype))
        eqns.append(eqn.replace(primitive=transpose_p, invars=[x], outvars=[moved],
                                params={"permutation": permutation}))
        kept = x.aval.ndim - len(contracting)
        operands.append(moved)
        numbers.append((tuple(range(kept, kept + len(contracting))), tuple(range(len(batch)))))
    if not eqns:
        return None
    (lc, lb), (rc, rb) = numbers
    return eqns + [eqn.replace(invars=operands, params=dict(
        eqn.params, dimension_numbers=((lc, rc), (lb, rb))))], \
        "a dot of an operand read as no matrix stack as the dot of its transpose"


def _simplify_dot(eqn, ins, producer_of, use_count, value_of):
    return _simplify_dot_without_contraction(eqn, ins, producer_of, use_count, value_of) or \
        _simplify_float16_dot(eqn, ins, producer_of, use_count, value_of) or \
        _simplify_dot_of_transposed(eqn, ins, producer_of, use_count, value_of) or \
        _simplify_dot_of_unstacked(eqn, ins, producer_of, use_count, value_of)


transpose_p.def_rule("simplify", _simplify_transpose)
dot_general_p.def_rule("simplify", _simplify_dot)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                *, out_sharding=None):
    """Contract ``lhs`` and ``rhs`` over the axes named by ``dimension_numbers``.

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    Operands may have different dtypes; the result has the more precise one (or
    ``preferred_element_type``).
    """
    if out_sharding is not None:
        refuse_out_sharding("lax.dot_general", out_sharding)
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize(preferred_element_type)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=_dimension_numbers(dimension_numbers),
                              precision=canonicalize_precision(precision),
                              preferred_element_type=preferred_element_type, out_sharding=None)


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """Vector/matrix products of 1-D and 2-D operands, or ``dot_general`` when
    ``dimension_numbers`` is given."""
    if dimension_numbers is None:
        ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
        if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]):
            raise ValueError(f"lax.dot: dimension_numbers must be specified when not "
                             f"performing simple un-batched matrix-matrix, matrix-vector, or "
                             f"vector-vector products; got lhs_shape={ls} rhs_shape={rs}")
        dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type,
                       out_sharding=out_sharding)


# --- scaled_dot: a product of block-scaled operands ----------------------------------------

def _default_scaled_dims(ndim):
    if ndim == 2:
        return ((1,), (0,)), ((), ())
    if ndim == 3:
        return ((2,), (1,)), ((0,), (0,))
    raise ValueError(f"scaled_dot: dimension_numbers must be given for operands of rank {ndim}")


def _apply_scale(name, x, scale, contracting):
    """``x * scale`` in bfloat16, ``scale`` repeated along the contracting axes to ``x``'s
    size there (its "subchannels"); every other axis must match."""
    x = convert_element_type(x, dtypes.bfloat16)
    if scale is None:
        return x
    shape, scale_shape = get_aval(x).shape, get_aval(scale).shape
    if len(scale_shape) != len(shape) or any(
            (n % m if a in contracting else n != m) if m else n
            for a, (n, m) in enumerate(zip(shape, scale_shape))):
        raise ValueError(f"scaled_dot: {name} of shape {scale_shape} does not fit an operand "
                         f"of shape {shape} (equal sizes, or along the contracting axes a "
                         "divisor of the operand's)")
    scale = convert_element_type(scale, dtypes.bfloat16)
    for axis in contracting:
        scale = _repeat_blocks(scale, axis, shape[axis] // scale_shape[axis])
    return mul(x, scale)


def _repeat_blocks(x, axis, factor):
    """Each element of ``x`` along ``axis`` repeated ``factor`` times, in place."""
    if factor == 1:
        return x
    shape = get_aval(x).shape
    spread = shape[:axis + 1] + (factor,) + shape[axis + 1:]
    kept = [d for d in range(len(spread)) if d != axis + 1]
    return reshape(broadcast_in_dim(x, spread, kept),
                   shape[:axis] + (shape[axis] * factor,) + shape[axis + 1:])


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """``(lhs * lhs_scale) . (rhs * rhs_scale)`` (``dot_general``), each scale repeated along
    the contracting axes over blocks of the operand ("subchannels"). As JAX computes it on
    the CPU: operands and scales in bfloat16, their products rounded to bfloat16, the sums
    in float32, the result in ``preferred_element_type`` (default bfloat16)."""
    dims = _dimension_numbers(dimension_numbers or _default_scaled_dims(get_aval(lhs).ndim))
    (lhs_contract, rhs_contract), _ = dims
    lhs = _apply_scale("lhs_scale", lhs, lhs_scale, lhs_contract)
    rhs = _apply_scale("rhs_scale", rhs, rhs_scale, rhs_contract)
    out = dot_general(lhs, rhs, dims, preferred_element_type=dtypes.float32)
    return convert_element_type(out, dtypes.bfloat16 if preferred_element_type is None
                                else preferred_element_type)

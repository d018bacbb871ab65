"""Windowed operations built from pads, strided slices and convolutions: ``reduce_window``
(pooling), ``associative_scan``, ``conv_transpose``, patches and unshared convolutions, and
the shape helpers of convolutions.

All are compositions of existing primitives, so JVP, transpose and batching come from theirs,
except max and min pooling, primitives for JAX's derivative (``_chooser``, and the
``select_and_gather_add`` and ``select_and_scatter_add`` of its tangent and cotangent) that
the compiler expands into the same composition. ``reduce_window`` folds the strided slices
of the padded operand, one slice per position in the window; for the usual pooling windows
that is a handful of slices, each fusing into one loop. ``associative_scan`` is JAX's work-efficient
parallel prefix algorithm.
"""

import itertools
import math
import operator

import numpy as np

from ..core import Primitive, get_aval, pytree, to_numpy
from ..interpreters import ad
from ..interpreters.staging import trace_to_closed_jaxpr
from ..interpreters.transpose import backward_pass
from . import elementwise, reductions
from .batch_util import bdim_at_front
from .convolution import conv_dimension_numbers, conv_general_dilated, padtype_to_pads
from .dot import dot_general
from .elementwise import add, bitwise_or
from .shapes import broadcast_in_dim, reshape, transpose
from .standard import owned_results
from .structural import (broadcasted_iota, concatenate, pad, rev, slice as lax_slice,
                         slice_in_dim)

__all__ = ["reduce_window", "reduce_window_max_p", "reduce_window_min_p",
           "select_and_gather_add_p", "select_and_scatter_add_p",
           "reduce_window_shape_tuple", "associative_scan", "conv_transpose",
           "conv_general_dilated_patches", "conv_general_dilated_local", "conv_shape_tuple",
           "conv_general_shape_tuple", "conv_transpose_shape_tuple",
           "conv_general_permutations"]


def _dilate_shape(shape, dilation):
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def _stride_dim(size, window, stride):
    return max(0, (size - window) // stride + 1) if size >= window else 0


# --- reduce_window ---------------------------------------------------------------------------

def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The shape ``reduce_window`` gives for these parameters (``padding`` as pairs)."""
    if base_dilation is not None:
        operand_shape = _dilate_shape(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilate_shape(window_dimensions, window_dilation)
    padded = tuple(d + lo + hi for d, (lo, hi) in zip(operand_shape, padding))
    return tuple(map(_stride_dim, padded, window_dimensions, window_strides))


def _window_params(shape, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    n = len(shape)
    window = tuple(operator.index(d) for d in window_dimensions)
    if len(window) != n:
        raise TypeError(f"reduce_window: window_dimensions {window} must have one entry per "
                        f"operand axis, got an operand of rank {n}")
    strides = (1,) * n if window_strides is None else tuple(map(operator.index, window_strides))
    base = (1,) * n if base_dilation is None else tuple(map(operator.index, base_dilation))
    wdil = (1,) * n if window_dilation is None else tuple(map(operator.index, window_dilation))
    if isinstance(padding, str):
        padding = padtype_to_pads(shape, _dilate_shape(window, wdil), strides, padding)
    padding = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    for name, values in (("window_strides", strides), ("base_dilation", base),
                         ("window_dilation", wdil), ("padding", padding)):
        if len(values) != n:
            raise TypeError(f"reduce_window: {name} must have {n} entries, got {values}")
    return window, strides, padding, base, wdil


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce every window of ``operand`` with ``computation``, starting from ``init_value``.

    ``operand`` and ``init_value`` are pytrees of one structure (``computation`` then takes and
    returns such trees); padding cells hold ``init_value``. Each output element folds, in
    window order, the operand elements its window covers. Max and min pooling (one operand,
    ``lax.max`` or ``lax.min`` from its identity) are primitives of their own, for JAX's
    derivative: a window's tangent is one element's.
    """
    flat, tree = pytree.tree_flatten(operand)
    inits, init_tree = pytree.tree_flatten(init_value)
    if tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: {tree} "
                         f"vs. {init_tree}")
    if not flat:
        raise ValueError("reduce_window must have at least one operand.")
    params = dict(zip(("window_dimensions", "window_strides", "padding", "base_dilation",
                       "window_dilation"),
                      _window_params(get_aval(flat[0]).shape, window_dimensions,
                                     window_strides, padding, base_dilation, window_dilation)))
    if len(flat) == 1:
        chooser = _CHOOSERS.get(reductions.monoid_of(computation, inits[0],
                                                     get_aval(flat[0]).dtype))
        if chooser is not None:
            return pytree.tree_unflatten(tree, [chooser.bind(flat[0], **params)])
    out_shape, windows = _windows(flat, inits, **params)
    acc = [broadcast_in_dim(v, out_shape, ()) for v in inits]
    for pieces in windows:
        combined = computation(pytree.tree_unflatten(tree, acc),
                               pytree.tree_unflatten(tree, pieces))
        acc = pytree.tree_leaves(combined)
    return pytree.tree_unflatten(tree, acc)


def _windows(operands, inits, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
    """(the result's shape, an iterator over the window positions, in window order, of the
    strided slices of ``operands`` padded with ``inits`` that they cover)."""
    shape = get_aval(operands[0]).shape
    out_shape = reduce_window_shape_tuple(shape, window_dimensions, window_strides, padding,
                                          base_dilation, window_dilation)
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)]
    padded = [pad(x, v, config) if any(map(any, config)) else x
              for x, v in zip(operands, inits)]

    def pieces():
        for offset in itertools.product(*(range(w) for w in window_dimensions)):
            starts = [k * d for k, d in zip(offset, window_dilation)]
            limits = [s + (o - 1) * st + 1 if o else s
                      for s, o, st in zip(starts, out_shape, window_strides)]
            yield [lax_slice(x, starts, limits, window_strides) for x in padded]
    return out_shape, pieces()


# --- max and min pooling, with JAX's derivative ---------------------------------------------
#
# Max pooling's tangent is not ``max``'s (which splits a tie between equal elements): as
# JAX's, it is the tangent of one element of each window, the one a fold choosing by ``ge``
# ends at: the first maximum in window order, padding cells included, a NaN being passed
# over by the next element (``le`` and the first minimum for min pooling). Two primitives
# say so in one equation each, as in JAX: ``select_and_gather_add`` (the tangent: gather
# each window's chosen tangent) and its transpose ``select_and_scatter_add`` (the
# cotangent: add each window's value to its chosen element). The compiler expands them into
# the pads, strided slices and selects below; a gradient's trace stays short.

_MONOID_OF_CHOICE = {elementwise.ge_p: "max", elementwise.le_p: "min"}


def _windows_undilated(params, ndim):
    """Window params: ``params`` (``select_and_scatter_add``'s have no dilations), with
    those they lack undilated."""
    return {"base_dilation": (1,) * ndim, "window_dilation": (1,) * ndim, **params}


def _gather_chosen(tangents, operand, *, select_prim, **window):
    """``select_and_gather_add`` in other primitives: per window, the tangent at the element
    the fold of the operand's elements by ``select_prim`` chooses."""
    zero = np.zeros((), get_aval(tangents).dtype)
    out_shape, windows = _windows([tangents], [zero], **window)
    windows = [t for t, in windows]
    if not windows:  # an empty window: the identity is chosen, whose tangent is 0
        return broadcast_in_dim(zero, out_shape, ())
    return elementwise.select_n(_choice(operand, select_prim, window), *windows)


def _choice(operand, select_prim, window):
    """Per window (of a non-empty window shape), the position in window order of the
    element the fold of the operand's elements by ``select_prim`` ends at, an int32."""
    init = reductions.monoid_identity(_MONOID_OF_CHOICE[select_prim], get_aval(operand).dtype)
    out_shape, windows = _windows([operand], [init], **window)
    (best,), *rest = windows
    chosen = broadcast_in_dim(np.int32(0), out_shape, ())
    for k, (piece,) in enumerate(rest, start=1):
        take = elementwise.bitwise_not(select_prim.bind(best, piece))
        best = elementwise.select(take, piece, best)
        chosen = elementwise.select(take, broadcast_in_dim(np.int32(k), out_shape, ()), chosen)
    return chosen


def _scatter_chosen(source, operand, **params):
    """``select_and_scatter_add`` in other primitives: the transpose of
    ``_gather_chosen`` in its tangents (the choice made again from ``operand``), or where
    the windows tile the operand, ``_scatter_to_tiles``."""
    aval = get_aval(operand)
    params = _windows_undilated(params, aval.ndim)
    if _windows_tile(aval.shape, **params):
        return _scatter_to_tiles(source, operand, **params)
    gather = trace_to_closed_jaxpr(lambda t, x: [_gather_chosen(t, x, **params)],
                                   [get_aval(source).update(shape=aval.shape), aval],
                                   "transpose of select_and_gather_add")
    ct, _ = backward_pass(gather.jaxpr, list(gather.consts) + [operand], [source],
                          linear=[True, False])
    return ad.instantiate(ct)


def _windows_tile(shape, *, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation, **_):
    """Whether the windows cover ``shape`` exactly once each, side by side (2x2 pooling
    with stride 2): every element is in one window."""
    return all(0 < w == s and n % w == 0 and lo == hi == 0
               for n, w, s, (lo, hi) in zip(shape, window_dimensions, window_strides, padding)) \
        and all(d == 1 for d in (*base_dilation, *window_dilation)) and 0 not in shape


def _scatter_to_tiles(source, operand, *, select_prim, window_dimensions, **window):
    """``select_and_scatter_add`` for windows that tile the operand: each element gets its
    window's value where the window chose it, else 0 (plus 0, which turns a chosen -0.0
    into 0.0, as adding into zeros does). The operand is seen with each axis a window
    spans split in two (which window, where in it). The transpose of the gather, a pad for
    each position in the window, each computing the choice again, made a CNN's pooling
    gradient a kernel of 22 loads an element and 45 ms of LLVM's time."""
    split, windows_at, positions = [], [], []
    for n, w in zip(get_aval(operand).shape, window_dimensions):
        windows_at.append(len(split))
        split += [n // w, w] if w > 1 else [n]
        if w > 1:
            positions.append((len(split) - 1, w))
    split, windows_at = tuple(split), tuple(windows_at)
    position = broadcast_in_dim(np.int32(0), split, ())
    for axis, w in positions:  # (window order: the last axis' position varies fastest)
        position = add(elementwise.mul(position, broadcast_in_dim(np.int32(w), split, ())),
                       broadcasted_iota(np.int32, split, axis))
    chosen = _choice(operand, select_prim, {"window_dimensions": window_dimensions, **window})
    zero = np.zeros((), get_aval(source).dtype)
    values = elementwise.select(
        elementwise.eq(broadcast_in_dim(chosen, split, windows_at), position),
        broadcast_in_dim(source, split, windows_at), broadcast_in_dim(zero, split, ()))
    return reshape(add(values, broadcast_in_dim(zero, split, ())), get_aval(operand).shape)


def _window_batch(prim):
    """The batch rule of a windowed primitive: the batch axis in front, under a window of 1."""
    def rule(axis_data, vals, dims, **params):
        once = {"window_dimensions": 1, "window_strides": 1, "padding": (0, 0),
                "base_dilation": 1, "window_dilation": 1}
        params = {k: (once[k],) + v if k in once else v for k, v in params.items()}
        return prim.bind(*(bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)),
                         **params), 0
    return rule


def _selecting_primitive(name, decomposition, shape_rule):
    """A primitive linear in its first operand whose second only chooses where each value
    goes (its tangent is zero): evaluated and compiled as ``decomposition``."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract_eval(values, operand, **params):
        return values.update(shape=shape_rule(values.shape, operand.shape, params))

    prim.def_impl(lambda *args, **params: owned_results(
        [to_numpy(decomposition(*args, **params))])[0])
    prim.def_lowering("jaxpr", decomposition)

    @prim.def_jvp
    def _jvp(primals, tangents, **params):
        (values, operand), (t, _) = primals, tangents
        out = prim.bind(values, operand, **params)
        if isinstance(t, ad.Zero):
            return out, ad.Zero.like(out)
        return out, prim.bind(t, operand, **params)

    prim.def_batch(_window_batch(prim))
    return prim


def _gathered_shape(values, operand, params):
    if values != operand:
        raise TypeError("select_and_gather_add: tangents and operand must have one shape, "
                        f"got {values} and {operand}")
    return reduce_window_shape_tuple(operand, params["window_dimensions"],
                                     params["window_strides"], params["padding"],
                                     params["base_dilation"], params["window_dilation"])


def _scattered_shape(values, operand, params):
    want = reduce_window_shape_tuple(operand, params["window_dimensions"],
                                     params["window_strides"], params["padding"])
    if values != want:
        raise TypeError(f"select_and_scatter_add: source of shape {values} for windows "
                        f"of an operand of shape {operand}, which has {want}")
    return operand


select_and_gather_add_p = _selecting_primitive("select_and_gather_add", _gather_chosen,
                                               _gathered_shape)
select_and_scatter_add_p = _selecting_primitive("select_and_scatter_add", _scatter_chosen,
                                                _scattered_shape)


@select_and_gather_add_p.def_transpose
def _gather_transpose(ct, tangents, operand, *, select_prim, base_dilation, window_dilation,
                      **window):
    """The cotangent scattered back to the chosen elements, as JAX's: a base dilation is
    the operand padded between its elements, then the result's elements strided out. (A
    window dilation, which JAX does not differentiate, transposes the decomposition.)"""
    if any(d != 1 for d in window_dilation):
        return [_scatter_chosen(ct, operand, select_prim=select_prim,
                                base_dilation=base_dilation, window_dilation=window_dilation,
                                **window), None]
    dilated = any(d != 1 for d in base_dilation)
    if dilated:
        identity = reductions.monoid_identity(_MONOID_OF_CHOICE[select_prim],
                                              get_aval(operand).dtype)
        operand = pad(operand, identity, [(0, 0, d - 1) for d in base_dilation])
    out = select_and_scatter_add_p.bind(ct, operand, select_prim=select_prim, **window)
    if dilated:
        out = lax_slice(out, (0,) * len(base_dilation), get_aval(out).shape, base_dilation)
    return [out, None]


@select_and_scatter_add_p.def_transpose
def _scatter_transpose(ct, source, operand, **params):
    return [select_and_gather_add_p.bind(
        ct, operand, **_windows_undilated(params, get_aval(operand).ndim)), None]


def _chooser(name, monoid, combine, select_prim):
    """The primitive of ``reduce_window`` with ``combine`` (``lax.max``) from its identity.

    Its value folds the windows as ``reduce_window`` does (a decomposition into pads, slices
    and ``combine``, which the compiler inlines); its tangent is ``select_and_gather_add``'s
    choosing by ``select_prim`` (``ge``).
    """
    prim = Primitive(name)

    def fold(x, **params):
        init = reductions.monoid_identity(monoid, get_aval(x).dtype)
        out_shape, windows = _windows([x], [init], **params)
        acc = broadcast_in_dim(init, out_shape, ())
        for piece, in windows:
            acc = combine(acc, piece)
        return acc

    @prim.def_abstract_eval
    def _abstract_eval(x, **params):
        return x.update(shape=reduce_window_shape_tuple(
            x.shape, params["window_dimensions"], params["window_strides"], params["padding"],
            params["base_dilation"], params["window_dilation"]))

    prim.def_impl(lambda x, **params: owned_results([to_numpy(fold(x, **params))])[0])
    prim.def_lowering("jaxpr", fold)

    @prim.def_jvp
    def _jvp(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        if isinstance(t, ad.Zero):
            return out, ad.Zero.like(out)
        return out, select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)

    prim.def_batch(_window_batch(prim))
    return prim


reduce_window_max_p = _chooser("reduce_window_max", "max", elementwise.max, elementwise.ge_p)
reduce_window_min_p = _chooser("reduce_window_min", "min", elementwise.min, elementwise.le_p)
_CHOOSERS = {"max": reduce_window_max_p, "min": reduce_window_min_p}


# --- associative_scan ------------------------------------------------------------------------

def _interleave(a, b, axis):
    """``a[0], b[0], a[1], b[1], ...`` along ``axis`` (``a`` has as many elements as ``b`` or
    one more): each is padded with zeros between its elements, and the two are added."""
    n = get_aval(a).ndim
    same = get_aval(a).shape[axis] == get_aval(b).shape[axis]
    a_config = [(0, 0, 0)] * n
    b_config = [(0, 0, 0)] * n
    a_config[axis] = (0, 1 if same else 0, 1)
    b_config[axis] = (1, 0 if same else 1, 1)
    dt = get_aval(a).dtype
    combine = bitwise_or if dt == np.bool_ else add
    zero = np.zeros((), dt)
    return combine(pad(a, zero, a_config), pad(b, zero, b_config))


def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations ``fn(...fn(fn(e0, e1), e2)..., ek)`` of the slices of
    ``elems`` (a pytree of arrays) along ``axis``, for an associative ``fn`` applied to whole
    strided slices at once: O(log n) rounds of combining pairs, as JAX computes it."""
    flat, tree = pytree.tree_flatten(elems)
    if not flat:
        raise ValueError("associative_scan needs at least one array")
    ndim = get_aval(flat[0]).ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    axis %= ndim
    length = get_aval(flat[0]).shape[axis]
    if any(get_aval(x).shape[axis] != length for x in flat[1:]):
        raise ValueError("Array inputs to associative_scan must have the same first "
                         f"dimension. (saw: {[get_aval(x).shape for x in flat]})")
    if reverse:
        flat = [rev(x, (axis,)) for x in flat]

    def combine(a, b):
        out = fn(pytree.tree_unflatten(tree, a), pytree.tree_unflatten(tree, b))
        out_flat, out_tree = pytree.tree_flatten(out)
        if out_tree != tree:
            raise ValueError(f"associative_scan: fn must return the structure of elems, "
                             f"{tree}, got {out_tree}")
        return out_flat

    def scan(xs):
        n = get_aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        reduced = combine([slice_in_dim(x, 0, n - 1, 2, axis) for x in xs],
                          [slice_in_dim(x, 1, n, 2, axis) for x in xs])
        odd = scan(reduced)
        if n % 2 == 0:
            m = get_aval(odd[0]).shape[axis]
            even = combine([slice_in_dim(x, 0, m - 1, 1, axis) for x in odd],
                           [slice_in_dim(x, 2, n, 2, axis) for x in xs])
        else:
            even = combine(odd, [slice_in_dim(x, 2, n, 2, axis) for x in xs])
        even = [concatenate([slice_in_dim(x, 0, 1, 1, axis), e], axis)
                for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = scan(flat)
    if reverse:
        out = [rev(x, (axis,)) for x in out]
    return pytree.tree_unflatten(tree, out)


# --- convolution shapes ------------------------------------------------------------------------

def conv_general_permutations(dimension_numbers):
    """The (lhs, rhs, out) axis permutations of three layout strings, relative to
    NCHW/OIHW/NCHW."""
    lhs, rhs, out = dimension_numbers
    return tuple(conv_dimension_numbers((0,) * len(lhs), (0,) * len(rhs), (lhs, rhs, out)))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The output shape of a convolution of shapes in canonical (NCHW/OIHW) order."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={pads} for lhs_shape[2:]={lhs_shape[2:]}")
    space = tuple(map(_stride_dim, padded, rhs_shape[2:], strides))
    batch = lhs_shape[0] // batch_group_count if batch_group_count > 1 else lhs_shape[0]
    return (int(batch), int(rhs_shape[0])) + tuple(int(s) for s in space)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_general_dilated`` with layout strings."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm),
                           window_strides, padding)
    return tuple(int(d) for d in np.take(out, np.argsort(out_perm)))


def _conv_transpose_padding(k, s, padding):
    """(before, after) padding of a transposed convolution along one axis, for the padding
    of the forward convolution it transposes (JAX's convention)."""
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        pad_a, pad_len = pads[0], sum(pads)
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return pad_a, pad_len - pad_a


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """The output shape of ``conv_transpose`` with layout strings."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(int(k), s, padding)
                   for k, s in zip(rhs_t[2:], window_strides)]
    totals = [sum(p) for p in padding]
    space = [(i - 1) * s - k + 2 + p
             for i, k, s, p in zip(lhs_t[2:], rhs_t[2:], window_strides, totals)]
    out = (lhs_t[0], rhs_t[0]) + tuple(space)
    return tuple(int(d) for d in np.take(out, np.argsort(out_perm)))


# --- convolutions built on conv_general_dilated ---------------------------------------------

_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """The fractionally strided convolution: ``lhs`` dilated by ``strides`` and convolved with
    ``rhs``. "SAME"/"VALID" (or, with ``use_consistent_padding``, pairs) name the padding of
    the forward convolution being transposed; otherwise pairs pad the dilated input.
    ``transpose_kernel`` flips the kernel's spatial axes and swaps its feature axes, giving
    exactly the gradient of the forward convolution (Keras' Conv2DTranspose)."""
    lhs_shape, rhs_shape = get_aval(lhs).shape, get_aval(rhs).shape
    ndim = len(lhs_shape)
    if ndim != len(rhs_shape) or ndim < 2:
        raise TypeError(f"conv_transpose needs lhs and rhs of one rank of at least 2, got "
                        f"shapes {lhs_shape} and {rhs_shape}")
    if dimension_numbers is None:
        if ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_LAYOUTS[ndim]
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    kernel = [rhs_shape[d] for d in dn.rhs_spec[2:]]
    if rhs_dilation is None:
        rhs_dilation = (1,) * (ndim - 2)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        effective = _dilate_shape(kernel, rhs_dilation)
        per_axis = [padding] * len(strides) if isinstance(padding, str) else [
            tuple(p) for p in padding]
        pads = tuple(_conv_transpose_padding(k, s, p)
                     for k, s, p in zip(effective, strides, per_axis))
    else:
        pads = padding
    if transpose_kernel:
        rhs = rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * (ndim - 2), pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with this receptive field sees, flattened into the output's
    feature axis (channel-major, then the filter's spatial axes): a grouped convolution with
    an identity kernel, as JAX computes it."""
    lhs_aval = get_aval(lhs)
    filter_shape = tuple(operator.index(d) for d in filter_shape)
    dn = conv_dimension_numbers(lhs_aval.shape, (1, 1) + filter_shape, dimension_numbers)
    spatial = math.prod(filter_shape)
    channels = lhs_aval.shape[dn.lhs_spec[1]]
    eye = np.eye(spatial, dtype=lhs_aval.dtype)
    kernel = np.broadcast_to(eye, (channels, spatial, spatial)).reshape(
        (channels * spatial, 1) + filter_shape)
    kernel = np.moveaxis(kernel, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    return conv_general_dilated(lhs, kernel, window_strides, padding, lhs_dilation,
                                rhs_dilation, dn, feature_group_count=channels,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """An unshared (locally connected) convolution: a separate kernel at every output
    position. ``rhs``'s spatial axes index output positions and its "I" axis the flattened
    patch (as ``conv_general_dilated_patches`` lays it out)."""
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers)
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(
        get_aval(lhs).shape, (1, 1) + tuple(filter_shape), dimension_numbers)
    lhs_b = out_spec[2:]
    rhs_b = [rhs_spec[2:][i] for i in sorted(range(len(lhs_b)), key=lambda k: lhs_b[k])]
    dn = (((out_spec[1],), (rhs_spec[1],)), (tuple(sorted(lhs_b)), tuple(rhs_b)))
    out = dot_general(patches, rhs, dn, precision=precision)
    ndim = get_aval(out).ndim
    # moveaxis(out, (-2, -1), (out_spec[0], out_spec[1]))
    rest = [d for d in range(ndim) if d not in (ndim - 2, ndim - 1)]
    order = [None] * ndim
    order[out_spec[0]], order[out_spec[1]] = ndim - 2, ndim - 1
    it = iter(rest)
    order = [next(it) if o is None else o for o in order]
    return transpose(out, tuple(order))


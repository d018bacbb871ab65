"""Products of arrays: dot, matmul, tensordot, einsum, outer, kron, cross ...

Every contraction is one ``lax.dot_general``: it contracts chosen axis pairs and matches
*batch* axis pairs, and returns the batch axes, then the other axes of the left operand, then
those of the right. Each NumPy function below only decides which axes play which role (and
sometimes transposes the result into NumPy's order). Operands are promoted to a common dtype
first, and the product keeps that dtype (``int8 @ int8`` is ``int8``; bools give bools).
"""

import itertools
import operator
import string

import numpy as np

from .. import lax
from ..core import dtypes, get_aval
from ..sharding import refuse_out_sharding
from .manipulation import (broadcast_arrays, broadcast_shapes, diagonal, moveaxis, ravel,
                           reshape, stack, transpose)
from .ufuncs import conj, multiply, subtract
from .util import (canonicalize_axis, check_arraylike, promote_dtypes,
                   promote_dtypes_inexact)

__all__ = ["dot", "vdot", "matmul", "inner", "outer", "kron", "tensordot", "einsum", "cross",
           "vecdot", "matvec", "vecmat", "convolve", "correlate", "einsum_path"]


def _shape(x):
    return get_aval(x).shape


def _promoted(name, *args):
    check_arraylike(name, *args)
    return promote_dtypes(*args)


def _dot_general(lhs, rhs, contract, batch=((), ()), precision=None,
                 preferred_element_type=None):
    """``lax.dot_general`` with NumPy-style arguments; the result dtype defaults to the
    operands' (already promoted) dtype, as JAX passes it."""
    dtype = get_aval(lhs).dtype if preferred_element_type is None else \
        dtypes.canonicalize(preferred_element_type)
    return lax.dot_general(lhs, rhs, (contract, batch), precision=precision,
                           preferred_element_type=dtype)


def _multiply(a, b):
    return multiply(a, b)


def _check_contraction(name, a, b, a_axes, b_axes):
    a_sizes = tuple(_shape(a)[i] for i in a_axes)
    b_sizes = tuple(_shape(b)[i] for i in b_axes)
    if a_sizes != b_sizes:
        raise TypeError(f"{name}: incompatible shapes {_shape(a)} and {_shape(b)}: the "
                        f"contracted axes have sizes {a_sizes} and {b_sizes}.")


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """NumPy's ``dot``: a product with a scalar, or the last axis of ``a`` contracted with the
    only axis of a 1-D ``b`` or the second-to-last axis of ``b``."""
    if out_sharding is not None:
        refuse_out_sharding("jnp.dot", out_sharding)
    a, b = _promoted("dot", a, b)
    if not _shape(a) or not _shape(b):
        out = _multiply(a, b)
        return out if preferred_element_type is None else \
            lax.convert_element_type(out, preferred_element_type)
    a_axis, b_axis = len(_shape(a)) - 1, max(len(_shape(b)) - 2, 0)
    _check_contraction("dot", a, b, (a_axis,), (b_axis,))
    return _dot_general(a, b, ((a_axis,), (b_axis,)), precision=precision,
                        preferred_element_type=preferred_element_type)


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """The dot product of ``a`` and ``b`` flattened, ``a`` conjugated."""
    a, b = _promoted("vdot", a, b)
    if dtypes.is_complex(get_aval(a).dtype):
        a = conj(a)
    return dot(ravel(a), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Matrix product over the last two axes, the leading (batch) axes broadcast.

    A 1-D operand is a row (left) or column (right) vector whose axis is removed afterwards.
    Batch axes of size 1 are not materialised: such an axis is simply a free axis of the
    other operand, so ``dot_general`` needs batch pairs only where both sizes match.
    """
    if out_sharding is not None:
        refuse_out_sharding("jnp.matmul", out_sharding)
    a, b = _promoted("matmul", a, b)
    if _plain_product(_shape(a), _shape(b)):
        return _dot_general(a, b, ((len(_shape(a)) - 1,), (0,)), precision=precision,
                            preferred_element_type=preferred_element_type)
    for i, x in enumerate((a, b)):
        if not _shape(x):
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has "
                             "ndim 0")
    a_vector, b_vector = len(_shape(a)) == 1, len(_shape(b)) == 1
    a_rows = () if a_vector else _shape(a)[-2:-1]
    b_cols = () if b_vector else _shape(b)[-1:]
    if _shape(a)[-1] != _shape(b)[0 if b_vector else -2]:
        raise TypeError(f"matmul: incompatible shapes {_shape(a)} and {_shape(b)}: the last "
                        f"axis of the first ({_shape(a)[-1]}) must match the "
                        f"{'only' if b_vector else 'second-to-last'} axis of the second "
                        f"({_shape(b)[0 if b_vector else -2]}).")
    a_batch = _shape(a)[:-2] if not a_vector else ()
    b_batch = _shape(b)[:-2] if not b_vector else ()
    try:
        out_batch = broadcast_shapes(a_batch, b_batch)
    except ValueError:
        raise TypeError(f"matmul: incompatible shapes {_shape(a)} and {_shape(b)}: batch "
                        f"dimensions {a_batch} and {b_batch} do not broadcast.") from None
    # Label each batch position: in both operands, in one only, or size 1 in both.
    nb = len(out_batch)
    a_sizes = (1,) * (nb - len(a_batch)) + tuple(a_batch)
    b_sizes = (1,) * (nb - len(b_batch)) + tuple(b_batch)
    shared = [i for i in range(nb) if a_sizes[i] != 1 and b_sizes[i] != 1]
    a_only = [i for i in range(nb) if a_sizes[i] != 1 and b_sizes[i] == 1]
    b_only = [i for i in range(nb) if a_sizes[i] == 1 and b_sizes[i] != 1]
    a_core = _shape(a)[-1:] if a_vector else _shape(a)[-2:]
    b_core = _shape(b)[-1:] if b_vector else _shape(b)[-2:]
    a = reshape(a, tuple(a_sizes[i] for i in sorted(shared + a_only)) + a_core)
    b = reshape(b, tuple(b_sizes[i] for i in sorted(shared + b_only)) + b_core)
    a_pos = {d: k for k, d in enumerate(sorted(shared + a_only))}
    b_pos = {d: k for k, d in enumerate(sorted(shared + b_only))}
    a_contract = len(_shape(a)) - 1
    b_contract = len(_shape(b)) - (1 if b_vector else 2)
    out = _dot_general(a, b, ((a_contract,), (b_contract,)),
                       (tuple(a_pos[d] for d in shared), tuple(b_pos[d] for d in shared)),
                       precision, preferred_element_type)
    # dot_general gives [shared, a_only, rows, b_only, cols]; NumPy wants batch order first.
    labels = ([("batch", d) for d in shared] + [("batch", d) for d in a_only]
              + [("rows",)] * len(a_rows) + [("batch", d) for d in b_only]
              + [("cols",)] * len(b_cols))
    wanted = sorted(range(len(labels)),
                    key=lambda k: (labels[k][0] != "batch", labels[k][0] == "cols",
                                   labels[k][1] if labels[k][0] == "batch" else 0))
    out = transpose(out, wanted)
    return reshape(out, tuple(out_batch) + a_rows + b_cols)


def _plain_product(a_shape, b_shape):
    """Whether ``matmul`` of operands of these shapes is one ``dot_general`` of ``a``'s last
    axis with ``b``'s first, as it is for a matrix (or a stack of them, of no size-1 batch
    axis: ``matmul`` drops those) times a matrix of matching size: the common case, which
    then skips the batch bookkeeping (the same jaxpr, at a fraction of the tracing time)."""
    return len(b_shape) == 2 and len(a_shape) >= 2 and a_shape[-1] == b_shape[0] and \
        1 not in a_shape[:-2]


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """The dot product of vectors along ``axis`` (``x1`` conjugated), other axes broadcast."""
    x1, x2 = _promoted("vecdot", x1, x2)
    ax1 = canonicalize_axis(axis, len(_shape(x1)))
    ax2 = canonicalize_axis(axis, len(_shape(x2)))
    if _shape(x1)[ax1] != _shape(x2)[ax2]:
        raise ValueError(f"vecdot: axis {axis} has sizes {_shape(x1)[ax1]} and "
                         f"{_shape(x2)[ax2]}, which must be equal.")
    if dtypes.is_complex(get_aval(x1).dtype):
        x1 = conj(x1)
    rows = lax.expand_dims(moveaxis(x1, ax1, -1), (len(_shape(x1)) - 1,))
    cols = lax.expand_dims(moveaxis(x2, ax2, -1), (len(_shape(x2)),))
    out = matmul(rows, cols, precision=precision, preferred_element_type=preferred_element_type)
    return lax.squeeze(out, (len(_shape(out)) - 2, len(_shape(out)) - 1))


def inner(a, b, *, precision=None, preferred_element_type=None):
    """The last axes of ``a`` and ``b`` contracted (a product with a scalar)."""
    a, b = _promoted("inner", a, b)
    if not _shape(a) or not _shape(b):
        return dot(a, b, preferred_element_type=preferred_element_type)
    axes = (len(_shape(a)) - 1,), (len(_shape(b)) - 1,)
    _check_contraction("inner", a, b, *axes)
    return _dot_general(a, b, axes, precision=precision,
                        preferred_element_type=preferred_element_type)


def outer(a, b, out=None):
    """Every product ``a[i] * b[j]`` of the flattened arrays."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.outer is not supported.")
    a, b = _promoted("outer", a, b)
    return _multiply(reshape(a, (-1, 1)), ravel(b))


def kron(a, b):
    """The Kronecker product: each element of ``a`` times the whole of ``b``, tiled.

    With axes interleaved, ``a`` as ``(a0, 1, a1, 1)`` times ``b`` as ``(1, b0, 1, b1)``,
    then each pair of axes merged.
    """
    a, b = _promoted("kron", a, b)
    ndim = max(len(_shape(a)), len(_shape(b)))
    a_shape = (1,) * (ndim - len(_shape(a))) + _shape(a)
    b_shape = (1,) * (ndim - len(_shape(b))) + _shape(b)
    a = reshape(a, tuple(d for n in a_shape for d in (n, 1)))
    b = reshape(b, tuple(d for n in b_shape for d in (1, n)))
    return reshape(_multiply(a, b), tuple(m * n for m, n in zip(a_shape, b_shape)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None,
              out_sharding=None):
    """``a`` and ``b`` contracted over axis lists (or the last/first ``axes`` axes)."""
    if out_sharding is not None:
        refuse_out_sharding("jnp.tensordot", out_sharding)
    a, b = _promoted("tensordot", a, b)
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        if n < 0 or n > min(len(_shape(a)), len(_shape(b))):
            raise TypeError(f"Number of tensordot axes (axes {n}) exceeds input ranks "
                            f"({_shape(a)} and {_shape(b)})")
        a_axes = tuple(range(len(_shape(a)) - n, len(_shape(a))))
        b_axes = tuple(range(n))
    else:
        try:
            a_axes, b_axes = axes
        except (TypeError, ValueError):
            raise TypeError("tensordot axes argument must be an int or a pair of axis "
                            f"lists, got {axes!r}") from None
        a_axes = tuple(canonicalize_axis(i, len(_shape(a))) for i in _as_tuple(a_axes))
        b_axes = tuple(canonicalize_axis(i, len(_shape(b))) for i in _as_tuple(b_axes))
        if len(a_axes) != len(b_axes):
            raise TypeError(f"tensordot requires axes lists to have equal length, got "
                            f"{a_axes} and {b_axes}.")
    _check_contraction("tensordot", a, b, a_axes, b_axes)
    return _dot_general(a, b, (a_axes, b_axes), precision=precision,
                        preferred_element_type=preferred_element_type)


def _as_tuple(x):
    return (x,) if isinstance(x, (int, np.integer)) else tuple(x)


# --- cross ---------------------------------------------------------------------------------

def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-vectors along the given axes (others broadcast).

    Two 2-vectors give the scalar z-component; otherwise a 2-vector counts as ``z = 0``.
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _promoted("cross", a, b)
    a = moveaxis(a, canonicalize_axis(axisa, len(_shape(a))), -1)
    b = moveaxis(b, canonicalize_axis(axisb, len(_shape(b))), -1)
    if _shape(a)[-1] not in (2, 3) or _shape(b)[-1] not in (2, 3):
        raise ValueError("Dimension must be either 2 or 3 for cross product")
    a_parts = [a[..., i] for i in range(_shape(a)[-1])]
    b_parts = [b[..., i] for i in range(_shape(b)[-1])]
    if len(a_parts) == len(b_parts) == 2:
        return subtract(_multiply(a_parts[0], b_parts[1]), _multiply(a_parts[1], b_parts[0]))
    zero = lax.full((), 0, get_aval(a).dtype)
    a0, a1, a2 = a_parts + [zero] * (3 - len(a_parts))
    b0, b1, b2 = b_parts + [zero] * (3 - len(b_parts))
    parts = [subtract(_multiply(a1, b2), _multiply(a2, b1)),
             subtract(_multiply(a2, b0), _multiply(a0, b2)),
             subtract(_multiply(a0, b1), _multiply(a1, b0))]
    out = stack(broadcast_arrays(*parts), axis=-1)
    return moveaxis(out, -1, canonicalize_axis(axisc, len(_shape(out))))


# --- einsum --------------------------------------------------------------------------------

def einsum(subscripts, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, out_sharding=None):
    """Einstein summation: ``einsum('ij,jk->ik', a, b)`` is ``a @ b``.

    Subscripts may use ``...`` for broadcast axes and omit ``->`` (the output is then the
    labels used once, sorted, after the ``...`` axes). Labels repeated within one operand
    take its diagonal; labels found in one operand only and not in the output are summed;
    the operands are then contracted two at a time with ``dot_general``, each time choosing
    the pair whose result is smallest (greedy; ``optimize`` is accepted and ignored).
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    if out_sharding is not None:
        refuse_out_sharding("jnp.einsum", out_sharding)
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved_to_subscripts(subscripts, *operands)
    arrays = _promoted("einsum", *operands)
    if preferred_element_type is not None:  # accumulate in that type from the start
        arrays = [lax.convert_element_type(x, preferred_element_type) for x in arrays]
    inputs, output = _parse_subscripts(subscripts, [len(_shape(x)) for x in arrays])
    sizes = _label_sizes(inputs, arrays)
    terms = [_prepare_operand(x, labels, sizes) for x, labels in zip(arrays, inputs)]
    terms = [_sum_private_labels(x, labels, output, terms, k) for k, (x, labels) in
             enumerate(terms)]
    while len(terms) > 1:
        i, j = _cheapest_pair(terms, output, sizes)
        rest = [t for k, t in enumerate(terms) if k not in (i, j)]
        terms = rest + [_contract(terms[i], terms[j], output, rest, precision)]
    x, labels = _sum_private_labels(*terms[0], output, [], None)
    x = transpose(x, [labels.index(c) for c in output if c in labels])
    present = "".join(c for c in output if c in labels)
    return _broadcast_missing(x, present, output, sizes)


def _interleaved_to_subscripts(*args):
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as a subscripts string and operands."""
    output = args[-1] if len(args) % 2 else None
    pairs = args[:-1] if len(args) % 2 else args
    operands, sublists = pairs[0::2], pairs[1::2]

    def letters(sub):
        return "".join("..." if s is Ellipsis else string.ascii_letters[operator.index(s)]
                       for s in sub)
    spec = ",".join(map(letters, sublists))
    if output is not None:
        spec += "->" + letters(output)
    return spec, operands


def _parse_subscripts(subscripts, ndims):
    """Input label strings (``...`` expanded to unused letters) and the output labels."""
    subscripts = subscripts.replace(" ", "")
    inputs_spec, arrow, output = subscripts.partition("->")
    inputs = inputs_spec.split(",")
    if len(inputs) != len(ndims):  # (the errors are worded as JAX's, from opt_einsum)
        raise ValueError(f"Number of einsum subscripts, {len(inputs)}, must be equal to the "
                         f"number of operands, {len(ndims)}.")
    used = set(subscripts) - set(".,->")
    for c in used:
        if c not in string.ascii_letters:
            raise ValueError(f"einsum: invalid subscript character {c!r}")
    spare = [c for c in string.ascii_letters if c not in used]
    n_ellipsis = max((nd - len(s.replace("...", "")) for s, nd in zip(inputs, ndims)
                      if "..." in s), default=0)
    ellipsis_labels = "".join(spare[:n_ellipsis])
    expanded = []
    for i, (spec, nd) in enumerate(zip(inputs, ndims)):
        if "..." in spec:
            k = nd - len(spec.replace("...", ""))
            spec = spec.replace("...", ellipsis_labels[n_ellipsis - k:] if k else "")
        if len(spec) != nd:
            raise ValueError(f"Einstein sum subscript {inputs[i]!r} does not contain the "
                             f"correct number of indices for operand {i}.")
        expanded.append(spec)
    if arrow:
        output = output.replace("...", ellipsis_labels)
        for c in output:
            if output.count(c) > 1:
                raise ValueError(f"Output character {c!r} appeared more than once in the "
                                 "output.")
            if not any(c in s for s in expanded):
                raise ValueError(f"Output character {c!r} did not appear in the input")
    else:
        counts = {c: sum(s.count(c) for s in expanded) for c in set("".join(expanded))}
        output = ellipsis_labels + "".join(sorted(c for c, n in counts.items()
                                                  if n == 1 and c not in ellipsis_labels))
    return expanded, output


def _label_sizes(inputs, arrays):
    """Each label's size; size-1 axes broadcast against others (ValueError otherwise)."""
    sizes = {}
    for k, (labels, x) in enumerate(zip(inputs, arrays)):
        for c, n in zip(labels, _shape(x)):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
            elif n not in (1, sizes[c]):
                raise ValueError(f"Size of label {c!r} for operand {k} ({sizes[c]}) does not "
                                 f"match previous terms ({n}).")
    return sizes


def _prepare_operand(x, labels, sizes):
    """Take diagonals of repeated labels, drop size-1 axes that broadcast (they are
    constant along that label)."""
    while True:
        repeated = next((c for c in labels if labels.count(c) > 1), None)
        if repeated is None:
            break
        i = labels.index(repeated)
        j = labels.index(repeated, i + 1)
        x = diagonal(x, 0, i, j)  # the diagonal becomes the last axis
        labels = "".join(c for k, c in enumerate(labels) if k not in (i, j)) + repeated
    drop = [k for k, c in enumerate(labels) if _shape(x)[k] == 1 and sizes[c] != 1]
    if drop:
        x = lax.squeeze(x, drop)
        labels = "".join(c for k, c in enumerate(labels) if k not in drop)
    return x, labels


def _sum_private_labels(x, labels, output, terms, own_index):
    """Sum out the labels no other operand and not the output needs."""
    others = "".join(t[1] for k, t in enumerate(terms) if k != own_index) + output
    private = [k for k, c in enumerate(labels) if c not in others]
    if not private:
        return x, labels
    # Booleans are summed as JAX sums them, with or.
    reduce = lax.reduce_or if dtypes.is_bool(get_aval(x).dtype) else lax.reduce_sum
    return reduce(x, tuple(private)), "".join(c for k, c in enumerate(labels)
                                              if k not in private)


def _pair_result_labels(a_labels, b_labels, output, rest):
    needed = set(output).union(*(set(t[1]) for t in rest))
    batch = [c for c in a_labels if c in b_labels and c in needed]
    contract = [c for c in a_labels if c in b_labels and c not in needed]
    free_a = [c for c in a_labels if c not in b_labels]
    free_b = [c for c in b_labels if c not in a_labels]
    return batch, contract, free_a, free_b


def _cheapest_pair(terms, output, sizes):
    """The pair of operands whose contraction has the fewest elements (first on ties)."""
    def cost(pair):
        i, j = pair
        rest = [t for k, t in enumerate(terms) if k not in pair]
        batch, _, free_a, free_b = _pair_result_labels(terms[i][1], terms[j][1], output, rest)
        return int(np.prod([sizes[c] for c in batch + free_a + free_b]))
    return min(itertools.combinations(range(len(terms)), 2), key=cost)


def _contract(a_term, b_term, output, rest, precision):
    (a, a_labels), (b, b_labels) = a_term, b_term
    batch, contract, free_a, free_b = _pair_result_labels(a_labels, b_labels, output, rest)
    out = _dot_general(a, b, (tuple(a_labels.index(c) for c in contract),
                              tuple(b_labels.index(c) for c in contract)),
                       (tuple(a_labels.index(c) for c in batch),
                        tuple(b_labels.index(c) for c in batch)),
                       precision=precision)
    return out, "".join(batch + free_a + free_b)


def _broadcast_missing(x, present, output, sizes):
    """Output labels dropped as broadcast size-1 axes come back (size 1, or broadcast)."""
    if present == output:
        return x
    shape = tuple(sizes[c] for c in output)
    return lax.broadcast_in_dim(x, shape, tuple(output.index(c) for c in present))


def _check_core_dims(signature, *operands):
    """JAX's error (its ``matvec`` and ``vecmat`` are ``vectorize``d with ``signature``) for
    an operand with fewer axes than its core dimensions (``operands``: (x, dims) pairs)."""
    for x, dims in operands:
        shape = _shape(x)
        if len(shape) < len(dims):
            raise ValueError(f"input with shape {shape} does not have enough dimensions for "
                             f"all core dimensions {dims} on vectorized function with "
                             f"excluded=frozenset() and signature='{signature}'")


def matvec(x1, x2, /):
    """Matrix times vector over the last axes, other axes broadcast: ``x1 @ x2[..., None]``."""
    _check_core_dims("(n,m),(m)->(n)", (x1, ("n", "m")), (x2, ("m",)))
    return matmul(x1, x2[..., None])[..., 0]


def vecmat(x1, x2, /):
    """Vector (conjugated) times matrix over the last axes: ``conj(x1)[..., None, :] @ x2``."""
    _check_core_dims("(n),(n,m)->(m)", (x1, ("n",)), (x2, ("n", "m")))
    return matmul(conj(x1)[..., None, :], x2)[..., 0, :]


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """``(path, report)``: the order in which to contract ``operands`` pairwise, as a list of
    position tuples (opt_einsum's form, which JAX returns), and NumPy's description of it.
    Only the operands' shapes matter, so NumPy plans it on stand-ins of those shapes."""
    strategy = {"auto": "greedy", True: "greedy"}.get(optimize, optimize)
    stand_ins = [np.broadcast_to(np.zeros((), get_aval(x).dtype), get_aval(x).shape)
                 for x in operands]
    path, report = np.einsum_path(subscripts, *stand_ins, optimize=strategy)
    return [tuple(step) for step in path[1:]], report


def _conv1d(name, a, v, mode, precision, preferred_element_type):
    """The 1-D convolution or correlation of ``a`` and ``v`` as one ``conv_general_dilated``
    (which correlates), with ``v`` flipped for a convolution, as JAX does."""
    check_arraylike(name, a, v)
    if get_aval(a).ndim != 1 or get_aval(v).ndim != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs.")
    a, v = (promote_dtypes if preferred_element_type is not None else
            promote_dtypes_inexact)(a, v)
    if not _shape(a)[0] or not _shape(v)[0]:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {_shape(a)} and "
                         f"{_shape(v)}.")
    reverse = False
    if name == "correlate":
        v = conj(v)
        if _shape(a)[0] < _shape(v)[0]:
            a, v, reverse = v, a, True
    else:
        if _shape(a)[0] < _shape(v)[0]:
            a, v = v, a
        v = lax.rev(v, (0,))
    n = _shape(v)[0]
    pads = {"valid": (0, 0), "same": (n // 2, n - n // 2 - 1), "full": (n - 1, n - 1)}
    if mode not in pads:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    out = lax.conv_general_dilated(
        reshape(a, (1, 1, -1)), reshape(v, (1, 1, -1)), (1,), [pads[mode]],
        precision=precision, preferred_element_type=preferred_element_type)[0, 0]
    return lax.rev(out, (0,)) if reverse else out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of two 1-D arrays (``mode`` 'full', 'same', 'valid')."""
    return _conv1d("convolve", a, v, mode, precision, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation ``sum_n a[n + k] conj(v[n])`` of two 1-D arrays."""
    return _conv1d("correlate", a, v, mode, precision, preferred_element_type)

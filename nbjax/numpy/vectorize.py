"""Functions that map a Python function over arrays: ``vectorize``, ``ufunc``/``frompyfunc``,
``piecewise``, ``apply_along_axis``, ``apply_over_axes``.

As in JAX, mapping is batching (what ``vmap`` does), not a Python loop over elements: the
function is traced once with its arguments' batch axes hidden, so the result is a single
vectorized computation that differentiates and batches like any other. ``_vmap`` is the
small piece of ``vmap`` these need, built on the batching interpreter directly (the numpy
layer sits below ``nbjax.api``).
"""

import inspect
import re

import numpy as np

from .. import lax
from ..core import get_aval
from ..lax import batch_util
from .creation import asarray
from .indexing import IndexUpdateHelper, getitem, take
from .manipulation import (broadcast_shapes, broadcast_to, concatenate, expand_dims, moveaxis,
                           ravel, reshape, squeeze, stack)
from . import reductions, ufuncs
from .reductions import argmax, cumsum
from .util import (broadcast_to_shape, canonicalize_axes, canonicalize_axis, check_arraylike,
                   select_where, to_array)

__all__ = ["vectorize", "ufunc", "frompyfunc", "piecewise", "apply_along_axis",
           "apply_over_axes",
           # jnp's ufuncs (replacing the functions of the same names in the namespace)
           "add", "multiply", "maximum", "minimum", "subtract", "negative", "logaddexp",
           "logaddexp2", "logical_and", "logical_or", "logical_xor", "bitwise_and",
           "bitwise_or", "bitwise_xor"]


def _vmap(fun, in_axes):
    """``vmap(fun, in_axes)`` for positional arguments with axes 0 or None (at least one
    mapped), every output leaf's batch axis moved to 0."""
    def mapped(*args):
        size = next(get_aval(a).shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
        return batch_util.vmapped(fun, args, in_axes, size, "vectorize")
    return mapped


# --- vectorize -----------------------------------------------------------------------------

_DIMENSION = r"\w+"
_CORE_DIMS = rf"(?:{_DIMENSION}(?:,{_DIMENSION})*)?"
_ARGUMENT = rf"\({_CORE_DIMS}\)"
_ARGUMENTS = rf"{_ARGUMENT}(?:,{_ARGUMENT})*"
_SIGNATURE = rf"^{_ARGUMENTS}->{_ARGUMENTS}$"


def _parse_signature(signature):
    """``'(m,n),(n)->(m)'`` as ``([('m', 'n'), ('n',)], [('m',)])`` (NumPy's gufunc form)."""
    signature = re.sub(r"\s+", "", signature)
    if not re.match(_SIGNATURE, signature):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    return tuple([tuple(re.findall(_DIMENSION, arg)) for arg in re.findall(_ARGUMENT, side)]
                 for side in signature.split("->"))


def _core_sizes(args, input_core_dims):
    """The loop (broadcast) shape of the arguments, and the size of each named core dim."""
    if len(args) != len(input_core_dims):
        raise TypeError(f"wrong number of positional arguments: expected "
                        f"{len(input_core_dims)}, got {len(args)}")
    sizes, loop_shapes = {}, []
    for arg, core_dims in zip(args, input_core_dims):
        shape = get_aval(arg).shape
        if len(core_dims) > len(shape):
            raise ValueError(f"input with shape {shape} does not have enough dimensions for "
                             f"all core dimensions {core_dims}")
        for dim, size in zip(core_dims, shape[len(shape) - len(core_dims):]):
            if sizes.setdefault(dim, size) != size:
                raise ValueError(f"inconsistent size for core dimension {dim!r}: {size} vs "
                                 f"{sizes[dim]}")
        loop_shapes.append(shape[:len(shape) - len(core_dims)])
    return broadcast_shapes(*loop_shapes), sizes


def _check_outputs(func, sizes, output_core_dims):
    """``func`` with its outputs' core dimensions checked against the signature."""
    def checked(*args):
        out = func(*args)
        outs = out if isinstance(out, tuple) else (out,)
        if output_core_dims is None:
            return out
        if len(outs) != len(output_core_dims):
            raise TypeError(f"wrong number of output arguments: expected "
                            f"{len(output_core_dims)}, got {len(outs)}")
        for x, dims in zip(outs, output_core_dims):
            shape = get_aval(to_array(x)).shape
            if len(shape) != len(dims):
                raise ValueError(f"output shape {shape} does not match core dimensions {dims}")
            for dim, size in zip(dims, shape):
                if sizes.setdefault(dim, size) != size:
                    raise ValueError(f"inconsistent size for core dimension {dim!r}: {size} "
                                     f"vs {sizes[dim]}")
        return out
    return checked


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """``pyfunc`` made to map over the leading (loop) axes of its array arguments, broadcast
    together, as ``np.vectorize`` but by batching, like JAX. ``excluded`` positions or
    keywords are passed through unmapped; ``signature`` (``'(n),(n)->()'``) names the core
    axes ``pyfunc`` sees whole."""
    def wrapped(*args, **kwargs):
        args, kwargs, func = _bind_excluded(pyfunc, excluded, args, kwargs)
        args = [to_array(a) for a in args]
        if signature is None:
            input_core_dims, output_core_dims = [()] * len(args), None
        else:
            input_core_dims, output_core_dims = _parse_signature(signature)
        loop_shape, sizes = _core_sizes(args, input_core_dims)
        func = _check_outputs(func, sizes, output_core_dims)
        return _map_loop_axes(func, args, input_core_dims, loop_shape)
    wrapped.__name__ = getattr(pyfunc, "__name__", "vectorized")
    wrapped.__doc__ = pyfunc.__doc__
    return wrapped


def _bind_excluded(pyfunc, excluded, args, kwargs):
    """The mapped positional arguments, the mapped keywords, and ``pyfunc`` with the excluded
    ones (and the keywords) bound."""
    if any(not isinstance(e, (int, str)) for e in excluded):
        raise TypeError("jnp.vectorize can only exclude integer or string arguments, but "
                        f"excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")
    fixed = {i: args[i] for i in excluded if isinstance(i, int) and i < len(args)}
    mapped = [a for i, a in enumerate(args) if i not in fixed]
    static_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
    dynamic_keys = [k for k in kwargs if k not in excluded]
    n_positional = len(mapped)

    def func(*values):
        it = iter(values[:n_positional])
        full = [fixed[i] if i in fixed else next(it) for i in range(len(args))]
        keywords = dict(zip(dynamic_keys, values[n_positional:]), **static_kwargs)
        return pyfunc(*full, **keywords)
    check_arraylike(getattr(pyfunc, "__name__", "vectorize"), *mapped,
                    *(kwargs[k] for k in dynamic_keys))
    return mapped + [kwargs[k] for k in dynamic_keys], {}, func


def _map_loop_axes(func, args, input_core_dims, loop_shape):
    """Batch ``func`` over each loop axis in turn (innermost first), skipping axes where
    every argument has size 1 (those come back as size-1 axes of the result)."""
    input_core_dims = list(input_core_dims) + [()] * (len(args) - len(input_core_dims))
    squeezed, reversed_shapes = [], []
    for arg, core_dims in zip(args, input_core_dims):
        shape = get_aval(arg).shape
        loop = shape[:len(shape) - len(core_dims)]
        reversed_shapes.append(((1,) * (len(loop_shape) - len(loop)) + loop)[::-1])
        squeezed.append(squeeze(arg, tuple(i for i, n in enumerate(loop) if n == 1)))
    expand = []
    for negdim, axis_sizes in enumerate(zip(*reversed_shapes)):
        in_axes = tuple(None if n == 1 else 0 for n in axis_sizes)
        if all(ax is None for ax in in_axes):
            expand.append(len(loop_shape) - 1 - negdim)
        else:
            func = _vmap(func, in_axes)
    result = func(*squeezed)
    if not expand:
        return result
    if isinstance(result, tuple):
        return tuple(expand_dims(r, expand) for r in result)
    return expand_dims(result, expand)


# --- ufunc ---------------------------------------------------------------------------------

class ufunc:
    """A function of ``nin`` arrays to ``nout`` with NumPy's ufunc methods (``reduce``,
    ``accumulate``, ``outer``, ``at``, ``reduceat``), built from the element-wise ``func``
    by ``vectorize``, as ``jnp.ufunc`` is. The methods apply ``func`` along an axis one
    step at a time (unrolled when traced), so they differentiate through ``func``.

    As in JAX, ``call``, ``reduce``, ``accumulate`` and ``at`` may give faster equivalents
    of the call and of those methods: ``jnp.add`` is the ufunc of ``add`` whose ``reduce``
    is ``sum``, ``accumulate`` ``cumsum`` and ``at`` a scatter-add (``_ufunc_of``)."""

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None,
                 call=None, reduce=None, accumulate=None, at=None):
        self._func = func
        self.__name__ = name or func.__name__
        self.__doc__ = func.__doc__
        self.nin, self.nout = int(nin), int(nout)
        self.nargs = int(nargs or nin)
        self.identity = identity
        self._vectorized = vectorize(func)
        self._function = call or self._vectorized
        self._fast_reduce, self._fast_accumulate, self._fast_at = reduce, accumulate, at

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __hash__(self):
        return hash((self._func, self.__name__, self.identity, self.nin, self.nout))

    def __eq__(self, other):
        return isinstance(other, ufunc) and (
            (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs) ==
            (other._func, other.__name__, other.identity, other.nin, other.nout, other.nargs))

    def __call__(self, *args, out=None, where=None):
        check_arraylike(self.__name__, *args)
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        return self._function(*args)

    def _binary(self, method):
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def _result_dtype(self, *args):
        """The dtype ``func`` gives for elements of the arguments' dtypes."""
        ones = [lax.full((), 1, get_aval(to_array(a)).dtype) for a in args]
        return get_aval(to_array(self._vectorized(*ones))).dtype

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """``func`` folded along ``axis`` (all axes, flattened, for None), starting from
        ``initial`` (or the identity, or the first element)."""
        check_arraylike(f"{self.__name__}.reduce", a)
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if self._fast_reduce is not None:
            return self._fast_reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                                where=where)
        a = to_array(a)
        initial = self.identity if initial is None else initial
        if where is not None:
            check_arraylike(f"{self.__name__}.reduce", where)
            if initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 "identity, so to use a where mask one has to specify "
                                 "'initial'.")
            where = broadcast_to_shape(to_array(where), get_aval(a).shape)
        dtype = self._result_dtype(a, a) if dtype is None else np.dtype(dtype)
        shape = get_aval(a).shape
        if isinstance(axis, tuple):
            raise NotImplementedError("tuple of axes")
        if axis is None:
            final_shape = (1,) * len(shape) if keepdims else ()
            a, where, axis = ravel(a), None if where is None else ravel(where), 0
        else:
            axis = canonicalize_axis(axis, len(shape))
            final_shape = shape[:axis] + ((1,) if keepdims else ()) + shape[axis + 1:]
            a = moveaxis(a, axis, 0)
            where = None if where is None else moveaxis(where, axis, 0)
        n = get_aval(a).shape[0]
        if n == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 "which has no identity")
            return lax.full(final_shape, initial, dtype)
        elements = [lax.convert_element_type(a[i], dtype) for i in range(n)]
        start = 0 if initial is not None else 1
        acc = broadcast_to_shape(lax.convert_element_type(
            to_array(initial if initial is not None else elements[0]), dtype),
            get_aval(a).shape[1:])
        for i in range(start, n):
            step = self(acc, elements[i])
            acc = step if where is None else select_where(where[i], step, acc)
        return reshape(acc, final_shape)

    def accumulate(self, a, axis=0, dtype=None, out=None):
        """The running ``reduce`` along ``axis``: element ``i`` folds elements ``0..i``."""
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        check_arraylike(f"{self.__name__}.accumulate", a)
        a = to_array(a)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        axis = canonicalize_axis(axis, get_aval(a).ndim)
        if self._fast_accumulate is not None:
            return self._fast_accumulate(a, axis=axis, dtype=dtype)
        dtype = self._result_dtype(a, a) if dtype is None else np.dtype(dtype)
        if not get_aval(a).size:
            return lax.full(get_aval(a).shape, 0, dtype)
        a = moveaxis(a, axis, 0)
        acc = lax.convert_element_type(a[0], dtype)
        outs = [acc]
        for i in range(1, get_aval(a).shape[0]):
            acc = self(acc, lax.convert_element_type(a[i], dtype))
            outs.append(acc)
        return moveaxis(stack(outs), 0, axis)

    def outer(self, A, B, /, **kwargs):
        """``func(A[i...], B[j...])`` for every pair: the result has shape
        ``A.shape + B.shape``."""
        self._binary("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        A, B = to_array(A), to_array(B)
        out = self(reshape(ravel(A), (-1, 1)), reshape(ravel(B), (1, -1)), **kwargs)
        return reshape(out, get_aval(A).shape + get_aval(B).shape)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """``a`` with ``a[indices] = func(a[indices], b)``, applied once per index, so
        repeated indices accumulate (``inplace=False`` is required, as in JAX)."""
        if inplace:
            raise NotImplementedError("nbjax.numpy.ufunc.at cannot modify arrays in-place, "
                                      "because nbjax arrays are immutable: pass "
                                      "inplace=False.")
        args = () if b is None else (b,)
        check_arraylike(f"{self.__name__}.at", a, *args)
        if self._fast_at is not None and args:
            return self._fast_at(IndexUpdateHelper(to_array(a))[indices], b)
        dtype = self._result_dtype(a, *args)
        a = lax.convert_element_type(to_array(a), dtype)
        args = [lax.convert_element_type(to_array(x), dtype) for x in args]
        indices = indices if isinstance(indices, tuple) else (indices,)
        arrays = [to_array(i) for i in indices if not isinstance(i, slice)]
        shape = np.broadcast_shapes(*(get_aval(i).shape for i in arrays)) if arrays else ()
        if not shape:
            return IndexUpdateHelper(a)[indices].set(self(getitem(a, indices), *args))
        count = int(np.prod(shape))
        flat = [i if isinstance(i, slice) else ravel(broadcast_to(i, shape)) for i in indices]
        if args:
            rest = get_aval(args[0]).shape[len(shape):]
            args = [reshape(broadcast_to(args[0], shape + rest), (count,) + rest)]
        for k in range(count):
            idx = tuple(i if isinstance(i, slice) else i[k] for i in flat)
            a = IndexUpdateHelper(a)[idx].set(self(getitem(a, idx), *(x[k] for x in args)))
        return a

    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """For each ``i``, ``a[indices[i]]`` folded with the following elements along
        ``axis`` up to ``indices[i + 1]`` (just itself where that is not larger), as JAX;
        ``indices`` may be traced."""
        self._binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a, indices = to_array(a), to_array(indices)
        if get_aval(a).ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got "
                             f"a.shape={get_aval(a).shape}")
        if get_aval(indices).ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got "
                             f"indices.shape={get_aval(indices).shape}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        axis = canonicalize_axis(axis, get_aval(a).ndim)
        n = get_aval(a).shape[axis]
        result = take(a, indices, axis=axis)
        if dtype is not None:
            result = lax.convert_element_type(result, dtype)
        bounds = concatenate([indices, lax.full((1,), n, get_aval(indices).dtype)])
        shape = [1] * get_aval(result).ndim
        shape[axis] = -1
        starts, stops = bounds[:-1].reshape(shape), bounds[1:].reshape(shape)
        for i in range(n):
            inside = (starts < i) & (stops > i)
            result = select_where(inside, self(result, take(a, np.array([i]), axis=axis)), result)
        return result


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A ``ufunc`` from the element-wise Python function ``func``."""
    return ufunc(func, nin, nout, identity=identity)


# --- jnp's own ufuncs ----------------------------------------------------------------------

def _ufunc_of(func, identity=None, reduce=None, accumulate=None, update=None):
    """``func`` (one of ``ufuncs``) as JAX's ``jnp`` has it: a ``ufunc`` called as ``func``
    itself, reducing with the reduction ``reduce`` (``jnp.sum``...), accumulating with
    ``accumulate`` (``jnp.cumsum``...) and scattering with ``x.at[i].<update>``."""
    def by_reduction(a, *, axis, dtype, keepdims, initial, where):
        if dtype is not None:
            a = lax.convert_element_type(to_array(a), dtype)
        return reduce(a, axis, keepdims=keepdims, initial=initial, where=where)

    def by_scatter(at_indices, b):
        return getattr(at_indices, update)(b)
    nin = len(inspect.signature(func).parameters)
    return ufunc(func, nin, 1, identity=identity, call=func,
                 reduce=by_reduction if reduce else None, accumulate=accumulate,
                 at=by_scatter if update else None)


def _running(lax_fn):
    """An ``accumulate`` by the cumulative primitive ``lax_fn`` (``lax.cummax``...)."""
    def accumulate(a, *, axis, dtype):
        a = to_array(a)
        return lax_fn(a if dtype is None else lax.convert_element_type(a, dtype), axis)
    return accumulate


add = _ufunc_of(ufuncs.add, 0, reductions.sum, cumsum, "add")
multiply = _ufunc_of(ufuncs.multiply, 1, reductions.prod, reductions.cumprod, "multiply")
maximum = _ufunc_of(ufuncs.maximum, None, reductions.max, _running(lax.cummax), "max")
minimum = _ufunc_of(ufuncs.minimum, None, reductions.min, _running(lax.cummin), "min")
subtract = _ufunc_of(ufuncs.subtract)
negative = _ufunc_of(ufuncs.negative)
logaddexp = _ufunc_of(ufuncs.logaddexp, -np.inf)
logaddexp2 = _ufunc_of(ufuncs.logaddexp2, -np.inf)
logical_and = _ufunc_of(ufuncs.logical_and, True)
logical_or = _ufunc_of(ufuncs.logical_or, False)
logical_xor = _ufunc_of(ufuncs.logical_xor, False)
bitwise_and = _ufunc_of(ufuncs.bitwise_and, -1)
bitwise_or = _ufunc_of(ufuncs.bitwise_or, 0)
bitwise_xor = _ufunc_of(ufuncs.bitwise_xor, 0)


# --- piecewise and apply_* -----------------------------------------------------------------

def piecewise(x, condlist, funclist, *args, **kw):
    """``funclist[i]`` (a function of ``x``'s element, or a constant) where ``condlist[i]``
    holds, the last such condition winning; a spare last entry of ``funclist`` is the
    default. Each element takes one branch of a ``switch``, batched over ``x``, as JAX."""
    check_arraylike("piecewise", x)
    x = to_array(x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = funclist[-1:] + funclist[:-1]
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}")
    dtype = get_aval(x).dtype
    conditions = asarray(condlist, dtype=bool)
    if get_aval(conditions).ndim == get_aval(x).ndim:  # one condition given unwrapped
        conditions = conditions[None]
    conditions = lax.broadcast_in_dim(conditions, (nc,) + get_aval(x).shape,
                                      tuple(range(get_aval(conditions).ndim)))
    # The branch of each element: the last true condition (0, the default, when none is).
    counts = cumsum(concatenate([lax.full_like(conditions[:1], False), conditions], 0), 0)
    index = argmax(counts, 0)

    def branch(f):
        if callable(f):
            return lambda v: lax.convert_element_type(to_array(f(v, *args, **kw)), dtype)
        return lambda v: lax.full((), f, dtype)
    branches = [branch(f) for f in funclist]
    if not get_aval(x).size:
        return x
    flat = _vmap(lambda i, v: lax.switch(i, branches, v), (0, 0))(ravel(index), ravel(x))
    return reshape(flat, get_aval(x).shape)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` of each 1-D slice of ``arr`` along ``axis``; the slices' results take the
    place of that axis (batched over the other axes, as JAX)."""
    check_arraylike("apply_along_axis", arr)
    arr = to_array(arr)
    ndim = get_aval(arr).ndim
    axis = canonicalize_axis(axis, ndim)

    def func(a):
        return func1d(a, *args, **kwargs)
    moved = moveaxis(arr, axis, -1)
    for _ in range(ndim - 1):
        func = _vmap(func, (0,))
    out = to_array(func(moved))
    # The batch axes lead; the result's own axes replace ``axis``.
    n_out = get_aval(out).ndim - (ndim - 1)
    return moveaxis(out, tuple(range(ndim - 1, ndim - 1 + n_out)),
                    tuple(range(axis, axis + n_out)))


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` for each axis in turn; a result one rank lower gets the axis back
    as size 1."""
    check_arraylike("apply_over_axes", a)
    a = to_array(a)
    for axis in axes:
        b = to_array(func(a, axis))
        if get_aval(b).ndim == get_aval(a).ndim - 1:
            b = expand_dims(b, canonicalize_axes(axis, get_aval(a).ndim))
        elif get_aval(b).ndim != get_aval(a).ndim:
            raise ValueError("function is not returning an array of the correct shape")
        a = b
    return a

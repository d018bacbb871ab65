"""``nbjax.experimental.checkify``: run-time checks in traced code, as
``jax.experimental.checkify``.

Inside ``jit`` a Python ``assert x > 0`` cannot work: ``x`` has no value while the function
is traced. ``checkify(f)`` turns the checks made in ``f`` into a value the function returns:
``err, out = checkify(f)(x)``, then ``err.get()`` (the message, or None) or ``err.throw()``.
The checks are the user's own (``check(pred, msg, *args)``) and, on request, automatic ones:
a NaN made by an operation, a division by zero, an index out of bounds. Four ideas make it.

**A check is a primitive.** ``check`` binds ``check_p``, whose operands say whether the
check failed and hold the values its message is formatted with. Eagerly its implementation
raises at once. It is *effectful*, so the compiler never drops it as dead; and since a
compiled program cannot raise, staging it outside ``checkify`` (``jit(f)``) is refused with
JAX's error, while ``checkify`` stages it on purpose, to fold it into a value.

**The error is a value.** An ``Error`` is three things computed by the program: ``failed``
(a boolean), ``code`` (which place failed first) and ``payloads`` (for each place, the
run-time values its message needs: the arguments of a user's message, the index that was
out of bounds). The static part, what each code means (the *site*: kind of error, message
template, line of code), is a pytree's auxiliary data, so an ``Error`` passes through
``jit`` and ``vmap`` like any pytree of arrays.

**Checkify interprets a jaxpr.** ``checkify(f)`` traces ``f`` to a jaxpr, lists its sites,
then evaluates it equation by equation, binding each primitive again and, after a checked
one, folding its test into the error state with ``nbjax.lax`` operations (``record``: the
first failure wins, later ones change nothing). Because it only binds primitives, it runs
under any transformation: ``jit(checkify(f))``, ``vmap(checkify(f))``, ``grad`` of what it
returns. Transformations applied inside (``checkify(jit(f))``, ``checkify(vmap(f))``,
``checkify(grad(f))``) are simply part of the jaxpr it interprets.

**Sub-programs carry the state.** A ``cond``, ``scan``, ``while``, ``jit`` or custom-rule
call holds jaxprs; its rule rebuilds each one to take the error state as extra inputs and
return it as extra outputs (a scan's carry, a while's carry, a branch's results), then binds
the primitive again. A loop's carry must keep one type, so every site gets its payload
slots before anything runs: the state has the same leaves everywhere. A while's predicate is
checked on the initial carry before the loop and on every new carry inside the body.

What differs from JAX, and why:

- The first failure *in execution order* wins. JAX keeps the first failure of each kind and
  then reports the kind whose check comes first in the program, so in a loop a check that
  fails at a later iteration can hide a different kind of failure at an earlier one.
- ``check``'s predicate may be a boolean array (the check fails if any element is False);
  JAX requires a scalar.
- The message (``err.get()``, ``str`` of the raised error) is JAX's, without a location, as
  in JAX; JAX shows the failing line as the traceback of the cause of the raised error,
  nbjax as a note on that cause (Python 3.11 and later) and as its ``traceback_info``.
- Staging a ``check`` outside ``checkify`` raises JAX's ``ValueError`` when it is traced (by
  ``jit``, and also by ``make_jaxpr``, which JAX allows: JAX refuses when it compiles, and
  nbjax's compiler falls back to another backend instead of failing). So does a ``check``
  in a ``custom_jvp`` rule that calls its function under ``grad(checkify(f))`` (nbjax's
  ``custom_jvp`` traces the function there; JAX runs it).
- Scatters are checked for NaNs whenever ``nan_checks`` are on (JAX: only together with
  ``index_checks``).
- ``checkify(vmap(f))`` of a ``while_loop`` whose predicate differs between batch members
  checks every member at every iteration, also the members whose loop has ended: the
  batched loop it is given looks like any other (JAX refuses that case;
  ``vmap(checkify(f))`` checks each member exactly).
- Checks inside other primitives with sub-programs (``pmap``, ``shard_map``,
  ``custom_vmap``, ``custom_linear_solve``, ``custom_root``) are not made: the primitive is
  bound unchanged, as JAX's default rule does.
- A jitted function first traced under ``checkify`` keeps its ``check`` in ``jit``'s cache;
  called later without ``checkify``, the compiler refuses the check and the program runs
  on the reference backend (with a warning), where a failing check raises.

Every public name of ``jax.experimental.checkify`` is here. ``JaxRuntimeError`` is JAX's own
class of that module (a ``ValueError``), not ``nbjax.errors.JaxRuntimeError``, as in JAX.
"""

import dataclasses
import functools
import threading
from typing import Callable, NamedTuple

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..core import (Array, EvalTrace, Literal, Primitive, ShapedArray, Tracer, current_trace,
                    dtypes, get_aval, subjaxprs, user_frame, valid_value)
from ..core.source_info import restaging
from ..checkpoint import checkpoint_p
from ..custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from ..interpreters import ad, staging
from ..jit import jit_p
from ..lax.batch_util import bdim_at_front
from ..lax.control_flow import share_consts, trace_flat
from ..tree_util import register_pytree_node_class, tree_flatten

__all__ = ["Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks",
           "check", "check_error", "checkify", "debug_check", "div_checks", "float_checks",
           "index_checks", "init_error", "nan_checks", "user_checks"]


# --- the kinds of error (JAX's exception classes, which also name the error sets) ----------

class JaxRuntimeError(ValueError):
    """What a failed check raises (``err.throw()``, or a ``check`` run eagerly)."""


class JaxException(Exception):
    """An error found by a check. ``traceback_info`` is where: the ``SourceInfo`` of the
    failing operation (None if unknown). Each subclass is an *error category*: the error
    sets (``nan_checks``...) are sets of these classes."""

    def __init__(self, traceback_info):
        super().__init__()
        self.traceback_info = traceback_info

    @classmethod
    def from_payload(cls, where, details, payload):
        """The exception of a site: its static ``details``, then its run-time payload."""
        return cls(where, *details, *payload)


class FailedCheckError(JaxException):
    """A user's ``check`` whose predicate was False."""

    def __init__(self, traceback_info, fmt_string, *args, **kwargs):
        super().__init__(traceback_info)
        self.fmt_string, self.args, self.kwargs = fmt_string, args, kwargs

    @classmethod
    def from_payload(cls, where, details, payload):
        fmt_string, fmt_tree = details
        args, kwargs = fmt_tree.unflatten(payload)
        return cls(where, fmt_string, *args, **kwargs)

    def __str__(self):
        return self.fmt_string.format(*self.args, **self.kwargs) + " (`check` failed)"


class NaNError(JaxException):
    """An operation made a NaN."""

    def __init__(self, traceback_info, primitive_name):
        super().__init__(traceback_info)
        self.prim = primitive_name

    def __str__(self):
        return f"nan generated by primitive: {self.prim}."


class OOBError(JaxException):
    """An index out of bounds. ``payload`` is ``[index, axis, size of that axis]``."""

    def __init__(self, traceback_info, primitive_name, operand_shape, payload):
        super().__init__(traceback_info)
        self.prim, self.operand_shape, self._payload = primitive_name, operand_shape, payload

    def __str__(self):
        index, axis, size = self._payload
        return (f"out-of-bounds indexing for array of shape {self.operand_shape}: index "
                f"{index} is out of bounds for axis {axis} with size {size}. ")


class DivisionByZeroError(JaxException):
    """A division whose divisor had a zero."""

    def __str__(self):
        return "division by zero"


class BatchedError(JaxException):
    """The errors of the members of a batch (``vmap(checkify(f))``): ``error_mapping`` maps
    the index of each member that failed to its error."""

    def __init__(self, error_mapping):
        super().__init__(next(iter(error_mapping.values())).traceback_info)
        self.error_mapping = error_mapping

    def __str__(self):
        return "\n".join(f"at mapped index {', '.join(map(str, index))}: {e}"
                         for index, e in self.error_mapping.items())


ErrorCategory = type[JaxException]

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


# --- sites and the Error value -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Site:
    """A place that may fail: what an error code stands for. ``details`` are the static
    parts of its message, ``payload_avals`` the types of its run-time parts, ``where`` the
    line of code (not compared: two sites differing only there mean the same)."""
    category: type
    details: tuple
    payload_avals: tuple = ()
    where: object = dataclasses.field(default=None, compare=False)

    def exception(self, payload):
        return self.category.from_payload(self.where, self.details, payload)


def _slots(sites):
    """Which payload leaves belong to each site: consecutive ranges, in site order."""
    ranges, start = [], 0
    for site in sites:
        ranges.append(range(start, start + len(site.payload_avals)))
        start += len(site.payload_avals)
    return ranges


@register_pytree_node_class
class Error:
    """What ``checkify(f)`` returns beside ``f``'s result: whether a check failed, and which
    first. Its leaves are ``failed`` (bool), ``code`` (int32: the failing site) and the
    payload of every site; the sites themselves are static. Under ``vmap`` every leaf gains
    the batch axes, and ``get`` reports each member that failed."""

    def __init__(self, failed, code, payloads, sites):
        self._failed, self._code = failed, code
        self._payloads, self._sites = tuple(payloads), tuple(sites)

    def get(self):
        """The message of the error, or None if no check failed."""
        exception = self.get_exception()
        return None if exception is None else str(exception)

    def get_exception(self):
        """The error as an exception (a ``BatchedError`` for a batch), or None."""
        failed = np.asarray(self._failed)
        if failed.ndim == 0:
            return self._exception_of(()) if failed else None
        found = {index: self._exception_of(index) for index in np.ndindex(*failed.shape)
                 if failed[index]}
        return BatchedError(found) if found else None

    def _exception_of(self, index):
        """The exception of batch member ``index`` (``()``: not batched)."""
        code = int(np.asarray(self._code)[index])
        site, slots = self._sites[code], _slots(self._sites)[code]
        # (as Arrays of the types the values had where the check was made: weak types too)
        payload = [Array.wrap(np.asarray(np.asarray(self._payloads[i])[index], aval.dtype), aval)
                   for i, aval in zip(slots, site.payload_avals)]
        return site.exception(payload)

    def throw(self):
        """Raise ``JaxRuntimeError`` if a check failed (under ``checkify``: record it)."""
        check_error(self)

    def __str__(self):
        return f"Error({self.get()})"

    __repr__ = __str__

    def tree_flatten(self):
        return (self._failed, self._code, *self._payloads), self._sites

    @classmethod
    def tree_unflatten(cls, sites, leaves):
        failed, code, *payloads = leaves
        return cls(failed, code, payloads, sites)


init_error = Error(np.asarray(False), np.asarray(0, np.int32), (), ())


def _raise(error):
    """Raise ``JaxRuntimeError`` with the message if ``error`` failed. Its cause is the
    error as an exception, which shows the failing line (JAX's cause shows it as its
    traceback)."""
    exception = error.get_exception()
    if exception is None:
        return
    where = exception.traceback_info
    if where is not None and hasattr(exception, "add_note"):  # (Python 3.11 and later)
        line = where.source_line()
        exception.add_note(f'  File "{where.file}", line {where.line}, in {where.function}'
                           + (f"\n    {line}" if line else ""))
    raise JaxRuntimeError(str(exception)) from exception


# --- check_p: a check, bound with the leaves of an Error -----------------------------------

check_p = Primitive("check", multiple_results=True)
check_p.effectful = True  # (no results: without this the compiler would drop it as dead)
check_p.pp_hidden = ("sites",)  # printed as JAX prints it: ``check[debug=False] a b c``

_NOT_FUNCTIONALIZED = (
    "Cannot abstractly evaluate a checkify.check which was not functionalized. This probably "
    "means you tried to stage (jit/scan/pmap/...) a `check` without functionalizing it "
    "through `checkify.checkify`.")


class _Checkifying(threading.local):
    depth = 0  # how many ``checkify`` calls are tracing their function in this thread


_checkifying = _Checkifying()


@check_p.def_abstract_eval
def _check_abstract_eval(*avals, sites, debug):
    # A staged check can only ever be folded by checkify: a compiled program cannot raise.
    # (A debug check is a no-op when not folded, so it may be staged anywhere.)
    if not debug and not _checkifying.depth and not isinstance(current_trace(), EvalTrace):
        raise ValueError(_NOT_FUNCTIONALIZED)
    return []


@check_p.def_impl
def _check_impl(failed, code, *payloads, sites, debug):
    if not debug:  # (a debug_check only checks under checkify)
        _raise(Error(failed, code, payloads, sites))
    return []


@check_p.def_jvp
def _check_jvp(primals, tangents, **params):
    check_p.bind(*primals, **params)  # the check is about the values, not their tangents
    return [], []


def _one_member(failed, code, payloads):
    """The error of one member of a batch (the batch axes first): the last member that
    failed, the one JAX reports."""
    batch_shape = get_aval(failed).shape
    n = int(np.prod(batch_shape))
    failed, code = jnp.reshape(failed, (n,)), jnp.reshape(code, (n,))
    member = jnp.argmax(jnp.where(failed, jnp.arange(n), -1))
    payloads = [jnp.reshape(p, (n,) + get_aval(p).shape[len(batch_shape):])[member]
                for p in payloads]
    return failed[member], code[member], payloads


@check_p.def_batch
def _check_batch(axis_data, vals, dims, *, sites, debug):
    failed, code, *payloads = [bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
    failed, code, payloads = _one_member(failed, code, payloads)
    check_p.bind(failed, code, *payloads, sites=sites, debug=debug)
    return [], []


def _check_lowering(*leaves, sites, debug):
    """For the compiler, which only meets a staged check that ``checkify`` traced and a
    ``jit`` cached: a debug check disappears; any other cannot be compiled."""
    if debug:
        return []
    raise ValueError(_NOT_FUNCTIONALIZED)


check_p.def_lowering("jaxpr", _check_lowering)


def _bind_check(error, debug):
    """Check ``error`` (the leaves of one member's Error) by binding ``check_p``."""
    if get_aval(error._failed).ndim:  # a batch of errors, as values: JAX checks one member
        error = Error(*_one_member(error._failed, error._code, error._payloads), error._sites)
    check_p.bind(error._failed, error._code, *error._payloads, sites=error._sites,
                 debug=debug)


# --- the user's checks ---------------------------------------------------------------------

def check(pred, msg, *fmt_args, debug=False, **fmt_kwargs):
    """Fail with ``msg.format(*fmt_args, **fmt_kwargs)`` unless ``pred`` (a boolean, or a
    boolean array: every element must be True). The formatting arguments are pytrees of
    arrays, formatted with their run-time values. Eagerly it raises ``JaxRuntimeError``; in
    a function given to ``checkify`` it becomes part of the returned ``Error``; staged
    without ``checkify`` (``jit``) it is refused."""
    _check(pred, msg, debug, fmt_args, fmt_kwargs)


def debug_check(pred, msg, *fmt_args, **fmt_kwargs):
    """A ``check`` made only under ``checkify``; elsewhere (eagerly, under ``jit``) it does
    nothing."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)


def _check(pred, msg, debug, fmt_args, fmt_kwargs):
    name = "debug_check" if debug else "check"
    if not (valid_value(pred) and dtypes.is_bool(get_aval(pred).dtype)):
        raise TypeError(f"{name} takes a boolean scalar or array pred as argument, got {pred}")
    leaves, tree = tree_flatten((fmt_args, fmt_kwargs))
    for leaf in leaves:
        if not isinstance(leaf, (Array, Tracer, np.ndarray)):
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {leaf!r} of type {type(leaf)}.")
    site = _Site(FailedCheckError, (msg, tree), tuple(get_aval(x) for x in leaves),
                 user_frame())
    failed = jnp.logical_not(jnp.all(pred))
    _bind_check(Error(failed, np.int32(0), leaves, (site,)), debug)


def check_error(error):
    """Raise the error if it failed (``error.throw()``), or, under ``checkify``, record it:
    the inverse of ``checkify``. A batch of errors raises the last member's."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes an Error as argument, got type {type(error)} "
                        "instead.")
    _bind_check(error, debug=False)


# --- the checks of primitives --------------------------------------------------------------

class _Check(NamedTuple):
    """One kind of check of a primitive. ``details(eqn)``: the static parts of its message,
    or None where it does not apply; ``test(ins, outs, params)``: ``(fires, payload)``
    computed from the equation's operands and results."""
    category: type
    details: Callable
    test: Callable
    payload_avals: tuple = ()

    def site(self, eqn):
        details = self.details(eqn)
        if details is None:
            return None
        return _Site(self.category, details, self.payload_avals, eqn.source_info)


def _as_list(outs):
    return list(outs) if isinstance(outs, (list, tuple)) else [outs]


def _nan_details(eqn):
    if any(dtypes.is_inexact(v.aval.dtype) for v in eqn.outvars):
        return (eqn.primitive.name,)
    return None


def _nan_test(ins, outs, params):
    found = [jnp.any(jnp.isnan(o)) for o in _as_list(outs)
             if dtypes.is_inexact(get_aval(o).dtype)]
    return functools.reduce(jnp.logical_or, found), []


def _division_test(ins, outs, params):
    return jnp.any(ins[1] == 0), []


def _within_bounds(indices, limits, operand_shape):
    """``(fires, payload)`` for index vectors along the last axis of ``indices`` whose
    component k starts a window along operand axis ``limits[k][0]`` and must lie between 0
    and ``limits[k][1]`` (the last start at which the window fits). The payload is JAX's:
    the first index out of bounds (in row-major order), its axis and that axis's size."""
    axes = np.array([axis for axis, _ in limits], np.int32)
    sizes = np.array([operand_shape[axis] for axis in axes], np.int32)
    last = np.array([last for _, last in limits]).astype(get_aval(indices).dtype)
    bad = jnp.ravel(jnp.logical_or(indices < 0, indices > last))
    first = jnp.argmax(bad)  # (0 when none is out of bounds: the payload is then unused)
    component = first % len(limits)
    payload = jnp.stack([jnp.ravel(indices)[first].astype(np.int32),
                         jnp.asarray(axes)[component], jnp.asarray(sizes)[component]])
    return jnp.any(bad), [payload]


def _index_details(index_operands):
    """The details of an index check of the equation whose index operands (avals) are
    picked by ``index_operands(eqn)``: none to check, no check."""
    def details(eqn):
        if all(a.size == 0 for a in index_operands(eqn)):
            return None
        return eqn.primitive.name, eqn.invars[0].aval.shape
    return details


def _gather_test(ins, outs, params):
    operand, indices = ins
    shape, sizes = get_aval(operand).shape, params["slice_sizes"]
    return _within_bounds(indices, [(d, shape[d] - sizes[d])
                                    for d in params["dimension_numbers"].start_index_map], shape)


def _dynamic_slice_test(ins, outs, params):
    operand, *starts = ins
    shape = get_aval(operand).shape
    return _within_bounds(jnp.stack(starts), [(d, shape[d] - size) for d, size in
                                              enumerate(params["slice_sizes"])], shape)


def _dynamic_update_slice_test(ins, outs, params):
    operand, update, *starts = ins
    shape = get_aval(operand).shape
    return _within_bounds(jnp.stack(starts), [(d, shape[d] - size) for d, size in
                                              enumerate(get_aval(update).shape)], shape)


def _scatter_test(ins, outs, params):
    operand, indices, updates = ins
    dn, shape = params["dimension_numbers"], get_aval(operand).shape
    # The window of an update along each operand axis: 1 on the axes the updates leave out.
    window_axes = iter(dn.update_window_dims)
    window = [1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims
              else get_aval(updates).shape[next(window_axes)] for d in range(len(shape))]
    return _within_bounds(indices, [(d, shape[d] - window[d])
                                    for d in dn.scatter_dims_to_operand_dims], shape)


_OOB_PAYLOAD = (ShapedArray((3,), np.dtype(np.int32)),)
_nan = _Check(NaNError, _nan_details, _nan_test)
_division = _Check(DivisionByZeroError, lambda eqn: (), _division_test)


def _oob(index_operands, test):
    return _Check(OOBError, _index_details(index_operands), test, _OOB_PAYLOAD)


# The primitives JAX checks for NaNs in their results (its list, less ``reduce``,
# ``reduce_window`` and ``reduce_window_sum``, which nbjax does not have).
_NAN_PRIMITIVES = (
    "acos acosh add asin asinh atan2 atan atanh bessel_i0e bessel_i1e cbrt "
    "conv_general_dilated cos cosh cumlogsumexp cummax cummin cumprod cumsum digamma "
    "dot_general erf_inv erf erfc exp expm1 fft igamma_grad_a igamma igammac integer_pow "
    "lgamma linear_solve log1p log logistic mul pad pow psum reduce_prod reduce_sum "
    "regularized_incomplete_beta rem rng_uniform rsqrt sin sinh sqrt sub tan tanh").split()

# Per primitive, its checks, in the order they are made (a division by zero before the NaN
# it makes, as JAX).
_CHECKS = {getattr(lax, f"{name}_p"): (_nan,) for name in _NAN_PRIMITIVES}
_CHECKS[lax.div_p] = (_division, _nan)
_CHECKS[lax.gather_p] = (_oob(lambda eqn: [eqn.invars[1].aval], _gather_test),)
_CHECKS[lax.dynamic_slice_p] = (
    _oob(lambda eqn: [v.aval for v in eqn.invars[1:]], _dynamic_slice_test),)
_CHECKS[lax.dynamic_update_slice_p] = (
    _oob(lambda eqn: [v.aval for v in eqn.invars[2:]], _dynamic_update_slice_test),)
_CHECKS.update({prim: (_oob(lambda eqn: [eqn.invars[1].aval], _scatter_test), _nan)
                for prim in (lax.scatter_p, lax.scatter_add_p, lax.scatter_sub_p,
                             lax.scatter_mul_p, lax.scatter_min_p, lax.scatter_max_p)})


class _Folded(NamedTuple):
    """Site ``index`` of a check equation (a ``check``, or a whole ``Error`` given to
    ``check_error``): it fails if the check's error did with that code."""
    index: int
    payload: slice

    def test(self, ins, outs, params):
        failed, code, *payloads = ins
        return jnp.logical_and(failed, code == self.index), payloads[self.payload]


# --- the sites of a program and the error state --------------------------------------------

class _SiteTable:
    """Every site of a program whose error category is enabled, numbered: a site's number is
    its error code, and its payload has slots of its own in the error state. Listed before
    the program runs, so that the state has the same leaves everywhere (a loop's carry)."""

    def __init__(self, errors):
        self.errors = errors
        self.sites = []
        self.checks = {}  # equation -> [(code, _Check or _Folded)]: what it records
        self._seen = set()

    def collect(self, jaxpr):
        """Number the sites of ``jaxpr`` and of the sub-programs checkify goes into."""
        if jaxpr in self._seen:  # (a jaxpr called twice, e.g. a jitted function)
            return
        self._seen.add(jaxpr)
        for eqn in jaxpr.eqns:
            if eqn.primitive in _RULES:
                for sub in subjaxprs(eqn.params):
                    self.collect(sub)
            elif eqn.primitive is check_p:
                slots = _slots(eqn.params["sites"])
                self._add(eqn, [(site, _Folded(j, slice(r.start, r.stop)))
                                for j, (site, r) in enumerate(zip(eqn.params["sites"], slots))])
            else:
                self._add(eqn, [(c.site(eqn), c) for c in _CHECKS.get(eqn.primitive, ())])

    def _add(self, eqn, found):
        checks = []
        for site, check_ in found:
            if site is not None and site.category in self.errors:
                self.sites.append(site)
                checks.append((len(self.sites) - 1, check_))
        if checks:
            self.checks[eqn] = checks


class _State:
    """The error state while a jaxpr is interpreted: the leaves of an ``Error``, updated in
    place by ``record``, and the table of the sites they refer to."""

    def __init__(self, table, leaves):
        self.table = table
        self.failed, self.code, *payloads = leaves
        self.payloads = list(payloads)
        self.slots = _slots(table.sites)

    @classmethod
    def initial(cls, table):
        """No failure yet, and zeros in every payload slot."""
        payloads = [jnp.zeros(a.shape, a.dtype) for s in table.sites for a in s.payload_avals]
        return cls(table, [jnp.zeros((), bool), jnp.zeros((), np.int32), *payloads])

    def leaves(self):
        return [self.failed, self.code, *self.payloads]

    def avals(self):
        return [get_aval(x) for x in self.leaves()]

    def with_leaves(self, leaves):
        return _State(self.table, list(leaves))

    def take(self, outs):
        """Results of a primitive whose first results are the state: update it from them,
        and return the others."""
        n = len(self.leaves())
        self.failed, self.code, *payloads = outs[:n]
        self.payloads = list(payloads)
        return outs[n:]

    def record(self, code, fires, payload):
        """Site ``code`` failed if ``fires``: it becomes the error unless one came first."""
        first = jnp.logical_and(fires, jnp.logical_not(self.failed))
        self.failed = jnp.logical_or(self.failed, fires)
        self.code = jnp.where(first, np.int32(code), self.code)
        for slot, value in zip(self.slots[code], payload):
            self.payloads[slot] = jnp.where(first, value, self.payloads[slot])

    def error(self):
        return Error(self.failed, self.code, self.payloads, self.table.sites)


# The state used where errors are not wanted (a while's predicate, checked in the body).
_NO_CHECKS = _SiteTable(frozenset())


# --- the interpreter -----------------------------------------------------------------------

def _interpret(jaxpr, consts, args, state):
    """Evaluate ``jaxpr`` by binding its equations (under whatever trace is current),
    recording the checks of each into ``state``; returns the outputs."""
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    def read(atom):
        return atom.val if isinstance(atom, Literal) else env[atom]

    with restaging(jaxpr.eqns) as eqns:  # (what is staged keeps the equation's source line)
        for eqn in eqns:
            ins = [read(a) for a in eqn.invars]
            rule = _RULES.get(eqn.primitive)
            if rule is not None:
                outs = rule(state, eqn, ins)
            else:
                # A check equation is not bound again: recording it is all it does.
                outs = [] if eqn.primitive is check_p else eqn.primitive.bind(*ins, **eqn.params)
                for code, check_ in state.table.checks.get(eqn, ()):
                    state.record(code, *check_.test(ins, outs, eqn.params))
            env.update(zip(eqn.outvars, _as_list(outs) if eqn.primitive.multiple_results
                           else [outs]))
    return [read(a) for a in jaxpr.outvars]


def _threading_state(closed, state, at, what):
    """``closed`` rebuilt to carry the error state: a const-free jaxpr that takes the
    state's leaves among its inputs (before input ``at``) and returns them before its
    outputs, checking on the way. Returns it and the consts it takes first."""
    n = len(state.leaves())

    def run(*args):
        inner = state.with_leaves(args[at:at + n])
        outs = _interpret(closed.jaxpr, closed.consts, list(args[:at] + args[at + n:]), inner)
        return inner.leaves() + outs
    avals = closed.in_avals[:at] + state.avals() + closed.in_avals[at:]
    return trace_flat(run, avals, what)


def _cond_rule(state, eqn, ins):
    index, *ops = ins
    branches, consts = share_consts([_threading_state(b, state, 0, "checkify of a cond branch")
                                     for b in eqn.params["branches"]])
    return state.take(lax.cond_p.bind(index, *consts, *state.leaves(), *ops,
                                      branches=tuple(branches)))


def _scan_rule(state, eqn, ins):
    """The state is carried first; the rebuilt body's consts go before the scan's own."""
    params = eqn.params
    nc = params["num_consts"]
    body, consts = _threading_state(params["jaxpr"], state, nc, "checkify of a scan body")
    outs = lax.scan_p.bind(*consts, *ins[:nc], *state.leaves(), *ins[nc:], **dict(
        params, jaxpr=body, num_consts=len(consts) + nc,
        num_carry=len(state.leaves()) + params["num_carry"]))
    return state.take(outs)


def _while_rule(state, eqn, ins):
    """The predicate is checked on the initial carry now, then on every new carry inside
    the body (which carries the state); the loop's own predicate records nothing."""
    params = eqn.params
    cond, body = params["cond_jaxpr"], params["body_jaxpr"]
    nc, nb, n = params["cond_nconsts"], params["body_nconsts"], len(state.leaves())
    cond_consts, body_consts, carry = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
    _interpret(cond.jaxpr, cond.consts, cond_consts + carry, state)

    def step(*args):  # cond consts, body consts, state, carry
        inner = state.with_leaves(args[nc + nb:nc + nb + n])
        new = _interpret(body.jaxpr, body.consts,
                         list(args[nc:nc + nb] + args[nc + nb + n:]), inner)
        _interpret(cond.jaxpr, cond.consts, list(args[:nc]) + new, inner)
        return inner.leaves() + new

    def keep_going(*args):  # cond consts, state, carry
        return _interpret(cond.jaxpr, cond.consts, list(args[:nc] + args[nc + n:]),
                          _State.initial(_NO_CHECKS))

    body_avals = cond.in_avals[:nc] + body.in_avals[:nb] + state.avals() + body.in_avals[nb:]
    new_body, body_extra = trace_flat(step, body_avals, "checkify of a while_loop body")
    new_cond, cond_extra = trace_flat(keep_going, cond.in_avals[:nc] + state.avals()
                                      + cond.in_avals[nc:], "checkify of a while_loop cond")
    outs = lax.while_p.bind(*cond_extra, *cond_consts, *body_extra, *cond_consts, *body_consts,
                            *state.leaves(), *carry, cond_jaxpr=new_cond, body_jaxpr=new_body,
                            cond_nconsts=len(cond_extra) + nc,
                            body_nconsts=len(body_extra) + nc + nb)
    return state.take(outs)


def _call_rule(state, eqn, ins):
    """``jit`` and ``checkpoint``: the same call of the rebuilt callee."""
    param = eqn.primitive.call_param
    callee, consts = _threading_state(eqn.params[param], state, 0,
                                      f"checkify of {eqn.primitive.name}")
    return state.take(eqn.primitive.bind(*consts, *state.leaves(), *ins,
                                         **dict(eqn.params, **{param: callee})))


def _custom_call(state, eqn, ins, **rules):
    """A custom-rule call: the callee carries the state after the call's consts; ``rules``
    are its rules (functions) rewritten to pass the state over."""
    params = eqn.params
    nc = params["num_consts"]
    callee, consts = _threading_state(params["call_jaxpr"], state, nc,
                                      f"checkify of {eqn.primitive.name}")
    outs = eqn.primitive.bind(*consts, *ins[:nc], *state.leaves(), *ins[nc:], **dict(
        params, call_jaxpr=callee, num_consts=len(consts) + nc, **rules))
    return state.take(outs)


def _custom_jvp_rule(state, eqn, ins):
    """Differentiated, the function is replaced by its JVP rule, which makes no checks: the
    state passes through unchanged, with zero tangents (as in JAX)."""
    jvp, n = eqn.params["jvp"], len(state.leaves())

    def jvp_passing_state(primals, tangents):
        outs, out_tangents = jvp(primals[n:], tangents[n:])
        return (list(primals[:n]) + list(outs),
                [ad.Zero.like(x) for x in primals[:n]] + list(out_tangents))
    return _custom_call(state, eqn, ins, jvp=jvp_passing_state)


def _custom_vjp_rule(state, eqn, ins):
    """As a custom JVP: the forward rule passes the state through, the backward rule gives
    it no cotangent."""
    fwd, bwd, n = eqn.params["fwd"], eqn.params["bwd"], len(state.leaves())

    def fwd_passing_state(args, perturbed):
        outs, residuals = fwd(args[n:], perturbed[n:])
        return list(args[:n]) + list(outs), residuals

    def bwd_skipping_state(residuals, cts):
        return [None] * n + list(bwd(residuals, cts[n:]))
    return _custom_call(state, eqn, ins, fwd=fwd_passing_state, bwd=bwd_skipping_state)


# The primitives with sub-programs that checkify goes into.
_RULES = {lax.cond_p: _cond_rule, lax.scan_p: _scan_rule, lax.while_p: _while_rule,
          jit_p: _call_rule, checkpoint_p: _call_rule, custom_jvp_call_p: _custom_jvp_rule,
          custom_vjp_call_p: _custom_vjp_rule}


# --- checkify ------------------------------------------------------------------------------

def checkify(f, errors=user_checks):
    """``checkify(f)(*args, **kwargs)`` returns ``(err, f(*args, **kwargs))``: ``err`` is an
    ``Error`` holding the first failed check, if any, of the categories in ``errors``
    (``user_checks`` by default; ``nan_checks``, ``div_checks``, ``index_checks`` and their
    unions: ``float_checks``, ``automatic_checks``, ``all_checks``)."""
    errors = frozenset(errors)

    @functools.wraps(f)
    def checked(*args, **kwargs):
        out_trees = []

        def flat():  # (the arguments are closed over, as in JAX: non-arrays stay Python)
            leaves, tree = tree_flatten(f(*args, **kwargs))
            out_trees.append(tree)
            return leaves
        _checkifying.depth += 1
        try:
            jaxpr, consts = staging.trace_to_jaxpr(flat, [], staging.describe(f, "checkify"))
        finally:
            _checkifying.depth -= 1
        table = _SiteTable(errors)
        table.collect(jaxpr)
        state = _State.initial(table)
        outs = _interpret(jaxpr, consts, [], state)
        return state.error(), out_trees[0].unflatten(outs)
    return checked

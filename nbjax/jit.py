"""``jit``: stage a function to a jaxpr once per input signature and run it as one call.

A jitted call is a ``jit`` equation holding the traced jaxpr, so every transformation
passes through it: vmap batches the jaxpr, JVP differentiates it, partial evaluation splits
it into a known (forward) call and an unknown (linear) call, and transposition turns the
linear call into a backward call. Executing a ``jit`` equation compiles its jaxpr once per
target (its ``backend`` param, or the configured default) and caches the executable
(``nbjax.compiler``).

Eager calls of a signature seen before take a fast path that skips what cannot change
between such calls (see ``JitWrapped``). ``jit(f).lower(*args)`` and ``.compile()`` give the
traced and optimised program, the kernels, their cost and the fusion report ahead of time
(``Lowered``, ``Compiled``, as ``jax.stages``). Observers (``JitWrapped.observe``) see each
concrete call with its trace, executable and timing: the notebook's views are built on that.
"""

import collections
import functools
from dataclasses import dataclass
import inspect
import logging
import operator
import threading
import time
import warnings
import weakref

import numpy as np

from . import compiler
from .backends import get_target, target_names
from .calls import CallRules, FlatCall, abstractify, as_array
from .calls import Traced as TracedCall
from .compiler import donation, report
from .config import config, user_context_values, user_contexts
from .core import (Array, EvalTrace, Primitive, ShapedArray, Tracer, current_trace, dtypes,
                   get_aval, pytree, to_numpy, to_operand)
from .core.source_info import warn_at_user_line
from .core.abstract import ShapeDtypeStruct
from .core.trace import context as _trace_context
from .core.array import SingleDeviceSharding
from .interpreters import staging

logger = logging.getLogger("nbjax")

jit_p = Primitive("jit", multiple_results=True)
jit_p.is_call = True
jit_p.call_param = "jaxpr"
jit_p.device_operands = True  # (arrays on a GPU reach its executable without a copy)
# JAX prints the name before the jaxpr (and no backend).
jit_p.pp_params = lambda params: [("name", params["name"]), ("jaxpr", params["jaxpr"])]
# A jit equation's params: ``jaxpr``, ``name`` and ``backend`` (a target's name, or None for
# the configured default when it runs). An eager call that donates arguments (and only one:
# no transformation ever sees them) adds ``donated`` (the jaxpr's input positions given
# away) and ``reuse`` (those among them whose buffers nothing else refers to).


@jit_p.def_impl
def _jit_impl(*args, jaxpr, name, backend, donated=frozenset(), reuse=()):
    executable = compiler.compile(jaxpr, get_target(backend), name, donated)
    if reuse:
        return executable.run_reusing(args, reuse)
    return executable.run(*args)


CallRules(jit_p).register("abstract_eval", "batch", "jvp", "partial_eval", "transpose")


# --- the user-facing wrapper -------------------------------------------------------------

class JitWrapped:
    """``jit(f)``: call it like ``f``; it traces once per input signature.

    A call takes one of two paths.

    The general path (``_call``) works for every call, eager or under a transformation: split
    off the static arguments, flatten the pytree of the others, find the trace for their
    avals in ``traces`` (a ``TraceCache`` shared by every ``jit`` of the function: tracing on
    a miss, and explaining why when
    ``config.explain_cache_misses`` is on), then bind ``jit_p``. Under a transformation that
    binding is what lets vmap/grad/make_jaxpr see the call; eagerly, ``EvalTrace`` checks the
    operands, runs ``jit_p``'s abstract evaluation, and its impl looks the executable up in
    the compiler's cache, runs it and wraps each result as an Array.

    The fast path (``__call__``, then ``_FastCall``) is that same eager call with everything
    that cannot change between two calls of one signature done once. It applies when no
    transformation is running (the current trace is the ``EvalTrace``), there are no keyword
    arguments and no static arguments, and every argument is an Array, a NumPy array or a
    scalar (Python's, or NumPy's of a dtype nbjax keeps as it is). Then the pytree of
    arguments is a flat tuple whose structure the number of arguments fixes, so the signature
    is just the arguments' avals (for NumPy arrays their shape and dtype; for a Python scalar
    its type, for a NumPy one its dtype, which with x64 fix the aval), plus the
    two settings a call depends on (``enable_x64`` and the backend); there is no key, and the
    general path runs, while ``disable_jit``, ``debug_nans``, ``debug_infs`` or
    ``no_execution`` is on (``_fast_key``). ``_fast`` (this wrapper's, at most ``FAST_CALLS``
    signatures) maps that key to the signature's general-path key (``_last_key`` becomes it:
    a later retrace is explained against it) and its call: a ``_FastCall`` holding the
    executable, the closed-over constants as NumPy values and the output avals and tree (a
    call is one dict lookup, one ``run`` and wrapping the outputs), or where the target has
    one (``Executable.direct``: on the CPU, a program that is one small kernel with one
    output) a function handing the arguments as they are to the native code, which checks
    them and refuses those it cannot take, which the ``_FastCall`` then converts. A key is
    added after a general-path call of a cacheable trace, so the first call of a signature
    always takes the general path (and is the one that traces and compiles). A signature with
    scalars converts them to their avals' dtypes before the call (20 -> 2 us a call of a
    Python float). Anything else (a tracer, a list, a keyword) takes the general path:
    transformations of jitted functions, static arguments and retrace explanations behave
    exactly as without the fast path. ``slow_path_calls`` counts the general-path calls.

    Before all that, ``__call__`` tries the last call (``_last_call``): the last fast-path
    call whose signature has a target's ``checked_call`` (a direct call with no weakly typed
    argument), with the thread's current trace and ``config.generation`` when it was made.
    While both are the same (the same thread, no transformation, no option or user
    context changed since) and there are no keyword arguments, the call hands its arguments
    to that checked call with no key: it checks that each is of the signature (the key's
    avals are then the same, for a NumPy array's aval is never weak) and makes the call, or
    refuses (None), and the call then goes on as above. A general-path call (which sets
    ``_last_key`` to another signature), ``observe``, ``clear_cache`` and ``clear_caches``
    forget the last call; donating signatures never have one.

    Donation (``donate_argnums``/``donate_argnames``, as JAX's) applies to eager calls
    (``_donation``; on the fast path ``_FastDonatingCall``): every array leaf of a donated
    argument that an output can take (``compiler.donation.match``) is deleted by the call,
    and the target may write an output into its buffer. Under a transformation (vmap,
    grad, an enclosing jit) nothing is donated: the arguments stay alive, as values a
    transformation may still need. Nor is anything donated by an observed call (below): its
    observers may read the inputs again (the notebook's views run the jaxpr on them).

    With observers (``observe``), an eager call takes a third path, ``_observed_call``: the
    general one, with the compilation done and timed before the run, the run timed (until its
    results are ready), and every observer told.

    ``backend`` names the target the function compiles for (None: ``config.jit_backend`` at
    the time of each call).
    """

    def __init__(self, fun, static_argnums=None, static_argnames=None, donate_argnums=None,
                 backend=None, donate_argnames=None):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums, self.static_argnames = _resolve_argnums(
            fun, static_argnums, static_argnames, "static")
        self.donate_argnums, self.donate_argnames = _resolve_argnums(
            fun, donate_argnums, donate_argnames, "donate")
        _check_disjoint(self.static_argnums, self.static_argnames, self.donate_argnums,
                        self.donate_argnames)
        self._donates = bool(self.donate_argnums or self.donate_argnames)
        self._unusable_warned = set()  # (signature, donated positions) warned of
        if backend is not None and backend not in target_names():
            raise ValueError(f"unknown backend {backend!r}; known backends: {target_names()}")
        self.backend = backend
        self.observers = []
        self.name = getattr(fun, "__name__", type(fun).__name__)
        self._owner = traces.owner(fun, self, (self.static_argnums, self.static_argnames))
        self._fast = {}
        _wrappers.add(self)
        self._has_static = bool(self.static_argnums or self.static_argnames)
        self._last_key = None
        self._last_call = _NO_LAST_CALL
        self.trace_count = 0
        self.slow_path_calls = 0
        self.inline = self.keep_unused = False  # (``jit``'s options)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        trace, generation, last = self._last_call
        now = config.generation  # (read before the key: a later change dates the call)
        if trace is _trace_context.trace and generation == now and not kwargs:
            out = last(*args)
            if out is not None:
                return out
        if kwargs or self._has_static or self.observers or _every_call_observers:
            return self._dispatch(args, kwargs)
        key = _fast_key(args, self.backend)
        found = self._fast.get(key)
        if found is None:
            return self._dispatch(args, kwargs, key)
        self._last_key, call, checked = found  # (a later cache miss is explained against it)
        # (the trace read again: a thread's is None until its first call makes it, and
        # None would let other threads' calls, under their own user contexts, match)
        self._last_call = _NO_LAST_CALL if checked is None else (
            _trace_context.trace, now, checked)
        return call(args)

    def _dispatch(self, args, kwargs, fast_key=None):
        """A call the fast path did not make; ``fast_key``: its key if it is eligible."""
        if _config_values["disable_jit"]:
            return self.fun(*args, **kwargs)
        if type(current_trace()) is not EvalTrace:
            return self.fun(*args, **kwargs) if self.inline else self._call(args, kwargs)
        if self.observers or _every_call_observers:
            return self._observed_call(args, kwargs)
        return self._call(args, kwargs, fast_key)

    def _call(self, args, kwargs, fast_key=None):
        """The general path; ``fast_key`` (None if the call is not eligible) gets a fast-path
        entry afterwards."""
        self.slow_path_calls += 1
        entry, leaves, call = self._lookup(args, kwargs, as_array)
        donating = self._donation(entry, leaves, call) \
            if type(current_trace()) is EvalTrace else None
        outs = self._bind(entry, leaves, donating)
        scalars = fast_key is not None and _scalar_signature(fast_key)
        if fast_key is not None and entry.cacheable and not (scalars and donating):
            if len(self._fast) >= FAST_CALLS:
                del self._fast[next(iter(self._fast))]  # the oldest signature
            self._fast[fast_key] = self._last_key, *_fast_call(entry, self.name, fast_key[1],
                                                               donating, scalars)
        return entry.out_tree.unflatten(outs)

    def _bind(self, entry, leaves, donating=None):
        """Bind ``jit_p`` on the closed-over values and ``leaves``; ``donating`` (an eager
        call's ``Donation``, or None) passes the donated inputs, and its arrays are
        deleted once the call is done, or has failed (as JAX deletes them when it
        dispatches the call)."""
        if donating is None:
            return jit_p.bind(*entry.consts, *leaves, jaxpr=entry.jaxpr, name=self.name,
                              backend=self.backend)
        try:
            return jit_p.bind(*entry.consts, *leaves, jaxpr=entry.jaxpr, name=self.name,
                              backend=self.backend, donated=donating.donated,
                              reuse=donating.reuse)
        finally:  # (a call that failed may have overwritten them already)
            for array in donating.arrays:
                array.delete()

    def _donated_leaves(self, call):
        """The positions among ``call``'s argument leaves of those donated: every leaf of a
        positional argument in ``donate_argnums`` or a keyword one in ``donate_argnames``."""
        proxy_args, proxy_kwargs = call.in_tree.unflatten(list(range(len(call.leaves))))
        static = {i for i, _ in call.static}
        positions = [i for i in range(call.nargs) if i not in static]
        donated = [a for i, a in zip(positions, proxy_args) if i in self.donate_argnums]
        donated += [a for k, a in proxy_kwargs.items() if k in self.donate_argnames]
        return {leaf for a in donated for leaf in pytree.tree_leaves(a)}

    def _donation(self, entry, leaves, call):
        """The ``Donation`` of an eager call (None when it donates nothing). The donated
        leaves an output can take (``compiler.donation.match``) are given; ValueError, as
        JAX's, when one of them is also passed again in the same call; the target may reuse
        the buffers of those nothing else refers to (``Target.private``). The donated
        leaves no output can take make the warning JAX gives, once per signature."""
        donated_leaves = self._donated_leaves(call) if self._donates else ()
        if not donated_leaves:
            return None
        pairs = _donation_pairs(entry, donated_leaves)
        self._warn_unusable(entry.jaxpr, _unusable(entry, donated_leaves, pairs))
        return _donation(entry, leaves, donated_leaves, pairs, self.backend, self.name)

    def _warn_unusable(self, jaxpr, unusable):
        """JAX's warning for donated inputs no output can take, once per signature."""
        key = (self._last_key, frozenset(unusable))
        if key in self._unusable_warned:
            return
        self._unusable_warned.add(key)
        _warn_unusable(jaxpr, unusable)

    def observe(self, observer, on_phase=None):
        """Call ``observer(call)`` after every eager call (none under a transformation: there
        are no values to show) with a ``JitCall`` describing it, and ``on_phase(phase)``
        (if given) as a slow phase of such a call starts: ``"tracing"`` (a new signature)
        and ``"compiling"`` (its first run for the target), so that a view can say what is
        taking the time. Returns a function that stops the observation."""
        self.observers.append((observer, on_phase))
        self._last_call = _NO_LAST_CALL  # (observed calls take their own path)

        def stop():
            if (observer, on_phase) in self.observers:
                self.observers.remove((observer, on_phase))
        return stop

    def _tell_phase(self, phase):
        for _, on_phase in list(self.observers):
            if on_phase is not None:
                on_phase(phase)

    def _observed_call(self, args, kwargs):
        self.slow_path_calls += 1
        started, traces_before = time.perf_counter(), self.trace_count
        entry, leaves, _ = self._lookup(args, kwargs, as_array,
                                        before_tracing=lambda: self._tell_phase("tracing"))
        target = get_target(self.backend)
        compiled_before = target.name in entry.jaxpr.executables
        if not compiled_before:
            self._tell_phase("compiling")
        t0 = time.perf_counter()
        executable = compiler.compile(entry.jaxpr, target, self.name)
        if executable.timing_supported and executable.step_times is None:
            executable.enable_timing()
        t1 = time.perf_counter()
        outs = self._bind(entry, leaves)
        for out in outs:
            out.block_until_ready()
        seconds = time.perf_counter() - t1
        step_seconds = {}
        if executable.step_times:
            step_seconds = {n: samples[-1] for n, samples in executable.step_times.items()}
            executable.step_times.clear()
        call = JitCall(self, self._last_key, entry.jaxpr, executable, entry.trace_seconds,
                       None if compiled_before else t1 - t0, seconds, step_seconds,
                       args, kwargs, [*entry.consts, *leaves],
                       started, self.trace_count != traces_before, t1)
        for observer in [o for o, _ in self.observers] + _every_call_observers:
            observer(call)
        return entry.out_tree.unflatten(outs)

    def trace(self, *args, **kwargs):
        """Trace for arguments like these (arrays, scalars or ``ShapeDtypeStruct``s): the
        ahead-of-time API's first stage, as ``jax.jit(f).trace``. Returns a ``Traced``."""
        entry, _, call = self._lookup(args, kwargs, _as_abstract)
        donated = self._donated_leaves(call) if self._donates else frozenset()
        return Traced(entry, call.in_tree, self.name, self.backend, donated)

    def lower(self, *args, **kwargs):
        """``trace(*args, **kwargs).lower()``, as ``jax.jit(f).lower``: a ``Lowered``."""
        return self.trace(*args, **kwargs).lower()

    def _lookup(self, args, kwargs, as_leaf, before_tracing=None):
        """(trace cache entry, the argument leaves made values by ``as_leaf``, the FlatCall);
        ``before_tracing()`` is called when the function is about to be traced."""
        nargs = len(args)
        call = FlatCall(self.fun, args, kwargs,
                        {operator.index(i) % nargs for i in self.static_argnums
                         if -nargs <= i < nargs}, self.static_argnames)
        call.check_hashable(self.name)
        leaves = [as_leaf(x) for x in call.leaves]
        avals = tuple(abstractify(x) for x in leaves)
        key = (call.in_tree, avals, call.static_key, call.static_kw_key, config.enable_x64,
               user_context_values())
        entry = traces.get(self._owner, key)
        if entry is None:
            if config.no_tracing:
                where = staging.describe(self.fun, "jit").removeprefix("jit of ")
                raise RuntimeError(f"re-tracing function {where} for `jit`, but 'no_tracing' "
                                   "is set")
            self._explain_miss(key, args)
            if before_tracing is not None:
                before_tracing()
            self.trace_count += 1
            with compiler.collector_paused():  # (tracing makes objects that live on, too)
                entry = TracedCall(call, avals, staging.describe(self.fun, "jit"))
            if entry.cacheable:
                traces.put(self._owner, key, entry)
        self._last_key, self._last_call = key, _NO_LAST_CALL
        return entry, leaves, call

    def _explain_miss(self, key, args):
        if not config.explain_cache_misses or self._last_key is None:
            return
        logger.warning("TRACING CACHE MISS for %s: %s", self.name,
                       explain_difference(self._last_key, key))

    def clear_cache(self):
        """Forget this function's traces (for these static options) and their code."""
        traces.clear(self._owner)
        self._fast.clear()
        self._last_key, self._last_call = None, _NO_LAST_CALL


@dataclass
class Donation:
    """What an eager call donates: ``donated``, the jaxpr's input positions given away
    (those an output can take), ``reuse``, those whose buffers nothing else refers to,
    ``arrays``, the Arrays the call deletes, and ``given``, their positions among the
    argument leaves."""
    donated: frozenset
    reuse: tuple
    arrays: list
    given: list


def _donation_pairs(entry, donated_leaves):
    """{jaxpr input: output} for the donated argument leaves an output can take
    (``compiler.donation.match``; the closed-over values come first)."""
    n, jaxpr = len(entry.consts), entry.jaxpr
    return donation.match(jaxpr.in_avals, {n + k for k in donated_leaves}, jaxpr.out_avals)


def _unusable(entry, donated_leaves, pairs):
    n = len(entry.consts)
    return {n + k for k in donated_leaves} - pairs.keys()


def _warn_unusable(jaxpr, unusable):
    """JAX's warning for donated inputs (jaxpr input positions) no output can take."""
    if not unusable:
        return
    avals = ", ".join(jaxpr.in_avals[i].str_short() for i in sorted(unusable))
    warn_at_user_line(f"Some donated buffers were not usable: {avals}.\nSee an "
                      "explanation at https://docs.jax.dev/en/latest/faq.html"
                      "#buffer-donation.")


def _donation(entry, leaves, donated_leaves, pairs, backend, name):
    """The ``Donation`` of a call of ``entry``'s program on the argument ``leaves``, of
    which those at ``donated_leaves`` are donated (``pairs``: ``_donation_pairs``). The
    donated leaves an output can take are given; ValueError, as JAX's, when one of them is
    also passed again in the same call; the target may reuse the buffers of those nothing
    else refers to (``Target.private``)."""
    n = len(entry.consts)
    # (an array the function also closes over stays: its trace keeps using it)
    given = [k for k in sorted(donated_leaves) if n + k in pairs
             and isinstance(leaves[k], Array) and not any(c is leaves[k] for c in entry.consts)]
    _check_given_once(leaves, given, name)
    target = get_target(backend)
    debugging = _config_values["debug_nans"] or _config_values["debug_infs"]
    reuse = () if debugging else tuple(n + k for k in given if target.private(leaves[k]))
    return Donation(frozenset(pairs), reuse, [leaves[k] for k in given], given)


def _check_given_once(leaves, given, name):
    """ValueError (JAX's words) if an argument leaf at ``given`` is passed again."""
    for k in given:
        if sum(x is leaves[k] for x in leaves) > 1:
            raise ValueError(
                f"Attempt to use a buffer that was previously donated in the same call "
                f"(argument leaf {k} of {name} is donated and passed again). Toy example for "
                "this bug: `f(donate(a), a)`.")


@dataclass
class JitCall:
    """What an observer of a jitted function learns of one eager call: the function, its
    cache key (``signature``: argument tree, avals, static arguments, ``enable_x64``, the
    values of the user contexts), the
    traced jaxpr, the executable that ran, the seconds tracing took (when it was traced),
    compiling took (None: compiled before this call) and running took (until the results were
    ready), each plan step's seconds (``{step index: seconds}``, on targets that time their
    steps), the arguments, and the values the jaxpr runs on (``inputs``: the values the
    function closes over, then the argument leaves); when the call started and its program
    started running (``time.perf_counter()``), and whether this call traced the function."""
    function: object
    signature: tuple
    jaxpr: object
    executable: object
    trace_seconds: float
    compile_seconds: float
    seconds: float
    step_seconds: dict
    args: tuple
    kwargs: dict
    inputs: list
    started: float
    traced: bool
    run_started: float

    def describe_signature(self):
        """The signature in words: the argument types, then the static arguments by their
        parameter names (``n_steps=2000``; a function by its name)."""
        _, avals, static, static_kw, _, _ = self.signature
        try:
            names = list(inspect.signature(self.function.fun).parameters)
        except (TypeError, ValueError):
            names = []
        parts = [a.str_short(short_dtypes=True) for a in avals]
        parts += [f"{names[i] if i < len(names) else f'arg{i}'}={_short_repr(v.value)}"
                  for i, v in static]
        parts += [f"{k}={_short_repr(v.value)}" for k, v in static_kw]
        return ", ".join(parts) or "no arguments"


def _short_repr(value):
    """A static argument in a signature: a function or class by its name, else its repr."""
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return repr(value)


# --- the trace cache ----------------------------------------------------------------------

class TraceCache:
    """The traces of every jitted function, kept for reuse, with their compiled code.

    Entries are filed under an owner, ``(function, static_argnums, static_argnames)``, then
    the call's signature, as JAX's jit caches by the function's identity and the arguments'
    types: ``jit(f)`` made again for the same ``f`` and options (a notebook cell re-run that
    re-wraps a function) finds ``f``'s traces, and with them their executables (which live
    on the traced jaxpr, see ``nbjax.compiler``), so it neither traces nor compiles.

    Memory is bounded two ways. The function is held by a weak reference: when it is
    garbage, its entries go (like JAX's ``weakref_lru_cache``). And at most ``maxsize``
    traces are kept in all, the least recently used dropped first.
    """

    def __init__(self, maxsize):
        self.maxsize = maxsize
        self._entries = collections.OrderedDict()  # (owner, signature) -> calls.Traced
        self._lock = threading.Lock()
        # Functions that died: their references, appended by the weakref callback and purged
        # at once if the lock is free, else by the next get or put (the callback may run in
        # any allocation, even one of ours under the lock, as for WeakKeyDictionary).
        self._dead = []

    def owner(self, fun, wrapper, options=()):
        """What a wrapper's traces are filed under: ``(a weak reference to fun, options)``,
        the reference being to the ``wrapper`` (whose traces then are its own) when ``fun``
        cannot be weakly referenced or hashed; ``options``: those that change a trace."""
        try:
            ref = weakref.ref(fun, self._died)
            hash(ref)
        except TypeError:
            ref = weakref.ref(wrapper, self._died)
        return ref, options

    def get(self, owner, signature):
        key = (owner, signature)
        with self._lock:
            self._purge()
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, owner, signature, entry):
        with self._lock:
            self._purge()
            self._entries[owner, signature] = entry
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def clear(self, owner):
        """Drop ``owner``'s entries."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == owner]:
                del self._entries[key]

    def clear_all(self):
        with self._lock:
            self._entries.clear()

    def __len__(self):
        return len(self._entries)

    def _died(self, ref):
        self._dead.append(ref)
        if self._lock.acquire(blocking=False):
            try:
                self._purge()
            finally:
                self._lock.release()

    def _purge(self):
        if not self._dead:
            return
        dead = []
        while self._dead:
            dead.append(self._dead.pop())
        # Each reference reports itself, so identity finds its keys (a dead reference that
        # was never hashed cannot be hashed any more).
        ids = {id(ref) for ref in dead}
        for key in [k for k in self._entries if id(k[0][0]) in ids]:
            del self._entries[key]


TRACE_CACHE_SIZE = 512  # traces of all jitted functions together
FAST_CALLS = 64         # fast-path signatures of one jit wrapper
traces = TraceCache(TRACE_CACHE_SIZE)
_wrappers = weakref.WeakSet()  # every JitWrapped alive, for clear_caches


def clear_caches():
    """Forget every jitted function's traces and fast-path entries, and with them their
    compiled code (``jax.clear_caches``): the next call of each traces and compiles again.
    The on-disk cache of machine code is kept, as JAX keeps its persistent cache."""
    traces.clear_all()
    for wrapper in list(_wrappers):
        wrapper._fast.clear()
        wrapper._last_key, wrapper._last_call = None, _NO_LAST_CALL


_config_values = config._values  # read directly on the fast path: two dict reads per call


def _fast_key(args, backend):
    """The fast path's key of an all-array call (see ``JitWrapped``), None for other calls:
    under a transformation, with ``disable_jit``, while results are checked for NaNs or
    infs (``debug_nans``) or while nothing may run (``no_execution``): the general path
    sees to those."""
    if (_config_values["disable_jit"] or _config_values["debug_nans"]
            or _config_values["debug_infs"] or _config_values["no_execution"]
            or type(current_trace()) is not EvalTrace):
        return None
    x64 = _config_values["enable_x64"]
    key = [x64, backend or _config_values["jit_backend"]]
    if user_contexts:
        key.append(user_context_values())
    for a in args:
        kind = type(a)
        if kind is Array:
            key.append(a._aval)
        elif kind is np.ndarray:
            key.append((a.shape, a.dtype))
        elif kind in _PYTHON_SCALARS and (kind is not int or _INT_RANGE[x64][0] <= a
                                          <= _INT_RANGE[x64][1]):
            key.append(kind)  # (its aval: the weakly typed default type of its kind)
        elif isinstance(a, np.generic) and dtypes.canonicalize(a.dtype) == a.dtype:
            key.append(a.dtype)
        else:
            return None
        # (ShapedArrays, tuples, types and dtypes never equal one another, so arguments of
        # different kinds never collide.)
    return tuple(key)


_PYTHON_SCALARS = frozenset((bool, int, float, complex))
# The Python ints the default int holds, without x64 and with it (others: OverflowError)
_INT_RANGE = {x64: (int(np.iinfo(t).min), int(np.iinfo(t).max))
              for x64, t in ((False, np.int32), (True, np.int64))}


def _scalar_signature(fast_key):
    """Whether the fast-path key ``fast_key`` has a scalar argument (a Python or NumPy
    scalar, which a call must convert to its aval's dtype)."""
    return any(isinstance(k, (type, np.dtype)) for k in fast_key)


class _FastCall:
    """A fast-path entry: run the executable of one signature on the arguments' buffers.

    This is exactly what binding ``jit_p`` eagerly does on a cache hit (see ``JitWrapped``):
    ``to_operand`` of each operand (closed-over constants first), the executable's ``run``,
    and ``Array.wrap`` of each output with the aval abstract evaluation would return (the
    jaxpr's output avals, which cannot change for one signature).
    """

    __slots__ = ("run", "consts", "out_avals", "out_tree")

    def __init__(self, entry, executable):
        self.run = executable.run
        self.consts = [to_numpy(c) for c in entry.consts]
        self.out_avals = entry.jaxpr.out_avals
        self.out_tree = None if entry.out_tree.is_leaf() else entry.out_tree

    def __call__(self, args):
        return self._wrap(self.run(*self.consts, *map(to_operand, args)))

    def _wrap(self, outs):
        if self.out_tree is None:  # a function returning one array
            return Array.wrap(outs[0], self.out_avals[0])
        return self.out_tree.unflatten(map(Array.wrap, outs, self.out_avals))


class _FastDonatingCall(_FastCall):
    """The fast-path entry of a signature whose calls donate arguments: what ``_bind`` does
    with a ``Donation``. Which arguments are given (``given``: positions) and the program
    compiled for them are the signature's; whether each buffer can be reused is asked at
    every call (``private``: the target's test)."""

    __slots__ = ("given", "run_reusing", "private", "name", "closed_over")

    def __init__(self, entry, executable, donating, private, name):
        super().__init__(entry, executable)
        self.run_reusing, self.given = executable.run_reusing, donating.given
        self.private, self.name, self.closed_over = private, name, entry.consts

    def __call__(self, args):
        given = [k for k in self.given if not any(args[k] is c for c in self.closed_over)]
        _check_given_once(args, given, self.name)
        n = len(self.consts)
        reuse = tuple(n + k for k in given if self.private(args[k]))
        try:
            operands = (*self.consts, *map(to_operand, args))
            return self._wrap(self.run_reusing(operands, reuse) if reuse else
                              self.run(*operands))
        finally:
            for k in given:
                args[k].delete()


def _fast_call(entry, name, backend, donating, scalars=False):
    """The fast-path calls of a signature (``donating``: what its calls donate, or None;
    ``scalars``: whether it has scalar arguments): ``(call, checked)``: a ``_FastCall``
    (converting scalars), or the target's ``direct`` call where it has one (which falls
    back on the ``_FastCall``), and for the last-call shortcut the target's
    ``checked_call``, or None when there is none or an input is weakly typed or a scalar
    (which a checked call refuses)."""
    target = get_target(backend)
    if donating is not None:
        executable = compiler.compile(entry.jaxpr, target, name, donating.donated)
        return _FastDonatingCall(entry, executable, donating, target.private, name), None
    executable = compiler.compile(entry.jaxpr, target, name)
    fast = _FastCall(entry, executable)
    direct = None if fast.out_tree is not None else \
        executable.direct(fast.consts, fast.out_avals[0], fast)
    if direct is None:
        call = fast
    elif not scalars and not any(a.weak_type for a in entry.jaxpr.in_avals[len(entry.consts):]):
        return direct, executable.checked_call(fast.consts, fast.out_avals[0])
    else:
        call = direct
    return (_converting_scalars(call, entry) if scalars else call), None


def _converting_scalars(call, entry):
    """``call`` for a signature with scalar arguments: each made a NumPy array of its aval's
    dtype first (a Python float is float64 to NumPy)."""
    dtypes_in = [a.dtype for a in entry.jaxpr.in_avals[len(entry.consts):]]

    def converting(args):
        return call([a if type(a) in (Array, np.ndarray) else np.asarray(a, d)
                     for a, d in zip(args, dtypes_in)])
    return converting


_NO_LAST_CALL = (object(), None, None)  # (a trace no thread has: the shortcut never applies)


# --- the ahead-of-time API ----------------------------------------------------------------

@dataclass(frozen=True)
class ArgInfo:
    """An argument of a traced program (``Traced.args_info``): its type, and whether calls
    give its buffer away (``donate_argnums``)."""
    aval: ShapedArray
    donated: bool

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)


class Traced:
    """``jit(f).trace(*args)``: the traced program (as ``jax.stages.Traced``).

    ``jaxpr`` is what ``jit`` compiles (values the function closes over are its leading
    inputs); ``in_avals``/``out_avals`` the types of the arguments' and results' leaves,
    ``in_tree``/``out_tree`` their pytrees. ``donated_leaves``: the positions of the
    argument leaves that calls of the compiled program give away
    (``donate_argnums``/``donate_argnames``). ``lower()`` goes on to a ``Lowered``.
    """

    def __init__(self, entry, in_tree, name, backend=None, donated_leaves=frozenset()):
        self._entry = entry
        self.name = self.fun_name = name
        self.backend = backend
        self.donated_leaves = frozenset(donated_leaves)
        self.jaxpr = entry.jaxpr
        self.in_tree = in_tree
        self.out_tree = entry.out_tree
        n_consts = len(entry.consts)
        self.in_avals = self.jaxpr.in_avals[n_consts:]
        self.out_avals = self.jaxpr.out_avals

    @property
    def args_info(self):
        """The pytree ``(args, kwargs)`` of the non-static arguments, as ``ArgInfo``s."""
        return self.in_tree.unflatten([ArgInfo(a, i in self.donated_leaves)
                                       for i, a in enumerate(self.in_avals)])

    @property
    def out_info(self):
        """The results' pytree of ``ShapeDtypeStruct``s."""
        return self.out_tree.unflatten([ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                                        for a in self.out_avals])

    def lower(self):
        """The ``Lowered`` program; a program that cannot be compiled (forward mode through
        a custom_vjp) raises here, as in JAX, where lowering is what fails."""
        compiler.refuse_uncompilable(self.jaxpr)
        return Lowered(self._entry, self.in_tree, self.name, self.backend, self.donated_leaves)

    def __repr__(self):
        return f"Traced({self.name})"


class Lowered(Traced):
    """``jit(f).lower(*args)``: the traced program, before compilation (as ``jax.stages``):
    what ``Traced`` knows, and ``optimized`` and ``rewrites``, what the compiler's passes
    make of the program (inlining, hoisting out of loops, folding, simplification, CSE,
    DCE), which ``as_text()`` prints.
    """

    def lower(self):
        return self

    # What the compiler's passes make of the program, computed when asked for: compiling
    # a program the disk cache holds runs no pass.
    optimized = property(lambda self: compiler.optimized(self.jaxpr)[0])
    rewrites = property(lambda self: compiler.optimized(self.jaxpr)[1])

    def as_text(self):
        """The optimised jaxpr, followed by the rewrites that made it."""
        lines = [str(self.optimized)]
        if self.rewrites:
            lines += ["", f"rewrites ({len(self.rewrites)}):"] + [f"  {r}" for r in self.rewrites]
        return "\n".join(lines)

    def compile(self, backend=None):
        """Compile for ``backend`` (default: the jitted function's, else
        ``config.jit_backend``). The executable is the one jitted calls use (the compiler
        caches it), so compiling twice is free."""
        target = get_target(backend or self.backend)
        pairs = _donation_pairs(self._entry, self.donated_leaves)
        if self.donated_leaves:
            _warn_unusable(self.jaxpr, _unusable(self._entry, self.donated_leaves, pairs))
        executable = compiler.compile(self.jaxpr, target, self.name, frozenset(pairs))
        return Compiled(self, executable, target.name, pairs)

    def __repr__(self):
        return f"Lowered({self.name})"


class Compiled:
    """``jit(f).lower(*args).compile()``: an executable for one signature (as ``jax.stages``).

    Call it with the non-static arguments of the signature it was lowered for (anything else
    raises TypeError, as JAX's Compiled does); a call gives away the donated arguments as
    the jitted function's eager calls do (``_donation``). ``as_text()``, ``cost_analysis()`` and
    ``fusion_report()`` describe what the compiler made (``nbjax.compiler.report``);
    ``compile_times`` gives the seconds of each phase, tracing included.
    """

    def __init__(self, lowered, executable, backend, donation_pairs=None):
        self.lowered = lowered
        self._pairs = donation_pairs or {}
        self.executable = executable
        self.backend = backend
        self.name = lowered.name
        self.in_tree, self.out_tree = lowered.in_tree, lowered.out_tree
        self.in_avals, self.out_avals = lowered.in_avals, lowered.out_avals

    args_info = property(lambda self: self.lowered.args_info)
    out_info = property(lambda self: self.lowered.out_info)

    @property
    def compile_times(self):
        """Seconds per phase: ``trace`` then the backend's (passes, fusion, codegen, LLVM...)."""
        return {"trace": self.lowered._entry.trace_seconds, **self.executable.compile_times}

    def as_text(self):
        return report.compiled_text(self.executable)

    def fusion_report(self):
        return report.fusion_report(self.executable)

    def cost_analysis(self, per_step=False):
        """Totals as JAX's ``cost_analysis()`` (``flops``, ``transcendentals``, ``bytes
        accessed``, plus ``bytes read`` and ``bytes written``); with ``per_step=True`` a list
        with one such dict per step (kernel, library call or reference step) and its detail.
        The conventions are XLA's: see ``nbjax.compiler.report``."""
        costs = report.step_costs(self.executable)
        return [c.as_dict() for c in costs] if per_step else report.total_cost(costs)

    def enable_timing(self, on=True):
        """Record each step's run time (``step_times``, shown by ``cost_analysis``); it also
        applies to jitted calls of this signature, which share the executable."""
        self.executable.enable_timing(on)

    @property
    def step_times(self):
        return self.executable.step_times

    def __call__(self, *args, **kwargs):
        leaves, tree = pytree.tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise TypeError(f"Function compiled with input pytree does not match the input "
                            f"pytree it was called with: compiled for {self.in_tree}, called "
                            f"with {tree}")
        avals = [get_aval(x) for x in leaves]
        mismatches = [f"argument leaf {i} compiled with {_describe(want)} and called with "
                      f"{_describe(got)}"
                      for i, (want, got) in enumerate(zip(self.in_avals, avals))
                      if (want.shape, want.dtype) != (got.shape, got.dtype)]
        if mismatches:
            raise TypeError("Argument types differ from the types for which this computation "
                            "was compiled. The mismatches are:\n" + "\n".join(mismatches))
        if any(isinstance(x, Tracer) for x in leaves):
            raise TypeError(f"a Compiled function runs on concrete arrays; call the jitted "
                            f"function instead of {self.name}'s Compiled object inside a "
                            "transformation")
        entry = self.lowered._entry
        donating = _donation(entry, leaves, self.lowered.donated_leaves, self._pairs,
                             self.backend, self.name) if self._pairs else None
        # (after asking whether a donated buffer is referred to elsewhere: these refer to it)
        operands = [*map(to_numpy, entry.consts), *map(to_operand, leaves)]
        if donating is None:
            outs = self.executable.run(*operands)
        else:
            try:
                outs = self.executable.run_reusing(operands, donating.reuse) \
                    if donating.reuse else self.executable.run(*operands)
            finally:  # (as an eager call: deleted once the call is done, or has failed)
                for array in donating.arrays:
                    array.delete()
        return self.out_tree.unflatten(map(Array.wrap, outs, self.out_avals))

    def __repr__(self):
        return f"Compiled({self.name}, backend={self.backend})"


_every_call_observers = []  # observers of every jitted function's eager calls


def observe_every_call(observer):
    """Call ``observer(call)`` after every eager call of every jitted function, as
    ``JitWrapped.observe`` does for one (``nbjax.profiler`` records them): meanwhile every
    eager call takes the observed path. Returns a function that stops the observation."""
    _every_call_observers.append(observer)
    config.changed()  # (the last-call shortcut decides again, and takes the observed path)

    def stop():
        if observer in _every_call_observers:
            _every_call_observers.remove(observer)
            config.changed()
    return stop


def explain_difference(old, new):
    """Why a call missed the cache: what changed between two cache keys, in words."""
    old_tree, old_avals, old_static, old_kw, old_x64, old_user = old
    new_tree, new_avals, new_static, new_kw, new_x64, new_user = new
    reasons = []
    if old_x64 != new_x64:
        reasons.append(f"enable_x64 changed from {old_x64} to {new_x64}")
    if old_user != new_user:
        reasons.append(f"a user context changed: values {old_user} became {new_user}")
    if old_tree != new_tree:
        reasons.append(f"the argument structure changed from {old_tree} to {new_tree}")
    else:
        for i, (a, b) in enumerate(zip(old_avals, new_avals)):
            if a != b:
                reasons.append(f"argument leaf {i} changed type from {_describe(a)} to "
                               f"{_describe(b)}")
    for (i, a), (j, b) in zip(old_static, new_static):
        if a != b:
            reasons.append(f"static argument {j} changed from {a!r} to {b!r}")
    if old_kw != new_kw:
        reasons.append(f"static keyword arguments changed from {old_kw} to {new_kw}")
    return "; ".join(reasons) or "no previous trace matched"


def _describe(aval):
    return aval.str_short() + (" (weak)" if aval.weak_type else "")


def _as_tuple(x):
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _signature(fun):
    """``fun``'s signature, or None for the few callables that have none (some builtins)."""
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _resolve_argnums(fun, argnums, argnames, kind):
    """``({kind}_argnums, {kind}_argnames)`` (``kind``: "static" or "donate") completed and
    checked against ``fun``'s signature, as ``jax.jit`` does: given only one of them, the
    other names the same positional-or-keyword parameters (so a static or donated argument
    is one however it is passed); a position or name the function cannot take raises
    ValueError."""
    nums, names = _as_tuple(argnums), _as_tuple(argnames)
    sig = _signature(fun)
    if sig is None:
        return nums, names
    if argnums is None or argnames is None:
        params = [(i, k) for i, (k, p) in enumerate(sig.parameters.items())
                  if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        if argnums is None:
            nums = tuple(i for i, k in params if k in names)
        else:
            names = tuple(k for i, k in params if i in nums)
    _check_argnums(sig, nums, kind)
    _check_argnames(sig, names, kind)
    return nums, names


def _check_disjoint(static_argnums, static_argnames, donate_argnums, donate_argnames):
    """A static argument cannot be donated (ValueError, JAX's words)."""
    both = set(static_argnames) & set(donate_argnames)
    if both:
        raise ValueError(f"static_argnames and donate_argnames cannot intersect. Argument "
                         f"names {both} appear in both static_argnames and donate_argnames")
    if set(static_argnums) & set(donate_argnums):
        raise ValueError(f"static_argnums and donate_argnums cannot intersect: "
                         f"{sorted(set(static_argnums) & set(donate_argnums))} appear in both")


def _check_argnums(sig, nums, kind):
    """Every static (donated) position exists (any does when the function takes
    ``*args``)."""
    kinds = [p.kind for p in sig.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds or not nums:
        return
    n = sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for k in kinds)
    if -min(nums) > n or max(nums) >= n:
        raise ValueError(f"Jitted function has {kind}_argnums={nums}, but only accepts {n} "
                         "positional arguments.")


def _check_argnames(sig, names, kind):
    """Every static (donated) name is a parameter that can be passed by keyword (any name
    can when the function takes ``**kwargs``, except a positional-only parameter's)."""
    params = sig.parameters
    positional_only = {k for k, p in params.items() if p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)} & set(names)
    if positional_only:
        raise ValueError(f"Jitted function has invalid argnames {positional_only} in "
                         f"{kind}_argnames. These are positional-only")
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = set(names) - {k for k, p in params.items() if p.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    if unknown:
        raise ValueError(f"Jitted function has invalid argnames {unknown} in {kind}_argnames. "
                         "Function does not take these args.")


def _as_abstract(x):
    """An argument leaf for ``lower``: ``ShapeDtypeStruct``s, ShapedArrays and NumPy arrays
    stand for their avals, all tracing needs (an Array made of a NumPy array would copy
    it: 2 ms for a transformer's parameters)."""
    if isinstance(x, (ShapedArray, ShapeDtypeStruct, np.ndarray)):
        return abstractify(x)
    return as_array(x)


def jit(fun=None, *, in_shardings=None, out_shardings=None, static_argnums=None,
        static_argnames=None, donate_argnums=None, donate_argnames=None, keep_unused=False,
        device=None, backend=None, inline=False, compiler_options=None):
    """Compile ``fun`` (``@jit``, ``jit(f, static_argnums=...)`` or, as a decorator with
    options, ``@jit(static_argnames=...)``), as ``jax.jit``; ``backend`` names the target
    (``"cpu"``, ``"gpu"``, ``"reference"``; default: ``config.jit_backend`` when called).
    Arguments in ``donate_argnums``/``donate_argnames`` are given to the call: see
    ``JitWrapped``. With ``inline``, a call under a transformation or inside another
    traced function is ``fun``'s own equations, not one ``jit`` equation.

    JAX's other options are taken as far as one device per array allows: ``device`` (as
    JAX, deprecated: it picks the backend of its platform), shardings that are
    ``SingleDeviceSharding``s (``_placement_backend``), ``keep_unused`` (nbjax never drops
    an unused argument); ``compiler_options`` are XLA's, which nbjax has none of."""
    options = dict(in_shardings=in_shardings, out_shardings=out_shardings,
                   static_argnums=static_argnums, static_argnames=static_argnames,
                   donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                   keep_unused=keep_unused, device=device, backend=backend, inline=inline,
                   compiler_options=compiler_options)
    if fun is None:
        return functools.partial(jit, **options)
    if not callable(fun):
        raise TypeError(f"jit expects a callable, got {type(fun).__name__}")
    if compiler_options:
        raise ValueError(f"No such compile option: {next(iter(compiler_options))!r} (nbjax's "
                         "compiler takes none of XLA's options)")
    backend = _placement_backend(device, backend, in_shardings, out_shardings)
    wrapped = JitWrapped(fun, static_argnums, static_argnames, donate_argnums, backend,
                         donate_argnames)
    wrapped.inline, wrapped.keep_unused = bool(inline), bool(keep_unused)
    return wrapped


def _placement_backend(device, backend, in_shardings, out_shardings):
    """The backend to compile for, given JAX's placement options: ``device`` picks its
    platform's (deprecated, as in JAX; a GPU's results are on the first GPU, where the gpu
    backend runs), shardings must each lay an array whole on that platform's default
    device (nbjax has no other sharding; ``None`` leaves say nothing)."""
    if device is not None:
        if backend is not None:
            raise ValueError("can't specify both a device and a backend for jit, got "
                             f"device={device!r} and backend={backend!r}")
        if in_shardings is not None or out_shardings is not None:
            raise ValueError("jit does not support the device argument together with "
                             "in_shardings or out_shardings")
        warnings.warn("backend and device argument on jit is deprecated. You can use "
                      "`nbjax.device_put(..., nbjax.local_devices(backend=\"cpu\")[0])` on "
                      "the inputs to the jitted function to get the same behavior.",
                      DeprecationWarning, stacklevel=3)
        backend = _platform_backend(device)
    for name, tree in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
        for sharding in pytree.tree_leaves(tree):
            if not isinstance(sharding, SingleDeviceSharding):
                raise TypeError(f"{name} leaves must be shardings of one device or None, got "
                                f"{sharding!r}: nbjax has no other sharding")
            backend = backend or _platform_backend(next(iter(sharding.device_set)))
    return backend


def _platform_backend(device):
    """The backend running on ``device``: the cpu's for any CPU device (they share the
    host's memory), the gpu's for the first GPU only."""
    if device.platform == "cpu":
        return "cpu"
    if device.platform == "gpu" and device.id == 0:
        return "gpu"
    raise NotImplementedError(f"jit runs programs on the CPU or the first GPU, not on "
                              f"{device!r}: device_put the inputs there and call a function "
                              "jitted for it")

"""Global settings, read and written as JAX's are: ``nbjax.config.update("enable_x64", True)``."""

import contextlib
import itertools
import os
import threading


class Config:
    """A small option store; options are attributes (``config.enable_x64``)."""

    _defaults = {
        "enable_x64": os.environ.get("NBJAX_ENABLE_X64", "0").lower() in ("1", "true"),
        "explain_cache_misses": False,
        # jit(f)(x) calls f(x) directly, op by op (nbjax.disable_jit()).
        "disable_jit": False,
        # Which backend executes jitted functions: "cpu" (our llvmlite compiler) or
        # "reference" (the NumPy interpreter that defines the semantics).
        "jit_backend": os.environ.get("NBJAX_JIT_BACKEND", "cpu"),
        # The CPU the cpu backend compiles for: "host", or a CPU name LLVM knows
        # ("x86-64-v3", "znver3", ...), to inspect or test the code made for another CPU.
        "cpu_target": os.environ.get("NBJAX_CPU_TARGET", "host"),
        # Raise FloatingPointError when an eager op or a jitted call returns a NaN (an inf).
        "debug_nans": False,
        "debug_infs": False,
        # Log (WARNING, logger "nbjax.compiler") each compilation of a jaxpr.
        "log_compiles": False,
        # "standard" (JAX's promotion lattice) or "strict" (no implicit promotion).
        "numpy_dtype_promotion": "standard",
        # Broadcasting operands of different ranks in jnp: "allow", "warn" or "raise".
        "numpy_rank_promotion": "allow",
        # Raise RuntimeError when jit traces a function (no_tracing) or when anything runs
        # (no_execution): to check that a loop reuses its compiled code, or only stages.
        "no_tracing": False,
        "no_execution": False,
        # The device arrays and jitted calls go to by default (None: the first CPU device).
        "default_device": None,
        # The PRNG implementation of keys made without ``impl=`` and of raw keys:
        # "threefry2x32", "rbg" or "unsafe_rbg" (nbjax.random.impls).
        "default_prng_impl": "threefry2x32",
        # Flags JAX has that nbjax accepts without effect; each context manager says why.
        "enable_checks": False,
        "check_tracer_leaks": False,
        "default_matmul_precision": None,
        "transfer_guard": None,
        "transfer_guard_host_to_device": None,
        "transfer_guard_device_to_device": None,
        "transfer_guard_device_to_host": None,
        "threefry_partitionable": True,
        "enable_custom_prng": False,
        "legacy_prng_key": "allow",
        "debug_key_reuse": False,
        "allow_f16_reductions": False,
        "softmax_custom_jvp": False,
        "jax2tf_associative_scan_reductions": False,
        "remove_size_one_mesh_axis_from_type": False,
        "array_garbage_collection_guard": None,
        "thread_guard": False,
        "auto_pcast": False,
    }

    def __init__(self):
        self._values = dict(self._defaults)
        # Each option is an attribute too: tracing reads some for every equation, and an
        # attribute found only by ``__getattr__`` costs a failed lookup first (0.5 us).
        self.__dict__.update(self._values)
        # A number that changes (to one never used before) whenever an option or the value
        # of a user context may have changed: what was decided under the settings of one
        # generation holds while it stays (jit's last-call shortcut checks this alone).
        self.generation = next(_generations)

    def update(self, name, value):
        """Set an option; ``jax_``-prefixed names are accepted as in JAX."""
        key = name[4:] if name.startswith("jax_") else name
        if key not in self._values:
            raise AttributeError(f"unknown nbjax option {name!r}; known: {sorted(self._values)}")
        self._values[key] = self.__dict__[key] = value
        self.changed()

    def changed(self):
        """Start a new ``generation`` (after the change: a decision taken in between is
        then dated by the old one). ``next`` on the counter is atomic, so two threads
        changing settings at once still each make a new number."""
        self.generation = next(_generations)

    def read(self, name):
        return self._values[name[4:] if name.startswith("jax_") else name]

    def __getattr__(self, name):  # (``jax_``-prefixed names)
        try:
            return self.__dict__["_values"][name[4:] if name.startswith("jax_") else name]
        except KeyError:
            raise AttributeError(name) from None


_generations = itertools.count()
config = Config()


@contextlib.contextmanager
def _option(name, value):
    """Set option ``name`` for the duration of a ``with`` block."""
    old = config.read(name)
    config.update(name, value)
    try:
        yield
    finally:
        config.update(name, old)


def enable_x64(new_val=True):
    """``with nbjax.enable_x64():`` 64-bit types by default inside the block."""
    return _option("enable_x64", bool(new_val))


def default_device(new_val):
    """``with nbjax.default_device(device):`` (JAX's ``jax.default_device``; a platform name
    such as ``"cpu"`` too) sets the device arrays and jitted calls go to by default. Every
    CPU device's arrays live in the host's memory, so a CPU device changes nothing; nbjax
    puts arrays on a GPU only where asked (``device_put``, ``jit(backend="gpu")``), so it
    refuses a GPU here rather than leave arrays on the host."""
    platform = new_val if isinstance(new_val, str) else getattr(new_val, "platform", "cpu")
    if new_val is not None and platform != "cpu":
        raise NotImplementedError(
            f"nbjax.default_device({new_val!r}): nbjax places arrays on a GPU only where "
            "asked (nbjax.device_put, nbjax.jit(f, backend='gpu')), not by default")
    return _option("default_device", new_val)


def disable_jit(disable=True):
    """``with nbjax.disable_jit():`` jitted functions run op by op, as plain Python."""
    return _option("disable_jit", bool(disable))


def explain_cache_misses(new_val=True):
    """``with nbjax.explain_cache_misses():`` jit says why it traces again."""
    return _option("explain_cache_misses", bool(new_val))


def _choice(name, choices, doc):
    """A context manager setting option ``name`` to one of ``choices``."""
    def manager(new_val):
        if new_val not in choices:
            raise ValueError(f"jax_{name} must be one of {choices}, got {new_val!r}")
        return _option(name, new_val)
    manager.__name__ = manager.__qualname__ = name
    manager.__doc__ = doc
    return manager


def debug_nans(new_val=True):
    """``with nbjax.debug_nans():`` an eager op or a jitted call whose result has a NaN
    raises FloatingPointError (for a jitted call, naming the op that made it: the function
    is run again op by op to find it, as JAX does)."""
    return _option("debug_nans", bool(new_val))


def debug_infs(new_val=True):
    """As ``debug_nans``, for infinities."""
    return _option("debug_infs", bool(new_val))


def log_compiles(new_val=True):
    """``with nbjax.log_compiles():`` each compilation is logged (WARNING, ``nbjax.compiler``
    logger) with the function's name and argument types."""
    return _option("log_compiles", bool(new_val))


numpy_dtype_promotion = _choice("numpy_dtype_promotion", ("standard", "strict"), """
    ``with nbjax.numpy_dtype_promotion("strict"):`` operands of different dtypes raise
    TypePromotionError instead of promoting (a Python scalar may still
    join an array of its kind or a higher one: ``int8 + 1``, ``float32 + 1``).""")
numpy_rank_promotion = _choice("numpy_rank_promotion", ("allow", "warn", "raise"), """
    ``with nbjax.numpy_rank_promotion("raise"):`` jnp operands of different (non-zero) ranks
    raise ValueError (``"warn"``: a UserWarning) rather than
    broadcasting silently.""")
default_prng_impl = _choice("default_prng_impl", ("threefry2x32", "rbg", "unsafe_rbg"), """
    ``with nbjax.default_prng_impl("rbg"):`` keys made without ``impl=`` (and raw keys
    given to ``nbjax.random``) are of that PRNG implementation (``nbjax.random.impls``).""")


def no_tracing(new_val=True):
    """``with nbjax.no_tracing():`` a ``jit`` call that would trace its function raises
    RuntimeError (JAX's check that code is reused, e.g. inside a training loop)."""
    return _option("no_tracing", bool(new_val))


def no_execution(new_val=True):
    """``with nbjax.no_execution():`` running anything (an eager op, a jitted call) raises
    RuntimeError; staging (``make_jaxpr``, ``eval_shape``) still works."""
    return _option("no_execution", bool(new_val))


def _accepted(name, why):
    """A context manager for JAX's flag ``name`` that nbjax records but that changes
    nothing, because ``why``."""
    def manager(new_val=True):
        return _option(name, new_val)
    manager.__name__ = manager.__qualname__ = name
    manager.__doc__ = f"``with nbjax.{name}(value):`` accepted for JAX code; no effect: {why}."
    return manager


enable_checks = _accepted(
    "enable_checks", "nbjax always type-checks the equations it stages and its rules' outputs")
check_tracer_leaks = _accepted(
    "check_tracer_leaks", "an escaped nbjax tracer is already reported "
    "(UnexpectedTracerError) when it is used")
checking_leaks = check_tracer_leaks
default_matmul_precision = _accepted(
    "default_matmul_precision", "nbjax's CPU matmuls compute in the operands' dtype (no "
    "reduced-precision passes to choose between)")
transfer_guard = _accepted(
    "transfer_guard", "nbjax's arrays live in host memory, so there are no transfers to guard")
transfer_guard_host_to_device = _accepted("transfer_guard_host_to_device",
                                          "nbjax's arrays live in host memory")
transfer_guard_device_to_device = _accepted("transfer_guard_device_to_device",
                                            "nbjax's arrays live in host memory")
transfer_guard_device_to_host = _accepted("transfer_guard_device_to_host",
                                          "nbjax's arrays live in host memory")
threefry_partitionable = _accepted(
    "threefry_partitionable", "nbjax generates random bits on one device, in one way")
enable_custom_prng = _accepted("enable_custom_prng", "nbjax.random has no custom PRNGs")
legacy_prng_key = _accepted(
    "legacy_prng_key", "nbjax accepts raw uint32 keys; it does not warn about them")
debug_key_reuse = _accepted("debug_key_reuse", "nbjax does not track the use of keys")
allow_f16_reductions = _accepted(
    "allow_f16_reductions", "nbjax reduces float16 as NumPy does on the CPU")
softmax_custom_jvp = _accepted(
    "softmax_custom_jvp", "nbjax.nn.softmax is differentiated through its stable form "
    "(max subtracted, which stop_gradient keeps out of the derivative) either way")
jax2tf_associative_scan_reductions = _accepted(
    "jax2tf_associative_scan_reductions", "nbjax has no jax2tf")
remove_size_one_mesh_axis_from_type = _accepted(
    "remove_size_one_mesh_axis_from_type", "nbjax has no sharded types")
array_garbage_collection_guard = _accepted(
    "array_garbage_collection_guard", "an nbjax array is a NumPy buffer, freed by reference "
    "counting; no array needs the garbage collector")
thread_guard = _accepted(
    "thread_guard", "nbjax runs in one process, whose threads may share arrays freely")
auto_pcast = _accepted("auto_pcast", "nbjax's shard_map has no varying types to cast between")


# --- user contexts: values of the caller's own that jit's caches depend on ------------------

class UserContext:
    """A value of the user's own that ``jit`` keys its caches on (``jax.make_user_context``):
    a function traced under one value is traced again under another, since what it computes
    may depend on it. ``with context(v):`` sets the value in this thread for a block;
    ``set_global`` changes the value every thread sees outside such blocks."""

    def __init__(self, default_value):
        self._global = default_value
        self._local = threading.local()

    @property
    def value(self):
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else self._global

    def get_global(self):
        return self._global

    def set_global(self, value):
        self._global = value
        config.changed()

    @contextlib.contextmanager
    def __call__(self, value):
        hash(value)  # a cache key: JAX requires the value to be hashable too
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append(value)
        config.changed()
        try:
            yield
        finally:
            stack.pop()
            config.changed()


user_contexts = []  # every UserContext made, in order


def make_user_context(default_value=None):
    """A new ``UserContext`` whose value starts as ``default_value``."""
    context = UserContext(default_value)
    user_contexts.append(context)
    config.changed()  # (jit's cache keys now hold its value too)
    return context


def user_context_values():
    """The current value of every user context, in the order they were made (``()`` when
    there is none): the part of jit's cache keys that user contexts add."""
    return tuple(c.value for c in user_contexts)

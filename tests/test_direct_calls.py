"""Jitted calls straight into a kernel's entry (``Executable.direct``): a signature seen
before whose program is one small kernel runs with no conversion in Python; the entry checks
every argument, and whatever it refuses takes the fast path's ``_FastCall``, which converts
(a device's array, a deleted one, a non-contiguous or otherwise-typed buffer, a NumPy array
of another dtype), as does every call while step timing or a debug flag is on. The last such
call is tried first with no key (jit's last-call shortcut, a strict entry): whatever would
change the signature's meaning (settings, user contexts, a transformation, another thread,
weak types, another signature) must make it look the signature up as before."""

import gc
import sys
import threading

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.backends.cpu import python_entry
from nbjax.core import Array, ShapedArray, host_result
from helpers import assert_close, cpu_and_reference, random_array

rng = np.random.default_rng(11)
pytestmark = pytest.mark.cpu_compiler


def _spy(monkeypatch, owner, name, position):
    """The list to which calls of ``owner.name`` append their argument at ``position``."""
    calls = []
    original = getattr(owner, name)

    def spy(*args):
        calls.append(args[position])
        return original(*args)
    monkeypatch.setattr(owner, name, spy)
    return calls


@pytest.fixture
def converted(monkeypatch):
    """The calls that took the ``_FastCall`` (the entry refused, or was not used): a list
    of their argument tuples."""
    # (sys.modules: nbjax.jit is the function)
    return _spy(monkeypatch, sys.modules["nbjax.jit"]._FastCall, "__call__", 1)


def _add_one():
    f = nbjax.jit(lambda x: x * 2.0 + 1.0)
    x = random_array(rng, (4,))
    f(jnp.asarray(x))  # the general path: traces, compiles, adds the fast entry
    return f, x


def _frozen(values):
    values = np.asarray(values)
    values.flags.writeable = False
    return values


def test_arrays_and_numpy_arrays_go_straight_to_the_entry(converted):
    f, x = _add_one()
    for arg in (jnp.asarray(x), x.copy()):
        out = f(arg)
        f(arg)
        assert isinstance(out, Array) and out.aval == ShapedArray((4,), np.float32)
        assert_close(out, x * 2 + 1, rtol=1e-6)
        with pytest.raises(ValueError):
            np.asarray(out)[0] = 0  # results are read-only
    # (A NumPy array is of the Array's signature: the last call's entry takes it.)
    assert converted == [] and f.slow_path_calls == 1


@pytest.mark.parametrize("fun, value", [
    (lambda x: x * 2, np.float32(3.0)),                        # a scalar
    (lambda x: x * 2, np.array(True)),                         # bool -> weakly typed int
    (lambda x: jnp.transpose(x, (2, 0, 1)) - 1, np.arange(6, dtype=np.int32).reshape(2, 1, 3)),
    (lambda x: jnp.where(x > 0, x, -2 * x), np.linspace(-1, 1, 7, dtype=np.float32)),
], ids=["scalar", "bool", "transpose", "where"])
def test_direct_calls_give_what_the_general_path_gives(fun, value, converted):
    f = nbjax.jit(fun)
    x = jnp.asarray(value)
    f(x)
    fast, slow = f(x), f._call((x,), {})
    assert converted == []
    assert fast.aval == slow.aval and fast.weak_type == slow.weak_type
    np.testing.assert_array_equal(fast, slow)


@pytest.mark.parametrize("kind", ["non-contiguous", "other dtype", "float64 numpy",
                                  "non-contiguous numpy", "deleted"])
def test_what_the_entry_refuses_is_converted(kind, converted):
    f, x = _add_one()
    wide = np.repeat(x, 2)[::2]
    arg = {"non-contiguous": Array(_frozen(wide)),  # (a read-only view stays a view)
           # an Array whose NumPy array is not of its dtype (the conversion casts it)
           "other dtype": host_result(_frozen(x.astype(np.float64)), f.lower(x).in_avals[0]),
           "float64 numpy": x.astype(np.float64),
           "non-contiguous numpy": wide,
           "deleted": jnp.asarray(x)}[kind]
    if kind == "float64 numpy":
        f(arg)  # its own key (the dtype it has), canonicalised to float32 by the conversion
    elif kind == "non-contiguous numpy":
        f(x.copy())
    converted.clear()
    if kind == "deleted":
        arg.delete()
        with pytest.raises(RuntimeError, match="deleted"):
            f(arg)
    else:
        assert_close(f(arg), x * 2 + 1, rtol=1e-6)
    assert len(converted) == 1


class _Buffer:
    """A device's buffer, as ``Array.on_device`` takes it, holding ``values``."""

    def __init__(self, values):
        self.values, self.device, self.copies = values, nbjax.devices()[0], 0

    def to_host(self):
        self.copies += 1
        return self.values.copy()

    def block_until_ready(self):
        pass

    def is_ready(self):
        return True


def test_an_array_on_a_device_is_converted_until_its_values_are_on_the_host(converted):
    f, x = _add_one()
    buffer = _Buffer(x)
    arg = Array.on_device(buffer, ShapedArray((4,), np.float32))
    assert_close(f(arg), x * 2 + 1, rtol=1e-6)  # converted: reads the buffer, once
    assert len(converted) == 1 and buffer.copies == 1
    assert_close(f(arg), x * 2 + 1, rtol=1e-6)  # its host copy goes to the entry
    assert len(converted) == 1 and buffer.copies == 1


def test_debug_nans_between_calls_is_checked(converted):
    f = nbjax.jit(lambda x: jnp.log(x))
    x = jnp.asarray(np.array([1.0, -1.0], np.float32))
    f(x)
    f(x)
    nbjax.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError):
            f(x)
    finally:
        nbjax.config.update("debug_nans", False)
    assert np.isnan(np.asarray(f(x))[1]) and converted == []


def test_calls_while_steps_are_timed_are_timed(converted):
    f, x = _add_one()
    compiled = f.lower(x).compile()
    compiled.enable_timing()
    try:
        for _ in range(3):
            assert_close(f(jnp.asarray(x)), x * 2 + 1, rtol=1e-6)
        assert [len(times) for times in compiled.step_times.values()] == [3]
    finally:
        compiled.enable_timing(False)
    assert len(converted) == 3
    f(jnp.asarray(x))
    assert len(converted) == 3


def test_closed_over_values_go_first():
    w = jnp.asarray(random_array(rng, (3,)))
    f = nbjax.jit(lambda x: x * w - 1.0)
    x = random_array(rng, (3,))
    for _ in range(3):
        assert_close(f(jnp.asarray(x)), x * np.asarray(w) - 1, rtol=1e-6, scale=1.0)


def test_results_kept_or_fed_back_are_never_overwritten():
    f = nbjax.jit(lambda x: x + 1.0)
    x = jnp.asarray(np.zeros(5, np.float32))
    kept = []
    for _ in range(6):
        x = f(x)  # the input holds the last result: the other buffer is used
        kept.append(x)
        view = np.asarray(f(x))[1:]  # only a view of this one survives
        assert_close(view, np.full(4, float(len(kept)) + 1, np.float32))
    for k, value in enumerate(kept):
        assert_close(value, np.full(5, k + 1.0, np.float32))
    assert len({id(np.asarray(v)) for v in kept}) == len(kept)


def test_threads_calling_at_once_get_their_own_results():
    f = nbjax.jit(lambda x: x * 3.0)
    inputs = [jnp.asarray(np.full(8, float(k), np.float32)) for k in range(4)]
    f(inputs[0])
    failures = []

    def work(k):
        for _ in range(2000):
            out = f(inputs[k])
            if not np.array_equal(np.asarray(out), np.full(8, 3.0 * k, np.float32)):
                failures.append(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


# --- the last-call shortcut --------------------------------------------------------------

def _primed(fun, x, **options):
    """``jit(fun)`` called twice on ``x``: traced, then its fast entry found by key, which
    makes it the last call (the one the shortcut tries first)."""
    f = nbjax.jit(fun, **options)
    f(x)
    f(x)
    return f


@pytest.fixture
def keyed(monkeypatch):
    """The calls that looked their signature up (``_fast_key``): a list of their args."""
    return _spy(monkeypatch, sys.modules["nbjax.jit"], "_fast_key", 0)


def test_the_last_call_of_a_signature_needs_no_key(keyed, converted):
    x = random_array(rng, (4,))
    f = _primed(lambda v: v * 2.0 + 1.0, jnp.asarray(x))
    keyed.clear()
    for arg in (jnp.asarray(x), x.copy(), jnp.asarray(x)):
        assert_close(f(arg), x * 2 + 1, rtol=1e-6)
    assert keyed == [] and converted == [] and f.slow_path_calls == 1


def _shortcut_primed(fun, x, **options):
    """``_primed``, checked to have a last call the shortcut takes."""
    f = _primed(fun, x, **options)
    assert f._last_call[2] is not None, "not a direct call: the shortcut is not tested"
    return f


def test_settings_changed_after_the_last_call_apply(keyed):
    ran = []

    def fun(v):
        ran.append(v)
        return v * 2.5
    x = jnp.asarray(np.arange(3, dtype=np.int32))
    f = _shortcut_primed(fun, x)
    keyed.clear()
    with nbjax.disable_jit():
        assert_close(f(x), [0, 2.5, 5])
    assert len(ran) == 2 and not isinstance(ran[1], nbjax.core.Tracer)  # run as Python
    with nbjax.enable_x64():
        assert f(x).dtype == np.float64  # (int32 times a weak float: x64's float)
    assert f(x).dtype == np.float32
    with nbjax.no_execution(), pytest.raises(RuntimeError):
        f(x)
    f(x)
    assert f.trace_count == 2 and len(keyed) == 5


def test_a_user_context_changed_after_the_last_call_applies():
    scale = nbjax.make_user_context(2.0)
    x = jnp.asarray(np.ones(3, np.float32))
    f = _shortcut_primed(lambda v: v * scale.value, x)
    with scale(3.0):
        assert_close(f(x), np.full(3, 3.0))
        assert_close(f(x), np.full(3, 3.0))
    assert_close(f(x), np.full(3, 2.0))
    scale.set_global(5.0)
    assert_close(f(x), np.full(3, 5.0))


def test_calls_under_a_transformation_are_traced_after_the_last_call():
    x = random_array(rng, (5,))
    f = _shortcut_primed(lambda v: jnp.sin(v) * v, jnp.asarray(x))
    closed = nbjax.make_jaxpr(lambda: f(jnp.asarray(x)))()  # (a concrete array, staged)
    assert [e.primitive.name for e in closed.eqns] == ["jit"]
    assert_close(nbjax.grad(lambda v: f(v).sum())(x), np.cos(x) * x + np.sin(x), rtol=1e-5)
    assert_close(nbjax.vmap(f)(jnp.asarray(x)), np.sin(x) * x, rtol=1e-6)


def test_a_thread_under_a_transformation_does_not_take_another_threads_last_call():
    f = nbjax.jit(lambda v: v * 2.0)
    x = jnp.asarray(random_array(rng, (4,)))
    inside, primed, found = threading.Event(), threading.Event(), []

    def staged():
        inside.set()
        assert primed.wait(30)
        return f(x)
    thread = threading.Thread(target=lambda: found.append(nbjax.make_jaxpr(staged)()))
    thread.start()
    assert inside.wait(30)
    f(x)
    f(x)  # this thread's last call, made while the other thread traces
    assert f._last_call[2] is not None
    primed.set()
    thread.join()
    assert [e.primitive.name for e in found[0].eqns] == ["jit"]


def test_threads_keep_their_own_user_context_values():
    scale = nbjax.make_user_context(2.0)
    x = jnp.asarray(np.ones(3, np.float32))
    f = nbjax.jit(lambda v: v * scale.value)
    f(x)  # traced: a later call of this signature is keyed
    inside, recorded, results = threading.Event(), threading.Event(), {}

    def other():  # a thread with its own value, and no trace yet when it calls
        with scale(7.0):
            inside.set()
            assert recorded.wait(30)
            results["other"] = np.asarray(f(x))

    def first():  # a new thread whose first call is keyed: the last call
        results["first"] = np.asarray(f(x))
    threads = [threading.Thread(target=other), threading.Thread(target=first)]
    threads[0].start()
    assert inside.wait(30)
    threads[1].start()
    threads[1].join()
    recorded.set()
    threads[0].join()
    assert_close(results["first"], np.full(3, 2.0))
    assert_close(results["other"], np.full(3, 7.0))


@pytest.mark.parametrize("first", ["strong", "weak"])
def test_weakly_typed_arrays_keep_their_result_types(first):
    strong, weak = jnp.asarray(np.float32(2.0)), jnp.asarray(2.0)
    assert weak.weak_type and not strong.weak_type
    def fun(v):
        return v * 3
    f = _primed(fun, strong if first == "strong" else weak)
    assert (f._last_call[2] is None) == (first == "weak")  # (no shortcut for weak types)
    for arg in (strong, weak, weak, strong, strong, weak):
        out = f(arg)
        assert out.aval == fun(arg).aval and out.weak_type == arg.weak_type
        assert_close(out, 6.0)


def test_another_signature_after_the_last_call():
    f = _shortcut_primed(lambda v: v * 2, jnp.asarray(np.arange(4, dtype=np.float32)))
    values = [np.arange(3, dtype=np.float32), np.arange(4, dtype=np.int32),
              np.arange(4, dtype=np.float32).reshape(2, 2), np.float32(1.5),
              np.arange(4, dtype=np.float32)]
    for value in values + values[::-1]:
        out = f(jnp.asarray(value))
        assert out.shape == np.shape(value) and out.dtype == value.dtype
        assert_close(out, value * 2)
    assert f(1.5).weak_type and f(1.5) == 3.0  # a Python scalar: the general path


def test_a_deleted_array_raises_after_the_last_call():
    x = random_array(rng, (4,))
    f = _shortcut_primed(lambda v: v + 1.0, jnp.asarray(x))
    y = jnp.asarray(x)
    y.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        f(y)
    assert_close(f(jnp.asarray(x)), x + 1, rtol=1e-6)


def test_keywords_after_the_last_call_are_passed():
    x = random_array(rng, (4,))
    f = _shortcut_primed(lambda v, w=1.0: v - w, jnp.asarray(x))
    assert_close(f(jnp.asarray(x), w=jnp.asarray(np.float32(3.0))), x - 3, rtol=1e-6)
    assert_close(f(jnp.asarray(x)), x - 1, rtol=1e-6)


def test_an_observer_added_after_the_last_call_sees_every_call():
    x = jnp.asarray(random_array(rng, (4,)))
    f = _shortcut_primed(lambda v: v - 1.0, x)
    seen = []
    f.observe(seen.append)
    f(x)
    f(x)
    assert len(seen) == 2


@pytest.mark.parametrize("clear", ["clear_caches", "clear_cache"])
def test_cleared_caches_forget_the_last_call(clear):
    x = jnp.asarray(random_array(rng, (4,)))
    f = _shortcut_primed(lambda v: v - 1.0, x)
    nbjax.clear_caches() if clear == "clear_caches" else f.clear_cache()
    f(x)
    assert f.trace_count == 2


def test_donating_calls_after_the_last_call_donate():
    x = random_array(rng, (4,))
    g = nbjax.jit(lambda v: v + 1.0, donate_argnums=0)
    for _ in range(4):
        arg = jnp.asarray(x)
        assert_close(g(arg), x + 1, rtol=1e-6)
        assert arg.is_deleted()


# --- the entry's checks ------------------------------------------------------------------

class _Sub(np.ndarray):
    pass


def _entry():
    """A kernel's entry taking (out f32[2,3], in f32[2,3]) and computing ``sin(x) + x``."""
    x = random_array(rng, (2, 3))
    cpu, _ = cpu_and_reference(lambda v: jnp.sin(v) + v, x)
    return cpu._kernel.entry_output[0], x


def test_the_entry_runs_on_arrays_as_compiled_and_on_arrays_holding_them():
    entry, x = _entry()
    for arg in (x, Array(x)):
        out = np.zeros((2, 3), np.float32)
        assert entry(out, arg) is None
        assert_close(out, np.sin(x) + x, rtol=1e-6, scale=1.0)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.float16])
def test_the_entry_takes_arrays_of_every_dtype_as_compiled(dtype):
    x = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    cpu, _ = cpu_and_reference(lambda v: jnp.stack([v, v]), x)
    entry, shape, out_dtype = cpu._kernel.entry_output
    out = np.zeros(shape, out_dtype)
    assert entry(out, x) is None  # (its dtype's symbol names the very dtype object)
    np.testing.assert_array_equal(out, np.stack([x, x]))


@pytest.mark.parametrize("case", ["count", "too many", "a list", "None", "a subclass",
                                  "shape", "rank", "dtype", "byte order", "non-contiguous",
                                  "unaligned", "a deleted Array", "an Array never set",
                                  "output shape"])
def test_the_entry_refuses_what_it_was_not_compiled_for(case):
    entry, x = _entry()
    out = np.zeros((2, 3), np.float32)
    unaligned = np.frombuffer(bytearray(4 * 6 + 1), np.float32, 6, offset=1).reshape(2, 3)
    deleted = Array(x)
    deleted.delete()
    args = {"count": (out,), "too many": (out, x, x), "a list": (out, x.tolist()),
            "None": (out, None), "a subclass": (out, x.view(_Sub)),
            "shape": (out, x.reshape(3, 2)), "rank": (out, x.reshape(6)),
            "dtype": (out, x.astype(np.float64)), "byte order": (out, x.astype(">f4")),
            "non-contiguous": (out, np.asfortranarray(x)), "unaligned": (out, unaligned),
            "a deleted Array": (out, deleted), "an Array never set": (out, Array.__new__(Array)),
            "output shape": (np.zeros((3, 2), np.float32), x)}[case]
    assert entry(*args) is False
    assert not args[0].any(), "the kernel ran"


def _checked_call(fun, *values):
    """The cpu executable of ``fun`` on ``values`` and its ``checked_call`` taking the last
    value as its argument (the others closed over)."""
    cpu, _ = cpu_and_reference(fun, *values)
    out_aval = cpu.jaxpr.out_avals[0]
    return cpu, cpu.checked_call(list(values[:-1]), out_aval), out_aval


def test_a_checked_call_runs_on_what_is_of_its_signature():
    x = random_array(rng, (2, 3))
    cpu, call, aval = _checked_call(lambda v: jnp.sin(v) + v, x)
    before = [sys.getrefcount(v) for v in (x, aval, nbjax.core.HOST_DEVICE)]
    results = [call(arg) for arg in (x, Array(x), x.copy()) for _ in range(30)]
    for out in results:
        assert type(out) is Array and out.aval is aval and out.device == nbjax.devices()[0]
        assert gc.is_tracked(out) and out._buffer is None and not out.is_deleted()
        assert_close(out, np.sin(x) + x, rtol=1e-6, scale=1.0)
        with pytest.raises(ValueError):
            np.asarray(out)[0] = 0
    assert len({id(np.asarray(out)) for out in results}) == len(results)  # (all kept)
    del results, out
    for _ in range(30):
        call(x)  # (dropped at once: the spares serve every call)
    assert [sys.getrefcount(v) for v in (x, aval, nbjax.core.HOST_DEVICE)] == before


def test_a_checked_call_puts_closed_over_values_first():
    w, x = random_array(rng, (3,)), random_array(rng, (3,))
    _, call, _ = _checked_call(lambda c, v: c * v - c, w, x)
    assert_close(call(x), w * x - w, rtol=1e-6, scale=1.0)
    assert call(w, x) is None and call() is None


@pytest.mark.parametrize("case", ["weak", "not an aval", "shape", "dtype", "count", "none",
                                  "deleted", "a subclass", "timed"])
def test_a_checked_call_refuses_what_is_not_of_its_signature(case):
    x = random_array(rng, (2, 3))
    cpu, call, _ = _checked_call(lambda v: jnp.sin(v) + v, x)
    deleted = Array(x)
    deleted.delete()
    args = {"weak": (host_result(_frozen(x), ShapedArray((2, 3), np.float32, True)),),
            "not an aval": (host_result(_frozen(x), "f32[2,3]"),), "shape": (x.T.copy(),),
            "dtype": (x.astype(np.float64),), "count": (x, x), "none": (),
            "deleted": (deleted,), "a subclass": (x.view(_Sub),), "timed": (x,)}[case]
    state = call.__self__  # (the builtin's self)
    for spare in state[:2]:  # (NaN: what the kernel would overwrite)
        spare.flags.writeable = True
        spare.fill(np.nan)
        spare.flags.writeable = False
    del spare
    cpu.enable_timing(case == "timed")
    try:
        assert call(*args) is None
    finally:
        cpu.enable_timing(False)
    assert np.isnan(state[0]).all() and np.isnan(state[1]).all(), "the kernel ran"
    assert_close(call(x), np.sin(x) + x, rtol=1e-6, scale=1.0)


def test_a_checked_call_makes_a_buffer_when_both_spares_are_held():
    x = random_array(rng, (4,))
    _, call, _ = _checked_call(lambda v: v * 3.0, x)
    state = call.__self__
    held = [call(x), call(x)]
    made = []

    def make_buffer():
        made.append(_frozen(np.empty(4, np.float32)))
        return made[-1]
    state[python_entry.MAKE_BUFFER] = make_buffer
    out = call(x)
    assert len(made) == 1 and np.asarray(out) is made[0] and state[0] is made[0]
    assert_close(out, x * 3, rtol=1e-6)
    assert all(not np.shares_memory(np.asarray(out), np.asarray(h)) for h in held)

    def failing():
        raise MemoryError("no buffer")
    state[python_entry.MAKE_BUFFER] = failing
    with pytest.raises(MemoryError, match="no buffer"):
        call(x)  # (all three held)
    del held
    assert_close(call(x), x * 3, rtol=1e-6)  # a spare is free again


def test_a_refused_call_through_the_executable_goes_through_ctypes():
    entry, x = _entry()
    cpu, _ = cpu_and_reference(lambda v: jnp.sin(v) + v, x)
    unaligned = np.frombuffer(bytearray(4 * 6 + 1), np.float32, 6, offset=1).reshape(2, 3)
    unaligned[...] = x
    assert_close(cpu.run(unaligned)[0], np.sin(x) + x, rtol=1e-6, scale=1.0)


def test_the_layout_the_entries_read_was_found():
    assert python_entry.USABLE and None not in python_entry.ARRAY_SLOTS.values()

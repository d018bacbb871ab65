"""``nbjax.experimental.io_callback``, and what every host callback's results go through.

Each program runs with nbjax's cpu backend (the callback a host step of the native program)
and its reference backend, and with JAX where it is importable: the results, the calls the
callback saw (in order) and the errors must agree, and equal what the test states."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.experimental import io_callback

try:
    import jax
    from jax.experimental import io_callback as jax_io_callback
except ImportError:  # JAX is a test reference only
    jax = None


def _libraries():
    """(name, the library, its io_callback, its jit backend or None)."""
    found = [("cpu", nbjax, io_callback, "cpu"), ("reference", nbjax, io_callback, "reference")]
    return found + ([("jax", jax, jax_io_callback, None)] if jax is not None else [])


def _doubled(calls):
    def callback(x):
        calls.append(np.asarray(x).tolist())
        return np.asarray(x) * 2      # float64 for a Python float: converted, as JAX does
    return callback


def _spec(lib, x):
    return lib.ShapeDtypeStruct(np.shape(x), np.float32)


# Each program: (lib, its io_callback, callback) -> the function to call on ARGS[name].
PROGRAMS = {
    "eager": lambda lib, io, cb: lambda x: io(cb, _spec(lib, x), x),
    "jit, result unused": lambda lib, io, cb: lib.jit(
        lambda x: (io(cb, _spec(lib, x), x), x + 1)[1]),
    "jit, two equal calls": lambda lib, io, cb: lib.jit(
        lambda x: io(cb, _spec(lib, x), x) + io(cb, _spec(lib, x), x)),
    "vmap": lambda lib, io, cb: lib.jit(lib.vmap(lambda x: io(cb, _spec(lib, x), x))),
    "vmap, one operand unbatched": lambda lib, io, cb: lib.vmap(
        lambda x, y: io(lambda a, b: cb(a + b), _spec(lib, x), x, y), in_axes=(0, None)),
    "scan, ordered": lambda lib, io, cb: lib.jit(lambda xs: lib.lax.scan(
        lambda c, x: (c + io(cb, _spec(lib, x), x, ordered=True), None), np.float32(0), xs)[0]),
    "cond": lambda lib, io, cb: lib.jit(lambda p, x: lib.lax.cond(
        p, lambda x: io(cb, _spec(lib, x), x), lambda x: x, x)),
    "keyword operand": lambda lib, io, cb: lambda x: io(
        lambda a, b=1: cb(a * b), _spec(lib, x), x, b=np.float32(3)),
    "gradient of a stopped operand": lambda lib, io, cb: lib.grad(
        lambda x: io(cb, _spec(lib, x), lib.lax.stop_gradient(x)) * x),
    "no results": lambda lib, io, cb: lib.jit(lambda x: io(lambda a: (cb(a), None)[1], None, x)),
}
ARGS = {
    "eager": (np.float32(1.5),), "jit, result unused": (np.float32(2),),
    "jit, two equal calls": (np.float32(2),), "vmap": (np.arange(3, dtype=np.float32),),
    "vmap, one operand unbatched": (np.arange(3, dtype=np.float32), np.float32(10)),
    "scan, ordered": (np.arange(4, dtype=np.float32),), "cond": (True, np.float32(5)),
    "keyword operand": (np.float32(2),), "gradient of a stopped operand": (1.0,),
    "no results": (np.float32(3),),
}
EXPECTED = {  # (the result, the values the callback saw, in order)
    "eager": (3.0, [1.5]), "jit, result unused": (3.0, [2.0]),
    "jit, two equal calls": (8.0, [2.0, 2.0]), "vmap": ([0, 2, 4], [0.0, 1.0, 2.0]),
    "vmap, one operand unbatched": ([20, 22, 24], [10.0, 11.0, 12.0]),
    "scan, ordered": (12.0, [0.0, 1.0, 2.0, 3.0]), "cond": (10.0, [5.0]),
    "keyword operand": (12.0, [6.0]), "gradient of a stopped operand": (2.0, [1.0]),
    "no results": (None, [3.0]),
}


@pytest.fixture(params=_libraries(), ids=lambda lib: lib[0])
def library(request):
    name, lib, io, backend = request.param
    if backend is None:
        yield lib, io
        return
    previous = nbjax.config.jit_backend
    nbjax.config.update("jit_backend", backend)
    try:
        yield lib, io
    finally:
        nbjax.config.update("jit_backend", previous)


@pytest.mark.parametrize("name", PROGRAMS)
def test_io_callback_runs_whenever_the_computation_does(library, name):
    """Once per run, in order, even when nothing reads its result; never merged with an
    equal call; once per batch member under vmap; once per iteration in a loop."""
    lib, io = library
    calls = []
    f = PROGRAMS[name](lib, io, _doubled(calls))
    out = f(*ARGS[name])
    want, seen = EXPECTED[name]
    if want is None:
        assert out is None
    else:
        np.testing.assert_array_equal(np.asarray(out), np.float32(want))
        assert np.asarray(out).dtype == np.float32
    assert calls == seen
    if name.startswith("jit"):
        f(*ARGS[name])                              # (compiled: runs again, calls again)
        assert calls == seen * 2


REFUSALS = {
    "vmap of an ordered callback": (
        lambda lib, io: lib.vmap(lambda x: io(np.sin, _spec(lib, x), x, ordered=True)),
        (np.arange(3, dtype=np.float32),), ValueError, "Cannot `vmap` ordered IO callback."),
    "grad": (lambda lib, io: lib.grad(lambda x: io(np.sin, _spec(lib, x), x)),
             (1.0,), ValueError, "IO callbacks do not support JVP."),
    "jvp": (lambda lib, io: lambda x: lib.jvp(lambda v: io(np.sin, _spec(lib, v), v), (x,),
                                               (x,)),
            (1.0,), ValueError, "IO callbacks do not support JVP."),
    "a 64-bit result type": (lambda lib, io: lambda x: io(
        np.sin, lib.ShapeDtypeStruct((), np.float64), x),
        (1.0,), ValueError, "result_shape_dtypes cannot specify 64-bit types"),
}


@pytest.mark.parametrize("name", REFUSALS)
def test_io_callback_refuses_as_jax(library, name):
    lib, io = library
    program, args, error, message = REFUSALS[name]
    with pytest.raises(error, match=message.replace("`", ".")):
        program(lib, io)(*args)


def test_a_failing_io_callback_raises_jax_runtime_error_eagerly_and_compiled(caplog):
    def failing(a):
        raise KeyError("missing")
    for call in (lambda v: io_callback(failing, None, v),
                 nbjax.jit(lambda v: io_callback(failing, None, v))):
        caplog.clear()
        with pytest.raises(nbjax.errors.JaxRuntimeError,
                           match="(?s)^INTERNAL: CpuCallback error calling callback: "
                                 "Traceback.*in failing.*KeyError: 'missing'$") as raised:
            call(jnp.ones(2))
        assert isinstance(raised.value.__cause__, KeyError)
        assert "jax.io_callback failed" in caplog.text


def test_io_callback_is_staged_effectful_with_its_ordering():
    jaxpr = nbjax.make_jaxpr(lambda x: io_callback(np.sin, _spec(nbjax, x), x, ordered=True))(
        np.float32(1))
    (eqn,) = jaxpr.jaxpr.eqns
    assert eqn.primitive is nbjax.lax.io_callback_p and eqn.params["ordered"] is True
    assert eqn.primitive.effectful and "io_callback" in str(jaxpr)


# --- what a callback returns: pure_callback and io_callback alike --------------------------

def _result_cases(lib):
    """name -> (callback, declared results, the dtypes of the results, or the error's text)."""
    spec = lib.ShapeDtypeStruct
    f32, i32 = spec((3,), np.float32), spec((3,), np.int32)
    return {
        "float64 array for float32": (lambda x: np.ones(3), f32, [np.float32]),
        "int64 array for int32": (lambda x: np.ones(3, np.int64), i32, [np.int32]),
        "Python float": (lambda x: 3.0, spec((), np.float32), [np.float32]),
        "Python int": (lambda x: 3, spec((), np.int32), [np.int32]),
        "a list for a declared tuple": (lambda x: [np.ones(3, np.float32), np.ones(3)],
                                        (f32, f32), [np.float32, np.float32]),
        "too few": (lambda x: (np.ones(3, np.float32),), (f32, f32),
                    "Mismatched number of outputs from callback. Expected: 2, Actual: 1"),
        "too many": (lambda x: [np.ones(3, np.float32)] * 3, (f32, f32),
                     "Mismatched number of outputs from callback. Expected: 2, Actual: 3"),
        "wrong dtype": (lambda x: np.ones(3, np.int32), f32,
                        "Incorrect output dtype for return value #0: Expected: float32, "
                        "Actual: int32"),
        "wrong shape": (lambda x: np.ones(2, np.float32), f32,
                        r"Incorrect output shape for return value #0: Expected: \(3,\), "
                        r"Actual: \(2,\)"),
    }


@pytest.mark.parametrize("kind", ["pure_callback", "io_callback"])
@pytest.mark.parametrize("case", list(_result_cases(nbjax)))
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_callback_results_are_converted_and_checked_as_jax(kind, case, jitted):
    """Each leaf of what the callback returns is converted to the type nbjax stores it as
    (float64 to float32, without x64), then checked against the declared results."""
    libs = [(nbjax, nbjax.pure_callback, io_callback)]
    if jax is not None:
        libs.append((jax, jax.pure_callback, jax_io_callback))
    for lib, pure, io in libs:
        callback, declared, want = _result_cases(lib)[case]
        call = pure if kind == "pure_callback" else io
        f = lambda x: call(callback, declared, x)     # noqa: E731
        f = lib.jit(f) if jitted else f
        if isinstance(want, str):
            with pytest.raises(RuntimeError, match=want):
                lib.block_until_ready(f(1.0))
            continue
        leaves = lib.tree_util.tree_leaves(f(1.0))
        assert [np.asarray(v).dtype for v in leaves] == [np.dtype(d) for d in want], lib
        for got, returned in zip(leaves, lib.tree_util.tree_leaves(callback(1.0))):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(returned))

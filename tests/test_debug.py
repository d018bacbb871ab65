"""``nbjax.debug.print`` / ``nbjax.debug.callback`` print the run-time values as JAX does.

Every program is written once against a ``lib`` (``nbjax`` or ``jax``): its stdout under
nbjax is compared with JAX's when JAX is importable, and always with the text recorded from
JAX 0.10.2 (so the tests mean the same without JAX).
"""

import io

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.backends import compile as compile_jaxpr

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None


def _f(lib, x):
    lib.debug.print("x={x} y={}", x * 2, x=x)
    return lib.numpy.sin(x).sum()


def _arange(lib, n, shape=None):
    x = lib.numpy.arange(float(n), dtype=lib.numpy.float32)
    return x if shape is None else x.reshape(shape)


def eager(lib):
    _f(lib, _arange(lib, 3))


def jitted(lib):
    f = lib.jit(lambda x: _f(lib, x))
    f(_arange(lib, 3))
    f(_arange(lib, 3) + 1)  # the values of this run, not those seen when tracing


def vmapped(lib):
    lib.vmap(lambda x: _f(lib, x))(_arange(lib, 6, (2, 3)))


def vmapped_with_unbatched(lib):
    lib.vmap(lambda a, b: lib.debug.print("{} {}", a, b), in_axes=(0, None))(_arange(lib, 2), 5.0)


def nested_vmap(lib):
    lib.vmap(lib.vmap(lambda a: lib.debug.print("a={}", a)))(_arange(lib, 4, (2, 2)))


def grad(lib):
    lib.grad(lambda x: _f(lib, x))(_arange(lib, 3))


def jit_of_grad(lib):
    lib.jit(lib.grad(lambda x: _f(lib, x)))(_arange(lib, 3))


def grad_of_jit(lib):
    lib.grad(lib.jit(lambda x: _f(lib, x)))(_arange(lib, 3))


def vmap_of_grad(lib):
    lib.vmap(lib.grad(lambda x: _f(lib, x)))(_arange(lib, 4, (2, 2)))


def ordered_and_unused(lib):
    """Two prints run in program order; a print whose inputs nothing else uses still runs."""
    def f(v):
        lib.debug.print("a {}", v)
        lib.debug.print("b {}", v + 1)
        lib.debug.print("unused {}", v * 3)
        return v
    lib.jit(f)(1.0)


def same_print_twice(lib):
    """Two identical equations are two effects (no CSE)."""
    def f(v):
        lib.debug.print("twice {}", v)
        lib.debug.print("twice {}", v)
        return v
    lib.jit(f)(2.0)


def constant_operands(lib):
    """Operands known at compile time still print at run time (no constant folding)."""
    f = lib.jit(lambda v: (lib.debug.print("c {}", lib.numpy.float32(4) * 2), v)[1])
    f(1.0)
    f(2.0)


def format_fields(lib):
    lib.debug.print("{:.2f} {x!r} {}", lib.numpy.float32(1.2345), lib.numpy.arange(3),
                    x=lib.numpy.int32(3))


def callback_with_pytrees(lib):
    def cb(a, tag, b):
        print("cb", type(a).__name__ in ("Array", "ArrayImpl"), a, tag, b)
    x = _arange(lib, 3)
    lib.jit(lambda x: (lib.debug.callback(cb, x, "tag", b={"k": x + 1}), x)[1])(x)


def vmapped_callback(lib):
    lib.vmap(lambda v: lib.debug.callback(lambda a: print("cb", a), v))(_arange(lib, 4, (2, 2)))


def inside_control_flow(lib):
    lax = lib.lax

    def body(i, c):
        lib.debug.print("i={} c={}", i, c)
        return c * 2

    def branch(name):
        return lambda x: (lib.debug.print(name + " {}", x), x)[1]

    def step(c, y):
        lib.debug.print("s {} {}", c, y)
        return c + y, c

    lib.jit(lambda x: lax.fori_loop(0, 3, body, x))(1.0)
    lib.jit(lambda x: lax.cond(x > 0, branch("t"), branch("f"), x))(-2.0)
    lib.jit(lambda x: lax.scan(step, x, _arange(lib, 3)))(0.0)


EXPECTED = {
    eager: "x=[0. 1. 2.] y=[0. 2. 4.]\n",
    jitted: "x=[0. 1. 2.] y=[0. 2. 4.]\nx=[1. 2. 3.] y=[2. 4. 6.]\n",
    vmapped: "x=[0. 1. 2.] y=[0. 2. 4.]\nx=[3. 4. 5.] y=[ 6.  8. 10.]\n",
    vmapped_with_unbatched: "0.0 5.0\n1.0 5.0\n",
    nested_vmap: "a=0.0\na=2.0\na=1.0\na=3.0\n",  # the inner vmap splits first, as in JAX
    grad: "x=[0. 1. 2.] y=[0. 2. 4.]\n",
    jit_of_grad: "x=[0. 1. 2.] y=[0. 2. 4.]\n",
    grad_of_jit: "x=[0. 1. 2.] y=[0. 2. 4.]\n",
    vmap_of_grad: "x=[0. 1.] y=[0. 2.]\nx=[2. 3.] y=[4. 6.]\n",
    ordered_and_unused: "a 1.0\nb 2.0\nunused 3.0\n",
    same_print_twice: "twice 2.0\ntwice 2.0\n",
    constant_operands: "c 8.0\nc 8.0\n",
    format_fields: "1.23 Array(3, dtype=int32) [0 1 2]\n",
    callback_with_pytrees: "cb True [0. 1. 2.] tag {'k': Array([1., 2., 3.], dtype=float32)}\n",
    vmapped_callback: "cb [0. 1.]\ncb [2. 3.]\n",
    inside_control_flow: "i=0 c=1.0\ni=1 c=2.0\ni=2 c=4.0\nf -2.0\n"
                         "s 0.0 0.0\ns 0.0 1.0\ns 1.0 2.0\n",
}


def _stdout(program, lib, capsys):
    capsys.readouterr()
    program(lib)
    return capsys.readouterr().out


@pytest.mark.filterwarnings("ignore:nbjax cpu backend")
@pytest.mark.parametrize("program", list(EXPECTED), ids=lambda p: p.__name__)
def test_prints_what_jax_prints(program, capsys):
    out = _stdout(program, nbjax, capsys)
    assert out == EXPECTED[program]
    if jax is not None:
        assert out == _stdout(program, jax, capsys)


def test_a_jaxpr_shows_the_callback_and_keeps_it_through_the_compiler(capsys):
    def f(x):
        nbjax.debug.print("x={}", x * 2)
        return x
    closed = nbjax.make_jaxpr(f)(1.0)
    assert "debug_callback[callback=print('x={}')] b" in str(closed)
    exe = compile_jaxpr(closed, "cpu", "f")
    assert [e.primitive.name for e in exe.jaxpr.jaxpr.eqns] == ["mul", "debug_callback"]
    assert "host step" in exe.plan.report()
    capsys.readouterr()
    exe.run(np.float32(3))
    assert capsys.readouterr().out == "x=6.0\n"


def test_callback_sees_arrays_and_returns_nothing():
    seen = []
    assert nbjax.debug.callback(seen.append, jnp.ones(2)) is None
    assert isinstance(seen[0], nbjax.Array)
    np.testing.assert_array_equal(seen[0], np.ones(2, np.float32))


def two_call_form(lib):
    lib.jit(lambda v: lib.debug.print(ordered=True)("two {} {k}", v, k=v + 1))(1.0)


def test_two_call_form_prints_what_jax_prints(capsys):
    out = _stdout(two_call_form, nbjax, capsys)
    assert out == "two 1.0 2.0\n"
    if jax is not None:
        assert out == _stdout(two_call_form, jax, capsys)


def _logged(lib, caplog):
    caplog.clear()
    with caplog.at_level("INFO"):
        lib.debug.log("x={x}", x=lib.numpy.arange(3.0))
        lib.jit(lambda v: lib.debug.log("y {}", v * 2))(lib.numpy.ones(2))
        lib.vmap(lambda v: lib.debug.log("z {}", v))(lib.numpy.arange(2.0))
    return [(r.levelname, r.getMessage()) for r in caplog.records if "debug" in r.name]


def test_log_logs_the_messages_jax_logs(caplog):
    mine = _logged(nbjax, caplog)
    assert mine == [("INFO", "x=[0. 1. 2.]"), ("INFO", "y [2. 2.]"), ("INFO", "z 0.0"),
                    ("INFO", "z 1.0")]
    if jax is not None:
        assert mine == _logged(jax, caplog)


def _stops_in(f, args, commands, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(commands))
    capsys.readouterr()
    f(*args)
    return capsys.readouterr().out


def test_breakpoint_opens_pdb_with_the_runtime_values(monkeypatch, capsys):
    def f(x):
        y = jnp.sin(x) * 2
        label = "static"
        nbjax.debug.breakpoint()
        return y

    x = jnp.arange(3.0)
    want = repr(jnp.sin(x) * 2)
    for g in (f, nbjax.jit(f)):
        out = _stops_in(g, (x,), "p y\np label\np x.sum()\nc\n", monkeypatch, capsys)
        assert out.startswith("Entering nbjax debugger at ") and f"{want}\n" in out
        assert "'static'\n" in out and repr(x.sum()) in out
    out = _stops_in(nbjax.vmap(f), (jnp.arange(2.0),), "p y\nc\np y\nc\n", monkeypatch, capsys)
    assert out.count("Entering nbjax debugger") == 2
    assert repr(jnp.sin(jnp.float32(1.0)) * 2) in out
    assert "debug_callback[callback=breakpoint]" in str(nbjax.make_jaxpr(f)(1.0))
    with pytest.raises(ValueError, match="backend"):
        nbjax.debug.breakpoint(backend="web")


def test_sharding_of_one_device_arrays(capsys):
    seen = []
    x = jnp.ones((4, 4))
    nbjax.debug.inspect_array_sharding({"a": x, "b": [jnp.ones(3)]}, callback=seen.append)
    nbjax.jit(lambda v: nbjax.debug.inspect_array_sharding(v, callback=seen.append))(x)
    assert seen == [x.sharding] * 3
    assert seen[0].device_set == {nbjax.devices()[0]}
    capsys.readouterr()
    nbjax.debug.visualize_array_sharding(jnp.ones(5))
    nbjax.debug.visualize_sharding((4, 4), x.sharding)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["┌───────┐", "│ CPU 0 │", "└───────┘"]
    assert lines[3].startswith("┌") and "CPU 0" in lines[len(lines) // 2 + 1]
    with pytest.raises(ValueError, match="shape"):
        nbjax.debug.visualize_array_sharding(jnp.ones((2, 2, 2)))


def test_debug_effects_print_as_jax():
    assert str(nbjax.debug.DebugEffect()) == "Debug"
    assert str(nbjax.debug.OrderedDebugEffect()) == "OrderedDebug"
    assert nbjax.debug.OrderedDebugEffect() != nbjax.debug.DebugEffect()
    if jax is not None:
        assert str(jax.debug.OrderedDebugEffect()) == "OrderedDebug"
        assert str(jax.debug.DebugEffect()) == "Debug"


def test_a_failing_callback_raises_its_error_eagerly_and_jax_s_runtime_error_when_compiled(
        caplog):
    """As JAX: called eagerly (under grad too) the callback's own exception comes out; in a
    compiled program (a kernel's host step, a loop's, the reference backend's) JAX's runtime
    error, its message the callback's traceback, after the log message jax.jit gives."""
    def failing(x):
        raise KeyError("missing")

    def f(x):
        nbjax.debug.callback(failing, x)
        return x * 2

    def in_a_loop(x):
        def step(c, _):
            nbjax.debug.callback(failing, c)
            return c + 1, None
        return nbjax.lax.scan(step, x, None, length=3)[0]

    x = jnp.ones(3)
    for call in (f, nbjax.grad(lambda v: f(v).sum())):
        with pytest.raises(KeyError, match="missing"):
            call(x)
    for program in (f, in_a_loop):
        for backend in ("cpu", "reference"):
            caplog.clear()
            with pytest.raises(nbjax.errors.JaxRuntimeError,
                               match="(?s)^INTERNAL: CpuCallback error calling callback: "
                                     "Traceback.*in failing.*KeyError: 'missing'$") as raised:
                nbjax.jit(program, backend=backend)(x).block_until_ready()
            assert isinstance(raised.value.__cause__, KeyError)
            assert [r.getMessage() for r in caplog.records] == ["jax.debug.callback failed"]

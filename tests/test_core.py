"""Core behaviour: Array, devices, traces and tracers, make_jaxpr, source info, check_jaxpr."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.core import (Array, ClosedJaxpr, Jaxpr, JaxprEqn, Var, check_jaxpr, eval_jaxpr,
                        ShapedArray, SourceInfo, user_frame)
from helpers import assert_close


def f32(*values):
    return Array(np.array(values, np.float32))


# --- Array ---------------------------------------------------------------------------------

def test_array_basics_and_repr():
    x = Array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.shape == (2, 3) and x.dtype == np.float32 and x.ndim == 2 and x.size == 6
    assert repr(x) == ("Array([[0., 1., 2.],\n       [3., 4., 5.]], dtype=float32)")
    assert repr(Array(np.array([1, 2], np.int32))) == "Array([1, 2], dtype=int32)"
    assert repr(Array(np.array([True, False]))) == "Array([ True, False], dtype=bool)"
    assert repr(Array(np.float32(1.0), weak_type=True)) == \
        "Array(1., dtype=float32, weak_type=True)"
    assert repr(Array(np.zeros((0, 3), np.float32))) == \
        "Array([], shape=(0, 3), dtype=float32)"


def test_array_repr_wraps_its_values_as_jax_does():
    """Lines of values wrap as if only a comma followed them (as jax 0.10.2 prints them:
    these strings are its output); the dtype follows the last line, after a gap of the
    prefix's width when that line is full."""
    assert repr(Array(np.arange(20, dtype=np.uint8))) == (
        "Array([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16,\n"
        "       17, 18, 19], dtype=uint8)")
    assert repr(Array(np.arange(17, dtype=np.uint8))) == (
        "Array([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16],"
        "      dtype=uint8)")
    assert repr(Array(np.linspace(0, 1, 9, dtype=np.float32))) == (
        "Array([0.   , 0.125, 0.25 , 0.375, 0.5  , 0.625, 0.75 , 0.875, 1.   ],"
        "      dtype=float32)")
    assert repr(Array(np.arange(2000, dtype=np.float32))) == (
        "Array([0.000e+00, 1.000e+00, 2.000e+00, ..., 1.997e+03, 1.998e+03,\n"
        "       1.999e+03], dtype=float32)")
    assert repr(Array(np.zeros(0, np.float32))) == "Array([], shape=(0,), dtype=float32)"


def test_array_is_immutable_and_numpy_interop():
    src = np.arange(3, dtype=np.float32)
    x = Array(src)
    src[0] = 100  # the Array kept its own copy
    np.testing.assert_array_equal(np.asarray(x), [0, 1, 2])
    assert not np.asarray(x).flags.writeable
    with pytest.raises(TypeError, match=r"\.at\["):
        x[0] = 1.0
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)


def test_array_scalar_conversions_and_iteration():
    x = f32(1.5, 2.5)
    assert len(x) == 2
    assert [float(r) for r in x] == [1.5, 2.5]
    assert float(Array(np.float32(3.0))) == 3.0
    assert Array(np.int32(4)).item() == 4 and int(Array(np.int32(4))) == 4
    assert bool(Array(np.bool_(True)))
    assert x.block_until_ready() is x
    with pytest.raises(TypeError, match="unsized"):
        len(Array(np.float32(1)))
    with pytest.raises(TypeError, match="integer scalar"):
        [0, 1][Array(np.float32(1))]


def test_devices_and_device_put():
    devs = nbjax.devices()
    assert [d.id for d in devs] == list(range(len(devs))) and len(devs) >= 1
    assert devs[0].platform == "cpu" and repr(devs[0]) == "CpuDevice(id=0)"
    x = f32(1, 2)
    assert x.device == devs[0] and x.devices() == {devs[0]}
    with pytest.raises(RuntimeError, match="Unknown backend"):
        nbjax.devices("tpu")


# --- tracers -------------------------------------------------------------------------------

def test_python_control_flow_on_tracer_names_user_line():
    def f(x):
        if x > 0:  # the line the error must point at
            return x
        return -x
    with pytest.raises(nbjax.ConcretizationTypeError) as info:
        nbjax.make_jaxpr(f)(1.0)
    msg = str(info.value)
    assert "if x > 0:" in msg and "test_core.py" in msg
    assert "lax.cond" in msg and "static_argnums" in msg
    assert "make_jaxpr of f" in msg


@pytest.mark.parametrize("convert", [int, float, bool, complex])
def test_scalar_conversion_of_tracer_is_concretization_error(convert):
    with pytest.raises(nbjax.ConcretizationTypeError):
        nbjax.make_jaxpr(lambda x: convert(x))(1.0)


def test_numpy_on_tracer_is_type_error():
    with pytest.raises(nbjax.TracerArrayConversionError, match="nbjax.numpy"):
        nbjax.make_jaxpr(lambda x: np.sin(x))(np.ones(3, np.float32))


def test_leaked_tracer_is_detected():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    nbjax.make_jaxpr(f)(1.0)
    with pytest.raises(nbjax.UnexpectedTracerError, match="make_jaxpr of f"):
        jnp.sin(leaked[0])
    with pytest.raises(nbjax.UnexpectedTracerError):
        nbjax.make_jaxpr(lambda y: y + leaked[0])(1.0)


def test_tracer_in_place_assignment_error():
    def f(x):
        x[0] = 1.0
        return x
    with pytest.raises(TypeError, match=r"\.at\["):
        nbjax.make_jaxpr(f)(np.ones(3, np.float32))


# --- make_jaxpr ----------------------------------------------------------------------------

def test_make_jaxpr_prints_like_jax():
    assert str(nbjax.make_jaxpr(jnp.sin)(np.ones(3, np.float32))) == \
        "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"
    assert str(nbjax.make_jaxpr(lambda x: x + 1.0)(1.0)) == \
        "{ lambda ; a:f32[]. let b:f32[] = add a 1.0:f32[] in (b,) }"


def test_make_jaxpr_closed_over_constant_and_static_args():
    c = Array(np.arange(3, dtype=np.float32))
    closed = nbjax.make_jaxpr(lambda x: x * c)(np.ones(3, np.float32))
    assert str(closed) == "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = mul b a in (c,) }"
    assert closed.consts[0] is c

    def scale(x, n):
        return x * float(n)
    text = str(nbjax.make_jaxpr(scale, static_argnums=1)(np.ones(2, np.float32), 3))
    assert text == "{ lambda ; a:f32[2]. let b:f32[2] = mul a 3.0:f32[] in (b,) }"
    with pytest.raises(ValueError, match="static_argnums"):
        nbjax.make_jaxpr(scale, static_argnums=5)(1.0, 2)


def test_make_jaxpr_pytrees_and_shape_structs():
    def f(params, x):
        return {"out": params["w"] * x, "aux": (x,)}
    spec = nbjax.ShapeDtypeStruct((2,), np.float32)
    closed, shapes = nbjax.make_jaxpr(f, return_shape=True)({"w": spec}, spec)
    assert [v.aval.str_short() for v in closed.jaxpr.invars] == ["float32[2]", "float32[2]"]
    assert shapes["out"].shape == (2,) and shapes["aux"][0].dtype == np.float32


def test_equations_record_user_source_lines():
    def f(x):
        y = jnp.sin(x)
        return y * 2.0
    closed = nbjax.make_jaxpr(f)(1.0)
    infos = [e.source_info for e in closed.jaxpr.eqns]
    assert all(i.file == __file__ and i.function == "f" for i in infos)
    assert infos[0].source_line() == "y = jnp.sin(x)"
    assert infos[1].source_line() == "return y * 2.0"


def _relu(x):
    return jnp.maximum(x, 0.0)


def _layer(w, x):
    return _relu(x * w) + 1.0


def _net(x):
    for w in (2.0, 3.0):
        x = _layer(w, x)
    return x


def _path(info):
    return [(f.function, f.source_line()) for f in info.call_path]


def test_equations_record_their_call_path_inside_the_traced_function():
    """Each equation knows the user frames from the traced function down; two calls of
    one function from one line are two calls; the caller of make_jaxpr is in no path."""
    eqns = nbjax.make_jaxpr(_net)(np.ones(3, np.float32)).jaxpr.eqns
    assert [e.primitive.name for e in eqns] == ["mul", "max", "add"] * 2
    call, inner = ("_net", "x = _layer(w, x)"), ("_layer", "return _relu(x * w) + 1.0")
    assert [_path(e.source_info) for e in eqns[:3]] == \
        [[call, inner], [call, inner, ("_relu", "return jnp.maximum(x, 0.0)")], [call, inner]]
    first, second = eqns[0].source_info.call_path, eqns[3].source_info.call_path
    assert first[0].call == second[0].call  # the one call of _net
    assert first[1].call != second[1].call  # two calls of _layer, from the same line
    assert eqns[1].source_info.callers[1] is eqns[0].source_info.call_path[1]
    # SourceInfo still names a line: the innermost frame, equal whatever the path
    assert eqns[1].source_info == SourceInfo(__file__, eqns[1].source_info.line, "_relu")
    assert str(eqns[1].source_info) == f"{__file__}:{eqns[1].source_info.line} (_relu)"


def test_a_jitted_function_s_call_path_starts_at_it_and_eager_code_has_none():
    inner = nbjax.jit(_layer)

    def outer(x):
        return inner(2.0, jnp.sin(x))
    eqns = nbjax.make_jaxpr(outer)(np.ones(3, np.float32)).jaxpr.eqns
    assert [_path(e.source_info)[-1][0] for e in eqns] == ["outer", "outer"]
    called = [e for e in eqns if e.primitive.call_param is not None]
    sub = called[0].params[called[0].primitive.call_param].jaxpr.eqns
    assert [[name for name, _ in _path(e.source_info)] for e in sub[-3:]] == \
        [["_layer"], ["_layer", "_relu"], ["_layer"]]  # (after converting w)
    # an internal function traced directly: the equation's line is this test's, its path
    # None (the test is not inside the traced function)
    (eqn,) = nbjax.make_jaxpr(jnp.sin)(1.0).jaxpr.eqns
    assert eqn.source_info.function == "test_a_jitted_function_s_call_path_starts_at_it_and_" \
        "eager_code_has_none" and eqn.source_info.call_path is None
    assert user_frame().call_path is None  # no trace running


def test_eval_jaxpr_matches_eager_and_check_jaxpr_passes():
    def f(x, y):
        return jnp.sin(x) * y + x
    x, y = np.linspace(0, 1, 5).astype(np.float32), np.float32(3)
    closed = nbjax.make_jaxpr(f)(x, y)
    check_jaxpr(closed.jaxpr)
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    assert_close(np.asarray(out), np.asarray(f(x, y)), rtol=1e-6)


def test_check_jaxpr_rejects_ill_typed_and_undefined():
    a = Var(ShapedArray((3,), np.float32))
    b = Var(ShapedArray((4,), np.float32))
    bad = Jaxpr([], [a], [b], [JaxprEqn([a], [b], lax.sin_p, {})])
    with pytest.raises(nbjax.core.JaxprTypeError, match="declares"):
        check_jaxpr(bad)
    c = Var(ShapedArray((3,), np.float32))
    undefined = Jaxpr([], [a], [c], [JaxprEqn([c], [b], lax.sin_p, {})])
    with pytest.raises(nbjax.core.JaxprTypeError, match="before it is defined"):
        check_jaxpr(undefined)


def test_missing_rule_is_not_implemented_error():
    prim = nbjax.core.Primitive("my_op")
    prim.def_abstract_eval(lambda x: x)
    prim.def_impl(lambda x: x)
    assert float(prim.bind(np.float32(2))) == 2.0
    with pytest.raises(NotImplementedError, match="no jvp rule for primitive my_op"):
        nbjax.jvp(prim.bind, (np.float32(1),), (np.float32(1),))
    with pytest.raises(NotImplementedError, match="no batch rule for primitive my_op"):
        nbjax.vmap(prim.bind)(np.ones(3, np.float32))


def test_nested_make_jaxpr_closes_over_outer_tracer():
    def outer(x):
        inner = nbjax.make_jaxpr(lambda y: y * x)(1.0)
        assert len(inner.jaxpr.constvars) == 1  # the outer tracer became a constvar
        return x
    nbjax.make_jaxpr(outer)(2.0)


def test_closed_jaxpr_requires_consts():
    a = Var(ShapedArray((), np.float32))
    with pytest.raises(ValueError):
        ClosedJaxpr(Jaxpr([a], [], [a], []), [])

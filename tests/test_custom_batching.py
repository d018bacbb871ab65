"""``nbjax.custom_batching``: ``custom_vmap`` (the rule and what it is handed, pytrees,
nesting, jit in either order, the staged equation, forward mode, reverse mode's error, the
rule's malformed outputs) and ``sequential_vmap``."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.compiler.passes import optimize
from nbjax.core import check_jaxpr
from nbjax.custom_batching import custom_vmap, sequential_vmap
from helpers import assert_close, check_vmap, eager_and_traced, loop_vmap, random_array

rng = np.random.default_rng(7)


def recording_custom_vmap(module=nbjax):
    """``f(x, y) = sin(x) * y`` with a rule computing the same batched, and the list of
    ``(axis_size, in_batched, shapes of the arguments)`` of each call of the rule."""
    np_ = module.numpy
    calls = []

    @module.custom_batching.custom_vmap
    def f(x, y):
        return np_.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        calls.append((axis_size, in_batched, np_.shape(x), np_.shape(y)))
        return np_.sin(x) * y, in_batched[0] or in_batched[1]
    return f, calls


def product_instead_of_sum(module=nbjax):
    """``f(x, y) = x + y`` whose rule computes ``x * y`` (JAX's documentation's example): a
    result tells whether the rule ran. Also returns the list of the rule's ``in_batched``."""
    calls = []

    @module.custom_batching.custom_vmap
    def f(x, y):
        return x + y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        calls.append(in_batched)
        return x * y, in_batched[0] or in_batched[1]
    return f, calls


def test_outside_vmap_the_function_runs_and_the_rule_does_not():
    f, calls = recording_custom_vmap()
    x, y = random_array(rng, (4,)), random_array(rng, (4,))
    assert_close(eager_and_traced(f, x, y), np.sin(x) * y, rtol=1e-6)
    assert_close(f(y=y, x=x), np.sin(x) * y, rtol=1e-6)
    assert calls == []


@pytest.mark.parametrize("in_axes, x_shape, y_shape, in_batched", [
    ((0, 0), (3, 4), (3, 4), [True, True]),
    ((0, None), (3, 4), (4,), [True, False]),
    ((None, 1), (4,), (4, 3), [False, True]),
    ((1, -1), (4, 3), (4, 3), [True, True]),
])
def test_the_rule_gets_batch_axes_first_and_which_arguments_are_batched(
        in_axes, x_shape, y_shape, in_batched):
    f, calls = recording_custom_vmap()
    x, y = random_array(rng, x_shape), random_array(rng, y_shape)
    out = nbjax.vmap(f, in_axes)(x, y)
    assert calls == [(3, in_batched, (3, 4) if in_batched[0] else (4,),
                      (3, 4) if in_batched[1] else (4,))]
    assert_close(out, loop_vmap(lambda a, b: np.sin(a) * b, (x, y), in_axes), rtol=1e-6)
    check_vmap(f, (x, y), in_axes)


def test_pytree_arguments_and_outputs():
    calls = []

    @custom_vmap
    def f(d, pair):
        return {"s": d["a"] * d["b"] + pair[0], "u": pair[1] * 2.0}

    @f.def_vmap
    def rule(axis_size, in_batched, d, pair):
        calls.append(in_batched)
        return f(d, pair), {"s": True, "u": in_batched[1][1]}

    d = {"a": random_array(rng, (3, 2)), "b": random_array(rng, (2,))}
    pair = (random_array(rng, (2,)), random_array(rng, (3, 2)))
    out = nbjax.vmap(f, in_axes=({"a": 0, "b": None}, (None, 0)))(d, pair)
    assert calls == [[{"a": True, "b": False}, (False, True)]]
    assert_close(out["s"], d["a"] * d["b"] + pair[0], rtol=1e-6)
    assert_close(out["u"], pair[1] * 2, rtol=1e-6)


def test_unbatched_outputs_are_broadcast_where_needed():
    @custom_vmap
    def f(x, c):
        return x * c, c + 1.0

    @f.def_vmap
    def rule(axis_size, in_batched, x, c):
        return (x * c, c + 1.0), (True, False)

    x, c = random_array(rng, (3, 2)), random_array(rng, (2,))
    scaled, shifted = nbjax.vmap(f, in_axes=(0, None))(x, c)
    assert_close(scaled, x * c, rtol=1e-6)
    assert_close(shifted, np.broadcast_to(c + 1, (3, 2)), rtol=1e-6)
    _, unmapped = nbjax.vmap(f, in_axes=(0, None), out_axes=(0, None))(x, c)
    assert_close(unmapped, c + 1, rtol=1e-6)


def test_nested_vmap_the_innermost_calls_a_rule_that_computes_directly():
    f, calls = recording_custom_vmap()
    x, y = random_array(rng, (2, 3)), random_array(rng, (2, 3))
    assert_close(nbjax.vmap(nbjax.vmap(f))(x, y), np.sin(x) * y, rtol=1e-6)
    assert calls == [(3, [True, True], (3,), (3,))]


def test_nested_vmap_calls_a_rule_that_calls_the_function_once_per_level():
    calls = []

    @custom_vmap
    def f(x):
        return x * 2.0

    @f.def_vmap
    def rule(axis_size, in_batched, x):
        calls.append((axis_size, x.shape))
        return f(x) + 1.0, True

    x = random_array(rng, (2, 3))
    assert_close(nbjax.vmap(nbjax.vmap(f), in_axes=1)(x), (x * 2 + 2).T, rtol=1e-6)
    assert calls == [(2, (2,)), (3, (3, 2))]


def test_jit_of_vmap_and_vmap_of_jit():
    f, calls = product_instead_of_sum()
    x, y = random_array(rng, (5,)), random_array(rng, (5,))
    assert_close(nbjax.jit(nbjax.vmap(f))(x, y), x * y, rtol=1e-6)
    assert_close(nbjax.vmap(nbjax.jit(f))(x, y), x * y, rtol=1e-6)
    assert_close(nbjax.jit(nbjax.vmap(f, in_axes=(0, None)))(x, y[0]), x * y[0], rtol=1e-6)
    assert calls == [[True, True], [True, True], [True, False]]


def test_jit_compiles_the_function_inlined():
    f, calls = product_instead_of_sum()
    x, y = random_array(rng, (5,)), random_array(rng, (5,))
    assert_close(nbjax.jit(f)(x, y), x + y, rtol=1e-6)
    closed = nbjax.make_jaxpr(f)(x, y)
    check_jaxpr(closed.jaxpr)
    assert [e.primitive.name for e in closed.eqns] == ["custom_vmap_call"]
    optimized, log = optimize(closed)
    assert [e.primitive.name for e in optimized.eqns] == ["add"]
    assert any(r.rule == "inline" and r.eqn.primitive.name == "custom_vmap_call" for r in log)
    assert calls == []


def test_make_jaxpr_prints_one_custom_vmap_call_as_jax_does():
    f, _ = recording_custom_vmap()
    assert str(nbjax.make_jaxpr(f)(1.0, 2.0)) == """\
{ lambda ; a:f32[] b:f32[]. let
    c:f32[] = custom_vmap_call[
      call={ lambda ; d:f32[] e:f32[]. let
          f:f32[] = sin d
          g:f32[] = mul f e
        in (g,) }
      in_tree=PyTreeDef(([], (*, *)))
      out_tree=PyTreeDef(*)
      rule=<function recording_custom_vmap.<locals>.rule at 0xXXXXXXXXXXXX>
    ] a b
  in (c,) }"""


def test_jvp_differentiates_the_function():
    f, calls = product_instead_of_sum()
    x, y, tx, ty = (random_array(rng, (4,)) for _ in range(4))
    out, tangent = nbjax.jvp(f, (x, y), (tx, ty))
    assert_close(out, x + y, rtol=1e-6)
    assert_close(tangent, tx + ty, rtol=1e-6)
    closed = nbjax.make_jaxpr(lambda *a: nbjax.jvp(f, a[:2], a[2:]))(x, y, tx, ty)
    [eqn] = closed.eqns
    assert eqn.primitive.name == "custom_vmap_call" and len(eqn.invars) == 4
    assert calls == []


@pytest.mark.parametrize("primal_axes, tangent_axes, in_batched", [
    ((0, 0), (0, 0), [True, True]),
    ((0, 0), (None, None), [False, False]),  # JAX: the rule runs under a vmap of its own
    ((None, None), (0, None), [False, False]),
    ((0, 0), (0, None), [True, True]),  # here JAX's outputs get two batch axes
])
def test_vmap_of_jvp_uses_the_jvp_of_the_rule(primal_axes, tangent_axes, in_batched):
    f, calls = product_instead_of_sum()
    args = [random_array(rng, (3,) if axis == 0 else ()) for axis in primal_axes + tangent_axes]

    def jvp_of_f(x, y, tx, ty):
        return nbjax.jvp(f, (x, y), (tx, ty))
    out, tangent = nbjax.vmap(jvp_of_f, in_axes=primal_axes + tangent_axes)(*args)
    x, y, tx, ty = args
    assert_close(out, np.broadcast_to(x * y, (3,)), rtol=1e-6)
    assert_close(tangent, np.broadcast_to(tx * y + x * ty, (3,)), rtol=1e-6)
    assert calls == [in_batched]


def test_jvp_of_vmap_differentiates_the_rule():
    f, _ = product_instead_of_sum()
    x, y, tx, ty = (random_array(rng, (4,)) for _ in range(4))
    out, tangent = nbjax.jvp(nbjax.vmap(f), (x, y), (tx, ty))
    assert_close(out, x * y, rtol=1e-6)
    assert_close(tangent, tx * y + x * ty, rtol=1e-6)
    assert_close(nbjax.grad(lambda a: nbjax.vmap(f)(a, y).sum())(x), y, rtol=1e-6)


def test_integer_arguments_get_no_tangent():
    @custom_vmap
    def scale(n, x):
        return x * n

    @scale.def_vmap
    def rule(axis_size, in_batched, n, x):
        return x * n, any(in_batched)

    n, x = np.arange(3, dtype=np.int32), random_array(rng, (3,))
    float0_zero = np.zeros((), nbjax.core.dtypes.float0)
    out, tangent = nbjax.vmap(lambda n, x: nbjax.jvp(scale, (n, x), (float0_zero, 1.0)))(n, x)
    assert_close(out, x * n, rtol=1e-6)
    assert_close(tangent, n.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("transform, shape", [
    (lambda f: nbjax.grad(f), ()),
    (lambda f: lambda x, y: nbjax.vjp(f, x, y)[0], (3,)),
    (lambda f: lambda x, y: nbjax.linearize(f, x, y)[0], (3,)),
    (lambda f: nbjax.vmap(nbjax.grad(f)), (3,)),
    (lambda f: nbjax.jit(nbjax.grad(f)), ()),
])
def test_reverse_mode_raises_as_jax_does(transform, shape):
    f, _ = product_instead_of_sum()
    x = random_array(rng, shape)
    with pytest.raises(ValueError, match="Linearization failed to produce known values"):
        transform(f)(x, x)


def test_custom_vjp_of_a_custom_vmap_function():
    """JAX's way to have both rules (its documentation's example): the custom_vjp object
    answers ``def_vmap`` for the custom_vmap function it wraps."""
    @nbjax.custom_vjp
    @custom_vmap
    def f(x, y):
        return jnp.sin(x) * y

    @f.def_vmap
    def f_vmap_rule(axis_size, in_batched, xs, ys):
        return jnp.cos(xs) * ys, True

    f.defvjp(lambda x, y: (f(x, y), (jnp.cos(x), jnp.sin(x), y)),
             lambda res, g: (res[0] * g * res[2], res[1] * g))
    x, y = random_array(rng, (3,)), random_array(rng, (3,))
    assert_close(nbjax.vmap(f)(x, y), np.cos(x) * y, rtol=1e-6)
    assert_close(nbjax.grad(f)(x[0], y[0]), np.cos(x[0]) * y[0], rtol=1e-6)
    assert_close(nbjax.vmap(nbjax.grad(f))(x, y), np.cos(x) * y, rtol=1e-6)


def test_sequential_vmap_maps_with_a_loop():
    """A host callback without a ``vmap_method`` cannot be batched; ``sequential_vmap``
    calls it once per batch member."""
    seen = []

    def host_norm(v):
        seen.append(v.shape)
        return np.asarray(np.linalg.norm(v), np.float32)

    def norm_plus(v, c):
        norm = nbjax.pure_callback(host_norm, nbjax.ShapeDtypeStruct((), np.float32), v)
        return norm + c

    x, c = random_array(rng, (4, 3)), random_array(rng, ())
    with pytest.raises(NotImplementedError, match="vmap_method"):
        nbjax.vmap(norm_plus, in_axes=(0, None))(x, c)
    f = sequential_vmap(norm_plus)
    expected = np.linalg.norm(x, axis=1) + c
    assert_close(nbjax.vmap(f, in_axes=(0, None))(x, c), expected, rtol=1e-6)
    assert seen == [(3,)] * 4
    assert_close(nbjax.jit(nbjax.vmap(f, in_axes=(0, None)))(x, c), expected, rtol=1e-6)
    assert "scan" in str(nbjax.make_jaxpr(nbjax.vmap(f, in_axes=(0, None)))(x, c))


def test_sequential_vmap_nested_and_with_pytrees():
    f = sequential_vmap(lambda d: (d["w"] @ d["v"], d["w"].sum()))
    d = {"w": random_array(rng, (2, 3, 4, 5)), "v": random_array(rng, (5,))}
    in_axes = ({"w": 0, "v": None},)
    got = nbjax.vmap(nbjax.vmap(f, in_axes), in_axes)(d)
    assert_close(got[0], d["w"] @ d["v"], rtol=1e-5, scale=np.abs(d["w"]) @ np.abs(d["v"]))
    assert_close(got[1], d["w"].sum(axis=(2, 3)), rtol=1e-5,
                 scale=np.abs(d["w"]).sum(axis=(2, 3)))


def rule_returning(value_and_flags):
    f = custom_vmap(lambda x: x * 2.0)
    f.def_vmap(lambda axis_size, in_batched, x: value_and_flags(x))
    return f


@pytest.mark.parametrize("value_and_flags, error, message", [
    (lambda x: (x, (True,)), ValueError,
     r"output value and output batching specification returned by custom vmap rule "
     r"\(<lambda>\) do not match.\nOutput values: PyTreeDef\(\*\)\n"
     r"Batching spec: PyTreeDef\(\(\*,\)\)"),
    (lambda x: ((x, x), (True, True)), ValueError,
     r"output returned by custom vmap rule \(<lambda>\) does not match that of original "
     r"custom-vmapped function.\nOriginal output: PyTreeDef\(\*\)\n"
     r"Rule output: PyTreeDef\(\(\*, \*\)\)"),
    (lambda x: (x, True, None), ValueError, "too many values to unpack"),
    (lambda x: (x.sum(), True), ValueError, "marked batched whose shape"),
])
def test_malformed_rule_outputs(value_and_flags, error, message):
    f = rule_returning(value_and_flags)
    with pytest.raises(error, match=message):
        nbjax.vmap(f)(random_array(rng, (3,)))


def test_errors_of_the_call():
    f = custom_vmap(lambda x: x)
    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap "
                                             "function <lambda> using def_vmap"):
        f(1.0)
    f.def_vmap(lambda axis_size, in_batched, x: (x, True))
    with pytest.raises(TypeError, match="could not be resolved to positional-only arguments"):
        f(1.0, 2.0)

    def closes_over(c):
        g = custom_vmap(lambda x: x * c)
        g.def_vmap(lambda axis_size, in_batched, x: (x * 2.0, True))
        return g(1.0)
    with pytest.raises(ValueError, match="closes over a value that vmap batches"):
        nbjax.vmap(closes_over)(random_array(rng, (3,)))


def test_agrees_with_jax():
    """The rule's arguments, the results and the printed jaxprs, next to JAX's."""
    jax = pytest.importorskip("jax")
    x = random_array(rng, (3, 2))
    results = []
    for module in (nbjax, jax):
        f, calls = recording_custom_vmap(module)
        out = [module.vmap(f, (0, None))(x, x[0]), module.vmap(f, (1, None))(x, x[:, 0])]
        ones = np.ones_like(x[0])
        out.append(module.vmap(lambda a: module.jvp(f, (a, x[0]), (ones, a)))(x))
        texts = [str(module.make_jaxpr(f)(x, x)),
                 str(module.make_jaxpr(lambda a, b: module.jvp(f, (a, b), (b, a)))(x, x))]
        results.append((out, calls, texts))
    (ours, our_calls, our_texts), (theirs, their_calls, their_texts) = results
    for a, b in zip(nbjax.tree_util.tree_leaves(ours), nbjax.tree_util.tree_leaves(theirs)):
        assert_close(a, np.asarray(b), rtol=1e-6)
    assert our_calls == their_calls
    assert our_texts[0] == their_texts[0]
    # (the JVP's rule prints as a function of nbjax's and one of JAX's)
    strip = lambda text: text[:text.index("rule=")]
    assert strip(our_texts[1]) == strip(their_texts[1])

"""Autodiff API: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian,
custom rules, checkpoint, composition with vmap, errors, and the jaxprs reverse mode stages."""

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.test_util import check_grads
from helpers import assert_close, random_array

rng = np.random.default_rng(1)


def test_seed_grad_of_sum_of_cubes_is_exact():
    g = nbjax.grad(lambda x: jnp.sum(x ** 3))(jnp.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(np.asarray(g), [3.0, 12.0, 27.0, 48.0])


def test_grad_argnums_has_aux_and_value_and_grad():
    f = lambda x, y: jnp.sum(jnp.sin(x) * y)
    x, y = random_array(rng, (3,)), random_array(rng, (3,))
    gx, gy = nbjax.grad(f, argnums=(0, 1))(x, y)
    assert_close(gx, np.cos(x) * y, rtol=1e-5)
    assert_close(gy, np.sin(x), rtol=1e-5)
    assert_close(nbjax.grad(f, argnums=1)(x, y), np.sin(x), rtol=1e-5)
    (value, aux), g = nbjax.value_and_grad(lambda x: (jnp.sum(x ** 2), x * 3), has_aux=True)(x)
    assert_close(value, np.sum(x ** 2), rtol=1e-5)
    assert_close(aux, x * 3, rtol=1e-6)
    assert_close(g, 2 * x, rtol=1e-6)
    g, aux = nbjax.grad(lambda x: (jnp.sum(x), {"n": 1}), has_aux=True)(x)
    assert aux == {"n": 1}


def test_aux_leaves_that_are_not_arrays_come_back_as_they_are():
    """Auxiliary data may hold anything (a label, None, an object): JAX hands back what is
    not an array unchanged, and traced arrays as their values."""
    def f(x):
        return jnp.sum(x * 2), {"label": "loss", "none": None, "x": x, "f": jnp.sin}
    x = np.arange(3.0, dtype=np.float32)
    for aux in [nbjax.grad(f, has_aux=True)(x)[1],
                nbjax.value_and_grad(f, has_aux=True)(x)[0][1],
                nbjax.vjp(f, x, has_aux=True)[2],
                nbjax.jacrev(f, has_aux=True)(x)[1],
                nbjax.jvp(f, (x,), (x,), has_aux=True)[2]]:
        assert aux["label"] == "loss" and aux["none"] is None and aux["f"] is jnp.sin
        assert isinstance(aux["x"], nbjax.core.Array)
        np.testing.assert_array_equal(aux["x"], x)


@pytest.mark.parametrize("call, error, match", [
    # (JAX's errors: grad's own for a missing argument, the shared one otherwise)
    (lambda f: nbjax.grad(f, argnums=2)(1.0, 1.0), TypeError,
     r"argnums=2 requires at least 3 positional arguments .* got only 2"),
    (lambda f: nbjax.value_and_grad(f, argnums=(0, 2))(1.0, 1.0), TypeError,
     r"argnums=\(0, 2\) requires at least 3"),
    (lambda f: nbjax.grad(f, argnums=-3)(1.0, 1.0), ValueError,
     r"got value -3 for len\(args\) == 2"),
    (lambda f: nbjax.jacrev(f, argnums=2)(1.0, 1.0), ValueError,
     r"got value 2 for len\(args\) == 2"),
    (lambda f: nbjax.jacfwd(f, argnums=2)(1.0, 1.0), ValueError, "greater than or equal to"),
])
def test_argnums_out_of_range(call, error, match):
    with pytest.raises(error, match=match):
        call(lambda x, y: x * y)


def test_grad_over_pytrees():
    params = {"w": random_array(rng, (3, 2)), "b": random_array(rng, (2,))}
    x = random_array(rng, (4, 3))
    loss = lambda p: jnp.sum(jnp.tanh(x @ p["w"] + p["b"]) ** 2)
    g = nbjax.grad(loss)(params)
    assert set(g) == {"w", "b"} and g["w"].shape == (3, 2)
    check_grads(loss, (params,), order=1)


def test_higher_order_and_composition():
    f = lambda x: jnp.sin(x) * x ** 2
    x = np.float32(0.7)
    d2 = nbjax.grad(nbjax.grad(f))(x)
    expected = -np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x)
    assert_close(d2, expected, rtol=1e-5)
    check_grads(f, (x,), order=2)
    xs = random_array(rng, (5,))
    assert_close(nbjax.vmap(nbjax.grad(f))(xs),
                 [nbjax.grad(f)(v) for v in xs], rtol=1e-6)
    assert_close(nbjax.grad(lambda v: nbjax.vmap(f)(v).sum())(xs),
                 nbjax.vmap(nbjax.grad(f))(xs), rtol=1e-6)


def test_per_example_gradients():
    w = random_array(rng, (3,))
    xs, ys = random_array(rng, (6, 3)), random_array(rng, (6,))
    loss = lambda w, x, y: (jnp.dot(x, w) - y) ** 2
    per_example = nbjax.vmap(nbjax.grad(loss), in_axes=(None, 0, 0))(w, xs, ys)
    expected = np.stack([2 * (x @ w - y) * x for x, y in zip(xs, ys)])
    np.testing.assert_allclose(per_example, expected, rtol=1e-4, atol=1e-5)


def _numeric_jacobian(f, x, eps=1e-3):
    x = np.asarray(x, np.float64)
    cols = []
    for i in range(x.size):
        dx = np.zeros(x.size)
        dx[i] = eps
        dx = dx.reshape(x.shape)
        cols.append((np.asarray(f(x + dx), np.float64) - np.asarray(f(x - dx))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(f(x)) + x.shape)


def test_jacobians_and_hessian_against_finite_differences():
    f = lambda x: jnp.stack([jnp.sum(jnp.sin(x)), jnp.prod(x), x[0] * x[1] ** 2])
    x = random_array(rng, (3,))
    num = _numeric_jacobian(lambda v: f(v.astype(np.float32)), x)
    np.testing.assert_allclose(nbjax.jacfwd(f)(x), num, rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(nbjax.jacrev(f)(x), num, rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(nbjax.jacfwd(nbjax.jacrev(f))(x),
                               nbjax.jacrev(nbjax.jacfwd(f))(x), rtol=1e-4, atol=1e-5)
    g = lambda x: jnp.sum(x ** 3) + x[0] * x[1]
    h = nbjax.hessian(g)(x)
    expected = np.diag(6 * x) + np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(h, expected, rtol=1e-5, atol=1e-5)
    m = random_array(rng, (2, 3))
    jac = nbjax.jacrev(lambda m: m * 2.0)(m)
    assert jac.shape == (2, 3, 2, 3)
    assert_close(jac, 2 * np.eye(6).reshape(2, 3, 2, 3))
    jac = nbjax.jacfwd(lambda a, b: a * b, argnums=(0, 1))(random_array(rng, (2,)),
                                                         random_array(rng, (2,)))
    assert isinstance(jac, tuple) and jac[0].shape == (2, 2)


def test_a_traced_jacobian_builds_its_basis_from_iotas_not_a_constant():
    """jacfwd and jacrev push the identity through the function; traced (under jit), it is
    made of iotas as JAX's ``jnp.eye`` is, not held as an n x n constant. Blocks of several
    inputs of mixed dtypes and shapes keep their places and types."""
    def f(a, b):
        return jnp.concatenate([jnp.sin(a).ravel() * 2, b.astype(jnp.float32) ** 2])
    a = random_array(rng, (2, 3))
    b = random_array(rng, (4,)).astype(np.float16)
    for jac in (nbjax.jacfwd, nbjax.jacrev):
        jaxpr = nbjax.make_jaxpr(jac(f, argnums=(0, 1)))(a, b)
        assert all(v.aval.size < 10 for v in jaxpr.jaxpr.constvars), jaxpr
        assert "iota" in str(jaxpr)
        da, db = nbjax.jit(jac(f, argnums=(0, 1)))(a, b)
        assert da.shape == (10, 2, 3) and db.shape == (10, 4)
        expected_a = np.zeros((10, 6), np.float32)
        expected_a[np.arange(6), np.arange(6)] = 2 * np.cos(a.ravel())
        np.testing.assert_allclose(da, expected_a.reshape(10, 2, 3), rtol=1e-5, atol=1e-6)
        expected_b = np.zeros((10, 4), np.float32)
        expected_b[np.arange(6, 10), np.arange(4)] = 2 * b.astype(np.float32)
        np.testing.assert_allclose(np.asarray(db, np.float32), expected_b, rtol=1e-3,
                                   atol=1e-3)


def test_jvp_and_linearize():
    x, t = random_array(rng, (4,)), random_array(rng, (4,))
    out, tout = nbjax.jvp(jnp.sin, (x,), (t,))
    assert_close(out, np.sin(x), rtol=1e-6)
    assert_close(tout, np.cos(x) * t, rtol=1e-5)
    out, f_jvp = nbjax.linearize(lambda x: jnp.exp(x) * 2.0, x)
    assert_close(f_jvp(t), np.exp(x) * 2 * t, rtol=1e-5)
    with pytest.raises(TypeError, match="tuples or lists"):
        nbjax.jvp(jnp.sin, x, t)
    with pytest.raises(TypeError, match="dtypes must be equal"):
        nbjax.jvp(jnp.sin, (x,), (t.astype(np.int32),))


def test_vjp_structure_errors():
    out, pullback = nbjax.vjp(lambda x: (x, x * 2), random_array(rng, (3,)))
    with pytest.raises(ValueError, match="unexpected tree structure"):  # (JAX 0.10's kind)
        pullback(random_array(rng, (3,)))
    with pytest.raises(ValueError, match=r"unexpected JAX type \(e.g. shape/dtype\)"):
        pullback((random_array(rng, (2,)), random_array(rng, (3,))))


def test_grad_errors():
    with pytest.raises(TypeError, match="scalar-output.*jacrev"):
        nbjax.grad(jnp.sin)(random_array(rng, (3,)))
    with pytest.raises(TypeError, match="allow_int"):
        nbjax.grad(lambda x: x * 2.0)(3)
    g = nbjax.grad(lambda x, y: y * 2.0, allow_int=True)(3, 1.0)
    assert g.dtype == nbjax.core.dtypes.float0
    with pytest.raises(TypeError, match="real-valued outputs"):
        nbjax.grad(lambda x: x.astype(jnp.int32))(1.0)
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex"):
        nbjax.grad(lambda x: x, holomorphic=True)(1.0)


def test_holomorphic_grad():
    z = np.complex64(1.0 + 2.0j)
    assert_close(nbjax.grad(lambda z: z ** 2, holomorphic=True)(z), 2 * z,
                 rtol=1e-6)


def test_stop_gradient():
    g = nbjax.grad(lambda x: x * nbjax.lax.stop_gradient(x))(np.float32(3.0))
    assert float(g) == 3.0


def test_custom_jvp_and_defjvps():
    @nbjax.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2.0 * jnp.cos(x) * t  # deliberately twice the true derivative

    x = np.float32(0.4)
    assert_close(nbjax.grad(f)(x), 2 * np.cos(x), rtol=1e-6)
    assert_close(nbjax.vmap(nbjax.grad(f))(random_array(rng, (3,)) * 0 + x),
                 np.full(3, 2 * np.cos(x)), rtol=1e-6)
    assert_close(nbjax.jacfwd(f)(x), 2 * np.cos(x), rtol=1e-6)

    g = nbjax.custom_jvp(lambda x, y: x * y)
    g.defjvps(lambda t, ans, x, y: t * y * 10.0, None)
    assert_close(nbjax.grad(g)(np.float32(2.0), np.float32(3.0)), 30.0)

    def outer(c):
        h = nbjax.custom_jvp(lambda x: x * c)
        h.defjvp(lambda p, t: (p[0] * c, t[0] * c))
        return h(1.0)
    with pytest.raises(TypeError, match="closed-over value"):
        nbjax.grad(outer)(np.float32(2.0))


def test_custom_jvp_nondiff_argnums():
    @nbjax.custom_jvp
    def half_grad(x):
        return x
    half_grad.defjvp(lambda p, t: (p[0], t[0] * 0.5))  # tangent rules must stay linear
    assert float(nbjax.grad(lambda x: half_grad(x) * 5.0)(np.float32(1.0))) == 2.5

    f = nbjax.custom_jvp(lambda n, x: x ** n, nondiff_argnums=(0,))
    f.defjvp(lambda n, p, t: (p[0] ** n, n * p[0] ** (n - 1) * t[0]))
    assert_close(nbjax.grad(f, argnums=1)(3, np.float32(2.0)), 12.0)


def test_custom_vjp():
    @nbjax.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def fwd(x, y):
        return f(x, y), (jnp.cos(x), jnp.sin(x), y)

    def bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)

    f.defvjp(fwd, bwd)
    x, y = np.float32(0.5), np.float32(2.0)
    gx, gy = nbjax.grad(f, argnums=(0, 1))(x, y)
    assert_close([gx, gy], [np.cos(x) * y, np.sin(x)], rtol=1e-6)
    xs = random_array(rng, (4,))
    assert_close(nbjax.vmap(nbjax.grad(f), in_axes=(0, None))(xs, y),
                 np.cos(xs) * y, rtol=1e-5)
    assert_close(nbjax.grad(lambda v: nbjax.vmap(f, (0, None))(v, y).sum())(xs),
                 np.cos(xs) * y, rtol=1e-5)
    with pytest.raises(TypeError, match="forward-mode"):
        nbjax.jvp(f, (x, y), (x, y))

    bad = nbjax.custom_vjp(lambda x, y: x * y)
    bad.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))
    with pytest.raises(TypeError, match="same container"):
        nbjax.grad(bad)(x, y)


def test_checkpoint_recomputes_in_backward_pass():
    f = nbjax.checkpoint(lambda x: jnp.sin(jnp.sin(x)))
    x = np.float32(0.5)
    assert_close(nbjax.grad(f)(x), np.cos(np.sin(x)) * np.cos(x), rtol=1e-6)
    check_grads(f, (x,), order=2)
    assert nbjax.remat is nbjax.checkpoint
    closed = nbjax.make_jaxpr(nbjax.grad(f))(x)
    nbjax.core.check_jaxpr(closed.jaxpr)
    assert closed.eqns[0].primitive.name == "checkpoint"
    xs = random_array(rng, (3,))
    assert_close(nbjax.vmap(nbjax.grad(f))(xs),
                 [nbjax.grad(f)(v) for v in xs], rtol=1e-6)


def test_checkpoint_static_argnums_as_jax():
    def f(x, n):
        return jnp.sin(x) ** n
    x = random_array(0, (3,))
    for argnums in (1, (-1,)):
        g = nbjax.grad(lambda v: nbjax.checkpoint(f, static_argnums=argnums)(v, 3).sum())
        assert_close(g(x), 3 * np.sin(x) ** 2 * np.cos(x), rtol=1e-5)
    with pytest.raises(ValueError, match="static_argnums"):  # JAX: ValueError, too
        nbjax.checkpoint(f, static_argnums=2)(x, 3)


def test_grad_jaxpr_is_forward_then_backward_with_provenance():
    def f(x):
        y = jnp.sin(x)
        return y * x
    closed = nbjax.make_jaxpr(nbjax.grad(f))(np.float32(1.0))
    text = str(closed)
    assert text == ("{ lambda ; a:f32[]. let\n"
                    "    b:f32[] = sin a\n"
                    "    c:f32[] = cos a\n"
                    "    _:f32[] = mul b a\n"
                    "    d:f32[] = mul b 1.0:f32[]\n"
                    "    e:f32[] = mul 1.0:f32[] a\n"
                    "    f:f32[] = mul e c\n"
                    "    g:f32[] = add_any d f\n"
                    "  in (g,) }")
    phases = [(e.primitive.name, e.provenance.phase, e.provenance.primitive)
              for e in closed.eqns]
    assert phases[:3] == [("sin", "forward", "sin"), ("cos", "forward", "sin"),
                          ("mul", "forward", "mul")]
    backward = [p for p in phases if p[1] == "backward"]
    assert ("mul", "backward", "sin") in backward and ("mul", "backward", "mul") in backward
    sin_ids = {e.provenance.id for e in closed.eqns if e.provenance.primitive == "sin"}
    assert len(sin_ids) == 1  # forward sin/cos and backward mul are linked
    assert all(e.source_info.function == "f" for e in closed.eqns)


def test_transformed_equations_come_from_the_lines_they_transform():
    """Differentiating re-binds each equation of a jaxpr (a scan's body, the linear jaxpr
    being transposed): what that stages comes from the original equation's line, as in
    JAX, not from the line that called ``grad``."""
    def f(w, xs):
        def step(h, x):
            h = jnp.tanh(h * w + x)
            return h, h * 2.0
        h, ys = nbjax.lax.scan(step, jnp.zeros(3), xs)
        return jnp.sum(ys) + jnp.sum(h)
    closed = nbjax.make_jaxpr(nbjax.grad(f))(np.ones(3, np.float32),
                                              np.ones((4, 3), np.float32))
    scans = [e for e in closed.eqns if e.primitive.name == "scan"]
    assert len(scans) == 2  # forward, then backward
    body_lines = {"h = jnp.tanh(h * w + x)", "return h, h * 2.0"}
    assert {e.source_info.source_line() for e in scans[0].params["jaxpr"].eqns} == body_lines
    # the backward body also accumulates w's cotangent: the scan's transpose rule does
    assert {e.source_info.source_line() for e in scans[1].params["jaxpr"].eqns} == \
        body_lines | {"h, ys = nbjax.lax.scan(step, jnp.zeros(3), xs)"}
    assert {e.source_info.function for e in closed.eqns} == {"f"}


def test_while_loop_reverse_mode_error_suggests_scan():
    def f(x):
        return nbjax.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)
    assert_close(nbjax.jvp(f, (np.float32(1.0),), (np.float32(1.0),))[1], 16.0)
    with pytest.raises(ValueError, match="scan"):
        nbjax.grad(f)(np.float32(1.0))


def test_custom_jvp_function_applied_to_tangents_inside_a_rule():
    double = nbjax.custom_jvp(lambda x: x * 2.0)
    double.defjvp(lambda p, t: (double(p[0]), t[0] * 2.0))
    triple = nbjax.custom_jvp(lambda x: x * 3.0)
    triple.defjvp(lambda p, t: (triple(p[0]), double(t[0]) * 1.5))  # linear in t
    assert float(nbjax.grad(triple)(np.float32(1.0))) == 3.0
    check_grads(triple, (np.float32(0.5),), order=1)


def test_custom_vjp_nondiff_argnums_and_pytrees():
    @nbjax.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, None

    def bwd(lo, hi, res, g):
        return (jnp.clip(g, lo, hi),)

    clip_gradient = nbjax.custom_vjp(clip_gradient.fun, nondiff_argnums=(0, 1))
    clip_gradient.defvjp(fwd, bwd)
    g = nbjax.grad(lambda x: clip_gradient(-0.5, 0.5, x) * 3.0)(np.float32(2.0))
    assert float(g) == 0.5

    @nbjax.custom_vjp
    def scale(params, x):
        return params["w"] * x

    scale.defvjp(lambda p, x: (p["w"] * x, (p, x)),
                 lambda res, g: ({"w": g * res[1]}, g * res[0]["w"]))
    grads = nbjax.grad(lambda p, x: scale(p, x), argnums=(0, 1))({"w": np.float32(3.0)},
                                                                 np.float32(2.0))
    assert float(grads[0]["w"]) == 2.0 and float(grads[1]) == 3.0


@pytest.mark.parametrize("transform", ["grad", "jacfwd", "jacrev", "hessian"])
def test_derivatives_of_a_python_float_are_weakly_typed_as_in_jax(transform):
    """JAX's rule: grad seeds with a one of the output's type (weak type included), the
    Jacobians take the weak type of what they differentiate, so a function of a Python
    float has a weakly typed derivative, and of a float32 array a strong one."""
    derivative = getattr(nbjax, transform)(lambda x: jnp.sin(x) * x + x ** 2)
    weak, strong = derivative(1.5), derivative(np.float32(1.5))
    assert (weak.dtype, weak.aval.weak_type) == (np.float32, True)
    assert (strong.dtype, strong.aval.weak_type) == (np.float32, False)
    assert_close(weak, strong, rtol=0)
    assert (weak + np.float16(1)).dtype == np.float16  # weak: the float16 operand decides

"""custom_jvp / custom_vjp rules defined with ``symbolic_zeros=True``: which tangents and
cotangents reach them as ``SymbolicZero`` (under grad, jvp, vmap, jit and their nestings),
the values they then produce, and the helpers of ``nbjax.custom_derivatives``; what a rule
may return; ``linear_call``."""

import functools

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import custom_derivatives as cd
from nbjax.core.abstract import ShapedArray


def _kinds(values):
    """Each rule argument as 'zero' (a SymbolicZero, nbjax's or JAX's) or 'value'."""
    return tuple("zero" if type(v).__name__ == "SymbolicZero" else "value" for v in values)


def sin_times(lib, custom):
    """``sin(x) * y`` with a JVP rule that records what it is given and skips zero terms;
    when both tangents are zero it returns a SymbolicZero."""
    jnp_, seen = lib.numpy, []

    @lib.custom_jvp
    def f(x, y):
        return jnp_.sin(x) * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append(_kinds(tangents))
        out = f(x, y)
        zero = [type(t) is custom.SymbolicZero for t in tangents]
        if all(zero):
            return out, custom.SymbolicZero.from_primal_value(out)
        t = 0.0
        if not zero[0]:
            t = t + jnp_.cos(x) * y * tx
        if not zero[1]:
            t = t + jnp_.sin(x) * ty
        return out, t
    f.defjvp(f_jvp, symbolic_zeros=True)
    return f, seen


def product_and_exp(lib, custom):
    """``(x * y, exp(x))`` with a VJP whose rules record what they are given."""
    seen = []

    @lib.custom_vjp
    def g(x, y):
        return x * y, lib.numpy.exp(x)

    def fwd(x, y):
        seen.append(("fwd", x.perturbed, y.perturbed))
        x, y = custom.custom_vjp_primal_tree_values((x, y))
        return g(x, y), (x, y)

    def bwd(res, cts):
        (x, y), (c_prod, c_exp) = res, cts
        seen.append(("bwd",) + _kinds(cts))
        gx = 0.0 if type(c_prod) is custom.SymbolicZero else c_prod * y
        if type(c_exp) is not custom.SymbolicZero:
            gx = gx + c_exp * lib.numpy.exp(x)
        gy = custom.SymbolicZero(y.aval) if type(c_prod) is custom.SymbolicZero \
            else (c_prod * x).sum()
        return gx, gy
    g.defvjp(fwd, bwd, symbolic_zeros=True)
    return g, seen


X = np.linspace(0.1, 1.0, 3).astype(np.float32)
Y = np.float32(2.0)
ONES = np.ones(3, np.float32)


def jvp_cases(lib, f):
    """Name -> (thunk, the expected value from the closed form)."""
    x, y = X, Y
    return {
        "grad x": (lambda: lib.grad(lambda x: f(x, y).sum())(x), np.cos(x) * y),
        "grad y": (lambda: lib.grad(lambda y: f(x, y).sum())(y), np.sin(x).sum()),
        "jvp x": (lambda: lib.jvp(lambda x: f(x, y), (x,), (ONES,))[1], np.cos(x) * y),
        "vmap(grad)": (lambda: lib.vmap(lib.grad(f))(x, x + 1), np.cos(x) * (x + 1)),
        "grad(vmap)": (lambda: lib.grad(lambda x: lib.vmap(f, (0, None))(x, y).sum())(x),
                       np.cos(x) * y),
        "jvp(vmap)": (lambda: lib.jvp(lambda x: lib.vmap(f, (0, None))(x, y), (x,),
                                     (ONES,))[1], np.cos(x) * y),
        "jit(grad y)": (lambda: lib.jit(lib.grad(lambda x, y: f(x, y).sum(), 1))(x, y),
                        np.sin(x).sum()),
        "hessian": (lambda: lib.hessian(lambda x: f(x, y).sum())(x), np.diag(-np.sin(x) * y)),
    }


def vjp_cases(lib, g):
    x, y = X, Y
    return {
        "grad of product": (lambda: lib.grad(lambda x: g(x, y)[0].sum())(x), np.full(3, y)),
        "grad of exp, both": (lambda: lib.grad(lambda x, y: g(x, y)[1].sum(), (0, 1))(x, y),
                              (np.exp(x), np.float32(0))),
        "grad of both": (lambda: lib.grad(lambda x, y: (g(x, y)[0] + g(x, y)[1]).sum(),
                                          (0, 1))(x, y), (y + np.exp(x), x.sum())),
        "vmap(grad)": (lambda: lib.vmap(lib.grad(lambda x, y: g(x, y)[0], (0, 1)))(x, x + 1),
                       (x + 1, x)),
        "grad(vmap)": (lambda: lib.grad(lambda x: lib.vmap(g, (0, None))(x, y)[0].sum())(x),
                       np.full(3, y)),
        "jit(grad)": (lambda: lib.jit(lib.grad(lambda x: g(x, y)[1].sum()))(x), np.exp(x)),
    }


def _close(actual, expected):
    for a, e in zip(nbjax.tree_util.tree_leaves(actual), nbjax.tree_util.tree_leaves(expected)):
        e = np.asarray(e, np.float32)
        np.testing.assert_allclose(np.asarray(a), e, rtol=1e-5, atol=1e-6 * (1 + np.abs(e).max()))


@pytest.mark.parametrize("case", list(jvp_cases(nbjax, None)))
def test_custom_jvp_rule_gets_symbolic_zeros_and_derivatives_are_right(case):
    f, seen = sin_times(nbjax, cd)
    thunk, expected = jvp_cases(nbjax, f)[case]
    _close(thunk(), expected)
    assert seen and all(kinds != ("value", "value") for kinds in seen)
    assert any("zero" in kinds for kinds in seen)


@pytest.mark.parametrize("case", list(vjp_cases(nbjax, None)))
def test_custom_vjp_rules_get_perturbed_flags_and_symbolic_cotangents(case):
    g, seen = product_and_exp(nbjax, cd)
    thunk, expected = vjp_cases(nbjax, g)[case]
    _close(thunk(), expected)
    assert any(s[0] == "fwd" for s in seen) and any(s[0] == "bwd" for s in seen)


def test_which_tangents_are_symbolic():
    f, seen = sin_times(nbjax, cd)
    nbjax.grad(lambda x: f(x, Y).sum())(X)
    nbjax.grad(lambda y: f(X, y).sum())(Y)
    nbjax.jvp(f, (X, Y), (ONES, np.float32(1)))
    assert seen == [("value", "zero"), ("zero", "value"), ("value", "value")]
    g, seen = product_and_exp(nbjax, cd)
    nbjax.grad(lambda x: g(x, Y)[0].sum())(X)
    nbjax.grad(lambda x, y: g(x, y)[1].sum(), (0, 1))(X, Y)
    assert seen == [("fwd", True, False), ("bwd", "value", "zero"),
                    ("fwd", True, True), ("bwd", "zero", "value")]


def test_without_symbolic_zeros_rules_get_arrays_of_zeros():
    seen = []

    @nbjax.custom_jvp
    def f(x, y):
        return x * y

    @f.defjvp
    def f_jvp(primals, tangents):
        seen.append([np.asarray(t) for t in tangents])
        (x, y), (tx, ty) = primals, tangents
        return x * y, tx * y + x * ty

    out, t = nbjax.jvp(lambda x: f(x, 4.0), (3.0,), (1.0,))
    assert (float(out), float(t)) == (12.0, 4.0)
    assert np.array_equal(seen[0][1], 0.0) and seen[0][1].shape == ()


def test_a_rule_returning_a_symbolic_zero_gives_a_zero_derivative():
    f, _ = sin_times(nbjax, cd)
    # Neither tangent is nonzero here only inside the rule's own call: make both zero
    # by differentiating with respect to an unrelated argument.
    h = nbjax.grad(lambda z: f(X, Y).sum() + z)
    assert float(h(1.0)) == 1.0
    t = nbjax.jvp(lambda x: f(X, Y) * x, (1.0,), (1.0,))[1]
    _close(t, np.sin(X) * Y)


def test_symbolic_zero_answers_for_its_type():
    z = cd.SymbolicZero(ShapedArray((2, 3), np.dtype(np.float32)))
    assert (z.shape, z.dtype, z.ndim, z.size, repr(z)) == ((2, 3), np.float32, 2, 6,
                                                            "SymbolicZero")
    assert nbjax.tree_util.tree_leaves(z) == [z]  # a leaf, as in JAX
    with pytest.raises(AttributeError, match="SymbolicZero has no attribute nope"):
        z.nope
    i = cd.SymbolicZero.from_primal_value(jnp.arange(3))
    assert i.shape == (3,) and i.dtype == nbjax.dtypes.float0


def test_zero_from_primal_and_primal_tree_values():
    tree = {"a": jnp.ones(2), "b": (1.0, jnp.arange(3))}
    zeros = cd.zero_from_primal(tree)
    assert nbjax.tree_util.tree_structure(zeros) == nbjax.tree_util.tree_structure(tree)
    assert np.array_equal(zeros["a"], np.zeros(2)) and zeros["b"][1].dtype == nbjax.dtypes.float0
    symbolic = cd.zero_from_primal(tree, symbolic_zeros=True)
    assert all(type(z) is cd.SymbolicZero for z in nbjax.tree_util.tree_leaves(symbolic))
    wrapped = nbjax.tree_util.tree_map(lambda v: cd.CustomVJPPrimal(v, True), tree)
    values = cd.custom_vjp_primal_tree_values(wrapped)
    assert values["b"][0] == 1.0 and values["a"] is tree["a"]
    with pytest.raises(TypeError, match="unexpected leaf type"):
        cd.custom_vjp_primal_tree_values(tree)


def test_the_same_zeros_reach_the_rules_as_in_jax():
    jax = pytest.importorskip("jax")
    from jax import custom_derivatives as jcd
    for build, cases in ((sin_times, jvp_cases), (product_and_exp, vjp_cases)):
        f, ours = build(nbjax, cd)
        jf, theirs = build(jax, jcd)
        for (name, (thunk, _)), (_, (jthunk, _)) in zip(cases(nbjax, f).items(),
                                                         cases(jax, jf).items()):
            ours.clear()
            theirs.clear()
            _close(thunk(), jthunk())
            assert ours == theirs, name


# --- what a rule may return ----------------------------------------------------------------

def _jvp_returning(tangent_of):
    f = nbjax.custom_jvp(jnp.sin)
    f.defjvp(lambda p, t: (jnp.sin(p[0]), tangent_of(t[0])))
    return f


def test_a_custom_jvp_tangent_must_have_its_outputs_tangent_type():
    """As JAX's: a float16 tangent of a float32 output is a TypeError (it was taken, and
    the derivative's dtype changed downstream); a Python float is float32."""
    x = np.float32(0.5)
    assert float(nbjax.grad(_jvp_returning(lambda t: 2.0 * t))(x)) == 2.0
    for bad, got in ((lambda t: t.astype(np.float16), r"float16\[\]"),
                     (lambda t: jnp.stack([t, t]), r"float32\[2\]")):
        with pytest.raises(TypeError, match=r"Custom JVP rule must produce primal and tangent "
                           rf"outputs with corresponding shapes and dtypes. Expected float32\[\] "
                           rf"\(tangent type of float32\[\]\) but got {got}"):
            nbjax.jvp(_jvp_returning(bad), (x,), (x,))


def _vjp_returning(cotangent_of):
    f = nbjax.custom_vjp(lambda x, n: jnp.sin(x) * n)
    f.defvjp(lambda x, n: (jnp.sin(x) * n, x), lambda x, g: cotangent_of(x, g))
    return f


def test_a_custom_vjp_cotangent_must_have_its_inputs_shape():
    """As JAX's: a cotangent of another shape is a ValueError naming where it is (it was
    returned as the gradient: [1, 1] for a scalar); a float16 one for a float32 input is
    let through, and an integer input's cotangent is dropped."""
    x, n = np.float32(0.5), np.int32(3)
    with pytest.raises(ValueError, match=r"at output\[0\] the bwd rule produced an output of "
                                         r"type float32\[2\] corresponding to an input of type "
                                         r"float32\[\]"):
        nbjax.grad(_vjp_returning(lambda x, g: (jnp.ones(2), None)))(x, n)
    g = nbjax.grad(_vjp_returning(lambda x, g: ((g * 3).astype(np.float16), n)))(x, n)
    assert float(g) == 3.0
    g = nbjax.grad(_vjp_returning(lambda x, g: (g, jnp.ones(2, np.int32))))(x, n)
    assert float(g) == 1.0


# --- linear_call ---------------------------------------------------------------------------

def _div_add(lib, x, denom):
    """JAX's example: ``x + x / denom`` whose second term brings its own transpose."""
    return x + lib.custom_derivatives.linear_call(lambda r, v: v / r, lambda r, c: c / r,
                                                  denom, x)


def _custom_id(lib, x):
    """The identity, whose transpose (by its own rule) multiplies by 7."""
    return lib.custom_derivatives.linear_call(lambda _, v: v, lambda _, c: 7.0 * c, (), x)


def _transposed(lib, fn):
    return lambda y: lib.linear_transpose(fn, np.float32(1))(y)[0]


def _linear_call_results(lib):
    custom_id = functools.partial(_custom_id, lib)
    once = _transposed(lib, custom_id)
    return [float(_div_add(lib, np.float32(9), np.float32(3))),
            float(_transposed(lib, lambda x: _div_add(lib, x, np.float32(3)))(np.float32(18))),
            float(custom_id(np.float32(1))), float(once(np.float32(1))),
            float(_transposed(lib, once)(np.float32(1))),
            float(lib.grad(custom_id)(np.float32(1))),
            float(lib.jit(lib.grad(custom_id))(np.float32(1))),
            [float(v) for v in lib.jvp(custom_id, (np.float32(1),), (np.float32(2),))],
            float(lib.grad(lib.grad(lambda x: custom_id(x) * x))(np.float32(2)))]


def test_linear_call_transposes_by_its_own_rule():
    """Reverse mode calls the transpose function (twice transposed: the function again);
    forward mode and evaluation call the function, eagerly and compiled; as JAX's."""
    got = _linear_call_results(nbjax)
    assert got == [12.0, 24.0, 1.0, 7.0, 1.0, 7.0, 7.0, [1.0, 2.0], 8.0]
    jax = pytest.importorskip("jax")
    assert got == _linear_call_results(jax)


def test_linear_call_pytrees_and_errors():
    lc = cd.linear_call
    g = nbjax.grad(lambda a: lc(lambda r, x: x["u"] * r + x["v"],
                                lambda r, c: {"u": c * r, "v": c * 10}, 2.0, {"u": a, "v": a}))
    assert float(g(1.0)) == 12.0
    with pytest.raises(TypeError, match="transpose output pytree structure must match"):
        nbjax.linear_transpose(lambda x: lc(lambda r, v: v, lambda r, c: (c, c), (), x),
                               1.0)(1.0)
    with pytest.raises(TypeError, match="does not differentiate its residual_args"):
        nbjax.grad(lambda d: _div_add(nbjax, 2.0, d))(4.0)
    with pytest.raises(NotImplementedError, match="batch rule for primitive linear_call"):
        nbjax.vmap(functools.partial(_custom_id, nbjax))(np.ones(3, np.float32))

"""Compiler passes: each rewrite fires where it should, is recorded, and never changes a
result (differential test against the unoptimised jaxpr on random programs)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbjax
from nbjax import lax
from nbjax.compiler import optimize
from nbjax.core import check_jaxpr, eval_closed_jaxpr


@pytest.fixture(autouse=True)
def reference_backend():
    """Compare programs on the reference backend: the passes must keep results bit-exact
    (jitted calls would otherwise use the compiled math library, within a few ulp)."""
    previous = nbjax.config.jit_backend
    nbjax.config.update("jit_backend", "reference")
    yield
    nbjax.config.update("jit_backend", previous)


def _optimized(f, *args):
    closed = nbjax.make_jaxpr(f)(*args)
    opt, log = optimize(closed)
    check_jaxpr(opt.jaxpr)
    for a, b in zip(eval_closed_jaxpr(closed, *args), eval_closed_jaxpr(opt, *args)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return opt, {(r.rule, r.detail) for r in log}, [e.primitive.name for e in opt.eqns]


X = np.linspace(-1, 1, 4).astype(np.float32)


def test_identities_and_integer_powers():
    opt, rules, prims = _optimized(
        lambda x: lax.sub(lax.mul(lax.integer_pow(x, 3), 1.0), 0.0), X)
    assert prims == ["mul", "mul"]
    assert ("simplify", "x * 1") in rules and ("simplify", "x - 0") in rules
    assert ("simplify", "x ** 3 as (x * x) * x") in rules
    _, rules, prims = _optimized(lambda x: lax.integer_pow(x, 2), X)
    assert prims == ["mul"]


def test_float_plus_zero_is_kept_but_int_plus_zero_folds():
    _, _, prims = _optimized(lambda x: lax.add(x, 0.0), np.array([-0.0, 1.0], np.float32))
    assert prims == ["add"]  # -0.0 + 0.0 is +0.0: not an identity for floats
    _, _, prims = _optimized(lambda x: lax.add(x, 0), np.arange(3, dtype=np.int32))
    assert prims == []


def test_complex_times_one_is_kept_but_complex_minus_zero_folds():
    z = np.array([np.inf + 1j, -0.0 - 2j, 1 + np.nan * 1j], np.complex64)
    _, rules, prims = _optimized(lambda x: lax.mul(x, np.complex64(1)), z)
    # (inf+1j) * (1+0j) is inf+nanj: not an identity for complex numbers; the product is
    # computed on the parts (fma(a, 1, -(b*0)), fma(a, 0, b*1)), of which b*1 simplifies
    assert ("simplify", "x * 1") in rules and "mul" in prims
    assert ("complex parts", "mul computed on the real and imaginary parts: 5 equations") \
        in rules
    _, _, prims = _optimized(lambda x: lax.sub(x, np.complex64(0)), z)
    assert prims == []


def test_double_negation_conversion_and_broadcasts():
    _, rules, prims = _optimized(lambda x: lax.neg(lax.neg(x)), X)
    assert prims == [] and ("simplify", "double negation") in rules
    _, rules, prims = _optimized(
        lambda x: lax.broadcast_in_dim(lax.broadcast_in_dim(x, (3, 4), (1,)), (2, 3, 4),
                                       (1, 2)), X)
    assert prims == ["broadcast_in_dim"]
    _, _, prims = _optimized(lambda x: lax.convert_element_type(x, np.float32), X)
    assert prims == []


def test_reshapes_of_reshapes():
    _, rules, prims = _optimized(lambda x: x.reshape(2, 2).reshape(1, 4, 1), X)
    assert prims == ["reshape"] and ("simplify", "reshape of a reshape") in rules
    _, rules, prims = _optimized(lambda x: x.reshape(2, 2).reshape(4) * 2.0, X)
    assert prims == ["mul"] and ("simplify", "reshape of a reshape back to its shape") in rules
    _, _, prims = _optimized(lambda x: lax.reshape(x.reshape(2, 2), (4,), dimensions=(1, 0)), X)
    assert prims == ["reshape", "reshape"]  # a transpose in between


def test_cse_dce_constant_folding_and_inlining():
    inner = nbjax.jit(lambda x: lax.sin(x) * 2.0)

    def f(x):
        unused = lax.cos(x)  # noqa: F841
        k = lax.add(lax.convert_element_type(2, np.float32), 3.0)
        return lax.add(lax.mul(lax.exp(x), k), lax.mul(lax.exp(x), inner(x)))
    opt, rules, prims = _optimized(f, X)
    assert "jit" not in prims and "cos" not in prims
    assert prims.count("exp") == 1
    assert {r for r, _ in rules} >= {"inline", "constant_fold", "cse", "dce"}


def test_inlining_the_same_function_twice_gets_fresh_variables():
    inner = nbjax.jit(lambda x: lax.exp(x))
    opt, _, prims = _optimized(lambda x: lax.add(inner(x), inner(lax.neg(x))), X)
    assert prims.count("exp") == 2


# --- dead code in control flow ----------------------------------------------------------------

def _only(opt, name):
    [eqn] = [e for e in opt.eqns if e.primitive.name == name]
    return eqn


def _body_primitives(closed):
    return sorted(e.primitive.name for e in closed.jaxpr.eqns)


def test_dce_drops_a_scans_unused_ys_and_the_carries_only_they_read():
    """``a`` is returned; ``b`` feeds only a dropped y; ``c`` feeds ``a`` (kept: a fixed
    point); ``ys`` is dropped with the sin computing it, ``zs`` kept."""
    def f(xs):
        def body(carry, x):
            a, b, c = carry
            return (a + c, b * 2.0, c * 0.5), (lax.sin(b), x * 3.0)
        (a, _, _), (_, zs) = lax.scan(body, (xs[0], xs[1], xs[2]), xs)
        return a, zs
    opt, rules, _ = _optimized(f, X)
    scan = _only(opt, "scan")
    assert len(scan.outvars) == 3 and scan.params["num_carry"] == 2  # a, c, zs
    assert _body_primitives(scan.params["jaxpr"]) == ["add", "mul", "mul"]
    assert ("dce", "scan pruned: 2 of its 5 results and 1 of its 4 operands dropped, with "
            "what they fed or came from in its bodies") in rules


def test_dce_keeps_a_while_carry_its_predicate_reads():
    def f(x):
        def body(carry):
            i, a, b, unused = carry
            return i + 1, a * 2.0 + b, b + 1.0, lax.exp(unused)
        return lax.while_loop(lambda c: c[0] < 3, body, (0, x, x, x))[1]
    opt, _, _ = _optimized(f, X)
    loop = _only(opt, "while")
    assert len(loop.outvars) == 3  # i (the predicate reads it), a, b (a reads it)
    assert "exp" not in _body_primitives(loop.params["body_jaxpr"])


def test_dce_prunes_every_branch_of_a_cond_and_the_operands_none_reads():
    def f(x, y):
        return lax.cond(x[0] > 0, lambda a, b: (a * 2.0, lax.exp(b)),
                        lambda a, b: (a - 1.0, lax.log(b)), x, y)[0]
    opt, _, _ = _optimized(f, X, X + 2.0)
    cond = _only(opt, "cond")
    assert len(cond.outvars) == 1 and len(cond.invars) == 2  # the index, x
    assert [_body_primitives(b) for b in cond.params["branches"]] == [["sub"], ["mul"]]


def test_dce_reaches_loops_nested_in_branches_and_keeps_effects():
    """The ys of a scan inside a cond inside a scan go; a callback in a body stays, with
    the carry it prints."""
    seen = []

    def f(xs):
        def outer(c, x):
            def branch(v):
                inner = lax.scan(lambda d, _: (d * 0.5, lax.cos(d)), v, None, length=2)
                return inner[0]
            c = lax.cond(x > 0, branch, lambda v: v + 1.0, c)
            nbjax.debug.callback(lambda v: seen.append(float(v)), c)
            return c, lax.tan(c)
        return lax.scan(outer, 1.0, xs)[0]
    opt, _, _ = _optimized(f, X)
    outer = _only(opt, "scan")
    assert len(outer.outvars) == 1
    [cond] = [e for e in outer.params["jaxpr"].jaxpr.eqns if e.primitive.name == "cond"]
    [inner] = [e for e in cond.params["branches"][1].jaxpr.eqns if e.primitive.name == "scan"]
    assert len(inner.outvars) == 1 and "cos" not in _body_primitives(inner.params["jaxpr"])
    assert "tan" not in _body_primitives(outer.params["jaxpr"])
    assert "debug_callback" in _body_primitives(outer.params["jaxpr"])


UNARY = [lax.sin, lax.neg, lax.exp, lambda x: lax.integer_pow(x, 2),
         lambda x: lax.integer_pow(x, 3), lambda x: lax.mul(x, 1.0),
         lambda x: lax.sub(x, 0.0), lambda x: lax.add(x, 0.0)]
BINARY = [lax.add, lax.mul, lax.sub, lax.max]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 7), st.integers(0, 10),
                          st.integers(0, 10)), min_size=1, max_size=12),
       st.integers(0, 2 ** 31 - 1))
def test_random_programs_keep_their_results(program, seed):
    """Random straight-line programs with repeated subexpressions and identities."""
    rng = np.random.RandomState(seed)
    x = rng.standard_normal(5).astype(np.float32)
    x[0] = -0.0

    def f(x):
        values = [x, lax.neg(x)]
        for b, u, i, j in program:
            a1, a2 = values[i % len(values)], values[j % len(values)]
            values.append(UNARY[u](BINARY[b](a1, a2)))
        return values[-1], values[len(values) // 2]
    _optimized(f, x)


def test_transpose_of_a_dot_becomes_the_swapped_dot():
    """vmap(jnp.dot, (None, 0)) stages dot_general then a transpose of its result: computing
    dot(v, m) directly needs no transpose (integer-valued floats keep the sums exact)."""
    rng = np.random.RandomState(0)
    m = rng.randint(-4, 5, (6, 5)).astype(np.float32)
    v = rng.randint(-4, 5, (3, 5)).astype(np.float32)
    f = lambda m, v: lax.transpose(lax.dot_general(m, v, (((1,), (1,)), ((), ()))), (1, 0))
    _, rules, prims = _optimized(f, m, v)
    assert prims == ["dot_general"]
    assert ("simplify", "transpose of a dot as the dot with its operands swapped") in rules
    # a dot whose result is also used elsewhere keeps its transpose (no second dot)
    def both(m, v):
        d = lax.dot_general(m, v, (((1,), (1,)), ((), ())))
        return lax.transpose(d, (1, 0)), d
    _, _, prims = _optimized(both, m, v)
    assert prims == ["dot_general", "transpose"]


def test_a_batched_transpose_of_a_dot_keeps_each_matrixs_columns_last():
    """A transpose putting the right operand's free axes before the left one's (the
    gradient of an attention's values, merged back into its heads) becomes a transpose of
    the swapped dot that leaves each product's columns last: the product can write it."""
    rng = np.random.RandomState(2)
    p = rng.randint(-4, 5, (2, 3, 4, 5)).astype(np.float32)   # (batch, heads, q, k)
    g = rng.randint(-4, 5, (2, 3, 4, 6)).astype(np.float32)   # (batch, heads, q, d)

    def f(p, g):  # (batch, heads, k, d) -> (batch, d... ) laid out (batch, k, heads, d)
        d = lax.dot_general(g, p, (((2,), (2,)), ((0, 1), (0, 1))))  # (b, h, d, k)
        return lax.transpose(d, (0, 3, 1, 2))
    opt, rules, prims = _optimized(f, p, g)
    assert prims == ["dot_general", "transpose"]
    assert ("simplify", "transpose of a dot as a transpose of the dot with its operands "
                        "swapped") in rules
    dot, transpose = opt.eqns
    assert dot.invars[0] is opt.jaxpr.invars[0] and transpose.params["permutation"] == \
        (0, 2, 1, 3)


def test_chains_of_transposes_are_one_transpose_or_none():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _, rules, prims = _optimized(
        lambda x: lax.transpose(lax.transpose(x, (1, 0, 2)), (0, 2, 1)) * 2.0, x)
    assert prims == ["transpose", "mul"]
    assert ("simplify", "a transpose of a transpose as one transpose") in rules
    _, rules, prims = _optimized(
        lambda x: lax.transpose(lax.transpose(x, (2, 0, 1)), (1, 2, 0)) * 2.0, x)
    assert prims == ["mul"] and ("simplify", "transposes that undo each other") in rules


def test_a_dot_of_transposed_operands_reads_them_as_they_are():
    """``x @ w.T`` and ``x.T @ w`` of matrices, and an attention's heads split off by
    transposes, are dots of the untransposed operands, read in place: no transpose is
    left to copy (integer-valued floats keep the sums exact). A transpose that would put a
    batch axis innermost, or change the order of the free axes, stays."""
    rng = np.random.RandomState(1)
    x = rng.randint(-4, 5, (6, 5)).astype(np.float32)
    w = rng.randint(-4, 5, (3, 5)).astype(np.float32)
    heads = rng.randint(-4, 5, (2, 7, 3, 4)).astype(np.float32)   # (batch, seq, heads, d)
    split = lambda h: lax.transpose(h, (0, 2, 1, 3))
    for f, args in ((lambda x, w: x @ w.T, (x, w)), (lambda x, w: x.T @ w.T, (x.T.copy(), w)),
                    (lambda a, b: a.T @ b, (x, x)),
                    (lambda q, k: split(q) @ lax.transpose(split(k), (0, 1, 3, 2)), (heads, heads)),
                    (lambda p, v: p @ split(v), (rng.randint(-4, 5, (2, 3, 5, 7)).astype(
                        np.float32), heads))):
        _, rules, prims = _optimized(f, *args)
        assert prims == ["dot_general"]
        assert ("simplify", "a dot of a transposed operand as the dot of the untransposed "
                "one, read in place") in rules
    a = rng.randint(-4, 5, (5, 6, 2)).astype(np.float32)
    b = rng.randint(-4, 5, (2, 6, 3)).astype(np.float32)
    batch_innermost = lambda a, b: lax.dot_general(lax.transpose(a, (2, 0, 1)), b,
                                                   (((2,), (1,)), ((0,), (0,))))
    free_swapped = lambda a, c: lax.dot_general(lax.transpose(a, (1, 0, 2)), c,
                                                (((2,), (1,)), ((), ())))
    for f, args in ((batch_innermost, (a, b)), (free_swapped, (a, b[:, :, 0].T.copy()))):
        _, _, prims = _optimized(f, *args)
        assert prims == ["transpose", "dot_general"]


def test_a_dot_contracting_no_axis_is_a_product_of_broadcasts():
    """What ``vmap`` makes of a per-example gradient, a row's scalar times the row (batch
    axes only), and an outer product, are multiplies of broadcasts, which fuse, with the
    dot's values. A dot whose operand's axes would change order, or of mixed dtypes,
    stays."""
    rng = np.random.RandomState(2)
    s, rows = rng.randn(7).astype(np.float32), rng.randn(7, 5).astype(np.float32)
    u, v = rng.randn(4).astype(np.float32), rng.randn(3, 2).astype(np.float32)
    for f, args in ((lambda s, r: lax.dot_general(s, r, (((), ()), ((0,), (0,)))), (s, rows)),
                    (lambda u, v: lax.dot_general(u, v, (((), ()), ((), ()))), (u, v))):
        _, rules, prims = _optimized(f, *args)   # (the values: checked equal there)
        assert "dot_general" not in prims and "mul" in prims
        assert ("simplify", "a dot contracting no axis as a product of broadcasts") in rules
    moved = lambda a, b: lax.dot_general(a, b, (((), ()), ((1,), (0,))))
    _, _, prims = _optimized(moved, rows.T.copy(), rows)
    assert prims == ["dot_general"]
    mixed = lambda a, b: lax.dot_general(a, b, (((), ()), ((0,), (0,))),
                                         preferred_element_type=np.float32)
    _, _, prims = _optimized(mixed, s.astype(np.float16), rows.astype(np.float16))
    assert "dot_general" in prims


def _idempotent_primitive(name, with_rule):
    """A clip to [0, 1] defined here, outside nbjax.lax; ``with_rule``: it tells the compiler
    that clipping a clipped value changes nothing."""
    from nbjax.core import Primitive

    prim = Primitive(name)
    prim.def_abstract_eval(lambda x: x)
    prim.def_impl(lambda x: np.clip(x, 0, 1))
    if with_rule:
        def rule(eqn, ins, producer_of, use_count, value_of):
            producer = producer_of(ins[0])
            if producer is not None and producer.primitive is prim:
                return ins[0], "clip of a clip"
            return None
        prim.def_rule("simplify", rule)
    return prim


def test_simplify_asks_the_primitive_not_its_name():
    clip_p = _idempotent_primitive("test_clip", with_rule=True)
    x = np.linspace(-2, 2, 9).astype(np.float32)
    _, rules, prims = _optimized(lambda x: clip_p.bind(clip_p.bind(x)), x)
    assert prims == ["test_clip"] and ("simplify", "clip of a clip") in rules
    # A primitive that merely shares a simplified primitive's name gets none of its rules.
    fake_neg_p = _idempotent_primitive("neg", with_rule=False)
    _, rules, prims = _optimized(lambda x: fake_neg_p.bind(fake_neg_p.bind(x)), x)
    assert prims == ["neg", "neg"] and not rules


def _literal_operands(opt, name):
    return [type(a).__name__ for e in opt.jaxpr.eqns if e.primitive.name == name
            for a in e.invars]


def test_a_known_operand_of_one_value_becomes_a_literal():
    """A known array whose elements are all one value (``randint``'s span, folded to one
    element; a closed-over ``full``) is written as that value where the result keeps its
    shape: a binary element-wise operand beside one of the result's shape, or what a
    re-striding moves (a broadcast of the value). Kernels then compile it in: a remainder
    by it becomes multiplies (``randint`` of 10^6: 8.4 -> 1.2 ms)."""
    bits = np.arange(3000, dtype=np.uint32) * np.uint32(2654435761)
    span = np.array([1000], np.uint32)
    full = np.full((3000,), 3.0, np.float32)
    opt, rules, _ = _optimized(
        lambda b: (lax.rem(b, span), lax.convert_element_type(b, np.float32) * full,
                   lax.broadcast_in_dim(full, (2, 3000), (1,))), bits)
    assert ("constant_fold", "an operand of one value as a literal") in rules
    assert _literal_operands(opt, "rem") == ["Var", "Literal"]
    assert _literal_operands(opt, "mul") == ["Var", "Literal"]
    assert _literal_operands(opt, "broadcast_in_dim") == ["Literal"]
    compiled = nbjax.jit(lambda b: lax.rem(b, span), backend="cpu")
    np.testing.assert_array_equal(compiled(bits), bits % 1000)


@pytest.mark.parametrize("values", [[1.0, 2.0], [0.0, -0.0]])
def test_known_operands_of_several_values_or_shaping_the_result_stay(values):
    """Two values (0.0 and -0.0 are two: the bits decide) stay an array; so does a value
    of one element that gives an element-wise result its shape, and an operand of a sum,
    into which a matrix product may accumulate (``test_product_epilogues``)."""
    known = np.array(values * 50, np.float32)
    opt, _, _ = _optimized(lambda x: x * known, np.ones(100, np.float32))
    assert _literal_operands(opt, "mul") == ["Var", "Var"]
    shaping = np.full((10,), 2.0, np.float32)
    opt, _, _ = _optimized(lambda x: lax.add(x, shaping), np.ones(1, np.float32))
    assert _literal_operands(opt, "add") == ["Var", "Var"]
    opt, _, _ = _optimized(lambda x: x + shaping, np.ones(10, np.float32))
    assert _literal_operands(opt, "add") == ["Var", "Var"]


def _window_operands(dtype):
    """An operand with -0.0, NaN and infinities (for floats) outside the windows below,
    and updates for rows 1 to 3 of it."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 6)) * 4).astype(dtype)
    u = (rng.standard_normal((3, 6)) * 4).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[0, :4] = [-0.0, np.nan, np.inf, -np.inf]
        x[4, 0], u[0, 0] = -0.0, np.nan
    return x, u


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("update", ["set", "add", "subtract", "multiply", "min", "max"])
def test_a_scatter_of_one_window_at_known_starts_is_element_wise(update, dtype):
    """``x.at[1:4].add(u)`` (rows), ``x.at[1:4, 1:5].add(u)`` (a window inside both axes)
    at starts that tracing makes of literals is the operand combined with the update
    padded by a value that changes nothing (-0.0 for a float add, so -0.0 outside stays
    -0.0), or for a set the padded update where a padded mask is true: kernels fuse it.
    Bit for bit the scatter's results, signs of zeros and NaNs included."""
    x, u = _window_operands(dtype)
    for f in (lambda x, u: getattr(x.at[1:4], update)(u),
              lambda x, u: getattr(x.at[1:4, 1:5], update)(u[:, :4])):
        opt, rules, prims = _optimized(f, x, u)
        assert not any(p.startswith("scatter") for p in prims), prims
        assert any(rule == "simplify" and "window" in detail for rule, detail in rules)
        got = np.asarray(eval_closed_jaxpr(opt, x, u)[0])
        want = np.asarray(eval_closed_jaxpr(nbjax.make_jaxpr(f)(x, u), x, u)[0])
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    opt, _, prims = _optimized(lambda x: x.at[2].set(7), x)   # one row, a scalar update
    assert "select_n" in prims and "scatter" not in prims
    if update in ("set", "add") and dtype == np.float32:   # complex: both parts' -0.0 kept
        z = np.empty(x.shape, np.complex64)
        z.real, z.imag = x, x[::-1]
        f = lambda z, u: getattr(z.at[1:4], update)(u * (1 - 2j))
        opt, _, prims = _optimized(f, z, u)
        got = np.asarray(eval_closed_jaxpr(opt, z, u)[0])
        want = np.asarray(eval_closed_jaxpr(nbjax.make_jaxpr(f)(z, u), z, u)[0])
        for part in (np.real, np.imag):
            np.testing.assert_array_equal(np.signbit(part(got)), np.signbit(part(want)))


def test_scatters_of_other_windows_stay_scatters():
    """A window at starts known only at run time, or a window that does not fit
    (dropped, or clamped) stays a scatter."""
    x, u = _window_operands(np.float32)
    cases = [(lambda x, u, i: x.at[i].set(u[0]), (x, u, np.int32(2))),
             (lambda x, u: lax.scatter_add(x, np.array([4], np.int32), u,
                                           lax.ScatterDimensionNumbers((0, 1), (), (0,)),
                                           mode="fill"), (x, u)),
             (lambda x, u: lax.scatter_add(x, np.array([4], np.int32), u,
                                           lax.ScatterDimensionNumbers((0, 1), (), (0,)),
                                           mode="clip"), (x, u))]
    for f, args in cases:
        _, _, prims = _optimized(f, *args)
        assert "scatter-add" in prims or "scatter" in prims, prims


def test_static_starts_of_an_update_trace_as_jax_traces_them():
    """Under tracing, the starts of ``x.at[1:-1, 2].set(v)`` are broadcast literals
    concatenated, as in JAX's jaxpr (not a constant the jitted call takes as an operand,
    which the compiler would not see); eagerly they are one NumPy constant."""
    x = np.zeros((6, 7), np.float32)
    text = str(nbjax.make_jaxpr(lambda x: x.at[1:-1, 2].set(1.0))(x))
    assert "broadcast_in_dim[broadcast_dimensions=()] 1:i32[]" in text
    assert "broadcast_in_dim[broadcast_dimensions=()] 2:i32[]" in text
    assert "concatenate[dimension=0]" in text and text.startswith("{ lambda ; ")
    want = x.copy()
    want[1:-1, 2] = 1.0
    np.testing.assert_array_equal(nbjax.numpy.asarray(x).at[1:-1, 2].set(1.0), want)

"""Jaxprs print exactly as JAX 0.10 prints them.

Each expected text below was produced by running the same function under ``jax.make_jaxpr``
(JAX 0.10.2, CPU) and pasted unchanged. The printer must reproduce JAX's layout: one-line
jaxprs when they fit in 80 columns, one equation per line otherwise, sub-jaxprs nested in
params, variable names shared with sub-jaxprs, ``_`` for unused results.
"""

import numpy as np
import pytest

import nbjax
from nbjax import lax
from nbjax.core import Jaxpr, JaxprEqn, JaxprTypeError, ShapedArray, Var, check_jaxpr

f32 = np.float32
X3 = np.ones(3, f32)
CONST = np.arange(3, dtype=f32)
CASES = {}


def expect(text, *args, **kwargs):
    """Register the decorated function: traced on ``args``, it must print as ``text``."""
    def register(fun):
        CASES[fun.__name__] = (fun, args, kwargs, text.strip("\n"))
        return fun
    return register


@expect("""
{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }
""", np.ones(3, f32))
def sin_vector(x):
    return lax.sin(x)


@expect("""
{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = sin a
    d:f32[3] = mul c b
    e:f32[3] = cos d
    f:f32[3] = mul a 2.0:f32[]
    g:f32[3] = add e f
  in (g,) }
""", X3, X3)
def chain(x, y):
    """Too long for one line: the equations go one per line."""
    return lax.cos(lax.mul(lax.sin(x), y)) + x * 2.0


@expect("""
{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = mul b a in (c,) }
""", X3)
def constvar(x):
    """A closed-over array is a constvar, listed before the semicolon."""
    return x * CONST


@expect("""
{ lambda ; a:f32[] b:i32[] c:bool[]. let
    d:f32[] = mul a 2.0:f32[]
    e:i32[] = add b 1:i32[]
    f:bool[] = and c True:bool[]
  in (d, e, f) }
""", f32(1.0), np.int32(1), np.bool_(True))
def literals(x, i, b):
    """Scalar constants are literals typed like the other operand."""
    return lax.mul(x, 2.0), lax.add(i, 1), lax.bitwise_and(b, True)


@expect("""
{ lambda ; a:f32[3]. let b:f32[3] = neg a in (b,) }
""", X3)
def single_output(x):
    return lax.neg(x)


@expect("""
{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = add a b
    d:f32[3] = sub a b
  in (c, d, a) }
""", X3, X3)
def multiple_outputs(x, y):
    """An input returned as is appears among the outputs by its own name."""
    return lax.add(x, y), lax.sub(x, y), x


@expect("""
{ lambda ; a:f32[3]. let _:f32[3] = sin a; b:f32[3] = cos a in (b,) }
""", X3)
def unused_outvar(x):
    """A result nothing reads is printed `_`."""
    lax.sin(x)
    return lax.cos(x)


@expect("""
{ lambda a:f32[3]; b:f32[]. let
    _:f32[] c:f32[3] = scan[
      jaxpr={ lambda ; d:f32[] e:f32[]. let
          f:f32[] = add d e
          g:f32[] = mul d e
        in (f, g) }
      length=3
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] b a
  in (c,) }
""", f32(1.0))
def unused_scan_output(x):
    _, ys = lax.scan(lambda c, a: (c + a, c * a), x, np.arange(3, dtype=f32))
    return ys


@expect("""
{ lambda ; a:bool[] b:f32[]. let
    c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    d:f32[] = cond[
      branches=(
        { lambda ; e:f32[]. let f:f32[] = mul e 2.0:f32[] in (f,) }
        { lambda ; g:f32[]. let h:f32[] = add g 1.0:f32[] in (h,) }
      )
    ] c b
  in (d,) }
""", True, f32(1.0))
def cond(p, x):
    """The false branch comes first; the predicate becomes an int32 index."""
    return lax.cond(p, lambda a: a + 1.0, lambda a: a * 2.0, x)


@expect("""
{ lambda a:f32[3]; b:bool[] c:f32[] d:f32[3]. let
    e:i32[] = convert_element_type[new_dtype=int32 weak_type=False] b
    f:f32[3] = cond[
      branches=(
        { lambda ; g:f32[] h:f32[3] i:f32[3] j:f32[3]. let
            k:f32[3] = add j h
            l:f32[3] = add k i
          in (l,) }
        { lambda ; m:f32[] n:f32[3] o:f32[3] p:f32[3]. let
            q:f32[3] = mul p m
          in (q,) }
      )
    ] e c d a d
  in (f,) }
""", True, f32(1.0), X3)
def cond_closures(p, x, y):
    """Closed-over values become operands; every branch takes all of them."""
    return lax.cond(p, lambda a: a * x, lambda a: a + y + CONST, y)


@expect("""
{ lambda ; a:i32[] b:f32[]. let
    c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    d:i32[] = clamp 0:i32[] c 2:i32[]
    e:f32[] = cond[
      branches=(
        { lambda ; f:f32[]. let g:f32[] = add f 1.0:f32[] in (g,) }
        { lambda ; h:f32[]. let i:f32[] = mul h 2.0:f32[] in (i,) }
        { lambda ; j:f32[]. let k:f32[] = sub j 3.0:f32[] in (k,) }
      )
    ] d b
  in (e,) }
""", 1, f32(1.0))
def switch(i, x):
    return lax.switch(i, [lambda a: a + 1.0, lambda a: a * 2.0, lambda a: a - 3.0], x)


@expect("""
{ lambda ; a:f32[]. let
    b:f32[] = while[
      body_jaxpr={ lambda ; c:f32[]. let d:f32[] = mul c 2.0:f32[] in (d,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; e:f32[]. let f:bool[] = lt e 10.0:f32[] in (f,) }
      cond_nconsts=0
    ] a
  in (b,) }
""", f32(1.0))
def while_(x):
    return lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)


@expect("""
{ lambda ; a:f32[]. let
    _:i32[] b:f32[] = scan[
      jaxpr={ lambda ; c:i32[] d:f32[]. let
          e:i32[] = add c 1:i32[]
          f:f32[] = mul d 2.0:f32[]
        in (e, f) }
      length=3
      num_carry=2
      num_consts=0
      reverse=False
      unroll=1
    ] 0:i32[] a
  in (b,) }
""", f32(1.0))
def fori(x):
    """Static bounds: a scan over (i, x), as in JAX; the final i is unused."""
    return lax.fori_loop(0, 3, lambda i, c: c * 2.0, x)


@expect("""
{ lambda ; a:i32[] b:f32[]. let
    _:i32[] _:i32[] c:f32[] = while[
      body_jaxpr={ lambda ; d:i32[] e:i32[] f:f32[]. let
          g:i32[] = add d 1:i32[]
          h:f32[] = mul f 2.0:f32[]
        in (g, e, h) }
      body_nconsts=0
      cond_jaxpr={ lambda ; i:i32[] j:i32[] k:f32[]. let
          l:bool[] = lt i j
        in (l,) }
      cond_nconsts=0
    ] 0:i32[] a b
  in (c,) }
""", 3, f32(1.0))
def fori_traced(n, x):
    """A traced bound: a while loop carrying (i, upper, x)."""
    return lax.fori_loop(0, n, lambda i, c: c * 2.0, x)


@expect("""
{ lambda ; a:f32[] b:f32[3]. let
    c:f32[] d:f32[3] = scan[
      jaxpr={ lambda ; e:f32[] f:f32[]. let
          g:f32[] = add e f
          h:f32[] = mul e f
        in (g, h) }
      length=3
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] a b
  in (c, d) }
""", f32(1.0), X3)
def scan(c, xs):
    return lax.scan(lambda c, x: (c + x, c * x), c, xs)


@expect("""
{ lambda ; a:f32[2,3]. let
    b:f32[2] = scan[
      jaxpr={ lambda ; c:f32[3]. let
          d:f32[] = reduce_sum[axes=(0,) out_sharding=None] c
        in (d,) }
      length=2
      num_carry=0
      num_consts=0
      reverse=False
      unroll=1
    ] a
  in (b,) }
""", np.ones((2, 3), f32))
def map_(xs):
    return lax.map(lambda r: lax.reduce_sum(r, (0,)), xs)


@expect("""
{ lambda ; a:bool[] b:f32[3]. let
    c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    d:f32[3] = cond[
      branches=(
        { lambda ; e:f32[3]. let  in (e,) }
        { lambda ; f:f32[3]. let
            g:f32[] h:f32[3] = scan[
              jaxpr={ lambda ; i:f32[] j:f32[]. let
                  k:f32[] = add i j
                  l:f32[] = sin i
                in (k, l) }
              length=3
              num_carry=1
              num_consts=0
              reverse=False
              unroll=1
            ] 1.0:f32[] f
          in (h,) }
      )
    ] c b
  in (d,) }
""", True, X3)
def scan_in_cond(p, xs):
    def scanned(xs):
        return lax.scan(lambda c, a: (c + a, lax.sin(c)), f32(1.0), xs)[1]
    return lax.cond(p, scanned, lambda xs: xs, xs)


@expect("""
{ lambda ; a:bool[] b:f32[3]. let
    c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    d:f32[3] = cond[
      branches=(
        { lambda ; e:f32[3]. let  in (e,) }
        { lambda ; f:f32[3]. let
            g:f32[] h:f32[3] = scan[
              jaxpr={ lambda ; i:f32[] j:f32[]. let
                  k:f32[] = convert_element_type[
                    new_dtype=float32
                    weak_type=False
                  ] i
                  l:f32[] = add k j
                in (l, i) }
              length=3
              num_carry=1
              num_consts=0
              reverse=False
              unroll=1
            ] 0.0:f32[] f
          in (h,) }
      )
    ] c b
  in (d,) }
""", True, X3)
def nested_long_params(p, xs):
    """Deep nesting leaves little width: a param list breaks over lines."""
    return lax.cond(p, lambda xs: lax.scan(lambda c, a: (c + a, c), 0.0, xs)[1],
                    lambda xs: xs, xs)


@expect("""
{ lambda ; a:f32[2,3,4,5]. let
    b:f32[2,2,2,1] = slice[
      limit_indices=(2, 3, 4, 5)
      start_indices=(0, 1, 0, 2)
      strides=(1, 1, 2, 3)
    ] a
  in (b,) }
""", np.ones((2, 3, 4, 5), f32))
def slice_4d(x):
    return lax.slice(x, (0, 1, 0, 2), (2, 3, 4, 5), (1, 1, 2, 3))


@expect("""
{ lambda ; a:f32[3]. let
    b:f32[3] = sin a
    c:f32[3] = sin b
    d:f32[3] = sin c
  in (d,) }
""", X3, 3, static_argnums=1)
def static_argnums(x, n):
    """A static argument is a Python value: the loop unrolls and n is no input."""
    for _ in range(n):
        x = lax.sin(x)
    return x


@expect("""
{ lambda ; a:f32[3] b:f32[] c:i32[]. let
    d:f32[3] = mul a b
    e:i32[] = add c 1:i32[]
  in (d, e) }
""", {"a": X3, "b": (f32(1.0), np.int32(2))})
def pytree_io(d):
    """Inputs and outputs are flattened: dict keys sorted, tuples in order."""
    return {"y": lax.mul(d["a"], d["b"][0]), "z": (lax.add(d["b"][1], 1),)}


@expect("""
{ lambda ; a:f32[2,3]. let
    b:f32[2] = reduce_sum[axes=(1,) out_sharding=None] a
  in (b,) }
""", np.ones((2, 3), f32))
def reduce_sum(x):
    return lax.reduce_sum(x, (1,))


@expect("""
{ lambda ; a:i32[3]. let
    b:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] a
    c:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,)] b
  in (c,) }
""", np.ones(3, np.int32))
def broadcast_convert(x):
    """broadcast_in_dim hides `shape`, which its output type shows."""
    return lax.broadcast_in_dim(lax.convert_element_type(x, f32), (2, 3), (1,))


@expect("""
{ lambda ; a:f32[]. let
    b:f32[] = stop_gradient a
    c:f32[] = add b 1.0:f32[]
  in (c,) }
""", f32(1.0))
def stop_gradient(x):
    return lax.stop_gradient(x) + 1.0


@expect("""
{ lambda ; a:f32[]. let
    b:f32[] = mul a 1.01:f32[]
    c:f32[] = add b 0.1:f32[]
    d:f32[] = add c 1e-05:f32[]
  in (d,) }
""", 1.0)
def python_float_literals(x):
    return x * 1.01 + 0.1 + 1e-05


@expect("""
{ lambda ; a:c64[]. let
    b:c64[] = mul a (2+0j):c64[]
    c:c64[] = add b (3+0j):c64[]
  in (c,) }
""", np.complex64(1))
def complex_literals(x):
    return x * 2 + 3.0


@pytest.mark.parametrize("name", list(CASES))
def test_printed_as_jax_prints(name):
    fun, args, kwargs, expected = CASES[name]
    closed = nbjax.make_jaxpr(fun, **kwargs)(*args)
    assert str(closed) == expected
    check_jaxpr(closed.jaxpr)


def test_a_narrower_width_breaks_a_one_line_jaxpr():
    closed = nbjax.make_jaxpr(lax.sin)(X3)
    assert closed.pretty(width=40) == "{ lambda ; a:f32[3]. let\n    b:f32[3] = sin a\n  in (b,) }"


# --- check_jaxpr on malformed jaxprs -------------------------------------------------------

def f32_var(*shape):
    return Var(ShapedArray(shape, f32))


def test_check_jaxpr_variable_used_before_definition():
    a, b, c = f32_var(3), f32_var(3), f32_var(3)
    jaxpr = Jaxpr([], [a], [c], [JaxprEqn([b], [c], lax.sin_p, {}),
                                 JaxprEqn([a], [b], lax.cos_p, {})])
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        check_jaxpr(jaxpr)


def test_check_jaxpr_undefined_output():
    a, b = f32_var(3), f32_var(3)
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        check_jaxpr(Jaxpr([], [a], [b], []))


def test_check_jaxpr_declared_type_disagrees_with_the_rule():
    a, b = f32_var(3), Var(ShapedArray((3,), np.int32))
    jaxpr = Jaxpr([], [a], [b], [JaxprEqn([a], [b], lax.sin_p, {})])
    with pytest.raises(JaxprTypeError, match=r"rule gives types \['float32\[3\]'\], the equation "
                                             r"declares \['int32\[3\]'\]"):
        check_jaxpr(jaxpr)


def test_check_jaxpr_operands_the_rule_rejects():
    a, b, c = f32_var(3), Var(ShapedArray((3,), np.int32)), f32_var(3)
    jaxpr = Jaxpr([], [a, b], [c], [JaxprEqn([a, b], [c], lax.add_p, {})])
    with pytest.raises(JaxprTypeError, match="in equation .*add.*same dtypes"):
        check_jaxpr(jaxpr)


def test_check_jaxpr_variable_defined_twice():
    a, b = f32_var(3), f32_var(3)
    jaxpr = Jaxpr([], [a], [b], [JaxprEqn([a], [b], lax.sin_p, {}),
                                 JaxprEqn([b], [b], lax.cos_p, {})])
    with pytest.raises(JaxprTypeError, match="defined twice"):
        check_jaxpr(jaxpr)




@pytest.mark.parametrize("columns", [100_000, 1_000_000, 10_000_000, 100_000_000])
def test_a_line_ending_in_the_closing_brace_fits_in_80_columns_as_in_jax(columns):
    """The width counts the closing `` }``: 81 characters break, as in JAX (lines around
    the limit, with a nested jaxpr too)."""
    jax = pytest.importorskip("jax")
    for rows in (3, 30, 300):
        for build in (lambda m: lambda x: x * 2, lambda m: lambda x: (x + 1, x * 2),
                      lambda m: lambda x: m.jit(lambda y: y + 1)(x)):
            ours = nbjax.make_jaxpr(build(nbjax))(nbjax.ShapeDtypeStruct((rows, columns), f32))
            theirs = jax.make_jaxpr(build(jax))(jax.ShapeDtypeStruct((rows, columns), f32))
            assert str(ours) == str(theirs)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_literals_print_the_shortest_decimal_that_reads_back_at_their_dtype(dtype):
    """``1.01:f32[]``, not float64's expansion of float32's 1.01 (``1.0099999904632568``):
    the digits NumPy's shortest repr would choose at that dtype, written as Python writes
    floats (``1e-05``, ``123456790.0``)."""
    from nbjax.core.jaxpr import scalar_text
    dt = np.dtype(nbjax.numpy.dtype(dtype))
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(size=200) * 10.0 ** rng.integers(-8, 9, 200),
                             [1.01, 0.1, 123456789.0, 1e-5, 0.0, -0.0, 65504.0]])
    values = values[np.abs(values) <= float(nbjax.numpy.finfo(dt).max)]
    for value in values.astype(dt):
        text = scalar_text(value)
        assert dt.type(float(text)) == value and np.signbit(float(text)) == np.signbit(value)
        digits = len(np.format_float_scientific(float(text), unique=True)
                     .split("e")[0].replace("-", "").replace(".", "").rstrip("0") or "0")
        if digits > 1:  # one digit fewer never reads back
            with np.errstate(over="ignore"):
                assert dt.type(float(f"{value.astype(np.float64):.{digits - 2}e}")) != value
        if dtype in ("float32", "float64", "float16"):  # NumPy's own shortest digits
            assert float(text) == float(np.format_float_scientific(value, unique=True))
    for special in (np.inf, -np.inf, np.nan):
        assert scalar_text(dt.type(special)) == repr(float(special))

"""``nbjax.experimental.jet``: Taylor-mode automatic differentiation, as
``jax.experimental.jet``.

**What it computes.** ``jet(f, (x,), ([x1, x2, ..., xK],))`` describes a path through
``x``, ``x(t) = x + x1 t + x2 t^2/2! + ... + xK t^K/K!`` (term ``k`` is the k-th derivative
of the path at ``t = 0``), and returns ``f(x)`` together with the first K derivatives of
``f(x(t))`` at ``t = 0``, in the same convention. The straight path ``x + t v`` (terms
``[v, 0, ..., 0]``) gives the directional derivatives ``d^k f(x)[v, ..., v]``: so
``jet(sin, (x,), ([1.0, 0.0],))`` is ``(sin x, [cos x, -sin x])``. Nested ``jvp`` computes
the same numbers, at a cost that doubles with each order; a jet costs O(K^2) products.

**How: recurrences on Taylor coefficients.** Inside, a series is held as its Taylor
coefficients ``x_k = xk / k!`` (``factorial_scaled=False`` takes and returns these
directly). On coefficients the rules are short recurrences (Griewank & Walther, *Evaluating
Derivatives*, 2nd ed., ch. 13):

- a product is a Cauchy product, ``(a b)_k = sum_j a_j b_{k-j}`` (Leibniz's rule);
  a quotient ``q = a / b`` solves ``b q = a`` one coefficient at a time;
- a function whose derivative is known in terms of its own value, ``y' = g(y) x'``
  (``exp' = exp``, ``tanh' = 1 - tanh^2``), gets ``y_k`` from ``k y_k = sum_{j<k} g_j
  (x')_{k-1-j}``, where ``g_j`` needs only ``y_0..y_j``: the two series are built together,
  a coefficient at a time (Faa di Bruno's formula, in its recursive form);
- a function whose derivative is an algebraic function of the input (``log' = 1/x``,
  ``atan' = 1/(1 + x^2)``) is the integral of that series times ``x'``.

**The interpreter.** ``jet`` traces ``f`` to a jaxpr (``staging.trace_to_jaxpr``) and walks
its equations as ``eval_jaxpr`` does, keeping a primal and a series for each variable. Each
primitive's rule in ``jet_rules`` maps the operands' primals and series to the result's, and
is written with ``lax`` operations: the jet is an ordinary computation, so ``jit``, ``vmap``
and ``grad`` apply to it, and it can itself run inside them.

**Symbolic zeros.** A value that does not depend on the inputs along the path (a constant,
an integer, a ``stop_gradient``) has the series ``zero_series``. An equation whose operands
all have it just runs, with no Taylor arithmetic; the product and quotient rules skip the
zero terms of a constant operand (``zero_term``), so ``W @ x`` with constant ``W`` costs one
product per term, not K.

**Calls.** A ``jit`` inside ``f`` stays a call: of the jet of its callee. ``custom_jvp`` and
``custom_vjp`` functions (and ``checkpoint``, ``custom_vmap``) are followed through their
primal function, as JAX's jet does: their custom rules give first derivatives only.

**Not supported**, as in JAX: loops and conditionals (``scan``, ``while``, ``cond``),
``sort``, linear solves and any other primitive without a rule raise
``NotImplementedError("Jet rule for 'scan' not implemented")`` (JAX 0.10.2 raises a bare
``KeyError`` there). Only when a series reaches them: on constants they just run.

**Where it differs from JAX.**

- The primals and each term must be arrays (a ``ValueError`` as in JAX); a term of another
  shape is a ``TypeError`` here (JAX fails later, or not at all); a term of another dtype is
  converted to its primal's (JAX computes with it as it is), but a complex term for a real
  primal is a ``TypeError``.
- Integers and booleans have zero series, as their tangents are ``float0`` in ``jvp``: the
  terms of an integer argument are ignored, and an integer result gets integer zeros (JAX
  returns float zeros, and can fail on an integer argument with nonzero terms).
- ``custom_jvp`` functions (``relu``, ``softplus``) work; JAX 0.10.2's jet fails on them
  with an ``UnexpectedTracerError``.
- Rules JAX lacks: ``tan``, ``asin``, ``acos``, ``atan``, ``cbrt``, ``exp2``, ``fma``, complex
  ``abs``, ``scatter``, ``scatter-sub``, ``tile``, ``name`` (``checkpoint_name``), and the
  calls ``checkpoint`` and ``custom_vmap``. An equation whose results are all integers or
  booleans (``argmax``) needs no rule. ``zero_series`` and ``zero_term`` may be given as an
  argument's series or a term.
- Public names: ``jet``, ``jet_rules`` (rule signature: ``rule(primals, series, **params) ->
  (primal_out, series_out)``, each series a list of K Taylor coefficients or
  ``zero_series``, the latter only for some operands; a rule may leave ``zero_term``s in
  its result), ``zero_series``, ``zero_term`` and their classes. Skipped: ``JetTrace``,
  ``JetTracer``, ``jet_fun``, ``jet_subtrace``, ``traceable`` and ``call_param_updaters``
  (JAX runs a trace; nbjax interprets a jaxpr), the registrars ``deflinear``, ``defzero``,
  ``def_deriv``, ``def_comp`` and their ``*_prop`` rules (private here: a rule is added by
  putting it in ``jet_rules``), ``jet2`` (``jet(..., factorial_scaled=False)``) and
  ``fact``.
"""

import math
import operator

from .. import lax
from .. import numpy as jnp
from ..checkpoint import name_p
from ..core import ClosedJaxpr, Literal, dtypes, get_aval
from ..core.source_info import restaging
from ..interpreters import ad, staging
from ..lax.elementwise import power_by_squaring
from ..lax.standard import as_array
from ..tree_util import tree_flatten, tree_structure, treedef_is_leaf

__all__ = ["jet", "jet_rules", "zero_series", "zero_term", "ZeroSeries", "ZeroTerm"]


# --- symbolic zeros ------------------------------------------------------------------------

class ZeroSeries:
    """The class of ``zero_series``: every term of a value's series is zero."""

    def __repr__(self):
        return "zero_series"


class ZeroTerm:
    """The class of ``zero_term``: one coefficient known to be zero."""

    def __repr__(self):
        return "zero_term"


zero_series = ZeroSeries()
zero_term = ZeroTerm()


# --- the front end -------------------------------------------------------------------------

def jet(fun, primals, series, factorial_scaled=True, **_):
    """Taylor-mode differentiation: ``(fun(*primals), series_out)``.

    Args:
      fun: a function of arrays returning an array or a pytree of arrays.
      primals: a tuple or list, one array per positional argument of ``fun``.
      series: a tuple or list with, per primal, a list of K terms of its shape: the first
        K derivatives of a path through the primal (see the module docstring).
      factorial_scaled: with False, the terms in and out are Taylor coefficients (the
        derivatives divided by ``k!``) instead.

    Returns:
      ``(primal_out, series_out)``: ``fun(*primals)``, and the same pytree with each leaf
      replaced by the list of its K terms.
    """
    primals, series, order = _check_arguments(primals, series)
    if factorial_scaled:
        series = [_rescale(s, lambda t, k: t / math.factorial(k)) for s in series]
    out_trees = []

    def flat_fun(*args):
        leaves, tree = tree_flatten(fun(*args))
        out_trees.append(tree)
        return leaves

    jaxpr, consts = staging.trace_to_jaxpr(flat_fun, [get_aval(p) for p in primals],
                                           staging.describe(fun, "jet"))
    outs = _eval(jaxpr, consts, primals, series)
    if factorial_scaled:
        outs = [(p, _rescale(s, lambda t, k: t * math.factorial(k))) for p, s in outs]
    primals_out = [p for p, _ in outs]
    series_out = [[jnp.zeros_like(p)] * order if s is zero_series else s for p, s in outs]
    tree = out_trees[0]
    return tree.unflatten(primals_out), tree.unflatten(series_out)


def _rescale(terms, scale):
    """``scale(t, k)`` applied to term ``k`` (counted from 1) beyond the first."""
    if terms is zero_series:
        return terms
    return [t if k == 1 else scale(t, k) for k, t in enumerate(terms, 1)]


def _check_arguments(primals, series):
    """The primals as arrays, their series (lists of terms of their own shape and dtype, or
    ``zero_series``) and the order K, with JAX's errors for what does not fit."""
    if not isinstance(primals, (tuple, list)) or not isinstance(series, (tuple, list)):
        raise TypeError("jet: primals and series must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(series).__name__}.")
    for i, terms in enumerate(series):
        if terms is not zero_series and not isinstance(terms, (tuple, list)):
            raise TypeError(f"jet: the series of argument {i} must be a list or tuple of "
                            f"terms, got {type(terms).__name__}.")
    orders = {len(terms) for terms in series if terms is not zero_series}
    if len(orders) != 1:
        raise ValueError("jet terms have inconsistent lengths for different arguments")
    order, = orders
    if len(primals) != len(series):
        raise TypeError(f"jet: {len(primals)} primals but {len(series)} series; give one "
                        "list of terms per primal.")
    checked = [_check_argument(i, x, terms) for i, (x, terms) in enumerate(zip(primals, series))]
    return [x for x, _ in checked], [terms for _, terms in checked], order


def _check_argument(i, x, terms):
    """One primal as an array, and its series."""
    if not treedef_is_leaf(tree_structure(x)):
        raise ValueError(f"primal value at position {i} is not an array")
    x = as_array(x)
    aval = get_aval(x)
    checked = [t if t is zero_term else _check_term(i, j, t, aval)
               for j, t in enumerate([] if terms is zero_series else terms)]
    # (integers and booleans have no path to move along: their series is zero)
    if not dtypes.is_inexact(aval.dtype) or all(t is zero_term for t in checked):
        return x, zero_series
    return x, [lax.full_like(x, 0) if t is zero_term else t for t in checked]


def _check_term(i, j, t, aval):
    """Term ``j`` of argument ``i`` as an array of its primal's shape and dtype."""
    if not treedef_is_leaf(tree_structure(t)):
        raise ValueError(f"term {j} for argument {i} is not an array")
    t = as_array(t)
    t_aval = get_aval(t)
    if t_aval.shape != aval.shape:
        raise TypeError(f"jet: term {j} for argument {i} has shape {t_aval.shape}, but the "
                        f"primal has shape {aval.shape}.")
    if dtypes.is_complex(t_aval.dtype) and not dtypes.is_complex(aval.dtype):
        raise TypeError(f"jet: term {j} for argument {i} is complex ({t_aval.dtype}), but "
                        f"the primal is real ({aval.dtype}).")
    return t if t_aval.dtype == aval.dtype else lax.convert_element_type(t, aval.dtype)


# --- the interpreter -----------------------------------------------------------------------

def _eval(jaxpr, consts, primals, series):
    """Run ``jaxpr`` on primals and their series: the ``(primal, series)`` of each output.

    As ``eval_jaxpr``, each equation is bound under the current trace (and restaged with
    its own source line), so the Taylor arithmetic is traced by whatever encloses ``jet``.
    """
    env = {}

    def read(atom):
        return (atom.val, zero_series) if isinstance(atom, Literal) else env[atom]

    env.update((v, (as_array(c), zero_series)) for v, c in zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, zip(primals, series)))
    with restaging(jaxpr.eqns) as eqns:
        for eqn in eqns:
            ins = [read(a) for a in eqn.invars]
            outs = _apply(eqn, [p for p, _ in ins], [s for _, s in ins])
            env.update(zip(eqn.outvars, outs))
    return [read(a) for a in jaxpr.outvars]


def _apply(eqn, primals, series):
    """One equation: the ``(primal, series)`` of each of its results."""
    prim, params = eqn.primitive, eqn.params
    if all(s is zero_series for s in series) or not any(
            dtypes.is_inexact(v.aval.dtype) for v in eqn.outvars):
        outs = prim.bind(*primals, **params)
        return [(o, zero_series) for o in (outs if prim.multiple_results else [outs])]
    if prim.is_call:
        return _jet_call(eqn, primals, series)
    if prim.call_param is not None:
        callee = params[prim.call_param]
        return _eval(callee.jaxpr, callee.consts, primals, series)
    rule = jet_rules.get(prim)
    if rule is None:
        raise NotImplementedError(f"Jet rule for '{prim}' not implemented")
    out, terms = rule(primals, series, **params)
    if prim.multiple_results:
        return [_settle(o, t) for o, t in zip(out, terms)]
    return [_settle(out, terms)]


def _settle(primal, terms):
    """A rule's result series as the interpreter keeps it: ``zero_series``, or one array
    per term of the primal's shape (a rule may leave ``zero_term``s, or terms that broadcast
    to the result, as a scalar operand's do)."""
    if terms is zero_series or all(t is zero_term for t in terms):
        return primal, zero_series
    shape = get_aval(primal).shape
    return primal, [lax.full_like(primal, 0) if t is zero_term else
                    t if get_aval(t).shape == shape else jnp.broadcast_to(t, shape)
                    for t in terms]


def _jet_call(eqn, primals, series):
    """A call (``jit``) stays a call: of its callee's jet, on the primals and the terms of
    the operands that have a series, returning the primals and the nonzero terms."""
    prim, params = eqn.primitive, eqn.params
    callee, order = params[prim.call_param], _order(series)
    moving = [s is not zero_series for s in series]
    out_moving = []

    def callee_jet(*flat):
        terms = iter(flat[len(primals):])
        inner = [[next(terms) for _ in range(order)] if m else zero_series for m in moving]
        outs = _eval(callee.jaxpr, callee.consts, flat[:len(primals)], inner)
        out_moving[:] = [s is not zero_series for _, s in outs]
        return [p for p, _ in outs] + [t for _, s in outs if s is not zero_series for t in s]

    flat = list(primals) + [t for s in series if s is not zero_series for t in s]
    jaxpr, consts = staging.trace_to_jaxpr(callee_jet, [get_aval(x) for x in flat],
                                           f"jet of {params.get('name', prim.name)}")
    closed = ClosedJaxpr(staging.convert_constvars(jaxpr), [])
    outs = prim.bind(*consts, *flat, **dict(params, **{prim.call_param: closed}))
    n = len(eqn.outvars)
    terms = iter(outs[n:])
    return [(p, [next(terms) for _ in range(order)] if m else zero_series)
            for p, m in zip(outs[:n], out_moving)]


# --- series arithmetic ---------------------------------------------------------------------
# A series here is the list of its Taylor coefficients, the value first: [x_0, x_1, ...,
# x_K]. Only _plus, _minus, _cauchy, _times and _quotient accept zero_term (the coefficients
# of a constant operand beyond the first); the other helpers take arrays.

def _order(series):
    """K: the number of terms of the operands that have a series."""
    return next(len(s) for s in series if s is not zero_series)


def _full(primal, terms, order):
    """``[primal, terms...]``, a zero series as ``zero_term``s."""
    return [primal] + ([zero_term] * order if terms is zero_series else list(terms))


def _dense(primal, terms, order):
    """``[primal, terms...]``, a zero series as arrays of zeros."""
    if terms is zero_series:
        return [primal] + [lax.full_like(primal, 0)] * order
    return [primal] + list(terms)


def _plus(a, b):
    """``a + b``, a ``zero_term`` counting as 0."""
    if b is zero_term:
        return a
    return b if a is zero_term else a + b


def _minus(a, b):
    """``a - b``, a ``zero_term`` counting as 0."""
    if b is zero_term:
        return a
    return -b if a is zero_term else a - b


def _cauchy(a, b, k, first=0, last=None, product=operator.mul):
    """Coefficient ``k`` of the product ``a(t) b(t)``, summed over ``j`` from ``first`` to
    ``last`` (default ``k``): ``sum_j a_j b_{k-j}`` (Leibniz's rule for the k-th derivative
    of a product, divided by ``k!``). Pairs with a ``zero_term`` are skipped; ``zero_term``
    if every pair is."""
    total = zero_term
    for j in range(first, k + 1 if last is None else last + 1):
        if a[j] is zero_term or b[k - j] is zero_term:
            continue
        term = product(a[j], b[k - j])
        total = term if total is zero_term else total + term
    return total


def _times(a, b, product=operator.mul):
    """The coefficients of ``a(t) b(t)``, as many as ``a`` has."""
    return [_cauchy(a, b, k, product=product) for k in range(len(a))]


def _quotient(a, b, q0):
    """The coefficients of ``q = a / b`` (``q0`` the value): ``b q = a`` gives, coefficient
    by coefficient, ``q_k = (a_k - sum_{j=1..k} b_j q_{k-j}) / b_0``."""
    q = [q0]
    for k in range(1, len(a)):
        rest = _minus(a[k], _cauchy(b, q, k, first=1))
        q.append(zero_term if rest is zero_term else rest / b[0])
    return q


def _scale(n, t):
    """``n * t`` for a positive integer ``n`` (no equation for ``n = 1``)."""
    return t if n == 1 else n * t


def _shrink(t, n):
    """``t / n`` for a positive integer ``n`` (no equation for ``n = 1``)."""
    return t if n == 1 else t / n


def _derivative(x):
    """The coefficients of ``x'(t)``: ``(x')_k = (k + 1) x_{k+1}``, one fewer than ``x``'s."""
    return [_scale(k + 1, x[k + 1]) for k in range(len(x) - 1)]


def _integral(y0, v):
    """The series with value ``y0`` whose derivative has the coefficients ``v``."""
    return [y0] + [_shrink(v[k], k + 1) for k in range(len(v))]


def _along(dx, y0, slope):
    """The series ``y`` with ``y(0) = y0`` and ``y' = g x'`` (``dx``: the coefficients of
    ``x'``), where ``g`` depends on ``y``: ``slope(y, g)`` gives ``g_m`` for ``m =
    len(g)`` from ``y_0..y_m`` (and ``g_0..g_{m-1}``). Then ``k y_k = (g x')_{k-1} =
    sum_{j<k} g_j (x')_{k-1-j}``, which needs no more of ``g`` than ``y_0..y_{k-1}`` give."""
    y, g = [y0], []
    for k in range(1, len(dx) + 1):
        g.append(slope(y, g))
        y.append(_shrink(_cauchy(g, dx, k - 1), k))
    return y


def _square_plus(c, sign, x):
    """The series of ``c + x^2`` (``sign = 1``) or ``c - x^2`` (``sign = -1``)."""
    sq = _times(x, x) if sign > 0 else [-t for t in _times(x, x)]
    return [sq[0] + c if c else sq[0]] + sq[1:]


def _sqrt_series(x, y0):
    """``y = sqrt(x)``: ``y^2 = x`` gives ``2 y_0 y_k = x_k - sum_{0<j<k} y_j y_{k-j}``."""
    y = [y0]
    for k in range(1, len(x)):
        y.append(_minus(x[k], _cauchy(y, y, k, first=1, last=k - 1)) / (2 * y0))
    return y


def _sqrt_of(u):
    """The series of ``sqrt(u)``."""
    return _sqrt_series(u, lax.sqrt(u[0]))


def _power_series(x, y0, a):
    """``y = x^a`` for a constant ``a``: ``x y' = a y x'``, so ``g = y'/x' = a y / x``, and
    ``x g = a y`` gives ``g_m = (a y_m - sum_{j=1..m} x_j g_{m-j}) / x_0``."""
    def slope(y, g):
        m = len(g)
        return _minus(a * y[m], _cauchy(x, g, m, first=1)) / x[0]
    return _along(_derivative(x), y0, slope)


def _exp_along(dw, y0):
    """``y = exp(w)`` from the coefficients of ``w'``: ``y' = y w'``."""
    return _along(dw, y0, lambda y, g: y[len(g)])


def _sin_cos(x, s0, c0, hyperbolic):
    """The series of ``sin x`` and ``cos x`` together (``sinh``, ``cosh``): ``s' = c x'``
    and ``c' = -s x'`` (``+s x'``), each needing the other's earlier coefficients."""
    dx = _derivative(x)
    s, c = [s0], [c0]
    for k in range(1, len(x)):
        s_k, c_k = _shrink(_cauchy(c, dx, k - 1), k), _shrink(_cauchy(s, dx, k - 1), k)
        s.append(s_k)
        c.append(c_k if hyperbolic else -c_k)
    return s, c


# --- rules ---------------------------------------------------------------------------------

jet_rules = {}


def _def_zero(prim):
    """A piecewise-constant primitive: its result's series is zero."""
    jet_rules[prim] = lambda primals, series, **params: (prim.bind(*primals, **params),
                                                          zero_series)


def _def_linear(prim, fixed=lambda i: False):
    """A primitive linear in its operands jointly: term ``k`` of the result is the primitive
    of the operands' terms ``k``. The operands at positions where ``fixed(i)`` (indices,
    predicates: integers, with no series) are passed as they are to every term."""
    def rule(primals, series, **params):
        order = _order(series)
        outs = [prim.bind(*[p if fixed(i) else
                            lax.full_like(p, 0) if s is zero_series else s[k]
                            for i, (p, s) in enumerate(zip(primals, series))], **params)
                for k in range(order)]
        if prim.multiple_results:
            outs = [list(terms) for terms in zip(*outs)] if outs else []
        return prim.bind(*primals, **params), outs
    jet_rules[prim] = rule


def _def_bilinear(prim):
    """A product of two operands (``mul``, ``dot_general``, convolution): the Cauchy
    product, each pair multiplied by the primitive; a constant factor's zero terms drop
    out."""
    def rule(primals, series, **params):
        order = _order(series)
        a, b = (_full(p, s, order) for p, s in zip(primals, series))
        out = _times(a, b, lambda u, v: prim.bind(u, v, **params))
        return out[0], out[1:]
    jet_rules[prim] = rule


def _def_unary(prim, series_of):
    """An element-wise function: ``series_of(x, y0, **params)`` gives the result's
    coefficients from the operand's (``x``, value first) and the primitive's value ``y0``."""
    def rule(primals, series, **params):
        y0 = prim.bind(*primals, **params)
        return y0, series_of([primals[0], *series[0]], y0, **params)[1:]
    jet_rules[prim] = rule


def _def_inverse(prim, reciprocal_derivative):
    """An element-wise ``y = f(x)`` with ``f'(x) = 1 / h(x)`` (``log``: ``h = x``; ``atan``:
    ``h = 1 + x^2``), ``reciprocal_derivative(x)`` giving the series of ``h``:
    ``y = integral of x' / h``."""
    def series_of(x, y0):
        dx, h = _derivative(x), reciprocal_derivative(x)[:-1]
        return _integral(y0, _quotient(dx, h, dx[0] / h[0]))
    _def_unary(prim, series_of)


def _def_ode(prim, slope):
    """An element-wise ``y = f(x)`` with ``f'(x) = g`` given in terms of ``y``:
    ``slope(y, g)`` as in ``_along``."""
    _def_unary(prim, lambda x, y0: _along(_derivative(x), y0, slope))


for _p in (lax.floor_p, lax.ceil_p, lax.round_p, lax.sign_p, lax.stop_gradient_p,
           lax.bitcast_convert_type_p):
    _def_zero(_p)

for _p in (lax.neg_p, lax.add_p, ad.add_any_p, lax.sub_p, lax.real_p, lax.imag_p, lax.conj_p,
           lax.complex_p, lax.convert_element_type_p, lax.broadcast_in_dim_p, lax.reshape_p,
           lax.squeeze_p, lax.transpose_p, lax.rev_p, lax.slice_p, lax.pad_p,
           lax.concatenate_p, lax.split_p, lax.tile_p, lax.reduce_sum_p, lax.cumsum_p,
           lax.fft_p, name_p):
    _def_linear(_p)
_def_linear(lax.select_n_p, fixed=lambda i: i == 0)
_def_linear(lax.dynamic_slice_p, fixed=lambda i: i >= 1)
_def_linear(lax.dynamic_update_slice_p, fixed=lambda i: i >= 2)
for _p in (lax.gather_p, lax.scatter_p, lax.scatter_add_p, lax.scatter_sub_p):
    _def_linear(_p, fixed=lambda i: i == 1)

for _p in (lax.mul_p, lax.dot_general_p, lax.conv_general_dilated_p):
    _def_bilinear(_p)

_def_unary(lax.square_p, lambda x, y0: [y0] + _times(x, x)[1:])
_def_unary(lax.sqrt_p, _sqrt_series)
_def_unary(lax.rsqrt_p, lambda x, y0: _power_series(x, y0, -0.5))
_def_unary(lax.cbrt_p, lambda x, y0: _power_series(x, y0, 1 / 3))
_def_unary(lax.exp_p, lambda x, y0: _exp_along(_derivative(x), y0))
_def_unary(lax.sin_p, lambda x, y0: _sin_cos(x, y0, lax.cos(x[0]), False)[0])
_def_unary(lax.cos_p, lambda x, y0: _sin_cos(x, lax.sin(x[0]), y0, False)[1])
_def_unary(lax.sinh_p, lambda x, y0: _sin_cos(x, y0, lax.cosh(x[0]), True)[0])
_def_unary(lax.cosh_p, lambda x, y0: _sin_cos(x, lax.sinh(x[0]), y0, True)[1])

# exp2' = log(2) exp2; expm1' = expm1 + 1; tan' = 1 + tan^2; tanh' = 1 - tanh^2;
# logistic' = logistic - logistic^2.
_def_ode(lax.exp2_p, lambda y, g: math.log(2) * y[len(g)])
_def_ode(lax.expm1_p, lambda y, g: y[0] + 1 if not g else y[len(g)])
_def_ode(lax.tan_p, lambda y, g: 1 + y[0] * y[0] if not g else _cauchy(y, y, len(g)))
_def_ode(lax.tanh_p, lambda y, g: 1 - y[0] * y[0] if not g else -_cauchy(y, y, len(g)))
_def_ode(lax.logistic_p, lambda y, g: y[len(g)] - _cauchy(y, y, len(g)))

_def_inverse(lax.log_p, lambda x: x)
_def_inverse(lax.log1p_p, lambda x: [1 + x[0]] + x[1:])
_def_inverse(lax.atan_p, lambda x: _square_plus(1, 1, x))
_def_inverse(lax.atanh_p, lambda x: _square_plus(1, -1, x))
_def_inverse(lax.asinh_p, lambda x: _sqrt_of(_square_plus(1, 1, x)))
_def_inverse(lax.acosh_p, lambda x: _sqrt_of(_square_plus(-1, 1, x)))
_def_inverse(lax.asin_p, lambda x: _sqrt_of(_square_plus(1, -1, x)))
_def_inverse(lax.acos_p, lambda x: [-t for t in _sqrt_of(_square_plus(1, -1, x))])


def _erf_family(sign):
    """``erf' = 2/sqrt(pi) exp(-x^2)`` (``erfc``: its negative), a series of ``x`` alone."""
    def series_of(x, y0):
        dx, u = _derivative(x), _square_plus(0, -1, x)[:-1]
        factor = sign * 2 / math.sqrt(math.pi)
        g = [factor * t for t in _exp_along(_derivative(u), lax.exp(u[0]))]
        return _integral(y0, _times(g, dx))
    return series_of


_def_unary(lax.erf_p, _erf_family(1))
_def_unary(lax.erfc_p, _erf_family(-1))


def _erf_inv_series(x, y0):
    """``erf_inv' = sqrt(pi)/2 exp(y^2)`` in terms of the result ``y``: ``g = c exp(y^2)``
    satisfies ``g' = g (y^2)'``, so ``m g_m = sum_{j<m} g_j ((y^2)')_{m-1-j}``."""
    squares = []  # the coefficients of y^2, one more as each of y's is known

    def slope(y, g):
        m = len(g)
        squares.append(_cauchy(y, y, m))
        if m == 0:
            return math.sqrt(math.pi) / 2 * lax.exp(squares[0])
        return _shrink(_cauchy(g, _derivative(squares), m - 1), m)
    return _along(_derivative(x), y0, slope)


_def_unary(lax.erf_inv_p, _erf_inv_series)


def _integer_pow_series(x, y0, *, y):
    """``x^n`` by repeated squaring of the series (exact products, no division by ``x``),
    then for ``n < 0`` the quotient ``1 / x^{-n}``; ``x^0`` is constant."""
    order = len(x) - 1
    if y == 0:
        return [y0] + [zero_term] * order
    power = power_by_squaring(x, abs(y), _times)
    if y < 0:
        return _quotient([y0] + [zero_term] * order, power, y0)
    return [y0] + power[1:]


_def_unary(lax.integer_pow_p, _integer_pow_series)


def _abs_series(x, y0):
    """``|x|``: as JAX, each term times the sign of ``x`` (+1 at 0); for complex ``x``,
    ``sqrt(re^2 + im^2)``."""
    if not dtypes.is_complex(get_aval(x[0]).dtype):
        return [y0] + [jnp.where(x[0] < 0, -t, t) for t in x[1:]]
    re, im = [lax.real(t) for t in x], [lax.imag(t) for t in x]
    return _sqrt_series([a + b for a, b in zip(_times(re, re), _times(im, im))], y0)


_def_unary(lax.abs_p, _abs_series)


def _div_rule(primals, series):
    """``a / b``: ``_quotient``, where a constant ``b`` makes each term ``a_k / b``."""
    order = _order(series)
    a, b = (_full(p, s, order) for p, s in zip(primals, series))
    q0 = lax.div_p.bind(*primals)
    return q0, _quotient(a, b, q0)[1:]


def _pow_rule(primals, series):
    """``x^y``. A constant exponent: ``_power_series`` (which also holds for ``x < 0``).
    Otherwise ``x^y = exp(w)`` with ``w' = y' log x + y x'/x``."""
    order = _order(series)
    z0 = lax.pow_p.bind(*primals)
    x = _dense(primals[0], series[0], order)
    if series[1] is zero_series:
        return z0, _power_series(x, z0, primals[1])[1:]
    y = _dense(primals[1], series[1], order)
    dx, dy = _derivative(x), _derivative(y)
    dlog = _quotient(dx, x[:-1], dx[0] / x[0])
    log_x = _integral(lax.log(x[0]), dlog)[:-1]
    dw = [u + v for u, v in zip(_times(dy, log_x), _times(y[:-1], dlog))]
    return z0, _exp_along(dw, z0)[1:]


def _atan2_rule(primals, series):
    """``z = atan2(y, x)``: ``z' = (x y' - y x') / (x^2 + y^2)``."""
    order = _order(series)
    z0 = lax.atan2_p.bind(*primals)
    y, x = (_dense(p, s, order) for p, s in zip(primals, series))
    dy, dx = _derivative(y), _derivative(x)
    slope = [u - v for u, v in zip(_times(x[:-1], dy), _times(y[:-1], dx))]
    radius = [u + v for u, v in zip(_times(x, x), _times(y, y))][:-1]
    return z0, _integral(z0, _quotient(slope, radius, slope[0] / radius[0]))[1:]


def _choice_rule(prim, beats):
    """``max`` (``beats = gt``) and ``min`` (``lt``): each term is the chosen operand's;
    where the operands are equal, the mean of their terms, as JAX's jet (and the JVP of
    ``max``) splits a tie."""
    def rule(primals, series):
        x0, y0 = primals
        out = prim.bind(x0, y0)
        if all(s is zero_series for s in series):
            return out, zero_series
        order = _order(series)
        x, y = (_dense(p, s, order) for p, s in zip(primals, series))
        first, tie = beats(x0, y0), jnp.equal(x0, y0)
        return out, [jnp.where(tie, (a + b) / 2, jnp.where(first, a, b))
                     for a, b in zip(x[1:], y[1:])]
    return rule


_max_rule = _choice_rule(lax.max_p, jnp.greater)
_min_rule = _choice_rule(lax.min_p, jnp.less)


def _clamp_rule(primals, series):
    """``clamp(lo, x, hi) = min(max(lo, x), hi)``."""
    (lo, x, hi), (s_lo, s_x, s_hi) = primals, series
    low, low_series = _max_rule([lo, x], [s_lo, s_x])
    _, terms = _min_rule([low, hi], [low_series, s_hi])
    return lax.clamp_p.bind(lo, x, hi), terms


def _rem_rule(primals, series):
    """``rem(x, y) = x - n y`` with the integer ``n = trunc(x / y)`` constant near the
    point: linear there. (``n`` is read back from the result, rounded to the integer.)"""
    order = _order(series)
    (x0, y0), r0 = primals, lax.rem_p.bind(*primals)
    x = _dense(x0, series[0], order)
    if series[1] is zero_series:
        return r0, x[1:]
    n = jnp.round((x0 - r0) / y0)
    return r0, [a - n * b for a, b in zip(x[1:], series[1])]


def _fma_rule(primals, series):
    """``fma(a, b, c) = a b + c``."""
    order = _order(series)
    a, b, c = (_full(p, s, order) for p, s in zip(primals, series))
    return lax.fma_p.bind(*primals), [_plus(u, v) for u, v in zip(_times(a, b)[1:], c[1:])]


def _reduce_choice_rule(prim):
    """``reduce_max``/``reduce_min``: each term is the mean of the terms of the elements
    equal to the extremum, as JAX's jet."""
    def rule(primals, series, *, axes, **params):
        (x0,), (terms,) = primals, series
        y0 = prim.bind(x0, axes=axes, **params)
        shape = get_aval(x0).shape
        kept = tuple(d for d in range(len(shape)) if d not in axes)
        at = lax.convert_element_type(
            lax.eq(x0, lax.broadcast_in_dim(y0, shape, kept)), get_aval(x0).dtype)
        count = lax.reduce_sum(at, axes)
        return y0, [lax.div(lax.reduce_sum(lax.mul(t, at), axes), count) for t in terms]
    return rule


def _cumulative_rule(prim, combine):
    """``cumprod``, ``cummax``, ``cummin``: as JAX, the jet of the parallel prefix scan
    (``associative_scan``) that computes the same, made of primitives with rules; the
    primitive gives the value."""
    def rule(primals, series, *, axis, reverse):
        def scan(x):
            return [lax.associative_scan(combine, x, reverse=reverse, axis=axis)]
        jaxpr, consts = staging.trace_to_jaxpr(scan, [get_aval(primals[0])],
                                               f"jet of {prim.name}")
        (_, terms), = _eval(jaxpr, consts, primals, series)
        return prim.bind(*primals, axis=axis, reverse=reverse), terms
    return rule


jet_rules.update({
    lax.div_p: _div_rule,
    lax.pow_p: _pow_rule,
    lax.atan2_p: _atan2_rule,
    lax.max_p: _max_rule,
    lax.min_p: _min_rule,
    lax.clamp_p: _clamp_rule,
    lax.rem_p: _rem_rule,
    lax.fma_p: _fma_rule,
    lax.reduce_max_p: _reduce_choice_rule(lax.reduce_max_p),
    lax.reduce_min_p: _reduce_choice_rule(lax.reduce_min_p),
    lax.cumprod_p: _cumulative_rule(lax.cumprod_p, lax.mul),
    lax.cummax_p: _cumulative_rule(lax.cummax_p, lax.max),
    lax.cummin_p: _cumulative_rule(lax.cummin_p, lax.min),
})

"""The jaxpr IR: typed SSA programs of primitive applications, printed as JAX prints them.

``{ lambda c:f32[3]; a:f32[3]. let b:f32[3] = mul a c in (b,) }``: constvars before the
semicolon, invars after it, then equations, then outputs. Sub-programs (branches of ``cond``,
bodies of ``scan``) are ``ClosedJaxpr`` values inside equation params.
"""

import itertools

import numpy as np

from . import dtypes
from . import pretty as pp
from .abstract import ShapedArray
from .array import Array
from .errors import JaxprTypeError
from .source_info import restaging


class Var:
    """A variable; its name is chosen when printing, so it is identified by object."""

    __slots__ = ("aval", "count")
    _counter = itertools.count()

    def __init__(self, aval):
        self.aval = aval
        self.count = next(Var._counter)

    def __repr__(self):
        return f"Var({self.count}:{self.aval.str_short(short_dtypes=True)})"

    def __reduce__(self):
        # A new variable where it is unpickled: ``count`` only orders this process's.
        return Var, (self.aval,)


class Literal:
    """A scalar constant written into an equation (``2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval):
        if type(val) is Array and val.aval == aval and val._buffer is None:
            self.val = val  # (already the immutable host array it would be made into)
        else:
            self.val = Array.wrap(np.array(val, aval.dtype), aval)  # keeps its weak type
        self.aval = aval

    def pretty(self):
        value = scalar_text(np.asarray(self.val)[()])
        return f"{value}:{self.aval.str_short(short_dtypes=True)}"


def scalar_text(x):
    """A NumPy scalar as JAX prints a literal: Python's repr of the shortest decimal that
    reads back to the same value at ``x``'s own dtype (``1.01`` for float32's 1.01, not the
    float64 expansion ``1.0099999904632568``); integers and booleans as Python prints them."""
    if dtypes.is_complex(x.dtype):
        part = np.finfo(x.dtype).dtype.type
        return repr(complex(_shortest(part(x.real)), _shortest(part(x.imag))))
    if dtypes.is_float(x.dtype):
        return repr(_shortest(x))
    return repr(x.item())


def _shortest(x):
    """The float with the fewest significant digits that ``x``'s dtype rounds to ``x``."""
    value = float(x)
    if not np.isfinite(value):
        return value
    for digits in range(1, 18):
        candidate = float(f"{value:.{digits}g}")
        with np.errstate(over="ignore"):  # a short candidate may round past the dtype's max
            if x.dtype.type(candidate) == x:
                return candidate
    return value

    def __repr__(self):
        return f"Literal({self.pretty()})"


class JaxprEqn:
    """``outvars = primitive[params] invars``, with where in the user's code it came from."""

    __slots__ = ("invars", "outvars", "primitive", "params", "source_info", "provenance")

    def __init__(self, invars, outvars, primitive, params, source_info=None, provenance=None):
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.primitive = primitive
        self.params = dict(params)
        self.source_info = source_info
        self.provenance = provenance  # a source_info.Provenance under autodiff, else None

    def replace(self, **changes):
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return JaxprEqn(**fields)

    def __repr__(self):
        return pp_eqn(self, _Names(), width=80).format()


class Jaxpr:
    __slots__ = ("constvars", "invars", "outvars", "eqns")

    def __init__(self, constvars, invars, outvars, eqns):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def pretty(self, width=80):
        return pp_jaxpr(self, _Names(_unused_outvars(self))).format(width)

    def __str__(self):
        return self.pretty()

    __repr__ = __str__


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars.

    ``executables`` holds what the compiler made of it, per target, and ``optimized`` what
    its passes made of it (``nbjax.compiler``): compiled code lives exactly as long as the
    jaxpr it runs.
    """

    __slots__ = ("jaxpr", "consts", "executables", "optimized")

    def __init__(self, jaxpr, consts):
        if len(jaxpr.constvars) != len(consts):
            raise ValueError("a ClosedJaxpr needs one value per constvar")
        self.jaxpr = jaxpr
        self.consts = list(consts)
        self.executables = {}
        self.optimized = None

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def pretty(self, width=80):
        return self.jaxpr.pretty(width)

    def __reduce__(self):  # without what was compiled from it
        return ClosedJaxpr, (self.jaxpr, self.consts)

    def __str__(self):
        return self.pretty()

    __repr__ = __str__

    def _repr_pretty_(self, printer, cycle):
        printer.text(str(self))


# --- printing ------------------------------------------------------------------------------

def _letters(n):
    """0 -> a, 25 -> z, 26 -> ba: the names jaxprs give variables, in order of appearance."""
    s = ""
    while not s or n:
        n, i = divmod(n, 26)
        s = chr(97 + i) + s
    return s


class _Names:
    """Variable names, shared by a jaxpr and the sub-jaxprs printed inside it."""

    def __init__(self, fixed=None):
        self.names = dict(fixed or {})
        self.counter = itertools.count()

    def __call__(self, atom):
        if isinstance(atom, Literal):
            return atom.pretty()
        if atom not in self.names:
            self.names[atom] = _letters(next(self.counter))
        return self.names[atom]

    def suggest(self, for_vars, like_vars):
        """Name a call's inner variables like the outer ones they are bound to (as JAX)."""
        for f, like in zip(for_vars, like_vars):
            if isinstance(f, Var) and isinstance(like, Var) and f not in self.names:
                self.names[f] = self(like)


def _unused_outvars(jaxpr):
    """Outputs of equations that nothing reads print as ``_``, as in JAX."""
    used = {v for v in jaxpr.outvars if isinstance(v, Var)}
    unused = {}
    for eqn in reversed(jaxpr.eqns):
        for v in eqn.outvars:
            if v not in used:
                unused[v] = "_"
        used.update(v for v in eqn.invars if isinstance(v, Var))
    return unused


def _pp_vars(atoms, names, typed=False, sep=""):
    docs = [pp.text(names(a) + (":" + a.aval.str_short(short_dtypes=True) if typed else ""))
            for a in atoms]
    return pp.nest(2, pp.group(pp.join(pp.text(sep) + pp.group(pp.brk()), docs)))


def _pp_param(key, value, names):
    if isinstance(value, (Jaxpr, ClosedJaxpr)):
        doc = pp_jaxpr(_open(value), names)
    elif isinstance(value, tuple) and value and all(
            isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
        doc = pp.group(pp.concat([
            pp.nest(2, pp.concat([pp.text("("), pp.brk(""), pp.join(
                pp.brk(), [pp_jaxpr(_open(v), names) for v in value])])),
            pp.brk(""), pp.text(")")]))
    elif isinstance(value, np.dtype):
        doc = pp.text(value.name)
    else:
        doc = pp.text(str(value))
    return pp.text(f"{key}=") + doc


def _open(j):
    return j.jaxpr if isinstance(j, ClosedJaxpr) else j


def _pp_params(params, names):
    """Params in sorted order, unless the primitive's pp_params gave a list of pairs."""
    if not params:
        return pp.concat([])
    items = params if isinstance(params, list) else sorted(params.items())
    return pp.group(pp.concat([
        pp.nest(2, pp.concat([pp.text("["), pp.brk(""), pp.join(
            pp.brk(), [_pp_param(k, v, names) for k, v in items])])),
        pp.brk(""), pp.text("]")]))


def pp_eqn(eqn, names, width=None):
    lhs = _pp_vars(eqn.outvars, names, typed=True)
    params = eqn.primitive.pp_params(eqn.params)
    callee = eqn.params.get("jaxpr") if eqn.primitive.is_call else None
    if callee is not None:
        names.suggest(_open(callee).invars, eqn.invars)
        names.suggest(_open(callee).outvars, eqn.outvars)
    rhs = [pp.text(eqn.primitive.name), _pp_params(params, names),
           pp.text(" ") + _pp_vars(eqn.invars, names)]
    if not eqn.outvars:
        return pp.concat(rhs)
    return pp.concat([lhs, pp.text(" = "), *rhs])


def pp_jaxpr(jaxpr, names):
    constvars = _pp_vars(jaxpr.constvars, names, typed=True)
    invars = _pp_vars(jaxpr.invars, names, typed=True)
    eqns = pp.join(pp.brk("; "), [pp_eqn(e, names) for e in jaxpr.eqns])
    outs = pp.concat([pp.text("("), _pp_vars(jaxpr.outvars, names, sep=","),
                      pp.text(",)" if len(jaxpr.outvars) == 1 else ")")])
    # (the closing brace is part of the group: a line that ends with it fits in the width)
    return pp.group(pp.nest(2, pp.concat([
        pp.text("{ lambda "), constvars, pp.text("; "), invars, pp.text(". let"),
        pp.nest(2, pp.brk() + eqns), pp.brk(), pp.text("in "), outs])) + pp.text(" }"))


# --- type checking -------------------------------------------------------------------------

def subjaxprs(params):
    """The jaxprs among an equation's params."""
    for value in params.values():
        for v in (value if isinstance(value, tuple) else (value,)):
            if isinstance(v, (Jaxpr, ClosedJaxpr)):
                yield _open(v)


def has_effect(eqn):
    """Whether running ``eqn`` does more than compute its results (a host callback, also
    inside a sub-jaxpr): such equations run when the program runs, each one, always, and
    are never dead code."""
    return eqn.primitive.effectful or any(
        has_effect(e) for j in subjaxprs(eqn.params) for e in j.eqns)


def check_jaxpr(jaxpr):
    """Check a jaxpr is well formed and every equation's types follow its abstract_eval rule.

    Raises JaxprTypeError naming the equation at fault.
    """
    defined = set()

    def define(v):
        if not isinstance(v, Var):
            raise JaxprTypeError(f"binder {v!r} is not a Var")
        if v in defined:
            raise JaxprTypeError(f"variable {v!r} defined twice")
        defined.add(v)

    def read(a):
        if isinstance(a, Var) and a not in defined:
            raise JaxprTypeError(f"variable {a!r} used before it is defined")
        return a.aval

    for v in jaxpr.constvars + jaxpr.invars:
        define(v)
    for eqn in jaxpr.eqns:
        in_avals = [read(a) for a in eqn.invars]
        for sub in subjaxprs(eqn.params):
            check_jaxpr(sub)
        try:
            out = eqn.primitive.abstract_eval(*in_avals, **eqn.params)
        except Exception as e:
            raise JaxprTypeError(f"in equation `{eqn!r}`: {e}") from e
        out = out if eqn.primitive.multiple_results else [out]
        if len(out) != len(eqn.outvars) or not all(
                _compatible(o, v.aval) for o, v in zip(out, eqn.outvars)):
            raise JaxprTypeError(
                f"in equation `{eqn!r}`: the rule gives types "
                f"{[o.str_short() for o in out]}, the equation declares "
                f"{[v.aval.str_short() for v in eqn.outvars]}")
        for v in eqn.outvars:
            define(v)
    for a in jaxpr.outvars:
        read(a)


def _compatible(a, b):
    return isinstance(a, ShapedArray) and a.shape == b.shape and a.dtype == b.dtype


# --- evaluation ----------------------------------------------------------------------------

def eval_jaxpr(jaxpr, consts, *args):
    """Run a jaxpr by binding each equation's primitive, so it runs under any trace."""
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env = {}

    def read(a):
        return a.val if isinstance(a, Literal) else env[a]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    with restaging(jaxpr.eqns) as eqns:
        for eqn in eqns:
            out = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
            env.update(zip(eqn.outvars, out if eqn.primitive.multiple_results else [out]))
    return [read(a) for a in jaxpr.outvars]


def eval_closed_jaxpr(closed, *args):
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)

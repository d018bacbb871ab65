"""The magics: ``%%jit``, ``%%grad``, ``%%mpirun``, ``%jaxpr`` and ``%nbjax``.

A cell magic runs its cell as ordinary Python (``cells.py``), then replaces or adds
functions in the user's namespace and displays a view per function; the cell's last
expression is evaluated after the views are shown (so they update live while it runs) and
returned, so IPython displays it as the cell's result.
"""

import ast
import collections

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand

from .. import api
from ..api import grad, hessian, jacfwd, make_jaxpr
from ..jit import jit
from ..viz import view as jaxpr_view
from ..viz.grouping import GROUP_BY
from . import cells
from .mpirun import run_cell as run_under_mpirun
from .options import (BACKENDS, JIT_PANES, MagicParser, axes_list, check_backend, name_list,
                      on_off, pane_list, session)
from .tracebacks import call_user_function
from .transform import TRANSFORM_NAMES, check_transforms, pipeline
from .watch import GradWatch, WatchedJit, retire
from .widgets import GradView, rescale_views

JIT_PARSER = MagicParser("%%jit", "Jit every function defined at the top level of the cell "
                         "and show, under the cell, what the compiler did with each.",
                         epilog="Example:\n  %%jit --static n --show graph,timing\n"
                                "  def f(x, n):\n      return x ** n")
JIT_PARSER.add_argument("--static", type=name_list, default=(), metavar="NAMES",
                        help="comma-separated parameter names that are static (hashable "
                             "Python values; a new value traces again)")
JIT_PARSER.add_argument("--backend", choices=BACKENDS, default=None,
                        help="run on this backend (default: the session's, see %%nbjax)")
JIT_PARSER.add_argument("--show", type=pane_list, default=None, metavar="PANES",
                        help=f"panes of the view: comma-separated from {','.join(JIT_PANES)}"
                             " or all (default: the session's, see %%nbjax)")
JIT_PARSER.add_argument("--quiet", action="store_true",
                        help="jit the functions but show no view (f.view() shows one later)")

GRAD_PARSER = MagicParser("%%grad", "For every function f defined at the top level of the "
                          "cell, define grad_f (and hess_f with --order 2) and show the "
                          "forward and backward computations side by side, with a "
                          "step-through of the derivative at the last input.",
                          epilog="Example:\n  %%grad --wrt x\n  def f(x, y):\n"
                                 "      return jnp.sum(jnp.sin(x) * y)")
GRAD_PARSER.add_argument("--wrt", type=name_list, default=None, metavar="NAMES",
                         help="differentiate with respect to these (positional) parameters "
                              "(default: the first)")
GRAD_PARSER.add_argument("--order", type=int, choices=(1, 2), default=1,
                         help="2 also defines hess_f, the Hessian")
GRAD_PARSER.add_argument("--mode", choices=("rev", "fwd"), default="rev",
                         help="reverse mode (grad, the backward pass) or forward mode "
                              "(jacfwd, tangents)")
GRAD_PARSER.add_argument("--quiet", action="store_true", help="show no view")

JAXPR_PARSER = MagicParser("%jaxpr", "Show the jaxpr of a call as text and graph: "
                           "%jaxpr f(x), %jaxpr grad(f)(x).")
JAXPR_PARSER.add_argument("--budget", default="150", metavar="N|all",
                          help="draw at most N nodes (default 150), or all")
JAXPR_PARSER.add_argument("--text", action="store_true", help="text only, no graph")
JAXPR_PARSER.add_argument("--group", choices=GROUP_BY, default=None,
                          help="draw the equations of each source line or Python function "
                               "call in a cluster of its own (a call's inside its caller's)")
JAXPR_PARSER.add_argument("--hide-identities", action="store_true",
                          help="leave out of the graph the equations that change nothing "
                               "(mul x 1.0, sub x 0.0); the text keeps them")

TRANSFORM_PARSER = MagicParser(
    "%transform", "Show a call's jaxpr after each transformation of a pipeline, side by "
    "side: the original, then each stage with the equations it added coloured and linked "
    "to the ones they came from; a last jit stage shows the compiled kernels.",
    epilog="Example:\n  %transform f(x) --with grad,vmap,jit\n"
           "  (stages f, grad(f), vmap(grad(f)), the kernels of jit(vmap(grad(f))); options "
           "may come\n  before or after the call; the call's arguments are f's, and from a "
           "vmap on each\n  array argument gets a leading batch axis of --batch copies)")
TRANSFORM_PARSER.add_argument("--with", dest="transforms", type=name_list, default=None,
                              metavar="T1,T2,...",
                              help=f"transformations applied in order, from "
                                   f"{','.join(TRANSFORM_NAMES)} (jit last)")
TRANSFORM_PARSER.add_argument("--batch", type=int, default=4, metavar="N",
                              help="size of the batch axis vmap maps over (default 4)")
TRANSFORM_PARSER.add_argument("--in-axes", dest="in_axes", type=axes_list, default=None,
                              metavar="A1,A2,...",
                              help="vmap's in_axes, one per positional argument (None: "
                                   "shared, not batched), e.g. None,0,0 for per-example "
                                   "gradients of loss(params, x, y); default 0 for all")
TRANSFORM_PARSER.add_argument("--backend", choices=BACKENDS, default=None,
                              help="backend jit compiles for (default: the session's)")

NBJAX_PARSER = MagicParser("%nbjax", "Show the session's nbjax options, or set them.",
                           epilog="Example:\n  %nbjax --backend reference --x64 on")
NBJAX_PARSER.add_argument("--backend", choices=BACKENDS,
                          help="backend of jitted functions (nbjax.config jit_backend)")
NBJAX_PARSER.add_argument("--panes", type=pane_list, metavar="PANES",
                          help="panes a %%jit view shows by default")
NBJAX_PARSER.add_argument("--x64", type=on_off, metavar="on|off",
                          help="64-bit floats and ints (nbjax.config enable_x64)")
NBJAX_PARSER.add_argument("--present", type=on_off, nargs="?", const=True, metavar="on|off",
                          help="presenting: larger text and graphs in every view, those "
                               "already shown included (--present alone: on)")
NBJAX_PARSER.add_argument("--baselines", type=on_off, metavar="on|off",
                          help="time the Timing pane's baselines (NumPy, nbjax eager) after "
                               "each cell that compiles; off: only when the pane is opened "
                               "or its button clicked")


# Names ``%jaxpr`` finds when the user's namespace does not define them.
_TRANSFORMATIONS = {name: getattr(api, name) for name in (
    "grad", "value_and_grad", "jvp", "vjp", "linearize", "vmap", "jacfwd", "jacrev",
    "hessian")}
_TRANSFORMATIONS["jit"] = jit


def _top_level_defs(cell):
    """name -> FunctionDef of the cell's top-level functions (the last definition wins)."""
    return {node.name: node for node in cell.statements.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _positional(node):
    return [a.arg for a in node.args.posonlyargs + node.args.args]


def _all_params(node):
    return _positional(node) + [a.arg for a in node.args.kwonlyargs]


def _check_names(option, names, defs):
    """Every name must be a parameter of some function of the cell."""
    known = {p for node in defs.values() for p in _all_params(node)}
    unknown = [n for n in names if n not in known]
    if unknown:
        listing = "; ".join(f"{name}({', '.join(_all_params(node))})"
                            for name, node in defs.items()) or "none"
        raise UsageError(f"{option}: no function in this cell has a parameter named "
                         f"{', '.join(map(repr, unknown))} (the cell's functions: {listing})")


def _no_functions_note(magic):
    print(f"{magic}: this cell defines no function at its top level, so nothing was "
          "transformed (define one with def).")


@magics_class
class NbjaxMagics(Magics):

    @cell_magic
    def jit(self, line, cell):
        """Jit the cell's functions and show a compiler view for each (%%jit --help)."""
        __tracebackhide__ = True  # noqa: F841
        args = JIT_PARSER.parse(line)
        if args.help:
            print(JIT_PARSER.format_help())
            return None
        check_backend("%%jit", args.backend)
        parsed = cells.parse_cell(self.shell, "jit", line, cell)
        defs = _top_level_defs(parsed)
        _check_names("--static", args.static, defs)
        replaced = [self.shell.user_ns.get(name) for name in defs]
        cells.run_statements(parsed)
        for value in replaced:
            retire(value)
        if not parsed.functions:
            _no_functions_note("%%jit")
        views = []
        for name in parsed.functions:
            node, fn = defs[name], self.shell.user_ns[name]
            positional = _positional(node)
            watched = WatchedJit(
                fn, backend=args.backend,
                static_argnums=tuple(i for i, p in enumerate(positional) if p in args.static),
                static_argnames=tuple(p for p in _all_params(node) if p in args.static))
            self.shell.user_ns[name] = watched
            if not args.quiet:
                views.append(watched.view(panes=args.show))
        for v in views:
            v.show()
        return cells.eval_last(parsed)

    @cell_magic
    def grad(self, line, cell):
        """Define grad_f (and hess_f) for the cell's functions and show how the derivative
        is computed (%%grad --help)."""
        __tracebackhide__ = True  # noqa: F841
        args = GRAD_PARSER.parse(line)
        if args.help:
            print(GRAD_PARSER.format_help())
            return None
        parsed = cells.parse_cell(self.shell, "grad", line, cell)
        defs = _top_level_defs(parsed)
        wrt = {name: _wrt(name, node, args.wrt) for name, node in defs.items()}
        replaced = [self.shell.user_ns.get(f"{kind}_{name}") for name in defs
                    for kind in ("grad", "hess")]
        cells.run_statements(parsed)
        for value in replaced:
            retire(value)
        if not parsed.functions:
            _no_functions_note("%%grad")
        for name in parsed.functions:
            fn = self.shell.user_ns[name]
            argnums, names = wrt[name]
            single = argnums[0] if len(argnums) == 1 else argnums
            derivative = grad(fn, argnums=single) if args.mode == "rev" else \
                jacfwd(fn, argnums=single)
            watches = [GradWatch(derivative, fn, "grad", argnums)]
            if args.order == 2:
                watches.append(GradWatch(hessian(fn, argnums=single), fn, "hess", argnums))
            for w in watches:
                self.shell.user_ns[w.__name__] = w
            if not args.quiet:
                GradView(fn, args.mode, argnums, names, watches).show()
        return cells.eval_last(parsed)

    @cell_magic
    def mpirun(self, line, cell):
        """Run the cell in several processes under mpirun; show each one's output
        (%%mpirun --help). The cell must be self-contained."""
        run_under_mpirun(line, cell)

    @line_magic
    @no_var_expand
    def jaxpr(self, line):
        """Show the jaxpr of a call: %jaxpr f(x), %jaxpr grad(f)(x) (%jaxpr --help)."""
        __tracebackhide__ = True  # noqa: F841
        args, expr = JAXPR_PARSER.parse_with_rest(line)
        if args.help or not expr:
            print(JAXPR_PARSER.format_help())
            return None
        budget = _budget(args.budget)
        fn, call_args, call_kwargs = self._call_parts(expr)
        closed = call_user_function(make_jaxpr(fn), call_args, call_kwargs)
        return jaxpr_view(closed, budget=budget, graph=not args.text, scale=session.scale,
                          group=args.group, hide_identities=args.hide_identities)

    @line_magic
    @no_var_expand
    def transform(self, line):
        """Show a call's jaxpr after each transformation, side by side, each stage's new
        equations coloured and linked to the ones they came from.

        ``%transform f(x) --with grad,vmap,jit`` shows four stages: ``f``, ``grad(f)``,
        ``vmap(grad(f))`` and the kernels ``jit`` compiles of ``vmap(grad(f))``. Options
        may come before or after the call. ``--with`` takes grad, value_and_grad, jacfwd,
        jacrev, hessian, vmap and jit (last); the call's arguments are the original
        function's, and from a ``vmap`` on each array argument gets a new leading axis of
        ``--batch`` copies (default 4), or as ``--in-axes`` says (``None,0,0``: the first
        argument shared, as ``vmap(..., in_axes=(None, 0, 0))``). ``--backend`` chooses
        what jit compiles for.
        """
        __tracebackhide__ = True  # noqa: F841
        args, expr = TRANSFORM_PARSER.parse_with_rest(_options_first(line))
        if args.help or not expr:
            print(TRANSFORM_PARSER.format_help())
            return None
        problem = "--with is required, e.g. --with grad,vmap,jit" if args.transforms is None \
            else check_transforms(args.transforms)
        if problem is None and args.batch <= 0:
            problem = f"--batch: expected a positive number, got {args.batch}"
        if problem:
            raise UsageError(f"%transform: {problem}")
        check_backend("%transform", args.backend)
        fn, call_args, call_kwargs = self._call_parts(expr, "%transform")
        if args.in_axes is not None and len(args.in_axes) != len(call_args):
            raise UsageError(f"%transform: --in-axes gives {len(args.in_axes)} axes for "
                             f"{len(call_args)} positional arguments")
        label = ast.unparse(ast.parse(expr.strip(), mode="eval").body.func)
        view = pipeline(fn, label, call_args, call_kwargs, args.transforms,
                        batch=args.batch, backend=args.backend, in_axes=args.in_axes)
        view.scale = session.scale
        return view

    def _call_parts(self, expr, magic="%jaxpr"):
        """(function, args, kwargs) of the call ``expr``, evaluated in the user's namespace
        (where nbjax's transformations are also found, so ``%jaxpr grad(f)(x)`` works
        without importing ``grad``)."""
        __tracebackhide__ = True  # noqa: F841
        expr = expr.strip()
        filename = self.shell.compile.cache(expr, cells.cell_number(self.shell))
        try:
            tree = ast.parse(expr, filename=filename, mode="eval")
        except SyntaxError as e:
            raise UsageError(f"{magic}: cannot read {expr!r}: {e.msg}") from None
        if not isinstance(tree.body, ast.Call):
            raise UsageError(f"{magic} expects a call such as f(x) or grad(f)(x), got {expr!r}")
        call = tree.body
        capture = "__nbjax_capture_call__"
        arguments = ast.Call(func=ast.Name(capture, ast.Load()), args=call.args,
                             keywords=call.keywords)
        parts = ast.Expression(ast.Tuple([call.func, arguments], ast.Load()))
        ast.copy_location(parts.body, call)
        ast.fix_missing_locations(parts)
        names = collections.ChainMap({capture: lambda *a, **k: (a, k)}, self.shell.user_ns,
                                     _TRANSFORMATIONS)
        fn, (call_args, call_kwargs) = eval(compile(parts, filename, "eval"),
                                            self.shell.user_ns, names)
        if not callable(fn):
            raise UsageError(f"{magic}: {ast.unparse(call.func)} is not callable")
        return fn, call_args, call_kwargs

    @line_magic
    def nbjax(self, line):
        """Show or set the session's nbjax options (%nbjax --help)."""
        args = NBJAX_PARSER.parse(line)
        if args.help:
            print(NBJAX_PARSER.format_help())
            return
        check_backend("%nbjax", args.backend)
        for option in ("backend", "panes", "x64", "present", "baselines"):
            value = getattr(args, option)
            if value is not None:
                setattr(session, option, value)
        if args.present is not None:
            rescale_views(session.scale)
        print(session.describe())


def _wrt(name, node, wrt):
    """(argnums, names) of the parameters of ``name`` to differentiate."""
    positional = _positional(node)
    if not positional:
        raise UsageError(f"%%grad: {name}() has no positional parameter to differentiate")
    if wrt is None:
        return (0,), (positional[0],)
    chosen = [p for p in wrt if p in positional]
    if not chosen:
        raise UsageError(f"%%grad --wrt {','.join(wrt)}: {name}({', '.join(_all_params(node))}) "
                         f"has no positional parameter named "
                         f"{' or '.join(map(repr, wrt))}")
    return tuple(positional.index(p) for p in chosen), tuple(chosen)


def _options_first(line):
    """``f(x) --with grad`` as ``--with grad f(x)``: options written after the call move
    in front of it (the first `` -`` after which the text before parses as an expression
    ends the call)."""
    line = line.strip()
    for i, char in enumerate(line):
        if char == "-" and i and line[i - 1].isspace() and not line.startswith("-"):
            try:
                ast.parse(line[:i], mode="eval")
            except SyntaxError:
                continue
            return f"{line[i:]} {line[:i].strip()}"
    return line


def _budget(text):
    if text == "all":
        return None
    try:
        budget = int(text)
    except ValueError:
        budget = 0
    if budget <= 0:
        raise UsageError(f"%jaxpr: argument --budget: expected a positive number or all, "
                         f"got {text!r}")
    return budget

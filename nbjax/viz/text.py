"""The printed jaxpr, exactly ``str(jaxpr)``, as syntax-coloured HTML.

Instead of guessing the syntax with regular expressions, the text is read in lockstep with
the Jaxpr that printed it: we know each equation's outputs, primitive, params and operands,
so we know what comes next and read only what the printer chose (variable names, line
breaks). That gives exact token classes, the printed name of every variable, and the span
of every equation (nested ones inside their parent's), tagged with the same node id the
graph model uses.

Should the printer ever write something this reader does not expect, the text is shown
uncoloured rather than wrongly coloured.
"""

import html
import re
from dataclasses import dataclass, field

from ..core.jaxpr import Literal
from .structure import eqn_id, is_jaxpr, is_jaxpr_tuple, open_jaxpr, param_text, \
    printed_params, sub_jaxprs, sub_prefix
from .theme import BORDER_SOFT, CODE_BG, CODE_FONT, CODE_SIZE, FG, SYNTAX

# Inline styles, so the colours survive where a notebook viewer drops <style> elements; they
# follow the notebook's theme (theme.py).
STYLES = {
    "keyword": f"color:{SYNTAX['keyword']};font-weight:bold",
    "primitive": f"color:{SYNTAX['primitive']};font-weight:bold",
    "var": "",  # the default text colour
    "type": f"color:{SYNTAX['type']}",
    "literal": f"color:{SYNTAX['literal']}",
    "pkey": f"color:{SYNTAX['muted']}",
    "pval": f"color:{SYNTAX['pval']}",
    "punct": f"color:{SYNTAX['muted']}",
}
PRE_STYLE = (f"background:{CODE_BG};color:{FG};padding:0.5em;border:1px solid {BORDER_SOFT};"
             f"border-radius:4px;font-family:{CODE_FONT};font-size:{CODE_SIZE};"
             "line-height:1.35;overflow-x:auto;white-space:pre")

_SPACE = re.compile(r"\s*")
_NAME = re.compile(r"[a-z_]+")


class _Mismatch(Exception):
    """The text is not what the jaxpr object says it should be."""


@dataclass
class Annotated:
    """``text`` (= str(jaxpr)); ``html``: the coloured body; ``names``: Var -> printed
    name; ``spans``: node id -> (start, end) of that equation in ``text``; ``ok``: False
    when the text could not be read (then html is the escaped plain text)."""
    text: str
    html: str
    names: dict = field(default_factory=dict)
    spans: dict = field(default_factory=dict)
    ok: bool = True

    def eqn_text(self, node_id):
        """The equation's text on one line (whitespace runs collapsed), or None."""
        span = self.spans.get(node_id)
        return None if span is None else " ".join(self.text[span[0]:span[1]].split())


def annotate(j):
    """Annotated text of a Jaxpr or ClosedJaxpr."""
    text = str(j)
    reader = _Reader(text)
    try:
        reader.jaxpr(open_jaxpr(j)[0], prefix="")
        reader.end()
    except _Mismatch:
        return Annotated(text, html.escape(text), ok=False)
    return Annotated(text, "".join(reader.out), reader.names, reader.spans)


def jaxpr_html(j):
    """``str(j)`` as a coloured ``<pre>``: tokens are ``<span class="nbjax-KIND">``, each
    equation a ``<span class="nbjax-eqn" data-node=ID>`` (ids as in ``graph_model``),
    variables carry ``data-var``. Static HTML: no scripts, no event handlers."""
    return pre_html(annotate(j).html)


def pre_html(body):
    return f'<pre class="nbjax-jaxpr" style="{PRE_STYLE}">{body}</pre>'


def _attr(value):
    return html.escape(str(value), quote=True)


class _Reader:
    def __init__(self, text):
        self.text, self.pos = text, 0
        self.out = []  # HTML pieces
        self.names = {}
        self.spans = {}

    # -- low level: whitespace, exact text, a name ------------------------------------------

    def space(self):
        m = _SPACE.match(self.text, self.pos)
        self.out.append(html.escape(m.group()))
        self.pos = m.end()

    def emit(self, s, kind, data=""):
        style = f' style="{STYLES[kind]}"' if STYLES[kind] else ""
        self.out.append(f'<span class="nbjax-{kind}"{style}{data}>{html.escape(s)}</span>')
        self.pos += len(s)

    def exact(self, s, kind):
        self.space()
        if not self.text.startswith(s, self.pos):
            raise _Mismatch(f"expected {s!r} at {self.pos}")
        self.emit(s, kind)

    def name(self, var):
        """A variable's printed name; the same Var always prints with the same name."""
        self.space()
        m = _NAME.match(self.text, self.pos)
        if m is None or self.names.get(var, m.group()) != m.group():
            raise _Mismatch(f"expected a name for {var!r} at {self.pos}")
        if m.group() != "_":
            self.names[var] = m.group()
        self.emit(m.group(), "var", f' data-var="{_attr(m.group())}"')

    def end(self):
        self.space()
        if self.pos != len(self.text):
            raise _Mismatch("text left over")

    # -- the grammar, driven by the jaxpr ---------------------------------------------------

    def binder(self, var):
        self.name(var)
        self.exact(":", "punct")
        self.exact(var.aval.str_short(short_dtypes=True), "type")

    def atom(self, a):
        if isinstance(a, Literal):
            value, typ = a.pretty().rsplit(":", 1)
            self.exact(value, "literal")
            self.exact(":", "punct")
            self.exact(typ, "type")
        else:
            self.name(a)

    def jaxpr(self, jaxpr, prefix):
        self.exact("{", "punct")
        self.exact("lambda", "keyword")
        for v in jaxpr.constvars:
            self.binder(v)
        self.exact(";", "punct")
        for v in jaxpr.invars:
            self.binder(v)
        self.exact(".", "punct")
        self.exact("let", "keyword")
        for i, eqn in enumerate(jaxpr.eqns):
            if i:
                self.optional(";")
            self.eqn(eqn, eqn_id(prefix, i))
        self.exact("in", "keyword")
        self.exact("(", "punct")
        for i, a in enumerate(jaxpr.outvars):
            if i:
                self.exact(",", "punct")
            self.atom(a)
        if len(jaxpr.outvars) == 1:
            self.exact(",", "punct")
        self.exact(")", "punct")
        self.exact("}", "punct")

    def optional(self, s):
        """Equations on one line are separated by "; ", on several lines by line breaks."""
        self.space()
        if self.text.startswith(s, self.pos):
            self.emit(s, "punct")

    def eqn(self, eqn, node_id):
        self.space()
        start = self.pos
        self.out.append(f'<span class="nbjax-eqn" data-node="{_attr(node_id)}">')
        for v in eqn.outvars:
            self.binder(v)
        if eqn.outvars:
            self.exact("=", "punct")
        self.exact(eqn.primitive.name, "primitive")
        self.params(eqn, node_id)
        for a in eqn.invars:
            self.atom(a)
        self.spans[node_id] = (start, self.pos)
        self.out.append("</span>")

    def params(self, eqn, node_id):
        items = printed_params(eqn)
        if not items:
            return
        subs = iter(sub_jaxprs(eqn))
        self.exact("[", "punct")
        for key, value in items:
            self.exact(key, "pkey")
            self.exact("=", "punct")
            if is_jaxpr(value):
                self.sub_jaxpr(next(subs), node_id)
            elif is_jaxpr_tuple(value):
                self.exact("(", "punct")
                for _ in value:
                    self.sub_jaxpr(next(subs), node_id)
                self.exact(")", "punct")
            else:
                self.exact(param_text(value), "pval")
        self.exact("]", "punct")

    def sub_jaxpr(self, sub, owner_id):
        suffix, _, value = sub
        self.jaxpr(open_jaxpr(value)[0], sub_prefix(owner_id, suffix) + "/")

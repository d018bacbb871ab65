"""A small Wadler/Lindig-style pretty printer, the layout algorithm JAX prints jaxprs with.

A document is text, breaks, nesting and groups. A group is printed on one line (its breaks as
their text, usually a space) when all of it fits in the remaining width; otherwise each of its
own breaks becomes a newline followed by the current indentation.
"""


class Doc:
    def __add__(self, other):
        return Concat([self, other])

    def format(self, width=80):
        return _layout(self, width)

    def __str__(self):
        return self.format()


class Text(Doc):
    def __init__(self, text):
        self.text = text


class Break(Doc):
    def __init__(self, text=" "):
        self.text = text


class Concat(Doc):
    def __init__(self, children):
        self.children = list(children)


class Nest(Doc):
    def __init__(self, indent, child):
        self.indent, self.child = indent, child


class Group(Doc):
    def __init__(self, child):
        self.child = child


text, brk, concat, nest, group = Text, Break, Concat, Nest, Group


def join(sep, docs):
    out = []
    for i, d in enumerate(docs):
        if i:
            out.append(sep)
        out.append(d)
    return Concat(out)


def _flat_width(doc, memo):
    key = id(doc)
    if key not in memo:
        if isinstance(doc, (Text, Break)):
            w = len(doc.text)
        elif isinstance(doc, Concat):
            w = sum(_flat_width(c, memo) for c in doc.children)
        else:
            w = _flat_width(doc.child, memo)
        memo[key] = w
    return memo[key]


def _layout(doc, width):
    out, col, memo = [], 0, {}
    stack = [(0, False, doc)]  # (indent, flat?, doc), processed last-in first-out
    while stack:
        indent, flat, d = stack.pop()
        if isinstance(d, Text):
            out.append(d.text)
            col += len(d.text)
        elif isinstance(d, Break):
            if flat:
                out.append(d.text)
                col += len(d.text)
            else:
                out.append("\n" + " " * indent)
                col = indent
        elif isinstance(d, Concat):
            stack.extend((indent, flat, c) for c in reversed(d.children))
        elif isinstance(d, Nest):
            stack.append((indent + d.indent, flat, d.child))
        else:  # Group
            fits = flat or col + _flat_width(d.child, memo) <= width
            stack.append((indent, fits, d.child))
    return "".join(out)

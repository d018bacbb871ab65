"""Running the body of a cell magic with ordinary Python semantics.

The body is compiled as the cell itself would be: under a name IPython knows (tracebacks
say ``Cell In[7], line 3``, with line numbers counted from the magic's own line), with the
session's ``__future__`` flags, in the user's namespace. The last expression is evaluated
separately so the magic can return it and IPython displays it as the cell's result, as it
would without the magic.

A syntax error in the body is caught before the cell runs (``syntax_checker``, an IPython
input transformer), so it is reported exactly as an ordinary cell's syntax error is.
"""

import ast
import codeop
import linecache
import re
import sys
from dataclasses import dataclass

CHECKED_MAGICS = re.compile(r"%%(jit|grad)\b")


@dataclass
class Cell:
    """A parsed cell body: ``statements`` run first, then ``last`` (an expression or None)."""
    shell: object
    filename: str
    statements: ast.Module
    last: object  # ast.Expression or None
    functions: list  # names of the functions defined at the cell's top level, in order


def cell_number(shell):
    """The number (``In[4]``) of the cell being run: the one IPython gave the outermost
    frame of a cell on the stack. ``shell.execution_count`` is not it while a cell runs:
    IPython 9 has already advanced it (to the next cell's number) when a magic runs, and
    leaves it when the cell is not stored in the history. Before any cell runs (an input
    transformer checking a cell) it is the number the cell will get."""
    number = None
    frame = sys._getframe(1)
    while frame is not None:
        named = shell.compile.format_code_name(frame.f_code.co_filename)
        match = named and re.fullmatch(r"In\[(\d+)\]", named[1])
        if match:
            number = int(match.group(1))
        frame = frame.f_back
    return shell.execution_count if number is None else number


def _source(shell, first_line, body, number):
    """(filename, source to compile): the body's code with the magic's line as a blank
    line 1, registered with IPython under the cell's ``number``; tracebacks and source
    locations quote the cell as the user wrote it."""
    source = "\n" + shell.transform_cell(body)
    shown = first_line.rstrip("\n") + "\n" + body
    filename = shell.compile.cache(source, number, raw_code=shown)
    size, mtime, _, name = linecache.cache[filename]
    linecache.cache[filename] = (size, mtime, shown.splitlines(keepends=True), name)
    return filename, source


def parse_cell(shell, magic, line, body):
    """Parse ``body`` of ``%%magic line``; raises SyntaxError pointing into the cell."""
    filename, source = _source(shell, f"%%{magic} {line}", body, cell_number(shell))
    tree = shell.compile.ast_parse(source, filename=filename)
    statements, last = tree.body, None
    if statements and isinstance(statements[-1], ast.Expr):
        last = ast.Expression(statements[-1].value)
        statements = statements[:-1]
    functions = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in functions:
                functions.remove(node.name)
            functions.append(node.name)
    module = ast.Module(body=statements, type_ignores=[])
    return Cell(shell, filename, module, last, functions)


def syntax_checker(shell):
    """An IPython cleanup input transformer (lines -> lines) that raises the SyntaxError of
    a ``%%jit``/``%%grad`` cell whose body is not valid Python, before the cell runs.
    Incomplete input is let through (a terminal may still be reading the cell)."""
    def check(lines):
        if not lines or not CHECKED_MAGICS.match(lines[0]):
            return lines
        filename, source = _source(shell, lines[0], "".join(lines[1:]), shell.execution_count)
        codeop.compile_command(source, filename, "exec")  # raises on a syntax error
        return lines
    return check


def run_statements(cell):
    """Run everything but the last expression in the user's namespace."""
    __tracebackhide__ = True  # noqa: F841 (read by IPython)
    code = cell.shell.compile(cell.statements, cell.filename, "exec")
    exec(code, cell.shell.user_ns)


def eval_last(cell):
    """The value of the cell's last expression (None when it has none)."""
    __tracebackhide__ = True  # noqa: F841
    if cell.last is None:
        return None
    code = cell.shell.compile(cell.last, cell.filename, "eval")
    return eval(code, cell.shell.user_ns)

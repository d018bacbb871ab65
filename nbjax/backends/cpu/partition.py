"""A module's IR text cut into parts that LLVM optimises and compiles at the same time.

LLVM's optimiser and code generator run on one core, and a program's first call spends most
of its time there (the CNN step: 0.4 s of passes and 0.2 s of code generation). The
functions of a module are optimised independently except where one is inlined into another,
so a module can be cut between its functions: each part keeps the module's declarations,
metadata and the globals its functions use, defines its own functions, and declares the
other parts' functions it may call; the parts' object files are loaded into one engine,
which links the calls.

Functions with internal linkage (the scalar math helpers, the timing clock) are not visible
across object files: every part that refers to one gets a copy of it. The cost of cutting
is that a call between parts is never inlined; the calls that cross are those of the
program and control-flow functions to whole kernels, where a call costs nothing next to the
loop it runs.
"""

import dataclasses
import re

from . import pipeline

# A part costs about 1.3 ms whatever it holds (parsing, the code generator's set-up, a
# message each way), and a part more than the workers can take at once waits for a second
# round: a tier is cut into no more parts than it has this much estimated work for
# (``_cost``'s units, about a microsecond each by O3 on the machines measured: three times
# a part's own cost). Cutting the dispatch workload's entries (6,000 units) in two, beside
# its kernel, took its LLVM time on two workers from 4.3 to 5.7 ms. (Any kernel compiled
# by O3 costs more than this: two of them still go to two workers.)
MIN_PART_COST = 4000

_NAME = re.compile(r'@("?)([^"(\s]+)\1\(')


@dataclasses.dataclass
class _Function:
    name: str
    header: str      # the ``define ...`` line
    text: str        # the whole definition
    internal: bool

    @property
    def declaration(self):
        return "declare " + self.header[len("define "):]


def split(ir_text, parts):
    """The IR texts of at most ``parts`` modules that together define what ``ir_text``
    defines, balanced by the estimated cost of their functions (``_cost``); ``[ir_text]``
    when there is nothing to cut (one function that is not internal, or ``parts`` < 2)."""
    return [text for text, _ in split_by_tier(ir_text, parts)]


def split_by_tier(ir_text, parts, light=None):
    """``split``, the functions of each light tier (``light``: {name: tier}, see
    ``pipeline``) in parts of their own: (IR text, its tier or None) of each part, the
    costliest first. Each tier gets about its share of the estimated cost in parts (one
    at least, and none smaller than ``MIN_PART_COST``), whose functions it balances."""
    light = light or {}
    shared, functions = _read(ir_text)
    own = [f for f in functions if not f.internal]
    if not light.keys() & {f.name for f in own} and (parts < 2 or len(own) < 2):
        return [(ir_text, None)]
    internal = [f for f in functions if f.internal]
    tiers = {}
    for f in own:
        tiers.setdefault(light.get(f.name), []).append(f)
    total = sum(_cost(f, tier) for tier, fs in tiers.items() for f in fs)
    groups = []
    for tier, fs in tiers.items():
        cost = sum(_cost(f, tier) for f in fs)
        share = min(round(parts * cost / total), int(cost // MIN_PART_COST))
        groups += [(sum(_cost(f, tier) for f in group), group, tier)
                   for group in _balanced(fs, max(1, share), tier)]
    texts = []
    for _, group, tier in sorted(groups, key=lambda g: g[0], reverse=True):
        names = {f.name for f in group}
        declared = [f.declaration for f in own if f.name not in names]
        bodies = [f.text for f in _called(group, internal) + group]
        texts.append(("\n".join(_used(shared, bodies) + declared + bodies) + "\n", tier))
    return texts


_GLOBAL = re.compile(r'^@("?)([^"\s]+)\1 = ')


def _used(shared, bodies):
    """The lines of ``shared`` without the global variables that ``bodies`` (or the
    globals they use) do not refer to: a float32 sin's table, 130 KB of text, was printed,
    parsed and compiled again in every part."""
    variables = {found.group(2): line for line in shared if (found := _GLOBAL.match(line))}
    used, pending = set(), ["\n".join(bodies)]
    while pending:
        for name in set(_REFERENCE.findall(pending.pop())) & variables.keys() - used:
            used.add(name)
            pending.append(variables[name])
    return [line for line in shared
            if (found := _GLOBAL.match(line)) is None or found.group(2) in used]


_REFERENCE = re.compile(r'@"?([^"(\s,)]+)')


def _called(functions, internal):
    """The functions of ``internal`` that ``functions`` refer to, directly or through
    each other, in module order: a part gets copies of those only (the light tiers do not
    drop an unused one: the timing clock, copied into every part, took 1.5 ms of each)."""
    by_name = {f.name: f for f in internal}
    found, pending = set(), list(functions)
    while pending:
        for name in set(_REFERENCE.findall(pending.pop().text)) & by_name.keys() - found:
            found.add(name)
            pending.append(by_name[name])
    return [f for f in internal if f.name in found]


def definitions(ir_text):
    """{name: its definition's text} of the functions ``ir_text`` defines."""
    return {f.name: f.text for f in _read(ir_text)[1]}


def _read(ir_text):
    """(the module's lines outside function bodies, its function definitions in order)."""
    shared, functions, body = [], [], None
    for line in ir_text.splitlines():
        if body is not None:
            body.append(line)
            if line == "}":
                header = body[0]
                functions.append(_Function(_NAME.search(header).group(2), header,
                                           "\n".join(body),
                                           header.startswith(("define internal ",
                                                              "define private "))))
                body = None
        elif line.startswith("define "):
            body = [line]
        else:
            shared.append(line)
    if body is not None:
        raise ValueError("unterminated function definition in the module's IR")
    return shared, functions


def _balanced(functions, parts, tier=None):
    """``functions`` in at most ``parts`` non-empty groups of about equal estimated cost:
    the costliest first, each to the group with the least so far."""
    groups = [[] for _ in range(min(parts, len(functions)))]
    sizes = [0] * len(groups)
    for f in sorted(functions, key=lambda f: _cost(f, tier), reverse=True):
        k = sizes.index(min(sizes))
        groups[k].append(f)
        sizes[k] += _cost(f, tier)
    return groups


def _cost(function, tier=None):
    """The estimated time LLVM takes on ``function`` compiled by ``tier`` (None: O3):
    measured on the benchmarks' kernels, about as much per function (the vectoriser's
    analyses) as per 8 KB of its text, a fraction of that in a light tier."""
    return (8000 + len(function.text)) * pipeline.RELATIVE_COST.get(tier, 1)

"""Equations grouped by the source line or the Python function call they came from.

A group is a run of consecutive equations of one scope (the top-level program, or one
sub-jaxpr) that share a line (``group="line"``) or a function call (``group="function"``),
and a phase (forward or backward): the line of the user-level operation each equation came
from (a backward equation's is the line it differentiates). Runs, not sets: a line whose
equations come back later (the backward pass of a gradient) starts a new group. That keeps
every group contiguous in program order, so a collapsed group drawn as one node never
makes a cycle in the graph.

Function groups nest along the equations' call paths (``SourceInfo.callers``): one group
per call, so ``mlp`` calling ``layer`` twice, each calling ``relu``, gives ``mlp()``
holding ``layer()`` and ``layer() #2``, each holding its ``relu()``. A group's ``nodes``
are all its equations, those of the calls inside it included; nested runs stay contiguous
(a call's equations are a run inside its caller's). Equations traced outside any user
function (nbjax's own code traced directly) are in no function group.

Groups fold like sub-jaxpr clusters: flip ``collapsed`` and draw again; ``representatives``
(model.py) then draws the id of the outermost collapsed group, one node, in place of its
equations, and the edges into and out of the group end on it.
"""

GROUP_BY = ("line", "function")
_LABEL_TEXT = 36  # characters of source text in a group's label


def check_group(group):
    """``group`` itself if it is one of ``GROUP_BY`` or None, else a ValueError."""
    if group is not None and group not in GROUP_BY:
        raise ValueError(f"group must be one of {', '.join(map(repr, GROUP_BY))} or None, "
                         f"got {group!r}")
    return group


def eqns_by_scope(model):
    """Scope (a sub-jaxpr cluster id, None for the top level) -> its equation nodes, in
    program order."""
    by_scope = {}
    for node in model["nodes"]:
        if node["kind"] == "eqn":
            by_scope.setdefault(node["cluster"], []).append(node)
    return by_scope


def _phase(node):
    return node["provenance"]["phase"] if node["provenance"] else None


def _keys(node, by):
    """What the equations of a group share, one key per level of nesting: the line and the
    phase (by line), or each call on the call path and the phase (by function; the backward
    equations of a call are groups of their own)."""
    source, phase = node["source"], _phase(node)
    if source is None:
        return []
    if by == "line":
        return [(source["file"], source["line"], phase)]
    return [(frame["call"], phase) for frame in source["calls"] or ()]


def source_groups(model, by):
    """The groups of ``model``'s equations by ``by`` ("line" or "function"), or [] for None;
    an outer group before the groups inside it.

    Each group: ``id`` (``src-<first node>``, ``-<depth>`` added when nested), ``by``,
    ``cluster`` (its scope), ``parent`` (the group it is in, or None), ``depth`` (0 at the
    top), ``nodes`` (equation node ids, in program order, nested groups' included),
    ``source`` (of its first equation, for a function group in that function's frame),
    ``caller`` (a function group's calling line, None for the traced function's), ``label``,
    ``collapsed`` (False)."""
    if check_group(by) is None:
        return []
    groups = []
    for scope, eqns in eqns_by_scope(model).items():
        groups += _scope_groups(scope, eqns, by)
    return groups


def _scope_groups(scope, eqns, by):
    groups, opened, closed = [], [], set()  # opened: (key, group), outermost first
    numbers = _call_numbers(eqns) if by == "function" else {}
    for node in eqns:
        keys = _keys(node, by)
        same = 0
        while same < min(len(keys), len(opened)) and opened[same][0] == keys[same]:
            same += 1
        closed.update(key for key, _ in opened[same:])
        del opened[same:]
        for depth in range(same, len(keys)):
            parent = opened[-1][1]["id"] if opened else None
            group = _group(node, by, scope, parent, depth, keys[depth] in closed, numbers)
            groups.append(group)
            opened.append((keys[depth], group))
        for _, group in opened:
            group["nodes"].append(node["id"])
    return groups


def _call_numbers(eqns):
    """Call -> its rank among the calls of the same function in this scope (1, 2...), in
    the order they first appear (a gradient's backward pass, which visits them in reverse,
    keeps the forward pass's numbers)."""
    ranks, counts = {}, {}
    for node in eqns:
        for frame in node["source"] and node["source"]["calls"] or ():
            if frame["call"] not in ranks:
                key = (frame["file"], frame["function"])
                counts[key] = ranks[frame["call"]] = counts.get(key, 0) + 1
    return ranks


def _group(node, by, scope, parent, depth, again, numbers):
    source, caller, number = node["source"], None, None
    if by == "function":
        calls = node["source"]["calls"]
        source = {k: calls[depth][k] for k in ("file", "line", "function", "text")}
        caller = calls[depth - 1] if depth else None
        number = numbers[calls[depth]["call"]]
    return {"id": f"src-{node['id']}" + (f"-{depth}" if depth else ""), "by": by,
            "cluster": scope, "parent": parent, "depth": depth, "nodes": [],
            "source": source, "caller": caller,
            "label": _label(source, number, again, _phase(node)), "collapsed": False}


def _label(source, number, again, phase):
    """``number``: a function group's call's rank among its function's calls (the second
    is ``#2``); None for a line."""
    if number is None:
        text = source["text"]
        if len(text) > _LABEL_TEXT:
            text = text[:_LABEL_TEXT - 1] + "…"
        label = f"line {source['line']} ({source['function']})" + (f": {text}" if text else "")
    else:
        label = f"{source['function']}()"
        if number > 1:
            label += f" #{number}"
    if again:
        label += " (continued)"
    if phase == "backward":
        label += " · backward"
    return label

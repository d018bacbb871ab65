"""Equations grouped by the source line or the Python function they came from.

A group is a run of consecutive equations of one scope (the top-level program, or one
sub-jaxpr) that share a line (``group="line"``) or a function (``group="function"``), and a phase
(forward or backward): the line of the user-level operation each equation came from (a
backward equation's is the line it differentiates). Runs, not sets: a line whose
equations come back later (the backward pass of a gradient, the rest of a function after a
call into another one) starts a new group. That keeps every group contiguous in program
order, so a collapsed group drawn as one node never makes a cycle in the graph.

Groups fold like sub-jaxpr clusters: flip ``collapsed`` and draw again; ``representatives``
(model.py) then draws the group's id, one node, in place of its equations, and the edges
into and out of the group end on it.
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


def _key(node, by):
    """What the equations of a group share: the line or the function, and the phase (the
    backward equations of a line are a group of their own)."""
    source = node["source"]
    if source is None:
        return None
    return (source["file"], source["line"] if by == "line" else source["function"],
            _phase(node))


def _label(source, by, again, phase):
    if by == "line":
        text = source["text"]
        if len(text) > _LABEL_TEXT:
            text = text[:_LABEL_TEXT - 1] + "…"
        label = f"line {source['line']} ({source['function']})" + (f": {text}" if text else "")
    else:
        label = f"{source['function']}()"
    if again:
        label += " (continued)"
    if phase == "backward":
        label += " · backward"
    return label


def source_groups(model, by):
    """The groups of ``model``'s equations by ``by`` ("line" or "function"), or [] for None.

    Each group: ``id`` (``src-<first node>``), ``by``, ``cluster`` (its scope), ``nodes``
    (equation node ids, in program order), ``source`` (of its first equation), ``label``,
    ``collapsed`` (False)."""
    if check_group(by) is None:
        return []
    groups = []
    for scope, eqns in eqns_by_scope(model).items():
        seen, run, run_key = set(), [], None
        for node in eqns + [None]:
            key = None if node is None else _key(node, by)
            if run and key != run_key:
                groups.append(_group(run, scope, by, run_key in seen))
                seen.add(run_key)
                run = []
            if key is not None:
                run.append(node)
            run_key = key
    return groups


def _group(run, scope, by, again):
    return {"id": f"src-{run[0]['id']}", "by": by, "cluster": scope,
            "nodes": [n["id"] for n in run], "source": run[0]["source"],
            "label": _label(run[0]["source"], by, again, _phase(run[0])), "collapsed": False}

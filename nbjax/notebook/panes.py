"""Building blocks of the views' JSON state: a drawn graph with its nodes' details, a
coloured jaxpr, source locations and array values as short text.

Everything here returns plain JSON-able data (str, numbers, lists, dicts); the browser
module and the static HTML both render from it.
"""

import html
import itertools
import os

import IPython
import numpy as np

from ..core import dtypes, pytree, to_numpy
from ..viz import DEFAULT_BUDGET, GraphvizNotFoundError, to_dot, to_svg
from ..viz.display import COLOUR_LIMIT
from ..viz.model import build_model, hidden_nodes, representatives
from ..viz.text import annotate, pre_html
from .tracebacks import filtered

_prefixes = itertools.count(1)
ERROR_CHARS = 300  # characters of an error message a view shows


def new_prefix():
    """A prefix for SVG element ids, unique in this session (several graphs share a page)."""
    return f"nbjax{next(_prefixes)}-"


def jaxpr_pane(annotated):
    """The coloured ``<pre>`` of an annotated jaxpr (plain when very long)."""
    body = annotated.html if len(annotated.text) <= COLOUR_LIMIT else \
        html.escape(annotated.text)
    return pre_html(body)


def graph_state(closed, *, fusion=None, prefix="", budget=DEFAULT_BUDGET, annotated=None,
                toggled=(), input_names=None, fold=True, group=None, hide_identities=False,
                opened=()):
    """The graph of ``closed`` drawn to SVG, and every node's details by node id.

    ``toggled``: ids of sub-jaxpr clusters the user opened or closed (each flips the state
    the node budget chose); ``input_names``: the user's names of the inputs
    (``params['W1']``), shown above the jaxpr's. ``svg`` is None and ``note`` says how to
    install Graphviz when it is missing. ``fold=False`` draws repeated blocks unfolded
    (a step-through visits every copy). ``group``: "line" or "function" draws the
    equations of each source line or function in a cluster of its own (None: not).
    ``hide_identities``: the equations that change nothing (``mul x 1.0``) left out, each
    use of their result drawn from their operand; ``identities_hidden`` counts them.
    ``opened``: clusters drawn open whatever the node budget chose, before the user's
    toggles (the step-through opens the branches it steps into)."""
    annotated = annotated or annotate(closed)
    model = build_model(closed, annotated, fusion, budget, fold, group, hide_identities)
    name_inputs(model, input_names)
    for cluster in model["clusters"]:
        cluster["collapsed"] = cluster["collapsed"] and cluster["id"] not in opened
    for cluster in model["clusters"] + model["repeats"] + model["source_groups"]:
        if cluster["id"] in toggled:
            cluster["collapsed"] = not cluster["collapsed"]
    model["hidden"] = len(hidden_nodes(model, representatives(model)))
    svg, note = None, None
    try:
        svg = to_svg(to_dot(model, id_prefix=prefix))
    except GraphvizNotFoundError as e:
        note = f"Graph not shown: {e} The text panes below still work."
    groups = {g["id"]: g for g in model["groups"]}
    nodes = {n["id"]: node_details(n, groups) for n in model["nodes"] if n["kind"] != "more"}
    shown = len(model["nodes"]) - model["hidden"] - (1 if model["truncated"] else 0)
    clusters = [{k: c[k] for k in ("id", "name", "owner", "size", "collapsed")}
                for c in model["clusters"]] + [repeat_toggle(r) for r in model["repeats"]] \
        + group_toggles(model["source_groups"])
    return {"svg": svg, "note": note, "prefix": prefix, "nodes": nodes, "clusters": clusters,
            "shown": shown, "hidden": model["hidden"], "truncated": model["truncated"],
            "budget": budget, "group": group, "hide_identities": hide_identities,
            "identities_hidden": model["identities_hidden"],
            "dimmed": sum(1 for n in model["nodes"] if n["dim"])}


def repeat_toggle(repeat):
    """A folded repeat as the browser's cluster buttons see it: opened or closed from the
    details of any node of its first block."""
    return {"id": repeat["id"], "name": f"repeated block × {repeat['count']}",
            "owner": repeat["block"][0], "members": repeat["block"],
            "size": repeat["size"] * (repeat["count"] - 1), "collapsed": repeat["collapsed"]}


def group_toggles(groups):
    """Source groups as the browser's cluster buttons see them: each folded into one node
    (whose id is the group's) or opened from the details of any of its equations, or of a
    folded group inside it (so a folded ``layer()`` offers to fold its ``mlp()`` too)."""
    members = {g["id"]: list(g["nodes"]) for g in groups}
    parent_of = {g["id"]: g["parent"] for g in groups}
    for g in groups:
        parent = g["parent"]
        while parent is not None:
            members[parent].append(g["id"])
            parent = parent_of[parent]
    return [{"id": g["id"], "name": g["label"], "owner": g["id"], "members": members[g["id"]],
             "size": len(g["nodes"]), "collapsed": g["collapsed"]} for g in groups]


def name_inputs(model, names):
    """Label the top-level input nodes with the user's names (when there is one per input,
    and it says more than the jaxpr's own variable name)."""
    inputs = [n for n in model["nodes"] if n["kind"] == "input" and n["cluster"] is None]
    if not names or len(names) != len(inputs):
        return
    for node, name in zip(inputs, names):
        node["name"] = name
        if name not in node["vars"]:
            node["label"] = f"{name}\n{node['label']}"


def node_details(node, groups):
    """What clicking a node shows."""
    group = groups.get(node["group"])
    source = node["source"]
    provenance = node["provenance"]
    return {
        "id": node["id"], "kind": node["kind"], "primitive": node["primitive"],
        "name": node.get("name"),
        "text": node["text"] or node["label"], "avals": node["avals"], "vars": node["vars"],
        "params": node["params"], "value": node["value"],
        "source": location(source["file"], source["line"]) if source else None,
        "source_text": source["text"] if source else None,
        "phase": provenance["phase"] if provenance else None,
        "provenance": provenance["id"] if provenance else None,
        "origin": provenance["primitive"] if provenance else None,
        "group": node["group"], "kernel": group["label"] if group else None,
        "fusion_reason": node["fusion_reason"], "dim": node["dim"],
    }


def file_label(filename):
    """(``Cell In[3]``, True) for a notebook cell, (``file.py``, False) otherwise."""
    shell = IPython.get_ipython()
    named = shell.compile.format_code_name(filename) if shell is not None else None
    if named:
        return f"{named[0]} {named[1]}", True
    return os.path.basename(filename), False


def location(filename, line):
    """``Cell In[3], line 4`` for a notebook cell, ``file.py:4`` otherwise."""
    label, cell = file_label(filename)
    return f"{label}, line {line}" if cell else f"{label}:{line}"


def leaf_names(name, tree):
    """The names of ``tree``'s leaves, as a user would index them: ``params['W1']``,
    ``layers[0].b``; ``name`` itself when ``tree`` is one array."""
    return [name + pytree.keystr(path) for path, _ in pytree.tree_leaves_with_path(tree)]


def argument_names(params, args, kwargs, skip=()):
    """The names of the array leaves of a call's arguments, in the order a trace takes
    them (positional arguments, then keyword arguments by sorted name, each flattened):
    ``params`` are the function's positional parameter names (``args[i]`` past them);
    ``skip``: positions and names of static arguments, which are not traced."""
    names = []
    for i, a in enumerate(args):
        if i not in skip:
            names += leaf_names(params[i] if i < len(params) else f"args[{i}]", a)
    for k in sorted(kwargs):
        if k not in skip:
            names += leaf_names(k, kwargs[k])
    return names


def short_error(e, limit=ERROR_CHARS):
    """An exception as one short line: its type, then its message cut to ``limit``
    characters (an error quoting a large array must not fill the view)."""
    text = f"{type(e).__name__}: {e}".replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def failure_text(e):
    """What a view says of a failed call: the error, short, and the user's line that
    raised it (``Cell In[4], line 3``)."""
    frames = []
    tb = filtered(e.__traceback__)
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    where = ""
    if frames:
        code = frames[-1].tb_frame.f_code
        where = f" ({location(code.co_filename, frames[-1].tb_lineno)})"
    return f"the last call failed{where}: {short_error(e)}"


def value_text(x, threshold=24):
    """A value as short text: a small array whole, a large one summarised
    (``array_summary``); a container (list, tuple, dict...) one line per leaf, named by its
    path (``['W1']: ...``)."""
    leaves = pytree.tree_leaves_with_path(x)
    if len(leaves) == 1 and not leaves[0][0]:
        return array_text(x, threshold)
    return "\n".join(f"{pytree.keystr(path)}: {' '.join(array_text(leaf, threshold).split())}"
                     for path, leaf in leaves)


def array_text(x, threshold=24):
    """One array: whole when it has at most ``threshold`` elements, else its type, range,
    NaN and infinity counts and its first and last values."""
    a = np.asarray(to_numpy(x))
    with np.printoptions(precision=4, threshold=threshold, edgeitems=3, suppress=True):
        if a.size <= threshold:
            return np.array2string(a, separator=", ")
        flat = np.array2string(a.reshape(-1), separator=", ")
    return f"{array_summary(a)}: {flat}"


def array_summary(a):
    """``f32[100,100] min -1.2 max 3.4`` plus ``2 NaN, 1 inf`` when there are any."""
    kind = f"{dtypes.short_name(a.dtype)}[{','.join(map(str, a.shape))}]"
    if a.size == 0 or a.dtype.kind not in "biuf":
        return kind
    parts = []
    finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a
    if finite.size:
        parts.append(f"min {finite.min():.4g} max {finite.max():.4g}")
    if a.dtype.kind == "f":
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        parts += [f"{nan} NaN"] * bool(nan) + [f"{inf} inf"] * bool(inf)
    return " ".join([kind, ", ".join(parts)]).strip()

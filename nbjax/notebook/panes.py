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

from ..core import to_numpy
from ..viz import DEFAULT_BUDGET, GraphvizNotFoundError, to_dot, to_svg
from ..viz.display import COLOUR_LIMIT
from ..viz.model import MORE, build_model, representatives
from ..viz.text import annotate, pre_html

_prefixes = itertools.count(1)


def new_prefix():
    """A prefix for SVG element ids, unique in this session (several graphs share a page)."""
    return f"nbjax{next(_prefixes)}-"


def jaxpr_pane(annotated):
    """The coloured ``<pre>`` of an annotated jaxpr (plain when very long)."""
    body = annotated.html if len(annotated.text) <= COLOUR_LIMIT else \
        html.escape(annotated.text)
    return pre_html(body)


def graph_state(closed, *, fusion=None, prefix="", budget=DEFAULT_BUDGET, annotated=None,
                toggled=()):
    """The graph of ``closed`` drawn to SVG, and every node's details by node id.

    ``toggled``: ids of sub-jaxpr clusters the user opened or closed (each flips the state
    the node budget chose). ``svg`` is None and ``note`` says how to install Graphviz when
    it is missing."""
    annotated = annotated or annotate(closed)
    model = build_model(closed, annotated, fusion, budget)
    for cluster in model["clusters"]:
        if cluster["id"] in toggled:
            cluster["collapsed"] = not cluster["collapsed"]
    shown = representatives(model)
    model["hidden"] = sum(1 for n in model["nodes"]
                          if n["id"] != MORE and shown[n["id"]] != n["id"])
    svg, note = None, None
    try:
        svg = to_svg(to_dot(model, id_prefix=prefix))
    except GraphvizNotFoundError as e:
        note = f"Graph not shown: {e} The text panes below still work."
    groups = {g["id"]: g for g in model["groups"]}
    nodes = {n["id"]: node_details(n, groups) for n in model["nodes"] if n["kind"] != "more"}
    shown = len(model["nodes"]) - model["hidden"] - (1 if model["truncated"] else 0)
    clusters = [{k: c[k] for k in ("id", "name", "owner", "size", "collapsed")}
                for c in model["clusters"]]
    return {"svg": svg, "note": note, "prefix": prefix, "nodes": nodes, "clusters": clusters,
            "shown": shown, "hidden": model["hidden"], "truncated": model["truncated"],
            "budget": budget}


def node_details(node, groups):
    """What clicking a node shows."""
    group = groups.get(node["group"])
    source = node["source"]
    provenance = node["provenance"]
    return {
        "id": node["id"], "kind": node["kind"], "primitive": node["primitive"],
        "text": node["text"] or node["label"], "avals": node["avals"], "vars": node["vars"],
        "params": node["params"], "value": node["value"],
        "source": location(source["file"], source["line"]) if source else None,
        "source_text": source["text"] if source else None,
        "phase": provenance["phase"] if provenance else None,
        "provenance": provenance["id"] if provenance else None,
        "origin": provenance["primitive"] if provenance else None,
        "group": node["group"], "kernel": group["label"] if group else None,
        "fusion_reason": node["fusion_reason"],
    }


def location(filename, line):
    """``Cell In[3], line 4`` for a notebook cell, ``file.py:4`` otherwise."""
    shell = IPython.get_ipython()
    if shell is not None:
        named = shell.compile.format_code_name(filename)
        if named:
            return f"{named[0]} {named[1]}, line {line}"
    return f"{os.path.basename(filename)}:{line}"


def value_text(x, threshold=24):
    """An array value as short text (large arrays are summarised by NumPy)."""
    a = np.asarray(to_numpy(x))
    with np.printoptions(precision=4, threshold=threshold, edgeitems=3, suppress=True):
        return np.array2string(a, separator=", ")

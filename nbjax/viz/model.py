"""A jaxpr as graph data: nodes, edges, nested clusters and fusion groups, as a JSON-able dict.

Pure data, no drawing: ``to_dot`` draws it, the notebook widget sends it to the browser.
Everything is built in program order (never by iterating a set), so the same jaxpr always
gives the same model.

Nodes are the jaxpr's inputs (``in0``...), constants (``c0``...), equations (``e0``...) and
outputs (``out0``...). An equation with sub-jaxprs (``cond``, ``scan``, ``while``, ``jit``,
``checkpoint``, ``custom_*``) owns one cluster per sub-jaxpr, whose nodes are named under it
(``e1/branches0/e0``). Edges carry the type of the value flowing along them.

Repeated blocks fold: an unrolled Python loop (the same equations, each step fed by the one
before) is drawn once, as a block "× N", its later copies drawn by the first (see
``find_repeats``); flip a repeat's ``collapsed`` to unfold it.

Equations can be grouped by the source line or the Python function they came from
(``group="line"`` or ``"function"``, see ``grouping.py``): each group a cluster that folds
into one node. Equations whose results reach no output, or that change nothing
(``mul x 1.0``), carry a ``dim`` reason (``unused.py``): a gradient's graph fades its dead
forward code.

Large programs stay readable under a node budget: sub-jaxpr clusters collapse first (the
deepest, then the largest), then, in a view grouped by line or function, the largest
source groups (a function's calls before the function), and if that is not enough, the
middle of the top-level program folds into one ``more`` node. ``graph_model(j, budget=None)`` shows everything.
"""

import heapq

import numpy as np

from ..core.jaxpr import Literal, Var
from .structure import eqn_id, eqn_source, is_jaxpr, is_jaxpr_tuple, open_jaxpr, param_text, \
    printed_params, sub_jaxprs, sub_prefix
from .grouping import eqns_by_scope, source_groups
from .text import annotate
from .unused import dim_reasons, kept_operand

DEFAULT_BUDGET = 150
_LABEL_PARAMS = 3  # params shown in a node's label (all of them are in node["params"])
_LABEL_CHARS = 24
_PREVIEW_SIZE = 6  # constants this small show their value


def graph_model(closed_jaxpr, *, fusion=None, budget=DEFAULT_BUDGET, group=None,
                hide_identities=False):
    """The graph model of a Jaxpr or ClosedJaxpr.

    ``fusion``: a fusion plan (an object with ``.groups``, each with ``.eqns``; ``.index``,
    ``.id`` or ``.name``; optionally ``.kind`` and ``.shape``, and ``.decisions`` with
    ``.eqn`` and ``.reason``) for this very jaxpr (equations are matched by identity):
    equations are tagged with their group. ``budget``: the most nodes to draw, or None.
    ``group``: "line" or "function" groups the equations by their source (None: not).
    ``hide_identities``: leave out the equations that return an operand unchanged
    (``mul x 1.0``), each use of their result drawn from that operand instead.

    The model: ``nodes`` (each with ``id``, ``kind`` (input/const/eqn/output/more),
    ``label``, ``cluster`` (the sub-jaxpr it is in, or None), ``depth``, ``avals`` and
    ``vars`` (its results' types and printed names), ``primitive``, ``params`` (printed,
    as text), ``literals``, ``value`` (small constants), ``text`` (the equation as
    printed), ``source`` (file, line, function, text, and ``calls``: the call path
    inside the traced function, outermost first, each frame's file, line, function, text
    and ``call``, which tells calls apart; None outside one), ``provenance`` (phase, id,
    primitive), ``group``, ``fusion_reason``, ``dim`` (why it is drawn faded, or None),
    ``truncated``, ``collective`` (a psum, all_gather...: values cross devices or
    processes)); ``edges`` (``source``, ``target``, ``var``, ``aval``, ``operand``
    position); ``clusters`` (``id``, ``name``, ``label``, ``owner`` equation, ``parent``
    cluster, ``depth``, ``size`` in nodes, ``collapsed``); ``groups`` (``id``, ``kind``,
    ``label``, ``nodes``); ``repeats`` (``find_repeats``); ``source_groups``
    (``grouping.source_groups``); ``identities_hidden`` (how many were left out); ``budget``, ``hidden`` (nodes not drawn, folded repeats
    aside) and ``truncated``. Flip a cluster's or a repeat's ``collapsed`` and draw again to open or
    close it; the same for a source group.
    """
    return build_model(closed_jaxpr, annotate(closed_jaxpr), fusion, budget, group=group,
                       hide_identities=hide_identities)


def build_model(closed_jaxpr, annotated, fusion, budget, fold=True, group=None,
                hide_identities=False):
    """``graph_model`` given the jaxpr's annotated text (a view shows both, and printing
    a large jaxpr is the slow part); ``fold=False`` folds no repeated block."""
    jaxpr, consts = open_jaxpr(closed_jaxpr)
    builder = _Builder(annotated, _Fusion(fusion), hide_identities)
    builder.jaxpr(jaxpr, consts, prefix="", cluster=None, depth=0)
    model = {"nodes": builder.nodes, "edges": builder.edges, "clusters": builder.clusters,
             "groups": builder.fusion.groups, "identities_hidden": builder.identities_hidden}
    model["repeats"] = find_repeats(model) if fold else []
    model["source_groups"] = source_groups(model, group)
    _apply_budget(model, budget)
    return model


# --- building -------------------------------------------------------------------------------

def _short(text, limit=_LABEL_CHARS):
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _source(eqn):
    info = eqn_source(eqn)
    if info is None:
        return None
    return {"file": info.file, "line": info.line, "function": info.function,
            "text": info.source_line(), "calls": _calls(info.call_path)}


def _calls(path):
    """A call path (``SourceInfo.call_path``) as data, outermost frame first, or None."""
    if path is None:
        return None
    return [{"file": f.file, "line": f.line, "function": f.function, "call": str(f.call),
             "text": f.source_line()} for f in path]


def _provenance(p):
    if p is None:
        return None
    return {"phase": p.phase, "id": p.id, "primitive": p.primitive}


def _preview(value):
    """A small constant's value as text, else None."""
    array = np.asarray(value)
    if array.size > _PREVIEW_SIZE:
        return None
    return np.array2string(array, separator=", ")


class _Fusion:
    """A fusion plan read tolerantly: equation identity -> group id and decision reason."""

    KIND_NAMES = {"kernel": "kernel", "library": "library step", "fallback": "reference step",
                  "view": "view"}

    def __init__(self, plan):
        self.groups, self.group_of, self.reason_of = [], {}, {}
        for position, group in enumerate(getattr(plan, "groups", None) or ()):
            gid = self._group_id(group, position)
            kind = str(getattr(group, "kind", "kernel"))
            shape = getattr(group, "shape", None)
            label = f"{self.KIND_NAMES.get(kind, kind)} {gid}"
            if kind == "kernel" and shape is not None:
                label += f" over [{','.join(map(str, shape))}]"
            self.groups.append({"id": gid, "kind": kind, "label": label, "nodes": []})
            for eqn in getattr(group, "eqns", ()):
                self.group_of[id(eqn)] = self.groups[-1]
        for decision in getattr(plan, "decisions", None) or ():
            if getattr(decision, "eqn", None) is not None:
                self.reason_of[id(decision.eqn)] = str(getattr(decision, "reason", ""))

    @staticmethod
    def _group_id(group, position):
        for attr in ("index", "id", "name"):
            value = getattr(group, attr, None)
            if isinstance(value, int) and value >= 0 or isinstance(value, str) and value:
                return value
        return position


def _node(node_id, kind, label, cluster, depth, **fields):
    """A node dict; every node has every key, so readers need no special cases."""
    node = {"id": node_id, "kind": kind, "label": label, "cluster": cluster, "depth": depth,
            "avals": [], "vars": [], "primitive": None, "params": {}, "literals": [],
            "value": None, "text": None, "source": None, "provenance": None, "group": None,
            "fusion_reason": None, "dim": None, "truncated": False, "collective": False}
    node.update(fields)
    return node


class _Builder:
    def __init__(self, annotated, fusion, hide_identities=False):
        self.text, self.fusion = annotated, fusion
        self.nodes, self.edges, self.clusters = [], [], []
        # hidden identities: their result -> the variable drawn for it (the kept operand)
        self.hide_identities, self.alias, self.identities_hidden = hide_identities, {}, 0

    def name(self, var):
        return self.text.names.get(var)

    def add(self, node_id, kind, label, cluster, depth, **fields):
        self.nodes.append(_node(node_id, kind, label, cluster, depth, **fields))
        return node_id

    def edge(self, source, target, var, operand):
        var = self.alias.get(var, var)
        self.edges.append({"source": source, "target": target, "var": self.name(var),
                           "aval": var.aval.str_short(short_dtypes=True), "operand": operand})

    def value_node(self, node_id, kind, var, cluster, depth, value=None):
        """An input or constant node."""
        name, aval = self.name(var), var.aval.str_short(short_dtypes=True)
        title = f"{name}: {aval}" if name else aval
        preview = None if value is None else _preview(value)
        label = f"const {title}" if kind == "const" else title
        if preview is not None:
            label += f"\n= {_short(preview)}"
        return self.add(node_id, kind, label, cluster, depth, avals=[aval],
                        vars=[name], value=preview)

    def jaxpr(self, jaxpr, consts, prefix, cluster, depth):
        env = {}
        for i, v in enumerate(jaxpr.constvars):
            value = None if consts is None else consts[i]
            env[v] = self.value_node(f"{prefix}c{i}", "const", v, cluster, depth, value)
        for i, v in enumerate(jaxpr.invars):
            env[v] = self.value_node(f"{prefix}in{i}", "input", v, cluster, depth)
        first = len(self.nodes)
        for i, eqn in enumerate(jaxpr.eqns):
            self.eqn(eqn, eqn_id(prefix, i), env, cluster, depth)
        by_id = {n["id"]: n for n in self.nodes[first:]}
        for i, reason in dim_reasons(jaxpr).items():
            if eqn_id(prefix, i) in by_id:  # not a hidden identity
                by_id[eqn_id(prefix, i)]["dim"] = reason
        for i, a in enumerate(jaxpr.outvars):
            label = f"out {i}: {a.aval.str_short(short_dtypes=True)}"
            if isinstance(a, Literal):
                label = f"out {i} = {a.pretty()}"
            node_id = self.add(f"{prefix}out{i}", "output", label, cluster, depth,
                               avals=[a.aval.str_short(short_dtypes=True)],
                               vars=[self.name(self.alias.get(a, a)) if isinstance(a, Var)
                                     else None])
            if isinstance(a, Var):
                self.edge(env[a], node_id, a, 0)

    def hidden_identity(self, eqn, env):
        """Leave out ``eqn`` when identities are hidden and it returns a variable operand
        unchanged: its result is then drawn as that operand (edges from the operand's node,
        named by it). Returns whether it was left out."""
        kept = kept_operand(eqn) if self.hide_identities else None
        if kept is None or not isinstance(eqn.invars[kept], Var):
            return False
        operand = eqn.invars[kept]
        self.alias[eqn.outvars[0]] = self.alias.get(operand, operand)
        env[eqn.outvars[0]] = env[operand]
        self.identities_hidden += 1
        return True

    def eqn(self, eqn, node_id, env, cluster, depth):
        if self.hidden_identity(eqn, env):
            return
        params = {k: param_text(v) for k, v in printed_params(eqn)
                  if not (is_jaxpr(v) or is_jaxpr_tuple(v))}
        literals = [a.pretty() for a in eqn.invars if isinstance(a, Literal)]
        results = [self.name(v) for v in eqn.outvars if self.name(v)]
        # "d = mul": the jaxpr's name of the result, so a graph, its jaxpr and the views'
        # tables call a value the same
        lines = [f"{', '.join(results)} = {eqn.primitive.name}" if results
                 else eqn.primitive.name]
        lines += [_short(f"{k}={v}") for k, v in list(params.items())[:_LABEL_PARAMS]]
        lines += [_short(lit) for lit in literals]
        group = self.fusion.group_of.get(id(eqn))
        if group is not None:
            group["nodes"].append(node_id)
        self.add(node_id, "eqn", "\n".join(lines), cluster, depth,
                 avals=[v.aval.str_short(short_dtypes=True) for v in eqn.outvars],
                 vars=[self.name(v) for v in eqn.outvars], primitive=eqn.primitive.name,
                 params=params, literals=literals,
                 text=self.text.eqn_text(node_id) or repr(eqn),
                 source=_source(eqn), provenance=_provenance(eqn.provenance),
                 group=None if group is None else group["id"],
                 fusion_reason=self.fusion.reason_of.get(id(eqn)),
                 collective=eqn.primitive.lowerings.get("library") == "collective")
        for operand, a in enumerate(eqn.invars):
            if isinstance(a, Var):
                self.edge(env[a], node_id, a, operand)
        for suffix, name, sub in sub_jaxprs(eqn):
            self.sub_jaxpr(sub_prefix(node_id, suffix), name, sub, eqn, node_id, cluster,
                           depth)
        for v in eqn.outvars:
            env[v] = node_id

    def sub_jaxpr(self, cluster_id, name, sub, eqn, owner, parent, depth):
        cluster = {"id": cluster_id, "name": name, "label": f"{eqn.primitive.name}: {name}",
                   "owner": owner, "parent": parent, "depth": depth + 1, "size": 0,
                   "collapsed": False}
        self.clusters.append(cluster)
        first = len(self.nodes)
        jaxpr, consts = open_jaxpr(sub)
        self.jaxpr(jaxpr, consts, cluster_id + "/", cluster_id, depth + 1)
        cluster["size"] = len(self.nodes) - first


# --- repeated blocks ------------------------------------------------------------------------

MAX_BLOCK = 64  # the longest block looked for
MIN_SAVED = 3   # a repetition folds when that draws at least this many nodes fewer


def find_repeats(model):
    """Runs of identical blocks of equations in each scope: ``k`` consecutive equations
    repeated ``count`` times, each copy with the same operations, parameters, types and
    literals, wired inside itself the same way, and fed by the copy before it (an unrolled
    loop, not merely similar code side by side). The longest run starting at an equation
    wins (the shortest block among equals); equations owning sub-jaxprs are never folded.

    Each repeat: ``id`` (``repeat-<first node>``), ``cluster`` (its scope), ``count``,
    ``size`` (equations per block), ``block`` (the first copy's node ids, the one drawn),
    ``copies`` (node id of a later copy -> its counterpart in the first), ``collapsed``."""
    owners = {c["owner"] for c in model["clusters"]}
    operands = {}
    for edge in model["edges"]:
        operands.setdefault(edge["target"], []).append((edge["operand"], edge["source"]))
    repeats = []
    for scope, eqns in eqns_by_scope(model).items():
        position = {n["id"]: i for i, n in enumerate(eqns)}
        keys = [None if n["id"] in owners else
                (n["primitive"], tuple(n["params"].items()), tuple(n["avals"]),
                 tuple(n["literals"])) for n in eqns]
        ins = [[position.get(src) for _, src in sorted(operands.get(n["id"], []))]
               for n in eqns]
        start = 0
        while start < len(eqns):
            size, count = _longest_run(keys, ins, start)
            if not count:
                start += 1
                continue
            ids = [n["id"] for n in eqns[start:start + size * count]]
            repeats.append({"id": f"repeat-{ids[0]}", "cluster": scope, "count": count,
                            "size": size, "block": ids[:size], "collapsed": True,
                            "copies": {c: ids[i % size] for i, c in enumerate(ids)
                                       if i >= size}})
            start += size * count
    return repeats


def _longest_run(keys, ins, start):
    """(size, count) of the longest repetition starting at ``start``, or (0, 0)."""
    best = (0, 0)
    for size in range(1, min(MAX_BLOCK, (len(keys) - start) // 2) + 1):
        count = 1
        while start + (count + 1) * size <= len(keys) and \
                _same_block(keys, ins, start, start + count * size, size):
            count += 1
        if (count - 1) * size >= MIN_SAVED and size * count > best[0] * best[1]:
            best = (size, count)
    return best


def _same_block(keys, ins, first, other, size):
    """Whether the block at ``other`` repeats the one at ``first`` and is fed by the block
    just before it."""
    fed = False
    for j in range(size):
        a, b = first + j, other + j
        if keys[a] is None or keys[a] != keys[b] or len(ins[a]) != len(ins[b]):
            return False
        for src_a, src_b in zip(ins[a], ins[b]):
            inside_a = src_a is not None and first <= src_a < first + size
            inside_b = src_b is not None and other <= src_b < other + size
            if inside_a != inside_b or inside_a and src_a - first != src_b - other:
                return False
            fed = fed or src_b is not None and other - size <= src_b < other
    return fed


def folded_copies(model):
    """node id -> the node of the first block drawn for it, over the folded repeats."""
    return {copy: first for r in model.get("repeats", ()) if r["collapsed"]
            for copy, first in r["copies"].items()}


# --- the node budget ------------------------------------------------------------------------

MORE = "more"  # the id of the node standing for the folded middle of a large program


def representatives(model):
    """node id -> the id of the node drawn for it: itself, its counterpart in the first
    block of a folded repeat, the owner of a collapsed cluster it is in, ``MORE`` when
    the budget folded it away, or the id of the collapsed source group it is in."""
    clusters = {c["id"]: c for c in model["clusters"]}
    nodes = {n["id"]: n for n in model["nodes"]}
    copies = folded_copies(model)
    grouped = {}  # node id -> the outermost collapsed group it is in (outer groups first)
    for g in model.get("source_groups", ()):
        if g["collapsed"]:
            for node_id in g["nodes"]:
                grouped.setdefault(node_id, g["id"])
    memo = {}

    def shown(node_id):
        if node_id not in memo:
            node = nodes[node_id]
            collapsed = _outermost_collapsed(node["cluster"], clusters)
            owner = clusters[node["cluster"]]["owner"] if node["cluster"] else None
            if node_id in copies:
                memo[node_id] = shown(copies[node_id])
            elif collapsed is not None:
                memo[node_id] = shown(collapsed["owner"])
            elif node["truncated"]:
                memo[node_id] = MORE
            elif owner is not None and shown(owner) != owner:
                # in a sub-jaxpr whose owner is folded away (by the budget, a source group)
                memo[node_id] = shown(owner)
            elif node_id in grouped:
                memo[node_id] = grouped[node_id]
            else:
                memo[node_id] = node_id
        return memo[node_id]

    return {node_id: shown(node_id) for node_id in nodes}


def _outermost_collapsed(cluster_id, clusters):
    found = None
    while cluster_id is not None:
        cluster = clusters[cluster_id]
        if cluster["collapsed"]:
            found = cluster
        cluster_id = cluster["parent"]
    return found


def hidden_nodes(model, shown):
    """The nodes not drawn (by a collapsed cluster or source group, or the budget), the
    later copies of folded repeats aside (they are drawn, once, as their block)."""
    copies = folded_copies(model)
    return [n for n in model["nodes"]
            if n["id"] != MORE and shown[n["id"]] != n["id"] and n["id"] not in copies]


def _apply_budget(model, budget):
    model["budget"] = budget
    copies = folded_copies(model)
    if budget is not None and len(model["nodes"]) - len(copies) > budget:
        visible = _collapse_clusters(model, budget, copies)
        if visible > budget and model["source_groups"]:
            visible = _collapse_groups(model, budget, visible)
        if visible > budget:
            _fold_top_level(model, visible - budget + 1, copies)  # + 1: the MORE node
    shown = representatives(model)
    hidden = hidden_nodes(model, shown)
    model["hidden"] = len(hidden)
    model["truncated"] = bool(hidden)
    if model["truncated"] and model["nodes"][-1]["id"] == MORE:
        folded = sum(1 for n in hidden if shown[n["id"]] == MORE)
        model["nodes"][-1]["label"] = f"… {folded} more nodes\n(budget {budget})"


def _collapse_clusters(model, budget, copies):
    """Collapse clusters, deepest and then largest first, until the budget is met (or none
    is left); returns the number of nodes still visible (``copies`` are not)."""
    subtree = {c["id"]: [] for c in model["clusters"]}
    parent = {c["id"]: c["parent"] for c in model["clusters"]}
    for node in model["nodes"]:
        cluster_id = node["cluster"]
        while cluster_id is not None:
            subtree[cluster_id].append(node["id"])
            cluster_id = parent[cluster_id]
    order = sorted(enumerate(model["clusters"]),
                   key=lambda ic: (-ic[1]["depth"], -ic[1]["size"], ic[0]))
    hidden, visible = dict.fromkeys(copies, True), len(model["nodes"]) - len(copies)
    for _, cluster in order:
        if visible <= budget:
            break
        cluster["collapsed"] = True
        for node_id in subtree[cluster["id"]]:
            if node_id not in hidden:
                hidden[node_id] = True
                visible -= 1
    return visible


def _collapse_groups(model, budget, visible):
    """Collapse source groups (a view grouped by line or function), largest first, until
    the budget is met: each drawn as one node, the whole program stays in view, which
    folding its middle into one MORE node would not keep. A group is a candidate once the
    groups inside it are settled (folded, or too small to fold): the calls inside a
    function fold before the function does, so ``mlp()`` stays open while its ``layer()``
    calls fold. Returns the number of nodes still visible."""
    groups = model["source_groups"]
    drawn = representatives(model)
    inner = {g["id"]: 0 for g in groups}  # group id -> its inner groups not yet settled
    for g in groups:
        if g["parent"] is not None:
            inner[g["parent"]] += 1
    index = {g["id"]: k for k, g in enumerate(groups)}
    folded = set()
    ready = [(-_size(g, drawn, folded), k) for k, g in enumerate(groups) if not inner[g["id"]]]
    heapq.heapify(ready)
    while ready and visible > budget:
        size, k = heapq.heappop(ready)
        group = groups[k]
        if -size > 1:  # folding a single node saves nothing
            group["collapsed"] = True
            drawn.update(dict.fromkeys(group["nodes"], group["id"]))
            folded.add(group["id"])
            visible -= -size - 1
        parent = group["parent"]
        if parent is not None:
            inner[parent] -= 1
            if not inner[parent]:
                heapq.heappush(ready, (-_size(groups[index[parent]], drawn, folded),
                                       index[parent]))
    return visible


def _size(group, drawn, folded):
    """How many nodes a group's equations are drawn as: each of its own, each of its
    ``folded`` inner groups one (the rest are hidden by other means: a folded repeat, a
    collapsed sub-jaxpr)."""
    return len({drawn[n] for n in group["nodes"] if drawn[n] == n or drawn[n] in folded})


def _fold_top_level(model, excess, copies):
    """Hide ``excess`` top-level equations from the middle of the program, keeping its
    beginning and end, behind one MORE node."""
    roots = [n for n in model["nodes"]
             if n["cluster"] is None and n["kind"] == "eqn" and n["id"] not in copies]
    count = min(excess, len(roots))
    if count <= 0:
        return
    head = (len(roots) - count + 1) // 2
    for node in roots[head:head + count]:
        node["truncated"] = True
    model["nodes"].append(_node(MORE, MORE, "", None, 0))

"""Draw a graph model with Graphviz: DOT text, then SVG.

Each fusion kernel is a coloured cluster; sub-jaxprs are nested dashed clusters hanging off
the equation that owns them; forward and backward equations of a gradient have different
fill colours; edges are labelled with the shape and dtype of the value they carry. Nodes
get ``id`` and ``class`` attributes (kind, phase, provenance id, group), which Graphviz
copies into the SVG, so a view can highlight linked nodes with CSS alone.

Grouped by source (``graph_model(..., group="line")``), each source line or function call
is a cluster instead (Graphviz clusters nest, and kernels and lines overlap), a call's
cluster inside its caller's, and a node's border takes its kernel's colour; a collapsed
group is one 3-D box, in its caller's cluster. Equations the model marks
``dim`` (dead forward code of a gradient, identities) are drawn faded, collectives (a
pmapped function's psum...) as hexagons, and the legend under the graph says why.
"""

import re
import shutil

import graphviz

from .model import representatives
from .unused import DEAD, IDENTITY

FONT = "Helvetica,Arial,sans-serif"
PHASE_FILL = {"forward": "#dbeafe", "backward": "#fed7aa"}
KIND_STYLE = {  # node kind -> DOT attributes
    "input": {"shape": "invhouse", "fillcolor": "#dcfce7"},
    "const": {"shape": "note", "fillcolor": "#f1f5f9"},
    "output": {"shape": "house", "fillcolor": "#fef3c7"},
    "eqn": {"shape": "box", "fillcolor": "#ffffff"},
    "more": {"shape": "box", "style": "dashed", "fillcolor": "#ffffff", "color": "#9ca3af"},
}
# (border, fill) per fusion kernel, cycled; the border colour labels the kernel too, at
# least 4.5:1 on the fill (Tailwind's 700 shades on their 50s).
KERNEL_COLOURS = [("#1d4ed8", "#eff6ff"), ("#15803d", "#f0fdf4"), ("#b91c1c", "#fef2f2"),
                  ("#7e22ce", "#faf5ff"), ("#c2410c", "#fff7ed"), ("#0e7490", "#ecfeff"),
                  ("#a16207", "#fefce8"), ("#be185d", "#fdf2f8")]
_TOOLTIP_CHARS = 400
# Faded equations (model node "dim"): dead ones dashed, identities dotted.
DIM_STYLE = {"fillcolor": "#f9fafb", "fontcolor": "#9ca3af", "color": "#d1d5db"}
DIM_BORDER = {DEAD: "rounded,filled,dashed", IDENTITY: "rounded,filled,dotted"}
DIM_LEGEND = {DEAD: "faded, dashed: unused (DCE drops it)",
              IDENTITY: "faded, dotted: identity (x·1, x−0)"}


def hidden_identities_note(count):
    """What a graph drawn with ``hide_identities`` left out, for its legend and notes."""
    noun = "identity" if count == 1 else "identities"
    return f"{count} {noun} hidden (x·1, x−0...: each drawn as its operand)"


# A collective (psum, all_gather...: values cross devices, or processes over MPI) stands out.
COLLECTIVE_STYLE = {"shape": "hexagon", "color": "#7e22ce", "penwidth": "2"}
COLLECTIVE_LEGEND = "hexagon: a collective (values cross devices or processes)"

SOURCE_CLUSTER = {"style": "rounded", "color": "#0d9488", "fontcolor": "#0f766e",
                  "fontsize": "9", "labelloc": "t", "labeljust": "l"}
SOURCE_SUMMARY = {"shape": "box3d", "style": "filled", "fillcolor": "#ccfbf1",
                  "color": "#0f766e"}

INSTALL_HINT = ("Install Graphviz: `apt-get install graphviz` (Debian/Ubuntu), "
                "`conda install graphviz`, or `brew install graphviz` (macOS).")


class GraphvizNotFoundError(RuntimeError):
    """Graphviz (the ``dot`` program or the ``graphviz`` Python package) is missing."""


def quote(text):
    """A DOT string literal; newlines become DOT line breaks, user text stays literal."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ")
    return '"' + text.replace("\n", "\\n") + '"'


def _attrs(attrs):
    return "[" + ", ".join(f"{k}={quote(v)}" for k, v in attrs.items()) + "]"


def _css(text):
    return re.sub(r"[^\w-]", "_", str(text))


def to_dot(model, *, id_prefix=""):
    """Graphviz DOT text for a graph model (see ``graph_model``); ``id_prefix`` goes in
    front of every node's SVG id, for pages showing several graphs."""
    return _DotWriter(model, id_prefix).write()


class _DotWriter:
    def __init__(self, model, id_prefix):
        self.model, self.prefix = model, id_prefix
        self.shown = representatives(model)
        self.lines = []
        self.by_scope, self.owned = {}, {}
        for node in model["nodes"]:
            self.by_scope.setdefault(node["cluster"], []).append(node)
        for cluster in model["clusters"]:
            self.owned.setdefault(cluster["owner"], []).append(cluster)
        self.clusters = {c["id"]: c for c in model["clusters"]}
        groups = model.get("groups") or []
        self.groups = {g["id"]: (i, g) for i, g in enumerate(groups)}
        folded = [r for r in model.get("repeats", ()) if r["collapsed"]]
        self.repeat_of = {node_id: r for r in folded for node_id in r["block"]}
        self.step_of = {}  # node of a folded repeat -> (repeat id, which copy)
        for r in folded:
            ids = r["block"] + list(r["copies"])
            self.step_of.update((n, (r["id"], i // r["size"])) for i, n in enumerate(ids))
        self.sources = model.get("source_groups") or []
        self.inner = {}  # (scope, source group id or None) -> the groups directly inside
        for g in self.sources:
            self.inner.setdefault((g["cluster"], g["parent"]), []).append(g)
        self.parent = {g["id"]: g["parent"] for g in self.sources}
        self.nodes = {n["id"]: n for n in model["nodes"]}
        self.container = self.source_containers(folded)

    def source_containers(self, folded):
        """node id -> the innermost expanded source group it is drawn in; the nodes of a
        folded repeat whose block spans several groups are drawn in the innermost group
        holding them all (a box nests in one)."""
        container = {n: g["id"] for g in self.sources if not g["collapsed"]
                     for n in g["nodes"]}  # (outer groups first: the innermost wins)
        for r in folded:
            chains = [self.enclosing(container.get(n)) for n in r["block"]]
            common = [ids[0] for ids in zip(*chains) if len(set(ids)) == 1]
            for n in r["block"]:
                if common:
                    container[n] = common[-1]
                else:
                    container.pop(n, None)
        return container

    def enclosing(self, group_id):
        """The source groups around ``group_id``'s equations, outermost first, itself last
        ([] for None)."""
        chain = []
        while group_id is not None:
            chain.append(group_id)
            group_id = self.parent[group_id]
        return chain[::-1]

    def visible(self, node):
        return self.shown[node["id"]] == node["id"]

    def drawn(self, cluster):
        """A cluster is drawn when expanded, inside drawn clusters, its owner visible."""
        while cluster is not None:
            if cluster["collapsed"] or self.shown[cluster["owner"]] != cluster["owner"]:
                return False
            cluster = self.clusters.get(cluster["parent"])
        return True

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)

    def write(self):
        graph = {"rankdir": "TB", "compound": "true", "fontname": FONT, "fontsize": "10",
                 "nodesep": "0.25", "ranksep": "0.35", "bgcolor": "white"}
        legend = self.legend()
        if legend:
            graph.update(label="    ".join(legend), labelloc="b")
        self.emit(0, "digraph jaxpr {")
        self.emit(1, "graph " + _attrs(graph) + ";")
        self.emit(1, "node " + _attrs({
            "shape": "box", "style": "rounded,filled", "fontname": FONT, "fontsize": "10",
            "color": "#4b5563", "fillcolor": "white", "height": "0.3",
            "margin": "0.08,0.04"}) + ";")
        self.emit(1, "edge " + _attrs({
            "fontname": FONT, "fontsize": "8", "color": "#6b7280", "fontcolor": "#4b5563",
            "arrowsize": "0.6"}) + ";")
        self.scope(None, 1)
        self.ends()
        self.edges()
        self.emit(0, "}")
        return "\n".join(self.lines) + "\n"

    def legend(self):
        """What the colours mean, for the parts this graph has."""
        drawn = [n for n in self.model["nodes"] if self.visible(n)]
        legend = []
        if any(n["provenance"] and n["provenance"]["phase"] == "backward" for n in drawn):
            legend.append("blue: forward pass    orange: backward pass")
        dims = {n["dim"] for n in drawn}
        legend += [text for reason, text in DIM_LEGEND.items() if reason in dims]
        if any(n["collective"] for n in drawn):
            legend.append(COLLECTIVE_LEGEND)
        if self.model.get("identities_hidden"):
            legend.append(hidden_identities_note(self.model["identities_hidden"]))
        if self.sources and self.groups:
            legend.append("teal boxes: source groups; node borders: kernels")
        return legend

    # -- nodes and clusters -----------------------------------------------------------------

    def scope(self, cluster_id, depth):
        """The visible nodes of one scope, in their source groups when grouped by source,
        else in their fusion kernels."""
        nodes = [n for n in self.by_scope.get(cluster_id, []) if self.visible(n)]
        if self.sources:
            self.source_scope(cluster_id, nodes, depth)
        else:
            self.kernel_scope(cluster_id, nodes, depth)

    def placed(self, nodes, depth):
        """Nodes, those of a folded repeat in its box."""
        repeated = {}
        for node in nodes:
            if node["id"] in self.repeat_of:
                repeated.setdefault(self.repeat_of[node["id"]]["id"], []).append(node)
            else:
                self.node(node, depth)
        for members in repeated.values():
            self.repeat(self.repeat_of[members[0]["id"]], members, depth)

    def source_scope(self, cluster_id, nodes, depth):
        """A scope drawn by source group: a cluster per expanded group, nested as the
        groups are, a node per collapsed one."""
        members = {}
        for node in nodes:
            members.setdefault(self.container.get(node["id"]), []).append(node)
        self.placed(members.pop(None, []), depth)
        for group in self.inner.get((cluster_id, None), []):
            self.source_group(group, members, depth)

    def source_group(self, group, members, depth):
        if group["collapsed"]:
            if self.shown[group["nodes"][0]] == group["id"]:
                self.summary(group, depth)
            return
        if not self.has_drawn(group, members):
            return
        self.emit(depth, f"subgraph {quote('cluster_' + group['id'])} {{")
        self.emit(depth + 1, "graph " + _attrs(dict(
            SOURCE_CLUSTER, label=group["label"], tooltip=group_tooltip(group),
            id=f"{self.prefix}cluster-{group['id']}")) + ";")
        self.placed(members.get(group["id"], []), depth + 1)
        for inner in self.inner.get((group["cluster"], group["id"]), []):
            self.source_group(inner, members, depth + 1)
        self.emit(depth, "}")

    def has_drawn(self, group, members):
        """Whether anything is drawn in an expanded source group (the nodes of a group
        whose equations are all later copies of a folded repeat are drawn elsewhere)."""
        return group["id"] in members or any(
            self.shown[inner["nodes"][0]] == inner["id"] if inner["collapsed"]
            else self.has_drawn(inner, members)
            for inner in self.inner.get((group["cluster"], group["id"]), []))

    def summary(self, group, depth):
        """A collapsed source group: one node; the edges of its equations end on it."""
        count = len(group["nodes"])
        texts = [self.nodes[n]["text"] or self.nodes[n]["label"] for n in group["nodes"]]
        tooltip = "\n".join([group_tooltip(group)] + texts)
        self.emit(depth, f"{quote(group['id'])} " + _attrs(dict(
            SOURCE_SUMMARY, id=self.prefix + group["id"],
            label=f"▸ {group['label']}\n{count} equation{'s' if count > 1 else ''}",
            tooltip=_clip(tooltip), **{"class": "nbjax-node nbjax-source-group"})) + ";")

    def kernel_scope(self, cluster_id, nodes, depth):
        """A scope drawn with folded repeats in their boxes and fusion kernels as
        clusters."""
        grouped, rest = {}, []
        for node in nodes:
            if node["id"] in self.repeat_of or node["group"] not in self.groups:
                rest.append(node)
            else:
                grouped.setdefault(node["group"], []).append(node)
        self.placed(rest, depth)
        for gid, nodes in grouped.items():
            index, group = self.groups[gid]
            name = f"cluster_group_{gid}" + (f"_{cluster_id}" if cluster_id else "")
            self.emit(depth, f"subgraph {quote(name)} {{")
            self.emit(depth + 1, "graph " + _attrs(self.group_style(index, group)) + ";")
            for node in nodes:
                self.node(node, depth + 1)
            self.emit(depth, "}")

    def repeat(self, repeat, nodes, depth):
        """A folded repeat: its first block, once, in a box saying how many times it runs."""
        self.emit(depth, f"subgraph {quote('cluster_' + repeat['id'])} {{")
        self.emit(depth + 1, "graph " + _attrs({
            "label": f"× {repeat['count']}  (the same {repeat['size']} "
                     f"equation{'s' if repeat['size'] > 1 else ''}, {repeat['count']} times)",
            "labelloc": "t", "style": "rounded,filled,bold", "color": "#7c3aed",
            "fillcolor": "#f5f3ff", "fontcolor": "#5b21b6", "fontsize": "10",
            "id": self.prefix + repeat["id"]}) + ";")
        for node in nodes:
            self.node(node, depth + 1)
        self.emit(depth, "}")

    def group_style(self, index, group):
        style = {"label": group["label"], "labelloc": "t", "fontsize": "9",
                 "id": f"{self.prefix}group-{_css(group['id'])}"}
        if group["kind"] == "kernel":
            border, fill = KERNEL_COLOURS[index % len(KERNEL_COLOURS)]
            style.update(style="rounded,filled", color=border, fillcolor=fill,
                         fontcolor=border, penwidth="1.5")
        else:
            style.update(style="rounded,dashed", color="#9ca3af", fontcolor="#6b7280")
        return style

    def node(self, node, depth):
        self.emit(depth, f"{quote(node['id'])} {_attrs(self.node_attrs(node))};")
        for cluster in self.owned.get(node["id"], []):
            if self.drawn(cluster):
                self.sub_cluster(cluster, depth)

    def sub_cluster(self, cluster, depth):
        self.emit(depth, f"subgraph {quote('cluster_' + cluster['id'])} {{")
        self.emit(depth + 1, "graph " + _attrs({
            "label": cluster["label"], "labelloc": "t", "style": "rounded,dashed",
            "color": "#9ca3af", "fontcolor": "#4b5563", "fontsize": "9",
            "id": self.prefix + "cluster-" + cluster["id"]}) + ";")
        self.scope(cluster["id"], depth + 1)
        self.emit(depth, "}")

    def node_attrs(self, node):
        attrs = {"id": self.prefix + node["id"], "label": self.label(node),
                 "class": " ".join(self.classes(node)), "tooltip": self.tooltip(node)}
        attrs.update(KIND_STYLE[node["kind"]])
        if node["provenance"]:
            attrs["fillcolor"] = PHASE_FILL.get(node["provenance"]["phase"],
                                                attrs["fillcolor"])
        if "style" not in attrs and node["kind"] != "eqn":
            attrs["style"] = "filled"
        if self.sources and node["group"] in self.groups:  # kernels drawn as borders
            index, group = self.groups[node["group"]]
            if group["kind"] == "kernel":
                attrs.update(color=KERNEL_COLOURS[index % len(KERNEL_COLOURS)][0],
                             penwidth="2")
        if node["collective"]:
            attrs.update(COLLECTIVE_STYLE)
        if node["dim"]:
            attrs.update(DIM_STYLE, style=DIM_BORDER[node["dim"]])
        return attrs

    def label(self, node):
        """The model's label, plus a line per collapsed sub-jaxpr of this (visible) node."""
        lines = [node["label"]]
        for cluster in self.owned.get(node["id"], []):
            if not self.drawn(cluster):
                lines.append(f"▸ {cluster['name']} ({cluster['size']} nodes hidden)")
        return "\n".join(lines)

    @staticmethod
    def classes(node):
        classes = ["nbjax-node", f"nbjax-{node['kind']}"]
        if node["provenance"]:
            classes += [f"nbjax-{_css(node['provenance']['phase'])}",
                        f"nbjax-prov-{_css(node['provenance']['id'])}"]
        if node["group"] is not None:
            classes.append(f"nbjax-group-{_css(node['group'])}")
        if node["dim"]:
            classes.append("nbjax-dim")
        if node["collective"]:
            classes.append("nbjax-collective")
        return classes

    @staticmethod
    def tooltip(node):
        lines = [node["text"] or node["label"].replace("\n", " ")]
        source = node["source"]
        if source:
            lines.append(f"{source['file']}:{source['line']} ({source['function']})")
            if source["text"]:
                lines.append(source["text"])
        if node["fusion_reason"]:
            lines.append(node["fusion_reason"])
        if node["dim"]:
            lines.append(node["dim"])
        return _clip("\n".join(lines))

    def ends(self):
        """Inputs on the top row and outputs on the bottom one, so the graph reads top-down
        from where the data come in (Graphviz would otherwise put an output as high as the
        value it copies, and an input beside its first use)."""
        for rank, kind in (("min", "input"), ("max", "output")):
            ids = [quote(n["id"]) for n in self.by_scope.get(None, [])
                   if n["kind"] == kind and self.visible(n)]
            if ids:
                self.emit(1, f"{{ rank={rank}; {'; '.join(ids)}; }}")

    # -- edges ------------------------------------------------------------------------------

    def edges(self):
        drawn = set()
        for edge in self.model["edges"]:
            source, target = self.shown[edge["source"]], self.shown[edge["target"]]
            carried = self.carried(edge)
            if source == target and not carried:
                continue
            if (source, target) != (edge["source"], edge["target"]):
                if (source, target) in drawn:  # drawn by another edge of the same values
                    continue
            drawn.add((source, target))
            # hovering the line or its label shows the value's name and type (an SVG link
            # title; without one a browser shows Graphviz's "e0->e1")
            tooltip = f"{edge['var']}: {edge['aval']}" if edge["var"] else edge["aval"]
            attrs = {"label": edge["aval"], "class": "nbjax-edge", "tooltip": tooltip,
                     "labeltooltip": tooltip}
            if carried:
                attrs.update(style="dashed", color="#7c3aed", constraint="false",
                             label=f"next step: {edge['aval']}")
            elif target in self.nodes and self.nodes[target]["dim"]:
                attrs.update(color=DIM_STYLE["color"], fontcolor=DIM_STYLE["fontcolor"])
            self.emit(1, f"{quote(source)} -> {quote(target)} {_attrs(attrs)};")
        for cluster in self.model["clusters"]:
            self.owner_edge(cluster)

    def carried(self, edge):
        """Whether an edge is one copy of a folded repeat feeding the next: drawn inside the
        block, back to its start (not a constraint on the layout)."""
        source, target = self.step_of.get(edge["source"]), self.step_of.get(edge["target"])
        return (source is not None and target is not None and source[0] == target[0]
                and target[1] == source[1] + 1)

    def owner_edge(self, cluster):
        """A dashed arrow from an equation to a drawn sub-jaxpr cluster it owns."""
        if not self.drawn(cluster):
            return
        inside = [n for n in self.by_scope.get(cluster["id"], []) if self.visible(n)]
        if not inside:
            return
        self.emit(1, f"{quote(cluster['owner'])} -> {quote(inside[0]['id'])} " + _attrs({
            "lhead": "cluster_" + cluster["id"], "style": "dashed", "color": "#9ca3af",
            "arrowhead": "odot", "class": "nbjax-subjaxpr-edge"}) + ";")


def group_tooltip(group):
    """A source group's label, and for a function's call the line that called it."""
    caller = group.get("caller")
    if caller is None:
        return group["label"]
    text = f": {caller['text']}" if caller["text"] else ""
    return f"{group['label']}, called by {caller['function']}() at line {caller['line']}{text}"


def _clip(text):
    return text if len(text) <= _TOOLTIP_CHARS else text[:_TOOLTIP_CHARS - 1] + "…"


# --- SVG ------------------------------------------------------------------------------------

def dot_available():
    """Whether Graphviz's ``dot`` program is installed (the ``graphviz`` package, which runs
    it, is a dependency)."""
    return shutil.which("dot") is not None


def to_svg(dot):
    """Render DOT text to an SVG element (no XML prolog or DOCTYPE, ready to put in HTML).

    Raises GraphvizNotFoundError, saying how to install it, when Graphviz is missing.
    """
    try:
        svg = graphviz.Source(dot).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise GraphvizNotFoundError(
            "Graphviz's `dot` program was not found on PATH, so the graph cannot be drawn. "
            + INSTALL_HINT) from None
    return svg[svg.index("<svg"):]


_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')
MIN_FIT = 0.5  # a static graph shrinks to fit its box down to half its size, then scrolls


def fit_width(svg, scale=1):
    """An SVG from ``to_svg`` sized to the width of its box instead of its natural size:
    no wider than natural, no narrower than ``MIN_FIT`` of it (then its box scrolls, from
    the top left, where the inputs are); the height follows. ``scale`` enlarges both bounds
    (presenting). For static HTML; the live views size their graphs in the browser."""
    m = _SIZE.match(svg)
    if m is None:
        return svg
    width = float(m.group(1)) * scale
    style = f"width:100%;height:auto;max-width:{width:.0f}pt;min-width:{width * MIN_FIT:.0f}pt"
    return f'<svg style="{style}"' + svg[m.end():]

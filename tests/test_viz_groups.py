"""Graphs grouped by Python function: one group per call, nested along the call path, each
folding on its own (nbjax.viz.grouping, the model's budget, the DOT clusters)."""

import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax, viz
from nbjax.notebook.panes import group_toggles

needs_dot = pytest.mark.skipif(
    not viz.dot_available(),
    reason="Graphviz's `dot` is not installed (apt-get install graphviz)")


def relu(x):
    return jnp.maximum(x, 0.0)


def layer(w, b, x):
    return relu(x @ w + b)


def mlp(params, x):
    for w, b in params:
        x = layer(w, b, x)
    return jnp.sum(x)


# two layers of different shapes (identical ones would fold as a repeated block)
PARAMS = [(np.full((3, 4), 0.5, np.float32), np.ones(4, np.float32)),
          (np.full((4, 2), -0.5, np.float32), np.ones(2, np.float32))]
X = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)


def _tree(model, scope=None):
    """The source groups of a scope as (depth, label, primitives of their equations)."""
    prims = {n["id"]: n["primitive"] for n in model["nodes"]}
    return [(g["depth"], g["label"], [prims[n] for n in g["nodes"]])
            for g in model["source_groups"] if g["cluster"] == scope]


LAYER = ["dot_general", "broadcast_in_dim", "add", "max"]  # x @ w + b, then relu's max


def test_calls_nest_as_the_functions_call_each_other():
    model = viz.graph_model(nbjax.make_jaxpr(mlp)(PARAMS, X), group="function", budget=None)
    assert _tree(model) == [
        (0, "mlp()", LAYER * 2 + ["reduce_sum"]),
        (1, "layer()", LAYER), (2, "relu()", ["max"]),
        (1, "layer() #2", LAYER), (2, "relu() #2", ["max"])]
    groups = {g["label"]: g for g in model["source_groups"]}
    # each group is a run of its parent's run, and knows the line that called it
    for g in model["source_groups"][1:]:
        outer = next(p for p in model["source_groups"] if p["id"] == g["parent"])
        start = outer["nodes"].index(g["nodes"][0])
        assert outer["nodes"][start:start + len(g["nodes"])] == g["nodes"]
    assert groups["layer() #2"]["caller"]["text"] == "x = layer(w, b, x)"
    assert groups["relu() #2"]["caller"]["text"] == "return relu(x @ w + b)"
    assert groups["mlp()"]["caller"] is None  # the traced function: called by this test
    assert len({g["id"] for g in model["source_groups"]}) == 5


def test_no_frame_outside_the_traced_function_is_in_a_call_path():
    """The test (and pytest above it) called make_jaxpr: no group, no frame of theirs."""
    model = viz.graph_model(nbjax.make_jaxpr(mlp)(PARAMS, X), group="function")
    frames = {(f["file"], f["function"]) for n in model["nodes"] if n["kind"] == "eqn"
              for f in n["source"]["calls"]}
    assert frames == {(__file__, "mlp"), (__file__, "layer"), (__file__, "relu")}
    # nbjax's own function traced directly: its equation is in no function group
    direct = viz.graph_model(nbjax.make_jaxpr(jnp.tanh)(X), group="function")
    assert direct["source_groups"] == [] and _eqn_nodes(direct)[0]["source"]["calls"] is None


def _eqn_nodes(model):
    return [n for n in model["nodes"] if n["kind"] == "eqn"]


def test_a_jitted_function_s_groups_are_in_its_call_s_cluster():
    jitted = nbjax.jit(layer)

    def net(x):
        return jitted(*PARAMS[0], jnp.tanh(x))
    model = viz.graph_model(nbjax.make_jaxpr(net)(X), group="function", budget=None)
    assert _tree(model) == [(0, "net()", ["tanh", "jit"])]
    (cluster,) = model["clusters"]
    assert _tree(model, cluster["id"]) == [(0, "layer()", LAYER), (1, "relu()", ["max"])]


def test_a_gradient_s_backward_calls_are_groups_of_their_own():
    closed = nbjax.make_jaxpr(nbjax.grad(mlp))(PARAMS, X)
    model = viz.graph_model(closed, group="function", budget=None)
    tree = [(d, label) for d, label, _ in _tree(model)]
    assert tree == [(0, "mlp()"), (1, "layer()"), (2, "relu()"), (1, "layer() #2"),
                    (2, "relu() #2"),
                    (0, "mlp() · backward"), (1, "layer() #2 · backward"),
                    (2, "relu() #2 · backward"), (1, "layer() · backward"),
                    (2, "relu() · backward")]
    phases = {n["id"]: n["provenance"]["phase"] for n in _eqn_nodes(model)}
    for g in model["source_groups"]:
        assert {phases[n] for n in g["nodes"]} == \
            {"backward" if "backward" in g["label"] else "forward"}
    # the backward pass of the second layer's matrix product is in its backward group
    nodes = {n["id"]: n for n in _eqn_nodes(model)}
    back2 = next(g for g in model["source_groups"] if g["label"] == "layer() #2 · backward")
    assert "dot_general" in [nodes[n]["primitive"] for n in back2["nodes"]]
    assert "transpose" in [nodes[n]["primitive"] for n in back2["nodes"]]


def _drawn_edges(dot):
    return set(re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', dot, re.M))


def _acyclic(edges):
    """Whether a directed graph has no cycle (Kahn's algorithm empties it)."""
    nodes = {a for e in edges for a in e}
    indegree = {n: 0 for n in nodes}
    for _, b in edges:
        indegree[b] += 1
    ready = [n for n, d in indegree.items() if not d]
    while ready:
        n = ready.pop()
        nodes.discard(n)
        for a, b in edges:
            if a == n:
                indegree[b] -= 1
                if not indegree[b]:
                    ready.append(b)
    return not nodes


@needs_dot
def test_folding_an_outer_group_folds_its_calls_and_the_graph_stays_acyclic():
    closed = nbjax.make_jaxpr(nbjax.grad(mlp))(PARAMS, X)
    model = viz.graph_model(closed, group="function", budget=None)
    groups = {g["label"]: g for g in model["source_groups"]}
    inner, outer = groups["relu() #2"], groups["layer() #2"]
    inner["collapsed"] = outer["collapsed"] = True
    shown = viz.representatives(model)
    assert {shown[n] for n in outer["nodes"]} == {outer["id"]}  # the outermost one wins
    dot = viz.to_dot(model)
    drawn = set(re.findall(r'^\s*"([^"]+)" \[', dot, re.M))
    assert outer["id"] in drawn and inner["id"] not in drawn
    assert not drawn & set(outer["nodes"])
    edges = _drawn_edges(dot)
    expected = {(shown[e["source"]], shown[e["target"]]) for e in model["edges"]}
    assert edges == {e for e in expected if e[0] != e[1]} and _acyclic(edges)
    # the edges into and out of the call end on its node: the first layer's relu feeds it,
    # the sum reads it
    assert any(a in groups["layer()"]["nodes"] and b == outer["id"] for a, b in edges)
    assert any(a == outer["id"] and model_prim(model, b) == "reduce_sum" for a, b in edges)
    # the folded call is drawn inside its caller's cluster, which stays open
    body = _cluster_body(dot, groups["mlp()"]["id"])
    assert f'"{outer["id"]}" [' in body and f"cluster_{groups['layer()']['id']}" in body
    assert "▸ layer() #2" in body
    # folding the outermost folds everything inside it into one node
    groups["mlp()"]["collapsed"] = True
    shown = viz.representatives(model)
    assert {shown[n] for n in groups["mlp()"]["nodes"]} == {groups["mlp()"]["id"]}
    edges = _drawn_edges(viz.to_dot(model))
    backward = set(groups["mlp() · backward"]["nodes"])
    assert _acyclic(edges) and any(a == groups["mlp()"]["id"] and b in backward
                                   for a, b in edges)  # the residuals
    assert viz.to_svg(viz.to_dot(model)).startswith("<svg")


def model_prim(model, node_id):
    return next((n["primitive"] for n in model["nodes"] if n["id"] == node_id), None)


def _cluster_body(dot, group_id):
    """The DOT text of a source group's cluster, up to its closing brace."""
    start = dot.index(f'subgraph "cluster_{group_id}" {{')
    indent = dot.rindex("\n", 0, start) + 1
    depth = start - indent
    end = dot.index("\n" + " " * depth + "}", start)
    return dot[start:end]


@needs_dot
def test_clusters_nest_as_the_calls_do():
    model = viz.graph_model(nbjax.make_jaxpr(mlp)(PARAMS, X), group="function", budget=None)
    groups = {g["label"]: g for g in model["source_groups"]}
    dot = viz.to_dot(model)
    outer = _cluster_body(dot, groups["mlp()"]["id"])
    second = _cluster_body(dot, groups["layer() #2"]["id"])
    innermost = _cluster_body(dot, groups["relu() #2"]["id"])
    assert second in outer and innermost in second
    assert innermost not in _cluster_body(dot, groups["layer()"]["id"])
    # each equation is drawn in the innermost group holding it, once
    for g in model["source_groups"]:
        body = _cluster_body(dot, g["id"])
        inside = set(re.findall(r'^\s*"(e\d+)" \[', body, re.M))
        assert inside == set(g["nodes"]), g["label"]
    assert 'tooltip="layer() #2, called by mlp() at line' in dot
    assert viz.to_svg(dot).startswith("<svg")


def step(c, w):
    c = relu(c * w) + 1.0
    return c, jnp.sum(c)


def scanned(c, ws):
    c, ys = lax.scan(step, jnp.sin(c), ws)
    return jnp.sum(ys) + jnp.sum(c)


def test_a_scan_body_s_calls_nest_inside_the_scan_s_cluster():
    model = viz.graph_model(nbjax.make_jaxpr(scanned)(X[0], X[1]), group="function",
                            budget=None)
    (cluster,) = model["clusters"]
    assert _tree(model) == [(0, "scanned()", ["sin", "scan", "reduce_sum", "reduce_sum",
                                               "add"])]
    assert _tree(model, cluster["id"]) == [(0, "step()", ["mul", "max", "add", "reduce_sum"]),
                                           (1, "relu()", ["max"])]
    assert all(g["parent"] is None or g["parent"].startswith(f"src-{cluster['id']}/")
               for g in model["source_groups"] if g["cluster"] == cluster["id"])


def deep(x):
    for k in range(3):
        x = block(x, float(k))  # (a different constant each time: not a repeated block)
    return x


def block(x, k):
    x = jnp.sin(x) * k + 1.0
    return relu(jnp.cos(x) - 0.5) * 3.0


def test_under_the_budget_calls_fold_before_the_functions_calling_them():
    """Folding the largest group first would fold ``deep()``, the whole program: its calls
    fold first (the largest first), as many as the budget needs."""
    model = viz.graph_model(nbjax.make_jaxpr(deep)(X), group="function", budget=12)
    assert [(g["label"], len(g["nodes"]), g["collapsed"]) for g in model["source_groups"]] == [
        ("deep()", 21, False), ("block()", 7, True), ("relu()", 1, False),
        ("block() #2", 7, True), ("relu() #2", 1, False), ("block() #3", 7, False),
        ("relu() #3", 1, False)]
    shown = viz.representatives(model)
    assert len(set(shown.values())) == 2 + 1 + 1 + 7  # inputs, outputs, 2 blocks, the last
    assert viz.model.MORE not in shown.values() and model["hidden"] == 14


def test_the_browser_offers_to_fold_a_call_s_callers_from_its_folded_node():
    model = viz.graph_model(nbjax.make_jaxpr(mlp)(PARAMS, X), group="function", budget=None)
    groups = {g["label"]: g for g in model["source_groups"]}
    toggles = {t["name"]: t for t in group_toggles(model["source_groups"])}
    relu2 = groups["relu() #2"]["id"]
    # clicking the folded relu #2 node offers its layer and mlp too, not the first layer
    offered = [name for name, t in toggles.items() if relu2 in t["members"] or t["owner"] == relu2]
    assert offered == ["mlp()", "layer() #2", "relu() #2"]
    assert toggles["mlp()"]["size"] == 9 and toggles["layer() #2"]["size"] == 4

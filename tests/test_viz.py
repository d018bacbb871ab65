"""nbjax.viz: the graph model of jaxprs, its DOT/SVG drawing, the coloured jaxpr text and
the rich display of jaxprs in notebooks."""

import html
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax, viz
from nbjax.backends import get_target
from nbjax.compiler import fusion, optimize
from nbjax.core.jaxpr import ClosedJaxpr

C3 = np.arange(3.0, dtype=np.float32)
C10 = np.arange(10.0, dtype=np.float32)
V3 = np.ones(3, np.float32)

needs_dot = pytest.mark.skipif(
    not viz.dot_available(),
    reason="Graphviz's `dot` is not installed (apt-get install graphviz)")


def chain(x):
    return jnp.sin(x) * C3 + 2.0


def _line_of(fun, needle):
    lines, start = inspect.getsourcelines(fun)
    return start + next(i for i, line in enumerate(lines) if needle in line)


def _custom_jvp():
    @nbjax.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvps(lambda t, ans, x: jnp.cos(x) * t)
    return f


def _custom_vjp():
    @nbjax.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda r, g: (r * g,))
    return f


def _scan_with_cond(xs):
    def body(c, y):
        return c * jnp.sin(y), lax.cond(c > 0, jnp.sin, jnp.cos, y)
    return lax.scan(body, 1.0, xs)[0]


def _long_chain(x, n=200):
    for i in range(n):
        x = x * float(i + 1)  # no two steps alike: nothing folds as a repeated block
    return x


def _big_scan(xs):
    def body(c, y):
        for i in range(30):
            c = jnp.cos(c) * float(i + 1) + y
        return c, c
    return lax.scan(body, 0.0, xs)


def _residual_steps(x, w, n=6):
    for _ in range(n):
        x = jnp.tanh(x @ w) + x
    return jnp.sum(x)


# A dozen programs that every view must handle.
ZOO = {
    "chain": lambda: nbjax.make_jaxpr(chain)(V3),
    "big_const": lambda: nbjax.make_jaxpr(lambda x: x * C10)(np.ones(10, np.float32)),
    "cond": lambda: nbjax.make_jaxpr(lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x))(True, 1.),
    "scan_cond": lambda: nbjax.make_jaxpr(_scan_with_cond)(V3),
    "while": lambda: nbjax.make_jaxpr(
        lambda x: lax.while_loop(lambda c: c < 3, lambda c: c + 1, x))(1),
    "jit": lambda: nbjax.make_jaxpr(lambda x: nbjax.jit(lambda y: y * 2)(x))(1.0),
    "checkpoint": lambda: nbjax.make_jaxpr(
        nbjax.checkpoint(lambda x: jnp.sin(jnp.sin(x))))(1.0),
    "custom_jvp": lambda: nbjax.make_jaxpr(_custom_jvp())(1.0),
    "custom_vjp": lambda: nbjax.make_jaxpr(_custom_vjp())(1.0),
    "grad": lambda: nbjax.make_jaxpr(nbjax.grad(lambda x: jnp.sin(x) * x))(1.0),
    "grad_scan": lambda: nbjax.make_jaxpr(nbjax.grad(_scan_with_cond))(V3),
    "softmax_dot": lambda: nbjax.make_jaxpr(
        lambda x, y: jnp.dot(nbjax.nn.softmax(x), y))(np.ones((4, 5), np.float32),
                                                      np.ones((5, 3), np.float32)),
    "literal_and_passthrough_outputs": lambda: nbjax.make_jaxpr(
        lambda x, y: (1.0, y, x + 1))(1.0, 2),
    "long_chain": lambda: nbjax.make_jaxpr(_long_chain)(1.0),
}


@pytest.fixture(scope="module")
def zoo():
    return {name: make() for name, make in ZOO.items()}


def _nodes(model):
    return {n["id"]: n for n in model["nodes"]}


def _eqns(model):
    return [n for n in model["nodes"] if n["kind"] == "eqn"]


def _edges(model):
    return [(e["source"], e["target"], e["aval"]) for e in model["edges"]]


def _plain(markup):
    """The text a browser shows for HTML without tags."""
    return html.unescape(re.sub(r"<[^>]*>", "", markup))


def _visible(model):
    shown = viz.representatives(model)
    return [n for n in model["nodes"] if shown[n["id"]] == n["id"]]


# --- the graph model ------------------------------------------------------------------------

def test_model_of_an_elementwise_chain_with_a_closure_constant():
    closed = nbjax.make_jaxpr(chain)(V3)
    model = viz.graph_model(closed)
    assert [n["id"] for n in model["nodes"]] == ["c0", "in0", "e0", "e1", "e2", "out0"]
    assert [n["kind"] for n in model["nodes"]] == [
        "const", "input", "eqn", "eqn", "eqn", "output"]
    nodes = _nodes(model)
    assert nodes["c0"]["label"] == "const a: f32[3]\n= [0., 1., 2.]"
    assert nodes["c0"]["value"] == "[0., 1., 2.]"
    assert nodes["in0"]["label"] == "b: f32[3]"
    assert [nodes[f"e{i}"]["primitive"] for i in range(3)] == ["sin", "mul", "add"]
    assert nodes["e1"]["text"] == "d:f32[3] = mul c a"
    assert nodes["e1"]["vars"] == ["d"] and nodes["e1"]["avals"] == ["f32[3]"]
    assert nodes["e2"]["literals"] == ["2.0:f32[]"]
    assert nodes["e2"]["label"] == "e = add\n2.0:f32[]"  # named as in the jaxpr
    assert _edges(model) == [("in0", "e0", "f32[3]"), ("e0", "e1", "f32[3]"),
                             ("c0", "e1", "f32[3]"), ("e1", "e2", "f32[3]"),
                             ("e2", "out0", "f32[3]")]
    assert [e["operand"] for e in model["edges"]] == [0, 0, 1, 0, 0]
    source = nodes["e0"]["source"]
    line = {"file": __file__, "line": _line_of(chain, "return"), "function": "chain",
            "text": "return jnp.sin(x) * C3 + 2.0"}
    # the call path holds the traced function's own frame only (not this test's)
    assert source == dict(line, calls=[dict(line, call=source["calls"][0]["call"])])
    assert nodes["e0"]["provenance"] is None and nodes["e0"]["group"] is None
    assert model["clusters"] == [] and not model["truncated"] and model["hidden"] == 0
    assert json.loads(json.dumps(model)) == model


def test_large_constants_show_no_value():
    model = viz.graph_model(nbjax.make_jaxpr(lambda x: x * C10)(np.ones(10, np.float32)))
    const = _nodes(model)["c0"]
    assert const["value"] is None and const["label"] == "const a: f32[10]"


def test_literal_and_passthrough_outputs(zoo):
    model = viz.graph_model(zoo["literal_and_passthrough_outputs"])
    nodes = _nodes(model)
    assert nodes["out0"]["label"] == "out 0 = 1.0:f32[]"
    assert ("in1", "out1", "i32[]") in _edges(model)
    assert not any(e["target"] == "out0" for e in model["edges"])


def test_cond_branches_are_nested_clusters(zoo):
    model = viz.graph_model(zoo["cond"])
    assert [(c["id"], c["name"], c["owner"], c["parent"], c["depth"], c["size"])
            for c in model["clusters"]] == [
        ("e1/branches0", "branches[0]", "e1", None, 1, 3),
        ("e1/branches1", "branches[1]", "e1", None, 1, 3)]
    nodes = _nodes(model)
    assert nodes["e1/branches0/e0"]["primitive"] == "cos"
    assert nodes["e1/branches1/e0"]["primitive"] == "sin"
    assert nodes["e1/branches1/e0"]["cluster"] == "e1/branches1"
    assert ("e1/branches0/in0", "e1/branches0/e0", "f32[]") in _edges(model)
    assert nodes["e1"]["label"] == "d = cond"  # the branches are clusters, not label text


def test_scan_with_a_cond_inside_nests_two_levels(zoo):
    model = viz.graph_model(zoo["scan_cond"])
    clusters = {c["id"]: c for c in model["clusters"]}
    assert list(clusters) == ["e0/jaxpr", "e0/jaxpr/e5/branches0", "e0/jaxpr/e5/branches1"]
    inner = clusters["e0/jaxpr/e5/branches0"]
    assert (inner["parent"], inner["owner"], inner["depth"]) == ("e0/jaxpr", "e0/jaxpr/e5", 2)
    inside = [n for n in model["nodes"] if n["id"].startswith("e0/jaxpr/")]
    assert clusters["e0/jaxpr"]["size"] == len(inside)
    assert _nodes(model)["e0"]["params"]["length"] == "3"


@pytest.mark.parametrize("name, primitive, clusters", [
    ("while", "while", ["body_jaxpr", "cond_jaxpr"]),
    ("jit", "jit", ["jaxpr"]),
    ("checkpoint", "checkpoint", ["jaxpr"]),
    ("custom_jvp", "custom_jvp_call", ["call_jaxpr"]),
    ("custom_vjp", "custom_vjp_call", ["call_jaxpr"]),
])
def test_sub_jaxprs_of_call_like_primitives(zoo, name, primitive, clusters):
    model = viz.graph_model(zoo[name])
    assert _nodes(model)["e0"]["primitive"] == primitive
    assert [c["id"] for c in model["clusters"]] == [f"e0/{c}" for c in clusters]
    assert all(c["owner"] == "e0" for c in model["clusters"])


def test_jit_name_param_is_on_the_label(zoo):
    assert _nodes(viz.graph_model(zoo["jit"]))["e0"]["label"] == "b = jit\nname=<lambda>"


def test_gradient_phases_and_provenance_links(zoo):
    model = viz.graph_model(zoo["grad"])
    eqns = [n for n in model["nodes"] if n["kind"] == "eqn"]
    phases = [n["provenance"]["phase"] for n in eqns]
    assert phases[:3] == ["forward"] * 3 and set(phases[3:]) == {"backward"}
    sin = next(n for n in eqns if n["primitive"] == "sin")
    assert sin["provenance"]["primitive"] == "sin"
    # The backward `mul` by cos(x) is the transpose of sin's tangent rule: same provenance.
    linked = [n for n in eqns if n["provenance"]["phase"] == "backward"
              and n["provenance"]["id"] == sin["provenance"]["id"]]
    assert "mul" in [n["primitive"] for n in linked]
    forward_ids = {n["provenance"]["id"] for n in eqns if n["provenance"]["phase"] == "forward"}
    assert all(n["provenance"]["id"] in forward_ids for n in eqns)


def test_fusion_plan_groups(zoo):
    optimised, _ = optimize(zoo["softmax_dot"])
    plan = fusion.plan(optimised.jaxpr, get_target("cpu"))
    model = viz.graph_model(optimised, fusion=plan)
    assert [g["id"] for g in model["groups"]] == [g.index for g in plan.groups]
    nodes = _nodes(model)
    for group, plan_group in zip(model["groups"], plan.groups):
        assert group["kind"] == plan_group.kind
        assert [nodes[i]["primitive"] for i in group["nodes"]] == [
            e.primitive.name for e in optimised.jaxpr.eqns if e in plan_group.eqns]
        assert all(nodes[i]["group"] == group["id"] for i in group["nodes"])
    assert model["groups"][0]["label"].startswith("kernel 0 over [")
    dot_step = next(n for n in model["nodes"] if n["primitive"] == "dot_general")
    assert "library" in dot_step["fusion_reason"]
    assert all(n["fusion_reason"] for n in model["nodes"] if n["kind"] == "eqn")


def test_fusion_plan_is_read_tolerantly(zoo):
    closed = zoo["chain"]
    assert viz.graph_model(closed, fusion=object())["groups"] == []
    plan = types.SimpleNamespace(groups=[types.SimpleNamespace(eqns=closed.eqns[:2],
                                                               name="k")])
    model = viz.graph_model(closed, fusion=plan)
    assert model["groups"] == [{"id": "k", "kind": "kernel", "label": "kernel k",
                                "nodes": ["e0", "e1"]}]
    assert [n["group"] for n in model["nodes"]] == [None, None, "k", "k", None, None]


# --- the node budget ------------------------------------------------------------------------

def test_long_program_folds_its_middle_under_the_budget(zoo):
    closed = zoo["long_chain"]
    full = viz.graph_model(closed, budget=None)
    assert len(full["nodes"]) == 202 and not full["truncated"] and full["hidden"] == 0
    model = viz.graph_model(closed)
    assert model["budget"] == viz.DEFAULT_BUDGET and model["truncated"]
    visible = _visible(model)
    assert len(visible) == viz.DEFAULT_BUDGET
    assert model["hidden"] == len(model["nodes"]) - len(visible) == 202 - 149
    ids = [n["id"] for n in visible]
    assert ids[:3] == ["in0", "e0", "e1"] and ids[-2:] == ["out0", "more"]
    assert "e199" in ids and "e100" not in ids
    assert _nodes(model)["more"]["label"] == f"… {model['hidden']} more nodes\n(budget 150)"
    dot = viz.to_dot(model)
    assert '"e73" -> "more"' in dot and '"more" -> "e127"' in dot
    assert '"e100"' not in dot
    assert dot.count("-> \"more\"") == 1  # rerouted edges are not duplicated


def test_sub_jaxprs_collapse_first(zoo):
    closed = nbjax.make_jaxpr(_big_scan)(V3)
    model = viz.graph_model(closed, budget=20)
    (cluster,) = model["clusters"]
    assert cluster["collapsed"] and model["truncated"]
    assert model["hidden"] == cluster["size"] > 60
    assert "more" not in _nodes(model)  # collapsing was enough
    dot = viz.to_dot(model)
    assert "cluster_e0/jaxpr" not in dot and f"▸ jaxpr ({cluster['size']} nodes hidden)" in dot
    # A collapsed cluster opens again by flipping its flag.
    cluster["collapsed"] = False
    assert 'subgraph "cluster_e0/jaxpr"' in viz.to_dot(model)


def test_budget_collapses_the_deepest_clusters_first(zoo):
    model = viz.graph_model(zoo["scan_cond"], budget=len(
        viz.graph_model(zoo["scan_cond"], budget=None)["nodes"]) - 1)
    assert [c["collapsed"] for c in model["clusters"]] == [False, True, False]


# --- repeated blocks ------------------------------------------------------------------------

X23, W33 = np.ones((2, 3), np.float32), np.ones((3, 3), np.float32)


def test_an_unrolled_loop_folds_into_one_block_times_n():
    closed = nbjax.make_jaxpr(_residual_steps)(X23, W33)
    step = [e.primitive.name for e in nbjax.make_jaxpr(lambda x, w: jnp.tanh(x @ w) + x)(
        X23, W33).jaxpr.eqns]
    model = viz.graph_model(closed)
    (repeat,) = model["repeats"]
    eqns = [n for n in model["nodes"] if n["kind"] == "eqn"]
    assert (repeat["count"], repeat["size"]) == (6, len(step))
    assert [_nodes(model)[i]["primitive"] for i in repeat["block"]] == step
    assert repeat["block"] == [n["id"] for n in eqns[:len(step)]]
    # every later copy is drawn by its counterpart in the first block
    assert repeat["copies"] == {n["id"]: eqns[i % len(step)]["id"]
                                for i, n in enumerate(eqns[len(step):6 * len(step)],
                                                      len(step))}
    shown = viz.representatives(model)
    assert all(shown[c] == f for c, f in repeat["copies"].items())
    assert not model["truncated"] and model["hidden"] == 0  # folded, not hidden
    visible = _visible(model)
    assert len(visible) == len(model["nodes"]) - 5 * len(step)
    dot = viz.to_dot(model)
    assert f'subgraph "cluster_{repeat["id"]}"' in dot and "label=\"× 6 " in dot
    # the step feeding the next: from the block's end back to its start, not a constraint
    last, first = repeat["block"][-1], repeat["block"][0]
    carried = [line for line in dot.splitlines() if f'"{last}" -> "{first}"' in line]
    assert len(carried) == 1 and 'constraint="false"' in carried[0]
    assert "next step" in carried[0]
    # unfolded by flipping its flag: every node drawn, no repeat box
    repeat["collapsed"] = False
    assert len(_visible(model)) == len(model["nodes"])
    dot = viz.to_dot(model)
    assert "cluster_repeat" not in dot and "next step" not in dot


@pytest.mark.parametrize("fun, args", [
    (_long_chain, (1.0,)),                               # steps differ by a literal
    (lambda *xs: [jnp.sin(x) for x in xs], (1.0,) * 5),  # alike, but none feeds the next
    (lambda x: jnp.sin(jnp.sin(jnp.sin(x))), (1.0,)),    # too short to be worth folding
])
def test_only_repeated_steps_fold(fun, args):
    assert viz.graph_model(nbjax.make_jaxpr(fun)(*args))["repeats"] == []


def test_folding_keeps_a_long_unrolled_loop_under_the_budget():
    closed = nbjax.make_jaxpr(lambda x, w: _residual_steps(x, w, n=100))(X23, W33)
    assert len(closed.jaxpr.eqns) > viz.DEFAULT_BUDGET
    model = viz.graph_model(closed)
    assert not model["truncated"] and "more" not in _nodes(model)
    assert len(_visible(model)) < 10
    assert model["repeats"][0]["count"] == 100


# --- DOT ------------------------------------------------------------------------------------

def test_dot_snippets_of_a_chain(zoo):
    dot = viz.to_dot(viz.graph_model(zoo["chain"]))
    assert dot.startswith("digraph jaxpr {\n") and dot.endswith("}\n")
    assert ('"in0" -> "e0" [label="f32[3]", class="nbjax-edge", tooltip="b: f32[3]", '
            'labeltooltip="b: f32[3]"];') in dot
    assert ('"c0" -> "e1" [label="f32[3]", class="nbjax-edge", tooltip="a: f32[3]", '
            'labeltooltip="a: f32[3]"];') in dot
    assert ('"in0" [id="in0", label="b: f32[3]", class="nbjax-node nbjax-input", '
            'tooltip="b: f32[3]", shape="invhouse", fillcolor="#dcfce7", style="filled"];'
            ) in dot
    assert '"e2" [id="e2", label="e = add\\n2.0:f32[]", class="nbjax-node nbjax-eqn", ' in dot
    assert 'shape="house"' in dot and "backward" not in dot


def test_dot_of_cond_nests_clusters_and_links_them_to_their_owner(zoo):
    dot = viz.to_dot(viz.graph_model(zoo["cond"]), id_prefix="g1-")
    assert ('  subgraph "cluster_e1/branches0" {\n    graph [label="cond: branches[0]", '
            'labelloc="t", style="rounded,dashed"') in dot
    assert ('"e1" -> "e1/branches1/in0" [lhead="cluster_e1/branches1", style="dashed"'
            ) in dot
    assert 'id="g1-e1/branches1/e0"' in dot


def test_dot_colours_forward_and_backward(zoo):
    model = viz.graph_model(zoo["grad"])
    dot = viz.to_dot(model)
    sin = next(n for n in model["nodes"] if n["primitive"] == "sin")
    prov = sin["provenance"]["id"]
    assert f'class="nbjax-node nbjax-eqn nbjax-forward nbjax-prov-{prov}"' in dot
    assert f'class="nbjax-node nbjax-eqn nbjax-backward nbjax-prov-{prov}"' in dot
    assert 'fillcolor="#dbeafe"' in dot and 'fillcolor="#fed7aa"' in dot
    assert 'label="blue: forward pass    orange: backward pass' in dot  # then the faded kinds


def test_dot_draws_fusion_kernels_as_coloured_clusters(zoo):
    optimised, _ = optimize(zoo["softmax_dot"])
    plan = fusion.plan(optimised.jaxpr, get_target("cpu"))
    dot = viz.to_dot(viz.graph_model(optimised, fusion=plan))
    assert ('subgraph "cluster_group_0" {\n    graph [label="kernel 0 over [4,5]", '
            'labelloc="t", fontsize="9", id="group-0", style="rounded,filled", '
            'color="#1d4ed8", fillcolor="#eff6ff"') in dot
    library = next(g for g in plan.groups if g.kind == "library")
    assert f'label="library step {library.index}"' in dot


def test_dot_quotes_user_text():
    assert viz.dot.quote('a "b" \\ c\nd') == '"a \\"b\\" \\\\ c\\nd"'


def test_dot_is_deterministic(zoo):
    for closed in zoo.values():
        assert viz.to_dot(viz.graph_model(closed)) == viz.to_dot(viz.graph_model(closed))


def test_dot_does_not_depend_on_the_hash_seed():
    script = textwrap.dedent("""
        import numpy as np, nbjax, nbjax.numpy as jnp
        from nbjax import lax, viz
        def f(xs):
            def body(c, y):
                d = {'b': c, 'a': y}
                return c * jnp.sin(y), lax.cond(c > 0, lambda d: jnp.sin(d['a']) * d['b'],
                                                lambda d: jnp.cos(d['b']), d)
            return lax.scan(body, 1.0, xs)[0]
        closed = nbjax.make_jaxpr(nbjax.grad(f))(np.ones(3, np.float32))
        print(viz.to_dot(viz.graph_model(closed, budget=40)))
        print(viz.jaxpr_html(closed))
    """)
    outs = []
    for seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=120, cwd=os.path.dirname(os.path.dirname(
                                 os.path.abspath(__file__))))
        assert run.returncode == 0, run.stderr
        outs.append(run.stdout)
    assert "digraph" in outs[0] and outs[0] == outs[1]


# --- SVG ------------------------------------------------------------------------------------

@needs_dot
def test_svg_rendering(zoo):
    svg = viz.to_svg(viz.to_dot(viz.graph_model(zoo["cond"])))
    assert svg.startswith("<svg") and "<?xml" not in svg and "<!DOCTYPE" not in svg
    text = html.unescape(svg)  # Graphviz writes "-" as "&#45;" in attributes
    assert 'id="e1/branches0/e0"' in text and 'class="node nbjax-node nbjax-eqn"' in text
    assert svg.rstrip().endswith("</svg>")


def test_missing_dot_says_how_to_install_it(zoo, monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(viz.GraphvizNotFoundError, match="apt-get install graphviz"):
        viz.to_svg("digraph { a }")
    page = viz.view(zoo["chain"]).html()
    assert "Graph not shown" in page and "conda install graphviz" in page
    assert _plain(viz.jaxpr_html(zoo["chain"])) in _plain(page)


# --- coloured text --------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(ZOO))
def test_jaxpr_html_is_exactly_the_printed_text(zoo, name):
    closed = zoo[name]
    assert viz.annotate(closed).ok
    page = viz.jaxpr_html(closed)
    assert page.startswith('<pre class="nbjax-jaxpr"') and page.endswith("</pre>")
    assert page.count("<span") == page.count("</span>")
    assert _plain(page) == str(closed)
    model = viz.graph_model(closed, budget=None)
    eqn_ids = [n["id"] for n in model["nodes"] if n["kind"] == "eqn"]
    assert sorted(re.findall(r'data-node="([^"]*)"', page)) == sorted(eqn_ids)


def test_jaxpr_html_token_classes(zoo):
    page = viz.jaxpr_html(zoo["cond"])
    syntax = viz.theme.SYNTAX  # the theme's code colours, ours where there is no theme
    assert syntax["primitive"] == "var(--jp-mirror-editor-property-color,#1d4ed8)"
    assert (f'<span class="nbjax-primitive" style="color:{syntax["primitive"]};'
            'font-weight:bold">cond') in page
    assert (f'<span class="nbjax-keyword" style="color:{syntax["keyword"]};'
            'font-weight:bold">lambda') in page
    assert f'<span class="nbjax-type" style="color:{syntax["type"]}">f32[]</span>' in page
    assert f'<span class="nbjax-pkey" style="color:{syntax["muted"]}">new_dtype</span>' in page
    assert f'<span class="nbjax-pval" style="color:{syntax["pval"]}">int32</span>' in page
    assert '<span class="nbjax-eqn" data-node="e1/branches1/e0">' in page
    assert '<span class="nbjax-var" data-var="h">h</span>' in page
    literal = viz.jaxpr_html(zoo["chain"])
    assert f'<span class="nbjax-literal" style="color:{syntax["literal"]}">2.0</span>' in literal


def test_equation_spans_nest_like_the_jaxpr(zoo):
    annotated = viz.annotate(zoo["cond"])
    start, end = annotated.spans["e1"]
    inner = annotated.spans["e1/branches0/e0"]
    assert start < inner[0] < inner[1] < end
    assert annotated.eqn_text("e1/branches0/e0") == "f:f32[] = cos e"


def test_unreadable_text_is_shown_plain(zoo):
    class Odd(ClosedJaxpr):
        def __str__(self):
            return super().__str__() + " <junk>"
    closed = zoo["chain"]
    odd = Odd(closed.jaxpr, closed.consts)
    annotated = viz.annotate(odd)
    assert not annotated.ok and annotated.html == html.escape(str(odd))
    assert _plain(viz.jaxpr_html(odd)) == str(odd)
    assert _nodes(viz.graph_model(odd))["e1"]["text"]  # the model still has equation text


# --- user text is escaped -------------------------------------------------------------------

def test_html_and_svg_escape_user_text():
    evil = "<script>alert(1)</script>"

    def f(x):
        return x * 2
    f.__code__ = f.__code__.replace(co_name=evil)
    f.__name__ = f.__qualname__ = evil
    closed = nbjax.make_jaxpr(lambda x: nbjax.jit(f)(x) + f(x))(1.0)
    assert evil in str(closed)
    page = viz.jaxpr_html(closed)
    assert "<script" not in page and "&lt;script&gt;" in page
    assert _plain(page) == str(closed)
    model = viz.graph_model(closed)
    assert any(n["source"] and n["source"]["function"] == evil for n in model["nodes"])
    full = viz.view(closed).html()
    assert "<script" not in full.lower() and "onclick" not in full.lower()
    if viz.dot_available():
        assert "<svg" in full and "&lt;script&gt;" in full


# --- rich display ---------------------------------------------------------------------------

def test_repr_html_of_make_jaxpr_results(zoo):
    closed = zoo["grad"]
    page = closed._repr_html_()
    assert page.startswith('<div class="nbjax-view"') and page.endswith("</div>")
    assert viz.jaxpr_html(closed) in page
    assert ("<svg" in page) == viz.dot_available()
    assert "<script" not in page and "onclick" not in page
    bundle = closed._repr_mimebundle_()
    assert bundle == {"text/plain": str(closed), "text/html": page}
    assert closed._repr_mimebundle_(include={"text/plain"}) == {"text/plain": str(closed)}
    assert "text/html" not in closed._repr_mimebundle_(exclude={"text/html"})
    assert closed.jaxpr._repr_mimebundle_()["text/plain"] == str(closed.jaxpr)


@needs_dot
def test_view_of_a_truncated_graph_says_how_to_show_all(zoo):
    page = viz.view(zoo["long_chain"]).html()
    assert "graph: 149 nodes shown, 53 hidden (budget 150)" in page
    assert "budget=None" in page
    assert "53 hidden" not in viz.view(zoo["long_chain"], budget=None).html()


def test_very_long_jaxprs_are_shown_uncoloured(zoo, monkeypatch):
    monkeypatch.setattr(viz.display, "COLOUR_LIMIT", 100)
    page = viz.view(zoo["chain"], graph=False).html()
    assert "nbjax-eqn" not in page and "<span" not in page
    assert _plain(page) == str(zoo["chain"])


def test_ipython_formats_jaxprs_as_html_only_where_html_is_shown(zoo, monkeypatch):
    IPython = pytest.importorskip("IPython")
    from IPython.core.formatters import DisplayFormatter
    closed = zoo["chain"]
    data, _ = DisplayFormatter().format(closed)
    assert data["text/plain"] == str(closed) and "nbjax-jaxpr" in data["text/html"]
    # A terminal IPython asks for every type but only shows text: no HTML (nor Graphviz).
    terminal = types.SimpleNamespace(
        display_formatter=types.SimpleNamespace(active_types=["text/plain"]))
    monkeypatch.setattr(IPython, "get_ipython", lambda: terminal)
    assert closed._repr_mimebundle_() == {"text/plain": str(closed)}


# --- grouping by source, faded dead code ----------------------------------------------------

def two_lines(x):
    y = jnp.sin(x) * 2.0
    return jnp.exp(y) + y


def _inner(x):
    return jnp.cos(x) * 3.0


def two_functions(x):
    y = jnp.sin(x)
    return _inner(y) + y


def _eqns_by(model, key):
    """Equation node ids by what ``key(source)`` says of their source, in program order."""
    found = {}
    for n in model["nodes"]:
        if n["kind"] == "eqn":
            found.setdefault(key(n["source"]), []).append(n["id"])
    return found


def test_groups_by_line_hold_each_line_s_equations():
    model = viz.graph_model(nbjax.make_jaxpr(two_lines)(V3), group="line")
    groups = model["source_groups"]
    first, second = _line_of(two_lines, "jnp.sin"), _line_of(two_lines, "jnp.exp")
    assert [g["source"]["line"] for g in groups] == [first, second]
    assert {g["source"]["line"]: g["nodes"] for g in groups} == \
        _eqns_by(model, lambda s: s["line"])
    prims = {n["id"]: n["primitive"] for n in model["nodes"]}
    assert [sorted(prims[i] for i in g["nodes"]) for g in groups] == \
        [["mul", "sin"], ["add", "exp"]]
    assert groups[0]["label"] == f"line {first} (two_lines): y = jnp.sin(x) * 2.0"
    assert viz.graph_model(nbjax.make_jaxpr(two_lines)(V3))["source_groups"] == []
    with pytest.raises(ValueError, match="group must be one of 'line', 'function' or None"):
        viz.graph_model(nbjax.make_jaxpr(two_lines)(V3), group="lines")


def test_groups_by_function_nest_a_call_in_its_caller():
    model = viz.graph_model(nbjax.make_jaxpr(two_functions)(V3), group="function")
    prims = {n["id"]: n["primitive"] for n in model["nodes"]}
    runs = [(g["label"], g["parent"], [prims[i] for i in g["nodes"]])
            for g in model["source_groups"]]
    # the outer function's group holds the call's (a run inside its own run)
    assert runs == [("two_functions()", None, ["sin", "cos", "mul", "add"]),
                    ("_inner()", "src-e0", ["cos", "mul"])]
    functions = _eqns_by(model, lambda s: s["function"])
    assert sorted(functions["_inner"]) == sorted(model["source_groups"][1]["nodes"])


def _layers(x):                           # lines of 3 to 8 equations, no two alike
    x = jnp.tanh(jnp.sin(x) * 2.0 + jnp.cos(x) - 1.0)
    x = jnp.exp(-jnp.abs(x) * 0.5) * jnp.sin(x) + x
    x = jnp.sqrt(jnp.abs(x) + 1.0) / (jnp.cosh(x) + jnp.sinh(x) * 0.1) - jnp.log1p(x * x)
    x = jnp.maximum(x, 0.0) + jnp.minimum(x * 3.0, 1.0)
    x = jnp.arctan(x) * jnp.exp2(x * 0.1) - jnp.tan(x * 0.2)
    x = jnp.sin(jnp.cos(jnp.sin(x * 1.5))) + jnp.expm1(x) * jnp.sign(x) - jnp.square(x)
    x = jnp.logaddexp(x, x * 0.5) - jnp.log(jnp.abs(x) + 2.0) * jnp.cos(x + 1.0)
    return x


def test_a_grouped_graph_over_the_budget_folds_its_groups_not_its_middle():
    """Under the node budget, a view grouped by line draws its largest groups as one node
    each (the whole program stays in view) before folding anything into a MORE node."""
    closed = nbjax.make_jaxpr(_layers)(V3)
    plain = viz.graph_model(closed, budget=30)
    assert plain["truncated"] and plain["nodes"][-1]["id"] == viz.model.MORE
    model = viz.graph_model(closed, budget=30, group="line")
    shown = viz.representatives(model)
    drawn = set(shown.values())
    assert viz.model.MORE not in drawn and len(drawn) <= 30
    collapsed = [g for g in model["source_groups"] if g["collapsed"]]
    assert collapsed and all({shown[n] for n in g["nodes"]} == {g["id"]} for g in collapsed)
    assert not all(g["collapsed"] for g in model["source_groups"])  # only what it takes
    assert viz.graph_model(closed, budget=None, group="line")["source_groups"][0][
        "collapsed"] is False


@needs_dot
def test_a_collapsed_group_is_one_node_with_the_group_s_edges():
    model = viz.graph_model(nbjax.make_jaxpr(two_functions)(V3), group="function")
    inner = model["source_groups"][1]
    inner["collapsed"] = True
    shown = viz.representatives(model)
    assert {shown[i] for i in inner["nodes"]} == {inner["id"]}
    dot = viz.to_dot(model)
    drawn = set(re.findall(r'^\s*"([^"]+)" \[', dot, re.M))
    assert inner["id"] in drawn and not drawn & set(inner["nodes"])
    edges = set(re.findall(r'"([^"]+)" -> "([^"]+)"', dot))
    # every edge of the program, its ends replaced by what is drawn for them
    expected = {(shown[e["source"]], shown[e["target"]]) for e in model["edges"]}
    assert edges == {e for e in expected if e[0] != e[1]}
    assert (shown["e0"], inner["id"]) in edges and (inner["id"], "e3") in edges
    assert "▸ _inner()" in dot and "cluster_src-e0" in dot  # the others stay clusters
    svg = viz.to_svg(dot)
    assert f'id="{inner["id"]}"' in svg.replace("&#45;", "-")


def _live_by_fixpoint(jaxpr):
    """Equations whose results reach an output, by iterating to a fixed point (no reverse
    walk): the reference for ``dim`` == DEAD."""
    live_vars = {v for v in jaxpr.outvars if not hasattr(v, "val")}
    live, changed = set(), True
    while changed:
        changed = False
        for i, eqn in enumerate(jaxpr.eqns):
            if i not in live and any(v in live_vars for v in eqn.outvars):
                live.add(i)
                live_vars.update(a for a in eqn.invars if not hasattr(a, "val"))
                changed = True
    return live


def _loss(x, w):
    y = jnp.sin(x) * w
    return jnp.sum(jnp.exp(y) * 2.0)


def test_dead_forward_code_of_a_gradient_is_faded():
    from nbjax.viz.unused import DEAD
    closed = nbjax.make_jaxpr(nbjax.grad(_loss))(V3, np.float32(2.0))
    model = viz.graph_model(closed)
    live = _live_by_fixpoint(closed.jaxpr)
    dead = {f"e{i}" for i in range(len(closed.jaxpr.eqns)) if i not in live}
    assert {n["id"] for n in model["nodes"] if n["dim"] == DEAD} == dead
    # what grad drops: the primal result (sum of exp(y) * 2), forward equations only
    nodes = {n["id"]: n for n in model["nodes"]}
    assert sorted(nodes[i]["primitive"] for i in dead) == ["mul", "reduce_sum"]
    assert all(nodes[i]["provenance"]["phase"] == "forward" for i in dead)
    dot = viz.to_dot(model)
    assert "faded, dashed: unused (DCE drops it)" in dot
    assert sum('nbjax-dim"' in line for line in dot.splitlines()) == len(dead)


def test_identity_equations_are_faded_and_dead_ones_stay_dead():
    from nbjax.viz.unused import DEAD, IDENTITY
    model = viz.graph_model(nbjax.make_jaxpr(lambda x: jnp.sin(x * 1.0) + x * 2.0)(V3))
    dims = {(n["primitive"], tuple(n["literals"])): n["dim"] for n in model["nodes"]
            if n["kind"] == "eqn"}
    assert dims[("mul", ("1.0:f32[]",))] == IDENTITY and dims[("mul", ("2.0:f32[]",))] is None
    assert "faded, dotted: identity (x·1, x−0)" in viz.to_dot(model)
    closed = nbjax.make_jaxpr(nbjax.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2) * 1.0))(V3)
    by_text = {n["text"]: n["dim"] for n in viz.graph_model(closed)["nodes"] if n["text"]}
    assert by_text["_:f32[] = mul f 1.0:f32[]"] == DEAD


def _identities(x):
    y = x * 1.0  # an identity that is also an output
    z = jnp.sin(y) - 0.0
    return jnp.cos(z) * 2.0, y


def test_hidden_identities_are_drawn_as_their_operands():
    closed = nbjax.make_jaxpr(_identities)(V3)
    text = str(closed)
    shown = viz.graph_model(closed)
    hidden = viz.graph_model(closed, hide_identities=True)
    assert shown["identities_hidden"] == 0 and hidden["identities_hidden"] == 2
    assert [n["primitive"] for n in _eqns(shown)] == ["mul", "sin", "sub", "cos", "mul"]
    assert [(n["id"], n["primitive"]) for n in _eqns(hidden)] == \
        [("e1", "sin"), ("e3", "cos"), ("e4", "mul")]
    assert all(n["dim"] is None for n in _eqns(hidden))
    # sin reads x, cos reads sin's result, the second output is x itself: each edge named
    # by the value drawn for it
    edges = [(e["source"], e["target"], e["var"]) for e in hidden["edges"]]
    assert edges == [("in0", "e1", "a"), ("e1", "e3", "c"), ("e3", "e4", "e"),
                     ("e4", "out0", "f"), ("in0", "out1", "a")]
    assert {n["id"]: n["vars"] for n in hidden["nodes"] if n["kind"] == "output"} == \
        {"out0": ["f"], "out1": ["a"]}
    assert "2 identities hidden" in viz.to_dot(hidden)
    assert "identities hidden" not in viz.to_dot(shown)
    assert str(closed) == text  # the program is not touched


def test_hiding_identities_keeps_a_literal_operand_and_sub_jaxprs():
    closed = nbjax.make_jaxpr(lambda x: nbjax.lax.cond(x[0] > 0, lambda v: v * 1.0,
                                                       lambda v: v - 1.0, x))(V3)
    model = viz.graph_model(closed, hide_identities=True)
    assert model["identities_hidden"] == 1
    branch = [n for n in model["nodes"] if n["cluster"] and n["kind"] == "eqn"]
    assert [n["primitive"] for n in branch] == ["sub"]  # the v * 1.0 branch lost its mul
    ids = {n["id"] for n in model["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in model["edges"])
    inner_out = [e for e in model["edges"] if e["target"].endswith("out0")
                 and e["target"].startswith("e") and "branches" in e["target"]]
    assert any(e["source"].endswith("/in0") for e in inner_out)  # v passed straight through


@needs_dot
@pytest.mark.parametrize("group", ["line", "function"])
def test_every_program_draws_grouped_each_node_once(zoo, group):
    """Grouped by source, with every other group folded: each node drawn is drawn once,
    inside its group's cluster when its group is open, and Graphviz accepts the result."""
    for name, closed in zoo.items():
        model = viz.graph_model(closed, group=group, budget=None)
        for g in model["source_groups"][1::2]:
            g["collapsed"] = True
        dot = viz.to_dot(model)
        drawn = re.findall(r'^\s*"([^"]+)" \[', dot, re.M)
        assert len(drawn) == len(set(drawn)), name
        shown = viz.representatives(model)
        assert set(drawn) == set(shown.values()), name
        for g in model["source_groups"][::2]:
            drawn_here = [n for n in g["nodes"] if shown[n] == n]
            if not drawn_here:  # inside a sub-jaxpr whose owner is in a folded group
                assert all(shown[n].startswith("src-") for n in g["nodes"]), (name, g["id"])
                continue
            body = dot[dot.index(f'subgraph "cluster_{g["id"]}"'):]
            assert f'"{drawn_here[0]}" [' in body[:body.index("\n  }")], (name, g["id"])
        assert viz.to_svg(dot).startswith("<svg"), name


@needs_dot
def test_the_collectives_of_a_pmapped_function_stand_out():
    """A pmapped function's graph shows where its values cross devices (or processes):
    its collectives are hexagons with their own class, named in the legend; the other
    equations are not."""
    from nbjax import lax
    f = nbjax.pmap(lambda v: lax.psum(jnp.sin(v), "i") * lax.all_gather(v, "i").sum(), "i")
    model = viz.graph_model(nbjax.make_jaxpr(f)(np.ones((2, 3), np.float32)))
    marked = {n["primitive"] for n in model["nodes"] if n["collective"]}
    assert marked == {"psum", "all_gather"}
    dot = viz.to_dot(model)
    for node in model["nodes"]:
        if node["kind"] == "eqn":
            line = next(l for l in dot.splitlines() if f'id="{node["id"]}"' in l)
            assert ('shape="hexagon"' in line) == node["collective"], line
            assert ("nbjax-collective" in line) == node["collective"], line
    assert "hexagon: a collective" in dot
    plain = viz.to_dot(viz.graph_model(nbjax.make_jaxpr(jnp.sin)(V3)))
    assert 'shape="hexagon"' not in plain and "a collective" not in plain

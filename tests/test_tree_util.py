"""Key paths and the rest of ``jax.tree_util`` / ``jax.tree``: each program is written once
against a ``lib`` (``nbjax`` or ``jax``) and its printed result compared with JAX's (the key
classes, treedefs and Partials print alike in both)."""

import collections
import dataclasses
import functools
import operator

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

try:
    import jax
except ImportError:  # JAX is a test reference only
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX is the reference")
Point = collections.namedtuple("Point", ["x", "y"])


class _Classes:
    """The same user classes, registered once with nbjax's and once with JAX's tree_util."""

    def __init__(self, lib):
        tu = lib.tree_util

        @tu.register_pytree_node_class
        class Box:
            def __init__(self, a, b):
                self.a, self.b = a, b

            def tree_flatten(self):
                return (self.a, self.b), "box"

            @classmethod
            def tree_unflatten(cls, aux, children):
                return cls(*children)

            def __repr__(self):
                return f"Box({self.a!r}, {self.b!r})"

        @tu.register_pytree_with_keys_class
        class Named:
            def __init__(self, **kw):
                self.kw = kw

            def tree_flatten_with_keys(self):
                keys = sorted(self.kw)
                return [(tu.GetAttrKey(k), self.kw[k]) for k in keys], tuple(keys)

            @classmethod
            def tree_unflatten(cls, keys, children):
                return cls(**dict(zip(keys, children)))

            def __repr__(self):
                return f"Named({self.kw!r})"

        @tu.register_dataclass
        @dataclasses.dataclass
        class Layer:
            w: object
            b: object
            act: str = lib.tree.static(default="relu")

        @tu.register_static
        class Tag:
            def __init__(self, name):
                self.name = name

            def __eq__(self, other):
                return isinstance(other, Tag) and other.name == self.name

            def __hash__(self):
                return hash(self.name)

            def __repr__(self):
                return f"Tag({self.name!r})"

        self.Box, self.Named, self.Layer, self.Tag = Box, Named, Layer, Tag

    def trees(self):
        return [
            {"b": [1, (2, None, 3)], "a": Point(4, {"z": 5, "y": [6]})},
            [self.Box(1, [2, 3]), self.Named(q=4, p=(5,)), self.Layer(w=6, b=[7, 8])],
            (None, self.Tag("t"), {"k": self.Tag("u"), "v": 9}),
            [[], {}, (), 1.5],
            7,
        ]


_CLASSES = {"nbjax": _Classes(nbjax)}
if jax is not None:
    _CLASSES["jax"] = _Classes(jax)
N_TREES = len(_CLASSES["nbjax"].trees())


def _both(program, i):
    """``program(lib, tree)`` printed for nbjax and for JAX (``None`` without JAX)."""
    out = {name: repr(program(lib, c.trees()[i]))
           for name, lib, c in (("nbjax", nbjax, _CLASSES["nbjax"]),
                                ("jax", jax, _CLASSES.get("jax"))) if c is not None}
    return out["nbjax"], out.get("jax")


def _check(program, i):
    mine, theirs = _both(program, i)
    if theirs is not None:
        assert mine == theirs


def _paths(lib, tree):
    pairs, treedef = lib.tree_util.tree_flatten_with_path(tree)
    return pairs, treedef, [lib.tree_util.keystr(p) for p, _ in pairs], \
        [lib.tree_util.keystr(p, simple=True, separator="/") for p, _ in pairs]


def _path_functions(lib, tree):
    tu = lib.tree_util
    mapped = tu.tree_map_with_path(lambda p, x, y: (tu.keystr(p), x, y), tree, tree)
    return (tu.tree_leaves_with_path(tree) == lib.tree.leaves_with_path(tree), mapped,
            lib.tree.map_with_path(lambda p, x: len(p), tree))


def _is_leaf_variants(lib, tree):
    tu = lib.tree_util
    stop_lists = tu.tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, list))[0]
    stop_deep = tu.tree_leaves_with_path(tree, is_leaf=lambda p, x: len(p) >= 2,
                                         is_leaf_takes_path=True)
    return stop_lists, stop_deep


def _one_level(lib, tree):
    """The children and their keys (JAX returns them as list or tuple, varying by type)."""
    tu = lib.tree_util
    try:
        (children, aux), (pairs, aux_k) = (tu.flatten_one_level(tree),
                                           tu.flatten_one_level_with_keys(tree))
        return list(children), aux, [tuple(p) for p in pairs], aux_k
    except ValueError as e:
        return type(e).__name__, str(e)


def _node_queries(lib, tree):
    tu = lib.tree_util
    kids = list(tu.flatten_one_level(tree)[0]) if tu.is_tree_node(type(tree)) else [tree]
    return (tu.is_tree_node(type(tree)), tu.all_leaves(kids), tu.all_leaves(tu.tree_leaves(tree)),
            tu.all_leaves(kids, is_leaf=lambda x: x is None or isinstance(x, list)))


def _reductions(lib, tree):
    tu = lib.tree_util
    leaves = tu.tree_leaves(tree)
    numeric = tu.tree_map(lambda x: [x] if isinstance(x, (int, float)) else [], tree)
    joined = tu.tree_reduce_associative(operator.add, numeric, identity=[],
                                        is_leaf=lambda x: isinstance(x, list) and
                                        all(isinstance(v, (int, float)) for v in x))
    strings = lib.tree.reduce_associative(operator.add, tu.tree_map(str, tree), identity="")
    return len(leaves), joined, strings


def _treedef_tuple(lib, tree):
    tu = lib.tree_util
    defs = [tu.tree_structure(tree), tu.tree_structure([1, None])]
    td = tu.treedef_tuple(defs)
    return td, td.num_leaves, tu.tree_unflatten(td, range(td.num_leaves)), tu.treedef_children(td)


@needs_jax
@pytest.mark.parametrize("i", range(N_TREES))
@pytest.mark.parametrize("program", [_paths, _path_functions, _is_leaf_variants, _one_level,
                                     _node_queries, _reductions, _treedef_tuple],
                         ids=lambda f: f.__name__)
def test_tree_util_matches_jax(program, i):
    _check(program, i)


def test_key_paths_name_every_kind_of_child():
    c = _CLASSES["nbjax"]
    tu = nbjax.tree_util
    tree = {"n": Point(1, [2]), "box": c.Box(3, 4), "named": c.Named(r=5), "layer": c.Layer(6, 7)}
    paths = {tu.keystr(p): x for p, x in tu.tree_leaves_with_path(tree)}
    assert paths == {"['box'][<flat index 0>]": 3, "['box'][<flat index 1>]": 4,
                     "['layer'].w": 6, "['layer'].b": 7, "['n'].x": 1, "['n'].y[0]": 2,
                     "['named'].r": 5}
    # The keys of each kind: their fields, equality and hashing (paths are dict keys).
    assert tu.DictKey("a").key == "a" and tu.SequenceKey(2).idx == 2
    assert tu.GetAttrKey("w").name == "w" and tu.FlattenedIndexKey(1).key == 1
    assert {tu.DictKey("a"): 1}[tu.DictKey("a")] == 1 and tu.SequenceKey(1) != tu.SequenceKey(2)
    # The leaves and treedef are those of tree_flatten.
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert treedef == tu.tree_structure(tree) and [x for _, x in pairs] == tu.tree_leaves(tree)


def test_register_pytree_with_keys_and_its_flatten_func():
    calls = []

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    def flatten(p):
        calls.append("plain")
        return (p.a, p.b), None
    nbjax.tree_util.register_pytree_with_keys(
        Pair, lambda p: (((nbjax.tree_util.GetAttrKey("a"), p.a),
                          (nbjax.tree_util.GetAttrKey("b"), p.b)), None),
        lambda _, c: Pair(*c), flatten)
    out = nbjax.tree_util.tree_map(lambda x: x + 1, Pair(1, 2))
    assert (out.a, out.b) == (2, 3) and calls == ["plain"]
    paths = nbjax.tree_util.tree_leaves_with_path(Pair(1, 2))
    assert [nbjax.tree_util.keystr(p) for p, _ in paths] == [".a", ".b"] and calls == ["plain"]


def test_tree_broadcast_matches_jax():
    def prog(lib):
        full = (0, {"a": 0, "b": [0, 0]}, (0, 0), None)
        return [lib.tree.broadcast((1, 2, 3, None), full),
                lib.tree_util.tree_broadcast([1, {"x": 2}], [[0, (0, 0)], {"x": {"y": 0}}]),
                lib.tree.broadcast(5, {"q": [0, 0]})]
    mine = prog(nbjax)
    assert mine[0] == (1, {"a": 2, "b": [2, 2]}, (3, 3), None)
    if jax is not None:
        assert mine == prog(jax)
    with pytest.raises(ValueError):
        nbjax.tree.broadcast([1, 2], [0])


def test_reduce_associative_needs_an_identity_for_no_leaves():
    with pytest.raises(TypeError, match="identity"):
        nbjax.tree.reduce_associative(operator.add, [None, ()])
    assert nbjax.tree.reduce_associative(operator.add, [], identity=0) == 0
    # Only the order of operands is kept, not the grouping: matrix products agree.
    mats = [np.random.default_rng(i).normal(size=(3, 3)) for i in range(5)]
    np.testing.assert_allclose(nbjax.tree.reduce_associative(operator.matmul, mats),
                               functools.reduce(operator.matmul, mats), rtol=1e-10)


def test_static_field_and_register_static_stay_in_the_treedef():
    c = _CLASSES["nbjax"]
    layer = c.Layer(w=jnp.ones(2), b=jnp.zeros(2))
    leaves, treedef = nbjax.tree.flatten(layer)
    assert len(leaves) == 2 and "('relu',)" in repr(treedef)
    assert nbjax.tree.leaves([c.Tag("x"), 1]) == [1]
    traced = nbjax.jit(lambda t, x: x * 2 if t[0].name == "x" else x)((c.Tag("x"),), 3.0)
    np.testing.assert_allclose(traced, 6.0)
    assert dataclasses.fields(c.Layer)[2].metadata["static"] is True


def _partial_program(lib):
    P = lib.tree_util.Partial
    p = P(lib.numpy.add, lib.numpy.ones(2, dtype=np.float32))
    f = lib.jit(lambda g, x: g(x))
    nested = P(P(max, 1), 2)
    kw = P(max, 1, key=None)
    return (np.asarray(f(p, 3.0)).tolist(), lib.tree_util.tree_flatten(nested),
            nested(), lib.tree_util.tree_flatten(kw), kw(5),
            lib.tree_util.tree_structure(P(max, 1)) == lib.tree_util.tree_structure(P(max, 2)),
            lib.tree_util.tree_flatten(P(functools.partial(max, 1), 2))[0])


def test_partial_is_a_pytree_usable_by_jit():
    mine = _partial_program(nbjax)
    assert mine[0] == [4.0, 4.0] and mine[2] == 2 and mine[4] == 5
    if jax is not None:
        theirs = _partial_program(jax)
        # JAX names its wrapper of a partial given as function differently.
        assert repr(mine).replace("_StaticPartial", "_HashableCallableShim") == repr(theirs)
    p = nbjax.tree_util.Partial(jnp.multiply, 2.0)
    out = nbjax.vmap(lambda g, x: g(x), in_axes=(None, 0))(p, jnp.arange(3.0))
    np.testing.assert_allclose(out, [0.0, 2.0, 4.0])
    assert isinstance(nbjax.tree.map(lambda x: x, p), nbjax.tree_util.Partial)


def test_namedtuple_treedef_prints_as_jax():
    mine = repr(nbjax.tree.structure(Point(1, [2])))
    assert mine == "PyTreeDef(CustomNode(namedtuple[Point], [*, [*]]))"
    if jax is not None:
        assert mine == repr(jax.tree.structure(Point(1, [2])))


def test_typed_prng_keys_are_leaves_to_users_as_in_jax():
    """A user's tree functions meet a typed key whole (JAX's keys are leaves of an extended
    dtype); jit, vmap and scan still trace its uint32 data."""
    keys = nbjax.random.split(nbjax.random.key(0), 3)
    state = {"keys": keys, "w": np.ones(2, np.float32)}
    leaves, treedef = nbjax.tree_util.tree_flatten(state)
    assert len(leaves) == 2 and leaves[0] is keys
    assert nbjax.tree_util.tree_unflatten(treedef, leaves)["keys"] is keys
    assert nbjax.tree.map(lambda x: x.shape, state) == {"keys": (3,), "w": (2,)}
    assert [p for p, _ in nbjax.tree_util.tree_leaves_with_path(state)] == [
        (nbjax.tree_util.DictKey("keys"),), (nbjax.tree_util.DictKey("w"),)]
    assert nbjax.tree_util.all_leaves([keys, 1.0])
    with pytest.raises(ValueError, match="can't tree-flatten"):
        nbjax.tree_util.flatten_one_level(keys)

    def step(state):
        key, sub = nbjax.random.split(state["keys"][0])
        return {"keys": nbjax.random.split(key, 3),
                "w": state["w"] + nbjax.random.normal(sub, (2,))}
    eager = step(state)
    jitted = nbjax.jit(step)(state)
    np.testing.assert_array_equal(np.asarray(jitted["w"]), np.asarray(eager["w"]))
    assert isinstance(jitted["keys"], type(keys))
    samples = nbjax.vmap(lambda k: nbjax.random.normal(k, ()))(keys)
    looped = [nbjax.random.normal(keys[i], ()) for i in range(3)]
    np.testing.assert_allclose(np.asarray(samples), np.asarray(looped), rtol=1e-6)

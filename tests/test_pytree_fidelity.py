"""OrderedDict and defaultdict as pytree nodes, and dict keys that do not sort, as in JAX.

JAX's rules: an ``OrderedDict`` is a node whose children are its values in insertion order
(its keys are not sorted); a ``defaultdict`` is a node whose children are its values in
sorted key order, with its ``default_factory`` kept in the treedef; both name their children
with ``DictKey``. A dict whose keys do not compare raises ValueError("Comparator raised
exception while sorting pytree dictionary keys."); a defaultdict's raises the TypeError of
``sorted`` (JAX flattens it in Python).
"""

import collections
import pickle

import numpy as np
import pytest

import nbjax
from nbjax import tree_util

OD = collections.OrderedDict


def test_ordered_dict_keeps_insertion_order():
    od = OD([("b", 1.0), ("a", 2.0)])
    leaves, treedef = tree_util.tree_flatten(od)
    assert leaves == [1.0, 2.0]
    assert repr(treedef) == "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))"
    rebuilt = tree_util.tree_unflatten(treedef, [3.0, 4.0])
    assert type(rebuilt) is OD and list(rebuilt.items()) == [("b", 3.0), ("a", 4.0)]
    assert tree_util.flatten_one_level(od)[1] == ("b", "a")


def test_ordered_dict_structure_depends_on_order_and_type():
    od = OD([("b", 1.0), ("a", 2.0)])
    assert tree_util.tree_structure(od) == tree_util.tree_structure(OD([("b", 0), ("a", 0)]))
    assert tree_util.tree_structure(od) != tree_util.tree_structure(OD([("a", 0), ("b", 0)]))
    assert tree_util.tree_structure(od) != tree_util.tree_structure({"b": 0, "a": 0})
    with pytest.raises(ValueError):
        tree_util.tree_map(lambda x, y: x + y, od, {"a": 1.0, "b": 2.0})


def test_defaultdict_sorts_keys_and_keeps_its_factory():
    dd = collections.defaultdict(list, {"b": 1.0, "a": 2.0})
    leaves, treedef = tree_util.tree_flatten(dd)
    assert leaves == [2.0, 1.0]
    assert repr(treedef) == (
        "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a', 'b'))], [*, *]))")
    doubled = tree_util.tree_map(lambda x: 2 * x, dd)
    assert type(doubled) is collections.defaultdict and doubled.default_factory is list
    assert dict(doubled) == {"a": 4.0, "b": 2.0}
    assert tree_util.tree_structure(dd) != tree_util.tree_structure(
        collections.defaultdict(dict, {"a": 0, "b": 0}))
    assert tree_util.tree_structure(dd) != tree_util.tree_structure({"a": 0, "b": 0})
    assert pickle.loads(pickle.dumps(treedef)) == treedef


def test_key_paths_are_dict_keys():
    tree = {"x": OD([("b", 1.0), ("a", 2.0)]), "y": [collections.defaultdict(int, {"c": 3.0})]}
    paths = [p for p, _ in tree_util.tree_flatten_with_path(tree)[0]]
    DK, SK = tree_util.DictKey, tree_util.SequenceKey
    assert paths == [(DK("x"), DK("b")), (DK("x"), DK("a")), (DK("y"), SK(0), DK("c"))]
    assert tree_util.tree_structure(tree).num_leaves == 3
    assert tree_util.tree_structure(tree).num_nodes == 7


def test_transformations_take_ordered_and_default_dicts():
    od = OD([("b", 3.0), ("a", 2.0)])
    assert float(nbjax.jit(lambda d: d["a"] * 2)(od)) == 4.0
    grads = nbjax.grad(lambda d: d["a"] * d["b"])(od)
    assert type(grads) is OD and list(grads) == ["b", "a"]
    np.testing.assert_allclose([grads["b"], grads["a"]], [2.0, 3.0])
    dd = collections.defaultdict(float, {"a": 2.0, "b": 3.0})
    grads = nbjax.grad(lambda d: d["a"] ** 2 + d["b"])(dd)
    assert type(grads) is collections.defaultdict and grads.default_factory is float
    np.testing.assert_allclose([grads["a"], grads["b"]], [4.0, 1.0])


def test_keys_that_do_not_sort():
    with pytest.raises(ValueError, match="Comparator raised exception while sorting pytree "
                                         "dictionary keys"):
        tree_util.tree_leaves({1: "x", "a": "y"})
    with pytest.raises(ValueError, match="Comparator raised exception"):
        tree_util.tree_flatten_with_path({1: "x", "a": "y"})
    with pytest.raises(TypeError, match="not supported between instances"):
        tree_util.tree_leaves(collections.defaultdict(int, {1: "x", "a": "y"}))
    assert tree_util.tree_leaves(OD([(1, "x"), ("a", "y")])) == ["x", "y"]

"""Pytrees: flatten/unflatten round trips, registration, maps and structure errors."""

import collections
import dataclasses
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, strategies as st

import nbjax
from nbjax import tree_util

Point = collections.namedtuple("Point", ["x", "y"])


@tree_util.register_pytree_node_class
class Box:
    def __init__(self, value, label):
        self.value, self.label = value, label

    def tree_flatten(self):
        return [self.value], self.label

    @classmethod
    def tree_unflatten(cls, label, children):
        return cls(children[0], label)

    def __repr__(self):
        return f"Box({self.value!r}, {self.label!r})"

    def __eq__(self, other):
        return isinstance(other, Box) and (self.value, self.label) == (other.value, other.label)


@tree_util.register_dataclass
@dataclasses.dataclass
class Params:
    w: object
    b: object
    name: str = dataclasses.field(default="layer", metadata=dict(static=True))


EXAMPLES = [
    1.0,
    (1, 2),
    [1, (2, 3), {"b": 4, "a": 5}],
    {"z": None, "y": [6, 7]},
    Point(1, [2, 3]),
    Box((1, 2), "lbl"),
    Params(w=[1, 2], b=3),
    (),
    [None, None],
]


@pytest.mark.parametrize("tree", EXAMPLES, ids=repr)
def test_round_trip(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    assert tree_util.tree_unflatten(treedef, leaves) == tree
    assert treedef.num_leaves == len(leaves)


def test_dict_leaves_in_sorted_key_order_and_none_is_empty():
    assert tree_util.tree_leaves({"b": 1, "a": 2, "c": None}) == [2, 1]
    assert tree_util.tree_leaves([None, 3]) == [3]


def test_structure_repr_and_equality():
    s = tree_util.tree_structure((1, {"a": 2, "b": [3, 4]}))
    assert repr(s) == "PyTreeDef((*, {'a': *, 'b': [*, *]}))"
    assert s == tree_util.tree_structure((5, {"b": [6, 7], "a": 8}))
    assert s != tree_util.tree_structure((5, {"a": 8, "b": (6, 7)}))


def test_tree_map_multiple_trees_and_is_leaf():
    out = nbjax.tree.map(lambda a, b: a + b, {"a": 1, "b": (2, 3)}, {"a": 10, "b": (20, 30)})
    assert out == {"a": 11, "b": (22, 33)}
    out = tree_util.tree_map(lambda p: p.x, [Point(1, 2), Point(3, 4)],
                             is_leaf=lambda n: isinstance(n, Point))
    assert out == [1, 3]
    with pytest.raises(ValueError):
        tree_util.tree_map(lambda a, b: a, (1, 2), [1, 2])


def test_registered_dataclass_keeps_static_fields():
    p = Params(w=1, b=2, name="dense")
    leaves, treedef = tree_util.tree_flatten(p)
    assert leaves == [1, 2]
    assert tree_util.tree_unflatten(treedef, [5, 6]) == Params(5, 6, "dense")


def test_register_dataclass_with_explicit_and_dropped_fields_and_jaxs_errors():
    def fresh():
        @dataclasses.dataclass
        class Layer:
            w: object
            size: int = 3
            cache: object = None
        return Layer

    Layer = tree_util.register_dataclass(fresh(), ["w"], ["size"], drop_fields=["cache"])
    leaves, treedef = tree_util.tree_flatten(Layer(w=[1.0, 2.0], size=4, cache="kept?"))
    assert leaves == [1.0, 2.0]
    assert tree_util.tree_unflatten(treedef, [7, 8]) == Layer(w=[7, 8], size=4, cache=None)
    with pytest.raises(TypeError, match="must both be specified"):
        tree_util.register_dataclass(fresh(), data_fields=["w"])
    with pytest.raises(ValueError, match="Missing fields: {'cache'}"):
        tree_util.register_dataclass(fresh(), ["w"], ["size"])
    with pytest.raises(ValueError, match="must not overlap"):
        tree_util.register_dataclass(fresh(), ["w", "size"], ["size"], drop_fields=["cache"])
    with pytest.raises(TypeError, match="required when nodetype is not a dataclass"):
        tree_util.register_dataclass(Point)


def test_unflatten_wrong_leaf_count():
    treedef = tree_util.tree_structure((1, 2))
    with pytest.raises(ValueError, match="Too few leaves"):
        treedef.unflatten([1])


def test_duplicate_registration_rejected():
    with pytest.raises(ValueError, match="Duplicate"):
        tree_util.register_pytree_node(tuple, lambda t: (t, None), lambda a, c: c)


def test_transpose_and_reduce():
    outer = tree_util.tree_structure([0, 0])
    inner = tree_util.tree_structure({"a": 0, "b": 0})
    t = tree_util.tree_transpose(outer, inner, [{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    assert t == {"a": [1, 3], "b": [2, 4]}
    assert tree_util.tree_reduce(lambda a, b: a + b, [1, (2, 3)]) == 6
    assert nbjax.tree.all([True, (True,)]) and not nbjax.tree.all([True, False])


trees = st.recursive(
    st.integers(),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.tuples(kids, kids),
        st.dictionaries(st.text("abc", min_size=1, max_size=2), kids, max_size=3)),
    max_leaves=12)


@given(trees)
def test_round_trip_property(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    assert tree_util.tree_unflatten(treedef, leaves) == tree
    assert tree_util.tree_map(lambda x: x, tree) == tree


def test_namedtuple_with_its_own_len_and_iter_flattens_by_its_fields():
    """A NamedTuple may give its users another ``len``/``iter`` (scipy's ``Rotation``: the
    number of rotations); flattening and rebuilding it (around vmap's placeholders too)
    never calls them."""
    class Pair(NamedTuple):
        a: object
        b: object

        def __len__(self):
            raise ValueError("not for pytree code")

        def __iter__(self):
            raise ValueError("not for pytree code")

    pair = Pair(np.float32(1.0), np.arange(3, dtype=np.float32))
    leaves, tree = tree_util.tree_flatten(pair)
    assert [np.shape(x) for x in leaves] == [(), (3,)]
    out = nbjax.vmap(lambda p: Pair(p.a * 2, p.b + 1))(Pair(np.ones(2, np.float32),
                                                          np.zeros((2, 3), np.float32)))
    np.testing.assert_array_equal(tuple.__getitem__(out, 1), np.ones((2, 3)))
    paths = [tree_util.keystr(k) for k, _ in tree_util.tree_flatten_with_path(pair)[0]]
    assert paths == [".a", ".b"]

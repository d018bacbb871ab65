"""Pytrees: nested containers whose leaves are arrays.

Containers (tuple, list, dict with sorted keys, None, namedtuples, and registered classes)
flatten to a list of leaves and a ``PyTreeDef`` that rebuilds them.
"""

import dataclasses
from collections import namedtuple

_NodeType = namedtuple("_NodeType", ["to_iterable", "from_iterable"])
_registry = {}


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """Register ``nodetype``: ``flatten_func(x) -> (children, aux)``,
    ``unflatten_func(aux, children) -> x``."""
    if nodetype in _registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    _registry[nodetype] = _NodeType(flatten_func, unflatten_func)
    return nodetype


def register_pytree_node_class(cls):
    """Class decorator: ``cls.tree_flatten()`` and ``cls.tree_unflatten(aux, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(cls=None, data_fields=None, meta_fields=None):
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` static aux data.

    Without explicit lists, fields marked ``field(metadata=dict(static=True))`` are meta and
    the others data, as in JAX.
    """
    def register(cls):
        fields = [f for f in dataclasses.fields(cls) if f.init]
        data = data_fields
        meta = meta_fields
        if data is None:
            meta = [f.name for f in fields if f.metadata.get("static", False)]
            data = [f.name for f in fields if f.name not in meta]
        data, meta = list(data), list(meta or [])

        def flatten(x):
            return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

        def unflatten(aux, children):
            return cls(**dict(zip(data, children)), **dict(zip(meta, aux)))
        register_pytree_node(cls, flatten, unflatten)
        return cls
    return register if cls is None else register(cls)


def _dict_flatten(d):
    keys = tuple(sorted(d))
    return [d[k] for k in keys], keys


register_pytree_node(tuple, lambda t: (list(t), None), lambda _, c: tuple(c))
register_pytree_node(list, lambda l: (list(l), None), lambda _, c: list(c))
register_pytree_node(dict, _dict_flatten, lambda keys, c: dict(zip(keys, c)))
register_pytree_node(type(None), lambda _: ([], None), lambda _, c: None)


def _node_type(x):
    t = type(x)
    if t in _registry:
        return _registry[t]
    if issubclass(t, tuple) and hasattr(t, "_fields"):  # namedtuple
        return _NodeType(lambda nt: (list(nt), None), lambda _, c, t=t: t(*c))
    return None


class PyTreeDef:
    """The structure of a pytree: a node's type, its static data and its children's defs."""

    __slots__ = ("node_class", "node_data", "children_defs", "num_leaves", "_unflatten")

    def __init__(self, node_class, node_data, children_defs, unflatten=None):
        self.node_class = node_class  # None for a leaf
        self.node_data = node_data
        self.children_defs = tuple(children_defs)
        self._unflatten = unflatten
        self.num_leaves = 1 if node_class is None else sum(c.num_leaves for c in children_defs)

    @property
    def num_nodes(self):
        return 1 + sum(c.num_nodes for c in self.children_defs)

    def children(self):
        return list(self.children_defs)

    def is_leaf(self):
        return self.node_class is None

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"Too {'few' if len(leaves) < self.num_leaves else 'many'} leaves "
                             f"for PyTreeDef; expected {self.num_leaves}, got {len(leaves)}.")
        return self._build(iter(leaves))

    def _build(self, it):
        if self.node_class is None:
            return next(it)
        return self._unflatten(self.node_data, [c._build(it) for c in self.children_defs])

    def flatten_up_to(self, tree):
        """The subtrees of ``tree`` at this def's leaves; ValueError if ``tree`` doesn't match."""
        out = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, tree, out):
        if self.node_class is None:
            out.append(tree)
            return
        node = _node_type(tree)
        if type(tree) is not self.node_class or node is None:
            raise ValueError(f"Expected {self.node_class.__name__}, got {tree!r}.")
        children, data = node.to_iterable(tree)
        if data != self.node_data or len(children) != len(self.children_defs):
            raise ValueError(f"Mismatch custom node data: {data!r} != {self.node_data!r}; "
                             f"value: {tree!r}.")
        for c, d in zip(children, self.children_defs):
            d._flatten_up_to(c, out)

    def __eq__(self, other):
        return (isinstance(other, PyTreeDef) and self.node_class is other.node_class
                and self.node_data == other.node_data
                and self.children_defs == other.children_defs)

    def __hash__(self):
        # Unhashable aux data is left out: equal trees still hash equal.
        data = self.node_data if _hashable(self.node_data) else None
        return hash((self.node_class, data, self.children_defs))

    def _str(self):
        if self.node_class is None:
            return "*"
        kids = [c._str() for c in self.children_defs]
        if self.node_class is tuple:
            return f"({kids[0]},)" if len(kids) == 1 else f"({', '.join(kids)})"
        if self.node_class is list:
            return f"[{', '.join(kids)}]"
        if self.node_class is dict:
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.node_data, kids)) + "}"
        if self.node_class is type(None):
            return "None"
        return f"CustomNode({self.node_class.__name__}[{self.node_data!r}], [{', '.join(kids)}])"

    def __repr__(self):
        return f"PyTreeDef({self._str()})"


def _hashable(x):
    try:
        hash(x)
        return True
    except TypeError:
        return False


LEAF = PyTreeDef(None, None, ())


def tree_flatten(tree, is_leaf=None):
    """``(leaves, treedef)``; ``is_leaf(x)`` may stop the descent at chosen subtrees."""
    leaves = []
    return leaves, _flatten(tree, is_leaf, leaves)


def _flatten(x, is_leaf, leaves):
    node = None if (is_leaf is not None and is_leaf(x)) else _node_type(x)
    if node is None:
        leaves.append(x)
        return LEAF
    children, data = node.to_iterable(x)
    defs = [_flatten(c, is_leaf, leaves) for c in children]
    return PyTreeDef(type(x), data, defs, node.from_iterable)


def tree_unflatten(treedef, leaves):
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f, tree, *rest, is_leaf=None):
    """Apply ``f`` leaf-wise; ``rest`` trees must have ``tree``'s structure (or extend it)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(*xs) for xs in zip(leaves, *others))


def treedef_is_leaf(treedef):
    return treedef.is_leaf()


def treedef_children(treedef):
    return treedef.children()


def tree_reduce(function, tree, initializer=None, is_leaf=None):
    import functools
    leaves = tree_leaves(tree, is_leaf)
    if initializer is None:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree):
    return all(tree_leaves(tree))


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Turn a tree of trees inside out (outer structure ↔ inner structure)."""
    flat = outer_treedef.flatten_up_to(pytree_to_transpose)
    inner = [inner_treedef.flatten_up_to(x) for x in flat]
    columns = [outer_treedef.unflatten(col) for col in zip(*inner)] if inner else []
    return inner_treedef.unflatten(columns)

"""``nbjax.tree_util``: flatten, rebuild and map over pytrees (as ``jax.tree_util``).

These are ``core.pytree``'s functions as users see them: a typed PRNG key is a leaf, as in
JAX (``core.pytree.register_leaf_to_users``), where nbjax's transformations open it.
"""

import functools

from .core import pytree
from .core.pytree import (DictKey, FlattenedIndexKey, GetAttrKey, KeyEntry,  # noqa: F401
                          KeyPath, PyTreeDef, SequenceKey, is_tree_node, keystr,
                          register_dataclass, register_pytree_node, register_pytree_node_class,
                          register_pytree_with_keys, register_pytree_with_keys_class,
                          register_static, tree_transpose, tree_unflatten, treedef_children,
                          treedef_is_leaf, treedef_tuple, users_is_leaf,
                          users_is_leaf_with_path)


def tree_flatten(tree, is_leaf=None):
    """``(leaves, treedef)``; ``is_leaf(x)`` may stop the descent at chosen subtrees."""
    return pytree.tree_flatten(tree, users_is_leaf(is_leaf))


def tree_leaves(tree, is_leaf=None):
    return pytree.tree_leaves(tree, users_is_leaf(is_leaf))


def tree_structure(tree, is_leaf=None):
    return pytree.tree_structure(tree, users_is_leaf(is_leaf))


def tree_map(f, tree, *rest, is_leaf=None):
    """Apply ``f`` leaf-wise; ``rest`` trees must have ``tree``'s structure (or extend it)."""
    return pytree.tree_map(f, tree, *rest, is_leaf=users_is_leaf(is_leaf))


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """``([(key_path, leaf)...], treedef)``: the leaves with the keys that reach them."""
    return pytree.tree_flatten_with_path(
        tree, users_is_leaf_with_path(is_leaf, is_leaf_takes_path), is_leaf_takes_path=True)


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """``f(key_path, leaf, *other_leaves)`` leaf-wise, as ``tree_map`` with the key paths."""
    return pytree.tree_map_with_path(
        f, tree, *rest, is_leaf=users_is_leaf_with_path(is_leaf, is_leaf_takes_path),
        is_leaf_takes_path=True)


def tree_reduce(function, tree, initializer=None, is_leaf=None):
    return pytree.tree_reduce(function, tree, initializer, users_is_leaf(is_leaf))


def tree_reduce_associative(operation, tree, *, identity=pytree._NO_IDENTITY, is_leaf=None):
    return pytree.tree_reduce_associative(operation, tree, identity=identity,
                                          is_leaf=users_is_leaf(is_leaf))


def tree_all(tree, *, is_leaf=None):
    return pytree.tree_all(tree, is_leaf=users_is_leaf(is_leaf))


def all_leaves(iterable, is_leaf=None):
    """Whether every element of ``iterable`` is a leaf (``None``, a node, is not)."""
    return pytree.all_leaves(iterable, users_is_leaf(is_leaf))


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """``full_tree``'s structure with each leaf of ``prefix_tree`` repeated over the subtree
    of ``full_tree`` it stands for."""
    return pytree.tree_broadcast(prefix_tree, full_tree, users_is_leaf(is_leaf))


def flatten_one_level(tree):
    """``(children, aux)`` of the node ``tree``; ValueError if it is a leaf."""
    return pytree.flatten_one_level(_node(tree))


def flatten_one_level_with_keys(tree):
    """``(((key, child), ...), aux)`` of the node ``tree``; ValueError if it is a leaf."""
    return pytree.flatten_one_level_with_keys(_node(tree))


def _node(tree):
    if pytree.leaf_to_users(tree):
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return tree


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: its bound arguments are the children, the
    function is static (in the treedef), so it can be passed to (and returned from) ``jit``,
    ``vmap``... and its arrays are traced like any other argument.

    A partial given as the function stays whole, as static data: its own bound arguments
    are not children (``functools.partial`` alone would merge them in).
    """

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            func = _StaticPartial(func)
        return super().__new__(cls, func, *args, **kwargs)


class _StaticPartial:
    """A partial used as a Partial's function: callable, compared and hashed as it is."""

    def __init__(self, partial):
        self.partial = partial

    def __call__(self, *args, **kwargs):
        return self.partial(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, _StaticPartial) and self.partial == other.partial

    def __hash__(self):
        return hash(self.partial)

    def __repr__(self):
        return f"_StaticPartial({self.partial!r})"


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: Partial(func, *children[0], **children[1]))

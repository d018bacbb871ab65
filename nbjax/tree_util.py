"""``nbjax.tree_util``: flatten, rebuild and map over pytrees (as ``jax.tree_util``)."""

import functools

from .core.pytree import (DictKey, FlattenedIndexKey, GetAttrKey, KeyEntry,  # noqa: F401
                          KeyPath, PyTreeDef, SequenceKey, all_leaves, flatten_one_level,
                          flatten_one_level_with_keys, is_tree_node, keystr,
                          register_dataclass, register_pytree_node, register_pytree_node_class,
                          register_pytree_with_keys, register_pytree_with_keys_class,
                          register_static, tree_all, tree_broadcast, tree_flatten,
                          tree_flatten_with_path, tree_leaves, tree_leaves_with_path, tree_map,
                          tree_map_with_path, tree_reduce, tree_reduce_associative,
                          tree_structure, tree_transpose, tree_unflatten, treedef_children,
                          treedef_is_leaf, treedef_tuple)


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

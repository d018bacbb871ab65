"""``nbjax.tree_util``: flatten, rebuild and map over pytrees (as ``jax.tree_util``)."""

from .core.pytree import (PyTreeDef, register_dataclass, register_pytree_node,  # noqa: F401
                          register_pytree_node_class, tree_all, tree_flatten, tree_leaves,
                          tree_map, tree_reduce, tree_structure, tree_transpose,
                          tree_unflatten, treedef_children, treedef_is_leaf)

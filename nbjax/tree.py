"""``nbjax.tree``: the short names (``nbjax.tree.map``), as ``jax.tree``."""

from .core.pytree import tree_all as all  # noqa: F401
from .core.pytree import tree_flatten as flatten  # noqa: F401
from .core.pytree import tree_leaves as leaves  # noqa: F401
from .core.pytree import tree_map as map  # noqa: F401
from .core.pytree import tree_reduce as reduce  # noqa: F401
from .core.pytree import tree_structure as structure  # noqa: F401
from .core.pytree import tree_transpose as transpose  # noqa: F401
from .core.pytree import tree_unflatten as unflatten  # noqa: F401

"""Pytrees: nested containers whose leaves are arrays.

Containers (tuple, list, dict with sorted keys, OrderedDict, defaultdict, None, namedtuples,
and registered classes) flatten to a list of leaves and a ``PyTreeDef`` that rebuilds them.
Each child is reached by a *key* (``DictKey``, ``SequenceKey``, ``GetAttrKey``, or
``FlattenedIndexKey`` for classes registered without keys); the keys from the root to a leaf
are its *key path*, which the ``*_with_path`` functions report.
"""

import collections
import dataclasses
import functools
import typing

# ``to_keyed(x) -> ([(key, child)...], aux)``, or None: the children's keys are then their
# flat indices (``FlattenedIndexKey``).
_NodeType = collections.namedtuple("_NodeType", ["to_iterable", "from_iterable", "to_keyed"],
                       defaults=[None])
_registry = {}
_leaves_to_users = set()  # node types the public API sees as leaves (``register_leaf_to_users``)


@dataclasses.dataclass(frozen=True)
class DictKey:
    """The key of a dict entry: ``['a']`` in a key path."""
    key: typing.Hashable

    def __str__(self):
        return f"[{self.key!r}]"

    def _simple(self):
        return str(self.key)


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The index of a list or tuple element: ``[0]``."""
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def _simple(self):
        return str(self.idx)


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """An attribute (namedtuple field, dataclass field): ``.name``."""
    name: str

    def __str__(self):
        return f".{self.name}"

    def _simple(self):
        return str(self.name)


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The position of a child among those a node registered without keys flattens to."""
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"

    def _simple(self):
        return str(self.key)


KeyEntry = typing.TypeVar("KeyEntry", bound=typing.Hashable)
KeyPath = tuple[KeyEntry, ...]


def keystr(keys, *, simple=False, separator=""):
    """The key path ``keys`` as a string: ``['a'][0].b``, or with ``simple=True`` the bare
    keys (``a/0/b`` with ``separator='/'``; ambiguous, but short). Other objects print as
    ``str`` prints them."""
    def entry(k):
        return k._simple() if simple and hasattr(k, "_simple") else str(k)
    return separator.join(entry(k) for k in keys)


def register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func=None):
    """Register ``nodetype``: ``flatten_func(x) -> (children, aux)``,
    ``unflatten_func(aux, children) -> x``; ``flatten_with_keys_func(x) -> (((key, child),
    ...), aux)`` names the children in key paths (their flat index if not given)."""
    if nodetype in _registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    _registry[nodetype] = _NodeType(flatten_func, unflatten_func, flatten_with_keys_func)
    return nodetype


def register_pytree_node_class(cls):
    """Class decorator: ``cls.tree_flatten()`` and ``cls.tree_unflatten(aux, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """Register ``nodetype`` with keyed children: ``flatten_with_keys(x) -> (((key, child),
    ...), aux)``. ``flatten_func`` (the same without keys) is derived if not given; give it
    when it is faster."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    return register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_with_keys_class(cls):
    """Class decorator: ``cls.tree_flatten_with_keys()``, ``cls.tree_unflatten(aux,
    children)`` and optionally ``cls.tree_flatten()``."""
    flatten = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              None if flatten is None else (lambda x: x.tree_flatten()))
    return cls


def register_leaf_to_users(nodetype, flatten_func, unflatten_func):
    """Register ``nodetype`` as a node of nbjax's own flattening (what transformations
    trace: its children) that ``nbjax.tree_util`` and ``nbjax.tree`` treat as a leaf.

    For typed PRNG keys: JAX's are arrays of an extended dtype, leaves of every pytree;
    nbjax's wrap their uint32 data, which jit, vmap and grad trace as ordinary arrays, while
    a user's ``tree_map`` or ``tree_leaves`` still meets the key whole."""
    register_pytree_node(nodetype, flatten_func, unflatten_func)
    _leaves_to_users.add(nodetype)
    return nodetype


def leaf_to_users(x):
    """Whether ``x`` is a leaf to users though a node here (``register_leaf_to_users``)."""
    return type(x) in _leaves_to_users


def users_is_leaf(is_leaf):
    """The ``is_leaf(x)`` that the public functions pass on: the user's (or None), or-ed
    with ``leaf_to_users``."""
    if is_leaf is None:
        return leaf_to_users
    return lambda x: leaf_to_users(x) or is_leaf(x)


def users_is_leaf_with_path(is_leaf, is_leaf_takes_path):
    """The same for the ``*_with_path`` functions, as ``is_leaf(path, x)``."""
    if is_leaf is None:
        return lambda _, x: leaf_to_users(x)
    if is_leaf_takes_path:
        return lambda path, x: leaf_to_users(x) or is_leaf(path, x)
    return lambda _, x: leaf_to_users(x) or is_leaf(x)


def register_static(cls):
    """Register ``cls`` as a pytree node with no children: its instances (which must be
    hashable) are kept whole in the treedef, as static data under ``jit``."""
    register_pytree_node(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def static(**kwargs):
    """``dataclasses.field(**kwargs)`` marked ``static``: a field ``register_dataclass``
    keeps in the treedef rather than as a child (``jax.tree.static``)."""
    metadata = dict(kwargs.pop("metadata", None) or {}, static=True)
    return dataclasses.field(metadata=metadata, **kwargs)


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a class whose constructor takes its fields by keyword: ``data_fields`` are
    children, ``meta_fields`` static aux data (``nodetype`` None: a decorator).

    Without the lists (give both or neither) ``nodetype`` must be a dataclass: fields marked
    ``field(metadata=dict(static=True))`` are meta and the others data, as in JAX. For a
    dataclass the lists must name every field its ``__init__`` takes, except ``drop_fields``
    (left to their defaults when a tree is rebuilt).
    """
    def register(cls):
        data, meta = _dataclass_fields(cls, data_fields, meta_fields, drop_fields)

        def flatten_with_keys(x):
            return ([(GetAttrKey(n), getattr(x, n)) for n in data],
                    tuple(getattr(x, n) for n in meta))

        def unflatten(aux, children):
            return cls(**dict(zip(data, children)), **dict(zip(meta, aux)))
        register_pytree_with_keys(cls, flatten_with_keys, unflatten)
        return cls
    return register if nodetype is None else register(nodetype)


def _dataclass_fields(cls, data, meta, drop):
    """``(data fields, meta fields)`` of ``register_dataclass``, checked as JAX checks them."""
    if data is None or meta is None:
        if (data is None) != (meta is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be "
                            f"specified when either is specified. Got data_fields={data} "
                            f"meta_fields={meta}.")
        if not dataclasses.is_dataclass(cls):
            raise TypeError("register_dataclass: data_fields and meta_fields are required "
                            f"when nodetype is not a dataclass. Got nodetype={cls}.")
        fields = dataclasses.fields(cls)
        meta = [f.name for f in fields if f.metadata.get("static", False)]
        data = [f.name for f in fields if not f.metadata.get("static", False)]
    data, meta = list(data), list(meta)
    if dataclasses.is_dataclass(cls):
        init = {f.name for f in dataclasses.fields(cls) if f.init} - set(drop)
        missing, unexpected = init - {*data, *meta}, {*data, *meta} - init
        if missing or unexpected:
            message = ("data_fields and meta_fields must include all dataclass fields with "
                       "``init=True`` and only them.")
            if missing:
                message += (f" Missing fields: {missing}. Add them to drop_fields to "
                            "suppress this error.")
            if unexpected:
                message += f" Unexpected fields: {unexpected}."
            raise ValueError(message)
    if set(data) & set(meta):
        raise ValueError("data_fields and meta_fields must not overlap. Overlapping fields: "
                         f"{set(data) & set(meta)}.")
    return data, meta


def _sorted_keys(d):
    return tuple(sorted(d))


def _dict_keys(d):
    """A dict's keys, sorted. Keys that do not compare raise ValueError, as JAX's C++
    flattening of a dict does (a defaultdict, which JAX flattens in Python, raises the
    TypeError of ``sorted`` itself)."""
    try:
        return _sorted_keys(d)
    except TypeError as e:
        raise ValueError("Comparator raised exception while sorting pytree dictionary "
                         "keys.") from e


def _register_mapping(cls, keys_of, aux_of, from_aux):
    """Register the dict type ``cls``: its children are its values in the order of
    ``keys_of(d)``, reached by ``DictKey``; its aux data is ``aux_of(d, keys)``, from which
    ``from_aux(aux, children)`` rebuilds it."""
    def flatten(d):
        keys = keys_of(d)
        return [d[k] for k in keys], aux_of(d, keys)

    def flatten_with_keys(d):
        keys = keys_of(d)
        return [(DictKey(k), d[k]) for k in keys], aux_of(d, keys)
    register_pytree_node(cls, flatten, from_aux, flatten_with_keys)


def _sequence_with_keys(s):
    return [(SequenceKey(i), c) for i, c in enumerate(s)], None


register_pytree_node(tuple, lambda t: (list(t), None), lambda _, c: tuple(c),
                     _sequence_with_keys)
register_pytree_node(list, lambda l: (list(l), None), lambda _, c: list(c), _sequence_with_keys)
# As in JAX: a dict's keys are sorted, an OrderedDict's kept in insertion order, and a
# defaultdict's sorted, with its ``default_factory`` kept in the aux data.
_register_mapping(dict, _dict_keys, lambda d, keys: keys, lambda keys, c: dict(zip(keys, c)))
_register_mapping(collections.OrderedDict, tuple, lambda d, keys: keys,
                  lambda keys, c: collections.OrderedDict(zip(keys, c)))
_register_mapping(collections.defaultdict, _sorted_keys,
                  lambda d, keys: (d.default_factory, keys),
                  lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)))
register_pytree_node(type(None), lambda _: ([], None), lambda _, c: None, lambda _: ([], None))


def _node_type(x):
    return _node_type_of_class(type(x))


@functools.lru_cache(maxsize=None)
def _namedtuple_node(t):
    # (its fields by tuple's own iterator: a class may define ``__len__`` or ``__iter__``
    # for its users, which pytree code rebuilding it around placeholders must not call)
    return _NodeType(lambda nt: (list(tuple.__iter__(nt)), None), lambda _, c: t(*c),
                     lambda nt: ([(GetAttrKey(f), c) for f, c in
                                  zip(t._fields, tuple.__iter__(nt))], None))


def _node_type_of_class(t):
    if t in _registry:
        return _registry[t]
    if issubclass(t, tuple) and hasattr(t, "_fields"):  # namedtuple
        return _namedtuple_node(t)
    return None


def is_tree_node(typ):
    """Whether instances of the type ``typ`` are pytree nodes (registered, or namedtuples)."""
    return _node_type_of_class(typ) is not None


def _keyed_children(node, x):
    """``(keys, children, aux)`` of the node ``x``."""
    if node.to_keyed is None:
        children, aux = node.to_iterable(x)
        children = list(children)
        return [FlattenedIndexKey(i) for i in range(len(children))], children, aux
    pairs, aux = node.to_keyed(x)
    pairs = list(pairs)
    return [k for k, _ in pairs], [c for _, c in pairs], aux


def flatten_one_level(tree):
    """``(children, aux)`` of the node ``tree``; ValueError if it is a leaf."""
    children, aux = _one_level(tree).to_iterable(tree)
    return tuple(children), aux


def flatten_one_level_with_keys(tree):
    """``(((key, child), ...), aux)`` of the node ``tree``; ValueError if it is a leaf."""
    keys, children, aux = _keyed_children(_one_level(tree), tree)
    return tuple(zip(keys, children)), aux


def _one_level(tree):
    node = _node_type(tree)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return node


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

    def __reduce__(self):
        """Pickled by its node's class, whose unflatten function (often a lambda, which
        does not pickle) the registry gives back when it is unpickled."""
        return _treedef_of, (self.node_class, self.node_data, self.children_defs)

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
        if self.node_class not in _registry:  # a namedtuple
            return f"CustomNode(namedtuple[{self.node_class.__name__}], [{', '.join(kids)}])"
        return f"CustomNode({self.node_class.__name__}[{self.node_data}], [{', '.join(kids)}])"

    def __repr__(self):
        return f"PyTreeDef({self._str()})"


def _hashable(x):
    try:
        hash(x)
        return True
    except TypeError:
        return False


LEAF = PyTreeDef(None, None, ())


def _treedef_of(node_class, node_data, children_defs):
    """The PyTreeDef of a node of ``node_class`` (None: a leaf), as registered now."""
    if node_class is None:
        return LEAF
    node = _node_type_of_class(node_class)
    if node is None:
        raise ValueError(f"unpickling a PyTreeDef: {node_class!r} is not a pytree node type")
    return PyTreeDef(node_class, node_data, children_defs, node.from_iterable)
_NO_IDENTITY = object()


def tree_flatten(tree, is_leaf=None):
    """``(leaves, treedef)``; ``is_leaf(x)`` may stop the descent at chosen subtrees."""
    leaves = []
    stop = None if is_leaf is None else (lambda _, x: is_leaf(x))
    return leaves, _flatten(tree, stop, leaves, None)


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """``([(key_path, leaf)...], treedef)``: the leaves with the keys that reach them.
    ``is_leaf(x)`` (``is_leaf(path, x)`` with ``is_leaf_takes_path``) may stop the descent."""
    leaves = []
    stop = is_leaf
    if is_leaf is not None and not is_leaf_takes_path:
        stop = lambda _, x: is_leaf(x)  # noqa: E731
    return leaves, _flatten(tree, stop, leaves, ())


def _flatten(x, stop, leaves, path):
    """The treedef of ``x``; appends its leaves to ``leaves``, as ``(path, leaf)`` pairs when
    ``path`` (the keys that reach ``x``) is not None."""
    node = None if (stop is not None and stop(path, x)) else _node_type(x)
    if node is None:
        leaves.append(x if path is None else (path, x))
        return LEAF
    if path is None:
        children, data = node.to_iterable(x)
        children = list(children)
        paths = [None] * len(children)
    else:
        keys, children, data = _keyed_children(node, x)
        paths = [path + (k,) for k in keys]
    defs = [_flatten(c, stop, leaves, p) for c, p in zip(children, paths)]
    return PyTreeDef(type(x), data, defs, node.from_iterable)


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """The ``(key_path, leaf)`` pairs of ``tree``, in flattening order."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """``f(key_path, leaf, *other_leaves)`` leaf-wise, as ``tree_map`` with the key paths."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(*pair, *xs) for pair, *xs in zip(pairs, *others))


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
    leaves = tree_leaves(tree, is_leaf)
    if initializer is None:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation, tree, *, identity=_NO_IDENTITY, is_leaf=None):
    """Reduce the leaves with the associative ``operation``, pairing neighbours level by
    level (a tree of depth log n, the operands kept in order); ``identity`` is the result
    for a tree without leaves (TypeError if it has none and none is given)."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_IDENTITY:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    while len(leaves) > 1:
        pairs = [operation(a, b) for a, b in zip(leaves[::2], leaves[1::2])]
        leaves = pairs + leaves[len(pairs) * 2:]
    return leaves[0]


def tree_all(tree, *, is_leaf=None):
    return all(tree_leaves(tree, is_leaf))


def all_leaves(iterable, is_leaf=None):
    """Whether every element of ``iterable`` is a leaf (``None``, a node, is not)."""
    items = list(iterable)
    return tree_structure(items, is_leaf) == tree_structure([0] * len(items))


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """``full_tree``'s structure with each leaf of ``prefix_tree`` (a prefix of it) repeated
    over the subtree of ``full_tree`` it stands for."""
    leaves, treedef = tree_flatten(prefix_tree, is_leaf)
    subtrees = treedef.flatten_up_to(full_tree)
    return treedef.unflatten(tree_map(lambda _, v=v: v, sub, is_leaf=is_leaf)
                             for v, sub in zip(leaves, subtrees))


def treedef_tuple(treedefs):
    """The treedef of a tuple whose children have the structures ``treedefs``."""
    return PyTreeDef(tuple, None, list(treedefs), _registry[tuple].from_iterable)


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Turn a tree of trees inside out (outer structure ↔ inner structure)."""
    flat = outer_treedef.flatten_up_to(pytree_to_transpose)
    inner = [inner_treedef.flatten_up_to(x) for x in flat]
    columns = [outer_treedef.unflatten(col) for col in zip(*inner)] if inner else []
    return inner_treedef.unflatten(columns)

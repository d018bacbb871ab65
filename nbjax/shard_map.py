"""``shard_map``: a function run once per position of a mesh, each time on its own blocks.

Each input is cut into blocks along the dimensions its ``PartitionSpec`` splits over mesh
axes; the function runs on every mesh position's blocks with the mesh axis names bound (so
``psum(x, "x")``, ``all_gather``, ``ppermute``, ``axis_index`` work over them); each output
is put back together from its blocks as its out spec says, in mesh order.

A call is one ``shard_map`` equation holding the jaxpr of ONE position (on block shapes),
the mesh, the manual axes and a spec per operand and result, as in JAX. It is a call
primitive (``nbjax.calls``): JVP differentiates the body, partial evaluation splits it into
a known and an unknown shard_map passing residuals split over every mesh axis, and vmap
adds an unsplit leading dimension. Transposition is the one rule that leaves the
primitive: it transposes the shard_map's expansion (below), because a body transposed per
position misses the sums over positions that JAX's types insert (``transpose``).

To run, a shard_map is vmap: the blocks of an input are brought to leading dimensions, one
per mesh axis, and the body is evaluated under one ``BatchTrace`` per mesh axis, named after
it, so collectives are their batch rules (``_expand``). That is both the reference
implementation and the decomposition the compiler inlines, so a jitted shard_map compiles
like any vmap. An nbjax array lives whole on one device: the blocks are computed, not
placed on the mesh's devices.

Where a value may differ between positions is what vmap batches: an output whose out spec
leaves out a mesh axis must be the same at every position along it, which JAX checks on
the body's types (``check_vma``) and nbjax by batching the body along that axis
(``_varying_axes``).
"""

import contextlib
import functools
import math

import numpy as np

from .calls import CallRules, FlatCall, Traced, as_array, flatten_axes
from .core import Primitive, eval_closed_jaxpr, get_aval, new_trace, pytree
from .interpreters import ad, batching, staging
from .interpreters.transpose import is_undefined, transposed_call
from .lax import batch_util
from .lax.parallel import AxisFrame, extend_axis_env
from .lax.shapes import reshape, transpose
from .lax.structural import index_in_dim
from .sharding import AxisType, DuplicateSpecError, Mesh, PartitionSpec, get_mesh

__all__ = ["shard_map", "shard_map_p"]

shard_map_p = Primitive("shard_map", multiple_results=True)


# --- specs and blocks ----------------------------------------------------------------------

def _dims(spec):
    """The mesh axes each dimension of a value is split over, from its PartitionSpec: ()
    for a dimension that every block holds whole."""
    return tuple(() if e is None else e if isinstance(e, tuple) else (e,) for e in spec)


def _spec_axes(spec):
    return {name for names in _dims(spec) for name in names}


def _blocks_per_dim(rank, spec, sizes):
    """For each dimension of a value of ``rank``, how many blocks it is cut into."""
    dims = _dims(spec)
    return [math.prod(sizes[n] for n in dims[d]) if d < len(dims) else 1 for d in range(rank)]


def _block_aval(aval, spec, sizes):
    counts = _blocks_per_dim(aval.ndim, spec, sizes)
    return aval.update(shape=tuple(n // c for n, c in zip(aval.shape, counts)))


def _global_aval(aval, spec, sizes):
    counts = _blocks_per_dim(aval.ndim, spec, sizes)
    return aval.update(shape=tuple(n * c for n, c in zip(aval.shape, counts)))


def _layout(block_shape, spec, axes, sizes):
    """A value's blocks laid out: its shape with each split dimension opened into (the
    sizes of its mesh axes..., the block's size), and the permutation of that shape which
    brings the mesh axes first, in mesh order, followed by the block's dimensions."""
    dims = _dims(spec) + ((),) * (len(block_shape) - len(spec))
    opened, labels = [], []
    for d, names in enumerate(dims):
        opened += [sizes[n] for n in names] + [block_shape[d]]
        labels += [("axis", n) for n in names] + [("dim", d)]
    order = [("axis", n) for n in axes if ("axis", n) in labels]
    order += [("dim", d) for d in range(len(block_shape))]
    return opened, [labels.index(label) for label in order]


def _split(x, spec, axes, sizes):
    """``x`` with its blocks stacked: one leading dimension per mesh axis of ``spec`` (in mesh
    order), then the block's dimensions."""
    block = _block_aval(get_aval(x), spec, sizes).shape
    opened, perm = _layout(block, spec, axes, sizes)
    return _transposed(reshape(x, tuple(opened)), perm)


def _merge(x, spec, axes, sizes):
    """The inverse of ``_split``: the value whose blocks ``x`` stacks."""
    aval = get_aval(x)
    leading = len(_spec_axes(spec))
    block = aval.update(shape=aval.shape[leading:])
    _, perm = _layout(block.shape, spec, axes, sizes)
    stacked = _transposed(x, list(np.argsort(perm)))
    return reshape(stacked, _global_aval(block, spec, sizes).shape)


def _transposed(x, perm):
    return x if perm == sorted(perm) else transpose(x, tuple(int(p) for p in perm))


# --- running it: one BatchTrace per mesh axis ----------------------------------------------

def _expand(*args, jaxpr, mesh, manual_axes, in_specs, out_specs, check_vma):
    """shard_map as vmap: split the operands into stacked blocks, evaluate the body at every
    mesh position, and merge the outputs' blocks."""
    sizes = mesh.shape
    blocks = [_split(as_array(x), spec, manual_axes, sizes) for x, spec in zip(args, in_specs)]
    outs = _per_position(jaxpr, manual_axes, sizes, blocks, [_spec_axes(s) for s in in_specs],
                         [_spec_axes(s) for s in out_specs])
    return [_merge(o, spec, manual_axes, sizes) for o, spec in zip(outs, out_specs)]


def _per_position(closed, axes, sizes, args, in_axes, out_axes):
    """The body at every position along ``axes``: each argument has a leading dimension per
    axis of ``in_axes`` (in the order of ``axes``), each output gets one per axis of
    ``out_axes``. Along an axis an output's spec leaves out, its value must not vary, or
    (with check_vma=False, as JAX) the first position's is taken."""
    if not axes:
        return [as_array(out) for out in eval_closed_jaxpr(closed, *args)]
    axis = batching.AxisData(axes[0], sizes[axes[0]])
    make = functools.partial(batching.BatchTrace, axis_data=axis,
                             description=f"shard_map axis {axis.name}")
    with new_trace(make) as trace:
        tracers = [trace.wrap(x, 0 if axis.name in names else None)
                   for x, names in zip(args, in_axes)]
        outs = [trace.unpack(out) for out in
                _per_position(closed, axes[1:], sizes, tracers, in_axes, out_axes)]
    return [_along_axis(val, dim, axis.size, axis.name in names)
            for (val, dim), names in zip(outs, out_axes)]


def _along_axis(val, dim, size, split):
    """An output's values at the positions of one mesh axis (``val``, batched at ``dim``): all
    of them in a leading dimension if its spec splits along the axis, else its one value
    (the first position's if it varies, which only check_vma=False lets through)."""
    if split:
        return batch_util.bdim_at(val, dim, 0, size)
    return val if dim is None else index_in_dim(val, 0, dim, keepdims=False)


@shard_map_p.def_impl
def _shard_map_impl(*args, **params):
    return [np.asarray(out) for out in _expand(*args, **params)]


shard_map_p.def_lowering("jaxpr", _expand)


@shard_map_p.def_abstract_eval
def _shard_map_abstract_eval(*avals, jaxpr, mesh, manual_axes, in_specs, out_specs, check_vma):
    sizes = mesh.shape
    for i, (aval, spec, block) in enumerate(zip(avals, in_specs, jaxpr.in_avals)):
        if _global_aval(block, spec, sizes).shape != aval.shape:
            raise TypeError(f"shard_map operand {i} of type {aval.str_short()} is not made of "
                            f"the {block.str_short()} blocks its body takes, split as {spec}")
    return [_global_aval(a, spec, sizes) for a, spec in zip(jaxpr.out_avals, out_specs)]


@contextlib.contextmanager
def _axes_bound(axes, sizes):
    """The mesh axes bound by name and size while a body is traced, so that collectives
    know them: pmap's axis environment, with no position (a trace has none)."""
    with contextlib.ExitStack() as stack:
        for name in axes:
            stack.enter_context(extend_axis_env(AxisFrame(name, sizes[name])))
        yield


def _varying_axes(closed, in_specs, axes, sizes):
    """For each output of ``closed``, the axes among ``axes`` along which it may differ
    between mesh positions: those along which vmap batches it when every input split
    along an axis is batched along it (what JAX's types call varying)."""
    varying = [set() for _ in closed.out_avals]
    for name in axes:
        in_batched = [name in _spec_axes(spec) for spec in in_specs]
        _, out_batched = batch_util.batch_jaxpr(
            closed, batching.AxisData(name, sizes[name]), in_batched, False)
        for names, batched in zip(varying, out_batched):
            if batched:
                names.add(name)
    return varying


# --- the rules -----------------------------------------------------------------------------

def _whole_first(spec):
    """The spec of a value with a new leading dimension that is not split (vmap's)."""
    return PartitionSpec(None, *spec)


class _ShardMapRules(CallRules):
    """A call's rules with the operands' and results' specs as their axes, and the mesh axes
    bound while the body is retraced."""

    transpose_name = "transpose of shard_map"

    def axes(self, params):
        return params["in_specs"], params["out_specs"]

    def rebuild(self, params, callee, in_specs, out_specs):
        return dict(params, jaxpr=callee, in_specs=in_specs, out_specs=out_specs)

    def tracing(self, params):
        return _axes_bound(params["manual_axes"], params["mesh"].shape)

    def batch(self, axis_data, vals, dims, **params):
        """The batch axis becomes a leading dimension every block holds whole, as JAX's."""
        operands = [x if d is None else batch_util.bdim_at(x, d, 0, axis_data.size)
                    for x, d in zip(vals, dims)]
        in_specs = tuple(s if d is None else _whole_first(s)
                         for s, d in zip(params["in_specs"], dims))
        with self.tracing(params):
            body, out_batched = batch_util.batch_jaxpr(
                params["jaxpr"], axis_data, [d is not None for d in dims], False)
        out_specs = tuple(_whole_first(s) if b else s
                          for s, b in zip(params["out_specs"], out_batched))
        outs = shard_map_p.bind(*operands, **self.rebuild(params, body, in_specs, out_specs))
        return outs, [0 if b else None for b in out_batched]

    def split(self, params, unknowns):
        """Residuals pass from the known shard_map to the unknown one as each position's own
        values: split over every mesh axis along their first dimension (a scalar gets one
        of size 1 for that, as in JAX)."""
        known, unknown, out_unknowns, res_axes = super().split(params, unknowns)
        num_res = len(res_axes)
        scalars = [a.ndim == 0 for a in known.out_avals[len(known.out_avals) - num_res:]]
        if any(scalars):
            known, unknown = _promote_scalar_residuals(known, unknown, scalars)
        res_spec = PartitionSpec(tuple(params["manual_axes"]))
        return known, unknown, out_unknowns, (res_spec,) * num_res

    def transpose(self, cts, *args, **params):
        """The transpose of the shard_map's expansion (vmap), not a backward shard_map: where
        the body used a value that is the same at every position (replicated) together with
        values that vary, that value's cotangent is a sum over the positions, which a
        backward pass run per position would not make (JAX's types mark those places, nbjax
        has no such types)."""
        linear = [is_undefined(a) for a in args]
        avals = [a.aval if lin else get_aval(a) for a, lin in zip(args, linear)]
        expanded = staging.trace_to_closed_jaxpr(functools.partial(_expand, **params), avals,
                                                 self.transpose_name)
        nonlinear = [a for a, lin in zip(args, linear) if not lin]
        cts_in = iter(transposed_call(expanded, linear)(*nonlinear, *map(ad.instantiate, cts)))
        return [next(cts_in) if lin else None for lin in linear]


def _promote_scalar_residuals(known, unknown, scalars):
    """The known body giving each scalar residual a dimension of size 1, and the unknown
    one taking it back off."""
    num_res = len(scalars)
    num_out = len(known.out_avals) - num_res

    def known_fun(*args):
        outs = eval_closed_jaxpr(known, *args)
        return outs[:num_out] + [reshape(as_array(r), (1,)) if s else r
                                 for r, s in zip(outs[num_out:], scalars)]

    def unknown_fun(*args):
        res = [reshape(r, ()) if s else r for r, s in zip(args[:num_res], scalars)]
        return eval_closed_jaxpr(unknown, *res, *args[num_res:])

    res_avals = [a.update(shape=(1,)) if s else a
                 for a, s in zip(unknown.in_avals[:num_res], scalars)]
    return (staging.trace_to_closed_jaxpr(known_fun, known.in_avals, "shard_map residuals"),
            staging.trace_to_closed_jaxpr(unknown_fun, res_avals + list(unknown.in_avals[
                num_res:]), "shard_map residuals"))


_ShardMapRules(shard_map_p).register("batch", "jvp", "partial_eval", "transpose")


# --- the front end -------------------------------------------------------------------------

class _InferFromArgs:
    """in_specs' default: the specs of the arguments' layouts (for nbjax arrays, replicated),
    which JAX reads only on a mesh of Explicit axes."""

    def __repr__(self):
        return "jax.sharding.Infer"


Infer = _InferFromArgs()


def shard_map(f=None, /, *, out_specs, in_specs=Infer, mesh=None, axis_names=frozenset(),
              check_vma=True):
    """Run ``f`` once per position of ``mesh`` (default: the mesh of ``set_mesh``), each time
    on the blocks of the arguments that ``in_specs`` (PartitionSpecs, a pytree prefix of the
    positional arguments) cut them into, with the mesh axis names bound for collectives;
    each output is put back together from the blocks as ``out_specs`` says, as
    ``jax.shard_map``. ``axis_names``: the mesh axes to map over (default: all); an output
    spec that leaves out an axis its value varies along is an error unless ``check_vma`` is
    False. Usable as a decorator: ``@shard_map(mesh=..., in_specs=..., out_specs=...)``.
    """
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    if not callable(f):
        raise TypeError("shard_map requires a callable for its first argument, but got "
                        f"{f} of type {type(f)}.")

    @functools.wraps(f)
    def sharded(*args):
        return _shard_map_call(f, args, out_specs, in_specs, mesh, axis_names, check_vma)
    return sharded


def _shard_map_call(f, args, out_specs, in_specs, mesh, axis_names, check_vma):
    mesh = _the_mesh(mesh)
    axes, sizes = _manual_axes(mesh, axis_names), mesh.shape
    name = getattr(f, "__name__", type(f).__name__)
    call = FlatCall(f, args, {})
    leaves = [as_array(x) for x in call.leaves]
    arg_paths, arg_tree = pytree.tree_flatten_with_path(args)
    flat_in = _flat_specs("in_specs", _given_in_specs(in_specs, mesh, axes), arg_tree, axes)
    paths = [f"args{pytree.keystr(path)}" for path, _ in arg_paths]
    block_avals = [_checked_block(get_aval(x), spec, sizes, mesh, name, what)
                   for x, spec, what in zip(leaves, flat_in, paths)]
    with _axes_bound(axes, sizes):
        traced = Traced(call, block_avals, staging.describe(f, "shard_map"))
        flat_out = _flat_specs("out_specs", out_specs, traced.out_tree, axes)
        for aval, spec in zip(traced.jaxpr.out_avals, flat_out):
            _check_out_rank(aval, spec, name)
        in_specs_all = (PartitionSpec(),) * len(traced.consts) + tuple(flat_in)
        if check_vma:
            _check_replicated(traced.jaxpr, in_specs_all, flat_out, axes, mesh, name)
    outs = shard_map_p.bind(*traced.consts, *leaves, jaxpr=traced.jaxpr, mesh=mesh,
                            manual_axes=axes, in_specs=in_specs_all, out_specs=tuple(flat_out),
                            check_vma=check_vma)
    return traced.out_tree.unflatten(outs)


def _the_mesh(mesh):
    if mesh is None:
        mesh = get_mesh()
        if mesh.empty:
            raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                             "enter into a mesh context")
    if not isinstance(mesh, Mesh):
        raise TypeError("shard_map requires a `jax.sharding.Mesh` or a "
                        "`jax.sharding.AbstractMesh` instance for its second argument, but "
                        f"got {mesh} of type {type(mesh)}.")
    return mesh


def _manual_axes(mesh, axis_names):
    """The mesh axes shard_map maps over, in mesh order: ``axis_names``, or all of them (the
    others the body does not see: its blocks are whole along them)."""
    names = frozenset(axis_names) or frozenset(mesh.axis_names)
    if not names <= frozenset(mesh.axis_names):
        raise ValueError(f"jax.shard_map requires axis_names={frozenset(axis_names)} to be a "
                         f"subset of mesh.axis_names={frozenset(mesh.axis_names)}")
    if len(set(mesh.axis_names)) != len(mesh.axis_names):
        raise DuplicateSpecError(f"the mesh's axis names {mesh.axis_names} are not unique")
    return tuple(n for n in mesh.axis_names if n in names)


def _given_in_specs(in_specs, mesh, axes):
    """in_specs as given, or inferred from the arguments as JAX does on a mesh of Explicit
    axes: an nbjax array is whole, so replicated (P())."""
    if in_specs is not Infer:
        return in_specs
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    auto = [a for a in axes if types[a] is not AxisType.Explicit]
    if auto:
        raise TypeError("shard_map in_specs argument must be a pytree of "
                        "`jax.sharding.PartitionSpec` instances, but it was `None` when "
                        f"axis_names={frozenset(auto)} are of type AxisType.Auto")
    return PartitionSpec()


def _flat_specs(what, specs, tree, axes):
    """One PartitionSpec per leaf of ``tree`` from ``specs`` (a pytree prefix of it, None for
    P()), each checked against the manual axes, with JAX's errors."""
    for path, spec in pytree.tree_flatten_with_path(specs, is_leaf=lambda x: x is None)[0]:
        if spec is not None and not isinstance(spec, PartitionSpec):
            raise TypeError(f"shard_map {what} argument must be a pytree of "
                            "`jax.sharding.PartitionSpec` instances, but:\n\n  "
                            f"{what}{pytree.keystr(path)} is {spec} of type "
                            f"{type(spec).__name__}, \n\nCheck the {what} values passed to "
                            "shard_map.")
        _check_names(what, spec or PartitionSpec(), axes)
    flat = flatten_axes(f"shard_map {what}", tree, specs, tree.num_leaves)
    return [PartitionSpec() if spec is None else spec for spec in flat]


def _check_names(what, spec, axes):
    names = [n for names in _dims(spec) for n in names]
    for n in names:
        if n not in axes:
            raise ValueError(f"shard_map {what} argument must refer to an axis marked as "
                             f"manual ({frozenset(axes)}), but:\n\n  {what} refers to {n!r}\n\n"
                             f"Check the {what} values passed to shard_map.")
    for n in names:
        if names.count(n) > 1:
            raise DuplicateSpecError(
                "A single NamedSharding spec specification can map every mesh axis to at "
                f"most one positional dimension, but {spec} has duplicate entries for `{n}`")


def _checked_block(aval, spec, sizes, mesh, name, what):
    """The block of an argument of type ``aval``: JAX's errors for a spec longer than its
    rank, and for a dimension its mesh axes do not divide evenly."""
    if len(spec) > aval.ndim:
        raise ValueError(
            f"shard_map applied to the function '{name}' was given an in_specs entry which is "
            f"too long to be compatible with the corresponding input value from the function:"
            f"\n\nin_specs is {spec} which has length {len(spec)}, but the passed {what} has "
            f"shape {aval.str_short()}, which has rank {aval.ndim} (and {aval.ndim} < "
            f"{len(spec)})\n\nEntries in in_specs must be of length no greater than the "
            "number of axes in the corresponding input value.")
    for d, (size, count) in enumerate(zip(aval.shape, _blocks_per_dim(aval.ndim, spec,
                                                                         sizes))):
        if size % count:
            names = _dims(spec)[d]
            raise ValueError(
                f"shard_map applied to the function '{name}' was given argument arrays with "
                "axis sizes that are not evenly divisible by the corresponding mesh axis "
                f"sizes:\n\nThe mesh given has shape {mesh.axis_sizes} with corresponding axis "
                f"names {mesh.axis_names}.\n\nthe passed {what} of shape {aval.str_short()} "
                f"corresponds to in_specs of value {spec}, which maps array axis {d} (of size "
                f"{size}) to mesh axes {names} (of total size {count}), but {count} does not "
                f"evenly divide {size}")
    return _block_aval(aval, spec, sizes)


def _check_out_rank(aval, spec, name):
    if len(spec) > aval.ndim:
        raise ValueError(
            f"shard_map applied to the function '{name}' was given an out_specs entry which "
            "is too long to be compatible with the corresponding output value from the "
            f"function:\n\nout_specs is {spec} which has length {len(spec)}, but {name}(*args) "
            f"has shape {aval.str_short()}, which has rank {aval.ndim} (and {aval.ndim} < "
            f"{len(spec)})\n\nEntries in out_specs must be of length no greater than the "
            "number of axes in the corresponding output value. For scalar values (rank 0), "
            "consider using an out_specs entry of `P()`.")


def _check_replicated(closed, in_specs, out_specs, axes, mesh, name):
    """JAX's check_vma error for an output whose spec leaves out a mesh axis along which it
    varies (its blocks would differ, and only one would be returned)."""
    omitted = [a for a in axes if any(a not in _spec_axes(s) for s in out_specs)]
    if not omitted:
        return
    varying = _varying_axes(closed, in_specs, omitted, mesh.shape)
    for spec, names in zip(out_specs, varying):
        bad = [a for a in omitted if a in names and a not in _spec_axes(spec)]
        if bad:
            raise ValueError(
                f"shard_map applied to the function '{name}' was given out_specs which require "
                "replication which can't be statically inferred given the mesh:\n\nThe mesh "
                f"given has shape {mesh.axis_sizes} with corresponding axis names "
                f"{mesh.axis_names}.\n\nout_specs is {spec} which implies that the "
                "corresponding output value is replicated across mesh axes "
                f"{', '.join(map(repr, bad))}, but it varies along them\n\nCheck if these "
                "output values are meant to be replicated over those mesh axes. If not, "
                "consider revising the corresponding out_specs entries. If so, consider "
                "disabling the check by passing the check_vma=False argument to "
                "`jax.shard_map`.")

"""vmap's trace: a BatchTracer is a value with one extra axis, the batch dimension.

Each primitive's ``batch`` rule takes ``(axis_data, vals, dims, **params)`` where ``dims[i]``
is the batch axis of ``vals[i]`` (None: the operand is the same for every batch member) and
returns ``(out, out_dim)`` (lists for primitives with several results). Rules run with the
parent trace current, so they compute by binding primitives on the underlying values.
"""

from dataclasses import dataclass

from ..core import Trace, Tracer, get_aval, set_current_trace
from ..core.abstract import ShapedArray


@dataclass(frozen=True)
class AxisData:
    """The mapped axis of one vmap: its name (for collectives) and size."""
    name: object
    size: int


class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim")

    def __init__(self, trace, val, batch_dim):
        super().__init__(trace)
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        aval = get_aval(self.val)
        if self.batch_dim is None:
            return aval
        shape = aval.shape[:self.batch_dim] + aval.shape[self.batch_dim + 1:]
        return ShapedArray(shape, aval.dtype, aval.weak_type)

    def __repr__(self):
        return f"VmapTracer(aval={self.aval}, batched={get_aval(self.val)})"


# Primitives whose batch rule must run even when no operand is batched, because they refer
# to a named axis (psum, axis_index, ...). lax/parallel.py registers them.
axis_primitives = set()


class BatchTrace(Trace):
    def __init__(self, parent, axis_data, description="vmap"):
        super().__init__(parent, description)
        self.axis_data = axis_data

    def unpack(self, x):
        """``(value, batch_dim)`` of an operand; values from outside this vmap are unbatched."""
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.batch_dim
        return x, None

    def process_primitive(self, primitive, args, params):
        vals, dims = zip(*map(self.unpack, args)) if args else ((), ())
        with set_current_trace(self.parent):
            if all(d is None for d in dims) and primitive not in axis_primitives:
                return primitive.bind(*vals, **params)
            out, out_dims = primitive.rule("batch")(self.axis_data, vals, dims, **params)
        if primitive.multiple_results:
            return [self.wrap(o, d) for o, d in zip(out, out_dims)]
        return self.wrap(out, out_dims)

    def wrap(self, val, dim):
        return val if dim is None else BatchTracer(self, val, dim)

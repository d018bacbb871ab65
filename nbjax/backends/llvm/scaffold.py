"""What differs between LLVM targets around a kernel's body, and the function it lives in.

Every LLVM target emits a ``LoopKernel`` as one function

    void <name>(T0* noalias out0, ..., U0* noalias in0, ..., <the target's own arguments>)

(``define_kernel``) whose body the shared ``KernelEmitter`` computes. An input the kernel
updates in place (``LoopKernel.in_place``) is read through its output's pointer, so the
``noalias`` promise holds: its own pointer is passed but never used. A ``KernelScaffold``
supplies the rest:

- ``math``: how transcendental functions are computed (``mathnames.MathNames``);
- ``address_space``: where the buffers live (0; global memory on a GPU is 1);
- ``extra_args``: the arguments after the buffers (the CPU's loop bounds ``start, stop``);
- ``emit``: how the iteration space is covered and each point finds its index (a loop nest
  on the CPU; a thread's ids on a GPU), and how outputs are delivered: reductions
  (``KernelEmitter.store_output`` or the target's own accumulators) and any store policy
  (the CPU's streaming stores).

``for_loop``, ``entry_alloca`` and ``alias_scopes`` are the building blocks that scaffolds
and other generated functions (the CPU's control flow) share.
"""

from llvmlite import ir

from .emitter import KernelEmitter
from .mathnames import LIBM
from .types import I1, I8, I32, I64, declare, mem_type


class KernelScaffold:
    """Subclass per target (one instance per kernel); see the module docstring."""

    math = LIBM
    address_space = 0
    extra_args = ()

    def emit(self, emitter, args):
        """Emit the iteration over ``emitter.kernel``'s index space at ``emitter.b``'s
        position, computing the body with ``emitter`` (a ``KernelEmitter``); ``args`` are
        the function's ``extra_args``."""
        raise NotImplementedError


def define_kernel(module, kernel, scaffold):
    """Add ``kernel`` to ``module`` as the function above, its iteration emitted by
    ``scaffold``; returns the ``ir.Function``."""
    buffers = [mem_type(o.acc_dtype or o.var.aval.dtype) for o in kernel.outputs] \
        + [mem_type(v.aval.dtype) for v in kernel.inputs]
    pointers = [t.as_pointer(scaffold.address_space) for t in buffers]
    fnty = ir.FunctionType(ir.VoidType(), pointers + list(scaffold.extra_args))
    fn = ir.Function(module, fnty, name=kernel.name)
    n_out, n_buffers = len(kernel.outputs), len(buffers)
    for arg in fn.args[:n_buffers]:
        arg.add_attribute("noalias")
    ins = list(fn.args[n_out:n_buffers])
    for j, k in kernel.in_place.items():  # read through the output's pointer: one buffer
        ins[j] = fn.args[k]
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    emitter = KernelEmitter(builder, kernel, fn.args[:n_out], ins, scaffold.math)
    scaffold.emit(emitter, fn.args[n_buffers:])
    builder.ret_void()
    return fn


def for_loop(builder, lo, hi, emit, name, step=1):
    """``for (i = lo; i < hi; i += step) emit(i)`` at ``builder`` (i64 bounds; ``step`` an
    int or an i64 value); returns the loop's back edge, the branch that ``llvm.loop``
    metadata (vectoriser hints) goes on."""
    b = builder
    pre = b.block
    header = b.append_basic_block(name)
    body = b.append_basic_block(name + ".body")
    done = b.append_basic_block(name + ".done")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name=name)
    i.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", i, hi), body, done)
    b.position_at_end(body)
    emit(i)
    nxt = b.add(i, step if isinstance(step, ir.Value) else ir.Constant(I64, step),
                name=name + ".next")
    i.add_incoming(nxt, b.block)
    back = b.branch(header)
    b.position_at_end(done)
    return back


def entry_alloca(builder, element, count, align):
    """A pointer to a stack buffer of ``count`` ``element``s aligned to ``align`` bytes,
    allocated once, in the function's entry block (so a loop around the use does not grow
    the stack)."""
    b = builder
    here = b.block
    b.position_at_start(b.function.entry_basic_block)
    buf = b.alloca(ir.ArrayType(element, count))
    buf.align = align
    pointer = b.bitcast(buf, element.as_pointer())
    b.position_at_end(here)
    return pointer


def pointer_array(builder, setup, pointers):
    """An ``i8**`` array holding ``pointers`` (cast to ``i8*``, stored by ``builder``), on
    the stack of the function whose entry block ``setup`` builds in."""
    i8p = I8.as_pointer()
    array = setup.alloca(ir.ArrayType(i8p, len(pointers)))
    for k, pointer in enumerate(pointers):
        builder.store(builder.bitcast(pointer, i8p),
                      builder.gep(array, [ir.Constant(I32, 0), ir.Constant(I32, k)]))
    return builder.bitcast(array, i8p.as_pointer())


def memset(builder, pointer, byte, nbytes):
    """Set ``nbytes`` (an int or an i64) bytes from ``pointer`` (an ``i8*``) to ``byte``:
    ``llvm.memset``, which the code generator turns into stores or a call of ``memset``."""
    fn = declare(builder.module, "llvm.memset.p0.i64", ir.VoidType(),
                 [I8.as_pointer(), I8, I64, I1])
    size = nbytes if isinstance(nbytes, ir.Value) else ir.Constant(I64, nbytes)
    builder.call(fn, [pointer, ir.Constant(I8, byte), size, ir.Constant(I1, 0)])


def alias_scopes(module, names):
    """{name: the metadata (``ScalarEmitter.load``'s ``scope``) of accesses to the buffer
    ``name``}: LLVM's alias scopes, one per buffer of ``names``, saying that an access to
    one of them never touches another's memory. A function that reads its buffers through
    pointers loaded from an array (the CPU's control flow) cannot mark them ``noalias``;
    without this, a store to one buffer keeps LLVM from moving or vectorising the loads of
    another around it. (Domains and scopes are named by strings unique in the module: a
    node naming itself would do, but llvmlite hashes nodes by their operands.)"""
    def unique(what):
        return ir.MetaDataString(module, f"nbjax.{what}.{len(module.metadata)}")
    domain = module.add_metadata([unique("domain")])
    scopes = {name: module.add_metadata([unique(name), domain]) for name in names}
    return {name: {"alias.scope": module.add_metadata([scope]),
                   "noalias": module.add_metadata([s for n, s in scopes.items() if n != name])}
            for name, scope in scopes.items()}


def release_module(module):
    """Break the reference cycles of ``module``, which nothing may use afterwards: each
    instruction refers to its block, each block to its function, each function to the
    module, a loop's phi to the value it feeds, and back. Its objects are then freed as its
    last reference goes rather than by Python's cyclic garbage collector, whose collection
    after a first call went through them all: 13-40 ms after compiling a CNN step, 3-4 ms
    once the module is released."""
    for value in list(module.globals.values()):
        for block in getattr(value, "blocks", ()):
            for instruction in block.instructions:
                instruction.__dict__.clear()
            block.__dict__.clear()
        for argument in getattr(value, "args", ()):
            argument.__dict__.clear()
        value.__dict__.clear()
    for node in module.metadata:
        node.__dict__.clear()
    module.__dict__.clear()

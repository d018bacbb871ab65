"""What compiled kernels run on: LLVM engines, aligned buffers, and a thread for big loops.

- ``JitModule``: one LLVM module, optimised and turned into object code in parts by the
  optimiser processes (``optimiser``, ``partition``; in this process when that fails) or
  found in the disk cache, and linked into memory by ``object_loader`` (or, for what that
  does not handle, by its own MCJIT engine and target machine: an engine owns and frees its
  target machine, so they are never shared).
- ``BufferPool``: 64-byte-aligned output buffers (vector stores need it, and NumPy only
  guarantees 16), reused once nothing refers to them any more, so steady-state calls do not
  pay page faults; large ones are anonymous mappings with transparent huge pages.
- ``run_split``: a large loop runs its outer axis in one chunk per core, on worker threads.
  ctypes releases the GIL during the calls, so the chunks run at once; a reduction over
  that axis accumulates each chunk into a private buffer, combined at the end.
"""

import ctypes
import functools
import math
import mmap
import os
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import llvmlite.binding as llvm
from llvmlite import ir

from . import cache, object_loader, optimiser, partition, pipeline, support, workers
from .target import cpu_target, runs_here

_init_lock = threading.Lock()
_initialised = False


def _initialise():
    global _initialised
    with _init_lock:
        if not _initialised:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            support.register()
            _initialised = True


def _target_machine(opt=3):
    _initialise()
    return pipeline.target_machine(*cpu_target(), opt)


_PLAIN_LOOP = """
define void @plain(float* noalias %out, float* noalias %in, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %p = getelementptr float, float* %in, i64 %i
  %x = load float, float* %p
  %y = fmul float %x, %x
  %q = getelementptr float, float* %out, i64 %i
  store float %y, float* %q
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


@functools.lru_cache(maxsize=None)
def _float32_lanes(target):
    tm = _target_machine()
    module = pipeline.parse(_PLAIN_LOOP, tm)
    pipeline.optimise(module, tm)
    return max([int(n) for n in re.findall(r"<(\d+) x float>", str(module))], default=1)


def float32_lanes():
    """The number of float32 lanes LLVM's vectoriser gives a plain loop on the target (8 on
    AVX2 and on AVX-512 CPUs that prefer 256-bit vectors, 4 with SSE only): the width that
    loops computing in float64 internally are asked for (see ``codegen``)."""
    return _float32_lanes(cpu_target())


class JitModule:
    """LLVM IR text -> optimised parts -> machine code, with the time of each phase; the
    functions of ``light`` ({name: tier}) are compiled by their light tier (``pipeline``).

    The disk cache's entry is named by the IR text, or by ``made_from`` when given: a
    description of everything the module is made from (as a library function's name and
    the settings that shape its code), ``ir_text`` then a function making the text, called
    only when the entry is missing."""

    def __init__(self, ir_text, timer, light=None, made_from=None):
        self.target = cpu_target()
        self.runs_here = runs_here()
        with timer("disk_cache"):  # a hit: optimised IR, machine code, no passes
            lookup = cache.Lookup(ir_text if made_from is None else made_from, light)
        self.from_disk_cache = lookup.hit
        if not lookup.hit:
            if made_from is not None:
                ir_text = ir_text()
            with timer("llvm_optimise"):     # and code generation, in the optimiser processes
                made = _optimisers.compile_module(ir_text, *self.target, light)
                if made is None:             # they could not do it: in this process
                    optimised, code = pipeline.compile_module(ir_text, *self.target)
                    made = [optimised], [code]
            lookup.supply(*made)
        start_pool()  # (native code may hand kernels to it)
        with timer("machine_code"):
            self.code = load_objects(lookup.objects)
        self._optimised_ir, self._read_ir = "\n".join(lookup.optimised_texts), None
        self._definitions = None
        # (kept until the program's disk cache entry takes it: ``take_object_code``)
        self.object_code = lookup.done()

    @classmethod
    def of_object_code(cls, object_code, externals, read_ir):
        """The module whose machine code is ``object_code`` (``cache.pack_objects``, from the
        disk cache of whole programs), loaded as it is, its optimised IR ``read_ir()`` when
        first asked for; None if this process lacks one of the symbols it calls
        (``externals``), which LLVM would abort the process over."""
        code = load_objects(cache.unpack_objects(object_code), externals)
        if code is None:
            return None
        start_pool()
        self = cls.__new__(cls)
        self.target, self.runs_here, self.from_disk_cache = cpu_target(), runs_here(), True
        self._optimised_ir, self._read_ir = None, read_ir
        self.object_code, self._definitions, self.code = None, None, code
        return self

    @property
    def optimised_ir(self):
        """The module's optimised IR text (reports, and tests, read it)."""
        if self._optimised_ir is None:
            self._optimised_ir = self._read_ir()
        return self._optimised_ir

    def take_object_code(self):
        code, self.object_code = self.object_code, None
        return code

    def function(self, name, n_pointers, bounds=True, status=False):
        """A ctypes function for kernel ``name``; it takes the buffer addresses as ints and
        (with ``bounds``) the outer loop's start and stop, and returns an int ``status``
        (control flow: 1 when interrupted) or nothing."""
        if not self.runs_here:
            return functools.partial(_refuse_to_run, self.target[0])
        address = self.code.get_function_address(name)
        proto = ctypes.CFUNCTYPE(ctypes.c_int32 if status else None,
                                 *[ctypes.c_void_p] * n_pointers,
                                 *[ctypes.c_int64] * (2 if bounds else 0))
        return proto(address)

    def chunk(self, name):
        """The address of kernel ``name``'s ``chunk_function`` (0 where it cannot run)."""
        return self.address(name + "_chunk")

    def entry(self, name, how):
        """The builtin function calling function ``name`` through the entry ``how`` (a
        ``python_entry.KernelEntry`` or ``FlowEntry``)."""
        if not self.runs_here:
            return functools.partial(_refuse_to_run, self.target[0])
        return how.builtin(self.code.get_function_address(name))

    def address(self, name):
        """The address of function ``name`` (0 where its code cannot run)."""
        return self.code.get_function_address(name) if self.runs_here else 0

    def function_ir(self, name):
        """The optimised IR of function ``name``, from the part that defines it (read from
        the text: parsing it into LLVM again took 10 ms of a transformer's first call)."""
        if self._definitions is None:
            self._definitions = partition.definitions(self.optimised_ir or "")
        if name not in self._definitions:
            raise NameError(f"no function {name!r} in the module")
        return self._definitions[name]


def load_objects(objects, externals=()):
    """The object files ``objects`` in memory, the calls between them linked (something
    with ``get_function_address(name)``): by ``object_loader``, else by an MCJIT engine;
    None if the loader declines and a symbol of ``externals`` (those the objects call) is
    missing from this process, which MCJIT would abort the process over. The objects are
    compiled already: all an engine's target machine (which it owns) compiles is the empty
    module an engine starts from, so it is the triple's generic CPU at level 0."""
    _initialise()  # (the support module's symbols, which the objects call)
    loaded = object_loader.load(objects, llvm.address_of_symbol)
    if loaded is not None:
        return loaded
    if not all(llvm.address_of_symbol(name) for name in externals):
        return None
    tm = pipeline.target_machine("", "", opt=0)
    engine = llvm.create_mcjit_compiler(pipeline.parse("", tm), tm)
    for code in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(code)))
    engine.finalize_object()
    return engine


def externals(module):
    """The names of the symbols an llvmlite ``module`` takes from the process."""
    return sorted(g.name for g in module.global_values if not g.name.startswith("llvm.") and (
        g.is_declaration if isinstance(g, ir.Function) else g.initializer is None))


def _refuse_to_run(cpu, *args):
    raise RuntimeError(f"nbjax: this code was compiled for the CPU {cpu!r} (the cpu_target "
                       "option), which this machine may not be able to run; set cpu_target "
                       "to 'host' to run it")


# --- buffers -------------------------------------------------------------------------------

ALIGNMENT = 64
HUGE = 4 << 20          # buffers from this size get their own mapping with huge pages
# Cached buffers of one size: at least KEEP_PER_SIZE, or as many as KEEP_BYTES hold, up to
# KEEP_MOST. A call making many results of one shape (an optimiser's update of a model's
# layers: 9 of 784x256) allocated most of them afresh, page faults and all: 2x its run.
KEEP_PER_SIZE = 4
KEEP_BYTES = 32 << 20
KEEP_MOST = 64


class BufferPool:
    """Aligned arrays keyed by (shape, dtype), reused when nothing refers to them any more.

    Each pooled array is a view of a raw block; NumPy makes every further view of it (a
    slice the user took of a result) refer to that block as its ``base``. So an array is
    free when neither it nor its block has references other than the pool's own.
    """

    def __init__(self):
        self._arrays = {}  # (shape, dtype) -> [(block, array, address)]
        self._entries = {}  # id(array) -> its entry (entries live as long as the pool)
        self._lock = threading.Lock()

    def empty(self, shape, dtype):
        """An uninitialised, 64-byte-aligned, C-contiguous array."""
        return self.empty_with_address(shape, dtype)[0]

    def empty_with_address(self, shape, dtype):
        """(array, its data address as an int)."""
        key = (shape, dtype)
        with self._lock:
            cached = self._arrays.get(key)
            if cached is None:
                cached = self._arrays[key] = []
            for entry in cached:
                # block: the entry, the array's base, getrefcount's argument;
                # array: the entry, getrefcount's argument
                if sys.getrefcount(entry[0]) == 3 and sys.getrefcount(entry[1]) == 2:
                    # An Array that held it froze it; nobody holds it now.
                    entry[1].flags.writeable = True
                    return entry[1], entry[2]
            entry = _new_array(shape, dtype)
            if len(cached) < _kept(entry[1].nbytes):
                cached.append(entry)
                self._entries[id(entry[1])] = entry
            return entry[1], entry[2]

    def entry(self, array):
        """The pool's ``(block, array, address)`` entry of ``array``, or None."""
        entry = self._entries.get(id(array))
        return entry if entry is not None and entry[1] is array else None

    def clear(self):
        with self._lock:
            self._arrays.clear()
            self._entries.clear()


def _kept(nbytes):
    """How many buffers of ``nbytes`` the pool keeps."""
    return max(KEEP_PER_SIZE, min(KEEP_MOST, KEEP_BYTES // max(nbytes, 1)))


def _new_array(shape, dtype):
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    block, skip = _aligned_block(-(-max(nbytes, 1) // ALIGNMENT) * ALIGNMENT)
    array = block[skip:skip + nbytes].view(dtype).reshape(shape)
    return block, array, address(array)


def _aligned_block(nbytes):
    """(an array owning at least ``nbytes``, the offset where an aligned ``nbytes`` start);
    views of it keep it as their ``base``."""
    if nbytes >= HUGE:
        mapping = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            mapping.madvise(mmap.MADV_HUGEPAGE)
        return np.frombuffer(mapping, np.uint8), 0
    block = np.empty(nbytes + ALIGNMENT, np.uint8)
    return block, (-block.ctypes.data) % ALIGNMENT


def address(array):
    return array.__array_interface__["data"][0]


def private(array):
    """Whether the host buffer of ``array`` (an Array) can be reached through ``array``
    alone, so that a call it is donated to may overwrite it: no other Array, NumPy array,
    view or buffer export refers to its NumPy array or to the memory under it (counted with
    ``sys.getrefcount``, the pool's own references set aside), and that memory is NumPy's
    or the pool's (never a ``bytes`` or another object's memory that NumPy wraps). A small
    output a kernel step recycles (``executable._Recycler``) is not private: the step
    keeps a reference to hand it out again."""
    if array.device_buffer is not None or array.is_deleted():
        return False
    if _OWN_REFERENCES is None:
        _measure(type(array))
    return _only_reference(np.asarray(array))


# How many references ``_only_reference`` sees to an array only its Array holds (the
# Array's, its argument's, getrefcount's): measured once, on the same path (``_measure``).
_OWN_REFERENCES = None


def _only_reference(buf):
    entry = pool.entry(buf)
    refs = sys.getrefcount(buf) - (entry is not None)
    if refs != _OWN_REFERENCES or not (buf.flags.c_contiguous and buf.flags.aligned):
        return False
    base = buf.base
    if base is None:
        return True
    # The owner of the memory: an ndarray owning it, referred to by ``buf``, ``base`` and
    # getrefcount's argument, and the pool's entry when it is a pooled block.
    pooled = entry is not None and base is entry[0]
    return isinstance(base, np.ndarray) and (pooled or base.base is None) and \
        sys.getrefcount(base) - pooled == 3


def _seen(buf):
    return sys.getrefcount(buf)  # (as in ``_only_reference``)


def _measure(array_type):
    """Calibrate ``_OWN_REFERENCES`` on an Array (of ``array_type``) nothing else refers
    to, through the same calls as ``private``."""
    global _OWN_REFERENCES
    probe = array_type(np.zeros(3))
    _OWN_REFERENCES = _seen(np.asarray(probe))


pool = BufferPool()


# --- threads -------------------------------------------------------------------------------

SPLIT_THRESHOLD = 1 << 20  # work from which a loop splits on Python's threads (no pool)
POOL_SPLIT_WORK = 1 << 16  # work (``kernel_work``) from which a loop splits on the pool
MATH_WORK = 4              # the work of a math function's call on one element (a copy: 1)
_executor = None
_executor_lock = threading.Lock()


def core_count():
    """The cores this process may run on (a kernel splits its outer axis into that many
    chunks)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


THREADS = core_count()
_optimisers = optimiser.OptimiserPool(min(THREADS, optimiser.MAX_WORKERS))


def _workers():
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=max(1, THREADS - 1),
                                           thread_name_prefix="nbjax-cpu")
    return _executor


def kernel_work(loop):
    """A rough cost of ``loop`` in units of one element copied: each element costs one
    per stage (``LoopKernel.stages``), and ``MATH_WORK`` more per math function (exp,
    tanh...) its body calls."""
    return math.prod(loop.shape) * (max(1, len(loop.stages)) + MATH_WORK * loop.math_calls)


def on_pool(loop):
    """Whether a split ``loop`` runs on the native worker pool (``workers``): a microsecond
    to hand chunks over; else (the system has no pool) on Python's worker threads, tens of
    microseconds. A loop whose reductions run over its outer axis is cut into ``pieces``,
    each accumulating apart (``partial_outputs``), whose results are then combined in
    order: the same values whichever thread ran which piece."""
    return workers.supported()


def pieces(loop):
    """How many pieces a split ``loop`` with partial outputs is cut into on the pool: one
    per core (each piece's partial results cost a pass of the combiner)."""
    return min(THREADS, loop.shape[0])


# Multiply-adds from which a stack of BLAS products is shared out between the cores (below
# it, OpenBLAS computes a product on one thread too), and the rows or columns of a piece
# are a multiple of ``PIECE_GRAIN`` (its kernels compute blocks of up to 32).
BLAS_SPLIT_WORK = 1 << 18
PIECE_GRAIN = 32


def product_pieces(count, m, k, n):
    """(pieces of each matrix, rows or columns of a piece: None for no split) for a stack of
    ``count`` products of ``m x k`` by ``k x n``: along the longer of ``m`` and ``n``, as
    many as makes a piece for each thread at least (``blas``: each piece one BLAS call on
    the thread running it)."""
    if THREADS < 2 or not workers.supported() or count * m * k * n < BLAS_SPLIT_WORK:
        return 1, None
    length = max(m, n)
    per_matrix = -(-THREADS // count)
    block = -(-length // per_matrix)
    block = -(-block // PIECE_GRAIN) * PIECE_GRAIN
    return -(-length // block), block


def partial_bytes(output):
    """The bytes of one piece's partial result of ``output`` (a LoopKernel's output that
    accumulates over the outer axis), in its accumulation dtype."""
    return math.prod(output.shape) * np.dtype(output.acc_dtype or output.var.aval.dtype).itemsize


def splits(loop):
    """Whether the runtime splits ``loop`` (a LoopKernel) between the cores, along its outer
    axis: when it is large enough to repay the hand-over to the worker threads. Chunks write
    disjoint parts of the element-wise outputs and of the reductions that keep that axis; a
    reduction over it accumulates each chunk apart (``partial_outputs``)."""
    if len(loop.shape) < 1 or loop.shape[0] < 2 or THREADS < 2:
        return False
    if on_pool(loop):
        return kernel_work(loop) >= POOL_SPLIT_WORK
    return kernel_work(loop) >= SPLIT_THRESHOLD


def pooled(loop):
    """Whether ``loop`` runs split on the native worker pool (through its
    ``chunk_function``); a split loop that does not runs on Python's threads."""
    return splits(loop) and on_pool(loop)


def split_choice(loop):
    """Whether ``loop`` runs on every core, and why, in words for the fusion report."""
    size = math.prod(loop.shape)
    if THREADS == 1:
        return "on one thread (this process may use one core)"
    if len(loop.shape) < 1 or loop.shape[0] < 2:
        return "on one thread (its outer axis has one element)"
    stages = f" in {len(loop.stages)} stages" if loop.stages else ""
    measure = (f"work {kernel_work(loop):,}: {size:,} elements{stages}, math functions "
               f"counting {MATH_WORK} more each")
    if on_pool(loop):
        least = f"{POOL_SPLIT_WORK:,}"
        if splits(loop):
            combined = f", in {pieces(loop)} pieces whose partial results are combined" \
                if partial_outputs(loop) else ""
            return (f"split between the {THREADS} cores along its outer axis, on the worker "
                    f"pool{combined} ({measure}; at least {least})")
        return (f"on one thread ({measure}; under the {least} that repay handing chunks "
                f"to the other cores)")
    if splits(loop):
        return (f"split between the {THREADS} cores along its outer axis ({measure}; at "
                f"least {SPLIT_THRESHOLD:,}: its partial results are combined)")
    return (f"on one thread ({measure}; under the {SPLIT_THRESHOLD:,} that repay handing "
            "chunks with partial results to the other cores)")


def start_pool():
    """Start the native worker pool (once per process)."""
    workers.start(support.address, THREADS)


@functools.lru_cache(maxsize=None)
def _parallel_for():
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        support.address(workers.PARALLEL_FOR))


def run_on_pool(chunk, pointers, extent):
    """Run a kernel over ``[0, extent)`` of its outer axis on the worker pool: ``chunk`` is
    the address of its ``chunk_function``, ``pointers`` its buffers' addresses."""
    start_pool()
    _parallel_for()(chunk, (ctypes.c_void_p * len(pointers))(*pointers), extent)


def run_pieces_on_pool(chunk, pointers, loop, combine):
    """Run ``loop``, whose reductions run over its outer axis, on the worker pool in
    ``pieces``: the first accumulates into the outputs (``pointers``), each other one into
    a block of its own, which ``combine(out0, part0, out1, part1, ...)`` then folds into
    them in order (see ``codegen.ModuleBuilder.chunk_function``)."""
    n, blocks, outs = pieces(loop), [], []
    for position, shape, dtype, identity in partials(loop):
        block, _ = pool.empty_with_address((n - 1, *shape), dtype)
        block.fill(identity)
        blocks.append(block)
        outs.append(pointers[position])
    run_on_pool(chunk, list(pointers) + [b.ctypes.data for b in blocks], n)
    for k in range(n - 1):
        combine(*[p for out, block in zip(outs, blocks)
                  for p in (out, block.ctypes.data + k * block.strides[0])])


def partial_outputs(loop):
    """The positions of ``loop``'s outputs that accumulate over its outer axis: each chunk of
    a split loop needs its own copy, and the copies are combined at the end."""
    if not loop.shape:
        return []
    return [k for k, o in enumerate(loop.outputs) if o.combine and 0 not in o.kept_axes]


def partials(loop):
    """``run_split``'s ``partials`` of ``loop``: (position, shape, accumulation dtype,
    identity) of each output that accumulates over its outer axis."""
    return tuple((k, tuple(o.shape), np.dtype(o.acc_dtype or o.var.aval.dtype), o.identity)
                 for k, o in ((k, loop.outputs[k]) for k in partial_outputs(loop)))


def run_split(fn, pointers, extent, partials=(), combine=None):
    """Run ``fn`` over ``[0, extent)`` of its outer axis in ``THREADS`` chunks at once (ctypes
    releases the GIL during each call); the calling thread runs the first chunk.

    ``partials`` lists the outputs that accumulate over the outer axis, as (position in
    ``pointers``, shape, dtype, identity): every chunk but the first accumulates into a
    fresh buffer of its own, which ``combine(out0, part0, out1, part1, ...)`` folds into
    the real output once all chunks are done.
    """
    n = min(THREADS, extent)
    bounds = [extent * k // n for k in range(n + 1)]
    jobs, private = [], []
    for k in range(1, n):
        args, pairs = list(pointers), []
        for position, shape, dtype, identity in partials:
            buf, args[position] = pool.empty_with_address(shape, dtype)
            buf.fill(identity)
            private.append(buf)
            pairs += [pointers[position], args[position]]
        jobs.append((_workers().submit(fn, *args, bounds[k], bounds[k + 1]), pairs))
    fn(*pointers, bounds[0], bounds[1])
    for future, pairs in jobs:
        future.result()
        if pairs:
            combine(*pairs)

"""What compiled kernels run on: LLVM engines, aligned buffers, and a thread for big loops.

- ``JitModule``: one LLVM module optimised with the new pass manager and turned into machine
  code by its own MCJIT engine and target machine (an engine owns and frees its target
  machine, so they are never shared; see PERF_NOTES.md).
- ``BufferPool``: 64-byte-aligned output buffers (vector stores need it, and NumPy only
  guarantees 16), reused once nothing refers to them any more, so steady-state calls do not
  pay page faults; large ones are anonymous mappings with transparent huge pages.
- ``run_split``: a large loop runs its outer axis in two halves, one on a worker thread.
  ctypes releases the GIL during the calls, so both halves run at once.
"""

import ctypes
import math
import mmap
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import llvmlite.binding as llvm

_init_lock = threading.Lock()
_initialised = False


def _initialise():
    global _initialised
    with _init_lock:
        if not _initialised:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialised = True


def _target_machine():
    _initialise()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, jit=True)


class JitModule:
    """LLVM IR text -> optimised module -> machine code, with the time of each phase."""

    def __init__(self, ir_text, timer):
        tm = _target_machine()
        with timer("llvm_parse"):
            module = llvm.parse_assembly(ir_text)
            module.triple = tm.triple
            module.data_layout = str(tm.target_data)
            module.verify()
        with timer("llvm_optimise"):
            pto = llvm.create_pipeline_tuning_options(speed_level=3)
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            pto.loop_unrolling = True
            pto.loop_interleaving = True
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(module, pb)
        with timer("machine_code"):
            self.engine = llvm.create_mcjit_compiler(module, tm)  # owns tm from now on
            self.engine.finalize_object()
        self.module = module
        self.optimised_ir = str(module)

    def function(self, name, n_pointers):
        """A ctypes function for kernel ``name``; it takes the buffer addresses as ints and
        the outer loop's start and stop."""
        address = self.engine.get_function_address(name)
        proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * n_pointers,
                                 ctypes.c_int64, ctypes.c_int64)
        return proto(address)

    def function_ir(self, name):
        return str(self.module.get_function(name))


# --- buffers -------------------------------------------------------------------------------

ALIGNMENT = 64
HUGE = 4 << 20          # buffers from this size get their own mapping with huge pages
KEEP_PER_SIZE = 4       # cached buffers of one size


class BufferPool:
    """Aligned arrays keyed by (shape, dtype), reused when nothing refers to them any more.

    Each pooled array is a view of a raw block; NumPy makes every further view of it (a
    slice the user took of a result) refer to that block as its ``base``. So an array is
    free when neither it nor its block has references other than the pool's own.
    """

    def __init__(self):
        self._arrays = {}  # (shape, dtype) -> [(block, array, address)]
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
            if len(cached) < KEEP_PER_SIZE:
                cached.append(entry)
            return entry[1], entry[2]

    def clear(self):
        with self._lock:
            self._arrays.clear()


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


pool = BufferPool()


# --- threads -------------------------------------------------------------------------------

SPLIT_THRESHOLD = 1 << 20   # iteration-space elements from which a loop runs on 2 threads
_executor = None


def _worker():
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nbjax-cpu")
    return _executor


def run_split(fn, pointers, extent):
    """Run ``fn`` over ``[0, extent)`` of its outer axis in two halves, in parallel."""
    mid = extent // 2
    second = _worker().submit(fn, *pointers, mid, extent)
    fn(*pointers, 0, mid)
    second.result()

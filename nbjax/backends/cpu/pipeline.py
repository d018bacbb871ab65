"""LLVM IR text in, optimised IR and object code out: the part of compiling that runs in a
separate process.

Building and running LLVM's optimisation pipeline through llvmlite leaves about 70 KB
behind per module that is never freed (measured with llvmlite alone), so a notebook that
compiles thousands of functions would grow without bound. ``optimiser.py`` runs this
module as a worker process, restarted every few hundred modules; the notebook's process
then only loads the object code, as it does from the disk cache, and keeps nothing.

Run as a script (``python pipeline.py``), it serves requests on stdin/stdout. It imports
only llvmlite, so the worker starts in a fraction of a second.
"""

import functools
import json
import signal
import struct
import sys

import llvmlite.binding as llvm

_LENGTH = struct.Struct("<Q")


# LLVM unrolls a loop completely before vectorising it when its trip count is a small
# constant. For a row of 7 or 10 elements that is what makes it fast; for a row of 32 or
# more, the loop around it was then vectorised instead, with gathers: slower code, and a
# transformer's gradient spent seconds in the SLP vectoriser. Rows above this count are
# left to the loop vectoriser.
FULL_UNROLL_MAX_COUNT = 16

# Loop strength reduction (with the analysis it needs) took 15-18% of LLVM's time on the
# benchmark modules (31 of 214 ms on the transformer's) and changed no workload's run time
# beyond noise: on x86, addressing modes already scale an index. It is left out.
LLVM_OPTIONS = (f"-unroll-full-max-count={FULL_UNROLL_MAX_COUNT}", "-disable-lsr")


@functools.lru_cache(maxsize=None)
def _configure_llvm():
    """Set LLVM's options, once per process (LLVM exits on an option given twice)."""
    for option in LLVM_OPTIONS:
        llvm.set_option("nbjax", option)


def target_machine(cpu, features, opt=3):
    """A target machine for the host's triple and ``cpu``/``features``, as MCJIT uses,
    generating code at optimisation level ``opt``."""
    _configure_llvm()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=features, opt=opt, jit=True)


def optimise(module, tm):
    """LLVM's O3 pipeline with the loop and SLP vectorisers, run by the new pass manager."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)


# The light tiers: code that runs once per call or loop step (the functions Python calls,
# the program and control-flow functions, small kernels), where O3's 80-odd passes and
# its instruction selection cost 5-35 ms a function and gain nothing measurable. Its
# locals are promoted to registers and its instructions folded (``optimise_lightly``),
# then the code generator works at the tier's level: code that only calls other code at
# level 0 (LLVM's fast instruction selector and register allocator), the loops of small
# kernels at level 1 (at level 0 an MLP step ran 2% slower). The dispatch workload's
# module (its entry and its 4-element kernel): 9.3 ms by O3, 4.1 at level 1, 1.8 at 0.
CALLS = 0
SMALL_LOOPS = 1
RELATIVE_COST = {CALLS: 0.2, SMALL_LOOPS: 0.45}   # of a tier's time to O3's (``partition``)


def optimise_lightly(module, tm):
    """Promote locals to registers (SROA), fold instructions, give equal values one number
    (NewGVN: a small kernel's pieces computing the sine of one angle call it once) and
    simplify the control flow of each function of ``module``: what O3 would do first,
    without its loop passes."""
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
    fpm = llvm.create_new_function_pass_manager()
    fpm.add_sroa_pass()
    fpm.add_instruction_combine_pass()
    fpm.add_new_gvn_pass()
    fpm.add_simplify_cfg_pass()
    for function in module.functions:
        if not function.is_declaration:
            fpm.run(function, pb)


def parse(ir_text, tm):
    """The module of ``ir_text``, for ``tm``'s triple and data layout, verified."""
    module = llvm.parse_assembly(ir_text)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    module.verify()
    return module


@functools.lru_cache(maxsize=8)
def _shared_target_machine(cpu, features, opt=3):
    # No engine takes ownership of this one, so the modules of a worker can share it.
    return target_machine(cpu, features, opt)


def compile_module(ir_text, cpu, features, light=None):
    """(optimised IR text, object code) of the module ``ir_text``, by O3 or, when ``light``
    is a light tier (``CALLS``, ``SMALL_LOOPS``), by that tier."""
    tm = _shared_target_machine(cpu, features, 3 if light is None else light)
    module = parse(ir_text, tm)
    (optimise if light is None else optimise_lightly)(module, tm)
    return str(module), tm.emit_object(module)


# --- the worker's side of the pipe ---------------------------------------------------------

def write_message(stream, *parts):
    """Parts (bytes) as one message: a count, then each part with its length."""
    stream.write(_LENGTH.pack(len(parts)))
    for part in parts:
        stream.write(_LENGTH.pack(len(part)))
        stream.write(part)
    stream.flush()


def read_message(stream):
    """The parts of one message, or None when the stream ends before it does (the other
    side exited, perhaps mid-message)."""
    count = _read_length(stream)
    parts = []
    for _ in range(count or 0):
        n = _read_length(stream)
        part = None if n is None else stream.read(n)
        if part is None or len(part) < n:
            return None
        parts.append(part)
    return parts if count is not None else None


def _read_length(stream):
    head = stream.read(_LENGTH.size)
    return _LENGTH.unpack(head)[0] if len(head) == _LENGTH.size else None


def serve(requests, replies):
    """Answer each request (a JSON header with the CPU and the tier, and the IR) with b"ok",
    the optimised IR and the object code, or b"error" and the message."""
    while (request := read_message(requests)) is not None:
        header, ir_text = json.loads(request[0]), request[1].decode()
        try:
            optimised, code = compile_module(ir_text, header["cpu"], header["features"],
                                             header.get("light"))
            write_message(replies, b"ok", optimised.encode(), bytes(code))
        except Exception as e:  # noqa: BLE001  (reported to the parent, which falls back)
            write_message(replies, b"error", f"{type(e).__name__}: {e}".encode())


_WARM_UP = """
define void @warm_up(float* noalias %out, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %p = getelementptr float, float* %out, i64 %i
  store float 1.0, float* %p
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


def warm_up(cpu, features):
    """Compile a loop by O3 and by each light tier: the first module of each costs 2-5 ms
    more than the next (LLVM's one-time set-up), which a worker pays as it starts."""
    for light in (None, CALLS, SMALL_LOOPS):
        try:
            compile_module(_WARM_UP, cpu, features, light)
        except Exception:  # noqa: BLE001  (only time is lost: the requests still come)
            return


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which stops us
    if len(sys.argv) > 1:   # the CPU to compile for (``optimiser``)
        warm_up(*json.loads(sys.argv[1]))
    serve(sys.stdin.buffer, sys.stdout.buffer)

"""Functions and data that compiled code may use but the process need not export.

Interrupts: compiled loops poll ``nbjax_interrupt_flag`` (see ``interrupts``), which
``nbjax_on_sigint``, a signal handler, sets before it calls the handler it displaced
(``nbjax_previous_sigint``, Python's own).

Float16: on a CPU without F16C (x86-64-v2 and older), LLVM converts float16 values by calling
compiler-rt's ``__extendhfsf2``, ``__truncsfhf2`` and ``__truncdfhf2``. Only recent GCC
runtimes define them, and not where MCJIT looks (the process's global symbols), so a call
would jump to address 0 and kill the process. They are defined here in LLVM IR (integer
code, so they need no F16C themselves) with the signatures LLVM calls them by, compiled
once for the baseline x86-64 CPU, and registered with LLVM's symbol table.

Entries: the three functions Python calls compiled code through (``python_entry``), for
every program of the process.

Building this module's IR in Python and compiling it took 80-150 ms of a process's first
call, so its object code is kept in the disk cache (``cache``). The code names what it
takes from the process (the C library's and Python's functions, Python's objects) as
external symbols, which ``register`` points at this process's addresses before it is
loaded; so its entry is keyed not by its IR, which would have to be built to be hashed,
but by what the IR is made from: nbjax's source code, the layout of the objects it reads
(``python_entry.layout``), the Python it runs in, and what the key of every entry holds
(llvmlite, LLVM, the target).
"""

import ctypes
import json
import platform
import sys
import threading

import llvmlite.binding as llvm
from llvmlite import ir

from ..llvm.types import I16, I32, I64
from . import cache, python_entry, workers

HALF, FLOAT, DOUBLE = ir.HalfType(), ir.FloatType(), ir.DoubleType()


def _c(ty, value):
    return ir.Constant(ty, value)


def _half_to_float(b, h):
    """float bits of the float16 ``h`` (exact): rebias a normal's exponent; a subnormal is
    its mantissa times 2**-24; infinities and NaNs keep their payload."""
    bits = b.zext(b.bitcast(h, I16), I32)
    sign = b.shl(b.and_(bits, _c(I32, 0x8000)), _c(I32, 16))
    exp = b.and_(bits, _c(I32, 0x7C00))
    mant = b.and_(bits, _c(I32, 0x3FF))
    normal = b.add(b.shl(b.and_(bits, _c(I32, 0x7FFF)), _c(I32, 13)),
                   _c(I32, (127 - 15) << 23))
    special = b.or_(_c(I32, 0x7F800000), b.shl(mant, _c(I32, 13)))
    tiny = b.bitcast(b.fmul(b.uitofp(mant, FLOAT), _c(FLOAT, 2.0 ** -24)), I32)
    out = b.select(b.icmp_unsigned("==", exp, _c(I32, 0x7C00)), special, normal)
    out = b.select(b.icmp_unsigned("==", exp, _c(I32, 0)), tiny, out)
    return b.bitcast(b.or_(out, sign), FLOAT)


def _to_half(b, x, int_type, mant_bits, bias):
    """The float16 nearest ``x`` (a float or double; ties to even). Magnitudes from 65536
    are infinite (NaNs become the quiet NaN); below 2**-14, adding a power of two whose last
    mantissa bit weighs 2**-24 rounds to the subnormal grid in hardware; in between, a
    rounding bias (half an output ulp, less one, plus the kept part's last bit) is added to
    the bits before they are shifted down."""
    shift = mant_bits - 10
    sign_bit = 1 << (int_type.width - 1)
    bits = b.bitcast(x, int_type)
    sign = b.trunc(b.lshr(b.and_(bits, _c(int_type, sign_bit)), _c(int_type, int_type.width - 16)),
                   I16)
    mag = b.and_(bits, _c(int_type, sign_bit - 1))
    inf_bits = ((1 << (int_type.width - 1 - mant_bits)) - 1) << mant_bits
    overflow = (bias + 16) << mant_bits              # 65536.0
    smallest_normal = (bias - 14) << mant_bits       # 2**-14
    magic = (bias - 24 + mant_bits) << mant_bits     # ulp 2**-24
    nan_or_inf = b.select(b.icmp_unsigned(">", mag, _c(int_type, inf_bits)),
                          _c(I16, 0x7E00), _c(I16, 0x7C00))
    tiny_sum = b.fadd(b.bitcast(mag, x.type), b.bitcast(_c(int_type, magic), x.type))
    tiny = b.trunc(b.sub(b.bitcast(tiny_sum, int_type), _c(int_type, magic)), I16)
    odd = b.and_(b.lshr(mag, _c(int_type, shift)), _c(int_type, 1))
    rebiased = b.add(mag, _c(int_type, ((15 - bias) << mant_bits) + (1 << (shift - 1)) - 1))
    normal = b.trunc(b.lshr(b.add(rebiased, odd), _c(int_type, shift)), I16)
    out = b.select(b.icmp_unsigned("<", mag, _c(int_type, smallest_normal)), tiny, normal)
    out = b.select(b.icmp_unsigned(">=", mag, _c(int_type, overflow)), nan_or_inf, out)
    return b.bitcast(b.or_(out, sign), HALF)


def _float_to_half(b, x):
    return _to_half(b, x, I32, 23, 127)


def _double_to_half(b, x):
    return _to_half(b, x, I64, 52, 1023)


FUNCTIONS = {"__extendhfsf2": (FLOAT, HALF, _half_to_float),
             "__truncsfhf2": (HALF, FLOAT, _float_to_half),
             "__truncdfhf2": (HALF, DOUBLE, _double_to_half)}


INTERRUPT_FLAG = "nbjax_interrupt_flag"
I8P = ir.IntType(8).as_pointer()
_HANDLER = ir.FunctionType(ir.VoidType(), [I32, I8P, I8P])


def _interrupt_handler(m):
    """``nbjax_on_sigint(sig, info, context)``: set the flag, then call the previous handler
    with the same arguments (they suit a one- or three-argument handler alike)."""
    flag = ir.GlobalVariable(m, I32, INTERRUPT_FLAG)
    flag.initializer = ir.Constant(I32, 0)
    previous = ir.GlobalVariable(m, _HANDLER.as_pointer(), "nbjax_previous_sigint")
    previous.initializer = ir.Constant(_HANDLER.as_pointer(), None)
    fn = ir.Function(m, _HANDLER, name="nbjax_on_sigint")
    b = ir.IRBuilder(fn.append_basic_block())
    b.store_atomic(ir.Constant(I32, 1), flag, "monotonic", 4)
    handler = b.load(previous)
    with b.if_then(b.icmp_unsigned("!=", handler, ir.Constant(handler.type, None))):
        b.call(handler, fn.args)
    b.ret_void()


def module():
    """The LLVM module defining ``FUNCTIONS``, the interrupt handler and flag, the worker
    pool and the entries Python calls compiled code through (``python_entry``)."""
    m = ir.Module(name="nbjax_support")
    for name, (ret, arg, body) in FUNCTIONS.items():
        fn = ir.Function(m, ir.FunctionType(ret, [arg]), name=name)
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(body(b, fn.args[0]))
    _interrupt_handler(m)
    if workers.supported():
        workers.define(m)
    if python_entry.USABLE:
        python_entry.define(m)
    return m


_X86 = platform.machine().lower() in ("x86_64", "amd64")
_CPU = ("x86-64" if _X86 else "generic", "")  # (code any CPU of the triple runs)
_lock = threading.Lock()
_engine = None  # kept for the life of the process: its machine code is what the symbols name


def register():
    """Compile the support module (or load it from the disk cache) and make its symbols
    resolvable by every engine (once)."""
    global _engine
    with _lock:
        if _engine is not None:
            return
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(cpu=_CPU[0], features=_CPU[1], opt=2, jit=True)
        for name, address in _process_symbols().items():
            llvm.add_symbol(name, address)
        empty = llvm.parse_assembly("")
        empty.triple, empty.data_layout = tm.triple, str(tm.target_data)
        engine = llvm.create_mcjit_compiler(empty, tm)
        engine.add_object_file(llvm.ObjectFileRef.from_data(_object_code(tm)))
        engine.finalize_object()
        if _X86:  # elsewhere float16 conversions are instructions
            for name in FUNCTIONS:
                llvm.add_symbol(name, engine.get_function_address(name))
        llvm.add_symbol(INTERRUPT_FLAG, engine.get_global_value_address(INTERRUPT_FLAG))
        if workers.supported():
            llvm.add_symbol(workers.PARALLEL_FOR,
                            engine.get_function_address(workers.PARALLEL_FOR))
        if python_entry.USABLE:
            python_entry.bind(engine.get_function_address)
        _engine = engine


def _process_symbols():
    """{name: address} of what the module's code takes from this process."""
    found = python_entry.symbols() if python_entry.USABLE else {}
    if workers.supported():  # the C library's functions the worker pool calls
        libc = ctypes.CDLL(None)
        for name in ("syscall", "sched_yield"):
            found[name] = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
    return found


def _object_code(tm):
    """The module compiled by ``tm``: from the disk cache, else compiled now (and stored)."""
    directory, key = cache.directory(), _entry_key()
    path = directory / (key + cache.SUFFIX) if directory is not None else None
    found = cache.read(path, key, meta=bytes) if path is not None else None
    if found is not None:
        return found[1]
    mod = llvm.parse_assembly(str(module()))
    mod.triple, mod.data_layout = tm.triple, str(tm.target_data)
    code = tm.emit_object(mod)
    if path is not None:
        cache.write(path, cache.encode(key, b"", code))
    return code


def _entry_key():
    """The key of the module's disk-cache entry (see the module docstring)."""
    made_from = {"sources": cache.source_digest().hex(), "python": sys.version,
                 "layout": python_entry.layout(), "pool": workers.supported()}
    return cache.entry_key(json.dumps(made_from, sort_keys=True), cache.environment(_CPU))


def address(name):
    """The address of the support module's function or global ``name``."""
    register()
    return _engine.get_global_value_address(name)

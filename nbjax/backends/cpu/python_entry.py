"""Native functions called from Python as builtin functions, not through ctypes.

A ctypes call converts every argument: about 0.4 us for a kernel's four, with the buffers'
addresses already known, and reading an array's address from Python costs about 0.15 us
more per buffer. At a few elements that is most of a jitted call. So the module of a
program defines, for each function Python calls (a kernel run as the whole program, a
control-flow or whole-program function), an entry with the C signature of a CPython
builtin taking its arguments as a vector (``METH_FASTCALL``)::

    PyObject *<name>_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs)

Its arguments are NumPy arrays, or None for a null pointer. It reads each array's data
pointer from the array object (the field after the object header, as ``PyArray_DATA``
does), lets go of the GIL, calls the function, takes the GIL back and returns None (a
kernel) or the function's status as an int (control flow). ``builtin`` makes a function
object of an entry: a call costs about 30 ns.

A kernel's entry checks its arguments first, as ``PyArray_Check`` and NumPy's macros would
(the fields of ``PyArrayObject``: ``CHECKED_FIELDS``): their number, and that each is an
``ndarray`` (not a subclass), C-contiguous and aligned, of the shape and dtype the kernel
was compiled for (the dtype object itself, NumPy's one object per dtype in the machine's
byte order, named to the code as a symbol of this process: ``register``). An ``Array``
(exactly nbjax's, with its host values) stands for its NumPy array: the entry reads its
``_host`` slot (at ``HOST_OFFSET``, found by ``_slot_offset``), and holds a reference to
each array while it runs without the GIL (so another thread deleting the Array cannot free
the memory under it). If an argument is not as compiled, the entry returns False without
running anything, and its caller converts the arguments and calls again (or through
ctypes): so a jitted call hands it its arguments as they come (``Executable.direct``).

A kernel with one output has a second entry, ``<name>_pycall``: a whole jitted call of one
signature, for jit's last-call shortcut (``Executable.checked_call``), which calls it with
the call's arguments as they come, and nothing else. Its builtin's ``self`` is a list, the
call's state (``STATE``): two spare output buffers, the result's aval and device, a
function making a new buffer, the executable with the name of its ``step_times``
attribute, then the values the function closes over (the kernel's first inputs). It
refuses (returns None, having run nothing) while the executable times its steps, or when
an argument is not of the signature: the checks above, and an Array must have a strong
``ShapedArray`` for its aval (its ``_aval`` at ``ARRAY_SLOTS``, the ``weak_type`` at
``WEAK_OFFSET`` False), for the result's type depends on the arguments' weak types, which
a buffer does not show. Otherwise it runs the kernel into a spare nothing else refers to
(its reference count is 1: only the list holds it; one is made when neither is free) and
returns a new Array of it, allocated as ``object.__new__(Array)`` would
(``PyType_GenericAlloc``) with its slots set as ``host_result`` sets them.
A control-flow entry trusts its caller: only the executables call it, with C-contiguous
arrays of the dtypes and sizes the function was compiled for, in its order.

The offsets are checked when this module loads (``_layout_as_expected``), and those the
machine code depends on beyond NumPy's and CPython's fixed layouts (``ARRAY_SLOTS``,
``WEAK_OFFSET``) are part of the symbol names it links to: code from the disk cache made
for another layout finds no such symbol, and is compiled again.
"""

import ctypes
import functools
import sys

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ...core import Array, ShapedArray, dtypes
from ..llvm import I8, I32, I64, declare, entry_alloca

I8P = I8.as_pointer()
SUFFIX = "_py"
CALL_SUFFIX = "_pycall"
METH_FASTCALL = 0x80

# PyArrayObject (NumPy's C struct of an array) is the object header followed by
# ``char *data``: reading that field is what ``PyArray_DATA`` does in C. The fields a
# kernel's entry checks follow (the struct is the same in NumPy 1 and 2): ``int nd``,
# ``npy_intp *dimensions``, then past ``strides`` and ``base``, ``PyArray_Descr *descr``
# and ``int flags``; the object header starts with the reference count, then the type.
DATA_OFFSET = object.__basicsize__
TYPE_OFFSET = DATA_OFFSET - 8
# A list (PyListObject) is a variable-size object header, whose last field is the length,
# then ``PyObject **ob_item``.
LENGTH_OFFSET, ITEMS_OFFSET = DATA_OFFSET, DATA_OFFSET + 8
CHECKED_FIELDS = {"nd": DATA_OFFSET + 8, "dimensions": DATA_OFFSET + 16,
                  "descr": DATA_OFFSET + 40, "flags": DATA_OFFSET + 48}
# NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED (the byte order is the dtype object's)
REQUIRED_FLAGS = 0x1 | 0x100


def _slot_offset(cls, name):
    """Where the objects of ``cls`` hold slot ``name`` (None if it is not found): the word
    that holds a marker set there."""
    probe, marker = object.__new__(cls), object()
    setattr(probe, name, marker)
    found = [offset for offset in range(DATA_OFFSET, cls.__basicsize__, 8)
             if ctypes.c_void_p.from_address(id(probe) + offset).value == id(marker)]
    return found[0] if len(found) == 1 else None


ARRAY_SLOTS = {name: _slot_offset(Array, name) for name in ("_host", "_buffer", "_aval",
                                                               "_device")}
HOST_OFFSET = ARRAY_SLOTS["_host"]
WEAK_OFFSET = _slot_offset(ShapedArray, "weak_type")
# A checked call's state (see above), followed by the closed-over values.
STATE = ("spare", "other spare", "aval", "device", "make_buffer", "executable", "step_times")
SPARE, OTHER_SPARE, AVAL, DEVICE, MAKE_BUFFER, EXECUTABLE, STEP_TIMES = range(len(STATE))

# The Python C API the entries call, registered under names of ours (``register``).
_API = {"nbjax_Py_IncRef": ("Py_IncRef", ir.VoidType(), [I8P]),
        "nbjax_Py_DecRef": ("Py_DecRef", ir.VoidType(), [I8P]),
        "nbjax_PyEval_SaveThread": ("PyEval_SaveThread", I8P, []),
        "nbjax_PyEval_RestoreThread": ("PyEval_RestoreThread", ir.VoidType(), [I8P]),
        "nbjax_PyLong_FromLong": ("PyLong_FromLong", I8P, [I64]),
        "nbjax_PyType_GenericAlloc": ("PyType_GenericAlloc", I8P, [I8P, I64]),
        "nbjax_PyObject_GetAttr": ("PyObject_GetAttr", I8P, [I8P, I8P]),
        "nbjax_PyObject_CallNoArgs": ("PyObject_CallNoArgs", I8P, [I8P])}
_NONE = "nbjax_Py_None"
_FALSE = "nbjax_Py_False"
_NDARRAY = "nbjax_ndarray_type"
_DTYPE = "nbjax_dtype_"  # + the dtype's name: the address of NumPy's dtype object
_ARRAY = "nbjax_Array_type_slots_at_" + "_".join(map(str, ARRAY_SLOTS.values()))
_SHAPED = f"nbjax_ShapedArray_type_weak_at_{WEAK_OFFSET}"


def data_field(array):
    """The address of an array's first element, read from the array object: 5x faster
    from Python than ``__array_interface__`` (about 0.3 us against 1.5 us)."""
    return ctypes.c_void_p.from_address(id(array) + DATA_OFFSET).value


def _field(array, name, kind=ctypes.c_void_p):
    return kind.from_address(id(array) + CHECKED_FIELDS[name]).value


def _flags(array):
    f = array.flags
    return f.c_contiguous * 0x1 | f.aligned * 0x100


def _layout_as_expected():
    """Whether the fields an entry reads hold what NumPy says, on arrays that differ in
    each (shape, dtype, contiguity, alignment, byte order), and a list's and an object's
    header what CPython's say."""
    if None in ARRAY_SLOTS.values() or WEAK_OFFSET is None:
        return False
    probe = [object(), object()]
    items = ctypes.c_void_p.from_address(id(probe) + ITEMS_OFFSET).value
    if ctypes.c_ssize_t.from_address(id(probe) + LENGTH_OFFSET).value != 2 or \
            ctypes.c_void_p.from_address(items + 8).value != id(probe[1]) or \
            ctypes.c_ssize_t.from_address(id(probe[0])).value != sys.getrefcount(probe[0]) - 1:
        return False
    base = np.arange(24.0, dtype=np.float64)
    probes = [base[1:], base.reshape(2, 3, 4).transpose(1, 0, 2), np.zeros((), np.float32),
              np.zeros(5, ">i4"), np.frombuffer(b"\0" * 13, np.int32, 3, offset=1)]
    for probe in probes:
        dims = ctypes.cast(_field(probe, "dimensions"), ctypes.POINTER(ctypes.c_ssize_t))
        if data_field(probe) != probe.__array_interface__["data"][0] or \
                ctypes.c_void_p.from_address(id(probe) + TYPE_OFFSET).value != id(np.ndarray) \
                or _field(probe, "nd", ctypes.c_int) != probe.ndim or \
                tuple(dims[i] for i in range(probe.ndim)) != probe.shape or \
                _field(probe, "descr") != id(probe.dtype) or \
                _field(probe, "flags", ctypes.c_int) & REQUIRED_FLAGS != _flags(probe):
            return False
    return True


# Entries and ``data_field`` are used only where NumPy's arrays are laid out as they
# expect (always, in CPython); elsewhere the executables call through ctypes with the
# addresses NumPy gives.
USABLE = _layout_as_expected()


def register():
    """Make the C API the entries call resolvable by every engine (once per process)."""
    for ours, (name, _, _) in _API.items():
        llvm.add_symbol(ours, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    llvm.add_symbol(_NONE, id(None))
    llvm.add_symbol(_FALSE, id(False))
    llvm.add_symbol(_NDARRAY, id(np.ndarray))
    llvm.add_symbol(_ARRAY, id(Array))
    llvm.add_symbol(_SHAPED, id(ShapedArray))
    for dtype in dtypes.SUPPORTED:  # (NumPy keeps these objects as long as the process)
        llvm.add_symbol(_DTYPE + dtype.name, id(dtype))


def add_kernel_entry(module, fn, extent, arrays, n_outputs):
    """``<fn>_py(out0, ..., in0, ...)``: the kernel ``fn`` (buffers, then the start and stop
    of its outer axis) over the whole axis, ``[0, extent)``; returns None, or False if an
    argument is not an array as ``arrays`` (``(shape, dtype)`` of each) says. With one
    output (of ``n_outputs``), also the checked call ``<fn>_pycall(in0, ...)``."""
    def call(b, pointers):
        b.call(fn, [b.bitcast(p, a.type) for p, a in zip(pointers, fn.args)]
               + [ir.Constant(I64, 0), ir.Constant(I64, extent)])
        return None
    _define(module, fn.name, len(fn.args) - 2, call, arrays)
    if n_outputs == 1:
        _define_checked_call(module, fn.name, call, arrays[1:])


def add_flow_entry(module, fn, n_io):
    """``<fn>_py(io0, ..., scratch)``: the control-flow function ``fn(io, scratch)`` with
    the addresses of the first ``n_io`` arrays as ``io``; returns its status."""
    def call(b, pointers):
        io = entry_alloca(b, I8P, max(n_io, 1), 8)
        for k, pointer in enumerate(pointers[:n_io]):
            b.store(pointer, b.gep(io, [ir.Constant(I64, k)]))
        return b.call(fn, [io, pointers[n_io]])
    _define(module, fn.name, n_io + 1, call)


def _define(module, name, n_args, call, arrays=None):
    """The entry of ``name``: ``call(builder, data pointers)`` between releasing and taking
    back the GIL; it returns None, or the int of the i32 ``call`` returns. With ``arrays``
    (``(shape, dtype)`` per argument) it first checks its arguments (``_checked``)."""
    api, none, entry, b = _begin(module, name + SUFFIX)
    if arrays is None:
        objects = [b.load(b.gep(entry.args[1], [ir.Constant(I64, k)])) for k in range(n_args)]
    else:
        false = _global(module, _FALSE)
        require = _requirer(b, entry, api, false)
        require(b.icmp_unsigned("==", entry.args[2], ir.Constant(I64, len(arrays))))
        objects = [_checked(b, module, require, b.load(b.gep(entry.args[1], [ir.Constant(
            I64, k)])), shape, dtype) for k, (shape, dtype) in enumerate(arrays)]
    held = objects if arrays is not None else []  # (arrays read from Arrays' slots)
    status = _run_unlocked(b, api, none, objects, held, call)
    if status is None:
        b.call(api["nbjax_Py_IncRef"], [none])
        b.ret(none)
    else:
        b.ret(b.call(api["nbjax_PyLong_FromLong"], [b.sext(status, I64)]))


def _begin(module, name):
    """(The C API declared in ``module``, None's address, a new entry function ``name`` with
    a builder at its start). Entries are not optimised (``optnone``, which needs
    ``noinline``): they are glue (checks, a call of the kernel, which is optimised as
    ever), and optimising them was most of LLVM's time on a one-kernel program (its
    entries and the kernel: 30 ms optimised, 11 ms optimised for size or not at all on an
    idle machine, 24 ms and 11 ms on a busy one), for 10 ns a call at most."""
    api = {ours: declare(module, ours, ret, args) for ours, (_, ret, args) in _API.items()}
    entry = ir.Function(module, ir.FunctionType(I8P, [I8P, I8P.as_pointer(), I64]), name=name)
    entry.attributes.add("optnone")
    entry.attributes.add("noinline")
    return api, _global(module, _NONE), entry, ir.IRBuilder(entry.append_basic_block("entry"))


def _run_unlocked(b, api, none, objects, held, call):
    """``call(b, data pointers of objects)`` (None: a null pointer) without the GIL,
    holding a reference to each of ``held`` meanwhile; returns what ``call`` does."""
    null = entry_alloca(b, I8P, 1, 8)  # (holding a null pointer: read for None)
    b.store(ir.Constant(I8P, None), null)
    pointers = []
    for obj in objects:
        data = b.bitcast(b.gep(obj, [ir.Constant(I64, DATA_OFFSET)]), I8P.as_pointer())
        pointers.append(b.load(b.select(b.icmp_unsigned("==", obj, none), null, data)))
    for obj in held:
        b.call(api["nbjax_Py_IncRef"], [obj])
    state = b.call(api["nbjax_PyEval_SaveThread"], [])
    status = call(b, pointers)
    b.call(api["nbjax_PyEval_RestoreThread"], [state])
    for obj in held:
        b.call(api["nbjax_Py_DecRef"], [obj])
    return status


def _define_checked_call(module, name, call, arrays):
    """``<name>_pycall(in0, ...)``, the builtin's ``self`` being its state (see above):
    ``call(builder, data pointers)`` on a spare output buffer and the inputs, ``arrays``
    (their ``(shape, dtype)``s) being the closed-over values (``STATE``'s tail) and then
    the arguments; returns the new Array, or None if it refused."""
    api, none, entry, b = _begin(module, name + CALL_SUFFIX)
    state, args, nargs = entry.args
    items = _word(b, state, ITEMS_OFFSET, I8P.as_pointer())

    def item(k):
        return b.gep(items, [k if isinstance(k, ir.Value) else ir.Constant(I64, k)])

    def fail_if_null(value):  # (an exception is set: return NULL)
        failed = entry.append_basic_block("failed")
        with b.goto_block(failed):
            b.ret(ir.Constant(I8P, None))
        ok = entry.append_basic_block("ok")
        b.cbranch(b.icmp_unsigned("==", value, ir.Constant(I8P, None)), failed, ok)
        b.position_at_end(ok)
    require = _requirer(b, entry, api, none)
    timing = b.call(api["nbjax_PyObject_GetAttr"], [b.load(item(EXECUTABLE)),
                                                     b.load(item(STEP_TIMES))])
    fail_if_null(timing)
    b.call(api["nbjax_Py_DecRef"], [timing])
    require(b.icmp_unsigned("==", timing, none))
    _free_spare(b, api, item, fail_if_null)  # (before the checks: it may run Python code)
    n_consts = b.sub(_word(b, state, LENGTH_OFFSET, I64), ir.Constant(I64, len(STATE)))
    require(b.icmp_signed(">=", n_consts, ir.Constant(I64, 0)))
    require(b.icmp_unsigned("==", b.add(nargs, n_consts), ir.Constant(I64, len(arrays))))
    inputs = []
    for k, (shape, dtype) in enumerate(arrays):  # closed-over values, then arguments
        k_ = ir.Constant(I64, k)
        address = b.select(b.icmp_signed("<", k_, n_consts),
                           item(b.add(k_, ir.Constant(I64, len(STATE)))),
                           b.gep(args, [b.sub(k_, n_consts)]))
        inputs.append(_checked(b, module, require, b.load(address), shape, dtype, strict=True))
    buf = b.load(item(SPARE))
    b.call(api["nbjax_Py_IncRef"], [buf])  # (the result's: no other call takes it now)
    _run_unlocked(b, api, none, [buf] + inputs, inputs, call)
    array = b.call(api["nbjax_PyType_GenericAlloc"], [_global(module, _ARRAY),
                                                        ir.Constant(I64, 0)])
    with b.if_then(b.icmp_unsigned("==", array, ir.Constant(I8P, None))):
        b.call(api["nbjax_Py_DecRef"], [buf])
    fail_if_null(array)
    for slot, value in (("_host", buf), ("_buffer", none), ("_aval", b.load(item(AVAL))),
                        ("_device", b.load(item(DEVICE)))):
        if slot != "_host":  # (the buffer's reference is already the Array's)
            b.call(api["nbjax_Py_IncRef"], [value])
        b.store(value, b.bitcast(b.gep(array, [ir.Constant(I64, ARRAY_SLOTS[slot])]),
                                 I8P.as_pointer()))
    b.ret(array)


def _free_spare(b, api, item, fail_if_null):
    """Make the state's first spare one nothing else refers to: the other spare if that
    one is (swapped), else a new buffer (``make_buffer()``)."""
    def busy(pointer):
        return b.icmp_signed("!=", _word(b, b.load(pointer), 0, I64), ir.Constant(I64, 1))
    with b.if_then(busy(item(SPARE))):
        with b.if_then(b.not_(busy(item(OTHER_SPARE)))):
            first, other = b.load(item(SPARE)), b.load(item(OTHER_SPARE))
            b.store(other, item(SPARE))
            b.store(first, item(OTHER_SPARE))
    with b.if_then(busy(item(SPARE))):
        made = b.call(api["nbjax_PyObject_CallNoArgs"], [b.load(item(MAKE_BUFFER))])
        fail_if_null(made)
        old = b.load(item(SPARE))  # (read again: the call may have let another thread run)
        b.store(made, item(SPARE))
        b.call(api["nbjax_Py_DecRef"], [old])


def _word(b, pointer, offset, kind=I8P):
    """The ``kind`` at ``pointer + offset``."""
    return b.load(b.bitcast(b.gep(pointer, [ir.Constant(I64, offset)]), kind.as_pointer()))


def _requirer(b, entry, api, refusal):
    """``require(condition)``: ``b`` continues where ``condition`` holds; elsewhere the
    entry returns ``refusal`` (a new reference to it)."""
    reject = entry.append_basic_block("reject")
    with b.goto_block(reject):
        b.call(api["nbjax_Py_IncRef"], [refusal])
        b.ret(refusal)

    def require(condition):
        ok = entry.append_basic_block("ok")
        b.cbranch(condition, ok, reject)
        b.position_at_end(ok)
    return require


def checkable(arrays):
    """Whether an entry can check arrays of these ``(shape, dtype)``s: their dtypes are
    among those ``register`` names."""
    return all(np.dtype(dtype) in _CHECKABLE for _, dtype in arrays)


_CHECKABLE = frozenset(dtypes.SUPPORTED)


def _global(module, name):
    """The address of the process's symbol ``name``, as an ``i8*``."""
    return module.globals.get(name) or ir.GlobalVariable(module, I8, name)


def _checked(b, module, require, obj, shape, dtype, strict=False):
    """The NumPy array of an entry's argument ``obj``, an Array's its ``_host``: ``b``
    continues (``require``) where it is an ndarray of ``shape`` and ``dtype``, C-contiguous
    and aligned (the fields ``CHECKED_FIELDS``), or an Array of one (``strict``: whose aval
    is a strong ShapedArray)."""
    def field(obj, offset, kind):
        return _word(b, obj, offset, kind)

    obj = _host_if_array(b, module, obj, require, strict)
    require(b.icmp_unsigned("!=", obj, ir.Constant(I8P, None)))
    require(b.icmp_unsigned("==", field(obj, TYPE_OFFSET, I8P), _global(module, _NDARRAY)))
    flags = field(obj, CHECKED_FIELDS["flags"], I32)
    required = ir.Constant(I32, REQUIRED_FLAGS)
    require(b.icmp_unsigned("==", b.and_(flags, required), required))
    require(b.icmp_unsigned("==", field(obj, CHECKED_FIELDS["descr"], I8P),
                            _global(module, _DTYPE + np.dtype(dtype).name)))
    require(b.icmp_signed("==", field(obj, CHECKED_FIELDS["nd"], I32),
                          ir.Constant(I32, len(shape))))
    if shape:
        dims = field(obj, CHECKED_FIELDS["dimensions"], I64.as_pointer())
        same = [b.icmp_signed("==", b.load(b.gep(dims, [ir.Constant(I64, i)])),
                              ir.Constant(I64, n)) for i, n in enumerate(shape)]
        require(functools.reduce(b.and_, same))
    return obj


def _host_if_array(b, module, obj, require, strict):
    """``obj._host`` (possibly null: a slot never set) if ``obj`` is an ``Array``, else
    ``obj``; where ``strict``, an Array's aval must be a ShapedArray whose ``weak_type`` is
    False (``require``)."""
    is_array = b.icmp_unsigned("==", _word(b, obj, TYPE_OFFSET), _global(module, _ARRAY))
    before = b.block
    with b.if_then(is_array):
        host = _word(b, obj, HOST_OFFSET)
        if strict:
            aval = _word(b, obj, ARRAY_SLOTS["_aval"])
            require(b.icmp_unsigned("==", _word(b, aval, TYPE_OFFSET), _global(module, _SHAPED)))
            require(b.icmp_unsigned("==", _word(b, aval, WEAK_OFFSET), _global(module, _FALSE)))
        read = b.block
    merged = b.phi(I8P)
    merged.add_incoming(obj, before)
    merged.add_incoming(host, read)
    return merged


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]


def definition(address, name):
    """The method definition of the entry at ``address``, which ``builtin`` makes function
    objects of: it must live as long as they do (they point to it)."""
    return _MethodDef(name.encode(), address, METH_FASTCALL, None)


def builtin(definition, state=None):
    """A builtin function object calling the entry of ``definition``; ``state`` is its
    ``self`` (a checked call's state), which the entry receives first."""
    return _new_function(ctypes.addressof(definition), state, None)

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
A *strict* entry (the builtin made with ``self`` True: ``builtin(..., strict=True)``) also
refuses an Array whose aval is weakly typed (its ``_aval``, at ``AVAL_OFFSET``, must be
exactly a ``ShapedArray`` whose ``weak_type``, at ``WEAK_OFFSET``, is False): then what it
takes (an exact ndarray or a strong Array of the shape and dtype compiled for) is all a
jitted call's signature is, so jit's last-call shortcut can let it check the arguments.
A control-flow entry trusts its caller: only the executables call it, with C-contiguous
arrays of the dtypes and sizes the function was compiled for, in its order.

The offsets are checked when this module loads (``_layout_as_expected``), and those the
machine code depends on beyond NumPy's and CPython's fixed layouts (``HOST_OFFSET``,
``AVAL_OFFSET``, ``WEAK_OFFSET``) are part of the symbol names it links to: code from the disk cache made for another layout
finds no such symbol, and is compiled again.
"""

import ctypes
import functools

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ...core import Array, ShapedArray, dtypes
from ..llvm import I8, I32, I64, declare, entry_alloca

I8P = I8.as_pointer()
SUFFIX = "_py"
METH_FASTCALL = 0x80

# PyArrayObject (NumPy's C struct of an array) is the object header followed by
# ``char *data``: reading that field is what ``PyArray_DATA`` does in C. The fields a
# kernel's entry checks follow (the struct is the same in NumPy 1 and 2): ``int nd``,
# ``npy_intp *dimensions``, then past ``strides`` and ``base``, ``PyArray_Descr *descr``
# and ``int flags``; the object header starts with the reference count, then the type.
DATA_OFFSET = object.__basicsize__
TYPE_OFFSET = DATA_OFFSET - 8
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


HOST_OFFSET = _slot_offset(Array, "_host")
AVAL_OFFSET = _slot_offset(Array, "_aval")
WEAK_OFFSET = _slot_offset(ShapedArray, "weak_type")

# The Python C API the entries call, registered under names of ours (``register``).
_API = {"nbjax_Py_IncRef": ("Py_IncRef", ir.VoidType(), [I8P]),
        "nbjax_Py_DecRef": ("Py_DecRef", ir.VoidType(), [I8P]),
        "nbjax_PyEval_SaveThread": ("PyEval_SaveThread", I8P, []),
        "nbjax_PyEval_RestoreThread": ("PyEval_RestoreThread", ir.VoidType(), [I8P]),
        "nbjax_PyLong_FromLong": ("PyLong_FromLong", I8P, [I64])}
_NONE = "nbjax_Py_None"
_FALSE = "nbjax_Py_False"
_TRUE = "nbjax_Py_True"
_NDARRAY = "nbjax_ndarray_type"
_DTYPE = "nbjax_dtype_"  # + the dtype's name: the address of NumPy's dtype object
_ARRAY = f"nbjax_Array_type_host_at_{HOST_OFFSET}_aval_at_{AVAL_OFFSET}"
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
    each (shape, dtype, contiguity, alignment, byte order)."""
    if None in (HOST_OFFSET, AVAL_OFFSET, WEAK_OFFSET):
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
    llvm.add_symbol(_TRUE, id(True))
    llvm.add_symbol(_NDARRAY, id(np.ndarray))
    llvm.add_symbol(_ARRAY, id(Array))
    llvm.add_symbol(_SHAPED, id(ShapedArray))
    for dtype in dtypes.SUPPORTED:  # (NumPy keeps these objects as long as the process)
        llvm.add_symbol(_DTYPE + dtype.name, id(dtype))


def add_kernel_entry(module, fn, extent, arrays):
    """``<fn>_py(out0, ..., in0, ...)``: the kernel ``fn`` (buffers, then the start and stop
    of its outer axis) over the whole axis, ``[0, extent)``; returns None, or False if an
    argument is not an array as ``arrays`` (``(shape, dtype)`` of each) says."""
    def call(b, pointers):
        b.call(fn, [b.bitcast(p, a.type) for p, a in zip(pointers, fn.args)]
               + [ir.Constant(I64, 0), ir.Constant(I64, extent)])
        return None
    _define(module, fn.name, len(fn.args) - 2, call, arrays)


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
    api = {ours: declare(module, ours, ret, args) for ours, (_, ret, args) in _API.items()}
    none = _global(module, _NONE)
    entry = ir.Function(module, ir.FunctionType(I8P, [I8P, I8P.as_pointer(), I64]),
                        name=name + SUFFIX)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    null = b.alloca(I8P)
    b.store(ir.Constant(I8P, None), null)
    if arrays is None:
        objects = [b.load(b.gep(entry.args[1], [ir.Constant(I64, k)])) for k in range(n_args)]
    else:
        objects = _checked(b, module, entry, arrays, api)
    pointers = []
    for obj in objects:
        data = b.bitcast(b.gep(obj, [ir.Constant(I64, DATA_OFFSET)]), I8P.as_pointer())
        pointers.append(b.load(b.select(b.icmp_unsigned("==", obj, none), null, data)))
    held = objects if arrays is not None else []  # (arrays read from Arrays' slots)
    for obj in held:
        b.call(api["nbjax_Py_IncRef"], [obj])
    state = b.call(api["nbjax_PyEval_SaveThread"], [])
    status = call(b, pointers)
    b.call(api["nbjax_PyEval_RestoreThread"], [state])
    for obj in held:
        b.call(api["nbjax_Py_DecRef"], [obj])
    if status is None:
        b.call(api["nbjax_Py_IncRef"], [none])
        b.ret(none)
    else:
        b.ret(b.call(api["nbjax_PyLong_FromLong"], [b.sext(status, I64)]))


def checkable(arrays):
    """Whether an entry can check arrays of these ``(shape, dtype)``s: their dtypes are
    among those ``register`` names."""
    return all(np.dtype(dtype) in _CHECKABLE for _, dtype in arrays)


_CHECKABLE = frozenset(dtypes.SUPPORTED)


def _global(module, name):
    """The address of the process's symbol ``name``, as an ``i8*``."""
    return module.globals.get(name) or ir.GlobalVariable(module, I8, name)


def _checked(b, module, entry, arrays, api):
    """The NumPy arrays of an entry's arguments, an Array's its ``_host``: ``b`` continues
    where there are ``len(arrays)`` arguments, each an ndarray of the ``(shape, dtype)``
    there, C-contiguous and aligned (the fields ``CHECKED_FIELDS``), or (where the entry
    is strict) an Array of such an ndarray and a strong aval, and branches to a block
    returning False elsewhere."""
    reject = entry.append_basic_block("reject")
    false = _global(module, _FALSE)
    with b.goto_block(reject):
        b.call(api["nbjax_Py_IncRef"], [false])
        b.ret(false)

    def require(condition):
        ok = entry.append_basic_block("ok")
        b.cbranch(condition, ok, reject)
        b.position_at_end(ok)

    def field(obj, offset, kind):
        return b.load(b.bitcast(b.gep(obj, [ir.Constant(I64, offset)]), kind.as_pointer()))

    require(b.icmp_unsigned("==", entry.args[2], ir.Constant(I64, len(arrays))))
    strict = b.icmp_unsigned("==", entry.args[0], _global(module, _TRUE))
    objects = []
    for k, (shape, dtype) in enumerate(arrays):
        obj = _host_if_array(b, module, b.load(b.gep(entry.args[1], [ir.Constant(I64, k)])),
                             strict, require)
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
        objects.append(obj)
    return objects


def _host_if_array(b, module, obj, strict, require):
    """``obj._host`` (possibly null: a slot never set) if ``obj`` is an ``Array``, else
    ``obj``; where ``strict`` (an i1) holds, an Array's aval must be a strong
    ``ShapedArray`` (``require(condition)`` refuses the call otherwise)."""
    def word(pointer, offset):
        return b.load(b.bitcast(b.gep(pointer, [ir.Constant(I64, offset)]), I8P.as_pointer()))
    is_array = b.icmp_unsigned("==", word(obj, TYPE_OFFSET), _global(module, _ARRAY))
    before = b.block
    with b.if_then(is_array):
        host = word(obj, HOST_OFFSET)
        with b.if_then(strict):
            aval = word(obj, AVAL_OFFSET)
            require(b.icmp_unsigned("==", word(aval, TYPE_OFFSET), _global(module, _SHAPED)))
            require(b.icmp_unsigned("==", word(aval, WEAK_OFFSET), _global(module, _FALSE)))
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


def builtin(definition, strict=False):
    """A builtin function object calling the entry of ``definition``; its ``self`` (what the
    entry receives first) is True for a strict entry (see above), else None."""
    return _new_function(ctypes.addressof(definition), True if strict else None, None)

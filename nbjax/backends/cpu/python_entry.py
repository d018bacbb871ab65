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

The entry trusts its caller: only the executables call it, with C-contiguous arrays of the
dtypes and sizes the function was compiled for, in its order.
"""

import ctypes

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ..llvm import I8, I64, declare, entry_alloca

I8P = I8.as_pointer()
SUFFIX = "_py"
METH_FASTCALL = 0x80

# PyArrayObject (NumPy's C struct of an array) is the object header followed by
# ``char *data``: reading that field is what ``PyArray_DATA`` does in C.
DATA_OFFSET = object.__basicsize__

# The Python C API the entries call, registered under names of ours (``register``).
_API = {"nbjax_Py_IncRef": ("Py_IncRef", ir.VoidType(), [I8P]),
        "nbjax_PyEval_SaveThread": ("PyEval_SaveThread", I8P, []),
        "nbjax_PyEval_RestoreThread": ("PyEval_RestoreThread", ir.VoidType(), [I8P]),
        "nbjax_PyLong_FromLong": ("PyLong_FromLong", I8P, [I64])}
_NONE = "nbjax_Py_None"


def data_field(array):
    """The address of an array's first element, read from the array object: 5x faster
    from Python than ``__array_interface__`` (about 0.3 us against 1.5 us)."""
    return ctypes.c_void_p.from_address(id(array) + DATA_OFFSET).value


def _layout_as_expected():
    probe = np.arange(3.0)[1:]
    return data_field(probe) == probe.__array_interface__["data"][0]


# Entries and ``data_field`` are used only where NumPy's arrays are laid out as they
# expect (always, in CPython); elsewhere the executables call through ctypes with the
# addresses NumPy gives.
USABLE = _layout_as_expected()


def register():
    """Make the C API the entries call resolvable by every engine (once per process)."""
    for ours, (name, _, _) in _API.items():
        llvm.add_symbol(ours, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    llvm.add_symbol(_NONE, id(None))


def add_kernel_entry(module, fn, extent):
    """``<fn>_py(out0, ..., in0, ...)``: the kernel ``fn`` (buffers, then the start and stop
    of its outer axis) over the whole axis, ``[0, extent)``; returns None."""
    def call(b, pointers):
        b.call(fn, [b.bitcast(p, a.type) for p, a in zip(pointers, fn.args)]
               + [ir.Constant(I64, 0), ir.Constant(I64, extent)])
        return None
    _define(module, fn.name, len(fn.args) - 2, call)


def add_flow_entry(module, fn, n_io):
    """``<fn>_py(io0, ..., scratch)``: the control-flow function ``fn(io, scratch)`` with
    the addresses of the first ``n_io`` arrays as ``io``; returns its status."""
    def call(b, pointers):
        io = entry_alloca(b, I8P, max(n_io, 1), 8)
        for k, pointer in enumerate(pointers[:n_io]):
            b.store(pointer, b.gep(io, [ir.Constant(I64, k)]))
        return b.call(fn, [io, pointers[n_io]])
    _define(module, fn.name, n_io + 1, call)


def _define(module, name, n_args, call):
    """The entry of ``name``: ``call(builder, data pointers)`` between releasing and taking
    back the GIL; it returns None, or the int of the i32 ``call`` returns."""
    api = {ours: declare(module, ours, ret, args) for ours, (_, ret, args) in _API.items()}
    none = module.globals.get(_NONE) or ir.GlobalVariable(module, I8, _NONE)
    entry = ir.Function(module, ir.FunctionType(I8P, [I8P, I8P.as_pointer(), I64]),
                        name=name + SUFFIX)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    null = b.alloca(I8P)
    b.store(ir.Constant(I8P, None), null)
    pointers = []
    for k in range(n_args):
        obj = b.load(b.gep(entry.args[1], [ir.Constant(I64, k)]))
        data = b.bitcast(b.gep(obj, [ir.Constant(I64, DATA_OFFSET)]), I8P.as_pointer())
        pointers.append(b.load(b.select(b.icmp_unsigned("==", obj, none), null, data)))
    state = b.call(api["nbjax_PyEval_SaveThread"], [])
    status = call(b, pointers)
    b.call(api["nbjax_PyEval_RestoreThread"], [state])
    if status is None:
        b.call(api["nbjax_Py_IncRef"], [none])
        b.ret(none)
    else:
        b.ret(b.call(api["nbjax_PyLong_FromLong"], [b.sext(status, I64)]))


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]


def builtin(address, name):
    """(The builtin function object of the entry at ``address``, its method definition):
    the definition must live as long as the function, which points to it."""
    definition = _MethodDef(name.encode(), address, METH_FASTCALL, None)
    return _new_function(ctypes.addressof(definition), None, None), definition

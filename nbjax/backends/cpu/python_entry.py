"""Native functions called from Python as builtin functions, not through ctypes.

A ctypes call converts every argument: about 0.4 us for a kernel's four, with the buffers'
addresses already known, and reading an array's address from Python costs about 0.15 us
more per buffer. At a few elements that is most of a jitted call. So the functions Python
calls (a kernel run as the whole program, a control-flow or whole-program function) are
called through an entry with the C signature of a CPython builtin taking its arguments as
a vector (``METH_FASTCALL``)::

    PyObject *entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)

There are three entries, one per kind of function, compiled once per process into the
support module (``define``), not one per program: generating and compiling a program's
own entries took half of a one-kernel program's first call (4.5 of 9 ms). A builtin's
``self`` is a descriptor, an int64 NumPy array saying what to call and on what
(``KernelEntry``, ``FlowEntry``), which the entry reads; ``builtin`` makes a function
object of an entry and a descriptor: a call costs about 30 ns. The code runs in this
process only: it names the objects it compares with (None, False, the types it checks) and
the C API's functions as external symbols, which are this process's addresses (``symbols``),
and the dtypes it checks come in the descriptors.

Arguments are NumPy arrays, or None for a null pointer. An entry reads each array's data
pointer from the array object (the field after the object header, as ``PyArray_DATA``
does), lets go of the GIL, calls the function, takes the GIL back and returns None (a
kernel) or the function's status as an int (control flow).

The kernel entry checks its arguments first, as ``PyArray_Check`` and NumPy's macros would
(the fields of ``PyArrayObject``: ``CHECKED_FIELDS``): their number, and that each is an
``ndarray`` (not a subclass), C-contiguous and aligned, of the shape and dtype the kernel
was compiled for (the dtype object itself, NumPy's one object per dtype in the machine's
byte order). An ``Array`` (exactly nbjax's, with its host values) stands for its NumPy
array: the entry reads its ``_host`` slot (at ``HOST_OFFSET``, found by ``_slot_offset``),
and holds a reference to each array while it runs without the GIL (so another thread
deleting the Array cannot free the memory under it). If an argument is not as compiled,
the entry returns False without running anything, and its caller converts the arguments
and calls again (or through ctypes): so a jitted call hands it its arguments as they come
(``Executable.direct``). A kernel takes its buffers as separate arguments, so the entry
calls it through a switch on their number: kernels of more than ``MAX_KERNEL_BUFFERS``
have no entry (Python calls them through ctypes).

A kernel with one output also has a checked call: a whole jitted call of one signature,
for jit's last-call shortcut (``Executable.checked_call``), which calls it with the call's
arguments as they come, and nothing else. Its builtin's ``self`` is a list, the call's
state (``STATE``): two spare output buffers, the result's aval and device, a function
making a new buffer, the executable with the name of its ``step_times`` attribute, the
kernel's descriptor, then the values the function closes over (the kernel's first inputs).
It refuses (returns None, having run nothing) while the executable times its steps, or
when an argument is not of the signature: the checks above, and an Array must have a
strong ``ShapedArray`` for its aval (its ``_aval`` at ``ARRAY_SLOTS``, the ``weak_type``
at ``WEAK_OFFSET`` False), for the result's type depends on the arguments' weak types,
which a buffer does not show. Otherwise it runs the kernel into a spare nothing else
refers to (its reference count is 1: only the list holds it; one is made when neither is
free) and returns a new Array of it, allocated as ``object.__new__(Array)`` would
(``PyType_GenericAlloc``) with its slots set as ``host_result`` sets them.
The control-flow entry trusts its caller: only the executables call it, with C-contiguous
arrays of the dtypes and sizes the function was compiled for, in its order.

The offsets are checked when this module loads (``_layout_as_expected``); where they are
not as expected, there are no entries (``USABLE``).
"""

import ctypes
import dataclasses
import sys

import numpy as np
from llvmlite import ir

from ...core import Array, ShapedArray, dtypes
from ..llvm import I32, I64, I8, entry_alloca, for_loop

I8P = I8.as_pointer()
METH_FASTCALL = 0x80
MAX_KERNEL_BUFFERS = 32
KERNEL_ENTRY, CHECKED_CALL, FLOW_ENTRY = \
    "nbjax_kernel_entry", "nbjax_checked_call", "nbjax_flow_entry"
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
STATE = ("spare", "other spare", "aval", "device", "make_buffer", "executable", "step_times",
         "descriptor")
SPARE, OTHER_SPARE, AVAL, DEVICE, MAKE_BUFFER, EXECUTABLE, STEP_TIMES, DESCRIPTOR = \
    range(len(STATE))


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


# --- descriptors: what an entry calls, on what ---------------------------------------------

# A kernel's descriptor: its function's address, the extent of its outer axis, the number
# of its buffers, where each buffer's record starts, then the records: the address of the
# dtype object, the number of dimensions, the dimensions.
FUNCTION, EXTENT, COUNT, RECORDS = range(4)
N_IO = 1  # a control-flow function's descriptor: its address, the number of its io arrays


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    """A kernel called through the kernel entry over ``[0, extent)`` of its outer axis, on
    buffers of ``arrays`` (``(shape, dtype)`` each: its outputs, then its inputs)."""
    extent: int
    arrays: tuple  # (shape, the dtype's name): a pickled dtype is not NumPy's own object

    @classmethod
    def of(cls, extent, arrays):
        """The entry of a kernel, or None where it cannot have one: more buffers than the
        entry calls with, or a dtype not checked (see ``checkable``)."""
        if len(arrays) > MAX_KERNEL_BUFFERS or not checkable(arrays):
            return None
        return cls(extent, tuple((tuple(shape), np.dtype(dtype).name) for shape, dtype in arrays))

    def descriptor(self, address):
        records = [[id(_CHECKABLE[name]), len(shape), *shape] for shape, name in self.arrays]
        offsets = np.cumsum([RECORDS + len(self.arrays)] + [len(r) for r in records[:-1]])
        return np.array([address, self.extent, len(self.arrays), *offsets.tolist(),
                         *[w for r in records for w in r]], np.int64)

    def builtin(self, address):
        """The function object calling the kernel at ``address``."""
        return builtin(KERNEL_ENTRY, self.descriptor(address))

    def checked_call(self, address, aval, device, make_buffer, executable, consts):
        """The function object making a whole jitted call of the kernel at ``address``
        (one output, of ``aval``, on ``device``; ``make_buffer()`` a new frozen buffer for
        it), after the closed-over values ``consts`` (see the module docstring)."""
        state = [make_buffer(), make_buffer(), aval, device, make_buffer, executable,
                 "step_times", self.descriptor(address), *consts]
        return builtin(CHECKED_CALL, state)


@dataclasses.dataclass(frozen=True)
class FlowEntry:
    """A control-flow or whole-program function ``fn(io, scratch)`` called through the flow
    entry with ``n_io`` arrays, whose addresses make ``io``, and the scratch block."""
    n_io: int

    def builtin(self, address):
        return builtin(FLOW_ENTRY, np.array([address, self.n_io], np.int64))


def checkable(arrays):
    """Whether the kernel entry can check arrays of these ``(shape, dtype)``s: their dtypes
    are among those whose object it compares an array's with (NumPy's one object per dtype,
    kept for the life of the process)."""
    return all(np.dtype(dtype).name in _CHECKABLE for _, dtype in arrays)


_CHECKABLE = {dtype.name: dtype for dtype in dtypes.SUPPORTED}


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
_definitions = {}  # an entry's name -> its method definition (kept: function objects use it)


def bind(address):
    """Know the entries as compiled into the support module: ``address(name)`` is where
    entry ``name`` is (``support.register``, once per process)."""
    for name in (KERNEL_ENTRY, CHECKED_CALL, FLOW_ENTRY):
        _definitions[name] = _MethodDef(name.encode(), address(name), METH_FASTCALL, None)


def builtin(name, self):
    """A builtin function object calling entry ``name`` with ``self`` (a descriptor, or a
    checked call's state) as its first argument (once the support module is compiled)."""
    return _new_function(ctypes.addressof(_definitions[name]), self, None)


# --- the entries' code ---------------------------------------------------------------------

# The Python C API the entries call (by address: see the module docstring).
_API = {"Py_IncRef": (ir.VoidType(), [I8P]), "Py_DecRef": (ir.VoidType(), [I8P]),
        "PyEval_SaveThread": (I8P, []), "PyEval_RestoreThread": (ir.VoidType(), [I8P]),
        "PyLong_FromLong": (I8P, [I64]), "PyType_GenericAlloc": (I8P, [I8P, I64]),
        "PyObject_GetAttr": (I8P, [I8P, I8P]), "PyObject_CallNoArgs": (I8P, [I8P])}


# The objects the entries compare with or return, which the process keeps; the code names
# them (and the C API's functions) as symbols whose addresses ``symbols`` gives, so that it
# is the same in every process and can be cached on disk (``support``).
_OBJECTS = {"None": None, "False": False, "ndarray": np.ndarray, "Array": Array,
            "ShapedArray": ShapedArray}
_OBJECT_SYMBOL = "nbjax_python_"


def symbols():
    """{name: address} of what the entries' code takes from this process."""
    api = {name: ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
           for name in _API}
    return api | {_OBJECT_SYMBOL + name: id(obj) for name, obj in _OBJECTS.items()}


def layout():
    """What the entries' code depends on besides this module's source: where CPython and
    NumPy put the fields it reads, and where ``Array`` and ``ShapedArray`` hold their slots."""
    return {"object": DATA_OFFSET, "Array": ARRAY_SLOTS, "ShapedArray": WEAK_OFFSET,
            "usable": USABLE}


def define(module):
    """Add the three entries to the support module ``module``."""
    _kernel_entry(_Entry(module, KERNEL_ENTRY))
    _checked_call(_Entry(module, CHECKED_CALL))
    _flow_entry(_Entry(module, FLOW_ENTRY))


def _c(value):
    return ir.Constant(I64, value)


class _Entry:
    """An entry under construction: ``fn``, ``PyObject *(self, args, nargs)``, with a
    builder ``b`` at its start."""

    def __init__(self, module, name):
        self.fn = ir.Function(module, ir.FunctionType(I8P, [I8P, I8P.as_pointer(), I64]),
                              name=name)
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.self, self.args, self.nargs = self.fn.args

    def api(self, name, *args):
        """Call the C API's function ``name``."""
        module = self.fn.module
        fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(*_API[name]), name)
        return self.b.call(fn, args)

    def object(self, name):
        """A pointer to the object ``_OBJECTS[name]``."""
        module, symbol = self.fn.module, _OBJECT_SYMBOL + name
        return module.globals.get(symbol) or ir.GlobalVariable(module, I8, symbol)

    def word(self, pointer, offset, kind=I8P):
        """The ``kind`` at byte ``offset`` (an int or an i64) from ``pointer``."""
        offset = offset if isinstance(offset, ir.Value) else _c(offset)
        return self.b.load(self.b.bitcast(self.b.gep(pointer, [offset]), kind.as_pointer()))

    def at(self, pointer, index):
        """The element at ``index`` (an int or an i64) of ``pointer``'s array."""
        return self.b.load(self.b.gep(pointer, [index if isinstance(index, ir.Value)
                                                else _c(index)]))

    def descriptor(self, obj):
        """The words of the descriptor ``obj`` (an int64 array)."""
        return self.word(obj, DATA_OFFSET, I64.as_pointer())

    def requirer(self, refusal):
        """``require(condition)``: the builder continues where ``condition`` holds;
        elsewhere the entry returns ``refusal`` (a new reference to it)."""
        b, reject = self.b, self.fn.append_basic_block("reject")
        with b.goto_block(reject):
            self.api("Py_IncRef", refusal)
            b.ret(refusal)

        def require(condition):
            ok = self.fn.append_basic_block("ok")
            b.cbranch(condition, ok, reject)
            b.position_at_end(ok)
        return require

    def fail_if_null(self, value):
        """Return NULL (an exception is set) where ``value`` is null."""
        b, failed = self.b, self.fn.append_basic_block("failed")
        with b.goto_block(failed):
            b.ret(ir.Constant(I8P, None))
        ok = self.fn.append_basic_block("ok")
        b.cbranch(b.icmp_unsigned("==", value, ir.Constant(I8P, None)), failed, ok)
        b.position_at_end(ok)

    def checked(self, require, obj, record, strict=False):
        """The NumPy array of an argument ``obj``, an Array's its ``_host``: the builder
        continues (``require``) where it is an ndarray, C-contiguous and aligned (the fields
        ``CHECKED_FIELDS``), of the dtype object and shape of ``record`` (its words), or an
        Array of one (``strict``: whose aval is a strong ShapedArray)."""
        b = self.b
        obj = self._host_if_array(obj, require, strict)
        require(b.icmp_unsigned("!=", obj, ir.Constant(I8P, None)))
        require(b.icmp_unsigned("==", self.word(obj, TYPE_OFFSET), self.object("ndarray")))
        flags = self.word(obj, CHECKED_FIELDS["flags"], I32)
        required = ir.Constant(I32, REQUIRED_FLAGS)
        require(b.icmp_unsigned("==", b.and_(flags, required), required))
        require(b.icmp_unsigned("==", b.ptrtoint(self.word(obj, CHECKED_FIELDS["descr"]), I64),
                                self.at(record, 0)))
        nd = self.at(record, 1)
        require(b.icmp_signed("==", b.sext(self.word(obj, CHECKED_FIELDS["nd"], I32), I64), nd))
        dims = self.word(obj, CHECKED_FIELDS["dimensions"], I64.as_pointer())
        for_loop(b, _c(0), nd, lambda i: require(b.icmp_signed(
            "==", self.at(dims, i), self.at(record, b.add(i, _c(2))))), "dim")
        return obj

    def _host_if_array(self, obj, require, strict):
        """``obj._host`` (possibly null: a slot never set) if ``obj`` is an ``Array``, else
        ``obj``; where ``strict``, an Array's aval must be a ShapedArray whose ``weak_type``
        is False (``require``)."""
        b = self.b
        before = b.block
        with b.if_then(b.icmp_unsigned("==", self.word(obj, TYPE_OFFSET), self.object("Array"))):
            host = self.word(obj, HOST_OFFSET)
            if strict:
                aval = self.word(obj, ARRAY_SLOTS["_aval"])
                require(b.icmp_unsigned("==", self.word(aval, TYPE_OFFSET),
                                        self.object("ShapedArray")))
                require(b.icmp_unsigned("==", self.word(aval, WEAK_OFFSET), self.object("False")))
            read = b.block
        merged = b.phi(I8P)
        merged.add_incoming(obj, before)
        merged.add_incoming(host, read)
        return merged

    def check_all(self, require, descriptor, objects, first, source, strict=False):
        """Check buffers ``first`` to the last of the kernel of ``descriptor``, the k-th
        taken from ``source(k)`` (the address of a ``PyObject *``), into ``objects``."""
        b = self.b

        def check(k):
            record = b.gep(descriptor, [self.at(descriptor, b.add(k, _c(RECORDS)))])
            b.store(self.checked(require, b.load(source(k)), record, strict),
                    b.gep(objects, [k]))
        for_loop(b, _c(first), self.at(descriptor, COUNT), check, "arg")

    def run_kernel(self, descriptor, objects, first_held):
        """Call the kernel of ``descriptor`` on the data of ``objects`` without the GIL,
        holding a reference to each of them from ``first_held`` meanwhile."""
        b = self.b
        n = self.at(descriptor, COUNT)
        pointers = entry_alloca(b, I8P, MAX_KERNEL_BUFFERS, 8)
        for_loop(b, _c(0), n, lambda k: b.store(
            self.word(self.at(objects, k), DATA_OFFSET), b.gep(pointers, [k])), "data")
        for_loop(b, _c(first_held), n, lambda k: self.api("Py_IncRef", self.at(objects, k)),
                 "hold")
        state = self.api("PyEval_SaveThread")
        self._call_with_count(self.at(descriptor, FUNCTION), pointers, n,
                              self.at(descriptor, EXTENT))
        self.api("PyEval_RestoreThread", state)
        for_loop(b, _c(first_held), n, lambda k: self.api("Py_DecRef", self.at(objects, k)),
                 "release")

    def _call_with_count(self, address, pointers, n, extent):
        """``fn(pointers[0], ..., pointers[n - 1], 0, extent)`` for the function at
        ``address``: a switch on ``n`` (at most ``MAX_KERNEL_BUFFERS``)."""
        b = self.b
        done = self.fn.append_basic_block("called")
        switch = b.switch(n, done)
        for count in range(MAX_KERNEL_BUFFERS + 1):
            case = self.fn.append_basic_block(f"call_{count}")
            switch.add_case(_c(count), case)
            b.position_at_end(case)
            kind = ir.FunctionType(ir.VoidType(), [I8P] * count + [I64, I64])
            b.call(b.inttoptr(address, kind.as_pointer()),
                   [self.at(pointers, k) for k in range(count)] + [_c(0), extent])
            b.branch(done)
        b.position_at_end(done)

    def return_none(self):
        none = self.object("None")
        self.api("Py_IncRef", none)
        self.b.ret(none)


def _kernel_entry(e):
    """``entry(descriptor, out0, ..., in0, ...)``: the kernel over its whole outer axis;
    returns None, or False if an argument is not as the descriptor says."""
    b = e.b
    descriptor = e.descriptor(e.self)
    require = e.requirer(e.object("False"))
    require(b.icmp_unsigned("==", e.nargs, e.at(descriptor, COUNT)))
    objects = entry_alloca(b, I8P, MAX_KERNEL_BUFFERS, 8)
    e.check_all(require, descriptor, objects, 0, lambda k: b.gep(e.args, [k]))
    e.run_kernel(descriptor, objects, 0)
    e.return_none()


def _checked_call(e):
    """``entry(state, in0, ...)`` (see the module docstring): the kernel on a spare output
    buffer and the closed-over values and arguments; returns the new Array, or None if it
    refused."""
    b, state = e.b, e.self
    items = e.word(state, ITEMS_OFFSET, I8P.as_pointer())

    def item(k):
        return b.gep(items, [k if isinstance(k, ir.Value) else _c(k)])
    none = e.object("None")
    require = e.requirer(none)
    timing = e.api("PyObject_GetAttr", b.load(item(EXECUTABLE)), b.load(item(STEP_TIMES)))
    e.fail_if_null(timing)
    e.api("Py_DecRef", timing)
    require(b.icmp_unsigned("==", timing, none))
    _free_spare(e, item)  # (before the checks: it may run Python code)
    n_consts = b.sub(e.word(state, LENGTH_OFFSET, I64), _c(len(STATE)))
    require(b.icmp_signed(">=", n_consts, _c(0)))
    descriptor = e.descriptor(b.load(item(DESCRIPTOR)))
    require(b.icmp_unsigned("==", b.add(e.nargs, n_consts),
                            b.sub(e.at(descriptor, COUNT), _c(1))))
    objects = entry_alloca(b, I8P, MAX_KERNEL_BUFFERS, 8)

    def source(k):  # buffer k (the output is 0): closed-over values, then arguments
        value = b.sub(k, _c(1))
        return b.select(b.icmp_signed("<", value, n_consts), item(b.add(value, _c(len(STATE)))),
                        b.gep(e.args, [b.sub(value, n_consts)]))
    e.check_all(require, descriptor, objects, 1, source, strict=True)
    buf = b.load(item(SPARE))
    e.api("Py_IncRef", buf)  # (the result's: no other call takes it now)
    b.store(buf, objects)
    e.run_kernel(descriptor, objects, 1)
    array = e.api("PyType_GenericAlloc", e.object("Array"), _c(0))
    with b.if_then(b.icmp_unsigned("==", array, ir.Constant(I8P, None))):
        e.api("Py_DecRef", buf)
    e.fail_if_null(array)
    for slot, value in (("_host", buf), ("_buffer", none), ("_aval", b.load(item(AVAL))),
                        ("_device", b.load(item(DEVICE)))):
        if slot != "_host":  # (the buffer's reference is already the Array's)
            e.api("Py_IncRef", value)
        b.store(value, b.bitcast(b.gep(array, [_c(ARRAY_SLOTS[slot])]), I8P.as_pointer()))
    b.ret(array)


def _free_spare(e, item):
    """Make the state's first spare one nothing else refers to: the other spare if that
    one is (swapped), else a new buffer (``make_buffer()``)."""
    b = e.b

    def busy(pointer):
        return b.icmp_signed("!=", e.word(b.load(pointer), 0, I64), _c(1))
    with b.if_then(busy(item(SPARE))):
        with b.if_then(b.not_(busy(item(OTHER_SPARE)))):
            first, other = b.load(item(SPARE)), b.load(item(OTHER_SPARE))
            b.store(other, item(SPARE))
            b.store(first, item(OTHER_SPARE))
    with b.if_then(busy(item(SPARE))):
        made = e.api("PyObject_CallNoArgs", b.load(item(MAKE_BUFFER)))
        e.fail_if_null(made)
        old = b.load(item(SPARE))  # (read again: the call may have let another thread run)
        b.store(made, item(SPARE))
        e.api("Py_DecRef", old)


def _flow_entry(e):
    """``entry(descriptor, io0, ..., scratch)``: the function ``fn(io, scratch)`` with the
    addresses of the io arrays as ``io`` (None: a null pointer); returns its status."""
    b = e.b
    descriptor = e.descriptor(e.self)
    n_io = e.at(descriptor, N_IO)
    io = b.alloca(I8P, size=b.add(n_io, _c(1)))
    none = e.object("None")

    def data(k):
        obj = e.at(e.args, k)
        with b.if_else(b.icmp_unsigned("==", obj, none)) as (is_none, otherwise):
            with is_none:
                b.store(ir.Constant(I8P, None), b.gep(io, [k]))
            with otherwise:
                b.store(e.word(obj, DATA_OFFSET), b.gep(io, [k]))
    for_loop(b, _c(0), b.add(n_io, _c(1)), data, "io")  # (the scratch block last)
    kind = ir.FunctionType(I32, [I8P.as_pointer(), I8P])
    state = e.api("PyEval_SaveThread")
    status = b.call(b.inttoptr(e.at(descriptor, FUNCTION), kind.as_pointer()),
                    [io, e.at(io, n_io)])
    e.api("PyEval_RestoreThread", state)
    b.ret(e.api("PyLong_FromLong", b.sext(status, I64)))

"""The BLAS and LAPACK routines compiled code calls, found by address in the library NumPy
or SciPy ships (the emitters are ``blas``, for matrix products, and ``lapack``, for
decompositions and triangular solves).

NumPy's wheels carry OpenBLAS built with 64-bit integers (``scipy_openblas64_``), which
exports the Fortran routines of BLAS and LAPACK alike (``scipy_sgemm_64_``,
``scipy_dpotrf_64_``): compiled code calls that one when it is there, the library NumPy's
own products and ``numpy.linalg`` use (one thread pool, not two competing for the cores),
found in a few milliseconds. Otherwise (NumPy built against another BLAS) it calls SciPy's,
which SciPy exports as PyCapsules (``scipy.linalg.cython_blas.__pyx_capi__`` and
``cython_lapack``'s, the route numba takes; importing scipy.linalg takes 150-300 ms) with
32-bit integers. The routines' addresses are registered as symbols (``nbjax_sgemm_i64``...:
the name says the integer width, so code compiled for one library never calls the other),
which compiled code declares and calls; an object file from the disk cache resolves them
again when it is loaded, so no address is baked into it. The matrix products are also
registered as computed on the calling thread (``nbjax_sgemm_i64_on_caller``...): those of a
second instance of NumPy's OpenBLAS that runs on one thread (``openblas_copy``), which the
worker pool calls in pieces; where there is none, the same routines as the others.

Every argument of a Fortran routine is passed by reference (``by_reference`` makes the
pointer of a constant); ``call`` passes them all as ``i8*``, so the routines need no
signatures here: the emitters pass each one's arguments in its documented order.
"""

import ctypes
import functools
import glob
import os

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from ..llvm import I8, I32, I64, declare
from . import openblas_copy

PREFIX = "nbjax_"  # of the names the routines are registered under
# The routines, each in a float32 ("s") and a float64 ("d") variant, by the SciPy module
# exporting them; the matrix products also in their complex64 ("c") and complex128 ("z")
# ones.
BLAS = ("gemm", "gemv", "trsm")
LAPACK = ("potrf", "getrf", "geqrf", "orgqr", "syevd", "gesdd")
COMPLEX_BLAS = ("gemm", "gemv")
BLAS_ON_CALLER = ("gemm", "gemv")  # also computed on the calling thread alone
ON_CALLER = "_on_caller"
LETTERS = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
REAL = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}
# The scalars (alpha, beta) of the dtypes ``gemm`` computes in: a complex one is two floats.
SCALARS = {**REAL, np.dtype(np.complex64): ir.ArrayType(ir.FloatType(), 2),
           np.dtype(np.complex128): ir.ArrayType(ir.DoubleType(), 2)}
I8P = I8.as_pointer()


def _names(routines, letters="sd"):
    return [letter + r for r in routines for letter in letters]


def _all_names():
    return _names(BLAS + LAPACK) + _names(COMPLEX_BLAS, "cz")


def scalar(dtype, value):
    """The constant ``value`` (a real number) as a routine's scalar argument of ``dtype``."""
    t = SCALARS[np.dtype(dtype)]
    return ir.Constant(t, [value, 0.0] if isinstance(t, ir.ArrayType) else value)


def called(symbols):
    """Whether any of the symbol names ``symbols`` is one of the routines' (``library``)."""
    routines = set(_all_names())
    return any(s.startswith(PREFIX) and s[len(PREFIX):].rpartition("_i")[0] in routines
               for s in symbols)


def _capsule_address(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule, name(capsule))


def _numpy_openblas():
    """{routine: address} of the OpenBLAS NumPy's wheel ships (64-bit integers), its
    products (``ON_CALLER``) also from a copy of it on one thread where one loads, or
    None."""
    for path in _numpy_openblas_paths():
        try:
            found = _openblas_routines(ctypes.CDLL(path), _all_names())
        except (OSError, AttributeError):
            continue
        copy = openblas_copy.load(path, "scipy_openblas_get_num_threads64_")
        if copy is not None:
            found.update({r + ON_CALLER: address for r, address in
                          _openblas_routines(copy, _names(BLAS_ON_CALLER, "sdcz")).items()})
        return found
    return None


def _numpy_openblas_paths():
    """The files of the OpenBLAS NumPy's wheel may ship (none where it ships another)."""
    where = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    return sorted(glob.glob(os.path.join(where, "libscipy_openblas64_*.so*")))


def _openblas_routines(lib, names):
    """{routine: address} of the routines ``names`` in ``lib``, NumPy's OpenBLAS or a copy."""
    return {r: ctypes.cast(getattr(lib, f"scipy_{r}_64_"), ctypes.c_void_p).value
            for r in names}


def _scipy_routines():
    """{routine: address} of SciPy's BLAS and LAPACK (32-bit integers)."""
    import scipy.linalg.cython_blas  # (here: it costs 150-300 ms, paid only when needed)
    import scipy.linalg.cython_lapack
    found = {}
    for module, names in ((scipy.linalg.cython_blas, _names(BLAS) + _names(COMPLEX_BLAS, "cz")),
                          (scipy.linalg.cython_lapack, _names(LAPACK))):
        found.update({r: _capsule_address(module.__pyx_capi__[r]) for r in names})
    return found


_addresses = {}  # {routine: address} of the library ``library`` found


@functools.lru_cache(maxsize=None)
def library():
    """The integer type of the library compiled code calls (I64 or I32), its routines
    registered as ``nbjax_<routine>_i<bits>`` for every engine (once per process)."""
    found, int_type = _numpy_openblas(), I64
    if found is None:
        found, int_type = _scipy_routines(), I32
    for name in _names(BLAS_ON_CALLER, "sdcz"):
        found.setdefault(name + ON_CALLER, found[name])
    for routine, address in found.items():
        llvm.add_symbol(_symbol(routine, int_type), address)
    _addresses.clear()
    _addresses.update(found)
    return int_type


def workspace(routine, dtype, arguments):
    """The workspace size (in elements) ``routine`` asks for in its variant for ``dtype``,
    called here with ``lwork = -1`` (LAPACK's query) on ``arguments``: Python values in the
    routine's order (``host_call``'s), None where it takes an array (a one-element dummy),
    the ``lwork`` query's ``"query"`` and the array it answers in, ``"work"``. Asked when
    compiling: the size decides which blocked code the routine runs, so the reference
    (NumPy, which asks too) and compiled code round alike."""
    answer = np.zeros(1, np.dtype(dtype))
    stand_ins = {"work": answer, "query": -1}
    host_call(routine, dtype, [np.zeros(1, np.float64) if a is None else
                               stand_ins.get(a, a) if isinstance(a, str) else a
                               for a in arguments])()
    return max(int(answer[0]), 1)


def host_call(routine, dtype, arguments, on_caller=False):
    """A function of no arguments calling ``routine`` in its variant for ``dtype`` from
    Python, each of ``arguments`` passed by reference, as Fortran takes them: an array as
    it is, a one-letter string as a character, an int in the library's integer type, a
    float as a scalar of ``dtype``."""
    integer = np.int64 if library().width == 64 else np.int32
    kept = [a if isinstance(a, np.ndarray) else
            np.array([a.encode()], "S1") if isinstance(a, str) else
            np.array([a], integer if isinstance(a, (int, np.integer)) else dtype)
            for a in arguments]
    pointers = [a.ctypes.data for a in kept]
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(pointers))(
        address(routine, dtype, on_caller))

    def call(kept=kept):  # (the arrays live as long as the function)
        function(*pointers)
    return call


def _symbol(routine, int_type):
    """The name ``routine`` ("sgemm", "sgemm_on_caller"...) is registered under."""
    name, on_caller, _ = routine.partition(ON_CALLER)
    return f"{PREFIX}{name}_i{int_type.width}{on_caller}"


def call(b, routine, dtype, pointers, on_caller=False):
    """Call ``routine`` ("gemm", "potrf"...) in its variant for ``dtype`` with the builder
    ``b``, its arguments the ``pointers`` (any pointer type), in the routine's order;
    ``on_caller``: computed on the calling thread alone (``BLAS_ON_CALLER`` routines)."""
    name = LETTERS[np.dtype(dtype)] + routine + (ON_CALLER if on_caller else "")
    fn = declare(b.module, _symbol(name, library()), ir.VoidType(), [I8P] * len(pointers))
    b.call(fn, [b.bitcast(p, I8P) for p in pointers])


def address(routine, dtype, on_caller=False):
    """The address of ``routine`` in its variant for ``dtype`` (``call``'s arguments)."""
    library()
    return _addresses[LETTERS[np.dtype(dtype)] + routine + (ON_CALLER if on_caller else "")]


def by_reference(b, setup, value):
    """A pointer to ``value`` (Fortran passes every argument by reference): a slot made by
    the ``setup`` builder (the function's first block, so a call inside a loop does not
    grow the stack), written by ``b`` where the call is."""
    slot = setup.alloca(value.type)
    b.store(value, slot)
    return slot


def character(b, setup, letter):
    """A pointer to the one-character argument ``letter`` ("N", "T", "L", "U"...)."""
    return by_reference(b, setup, ir.Constant(I8, ord(letter)))


def integer(b, setup, value):
    """A pointer to the integer ``value`` in the library's integer type."""
    return by_reference(b, setup, ir.Constant(library(), value))


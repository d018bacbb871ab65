"""Matrix products called from native code: the BLAS that SciPy ships, by function pointer.

SciPy exports its BLAS routines as PyCapsules (``scipy.linalg.cython_blas.__pyx_capi__``,
the route numba takes). Their addresses are registered as the symbols ``nbjax_sgemm`` and
``nbjax_dgemm``, which compiled code declares and calls; an object file from the disk cache
resolves them again when it is loaded, so no address is baked into cached code.

``gemm`` emits one call for a ``dot_general`` of two matrices (one contracting axis each, no
batch axes, float32 or float64, the result in that dtype): BLAS is column-major, and a
row-major matrix is its transpose there, so ``C = A B`` is computed as ``C^T = B^T A^T``
with each operand transposed (``"T"``) or not according to which of its axes is contracted.
"""

import ctypes
import threading

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from ..llvm import I8, I32, declare

_ROUTINES = {np.dtype(np.float32): ("sgemm", ir.FloatType()),
             np.dtype(np.float64): ("dgemm", ir.DoubleType())}
_lock = threading.Lock()
_registered = False


def _capsule_address(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule, name(capsule))


def register():
    """Make ``nbjax_sgemm``/``nbjax_dgemm`` resolvable by every engine (once)."""
    global _registered
    with _lock:
        if not _registered:
            # Imported here: scipy.linalg costs about 150 ms to import, which only programs
            # whose loops hold matrix products need to pay.
            import scipy.linalg.cython_blas
            capsules = scipy.linalg.cython_blas.__pyx_capi__
            for routine, _ in _ROUTINES.values():
                llvm.add_symbol(f"nbjax_{routine}", _capsule_address(capsules[routine]))
            _registered = True


def supports(eqn):
    """Whether ``eqn`` is a ``dot_general`` that ``gemm`` emits: two matrices of one float
    dtype, one contracting axis each, no batch axes, the result in the operands' dtype."""
    if eqn.primitive.name != "dot_general":
        return False
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval for a in eqn.invars)
    out = eqn.outvars[0].aval
    return (lhs.ndim == rhs.ndim == 2 and len(lc) == len(rc) == 1 and not lb and not rb
            and lhs.dtype == rhs.dtype == out.dtype and lhs.dtype in _ROUTINES)


def gemm(b, setup, eqn, lhs, rhs, out):
    """Emit, with the builder ``b``, the BLAS call computing ``eqn`` (``supports(eqn)``) from
    the buffers ``lhs`` and ``rhs`` (``i8*``) into ``out``; ``setup`` builds in the
    function's entry block."""
    register()
    (lc, rc), _ = eqn.params["dimension_numbers"]
    (m, k), (n, _) = _rows_cols(eqn.invars[0].aval.shape, lc[0]), \
        _rows_cols(eqn.invars[1].aval.shape, rc[0])
    if m == 0 or n == 0:
        return
    routine, real = _ROUTINES[np.dtype(eqn.outvars[0].aval.dtype)]
    i8p, i32p, realp = I8.as_pointer(), I32.as_pointer(), real.as_pointer()
    fn = declare(b.module, f"nbjax_{routine}", ir.VoidType(),
                 [i8p, i8p, i32p, i32p, i32p, realp, realp, i32p, realp, i32p, realp, realp,
                  i32p])
    lhs_shape, rhs_shape = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    # Column-major: C^T (n x m) = op(B) (n x k) times op(A) (k x m).
    # A row-major operand is, column-major, its transpose with its row length as leading
    # dimension; it is transposed again ("T") when its contracted axis is the other one.
    trans_b, ld_b = "N" if rc[0] == 0 else "T", rhs_shape[1]
    trans_a, ld_a = "N" if lc[0] == 1 else "T", lhs_shape[1]
    args = [_by_reference(b, setup, ir.Constant(I8, ord(trans_b))),
            _by_reference(b, setup, ir.Constant(I8, ord(trans_a))),
            *(_by_reference(b, setup, ir.Constant(I32, v)) for v in (n, m, k)),
            _by_reference(b, setup, ir.Constant(real, 1.0)),
            b.bitcast(rhs, realp), _by_reference(b, setup, ir.Constant(I32, max(ld_b, 1))),
            b.bitcast(lhs, realp), _by_reference(b, setup, ir.Constant(I32, max(ld_a, 1))),
            _by_reference(b, setup, ir.Constant(real, 0.0)),
            b.bitcast(out, realp), _by_reference(b, setup, ir.Constant(I32, n))]
    b.call(fn, args)


def _rows_cols(shape, contracting):
    """(free size, contracted size) of a matrix contracted along ``contracting``."""
    return shape[1 - contracting], shape[contracting]


def _by_reference(b, setup, value):
    """A pointer to ``value`` (Fortran passes every argument by reference): a slot made by
    the ``setup`` builder (the function's first block, so a call inside a loop does not
    grow the stack), written by ``b`` where the call is."""
    slot = setup.alloca(value.type)
    b.store(value, slot)
    return slot

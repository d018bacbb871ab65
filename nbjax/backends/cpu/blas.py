"""Matrix products called from native code: the BLAS NumPy or SciPy ships, by address.

NumPy's wheels carry OpenBLAS built with 64-bit integers (``scipy_openblas64_``, its Fortran
routines named ``scipy_sgemm_64_``): compiled code calls that one when it is there, the
library NumPy's own products use (one thread pool, not two competing for the cores), found
in a few milliseconds. Otherwise (NumPy built against another BLAS) it calls SciPy's, which
SciPy exports as PyCapsules (``scipy.linalg.cython_blas.__pyx_capi__``, the route numba
takes; importing scipy.linalg takes 150-300 ms). The routines' addresses are registered as
symbols (``nbjax_sgemm_i64``...: the name says the integer width, so code compiled for one
library never calls the other), which compiled code declares and calls; an object file from
the disk cache resolves them again when it is loaded, so no address is baked into it.

``gemm`` emits the calls for a ``dot_general`` that is a batch of matrix products: float32
or float64, the result in that dtype, the batch axes leading on both operands, and each
operand's other axes two contiguous groups, its free axes and its contracting axes (in
either order): the operand is then a row-major matrix of (free size x contracted size), or
its transpose, at a fixed stride per batch element. That covers ``x @ w`` of any rank
against a matrix, ``einsum("bqd,bkd->bqk")`` and the transposes that autodiff makes of
them. BLAS is column-major, and a row-major matrix is its transpose there, so ``C = A B``
is computed as ``C^T = B^T A^T``, each operand transposed (``"T"``) or not according to
which of its groups comes last; a loop over the batch makes one call per element.
"""

import ctypes
import functools
import glob
import os

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from ..llvm import I8, I32, I64, declare, for_loop

PREFIX = "nbjax_"  # of the names the routines are registered under

_ROUTINES = {np.dtype(np.float32): ("sgemm", ir.FloatType()),
             np.dtype(np.float64): ("dgemm", ir.DoubleType())}


def _capsule_address(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule, name(capsule))


def _numpy_openblas():
    """{routine: address} of the OpenBLAS NumPy's wheel ships (64-bit integers), or None."""
    where = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(where, "libscipy_openblas64_*.so*"))):
        try:
            lib = ctypes.CDLL(path)
            return {r: ctypes.cast(getattr(lib, f"scipy_{r}_64_"), ctypes.c_void_p).value
                    for r, _ in _ROUTINES.values()}
        except (OSError, AttributeError):
            continue
    return None


def _scipy_blas():
    """{routine: address} of SciPy's BLAS (32-bit integers)."""
    import scipy.linalg.cython_blas  # (here: it costs 150-300 ms, paid only when needed)
    capsules = scipy.linalg.cython_blas.__pyx_capi__
    return {r: _capsule_address(capsules[r]) for r, _ in _ROUTINES.values()}


@functools.lru_cache(maxsize=None)
def library():
    """The integer type of the BLAS compiled code calls (I64 or I32), its routines
    registered as ``nbjax_<routine>_i<bits>`` for every engine (once per process)."""
    found, int_type = _numpy_openblas(), I64
    if found is None:
        found, int_type = _scipy_blas(), I32
    for routine, address in found.items():
        llvm.add_symbol(f"{PREFIX}{routine}_i{int_type.width}", address)
    return int_type


def supports(eqn):
    """Whether ``eqn`` is a ``dot_general`` (the primitive of the ``"matrix product"``
    library lowering) that ``gemm`` emits (see the module docstring)."""
    return eqn.primitive.lowerings.get("library") == "matrix product" \
        and _products(eqn) is not None


def _products(eqn):
    """(batch, (m, k, lhs contracted last), (n, k, rhs contracted last)) for a
    ``dot_general`` that is a batch of ``m x k`` by ``k x n`` products, else None (the
    contracted axes are in increasing order on both sides, so they pair up in order)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval for a in eqn.invars)
    if not (lhs.dtype == rhs.dtype == eqn.outvars[0].aval.dtype and lhs.dtype in _ROUTINES):
        return None
    nb = len(lb)
    if tuple(lb) != tuple(range(nb)) or tuple(rb) != tuple(range(nb)):
        return None
    a, b = _matrix(lhs.shape, nb, lc), _matrix(rhs.shape, nb, rc)
    if a is None or b is None:
        return None
    return int(np.prod(lhs.shape[:nb], dtype=np.int64)), a, b


def _matrix(shape, nb, contracting):
    """(free size, contracted size, whether the contracted group is last) of an operand
    whose axes after the ``nb`` batch axes are a free group and a contracted group (the
    contracted ones in increasing order), else None."""
    rest = list(range(nb, len(shape)))
    c = sorted(contracting)
    if list(contracting) != c or (c and c != list(range(c[0], c[-1] + 1))):
        return None
    free = [d for d in rest if d not in c]
    if free and free != list(range(free[0], free[-1] + 1)):
        return None
    last = not c or not free or c[0] > free[0]
    return _size(shape, free), _size(shape, c), last


def _size(shape, axes):
    return int(np.prod([shape[d] for d in axes], dtype=np.int64))


def gemm(b, setup, eqn, lhs, rhs, out):
    """Emit, with the builder ``b``, the BLAS calls computing ``eqn`` (``supports(eqn)``)
    from the buffers ``lhs`` and ``rhs`` (``i8*``) into ``out``; ``setup`` builds in the
    function's entry block."""
    int_type = library()
    batch, (m, k, a_last), (n, _, b_last) = _products(eqn)
    if batch == 0 or m == 0 or n == 0:
        return
    b_first = not b_last
    routine, real = _ROUTINES[np.dtype(eqn.outvars[0].aval.dtype)]
    size = np.dtype(eqn.outvars[0].aval.dtype).itemsize
    ints = int_type.as_pointer()
    fn = declare(b.module, f"{PREFIX}{routine}_i{int_type.width}", ir.VoidType(),
                 [I8.as_pointer()] * 2 + [ints] * 3 + [real.as_pointer()] * 2 + [ints]
                 + [real.as_pointer(), ints] + [real.as_pointer()] * 2 + [ints])
    # Column-major: C^T (n x m) = op(B) (n x k) times op(A) (k x m). A row-major operand
    # is, column-major, its transpose with its row length as leading dimension; it is
    # transposed again ("T") when its contracted group is the other one.
    ref = functools.partial(_by_reference, b, setup)
    fixed = [ref(ir.Constant(I8, ord("N" if b_first else "T"))),
             ref(ir.Constant(I8, ord("N" if a_last else "T"))),
             *(ref(ir.Constant(int_type, v)) for v in (n, m, k)), ref(ir.Constant(real, 1.0))]
    ld_b, ld_a = ref(ir.Constant(int_type, max(n if b_first else k, 1))), \
        ref(ir.Constant(int_type, max(k if a_last else m, 1)))
    zero, ld_c = ref(ir.Constant(real, 0.0)), ref(ir.Constant(int_type, n))

    def one(i):
        def at(buf, elements):  # batch element i of a buffer of such matrices
            offset = b.mul(i, ir.Constant(I64, elements * size))
            return b.bitcast(b.gep(buf, [offset]), real.as_pointer())
        b.call(fn, fixed + [at(rhs, k * n), ld_b, at(lhs, m * k), ld_a, zero,
                            at(out, m * n), ld_c])
    if batch == 1:
        one(ir.Constant(I64, 0))
    else:
        for_loop(b, ir.Constant(I64, 0), ir.Constant(I64, batch), one, "batch")


def _by_reference(b, setup, value):
    """A pointer to ``value`` (Fortran passes every argument by reference): a slot made by
    the ``setup`` builder (the function's first block, so a call inside a loop does not
    grow the stack), written by ``b`` where the call is."""
    slot = setup.alloca(value.type)
    b.store(value, slot)
    return slot

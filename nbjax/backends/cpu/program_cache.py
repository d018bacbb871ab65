"""The disk cache of whole programs: a jitted function that an earlier process compiled is
loaded, not compiled again: no passes, no fusion planning, no code generation, no LLVM.

An entry holds what ``executable.assemble`` needs besides machine code (the optimised
jaxpr, its fusion plan, the passes' log and the code generator's ``Layout``, which keeps
the kernels' IR texts for the reports), pickled in three parts, then the module's object
code, then (the entry's detail, read only when asked for) the module's optimised IR. The
first part holds what loading and calling need first: the symbols the code calls and, for
a program that is one native call, its ``executable.ProgramCall``; the second the jaxpr,
plan and layout, without what only
reports read (the plan's decisions, the kernels' bodies); the third that, and the passes'
log. A loaded program that is one native call unpickles the second part when a report
first asks for any of it (one of steps at once, to make its steps), and the third then.
Its key is the SHA-256 of the traced jaxpr, pickled (primitives by name, variables
numbered in the order they appear, types and constants by value, whichever objects hold
them) without its equations' source lines and provenance, of the positions of the inputs
its calls donate (``compiler.donation``), of nbjax's source code (an edit anywhere makes
new keys), of ``cache.environment()`` (versions, CPU) and of the compiler's settings
(``_settings``). So a notebook run again in a new kernel finds its
programs, though its cells are files of other names; the loaded program then points at the
source lines of the new trace, equation by equation, not the old ones. A program whose
jaxpr does not pickle (a callback's lambda in its params) is compiled every time, as
before; the cache of modules (``cache``) still spares it LLVM's work.

Entries live beside the modules' in the same private directory, written and checked the same
way (atomic writes, checksums, the key inside), under their own suffix. Like machine code, a
pickle from that directory is loaded without question: the directory must be ours alone
(``cache.directory``). Before machine code is loaded, every symbol it calls is checked to
exist in this process (LLVM would abort on a missing one); an entry that fails any check is
a miss.
"""

import copyreg
import hashlib
import io
import json
import logging
import pickle
import time

import numpy as np

from ...core.abstract import ShapedArray
from ...core.jaxpr import Jaxpr, JaxprEqn, Literal, Var, subjaxprs
from ...core.source_info import Provenance, SourceInfo
from ...compiler import fusion, passes
from ...compiler.fusion import FusionPlan
from ...compiler.kernel import KernelOutput, LoopKernel
from . import (buffer_plan, cache, codegen, executable, library, routines, runtime,
               tile_choice, tiled_products)
from .target import runs_here

log = logging.getLogger(__name__)

SUFFIX = ".nbjax-program"


def key(closed_jaxpr, donated=frozenset()):
    """The entry's name for the traced ``closed_jaxpr`` whose calls donate the inputs at
    ``donated`` (another program: outputs written into their buffers), or None when it
    cannot have one (or there is no disk cache)."""
    if _directory() is None:
        return None
    digest = hashlib.sha256()
    try:
        _KeyPickler(_Digest(digest)).dump(closed_jaxpr)
    except Exception as e:  # noqa: BLE001  (anything in the params that does not pickle)
        log.debug("nbjax program cache: %s is not cached: %s", closed_jaxpr, e)
        return None
    digest.update(repr(sorted(donated)).encode())
    digest.update(cache.source_digest())
    digest.update(json.dumps({**cache.environment(), **_settings()}, sort_keys=True).encode())
    return digest.hexdigest()


def _settings():
    """The compiler's settings that shape a program besides its jaxpr (and that a user or a
    test may change): when kernels split between the cores and how many, how many math
    calls a kernel inlines, how deep a chain of fused equations grows, how much is hoisted
    out of loops, whether dead scratch is poisoned, which products are tiled (and how),
    into how many pieces a loop may be cut, which sums accumulate in float64, which loops
    run over quotients. (Which BLAS the code calls is in the names of the symbols it calls,
    checked on loading.)"""
    return {"split threshold": runtime.SPLIT_THRESHOLD, "threads": runtime.THREADS,
            "pool split work": (runtime.POOL_SPLIT_WORK, runtime.BLAS_SPLIT_WORK,
                                runtime.PIECE_GRAIN),
            "math work": runtime.MATH_WORK,
            "tiled products": (tiled_products.ROWS_MAX, tiled_products.DEPTH_MAX,
                               tiled_products.DOT_DEPTH_MIN, tiled_products.LARGE_DOT_DEPTH_MIN,
                               tiled_products.SPLIT_WORK, tiled_products.DEPTH_BLOCK,
                               tiled_products.PACKED_ROWS_MIN, tile_choice.CHOICE),
            "inline math calls": codegen.INLINE_MATH_CALLS, "loop pieces": codegen.PIECES_MAX,
            "short row": codegen.SHORT_ROW, "residue max": codegen.RESIDUE_MAX,
            "kernel depth": fusion.MAX_KERNEL_DEPTH, "hoist limit": passes.HOIST_LIMIT,
            "poison": buffer_plan.POISON}


def _nothing(obj):
    return int, ()


class _KeyPickler(pickle.Pickler):
    """The bytes a key hashes: the jaxpr pickled without its debug info (source lines and
    provenances), and without a memo (``fast``), so that they do not depend on which equal
    values (avals, shapes) happen to be one object, which differs between a first trace and
    later ones (a jitted function called inside another: its cached jaxpr shares its avals);
    its variables, which only the memo told apart, are numbered in the order they first
    appear instead.

    Without a memo, the pickler writes the name of an object's class (or reducing
    function) each time and looks it up as an import to check it: most of a key's time went
    there. So jaxprs, equations and literals are pickled as tuples of their parts (one
    name each), and the variables in them as plain numbers, with their types as plain
    tuples where they first appear."""

    def __init__(self, file):
        self.numbers = {}
        # (a table rather than ``persistent_id``, which would be called for every object;
        # read by the pickler when it is made, so set first)
        self.dispatch_table = {**copyreg.dispatch_table, SourceInfo: _nothing,
                               Provenance: _nothing, Var: self._variable, ShapedArray: _aval,
                               Jaxpr: self._jaxpr, JaxprEqn: self._equation,
                               Literal: _literal}
        super().__init__(file, protocol=5)
        self.fast = True

    def _variable(self, var):
        """A variable found elsewhere than in a jaxpr's or an equation's own lists."""
        return _Variable, tuple(self._atoms([var]))

    def _atoms(self, atoms):
        """The atoms, each variable as its number, with its type where it first appears.
        (Every equation's operands and results pass here: one loop, no call per atom.)"""
        numbers, parts = self.numbers, []
        for atom in atoms:
            if type(atom) is Var:
                number = numbers.get(id(atom))
                if number is None:
                    number = numbers[id(atom)] = len(numbers)
                    number = number, _aval_parts(atom.aval)
                atom = number
            parts.append(atom)
        return parts

    def _jaxpr(self, jaxpr):
        """A jaxpr's variables as numbers, its equations as tuples of their parts (with
        no class name each: ``_equation_parts``)."""
        return _Jaxpr, (self._atoms(jaxpr.constvars), self._atoms(jaxpr.invars),
                        self._atoms(jaxpr.outvars),
                        [self._equation_parts(e) for e in jaxpr.eqns])

    def _equation(self, eqn):
        """An equation found elsewhere than in a jaxpr's list."""
        return _Equation, self._equation_parts(eqn)

    def _equation_parts(self, eqn):
        """An equation without its source line and provenance; its primitive by name, as
        the primitive pickles itself (which checks that the name is its own)."""
        _, name = eqn.primitive.__reduce__()
        return name, self._atoms(eqn.invars), self._atoms(eqn.outvars), eqn.params


def _aval(aval):
    return _Aval, _aval_parts(aval)


def _aval_parts(aval):
    name = _DTYPE_NAMES.get(aval.dtype)
    if name is None:
        name = _DTYPE_NAMES[aval.dtype] = aval.dtype.name
    return aval.shape, name, aval.weak_type


_DTYPE_NAMES = {}  # (a dtype's name is computed in Python, in a few microseconds)


def _literal(literal):
    """A literal as its type and the bytes of its value."""
    return _Literal, (_aval_parts(literal.aval), np.asarray(literal.val).tobytes())


class _Variable:
    """What a key pickles a variable as (never unpickled)."""


class _Aval:
    """What a key pickles an array type as (never unpickled)."""


class _Jaxpr:
    """What a key pickles a jaxpr as (never unpickled)."""


class _Equation:
    """What a key pickles an equation as (never unpickled)."""


class _Literal:
    """What a key pickles a literal as (never unpickled)."""


# What only reports and views read, by class: an entry pickles it apart, after the rest,
# and a loaded program unpickles it when a report first asks (``compiler.Executable``).
_REPORT_ONLY = {LoopKernel: ("body",), KernelOutput: ("value",), FusionPlan: ("decisions",)}


class _EntryPickler(pickle.Pickler):
    """Pickles an entry's description of its program in parts, one after the other with
    one memo, so that each refers to the objects of those before (see the module's
    docstring): ``dump`` them in order, without the fields of ``_REPORT_ONLY``, then those
    fields (``dump_report``). The source lines and provenances of ``traced``'s equations
    are pickled as their positions in it (``_debug_info``)."""

    def __init__(self, file, traced):
        self.held_back = []  # (object, {field: value}): what the first part left out
        self.dispatch_table = {**copyreg.dispatch_table, SourceInfo: self._debug_info,
                               Provenance: self._debug_info,
                               **{cls: self._without_report for cls in _REPORT_ONLY}}
        super().__init__(file, protocol=5)
        self.positions = {id(o): k for k, o in enumerate(_debug_info(traced))}

    def _debug_info(self, obj):
        """A source info or provenance of ``traced`` as its position there, the argument of
        ``_traced_debug_info``; any other as itself. (A table's entry rather than
        ``persistent_id``, which the pickler calls for every object: half of a CNN step's
        pickling went there.)"""
        position = self.positions.get(id(obj))
        return obj.__reduce_ex__(5) if position is None else (_traced_debug_info, (position,))

    def _without_report(self, obj):
        held = {name: getattr(obj, name) for name in _REPORT_ONLY[type(obj)]}
        self.held_back.append((obj, held))
        state = {k: v for k, v in vars(obj).items() if k not in held}
        return copyreg.__newobj__, (type(obj),), state

    def dump_report(self, rewrites):
        """The second part: the fields held back, and the passes' log."""
        held = list(self.held_back)
        self.dump((held, rewrites))
        if len(self.held_back) != len(held):  # they hold more of what the first part holds
            raise pickle.PicklingError("report data refers to parts of the program that "
                                       "the program does not")


class _EntryUnpickler(pickle.Unpickler):
    """Unpickles what ``_EntryPickler`` pickled, with ``traced``'s debug info: ``load()``
    each part in order, the last (later, on demand) by ``load_report()``."""

    def __init__(self, data, traced):
        super().__init__(io.BytesIO(data))
        self.traced, self.debug_info = traced, None

    def find_class(self, module, name):
        if module == __name__ and name == _traced_debug_info.__name__:
            return self._debug_info_at
        return super().find_class(module, name)

    def _debug_info_at(self, position):
        """The source info or provenance at ``position`` in ``traced``'s walk, made when the
        first is asked for: a program that is one native call unpickles none of them until
        a report asks (the walk was a quarter of loading a blur's 254 equations)."""
        if self.debug_info is None:
            self.debug_info = _debug_info(self.traced)
        return self.debug_info[position]

    def load_report(self):
        """Put the fields held back into their objects; return the passes' log."""
        held, rewrites = self.load()
        for obj, fields in held:
            vars(obj).update(fields)
        return rewrites


def _traced_debug_info(position):
    """What an entry calls for the source info or provenance at ``position`` of its traced
    jaxpr (``_debug_info``): the entry's unpickler answers it (``find_class``)."""
    raise pickle.UnpicklingError("a program's debug info is read by its entry's unpickler")


def _debug_info(closed_jaxpr):
    """Each equation's source info and provenance, equations in the order of a walk of the
    jaxpr and its sub-jaxprs: the same order in every process for programs of one key."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            found.extend((eqn.source_info, eqn.provenance))
            for sub in subjaxprs(eqn.params):
                walk(sub)
    walk(closed_jaxpr.jaxpr)
    return found


class _Digest:
    """A file whose writes feed a hash (the pickle is never held in memory)."""

    def __init__(self, digest):
        self.write = digest.update


def _directory():
    return cache.directory() if runs_here() else None


def _path(entry_key):
    directory = _directory()
    return None if directory is None or entry_key is None else directory / (entry_key + SUFFIX)


# --- load ----------------------------------------------------------------------------------

def load(entry_key, traced, name):
    """The Executable stored under ``entry_key`` (of the ClosedJaxpr ``traced``), or None."""
    path = _path(entry_key)
    if path is None:
        return None
    return _load(path, entry_key, traced, name)


def _load(path, entry_key, traced, name):
    start = time.perf_counter()
    found = cache.read(path, entry_key, meta=lambda data: _first_part(data, traced))
    jit_module = None
    if found is not None:
        (unpickler, externals, call, described), code = found
        if routines.called(externals):
            routines.library()  # registers the BLAS and LAPACK routines
        library.provide(externals)
        if code:
            jit_module = runtime.JitModule.of_object_code(
                code, externals, lambda: _optimised_ir(path, entry_key))
    if found is None or (code and jit_module is None):
        cache.stats["program miss"] += 1
        return None
    cache.stats["program hit"] += 1
    times = {"program_cache": time.perf_counter() - start}
    if call is not None:
        return executable.assemble_call(name, call, jit_module, times,
                                        load=lambda: (*unpickler.load(), unpickler.load_report()))
    optimised, plan, layout = described
    return executable.assemble(name, optimised, plan, (), layout, jit_module, times,
                               report=lambda: {"rewrites": unpickler.load_report()})


def _first_part(data, traced):
    """(The unpickler, the symbols the code calls, the ProgramCall or None, and the second
    part, unpickled now where there is no ProgramCall, else None)."""
    unpickler = _EntryUnpickler(data, traced)
    externals, call = unpickler.load()
    return unpickler, externals, call, None if call is not None else unpickler.load()


def _optimised_ir(path, entry_key):
    """The loaded program's optimised IR, read from its entry when first asked for."""
    detail = cache.read_detail(path, entry_key)
    return "; (no longer in the disk cache)" if detail is None else detail.decode()


# --- store ---------------------------------------------------------------------------------

def store(entry_key, traced, compiled):
    """Keep ``compiled`` (a cpu ``Executable`` compiled afresh from the ClosedJaxpr
    ``traced``) under ``entry_key``."""
    path = _path(entry_key)
    module = compiled.jit_module
    code = module.take_object_code() if module is not None else b""
    if path is None or code is None:
        return
    meta = io.BytesIO()
    try:
        pickler = _EntryPickler(meta, traced)
        pickler.dump((compiled.layout.externals, compiled.program_call))
        pickler.dump((compiled.jaxpr, compiled.plan, compiled.layout))
        pickler.dump_report(compiled.rewrites)
    except Exception as e:  # noqa: BLE001  (a rewrite or plan holding what does not pickle)
        log.debug("nbjax program cache: cannot keep %s: %s", compiled.name, e)
        return
    ir = module.optimised_ir.encode() if module is not None else b""
    if cache.write(path, cache.encode(entry_key, meta.getvalue(), code, ir)):
        cache.stats["program store"] += 1

"""Functions compiled once per process and shared by every program that calls them.

A program's module holds its own kernels. Code that is the same in every program that uses
it (the register tiles of a matrix product and the loop over them: ``tiled_products``) is
compiled once instead, kept for the life of the process, and called by name: its address
is registered as a symbol (``llvm.add_symbol``), as the BLAS routines' are (``routines``),
so that a program's object code, compiled now or read from the disk cache, links to it
when it is loaded (``provide``, given the names the program's module calls, makes those
this process lacks first). Their modules, one per function, go through the disk cache too,
named by what makes them (the function's name, nbjax's source, the settings that shape the
code, the CPU): a new process loads their machine code without making their IR again.
LLVM took 6-8 ms for each product's tile functions and the loop over them in every program
(a recurrent network's program has two products: two fifths of its compile time).

A library function's name says what it computes (``nbjax_tile_float32_6x4``) and, with the
settings its maker declares, is all that is needed to make it (``maker``); when kernels are
compiled for a CPU other than the host (the ``cpu_target`` option), the name ends with that
CPU's, as its code differs.
"""

import json
import threading

from llvmlite import binding as llvm
from llvmlite import ir

from ...compiler.executable import Timer
from ...config import config
from ..llvm.scaffold import release_module
from . import cache, pipeline, runtime
from .target import for_the_host

_lock = threading.Lock()
_modules = {}   # a library function's name -> the JitModule defining it (kept: it is its code)
_makers = {}    # a name's prefix -> (maker(module, name), defining the function ``name``,
#                 the tier compiling it: ``pipeline``'s light tier, or None for O3,
#                 the settings shaping its code)


def maker(prefix, tier=pipeline.SMALL_LOOPS, shaped_by=tuple):
    """Register the decorated ``maker(module, name)`` as the maker of the library functions
    whose names start with ``prefix``, compiled by the light ``tier`` (None: by O3), their
    code shaped besides their name, nbjax's source and the CPU by the settings
    ``shaped_by()`` returns (JSON values: module constants a user or a test may change)."""
    def register(make):
        _makers[prefix] = make, tier, shaped_by
        return make
    return register


def name(base):
    """The library function ``base`` for the CPU kernels are compiled for."""
    return base if for_the_host() else f"{base}.{config.cpu_target}"


def declare(module, function_name, function_type):
    """The library function ``function_name`` declared in ``module`` (``provide`` makes it
    before the module's code is loaded)."""
    fn = module.globals.get(function_name)
    return fn if fn is not None else ir.Function(module, function_type, function_name)


def provide(names):
    """Make the library functions among ``names`` that this process lacks (other names are
    left alone), each from a module of its own, loaded from the disk cache or compiled. (A
    module of several would be found there again only by a process that lacked the same
    ones together: one that loaded a program from the cache missed and compiled its
    products' tiles again, 200 ms.)"""
    missing = [n for n in dict.fromkeys(names) if n not in _modules and _maker(n)]
    if not missing:
        return
    with _lock:
        for function_name in missing:
            if function_name not in _modules:
                _modules[function_name] = _compile(function_name)


def function_ir(function_name):
    """The optimised LLVM IR of the library function ``function_name``."""
    provide([function_name])
    return _modules[function_name].function_ir(function_name)


def _maker(function_name):
    return next((m for p, m in _makers.items() if function_name.startswith(p)), None)


def _compile(function_name):
    """The module of ``function_name``: its disk cache entry is named by what makes it, so
    a new process loads its machine code without making its IR (~5 ms a tile function,
    ~40 ms before a transformer's first call from the cache)."""
    make, tier, shaped_by = _maker(function_name)
    light = None if tier is None else {function_name: tier}
    made_from = json.dumps({"library function": function_name, "settings": shaped_by(),
                            "sources": cache.source_digest().hex()})

    def ir_text():
        module = ir.Module("library")
        make(module, function_name)
        text = str(module)
        release_module(module)
        return text
    jit_module = runtime.JitModule(ir_text, Timer(), light, made_from)
    llvm.add_symbol(function_name, jit_module.code.get_function_address(function_name))
    return jit_module

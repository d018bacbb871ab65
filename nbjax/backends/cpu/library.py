"""Functions compiled once per process and shared by every program that calls them.

A program's module holds its own kernels. Code that is the same in every program that uses
it (the register tiles of a matrix product and the loop over them: ``tiled_products``) is
compiled once instead, kept for the life of the process, and called by name: its address
is registered as a symbol (``llvm.add_symbol``), as the BLAS routines' are (``routines``),
so that a program's object code, compiled now or read from the disk cache, links to it
when it is loaded. A library function's own module goes through the disk cache too: a new
process loads its machine code rather than compiling it again. LLVM took 6-8 ms for each
product's tile functions and the loop over them in every program (a recurrent network's
program has two products: two fifths of its compile time).

A library function's name says what it computes (``nbjax_tile_float32_6x4``) and is all
that is needed to make it (``maker``); when kernels are compiled for a CPU other than the
host (the ``cpu_target`` option), the name ends with that CPU's, as its code differs.
"""

import threading

from llvmlite import binding as llvm
from llvmlite import ir

from ...compiler.executable import Timer
from ...config import config
from . import pipeline, runtime

_lock = threading.Lock()
_modules = {}   # a library function's name -> the JitModule defining it (kept: it is its code)
_makers = {}    # a name's prefix -> maker(module, name), defining the function ``name``


def maker(prefix):
    """Register the decorated ``maker(module, name)`` as the maker of the library functions
    whose names start with ``prefix``."""
    def register(make):
        _makers[prefix] = make
        return make
    return register


def name(base):
    """The library function ``base`` for the CPU kernels are compiled for."""
    cpu = config.cpu_target
    return base if cpu in ("", "host") else f"{base}.{cpu}"


def declare(module, function_name, function_type):
    """The library function ``function_name`` declared in ``module``, made first if this
    process has not made it yet."""
    provide([function_name])
    fn = module.globals.get(function_name)
    return fn if fn is not None else ir.Function(module, function_type, function_name)


def provide(names):
    """Make (compile, or load from the disk cache) the library functions among ``names``
    that this process lacks; other names are left alone."""
    for function_name in names:
        if function_name in _modules:
            continue
        make = next((m for p, m in _makers.items() if function_name.startswith(p)), None)
        if make is None:
            continue
        with _lock:
            if function_name not in _modules:
                _modules[function_name] = _compile(function_name, make)


def function_ir(function_name):
    """The optimised LLVM IR of the library function ``function_name``."""
    provide([function_name])
    return _modules[function_name].function_ir(function_name)


def _compile(function_name, make):
    module = ir.Module(function_name)
    make(module, function_name)
    jit_module = runtime.JitModule(str(module), Timer(),
                                   {function_name: pipeline.SMALL_LOOPS})
    llvm.add_symbol(function_name, jit_module.engine.get_function_address(function_name))
    return jit_module

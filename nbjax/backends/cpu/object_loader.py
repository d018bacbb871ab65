"""Load compiled object files into memory and link them, without an MCJIT engine.

A program's kernels arrive as ELF relocatable objects (compiled in the optimiser processes,
or read from the disk cache). MCJIT would load them too, but it first builds an engine, a
target machine and an empty module: 0.5-1.5 ms of every program's first call, most of what
loading a program from the disk cache costs besides reading it. What our objects need is
little: their code is generated for the large code model, so every reference from code to
code or data is an absolute 64-bit address (``R_X86_64_64``) to write; the rest is laying
out the sections, and finding the symbols the objects define or call.

``load`` lays the allocated sections of every object out in one anonymous mapping,
resolves symbols (those the objects define, then the process's through ``resolve``),
writes the relocations with NumPy, and makes the mapping read-only and executable. It
returns None, and the caller uses MCJIT, for anything it does not know: another machine
or ELF class, writable data, a relocation other than the absolute and PC-relative ones, a
symbol it cannot find. Unwind tables (``.eh_frame``) are not loaded: no exception unwinds
through kernels (MCJIT registers them for debuggers). The mapping is unmapped when the
``LoadedCode`` is no longer referenced, as an engine frees its code.
"""

import ctypes
import logging
import mmap
import struct
import sys

import numpy as np

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")

_ELF64_LITTLE = b"\x7fELF\x02\x01"
_RELOCATABLE, _X86_64 = 1, 62
_PROGBITS, _SYMTAB, _RELA, _NOBITS, _REL = 1, 2, 4, 8, 9
_WRITE, _ALLOC = 0x1, 0x2
_RESERVED, _ABSOLUTE = 0xFF00, 0xFFF1  # special section indices (0: undefined)
_LOCAL = 0
_ABSOLUTE_64, _PC_32, _PLT_32, _PC_64 = 1, 2, 4, 24

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
if _libc is not None:
    _libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


class _Unsupported(Exception):
    """An object this loader does not handle (MCJIT will)."""


class LoadedCode:
    """Linked machine code in memory: ``get_function_address(name)`` as an MCJIT engine's."""

    def __init__(self, mapping, symbols):
        self._mapping = mapping  # (unmapped when this is freed)
        self._symbols = symbols

    def get_function_address(self, name):
        return self._symbols.get(name, 0)


def load(objects, resolve):
    """The ``LoadedCode`` of the ELF objects ``objects`` (bytes), calling out to the
    addresses ``resolve(name)`` gives (0 for an unknown symbol); None where this loader
    cannot load them."""
    if _libc is None:
        return None
    try:
        parsed = [_Object(code) for code in objects]
        return _link(parsed, resolve)
    except (_Unsupported, struct.error, ValueError, OSError) as e:
        log.debug("nbjax: MCJIT loads these objects: %s", e)
        return None


class _Object:
    """One ELF object's sections, symbols and relocations, read where they lie in ``code``."""

    def __init__(self, code):
        (ident, kind, machine, _, _, _, section_offset, _, _, _, _, entry_size, count,
         _) = _HEADER.unpack_from(code)
        if ident[:6] != _ELF64_LITTLE or kind != _RELOCATABLE or machine != _X86_64 \
                or entry_size != _SECTION.size:
            raise _Unsupported("not an x86-64 ELF64 relocatable object")
        self.code = code
        self.sections = [_SECTION.unpack_from(code, section_offset + k * entry_size)
                         for k in range(count)]
        self.loaded = [k for k, s in enumerate(self.sections)
                       if s[2] & _ALLOC and s[1] in (_PROGBITS, _NOBITS)]
        if any(self.sections[k][2] & _WRITE for k in self.loaded):
            raise _Unsupported("writable data")
        if any(s[1] == _REL for s in self.sections):  # (LLVM emits RELA for x86-64)
            raise _Unsupported("REL relocations")
        symtab = [s for s in self.sections if s[1] == _SYMTAB]
        if len(symtab) != 1:
            raise _Unsupported("no symbol table, or several")
        _, _, _, _, offset, size, strtab, _, _, _ = symtab[0]
        self.symbols = (offset, offset + size - size % _SYMBOL.size)  # where they lie
        self.strings = self.sections[strtab][4]

    def name(self, at):
        start = self.strings + at
        return self.code[start:self.code.index(b"\0", start)].decode()

    def relocations(self):
        """(target section, records) of the relocation sections of loaded sections; a
        record is (offset, symbol << 32 | type, addend), as int64s."""
        for _, kind, _, _, offset, size, _, target, _, _ in self.sections:
            if kind == _RELA and target in self.loaded:
                yield target, np.frombuffer(self.code, "<i8", size // 24 * 3,
                                            offset).reshape(-1, 3)


def _link(objects, resolve):
    """Lay out, copy, resolve and relocate ``objects`` (``_Object``s) in one mapping. (On
    an error, the mapping is unmapped once the views of it in the traceback are gone.)"""
    placed, size = _layout(objects)
    mapping = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    start = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    defined = _fill(np.frombuffer(mapping, np.uint8), start, objects, placed, resolve)
    if _libc.mprotect(start, len(mapping), mmap.PROT_READ | mmap.PROT_EXEC):
        raise OSError(ctypes.get_errno(), "mprotect failed")
    return LoadedCode(mapping, defined)


def _fill(memory, start, objects, placed, resolve):
    """Copy the sections into ``memory`` (at address ``start``) and write the relocations;
    returns {name: address} of the symbols the objects define."""
    for obj, k, at in placed:
        _, kind, _, _, offset, n, _, _, _, _ = obj.sections[k]
        if kind == _PROGBITS and n:
            memory[at:at + n] = np.frombuffer(obj.code, np.uint8, n, offset)
    defined, addresses, first = _symbols(objects, placed, start, resolve)
    _relocate(objects, placed, addresses, first, memory, start)
    return defined


def _layout(objects):
    """[(object, section, offset in the mapping)] of every loaded section, aligned as it
    asks, and the mapping's size."""
    placed, end = [], 0
    for obj in objects:
        for k in obj.loaded:
            align = max(obj.sections[k][8], 1)
            end = -(-end // align) * align
            placed.append((obj, k, end))
            end += obj.sections[k][5]
    return placed, end


def _symbols(objects, placed, start, resolve):
    """({name: address} of the symbols the objects define for one another, and for us;
    every symbol's address, the objects' symbols one after the other, as int64 (0 where
    in a section not loaded); where each object's symbols start among them)."""
    bases = {(id(obj), k): start + at for obj, k, at in placed}
    defined, undefined, addresses, first = {}, [], [], []
    for obj in objects:
        first.append(len(addresses))
        for k, (name, info, _, section, value, _) in enumerate(
                _SYMBOL.iter_unpack(obj.code[obj.symbols[0]:obj.symbols[1]])):
            if section == 0:  # undefined (symbol 0 is the null symbol)
                if k:
                    undefined.append((len(addresses), obj.name(name)))
                address = 0
            elif section == _ABSOLUTE:
                address = value
            elif section >= _RESERVED:
                raise _Unsupported("common symbols")
            else:
                base = bases.get((id(obj), section))
                address = 0 if base is None else base + value
            if info >> 4 != _LOCAL and section != 0:
                defined[obj.name(name)] = address
            addresses.append(address)
    for k, name in undefined:
        addresses[k] = defined.get(name) or resolve(name)
        if not addresses[k]:
            raise _Unsupported(f"symbol {name!r} not found")
    return defined, np.array(addresses, np.int64), first


def _relocate(objects, placed, addresses, first, memory, start):
    """Write every relocation of the loaded sections into ``memory``."""
    offsets = {(id(obj), k): at for obj, k, at in placed}
    parts = [(offsets[id(obj), target], obj.sections[target][5], first[n], records)
             for n, obj in enumerate(objects) for target, records in obj.relocations()]
    if not parts:
        return
    counts = [len(r) for *_, r in parts]
    offset, info, addend = np.concatenate([r for *_, r in parts]).T
    where = np.repeat([at for at, *_ in parts], counts) + offset
    kinds = info & 0xFFFFFFFF
    wide = (kinds == _ABSOLUTE_64) | (kinds == _PC_64)
    near = (kinds == _PC_32) | (kinds == _PLT_32)
    if not np.all(wide | near):
        raise _Unsupported(f"relocation types {sorted(set(kinds.tolist()))}")
    sizes = np.repeat([size for _, size, *_ in parts], counts)
    if np.any((offset < 0) | (offset + np.where(wide, 8, 4) > sizes)):
        raise _Unsupported("a relocation outside its section")
    index = info >> 32
    named = index != 0
    index += np.repeat([symbol for _, _, symbol, _ in parts], counts)
    if np.any(addresses[index[named]] == 0):
        raise _Unsupported("a relocation against a section not loaded")
    value = np.where(named, addresses[index], 0) + addend
    value = np.where((kinds == _PC_64) | near, value - (start + where), value)
    if np.any(near & ((value < -2 ** 31) | (value >= 2 ** 31))):
        raise _Unsupported("a 32-bit relocation out of range")
    _write(memory, where[wide], value[wide], 8)
    _write(memory, where[near], value[near], 4)


def _write(memory, where, values, width):
    """Store ``values`` little-endian, ``width`` bytes each, at the offsets ``where``."""
    if len(where):
        parts = values.astype("<i8").view(np.uint8).reshape(-1, 8)[:, :width]
        memory[where[:, None] + np.arange(width)] = parts

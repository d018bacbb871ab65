"""The on-disk compile cache: machine code kept between processes, so re-running a notebook
skips LLVM's optimisation and code generation.

An entry holds what LLVM made of one module: the optimised IR of its parts (what ``as_text``
and the kernel reports show) and their object code. ``JitModule`` asks for an entry before
optimising; on a hit it loads the object code into its engine, so no pass runs and no code
is generated; on a miss it compiles the module and stores what came out.

Where: ``$NBJAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/nbjax``, else ``~/.cache/nbjax``;
``NBJAX_DISABLE_DISK_CACHE=1`` turns the cache off. Machine code from a file is run without
question, so the directory must be ours alone: it is created with mode 0700, and one that is
not owned by the current user or is writable by group or others is refused (with a warning,
once) and nbjax compiles without a disk cache.

Keys: the SHA-256 of the module's IR text and of everything else that shapes the machine
code: nbjax's version and the source of the modules that turn IR into code (this one and
``runtime``), the llvmlite and LLVM versions, the target triple, the CPU name and its
features. Entries are written to a temporary file in the same directory and renamed over the
final name, so a reader never sees half an entry; each carries the CRC-32 of its contents,
so a truncated or corrupted file (a crash before the system wrote it all to disk) is
detected, ignored (logged at debug level) and rebuilt (a checksum against accidents: the
directory is ours alone; SHA-256 took 0.4 ms of loading a CNN step's 0.8 MB program
entry, the CRC a fifth of that), and the key it was built for, so an
entry found under another entry's name (files swapped or copied) is rebuilt rather than
run. The files are not ``fsync``-ed: the checksum already covers a crash, and a sync took
2-25 ms of a first call.
"""

import functools
import hashlib
import json
import logging
import os
import stat
import struct
import tempfile
import warnings
import zlib
from collections import Counter
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from ...version import __version__
from .target import cpu_target

log = logging.getLogger(__name__)

# Counts of "hit", "miss", "store", "corrupt" since the process started (tests and the
# notebook read them).
stats = Counter()

MAGIC = b"nbjax-o5"                 # the entry layout; change it when the layout changes
_HEAD = struct.Struct("<IQ")        # the CRC-32 of the payload, and its length
_KEY = 64                          # the payload: the entry's key (hex), then
_META_LENGTH = struct.Struct("<Q")  # the length of what describes the code, that, the code
_CHECKSUM = struct.Struct("<I")     # after the payload: the CRC-32 of the detail, the detail
SUFFIX = ".nbjax-obj"
_warned = set()                     # refused directories already warned about


# --- where ---------------------------------------------------------------------------------

def directory():
    """The cache directory to use now, created if needed, or None when the disk cache is
    off or the directory is not safe to load code from."""
    if os.environ.get("NBJAX_DISABLE_DISK_CACHE", "") not in ("", "0"):
        return None
    return _checked(Path(os.environ.get("NBJAX_CACHE_DIR") or _default_directory()))


def _default_directory():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nbjax")


def _checked(path):
    """``path`` if it is (or could be made) a directory only we can write, else None with a
    warning the first time."""
    try:
        _make_private(path)
        info = os.stat(path)
    except OSError as e:
        return _refuse(path, f"it cannot be created or read ({e})")
    if not stat.S_ISDIR(info.st_mode):
        return _refuse(path, "it is not a directory")
    if info.st_uid != os.getuid():
        return _refuse(path, f"it is owned by user id {info.st_uid}, not by you")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return _refuse(path, f"it is writable by group or others (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}; chmod 700 it)")
    return path


def _make_private(path):
    """Create ``path`` with mode 0700 if it does not exist (its parents as usual)."""
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        return
    os.chmod(path, 0o700)   # mkdir's mode passes through the umask


def _refuse(path, why):
    if path not in _warned:
        _warned.add(path)
        warnings.warn(f"nbjax: not using {path} as the compile cache: {why}; compiling "
                      "without a disk cache", RuntimeWarning, stacklevel=2)
    return None


# --- keys ----------------------------------------------------------------------------------

def environment(target=None):
    """Everything besides the IR that the machine code depends on, made for ``target``
    (``(cpu, features)``; default: the CPU code is made for, ``cpu_target()``)."""
    return _environment(target or cpu_target())


@functools.cache
def _environment(target):
    cpu, features = target
    return {"nbjax": _compiler_version(),
            "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)),
            "triple": llvm.get_process_triple(),
            "cpu": cpu,
            "features": features}


def _compiler_version():
    """nbjax's version and a hash of the code that turns IR into machine code (the pass
    pipeline's options live there), so editing it never reuses stale entries."""
    here = Path(__file__).parent
    source = hashlib.sha256()
    for name in ("runtime.py", "cache.py", "pipeline.py", "partition.py"):
        source.update((here / name).read_bytes())
    return f"{__version__}+{source.hexdigest()[:16]}"


@functools.cache
def source_digest():
    """The SHA-256 of nbjax's source code (a few ms, once per process): in the key of
    what is made from more than the IR an entry's key holds (a program, from its jaxpr;
    the support module, from the Python that generates it)."""
    package = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.digest()


def entry_key(ir_text, env=None, light=None):
    """The hex SHA-256 naming the entry of the module ``ir_text`` compiled in ``env``
    (default: this process's ``environment()``), the functions of ``light`` ({name: tier})
    by their light tier."""
    h = hashlib.sha256(json.dumps(env or environment(), sort_keys=True).encode())
    h.update(b"\0")
    h.update(ir_text.encode())
    if light:
        h.update(b"\0" + json.dumps(light, sort_keys=True).encode())
    return h.hexdigest()


# --- entries -------------------------------------------------------------------------------

def encode(key, meta, object_code, detail=b""):
    """An entry's bytes: magic, the payload's checksum and length, the payload (which starts
    with the entry's key, so an entry found under another key's name is not run), then the
    detail's checksum and the detail. ``meta`` (bytes) describes the object code: a module's
    optimised IR, a program's layout; ``detail`` (bytes) is what only reports read (a
    program's optimised IR), which ``read`` leaves on disk (``read_detail``)."""
    payload = key.encode() + _META_LENGTH.pack(len(meta)) + meta + bytes(object_code)
    return (MAGIC + _HEAD.pack(zlib.crc32(payload), len(payload)) + payload
            + _CHECKSUM.pack(zlib.crc32(detail)) + detail)


def decode(data, key):
    """(meta, object code) from the bytes of the entry of ``key`` (the detail, after them,
    may be left out); ValueError if they are damaged or belong to another key."""
    head = len(MAGIC) + _HEAD.size
    if data[:len(MAGIC)] != MAGIC or len(data) < head:
        raise ValueError("not an nbjax cache entry (or another layout)")
    checksum, length = _HEAD.unpack_from(data, len(MAGIC))
    payload = memoryview(data)[head:head + length]  # (not a copy: an entry may hold megabytes)
    if len(payload) != length or zlib.crc32(payload) != checksum:
        raise ValueError("checksum mismatch (truncated or corrupted)")
    if payload[:_KEY] != key.encode():
        raise ValueError("the entry was built for another key")
    (n,) = _META_LENGTH.unpack_from(payload, _KEY)
    start = _KEY + _META_LENGTH.size
    return bytes(payload[start:start + n]), bytes(payload[start + n:])


def read(path, key, meta=bytes.decode):
    """(``meta(meta bytes)``, object code) of ``key``'s entry at ``path``, or None if it is
    missing, damaged or another key's (or ``meta`` cannot make sense of it). The detail is
    not read."""
    try:
        with open(path, "rb") as f:
            data = f.read(len(MAGIC) + _HEAD.size)
            if data[:len(MAGIC)] == MAGIC and len(data) == len(MAGIC) + _HEAD.size:
                data += f.read(_HEAD.unpack_from(data, len(MAGIC))[1])
    except FileNotFoundError:
        return None
    except OSError as e:
        log.debug("nbjax compile cache: cannot read %s: %s", path, e)
        return None
    try:
        described, code = decode(data, key)
        return meta(described), code
    except Exception as e:  # noqa: BLE001  (whatever is wrong with it, it is rebuilt)
        stats["corrupt"] += 1
        log.debug("nbjax compile cache: ignoring %s: %s; it will be rebuilt", path, e)
        return None


def read_detail(path, key):
    """The detail of ``key``'s entry at ``path`` (bytes), or None if the entry is gone,
    damaged or another key's."""
    try:
        data = path.read_bytes()
        decode(data, key)
        at = len(MAGIC) + _HEAD.size + _HEAD.unpack_from(data, len(MAGIC))[1]
        (checksum,) = _CHECKSUM.unpack_from(data, at)
    except (OSError, ValueError, struct.error):
        return None
    detail = data[at + _CHECKSUM.size:]
    return detail if zlib.crc32(detail) == checksum else None


def write(path, data):
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, then
    renamed over ``path``; True once done. Failing to write only costs the cache entry."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError as e:
        log.debug("nbjax compile cache: cannot write %s: %s", path, e)
        return False
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# --- one module's lookup -------------------------------------------------------------------

class Lookup:
    """One module's trip through the disk cache.

    ``Lookup(ir_text, light)`` reads the entry of the module (the functions of ``light``,
    {name: tier}, compiled by their light tier); ``hit`` says whether there was one, and then
    ``optimised_texts`` and ``objects`` are the optimised IR and object code of its parts
    (``partition``: a module is compiled in parts, on several cores). A module compiled
    afresh is ``supply``-ed; ``done()`` then stores it.
    """

    def __init__(self, ir_text, light=None):
        self.directory = directory()
        self.path = None
        self.optimised_texts = self.objects = None
        self.hit = False
        if self.directory is None:
            return
        self.key = entry_key(ir_text, light=light)
        self.path = self.directory / (self.key + SUFFIX)
        found = read(self.path, self.key, meta=json.loads)
        if found is not None:
            try:
                self.objects = unpack_objects(found[1])
            except (ValueError, struct.error) as e:
                stats["corrupt"] += 1
                log.debug("nbjax compile cache: ignoring %s: %s", self.path, e)
            else:
                self.optimised_texts, self.hit = found[0], True
        stats["hit" if self.hit else "miss"] += 1

    def supply(self, optimised_texts, objects):
        """The module compiled afresh: the parts' optimised IR and object code."""
        self.optimised_texts, self.objects = optimised_texts, objects

    def done(self):
        """Store the entry of a module compiled afresh; return its object code (None
        without a disk cache), for the entry of the program."""
        if self.path is None:
            return None
        code = pack_objects(self.objects)
        if not self.hit and write(self.path, encode(self.key, json.dumps(
                self.optimised_texts).encode(), code)):
            stats["store"] += 1
        return code


_COUNT = struct.Struct("<Q")


def pack_objects(objects):
    """The object files of a module's parts as one byte string: their count, then each
    with its length."""
    return b"".join([_COUNT.pack(len(objects))]
                    + [_COUNT.pack(len(o)) + bytes(o) for o in objects])


def unpack_objects(code):
    """The object files ``pack_objects`` put in ``code``; ValueError if it is not that."""
    (count,), at, objects = _COUNT.unpack_from(code, 0), _COUNT.size, []
    for _ in range(count):
        (n,) = _COUNT.unpack_from(code, at)
        at += _COUNT.size
        if at + n > len(code):
            raise ValueError("object code cut short")
        objects.append(bytes(code[at:at + n]))
        at += n
    if at != len(code):
        raise ValueError("object code with trailing bytes")
    return objects

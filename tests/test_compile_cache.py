"""The CPU backend's on-disk cache of modules: hits across processes skip LLVM's passes, the
directory is private (and refused when it is not), damaged entries are rebuilt, keys cover
what the machine code depends on, and entries are written atomically. (The cache of whole
programs, which answers first when a program is the same, is off here: see
test_program_cache.py.)"""

import json
import logging
import os
import re
import stat
import subprocess
import sys
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.backends import compile
from nbjax.backends.cpu import cache, program_cache
from helpers import assert_close

from helpers import is_full_width_float32

RNG = np.random.default_rng(5)


def _f(x):
    return jnp.tanh(x) * 2.0 + jnp.sum(x * x, axis=1, keepdims=True)


def _expected(x):
    return np.tanh(x) * 2.0 + np.sum(x * x, axis=1, keepdims=True)


@pytest.fixture(autouse=True)
def modules_only(monkeypatch):
    """No program gets a key of the cache of whole programs."""
    monkeypatch.setattr(program_cache, "key", lambda closed_jaxpr, donated=frozenset(): None)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh cache directory (not yet created) that this test's compilations use."""
    path = tmp_path / "parent" / "nbjax-cache"
    monkeypatch.setenv("NBJAX_CACHE_DIR", str(path))
    monkeypatch.delenv("NBJAX_DISABLE_DISK_CACHE", raising=False)
    return path


def _compile_and_check(x):
    """Compile ``_f`` afresh (a new jaxpr, so the in-memory cache does not answer), check
    its result against NumPy, and return the executable."""
    exe = compile(nbjax.make_jaxpr(_f)(x), "cpu", "cached_f")
    (out,) = exe.run(x)
    np.testing.assert_allclose(out, _expected(x), rtol=1e-5, atol=1e-5)
    return exe


def _entries(path):
    return sorted(path.iterdir())


# --- across processes ------------------------------------------------------------------------

_CHILD = """
import json, sys
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax.backends import compile
from nbjax.backends.cpu import cache, program_cache

program_cache.key = lambda closed_jaxpr, donated=frozenset(): None  # the cache of modules alone
x = np.linspace(-2, 2, 32 * 64, dtype=np.float32).reshape(32, 64)
exe = compile(nbjax.make_jaxpr(lambda x: jnp.exp(x) * x + 1.0)(x), "cpu", "child")
(out,) = exe.run(x)
print(json.dumps({"stats": dict(cache.stats), "phases": sorted(exe.compile_times),
                  "from_disk_cache": exe.jit_module.from_disk_cache,
                  "optimised_ir": [k.texts["optimised LLVM IR"] for k in exe.kernels],
                  "out": out.tolist()}))
"""


def _child(cache_path):
    env = dict(os.environ, NBJAX_CACHE_DIR=str(cache_path))
    env.pop("NBJAX_DISABLE_DISK_CACHE", None)
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _without_comments(texts):
    return [re.sub(r";.*", "", text) for text in texts]


def test_miss_then_hit_in_a_fresh_process(tmp_path):
    path = tmp_path / "c"
    first, second = _child(path), _child(path)
    x = np.linspace(-2, 2, 32 * 64, dtype=np.float32).reshape(32, 64)
    for run in (first, second):
        assert_close(run["out"], np.exp(x) * x + 1.0, rtol=1e-5)
    assert first["stats"].get("miss", 0) >= 1 and first["stats"].get("hit", 0) == 0
    assert first["stats"]["store"] == first["stats"]["miss"]
    assert "llvm_optimise" in first["phases"] and not first["from_disk_cache"]
    # the second process found the machine code: LLVM's passes did not run
    assert second["stats"].get("hit", 0) >= 1 and second["stats"].get("miss", 0) == 0
    assert "llvm_optimise" not in second["phases"] and second["from_disk_cache"]
    assert "disk_cache" in second["phases"]
    # reports show the optimised IR (re-parsed: only the "; preds = ..." comments may differ)
    assert _without_comments(second["optimised_ir"]) == _without_comments(first["optimised_ir"])
    assert any(is_full_width_float32(ir) for ir in second["optimised_ir"])


# --- the directory ---------------------------------------------------------------------------

def test_directory_is_created_private_and_holds_private_entries(cache_dir):
    x = RNG.standard_normal((4, 33)).astype(np.float32)
    exe = _compile_and_check(x)
    assert not exe.jit_module.from_disk_cache
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    (entry,) = _entries(cache_dir)
    assert entry.name.endswith(cache.SUFFIX)
    assert stat.S_IMODE(entry.stat().st_mode) & 0o077 == 0
    # a second compilation in this process reads it back
    hits = cache.stats["hit"]
    assert _compile_and_check(x).jit_module.from_disk_cache
    assert cache.stats["hit"] == hits + 1


def test_default_directory_follows_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("NBJAX_CACHE_DIR", raising=False)
    monkeypatch.delenv("NBJAX_DISABLE_DISK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "nbjax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.directory() == tmp_path / "home" / ".cache" / "nbjax"
    assert stat.S_IMODE((tmp_path / "home" / ".cache" / "nbjax").stat().st_mode) == 0o700


def test_disabled_by_environment(cache_dir, monkeypatch):
    monkeypatch.setenv("NBJAX_DISABLE_DISK_CACHE", "1")
    assert cache.directory() is None
    _compile_and_check(RNG.standard_normal((2, 9)).astype(np.float32))
    assert not cache_dir.exists()


def _compiles_without_disk_cache(path, match):
    """A compilation with the refused ``path`` warns once, is correct, and writes nothing."""
    x = RNG.standard_normal((3, 17)).astype(np.float32)
    with pytest.warns(RuntimeWarning, match=match):
        exe = _compile_and_check(x)
    assert not exe.jit_module.from_disk_cache and "llvm_optimise" in exe.compile_times
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # no second warning for the same directory
        _compile_and_check(x)
    assert _entries(path) == []


def test_directory_writable_by_others_is_refused(cache_dir):
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(0o777)
    _compiles_without_disk_cache(cache_dir, "writable by group or others")


def test_directory_writable_by_group_is_refused(cache_dir):
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(0o770)
    _compiles_without_disk_cache(cache_dir, "writable by group or others")


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="giving a directory to another user needs root")
def test_directory_owned_by_another_user_is_refused(cache_dir):
    cache_dir.mkdir(parents=True, mode=0o700)
    os.chown(cache_dir, 4242, -1)
    _compiles_without_disk_cache(cache_dir, "owned by user id 4242")


# --- damaged entries -------------------------------------------------------------------------

def _truncate(data):
    return data[:len(data) // 2]


def _flip_payload_byte(data):
    i = len(data) - 100
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]


def _flip_header_byte(data):
    return bytes([data[0] ^ 0x80]) + data[1:]


@pytest.mark.parametrize("damage", [_truncate, _flip_payload_byte, _flip_header_byte,
                                    lambda data: b""])
def test_damaged_entry_is_ignored_and_rebuilt(cache_dir, damage, caplog):
    x = RNG.standard_normal((5, 21)).astype(np.float32)
    _compile_and_check(x)
    (entry,) = _entries(cache_dir)
    good = entry.read_bytes()
    entry.write_bytes(damage(good))
    corrupt = cache.stats["corrupt"]
    with caplog.at_level(logging.DEBUG, logger=cache.__name__):
        exe = _compile_and_check(x)
    assert cache.stats["corrupt"] == corrupt + 1
    assert "it will be rebuilt" in caplog.text
    assert not exe.jit_module.from_disk_cache and "llvm_optimise" in exe.compile_times
    assert entry.read_bytes() == good                         # rebuilt as it was
    assert _compile_and_check(x).jit_module.from_disk_cache  # and used again


KEY = "ab" * 32


def test_entry_round_trip_and_every_truncation_is_detected(tmp_path):
    ir, code = b"define void @k() {\n  ret void\n}\n", b"\x7fELF" + bytes(range(50))
    detail = b"; what only reports read\n" * 3
    data = cache.encode(KEY, ir, code, detail)
    assert cache.decode(data, KEY) == (ir, code)
    payload_end = len(data) - len(detail) - 4  # (the detail's checksum: 4 bytes)
    assert cache.decode(data[:payload_end], KEY) == (ir, code)  # the detail is not needed
    for cut in range(payload_end):
        with pytest.raises(ValueError):
            cache.decode(data[:cut], KEY)
    with pytest.raises(ValueError, match="another key"):
        cache.decode(data, "cd" * 32)
    entry = tmp_path / "entry"
    entry.write_bytes(data)
    assert cache.read(entry, KEY, meta=bytes) == (ir, code)
    assert cache.read_detail(entry, KEY) == detail
    assert cache.read_detail(entry, "cd" * 32) is None
    for cut in range(payload_end, len(data)):  # the detail cut short, or corrupted
        entry.write_bytes(data[:cut])
        assert cache.read_detail(entry, KEY) is None
    entry.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert cache.read_detail(entry, KEY) is None
    assert cache.read(entry, KEY, meta=bytes) == (ir, code)
    entry.unlink()
    assert cache.read_detail(entry, KEY) is None


def test_swapped_entries_are_rebuilt_not_run(cache_dir):
    """Two valid entries exchanged between file names: each program must still compute its
    own result (its entry is rebuilt), never the other's."""
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    programs = [lambda x: jnp.exp(x) * 2.0, lambda x: jnp.sin(x) - 1.0]
    for f in programs:
        compile(nbjax.make_jaxpr(f)(x), "cpu", "swap")
    first, second = sorted(_entries(cache_dir))
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    for f in programs:
        exe = compile(nbjax.make_jaxpr(f)(x), "cpu", "swap")
        assert not exe.jit_module.from_disk_cache
        np.testing.assert_allclose(exe.run(x)[0], f(x), rtol=1e-6, atol=1e-6)


# --- keys ------------------------------------------------------------------------------------

_ENV = {"nbjax": "0.1.0+abc", "llvmlite": "0.50.0", "llvm": "22.1.0",
        "triple": "x86_64-unknown-linux-gnu", "cpu": "rocketlake",
        "features": "+avx,+avx2,+avx512f,+sse4.2"}


@pytest.mark.parametrize("field,value", [
    ("nbjax", "0.1.1+abc"), ("nbjax", "0.1.0+abd"), ("llvmlite", "0.51.0"),
    ("llvm", "22.1.1"), ("triple", "aarch64-unknown-linux-gnu"), ("cpu", "skylake"),
    ("features", "+avx,+avx2,-avx512f,+sse4.2")])
def test_key_changes_with_what_shapes_the_machine_code(field, value):
    ir = "define void @k() {\n  ret void\n}\n"
    assert cache.entry_key(ir, dict(_ENV)) == cache.entry_key(ir, dict(_ENV))
    assert cache.entry_key(ir, dict(_ENV, **{field: value})) != cache.entry_key(ir, _ENV)


def test_key_changes_with_the_ir_and_covers_this_host():
    assert cache.entry_key("a", _ENV) != cache.entry_key("b", _ENV)
    env = cache.environment()
    assert set(env) == set(_ENV)
    assert env["cpu"] and env["features"] and env["llvm"].count(".") == 2
    assert env["nbjax"].startswith(nbjax.__version__ + "+")


# --- atomic writes ---------------------------------------------------------------------------

def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / ("0" * 64 + cache.SUFFIX)

    def crash(*args):
        raise KeyboardInterrupt   # the process dies between writing and renaming

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        cache.write(target, cache.encode(KEY, b"ir", b"code"))
    assert list(tmp_path.iterdir()) == []


def test_write_error_costs_only_the_entry(cache_dir, monkeypatch):
    def no_space(*args):
        raise OSError(28, "No space left on device")

    x = RNG.standard_normal((2, 5)).astype(np.float32)
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", no_space)
        _compile_and_check(x)
    assert _entries(cache_dir) == []
    _compile_and_check(x)
    assert [e.name.startswith(".tmp-") for e in _entries(cache_dir)] == [False]

"""The CPU that kernels are compiled for."""

import functools

import llvmlite.binding as llvm

from ...config import config


def cpu_target():
    """(LLVM CPU name, feature string) that kernels are compiled for: the host's, unless the
    ``cpu_target`` option (``NBJAX_CPU_TARGET``) names another CPU LLVM knows, such as
    ``x86-64-v2``, ``x86-64-v3``, ``x86-64-v4`` or ``znver3``; its features are then the
    CPU's own. Code for a CPU the host is not may not run here, but can be inspected."""
    if for_the_host():
        return _host_name(), _host_feature_string()
    return config.cpu_target, ""


def for_the_host():
    """Whether kernels are compiled for the host (the ``cpu_target`` option unset)."""
    return config.cpu_target in ("", "host")


# The host's CPU name and features, asked of LLVM once per process: they do not change, and
# asking took a fraction of a millisecond, several times in every compile and every load
# of a program from the disk cache.
_host_name = functools.cache(llvm.get_host_cpu_name)
_host_features = functools.cache(llvm.get_host_cpu_features)


@functools.cache
def _host_feature_string():
    """The host's features as LLVM takes them (``+avx2,-avx512f,...``): flattening the map
    (in Python, ~100 features) was most of ``cpu_target``'s time."""
    return _host_features().flatten()


# What a CPU of each x86-64 micro-architecture level must have (the psABI's list, less the
# features every x86-64 CPU LLVM targets has), to check that code made for it runs here.
_LEVELS = {"x86-64": ()}
_LEVELS["x86-64-v2"] = ("cx16", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3")
_LEVELS["x86-64-v3"] = _LEVELS["x86-64-v2"] + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma",
                                               "lzcnt", "movbe", "xsave")
_LEVELS["x86-64-v4"] = _LEVELS["x86-64-v3"] + ("avx512f", "avx512bw", "avx512cd", "avx512dq",
                                               "avx512vl")


def runs_here():
    """Whether code compiled for ``cpu_target()`` can run on this machine: the host itself,
    or an x86-64 level whose features the host has. Another CPU's code may use instructions
    this one lacks, and an illegal instruction would kill the process (a notebook's kernel)."""
    name = config.cpu_target
    if name in ("", "host", _host_name()):
        return True
    if name not in _LEVELS:
        return False
    host = _host_features()
    return all(host.get(feature, False) for feature in _LEVELS[name])

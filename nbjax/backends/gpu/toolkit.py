"""The parts of NVIDIA's CUDA toolkit the GPU backend uses, found without installing CUDA:
``ptxas`` (to check and report on our PTX) and libdevice (the bitcode library computing the
math functions mathlib lacks).

Both come with PyPI's ``nvidia-cuda-nvcc-cu12`` wheel (``nvidia/cuda_nvcc/``, the ``test``
and ``gpu`` extras install it); otherwise a CUDA installation under ``$CUDA_HOME``,
``$CUDA_PATH`` or ``/usr/local/cuda``, or ``ptxas`` on ``PATH``.
"""

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


def _roots():
    """Directories that may hold a CUDA toolkit's ``bin`` and ``nvvm``, in order."""
    roots = []
    try:  # (the wheel's namespace package, found without importing it)
        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    except ImportError:  # no ``nvidia`` package at all
        spec = None
    if spec is not None:
        roots += [Path(p) for p in spec.submodule_search_locations or ()]
    roots += [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    return roots + [Path("/usr/local/cuda")]


@functools.lru_cache(maxsize=None)
def find_ptxas():
    """The path of ``ptxas``, or None."""
    for root in _roots():
        if (root / "bin" / "ptxas").is_file():
            return str(root / "bin" / "ptxas")
    return shutil.which("ptxas")


@functools.lru_cache(maxsize=None)
def find_libdevice():
    """The path of ``libdevice.10.bc``, or None."""
    for root in _roots():
        path = root / "nvvm" / "libdevice" / "libdevice.10.bc"
        if path.is_file():
            return str(path)
    return None


@dataclass
class PtxasReport:
    """What ``ptxas -v`` says about one kernel: registers per thread, bytes spilled to local
    memory (stores and loads), its stack frame, and the text itself."""
    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    text: str

    @property
    def spills(self):
        return self.spill_stores + self.spill_loads


class PtxasError(RuntimeError):
    pass


def ptxas(ptx, arch):
    """Assemble ``ptx`` for ``arch`` (``"sm_80"``) with ``ptxas -v``: {kernel name:
    PtxasReport}. Raises ``PtxasError`` with ptxas's message when it fails."""
    tool = find_ptxas()
    if tool is None:
        raise PtxasError("ptxas not found: install nvidia-cuda-nvcc-cu12 or a CUDA toolkit")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        run = subprocess.run([tool, "-v", f"-arch={arch}", "-o", str(Path(tmp) / "k.cubin"),
                              str(src)], capture_output=True, text=True)
    if run.returncode:
        raise PtxasError(f"ptxas -arch={arch} failed:\n{run.stderr[-4000:]}")
    return parse_ptxas_report(run.stderr + run.stdout)


_FUNCTION = re.compile(r"Compiling entry function '([^']+)'")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill "
                     r"loads")
_REGISTERS = re.compile(r"Used (\d+) registers")


def parse_ptxas_report(text):
    """{kernel name: PtxasReport} from ``ptxas -v``'s output, which gives per entry function
    a 'Compiling entry function' line, then its stack and spills, then its registers."""
    reports, name, lines, numbers = {}, None, [], {}
    for line in text.splitlines():
        if (m := _FUNCTION.search(line)):
            name, lines, numbers = m.group(1), [], {}
        if name is None:
            continue
        lines.append(line)
        if (m := _SPILLS.search(line)):
            numbers["spill"] = tuple(int(g) for g in m.groups())
        if (m := _REGISTERS.search(line)):
            stack, stores, loads = numbers.get("spill", (0, 0, 0))
            reports[name] = PtxasReport(int(m.group(1)), stores, loads, stack,
                                        "\n".join(lines))
            name = None
    return reports

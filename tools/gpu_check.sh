#!/usr/bin/env bash
# The gpu backend's checks on a machine with an NVIDIA GPU, in one call (under ten minutes):
# installs the gpu extra (CuPy for CUDA 12, the nvcc wheel's ptxas and libdevice) and
# jax[cuda12] as the reference, runs the PTX and emulation tests, the tests that need the
# device, and the seed benchmarks against jax.jit on the GPU.
#
#   tools/gpu_check.sh            (or: make gpu-check)
#   PYTHON=path/to/python tools/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

nvidia-smi -L || { echo "gpu_check: nvidia-smi found no GPU (or no driver)"; exit 1; }
"$PY" -m pip install -q -e ".[test,gpu]" "jax[cuda12]"

# What the device is, what CuPy sees: recorded with the results.
"$PY" - <<'PY'
import cupy
dev = cupy.cuda.Device()
print("CuPy", cupy.__version__, "device", dev.id, "compute capability", dev.compute_capability,
      cupy.cuda.runtime.getDeviceProperties(dev.id)["name"].decode())
PY

# The device tests first (they fail fastest if the runtime is wrong), then the rest.
PYTHONPATH=. timeout 240 "$PY" -m pytest -q -x -rs -p no:cacheprovider -m gpu \
    tests/test_gpu_device.py
PYTHONPATH=. timeout 120 "$PY" -m pytest -q -x -p no:cacheprovider tests/test_gpu_codegen.py

# The seed workloads against jax.jit on the GPU.
PYTHONPATH=. timeout 200 "$PY" -m benchmarks.run --backend gpu --budget 5 --reps 5 \
    --only power_sum --only selu --only blur --only batched_matvec \
    --json benchmarks/results_gpu.json

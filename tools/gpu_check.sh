#!/usr/bin/env bash
# The gpu backend's checks on a machine with an NVIDIA GPU, in one call (under ten minutes):
# installs the gpu extra (CuPy for CUDA 12, the nvcc wheel's ptxas and libdevice) and
# jax[cuda12] as the reference, runs the tests that need the device, the PTX and emulation
# tests and the notebook's gpu tests, times reductions and chained calls against CuPy and
# jax.jit, and runs the seed benchmarks against jax.jit on the GPU.
#
#   tools/gpu_check.sh            (or: make gpu-check)
#   PYTHON=path/to/python tools/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

nvidia-smi -L || { echo "gpu_check: nvidia-smi found no GPU (or no driver)"; exit 1; }
"$PY" -m pip install -q -e ".[test,gpu]" "jax[cuda12]"

# What the device is, what CuPy sees and what nbjax lists: recorded with the results; then
# one array put on each GPU and read back (device_put's copies, checked in the tests below).
PYTHONPATH=. "$PY" - <<'PY'
import cupy, numpy as np
import nbjax
dev = cupy.cuda.Device()
print("CuPy", cupy.__version__, "device", dev.id, "compute capability", dev.compute_capability,
      cupy.cuda.runtime.getDeviceProperties(dev.id)["name"].decode())
print("nbjax.devices('gpu'):", [(d, d.device_kind) for d in nbjax.devices("gpu")])
x = np.arange(10, dtype=np.float32)
for d in nbjax.devices("gpu"):
    y = nbjax.device_put(x, d).block_until_ready()
    assert y.device is d and (np.asarray(y) == x).all(), d
PY

# The device tests first (they fail fastest if the runtime is wrong): the fuzz corpus, the
# seed workloads, reductions in phases (sizes 0, 1, odd, 6e6; float32 and float64; NaN),
# results staying on the device (transfers counted), each kernel's PTX and ptxas report,
# devices("gpu") and device_put (float32, int32, bool, 0-d, size 0; no copy into a jit).
# Then the PTX and emulation tests, and the notebook's --backend gpu and its code pane.
PYTHONPATH=. timeout 300 "$PY" -m pytest -q -x -rs -p no:cacheprovider -m gpu \
    tests/test_gpu_device.py
PYTHONPATH=. timeout 120 "$PY" -m pytest -q -x -p no:cacheprovider tests/test_gpu_codegen.py
PYTHONPATH=. timeout 60 "$PY" -m pytest -q -x -rs -p no:cacheprovider tests/test_notebook.py \
    -k "gpu or help"

# Reductions in phases and device-resident results, timed (printed, not asserted): a full
# sum, row maxima and column sums against CuPy's own reductions and jax.jit, the inputs on
# the device for all three; and a chain of jitted calls whose results stay on the GPU.
PYTHONPATH=. timeout 120 "$PY" - <<'PY'
import time
import cupy, jax, jax.numpy as jj, numpy as np
import nbjax, nbjax.numpy as jnp
from benchmarks.contenders import on_the_gpu

def best(fn, *args, reps=20):
    fn(*args); cupy.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter(); out = fn(*args)
        getattr(out, "block_until_ready", lambda: None)(); cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    return min(times)

x = np.random.default_rng(0).standard_normal((10_000, 10_000)).astype(np.float32)
cases = {"sum (1e8 -> 1)": (jnp.sum, cupy.sum, jj.sum),
         "max over rows (8 x 1.25e7)": (lambda a: a.reshape(8, -1).max(1),
                                        lambda a: a.reshape(8, -1).max(1),
                                        lambda a: a.reshape(8, -1).max(1)),
         "sum over axis 0 (-> 1e4)": (lambda a: a.sum(0), lambda a: a.sum(0),
                                      lambda a: a.sum(0))}
ours, theirs, jaxs = on_the_gpu(x), cupy.asarray(x), jax.device_put(x)
for name, (n, c, j) in cases.items():
    tn, tc, tj = best(nbjax.jit(n, backend="gpu"), ours), best(c, theirs), best(jax.jit(j), jaxs)
    print(f"{name:28s} nbjax {tn * 1e3:7.3f} ms  cupy {tc * 1e3:7.3f} ms  jax.jit "
          f"{tj * 1e3:7.3f} ms  nbjax/jax {tn / tj:5.2f}x")
step = nbjax.jit(lambda a: jnp.tanh(a) * 0.5, backend="gpu")
chain = lambda a: step(step(step(step(a))))
print(f"4 chained calls on 1e8 elements: {best(chain, ours) * 1e3:.3f} ms (results stay on the GPU)")
PY

# The seed workloads against jax.jit on the GPU.
PYTHONPATH=. timeout 200 "$PY" -m benchmarks.run --backend gpu --budget 5 --reps 5 \
    --only power_sum --only selu --only blur --only batched_matvec \
    --json benchmarks/results_gpu.json

"""The gpu backend on a real GPU (``make gpu-check``): the differential fuzz corpus, the seed
workloads and the library steps against the reference backend. Every test here is marked
``gpu`` and skips, saying what is missing, on a machine without CuPy, a driver or a GPU."""

import os
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import compiler
from nbjax.backends import get_target
from nbjax.backends.gpu import GpuUnavailable

import test_fuzz_differential as fuzz
from benchmarks import workloads
from helpers import assert_close
from test_gpu_codegen import _fuzz_program


def _missing():
    try:
        get_target("gpu").device()
        return None
    except GpuUnavailable as e:
        return str(e)


MISSING = _missing()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
EXAMPLES = int(os.environ.get("NBJAX_GPU_FUZZ_EXAMPLES", "150"))


def test_fuzz_corpus_on_the_gpu():
    gpu, reference = get_target("gpu"), get_target("reference")
    for seed in range(EXAMPLES):
        closed, args, program, x64 = _fuzz_program(seed)
        with nbjax.enable_x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = compiler.compile(closed, gpu, "fuzz").run(*args)
            refs = compiler.compile(closed, reference, "fuzz").run(*args)
        try:
            fuzz._compare_all(outs, refs, program)
        except AssertionError as e:
            raise AssertionError(f"fuzz program {seed}") from e


@pytest.mark.parametrize("name", ["power_sum", "selu", "blur"])
def test_seed_workloads(name):
    f = {"power_sum": workloads.power_sum, "selu": workloads.selu(jnp),
         "blur": workloads.blur(jnp)}[name]
    expected = {"power_sum": workloads.power_sum, "selu": workloads.selu(np),
                "blur": workloads.blur(np)}[name]
    x = np.random.default_rng(0).standard_normal((300, 500)).astype(np.float32)
    assert_close(nbjax.jit(f, backend="gpu")(x), expected(x), rtol=1e-5)


def test_dot_general_and_reductions():
    rng = np.random.default_rng(1)
    m = rng.standard_normal((64, 33)).astype(np.float32)
    v = rng.standard_normal((10, 33)).astype(np.float32)

    def f(m, v):
        y = nbjax.vmap(jnp.dot, in_axes=(None, 0))(m, v)
        return y, nbjax.nn.softmax(y, axis=1), y.sum(), jnp.tan(jnp.tanh(y))  # (no poles)

    outs = nbjax.jit(f, backend="gpu")(m, v)
    y = (m @ v.T).T
    e = np.exp(y - y.max(1, keepdims=True))
    for out, ref in zip(outs, [y, e / e.sum(1, keepdims=True), y.sum(), np.tan(np.tanh(y))]):
        assert_close(out, ref, rtol=1e-4)


def test_compiled_program_shows_its_ptx():
    exe = compiler.compile(nbjax.make_jaxpr(workloads.power_sum)(np.ones(8, np.float32)),
                           get_target("gpu"), "f")
    (kernel,) = exe.kernels
    assert ".entry" in kernel.texts["PTX (module)"]

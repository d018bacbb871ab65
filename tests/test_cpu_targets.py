"""The CPU backend compiled for each x86-64 level LLVM knows, whatever this machine is.

Kernels are compiled with the ``cpu_target`` option naming the level (as if the host were
such a CPU): the code must be vectorised as wide as a plain float32 loop is on that level,
and, where this machine can run it, agree with the reference backend. Code for a level this
machine lacks is refused at run time with an error, never run (it would die of an illegal
instruction).
"""
import re
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.backends.cpu import library, runtime, target
from helpers import cpu_and_reference

LEVELS = ["x86-64-v2", "x86-64-v3", "x86-64-v4"]
# Float32 lanes of a plain loop: SSE's 128-bit vectors; AVX2's 256; on AVX-512, 256 or 512.
EXPECTED_LANES = {"x86-64-v2": {4}, "x86-64-v3": {8}, "x86-64-v4": {8, 16}}

rng = np.random.default_rng(0)


def _floats(*shape):
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[:3] = [np.nan, -np.inf, -0.0]
    return x


PROGRAMS = {
    "power_sum": (lambda x: x + x * x + x * x * x, [_floats(16, 300)]),
    "selu": (lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67), [_floats(16, 300)]),
    "transcendentals": (lambda x: jnp.sin(x) * jnp.tanh(x) + jnp.log1p(jnp.abs(x)),
                        [_floats(9, 257)]),
    "pow": (lambda x, y: jnp.abs(x) ** y, [_floats(8, 300), _floats(8, 300)]),
    "row_sums": (lambda x: jnp.sum(x * x, axis=1), [_floats(33, 500)]),
    "max_over_columns": (lambda x: jnp.max(x, axis=0), [_floats(64, 70)]),
    "integers": (lambda i: (i * 7 >> 2) ^ (i // 3), [rng.integers(-1000, 1000, (7, 301),
                                                                   dtype=np.int32)]),
    "float16": (lambda h: jnp.exp(h) + h, [rng.standard_normal((5, 130)).astype(np.float16)]),
    "gather": (lambda x, i: x[i] * 2.0, [_floats(50, 40), np.array([3, -1, 49, 0], np.int32)]),
    "fori_loop": (lambda x: lax.fori_loop(0, 5, lambda _, v: jnp.tanh(v) + 0.5, x),
                  [_floats(4, 100)]),
    "few_row_product": (lambda h, w: lax.fori_loop(0, 3, lambda _, h: jnp.tanh(h @ w), h),
                        [rng.standard_normal((13, 64)).astype(np.float32),
                         (rng.standard_normal((64, 64)) / 8).astype(np.float32)]),
}
# As wide as a plain float32 loop; or vectorised at all (a float32 sum accumulates in
# float64, so LLVM sizes its vectors by the float64 accumulator).
FULL_WIDTH = {"power_sum", "selu", "transcendentals", "pow"}
VECTORISED = {"row_sums", "integers"}
TILED = {"few_row_product"}  # register tiles (library functions) as wide as the level's vectors


@pytest.fixture(params=LEVELS)
def level(request):
    previous = nbjax.config.cpu_target
    nbjax.config.update("cpu_target", request.param)
    try:
        yield request.param
    finally:
        nbjax.config.update("cpu_target", previous)


def test_plain_float32_loop_width_follows_the_level(level):
    assert runtime.float32_lanes() in EXPECTED_LANES[level]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_kernels_are_vectorised_and_agree_with_the_reference(level, name):
    fn, args = PROGRAMS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu, ref = cpu_and_reference(fn, *args, name=name)
    code = cpu.jit_module.optimised_ir
    if name in FULL_WIDTH:
        widths = {int(n) for n in re.findall(r"<(\d+) x float>", code)}
        assert max(widths, default=1) == runtime.float32_lanes(), widths
    if name in VECTORISED:
        assert re.search(r"<\d+ x (float|double|i32)>", code)
    if name in TILED:
        assert "tiled_product" in code
        tiles = set(re.findall(r'@"?(nbjax_tile_[\w.-]+)"?\(', code))
        widths = {int(n) for tile in tiles
                  for n in re.findall(r"<(\d+) x float>", library.function_ir(tile))}
        assert tiles and max(widths) == runtime.float32_lanes(), (tiles, widths)
    if not target.runs_here():
        with pytest.raises(RuntimeError, match="compiled for the CPU"):
            cpu.run(*args)
        return
    for out, want in zip(cpu.run(*args), ref.run(*args), strict=True):
        assert out.dtype == want.dtype and out.shape == want.shape
        tol = 1e-2 if out.dtype == np.float16 else 2e-6
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol * np.nanmax(np.abs(
            want[np.isfinite(want)]), initial=1.0), equal_nan=True)


def test_the_host_runs_its_own_levels_code():
    """x86-64 and x86-64-v2 run on any machine this project supports."""
    previous = nbjax.config.cpu_target
    try:
        for level in ("x86-64", "x86-64-v2"):
            nbjax.config.update("cpu_target", level)
            assert target.runs_here()
        nbjax.config.update("cpu_target", "znver99-unknown")
        assert not target.runs_here()
    finally:
        nbjax.config.update("cpu_target", previous)

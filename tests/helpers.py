"""Checks shared by the test modules."""

import numpy as np

import nbjax
from nbjax.core import check_jaxpr, eval_jaxpr
from nbjax.tree_util import tree_leaves


def eager_and_traced(fn, *args):
    """``fn(*args)`` eagerly; also traced with make_jaxpr, type-checked and evaluated with
    eval_jaxpr: both must agree exactly (values, dtypes and shapes of every output)."""
    out = fn(*args)
    closed = nbjax.make_jaxpr(fn)(*args)
    check_jaxpr(closed.jaxpr)
    traced = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    for e, t in zip(tree_leaves(out), traced, strict=True):
        assert e.dtype == t.dtype and e.shape == t.shape
        np.testing.assert_array_equal(np.asarray(e), np.asarray(t))
    return out


def is_full_width_float32(ir_text):
    """Whether optimised LLVM IR holds float32 vectors as wide as a plain float32 loop gets
    on the CPU compiled for (8 lanes on AVX2, 8 or 16 on AVX-512, 4 with SSE only)."""
    import re

    from nbjax.backends.cpu.runtime import float32_lanes
    widths = [int(n) for n in re.findall(r"<(\d+) x float>", ir_text)]
    return max(widths, default=1) == float32_lanes()

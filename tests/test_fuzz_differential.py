"""Differential fuzzing: random programs compiled with backend="cpu" against the reference
backend, and every op of the fuzz corpus run eagerly against under ``nbjax.jit``.

``NBJAX_FUZZ_EXAMPLES`` sets how many random programs the test tries (default 500).
``make fuzz FUZZ_MINUTES=N`` runs this file as a script: random programs for N minutes, then
the count of programs tried and the seeds of any mismatches."""

import argparse
import math
import os
import sys
import time
import traceback
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from helpers import cpu_and_reference, random_array

# Programs per run of the suite (~50 s on two cores); `make fuzz` runs more for longer.
EXAMPLES = int(os.environ.get("NBJAX_FUZZ_EXAMPLES", "500"))

DTYPES_32 = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
             np.float16, np.float32, np.complex64]
DTYPES_64 = [np.int64, np.float64]  # need enable_x64
DTYPES = DTYPES_32 + DTYPES_64
DIMS = [0, 1, 2, 3, 5]
LAYOUTS = ["c", "strided", "transposed", "reversed", "reversed_strided"]


def _kind(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "bool"
    return {"i": "int", "u": "int", "f": "float", "c": "complex"}[dtype.kind]


def _input(rng, shape, dtype, special):
    """Random values of ``dtype``: integers in [-1000, 1000], floats normal with scale 3;
    ``special`` adds the extremes (random_array's: each integer type's min and max and values
    across its whole range, so arithmetic wraps around; NaN, +-inf, -0.0 and huge floats)."""
    bounds = {"low": -1000, "high": 1000} if _kind(dtype) == "int" else {"scale": 3}
    return random_array(rng, shape, dtype, special=special, **bounds)


def _make_input(rng, shape, dtype, layout, special):
    """An input of ``shape`` laid out contiguously, strided, transposed or with negative
    strides (``x[::-1]``, ``x[:, ::-2]``)."""
    if layout in ("strided", "reversed_strided") and shape:
        wide = _input(rng, shape[:-1] + (2 * shape[-1],), dtype, special)
        return wide[..., ::2] if layout == "strided" else wide[..., ::-2]
    if layout == "transposed" and len(shape) >= 2:
        return _input(rng, shape[::-1], dtype, special).T
    if layout == "reversed" and shape:
        return _input(rng, shape, dtype, special)[::-1]
    return _input(rng, shape, dtype, special)


def _broadcast_partner_shape(rng, shape):
    """A shape that broadcasts with ``shape``: some axes set to 1, leading ones dropped, or
    the other way round (``shape`` is the one that is broadcast)."""
    other = [1 if rng.random() < 0.3 else d for d in shape]
    other = other[int(rng.integers(0, len(other) + 1)):]
    if rng.random() < 0.3:
        other = [int(rng.choice([1, 2, 3]))] + list(shape)
    return tuple(other)


class _Program:
    """A random program built op by op from random choices (seeded by the caller).

    ``x`` is the running value; ``y`` a second input whose shape broadcasts against x's.
    ``exact`` tracks whether a float value may differ by rounding between the backends
    (transcendentals, float sums), so that discontinuous ops (floor, comparisons, argmax,
    conversions to int, indices) are only applied to exact values. ``bounds`` are the
    magnitudes of the float intermediates (the same sums and dots on |operands|), extra
    outputs that scale the comparison's absolute tolerance."""

    def __init__(self, rng, x, y=None):
        self.rng = rng
        self.x = x
        self.y = y
        self.exact = True
        self.outputs = []
        self.exact_outputs = []
        self.bounds = []

    # --- random choices
    def choice(self, options):
        return options[self.integer(0, len(options) - 1)]

    def integer(self, lo, hi):
        return int(self.rng.integers(lo, hi, endpoint=True))

    def flip(self):
        return bool(self.rng.integers(0, 2))

    def kind(self):
        return _kind(self.x.dtype)

    def axis(self):
        return self.integer(0, self.x.ndim - 1)

    def indices(self, n, size):
        """``size`` indices into an axis of ``n``: in range, negative, and out of range."""
        return self.rng.integers(-2 * n - 1, 2 * n + 1, size, endpoint=True).astype(np.int32)

    def inexact_result(self, operands):
        """Mark the float result of a sum/dot as rounded; record its magnitude bound."""
        self.exact = False
        self.bounds.append(jnp.max(jnp.abs(jnp.where(jnp.isfinite(operands), operands, 0)),
                                   initial=0).astype(jnp.float32))

    def step(self, names=None):
        names = CORPUS if names is None else names
        self.choice([getattr(self, name) for name in names if self.accepts(name)])()

    def accepts(self, name):
        """Whether op ``name`` applies to the current value."""
        kind, ndim = self.kind(), self.x.ndim
        discontinuous = kind in ("int", "bool") or (kind == "float" and self.exact)
        return {
            "contract": kind != "bool",
            "convolve": kind != "bool" and ndim > 0,
            "argminmax": kind != "complex" and discontinuous and self.x.size > 0,
            "gather": True,
            "scatter": ndim > 0 and self.x.shape[0] > 0,
            "sort": kind != "complex" and ndim > 0,
            "argsort": kind != "complex" and ndim > 0 and discontinuous,
            "cumulative": kind != "complex" and ndim > 0,
            "binary_broadcast": self.y is not None and _broadcastable(self.x, self.y),
        }.get(name, True)

    # --- the corpus
    def unary(self):
        x, kind = self.x, self.kind()
        if kind == "bool":
            self.x = ~x
        elif kind == "complex":
            if self.flip():
                # (the functions whose special values the compiled parts follow exactly)
                self.x = self.choice([jnp.exp, jnp.abs, jnp.real, jnp.sqrt, jnp.log])(x)
                self.exact = False
            elif self.flip():
                self.x = self.choice([jnp.negative, jnp.conj])(x)
            else:
                self.x = self._complex_multiply(x, x)
        elif kind == "float":
            # sin and cos of a rounded value only near zero: an ulp of 6e9 is 512, so the
            # cosine of a large argument is anything at all
            periodic = [lambda v, f=f: f(v if self.exact else jnp.clip(v, -8.0, 8.0))
                        for f in (jnp.sin, jnp.cos)]
            smooth = [periodic[0], jnp.tanh, jnp.exp, lambda v: jnp.log1p(jnp.abs(v)),
                      lambda v: jnp.sqrt(jnp.abs(v)), lax.logistic, periodic[1], jnp.expm1,
                      lambda v: v ** 0.5]
            exact = [jnp.negative, jnp.abs, jnp.floor, jnp.round, jnp.sign,
                     lambda v: lax.integer_pow(v, 3), lambda v: v * v]
            if self.exact and self.flip():
                self.x = self.choice(exact)(x)
            else:
                self.x = self.choice(smooth + exact[:2])(x)
                self.exact = False
        else:
            self.x = self.choice([jnp.negative, jnp.abs, jnp.invert, lax.population_count,
                                  lambda v: v >> 2, lambda v: lax.shift_left(v, v),
                                  jnp.sign, lambda v: v * v + v])(x)

    def _other(self):
        """Another value of x's shape and dtype, computed from x (same index or not)."""
        x = self.x
        return self.choice([
            lambda: x,
            lambda: jnp.flip(x, axis=-1) if x.ndim else x,
            lambda: jnp.full_like(x, self.integer(-3, 3)),
            lambda: (jnp.max(x, axis=0, keepdims=True) if x.ndim and x.shape[0]
                     and self.kind() != "complex" else x) * jnp.ones_like(x),
        ])()

    def _combine(self, x, y):
        """A random binary op of x and y (broadcasting), cast back to x's dtype."""
        kind = self.kind()
        if kind == "bool":
            ops = [jnp.logical_and, jnp.logical_or, jnp.logical_xor,
                   lambda a, b: jnp.where(a, b, ~b)]
        elif kind == "complex":
            ops = [jnp.add, jnp.subtract, self._complex_multiply]
        else:
            ops = [jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum,
                   lambda a, b: jnp.where(a > b, a, b * 2)]
            if kind == "int":
                ops += [_lax_div, _lax_rem, jnp.bitwise_xor, jnp.bitwise_and,
                        lambda a, b: jnp.where(a == b, a, b)]
            elif self.exact:
                ops += [_lax_div, lambda a, b: jnp.clip(a, -1.5, b)]
            else:
                ops = ops[:5] + [_lax_div]
        out = self.choice(ops)(x, _astype(y, x.dtype) if y.dtype != x.dtype else y)
        return _astype(out, x.dtype) if out.dtype != x.dtype else out

    def _complex_multiply(self, a, b):
        """a * b, rounded differently by NumPy's vector and scalar loops (the vector loop
        fuses a multiply and an add), which also disagree on infinities: inexact, and
        without infinities or values that overflow."""
        a, b = _no_overflow(a, 2, factors=2, infinities=False), _no_overflow(b, 2, factors=2,
                                                                            infinities=False)
        self.inexact_result(jnp.abs(a) * jnp.abs(b))
        return a * b

    def binary(self):
        self.x = self._combine(self.x, self._other())

    def binary_broadcast(self):
        """x combined with the second input, whose shape broadcasts against x's."""
        if _kind(self.y.dtype) == "float" and self.kind() in ("int", "bool"):
            return  # a float converted to an integer is exact, but not after rounding
        self.x = self._combine(self.x, self.y)

    def convert(self):
        if self.kind() in ("float", "complex") and not self.exact:
            target = self.choice([jnp.float32, jnp.float16, jnp.complex64])
        else:
            target = self.choice(_active_dtypes())
        self.x = _astype(self.x, target)

    def reduce(self):
        x = self.x
        if x.ndim == 0:
            return
        axes = tuple(sorted({self.axis() for _ in range(self.integer(1, 2))}))
        kind = self.kind()
        if kind == "bool":
            fn = self.choice([lax.reduce_or, lax.reduce_and])
        elif kind == "complex":
            fn = lax.reduce_sum
        else:
            fn = self.choice([lax.reduce_sum, lax.reduce_max, lax.reduce_min, lax.reduce_prod])
        terms = math.prod(x.shape[a] for a in axes)
        if fn is lax.reduce_sum:
            x = _no_overflow(x, terms)
        elif fn is lax.reduce_prod:
            x = _no_overflow(x, 1, factors=terms, infinities=False)
        self.x = fn(x, axes)
        if kind in ("float", "complex") and fn in (lax.reduce_sum, lax.reduce_prod):
            self.inexact_result(fn(jnp.abs(x), axes))
        if self.flip():
            self.x = jnp.expand_dims(self.x, axes)

    def structural(self):
        x = self.x
        if x.ndim == 0:
            self.x = jnp.broadcast_to(x, (self.choice(DIMS), 2))
            return
        axis = self.axis()
        n = x.shape[axis]
        start = self.integer(0, n)
        stop = self.integer(start, n)
        step = self.integer(1, 3)
        ops = [
            lambda: lax.slice_in_dim(x, start, stop, step, axis),
            lambda: jnp.flip(x, axis),
            lambda: jnp.transpose(x),
            lambda: x.reshape(-1),
            lambda: x.reshape((1,) + x.shape)[:, None],
            lambda: x[::-1, ..., ::-2] if x.ndim >= 2 else x[::-2],
            lambda: lax.pad(x, lax.convert_element_type(0, x.dtype),
                            [(self.integer(-1, 2), self.integer(-1, 2),
                              self.integer(0, 1))] * x.ndim),
            lambda: jnp.concatenate([x, jnp.flip(x, axis)[..., :1] if x.shape[-1] else x],
                                    axis=-1),
            lambda: jnp.concatenate([-x, x[..., start:stop], x + x], axis=-1),
            lambda: lax.dynamic_slice_in_dim(x, self.integer(-2, 6),
                                             self.integer(0, n), axis),
        ]
        if self.integer(0, 9) == 0:
            ops.append(lambda: lax.cond(self.flip(), lambda v: v,
                                        lambda v: jnp.flip(v, axis), x))
        try:
            self.x = self.choice(ops)()
        except (ValueError, TypeError):  # a pad that would shrink an axis below 0
            pass

    def contract(self):
        """dot/einsum of every rank: vector.vector (0-d), matrix.vector, matrix.matrix,
        batched, outer, and full contractions; at times the sum of two of them (a product
        adding into the other's buffer)."""
        # (complex infinities are left out: BLAS scales a product by alpha = 1 + 0i, which
        # makes 0 * inf NaNs of infinite parts that NumPy's own loop, taken for small
        # matrices, leaves infinite)
        x = _no_overflow(self.x, 2 * self.x.size, factors=2,
                         infinities=self.kind() != "complex")
        abs_x = jnp.abs(x) if self.kind() in ("float", "complex") else None
        ops = {0: [lambda v: jnp.dot(v, v), lambda v: jnp.einsum(",->", v, v)],
               1: [lambda v: jnp.dot(v, v), lambda v: jnp.vdot(v, jnp.flip(v)),
                   lambda v: jnp.einsum("i,i->", v, v), lambda v: jnp.inner(v, v),
                   lambda v: jnp.outer(v, v[::-1]), lambda v: v @ v],
               2: [lambda v: v @ v.T, lambda v: v.T @ v,
                   lambda v: v @ (v[0] if v.shape[0] else jnp.ones(v.shape[1], v.dtype)),
                   lambda v: jnp.einsum("ij,ij->i", v, v),
                   lambda v: jnp.einsum("ij,kj->", v, v),
                   lambda v: jnp.tensordot(v, v, 2)],
               3: [lambda v: jnp.einsum("bij,bkj->bik", v, v),
                   lambda v: jnp.matmul(v, jnp.swapaxes(v, -1, -2)),
                   lambda v: jnp.einsum("bij,j->bi", v, v[0, 0] if v.shape[0] * v.shape[1]
                                        else jnp.ones(v.shape[2], v.dtype))]}
        fn = self.choice(ops.get(x.ndim, [lambda v: jnp.tensordot(v, v, v.ndim)]))
        if self.flip():
            self.x = fn(x)
            if abs_x is not None:
                self.inexact_result(fn(abs_x))
            return
        y = x[::-1] if x.ndim else -x
        self.x = fn(x) + fn(y)
        if abs_x is not None:
            self.inexact_result(fn(abs_x) + fn(jnp.abs(y)))
            self.inexact_result(self.x)  # (read by two kernels, the sum is materialised)

    def argminmax(self):
        x = self.x
        fn = self.choice([jnp.argmax, jnp.argmin])
        if x.ndim == 0 or self.flip():
            self.x = fn(x)
        else:
            self.x = fn(x, axis=self.axis(), keepdims=self.flip())
        self.exact = True

    def gather(self):
        """x[idx], jnp.take with every mode, and indices read from an integer x, with
        indices in range, negative and out of range."""
        x = self.x
        if x.ndim == 0:
            self.x = jnp.take(jnp.stack([x, x]), jnp.int32(self.integer(-3, 3)),
                              mode=self.choice(["clip", "wrap", "fill"]))
            return
        axis = self.axis()
        n = x.shape[axis]
        idx = self.indices(n, self.choice([(), (3,), (2, 2), (0,)]))
        mode = self.choice([None, "fill", "clip", "wrap"])
        ops = [lambda: x[idx],
               lambda: x[jnp.int32(idx.flat[0]) if idx.size else 0],
               lambda: x[..., idx] if x.shape[-1] else x,
               lambda: x[idx, ::-1] if x.ndim >= 2 else x[idx],
               lambda: jnp.take(x, idx, axis=axis, mode=mode),
               lambda: jnp.take(x, idx, mode=mode),
               lambda: x.at[idx].get(mode="clip" if mode == "wrap" else mode)]
        if self.kind() == "int" and x.size:
            table = jnp.asarray(self.rng.standard_normal(7).astype(np.float32))
            ops.append(lambda: jnp.take(table, x, mode=self.choice(["clip", "wrap", "fill"])))
            ops.append(lambda: jnp.take(x.reshape(-1), x, mode="clip"))
        if x.size == 0:
            return  # an empty axis has nothing to read, whatever the mode
        try:
            self.x = self.choice(ops)()
        except IndexError:  # indexing an empty axis
            pass

    def scatter(self):
        """x.at[idx].set/add/mul/min/max with duplicate, negative and out-of-range indices
        (duplicates only where the combination does not depend on the order)."""
        x, kind = self.x, self.kind()
        n = x.shape[0]
        methods = ["set"] + (["add"] if kind != "bool" else []) + (
            ["min", "max", "mul"] if kind in ("int", "float") else [])
        method = self.choice(methods)
        if method == "set":  # distinct elements: which duplicate wins is unspecified
            picks = self.rng.permutation(n)[:self.integer(0, n)]
            picks = np.where(self.rng.random(picks.size) < 0.5, picks - n, picks)
            idx = np.concatenate([picks, [n, -n - 1, 3 * n]]).astype(np.int32)
        else:
            idx = self.indices(n, self.integer(0, 6))
        if method == "add":
            x = _no_overflow(x, idx.size + 1)
        elif method == "mul":
            x = _no_overflow(x, 1, factors=idx.size + 1, infinities=False)
        update = self.choice([lambda: x[:1], lambda: jnp.ones_like(x[:1]),
                              lambda: jnp.flip(x, 0)[:1]])()
        update = jnp.broadcast_to(update, (idx.size,) + x.shape[1:])
        self.x = getattr(x.at[idx], method)(update, mode=self.choice([None, "drop", "clip"])
                                            if method != "set" else None)
        if kind in ("float", "complex") and method in ("add", "mul"):
            self.inexact_result(jnp.abs(x))

    def sort(self):
        x = self.x
        self.x = jnp.sort(x, axis=self.choice([None, self.axis(), -1]))

    def argsort(self):
        x = self.x
        self.x = jnp.argsort(x, axis=self.choice([self.axis(), -1]), stable=True,
                             descending=self.flip())
        self.exact = True

    def cumulative(self):
        x, axis, kind = self.x, self.axis(), self.kind()
        reverse = self.flip()
        which = self.integer(0, 4 if kind != "bool" else 1)
        if which in (0, 4):
            x = _no_overflow(x, x.shape[axis])
        elif which == 1:
            x = _no_overflow(x, 1, factors=x.shape[axis], infinities=False)
        ops = [lambda: jnp.cumsum(x, axis), lambda: jnp.cumprod(x, axis),
               lambda: lax.cummax(x, axis, reverse), lambda: lax.cummin(x, axis, reverse),
               lambda: lax.cumsum(x, axis, reverse)]
        self.x = ops[which]()
        if kind == "float" and which in (0, 1, 4):
            self.inexact_result(jnp.cumsum(jnp.abs(x), axis) if which != 1
                                else jnp.cumprod(jnp.abs(x), axis))

    def convolve(self):
        """x as a batch of one-feature signals or images (its last one or two axes
        spatial) convolved with a small random kernel of one or two output features:
        strides, padding (negative too), input and kernel dilation."""
        x = _no_overflow(self.x, 8 * self.x.size)  # the kernel's weights are small
        n = min(x.ndim, self.integer(1, 2))
        lhs = x.reshape((math.prod(x.shape[:x.ndim - n]), 1) + x.shape[x.ndim - n:])
        shape = (self.integer(1, 2), 1) + tuple(self.integer(1, 3) for _ in range(n))
        rhs = jnp.asarray(_astype(self.rng.integers(-2, 3, shape) if self.kind() == "int"
                                  else self.rng.standard_normal(shape), x.dtype))
        params = ([self.integer(1, 2) for _ in range(n)],
                  [(self.integer(-1, 2), self.integer(-1, 2)) for _ in range(n)],
                  [self.integer(1, 2) for _ in range(n)], [self.integer(1, 2) for _ in range(n)])
        if any((size - 1) * d + 1 + lo + hi < (k - 1) * r + 1 for size, d, (lo, hi), k, r in
               zip(lhs.shape[2:], params[2], params[1], shape[2:], params[3])):
            return  # the window is larger than the padded input
        self.x = lax.conv_general_dilated(lhs, rhs, *params)
        if self.kind() in ("float", "complex"):
            self.inexact_result(lax.conv_general_dilated(jnp.abs(lhs), jnp.abs(rhs), *params))

    def loop(self):
        """One or two ops of the corpus as the body of a scan of two iterations (a native
        loop calling BLAS and host steps for the library ops): each iteration's result is
        a row of the scan's output; the carry is the value itself. Half the loops also
        carry and stack values the program drops (dead code elimination prunes them)."""
        sub = _Program(self.rng, self.x, self.y)
        sub.exact = self.exact
        steps = self.integer(1, 2)
        dead = self.flip()

        def body(carry, _):
            value, previous = carry
            sub.x, sub.bounds = value, []
            for _ in range(steps):
                sub.step([n for n in CORPUS if n not in ("keep_output", "loop")])
            ys = (sub.x, [jnp.asarray(b, jnp.float32) for b in sub.bounds])
            return (value, value), ys + ((sub.x, previous) if dead else ())

        _, (self.x, bounds, *_) = lax.scan(body, (self.x, self.x), None, length=2)
        self.exact = sub.exact
        self.bounds += [jnp.max(b) for b in bounds]

    def keep_output(self):
        self.outputs.append(self.x)
        self.exact_outputs.append(self.exact)


# The op names a program is built from; each is a _Program method.
CORPUS = ["unary", "binary", "binary_broadcast", "convert", "reduce", "structural",
          "contract", "convolve", "argminmax", "gather", "scatter", "sort", "argsort", "cumulative",
          "loop", "keep_output"]


def _no_overflow(x, terms, factors=1, infinities=True):
    """Float ``x`` with every finite value that could overflow a sum of ``terms`` products
    of ``factors`` of them set to 0 (and its infinities too unless ``infinities``).

    Backends sum in different orders (pairwise, blocked, BLAS with fused multiply-adds).
    Once a partial sum or product overflows, whether the total is NaN or +-inf depends on
    that order (huge + huge - inf); without overflow it does not (inf - inf is NaN in any
    order). A product's order also decides between 0 * inf and tiny * inf."""
    if _kind(x.dtype) not in ("float", "complex"):
        return x
    limit = (float(jnp.finfo(x.dtype).max) / (2 * max(terms, 1))) ** (1 / max(factors, 1))
    keep = jnp.isnan(x) | (jnp.abs(x) <= limit)
    if infinities:
        keep = keep | jnp.isinf(x)
    return jnp.where(keep, x, jnp.zeros_like(x))


def _lax_div(a, b):
    return lax.div(*jnp.broadcast_arrays(a, b))


def _lax_rem(a, b):
    return lax.rem(*jnp.broadcast_arrays(a, b))


def _broadcastable(x, y):
    try:
        np.broadcast_shapes(x.shape, y.shape)
        return True
    except ValueError:
        return False


def _active_dtypes():
    return DTYPES if nbjax.config.enable_x64 else DTYPES_32


def _astype(x, dtype):
    """``x`` converted to ``dtype``."""
    if _kind(x.dtype) == "complex" and _kind(dtype) != "complex":
        x = jnp.real(x)  # what a conversion does, without NumPy's ComplexWarning
    return lax.convert_element_type(x, dtype)


# --- comparing ---------------------------------------------------------------------------

def _tolerance(dtype):
    return {np.float16: 2e-2, np.float32: 1e-4, np.complex64: 1e-4}.get(
        np.dtype(dtype).type, 1e-9)


def _compare(out, ref, exact, bound=0.0):
    """Equal values (NaN equal to NaN) for exact results; otherwise within rtol and an atol
    scaled to the operands: ``bound`` is the largest |operand| sum or dot of the program."""
    out, ref = np.asarray(out), np.asarray(ref)
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape,
                                                              out.dtype, ref.dtype)
    if ref.dtype.kind == "c":  # NumPy would compare the other part of an infinity exactly
        out, ref = np.stack([out.real, out.imag]), np.stack([ref.real, ref.imag])
    if ref.dtype.kind in "fc" and not exact:
        finite = np.abs(ref[np.isfinite(ref)]).astype(np.float64)
        scale = 1.0 + max(bound, finite.max() if finite.size else 0.0)
        tol = _tolerance(ref.dtype)
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * scale, equal_nan=True)
    else:
        np.testing.assert_array_equal(out, ref)


# --- random programs, backend="cpu" against the reference backend -----------------------

def _draw_program(rng):
    """Everything that defines one random program, drawn from ``rng``."""
    dtype = DTYPES[rng.integers(len(DTYPES))]
    shape = tuple(int(d) for d in rng.choice(DIMS, rng.integers(0, 4)))
    y_dtype = dtype if rng.random() < 0.7 else DTYPES[rng.integers(len(DTYPES))]
    return dict(dtype=dtype, shape=shape, layout=LAYOUTS[rng.integers(len(LAYOUTS))],
                n_ops=int(rng.integers(1, 9)), special=bool(rng.integers(2)),
                y_shape=_broadcast_partner_shape(rng, shape), y_dtype=y_dtype,
                x64=dtype in DTYPES_64 or y_dtype in DTYPES_64 or rng.random() < 0.2)


def _trace(spec, rng):
    """The program of ``spec`` as a function of (x, y), plus the list its _Program lands in."""
    programs = []

    def f(x, y):
        p = _Program(rng, x, y)
        for _ in range(spec["n_ops"]):
            p.step()
        p.keep_output()
        programs.append(p)
        return p.outputs, p.bounds

    return f, programs


def check_program(seed):
    """Build program ``seed``, compile it for both backends, run both, compare."""
    rng = np.random.default_rng(seed)
    spec = _draw_program(rng)
    with nbjax.enable_x64(spec["x64"]):
        x = _make_input(rng, spec["shape"], spec["dtype"], spec["layout"], spec["special"])
        y = _make_input(rng, spec["y_shape"], spec["y_dtype"], "c", spec["special"])
        f, programs = _trace(spec, rng)
        cpu, ref = cpu_and_reference(f, x, y, name="fuzz")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs, refs = cpu.run(x, y), ref.run(x, y)
    _compare_all(outs, refs, programs[0])


def _compare_all(outs, refs, program):
    """Compare a program's outputs (then its bounds, which are rounded sums)."""
    assert len(outs) == len(refs) == len(program.outputs) + len(program.bounds)
    bounds = [float(b) for b in refs[len(program.outputs):] if np.isfinite(b)]
    bound = max(bounds + [0.0])
    exact = program.exact_outputs + [False] * len(program.bounds)
    for out, r, e in zip(outs, refs, exact):
        _compare(out, r, e, bound)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2 ** 32))
def test_differential_random_programs(seed):
    check_program(seed)


# --- every op of the corpus, eagerly and under jit ----------------------------------------

SHAPES = [(3, 4), (5,), (2, 3, 2), (), (4, 1), (0, 3), (10,)]
EAGER_JIT_PROGRAMS = 32  # per op and x64 setting, all in one jitted function


def _eager_jit_input(seed, dtypes):
    """The (x, y) of sub-program ``seed``: x of one of ``dtypes``, y broadcasting with x."""
    rng = np.random.default_rng(seed)
    dtype, shape = dtypes[seed % len(dtypes)], SHAPES[seed % len(SHAPES)]
    x = _make_input(rng, shape, dtype, LAYOUTS[seed % len(LAYOUTS)], seed % 3 != 0)
    y = _make_input(rng, _broadcast_partner_shape(rng, shape), dtype, "c", True)
    return x, y


def check_eager_and_jit(name, seeds, x64):
    """Op ``name`` on random inputs (one sub-program per seed, every dtype), run eagerly
    (the reference implementations) and under nbjax.jit (the default cpu backend), in one
    jitted function so that it compiles once: the same values."""
    with nbjax.enable_x64(x64):
        inputs = [_eager_jit_input(seed, _active_dtypes()) for seed in seeds]
        programs = []

        def f(inputs):
            outs = []
            for seed, (x, y) in zip(seeds, inputs):
                p = _Program(np.random.default_rng(seed), x, y)
                if p.accepts(name):
                    getattr(p, name)()
                p.keep_output()
                programs.append(p)
                outs.append(p.outputs + p.bounds)
            return outs

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eager = f([(jnp.asarray(x), jnp.asarray(y)) for x, y in inputs])
            jitted = nbjax.jit(f)(inputs)
    for seed, program, out, ref in zip(seeds, programs, jitted, eager):
        try:
            _compare_all(out, ref, program)
        except AssertionError as e:
            raise AssertionError(f"{name}, sub-program {seed} ({inputs[seeds.index(seed)]}): "
                                 f"eager and jit differ") from e


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name", [n for n in CORPUS if n != "keep_output"])
def test_eager_and_jit_agree(name, x64):
    start = 1000 * CORPUS.index(name)
    check_eager_and_jit(name, list(range(start, start + EAGER_JIT_PROGRAMS)), x64)


# --- `make fuzz`: random programs until time is up ----------------------------------------

def main(argv=None):
    """Try random programs (cpu against reference) for ``--minutes``, from a random first
    seed; print how many were tried and every mismatch's seed (rerun one with
    ``check_program(seed)``). Exit status 1 when there was a mismatch."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=None, help="first seed (default random)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(2 ** 32))
    deadline = time.monotonic() + 60 * args.minutes
    tried, mismatches = 0, []
    while time.monotonic() < deadline:
        try:
            check_program(seed)
        except Exception:  # noqa: BLE001 - a crash of either backend is a finding too
            mismatches.append(seed)
            print(f"mismatch: seed {seed}\n{traceback.format_exc(limit=3)}", flush=True)
        tried += 1
        seed = (seed + 1) % 2 ** 32
    print(f"fuzz: {tried} programs tried in {args.minutes:g} min, "
          f"{len(mismatches)} mismatches{': seeds ' + str(mismatches) if mismatches else ''}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    os.environ.setdefault("NBJAX_DISABLE_DISK_CACHE", "1")  # thousands of one-off programs
    sys.exit(main())

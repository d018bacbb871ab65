"""Count float32 results of nbjax (eager and jit) and JAX that are not correctly rounded, and
where nbjax and JAX disagree (NEEDS JAX; a measurement tool, not a test).

    PYTHONPATH=. /work/main/.venv/bin/python tools/compare_jax_math.py [n_random]

Inputs: random float32 bit patterns (every exponent equally likely), uniform draws in
[-10, 10] and special points. The correctly rounded value is the float64 result (NumPy or
SciPy) rounded to float32, which is right except for rare double roundings. Columns: the
number of inputs where each of nbjax eager, nbjax jit and jax.jit is not that value, then
where eager and jit differ from JAX.
"""

import sys

import jax
import jax.numpy as jjnp
import numpy as np
import scipy.special as sc

import nbjax
import nbjax.numpy as jnp
import nbjax.scipy.special as nsc

UNARY = {  # name: (nbjax function, JAX function, float64 reference)
    "sin": (jnp.sin, jjnp.sin, np.sin), "cos": (jnp.cos, jjnp.cos, np.cos),
    "tan": (jnp.tan, jjnp.tan, np.tan), "arcsin": (jnp.arcsin, jjnp.arcsin, np.arcsin),
    "arccos": (jnp.arccos, jjnp.arccos, np.arccos),
    "arctan": (jnp.arctan, jjnp.arctan, np.arctan), "sinh": (jnp.sinh, jjnp.sinh, np.sinh),
    "cosh": (jnp.cosh, jjnp.cosh, np.cosh), "tanh": (jnp.tanh, jjnp.tanh, np.tanh),
    "arcsinh": (jnp.arcsinh, jjnp.arcsinh, np.arcsinh),
    "arccosh": (jnp.arccosh, jjnp.arccosh, np.arccosh),
    "arctanh": (jnp.arctanh, jjnp.arctanh, np.arctanh),
    "exp": (jnp.exp, jjnp.exp, np.exp), "exp2": (jnp.exp2, jjnp.exp2, np.exp2),
    "expm1": (jnp.expm1, jjnp.expm1, np.expm1), "log": (jnp.log, jjnp.log, np.log),
    "log2": (jnp.log2, jjnp.log2, np.log2), "log10": (jnp.log10, jjnp.log10, np.log10),
    "log1p": (jnp.log1p, jjnp.log1p, np.log1p), "sqrt": (jnp.sqrt, jjnp.sqrt, np.sqrt),
    "cbrt": (jnp.cbrt, jjnp.cbrt, np.cbrt),
    "logistic": (nbjax.nn.sigmoid, jax.nn.sigmoid, sc.expit),
    "erf": (nsc.erf, jax.scipy.special.erf, sc.erf),
    "erfc": (nsc.erfc, jax.scipy.special.erfc, sc.erfc),
    "erfinv": (nsc.erfinv, jax.scipy.special.erfinv, sc.erfinv),
    "gammaln": (nsc.gammaln, jax.scipy.special.gammaln, sc.gammaln),
    "digamma": (nsc.digamma, jax.scipy.special.digamma, sc.psi),
}
BINARY = {"pow": (jnp.power, jjnp.power, np.power),
          "arctan2": (jnp.arctan2, jjnp.arctan2, np.arctan2)}


def inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits)]
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, np.inf, -np.inf, np.nan, 1e-30,
                        np.pi, 88.7, -103.9, 1e30], np.float32)
    dense = rng.uniform(-10, 10, n).astype(np.float32)
    return np.concatenate([special, bits, dense])


def wrong(got, want):
    """Positions where got and want differ (NaNs agree with NaNs, -0 differs from 0)."""
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    return ~(same | (np.isnan(got) & np.isnan(want)))


def row(name, fns, args):
    nb, jx, ref = fns
    with np.errstate(all="ignore"):
        want = np.asarray(ref(*[a.astype(np.float64) for a in args])).astype(np.float32)
    eager = np.asarray(nb(*args))
    jitted = np.asarray(nbjax.jit(nb)(*args))
    theirs = np.asarray(jax.jit(jx)(*args))
    counts = [wrong(x, want).sum() for x in (eager, jitted, theirs)]
    counts += [wrong(eager, theirs).sum(), wrong(jitted, theirs).sum()]
    print(f"| {name:9s} | " + " | ".join(f"{c:6d}" for c in counts) + " |", flush=True)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    x = inputs(n)
    print(f"{x.size} inputs")
    print("| function  | eager  | jit    | JAX    | e!=JAX | j!=JAX |")
    print("|-----------|--------|--------|--------|--------|--------|")
    for name, fns in UNARY.items():
        row(name, fns, [x])
    y = np.random.default_rng(1).permutation(x)
    for name, fns in BINARY.items():
        row(name, fns, [x, y])


if __name__ == "__main__":
    main()

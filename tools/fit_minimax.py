"""Derive the polynomial coefficients used by nbjax/backends/llvm/mathlib.py.

Each transcendental function in the CPU math library reduces its argument to a small
interval and evaluates a polynomial there. This script computes those polynomials with the
Remez exchange algorithm in high precision (mpmath), minimising the maximum RELATIVE error
of the polynomial against the target function, and prints them as Python literals ready to
paste into mathlib.py (float64 coefficients as exact `repr`s; float32 ones rounded to
float32 first). It also prints the achieved maximum relative error so the degree choice in
mathlib can be checked: aim for about 2**-27 (float32) and 2**-58 (float64), i.e. well
below half an ulp, so that the rounding of the evaluation dominates the total error.

Needs mpmath and numpy (mpmath is a dependency of this tool only, not of nbjax):
    pip install mpmath; python tools/fit_minimax.py [name ...]
(a few minutes for all fits; name one or more of the FITS / ERF_TAIL names to redo those).
"""
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 60


def remez(func, a, b, powers, center=0, iterations=40, grid_size=4000):
    """Minimax fit `func(t) ~ sum(c_k * (t - center)**powers[k])` on [a, b], relative error.

    Classic exchange: solve for the polynomial that equi-oscillates on a reference set,
    move the reference to the extrema of the new error curve, repeat until the extrema are
    all (nearly) as large as the levelled error. Returns (coefficients, max_rel_error).
    """
    n = len(powers)
    m = n + 1
    a, b = mp.mpf(a), mp.mpf(b)
    # Dense grid clustered at the ends (Chebyshev-like), where the error peaks.
    grid = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * i / (grid_size - 1))
            for i in range(grid_size)]
    fvals = [func(t) for t in grid]
    ref = [int(round((grid_size - 1) * (1 - np.cos(np.pi * i / (m - 1))) / 2)) for i in range(m)]
    coeffs, err = None, None
    for _ in range(iterations):
        rows = [[(grid[i] - center) ** p for p in powers] + [(-1) ** j * abs(fvals[i])]
                for j, i in enumerate(ref)]
        sol = mp.lu_solve(mp.matrix(rows), mp.matrix([fvals[i] for i in ref]))
        coeffs = [sol[k] for k in range(n)]
        level = abs(sol[n])
        err = [(fvals[i] - sum(c * (grid[i] - center) ** p for c, p in zip(coeffs, powers))) / fvals[i]
               for i in range(grid_size)]
        new_ref = _alternating_extrema(err, m)
        worst = max(abs(e) for e in err)
        if new_ref is None:
            break
        ref = new_ref
        if worst <= level * (1 + mp.mpf("1e-4")):
            break
    return coeffs, max(abs(e) for e in err)


def _alternating_extrema(err, m):
    """Indices of the largest |err| in each run of constant sign, trimmed to m points."""
    runs, start = [], 0
    for i in range(1, len(err) + 1):
        if i == len(err) or (err[i] > 0) != (err[start] > 0):
            runs.append(max(range(start, i), key=lambda k: abs(err[k])))
            start = i
    if len(runs) < m:
        return None
    while len(runs) > m:  # drop the smaller end extremum, which keeps the alternation
        if abs(err[runs[0]]) < abs(err[runs[-1]]):
            runs.pop(0)
        else:
            runs.pop()
    return runs


def _regular(f, at_zero):
    """Wrap a function with a removable singularity at 0."""
    return lambda t: at_zero if t == 0 else f(t)


LN2_HALF = mp.log(2) / 2 * mp.mpf("1.01")
PIO4 = mp.pi / 4 * mp.mpf("1.01")
LOG_Z = (mp.sqrt(2) - 1) ** 2 / (mp.sqrt(2) + 1) ** 2 * mp.mpf("1.01")   # s**2, s=f/(2+f)

# name: (target, interval, {dtype: powers}) -- the forms are documented in mathlib.py.
FITS = {
    # exp(r) = 1 + r + r**2 * P(r)
    "exp": (_regular(lambda r: (mp.exp(r) - 1 - r) / r ** 2, mp.mpf(1) / 2),
            (-LN2_HALF, LN2_HALF), {"f32": range(5), "f64": range(11)}),
    # expm1(r) = r + r**2/2 + r**3 * P(r)
    "expm1": (_regular(lambda r: (mp.expm1(r) - r - r ** 2 / 2) / r ** 3, mp.mpf(1) / 6),
              (-LN2_HALF, LN2_HALF), {"f32": range(5), "f64": range(10)}),
    # log1p(f) = f - f**2/2 + s*(f**2/2 + z*P(z)),  s = f/(2+f), z = s**2
    "log": (_regular(lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2) / z, mp.mpf(2) / 3),
            (0, LOG_Z), {"f32": range(3), "f64": range(8)}),
    # sin(r) = r + r**3 * P(r**2)
    "sin": (_regular(lambda z: (mp.sin(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3,
                     -mp.mpf(1) / 6), (0, PIO4 ** 2), {"f32": range(3), "f64": range(6)}),
    # cos(r) = 1 - r**2/2 + r**4 * P(r**2)
    "cos": (_regular(lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z ** 2, mp.mpf(1) / 24),
            (0, PIO4 ** 2), {"f32": range(3), "f64": range(6)}),
    # erf(x) = x * P(x**2) for |x| < 1
    "erf_small": (_regular(lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z), 2 / mp.sqrt(mp.pi)),
                  (0, 1), {"f32": range(7), "f64": range(12)}),
}
# erf(x) = 1 - exp(-x*x) * P(v - center) for 1 <= x < the saturation point (where erf
# rounds to 1), with v = 1/x; float64 splits the range at x = 2.5 and uses v = x below it
# (erfc(x)*exp(x*x) is entire in x, but has an essential singularity at 1/x = 0).
# Entries: (name, dtype, v -> target, interval of v, center, powers).
_TAIL_X = lambda x: mp.erfc(x) * mp.exp(x ** 2)
_TAIL_T = lambda t: _TAIL_X(1 / t)
ERF_TAIL = [("erf_tail", "f32", _TAIL_T, (mp.mpf(1) / 4, 1), mp.mpf("0.625"), range(10)),
            ("erf_tail_near", "f64", _TAIL_X, (1, mp.mpf("2.5")), mp.mpf("1.75"), range(22)),
            ("erf_tail_far", "f64", _TAIL_T, (mp.mpf(1) / 6, mp.mpf("0.4")), mp.mpf("0.28"),
             range(16))]


def _emit(name, dtype, coeffs, err):
    cast = np.float32 if dtype == "f32" else np.float64
    values = ", ".join(repr(float(cast(float(c)))) for c in coeffs)
    print(f"    ({name!r}, {dtype!r}): ({values}),  # max rel err 2**{float(mp.log(err, 2)):.1f}")


def main(names):
    for name, (func, (a, b), degrees) in FITS.items():
        if names and name not in names:
            continue
        for dtype, powers in degrees.items():
            coeffs, err = remez(func, a, b, list(powers))
            _emit(name, dtype, coeffs, err)
    for name, dtype, func, (a, b), center, powers in ERF_TAIL:
        if not names or name in names:
            coeffs, err = remez(func, a, b, list(powers), center=center)
            _emit(name, dtype, coeffs, err)


if __name__ == "__main__":
    main(sys.argv[1:])
